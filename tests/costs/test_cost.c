/*
 * test_cost.c - unit tests of the cost model (ir/cost.c): every op has a
 * cost function; counts of small hand-built graphs (Conv with a bias as
 * onnx-tool counts it, Gemm, MatMul with symbolic dims taken as 1, a
 * symbolic expression, BatchNormalization's statistics as buffers, shape
 * constants, Shape reading no data, gathers reading what they write); the
 * activation sum and peak of a small graph; unknown dims and hostile sizes
 * that give "not known" rather than a crash or an overflow; stats that
 * outlive their model.
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)
#define CHECK_EQ(a, b) do { double a_ = (a), b_ = (b); checks++; if (a_ != b_) { failures++; \
	fprintf(stderr, "%s:%d: %s is %.17g, expected %.17g\n", __FILE__, __LINE__, #a, a_, b_); } } while (0)

static struct ir_model *model(const char *name)
{
	struct ir_model *m = ir_model_new();
	m->graph = ir_graph_new(name);
	m->opsets = calloc(1, sizeof(*m->opsets));
	m->opsets[0].domain = strdup("");
	m->opsets[0].version = 17;
	m->opsets[0].has_version = true;
	m->n_opsets = 1;
	return m;
}

/* a graph input of float32 with dims given as text: "1x3x8x8", "batch,seq,8", "[?,4]" */
static struct ir_value *input(struct ir_graph *g, const char *name, int elem, const char *dims)
{
	struct ir_value *v = ir_value_new(g, name, NULL);
	struct ir_dim d[IR_MAX_RANK];
	int r = ir_parse_dims(dims, d, NULL);
	CHECK(r >= 0);
	CHECK(ir_type_set_tensor(&v->type, elem, r, d) == 0);
	ir_dims_clear(d, r);
	v->has_type_proto = true;
	CHECK(ir_graph_add_input(g, v) == 0);
	return v;
}

static struct ir_value *weight(struct ir_graph *g, const char *name, int elem, int rank, const int64_t *dims)
{
	struct ir_value *v = ir_value_new(g, name, NULL);
	struct ir_tensor *t = ir_tensor_new(elem, rank, dims, NULL);
	CHECK(t != NULL);
	CHECK(ir_value_set_init(v, t, NULL) == 0);
	ir_tensor_unref(t);
	return v;
}

static struct ir_node *node(struct ir_graph *g, const char *op, const char *name, int nin, struct ir_value **in,
			    int nout, const char **out)
{
	struct ir_node *n = ir_node_new(g, op, NULL, name, nin, nout, NULL);
	CHECK(n != NULL);
	for (int i = 0; i < nin; i++)
		CHECK(ir_node_set_input(n, i, in[i]) == 0);
	for (int i = 0; i < nout; i++)
		CHECK(ir_node_set_output(n, i, ir_value_new(g, out[i], NULL), NULL) == 0);
	return n;
}

static void set_ints(struct ir_node *n, const char *name, int count, const int64_t *v)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_INTS;
	a.n = (size_t)count;
	a.ints = malloc(sizeof(int64_t) * (size_t)count);
	memcpy(a.ints, v, sizeof(int64_t) * (size_t)count);
	CHECK(ir_node_set_attr(n, &a, NULL) == 0);
}

static void set_int(struct ir_node *n, const char *name, int64_t v)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_INT;
	a.i = v;
	CHECK(ir_node_set_attr(n, &a, NULL) == 0);
}

static struct ir_stats *stats(struct ir_model *m)
{
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(ir_infer(m, &d) == 0);
	struct ir_stats *s = ir_stats_new(m, &d);
	CHECK(s != NULL);
	if (!s)
		fprintf(stderr, "ir_stats_new: %s\n", d.error ? d.error : "?");
	ir_diag_clear(&d);
	return s;
}

static const struct ir_node_cost *find(const struct ir_stats *s, const char *name)
{
	for (int i = 0; s && i < s->n_nodes; i++)
		if (!strcmp(s->nodes[i].name, name))
			return &s->nodes[i];
	fprintf(stderr, "no node '%s' in the stats\n", name);
	abort();
}

