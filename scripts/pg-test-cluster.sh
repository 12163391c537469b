#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the SDK tests and prints its URL.
#
#   eval "$(scripts/pg-test-cluster.sh start DIR)"   # exports KAWA_TEST_POSTGRES_URL
#   scripts/pg-test-cluster.sh stop DIR
#
# The cluster lives in DIR, listens on no TCP port (listen_addresses='') and
# only on a Unix socket inside DIR, and runs as the `postgres` user because the
# server refuses to run as root. Needs Debian's postgresql package.
set -euo pipefail
cmd=${1:?usage: pg-test-cluster.sh start|stop DIR}
dir=${2:?usage: pg-test-cluster.sh start|stop DIR}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bindir" ] || { echo "postgresql server binaries not found (apt-get install postgresql)" >&2; exit 1; }
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$cmd" in
start)
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync >/dev/null
  fi
  as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=on -c max_connections=200" start >/dev/null
  echo "export KAWA_TEST_POSTGRES_URL='postgres:///postgres?host=$dir&user=postgres&sslmode=disable'"
  ;;
stop)
  as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac
