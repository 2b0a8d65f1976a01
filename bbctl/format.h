/*
 * format.h — bbctl's human-readable output of daemon replies and events
 * (the --json flag prints the replies as they came instead).
 */
#ifndef BBCTL_FORMAT_H
#define BBCTL_FORMAT_H

#include <stdio.h>

#include <cJSON.h>

/* A value object (bb/value_json.h form) on one line, at most max_elems data
 * elements per tensor. */
void bbctl_print_value(FILE *out, const cJSON *v, int max_elems);
void bbctl_print_status(FILE *out, const cJSON *reply);
void bbctl_print_peers(FILE *out, const cJSON *reply);
/* One streamed event: "<event> key=value ...". */
void bbctl_print_event(FILE *out, const cJSON *ev);

#endif
