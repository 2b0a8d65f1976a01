/*
 * events.c — the event heap (events.h).
 */
#include "bbsim/events.h"

#include <stdlib.h>

static bool before(const bbsim_event *a, const bbsim_event *b)
{
    return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

int bbsim_queue_push(bbsim_queue *q, bbsim_event *ev)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 1024;
        bbsim_event *v = realloc(q->v, cap * sizeof *v);
        if (!v)
            return BB_ENOMEM;
        q->v = v;
        q->cap = cap;
    }
    ev->seq = q->next_seq++;
    size_t i = q->n++;
    while (i > 0) { /* sift up */
        size_t parent = (i - 1) / 2;
        if (!before(ev, &q->v[parent]))
            break;
        q->v[i] = q->v[parent];
        i = parent;
    }
    q->v[i] = *ev;
    return BB_OK;
}

const bbsim_event *bbsim_queue_peek(const bbsim_queue *q)
{
    return q->n ? &q->v[0] : NULL;
}

bool bbsim_queue_pop(bbsim_queue *q, bbsim_event *out)
{
    if (!q->n)
        return false;
    *out = q->v[0];
    bbsim_event last = q->v[--q->n];
    size_t i = 0, n = q->n;
    for (;;) { /* sift the last element down from the root */
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&q->v[c + 1], &q->v[c]))
            c++;
        if (!before(&q->v[c], &last))
            break;
        q->v[i] = q->v[c];
        i = c;
    }
    if (n)
        q->v[i] = last;
    return true;
}

void bbsim_queue_free(bbsim_queue *q)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->v[i].kind == BBSIM_EV_DELIVER)
            free(q->v[i].u.env.bytes);
    free(q->v);
    q->v = NULL;
    q->n = q->cap = 0;
}
