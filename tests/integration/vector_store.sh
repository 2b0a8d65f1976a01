#!/bin/bash
# The vector store of examples/vector_store on real bbd processes
# (127.0.0.1, port 0):
#
#  - a VectorStore node is bootstrapped with a 20k x 32 seed corpus staged
#    by `bbctl bootstrap --module VectorStore seed_corpus=@corpus.pb`; its
#    bootstrap trains an index::IvfPq on the node's worker pool and adds
#    the corpus;
#  - a query invoked while that bootstrap is still running (status says
#    so after the invoke returned) waits on the op lock: it is answered
#    after BootstrapComplete, with no failure, and its top 10 overlap the
#    exact top 10 (numpy) by at least 6, nearest first (corpus row 7, the query's source);
#  - a Client node asks the store over the wire and gets the same answer;
#  - the store, stopped (snapshot) and started again, answers the same
#    query with the same ids and distances, without a new bootstrap;
#  - an index::Hnsw build of the program answers the same way, and its
#    restarted node too;
#  - `bbc plugins` lists the three index types, and bb-index(7) renders
#    without warnings and documents every config key they declare.
source "$(dirname "$0")/bbd_common.bash"

PLUG=$BB_BUILD/lib/bytesandbrains/plugins
REC=$BB_BUILD/examples/vector_store
DATA=$TMP/data
if [ ! -x "$REC" ] || ! "$PY" examples/vector_store/corpus.py "$DATA" --rows 20000 --dim 32 \
    >"$TMP/corpus.log" 2>&1; then
    echo "FAIL $REC is not built or examples/vector_store/corpus.py failed"
    cat "$TMP/corpus.log" 2>/dev/null
    echo "0 passed, 1 failed"
    exit 1
fi

record() { record_program "$REC" "$@"; } # NAME ARGS...

# ids (one line, space-separated) and distances of a Search result in a
# --json reply, found wherever it sits (a ResponseBatch wraps it)
result_of() {
    "$PY" -c '
import json, sys
d = json.load(sys.stdin)
def find(v):
    if isinstance(v, dict):
        if v.get("type") == "Composite" and len(v.get("items", [])) == 2 \
                and v["items"][0].get("dtype") == "uint64":
            return v
        for x in v.values():
            r = find(x)
            if r: return r
    if isinstance(v, list):
        for x in v:
            r = find(x)
            if r: return r
c = find(d["event"]["value"])
print(" ".join(map(str, c["items"][0]["data"])), "|", " ".join(map(repr, c["items"][1]["data"])))
'
}

ask() { # NODE TARGET OUT: one query, waiting for its results; prints them
    ctl "$1" --json --timeout 20 invoke "$2" query=@"$DATA/query.pb" --wait results >"$3" 2>&1 &&
        result_of <"$3"
}

overlap() { # "IDS | DIST" EXACT.json -> how many ids are in the exact top 10
    "$PY" -c 'import json,sys; got=sys.argv[1].split("|")[0].split(); ex=json.load(open(sys.argv[2]))
print(len(set(map(int, got)) & set(ex)))' "$1" "$2"
}

# ---- IvfPq: the bootstrap on the worker pool, a query during it --------------------------
if record vs; then ok "recorded and compiled"; else not_ok "recorded and compiled" "$TMP/record-vs.log"; finish; fi
# more k-means iterations than the default: Train takes long enough to query during it
echo '{"components": {"index": {"train_iterations": 30}}}' >"$TMP/store.json"
start_node store --config "$TMP/store.json" --targets VectorStore \
    --listen /ip4/127.0.0.1/tcp/0 "$TMP/vs.onnx" || not_ok "store starts" "$TMP/store.log"
[ "$(ctl store --json status | jget 'd["bootstrap"]')" = waiting_for_input ] &&
    ok "the store waits for its seed corpus" || not_ok "the store waits for its seed corpus"

ctl store --json --timeout 200 watch --kind app --kind bootstrap --kind failure >"$TMP/store.events" 2>&1 &
WATCH=$!
wait_until 10 watchers_are store 1 || not_ok "watcher attached"
ctl store bootstrap --module VectorStore seed_corpus=@"$DATA/corpus.pb" >"$TMP/boot.out" 2>&1 ||
    not_ok "bootstrap staged" "$TMP/boot.out"
ctl store --json invoke VectorStore query=@"$DATA/query.pb" >"$TMP/early.out" 2>&1 ||
    not_ok "early query accepted" "$TMP/early.out"
during=$(ctl store --json status | jget 'd["bootstrap"]')
if [ "$during" = running ]; then
    ok "the query went in while the bootstrap was running"
else
    not_ok "the query went in while the bootstrap was running (status: $during)"
