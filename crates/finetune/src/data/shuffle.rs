//! Seeded permutations, the same on every platform: SplitMix64 (64-bit integer arithmetic
//! only, as `crates/synth` uses for weights) and Fisher–Yates. Nothing here depends on a hash
//! map's order or a library's choice of generator, so a seed names the same order wherever
//! and with whatever build it runs, which resuming a run on another machine needs.

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose every seed starts a good
/// stream.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`bound` > 0), by the high half of a 64×64-bit product
    /// (Lemire); the bias is below 2⁻³² for any dataset size.
    pub fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }
}

/// A seed for stream `stream` of `seed` (an epoch, the eval split): one SplitMix64 step of the
/// pair, so that nearby seeds and streams start unrelated sequences.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    SplitMix64::new(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

/// A permutation of `0..n` drawn from `seed` (Fisher–Yates).
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // The first outputs for seed 0 of the reference C implementation (Vigna's
        // splitmix64.c), so the order does not depend on this file's arithmetic alone.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn permutations_are_permutations_and_depend_on_the_seed() {
        let a = permutation(100, 1);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_eq!(a, permutation(100, 1));
        assert_ne!(a, permutation(100, 2));
        assert_ne!(a, sorted);
        assert!(permutation(0, 1).is_empty());
        assert_eq!(permutation(1, 1), [0]);
    }
}
