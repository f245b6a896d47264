/*
 * pool.c - the CPU kernels' thread pool (see pool.h).
 *
 * Persistent pthreads, started on the first cpu_parallel_for that needs
 * them: worker 0 is the calling thread, workers 1..T-1 wait on a condition
 * variable for the next job. A job is [0, n) cut into contiguous chunks of
 * at least `grain` indexes; every thread takes the next chunk from an
 * atomic counter until none is left. The caller does not wait for workers
 * that have not woken up yet (on a loaded machine one may not run for a
 * while): once every chunk is taken it closes the job and waits only for
 * the workers that joined it to finish their chunks; a worker that wakes
 * after that leaves the job alone. Which thread computes a chunk varies
 * from run to run; what a chunk computes does not, since kernels split by
 * output elements.
 *
 * The thread count is OGSH_THREADS or the cores this process may run on,
 * until cpu_set_threads changes it (which stops the pool; the next call
 * starts it at the new size). The pool is stopped and joined at exit.
 */
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/pool.h"
#include "kernels/kernels.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define POOL_MAX_THREADS 1024
#define POOL_CHUNKS_PER_THREAD 4 /* chunks per thread, so a slow thread holds the rest up less */
/* Pauses a worker spins for the next job before it sleeps, and the caller
 * for the workers' last chunks before it sleeps (a few tens of
 * microseconds): a model's kernels follow each other closely, and waking
 * a sleeping thread costs about as long as a small kernel. */
#define POOL_SPIN 4000

static inline void pool_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

struct pool_job {
	cpu_range_fn fn;
	void *ctx;
	int64_t n, chunk, n_chunks;
	atomic_llong next; /* the next chunk to take */
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_work = PTHREAD_COND_INITIALIZER; /* a new job, or stop */
static pthread_cond_t pool_done = PTHREAD_COND_INITIALIZER; /* the last worker checked in */
static pthread_t *pool_tids;    /* n_started - 1 worker threads */
static int n_started;           /* threads of the running pool, the caller counted; 0: not started */
static int n_wanted;            /* the thread count; 0: not decided yet */
static _Atomic uint64_t pool_gen; /* bumped for each job (under pool_mu; read outside it by spinning workers) */
static uint64_t pool_start_gen; /* pool_gen when the workers were started */
static _Atomic int pool_active; /* workers that joined the current job and are not done (changed under pool_mu) */
static bool pool_open;          /* the current job may still be joined */
static bool pool_stopping;
static bool pool_busy;          /* a job is running (a second caller runs serially) */
static bool pool_atexit;
static struct pool_job pool_job;

static _Atomic int64_t grain_cap;   /* cpu_set_grain_cap; 0: none */
static _Thread_local bool tl_inside; /* this thread is running a range */
static _Thread_local int tl_worker;

int cpu_machine_cores(void)
{
	cpu_set_t set;
	int n = 0;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	if (n < 1) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (int)c : 1;
	}
	return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n;
}

/* OGSH_THREADS when it is a whole number >= 1, else 0. */
static int env_threads(void)
{
	const char *s = getenv("OGSH_THREADS");
	char *end;
	long v;
	if (!s || !*s)
		return 0;
	v = strtol(s, &end, 10);
	if (*end || v < 1)
		return 0;
	return v > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)v;
}

bool cpu_threads_env_ok(void)
{
	const char *s = getenv("OGSH_THREADS");
	return !s || !*s || env_threads() > 0;
}

int cpu_default_threads(void)
{
	int n = env_threads();
	return n > 0 ? n : cpu_machine_cores();
}

int cpu_threads(void)
{
	int n;
	pthread_mutex_lock(&pool_mu);
	if (!n_wanted)
		n_wanted = cpu_default_threads();
	n = n_wanted;
	pthread_mutex_unlock(&pool_mu);
	return n;
}

/* Takes chunks of the current job until none is left. */
static void pool_take(struct pool_job *j, int worker)
{
	for (;;) {
		int64_t c = atomic_fetch_add(&j->next, 1);
		int64_t b, e;
		if (c >= j->n_chunks)
			break;
		b = c * j->chunk;
		e = b + j->chunk < j->n ? b + j->chunk : j->n;
		j->fn(j->ctx, b, e, worker);
	}
}

static void *pool_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t seen = 0;
	tl_inside = true;
	tl_worker = id;
	pthread_mutex_lock(&pool_mu);
	seen = pool_start_gen;
	for (;;) {
		while (!pool_stopping && pool_gen == seen)
			pthread_cond_wait(&pool_work, &pool_mu);
		if (pool_stopping)
			break;
		seen = pool_gen;
		if (!pool_open)
			continue;   /* woke too late: the caller finished the job */
		pool_active++;
		pthread_mutex_unlock(&pool_mu);
		pool_take(&pool_job, id);
		pthread_mutex_lock(&pool_mu);
		if (--pool_active == 0)
			pthread_cond_signal(&pool_done);
		/* the next job usually comes soon: watch for it awhile */
		pthread_mutex_unlock(&pool_mu);
		for (int i = 0; i < POOL_SPIN && atomic_load(&pool_gen) == seen; i++)
			pool_pause();
		pthread_mutex_lock(&pool_mu);
	}
	pthread_mutex_unlock(&pool_mu);
	cpu_sgemm_thread_done();   /* this thread's GEMM packing buffer */
	cpu_conv_thread_done();    /* and im2col segment lists */
	return NULL;
}

