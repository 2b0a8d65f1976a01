#!/usr/bin/env bash
# bbd_cli.sh — bbd and bbctl as commands: usage and exit codes, bbd keygen,
# start-up failures that must exit 1 with one clear line (bad artifact, bad
# config key, missing plugin, port in use, ...), the man pages (render
# without warnings; every option, command and config key documented) and
# the systemd unit (systemd-analyze verify). Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

# A start-up failure: exit 1, exactly one "bbd: error:" line, the last one.
fails_with() {
    local name=$1 pat=$2
    shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" = 1 ] && [ "$(grep -c '^bbd: error: ' "$TMP/err")" = 1 ] &&
        tail -1 "$TMP/err" | grep -Eq -- "^bbd: error: .*$pat"; then
        ok "$name"
    else
        echo "exit $rc; wanted 1 and one line matching: $pat" >>"$TMP/err"
        not_ok "$name" "$TMP/err"
    fi
}

# ---- usage -----------------------------------------------------------------------------
expect "bbd without an artifact is a usage error" 2 'no ARTIFACT given' -- "$BBD"
expect "an unknown option is a usage error" 2 "unknown option '--frob'" -- "$BBD" --frob x.onnx
expect "an option without its value" 2 "needs an argument" -- "$BBD" x.onnx --targets
expect "two artifacts" 2 "one ARTIFACT only" -- "$BBD" a.onnx b.onnx
expect "--help lists the options" 0 '--metrics MULTIADDR' -- "$BBD" --help
expect "--version" 0 '^bbd \(BytesAndBrains\) ' -- "$BBD" --version
expect "bbctl without a command" 2 'no command given' -- "$BBCTL"
expect "bbctl with an unknown command" 2 "unknown command 'frob'" -- "$BBCTL" frob
expect "bbctl invoke without a target" 2 'TARGET is required' -- "$BBCTL" invoke
expect "bbctl --timeout must be a number" 2 "--timeout 'x'" -- "$BBCTL" --timeout x status
expect "bbctl with no daemon: exit 1 naming the socket" 1 "cannot connect to $TMP/none.sock" -- \
    "$BBCTL" --socket "$TMP/none.sock" status
expect "bbctl --help" 0 'watch \[--kind KIND\]' -- "$BBCTL" --help

# ---- keygen ------------------------------------------------------------------------------
expect "keygen prints a PeerId" 0 '^12D3KooW[1-9A-HJ-NP-Za-km-z]{44}$' -- "$BBD" keygen --state-dir "$TMP/k"
KEY_ID=$(cat "$TMP/out")
[ "$(stat -c %a "$TMP/k/node.key")" = 600 ] && [ "$(stat -c %s "$TMP/k/node.key")" = 68 ] &&
    ok "the key file is 68 bytes, mode 0600" || not_ok "key file mode/size"
expect "keygen never replaces a key" 1 'already exists|exists' -- "$BBD" keygen --state-dir "$TMP/k"
expect "keygen --key FILE" 0 '^12D3KooW' -- "$BBD" keygen --key "$TMP/other.key"
expect "keygen with both --key and --state-dir" 2 'not both' -- \
    "$BBD" keygen --key "$TMP/x.key" --state-dir "$TMP/x"
check "ping_pong compiles" compile_example ping_pong
if start_node k --targets Ponger "$TMP/ping_pong.onnx" && [ "$(node_peer k)" = "$KEY_ID" ]; then
    ok "a node runs with the PeerId keygen printed"
else
    not_ok "node identity from keygen" "$TMP/k.log"
fi
# a second daemon on the same state directory
fails_with "a state directory in use" "state directory $TMP/k is in use by another bbd \(pid [0-9]+\)" -- \
    "$BBD" --state-dir "$TMP/k" --plugin-path "$PLUG" --targets Ponger "$TMP/ping_pong.onnx"
