/*
 * fuse_attention.c - the fuse-attention pass: scaled dot-product attention
 * written out as MatMul, scale, mask, Softmax, MatMul becomes one Attention
 * node (ONNX opset 23) on the 4-D Q, K, V, or an ai.ogsh FusedAttention
 * (older opsets, the exporters' NaN guard, the [batch, seq, heads, size]
 * layout that saves the transposes around it).
 *
 * Anchors are Softmax nodes that read (through scale and mask ops) a
 * MatMul or feed one: the block is followed back from the Softmax to the
 * scores MatMul(Q, K^T) and forward to MatMul(weights, V). Shapes come
 * from shape inference; a dim it cannot show is never assumed. Only the
 * main graph is looked at. The forms of the generated BERT (Div, Add of
 * the extended mask) and GPT-2 (Div, Where with the causal mask, Add of
 * the padding mask) models are handled; others are rejected with a reason.
 *
 * Helpers that other fusion passes have too (const_scalar, sole_reader,
 * remove_nodes...) are static here: pass.h has no shared ones yet.
 */
#include "passes/fused.h"
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_OPSET 23
#define MAXN 16

/* ------------------------------------------------------------------------ */
/* Small helpers                                                              */
/* ------------------------------------------------------------------------ */

static int set_attr_float(struct ir_node *n, const char *name, double v, struct ir_diag *d)
{
	struct ir_attr a;
	memset(&a, 0, sizeof(a));
	a.name = strdup(name);
	if (!a.name)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	a.type = IR_ATTR_FLOAT;
	a.has_type = true;
	a.f = (float)v;
	return ir_node_set_attr(n, &a, d);
}

/* How a mask step between the scaled scores and the Softmax combines. */
enum { PART_ADD, PART_WHERE_KEEP_TRUE, PART_WHERE_KEEP_FALSE };

struct part {
	int kind;
	struct ir_node *n;
	struct ir_value *m;     /* Add: the mask; Where: the condition */
	struct ir_value *fill;  /* Where: the value masked scores get */
};

struct match {
	struct ir_node *sm, *qk, *scale_op, *pv;
	struct ir_value *q, *kt, *v;
	double scale;
	bool nan_zero;          /* the weights pass Where(IsNaN(p), 0, p) */
	struct part parts[4];   /* from the Softmax backwards */
	int n_parts;
	struct ir_node *nodes[MAXN];
	int n;
	char why[320];
};

static void add(struct match *m, struct ir_node *n)
{
	if (m->n < MAXN)
		m->nodes[m->n++] = n;
}

/* Whether v comes from a MatMul through at most `depth` Add/Where/Mul/Div nodes. */
static bool from_matmul(const struct ir_value *v, int depth)
{
	const struct ir_node *p = pass_producer(v);
	if (!p)
		return false;
	if (p->op == IR_OP_MatMul)
		return true;
	if (depth <= 0 || (p->op != IR_OP_Add && p->op != IR_OP_Where && p->op != IR_OP_Mul && p->op != IR_OP_Div))
		return false;
	for (int i = 0; i < p->n_inputs; i++)
		if (p->inputs[i] && from_matmul(p->inputs[i], depth - 1))
			return true;
	return false;
}

static bool same_dim(const struct ir_type *a, int i, const struct ir_type *b, int j)
{
	return ir_dim_equal(&a->dims[i], &b->dims[j]) && a->dims[i].kind != IR_DIM_UNKNOWN;
}

static const struct ir_type *tensor4(const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	return t && t->kind == IR_TYPE_TENSOR && t->rank == 4 ? t : NULL;
}

