/*
 * main.c — bbd's entry point: the daemon (`bbd [options] ARTIFACT`, see
 * bbd(8)) and its subcommands `bbd keygen` (keys.c) and `bbd run` (run.c).
 * The daemon's command line is read here: every option overrides the
 * config file's value (bbd.json(5)), then daemon.c runs the node.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbd/host/config.h"
#include "bbd/host/daemon.h"
#include "bbd/host/keys.h"
#include "bbd/host/log.h"
#include "bbd/host/run.h"

#define BBD_VERSION "0.9.0"

static const char USAGE[] =
    "usage: bbd [options] ARTIFACT\n"
    "       bbd keygen [--state-dir DIR | --key FILE]\n"
    "       bbd run MODEL.onnx [options] NAME=FILE.pb ... [-o DIR]\n"
    "       bbd run --test-dir DIR [options]\n"
    "\n"
    "Run a node: load the compiled ARTIFACT, install its targets and serve them\n"
    "until SIGTERM. Options override the config file (see bbd(8), bbd.json(5)):\n"
    "  -c, --config FILE            JSON node config\n"
    "  -t, --targets A,B            targets (partitions) this node runs\n"
    "  -l, --listen MULTIADDR       listen address, /ip4/.../tcp/P or .../udp/P (repeatable)\n"
    "  -p, --peer PEERID=MULTIADDR  a known peer (repeatable); also MULTIADDR/p2p/PEERID\n"
    "  -s, --state-dir DIR          key, snapshot and control socket live here\n"
    "      --control PATH           control socket (default STATE_DIR/control.sock)\n"
    "      --plugin-path DIR        search DIR for plugins first (repeatable)\n"
    "      --log-level LEVEL        error, warn, info (default) or debug\n"
    "      --log-file FILE          log to FILE instead of stderr (reopened on SIGHUP)\n"
    "      --metrics MULTIADDR      serve metrics over HTTP, /ip4/.../tcp/P\n"
    "      --key FILE               node key file (default STATE_DIR/node.key)\n"
    "      --seed N                 seed of every random choice (default: from the PeerId)\n"
    "      --fresh                  ignore a snapshot in the state directory\n"
    "      --security MODE          noise (default: authenticated, encrypted) or off\n"
    "                               (plaintext, debugging only)\n"
    "      --allow PEERID           admit only listed peers (repeatable)\n"
    "      --deny PEERID            never admit this peer (repeatable)\n"
    "      --dial-allow CIDR        dial only addresses in these ranges (repeatable)\n"
    "      --dial-deny CIDR         never dial addresses in this range (repeatable)\n"
    "      --require-signed-by PEERID  refuse an artifact not signed by one of these\n"
    "                               keys (repeatable)\n"
    "  -h, --help                   print this help\n"
    "  -V, --version                print the version\n";

enum {
    OPT_CONTROL = 256,
    OPT_PLUGIN_PATH,
    OPT_LOG_LEVEL,
    OPT_LOG_FILE,
    OPT_METRICS,
    OPT_KEY,
    OPT_SEED,
    OPT_FRESH,
    OPT_SECURITY,
    OPT_ALLOW,
    OPT_DENY,
    OPT_DIAL_ALLOW,
    OPT_DIAL_DENY,
    OPT_REQUIRE_SIGNED_BY,
};

static const struct option OPTIONS[] = {
    {"config", required_argument, NULL, 'c'},
    {"targets", required_argument, NULL, 't'},
    {"listen", required_argument, NULL, 'l'},
    {"peer", required_argument, NULL, 'p'},
    {"state-dir", required_argument, NULL, 's'},
    {"control", required_argument, NULL, OPT_CONTROL},
    {"plugin-path", required_argument, NULL, OPT_PLUGIN_PATH},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"log-file", required_argument, NULL, OPT_LOG_FILE},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"key", required_argument, NULL, OPT_KEY},
    {"seed", required_argument, NULL, OPT_SEED},
    {"fresh", no_argument, NULL, OPT_FRESH},
    {"security", required_argument, NULL, OPT_SECURITY},
    {"allow", required_argument, NULL, OPT_ALLOW},
    {"deny", required_argument, NULL, OPT_DENY},
    {"dial-allow", required_argument, NULL, OPT_DIAL_ALLOW},
    {"dial-deny", required_argument, NULL, OPT_DIAL_DENY},
    {"require-signed-by", required_argument, NULL, OPT_REQUIRE_SIGNED_BY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The options as given, applied over the config file afterwards. */
typedef struct cli {
    const char *config, *artifact;
    int *opt;         /* option codes in order */
    const char **arg; /* their arguments */
    size_t n;
} cli;

static int usage_error(const char *fmt, const char *what)
{
    fprintf(stderr, "bbd: error: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n%s", USAGE);
    return BBD_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, cli *c)
{
    c->opt = calloc((size_t)argc, sizeof *c->opt);
    c->arg = calloc((size_t)argc, sizeof *c->arg);
    if (!c->opt || !c->arg) {
        fprintf(stderr, "bbd: error: out of memory\n");
        return BBD_EXIT_FAIL;
    }
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":c:t:l:p:s:hV", OPTIONS, NULL)) != -1) {
        switch (o) {
        case 'h': fputs(USAGE, stdout); return 0;
        case 'V': printf("bbd (BytesAndBrains) %s\n", BBD_VERSION); return 0;
        case 'c': c->config = optarg; break;
        case ':': return usage_error("option '%s' needs an argument", argv[optind - 1]);
        case '?': return usage_error("unknown option '%s'", argv[optind - 1]);
        default:
            c->opt[c->n] = o;
            c->arg[c->n++] = optarg;
            break;
        }
    }
    if (optind < argc)
        c->artifact = argv[optind++];
    if (optind < argc)
        return usage_error("unexpected argument '%s' (one ARTIFACT only)", argv[optind]);
    return -1; /* go on */
}

