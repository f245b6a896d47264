/*
 * shape_other.c - shape functions of control flow (If, Loop, Scan),
 * sequences and optionals, and the remaining ops: windows and
 * MelWeightMatrix, image decoding, strings, TfIdfVectorizer, the
 * ai.onnx.ml ops and the ai.onnx.preview.training ops.
 *
 * Control flow infers its bodies with sx_infer_subgraph, binding the body
 * inputs (what the body declares for an input fills in what the binding
 * lacks, as ONNX does). A Loop's loop-carried values may change shape from
 * one iteration to the next: the body is first inferred with their initial
 * types, and again with a wider type when the body's outputs do not fit
 * the types it was given, so what comes out holds for every iteration.
 * Scan states keep their shape (ONNX and onnxruntime require it).
 */
#include "infer.h"

#include <inttypes.h>

/*
 * Re-inferring a body multiplies the work of everything nested in it, so
 * at most MAX_SPECULATION Loops/Scans on the current path of nested bodies
 * may infer their body more than once; deeper ones go straight to the
 * wide types ONNX uses (loop-carried shapes forgotten).
 */
#define MAX_SPECULATION 3
#define SPECULATIVE_PASSES 2

static _Thread_local int speculating;

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

static bool is_tensor(const struct ir_type *t)
{
	return t && (t->kind == IR_TYPE_TENSOR || t->kind == IR_TYPE_SPARSE_TENSOR);
}

/* A tensor type with a known element type and no unknown dim. */

/* Forgets the shape, and those of the elements of sequences, optionals, maps. */
static void clear_shapes(struct ir_type *t)
{
	if (is_tensor(t)) {
		for (int k = 0; k < t->rank; k++)
			ir_dim_clear(&t->dims[k]);
		free(t->dims);
		t->dims = NULL;
		t->rank = -1;
	} else if (t->inner) {
		clear_shapes(t->inner);
	}
}

static bool same_dim(const struct ir_dim *a, const struct ir_dim *b)
{
	return a->kind != IR_DIM_UNKNOWN && ir_dim_equal(a, b);
}

/* *dst (holding nothing) becomes a copy of src; false when out of memory (*dst stays empty). */
static bool tcopy(struct ir_type *dst, const struct ir_type *src)
{
	if (ir_type_copy(dst, src) == 0)
		return true;
	memset(dst, 0, sizeof(*dst));
	dst->rank = -1;
	return false;
}

/* Replaces *dst by a copy of src. */
static void treplace(struct ir_type *dst, const struct ir_type *src)
{
	struct ir_type c;
	if (!tcopy(&c, src))
		return;
	ir_type_clear(dst);
	*dst = c;
}

/* *t becomes kind(inner) for a sequence or an optional (inner copied; NULL or NONE: unknown element). */
static void make_wrap(struct ir_type *t, enum ir_type_kind kind, const struct ir_type *inner)
{
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->rank = -1;
	if (!inner || inner->kind == IR_TYPE_NONE)
		return;
	t->inner = calloc(1, sizeof(*t->inner));
	if (t->inner && !tcopy(t->inner, inner)) {
		free(t->inner);
		t->inner = NULL;
	}
}

/*
 * dst := the union of dst and src: a type that holds the values of both
 * (a dim that differs becomes unknown, a rank that differs forgets the
 * shape). Element types must agree (an unknown one takes the other's):
 * false when they, the kinds or the map keys do not.
 */
static bool union_into(struct ir_type *dst, const struct ir_type *src)
{
	if (src->kind == IR_TYPE_NONE) {
		clear_shapes(dst);
		return true;
	}
	if (dst->kind == IR_TYPE_NONE) {
		treplace(dst, src);
		clear_shapes(dst);
		return true;
	}
	if (dst->kind != src->kind)
		return false;
	if (is_tensor(dst)) {
		if (dst->elem && src->elem && dst->elem != src->elem)
			return false;
		if (!dst->elem) {
			dst->elem = src->elem;
			dst->has_elem = src->elem != 0;
		}
		if (dst->rank < 0)
			return true;
		if (src->rank != dst->rank) {
			clear_shapes(dst);
			return true;
		}
		for (int k = 0; k < dst->rank; k++)
			if (!same_dim(&dst->dims[k], &src->dims[k]))
				ir_dim_clear(&dst->dims[k]);
		return true;
	}
	if (dst->kind == IR_TYPE_MAP) {
		if (dst->key && src->key && dst->key != src->key)
			return false;
		if (!dst->key)
			dst->key = src->key;
	}
	if (!src->inner) {
		if (dst->inner)
			clear_shapes(dst->inner);
		return true;
	}
	if (!dst->inner) {
		dst->inner = calloc(1, sizeof(*dst->inner));
		if (dst->inner && !tcopy(dst->inner, src->inner)) {
			free(dst->inner);
			dst->inner = NULL;
		}
		if (dst->inner)
			clear_shapes(dst->inner);
		return true;
	}
	return union_into(dst->inner, src->inner);
}

/*
 * dst gets what src knows and dst does not (element type, shape, dims; a
 * number over a symbol; src's symbol over dst's where src_symbols). False
 * when they contradict each other (dst keeps its own there).
 */
static bool merge_sym(struct ir_type *dst, const struct ir_type *src, bool src_symbols)
{
	if (src->kind == IR_TYPE_NONE)
		return true;
	if (dst->kind == IR_TYPE_NONE) {
		treplace(dst, src);
		return true;
	}
	if (dst->kind != src->kind)
		return false;
	bool ok = true;
	if (is_tensor(dst)) {
		if (dst->elem && src->elem && dst->elem != src->elem) {
			ok = false;
		} else if (!dst->elem) {
			dst->elem = src->elem;
			dst->has_elem = src->elem != 0;
		}
		if (src->rank < 0)
			return ok;
		if (dst->rank < 0) {
			struct ir_type c;
			if (!tcopy(&c, src))
				return ok;
			c.elem = dst->elem;
			c.has_elem = dst->has_elem;
			free(c.denotation);
			c.denotation = dst->denotation;
			dst->denotation = NULL;
			ir_type_clear(dst);
			*dst = c;
			return ok;
		}
		if (dst->rank != src->rank)
			return false;
		for (int k = 0; k < dst->rank; k++) {
			struct ir_dim *a = &dst->dims[k];
			const struct ir_dim *b = &src->dims[k];
			if (b->kind == IR_DIM_UNKNOWN)
				continue;
			if (a->kind == IR_DIM_VALUE) {
				if (b->kind == IR_DIM_VALUE && b->value != a->value)
					ok = false;
				continue;
			}
			if (a->kind == IR_DIM_PARAM && b->kind != IR_DIM_VALUE && !src_symbols)
				continue;
			char *p = NULL;
			if (b->kind == IR_DIM_PARAM && !(p = ir_strdup(b->param)))
				continue;
			ir_dim_clear(a);
			a->kind = b->kind;
			a->value = b->value;
			a->param = p;
		}
		return ok;
	}
	if (dst->kind == IR_TYPE_MAP) {
		if (dst->key && src->key && dst->key != src->key)
			ok = false;
		else if (!dst->key)
			dst->key = src->key;
	}
	if (!src->inner)
		return ok;
	if (!dst->inner) {
		dst->inner = calloc(1, sizeof(*dst->inner));
		if (dst->inner && !tcopy(dst->inner, src->inner)) {
			free(dst->inner);
			dst->inner = NULL;
		}
		return ok;
	}
	return merge_sym(dst->inner, src->inner, src_symbols) && ok;
}

static bool merge_into(struct ir_type *dst, const struct ir_type *src)
{
	return merge_sym(dst, src, false);
}

/*
 * Whether every value of type a is also of type b (b says nothing that a
 * does not). Element types are taken to agree when one is unknown: they
 * cannot change from one iteration to the next.
 */
static bool covers(const struct ir_type *b, const struct ir_type *a)
{
	if (b->kind == IR_TYPE_NONE)
		return true;
	if (a->kind != b->kind)
		return false;
	if (is_tensor(b)) {
		if (b->elem && a->elem && a->elem != b->elem)
			return false;
		if (b->rank < 0)
			return true;
		if (a->rank != b->rank)
			return false;
		for (int k = 0; k < b->rank; k++)
			if (b->dims[k].kind != IR_DIM_UNKNOWN && !same_dim(&b->dims[k], &a->dims[k]))
				return false;
		return true;
	}
	if (b->kind == IR_TYPE_MAP && b->key && a->key && a->key != b->key)
		return false;
	if (!b->inner)
		return true;
	if (!a->inner)
		return false;
	return covers(b->inner, a->inner);
}

/* Whether a and b can describe the same value (nothing contradicts). */
static bool compatible(const struct ir_type *a, const struct ir_type *b)
{
	if (a->kind == IR_TYPE_NONE || b->kind == IR_TYPE_NONE)
		return true;
	if (a->kind != b->kind)
		return false;
	if (is_tensor(a)) {
		if (a->elem && b->elem && a->elem != b->elem)
			return false;
		if (a->rank < 0 || b->rank < 0)
			return true;
		if (a->rank != b->rank)
			return false;
		for (int k = 0; k < a->rank; k++)
			if (a->dims[k].kind == IR_DIM_VALUE && b->dims[k].kind == IR_DIM_VALUE &&
			    a->dims[k].value != b->dims[k].value)
				return false;
		return true;
	}
	if (a->kind == IR_TYPE_MAP && a->key && b->key && a->key != b->key)
		return false;
	if (!a->inner || !b->inner)
		return true;
	return compatible(a->inner, b->inner);
}

static const char *kind_name(const struct ir_type *t)
{
	static const char *names[] = { "?", "tensor", "sparse tensor", "sequence", "map", "optional" };
	return t && (unsigned)t->kind < sizeof(names) / sizeof(names[0]) ? names[t->kind] : "?";
}

