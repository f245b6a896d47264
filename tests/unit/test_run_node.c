/*
 * test_run_node.c - one node with subgraphs run alone on the CPU reference
 * (exec_run_node, what the GPU planner does with If, Loop and Scan) against
 * the whole model's CPU run, and the layout rules' refusal of such a node
 * (exec_layout_refuse) reaching its implicit inputs.
 *
 *   test_run_node MODEL.onnx...   (tests/unit/subgraph_*.onnx, from make_subgraph_nodes.py)
 */
#include "exec/exec.h"
#include "exec/exec_private.h"
#include "exec/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

static bool has_subgraphs(const struct ir_node *n)
{
	for (int a = 0; a < n->n_attrs; a++)
		if (n->attrs[a].type == IR_ATTR_GRAPH || n->attrs[a].type == IR_ATTR_GRAPHS)
			return true;
	return false;
}

/* The value of v in the reference run: an input, an initializer, or a node's output. */
static struct kern_value ref_value(const struct exec_values *in, const struct exec_values *all, const struct ir_value *v)
{
	struct kern_value kv = { 0 };
	const struct kern_value *f = exec_values_find(all, v->name);
	if (!f)
		f = exec_values_find(in, v->name);
	if (f)
		return *f;
	if (v->init) {
		kv.kind = KV_TENSOR;
		kv.t = v->init;
	}
	return kv;
}

static bool same(const struct kern_value *a, const struct kern_value *b)
{
	return a->kind == KV_TENSOR && b->kind == KV_TENSOR && a->t->dtype == b->t->dtype && a->t->nbytes == b->t->nbytes &&
	       a->t->rank == b->t->rank && !memcmp(ir_tensor_data(a->t), ir_tensor_data(b->t), a->t->nbytes);
}

static void test_model(const char *path)
{
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_model *m = ir_model_load(path, NULL, &d);
	CHECK(m != NULL);
	if (!m) {
		fprintf(stderr, "%s: %s\n", path, d.error ? d.error : "?");
		ir_diag_clear(&d);
		return;
	}
	CHECK(ir_infer(m, &d) == 0);
	struct exec_values in = { 0 }, out = { 0 }, all = { 0 };
	for (int i = 0; i < m->graph->n_inputs; i++) {
		const struct ir_value *v = m->graph->inputs[i];
		int64_t dims[IR_MAX_RANK];
		for (int k = 0; k < v->type.rank; k++)
			dims[k] = v->type.dims[k].value;
		struct ir_tensor *t = ir_tensor_new(v->type.elem, v->type.rank, dims, &d);
		CHECK(t && t->dtype == IR_FLOAT);
		float *x = ir_tensor_mutable(t);
		for (uint64_t k = 0; k < t->numel; k++)
			x[k] = (float)((k * 37) % 101) / 50.0f - 1.0f;
		CHECK(exec_values_add_tensor(&in, v->name, t) == 0);
		ir_tensor_unref(t);
	}
	struct exec_opts o = { .keep_all = true };
	CHECK(exec_run(m, &in, &o, &out, &all, NULL, &d) == 0);
	int tested = 0;
	ir_for_each_node(m->graph, n) {
		if (!has_subgraphs(n))
			continue;
		tested++;
		CHECK(n->n_implicit > 0 && n->n_inputs <= 8 && n->n_implicit <= 8 && n->n_outputs <= 8);
		struct kern_value kin[8], kimp[8], kout[8];
		for (int i = 0; i < n->n_inputs; i++)
			kin[i] = n->inputs[i] ? ref_value(&in, &all, n->inputs[i]) : (struct kern_value){ 0 };
		for (int i = 0; i < n->n_implicit; i++)
			kimp[i] = ref_value(&in, &all, n->implicit[i]);
		/* alone, with its implicit inputs: the same bytes as in the whole run */
		int rc = exec_run_node(m, n, kin, kimp, kout, &d);
		CHECK(rc == 0);
		if (rc)
			fprintf(stderr, "%s: n%d: %s\n", path, n->id, d.error ? d.error : "?");
		for (int i = 0; !rc && i < n->n_outputs; i++) {
			struct kern_value want = ref_value(&in, &all, n->outputs[i]);
			CHECK(same(&kout[i], &want));
			kern_value_clear(&kout[i]);
		}
		/* without a value its subgraph reads (not an initializer: those are
		 * read from the graph): an error naming it, not a crash */
		int miss = -1;
		for (int i = 0; i < n->n_implicit && miss < 0; i++)
			if (!n->implicit[i]->init)
				miss = i;
		CHECK(miss >= 0);
		if (miss >= 0) {
			struct kern_value keep = kimp[miss];
			kimp[miss] = (struct kern_value){ 0 };
			ir_diag_clear(&d);
			ir_diag_init(&d);
			rc = exec_run_node(m, n, kin, kimp, kout, &d);
			bool named = rc != 0 && d.error && strstr(d.error, n->implicit[miss]->name);
			CHECK(named);
			if (!named)
				fprintf(stderr, "%s: n%d without '%s': rc %d: %s\n", path, n->id, n->implicit[miss]->name, rc,
					d.error ? d.error : "");
			kimp[miss] = keep;
			ir_diag_clear(&d);
			ir_diag_init(&d);
		}
		/* a CPU node's refusal demotes its implicit inputs too (and reads nothing past its inputs) */
		struct layout_val *lv = calloc(m->graph->n_values, sizeof(*lv));
		CHECK(lv != NULL);
		for (size_t i = 0; lv && i < m->graph->n_values; i++)
			lv[i].nhwc = true;
		CHECK(lv && exec_layout_refuse(n, lv));
		for (int i = 0; lv && i < n->n_implicit; i++)
			CHECK(!lv[n->implicit[i]->idx].nhwc);
		free(lv);
	}
	CHECK(tested > 0);
	exec_values_clear(&in);
	exec_values_clear(&out);
	exec_values_clear(&all);
	ir_diag_clear(&d);
	ir_model_free(m);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_run_node MODEL.onnx...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		test_model(argv[i]);
	exec_cache_clear();
	printf("test_run_node: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
