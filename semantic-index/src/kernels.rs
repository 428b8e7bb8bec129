//! Distance kernels, dispatched once per process to the best instruction set present: AVX-512
//! (x86-64-v4), AVX2 with FMA (x86-64-v3), or a portable kernel that the compiler vectorizes for
//! the baseline target.
//!
//! Both the exact scan (`index::dot`) and the HNSW distance (`index::graph::distance`) score
//! through [`dot`], so the two indexes keep ranking with identical numbers.
//!
//! **Why `pulp`.** The workspace forbids `unsafe`, so the intrinsics cannot be written here. Of the
//! crates that offer safe SIMD with run-time dispatch: `pulp` (maintained, the SIMD layer of the
//! `faer` linear-algebra crate) gives a safe `Simd` trait whose closures are compiled once per
//! instruction set under `#[target_feature]` and selected by a detected `Arch`, with masked partial
//! loads for the tail; it is pure Rust, so the kernel inlines into the target-feature function and
//! needs no C toolchain. `simsimd` would add a C build and a foreign call per distance (the HNSW
//! walk calls it millions of times per second) and answers in f64; `wide` + `multiversion` would
//! need `multiversion`'s generated dispatch code, which expands to `unsafe` blocks that the
//! workspace's `forbid(unsafe_code)` refuses.
//!
//! `MEMORY_SIMD_KERNEL` (`avx512`, `avx2+fma` or `portable`) caps the level at start-up, so one
//! binary can be measured on each kernel; a level the CPU lacks falls back to the best it has.
//!
//! [`dot_i8`] is the int8 kernel of the compact vectors (`index::quantized`): codes widen to i32
//! and sum exactly, so every level gives the very same integer (the property test asserts
//! equality, with no tolerance). Its SIMD levels run the portable loop inside `pulp`'s
//! target-feature functions, where the compiler vectorizes it with that level's widening
//! multiply-adds (`vpmaddwd`); a hand-written `Simd` body would need integer widening operations
//! that `pulp`'s portable trait does not offer.
//!
//! Numerics: every f32 kernel sums in f32 with several independent accumulators, in a different order
//! from the others, so results differ from the portable kernel only by rounding (the property test
//! in this module states the bound).

use std::sync::OnceLock;

use pulp::{Simd, WithSimd};

/// The instruction set a kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelLevel {
    /// x86-64-v4: AVX-512 F/BW/CD/DQ/VL, 16 f32 lanes.
    Avx512,
    /// x86-64-v3: AVX2 with FMA, 8 f32 lanes.
    Avx2Fma,
    /// No run-time extension: the portable kernel, vectorized by the compiler for the build target.
    Portable,
}

impl KernelLevel {
    /// A short name for reports (`avx512`, `avx2+fma`, `portable`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Avx512 => "avx512",
            Self::Avx2Fma => "avx2+fma",
            Self::Portable => "portable",
        }
    }
}

/// The environment variable that caps the dispatched level (see the module docs).
pub const KERNEL_ENV: &str = "MEMORY_SIMD_KERNEL";

/// What this process dispatches to, detected on first use: the CPU's features do not change while
/// it runs, and detecting once keeps the per-call cost at one load and one branch.
#[derive(Clone, Copy)]
enum Dispatch {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    V4(pulp::x86::V4),
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    V3(pulp::x86::V3),
    Portable,
}

impl Dispatch {
    fn detect() -> Self {
        let cap = std::env::var(KERNEL_ENV).ok();
        let allowed = |level: KernelLevel| match cap.as_deref() {
            Some("portable") => level == KernelLevel::Portable,
            Some("avx2+fma") => level != KernelLevel::Avx512,
            _ => true,
        };
        Self::best(allowed)
    }

    fn best(allowed: impl Fn(KernelLevel) -> bool) -> Self {
        [KernelLevel::Avx512, KernelLevel::Avx2Fma]
            .into_iter()
            .filter(|level| allowed(*level))
            .find_map(Self::at)
            .unwrap_or(Self::Portable)
    }

    /// The kernels of `level`; `None` when this CPU cannot run it.
    fn at(level: KernelLevel) -> Option<Self> {
        match level {
            KernelLevel::Portable => Some(Self::Portable),
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            KernelLevel::Avx512 => pulp::x86::V4::try_new().map(Self::V4),
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            KernelLevel::Avx2Fma => pulp::x86::V3::try_new().map(Self::V3),
            #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
            _ => None,
        }
    }

