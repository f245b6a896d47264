/*
 * infer.c - the shape inference driver and the helpers shape functions use
 * (infer.h). Walks each graph in order, calls the op's shape function,
 * then holds the result against what the model declares.
 */
#include "infer.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#define MAX_KNOWN 64          /* integer tensors up to this many elements have tracked values */
#define MAX_FUNCTION_DEPTH 16

struct arena_blk { struct arena_blk *next; size_t used, size; max_align_t data[]; };

struct ir_infer {
	struct ir_model *m;
	struct ir_diag *d;
	struct arena_blk *arena;
	bool oom;
	sx_fn table[IR_OP_COUNT];
	/* inside a model function's body */
	const struct ir_function *fn;
	const struct ir_node *caller;
	struct ir_infer *up;          /* the caller's context (for nested functions) */
	int fn_depth;
	int warnings;
};

/* ---- arena ---- */

static void *xalloc(struct ir_infer *x, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	struct arena_blk *b = x->arena;
	if (!b || b->size - b->used < size) {
		size_t bs = size > 65536 ? size : 65536;
		b = malloc(sizeof(*b) + bs);
		if (!b) {
			x->oom = true;
			return NULL;
		}
		b->next = x->arena;
		b->used = 0;
		b->size = bs;
		x->arena = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += size;
	return p;
}

static char *xstrdup(struct ir_infer *x, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = xalloc(x, n);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* Moves a malloc'd dim param into the arena. */
static struct ir_dim keep(struct ir_infer *x, struct ir_dim d)
{
	if (d.kind == IR_DIM_PARAM) {
		char *p = xstrdup(x, d.param);
		free(d.param);
		d.param = p;
		if (!p)
			d.kind = IR_DIM_UNKNOWN;
	}
	d.denotation = NULL;
	return d;
}

/* ---- the table of shape functions ---- */

static void build_table(struct ir_infer *x)
{
	const struct sx_entry *families[] = { sx_elementwise, sx_tensor_ops, sx_nn, sx_other };
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
		for (const struct sx_entry *e = families[f]; e->fn; e++)
			if (e->op >= 0 && e->op < IR_OP_COUNT)
				x->table[e->op] = e->fn;
}

bool ir_infer_has_shape_fn(int op)
{
	static struct ir_infer t;
	static bool built;
	if (!built) {
		build_table(&t);
		built = true;
	}
	/* the GPU planner's island nodes keep the type they are made with (infer_node) */
	if (op == IR_OP_ogsh_QConv || op == IR_OP_ogsh_QGemm || op == IR_OP_ogsh_MatMulW4)
		return true;
	return op >= 0 && op < IR_OP_COUNT && t.table[op] != NULL;
}

/* ---- values ---- */

static void clear_value(struct ir_value *v)
{
	ir_type_clear(&v->inferred);
	free(v->why);
	v->why = NULL;
	ir_dims_clear(v->known, v->n_known > 0 ? v->n_known : 0);
	free(v->known);
	v->known = NULL;
	v->n_known = -1;
	v->conflict = false;
}

static int clear_cb(struct ir_graph *g, void *arg)
{
	(void)arg;
	for (size_t i = 0; i < g->n_values; i++)
		clear_value(g->values[i]);
	return 0;
}

void ir_infer_clear(struct ir_graph *g)
{
	if (g)
		ir_graph_walk(g, clear_cb, NULL);
}

const struct ir_type *ir_value_type(const struct ir_value *v)
{
	return v->inferred.kind != IR_TYPE_NONE ? &v->inferred : &v->type;
}

const struct ir_type *sx_value_type(const struct ir_value *v)
{
	return ir_value_type(v);
}

static void set_why(struct ir_value *v, const char *why)
{
	if (v->why || !why)
		return;
	v->why = ir_strdup(why);
}

static void set_known(struct ir_value *v, int count, const struct ir_dim *vals)
{
	ir_dims_clear(v->known, v->n_known > 0 ? v->n_known : 0);
	free(v->known);
	v->known = NULL;
	v->n_known = -1;
	if (count < 0 || count > MAX_KNOWN)
		return;
	struct ir_dim *k = ir_alloc_array((size_t)count, sizeof(*k));
	if (!k)
		return;
	for (int i = 0; i < count; i++) {
		k[i].kind = vals[i].kind;
		k[i].value = vals[i].value;
		if (vals[i].kind == IR_DIM_PARAM && !(k[i].param = ir_strdup(vals[i].param)))
			k[i].kind = IR_DIM_UNKNOWN;
	}
	v->known = k;
	v->n_known = count;
}

static bool int_dtype(int dt)
{
	return ir_dtype_is_int(dt) && ir_dtype_bits(dt) >= 8;
}

/* Known elements of a constant integer tensor. */
static void known_from_tensor(struct ir_value *v, const struct ir_tensor *t)
{
	if (!t || !int_dtype(t->dtype) || t->numel > MAX_KNOWN || (t->numel && !ir_tensor_data(t)))
		return;
	struct ir_dim vals[MAX_KNOWN];
	for (uint64_t i = 0; i < t->numel; i++) {
		vals[i] = (struct ir_dim){ .kind = IR_DIM_VALUE };
		/* a uint64 past INT64_MAX is no size or index: the element stays unknown */
		if (!ir_elem_to_i64(t->dtype, ir_tensor_data(t), i, &vals[i].value))
			vals[i].kind = IR_DIM_UNKNOWN;
	}
	set_known(v, (int)t->numel, vals);
}

static void type_from_tensor(struct ir_type *ty, int dtype, int rank, const int64_t *dims)
{
	struct ir_dim d[IR_MAX_RANK];
	for (int k = 0; k < rank; k++)
		d[k] = (struct ir_dim){ .kind = IR_DIM_VALUE, .value = dims[k] };
	ir_type_set_tensor(ty, dtype, rank, d);
}

/* ---- inputs ---- */

bool sx_has(const struct ir_node *n, int i)
{
	return i >= 0 && i < n->n_inputs && n->inputs[i];
}

const struct ir_type *sx_type(struct ir_infer *x, const struct ir_node *n, int i)
{
	(void)x;
	if (!sx_has(n, i))
		return NULL;
	const struct ir_type *t = ir_value_type(n->inputs[i]);
	return t->kind == IR_TYPE_NONE ? NULL : t;
}

int sx_elem(struct ir_infer *x, const struct ir_node *n, int i)
{
	const struct ir_type *t = sx_type(x, n, i);
	return t && (t->kind == IR_TYPE_TENSOR || t->kind == IR_TYPE_SPARSE_TENSOR) ? t->elem : 0;
}

int sx_rank(struct ir_infer *x, const struct ir_node *n, int i)
{
	const struct ir_type *t = sx_type(x, n, i);
	return t && (t->kind == IR_TYPE_TENSOR || t->kind == IR_TYPE_SPARSE_TENSOR) ? t->rank : -1;
}

const struct ir_dim *sx_dims(struct ir_infer *x, const struct ir_node *n, int i)
{
	const struct ir_type *t = sx_type(x, n, i);
	if (!t || (t->kind != IR_TYPE_TENSOR && t->kind != IR_TYPE_SPARSE_TENSOR) || t->rank < 0)
		return NULL;
	static const struct ir_dim none;
	return t->rank ? t->dims : &none;
}

const char *sx_why(struct ir_infer *x, const struct ir_node *n, int i)
{
	(void)x;
	if (!sx_has(n, i))
		return "an optional input it needs is absent";
	const struct ir_value *v = n->inputs[i];
	if (v->why)
		return v->why;
	if (v->is_input && !v->has_type_proto)
		return "a graph input has no declared type";
	return "an input's shape is not known";
}

const struct ir_dim *sx_need(struct ir_infer *x, struct ir_node *n, int i, int *rank)
{
	const struct ir_dim *d = sx_dims(x, n, i);
	if (d) {
		if (rank)
			*rank = sx_rank(x, n, i);
		return d;
	}
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] && n->outputs[k]->inferred.kind == IR_TYPE_NONE)
			sx_out_from(x, n, k, 0, i);
	return NULL;
}

