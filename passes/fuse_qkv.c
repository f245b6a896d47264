/*
 * fuse_qkv.c - the fuse-qkv pass: an ai.ogsh FusedAttention whose Q, K and
 * V are three slices of one projection (a Split, three Slices, torch
 * MultiheadAttention's Reshape/Unsqueeze/Transpose/Squeeze/Gather chain) or
 * three projections of one input (three MatMul/Gemm by constant weights)
 * reads them packed from one tensor ([batch, seq, 3*heads*size] and the
 * like, layout BS3HD or SB3HD), so the copies that split them go; with
 * three projections they become one. Transposes around the block that only
 * reorder the batch and sequence axes go too (the attention reads and
 * writes any order of them).
 *
 * How Q, K and V sit in the packed tensor is proven, not assumed: each is
 * followed back through view ops (Reshape, Transpose, Squeeze, Unsqueeze,
 * Gather of one index, Split, Slice) to its source, and the view ops are
 * replayed on the source's axes written as factors (its leading axes, then
 * 3, heads, head size): a Reshape must regroup whole factors (by the dims
 * shape inference proves), a Gather, Split or Slice must pick one of the 3.
 * At the end Q, K and V must each be the attention's layout of the factors,
 * parts 0, 1 and 2. Only the main graph is looked at.
 */
#include "passes/fused.h"
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXCHAIN 12
#define MAXF 8

/* Factors: the Q/K/V axis, heads, head size, then the source's leading axes
 * (and the two parts of one a Reshape splits). */
enum { F_3 = 0, F_H, F_D, F_X, F_MAX = 16 };

struct view {
	int rank;
	int grp[IR_MAX_RANK][MAXF];   /* the factors of each axis, in order */
	int ng[IR_MAX_RANK];
	int part;                     /* which of Q, K, V the view holds (-1: all three) */
};

struct qkv {
	struct ir_node *fa;           /* the FusedAttention */
	struct ir_value *in[3];       /* its Q, K, V */
	struct ir_value *root[3];     /* where each view chain starts */
	struct ir_node *chain[3][MAXCHAIN];
	int n_chain[3];
	struct ir_dim fs[F_MAX];      /* the factors' sizes (shallow copies of dims of types, or values) */
	int nf;                       /* factors so far */
	int n_x;                      /* the root's leading axes (factors F_X...) */
	int split[F_MAX][2];          /* the factors a Reshape split one into (0: none) */
	char xl[F_MAX];               /* the letter (B or S) each leading factor turned out to be */
	int lead[2];                  /* the batch and sequence factors in the root's memory order */
	struct ir_value *reuse;       /* a view of the root the chains share that is [X0, X1, 3E] already */
	int64_t heads, hsize;
	char why[320];
};

static struct ir_dim dim_v(int64_t v)
{
	struct ir_dim d = { .kind = IR_DIM_VALUE, .value = v };
	return d;
}

static const char *dstr(const struct ir_dim *d, char *b, size_t n)
{
	return ir_dim_str(d, b, n);
}

/* ------------------------------------------------------------------------ */
/* Views: replaying view ops on the source's factors                          */
/* ------------------------------------------------------------------------ */

/* The product of factors f[0..k-1] into *out (caller clears); false when not expressible. */
static bool prod(const struct qkv *q, const int *f, int k, struct ir_dim *out)
{
	*out = dim_v(1);
	for (int i = 0; i < k; i++) {
		struct ir_dim t;
		if (ir_dim_mul(out, &q->fs[f[i]], &t)) {
			ir_dim_clear(out);
			return false;
		}
		ir_dim_clear(out);
		*out = t;
		if (t.kind == IR_DIM_UNKNOWN)
			return false;
	}
	return true;
}

static bool is_one(const struct ir_dim *d)
{
	return d->kind == IR_DIM_VALUE && d->value == 1;
}

/* A Reshape to dims[rank]: whole factors regrouped in order. */
static bool view_reshape(struct qkv *q, struct view *v, const struct ir_type *t, const char *name)
{
	int fl[IR_MAX_RANK * MAXF + 1], nf = 0;
	for (int a = 0; a < v->rank; a++)
		for (int i = 0; i < v->ng[a]; i++)
			fl[nf++] = v->grp[a][i];
	struct view o = { .rank = t->rank, .part = v->part };
	int at = 0;
	char b1[64];
	for (int a = 0; a < t->rank; a++) {
		const struct ir_dim *want = &t->dims[a];
		if (want->kind == IR_DIM_UNKNOWN) {
			snprintf(q->why, sizeof(q->why), "cannot tell axis %d of '%s' (shape inference does not know it)", a,
				 name);
			return false;
		}
		if (is_one(want) && (at == nf || !is_one(&q->fs[fl[at]])))
			continue;   /* an axis of 1 of no factor */
		/* a leading factor split in two ([N, E] to [S, B, ...]): the two axes' dims multiply to it */
		if (at < nf && fl[at] >= F_X && a + 1 < t->rank && !ir_dim_equal(&q->fs[fl[at]], want) &&
		    nf < IR_MAX_RANK * MAXF - 1) {
			struct ir_dim p;
			bool eq = !ir_dim_mul(want, &t->dims[a + 1], &p) && ir_dim_equal(&p, &q->fs[fl[at]]);
			ir_dim_clear(&p);
			int f = fl[at];
			if (eq && !q->split[f][0] && q->nf + 2 <= F_MAX) {
				q->split[f][0] = q->nf;
				q->split[f][1] = q->nf + 1;
				q->fs[q->nf++] = *want;
				q->fs[q->nf++] = t->dims[a + 1];
			}
			if (eq && q->split[f][0] && ir_dim_equal(&q->fs[q->split[f][0]], want) &&
			    ir_dim_equal(&q->fs[q->split[f][1]], &t->dims[a + 1])) {
				memmove(fl + at + 2, fl + at + 1, sizeof(int) * (size_t)(nf - at - 1));
				fl[at] = q->split[f][0];
				fl[at + 1] = q->split[f][1];
				nf++;
			}
		}
		bool ok = false;
		for (int k = 1; at + k <= nf && k <= MAXF; k++) {
			struct ir_dim p;
			bool known = prod(q, fl + at, k, &p);
			bool eq = known && ir_dim_equal(&p, want);
			ir_dim_clear(&p);
			if (eq) {
				memcpy(o.grp[a], fl + at, sizeof(int) * (size_t)k);
				o.ng[a] = k;
				at += k;
				ok = true;
				break;
			}
		}
		if (!ok) {
			snprintf(q->why, sizeof(q->why), "a reshape splits heads differently: axis %d of '%s' (%s) is not a "
				 "product of whole factors of [.., heads %lld, head size %lld]", a, name,
				 dstr(want, b1, sizeof(b1)), (long long)q->heads, (long long)q->hsize);
			return false;
		}
	}
	if (at != nf) {
		snprintf(q->why, sizeof(q->why), "the reshape to '%s' does not keep every factor", name);
		return false;
	}
	*v = o;
	return true;
}

/* Picks part `j` of the Q/K/V axis, which must be axis a's first factor. */
static bool view_pick(struct qkv *q, struct view *v, int a, int64_t j, bool drop_axis, const char *name)
{
	if (a < 0 || a >= v->rank || v->ng[a] < 1 || v->grp[a][0] != F_3 || v->part >= 0 || (drop_axis && v->ng[a] != 1)) {
		snprintf(q->why, sizeof(q->why), "'%s' does not pick one of Q, K and V from the packed projection's "
			 "[.., 3, heads, head size] axis", name);
		return false;
	}
	if (j < 0 || j > 2) {
		snprintf(q->why, sizeof(q->why), "'%s' picks part %lld of 3", name, (long long)j);
		return false;
	}
	v->part = (int)j;
	if (drop_axis) {
		for (int i = a; i + 1 < v->rank; i++) {
			memcpy(v->grp[i], v->grp[i + 1], sizeof(v->grp[i]));
			v->ng[i] = v->ng[i + 1];
		}
		v->rank--;
	} else {
		memmove(v->grp[a], v->grp[a] + 1, sizeof(int) * (size_t)(v->ng[a] - 1));
		v->ng[a]--;
	}
	return true;
}

