/*
 * pool.c - the CPU kernels' thread pool (see pool.h).
 *
 * Persistent pthreads, started on the first cpu_parallel_for that needs
 * them: worker 0 is the calling thread, workers 1..T-1 wait for the next
 * job. A job is [0, n) cut into contiguous chunks of at least `grain`
 * indexes; every thread takes the next chunk from an atomic counter until
 * none is left. Which thread computes a chunk varies from run to run; what
 * a chunk computes does not, since kernels split by output elements.
 *
 * A model runs hundreds of jobs a second, many of them a few microseconds
 * long, so starting and ending one takes no lock: one atomic word
 * (pool_state) holds the job's generation, whether it may still be joined,
 * and how many workers are inside it. The caller publishes a job by
 * storing a new generation; a worker joins with a compare-and-swap that
 * counts it in, and leaves by counting itself out. Workers spin awhile
 * for the next generation before they sleep on a condition variable, and
 * the caller spins for the workers' last chunks before it sleeps; the
 * mutex is taken only to sleep or to wake a sleeper. The caller does not
 * wait for workers that have not woken yet (on a loaded machine one may
 * not run for a while): once every chunk is taken it closes the job and
 * waits only for the workers inside it; a worker that wakes after that
 * leaves the job alone.
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
#define POOL_FINE_PER_THREAD 16  /* up to this many grains a thread, a chunk each */
/* Pauses a worker spins for the next job before it sleeps, and the caller
 * for the workers' last chunks before it sleeps (a few tens of
 * microseconds): a model's kernels follow each other closely, and waking
 * a sleeping thread costs about as long as a small kernel. */
#define POOL_SPIN 4000

/* pool_state: generation << 32 | POOL_OPEN | workers inside the job */
#define POOL_OPEN ((uint64_t)1 << 31)
#define POOL_INSIDE ((uint64_t)POOL_OPEN - 1)
#define POOL_GEN(s) ((uint32_t)((s) >> 32))

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

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER; /* sleeping, waking, starting and stopping */
static pthread_cond_t pool_work = PTHREAD_COND_INITIALIZER; /* a new generation, or stop */
static pthread_cond_t pool_done = PTHREAD_COND_INITIALIZER; /* the last worker left a closed job */
static pthread_t *pool_tids;    /* n_started - 1 worker threads */
static _Atomic int n_started;   /* threads of the running pool, the caller counted; 0: not started */
static int n_wanted;            /* the thread count; 0: not decided yet (under pool_mu) */
static _Atomic uint64_t pool_state;
static uint32_t pool_start_gen;        /* the generation when the workers were started */
static _Atomic int pool_sleepers;      /* workers asleep on pool_work, or about to be */
static _Atomic bool pool_caller_waits; /* the caller sleeps on pool_done, or is about to */
static _Atomic bool pool_stopping;
static atomic_flag pool_busy = ATOMIC_FLAG_INIT; /* a job is running, or the pool is changing */
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

bool cpu_parallel_inside(void)
{
	return tl_inside;
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

/* Joins the job of generation gen if it is still open: true when this
 * worker was counted in. */
static bool pool_join(uint32_t gen)
{
	uint64_t s = atomic_load(&pool_state);
	while (POOL_GEN(s) == gen && (s & POOL_OPEN))
		if (atomic_compare_exchange_weak(&pool_state, &s, s + 1))
			return true;
	return false;
}

/* Leaves the job; the last worker out of a closed job wakes the caller
 * if it sleeps. */
static void pool_leave(void)
{
	uint64_t s = atomic_fetch_sub(&pool_state, 1) - 1;
	if ((s & POOL_INSIDE) == 0 && !(s & POOL_OPEN) && atomic_load(&pool_caller_waits)) {
		pthread_mutex_lock(&pool_mu);
		pthread_cond_signal(&pool_done);
		pthread_mutex_unlock(&pool_mu);
	}
}

static void *pool_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint32_t seen = pool_start_gen;
	tl_inside = true;
	tl_worker = id;
	for (;;) {
		uint64_t s = atomic_load(&pool_state);
		/* the next job usually comes soon: watch for it awhile */
		for (int i = 0; i < POOL_SPIN && POOL_GEN(s) == seen && !atomic_load(&pool_stopping); i++) {
			pool_pause();
			s = atomic_load(&pool_state);
		}
		if (POOL_GEN(s) == seen && !atomic_load(&pool_stopping)) {
			/* counted as a sleeper before the last look, so a caller
			 * that publishes after it sees the count and wakes us */
			pthread_mutex_lock(&pool_mu);
			atomic_fetch_add(&pool_sleepers, 1);
			while (POOL_GEN(atomic_load(&pool_state)) == seen && !atomic_load(&pool_stopping))
				pthread_cond_wait(&pool_work, &pool_mu);
			atomic_fetch_sub(&pool_sleepers, 1);
			pthread_mutex_unlock(&pool_mu);
			continue;
		}
		if (atomic_load(&pool_stopping))
			break;
		seen = POOL_GEN(s);
		if (!pool_join(seen))
			continue;   /* woke too late: the caller finished the job */
		pool_take(&pool_job, id);
		pool_leave();
	}
	cpu_sgemm_thread_done();   /* this thread's GEMM packing buffer */
	cpu_conv_thread_done();    /* and im2col segment lists */
	return NULL;
}