const struct ir_tensor *sx_const(struct ir_infer *x, const struct ir_node *n, int i)
{
	(void)x;
	if (!sx_has(n, i))
		return NULL;
	const struct ir_tensor *t = NULL;
	for (const struct ir_value *v = n->inputs[i]; v && !t; v = v->outer)
		t = ir_value_const(v);
	return t;
}

struct ir_dim sx_in_dim(struct ir_infer *x, const struct ir_node *n, int i, int k)
{
	const struct ir_dim *d = sx_dims(x, n, i);
	int r = sx_rank(x, n, i);
	if (!d || r < 0)
		return sx_unknown();
	if (k < 0)
		k += r;
	if (k < 0 || k >= r)
		return sx_unknown();
	struct ir_dim o = d[k];
	o.denotation = NULL;
	return o;
}

bool sx_rank_in(struct ir_infer *x, struct ir_node *n, int i, int lo, int hi, const char *what)
{
	int r = sx_rank(x, n, i);
	if (r < 0 || (r >= lo && r <= hi))
		return true;
	if (lo == hi)
		sx_fail(x, n, "%s must have rank %d, not %d", what, lo, r);
	else if (hi >= IR_MAX_RANK)
		sx_fail(x, n, "%s must have rank %d or more, not %d", what, lo, r);
	else
		sx_fail(x, n, "%s must have rank %d to %d, not %d", what, lo, hi, r);
	return false;
}

