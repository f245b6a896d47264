/*
 * test_ir.c - unit tests of the IR: mutators (with ir_verify after every
 * change), captures in subgraphs, order, clone, dtypes, dims parsing,
 * save atomicity, and the hand edit that removes a node.
 */
#include "ir/ir.h"
#include "passes/pass.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* ir_verify must pass; prints its message otherwise */
#define VERIFY(g) do { struct ir_diag vd_; ir_diag_init(&vd_); checks++; \
	if (ir_verify((g), &vd_)) { failures++; fprintf(stderr, "%s:%d: ir_verify: %s\n", __FILE__, __LINE__, vd_.error); } \
	ir_diag_clear(&vd_); } while (0)

static bool verify_fails(const struct ir_graph *g)
{
	struct ir_diag d;
	ir_diag_init(&d);
	bool bad = ir_verify(g, &d) != 0 && d.error && strstr(d.error, "ir_verify:");
	ir_diag_clear(&d);
	return bad;
}

static struct ir_value *val(struct ir_graph *g, const char *name)
{
	struct ir_value *v = ir_value_new(g, name, NULL);
	CHECK(v != NULL);
	return v;
}

/* a node with the given inputs and fresh outputs named out... */
static struct ir_node *node(struct ir_graph *g, const char *op, const char *name, int nin,
			    struct ir_value **in, int nout, const char **out)
{
	struct ir_node *n = ir_node_new(g, op, NULL, name, nin, nout, NULL);
	CHECK(n != NULL);
	for (int i = 0; i < nin; i++)
		CHECK(ir_node_set_input(n, i, in[i]) == 0);
	for (int i = 0; i < nout; i++)
		CHECK(ir_node_set_output(n, i, val(g, out[i]), NULL) == 0);
	return n;
}

static struct ir_tensor *ftensor(int n, float start)
{
	int64_t dims[1] = { n };
	struct ir_tensor *t = ir_tensor_new(IR_FLOAT, 1, dims, NULL);
	float *p = ir_tensor_mutable(t);
	for (int i = 0; i < n; i++)
		p[i] = start + (float)i;
	return t;
}

/* x -> A -> a -> B -> b -> C -> y, plus w (initializer) into B */
static struct ir_graph *chain(void)
{
	struct ir_graph *g = ir_graph_new("chain");
	struct ir_value *x = val(g, "x");
	CHECK(ir_graph_add_input(g, x) == 0);
	struct ir_value *w = val(g, "w");
	struct ir_tensor *t = ftensor(4, 1);
	CHECK(ir_value_set_init(w, t, NULL) == 0);
	ir_tensor_unref(t);
	const char *oa[] = { "a" }, *ob[] = { "b" }, *oy[] = { "y" };
	struct ir_node *A = node(g, "Relu", "A", 1, &x, 1, oa);
	struct ir_value *bin[2] = { A->outputs[0], w };
	struct ir_node *B = node(g, "Add", "B", 2, bin, 1, ob);
	node(g, "Identity", "C", 1, &B->outputs[0], 1, oy);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "y")) == 0);
	return g;
}

static void test_build_and_uses(void)
{
	struct ir_graph *g = chain();
	VERIFY(g);
	CHECK(g->n_nodes == 3);
	struct ir_value *a = ir_value_find(g, "a"), *x = ir_value_find(g, "x");
	CHECK(a && a->n_uses == 1 && a->uses[0].node->op == IR_OP_Add && a->uses[0].slot == 0);
	CHECK(x->is_input && x->n_uses == 1);
	CHECK(ir_node_by_name(g, "B", NULL)->op == IR_OP_Add);
	CHECK(ir_node_by_id(g, 1) == ir_node_by_name(g, "B", NULL));
	CHECK(ir_value_is_const(ir_value_find(g, "w")));
	CHECK(ir_value_const(ir_value_find(g, "w"))->numel == 4);

	/* rewire B's first input to x directly */
	struct ir_node *B = ir_node_by_name(g, "B", NULL);
	CHECK(ir_node_set_input(B, 0, x) == 0);
	VERIFY(g);
	CHECK(a->n_uses == 0 && x->n_uses == 2);
	/* A's output is unused now: it can go */
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(ir_node_remove(ir_node_by_name(g, "A", NULL), &d) == 0);
	VERIFY(g);
	CHECK(g->n_nodes == 2 && !ir_value_find(g, "a"));
	/* a node whose output is used cannot be removed */
	CHECK(ir_node_remove(B, &d) == IR_ERR && d.error && strstr(d.error, "still used"));
	ir_diag_clear(&d);
	VERIFY(g);
	/* nor one producing a graph output */
	CHECK(ir_node_remove(ir_node_by_name(g, "C", NULL), &d) == IR_ERR && strstr(d.error, "graph output"));
	ir_diag_clear(&d);
	/* optional inputs: empty slots */
	CHECK(ir_node_add_input(B, NULL) == 0 && B->n_inputs == 3 && B->inputs[2] == NULL);
	VERIFY(g);
	ir_graph_free(g);
}

