/*
 * peerid.c — Ed25519 node keys, libp2p PeerIds, base58btc and key files.
 *
 * Layouts are described in bb/peerid.h. Everything here is a pure function
 * over caller memory except the key-file I/O; libsodium is initialised once
 * per process through pthread_once (its own state is thread-safe).
 */
#include "bb/peerid.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bb/io.h"
#include "bb/uvarint.h"

/* ---- libsodium init ----------------------------------------------------- */

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_rc = -1; /* written once under sodium_once, then read-only */

static void sodium_init_once(void)
{
    sodium_rc = sodium_init() < 0 ? -1 : 0;
}

static int crypto_ready(bb_error *err)
{
    pthread_once(&sodium_once, sodium_init_once);
    if (sodium_rc != 0)
        return bb_error_set(err, BB_ERUNTIME, "libsodium initialisation failed");
    return BB_OK;
}

/* ---- keys --------------------------------------------------------------- */

int bb_keypair_generate(bb_keypair *kp, bb_error *err)
{
    int rc = crypto_ready(err);
    if (rc)
        return rc;
    if (crypto_sign_keypair(kp->pk, kp->sk) != 0)
        return bb_error_set(err, BB_ERUNTIME, "Ed25519 key generation failed");
    return BB_OK;
}

int bb_keypair_from_seed(const uint8_t seed[BB_ED25519_SEED_LEN], bb_keypair *kp,
                         bb_error *err)
{
    int rc = crypto_ready(err);
    if (rc)
        return rc;
    if (crypto_sign_seed_keypair(kp->pk, kp->sk, seed) != 0)
        return bb_error_set(err, BB_ERUNTIME, "Ed25519 key derivation failed");
    return BB_OK;
}

void bb_keypair_wipe(bb_keypair *kp)
{
    if (kp && crypto_ready(NULL) == BB_OK)
        sodium_memzero(kp, sizeof *kp);
    else if (kp)
        memset(kp, 0, sizeof *kp);
}

int bb_keypair_sign(const bb_keypair *kp, const void *msg, size_t n,
                    uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err)
{
    int rc = crypto_ready(err);
    if (rc)
        return rc;
    if (crypto_sign_detached(sig, NULL, msg, n, kp->sk) != 0)
        return bb_error_set(err, BB_ERUNTIME, "Ed25519 signing failed");
    return BB_OK;
}

int bb_ed25519_verify(const uint8_t pk[BB_ED25519_PK_LEN], const void *msg, size_t n,
                      const uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err)
{
    int rc = crypto_ready(err);
    if (rc)
        return rc;
    if (crypto_sign_verify_detached(sig, msg, n, pk) != 0)
        return bb_error_set(err, BB_EVALIDATE, "Ed25519 signature does not verify (%zu-byte message)",
                            n);
    return BB_OK;
}

static const uint8_t PUBKEY_PROTO_HDR[4] = {0x08, 0x01, 0x12, 0x20};
static const uint8_t PRIVKEY_PROTO_HDR[4] = {0x08, 0x01, 0x12, 0x40};

void bb_pubkey_proto_encode(const uint8_t pk[BB_ED25519_PK_LEN],
                            uint8_t out[BB_PUBKEY_PROTO_LEN])
{
    memcpy(out, PUBKEY_PROTO_HDR, sizeof PUBKEY_PROTO_HDR);
    memcpy(out + sizeof PUBKEY_PROTO_HDR, pk, BB_ED25519_PK_LEN);
}

static const char *key_type_name(uint8_t t)
{
    switch (t) {
    case 0: return "RSA";
    case 1: return "Ed25519";
    case 2: return "Secp256k1";
    case 3: return "ECDSA";
    }
    return "unknown";
}

