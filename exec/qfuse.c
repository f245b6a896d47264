/*
 * qfuse.c - finding quantized islands in a plan's graph and replacing each
 * by one ai.ogsh QConv, QGemm or MatMulW4 node (see qfuse.h).
 *
 * The rules are TensorRT's explicit quantization: a DequantizeLinear of an
 * int8 (or float8 E4M3FN) activation with one scale and a zero point of 0,
 * and a DequantizeLinear of a constant int8 weight (one scale, or one per
 * output channel) feed a Conv, FusedConv, Gemm, FusedGemm or MatMul; the
 * bias (a float constant, or a DequantizeLinear of an int32 constant), the
 * residual of a FusedConv, its activation (none, Relu, Clip, LeakyRelu) and
 * a QuantizeLinear that is the output's only reader go into the epilogue.
 */
#include "exec/qfuse.h"

#include "exec/exec.h"
#include "kernels/fused.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dq {
	struct ir_node *n;
	struct ir_value *x, *scale, *zp;
	int64_t axis, block;
};

struct qf {
	struct ir_model *m;
	struct ir_graph *g;
	exec_qfuse_supports_fn supports;
	void *arg;
	struct exec_qfuse_result *r;
	char **why;          /* by node id: why a Q/DQ stayed (first reason) */
	int n_why;
	struct ir_diag *d;
};

static int elem_of(const struct ir_value *v)
{
	const struct ir_type *t = v ? ir_value_type(v) : NULL;
	return t && t->kind == IR_TYPE_TENSOR ? t->elem : 0;
}

static int rank_of(const struct ir_value *v)
{
	const struct ir_type *t = v ? ir_value_type(v) : NULL;
	return t && t->kind == IR_TYPE_TENSOR ? t->rank : -1;
}

static bool is_float(int dt)
{
	return dt == IR_FLOAT || dt == IR_FLOAT16 || dt == IR_BFLOAT16;
}

static bool read_dq(struct ir_value *v, struct dq *q)
{
	struct ir_node *n = v ? v->producer : NULL;
	if (!n || n->op != IR_OP_DequantizeLinear || n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1])
		return false;
	*q = (struct dq){ .n = n, .x = n->inputs[0], .scale = n->inputs[1],
			  .zp = n->n_inputs > 2 ? n->inputs[2] : NULL,
			  .axis = ir_node_attr_int(n, "axis", 1), .block = ir_node_attr_int(n, "block_size", 0) };
	return true;
}

static bool zero_or_none(const struct ir_value *zp)
{
	if (!zp)
		return true;
	if (!zp->init)
		return false;
	for (uint64_t i = 0; i < zp->init->numel; i++)
		if (ir_tensor_get_f64(zp->init, i) != 0)
			return false;
	return true;
}

static bool scalar_const(const struct ir_value *v)
{
	return v && v->init && v->init->numel == 1 && is_float(v->init->dtype);
}