/* ------------------------------------------------------------------------ */
/* Outputs                                                                   */
/* ------------------------------------------------------------------------ */

static struct ir_value *outv(const struct ir_node *n, int i)
{
	return i >= 0 && i < n->n_outputs ? n->outputs[i] : NULL;
}

static const struct ir_type *declared(const struct ir_value *v)
{
	return v && (v->has_type_proto || v->has_vinfo) && v->type.kind != IR_TYPE_NONE ? &v->type : NULL;
}

/* Sets a reason as is (it already names where it comes from). */
static void carry_why(struct ir_value *v, const char *why)
{
	if (!v || !why || v->why)
		return;
	v->why = ir_strdup(why);
}

/*
 * Output i gets the whole type t. For sequences, optionals and maps what
 * the model declares for the output fills in what t lacks (the driver does
 * that for tensors); where t is no type at all, the declared one is taken.
 */
static void out_type(struct ir_infer *x, struct ir_node *n, int i, const struct ir_type *t)
{
	struct ir_value *v = outv(n, i);
	if (!v)
		return;
	const struct ir_type *d = declared(v);
	if (!t || t->kind == IR_TYPE_NONE) {
		if (d) {
			sx_out_type(x, n, i, d);
		} else {
			sx_out_unknown(x, n, i, 0, "the type of output %d is not known", i);
			return;
		}
		if (!ir_type_fully_known(d))
			sx_out_why(x, n, i, "the type of output %d is not known", i);
		return;
	}
	if (d && !is_tensor(t) && d->kind == t->kind) {
		struct ir_type c;
		if (tcopy(&c, t)) {
			merge_into(&c, d);
			sx_out_type(x, n, i, &c);
			ir_type_clear(&c);
			return;
		}
	}
	sx_out_type(x, n, i, t);
}

/* The known elements of `from` go to output i. */
static void out_known_from(struct ir_infer *x, struct ir_node *n, int i, const struct ir_value *from)
{
	if (from && from->n_known >= 0)
		sx_out_vals(x, n, i, from->n_known, from->known);
}

/*
 * Output i: the tensor type t (or the sequence/optional type) with `extra`
 * dims inserted at `pos` (tensors only; t's rank unknown: the rank stays
 * unknown).
 */
static void out_insert_dims(struct ir_infer *x, struct ir_node *n, int i, const struct ir_type *t, int pos,
			    const struct ir_dim *extra, int n_extra)
{
	if (!outv(n, i))
		return;
	if (!is_tensor(t)) {
		out_type(x, n, i, t);
		return;
	}
	if (t->rank < 0) {
		sx_out(x, n, i, t->elem, -1, NULL);
		return;
	}
	int r = t->rank + n_extra;
	if (r > IR_MAX_RANK) {
		sx_out_unknown(x, n, i, t->elem, "rank %d is more than %d", r, IR_MAX_RANK);
		return;
	}
	struct ir_dim *d = calloc((size_t)r + 1, sizeof(*d));
	if (!d) {
		sx_out_unknown(x, n, i, t->elem, "out of memory");
		return;
	}
	for (int k = 0, o = 0; k <= t->rank; k++) {
		if (k == pos)
			for (int e = 0; e < n_extra; e++)
				d[o++] = extra[e];
		if (k < t->rank)
			d[o++] = t->dims[k];
	}
	sx_out(x, n, i, t->elem, r, d);
	free(d);
}

/* ------------------------------------------------------------------------ */
/* Subgraphs                                                                 */
/* ------------------------------------------------------------------------ */

static struct ir_graph *graph_attr(struct ir_infer *x, const struct ir_node *n, const char *name)
{
	const struct ir_attr *a = sx_attr(x, n, name);
	return a && a->type == IR_ATTR_GRAPH ? a->g : NULL;
}

/* The best known type of output i of a body; NULL when there is no such output. */
static const struct ir_type *body_out(const struct ir_graph *g, int i)
{
	return i >= 0 && i < g->n_outputs && g->outputs[i] ? sx_value_type(g->outputs[i]) : NULL;
}

static const char *body_why(const struct ir_graph *g, int i)
{
	return i >= 0 && i < g->n_outputs && g->outputs[i] ? g->outputs[i]->why : NULL;
}

/* The types a body's inputs are inferred with. */
struct binds {
	int n;                       /* the body's inputs */
	struct ir_type *t;           /* n types (owned) */
	const struct ir_type **p;    /* n pointers: &t[i], or NULL where the declared type stays */
};

static bool binds_init(struct binds *b, int n)
{
	b->n = n > 0 ? n : 0;
	b->t = NULL;
	b->p = NULL;
	if (!b->n)
		return true;
	b->t = calloc((size_t)b->n, sizeof(*b->t));
	b->p = calloc((size_t)b->n, sizeof(*b->p));
	if (b->t)
		for (int i = 0; i < b->n; i++)
			b->t[i].rank = -1;
	return b->t && b->p;
}

static void binds_free(struct binds *b)
{
	for (int i = 0; b->t && i < b->n; i++)
		ir_type_clear(&b->t[i]);
	free(b->t);
	free(b->p);
	b->t = NULL;
	b->p = NULL;
}

/*
 * Binds body input i to t (NULL: nothing bound, the declared type stays).
 * What the body declares for the input fills in what t lacks, and its
 * symbols name the dims that t names otherwise (as ONNX merges them).
 */
static void bind(struct binds *b, const struct ir_graph *g, int i, const struct ir_type *t)
{
	if (i < 0 || i >= b->n || i >= g->n_inputs)
		return;
	ir_type_clear(&b->t[i]);
	b->t[i].rank = -1;
	b->p[i] = NULL;
	if (!t || !tcopy(&b->t[i], t))
		return;
	merge_sym(&b->t[i], &g->inputs[i]->type, true);
	b->p[i] = &b->t[i];
}

/* Binds body input i to a tensor of elem, of the declared shape or else a scalar. */
static void bind_scalar(struct binds *b, const struct ir_graph *g, int i, int elem)
{
	struct ir_type t = { .kind = IR_TYPE_TENSOR, .elem = elem, .has_elem = true, .rank = -1 };
	bind(b, g, i, &t);
	if (i >= 0 && i < b->n && b->p[i] && is_tensor(&b->t[i]) && b->t[i].rank < 0)
		b->t[i].rank = 0;
}

/* The type body input i was (or will be) inferred with. */
static const struct ir_type *bound(const struct binds *b, const struct ir_graph *g, int i)
{
	if (i >= 0 && i < b->n && b->p[i])
		return b->p[i];
	static const struct ir_type none = { .rank = -1 };
	return i >= 0 && i < g->n_inputs ? &g->inputs[i]->type : &none;
}

static void infer_body(struct ir_infer *x, struct ir_graph *g, const struct binds *b)
{
	sx_infer_subgraph(x, g, b ? b->n : 0, b ? b->p : NULL);
}

/* The constant tensor behind a value, through the captures of enclosing graphs. */
static const struct ir_tensor *const_of(const struct ir_value *v)
{
	for (int hops = 0; v && hops < 256; hops++, v = v->outer) {
		const struct ir_tensor *t = ir_value_const(v);
		if (t)
			return t;
	}
	return NULL;
}

/* 1 or 0 for a constant one-element boolean or number, -1 when not known. */
static int const_truth(const struct ir_value *v)
{
	const struct ir_tensor *t = const_of(v);
	if (!t || t->numel != 1 || t->dtype == IR_STRING || !ir_tensor_data(t))
		return -1;
	return ir_tensor_get_f64(t, 0) != 0;
}

/*
 * The value of a boolean condition when it follows from constants and
 * known integers (Equal(Size(x), 4), Not, And...): 1, 0, or -1 when not
 * known.
 */
static int cond_value(struct ir_infer *x, const struct ir_value *v, int depth)
{
	if (!v || depth > 16)
		return -1;
	int c = const_truth(v);
	if (c >= 0)
		return c;
	if (v->outer)
		return cond_value(x, v->outer, depth + 1);
	const struct ir_node *p = v->producer;
	if (!p || p->n_inputs < 1)
		return -1;
	int a, b;
	switch (p->op) {
	case IR_OP_Identity:
		return cond_value(x, p->inputs[0], depth + 1);
	case IR_OP_Not:
		a = cond_value(x, p->inputs[0], depth + 1);
		return a < 0 ? -1 : !a;
	case IR_OP_And:
	case IR_OP_Or:
	case IR_OP_Xor:
		if (p->n_inputs < 2)
			return -1;
		a = cond_value(x, p->inputs[0], depth + 1);
		b = cond_value(x, p->inputs[1], depth + 1);
		if (p->op == IR_OP_And)
			return a == 0 || b == 0 ? 0 : a == 1 && b == 1 ? 1 : -1;
		if (p->op == IR_OP_Or)
			return a == 1 || b == 1 ? 1 : a == 0 && b == 0 ? 0 : -1;
		return a < 0 || b < 0 ? -1 : a != b;
	case IR_OP_Equal:
	case IR_OP_Greater:
	case IR_OP_Less:
	case IR_OP_GreaterOrEqual:
	case IR_OP_LessOrEqual: {
		int ca, cb;
		const struct ir_dim *da = sx_vals(x, p, 0, &ca), *db = sx_vals(x, p, 1, &cb);
		if (!da || !db || ca != 1 || cb != 1)
			return -1;
		if (da->kind != IR_DIM_VALUE || db->kind != IR_DIM_VALUE) {
			/* the same symbol: equal */
			bool eq = same_dim(da, db);
			if (!eq)
				return -1;
			return p->op == IR_OP_Equal || p->op == IR_OP_GreaterOrEqual || p->op == IR_OP_LessOrEqual;
		}
		int64_t l = da->value, r = db->value;
		switch (p->op) {
		case IR_OP_Equal: return l == r;
		case IR_OP_Greater: return l > r;
		case IR_OP_Less: return l < r;
		case IR_OP_GreaterOrEqual: return l >= r;
		default: return l <= r;
		}
	}
	default:
		return -1;
	}
}

