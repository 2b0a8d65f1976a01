/*
 * opsets.c — lookups over the built-in opset catalogs (the data lives in
 * opsets_syscall.c, opsets_wire.c, opsets_role.c, opsets_onnx.c).
 *
 * Domains and each domain's ops are sorted by strcmp (test_opsets checks
 * it). An op lookup goes through a hash table of every (domain, op_type),
 * built once on first use: the compiler classifies every node several
 * times per pass (bb_op_flags), and two binary searches of strcmp over
 * domains sharing the long "ai.bytesandbrains." prefix cost ~370
 * instructions a lookup. Nothing here allocates.
 */
#include "opsets_internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* Sorted by domain (strcmp); test_opsets checks the order. */
static const bb_opset_schema *const OPSETS[] = {
    &bb__opset_address_book,      /* ai.bytesandbrains.address_book */
    &bb__opset_composite,         /* ai.bytesandbrains.composite */
    &bb__opset_role_aggregator,   /* ai.bytesandbrains.role.aggregator */
    &bb__opset_role_compressor,   /* ai.bytesandbrains.role.compressor */
    &bb__opset_role_data_loader,  /* ai.bytesandbrains.role.data_loader */
    &bb__opset_role_index,        /* ai.bytesandbrains.role.index */
    &bb__opset_role_model,        /* ai.bytesandbrains.role.model */
    &bb__opset_role_peer_selector, /* ai.bytesandbrains.role.peer_selector */
    &bb__opset_syscall,           /* ai.bytesandbrains.syscall */
    &bb__opset_wire,              /* ai.bytesandbrains.wire */
    &bb__opset_onnx,              /* ai.onnx */
};
#define N_OPSETS (sizeof OPSETS / sizeof OPSETS[0])

static const char *canon_domain(const char *domain)
{
    return (!domain || !*domain) ? BB_DOMAIN_ONNX : domain;
}

size_t bb_opset_count(void)
{
    return N_OPSETS;
}

const bb_opset_schema *bb_opset_at(size_t i)
{
    return i < N_OPSETS ? OPSETS[i] : NULL;
}

