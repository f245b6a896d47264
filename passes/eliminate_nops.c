/*
 * eliminate_nops.c - the eliminate-nops pass: nodes that give back their
 * input unchanged (Identity, inference Dropout, Cast to the same type,
 * Reshape/Expand to the same shape, identity Transpose, zero Pad, whole
 * Slice), and pairs that undo each other or collapse into one (Transpose
 * after Transpose, Reshape after Reshape, Squeeze/Unsqueeze of the same axes).
 *
 * One walk over the main graph in topological order: a node looks back at
 * its producer, so chains collapse as the walk goes (linear time).
 */
#include "passes/pass.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Small readers                                                             */
/* ------------------------------------------------------------------------ */

/* The node's input i, or NULL. */
static struct ir_value *in_at(const struct ir_node *n, int i)
{
	return i >= 0 && i < n->n_inputs ? n->inputs[i] : NULL;
}

/*
 * Integers of input i of n: a constant integer tensor, or values shape
 * inference knows exactly. Returns the count, -1 when not known (no input:
 * -2), -3 when there are more than `max`.
 */
static int input_ints(const struct ir_node *n, int i, int64_t *out, int max)
{
	const struct ir_value *v = in_at(n, i);
	if (!v)
		return -2;
	const struct ir_tensor *t = pass_const_input(n, i);
	if (t) {
		if (!ir_dtype_is_int(t->dtype) || (t->numel && !ir_tensor_data(t)))
			return -1;
		if (t->numel > (uint64_t)max)
			return -3;
		if (ir_tensor_check(t, NULL))
			return -1;
		for (uint64_t k = 0; k < t->numel; k++)
			if (!ir_elem_to_i64(t->dtype, ir_tensor_data(t), k, &out[k]))
				return -1;
		return (int)t->numel;
	}
	if (v->is_input || v->n_known < 0)
		return -1;
	if (v->n_known > max)
		return -3;
	for (int k = 0; k < v->n_known; k++) {
		if (v->known[k].kind != IR_DIM_VALUE)
			return -1;
		out[k] = v->known[k].value;
	}
	return v->n_known;
}

/* Integers of an INTS attribute; -2 when absent, -3 when too many. */
static int attr_ints(const struct ir_node *n, const char *name, int64_t *out, int max)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a)
		return -2;
	if (a->type != IR_ATTR_INTS)
		return -1;
	if (a->n > (size_t)max)
		return -3;
	for (size_t k = 0; k < a->n; k++)
		out[k] = a->ints[k];
	return (int)a->n;
}

/* The value's tensor type when its rank is known, else NULL. */
static const struct ir_type *ranked(const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	return t && t->kind == IR_TYPE_TENSOR && t->rank >= 0 ? t : NULL;
}

static const char *dim_text(const struct ir_dim *d, char *buf, size_t size)
{
	if (d->kind == IR_DIM_PARAM)
		snprintf(buf, size, "'%s'", d->param ? d->param : "?");
	else
		ir_dim_str(d, buf, size);
	return buf;
}

static int64_t opset_of(const struct pass_ctx *c)
{
	int64_t v = ir_model_opset(c->m, "");
	return v > 0 ? v : 21;
}

/* ------------------------------------------------------------------------ */
/* Rewiring                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Whether the readers of `out` (an output of n) can be made to read `src`
 * instead, n then going. False with the reason in why.
 */
