/*
 * agg.h — internal interface of the agg plugin (agg::FedAvg,
 * agg::WeightAggregator, agg::TrimmedMean, agg::Median, and the server
 * optimizers agg::FedAdam, agg::FedYogi, agg::FedAdagrad).
 *
 * A round is the set of contributions since the last Aggregate. Each one
 * holds a reference to its tensor (zero-copy: the value the engine handed
 * us) and its weight (num_samples). Aggregate reduces them in ONE pass over
 * the contributions' bytes (reduce.c), emits the result with the summed
 * num_samples as metadata and starts the next round. A server optimizer
 * then steps its global model towards that mean (server_opt.c).
 */
#ifndef BB_AGG_INTERNAL_H
#define BB_AGG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/peerid.h>
#include <bb/plugin.h>

#include <bb/bytes.h>

#define AGG_MAX_THREADS 8
#define AGG_PART_MIN_FLOATS ((size_t)1 << 20) /* floats touched per thread, at least */

/* The threads a kernel may use: the instance's pool and its thread count. */
typedef struct agg_pool agg_pool;
typedef struct agg_par {
    agg_pool **pool;
    unsigned threads;
} agg_par;

typedef enum agg_kind {
    AGG_FEDAVG = 0,    /* mean weighted by num_samples */
    AGG_MEAN = 1,      /* plain mean (WeightAggregator) */
    AGG_TRIMMED = 2,   /* coordinate-wise trimmed mean */
    AGG_MEDIAN = 3,    /* coordinate-wise median */
    AGG_FEDADAM = 4,   /* server optimizers: FedAvg's mean, then an adaptive step */
    AGG_FEDYOGI = 5,
    AGG_FEDADAGRAD = 6
} agg_kind;

/* A server optimizer's state (server_opt.c). */
typedef struct agg_server {
    double lr, beta1, beta2, tau; /* config */
    bb_value *reference;    /* x: the global model the next step starts from */
    float *m, *v;           /* the moments, numel each; NULL before the first step */
    size_t numel;
    uint64_t steps;         /* steps taken (Aggregates since the moments started) */
    /* SetParamNames: the coordinates a step leaves at the round's mean (what
     * the model does not train: BatchNormalization's running statistics),
     * as sorted, disjoint [lo, hi) ranges */
    size_t (*averaged)[2];
    size_t n_averaged;
} agg_server;

/* One peer's update in the current round. */
typedef struct agg_contribution {
    bool has_peer;
    bb_peerid peer;
    bool tagged;      /* came with the round's request tag (dropped with it) */
    uint64_t num_samples;
    bb_value *tensor; /* f32, a held reference */
} agg_contribution;

typedef struct agg_sender {
    bool has_peer;
    bb_peerid peer;
} agg_sender;

/* A contribution folded in element ranges as its bytes arrive (the
 * engine's fold_piece, fold_piece.c): it covers [0, done) so far. A cut
 * one (live false) keeps the prefix it brought, with its weight there. */
typedef struct agg_fold_part {
    uint64_t stream;      /* the engine's handle (bb_fold_piece.stream); 0 once cut */
    bool live;
    bool has_peer;
    bb_peerid peer;
    double w;             /* its weight: num_samples, or 1 (WeightAggregator) */
    uint64_t samples;
    size_t done;          /* elements folded */
} agg_fold_part;

/* The streamed part of a round (fold.c): contributions folded into a
 * running weighted mean as they arrived. Coordinate j of the mean has
 * weight weight + the w of each part with j < done. */
typedef struct agg_fold {
    bb_value *mean;       /* f32, the round's shape; NULL before the first with a weight */
    bool owned;           /* mean's memory is ours to write (else a contribution's) */
    double weight;        /* the weights folded: num_samples, or 1 each (WeightAggregator) */
    uint64_t samples;     /* the num_samples folded */
    agg_sender *senders;  /* who folded, in order [n] */
    size_t n, cap;
    char poison[BB_ERROR_MSG_MAX]; /* why the mean is not finite; "" while it is */
    agg_fold_part *parts; /* contributions arriving, or cut, in ranges [n_parts] */
    size_t n_parts, parts_cap;
} agg_fold;

/* One parsed contribution before it enters the round (references borrowed). */
typedef struct agg_item {
    const bb_value *tensor;
    const bb_value *peer;   /* PeerId value or NULL */
    uint64_t num_samples;
} agg_item;

