# federated_common.bash — shared by the federated_*.sh acceptance tests
# (sourced, not run). Builds on bbd_common.bash (real bbd processes on
# 127.0.0.1, port 0, a temporary directory, every process killed on exit,
# waits bounded by deadlines) with the real component plugins and the
# program of examples/federated:
#
#   record NAME ARGS...          record with the example's knobs and compile
#                                with bbc -> $TMP/NAME.onnx
#   start_server NAME ONNX [JSON_EXTRA] [LISTEN]
#                                a Server on the held-out 20% of digits;
#                                JSON_EXTRA adds top-level config keys
#   serve NAME ONNX [WHAT]       start_server, then server_identity and
#                                watch_rounds (WHAT names it in a failure)
#   start_client NAME ONNX SERVER I N [PARTITION] [MODEL_JSON] [DATA_MEMBERS]
#                                client I of N (its shard of the training
#                                rows), connected to node SERVER; DATA_MEMBERS
#                                adds JSON members to its data config
#   start_client_at NAME ONNX I ADDR
#                                client I of 4 listening on UDP only, knowing
#                                the server ($SERVER_ID) only at ADDR (a relay)
#   start_clients ONNX SERVER N [PARTITION]
#                                clients c0 .. c(N-1), all of N
#   wait_connected NAME N        until N clients connected to NAME (watched);
#                                sets K0, the first round that asked them all
#   watch_rounds NAME            stream NAME's events into $TMP/NAME.events
#   wait_rounds NAME N SECONDS   until N round events arrived
#   expect_rounds NAME N SECONDS LABEL
#                                ok LABEL when K0 + N rounds arrive within
#                                SECONDS, else not ok with NAME's log
#   round_of NAME I EXPR         python EXPR over round I (0-based) of NAME's
#                                events: r (round, participants, samples,
#                                loss, accuracy, ms, before, after)
#   cut_and_restore NAME         the fault relay ($RELAY_PID) cuts NAME's link
#                                mid-round for 3 s; rounds go on (fault tests)
source "$(dirname "${BASH_SOURCE[0]}")/bbd_common.bash"

FED=$BB_BUILD/examples/federated
use_example "$FED"

record() { record_program "$FED" "$@"; } # NAME ARGS...

# FED_NODE_JSON: members added to the config of every node start_server and
# start_client_at write (the fault tests: '"security": "off"').
start_server() { # NAME ONNX [JSON_EXTRA] [LISTEN]
    local name=$1 onnx=$2 extra=${3:-} listen=${4:-/ip4/127.0.0.1/tcp/0}
    cat >"$TMP/$name.json" <<JSON
{"components": {"data": {"path": "$DIGITS", "part": "holdout"}}${extra:+, $extra}${FED_NODE_JSON:+, $FED_NODE_JSON}}
JSON
    start_node "$name" --config "$TMP/$name.json" --targets Server --listen "$listen" "$onnx"
}

start_client() { # NAME ONNX SERVER I N [PARTITION] [MODEL_JSON] [DATA_MEMBERS]
    local name=$1 onnx=$2 server=$3 i=$4 n=$5 partition=${6:-iid} model=${7:-} extra=${8:-}
    local model_cfg=""
    [ -n "$model" ] && model_cfg=", \"model\": $model"
    cat >"$TMP/$name.json" <<JSON
{"components": {"data": {"path": "$DIGITS", "shard_count": $n, "shard_index": $i,
                         "partition": "$partition", "seed": $((10 + i))${extra:+, $extra}}$model_cfg}}
JSON
    start_node "$name" --config "$TMP/$name.json" --targets Client --listen /ip4/127.0.0.1/tcp/0 \
        --peer "$SERVER_ID=$SERVER_ADDR" "$onnx"
}

start_client_at() { # NAME ONNX I ADDR
    cat >"$TMP/$1.json" <<JSON
{"components": {"data": {"path": "$DIGITS", "shard_count": 4, "shard_index": $3,
                         "partition": "iid", "seed": $((10 + $3))}}${FED_NODE_JSON:+, $FED_NODE_JSON}}
JSON
    start_node "$1" --config "$TMP/$1.json" --targets Client --listen /ip4/127.0.0.1/udp/0 \
        --peer "$SERVER_ID=$4" "$2"
}

