// What the training attention's programs share (attention/train_forward.wgsl,
// attention/train_backward_dq.wgsl, attention/train_backward_dkdv.wgsl and their tensor-core
// twins attention/train_*_coop.wgsl): the parameters (the WGSL twin of TrainAttentionParams),
// the visibility and score rules, and the (row, head) pairs of a kv head (the f32 kernels'
// tiles: attention/train_tiles.wgsl; the tensor-core ones tile in their own programs). Row i
// of the block sees key rows j with start[i] <= j <= i and, with a window w > 0, i - j < w.

struct Params {
    n: u32,
    n_head: u32,
    n_kv: u32,
    dk: u32,
    dv: u32,
    window: u32,
    scale: f32,
    softcap: f32,
    q_offset: u32,
    k_offset: u32,
    v_offset: u32,
    o_offset: u32,
    lse_offset: u32,
    do_offset: u32,
    start_offset: u32,
    dq_offset: u32,
    dk_offset: u32,
    dv_offset: u32,
    // Splits of each pair tile's keys (the forward's and dq's dispatches) and of each key
    // tile's pairs (dk/dv's); 1: the outputs are the results, not slices of partial sums.
    key_splits: u32,
    pair_splits: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

// Stands for minus infinity (WGSL has no infinite literal): exp of it minus any score is 0.
const LOW: f32 = -3.0e38;

// The first key row that row i sees, `s` being start[i].
fn first_key(i: u32, s: u32) -> u32 {
    if p.window == 0u || i < p.window {
        return s;
    }
    return max(s, i + 1u - p.window);
}

// A score after the optional soft-cap, and the cap's derivative (1 without a cap).
struct Score {
    s: f32,
    grad: f32,
}

fn score(raw: f32) -> Score {
    if p.softcap > 0.0 {
        let t = tanh(raw / p.softcap);
        return Score(p.softcap * t, 1.0 - t * t);
    }
    return Score(raw, 1.0);
}

// `score` of four raw scores at once.
struct Score4 {
    s: vec4<f32>,
    grad: vec4<f32>,
}

fn score4(raw: vec4<f32>) -> Score4 {
    if p.softcap > 0.0 {
        let t = tanh(raw / p.softcap);
        return Score4(p.softcap * t, 1.0 - t * t);
    }
    return Score4(raw, vec4<f32>(1.0));
}

// Query heads per kv head.
fn group_size() -> u32 {
    return p.n_head / p.n_kv;
}

// Pairs of one kv head over the block.
fn pair_count() -> u32 {
    return p.n * group_size();
}

// The (row, head) index of kv head g's pair e: the row of q, o, do and lse it reads.
fn pair_row(g: u32, e: u32) -> u32 {
    let gs = group_size();
    return (e / gs) * p.n_head + g * gs + e % gs;
}

// What a pair sees: its block row i and the first key row it sees (valid: a pair of the block).
struct Sight {
    i: u32,
    first: u32,
    valid: bool,
}

fn sight(e: u32) -> Sight {
    if e >= pair_count() {
        return Sight(0u, 1u, false);
    }
    let i = e / group_size();
    return Sight(i, first_key(i, start[p.start_offset + i]), true);
}

// The linear workgroup index of a grid laid out by grid_1d.
fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// The forward's and dq's tile of `rows` pairs for linear workgroup `idx` (the f32 kernels'
// BQ, the tensor-core kernels' TP): its kv head and first pair. The last tiles see the most
// keys: launched first, they do not trail the grid.
struct PairTile {
    g: u32,
    e0: u32,
    valid: bool,
}

fn pair_tile(idx: u32, rows: u32) -> PairTile {
    let blocks = (pair_count() + rows - 1u) / rows;
    if idx >= blocks * p.n_kv {
        return PairTile(0u, 0u, false);
    }
    return PairTile(idx / blocks, (blocks - 1u - idx % blocks) * rows, true);
}