const struct ir_dim *sx_vals(struct ir_infer *x, const struct ir_node *n, int i, int *count)
{
	*count = 0;
	if (!sx_has(n, i))
		return NULL;
	struct ir_value *v = n->inputs[i];
	if (v->n_known < 0) {
		const struct ir_tensor *t = ir_value_const(v);
		if (!t && v->outer)
			t = ir_value_const(v->outer);
		known_from_tensor(v, t);
		if (v->n_known < 0 && v->outer && v->outer->n_known >= 0)
			set_known(v, v->outer->n_known, v->outer->known);
	}
	(void)x;
	if (v->n_known < 0)
		return NULL;
	*count = v->n_known;
	static const struct ir_dim none;
	return v->n_known ? v->known : &none;
}

int sx_ints(struct ir_infer *x, const struct ir_node *n, int i, int64_t *out, int max)
{
	int c;
	const struct ir_dim *v = sx_vals(x, n, i, &c);
	if (!v || c > max)
		return -1;
	for (int k = 0; k < c; k++) {
		if (v[k].kind != IR_DIM_VALUE)
			return -1;
		out[k] = v[k].value;
	}
	return c;
}

static int64_t opset_in(const struct ir_opset *o, size_t n, const char *domain, bool *found)
{
	bool dflt = !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
	for (size_t i = 0; i < n; i++) {
		const char *d = o[i].domain;
		bool od = !d || !*d || strcmp(d, "ai.onnx") == 0;
		if (dflt ? od : (d && strcmp(d, domain) == 0)) {
			*found = true;
			return o[i].version;
		}
	}
	*found = false;
	return 0;
}

int64_t sx_opset(struct ir_infer *x, const struct ir_node *n)
{
	bool found = false;
	if (x->fn) {
		int64_t v = opset_in(x->fn->opsets, x->fn->n_opsets, n->domain, &found);
		if (found)
			return v;
	}
	int64_t v = ir_model_opset(x->m, n->domain);
	return v > 0 ? v : INT64_MAX;
}

/* ---- attributes ---- */

const struct ir_attr *sx_attr(struct ir_infer *x, const struct ir_node *n, const char *name)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a || !a->ref_attr_name)
		return a;
	/* in a function body: the calling node's attribute, else the function's default */
	for (struct ir_infer *c = x; c && c->fn; c = c->up) {
		const struct ir_attr *r = ir_node_attr(c->caller, a->ref_attr_name);
		if (r && !r->ref_attr_name)
			return r;
		for (size_t k = 0; k < c->fn->n_attr_defaults; k++)
			if (c->fn->attr_defaults[k].name && strcmp(c->fn->attr_defaults[k].name, a->ref_attr_name) == 0)
				return &c->fn->attr_defaults[k];
		if (!r)
			return NULL;
		a = r;   /* the caller itself refers further up */
	}
	return NULL;
}

int64_t sx_attr_int(struct ir_infer *x, const struct ir_node *n, const char *name, int64_t dflt)
{
	const struct ir_attr *a = sx_attr(x, n, name);
	return a && a->type == IR_ATTR_INT ? a->i : dflt;
}

float sx_attr_float(struct ir_infer *x, const struct ir_node *n, const char *name, float dflt)
{
	const struct ir_attr *a = sx_attr(x, n, name);
	return a && a->type == IR_ATTR_FLOAT ? a->f : dflt;
}

const char *sx_attr_str(struct ir_infer *x, const struct ir_node *n, const char *name, const char *dflt)
{
	const struct ir_attr *a = sx_attr(x, n, name);
	return a && a->type == IR_ATTR_STRING && a->s.data ? a->s.data : dflt;
}

int sx_attr_ints(struct ir_infer *x, const struct ir_node *n, const char *name, int64_t *out, int max)
{
	const struct ir_attr *a = sx_attr(x, n, name);
	if (!a || a->type != IR_ATTR_INTS)
		return -1;
	int c = (int)(a->n < (size_t)max ? a->n : (size_t)max);
	if (c)
		memcpy(out, a->ints, (size_t)c * sizeof(int64_t));
	return (int)a->n;
}

/* ---- outputs ---- */

static struct ir_value *out_value(struct ir_node *n, int i)
{
	return i >= 0 && i < n->n_outputs ? n->outputs[i] : NULL;
}

void sx_out(struct ir_infer *x, struct ir_node *n, int i, int elem, int rank, const struct ir_dim *dims)
{
	struct ir_value *v = out_value(n, i);
	if (!v)
		return;
	if (rank > IR_MAX_RANK) {
		sx_out_unknown(x, n, i, elem, "rank %d is more than %d", rank, IR_MAX_RANK);
		return;
	}
	struct ir_dim clean[IR_MAX_RANK];
	for (int k = 0; k < rank; k++) {
		clean[k] = dims[k];
		clean[k].denotation = NULL;
		if (clean[k].kind == IR_DIM_VALUE && clean[k].value < 0) {
			sx_fail(x, n, "output %d would have a negative dimension (%" PRId64 ")", i, clean[k].value);
			return;
		}
	}
	if (ir_type_set_tensor(&v->inferred, elem, rank, clean))
		x->oom = true;
	v->inferred.has_elem = elem != 0;
}

