/*
 * fuzz_load.c - libFuzzer target for the ONNX loader.
 *
 * Every input is loaded from memory. A load must either fail with one
 * message in the diag, or give a model that passes ir_model_verify, clones,
 * and whose clone verifies too. Loaded models then go through shape
 * inference and the cost model (what `shapes` and `stats` do), which must
 * neither crash nor break the graph. Crashes, leaks (LeakSanitizer) and
 * sanitizer reports are what the fuzzer looks for; a broken invariant is
 * turned into an abort so that it is reported the same way.
 */
#include "ir/ir.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const struct ir_diag *d)
{
	fprintf(stderr, "fuzz_load: %s: %s\n", what, d && d->error ? d->error : "(no message)");
	abort();
}

/* What `info` and the listings read: every attribute and type printed, constants looked up. */
static int touch_graph(struct ir_graph *g, void *arg)
{
	char buf[512];
	size_t *sum = arg;
	for (size_t i = 0; i < g->n_values; i++) {
		const struct ir_value *v = g->values[i];
		*sum += strlen(ir_type_str(&v->type, buf, sizeof(buf)));
		const struct ir_tensor *t = ir_value_const(v);
		if (t && t->numel && t->dtype != IR_STRING)
			*sum += ir_tensor_get_f64(t, t->numel - 1) != 0.0;
	}
	ir_for_each_node(g, n)
		for (int i = 0; i < n->n_attrs; i++)
			*sum += strlen(ir_attr_str(&n->attrs[i], buf, sizeof(buf)));
	return 0;
}

static void touch_model(struct ir_model *m)
{
	size_t sum = 0;
	struct ir_graph_totals t;
	ir_graph_totals(m->graph, &t);
	ir_graph_walk(m->graph, touch_graph, &sum);
	for (size_t i = 0; i < m->n_functions; i++)
		if (m->functions[i].body)
			ir_graph_walk(m->functions[i].body, touch_graph, &sum);
	if (sum == 1)   /* keeps the calls from being optimized away */
		fprintf(stderr, "%zu\n", sum + (size_t)t.n_params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ir_diag d;
	ir_diag_init(&d);
	d.max_warnings = 4;
	struct ir_model *m = ir_model_load_mem(data, size, "fuzz.onnx", NULL, NULL, &d);
	if (!m) {
		/* a failed load says why, once */
		if (!d.error || !*d.error)
			die("the load failed without a message", &d);
		ir_diag_clear(&d);
		return 0;
	}
	if (d.error)
		die("the load succeeded but left an error", &d);
	if (ir_model_verify(m, &d))
		die("a loaded model does not verify", &d);
	touch_model(m);
	/* shape inference and costs on whatever the file says */
	struct ir_diag id;
	ir_diag_init(&id);
	id.max_warnings = 4;
	int rc = ir_infer(m, &id);
	if (rc && rc != IR_ENOMEM)
		die("shape inference failed", &id);
	ir_diag_clear(&id);
	if (ir_model_verify(m, &d))
		die("shape inference broke the graph", &d);
	struct ir_stats *st = ir_stats_new(m, &id);
	ir_stats_free(st);
	ir_diag_clear(&id);
	struct ir_model *c = ir_model_clone(m);
	if (c) {
		if (ir_model_verify(c, &d))
			die("a clone does not verify", &d);
		char why[256];
		if (!ir_model_equal(m, c, why, sizeof(why))) {
			fprintf(stderr, "fuzz_load: a clone differs from its model: %s\n", why);
			abort();
		}
		ir_model_free(c);
	}
	ir_model_free(m);
	ir_diag_clear(&d);
	return 0;
}
