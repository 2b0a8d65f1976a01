/*
 * keys.c — node key files and `bbd keygen` (see keys.h).
 */
#include "bbd/host/keys.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "bbd/host/config.h"
#include "bbd/host/state_dir.h"

static int parent_dir(const char *path, bb_error *err)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return BB_OK;
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir)
        return bb_error_set(err, BB_EINVAL, "key file path %s is too long", path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    return bbd_mkdirs(dir, err);
}

int bbd_node_key(const char *path, bb_keypair *kp, bb_peerid *id, bool *created, bb_error *err)
{
    int rc = parent_dir(path, err);
    if (rc)
        return rc;
    if ((rc = bb_keyfile_load_or_create(path, kp, created, err)))
        return rc;
    bb_peerid_from_pubkey(kp->pk, id);
    return BB_OK;
}

static const char KEYGEN_USAGE[] =
    "usage: bbd keygen [--state-dir DIR | --key FILE]\n"
    "\n"
    "Write a new node key (Ed25519, libp2p PrivateKey format, mode 0600) and\n"
    "print its PeerId. The key goes to FILE, or to DIR/node.key (default: the\n"
    "state directory bbd would use, see bbd(8)). An existing key file is never\n"
    "replaced.\n";

int bbd_keygen_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"state-dir", required_argument, NULL, 's'},
        {"key", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *state_dir = NULL, *key = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 's': state_dir = optarg; break;
        case 'k': key = optarg; break;
        case 'h': fputs(KEYGEN_USAGE, stdout); return 0;
        default:
            fprintf(stderr, "bbd: error: keygen: unknown or incomplete option '%s'\n%s",
                    argv[optind - 1], KEYGEN_USAGE);
            return 2;
        }
    }
    if (optind != argc || (state_dir && key)) {
        fprintf(stderr, "bbd: error: keygen: %s\n%s",
                optind != argc ? "unexpected argument" : "give --state-dir or --key, not both",
                KEYGEN_USAGE);
        return 2;
    }
    /* The daemon's own defaults decide where the key goes. */
    bbd_config cfg;
    bb_error err = {0};
    bbd_config_init(&cfg);
    int rc = bbd_config_set_str(&cfg.state_dir, state_dir, &err);
    if (!rc && key)
        rc = bbd_config_set_str(&cfg.key_file, key, &err);
    if (!rc)
        rc = bbd_config_finish(&cfg, &err);
    if (rc) {
        bbd_config_free(&cfg);
        fprintf(stderr, "bbd: error: keygen: %s\n", err.msg);
        return 1;
    }
    bb_keypair kp;
    bb_peerid id;
    char text[BB_PEERID_TEXT_MAX];
    rc = parent_dir(cfg.key_file, &err);
    if (!rc)
        rc = bb_keypair_generate(&kp, &err);
    if (!rc) {
        rc = bb_keyfile_save(cfg.key_file, &kp, &err);
        bb_peerid_from_pubkey(kp.pk, &id);
        bb_keypair_wipe(&kp);
    }
    if (!rc)
        rc = bb_peerid_to_text(&id, text, sizeof text, &err);
    bbd_config_free(&cfg);
    if (rc) {
        fprintf(stderr, "bbd: error: keygen: %s\n", err.msg);
        return 1;
    }
    printf("%s\n", text);
    return 0;
}