/* ------------------------------------------------------------------------ */
/* If                                                                        */
/* ------------------------------------------------------------------------ */

static void if_op(struct ir_infer *x, struct ir_node *n)
{
	struct ir_graph *br[2] = { graph_attr(x, n, "then_branch"), graph_attr(x, n, "else_branch") };
	for (int b = 0; b < 2; b++)
		if (br[b])
			infer_body(x, br[b], NULL);
	if (!br[0] || !br[1]) {
		sx_fail(x, n, "it has no '%s' graph", br[0] ? "else_branch" : "then_branch");
		return;
	}
	if (br[0]->n_outputs != n->n_outputs || br[1]->n_outputs != n->n_outputs) {
		sx_fail(x, n, "it has %d outputs but its branches give %d and %d", n->n_outputs, br[0]->n_outputs,
			br[1]->n_outputs);
		return;
	}
	/* a constant condition: only that branch runs */
	int taken = sx_has(n, 0) ? cond_value(x, n->inputs[0], 0) : -1;
	bool merge = sx_opset(x, n) < 11;   /* If-1: both branches give the same shapes */
	for (int i = 0; i < n->n_outputs; i++) {
		struct ir_value *v = n->outputs[i];
		if (!v)
			continue;
		if (taken >= 0) {
			const struct ir_graph *g = br[taken ? 0 : 1];
			out_type(x, n, i, body_out(g, i));
			if (!ir_type_fully_known(body_out(g, i)))
				carry_why(v, body_why(g, i));
			out_known_from(x, n, i, g->outputs[i]);
			continue;
		}
		const struct ir_type *a = body_out(br[0], i), *b = body_out(br[1], i);
		struct ir_type t;
		if (!tcopy(&t, a)) {
			sx_out_unknown(x, n, i, 0, "out of memory");
			continue;
		}
		bool ok;
		if (merge) {
			/* If-1: the branches' shapes hold the same value; where they contradict, their union */
			ok = compatible(&t, b);
			ok = ok ? merge_into(&t, b) : union_into(&t, b);
		} else {
			ok = union_into(&t, b);
		}
		if (!ok) {
			char sa[256], sb[256];
			ir_type_clear(&t);
			sx_fail(x, n, "its branches give output %d different types (%s and %s)", i,
				ir_type_str(a, sa, sizeof(sa)), ir_type_str(b, sb, sizeof(sb)));
			return;
		}
		out_type(x, n, i, &t);
		if (!ir_type_fully_known(&t)) {
			if (!ir_type_fully_known(a))
				carry_why(v, body_why(br[0], i));
			else if (!ir_type_fully_known(b))
				carry_why(v, body_why(br[1], i));
			else
				sx_out_why(x, n, i, "its then and else branches give output %d different shapes", i);
		}
		ir_type_clear(&t);
		/* values that both branches agree on */
		const struct ir_value *va = br[0]->outputs[i], *vb = br[1]->outputs[i];
		if (va && vb && va->n_known >= 0 && va->n_known == vb->n_known) {
			bool same = true;
			for (int k = 0; k < va->n_known && same; k++)
				same = same_dim(&va->known[k], &vb->known[k]);
			if (same)
				out_known_from(x, n, i, va);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Loop                                                                      */
/* ------------------------------------------------------------------------ */

/* Whether the body hands its condition input back unchanged (or a constant true). */
static bool body_keeps_cond(struct ir_infer *x, const struct ir_graph *g)
{
	if (g->n_outputs < 1 || g->n_inputs < 2 || !g->outputs[0])
		return false;
	const struct ir_value *v = g->outputs[0];
	for (int hops = 0; hops < 64 && v; hops++) {
		if (v == g->inputs[1])
			return true;
		const struct ir_node *p = v->producer;
		if (!p || p->op != IR_OP_Identity || p->n_inputs < 1)
			break;
		v = p->inputs[0];
	}
	return v && cond_value(x, v, 0) == 1;
}

/* The number of iterations, when the trip count alone decides it. */
static struct ir_dim trip_count(struct ir_infer *x, struct ir_node *n, const struct ir_graph *body)
{
	int c;
	const struct ir_dim *m = sx_vals(x, n, 0, &c);
	if (!m || c != 1 || m[0].kind == IR_DIM_UNKNOWN)
		return sx_unknown();
	if (sx_has(n, 1) && !(cond_value(x, n->inputs[1], 0) == 1 && body_keeps_cond(x, body)))
		return sx_unknown();
	if (m[0].kind == IR_DIM_VALUE) {
		if (m[0].value > ((int64_t)1 << 40))
			return sx_unknown();   /* "forever": ended by the condition in practice */
		return sx_v(m[0].value < 0 ? 0 : m[0].value);
	}
	return m[0];
}

static void loop_op(struct ir_infer *x, struct ir_node *n)
{
	struct ir_graph *body = graph_attr(x, n, "body");
	if (!body) {
		sx_fail(x, n, "it has no 'body' graph");
		return;
	}
	int n_carried = n->n_inputs > 2 ? n->n_inputs - 2 : 0;
	int n_scan = n->n_outputs - n_carried;
	struct binds b;
	struct ir_type *cur = n_carried ? calloc((size_t)n_carried, sizeof(*cur)) : NULL;
	if (!binds_init(&b, body->n_inputs) || (n_carried && !cur)) {
		binds_free(&b);
		free(cur);
		infer_body(x, body, NULL);
		sx_fail(x, n, "out of memory");
		return;
	}
	/* the iteration number, the condition */
	bind_scalar(&b, body, 0, IR_INT64);
	const struct ir_type *ct = sx_type(x, n, 1);
	if (ct) {
		bind(&b, body, 1, ct);
		if (b.n > 1 && b.p[1] && is_tensor(&b.t[1]) && b.t[1].rank < 0)
			b.t[1].rank = 0;
	} else {
		bind_scalar(&b, body, 1, IR_BOOL);
	}
	/* loop-carried values: first their initial types; wider ones while the body changes them */
	for (int k = 0; k < n_carried; k++) {
		cur[k].rank = -1;
		const struct ir_type *t = sx_type(x, n, 2 + k);
		if (t)
			tcopy(&cur[k], t);
	}
	bool spec = speculating < MAX_SPECULATION && n_carried > 0;
	int passes = spec ? SPECULATIVE_PASSES : 0;
	bool widened = false;
	speculating += spec;
	for (int pass = 0;; pass++) {
		bool last = pass >= passes;
		if (last && pass > 0)
			widened = true;
		for (int k = 0; k < n_carried; k++) {
			if (last)
				clear_shapes(&cur[k]);
			bind(&b, body, 2 + k, &cur[k]);
		}
		infer_body(x, body, &b);
		if (last)
			break;
		bool fixed = true;
		for (int k = 0; k < n_carried; k++) {
			const struct ir_type *in = bound(&b, body, 2 + k), *out = body_out(body, 1 + k);
			treplace(&cur[k], in);
			if (out && covers(in, out))
				continue;
			fixed = false;
			if (!out || !union_into(&cur[k], out))
				clear_shapes(&cur[k]);
		}
		if (fixed)
			break;
	}
	speculating -= spec;

	if (body->n_inputs != 2 + n_carried || body->n_outputs != 1 + n->n_outputs || n_scan < 0) {
		sx_fail(x, n, "its body has %d inputs and %d outputs; with %d loop-carried values and %d outputs it needs %d and %d",
			body->n_inputs, body->n_outputs, n_carried, n->n_outputs, 2 + n_carried, 1 + n->n_outputs);
		goto done;
	}
	/* a loop-carried output is its initial value (no iteration) or the body's last output */
	struct ir_dim trips = trip_count(x, n, body);
	bool once = trips.kind == IR_DIM_VALUE && trips.value > 0;
	for (int k = 0; k < n_carried; k++) {
		struct ir_value *v = outv(n, k);
		if (!v)
			continue;
		const struct ir_type *in = sx_type(x, n, 2 + k), *out = body_out(body, 1 + k);
		struct ir_type t = { .rank = -1 };
		if (once && out && out->kind != IR_TYPE_NONE) {
			tcopy(&t, out);
		} else {
			tcopy(&t, in ? in : bound(&b, body, 2 + k));
			if (!out || !union_into(&t, out)) {
				/* the body makes it another kind (an optional its element): what the body gives */
				if (out && out->kind != IR_TYPE_NONE)
					treplace(&t, out);
				clear_shapes(&t);
			}
		}
		out_type(x, n, k, &t);
		if (!ir_type_fully_known(ir_value_type(v))) {
			if (!once && !ir_type_fully_known(in))
				carry_why(v, sx_why(x, n, 2 + k));
			else if (out && !ir_type_fully_known(out) && body_why(body, 1 + k))
				carry_why(v, body_why(body, 1 + k));
			else if (widened || !spec)
				sx_out_why(x, n, k, "loop-carried value %d may change shape from one iteration to the next", k);
			else
				sx_out_why(x, n, k, "the body changes the shape of loop-carried value %d", k);
		}
		ir_type_clear(&t);
	}
	for (int j = 0; j < n_scan; j++) {
		int i = n_carried + j;
		struct ir_value *v = outv(n, i);
		if (!v)
			continue;
		const struct ir_type *t = body_out(body, 1 + i);
		if (t && t->kind != IR_TYPE_NONE && !is_tensor(t)) {
			sx_fail(x, n, "scan output %d of its body is a %s, not a tensor", j, kind_name(t));
			goto done;
		}
		if (!t || t->kind == IR_TYPE_NONE) {
			sx_out_unknown(x, n, i, 0, "scan output %d of its body has no type", j);
			continue;
		}
		out_insert_dims(x, n, i, t, 0, &trips, 1);
		if (t->rank < 0 || !t->elem)
			carry_why(v, body_why(body, 1 + i));
		else if (trips.kind == IR_DIM_UNKNOWN)
			sx_out_why(x, n, i, "the number of iterations is not known");
		else if (!ir_type_fully_known(t))
			carry_why(v, body_why(body, 1 + i));
	}
done:
	for (int k = 0; k < n_carried; k++)
		ir_type_clear(&cur[k]);
	free(cur);
	binds_free(&b);
}

/* ------------------------------------------------------------------------ */
/* Scan                                                                      */
/* ------------------------------------------------------------------------ */

/* Folds the dim d into *acc the way ONNX does: a number wins, a symbol fills a blank. False on two numbers that differ. */
static bool fold_dim(struct ir_dim *acc, const struct ir_dim *d)
{
	if (d->kind == IR_DIM_VALUE) {
		if (acc->kind == IR_DIM_VALUE && acc->value != d->value)
			return false;
		*acc = *d;
	} else if (d->kind == IR_DIM_PARAM && acc->kind == IR_DIM_UNKNOWN) {
		*acc = *d;
	}
	return true;
}

/* A copy of tensor type t without the dims [from, from+count) (rank unknown stays unknown). */
static void drop_dims(struct ir_type *dst, const struct ir_type *t, int from, int count)
{
	if (!tcopy(dst, t) || !is_tensor(dst) || dst->rank < 0)
		return;
	int r = dst->rank;
	if (from < 0 || count < 0 || from + count > r) {
		clear_shapes(dst);
		return;
	}
	for (int k = from; k < from + count && k < r; k++)
		ir_dim_clear(&dst->dims[k]);
	for (int k = from + count; k < r; k++) {
		dst->dims[k - count] = dst->dims[k];
		memset(&dst->dims[k], 0, sizeof(dst->dims[k]));
	}
	dst->rank = r - count;
}

static void scan_op(struct ir_infer *x, struct ir_node *n)
{
	struct ir_graph *body = graph_attr(x, n, "body");
	if (!body) {
		sx_fail(x, n, "it has no 'body' graph");
		return;
	}
	bool v8 = sx_opset(x, n) < 9;   /* Scan-8: sequence_lens first, batch-major inputs */
	int first = v8 ? 1 : 0;
	int n_in = n->n_inputs - first;
	int64_t nsi = sx_attr_int(x, n, "num_scan_inputs", -1);
	if (nsi < 0 || nsi > n_in || n_in < 0) {
		infer_body(x, body, NULL);
		sx_fail(x, n, "'num_scan_inputs' (%" PRId64 ") does not fit its %d inputs", nsi, n->n_inputs);
		return;
	}
	int n_scan_in = (int)nsi, n_state = n_in - n_scan_in, n_scan_out = n->n_outputs - n_state;
	struct binds b;
	int64_t *in_axes = calloc((size_t)n_scan_in + 1, sizeof(*in_axes));
	int64_t *out_axes = calloc((size_t)(n_scan_out > 0 ? n_scan_out : 0) + 1, sizeof(*out_axes));
	struct ir_type *cur = calloc((size_t)n_state + 1, sizeof(*cur));
	if (!binds_init(&b, body->n_inputs) || !in_axes || !out_axes || !cur) {
		binds_free(&b);
		free(in_axes);
		free(out_axes);
		free(cur);
		infer_body(x, body, NULL);
		sx_fail(x, n, "out of memory");
		return;
	}
	const char *err = NULL;
	if (!v8) {
		int c = sx_attr_ints(x, n, "scan_input_axes", in_axes, n_scan_in);
		if (c >= 0 && c != n_scan_in)
			err = "'scan_input_axes' does not have one axis per scan input";
		c = sx_attr_ints(x, n, "scan_output_axes", out_axes, n_scan_out > 0 ? n_scan_out : 0);
		if (c >= 0 && c != n_scan_out)
			err = "'scan_output_axes' does not have one axis per scan output";
	}
	/* the scan inputs: one slice per iteration; the sequence length (and Scan-8's batch) */
	struct ir_dim seq = sx_unknown(), batch = sx_unknown();
	for (int j = 0; j < n_scan_in && !err; j++) {
		int i = first + n_state + j;
		const struct ir_type *t = sx_type(x, n, i);
		if (t && !is_tensor(t)) {
			err = "a scan input is not a tensor";
			break;
		}
		if (!t || t->rank < 0) {
			struct ir_type e = { .kind = IR_TYPE_TENSOR, .elem = t ? t->elem : 0, .has_elem = t && t->elem, .rank = -1 };
			bind(&b, body, n_state + j, &e);
			continue;
		}
		struct ir_type s;
		if (v8) {
			if (t->rank < 2) {
				err = "a scan input has no batch and sequence axes";
				break;
			}
			if (!fold_dim(&batch, &t->dims[0]) || !fold_dim(&seq, &t->dims[1])) {
				err = "its scan inputs have different batch sizes or sequence lengths";
				break;
			}
			drop_dims(&s, t, 0, 2);
		} else {
			int axis = sx_axis(in_axes[j], t->rank);
			if (axis < 0) {
				err = "a scan input axis is out of range";
				break;
			}
			if (!fold_dim(&seq, &t->dims[axis])) {
				err = "its scan inputs have different sequence lengths";
				break;
			}
			drop_dims(&s, t, axis, 1);
		}
		bind(&b, body, n_state + j, &s);
		ir_type_clear(&s);
	}
	/* the states: their shape stays (onnxruntime requires it); Scan-8's have the batch axis first */
	for (int k = 0; k < n_state && !err; k++) {
		const struct ir_type *t = sx_type(x, n, first + k);
		cur[k].rank = -1;
		if (!t)
			continue;
		if (!is_tensor(t)) {
			err = "a state is not a tensor";
			break;
		}
		if (v8 && t->rank >= 0) {
			if (t->rank < 1 || !fold_dim(&batch, &t->dims[0])) {
				err = "a state does not have the batch size of the scan inputs";
				break;
			}
			drop_dims(&cur[k], t, 0, 1);
		} else {
			tcopy(&cur[k], t);
		}
	}
	if (err) {
		for (int k = 0; k < n_state; k++)
			ir_type_clear(&cur[k]);
		for (int i = 0; i < b.n; i++)
			b.p[i] = NULL;
		infer_body(x, body, &b);
		sx_fail(x, n, "%s", err);
		goto done;
	}
	bool spec = speculating < MAX_SPECULATION;
	bool widened = false, conflict = false;
	speculating += spec;
	for (;;) {
		for (int k = 0; k < n_state; k++)
			bind(&b, body, k, &cur[k]);
		infer_body(x, body, &b);
		if (widened)
			break;
		for (int k = 0; k < n_state; k++) {
			const struct ir_type *out = body_out(body, k);
			if (out && !compatible(bound(&b, body, k), out))
				conflict = true;
		}
		if (!conflict || !spec)
			break;
		/* the body changes a state's shape (not a valid Scan): forget the shapes that change */
		for (int k = 0; k < n_state; k++) {
			const struct ir_type *out = body_out(body, k);
			treplace(&cur[k], bound(&b, body, k));
			if (!out || !union_into(&cur[k], out))
				clear_shapes(&cur[k]);
		}
		widened = true;
		conflict = false;
	}
	speculating -= spec;
	if (conflict) {
		sx_fail(x, n, "its body changes the shape of a state");
		goto done;
	}
	if (body->n_inputs != n_in || body->n_outputs != n->n_outputs || n_scan_out < 0) {
		sx_fail(x, n, "its body has %d inputs and %d outputs; it needs %d and %d", body->n_inputs,
			body->n_outputs, n_in, n->n_outputs);
		goto done;
	}
	for (int k = 0; k < n_state; k++) {
		struct ir_value *v = outv(n, k);
		if (!v)
			continue;
		struct ir_type t;
		if (!tcopy(&t, bound(&b, body, k)))
			continue;
		const struct ir_type *out = body_out(body, k);
		if (out && !widened)
			merge_into(&t, out);
		if (v8) {
			out_insert_dims(x, n, k, &t, 0, &batch, 1);
			const struct ir_type *in = sx_type(x, n, first + k);
			if (in && is_tensor(&t) && t.rank >= 0 && in->rank == t.rank + 1) {
				/* the state input itself says more about the batch axis */
				struct ir_type o;
				if (tcopy(&o, ir_value_type(v))) {
					merge_into(&o, in);
					out_type(x, n, k, &o);
					ir_type_clear(&o);
				}
			}
		} else {
			out_type(x, n, k, &t);
		}
		if (!ir_type_fully_known(ir_value_type(v))) {
			if (widened)
				sx_out_why(x, n, k, "the body changes the shape of state %d", k);
			else
				carry_why(v, sx_why(x, n, first + k));
		}
		ir_type_clear(&t);
	}
	for (int j = 0; j < n_scan_out; j++) {
		int i = n_state + j;
		struct ir_value *v = outv(n, i);
		if (!v)
			continue;
		const struct ir_type *t = body_out(body, i);
		if (!t || t->kind == IR_TYPE_NONE) {
			sx_out_unknown(x, n, i, 0, "scan output %d of its body has no type", j);
			continue;
		}
		if (!is_tensor(t)) {
			sx_fail(x, n, "scan output %d of its body is a %s, not a tensor", j, kind_name(t));
			goto done;
		}
		if (v8) {
			struct ir_dim lead[2] = { batch, seq };
			out_insert_dims(x, n, i, t, 0, lead, 2);
		} else if (t->rank >= 0) {
			int axis = sx_axis(out_axes[j], t->rank + 1);
			if (axis < 0) {
				sx_fail(x, n, "scan output axis %" PRId64 " is out of range for rank %d", out_axes[j],
					t->rank + 1);
				goto done;
			}
			out_insert_dims(x, n, i, t, axis, &seq, 1);
		} else {
			sx_out(x, n, i, t->elem, -1, NULL);
		}
		if (!ir_type_fully_known(t))
			carry_why(v, body_why(body, i));
		else if (seq.kind == IR_DIM_UNKNOWN || (v8 && batch.kind == IR_DIM_UNKNOWN))
			sx_out_why(x, n, i, "the sequence length is not known");
	}
done:
	for (int k = 0; k < n_state; k++)
		ir_type_clear(&cur[k]);
	free(cur);
	free(in_axes);
	free(out_axes);
	binds_free(&b);
}

/* ------------------------------------------------------------------------ */
/* Sequences                                                                 */
/* ------------------------------------------------------------------------ */

/* Input i's type when it is a sequence, NULL when not known; *bad when it is known and not a sequence. */
static const struct ir_type *seq_in(struct ir_infer *x, const struct ir_node *n, int i, bool *bad)
{
	const struct ir_type *t = sx_type(x, n, i);
	*bad = t && t->kind != IR_TYPE_SEQUENCE;
	return t && t->kind == IR_TYPE_SEQUENCE ? t : NULL;
}

/* Output 0: a sequence of tensors of type t; why for what stays unknown. */
static void out_seq(struct ir_infer *x, struct ir_node *n, const struct ir_type *t, const char *why)
{
	struct ir_type s;
	make_wrap(&s, IR_TYPE_SEQUENCE, t);
	out_type(x, n, 0, &s);
	ir_type_clear(&s);
	if (why && n->n_outputs > 0 && n->outputs[0] && !ir_type_fully_known(ir_value_type(n->outputs[0])))
		carry_why(n->outputs[0], why);
}

static void sequence_empty(struct ir_infer *x, struct ir_node *n)
{
	int dt = (int)sx_attr_int(x, n, "dtype", IR_FLOAT);
	if (!ir_dtype_valid(dt)) {
		sx_fail(x, n, "'dtype' is not an element type (%d)", dt);
		return;
	}
	struct ir_type t = { .kind = IR_TYPE_TENSOR, .elem = dt, .has_elem = true, .rank = -1 };
	if (!outv(n, 0))
		return;
	out_seq(x, n, &t, NULL);
	sx_out_why(x, n, 0, "an empty sequence says nothing of the shape of its tensors");
}

static void sequence_construct(struct ir_infer *x, struct ir_node *n)
{
	if (!outv(n, 0))
		return;
	struct ir_type t = { .kind = IR_TYPE_TENSOR, .rank = -1 };
	bool first = true;
	const char *why = NULL;
	for (int i = 0; i < n->n_inputs; i++) {
		const struct ir_type *it = sx_type(x, n, i);
		if (it && !is_tensor(it)) {
			ir_type_clear(&t);
			sx_fail(x, n, "input %d is a %s, not a tensor", i, kind_name(it));
			return;
		}
		struct ir_type u = { .kind = IR_TYPE_TENSOR, .rank = -1 };
		if (it)
			tcopy(&u, it);
		if (!ir_type_fully_known(&u) && !why)
			why = sx_why(x, n, i);
		if (first) {
			ir_type_clear(&t);
			t = u;
			first = false;
			continue;
		}
		bool ok = union_into(&t, &u);
		ir_type_clear(&u);
		if (!ok) {
			ir_type_clear(&t);
			sx_fail(x, n, "its inputs have different element types");
			return;
		}
	}
	if (first) {
		sx_fail(x, n, "it has no inputs");
		return;
	}
	out_seq(x, n, &t, why ? why : "its inputs have different shapes");
	ir_type_clear(&t);
}

static void sequence_insert(struct ir_infer *x, struct ir_node *n)
{
	bool bad;
	const struct ir_type *s = seq_in(x, n, 0, &bad), *tt = sx_type(x, n, 1);
	if (bad || (tt && !is_tensor(tt))) {
		sx_fail(x, n, "it needs a sequence and a tensor");
		return;
	}
	struct ir_type t = { .kind = IR_TYPE_TENSOR, .rank = -1 };
	if (s && s->inner)
		tcopy(&t, s->inner);
	struct ir_type u = { .kind = IR_TYPE_TENSOR, .rank = -1 };
	if (tt)
		tcopy(&u, tt);
	if (is_tensor(&t) && t.elem && u.elem && t.elem != u.elem) {
		ir_type_clear(&t);
		ir_type_clear(&u);
		sx_fail(x, n, "the tensor's element type is not the sequence's");
		return;
	}
	bool ok = union_into(&t, &u);
	ir_type_clear(&u);
	if (!ok) {
		ir_type_clear(&t);
		sx_fail(x, n, "the tensor does not fit the sequence");
		return;
	}
	const char *why = !s || !ir_type_fully_known(s) ? sx_why(x, n, 0) : !ir_type_fully_known(tt) ? sx_why(x, n, 1) :
		"the tensor's shape is not the shape of the sequence's tensors";
	out_seq(x, n, &t, why);
	ir_type_clear(&t);
}

static void sequence_at(struct ir_infer *x, struct ir_node *n)
{
	bool bad;
	const struct ir_type *s = seq_in(x, n, 0, &bad);
	if (bad) {
		sx_fail(x, n, "input 0 is not a sequence");
		return;
	}
	if (!s || !s->inner) {
		sx_out_from(x, n, 0, 0, 0);
		return;
	}
	out_type(x, n, 0, s->inner);
	if (!ir_type_fully_known(s->inner))
		carry_why(outv(n, 0), sx_why(x, n, 0));
}

static void sequence_erase(struct ir_infer *x, struct ir_node *n)
{
	bool bad;
	const struct ir_type *s = seq_in(x, n, 0, &bad);
	if (bad) {
		sx_fail(x, n, "input 0 is not a sequence");
		return;
	}
	if (!outv(n, 0))
		return;
	out_seq(x, n, s ? s->inner : NULL, sx_why(x, n, 0));
}

static void sequence_length(struct ir_infer *x, struct ir_node *n)
{
	sx_out(x, n, 0, IR_INT64, 0, NULL);
}

static void split_to_sequence(struct ir_infer *x, struct ir_node *n)
{
	if (!outv(n, 0))
		return;
	const struct ir_type *it = sx_type(x, n, 0);
	if (it && !is_tensor(it)) {
		sx_fail(x, n, "input 0 is not a tensor");
		return;
	}
	int elem = it ? it->elem : 0;
	if (!it || it->rank < 0) {
		struct ir_type t = { .kind = IR_TYPE_TENSOR, .elem = elem, .has_elem = elem != 0, .rank = -1 };
		out_seq(x, n, &t, sx_why(x, n, 0));
		return;
	}
	int r = it->rank;
	if (r > IR_MAX_RANK) {
		sx_out_unknown(x, n, 0, elem, "rank %d is more than %d", r, IR_MAX_RANK);
		return;
	}
	int64_t axis_attr = sx_attr_int(x, n, "axis", 0);
	int axis = sx_axis(axis_attr, r);
	if (axis < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis_attr, r);
		return;
	}
	const struct ir_dim *d = it->dims;
	struct ir_dim piece = sx_unknown();
	bool keep = true;
	const char *why = NULL;
	if (!sx_has(n, 1)) {
		piece = sx_v(1);
		keep = sx_attr_int(x, n, "keepdims", 1) != 0;
	} else {
		int64_t s[64];
		int c = sx_ints(x, n, 1, s, 64), sr = sx_rank(x, n, 1);
		if (c < 1 || sr < 0 || sr > 1) {
			why = "the split sizes are not known";
		} else {
			for (int k = 0; k < c; k++)
				if (s[k] < 0) {
					sx_fail(x, n, "split size %" PRId64 " is negative", s[k]);
					return;
				}
			if (sr == 0) {
				/* chunks of s[0], the last one smaller when it does not divide */
				if (d[axis].kind == IR_DIM_VALUE && s[0] > 0 && d[axis].value % s[0] == 0)
					piece = sx_v(s[0]);
				else
					why = "the last chunk may be smaller than the others";
			} else {
				int64_t sum = 0;
				bool same = true;
				for (int k = 0; k < c; k++) {
					sum += s[k];
					same &= s[k] == s[0];
				}
				if (d[axis].kind == IR_DIM_VALUE && sum != d[axis].value) {
					sx_fail(x, n, "the split sizes add up to %" PRId64 ", not %" PRId64, sum, d[axis].value);
					return;
				}
				if (same)
					piece = sx_v(s[0]);
				else
					why = "the chunks have different sizes";
			}
		}
	}
	struct ir_dim od[IR_MAX_RANK];
	int o = 0;
	for (int k = 0; k < r; k++) {
		if (k != axis)
			od[o++] = d[k];
		else if (keep)
			od[o++] = piece;
	}
	struct ir_type t = { .kind = IR_TYPE_TENSOR, .rank = -1 };
	if (ir_type_set_tensor(&t, elem, o, od)) {
		sx_out_unknown(x, n, 0, elem, "out of memory");
		return;
	}
	out_seq(x, n, &t, why ? why : sx_why(x, n, 0));
	ir_type_clear(&t);
}

static void concat_from_sequence(struct ir_infer *x, struct ir_node *n)
{
	bool bad;
	const struct ir_type *s = seq_in(x, n, 0, &bad);
	if (bad) {
		sx_fail(x, n, "input 0 is not a sequence");
		return;
	}
	const struct ir_type *t = s ? s->inner : NULL;
	if (t && !is_tensor(t)) {
		sx_fail(x, n, "its sequence does not hold tensors");
		return;
	}
	int elem = t ? t->elem : 0;
	const struct ir_attr *a = sx_attr(x, n, "axis");
	if (!a || a->type != IR_ATTR_INT) {
		sx_fail(x, n, "it has no 'axis'");
		return;
	}
	int64_t new_axis = sx_attr_int(x, n, "new_axis", 0);
	if (new_axis != 0 && new_axis != 1) {
		sx_fail(x, n, "'new_axis' must be 0 or 1, not %" PRId64, new_axis);
		return;
	}
	if (!t || t->rank < 0) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	int r = t->rank + (int)new_axis;
	int axis = sx_axis(a->i, r);
	if (axis < 0 || r > IR_MAX_RANK) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", a->i, r);
		return;
	}
	struct ir_dim d[IR_MAX_RANK];
	for (int k = 0; k < r; k++)
		d[k] = k == axis ? sx_unknown() : t->dims[k > axis && new_axis ? k - 1 : k];
	sx_out(x, n, 0, elem, r, d);
	sx_out_why(x, n, 0, "the number of tensors in the sequence is not known");
}

static void sequence_map(struct ir_infer *x, struct ir_node *n)
{
	struct ir_graph *body = graph_attr(x, n, "body");
	if (!body) {
		sx_fail(x, n, "it has no 'body' graph");
		return;
	}
	struct binds b;
	if (!binds_init(&b, body->n_inputs)) {
		binds_free(&b);
		infer_body(x, body, NULL);
		sx_fail(x, n, "out of memory");
		return;
	}
	/* sequences give the body one element at a time, other inputs go in whole */
	for (int i = 0; i < body->n_inputs && i < n->n_inputs; i++) {
		const struct ir_type *t = sx_type(x, n, i);
		bind(&b, body, i, t && t->kind == IR_TYPE_SEQUENCE ? t->inner : t);
	}
	infer_body(x, body, &b);
	binds_free(&b);
	const struct ir_type *t0 = sx_type(x, n, 0);
	if (t0 && t0->kind != IR_TYPE_SEQUENCE) {
		sx_fail(x, n, "input 0 is not a sequence");
		return;
	}
	if (body->n_inputs != n->n_inputs || body->n_outputs != n->n_outputs) {
		sx_fail(x, n, "its body has %d inputs and %d outputs; it needs %d and %d", body->n_inputs,
			body->n_outputs, n->n_inputs, n->n_outputs);
		return;
	}
	for (int i = 0; i < n->n_outputs; i++) {
		if (!n->outputs[i])
			continue;
		const struct ir_type *t = body_out(body, i);
		struct ir_type s;
		make_wrap(&s, IR_TYPE_SEQUENCE, t);
		out_type(x, n, i, &s);
		ir_type_clear(&s);
		if (!ir_type_fully_known(ir_value_type(n->outputs[i])))
			carry_why(n->outputs[i], body_why(body, i));
	}
}

/* ------------------------------------------------------------------------ */
/* Optionals                                                                 */
/* ------------------------------------------------------------------------ */

static void optional_op(struct ir_infer *x, struct ir_node *n)
{
	if (!outv(n, 0))
		return;
	const struct ir_type *t = NULL;
	const char *why = NULL;
	if (sx_has(n, 0)) {
		t = sx_type(x, n, 0);
		why = sx_why(x, n, 0);
	} else {
		const struct ir_attr *a = sx_attr(x, n, "type");
		if (a && a->type == IR_ATTR_TYPE_PROTO && a->tp)
			t = a->tp;
		else
			why = "it has neither an input nor a 'type'";
	}
	struct ir_type o;
	make_wrap(&o, IR_TYPE_OPTIONAL, t);
	out_type(x, n, 0, &o);
	ir_type_clear(&o);
	if (n->n_outputs > 0 && n->outputs[0] && !ir_type_fully_known(ir_value_type(n->outputs[0])))
		carry_why(n->outputs[0], why ? why : "the optional's element type is not fully known");
}

static void optional_get_element(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_type *t = sx_type(x, n, 0);
	if (!t) {
		sx_out_from(x, n, 0, 0, 0);
		return;
	}
	if (t->kind == IR_TYPE_OPTIONAL) {
		out_type(x, n, 0, t->inner);
	} else if (sx_opset(x, n) >= 18 && (is_tensor(t) || t->kind == IR_TYPE_SEQUENCE)) {
		/* from opset 18 a tensor or sequence passes through */
		out_type(x, n, 0, t);
	} else {
		sx_fail(x, n, "its input is a %s, not an optional", kind_name(t));
		return;
	}
	if (n->n_outputs > 0 && n->outputs[0] && !ir_type_fully_known(ir_value_type(n->outputs[0])))
		carry_why(n->outputs[0], sx_why(x, n, 0));
}

static void optional_has_element(struct ir_infer *x, struct ir_node *n)
{
	sx_out(x, n, 0, IR_BOOL, 0, NULL);
}

/* ------------------------------------------------------------------------ */
/* Signal processing, images, strings                                        */
/* ------------------------------------------------------------------------ */

static int out_datatype(struct ir_infer *x, struct ir_node *n)
{
	int dt = (int)sx_attr_int(x, n, "output_datatype", IR_FLOAT);
	if (!ir_dtype_valid(dt)) {
		sx_fail(x, n, "'output_datatype' is not an element type (%d)", dt);
		return 0;
	}
	return dt;
}

/* A scalar input's value as a dim (unknown when not known); false when it is known and not positive. */
static bool positive_scalar(struct ir_infer *x, struct ir_node *n, int i, struct ir_dim *out)
{
	int c;
	const struct ir_dim *v = sx_vals(x, n, i, &c);
	*out = sx_unknown();
	if (!v || c != 1)
		return true;
	if (v[0].kind == IR_DIM_VALUE && v[0].value <= 0)
		return false;
	*out = v[0];
	return true;
}

static void window_op(struct ir_infer *x, struct ir_node *n)
{
	int dt = out_datatype(x, n);
	if (!dt)
		return;
	if (sx_rank(x, n, 0) > 0) {
		sx_fail(x, n, "the window size must be a scalar");
		return;
	}
	struct ir_dim size;
	if (!positive_scalar(x, n, 0, &size)) {
		sx_fail(x, n, "the window size must be positive");
		return;
	}
	sx_out(x, n, 0, dt, 1, &size);
	if (size.kind == IR_DIM_UNKNOWN)
		sx_out_why(x, n, 0, "the window size is not known");
}

static void mel_weight_matrix(struct ir_infer *x, struct ir_node *n)
{
	int dt = out_datatype(x, n);
	if (!dt)
		return;
	struct ir_dim bins, dft, d[2];
	if (!positive_scalar(x, n, 0, &bins))
		bins = sx_unknown();
	if (!positive_scalar(x, n, 1, &dft))
		dft = sx_unknown();
	struct ir_dim one = sx_v(1), half = sx_floordiv(x, &dft, 2);
	d[0] = half.kind == IR_DIM_UNKNOWN ? half : sx_add(x, &half, &one);
	d[1] = bins;
	sx_out(x, n, 0, dt, 2, d);
	if (d[0].kind == IR_DIM_UNKNOWN || d[1].kind == IR_DIM_UNKNOWN)
		sx_out_why(x, n, 0, "num_mel_bins or dft_length is not known");
}

static void image_decoder(struct ir_infer *x, struct ir_node *n)
{
	int r = sx_rank(x, n, 0);
	if (r >= 0 && r != 1) {
		sx_fail(x, n, "the encoded stream must be 1-D, not of rank %d", r);
		return;
	}
	struct ir_dim d[3] = { sx_unknown(), sx_unknown(), sx_unknown() };
	sx_out(x, n, 0, IR_UINT8, 3, d);
	sx_out_why(x, n, 0, "the image's size is in the encoded stream");
}

/* Output `o`: input 0's shape (unknown: why) with element type elem. */
static void like_input(struct ir_infer *x, struct ir_node *n, int o, int elem)
{
	const struct ir_dim *d = sx_dims(x, n, 0);
	if (!d) {
		sx_out_from(x, n, o, elem, 0);
		return;
	}
	sx_out(x, n, o, elem, sx_rank(x, n, 0), d);
}

static void regex_full_match(struct ir_infer *x, struct ir_node *n)
{
	like_input(x, n, 0, IR_BOOL);
}

static void string_concat(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_dim *a = sx_dims(x, n, 0), *b = sx_dims(x, n, 1);
	if (!a || !b) {
		sx_out_from(x, n, 0, IR_STRING, a ? 1 : 0);
		return;
	}
	struct ir_dim d[IR_MAX_RANK];
	const char *err;
	int r = sx_broadcast(a, sx_rank(x, n, 0), b, sx_rank(x, n, 1), d, &err);
	if (r < 0) {
		sx_fail(x, n, "%s", err);
		return;
	}
	sx_out(x, n, 0, IR_STRING, r, d);
}

static void string_split(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, IR_STRING, 0);
		sx_out_from(x, n, 1, IR_INT64, 0);
		return;
	}
	if (r >= IR_MAX_RANK) {
		sx_out_unknown(x, n, 0, IR_STRING, "rank %d is more than %d", r + 1, IR_MAX_RANK);
	} else {
		struct ir_dim o[IR_MAX_RANK];
		sx_copy_dims(o, d, r);
		o[r] = sx_unknown();
		sx_out(x, n, 0, IR_STRING, r + 1, o);
		sx_out_why(x, n, 0, "the number of substrings depends on the strings");
	}
	sx_out(x, n, 1, IR_INT64, r, d);
}

