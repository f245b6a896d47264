/*
 * fuse_layernorm.c - the fuse-layernorm pass: layer normalization and RMS
 * normalization written out with ReduceMean, Sub, Pow, Sqrt, Div... become
 * one LayerNormalization (opset 17) or RMSNormalization (opset 23) node;
 * before opset 17, ogsh's LayerNormalization (domain ai.ogsh, the same op)
 * with a model-local function (fused.c).
 *
 * Anchors are ReduceMean nodes. A ReduceMean whose output is subtracted
 * from its own input is the mean of a layer norm; one that averages a
 * square (x^2 or x*x) of a value that is not such a difference is the
 * mean square of an RMS norm. Only the main graph is looked at.
 *
 * Helpers that other fusion passes have too (const_scalar, sole_reader,
 * remove_nodes...) are static here: pass.h has no shared ones yet.
 */
#include "passes/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN_OPSET 17
#define RMS_OPSET 23
#define MAXN 16

/* ------------------------------------------------------------------------ */
/* Small helpers                                                              */
/* ------------------------------------------------------------------------ */

static int set_attr_num(struct ir_node *n, const char *name, bool is_float, double v, struct ir_diag *d)
{
	struct ir_attr a;
	memset(&a, 0, sizeof(a));
	a.name = strdup(name);
	if (!a.name)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	a.has_type = true;
	if (is_float) {
		a.type = IR_ATTR_FLOAT;
		a.f = (float)v;
	} else {
		a.type = IR_ATTR_INT;
		a.i = (int64_t)v;
	}
	return ir_node_set_attr(n, &a, d);
}

/* x^2 as Pow(x, 2) or Mul(x, x): returns x, or NULL. */
static struct ir_value *square_of(const struct ir_node *n)
{
	if (pass_is_op(n, IR_OP_Pow, 2)) {
		const struct ir_value *e = n->inputs[1];
		const struct ir_tensor *t = e->is_input ? NULL : ir_value_const(e);
		if (t && t->numel == 1 && ir_tensor_data(t) && ir_tensor_get_f64(t, 0) == 2.0)
			return n->inputs[0];
		return NULL;
	}
	if (pass_is_op(n, IR_OP_Mul, 2) && n->inputs[0] == n->inputs[1])
		return n->inputs[0];
	return NULL;
}

/*
 * The axes ReduceMean `r` averages over, when they are the last k axes of
 * its input (of rank `rank`, -1 unknown): returns k, or -1 with why. Axes
 * are an attribute before opset 18 and a constant second input after.
 */
static int last_axes(const struct ir_node *r, int rank, char *why, size_t size)
{
	char nb[64];
	pass_node_name(r, nb, sizeof(nb));
	if (ir_node_attr_int(r, "keepdims", 1) != 1) {
		snprintf(why, size, "%s has keepdims=0", nb);
		return -1;
	}
	int64_t axes[IR_MAX_RANK];
	int n = -1;   /* -1: every axis */
	const struct ir_attr *a = ir_node_attr(r, "axes");
	if (a) {
		if (a->type != IR_ATTR_INTS || a->n > IR_MAX_RANK) {
			snprintf(why, size, "%s's axes attribute is not a list of ints", nb);
			return -1;
		}
		n = (int)a->n;
		for (int i = 0; i < n; i++)
			axes[i] = a->ints[i];
	} else if (r->n_inputs >= 2 && r->inputs[1]) {
		const struct ir_value *v = r->inputs[1];
		const struct ir_tensor *t = v->is_input ? NULL : ir_value_const(v);
		if (!t || !ir_dtype_is_int(t->dtype) || t->rank > 1 || t->numel > IR_MAX_RANK ||
		    (t->numel && !ir_tensor_data(t))) {
			snprintf(why, size, "%s's axes '%s' are not a constant list of ints", nb, v->name);
			return -1;
		}
		n = (int)t->numel;
		for (int i = 0; i < n; i++)
			if (!ir_elem_to_i64(t->dtype, ir_tensor_data(t), (uint64_t)i, &axes[i])) {
				snprintf(why, size, "%s's axes '%s' are not a constant list of ints", nb, v->name);
				return -1;
			}
		if (n == 0) {
			if (ir_node_attr_int(r, "noop_with_empty_axes", 0)) {
				snprintf(why, size, "%s reduces nothing (noop_with_empty_axes)", nb);
				return -1;
			}
			n = -1;
		}
	}
	if (n < 0) {   /* every axis */
		if (rank < 0) {
			snprintf(why, size, "%s averages over every axis and the rank of its input is not known", nb);
			return -1;
		}
		return rank;
	}
	bool seen[IR_MAX_RANK + 1] = { false };
	for (int i = 0; i < n; i++) {
		int64_t ax = axes[i];
		if (ax >= 0) {
			if (rank < 0) {
				snprintf(why, size, "%s's axis %lld cannot be placed: the rank of its input is not known", nb,
					 (long long)ax);
				return -1;
			}
			ax -= rank;
		}
		if (ax >= 0 || ax < -IR_MAX_RANK || (rank >= 0 && ax < -rank) || seen[-ax]) {
			snprintf(why, size, "%s has an invalid axis %lld", nb, (long long)axes[i]);
			return -1;
		}
		seen[-ax] = true;
	}
	for (int i = 1; i <= n; i++)
		if (!seen[i]) {
			snprintf(why, size, "%s does not average over the last axes (a layer norm normalizes the last "
				 "%d axes)", nb, n);
			return -1;
		}
	return n;
}

