//! The per-tensor rules of `src/llama-quant.cpp`, one function each: which tensors may be
//! quantized at all (`tensor_allows_quantization`), what category a name falls in
//! (`tensor_get_category`), the type a mix gives a category (`llama_tensor_get_type_impl`,
//! restricted to the ftypes of [`FileType`] and no importance matrix), and the fallback for
//! rows that are not whole blocks (`tensor_type_fallback`).

use rullama_gguf::GgmlType;

use super::FileType;

/// A tensor's category, by name (`tensor_category`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Category {
    TokenEmbd,
    AttnQ,
    AttnV,
    AttnK,
    AttnQkv,
    AttnKvB,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

impl Category {
    /// `tensor_get_category`: exact names for the embeddings and the LM head, substrings for
    /// the rest, tested in llama.cpp's order.
    pub(super) fn of(name: &str) -> Category {
        use Category::*;
        if name == "output.weight" {
            return Output;
        }
        if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
            return TokenEmbd;
        }
        let table = [
            ("attn_qkv.weight", AttnQkv),
            ("attn_kv_b.weight", AttnKvB),
            ("attn_v.weight", AttnV),
            ("attn_k.weight", AttnK),
            ("attn_q.weight", AttnQ),
            ("attn_output.weight", AttnOutput),
            ("ffn_up", FfnUp),
            ("ffn_gate", FfnGate),
            ("ffn_down", FfnDown),
        ];
        table
            .into_iter()
            .find(|(s, _)| name.contains(s))
            .map_or(Other, |(_, c)| c)
    }

    /// `category_is_attn_v`: the tensors that carry the values, which the mixes treat alike.
    pub(super) fn is_attn_v(self) -> bool {
        matches!(
            self,
            Category::AttnV | Category::AttnQkv | Category::AttnKvB
        )
    }
}

/// Name parts of tensors llama.cpp never quantizes: norms, MoE routers, tiny or
/// position-like matrices, and multimodal parts (`tensor_allows_quantization`).
const NEVER_QUANTIZED: [&str; 35] = [
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
];

/// GGML's `ggml_n_dims`: trailing dimensions of 1 do not count, and a scalar has one.
fn n_dims(dims: &[u64]) -> usize {
    dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1)
}

/// Whether llama-quantize may change the type of tensor `name` of shape `dims`: a matrix
/// (2-D or 3-D) whose name ends in `weight` and contains none of [`NEVER_QUANTIZED`], nor is
/// the position embeddings or token types (BERT; llama.cpp compares these two whole, with
/// names that are the same in every architecture). The others are copied as they are.
pub(super) fn allows_quantization(name: &str, dims: &[u64]) -> bool {
    if n_dims(dims) < 2 || !name.ends_with("weight") {
        return false;
    }
    if name == "position_embd.weight" || name == "token_types.weight" {
        return false;
    }
    !NEVER_QUANTIZED.iter().any(|p| name.contains(p))
}

/// What the rules read about the model besides the tensor itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct Context<'a> {
    pub arch: &'a str,
    /// `n_head / n_head_kv` of layer 0 (0 when there are no KV heads), `n_gqa()`.
    pub n_gqa: usize,
    pub n_expert: usize,
    /// llama.cpp's `LLM_TYPE_70B` as its quantize helpers infer it: `llama` with 80 layers and
    /// grouped KV heads.
    pub is_70b: bool,
    /// No `output.weight`: the token embedding is the LM head too.
    pub tied: bool,
}

