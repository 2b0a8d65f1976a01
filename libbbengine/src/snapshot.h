/*
 * snapshot.h — what a snapshot section is made of (the format itself, its
 * framing and its evolution rule are in snapshot.c).
 *
 * A section is one subsystem's state: the subsystem's own file writes and
 * reads it (timers.c the timers, peers.c the address book, ...) with the
 * helpers below, and snapshot.c lists the sections in one table, in the
 * order they are written and restored. A section body is untrusted on
 * restore: readers take every count, index and value through these
 * helpers, which bound it and, on the first problem, mark the section's
 * reader failed at the offset of the field that broke (snapshot.c turns
 * that into "section 'timers' malformed at byte 17 of 40 ..."). After a
 * failure every helper returns 0 / NULL / false, so a reader may finish a
 * record before it checks.
 */
#ifndef BBE__SNAPSHOT_H
#define BBE__SNAPSHOT_H

#include "bb/bytes.h"
#include "libbbengine/src/engine_internal.h"

/* Any count in a section: a bound before anything is allocated for it
 * (counts are also bounded by the bytes that follow). */
#define BBE__SNAP_MAX_COUNT ((size_t)1 << 26)

/* Writing: o->w is the section's body (a fresh buffer per section). */
typedef struct bbe__snap_out {
    bb_writer w;
    bbe__map frames; /* live frame -> 1-based index in the executions section */
} bbe__snap_out;

/* Reading: in->r reads the section's body only. */
typedef struct bbe__snap_in {
    bb_reader r;
    bool oom;              /* an allocation failed: the snapshot may be fine */
    bbe__exec **frames;    /* the executions section's frames, in its order */
    size_t n_frames;
    uint64_t incarnation;  /* the snapshot's; the restored engine runs the next */
} bbe__snap_in;

/* The sections, in the order they are written and restored, each with
 * its on-disk tag (never reused for something else) and the version of its
 * layout (snapshot.c: how a section evolves). The owner file defines
 * bbe__snap_write_<name> and bbe__snap_read_<name>. Order matters on
 * restore: engine first (it checks the install), executions before every
 * section that names a frame, bootstrap after executions (it checks their
 * tags), ingress last. */
#define BBE__SNAP_SECTIONS(X)                                                              \
    X(1, engine, 1)            /* engine.c: fingerprint, clocks, ids, rng, counters */      \
    X(2, components, 1)        /* snapshot_components.c: type->snapshot state per slot */   \
    X(3, executions, 1)        /* exec.c: live frames and their slots */                    \
    X(4, frontier, 1)          /* exec.c: ops to dispatch (queued, parked, on a handle) */  \
    X(5, timers, 1)            /* timers.c */                                                \
    X(6, semaphores, 1)        /* syscalls_state.c: Limit.* */                              \
    X(7, queues, 1)            /* syscalls_state.c: Serialize.* */                          \
    X(8, holds, 1)             /* syscalls_state.c: Hold.* */                               \
    X(9, records, 1)           /* syscalls_app.c: the Record ring */                        \
    X(10, metrics, 1)          /* syscalls_app.c: IncrMetric counters */                     \
    X(11, requests, 1)         /* snapshot_wire.c: request batches */                        \
    X(12, inbound_requests, 1) /* snapshot_wire.c: open RecvReq requests */                  \
    X(13, loopback, 1)         /* snapshot_wire.c: self-addressed envelopes */               \
    X(14, dedup, 1)            /* gates.c: DedupGateRx window */                             \
    X(15, peers, 1)            /* peers.c: address book, health, backoff */                  \
    X(16, bus, 1)              /* bus.c: queued NodeEvents */                                \
    X(17, bootstrap, 1)        /* bootstrap.c: progress, in flight, staged */                \
    X(18, ingress, 1)          /* ingress.c: events not yet processed */

typedef struct bbe__snap_section {
    uint32_t tag;
    const char *name; /* in restore errors */
    uint32_t version;
    /* BB_OK, or an error set in err (a component that cannot snapshot);
     * running out of memory fails o->w instead. */
    int (*write)(bb_engine *e, bbe__snap_out *o, bb_error *err);
    /* BB_OK, or an error set in err that is not about the bytes (another
     * install, a component's own restore error); malformed bytes fail
     * in->r, an allocation failure sets in->oom (bbe__snap_nomem). */
    int (*read)(bb_engine *e, bbe__snap_in *in, bb_error *err);
} bbe__snap_section;

