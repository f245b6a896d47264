/*
 * test_calib_parts.c - ir_calib_observe against its parts
 * (ir_calib_observe_stats, ir_calib_hist_scale, ir_calib_add_hist,
 * ir_calib_add_chan; what the GPU's calibration uses) driven by the plain
 * loops of tests/calib_cases.h: the same statistics, bin for bin, on
 * sizes 1, 3 and 1000003, float32/float16/bfloat16 values, NaN and
 * infinities, first batches of zeros, ranges that grow (re-binning) and
 * per-channel sums; and the parts' own checks (bad channel counts leave
 * the tensor unchanged, a non-finite count above n is refused).
 */
#include "tests/calib_cases.h"

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* Runs `steps` on a tensor through ir_calib_observe and through the parts. */
static void run_case(const char *what, int dtype, uint64_t n, int n_chan, const struct cc_step *steps, int n_steps)
{
	float *x = malloc(n * sizeof(float));
	void *raw = malloc(n * sizeof(float));
	struct ir_calib c1, c2;
	ir_calib_init(&c1);
	ir_calib_init(&c2);
	struct ir_calib_tensor *a = ir_calib_add_tensor(&c1, what), *b = ir_calib_add_tensor(&c2, what);
	CHECK(x && raw && a && b);
	if (!x || !raw || !a || !b)
		goto out;
	for (int s = 0; s < n_steps; s++) {
		cc_batch(x, n, steps[s].kind, steps[s].scale);
		cc_round(x, n, dtype, raw);
		struct ir_diag d;
		ir_diag_init(&d);
		int r1 = ir_calib_observe(a, x, n, n_chan, &d);
		int r2 = cc_observe_parts(b, x, n, n_chan, &d);
		CHECK(r1 == 0 && r2 == 0);
		if (d.error)
			fprintf(stderr, "%s: %s\n", what, d.error);
		ir_diag_clear(&d);
	}
	char name[160];
	snprintf(name, sizeof(name), "%s (%s, %llu elements)", what, ir_dtype_name(dtype), (unsigned long long)n);
	checks++;
	if (cc_compare(name, a, b, 1e-12))
		failures++;
	/* the cases reach what they are meant to: a range, re-binned, NaN/Inf seen */
	if (n_steps == CC_N_STEPS) {
		CHECK(a->hist_max > 0);
		CHECK(a->n_nonfinite >= n);   /* the last batch is all NaN */
		CHECK(a->batches == (uint64_t)n_steps);
	}
out:
	ir_calib_clear(&c1);
	ir_calib_clear(&c2);
	free(x);
	free(raw);
}

static void parts_checks(void)
{
	struct ir_calib c;
	ir_calib_init(&c);
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "t");
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(ir_calib_hist_scale(t) == 0.0f);
	CHECK(ir_calib_observe_stats(t, 12, 4, 0, -1.5, 3.0, &d) == 0);
	CHECK(t->hist_max == 4.0 && ir_calib_hist_scale(t) == 512.0f);
	CHECK(t->n_chan == 4 && t->batches == 1 && t->count == 12);
	/* refused, and t is unchanged */
	CHECK(ir_calib_observe_stats(t, 12, 3, 0, 0, 9, &d) == IR_ERR);   /* 3 channels, earlier 4 */
	ir_diag_clear(&d);
	CHECK(ir_calib_observe_stats(t, 10, 4, 0, 0, 9, &d) == IR_ERR);   /* 10 elements are not rows of 4 */
	ir_diag_clear(&d);
	CHECK(ir_calib_observe_stats(t, 4, 4, 5, 0, 9, &d) == IR_ERR);    /* 5 non-finite of 4 */
	CHECK(d.error && strstr(d.error, "non-finite"));
	ir_diag_clear(&d);
	CHECK(t->batches == 1 && t->count == 12 && t->hist_max == 4.0 && t->max == 3.0);
	/* growing 2.5x: two doublings, bins merged by fours */
	uint64_t bins[IR_CALIB_BINS] = { 0 };
	bins[5] = 7;
	bins[2047] = 1;
	ir_calib_add_hist(t, bins);
	CHECK(ir_calib_observe_stats(t, 4, 4, 1, -10, 2, &d) == 0);
	CHECK(t->hist_max == 16.0 && t->hist[1] == 7 && t->hist[511] == 1 && t->hist[5] == 0);
	CHECK(t->count == 15 && t->n_nonfinite == 1 && t->min == -10 && t->max == 3.0);
	double s[4] = { 1, 2, 3, 4 };
	ir_calib_add_chan(t, s, 1);
	ir_calib_add_chan(t, s, 2);
	CHECK(t->chan_rows == 3 && t->chan_abssum[3] == 8);
	ir_diag_clear(&d);
	ir_calib_clear(&c);
}

int main(void)
{
	static const int dtypes[] = { IR_FLOAT, IR_FLOAT16, IR_BFLOAT16 };
	static const uint64_t sizes[] = { 1, 3, 1000003 };
	parts_checks();
	for (int di = 0; di < 3; di++) {
		for (int si = 0; si < 3; si++)
			run_case("flat", dtypes[di], sizes[si], sizes[si] == 3 ? 3 : 0, cc_steps, CC_N_STEPS);
		run_case("rows", dtypes[di], 4099 * 37, 37, cc_steps, CC_N_STEPS);
		if (dtypes[di] != IR_FLOAT16)
			run_case("tiny", dtypes[di], 1000003, 0, cc_tiny_steps, CC_N_TINY);
	}
	printf("test_calib_parts: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