/* Returns 1 matched, 0 not an attention candidate, -1 rejected (m->why). */
static int match(struct match *m, struct ir_node *sm)
{
	m->sm = sm;
	struct ir_value *p = sm->outputs[0];
	bool feeds_matmul = false;
	for (size_t i = 0; i < p->n_uses; i++)
		feeds_matmul = feeds_matmul || (p->uses[i].node->op == IR_OP_MatMul && p->uses[i].slot == 0);
	if (!feeds_matmul && !from_matmul(sm->inputs[0], 4))
		return 0;
	/* backwards from the Softmax: mask steps, then at most one scale, then MatMul(Q, K^T) */
	struct ir_value *s = sm->inputs[0];
	m->scale = 1.0;
	for (int step = 0;; step++) {
		if (!pass_sole_reader(s, m->why, sizeof(m->why)))
			return -1;
		struct ir_node *n = pass_producer(s);
		if (pass_is_op(n, IR_OP_MatMul, 2)) {
			m->qk = n;
			break;
		}
		if (step >= 6) {
			snprintf(m->why, sizeof(m->why), "too many ops between the scores MatMul and the Softmax");
			return -1;
		}
		double k;
		if (pass_is_op(n, IR_OP_Div, 2) || pass_is_op(n, IR_OP_Mul, 2)) {
			int ci = pass_const_scalar(n->inputs[1], 4, &k) ? 1 : n->op == IR_OP_Mul && pass_const_scalar(n->inputs[0], 4, &k) ? 0 : -1;
			if (ci < 0 || m->scale_op) {
				snprintf(m->why, sizeof(m->why), "the scores are %s by '%s', which is not a constant scalar "
					 "scale", n->op == IR_OP_Div ? "divided" : "multiplied", n->inputs[1]->name);
				return -1;
			}
			if (!(k != 0 && isfinite(k))) {
				snprintf(m->why, sizeof(m->why), "the scale %g is not a finite non-zero number", k);
				return -1;
			}
			m->scale = n->op == IR_OP_Div ? 1.0 / k : k;
			m->scale_op = n;
			add(m, n);
			s = n->inputs[1 - ci];
			continue;
		}
		if (m->scale_op || m->n_parts >= 4) {
			snprintf(m->why, sizeof(m->why), "'%s' (%s) comes between the scores MatMul and the scale: only "
				 "a scale, then mask steps, are understood", s->name, n ? n->op_type : "a graph input");
			return -1;
		}
		struct part *pt = &m->parts[m->n_parts];
		if (pass_is_op(n, IR_OP_Add, 2)) {
			int si = from_matmul(n->inputs[0], 4) && !from_matmul(n->inputs[1], 4) ? 0
				 : from_matmul(n->inputs[1], 4) && !from_matmul(n->inputs[0], 4) ? 1 : -1;
			if (si < 0) {
				snprintf(m->why, sizeof(m->why), "cannot tell the scores from the mask in '%s'", n->name);
				return -1;
			}
			pt->kind = PART_ADD;
			pt->m = n->inputs[1 - si];
			s = n->inputs[si];
		} else if (pass_is_op(n, IR_OP_Where, 3)) {
			int si = from_matmul(n->inputs[1], 4) ? 1 : from_matmul(n->inputs[2], 4) ? 2 : -1;
			double f;
			if (si < 0 || !pass_const_scalar(n->inputs[3 - si], 4, &f)) {
				snprintf(m->why, sizeof(m->why), "the Where '%s' does not choose between the scores and a "
					 "constant fill value", n->name);
				return -1;
			}
			if (!(f == -INFINITY || f <= -1e30)) {
				snprintf(m->why, sizeof(m->why), "the Where '%s' fills masked scores with %g: moving it into "
					 "an additive mask is exact only for -inf or a fill below -1e30 (such as float32's "
					 "lowest, -3.4e38)", n->name, f);
				return -1;
			}
			pt->kind = si == 1 ? PART_WHERE_KEEP_TRUE : PART_WHERE_KEEP_FALSE;
			pt->m = n->inputs[0];
			pt->fill = n->inputs[3 - si];
			s = n->inputs[si];
		} else {
			snprintf(m->why, sizeof(m->why), "the softmax's input is not computed from a MatMul of Q and K "
				 "through a scale and a mask ('%s' comes from %s)", s->name, n ? n->op_type : "no node");
			return -1;
		}
		pt->n = n;
		m->n_parts++;
		add(m, n);
	}
	add(m, m->qk);
	add(m, sm);
	/* constant scales on Q and K^T themselves (torch's exporter multiplies
	 * both by sqrt(scale)), when the scores MatMul is all that reads them */
	struct ir_value *qkin[2] = { m->qk->inputs[0], m->qk->inputs[1] };
	for (int side = 0; side < 2; side++) {
		struct ir_node *mn = pass_producer(qkin[side]);
		char why[160];
		double k;
		if (!pass_is_op(mn, IR_OP_Mul, 2) || pass_sole_reader(qkin[side], why, sizeof(why)) != m->qk)
			continue;
		int ci = pass_const_scalar(mn->inputs[1], 4, &k) ? 1 : pass_const_scalar(mn->inputs[0], 4, &k) ? 0 : -1;
		if (ci < 0 || !(k != 0 && isfinite(k)))
			continue;
		m->scale *= k;
		qkin[side] = mn->inputs[1 - ci];
		add(m, mn);
	}
	m->q = qkin[0];
	m->kt = qkin[1];
	/* the exporters' guard for rows masked everywhere: Where(IsNaN(p), 0, p) */
	struct ir_value *w = p;
	if (p->n_uses == 2 && !p->is_output) {
		struct ir_node *isn = NULL, *wh = NULL;
		for (size_t i = 0; i < 2; i++) {
			struct ir_node *r = p->uses[i].node;
			if (pass_is_op(r, IR_OP_IsNaN, 1))
				isn = r;
			else if (pass_is_op(r, IR_OP_Where, 3))
				wh = r;
		}
		char why[160];
		double z;
		if (isn && wh && pass_sole_reader(isn->outputs[0], why, sizeof(why)) == wh &&
		    wh->inputs[0] == isn->outputs[0] && wh->inputs[2] == p && pass_const_scalar(wh->inputs[1], 4, &z) &&
		    z == 0) {
			m->nan_zero = true;
			add(m, isn);
			add(m, wh);
			w = wh->outputs[0];
		}
	}
	m->pv = pass_sole_reader(w, m->why, sizeof(m->why));
	if (!m->pv)
		return -1;
	if (!pass_is_op(m->pv, IR_OP_MatMul, 2) || m->pv->inputs[0] != w) {
		snprintf(m->why, sizeof(m->why), "the attention weights '%s' are not multiplied with V by a MatMul", w->name);
		return -1;
	}
	add(m, m->pv);
	m->v = m->pv->inputs[1];
	/* the softmax runs over the keys */
	int64_t axis = ir_node_attr_int(sm, "axis", -1);
	if (axis != -1 && axis != 3) {
		snprintf(m->why, sizeof(m->why), "the softmax is over axis %lld, not the last (keys) axis", (long long)axis);
		return -1;
	}
	/* shapes: Q [B,H,S,D], K^T [B,H,D,T], V [B,H,T,Dv], every mask step keeping the scores' shape */
	const struct ir_type *tq = tensor4(m->q), *tk = tensor4(m->kt), *tv = tensor4(m->v), *ts = tensor4(m->qk->outputs[0]);
	if (!tq || !tk || !tv || !ts) {
		const struct ir_value *bad = !tq ? m->q : !tk ? m->kt : !tv ? m->v : m->qk->outputs[0];
		snprintf(m->why, sizeof(m->why), "'%s' is not known to be 4-D (Attention's Q, K, V are [batch, heads, "
			 "sequence, head size])", bad->name);
		return -1;
	}
	if (!ir_dtype_is_float(tq->elem) || tk->elem != tq->elem || tv->elem != tq->elem) {
		snprintf(m->why, sizeof(m->why), "Q, K and V are not all of one floating-point type");
		return -1;
	}
	char a[96], b[96], c3[96];
	if (!same_dim(tq, 0, tk, 0) || !same_dim(tq, 0, tv, 0) || !same_dim(tq, 1, tk, 1) || !same_dim(tq, 1, tv, 1) ||
	    !same_dim(tq, 3, tk, 2) || !same_dim(tk, 3, tv, 2)) {
		snprintf(m->why, sizeof(m->why), "cannot tell that Q %s, K^T %s and V %s agree in batch, heads, head "
			 "size and key length", ir_type_str(tq, a, sizeof(a)), ir_type_str(tk, b, sizeof(b)),
			 ir_type_str(tv, c3, sizeof(c3)));
		return -1;
	}
	for (int i = 0; i < m->n_parts; i++) {
		const struct ir_type *to = tensor4(m->parts[i].n->outputs[0]);
		bool same = to != NULL;
		for (int j = 0; same && j < 4; j++)
			same = same_dim(to, j, ts, j);
		if (!same) {
			snprintf(m->why, sizeof(m->why), "cannot tell that the mask step '%s' keeps the scores' shape %s",
				 m->parts[i].n->name, ir_type_str(ts, a, sizeof(a)));
			return -1;
		}
		/* Attention reads a mask whose last axis is shorter than the keys as
		 * masking the keys it does not reach: a mask (or bias) broadcast
		 * along the keys would change meaning */
		const struct ir_type *tm = ir_value_type(m->parts[i].m);
		if (!tm || tm->kind != IR_TYPE_TENSOR || tm->rank < 1 || !same_dim(tm, tm->rank - 1, ts, 3)) {
			snprintf(m->why, sizeof(m->why), "the mask '%s' is not known to span the keys (its last axis must be "
				 "the key length of the scores %s: Attention masks out keys a shorter mask does not reach)",
				 m->parts[i].m->name, ir_type_str(ts, a, sizeof(a)));
			return -1;
		}
	}
	return 1;
}

