#!/usr/bin/env bash
# Renders `pipewright compare` for p=4, m=8 and screenshots it with headless Chromium.
#   scripts/screenshot_report.sh [BUILD_DIR] [OUT_PNG]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
png=${2:-$root/docs/report.png}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/tools/pipewright" compare --pp 4 --microbatches 8 \
  --schedules 1f1b,interleaved,zb-h1,v-min,v-zb,dualpipev --report "$tmp/report.html" > /dev/null
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
  --user-data-dir="$tmp/profile" --window-size=1200,2000 --screenshot="$png" \
  "file://$tmp/report.html" 2> /dev/null
echo "wrote $png"