/* The int64 elements of constant input i of n (at most max); -1 when not constant ints. */
static int const_ints(const struct ir_node *n, int i, int64_t *out, int max)
{
	const struct ir_tensor *t = pass_const_input(n, i);
	if (!t || (t->dtype != IR_INT64 && t->dtype != IR_INT32) || t->numel > (uint64_t)max)
		return -1;
	const void *p = ir_tensor_data(t);
	for (uint64_t k = 0; k < t->numel; k++)
		out[k] = t->dtype == IR_INT64 ? ((const int64_t *)p)[k] : ((const int32_t *)p)[k];
	return (int)t->numel;
}

/* Axes from input 1 (opset 13) or the axes attribute; -1 when not constant. */
static int axes_of(const struct ir_node *n, int64_t *ax, int max)
{
	if (n->n_inputs > 1 && n->inputs[1])
		return const_ints(n, 1, ax, max);
	const struct ir_attr *a = ir_node_attr(n, "axes");
	if (!a || a->type != IR_ATTR_INTS || a->n > (size_t)max)
		return -1;
	for (size_t i = 0; i < a->n; i++)
		ax[i] = a->ints[i];
	return (int)a->n;
}

/* The part size of a Split or Slice along axis a: the product of the factors after 3. */
static bool part_size(struct qkv *q, const struct view *v, int a, int64_t *e)
{
	struct ir_dim p;
	bool ok = prod(q, v->grp[a] + 1, v->ng[a] - 1, &p) && p.kind == IR_DIM_VALUE;
	*e = ok ? p.value : 0;
	ir_dim_clear(&p);
	return ok;
}

/* Replays view op n (reading the view's tensor, making `out`) on v. */
static bool view_apply(struct qkv *q, struct view *v, const struct ir_node *n, const struct ir_value *out)
{
	const struct ir_type *t = ir_value_type(out);
	int64_t ax[IR_MAX_RANK];
	switch (n->op) {
	case IR_OP_Reshape:
		if (!t || t->kind != IR_TYPE_TENSOR || t->rank < 1 || t->rank > IR_MAX_RANK) {
			snprintf(q->why, sizeof(q->why), "the rank of '%s' is not known", out->name);
			return false;
		}
		return view_reshape(q, v, t, out->name);
	case IR_OP_Transpose: {
		const struct ir_attr *pa = ir_node_attr(n, "perm");
		struct view o = *v;
		for (int i = 0; i < v->rank; i++) {
			int64_t p = pa && pa->type == IR_ATTR_INTS && pa->n == (size_t)v->rank ? pa->ints[i] : v->rank - 1 - i;
			if (p < 0 || p >= v->rank)
				return false;
			memcpy(o.grp[i], v->grp[p], sizeof(o.grp[i]));
			o.ng[i] = v->ng[p];
		}
		*v = o;
		return true;
	}
	case IR_OP_Unsqueeze: {
		int k = axes_of(n, ax, IR_MAX_RANK);
		int r = v->rank + k;
		if (k < 0 || r > IR_MAX_RANK) {
			snprintf(q->why, sizeof(q->why), "the axes of '%s' are not constant", out->name);
			return false;
		}
		bool ins[IR_MAX_RANK] = { false };
		for (int i = 0; i < k; i++)
			ins[ax[i] < 0 ? ax[i] + r : ax[i]] = true;
		struct view o = { .rank = r, .part = v->part };
		for (int i = 0, j = 0; i < r; i++)
			if (!ins[i]) {
				memcpy(o.grp[i], v->grp[j], sizeof(o.grp[i]));
				o.ng[i] = v->ng[j++];
			}
		*v = o;
		return true;
	}
	case IR_OP_Squeeze: {
		int k = axes_of(n, ax, IR_MAX_RANK);
		if (k <= 0) {
			snprintf(q->why, sizeof(q->why), "the axes of '%s' are not constant", out->name);
			return false;
		}
		bool del[IR_MAX_RANK] = { false };
		for (int i = 0; i < k; i++) {
			int64_t a = ax[i] < 0 ? ax[i] + v->rank : ax[i];
			if (a < 0 || a >= v->rank || v->ng[a]) {
				snprintf(q->why, sizeof(q->why), "'%s' squeezes an axis that holds data", out->name);
				return false;
			}
			del[a] = true;
		}
		struct view o = { .rank = 0, .part = v->part };
		for (int i = 0; i < v->rank; i++)
			if (!del[i]) {
				memcpy(o.grp[o.rank], v->grp[i], sizeof(o.grp[0]));
				o.ng[o.rank++] = v->ng[i];
			}
		*v = o;
		return true;
	}
	case IR_OP_Gather: {
		const struct ir_tensor *it = pass_const_input(n, 1);
		int64_t idx;
		if (!it || it->rank != 0 || const_ints(n, 1, &idx, 1) != 1) {
			snprintf(q->why, sizeof(q->why), "'%s' is not a Gather of one constant index", out->name);
			return false;
		}
		int64_t a = ir_node_attr_int(n, "axis", 0);
		a = a < 0 ? a + v->rank : a;
		return view_pick(q, v, (int)a, idx < 0 ? idx + 3 : idx, true, out->name);
	}
	case IR_OP_Split: {
		int64_t a = ir_node_attr_int(n, "axis", 0), e = 0;
		a = a < 0 ? a + v->rank : a;
		int j = 0;
		while (j < n->n_outputs && n->outputs[j] != out)
			j++;
		if (a < 0 || a >= v->rank || n->n_outputs != 3 || !part_size(q, v, (int)a, &e)) {
			snprintf(q->why, sizeof(q->why), "the Split making '%s' is not into 3 along the packed axis",
				 out->name);
			return false;
		}
		int64_t sz[4];
		int k = n->n_inputs > 1 && n->inputs[1] ? const_ints(n, 1, sz, 4) : 0;
		const struct ir_attr *sa = ir_node_attr(n, "split");
		if (!k && sa && sa->type == IR_ATTR_INTS && sa->n <= 4) {
			k = (int)sa->n;
			for (int i = 0; i < k; i++)
				sz[i] = sa->ints[i];
		}
		if (k < 0 || (k && (k != 3 || sz[0] != e || sz[1] != e || sz[2] != e))) {
			snprintf(q->why, sizeof(q->why), "the Split making '%s' is not into 3 equal parts of %lld", out->name,
				 (long long)e);
			return false;
		}
		return view_pick(q, v, (int)a, j, false, out->name);
	}
	case IR_OP_Slice: {
		int64_t st[2], en[2], as[2] = { 0 }, sp[2] = { 1 }, e = 0;
		if (const_ints(n, 1, st, 2) != 1 || const_ints(n, 2, en, 2) != 1 ||
		    (n->n_inputs > 3 && n->inputs[3] && const_ints(n, 3, as, 2) != 1) ||
		    (n->n_inputs > 4 && n->inputs[4] && const_ints(n, 4, sp, 2) != 1) || sp[0] != 1) {
			snprintf(q->why, sizeof(q->why), "'%s' is not a Slice of one axis by constants", out->name);
			return false;
		}
		int64_t a = as[0] < 0 ? as[0] + v->rank : as[0];
		if (a < 0 || a >= v->rank || v->ng[a] < 1 || v->grp[a][0] != F_3 || !part_size(q, v, (int)a, &e) || !e ||
		    st[0] % e || (en[0] != st[0] + e && !(st[0] == 2 * e && en[0] >= 3 * e))) {
			snprintf(q->why, sizeof(q->why), "the Slice making '%s' does not take a third of the packed axis",
				 out->name);
			return false;
		}
		return view_pick(q, v, (int)a, st[0] / e, false, out->name);
	}
	default:
		return false;
	}
}