/* pass_emit's new value (and the node in *made); NULL on error. */
static struct ir_value *emit(struct pass_ctx *c, const char *op, const struct ir_node *anchor, struct ir_value **ins,
			     int n_in, const char *out_base, struct ir_node *before, struct ir_node **made)
{
	struct ir_node *n = pass_emit(c, op, anchor, ins, n_in, out_base, before);
	if (made)
		*made = n;
	return n ? n->outputs[0] : NULL;
}

/* An int64 initializer of rank 1 holding v[0..n-1]. */
static struct ir_value *i64_init(struct pass_ctx *c, const char *base, const int64_t *v, int n)
{
	int64_t dims[1] = { n };
	struct ir_tensor *t = ir_tensor_new(IR_INT64, 1, dims, c->d);
	if (!t)
		return NULL;
	int64_t *p = ir_tensor_mutable(t);
	for (int i = 0; i < n; i++)
		p[i] = v[i];
	struct ir_value *iv = pass_new_init(c->m->graph, base, t, c->d);
	ir_tensor_unref(t);
	return iv;
}

/*
 * Whether the mask is known to have the query length on its second-to-last
 * axis: some part of it has (the parts broadcast together).
 */
static bool mask_has_rows(const struct match *m)
{
	const struct ir_type *ts = tensor4(m->qk->outputs[0]);
	for (int i = 0; i < m->n_parts; i++) {
		const struct ir_type *t = ir_value_type(m->parts[i].m);
		if (t && t->kind == IR_TYPE_TENSOR && t->rank >= 2 && ir_dim_equal(&t->dims[t->rank - 2], &ts->dims[2]) &&
		    t->dims[t->rank - 2].kind != IR_DIM_UNKNOWN)
			return true;
	}
	return false;
}