    fn level(self) -> KernelLevel {
        match self {
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Self::V4(_) => KernelLevel::Avx512,
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Self::V3(_) => KernelLevel::Avx2Fma,
            Self::Portable => KernelLevel::Portable,
        }
    }

    #[inline]
    fn dot(self, left: &[f32], right: &[f32]) -> f32 {
        match self {
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Self::V4(simd) => Simd::vectorize(simd, Dot { left, right }),
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Self::V3(simd) => Simd::vectorize(simd, Dot { left, right }),
            Self::Portable => dot_portable(left, right),
        }
    }

    #[inline]
    fn dot_i8(self, left: &[i8], right: &[i8]) -> i32 {
        match self {
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Self::V4(simd) => Simd::vectorize(simd, DotI8 { left, right }),
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            Self::V3(simd) => Simd::vectorize(simd, DotI8 { left, right }),
            Self::Portable => dot_i8_portable(left, right),
        }
    }
}

fn dispatch() -> Dispatch {
    static DISPATCH: OnceLock<Dispatch> = OnceLock::new();
    *DISPATCH.get_or_init(Dispatch::detect)
}

/// The instruction set [`dot`] runs on in this process.
pub fn active_level() -> KernelLevel {
    dispatch().level()
}

/// Every level this CPU can run, best first ([`KernelLevel::Portable`] always last).
pub fn available_levels() -> Vec<KernelLevel> {
    let mut levels = Vec::new();
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        if pulp::x86::V4::try_new().is_some() {
            levels.push(KernelLevel::Avx512);
        }
        if pulp::x86::V3::try_new().is_some() {
            levels.push(KernelLevel::Avx2Fma);
        }
    }
    levels.push(KernelLevel::Portable);
    levels
}

/// The best level this CPU can run, whatever [`KERNEL_ENV`] says.
pub fn best_level() -> KernelLevel {
    Dispatch::best(|_| true).level()
}

/// The dot product of two slices, over their common length, on the best instruction set present.
#[inline]
pub fn dot(left: &[f32], right: &[f32]) -> f32 {
    dispatch().dot(left, right)
}

/// [`dot`] on a given level; `None` when this CPU cannot run it. For tests and benchmarks that
/// compare the kernels with one another.
pub fn dot_at(level: KernelLevel, left: &[f32], right: &[f32]) -> Option<f32> {
    Some(Dispatch::at(level)?.dot(left, right))
}

/// Longest int8 slices whose dot product cannot overflow i32: every product is at most
/// 128 * 128 = 2^14 in magnitude, so 2^17 of them stay below 2^31.
pub const MAX_I8_DOT_LEN: usize = 1 << 17;

/// The dot product of two int8 code slices over their common length, summed exactly in i32, on the
/// best instruction set present. Exact for slices of at most [`MAX_I8_DOT_LEN`] codes (the
/// quantized rows refuse longer vectors); longer ones wrap instead of panicking.
#[inline]
pub fn dot_i8(left: &[i8], right: &[i8]) -> i32 {
    dispatch().dot_i8(left, right)
}

/// [`dot_i8`] on a given level; `None` when this CPU cannot run it.
pub fn dot_i8_at(level: KernelLevel, left: &[i8], right: &[i8]) -> Option<i32> {
    Some(Dispatch::at(level)?.dot_i8(left, right))
}

/// Rows ahead of the one being scored whose lines the HNSW walk requests with [`prefetch`]
/// (`index::graph`'s module docs give the measurements that chose it).
pub const PREFETCH_AHEAD: usize = 4;

/// Requests every cache line of `data` ahead of a read: `prefetcht0`, a hint that never faults
/// and changes no result, issued through the dispatched level's SSE token (`pulp` makes it a safe
/// call). Nothing on the portable level or off x86-64.
#[inline]
pub fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        const LINE: usize = 64;
        let sse = match dispatch() {
            Dispatch::V4(simd) => simd.sse,
            Dispatch::V3(simd) => simd.sse,
            Dispatch::Portable => return,
        };
        let start = data.as_ptr().cast::<i8>();
        for offset in (0..std::mem::size_of_val(data)).step_by(LINE) {
            sse._mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(start.wrapping_add(offset));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// The portable int8 kernel: products widened to i32, summed in order (integer sums are exact, so
/// the order does not matter below [`MAX_I8_DOT_LEN`]).
#[inline(always)]
pub fn dot_i8_portable(left: &[i8], right: &[i8]) -> i32 {
    left.iter().zip(right).fold(0i32, |sum, (l, r)| {
        sum.wrapping_add(i32::from(*l) * i32::from(*r))
    })
}

/// The int8 kernel under a level's target features: the portable loop, vectorized there.
struct DotI8<'a> {
    left: &'a [i8],
    right: &'a [i8],
}

