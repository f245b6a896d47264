/*
 * test_layout.c - the channels-last layout rules of the GPU planner
 * (exec/layout.c) on small graphs: which activations may be stored
 * [N, H, W, C] given the ops, where each node runs, the dtypes and shapes.
 */
#include "exec/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* A graph under construction with what the rules know of its values. */
struct tg {
	struct ir_graph *g;
	struct layout_val vals[64];
	enum exec_place place[32];
	int n_nodes;
};

static void tg_init(struct tg *t)
{
	memset(t, 0, sizeof(*t));
	t->g = ir_graph_new("layout");
	CHECK(t->g != NULL);
}

/* A value of dtype and dims; act: computed by a node. */
static struct ir_value *value(struct tg *t, const char *name, int dtype, int rank, const int64_t *dims, bool act)
{
	struct ir_value *v = ir_value_new(t->g, name, NULL);
	CHECK(v != NULL && v->idx < 64);
	struct layout_val *lv = &t->vals[v->idx];
	lv->act = act;
	lv->typed = true;
	lv->dtype = dtype;
	lv->rank = rank;
	memcpy(lv->dims, dims, sizeof(int64_t) * (size_t)rank);
	return v;
}

static struct ir_value *t4(struct tg *t, const char *name, int dtype, int64_t n, int64_t c, int64_t h, int64_t w,
			   bool act)
{
	int64_t d[4] = { n, c, h, w };
	return value(t, name, dtype, 4, d, act);
}

/* A node of op (domain NULL: ONNX) reading in[] and writing out, placed at place. */
static struct ir_node *node(struct tg *t, const char *op, const char *domain, int nin, struct ir_value **in,
			    struct ir_value *out, enum exec_place place)
{
	struct ir_node *n = ir_node_new(t->g, op, domain, NULL, nin, 1, NULL);
	CHECK(n != NULL);
	for (int i = 0; i < nin; i++)
		CHECK(ir_node_set_input(n, i, in[i]) == 0);
	CHECK(ir_node_set_output(n, 0, out, NULL) == 0);
	t->place[t->n_nodes++] = place;
	return n;
}

static bool nhwc(const struct tg *t, const struct ir_value *v)
{
	return t->vals[v->idx].nhwc;
}

/* x -> Conv -> a -> Relu -> r -> MaxPool -> m -> FusedConv(Z = m) -> f ->
 * GlobalAveragePool -> gp -> Flatten -> fl -> Gemm -> y (output) */
struct cnn {
	struct ir_value *x, *a, *r, *m, *f, *gp, *fl, *y;
	struct ir_node *conv, *relu, *pool, *fconv;
};

static void build_cnn(struct tg *t, struct cnn *c, int dt, enum exec_place relu_place)
{
	tg_init(t);
	int64_t wd[4] = { 8, 3, 3, 3 }, wd2[4] = { 8, 8, 3, 3 }, bd[1] = { 8 }, gw[2] = { 10, 8 };
	c->x = t4(t, "x", dt, 1, 3, 8, 8, false);
	CHECK(ir_graph_add_input(t->g, c->x) == 0);
	struct ir_value *w1 = value(t, "w1", dt, 4, wd, false), *w2 = value(t, "w2", dt, 4, wd2, false);
	struct ir_value *b2 = value(t, "b2", dt, 1, bd, false), *gwv = value(t, "gw", dt, 2, gw, false);
	c->a = t4(t, "a", dt, 1, 8, 8, 8, true);
	c->r = t4(t, "r", dt, 1, 8, 8, 8, true);
	c->m = t4(t, "m", dt, 1, 8, 4, 4, true);
	c->f = t4(t, "f", dt, 1, 8, 4, 4, true);
	c->gp = t4(t, "gp", dt, 1, 8, 1, 1, true);
	int64_t fd[2] = { 1, 8 }, yd[2] = { 1, 10 };
	c->fl = value(t, "fl", dt, 2, fd, true);
	c->y = value(t, "y", dt, 2, yd, true);
	struct ir_value *in[4];
	in[0] = c->x, in[1] = w1;
	c->conv = node(t, "Conv", NULL, 2, in, c->a, EXEC_ON_GPU);
	c->relu = node(t, "Relu", NULL, 1, &c->a, c->r, relu_place);
	c->pool = node(t, "MaxPool", NULL, 1, &c->r, c->m, EXEC_ON_GPU);
	in[0] = c->m, in[1] = w2, in[2] = b2, in[3] = c->m;
	c->fconv = node(t, "FusedConv", "ai.ogsh", 4, in, c->f, EXEC_ON_GPU);
	node(t, "GlobalAveragePool", NULL, 1, &c->f, c->gp, EXEC_ON_GPU);
	node(t, "Flatten", NULL, 1, &c->gp, c->fl, EXEC_ON_GPU);
	in[0] = c->fl, in[1] = gwv;
	node(t, "Gemm", NULL, 2, in, c->y, EXEC_ON_GPU);
	CHECK(ir_graph_add_output(t->g, c->y) == 0);
}