static void string_normalizer(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, IR_STRING, 0);
		return;
	}
	if (r != 1 && r != 2) {
		sx_fail(x, n, "its input must be [C] or [1,C], not of rank %d", r);
		return;
	}
	if (r == 2 && d[0].kind == IR_DIM_VALUE && d[0].value != 1) {
		sx_fail(x, n, "its input must be [C] or [1,C]");
		return;
	}
	/* stop words (and, in the reference implementation, empty strings) are dropped: how many, the data tells */
	struct ir_dim o[2];
	if (r == 2)
		o[0] = sx_v(1);
	o[r - 1] = sx_unknown();
	sx_out(x, n, 0, IR_STRING, r, o);
	sx_out_why(x, n, 0, "how many strings it drops depends on the data");
}

static void tfidf_vectorizer(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_attr *a = sx_attr(x, n, "ngram_indexes");
	int64_t top = -1;
	bool ok = a && a->type == IR_ATTR_INTS && a->n > 0;
	for (size_t k = 0; ok && k < a->n; k++) {
		if (a->ints[k] < 0)
			ok = false;
		else if (a->ints[k] > top)
			top = a->ints[k];
	}
	if (!ok) {
		sx_fail(x, n, "'ngram_indexes' must be non-empty and not negative");
		return;
	}
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, IR_FLOAT, 0);
		return;
	}
	if (r != 1 && r != 2) {
		sx_fail(x, n, "its input must be of rank 1 or 2, not %d", r);
		return;
	}
	struct ir_dim o[2] = { d[0], sx_v(top + 1) };
	if (r == 1)
		o[0] = sx_v(top + 1);
	sx_out(x, n, 0, IR_FLOAT, r, o);
}

