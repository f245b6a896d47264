/*
 * demo.c - the built-in demo model: a small residual CNN that shows what
 * folding, fusion and quantization do. Built with the IR's own mutators;
 * weights come from a fixed-seed generator, so every build is identical.
 *
 *   image [batch,3,32,32]
 *   conv1 3x3 3->16 > bn1 > relu1 ---------------------.
 *   conv2 3x3 16->16 > bn2 > relu2 > conv3 > bn3 > add3 > relu3
 *   pool MaxPool 2x2 > conv4 3x3 16->32 > bn4 > relu4
 *   gap GlobalAveragePool > flatten > fc Gemm 32->10 > softmax -> probs [batch,10]
 */
#include "ir_private.h"

#include <math.h>

struct demo {
	struct ir_graph *g;
	uint64_t rng;
	bool failed;
};

static float rnd(struct demo *b)   /* uniform in [-1, 1) */
{
	b->rng ^= b->rng << 13;
	b->rng ^= b->rng >> 7;
	b->rng ^= b->rng << 17;
	return (float)((double)(b->rng >> 11) / (double)(1ull << 52) - 1.0);
}

static struct ir_value *weight(struct demo *b, const char *name, int rank, const int64_t *dims,
			       float scale, float offset)
{
	struct ir_tensor *t = ir_tensor_new(IR_FLOAT, rank, dims, NULL);
	struct ir_value *v = t ? ir_value_new(b->g, name, NULL) : NULL;
	if (!v) {
		ir_tensor_unref(t);
		b->failed = true;
		return NULL;
	}
	float *p = ir_tensor_mutable(t);
	for (uint64_t i = 0; i < t->numel; i++)
		p[i] = offset + scale * rnd(b);
	struct ir_dim d[IR_MAX_RANK];
	for (int i = 0; i < rank; i++)
		d[i] = (struct ir_dim){ .kind = IR_DIM_VALUE, .value = dims[i] };
	if (ir_value_set_init(v, t, NULL) || ir_type_set_tensor(&v->type, IR_FLOAT, rank, d))
		b->failed = true;
	ir_tensor_unref(t);
	return v;
}

static struct ir_node *node(struct demo *b, const char *op, const char *name, struct ir_value **in,
			    int n_in, const char *out)
{
	struct ir_node *n = ir_node_new(b->g, op, NULL, name, n_in, 1, NULL);
	struct ir_value *o = n ? ir_value_new(b->g, out, NULL) : NULL;
	if (!o || ir_node_set_output(n, 0, o, NULL)) {
		b->failed = true;
		return n;
	}
	for (int i = 0; i < n_in; i++)
		if (!in[i] || ir_node_set_input(n, i, in[i]))
			b->failed = true;
	return n;
}

static void attr_ints(struct demo *b, struct ir_node *n, const char *name, int count, const int64_t *v)
{
	struct ir_attr a = { .type = IR_ATTR_INTS, .has_type = true, .n = (size_t)count };
	a.name = ir_strdup(name);
	a.ints = ir_alloc_array((size_t)count, sizeof(int64_t));
	if (!n || !a.name || !a.ints || ir_node_set_attr(n, &a, NULL)) {
		ir_attr_clear(&a);
		b->failed = true;
		return;
	}
	memcpy(n->attrs[n->n_attrs - 1].ints, v, (size_t)count * sizeof(int64_t));
}

static void attr_int(struct demo *b, struct ir_node *n, const char *name, int64_t v)
{
	struct ir_attr a = { .type = IR_ATTR_INT, .has_type = true, .i = v };
	a.name = ir_strdup(name);
	if (!n || !a.name || ir_node_set_attr(n, &a, NULL)) {
		ir_attr_clear(&a);
		b->failed = true;
	}
}

static void attr_float(struct demo *b, struct ir_node *n, const char *name, float v)
{
	struct ir_attr a = { .type = IR_ATTR_FLOAT, .has_type = true, .f = v };
	a.name = ir_strdup(name);
	if (!n || !a.name || ir_node_set_attr(n, &a, NULL)) {
		ir_attr_clear(&a);
		b->failed = true;
	}
}

/* conv (3x3, pad 1) + batch norm; returns the BN output */
static struct ir_value *conv_bn(struct demo *b, int idx, struct ir_value *x, int cin, int cout)
{
	char nm[64], w[64], o[64];
	int64_t wd[4] = { cout, cin, 3, 3 }, cd[1] = { cout };
	float he = sqrtf(6.0f / (float)(cin * 9));
	snprintf(w, sizeof(w), "conv%d.weight", idx);
	snprintf(nm, sizeof(nm), "conv%d", idx);
	snprintf(o, sizeof(o), "conv%d_out", idx);
	struct ir_value *in[5] = { x, weight(b, w, 4, wd, he, 0), NULL, NULL, NULL };
	snprintf(w, sizeof(w), "conv%d.bias", idx);
	in[2] = weight(b, w, 1, cd, 0.05f, 0);
	struct ir_node *c = node(b, "Conv", nm, in, 3, o);
	int64_t k[2] = { 3, 3 }, p[4] = { 1, 1, 1, 1 }, s[2] = { 1, 1 };
	attr_ints(b, c, "kernel_shape", 2, k);
	attr_ints(b, c, "pads", 4, p);
	attr_ints(b, c, "strides", 2, s);
	struct ir_value *bn_in[5] = { c && c->n_outputs ? c->outputs[0] : NULL };
	const char *parts[4] = { "scale", "bias", "mean", "var" };
	float scale[4] = { 0.2f, 0.1f, 0.1f, 0.3f }, off[4] = { 1.0f, 0.0f, 0.0f, 1.0f };
	for (int i = 0; i < 4; i++) {
		snprintf(w, sizeof(w), "bn%d.%s", idx, parts[i]);
		bn_in[1 + i] = weight(b, w, 1, cd, scale[i], off[i]);
	}
	snprintf(nm, sizeof(nm), "bn%d", idx);
	snprintf(o, sizeof(o), "bn%d_out", idx);
	struct ir_node *bn = node(b, "BatchNormalization", nm, bn_in, 5, o);
	attr_float(b, bn, "epsilon", 1e-5f);
	return bn && bn->n_outputs ? bn->outputs[0] : NULL;
}

