#!/usr/bin/env bash
# The Python packages some tests run as independent checks of Strata's exports (onnxruntime, onnx, gguf,
# numpy), from PyPI, in a virtual environment of their own. Idempotent: a venv that already imports them is
# left as it is. The app itself needs none of them.
# Location: $STRATA_TEST_VENV, default ~/.cache/strata/test-venv (shared by every checkout of the user); CMake
# reads the same variable when it configures, so the tests find the venv's python.
set -euo pipefail

venv=${STRATA_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/test-venv}
packages=(onnxruntime==1.32.0 onnx==1.23.2 gguf==0.19.0 numpy)
check='import onnxruntime, onnx, gguf, numpy'

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    exit 0
fi
# Debian's python3 (with python3-venv) when present; any python3 otherwise.
python=/usr/bin/python3
[[ -x "$python" ]] || python=$(command -v python3)
echo "Creating the test venv $venv (${packages[*]})"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}"
"$venv/bin/python" -c "$check"
