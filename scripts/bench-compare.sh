#!/usr/bin/env bash
# Issue 10's comparison, re-runnable on any Linux machine with Go: Kawa against
# NATS JetStream and kfake at equal durability, each broker its own process on
# 127.0.0.1, restarted per cell, rounds rotated, W0 calibration per round.
# Prints the ratio table and writes bench-results/latest.json (+ .svg).
#
# usage: scripts/bench-compare.sh [--quick|--smoke|--full] [kawa-bench compare flags]
#   --quick  (default) W1, W2, W7, 3 rounds, under 5 minutes
#   --smoke  one round of tiny cells (~30 s), for CI: numbers mean nothing
#   --full   W1, W2 {1,16}p x {1,4} producers + 8p x 8, W7 1 GiB, 20 s cells
# KAWA_BENCH_WORK: parent of the brokers' data dirs (default $TMPDIR or /tmp);
# put it on the disk you mean to measure.
set -euo pipefail
cd "$(dirname "$0")/.."
NATS_SERVER_VERSION=v2.15.2
mode=--quick
if [ $# -gt 0 ] && [[ "$1" == --quick || "$1" == --smoke || "$1" == --full ]]; then mode=$1; shift; fi
BINDIR=$(mktemp -d)
WORK=$(mktemp -d "${KAWA_BENCH_WORK:-${TMPDIR:-/tmp}}/kawa-bench.XXXXXX")
trap 'rm -rf "$BINDIR" "$WORK"' EXIT
go build -o "$BINDIR/kawa" ./cmd/kawa
go build -o "$BINDIR/kawa-bench" ./cmd/kawa-bench
# nats-server is built from the module proxy into the temp dir: it is not a
# dependency of this module (the broker must never link it) and no binary is
# ever committed.
GOBIN="$BINDIR" GOFLAGS=-buildvcs=false go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
"$BINDIR/kawa-bench" compare "$mode" --kawa "$BINDIR/kawa" --nats-server "$BINDIR/nats-server" --work-dir "$WORK" "$@"
