#!/usr/bin/env bash
# Render an audit's HTML report in headless Chromium and save a PNG screenshot.
#   bash scripts/screenshot_report.sh RUN_ID [OUT.png]
# Installs Debian's chromium when missing (idempotent). The flags keep Chromium
# off the network: the report is self-contained and must render with none.
set -euo pipefail
cd "$(dirname "$0")/.."
run_id=${1:?usage: screenshot_report.sh RUN_ID [OUT.png]}
out=${2:-artifacts/report-$run_id.png}
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
html=$(mktemp --suffix=.html)
.venv/bin/trainspotter report "$run_id" --out "$html" >/dev/null
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$(mktemp -d)" --window-size=900,1400 --screenshot="$out" "file://$html" 2>/dev/null
echo "$out"
