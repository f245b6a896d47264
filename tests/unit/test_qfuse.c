/*
 * test_qfuse.c - the GPU planner's island rewriter (exec/qfuse.c) without a
 * GPU: on a QDQ model (argv[1]), with a device that takes every island and
 * with one that takes none.
 *
 * Checks: every Conv/Gemm/MatMul whose input is a DequantizeLinear of an
 * int8 activation becomes one island; the graph stays valid and sorted,
 * keeps its outputs, and holds no DequantizeLinear nobody reads; each
 * island names what it absorbed; refused islands leave the graph as it
 * was, with a reason for every activation Q/DQ; an asymmetric zero point
 * is refused with its reason. On argv[2] (onnxruntime's QDQ around a Relu,
 * tests/unit/make_qdq_relu.py): Q -> DQ -> Relu -> Q of one scale becomes
 * Relu -> Q (the Relu then in the island), of two scales it stays, and the
 * rewritten graph computes the very same outputs on the CPU.
 */
#include "exec/exec.h"
#include "exec/qfuse.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails, checks;

#define CHECK(c, ...)                                            \
	do {                                                     \
		checks++;                                        \
		if (!(c)) {                                      \
			fails++;                                 \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                     \
			printf("\n");                            \
		}                                                \
	} while (0)

static bool take_all(void *arg, const struct ir_model *m, const struct ir_node *n, char *why, size_t size)
{
	(void)m;
	(void)why;
	(void)size;
	int *seen = arg;
	(*seen)++;
	return n->op == IR_OP_ogsh_QConv || n->op == IR_OP_ogsh_QGemm || n->op == IR_OP_ogsh_MatMulW4;
}

static bool take_none(void *arg, const struct ir_model *m, const struct ir_node *n, char *why, size_t size)
{
	(void)arg;
	(void)m;
	(void)n;
	snprintf(why, size, "the test device refuses");
	return false;
}

static int count_op(const struct ir_graph *g, int op)
{
	int c = 0;
	for (const struct ir_node *n = g->first; n; n = n->next)
		c += n->op == op;
	return c;
}

/* Conv/Gemm/MatMul reading a DQ of a non-constant int8 value. */
static int candidates(const struct ir_graph *g)
{
	int c = 0;
	for (const struct ir_node *n = g->first; n; n = n->next) {
		if (n->op != IR_OP_Conv && n->op != IR_OP_ogsh_FusedConv && n->op != IR_OP_Gemm && n->op != IR_OP_MatMul &&
		    n->op != IR_OP_ogsh_FusedGemm)
			continue;
		const struct ir_value *x = n->n_inputs ? n->inputs[0] : NULL;
		const struct ir_node *p = x ? x->producer : NULL;
		if (p && p->op == IR_OP_DequantizeLinear && p->inputs[0] && !p->inputs[0]->init &&
		    ir_value_type(p->inputs[0])->elem == IR_INT8)
			c++;
	}
	return c;
}

static int act_qdq(const struct ir_graph *g)
{
	int c = 0;
	for (const struct ir_node *n = g->first; n; n = n->next)
		if ((n->op == IR_OP_QuantizeLinear || n->op == IR_OP_DequantizeLinear) && n->inputs[0] &&
		    !n->inputs[0]->init)
			c++;
	return c;
}

static struct ir_model *fresh(const struct ir_model *src)
{
	struct ir_model *m = ir_model_clone(src);
	struct ir_diag d;
	ir_diag_init(&d);
	if (!m || ir_infer(m, &d)) {
		printf("FAIL: clone/infer: %s\n", d.error ? d.error : "out of memory");
		exit(1);
	}
	ir_diag_clear(&d);
	return m;
}

/* Every node after the nodes making its inputs (the graph's order is the run order). */
static bool in_order(const struct ir_graph *g)
{
	for (const struct ir_node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->n_inputs; i++) {
			const struct ir_node *p = n->inputs[i] ? n->inputs[i]->producer : NULL;
			if (!p)
				continue;
			const struct ir_node *q = g->first;
			while (q && q != p && q != n)
				q = q->next;
			if (q != p)
				return false;
		}
	return true;
}