struct match {
	bool rms;
	struct ir_value *x;
	int k;                        /* normalized axes: the last k */
	double eps;
	struct ir_value *gamma, *beta;
	struct ir_node *nodes[MAXN];
	int n;
	struct ir_node *last;
	char stop[192];               /* why the pattern stopped before a following Mul/Add, or "" */
	char why[256];
};

static void add(struct match *m, struct ir_node *n)
{
	if (m->n < MAXN)
		m->nodes[m->n++] = n;
}

/*
 * Whether constant c (a scale or bias) only stretches along the normalized
 * axes of x: rank at most x's, 1 on the leading axes, 1 or the size on the
 * last k. Then Mul/Add by it keeps x's shape and LayerNormalization can take
 * it expanded to the normalized shape.
 */
static bool fits_normalized(const struct ir_tensor *t, const struct ir_type *xt, int k)
{
	if (t->rank > xt->rank)
		return false;
	for (int i = 0; i < t->rank; i++) {
		int xi = xt->rank - t->rank + i;
		if (xi < xt->rank - k) {
			if (t->dims[i] != 1)
				return false;
		} else if (t->dims[i] != 1 && t->dims[i] != xt->dims[xi].value) {
			return false;
		}
	}
	return true;
}

/* The optional "* gamma + beta" (or "+ beta") after the normalized value. */
static void match_affine(struct match *m, const struct ir_type *xt)
{
	struct ir_value *y = m->last->outputs[0];
	bool had_mul = false;
	for (;;) {
		struct ir_node *r = pass_only_reader(y);
		bool mul = pass_is_op(r, IR_OP_Mul, 2), sum = pass_is_op(r, IR_OP_Add, 2);
		if ((!mul && !sum) || (mul && had_mul) || (sum && m->rms))
			return;
		struct ir_value *o = pass_other_input(r, y);
		if (!o)
			return;
		const struct ir_tensor *t = o->is_input ? NULL : ir_value_const(o);
		const char *what = mul ? "Mul" : "Add";
		if (!t) {
			snprintf(m->stop, sizeof(m->stop), "the %s by '%s' after it stays: '%s' is not a constant", what,
				 o->name, o->name);
			return;
		}
		if (t->dtype != xt->elem || !fits_normalized(t, xt, m->k)) {
			snprintf(m->stop, sizeof(m->stop), "the %s by '%s' after it stays: its type or shape is not a %s "
				 "over the normalized axes", what, o->name, mul ? "scale" : "bias");
			return;
		}
		if (mul) {
			m->gamma = o;
			had_mul = true;
		} else {
			m->beta = o;
		}
		add(m, r);
		m->last = r;
		y = r->outputs[0];
		if (sum)
			return;
	}
}

/*
 * From the mean square (or variance) value `var` on: [+ eps] -> Sqrt ->
 * Div(num, s) or Mul(num, Reciprocal(s)). Sets m->last to the division.
 */
