"""llama.cpp's own Python GGUF package (gguf, PyPI) as an independent check of Strata's GGUF block types.

usage: PYTHON tools/gguf_quants.py dequantize FILE.gguf OUT_DIR
           reads FILE.gguf with gguf.GGUFReader and writes each tensor, dequantized by gguf.quants, to
           OUT_DIR/<name>.f32 (raw little-endian float32); prints "name type n_elements" per tensor
       PYTHON tools/gguf_quants.py quantize q4_0|q8_0 IN.f32 OUT.bin
           quantizes the float32 values of IN.f32 (a multiple of 32) with gguf.quants and writes the blocks
Exit status 3 when the gguf package is missing (tools/setup-test-venv.sh installs it).
"""
import os
import sys

try:
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import dequantize, quantize
except ImportError as e:  # pragma: no cover
    print(f"gguf_quants: {e} (tools/setup-test-venv.sh installs it)", file=sys.stderr)
    sys.exit(3)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "dequantize":
        reader = GGUFReader(sys.argv[2])
        os.makedirs(sys.argv[3], exist_ok=True)
        for t in reader.tensors:
            values = dequantize(t.data, t.tensor_type).astype("<f4").reshape(-1)
            values.tofile(os.path.join(sys.argv[3], t.name + ".f32"))
            print(t.name, t.tensor_type.name, int(t.n_elements))
    elif len(sys.argv) == 5 and sys.argv[1] == "quantize":
        qtype = {"q4_0": GGMLQuantizationType.Q4_0, "q8_0": GGMLQuantizationType.Q8_0}[sys.argv[2]]
        values = np.fromfile(sys.argv[3], dtype="<f4")
        quantize(values.reshape(-1, 32), qtype).tofile(sys.argv[4])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