typedef struct agg {
    agg_kind kind;
    const char *type_name;
    double trim;            /* TrimmedMean: fraction cut at each end */
    int64_t trim_count;     /* TrimmedMean: explicit count, or -1 */
    size_t max_contributions;
    bool skip_bad;          /* on_bad_contribution = "skip" */
    unsigned threads;       /* kernels split large models over this many */
    agg_pool *pool;         /* their threads (pool.c), started when first needed */
    bb_ctx *ctx;            /* for warnings (may be NULL in tests) */

    agg_contribution *v;    /* the held part of the round */
    size_t n, cap;
    agg_fold fold;          /* the folded part (averaging kinds, tagged Contributes) */
    bool tagged;            /* the round's request tag (a RequestId), when it has one */
    uint64_t tag;
    uint32_t ndim;          /* shape of this round (set by its first contribution) */
    int64_t dims[BB_MAX_DIMS];
    size_t numel;

    bb_value *last;         /* the last Aggregate result (CurrentTensor) */
    uint64_t last_samples;
    uint64_t rounds;        /* Aggregates so far */
    agg_server srv;         /* server optimizers only */
} agg;

static inline agg_par agg_par_of(agg *a)
{
    return (agg_par){&a->pool, a->threads};
}

/* A warning through the host's log (agg.c). */
void agg_warn(const agg *a, const char *msg);

/* ---- contribution.c ---------------------------------------------------- */

/* Split a Contribute's inputs into items: a tensor (+ metadata), a
 * Composite(params, num_samples[, PeerId]) or a ResponseBatch of those.
 * *items is malloc'd (free it); an item whose tensor is NULL was skipped. */
int agg_parse_contribute(const agg *a, const bb_value *contribution, const bb_value *metadata,
                         agg_item **items, size_t *n_items, bb_error *err);
/* A contribution whose tensor comes in pieces: the item (tensor NULL)
 * from its sender and the Composite of its other parts (num_samples, ...). */
int agg_parse_streamed(const agg *a, const bb_value *rest, const bb_value *sender, agg_item *it,
                       bb_error *err);
/* "peer 12D3KooW..." or "an anonymous contribution". */
void agg_describe_source(const bb_value *peer, char *out, size_t cap);
/* The same for a PeerId already parsed (has_peer false: anonymous). */
void agg_describe_peer(bool has_peer, const bb_peerid *id, char *out, size_t cap);
/* "[2, 3]" */
void agg_format_shape(uint32_t ndim, const int64_t *dims, char *out, size_t cap);

/* ---- pool.c --------------------------------------------------------------- */

/* Runs fn(arg, part) for every part in [0, parts): part 0 on the caller's
 * thread, the others on the pool's threads (*pool is created at the first
 * call that needs one; a thread that cannot start leaves its part to the
 * caller). Returns when every part is done. */
void agg_pool_run(agg_pool **pool, unsigned parts, void (*fn)(void *arg, unsigned part),
                  void *arg);
void agg_pool_free(agg_pool *p);
/* threads = 0 ("auto"): the online CPUs, at most AGG_MAX_THREADS. */
unsigned agg_threads_auto(void);

/* ---- reduce.c ------------------------------------------------------------ */

/* How many parts a kernel over len elements of `inputs` inputs uses: one
 * per AGG_PART_MIN_FLOATS floats touched, at most par.threads. */
unsigned agg_parts(agg_par par, size_t len, size_t inputs);
/* out[j] = (accumulate ? out[j] : 0) + sum_i w[i] * x[i][j], summed in that
 * order. Returns the index of the first non-finite output coordinate, or
 * SIZE_MAX when every output is finite. out may be x[0] itself (in place);
 * it must not overlap any other input. */
size_t agg_reduce_weighted(agg_par par, const float *const *x, const float *w, size_t n,
                           size_t len, float *out, bool accumulate);
/* Coordinate-wise median (kind AGG_MEDIAN) or mean of the sorted values
 * [k, n - k) (AGG_TRIMMED). NaN counts as +inf, so a NaN sender lands at
 * the top and is trimmed like any outlier. Needs n > 2k. */
int agg_reduce_sorted(agg_par par, agg_kind kind, const float *const *x, size_t n, size_t k,
                      size_t len, float *out);

/* ---- round.c ----------------------------------------------------------------- */

/* A result tensor of the round's shape (64-byte aligned), reusing the last
 * result's memory when nobody else holds it. NULL when out of memory. */
bb_value *agg_result_new(agg *a);
/* Contribute(contribution, metadata): metadata a RequestId tags the
 * contribution with the request it answers (the engine's streaming path):
 * the averaging kinds fold it (fold.c). cmd = contributions in the round. */
int agg_contribute(agg *a, const bb_value *contribution, const bb_value *metadata,
                   bb_value **out, bb_error *err);
/* The round reduced into *out (new reference), *samples the summed
 * num_samples. close: Aggregate (the result may take the folded mean's
 * memory, a poisoned round drops its folded part); else CurrentTensor
 * (the round stays as it is). Nothing is cleared here. */