static long opset_index(const char *domain)
{
    domain = canon_domain(domain);
    size_t lo = 0, hi = N_OPSETS;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(domain, OPSETS[mid]->domain);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

const bb_opset_schema *bb_opset_find(const char *domain)
{
    long i = opset_index(domain);
    return i < 0 ? NULL : OPSETS[i];
}

static const bb_op_schema *opset_op(const bb_opset_schema *os, const char *op_type)
{
    size_t lo = 0, hi = os->n_ops;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(op_type, os->ops[mid].op_type);
        if (c == 0)
            return &os->ops[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---- the (domain, op_type) hash table --------------------------------------- */

#define OP_TABLE_CAP 2048u /* a power of two, over twice the catalog's op count */

typedef struct op_entry {
    const bb_op_schema *op;
    uint64_t hash;
    uint32_t domain_len, op_len;
} op_entry;

static op_entry g_op_table[OP_TABLE_CAP];
static bool g_op_table_ok; /* false: more ops than fit, lookups use the binary searches */
static bool g_onnx_flagless; /* no ai.onnx op has flags: bb_op_flags needs no lookup */
static pthread_once_t g_op_table_once = PTHREAD_ONCE_INIT;

/* The bytes s[at..n) as a word when there are at most eight, else the
 * eight from `at`; short tails read two overlapping pieces (no byte loop). */
static uint64_t word_at(const char *s, size_t n, size_t at)
{
    s += at;
    n -= at;
    uint64_t w = 0;
    if (n >= 8) {
        memcpy(&w, s, 8);
    } else if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, s, 4);
        memcpy(&hi, s + n - 4, 4);
        w = (uint64_t)hi << 32 | lo;
    } else if (n > 0) {
        w = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[n / 2] << 8 |
            (unsigned char)s[n - 1];
    }
    return w;
}

/* A fixed-cost hash: the lengths, the domain's last eight bytes (which tell
 * every catalog domain apart) and the op_type's first and last eight. A
 * collision only costs a probe: entries are compared in full. */
static uint64_t op_hash(const char *domain, size_t dn, const char *op_type, size_t on)
{
    uint64_t h = (dn << 32 | on) * 0x9e3779b97f4a7c15ull;
    h = (h ^ word_at(domain, dn, dn > 8 ? dn - 8 : 0)) * 0xff51afd7ed558ccdull;
    h = (h ^ (h >> 29) ^ word_at(op_type, on, 0)) * 0xc4ceb9fe1a85ec53ull;
    h = (h ^ (h >> 31) ^ word_at(op_type, on, on > 8 ? on - 8 : 0)) * 0x94d049bb133111ebull;
    return h ^ (h >> 32);
}

static void op_table_build(void)
{
    g_onnx_flagless = true;
    for (size_t i = 0; i < N_OPSETS; i++)
        for (uint32_t k = 0; k < OPSETS[i]->n_ops; k++)
            if (OPSETS[i]->ops[k].flags && bb_domain_is_onnx(OPSETS[i]->domain))
                g_onnx_flagless = false;
    if (bb_op_schema_total() * 2 > OP_TABLE_CAP)
        return;
    for (size_t i = 0; i < N_OPSETS; i++) {
        const bb_opset_schema *os = OPSETS[i];
        for (uint32_t k = 0; k < os->n_ops; k++) {
            const bb_op_schema *op = &os->ops[k];
            size_t dn = strlen(op->domain), on = strlen(op->op_type);
            uint64_t h = op_hash(op->domain, dn, op->op_type, on);
            size_t j = h & (OP_TABLE_CAP - 1);
            while (g_op_table[j].op)
                j = (j + 1) & (OP_TABLE_CAP - 1);
            g_op_table[j] = (op_entry){op, h, (uint32_t)dn, (uint32_t)on};
        }
    }
    g_op_table_ok = true;
}

const bb_op_schema *bb_op_schema_find(const char *domain, const char *op_type)
{
    if (!op_type)
        return NULL;
    pthread_once(&g_op_table_once, op_table_build);
    if (!g_op_table_ok) {
        const bb_opset_schema *os = bb_opset_find(domain);
        return os ? opset_op(os, op_type) : NULL;
    }
    domain = canon_domain(domain);
    size_t dn = strlen(domain), on = strlen(op_type);
    uint64_t h = op_hash(domain, dn, op_type, on);
    for (size_t j = h & (OP_TABLE_CAP - 1); g_op_table[j].op; j = (j + 1) & (OP_TABLE_CAP - 1)) {
        const op_entry *e = &g_op_table[j];
        if (e->hash == h && e->domain_len == dn && e->op_len == on &&
            memcmp(e->op->op_type, op_type, on) == 0 && memcmp(e->op->domain, domain, dn) == 0)
            return e->op;
    }
    return NULL;
}

size_t bb_op_schema_total(void)
{
    size_t n = 0;
    for (size_t i = 0; i < N_OPSETS; i++)
        n += OPSETS[i]->n_ops;
    return n;
}

size_t bb_op_schema_id(const bb_op_schema *op)
{
    assert(op);
    long oi = opset_index(op->domain);
    assert(oi >= 0);
    const bb_opset_schema *os = OPSETS[oi];
    assert(op >= os->ops && op < os->ops + os->n_ops);
    size_t base = 0;
    for (long i = 0; i < oi; i++)
        base += OPSETS[i]->n_ops;
    return base + (size_t)(op - os->ops);
}

const bb_op_schema *bb_op_schema_by_id(size_t id)
{
    for (size_t i = 0; i < N_OPSETS; i++) {
        if (id < OPSETS[i]->n_ops)
            return &OPSETS[i]->ops[id];
        id -= OPSETS[i]->n_ops;
    }
    return NULL;
}

/* ---- domains --------------------------------------------------------------- */

static bool has_prefix(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(s, prefix, n) == 0 && s[n] != '\0';
}

bool bb_opset_is_reserved(const char *domain)
{
    if (bb_domain_is_onnx(domain))
        return true;
    return strcmp(domain, BB_DOMAIN_BB) == 0 ||
           strncmp(domain, BB_DOMAIN_PREFIX, sizeof BB_DOMAIN_PREFIX - 1) == 0 ||
           strncmp(domain, BB_DOMAIN_ONNX ".", sizeof BB_DOMAIN_ONNX) == 0;
}

bool bb_domain_is_role(const char *domain)
{
    return domain && has_prefix(domain, BB_DOMAIN_ROLE_PREFIX);
}

bb_role bb_domain_role(const char *domain)
{
    if (bb_domain_is_onnx(domain))
        return BB_ROLE_BACKEND;
    if (!bb_domain_is_role(domain))
        return BB_ROLE_NONE;
    const bb_opset_schema *os = bb_opset_find(domain);
    if (os)
        return os->role;
    if (strcmp(domain, BB_DOMAIN_ROLE_CODEC_ALIAS) == 0)
        return BB_ROLE_CODEC;
    if (strcmp(domain, BB_DOMAIN_ROLE_DATA_SOURCE_ALIAS) == 0)
        return BB_ROLE_DATA_SOURCE;
    return BB_ROLE_NONE;
}

/* ---- ports and attributes --------------------------------------------------- */

static const bb_port_decl *port_by_name(const bb_port_decl *ports, uint32_t n,
                                        const char *name, uint32_t *index)
{
    if (!name)
        return NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(ports[i].name, name) == 0) {
            if (index)
                *index = i;
            return &ports[i];
        }
    }
    return NULL;
}

