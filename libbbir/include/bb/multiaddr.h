/*
 * multiaddr.h — multiaddrs in their standard text and binary forms
 * (DESIGN.md decision 6; IR_AND_DSL.md Part 8 for the intra-node suffixes).
 *
 * Binary form: a sequence of components, each
 *     <varint protocol code> <value>
 * where the value is fixed-size for ip4 (4 bytes), ip6 (16 bytes) and
 * tcp/udp (2-byte big-endian port), and <varint length><bytes> for dns,
 * dns4, dns6 and p2p (multiformats/multiaddr, codes from the multicodec
 * table). Varints are multiformats unsigned varints: minimal encoding, at
 * most 9 bytes — except the u64 values of /site and /component, which may
 * take 10.
 *
 *   text              code      value
 *   /ip4/1.2.3.4      0x04      4 bytes
 *   /tcp/7001         0x06      2 bytes big-endian
 *   /udp/7001         0x0111    2 bytes big-endian
 *   /ip6/::1          0x29      16 bytes
 *   /dns/h.example    0x35      varint length + name
 *   /dns4/...         0x36      varint length + name
 *   /dns6/...         0x37      varint length + name
 *   /p2p/12D3KooW...  0x01a5    varint length + PeerId multihash (text:
 *                               base58btc; /ipfs/ is read as an alias)
 *
 * Intra-node suffixes of BytesAndBrains (SlotFill.dest_suffix). Their codes
 * are in the multicodec private-use range 0x300000..0x3fffff, which the
 * multicodec table will never assign:
 *   /site/<u64>       0x300001  varint value (NodeSiteId: data plane)
 *   /component/<u64>  0x300002  varint value (ComponentRef)
 *   /op/<name>        0x300003  varint length + name (only right after
 *                               /component: control plane)
 * A full address is <transport part><suffix part>, e.g.
 *   /ip4/10.0.0.2/tcp/7001/p2p/12D3KooW.../site/17
 *   /ip4/10.0.0.2/udp/7001/component/3/op/Aggregate
 * Names (dns, op) are 1..255 bytes of printable ASCII other than '/'.
 * Numbers in text are canonical decimal (no sign, no leading zeros).
 *
 * Limits: a binary multiaddr is at most 1024 bytes and 32 components; its
 * text at most 4096 characters. The empty address is invalid. Nothing ever
 * reads past the given length.
 *
 * Errors (returned and put in bb_error with the input and byte offset):
 *   BB_EPARSE       malformed text or binary (bad ip, port > 65535, bad
 *                   number, bad name, bad varint, bad PeerId, trailing bytes)
 *   BB_EUNSUPPORTED unknown protocol name or code; no usable transport
 *   BB_ETRUNC       binary ends inside a component
 *   BB_ELIMIT       over 1024 bytes, 32 components or 4096 text characters
 *   BB_EFULL        the caller's output buffer is too small
 *   BB_EINVAL       bad arguments (NULL, unknown transport protocol)
 */
#ifndef BB_MULTIADDR_H
#define BB_MULTIADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bb/status.h"

#define BB_MULTIADDR_MAX_LEN 1024
#define BB_MULTIADDR_MAX_COMPONENTS 32
#define BB_MULTIADDR_TEXT_MAX 4096 /* characters, without the NUL */
#define BB_MULTIADDR_NAME_MAX 255  /* dns and op names, bytes */

/* Protocol codes (multicodec). */
typedef enum bb_ma_proto {
    BB_MA_IP4 = 0x04,
    BB_MA_TCP = 0x06,
    BB_MA_IP6 = 0x29,
    BB_MA_DNS = 0x35,
    BB_MA_DNS4 = 0x36,
    BB_MA_DNS6 = 0x37,
    BB_MA_UDP = 0x0111,
    BB_MA_P2P = 0x01a5,
    BB_MA_SITE = 0x300001,      /* private use */
    BB_MA_COMPONENT = 0x300002, /* private use */
    BB_MA_OP = 0x300003         /* private use */
} bb_ma_proto;

/* "ip4", "site", ... ; NULL for an unknown code. */
const char *bb_ma_proto_name(uint64_t code);

/* One decoded component. Pointers borrow the address buffer. */
typedef struct bb_multiaddr_component {
    uint64_t code;        /* bb_ma_proto */
    const char *name;     /* static protocol name */
    size_t offset;        /* byte offset of the component in the address */
    size_t len;           /* encoded length: code varint + value */
    const uint8_t *value; /* value bytes (after any length prefix) */
    size_t value_len;
    uint64_t num;         /* port (tcp/udp) or id (site/component); else 0 */
} bb_multiaddr_component;

