#!/bin/bash
# PEFT parity (docs/FINETUNE.md) on the device machine, from the repository root, carrying
# [".dev"]: .dev/whl holds the peft and gguf wheels (`python3 -m pip download --no-deps
# --only-binary=:all: --python-version 3.12 --implementation cp --platform
# manylinux_2_28_x86_64 -d .dev/whl peft gguf`), .dev/xtask.xz and .dev/peft_parity.xz the
# release builds of xtask and of `rullama-finetune`'s example `peft_parity`. Per tiny
# synthetic model (F32): the tape's step 1 and 20 steps, then PEFT's on the same batch.
for b in .dev/xtask.xz .dev/peft_parity.xz; do [ -f "${b%.xz}" ] || xz -dkf "$b"; done
chmod +x .dev/xtask .dev/peft_parity
python3 -m pip install -q --no-index --no-deps --target /tmp/site .dev/whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/rl/m
for a in ${MODELS:-tiny-smollm2 tiny-qwen2 tiny-gemma3}; do
  M=/tmp/rl/m/$a-f32.gguf; D=/tmp/rl/pp-$a
  [ -f $M ] || .dev/xtask synth --arch $a --quant f32 --out $M > /dev/null
  .dev/peft_parity $M $D
  python3 docs/device/peft-parity.py $M $D 2>&1 | grep -v Warning
done