static void test_every_op_has_a_cost_function(void)
{
	for (int op = 0; op < IR_OP_COUNT; op++) {
		/* the GPU planner's island nodes never reach the cost model: the
		 * planner keeps the FLOPs of the node an island was made from */
		if (op == IR_OP_ogsh_QConv || op == IR_OP_ogsh_QGemm || op == IR_OP_ogsh_MatMulW4)
			continue;
		checks++;
		if (!ir_cost_has_fn(op)) {
			failures++;
			fprintf(stderr, "op %s (%s) has no cost function\n", ir_ops[op].name, ir_ops[op].domain);
		}
	}
	CHECK(!ir_cost_has_fn(-1) && !ir_cost_has_fn(IR_OP_COUNT));
}

/* Conv with a bias, BatchNormalization, Relu, Gemm: the onnx-tool rules */
static void test_cnn(void)
{
	struct ir_model *m = model("cnn");
	struct ir_graph *g = m->graph;
	struct ir_value *x = input(g, "x", IR_FLOAT, "1x3x8x8");
	int64_t wd[] = { 4, 3, 3, 3 }, bd[] = { 4 }, fd[] = { 10, 144 }, fb[] = { 10 }, sd[] = { 2 };
	struct ir_value *cin[] = { x, weight(g, "w", IR_FLOAT, 4, wd), weight(g, "b", IR_FLOAT, 1, bd) };
	const char *co[] = { "c" }, *bo[] = { "bn" }, *ro[] = { "r" }, *flo[] = { "f" }, *go[] = { "y" },
		   *so[] = { "s" };
	struct ir_node *conv = node(g, "Conv", "conv", 3, cin, 1, co);
	int64_t k[] = { 3, 3 };
	set_ints(conv, "kernel_shape", 2, k);
	struct ir_value *bnin[] = { conv->outputs[0], weight(g, "scale", IR_FLOAT, 1, bd), weight(g, "shift", IR_FLOAT, 1, bd),
				    weight(g, "mean", IR_FLOAT, 1, bd), weight(g, "var", IR_FLOAT, 1, bd) };
	struct ir_node *bn = node(g, "BatchNormalization", "bn", 5, bnin, 1, bo);
	struct ir_node *relu = node(g, "Relu", "relu", 1, &bn->outputs[0], 1, ro);
	struct ir_value *shape = weight(g, "shape", IR_INT64, 1, sd);
	int64_t *sp = ir_tensor_mutable(shape->init);
	sp[0] = 1, sp[1] = 144;
	struct ir_value *fin[] = { relu->outputs[0], shape };
	struct ir_node *flat = node(g, "Reshape", "flat", 2, fin, 1, flo);
	struct ir_value *gin[] = { flat->outputs[0], weight(g, "fc", IR_FLOAT, 2, fd), weight(g, "fcb", IR_FLOAT, 1, fb) };
	struct ir_node *gemm = node(g, "Gemm", "fc", 3, gin, 1, go);
	set_int(gemm, "transB", 1);
	struct ir_node *shp = node(g, "Shape", "shapeof", 1, &relu->outputs[0], 1, so);
	CHECK(ir_graph_add_output(g, gemm->outputs[0]) == 0);
	CHECK(ir_graph_add_output(g, shp->outputs[0]) == 0);

	struct ir_stats *s = stats(m);
	if (!s)
		return;
	CHECK(s->n_unknown == 0);
	const struct ir_node_cost *c = find(s, "conv");
	CHECK(c->known);
	/* 4x6x6 outputs x 3x3x3, and a bias MAC per output */
	CHECK_EQ(c->macs, 144 * 27 + 144);
	CHECK_EQ(c->flops, 2 * 144 * 27 + 144);
	CHECK_EQ(c->params, 108 + 4);
	CHECK_EQ(c->bytes_read, 4 * (192 + 108 + 4));
	CHECK_EQ(c->bytes_written, 4 * 144);
	CHECK_EQ(c->intensity, c->flops / (c->bytes_read + c->bytes_written));
	CHECK(c->n_inputs == 3 && c->inputs[1].role == IR_ROLE_PARAM && c->inputs[0].role == IR_ROLE_NONE);
	const struct ir_node_cost *b = find(s, "bn");
	CHECK_EQ(b->params, 8);   /* scale and shift; mean and var are buffers */
	CHECK(b->inputs[3].role == IR_ROLE_BUFFER && b->inputs[4].role == IR_ROLE_BUFFER);
	CHECK_EQ(b->macs, 0);
	CHECK_EQ(b->flops, 2 * 144);
	CHECK_EQ(find(s, "relu")->flops, 144);
	const struct ir_node_cost *f = find(s, "fc");
	CHECK_EQ(f->macs, 10 * 144 + 10);
	CHECK_EQ(f->flops, 2 * 10 * 144 + 10);
	const struct ir_node_cost *r = find(s, "flat");
	CHECK(r->inputs[1].role == IR_ROLE_CONST);
	CHECK_EQ(r->params, 0);
	const struct ir_node_cost *sh = find(s, "shapeof");
	CHECK_EQ(sh->bytes_read, 0);
	CHECK_EQ(sh->bytes_written, 4 * 8);
	/* totals: each tensor once, by role */
	CHECK_EQ(s->params, 108 + 4 + 4 + 4 + 1440 + 10);
	CHECK_EQ(s->buffers, 8);
	CHECK_EQ(s->constants, 2);
	CHECK_EQ(s->macs, 144 * 27 + 144 + 1450);
	CHECK(s->n_dtypes == 2 && s->dtypes[0].dtype == IR_FLOAT && s->dtypes[1].dtype == IR_INT64);
	CHECK(s->n_symbols == 0);
	/* per op type, most FLOPs first */
	CHECK(s->n_ops == 6 && !strcmp(s->ops[0].op_type, "Conv") && s->ops[0].count == 1);
	/* the stats hold copies: they outlive the model */
	ir_model_free(m);
	CHECK(!strcmp(s->nodes[0].name, "conv") && !strcmp(s->nodes[0].inputs[1].name, "w"));
	CHECK(!strcmp(s->nodes[0].outputs[0].type, "float32[1,4,6,6]"));
	ir_stats_free(s);
}

