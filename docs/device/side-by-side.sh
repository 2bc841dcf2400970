#!/bin/bash
# Ours beside llama.cpp (docs/PERF.md, section 1), run on the device machine from the
# repository root. Needs in .dev/ (carried, git-ignored): release `rullama` and `xtask`
# (stripped, optionally as `rullama.xz` / `xtask.xz`), llama-vk.tar.xz (llama.cpp's Vulkan build, ../shared/device.md section 4), and
# the vocab-only files `cargo xtask synth --vocab-only` makes here from the cached models:
#   gemma3-vocab.gguf (from gemma-3-270m), qwen-vocab.gguf (from qwen2.5-0.5b),
#   smollm2-vocab.gguf (from SmolLM2-135M).
# Carry [".gl", ".dev"] (.gl: the Vulkan loader debs, ../shared/device.md section 1).
# Synthetic twins of the models are generated on the device, so nothing big crosses; llama.cpp
# runs before and after ours on each file (its figures move 10-25% between runs).
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
# Binaries may come xz-compressed (NAME.xz), to fit the carry limit.
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || xz -dkf $b; done
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/rl/out}; mkdir -p /tmp/rl/m "$OUT"; tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
X=.dev/xtask; R=.dev/rullama
[ -f /tmp/rl/m/gemma3-270m.gguf ] || $X synth --arch gemma3-270m --tokenizer .dev/gemma3-vocab.gguf --out /tmp/rl/m/gemma3-270m.gguf >/dev/null
[ -f /tmp/rl/m/qwen2.5-0.5b.gguf ] || $X synth --arch qwen2.5-0.5b --tokenizer .dev/qwen-vocab.gguf --out /tmp/rl/m/qwen2.5-0.5b.gguf >/dev/null
[ -f /tmp/rl/m/smollm2-135m.gguf ] || $X synth --arch smollm2-135m --tokenizer .dev/smollm2-vocab.gguf --out /tmp/rl/m/smollm2-135m.gguf >/dev/null
[ -f /tmp/rl/m/gemma3-4b.gguf ] || $X synth --arch gemma3-4b --tokenizer .dev/gemma3-vocab.gguf --out /tmp/rl/m/gemma3-4b.gguf >/dev/null
# The real SmolLM2-135M Q4_1 file too, where an earlier call joined it into /tmp/rl/m (two
# 49 MB parts, ../shared/device.md section 3): 98 MB is too big for one call.
real=""; [ -f /tmp/rl/m/SmolLM2-135M-Instruct.Q4_1.gguf ] && real=SmolLM2-135M-Instruct.Q4_1
# MODELS picks a subset (a call is limited to 10 minutes; the whole list takes about 8);
# EXTRA adds a run of ours with those flags.
for m in ${MODELS:-gemma3-270m smollm2-135m $real qwen2.5-0.5b gemma3-4b}; do
  echo "=== $m"
  bash docs/device/llbench.sh /tmp/rl/m/$m.gguf 2>&1 | tail -1
  $R bench /tmp/rl/m/$m.gguf -p 922 -n 128 -d 0,922 -r 3 --profile 2>/dev/null > "$OUT/$m-ours.md"
  grep -E "pp922 \||tg128 @ d922|KV cache|host time" "$OUT/$m-ours.md"
  $R bench /tmp/rl/m/$m.gguf -p 922 -n 128 -d 0,922 -r 3 --cache-type f32 --no-tensor-cores 2>/dev/null | grep -E "pp922 \||tg128 @ d922" | sed 's/^/exact f32 (f32 KV, no tensor cores): /'
  # EXTRA: flags of one more run of ours (e.g. EXTRA=--q8-inputs).
  [ -n "$EXTRA" ] && $R bench /tmp/rl/m/$m.gguf -p 922 -n 128 -d 0,922 -r 3 $EXTRA 2>/dev/null | grep -E "pp922 \||tg128 @ d922" | sed "s/^/ours $EXTRA: /"
  bash docs/device/llbench.sh /tmp/rl/m/$m.gguf 2>&1 | tail -1
done
[ -f "$OUT/gemma3-270m-ours.md" ] && sed -n '/decode step/,/^$/p' "$OUT/gemma3-270m-ours.md" | head -16
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