/*
 * mask expanded to [.., queries, keys]: Expand(mask, Concat([1,1], Shape(Q)[2:3], [1])).
 * ONNX lets Attention broadcast the mask over the query axis, but ONNX
 * Runtime's kernel wants it spelled out, and saved models should run there.
 */
static struct ir_value *expand_rows(struct pass_ctx *c, struct match *m, struct ir_value *mask, struct ir_node *before)
{
	char base[200];
	struct ir_node *sh = NULL;
	snprintf(base, sizeof(base), "%s_qlen", m->q->name);
	struct ir_value *ql = emit(c, "Shape", m->sm, &m->q, 1, base, before, &sh);
	if (!ql || pass_set_int_attr(sh, "start", 2, c->d) || pass_set_int_attr(sh, "end", 3, c->d))
		return NULL;
	static const int64_t ones[2] = { 1, 1 };
	struct ir_value *o2 = i64_init(c, "attn_mask_ones2", ones, 2), *o1 = i64_init(c, "attn_mask_ones1", ones, 1);
	if (!o2 || !o1)
		return NULL;
	struct ir_value *parts[3] = { o2, ql, o1 };
	struct ir_node *cat = NULL;
	snprintf(base, sizeof(base), "%s_rows", mask->name);
	struct ir_value *shape = emit(c, "Concat", m->sm, parts, 3, base, before, &cat);
	if (!shape || pass_set_int_attr(cat, "axis", 0, c->d))
		return NULL;
	struct ir_value *ins[2] = { mask, shape };
	snprintf(base, sizeof(base), "%s_expanded", mask->name);
	return emit(c, "Expand", m->sm, ins, 2, base, before, NULL);
}

/* The input of a Transpose with perm `perm` (4 entries) that makes v, else NULL. */
static struct ir_value *transposed_from(const struct ir_value *v, const int64_t *perm)
{
	struct ir_node *t = pass_producer(v);
	if (!pass_is_op(t, IR_OP_Transpose, 1))
		return NULL;
	const struct ir_attr *pa = ir_node_attr(t, "perm");
	if (!pa || pa->type != IR_ATTR_INTS || pa->n != 4 || pass_rank_of(t->inputs[0]) != 4)
		return NULL;
	for (int i = 0; i < 4; i++)
		if (pa->ints[i] != perm[i])
			return NULL;
	return t->inputs[0];
}

/*
 * K [B, H, T, D] when K^T [B, H, D, T] is Reshape(Transpose(Reshape(K, [B*H, T, D]), [0, 2, 1]), [B, H, D, T])
 * (torch's exporter writes k.transpose(-2, -1) so); NULL otherwise.
 */
