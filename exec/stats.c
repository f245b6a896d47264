/*
 * stats.c - tensor statistics for inspection, and the figures of timed runs.
 */
#include "exec/exec.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

int exec_tensor_stats(const struct ir_tensor *t, struct kern_stats *st, struct ir_diag *d)
{
	if (t->dtype == IR_STRING)
		return ir_diag_err(d, IR_ERR, "string tensors have no numeric statistics");
	if (ir_tensor_check(t, d))   /* a truncated mapped file would kill the process */
		return IR_ERR;
	if (!cpu_stats(t->dtype, ir_tensor_data(t), t->numel, st))
		return ir_diag_err(d, IR_EINTR, "interrupted after %llu of %llu elements",
				   (unsigned long long)st->count, (unsigned long long)t->numel);
	return 0;
}

double exec_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n sorted values, interpolated linearly. */
static double quantile(const double *sorted, int n, double q)
{
	if (n <= 0)
		return NAN;
	double r = q * (n - 1);
	int lo = (int)r, hi = lo + 1 < n ? lo + 1 : lo;
	return sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo);
}

double exec_median(double *v, int n)
{
	qsort(v, (size_t)(n > 0 ? n : 0), sizeof(double), cmp_double);
	return quantile(v, n, 0.5);
}

void exec_time_summary(double *ms, int n, struct exec_time_result *r)
{
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += ms[i];
	qsort(ms, (size_t)(n > 0 ? n : 0), sizeof(double), cmp_double);
	r->iters = n;
	r->median_ms = quantile(ms, n, 0.5);
	r->p90_ms = quantile(ms, n, 0.9);
	r->min_ms = n > 0 ? ms[0] : NAN;
	r->max_ms = n > 0 ? ms[n - 1] : NAN;
	r->mean_ms = n > 0 ? sum / n : NAN;
}
