/*
 * completion.c — completion handles (bb/plugin.h bb_completion) and the
 * CommandId suspension of component ops (ENGINE.md Part 9).
 *
 * A handle is completed exactly once, from any thread: the first complete()
 * wins an atomic PENDING -> COMPLETED transition; a second completion, or a
 * completion after the engine dropped the op (deadline, shutdown), loses it
 * and returns BB_ESTATE. The result travels to the engine thread through the
 * in-cycle pending list (completion made inside a dispatch on the engine
 * thread, drained in phase 5) or through the ingress (any other thread,
 * drained in phase 1). Handles live in engine-owned slabs; a retired handle
 * is quarantined for caps.completion_quarantine further retirements before
 * it is reused, so a late duplicate completion finds a non-pending handle
 * (BB_ESTATE) instead of someone else's op. Handles must not outlive the
 * engine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/syscalls.h"

#define SLAB BBE__HANDLE_SLAB

static int api_complete(bb_completion *c, int status, bb_value **outputs, uint32_t n,
                        const char *errmsg);
static void api_abandon(bb_completion *c);

static const bb_completion_api API = {
    .struct_size = sizeof(bb_completion_api),
    .complete = api_complete,
    .abandon = api_abandon,
};

bbe__handle *bbe__handle_new(bb_engine *e, uint32_t kind)
{
    bbe__handle *h = e->free_handles;
    if (h) {
        e->free_handles = h->next;
    } else {
        bbe__handle *slab = calloc(SLAB, sizeof *slab);
        if (!slab || BBE__ARR_PUSH(&e->slabs, slab)) {
            free(slab);
            return NULL;
        }
        for (size_t i = 1; i < SLAB; i++) {
            slab[i].next = e->free_handles;
            e->free_handles = &slab[i];
        }
        h = &slab[0];
    }
    h->pub.api = &API;
    h->e = e;
    h->kind = kind;
    h->attached = false;
    h->x = NULL;
    h->op = BBE__NONE;
    h->boot = 0;
    h->route = NULL;
    h->next = NULL;
    h->cmd_id = e->next_cmd++;
    atomic_store_explicit(&h->state, BBE__H_PENDING, memory_order_release);
    return h;
}

void bbe__handle_retire(bb_engine *e, bbe__handle *h)
{
    h->next = NULL;
    if (e->quar_tail)
        e->quar_tail->next = h;
    else
        e->quar_head = h;
    e->quar_tail = h;
    e->quar_n++;
    while (e->quar_n > e->caps.completion_quarantine) {
        bbe__handle *old = e->quar_head;
        e->quar_head = old->next;
        if (!e->quar_head)
            e->quar_tail = NULL;
        e->quar_n--;
        old->gen++;
        atomic_store_explicit(&old->state, BBE__H_IDLE, memory_order_release);
        old->next = e->free_handles;
        e->free_handles = old;
    }
}

bool bbe__handle_drop(bb_engine *e, bbe__handle *h)
{
    (void)e;
    uint32_t exp = BBE__H_PENDING;
    return atomic_compare_exchange_strong_explicit(&h->state, &exp, BBE__H_DROPPED,
                                                   memory_order_acq_rel, memory_order_acquire);
}

void bbe__handles_free(bb_engine *e)
{
    for (size_t i = 0; i < e->slabs.n; i++) {
        for (size_t k = 0; k < SLAB; k++)
            free(e->slabs.v[i][k].route); /* requests still unanswered */
        free(e->slabs.v[i]);
    }
    BBE__ARR_FREE(&e->slabs);
    e->free_handles = e->quar_head = e->quar_tail = NULL;
    e->spare = NULL;
}

static void release_outs(bb_value **outs, uint32_t n)
{
    if (!outs)
        return;
    for (uint32_t i = 0; i < n; i++)
        bb_value_unref(outs[i]);
}

static bool on_engine_thread(bb_engine *e)
{
    return atomic_load_explicit(&e->in_cycle, memory_order_acquire) &&
           pthread_equal(pthread_self(), e->cycle_thread);
}

