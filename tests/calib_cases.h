/*
 * calib_cases.h - what the calibration tests share (tests/unit/
 * test_calib_parts.c, tests/gpu/test_calib_gpu.c): batches of test data
 * (zeros, random values with exact zeros, NaN and infinities, growing
 * ranges that make the histogram re-bin), the host reference of
 * ir_calib_observe in its parts (ir_calib_observe_stats, ir_calib_add_hist,
 * ir_calib_add_chan) and an exact comparison of two tensors' statistics.
 */
#ifndef OGSH_TESTS_CALIB_CASES_H
#define OGSH_TESTS_CALIB_CASES_H

#include "ir/ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t cc_rng = 0x2545F4914F6CDD1DULL;

static inline double cc_uniform(void)   /* [0, 1) */
{
	cc_rng ^= cc_rng >> 12;
	cc_rng ^= cc_rng << 25;
	cc_rng ^= cc_rng >> 27;
	return (double)((cc_rng * 0x2545F4914F6CDD1DULL) >> 11) * 0x1p-53;
}

static inline double cc_gauss(void)
{
	double u = cc_uniform(), v = cc_uniform();
	return sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

enum cc_kind {
	CC_ZEROS,      /* all zeros: no range yet, bin 0 */
	CC_NAN_NINF,   /* gaussian with 30% exact zeros, a NaN first and a -Inf in the middle (n >= 3) */
	CC_PINF,       /* gaussian with 30% zeros, +Inf last (n >= 3) */
	CC_FINITE,     /* gaussian, every element finite */
	CC_ALL_NAN,    /* nothing finite */
	CC_TINY,       /* values near 2^-70 (below the range's lower bound, 2^-64) and some float32 denormals */
};

/* The batches each case runs, in order: a first batch of zeros (no range
 * yet), then the range set, grown 10x (re-binning: pairs of bins merged
 * four times), a smaller batch (no change), 100x more (seven doublings),
 * and a batch with nothing finite. */
struct cc_step {
	enum cc_kind kind;
	double scale;
};
static const struct cc_step cc_steps[] = {
	{ CC_ZEROS, 0 }, { CC_NAN_NINF, 1 }, { CC_PINF, 10 }, { CC_FINITE, 0.01 }, { CC_PINF, 1000 }, { CC_ALL_NAN, 0 },
};
#define CC_N_STEPS ((int)(sizeof(cc_steps) / sizeof(cc_steps[0])))
/* float32 and bfloat16 also: values below the smallest range, then normal ones */
static const struct cc_step cc_tiny_steps[] = { { CC_TINY, 0 }, { CC_FINITE, 1e-20 }, { CC_FINITE, 1 } };
#define CC_N_TINY ((int)(sizeof(cc_tiny_steps) / sizeof(cc_tiny_steps[0])))

/* n float32 values of one kind, scaled by `scale`. */
static inline void cc_batch(float *x, uint64_t n, enum cc_kind kind, double scale)
{
	for (uint64_t i = 0; i < n; i++) {
		double g = cc_gauss() * scale;
		switch (kind) {
		case CC_ZEROS:
			x[i] = 0.0f;
			break;
		case CC_ALL_NAN:
			x[i] = NAN;
			break;
		case CC_TINY:
			x[i] = (float)(cc_gauss() * 0x1p-70);
			if (i % 7 == 3)
				x[i] = (float)(cc_gauss() * 0x1p-140);   /* a float32 denormal */
			break;
		case CC_FINITE:
			x[i] = (float)g;
			break;
		default:
			x[i] = cc_uniform() < 0.3 ? 0.0f : (float)g;
			break;
		}
	}
	if (n >= 3 && kind == CC_NAN_NINF) {
		x[0] = NAN;
		x[n / 2] = -INFINITY;
	}
	if (n >= 3 && kind == CC_PINF)
		x[n - 1] = INFINITY;
}

/* x rounded to dtype (float, float16, bfloat16): the stored bits into raw
 * (n elements of that type), the values they hold back into x. */
static inline void cc_round(float *x, uint64_t n, int dtype, void *raw)
{
	for (uint64_t i = 0; i < n; i++) {
		if (dtype == IR_FLOAT16) {
			uint16_t h = ir_f32_to_f16(x[i]);
			((uint16_t *)raw)[i] = h;
			x[i] = ir_f16_to_f32(h);
		} else if (dtype == IR_BFLOAT16) {
			uint16_t h = ir_f32_to_bf16(x[i]);
			((uint16_t *)raw)[i] = h;
			x[i] = ir_bf16_to_f32(h);
		} else {
			((float *)raw)[i] = x[i];
		}
	}
}

static inline int cc_nonfinite(float v)
{
	uint32_t u;
	memcpy(&u, &v, sizeof(u));
	return (u & 0x7f800000u) == 0x7f800000u;
}

/*
 * ir_calib_observe done with its parts and plain loops, written from the
 * documented formulas (ir.h): the reference a device or any other
 * implementation of the parts is held to. Channel sums in double, row by
 * row, from zero for the batch, then added. 0 or the error code.
 */
static inline int cc_observe_parts(struct ir_calib_tensor *t, const float *x, uint64_t n, int n_chan,
				   struct ir_diag *d)
{
	uint64_t nonfinite = 0;
	float mn = INFINITY, mx = -INFINITY;
	for (uint64_t i = 0; i < n; i++) {
		if (cc_nonfinite(x[i])) {
			nonfinite++;
			continue;
		}
		mn = x[i] < mn ? x[i] : mn;
		mx = x[i] > mx ? x[i] : mx;
	}
	int rc = ir_calib_observe_stats(t, n, n_chan, nonfinite, mn, mx, d);
	if (rc || n == 0)
		return rc;
	uint64_t *bins = calloc(IR_CALIB_BINS, sizeof(*bins));
	if (!bins)
		return IR_ENOMEM;
	float scale = ir_calib_hist_scale(t);
	for (uint64_t i = 0; i < n; i++) {
		if (cc_nonfinite(x[i]))
			continue;
		uint32_t k = (uint32_t)(fabsf(x[i]) * scale);
		bins[k < IR_CALIB_BINS ? k : IR_CALIB_BINS - 1]++;
	}
	ir_calib_add_hist(t, bins);
	free(bins);
	if (n_chan > 0) {
		double *s = calloc((size_t)n_chan, sizeof(double));
		if (!s)
			return IR_ENOMEM;
		uint64_t rows = n / (uint64_t)n_chan;
		for (uint64_t r = 0; r < rows; r++)
			for (int c = 0; c < n_chan; c++) {
				float v = x[r * (uint64_t)n_chan + (uint64_t)c];
				if (!cc_nonfinite(v))
					s[c] += fabsf(v);
			}
		ir_calib_add_chan(t, s, rows);
		free(s);
	}
	return 0;
}

/* Prints and counts the differences of `got` from `want`: everything
 * exact (counts, min, max, ema, the range, every bin), the channel sums
 * within `rel` of each other (relative to the sum). */
static inline int cc_compare(const char *what, const struct ir_calib_tensor *want, const struct ir_calib_tensor *got,
			     double rel)
{
	int bad = 0;
#define CC_EQ(f, fmt)                                                                                              \
	do {                                                                                                       \
		if (!(want->f == got->f)) {                                                                        \
			if (bad++ < 8)                                                                             \
				fprintf(stderr, "%s: " #f " " fmt ", expected " fmt "\n", what, got->f, want->f);  \
		}                                                                                                  \
	} while (0)
	CC_EQ(count, "%" PRIu64);
	CC_EQ(n_nonfinite, "%" PRIu64);
	CC_EQ(batches, "%" PRIu64);
	CC_EQ(min, "%.17g");
	CC_EQ(max, "%.17g");
	CC_EQ(ema_min, "%.17g");
	CC_EQ(ema_max, "%.17g");
	CC_EQ(hist_max, "%.17g");
	CC_EQ(n_chan, "%d");
	CC_EQ(chan_rows, "%" PRIu64);
#undef CC_EQ
	if (!want->hist != !got->hist) {
		if (bad++ < 8)
			fprintf(stderr, "%s: histogram %s\n", what, got->hist ? "unexpected" : "missing");
	} else if (want->hist) {
		for (int i = 0; i < IR_CALIB_BINS; i++)
			if (want->hist[i] != got->hist[i] && bad++ < 8)
				fprintf(stderr, "%s: bin %d holds %llu, expected %llu\n", what, i,
					(unsigned long long)got->hist[i], (unsigned long long)want->hist[i]);
	}
	if (want->n_chan == got->n_chan && want->n_chan > 0 && want->chan_abssum && got->chan_abssum) {
		for (int c = 0; c < want->n_chan; c++) {
			double a = want->chan_abssum[c], b = got->chan_abssum[c];
			if (!(fabs(a - b) <= rel * fabs(a)) && bad++ < 8)
				fprintf(stderr, "%s: channel %d sum %.17g, expected %.17g\n", what, c, b, a);
		}
	}
	return bad;
}

#endif
