#!/usr/bin/env bash
# README command (2): install if needed, then the whole test suite on two workers
# (pytest-xdist; a module's tests stay on one worker, and tests/conftest.py shares the
# testbeds between them). Extra arguments go to pytest: `-n 0` runs it in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
