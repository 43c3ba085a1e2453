"""Reads a safetensors file with numpy alone (the layout of huggingface/safetensors: a u64 header length, a JSON
header, then the data), as an independent reader of Strata's safetensors exports in the tests.

usage: PYTHON tools/safetensors_numpy.py FILE.safetensors OUT_DIR
       writes each tensor, converted to float32, to OUT_DIR/<name>.f32 (raw little-endian) and prints
       "name dtype dim,dim,..." per tensor, then "metadata KEY" per __metadata__ key
Exit status 3 when numpy is missing (tools/setup-test-venv.sh installs it); 1 for a file it cannot read.
"""
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"safetensors_numpy: {e} (tools/setup-test-venv.sh installs it)", file=sys.stderr)
    sys.exit(3)

DTYPES = {"F32": "<f4", "F16": "<f2", "I32": "<i4", "U8": "u1"}


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = entry["dtype"]
        if dtype == "BF16":
            raw = np.frombuffer(body[begin:end], dtype="<u2").astype("<u4") << 16
            values = raw.view("<f4")
        else:
            values = np.frombuffer(body[begin:end], dtype=DTYPES[dtype])
        shape = entry["shape"]
        if values.size != int(np.prod(shape, dtype=np.int64)):
            print(f"{name}: {values.size} values do not fill shape {shape}", file=sys.stderr)
            sys.exit(1)
        values.astype("<f4").reshape(-1).tofile(os.path.join(sys.argv[2], name + ".f32"))
        print(name, dtype, ",".join(str(d) for d in shape))
    for key in header.get("__metadata__", {}):
        print("metadata", key)


if __name__ == "__main__":
    main()
