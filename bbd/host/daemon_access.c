/*
 * daemon_access.c — which peers this node talks to (bbd(8) "ACCESS
 * CONTROL"): the config's allow and deny lists of PeerIds, applied to the
 * engine's peer-health governor (blocklist / allowlist), which then rules
 *   - the transport's handshake (bbd_daemon_admit, the transport's admit
 *     callback: a refused peer never gets a channel, and is told why),
 *   - the engine's RX and TX gates and every send (a refused peer is never
 *     sent to, also when a program picks it at run time),
 *   - this daemon's dials (daemon_dial.c: a refused peer is not dialed);
 * and their changes at run time (`bbctl peers allow|deny|clear|list`, the
 * control command "access"), which the engine keeps in its snapshot. At
 * start the config's lists are applied after the snapshot is restored: a
 * PeerId the config names gets the config's verdict, every other keeps
 * what the snapshot says.
 *
 * Which program the node runs, too: with require_signed_by, the artifact
 * must carry a valid signature by one of those keys (bb/model_sign.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/io.h"
#include "bb/model_io.h"
#include "bb/model_sign.h"
#include "bbd/host/daemon.h"

#define ACCESS_MAX_PEERS 1024 /* PeerIds in one control request */

const char *bbd_daemon_admit(void *ud, const bb_peerid *peer)
{
    bbd_daemon *d = ud;
    const char *why = d->engine ? bb_engine_peer_access(d->engine, peer) : NULL;
    if (!why)
        return NULL; /* a refusal is counted by the transport (peers_refused) */
    return strcmp(why, "blocklisted") == 0 ? "denied by the node's access control (deny)"
                                           : "not on the node's allow list";
}

/* Close the channels of every peer the policy refuses now. */
static void enforce(bbd_daemon *d)
{
    bbd_peer_stats st;
    if (!d->transport)
        return;
    for (size_t i = 0; bbd_transport_peer_stats_at(d->transport, i, &st); i++)
        if (st.connected && bb_engine_peer_access(d->engine, &st.peer))
            bbd_transport_disconnect(d->transport, &st.peer);
}

/* allow / deny / clear one peer (clear: on neither list). */
static int set_access(bbd_daemon *d, const bb_peerid *peer, const char *action, bb_error *err)
{
    bool allow = !strcmp(action, "allow"), deny = !strcmp(action, "deny");
    int rc = bb_engine_block_peer(d->engine, peer, deny);
    if (rc == BB_OK)
        rc = bb_engine_allow_peer(d->engine, peer, allow);
    if (rc)
        return bb_error_set(err, rc, "the address book is full (caps.address_book_max_peers)");
    return BB_OK;
}

int bbd_daemon_access_apply(bbd_daemon *d, bb_error *err)
{
    const bbd_config *c = d->cfg;
    int rc = BB_OK;
    for (size_t i = 0; rc == BB_OK && i < c->allow.n; i++)
        rc = set_access(d, &c->allow.v[i], "allow", err);
    for (size_t i = 0; rc == BB_OK && i < c->deny.n; i++)
        rc = set_access(d, &c->deny.v[i], "deny", err);
    if (rc)
        return bb_error_prefix(err, "access lists");
    bbd_logline l;
    if (c->transport.security == BBD_SECURITY_OFF &&
        bbd_log_begin(&l, &d->log, BB_LOG_WARN, "daemon",
                      "security is off: peers are not authenticated and traffic is plaintext "
                      "(for debugging only; see bbd(8) SECURITY)"))
        bbd_log_end(&l);
    if ((c->allow.n || c->deny.n) &&
        bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "access lists applied")) {
        bbd_log_u64(&l, "allow", c->allow.n);
        bbd_log_u64(&l, "deny", c->deny.n);
        bbd_log_end(&l);
    }
    return BB_OK;
}

/* ---- the control command ------------------------------------------------------------- */

typedef struct list_ctx {
    cJSON *allow, *deny;
} list_ctx;

static void list_entry(void *ud, const bb_engine_peer_info *p)
{
    list_ctx *lc = ud;
    char pb[BB_PEERID_TEXT_MAX];
    if (p->allowed)
        cJSON_AddItemToArray(lc->allow, cJSON_CreateString(bbd_daemon_peer_text(&p->peer, pb)));
    if (p->blocked)
        cJSON_AddItemToArray(lc->deny, cJSON_CreateString(bbd_daemon_peer_text(&p->peer, pb)));
}

