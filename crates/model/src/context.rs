//! How large a context a session can have: its KV cache's size in checked arithmetic, what
//! bounds it, and how many positions would fit. A context too large for the machine is a
//! [`ModelError::ContextTooLarge`] before anything is allocated, never an allocation that
//! aborts the process or a size that wraps around.

use std::fmt;

use crate::backend::KvCacheSpec;
use crate::error::ModelError;
use crate::validate::MAX_CTX;

impl KvCacheSpec {
    /// Bytes one position takes over every layer's K and V, at `elem_bytes` an element;
    /// `None` past `u64`.
    pub fn bytes_per_position(&self, elem_bytes: u64) -> Option<u64> {
        self.layers.iter().try_fold(0u64, |total, l| {
            let width = l.head_dim_k.checked_add(l.head_dim_v)?;
            let elems = u64::try_from(l.n_head_kv.checked_mul(width)?).ok()?;
            total.checked_add(elems.checked_mul(elem_bytes)?)
        })
    }

    /// Bytes of the whole cache (`n_ctx` positions), `None` past `u64`.
    pub fn bytes(&self, elem_bytes: u64) -> Option<u64> {
        let n = u64::try_from(self.n_ctx).ok()?;
        self.bytes_per_position(elem_bytes)?.checked_mul(n)
    }
}

/// What a KV cache did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    /// The host memory the operating system says is available (bytes).
    HostAvailable(u64),
    /// The host's allocator refused the cache (its size was not known to be too large).
    HostAllocation,
    /// The device's largest buffer binding (bytes), which one layer's K (or V) must fit.
    DeviceBinding(u64),
}

impl fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MemoryLimit::HostAvailable(b) => {
                write!(f, "the {} of memory available", human_bytes(b))
            }
            MemoryLimit::HostAllocation => write!(f, "what the host could allocate"),
            MemoryLimit::DeviceBinding(b) => write!(
                f,
                "the GPU's largest buffer binding ({}) for one layer's K or V",
                human_bytes(b)
            ),
        }
    }
}

/// The error for a cache of `spec` that does not fit `limit`; `per_unit` and `budget` give
/// the positions that would (`budget / per_unit`, rounded down to a multiple of `granule`).
pub(crate) fn too_large(
    spec: &KvCacheSpec,
    bytes: Option<u64>,
    limit: MemoryLimit,
    fit: Option<(u64, u64, usize)>,
) -> ModelError {
    let fits = fit.and_then(|(per_unit, budget, granule)| {
        let n = budget.checked_div(per_unit)?;
        let n = usize::try_from(n).unwrap_or(MAX_CTX).min(MAX_CTX);
        Some(n - n % granule.max(1))
    });
    ModelError::ContextTooLarge {
        n_ctx: spec.n_ctx,
        bytes,
        limit,
        fits,
    }
}

/// `bytes` in binary units, as a message shows them (`4.19 TiB`).
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// The needed size of [`ModelError::ContextTooLarge`], in words.
pub(crate) fn needed_text(bytes: &Option<u64>) -> String {
    match bytes {
        Some(b) => human_bytes(*b),
        None => "more bytes than 64 bits count".into(),
    }
}

/// What fits, for [`ModelError::ContextTooLarge`].
pub(crate) fn fits_text(fits: &Option<usize>) -> String {
    match fits {
        Some(0) => "; not even one position fits".into(),
        Some(n) => format!("; at most {n} positions fit"),
        None => "; a smaller context may fit".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::KvLayerSpec;

    fn spec(n_ctx: usize, n_layer: usize) -> KvCacheSpec {
        let layer = KvLayerSpec {
            n_head_kv: 2,
            head_dim_k: 64,
            head_dim_v: 64,
        };
        KvCacheSpec {
            n_ctx,
            layers: vec![layer; n_layer],
        }
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(spec(10, 3).bytes_per_position(4), Some(3 * 2 * 128 * 4));
        assert_eq!(spec(10, 3).bytes(4), Some(10 * 3 * 2 * 128 * 4));
        assert_eq!(spec(usize::MAX, 3).bytes(4), None);
        let wide = KvCacheSpec {
            n_ctx: 1,
            layers: vec![
                KvLayerSpec {
                    n_head_kv: usize::MAX,
                    head_dim_k: 2,
                    head_dim_v: 2,
                };
                1
            ],
        };
        assert_eq!(wide.bytes_per_position(4), None);
    }

    #[test]
    fn the_error_says_what_fits() {
        let s = spec(1 << 30, 2);
        let err = too_large(
            &s,
            s.bytes(4),
            MemoryLimit::HostAvailable(1 << 30),
            Some((2048, 1 << 30, 1)),
        );
        assert_eq!(
            err.to_string(),
            "a context of 1073741824 positions needs 2.00 TiB of KV cache, more than the \
             1.00 GiB of memory available; at most 524288 positions fit"
        );
        let err = too_large(
            &s,
            None,
            MemoryLimit::DeviceBinding(1 << 27),
            Some((4096, 1 << 27, 16)),
        );
        assert!(
            err.to_string().contains("at most 32768 positions fit"),
            "{err}"
        );
        assert_eq!(human_bytes(999), "999 B");
    }
}
