#!/usr/bin/env bash
# kademlia_dht.sh — dht::Kademlia with 32 real bbd processes on 127.0.0.1
# (examples/dht: k = 20, alpha = 3), every node joining from one seed.
# Lookup(key) for random keys from random nodes must return the true k
# closest live nodes (computed here from the whole membership: SHA-256 of
# each PeerId against SHA-256 of the key, XOR distance) in at least 95% of
# lookups; the mean hops are reported; a record Put on one node is read
# back by Get from others; NearKey through peers::Dht answers the closest
# nodes; after 8 nodes are SIGKILLed, lookups still succeed. Ends with
# "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

PLUG=$BB_BUILD/lib/bytesandbrains/plugins
N=32
check "the dht program compiles" compile_example dht

# Start node I with seeds (none for node 0); every node is started before
# any is waited for, so 32 start-ups overlap.
launch() { # I SEED
    local cfg='{"components": {"dht": {"rpc_timeout_ms": 1000}}}'
    [ -n "$2" ] && cfg="{\"components\": {\"dht\": {\"rpc_timeout_ms\": 1000, \"seeds\": [\"$2\"]}}}"
    echo "$cfg" >"$TMP/n$1.json"
    "$BBD" --state-dir "$TMP/n$1" --plugin-path "$PLUG" --config "$TMP/n$1.json" --targets Node \
        --listen /ip4/127.0.0.1/tcp/0 "$TMP/dht.onnx" >>"$TMP/n$1.log" 2>&1 &
    NODE_PID[n$1]=$!
}
answers() { ctl "$1" status >/dev/null 2>&1; }
idle() { [ "$(ctl "$1" --json status | jget 'd["bootstrap"]')" = idle ]; }

launch 0 ""
wait_until 20 answers n0 || not_ok "the seed node starts" "$TMP/n0.log"
SEED="/dns4/localhost/tcp/$(node_addr n0 tcp | sed 's|.*/tcp/||')/p2p/$(node_peer n0)"
for ((i = 1; i < N; i++)); do launch "$i" "$SEED"; done
started=0
for ((i = 0; i < N; i++)); do
    wait_until 60 answers "n$i" && wait_until 60 idle "n$i" && started=$((started + 1))
done
[ "$started" = "$N" ] && ok "$N nodes start and join (their bootstrap lookups end)" ||
    not_ok "only $started of $N nodes joined" "$TMP/n1.log"
declare -A ID=()
for ((i = 0; i < N; i++)); do ID[n$i]=$(node_peer "n$i"); done

b64() { printf '%s' "$1" | base64 -w0; }

# LOOKUPS TAG ASKER... : one lookup per asker (key TAG-<i>), each line
# "<asker PeerId> <key> <hops> <result PeerIds...>" into $TMP/TAG.lookups
lookups() {
    local tag=$1 i=0 n
    shift
    : >"$TMP/$tag.lookups"
    for n in "$@"; do
        local key="$tag-$i"
        i=$((i + 1))
        ctl "$n" --json --timeout 20 invoke Node "key={\"type\":\"Bytes\",\"base64\":\"$(b64 "$key")\"}" \
            --wait closest >"$TMP/one.json" 2>&1 || { echo "${ID[$n]} $key FAILED" >>"$TMP/$tag.lookups"; continue; }
        jget '"'"${ID[$n]} $key"' " + str(d["event"]["value"]["items"][1]["value"]) + " " + " ".join(i["peer"] for i in d["event"]["value"]["items"][0]["items"])' \
            <"$TMP/one.json" >>"$TMP/$tag.lookups"
    done
}

# python: how many lookups in FILE returned exactly the k closest of the
# live PeerIds (argv), the asker left out; prints "exact/total, mean hops".
score() { # FILE MIN_FRACTION LIVE_ID...
    "$PY" - "$@" <<'PY'
import hashlib, sys
path, need, live = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
A = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
def b58(s):
    n = 0
    for c in s:
        n = n * 58 + A.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\0" * (len(s) - len(s.lstrip("1"))) + raw
key_of = {p: int.from_bytes(hashlib.sha256(b58(p)).digest(), "big") for p in live}
K, exact, total, hops = 20, 0, 0, []
for line in open(path):
    f = line.split()
    asker, key = f[0], f[1]
    total += 1
    if f[2] == "FAILED":
        continue
    hops.append(int(f[2]))
    t = int.from_bytes(hashlib.sha256(key.encode()).digest(), "big")
    want = sorted((p for p in live if p != asker), key=lambda p: key_of[p] ^ t)[:K]
    exact += f[3:] == want
mean = sum(hops) / len(hops) if hops else 0
print(f"{exact}/{total} lookups exact, mean hops {mean:.2f}")
sys.exit(0 if total and exact >= need * total else 1)
PY
}