int agg_reduce_round(agg *a, bool close, bb_value **out, uint64_t *samples, bb_error *err);
/* Contributions in the round, held and folded (whole, arriving, or cut). */
static inline size_t agg_round_count(const agg *a)
{
    return a->n + a->fold.n + a->fold.n_parts;
}
/* BEGIN of a contribution folded piece by piece (bb_fold_piece): checks
 * it as Contribute checks a tagged response (request tag, sender, shape,
 * num_samples in rest) and opens its part. BB_EUNSUPPORTED when this
 * aggregator takes contributions only whole (TrimmedMean, Median, skip
 * mode, which checks every value first). */
int agg_contribute_begin(agg *a, const bb_fold_piece *p, bb_error *err);

/* ---- fold.c ------------------------------------------------------------------ */

/* FedAvg, WeightAggregator and the server optimizers fold tagged
 * contributions; TrimmedMean and Median hold them. */
bool agg_folds(agg_kind kind);
void agg_fold_clear(agg_fold *f);
void agg_fold_free(agg_fold *f);
bool agg_fold_has_sender(const agg_fold *f, const bb_peerid *id);
int agg_fold_reserve(agg_fold *f, size_t n);
/* false (logged) when on_bad_contribution = "skip" and the item has a
 * non-finite value: it is left out. */
bool agg_fold_admits(agg *a, const agg_item *it);
/* Fold one item of the round's shape (sender checks done). Fails when out
 * of memory, or when the mean became non-finite (poisoned, naming it). */
int agg_fold_add(agg *a, const agg_item *it, bb_error *err);
/* Parts (fold_piece): the one that starts (it: peer, num_samples; the
 * round's shape is set), elements [offset, offset + count) of it (in
 * order; a non-finite mean poisons the round naming the sender), its end
 * (every element came: it joins the folded senders) and its cut (what it
 * brought stays, with its weight, on its prefix). */
int agg_fold_part_begin(agg *a, uint64_t stream, const agg_item *it, bb_error *err);
int agg_fold_part_data(agg *a, uint64_t stream, uint64_t offset, uint64_t count, const float *x,
                       bb_error *err);
int agg_fold_part_end(agg *a, uint64_t stream, bb_error *err);
void agg_fold_part_cut(agg *a, uint64_t stream);
/* Whether a sender has a part in the round. */
bool agg_fold_has_part(const agg_fold *f, const bb_peerid *id);
/* Coordinates no contribution covers (every sender that brought them was
 * cut): an error naming them, else BB_OK. */
int agg_fold_covered(const agg *a, bb_error *err);
/* Make the mean memory the aggregator may write (a server optimizer's step
 * works in place). */
int agg_fold_own(agg *a, bb_error *err);
/* The round's tags and folded part, after the server state (snapshot
 * version 3); the reader fills into (whose held part and shape are read). */
void agg_fold_snapshot(const agg *a, bb_writer *w);
/* version: the snapshot's; from 4 the parts follow (every part restores
 * cut: streams are not in the engine's snapshot). */
int agg_fold_restore(agg *into, bb_reader *r, uint32_t version, bb_error *err);

/* ---- snapshot.c ---------------------------------------------------------- */

int agg_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err);
int agg_restore(void *inst, const uint8_t *data, size_t len, bb_error *err);
void agg_round_clear(agg *a);
/* A tensor as shape (u32 ndim, ndim x i64) then f32 data; the reader
 * returns a new value, or NULL when the bytes are short or out of range. */
void agg_snapshot_put_tensor(bb_writer *w, const bb_value *t);
bb_value *agg_snapshot_get_tensor(bb_reader *r);

/* ---- server_opt.c ---------------------------------------------------------- */

bool agg_is_server_optimizer(agg_kind kind);
void agg_server_free(agg_server *s);
/* SetModel: the global model the round's clients started from (a held
 * reference; ignored by the averaging kinds). A new size restarts the
 * moments. */
int agg_server_set_model(agg *a, const bb_value *params, bb_error *err);
/* SetParamNames: the model's ParamNames (JSON Bytes: [{"name", "offset",
 * "shape", "trained"}...]); the coordinates of every entry not trained take
 * the round's mean instead of the optimizer's step, until the next call
 * (ignored by the averaging kinds; not in the snapshot: a program sets it
 * each round, like SetModel). */
int agg_server_set_param_names(agg *a, const bb_value *names, bb_error *err);
/* Before a step, while nothing has changed yet: a global model of the
 * round's size, averaged ranges inside it, and the moments (allocated at
 * the first step). */
int agg_server_prepare(agg *a, bb_error *err);
/* inout holds the round's mean (a->numel values); it becomes the stepped
 * model. commit = false (CurrentTensor) leaves the moments untouched.
 * Cannot fail once agg_server_prepare succeeded. */
void agg_server_step(agg *a, float *inout, bool commit);
/* After an Aggregate: the result is the next step's starting point. */
void agg_server_advance(agg *a, const bb_value *result);
void agg_server_snapshot(const agg *a, bb_writer *w);
/* Reads into->srv (empty) from r; into->last must already be restored. */
int agg_server_restore(agg *into, bb_reader *r, bb_error *err);

#endif
