// The q8 vector's rounding rule for one block of 32 inputs, shared by every kernel that
// writes a q8 vector (matvec/quantize_q8.wgsl, and residual_norm's q8 output,
// norm/q8_out.wgsl), so their words agree bit for bit. The layout is `ops::quantize`'s (the
// Rust module doc describes it once): in a vector of n inputs at word `at` of `q`, the first
// digits of inputs 4w .. 4w + 4 are word at + w, their second digits word at + n / 4 + w,
// and block b's scale d (f32 bits) word at + n / 2 + b.
//
// Rule: d = amax / 127 (amax = max |x_i| over the block), q1_i = round(x_i / d) clamped to
// [-127, 127], r_i = x_i - q1_i d and q2_i = round(254 r_i / d) clamped to [-127, 127]
// (round half to even); a block of zeros gets d = 0 and q1 = q2 = 0. |r_i| <= d / 2 up to the
// division's rounding, so the second clamp never acts and |x_i - x'_i| <= d / 508 up to a few
// roundings (`ops::quantize::rounding_bound` derives them).
//
// The including kernel declares `q: array<u32>` (read_write) and lays its lanes out so that
// lanes 8b .. 8b + 8 of the workgroup (b < 32) hold block b's inputs in order, 4 each: lane
// `lane` holds output word w, with w % 8 == lane % 8.

// Each lane's largest |x| over its 4 inputs.
var<workgroup> amax_part: array<f32, 256>;

// The amax of the block lane `lane` belongs to, v its 4 inputs (zeros for a lane past the
// vector: n is a multiple of 32, so a block's 8 lanes are all live or all past the end). It
// holds a barrier: every invocation calls it, in uniform control flow; a caller that calls it
// again must place a barrier between the calls (the reads here, the next writes).
fn q8_block_amax(v: vec4<f32>, lane: u32) -> f32 {
    let a = abs(v);
    amax_part[lane] = max(max(a.x, a.y), max(a.z, a.w));
    workgroupBarrier();
    let first = lane & ~7u;
    var amax = amax_part[first];
    for (var k = 1u; k < 8u; k++) {
        amax = max(amax, amax_part[first + k]);
    }
    return amax;
}

// Writes word w of the q8 vector of n inputs at word `at` of q: the two digits of its 4
// inputs v in a block of the given amax, and the block's scale where w is its first word.
fn q8_store(at: u32, n: u32, w: u32, v: vec4<f32>, amax: f32) {
    let d = amax / 127.0;
    // d = 0 only for a block of zeros (or one whose amax / 127 underflows): q1 = q2 = 0, no
    // 0 / 0.
    var q1 = vec4<f32>(0.0);
    var q2 = vec4<f32>(0.0);
    if d != 0.0 {
        q1 = clamp(round(v / d), vec4<f32>(-127.0), vec4<f32>(127.0));
        // The remainder, exact but for the product's and the difference's roundings.
        let r = v - q1 * d;
        q2 = clamp(round(254.0 * r / d), vec4<f32>(-127.0), vec4<f32>(127.0));
    }
    q[at + w] = pack4xI8(vec4<i32>(q1));
    q[at + n / 4u + w] = pack4xI8(vec4<i32>(q2));
    if (w & 7u) == 0u {
        q[at + n / 2u + w / 8u] = bitcast<u32>(d);
    }
}
