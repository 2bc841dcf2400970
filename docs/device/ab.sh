#!/bin/bash
# Decode A/B of several builds of `rullama` on the synthetic twins, llama.cpp's Vulkan build
# before and after, and a decode profile of the first build; run on the device machine from
# the repository root (carry [".gl", ".dev"]). Needs in .dev/: xz-compressed stripped
# binaries `xtask.xz` and one `NAME.xz` per build (64 MiB is the carry limit: compressed,
# four builds fit beside llama-vk.tar.xz and the vocab files), llbench.sh, the vocab-only
# files of side-by-side.sh. BINS lists the builds (default: rullama rullama-nofold
# rullama-fold64: the norm-fold A/B of docs/PERF.md, D-norm-fold), MODELS the twins.
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || xz -dkf $b; done
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/rl/m; tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
X=.dev/xtask
[ -f /tmp/rl/m/gemma3-270m.gguf ] || $X synth --arch gemma3-270m --tokenizer .dev/gemma3-vocab.gguf --out /tmp/rl/m/gemma3-270m.gguf >/dev/null
[ -f /tmp/rl/m/qwen2.5-0.5b.gguf ] || $X synth --arch qwen2.5-0.5b --tokenizer .dev/qwen-vocab.gguf --out /tmp/rl/m/qwen2.5-0.5b.gguf >/dev/null
[ -f /tmp/rl/m/smollm2-135m.gguf ] || $X synth --arch smollm2-135m --tokenizer .dev/smollm2-vocab.gguf --out /tmp/rl/m/smollm2-135m.gguf >/dev/null
[ -f /tmp/rl/m/gemma3-4b.gguf ] || { echo " $MODELS " | grep -q " gemma3-4b " && $X synth --arch gemma3-4b --tokenizer .dev/gemma3-vocab.gguf --out /tmp/rl/m/gemma3-4b.gguf >/dev/null; }
BINS=${BINS:-rullama rullama-nofold rullama-fold64}
for m in ${MODELS:-gemma3-270m smollm2-135m qwen2.5-0.5b}; do
  echo "=== $m"
  bash docs/device/llbench.sh /tmp/rl/m/$m.gguf 2>&1 | tail -1
  for b in $BINS; do
    .dev/$b bench /tmp/rl/m/$m.gguf -p 0 -n 128 -d 512 -r 3 2>/dev/null | grep -E "tg128" | sed "s/^/$b: /"
  done
  .dev/${BINS%% *} bench /tmp/rl/m/$m.gguf -p 16 -n 128 -r 1 --profile 2>/dev/null | sed -n '/decode step/,/^$/p' | head -14
  bash docs/device/llbench.sh /tmp/rl/m/$m.gguf 2>&1 | tail -1
done