static void test_replace_and_rename(void)
{
	struct ir_graph *g = chain();
	struct ir_value *a = ir_value_find(g, "a"), *b = ir_value_find(g, "b"), *x = ir_value_find(g, "x");
	ir_value_replace_uses(b, a);   /* C reads a now */
	VERIFY(g);
	CHECK(b->n_uses == 0 && a->n_uses == 2);
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(ir_value_rename(a, "x", &d) == IR_ERR && strstr(d.error, "already exists"));
	ir_diag_clear(&d);
	CHECK(ir_value_rename(a, "a2", &d) == 0);
	VERIFY(g);
	CHECK(ir_value_find(g, "a2") == a && !ir_value_find(g, "a"));
	CHECK(ir_value_rename(x, "", &d) == IR_ERR);
	ir_diag_clear(&d);
	/* node names: duplicates allowed, counted */
	struct ir_node *A = ir_node_by_name(g, "A", NULL);
	CHECK(ir_node_rename(A, "B", &d) == 0);
	int count = 0;
	CHECK(ir_node_by_name(g, "B", &count) != NULL && count == 2);
	VERIFY(g);
	CHECK(ir_node_rename(A, "A", &d) == 0);
	CHECK(ir_node_by_name(g, "B", &count) != NULL && count == 1);
	VERIFY(g);
	ir_graph_free(g);
}

static void test_toposort(void)
{
	struct ir_graph *g = ir_graph_new("order");
	struct ir_value *x = val(g, "x");
	ir_graph_add_input(g, x);
	/* make C first, then B, then A: C reads b, B reads a, A reads x */
	struct ir_node *C = ir_node_new(g, "Relu", NULL, "C", 1, 1, NULL);
	struct ir_node *B = ir_node_new(g, "Relu", NULL, "B", 1, 1, NULL);
	struct ir_node *A = ir_node_new(g, "Relu", NULL, "A", 1, 1, NULL);
	struct ir_node *D = ir_node_new(g, "Relu", NULL, "D", 1, 1, NULL);   /* independent: reads x */
	ir_node_set_output(A, 0, val(g, "a"), NULL);
	ir_node_set_output(B, 0, val(g, "b"), NULL);
	ir_node_set_output(C, 0, val(g, "c"), NULL);
	ir_node_set_output(D, 0, val(g, "d"), NULL);
	ir_node_set_input(A, 0, x);
	ir_node_set_input(B, 0, ir_value_find(g, "a"));
	ir_node_set_input(C, 0, ir_value_find(g, "b"));
	ir_node_set_input(D, 0, x);
	CHECK(verify_fails(g));   /* out of order */
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(ir_graph_toposort(g, &d) == 0);
	VERIFY(g);
	CHECK(g->first == A && A->next == B && B->next == C && C->next == D);
	/* a cycle: A reads c */
	ir_node_set_input(A, 0, ir_value_find(g, "c"));
	CHECK(ir_graph_toposort(g, &d) == IR_ERR && d.error && strstr(d.error, "cycle"));
	ir_diag_clear(&d);
	CHECK(g->first == A && g->n_nodes == 4);   /* unchanged */
	ir_graph_free(g);
}

