/*
 * pool.c - the CPU kernels' thread pool (see pool.h).
 *
 * This first version runs every range on the calling thread.
 */
#include "kernels/cpu/pool.h"

void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx)
{
	(void)grain;
	if (n > 0)
		fn(ctx, 0, n, 0);
}

int cpu_threads(void)
{
	return 1;
}
