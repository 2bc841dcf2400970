#!/bin/bash
# Shader variants side by side on the device machine (docs/PERF.md's kernel rows), run from
# the repository root, one call for many variants. Needs in .dev/ (carried, git-ignored) the
# stripped kernels bench binary (see docs/device/kernels.sh) and one folder per variant,
# .dev/sh-NAME: a copy of shaders/ with files replaced (read through RULLAMA_SHADER_DIR, no
# rebuild; check each with `cargo xtask wgsl` and the lavapipe tests first).
# V: "NAME:FILTER[,FILTER..] ..." run in order; NAME "main" is the compiled-in shaders. E.g.
#   V="main:matvec/Q4_K/ mine:matvec/Q4_K/ main:matvec/Q4_K/" bash docs/device/variants.sh
# (main first and last shows the device's drift over the call). Lines are prefixed by NAME.
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
for v in $V; do
  name=${v%%:*}; filters=${v#*:}
  if [ "$name" = main ]; then unset RULLAMA_SHADER_DIR; else export RULLAMA_SHADER_DIR=.dev/sh-$name; fi
  for f in ${filters//,/ }; do
    RULLAMA_BENCH_FILTER=$f .dev/kernels --bench 2>/dev/null | grep -E '^PERF\|[a-z]' | sed "s/^/$name /"
  done
done
