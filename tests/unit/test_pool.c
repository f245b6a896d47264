/*
 * test_pool - the CPU kernels' thread pool (kernels/cpu/pool.c): every
 * index is run exactly once, worker numbers are in range and unique among
 * running calls, nested calls run serially, small jobs run inline, and the
 * thread count can change between calls.
 */
#include "kernels/cpu/pool.h"
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static bool capped;   /* cpu_set_grain_cap(1) is on */
#define CHECK(c)                                                             \
	do {                                                                 \
		if (!(c)) {                                                  \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                          \
		}                                                            \
	} while (0)

struct job {
	int64_t n;
	atomic_int *hits;
	atomic_int busy[64];    /* ranges running at once per worker */
	atomic_int bad_worker, overlap, calls, nested_bad;
	int64_t grain;
	bool nest;
};

static void inner_fn(void *ctx, int64_t b, int64_t e, int worker)
{
	struct job *j = ctx;
	(void)worker;
	/* a nested call is one plain call over everything */
	if (b != 0 || e != 10)
		atomic_fetch_add(&j->nested_bad, 1);
}

static void fn(void *ctx, int64_t b, int64_t e, int worker)
{
	struct job *j = ctx;
	atomic_fetch_add(&j->calls, 1);
	if (worker < 0 || worker >= cpu_threads() || worker >= 64) {
		atomic_fetch_add(&j->bad_worker, 1);
		return;
	}
	if (atomic_fetch_add(&j->busy[worker], 1) != 0)
		atomic_fetch_add(&j->overlap, 1);
	if (e - b < j->grain && e != j->n)
		atomic_fetch_add(&j->bad_worker, 1);   /* a range below the grain (the last may be) */
	for (int64_t i = b; i < e; i++)
		atomic_fetch_add(&j->hits[i], 1);
	if (j->nest)
		cpu_parallel_for(10, 1, inner_fn, j);
	atomic_fetch_sub(&j->busy[worker], 1);
}

static void run(int64_t n, int64_t grain, bool nest)
{
	struct job *j = calloc(1, sizeof(*j));
	j->hits = calloc((size_t)(n ? n : 1), sizeof(atomic_int));
	j->n = n;
	j->grain = capped ? 1 : grain;
	j->nest = nest;
	cpu_parallel_for(n, grain, fn, j);
	for (int64_t i = 0; i < n; i++)
		if (atomic_load(&j->hits[i]) != 1) {
			fprintf(stderr, "n %lld grain %lld: index %lld run %d times\n", (long long)n, (long long)grain,
				(long long)i, atomic_load(&j->hits[i]));
			failures++;
			break;
		}
	CHECK(atomic_load(&j->bad_worker) == 0);
	CHECK(atomic_load(&j->overlap) == 0);
	CHECK(atomic_load(&j->nested_bad) == 0);
	if (n > 0 && (n <= j->grain || cpu_threads() == 1))
		CHECK(atomic_load(&j->calls) == 1);
	if (n == 0)
		CHECK(atomic_load(&j->calls) == 0);
	free(j->hits);
	free(j);
}

int main(void)
{
	CHECK(cpu_threads() >= 1);
	CHECK(cpu_machine_cores() >= 1);
	CHECK(cpu_set_threads(-1) != 0);
	const int counts[] = { 1, 3, 8, 2, 5 };
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		CHECK(cpu_set_threads(counts[c]) == 0);
		CHECK(cpu_threads() == counts[c]);
		for (int rep = 0; rep < 50; rep++) {
			run(0, 1, false);
			run(1, 1, false);
			run(7, 16, false);
			run(1000, 1, false);
			run(1000, 64, true);
			run(100003, 1000, false);
		}
	}
	CHECK(cpu_set_threads(0) == 0);
	CHECK(cpu_threads() == cpu_default_threads());
	cpu_set_grain_cap(1);
	capped = true;
	run(100, 1000, false);   /* split although below the grain */
	capped = false;
	cpu_set_grain_cap(0);
	cpu_pool_stop();
	run(5000, 10, false);    /* starts again after a stop */
	cpu_pool_stop();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		printf("pool: ok\n");
	return failures ? 1 : 0;
}