/* If node with a then-branch reading the outer value "x" */
static struct ir_graph *with_subgraph(void)
{
	struct ir_graph *g = ir_graph_new("outer");
	struct ir_value *x = val(g, "x"), *c = val(g, "cond");
	ir_graph_add_input(g, x);
	ir_graph_add_input(g, c);
	struct ir_node *n = ir_node_new(g, "If", NULL, "if", 1, 1, NULL);
	ir_node_set_input(n, 0, c);
	ir_node_set_output(n, 0, val(g, "y"), NULL);
	ir_graph_add_output(g, ir_value_find(g, "y"));
	struct ir_graph *sub = ir_graph_new("then");
	sub->parent = g;
	struct ir_value *cx = ir_graph_capture(sub, "x", NULL);
	CHECK(cx && cx->outer == x);
	struct ir_node *r = ir_node_new(sub, "Relu", NULL, "inner", 1, 1, NULL);
	ir_node_set_input(r, 0, cx);
	ir_node_set_output(r, 0, val(sub, "t"), NULL);
	ir_graph_add_output(sub, ir_value_find(sub, "t"));
	struct ir_attr a = { .type = IR_ATTR_GRAPH, .has_type = true, .g = sub };
	a.name = strdup("then_branch");
	CHECK(ir_node_set_attr(n, &a, NULL) == 0);
	return g;
}

static void test_subgraphs(void)
{
	struct ir_graph *g = with_subgraph();
	VERIFY(g);
	struct ir_node *n = ir_node_by_name(g, "if", NULL);
	struct ir_value *x = ir_value_find(g, "x");
	CHECK(n->n_implicit == 1 && n->implicit[0] == x);
	CHECK(x->n_uses == 1 && x->uses[0].slot == -1);
	struct ir_graph *sub = n->attrs[0].g;
	CHECK(sub->owner == n && sub->parent == g && sub->depth == 1);
	/* renaming the outer value renames its capture */
	CHECK(ir_value_rename(x, "x2", NULL) == 0);
	VERIFY(g);
	CHECK(ir_value_find(sub, "x2") && ir_value_find(sub, "x2")->outer == x);
	/* replacing uses of the outer value re-points the capture */
	struct ir_value *z = val(g, "z");
	ir_graph_add_input(g, z);
	ir_value_replace_uses(x, z);
	VERIFY(g);
	CHECK(x->n_uses == 0 && z->n_uses == 1 && n->implicit[0] == z);
	CHECK(ir_value_find(sub, "z") && !ir_value_find(sub, "x2"));
	/* clone keeps captures pointing into the clone */
	struct ir_graph *c = ir_graph_clone(g, NULL);
	CHECK(c != NULL);
	VERIFY(c);
	char why[256];
	CHECK(ir_graph_equal(g, c, why, sizeof(why)));
	struct ir_node *cn = ir_node_by_name(c, "if", NULL);
	CHECK(cn->implicit[0] == ir_value_find(c, "z") && cn->attrs[0].g->parent == c);
	ir_graph_free(c);
	/* the If node (output unused once its graph output moves) can go, with its uses */
	ir_graph_replace_output(g, ir_value_find(g, "y"), z);
	CHECK(ir_node_remove(n, NULL) == 0);
	VERIFY(g);
	CHECK(z->n_uses == 0);
	ir_graph_free(g);
}

static void test_clone_shares_tensors(void)
{
	struct ir_model *m = ir_demo_model();
	CHECK(m != NULL);
	CHECK(ir_model_verify(m, NULL) == 0);
	struct ir_value *w = ir_value_find(m->graph, "conv1.weight");
	int before = w->init->refcount;
	struct ir_model *c = ir_model_clone(m);
	CHECK(c && ir_model_verify(c, NULL) == 0);
	char why[256];
	CHECK(ir_model_equal(m, c, why, sizeof(why)));
	struct ir_value *cw = ir_value_find(c->graph, "conv1.weight");
	CHECK(cw->init == w->init && w->init->refcount == before + 1);
	/* editing the clone leaves the original alone */
	struct ir_node *relu = ir_node_by_name(c->graph, "relu1", NULL);
	CHECK(pass_remove_node(c->graph, relu, NULL) == 0);
	VERIFY(c->graph);
	CHECK(c->graph->n_nodes == m->graph->n_nodes - 1);
	CHECK(!ir_model_equal(m, c, why, sizeof(why)) && why[0]);
	CHECK(ir_node_by_name(m->graph, "relu1", NULL) != NULL);
	ir_model_free(c);
	CHECK(w->init->refcount == before);
	ir_model_free(m);
}

static void test_verify_catches(void)
{
	struct ir_graph *g = chain();
	struct ir_value *a = ir_value_find(g, "a");
	/* a use list that lies */
	a->n_uses = 0;
	CHECK(verify_fails(g));
	a->n_uses = 1;
	VERIFY(g);
	/* a producer that does not list its output */
	struct ir_node *A = ir_node_by_name(g, "A", NULL);
	A->outputs[0] = NULL;
	CHECK(verify_fails(g));
	A->outputs[0] = a;
	/* a broken node count */
	g->n_nodes++;
	CHECK(verify_fails(g));
	g->n_nodes--;
	VERIFY(g);
	ir_graph_free(g);
}

