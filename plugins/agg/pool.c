/*
 * pool.c — the agg plugin's fork-join helper: a reduction over a large
 * model is split into parts by element range, part 0 runs on the calling
 * (engine) thread, the others on threads the instance starts the first time
 * it needs them and keeps until it is destroyed.
 *
 * Results do not depend on the thread count: every kernel computes each
 * output element from the same inputs in the same order whichever part it
 * falls in, so the parts only decide who computes what (reduce.c).
 *
 * A dispatch returns only after every part is done, so nothing outlives the
 * call and the engine sees a synchronous op; the threads sleep on a
 * condition variable in between. A pool that cannot start a thread runs
 * that part itself: fewer threads, same result. No global state: every
 * aggregator instance has its own pool (or none, with threads = 1).
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "agg.h"

struct agg_pool {
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    unsigned n_threads;      /* started workers */
    pthread_t th[AGG_MAX_THREADS];
    /* the job of the current generation */
    void (*fn)(void *arg, unsigned part);
    void *arg;
    unsigned parts;          /* parts of this job (part 0 is the caller's) */
    unsigned pending;        /* worker parts not finished yet */
    uint64_t generation;
    bool stop;
};

typedef struct worker_arg {
    agg_pool *p;
    unsigned part; /* this worker's part: 1 + its index */
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg *w = arg;
    agg_pool *p = w->p;
    unsigned part = w->part;
    free(w);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        if (part >= p->parts)
            continue; /* a job with fewer parts than threads */
        void (*fn)(void *, unsigned) = p->fn;
        void *job = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(job, part);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static agg_pool *pool_new(unsigned workers)
{
    agg_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (pthread_mutex_init(&p->mu, NULL)) {
        free(p);
        return NULL;
    }
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    for (unsigned i = 0; i < workers && i < AGG_MAX_THREADS; i++) {
        worker_arg *w = malloc(sizeof *w);
        if (!w)
            break;
        *w = (worker_arg){p, p->n_threads + 1};
        if (pthread_create(&p->th[p->n_threads], NULL, worker_main, w)) {
            free(w);
            break;
        }
        p->n_threads++;
    }
    return p;
}

void agg_pool_free(agg_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

unsigned agg_threads_auto(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > AGG_MAX_THREADS ? AGG_MAX_THREADS : (unsigned)n;
}

void agg_pool_run(agg_pool **pool, unsigned parts, void (*fn)(void *arg, unsigned part),
                  void *arg)
{
    if (parts > 1 && !*pool)
        *pool = pool_new(parts - 1);
    agg_pool *p = *pool;
    unsigned remote = p ? parts - 1 : 0;
    if (p && remote > p->n_threads)
        remote = p->n_threads;
    if (remote) {
        pthread_mutex_lock(&p->mu);
        p->fn = fn;
        p->arg = arg;
        p->parts = remote + 1;
        p->pending = remote;
        p->generation++;
        pthread_cond_broadcast(&p->start);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0);
    for (unsigned part = remote + 1; part < parts; part++) /* threads that did not start */
        fn(arg, part);
    if (remote) {
        pthread_mutex_lock(&p->mu);
        while (p->pending)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