void sx_out_dims(struct ir_infer *x, struct ir_node *n, int i, int elem, int r, const struct ir_dim *d,
		 const char *why)
{
	if (i < 0 || i >= n->n_outputs || !n->outputs[i])
		return;
	bool unknown = false;
	for (int k = 0; k < r; k++) {
		if (d[k].kind == IR_DIM_VALUE && d[k].value < 0) {
			sx_fail(x, n, "output %d would have a negative dimension (%" PRId64 ")", i, d[k].value);
			return;
		}
		unknown |= d[k].kind == IR_DIM_UNKNOWN;
	}
	sx_out(x, n, i, elem, r, d);
	if (why && unknown && n->outputs[i]->inferred.rank == r)
		sx_out_why(x, n, i, "%s", why);
}

void sx_out_rank(struct ir_infer *x, struct ir_node *n, int i, int elem, int r, const char *why)
{
	struct ir_dim u[IR_MAX_RANK];
	if (r < 0 || r > IR_MAX_RANK) {
		sx_out_unknown(x, n, i, elem, "%s", why ? why : "its rank is not known");
		return;
	}
	for (int k = 0; k < r; k++)
		u[k] = sx_unknown();
	if (r == 0)
		sx_out(x, n, i, elem, 0, NULL);
	else
		sx_out_dims(x, n, i, elem, r, u, why);
}

void sx_out_like(struct ir_infer *x, struct ir_node *n, int i, int j)
{
	const struct ir_type *t = sx_type(x, n, j);
	struct ir_value *v = out_value(n, i);
	if (!v)
		return;
	if (!t) {
		sx_out_from(x, n, i, 0, j);
		return;
	}
	sx_out_type(x, n, i, t);
	if (t->rank < 0 || !t->elem)
		set_why(v, sx_why(x, n, j));
}

void sx_out_type(struct ir_infer *x, struct ir_node *n, int i, const struct ir_type *t)
{
	struct ir_value *v = out_value(n, i);
	if (!v)
		return;
	struct ir_type c;
	if (ir_type_copy(&c, t)) {
		x->oom = true;
		return;
	}
	for (int k = 0; k < c.rank; k++) {
		free(c.dims[k].denotation);
		c.dims[k].denotation = NULL;
	}
	free(c.denotation);
	c.denotation = NULL;
	ir_type_clear(&v->inferred);
	v->inferred = c;
}

static void vfmt_why(struct ir_infer *x, struct ir_node *n, struct ir_value *v, const char *fmt, va_list ap)
{
	char msg[512], who[300];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n->name && *n->name)
		snprintf(who, sizeof(who), "n%d '%s' (%s)", n->id, n->name, n->op_type);
	else
		snprintf(who, sizeof(who), "n%d (%s)", n->id, n->op_type);
	char *s = ir_fmt("%s: %s", who, msg);
	(void)x;
	if (s) {
		free(v->why);
		v->why = s;
	}
}

void sx_out_unknown(struct ir_infer *x, struct ir_node *n, int i, int elem, const char *fmt, ...)
{
	struct ir_value *v = out_value(n, i);
	if (!v)
		return;
	sx_out(x, n, i, elem, -1, NULL);
	va_list ap;
	va_start(ap, fmt);
	vfmt_why(x, n, v, fmt, ap);
	va_end(ap);
}

void sx_out_why(struct ir_infer *x, struct ir_node *n, int i, const char *fmt, ...)
{
	struct ir_value *v = out_value(n, i);
	if (!v)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfmt_why(x, n, v, fmt, ap);
	va_end(ap);
}

void sx_out_from(struct ir_infer *x, struct ir_node *n, int i, int elem, int j)
{
	struct ir_value *v = out_value(n, i);
	if (!v)
		return;
	sx_out(x, n, i, elem, -1, NULL);
	free(v->why);
	v->why = ir_strdup(sx_why(x, n, j));
}

void sx_out_vals(struct ir_infer *x, struct ir_node *n, int i, int count, const struct ir_dim *vals)
{
	(void)x;
	struct ir_value *v = out_value(n, i);
	if (v)
		set_known(v, count, vals);
}

