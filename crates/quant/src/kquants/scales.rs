//! The scale searches llama.cpp's k-quant reference quantizers share, and the packed 6-bit
//! scale/min pairs of Q4_K and Q5_K.
//!
//! These are ports of `make_qx_quants`, `make_q3_quants` and `make_qkx2_quants` from
//! `ggml-quants.c`, restricted to the arguments the reference quantizers pass (no importance
//! weights), using GGML's `nearest_int` (round half to even) from `crate::num`. The float expressions keep GGML's operand order, because a search
//! that compares errors can flip a choice on a one-ulp difference, and then the bytes differ.

use crate::num::{f16_to_f32, f32_to_f16, nearest_int};

/// Values below this magnitude count as zero when a search looks for a scale (`GROUP_MAX_EPS`).
const GROUP_MAX_EPS: f32 = 1e-15;

/// The largest magnitude and the (signed) value that has it; the first one wins a tie, and an
/// all-zero (or all-NaN) slice gives zeros.
fn signed_max(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0_f32, 0.0_f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (amax, max)
}

/// Symmetric quantization of `x` to `[-nmax, nmax - 1]`, stored with an offset of `nmax` in
/// `levels`; returns the scale (which may be negative: it maps `-nmax` onto the value with the
/// largest magnitude). This is `make_qx_quants` with `rmse_type = 1` and no importance: start
/// from `-nmax / max`, refine the scale by least squares weighted by `x^2`, then try 18 nearby
/// grid densities and keep the one with the best weighted fit.
pub(super) fn make_qx_quants(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (amax, max) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let clamp = |v: f32| nearest_int(v).clamp(-nmax, nmax - 1);
    // The fit for a given grid density: sum w*x*l and sum w*l*l with w = x^2.
    let fit = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0_f32, 0.0_f32);
        for &v in x {
            let l = clamp(iscale * v) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let store = |iscale: f32, levels: &mut [i8]| {
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = (nmax + clamp(iscale * v)) as i8;
        }
    };

    let iscale = -(nmax as f32) / max;
    store(iscale, levels);
    let (sumlx, suml2) = fit(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        let iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = fit(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            store(iscale, levels);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Symmetric quantization for Q3_K: levels in `[-nmax, nmax - 1]` stored with offset `nmax`;
/// returns the scale. This is `make_q3_quants` with `do_rmse = true`: round at `-nmax / max`,
/// then up to five passes that move single levels when that improves the `x^2`-weighted
/// least-squares fit.
pub(super) fn make_q3_quants(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (amax, max) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0_f32, 0.0_f32);
    for (q, &v) in levels.iter_mut().zip(x) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *q = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (q, &v) in levels.iter_mut().zip(x) {
            let w = v * v;
            let old = *q as f32;
            let mut slx = sumlx - w * v * old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * old * old;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != *q as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for q in levels.iter_mut() {
        *q += nmax as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// The search grid of [`make_qkx2_quants`]: grid densities `nmax + rmin + rdelta * i` for
/// `i` in `0..=nstep`, and whether to score by absolute (`mad`) or squared error.
#[derive(Debug, Clone, Copy)]
pub(super) struct Qkx2Search {
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    pub mad: bool,
}

/// Asymmetric quantization `x ~ scale * l - min` with `l` in `[0, nmax]` and `min >= 0`;
/// returns `(scale, min)`. This is `make_qkx2_quants`: start from the min-max grid, then for
/// each density in `search` fit scale and offset by weighted least squares to the rounded
/// levels, and keep the fit with the smallest weighted error.
pub(super) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    levels: &mut [u8],
    search: Qkx2Search,
) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        min = if x[i] < min { x[i] } else { min };
        max = if x[i] > max { x[i] } else { max };
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    // The offset only ever lowers the grid: a block of positive values starts at zero.
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let level = |iscale: f32, v: f32, min: f32| nearest_int(iscale * (v - min)).clamp(0, nmax);
    let error = |scale: f32, min: f32, levels: &[u8]| {
        let mut err = 0.0_f32;
        for ((&l, &v), &w) in levels.iter().zip(x).zip(weights) {
            let diff = scale * l as f32 + min - v;
            err += w * if search.mad { diff.abs() } else { diff * diff };
        }
        err
    };

    let iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    for (q, &v) in levels.iter_mut().zip(x) {
        *q = level(iscale, v, min) as u8;
    }
    let mut best_error = error(scale, min, levels);
    let mut aux = [0u8; 32];
    let aux = &mut aux[..n];
    // As in GGML, each try grids from the best offset found so far, not from the data's min.
    for is in 0..=search.nstep {
        let iscale = (search.rmin + search.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0_f32, 0.0_f32, 0.0_f32);
        for ((q, &v), &w) in aux.iter_mut().zip(x).zip(weights) {
            let l = level(iscale, v, min);
            *q = l as u8;
            let l = l as f32;
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * v;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let cur_error = error(this_scale, this_min, aux);
            if cur_error < best_error {
                levels.copy_from_slice(aux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Scale and min of sub-block `j` (0..8) from the 12 packed bytes of Q4_K/Q5_K
/// (`get_scale_min_k4`): sub-blocks 0-3 keep their 6 bits in the low bits of bytes 0-3
/// (scales) and 4-7 (mins); sub-blocks 4-7 keep their low 4 bits in the nibbles of bytes
/// 8-11 and their top 2 bits in the spare top bits of bytes 0-7.
pub(super) fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        let sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        let m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        (sc, m)
    }
}

/// Scale and min of sub-block `j` of a Q4_K or Q5_K super-block (the fields they share), formed
/// as GGML forms them: `d * sc` and `dmin * m`.
pub(super) fn scale_min_k4(d: [u8; 2], dmin: [u8; 2], scales: &[u8; 12], j: usize) -> (f32, f32) {
    let (sc, m) = get_scale_min_k4(j, scales);
    (f16_to_f32(d) * sc as f32, f16_to_f32(dmin) * m as f32)
}

/// The 32 weights of sub-block `s` of a Q4_K or Q5_K super-block, `dl * q - ml` in GGML's
/// operation order, from its scale and min (`scale_min_k4`) and the level of weight `i`.
pub(super) fn decode_k4(
    (dl, ml): (f32, f32),
    level: impl Fn(usize) -> u8,
    s: usize,
    out: &mut [f32],
) {
    for (k, y) in out.iter_mut().enumerate() {
        *y = dl * level(32 * s + k) as f32 - ml;
    }
}

/// The eight 6-bit scales and eight 6-bit mins of the 12 packed bytes of a Q4_K or Q5_K
/// super-block, in sub-block order (what llama.cpp's `get_scale_min_k4` reads one at a time).
pub fn unpack_scale_min_k4(q: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for j in 0..8 {
        (scales[j], mins[j]) = get_scale_min_k4(j, q);
    }
    (scales, mins)
}

/// The inverse of llama.cpp's `get_scale_min_k4`: packs eight 6-bit scales and mins.
pub fn pack_scale_min_k4(scales: &[u8; 8], mins: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..8 {
        let (ls, lm) = (scales[j], mins[j]);
        if j < 4 {
            q[j] = ls;
            q[j + 4] = lm;
        } else {
            q[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            q[j - 4] |= (ls >> 4) << 6;
            q[j] |= (lm >> 4) << 6;
        }
    }
    q
}

/// A Q4_K or Q5_K super-block before its levels are bit-packed.
#[derive(Debug, Clone, Copy)]
pub(super) struct K4Quant {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    /// One level in `0..=nmax` per weight.
    pub levels: [u8; 256],
}

/// The scale and level choice that `quantize_row_q4_K_ref` and `quantize_row_q5_K_ref` share:
/// per 32-weight sub-block a [`make_qkx2_quants`] fit weighted by `rms + |x|`, then the
/// scales and mins rounded to 6 bits against the largest of each, then every level rounded
/// again against the scales as stored.
pub(super) fn quantize_k4(x: &[f32], nmax: i32, search: Qkx2Search) -> K4Quant {
    let mut levels = [0u8; 256];
    let mut scales = [0.0_f32; 8];
    let mut mins = [0.0_f32; 8];
    let (mut max_scale, mut max_min) = (0.0_f32, 0.0_f32);
    for (j, (x, levels)) in x
        .chunks_exact(32)
        .zip(levels.chunks_exact_mut(32))
        .enumerate()
    {
        let mut sum_x2 = 0.0_f32;
        for &v in x {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: [f32; 32] = std::array::from_fn(|l| av_x + x[l].abs());
        (scales[j], mins[j]) = make_qkx2_quants(nmax, x, &weights, levels, search);
        // Plain comparisons, not f32::max: they keep GGML's handling of NaN and -0.0.
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }

    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    // `as u8` before the clamp: C stores the int in a uint8_t first (wrapping), then clamps.
    let code = |inv: f32, v: f32| (nearest_int(inv * v) as u8).min(63);
    let packed = pack_scale_min_k4(
        &scales.map(|s| code(inv_scale, s)),
        &mins.map(|m| code(inv_min, m)),
    );
    let d = f32_to_f16(max_scale / 63.0);
    let dmin = f32_to_f16(max_min / 63.0);

    for (j, (x, levels)) in x
        .chunks_exact(32)
        .zip(levels.chunks_exact_mut(32))
        .enumerate()
    {
        let (dl, ml) = scale_min_k4(d, dmin, &packed, j);
        if dl == 0.0 {
            continue;
        }
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = nearest_int((v + ml) / dl).clamp(0, nmax) as u8;
        }
    }
    K4Quant {
        d,
        dmin,
        scales: packed,
        levels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_min_k4_round_trips() {
        let scales = [0, 1, 17, 63, 32, 5, 48, 63];
        let mins = [63, 2, 0, 31, 33, 62, 1, 16];
        let packed = pack_scale_min_k4(&scales, &mins);
        for j in 0..8 {
            assert_eq!(get_scale_min_k4(j, &packed), (scales[j], mins[j]));
        }
    }
}