static void test_remove_node_pass(void)
{
	struct ir_graph *g = chain();
	struct ir_diag d;
	ir_diag_init(&d);
	/* B has one data input (a) and a constant (w): its consumer C is rewired to a */
	CHECK(pass_remove_node(g, ir_node_by_name(g, "B", NULL), &d) == 0);
	VERIFY(g);
	struct ir_node *C = ir_node_by_name(g, "C", NULL);
	CHECK(C->inputs[0] == ir_value_find(g, "a"));
	/* C produces the graph output y: removing it hands the name "y" to a */
	CHECK(pass_remove_node(g, C, &d) == 0);
	VERIFY(g);
	struct ir_value *y = ir_value_find(g, "y");
	CHECK(y && y->is_output && y->producer == ir_node_by_name(g, "A", NULL) && !ir_value_find(g, "a"));
	CHECK(g->n_outputs == 1 && g->outputs[0] == y);
	/* A's input is the graph input x, which cannot take the output's name */
	CHECK(pass_remove_node(g, ir_node_by_name(g, "A", NULL), &d) == IR_ERR && strstr(d.error, "graph input"));
	ir_diag_clear(&d);
	VERIFY(g);
	ir_graph_free(g);

	/* two data inputs: no rewiring */
	g = ir_graph_new("two");
	struct ir_value *p = val(g, "p"), *q = val(g, "q");
	ir_graph_add_input(g, p);
	ir_graph_add_input(g, q);
	struct ir_value *in[2] = { p, q };
	const char *o1[] = { "s" }, *o2[] = { "r" };
	struct ir_node *add = node(g, "Add", "add", 2, in, 1, o1);
	node(g, "Relu", "relu", 1, &add->outputs[0], 1, o2);
	ir_graph_add_output(g, ir_value_find(g, "r"));
	CHECK(pass_remove_node(g, add, &d) == IR_ERR && strstr(d.error, "2 data inputs"));
	ir_diag_clear(&d);
	VERIFY(g);
	ir_graph_free(g);
}

static void test_tensors_and_dtypes(void)
{
	struct ir_diag d;
	ir_diag_init(&d);
	int64_t dims[2] = { 3, 5 }, neg[1] = { -1 }, huge[2] = { INT64_MAX, 4 };
	CHECK(ir_tensor_new(IR_FLOAT, 1, neg, &d) == NULL && strstr(d.error, "negative"));
	ir_diag_clear(&d);
	CHECK(ir_tensor_new(IR_FLOAT, 2, huge, &d) == NULL && d.error);
	ir_diag_clear(&d);
	CHECK(ir_tensor_new(99, 2, dims, &d) == NULL && strstr(d.error, "unknown"));
	ir_diag_clear(&d);
	struct ir_tensor *t = ir_tensor_new(IR_INT4, 2, dims, NULL);
	CHECK(t && t->numel == 15 && t->nbytes == 8);   /* 15 nibbles in 8 bytes */
	ir_tensor_unref(t);
	struct ir_buffer *b = ir_buffer_new(10);
	CHECK(ir_tensor_wrap(IR_FLOAT, 2, dims, b, &d) == NULL && strstr(d.error, "need 60"));
	ir_diag_clear(&d);
	ir_buffer_unref(b);

	/* float16: every bit pattern survives f16 -> f32 -> f16 (NaNs stay NaN) */
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = ir_f16_to_f32((uint16_t)h);
		uint16_t back = ir_f32_to_f16(f);
		if (isnan(f) ? !isnan(ir_f16_to_f32(back)) : back != h)
			bad++;
	}
	CHECK(bad == 0);
	CHECK(ir_f16_to_f32(0x3c00) == 1.0f && ir_f16_to_f32(0x0001) == ldexpf(1, -24));
	CHECK(ir_f32_to_f16(65520.0f) == 0x7c00);   /* rounds to inf */
	CHECK(ir_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00);   /* tie to even */
	CHECK(ir_bf16_to_f32(ir_f32_to_bf16(1.5f)) == 1.5f && ir_f32_to_bf16(1.00390625f) == 0x3f80);
	unsigned char f8[4] = { 0x7e, 0x7f, 0x01, 0xc0 };
	CHECK(ir_elem_to_f64(IR_F8E4M3FN, f8, 0) == 448.0);
	CHECK(isnan(ir_elem_to_f64(IR_F8E4M3FN, f8, 1)));
	CHECK(ir_elem_to_f64(IR_F8E4M3FN, f8, 2) == ldexp(1, -9));
	CHECK(ir_elem_to_f64(IR_F8E4M3FN, f8, 3) == -2.0);
	unsigned char e5[2] = { 0x7c, 0x80 };
	CHECK(isinf(ir_elem_to_f64(IR_F8E5M2, e5, 0)) && isnan(ir_elem_to_f64(IR_F8E5M2FNUZ, e5, 1)));
	unsigned char i4[1] = { 0x9f };   /* elements 15 (low nibble) and 9 */
	CHECK(ir_elem_to_f64(IR_UINT4, i4, 0) == 15 && ir_elem_to_f64(IR_INT4, i4, 0) == -1 &&
	      ir_elem_to_f64(IR_INT4, i4, 1) == -7);
	unsigned char f4[1] = { 0x7f };   /* 6.0 and -6.0 */
	CHECK(ir_elem_to_f64(IR_F4E2M1, f4, 0) == -6.0 && ir_elem_to_f64(IR_F4E2M1, f4, 1) == 6.0);
	CHECK(ir_dtype_from_name("FLOAT16") == IR_FLOAT16 && ir_dtype_from_name("float") == IR_FLOAT &&
	      ir_dtype_from_name("nope") == -1);
	CHECK(strcmp(ir_dtype_name(IR_BFLOAT16), "bfloat16") == 0);
}