static bool can_bypass(const struct ir_node *n, const struct ir_value *out, const struct ir_value *src, char *why,
		       size_t size)
{
	if (src == out) {
		snprintf(why, size, "it reads its own output");
		return false;
	}
	if (pass_read_in_subgraph(out)) {
		snprintf(why, size, "its output '%s' is read inside a subgraph: left alone", out->name);
		return false;
	}
	if (!out->is_output)
		return true;
	for (int i = 0; i < n->n_outputs; i++)
		if (n->outputs[i] && n->outputs[i] != out && pass_n_readers(n->outputs[i])) {
			snprintf(why, size, "its output '%s' is a graph output and its other output '%s' is used",
				 out->name, n->outputs[i]->name);
			return false;
		}
	const char *what = src->is_input ? "a graph input" : src->init ? "an initializer" :
			   src->sparse_init ? "an initializer" : src->is_output ? "a graph output too" :
			   src->outer ? "a value of an enclosing graph" : !src->producer ? "not computed by a node" : NULL;
	if (what) {
		snprintf(why, size, "its output '%s' is a graph output and its input '%s' is %s, which cannot take "
			 "the output's name without changing the model's interface", out->name, src->name, what);
		return false;
	}
	if (pass_read_in_subgraph(src)) {
		snprintf(why, size, "its output '%s' is a graph output and its input '%s' is read inside a subgraph, "
			 "so it cannot be renamed", out->name, src->name);
		return false;
	}
	return true;
}

/*
 * The readers of `out` read `src` instead; when `out` is a graph output,
 * `src` takes over its name and declared type (the interface stays). n goes
 * when nothing reads it any more, with producers only it read. Call
 * can_bypass first. Returns 0 or an error code; *gone gets the nodes removed.
 */
static int bypass(struct pass_ctx *c, struct ir_node *n, struct ir_value *out, struct ir_value *src, int *gone)
{
	struct ir_graph *g = c->m->graph;
	*gone = 0;
	bool was_output = out->is_output;
	char *name = NULL;
	struct ir_type decl = { 0 };
	bool decl_has = out->has_type_proto, vinfo = out->has_vinfo;
	if (was_output) {
		if (!(name = strdup(out->name)) || ir_type_copy(&decl, &out->type)) {
			free(name);
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		}
	}
	ir_value_replace_uses(out, src);
	if (was_output)
		ir_graph_replace_output(g, out, src);
	*gone = pass_remove_dead_from(g, n);
	int rc = 0;
	if (was_output) {
		/* n is gone (can_bypass made sure), so the name is free */
		rc = ir_value_rename(src, name, c->d);
		if (!rc) {
			ir_type_clear(&src->type);
			src->type = decl;
			memset(&decl, 0, sizeof(decl));
			src->has_type_proto = decl_has;
			src->has_vinfo = src->has_vinfo || vinfo;
		}
	}
	free(name);
	ir_type_clear(&decl);
	return rc;
}

