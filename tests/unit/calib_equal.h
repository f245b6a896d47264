/*
 * calib_equal.h - whether two calibrations hold the same statistics, field
 * for field (floats compared exactly: a saved and loaded cache must give
 * them back bit for bit), for the unit test (test_calib.c) and the cache
 * parser's fuzz target (tests/fuzz/fuzz_calib.c). A static function:
 * include it in one file per program.
 */
#ifndef OGSH_TEST_CALIB_EQUAL_H
#define OGSH_TEST_CALIB_EQUAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ir/ir.h"

static bool calib_equal(const struct ir_calib *a, const struct ir_calib *b)
{
	if (a->n != b->n || strcmp(a->model_hash, b->model_hash) || strcmp(a->data_hash, b->data_hash) ||
	    strcmp(a->data_desc, b->data_desc) || a->stage != b->stage || a->random != b->random ||
	    a->samples != b->samples || a->batch != b->batch)
		return false;
	for (int i = 0; i < a->n; i++) {
		const struct ir_calib_tensor *x = &a->t[i], *y = &b->t[i];
		if (strcmp(x->name, y->name) || x->count != y->count || x->n_nonfinite != y->n_nonfinite ||
		    x->min != y->min || x->max != y->max || x->ema_min != y->ema_min || x->ema_max != y->ema_max ||
		    x->batches != y->batches || x->hist_max != y->hist_max || x->n_chan != y->n_chan ||
		    x->chan_rows != y->chan_rows || memcmp(x->hist, y->hist, IR_CALIB_BINS * sizeof(uint64_t)))
			return false;
		for (int k = 0; k < x->n_chan; k++)
			if (x->chan_abssum[k] != y->chan_abssum[k])
				return false;
	}
	return true;
}

#endif
