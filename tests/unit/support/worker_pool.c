/*
 * worker_pool.c — see worker_pool.h.
 */
#include "worker_pool.h"

#include <string.h>

static void *pool_main(void *p)
{
    pool *w = p;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && (!w->open || w->n == 0))
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop)
            break;
        pool_job j = w->q[0];
        memmove(w->q, w->q + 1, (size_t)--w->n * sizeof *w->q);
        w->running = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        j.work(j.arg);
        pthread_mutex_lock(&w->mu);
        if (w->e)
            bb_engine_work_done(w->e, j.token);
        w->running = false;
        w->ran++;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void pool_init(pool *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

int pool_start(pool *w, bb_engine *e)
{
    w->e = e;
    return pthread_create(&w->th, NULL, pool_main, w);
}

int pool_submit(void *ud, void (*work)(void *), void *arg, uint64_t token)
{
    pool *w = ud;
    pthread_mutex_lock(&w->mu);
    int rc = w->n < 64 ? BB_OK : BB_EFULL;
    if (!rc)
        w->q[w->n++] = (pool_job){work, arg, token};
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void pool_gate(pool *w, bool open)
{
    pthread_mutex_lock(&w->mu);
    w->open = open;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void pool_stop(pool *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
}
