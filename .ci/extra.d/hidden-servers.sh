#!/usr/bin/env bash
# The README promises that its `go test` command passes on a machine without the
# Debian servers: a test needing PostgreSQL, MariaDB or ClickHouse skips,
# naming the package to install. Check it here by hiding every one of them
# (internal/testsrv reads MQB_TESTSRV_HIDE; they are found at fixed paths,
# not on PATH) and running, without CI=true, tests that use them: they
# must skip cleanly, not fail. A quick selection (the shared dedup and
# checkpoint stores, whose subtests once skipped their parent), under 60 s;
# the runtime package's server tests take minutes even when they skip.
set -euo pipefail
cd "$(dirname "$0")/../.."
export MQB_TESTSRV_HIDE=postgres,mariadb,clickhouse
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
env -u CI go test -count=1 -timeout 120s -v ./runtime/dedup ./runtime/checkpoint >"$out" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  grep -E '^(\s*--- FAIL|FAIL|panic)|_test\.go:[0-9]+' "$out" | head -40 >&2
  echo "hidden-servers: tests failed with the servers hidden (they must skip)" >&2
  exit 1
fi
skips=$(grep -c -- '--- SKIP' "$out" || true)
if ! grep -q 'hidden by MQB_TESTSRV_HIDE' "$out"; then
  echo "hidden-servers: no test skipped for a hidden server: the selection no longer reaches them" >&2
  exit 1
fi
echo "hidden-servers: ok ($skips tests skipped with postgres, mariadb and clickhouse hidden)"
