#!/usr/bin/env bash
# Dead-code check (golang.org/x/tools/cmd/deadcode): no function in non-test
# files is unreachable from the commands and the tests. Test binaries are
# roots because some non-test code exists for tests (internal/vfs's
# crash-clone FS, internal/kawatest). Exported functions and methods of the
# public SDK packages are their API, reachable by users' programs, so they are
# not reported; their unexported helpers are.
#
# usage: scripts/deadcode.sh   (exit 1 and the list when anything is dead)
set -euo pipefail
cd "$(dirname "$0")/.."
DEADCODE=${DEADCODE:-$(go env GOPATH)/bin/deadcode}
public='(dedup|delivery|outbox|sqlurl)'
all=$("$DEADCODE" -test ./...) # fails (set -e) when the packages do not build
dead=$(printf '%s\n' "$all" | grep -Ev "^${public}(/[a-z0-9_/]+)?/[a-z0-9_]+\.go:[0-9]+:[0-9]+: unreachable func: ([A-Za-z0-9_]+\.)?[A-Z]" | grep . || true)
if [ -n "$dead" ]; then
  echo "unreachable functions in non-test code:"
  echo "$dead"
  exit 1
fi