static void test_cnn(void)
{
	struct tg t;
	struct cnn c;
	/* float16 on the GPU: the values between the convs, through Relu and MaxPool */
	build_cnn(&t, &c, IR_FLOAT16, EXEC_ON_GPU);
	CHECK(exec_layout_plan(t.g, t.place, t.vals) == 4);
	CHECK(nhwc(&t, c.a) && nhwc(&t, c.r) && nhwc(&t, c.m) && nhwc(&t, c.f));
	CHECK(!nhwc(&t, c.x) && !nhwc(&t, c.gp) && !nhwc(&t, c.fl) && !nhwc(&t, c.y));
	/* a kernel that refuses: the pool's values go back, and the ties take the rest */
	CHECK(exec_layout_refuse(c.pool, t.vals));
	exec_layout_settle(t.g, t.place, t.vals);
	CHECK(!nhwc(&t, c.a) && !nhwc(&t, c.r) && !nhwc(&t, c.m) && !nhwc(&t, c.f));
	CHECK(!exec_layout_refuse(c.pool, t.vals));   /* nothing left to demote */
	ir_graph_free(t.g);

	/* bfloat16 too; float32 never */
	build_cnn(&t, &c, IR_BFLOAT16, EXEC_ON_GPU);
	CHECK(exec_layout_plan(t.g, t.place, t.vals) == 4);
	ir_graph_free(t.g);
	build_cnn(&t, &c, IR_FLOAT, EXEC_ON_GPU);
	CHECK(exec_layout_plan(t.g, t.place, t.vals) == 0);
	ir_graph_free(t.g);

	/* Relu on the CPU: it reads NCHW, so the conv writes NCHW, the pool and
	 * the FusedConv (whose Z is the pool's output) follow */
	build_cnn(&t, &c, IR_FLOAT16, EXEC_ON_CPU);
	CHECK(exec_layout_plan(t.g, t.place, t.vals) == 0);
	ir_graph_free(t.g);
}

/* x -> Conv -> a -> Conv -> b -> Conv -> c (output): a refusal demotes only what the node touches */
static void test_refuse_local(void)
{
	struct tg t;
	tg_init(&t);
	int64_t wd[4] = { 8, 8, 1, 1 };
	struct ir_value *x = t4(&t, "x", IR_FLOAT16, 2, 8, 5, 5, false);
	CHECK(ir_graph_add_input(t.g, x) == 0);
	struct ir_value *w = value(&t, "w", IR_FLOAT16, 4, wd, false);
	struct ir_value *a = t4(&t, "a", IR_FLOAT16, 2, 8, 5, 5, true), *b = t4(&t, "b", IR_FLOAT16, 2, 8, 5, 5, true);
	struct ir_value *c = t4(&t, "c", IR_FLOAT16, 2, 8, 5, 5, true);
	struct ir_value *in[2] = { x, w };
	node(&t, "Conv", NULL, 2, in, a, EXEC_ON_GPU);
	in[0] = a;
	struct ir_node *c2 = node(&t, "Conv", NULL, 2, in, b, EXEC_ON_GPU);
	in[0] = b;
	struct ir_node *c3 = node(&t, "Conv", NULL, 2, in, c, EXEC_ON_GPU);
	CHECK(ir_graph_add_output(t.g, c) == 0);
	CHECK(exec_layout_plan(t.g, t.place, t.vals) == 2);
	CHECK(nhwc(&t, a) && nhwc(&t, b) && !nhwc(&t, c));
	CHECK(exec_layout_refuse(c3, t.vals));
	exec_layout_settle(t.g, t.place, t.vals);
	CHECK(nhwc(&t, a) && !nhwc(&t, b));
	CHECK(exec_layout_refuse(c2, t.vals));
	CHECK(!nhwc(&t, a));
	ir_graph_free(t.g);
}

/* Elementwise ops: operands of the output's shape or of one element keep
 * the layout; a per-channel operand (a broadcast) does not */
