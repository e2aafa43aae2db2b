#!/usr/bin/env bash
# After `go test ./...` no server started by internal/testsrv may still run:
# they are forked with a parent-death signal and stopped by testsrv.Main, so
# one left over means a helper leaks processes. Their command lines all name
# a /tmp/mqb-testsrv-<pid>-* directory.
set -euo pipefail
left=()
for f in /proc/[0-9]*/cmdline; do
  pid=${f#/proc/}; pid=${pid%/cmdline}
  [ "$pid" = "$$" ] && continue
  args=$(tr '\0' ' ' < "$f" 2>/dev/null || true)
  case "$args" in
    *mqb-testsrv-cache*) ;;
    *mqb-testsrv-*) left+=("$pid: $args") ;;
  esac
done
if [ ${#left[@]} -gt 0 ]; then
  echo "testsrv: servers outlived the test run:" >&2
  printf '  %s\n' "${left[@]}" >&2
  exit 1
fi
echo "testsrv: no server outlived the test run"
