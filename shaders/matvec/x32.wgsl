// The 32 inputs of one 32-weight block (4-bit formats with one lane per block: Q4_0, Q4_1,
// Q5_0), loaded once for the R rows: lo[k] = x[4k ..], hi[k] = x[16 + 4k ..], and their sum
// (for formats with an offset term, d * sum q x + m * sum x).
struct PartX {
    lo: array<vec4<f32>, 4>,
    hi: array<vec4<f32>, 4>,
    sum: f32,
}

fn part_x(part: u32, xb: u32) -> PartX {
    var v: PartX;
    var s = vec4<f32>(0.0);
    for (var k = 0u; k < 4u; k++) {
        v.lo[k] = x4(xb + 4u * k);
        v.hi[k] = x4(xb + 16u + 4u * k);
        s += v.lo[k] + v.hi[k];
    }
    v.sum = dot(s, vec4<f32>(1.0));
    return v;
}
