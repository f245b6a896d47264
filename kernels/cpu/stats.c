/*
 * stats.c - summary statistics of a tensor's elements (min, max, mean, std,
 * NaN/Inf/zero counts), with a fast path for float32.
 */
#include "kernels/kernels.h"

#include "ir/ir.h"

#include <math.h>
#include <string.h>

struct acc {
	uint64_t finite;
	double mean, m2;   /* Welford */
};

static inline void add(struct kern_stats *st, struct acc *a, double v)
{
	if (isnan(v)) {
		st->nan++;
		return;
	}
	if (isinf(v)) {
		st->inf++;
		return;
	}
	if (v == 0)
		st->zeros++;
	if (a->finite == 0 || v < st->min)
		st->min = v;
	if (a->finite == 0 || v > st->max)
		st->max = v;
	if (fabs(v) > st->abs_max)
		st->abs_max = fabs(v);
	a->finite++;
	double d = v - a->mean;
	a->mean += d / (double)a->finite;
	a->m2 += d * (v - a->mean);
}

bool cpu_stats(int dtype, const void *data, uint64_t n, struct kern_stats *st)
{
	memset(st, 0, sizeof(*st));
	struct acc a = { 0 };
	bool done = true;
	const unsigned char *p = data;
	for (uint64_t i = 0; i < n; i++) {
		if ((i & 0xfffff) == 0xfffff && ir_interrupted) {
			done = false;
			break;
		}
		double v;
		if (dtype == IR_FLOAT) {
			float f;
			memcpy(&f, p + 4 * i, 4);
			v = f;
		} else {
			v = ir_elem_to_f64(dtype, data, i);
		}
		add(st, &a, v);
		st->count++;
	}
	if (a.finite) {
		st->mean = a.mean;
		st->std = sqrt(a.m2 / (double)a.finite);
	} else {
		st->min = st->max = st->mean = st->std = NAN;
	}
	return done;
}