stop_node k
[ "$STOP_RC" = 0 ] || not_ok "k exits $STOP_RC" "$TMP/k.log"
start_node fresh --targets Ponger "$TMP/ping_pong.onnx" || not_ok "a node without a key starts" "$TMP/fresh.log"
grep -q 'msg="created a node key" path='"$TMP/fresh/node.key"' peer=12D3KooW' "$TMP/fresh.log" &&
    ok "a node without a key creates one in its state dir and logs its PeerId" ||
    not_ok "key created on first start" "$TMP/fresh.log"
stop_node fresh

# ---- start-up failures: exit 1, one clear line ---------------------------------------------
run_bbd() { "$BBD" --state-dir "$TMP/s" --plugin-path "$PLUG" "$@"; }
printf 'not a model' >"$TMP/junk.onnx"
fails_with "a bad artifact" "junk.onnx" -- run_bbd --targets Ponger "$TMP/junk.onnx"
fails_with "a missing artifact" "$TMP/missing.onnx" -- run_bbd --targets Ponger "$TMP/missing.onnx"
fails_with "a recorded (not compiled) artifact" "compile" -- run_bbd --targets Ponger testdata/ping_pong.onnx
fails_with "an unknown target, naming the ones there are" "target 'Pongr' is not in .*(Pinger, Ponger|Ponger, Pinger)" -- \
    run_bbd --targets Pongr "$TMP/ping_pong.onnx"
fails_with "several targets and none chosen" "no targets given" -- run_bbd "$TMP/ping_pong.onnx"
echo '{"listn": ["/ip4/127.0.0.1/tcp/0"]}' >"$TMP/badkey.json"
fails_with "a bad config key" "badkey.json: unknown key 'listn'" -- \
    run_bbd --config "$TMP/badkey.json" --targets Ponger "$TMP/ping_pong.onnx"
echo '{"listen": [1]}' >"$TMP/badtype.json"
fails_with "a config value of the wrong type" "badtype.json: key 'listen' must be" -- \
    run_bbd --config "$TMP/badtype.json" --targets Ponger "$TMP/ping_pong.onnx"
echo '{"listen": [' >"$TMP/badjson.json"
fails_with "a config that is not JSON" "badjson.json: not valid JSON \(line 1, column [0-9]+\)" -- \
    run_bbd --config "$TMP/badjson.json" --targets Ponger "$TMP/ping_pong.onnx"
# issue 21: this reached the engine's allocation (ASan: allocation-size-too-big)
echo '{"caps": {"bus_capacity": 9007199254740992}}' >"$TMP/hugecap.json"
fails_with "a cap over its maximum names the key" \
    "hugecap.json: key 'caps.bus_capacity' must be an integer from 0 to 1048576" -- \
    run_bbd --config "$TMP/hugecap.json" --targets Ponger "$TMP/ping_pong.onnx"
fails_with "a missing config file" "config $TMP/nope.json" -- \
    run_bbd --config "$TMP/nope.json" --targets Ponger "$TMP/ping_pong.onnx"
mkdir -p "$TMP/empty-plugins"
fails_with "a missing plugin names the type and the directories searched" \
    "bbdtest::Peers.*$TMP/empty-plugins" -- env -u BB_PLUGIN_PATH \
    "$BBD" --state-dir "$TMP/s" --plugin-path "$TMP/empty-plugins" --targets Pinger "$TMP/ping_pong.onnx"
# a plugin compiled against another bb/value.h: refused by its value layout
mkdir -p "$TMP/wrong-layout"
cp "$BB_BUILD/tests/plugins/wrong_layout.so" "$TMP/wrong-layout/"
fails_with "a plugin built against another value layout is not loaded" \
    "bbdtest::Peers.*could not be loaded, first: $TMP/wrong-layout/wrong_layout.so" -- \
    env -u BB_PLUGIN_PATH "$BBD" --state-dir "$TMP/s" --plugin-path "$TMP/wrong-layout" \
    --targets Pinger "$TMP/ping_pong.onnx"