static void test_parse_dims(void)
{
	struct ir_dim dm[IR_MAX_RANK];
	struct ir_diag d;
	ir_diag_init(&d);
	int r = ir_parse_dims("1x3x224x224", dm, &d);
	CHECK(r == 4 && dm[0].value == 1 && dm[3].value == 224 && dm[1].kind == IR_DIM_VALUE);
	ir_dims_clear(dm, r);
	r = ir_parse_dims("[batch, 3, ?, seq*2]", dm, &d);
	CHECK(r == 4 && dm[0].kind == IR_DIM_PARAM && strcmp(dm[0].param, "batch") == 0 &&
	      dm[2].kind == IR_DIM_UNKNOWN && strcmp(dm[3].param, "seq*2") == 0);
	ir_dims_clear(dm, r);
	CHECK(ir_parse_dims("[]", dm, &d) == 0);
	CHECK(ir_parse_dims("1x-3", dm, &d) == -1 && strstr(d.error, "negative"));
	ir_diag_clear(&d);
	CHECK(ir_parse_dims("", dm, &d) == -1 && d.error);
	ir_diag_clear(&d);
	CHECK(ir_parse_dims("[1,2", dm, &d) == -1 && d.error);
	ir_diag_clear(&d);
	CHECK(ir_parse_dims("99999999999999999999", dm, &d) == -1 && strstr(d.error, "too large"));
	ir_diag_clear(&d);
}