const bb_port_decl *bb_op_input(const bb_op_schema *op, const char *name, uint32_t *index)
{
    return op ? port_by_name(op->inputs, op->n_inputs, name, index) : NULL;
}

const bb_port_decl *bb_op_output(const bb_op_schema *op, const char *name, uint32_t *index)
{
    return op ? port_by_name(op->outputs, op->n_outputs, name, index) : NULL;
}

const bb_attr_schema *bb_op_attr(const bb_op_schema *op, const char *name)
{
    if (!op || !name)
        return NULL;
    for (uint32_t i = 0; i < op->n_attrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return &op->attrs[i];
    return NULL;
}

static const bb_port_decl *port_at(const bb_port_decl *ports, uint32_t n, uint32_t pos)
{
    if (n == 0)
        return NULL;
    if (pos < n)
        return &ports[pos];
    return ports[n - 1].variadic ? &ports[n - 1] : NULL;
}

const bb_port_decl *bb_op_input_at(const bb_op_schema *op, uint32_t pos)
{
    return op ? port_at(op->inputs, op->n_inputs, pos) : NULL;
}

const bb_port_decl *bb_op_output_at(const bb_op_schema *op, uint32_t pos)
{
    return op ? port_at(op->outputs, op->n_outputs, pos) : NULL;
}

static void arity(const bb_port_decl *ports, uint32_t n, uint32_t *min, uint32_t *max)
{
    uint32_t lo = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!ports[i].optional)
            lo = i + 1;
    if (min)
        *min = lo;
    if (max)
        *max = (n > 0 && ports[n - 1].variadic) ? UINT32_MAX : n;
}

void bb_op_input_arity(const bb_op_schema *op, uint32_t *min, uint32_t *max)
{
    assert(op);
    arity(op->inputs, op->n_inputs, min, max);
}

void bb_op_output_arity(const bb_op_schema *op, uint32_t *min, uint32_t *max)
{
    assert(op);
    arity(op->outputs, op->n_outputs, min, max);
}

/* ---- classification ------------------------------------------------------------ */

uint32_t bb_op_flags(const char *domain, const char *op_type)
{
    pthread_once(&g_op_table_once, op_table_build);
    if (g_onnx_flagless && bb_domain_is_onnx(domain))
        return 0;
    const bb_op_schema *op = bb_op_schema_find(domain, op_type);
    return op ? op->flags : 0;
}