grep -Eq "level=warn comp=plugins msg=\"$TMP/wrong-layout/wrong_layout.so: plugin 'wrong_layout' was built \
against another value layout \(signature 0x[0-9a-f]{16}, this host's is 0x[0-9a-f]{16}\)" "$TMP/err" &&
    ok "bbd logs the refusal with both layout signatures" ||
    not_ok "bbd logs the value layout refusal" "$TMP/err"
fails_with "a bad --peer" "peer 'nope'" -- run_bbd --targets Ponger --peer nope=/ip4/1.2.3.4/tcp/1 \
    "$TMP/ping_pong.onnx"
fails_with "a bad listen address" "listen address '/ip4/1.2.3.4/sctp/9'" -- \
    run_bbd --targets Ponger --listen /ip4/1.2.3.4/sctp/9 "$TMP/ping_pong.onnx"
fails_with "a bad log level" "log level 'loud'" -- run_bbd --log-level loud --targets Ponger \
    "$TMP/ping_pong.onnx"
start_node busy --targets Ponger --listen /ip4/127.0.0.1/tcp/0 --listen /ip4/127.0.0.1/udp/0 \
    --metrics /ip4/127.0.0.1/tcp/0 "$TMP/ping_pong.onnx" || not_ok "busy node starts" "$TMP/busy.log"
TCP=$(node_addr busy tcp)
UDP=$(node_addr busy udp)
METRICS=$(ctl busy --json status | jget 'd["metrics"]')
fails_with "a TCP port in use" "$TCP.*(in use|EADDRINUSE)" -- \
    run_bbd --targets Ponger --listen "$TCP" "$TMP/ping_pong.onnx"
fails_with "a UDP port in use" "$UDP.*(in use|EADDRINUSE)" -- \
    run_bbd --targets Ponger --listen "$UDP" "$TMP/ping_pong.onnx"
fails_with "a metrics port in use" "metrics address $METRICS.*(in use|EADDRINUSE)" -- \
    run_bbd --targets Ponger --metrics "$METRICS" "$TMP/ping_pong.onnx"
fails_with "a control socket in use" "control socket $TMP/busy/control.sock is in use" -- \
    run_bbd --targets Ponger --control "$TMP/busy/control.sock" "$TMP/ping_pong.onnx"
stop_node busy
[ -e "$TMP/s/snapshot.bbs" ] && not_ok "a failed start wrote a snapshot" ||
    ok "failed starts leave no snapshot behind"

# ---- man pages ------------------------------------------------------------------------------
for page in man/bbd.8 man/bbctl.1 man/bbd.json.5; do
    if LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" >"$TMP/page.txt" 2>"$TMP/man.err" &&
        [ ! -s "$TMP/man.err" ] && [ "$(wc -l <"$TMP/page.txt")" -gt 40 ]; then
        ok "$page renders with man -l, no warnings"
    else
        not_ok "$page renders without warnings" "$TMP/man.err"
    fi