/* Bypasses n (output 0 -> input `from`) or rejects it; `what` says why it is a nop. */
static int drop_node(struct pass_ctx *c, struct ir_node *n, struct ir_value *src, const char *what)
{
	struct ir_value *out = n->outputs[0];
	char why[400];
	if (!can_bypass(n, out, src, why, sizeof(why))) {
		pass_rejected(c, n, "%s, but %s", what, why);
		return 0;
	}
	char *srcname = strdup(src->name);
	if (!srcname)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	/* the report names the node after it is gone: keep its name and id */
	char *self = strdup(n->name ? n->name : "");
	int id = n->id;
	if (!self) {
		free(srcname);
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	}
	bool was_output = out->is_output;
	int gone = 0;
	int rc = bypass(c, n, out, src, &gone);
	if (!rc) {
		char extra[96] = "";
		if (gone > 1)
			snprintf(extra, sizeof(extra), " (with %d node%s that only fed it)", gone - 1, gone > 2 ? "s" : "");
		struct ir_node who = { .id = id, .name = self };
		if (was_output)
			pass_rewrote(c, &who, "removed, %s; '%s' now carries the graph output's name%s", what, srcname, extra);
		else
			pass_rewrote(c, &who, "removed, %s; its readers read '%s'%s", what, srcname, extra);
	}
	free(srcname);
	free(self);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Single nodes                                                              */
/* ------------------------------------------------------------------------ */

static int do_dropout(struct pass_ctx *c, struct ir_node *n)
{
	struct ir_value *tm = in_at(n, 2);
	if (tm) {
		const struct ir_tensor *t = pass_const_input(n, 2);
		if (!t || t->numel != 1 || !ir_tensor_data(t)) {
			pass_rejected(c, n, "its training_mode input '%s' is not a constant", tm->name);
			return 0;
		}
		if (ir_tensor_check(t, NULL) || ir_tensor_get_f64(t, 0) != 0) {
			pass_rejected(c, n, "training_mode is true: it drops elements at random, so it is no identity");
			return 0;
		}
	}
	struct ir_value *mask = n->n_outputs > 1 ? n->outputs[1] : NULL;
	if (mask && pass_n_readers(mask)) {
		pass_rejected(c, n, "its mask output '%s' is read", mask->name);
		return 0;
	}
	return drop_node(c, n, n->inputs[0], "Dropout does nothing at inference");
}

static int do_cast(struct pass_ctx *c, struct ir_node *n, bool like)
{
	const struct ir_type *ti = ir_value_type(n->inputs[0]);
	int to;
	if (like) {
		struct ir_value *lv = in_at(n, 1);
		const struct ir_type *tl = lv ? ir_value_type(lv) : NULL;
		to = tl && tl->kind == IR_TYPE_TENSOR ? tl->elem : 0;
		if (!to) {
			pass_rejected(c, n, "the element type of '%s' is not known", lv ? lv->name : "?");
			return 0;
		}
	} else {
		const struct ir_attr *a = ir_node_attr(n, "to");
		if (!a || a->type != IR_ATTR_INT)
			return 0;   /* malformed: not ours to judge */
		to = (int)a->i;
	}
	if (!ti || ti->kind != IR_TYPE_TENSOR || !ti->elem) {
		pass_rejected(c, n, "the element type of its input '%s' is not known", n->inputs[0]->name);
		return 0;
	}
	if (ti->elem != to)
		return 0;
	char what[128];
	snprintf(what, sizeof(what), "a Cast to %s, the type '%s' already has", ir_dtype_name(to), n->inputs[0]->name);
	return drop_node(c, n, n->inputs[0], what);
}

/* Gets the Transpose's permutation into p (the reversal when absent). Returns the rank or -1. */
static int transpose_perm(const struct ir_node *n, int64_t *p)
{
	int r = attr_ints(n, "perm", p, IR_MAX_RANK);
	if (r == -2) {
		const struct ir_type *t = ranked(n->inputs[0]);
		if (!t)
			return -1;
		r = t->rank;
		for (int i = 0; i < r; i++)
			p[i] = r - 1 - i;
		return r;
	}
	if (r < 0)
		return -1;
	/* a permutation: each of 0..r-1 once */
	uint64_t seen = 0;
	for (int i = 0; i < r; i++) {
		if (p[i] < 0 || p[i] >= r || (seen >> p[i]) & 1)
			return -1;
		seen |= (uint64_t)1 << p[i];
	}
	return r;
}

static bool is_identity_perm(const int64_t *p, int r)
{
	for (int i = 0; i < r; i++)
		if (p[i] != i)
			return false;
	return true;
}

static const char *perm_text(const int64_t *p, int r, char *buf, size_t size)
{
	return ir_dims_str(r, p, buf, size);
}

static int do_transpose(struct pass_ctx *c, struct ir_node *n)
{
	struct ir_graph *g = c->m->graph;
	int64_t p2[IR_MAX_RANK];
	int r = transpose_perm(n, p2);
	if (r < 0) {
		if (!ir_node_attr(n, "perm"))
			pass_rejected(c, n, "it has no perm and the rank of '%s' is not known", n->inputs[0]->name);
		return 0;
	}
	struct ir_value *x = n->inputs[0];
	struct ir_node *t1 = x->producer;
	if (t1 && t1->graph == g && t1->op == IR_OP_Transpose && t1->n_inputs >= 1 && t1->inputs[0] &&
	    t1->n_outputs >= 1 && t1->outputs[0] == x) {
		char nb[64];
		pass_node_name(t1, nb, sizeof(nb));
		int64_t p1[IR_MAX_RANK];
		int r1 = transpose_perm(t1, p1);
		if (r1 < 0) {
			pass_rejected(c, n, "it follows Transpose '%s', whose permutation is not known", nb);
		} else if (r1 != r) {
			pass_rejected(c, n, "it follows Transpose '%s' but their permutations have different lengths "
				      "(%d and %d)", nb, r1, r);
		} else {
			/* y = transpose(x, p1): y[i] = x[p1[i]]; z = transpose(y, p2): z[i] = x[p1[p2[i]]] */
			int64_t q[IR_MAX_RANK];
			for (int i = 0; i < r; i++)
				q[i] = p1[p2[i]];
			char a[256], b[256], qq[256];
			perm_text(p1, r, a, sizeof(a));
			perm_text(p2, r, b, sizeof(b));
			perm_text(q, r, qq, sizeof(qq));
			int rc = pass_set_ints_attr(n, "perm", q, r, c->d);
			if (rc)
				return rc;
			rc = ir_node_set_input(n, 0, t1->inputs[0]);
			if (rc)
				return ir_diag_err(c->d, rc, "out of memory");
			int gone = pass_remove_dead_from(g, t1);
			pass_rewrote(c, n, "merged with Transpose '%s': perm %s after %s is perm %s%s", nb, b, a, qq,
				     gone ? " (the first one went)" : "");
			memcpy(p2, q, sizeof(int64_t) * (size_t)r);
		}
	}
	if (!is_identity_perm(p2, r))
		return 0;
	char what[300], pt[256];
	snprintf(what, sizeof(what), "a Transpose with the identity permutation %s", perm_text(p2, r, pt, sizeof(pt)));
	return drop_node(c, n, n->inputs[0], what);
}

static int do_pad(struct pass_ctx *c, struct ir_node *n, int64_t opset)
{
	int64_t pads[2 * IR_MAX_RANK];
	int k;
	if (opset < 11 || !in_at(n, 1)) {
		k = attr_ints(n, "pads", pads, 2 * IR_MAX_RANK);
		if (k == -2 && opset >= 11) {
			pass_rejected(c, n, "it has no pads");
			return 0;
		}
	} else {
		k = input_ints(n, 1, pads, 2 * IR_MAX_RANK);
	}
	if (k == -3)
		return 0;   /* more pads than any rank: not a nop we can check */
	if (k < 0) {
		pass_rejected(c, n, "its pads are not a constant");
		return 0;
	}
	for (int i = 0; i < k; i++)
		if (pads[i])
			return 0;
	return drop_node(c, n, n->inputs[0], "a Pad of zero everywhere");
}

/* Reads Slice's starts/ends/axes/steps (inputs, or attributes before opset 10). Returns the count or a negative code. */
static int slice_params(struct pass_ctx *c, struct ir_node *n, int64_t opset, int64_t *st, int64_t *en, int64_t *ax,
			int64_t *sp, bool *has_axes)
{
	int ns, ne, na, np;
	if (opset < 10) {
		ns = attr_ints(n, "starts", st, IR_MAX_RANK);
		ne = attr_ints(n, "ends", en, IR_MAX_RANK);
		na = attr_ints(n, "axes", ax, IR_MAX_RANK);
		np = -2;
	} else {
		ns = input_ints(n, 1, st, IR_MAX_RANK);
		ne = input_ints(n, 2, en, IR_MAX_RANK);
		na = input_ints(n, 3, ax, IR_MAX_RANK);
		np = input_ints(n, 4, sp, IR_MAX_RANK);
	}
	if (ns == -3 || ne == -3 || na == -3 || np == -3)
		return -3;
	if (ns < 0 || ne < 0 || (na < 0 && na != -2) || (np < 0 && np != -2)) {
		pass_rejected(c, n, "its starts, ends, axes or steps are not constants");
		return -1;
	}
	if (ns != ne || (na >= 0 && na != ns) || (np >= 0 && np != ns))
		return -3;   /* malformed: lengths differ */
	*has_axes = na >= 0;
	if (np < 0)
		for (int i = 0; i < ns; i++)
			sp[i] = 1;
	return ns;
}

static int do_slice(struct pass_ctx *c, struct ir_node *n, int64_t opset)
{
	int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK], sp[IR_MAX_RANK];
	bool has_axes = false;
	int k = slice_params(c, n, opset, st, en, ax, sp, &has_axes);
	if (k < 0)
		return 0;
	const struct ir_type *t = ranked(n->inputs[0]);
	int r = t ? t->rank : -1;
	uint64_t seen = 0;
	for (int i = 0; i < k; i++) {
		int64_t a = has_axes ? ax[i] : i;
		if (a < 0) {
			if (r < 0) {
				pass_rejected(c, n, "it has negative axes and the rank of '%s' is not known", n->inputs[0]->name);
				return 0;
			}
			a += r;
		}
		if (a < 0 || (r >= 0 && a >= r) || a >= IR_MAX_RANK || (seen >> a) & 1)
			return 0;   /* malformed */
		seen |= (uint64_t)1 << a;
		if (sp[i] != 1)
			return 0;   /* steps other than 1 skip or reverse */
		const struct ir_dim *d = t ? &t->dims[a] : NULL;
		bool dk = d && d->kind == IR_DIM_VALUE;
		bool start0 = st[i] == 0 || (dk && st[i] < 0 && st[i] <= -d->value);
		bool endall = en[i] == INT64_MAX || (dk && en[i] >= d->value);
		if (dk && d->value == 0)
			continue;   /* an empty dim stays empty */
		if (start0 && endall)
			continue;
		if (dk || (st[i] > 0) || (en[i] < 0 && en[i] != INT64_MIN))
			return 0;   /* takes less than everything (or cannot take everything) */
		char db[64];
		pass_rejected(c, n, "it slices [%" PRId64 ":%" PRId64 "] of axis %" PRId64 " of '%s', whose length %s is not "
			      "known: cannot tell whether it takes everything", st[i], en[i], a, n->inputs[0]->name,
			      d ? dim_text(d, db, sizeof(db)) : "?");
		return 0;
	}
	return drop_node(c, n, n->inputs[0], "a Slice that takes everything");
}

