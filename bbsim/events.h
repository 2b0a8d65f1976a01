/*
 * events.h — the simulator's event queue: a binary min-heap ordered by
 * (virtual time, sequence number). The sequence number is the order events
 * were pushed in, so events at one instant run in the order they were
 * caused — the same order in every run.
 */
#ifndef BBSIM_EVENTS_H
#define BBSIM_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bbsim/scenario.h"

typedef enum bbsim_ev_kind {
    BBSIM_EV_START = 1,    /* node: start (first time) */
    BBSIM_EV_POLL,         /* node: poll its engine */
    BBSIM_EV_DELIVER,      /* node: an envelope from `other` arrives */
    BBSIM_EV_SEND_FAILED,  /* node: a send to `other` found no connection */
    BBSIM_EV_CONNECT,      /* node and other: the connection opens (handshake done) */
    BBSIM_EV_REDIAL,       /* node: dial `other` again (a lost connection) */
    BBSIM_EV_WORK_DONE,    /* node: a job's virtual completion */
    BBSIM_EV_KILL,         /* node: dies (index: the churn entry) */
    BBSIM_EV_RESTART,      /* node: starts again from its last snapshot */
    BBSIM_EV_SNAPSHOT,     /* node: periodic snapshot */
    BBSIM_EV_PARTITION,    /* index: a partition opens */
    BBSIM_EV_HEAL,         /* index: it heals */
    BBSIM_EV_CHURN_TICK    /* index: a churn rate rule kills its share */
} bbsim_ev_kind;

struct bbsim_job;

typedef struct bbsim_event {
    bbsim_ns at;
    uint64_t seq;
    uint32_t kind;
    uint32_t node, other;
    uint32_t inc, other_inc; /* the nodes' incarnations when it was scheduled */
    union {
        struct {
            uint8_t *bytes; /* owned by the event */
            size_t len;
        } env;
        struct bbsim_job *job;
        uint32_t index;
        uint32_t attempt;
    } u;
} bbsim_event;

typedef struct bbsim_queue {
    bbsim_event *v;
    size_t n, cap;
    uint64_t next_seq;
} bbsim_queue;

/* Stamps ev->seq; BB_ENOMEM when the heap cannot grow. */
int bbsim_queue_push(bbsim_queue *q, bbsim_event *ev);
/* The earliest event, or NULL. */
const bbsim_event *bbsim_queue_peek(const bbsim_queue *q);
bool bbsim_queue_pop(bbsim_queue *q, bbsim_event *out);
/* Frees every event's envelope bytes and the heap. */
void bbsim_queue_free(bbsim_queue *q);

#endif