/* ------------------------------------------------------------------------ */
/* ai.onnx.ml                                                                */
/* ------------------------------------------------------------------------ */

/* How many elements an ints or strings attribute has; -1 when absent. */
static int attr_count(struct ir_infer *x, const struct ir_node *n, const char *name)
{
	const struct ir_attr *a = sx_attr(x, n, name);
	if (!a)
		return -1;
	switch (a->type) {
	case IR_ATTR_INTS:
	case IR_ATTR_FLOATS:
	case IR_ATTR_STRINGS:
	case IR_ATTR_TENSORS:
	case IR_ATTR_GRAPHS:
		return a->n > (size_t)INT32_MAX ? INT32_MAX : (int)a->n;
	default:
		return -1;
	}
}

/*
 * The rows N of an [N,F] input: *rank gets the input's rank (-1 unknown).
 * A 1-D input is one row where one_d is set, else its N is unknown.
 */
static struct ir_dim batch_rows(struct ir_infer *x, const struct ir_node *n, int *rank, bool one_d)
{
	const struct ir_dim *d = sx_dims(x, n, 0);
	*rank = d ? sx_rank(x, n, 0) : -1;
	if (*rank == 2)
		return d[0];
	if (*rank == 1 && one_d)
		return sx_v(1);
	return sx_unknown();
}