static bool match_denominator(struct match *m, struct ir_value *var, const struct ir_value *num, int rank)
{
	struct ir_node *r = pass_sole_reader(var, m->why, sizeof(m->why));
	if (!r)
		return false;
	m->eps = 0;
	if (pass_is_op(r, IR_OP_Add, 2)) {
		struct ir_value *o = pass_other_input(r, var);
		if (!o || !pass_const_scalar(o, rank, &m->eps)) {
			snprintf(m->why, sizeof(m->why), "epsilon ('%s') is not a constant scalar", o ? o->name : var->name);
			return false;
		}
		if (!(m->eps >= 0) || m->eps > 1) {
			snprintf(m->why, sizeof(m->why), "epsilon %g is not a small non-negative number", m->eps);
			return false;
		}
		add(m, r);
		if (!(r = pass_sole_reader(r->outputs[0], m->why, sizeof(m->why))))
			return false;
	}
	if (!pass_is_op(r, IR_OP_Sqrt, 1)) {
		snprintf(m->why, sizeof(m->why), "'%s' is not followed by [+ epsilon and] Sqrt", var->name);
		return false;
	}
	add(m, r);
	struct ir_value *s = r->outputs[0];
	if (!(r = pass_sole_reader(s, m->why, sizeof(m->why))))
		return false;
	if (pass_is_op(r, IR_OP_Div, 2) && r->inputs[0] == num && r->inputs[1] == s) {
		add(m, r);
		m->last = r;
		return true;
	}
	if (pass_is_op(r, IR_OP_Reciprocal, 1)) {
		add(m, r);
		struct ir_value *rs = r->outputs[0];
		if (!(r = pass_sole_reader(rs, m->why, sizeof(m->why))))
			return false;
		if (pass_is_op(r, IR_OP_Mul, 2) && pass_other_input(r, rs) == num) {
			add(m, r);
			m->last = r;
			return true;
		}
	}
	snprintf(m->why, sizeof(m->why), "'%s' does not divide '%s'", s->name, num->name);
	return false;
}

/*
 * A layer norm from its first ReduceMean. Returns 1 matched, 0 not a
 * candidate, -1 rejected (m->why).
 */
static int match_ln(struct match *m, struct ir_node *r1)
{
	struct ir_value *x = r1->inputs[0], *mean = r1->outputs[0];
	struct ir_node *sub = NULL;
	for (size_t i = 0; i < mean->n_uses; i++) {
		struct ir_node *u = mean->uses[i].node;
		if (pass_is_op(u, IR_OP_Sub, 2) && u->inputs[0] == x && u->inputs[1] == mean)
			sub = u;
	}
	if (!sub)
		return 0;
	m->x = x;
	add(m, r1);
	if (!pass_sole_reader(mean, m->why, sizeof(m->why)))
		return -1;
	add(m, sub);
	int rank = pass_rank_of(x);
	if ((m->k = last_axes(r1, rank, m->why, sizeof(m->why))) < 0)
		return -1;
	struct ir_value *d = sub->outputs[0];
	if (d->is_output) {
		snprintf(m->why, sizeof(m->why), "'%s' (x - mean) is also a graph output", d->name);
		return -1;
	}
	/* d is read by the square and by the division, and by nothing else */
	struct ir_node *sq = NULL;
	size_t want = 0;
	for (size_t i = 0; i < d->n_uses; i++) {
		struct ir_node *u = d->uses[i].node;
		if (!sq && square_of(u) == d) {
			sq = u;
			want += u->inputs[0] == u->inputs[1] ? 2 : 1;
		}
	}
	if (!sq) {
		snprintf(m->why, sizeof(m->why), "'%s' (x - mean) is not squared", d->name);
		return -1;
	}
	add(m, sq);
	struct ir_node *r2 = pass_sole_reader(sq->outputs[0], m->why, sizeof(m->why));
	if (!r2)
		return -1;
	if (!pass_is_op(r2, IR_OP_ReduceMean, r2->n_inputs) || r2->n_inputs < 1 || r2->n_inputs > 2) {
		snprintf(m->why, sizeof(m->why), "the square of '%s' is not averaged by a ReduceMean", d->name);
		return -1;
	}
	int k2 = last_axes(r2, rank, m->why, sizeof(m->why));
	if (k2 < 0)
		return -1;
	if (k2 != m->k) {
		snprintf(m->why, sizeof(m->why), "the mean is over the last %d axes but the variance over the last %d",
			 m->k, k2);
		return -1;
	}
	add(m, r2);
	if (!match_denominator(m, r2->outputs[0], d, rank))
		return -1;
	want += 1;   /* the division */
	if (d->n_uses != want) {
		snprintf(m->why, sizeof(m->why), "'%s' (x - mean) is also read outside the layer norm (%zu readers)",
			 d->name, d->n_uses - (want - 1));
		return -1;
	}
	return 1;
}