static int do_expand(struct pass_ctx *c, struct ir_node *n)
{
	int64_t s[IR_MAX_RANK];
	int k = input_ints(n, 1, s, IR_MAX_RANK);
	if (k == -3)
		return 0;
	if (k < 0) {
		pass_rejected(c, n, "its shape is not a constant");
		return 0;
	}
	const struct ir_type *t = ranked(n->inputs[0]);
	if (!t) {
		pass_rejected(c, n, "the shape of '%s' is not known", n->inputs[0]->name);
		return 0;
	}
	if (k > t->rank)
		return 0;   /* adds dims */
	for (int i = 0; i < k; i++) {
		const struct ir_dim *d = &t->dims[t->rank - k + i];
		if (s[i] == 1)
			continue;
		if (d->kind == IR_DIM_VALUE) {
			if (d->value == s[i])
				continue;
			return 0;
		}
		char db[64];
		pass_rejected(c, n, "dim %d of '%s' is %s and it expands to %" PRId64 ": cannot tell whether that is the same",
			      t->rank - k + i, n->inputs[0]->name, dim_text(d, db, sizeof(db)), s[i]);
		return 0;
	}
	return drop_node(c, n, n->inputs[0], "an Expand to the shape its input already has");
}

/* ------------------------------------------------------------------------ */
/* Reshape                                                                   */
/* ------------------------------------------------------------------------ */