void sx_fail(struct ir_infer *x, struct ir_node *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (int k = 0; k < n->n_outputs; k++) {
		struct ir_value *v = out_value(n, k);
		if (!v)
			continue;
		ir_type_clear(&v->inferred);
		v->inferred.kind = IR_TYPE_TENSOR;
		v->inferred.rank = -1;
		sx_out_why(x, n, k, "%s", msg);
	}
	if (x->warnings++ < 1000) {
		if (n->name && *n->name)
			ir_diag_warn(x->d, "node '%s' (n%d, %s): %s", n->name, n->id, n->op_type, msg);
		else
			ir_diag_warn(x->d, "node n%d (%s): %s", n->id, n->op_type, msg);
	}
}

/* ---- dims ---- */

struct ir_dim sx_v(int64_t v)
{
	return (struct ir_dim){ .kind = IR_DIM_VALUE, .value = v };
}

struct ir_dim sx_unknown(void)
{
	return (struct ir_dim){ .kind = IR_DIM_UNKNOWN };
}

bool sx_known(const struct ir_dim *d)
{
	return d->kind == IR_DIM_VALUE;
}

bool sx_eq(const struct ir_dim *a, const struct ir_dim *b)
{
	return ir_dim_equal(a, b);
}

bool sx_merge(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out)
{
	if (a->kind == IR_DIM_VALUE && b->kind == IR_DIM_VALUE) {
		*out = *a;
		return a->value == b->value;
	}
	if (a->kind == IR_DIM_VALUE)
		*out = *a;
	else if (b->kind == IR_DIM_VALUE)
		*out = *b;
	else
		*out = a->kind == IR_DIM_PARAM ? *a : *b;
	out->denotation = NULL;
	return true;
}

bool sx_unify(struct ir_dim *acc, const struct ir_dim *d)
{
	struct ir_dim t;
	if (!sx_merge(acc, d, &t))
		return false;
	*acc = t;
	return true;
}

struct ir_dim sx_prod(struct ir_infer *x, const struct ir_dim *d, int from, int to)
{
	struct ir_dim p = sx_v(1);
	for (int k = from; k < to; k++)
		p = sx_mul(x, &p, &d[k]);
	return p;
}

static struct ir_dim arith(struct ir_infer *x, int (*op)(const struct ir_dim *, const struct ir_dim *, struct ir_dim *),
			   const struct ir_dim *a, const struct ir_dim *b)
{
	struct ir_dim r;
	if (op(a, b, &r)) {
		x->oom = true;
		return sx_unknown();
	}
	return keep(x, r);
}

struct ir_dim sx_mul(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b)
{
	return arith(x, ir_dim_mul, a, b);
}

struct ir_dim sx_add(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b)
{
	return arith(x, ir_dim_add, a, b);
}

struct ir_dim sx_sub(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b)
{
	return arith(x, ir_dim_sub, a, b);
}

struct ir_dim sx_div(struct ir_infer *x, const struct ir_dim *a, const struct ir_dim *b)
{
	return arith(x, ir_dim_div, a, b);
}

static int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

struct ir_dim sx_floordiv(struct ir_infer *x, const struct ir_dim *a, int64_t b)
{
	if (b <= 0)
		return sx_unknown();
	if (a->kind == IR_DIM_VALUE)
		return sx_v(floordiv(a->value, b));
	struct ir_dim bd = sx_v(b);
	return sx_div(x, a, &bd);
}

struct ir_dim sx_ceildiv(struct ir_infer *x, const struct ir_dim *a, int64_t b)
{
	if (b <= 0)
		return sx_unknown();
	if (a->kind == IR_DIM_VALUE)
		return sx_v(-floordiv(-a->value, b));
	struct ir_dim bd = sx_v(b);
	return sx_div(x, a, &bd);
}

int sx_broadcast(const struct ir_dim *a, int ra, const struct ir_dim *b, int rb, struct ir_dim *out,
		 const char **err)
{
	int r = ra > rb ? ra : rb;
	if (r > IR_MAX_RANK) {
		*err = "the rank is too large";
		return -1;
	}
	for (int k = 0; k < r; k++) {
		int ia = k - (r - ra), ib = k - (r - rb);
		const struct ir_dim *x = ia >= 0 ? &a[ia] : NULL, *y = ib >= 0 ? &b[ib] : NULL;
		if (!x) {
			out[k] = *y;
		} else if (!y) {
			out[k] = *x;
		} else if (x->kind == IR_DIM_VALUE && y->kind == IR_DIM_VALUE) {
			if (x->value != y->value && x->value != 1 && y->value != 1) {
				*err = "the shapes do not broadcast";
				return -1;
			}
			out[k] = x->value == 1 ? *y : *x;
		} else if (x->kind == IR_DIM_VALUE && x->value == 1) {
			out[k] = *y;
		} else if (y->kind == IR_DIM_VALUE && y->value == 1) {
			out[k] = *x;
		} else if (x->kind == IR_DIM_VALUE) {
			out[k] = *x;   /* a symbol meeting a number > 1 must be that number */
		} else if (y->kind == IR_DIM_VALUE) {
			out[k] = *y;
		} else if (x->kind == IR_DIM_PARAM && y->kind == IR_DIM_PARAM && ir_dim_equal(x, y)) {
			out[k] = *x;
		} else {
			out[k] = sx_unknown();
		}
	}
	return r;
}