bool bb_op_is_wire(const char *domain, const char *op_type)
{
    return (bb_op_flags(domain, op_type) & (BB_OPF_WIRE_SEND | BB_OPF_WIRE_RECV)) != 0;
}

bool bb_op_is_wire_send(const char *domain, const char *op_type)
{
    return (bb_op_flags(domain, op_type) & BB_OPF_WIRE_SEND) != 0;
}

bool bb_op_is_wire_recv(const char *domain, const char *op_type)
{
    return (bb_op_flags(domain, op_type) & BB_OPF_WIRE_RECV) != 0;
}

bool bb_op_is_gate(const char *domain, const char *op_type)
{
    return (bb_op_flags(domain, op_type) & (BB_OPF_GATE_RX | BB_OPF_GATE_TX)) != 0;
}

/* ---- node check ------------------------------------------------------------------ */

static const char *attr_type_name(int t)
{
    static const char *const NAMES[] = {
        "UNDEFINED", "FLOAT",   "INT",    "STRING",        "TENSOR",
        "GRAPH",     "FLOATS",  "INTS",   "STRINGS",       "TENSORS",
        "GRAPHS",    "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS",
    };
    return (t >= 0 && (size_t)t < sizeof NAMES / sizeof NAMES[0]) ? NAMES[t] : "?";
}

static const char *node_label(const bb_node *n)
{
    return (n->name && *n->name) ? n->name : "(unnamed)";
}

static int check_values(const bb_op_schema *op, const bb_node *n, const bb_str_list *vals,
                        bool inputs, bb_error *err)
{
    const bb_port_decl *ports = inputs ? op->inputs : op->outputs;
    uint32_t np = inputs ? op->n_inputs : op->n_outputs;
    const char *what = inputs ? "input" : "output";
    uint32_t min, max;
    arity(ports, np, &min, &max);
    if (vals->n < min)
        return bb_error_set(err, BB_EVALIDATE,
                            "node '%s' (%s::%s): %zu %ss, at least %u required", node_label(n),
                            op->domain, op->op_type, vals->n, what, min);
    if (max != UINT32_MAX && vals->n > max)
        return bb_error_set(err, BB_EVALIDATE, "node '%s' (%s::%s): %zu %ss, at most %u",
                            node_label(n), op->domain, op->op_type, vals->n, what, max);
    for (size_t i = 0; i < vals->n; i++) {
        const bb_port_decl *p = port_at(ports, np, i > UINT32_MAX ? UINT32_MAX : (uint32_t)i);
        const char *v = vals->v[i];
        if (p && !p->optional && (!v || !*v))
            return bb_error_set(err, BB_EVALIDATE,
                                "node '%s' (%s::%s): required %s '%s' (#%zu) is empty",
                                node_label(n), op->domain, op->op_type, what, p->name, i);
    }
    return BB_OK;
}

int bb_op_schema_check_node(const bb_op_schema *op, const bb_node *n, bb_error *err)
{
    if (!op || !n)
        return bb_error_set(err, BB_EINVAL, "op schema check: NULL argument");
    int rc = check_values(op, n, &n->inputs, true, err);
    if (rc)
        return rc;
    rc = check_values(op, n, &n->outputs, false, err);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        const bb_attr_schema *as = &op->attrs[i];
        if (as->required && !bb_node_attr(n, as->name))
            return bb_error_set(err, BB_EVALIDATE,
                                "node '%s' (%s::%s): required attribute '%s' is missing",
                                node_label(n), op->domain, op->op_type, as->name);
    }
    for (size_t i = 0; i < n->attrs.n; i++) {
        const bb_attr *at = n->attrs.v[i];
        if (!at || !at->name)
            continue;
        const bb_attr_schema *as = bb_op_attr(op, at->name);
        if (as && as->type != BB_ATTR_UNDEFINED && at->type != as->type)
            return bb_error_set(err, BB_EVALIDATE,
                                "node '%s' (%s::%s): attribute '%s' is %s, want %s",
                                node_label(n), op->domain, op->op_type, at->name,
                                attr_type_name((int)at->type), attr_type_name((int)as->type));
    }
    return BB_OK;
}