int bb_pubkey_proto_decode(const uint8_t *buf, size_t n, uint8_t pk[BB_ED25519_PK_LEN],
                           bb_error *err)
{
    if (n == BB_PUBKEY_PROTO_LEN && memcmp(buf, PUBKEY_PROTO_HDR, 4) == 0) {
        memcpy(pk, buf + 4, BB_ED25519_PK_LEN);
        return BB_OK;
    }
    if (n >= 2 && buf[0] == 0x08 && buf[1] != 0x01 && buf[1] < 0x80)
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "public key: key type %u (%s) is not supported, only Ed25519",
                            buf[1], key_type_name(buf[1]));
    /* name the first byte that departs from the canonical Ed25519 form */
    size_t off = 0;
    while (off < n && off < 4 && buf[off] == PUBKEY_PROTO_HDR[off])
        off++;
    if (off == 4)
        return bb_error_set(err, n < BB_PUBKEY_PROTO_LEN ? BB_ETRUNC : BB_EPARSE,
                            "public key: %zu bytes, an Ed25519 PublicKey protobuf has %d",
                            n, BB_PUBKEY_PROTO_LEN);
    return bb_error_set(err, off >= n ? BB_ETRUNC : BB_EPARSE,
                        "public key: not a canonical Ed25519 PublicKey protobuf at byte %zu",
                        off);
}

/* ---- PeerIds ------------------------------------------------------------ */

void bb_peerid_from_pubkey(const uint8_t pk[BB_ED25519_PK_LEN], bb_peerid *out)
{
    memset(out, 0, sizeof *out);
    out->bytes[0] = BB_MULTIHASH_IDENTITY;
    out->bytes[1] = BB_PUBKEY_PROTO_LEN;
    bb_pubkey_proto_encode(pk, out->bytes + 2);
    out->len = 2 + BB_PUBKEY_PROTO_LEN;
}

int bb_peerid_from_seed(const uint8_t seed[BB_ED25519_SEED_LEN], bb_keypair *kp,
                        bb_peerid *out, bb_error *err)
{
    bb_keypair local;
    bb_keypair *k = kp ? kp : &local;
    int rc = bb_keypair_from_seed(seed, k, err);
    if (rc == BB_OK)
        bb_peerid_from_pubkey(k->pk, out);
    if (!kp)
        bb_keypair_wipe(&local);
    return rc;
}

int bb_peerid_validate(const uint8_t *b, size_t n, bb_error *err)
{
    if (n == 0)
        return bb_error_set(err, BB_ETRUNC, "PeerId: empty");
    uint64_t code, len;
    size_t u1, u2;
    bb_uvarint_rc vr = bb_uvarint_decode(b, n, BB_UVARINT_MAX_SPEC, &code, &u1);
    if (vr != BB_UVARINT_OK)
        return bb_error_set(err, vr == BB_UVARINT_TRUNC ? BB_ETRUNC : BB_EPARSE,
                            "PeerId byte 0: %s in multihash code", bb_uvarint_rc_str(vr));
    if (code != BB_MULTIHASH_IDENTITY && code != BB_MULTIHASH_SHA2_256)
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "PeerId byte 0: multihash code 0x%llx is neither identity (0x00) "
                            "nor sha2-256 (0x12)",
                            (unsigned long long)code);
    vr = bb_uvarint_decode(b + u1, n - u1, BB_UVARINT_MAX_SPEC, &len, &u2);
    if (vr != BB_UVARINT_OK)
        return bb_error_set(err, vr == BB_UVARINT_TRUNC ? BB_ETRUNC : BB_EPARSE,
                            "PeerId byte %zu: %s in digest length", u1, bb_uvarint_rc_str(vr));
    size_t off = u1 + u2;
    if (code == BB_MULTIHASH_IDENTITY && (len == 0 || len > BB_PEERID_INLINE_MAX))
        return bb_error_set(err, BB_EPARSE,
                            "PeerId byte %zu: identity digest of %llu bytes (must be 1..%d)", u1,
                            (unsigned long long)len, BB_PEERID_INLINE_MAX);
    if (code == BB_MULTIHASH_SHA2_256 && len != 32)
        return bb_error_set(err, BB_EPARSE,
                            "PeerId byte %zu: sha2-256 digest of %llu bytes (must be 32)", u1,
                            (unsigned long long)len);
    if (len > n - off)
        return bb_error_set(err, BB_ETRUNC,
                            "PeerId byte %zu: digest of %llu bytes but only %zu remain", off,
                            (unsigned long long)len, n - off);
    if (len < n - off)
        return bb_error_set(err, BB_EPARSE, "PeerId byte %llu: %zu trailing bytes after digest",
                            (unsigned long long)(off + len), (size_t)(n - off - len));
    return BB_OK;
}

