/*
 * model_sign.c — signed artifacts (bb/model_sign.h): a walk over the
 * ModelProto's top-level fields with the bounded reader, the signature
 * entries at its end, and Ed25519 through peerid.c.
 */
#include "bb/model_sign.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bb/bytes.h"
#include "bb/meta.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
#define F_METADATA_PROPS 14 /* ModelProto.metadata_props */
#define SIG_B64_LEN 88      /* base64 of 64 bytes, padded */
#define VALUE_MAX (BB_PEERID_TEXT_MAX + 1 + SIG_B64_LEN)

static int bad(bb_error *err, int code, size_t at, const char *what)
{
    return bb_error_set(err, code, "signature: %s at byte %zu", what, at);
}

/* The key and value of a StringStringEntryProto (views; absent: NULL). */
static bool entry_kv(const uint8_t *d, size_t n, const uint8_t **k, size_t *kl,
                     const uint8_t **v, size_t *vl)
{
    bb_reader r;
    bb_reader_init(&r, d, n);
    *k = *v = NULL;
    *kl = *vl = 0;
    while (bb_reader_left(&r)) {
        uint64_t tag;
        const uint8_t *x;
        size_t xl;
        if (!bb_reader_uvarint(&r, &tag) || (tag & 7) != WT_LEN || !bb_reader_delimited(&r, &x, &xl))
            return false; /* not an entry we can read: not a signature */
        if (tag >> 3 == 1)
            *k = x, *kl = xl;
        else if (tag >> 3 == 2)
            *v = x, *vl = xl;
    }
    return true;
}

static bool is_signature(const uint8_t *d, size_t n, const uint8_t **v, size_t *vl)
{
    const uint8_t *k;
    size_t kl;
    return entry_kv(d, n, &k, &kl, v, vl) && k && kl == strlen(BB_META_SIGNATURE) &&
           memcmp(k, BB_META_SIGNATURE, kl) == 0;
}