static void ml_array_feature_extractor(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (r < 1 || r > IR_MAX_RANK) {
		sx_fail(x, n, "its input must have at least one axis");
		return;
	}
	/* the last axis gets one element per index; a 1-D input gives one row */
	struct ir_dim cnt = sx_unknown();
	const struct ir_dim *id = sx_dims(x, n, 1);
	if (id) {
		cnt = sx_v(1);
		for (int k = 0; k < sx_rank(x, n, 1); k++)
			cnt = sx_mul(x, &cnt, &id[k]);
	}
	struct ir_dim o[IR_MAX_RANK];
	int ro = r == 1 ? 2 : r;
	if (r == 1)
		o[0] = sx_v(1);
	else
		sx_copy_dims(o, d, r - 1);
	o[ro - 1] = cnt;
	sx_out(x, n, 0, elem, ro, o);
	if (cnt.kind == IR_DIM_UNKNOWN)
		sx_out_why(x, n, 0, "the number of indices is not known");
}

static void ml_same(struct ir_infer *x, struct ir_node *n)
{
	sx_out_like(x, n, 0, 0);
}

static void ml_to_float(struct ir_infer *x, struct ir_node *n)
{
	like_input(x, n, 0, IR_FLOAT);
}

static void ml_cast_map(struct ir_infer *x, struct ir_node *n)
{
	const char *to = sx_attr_str(x, n, "cast_to", "TO_FLOAT");
	int elem = !strcmp(to, "TO_FLOAT") ? IR_FLOAT : !strcmp(to, "TO_INT64") ? IR_INT64 :
		!strcmp(to, "TO_STRING") ? IR_STRING : 0;
	if (!elem) {
		sx_fail(x, n, "'cast_to' is not TO_FLOAT, TO_INT64 or TO_STRING");
		return;
	}
	/* the layout of the result is not fixed by the spec (onnxruntime gives [1,N]) */
	sx_out_unknown(x, n, 0, elem, "the layout of CastMap's result is not specified");
}