/* symbols taken as 1, a symbolic expression, a dim nobody knows */
static void test_symbols_and_unknowns(void)
{
	struct ir_model *m = model("sym");
	struct ir_graph *g = m->graph;
	struct ir_value *x = input(g, "x", IR_FLOAT, "batch,seq,8");
	struct ir_value *e = input(g, "e", IR_FLOAT, "[a,b]");
	/* dims as ir_dim_* write them (ir_parse_dims takes plain names only) */
	free(e->type.dims[0].param);
	free(e->type.dims[1].param);
	e->type.dims[0].param = strdup("2*seq + 1");
	e->type.dims[1].param = strdup("n_heads");
	struct ir_value *u = input(g, "u", IR_FLOAT, "[4,?]");
	int64_t wd[] = { 8, 4 };
	struct ir_value *min[] = { x, weight(g, "w", IR_FLOAT, 2, wd) };
	const char *mo[] = { "y" }, *eo[] = { "e2" }, *uo[] = { "u2" };
	node(g, "MatMul", "mm", 2, min, 1, mo);
	node(g, "Exp", "exp", 1, &e, 1, eo);
	node(g, "Relu", "relu", 1, &u, 1, uo);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "y")) == 0);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "e2")) == 0);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "u2")) == 0);
	struct ir_stats *s = stats(m);
	if (!s)
		return;
	const struct ir_node_cost *mm = find(s, "mm");
	CHECK(mm->known);
	CHECK_EQ(mm->macs, 1 * 1 * 4 * 8);
	CHECK(mm->n_symbols == 2 && !strcmp(mm->symbols[0], "batch") && !strcmp(mm->symbols[1], "seq"));
	const struct ir_node_cost *ex = find(s, "exp");
	CHECK(ex->known);
	CHECK_EQ(ex->flops, 3);   /* 2*1 + 1 by 1 */
	CHECK(ex->n_symbols == 2 && !strcmp(ex->symbols[0], "n_heads") && !strcmp(ex->symbols[1], "seq"));
	const struct ir_node_cost *r = find(s, "relu");
	CHECK(!r->known && r->why && strstr(r->why, "graph input 'u' does not declare it"));
	CHECK_EQ(r->flops, 0);
	CHECK(s->n_unknown == 1);
	CHECK(s->n_symbols == 3);
	CHECK(s->n_activations_unknown == 2);   /* u and u2 */
	ir_stats_free(s);
	ir_model_free(m);
}

