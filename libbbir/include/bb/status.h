/*
 * status.h — the one status-code table of BytesAndBrains, and the error
 * struct that carries a message naming the culprit next to the code.
 *
 * 0 is success; codes are never renumbered (append only). Functions that can
 * fail return an int status and, when given a non-NULL bb_error, fill it with
 * the code and a message like "model.onnx: truncated at byte 812".
 */
#ifndef BB_STATUS_H
#define BB_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#define BB_STATUS_MAP(X)                                                     \
    X(OK, 0, "success")                                                      \
    X(ENOMEM, 1, "out of memory")                                            \
    X(EINVAL, 2, "invalid argument")                                         \
    X(EIO, 3, "input/output error")                                          \
    X(EPARSE, 4, "malformed input")                                          \
    X(ETRUNC, 5, "truncated input")                                          \
    X(ELIMIT, 6, "input exceeds a limit")                                    \
    X(ENOTFOUND, 7, "not found")                                             \
    X(EEXIST, 8, "already exists")                                           \
    X(ETYPE, 9, "type mismatch")                                             \
    X(EUNSUPPORTED, 10, "unsupported")                                       \
    X(EABI, 11, "incompatible plugin ABI")                                   \
    X(ESTATE, 12, "invalid state")                                           \
    X(EDECODE, 13, "decode failed")                                          \
    X(EBUDGET, 14, "budget exceeded")                                        \
    X(EFULL, 15, "capacity full")                                            \
    X(EVALIDATE, 16, "validation failed")                                    \
    X(ECOMPILE, 17, "compile failed")                                        \
    X(EINSTALL, 18, "install failed")                                        \
    X(ERUNTIME, 19, "runtime failure")                                       \
    X(ERECORD, 20, "recording error")                                        \
    X(ETIMEOUT, 21, "timed out")                                             \
    X(ECONFIG, 22, "bad configuration")

typedef enum bb_status {
#define BB__STATUS_ENUM(name, num, msg) BB_##name = num,
    BB_STATUS_MAP(BB__STATUS_ENUM)
#undef BB__STATUS_ENUM
} bb_status;

#define BB_ERROR_MSG_MAX 512

/* An error value: the code plus a message that names the offending thing. */
typedef struct bb_error {
    int code;
    char msg[BB_ERROR_MSG_MAX];
} bb_error;

/* "EPARSE" etc.; "UNKNOWN" for codes outside the table. */
const char *bb_status_name(int code);
/* Human text for a code ("malformed input"). */
const char *bb_status_str(int code);

/* Fill err (may be NULL) and return code. printf-style message. */
int bb_error_set(bb_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));
int bb_error_setv(bb_error *err, int code, const char *fmt, va_list ap) __attribute__((cold));
/* Prefix an existing message: "<prefix>: <old message>". Returns err->code. */
int bb_error_prefix(bb_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));
/* An empty error: the code and the message's first byte. For a local on a
 * message path, cheaper than `= {0}`, which zeroes all 516 bytes. */
void bb_error_clear(bb_error *err);

#endif