/*
 * An RMS norm from its ReduceMean (of a square). Returns 1 matched, 0 not a
 * candidate (not a square, or the variance of a layer norm), -1 rejected.
 */
static int match_rms(struct match *m, struct ir_node *r)
{
	struct ir_node *sq = pass_producer(r->inputs[0]);
	struct ir_value *x = sq ? square_of(sq) : NULL;
	if (!x)
		return 0;
	struct ir_node *sub = pass_producer(x);
	struct ir_node *mean = pass_is_op(sub, IR_OP_Sub, 2) ? pass_producer(sub->inputs[1]) : NULL;
	if (mean && mean->op == IR_OP_ReduceMean && mean->n_inputs >= 1 && mean->inputs[0] == sub->inputs[0])
		return 0;   /* the variance of a layer norm: match_ln's */
	bool rooted = false;   /* a mean of squares that no Sqrt follows is not an RMS norm */
	for (size_t i = 0; i < r->outputs[0]->n_uses; i++) {
		int op = r->outputs[0]->uses[i].node->op;
		rooted = rooted || op == IR_OP_Sqrt || op == IR_OP_Add;
	}
	if (!rooted)
		return 0;
	m->rms = true;
	m->x = x;
	add(m, r);
	int rank = pass_rank_of(x);
	if ((m->k = last_axes(r, rank, m->why, sizeof(m->why))) < 0)
		return -1;
	if (!pass_sole_reader(sq->outputs[0], m->why, sizeof(m->why)))
		return -1;
	add(m, sq);
	if (!match_denominator(m, r->outputs[0], x, rank))
		return -1;
	return 1;
}

/* ------------------------------------------------------------------------ */
/* The rewrite                                                                */
/* ------------------------------------------------------------------------ */

/*
 * The scale or bias input: the constant itself when it already has the
 * normalized shape, else a new initializer expanded to it (ones when absent).
 */
static struct ir_value *norm_param(struct pass_ctx *c, struct ir_value *v, const struct ir_type *xt, int k,
				   const char *base)
{
	const struct ir_tensor *t = v ? ir_value_const(v) : NULL;
	int64_t dims[IR_MAX_RANK];
	uint64_t total = 1;
	for (int i = 0; i < k; i++) {
		dims[i] = xt->dims[xt->rank - k + i].value;
		total *= (uint64_t)dims[i];
	}
	if (t && t->rank == k) {
		bool same = true;
		for (int i = 0; i < k; i++)
			same = same && t->dims[i] == dims[i];
		if (same)
			return v;
	}
	double *src = t ? pass_tensor_f64(t) : NULL;
	double *out = malloc(sizeof(double) * (total ? total : 1));
	if ((t && !src) || !out) {
		free(src);
		free(out);
		ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	for (uint64_t e = 0; e < total; e++) {
		if (!t) {
			out[e] = 1.0;
			continue;
		}
		/* index of element e (in the normalized shape) in t, broadcasting its 1s */
		uint64_t rem = e, idx = 0, stride = 1;
		for (int i = k - 1; i >= 0; i--) {
			uint64_t ci = rem % (uint64_t)dims[i];
			rem /= (uint64_t)dims[i];
			int ti = t->rank - k + i;
			if (ti >= 0) {
				if (t->dims[ti] != 1)
					idx += ci * stride;
				stride *= (uint64_t)t->dims[ti];
			}
		}
		out[e] = src[idx];
	}
	struct ir_tensor *nt = pass_tensor_from_f64(xt->elem, k, dims, out, c->d);
	free(src);
	free(out);
	if (!nt)
		return NULL;
	struct ir_value *nv = pass_new_init(c->m->graph, base, nt, c->d);
	ir_tensor_unref(nt);
	return nv;
}

static const char *op_names(const struct match *m, char *buf, size_t size)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < m->n; i++)
		k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%s", i ? ", " : "", m->nodes[i]->op_type);
	return buf;
}

