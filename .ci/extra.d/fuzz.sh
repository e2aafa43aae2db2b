#!/usr/bin/env bash
# Bounded fuzzing of the .mqb front end, the diagnostic renderer and the records' JSON decoder
# (against encoding/json) on top of the committed corpus (lang/testdata/fuzz,
# compiler/testdata/fuzz, diag/testdata/fuzz, internal/jsonvalue/testdata/fuzz). A crasher fails CI; go test
# writes it under testdata/fuzz so it can be committed as a regression case.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${MQB_FUZZTIME:-30s}"
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "$secs" ./lang
go test -run '^$' -fuzz '^FuzzCompile$' -fuzztime "$secs" ./compiler
go test -run '^$' -fuzz '^FuzzRender$' -fuzztime "$secs" ./diag
go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime "$secs" ./internal/jsonvalue
