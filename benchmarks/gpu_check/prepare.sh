#!/bin/sh
# Here, before a GPU run: what a lent GPU machine lacks, into build/gpu-carry (ignored by git),
# under the 64 MiB a run may carry. Run from the repository root: sh benchmarks/gpu_check/prepare.sh
#   whl/rsilab:  rsilab's own dependencies the machine's image does not hold, for its Python 3.12,
#                at the versions of this checkout's venv (installed beside, never into, the runtime)
#   whl/runtime: the posttrain harness's pinned libraries (transformers, tokenizers, peft),
#                installed into the interpreter `rsilab runtime adopt` then adopts
#   bin/bwrap:   this machine's bubblewrap, installed there only when the machine has none
set -eu
CARRY=build/gpu-carry
PY=${PYTHON:-.venv/bin/python}
rm -rf "$CARRY"
mkdir -p "$CARRY/whl/rsilab" "$CARRY/whl/runtime" "$CARRY/bin"
download() {
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform any -d "$@"
}
pins=$("$PY" -c '
import importlib.metadata as m
names = ["pydantic", "pydantic-core", "annotated-types", "typing-inspection", "rfc8785",
         "platformdirs", "optuna", "colorlog"]
print(" ".join(f"{n}=={m.version(n)}" for n in names))')
download "$CARRY/whl/rsilab" $pins
runtime=$("$PY" -c '
from rsilab.tasks.builtin.posttrain import RUNTIME_REQUIREMENTS
print(" ".join(RUNTIME_REQUIREMENTS))')
download "$CARRY/whl/runtime" $runtime
cp "$(command -v bwrap)" "$CARRY/bin/bwrap"
du -sh "$CARRY"