/* Stops and joins the workers; called with pool_mu and pool_busy held. */
static void pool_stop_locked(void)
{
	int i, n = atomic_load(&n_started) - 1;
	if (n < 1) {
		atomic_store(&n_started, 0);
		return;
	}
	atomic_store(&pool_stopping, true);
	pthread_cond_broadcast(&pool_work);
	pthread_mutex_unlock(&pool_mu);
	for (i = 0; i < n; i++)
		pthread_join(pool_tids[i], NULL);
	pthread_mutex_lock(&pool_mu);
	free(pool_tids);
	pool_tids = NULL;
	atomic_store(&n_started, 0);
	atomic_store(&pool_stopping, false);
}

void cpu_pool_stop(void)
{
	if (atomic_flag_test_and_set(&pool_busy))
		return;   /* a job is running: it stays */
	pthread_mutex_lock(&pool_mu);
	pool_stop_locked();
	pthread_mutex_unlock(&pool_mu);
	atomic_flag_clear(&pool_busy);
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
	atomic_store(&n_started, 0);
	atomic_flag_clear(&pool_busy);
	atomic_store(&pool_state, atomic_load(&pool_state) & ~(POOL_OPEN | POOL_INSIDE));
	atomic_store(&pool_sleepers, 0);
	atomic_store(&pool_caller_waits, false);
	pthread_mutex_unlock(&pool_mu);
}

/* Starts n_wanted - 1 workers; called with pool_mu and pool_busy held. On
 * failure the pool runs with the threads it got (1: everything inline). */
static void pool_start_locked(void)
{
	int i, n = n_wanted - 1, started = 1;
	if (!pool_atexit) {
		atexit(pool_at_exit);
		pthread_atfork(pool_fork_prepare, pool_fork_parent, pool_fork_child);
		pool_atexit = true;
	}
	pool_start_gen = POOL_GEN(atomic_load(&pool_state));
	if (n >= 1 && (pool_tids = calloc((size_t)n, sizeof *pool_tids)))
		for (i = 0; i < n; i++) {
			if (pthread_create(&pool_tids[i], NULL, pool_main, (void *)(intptr_t)(i + 1)) != 0)
				break;
			started++;
		}
	atomic_store(&n_started, started);
}

int cpu_set_threads(int n)
{
	if (n < 0)
		return IR_ERR;
	if (atomic_flag_test_and_set(&pool_busy))
		return IR_ERR;
	pthread_mutex_lock(&pool_mu);
	if (n == 0)
		n = cpu_default_threads();
	if (n > POOL_MAX_THREADS)
		n = POOL_MAX_THREADS;
	if (n != n_wanted) {
		pool_stop_locked();
		n_wanted = n;
	}
	pthread_mutex_unlock(&pool_mu);
	atomic_flag_clear(&pool_busy);
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
	if (atomic_flag_test_and_set(&pool_busy)) {
		fn(ctx, 0, n, 0);   /* another thread's job is running */
		return;
	}
	threads = atomic_load(&n_started);
	if (!threads) {
		pthread_mutex_lock(&pool_mu);
		if (!n_wanted)
			n_wanted = cpu_default_threads();
		if (n_wanted > 1)
			pool_start_locked();
		pthread_mutex_unlock(&pool_mu);
		threads = atomic_load(&n_started);
	}
	if (threads <= 1) {
		atomic_flag_clear(&pool_busy);
		fn(ctx, 0, n, 0);
		return;
	}
	/* chunks of at least grain, about POOL_CHUNKS_PER_THREAD a thread;
	 * one grain each when that makes few (a kernel that cut its work
	 * into a few tasks a thread balanced them itself: merging them
	 * would unbalance them again) */
	most = n / grain;
	n_chunks = (int64_t)threads * POOL_CHUNKS_PER_THREAD;
	if (n_chunks > most || most <= (int64_t)threads * POOL_FINE_PER_THREAD)
		n_chunks = most;
	chunk = (n + n_chunks - 1) / n_chunks;
	n_chunks = (n + chunk - 1) / chunk;
	pool_job.fn = fn;
	pool_job.ctx = ctx;
	pool_job.n = n;
	pool_job.chunk = chunk;
	pool_job.n_chunks = n_chunks;
	atomic_store(&pool_job.next, 0);
	/* publish: a new generation, open, nobody inside */
	uint64_t gen = (uint64_t)(POOL_GEN(atomic_load(&pool_state)) + 1u);
	atomic_store(&pool_state, gen << 32 | POOL_OPEN);
	if (atomic_load(&pool_sleepers) > 0) {
		pthread_mutex_lock(&pool_mu);
		pthread_cond_broadcast(&pool_work);
		pthread_mutex_unlock(&pool_mu);
	}

	tl_inside = true;
	tl_worker = 0;
	pool_take(&pool_job, 0);
	tl_inside = false;

	/* close the job, then wait for the workers inside; their last
	 * chunks are usually short */
	uint64_t s = atomic_fetch_and(&pool_state, ~POOL_OPEN) & ~POOL_OPEN;
	for (int i = 0; i < POOL_SPIN && (s & POOL_INSIDE); i++) {
		pool_pause();
		s = atomic_load(&pool_state);
	}
	if (s & POOL_INSIDE) {
		pthread_mutex_lock(&pool_mu);
		atomic_store(&pool_caller_waits, true);
		while (atomic_load(&pool_state) & POOL_INSIDE)
			pthread_cond_wait(&pool_done, &pool_mu);
		atomic_store(&pool_caller_waits, false);
		pthread_mutex_unlock(&pool_mu);
	}
	atomic_flag_clear(&pool_busy);
}
