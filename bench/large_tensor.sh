#!/bin/bash
# large_tensor.sh — a tensor far larger than any frame between two bbd
# processes (make bench runs it): 3 GiB of floats (LARGE_GIB) go from
# one node to the other on loopback TCP as a chunk stream through 16 MiB
# frames (8 MiB chunks); the receiver's budget and largest envelope are
# the tensor plus 1/8. Reported: the time from the invoke to the
# receiver's digest (the sender fills and digests the tensor first: the
# figure includes that, and the receiver's digest), the rate, the two
# digests, each node's peak RSS against the tensor's size. Exit status 0
# when the digests match.
#
# Environment: BUILD (default build), LARGE_GIB (3).
set -u
BB_BUILD=$(cd "$(dirname "$0")/.." && pwd)/${BUILD:-build}
export BB_BUILD
source "$(dirname "$0")/../tests/integration/bbd_common.bash"
source tests/integration/large_tensor_common.bash

GIB=${LARGE_GIB:-3}
FLOATS=$((GIB << 28)) # 4-byte floats
BYTES=$((FLOATS * 4))
MB=$((BYTES >> 20))
compile_example large_tensor || { echo "bench large_tensor: bbc compile failed"; exit 1; }
lt_config "$TMP/node.json" $((16 << 20)) $((BYTES + BYTES / 8)) $((BYTES + BYTES / 8)) $((256 << 20))
lt_start_rx "$TMP/node.json"
lt_start_tx "$TMP/node.json" "$RX_PORT"
echo "large_tensor: $GIB GiB ($FLOATS floats) bbd -> bbd on loopback TCP, 16 MiB frames"
rc=0
lt_send "$FLOATS" 600 || { echo "  the tensor did not arrive within 600 s"; rc=1; }
printf '  %-44s %10s\n' "figure" "value"
printf '  %-44s %10.1f\n' "invoke to the receiver's digest, s" "$LT_SECONDS"
printf '  %-44s %10.0f\n' "tensor MB / that time, MB/s" "$(echo "$MB / $LT_SECONDS" | bc -l)"
printf '  %-44s %10s\n' "digests equal" "$([ -n "$LT_SENT" ] && [ "$LT_SENT" = "$LT_GOT" ] && echo yes || echo NO)"
for n in tx rx; do
    peak=$(lt_peak_mb "$n")
    printf '  %-44s %10s\n' "$n peak RSS, MB (x tensor)" "$peak ($(echo "scale=2; $peak / $MB" | bc)x)"
done
printf '  %-44s %10s\n' "sender streams.resumed / failed" \
    "$(lt_counter tx streams.resumed) / $(lt_counter tx streams.failed)"
[ -n "$LT_SENT" ] && [ "$LT_SENT" = "$LT_GOT" ] || rc=1
stop_nodes "both nodes stop cleanly" tx rx >/dev/null
exit $rc
