/*
 * cmd_sign.c — `bbc sign ARTIFACT --key KEY [-o OUT]`: add an Ed25519
 * signature by KEY (a `bbd keygen` key file) to a model file, as
 * bb/model_sign.h defines it: a trailing metadata_props entry over the
 * bytes before the first signature. bbd with require_signed_by accepts
 * the artifact only with a valid signature by one of the listed PeerIds.
 * Signing again with the same key replaces that key's signature; other
 * signers' stay. `bbc compile --sign KEY` signs its output the same way
 * (bbc_sign_file).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/io.h"
#include "bb/model_io.h"
#include "bb/model_sign.h"
#include "bbc/bbc.h"

static const char USAGE[] = "usage: bbc sign ARTIFACT.onnx --key KEY [-o OUT.onnx]\n";
static const char HELP[] =
    "\nSign ARTIFACT with the Ed25519 key in KEY (a `bbd keygen` key file, mode\n"
    "0600): a signature entry is appended to its metadata_props, over the bytes\n"
    "before the first signature. Written to OUT (default: ARTIFACT, replaced\n"
    "atomically). Prints the signer's PeerId: the one bbd's require_signed_by\n"
    "lists. See bbc(1).\n";

int bbc_sign_file(const char *in, const char *out, const char *key_path, bb_peerid *signer,
                  bb_error *err)
{
    bb_keypair kp;
    uint8_t *bytes = NULL, *signed_bytes = NULL;
    size_t len = 0, signed_len = 0;
    int rc = bb_keyfile_load(key_path, &kp, err);
    if (rc)
        return bb_error_prefix(err, "signing key");
    if ((rc = bb_read_file(in, BB_MODEL_MAX_BYTES, &bytes, &len, err)) == BB_OK &&
        (rc = bb_model_sign(bytes, len, &kp, &signed_bytes, &signed_len, err)) != BB_OK)
        bb_error_prefix(err, "%s", in);
    if (rc == BB_OK)
        rc = bb_model_write_file(out, signed_bytes, signed_len, err);
    if (rc == BB_OK && signer)
        bb_peerid_from_pubkey(kp.pk, signer);
    bb_keypair_wipe(&kp);
    free(bytes);
    free(signed_bytes);
    return rc;
}

int bbc_cmd_sign(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            fputs(HELP, stdout);
            return 0;
        }
        const char **slot = !strcmp(a, "--key") ? &key
                            : (!strcmp(a, "-o") || !strcmp(a, "--output")) ? &out
                                                                            : NULL;
        if (slot && i + 1 < argc) {
            *slot = argv[++i];
        } else if (slot || a[0] == '-') {
            fprintf(stderr, "bbc: error: sign: %s '%s'\n%s",
                    slot ? "missing value for option" : "unknown option", a, USAGE);
            return 2;
        } else if (in) {
            fprintf(stderr, "bbc: error: sign: more than one file given ('%s')\n%s", a, USAGE);
            return 2;
        } else {
            in = a;
        }
    }
    if (!in || !key) {
        fprintf(stderr, "bbc: error: sign: %s\n%s", in ? "no key given (--key KEY)" : "no model file given",
                USAGE);
        return 2;
    }
    bb_error err = {0};
    bb_peerid signer;
    char text[BB_PEERID_TEXT_MAX];
    if (bbc_sign_file(in, out ? out : in, key, &signer, &err) != BB_OK) {
        fprintf(stderr, "bbc: error: sign: %s\n", err.msg);
        return 1;
    }
    if (bb_peerid_to_text(&signer, text, sizeof text, NULL) == BB_OK)
        printf("signed %s by %s\n", out ? out : in, text);
    return 0;
}
