/*
 * pool.h - private to kernels/cpu/: the CPU kernels' thread pool.
 *
 * A kernel splits its work by OUTPUT elements (rows, channels, tiles of
 * the output) and hands the ranges to cpu_parallel_for; each output
 * element is computed by exactly one call, in the same order of
 * arithmetic whatever the thread count, so results are bit-identical with
 * 1 and N threads. Never split a reduction (a sum, a max, a K loop) across
 * calls and combine the parts.
 */
#ifndef OGSH_KERNELS_CPU_POOL_H
#define OGSH_KERNELS_CPU_POOL_H

#include <stdbool.h>
#include <stdint.h>

/* fn computes the indexes [begin, end) of the work; `worker` is in
 * [0, cpu_threads()) and unique among the calls running at once (for
 * per-thread scratch space). */
typedef void (*cpu_range_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/*
 * Runs fn over [0, n) in contiguous ranges of at least `grain` indexes
 * (grain < 1 counts as 1), on the pool's threads and the calling one, and
 * returns when every range is done. With one thread, or n <= grain, it is
 * a plain call fn(ctx, 0, n, 0). Calls from inside fn run serially.
 */
void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);

/* The number of threads cpu_parallel_for uses (>= 1). */
int cpu_threads(void);

/* Whether this thread is running a range of cpu_parallel_for (so a
 * cpu_parallel_for it calls runs serially). */
bool cpu_parallel_inside(void);

#endif