int bb_peerid_from_bytes(const uint8_t *b, size_t n, bb_peerid *out, bb_error *err)
{
    int rc = bb_peerid_validate(b, n, err);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    memcpy(out->bytes, b, n); /* validate bounds n by BB_PEERID_MAX_LEN */
    out->len = (uint8_t)n;
    return BB_OK;
}

int bb_peerid_to_text(const bb_peerid *id, char *out, size_t cap, bb_error *err)
{
    if (id->len > BB_PEERID_MAX_LEN || bb_peerid_validate(id->bytes, id->len, NULL) != BB_OK)
        return bb_error_set(err, BB_EINVAL, "PeerId to text: not a valid PeerId");
    return bb_base58_encode(id->bytes, id->len, out, cap, NULL, err);
}

int bb_peerid_from_text(const char *text, bb_peerid *out, bb_error *err)
{
    size_t n = strnlen(text, BB_PEERID_TEXT_MAX + 1);
    if (n == 0)
        return bb_error_set(err, BB_EPARSE, "PeerId \"\": empty text");
    if (n > BB_PEERID_TEXT_MAX)
        return bb_error_set(err, BB_ELIMIT, "PeerId \"%.24s...\": longer than %d characters",
                            text, BB_PEERID_TEXT_MAX);
    uint8_t buf[BB_PEERID_MAX_LEN];
    size_t len;
    int rc = bb_base58_decode(text, n, buf, sizeof buf, &len, err);
    if (rc == BB_EFULL)
        rc = bb_error_set(err, BB_EPARSE, "decodes to more than %d bytes", BB_PEERID_MAX_LEN);
    if (rc == BB_OK)
        rc = bb_peerid_from_bytes(buf, len, out, err);
    if (rc)
        bb_error_prefix(err, "PeerId \"%s\"", text);
    return rc;
}

bool bb_peerid_equal(const bb_peerid *a, const bb_peerid *b)
{
    return a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

int bb_peerid_pubkey(const bb_peerid *id, uint8_t pk[BB_ED25519_PK_LEN], bb_error *err)
{
    int rc = id->len > BB_PEERID_MAX_LEN
                 ? bb_error_set(err, BB_EINVAL, "PeerId: length %u out of range", id->len)
                 : bb_peerid_validate(id->bytes, id->len, err);
    if (rc)
        return rc;
    if (id->bytes[0] != BB_MULTIHASH_IDENTITY)
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "PeerId is a sha2-256 hash: its public key is not recoverable");
    return bb_pubkey_proto_decode(id->bytes + 2, id->len - 2u, pk, err);
}

bool bb_peerid_matches_pubkey(const bb_peerid *id, const uint8_t pk[BB_ED25519_PK_LEN])
{
    bb_peerid mine;
    bb_peerid_from_pubkey(pk, &mine);
    return bb_peerid_equal(id, &mine);
}

int bb_peerid_verify(const bb_peerid *id, const void *msg, size_t n,
                     const uint8_t sig[BB_ED25519_SIG_LEN], bb_error *err)
{
    uint8_t pk[BB_ED25519_PK_LEN];
    int rc = bb_peerid_pubkey(id, pk, err);
    if (rc)
        return rc;
    return bb_ed25519_verify(pk, msg, n, sig, err);
}

/* ---- base58btc ---------------------------------------------------------- */

