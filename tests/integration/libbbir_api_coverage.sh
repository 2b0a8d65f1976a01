#!/bin/bash
# libbbir_api_coverage.sh — every public function of libbbir is used by
# some test.
#
# Public functions: the bb_* symbols libbbir.so exports that a public header
# (libbbir/include/bb/*.h) names, plus the static inline bb_* functions the
# headers define. Names with "__" are internal-but-shared (bb__vec_push,
# bb_value__free) and reached through the public ones.
# A test uses a function when its name appears in the preprocessed code of
# a tests/unit/test_*.c or tests/integration/*.c file: comments are gone,
# calls made through the tests' own X-macros and functions passed as
# pointers count, the headers' contents do not.
# Environment: BB_BUILD = absolute build dir (default ./build).
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.." || exit 2
BB_BUILD=${BB_BUILD:-$PWD/build}
LIB=$BB_BUILD/lib/libbbir.so
TMP=$(mktemp -d /tmp/bb-api-coverage.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

if [ ! -f "$LIB" ]; then
    fail "missing $LIB (build libbbir first)"
    echo "$passed passed, $failed failed"
    exit 1
fi

# ---- the public functions ----------------------------------------------------
nm -D --defined-only "$LIB" | awk '$2 == "T" { print $3 }' | grep -E '^bb_' |
    grep -v '__' | sort -u >"$TMP/exported"
cat libbbir/include/bb/*.h | sed 's,/\*.*\*/,,g' >"$TMP/headers"
while read -r f; do
    grep -qw "$f" "$TMP/headers" && echo "$f"
done <"$TMP/exported" >"$TMP/public"
grep -ohE 'static inline [^;{(]*\bbb_[a-z0-9_]+\(' libbbir/include/bb/*.h |
    grep -oE 'bb_[a-z0-9_]+\($' | tr -d '(' | grep -v '__' >>"$TMP/public"
sort -u -o "$TMP/public" "$TMP/public"
n_public=$(wc -l <"$TMP/public")
if [ "$n_public" -gt 200 ]; then
    ok "found $n_public public functions of libbbir"
else
    fail "found only $n_public public functions (expected hundreds): is $LIB current?"
fi

# ---- what the tests call -------------------------------------------------------
CFLAGS="-std=c11 -D_GNU_SOURCE -I. -Ilibbbir/include -Ilibbbengine/include -I$BB_BUILD/gen \
$(pkg-config --cflags libprotobuf-c libuv libcjson libsodium 2>/dev/null)"
: >"$TMP/called"
for src in tests/unit/test_*.c tests/integration/*.c; do
    [ -f "$src" ] || continue
    # shellcheck disable=SC2086
    if ! cc -E $CFLAGS "$src" -o "$TMP/pp.i" 2>"$TMP/pp.log"; then
        fail "preprocess $src"
        sed 's/^/     | /' "$TMP/pp.log" | head -10
        continue
    fi
    # keep the lines that come from the test file itself (line markers
    # name the file each following line comes from)
    awk -v want="\"$src\"" '
        /^# [0-9]+ "/ { cur = $3; next }
        cur == want { print }' "$TMP/pp.i" |
        grep -owE 'bb_[a-z0-9_]+' >>"$TMP/called"
done
sort -u -o "$TMP/called" "$TMP/called"

missing=$(comm -23 "$TMP/public" "$TMP/called")
if [ -z "$missing" ]; then
    ok "every public function is used by a test ($n_public)"
else
    for f in $missing; do
        hdr=$(grep -lw "$f" libbbir/include/bb/*.h | head -1)
        fail "$f (${hdr:-?}) is used by no test"
    done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