static int rewrite(struct pass_ctx *c, struct match *m, struct ir_node *anchor, const struct ir_type *xt, bool ogsh)
{
	struct ir_graph *g = c->m->graph;
	const char *op = m->rms ? "RMSNormalization" : "LayerNormalization";
	char base[160];
	snprintf(base, sizeof(base), "%s_scale", m->x->name);
	struct ir_value *scale = norm_param(c, m->gamma, xt, m->k, base);
	if (!scale)
		return IR_ERR;
	struct ir_value *bias = NULL;
	if (m->beta) {
		snprintf(base, sizeof(base), "%s_bias", m->x->name);
		if (!(bias = norm_param(c, m->beta, xt, m->k, base)))
			return IR_ERR;
	}
	char *name = pass_new_node_name(g, anchor, op);
	if (!name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_node *n = ir_node_new(g, op, ogsh ? FUSED_DOMAIN : NULL, name, bias ? 3 : 2, 1, m->last);
	free(name);
	if (!n)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	int rc = ir_node_set_input(n, 0, m->x);
	if (!rc)
		rc = ir_node_set_input(n, 1, scale);
	if (!rc && bias)
		rc = ir_node_set_input(n, 2, bias);
	if (!rc)
		rc = set_attr_num(n, "axis", false, -m->k, c->d);
	if (!rc)
		rc = set_attr_num(n, "epsilon", true, m->eps, c->d);
	if (!rc && ogsh)
		rc = pass_fused_layernorm_fn(c, n, m->k, m->eps, bias != NULL, xt->elem);
	struct ir_value *y = m->last->outputs[0];
	if (!rc)
		rc = ir_node_set_output(m->last, 0, NULL, c->d);
	if (!rc)
		rc = ir_node_set_output(n, 0, y, c->d);
	if (rc)
		return rc;
	pass_set_from(n, m->nodes, m->n);
	char ops[512], sc[200], bi[200];
	op_names(m, ops, sizeof(ops));
	snprintf(sc, sizeof(sc), m->gamma ? "'%s'" : "ones (no Mul by a scale)", m->gamma ? m->gamma->name : "");
	snprintf(bi, sizeof(bi), m->rms ? "" : m->beta ? ", bias '%s'" : ", no bias", m->beta ? m->beta->name : "");
	int count = m->n;
	rc = pass_remove_nodes(c, m->nodes, m->n);
	if (rc)
		return rc;
	pass_rewrote(c, n, "%d nodes (%s) fused into %s%s of '%s' (axis %d, epsilon %g, scale %s%s)%s%s", count, ops, op,
		     ogsh ? " (ai.ogsh: the model's opset is older than 17)" : "", m->x->name, -m->k, m->eps, sc, bi,
		     m->stop[0] ? "; " : "", m->stop);
	return 0;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "stopped" : "out of memory");
	int64_t opset = ir_model_opset(c->m, "");
	int n_ids = 0, *ids = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
	if (!ids)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	ir_for_each_node(g, n)
		if (n->op == IR_OP_ReduceMean && n->n_inputs >= 1 && n->n_inputs <= 2 && n->inputs[0] && n->n_outputs == 1 &&
		    n->outputs[0])
			ids[n_ids++] = n->id;
	for (int i = 0; i < n_ids && !rc; i++) {
		struct ir_node *a = ir_node_by_id(g, ids[i]);
		if (!a)
			continue;   /* went with an earlier rewrite */
		struct match m;
		memset(&m, 0, sizeof(m));
		int ok = match_ln(&m, a);
		if (!ok) {
			memset(&m, 0, sizeof(m));
			ok = match_rms(&m, a);
		}
		if (!ok)
			continue;
		const char *what = m.rms ? "RMS norm" : "layer norm";
		if (ok < 0) {
			pass_rejected(c, a, "%s of '%s' not fused: %s", what, m.x->name, m.why);
			continue;
		}
		int need = m.rms ? RMS_OPSET : LN_OPSET;
		bool ogsh = false;
		if (opset < need && m.rms) {
			pass_rejected(c, a, "%s of '%s' found, but the model imports opset %lld; RMSNormalization needs %d",
				      what, m.x->name, (long long)opset, need);
			continue;
		}
		if (opset < need) {
			/* ogsh's LayerNormalization, written out in the function it gets */
			char fw[200];
			if (!pass_fused_opset(c->m, fw, sizeof(fw))) {
				pass_rejected(c, a, "%s of '%s' found, but the model imports opset %lld (LayerNormalization "
					      "needs %d) and ogsh's LayerNormalization cannot be used: %s", what, m.x->name,
					      (long long)opset, need, fw);
				continue;
			}
			ogsh = true;
		}
		const struct ir_type *xt = ir_value_type(m.x);
		if (!xt || xt->kind != IR_TYPE_TENSOR || !ir_dtype_is_float(xt->elem)) {
			pass_rejected(c, a, "%s of '%s' not fused: its element type is not known to be floating-point", what,
				      m.x->name);
			continue;
		}
		if (xt->rank < m.k) {
			pass_rejected(c, a, "%s of '%s' not fused: the rank of '%s' is not known", what, m.x->name, m.x->name);
			continue;
		}
		bool dims_known = true;
		for (int j = xt->rank - m.k; j < xt->rank; j++)
			dims_known = dims_known && xt->dims[j].kind == IR_DIM_VALUE && xt->dims[j].value > 0;
		if (!dims_known) {
			char ts[128];
			pass_rejected(c, a, "%s of '%s' not fused: the size of the normalized axes of %s is not known", what,
				      m.x->name, ir_type_str(xt, ts, sizeof(ts)));
			continue;
		}
		m.stop[0] = 0;
		match_affine(&m, xt);
		rc = rewrite(c, &m, a, xt, ogsh);
	}
	free(ids);
	return rc;
}

