"""PyTorch + PEFT LoRA training speed on one GPU, the reference column beside our own trainer.

Loads a GGUF with transformers (dense, in --dtype, on cuda), wraps it with PEFT LoRA (r=--rank,
alpha=--alpha, dropout 0, on q/k/v/o/gate/up/down_proj) and trains with AdamW (lr 1e-4) on random
token ids, labels = inputs. Per batch size: --warmup untimed steps, then --steps timed steps
(forward with labels, backward, optimizer step, zero_grad). Peak is max_memory_allocated over
warm-up and timed steps, weights included; fp32 uses PyTorch's default matmul precision (no TF32).
Prints one line per batch size, then one JSON line {"peft": [...]}.

Run from the repository root by the device shell script, PYTHONPATH pointing at the installed
wheels (torch, transformers, accelerate, peft, gguf); needs no network:
  python3 docs/device/peft-speed.py MODEL.gguf [--dtype bf16|fp32] [--batch 1 8] [--seq 512]
      [--steps 10] [--warmup 3] [--rank 16] [--alpha 32]
"""
import argparse, gc, json, os, time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

p = argparse.ArgumentParser(description="PEFT LoRA training speed on one GPU")
p.add_argument("gguf")
p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
for flag, default in [("--seq", 512), ("--steps", 10), ("--warmup", 3), ("--rank", 16), ("--alpha", 32)]:
    p.add_argument(flag, type=int, default=default)
a = p.parse_args()
dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]

path = os.path.abspath(a.gguf)
name = os.path.basename(path)
kw = dict(pretrained_model_name_or_path=os.path.dirname(path), gguf_file=name)
try:  # newer transformers may keep GGUF blocks packed: ask for dense weights (older ones always are)
    from transformers import GgufConfig
    try:
        kw["quantization_config"] = GgufConfig(gguf_file=name, dequantize=True)
    except TypeError:
        kw["quantization_config"] = GgufConfig(dequantize=True)
except ImportError:
    pass
try:  # transformers >= 4.56 takes dtype=; older ones want torch_dtype=
    model = AutoModelForCausalLM.from_pretrained(**kw, dtype=dt)
except TypeError:
    model = AutoModelForCausalLM.from_pretrained(**kw, torch_dtype=dt)
if next(model.parameters()).dtype != dt:  # an old transformers that took dtype= as a config field
    model = model.to(dt)
model = model.to("cuda")
packed = [n for n, q in model.named_parameters() if not q.is_floating_point()]
if packed:
    raise SystemExit(f"weights left in GGUF blocks, not dense: {packed[:3]}")
cfg = model.config
vocab = getattr(cfg, "vocab_size", None) or cfg.get_text_config().vocab_size

lora = LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0, task_type="CAUSAL_LM",
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
model = get_peft_model(model, lora)
model.train()
params = [q for q in model.parameters() if q.requires_grad]

results = []
for batch in a.batch:
    row = {"dtype": a.dtype, "batch": batch, "seq": a.seq}
    ids = torch.randint(0, vocab, (batch, a.seq), generator=torch.Generator().manual_seed(0)).to("cuda")
    mask = torch.ones_like(ids)
    opt = torch.optim.AdamW(params, lr=1e-4)

    def step():
        loss = model(input_ids=ids, attention_mask=mask, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    try:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(a.warmup):
            loss = step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        row["tok/s"] = round(batch * a.seq * a.steps / secs)
        row["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
        row["loss"] = round(loss.item(), 2)
        print(f"peft dtype={a.dtype} batch={batch} seq={a.seq} tok/s={row['tok/s']} "
              f"peak_gib={row['peak_gib']:.1f} loss={row['loss']:.2f}", flush=True)
    except torch.cuda.OutOfMemoryError:
        row["oom"] = True
        print(f"peft dtype={a.dtype} batch={batch} seq={a.seq} oom", flush=True)
    results.append(row)
    opt.zero_grad(set_to_none=True)
    del opt, ids, mask, step
    loss = None
    gc.collect()
    torch.cuda.empty_cache()

print(json.dumps({"peft": results}))
