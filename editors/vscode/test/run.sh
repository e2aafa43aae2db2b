#!/usr/bin/env bash
# Checks the TextMate grammar with the real engine: installs the pinned test
# dependencies from package-lock.json and runs node's test runner.
# Usage: bash editors/vscode/test/run.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
node --test