/* The target shape of a Reshape (input 1, or the attribute before opset 5). */
static int reshape_target(const struct ir_node *n, int64_t *s)
{
	if (in_at(n, 1))
		return input_ints(n, 1, s, IR_MAX_RANK);
	return attr_ints(n, "shape", s, IR_MAX_RANK);
}

/*
 * Whether Reshape to s (k entries) gives x its own shape. 1: yes, 0: no,
 * -1: cannot tell (why says which dim).
 */
static int reshape_same(const struct ir_value *x, const int64_t *s, int k, bool allowzero, char *why, size_t size)
{
	const struct ir_type *t = ranked(x);
	if (!t) {
		snprintf(why, size, "the shape of '%s' is not known", x->name);
		return -1;
	}
	if (k != t->rank)
		return 0;
	int minus = -1;
	for (int i = 0; i < k; i++) {
		const struct ir_dim *d = &t->dims[i];
		if (s[i] == 0 && !allowzero)
			continue;   /* copies the dim */
		if (s[i] == -1) {
			if (minus >= 0)
				return 0;   /* malformed */
			minus = i;
			continue;
		}
		if (d->kind == IR_DIM_VALUE) {
			if (d->value == s[i])
				continue;
			return 0;
		}
		char db[64];
		snprintf(why, size, "dim %d of '%s' is %s and the target says %" PRId64 ": cannot tell whether that is "
			 "the same", i, x->name, dim_text(d, db, sizeof(db)), s[i]);
		return -1;
	}
	if (minus >= 0) {
		/* the -1 dim is what is left over: x's own when every other dim matches, unless one of those is 0 */
		for (int i = 0; i < k; i++)
			if (i != minus && t->dims[i].kind == IR_DIM_VALUE && t->dims[i].value == 0)
				return 0;
	}
	return 1;
}