static void test_eltwise(void)
{
	for (int variant = 0; variant < 3; variant++) {
		struct tg t;
		tg_init(&t);
		int64_t wd[4] = { 4, 4, 1, 1 }, one[1] = { 1 }, chan[4] = { 1, 4, 1, 1 };
		struct ir_value *x = t4(&t, "x", IR_FLOAT16, 1, 4, 6, 6, false);
		CHECK(ir_graph_add_input(t.g, x) == 0);
		struct ir_value *w = value(&t, "w", IR_FLOAT16, 4, wd, false);
		struct ir_value *k = variant == 1 ? value(&t, "k", IR_FLOAT16, 4, chan, false)
						  : value(&t, "k", IR_FLOAT16, 1, one, false);
		struct ir_value *a = t4(&t, "a", IR_FLOAT16, 1, 4, 6, 6, true), *s = t4(&t, "s", IR_FLOAT16, 1, 4, 6, 6, true);
		struct ir_value *b = t4(&t, "b", IR_FLOAT16, 1, 4, 6, 6, true), *y = t4(&t, "y", IR_FLOAT16, 1, 4, 6, 6, true);
		struct ir_value *in[3] = { x, w, NULL };
		node(&t, "Conv", NULL, 2, in, a, EXEC_ON_GPU);
		if (variant == 2) {
			/* Clip with scalar bounds */
			in[0] = a, in[1] = k, in[2] = k;
			node(&t, "Clip", NULL, 3, in, s, EXEC_ON_GPU);
		} else {
			in[0] = a, in[1] = k;
			node(&t, "Mul", NULL, 2, in, s, EXEC_ON_GPU);
		}
		in[0] = s, in[1] = w;
		node(&t, "Conv", NULL, 2, in, b, EXEC_ON_GPU);
		/* a residual Add of two channels-last values, then a last conv */
		in[0] = b, in[1] = s;
		node(&t, "Add", NULL, 2, in, y, EXEC_ON_GPU);
		struct ir_value *o = t4(&t, "o", IR_FLOAT16, 1, 4, 6, 6, true);
		in[0] = y, in[1] = w;
		node(&t, "Conv", NULL, 2, in, o, EXEC_ON_GPU);
		CHECK(ir_graph_add_output(t.g, o) == 0);
		int n = exec_layout_plan(t.g, t.place, t.vals);
		if (variant == 1) {
			/* the broadcast Mul reads a and writes s NCHW; the Add ties b and
			 * y to s */
			CHECK(n == 0);
		} else {
			CHECK(n == 4 && nhwc(&t, a) && nhwc(&t, s) && nhwc(&t, b) && nhwc(&t, y) && !nhwc(&t, o));
		}
		ir_graph_free(t.g);
	}
}

/* FusedConv's Z must have Y's shape to share its layout; folded nodes are left alone */
static void test_z_and_folded(void)
{
	struct tg t;
	tg_init(&t);
	int64_t wd[4] = { 4, 4, 1, 1 }, bd[1] = { 4 };
	struct ir_value *x = t4(&t, "x", IR_FLOAT16, 1, 4, 6, 6, false);
	CHECK(ir_graph_add_input(t.g, x) == 0);
	struct ir_value *w = value(&t, "w", IR_FLOAT16, 4, wd, false), *bias = value(&t, "b", IR_FLOAT16, 1, bd, false);
	struct ir_value *a = t4(&t, "a", IR_FLOAT16, 1, 4, 6, 6, true);
	struct ir_value *z = t4(&t, "z", IR_FLOAT16, 1, 4, 1, 6, true);   /* broadcasts to Y */
	struct ir_value *f = t4(&t, "f", IR_FLOAT16, 1, 4, 6, 6, true), *g = t4(&t, "g", IR_FLOAT16, 1, 4, 6, 6, true);
	struct ir_value *in[4] = { x, w };
	node(&t, "Conv", NULL, 2, in, a, EXEC_ON_GPU);
	in[0] = x;
	node(&t, "ReduceMean", NULL, 1, in, z, EXEC_ON_GPU);
	in[0] = a, in[1] = w, in[2] = bias, in[3] = z;
	node(&t, "FusedConv", "ai.ogsh", 4, in, f, EXEC_ON_GPU);
	in[0] = f, in[1] = w;
	node(&t, "Conv", NULL, 2, in, g, EXEC_ON_GPU);
	CHECK(ir_graph_add_output(t.g, g) == 0);
	CHECK(exec_layout_plan(t.g, t.place, t.vals) == 1);
	CHECK(nhwc(&t, a) && !nhwc(&t, z) && !nhwc(&t, f));
	ir_graph_free(t.g);

	/* a folded conv's output is a constant, never a candidate */
	tg_init(&t);
	x = t4(&t, "x", IR_FLOAT16, 1, 4, 6, 6, false);
	w = value(&t, "w", IR_FLOAT16, 4, wd, false);
	a = t4(&t, "a", IR_FLOAT16, 1, 4, 6, 6, false);
	g = t4(&t, "g", IR_FLOAT16, 1, 4, 6, 6, true);
	struct ir_value *h = t4(&t, "h", IR_FLOAT16, 1, 4, 6, 6, true);
	in[0] = x, in[1] = w;
	node(&t, "Conv", NULL, 2, in, a, EXEC_FOLDED);
	in[0] = a;
	node(&t, "Conv", NULL, 2, in, g, EXEC_ON_GPU);
	in[0] = g;
	node(&t, "Conv", NULL, 2, in, h, EXEC_ON_GPU);
	CHECK(ir_graph_add_output(t.g, h) == 0);
	CHECK(exec_layout_plan(t.g, t.place, t.vals) == 1);
	CHECK(!nhwc(&t, a) && nhwc(&t, g) && !nhwc(&t, h));
	ir_graph_free(t.g);
}

int main(void)
{
	test_cnn();
	test_refuse_local();
	test_eltwise();
	test_z_and_folded();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
