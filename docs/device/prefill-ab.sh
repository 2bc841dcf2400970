#!/bin/bash
# Prefill A/B on the synthetic twins: several builds of `rullama` (BINS) and shader variants
# of the first build (VARIANTS: folders laid out like shaders/ with files replaced, read
# through RULLAMA_SHADER_DIR; `main` is the compiled-in shaders), each variant's parity checks
# first (`xtask parity --kernels`, PARITY cases each, the checks CHECKS names: the
# tensor-core kernels' run only on a device that has them), then prefill t/s, a prefill
# profile, and a perplexity over README.md (the same text and file for every run: a
# consistency check of the prompt path). Run on the device machine from the repository root
# (carry [".gl", ".dev"]); needs in .dev/ what ab.sh needs (xz-compressed stripped binaries
# `xtask.xz` and one `NAME.xz` per build, the vocab-only files, llama-vk.tar.xz).
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || xz -dkf $b; done
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/rl/m; tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
X=.dev/xtask
BINS=${BINS:-rullama rullama-noattcoop}
FIRST=${BINS%% *}
VARIANTS=${VARIANTS:-main}
shader_dir() { [ "$1" = main ] && echo "" || echo "$PWD/$1"; }
for v in $VARIANTS; do
  echo "=== parity, shaders $v"
  RULLAMA_SHADER_DIR=$(shader_dir $v) RULLAMA_PARITY_ONLY=${CHECKS:-attention_coop,attention_coop_exact} \
    RULLAMA_PARITY_CASES=${PARITY:-20} $X parity --kernels 2>&1 | grep -vE "^kernel +cases"
done
declare -A VOCAB=([gemma3-270m]=gemma3 [gemma3-4b]=gemma3 [qwen2.5-0.5b]=qwen [smollm2-135m]=smollm2)
for m in ${MODELS:-gemma3-270m qwen2.5-0.5b}; do
  [ -f /tmp/rl/m/$m.gguf ] || $X synth --arch $m --tokenizer .dev/${VOCAB[$m]}-vocab.gguf --out /tmp/rl/m/$m.gguf >/dev/null
  echo "=== $m"
  bash docs/device/llbench.sh /tmp/rl/m/$m.gguf 2>&1 | tail -1
  runs="$(for v in $VARIANTS; do echo "$FIRST:$v"; done) $(for b in ${BINS#$FIRST}; do echo "$b:main"; done)"
  for r in $runs; do
    b=${r%%:*}; v=${r#*:}; d=$(shader_dir $v)
    RULLAMA_SHADER_DIR=$d .dev/$b bench /tmp/rl/m/$m.gguf -p 922 -n 16 -r 3 2>/dev/null | grep -E "pp922" | sed "s|^|$b $v: |"
    RULLAMA_SHADER_DIR=$d .dev/$b perplexity /tmp/rl/m/$m.gguf --file README.md --ctx 512 --chunks 2 --json 2>/dev/null | tail -1 | sed "s|^|$b $v ppl: |"
  done
  RULLAMA_SHADER_DIR=$(shader_dir ${VARIANTS%% *}) .dev/$FIRST bench /tmp/rl/m/$m.gguf -p 922 -n 16 -r 1 --profile 2>/dev/null | sed -n '/prefill step/,/^$/p' | head -7
done
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm,clocks.mem --format=csv,noheader
