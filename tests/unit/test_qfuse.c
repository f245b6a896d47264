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
 * is refused with its reason.
 */
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

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_qfuse MODEL_QDQ.onnx\n");
		return 2;
	}
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
