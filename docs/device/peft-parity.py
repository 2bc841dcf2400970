"""PEFT against the tape (docs/FINETUNE.md, "PEFT parity"): same base weights (transformers
loads the GGUF, f32), the same adapter at its initial values (ours, a PEFT directory), the same
batch. Step 1's loss and LoRA gradients must agree to 1e-4 relative, the losses of 20 AdamW
steps (torch.optim.AdamW after clip_grad_norm_) to 1e-3.

usage: python3 peft-parity.py MODEL.gguf DIR   (DIR: what examples/peft_parity.rs wrote)
"""
import json, os, sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)

gguf, d = sys.argv[1], sys.argv[2]
exp = json.load(open(os.path.join(d, "expect.json")))
dev = "cuda" if torch.cuda.is_available() else "cpu"
# Gemma 3 scales queries by query_pre_attn_scalar^-0.5, which a GGUF does not store:
# transformers' default (256) is gemma-3-270m's head dim; llama.cpp (and we) use 1/sqrt(head
# dim) for every size but 27B, so a model of another head dim is given its own.
# Its global layers' linear RoPE scaling (`rope.scaling.*` keys) is not taken from a GGUF
# either: both are given from the layers the tape ran.
extra = {}
if exp["arch"] == "gemma3":
    extra["query_pre_attn_scalar"] = exp["head_dim"]
    rope = {}
    for l in exp["layers"]:
        kind = "sliding_attention" if l["window"] else "full_attention"
        p = {"rope_type": "default", "rope_theta": l["base"]}
        if abs(l["factor"] - 1.0) > 1e-6:
            p = {"rope_type": "linear", "factor": l["factor"], "rope_theta": l["base"]}
        rope[kind] = p
    extra["rope_parameters"] = rope
base = AutoModelForCausalLM.from_pretrained(
    os.path.dirname(os.path.abspath(gguf)), gguf_file=os.path.basename(gguf),
    dtype=torch.float32, attn_implementation="eager", **extra).to(dev)
model = PeftModel.from_pretrained(base, os.path.join(d, "init"), is_trainable=True).to(dev)
model.train()  # dropout is 0: train mode changes nothing but PEFT's bookkeeping

ids = torch.tensor(exp["tokens"], device=dev)
mask = torch.tensor(exp["mask"], device=dev)
attn = torch.zeros_like(ids)
for r, n in enumerate(exp["lengths"]):
    attn[r, :n] = 1
labels = torch.where(mask, ids, torch.full_like(ids, -100))

def loss_of():
    return model(input_ids=ids, attention_mask=attn, labels=labels).loss

params = {n: p for n, p in model.named_parameters() if p.requires_grad}
loss = loss_of()
loss.backward()
ours = load_file(os.path.join(d, "grads", "adapter_model.safetensors"))
worst, scale = 0.0, 0.0
for name, p in params.items():
    key = name.replace(".default", "")
    g, o = p.grad.double().cpu(), ours[key].double()
    worst = max(worst, (g - o).abs().max().item())
    scale = max(scale, g.abs().max().item())
grad_rel = worst / max(scale, 1e-30)
loss_rel = abs(loss.item() - exp["loss1"]) / abs(exp["loss1"])
print(f"{exp['arch']}: step-1 loss PEFT {loss.item():.8f} ours {exp['loss1']:.8f} (rel {loss_rel:.2e}); "
      f"gradients: max |diff| / max |grad| = {grad_rel:.2e} over {len(params)} tensors")

opt = torch.optim.AdamW(params.values(), lr=exp["lr"], betas=(0.9, 0.999), eps=1e-8,
                        weight_decay=exp["weight_decay"])
losses = []
for p in params.values():
    p.grad = None
for _ in exp["losses"]:
    opt.zero_grad()
    l = loss_of()
    l.backward()
    torch.nn.utils.clip_grad_norm_(params.values(), exp["max_grad_norm"])
    opt.step()
    losses.append(l.item())
rel = max(abs(a - b) / abs(b) for a, b in zip(losses, exp["losses"]))
print(f"  {len(losses)} AdamW steps: PEFT {losses[0]:.6f} -> {losses[-1]:.6f}, "
      f"ours {exp['losses'][0]:.6f} -> {exp['losses'][-1]:.6f}; max relative difference {rel:.2e}")
ok = loss_rel <= 1e-4 and grad_rel <= 1e-4 and rel <= 1e-3
print("  " + ("AGREE" if ok else "DISAGREE") + " (bounds: step 1 1e-4, 20 steps 1e-3)")
