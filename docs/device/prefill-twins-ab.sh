#!/bin/bash
# Prefill of the big twins at 922 and 8,192 tokens and of the small models at 922, this build
# (.dev/rullama.xz), with BASE=1 beside a base build (.dev/rullama-base.xz) in one call, with
# PARITY=1 the tensor-core attention's parity checks first; then llama.cpp's llama-server on
# qwen2.5-7b and gemma3-4b (docs/PERF.md, section 1, calls E, F and G). On the device machine
# from the repository root, carrying [".gl", ".dev"]; .dev/ as prefill-table.sh says (xtask.xz,
# llama-vk.tar.xz, the vocab files).
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/rullama.xz ${BASE:+.dev/rullama-base.xz} .dev/xtask.xz; do xz -dkf "$b"; done
chmod +x .dev/rullama* .dev/xtask
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/rl/m; [ -d /tmp/rl/llama ] || tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
synth() { # PRESET [VOCAB]
  [ -f /tmp/rl/m/$1.gguf ] || .dev/xtask synth --arch $1 ${2:+--tokenizer .dev/$2-vocab.gguf} --out /tmp/rl/m/$1.gguf >/dev/null 2>&1
}
[ -n "$PARITY" ] && RULLAMA_PARITY_ONLY=attention_coop,attention_coop_exact,attention_train_coop,attention_backward_dq_coop,attention_backward_dkdv_coop \
  RULLAMA_PARITY_CASES=20 timeout 60 .dev/xtask parity --kernels 2>&1 | tail -6
ours() { # MODEL PROMPTS: each build's prefill t/s and TFLOP/s, median of 3
  for b in rullama ${BASE:+rullama-base}; do
    echo "  $b $1: $(.dev/$b bench /tmp/rl/m/$1.gguf -p $2 -n 0 -r 3 2>/dev/null | grep -E "\| pp[0-9]+ \|" | cut -d'|' -f6,7,10 | tr '\n' ' ')"
  done
}
synth qwen2.5-7b qwen; ours qwen2.5-7b 922,8192
synth gemma3-4b gemma3; ours gemma3-4b 922,8192
synth llama-8b; ours llama-8b 922,8192
synth gemma3-270m gemma3; ours gemma3-270m 922
synth qwen2.5-0.5b qwen; ours qwen2.5-0.5b 922
synth smollm2-135m smollm2; ours smollm2-135m 922
source <(sed -n '/^llama() {/,/^}/p' docs/device/long-prefill.sh)
llama /tmp/rl/m/qwen2.5-7b.gguf 9000 922 8192
llama /tmp/rl/m/gemma3-4b.gguf 9000 922 8192
