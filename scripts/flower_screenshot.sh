#!/usr/bin/env bash
# Screenshot of Flower's dashboard during `hbgw demo`, into docs/img/flower.png (run by hand,
# not by CI). Needs the Debian package `chromium` and the project's .venv.
#
#   scripts/flower_screenshot.sh [PAGE [OUT]]   # PAGE: workers (default), tasks; OUT: the png
#
# The demo runs in a temporary HBGW_HOME with an embedded Redis; Flower joins it through that
# home's redis.url, on loopback only (--unauthenticated-loopback: nobody else can reach it, and
# a headless browser cannot type a password). Only processes this script started are stopped.
set -euo pipefail

cd "$(dirname "$0")/.."
HBGW=${HBGW:-.venv/bin/hbgw}
PAGE=${1:-workers}
OUT=${2:-docs/img/flower.png}
PORT=${FLOWER_PORT:-5599}
WORK=$(mktemp -d)
demo_pid="" flower_pid=""

cleanup() {
    [ -n "$flower_pid" ] && kill "$flower_pid" 2>/dev/null || true
    [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

command -v chromium >/dev/null || { echo "chromium is not installed (apt-get install chromium)" >&2; exit 1; }

"$HBGW" demo --duration 60 >"$WORK/demo.log" 2>&1 &
demo_pid=$!

# The demo prints its temporary home on its first line: "hbgw demo — 60s in /tmp/hbgw-demo-…".
home=""
for _ in $(seq 1 300); do
    home=$(grep -o '/[^ ]*hbgw-demo-[^ ]*' "$WORK/demo.log" | head -n1 || true)
    [ -n "$home" ] && [ -f "$home/redis.url" ] && break
    sleep 0.1
done
[ -n "$home" ] && [ -f "$home/redis.url" ] || { cat "$WORK/demo.log" >&2; exit 1; }

HBGW_HOME="$home" HBGW_LOG_FORMAT=text "$HBGW" flower --port "$PORT" --unauthenticated-loopback \
    >"$WORK/flower.log" 2>&1 &
flower_pid=$!

# Let workers register and a few ticks of fires reach Flower's event view.
for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$PORT/healthcheck" >/dev/null 2>&1 && break
    sleep 0.1
done
sleep 15

mkdir -p "$(dirname "$OUT")"
rm -f "$WORK/shot.png"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$WORK/profile" --window-size=1280,900 --virtual-time-budget=5000 \
    --screenshot="$WORK/shot.png" "http://127.0.0.1:$PORT/$PAGE" >/dev/null 2>&1 || true
# Chromium exits 0 even when the page did not load: the file is the proof.
[ -s "$WORK/shot.png" ] || { echo "no screenshot was written" >&2; cat "$WORK/flower.log" >&2; exit 1; }
mv "$WORK/shot.png" "$OUT"
echo "wrote $OUT"
