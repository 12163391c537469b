#!/usr/bin/env bash
# Issue 2's measurements, re-runnable: produce throughput and latency (acks=all,
# 1 KiB records, 1 and 8 producers) for Kawa --fsync=always|never against the
# kfake peer at the same durability (SyncWrites | DataDir), interleaved in one
# run; then fetch throughput over a ~1 GiB log. Prints one JSON object per
# cell (kawa-bench's --json) prefixed by the cell name.
#
# usage: scripts/bench-core.sh [duration] [out-file]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
OUT=${2:-/dev/stdout}
BINDIR=$(mktemp -d)
BIN=$BINDIR/kawa
BENCH=$BINDIR/kawa-bench
go build -o "$BIN" ./cmd/kawa
go build -o "$BENCH" ./cmd/kawa-bench
PORT=19493

start_kawa() { # $1 fsync policy
  DIR=$(mktemp -d)
  "$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$DIR" --fsync "$1" --log-level warn &
  PID=$!
  sleep 1
}
start_kfake() { # $1 = sync|nosync
  DIR=$(mktemp -d)
  if [ "$1" = sync ]; then
    "$BENCH" peer-kfake --port $PORT --data-dir "$DIR" --sync-writes >/dev/null &
  else
    "$BENCH" peer-kfake --port $PORT --data-dir "$DIR" >/dev/null &
  fi
  PID=$!
  sleep 1
}
stop() { kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

cell() { # name, then bench flags
  local name=$1; shift
  printf '%s ' "$name" >>"$OUT"
  "$BENCH" produce --brokers 127.0.0.1:$PORT --json --broker-pid "$PID" --duration "$DUR" --warmup 3s \
    --acks all --record-size 1024 "$@" >>"$OUT"
}

for producers in 1 8; do
  start_kawa always;  cell "kawa-always-p$producers"  --producers $producers --partitions $producers; stop
  start_kfake sync;   cell "kfake-sync-p$producers"   --producers $producers --partitions $producers; stop
  start_kawa never;   cell "kawa-never-p$producers"   --producers $producers --partitions $producers; stop
  start_kfake nosync; cell "kfake-nosync-p$producers" --producers $producers --partitions $producers; stop
done

# Fetch from the start of a ~1 GiB log (fsync=never to fill it quickly).
start_kawa never
"$BENCH" produce --brokers 127.0.0.1:$PORT --topic fetch1g --partitions 1 --producers 4 --duration 6s --warmup 0s --json >/dev/null
printf 'kawa-fetch ' >>"$OUT"
"$BENCH" fetch --brokers 127.0.0.1:$PORT --topic fetch1g --json --broker-pid "$PID" >>"$OUT"
du -sh "$DIR" >&2
stop