/// `use_more_bits`: the first and last eighth of the layers, and every third between. C's
/// `%` truncates towards zero as Rust's does, so a negative difference never gives 2.
pub(super) fn use_more_bits(i_layer: usize, n_layer: usize) -> bool {
    let (i, n) = (i_layer as i64, n_layer as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// `llama_tensor_get_type_impl` for the ftypes of [`FileType`] without an importance matrix:
/// the type of a tensor of category `cat` whose rows hold `n_cols` values, starting from
/// `default`. `layer` is `(i, n)` of the counters llama.cpp keeps for the category (the
/// attn_v count for values, the layer and layer count for the FFN matrices).
pub(super) fn mix_type(
    ftype: FileType,
    default: GgmlType,
    cat: Category,
    n_cols: u64,
    (i, n): (usize, usize),
    cx: Context<'_>,
) -> GgmlType {
    use FileType as F;
    use GgmlType as T;
    let falcon = cx.arch == "falcon";
    let is = |set: &[FileType]| set.contains(&ftype);
    if cat == Category::Output || (cx.tied && cat == Category::TokenEmbd) {
        // The LM head (and the embedding that is one): Q6_K unless the mix is Q8_0, Q8_0
        // where its rows are not whole blocks of the default type.
        return if falcon || !n_cols.is_multiple_of(default.layout().block_size as u64) {
            T::Q8_0
        } else if default != T::Q8_0 {
            T::Q6K
        } else {
            default
        };
    }
    if cat == Category::TokenEmbd {
        return default;
    }
    if cat.is_attn_v() {
        let mut t = if ftype == F::Q2K {
            if cx.n_gqa >= 4 { T::Q4K } else { T::Q3K }
        } else if ftype == F::Q3KM {
            if i < 2 { T::Q5K } else { T::Q4K }
        } else if ftype == F::Q3KL {
            T::Q5K
        } else if is(&[F::Q4KM, F::Q5KM]) && use_more_bits(i, n) {
            T::Q6K
        } else if ftype == F::Q4KS && i < 4 {
            T::Q5K
        } else {
            default
        };
        // A 70B model's attn_v is 8x smaller than attn_q: more bits cost little there.
        if cx.is_70b && matches!(t, T::Q3K | T::Q4K) {
            t = T::Q5K;
        }
        if cx.n_expert == 8 {
            t = T::Q8_0;
        }
        return t;
    }
    match cat {
        Category::AttnK if cx.n_expert == 8 => T::Q8_0,
        Category::FfnDown => match ftype {
            F::Q2K => T::Q3K,
            F::Q3KM if i < n / 16 => T::Q5K,
            F::Q3KM if !falcon || use_more_bits(i, n) => T::Q4K,
            F::Q3KM => T::Q3K,
            F::Q3KL if falcon => T::Q4K,
            F::Q3KL => T::Q5K,
            F::Q4KM if falcon && i < n / 16 => T::Q6K,
            F::Q4KM if falcon && use_more_bits(i, n) => T::Q5K,
            F::Q4KM if falcon => T::Q4K,
            F::Q4KM | F::Q5KM if use_more_bits(i, n) => T::Q6K,
            F::Q4KS if !falcon && i < n / 8 => T::Q5K,
            _ => default,
        },
        Category::AttnOutput if falcon => match ftype {
            F::Q3KL => T::Q4K,
            _ => default,
        },
        Category::AttnOutput if cx.n_expert == 8 => {
            if is(&[F::Q2K, F::Q3KS, F::Q3KM, F::Q4KS, F::Q4KM]) {
                T::Q5K
            } else {
                default
            }
        }
        Category::AttnOutput => match ftype {
            F::Q2K => T::Q3K,
            F::Q3KM => T::Q4K,
            F::Q3KL => T::Q5K,
            _ => default,
        },
        Category::AttnQkv => match ftype {
            F::Q3KM | F::Q3KL => T::Q4K,
            F::Q4KM => T::Q5K,
            F::Q5KM => T::Q6K,
            _ => default,
        },
        _ => default,
    }
}

/// `tensor_type_fallback`: the type a row of `n_cols` values takes when `t`'s blocks do not
/// divide it: the k-quants fall back to a 32-weight format of about their size, F16 when
/// even 32 does not divide the row. `None` for the types llama.cpp has no fallback for (it
/// refuses the file).
pub(super) fn fallback(t: GgmlType, n_cols: u64) -> Option<GgmlType> {
    let fits = |t: GgmlType| n_cols.is_multiple_of(t.layout().block_size as u64);
    if fits(t) {
        return Some(t);
    }
    let to = match t {
        GgmlType::Q2K | GgmlType::Q3K => GgmlType::Q4_0,
        GgmlType::Q4K => GgmlType::Q5_0,
        GgmlType::Q5K => GgmlType::Q5_1,
        GgmlType::Q6K => GgmlType::Q8_0,
        _ => return None,
    };
    Some(if fits(to) { to } else { GgmlType::F16 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gemma-3-270m's Q4_K_M file (18 layers) has Q6_K ffn_down in exactly these layers.
    #[test]
    fn use_more_bits_matches_the_270m_file() {
        let layers: Vec<usize> = (0..18).filter(|&i| use_more_bits(i, 18)).collect();
        assert_eq!(layers, [0, 1, 4, 7, 10, 13, 15, 16, 17]);
    }

    #[test]
    fn fallbacks() {
        assert_eq!(fallback(GgmlType::Q4K, 640), Some(GgmlType::Q5_0));
        assert_eq!(fallback(GgmlType::Q6K, 640), Some(GgmlType::Q8_0));
        assert_eq!(fallback(GgmlType::Q5K, 640), Some(GgmlType::Q5_1));
        assert_eq!(fallback(GgmlType::Q2K, 96), Some(GgmlType::Q4_0));
        assert_eq!(fallback(GgmlType::Q4K, 2560), Some(GgmlType::Q4K));
        assert_eq!(fallback(GgmlType::Q4K, 48), Some(GgmlType::F16));
        assert_eq!(fallback(GgmlType::Q8_0, 48), None);
        assert_eq!(fallback(GgmlType::Q8_0, 64), Some(GgmlType::Q8_0));
    }

    #[test]
    fn never_quantized() {
        let m = [64, 64];
        assert!(allows_quantization("blk.0.attn_q.weight", &m));
        assert!(allows_quantization(
            "blk.0.ffn_down_exps.weight",
            &[64, 64, 8]
        ));
        assert!(!allows_quantization("blk.0.attn_q.weight", &[64, 1]), "1-D");
        assert!(!allows_quantization("blk.0.attn_q.bias", &m));
        assert!(!allows_quantization("blk.0.attn_q_norm.weight", &m));
        assert!(!allows_quantization("blk.0.ffn_gate_inp.weight", &m));
        assert!(!allows_quantization("position_embd.weight", &m));
        assert!(!allows_quantization("v.position_embd.weight", &m));
        assert!(!allows_quantization("token_types.weight", &m));
    }

    #[test]
    fn categories() {
        assert_eq!(Category::of("output.weight"), Category::Output);
        assert_eq!(Category::of("token_embd.weight"), Category::TokenEmbd);
        assert_eq!(Category::of("blk.3.attn_v.weight"), Category::AttnV);
        assert_eq!(
            Category::of("blk.3.ffn_down_exps.weight"),
            Category::FfnDown
        );
        assert_eq!(Category::of("blk.3.attn_q_norm.weight"), Category::Other);
        assert_eq!(Category::of("output_norm.weight"), Category::Other);
    }
}