const struct pass pass_fuse_layernorm = {
	.name = "fuse-layernorm",
	.summary = "fuse layer norms and RMS norms written out with ReduceMean into LayerNormalization/RMSNormalization (before opset 17 ogsh's LayerNormalization)",
	.explain =
		"Layer normalization rescales each row of x (the last axis, or the last k axes) to mean 0 and "
		"variance 1, then applies a learned scale and bias: mean = ReduceMean(x), d = x - mean, "
		"var = ReduceMean(d * d), y = d / sqrt(var + eps) * gamma + beta. Exporters before opset 17 write it "
		"as nine nodes (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), each reading and "
		"writing a whole tensor. This pass puts one LayerNormalization(x, gamma, beta, axis=-k, "
		"epsilon=eps) node (opset 17) in their place.\n\n"
		"Variants it accepts: the square as Pow(d, 2) or d * d; the division as Div(d, s) or "
		"d * Reciprocal(s); no epsilon (epsilon 0); no bias (LayerNormalization with a scale only); no "
		"scale (a scale of ones is made). A scale or bias that is not a constant, or whose shape would "
		"stretch x beyond the normalized axes, stays outside as its own Mul or Add. ReduceMean's axes are "
		"an attribute before opset 18 and a constant input from 18 on: both are read, and they must be "
		"the last axes of x (keepdims=1). The size of the normalized axes must be known (it is the shape "
		"of the scale).\n\n"
		"RMS normalization (LLaMA, T5) leaves out the mean: y = x / sqrt(ReduceMean(x^2) + eps) * gamma. "
		"It becomes RMSNormalization(x, gamma, axis=-k, epsilon=eps), which needs opset 23.\n\n"
		"Nothing is fused when a value inside the pattern is read by anything else (another node, a "
		"subgraph, a graph output), when epsilon or the exponent 2 is not a constant, or, for an RMS norm, "
		"when the model imports an opset older than 23: the pass does not change the model's opset.\n\n"
		"Before opset 17 (BERT and most transformers exported with opset 11 to 16), where ONNX has no "
		"LayerNormalization, a layer norm becomes ogsh's own LayerNormalization (domain ai.ogsh): the same "
		"op with the same inputs, attributes and kernels. The saved model stays runnable elsewhere: it gets "
		"a model-local ONNX function (domain ai.ogsh, name LayerNormalization, overload such as 'last1') "
		"whose body is the nine nodes again, its IR version becomes 10 and it imports ai.ogsh version 1. "
		"That needs opset 9 or later.\n\n"
		"LayerNormalization computes the mean and variance in float32 (stash_type 1), as the "
		"written-out float32 graph does, so outputs agree to rounding. Only the main graph is rewritten.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
