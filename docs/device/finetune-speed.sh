#!/bin/bash
# Training speed beside PyTorch + PEFT (docs/PERF.md, training rows), run on the device
# machine from the repository root. Carry [".gl", ".dev"]: .gl the Vulkan loader debs
# (../shared/device.md section 1); .dev the release `rullama` and `xtask` as rullama.xz /
# xtask.xz, gemma3-vocab.gguf (`cargo xtask synth --vocab-only` from the cached gemma-3-270m)
# and whl/ (the peft and gguf wheels, docs/device/peft-parity.sh says how).
# The model: gemma-3-270m's twin (its shapes and tokenizer, random weights, Q4_K_M), on which
# both sides train LoRA r16 alpha 32 on all seven projections at sequence 512. PEFT gets the
# same file dequantized to bf16 by transformers.
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
for b in .dev/rullama.xz .dev/xtask.xz; do xz -dkf $b; done
chmod +x .dev/rullama .dev/xtask
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -m pip install -q --no-index --no-deps --target /tmp/site .dev/whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/rl/m; M=/tmp/rl/m/gemma3-270m.gguf
[ -f $M ] || .dev/xtask synth --arch gemma3-270m --tokenizer .dev/gemma3-vocab.gguf --out $M >/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
# EXTRA adds flags to ours (--no-tensor-cores); BATCHES the batch sizes.
for b in ${BATCHES:-1 8}; do
  .dev/rullama finetune $M --bench --rank 16 --alpha 32 --batch $b --ctx 512 \
    --steps ${STEPS:-10} --json $EXTRA
done
[ -n "$NO_PEFT" ] || python3 docs/device/peft-speed.py $M --dtype bf16 --batch ${BATCHES:-1 8} --seq 512 --steps 10 2>&1 | grep -v -i warn
