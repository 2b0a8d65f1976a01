/*
 * config.h — bbd's node configuration: the JSON config file (bbd.json(5)),
 * the command line (bbd(8)) on top of it, and the derived defaults.
 *
 * Order: defaults, then the file named by --config, then every option given
 * on the command line (an option replaces the file's value; list options
 * replace the file's whole list), then bbd_config_finish derives what was
 * left unset (state dir, control socket, key file, seed) and checks every
 * value: multiaddrs and PeerIds parse, targets are present, paths fit.
 *
 * The file is untrusted input: it is size-capped, an unknown key or a value
 * of the wrong type is an error naming the file and the key (BB_ECONFIG),
 * and nothing in it can make bbd allocate without bound.
 * Relative paths in the file are taken relative to the file's directory.
 */
#ifndef BBD_HOST_CONFIG_H
#define BBD_HOST_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/peerid.h"
#include "bb/plugin.h"
#include "bb/status.h"
#include "bb/engine.h"
#include "bbd/host/transport.h"

#define BBD_CONFIG_MAX_BYTES ((size_t)16 << 20)
#define BBD_CONFIG_MAX_LIST 256 /* targets, listen addresses, peers, plugin dirs */

/* One known peer address (--peer PEERID=MULTIADDR). */
typedef struct bbd_peer_cfg {
    bb_peerid id;
    char *addr_text;
    uint8_t *addr; /* binary multiaddr */
    size_t addr_len;
} bbd_peer_cfg;

typedef struct bbd_strlist {
    char **v;
    size_t n;
} bbd_strlist;

/* A list of PeerIds (allow, deny, require_signed_by). */
typedef struct bbd_peerlist {
    bb_peerid *v;
    size_t n;
} bbd_peerlist;

/* A list of address ranges (dial_allow, dial_deny). */
typedef struct bbd_cidrlist {
    bbd_cidr *v;
    size_t n;
} bbd_cidrlist;

typedef struct bbd_config {
    char *artifact;
    bbd_strlist targets;
    bbd_strlist listen;          /* multiaddr texts */
    bbd_peer_cfg *peers;
    size_t n_peers;
    char *state_dir;
    char *control;               /* Unix socket path */
    bbd_strlist plugin_path;
    bb_log_level log_level;
    char *log_file;              /* NULL: stderr */
    char *metrics;               /* multiaddr text, NULL: off */
    char *key_file;
    bool fresh;                  /* ignore a snapshot in the state dir */
    bool bootstrap_all;          /* run_bootstrap(ALL) on a fresh start */
    bool snapshot_on_exit;
    bool has_seed;
    uint64_t seed;
    size_t cycle_op_budget;
    size_t control_max_line_bytes;
    size_t control_max_clients;
    size_t control_client_output_bytes;  /* queued for one control client */
    size_t control_output_budget_bytes;  /* queued for all of them */
    uint64_t control_idle_timeout_ms;    /* 0: idle clients stay */
    size_t max_snapshot_bytes;
    size_t max_peers_per_source; /* learned peers per IP in the address book */
    bb_engine_caps caps;
    bbd_transport_config transport; /* .security: "security" / --security */
    char *components_json;       /* {"<slot>": config, ...} compact, or NULL */
    bbd_peerlist allow, deny;    /* access control (PeerIds) */
    bbd_peerlist require_signed_by; /* an artifact must be signed by one of these */
    bbd_cidrlist dial_allow, dial_deny; /* what the node may dial */
} bbd_config;

/* Defaults (caps: ENGINE.md Part 16; transport: transport.h). */
void bbd_config_init(bbd_config *c);
void bbd_config_free(bbd_config *c);

/* Read a JSON config file over c. BB_ECONFIG / BB_EIO / BB_ELIMIT with a
 * message naming path (and the key). */
int bbd_config_load_file(bbd_config *c, const char *path, bb_error *err);
/* The same from memory; name is used in messages, base_dir resolves
 * relative paths (NULL: keep them as given). */
int bbd_config_load_mem(bbd_config *c, const char *json, size_t len, const char *name,
                        const char *base_dir, bb_error *err);

/* Setters shared by the command line and the file (they validate). */
int bbd_config_set_targets(bbd_config *c, const char *comma_list, bb_error *err);
int bbd_config_add_peer(bbd_config *c, const char *peer_text, const char *addr_text,
                        bb_error *err);
void bbd_config_clear_peers(bbd_config *c);
/* "PEERID=MULTIADDR", or a MULTIADDR ending in /p2p/PEERID. An address
 * naming a /p2p/ PeerId other than its peer's is refused. */
int bbd_config_add_peer_arg(bbd_config *c, const char *arg, bb_error *err);
/* Append a PeerId (text) to a list; what names the list in messages. */
int bbd_config_peerlist_add(bbd_peerlist *l, const char *text, const char *what,
                            bb_error *err);
/* Append an address range ("10.0.0.0/8") to a list. */
int bbd_config_cidrlist_add(bbd_cidrlist *l, const char *text, const char *what,
                            bb_error *err);
/* "noise" (also "on") or "off". */
int bbd_config_set_security(bbd_config *c, const char *mode, bb_error *err);
int bbd_config_strlist_add(bbd_strlist *l, const char *s, const char *what, bb_error *err);
void bbd_strlist_clear(bbd_strlist *l);
/* Replace *dst with a copy of s (NULL clears). */
int bbd_config_set_str(char **dst, const char *s, bb_error *err);

/* Derive unset values and check the whole configuration. */
int bbd_config_finish(bbd_config *c, bb_error *err);

#endif
