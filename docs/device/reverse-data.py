"""The toy task of docs/FINETUNE.md's tutorial: reverse a list of 3 to 5 words.

usage: python3 reverse-data.py OUT_DIR  -> OUT_DIR/reverse-train.jsonl (300 examples),
OUT_DIR/reverse-eval.jsonl (40 held-out examples), the same files every run (seed 1).
"""
import json, os, random, sys

random.seed(1)
WORDS = ("apple river stone cloud tiger lamp music green paper window silver orange table "
         "garden bottle candle forest mirror pencil rocket").split()


def example():
    ws = random.sample(WORDS, random.randint(3, 5))
    return {"prompt": "Reverse: " + " ".join(ws) + "\nAnswer:",
            "completion": " " + " ".join(reversed(ws))}


out = sys.argv[1]
for name, n in (("reverse-train.jsonl", 300), ("reverse-eval.jsonl", 40)):
    with open(os.path.join(out, name), "w") as f:
        for _ in range(n):
            f.write(json.dumps(example()) + "\n")