/* sizes that would overflow integers: not known, never a crash */
static void test_hostile_sizes(void)
{
	struct ir_model *m = model("huge");
	struct ir_graph *g = m->graph;
	char dims[64 * 24] = "";
	for (int i = 0; i < 64; i++)
		strcat(dims, i ? "x4611686018427387904" : "4611686018427387904");
	struct ir_value *x = input(g, "x", IR_FLOAT, dims);
	struct ir_value *y = input(g, "y", IR_FLOAT, "4611686018427387904x4611686018427387904");
	const char *o1[] = { "a" }, *o2[] = { "b" };
	node(g, "Sigmoid", "big", 1, &x, 1, o1);
	node(g, "Sigmoid", "large", 1, &y, 1, o2);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "a")) == 0);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "b")) == 0);
	struct ir_stats *s = stats(m);
	if (!s)
		return;
	const struct ir_node_cost *big = find(s, "big");
	CHECK(!big->known && big->why && strstr(big->why, "too many elements"));
	const struct ir_node_cost *large = find(s, "large");
	CHECK(large->known && isfinite(large->flops) && large->flops > 8e37);
	CHECK(isfinite(s->flops) && isfinite(s->peak_bytes));
	ir_stats_free(s);
	ir_model_free(m);
}

/* x -> relu1 -> a -> relu2 -> b; add(a, b) -> y: a lives to the add */
static void test_activations(void)
{
	struct ir_model *m = model("live");
	struct ir_graph *g = m->graph;
	struct ir_value *x = input(g, "x", IR_FLOAT, "1x4");
	const char *ao[] = { "a" }, *bo[] = { "b" }, *yo[] = { "y" };
	struct ir_node *r1 = node(g, "Relu", "relu1", 1, &x, 1, ao);
	struct ir_node *r2 = node(g, "Relu", "relu2", 1, &r1->outputs[0], 1, bo);
	struct ir_value *ain[] = { r1->outputs[0], r2->outputs[0] };
	node(g, "Add", "add", 2, ain, 1, yo);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "y")) == 0);
	struct ir_stats *s = stats(m);
	if (!s)
		return;
	CHECK(s->n_activations == 4);
	CHECK_EQ(s->activation_bytes, 64);
	CHECK_EQ(s->peak_bytes, 48);   /* a, b and y at the add */
	CHECK(s->peak_index == 2 && s->peak_node_id == s->nodes[2].id);
	ir_stats_free(s);
	ir_model_free(m);
}

/* a gather reads the rows it copies, not the whole table */
static void test_gather(void)
{
	struct ir_model *m = model("emb");
	struct ir_graph *g = m->graph;
	struct ir_value *ids = input(g, "ids", IR_INT64, "batch,seq");
	int64_t td[] = { 1000, 16 };
	struct ir_value *gin[] = { weight(g, "table", IR_FLOAT, 2, td), ids };
	const char *go[] = { "e" };
	node(g, "Gather", "emb", 2, gin, 1, go);
	CHECK(ir_graph_add_output(g, ir_value_find(g, "e")) == 0);
	struct ir_stats *s = stats(m);
	if (!s)
		return;
	const struct ir_node_cost *e = find(s, "emb");
	CHECK(e->known);
	CHECK_EQ(e->params, 16000);
	CHECK_EQ(e->bytes_read, 64 + 8);
	CHECK_EQ(e->bytes_written, 64);
	ir_stats_free(s);
	ir_model_free(m);
}

static void test_empty_and_single(void)
{
	struct ir_model *m = model("empty");
	struct ir_stats *s = stats(m);
	CHECK(s && s->n_nodes == 0 && s->n_ops == 0 && s->peak_index == -1 && s->peak_node_id == -1);
	ir_stats_free(s);
	ir_stats_free(NULL);
	ir_model_free(m);
	/* an op ogsh does not know */
	m = model("custom");
	struct ir_value *x = input(m->graph, "x", IR_FLOAT, "2");
	struct ir_node *n = ir_node_new(m->graph, "Frobnicate", "com.example", "f", 1, 1, NULL);
	CHECK(ir_node_set_input(n, 0, x) == 0);
	CHECK(ir_node_set_output(n, 0, ir_value_new(m->graph, "y", NULL), NULL) == 0);
	struct ir_node_cost c;
	CHECK(ir_node_cost(m, n, &c, NULL) == 0);
	CHECK(!c.known && strstr(c.why, "com.example:Frobnicate"));
	ir_node_cost_clear(&c);
	ir_node_cost_clear(&c);
	ir_model_free(m);
}

int main(void)
{
	test_every_op_has_a_cost_function();
	test_cnn();
	test_symbols_and_unknowns();
	test_hostile_sizes();
	test_activations();
	test_gather();
	test_empty_and_single();
	printf("%d checks, %d failures\n", checks, failures);
	return failures != 0;
}