/* Replace a list option's values on its first use on the command line. */
static int list_opt(bbd_strlist *l, bool *cleared, const char *v, const char *what,
                    bb_error *err)
{
    if (!*cleared) {
        bbd_strlist_clear(l);
        *cleared = true;
    }
    return bbd_config_strlist_add(l, v, what, err);
}

/* The security options: lists replace the config file's on first use. */
static int apply_security(bbd_config *cfg, int opt, const char *v, unsigned *seen, bb_error *err)
{
    unsigned bit = 1u << (opt - OPT_SECURITY);
    bool first = !(*seen & bit);
    *seen |= bit;
    switch (opt) {
    case OPT_SECURITY: return bbd_config_set_security(cfg, v, err);
    case OPT_ALLOW:
    case OPT_DENY:
    case OPT_REQUIRE_SIGNED_BY: {
        bbd_peerlist *l = opt == OPT_ALLOW ? &cfg->allow : opt == OPT_DENY ? &cfg->deny
                                                                          : &cfg->require_signed_by;
        if (first)
            l->n = 0;
        return bbd_config_peerlist_add(l, v, opt == OPT_ALLOW ? "--allow" : opt == OPT_DENY
                                                   ? "--deny" : "--require-signed-by", err);
    }
    default: {
        bbd_cidrlist *l = opt == OPT_DIAL_ALLOW ? &cfg->dial_allow : &cfg->dial_deny;
        if (first)
            l->n = 0;
        return bbd_config_cidrlist_add(l, v, opt == OPT_DIAL_ALLOW ? "--dial-allow"
                                                                   : "--dial-deny", err);
    }
    }
}

static int apply(bbd_config *cfg, const cli *c, bb_error *err)
{
    bool listen_set = false, plugin_set = false, peers_set = false;
    unsigned security_seen = 0;
    int rc = BB_OK;
    for (size_t i = 0; i < c->n && rc == BB_OK; i++) {
        const char *v = c->arg[i];
        if (c->opt[i] >= OPT_SECURITY) {
            rc = apply_security(cfg, c->opt[i], v, &security_seen, err);
            continue;
        }
        switch (c->opt[i]) {
        case 't': rc = bbd_config_set_targets(cfg, v, err); break;
        case 'l': rc = list_opt(&cfg->listen, &listen_set, v, "listen addresses", err); break;
        case 'p':
            if (!peers_set)
                bbd_config_clear_peers(cfg);
            peers_set = true;
            rc = bbd_config_add_peer_arg(cfg, v, err);
            break;
        case 's': rc = bbd_config_set_str(&cfg->state_dir, v, err); break;
        case OPT_CONTROL: rc = bbd_config_set_str(&cfg->control, v, err); break;
        case OPT_PLUGIN_PATH:
            rc = list_opt(&cfg->plugin_path, &plugin_set, v, "plugin directories", err);
            break;
        case OPT_LOG_LEVEL: rc = bbd_log_level_parse(v, &cfg->log_level, err); break;
        case OPT_LOG_FILE: rc = bbd_config_set_str(&cfg->log_file, v, err); break;
        case OPT_METRICS: rc = bbd_config_set_str(&cfg->metrics, v, err); break;
        case OPT_KEY: rc = bbd_config_set_str(&cfg->key_file, v, err); break;
        case OPT_SEED: {
            char *end;
            cfg->seed = strtoull(v, &end, 10);
            if (!*v || *end || *v == '-')
                rc = bb_error_set(err, BB_EINVAL, "--seed '%s' is not an unsigned integer", v);
            cfg->has_seed = true;
            break;
        }
        case OPT_FRESH: cfg->fresh = true; break;
        default: break;
        }
    }
    if (rc == BB_OK && c->artifact)
        rc = bbd_config_set_str(&cfg->artifact, c->artifact, err);
    return rc;
}

static int daemon_main(int argc, char **argv)
{
    cli c = {0};
    int rc = parse_args(argc, argv, &c);
    bbd_config cfg;
    bbd_config_init(&cfg);
    bb_error err = {0};
    if (rc < 0) {
        rc = BBD_EXIT_FAIL;
        if (c.config && bbd_config_load_file(&cfg, c.config, &err))
            fprintf(stderr, "bbd: error: %s\n", err.msg);
        else if (apply(&cfg, &c, &err))
            fprintf(stderr, "bbd: error: %s\n", err.msg);
        else if (!cfg.artifact)
            rc = usage_error("%s", "no ARTIFACT given (on the command line or as \"artifact\" "
                                   "in the config)");
        else if (bbd_config_finish(&cfg, &err))
            fprintf(stderr, "bbd: error: %s\n", err.msg);
        else
            rc = bbd_daemon_main(&cfg);
    }
    bbd_config_free(&cfg);
    free(c.opt);
    free(c.arg);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "run") == 0)
        return bbd_run_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
        return bbd_keygen_main(argc - 1, argv + 1);
    return daemon_main(argc, argv);
}
