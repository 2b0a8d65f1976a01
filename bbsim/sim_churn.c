/*
 * sim_churn.c — the scenario's churn (scenario.h): kills at given times
 * (with a restart time or none) and rates (every period, a fraction of the
 * selected nodes that are up dies, drawn from the run's seed, and comes
 * back after the downtime). A restart restores the node's last snapshot:
 * the one a graceful death wrote, or the group's periodic one; without any
 * the node starts fresh, as a bbd whose state directory was lost.
 */
#include <math.h>
#include <stdlib.h>

#include "bbsim/sim_internal.h"

static int push_node(bbsim *s, uint32_t kind, uint32_t k, bbsim_ns at, uint32_t rule)
{
    bbsim_event ev = {.at = at, .kind = kind, .node = k, .u.index = rule};
    return bbsim__push(s, &ev);
}

int bbsim__churn_schedule(bbsim *s)
{
    const bbsim_scenario *sc = s->sc;
    int rc = BB_OK;
    for (uint32_t i = 0; !rc && i < sc->n_churn; i++) {
        const bbsim_churn *c = &sc->churn[i];
        if (c->is_rate) {
            bbsim_event ev = {.at = c->at, .kind = BBSIM_EV_CHURN_TICK, .u.index = i};
            rc = bbsim__push(s, &ev);
            continue;
        }
        for (size_t r = 0; !rc && r < c->nodes.n; r++) {
            const bbsim_sel *sel = &c->nodes.v[r];
            for (uint32_t x = sel->lo; !rc && x < sel->hi; x++) {
                uint32_t k = sc->groups[sel->group].first + x;
                rc = push_node(s, BBSIM_EV_KILL, k, c->at, i);
                if (!rc && c->restart != UINT64_MAX)
                    rc = push_node(s, BBSIM_EV_RESTART, k, c->restart, i);
            }
        }
    }
    return rc;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void bbsim__churn_tick(bbsim *s, uint32_t rule)
{
    const bbsim_scenario *sc = s->sc;
    const bbsim_churn *c = &sc->churn[rule];
    size_t n = 0, cap = 0;
    for (size_t r = 0; r < c->nodes.n; r++)
        cap += c->nodes.v[r].hi - c->nodes.v[r].lo;
    uint32_t *up = malloc((cap ? cap : 1) * sizeof *up);
    for (size_t r = 0; up && r < c->nodes.n; r++) {
        const bbsim_sel *sel = &c->nodes.v[r];
        for (uint32_t x = sel->lo; x < sel->hi; x++) {
            uint32_t k = sc->groups[sel->group].first + x;
            if (s->nodes[k].engine)
                up[n++] = k;
        }
    }
    if (up && c->nodes.n > 1) { /* selectors may overlap: each node once, in order */
        qsort(up, n, sizeof *up, cmp_u32);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!m || up[m - 1] != up[i])
                up[m++] = up[i];
        n = m;
    }
    size_t kill = up ? (size_t)llround(c->rate * (double)n) : 0;
    for (size_t i = 0; i < kill; i++) { /* the first `kill` of a partial shuffle */
        size_t j = i + (size_t)bbp_rng_below(&s->rng, n - i);
        uint32_t k = up[j];
        up[j] = up[i];
        up[i] = k;
        bbsim__node_kill(s, k, c->graceful, "churn rate");
        if (c->downtime != UINT64_MAX)
            push_node(s, BBSIM_EV_RESTART, k, s->now + c->downtime, rule);
    }
    free(up);
    bbsim_event next = {.at = s->now + c->every, .kind = BBSIM_EV_CHURN_TICK, .u.index = rule};
    if (next.at < c->until && next.at <= sc->duration)
        bbsim__push(s, &next);
}
