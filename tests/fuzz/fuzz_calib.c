/*
 * fuzz_calib.c - libFuzzer target for the calibration cache parser.
 *
 * Every input is parsed from memory. A parse must either fail with one
 * line naming the line of the file and why (and leave the result empty),
 * or give statistics that hold together: every method's threshold is
 * finite and within [0, max |x|], the asymmetric range holds 0, the cache
 * written back parses to the same thing, a copy equals it, and streaming
 * more values into a loaded tensor keeps its histogram total equal to its
 * count. A broken invariant aborts, so it is reported like a crash.
 */
#include "ir/ir.h"
#include "ir_private.h"
#include "../unit/calib_equal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_calib: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	abort();
}

static void check_methods(const struct ir_calib_tensor *t)
{
	double mx = t->count ? fmax(fabs(t->min), fabs(t->max)) : 0;
	for (int m = 0; m < IR_CALIB_METHOD_COUNT; m++) {
		struct ir_calib_how h = { (enum ir_calib_method)m, m == IR_CALIB_PERCENTILE ? 99.9 : 0 };
		double T = ir_calib_amax(t, &h), lo, hi;
		if (!isfinite(T) || T < 0 || T > mx)
			die("a threshold outside [0, max |x|]", t->name);
		ir_calib_range(t, &h, &lo, &hi);
		if (!(lo <= 0 && hi >= 0 && isfinite(lo) && isfinite(hi)))
			die("an asymmetric range without 0", t->name);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_calib c;
	if (ir_calib_parse(data, size, "fuzz.cache", &c, &d)) {
		if (!d.error || strncmp(d.error, "fuzz.cache: line ", 17))
			die("a refusal without its line", d.error);
		if (strchr(d.error, '\n'))
			die("a refusal on more than one line", d.error);
		if (c.n || c.t)
			die("a refusal left tensors", d.error);
		ir_diag_clear(&d);
		return 0;
	}
	if (d.error)
		die("a parse succeeded but left an error", d.error);
	for (int i = 0; i < c.n; i++)
		check_methods(&c.t[i]);

	/* written back, it reads the same */
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		die("open_memstream failed", NULL);
	ir_calib_write(f, &c);
	fclose(f);
	struct ir_calib back;
	if (ir_calib_parse(buf, n, "written.cache", &back, &d))
		die("the written cache does not parse", d.error);
	if (!calib_equal(&c, &back))
		die("the written cache reads back different", NULL);
	ir_calib_clear(&back);
	free(buf);
	struct ir_calib cp;
	if (ir_calib_copy(&cp, &c) == 0) {
		if (!calib_equal(&c, &cp))
			die("a copy differs", NULL);
		ir_calib_clear(&cp);
	}

	/* streaming on top of whatever was loaded */
	static const float more[8] = { 0.0f, 1e30f, -3.5f, NAN, 1e-30f, -INFINITY, 2.0f, -0.0f };
	for (int i = 0; i < c.n; i++) {
		struct ir_calib_tensor *t = &c.t[i];
		int n_more = (i & 1) ? 4 : 8;
		int nc = t->n_chan > 0 && n_more % t->n_chan == 0 ? t->n_chan : 0;
		if (ir_calib_observe(t, more + (i & 1), (uint64_t)n_more, nc, &d))
			die("observe failed on a loaded tensor", d.error);
		uint64_t total = 0;
		for (int k = 0; k < IR_CALIB_BINS; k++)
			total += t->hist[k];
		if (total != t->count)
			die("the histogram total differs from the count after observe", t->name);
		check_methods(t);
	}
	ir_calib_clear(&c);
	ir_diag_clear(&d);
	return 0;
}
