#!/bin/bash
# Prefill beside llama.cpp on the device machine (docs/PERF.md, section 1, call B), from the
# repository root, carrying [".gl", ".dev"]. .dev/ holds `rullama.xz` (this build), optionally
# `rullama-base.xz` (a build to A/B against, BASE=1), `xtask.xz`, `kernels.xz` (the kernels
# bench, for the parity checks), llama-vk.tar.xz and the vocabulary files side-by-side.sh names.
# Per model: ours (and the base build's) pp922 and tg64, median of 3; on gemma3-4b also pp8192;
# llama.cpp's llama-server on the same prompt lengths (median of 2 after a warm-up).
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || xz -dkf "$b"; done
chmod +x .dev/rullama* .dev/xtask .dev/kernels 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/rl/out}; mkdir -p /tmp/rl/m "$OUT"; tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
RULLAMA_BENCH_PARITY=20 RULLAMA_BENCH_FILTER=none timeout 150 .dev/kernels --bench 2>&1 | grep -E "^PARITY" > "$OUT/parity.txt"
echo "parity: $(grep -c '|pass$' "$OUT/parity.txt") pass of $(wc -l < "$OUT/parity.txt")"
for m in gemma3-270m:gemma3 smollm2-135m:smollm2 qwen2.5-0.5b:qwen gemma3-4b:gemma3; do
  [ -f /tmp/rl/m/${m%%:*}.gguf ] || .dev/xtask synth --arch ${m%%:*} --tokenizer .dev/${m##*:}-vocab.gguf --out /tmp/rl/m/${m%%:*}.gguf >/dev/null
done
llama() { # MODEL REPEATS...: llama.cpp's prefill t/s at each prompt length
  LD_LIBRARY_PATH=/tmp/rl/llama /tmp/rl/llama/llama-server -m "$1" --host 127.0.0.1 --port 18090 -ngl 99 -c 9000 -b 2048 -ub 512 > /tmp/rl/ls.log 2>&1 &
  local sp=$!; shift
  for _ in $(seq 1 120); do curl -s 127.0.0.1:18090/health | grep -q ok && break; sleep 0.5; done
  python3 - "$@" <<'PY'
import json, sys, urllib.request, statistics
def req(prompt):
    body = dict(prompt=prompt, n_predict=4, temperature=0, cache_prompt=False, ignore_eos=True)
    r = urllib.request.Request("http://127.0.0.1:18090/completion", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=300))["timings"]
base = "the quick brown fox jumps over the lazy dog while a curious cat watches from the old wooden fence near the river bank "
for reps in map(int, sys.argv[1:]):
    pp = []
    for i in range(3):
        t = req(base * reps)
        if i: pp.append(t["prompt_per_second"])
    print("  llama.cpp pp%d: %.0f t/s" % (t["prompt_n"], statistics.median(pp)))
PY
  kill $sp; wait $sp 2>/dev/null
}
for m in gemma3-270m smollm2-135m qwen2.5-0.5b gemma3-4b; do
  echo "=== $m"; M=/tmp/rl/m/$m.gguf
  P="922"; R="40"; [ $m = gemma3-4b ] && P="922 8192" && R="40 360"
  for p in $P; do
    for b in rullama ${BASE:+rullama-base}; do
      echo "  $b pp$p: $(.dev/$b bench $M -p $p -n 64 -d 0,$p -r 3 2>/dev/null | grep -E "pp$p \||tg64 @ d$p" | cut -d'|' -f6,7 | tr '\n' ' ')"
    done
  done
  llama $M $R
done