static bool is_view_op(const struct ir_node *n)
{
	if (!n || !n->n_outputs)
		return false;
	switch (n->op) {
	case IR_OP_Reshape: case IR_OP_Transpose: case IR_OP_Squeeze: case IR_OP_Unsqueeze: case IR_OP_Split:
	case IR_OP_Slice:
		return true;
	case IR_OP_Gather: {
		const struct ir_tensor *t = pass_const_input(n, 1);
		return t && t->rank == 0;
	}
	default:
		return false;
	}
}

/* Follows input i of the attention back through view ops to its root. */
static void follow(struct qkv *q, int i)
{
	struct ir_value *u = q->in[i];
	q->n_chain[i] = 0;
	for (;;) {
		struct ir_node *p = pass_producer(u);
		if (!is_view_op(p) || q->n_chain[i] >= MAXCHAIN || !p->inputs[0])
			break;
		q->chain[i][q->n_chain[i]++] = p;
		u = p->inputs[0];
	}
	q->root[i] = u;
}

/*
 * Sets the factors of a root of type t: its leading axes, and its last axis
 * as `three` x heads x head size (three: 3 for a packed root, 1 for one of
 * three projections).
 */
static bool set_factors(struct qkv *q, const struct ir_value *root, int three)
{
	const struct ir_type *t = ir_value_type(root);
	char b1[64];
	if (!t || t->kind != IR_TYPE_TENSOR || t->rank < 2 || t->rank > 3) {
		snprintf(q->why, sizeof(q->why), "'%s' is not known to be 2-D or 3-D ([rows, features], [batch, seq, "
			 "features] or [seq, batch, features])", root->name);
		return false;
	}
	int64_t want = three * q->heads * q->hsize;
	const struct ir_dim *last = &t->dims[t->rank - 1];
	if (last->kind != IR_DIM_VALUE || last->value != want) {
		snprintf(q->why, sizeof(q->why), "the last axis of '%s' (%s) is not %s%lld heads x %lld", root->name,
			 dstr(last, b1, sizeof(b1)), three == 3 ? "3 x " : "", (long long)q->heads, (long long)q->hsize);
		return false;
	}
	q->n_x = t->rank - 1;
	q->nf = F_X + q->n_x;
	for (int i = 0; i < q->n_x; i++)
		q->fs[F_X + i] = t->dims[i];
	q->fs[F_3] = dim_v(3);
	q->fs[F_H] = dim_v(q->heads);
	q->fs[F_D] = dim_v(q->hsize);
	return true;
}

/* The view of a chain's root: the leading dims, then [3,] H, D in one last dim (part -1: packed). */
static struct view root_view(const struct qkv *q, int part)
{
	struct view v = { .rank = q->n_x + 1, .part = part };
	for (int a = 0; a < q->n_x; a++) {
		v.grp[a][0] = F_X + a;
		v.ng[a] = 1;
	}
	int f = 0;
	if (part < 0)
		v.grp[q->n_x][f++] = F_3;
	v.grp[q->n_x][f++] = F_H;
	v.grp[q->n_x][f++] = F_D;
	v.ng[q->n_x] = f;
	return v;
}

/* The view after the first k ops of chain i (from its root, whose part is `part`; -1: packed). */
static bool view_after(struct qkv *q, int i, int part, int k, struct view *out)
{
	struct view v = root_view(q, part);
	for (int c = q->n_chain[i] - 1; c >= q->n_chain[i] - k; c--) {
		const struct ir_node *n = q->chain[i][c];
		const struct ir_value *o = c ? q->chain[i][c - 1]->inputs[0] : q->in[i];
		if (!view_apply(q, &v, n, o))
			return false;
	}
	*out = v;
	return true;
}

