// How the attention kernels that split a tile's keys (or pairs) over the grid's z share them
// out: the training kernels (attention/train_*.wgsl) and the prompt attention on the tensor
// cores (attention/attention_coop.wgsl).

// Split `split` of `splits`' share [x, y) of begin .. end walked `tile` at a time: whole tiles,
// as even as they come (empty past the last; begin <= end).
fn split_share(begin: u32, end: u32, tile: u32, splits: u32, split: u32) -> vec2<u32> {
    let per = ((end - begin + tile - 1u) / tile + splits - 1u) / splits * tile;
    let x = min(begin + split * per, end);
    return vec2<u32>(x, min(x + per, end));
}