static void ml_category_mapper(struct ir_infer *x, struct ir_node *n)
{
	int in = sx_elem(x, n, 0);
	int elem = in == IR_STRING ? IR_INT64 : in == IR_INT64 ? IR_STRING : 0;
	if (in && !elem) {
		sx_fail(x, n, "its input must be string or int64");
		return;
	}
	like_input(x, n, 0, elem);
}

static void ml_dict_vectorizer(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_type *t = sx_type(x, n, 0);
	if (t && t->kind != IR_TYPE_MAP) {
		sx_fail(x, n, "its input is a %s, not a map", kind_name(t));
		return;
	}
	int elem = t && t->inner && is_tensor(t->inner) ? t->inner->elem : 0;
	/* 1-D in the spec, [1,N] in onnxruntime */
	sx_out_unknown(x, n, 0, elem, "the layout of DictVectorizer's result is not settled");
}

static void ml_feature_vectorizer(struct ir_infer *x, struct ir_node *n)
{
	struct ir_dim d[2] = { sx_unknown(), sx_unknown() };
	bool all2 = true;
	for (int i = 0; i < n->n_inputs; i++) {
		const struct ir_dim *id = sx_dims(x, n, i);
		int r = sx_rank(x, n, i);
		if (id && r == 2) {
			if (d[0].kind == IR_DIM_UNKNOWN || (d[0].kind == IR_DIM_PARAM && id[0].kind == IR_DIM_VALUE))
				d[0] = id[0];
		} else {
			all2 = false;
			if (id && r != 1) {
				sx_fail(x, n, "input %d must be of rank 1 or 2, not %d", i, r);
				return;
			}
		}
	}
	if (!all2)
		d[0] = sx_unknown();
	int64_t dims[256];
	int c = sx_attr_ints(x, n, "inputdimensions", dims, 256);
	if (c == n->n_inputs && c <= 256) {
		int64_t sum = 0;
		for (int k = 0; k < c; k++)
			sum += dims[k] > 0 ? dims[k] : 0;
		d[1] = sx_v(sum);
	}
	sx_out(x, n, 0, IR_FLOAT, 2, d);
	if (d[0].kind == IR_DIM_UNKNOWN || d[1].kind == IR_DIM_UNKNOWN)
		sx_out_why(x, n, 0, "the rows or the sum of 'inputdimensions' are not known");
}

static void ml_label_encoder(struct ir_infer *x, struct ir_node *n)
{
	int elem = 0;
	const struct ir_attr *vt = sx_attr(x, n, "values_tensor");
	if (vt && vt->type == IR_ATTR_TENSOR && vt->t)
		elem = vt->t->dtype;
	else if (attr_count(x, n, "values_strings") >= 0)
		elem = IR_STRING;
	else if (attr_count(x, n, "values_int64s") >= 0)
		elem = IR_INT64;
	else if (attr_count(x, n, "values_floats") >= 0)
		elem = IR_FLOAT;
	else {
		/* LabelEncoder-1: strings to integers and back */
		int in = sx_elem(x, n, 0);
		elem = in == IR_STRING ? IR_INT64 : in == IR_INT64 ? IR_STRING : 0;
	}
	like_input(x, n, 0, elem);
}

static bool using_string_labels(struct ir_infer *x, const struct ir_node *n, const char *name)
{
	return attr_count(x, n, name) > 0;
}

/* Y [N] of labels and Z [N,E] of float scores. */
static void classifier_out(struct ir_infer *x, struct ir_node *n, bool strings, struct ir_dim rows, struct ir_dim e,
			   int rank)
{
	int lab = strings ? IR_STRING : IR_INT64;
	if (rank < 0) {
		sx_out_from(x, n, 0, lab, 0);
		sx_out_from(x, n, 1, IR_FLOAT, 0);
		return;
	}
	struct ir_dim z[2] = { rows, e };
	sx_out(x, n, 0, lab, 1, &rows);
	sx_out(x, n, 1, IR_FLOAT, 2, z);
	if (rows.kind == IR_DIM_UNKNOWN) {
		sx_out_why(x, n, 0, "the number of rows is not known");
		sx_out_why(x, n, 1, "the number of rows is not known");
	} else if (e.kind == IR_DIM_UNKNOWN) {
		sx_out_why(x, n, 1, "the number of scores per row depends on the model's attributes");
	}
}

static void ml_linear_classifier(struct ir_infer *x, struct ir_node *n)
{
	bool strings = using_string_labels(x, n, "classlabels_strings");
	int labels = attr_count(x, n, strings ? "classlabels_strings" : "classlabels_ints");
	int classes = attr_count(x, n, "intercepts");
	if (classes < 0)
		classes = 0;
	if (classes == 1 && labels == 2)
		classes = 2;   /* binary: one intercept, two scores */
	int r;
	struct ir_dim rows = batch_rows(x, n, &r, true);
	if (r > 2 || r == 0) {
		sx_fail(x, n, "its input must be 1-D or 2-D, not of rank %d", r);
		return;
	}
	classifier_out(x, n, strings, rows, sx_v(classes), r);
}

static void ml_linear_regressor(struct ir_infer *x, struct ir_node *n)
{
	int r;
	struct ir_dim d[2] = { batch_rows(x, n, &r, false), sx_v(sx_attr_int(x, n, "targets", 1)) };
	if (r != 2) {
		sx_out_unknown(x, n, 0, IR_FLOAT, r < 0 ? "its input's shape is not known" :
			       "the shape of the result of a %d-D input is not settled", r);
		return;
	}
	sx_out(x, n, 0, IR_FLOAT, 2, d);
}

