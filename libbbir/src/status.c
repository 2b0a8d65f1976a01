/* status.c — names and texts for the status table, and error formatting. */
#include "bb/status.h"

#include <stdio.h>
#include <string.h>

const char *bb_status_name(int code)
{
    switch (code) {
#define BB__STATUS_NAME(name, num, msg) case num: return #name;
    BB_STATUS_MAP(BB__STATUS_NAME)
#undef BB__STATUS_NAME
    }
    return "UNKNOWN";
}

const char *bb_status_str(int code)
{
    switch (code) {
#define BB__STATUS_STR(name, num, msg) case num: return msg;
    BB_STATUS_MAP(BB__STATUS_STR)
#undef BB__STATUS_STR
    }
    return "unknown status";
}

int bb_error_setv(bb_error *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int bb_error_set(bb_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bb_error_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int bb_error_prefix(bb_error *err, const char *fmt, ...)
{
    if (!err)
        return BB_OK;
    char prefix[BB_ERROR_MSG_MAX], old[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* truncation is fine: the message stays NUL-terminated */
    size_t plen = strnlen(prefix, sizeof err->msg - 3);
    memcpy(err->msg, prefix, plen);
    memcpy(err->msg + plen, ": ", 2);
    size_t room = sizeof err->msg - plen - 3;
    size_t olen = strnlen(old, room);
    memcpy(err->msg + plen + 2, old, olen);
    err->msg[plen + 2 + olen] = '\0';
    return err->code;
}

void bb_error_clear(bb_error *err)
{
    if (err) {
        err->code = BB_OK;
        err->msg[0] = '\0';
    }
}