static int do_reshape(struct pass_ctx *c, struct ir_node *n)
{
	struct ir_graph *g = c->m->graph;
	int64_t s[IR_MAX_RANK];
	int k = reshape_target(n, s);
	if (k == -3)
		return 0;
	if (k < 0) {
		pass_rejected(c, n, "its target shape is not a constant (fold-shapes may make it one)");
		return 0;
	}
	bool allowzero = ir_node_attr_int(n, "allowzero", 0) != 0;
	struct ir_value *x = n->inputs[0];
	char why[300];
	int same = reshape_same(x, s, k, allowzero, why, sizeof(why));
	if (same > 0)
		return drop_node(c, n, x, "a Reshape to the shape its input already has");
	struct ir_node *r1 = x->producer;
	/* Reshape after Reshape: the second decides the shape, as long as it does not copy dims (0) from the first */
	if (r1 && r1->graph == g && r1->op == IR_OP_Reshape && r1->n_inputs >= 1 && r1->inputs[0] &&
	    r1->n_outputs >= 1 && r1->outputs[0] == x) {
		char nb[64];
		pass_node_name(r1, nb, sizeof(nb));
		bool ok = true, changed = false;
		int64_t s2[IR_MAX_RANK];
		memcpy(s2, s, sizeof(int64_t) * (size_t)k);
		for (int i = 0; i < k && !allowzero; i++) {
			if (s[i] != 0)
				continue;
			const struct ir_type *tx = ranked(x);
			if (!tx || i >= tx->rank || tx->dims[i].kind != IR_DIM_VALUE) {
				char db[64] = "not known";
				if (tx && i < tx->rank)
					dim_text(&tx->dims[i], db, sizeof(db));
				pass_rejected(c, n, "it follows Reshape '%s' but copies dim %d of its output (a 0 in the target), "
					      "which is %s", nb, i, db);
				ok = false;
				break;
			}
			s2[i] = tx->dims[i].value;
			changed = true;
		}
		if (ok) {
			if (changed && !in_at(n, 1)) {
				int rc = pass_set_ints_attr(n, "shape", s2, k, c->d);
				if (rc)
					return rc;
			} else if (changed) {
				/* a new constant target with the copied dims written out */
				int64_t dims1 = k;
				struct ir_tensor *tt = ir_tensor_new(IR_INT64, 1, &dims1, c->d);
				if (!tt)
					return IR_ENOMEM;
				if (k)
					memcpy(ir_tensor_mutable(tt), s2, sizeof(int64_t) * (size_t)k);
				char base[300];
				snprintf(base, sizeof(base), "%s_shape", x->name);
				struct ir_value *sv = NULL;
				if (c->m->has_ir_version && c->m->ir_version < 4) {
					/* before IR version 4 an initializer must be a graph input: a Constant node */
					char *nm = pass_unique_name(g, base);
					struct ir_node *kn = nm ? ir_node_new(g, "Constant", "", "", 0, 1, n) : NULL;
					struct ir_attr a = { 0 };
					a.name = strdup("value");
					a.type = IR_ATTR_TENSOR;
					a.has_type = true;
					a.t = tt;
					ir_tensor_ref(tt);
					if (kn && a.name && !ir_node_set_attr(kn, &a, c->d) && (sv = ir_value_new(g, nm, c->d)) &&
					    ir_node_set_output(kn, 0, sv, c->d))
						sv = NULL;
					ir_attr_clear(&a);
					free(nm);
				} else {
					sv = pass_new_init(g, base, tt, c->d);
				}
				ir_tensor_unref(tt);
				if (!sv)
					return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
				struct ir_value *old = n->inputs[1];
				if (ir_node_set_input(n, 1, sv))
					return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
				if (old->producer && old->producer->graph == g)
					pass_remove_dead_from(g, old->producer);
			}
			if (ir_node_set_input(n, 0, r1->inputs[0]))
				return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
			int gone = pass_remove_dead_from(g, r1);
			char sb[256];
			pass_rewrote(c, n, "merged with Reshape '%s': reads '%s' directly with target %s%s", nb,
				     n->inputs[0]->name, ir_dims_str(k, s2, sb, sizeof(sb)), gone ? " (the first one went)" : "");
			memcpy(s, s2, sizeof(int64_t) * (size_t)k);
			x = n->inputs[0];
			same = reshape_same(x, s, k, allowzero, why, sizeof(why));
		}
	}
	if (same < 0)
		pass_rejected(c, n, "%s", why);
	if (same <= 0)
		return 0;
	return drop_node(c, n, x, "a Reshape to the shape its input already has");
}

