// The bindings and overrides of the rotating decode attention's query hooks
// (attention/q_rope.wgsl, attention/q_rope_lanes.wgsl): the caches read-write (the hook
// stores the token's k and v), the token's k and v rows (binding qv holds q; k_src and v_src
// may be the same buffer), the RoPE frequencies, the per-head norm gains of q and k, and
// NEOX (pairs (j, j + n_rot/2) or (2j, 2j + 1)) and NORM (1: the heads carry norms).

@group(0) @binding(2) var<storage, read_write> kc: array<KvWord>;
@group(0) @binding(3) var<storage, read_write> vc: array<KvWord>;
@group(0) @binding(6) var<storage, read> k_src: array<f32>;
@group(0) @binding(7) var<storage, read> v_src: array<f32>;
@group(0) @binding(8) var<storage, read> freqs: array<f32>;
@group(0) @binding(9) var<storage, read> wq: array<f32>;
@group(0) @binding(10) var<storage, read> wk: array<f32>;

override NEOX: u32 = 1u;
override NORM: u32 = 1u;
