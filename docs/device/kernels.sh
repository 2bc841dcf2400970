#!/bin/bash
# Kernel speed on the device machine (docs/PERF.md, section 3), run from the repository root.
# Needs in .dev/ (carried, git-ignored) the stripped criterion bench binary:
#   CARGO_TARGET_DIR=target-rel cargo bench -p rullama-kernels --no-run
#   strip -o .dev/kernels $(ls -t target-rel/release/deps/kernels-* | grep -v '\.d$' | head -1)
# Carry [".gl", ".dev"] (.gl: the Vulkan loader debs, ../shared/device.md section 1).
# FILTERS: bench-name substrings run in turn (default: issue 3's formats, the matvec with an
# f32 input beside the one with q8 inputs, and the quantize dispatch). PARITY=N first runs every
# kernel parity check for N cases on the device. SHADERS=dir runs a shader variant
# (RULLAMA_SHADER_DIR: a copy of shaders/ with files replaced, no rebuild).
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
[ -n "$SHADERS" ] && export RULLAMA_SHADER_DIR=$SHADERS
if [ -n "$PARITY" ]; then
  RULLAMA_BENCH_PARITY=$PARITY RULLAMA_BENCH_FILTER=none .dev/kernels --bench 2>&1 | grep -E '^PARITY\|' | grep -v '|pass$' | grep -v '|skip$'
  echo "parity: every check not listed passed (or was skipped for a missing capability)"
fi
for f in ${FILTERS:-matvec/Q4_K/ matvec_q8/Q4_K/ matvec/Q6_K/ matvec_q8/Q6_K/ matvec/Q5_0/ matvec_q8/Q5_0/ matvec/Q8_0/ matvec_q8/Q8_0/ matvec/Q4_1/ matvec_q8/Q4_1/ quantize_q8/ residual_norm}; do
  RULLAMA_BENCH_FILTER=$f .dev/kernels --bench 2>/dev/null | grep -E '^PERF\|[a-z]'
done