start_clients() { # ONNX SERVER N [PARTITION]
    local i
    for ((i = 0; i < $3; i++)); do
        start_client "c$i" "$1" "$2" "$i" "$3" "${4:-iid}" || not_ok "client $i starts" "$TMP/c$i.log"
    done
}

# The server's identity for the clients' --peer (after start_server).
server_identity() { # NAME
    SERVER_ID=$(node_peer "$1")
    SERVER_ADDR=$(node_addr "$1" tcp)
}

serve() { # NAME ONNX [WHAT]
    start_server "$1" "$2" || not_ok "${3:-server} starts" "$TMP/$1.log"
    server_identity "$1"
    watch_rounds "$1"
}

declare -A WATCH_PID=()
watch_rounds() { # NAME
    ctl "$1" --json watch --kind app --kind peer --kind failure >>"$TMP/$1.events" 2>&1 &
    WATCH_PID[$1]=$!
    wait_until 10 watchers_are "$1" 1
}

stop_watch() { # NAME
    kill "${WATCH_PID[$1]}" 2>/dev/null
    wait "${WATCH_PID[$1]}" 2>/dev/null
    unset "WATCH_PID[$1]"
}

rounds_seen() {
    local n
    n=$(grep -c '"topic":"round"' "$TMP/$1.events" 2>/dev/null)
    echo "${n:-0}"
}
has_rounds() { [ "$(rounds_seen "$1")" -ge "$2" ]; }
wait_rounds() { wait_until "$3" has_rounds "$1" "$2"; }
expect_rounds() { # NAME N SECONDS LABEL
    if wait_rounds "$1" $((K0 + $2)) "$3"; then
        ok "$4"
    else
        not_ok "$4: only $(rounds_seen "$1") of $K0 + $2 rounds" "$TMP/$1.log"
    fi
}

connected_at_least() { [ "$(grep -c '"event":"connected"' "$TMP/$1.events")" -ge "$2" ]; }
# A round that started before the last client connected asked fewer: K0
# (0-based) skips one more, which may have been under way when it connected.
wait_connected() { # NAME N
    wait_until 20 connected_at_least "$1" "$2" || not_ok "the $2 clients connect" "$TMP/$1.log"
    K0=$(($(rounds_seen "$1") + 1))
}

# python EXPR over round I (0-based) of NAME's events, as r: a dict.
round_of() { # NAME I EXPR
    "$PY" - "$TMP/$1.events" "$2" "$3" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if '"topic":"round"' in l]
it = [x.get("value") if "value" in x else x.get("data", [None])[0]
      for x in evs[int(sys.argv[2])]["value"]["items"]]
it = [int(v) if isinstance(v, str) else v for v in it]
r = dict(round=it[0], participants=it[1], samples=it[2], loss=it[3], accuracy=it[4],
         ms=(it[6] - it[5]) / 1e6, before=it[7], after=it[8])
v = eval(sys.argv[3])
print(json.dumps(v) if isinstance(v, (bool, list, dict)) else v)
PY
}

# The relay (pid RELAY_PID) cuts the link 0.3 s into a round of server
# NAME for 3 s and restores it: rounds must go on, the last with a quorum.
cut_and_restore() { # NAME
    wait_until 30 has_rounds "$1" $(($(rounds_seen "$1") + 1))
    sleep 0.3 # into the next round
    kill -USR1 "$RELAY_PID"
    local cut_at last
    cut_at=$(rounds_seen "$1")
    sleep 3
    kill -USR2 "$RELAY_PID"
    if wait_rounds "$1" $((cut_at + 3)) 90; then
        ok "after a 3 s cut mid-round and the link restored, rounds go on"
    else
        not_ok "no rounds after the link came back" "$TMP/$1.log"
    fi
    last=$(($(rounds_seen "$1") - 1))
    [ "$(round_of "$1" "$last" 'r["participants"]' 2>/dev/null || echo 0)" -ge 2 ] &&
        ok "the last round had its quorum" || not_ok "round $last participants"
}