static struct ir_value *k_through_3d(const struct ir_value *kt)
{
	struct ir_node *r2 = pass_producer(kt);
	if (!pass_is_op(r2, IR_OP_Reshape, 2))
		return NULL;
	struct ir_node *t = pass_producer(r2->inputs[0]);
	if (!pass_is_op(t, IR_OP_Transpose, 1))
		return NULL;
	const struct ir_attr *pa = ir_node_attr(t, "perm");
	if (!pa || pa->type != IR_ATTR_INTS || pa->n != 3 || pa->ints[0] != 0 || pa->ints[1] != 2 || pa->ints[2] != 1)
		return NULL;
	struct ir_node *r1 = pass_producer(t->inputs[0]);
	if (!pass_is_op(r1, IR_OP_Reshape, 2))
		return NULL;
	const struct ir_type *k4 = tensor4(r1->inputs[0]), *k3 = ir_value_type(r1->outputs[0]), *o = tensor4(kt);
	if (!k4 || !o || !k3 || k3->kind != IR_TYPE_TENSOR || k3->rank != 3)
		return NULL;
	/* [X, T, D] keeps K's element order, so X is B*H; the result must read [B, H, D, T] */
	if (!same_dim(k3, 1, k4, 2) || !same_dim(k3, 2, k4, 3) || !same_dim(o, 0, k4, 0) || !same_dim(o, 1, k4, 1) ||
	    !same_dim(o, 2, k4, 3) || !same_dim(o, 3, k4, 2))
		return NULL;
	return r1->inputs[0];
}

/* What the FusedAttention function body is built from. */
struct body_arg {
	bool bshd, mask, nan_zero;
	double scale;
};

static struct ir_value *body_transpose(struct pass_fbody *b, struct ir_value *x, int64_t p0, int64_t p1, int64_t p2,
				       int64_t p3)
{
	struct ir_node *n = NULL;
	struct ir_value *y = pass_fb_node(b, "Transpose", &x, 1, &n);
	const int64_t perm[4] = { p0, p1, p2, p3 };
	if (y && pass_set_ints_attr(n, "perm", perm, 4, b->d))
		b->rc = IR_ERR;
	return y;
}

/* Y = softmax(Q K^T * scale + mask) V, in standard ops (with the transposes of BSHD) */
static void build_attention(struct pass_fbody *b, void *arg)
{
	const struct body_arg *a = arg;
	struct ir_value *q = pass_fb_input(b, "Q"), *k = pass_fb_input(b, "K"), *v = pass_fb_input(b, "V");
	struct ir_value *mask = a->mask ? pass_fb_input(b, "mask") : NULL;
	struct ir_value *kt;
	if (a->bshd) {
		q = body_transpose(b, q, 0, 2, 1, 3);
		kt = body_transpose(b, k, 0, 2, 3, 1);
		v = body_transpose(b, v, 0, 2, 1, 3);
	} else {
		kt = body_transpose(b, k, 0, 1, 3, 2);
	}
	struct ir_value *y = pass_fb_sdpa(b, q, kt, v, mask, a->scale, a->nan_zero);
	if (a->bshd)
		y = body_transpose(b, y, 0, 2, 1, 3);
	pass_fb_output(b, y);
}

/* The attributes and the model-local function of a new FusedAttention node. */
static int fused_attrs(struct pass_ctx *c, struct ir_node *n, const struct body_arg *a, int elem)
{
	int rc = set_attr_float(n, "scale", a->scale, c->d);
	if (!rc && a->nan_zero)
		rc = pass_set_int_attr(n, "nan_to_zero", 1, c->d);
	if (!rc && a->bshd)
		rc = pass_fused_set_str(n, "layout", "BSHD", c->d);
	if (rc)
		return rc;
	char key[200], base[80], doc[300];
	double sc = (double)(float)a->scale;
	snprintf(key, sizeof(key), "FusedAttention|%s|mask=%d|nan=%d|scale=%.9g|%s", a->bshd ? "BSHD" : "BHSD", a->mask,
		 a->nan_zero, sc, ir_dtype_name(elem));
	snprintf(base, sizeof(base), "%s%s%s%s%s", a->bshd ? "BSHD" : "BHSD", a->mask ? "_mask" : "",
		 a->nan_zero ? "_nan0" : "", elem != IR_FLOAT ? "_" : "", elem != IR_FLOAT ? ir_dtype_name(elem) : "");
	snprintf(doc, sizeof(doc), "ogsh fused op: Y = softmax(Q K^T * %.9g%s) V per batch and head%s%s", sc,
		 a->mask ? " + mask" : "", a->nan_zero ? ", NaN softmax rows as 0" : "",
		 a->bshd ? "; Q, K, V and Y are [batch, sequence, heads, head size]" : "");
	static const char *const names[] = { "scale", "nan_to_zero", "layout", "q_num_heads", "kv_num_heads" };
	struct body_arg copy = *a;
	copy.scale = sc;
	return pass_fused_fn_use(c, n, base, key, doc, names, 5, elem, build_attention, &copy);
}