int sx_axis(int64_t axis, int r)
{
	if (axis < -r || axis >= r)
		return -1;
	return (int)(axis < 0 ? axis + r : axis);
}

void sx_copy_dims(struct ir_dim *dst, const struct ir_dim *src, int rank)
{
	for (int k = 0; k < rank; k++) {
		dst[k] = src[k];
		dst[k].denotation = NULL;
	}
}

struct ir_type *sx_tensor_type(struct ir_infer *x, int elem, int rank, const struct ir_dim *dims)
{
	struct ir_type *t = xalloc(x, sizeof(*t));
	if (!t)
		return NULL;
	memset(t, 0, sizeof(*t));
	t->kind = IR_TYPE_TENSOR;
	t->elem = elem;
	t->has_elem = elem != 0;
	t->rank = rank;
	if (rank > 0) {
		t->dims = xalloc(x, (size_t)rank * sizeof(*t->dims));
		if (!t->dims)
			return NULL;
		sx_copy_dims(t->dims, dims, rank);
	}
	return t;
}

/* ---- the walk ---- */

static void describe(const struct ir_value *v, char *buf, size_t size)
{
	const struct ir_node *p = v->producer;
	if (p && p->name && *p->name)
		snprintf(buf, size, "value '%s' (output of '%s', n%d %s)", v->name, p->name, p->id, p->op_type);
	else if (p)
		snprintf(buf, size, "value '%s' (output of n%d %s)", v->name, p->id, p->op_type);
	else
		snprintf(buf, size, "value '%s'", v->name);
}

/* Holds the inferred type of a node output against the declared one. */
/* Merges the declared type dt into the inferred it; true on a contradiction. */
static bool merge_type(struct ir_type *it, const struct ir_type *dt)
{
	if (dt->kind == IR_TYPE_NONE)
		return false;
	if (it->kind == IR_TYPE_NONE || (it->kind == IR_TYPE_TENSOR && it->rank < 0 && !it->elem &&
					 dt->kind != IR_TYPE_TENSOR)) {
		ir_type_clear(it);
		ir_type_copy(it, dt);
		return false;
	}
	if (it->kind != dt->kind)
		return !(it->kind == IR_TYPE_TENSOR && dt->kind == IR_TYPE_SPARSE_TENSOR) &&
		       !(dt->kind == IR_TYPE_TENSOR && it->kind == IR_TYPE_SPARSE_TENSOR);
	if (it->kind == IR_TYPE_SEQUENCE || it->kind == IR_TYPE_OPTIONAL || it->kind == IR_TYPE_MAP) {
		if (it->kind == IR_TYPE_MAP && it->key && dt->key && it->key != dt->key)
			return true;
		if (!dt->inner)
			return false;
		if (!it->inner) {
			it->inner = calloc(1, sizeof(*it->inner));
			if (!it->inner || ir_type_copy(it->inner, dt->inner))
				return false;
			return false;
		}
		return merge_type(it->inner, dt->inner);
	}
	bool conflict = false;
	if (dt->elem && it->elem && dt->elem != it->elem)
		conflict = true;
	if (!it->elem)
		it->elem = dt->elem, it->has_elem = dt->elem != 0;
	if (dt->rank >= 0 && it->rank >= 0 && dt->rank != it->rank) {
		conflict = true;
	} else if (dt->rank >= 0 && it->rank < 0) {
		struct ir_type c;
		if (ir_type_copy(&c, dt) == 0) {
			c.elem = it->elem;
			c.has_elem = it->has_elem;
			ir_type_clear(it);
			*it = c;
		}
	} else if (dt->rank >= 0) {
		for (int k = 0; k < it->rank; k++) {
			struct ir_dim *a = &it->dims[k];
			const struct ir_dim *b = &dt->dims[k];
			if (a->kind == IR_DIM_VALUE && b->kind == IR_DIM_VALUE && a->value != b->value) {
				conflict = true;
			} else if (a->kind == IR_DIM_UNKNOWN || (a->kind == IR_DIM_PARAM && b->kind != IR_DIM_UNKNOWN &&
								 !ir_dim_equal(a, b))) {
				/* what the model says fills in what inference could not know, and
				 * its names for symbols win (as in ONNX) */
				ir_dim_clear(a);
				a->kind = b->kind;
				a->value = b->value;
				if (b->kind == IR_DIM_PARAM && !(a->param = ir_strdup(b->param)))
					a->kind = IR_DIM_UNKNOWN;
			}
		}
	}
	return conflict;
}

