"""Dequantize raw k-quant blocks with the gguf package (llama.cpp's Python reference).

Usage: kquants_dequant.py TYPE IN OUT [TYPE IN OUT ...]
TYPE is a GGMLQuantizationType name (Q2_K, ...); IN holds whole blocks; OUT gets f32 LE.
Exits with status 3 and a hint when gguf or numpy is missing, so the caller can fail loudly.
"""

import sys

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType
except ImportError as e:
    print(f"missing Python module ({e}): pip install gguf==0.19.0 numpy", file=sys.stderr)
    sys.exit(3)


def main(args: list[str]) -> None:
    if len(args) % 3 != 0 or not args:
        sys.exit("usage: kquants_dequant.py TYPE IN OUT [TYPE IN OUT ...]")
    for name, src, dst in zip(args[0::3], args[1::3], args[2::3]):
        raw = np.fromfile(src, dtype=np.uint8)
        with np.errstate(all="ignore"):  # random blocks overflow and make NaNs on purpose
            out = gguf.quants.dequantize(raw, GGMLQuantizationType[name])
        out.astype("<f4", copy=False).tofile(dst)
    from importlib.metadata import version

    print(f"gguf {version('gguf')}")


if __name__ == "__main__":
    main(sys.argv[1:])