/* ------------------------------------------------------------------------ */
/* Squeeze / Unsqueeze pairs                                                 */
/* ------------------------------------------------------------------------ */

/* Axes of a Squeeze/Unsqueeze (input 1 from opset 13, the attribute before). -2: none given. */
static int sq_axes(const struct ir_node *n, int64_t opset, int64_t *ax)
{
	if (opset >= 13)
		return in_at(n, 1) ? input_ints(n, 1, ax, IR_MAX_RANK) : -2;
	return attr_ints(n, "axes", ax, IR_MAX_RANK);
}

/* Normalizes axes against rank r into a bit set; false when out of range or repeated. */
static bool axes_set(const int64_t *ax, int k, int r, uint64_t *set)
{
	*set = 0;
	for (int i = 0; i < k; i++) {
		int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
		if (a < 0 || a >= r || a >= 64 || (*set >> a) & 1)
			return false;
		*set |= (uint64_t)1 << a;
	}
	return true;
}

static bool any_negative(const int64_t *ax, int k)
{
	for (int i = 0; i < k; i++)
		if (ax[i] < 0)
			return true;
	return false;
}

static int do_squeeze_pair(struct pass_ctx *c, struct ir_node *n, int64_t opset)
{
	struct ir_graph *g = c->m->graph;
	struct ir_value *mid = n->inputs[0];
	struct ir_node *p = mid->producer;
	bool n_sq = n->op == IR_OP_Squeeze;
	int want = n_sq ? IR_OP_Unsqueeze : IR_OP_Squeeze;
	if (!p || p->graph != g || p->op != want || p->n_inputs < 1 || !p->inputs[0] || p->n_outputs < 1 ||
	    p->outputs[0] != mid)
		return 0;
	char pb[64];
	pass_node_name(p, pb, sizeof(pb));
	struct ir_value *x = p->inputs[0];
	int64_t an[IR_MAX_RANK], ap[IR_MAX_RANK];
	int kn = sq_axes(n, opset, an), kp = sq_axes(p, opset, ap);
	if (kn == -3 || kp == -3)
		return 0;
	if ((n_sq ? kn : kp) == -2) {
		pass_rejected(c, n, "it pairs with %s '%s' but the Squeeze has no axes (it would drop every dim of 1)",
			      p->op_type, pb);
		return 0;
	}
	if (kn < 0 || kp < 0) {
		pass_rejected(c, n, "it pairs with %s '%s' but the axes are not constants", p->op_type, pb);
		return 0;
	}
	if (kn != kp)
		return 0;
	const struct ir_type *tx = ranked(x);
	int r;
	if (tx)
		r = n_sq ? tx->rank + kp : tx->rank;   /* the rank both sets of axes refer to */
	else if (!any_negative(an, kn) && !any_negative(ap, kp))
		r = 64;   /* non-negative axes need no rank to compare */
	else {
		pass_rejected(c, n, "it pairs with %s '%s' but the axes are negative and the rank of '%s' is not known",
			      p->op_type, pb, x->name);
		return 0;
	}
	uint64_t sn, sp;
	if (!axes_set(an, kn, r, &sn) || !axes_set(ap, kp, r, &sp))
		return 0;
	if (sn != sp)
		return 0;
	char what[300];
	snprintf(what, sizeof(what), "%s undoes %s '%s' (same axes)", n->op_type, p->op_type, pb);
	return drop_node(c, n, x, what);
}

