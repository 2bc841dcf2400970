"""Dequantize every tensor of a GGUF file with the `gguf` package (the llama.cpp authors'
reference) and print one JSON line per tensor: name, type, element count and the sha256 of the
little-endian f32 values. `cargo xtask parity --formats` compares these with rullama-quant.

Hashes instead of values: a whole model's f32 weights are gigabytes, a hash is 64 characters."""
import hashlib
import json
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFReader, quants

reader = GGUFReader(sys.argv[1])
for t in reader.tensors:
    if t.tensor_type == T.F32:
        values = np.asarray(t.data, dtype=np.float32)
    elif t.tensor_type == T.F16:
        values = np.asarray(t.data, dtype=np.float16).astype(np.float32)
    else:
        try:
            values = quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            print(json.dumps({"name": t.name, "type": t.tensor_type.name, "unsupported": True}))
            continue
    data = np.ascontiguousarray(values, dtype="<f4").tobytes()
    print(json.dumps({"name": t.name, "type": t.tensor_type.name, "n": len(data) // 4,
                      "sha256": hashlib.sha256(data).hexdigest()}), flush=True)