done
LC_ALL=C.UTF-8 MANWIDTH=200 man -l man/bbd.8 2>/dev/null | col -bx >"$TMP/bbd.txt"
LC_ALL=C.UTF-8 MANWIDTH=200 man -l man/bbctl.1 2>/dev/null | col -bx >"$TMP/bbctl.txt"
LC_ALL=C.UTF-8 MANWIDTH=200 man -l man/bbd.json.5 2>/dev/null | col -bx >"$TMP/json.txt"
missing=""
for opt in $("$BBD" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u) $("$BBD" keygen --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
    grep -qF -- "$opt" "$TMP/bbd.txt" || missing="$missing $opt"
done
[ -z "$missing" ] && ok "bbd(8) documents every option of bbd --help and bbd keygen --help" ||
    not_ok "bbd(8) lacks:$missing"
missing=""
for word in $("$BBCTL" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u) \
    $("$BBCTL" --help | sed -n '/^commands:/,/^$/p' | grep -oE '^  [a-z][a-z-]*' | sort -u); do
    grep -qE -- "(^| )$word( |$|,)" "$TMP/bbctl.txt" || missing="$missing $word"
done
[ -z "$missing" ] && ok "bbctl(1) documents every option and command of bbctl --help" ||
    not_ok "bbctl(1) lacks:$missing"
# every key the config parser accepts (its string compares and field tables)
keys=$( (grep -oE '!strcmp\(k, "[a-z_]+"\)' bbd/host/config.c | grep -oE '"[a-z_]+"'
    grep -oE '(CAP|TRF)\([a-z_]{2,}' bbd/host/config.c | grep -oE '\([a-z_]+') | tr -d '"(' | sort -u)
missing=""
n=0
for k in $keys preset; do
    n=$((n + 1))
    grep -qE "^ +$k( |$)" "$TMP/json.txt" || missing="$missing $k"
done
[ "$n" -gt 40 ] && [ -z "$missing" ] && ok "bbd.json(5) documents all $n config keys" ||
    not_ok "bbd.json(5) lacks:$missing (of $n keys)"
# and each documented example config is valid JSON (an object runs from a
# line "{" to the "}" at its indentation)
sed -n '/^EXAMPLE/,/^SEE ALSO/p' "$TMP/json.txt" >"$TMP/example.txt"
"$PY" - "$TMP/example.txt" 2>"$TMP/ex.err" <<'PY' &&
import json, re, sys
objs, cur, ind = [], None, None
for line in open(sys.argv[1]).read().splitlines():
    if cur is None:
        m = re.match(r"^( *)[{]$", line)
        if m:
            cur, ind = [line], m.group(1)
    else:
        cur.append(line)
        if line == ind + "}":
            objs.append(json.loads("\n".join(cur)))
            cur = None
assert len(objs) >= 2, "%d example objects" % len(objs)
PY
    ok "the bbd.json(5) examples are valid JSON" || not_ok "bbd.json(5) examples" "$TMP/ex.err"

# ---- the systemd unit -------------------------------------------------------------------------
UNIT=scripts/systemd/bbd@.service
grep -q '^Type=notify$' "$UNIT" && grep -q '^DynamicUser=yes$' "$UNIT" &&
    grep -q '^StateDirectory=bytesandbrains/%i$' "$UNIT" &&
    grep -q '^ExecStart=@PREFIX@/bin/bbd --config /etc/bytesandbrains/%i.json$' "$UNIT" &&
    ok "bbd@.service: Type=notify, one config per instance, StateDirectory, DynamicUser" ||
    not_ok "bbd@.service contents" "$UNIT"
if ! command -v systemd-analyze >/dev/null 2>&1; then
    not_ok "systemd-analyze is not installed (scripts/deps installs systemd): bbd@.service not verified"
else
    mkdir -p "$TMP/units" "$TMP/mantree/man1" "$TMP/mantree/man5" "$TMP/mantree/man8"
    cp man/bbctl.1 "$TMP/mantree/man1/"
    cp man/bbd.json.5 "$TMP/mantree/man5/"
    cp man/bbd.8 "$TMP/mantree/man8/"
    sed "s|@PREFIX@|$BB_BUILD|" "$UNIT" >"$TMP/units/bbd@node.service"
    if MANPATH=$TMP/mantree systemd-analyze verify "$TMP/units/bbd@node.service" >"$TMP/verify" 2>&1 &&
        [ ! -s "$TMP/verify" ]; then
        ok "systemd-analyze verify passes on bbd@.service (its man pages included)"
    else
        not_ok "systemd-analyze verify" "$TMP/verify"
    fi
    # the hardening: systemd's exposure score of the unit stays at most 2.0 (1.6 now)
    systemd-analyze security --offline=true "$TMP/units/bbd@node.service" >"$TMP/exposure" 2>&1
    score=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$TMP/exposure")
    if [ -n "$score" ] && "$PY" -c "import sys; sys.exit(not float(sys.argv[1]) <= 2.0)" "$score"; then
        ok "systemd-analyze security: exposure $score (at most 2.0)"
    else
        not_ok "systemd-analyze security exposure ${score:-unknown}" "$TMP/exposure"
    fi
fi

finish