fi
early_exec=$(jget 'd["exec_id"]' <"$TMP/early.out")
answered() { grep -q "\"exec_id\":$early_exec,.*\"topic\":\"results\"" "$TMP/store.events"; }
if wait_until 180 answered; then ok "the early query is answered"; else not_ok "the early query is answered" "$TMP/store.events"; fi
kill "$WATCH" 2>/dev/null
wait "$WATCH" 2>/dev/null
order=$("$PY" -c '
import json, sys
kinds = []
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    if e.get("event") == "BootstrapComplete": kinds.append("complete")
    elif e.get("topic") == "results" and e.get("exec_id") == int(sys.argv[2]): kinds.append("results")
    elif e.get("event") in ("OpFailed", "BootstrapFailed"): kinds.append("failed")
print(" ".join(kinds))' "$TMP/store.events" "$early_exec")
if [ "$order" = "complete results" ]; then
    ok "it waited on the op lock: BootstrapComplete, then its results, no failure"
else
    not_ok "it waited on the op lock (events: $order)" "$TMP/store.events"
fi
early=$(grep "\"exec_id\":$early_exec,.*\"topic\":\"results\"" "$TMP/store.events" | head -1 |
    "$PY" -c 'import json,sys; print(json.dumps({"event": json.loads(sys.stdin.read())}))' | result_of)
n=$(overlap "$early" "$DATA/exact.json")
if [ "${n:-0}" -ge 6 ] && [ "${early%% *}" = 7 ]; then ok "IvfPq top 10 starts with row 7 and holds $n of the exact top 10"; else not_ok "IvfPq top 10 holds $n of the exact 10: $early"; fi

# ---- a second node asks over the wire -----------------------------------------------------
start_node client --targets Client --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$(node_peer store)=$(node_addr store tcp)" "$TMP/vs.onnx" ||
    not_ok "client starts" "$TMP/client.log"
store_connected() { [ "$(ctl client --json status | jget 'len(d["connections"])')" -ge 1 ]; }
wait_until 15 store_connected || not_ok "client connected" "$TMP/client.log"
if remote=$(ask client Client "$TMP/remote.out"); then
    [ "$remote" = "$early" ] && ok "the client's answer over the wire is the store's" ||
        not_ok "the client's answer over the wire is the store's: $remote vs $early"
else
    not_ok "the client gets an answer over the wire" "$TMP/remote.out"
fi

# ---- restarted from its snapshot ----------------------------------------------------------
stop_node store
[ "$STOP_RC" = 0 ] && ok "store stops cleanly (snapshot)" || not_ok "store stops cleanly" "$TMP/store.log"
start_node store --config "$TMP/store.json" --targets VectorStore \
    --listen /ip4/127.0.0.1/tcp/0 "$TMP/vs.onnx" || not_ok "store restarts" "$TMP/store.log"
[ "$(ctl store --json status | jget 'd["bootstrap"]')" = idle ] &&
    ok "the restored store needs no bootstrap" || not_ok "the restored store needs no bootstrap"
if after=$(ask store VectorStore "$TMP/after.out"); then
    [ "$after" = "$early" ] && ok "the restored store answers the same ids and distances" ||
        not_ok "the restored store answers the same: $after vs $early"
else
    not_ok "the restored store answers" "$TMP/after.out"
fi
stop_nodes "store and client exit 0" store client

# ---- the same program on index::Hnsw ------------------------------------------------------
if record hnsw --index index::Hnsw; then ok "recorded with --index index::Hnsw"; else not_ok "recorded with --index index::Hnsw" "$TMP/record-hnsw.log"; fi
start_node hstore --targets VectorStore --listen /ip4/127.0.0.1/tcp/0 "$TMP/hnsw.onnx" ||
    not_ok "hnsw store starts" "$TMP/hstore.log"
ctl hstore --timeout 120 bootstrap --module VectorStore seed_corpus=@"$DATA/corpus.pb" >/dev/null 2>&1
seeded() { [ "$(ctl hstore --json status | jget 'd["bootstrap"]')" = idle ]; }
wait_until 120 seeded || not_ok "hnsw bootstrap done" "$TMP/hstore.log"
if h1=$(ask hstore VectorStore "$TMP/h1.out"); then
    n=$(overlap "$h1" "$DATA/exact.json")
    [ "${n:-0}" -ge 9 ] && ok "Hnsw top 10 holds $n of the exact top 10" || not_ok "Hnsw top 10 holds $n: $h1"
else
    not_ok "the hnsw store answers" "$TMP/h1.out"
fi
stop_node hstore
start_node hstore --targets VectorStore --listen /ip4/127.0.0.1/tcp/0 "$TMP/hnsw.onnx" ||
    not_ok "hnsw store restarts" "$TMP/hstore.log"
if h2=$(ask hstore VectorStore "$TMP/h2.out"); then
    [ "$h2" = "$h1" ] && ok "the restored Hnsw store answers the same" || not_ok "restored Hnsw: $h2 vs $h1"
else
    not_ok "the restored hnsw store answers" "$TMP/h2.out"
fi
stop_nodes "hnsw store exits 0" hstore

# ---- bbc plugins and the man page ----------------------------------------------------------
"$BBC" plugins --json --plugin-path "$PLUG" >"$TMP/plugins.json" 2>&1
types=$(jget '" ".join(sorted(t["type_name"] for t in d["types"] if t["role"] == "Index"))' <"$TMP/plugins.json")
[ "$types" = "index::Flat index::Hnsw index::IvfPq" ] && ok "bbc plugins lists the indexes" ||
    not_ok "bbc plugins lists the indexes (got: $types)" "$TMP/plugins.json"
if LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l man/bb-index.7 >"$TMP/page.txt" 2>"$TMP/man.err" &&
    [ ! -s "$TMP/man.err" ]; then
    ok "man/bb-index.7 renders with man -l, no warnings"
else
    not_ok "man/bb-index.7 renders without warnings" "$TMP/man.err"
fi
missing=$(jget '" ".join(sorted({c["key"] for t in d["types"] if t["role"] == "Index" for c in t["config"]}))' \
    <"$TMP/plugins.json" | tr ' ' '\n' | while read -r key; do
    grep -q "^\.BR $key \"" man/bb-index.7 || echo "$key"
done)
[ -z "$missing" ] && ok "bb-index(7) documents every index config key" ||
    not_ok "bb-index(7) lacks config keys: $missing"
finish