static const char B58_ALPHABET[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

static int b58_digit(unsigned char c)
{
    const char *p = c ? strchr(B58_ALPHABET, c) : NULL;
    return p ? (int)(p - B58_ALPHABET) : -1;
}

int bb_base58_encode(const uint8_t *in, size_t n, char *out, size_t cap, size_t *out_len,
                     bb_error *err)
{
    if (n > BB_BASE58_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "base58 encode: %zu bytes exceeds the limit of %d",
                            n, BB_BASE58_MAX_BYTES);
    size_t zeros = 0;
    while (zeros < n && in[zeros] == 0)
        zeros++;
    /* log(256)/log(58) < 1.38 */
    uint8_t digits[BB_BASE58_MAX_BYTES * 138 / 100 + 1];
    size_t size = (n - zeros) * 138 / 100 + 1, used = 0;
    memset(digits, 0, size);
    for (size_t i = zeros; i < n; i++) {
        unsigned carry = in[i];
        size_t j = 0;
        /* digits[size-1] is least significant; only touch the used span */
        for (; (carry || j < used) && j < size; j++) {
            size_t k = size - 1 - j;
            carry += 256u * digits[k];
            digits[k] = (uint8_t)(carry % 58);
            carry /= 58;
        }
        used = j;
    }
    size_t skip = size - used;
    while (skip < size && digits[skip] == 0)
        skip++;
    size_t len = zeros + (size - skip);
    if (len + 1 > cap)
        return bb_error_set(err, BB_EFULL, "base58 encode: needs %zu bytes, buffer has %zu",
                            len + 1, cap);
    memset(out, '1', zeros);
    for (size_t i = skip; i < size; i++)
        out[zeros + i - skip] = B58_ALPHABET[digits[i]];
    out[len] = '\0';
    if (out_len)
        *out_len = len;
    return BB_OK;
}

int bb_base58_decode(const char *text, size_t n, uint8_t *out, size_t cap, size_t *out_len,
                     bb_error *err)
{
    if (n > BB_BASE58_MAX_TEXT)
        return bb_error_set(err, BB_ELIMIT,
                            "base58 decode: %zu characters exceeds the limit of %d", n,
                            BB_BASE58_MAX_TEXT);
    size_t zeros = 0;
    while (zeros < n && text[zeros] == '1')
        zeros++;
    /* log(58)/log(256) < 0.733 */
    uint8_t bytes[BB_BASE58_MAX_TEXT * 733 / 1000 + 1];
    size_t size = (n - zeros) * 733 / 1000 + 1, used = 0;
    memset(bytes, 0, size);
    for (size_t i = zeros; i < n; i++) {
        int d = b58_digit((unsigned char)text[i]);
        if (d < 0) {
            unsigned char c = (unsigned char)text[i];
            if (c >= 0x20 && c < 0x7f)
                return bb_error_set(err, BB_EPARSE,
                                    "base58 decode: '%c' at offset %zu is not a base58btc "
                                    "character",
                                    c, i);
            return bb_error_set(err, BB_EPARSE,
                                "base58 decode: byte 0x%02x at offset %zu is not a base58btc "
                                "character",
                                c, i);
        }
        unsigned carry = (unsigned)d;
        size_t j = 0;
        for (; (carry || j < used) && j < size; j++) {
            size_t k = size - 1 - j;
            carry += 58u * bytes[k];
            bytes[k] = (uint8_t)(carry & 0xff);
            carry >>= 8;
        }
        if (carry) /* cannot happen with the size bound above; refuse anyway */
            return bb_error_set(err, BB_EPARSE, "base58 decode: overflow at offset %zu", i);
        used = j;
    }
    size_t skip = size - used;
    while (skip < size && bytes[skip] == 0)
        skip++;
    size_t len = zeros + (size - skip);
    if (len > cap)
        return bb_error_set(err, BB_EFULL, "base58 decode: %zu bytes, buffer has %zu", len, cap);
    memset(out, 0, zeros);
    memcpy(out + zeros, bytes + skip, size - skip);
    if (out_len)
        *out_len = len;
    return BB_OK;
}

/* ---- key files ---------------------------------------------------------- */

int bb_keyfile_save(const char *path, const bb_keypair *kp, bb_error *err)
{
    uint8_t buf[BB_KEYFILE_LEN];
    memcpy(buf, PRIVKEY_PROTO_HDR, 4);
    memcpy(buf + 4, kp->sk, BB_ED25519_SK_LEN);

    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int e = errno;
        sodium_memzero(buf, sizeof buf);
        return bb_error_set(err, e == EEXIST ? BB_EEXIST : BB_EIO,
                            "key file %s: cannot create: %s", path, strerror(e));
    }
    int rc = BB_OK;
    const char *what = NULL;
    /* umask can only clear bits, but be explicit: owner read/write only */
    if (fchmod(fd, 0600) != 0)
        what = "chmod";
    else if (bb_write_all(fd, buf, sizeof buf) != 0)
        what = "write";
    else if (fsync(fd) != 0)
        what = "fsync";
    int e = errno;
    sodium_memzero(buf, sizeof buf);
    if (close(fd) != 0 && !what) {
        what = "close";
        e = errno;
    }
    if (what) {
        unlink(path);
        rc = bb_error_set(err, BB_EIO, "key file %s: %s failed: %s", path, what, strerror(e));
    }
    return rc;
}

