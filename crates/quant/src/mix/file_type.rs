//! The file types `llama-quantize` takes (`llama_ftype`): their names, their ids as
//! `general.file_type` stores them, and the block type each starts every matrix from.

use rullama_gguf::GgmlType;

/// A `llama-quantize` file type whose tensors this crate can produce: every ftype of its
/// list except the i-quants, the ternary and 1-/2-bit types, MXFP4 and Q2_K_S (which needs an
/// importance matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// `ALL_F32`: every matrix F32.
    F32,
    /// `MOSTLY_F16`.
    F16,
    /// `MOSTLY_BF16`.
    Bf16,
    /// `MOSTLY_Q4_0` (its LM head Q6_K, as every quantized ftype but Q8_0).
    Q4_0,
    /// `MOSTLY_Q4_1`.
    Q4_1,
    /// `MOSTLY_Q5_0`.
    Q5_0,
    /// `MOSTLY_Q5_1`.
    Q5_1,
    /// `MOSTLY_Q8_0`.
    Q8_0,
    /// `MOSTLY_Q2_K`.
    Q2K,
    /// `MOSTLY_Q3_K_S`.
    Q3KS,
    /// `MOSTLY_Q3_K_M`.
    Q3KM,
    /// `MOSTLY_Q3_K_L`.
    Q3KL,
    /// `MOSTLY_Q4_K_S`.
    Q4KS,
    /// `MOSTLY_Q4_K_M`.
    Q4KM,
    /// `MOSTLY_Q5_K_S`.
    Q5KS,
    /// `MOSTLY_Q5_K_M`.
    Q5KM,
    /// `MOSTLY_Q6_K`.
    Q6K,
}

/// `llama-quantize`'s aliases: a k-quant without a size is its `_M` mix.
const ALIASES: [(&str, FileType); 3] = [
    ("Q3_K", FileType::Q3KM),
    ("Q4_K", FileType::Q4KM),
    ("Q5_K", FileType::Q5KM),
];

impl FileType {
    /// Every file type, in `llama-quantize`'s list order.
    pub const ALL: [FileType; 17] = [
        FileType::Q4_0,
        FileType::Q4_1,
        FileType::Q5_0,
        FileType::Q5_1,
        FileType::Q2K,
        FileType::Q3KS,
        FileType::Q3KM,
        FileType::Q3KL,
        FileType::Q4KS,
        FileType::Q4KM,
        FileType::Q5KS,
        FileType::Q5KM,
        FileType::Q6K,
        FileType::Q8_0,
        FileType::F16,
        FileType::Bf16,
        FileType::F32,
    ];

    /// Its name in `llama-quantize`'s list (`Q4_K_M`).
    pub fn name(self) -> &'static str {
        match self {
            FileType::F32 => "F32",
            FileType::F16 => "F16",
            FileType::Bf16 => "BF16",
            FileType::Q4_0 => "Q4_0",
            FileType::Q4_1 => "Q4_1",
            FileType::Q5_0 => "Q5_0",
            FileType::Q5_1 => "Q5_1",
            FileType::Q8_0 => "Q8_0",
            FileType::Q2K => "Q2_K",
            FileType::Q3KS => "Q3_K_S",
            FileType::Q3KM => "Q3_K_M",
            FileType::Q3KL => "Q3_K_L",
            FileType::Q4KS => "Q4_K_S",
            FileType::Q4KM => "Q4_K_M",
            FileType::Q5KS => "Q5_K_S",
            FileType::Q5KM => "Q5_K_M",
            FileType::Q6K => "Q6_K",
        }
    }

    /// `llama_ftype`, the value of `general.file_type`.
    pub fn id(self) -> u32 {
        match self {
            FileType::F32 => 0,
            FileType::F16 => 1,
            FileType::Q4_0 => 2,
            FileType::Q4_1 => 3,
            FileType::Q8_0 => 7,
            FileType::Q5_0 => 8,
            FileType::Q5_1 => 9,
            FileType::Q2K => 10,
            FileType::Q3KS => 11,
            FileType::Q3KM => 12,
            FileType::Q3KL => 13,
            FileType::Q4KS => 14,
            FileType::Q4KM => 15,
            FileType::Q5KS => 16,
            FileType::Q5KM => 17,
            FileType::Q6K => 18,
            FileType::Bf16 => 32,
        }
    }

    /// The file type a name or id picks, as `llama-quantize` parses its TYPE argument: a name
    /// of [`FileType::ALL`] in any case, an alias (`Q4_K` is `Q4_K_M`), or the id.
    pub fn parse(s: &str) -> Option<FileType> {
        let upper = s.to_ascii_uppercase();
        let named = FileType::ALL.into_iter().find(|t| t.name() == upper);
        let alias = || ALIASES.iter().find(|(a, _)| *a == upper).map(|&(_, t)| t);
        let by_id = || {
            let id: u32 = s.parse().ok()?;
            FileType::ALL.into_iter().find(|t| t.id() == id)
        };
        named.or_else(alias).or_else(by_id)
    }

    /// The names [`FileType::parse`] takes, aliases last, comma-separated (for errors and help).
    pub fn names() -> String {
        let names = FileType::ALL.map(FileType::name);
        let aliases = ALIASES.map(|(a, _)| a);
        names
            .into_iter()
            .chain(aliases)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The type every quantizable matrix starts from (`llama_ftype_get_default_type`), before
    /// the mix's rules and the fallbacks for short rows.
    pub fn default_type(self) -> GgmlType {
        match self {
            FileType::F32 => GgmlType::F32,
            FileType::F16 => GgmlType::F16,
            FileType::Bf16 => GgmlType::Bf16,
            FileType::Q4_0 => GgmlType::Q4_0,
            FileType::Q4_1 => GgmlType::Q4_1,
            FileType::Q5_0 => GgmlType::Q5_0,
            FileType::Q5_1 => GgmlType::Q5_1,
            FileType::Q8_0 => GgmlType::Q8_0,
            FileType::Q2K => GgmlType::Q2K,
            FileType::Q3KS | FileType::Q3KM | FileType::Q3KL => GgmlType::Q3K,
            FileType::Q4KS | FileType::Q4KM => GgmlType::Q4K,
            FileType::Q5KS | FileType::Q5KM => GgmlType::Q5K,
            FileType::Q6K => GgmlType::Q6K,
        }
    }
}

impl std::fmt::Display for FileType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_ids_parse() {
        for t in FileType::ALL {
            assert_eq!(FileType::parse(t.name()), Some(t));
            assert_eq!(FileType::parse(&t.name().to_lowercase()), Some(t));
            assert_eq!(FileType::parse(&t.id().to_string()), Some(t));
        }
        assert_eq!(FileType::parse("q4_k"), Some(FileType::Q4KM));
        assert_eq!(FileType::parse("Q3_K"), Some(FileType::Q3KM));
        // Q2_K_S needs an importance matrix; 19 is IQ2_XXS; 4 was retired.
        for unknown in ["Q2_K_S", "IQ4_XS", "19", "4", "", "Q4_K_MM"] {
            assert_eq!(FileType::parse(unknown), None, "{unknown}");
        }
    }
}