/* std_ok: ONNX's Attention says it; fused_ok: the model can have FusedAttention */
static int rewrite(struct pass_ctx *c, struct match *m, bool std_ok, bool fused_ok)
{
	struct ir_graph *g = c->m->graph;
	struct ir_node *before = m->pv;
	int elem = tensor4(m->q)->elem;
	char base[200];
	/* nodes that may be left unread once the pattern goes (by id: removals free them) */
	int maybe_dead[5], n_maybe = 0;
	struct ir_node *kt_prod = pass_producer(m->kt);
	if (kt_prod)
		maybe_dead[n_maybe++] = kt_prod->id;
	/* K as [B, H, T, D]: undo the last-two-axes swap of K^T */
	struct ir_value *k = NULL;
	int64_t perm[4] = { 0, 1, 3, 2 };
	struct ir_value *k_src = m->kt;
	if (pass_is_op(kt_prod, IR_OP_Transpose, 1)) {
		const struct ir_attr *pa = ir_node_attr(kt_prod, "perm");
		int64_t p0[4] = { 3, 2, 1, 0 };
		if (!pa || (pa->type == IR_ATTR_INTS && pa->n == 4)) {
			for (int i = 0; pa && i < 4; i++)
				p0[i] = pa->ints[i];
			perm[0] = p0[0];
			perm[1] = p0[1];
			perm[2] = p0[3];
			perm[3] = p0[2];
			k_src = kt_prod->inputs[0];
		}
	} else if ((k_src = k_through_3d(m->kt))) {
		perm[2] = 2;
		perm[3] = 3;
	} else {
		k_src = m->kt;
	}
	/* [B, S, H, D] sources of Q, K, V and an output that goes back to [B, S, H, Dv]: the
	 * fused op reads and writes that layout, and the four transposes go. K's is k_src
	 * itself when K^T is its Transpose [0,2,3,1] (BERT), else what a Transpose
	 * [0,2,1,3] made k_src from */
	static const int64_t swap12[4] = { 0, 2, 1, 3 };
	const bool k_plain = perm[0] == 0 && perm[1] == 1 && perm[2] == 2 && perm[3] == 3;
	struct ir_value *qs = transposed_from(m->q, swap12), *vs = transposed_from(m->v, swap12);
	struct ir_value *ks = k_plain ? transposed_from(k_src, swap12) : !memcmp(perm, swap12, sizeof(perm)) ? k_src : NULL;
	char why[160];
	struct ir_node *ytr = m->pv->outputs[0]->is_output ? NULL
			      : pass_sole_reader(m->pv->outputs[0], why, sizeof(why));
	if (ytr && !transposed_from(ytr->outputs[0], swap12))
		ytr = NULL;
	struct body_arg ba = { .bshd = fused_ok && qs && ks && vs && ytr, .nan_zero = m->nan_zero, .scale = m->scale };
	bool fused = ba.bshd || !std_ok;
	if (ba.bshd || k_plain) {
		k = ba.bshd ? ks : k_src;
	} else {
		snprintf(base, sizeof(base), "%s_bhsd", m->kt->name);
		struct ir_node *t = NULL;
		if (!(k = emit(c, "Transpose", m->qk, &k_src, 1, base, before, &t)))
			return IR_ERR;
		int rc = pass_set_ints_attr(t, "perm", perm, 4, c->d);
		if (rc)
			return rc;
	}
	/* the mask: the steps in graph order (from the scores MatMul on), with the scores taken out */
	struct ir_value *mask = NULL;
	char mdesc[200] = "";
	size_t ml = 0;
	for (int i = m->n_parts - 1; i >= 0; i--) {
		struct part *pt = &m->parts[i];
		ml += (size_t)snprintf(mdesc + ml, ml < sizeof(mdesc) ? sizeof(mdesc) - ml : 0, "%s%s '%s'", ml ? ", " : "",
				       pt->kind == PART_ADD ? "+" : "where", pt->m->name);
		if (pt->kind == PART_ADD) {
			if (!mask) {
				mask = pt->m;
			} else {
				struct ir_value *ins[2] = { mask, pt->m };
				snprintf(base, sizeof(base), "%s_mask", pt->n->outputs[0]->name);
				if (!(mask = emit(c, "Add", pt->n, ins, 2, base, before, NULL)))
					return IR_ERR;
			}
			continue;
		}
		struct ir_value *keep = mask;
		if (!keep) {   /* a scalar 0 of the scores' type */
			double zero = 0;
			struct ir_tensor *zt = pass_tensor_from_f64(elem, 0, NULL, &zero, c->d);
			if (!zt)
				return IR_ERR;
			snprintf(base, sizeof(base), "%s_zero", pt->n->outputs[0]->name);
			keep = pass_new_init(g, base, zt, c->d);
			ir_tensor_unref(zt);
			if (!keep)
				return IR_ERR;
		}
		struct ir_value *ins[3] = { pt->m, keep, pt->fill };
		if (pt->kind == PART_WHERE_KEEP_FALSE) {
			ins[1] = pt->fill;
			ins[2] = keep;
		}
		snprintf(base, sizeof(base), "%s_mask", pt->n->outputs[0]->name);
		if (!(mask = emit(c, "Where", pt->n, ins, 3, base, before, NULL)))
			return IR_ERR;
	}
	bool expanded = false;
	if (mask && !fused && !mask_has_rows(m)) {
		if (!(mask = expand_rows(c, m, mask, before)))
			return IR_ERR;
		expanded = true;
	}
	ba.mask = mask != NULL;
	struct ir_value *q = m->q, *v = m->v;
	if (ba.bshd) {   /* the Transposes transposed_from saw (K's: with k_plain) */
		maybe_dead[n_maybe++] = pass_producer(m->q)->id;
		maybe_dead[n_maybe++] = pass_producer(m->v)->id;
		if (k_plain)
			maybe_dead[n_maybe++] = pass_producer(k_src)->id;
		q = qs;
		v = vs;
	}
	/* the fused node takes over the output of the last MatMul (of its Transpose with BSHD) */
	const char *op = fused ? "FusedAttention" : "Attention";
	char *name = pass_new_node_name(g, m->sm, op);
	if (!name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_node *n = ir_node_new(g, op, fused ? FUSED_DOMAIN : NULL, name, mask ? 4 : 3, 1, before);
	free(name);
	if (!n)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	int rc = ir_node_set_input(n, 0, q);
	if (!rc)
		rc = ir_node_set_input(n, 1, k);
	if (!rc)
		rc = ir_node_set_input(n, 2, v);
	if (!rc && mask)
		rc = ir_node_set_input(n, 3, mask);
	if (!rc)
		rc = fused ? fused_attrs(c, n, &ba, elem) : set_attr_float(n, "scale", m->scale, c->d);
	struct ir_node *yowner = ba.bshd ? ytr : m->pv;
	struct ir_value *y = yowner->outputs[0];
	if (!rc)
		rc = ir_node_set_output(yowner, 0, NULL, c->d);
	if (!rc)
		rc = ir_node_set_output(n, 0, y, c->d);
	if (rc)
		return rc;
	pass_set_from(n, m->nodes, m->n);
	if (ba.bshd)
		pass_add_from(n, ytr);
	/* in graph order for the message */
	char ops[256] = "";
	size_t ol = 0;
	struct ir_node *order[MAXN];
	int no = 0;
	ir_for_each_node(g, x)
		for (int i = 0; i < m->n; i++)
			if (m->nodes[i] == x && no < MAXN)
				order[no++] = x;
	for (int i = 0; i < no; i++)
		ol += (size_t)snprintf(ops + ol, ol < sizeof(ops) ? sizeof(ops) - ol : 0, "%s%s", i ? ", " : "", order[i]->op_type);
	int count = m->n;
	if (ba.bshd && ir_node_remove(ytr, c->d))   /* its output is the fused node's now */
		return IR_ERR;
	if ((rc = pass_remove_nodes(c, m->nodes, m->n)))
		return rc;
	/* K^T's Transpose (or reshapes), and with BSHD the transposes of Q, K and V, when nothing else reads them */
	int swept = ba.bshd ? 1 : 0;
	for (int i = 0; i < n_maybe; i++) {
		struct ir_node *x = ir_node_by_id(g, maybe_dead[i]);
		if (x)
			swept += pass_remove_dead_from(g, x);
	}
	char more[160] = "";
	if (swept)
		snprintf(more, sizeof(more), "; %d node%s left unused went too (%s)", swept, swept == 1 ? "" : "s",
			 ba.bshd ? "the transposes to and from [batch, heads, ...], K^T's" : "K^T's");
	pass_rewrote(c, n, "%d nodes (%s) fused into %s(Q '%s', K '%s', V '%s'%s%s) with scale %g%s%s%s%s", count, ops,
		     op, q->name, k->name, v->name, mask ? ", mask " : "", mask ? mdesc : "", m->scale,
		     ba.bshd ? ", layout BSHD" : "", m->nan_zero ? ", NaN rows as 0" : "", more,
		     expanded ? "; the mask is expanded to the query length (Shape, Concat, Expand)" : "");
	return 0;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "stopped" : "out of memory");
	int64_t opset = ir_model_opset(c->m, "");
	char why[200];
	bool fop = pass_fused_opset(c->m, why, sizeof(why)) != 0;
	int n_ids = 0, *ids = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
	if (!ids)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	ir_for_each_node(g, n)
		if (pass_is_op(n, IR_OP_Softmax, 1))
			ids[n_ids++] = n->id;
	for (int i = 0; i < n_ids && !rc; i++) {
		struct ir_node *a = ir_node_by_id(g, ids[i]);
		if (!a)
			continue;
		struct match m;
		memset(&m, 0, sizeof(m));
		int ok = match(&m, a);
		if (!ok)
			continue;
		if (ok < 0) {
			pass_rejected(c, a, "attention not fused: %s", m.why);
			continue;
		}
		bool std_ok = opset >= ATTN_OPSET && !m.nan_zero;
		if (!std_ok && !fop) {
			pass_rejected(c, a, "attention (Q '%s', K^T '%s', V '%s') found, but the model imports opset %lld: "
				      "Attention needs %d%s and %s", m.q->name, m.kt->name, m.v->name, (long long)opset,
				      ATTN_OPSET, m.nan_zero ? " (and cannot zero NaN rows)" : "", why);
			continue;
		}
		rc = rewrite(c, &m, std_ok, fop);
	}
	free(ids);
	return rc;
}

