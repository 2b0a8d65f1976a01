#!/usr/bin/env bash
# bbc_compiled.sh — compiled models are plain ONNX and the inspection
# commands work on them, with the real programs:
#   - the federated example (testdata/federated.onnx) is compiled by
#     `bbc compile` with the real plugins; the fixture programs of
#     tests/unit/bbc_programs.h (federated, and split learning, whose types no
#     plugin exports) by bbc_compile with the fixture types
#     (tests/integration/bbc_compile_fixture.c, built here against libbbc.a);
#   - protoc --decode=onnx.ModelProto (our schema) decodes each one;
#   - `bbc dump --json` equals python's MessageToDict, and Debian's python3-onnx
#     loads it with the same model-local functions (onnx_schema_compare.py);
#   - python3-onnx sees every target `bbc targets --json` lists as a
#     model-local function with the same node count, the passport, an empty
#     graph, and in every partition the gate chains
#     Recv -> DedupGateRx -> PeerHealthGateRx -> BackoffGateRx and
#     PeerHealthGateTx -> BackoffGateTx -> Send;
#   - `bbc targets` lists Server and Client for the federated example;
#   - `bbc dot ... | dot -Tsvg` renders, with a cluster per partition and the
#     gates drawn; recorded (uncompiled) models are refused with exit 1.
# Environment: BB_BUILD = the build directory (default ./build).
# Ends with "N passed, N failed"; exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
BB_BUILD=${BB_BUILD:-$PWD/build}
case $BB_BUILD in /*) ;; *) BB_BUILD=$PWD/$BB_BUILD ;; esac
BBC=$BB_BUILD/bin/bbc
PY=/usr/bin/python3
COMPARE=tests/integration/onnx_schema_compare.py
passed=0
failed=0
TMP=$(mktemp -d /tmp/bbc-compiled.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { # name [log]
    echo "FAIL $1"
    [ -n "${2:-}" ] && [ -s "$2" ] && sed 's/^/     | /' "$2" | head -30
    failed=$((failed + 1))
}
# check NAME LOG CMD...: ok when CMD exits 0, its output kept in LOG
check() {
    local name=$1 log=$2
    shift 2
    if "$@" >"$log" 2>&1; then ok "$name"; else fail "$name" "$log"; fi
}

if [ ! -x "$BBC" ] || [ ! -f "$BB_BUILD/lib/libbbc.a" ]; then
    echo "FAIL $BBC or $BB_BUILD/lib/libbbc.a not built"
    echo "0 passed, 1 failed"
    exit 1
fi

# ---- compile the examples ---------------------------------------------------------
san=()
if ldd "$BB_BUILD/lib/libbbir.so" 2>/dev/null | grep -q libasan; then
    san=(-fsanitize=address,undefined)
fi
# shellcheck disable=SC2046
check "build the fixture compiler" "$TMP/cc.log" \
    cc -std=c11 -D_GNU_SOURCE "${san[@]}" -I. -Ilibbbir/include -I"$BB_BUILD/gen" \
    tests/integration/bbc_compile_fixture.c "$BB_BUILD/lib/libbbc.a" -L"$BB_BUILD/lib" -lbbir \
    $(pkg-config --libs libcjson) -ldl -Wl,-rpath,"$BB_BUILD/lib" -o "$TMP/compile"
compiled=()
for spec in "federated_fx federated" "split_learning_fx split_learning backend=cpu::CpuBackend"; do
    read -r out program bind <<<"$spec"
    if "$TMP/compile" --program "$program" "$TMP/$out.onnx" ${bind:+"$bind"} >"$TMP/c.log" 2>&1; then
        ok "compile the fixture program $program"
        compiled+=("$TMP/$out.onnx")
    else
        fail "compile the fixture program $program" "$TMP/c.log"
    fi
done
if [ ! -f testdata/federated.onnx ]; then
    fail "testdata/federated.onnx exists (run make to record the examples)"
elif "$BBC" compile testdata/federated.onnx -o "$TMP/federated.onnx" >"$TMP/c.log" 2>&1; then
    ok "bbc compile testdata/federated.onnx (the real plugins)"
    compiled+=("$TMP/federated.onnx")
else
    fail "bbc compile testdata/federated.onnx (the real plugins)" "$TMP/c.log"
fi

# ---- plain ONNX ---------------------------------------------------------------------
check "protoc --python_out proto/onnx-ml.proto" "$TMP/protoc.log" \
    protoc --python_out="$TMP" -I proto proto/onnx-ml.proto
for f in "${compiled[@]}"; do
    name=$(basename "$f")
    if protoc --decode=onnx.ModelProto -I proto proto/onnx-ml.proto <"$f" >"$TMP/$name.txt" 2>"$TMP/d.log" &&
       grep -q '^functions {' "$TMP/$name.txt" &&
       grep -q 'value: "v1"' "$TMP/$name.txt"; then
        ok "$name: protoc --decode=onnx.ModelProto"
    else
        fail "$name: protoc --decode=onnx.ModelProto" "$TMP/d.log"
    fi
    check "$name: bbc dump --json == MessageToDict" "$TMP/j.log" \
        "$PY" "$COMPARE" json --pb2-dir "$TMP" --bbc "$BBC" "$f"
    check "$name: python3-onnx loads it (same model-local functions)" "$TMP/o.log" \
        "$PY" "$COMPARE" onnx --pb2-dir "$TMP" "$f"
    if "$BBC" targets --json "$f" >"$TMP/targets.json" 2>"$TMP/t.log"; then
        check "$name: python3-onnx sees every target as a model-local function, gate chains" \
            "$TMP/p.log" \
            "$PY" - "$f" "$TMP/targets.json" <<'EOF'
import json, sys
import onnx
model = onnx.load(sys.argv[1])
targets = json.load(open(sys.argv[2]))["targets"]
funcs = {(f.domain, f.name): f for f in model.functions}
meta = {p.key: p.value for p in model.metadata_props}
assert meta.get("ai.bytesandbrains.compiled") == "v1", meta
assert len(model.graph.node) == 0, "the graph should be empty"
assert targets, "no targets"
for t in targets:
    for key in ("entry", "bootstrap"):
        e = t.get(key)
        if not e:
            continue
        f = funcs.get((e["domain"], e["name"]))
        assert f is not None, "%s %s is not a model-local function" % (key, e["name"])
        assert len(f.node) == e["nodes"], (e["name"], len(f.node), e["nodes"])
    for b in t["bindings"]:
        k = "ai.bytesandbrains.binding.%s.%s" % (t["name"], b["slot"])
        assert meta.get(k) == b["binding"], (k, meta.get(k))
# The gate chains, by dataflow: every receive's payload (or trigger) goes
# through the three RX gates, every send's data comes through the two TX gates.
WIRE, SYS = "ai.bytesandbrains.wire", "ai.bytesandbrains.syscall"
chains = 0
for t in targets:
    f = funcs[(t["entry"]["domain"], t["entry"]["name"])]
    producer = {o: n for n in f.node for o in n.output}
    consumers = {}
    for n in f.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    for n in f.node:
        if n.domain == WIRE and n.op_type in ("Recv", "RecvReq"):
            outs = [o for o in n.output[:2] if consumers.get(o)]
            assert outs, "%s %s: nothing reads it" % (n.op_type, n.name)
            cur = outs[-1]
            for gate in ("DedupGateRx", "PeerHealthGateRx", "BackoffGateRx"):
                nxt = [c for c in consumers.get(cur, []) if c.domain == SYS]
                assert len(nxt) == 1 and nxt[0].op_type == gate, \
                    "%s %s: after %s comes %s, not %s" % (n.op_type, n.name, cur,
                                                          [c.op_type for c in nxt], gate)
                cur = nxt[0].output[0]
            chains += 1
        if n.domain == WIRE and n.op_type in ("Send", "SendReqBatched", "SendResp"):
            cur = n
            for gate in ("BackoffGateTx", "PeerHealthGateTx"):
                p = producer.get(cur.input[0])
                assert p is not None and p.op_type == gate, \
                    "%s %s: input comes from %s, not %s" % (n.op_type, n.name,
                                                           p.op_type if p else None, gate)
                cur = p
            chains += 1
print("ok: %d targets, %d gate chains, onnx %s" % (len(targets), chains, onnx.__version__))
EOF
    else
        fail "$name: bbc targets --json" "$TMP/t.log"
    fi
done

# ---- bbc targets, bbc dot --------------------------------------------------------------
fed=$TMP/federated.onnx
if [ -f "$fed" ]; then
    if "$BBC" targets --names "$fed" >"$TMP/names" 2>&1 && [ "$(cat "$TMP/names")" = $'Server\nClient' ]; then
        ok "bbc targets --names lists Server and Client"
    else
        fail "bbc targets --names lists Server and Client" "$TMP/names"
    fi
    if "$BBC" targets "$fed" >"$TMP/targets" 2>&1 && grep -qx 'Server' "$TMP/targets" &&
       grep -qx 'Client' "$TMP/targets" && grep -q '^wire edges: 2$' "$TMP/targets"; then
        ok "bbc targets shows both targets and the two wire edges"
    else
        fail "bbc targets shows both targets and the two wire edges" "$TMP/targets"
    fi
fi
for f in "${compiled[@]}"; do
    name=$(basename "$f" .onnx)
    [ "$name" = federated_fx ] && continue
    if "$BBC" dot "$f" >"$TMP/$name.dot" 2>"$TMP/dot.log" &&
       dot -Tsvg "$TMP/$name.dot" >"$TMP/$name.svg" 2>>"$TMP/dot.log" &&
       grep -q '<svg' "$TMP/$name.svg" && grep -q 'cluster_t0' "$TMP/$name.svg" &&
       grep -q 'DedupGateRx' "$TMP/$name.svg" && grep -q 'BackoffGateTx' "$TMP/$name.svg"; then
        ok "bbc dot $name | dot -Tsvg renders the partitions and gates"
    else
        fail "bbc dot $name | dot -Tsvg renders the partitions and gates" "$TMP/dot.log"
    fi
done
if [ -f "$TMP/federated.svg" ] && grep -q 'cluster_t1' "$TMP/federated.svg"; then
    ok "federated picture has two clusters"
else
    fail "federated picture has two clusters"
fi
for cmd in targets dot; do
    "$BBC" "$cmd" testdata/bad/compile/unbound_slot.onnx >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q 'unbound_slot.onnx: not a compiled model' "$TMP/err"; then
        ok "bbc $cmd refuses a recorded model"
    else
        echo "exit $rc" >>"$TMP/err"
        fail "bbc $cmd refuses a recorded model" "$TMP/err"
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
