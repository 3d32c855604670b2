#!/usr/bin/env bash
# Create .venv with everything the harness needs (idempotent; fast when already done).
# torch is installed first and pinned: the CPU build 2.13.0 (a wheel on local disk on the dev/CI
# machines). Without the pin pip would pull a multi-GB CUDA build. On a GPU box, install your CUDA
# torch into .venv before running this; the >=2.13,<2.14 range in pyproject keeps it.
# The dependencies (pyproject.toml, with the test, java and ray extras) come from PyPI at the
# versions of constraints.txt; the checkout itself is put on the path by a .pth file, so edits take
# effect at once in every process (torchrun ranks, Ray workers) without a build step. The console
# commands of pyproject.toml ([project.scripts]: benchmark, benchmark-run, …) are written into
# .venv/bin by scripts/install_commands.py, as pip would write them for an installed package.
# It prints one line per step as the step starts (the dependencies take minutes on a fresh machine).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
step() { echo "setup: $*"; }
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $PY"
  "$PY" -m venv .venv
fi
stamp=.venv/.benchmark-setup
want=$(cat pyproject.toml constraints.txt scripts/setup.sh scripts/install_commands.py | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/benchmark ]; then
  step ".venv is up to date"
  exit 0
fi
quiet() { grep -v "is ignored" || true; }
step "upgrading pip"
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | quiet
step "installing torch 2.13.0 (the CPU build unless a CUDA torch is already in .venv)"
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" 2>&1 | quiet
deps=$(.venv/bin/python - <<'PYEOF'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project.get("optional-dependencies", {})
print("\n".join(project["dependencies"] + [d for name in ("test", "java", "ray") for d in extras.get(name, [])]))
PYEOF
)
mapfile -t reqs <<< "$deps"
step "installing ${#reqs[@]} dependencies of pyproject.toml at the versions of constraints.txt (minutes when new)"
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt "${reqs[@]}" 2>&1 | quiet
step "putting the checkout on the path and writing the commands into .venv/bin"
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -f "$site"/__editable__.benchmark-*.pth "$site"/__editable___benchmark_*finder.py
pwd > "$site/splade-rescale-benchmark.pth"
.venv/bin/python scripts/install_commands.py .venv/bin
.venv/bin/python -c "import benchmark, torch, pyserini, sentence_transformers, ir_measures, ir_datasets" 2>/dev/null \
  || { echo "setup: the installation is incomplete; rerun with network access to PyPI" >&2; exit 1; }
echo "$want" > "$stamp"
step "done: . scripts/offline.sh (where ../shared holds the offline data), then .venv/bin/benchmark run --suite smoke"
