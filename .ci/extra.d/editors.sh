#!/usr/bin/env bash
# Tokenizes every .mqb file with the real TextMate engine (editors/vscode/test).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash editors/vscode/test/run.sh
