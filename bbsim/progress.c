/*
 * progress.c — a progress bar on stderr for long runs (main.c turns it on
 * only when stderr is a terminal): how far the run is towards its end (the
 * "until" count, else the duration), virtual and wall time, nodes up.
 * Redrawn at most ten times a wall second, over itself (\r).
 */
#include <stdio.h>

#include "bbsim/sim_internal.h"

#define BAR 30

void bbsim__progress(bbsim *s, bool last)
{
    double now = bbsim__wall();
    if (!last && now < s->progress_next)
        return;
    s->progress_next = now + 0.1;
    const bbsim_scenario *sc = s->sc;
    double frac = sc->until_topic ? (double)s->until_seen / (double)sc->until_count
                                  : (double)s->now / (double)sc->duration;
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    char bar[BAR + 1];
    int full = (int)(frac * BAR + 0.5);
    for (int i = 0; i < BAR; i++)
        bar[i] = i < full ? '#' : '.';
    bar[BAR] = '\0';
    char what[96];
    if (sc->until_topic)
        snprintf(what, sizeof what, "%llu/%llu %s", (unsigned long long)s->until_seen,
                 (unsigned long long)sc->until_count, sc->until_topic);
    else
        snprintf(what, sizeof what, "%3.0f%%", 100 * frac);
    fprintf(stderr, "\r[%s] %s  virtual %.1f s  wall %.1f s  %u/%u up ", bar, what,
            (double)s->now / 1e9, now - s->wall_start, s->sum.nodes_up, s->n_nodes);
    if (last)
        fputc('\n', stderr);
    fflush(stderr);
}
