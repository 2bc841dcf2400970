#!/bin/bash
# Two builds of `rullama` on the four synthetic twins of docs/PERF.md's table, alternated
# (A B A B on each model), prefill 922 and decode 128 with the default sampler, then the
# kernel parity checks of the second build's bench binary: the "within noise of today's"
# check of a change that should not move speed. Run on the device machine from the
# repository root, carrying [".gl", ".dev"]. Needs in .dev/: the xz-compressed stripped
# binaries `xtask.xz`, `kernels.xz` (`cargo bench -p rullama-kernels --no-run`) and one
# `NAME.xz` per build, and the vocab-only files of side-by-side.sh. A and B name the builds
# (default rullama-base and rullama), MODELS the twins.
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || xz -dkf "$b"; done
chmod +x .dev/* 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/rl/out}; mkdir -p /tmp/rl/m "$OUT"
A=${A:-rullama-base}; B=${B:-rullama}
X=.dev/xtask
{
nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
for m in ${MODELS:-gemma3-270m smollm2-135m qwen2.5-0.5b gemma3-4b}; do
  case $m in gemma3*) v=gemma3;; qwen*) v=qwen;; *) v=smollm2;; esac
  [ -f /tmp/rl/m/$m.gguf ] || $X synth --arch $m --tokenizer .dev/$v-vocab.gguf --out /tmp/rl/m/$m.gguf >/dev/null
  echo "=== $m"
  for round in 1 2; do
    for b in $A $B; do
      .dev/$b bench /tmp/rl/m/$m.gguf -p 922 -n 128 -d 0,922 -r 3 2>/dev/null | grep -E "pp922 \||tg128 @ d922" | sed "s/^/$b ($round): /"
    done
  done
done
RULLAMA_BENCH_PARITY=20 RULLAMA_BENCH_FILTER=none timeout 180 .dev/kernels --bench 2>&1 | grep -E "^PARITY" > "$OUT/parity.txt"
echo "parity ($B's kernels): $(grep -c '|pass$' "$OUT/parity.txt") pass of $(wc -l < "$OUT/parity.txt")"
grep -v '|pass$' "$OUT/parity.txt"
} 2>&1 | tee "$OUT/before-after.log"
