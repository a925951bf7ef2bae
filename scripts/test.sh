#!/usr/bin/env bash
# README command (2): install if needed, then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest "$@"
