#!/usr/bin/env bash
# Crash matrix (chaos/): every source × sink pair the runtime supports runs
# the real mqbc binary under seeded SIGKILLs, then is read back; any loss,
# or any duplicate on an effectively-once route, fails CI. A few minutes
# on 2 cores. CHAOS_KILLS / CHAOS_SEED override the defaults below; the
# matrix is printed and written to $CHAOS_MATRIX (README "Reliability
# matrix" holds a copy).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CHAOS_KILLS="${CHAOS_KILLS:-24}"
export CHAOS_SEED="${CHAOS_SEED:-$(date +%s)}"
export CHAOS_MATRIX="${CHAOS_MATRIX:-${TMPDIR:-/tmp}/mqb-chaos-matrix.md}"
echo "chaos: seed $CHAOS_SEED, $CHAOS_KILLS kills per pair (rerun with CHAOS_SEED=$CHAOS_SEED)"
go test -tags chaos -count=1 -timeout 25m -v ./chaos 2>&1 | grep -v '^=== ' 