int bb_keyfile_load(const char *path, bb_keypair *kp, bb_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        return bb_error_set(err, e == ENOENT ? BB_ENOTFOUND : BB_EIO,
                            "key file %s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return bb_error_set(err, BB_EIO, "key file %s: stat failed: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return bb_error_set(err, BB_ECONFIG, "key file %s: not a regular file", path);
    }
    if (st.st_mode & 0077) {
        close(fd);
        return bb_error_set(err, BB_ECONFIG,
                            "key file %s has mode %04o: group or others can access the "
                            "private key; refusing to use it (chmod 600 %s)",
                            path, (unsigned)(st.st_mode & 07777), path);
    }
    uint8_t buf[BB_KEYFILE_LEN + 1];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t r = read(fd, buf + got, sizeof buf - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            sodium_memzero(buf, sizeof buf);
            return bb_error_set(err, BB_EIO, "key file %s: read failed: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);

    int rc = BB_OK;
    if (got != BB_KEYFILE_LEN) {
        if (got > BB_KEYFILE_LEN)
            rc = bb_error_set(err, BB_EPARSE,
                              "key file %s: longer than the %d bytes of an Ed25519 PrivateKey",
                              path, BB_KEYFILE_LEN);
        else
            rc = bb_error_set(err, BB_EPARSE,
                              "key file %s: %zu bytes, an Ed25519 PrivateKey has %d", path, got,
                              BB_KEYFILE_LEN);
    } else if (memcmp(buf, PRIVKEY_PROTO_HDR, 4) != 0) {
        size_t off = 0;
        while (off < 4 && buf[off] == PRIVKEY_PROTO_HDR[off])
            off++;
        rc = bb_error_set(err, BB_EPARSE,
                          "key file %s byte %zu: not an Ed25519 PrivateKey protobuf "
                          "(expected 08 01 12 40)",
                          path, off);
    } else {
        rc = bb_keypair_from_seed(buf + 4, kp, err);
        if (rc == BB_OK && sodium_memcmp(kp->pk, buf + 4 + BB_ED25519_SEED_LEN,
                                         BB_ED25519_PK_LEN) != 0) {
            bb_keypair_wipe(kp);
            rc = bb_error_set(err, BB_EPARSE,
                              "key file %s byte %d: public key does not match the private key",
                              path, 4 + BB_ED25519_SEED_LEN);
        }
    }
    sodium_memzero(buf, sizeof buf);
    return rc;
}

int bb_keyfile_load_or_create(const char *path, bb_keypair *kp, bool *created, bb_error *err)
{
    if (created)
        *created = false;
    int rc = bb_keyfile_load(path, kp, err);
    if (rc != BB_ENOTFOUND)
        return rc;
    rc = bb_keypair_generate(kp, err);
    if (rc)
        return rc;
    rc = bb_keyfile_save(path, kp, err);
    if (rc == BB_EEXIST) /* lost a race with another creator: use theirs */
        return bb_keyfile_load(path, kp, err);
    if (rc == BB_OK && created)
        *created = true;
    if (rc)
        bb_keypair_wipe(kp);
    return rc;
}
