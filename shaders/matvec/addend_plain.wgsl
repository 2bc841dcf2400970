// The addend of a norm input (matvec/x_norm.wgsl) as it is: a' = a (Llama's block, whose
// residual op has no norm of its own operand).

fn addend_begin(tid: u32) {}

// a'[4 k .. 4 k + 4] (k: a's vec4 index; j: the gains' index of the same inputs).
fn addend4(k: u32, j: u32) -> vec4<f32> {
    return a[k];
}