bool ir_type_fully_known(const struct ir_type *t)
{
	if (!t)
		return false;
	if (t->kind == IR_TYPE_SEQUENCE || t->kind == IR_TYPE_OPTIONAL || t->kind == IR_TYPE_MAP)
		return t->inner && (t->kind != IR_TYPE_MAP || t->key) && ir_type_fully_known(t->inner);
	if (t->kind != IR_TYPE_TENSOR && t->kind != IR_TYPE_SPARSE_TENSOR)
		return false;
	if (!t->elem || t->rank < 0)
		return false;
	for (int k = 0; k < t->rank; k++)
		if (t->dims[k].kind == IR_DIM_UNKNOWN)
			return false;
	return true;
}

/* Holds the inferred type of a node output against the declared one. */
static void merge_declared(struct ir_infer *x, struct ir_value *v)
{
	if (!(v->has_type_proto || v->has_vinfo))
		return;
	struct ir_type it;
	if (ir_type_copy(&it, &v->inferred)) {
		x->oom = true;
		return;
	}
	if (merge_type(&v->inferred, &v->type)) {
		/* keep what inference said, and report the declared type */
		ir_type_clear(&v->inferred);
		v->inferred = it;
		v->conflict = true;
		char what[400], a[256], b[256];
		describe(v, what, sizeof(what));
		if (x->warnings++ < 1000)
			ir_diag_warn(x->d, "%s: inferred %s but the model declares %s", what,
				     ir_type_str(&v->inferred, a, sizeof(a)), ir_type_str(&v->type, b, sizeof(b)));
		return;
	}
	ir_type_clear(&it);
	if (v->why && ir_type_fully_known(&v->inferred)) {
		free(v->why);
		v->why = NULL;
	}
}

const struct ir_function *ir_model_find_function(const struct ir_model *m, const struct ir_node *n)
{
	for (size_t i = 0; m && i < m->n_functions; i++) {
		const struct ir_function *f = &m->functions[i];
		if (ir_str_eq(f->name, n->op_type) &&
		    strcmp(f->domain ? f->domain : "", n->domain ? n->domain : "") == 0 &&
		    ir_str_eq(f->overload, n->overload))
			return f;
	}
	return NULL;
}

static void infer_graph(struct ir_infer *x, struct ir_graph *g, int n_bind, const struct ir_type *const *bind);

static void infer_call(struct ir_infer *x, struct ir_node *n, const struct ir_function *f)
{
	if (x->fn_depth >= MAX_FUNCTION_DEPTH || !f->body) {
		sx_fail(x, n, "function '%s' calls itself (or nests) more than %d deep", f->name, MAX_FUNCTION_DEPTH);
		return;
	}
	struct ir_infer sub = *x;
	sub.fn = f;
	sub.caller = n;
	sub.up = x;
	sub.fn_depth = x->fn_depth + 1;
	const struct ir_type *bind[256] = { 0 };
	int nb = f->body->n_inputs < 256 ? f->body->n_inputs : 256;
	for (int i = 0; i < nb; i++)
		bind[i] = sx_type(x, n, i);
	/* the inputs' known values go in too */
	for (int i = 0; i < nb && i < n->n_inputs; i++) {
		int c;
		const struct ir_dim *v = sx_vals(x, n, i, &c);
		struct ir_value *fi = f->body->inputs[i];
		set_known(fi, v ? c : -1, v);
	}
	infer_graph(&sub, f->body, nb, bind);
	x->arena = sub.arena;
	x->oom |= sub.oom;
	x->warnings = sub.warnings;
	for (int i = 0; i < n->n_outputs && i < f->body->n_outputs; i++) {
		struct ir_value *fo = f->body->outputs[i], *o = n->outputs[i];
		if (!o)
			continue;
		sx_out_type(x, n, i, ir_value_type(fo));
		if (fo->why)
			set_why(o, fo->why);
		if (fo->n_known >= 0)
			set_known(o, fo->n_known, fo->known);
	}
}

