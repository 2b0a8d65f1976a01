/*
 * fragment_reassembly.h — rebuilds fragmented UDP envelopes with bounded
 * memory. No loop: time is passed in, so it is testable on its own.
 *
 * A message is keyed by (source, msg_id), where source is the caller's id
 * for the sending session. Its buffer (total bytes) and bitmap are
 * allocated at its first fragment and charged against one byte budget for
 * all partial messages; a fragment that would go over the budget or the
 * message count is refused. Duplicate fragments, also of a message that
 * completed recently, are recognised and ignored. Messages older than the
 * timeout are dropped by bbd_reasm_expire.
 */
#ifndef BBD_HOST_FRAGMENT_REASSEMBLY_H
#define BBD_HOST_FRAGMENT_REASSEMBLY_H

#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"
#include "bbd/host/fragment.h"

typedef struct bbd_reasm bbd_reasm;

typedef struct bbd_reasm_config {
    size_t budget_bytes;  /* all partial messages together */
    uint64_t timeout_ms;  /* from a message's first fragment */
    size_t max_messages;  /* partial messages at once */
} bbd_reasm_config;

typedef enum bbd_reasm_result {
    BBD_REASM_PARTIAL = 0, /* stored; more fragments needed */
    BBD_REASM_COMPLETE,    /* *msg / *len: the whole message (caller frees) */
    BBD_REASM_DUPLICATE    /* already had it; ignored */
} bbd_reasm_result;

bbd_reasm *bbd_reasm_new(const bbd_reasm_config *cfg);
void bbd_reasm_free(bbd_reasm *r);

/* Add one decoded FRAGMENT datagram from source. BB_OK with *res; or
 * BB_EBUDGET / BB_ELIMIT (over the byte budget / message count: refused),
 * BB_EPARSE (total or chunk differ from earlier fragments of the same
 * message: refused, the message is kept), BB_ENOMEM. */
int bbd_reasm_add(bbd_reasm *r, uint64_t source, const bbd_dgram *frag, uint64_t now_ms,
                  bbd_reasm_result *res, uint8_t **msg, size_t *len, bb_error *err);

/* Drop messages whose first fragment is older than the timeout; returns how
 * many were dropped. */
size_t bbd_reasm_expire(bbd_reasm *r, uint64_t now_ms);
/* Drop every partial message of source (its session ended). */
size_t bbd_reasm_drop_source(bbd_reasm *r, uint64_t source);

size_t bbd_reasm_bytes(const bbd_reasm *r);    /* charged now */
size_t bbd_reasm_pending(const bbd_reasm *r);  /* partial messages now */

#endif
