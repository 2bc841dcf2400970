#!/bin/bash
# The table of docs/PERF.md (section 1), run on the device machine from the repository root
# (carry [".gl", ".dev"]): a warm-up, the side-by-side of all four models (side-by-side.sh,
# whose .dev/ files it needs, plus `kernels.xz`: the kernels bench binary, `cargo bench -p
# rullama-kernels --no-run`), kernel parity at 20 cases, a short A/B of steps a submission on
# gemma-3-270m, and the dependent-dispatch floor (section 2). Everything also lands in $OUT
# (final.log, parity.txt).
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || xz -dkf "$b"; done
chmod +x .dev/rullama .dev/xtask .dev/kernels
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/rl/out}; mkdir -p /tmp/rl/m "$OUT"
{
[ -f /tmp/rl/m/gemma3-270m.gguf ] || .dev/xtask synth --arch gemma3-270m --tokenizer .dev/gemma3-vocab.gguf --out /tmp/rl/m/gemma3-270m.gguf >/dev/null
.dev/rullama bench /tmp/rl/m/gemma3-270m.gguf -p 0 -n 128 -d 922 -r 3 2>/dev/null | grep -E "tg128" | sed 's/^/warm-up: /'
MODELS="gemma3-270m smollm2-135m qwen2.5-0.5b gemma3-4b" EXTRA="--temp 0" bash docs/device/side-by-side.sh 2>&1
RULLAMA_BENCH_PARITY=20 RULLAMA_BENCH_FILTER=none timeout 120 .dev/kernels --bench 2>&1 | grep -E "^PARITY" > "$OUT/parity.txt"
echo "parity: $(grep -c '|pass$' "$OUT/parity.txt") pass of $(wc -l < "$OUT/parity.txt")"
for s in 1 4 1 4; do echo "gemma3-270m --steps-per-submit $s: $(.dev/rullama bench /tmp/rl/m/gemma3-270m.gguf -p 0 -n 128 -d 922 -r 3 --steps-per-submit $s 2>/dev/null | grep tg128 | cut -d'|' -f7-9)"; done
RULLAMA_BENCH_FILTER=dispatch/ timeout 120 .dev/kernels --bench 2>/dev/null | grep -E '^PERF\|'
} 2>&1 | tee "$OUT/final.log"
