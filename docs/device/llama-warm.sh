#!/bin/bash
# Prefill at 922 tokens, ours and then llama.cpp's llama-server with a warm-up long enough for
# the GPU's clock (docs/PERF.md, section 1, call H): llama.cpp's requests repeat untimed until
# at least 3 s and 8 requests have passed (its first builds pipelines; an idle GPU's clock then
# ramps over the next ones), then 6 are timed and every reading is printed. Ours: `rullama bench
# -r 5` (its own warm-up is at least a second). On the device machine from the repository root,
# carrying [".gl", ".dev"]; .dev/ as prefill-table.sh says. MODELS: PRESET:VOCAB pairs.
MODELS=${MODELS:-"gemma3-270m:gemma3 smollm2-135m:smollm2 qwen2.5-0.5b:qwen qwen2.5-7b:qwen gemma3-4b:gemma3"}
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/rullama.xz .dev/xtask.xz; do xz -dkf "$b"; done; chmod +x .dev/rullama .dev/xtask
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/rl/m; [ -d /tmp/rl/llama ] || tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
for m in $MODELS; do
  M=/tmp/rl/m/${m%%:*}.gguf
  [ -f $M ] || .dev/xtask synth --arch ${m%%:*} --tokenizer .dev/${m##*:}-vocab.gguf --out $M >/dev/null 2>&1
  echo "${m%%:*} ours (median, min, max): $(.dev/rullama bench $M -p 922 -n 0 -r 5 2>/dev/null | grep -E "\| pp[0-9]+ \|" | cut -d'|' -f6,7,8,9)"
  LD_LIBRARY_PATH=/tmp/rl/llama /tmp/rl/llama/llama-server -m $M --host 127.0.0.1 --port 18090 -ngl 99 -c 9000 -b 2048 -ub 512 > /tmp/rl/ls.log 2>&1 &
  sp=$!
  for _ in $(seq 1 240); do curl -s 127.0.0.1:18090/health | grep -q ok && break; sleep 0.5; done
  python3 - <<'PY'
import json, time, urllib.request, statistics
def req(prompt):
    body = dict(prompt=prompt, n_predict=4, temperature=0, cache_prompt=False, ignore_eos=True)
    r = urllib.request.Request("http://127.0.0.1:18090/completion", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=300))["timings"]
base = "the quick brown fox jumps over the lazy dog while a curious cat watches from the old wooden fence near the river bank "
p = base * 40
t0 = time.time(); n = 0
while time.time() - t0 < 3.0 or n < 8:
    req(p); n += 1
pp = [req(p)["prompt_per_second"] for _ in range(6)]
t = req(p)
print("  llama.cpp pp%d after %d warm-up requests: median %.0f, best %.0f, readings %s" % (t["prompt_n"], n, statistics.median(pp), max(pp), " ".join("%.0f" % v for v in pp)))
PY
  kill $sp; wait $sp 2>/dev/null
done