/* Replays chain i from its root; part: the root's part (-1: packed). */
static bool replay(struct qkv *q, int i, int part, const char *layout)
{
	struct view v;
	if (!view_after(q, i, part, q->n_chain[i], &v))
		return false;
	static const char *const names[3] = { "q", "k", "v" };
	if (v.part != i) {
		snprintf(q->why, sizeof(q->why), "%s is %s of the packed projection, not part %d", names[i],
			 v.part < 0 ? "not one part" : v.part == 0 ? "part 0 (Q)" : v.part == 1 ? "part 1 (K)" : "part 2 (V)",
			 i);
		return false;
	}
	/* each axis one factor, in the attention's layout */
	for (int a = 0; a < 4; a++) {
		char l = layout[a];
		int f = v.rank == 4 && v.ng[a] == 1 ? v.grp[a][0] : -1;
		bool ok = (l == 'H' && f == F_H) || (l == 'D' && f == F_D);
		if ((l == 'B' || l == 'S') && f >= F_X) {
			ok = !q->xl[f] || q->xl[f] == l;
			q->xl[f] = l;
		}
		if (!ok) {
			snprintf(q->why, sizeof(q->why), "a reshape splits heads differently: %s's axis %d is not the %s "
				 "axis of the packed projection", names[i], a,
				 l == 'B' ? "batch" : l == 'S' ? "sequence" : l == 'H' ? "heads" : "head size");
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Projections                                                               */
/* ------------------------------------------------------------------------ */

/* A projection: y = X W (+ b), or Gemm(X, W, C). */
struct proj {
	struct ir_node *mm, *add;     /* MatMul (or Gemm) and its bias Add, or NULL */
	struct ir_value *x;
	const struct ir_tensor *w, *b;
	int64_t trans_b;
};

/*
 * Whether sh is a whole Shape (no start or end, not a graph output) whose
 * readers are all Gathers of one constant index on axis 0, each index
 * (negative ones counted from rank r) below `below` (-1: any).
 */
static bool shape_gathered(const struct ir_node *sh, int below, int r)
{
	if (!pass_is_op(sh, IR_OP_Shape, 1) || ir_node_attr(sh, "start") || ir_node_attr(sh, "end") ||
	    sh->outputs[0]->is_output)
		return false;
	for (size_t j = 0; j < sh->outputs[0]->n_uses; j++) {
		const struct ir_node *ga = sh->outputs[0]->uses[j].node;
		const struct ir_tensor *it = pass_const_input(ga, 1);
		int64_t idx;
		if (!pass_is_op(ga, IR_OP_Gather, 2) || sh->outputs[0]->uses[j].slot != 0 || !it || it->rank != 0 ||
		    const_ints(ga, 1, &idx, 1) != 1 || ir_node_attr_int(ga, "axis", 0) != 0)
			return false;
		idx = idx < 0 ? idx + r : idx;
		if (below >= 0 && (idx < 0 || idx >= below))
			return false;
	}
	return true;
}

/*
 * Whether sh (a reader of a projection's output of rank r) is a Shape whose
 * dims are only Gathered one constant index at a time, never the last axis:
 * it reads the leading dims, which the projection's input has too (exporters
 * take the batch and sequence length so), and may read that instead.
 */
static bool leading_shape_reader(const struct ir_node *sh, int r)
{
	return r >= 2 && shape_gathered(sh, r - 1, r);
}

/* Readers of v other than leading_shape_reader()s (a graph output counts one). */
static int data_readers(const struct ir_value *v)
{
	int n = v->is_output ? 1 : 0, r = pass_rank_of(v);
	for (size_t i = 0; i < v->n_uses; i++)
		if (!leading_shape_reader(v->uses[i].node, r))
			n++;
	return n + (pass_read_in_subgraph(v) ? 1 : 0);
}

static bool proj_of(struct ir_value *r, struct proj *p, char *why, size_t size, const char *what)
{
	memset(p, 0, sizeof(*p));
	struct ir_node *n = pass_producer(r);
	if (pass_is_op(n, IR_OP_Add, 2)) {
		for (int s = 0; s < 2 && !p->mm; s++) {
			struct ir_node *m = pass_producer(n->inputs[s]);
			const struct ir_tensor *b = pass_const_input(n, 1 - s);
			if (pass_is_op(m, IR_OP_MatMul, 2) && b && b->rank == 1 && pass_n_readers(n->inputs[s]) == 1) {
				p->mm = m;
				p->add = n;
				p->b = b;
			}
		}
		if (!p->mm) {
			snprintf(why, size, "%s's projection '%s' is not MatMul + a constant bias Add", what, r->name);
			return false;
		}
	} else if (pass_is_op(n, IR_OP_MatMul, 2)) {
		p->mm = n;
	} else if (n && n->op == IR_OP_Gemm && n->n_inputs >= 2) {
		p->mm = n;
		if (ir_node_attr_int(n, "transA", 0) || ir_node_attr_float(n, "alpha", 1) != 1 ||
		    ir_node_attr_float(n, "beta", 1) != 1) {
			snprintf(why, size, "%s's Gemm '%s' has transA, alpha or beta", what, n->name);
			return false;
		}
		p->trans_b = ir_node_attr_int(n, "transB", 0);
		if (n->n_inputs > 2 && n->inputs[2]) {
			p->b = pass_const_input(n, 2);
			if (!p->b || p->b->rank != 1) {
				snprintf(why, size, "%s's Gemm '%s' has a bias that is not a constant vector", what, n->name);
				return false;
			}
		}
	} else {
		snprintf(why, size, "%s ('%s') does not come from a MatMul or Gemm", what, r->name);
		return false;
	}
	p->x = p->mm->inputs[0];
	p->w = pass_const_input(p->mm, 1);
	if (!p->w || p->w->rank != 2 || !ir_dtype_is_float(p->w->dtype)) {
		snprintf(why, size, "weights are not constant: %s's projection '%s' multiplies by '%s'", what,
			 p->mm->name, p->mm->inputs[1]->name);
		return false;
	}
	if ((p->add && pass_n_readers(p->mm->outputs[0]) != 1) || data_readers(r) != 1) {
		snprintf(why, size, "%s's projection output is read by more than the attention", what);
		return false;
	}
	return true;
}

/* Concatenates three float tensors along `axis` (0 or the last) into a new tensor. */
static struct ir_tensor *concat3(const struct ir_tensor *const t[3], int axis, struct ir_diag *d)
{
	int r = t[0]->rank;
	int64_t dims[2] = { t[0]->dims[0], r > 1 ? t[0]->dims[1] : 0 };
	dims[axis] = t[0]->dims[axis] + t[1]->dims[axis] + t[2]->dims[axis];
	struct ir_tensor *o = ir_tensor_new(t[0]->dtype, r, dims, d);
	if (!o)
		return NULL;
	char *dst = ir_tensor_mutable(o);
	const size_t es = (size_t)ir_dtype_bits(t[0]->dtype) / 8;
	const int64_t rows = axis == r - 1 && r == 2 ? dims[0] : 1;
	for (int64_t row = 0; row < rows; row++)
		for (int i = 0; i < 3; i++) {
			const int64_t n = rows > 1 ? t[i]->dims[1] : (int64_t)t[i]->numel;
			memcpy(dst, (const char *)ir_tensor_data(t[i]) + (size_t)(row * n) * es, (size_t)n * es);
			dst += (size_t)n * es;
		}
	return o;
}

/* The three projections: one input, weights and biases of one shape and type. */
static bool projs_ok(struct qkv *q, struct proj p[3])
{
	static const char *const names[3] = { "q", "k", "v" };
	for (int i = 0; i < 3; i++)
		if (!proj_of(q->root[i], &p[i], q->why, sizeof(q->why), names[i]))
			return false;
	for (int i = 1; i < 3; i++) {
		if (p[i].x != p[0].x) {
			snprintf(q->why, sizeof(q->why), "q and %s read different inputs ('%s' and '%s')", names[i],
				 p[0].x->name, p[i].x->name);
			return false;
		}
		if (p[i].mm->op != p[0].mm->op || p[i].trans_b != p[0].trans_b || !!p[i].b != !!p[0].b ||
		    !!p[i].add != !!p[0].add) {
			snprintf(q->why, sizeof(q->why), "the projections of q and %s are not of one form (op, bias, "
				 "transB)", names[i]);
			return false;
		}
		if (p[i].w->dtype != p[0].w->dtype || p[i].w->dims[0] != p[0].w->dims[0] ||
		    p[i].w->dims[1] != p[0].w->dims[1] || (p[i].b && (p[i].b->dtype != p[0].b->dtype ||
		    p[i].b->numel != p[0].b->numel))) {
			snprintf(q->why, sizeof(q->why), "the weights of q and %s differ in shape or type", names[i]);
			return false;
		}
	}
	if (p[0].mm->op == IR_OP_Gemm && pass_rank_of(p[0].x) != 2) {
		snprintf(q->why, sizeof(q->why), "the Gemm input '%s' is not known to be 2-D", p[0].x->name);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Rewriting                                                                 */
/* ------------------------------------------------------------------------ */

/* One projection by the concatenated weights; its output (NULL on error). */
static struct ir_value *merge_projs(struct pass_ctx *c, struct proj p[3], struct ir_node *before)
{
	struct ir_graph *g = c->m->graph;
	const struct ir_tensor *ws[3] = { p[0].w, p[1].w, p[2].w };
	struct ir_tensor *w = concat3(ws, p[0].trans_b ? 0 : 1, c->d);
	if (!w)
		return NULL;
	char base[200];
	snprintf(base, sizeof(base), "%s_qkv", p[0].mm->inputs[1]->name);
	struct ir_value *wv = pass_new_init(g, base, w, c->d);
	ir_tensor_unref(w);
	struct ir_value *bv = NULL;
	if (p[0].b) {
		const struct ir_tensor *bs[3] = { p[0].b, p[1].b, p[2].b };
		struct ir_tensor *b = concat3(bs, 0, c->d);
		if (!b)
			return NULL;
		snprintf(base, sizeof(base), "%s_qkv_bias", p[0].mm->inputs[1]->name);
		bv = pass_new_init(g, base, b, c->d);
		ir_tensor_unref(b);
		if (!bv)
			return NULL;
	}
	if (!wv)
		return NULL;
	struct ir_value *in[3] = { p[0].x, wv, bv };
	snprintf(base, sizeof(base), "%s_qkv", p[0].mm->outputs[0]->name);
	bool gemm = p[0].mm->op == IR_OP_Gemm;
	struct ir_node *mm = pass_emit(c, gemm ? "Gemm" : "MatMul", p[0].mm, in, gemm && bv ? 3 : 2, base, before);
	if (!mm)
		return NULL;
	for (int i = 0; i < 3; i++)
		pass_add_from(mm, p[i].mm);
	if (gemm && p[0].trans_b) {
		struct ir_attr a = { 0 };
		a.name = strdup("transB");
		a.type = IR_ATTR_INT;
		a.has_type = true;
		a.i = 1;
		if (!a.name || ir_node_set_attr(mm, &a, c->d))
			return NULL;
	}
	if (gemm || !bv)
		return mm->outputs[0];
	in[0] = mm->outputs[0];
	in[1] = bv;
	snprintf(base, sizeof(base), "%s_qkv", p[0].add->outputs[0]->name);
	struct ir_node *add = pass_emit(c, "Add", p[0].add, in, 2, base, before);
	if (!add)
		return NULL;
	for (int i = 0; i < 3; i++)
		pass_add_from(add, p[i].add);
	return add->outputs[0];
}

/* Moves n's output 0 to `to` (which must have no producer) and removes n's old output's producer role. */
static int take_output(struct pass_ctx *c, struct ir_node *from, struct ir_node *to)
{
	struct ir_value *y = from->outputs[0];
	int rc = ir_node_set_output(from, 0, NULL, c->d);
	if (!rc) {
		struct ir_value *old = to->outputs[0];
		rc = ir_node_set_output(to, 0, NULL, c->d);
		if (!rc)
			rc = ir_node_set_output(to, 0, y, c->d);
		if (!rc && old)   /* `from` now makes to's old value, which it may read: cut it loose */
			rc = ir_node_set_output(from, 0, old, c->d);
	}
	return rc;
}

/* Whether perm (of rank r) only swaps axes 0 and 1. */
static bool swaps01(const struct ir_node *t, int r)
{
	const struct ir_attr *pa = ir_node_attr(t, "perm");
	if (!pa || pa->type != IR_ATTR_INTS || pa->n != (size_t)r || r < 3)
		return false;
	for (int i = 0; i < r; i++)
		if (pa->ints[i] != (i == 0 ? 1 : i == 1 ? 0 : i))
			return false;
	return true;
}

/*
 * Gives v, whose values the rewrite reorders (batch-major rows where they
 * were sequence-major, a Shape of another tensor), a new name: stages are
 * compared by value name, and the old name would pair it with other numbers.
 * 0 or an error code.
 */
static int rename_reordered(struct pass_ctx *c, struct ir_value *v, const char *suffix)
{
	if (!v || v->is_output || v->is_input)
		return 0;
	char base[400];
	snprintf(base, sizeof(base), "%s_%s", v->name, suffix);
	char *nm = pass_unique_name(c->m->graph, base);
	if (!nm)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	int rc = ir_value_rename(v, nm, c->d);
	free(nm);
	return rc;
}

/*
 * The input Transpose: the packed projection (MatMul or Gemm by constant
 * weights, maybe + a constant bias, maybe after a Reshape to rows [N, E])
 * reads Transpose(x, [1, 0, 2]) and nothing else reads the steps between.
 * Rows of a product by constant weights are independent, so the projection
 * may read x (its rows then come batch-major where they came sequence-major,
 * which the caller's packed layout says). Returns 1 when the Transpose went,
 * 0 when there is none, -1 on error.
 */
static int drop_in_transpose(struct pass_ctx *c, struct ir_value *src)
{
	struct ir_node *n = pass_producer(src);
	struct ir_node *mm = n;
	if (pass_is_op(n, IR_OP_Add, 2)) {
		mm = pass_producer(n->inputs[0]);
		if (!pass_const_input(n, 1) || pass_rank_of(n->inputs[1]) > 1 || !mm ||
		    pass_n_readers(mm->outputs[0]) != 1)
			return 0;
	}
	if (!mm || (mm->op != IR_OP_MatMul && mm->op != IR_OP_Gemm) || mm->n_inputs < 2 || !pass_const_input(mm, 1) ||
	    (mm->op == IR_OP_Gemm && ir_node_attr_int(mm, "transA", 0)) || pass_rank_of(mm->inputs[1]) != 2)
		return 0;
	struct ir_value *u = mm->inputs[0];
	struct ir_node *r = NULL, *t = pass_producer(u);
	if (pass_rank_of(u) == 2) {   /* rows: Reshape(Transpose(x), [N, E]) */
		r = t;
		if (!pass_is_op(r, IR_OP_Reshape, 2) || pass_n_readers(u) != 1 || pass_rank_of(r->inputs[0]) != 3)
			return 0;
		const struct ir_type *tr = ir_value_type(r->inputs[0]), *tu = ir_value_type(u);
		if (!tr || !tu || !ir_dim_equal(&tr->dims[2], &tu->dims[1]) || tu->dims[1].kind != IR_DIM_VALUE)
			return 0;
		t = pass_producer(r->inputs[0]);
	} else if (pass_rank_of(u) != 3) {
		return 0;
	}
	struct ir_value *tv = r ? r->inputs[0] : u;
	if (!pass_is_op(t, IR_OP_Transpose, 1) || pass_rank_of(t->inputs[0]) != 3 || !swaps01(t, 3) ||
	    tv->is_output || pass_read_in_subgraph(tv))
		return 0;
	/* other readers may only be Shape nodes whose dims are Gathered one by one (torch's
	 * exporter takes the batch size so): they read x's shape at the swapped index */
	for (size_t i = 0; i < tv->n_uses; i++) {
		const struct ir_node *sh = tv->uses[i].node;
		if (sh == (r ? r : mm))
			continue;
		if (!shape_gathered(sh, -1, 3))
			return 0;
	}
	struct ir_value *x = t->inputs[0];
	for (size_t i = 0; i < tv->n_uses;) {
		struct ir_node *sh = tv->uses[i].node;
		if (sh == (r ? r : mm)) {
			i++;
			continue;
		}
		for (size_t j = 0; j < sh->outputs[0]->n_uses; j++) {
			struct ir_node *ga = sh->outputs[0]->uses[j].node;
			int64_t idx;
			const_ints(ga, 1, &idx, 1);
			idx = idx < 0 ? idx + 3 : idx;
			int64_t sw = idx == 0 ? 1 : idx == 1 ? 0 : idx;
			struct ir_tensor *it = ir_tensor_new(IR_INT64, 0, NULL, c->d);
			if (!it)
				return -1;
			*(int64_t *)ir_tensor_mutable(it) = sw;
			char base[200];
			snprintf(base, sizeof(base), "%s_index", ga->outputs[0]->name);
			struct ir_value *iv = pass_new_init(c->m->graph, base, it, c->d);
			ir_tensor_unref(it);
			if (!iv || ir_node_set_input(ga, 1, iv))
				return -1;
		}
		if (ir_node_set_input(sh, 0, x)) {   /* drops this use of tv: i stays */
			ir_diag_err(c->d, IR_ENOMEM, "out of memory");
			return -1;
		}
		if (rename_reordered(c, sh->outputs[0], "of_input"))
			return -1;
	}
	if (ir_node_set_input(r ? r : mm, 0, x)) {
		ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		return -1;
	}
	if ((r && rename_reordered(c, r->outputs[0], "batch_major")) || rename_reordered(c, mm->outputs[0], "batch_major") ||
	    (n != mm && rename_reordered(c, n->outputs[0], "batch_major")))
		return -1;
	pass_remove_dead_from(c->m->graph, t);
	return 1;
}

/*
 * The output Transposes: the attention's output read only by a Transpose
 * that keeps D last becomes the output layout; then, when the output is
 * [S, B, H, D] and goes through Reshape [S*B, E], a projection by constant
 * weights (rows are independent), Reshape [S, B, E'] and Transpose [1, 0,
 * 2], the attention writes [B, S, H, D] and the last Reshape makes [B, S,
 * E'] directly (its shape a constant [-1, S, E']). Returns how many
 * Transposes went (or -1 on error).
 */
static int drop_out_transposes(struct pass_ctx *c, struct ir_node *fa, struct pass_attn_fn *a)
{
	int dropped = 0;
	char why[160];
	struct ir_node *t = pass_sole_reader(fa->outputs[0], why, sizeof(why));
	const struct ir_attr *pa = t && pass_is_op(t, IR_OP_Transpose, 1) ? ir_node_attr(t, "perm") : NULL;
	if (pa && pa->type == IR_ATTR_INTS && pa->n == 4 && pa->ints[3] == 3 && !fa->outputs[0]->is_output) {
		char o[5];
		for (int i = 0; i < 4; i++)
			o[i] = a->l.out[pa->ints[i] >= 0 && pa->ints[i] < 4 ? pa->ints[i] : 3];
		o[4] = 0;
		if (strchr(o, 'B') && strchr(o, 'S') && strchr(o, 'H')) {
			memcpy(a->l.out, o, 5);
			a->l.has_out = true;
			pass_add_from(fa, t);
			if (take_output(c, t, fa) || ir_node_set_input(t, 0, NULL) || ir_node_remove(t, c->d))
				return -1;
			dropped++;
		}
	}
	/* [S, B, H, D] -> Reshape [S*B, E] -> projection -> Reshape [S, B, E'] -> Transpose [1, 0, 2] */
	if (a->l.out[0] != 'S' || a->l.out[1] != 'B')
		return dropped;
	struct ir_node *r1 = pass_sole_reader(fa->outputs[0], why, sizeof(why));
	const struct ir_type *ty = ir_value_type(fa->outputs[0]);
	if (!pass_is_op(r1, IR_OP_Reshape, 2) || pass_rank_of(r1->outputs[0]) != 2 || !ty || ty->rank != 4 ||
	    ty->dims[0].kind != IR_DIM_VALUE)
		return dropped;
	const int64_t S = ty->dims[0].value;
	struct ir_node *pm = pass_sole_reader(r1->outputs[0], why, sizeof(why));
	if (!pm || (pm->op != IR_OP_Gemm && pm->op != IR_OP_MatMul) || pm->inputs[0] != r1->outputs[0] ||
	    !pass_const_input(pm, 1) || (pm->op == IR_OP_Gemm && ir_node_attr_int(pm, "transA", 0)) ||
	    (pm->op == IR_OP_Gemm && pm->n_inputs > 2 && pm->inputs[2] && pass_rank_of(pm->inputs[2]) > 1))
		return dropped;
	struct ir_node *last = pm;
	struct ir_node *r2 = pass_sole_reader(pm->outputs[0], why, sizeof(why));
	if (pass_is_op(r2, IR_OP_Add, 2) && pm->op == IR_OP_MatMul && r2->inputs[0] == pm->outputs[0] &&
	    pass_const_input(r2, 1) && pass_rank_of(r2->inputs[1]) <= 1) {
		last = r2;
		r2 = pass_sole_reader(r2->outputs[0], why, sizeof(why));
	}
	const struct ir_type *t2 = pass_is_op(r2, IR_OP_Reshape, 2) ? ir_value_type(r2->outputs[0]) : NULL;
	if (!t2 || t2->kind != IR_TYPE_TENSOR || t2->rank != 3 || t2->dims[2].kind != IR_DIM_VALUE ||
	    !ir_dim_equal(&t2->dims[0], &ty->dims[0]) || !ir_dim_equal(&t2->dims[1], &ty->dims[1]) ||
	    r2->inputs[0] != last->outputs[0] || r2->outputs[0]->is_output)
		return dropped;
	struct ir_node *t3 = pass_sole_reader(r2->outputs[0], why, sizeof(why));
	if (!pass_is_op(t3, IR_OP_Transpose, 1) || !swaps01(t3, 3))
		return dropped;
	const int64_t shape[3] = { -1, S, t2->dims[2].value };
	int64_t sd[1] = { 3 };
	struct ir_tensor *st = ir_tensor_new(IR_INT64, 1, sd, c->d);
	if (!st)
		return -1;
	memcpy(ir_tensor_mutable(st), shape, sizeof(shape));
	char base[200];
	snprintf(base, sizeof(base), "%s_shape", t3->outputs[0]->name);
	struct ir_value *sv = pass_new_init(c->m->graph, base, st, c->d);
	ir_tensor_unref(st);
	if (!sv)
		return -1;
	struct ir_value *old_shape = r2->inputs[1];
	if (ir_node_set_input(r2, 1, sv))
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory"), -1;
	a->l.out[0] = 'B';
	a->l.out[1] = 'S';
	if (rename_reordered(c, fa->outputs[0], "batch_major") || rename_reordered(c, r1->outputs[0], "batch_major") ||
	    rename_reordered(c, pm->outputs[0], "batch_major") ||
	    (last != pm && rename_reordered(c, last->outputs[0], "batch_major")))
		return -1;
	pass_add_from(r2, t3);
	if (take_output(c, t3, r2) || ir_node_set_input(t3, 0, NULL) || ir_node_remove(t3, c->d))
		return -1;
	struct ir_node *sp = pass_producer(old_shape);
	if (sp)
		pass_remove_dead_from(c->m->graph, sp);
	return dropped + 1;
}

static int rewrite(struct pass_ctx *c, struct qkv *q, bool three_projs, struct proj p[3])
{
	struct ir_graph *g = c->m->graph;
	struct ir_node *fa = q->fa;
	const int elem = ir_value_type(q->in[0])->elem;
	/* what the message and the packed reshape need, before nodes (and the types they point to) go */
	char l0 = q->xl[q->lead[0]], l1 = q->xl[q->lead[1]];
	int64_t d0 = q->fs[q->lead[0]].kind == IR_DIM_VALUE ? q->fs[q->lead[0]].value : -1;
	int64_t d1 = q->fs[q->lead[1]].kind == IR_DIM_VALUE ? q->fs[q->lead[1]].value : -1;
	const int64_t e3 = 3 * q->heads * q->hsize;
	char src_what[200] = "";
	if (three_projs)
		snprintf(src_what, sizeof(src_what), "3 projections of '%s' (%s) merged into one by their weights side "
			 "by side; ", p[0].x->name, p[0].mm->op_type);
	struct ir_value *src = q->root[0];
	int src_rank = q->n_x + 1;
	if (three_projs) {
		src_rank = p[0].mm->op == IR_OP_Gemm ? 2 : pass_rank_of(p[0].x);
		if (!(src = merge_projs(c, p, fa)))
			return IR_ERR;
		/* Shapes that read a projection's leading dims read them from its input */
		for (int i = 0; i < 3; i++)
			for (size_t u = 0; u < q->root[i]->n_uses;) {
				struct ir_node *sh = q->root[i]->uses[u].node;
				if (sh->op != IR_OP_Shape) {
					u++;
					continue;
				}
				if (ir_node_set_input(sh, 0, p[i].x))
					return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
				if (rename_reordered(c, sh->outputs[0], "of_input"))
					return IR_ERR;
			}
	}
	struct pass_attn_fn a = { .in_rank = 3, .heads = q->heads };
	a.mask = fa->n_inputs > 3 && fa->inputs[3];
	a.nan_zero = ir_node_attr_int(fa, "nan_to_zero", 0) != 0;
	a.scale = ir_node_attr(fa, "scale") ? ir_node_attr_float(fa, "scale", 0) : 1.0 / sqrt((double)q->hsize);
	const char *old_layout = "BHSD";
	const struct ir_attr *la = ir_node_attr(fa, "layout");
	if (la && la->type == IR_ATTR_STRING && la->s.data)
		old_layout = la->s.data;
	char out[5];
	snprintf(out, sizeof(out), "%s", old_layout);
	/* the new node takes the old one's output; the old one and the view chains go */
	char *name = pass_new_node_name(g, fa, "FusedAttention");
	if (!name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_node *n = ir_node_new(g, "FusedAttention", FUSED_DOMAIN, name, a.mask ? 4 : 1, 1, fa);
	free(name);
	/* reading src (or the view of it the chains share) keeps it out of the sweep below */
	if (!n || ir_node_set_input(n, 0, q->reuse ? q->reuse : src) ||
	    (a.mask && ir_node_set_input(n, 3, fa->inputs[3])))
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	pass_add_from(n, fa);
	int rc = take_output(c, fa, n);
	if (rc)
		return rc;
	int ids[3 * MAXCHAIN + 3], n_ids = 0;
	for (int i = 0; i < 3; i++) {
		struct ir_node *pr = pass_producer(q->in[i]);
		if (pr)
			ids[n_ids++] = pr->id;
		for (int k = 0; k < q->n_chain[i]; k++)
			pass_add_from(n, q->chain[i][k]);
	}
	if (three_projs)
		for (int i = 0; i < 3; i++)
			ids[n_ids++] = (p[i].add ? p[i].add : p[i].mm)->id;
	for (int i = 0; i < fa->n_inputs; i++)
		ir_node_set_input(fa, i, NULL);
	/* the new node takes the old one's name (a temporary one while both were there) */
	char *old_name = fa->name && fa->name[0] ? strdup(fa->name) : NULL;
	if (ir_node_remove(fa, c->d) || (old_name && ir_node_rename(n, old_name, c->d))) {
		free(old_name);
		return IR_ERR;
	}
	free(old_name);
	int swept = 0;
	for (int i = 0; i < n_ids; i++) {
		struct ir_node *x = ir_node_by_id(g, ids[i]);
		if (x)
			swept += pass_remove_dead_from(g, x);
	}
	/* (with the packed Reshape built here, whose shape must then be expressible) */
	int tin = !q->reuse && pass_n_readers(src) == 1 && (d0 >= 0 || d1 >= 0) ? drop_in_transpose(c, src) : 0;
	if (tin < 0)
		return IR_ERR;
	if (tin) {
		char l = l0;
		int64_t d = d0;
		l0 = l1;
		l1 = l;
		d0 = d1;
		d1 = d;
	}
	/* [rows, 3E] (or [seq, batch, 3E] read batch-first now) as [X0, X1, 3E]: a Reshape, which copies nothing */
	struct ir_value *packed = q->reuse ? q->reuse : src;
	if (!q->reuse && (src_rank != 3 || tin)) {
		const int64_t shape[3] = { d0, d1, e3 };
		int64_t sd[1] = { 3 };
		struct ir_tensor *st = ir_tensor_new(IR_INT64, 1, sd, c->d);
		if (!st)
			return IR_ERR;
		memcpy(ir_tensor_mutable(st), shape, sizeof(shape));
		char base[200];
		snprintf(base, sizeof(base), "%s_packed_shape", src->name);
		struct ir_value *sv = pass_new_init(g, base, st, c->d);
		ir_tensor_unref(st);
		struct ir_value *in[2] = { src, sv };
		snprintf(base, sizeof(base), "%s_packed", src->name);
		struct ir_node *r = sv ? pass_emit(c, "Reshape", n, in, 2, base, n) : NULL;
		if (!r)
			return IR_ERR;
		packed = r->outputs[0];
	}
	if (ir_node_set_input(n, 0, packed))
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	char lay[6] = { l0, l1, '3', 'H', 'D', 0 };
	char why[200];
	if (ir_attn_layout_parse(lay, out, &a.l, why, sizeof(why)))
		return ir_diag_err(c->d, IR_ERR, "internal error: %s", why);
	int tout = drop_out_transposes(c, n, &a);
	if (tout < 0)
		return IR_ERR;
	a.l.has_out = strcmp(a.l.out, (char[]){ l0, l1, 'H', 'D', 0 }) != 0;
	if ((rc = pass_fused_attention_fn(c, n, &a, elem)))
		return rc;
	char extra[200] = "";
	if (tin || tout)
		snprintf(extra, sizeof(extra), "; %d transpose%s around the block went (%s%s%s)", tin + tout,
			 tin + tout == 1 ? "" : "s", tin ? "the projection reads the input directly" : "",
			 tin && tout ? ", " : "", tout ? "the attention writes the order the output wants" : "");
	pass_rewrote(c, n, "%sattention reads Q, K, V packed from '%s' (layout %s, out_layout %s); %d view, copy and "
		     "projection nodes went%s", src_what, packed->name, a.l.in, a.l.out, swept, extra);
	return 0;
}

/* Returns 1 matched (three_projs set), 0 not a candidate, -1 rejected (q->why). */
static int match(struct qkv *q, struct ir_node *fa, bool *three_projs, struct proj p[3])
{
	memset(q, 0, sizeof(*q));
	q->fa = fa;
	const struct ir_attr *la = ir_node_attr(fa, "layout");
	const char *layout = la && la->type == IR_ATTR_STRING && la->s.data ? la->s.data : "BHSD";
	if (strcmp(layout, "BHSD") && strcmp(layout, "BSHD"))
		return 0;   /* packed already */
	if (ir_node_attr(fa, "out_layout") || fa->n_inputs < 3 || !fa->inputs[0] || !fa->inputs[1] || !fa->inputs[2])
		return 0;
	for (int i = 0; i < 3; i++)
		q->in[i] = fa->inputs[i];
	const struct ir_type *tq = ir_value_type(q->in[0]), *tk = ir_value_type(q->in[1]), *tv = ir_value_type(q->in[2]);
	const int hx = layout[1] == 'H' ? 1 : 2;
	if (!tq || !tk || !tv || tq->rank != 4 || tk->rank != 4 || tv->rank != 4) {
		snprintf(q->why, sizeof(q->why), "Q, K and V are not known to be 4-D");
		return -1;
	}
	for (int i = 0; i < 4; i++)
		if (!ir_dim_equal(&tq->dims[i], &tk->dims[i]) || !ir_dim_equal(&tq->dims[i], &tv->dims[i]) ||
		    tq->dims[i].kind == IR_DIM_UNKNOWN) {
			snprintf(q->why, sizeof(q->why), "cannot tell that Q, K and V have one shape (self-attention)");
			return -1;
		}
	if (tq->dims[hx].kind != IR_DIM_VALUE || tq->dims[3].kind != IR_DIM_VALUE) {
		snprintf(q->why, sizeof(q->why), "the heads and head size of Q are not known numbers");
		return -1;
	}
	q->heads = tq->dims[hx].value;
	q->hsize = tq->dims[3].value;
	for (int i = 0; i < 3; i++)
		follow(q, i);
	bool one_root = q->root[0] == q->root[1] && q->root[0] == q->root[2];
	*three_projs = !one_root;
	if (one_root) {
		if (!q->n_chain[0] && !q->n_chain[1]) {
			snprintf(q->why, sizeof(q->why), "q, k and v are one tensor '%s'", q->root[0]->name);
			return -1;
		}
		if (!set_factors(q, q->root[0], 3))
			return -1;
		for (int i = 0; i < 3; i++)
			if (!replay(q, i, -1, layout))
				return -1;
	} else {
		if (!projs_ok(q, p))
			return -1;
		if (!set_factors(q, q->root[0], 1))
			return -1;
		const struct ir_type *t0 = ir_value_type(q->root[0]);
		for (int i = 0; i < 3; i++) {
			const struct ir_type *ti = ir_value_type(q->root[i]);
			bool same = ti && ti->rank == t0->rank;
			for (int a = 0; same && a < t0->rank; a++)
				same = ir_dim_equal(&t0->dims[a], &ti->dims[a]);
			if (!same) {
				snprintf(q->why, sizeof(q->why), "the projections of q and %s differ in shape",
					 i == 1 ? "k" : "v");
				return -1;
			}
			if (!replay(q, i, i, layout))
				return -1;
		}
	}
	/* the batch and sequence factors, in the root's memory order */
	int lead[4], nl = 0;
	for (int i = 0; i < q->n_x; i++) {
		int f = F_X + i;
		if (q->split[f][0] && !q->xl[f]) {
			lead[nl++] = q->split[f][0];
			lead[nl++] = q->split[f][1];
		} else {
			lead[nl++] = f;
		}
		if (nl > 2)
			break;
	}
	if (nl != 2 || !q->xl[lead[0]] || !q->xl[lead[1]] || q->xl[lead[0]] == q->xl[lead[1]]) {
		snprintf(q->why, sizeof(q->why), "cannot tell the batch and sequence axes of '%s'", q->root[0]->name);
		return -1;
	}
	const bool rank3 = *three_projs ? p[0].mm->op != IR_OP_Gemm && pass_rank_of(p[0].x) == 3 : q->n_x == 2;
	const bool need = !rank3 && q->fs[lead[0]].kind != IR_DIM_VALUE && q->fs[lead[1]].kind != IR_DIM_VALUE;
	/* when the Reshape of rows to [X0, X1, 3E] cannot be written with constants (both dims
	 * symbolic), a view the three chains share that is that already (GPT-2's Reshape of its
	 * projection's rows back to [batch, seq, 3E]) is what the attention reads */
	for (int k = 1; need && one_root && k <= q->n_chain[0] && k <= q->n_chain[1] && k <= q->n_chain[2]; k++) {
		struct ir_node *cn = q->chain[0][q->n_chain[0] - k];
		if (cn != q->chain[1][q->n_chain[1] - k] || cn != q->chain[2][q->n_chain[2] - k])
			break;
		const struct ir_type *t = cn->n_outputs == 1 ? ir_value_type(cn->outputs[0]) : NULL;
		struct view v;
		if (!t || t->kind != IR_TYPE_TENSOR || t->rank != 3 || !view_after(q, 0, -1, k, &v))
			continue;
		/* its axes, as the replay proves: the lead factors, then 3, H, D */
		if (v.rank == 3 && v.ng[0] == 1 && v.grp[0][0] == lead[0] && v.ng[1] == 1 && v.grp[1][0] == lead[1] &&
		    v.ng[2] == 3 && v.grp[2][0] == F_3 && v.grp[2][1] == F_H && v.grp[2][2] == F_D)
			q->reuse = cn->outputs[0];
	}
	if (need && !q->reuse) {
		snprintf(q->why, sizeof(q->why), "neither the batch nor the sequence length is a known number (the "
			 "packed input is reshaped to [.., .., 3*E])");
		return -1;
	}
	q->lead[0] = lead[0];
	q->lead[1] = lead[1];
	return 1;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "stopped" : "out of memory");
	char why[200];
	if (!pass_fused_opset(c->m, why, sizeof(why)))
		return 0;
	int n_ids = 0, *ids = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
	/* the functions of the attention nodes this pass replaces: dropped when no node calls them any more */
	size_t n_fn = c->m->n_functions;
	bool *was = calloc(n_fn ? n_fn : 1, 1);
	if (!ids || !was) {
		free(ids);
		free(was);
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	}
	ir_for_each_node(g, n)
		if (n->op == IR_OP_ogsh_FusedAttention) {
			ids[n_ids++] = n->id;
			const struct ir_function *f = ir_model_find_function(c->m, n);
			if (f)
				was[f - c->m->functions] = true;
		}
	rc = 0;
	for (int i = 0; i < n_ids && !rc; i++) {
		struct ir_node *fa = ir_node_by_id(g, ids[i]);
		if (!fa)
			continue;
		struct qkv q;
		struct proj p[3];
		bool three = false;
		int ok = match(&q, fa, &three, p);
		if (!ok)
			continue;
		if (ok < 0) {
			pass_rejected(c, fa, "q, k, v not packed: %s", q.why);
			continue;
		}
		/* initializers outlive the nodes that read them: the old weights and the view
		 * chains' shapes and indices that nothing reads afterwards go (by this list) */
		int n_old = 0;
		struct ir_value **olds = malloc(sizeof(*olds) * (size_t)(g->n_inits + 1));
		if (!olds) {
			rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
			break;
		}
		for (int k = 0; k < g->n_inits; k++)
			if (pass_n_readers(g->inits[k]))
				olds[n_old++] = g->inits[k];
		rc = rewrite(c, &q, three, p);
		if (!rc)
			pass_drop_dead_consts(olds, n_old);
		free(olds);
	}
	if (!rc && c->rep->rewritten)
		rc = pass_drop_uncalled_fns(c->m, was, n_fn, NULL, c->d);
	free(was);
	free(ids);
	return rc;
}

const struct pass pass_fuse_qkv = {
	.name = "fuse-qkv",
	.summary = "let FusedAttention read Q, K and V packed from one projection (one GEMM instead of three, no "
		   "Split/Gather/Transpose copies)",
	.explain =
		"Every attention layer projects its input X three times, Q = X Wq + bq, K = X Wk + bk, V = X Wv + "
		"bv, and the three are one product by the weights side by side: [Q K V] = X [Wq Wk Wv] + [bq bk "
		"bv]. One GEMM with three times the columns reads X once and launches once, where three read it "
		"three times and launch three times (at batch 1 each small GEMM is mostly launch time). Exporters "
		"write it either way: BERT has three MatMul + Add, GPT-2 one projection and a Split, torch's "
		"MultiheadAttention one packed in_proj and a chain of Reshape, Unsqueeze, Transpose, Squeeze and "
		"Gather that cuts Q, K and V out of it and moves the heads axis; each of those is a copy on the "
		"GPU.\n\n"
		"This pass rewrites an ai.ogsh FusedAttention (see fuse-attention) so that it reads Q, K and V "
		"packed in its input 0 and inputs 1 and 2 are omitted: its layout gets the letter 3 for the Q/K/V "
		"axis. BS3HD is [batch, seq, 3*heads*size] (heads from q_num_heads): element (b, h, s, d) of part "
		"p is at b*S*3E + s*3E + p*E + h*D + d; SB3HD is the sequence-first [seq, batch, 3*E] of torch's "
		"MultiheadAttention. The kernels read Q, K and V with these strides, so nothing is copied; "
		"out_layout picks the order of the output's batch, sequence and heads axes (D stays last).\n\n"
		"Q, K and V are followed back through view ops (Reshape, Transpose, Squeeze, Unsqueeze, a Gather "
		"of one constant index, Split, Slice) to where they start. When that is one tensor P [X0, X1, "
		"3*H*D], the ops are replayed on its axes written as factors X0, X1, 3, H, D: each Reshape must "
		"regroup whole factors (dims proven by shape inference, never assumed), a Gather, Split or Slice "
		"must pick one part of the 3, and Q, K and V must end as parts 0, 1, 2 in the attention's layout; "
		"P's layout is then read off the factors. When they start at three MatMul (+ bias Add) or Gemm "
		"nodes of one input with constant weights of one shape and type (float16 and bfloat16 too), the "
		"weights and biases are concatenated on the output axis into one projection, whose output is P. "
		"The view nodes, old projections and old weights go. A projection that is rows [N, 3E] gets a Reshape "
		"to [X0, X1, 3E] (a view: nothing is copied), or, when both are symbolic, the attention reads the "
		"Reshape back to [batch, seq, 3E] that the three already share; Shapes that read a projection's "
		"leading dims read them from its input.\n\n"
		"Transposes around the block that only swap the batch and sequence axes go too: a MatMul by "
		"constant weights works on rows, so when P's projection reads Transpose(x, [1,0,2]) it may read x "
		"and P's layout swaps its first two letters; an output Transpose that keeps D last becomes "
		"out_layout; and torch's tail (output [S, B, H, D], Reshape [S*B, E], out_proj, Reshape [S, B, E], "
		"Transpose [1,0,2]) becomes an output [B, S, H, D] and one Reshape to [-1, S, E] (S a known "
		"number).\n\n"
		"Nothing is rewritten (each with the reason) when Q, K and V are not known to be 4-D of one shape, "
		"the heads or head size are not known numbers, the projections read different inputs, weights "
		"are not constant, a projection's output is read by anything but Shapes of its leading dims, a "
		"reshape splits heads "
		"differently from the packed axis, or Q, K, V are not parts 0, 1, 2 in order.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