static void test_op_table(void)
{
	CHECK(ir_op_lookup("", "Conv") == IR_OP_Conv && ir_op_lookup("ai.onnx", "Conv") == IR_OP_Conv);
	CHECK(ir_op_lookup("", "NoSuchOp") == IR_OP_UNKNOWN && ir_op_lookup("com.x", "Conv") == IR_OP_UNKNOWN);
	CHECK(ir_op_lookup("ai.onnx.ml", "Scaler") == IR_OP_ml_Scaler);
	CHECK(ir_ops[IR_OP_Clip].in_min == 1 && ir_ops[IR_OP_Clip].in_max == 3);
	CHECK(ir_ops[IR_OP_Concat].in_max == -1 && (ir_ops[IR_OP_If].flags & IR_OPF_CONTROL));
	const struct ir_attr_schema *a = ir_op_attr(IR_OP_Conv, "group", 17);
	CHECK(a && a->type == IR_ATTR_INT && a->dflt && strcmp(a->dflt, "1") == 0 && !a->required);
	a = ir_op_attr(IR_OP_LeakyRelu, "alpha", 0);
	CHECK(a && a->type == IR_ATTR_FLOAT && strcmp(a->dflt, "0.01") == 0);
	CHECK(ir_op_attr(IR_OP_Cast, "to", 13) && ir_op_attr(IR_OP_Cast, "to", 13)->required);
	/* Clip's min/max attributes went away in opset 11; Gemm's broadcast in 7 */
	CHECK(ir_op_attr(IR_OP_Clip, "min", 6) != NULL && ir_op_attr(IR_OP_Clip, "min", 11) == NULL);
	CHECK(ir_op_attr(IR_OP_Gemm, "broadcast", 6) && !ir_op_attr(IR_OP_Gemm, "broadcast", 13));
	CHECK(ir_op_attr(IR_OP_Conv, "nope", 0) == NULL && ir_op_attr(IR_OP_UNKNOWN, "group", 0) == NULL);
	/* every op's rows are found, and only its own */
	int total = 0;
	for (int op = 0; op < IR_OP_COUNT; op++) {
		int n;
		const struct ir_attr_schema *r = ir_op_attrs(op, &n);
		for (int i = 0; i < n; i++)
			CHECK(r[i].op == op);
		total += n;
	}
	CHECK(total > 500);
	/* every op of the table has a shape function */
	int missing = 0;
	for (int op = 0; op < IR_OP_COUNT; op++)
		if (!ir_infer_has_shape_fn(op)) {
			fprintf(stderr, "  no shape function for %s\n", ir_ops[op].name);
			missing++;
		}
	CHECK(missing == 0);
	struct ir_model *m = ir_demo_model();
	CHECK(ir_model_opset(m, "") == 17 && ir_model_opset(m, NULL) == 17 && ir_model_opset(m, "ai.onnx") == 17 &&
	      ir_model_opset(m, "com.microsoft") == 0);
	ir_model_free(m);
}

static struct ir_dim P(const char *s)
{
	return (struct ir_dim){ .kind = IR_DIM_PARAM, .param = (char *)s };
}

static struct ir_dim V(int64_t v)
{
	return (struct ir_dim){ .kind = IR_DIM_VALUE, .value = v };
}

/* op(a, b) must give the param `want` (or the value wantv when want is NULL) */
static bool dim_is(int (*op)(const struct ir_dim *, const struct ir_dim *, struct ir_dim *), struct ir_dim a,
		   struct ir_dim b, const char *want, int64_t wantv)
{
	struct ir_dim r;
	if (op(&a, &b, &r))
		return false;
	bool ok = want ? (r.kind == IR_DIM_PARAM && strcmp(r.param, want) == 0)
		       : (r.kind == IR_DIM_VALUE && r.value == wantv);
	if (!ok) {
		char buf[128];
		fprintf(stderr, "  got %s\n", ir_dim_str(&r, buf, sizeof(buf)));
	}
	ir_dim_clear(&r);
	return ok;
}

static bool dim_unknown(int (*op)(const struct ir_dim *, const struct ir_dim *, struct ir_dim *), struct ir_dim a,
			struct ir_dim b)
{
	struct ir_dim r;
	bool ok = op(&a, &b, &r) == 0 && r.kind == IR_DIM_UNKNOWN;
	ir_dim_clear(&r);
	return ok;
}

static void test_symdims(void)
{
	CHECK(dim_is(ir_dim_mul, P("batch"), V(3), "3*batch", 0));
	CHECK(dim_is(ir_dim_mul, V(3), P("batch"), "3*batch", 0));
	CHECK(dim_is(ir_dim_add, P("seq"), P("seq"), "2*seq", 0));
	CHECK(dim_is(ir_dim_sub, P("2*seq + 1"), V(1), "2*seq", 0));
	CHECK(dim_is(ir_dim_mul, P("seq"), P("batch"), "batch*seq", 0));
	CHECK(dim_is(ir_dim_div, P("batch*seq"), P("seq"), "batch", 0));
	CHECK(dim_is(ir_dim_div, P("6*x"), V(3), "2*x", 0));
	CHECK(dim_unknown(ir_dim_div, P("x"), V(2)));
	CHECK(dim_is(ir_dim_sub, P("x + 5"), P("x"), NULL, 5));
	CHECK(dim_is(ir_dim_add, P("seq - 1"), V(1), "seq", 0));
	CHECK(dim_is(ir_dim_mul, P("a + 1"), P("a - 1"), "a*a - 1", 0));
	CHECK(dim_is(ir_dim_mul, V(0), P("anything"), NULL, 0));
	/* names that are not our form stay one symbol */
	CHECK(dim_is(ir_dim_mul, P("batch-size"), V(2), "2*batch-size", 0));
	CHECK(dim_is(ir_dim_add, P("N x 3"), V(0), "N x 3", 0));
	/* unknown operands and overflow give unknown */
	CHECK(dim_unknown(ir_dim_mul, (struct ir_dim){ .kind = IR_DIM_UNKNOWN }, V(2)));
	CHECK(dim_unknown(ir_dim_mul, V(INT64_MAX), P("2*x")));
	CHECK(dim_unknown(ir_dim_add, V(INT64_MAX), V(1)));
	struct ir_dim a = P("2*seq"), b = P("seq*2"), c = P("seq"), d = V(4), e = V(4);
	CHECK(ir_dim_equal(&a, &b) && !ir_dim_equal(&a, &c) && ir_dim_equal(&d, &e) && !ir_dim_equal(&c, &d));
}