const struct pass pass_fuse_attention = {
	.name = "fuse-attention",
	.summary = "fuse scaled dot-product attention (MatMul, scale, mask, Softmax, MatMul) into one Attention or "
		   "ai.ogsh FusedAttention node",
	.explain =
		"Scaled dot-product attention, the core of every transformer layer, is softmax(Q K^T * scale + "
		"mask) V, per batch and head: Q is [batch, heads, queries, head size], K and V [batch, heads, keys, "
		"head size]. Exporters write it as MatMul(Q, K^T), a Div by sqrt(head size) (or a Mul by its "
		"inverse, or Muls of Q and K^T by its square root, as torch's exporter does), an Add of the mask, "
		"Softmax over the last axis and MatMul with V. This pass puts one node in their place. A fused "
		"kernel never writes the [queries, keys] score matrix to memory, which for long sequences is most "
		"of attention's memory traffic, and on the GPU runs both products on tensor cores in float16 and "
		"bfloat16.\n\n"
		"The node is ONNX's Attention(Q, K, V, attn_mask, scale=s) (opset 23) when the model imports "
		"opset 23 or later and that op says the same thing; otherwise ogsh's FusedAttention (domain "
		"ai.ogsh, saved with a model-local function in standard ops, so other runtimes run it too), in "
		"three cases: the model's opset is older than 23; the softmax output passes Where(IsNaN(p), 0, p) "
		"(torch's exporter guards rows masked everywhere so; FusedAttention's nan_to_zero=1 does the same); "
		"or Q, K and V are each a Transpose with perm [0,2,1,3] of a [batch, sequence, heads, head size] "
		"tensor and the output goes back through the same Transpose: FusedAttention's layout=BSHD reads "
		"and writes that layout, and the four transposes (the heads split and merge around every "
		"attention block) go.\n\n"
		"Attention takes K, not K^T: when K^T comes from a Transpose, K is taken from that Transpose's input "
		"with the last two axes of its permutation swapped back (BERT's perm [0,2,3,1] becomes [0,2,1,3]); "
		"when it comes from Reshape to [batch*heads, keys, size], Transpose [0,2,1] and Reshape back "
		"(torch's exporter), K is the first Reshape's input; otherwise a Transpose with perm [0,1,3,2] is "
		"added. The scale is the product of the constants (1/c for a Div by c). Mask steps are moved into "
		"the additive mask: an Add of M adds M; a Where(cond, scores, fill), GPT-2's causal mask, becomes "
		"Where(cond, 0, fill) added to the scores, which gives exactly the same softmax when fill is -inf "
		"or below -1e30 (added to a score it swallows it), so only such fills are accepted. ONNX lets "
		"Attention's mask broadcast over the query axis, but ONNX Runtime wants it spelled out: a mask such "
		"as BERT's [batch, 1, 1, keys] is expanded to the query length (Shape of Q, Concat, Expand) so the "
		"saved model runs there too (FusedAttention's function broadcasts it as Add does).\n\n"
		"Nothing is fused when a value inside the pattern (the scores, the scaled or masked scores, the "
		"attention weights) is read by anything else, when the softmax is not over the keys axis, when "
		"shape inference cannot show that Q, K^T and V are 4-D and agree in batch, heads, head size and "
		"key length, when a mask step would broadcast the scores to a larger shape, or when the model "
		"imports an opset older than 9 (FusedAttention's function needs it). The model's opset is not "
		"changed. Only the main graph is rewritten.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
