#!/usr/bin/env bash
# README command (1): install if needed, then the demo audit on the built-in testbed `tiny`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/trainspotter demo "$@"
