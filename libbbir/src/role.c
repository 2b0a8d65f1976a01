/*
 * role.c — the eight component roles (ROLES.md): names, parsing, the opset
 * domain each role's placeholder ops record under, and the op lookup over a
 * component type's declared opsets (resolved once, at install), and which
 * role ops fold a batch of responses one response at a time.
 */
#include "bb/meta.h"
#include "bb/plugin.h"

#include <string.h>
#include <strings.h>

typedef struct role_row {
    bb_role role;
    const char *name;   /* as the binding metadata writes it */
    const char *alias;  /* the spec's other spelling (domain / placeholder name) */
    const char *domain; /* placeholder opset domain; NULL for Protocol */
} role_row;

static const role_row ROLES[] = {
    {BB_ROLE_BACKEND, "Backend", NULL, "ai.onnx"},
    {BB_ROLE_MODEL, "Model", NULL, "ai.bytesandbrains.role.model"},
    {BB_ROLE_INDEX, "Index", NULL, "ai.bytesandbrains.role.index"},
    {BB_ROLE_AGGREGATOR, "Aggregator", NULL, "ai.bytesandbrains.role.aggregator"},
    {BB_ROLE_CODEC, "Codec", "Compressor", "ai.bytesandbrains.role.compressor"},
    {BB_ROLE_DATA_SOURCE, "DataSource", "DataLoader", "ai.bytesandbrains.role.data_loader"},
    {BB_ROLE_PEER_SELECTOR, "PeerSelector", NULL, "ai.bytesandbrains.role.peer_selector"},
    {BB_ROLE_PROTOCOL, "Protocol", NULL, NULL},
};
#define N_ROLES (sizeof ROLES / sizeof ROLES[0])

static const role_row *role_row_of(bb_role role)
{
    for (size_t i = 0; i < N_ROLES; i++)
        if (ROLES[i].role == role)
            return &ROLES[i];
    return NULL;
}

const char *bb_role_name(bb_role role)
{
    const role_row *r = role_row_of(role);
    return r ? r->name : "?";
}

const char *bb_role_domain(bb_role role)
{
    const role_row *r = role_row_of(role);
    return r ? r->domain : NULL;
}

/* Case-insensitive compare of s[0..n) with name, ignoring '_' in s so that
 * "data_source" and "peer_selector" (the domain spellings) parse too. */
static bool name_matches(const char *s, size_t n, const char *name)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '_')
            continue;
        if (!name[j] || (s[i] | 0x20) != (name[j] | 0x20))
            return false;
        j++;
    }
    return name[j] == '\0' && j > 0;
}

bool bb_role_op_folds_responses(const char *domain, const char *op_type)
{
    static const struct {
        const char *domain, *op_type;
    } FOLDS[] = {{BB_DOMAIN_ROLE_AGGREGATOR, "Contribute"}};
    for (size_t i = 0; domain && op_type && i < sizeof FOLDS / sizeof FOLDS[0]; i++)
        if (strcmp(FOLDS[i].domain, domain) == 0 && strcmp(FOLDS[i].op_type, op_type) == 0)
            return true;
    return false;
}

bb_role bb_role_parse(const char *name)
{
    if (!name)
        return BB_ROLE_NONE;
    size_t n = strlen(name);
    /* The compiler's spelling carries the runtime-trait suffix. */
    static const char suffix[] = "Runtime";
    size_t sl = sizeof suffix - 1;
    if (n > sl && strcasecmp(name + n - sl, suffix) == 0)
        n -= sl;
    for (size_t i = 0; i < N_ROLES; i++) {
        if (name_matches(name, n, ROLES[i].name) ||
            (ROLES[i].alias && name_matches(name, n, ROLES[i].alias)))
            return ROLES[i].role;
    }
    return BB_ROLE_NONE;
}

const bb_op_decl *bb_component_type_find_op(const bb_component_type *t, const char *domain,
                                            const char *op_type, uint32_t *op_index)
{
    if (!t || !op_type || !t->opsets)
        return NULL;
    bool onnx = !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
    for (uint32_t s = 0; s < t->n_opsets; s++) {
        const bb_opset_decl *os = &t->opsets[s];
        const char *d = os->domain;
        bool d_onnx = !d || !*d || strcmp(d, "ai.onnx") == 0;
        if (onnx ? !d_onnx : (d_onnx || strcmp(d, domain) != 0))
            continue;
        for (uint32_t i = 0; i < os->n_ops; i++) {
            if (os->ops && os->ops[i].op_type && strcmp(os->ops[i].op_type, op_type) == 0) {
                if (op_index)
                    *op_index = i;
                return &os->ops[i];
            }
        }
    }
    return NULL;
}
