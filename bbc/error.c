/*
 * error.c — the compiler's error variants (BBC_ERROR_MAP) as names, docs
 * and the one printed form "bbc: error: <pass>: <Variant>: <message>".
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bbc/compiler_internal.h"

static const char *const NAMES[] = {
    "None",
#define BBC__ERR_NAME(id, name, doc) #name,
    BBC_ERROR_MAP(BBC__ERR_NAME)
#undef BBC__ERR_NAME
};

static const char *const DOCS[] = {
    "no error",
#define BBC__ERR_DOC(id, name, doc) doc,
    BBC_ERROR_MAP(BBC__ERR_DOC)
#undef BBC__ERR_DOC
};

const char *bbc_errkind_name(bbc_errkind k)
{
    return ((unsigned)k < BBC_E__COUNT) ? NAMES[k] : "?";
}

const char *bbc_errkind_doc(bbc_errkind k)
{
    return ((unsigned)k < BBC_E__COUNT) ? DOCS[k] : "?";
}

bbc_errkind bbc_errkind_parse(const char *name)
{
    if (!name)
        return BBC_E_NONE;
    for (unsigned k = 1; k < BBC_E__COUNT; k++)
        if (strcmp(NAMES[k], name) == 0)
            return (bbc_errkind)k;
    return BBC_E_NONE;
}

static bool is_validation(bbc_errkind k)
{
    return k >= BBC_E_UNKNOWN_OP && k <= BBC_E_OPSET_NOT_IMPORTED;
}

static int errv(bbc_error *e, bbc_errkind kind, const char *pass, const char *fmt, va_list ap)
{
    int rc = is_validation(kind) ? BB_EVALIDATE : BB_ECOMPILE;
    if (!e)
        return rc;
    e->kind = kind;
    snprintf(e->pass, sizeof e->pass, "%s", pass ? pass : "bbc");
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return rc;
}

int bbc_error_set(bbc_error *e, bbc_errkind kind, const char *pass, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = errv(e, kind, pass, fmt, ap);
    va_end(ap);
    return rc;
}

void bbc_error_clear(bbc_error *e)
{
    if (e)
        memset(e, 0, sizeof *e);
}

void bbc_error_print(const bbc_error *e, FILE *out)
{
    fprintf(out, "bbc: error: %s: %s: %s\n", e->pass[0] ? e->pass : "bbc",
            bbc_errkind_name(e->kind), e->msg);
}

int bbc_fail(bbc_state *st, bbc_errkind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = errv(st->err, kind, st->pass, fmt, ap);
    va_end(ap);
    return rc;
}

int bbc_oom(bbc_state *st)
{
    return bbc_fail(st, BBC_E_INTERNAL, "out of memory");
}