/* Borrowed binary address, for lists. */
typedef struct bb_multiaddr_ref {
    const uint8_t *data;
    size_t len;
} bb_multiaddr_ref;

/* ---- text <-> binary ------------------------------------------------------- */

/* Parse NUL-terminated text into out[cap]; *out_len gets the byte count.
 * Borrows text. */
int bb_multiaddr_parse(const char *text, uint8_t *out, size_t cap, size_t *out_len,
                       bb_error *err);
/* Same into a new malloc'd buffer (*out; caller frees). */
int bb_multiaddr_parse_alloc(const char *text, uint8_t **out, size_t *out_len, bb_error *err);

/* Format a binary address as NUL-terminated text into out[cap]
 * (BB_MULTIADDR_TEXT_MAX + 1 always suffices); *out_len (may be NULL) gets
 * the text length. Validates first. Borrows addr. */
int bb_multiaddr_format(const uint8_t *addr, size_t len, char *out, size_t cap,
                        size_t *out_len, bb_error *err);
/* Same into a new malloc'd string (*out; caller frees). */
int bb_multiaddr_format_alloc(const uint8_t *addr, size_t len, char **out, bb_error *err);

/* ---- binary inspection ----------------------------------------------------- */

/* Check a binary address completely (codes, sizes, values, limits). */
int bb_multiaddr_validate(const uint8_t *addr, size_t len, bb_error *err);
/* Validate and decode every component into comps[cap] (cap >=
 * BB_MULTIADDR_MAX_COMPONENTS always suffices); *n gets the count. */
int bb_multiaddr_decode(const uint8_t *addr, size_t len, bb_multiaddr_component *comps,
                        size_t cap, size_t *n, bb_error *err);

/* Component-by-component walk; stops at the first error. */
typedef struct bb_multiaddr_iter {
    const uint8_t *addr;
    size_t len;
    size_t pos;
    size_t count;
    uint64_t prev_code; /* for the /component/../op order rule */
} bb_multiaddr_iter;
void bb_multiaddr_iter_init(bb_multiaddr_iter *it, const uint8_t *addr, size_t len);
/* BB_OK with *more = true and *c filled, or BB_OK with *more = false at the
 * end; an error for a malformed component (the walk cannot continue). */
int bb_multiaddr_iter_next(bb_multiaddr_iter *it, bb_multiaddr_component *c, bool *more,
                           bb_error *err);

/* Split at the first intra-node component (/site, /component, /op): the
 * transport part is addr[0..*transport_len), the suffix part the rest
 * (either may be empty). Every component after the split point must be an
 * intra-node one (BB_EPARSE otherwise). Validates. */
int bb_multiaddr_split(const uint8_t *addr, size_t len, size_t *transport_len, bb_error *err);

/* Concatenate two binary addresses (e.g. transport + suffix) into
 * out[cap]; the result is validated against the limits. */
int bb_multiaddr_join(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
                      uint8_t *out, size_t cap, size_t *out_len, bb_error *err);

/* ---- intra-node suffixes ----------------------------------------------------- */

typedef enum bb_suffix_kind {
    BB_SUFFIX_SITE = 1,        /* /site/<site_id> */
    BB_SUFFIX_COMPONENT_OP = 2 /* /component/<cref>/op/<op> */
} bb_suffix_kind;

typedef struct bb_suffix {
    bb_suffix_kind kind;
    uint64_t site_id;                    /* BB_SUFFIX_SITE */
    uint64_t cref;                       /* BB_SUFFIX_COMPONENT_OP */
    char op[BB_MULTIADDR_NAME_MAX + 1];  /* BB_SUFFIX_COMPONENT_OP, NUL-terminated */
} bb_suffix;

/* Binary /site/<site_id> into out[cap] (at most 14 bytes). */
int bb_suffix_site(uint64_t site_id, uint8_t *out, size_t cap, size_t *out_len, bb_error *err);
/* Binary /component/<cref>/op/<op> into out[cap]. op: a valid name. */
int bb_suffix_component_op(uint64_t cref, const char *op, uint8_t *out, size_t cap,
                           size_t *out_len, bb_error *err);