static bool same_file(const char *a, const char *b)
{
	FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
	bool same = f && g;
	while (same) {
		int x = fgetc(f), y = fgetc(g);
		same = x == y;
		if (x == EOF)
			break;
	}
	if (f)
		fclose(f);
	if (g)
		fclose(g);
	return same;
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void test_save(void)
{
	char dir[] = "/tmp/ogsh-test-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char a[256], b[256], c[256];
	snprintf(a, sizeof(a), "%s/demo.onnx", dir);
	snprintf(b, sizeof(b), "%s/copy.onnx", dir);
	snprintf(c, sizeof(c), "%s/ext.onnx", dir);
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_model *m = ir_demo_model();
	CHECK(ir_model_save(m, a, NULL, &d) == 0);
	struct ir_model *l = ir_model_load(a, NULL, &d);
	char why[256] = "";
	CHECK(l && ir_model_equal(m, l, why, sizeof(why)));
	/* the loaded file is protected */
	CHECK(ir_model_save(l, a, NULL, &d) == IR_ERR && strstr(d.error, "--force"));
	ir_diag_clear(&d);
	struct ir_save_opts force = { .force = true };
	CHECK(ir_model_save(l, a, &force, &d) == 0);
	/* external data: a fresh data file, tensors 4 KiB-aligned, same model back */
	struct ir_save_opts ext = { .external = IR_EXT_ALL, .threshold = 100 };
	CHECK(ir_model_save(l, c, &ext, &d) == 0);
	struct ir_model *e = ir_model_load(c, NULL, &d);
	CHECK(e && e->had_external && ir_model_equal(m, e, why, sizeof(why)));
	const struct ir_tensor *w = e ? ir_value_find(e->graph, "conv2.weight")->init : NULL;
	CHECK(w && w->ext_location && strcmp(w->ext_location, "ext.onnx.data") == 0 && w->ext_offset % 4096 == 0);
	/* a failed save leaves the old file and no temporary behind */
	CHECK(ir_model_save(m, b, NULL, &d) == 0);
	int files = count_files(dir);
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit old, small = { 4096, 4096 };
	getrlimit(RLIMIT_FSIZE, &old);
	small.rlim_max = old.rlim_max;
	setrlimit(RLIMIT_FSIZE, &small);
	struct ir_model *big = ir_model_clone(m);
	CHECK(pass_remove_node(big->graph, ir_node_by_name(big->graph, "relu1", NULL), NULL) == 0);
	int rc = ir_model_save(big, b, NULL, &d);
	CHECK(rc == IR_EIO && d.error && strstr(d.error, "cannot write"));
	ir_diag_clear(&d);
	/* the same with external data: neither the model nor its data file changes */
	struct ir_save_opts ext_small = { .external = IR_EXT_ALL, .threshold = 16 };
	rc = ir_model_save(big, c, &ext_small, &d);
	setrlimit(RLIMIT_FSIZE, &old);
	CHECK(rc == IR_EIO && d.error && strstr(d.error, "cannot write"));
	ir_diag_clear(&d);
	struct ir_model *e2 = ir_model_load(c, NULL, &d);
	CHECK(e2 && ir_model_equal(m, e2, why, sizeof(why)));
	ir_model_free(e2);
	CHECK(count_files(dir) == files);
	struct ir_model *kept = ir_model_load(b, NULL, &d);
	CHECK(kept && ir_model_equal(m, kept, why, sizeof(why)));
	/* saving into a folder that does not exist fails cleanly */
	char nodir[300];
	snprintf(nodir, sizeof(nodir), "%s/missing/x.onnx", dir);
	CHECK(ir_model_save(m, nodir, NULL, &d) == IR_EIO && d.error);
	ir_diag_clear(&d);
	CHECK(same_file(a, a));
	ir_model_free(kept);
	ir_model_free(big);
	ir_model_free(e);
	ir_model_free(l);
	ir_model_free(m);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

/* FusedAttention's layouts: parsing, and the strides of packed and plain inputs and of the output */
static void test_attn_layout(void)
{
	struct ir_attn_layout l;
	struct ir_attn_view v;
	char why[200];
	CHECK(!ir_attn_layout_parse(NULL, NULL, &l, why, sizeof(why)) && !l.packed && !strcmp(l.out, "BHSD"));
	CHECK(!ir_attn_layout_parse("BSHD", NULL, &l, why, sizeof(why)) && !strcmp(l.out, "BSHD") && !l.has_out);
	CHECK(!ir_attn_layout_parse("SB3HD", NULL, &l, why, sizeof(why)) && l.packed && !strcmp(l.out, "SBHD"));
	CHECK(!ir_attn_layout_parse("SB3HD", "BSHD", &l, why, sizeof(why)) && l.has_out && !strcmp(l.out, "BSHD"));
	CHECK(ir_attn_layout_parse("SBHD", NULL, &l, why, sizeof(why)) && strstr(why, "not BHSD, BSHD or a packed"));
	CHECK(ir_attn_layout_parse("BS3DH", NULL, &l, why, sizeof(why)));   /* D must be last */
	CHECK(ir_attn_layout_parse("BS3HD", "BHDS", &l, why, sizeof(why)) && strstr(why, "out_layout"));
	CHECK(ir_attn_layout_parse("BB3HD", NULL, &l, why, sizeof(why)));
	/* [S=5, B=2, 3*4*16]: part 1 (K) of (b, h, s, d) at 64 + b*192 + h*16 + s*384 + d */
	const int64_t sb3e[3] = { 5, 2, 192 };
	CHECK(!ir_attn_layout_parse("SB3HD", NULL, &l, why, sizeof(why)));
	CHECK(!ir_attn_view(&l, 1, 3, sb3e, 4, &v, why, sizeof(why)));
	CHECK(v.b == 2 && v.s == 5 && v.h == 4 && v.d == 16 && v.off == 64 && v.sb == 192 && v.sh == 16 && v.ss == 384);
	CHECK(ir_attn_view(&l, 0, 3, sb3e, 0, &v, why, sizeof(why)) && strstr(why, "q_num_heads"));
	CHECK(ir_attn_view(&l, 0, 3, sb3e, 5, &v, why, sizeof(why)) && strstr(why, "does not split"));
	/* rank 5 [B, S, 3, H, D]: the heads from the dims */
	const int64_t full[5] = { 2, 7, 3, 4, 8 };
	CHECK(!ir_attn_layout_parse("BS3HD", NULL, &l, why, sizeof(why)));
	CHECK(!ir_attn_view(&l, 2, 5, full, 0, &v, why, sizeof(why)));
	CHECK(v.b == 2 && v.s == 7 && v.h == 4 && v.d == 8 && v.off == 64 && v.sb == 7 * 96 && v.ss == 96 && v.sh == 8);
	const int64_t bad3[5] = { 2, 7, 2, 4, 8 };
	CHECK(ir_attn_view(&l, 0, 5, bad3, 0, &v, why, sizeof(why)) && strstr(why, "not 3"));
	/* plain BSHD, and the output in another order */
	const int64_t bshd[4] = { 2, 7, 4, 8 };
	CHECK(!ir_attn_layout_parse("BSHD", "SBHD", &l, why, sizeof(why)));
	CHECK(!ir_attn_view(&l, 0, 4, bshd, 0, &v, why, sizeof(why)) && v.h == 4 && v.s == 7 && v.sh == 8 && v.ss == 32);
	int64_t yd[4], ysb, ysh, yss;
	ir_attn_out(&l, 2, 4, 7, 8, yd, &ysb, &ysh, &yss);
	CHECK(yd[0] == 7 && yd[1] == 2 && yd[2] == 4 && yd[3] == 8 && ysb == 32 && ysh == 8 && yss == 64);
}

int main(void)
{
	test_build_and_uses();
	test_replace_and_rename();
	test_toposort();
	test_subgraphs();
	test_clone_shares_tensors();
	test_verify_catches();
	test_remove_node_pass();
	test_tensors_and_dtypes();
	test_parse_dims();
	test_op_table();
	test_attn_layout();
	test_symdims();
	test_save();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
