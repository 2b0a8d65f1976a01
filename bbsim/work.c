/*
 * work.c — the worker pool (work.h): a FIFO of jobs under one mutex, N
 * threads taking from it, one condition variable for "a job finished"
 * (the loop waits on it for the job whose virtual completion is next).
 *
 * Job states: QUEUED -> RUNNING -> DONE, or QUEUED -> CANCELLED when its
 * node dies first. The loop owns every job and frees it with
 * bbsim_pool_release once its completion event has run (or was dropped).
 */
#include "bbsim/work.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

enum { JOB_QUEUED = 1, JOB_RUNNING, JOB_DONE, JOB_CANCELLED };

struct bbsim_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    bbsim_job *head, *tail; /* queued, FIFO */
    bbsim_job *all;         /* every job not yet released */
    pthread_t *threads;
    int n_threads;
    bool stopping;
};

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void run(bbsim_job *j)
{
    uint64_t t0 = thread_cpu_ns();
    j->fn(j->arg);
    j->cpu_ns = thread_cpu_ns() - t0;
}

static void *worker(void *arg)
{
    bbsim_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stopping)
            break;
        bbsim_job *j = p->head;
        p->head = j->next_queued;
        if (!p->head)
            p->tail = NULL;
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&p->mu);
        run(j);
        pthread_mutex_lock(&p->mu);
        j->state = JOB_DONE;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

bbsim_pool *bbsim_pool_new(int threads)
{
    bbsim_pool *p = calloc(1, sizeof *p);
    if (!p || threads < 0 || threads > 64 ||
        (threads && !(p->threads = calloc((size_t)threads, sizeof *p->threads)))) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (; p->n_threads < threads; p->n_threads++)
        if (pthread_create(&p->threads[p->n_threads], NULL, worker, p) != 0) {
            bbsim_pool_free(p);
            return NULL;
        }
    return p;
}

void bbsim_pool_free(bbsim_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    while (p->all)
        bbsim_pool_release(p, p->all);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

bbsim_job *bbsim_pool_job(bbsim_pool *p)
{
    bbsim_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->next_all = p->all; /* the loop's thread only: no lock */
    if (p->all)
        p->all->prev_all = j;
    p->all = j;
    return j;
}

void bbsim_pool_submit(bbsim_pool *p, bbsim_job *j)
{
    if (!p->n_threads) {
        run(j);
        j->state = JOB_DONE;
        return;
    }
    pthread_mutex_lock(&p->mu);
    j->state = JOB_QUEUED;
    j->next_queued = NULL;
    if (p->tail)
        p->tail->next_queued = j;
    else
        p->head = j;
    p->tail = j;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

bool bbsim_pool_wait(bbsim_pool *p, bbsim_job *j)
{
    if (!p->n_threads)
        return j->state == JOB_DONE;
    pthread_mutex_lock(&p->mu);
    while (j->state == JOB_QUEUED || j->state == JOB_RUNNING)
        pthread_cond_wait(&p->done, &p->mu);
    bool ran = j->state == JOB_DONE;
    pthread_mutex_unlock(&p->mu);
    return ran;
}

void bbsim_pool_cancel_node(bbsim_pool *p, uint32_t node)
{
    if (!p->n_threads)
        return;
    pthread_mutex_lock(&p->mu);
    bbsim_job **pp = &p->head;
    p->tail = NULL;
    while (*pp) { /* unlink the node's queued jobs */
        bbsim_job *j = *pp;
        if (j->node == node) {
            j->state = JOB_CANCELLED;
            *pp = j->next_queued;
        } else {
            p->tail = j;
            pp = &j->next_queued;
        }
    }
    for (bool busy = true; busy;) {
        busy = false;
        for (bbsim_job *j = p->all; j && !busy; j = j->next_all)
            busy = j->node == node && j->state == JOB_RUNNING;
        if (busy)
            pthread_cond_wait(&p->done, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
}

void bbsim_pool_release(bbsim_pool *p, bbsim_job *j)
{
    if (j->prev_all)
        j->prev_all->next_all = j->next_all;
    else
        p->all = j->next_all;
    if (j->next_all)
        j->next_all->prev_all = j->prev_all;
    free(j);
}