ASKERS=()
for ((i = 0; i < 40; i++)); do ASKERS+=("n$(((i * 7 + 3) % N))"); done
lookups a "${ASKERS[@]}"
ALL_IDS=$(for ((i = 0; i < N; i++)); do echo "${ID[n$i]}"; done)
if score "$TMP/a.lookups" 0.95 $ALL_IDS >"$TMP/score" 2>&1; then
    ok "Lookup returns the true 20 closest: $(cat "$TMP/score")"
else
    not_ok "Lookup exactness: $(cat "$TMP/score")" "$TMP/a.lookups"
fi
echo "     kademlia, $N nodes: $(cat "$TMP/score")"

# a record from one node, read back from others
ctl n3 --timeout 20 invoke Node "put_key={\"type\":\"Bytes\",\"base64\":\"$(b64 model-digest)\"}" \
    "put_value={\"type\":\"Bytes\",\"base64\":\"$(b64 0x5eed)\"}" --wait stored >"$TMP/put.out" 2>&1
got=0
for n in n9 n17 n26 n30 n3; do
    ctl "$n" --timeout 20 invoke Node "get_key={\"type\":\"Bytes\",\"base64\":\"$(b64 model-digest)\"}" \
        --wait got 2>&1 | grep -q "value=Bytes $(b64 0x5eed)\$" && got=$((got + 1))
done
[ "$got" = 5 ] && ok "Put on one node, Get from 5 others: the same value ($(cat "$TMP/put.out" | sed 's/.*value=//') copies)" ||
    not_ok "Store/FindValue round trip: $got of 5" "$TMP/put.out"

# NearKey through peers::Dht: the 5 closest, the first 5 of the lookup
ctl n11 --json --timeout 20 invoke Node "key={\"type\":\"Bytes\",\"base64\":\"$(b64 a-0)\"}" --wait near \
    >"$TMP/near.json" 2>&1
near=$(jget '" ".join(i["peer"] for i in d["event"]["value"]["items"])' <"$TMP/near.json" 2>/dev/null)
echo "${ID[n11]} a-0 1 $near" >"$TMP/near.lookups"
if [ "$(echo "$near" | wc -w)" = 5 ] &&
    "$PY" - "$TMP/near.lookups" $ALL_IDS <<'PY'; then
import hashlib, sys
A = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
def b58(s):
    n = 0
    for c in s:
        n = n * 58 + A.index(c)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\0" * (len(s) - len(s.lstrip("1"))) + raw
f = open(sys.argv[1]).read().split()
t = int.from_bytes(hashlib.sha256(f[1].encode()).digest(), "big")
live = [p for p in sys.argv[2:] if p != f[0]]
want = sorted(live, key=lambda p: int.from_bytes(hashlib.sha256(b58(p)).digest(), "big") ^ t)[:5]
sys.exit(0 if f[3:] == want else 1)
PY
    ok "NearKey{key, 5} through peers::Dht answers the 5 closest nodes"
else
    not_ok "NearKey through peers::Dht" "$TMP/near.json"
fi

# 8 nodes SIGKILLed (the seed among them): lookups still succeed
for i in 0 4 8 12 16 20 24 28; do
    kill -KILL "${NODE_PID[n$i]}"
    wait "${NODE_PID[n$i]}" 2>/dev/null
    unset "NODE_PID[n$i]"
done
LIVE_IDS=$(for ((i = 0; i < N; i++)); do [ $((i % 4)) = 0 ] || echo "${ID[n$i]}"; done)
ASKERS=()
for ((i = 0; i < 30; i++)); do
    a=$(((i * 7 + 1) % N))
    [ $((a % 4)) = 0 ] && a=$((a + 1))
    ASKERS+=("n$a")
done
lookups b "${ASKERS[@]}"
if ! grep -q FAILED "$TMP/b.lookups" && score "$TMP/b.lookups" 0.9 $LIVE_IDS >"$TMP/score" 2>&1; then
    ok "after 8 of 32 were killed every lookup succeeds: $(cat "$TMP/score") (vs the live nodes)"
else
    not_ok "lookups after the kill: $(cat "$TMP/score")" "$TMP/b.lookups"
fi
echo "     kademlia, 8 of $N killed: $(cat "$TMP/score")"
for ((i = 0; i < N; i++)); do [ $((i % 4)) = 0 ] || stop_node "n$i"; done
finish
