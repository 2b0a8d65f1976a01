/*
 * flood_peer.c — a hostile bbd peer for the flood tests (bbd_flood.sh).
 *
 *   flood_peer envelopes IP:PORT SECONDS   one identity sending envelopes
 *                                          as fast as the socket takes them
 *   flood_peer oversize IP:PORT COUNT      COUNT connections, each announcing
 *                                          a 1 TiB envelope frame
 *   flood_peer identities IP:PORT COUNT    COUNT connections, each a new
 *                                          PeerId, a handshake and an envelope
 *
 * Every connection first sends a valid handshake (bbd_handshake_encode, so
 * this follows the real one) announcing a loopback address only: until
 * dial restrictions land (issue 20) a node dials whatever its peers
 * announce. The envelopes are well-framed WireEnvelopes with a fill for a
 * site nobody has, so each costs the victim a decode and an unroutable
 * count. Prints "sent N" (frames or connections) and exits 0; an
 * unreachable victim exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"

static struct sockaddr_in victim;

static void die(const char *what, const char *why)
{
    fprintf(stderr, "flood_peer: error: %s: %s\n", what, why);
    exit(1);
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&victim, sizeof victim) != 0)
        die("connect", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The handshake frame of identity k (a PeerId from seed k). */
static size_t handshake(uint32_t k, uint8_t *out, size_t cap)
{
    bbd_handshake h = {.version = BBD_HANDSHAKE_VERSION, .n_addrs = 1, .n_targets = 1};
    uint8_t seed[32] = {0xf1, 0x00, (uint8_t)(k >> 24), (uint8_t)(k >> 16), (uint8_t)(k >> 8),
                        (uint8_t)k};
    uint8_t addr[32], body[512];
    size_t alen = 0, n = 0;
    bb_error err = {0};
    if (bb_peerid_from_seed(seed, NULL, &h.peer, &err) ||
        bb_multiaddr_parse("/ip4/127.0.0.1/tcp/9", addr, sizeof addr, &alen, &err))
        die("identity", err.msg);
    h.addrs[0] = (bb_multiaddr_ref){addr, alen};
    h.targets[0] = (bbd_handshake_target){"Pinger", 6};
    if (bbd_handshake_encode(&h, body, sizeof body, &n, &err))
        die("bbd_handshake_encode", err.msg);
    size_t hl = bbd_frame_header_encode(BBD_FRAME_HANDSHAKE, n, out);
    if (hl + n > cap)
        die("handshake", "too long");
    memcpy(out + hl, body, n);
    return hl + n;
}

/* An envelope frame: one fill for /site/999999 (no such site), 64 bytes. */
static size_t envelope(uint8_t *out)
{
    uint8_t sfx[16], env[128];
    size_t sl = 0, n = 0;
    bb_suffix_site(999999, sfx, sizeof sfx, &sl, NULL);
    uint8_t fill[96];
    size_t fl = 0;
    fill[fl++] = 0x0a; /* SlotFill.dest_suffix */
    fill[fl++] = (uint8_t)sl;
    memcpy(fill + fl, sfx, sl);
    fl += sl;
    fill[fl++] = 0x12; /* SlotFill.payload */
    fill[fl++] = 64;
    memset(fill + fl, 0x5a, 64);
    fl += 64;
    env[n++] = 0x12; /* WireEnvelope.fills */
    env[n++] = (uint8_t)fl;
    memcpy(env + n, fill, fl);
    n += fl;
    size_t hl = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, n, out);
    memcpy(out + hl, env, n);
    return hl + n;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static unsigned long flood_envelopes(unsigned long seconds)
{
    uint8_t hs[1024], one[256], batch[256 * 64];
    int fd = dial();
    if (write_all(fd, hs, handshake(1, hs, sizeof hs)))
        die("handshake", "the victim closed the connection");
    size_t n = envelope(one), bn = 0;
    for (int i = 0; i < 64; i++, bn += n)
        memcpy(batch + bn, one, n);
    unsigned long sent = 0;
    for (uint64_t end = now_ms() + seconds * 1000; now_ms() < end; sent += 64)
        if (write_all(fd, batch, bn)) { /* closed on us: dial again */
            close(fd);
            fd = dial();
            write_all(fd, hs, handshake(1, hs, sizeof hs));
        }
    close(fd);
    return sent;
}

static unsigned long flood_oversize(unsigned long count)
{
    uint8_t hs[1024], hdr[BBD_FRAME_HEADER_MAX];
    size_t hl = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, (size_t)1 << 40, hdr);
    unsigned long done = 0;
    for (; done < count; done++) {
        int fd = dial();
        if (!write_all(fd, hs, handshake(2, hs, sizeof hs)))
            write_all(fd, hdr, hl);
        write_all(fd, (const uint8_t *)"0123456789abcdef", 16);
        close(fd);
    }
    return done;
}

static unsigned long flood_identities(unsigned long count)
{
    uint8_t hs[1024], env[256];
    size_t en = envelope(env);
    unsigned long done = 0;
    for (; done < count; done++) {
        int fd = dial();
        if (!write_all(fd, hs, handshake(1000 + (uint32_t)done, hs, sizeof hs)))
            write_all(fd, env, en);
        close(fd);
    }
    return done;
}

int main(int argc, char **argv)
{
    char host[64];
    unsigned port;
    if (argc != 4 || sscanf(argv[2], "%63[^:]:%u", host, &port) != 2 ||
        inet_pton(AF_INET, host, &victim.sin_addr) != 1) {
        fprintf(stderr, "usage: flood_peer envelopes|oversize|identities IP:PORT N\n");
        return 2;
    }
    victim.sin_family = AF_INET;
    victim.sin_port = htons((uint16_t)port);
    signal(SIGPIPE, SIG_IGN);
    unsigned long n = strtoul(argv[3], NULL, 10), sent;
    if (!strcmp(argv[1], "envelopes"))
        sent = flood_envelopes(n);
    else if (!strcmp(argv[1], "oversize"))
        sent = flood_oversize(n);
    else if (!strcmp(argv[1], "identities"))
        sent = flood_identities(n);
    else {
        fprintf(stderr, "flood_peer: error: unknown mode '%s'\n", argv[1]);
        return 2;
    }
    printf("sent %lu\n", sent);
    return 0;
}