/* Keeps the first reason a Q/DQ node stays as it is. */
static void note(struct qf *S, const struct ir_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(struct qf *S, const struct ir_node *n, const char *fmt, ...)
{
	if (!n || n->id < 0 || n->id >= S->n_why || S->why[n->id])
		return;
	char buf[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	S->why[n->id] = strdup(buf);
}

static const char *label(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && n->name[0])
		snprintf(buf, size, "%s", n->name);
	else
		snprintf(buf, size, "n%d", n->id);
	return buf;
}

/* An island being put together. */
struct cand {
	struct ir_node *c;           /* the Conv/Gemm/MatMul */
	int kind;                    /* IR_OP_ogsh_QConv, IR_OP_ogsh_QGemm, IR_OP_ogsh_MatMulW4 */
	struct dq x, w, z, b;
	bool has_z, zq, has_b, bq;
	struct ir_value *bias;       /* float bias (a constant) or NULL */
	struct ir_node *relu;        /* a Relu or Clip between the node and q (it has no activation), or NULL */
	struct ir_node *qa, *dqa, *add;   /* find_residual_add: the Q/DQ before a residual Add, the Add */
	struct ir_node *q;           /* the final QuantizeLinear, or NULL */
	struct ir_value *out;        /* the island's output value (q's or c's) */
	int prec;                    /* IR_INT8, IR_F8E4M3FN, IR_INT4 */
};

/* The float bias from a DequantizeLinear of an int32 constant (onnxruntime's
 * quantized bias): a new float initializer of the plan's graph. */
static struct ir_value *bias_from_dq(struct qf *S, const struct dq *b)
{
	const struct ir_tensor *q = b->x->init, *s = b->scale->init;
	if (!q || !s || q->rank != 1 || !zero_or_none(b->zp) || (s->numel != 1 && s->numel != q->numel))
		return NULL;
	int64_t dims[1] = { (int64_t)q->numel };
	struct ir_tensor *t = ir_tensor_new(IR_FLOAT, 1, dims, S->d);
	if (!t)
		return NULL;
	float *f = ir_tensor_mutable(t);
	for (uint64_t i = 0; i < q->numel; i++)
		f[i] = (float)(ir_tensor_get_f64(q, i) * ir_tensor_get_f64(s, s->numel == 1 ? 0 : i));
	char name[300];
	snprintf(name, sizeof(name), "%s.qfuse_bias", b->n->outputs[0]->name);
	for (int k = 1; ir_value_find(S->g, name); k++)
		snprintf(name, sizeof(name), "%s.qfuse_bias%d", b->n->outputs[0]->name, k);
	struct ir_value *v = ir_value_new(S->g, name, S->d);
	struct ir_dim dim = { .kind = IR_DIM_VALUE, .value = dims[0] };
	int rc = !v || ir_type_set_tensor(&v->type, IR_FLOAT, 1, &dim) || ir_value_set_init(v, t, S->d);
	ir_tensor_unref(t);   /* the value holds its own reference */
	return rc ? NULL : v;
}

/* Checks the weight DQ: a constant of type `want`, one scale or one per
 * output channel on `axis` (of `k` channels), zero point 0. */
static bool weight_ok(const struct dq *w, int want, int axis, int64_t k, char *why, size_t size)
{
	const struct ir_tensor *t = w->x->init;
	if (!t) {
		snprintf(why, size, "the weights are not a constant");
		return false;
	}
	if (t->dtype != want) {
		snprintf(why, size, "the weights are %s and the input %s", ir_dtype_name(t->dtype), ir_dtype_name(want));
		return false;
	}
	if (w->block) {
		snprintf(why, size, "the weights have blocked scales");
		return false;
	}
	const struct ir_tensor *s = w->scale->init;
	if (!s || !is_float(s->dtype)) {
		snprintf(why, size, "the weight scale is not a float constant");
		return false;
	}
	int64_t ax = w->axis < 0 ? w->axis + t->rank : w->axis;
	if (s->numel != 1 && !(s->rank == 1 && ax == axis && (int64_t)s->numel == k)) {
		snprintf(why, size, "the weight scales are not one per output channel");
		return false;
	}
	if (!zero_or_none(w->zp)) {
		snprintf(why, size, "the weight zero point is not 0");
		return false;
	}
	return true;
}

/* The activation DQ of input 0: int8 or float8 e4m3fn, one scale, zero point 0. */
static bool act_ok(struct qf *S, struct cand *k, char *why, size_t size)
{
	(void)S;
	int dt = elem_of(k->x.x);
	if (dt != IR_INT8 && dt != IR_F8E4M3FN) {
		snprintf(why, size, "the activation is %s (the integer kernels take int8 and float8e4m3fn)",
			 dt ? ir_dtype_name(dt) : "of unknown type");
		return false;
	}
	if (k->x.x->init) {
		snprintf(why, size, "the input is a constant");
		return false;
	}
	if (!scalar_const(k->x.scale)) {
		snprintf(why, size, "the activation scale is not one float constant");
		return false;
	}
	if (!zero_or_none(k->x.zp)) {
		snprintf(why, size, "the activation zero point is not 0 (asymmetric)");
		return false;
	}
	k->prec = dt;
	return true;
}

/* The node's only reader, when it is of op `op` and its output is not a graph output. */
static struct ir_node *only_reader(const struct ir_value *v, int op)
{
	if (!v || v->is_output || v->n_uses != 1 || !v->uses[0].node)
		return NULL;
	struct ir_node *r = v->uses[0].node;
	return r->op == op && r->n_outputs >= 1 && r->outputs[0] ? r : NULL;
}

/* A Relu, or a Clip with constant bounds (or none): an activation the
 * epilogue runs and that commutes with rounding. Clip's bounds into lo, hi. */
static bool act_node(const struct ir_node *n, float *lo, float *hi)
{
	*lo = -INFINITY;
	*hi = INFINITY;
	if (!n || n->n_inputs < 1 || !n->inputs[0] || n->n_outputs < 1 || !n->outputs[0])
		return false;
	if (n->op == IR_OP_Relu)
		return true;
	if (n->op != IR_OP_Clip)
		return false;
	const struct ir_attr *a;
	if ((a = ir_node_attr(n, "min")) && a->type == IR_ATTR_FLOAT)
		*lo = a->f;
	if ((a = ir_node_attr(n, "max")) && a->type == IR_ATTR_FLOAT)
		*hi = a->f;
	for (int i = 1; i < 3 && i < n->n_inputs; i++) {
		if (!n->inputs[i])
			continue;
		const struct ir_tensor *t = ir_value_const(n->inputs[i]);
		if (!t || t->numel != 1)
			return false;
		double v = ir_elem_to_f64(t->dtype, ir_tensor_data(t), 0);
		if (i == 1)
			*lo = (float)v;
		else
			*hi = (float)v;
	}
	return !(*lo > *hi);
}

/* The only reader of v when it is an activation of act_node's kind. */
static struct ir_node *only_act(const struct ir_value *v)
{
	if (!v || v->is_output || v->n_uses != 1 || !v->uses[0].node)
		return NULL;
	float lo, hi;
	struct ir_node *r = v->uses[0].node;
	return act_node(r, &lo, &hi) && r->inputs[0] == v ? r : NULL;
}

/* The island's end: the Q that is the output's only reader (after a Relu
 * that is the only reader, when the node has no activation of its own). */
static void find_q(struct qf *S, struct cand *k)
{
	struct ir_value *y = k->c->outputs[0];
	k->out = y;
	k->q = NULL;
	k->relu = NULL;
	struct kern_act a;
	char w2[120];
	struct ir_node *rl = only_act(y);
	if (rl && kern_act_of(k->c, &a, w2, sizeof(w2)) && a.kind == KACT_NONE &&
	    only_reader(rl->outputs[0], IR_OP_QuantizeLinear)) {
		k->relu = rl;
		y = rl->outputs[0];
	}
	if (!y || y->is_output || y->n_uses != 1) {
		k->relu = NULL;
		return;
	}
	struct ir_node *q = y->uses[0].node;
	if (!q || q->op != IR_OP_QuantizeLinear || q->n_outputs < 1 || !q->outputs[0])
		return;
	char why[160] = "";
	int odt = elem_of(q->outputs[0]);
	if (q->n_inputs < 2 || !scalar_const(q->inputs[1]))
		snprintf(why, sizeof(why), "its scale is not one float constant");
	else if (!zero_or_none(q->n_inputs > 2 ? q->inputs[2] : NULL))
		snprintf(why, sizeof(why), "its zero point is not 0 (asymmetric)");
	else if (odt != k->prec)
		snprintf(why, sizeof(why), "it quantizes to %s, the island computes in %s", ir_dtype_name(odt),
			 ir_dtype_name(k->prec));
	else if (odt == IR_F8E4M3FN && ir_node_attr_int(q, "saturate", 1) == 0)
		snprintf(why, sizeof(why), "it does not saturate");
	if (why[0]) {
		note(S, q, "%s", why);
		k->relu = NULL;
		return;
	}
	k->q = q;
	k->out = q->outputs[0];
}

/* The float value of a one-element constant, or NaN. */
static double scalar_value(const struct ir_value *v)
{
	const struct ir_tensor *t = v ? ir_value_const(v) : NULL;
	return t && t->numel == 1 ? ir_elem_to_f64(t->dtype, ir_tensor_data(t), 0) : NAN;
}

/*
 * Q(s) -> DQ(s) -> Relu -> Q(s), zero points 0, each the only reader of the
 * one before (onnxruntime's QDQ around a Relu, with the Relu's output sharing
 * its input's scale), is Relu -> Q(s): rounding and saturation commute with
 * max(., 0) when the zero point is 0. So does a Clip of constant bounds
 * (ReLU6): rounding is monotone, and a monotone map commutes with clamping
 * (up to the bounds' own rounding, which the Q after them does anyway).
 * Moving the activation before the first Q lets an island take it into its
 * epilogue. Returns the pairs removed, or -1.
 */
static int commute_relu(struct qf *S)
{
	int moved = 0;
	for (struct ir_node *q2 = S->g->first, *next; q2; q2 = next) {
		next = q2->next;
		if (q2->op != IR_OP_QuantizeLinear || q2->n_inputs < 2 || !q2->inputs[0] || q2->n_outputs < 1 ||
		    !q2->outputs[0])
			continue;
		struct ir_node *rl = q2->inputs[0]->producer;
		float lo, hi;
		if (!rl || !act_node(rl, &lo, &hi) || !only_reader(rl->outputs[0], IR_OP_QuantizeLinear))
			continue;
		struct ir_node *dq1 = rl->inputs[0]->producer;
		if (!dq1 || dq1->op != IR_OP_DequantizeLinear || dq1->n_inputs < 2 || !dq1->inputs[0] ||
		    only_act(dq1->outputs[0]) != rl)
			continue;
		struct ir_node *q1 = dq1->inputs[0]->producer;
		if (!q1 || q1->op != IR_OP_QuantizeLinear || q1->n_inputs < 2 || !q1->inputs[0] ||
		    only_reader(q1->outputs[0], IR_OP_DequantizeLinear) != dq1)
			continue;
		int dt = elem_of(q1->outputs[0]);
		if ((dt != IR_INT8 && dt != IR_F8E4M3FN) || elem_of(q2->outputs[0]) != dt ||
		    elem_of(rl->inputs[0]) != elem_of(q1->inputs[0]))
			continue;
		double s1 = scalar_value(q1->inputs[1]), s2 = scalar_value(dq1->inputs[1]), s3 = scalar_value(q2->inputs[1]);
		if (!(s1 > 0) || s1 != s2 || s1 != s3 || !zero_or_none(q1->n_inputs > 2 ? q1->inputs[2] : NULL) ||
		    !zero_or_none(dq1->n_inputs > 2 ? dq1->inputs[2] : NULL) ||
		    !zero_or_none(q2->n_inputs > 2 ? q2->inputs[2] : NULL) ||
		    ir_node_attr_int(q1, "saturate", 1) != ir_node_attr_int(q2, "saturate", 1))
			continue;
		/* v -> Relu -> q1 -> (q2's readers) */
		struct ir_value *v = q1->inputs[0];
		if (ir_node_set_input(rl, 0, v) || ir_node_set_input(q1, 0, rl->outputs[0]))
			return ir_diag_err(S->d, IR_ENOMEM, "out of memory"), -1;
		ir_node_move(rl, q1);
		struct ir_value *o2 = q2->outputs[0], *o1 = q1->outputs[0];
		ir_value_replace_uses(o2, o1);
		if (o2->is_output)
			ir_graph_replace_output(S->g, o2, o1);
		if (next == dq1)
			next = dq1->next;
		if (ir_node_remove(q2, S->d) || ir_node_remove(dq1, S->d))
			return -1;
		moved++;
		next = S->g->first;   /* the list changed: start over (a few hundred nodes) */
	}
	return moved;
}

static bool conv_like(const struct ir_node *n)
{
	return n->op == IR_OP_Conv || n->op == IR_OP_ogsh_FusedConv;
}

static bool gemm_like(const struct ir_node *n)
{
	return n->op == IR_OP_Gemm || n->op == IR_OP_ogsh_FusedGemm || n->op == IR_OP_MatMul;
}

/* Both values 4-D with the same dims (no broadcasting). */
static bool same_4d(const struct ir_value *u, const struct ir_value *v)
{
	const struct ir_type *zt = ir_value_type(u), *yt = ir_value_type(v);
	bool same = zt && yt && zt->rank == yt->rank && zt->rank == 4;
	for (int i = 0; same && i < 4; i++) {
		const struct ir_dim *a = &zt->dims[i], *b = &yt->dims[i];
		same = a->kind == b->kind &&
		       (a->kind == IR_DIM_VALUE ? a->value == b->value
						: a->kind == IR_DIM_PARAM && a->param && b->param && !strcmp(a->param, b->param));
	}
	return same;
}

/*
 * onnxruntime's residual: the island's Q(S_a) -> DQ(S_a) -> Add(DQ(z int8))
 * -> [Relu] -> Q(S_y), each the only reader of the one before. The island
 * then rounds its product to S_a's int8 grid in the epilogue (as the Q
 * does), adds the residual and ends in the last Q: k->q becomes that Q.
 */
static void find_residual_add(struct qf *S, struct cand *k)
{
	(void)S;
	if (k->kind != IR_OP_ogsh_QConv || k->prec != IR_INT8 || k->has_z || k->relu || !k->q)
		return;
	struct kern_act a;
	char w2[120];
	if (!kern_act_of(k->c, &a, w2, sizeof(w2)) || a.kind != KACT_NONE)
		return;
	struct ir_node *qa = k->q;
	struct ir_node *dqa = only_reader(qa->outputs[0], IR_OP_DequantizeLinear);
	if (!dqa || dqa->n_inputs < 2 || scalar_value(dqa->inputs[1]) != scalar_value(qa->inputs[1]) ||
	    !zero_or_none(dqa->n_inputs > 2 ? dqa->inputs[2] : NULL))
		return;
	struct ir_node *add = only_reader(dqa->outputs[0], IR_OP_Add);
	if (!add || add->n_inputs != 2 || !add->inputs[0] || !add->inputs[1])
		return;
	struct ir_value *zv = add->inputs[0] == dqa->outputs[0] ? add->inputs[1] : add->inputs[0];
	if (zv == dqa->outputs[0])
		return;
	struct dq z;
	if (!read_dq(zv, &z) || z.x->init || elem_of(z.x) != IR_INT8 || !scalar_const(z.scale) || !zero_or_none(z.zp) ||
	    !same_4d(zv, add->outputs[0]) || !same_4d(dqa->outputs[0], add->outputs[0]))
		return;
	struct ir_node *rl = only_reader(add->outputs[0], IR_OP_Relu);
	struct ir_value *y = rl ? rl->outputs[0] : add->outputs[0];
	struct ir_node *qy = only_reader(y, IR_OP_QuantizeLinear);
	if (!qy || qy->n_inputs < 2 || !scalar_const(qy->inputs[1]) || !zero_or_none(qy->n_inputs > 2 ? qy->inputs[2] : NULL) ||
	    elem_of(qy->outputs[0]) != IR_INT8 || !(scalar_value(qa->inputs[1]) > 0))
		return;
	k->qa = qa;
	k->dqa = dqa;
	k->add = add;
	k->relu = rl;
	k->z = z;
	k->has_z = k->zq = true;
	k->q = qy;
	k->out = qy->outputs[0];
}

/* Fills k for node c; false with why (for the activation DQ's note). */
static bool analyse(struct qf *S, struct ir_node *c, struct cand *k, char *why, size_t size)
{
	memset(k, 0, sizeof(*k));
	k->c = c;
	if (c->n_inputs < 2 || !c->inputs[0] || !c->inputs[1] || c->n_outputs < 1 || !c->outputs[0])
		return snprintf(why, size, "the node has missing inputs"), false;
	/* weight-only int4: MatMul(float a, DQ(blocked int4 B)) */
	struct dq w;
	if (c->op == IR_OP_MatMul && read_dq(c->inputs[1], &w) && w.block > 0) {
		k->kind = IR_OP_ogsh_MatMulW4;
		k->w = w;
		int wdt = w.x->init ? w.x->init->dtype : 0;
		int adt = elem_of(c->inputs[0]);
		if (wdt != IR_INT4 && wdt != IR_UINT4)
			return snprintf(why, size, "blocked weights of %s (the weight-only kernel takes int4, uint4)",
					wdt ? ir_dtype_name(wdt) : "a non-constant"), false;
		if (!is_float(adt))
			return snprintf(why, size, "the activation is not float"), false;
		if (w.x->init->rank != 2 || (w.axis != 0 && w.axis != -2))
			return snprintf(why, size, "the int4 weights are not [K, N] blocked along K"), false;
		if (!w.scale->init || (w.zp && !w.zp->init))
			return snprintf(why, size, "the int4 scales are not constants"), false;
		k->prec = IR_INT4;
		k->out = c->outputs[0];
		return true;
	}
	if (!read_dq(c->inputs[0], &k->x))
		return snprintf(why, size, "input 0 is not dequantized"), false;
	if (!act_ok(S, k, why, size))
		return false;
	if (!read_dq(c->inputs[1], &k->w))
		return snprintf(why, size, "the weights are not dequantized"), false;
	const struct ir_tensor *wt = k->w.x->init;
	if (conv_like(c)) {
		k->kind = IR_OP_ogsh_QConv;
		if (!wt || wt->rank != 4)
			return snprintf(why, size, "not a 2-D convolution with constant weights"), false;
		if (rank_of(c->inputs[0]) != 4)
			return snprintf(why, size, "the input is not 4-D"), false;
		if (!weight_ok(&k->w, k->prec, 0, wt->dims[0], why, size))
			return false;
	} else {
		k->kind = IR_OP_ogsh_QGemm;
		if (!wt || wt->rank != 2)
			return snprintf(why, size, "the weights are not a 2-D constant"), false;
		bool tb = c->op != IR_OP_MatMul && ir_node_attr_int(c, "transB", 0);
		if (c->op != IR_OP_MatMul) {
			if (ir_node_attr_int(c, "transA", 0))
				return snprintf(why, size, "transA is set"), false;
			if (ir_node_attr_float(c, "alpha", 1.0f) != 1.0f || ir_node_attr_float(c, "beta", 1.0f) != 1.0f)
				return snprintf(why, size, "alpha or beta is not 1"), false;
		}
		int ra = rank_of(c->inputs[0]);
		if (ra < 2 || (c->op != IR_OP_MatMul && ra != 2))
			return snprintf(why, size, "the input is of rank %d", ra), false;
		int axis = tb ? 0 : 1;
		if (!weight_ok(&k->w, k->prec, axis, wt->dims[axis], why, size))
			return false;
	}
	/* bias */
	if (c->op != IR_OP_MatMul && c->n_inputs > 2 && c->inputs[2]) {
		struct ir_value *b = c->inputs[2];
		int64_t kout = k->kind == IR_OP_ogsh_QConv ? wt->dims[0]
							   : wt->dims[ir_node_attr_int(c, "transB", 0) ? 0 : 1];
		if (b->init && is_float(b->init->dtype) && (int64_t)b->init->numel == kout && b->init->rank <= 2) {
			k->bias = b;
		} else if (read_dq(b, &k->b) && k->b.x->init && k->b.x->init->dtype == IR_INT32 &&
			   (int64_t)k->b.x->init->numel == kout) {
			k->bq = true;
		} else {
			return snprintf(why, size, "the bias is not a constant of one value per output channel"), false;
		}
	}
	/* residual */
	if (c->op == IR_OP_ogsh_FusedConv && c->n_inputs > 3 && c->inputs[3]) {
		struct ir_value *z = c->inputs[3];
		if (!same_4d(z, c->outputs[0]))
			return snprintf(why, size, "the residual is broadcast"), false;
		k->has_z = true;
		if (read_dq(z, &k->z) && !k->z.x->init) {
			if (elem_of(k->z.x) != k->prec || !scalar_const(k->z.scale) || !zero_or_none(k->z.zp)) {
				note(S, k->z.n, "the residual of '%s' is not %s with one scale and zero point 0",
				     c->name ? c->name : "", ir_dtype_name(k->prec));
				k->zq = false;
			} else {
				k->zq = true;
			}
		}
	}
	/* activation */
	if (c->op == IR_OP_ogsh_FusedConv || c->op == IR_OP_ogsh_FusedGemm) {
		struct kern_act a;
		char w2[120];
		if (!kern_act_of(c, &a, w2, sizeof(w2)))
			return snprintf(why, size, "%s", w2), false;
		if (a.kind != KACT_NONE && a.kind != KACT_RELU && a.kind != KACT_CLIP && a.kind != KACT_LEAKY)
			return snprintf(why, size, "the activation %s is not one the epilogue runs (Relu, Clip, LeakyRelu)",
					kern_act_name(a.kind)), false;
	}
	find_q(S, k);
	find_residual_add(S, k);
	return true;
}

/* Copies c's attributes named in `names` to f. */
static int copy_attrs(struct ir_node *f, const struct ir_node *c, const char *const *names, struct ir_diag *d)
{
	for (int i = 0; names[i]; i++) {
		const struct ir_attr *a = ir_node_attr(c, names[i]);
		if (!a)
			continue;
		struct ir_attr cp;
		memset(&cp, 0, sizeof(cp));
		int rc = ir_attr_copy(&cp, a, NULL);
		if (!rc)
			rc = ir_node_set_attr(f, &cp, d);
		else
			ir_attr_clear(&cp);
		if (rc)
			return rc;
	}
	return 0;
}

static int set_int_attr(struct ir_node *f, const char *name, int64_t v, struct ir_diag *d)
{
	struct ir_attr a;
	memset(&a, 0, sizeof(a));
	a.name = strdup(name);
	if (!a.name)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	a.type = IR_ATTR_INT;
	a.i = v;
	return ir_node_set_attr(f, &a, d);
}

/* The new node for k, before k->c; NULL with an error in d. */
static struct ir_node *make_node(struct qf *S, struct cand *k)
{
	static const char *const conv_attrs[] = { "auto_pad", "dilations", "group", "kernel_shape", "pads",
						  "strides", "activation", "activation_params", NULL };
	static const char *const gemm_attrs[] = { "activation", "activation_params", NULL };
	const char *op = k->kind == IR_OP_ogsh_QConv ? "QConv" : k->kind == IR_OP_ogsh_QGemm ? "QGemm" : "MatMulW4";
	char name[300];
	snprintf(name, sizeof(name), "%s", k->c->name ? k->c->name : "");
	int nin = k->kind == IR_OP_ogsh_MatMulW4 ? 4 : k->qa ? 9 : 8;
	/* where the last of its inputs is made: at the node, or at the residual
	 * Add it takes in (the other branch may be made after the node) */
	struct ir_node *f = ir_node_new(S->g, op, "ai.ogsh", name, nin, 1, k->add ? k->add : k->c);
	if (!f) {
		ir_diag_err(S->d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	int rc = 0;
	if (k->kind == IR_OP_ogsh_MatMulW4) {
		rc = ir_node_set_input(f, 0, k->c->inputs[0]) || ir_node_set_input(f, 1, k->w.x) ||
		     ir_node_set_input(f, 2, k->w.scale) || ir_node_set_input(f, 3, k->w.zp);
		if (!rc)
			rc = set_int_attr(f, "block_size", k->w.block, S->d);
	} else {
		if (k->bq && !k->bias) {
			k->bias = bias_from_dq(S, &k->b);
			if (!k->bias) {
				ir_node_remove(f, NULL);
				if (!S->d->error)
					ir_diag_err(S->d, IR_ENOMEM, "out of memory");
				return NULL;
			}
		}
		struct ir_value *z = NULL, *zs = NULL;
		if (k->has_z) {
			z = k->zq ? k->z.x : k->c->inputs[3];
			zs = k->zq ? k->z.scale : NULL;
		}
		rc = ir_node_set_input(f, 0, k->x.x) || ir_node_set_input(f, 1, k->x.scale) ||
		     ir_node_set_input(f, 2, k->w.x) || ir_node_set_input(f, 3, k->w.scale) ||
		     ir_node_set_input(f, 4, k->bias) || ir_node_set_input(f, 5, z) || ir_node_set_input(f, 6, zs) ||
		     ir_node_set_input(f, 7, k->q ? k->q->inputs[1] : NULL) ||
		     (k->qa && ir_node_set_input(f, 8, k->qa->inputs[1]));
		if (!rc)
			rc = copy_attrs(f, k->c, k->kind == IR_OP_ogsh_QConv ? conv_attrs : gemm_attrs, S->d);
		if (!rc && k->relu) {
			float lo, hi;
			bool clip = k->relu->op == IR_OP_Clip;
			act_node(k->relu, &lo, &hi);
			struct ir_attr a, ap;
			memset(&a, 0, sizeof(a));
			memset(&ap, 0, sizeof(ap));
			a.name = strdup("activation");
			a.type = IR_ATTR_STRING;
			a.s.data = strdup(clip ? "Clip" : "Relu");
			a.s.len = 4;
			ap.name = strdup("activation_params");
			ap.type = IR_ATTR_FLOATS;
			ap.n = 2;
			ap.floats = malloc(2 * sizeof(float));
			if (!a.name || !a.s.data || !ap.name || !ap.floats) {
				free(a.name);
				free(a.s.data);
				free(ap.name);
				free(ap.floats);
				rc = ir_diag_err(S->d, IR_ENOMEM, "out of memory");
			} else {
				ap.floats[0] = lo;
				ap.floats[1] = hi;
				rc = ir_node_set_attr(f, &a, S->d);
				if (!rc && clip)
					rc = ir_node_set_attr(f, &ap, S->d);
				else {
					free(ap.name);
					free(ap.floats);
				}
			}
		}
		if (!rc && k->kind == IR_OP_ogsh_QGemm && k->c->op != IR_OP_MatMul)
			rc = set_int_attr(f, "transB", ir_node_attr_int(k->c, "transB", 0), S->d);
	}
	/* the output: a new value of the island's output type, renamed below */
	char vname[300];
	snprintf(vname, sizeof(vname), "%s.qfuse", k->out->name);
	for (int i = 1; !rc && ir_value_find(S->g, vname); i++)
		snprintf(vname, sizeof(vname), "%s.qfuse%d", k->out->name, i);
	struct ir_value *o = rc ? NULL : ir_value_new(S->g, vname, S->d);
	if (!rc && (!o || ir_type_copy(&o->type, ir_value_type(k->out)) || ir_node_set_output(f, 0, o, S->d)))
		rc = IR_ENOMEM;
	if (rc) {
		if (!S->d->error)
			ir_diag_err(S->d, IR_ENOMEM, "out of memory");
		ir_node_remove(f, NULL);
		return NULL;
	}
	return f;
}

static int add_item(struct exec_qfuse_item **arr, int *n, struct exec_qfuse_item *it, struct ir_diag *d)
{
	struct exec_qfuse_item *a = realloc(*arr, sizeof(*a) * (size_t)(*n + 1));
	if (!a)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	a[(*n)++] = *it;
	*arr = a;
	return 0;
}

static void append(char *buf, size_t size, const char *s)
{
	size_t len = strlen(buf);
	snprintf(buf + len, size - len, "%s%s", len ? ", " : "", s);
}

/* Makes k's island; 0 also when the device refuses it (noted), else an error. */
static int fuse(struct qf *S, struct cand *k)
{
	struct ir_node *f = make_node(S, k);
	if (!f)
		return S->d->error ? IR_ERR : IR_ENOMEM;
	char why[200] = "";
	if (!S->supports(S->arg, S->m, f, why, sizeof(why))) {
		ir_node_remove(f, NULL);
		if (k->kind != IR_OP_ogsh_MatMulW4)
			note(S, k->x.n, "the device does not run the island of '%s': %s", k->c->name ? k->c->name : "",
			     why[0] ? why : "unsupported");
		if (k->q)
			note(S, k->q, "the device does not run the island of '%s': %s", k->c->name ? k->c->name : "",
			     why[0] ? why : "unsupported");
		return 0;
	}
	struct exec_qfuse_item it = { .node_id = f->id, .orig_id = k->c->id };
	snprintf(it.precision, sizeof(it.precision), "%s",
		 k->prec == IR_INT8 ? "int8" : k->prec == IR_F8E4M3FN ? "fp8" : "int4");
	struct ir_node_cost cost;
	if (!ir_node_cost(S->m, k->c, &cost, NULL)) {
		if (cost.known)
			it.flops = cost.flops;
		ir_node_cost_clear(&cost);
	}
	char abs[600] = "", lb[200];
	if (k->kind != IR_OP_ogsh_MatMulW4)
		append(abs, sizeof(abs), label(k->x.n, lb, sizeof(lb)));
	append(abs, sizeof(abs), label(k->w.n, lb, sizeof(lb)));
	if (k->bq)
		append(abs, sizeof(abs), label(k->b.n, lb, sizeof(lb)));
	if (k->has_z && k->zq)
		append(abs, sizeof(abs), label(k->z.n, lb, sizeof(lb)));
	if (k->qa) {
		append(abs, sizeof(abs), label(k->qa, lb, sizeof(lb)));
		append(abs, sizeof(abs), label(k->dqa, lb, sizeof(lb)));
		append(abs, sizeof(abs), label(k->add, lb, sizeof(lb)));
	}
	if (k->relu)
		append(abs, sizeof(abs), label(k->relu, lb, sizeof(lb)));
	if (k->q)
		append(abs, sizeof(abs), label(k->q, lb, sizeof(lb)));
	it.absorbed = strdup(abs);
	if (!it.absorbed)
		return ir_diag_err(S->d, IR_ENOMEM, "out of memory");
	/* rewire: readers of the island's output read f's */
	struct ir_value *old = k->out, *nv = f->outputs[0];
	ir_value_replace_uses(old, nv);
	if (old->is_output)
		ir_graph_replace_output(S->g, old, nv);
	char *oname = strdup(old->name);
	int rc = oname ? 0 : ir_diag_err(S->d, IR_ENOMEM, "out of memory");
	if (!rc && k->q)
		rc = ir_node_remove(k->q, S->d);
	if (!rc && k->relu)
		rc = ir_node_remove(k->relu, S->d);
	if (!rc && k->add)
		rc = ir_node_remove(k->add, S->d);
	if (!rc && k->dqa)
		rc = ir_node_remove(k->dqa, S->d);
	if (!rc && k->qa)
		rc = ir_node_remove(k->qa, S->d);
	if (!rc)
		rc = ir_node_remove(k->c, S->d);
	if (!rc)
		rc = ir_value_rename(nv, oname, S->d);
	free(oname);
	if (rc) {
		free(it.absorbed);
		return rc;
	}
	return add_item(&S->r->fused, &S->r->n_fused, &it, S->d);
}

/* Removes DequantizeLinear nodes nobody reads any more. */
static int sweep(struct qf *S)
{
	bool again = true;
	while (again) {
		again = false;
		for (struct ir_node *n = S->g->first, *next; n; n = next) {
			next = n->next;
			if (n->op != IR_OP_DequantizeLinear || n->n_outputs < 1 || !n->outputs[0] ||
			    n->outputs[0]->n_uses || n->outputs[0]->is_output)
				continue;
			int rc = ir_node_remove(n, S->d);
			if (rc)
				return rc;
			again = true;
		}
	}
	return 0;
}

int exec_qfuse(struct ir_model *m, exec_qfuse_supports_fn supports, void *arg, struct exec_qfuse_result *r,
	       struct ir_diag *d)
{
	memset(r, 0, sizeof(*r));
	struct qf S = { .m = m, .g = m->graph, .supports = supports, .arg = arg, .r = r, .d = d };
	/* room for new ids too: every fused node takes one */
	S.n_why = S.g->next_id + S.g->n_nodes + 1;
	S.why = calloc((size_t)S.n_why, sizeof(*S.why));
	if (!S.why)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int n = commute_relu(&S);
	if (n < 0) {
		free(S.why);
		return d->error ? IR_ERR : IR_ENOMEM;
	}
	r->n_commuted = n;
	n = 0;
	for (struct ir_node *c = S.g->first; c; c = c->next)
		n += conv_like(c) || gemm_like(c);
	int *ids = calloc((size_t)(n ? n : 1), sizeof(*ids));
	int rc = ids ? 0 : ir_diag_err(d, IR_ENOMEM, "out of memory");
	n = 0;
	for (struct ir_node *c = S.g->first; !rc && c; c = c->next)
		if (conv_like(c) || gemm_like(c))
			ids[n++] = c->id;
	for (int i = 0; !rc && i < n; i++) {
		struct ir_node *c = ir_node_by_id(S.g, ids[i]);
		if (!c)
			continue;
		struct cand k;
		char why[200] = "";
		if (!analyse(&S, c, &k, why, sizeof(why))) {
			struct dq x;
			if (read_dq(c->inputs[0], &x) && !x.x->init)
				note(&S, x.n, "'%s' (%s) is not fused: %s", c->name ? c->name : "", c->op_type, why);
			continue;
		}
		rc = fuse(&S, &k);
	}
	if (!rc)
		rc = sweep(&S);
	/* the Q/DQ of activations left */
	for (struct ir_node *q = S.g->first; !rc && q; q = q->next) {
		if ((q->op != IR_OP_QuantizeLinear && q->op != IR_OP_DequantizeLinear) || q->n_inputs < 1 ||
		    !q->inputs[0] || q->inputs[0]->init)
			continue;
		struct exec_qfuse_item it = { .node_id = q->id, .orig_id = q->id };
		int dt = q->op == IR_OP_QuantizeLinear ? elem_of(q->outputs[0]) : elem_of(q->inputs[0]);
		snprintf(it.precision, sizeof(it.precision), "%s",
			 dt == IR_INT8 || dt == IR_UINT8 ? "int8" : dt == IR_F8E4M3FN || dt == IR_F8E5M2 ? "fp8"
			 : dt == IR_INT4 || dt == IR_UINT4 ? "int4" : dt ? ir_dtype_name(dt) : "?");
		const char *w = q->id < S.n_why ? S.why[q->id] : NULL;
		if (w) {
			snprintf(it.why, sizeof(it.why), "%s", w);
		} else if (q->op == IR_OP_QuantizeLinear) {
			struct ir_node *p = q->inputs[0]->producer;
			snprintf(it.why, sizeof(it.why), "its input comes from %s%s%s, not a Conv/Gemm/MatMul island",
				 p ? "'" : "", p ? p->op_type : "a graph input", p ? "'" : "");
		} else {
			const struct ir_value *o = q->outputs[0];
			const struct ir_node *u = o && o->n_uses ? o->uses[0].node : NULL;
			snprintf(it.why, sizeof(it.why), "%s%s%s reads it, not a Conv/Gemm/MatMul", u ? "'" : "",
				 u ? u->op_type : "a graph output", u ? "'" : "");
		}
		rc = add_item(&r->left, &r->n_left, &it, d);
	}
	for (int i = 0; i < S.n_why; i++)
		free(S.why[i]);
	free(S.why);
	free(ids);
	if (rc)
		exec_qfuse_result_free(r);
	return rc;
}

void exec_qfuse_result_free(struct exec_qfuse_result *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->n_fused; i++)
		free(r->fused[i].absorbed);
	free(r->fused);
	free(r->left);
	memset(r, 0, sizeof(*r));
}

const struct exec_qfuse_item *exec_qfuse_find(const struct exec_qfuse_result *r, int node_id)
{
	for (int i = 0; r && i < r->n_fused; i++)
		if (r->fused[i].node_id == node_id || r->fused[i].orig_id == node_id)
			return &r->fused[i];
	return NULL;
}