/* {"ok": true, "allow": [...], "deny": [...], "allowlist_active": bool} */
static cJSON *access_list(bbd_daemon *d, cJSON *r)
{
    list_ctx lc = {cJSON_AddArrayToObject(r, "allow"), cJSON_AddArrayToObject(r, "deny")};
    if (!lc.allow || !lc.deny)
        return r;
    bb_engine_peer_foreach(d->engine, list_entry, &lc);
    cJSON_AddBoolToObject(r, "allowlist_active", cJSON_GetArraySize(lc.allow) > 0);
    bbd_transport_stats ts = {0};
    if (d->transport)
        bbd_transport_stats_get(d->transport, &ts);
    cJSON_AddNumberToObject(r, "refused", (double)ts.peers_refused);
    return r;
}

cJSON *bbd_daemon_cmd_access(bbd_daemon *d, const cJSON *req, char *why, size_t cap)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(req, "action");
    const cJSON *peers = cJSON_GetObjectItemCaseSensitive(req, "peers");
    const char *action = cJSON_IsString(a) ? a->valuestring : "";
    bool change = !strcmp(action, "allow") || !strcmp(action, "deny") || !strcmp(action, "clear");
    if (!change && strcmp(action, "list") != 0) {
        snprintf(why, cap, "access: \"action\" must be allow, deny, clear or list");
        return NULL;
    }
    size_t n = 0;
    if (change) {
        if (!cJSON_IsArray(peers) || cJSON_GetArraySize(peers) < 1 ||
            cJSON_GetArraySize(peers) > ACCESS_MAX_PEERS) {
            snprintf(why, cap, "access %s: \"peers\" must be an array of 1..%d PeerIds", action,
                     ACCESS_MAX_PEERS);
            return NULL;
        }
        /* every PeerId is checked before anything changes */
        const cJSON *p;
        cJSON_ArrayForEach(p, peers) {
            bb_error err = {0};
            bb_peerid id;
            if (!cJSON_IsString(p) || bb_peerid_from_text(p->valuestring, &id, &err) != BB_OK) {
                snprintf(why, cap, "access %s: '%.80s' is not a PeerId%s%s", action,
                         cJSON_IsString(p) ? p->valuestring : "?", err.msg[0] ? ": " : "", err.msg);
                return NULL;
            }
        }
        cJSON_ArrayForEach(p, peers) {
            bb_error err = {0};
            bb_peerid id;
            bb_peerid_from_text(p->valuestring, &id, NULL);
            if (set_access(d, &id, action, &err) != BB_OK) {
                snprintf(why, cap, "access %s: %s", action, err.msg);
                return NULL;
            }
            n++;
        }
        enforce(d);
        bbd_logline l;
        if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "access lists changed")) {
            bbd_log_str(&l, "action", action);
            bbd_log_u64(&l, "peers", n);
            bbd_log_end(&l);
        }
    }
    cJSON *r = cJSON_CreateObject();
    if (!r || !cJSON_AddTrueToObject(r, "ok")) {
        cJSON_Delete(r);
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    return access_list(d, r);
}

/* ---- signed artifacts ---------------------------------------------------------------------- */

int bbd_daemon_load_artifact(bbd_daemon *d, bb_error *err)
{
    const bbd_config *c = d->cfg;
    if (!c->require_signed_by.n)
        return bb_model_load_file(c->artifact, &d->model, err);
    uint8_t *bytes = NULL;
    size_t len = 0;
    bb_peerid signer;
    char who[BB_PEERID_TEXT_MAX];
    int rc = bb_read_file(c->artifact, BB_MODEL_MAX_BYTES, &bytes, &len, err);
    if (rc == BB_OK &&
        (rc = bb_model_verify(bytes, len, c->require_signed_by.v, c->require_signed_by.n, &signer,
                              err)) != BB_OK)
        bb_error_prefix(err, "%s refused (require_signed_by)", c->artifact);
    if (rc == BB_OK)
        rc = bb_model_load_mem(bytes, len, c->artifact, &d->model, err);
    free(bytes);
    bbd_logline l;
    if (rc == BB_OK && bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "artifact signature verified")) {
        bbd_log_str(&l, "artifact", c->artifact);
        bbd_log_str(&l, "signer", bbd_daemon_peer_text(&signer, who));
        bbd_log_end(&l);
    }
    return rc;
}