/* "<PeerId> <base64>" into s. */
static int parse_value(const uint8_t *v, size_t vl, size_t at, bb_model_signature *s,
                       bb_error *err)
{
    char text[VALUE_MAX + 1];
    const char *sp = vl <= VALUE_MAX && v ? memchr(v, ' ', vl) : NULL;
    if (!sp)
        return bad(err, BB_EPARSE, at, "a value that is not \"<PeerId> <base64 signature>\"");
    memcpy(text, v, vl);
    text[vl] = '\0';
    text[sp - (const char *)v] = '\0';
    const char *b64 = text + (sp - (const char *)v) + 1;
    size_t got = 0;
    if (bb_peerid_from_text(text, &s->signer, err) != BB_OK)
        return bb_error_prefix(err, "signature at byte %zu: signer", at);
    if (sodium_base642bin(s->sig, sizeof s->sig, b64, strlen(b64), NULL, &got, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != sizeof s->sig)
        return bad(err, BB_EPARSE, at, "a signature that is not 64 bytes of base64");
    return BB_OK;
}

/* Skip one field's value (its tag read). */
static bool skip(bb_reader *r, unsigned wt, const uint8_t **d, size_t *l)
{
    uint64_t v;
    *d = NULL;
    *l = 0;
    switch (wt) {
    case WT_VARINT: return bb_reader_uvarint(r, &v);
    case WT_I64: return bb_reader_view(r, 8, d);
    case WT_I32: return bb_reader_view(r, 4, d);
    case WT_LEN: return bb_reader_delimited(r, d, l);
    default: return bb_reader_fail(r, r->pos, BB_EPARSE, "unsupported wire type");
    }
}

int bb_model_signatures(const uint8_t *p, size_t n, bb_model_signature *out, size_t cap,
                        size_t *count, size_t *signed_len, bb_error *err)
{
    bb_reader r;
    bb_reader_init(&r, p, n);
    *count = 0;
    *signed_len = n;
    bool signed_part_over = false;
    while (bb_reader_left(&r)) {
        size_t at = r.pos;
        uint64_t tag;
        const uint8_t *d, *v;
        size_t l, vl;
        if (!bb_reader_uvarint(&r, &tag) || !skip(&r, (unsigned)(tag & 7), &d, &l))
            return bad(err, r.status == BB_ETRUNC ? BB_ETRUNC : BB_EPARSE, r.fail_at,
                       r.why ? r.why : "malformed protobuf");
        bool sig = tag == (F_METADATA_PROPS << 3 | WT_LEN) && is_signature(d, l, &v, &vl);
        if (!sig) {
            if (signed_part_over)
                return bad(err, BB_EPARSE, at,
                           "a field follows the signatures (the artifact changed after it was "
                           "signed, or was written again by another tool)");
            continue;
        }
        if (!signed_part_over)
            *signed_len = at;
        signed_part_over = true;
        if (*count == cap)
            return bb_error_set(err, BB_ELIMIT, "signature: more than %zu signatures", cap);
        bb_model_signature *s = &out[(*count)++];
        s->offset = at;
        s->len = r.pos - at;
        int rc = parse_value(v, vl, at, s, err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

int bb_model_sign(const uint8_t *p, size_t n, const bb_keypair *kp, uint8_t **out,
                  size_t *out_len, bb_error *err)
{
    bb_model_signature sigs[BB_MODEL_MAX_SIGNATURES];
    size_t count, signed_len;
    int rc = bb_model_signatures(p, n, sigs, BB_MODEL_MAX_SIGNATURES, &count, &signed_len, err);
    if (rc)
        return rc;
    bb_peerid me;
    bb_peerid_from_pubkey(kp->pk, &me);
    uint8_t sig[BB_ED25519_SIG_LEN];
    char value[VALUE_MAX + 1], b64[SIG_B64_LEN + 1];
    if ((rc = bb_keypair_sign(kp, p, signed_len, sig, err)) ||
        (rc = bb_peerid_to_text(&me, value, sizeof value, err)))
        return rc;
    sodium_bin2base64(b64, sizeof b64, sig, sizeof sig, sodium_base64_VARIANT_ORIGINAL);
    strcat(value, " ");
    strcat(value, b64);
    bb_writer entry = {0}, w = {0};
    bb_writer_put_uvarint(&entry, 1 << 3 | WT_LEN);
    bb_writer_put_str(&entry, BB_META_SIGNATURE);
    bb_writer_put_uvarint(&entry, 2 << 3 | WT_LEN);
    bb_writer_put_str(&entry, value);
    bb_writer_put(&w, p, signed_len);
    for (size_t i = 0; i < count; i++) /* the others' signatures, as they were */
        if (!bb_peerid_equal(&sigs[i].signer, &me))
            bb_writer_put(&w, p + sigs[i].offset, sigs[i].len);
    bb_writer_put_uvarint(&w, F_METADATA_PROPS << 3 | WT_LEN);
    bb_writer_put_delimited(&w, entry.data, entry.len);
    bool ok = !entry.failed && bb_writer_take(&w, out, out_len);
    bb_writer_free(&entry);
    return ok ? BB_OK : bb_error_set(err, BB_ENOMEM, "signature: out of memory");
}

int bb_model_verify(const uint8_t *p, size_t n, const bb_peerid *signers, size_t n_signers,
                    bb_peerid *who, bb_error *err)
{
    bb_model_signature sigs[BB_MODEL_MAX_SIGNATURES];
    size_t count, signed_len;
    int rc = bb_model_signatures(p, n, sigs, BB_MODEL_MAX_SIGNATURES, &count, &signed_len, err);
    if (rc)
        return rc;
    if (!count)
        return bb_error_set(err, BB_EVALIDATE, "the artifact is not signed");
    char listed[BB_PEERID_TEXT_MAX] = "", others[256] = "";
    for (size_t i = 0; i < count; i++) {
        bool wanted = false;
        for (size_t k = 0; k < n_signers && !wanted; k++)
            wanted = bb_peerid_equal(&sigs[i].signer, &signers[k]);
        char t[BB_PEERID_TEXT_MAX];
        if (bb_peerid_to_text(&sigs[i].signer, t, sizeof t, NULL) != BB_OK)
            snprintf(t, sizeof t, "?");
        if (!wanted) {
            size_t o = strlen(others);
            snprintf(others + o, sizeof others - o, "%s%s", o ? ", " : "", t);
            continue;
        }
        if (bb_peerid_verify(&sigs[i].signer, p, signed_len, sigs[i].sig, NULL) == BB_OK) {
            if (who)
                *who = sigs[i].signer;
            return BB_OK;
        }
        snprintf(listed, sizeof listed, "%s", t);
    }
    if (listed[0])
        return bb_error_set(err, BB_EVALIDATE,
                            "the signature by %s does not verify: the artifact's bytes changed "
                            "after it was signed", listed);
    return bb_error_set(err, BB_EVALIDATE,
                        "the artifact is signed only by keys not required (%s)", others);
}
