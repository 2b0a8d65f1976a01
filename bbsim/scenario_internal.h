/*
 * scenario_internal.h — what the scenario loader's files share: group
 * lookup by name, node selectors, and the network and churn sections
 * (scenario_net.c).
 */
#ifndef BBSIM_SCENARIO_INTERNAL_H
#define BBSIM_SCENARIO_INTERNAL_H

#include <cjson/cJSON.h>

#include "bbsim/scenario.h"

/* The group called name; err names path and every group otherwise. */
int bbsim__group_index(const bbsim_scenario *sc, const char *name, const char *path,
                       uint32_t *out, bb_error *err);
/* A selector or a list of them: "clients", "clients[3]", "clients[0:500]". */
int bbsim__read_sels(const bbsim_scenario *sc, const cJSON *j, const char *path,
                     bbsim_sels *out, bb_error *err);
int bbsim__read_network(bbsim_scenario *sc, const cJSON *root, bb_error *err);
int bbsim__read_churn(bbsim_scenario *sc, const cJSON *root, bb_error *err);

#endif
