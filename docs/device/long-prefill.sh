#!/bin/bash
# Long prompts and the big twins beside llama.cpp (docs/PERF.md, section 1), on the device
# machine from the repository root, carrying [".gl", ".dev"] (the files prefill-table.sh
# names; .dev/kernels.xz for PART=small_m; .dev/rullama-alt.xz, if present, is a second build
# A/B'd on gemma3-4b's 8,192-token prefill).
# PART=chunks: gemma3-4b's prefill of 8,192 and 32,768 tokens at several --ubatch sizes, and
#   llama.cpp's (-b 2048 -ub 512, its defaults) on prompts of the same length.
# PART=twins: qwen2.5-7b and llama-8b (Llama 3's 128k vocabulary) at 922 and 8,192 tokens
#   (BASE=1: .dev/rullama-base.xz beside this build).
# PART=small_m: the kernels bench's products of 1-64 token rows.
# PART=ab: every model at 922 tokens, this build, the base, this build again.
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || [ -f "${b%.xz}" ] || xz -dkf "$b"; done
chmod +x .dev/rullama* .dev/xtask .dev/kernels 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/rl/m; [ -d /tmp/rl/llama ] || tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
synth() { # PRESET [VOCAB]
  [ -f /tmp/rl/m/$1.gguf ] || .dev/xtask synth --arch $1 ${2:+--tokenizer .dev/$2-vocab.gguf} --out /tmp/rl/m/$1.gguf >/dev/null
}
llama() { # MODEL CTX TOKENS...: llama.cpp's prefill t/s at prompts of about each length
  LD_LIBRARY_PATH=/tmp/rl/llama /tmp/rl/llama/llama-server -m "$1" --host 127.0.0.1 --port 18090 -ngl 99 -c $2 -b 2048 -ub 512 > /tmp/rl/ls.log 2>&1 &
  local sp=$!; shift 2
  for _ in $(seq 1 240); do curl -s 127.0.0.1:18090/health | grep -q ok && break; sleep 0.5; done
  python3 - "$@" <<'PY' 2>&1 | tail -4
import json, sys, urllib.request, urllib.error, statistics
def post(path, body):
    r = urllib.request.Request("http://127.0.0.1:18090" + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(r, timeout=600))
    except urllib.error.HTTPError as e:
        sys.exit("llama-server %s: %s %s" % (path, e.code, e.read()[:300]))
base = "the quick brown fox jumps over the lazy dog while a curious cat watches from the old wooden fence near the river bank "
# Repeats of `base` for each length, from how many tokens 20 of them make in this vocabulary.
per = len(post("/tokenize", dict(content=base * 20))["tokens"]) / 20
# Warm-up: the first request builds pipelines and an idle GPU's clock ramps over the next
# ones (docs/PERF.md, section 6), so requests repeat untimed for at least 3 s and 4 requests.
import time
t0, done = time.time(), 0
while time.time() - t0 < 3.0 or done < 4:
    post("/completion", dict(prompt=base * 40, n_predict=4, temperature=0, cache_prompt=False, ignore_eos=True))
    done += 1
for n in map(int, sys.argv[1:]):
    pp = []
    for i in range(3):
        t = post("/completion", dict(prompt=base * max(1, round(n / per)), n_predict=4, temperature=0, cache_prompt=False, ignore_eos=True))["timings"]
        if i: pp.append(t["prompt_per_second"])
    print("  llama.cpp pp%d: %.0f t/s" % (t["prompt_n"], statistics.median(pp)))
PY
  kill $sp; wait $sp 2>/dev/null
}
ours() { # BUILD MODEL PROMPT [FLAGS...]: prefill t/s, median of 3
  local b=$1 m=$2 p=$3; shift 3
  echo "  $b pp$p $*: $(.dev/$b bench /tmp/rl/m/$m.gguf -p $p -n 16 -r 3 "$@" 2>/dev/null | grep -E "pp$p \|" | cut -d'|' -f6,7)"
}
small() { # each small model and gemma3-4b at 922 tokens, this build and the base
  for m in gemma3-270m:gemma3 smollm2-135m:smollm2 qwen2.5-0.5b:qwen gemma3-4b:gemma3; do
    synth ${m%%:*} ${m##*:}; echo "=== ${m%%:*}"
    for b in rullama rullama-base rullama; do ours $b ${m%%:*} 922; done
  done
}
case ${PART:-chunks} in
ab) small ;;
chunks)
  synth gemma3-4b gemma3
  for u in 1024 2048 4096 8192; do ours rullama gemma3-4b 8192 --ubatch $u; done
  [ -f .dev/rullama-alt ] && ours rullama-alt gemma3-4b 8192 && ours rullama gemma3-4b 8192
  for u in 2048 4096 8192; do ours rullama gemma3-4b 32768 --ubatch $u; done
  llama /tmp/rl/m/gemma3-4b.gguf 34000 8192 32768 ;;
twins)
  synth qwen2.5-7b qwen; synth llama-8b
  for m in qwen2.5-7b llama-8b; do
    echo "=== $m"
    for b in rullama ${BASE:+rullama-base}; do ours $b $m 922; ours $b $m 8192; done
    llama /tmp/rl/m/$m.gguf 9000 922 8192
  done ;;
small_m)
  RULLAMA_BENCH_FILTER=small_m timeout 300 .dev/kernels --bench 2>&1 | grep -E "^PERF\|small_m" ;;
esac