/* ------------------------------------------------------------------------ */

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "stopped" : "out of memory");
	int64_t opset = opset_of(c);
	for (struct ir_node *n = g->first, *next; n; n = next) {
		next = n->next;
		if (ir_interrupted)
			return ir_diag_err(c->d, IR_EINTR, "stopped");
		if (n->op == IR_OP_UNKNOWN || n->n_inputs < 1 || !n->inputs[0] || n->n_outputs < 1 || !n->outputs[0])
			continue;
		if (!pass_n_readers(n->outputs[0]))
			continue;   /* dead: dce's business */
		switch (n->op) {
		case IR_OP_Identity:
			rc = drop_node(c, n, n->inputs[0], "an Identity");
			break;
		case IR_OP_Dropout:
			rc = do_dropout(c, n);
			break;
		case IR_OP_Cast:
			rc = do_cast(c, n, false);
			break;
		case IR_OP_CastLike:
			rc = do_cast(c, n, true);
			break;
		case IR_OP_Reshape:
			rc = do_reshape(c, n);
			break;
		case IR_OP_Transpose:
			rc = do_transpose(c, n);
			break;
		case IR_OP_Pad:
			rc = do_pad(c, n, opset);
			break;
		case IR_OP_Slice:
			rc = do_slice(c, n, opset);
			break;
		case IR_OP_Expand:
			rc = do_expand(c, n);
			break;
		case IR_OP_Squeeze:
		case IR_OP_Unsqueeze:
			rc = do_squeeze_pair(c, n, opset);
			break;
		default:
			break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

const struct pass pass_eliminate_nops = {
	.name = "eliminate-nops",
	.summary = "remove nodes that give back their input unchanged, and pairs that undo each other",
	.explain =
		"Some nodes compute nothing: their output is their input. An Identity; a Dropout at inference "
		"(no training_mode, or a constant false, and nobody reads its mask); a Cast to the element type "
		"the input already has; a Reshape or an Expand to the shape the input already has; a Transpose "
		"whose permutation is [0,1,2,...]; a Pad whose pads are all 0; a Slice that takes every element "
		"(starts 0, ends at or past the end, steps 1). The pass points the node's readers at its input "
		"and removes it.\n\n"
		"Some pairs collapse. Two Transposes in a row are one: y = transpose(x, p1), z = transpose(y, p2) "
		"gives z = transpose(x, q) with q[i] = p1[p2[i]]; when q is [0,1,2,...] both go. Two Reshapes in a "
		"row are one: only the last target shape matters, since a Reshape keeps the elements in order "
		"(a 0 in the last target, which copies a dim of the first one's output, is written out when that "
		"dim is known). A Squeeze followed by an Unsqueeze of the same axes (or the other way round) gives "
		"back the input.\n\n"
		"The pass only removes what it can prove: shapes come from shape inference, and a dim it does not "
		"know (a symbol such as 'batch' compared with a number, a rank not known) stops the rewrite with "
		"the reason in the report. A symbolic dim compared with itself (Reshape to [0,-1] of [batch,n]) "
		"is known to match.\n\n"
		"The model's interface does not change: when the removed node produced a graph output, its input "
		"takes over the output's name; when that input is a graph input, an initializer or another graph "
		"output, it cannot be renamed and the node stays (the report says so). Values read inside "
		"subgraphs are left alone, and only the main graph is rewritten.",
	.level = PASS_LEVEL_BASIC,
	.run = run,
};