static int complete_common(bbe__handle *h, int status, bb_value **outputs, uint32_t n,
                           const char *errmsg)
{
    bb_engine *e = h->e;
    if (status == BB_OK && n && !outputs)
        status = BB_EINVAL, errmsg = "completion with NULL outputs";
    size_t bytes = 0;
    /* A refused result fails the op with the reason: no caller completes a
     * handle twice, so an op left pending would wait for ever when it has
     * no deadline (docs/DECISIONS.md). */
    int refused = BB_OK;
    char why[160];
    if (status == BB_OK) {
        for (uint32_t i = 0; i < n; i++)
            bytes += bbe__value_size(outputs[i]);
        if (bytes > e->caps.max_completion_result_bytes) {
            refused = BB_ELIMIT;
            snprintf(why, sizeof why,
                     "completion result of %zu bytes exceeds max_completion_result_bytes %zu",
                     bytes, e->caps.max_completion_result_bytes);
            bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_PER_ITEM_CAP_EXCEEDED,
                        "%s", why);
        } else if (!bbe__budget_charge(e, bytes)) {
            /* the result joins the in-flight ingress bytes until its slots are freed */
            refused = BB_EBUDGET;
            snprintf(why, sizeof why,
                     "completion result of %zu bytes exceeds the ingress byte budget "
                     "(%zu of %zu bytes in use)",
                     bytes,
                     atomic_load_explicit(&e->bytes_in_flight, memory_order_relaxed),
                     e->caps.ingress_byte_budget);
            bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_BUDGET_EXCEEDED, "%s",
                        why);
        }
        if (refused) {
            release_outs(outputs, n);
            status = refused, errmsg = why, outputs = NULL, n = 0, bytes = 0;
        }
    }
    bbe__completion_ev ev = {.h = h, .gen = h->gen, .status = status, .n = status == BB_OK ? n : 0,
                            .charged = bytes};
    if (ev.n) {
        ev.outs = malloc(ev.n * sizeof *ev.outs);
        if (!ev.outs) {
            release_outs(outputs, n);
            bbe__budget_release(e, bytes);
            return BB_ENOMEM;
        }
        memcpy(ev.outs, outputs, ev.n * sizeof *ev.outs);
    }
    if (status != BB_OK && errmsg)
        ev.msg = strdup(errmsg);
    uint32_t exp = BBE__H_PENDING;
    if (!atomic_compare_exchange_strong_explicit(&h->state, &exp, BBE__H_COMPLETED,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        free(ev.outs);
        free(ev.msg);
        release_outs(outputs, n);
        bbe__budget_release(e, bytes);
        return BB_ESTATE;
    }
    if (status != BB_OK)
        release_outs(outputs, n);
    if (on_engine_thread(e)) {
        if (BBE__ARR_PUSH(&e->pending_completions, ev) == 0)
            return refused;
        /* fall through to the ingress on OOM */
    }
    bbe__ingress_ev *iev = bbe__zalloc(sizeof *iev);
    if (!iev) {
        release_outs(ev.outs, ev.n);
        free(ev.outs);
        free(ev.msg);
        bbe__budget_release(e, ev.charged);
        return BB_ENOMEM;
    }
    iev->kind = BBE__IN_COMPLETION;
    iev->must = true;
    iev->u.comp = ev;
    int rc = bbe__ingress_push(e, iev);
    return rc ? rc : refused;
}

static int api_complete(bb_completion *c, int status, bb_value **outputs, uint32_t n,
                        const char *errmsg)
{
    if (!c || c->api != &API) {
        release_outs(outputs, n);
        return BB_EINVAL;
    }
    return complete_common((bbe__handle *)c, status, outputs, n, errmsg);
}

static void api_abandon(bb_completion *c)
{
    if (c && c->api == &API)
        complete_common((bbe__handle *)c, BB_ERUNTIME, NULL, 0, "completion abandoned");
}

const char *bbe__completion_failure_text(const bbe__completion_ev *ev, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s (%s)", ev->msg ? ev->msg : "async op failed",
             bb_status_name(ev->status));
    return buf;
}

void bbe__completion_process(bb_engine *e, bbe__completion_ev *ev)
{
    bbe__handle *h = ev->h;
    char buf[320];
    switch (h->kind) {
    case BBE__HK_OP:
        if (h->attached) {
            uint32_t op = h->op;
            bbe__exec *x = h->x;
            h->attached = false;
            h->x = NULL;
            if (BBE__TRACING(e, BB_TRACE_EVENT))
                bbe__trace(e, BB_TRACE_EVENT, "handle_completion", x->id, op,
                          bb_status_name(ev->status), h->cmd_id);
            if (ev->status == BB_OK) {
                bbe__park_resume_charged(e, op, x, ev->outs, ev->n); /* takes the charge */
                ev->n = 0;
                ev->charged = 0;
            } else {
                bbe__park_fail(e, op, x, bbe__completion_failure_text(ev, buf, sizeof buf));
            }
        }
        break;
    case BBE__HK_BOOTSTRAP:
        bbe__boot_handle_done(e, h->boot, ev->status, ev->msg);
        break;
    case BBE__HK_FILL:
        bbe__control_fill_completed(e, h, ev);
        break;
    default:
        break;
    }
    release_outs(ev->outs, ev->n);
    bbe__budget_release(e, ev->charged);
    free(ev->outs);
    free(ev->msg);
    ev->outs = NULL;
    ev->msg = NULL;
    ev->charged = 0;
    bbe__handle_retire(e, h);
}

void bbe__drain_pending_completions(bb_engine *e)
{
    /* Processing may dispatch ops that complete more handles in-cycle: take
     * the list by index so appends during the walk are processed too. */
    for (size_t i = 0; i < e->pending_completions.n; i++) {
        bbe__completion_ev ev = e->pending_completions.v[i];
        bbe__completion_process(e, &ev);
    }
    e->pending_completions.n = 0;
}