static void ml_one_hot_encoder(struct ir_infer *x, struct ir_node *n)
{
	int ci = attr_count(x, n, "cats_int64s"), cs = attr_count(x, n, "cats_strings");
	if ((ci >= 0) == (cs >= 0)) {
		sx_fail(x, n, "exactly one of 'cats_int64s' and 'cats_strings' must be given");
		return;
	}
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, IR_FLOAT, 0);
		return;
	}
	if (r >= IR_MAX_RANK) {
		sx_out_unknown(x, n, 0, IR_FLOAT, "rank %d is more than %d", r + 1, IR_MAX_RANK);
		return;
	}
	struct ir_dim o[IR_MAX_RANK];
	sx_copy_dims(o, d, r);
	o[r] = sx_v(ci > cs ? ci : cs);
	sx_out(x, n, 0, IR_FLOAT, r + 1, o);
}

static void ml_svm_classifier(struct ir_infer *x, struct ir_node *n)
{
	int r;
	struct ir_dim rows = batch_rows(x, n, &r, false);
	bool strings = using_string_labels(x, n, "classlabels_strings");
	if (r != 2) {
		/* the number of rows of a 1-D input is not settled */
		sx_out_unknown(x, n, 0, strings ? IR_STRING : IR_INT64, "its input is not [N,F]");
		sx_out_unknown(x, n, 1, IR_FLOAT, "its input is not [N,F]");
		return;
	}
	/* how many scores: classes, pairs of classes or one, by the attributes */
	classifier_out(x, n, strings, rows, sx_unknown(), r);
}

static void ml_svm_regressor(struct ir_infer *x, struct ir_node *n)
{
	int r;
	struct ir_dim d[2] = { batch_rows(x, n, &r, false), sx_v(1) };
	if (r != 2) {
		sx_out_unknown(x, n, 0, IR_FLOAT, "its input is not [N,F]");
		return;
	}
	sx_out(x, n, 0, IR_FLOAT, 2, d);
}

/* Tree ensembles take [N,F] only. */
static bool tree_rows(struct ir_infer *x, struct ir_node *n, struct ir_dim *rows, int *rank)
{
	*rows = batch_rows(x, n, rank, false);
	if (*rank >= 0 && *rank != 2) {
		sx_fail(x, n, "its input must be [N,F], not of rank %d", *rank);
		return false;
	}
	return true;
}

static void ml_tree_ensemble(struct ir_infer *x, struct ir_node *n)
{
	int r;
	struct ir_dim rows;
	if (!tree_rows(x, n, &rows, &r))
		return;
	const struct ir_attr *t = sx_attr(x, n, "n_targets");
	struct ir_dim d[2] = { rows, t && t->type == IR_ATTR_INT ? sx_v(t->i) : sx_unknown() };
	int elem = sx_elem(x, n, 0);
	if (r < 0) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	sx_out(x, n, 0, elem, 2, d);
}

static void ml_tree_ensemble_regressor(struct ir_infer *x, struct ir_node *n)
{
	int r;
	struct ir_dim rows;
	if (!tree_rows(x, n, &rows, &r))
		return;
	const struct ir_attr *t = sx_attr(x, n, "n_targets");
	struct ir_dim d[2] = { rows, t && t->type == IR_ATTR_INT ? sx_v(t->i) : sx_unknown() };
	if (r < 0) {
		sx_out_from(x, n, 0, IR_FLOAT, 0);
		return;
	}
	sx_out(x, n, 0, IR_FLOAT, 2, d);
}

static void ml_tree_ensemble_classifier(struct ir_infer *x, struct ir_node *n)
{
	int r;
	struct ir_dim rows;
	if (!tree_rows(x, n, &rows, &r))
		return;
	bool strings = using_string_labels(x, n, "classlabels_strings");
	int labels = attr_count(x, n, strings ? "classlabels_strings" : "classlabels_int64s");
	classifier_out(x, n, strings, rows, labels > 0 ? sx_v(labels) : sx_unknown(), r);
}

static void ml_zip_map(struct ir_infer *x, struct ir_node *n)
{
	int r = sx_rank(x, n, 0);
	if (r >= 0 && r != 1 && r != 2) {
		sx_fail(x, n, "its input must be 1-D or 2-D, not of rank %d", r);
		return;
	}
	if (!outv(n, 0))
		return;
	struct ir_type val = { .kind = IR_TYPE_TENSOR, .elem = IR_FLOAT, .has_elem = true, .rank = 0 };
	struct ir_type map = { .kind = IR_TYPE_MAP, .rank = -1, .inner = &val };
	if (using_string_labels(x, n, "classlabels_strings"))
		map.key = IR_STRING;
	else if (attr_count(x, n, "classlabels_int64s") > 0)
		map.key = IR_INT64;
	map.has_elem = map.key != 0;
	out_seq(x, n, &map, "ZipMap has no class labels");
}

/* ------------------------------------------------------------------------ */
/* ai.onnx.preview.training                                                  */
/* ------------------------------------------------------------------------ */

/* Optimizers: inputs R, T, then `groups` lists of n tensors (X, G, then the states);
 * outputs the new X and the new states, each of its input's type. */
static void optimizer(struct ir_infer *x, struct ir_node *n, int groups, bool strict)
{
	int rest = n->n_inputs - 2;
	if (rest < 0 || (strict && rest % groups)) {
		sx_fail(x, n, "its inputs after R and T must come in groups of %d", groups);
		return;
	}
	int k = rest / groups;
	for (int i = 0; i < k; i++) {
		sx_out_like(x, n, i, 2 + i);   /* X -> X_new */
		for (int g = 2; g < groups; g++)
			sx_out_like(x, n, (g - 1) * k + i, 2 + g * k + i);
	}
}

static void training_adagrad(struct ir_infer *x, struct ir_node *n)
{
	optimizer(x, n, 3, false);
}

static void training_momentum(struct ir_infer *x, struct ir_node *n)
{
	optimizer(x, n, 3, true);
}

static void training_adam(struct ir_infer *x, struct ir_node *n)
{
	optimizer(x, n, 4, true);
}

/* The i-th output is the gradient with respect to the i-th input (of "xs"): of its type. */
static void training_gradient(struct ir_infer *x, struct ir_node *n)
{
	int xs = attr_count(x, n, "xs");
	for (int i = 0; i < n->n_outputs; i++) {
		if (!n->outputs[i])
			continue;
		if (xs >= 0 && i >= xs)
			sx_out_unknown(x, n, i, 0, "it has more outputs than 'xs' names");
		else
			sx_out_like(x, n, i, i);
	}
}

const struct sx_entry sx_other[] = {
	/* control flow */
	{ IR_OP_If, if_op }, { IR_OP_Loop, loop_op }, { IR_OP_Scan, scan_op },
	/* sequences, optionals */
	{ IR_OP_SequenceEmpty, sequence_empty }, { IR_OP_SequenceConstruct, sequence_construct },
	{ IR_OP_SequenceInsert, sequence_insert }, { IR_OP_SequenceAt, sequence_at },
	{ IR_OP_SequenceErase, sequence_erase }, { IR_OP_SequenceLength, sequence_length },
	{ IR_OP_SequenceMap, sequence_map }, { IR_OP_SplitToSequence, split_to_sequence },
	{ IR_OP_ConcatFromSequence, concat_from_sequence },
	{ IR_OP_Optional, optional_op }, { IR_OP_OptionalGetElement, optional_get_element },
	{ IR_OP_OptionalHasElement, optional_has_element },
	/* signals, images, strings */
	{ IR_OP_BlackmanWindow, window_op }, { IR_OP_HammingWindow, window_op }, { IR_OP_HannWindow, window_op },
	{ IR_OP_MelWeightMatrix, mel_weight_matrix }, { IR_OP_ImageDecoder, image_decoder },
	{ IR_OP_RegexFullMatch, regex_full_match }, { IR_OP_StringConcat, string_concat },
	{ IR_OP_StringNormalizer, string_normalizer }, { IR_OP_StringSplit, string_split },
	{ IR_OP_TfIdfVectorizer, tfidf_vectorizer },
	/* ai.onnx.ml */
	{ IR_OP_ml_ArrayFeatureExtractor, ml_array_feature_extractor }, { IR_OP_ml_Binarizer, ml_same },
	{ IR_OP_ml_CastMap, ml_cast_map }, { IR_OP_ml_CategoryMapper, ml_category_mapper },
	{ IR_OP_ml_DictVectorizer, ml_dict_vectorizer }, { IR_OP_ml_FeatureVectorizer, ml_feature_vectorizer },
	{ IR_OP_ml_Imputer, ml_same }, { IR_OP_ml_LabelEncoder, ml_label_encoder },
	{ IR_OP_ml_LinearClassifier, ml_linear_classifier }, { IR_OP_ml_LinearRegressor, ml_linear_regressor },
	{ IR_OP_ml_Normalizer, ml_to_float }, { IR_OP_ml_OneHotEncoder, ml_one_hot_encoder },
	{ IR_OP_ml_SVMClassifier, ml_svm_classifier }, { IR_OP_ml_SVMRegressor, ml_svm_regressor },
	{ IR_OP_ml_Scaler, ml_to_float }, { IR_OP_ml_TreeEnsemble, ml_tree_ensemble },
	{ IR_OP_ml_TreeEnsembleClassifier, ml_tree_ensemble_classifier },
	{ IR_OP_ml_TreeEnsembleRegressor, ml_tree_ensemble_regressor }, { IR_OP_ml_ZipMap, ml_zip_map },
	/* ai.onnx.preview.training */
	{ IR_OP_training_Adagrad, training_adagrad }, { IR_OP_training_Adam, training_adam },
	{ IR_OP_training_Gradient, training_gradient }, { IR_OP_training_Momentum, training_momentum },
	{ -1, NULL },
};
