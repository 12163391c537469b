#!/usr/bin/env bash
# Soak (issue 11 item 14): one `kawa serve` on its defaults under `kawa verify`
# at a fixed rate for a long time, with the broker's RSS and open file
# descriptors sampled, so leaks show as a slope instead of hiding in one
# snapshot. The broker is external to the verifier (--brokers), so it is never
# restarted and its curves are continuous; the faults are the ones that work
# against an external broker (client-crash, drop, slow).
#
# usage: scripts/soak.sh [DURATION] [OUTDIR]     (defaults: 30m, a new temp dir)
#   KAWA_SOAK_RATE   records/s per producer (default 200, verify's default)
#   KAWA_SOAK_EVERY  seconds between samples (default 10)
#
# Writes OUTDIR/samples.csv (elapsed_s,rss_kib,fds,threads), OUTDIR/verify.txt
# (the verifier's table) and prints a summary: first/last/max RSS and fds over
# the second half compared with the first, and the verifier's verdict. Exits
# with the verifier's status (1 when a semantic broke its guarantee).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-30m}
out=${2:-$(mktemp -d /tmp/kawa-soak.XXXXXX)}
rate=${KAWA_SOAK_RATE:-200}
every=${KAWA_SOAK_EVERY:-10}
mkdir -p "$out"

bin="$out/kawa"
go build -o "$bin" ./cmd/kawa
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 19092)
"$bin" serve --listen "127.0.0.1:$port" --data-dir "$out/data" >"$out/broker.log" 2>&1 &
broker=$!
sampler=""
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
	kill "$broker" 2>/dev/null || true
	wait "$broker" 2>/dev/null || true
}
trap cleanup EXIT

# Wait for the listener (the broker logs its address once it accepts).
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
	kill -0 "$broker" 2>/dev/null || { echo "kawa serve exited; see $out/broker.log"; exit 1; }
	sleep 0.1
done

# The sampler is this script's child; the trap stops it.
(
	echo "elapsed_s,rss_kib,fds,threads"
	start=$(date +%s)
	while kill -0 "$broker" 2>/dev/null; do
		rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$broker/status")
		thr=$(awk '/^Threads:/ {print $2}' "/proc/$broker/status")
		fds=$(ls "/proc/$broker/fd" | wc -l)
		echo "$(($(date +%s) - start)),$rss,$fds,$thr"
		sleep "$every"
	done
) >"$out/samples.csv" &
sampler=$!

set +e
"$bin" verify --brokers "127.0.0.1:$port" --duration "$duration" --rate "$rate" \
	--faults client-crash,drop,slow --out "$out/verify" >"$out/verify.txt" 2>"$out/verify.log"
status=$?
set -e
cat "$out/verify.txt"

# Summary: compare the first and second halves of the run (warm-up excluded:
# the first 10 % of samples fill caches and pools).
awk -F, 'BEGIN { n = 0 } NR > 1 { t[n] = $1; r[n] = $2; f[n] = $3; h[n] = $4; n++ }
END {
	if (n < 4) { print "too few samples"; exit }
	w = int(n / 10); mid = int((n + w) / 2)
	for (i = w; i < n; i++) {
		if (i < mid) { r1 = (r[i] > r1 ? r[i] : r1); f1 = (f[i] > f1 ? f[i] : f1) }
		else { r2 = (r[i] > r2 ? r[i] : r2); f2 = (f[i] > f2 ? f[i] : f2) }
		if (r[i] > rmax) rmax = r[i]; if (f[i] > fmax) fmax = f[i]
	}
	printf "samples: %d over %d s (every ~%d s)\n", n, t[n-1], (n > 1 ? t[n-1] / (n - 1) : 0)
	printf "RSS KiB: first %d, last %d, max %d; max of 1st half %d vs 2nd half %d\n", r[0], r[n-1], rmax, r1, r2
	printf "fds: first %d, last %d, max %d; max of 1st half %d vs 2nd half %d\n", f[0], f[n-1], fmax, f1, f2
	printf "threads: first %d, last %d\n", h[0], h[n-1]
}' "$out/samples.csv"
echo "output: $out (samples.csv, verify.txt, verify/, broker.log)"
exit "$status"
