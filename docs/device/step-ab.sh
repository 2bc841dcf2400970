#!/bin/bash
# Decode step A/B of builds and shader variants on the synthetic twins (the "step" figures of
# docs/PERF.md), run on the device machine from the repository root (carry [".gl", ".dev"]).
# Needs in .dev/: xz-compressed stripped binaries `xtask.xz` and one `NAME.xz` per build, the
# vocab-only files of side-by-side.sh, and for a variant a folder .dev/v/VARIANT of replaced
# shader files (read through RULLAMA_SHADER_DIR; check it with `xtask wgsl` first).
# RUNS: "BUILD[:VARIANT] ..." in order (e.g. "rbase rnew rbase rnew", or "rnew rnew:off");
# MODELS the twins; P, N the prompt and decode lengths. Prints each run's decode t/s (median,
# min, max), its decode step timed around its pass and the host's time a token recording,
# encoding and submitting (`bench --profile`).
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || xz -dkf "$b"; done
chmod +x .dev/xtask
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/rl/out}; mkdir -p /tmp/rl/m "$OUT"
nvidia-smi --query-gpu=name,temperature.gpu,clocks.sm --format=csv,noheader
declare -A VOCAB=([gemma3-270m]=gemma3 [gemma3-4b]=gemma3 [qwen2.5-0.5b]=qwen [smollm2-135m]=smollm2)
for m in ${MODELS:-gemma3-270m smollm2-135m qwen2.5-0.5b gemma3-4b}; do
  [ -f /tmp/rl/m/$m.gguf ] || .dev/xtask synth --arch $m --tokenizer .dev/${VOCAB[$m]}-vocab.gguf --out /tmp/rl/m/$m.gguf >/dev/null
  for r in ${RUNS:?RUNS names the builds}; do
    b=${r%%:*}; v=""; [ "$r" = "$b" ] || v=$PWD/.dev/v/${r#*:}
    chmod +x .dev/$b
    RULLAMA_SHADER_DIR=$v timeout 150 .dev/$b bench /tmp/rl/m/$m.gguf -p ${P:-922} -n ${N:-64} -r 3 --profile 2>/dev/null > "$OUT/$m-${r/:/-}.md"
    echo "$m $r: $(grep -E '\| tg' "$OUT/$m-${r/:/-}.md" | cut -d'|' -f7-9) | $(grep -E 'profile of one decode' "$OUT/$m-${r/:/-}.md" | grep -oE '[0-9.]+ us with timestamps around') | $(grep -oE '[0-9.]+ us recording' "$OUT/$m-${r/:/-}.md")"
  done
done
