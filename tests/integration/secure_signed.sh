#!/usr/bin/env bash
# secure_signed.sh — signed artifacts between the real programs: bbd keygen
# makes the key, bbc compile --sign and bbc sign sign with it, and bbd with
# --require-signed-by (or require_signed_by in its config) runs only an
# artifact signed by a listed key, refusing any other with one line naming
# why (exit 1). Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

OWNER=$("$BBD" keygen --key "$TMP/owner.key" 2>"$TMP/keygen.err")
OTHER=$("$BBD" keygen --key "$TMP/other.key" 2>>"$TMP/keygen.err")
case "$OWNER" in 12D3KooW*) ok "bbd keygen makes the signing key and prints its PeerId" ;;
*) not_ok "bbd keygen" "$TMP/keygen.err" ;; esac

check "compile and sign in one step (bbc compile --sign)" \
    compile_example ping_pong --sign "$TMP/owner.key"
cp "$TMP/ping_pong.onnx" "$TMP/signed.onnx"
check "an unsigned compile" compile_example ping_pong
cp "$TMP/ping_pong.onnx" "$TMP/unsigned.onnx"
"$BBC" dump "$TMP/signed.onnx" >"$TMP/dump.out" 2>&1
grep -q "ai.bytesandbrains.signature.*$OWNER " "$TMP/dump.out" &&
    ok "the signature is a metadata entry naming its signer (bbc dump)" ||
    not_ok "signature in the dump" "$TMP/dump.out"
"$BBC" check "$TMP/signed.onnx" >"$TMP/check.out" 2>&1 && ok "a signed artifact is still a valid model" ||
    not_ok "bbc check on the signed artifact" "$TMP/check.out"

# refused: start must fail at once with exit 1 and one line saying why
refused() { # NAME ARTIFACT PATTERN [bbd options...]
    local name=$1 art=$2 pat=$3
    shift 3
    "$BBD" --state-dir "$TMP/$name" --plugin-path "$PLUG" --targets Ponger "$@" "$art" \
        >"$TMP/$name.out" 2>&1
    local rc=$?
    if [ "$rc" = 1 ] && grep -q "^bbd: error: .*refused (require_signed_by): $pat" "$TMP/$name.out"; then
        ok "$name: refused, exit 1"
    else
        echo "exit $rc" >>"$TMP/$name.out"
        not_ok "$name" "$TMP/$name.out"
    fi
}
refused unsigned "$TMP/unsigned.onnx" "the artifact is not signed" --require-signed-by "$OWNER"
refused wrong_signer "$TMP/signed.onnx" "the artifact is signed only by keys not required ($OWNER)" \
    --require-signed-by "$OTHER"
# one byte of the signed part changed (inside the model, before the signature)
"$PY" - "$TMP/signed.onnx" "$TMP/tampered.onnx" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"Ponger")
b[i] ^= 0x20  # "ponger": a target name no longer the signed one
open(sys.argv[2], "wb").write(bytes(b))
PY
refused tampered "$TMP/tampered.onnx" "the signature by $OWNER does not verify" \
    --require-signed-by "$OWNER"

# accepted: signed by the listed key, named in the config or on the command line
if start_node ok1 --targets Ponger --listen /ip4/127.0.0.1/tcp/0 --require-signed-by "$OTHER" \
    --require-signed-by "$OWNER" "$TMP/signed.onnx"; then
    ok "an artifact signed by a listed key runs"
else
    not_ok "signed artifact refused" "$TMP/ok1.log"
fi
grep -q "msg=\"artifact signature verified\" artifact=$TMP/signed.onnx signer=$OWNER" "$TMP/ok1.log" &&
    ok "bbd logs who signed what it runs" || not_ok "the verification log line" "$TMP/ok1.log"
stop_nodes "it stops" ok1
# bbc sign on an existing artifact, to another file; then a second signer
"$BBC" sign "$TMP/unsigned.onnx" --key "$TMP/other.key" -o "$TMP/later.onnx" >"$TMP/sign.out" 2>&1 &&
    grep -q "^signed $TMP/later.onnx by $OTHER\$" "$TMP/sign.out" &&
    ok "bbc sign signs an artifact after the fact and names the signer" ||
    not_ok "bbc sign" "$TMP/sign.out"
"$BBC" sign "$TMP/later.onnx" --key "$TMP/owner.key" >/dev/null 2>&1
echo '{"require_signed_by": ["'"$OWNER"'"]}' >"$TMP/req.json"
if start_node ok2 --config "$TMP/req.json" --targets Ponger "$TMP/later.onnx"; then
    ok "a second signature on the same bytes; require_signed_by in the config"
else
    not_ok "two signers" "$TMP/ok2.log"
fi
stop_nodes "it stops too" ok2

# usage and bad input
"$BBC" sign "$TMP/unsigned.onnx" >"$TMP/u.out" 2>&1
[ $? = 2 ] && grep -q "^bbc: error: sign: no key given" "$TMP/u.out" && ok "bbc sign without --key: exit 2" ||
    not_ok "sign usage" "$TMP/u.out"
chmod 644 "$TMP/other.key"
"$BBC" sign "$TMP/unsigned.onnx" --key "$TMP/other.key" -o "$TMP/x.onnx" >"$TMP/k.out" 2>&1
[ $? = 1 ] && grep -q "^bbc: error: sign: signing key" "$TMP/k.out" &&
    ok "a key file others can read is refused (exit 1)" || not_ok "key mode" "$TMP/k.out"
"$BBD" --require-signed-by nope "$TMP/signed.onnx" >"$TMP/bad.out" 2>&1
[ $? = 1 ] && grep -q "^bbd: error: --require-signed-by 'nope'" "$TMP/bad.out" &&
    ok "a malformed --require-signed-by is named" || not_ok "bad signer option" "$TMP/bad.out"

finish
