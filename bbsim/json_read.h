/*
 * json_read.h — checked readers over a cJSON object for the scenario loader:
 * an object's keys against the list it may have, and typed members with
 * their ranges. Every message starts with the member's path
 * ("groups[1].count: ...").
 *
 * A member that is absent or JSON null keeps the caller's default unless it
 * is required.
 */
#ifndef BBSIM_JSON_READ_H
#define BBSIM_JSON_READ_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "bb/status.h"
#include "bbsim/scenario.h"

/* j is an object whose keys are all in keys[] (NULL-terminated); an
 * unknown key is refused by name, with the keys it may have. */
int bbsim_json_object(const cJSON *j, const char *path, const char *const *keys, bb_error *err);
/* The member, or NULL when absent or null. */
const cJSON *bbsim_json_get(const cJSON *obj, const char *key);

int bbsim_json_uint(const cJSON *obj, const char *key, const char *path, bool required,
                    uint64_t lo, uint64_t hi, uint64_t *out, bb_error *err);
int bbsim_json_double(const cJSON *obj, const char *key, const char *path, bool required,
                      double lo, double hi, double *out, bb_error *err);
int bbsim_json_bool(const cJSON *obj, const char *key, const char *path, bool *out,
                    bb_error *err);
/* A string of 1..max_len bytes; *out borrows the JSON. */
int bbsim_json_string(const cJSON *obj, const char *key, const char *path, bool required,
                      size_t max_len, const char **out, bb_error *err);
/* A duration string ("250ms"; bbsim_parse_duration). */
int bbsim_json_duration(const cJSON *obj, const char *key, const char *path, bool required,
                        bbsim_ns *out, bb_error *err);

#endif