/* Stops and joins the workers; called with pool_mu held, no job running. */
static void pool_stop_locked(void)
{
	int i, n = n_started - 1;
	if (n_started <= 1) {
		n_started = 0;
		return;
	}
	pool_stopping = true;
	pthread_cond_broadcast(&pool_work);
	pthread_mutex_unlock(&pool_mu);
	for (i = 0; i < n; i++)
		pthread_join(pool_tids[i], NULL);
	pthread_mutex_lock(&pool_mu);
	free(pool_tids);
	pool_tids = NULL;
	n_started = 0;
	pool_stopping = false;
}

void cpu_pool_stop(void)
{
	pthread_mutex_lock(&pool_mu);
	if (!pool_busy)
		pool_stop_locked();
	pthread_mutex_unlock(&pool_mu);
}

static void pool_at_exit(void)
{
	cpu_pool_stop();
}

/* fork: the child has only the forking thread, so it forgets the workers
 * (it starts its own on its first parallel kernel) */
static void pool_fork_prepare(void)
{
	pthread_mutex_lock(&pool_mu);
}

static void pool_fork_parent(void)
{
	pthread_mutex_unlock(&pool_mu);
}

static void pool_fork_child(void)
{
	free(pool_tids);
	pool_tids = NULL;
	n_started = 0;
	pool_busy = false;
	pool_open = false;
	pool_active = 0;
	pthread_mutex_unlock(&pool_mu);
}

/* Starts n_wanted - 1 workers; called with pool_mu held. On failure the
 * pool runs with the threads it got (1: everything inline). */
static void pool_start_locked(void)
{
	int i, n = n_wanted - 1;
	if (!pool_atexit) {
		atexit(pool_at_exit);
		pthread_atfork(pool_fork_prepare, pool_fork_parent, pool_fork_child);
		pool_atexit = true;
	}
	n_started = 1;
	pool_start_gen = pool_gen;
	if (n < 1)
		return;
	pool_tids = calloc((size_t)n, sizeof *pool_tids);
	if (!pool_tids)
		return;
	for (i = 0; i < n; i++) {
		if (pthread_create(&pool_tids[i], NULL, pool_main, (void *)(intptr_t)(i + 1)) != 0)
			break;
		n_started++;
	}
}

int cpu_set_threads(int n)
{
	if (n < 0)
		return IR_ERR;
	pthread_mutex_lock(&pool_mu);
	if (pool_busy) {
		pthread_mutex_unlock(&pool_mu);
		return IR_ERR;
	}
	if (n == 0)
		n = cpu_default_threads();
	if (n > POOL_MAX_THREADS)
		n = POOL_MAX_THREADS;
	if (n != n_wanted) {
		pool_stop_locked();
		n_wanted = n;
	}
	pthread_mutex_unlock(&pool_mu);
	return 0;
}

void cpu_set_grain_cap(int64_t cap)
{
	atomic_store(&grain_cap, cap > 0 ? cap : 0);
}

void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx)
{
	int64_t n_chunks, chunk, most, cap = atomic_load(&grain_cap);
	int threads;
	if (n <= 0)
		return;
	if (cap && grain > cap)
		grain = cap;
	if (grain < 1)
		grain = 1;
	if (tl_inside || n <= grain) {
		fn(ctx, 0, n, tl_inside ? tl_worker : 0);
		return;
	}
	pthread_mutex_lock(&pool_mu);
	if (!n_wanted)
		n_wanted = cpu_default_threads();
	if (pool_busy || n_wanted <= 1) {
		pthread_mutex_unlock(&pool_mu);
		fn(ctx, 0, n, 0);
		return;
	}
	if (!n_started)
		pool_start_locked();
	threads = n_started;
	if (threads <= 1) {
		pthread_mutex_unlock(&pool_mu);
		fn(ctx, 0, n, 0);
		return;
	}
	/* chunks of at least grain, about POOL_CHUNKS_PER_THREAD a thread */
	most = n / grain;
	n_chunks = (int64_t)threads * POOL_CHUNKS_PER_THREAD;
	if (n_chunks > most)
		n_chunks = most;
	chunk = (n + n_chunks - 1) / n_chunks;
	n_chunks = (n + chunk - 1) / chunk;
	pool_job.fn = fn;
	pool_job.ctx = ctx;
	pool_job.n = n;
	pool_job.chunk = chunk;
	pool_job.n_chunks = n_chunks;
	atomic_store(&pool_job.next, 0);
	pool_busy = true;
	pool_open = true;
	pool_gen++;
	pthread_cond_broadcast(&pool_work);
	pthread_mutex_unlock(&pool_mu);

	tl_inside = true;
	tl_worker = 0;
	pool_take(&pool_job, 0);
	tl_inside = false;
	/* the workers' last chunks are usually short */
	for (int i = 0; i < POOL_SPIN && atomic_load(&pool_active) > 0; i++)
		pool_pause();

	pthread_mutex_lock(&pool_mu);
	pool_open = false;
	while (pool_active > 0)
		pthread_cond_wait(&pool_done, &pool_mu);
	pool_busy = false;
	pthread_mutex_unlock(&pool_mu);
}