/* The outputs of m on the CPU for an input of ramps: 0, or fails++. */
static int run_cpu(const struct ir_model *m, struct exec_values *out)
{
	struct ir_diag d;
	ir_diag_init(&d);
	int64_t dims[4] = { 1, 16, 8, 8 };
	struct ir_tensor *x = ir_tensor_new(IR_FLOAT, 4, dims, &d);
	struct exec_values in = { 0 };
	int rc = x ? 0 : -1;
	if (x) {
		float *f = ir_tensor_mutable(x);
		for (uint64_t i = 0; i < x->numel; i++)
			f[i] = (float)((int)(i * 37 % 255) - 127) / 100.0f;
		rc = exec_values_add_tensor(&in, "x", x);
		ir_tensor_unref(x);
	}
	struct exec_opts o = { 0 };
	if (!rc)
		rc = exec_run(m, &in, &o, out, NULL, NULL, &d);
	CHECK(rc == 0, "exec_run: %s", d.error ? d.error : "?");
	exec_values_clear(&in);
	ir_diag_clear(&d);
	return rc;
}

static void relu_case(const char *path)
{
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_model *src = ir_model_load(path, NULL, &d);
	CHECK(src != NULL, "cannot load %s: %s", path, d.error ? d.error : "?");
	if (!src)
		return;
	/* every island taken: the first Relu joins conv1's island, the second stays */
	struct ir_model *m = fresh(src);
	int asked = 0;
	struct exec_qfuse_result r;
	int rc = exec_qfuse(m, take_all, &asked, &r, &d);
	CHECK(rc == 0, "exec_qfuse: %s", d.error ? d.error : "?");
	CHECK(r.n_commuted == 3, "%d Relu/Clip moved, want 3 (those of one scale)", r.n_commuted);
	CHECK(r.n_fused == 5, "%d islands, want 5", r.n_fused);
	CHECK(count_op(m->graph, IR_OP_Clip) == 0, "the Clip is still there");
	CHECK(in_order(m->graph), "a node reads a value made after it");
	CHECK(count_op(m->graph, IR_OP_Relu) == 1, "%d Relu nodes left, want 1", count_op(m->graph, IR_OP_Relu));
	CHECK(count_op(m->graph, IR_OP_Add) == 0, "the residual Add is still there");
	int relu_in = 0, with_add = 0, clip_in = 0;
	for (struct ir_node *n = m->graph->first; n; n = n->next)
		if (n->op == IR_OP_ogsh_QConv) {
			const struct ir_attr *a = ir_node_attr(n, "activation");
			if (a && a->type == IR_ATTR_STRING && a->s.data && !strcmp(a->s.data, "Relu"))
				relu_in++;
			const struct ir_attr *ap = ir_node_attr(n, "activation_params");
			if (a && a->type == IR_ATTR_STRING && a->s.data && !strcmp(a->s.data, "Clip") && ap &&
			    ap->type == IR_ATTR_FLOATS && ap->n == 2 && ap->floats[0] == 0.0f && ap->floats[1] == 6.0f)
				clip_in++;
			/* the residual's island: z, its scale, the output's and the intermediate's */
			if (n->n_inputs == 9 && n->inputs[5] && n->inputs[6] && n->inputs[7] && n->inputs[8] &&
			    ir_value_type(n->inputs[5])->elem == IR_INT8)
				with_add++;
		}
	CHECK(relu_in == 2, "%d islands took a Relu as their activation, want 2", relu_in);
	CHECK(clip_in == 1, "%d islands took Clip(0, 6) as their activation, want 1", clip_in);
	CHECK(with_add == 1, "%d islands with the residual and its intermediate scale, want 1", with_add);
	int named = 0;
	for (int i = 0; i < r.n_fused; i++)
		named += strstr(r.fused[i].absorbed, "relu1") != NULL ||
			 (strstr(r.fused[i].absorbed, "add3") && strstr(r.fused[i].absorbed, "relu3"));
	CHECK(named == 2, "the islands do not name the Relu and Add they absorbed");
	exec_qfuse_result_free(&r);
	ir_model_free(m);
	/* no island taken: the moved Relu alone, and the same numbers */
	m = fresh(src);
	rc = exec_qfuse(m, take_none, NULL, &r, &d);
	CHECK(rc == 0 && r.n_commuted == 3 && r.n_fused == 0, "exec_qfuse (no islands): rc %d, %d moved, %d fused", rc,
	      r.n_commuted, r.n_fused);
	CHECK(in_order(m->graph), "a node reads a value made after it (Relu moved)");
	exec_qfuse_result_free(&r);
	struct exec_values a = { 0 }, b = { 0 };
	if (!run_cpu(src, &a) && !run_cpu(m, &b)) {
		const struct kern_value *va = exec_values_find(&a, "out"), *vb = exec_values_find(&b, "out");
		CHECK(va && vb && va->t && vb->t && va->t->numel == vb->t->numel &&
			      !memcmp(ir_tensor_data(va->t), ir_tensor_data(vb->t), 4 * va->t->numel),
		      "the graph with the Relu moved computes other outputs");
	}
	exec_values_clear(&a);
	exec_values_clear(&b);
	ir_model_free(m);
	ir_model_free(src);
	ir_diag_clear(&d);
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test_qfuse MODEL_QDQ.onnx [QDQ_RELU.onnx]\n");
		return 2;
	}
	if (argc == 3)
		relu_case(argv[2]);
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_model *src = ir_model_load(argv[1], NULL, &d);
	if (!src) {
		printf("FAIL: cannot load %s: %s\n", argv[1], d.error ? d.error : "?");
		return 1;
	}
	/* every island taken */
	struct ir_model *m = fresh(src);
	int want = candidates(m->graph), nodes0 = m->graph->n_nodes, outs0 = m->graph->n_outputs;
	CHECK(want > 0, "the model has no island candidates");
	int asked = 0;
	struct exec_qfuse_result r;
	int rc = exec_qfuse(m, take_all, &asked, &r, &d);
	CHECK(rc == 0, "exec_qfuse: %s", d.error ? d.error : "?");
	CHECK(r.n_fused == want, "%d islands, %d candidates", r.n_fused, want);
	CHECK(asked == want, "the device was asked %d times, %d candidates", asked, want);
	int made = count_op(m->graph, IR_OP_ogsh_QConv) + count_op(m->graph, IR_OP_ogsh_QGemm);
	CHECK(made == want, "%d QConv/QGemm nodes in the graph, %d islands", made, want);
	CHECK(m->graph->n_nodes < nodes0, "%d nodes after, %d before", m->graph->n_nodes, nodes0);
	CHECK(m->graph->n_outputs == outs0, "outputs changed");
	for (int i = 0; i < outs0; i++)
		CHECK(ir_value_find(m->graph, src->graph->outputs[i]->name) == m->graph->outputs[i],
		      "output %d is not '%s' any more", i, src->graph->outputs[i]->name);
	ir_diag_clear(&d);
	ir_diag_init(&d);
	CHECK(ir_verify(m->graph, &d) == 0, "the rewritten graph does not verify: %s", d.error ? d.error : "?");
	ir_diag_clear(&d);
	ir_diag_init(&d);
	CHECK(ir_graph_toposort(m->graph, &d) == 0, "not sorted: %s", d.error ? d.error : "?");
	for (const struct ir_node *n = m->graph->first; n; n = n->next)
		if (n->op == IR_OP_DequantizeLinear)
			CHECK(n->outputs[0]->n_uses || n->outputs[0]->is_output, "DequantizeLinear n%d is read by nobody", n->id);
	for (int i = 0; i < r.n_fused; i++) {
		const struct exec_qfuse_item *it = &r.fused[i];
		const struct ir_node *f = ir_node_by_id(m->graph, it->node_id);
		CHECK(f && (f->op == IR_OP_ogsh_QConv || f->op == IR_OP_ogsh_QGemm), "island %d has no node", i);
		CHECK(ir_node_by_id(src->graph, it->orig_id) != NULL, "island %d's origin n%d is not in the stage", i,
		      it->orig_id);
		CHECK(!strcmp(it->precision, "int8"), "island %d is '%s'", i, it->precision);
		CHECK(it->absorbed && strstr(it->absorbed, ", "), "island %d absorbed '%s'", i,
		      it->absorbed ? it->absorbed : "(null)");
		CHECK(it->flops > 0, "island %d has no FLOPs", i);
		if (f) {
			const struct ir_type *xt = ir_value_type(f->inputs[0]);
			CHECK(xt->elem == IR_INT8, "island %d reads %d", i, xt->elem);
			CHECK(f->inputs[2] && f->inputs[2]->init && f->inputs[2]->init->dtype == IR_INT8,
			      "island %d's weights are not int8", i);
		}
		CHECK(exec_qfuse_find(&r, it->orig_id) == it, "exec_qfuse_find");
	}
	for (int i = 0; i < r.n_left; i++)
		CHECK(r.left[i].why[0], "unfused Q/DQ n%d has no reason", r.left[i].node_id);
	exec_qfuse_result_free(&r);
	ir_model_free(m);

	/* no island taken: nothing changes, every activation Q/DQ has a reason */
	m = fresh(src);
	int qdq = act_qdq(m->graph);
	rc = exec_qfuse(m, take_none, NULL, &r, &d);
	CHECK(rc == 0, "exec_qfuse (refused): %s", d.error ? d.error : "?");
	CHECK(r.n_fused == 0, "%d islands made though refused", r.n_fused);
	CHECK(m->graph->n_nodes == nodes0, "%d nodes after refusals, %d before", m->graph->n_nodes, nodes0);
	CHECK(r.n_left == qdq, "%d unfused Q/DQ listed, %d in the graph", r.n_left, qdq);
	int refused = 0;
	for (int i = 0; i < r.n_left; i++)
		refused += strstr(r.left[i].why, "the test device refuses") != NULL;
	CHECK(refused >= want, "%d reasons name the refusal, %d islands", refused, want);
	exec_qfuse_result_free(&r);
	ir_model_free(m);

	/* an asymmetric activation: a zero point of 1 on every activation DQ */
	m = fresh(src);
	int changed = 0;
	for (struct ir_node *n = m->graph->first; n; n = n->next) {
		if (n->op != IR_OP_DequantizeLinear || !n->inputs[0] || n->inputs[0]->init || n->n_inputs < 3 ||
		    !n->inputs[2] || !n->inputs[2]->init)
			continue;
		struct ir_tensor *z = ir_tensor_new(n->inputs[2]->init->dtype, n->inputs[2]->init->rank,
						    n->inputs[2]->init->dims, &d);
		if (!z)
			break;
		((uint8_t *)ir_tensor_mutable(z))[0] = 1;
		/* a new value per DQ: initializers may be shared with the Q */
		char name[256];
		snprintf(name, sizeof(name), "%s.asym%d", n->inputs[2]->name, n->id);
		struct ir_value *v = ir_value_new(m->graph, name, &d);
		int bad = !v || ir_value_set_init(v, z, &d);
		ir_tensor_unref(z);   /* the value holds its own reference */
		if (bad)
			break;
		ir_node_set_input(n, 2, v);
		changed++;
	}
	CHECK(changed > 0, "no activation DequantizeLinear with a zero point in the model");
	asked = 0;
	rc = exec_qfuse(m, take_all, &asked, &r, &d);
	CHECK(rc == 0, "exec_qfuse (asymmetric): %s", d.error ? d.error : "?");
	CHECK(r.n_fused == 0, "%d asymmetric islands fused", r.n_fused);
	int asym = 0;
	for (int i = 0; i < r.n_left; i++)
		asym += strstr(r.left[i].why, "asymmetric") != NULL;
	CHECK(asym >= want, "%d reasons say asymmetric, %d candidates", asym, want);
	exec_qfuse_result_free(&r);
	ir_model_free(m);

	ir_model_free(src);
	ir_diag_clear(&d);
	printf("%d checks, %d failed\n", checks, fails);
	return fails ? 1 : 0;
}
