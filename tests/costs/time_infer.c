/*
 * time_infer.c - times ir_infer (and ir_stats_new) on a model: the
 * benchmark of bench/RESULTS.md "Issue 3". Not a test; built with them.
 *
 *   time_infer MODEL [RUNS]
 *
 * Loads MODEL once, then RUNS times (default 7): forgets the inferred
 * shapes, runs ir_infer, then ir_stats_new; prints each run's wall times
 * (CLOCK_MONOTONIC) and the median and minimum of each.
 */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: time_infer MODEL [RUNS]\n");
		return 2;
	}
	int runs = argc > 2 ? atoi(argv[2]) : 7;
	if (runs < 1 || runs > 1000)
		runs = 7;
	struct ir_diag d;
	ir_diag_init(&d);
	double t0 = now();
	struct ir_model *m = ir_model_load(argv[1], NULL, &d);
	double t_load = now() - t0;
	if (!m) {
		fprintf(stderr, "time_infer: %s\n", d.error ? d.error : "cannot load");
		return 1;
	}
	struct ir_graph_totals tot;
	ir_graph_totals(m->graph, &tot);
	printf("%s: %d nodes, %zu values; load %.3f s\n", argv[1], tot.n_nodes, m->graph->n_values, t_load);
	double *ti = calloc((size_t)runs, sizeof(double)), *ts = calloc((size_t)runs, sizeof(double));
	if (!ti || !ts)
		return 1;
	int unknown = 0;
	for (int r = 0; r < runs; r++) {
		ir_infer_clear(m->graph);
		ir_diag_clear(&d);
		t0 = now();
		if (ir_infer(m, &d)) {
			fprintf(stderr, "time_infer: %s\n", d.error);
			return 1;
		}
		ti[r] = now() - t0;
		t0 = now();
		struct ir_stats *st = ir_stats_new(m, &d);
		ts[r] = now() - t0;
		if (!st) {
			fprintf(stderr, "time_infer: %s\n", d.error);
			return 1;
		}
		unknown = st->n_unknown;
		ir_stats_free(st);
		printf("run %d: ir_infer %.3f s, ir_stats_new %.3f s\n", r + 1, ti[r], ts[r]);
	}
	size_t uv = 0;
	for (size_t i = 0; i < m->graph->n_values; i++) {
		const struct ir_type *t = ir_value_type(m->graph->values[i]);
		bool ok = t->kind == IR_TYPE_TENSOR && t->rank >= 0 && t->elem;
		for (int k = 0; ok && k < t->rank; k++)
			ok = t->dims[k].kind != IR_DIM_UNKNOWN;
		uv += !ok;
	}
	qsort(ti, (size_t)runs, sizeof(double), cmp);
	qsort(ts, (size_t)runs, sizeof(double), cmp);
	printf("ir_infer: median %.3f s, min %.3f s (%d runs); %zu values not fully known\n", ti[runs / 2], ti[0], runs, uv);
	printf("ir_stats_new: median %.3f s, min %.3f s; %d nodes not counted\n", ts[runs / 2], ts[0], unknown);
	free(ti);
	free(ts);
	ir_diag_clear(&d);
	ir_model_free(m);
	return 0;
}
