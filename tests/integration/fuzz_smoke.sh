#!/bin/bash
# fuzz_smoke.sh — every libFuzzer target (make fuzz, build-fuzz/fuzz/) for a
# few seconds on its seeds, and every committed regression input once
# (scripts/fuzz-smoke). Ends with "N passed, N failed".
cd "$(dirname "$0")/../.." || exit 2
exec scripts/fuzz-smoke
