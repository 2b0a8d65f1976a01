/*
 * keys.h — the node's identity: its Ed25519 key file (libp2p PrivateKey
 * protobuf, mode 0600, bb/peerid.h) and `bbd keygen`.
 */
#ifndef BBD_HOST_KEYS_H
#define BBD_HOST_KEYS_H

#include <stdbool.h>

#include "bb/peerid.h"
#include "bb/status.h"

/* Load the key at path, or create it (and its directory) when missing.
 * *created tells which happened (may be NULL). */
int bbd_node_key(const char *path, bb_keypair *kp, bb_peerid *id, bool *created,
                 bb_error *err);

/* `bbd keygen [--state-dir DIR | --key FILE]`: writes a new key and prints
 * its PeerId on stdout. Returns the exit code (0, 1 bad input, 2 usage). */
int bbd_keygen_main(int argc, char **argv);

#endif
