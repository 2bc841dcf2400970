#!/usr/bin/env python3
"""Reference dequantization with the `gguf` Python package (written by the llama.cpp authors).

Driven by rullama_quant::reference_python; every file is raw little-endian bytes.

  dequant.py info                          print "gguf <version> numpy <version>", then one
                                           line "<type id> <can quantize: 0|1>" per type that
                                           gguf.quants.dequantize supports
  dequant.py blocks <dir>                  for each line "<job> <type id>" of <dir>/manifest.txt,
                                           dequantize <dir>/<job>.bin into <dir>/<job>.f32
  dequant.py quantize <dir>                the other way: <dir>/<job>.f32 into <dir>/<job>.bin
  dequant.py tensors <file.gguf> <dir> <rows> <first|all>
                                           for each tensor type in the file, take the first
                                           tensor of that type (or, with "all", every tensor)
                                           and write its first <rows> rows
                                           as <dir>/<job>.bin and, dequantized, <dir>/<job>.f32;
                                           <dir>/manifest.txt lines "<job> <type id> <row_len> <name>"

Exit status 3 means numpy or gguf is missing.
"""

import struct
import sys
from pathlib import Path

try:
    import numpy as np
    import gguf
    from gguf.quants import _type_traits
except ImportError as e:
    print(f"cannot import the reference: {e}; run: pip install gguf==0.19.0 numpy", file=sys.stderr)
    sys.exit(3)

QT = gguf.GGMLQuantizationType


def supported():
    return [QT.F32, QT.F16] + sorted(_type_traits, key=int)


def dequantize(raw: np.ndarray, qtype: QT) -> np.ndarray:
    out = gguf.quants.dequantize(raw, qtype)
    return np.ascontiguousarray(out, dtype="<f4").reshape(-1)


def quantize(values: np.ndarray, qtype: QT) -> np.ndarray:
    out = gguf.quants.quantize(values.astype(np.float32), qtype)
    return np.ascontiguousarray(out).reshape(-1).view(np.uint8)


def can_quantize(qtype: QT) -> bool:
    block_size = gguf.GGML_QUANT_SIZES[qtype][0]
    try:
        quantize(np.zeros(block_size, dtype=np.float32), qtype)
        return True
    except NotImplementedError:
        return False


def info():
    from importlib.metadata import version

    print(f"gguf {version('gguf')} numpy {np.__version__}")
    for t in supported():
        print(int(t), int(can_quantize(t)))


def blocks(dir: Path):
    for line in (dir / "manifest.txt").read_text().splitlines():
        job, type_id = line.split()
        raw = np.fromfile(dir / f"{job}.bin", dtype=np.uint8)
        dequantize(raw, QT(int(type_id))).tofile(dir / f"{job}.f32")


def quantize_blocks(dir: Path):
    for line in (dir / "manifest.txt").read_text().splitlines():
        job, type_id = line.split()
        values = np.fromfile(dir / f"{job}.f32", dtype="<f4")
        quantize(values, QT(int(type_id))).tofile(dir / f"{job}.bin")


# Sizes of the fixed-size GGUF metadata value types.
FIXED_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


def skip_value(buf, offs: int, vtype: int) -> int:
    if vtype in FIXED_SIZES:
        return offs + FIXED_SIZES[vtype]
    if vtype == STRING:
        return offs + 8 + struct.unpack_from("<Q", buf, offs)[0]
    if vtype == ARRAY:
        etype, count = struct.unpack_from("<IQ", buf, offs)
        offs += 12
        if etype in FIXED_SIZES:
            return offs + count * FIXED_SIZES[etype]
        for _ in range(count):
            offs = skip_value(buf, offs, etype)
        return offs
    raise ValueError(f"unknown GGUF value type {vtype} at offset {offs}")


class TensorReader(gguf.GGUFReader):
    """gguf.GGUFReader, minus the metadata values it would otherwise turn into numpy views one
    element at a time (tens of seconds for a 262k-token vocabulary). Tensor infos and tensor
    data are still read by the package; only `general.alignment` is kept from the metadata."""

    def _build_fields(self, offs: int, count: int) -> int:
        buf = memoryview(self.data)
        for _ in range(count):
            start = offs
            klen = struct.unpack_from("<Q", buf, offs)[0]
            key = bytes(buf[offs + 8 : offs + 8 + klen]).decode()
            offs += 8 + klen
            vtype = struct.unpack_from("<I", buf, offs)[0]
            offs = skip_value(buf, offs + 4, vtype)
            if key == "general.alignment":
                super()._build_fields(start, 1)
        return offs


def tensors(path: Path, dir: Path, rows: int, every_tensor: bool):
    reader = TensorReader(path)
    seen = set()
    manifest = []
    for t in reader.tensors:
        qtype = QT(int(t.tensor_type))
        if qtype in seen and not every_tensor:
            continue
        seen.add(qtype)
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        row_len = int(t.shape[0])
        row_bytes = row_len // block_size * type_size
        n_rows = min(rows, int(t.n_elements) // row_len)
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)[: n_rows * row_bytes]
        job = len(manifest)
        raw.tofile(dir / f"{job}.bin")
        if qtype in supported():
            dequantize(raw.reshape(n_rows, row_bytes), qtype).tofile(dir / f"{job}.f32")
        manifest.append(f"{job} {int(qtype)} {row_len} {t.name}")
    (dir / "manifest.txt").write_text("".join(line + "\n" for line in manifest))


def main(argv):
    if argv[:1] == ["info"]:
        info()
    elif argv[:1] == ["blocks"] and len(argv) == 2:
        blocks(Path(argv[1]))
    elif argv[:1] == ["quantize"] and len(argv) == 2:
        quantize_blocks(Path(argv[1]))
    elif argv[:1] == ["tensors"] and len(argv) == 5 and argv[4] in ("first", "all"):
        tensors(Path(argv[1]), Path(argv[2]), int(argv[3]), argv[4] == "all")
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