impl WithSimd for DotI8<'_> {
    type Output = i32;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) -> i32 {
        dot_i8_portable(self.left, self.right)
    }
}

/// The portable kernel: eight accumulators, which the compiler maps onto the baseline target's
/// vector registers (SSE2 on x86-64) without any run-time feature.
pub fn dot_portable(left: &[f32], right: &[f32]) -> f32 {
    let len = left.len().min(right.len());
    let (left, right) = (&left[..len], &right[..len]);
    let mut sums = [0.0f32; 8];
    let left_chunks = left.chunks_exact(8);
    let right_chunks = right.chunks_exact(8);
    let left_rest = left_chunks.remainder();
    let right_rest = right_chunks.remainder();
    for (l, r) in left_chunks.zip(right_chunks) {
        for lane in 0..8 {
            sums[lane] += l[lane] * r[lane];
        }
    }
    let mut total: f32 = sums.iter().sum();
    for (l, r) in left_rest.iter().zip(right_rest) {
        total += l * r;
    }
    total
}

/// The SIMD kernel, compiled once per instruction set by `pulp`.
struct Dot<'a> {
    left: &'a [f32],
    right: &'a [f32],
}

impl WithSimd for Dot<'_> {
    type Output = f32;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> f32 {
        let len = self.left.len().min(self.right.len());
        let (left_head, left_tail) = S::as_simd_f32s(&self.left[..len]);
        let (right_head, right_tail) = S::as_simd_f32s(&self.right[..len]);
        // Four accumulators hide the FMA latency (4 cycles, two ports): one would serialise every
        // add on a single dependency chain.
        let zero = simd.splat_f32s(0.0);
        let mut sums = [zero; 4];
        let left_blocks = left_head.chunks_exact(4);
        let right_blocks = right_head.chunks_exact(4);
        let (left_rest, right_rest) = (left_blocks.remainder(), right_blocks.remainder());
        for (l, r) in left_blocks.zip(right_blocks) {
            for lane in 0..4 {
                sums[lane] = simd.mul_add_e_f32s(l[lane], r[lane], sums[lane]);
            }
        }
        for (lane, (l, r)) in left_rest.iter().zip(right_rest).enumerate() {
            sums[lane] = simd.mul_add_e_f32s(*l, *r, sums[lane]);
        }
        if !left_tail.is_empty() {
            // Masked loads read only the tail's floats; the lanes past it load as zero.
            let l = simd.partial_load_f32s(left_tail);
            let r = simd.partial_load_f32s(right_tail);
            sums[3] = simd.mul_add_e_f32s(l, r, sums[3]);
        }
        let total = simd.add_f32s(
            simd.add_f32s(sums[0], sums[1]),
            simd.add_f32s(sums[2], sums[3]),
        );
        simd.reduce_sum_f32s(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Lengths the property test draws from: the model's 384, lengths around each kernel's block
    /// boundaries (8, 16, 4×8, 4×16 floats), odd and prime lengths, and the empty slice.
    fn length() -> impl Strategy<Value = usize> {
        prop_oneof![
            Just(384usize),
            Just(0usize),
            0usize..=130,
            prop::sample::select(vec![
                1usize, 7, 9, 15, 17, 31, 33, 63, 65, 127, 129, 383, 385, 511, 767, 1021, 1536,
            ]),
        ]
    }

    fn pair() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
        length().prop_flat_map(|len| {
            (
                prop::collection::vec(-1.0f32..1.0, len),
                prop::collection::vec(-1.0f32..1.0, len),
            )
        })
    }

    proptest! {
        /// Tolerance: `2 * n * EPSILON * sum(|l_i * r_i|)` for length `n`. Whatever the order of
        /// its additions, a kernel's result lies within about `n * u * sum(|l_i * r_i|)` of the
        /// exact dot product (`u = EPSILON / 2`, the unit roundoff: at most `n - 1` roundings on
        /// any term's path through the sum, plus one for its product), so two kernels differ by
        /// at most `n * EPSILON * sum`; the factor 2 covers second-order terms. A kernel that
        /// drops or repeats an element is off by a whole product term, which is far past it
        /// for most draws (the integer test below catches it exactly).
        #[test]
        fn every_level_matches_the_portable_kernel((left, right) in pair()) {
            let expected = dot_portable(&left, &right);
            let magnitude: f32 = left.iter().zip(&right).map(|(l, r)| (l * r).abs()).sum();
            let tolerance = 2.0 * left.len() as f32 * f32::EPSILON * magnitude;
            for level in available_levels() {
                let got = dot_at(level, &left, &right).expect("an available level runs");
                prop_assert!(
                    (got - expected).abs() <= tolerance,
                    "{} gave {got}, portable {expected}, len {}, tolerance {tolerance}",
                    level.name(),
                    left.len()
                );
            }
            prop_assert_eq!(dot(&left, &right).to_bits(),
                dot_at(active_level(), &left, &right).expect("active level").to_bits());
        }
    }

    /// Small integers multiply and sum exactly in f32 whatever the order, so every kernel must give
    /// the very same number: this catches any element a kernel drops or counts twice, with no
    /// tolerance to hide it.
    #[test]
    fn integer_vectors_give_identical_results_on_every_level() {
        for len in [
            0usize, 1, 5, 8, 13, 16, 31, 64, 65, 100, 383, 384, 385, 1000,
        ] {
            let left: Vec<f32> = (0..len).map(|i| ((i * 7 + 3) % 17) as f32 - 8.0).collect();
            let right: Vec<f32> = (0..len).map(|i| ((i * 5 + 1) % 13) as f32 - 6.0).collect();
            let exact: f32 = left.iter().zip(&right).map(|(l, r)| l * r).sum();
            for level in available_levels() {
                assert_eq!(
                    dot_at(level, &left, &right),
                    Some(exact),
                    "{} at length {len}",
                    level.name()
                );
            }
        }
    }

    fn codes() -> impl Strategy<Value = (Vec<i8>, Vec<i8>)> {
        length().prop_flat_map(|len| {
            (
                prop::collection::vec(-127i8..=127, len),
                prop::collection::vec(any::<i8>(), len),
            )
        })
    }

    proptest! {
        /// Tolerance: none. Integer products and sums are exact below `MAX_I8_DOT_LEN`, so every
        /// level must give the portable kernel's very integer, and that integer must be the
        /// widened sum computed independently here in i64.
        #[test]
        fn every_level_gives_the_exact_int8_dot_product((left, right) in codes()) {
            let exact: i64 = left.iter().zip(&right).map(|(l, r)| i64::from(*l) * i64::from(*r)).sum();
            prop_assert_eq!(i64::from(dot_i8_portable(&left, &right)), exact);
            for level in available_levels() {
                let got = dot_i8_at(level, &left, &right).expect("an available level runs");
                prop_assert_eq!(i64::from(got), exact, "{} at length {}", level.name(), left.len());
            }
            prop_assert_eq!(i64::from(dot_i8(&left, &right)), exact);
        }
    }

    proptest! {
        /// A request for a slice's lines is only a hint: for any length and any start (mid-line
        /// included, the empty slice too) it panics on none and leaves every value and every
        /// kernel's result as it was.
        #[test]
        fn prefetching_a_slice_changes_no_value((left, right) in pair(), skip in 0usize..16) {
            let skip = skip.min(left.len());
            let before = (left.clone(), dot(&left, &right));
            prefetch(&left[skip..]);
            prefetch(&right);
            prefetch::<f32>(&[]);
            prop_assert_eq!(&left, &before.0);
            prop_assert_eq!(dot(&left, &right).to_bits(), before.1.to_bits());
        }
    }

    #[test]
    fn int8_extremes_sum_exactly_at_the_length_bound() {
        let left = vec![-128i8; MAX_I8_DOT_LEN - 1];
        let right = vec![-128i8; MAX_I8_DOT_LEN - 1];
        for level in available_levels() {
            assert_eq!(
                dot_i8_at(level, &left, &right).map(i64::from),
                Some((MAX_I8_DOT_LEN as i64 - 1) * 16_384),
                "{}",
                level.name()
            );
        }
    }

    #[test]
    fn slices_of_unequal_length_use_the_common_prefix() {
        let left = [1.0f32; 20];
        let right = [2.0f32; 17];
        for level in available_levels() {
            assert_eq!(dot_at(level, &left, &right), Some(34.0), "{}", level.name());
        }
    }

    #[test]
    fn the_best_level_is_the_first_available() {
        assert_eq!(best_level(), available_levels()[0]);
        assert_eq!(available_levels().last(), Some(&KernelLevel::Portable));
        assert!(available_levels().contains(&active_level()));
        if std::env::var_os(KERNEL_ENV).is_none() {
            assert_eq!(active_level(), best_level());
        }
    }
}
