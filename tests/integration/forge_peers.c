/*
 * forge_peers.c — helper of secure_flood.sh: one machine posing as many
 * peers. For each of N fresh Ed25519 keys it connects to a node, runs the
 * Noise handshake as a real peer would (so the node admits it: the key is
 * genuinely proven), announces SENTINEL as its only listen address, waits
 * for the admission and hangs up. A listening socket on SENTINEL counts
 * the connections the node makes to it meanwhile and for GRACE_MS after
 * (a node that redials what forged peers announce shows up there).
 *
 *   forge_peers HOST PORT N SENTINEL_HOST SENTINEL_PORT GRACE_MS
 *
 * Prints "admitted A refused R sentinel_connections S"; exit 0, or 2 on bad
 * usage / 1 when the node could not be reached at all. Built by the test
 * against libbbdhost.a (noise.c, noise_payload.c, handshake.c, frame.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bb/multiaddr.h"
#include "bbd/host/frame.h"
#include "bbd/host/handshake.h"
#include "bbd/host/noise.h"
#include "bbd/host/noise_payload.h"

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int sentinel_fd = -1, sentinel_hits = 0;

/* Accept (and count) what the node dials at the sentinel. */
static void sentinel_poll(int ms)
{
    struct pollfd p = {.fd = sentinel_fd, .events = POLLIN};
    while (poll(&p, 1, ms) > 0) {
        int c = accept(sentinel_fd, NULL, NULL);
        if (c >= 0) {
            sentinel_hits++;
            close(c);
        }
        ms = 0;
    }
}

static int read_full(int fd, uint8_t *b, size_t n)
{
    for (size_t got = 0; got < n;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 3000) <= 0)
            return -1;
        ssize_t r = recv(fd, b + got, n - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* One Noise message (u16 length framing). */
static int read_msg(int fd, uint8_t *b, size_t cap, size_t *n)
{
    uint8_t h[2];
    if (read_full(fd, h, 2) != 0)
        return -1;
    *n = (size_t)h[0] << 8 | h[1];
    return *n <= cap ? read_full(fd, b, *n) : -1;
}

static int write_msg(int fd, const uint8_t *m, size_t n)
{
    uint8_t h[2] = {(uint8_t)(n >> 8), (uint8_t)n};
    return send(fd, h, 2, MSG_NOSIGNAL) == 2 && send(fd, m, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* One forged peer: 1 admitted, 0 refused, -1 could not connect. */
static int forge_one(const struct sockaddr_in *to, const uint8_t *sentinel, size_t sl)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)to, sizeof *to) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    bb_keypair kp;
    bb_peerid id;
    bbd_noise_hs hs;
    uint8_t s[32], pub[32], msg[4096], pl[4096], sig[64], hsb[512];
    size_t n, pn, hl;
    int result = 0;
    bb_keypair_generate(&kp, NULL);
    bb_peerid_from_pubkey(kp.pk, &id);
    bbd_noise_keypair(s, pub, true, NULL);
    bbd_noise_hs_init(&hs, true, NULL, 0, s, NULL, NULL);
    bbd_handshake h = {.peer = id, .version = BBD_HANDSHAKE_VERSION, .n_addrs = 1};
    h.addrs[0] = (bb_multiaddr_ref){sentinel, sl};
    if (bbd_noise_hs_write(&hs, NULL, 0, msg, sizeof msg, &n, NULL) || write_msg(fd, msg, n) ||
        read_msg(fd, msg, sizeof msg, &n) ||
        bbd_noise_hs_read(&hs, msg, n, pl, sizeof pl, &pn, NULL) ||
        bbd_noise_sign_static(&kp, hs.s_pub, sig, NULL) ||
        bbd_handshake_encode(&h, hsb, sizeof hsb, &hl, NULL) ||
        bbd_noise_payload_encode(kp.pk, sig, hsb, hl, pl, sizeof pl, &pn, NULL) ||
        bbd_noise_hs_write(&hs, pl, pn, msg, sizeof msg, &n, NULL) || write_msg(fd, msg, n))
        result = 0;
    else if (read_msg(fd, msg, sizeof msg, &n) == 0 && n > BBD_NOISE_TAGLEN) {
        bbd_noise_cipher tx, rx;
        bbd_noise_hs_split(&hs, &tx, &rx, NULL);
        /* an empty admission frame is 3 bytes: 0x02 0x1a 0x00 */
        result = bbd_noise_decrypt(&rx, NULL, 0, msg, n, msg) == BB_OK && n == 3 + 16 &&
                 msg[1] == 0x1a && msg[2] == 0;
    }
    bb_keypair_wipe(&kp);
    bbd_noise_hs_wipe(&hs);
    close(fd);
    return result;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: forge_peers HOST PORT N SENTINEL_HOST SENTINEL_PORT GRACE_MS\n");
        return 2;
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[5]))};
    if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1 || inet_pton(AF_INET, argv[4], &sa.sin_addr) != 1)
        return 2;
    int n = atoi(argv[3]), grace = atoi(argv[6]), one = 1;
    sentinel_fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(sentinel_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(sentinel_fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(sentinel_fd, 64) != 0) {
        perror("forge_peers: sentinel");
        return 1;
    }
    char text[64];
    uint8_t sentinel[BB_MULTIADDR_MAX_LEN];
    size_t sl;
    snprintf(text, sizeof text, "/ip4/%s/tcp/%s", argv[4], argv[5]);
    if (bb_multiaddr_parse(text, sentinel, sizeof sentinel, &sl, NULL) != BB_OK)
        return 2;
    int admitted = 0, refused = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        int r = forge_one(&to, sentinel, sl);
        admitted += r == 1;
        refused += r == 0;
        failed += r < 0;
        sentinel_poll(0);
    }
    for (long long end = now_ms() + grace; now_ms() < end;)
        sentinel_poll(50);
    printf("admitted %d refused %d sentinel_connections %d\n", admitted, refused, sentinel_hits);
    return failed == n ? 1 : 0;
}
