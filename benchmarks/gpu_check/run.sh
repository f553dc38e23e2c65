#!/bin/bash
# On a lent GPU machine, from the repository root, after prepare.sh here:
#   run(command="bash benchmarks/gpu_check/run.sh", carry=["build/gpu-carry"], timeout_s=540)
# Installs what build/gpu-carry holds, then runs check.py with gpus = 1; gpu_check.json and
# the log land in $OUT. Nothing is downloaded (the machine has no network).
set -euo pipefail
CARRY=build/gpu-carry
PY=$(command -v "${GPU_PYTHON:-python3}")
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv || true
"$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available())'
# rsilab's dependencies beside the machine's packages; the runtime's pins into its interpreter
"$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/rsilab-site "$CARRY"/whl/rsilab/*.whl
"$PY" -m pip install -q --no-index --no-deps --no-compile "$CARRY"/whl/runtime/*.whl
command -v bwrap >/dev/null || install -m 0755 "$CARRY/bin/bwrap" /usr/bin/bwrap
for tool in bwrap prlimit setpriv; do command -v "$tool" >/dev/null || echo "missing: $tool"; done
export PYTHONPATH="/tmp/rsilab-site:$PWD/src:$PWD"
"$PY" -m benchmarks.gpu_check --python "$PY" --out "${OUT:-.}" 2>&1 | tee "${OUT:-.}/gpu_check.log"
