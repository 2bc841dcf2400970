//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! OOPSLA 2014): 64 bits of state, passes BigCrush, a few lines. A sampler needs a small,
//! seedable, reproducible stream, not a cryptographic one, and the crate takes no RNG
//! dependency. llama.cpp uses `std::mt19937`; matching its bit stream is not a goal (its
//! `uniform_real_distribution` differs between C++ standard libraries anyway).

use std::hash::{BuildHasher, Hasher};

/// The seed that means "pick one at random", as `LLAMA_DEFAULT_SEED` (0xFFFFFFFF) in llama.cpp.
pub const RANDOM_SEED: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub(super) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) for the draw: the top 24 bits, so every value is a multiple of 2^-24
    /// and exact in f32 as well as f64: the GPU draw (f32 parameters) receives the very number
    /// the CPU draw uses.
    pub(super) fn next_unit24(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in [0, 1): the top 53 bits, so every value is an exact multiple of 2^-53 and
    /// 1.0 is never returned (the draw relies on `u < 1`).
    pub(super) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The 64-bit state for a user seed; [`RANDOM_SEED`] draws one from the OS-seeded keys std
/// gives every `RandomState` (no extra dependency, different on every call).
pub(super) fn resolve_seed(seed: u32) -> u64 {
    if seed == RANDOM_SEED {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    } else {
        u64::from(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_splitmix64() {
        // First outputs of the reference C implementation seeded with 0.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn unit_floats_stay_in_range() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..10_000 {
            let u = rng.next_f64();
            assert!((0.0..1.0).contains(&u));
            let v = rng.next_unit24();
            assert!((0.0..1.0).contains(&v) && (v * 16_777_216.0).fract() == 0.0);
        }
    }

    #[test]
    fn fixed_seeds_are_kept_random_seed_is_not() {
        assert_eq!(resolve_seed(42), 42);
        // Two random resolutions colliding has probability 2^-64.
        assert_ne!(resolve_seed(RANDOM_SEED), resolve_seed(RANDOM_SEED));
    }
}