static struct ir_value *unary(struct demo *b, const char *op, const char *name, struct ir_value *x)
{
	char o[64];
	snprintf(o, sizeof(o), "%s_out", name);
	struct ir_node *n = node(b, op, name, &x, 1, o);
	return n && n->n_outputs ? n->outputs[0] : NULL;
}

static int opset(struct ir_model *m, const char *domain, int64_t v)
{
	struct ir_opset *o = realloc(m->opsets, (m->n_opsets + 1) * sizeof(*o));
	if (!o)
		return IR_ENOMEM;
	m->opsets = o;
	o[m->n_opsets].domain = ir_strdup(domain);
	o[m->n_opsets].version = v;
	o[m->n_opsets].has_version = true;
	if (!o[m->n_opsets++].domain)
		return IR_ENOMEM;
	return 0;
}

struct ir_model *ir_demo_model(void)
{
	struct ir_model *m = ir_model_new();
	struct demo b = { .rng = 0x0123456789abcdefull };
	if (!m || !(b.g = m->graph = ir_graph_new("ogsh_demo_cnn")))
		goto fail;
	m->has_ir_version = true;
	m->ir_version = 8;
	m->producer_name = ir_strdup("ogsh");
	m->producer_version = ir_strdup("demo");
	m->doc = ir_strdup("ogsh's built-in demo: a small residual CNN for 32x32 RGB images, 10 classes");
	if (!m->producer_name || !m->producer_version || !m->doc || opset(m, "", 17))
		goto fail;

	struct ir_value *x = ir_value_new(b.g, "image", NULL);
	struct ir_dim in_dims[4] = { { .kind = IR_DIM_PARAM, .param = "batch" }, { .kind = IR_DIM_VALUE, .value = 3 },
				     { .kind = IR_DIM_VALUE, .value = 32 }, { .kind = IR_DIM_VALUE, .value = 32 } };
	if (!x || ir_type_set_tensor(&x->type, IR_FLOAT, 4, in_dims) || ir_graph_add_input(b.g, x))
		goto fail;
	x->has_type_proto = true;

	struct ir_value *r1 = unary(&b, "Relu", "relu1", conv_bn(&b, 1, x, 3, 16));
	struct ir_value *r2 = unary(&b, "Relu", "relu2", conv_bn(&b, 2, r1, 16, 16));
	struct ir_value *b3 = conv_bn(&b, 3, r2, 16, 16);
	struct ir_value *add_in[2] = { b3, r1 };
	struct ir_node *add = node(&b, "Add", "add3", add_in, 2, "add3_out");
	struct ir_value *r3 = unary(&b, "Relu", "relu3", add && add->n_outputs ? add->outputs[0] : NULL);
	struct ir_node *pool = node(&b, "MaxPool", "pool", &r3, 1, "pool_out");
	int64_t k[2] = { 2, 2 };
	attr_ints(&b, pool, "kernel_shape", 2, k);
	attr_ints(&b, pool, "strides", 2, k);
	struct ir_value *r4 = unary(&b, "Relu", "relu4", conv_bn(&b, 4, pool ? pool->outputs[0] : NULL, 16, 32));
	struct ir_value *gap = unary(&b, "GlobalAveragePool", "gap", r4);
	struct ir_value *flat = unary(&b, "Flatten", "flatten", gap);
	int64_t wd[2] = { 10, 32 }, bd[1] = { 10 };
	struct ir_value *fc_in[3] = { flat, weight(&b, "fc.weight", 2, wd, 0.3f, 0), weight(&b, "fc.bias", 1, bd, 0.05f, 0) };
	struct ir_node *fc = node(&b, "Gemm", "fc", fc_in, 3, "logits");
	attr_int(&b, fc, "transB", 1);
	struct ir_node *sm = node(&b, "Softmax", "softmax", fc ? fc->outputs : NULL, 1, "probs");
	attr_int(&b, sm, "axis", 1);
	if (b.failed || !sm)
		goto fail;
	struct ir_value *probs = sm->outputs[0];
	struct ir_dim out_dims[2] = { { .kind = IR_DIM_PARAM, .param = "batch" }, { .kind = IR_DIM_VALUE, .value = 10 } };
	if (ir_type_set_tensor(&probs->type, IR_FLOAT, 2, out_dims) || ir_graph_add_output(b.g, probs))
		goto fail;
	probs->has_type_proto = true;
	return m;
fail:
	ir_model_free(m);
	return NULL;
}
