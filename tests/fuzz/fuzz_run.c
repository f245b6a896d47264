/*
 * fuzz_run.c - libFuzzer target for the executor and the CPU kernels.
 *
 * Every input is loaded as a model; a model that loads is run on random
 * inputs (shapes from its declared inputs, symbolic dims 1) with bounds on
 * activation memory and on the nodes run, so a hostile model can make the
 * run fail but must not crash it, leak, or read out of bounds. Inputs whose
 * declared shapes are large, or whose cost model counts more than 2^22
 * FLOPs or has a node outside control flow whose cost it cannot count, are
 * skipped (memory and the nodes run are bounded anyway): the kernels are not on trial
 * for being slow on big tensors, and an instrumented build is slow.
 */
#include "exec/exec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Declared inputs of at most `max` elements each (symbolic/unknown dims as 1). */
static bool inputs_small(const struct ir_model *m, uint64_t max)
{
	const struct ir_graph *g = m->graph;
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_type *t = &g->inputs[i]->type;
		if (t->kind != IR_TYPE_TENSOR || t->rank < 0)
			continue;
		uint64_t n = 1;
		for (int j = 0; j < t->rank; j++) {
			int64_t dv = t->dims[j].kind == IR_DIM_VALUE ? t->dims[j].value : 1;
			if (dv < 0 || (dv && n > max / (uint64_t)dv))
				return false;
			n *= (uint64_t)dv;
		}
	}
	return true;
}

/* The FLOPs the cost model counts for the model (after inference; those it
 * can count), or -1 when inference fails. */
static double model_flops(struct ir_model *m)
{
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 1;
	double f = -1;
	if (!ir_infer(m, &d)) {
		struct ir_stats *st = ir_stats_new(m, &d);
		if (st)
			f = st->flops;   /* a lower bound when control flow's costs are not known */
		/* other nodes whose cost is not known could be heavy: skip */
		for (int i = 0; st && i < st->n_nodes; i++) {
			int op = st->nodes[i].op;
			if (!st->nodes[i].known &&
			    (op < 0 || !(ir_ops[op].flags & (IR_OPF_CONTROL | IR_OPF_SEQUENCE))))
				f = -1;
		}
		ir_stats_free(st);
	}
	ir_diag_clear(&d);
	return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 4;
	struct ir_model *m = ir_model_load_mem(data, size, "fuzz.onnx", NULL, NULL, &d);
	if (!m) {
		ir_diag_clear(&d);
		return 0;
	}
	struct exec_values in = { 0 }, out = { 0 };
	double flops;
	if (m->graph->n_nodes <= 64 && inputs_small(m, 1 << 16) && (flops = model_flops(m)) >= 0 &&
	    flops <= (double)(1 << 22) &&
	    !exec_random_inputs(m, 1, NULL, 0, NULL, &in, &d)) {
		struct exec_opts o = { .max_live = 64u << 20, .max_steps = 20000 };
		int rc = exec_run(m, &in, &o, &out, NULL, NULL, &d);
		if (rc && (!d.error || !*d.error)) {
			fprintf(stderr, "fuzz_run: a run failed without a message\n");
			abort();
		}
	}
	exec_values_clear(&in);
	exec_values_clear(&out);
	ir_model_free(m);
	ir_diag_clear(&d);
	return 0;
}