/* Parse the suffix of a binary address: either a bare suffix or a full
 * address ending in one (the transport part is skipped). The suffix part
 * must be exactly /site/<id> or /component/<c>/op/<name>; an address with
 * no suffix part is BB_ENOTFOUND. */
int bb_suffix_parse(const uint8_t *addr, size_t len, bb_suffix *out, bb_error *err);

/* ---- transports ---------------------------------------------------------------- */

/* Address families a transport accepts (bit mask). */
#define BB_MA_FAMILY_IP4 1u
#define BB_MA_FAMILY_IP6 2u
#define BB_MA_FAMILY_ANY (BB_MA_FAMILY_IP4 | BB_MA_FAMILY_IP6)

/* An IP transport endpoint: /ip4|ip6/<ip>/tcp|udp/<port>. */
typedef struct bb_ma_transport {
    bb_ma_proto proto; /* BB_MA_TCP or BB_MA_UDP */
    int family;        /* AF_INET or AF_INET6 */
    uint8_t ip[16];    /* network order; 4 bytes used for AF_INET */
    uint16_t port;     /* host order */
} bb_ma_transport;

/* Read the transport of an address: it must begin /ip4|ip6/../tcp|udp/..;
 * anything after (p2p, suffix) is ignored. Names (/dns...) and other
 * layouts are BB_EUNSUPPORTED (a transport cannot dial them directly:
 * bb_multiaddr_endpoint reads those). */
int bb_multiaddr_transport(const uint8_t *addr, size_t len, bb_ma_transport *out,
                           bb_error *err);
/* Where a transport dials: an IP transport, or a host name that must be
 * resolved first (/dns: either family, /dns4: IPv4, /dns6: IPv6). */
typedef struct bb_ma_endpoint {
    bool is_name;
    bb_ma_transport ip;                  /* !is_name */
    char name[BB_MULTIADDR_NAME_MAX + 1]; /* is_name: NUL-terminated */
    int family;                          /* is_name: AF_UNSPEC, AF_INET or AF_INET6 */
    bb_ma_proto proto;                   /* BB_MA_TCP or BB_MA_UDP (both cases) */
    uint16_t port;                       /* host order (both cases) */
} bb_ma_endpoint;

/* Read the endpoint of an address: /ip4|ip6|dns|dns4|dns6/../tcp|udp/..;
 * anything after (p2p, suffix) is ignored. Other layouts are
 * BB_EUNSUPPORTED. */
int bb_multiaddr_endpoint(const uint8_t *addr, size_t len, bb_ma_endpoint *out, bb_error *err);

/* Binary /ip4|ip6/<ip>/tcp|udp/<port> of t into out[cap] (<= 21 bytes). */
int bb_ma_transport_encode(const bb_ma_transport *t, uint8_t *out, size_t cap,
                           size_t *out_len, bb_error *err);
/* sockaddr_in / sockaddr_in6 of t; *sslen gets its size. */
int bb_ma_transport_to_sockaddr(const bb_ma_transport *t, struct sockaddr_storage *ss,
                                socklen_t *sslen, bb_error *err);
/* Transport from a sockaddr (AF_INET / AF_INET6, e.g. from accept or
 * recvfrom) with proto BB_MA_TCP or BB_MA_UDP. IPv4-mapped IPv6 addresses
 * stay ip6. */
int bb_ma_transport_from_sockaddr(const struct sockaddr *sa, socklen_t salen, bb_ma_proto proto,
                                  bb_ma_transport *out, bb_error *err);
/* Shorthands: binary address <-> sockaddr. */
int bb_multiaddr_to_sockaddr(const uint8_t *addr, size_t len, bb_ma_proto *proto,
                             struct sockaddr_storage *ss, socklen_t *sslen, bb_error *err);
int bb_multiaddr_from_sockaddr(const struct sockaddr *sa, socklen_t salen, bb_ma_proto proto,
                               uint8_t *out, size_t cap, size_t *out_len, bb_error *err);

/* First address of addrs[0..n) that is a valid multiaddr with an IP
 * transport of proto (BB_MA_TCP / BB_MA_UDP) in one of families. *index
 * and *out (either may be NULL) describe it. BB_ENOTFOUND if none is
 * usable (invalid entries are skipped, not errors). */
int bb_multiaddr_pick(const bb_multiaddr_ref *addrs, size_t n, bb_ma_proto proto,
                      unsigned families, size_t *index, bb_ma_transport *out, bb_error *err);

#endif