static void infer_node(struct ir_infer *x, struct ir_node *n)
{
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k])
			clear_value(n->outputs[k]);
	if (n->op != IR_OP_UNKNOWN && x->table[n->op]) {
		x->table[n->op](x, n);
	} else if (n->op == IR_OP_ogsh_QConv || n->op == IR_OP_ogsh_QGemm || n->op == IR_OP_ogsh_MatMulW4) {
		/* the GPU planner's islands (exec/qfuse.c) are made with their
		 * output's type, shape included: it stands */
		for (int k = 0; k < n->n_outputs; k++)
			if (n->outputs[k] && n->outputs[k]->type.kind == IR_TYPE_TENSOR)
				sx_out_type(x, n, k, &n->outputs[k]->type);
	} else {
		/* an op ogsh has no shape function for, or does not know, that the
		 * model defines as a function: its body says */
		const struct ir_function *f = ir_model_find_function(x->m, n);
		if (f)
			infer_call(x, n, f);
		for (int k = 0; !f && k < n->n_outputs; k++)
			if (n->outputs[k]) {
				if (n->op == IR_OP_UNKNOWN)
					sx_out_unknown(x, n, k, 0, "'%s%s%s' is not an op ogsh knows", n->domain && *n->domain ? n->domain : "",
						       n->domain && *n->domain ? ":" : "", n->op_type);
				else if (ir_ops[n->op].domain[0])
					sx_out_unknown(x, n, k, 0, "ogsh infers no shapes for %s ops", ir_ops[n->op].domain);
				else
					sx_out_unknown(x, n, k, 0, "ogsh has no shape function for %s", n->op_type);
			}
	}
	for (int k = 0; k < n->n_outputs; k++) {
		struct ir_value *v = n->outputs[k];
		if (!v)
			continue;
		if (v->inferred.kind == IR_TYPE_NONE) {
			v->inferred.kind = IR_TYPE_TENSOR;
			v->inferred.rank = -1;
			if (!v->why)
				sx_out_why(x, n, k, "its shape function says nothing about output %d", k);
		}
		merge_declared(x, v);
	}
}

static void infer_graph(struct ir_infer *x, struct ir_graph *g, int n_bind, const struct ir_type *const *bind)
{
	for (size_t i = 0; i < g->n_values; i++) {
		struct ir_value *v = g->values[i];
		int keep_known = v->is_input && g->is_function;   /* set by the caller */
		struct ir_dim *kn = keep_known ? v->known : NULL;
		int nk = keep_known ? v->n_known : -1;
		if (keep_known) {
			v->known = NULL;
			v->n_known = -1;
		}
		clear_value(v);
		v->known = kn;
		v->n_known = nk;
	}
	for (int i = 0; i < g->n_inputs; i++) {
		struct ir_value *v = g->inputs[i];
		const struct ir_type *b = i < n_bind ? bind[i] : NULL;
		if (b)
			ir_type_copy(&v->inferred, b);
		else if (v->type.kind != IR_TYPE_NONE)
			ir_type_copy(&v->inferred, &v->type);
		else if (v->init)
			type_from_tensor(&v->inferred, v->init->dtype, v->init->rank, v->init->dims);
		if (v->inferred.kind == IR_TYPE_NONE && !v->init)
			v->why = ir_fmt("graph input '%s' has no declared type", v->name);
	}
	for (int i = 0; i < g->n_inits; i++) {
		struct ir_value *v = g->inits[i];
		if (v->is_input && v->inferred.kind != IR_TYPE_NONE)
			continue;   /* an input with a default: its declared type */
		type_from_tensor(&v->inferred, v->init->dtype, v->init->rank, v->init->dims);
	}
	for (int i = 0; i < g->n_sparse_inits; i++) {
		struct ir_value *v = g->sparse_inits[i];
		if (v->inferred.kind != IR_TYPE_NONE)
			continue;
		const struct ir_sparse *s = v->sparse_init;
		type_from_tensor(&v->inferred, s->values->dtype, s->rank, s->dims);
		v->inferred.kind = IR_TYPE_SPARSE_TENSOR;
	}
	for (size_t i = 0; i < g->n_values; i++) {
		struct ir_value *v = g->values[i];
		if (!v->outer)
			continue;
		const struct ir_type *t = ir_value_type(v->outer);
		if (t->kind != IR_TYPE_NONE)
			ir_type_copy(&v->inferred, t);
		if (v->outer->why)
			v->why = ir_strdup(v->outer->why);
		if (v->outer->n_known >= 0)
			set_known(v, v->outer->n_known, v->outer->known);
	}
	ir_for_each_node(g, n) {
		if (ir_interrupted || x->oom)
			return;
		infer_node(x, n);
	}
}

void sx_infer_subgraph(struct ir_infer *x, struct ir_graph *g, int n_in, const struct ir_type *const *in_types)
{
	infer_graph(x, g, n_in, in_types);
}

int ir_infer(struct ir_model *m, struct ir_diag *d)
{
	struct ir_infer x = { .m = m, .d = d };
	build_table(&x);
	if (m->graph)
		infer_graph(&x, m->graph, 0, NULL);
	for (struct arena_blk *b = x.arena, *nb; b; b = nb) {
		nb = b->next;
		free(b);
	}
	if (ir_interrupted)
		return ir_diag_err(d, IR_EINTR, "shape inference interrupted");
	if (x.oom)
		return ir_diag_err(d, IR_ENOMEM, "out of memory during shape inference");
	if (x.warnings > 1000)
		ir_diag_warn(d, "%d more shape warnings not shown", x.warnings - 1000);
	return 0;
}
