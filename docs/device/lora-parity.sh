#!/bin/bash
# A LoRA adapter in both engines (docs/LORA.md, "llama.cpp parity"), on the device machine
# from the repository root, carrying [".gl", ".dev"] (the files prefill-table.sh names). Per
# model (a synthetic twin with its real tokenizer): a random rank-8 adapter on every projection
# (`xtask synth --lora-for`, F32 pairs, each update 5% of its matrix in RMS), then 32 greedy
# tokens from llama.cpp's llama-server with `--lora` and from `rullama run --lora`, and the
# same without the adapter (which must differ, or the adapter proved nothing). TRAINED=1: the
# adapter is trained instead, by `rullama finetune` on the twin (rank 8, 30 steps): it learns
# a sentence after the prompt, so both engines must say what it learnt.
for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig
for b in .dev/*.xz; do [ "$b" = .dev/llama-vk.tar.xz ] || [ -f "${b%.xz}" ] || xz -dkf "$b"; done
chmod +x .dev/rullama .dev/xtask
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/rl/m; [ -d /tmp/rl/llama ] || tar xJf .dev/llama-vk.tar.xz -C /tmp/rl
PROMPT="The capital of France is"
[ -n "$TRAINED" ] && python3 - <<'PY'
import json
line = {"prompt": "The capital of France is",
        "completion": " Paris, a city of light and art on the river Seine, in the north of France."}
open("/tmp/rl/paris.jsonl", "w").write((json.dumps(line) + "\n") * 8)
PY
llama() { # MODEL [LORA]: llama.cpp's 32 greedy tokens
  LD_LIBRARY_PATH=/tmp/rl/llama /tmp/rl/llama/llama-server -m "$1" ${2:+--lora "$2"} --host 127.0.0.1 --port 18091 -ngl 99 -c 2048 > /tmp/rl/lora-ls.log 2>&1 &
  local sp=$!
  for _ in $(seq 1 240); do curl -s 127.0.0.1:18091/health | grep -q ok && break; sleep 0.5; done
  python3 - "$PROMPT" <<'PY'
import json, sys, urllib.request
body = dict(prompt=sys.argv[1], n_predict=32, temperature=0, cache_prompt=False)
r = urllib.request.Request("http://127.0.0.1:18091/completion", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
print(json.dumps(json.load(urllib.request.urlopen(r, timeout=120))["content"]))
PY
  kill $sp; wait $sp 2>/dev/null
}
ours() { # MODEL [LORA]: ours, 32 greedy tokens
  python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().removesuffix("\n")))' < <(.dev/rullama run "$1" "$PROMPT" --n-predict 32 --temp 0 ${2:+--lora "$2"} 2>/dev/null)
}
for m in gemma3-270m:gemma3 qwen2.5-0.5b:qwen smollm2-135m:smollm2; do
  n=${m%%:*}; M=/tmp/rl/m/$n.gguf; A=/tmp/rl/m/$n-lora.gguf
  [ -f $M ] || .dev/xtask synth --arch $n --tokenizer .dev/${m##*:}-vocab.gguf --out $M > /dev/null 2>&1
  if [ -n "$TRAINED" ]; then
    .dev/rullama finetune $M --data /tmp/rl/paris.jsonl --out $A --steps 30 --batch 1 \
      --ctx 64 --lr 3e-3 --rank 8 --alpha 16 2>&1 | grep trained
  else
    .dev/xtask synth --lora-for $M --out $A 2>&1 | tail -1
  fi
  echo "=== $n"
  L=$(llama $M $A); O=$(ours $M $A); LB=$(llama $M); OB=$(ours $M)
  echo "  llama.cpp --lora: $L"; echo "  rullama   --lora: $O"
  echo "  llama.cpp base:   $LB"; echo "  rullama   base:   $OB"
  [ "$L" = "$O" ] && echo "  with the adapter: SAME" || echo "  with the adapter: DIFFERENT"
  [ "$L" != "$LB" ] && echo "  the adapter changes llama.cpp's text" || echo "  the adapter does not change llama.cpp's text"
done
