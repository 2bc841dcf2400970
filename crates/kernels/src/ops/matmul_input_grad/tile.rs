//! The tensor-core input gradient's output tiles: one WGSL file
//! (`matmul/input_grad_coop.wgsl`) whose override constants set the tile's inputs, tokens and
//! invocations. A workgroup walks the weight's rows 64 at a time whatever its tile, one unit
//! of 32 inputs of one row an invocation, so its invocations are twice its inputs.

/// A workgroup's tile of the tensor-core input gradient: inputs x tokens of dX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputGradTile {
    /// 64 inputs x 64 tokens, 128 invocations; a subgroup 32 x 32 (2 x 2 accumulators). The
    /// f32 kernel's tile, and the one for products with few output tiles.
    Small,
    /// 128 inputs x 128 tokens, 256 invocations; a subgroup 32 inputs x 64 tokens (2 x 4
    /// accumulators). Reads dY once per 128 inputs instead of 64 and loads 6 operands for 8
    /// products instead of 4 for 4: for products whose grid, with the rows split, still fills
    /// the device (the LM head's).
    Large,
    /// 128 inputs x 64 tokens, 256 invocations; a subgroup 32 x 32 (2 x 2 accumulators):
    /// [`InputGradTile::Large`]'s reads of dY for a block of at most 64 tokens.
    Wide,
}

impl InputGradTile {
    /// Every tile.
    pub const ALL: [InputGradTile; 3] = [
        InputGradTile::Small,
        InputGradTile::Large,
        InputGradTile::Wide,
    ];

    /// Inputs of a workgroup's tile.
    pub fn inputs(self) -> usize {
        match self {
            InputGradTile::Small => 64,
            InputGradTile::Large | InputGradTile::Wide => 128,
        }
    }

    /// Tokens of a workgroup's tile.
    pub fn tokens(self) -> usize {
        match self {
            InputGradTile::Small | InputGradTile::Wide => 64,
            InputGradTile::Large => 128,
        }
    }

    /// Invocations of a workgroup: one per unit of 32 inputs of each of the 64 rows a step
    /// stages.
    pub fn workgroup(self) -> u32 {
        (2 * self.inputs()) as u32
    }

    /// Workgroups of one dispatch over `n_in` inputs x `n_tokens` tokens (before splits).
    pub fn workgroups(self, n_in: usize, n_tokens: usize) -> usize {
        n_in.div_ceil(self.inputs()) * n_tokens.div_ceil(self.tokens())
    }

    /// A name for programs and benches: inputs x tokens.
    pub fn name(self) -> String {
        format!("{}x{}", self.inputs(), self.tokens())
    }

    /// The WGSL override constants of the tile (`WG` comes with the pipeline key).
    pub(super) fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("TM", self.inputs() as f64), ("TN", self.tokens() as f64)]
    }
}