#define BBE__SNAP_DECLARE(tag, name, version)                                   \
    int bbe__snap_write_##name(bb_engine *e, bbe__snap_out *o, bb_error *err); \
    int bbe__snap_read_##name(bb_engine *e, bbe__snap_in *in, bb_error *err);
BBE__SNAP_SECTIONS(BBE__SNAP_DECLARE)
#undef BBE__SNAP_DECLARE

/* The table BBE__SNAP_SECTIONS makes (snapshot.c). */
extern const bbe__snap_section bbe__snap_sections[];
extern const size_t bbe__snap_n_sections;

/* Number the live frames 1.. in the executions section's order (exec.c). */
int bbe__snap_number_frames(const bb_engine *e, bbe__map *frames);

/* ---- writing ------------------------------------------------------------------------------ */
static inline void bbe__snap_put_u(bbe__snap_out *o, uint64_t v)
{
    bb_writer_put_uvarint(&o->w, v);
}
/* 0 (none), or 1, the type's wire hash and the value's wire encoding. */
void bbe__snap_put_value(bbe__snap_out *o, const bb_value *v);
void bbe__snap_put_peer(bbe__snap_out *o, const bb_peerid *p);
/* A frame as its 1-based index in the executions section (0: NULL). */
void bbe__snap_put_frame(bbe__snap_out *o, const bbe__exec *x);
/* Ops suspended on something: (op, frame) pairs. */
void bbe__snap_put_waiters(bbe__snap_out *o, const struct bbe__waiter *v, size_t n);
/* Input values bound for sites (invocations, bootstrap requests). */
void bbe__snap_put_in_values(bbe__snap_out *o, const bbe__in_value *in, uint32_t n);

/* ---- reading ------------------------------------------------------------------------------- */
/* The section is malformed at offset at: why is a static phrase. */
void bbe__snap_fail(bbe__snap_in *in, size_t at, const char *why);
/* An allocation failed (restore says "out of memory", not "malformed"). */
void bbe__snap_nomem(bbe__snap_in *in);
uint64_t bbe__snap_u(bbe__snap_in *in);
bool bbe__snap_flag(bbe__snap_in *in);
/* A value <= max; else the section fails with why. */
uint64_t bbe__snap_max(bbe__snap_in *in, uint64_t max, const char *why);
/* A value that must be want (a table length of this install); else the
 * section fails with why. */
void bbe__snap_expect(bbe__snap_in *in, uint64_t want, const char *why);
/* An index < limit; else the section fails with why. */
uint32_t bbe__snap_index(bbe__snap_in *in, uint32_t limit, const char *why);
/* A count <= max and <= the bytes left (every item takes one at least). */
size_t bbe__snap_count(bbe__snap_in *in, size_t max, const char *why);
/* A length-delimited run, in place (NULL after a failure). */
const uint8_t *bbe__snap_bytes(bbe__snap_in *in, size_t *len);
/* A value (new reference); NULL when absent or after a failure. */
bb_value *bbe__snap_value_or_null(bbe__snap_in *in);
/* A value that must be there (absent fails the section). */
bb_value *bbe__snap_value(bbe__snap_in *in);
bool bbe__snap_peer(bbe__snap_in *in, bb_peerid *p);
/* A frame written by bbe__snap_put_frame: NULL for 0 or after a failure. */
bbe__exec *bbe__snap_frame_or_null(bbe__snap_in *in);
/* A frame that must be there. */
bbe__exec *bbe__snap_frame(bbe__snap_in *in);
/* An op and its frame: the op must belong to the frame's graph. false
 * after a failure. */
bool bbe__snap_op_in_frame(bb_engine *e, bbe__snap_in *in, uint32_t *op, bbe__exec **x);
/* Waiters into arr (a BBE__ARR(struct bbe__waiter)); each holds a
 * reference on its frame and counts as pending async work. */
void bbe__snap_waiters(bb_engine *e, bbe__snap_in *in, void *arr);
/* Input values for sites of graph (malloc'd array, their budget
 * charged); NULL and *n_out 0 after a failure (nothing kept). */
bbe__in_value *bbe__snap_in_values(bb_engine *e, bbe__snap_in *in, uint32_t graph,
                                   uint32_t *n_out);

/* A staged bootstrap request (bootstrap.c; the ingress section holds them
 * too): kind, index, inputs. The reader returns false, the section failed
 * and nothing kept, when it names no bootstrap of the install. */
void bbe__snap_put_boot_req(bbe__snap_out *o, const bbe__boot_req *q);
bool bbe__snap_read_boot_req(bb_engine *e, bbe__snap_in *in, bbe__boot_req *q);

#endif
