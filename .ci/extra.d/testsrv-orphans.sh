#!/usr/bin/env bash
# After the README's `go test` command no server started by internal/testsrv may outlive the
# test binary that started it: they are forked with a parent-death signal and
# stopped by testsrv.Main, so one left over means a helper leaks processes.
# Their command lines all name a /tmp/mqb-testsrv-<pid>-* directory, where
# <pid> is the test binary's; servers of a binary still running are fine.
set -euo pipefail
left=()
for f in /proc/[0-9]*/cmdline; do
  pid=${f#/proc/}; pid=${pid%/cmdline}
  [ "$pid" = "$$" ] && continue
  args=$(tr '\0' ' ' 2>/dev/null < "$f" || true) # a process may end while we look
  [[ "$args" =~ mqb-testsrv-([0-9]+)- ]] || continue
  owner=${BASH_REMATCH[1]}
  [ -d "/proc/$owner" ] && continue
  left+=("$pid (test binary $owner gone): $args")
done
if [ ${#left[@]} -gt 0 ]; then
  echo "testsrv: servers outlived their test binary:" >&2
  printf '  %s\n' "${left[@]}" >&2
  exit 1
fi
echo "testsrv: no server outlived its test binary"
