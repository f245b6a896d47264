/*
 * cost.c - the cost model: what each node costs (parameters, MACs, FLOPs,
 * bytes read and written) from the shapes inference found, and what the
 * main graph costs (per op type, totals, constants by dtype, activation
 * memory and its peak for the node order). docs/costs.md is the reference
 * for the counting conventions; the per-op counts here must stay in step
 * with it.
 *
 * Counts are doubles (exact below 2^53; a hostile shape makes them large,
 * or infinite, which counts as not known: nothing overflows). A symbolic
 * dim is evaluated with every symbol taken as 1 and the symbols are
 * recorded; an unknown dim makes the node's cost unknown, with the reason.
 *
 * To add a cost function for an op: write it in the section of its family
 * below and list it in that family's table (struct cx_entry: the op, the
 * function, and for the simple per-element functions the FLOPs per element
 * and what they are); tests/costs/test_cost.c checks that every op of the
 * op table has one.
 */
#include "ir_private.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_SUB_DEPTH 64

/* ------------------------------------------------------------------------ */
/* The context of one node's count                                           */
/* ------------------------------------------------------------------------ */

/* Blocks of memory that hold the strings and arrays of the node costs of
 * one ir_stats (freed all at once with it). */
struct ablk {
	struct ablk *next;
	size_t used, size;
	max_align_t data[];
};

struct cx {
	const struct ir_model *m;
	struct ablk **arena;     /* NULL: every string is malloc'd (ir_node_cost) */
	bool unknown;
	char *why;               /* the first reason (allocated) */
	bool oom;
	double macs, flops;
	double extra_read, extra_written;   /* traffic inside subgraphs */
	double sub_params, sub_weight_bytes;
	char how[2048];
	size_t how_len;
	char **syms;             /* symbols taken as 1 (strings allocated, unsorted) */
	size_t n_syms, cap_syms;
	int depth;               /* subgraph nesting */
};

struct cx_entry;
typedef void (*cx_fn)(struct cx *c, const struct ir_node *n, const struct cx_entry *e);

/* One row of a family's table. `per` and `what` are for the functions that
 * count a fixed number of FLOPs per element. */
struct cx_entry {
	int op;
	cx_fn fn;
	double per;
	const char *what;
};

/* Zeroed memory from the arena, or malloc'd without one. */
static void *cx_mem(struct cx *c, size_t size)
{
	if (!size)
		size = 1;
	if (!c->arena) {
		void *p = calloc(1, size);
		if (!p)
			c->oom = true;
		return p;
	}
	size = (size + 15) & ~(size_t)15;
	struct ablk *b = *c->arena;
	if (!b || b->size - b->used < size) {
		size_t bs = size > 262144 ? size : 262144;
		b = malloc(sizeof(*b) + bs);
		if (!b) {
			c->oom = true;
			return NULL;
		}
		b->next = *c->arena;
		b->used = 0;
		b->size = bs;
		*c->arena = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += size;
	memset(p, 0, size);
	return p;
}

static char *cx_strn(struct cx *c, const char *s, size_t len)
{
	char *d = cx_mem(c, len + 1);
	if (d)
		memcpy(d, s, len);
	return d;
}

static char *cx_str(struct cx *c, const char *s)
{
	return cx_strn(c, s, strlen(s));
}

/* Frees what cx_mem gave when there is no arena. */
static void cx_free(struct cx *c, void *p)
{
	if (!c->arena)
		free(p);
}

static void cx_unknown(struct cx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cx_unknown(struct cx *c, const char *fmt, ...)
{
	if (c->unknown)
		return;
	c->unknown = true;
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cx_free(c, c->why);
	c->why = cx_str(c, buf);
}

static void how(struct cx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void how(struct cx *c, const char *fmt, ...)
{
	if (c->how_len >= sizeof(c->how) - 1)
		return;
	if (c->how_len) {
		c->how[c->how_len++] = ';';
		if (c->how_len < sizeof(c->how) - 1)
			c->how[c->how_len++] = ' ';
		c->how[c->how_len] = 0;
	}
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(c->how + c->how_len, sizeof(c->how) - c->how_len, fmt, ap);
	va_end(ap);
	if (k > 0)
		c->how_len += (size_t)k;
	if (c->how_len > sizeof(c->how) - 1)
		c->how_len = sizeof(c->how) - 1;
}

/* A count as text: an integer when it is one, else %.4g. */
static const char *num(double v, char *buf, size_t size)
{
	if (v >= 0 && v < 9007199254740992.0 && v == floor(v))
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.4g", v);
	return buf;
}

#define N1(v) num((v), nb1, sizeof(nb1))
#define N2(v) num((v), nb2, sizeof(nb2))
#define N3(v) num((v), nb3, sizeof(nb3))
#define NUMBUFS char nb1[40], nb2[40], nb3[40]; (void)nb1; (void)nb2; (void)nb3

#define MAX_SYMS 64   /* symbols listed per node and per stats; hostile models have thousands */

static void add_sym(struct cx *c, const char *s, size_t len)
{
	if (c->n_syms >= MAX_SYMS)
		return;
	for (size_t i = 0; i < c->n_syms; i++)
		if (strlen(c->syms[i]) == len && memcmp(c->syms[i], s, len) == 0)
			return;
	if (ir_grow(&c->syms, &c->cap_syms, c->n_syms + 1, sizeof(*c->syms))) {
		c->oom = true;
		return;
	}
	char *d = cx_strn(c, s, len);
	if (d)
		c->syms[c->n_syms++] = d;
}

static void merge_syms(struct cx *c, char **syms, int n)
{
	for (int i = 0; i < n; i++)
		add_sym(c, syms[i], strlen(syms[i]));
}

static void cx_clear(struct cx *c)
{
	cx_free(c, c->why);
	for (size_t i = 0; i < c->n_syms; i++)
		cx_free(c, c->syms[i]);
	free(c->syms);
	memset(c, 0, sizeof(*c));
}

/* Ready for the next node: keeps the model, the arena and the symbol array. */
static void cx_reset(struct cx *c)
{
	struct cx k = { .m = c->m, .arena = c->arena, .syms = c->syms, .cap_syms = c->cap_syms, .depth = c->depth };
	cx_free(c, c->why);
	for (size_t i = 0; i < c->n_syms; i++)
		cx_free(c, c->syms[i]);
	bool oom = c->oom;
	*c = k;
	c->oom = oom;
}

/* ------------------------------------------------------------------------ */
/* Dims: symbols taken as 1                                                  */
/* ------------------------------------------------------------------------ */

static bool digits(const char *s, size_t len, double *v)
{
	if (!len || len > 18)
		return false;
	double x = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return true;
}

/*
 * One term "2*batch*seq" (no sign) into *coef, its symbols into spans.
 * false when it is not of that form.
 */
struct span { const char *s; size_t len; };

static bool parse_term(const char *s, size_t len, double *coef, struct span *sp, int *nsp, int max)
{
	*coef = 1;
	for (;;) {
		const char *star = memchr(s, '*', len);
		size_t fl = star ? (size_t)(star - s) : len;
		const char *f = s;
		size_t tl = fl;
		while (tl && *f == ' ')
			f++, tl--;
		while (tl && f[tl - 1] == ' ')
			tl--;
		if (!tl)
			return false;
		double v;
		if (digits(f, tl, &v)) {
			*coef *= v;
		} else {
			for (size_t i = 0; i < tl; i++)
				if (f[i] == ' ')
					return false;
			if (*nsp >= max)
				return false;
			sp[*nsp].s = f;
			sp[(*nsp)++].len = tl;
		}
		if (!star)
			return true;
		len -= fl + 1;
		s += fl + 1;
	}
}

/*
 * The value of a symbolic dim with every symbol taken as 1: the param is
 * read as ir_dim_* write it ("2*batch*seq + 1"); anything else is one
 * opaque symbol, so 1. Records the symbols.
 */
static double eval_param(struct cx *c, const char *p)
{
	struct span sp[64];
	int nsp = 0;
	size_t len = strlen(p);
	const char *s = p;
	double sign = 1, total = 0;
	bool ok = len > 0;
	if (len > 1 && s[0] == '-' && s[1] != ' ') {
		sign = -1;
		s++;
		len--;
	}
	while (ok) {
		const char *plus = NULL, *minus = NULL;
		for (size_t i = 0; i + 2 < len; i++)
			if (s[i] == ' ' && s[i + 2] == ' ' && (s[i + 1] == '+' || s[i + 1] == '-')) {
				if (s[i + 1] == '+')
					plus = s + i;
				else
					minus = s + i;
				break;
			}
		const char *sep = plus ? plus : minus;
		size_t tl = sep ? (size_t)(sep - s) : len;
		double coef;
		if (!parse_term(s, tl, &coef, sp, &nsp, 64)) {
			ok = false;
			break;
		}
		total += sign * coef;
		if (!sep)
			break;
		sign = sep[1] == '+' ? 1 : -1;
		len -= tl + 3;
		s = sep + 3;
	}
	if (!ok) {
		add_sym(c, p, strlen(p));
		return 1;
	}
	for (int i = 0; i < nsp; i++)
		add_sym(c, sp[i].s, sp[i].len);
	return total;
}

/* ------------------------------------------------------------------------ */
/* Values: shapes, sizes, constness                                          */
/* ------------------------------------------------------------------------ */

/* What the cost model knows of a value. */
struct shp {
	bool ok;                 /* rank and dims known */
	bool bytes_ok;
	int rank, elem;
	double d[IR_MAX_RANK];
	double numel, bytes;
	char why[600];           /* when !ok or !bytes_ok */
};

static const struct ir_value *defining(const struct ir_value *v)
{
	for (int k = 0; v && v->outer && k < 256; k++)
		v = v->outer;
	return v;
}

static bool is_const(const struct ir_value *v)
{
	return v && ir_value_is_const(defining(v));
}

static const char *vname(const struct ir_value *v)
{
	return v->name ? v->name : "?";
}

static bool type_complete(const struct ir_type *t)
{
	if (t->kind != IR_TYPE_TENSOR || t->rank < 0)
		return false;
	for (int k = 0; k < t->rank; k++)
		if (t->dims[k].kind == IR_DIM_UNKNOWN)
			return false;
	return true;
}

/* Why a value's shape is (partly) unknown: its own reason, else that of the
 * first input of its producer not fully known, and so on up. */
static void why_unknown(const struct ir_value *v, char *buf, size_t size)
{
	/* inference's generic reason: the input it means says more */
	static const char generic[] = "an input's shape is not known";
	const char *first = NULL;
	for (int step = 0; v && step < 64; step++) {
		if (v->why && strcmp(v->why, generic) != 0) {
			snprintf(buf, size, "%s", v->why);
			return;
		}
		if (v->why && !first)
			first = v->why;
		if (v->is_input && !v->producer) {
			const struct ir_type *t = ir_value_type(v);
			snprintf(buf, size, "graph input '%s' %s", v->name ? v->name : "?",
				 t->kind == IR_TYPE_NONE ? "has no type" : t->rank < 0 ? "has no shape" : "does not declare it");
			return;
		}
		const struct ir_value *next = NULL;
		for (int i = 0; v->producer && i < v->producer->n_inputs && !next; i++) {
			const struct ir_value *in = v->producer->inputs[i];
			if (in && !ir_value_is_const(in) && !type_complete(ir_value_type(in)))
				next = in;
		}
		if (!next)
			break;
		v = next;
	}
	snprintf(buf, size, "%s", first ? first : "inference could not tell");
}

static void probe(struct cx *c, const struct ir_value *v, struct shp *s)
{
	memset(s, 0, sizeof(*s));
	const struct ir_value *dv = defining(v);
	const struct ir_tensor *t = dv && (dv->init || dv->producer) && ir_value_is_const(dv) ? ir_value_const(dv) : NULL;
	const struct ir_type *ty = ir_value_type(v);
	for (const struct ir_value *w = v; ty->kind == IR_TYPE_NONE && w->outer; ) {
		w = w->outer;
		ty = ir_value_type(w);
	}
	if (t || (dv && dv->sparse_init)) {
		/* a constant: its tensor says exactly what it is */
		int rank = t ? t->rank : dv->sparse_init->rank;
		const int64_t *dims = t ? t->dims : dv->sparse_init->dims;
		if (rank > IR_MAX_RANK) {
			snprintf(s->why, sizeof(s->why), "'%s' has rank %d (more than %d)", vname(v), rank, IR_MAX_RANK);
			return;
		}
		s->rank = rank;
		s->elem = t ? t->dtype : dv->sparse_init->values ? dv->sparse_init->values->dtype : 0;
		s->numel = 1;
		for (int k = 0; k < rank; k++) {
			s->d[k] = (double)dims[k];
			s->numel *= s->d[k];
		}
	} else {
		if (ty->kind == IR_TYPE_OPTIONAL && ty->inner)
			ty = ty->inner;
		if (ty->kind == IR_TYPE_SEQUENCE || ty->kind == IR_TYPE_MAP) {
			snprintf(s->why, sizeof(s->why), "'%s' is a %s: ogsh does not track its size", vname(v),
				 ty->kind == IR_TYPE_SEQUENCE ? "sequence" : "map");
			return;
		}
		if (ty->kind == IR_TYPE_NONE || ty->kind == IR_TYPE_OPTIONAL || ty->rank < 0) {
			char w[400];
			why_unknown(v, w, sizeof(w));
			snprintf(s->why, sizeof(s->why), "the shape of '%s' is not known (%s)", vname(v), w);
			return;
		}
		if (ty->rank > IR_MAX_RANK) {
			snprintf(s->why, sizeof(s->why), "'%s' has rank %d (more than %d)", vname(v), ty->rank, IR_MAX_RANK);
			return;
		}
		s->rank = ty->rank;
		s->elem = ty->elem;
		s->numel = 1;
		for (int k = 0; k < ty->rank; k++) {
			const struct ir_dim *dm = &ty->dims[k];
			if (dm->kind == IR_DIM_VALUE && dm->value >= 0) {
				s->d[k] = (double)dm->value;
			} else if (dm->kind == IR_DIM_PARAM && dm->param) {
				s->d[k] = eval_param(c, dm->param);
				if (s->d[k] < 0) {
					snprintf(s->why, sizeof(s->why), "dim %d of '%s' ('%s') is negative with its symbols taken as 1",
						 k, vname(v), dm->param);
					return;
				}
			} else {
				char w[400];
				why_unknown(v, w, sizeof(w));
				snprintf(s->why, sizeof(s->why), "dim %d of '%s' is not known (%s)", k, vname(v), w);
				return;
			}
			s->numel *= s->d[k];
		}
	}
	s->ok = true;
	if (!isfinite(s->numel)) {
		s->ok = false;
		snprintf(s->why, sizeof(s->why), "'%s' has too many elements to count", vname(v));
		return;
	}
	if (!s->elem) {
		snprintf(s->why, sizeof(s->why), "the element type of '%s' is not known", vname(v));
	} else if (s->elem == IR_STRING) {
		snprintf(s->why, sizeof(s->why), "'%s' holds strings, whose size is not known", vname(v));
	} else {
		int bits = ir_dtype_bits(s->elem);
		if (bits <= 0) {
			snprintf(s->why, sizeof(s->why), "the element type of '%s' has no size", vname(v));
		} else {
			s->bytes = ceil(s->numel * bits / 8.0);
			s->bytes_ok = true;
		}
	}
}

static const struct ir_value *in_v(const struct ir_node *n, int i)
{
	return i >= 0 && i < n->n_inputs ? n->inputs[i] : NULL;
}

static const struct ir_value *out_v(const struct ir_node *n, int i)
{
	return i >= 0 && i < n->n_outputs ? n->outputs[i] : NULL;
}

static bool has_in(const struct ir_node *n, int i)
{
	return in_v(n, i) != NULL;
}

/* Input i's shape; false (the node's cost unknown) when not known. */
static bool in_shape(struct cx *c, const struct ir_node *n, int i, struct shp *s)
{
	const struct ir_value *v = in_v(n, i);
	if (!v) {
		cx_unknown(c, "input %d, which the count needs, is absent", i);
		return false;
	}
	probe(c, v, s);
	if (!s->ok)
		cx_unknown(c, "%s", s->why);
	return s->ok;
}

static bool out_shape(struct cx *c, const struct ir_node *n, int i, struct shp *s)
{
	const struct ir_value *v = out_v(n, i);
	if (!v) {
		cx_unknown(c, "output %d, which the count needs, is absent", i);
		return false;
	}
	probe(c, v, s);
	if (!s->ok)
		cx_unknown(c, "%s", s->why);
	return s->ok;
}

static bool in_numel(struct cx *c, const struct ir_node *n, int i, double *out)
{
	struct shp s;
	if (!in_shape(c, n, i, &s))
		return false;
	*out = s.numel;
	return true;
}

static bool out_numel(struct cx *c, const struct ir_node *n, int i, double *out)
{
	struct shp s;
	if (!out_shape(c, n, i, &s))
		return false;
	*out = s.numel;
	return true;
}

/* The single integer a value holds when known (a constant, or values
 * inference tracked). */
static bool known_int(const struct ir_value *v, int64_t *out)
{
	for (int k = 0; v && k < 256; k++, v = v->outer) {
		const struct ir_tensor *t = ir_value_const(v);
		if (t && t->numel == 1 && ir_tensor_data(t) && (ir_dtype_is_int(t->dtype) || t->dtype == IR_BOOL))
			return ir_elem_to_i64(t->dtype, ir_tensor_data(t), 0, out);
		if (v->n_known == 1 && v->known && v->known[0].kind == IR_DIM_VALUE) {
			*out = v->known[0].value;
			return true;
		}
		if (!v->outer)
			break;
	}
	return false;
}

static int attr_ints(const struct ir_node *n, const char *name, int64_t *out, int max)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a || a->type != IR_ATTR_INTS)
		return -1;
	int k = a->n < (size_t)max ? (int)a->n : max;
	for (int i = 0; i < k; i++)
		out[i] = a->ints[i];
	return k;
}

static const char *attr_str(const struct ir_node *n, const char *name, const char *dflt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a || a->type != IR_ATTR_STRING || !a->s.data)
		return dflt;
	return a->s.data;
}

static double prod(const double *d, int from, int to)
{
	double p = 1;
	for (int k = from; k < to; k++)
		p *= d[k];
	return p;
}

/* "3x7x7" */
static const char *dims_x(const double *d, int from, int to, char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = 0;
	if (from >= to) {
		snprintf(buf, size, "1");
		return buf;
	}
	for (int k = from; k < to && o + 1 < size; k++) {
		char t[40];
		int w = snprintf(buf + o, size - o, "%s%s", k > from ? "x" : "", num(d[k], t, sizeof(t)));
		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}

static int axis_of(int64_t axis, int rank)
{
	if (axis < -rank || axis >= rank)
		return -1;
	return (int)(axis < 0 ? axis + rank : axis);
}

/* ------------------------------------------------------------------------ */
/* What constant inputs are                                                  */
/* ------------------------------------------------------------------------ */

/* Inputs read as shapes, axes, indices, sizes or scalar settings, by op (a
 * bit per input slot). */
static const struct { int op; unsigned slots; } shape_inputs[] = {
	{ IR_OP_Reshape, 1u << 1 }, { IR_OP_Expand, 1u << 1 }, { IR_OP_Tile, 1u << 1 | 1u << 2 },
	{ IR_OP_Slice, 0x1e }, { IR_OP_Pad, 1u << 1 | 1u << 2 | 1u << 3 }, { IR_OP_Unsqueeze, 1u << 1 },
	{ IR_OP_Squeeze, 1u << 1 }, { IR_OP_Split, 1u << 1 }, { IR_OP_TopK, 1u << 1 },
	{ IR_OP_Resize, 1u << 1 | 1u << 2 | 1u << 3 }, { IR_OP_Upsample, 1u << 1 },
	{ IR_OP_ConstantOfShape, 1u << 0 }, { IR_OP_OneHot, 1u << 1 | 1u << 2 }, { IR_OP_CumSum, 1u << 1 },
	{ IR_OP_CumProd, 1u << 1 }, { IR_OP_Trilu, 1u << 1 }, { IR_OP_Gather, 1u << 1 },
	{ IR_OP_GatherElements, 1u << 1 }, { IR_OP_GatherND, 1u << 1 }, { IR_OP_Scatter, 1u << 1 },
	{ IR_OP_ScatterElements, 1u << 1 }, { IR_OP_ScatterND, 1u << 1 }, { IR_OP_Compress, 1u << 1 },
	{ IR_OP_CenterCropPad, 1u << 1 }, { IR_OP_Range, 0x7 }, { IR_OP_Clip, 1u << 1 | 1u << 2 },
	{ IR_OP_Dropout, 1u << 1 | 1u << 2 }, { IR_OP_NonMaxSuppression, 1u << 2 | 1u << 3 | 1u << 4 },
	{ IR_OP_Loop, 1u << 0 | 1u << 1 }, { IR_OP_If, 1u << 0 }, { IR_OP_Col2Im, 1u << 1 | 1u << 2 },
	{ IR_OP_DFT, 1u << 1 | 1u << 2 }, { IR_OP_STFT, 1u << 1 | 1u << 2 | 1u << 3 },
	{ IR_OP_RoiAlign, 1u << 2 }, { IR_OP_MaxUnpool, 1u << 2 }, { IR_OP_ReverseSequence, 1u << 1 },
	{ IR_OP_AffineGrid, 1u << 1 }, { IR_OP_MelWeightMatrix, 0x1f }, { IR_OP_HannWindow, 1u << 0 },
	{ IR_OP_HammingWindow, 1u << 0 }, { IR_OP_BlackmanWindow, 1u << 0 }, { IR_OP_Attention, 1u << 6 },
	{ IR_OP_TensorScatter, 1u << 2 }, { IR_OP_RotaryEmbedding, 1u << 3 }, { IR_OP_Bernoulli, 0 },
	{ IR_OP_Multinomial, 0 }, { IR_OP_Einsum, 0 }, { IR_OP_LSTM, 1u << 4 }, { IR_OP_GRU, 1u << 4 },
	{ IR_OP_RNN, 1u << 4 }, { IR_OP_NegativeLogLikelihoodLoss, 1u << 1 },
	{ IR_OP_SoftmaxCrossEntropyLoss, 1u << 1 }, { IR_OP_SequenceAt, 1u << 1 },
	{ IR_OP_SequenceErase, 1u << 1 }, { IR_OP_SequenceInsert, 1u << 2 }, { IR_OP_SplitToSequence, 1u << 1 },
};

const char *ir_const_role_name(int role)
{
	switch (role) {
	case IR_ROLE_PARAM: return "param";
	case IR_ROLE_BUFFER: return "buffer";
	case IR_ROLE_CONST: return "constant";
	default: return "";
	}
}

/* What input `slot` of n is, when it is a constant (see docs/costs.md). */
static int input_role(const struct ir_node *n, int slot, const struct ir_value *v, int elem, double numel)
{
	if (!is_const(v))
		return IR_ROLE_NONE;
	int op = n->op;
	if (op == IR_OP_BatchNormalization && (slot == 3 || slot == 4))
		return IR_ROLE_BUFFER;
	if (op == IR_OP_RotaryEmbedding && (slot == 1 || slot == 2))
		return IR_ROLE_BUFFER;
	if (op >= 0 && (ir_ops[op].flags & IR_OPF_REDUCE) && slot == 1)
		return IR_ROLE_CONST;
	for (size_t i = 0; op >= 0 && i < sizeof(shape_inputs) / sizeof(shape_inputs[0]); i++)
		if (shape_inputs[i].op == op)
			if (slot < 32 && (shape_inputs[i].slots >> slot) & 1)
				return IR_ROLE_CONST;
	if (elem == IR_INT64 || elem == IR_UINT64 || elem == IR_BOOL || elem == IR_STRING)
		return IR_ROLE_CONST;
	if (op >= 0 && (ir_ops[op].flags & IR_OPF_ELEMENTWISE) && op != IR_OP_PRelu && numel <= 1)
		return IR_ROLE_CONST;
	return IR_ROLE_PARAM;
}

/* ------------------------------------------------------------------------ */
/* Per-element families                                                      */
/* ------------------------------------------------------------------------ */

/* e->per FLOPs per element of output 0. */
static void per_out(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	c->flops = e->per * y;
	if (e->per == 0)
		how(c, "no arithmetic (%s)", e->what);
	else
		how(c, "%s FLOP%s per output element (%s) x %s elements", N1(e->per), e->per == 1 ? "" : "s", e->what, N2(y));
}

/* e->per FLOPs per element of input 0 (plus nothing per output). */
static void per_in(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double x;
	if (!in_numel(c, n, 0, &x))
		return;
	c->flops = e->per * x;
	how(c, "%s FLOP%s per input element (%s) x %s elements", N1(e->per), e->per == 1 ? "" : "s", e->what, N2(x));
}

/* Sum, Max, Min, Mean: one op per extra input per element (Mean: and a divide). */
static void variadic(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	int k = 0;
	for (int i = 0; i < n->n_inputs; i++)
		k += n->inputs[i] != NULL;
	double per = k > 1 ? k - 1 : 0;
	if (n->op == IR_OP_Mean && k > 1)
		per += 1;
	c->flops = per * y;
	how(c, "%s FLOPs per output element (%s, %d inputs) x %s elements", N1(per), e->what, k, N2(y));
}

static void dropout(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	int64_t train = 0;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	if (has_in(n, 2) && known_int(in_v(n, 2), &train) && train) {
		c->flops = 3 * y;
		how(c, "training mode: 3 FLOPs per element (random, compare, scale) x %s", N1(y));
	} else {
		how(c, "inference: no arithmetic (a copy)");
	}
}

static void gelu(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	bool tanh_form = strcmp(attr_str(n, "approximate", "none"), "tanh") == 0;
	double per = tanh_form ? 9 : 5;
	c->flops = per * y;
	how(c, "%s FLOPs per element (%s) x %s", N1(per),
	    tanh_form ? "tanh form: cube, scale, add, scale, tanh, add, two multiplies" : "erf form: scale, erf, add, two multiplies",
	    N2(y));
}

/* Softmax and LogSoftmax: max, subtract, exp, sum, divide (log-subtract). */
static void softmax(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	per_out(c, n, e);
}

static void batchnorm(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	bool train = ir_node_attr_int(n, "training_mode", 0) != 0;
	if (train) {
		c->flops = 6 * y;
		how(c, "training mode: 6 FLOPs per element (mean, variance, scale and shift) x %s", N1(y));
	} else {
		c->flops = 2 * y;
		how(c, "2 FLOPs per element (a multiply and an add: the statistics fold into a scale and a shift) x %s",
		    N1(y));
	}
}

/* Normalizations over groups of elements: per element, and per group
 * (epsilon add, square root, reciprocal). */
static void normalization(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	struct shp x;
	if (!in_shape(c, n, 0, &x))
		return;
	double groups = 1, per = e->per;
	switch (n->op) {
	case IR_OP_LayerNormalization: case IR_OP_ogsh_LayerNormalization: {
		int a = axis_of(ir_node_attr_int(n, "axis", -1), x.rank);
		groups = a < 0 ? 1 : prod(x.d, 0, a);
		if (!has_in(n, 2))
			per -= 1;
		break;
	}
	case IR_OP_RMSNormalization: {
		int a = axis_of(ir_node_attr_int(n, "axis", -1), x.rank);
		groups = a < 0 ? 1 : prod(x.d, 0, a);
		break;
	}
	case IR_OP_InstanceNormalization:
		groups = x.rank >= 2 ? x.d[0] * x.d[1] : 1;
		break;
	case IR_OP_GroupNormalization:
		groups = (x.rank >= 1 ? x.d[0] : 1) * (double)ir_node_attr_int(n, "num_groups", 1);
		break;
	case IR_OP_MeanVarianceNormalization: {
		int64_t axes[IR_MAX_RANK];
		int na = attr_ints(n, "axes", axes, IR_MAX_RANK);
		if (na < 0) {
			axes[0] = 0, axes[1] = 2, axes[2] = 3;
			na = 3;
		}
		double red = 1;
		for (int i = 0; i < na; i++) {
			int a = axis_of(axes[i], x.rank);
			if (a >= 0)
				red *= x.d[a];
		}
		groups = red > 0 ? x.numel / red : 0;
		break;
	}
	case IR_OP_LpNormalization: {
		int a = axis_of(ir_node_attr_int(n, "axis", -1), x.rank);
		groups = a < 0 || x.d[a] == 0 ? 0 : x.numel / x.d[a];
		break;
	}
	default:
		break;
	}
	double per_group = n->op == IR_OP_LpNormalization ? 1 : 3;
	c->flops = per * x.numel + per_group * groups;
	how(c, "%s FLOPs per element (%s) x %s + %s per group x %s groups", N1(per), e->what, N2(x.numel),
	    n->op == IR_OP_LpNormalization ? "1 (root)" : "3 (epsilon, root, reciprocal)", N3(groups));
}

static void lrn(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	double size = (double)ir_node_attr_int(n, "size", 1);
	double per = 2 * size + 4;
	c->flops = per * y;
	how(c, "%s FLOPs per element (a square and an add per window element of size %s, then scale, bias, power, "
	    "divide) x %s", N1(per), N2(size), N3(y));
}

/* ------------------------------------------------------------------------ */
/* Data movement (tensor family)                                             */
/* ------------------------------------------------------------------------ */

static void moves(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)n;
	how(c, "no arithmetic (%s)", e->what);
}

static void constant(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)n;
	(void)e;
	how(c, "a constant: its data is a weight of the model, nothing is computed or moved");
}

static void scatter(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	const char *red = attr_str(n, "reduction", "none");
	if (strcmp(red, "none") == 0) {
		how(c, "no arithmetic (copies the data, then writes the updates)");
		return;
	}
	double u;
	if (!in_numel(c, n, 2, &u))
		return;
	c->flops = u;
	how(c, "1 FLOP per update element (reduction %s) x %s", red, N1(u));
}

static void topk(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x, y;
	if (!in_shape(c, n, 0, &x) || !out_shape(c, n, 0, &y))
		return;
	int a = axis_of(ir_node_attr_int(n, "axis", -1), y.rank);
	double k = a >= 0 ? y.d[a] : 1;
	double per = k > 1 ? ceil(log2(k + 1)) : 1;
	c->flops = per * x.numel;
	how(c, "%s compares per input element (a heap of k=%s) x %s", N1(per), N2(k), N3(x.numel));
}

static void unique(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	double x;
	if (!in_numel(c, n, 0, &x))
		return;
	double per = x > 1 ? ceil(log2(x)) : 1;
	c->flops = per * x;
	how(c, "a sort: %s compares per element x %s", N1(per), N2(x));
}

/* Resize and Upsample: interpolation taps per output element. */
static void resize(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x, y;
	if (!in_shape(c, n, 0, &x) || !out_shape(c, n, 0, &y))
		return;
	const char *mode = attr_str(n, "mode", "nearest");
	int axes = 0;
	for (int k = 0; k < x.rank && k < y.rank; k++)
		axes += x.d[k] != y.d[k];
	double taps = 1;
	if (strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0)
		taps = pow(2, axes);
	else if (strcmp(mode, "cubic") == 0 || strcmp(mode, "bicubic") == 0)
		taps = pow(4, axes);
	double per = taps > 1 ? 2 * taps - 1 : 0;
	c->flops = per * y.numel;
	how(c, "mode %s over %d resized axes: %s FLOPs per output element (%s taps: a multiply each, adds between) x %s",
	    mode, axes, N1(per), N2(taps), N3(y.numel));
}

static void range(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	per_out(c, n, e);
}

static void nonzero(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	per_in(c, n, e);
}

/* ------------------------------------------------------------------------ */
/* Neural-network ops                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv: as onnx-tool
 * counts them, output elements x the product of W's dims after the first
 * (C_in/group x kernel for Conv; C_out/group x kernel for ConvTranspose)
 * MACs, plus one MAC per output element for a bias.
 */
static void conv_like(struct cx *c, const struct ir_node *n, int w_in, int bias_in, double extra_per_out,
		      const char *extra_what)
{
	NUMBUFS;
	struct shp y, w;
	if (!out_shape(c, n, 0, &y) || !in_shape(c, n, w_in, &w))
		return;
	if (w.rank < 1) {
		cx_unknown(c, "the weight is a scalar");
		return;
	}
	char kd[200];
	double k = prod(w.d, 1, w.rank);
	double mac = y.numel * k;
	bool bias = bias_in >= 0 && has_in(n, bias_in);
	c->macs = mac + (bias ? y.numel : 0);
	c->flops = 2 * mac + (bias ? y.numel : 0) + extra_per_out * y.numel;
	how(c, "%s output elements x %s (W dims after the first: %s) = %s MACs", N1(y.numel), N2(k),
	    dims_x(w.d, 1, w.rank, kd, sizeof(kd)), N3(mac));
	if (n->op == IR_OP_ConvTranspose)
		how(c, "counted per output element as onnx-tool does (for stride > 1 this is more than the "
		    "multiply-adds done: input elements x W dims after the first)");
	if (bias)
		how(c, "bias: 1 MAC and 1 FLOP per output element (%s)", N1(y.numel));
	else
		how(c, "no bias");
	if (extra_per_out)
		how(c, "%s: %s FLOPs per output element", extra_what, N1(extra_per_out));
	how(c, "FLOPs: 2 per multiply-add");
}

static void conv(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)e;
	conv_like(c, n, 1, 2, 0, NULL);
}

static void conv_integer(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)e;
	conv_like(c, n, 1, -1, 0, NULL);
}

static void qlinear_conv(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)e;
	conv_like(c, n, 3, 8, 4, "requantization (scale, round, zero point, saturate)");
}

static void deform_conv(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp y, w;
	conv_like(c, n, 1, 3, 0, NULL);
	if (c->unknown || !out_shape(c, n, 0, &y) || !in_shape(c, n, 1, &w) || y.rank < 2 || y.d[1] == 0)
		return;
	/* each multiply-add reads a bilinearly sampled input value: 7 FLOPs (4 multiplies, 3 adds) */
	double samples = y.numel * prod(w.d, 1, w.rank) / y.d[1] * (double)ir_node_attr_int(n, "group", 1);
	double per = has_in(n, 4) ? 8 : 7;
	c->flops += per * samples;
	how(c, "sampling: %s FLOPs per sampled input value (bilinear%s) x %s", N1(per), has_in(n, 4) ? ", mask" : "",
	    N2(samples));
}

/* Gemm: as onnx-tool, output elements x K (from B) MACs, a bias C adds one
 * MAC per output element. */
static void gemm(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp y, b;
	if (!out_shape(c, n, 0, &y) || !in_shape(c, n, 1, &b))
		return;
	if (b.rank < 1) {
		cx_unknown(c, "B is a scalar");
		return;
	}
	bool tb = ir_node_attr_int(n, "transB", 0) != 0;
	double k = tb ? b.d[b.rank - 1] : b.rank >= 2 ? b.d[b.rank - 2] : b.d[0];
	double mac = y.numel * k;
	bool bias = has_in(n, 2);
	double alpha = ir_node_attr_float(n, "alpha", 1), beta = ir_node_attr_float(n, "beta", 1);
	c->macs = mac + (bias ? y.numel : 0);
	c->flops = 2 * mac + (bias ? y.numel : 0) + (alpha != 1 ? y.numel : 0) + (bias && beta != 1 ? y.numel : 0);
	how(c, "%s output elements x K=%s = %s MACs", N1(y.numel), N2(k), N3(mac));
	how(c, bias ? "bias C: 1 MAC and 1 FLOP per output element" : "no bias");
	if (alpha != 1 || (bias && beta != 1))
		how(c, "alpha/beta not 1: 1 FLOP per output element each");
	how(c, "FLOPs: 2 per multiply-add");
}

/* ------------------------------------------------------------------------ */
/* ogsh's fused ops (ai.ogsh)                                                */
/* ------------------------------------------------------------------------ */

/*
 * FLOPs per element of a fused activation (the `activation` attribute),
 * counted as the unfused op is (cx_elementwise, gelu); -1 when unknown.
 */
static double act_flops(const struct ir_node *n, const char **what)
{
	const char *a = attr_str(n, "activation", "");
	static const struct { const char *name; double per; } t[] = {
		{ "", 0 }, { "Relu", 1 }, { "Tanh", 1 }, { "Clip", 2 }, { "LeakyRelu", 2 }, { "Sigmoid", 4 },
		{ "HardSigmoid", 4 }, { "HardSwish", 5 },
	};
	*what = a;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(a, t[i].name))
			return t[i].per;
	if (!strcmp(a, "Gelu")) {
		const struct ir_attr *p = ir_node_attr(n, "activation_params");
		bool tanh_form = p && p->type == IR_ATTR_FLOATS && p->n >= 1 && p->floats[0] != 0;
		*what = tanh_form ? "Gelu, tanh form" : "Gelu, erf form";
		return tanh_form ? 9 : 5;
	}
	return -1;
}

/* FusedConv: the Conv, + 1 per output element for Z, + the activation. */
static void fused_conv(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)e;
	const char *what;
	double per = act_flops(n, &what);
	if (per < 0) {
		cx_unknown(c, "activation '%s' is not one ogsh knows", what);
		return;
	}
	bool z = has_in(n, 3);
	char text[200];
	snprintf(text, sizeof(text), "%s%s%s%s", z ? "residual add" : "", z && *what ? " and " : "", *what ? what : "",
		 *what ? " activation" : "");
	conv_like(c, n, 1, 2, per + (z ? 1 : 0), text);
}

/* FusedGemm: the Gemm, + the residual Z and the activation per output element. */
static void fused_gemm(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	const char *what;
	double per = act_flops(n, &what);
	if (per < 0) {
		cx_unknown(c, "activation '%s' is not one ogsh knows", what);
		return;
	}
	gemm(c, n, e);
	bool z = has_in(n, 3);
	struct shp y;
	if (c->unknown || (!per && !z) || !out_shape(c, n, 0, &y))
		return;
	c->flops += (per + (z ? 1 : 0)) * y.numel;
	if (z)
		how(c, "residual add: 1 FLOP per output element");
	if (per)
		how(c, "%s activation: %s FLOP%s per output element", what, N1(per), per == 1 ? "" : "s");
}

/*
 * The FLOPs per element of a Pointwise expression (its language is in
 * kernels/cpu/k_fused.c): 1 per operator and function, 4 for sigmoid (as
 * the Sigmoid op); a minus sign that is part of a literal costs nothing.
 * -1 (with why) when the text is not an expression ogsh can read.
 */
static double expr_flops(const char *s, char *why, size_t size)
{
	static const char *const fns[] = { "abs", "neg", "exp", "log", "sqrt", "sigmoid", "tanh", "relu", "erf",
					   "pow", "max", "min" };
	double per = 0;
	bool operand = false;   /* the last token ends an operand (a binary minus may follow) */
	for (const char *p = s; *p;) {
		char ch = *p;
		if (ch == ' ' || ch == '\t') {
			p++;
		} else if ((ch >= '0' && ch <= '9') || ch == '.') {
			while ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' ||
			       ((*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E')))
				p++;
			operand = true;
		} else if (ch >= 'a' && ch <= 'z') {
			const char *q = p;
			while ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9'))
				q++;
			size_t len = (size_t)(q - p);
			if (ch == 'x' && len > 1 && strspn(p + 1, "0123456789") == len - 1) {
				operand = true;
			} else {
				size_t f = 0;
				while (f < sizeof(fns) / sizeof(fns[0]) && (strlen(fns[f]) != len || strncmp(fns[f], p, len)))
					f++;
				if (f == sizeof(fns) / sizeof(fns[0])) {
					snprintf(why, size, "its expr has an unknown name '%.*s'", (int)(len < 40 ? len : 40), p);
					return -1;
				}
				per += strcmp(fns[f], "sigmoid") ? 1 : 4;
				operand = false;
			}
			p = q;
		} else if (ch == '(' || ch == ',') {
			operand = false;
			p++;
		} else if (ch == ')') {
			operand = true;
			p++;
		} else if (ch == '+' || ch == '*' || ch == '/') {
			per += 1;
			operand = false;
			p++;
		} else if (ch == '-') {
			const char *q = p + 1;
			while (*q == ' ')
				q++;
			/* binary, or a negation of something other than a literal */
			if (operand || !((*q >= '0' && *q <= '9') || *q == '.'))
				per += 1;
			operand = false;
			p++;
		} else {
			snprintf(why, size, "its expr has an unexpected character '%c'", ch);
			return -1;
		}
	}
	return per;
}

/* Pointwise: its expression's FLOPs per output element. */
static void pointwise(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	const char *expr = attr_str(n, "expr", NULL);
	char why[200];
	if (!expr) {
		cx_unknown(c, "it has no expr");
		return;
	}
	double per = expr_flops(expr, why, sizeof(why));
	if (per < 0) {
		cx_unknown(c, "%s", why);
		return;
	}
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	c->flops = per * y;
	how(c, "%s FLOP%s per output element (the operators and functions of '%.200s'; sigmoid 4) x %s elements",
	    N1(per), per == 1 ? "" : "s", expr, N2(y));
	how(c, "bytes: only its own inputs and output (the fused intermediates are never stored)");
}

/* MatMul and its integer forms: output elements x K. */
static void matmul_like(struct cx *c, const struct ir_node *n, int a_in, int b_in, double extra_per_out,
			const char *extra_what)
{
	NUMBUFS;
	struct shp y, a, b;
	if (!out_shape(c, n, 0, &y) || !in_shape(c, n, a_in, &a) || !in_shape(c, n, b_in, &b))
		return;
	if (a.rank < 1 || b.rank < 1) {
		cx_unknown(c, "an operand is a scalar");
		return;
	}
	double k = b.rank >= 2 ? b.d[b.rank - 2] : b.d[0];
	double mac = y.numel * k;
	c->macs = mac;
	c->flops = 2 * mac + extra_per_out * y.numel;
	how(c, "%s output elements x K=%s = %s MACs; FLOPs: 2 per multiply-add", N1(y.numel), N2(k), N3(mac));
	if (extra_per_out)
		how(c, "%s: %s FLOPs per output element", extra_what, N1(extra_per_out));
}

static void matmul(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)e;
	matmul_like(c, n, 0, 1, 0, NULL);
}

static void qlinear_matmul(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)e;
	matmul_like(c, n, 0, 3, 4, "requantization (scale, round, zero point, saturate)");
}

/* Einsum: the naive sum over every index: P = the product of all index
 * sizes; with n operands, (n-1) MACs and n FLOPs per point. */
static void einsum(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	const char *eq = attr_str(n, "equation", NULL);
	if (!eq) {
		cx_unknown(c, "no equation");
		return;
	}
	double size[128];
	bool seen[128] = { false };
	double ell[IR_MAX_RANK];
	int ell_rank = 0;
	int operand = 0;
	const char *p = eq;
	bool reduces = false;
	int letters_in = 0, letters_out = 0;
	for (; *p && !(p[0] == '-' && p[1] == '>'); operand++) {
		if (operand >= n->n_inputs) {
			cx_unknown(c, "the equation has more operands than the node has inputs");
			return;
		}
		struct shp s;
		if (!in_shape(c, n, operand, &s))
			return;
		/* the letters of this operand */
		char lt[IR_MAX_RANK + 1];
		int nl = 0;
		bool has_ell = false;
		for (; *p && *p != ',' && !(p[0] == '-' && p[1] == '>'); p++) {
			if (*p == ' ')
				continue;
			if (*p == '.') {
				if (p[1] != '.' || p[2] != '.') {
					cx_unknown(c, "cannot read the equation '%s'", eq);
					return;
				}
				has_ell = true;
				p += 2;
				continue;
			}
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) || nl >= IR_MAX_RANK) {
				cx_unknown(c, "cannot read the equation '%s'", eq);
				return;
			}
			lt[nl++] = *p;
		}
		int er = s.rank - nl;
		if (er < 0 || (!has_ell && er != 0)) {
			cx_unknown(c, "the equation '%s' does not fit input %d", eq, operand);
			return;
		}
		/* letters before and after the ellipsis map to dims around it; the
		 * letters are in order, and the ellipsis takes er dims somewhere:
		 * find where from the equation text again */
		int before = 0;
		if (has_ell) {
			const char *q = p;
			/* walk back to this operand's start */
			while (q > eq && q[-1] != ',')
				q--;
			for (; *q != '.'; q++)
				if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))
					before++;
		}
		for (int i = 0; i < nl; i++) {
			int dim = i < before ? i : i + er;
			int ch = (unsigned char)lt[i];
			if (!seen[ch] || size[ch] == 1)
				size[ch] = s.d[dim];
			if (!seen[ch])
				letters_in++;
			seen[ch] = true;
		}
		for (int i = 0; i < er; i++) {
			/* right-aligned broadcast of the ellipsis dims */
			int slot = i + (IR_MAX_RANK - er);
			double dv = s.d[before + i];
			if (IR_MAX_RANK - slot > ell_rank) {
				for (int z = ell_rank; z < IR_MAX_RANK - slot; z++)
					ell[IR_MAX_RANK - 1 - z] = 1;
				ell_rank = IR_MAX_RANK - slot;
			}
			if (ell[slot] == 1)
				ell[slot] = dv;
		}
		if (*p == ',')
			p++;
	}
	if (p[0] == '-' && p[1] == '>') {
		for (const char *q = p + 2; *q; q++)
			if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))
				letters_out++;
		reduces = letters_out < letters_in;
	} else {
		reduces = true;
	}
	double pts = 1;
	for (int ch = 0; ch < 128; ch++)
		if (seen[ch])
			pts *= size[ch];
	for (int z = 0; z < ell_rank; z++)
		pts *= ell[IR_MAX_RANK - 1 - z];
	if (operand <= 1) {
		c->flops = reduces ? pts : 0;
		how(c, "one operand: %s", reduces ? "1 add per input element" : "a permutation, no arithmetic");
		return;
	}
	c->macs = pts * (operand - 1);
	c->flops = pts * operand;
	how(c, "the naive sum over every index: %s points x %d operands: %s MACs, %s FLOPs", N1(pts), operand,
	    N2(c->macs), N3(c->flops));
}

/* Pooling over windows: FLOPs per window element, and per output element. */
static void pool(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	int64_t ks[IR_MAX_RANK];
	int nk = attr_ints(n, "kernel_shape", ks, IR_MAX_RANK);
	if (nk < 0) {
		cx_unknown(c, "no kernel_shape attribute");
		return;
	}
	double win = 1;
	for (int i = 0; i < nk; i++)
		win *= (double)(ks[i] > 0 ? ks[i] : 0);
	double per_win = n->op == IR_OP_LpPool ? 2 : 1, per_out_ = n->op == IR_OP_MaxPool ? 0 : 1;
	c->flops = y * (win * per_win + per_out_);
	how(c, "%s output elements x (%s per window element x %s window elements%s) (%s)", N1(y), N2(per_win), N3(win),
	    per_out_ ? " + 1" : "", e->what);
}

static void global_pool(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double x, y;
	if (!in_numel(c, n, 0, &x) || !out_numel(c, n, 0, &y))
		return;
	double per_in_ = n->op == IR_OP_GlobalLpPool ? 2 : 1, per_out_ = n->op == IR_OP_GlobalMaxPool ? 0 : 1;
	c->flops = per_in_ * x + per_out_ * y;
	how(c, "%s per input element x %s + %s per output element x %s (%s)", N1(per_in_), N2(x), N3(per_out_),
	    num(y, (char[40]){ 0 }, 40), e->what);
}

static void roi_align(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	double y;
	if (!out_numel(c, n, 0, &y))
		return;
	int64_t sr = ir_node_attr_int(n, "sampling_ratio", 0);
	if (sr <= 0) {
		cx_unknown(c, "sampling_ratio 0 samples each bin adaptively: the work depends on the ROI coordinates (data)");
		return;
	}
	double per = (double)(sr * sr) * 8 + 1;
	c->flops = per * y;
	how(c, "%s FLOPs per output element (%" PRId64 "x%" PRId64 " bilinear samples of 7 FLOPs, their sum, a divide) x %s",
	    N1(per), sr, sr, N2(y));
}

static void data_dependent(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)n;
	cx_unknown(c, "the work of %s depends on the data (%s)", n->op_type, e->what);
}

/* Reductions: per input element, and per output element. */
static void reduce(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double x, y;
	if (!in_numel(c, n, 0, &x) || !out_numel(c, n, 0, &y))
		return;
	double per_o = 0;
	switch (n->op) {
	case IR_OP_ReduceMean: case IR_OP_ReduceL2: case IR_OP_ReduceLogSum: case IR_OP_ReduceLogSumExp:
		per_o = 1;
		break;
	default:
		break;
	}
	c->flops = e->per * x + per_o * y;
	if (per_o)
		how(c, "%s per input element (%s) x %s + 1 per output element x %s", N1(e->per), e->what, N2(x), N3(y));
	else
		how(c, "%s per input element (%s) x %s", N1(e->per), e->what, N2(x));
}

/* LSTM, GRU, RNN: the two matrix products per step, and the gates. */
static void recurrent(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	struct shp x, w, r;
	if (!in_shape(c, n, 0, &x) || !in_shape(c, n, 1, &w) || !in_shape(c, n, 2, &r))
		return;
	if (x.rank != 3 || w.rank != 3 || r.rank != 3) {
		cx_unknown(c, "X, W and R must be 3-D");
		return;
	}
	bool batch_first = ir_node_attr_int(n, "layout", 0) != 0;
	double seq = batch_first ? x.d[1] : x.d[0], batch = batch_first ? x.d[0] : x.d[1];
	double dirs = w.d[0], gh = w.d[1], in = w.d[2], hid = r.d[2];
	double steps = dirs * seq * batch;
	double mac = steps * gh * (in + hid);
	double per_unit = e->per;
	if (n->op == IR_OP_LSTM && has_in(n, 7))
		per_unit += 6;
	double bias = has_in(n, 3) ? 2 * gh : 0;
	c->macs = mac;
	c->flops = 2 * mac + steps * (per_unit * hid + bias);
	how(c, "%s steps (directions x sequence x batch) x %s gate rows x (input %s + hidden %s) = %s MACs", N1(steps),
	    N2(gh), N3(in), num(hid, (char[40]){ 0 }, 40), num(mac, (char[40]){ 0 }, 40));
	how(c, "per step and hidden unit %s FLOPs (%s%s)", N1(per_unit), e->what,
	    n->op == IR_OP_LSTM && has_in(n, 7) ? ", peepholes 6" : "");
	if (bias)
		how(c, "biases: 2 adds per gate row per step");
}

/* Attention (and FlexAttention): Q.K^T and P.V, scale, softmax, mask. */
static bool attention_dims(struct cx *c, const struct ir_node *n, double *bh_s_l, double *d, double *dv)
{
	struct shp q, k, v;
	const char *layout = n->op == IR_OP_ogsh_FusedAttention ? attr_str(n, "layout", "BHSD") : "BHSD";
	struct ir_attn_layout al;
	char why[200];
	if (n->op == IR_OP_ogsh_FusedAttention && !ir_attn_layout_parse(layout, NULL, &al, why, sizeof(why)) &&
	    al.packed) {
		/* Q, K and V packed in input 0: one view of it gives all (K and V have Q's sizes) */
		if (!in_shape(c, n, 0, &q))
			return false;
		int64_t dims[IR_MAX_RANK];
		for (int i = 0; i < q.rank; i++)
			dims[i] = (int64_t)q.d[i];
		struct ir_attn_view w;
		if (ir_attn_view(&al, 0, q.rank, dims, ir_node_attr_int(n, "q_num_heads", 0), &w, why, sizeof(why))) {
			cx_unknown(c, "%s", why);
			return false;
		}
		*bh_s_l = (double)w.b * (double)w.h * (double)w.s * (double)w.s;
		*d = *dv = (double)w.d;
		return true;
	}
	if (!in_shape(c, n, 0, &q) || !in_shape(c, n, 1, &k) || !in_shape(c, n, 2, &v))
		return false;
	double b, hq, s, dd, l, ddv;
	if (q.rank == 4 && k.rank == 4 && v.rank == 4) {
		int sx = strcmp(layout, "BSHD") ? 2 : 1;
		b = q.d[0], hq = q.d[3 - sx], s = q.d[sx], dd = q.d[3];
		l = k.d[sx];
		ddv = v.d[3];
	} else if (q.rank == 3 && k.rank == 3 && v.rank == 3) {
		int64_t qh = ir_node_attr_int(n, "q_num_heads", 0), kh = ir_node_attr_int(n, "kv_num_heads", 0);
		if (qh <= 0 || kh <= 0) {
			cx_unknown(c, "3-D inputs need q_num_heads and kv_num_heads");
			return false;
		}
		b = q.d[0], s = q.d[1], hq = (double)qh, dd = q.d[2] / (double)qh;
		l = k.d[1];
		ddv = v.d[2] / (double)kh;
	} else {
		cx_unknown(c, "Q, K and V must be all 3-D or all 4-D");
		return false;
	}
	struct shp pk;
	if (n->op == IR_OP_Attention && has_in(n, 4)) {
		if (!in_shape(c, n, 4, &pk))
			return false;
		if (pk.rank == 4)
			l += pk.d[2];
	}
	*bh_s_l = b * hq * s * l;
	*d = dd;
	*dv = ddv;
	return true;
}

static void attention(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	double sc, d, dv;
	if (!attention_dims(c, n, &sc, &d, &dv))
		return;
	double mac = sc * d + sc * dv;
	bool mask = has_in(n, 3) || ir_node_attr_int(n, "is_causal", 0) != 0;
	bool softcap = ir_node_attr_float(n, "softcap", 0) != 0;
	bool nan_zero = ir_node_attr_int(n, "nan_to_zero", 0) != 0;
	double per_score = 1 + 5 + (mask ? 1 : 0) + (softcap ? 3 : 0) + (nan_zero ? 2 : 0);
	c->macs = mac;
	c->flops = 2 * mac + per_score * sc;
	how(c, "%s attention scores (batch x heads x queries x keys) x (head size %s + value size %s) = %s MACs",
	    N1(sc), N2(d), N3(dv), num(mac, (char[40]){ 0 }, 40));
	how(c, "per score %s FLOPs (scale, softmax 5%s%s%s)", N1(per_score), mask ? ", mask" : "",
	    softcap ? ", softcap 3" : "", nan_zero ? ", NaN test and select 2" : "");
}

static void linear_attention(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp q, v;
	if (!in_shape(c, n, 0, &q) || !in_shape(c, n, 2, &v))
		return;
	int64_t qh = ir_node_attr_int(n, "q_num_heads", 0), kh = ir_node_attr_int(n, "kv_num_heads", 0);
	if (q.rank != 3 || v.rank != 3 || qh <= 0 || kh <= 0) {
		cx_unknown(c, "needs 3-D inputs and q_num_heads, kv_num_heads");
		return;
	}
	const char *rule = attr_str(n, "update_rule", "gated_delta");
	bool delta = strstr(rule, "delta") != NULL, gated = strncmp(rule, "gated", 5) == 0;
	double bt = q.d[0] * q.d[1], dk = q.d[2] / (double)qh, dv = v.d[2] / (double)kh;
	double state = dk * dv;
	double mac = bt * ((double)kh * state * (delta ? 2 : 1) + (double)qh * state);
	c->macs = mac;
	c->flops = 2 * mac + bt * (double)kh * state * (gated ? 2 : 0) + bt * (double)qh * dv;
	how(c, "rule %s: per token, state updates of %s x %s per key/value head (%s) and a read per query head = %s MACs",
	    rule, N1(dk), N2(dv), delta ? "outer product and delta correction" : "outer product", N3(mac));
	if (gated)
		how(c, "decay: 2 FLOPs per state element per token");
	how(c, "output scale: 1 FLOP per output element");
}

static void causal_conv(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp y, w;
	if (!out_shape(c, n, 0, &y) || !in_shape(c, n, 1, &w))
		return;
	double k = w.rank >= 1 ? w.d[w.rank - 1] : 1;
	double mac = y.numel * k;
	bool bias = has_in(n, 2);
	const char *act = attr_str(n, "activation", "none");
	bool silu = strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0;
	c->macs = mac + (bias ? y.numel : 0);
	c->flops = 2 * mac + (bias ? y.numel : 0) + (silu ? 5 * y.numel : 0);
	how(c, "depthwise: %s output elements x kernel %s = %s MACs%s%s", N1(y.numel), N2(k), N3(mac),
	    bias ? "; bias 1 MAC per output element" : "", silu ? "; SiLU 5 FLOPs per element" : "");
}

static void rotary(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x;
	if (!in_shape(c, n, 0, &x))
		return;
	double head = 0;
	if (x.rank == 4) {
		head = x.d[3];
	} else if (x.rank == 3) {
		int64_t h = ir_node_attr_int(n, "num_heads", 0);
		head = h > 0 ? x.d[2] / (double)h : 0;
	}
	double rot = (double)ir_node_attr_int(n, "rotary_embedding_dim", 0);
	double frac = rot > 0 && head > 0 ? (rot < head ? rot / head : 1) : 1;
	c->flops = 3 * x.numel * frac;
	how(c, "3 FLOPs per rotated element (two multiplies and an add per output of each pair) x %s", N1(x.numel * frac));
}

static void det(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x;
	if (!in_shape(c, n, 0, &x))
		return;
	if (x.rank < 2) {
		cx_unknown(c, "the input is not a matrix");
		return;
	}
	double m = x.d[x.rank - 1], batch = prod(x.d, 0, x.rank - 2);
	c->macs = batch * m * m * m / 3;
	c->flops = 2 * c->macs;
	how(c, "LU decomposition: %s matrices x n^3/3 multiply-adds (n=%s)", N1(batch), N2(m));
}

static double fft(double len)
{
	return len >= 2 ? 5 * len * log2(len) : 0;
}

static void dft(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x;
	if (!in_shape(c, n, 0, &x))
		return;
	if (x.rank < 2) {
		cx_unknown(c, "the signal has rank < 2");
		return;
	}
	int64_t ax;
	if (ir_model_opset(c->m, "") >= 20) {
		if (!has_in(n, 2))
			ax = -2;
		else if (!known_int(in_v(n, 2), &ax)) {
			cx_unknown(c, "the axis is not a known constant");
			return;
		}
	} else {
		ax = ir_node_attr_int(n, "axis", 1);
	}
	int a = axis_of(ax, x.rank);
	if (a < 0 || a == x.rank - 1) {
		cx_unknown(c, "axis %" PRId64 " is out of range", ax);
		return;
	}
	double len = x.d[a];
	int64_t dl;
	if (has_in(n, 1)) {
		if (!known_int(in_v(n, 1), &dl)) {
			cx_unknown(c, "dft_length is not a known constant");
			return;
		}
		len = (double)dl;
	}
	double transforms = x.d[a] > 0 ? prod(x.d, 0, x.rank - 1) / x.d[a] : 0;
	c->flops = transforms * fft(len);
	how(c, "%s transforms of length %s, 5 n log2 n FLOPs each (an FFT)", N1(transforms), N2(len));
}

static void stft(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp y;
	if (!out_shape(c, n, 0, &y))
		return;
	if (y.rank != 4) {
		cx_unknown(c, "the output is not 4-D");
		return;
	}
	double len = 0;
	struct shp w;
	int64_t fl;
	if (has_in(n, 2) && in_shape(c, n, 2, &w) && w.rank == 1)
		len = w.d[0];
	else if (has_in(n, 3) && known_int(in_v(n, 3), &fl))
		len = (double)fl;
	if (c->unknown)
		return;
	if (len <= 0) {
		cx_unknown(c, "the frame length is not known");
		return;
	}
	double frames = y.d[0] * y.d[1];
	c->flops = frames * (fft(len) + (has_in(n, 2) ? len : 0));
	how(c, "%s frames x (an FFT of length %s: 5 n log2 n%s)", N1(frames), N2(len), has_in(n, 2) ? ", window multiply" : "");
}

static void grid_sample(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp y;
	if (!out_shape(c, n, 0, &y))
		return;
	const char *mode = attr_str(n, "mode", ir_model_opset(c->m, "") >= 20 ? "linear" : "bilinear");
	int d = y.rank > 2 ? y.rank - 2 : 0;
	double taps = strcmp(mode, "nearest") == 0 ? 1 : strstr(mode, "cubic") ? pow(4, d) : pow(2, d);
	double per = taps > 1 ? 2 * taps - 1 : 0;
	c->flops = per * y.numel;
	how(c, "mode %s: %s FLOPs per output element (%s taps) x %s", mode, N1(per), N2(taps), N3(y.numel));
}

static void affine_grid(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp y;
	if (!out_shape(c, n, 0, &y))
		return;
	if (y.rank < 1) {
		cx_unknown(c, "the output is a scalar");
		return;
	}
	double dim = y.d[y.rank - 1];
	c->macs = y.numel * dim;
	c->flops = 2 * c->macs;
	how(c, "each of %s output coordinates: %s multiply-adds (theta row x the grid point)", N1(y.numel), N2(dim));
}

static void col2im(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	per_in(c, n, e);
}

static void window_fn(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	per_out(c, n, e);
}

static void nll_loss(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double t, x = 0;
	if (!in_numel(c, n, 1, &t))
		return;
	if (n->op == IR_OP_SoftmaxCrossEntropyLoss && !in_numel(c, n, 0, &x))
		return;
	double sm = n->op == IR_OP_SoftmaxCrossEntropyLoss ? 6 * x : 0;
	c->flops = sm + 3 * t;
	how(c, "%s3 FLOPs per target element (pick, weight, sum) x %s (%s)",
	    sm ? "log-softmax 6 FLOPs per score element, then " : "", N1(t), e->what);
	if (sm)
		how(c, "score elements %s", N2(x));
}

static void multinomial(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x, y;
	if (!in_shape(c, n, 0, &x) || !out_shape(c, n, 0, &y))
		return;
	if (x.rank != 2) {
		cx_unknown(c, "the input is not 2-D");
		return;
	}
	double classes = x.d[1];
	double per = classes > 1 ? ceil(log2(classes)) : 1;
	c->flops = 2 * x.numel + per * y.numel;
	how(c, "2 FLOPs per class (exp, running sum) x %s + a binary search of %s compares per sample x %s", N1(x.numel),
	    N2(per), N3(y.numel));
}

static void tfidf(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	double x, y;
	if (!in_numel(c, n, 0, &x) || !out_numel(c, n, 0, &y))
		return;
	double g = (double)ir_node_attr_int(n, "max_gram_length", 1);
	c->flops = x * g + y;
	how(c, "n-gram matching: %s per input element x %s + 1 per output element (weighting) x %s", N1(g), N2(x), N3(y));
}

static void eye_like_fn(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	moves(c, n, e);
}

/* ------------------------------------------------------------------------ */
/* Subgraphs                                                                 */
/* ------------------------------------------------------------------------ */

static void cost_node(struct cx *c, const struct ir_node *n, struct ir_node_cost *o);

struct sums { double macs, flops, read, written, params, weight_bytes; };

/* The cost of every node of g, summed; false (c unknown) if one is not known. */
static bool graph_sum(struct cx *c, const struct ir_graph *g, struct sums *s, const char *what)
{
	memset(s, 0, sizeof(*s));
	if (c->depth >= MAX_SUB_DEPTH) {
		cx_unknown(c, "subgraphs nest too deep");
		return false;
	}
	ir_for_each_node(g, sn) {
		struct cx sub = { .m = c->m, .arena = c->arena, .depth = c->depth + 1 };
		struct ir_node_cost nc;
		cost_node(&sub, sn, &nc);
		c->oom |= sub.oom;
		cx_clear(&sub);
		merge_syms(c, nc.symbols, nc.n_symbols);
		if (!nc.known) {
			cx_unknown(c, "in %s, node n%d (%s): %s", what, sn->id, sn->op_type, nc.why ? nc.why : "?");
			ir_node_cost_clear(&nc);
			return false;
		}
		s->macs += nc.macs;
		s->flops += nc.flops;
		s->read += nc.bytes_read;
		s->written += nc.bytes_written;
		s->params += nc.params;
		s->weight_bytes += nc.weight_bytes;
		ir_node_cost_clear(&nc);
	}
	return true;
}

static void add_sums(struct cx *c, const struct sums *s, double times)
{
	c->macs += s->macs * times;
	c->flops += s->flops * times;
	c->extra_read += s->read * times;
	c->extra_written += s->written * times;
	c->sub_params += s->params;
	c->sub_weight_bytes += s->weight_bytes;
}

static const struct ir_graph *graph_attr(const struct ir_node *n, const char *name)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	return a && a->type == IR_ATTR_GRAPH ? a->g : NULL;
}

static void if_fn(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	const struct ir_graph *t = graph_attr(n, "then_branch"), *f = graph_attr(n, "else_branch");
	struct sums st, sf;
	if (!t || !f) {
		cx_unknown(c, "a branch is missing");
		return;
	}
	if (!graph_sum(c, t, &st, "then_branch") || !graph_sum(c, f, &sf, "else_branch"))
		return;
	int64_t cond;
	bool known = known_int(in_v(n, 0), &cond);
	const struct sums *pick = known ? (cond ? &st : &sf) : (st.flops >= sf.flops ? &st : &sf);
	add_sums(c, pick, 1);
	c->sub_params = st.params + sf.params;
	c->sub_weight_bytes = st.weight_bytes + sf.weight_bytes;
	how(c, "%s: %s FLOPs (then: %s, else: %s)",
	    known ? (cond ? "the condition is true: then_branch" : "the condition is false: else_branch")
		  : "the costlier branch", N1(pick->flops), N2(st.flops), N3(sf.flops));
}

static void loop_fn(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	const struct ir_graph *body = graph_attr(n, "body");
	if (!body) {
		cx_unknown(c, "no body");
		return;
	}
	int64_t m;
	if (!has_in(n, 0) || !known_int(in_v(n, 0), &m)) {
		cx_unknown(c, "the trip count is not a known constant: the loop condition decides it");
		return;
	}
	if (m < 0 || m >= (int64_t)1 << 31) {
		cx_unknown(c, "the trip count M=%" PRId64 " is only a bound: the loop condition decides it", m);
		return;
	}
	struct sums s;
	if (!graph_sum(c, body, &s, "the body"))
		return;
	add_sums(c, &s, (double)m);
	how(c, "%s%s iterations x the body (%s FLOPs each)", has_in(n, 1) ? "at most " : "", N1((double)m), N2(s.flops));
}

static void scan_fn(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	const struct ir_graph *body = graph_attr(n, "body");
	if (!body) {
		cx_unknown(c, "no body");
		return;
	}
	if (ir_model_opset(c->m, "") < 9) {
		cx_unknown(c, "Scan before opset 9 is not counted");
		return;
	}
	int64_t ns = ir_node_attr_int(n, "num_scan_inputs", 0);
	if (ns <= 0 || ns > n->n_inputs) {
		cx_unknown(c, "num_scan_inputs is not valid");
		return;
	}
	int first = n->n_inputs - (int)ns;
	struct shp x;
	if (!in_shape(c, n, first, &x))
		return;
	int64_t axes[1] = { 0 };
	attr_ints(n, "scan_input_axes", axes, 1);
	int a = axis_of(axes[0], x.rank);
	if (a < 0) {
		cx_unknown(c, "the scan axis is out of range");
		return;
	}
	double iters = x.d[a];
	struct sums s;
	if (!graph_sum(c, body, &s, "the body"))
		return;
	add_sums(c, &s, iters);
	how(c, "%s iterations (the scan axis) x the body (%s FLOPs each)", N1(iters), N2(s.flops));
}

static void flex_attention(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	attention(c, n, e);
	const char *names[] = { "score_mod", "prob_mod" };
	for (int i = 0; i < 2 && !c->unknown; i++) {
		const struct ir_graph *g = graph_attr(n, names[i]);
		struct sums s;
		if (g && graph_sum(c, g, &s, names[i])) {
			add_sums(c, &s, 1);
			how(c, "%s: its nodes once", names[i]);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Other families: sequences, optionals, ML, training, strings, random       */
/* ------------------------------------------------------------------------ */

static void linear_ml(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x;
	if (!in_shape(c, n, 0, &x))
		return;
	const struct ir_attr *co = ir_node_attr(n, "coefficients");
	if (!co || co->type != IR_ATTR_FLOATS) {
		cx_unknown(c, "no coefficients");
		return;
	}
	double f = x.rank >= 1 ? x.d[x.rank - 1] : 1, samples = f > 0 ? x.numel / f : 0;
	double outs = f > 0 ? (double)co->n / f : 0;
	bool post = strcmp(attr_str(n, "post_transform", "NONE"), "NONE") != 0;
	c->macs = samples * (double)co->n;
	c->flops = 2 * c->macs + samples * outs * (1 + (post ? 5 : 0) + (n->op == IR_OP_ml_LinearClassifier ? 1 : 0));
	how(c, "%s samples x %s coefficients = %s MACs; per output: intercept%s%s", N1(samples), N2((double)co->n),
	    N3(c->macs), post ? ", post transform 5" : "", n->op == IR_OP_ml_LinearClassifier ? ", compare" : "");
}

static void svm(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	(void)e;
	struct shp x;
	if (!in_shape(c, n, 0, &x))
		return;
	const struct ir_attr *sv = ir_node_attr(n, "support_vectors");
	const struct ir_attr *co = ir_node_attr(n, "coefficients");
	double f = x.rank >= 1 ? x.d[x.rank - 1] : 1, samples = f > 0 ? x.numel / f : 0;
	if (sv && sv->type == IR_ATTR_FLOATS && sv->n) {
		double nsv = f > 0 ? (double)sv->n / f : 0;
		c->macs = samples * (double)sv->n;
		double coefs = co && co->type == IR_ATTR_FLOATS ? (double)co->n : nsv;
		c->flops = 2 * c->macs + samples * (nsv * 4 + 2 * coefs);
		how(c, "kernel: %s samples x %s support vectors x %s features MACs, 4 FLOPs per kernel value; "
		    "2 per coefficient", N1(samples), N2(nsv), N3(f));
	} else if (co && co->type == IR_ATTR_FLOATS) {
		c->macs = samples * (double)co->n;
		c->flops = 2 * c->macs;
		how(c, "linear: %s samples x %s coefficients MACs", N1(samples), N2((double)co->n));
	} else {
		cx_unknown(c, "no support vectors or coefficients");
	}
}

/* Optimizers: FLOPs per updated parameter element. Outputs are the new
 * parameters and the new states: (per kind) of them per parameter. */
static void optimizer(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	NUMBUFS;
	double total = 0;
	for (int k = 0; k < n->n_outputs; k++) {
		double y;
		if (!n->outputs[k])
			continue;
		if (!out_numel(c, n, k, &y))
			return;
		total += y;
	}
	double states = n->op == IR_OP_training_Adam ? 3 : 2;
	double elems = total / states;
	c->flops = e->per * elems;
	how(c, "%s FLOPs per parameter element (%s) x %s", N1(e->per), e->what, N2(elems));
}

static void sequence_op(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	moves(c, n, e);
}

static void sequence_map(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)n;
	(void)e;
	cx_unknown(c, "SequenceMap runs its body once per sequence element: the sequence length is not known");
}

static void unknown_by_nature(struct cx *c, const struct ir_node *n, const struct cx_entry *e)
{
	(void)n;
	cx_unknown(c, "%s", e->what);
}

/* ------------------------------------------------------------------------ */
/* The tables                                                                */
/* ------------------------------------------------------------------------ */

static const struct cx_entry cx_elementwise[] = {
	{ IR_OP_Identity, per_out, 0, "a copy" }, { IR_OP_Cast, per_out, 0, "a conversion" },
	{ IR_OP_CastLike, per_out, 0, "a conversion" }, { IR_OP_BitCast, per_out, 0, "a reinterpretation" },
	{ IR_OP_Dropout, dropout, 0, NULL },
	{ IR_OP_Abs, per_out, 1, "abs" }, { IR_OP_Neg, per_out, 1, "negate" }, { IR_OP_Ceil, per_out, 1, "ceil" },
	{ IR_OP_Floor, per_out, 1, "floor" }, { IR_OP_Round, per_out, 1, "round" }, { IR_OP_Sign, per_out, 1, "sign" },
	{ IR_OP_Reciprocal, per_out, 1, "divide" }, { IR_OP_Sqrt, per_out, 1, "square root" },
	{ IR_OP_Exp, per_out, 1, "exp" }, { IR_OP_Log, per_out, 1, "log" }, { IR_OP_Erf, per_out, 1, "erf" },
	{ IR_OP_Sin, per_out, 1, "sin" }, { IR_OP_Cos, per_out, 1, "cos" }, { IR_OP_Tan, per_out, 1, "tan" },
	{ IR_OP_Asin, per_out, 1, "asin" }, { IR_OP_Acos, per_out, 1, "acos" }, { IR_OP_Atan, per_out, 1, "atan" },
	{ IR_OP_Sinh, per_out, 1, "sinh" }, { IR_OP_Cosh, per_out, 1, "cosh" }, { IR_OP_Tanh, per_out, 1, "tanh" },
	{ IR_OP_Asinh, per_out, 1, "asinh" }, { IR_OP_Acosh, per_out, 1, "acosh" }, { IR_OP_Atanh, per_out, 1, "atanh" },
	{ IR_OP_Relu, per_out, 1, "max with 0" }, { IR_OP_Not, per_out, 1, "not" },
	{ IR_OP_BitwiseNot, per_out, 1, "not" }, { IR_OP_IsNaN, per_out, 1, "compare" },
	{ IR_OP_IsInf, per_out, 1, "compare" }, { IR_OP_ThresholdedRelu, per_out, 1, "compare and select" },
	{ IR_OP_Add, per_out, 1, "add" }, { IR_OP_Sub, per_out, 1, "subtract" }, { IR_OP_Mul, per_out, 1, "multiply" },
	{ IR_OP_Div, per_out, 1, "divide" }, { IR_OP_Mod, per_out, 1, "modulo" }, { IR_OP_Pow, per_out, 1, "power" },
	{ IR_OP_BitShift, per_out, 1, "shift" }, { IR_OP_BitwiseAnd, per_out, 1, "and" },
	{ IR_OP_BitwiseOr, per_out, 1, "or" }, { IR_OP_BitwiseXor, per_out, 1, "xor" },
	{ IR_OP_And, per_out, 1, "and" }, { IR_OP_Or, per_out, 1, "or" }, { IR_OP_Xor, per_out, 1, "xor" },
	{ IR_OP_Equal, per_out, 1, "compare" }, { IR_OP_Greater, per_out, 1, "compare" },
	{ IR_OP_GreaterOrEqual, per_out, 1, "compare" }, { IR_OP_Less, per_out, 1, "compare" },
	{ IR_OP_LessOrEqual, per_out, 1, "compare" }, { IR_OP_Where, per_out, 1, "select" },
	{ IR_OP_LeakyRelu, per_out, 2, "compare, multiply" }, { IR_OP_PRelu, per_out, 2, "compare, multiply" },
	{ IR_OP_Clip, per_out, 2, "max, min" }, { IR_OP_Shrink, per_out, 2, "compare, add" },
	{ IR_OP_Softplus, per_out, 3, "exp, add, log" }, { IR_OP_Softsign, per_out, 3, "abs, add, divide" },
	{ IR_OP_Sigmoid, per_out, 4, "negate, exp, add, divide" },
	{ IR_OP_HardSigmoid, per_out, 4, "multiply, add, max, min" },
	{ IR_OP_Elu, per_out, 4, "compare, exp, subtract, multiply" },
	{ IR_OP_Swish, per_out, 5, "sigmoid 4, multiply" }, { IR_OP_HardSwish, per_out, 5, "hard sigmoid 4, multiply" },
	{ IR_OP_Selu, per_out, 5, "elu 4, scale" }, { IR_OP_Mish, per_out, 5, "exp, add, log, tanh, multiply" },
	{ IR_OP_Celu, per_out, 7, "divide, exp, subtract, multiply, min, max, add" },
	{ IR_OP_Gelu, gelu, 0, NULL }, { IR_OP_ogsh_Gelu, gelu, 0, NULL },
	{ IR_OP_Sum, variadic, 0, "add" }, { IR_OP_Max, variadic, 0, "max" }, { IR_OP_Min, variadic, 0, "min" },
	{ IR_OP_Mean, variadic, 0, "add, then divide" },
	{ IR_OP_Softmax, softmax, 5, "max, subtract, exp, sum, divide" },
	{ IR_OP_LogSoftmax, softmax, 5, "max, subtract, exp, sum, log-subtract" },
	{ IR_OP_Hardmax, per_out, 1, "compare" },
	{ IR_OP_CumSum, per_out, 1, "add" }, { IR_OP_CumProd, per_out, 1, "multiply" },
	{ IR_OP_QuantizeLinear, per_out, 4, "divide by scale, round, add zero point, saturate" },
	{ IR_OP_DequantizeLinear, per_out, 2, "subtract zero point, multiply by scale" },
	{ IR_OP_DynamicQuantizeLinear, per_in, 6, "min and max, then quantize 4" },
	{ IR_OP_BatchNormalization, batchnorm, 0, NULL },
	{ IR_OP_LayerNormalization, normalization, 8, "mean 1, variance 3, normalize 2, scale 1, bias 1" },
	{ IR_OP_ogsh_LayerNormalization, normalization, 8, "mean 1, variance 3, normalize 2, scale 1, bias 1" },
	{ IR_OP_InstanceNormalization, normalization, 8, "mean 1, variance 3, normalize 2, scale 1, bias 1" },
	{ IR_OP_GroupNormalization, normalization, 8, "mean 1, variance 3, normalize 2, scale 1, bias 1" },
	{ IR_OP_RMSNormalization, normalization, 4, "square, sum, normalize, scale" },
	{ IR_OP_MeanVarianceNormalization, normalization, 6, "mean 1, variance 3, normalize 2" },
	{ IR_OP_LpNormalization, normalization, 3, "abs or square, sum, divide" },
	{ IR_OP_LRN, lrn, 0, NULL },
	{ IR_OP_RandomNormalLike, per_out, 4, "a normal sample (Box-Muller)" },
	{ IR_OP_RandomUniformLike, per_out, 2, "a uniform sample, scale and shift" },
	{ IR_OP_Bernoulli, per_out, 2, "a uniform sample, compare" },
	{ IR_OP_EyeLike, eye_like_fn, 0, "writes ones and zeros" },
	{ -1, NULL, 0, NULL },
};

static const struct cx_entry cx_tensor[] = {
	{ IR_OP_Constant, constant, 0, NULL },
	{ IR_OP_Reshape, moves, 0, "a reshape" }, { IR_OP_Flatten, moves, 0, "a reshape" },
	{ IR_OP_Squeeze, moves, 0, "a reshape" }, { IR_OP_Unsqueeze, moves, 0, "a reshape" },
	{ IR_OP_Transpose, moves, 0, "a permutation" }, { IR_OP_Concat, moves, 0, "a copy" },
	{ IR_OP_Split, moves, 0, "a copy" }, { IR_OP_Slice, moves, 0, "a copy" },
	{ IR_OP_Gather, moves, 0, "a gather" }, { IR_OP_GatherElements, moves, 0, "a gather" },
	{ IR_OP_GatherND, moves, 0, "a gather" }, { IR_OP_Expand, moves, 0, "a broadcast copy" },
	{ IR_OP_Tile, moves, 0, "a copy" }, { IR_OP_Pad, moves, 0, "a copy" },
	{ IR_OP_DepthToSpace, moves, 0, "a permutation" }, { IR_OP_SpaceToDepth, moves, 0, "a permutation" },
	{ IR_OP_Shape, moves, 0, "reads the shape only" }, { IR_OP_Size, moves, 0, "reads the shape only" },
	{ IR_OP_ConstantOfShape, moves, 0, "a fill" }, { IR_OP_OneHot, moves, 0, "a fill" },
	{ IR_OP_Trilu, moves, 0, "copies or zeroes" }, { IR_OP_Compress, moves, 0, "a selection" },
	{ IR_OP_ReverseSequence, moves, 0, "a copy" }, { IR_OP_CenterCropPad, moves, 0, "a copy" },
	{ IR_OP_TensorScatter, moves, 0, "a copy with an update" }, { IR_OP_MaxUnpool, moves, 0, "a scatter" },
	{ IR_OP_Scatter, scatter, 0, NULL }, { IR_OP_ScatterElements, scatter, 0, NULL },
	{ IR_OP_ScatterND, scatter, 0, NULL },
	{ IR_OP_Range, range, 1, "an add" }, { IR_OP_NonZero, nonzero, 1, "a compare" },
	{ IR_OP_Unique, unique, 0, NULL }, { IR_OP_TopK, topk, 0, NULL },
	{ IR_OP_Resize, resize, 0, NULL }, { IR_OP_Upsample, resize, 0, NULL },
	{ IR_OP_Col2Im, col2im, 1, "an add" },
	{ -1, NULL, 0, NULL },
};

static const struct cx_entry cx_nn[] = {
	{ IR_OP_Conv, conv, 0, NULL }, { IR_OP_ConvTranspose, conv, 0, NULL },
	{ IR_OP_ConvInteger, conv_integer, 0, NULL }, { IR_OP_QLinearConv, qlinear_conv, 0, NULL },
	{ IR_OP_DeformConv, deform_conv, 0, NULL },
	{ IR_OP_Gemm, gemm, 0, NULL }, { IR_OP_MatMul, matmul, 0, NULL }, { IR_OP_MatMulInteger, matmul, 0, NULL },
	{ IR_OP_QLinearMatMul, qlinear_matmul, 0, NULL }, { IR_OP_Einsum, einsum, 0, NULL },
	{ IR_OP_MaxPool, pool, 0, "a compare per window element" },
	{ IR_OP_AveragePool, pool, 0, "an add per window element, a divide" },
	{ IR_OP_LpPool, pool, 0, "power and add per window element, a root" },
	{ IR_OP_GlobalMaxPool, global_pool, 0, "compares" },
	{ IR_OP_GlobalAveragePool, global_pool, 0, "adds, then a divide" },
	{ IR_OP_GlobalLpPool, global_pool, 0, "power and add, then a root" },
	{ IR_OP_MaxRoiPool, data_dependent, 0, "the size of each pooled region comes from the ROI coordinates" },
	{ IR_OP_RoiAlign, roi_align, 0, NULL },
	{ IR_OP_ReduceSum, reduce, 1, "add" }, { IR_OP_ReduceMean, reduce, 1, "add, then divide" },
	{ IR_OP_ReduceMax, reduce, 1, "compare" }, { IR_OP_ReduceMin, reduce, 1, "compare" },
	{ IR_OP_ReduceProd, reduce, 1, "multiply" }, { IR_OP_ReduceSumSquare, reduce, 2, "square, add" },
	{ IR_OP_ReduceL1, reduce, 2, "abs, add" }, { IR_OP_ReduceL2, reduce, 2, "square, add, then a root" },
	{ IR_OP_ReduceLogSum, reduce, 1, "add, then a log" },
	{ IR_OP_ReduceLogSumExp, reduce, 2, "exp, add, then a log" },
	{ IR_OP_ArgMax, reduce, 1, "compare" }, { IR_OP_ArgMin, reduce, 1, "compare" },
	{ IR_OP_LSTM, recurrent, 22, "3 sigmoids 12, 2 tanh, cell update 3, output 1, gate sums 4" },
	{ IR_OP_GRU, recurrent, 17, "2 sigmoids 8, tanh, reset 1, blend 4, gate sums 3" },
	{ IR_OP_RNN, recurrent, 2, "sum, tanh" },
	{ IR_OP_Attention, attention, 0, NULL }, { IR_OP_preview_FlexAttention, flex_attention, 0, NULL },
	{ IR_OP_LinearAttention, linear_attention, 0, NULL }, { IR_OP_CausalConvWithState, causal_conv, 0, NULL },
	{ IR_OP_RotaryEmbedding, rotary, 0, NULL },
	{ IR_OP_Det, det, 0, NULL }, { IR_OP_DFT, dft, 0, NULL }, { IR_OP_STFT, stft, 0, NULL },
	{ IR_OP_GridSample, grid_sample, 0, NULL }, { IR_OP_AffineGrid, affine_grid, 0, NULL },
	{ IR_OP_HannWindow, window_fn, 3, "cos, multiply, subtract" },
	{ IR_OP_HammingWindow, window_fn, 3, "cos, multiply, subtract" },
	{ IR_OP_BlackmanWindow, window_fn, 6, "two cos, multiplies, adds" },
	{ IR_OP_MelWeightMatrix, window_fn, 4, "frequency conversions and a triangle" },
	{ IR_OP_NegativeLogLikelihoodLoss, nll_loss, 0, "negative log-likelihood" },
	{ IR_OP_SoftmaxCrossEntropyLoss, nll_loss, 0, "cross entropy" },
	{ IR_OP_NonMaxSuppression, data_dependent, 0, "how many boxes are compared depends on the scores" },
	{ IR_OP_ogsh_FusedConv, fused_conv, 0, NULL }, { IR_OP_ogsh_FusedGemm, fused_gemm, 0, NULL },
	{ IR_OP_ogsh_Pointwise, pointwise, 0, NULL }, { IR_OP_ogsh_FusedAttention, attention, 0, NULL },
	{ -1, NULL, 0, NULL },
};

static const struct cx_entry cx_other[] = {
	{ IR_OP_If, if_fn, 0, NULL }, { IR_OP_Loop, loop_fn, 0, NULL }, { IR_OP_Scan, scan_fn, 0, NULL },
	{ IR_OP_SequenceMap, sequence_map, 0, NULL },
	{ IR_OP_SequenceAt, sequence_op, 0, "a sequence access" },
	{ IR_OP_SequenceConstruct, sequence_op, 0, "builds a sequence" },
	{ IR_OP_SequenceEmpty, sequence_op, 0, "builds a sequence" },
	{ IR_OP_SequenceErase, sequence_op, 0, "a sequence edit" },
	{ IR_OP_SequenceInsert, sequence_op, 0, "a sequence edit" },
	{ IR_OP_SequenceLength, sequence_op, 0, "reads the length only" },
	{ IR_OP_SplitToSequence, sequence_op, 0, "a copy" },
	{ IR_OP_ConcatFromSequence, sequence_op, 0, "a copy" },
	{ IR_OP_Optional, sequence_op, 0, "wraps a value" },
	{ IR_OP_OptionalGetElement, sequence_op, 0, "unwraps a value" },
	{ IR_OP_OptionalHasElement, sequence_op, 0, "reads the presence only" },
	{ IR_OP_RandomNormal, per_out, 4, "a normal sample (Box-Muller)" },
	{ IR_OP_RandomUniform, per_out, 2, "a uniform sample, scale and shift" },
	{ IR_OP_Multinomial, multinomial, 0, NULL },
	{ IR_OP_ImageDecoder, unknown_by_nature, 0, "decoding depends on the encoded image (data)" },
	{ IR_OP_RegexFullMatch, per_out, 0, "string matching" }, { IR_OP_StringConcat, per_out, 0, "string copies" },
	{ IR_OP_StringNormalizer, per_out, 0, "string edits" }, { IR_OP_StringSplit, per_out, 0, "string splits" },
	{ IR_OP_TfIdfVectorizer, tfidf, 0, NULL },
	{ IR_OP_ml_LinearClassifier, linear_ml, 0, NULL }, { IR_OP_ml_LinearRegressor, linear_ml, 0, NULL },
	{ IR_OP_ml_SVMClassifier, svm, 0, NULL }, { IR_OP_ml_SVMRegressor, svm, 0, NULL },
	{ IR_OP_ml_Binarizer, per_out, 1, "compare" }, { IR_OP_ml_Scaler, per_out, 2, "subtract, multiply" },
	{ IR_OP_ml_Normalizer, per_out, 3, "abs or square, sum, divide" },
	{ IR_OP_ml_Imputer, per_out, 1, "compare and select" },
	{ IR_OP_ml_LabelEncoder, per_out, 0, "lookups" }, { IR_OP_ml_CategoryMapper, per_out, 0, "lookups" },
	{ IR_OP_ml_ArrayFeatureExtractor, per_out, 0, "a gather" },
	{ IR_OP_ml_FeatureVectorizer, per_out, 0, "a copy" }, { IR_OP_ml_OneHotEncoder, per_out, 0, "a fill" },
	{ IR_OP_ml_DictVectorizer, per_out, 0, "lookups" }, { IR_OP_ml_CastMap, per_out, 0, "a conversion" },
	{ IR_OP_ml_ZipMap, per_out, 0, "builds maps" },
	{ IR_OP_ml_TreeEnsemble, unknown_by_nature, 0, "the path through each tree depends on the data" },
	{ IR_OP_ml_TreeEnsembleClassifier, unknown_by_nature, 0, "the path through each tree depends on the data" },
	{ IR_OP_ml_TreeEnsembleRegressor, unknown_by_nature, 0, "the path through each tree depends on the data" },
	{ IR_OP_training_Adagrad, optimizer, 7, "square, accumulate, root, add, divide, scale, update" },
	{ IR_OP_training_Adam, optimizer, 12, "two moment updates 6, bias corrections, root, divide, update" },
	{ IR_OP_training_Momentum, optimizer, 4, "scale, accumulate, scale, update" },
	{ IR_OP_training_Gradient, unknown_by_nature, 0, "the cost of a gradient depends on the graph it differentiates" },
	{ -1, NULL, 0, NULL },
};

static const struct cx_entry *table[IR_OP_COUNT];
static bool table_built;

static void build_table(void)
{
	if (table_built)
		return;
	const struct cx_entry *families[] = { cx_elementwise, cx_tensor, cx_nn, cx_other };
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
		for (const struct cx_entry *e = families[f]; e->fn; e++)
			if (e->op >= 0 && e->op < IR_OP_COUNT)
				table[e->op] = e;
	table_built = true;
}

bool ir_cost_has_fn(int op)
{
	build_table();
	return op >= 0 && op < IR_OP_COUNT && table[op] != NULL;
}

/* ------------------------------------------------------------------------ */
/* One node                                                                  */
/* ------------------------------------------------------------------------ */

static char *type_text(struct cx *c, const struct ir_value *v)
{
	char buf[512];
	const struct ir_value *dv = defining(v);
	const struct ir_tensor *t = ir_value_const(dv);
	const struct ir_type *ty = ir_value_type(v);
	if (ty->kind == IR_TYPE_NONE && t) {
		char d[400];
		snprintf(buf, sizeof(buf), "%s%s", ir_dtype_name(t->dtype), ir_dims_str(t->rank, t->dims, d, sizeof(d)));
		return cx_str(c, buf);
	}
	return cx_str(c, ir_type_str(ty, buf, sizeof(buf)));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Gathers and slices read only the elements they copy from their data
 * input (input 0): as many as they write. */
static bool reads_what_it_writes(int op, int slot)
{
	return slot == 0 && (op == IR_OP_Gather || op == IR_OP_GatherElements || op == IR_OP_GatherND ||
			     op == IR_OP_Slice);
}

/* Ops that read the metadata of their input, not its data. */
static bool reads_no_data(int op)
{
	return op == IR_OP_Shape || op == IR_OP_Size || op == IR_OP_SequenceLength || op == IR_OP_OptionalHasElement ||
	       op == IR_OP_Constant;
}

/* Looks at value v (its shape into *s) and fills what the cost of a node
 * says about it: name, type, element and byte counts. */
static void fill_io(struct cx *c, const struct ir_value *v, struct ir_cost_io *io, struct shp *s)
{
	probe(c, v, s);
	io->name = cx_str(c, vname(v));
	io->type = type_text(c, v);
	if (!io->name || !io->type)
		c->oom = true;
	io->known = s->ok && s->bytes_ok;
	io->numel = s->ok ? s->numel : 0;
	io->bytes = io->known ? s->bytes : 0;
}

static void cost_node(struct cx *c, const struct ir_node *n, struct ir_node_cost *o)
{
	build_table();
	memset(o, 0, sizeof(*o));
	o->id = n->id;
	o->op = n->op;
	o->borrowed = c->arena != NULL;
	o->name = cx_str(c, n->name ? n->name : "");
	o->op_type = cx_str(c, n->op_type ? n->op_type : "?");
	o->domain = cx_str(c, n->domain ? n->domain : "");
	o->inputs = n->n_inputs ? cx_mem(c, (size_t)n->n_inputs * sizeof(*o->inputs)) : NULL;
	o->outputs = n->n_outputs ? cx_mem(c, (size_t)n->n_outputs * sizeof(*o->outputs)) : NULL;
	if ((n->n_inputs && !o->inputs) || (n->n_outputs && !o->outputs)) {
		c->oom = true;
		cx_free(c, o->inputs);
		cx_free(c, o->outputs);
		o->inputs = o->outputs = NULL;
	} else {
		o->n_inputs = n->n_inputs;
		o->n_outputs = n->n_outputs;
	}

	/* outputs first: what gathers read depends on what they write */
	char io_why[700] = "";
	double read = 0, written = 0;
	for (int k = 0; k < o->n_outputs; k++) {
		const struct ir_value *v = n->outputs[k];
		if (!v)
			continue;
		struct shp s;
		struct ir_cost_io *io = &o->outputs[k];
		fill_io(c, v, io, &s);
		if (n->op == IR_OP_Constant)
			continue;
		if (!io->known && !io_why[0])
			snprintf(io_why, sizeof(io_why), "%s", s.why);
		written += io->bytes;
	}
	/* inputs: parameters and bytes read */
	bool nodata = reads_no_data(n->op);
	for (int i = 0; i < o->n_inputs; i++) {
		const struct ir_value *v = n->inputs[i];
		if (!v)
			continue;
		struct shp s;
		struct ir_cost_io *io = &o->inputs[i];
		fill_io(c, v, io, &s);
		io->role = s.ok ? input_role(n, i, v, s.elem, s.numel) : is_const(v) ? IR_ROLE_PARAM : IR_ROLE_NONE;
		if (io->role == IR_ROLE_PARAM && s.ok) {
			o->params += s.numel;
			o->weight_bytes += io->known ? s.bytes : 0;
		}
		bool dup = false;   /* a value read twice is read once (looked for among the first 64) */
		for (int j = 0; j < i && j < 64; j++)
			dup |= n->inputs[j] == v;
		if (dup || nodata)
			continue;
		if (!io->known && !io_why[0])
			snprintf(io_why, sizeof(io_why), "%s", s.why);
		if (reads_what_it_writes(n->op, i) && o->n_outputs > 0 && o->outputs[0].known && io->known &&
		    o->outputs[0].bytes < io->bytes)
			read += o->outputs[0].bytes;
		else
			read += io->bytes;
	}

	/* the op's arithmetic */
	const struct cx_entry *e = n->op >= 0 && n->op < IR_OP_COUNT ? table[n->op] : NULL;
	if (e) {
		e->fn(c, n, e);
	} else if (n->op == IR_OP_UNKNOWN) {
		bool fn = false;
		for (size_t i = 0; c->m && i < c->m->n_functions; i++)
			fn |= ir_str_eq(c->m->functions[i].name, n->op_type) &&
			      strcmp(c->m->functions[i].domain ? c->m->functions[i].domain : "", n->domain ? n->domain : "") == 0;
		if (fn)
			cx_unknown(c, "'%s' is a function of the model: ogsh does not count function bodies", n->op_type);
		else
			cx_unknown(c, "'%s%s%s' is not an op ogsh knows", n->domain && *n->domain ? n->domain : "",
				   n->domain && *n->domain ? ":" : "", n->op_type);
	} else {
		cx_unknown(c, "ogsh has no cost function for %s", n->op_type);
	}
	if (io_why[0])
		cx_unknown(c, "%s", io_why);

	o->params += c->sub_params;
	o->weight_bytes += c->sub_weight_bytes;
	o->macs = c->macs;
	o->flops = c->flops;
	o->bytes_read = read + c->extra_read;
	o->bytes_written = written + c->extra_written;
	if (!c->unknown && !(isfinite(o->macs) && isfinite(o->flops) && isfinite(o->bytes_read) &&
			     isfinite(o->bytes_written) && isfinite(o->params)))
		cx_unknown(c, "the counts are too large to represent");
	o->known = !c->unknown;
	if (!o->known) {
		o->why = c->why ? c->why : cx_str(c, "not known");
		c->why = NULL;   /* moved */
		o->macs = o->flops = o->bytes_read = o->bytes_written = 0;
	} else {
		double b = o->bytes_read + o->bytes_written;
		o->intensity = b > 0 ? o->flops / b : 0;
	}
	o->how = cx_str(c, c->how);
	o->precision = ir_node_precision(n);
	if (c->n_syms) {
		o->symbols = cx_mem(c, c->n_syms * sizeof(char *));
		if (o->symbols) {
			for (size_t i = 0; i < c->n_syms; i++)
				o->symbols[i] = c->syms[i];
			o->n_symbols = (int)c->n_syms;
			c->n_syms = 0;   /* moved */
			qsort(o->symbols, (size_t)o->n_symbols, sizeof(char *), cmp_str);
		}
	}
}

void ir_node_cost_clear(struct ir_node_cost *o)
{
	if (!o || o->borrowed)
		return;
	free(o->name);
	free(o->op_type);
	free(o->domain);
	free(o->why);
	free(o->how);
	for (int i = 0; i < o->n_symbols; i++)
		free(o->symbols[i]);
	free(o->symbols);
	for (int i = 0; o->inputs && i < o->n_inputs; i++) {
		free(o->inputs[i].name);
		free(o->inputs[i].type);
	}
	free(o->inputs);
	for (int i = 0; o->outputs && i < o->n_outputs; i++) {
		free(o->outputs[i].name);
		free(o->outputs[i].type);
	}
	free(o->outputs);
	memset(o, 0, sizeof(*o));
}

int ir_node_cost(const struct ir_model *m, const struct ir_node *n, struct ir_node_cost *out, struct ir_diag *d)
{
	struct cx c = { .m = m };
	cost_node(&c, n, out);
	bool oom = c.oom;
	cx_clear(&c);
	if (oom) {
		ir_node_cost_clear(out);
		return ir_diag_err(d, IR_ENOMEM, "out of memory counting costs");
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The whole graph                                                           */
/* ------------------------------------------------------------------------ */

/* A pointer set with a value: constant tensors seen, and their role. */
struct pset {
	const void **keys;
	int *vals;
	size_t cap, n;
};

static int *pset_slot(struct pset *p, const void *k, bool *fresh)
{
	if (p->n * 2 >= p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 256;
		const void **nk = ir_alloc_array(nc, sizeof(*nk));
		int *nv = ir_alloc_array(nc, sizeof(*nv));
		if (!nk || !nv) {
			free(nk);
			free(nv);
			return NULL;
		}
		for (size_t i = 0; i < p->cap; i++)
			if (p->keys[i]) {
				size_t h = ((uintptr_t)p->keys[i] >> 4) * 0x9E3779B97F4A7C15ull % nc;
				while (nk[h])
					h = (h + 1) % nc;
				nk[h] = p->keys[i];
				nv[h] = p->vals[i];
			}
		free(p->keys);
		free(p->vals);
		p->keys = nk;
		p->vals = nv;
		p->cap = nc;
	}
	size_t h = ((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15ull % p->cap;
	while (p->keys[h] && p->keys[h] != k)
		h = (h + 1) % p->cap;
	*fresh = !p->keys[h];
	if (*fresh) {
		p->keys[h] = k;
		p->vals[h] = 0;
		p->n++;
	}
	return &p->vals[h];
}

static int role_rank(int role)
{
	return role == IR_ROLE_PARAM ? 3 : role == IR_ROLE_BUFFER ? 2 : role == IR_ROLE_CONST ? 1 : 0;
}

struct consts {
	struct pset seen;
	const struct ir_value **order;   /* first-seen order */
	size_t n, cap;
	bool oom;
};

/* Notes every constant read by the nodes of g (and its subgraphs) with the
 * strongest role any reader gives it. */
static void collect_consts(struct cx *c, struct consts *k, const struct ir_graph *g, int depth)
{
	if (depth > MAX_SUB_DEPTH)
		return;
	ir_for_each_node(g, n) {
		for (int i = 0; i < n->n_inputs; i++) {
			const struct ir_value *v = n->inputs[i];
			if (!v || !is_const(v))
				continue;
			const struct ir_value *dv = defining(v);
			struct shp s;
			probe(c, dv, &s);
			int role = input_role(n, i, v, s.elem, s.ok ? s.numel : 0);
			bool fresh;
			int *slot = pset_slot(&k->seen, dv, &fresh);
			if (!slot) {
				k->oom = true;
				return;
			}
			if (fresh) {
				if (ir_grow(&k->order, &k->cap, k->n + 1, sizeof(*k->order))) {
					k->oom = true;
					return;
				}
				k->order[k->n++] = dv;
			}
			if (role_rank(role) > role_rank(*slot))
				*slot = role;
		}
		for (int a = 0; a < n->n_attrs; a++) {
			const struct ir_attr *at = &n->attrs[a];
			if (at->g)
				collect_consts(c, k, at->g, depth + 1);
			for (size_t j = 0; at->graphs && j < at->n; j++)
				collect_consts(c, k, at->graphs[j], depth + 1);
		}
	}
}

static int cmp_ops(const void *pa, const void *pb)
{
	const struct ir_op_cost *a = pa, *b = pb;
	if (a->flops != b->flops)
		return a->flops < b->flops ? 1 : -1;
	if (a->count != b->count)
		return b->count - a->count;
	int r = strcmp(a->op_type, b->op_type);
	return r ? r : strcmp(a->domain, b->domain);
}

static int cmp_dtypes(const void *pa, const void *pb)
{
	const struct ir_stats_dtype *a = pa, *b = pb;
	double ba = a->param_bytes + a->buffer_bytes + a->constant_bytes;
	double bb = b->param_bytes + b->buffer_bytes + b->constant_bytes;
	if (ba != bb)
		return ba < bb ? 1 : -1;
	return a->dtype - b->dtype;
}

void ir_stats_free(struct ir_stats *s)
{
	if (!s)
		return;
	free(s->graph_name);
	free(s->nodes);
	for (struct ablk *b = s->mem, *nb; b; b = nb) {
		nb = b->next;
		free(b);
	}
	for (int i = 0; s->ops && i < s->n_ops; i++) {
		free(s->ops[i].op_type);
		free(s->ops[i].domain);
	}
	free(s->ops);
	free(s->dtypes);
	free(s->precs);
	for (int i = 0; i < s->n_symbols; i++)
		free(s->symbols[i]);
	free(s->symbols);
	free(s);
}

static int op_sums(struct ir_stats *s)
{
	int by_op[IR_OP_COUNT];
	for (int i = 0; i < IR_OP_COUNT; i++)
		by_op[i] = -1;
	/* ops not in the table, by "domain:op_type" (the keys are kept in `keys`) */
	struct ir_map *other = NULL;
	char **keys = NULL;
	size_t n_keys = 0, cap_keys = 0, cap = 0;
	int rc = 0;
	s->n_ops = 0;
	for (int i = 0; i < s->n_nodes && !rc; i++) {
		const struct ir_node_cost *nc = &s->nodes[i];
		int op = nc->op;
		int at = op >= 0 ? by_op[op] : -1;
		char *key = NULL;
		if (op < 0) {
			key = ir_fmt("%s:%s", nc->domain, nc->op_type);
			if (!key || (!other && !(other = ir_map_new(16)))) {
				free(key);
				rc = IR_ENOMEM;
				break;
			}
			void *hit = ir_map_get(other, key);
			if (hit) {
				at = (int)((intptr_t)hit - 1);
				free(key);
				key = NULL;
			}
		}
		if (at < 0) {
			if (ir_grow(&s->ops, &cap, (size_t)s->n_ops + 1, sizeof(*s->ops))) {
				free(key);
				rc = IR_ENOMEM;
				break;
			}
			at = s->n_ops++;
			memset(&s->ops[at], 0, sizeof(s->ops[at]));
			s->ops[at].op_type = ir_strdup(nc->op_type);
			s->ops[at].domain = ir_strdup(nc->domain);
			if (!s->ops[at].op_type || !s->ops[at].domain)
				rc = IR_ENOMEM;
			if (op >= 0) {
				by_op[op] = at;
			} else if (ir_grow(&keys, &cap_keys, n_keys + 1, sizeof(*keys)) ||
				   ir_map_put(other, key, (void *)(intptr_t)(at + 1))) {
				free(key);
				rc = IR_ENOMEM;
			} else {
				keys[n_keys++] = key;
			}
		}
		struct ir_op_cost *oc = &s->ops[at];
		oc->count++;
		oc->params += nc->params;
		oc->weight_bytes += nc->weight_bytes;
		if (!nc->known) {
			oc->n_unknown++;
			continue;
		}
		oc->macs += nc->macs;
		oc->flops += nc->flops;
		oc->bytes_read += nc->bytes_read;
		oc->bytes_written += nc->bytes_written;
	}
	ir_map_free(other);
	for (size_t i = 0; i < n_keys; i++)
		free(keys[i]);
	free(keys);
	if (!rc && s->n_ops)
		qsort(s->ops, (size_t)s->n_ops, sizeof(*s->ops), cmp_ops);
	return rc;
}

static int cmp_precs(const void *pa, const void *pb)
{
	const struct ir_stats_prec *a = pa, *b = pb;
	if (a->flops != b->flops)
		return a->flops < b->flops ? 1 : -1;
	if (a->n_nodes != b->n_nodes)
		return b->n_nodes - a->n_nodes;
	return a->prec - b->prec;
}

/* Compute by precision: nodes, MACs and FLOPs of each precision class. */
static int prec_sums(struct ir_stats *s)
{
	size_t cap = 0;
	for (int i = 0; i < s->n_nodes; i++) {
		const struct ir_node_cost *nc = &s->nodes[i];
		int at = -1;
		for (int k = 0; k < s->n_precs && at < 0; k++)
			if (s->precs[k].prec == nc->precision)
				at = k;
		if (at < 0) {
			if (ir_grow(&s->precs, &cap, (size_t)s->n_precs + 1, sizeof(*s->precs)))
				return IR_ENOMEM;
			at = s->n_precs++;
			memset(&s->precs[at], 0, sizeof(s->precs[at]));
			s->precs[at].prec = nc->precision;
		}
		s->precs[at].n_nodes++;
		if (nc->known) {
			s->precs[at].macs += nc->macs;
			s->precs[at].flops += nc->flops;
		}
	}
	if (s->n_precs)
		qsort(s->precs, (size_t)s->n_precs, sizeof(*s->precs), cmp_precs);
	return 0;
}

static int const_sums(struct cx *c, struct ir_stats *s, const struct ir_graph *g)
{
	struct consts k = { 0 };
	collect_consts(c, &k, g, 0);
	int rc = k.oom ? IR_ENOMEM : 0;
	size_t cap = 0;
	for (size_t i = 0; !rc && i < k.n; i++) {
		const struct ir_value *v = k.order[i];
		bool fresh;
		int role = *pset_slot(&k.seen, v, &fresh);
		struct shp sh;
		probe(c, v, &sh);
		if (!sh.ok)
			continue;
		int at = -1;
		for (int j = 0; j < s->n_dtypes; j++)
			if (s->dtypes[j].dtype == sh.elem)
				at = j;
		if (at < 0) {
			if (ir_grow(&s->dtypes, &cap, (size_t)s->n_dtypes + 1, sizeof(*s->dtypes))) {
				rc = IR_ENOMEM;
				break;
			}
			at = s->n_dtypes++;
			memset(&s->dtypes[at], 0, sizeof(s->dtypes[at]));
			s->dtypes[at].dtype = sh.elem;
		}
		struct ir_stats_dtype *t = &s->dtypes[at];
		double b = sh.bytes_ok ? sh.bytes : 0;
		t->n_tensors++;
		if (role == IR_ROLE_PARAM) {
			t->params += sh.numel, t->param_bytes += b;
			s->params += sh.numel, s->param_bytes += b;
		} else if (role == IR_ROLE_BUFFER) {
			t->buffers += sh.numel, t->buffer_bytes += b;
			s->buffers += sh.numel, s->buffer_bytes += b;
		} else {
			t->constants += sh.numel, t->constant_bytes += b;
			s->constants += sh.numel, s->constant_bytes += b;
		}
	}
	if (s->n_dtypes)
		qsort(s->dtypes, (size_t)s->n_dtypes, sizeof(*s->dtypes), cmp_dtypes);
	free(k.seen.keys);
	free(k.seen.vals);
	free(k.order);
	return rc;
}

/* Activations and the peak of the live set, for the node order. */
static int activations(struct cx *c, struct ir_stats *s, const struct ir_graph *g)
{
	int nn = s->n_nodes;
	int max_id = -1;
	ir_for_each_node(g, n)
		if (n->id > max_id)
			max_id = n->id;
	int *pos = max_id >= 0 ? ir_alloc_array((size_t)max_id + 1, sizeof(int)) : NULL;
	double *delta = ir_alloc_array((size_t)nn + 1, sizeof(double));
	if ((max_id >= 0 && !pos) || !delta) {
		free(pos);
		free(delta);
		return IR_ENOMEM;
	}
	int i = 0;
	ir_for_each_node(g, n) {
		if (n->id >= 0)
			pos[n->id] = i;
		i++;
	}
	s->peak_index = -1;
	s->peak_node_id = -1;
	for (size_t k = 0; k < g->n_values; k++) {
		const struct ir_value *v = g->values[k];
		if (ir_value_is_const(v) || (!v->producer && !v->is_input))
			continue;
		if (v->producer && v->producer->graph != g)
			continue;
		int start = v->producer && v->producer->id >= 0 ? pos[v->producer->id] : 0;
		int end = start;
		for (size_t u = 0; u < v->n_uses; u++) {
			const struct ir_node *un = v->uses[u].node;
			if (un && un->graph == g && un->id >= 0 && un->id <= max_id && pos[un->id] > end)
				end = pos[un->id];
		}
		if (v->is_output && nn > 0)
			end = nn - 1;
		s->n_activations++;
		struct shp sh;
		probe(c, v, &sh);
		if (!sh.ok || !sh.bytes_ok) {
			s->n_activations_unknown++;
			continue;
		}
		s->activation_bytes += sh.bytes;
		if (nn > 0) {
			delta[start] += sh.bytes;
			delta[end + 1] -= sh.bytes;
		}
	}
	double live = 0;
	for (int p = 0; p < nn; p++) {
		live += delta[p];
		if (live > s->peak_bytes || s->peak_index < 0) {
			s->peak_bytes = live;
			s->peak_index = p;
		}
	}
	if (nn == 0)
		s->peak_bytes = s->activation_bytes;
	else
		s->peak_node_id = s->nodes[s->peak_index].id;
	free(pos);
	free(delta);
	return 0;
}

struct ir_stats *ir_stats_new(const struct ir_model *m, struct ir_diag *d)
{
	if (!m || !m->graph) {
		ir_diag_err(d, IR_ERR, "no graph");
		return NULL;
	}
	const struct ir_graph *g = m->graph;
	struct ir_stats *s = calloc(1, sizeof(*s));
	struct cx c = { .m = m };
	struct ablk *arena = NULL;
	struct cx nc = { .m = m, .arena = &arena };
	int rc = 0;
	if (!s)
		goto oom;
	s->graph_name = ir_strdup(g->name ? g->name : "");
	s->nodes = g->n_nodes ? ir_alloc_array((size_t)g->n_nodes, sizeof(*s->nodes)) : NULL;
	if (!s->graph_name || (g->n_nodes && !s->nodes))
		goto oom;
	ir_for_each_node(g, n) {
		if (s->n_nodes >= g->n_nodes)
			break;
		if ((s->n_nodes & 1023) == 0 && ir_interrupted) {
			ir_diag_err(d, IR_EINTR, "counting costs interrupted");
			goto fail;
		}
		struct ir_node_cost *o = &s->nodes[s->n_nodes++];
		cx_reset(&nc);
		cost_node(&nc, n, o);
		if (nc.oom)
			goto oom;
		merge_syms(&c, o->symbols, o->n_symbols);
		if (!o->known) {
			s->n_unknown++;
			continue;
		}
		s->macs += o->macs;
		s->flops += o->flops;
		s->bytes_read += o->bytes_read;
		s->bytes_written += o->bytes_written;
	}
	double b = s->bytes_read + s->bytes_written;
	s->intensity = b > 0 ? s->flops / b : 0;
	if (op_sums(s) || prec_sums(s) || const_sums(&c, s, g) || activations(&c, s, g) || c.oom)
		goto oom;
	if (c.n_syms) {
		s->symbols = ir_alloc_array(c.n_syms, sizeof(char *));
		if (!s->symbols)
			goto oom;
		for (size_t i = 0; i < c.n_syms; i++)
			s->symbols[i] = c.syms[i];
		s->n_symbols = (int)c.n_syms;
		c.n_syms = 0;
		qsort(s->symbols, (size_t)s->n_symbols, sizeof(char *), cmp_str);
	}
	cx_clear(&c);
	cx_clear(&nc);
	s->mem = arena;
	return s;
oom:
	rc = IR_ENOMEM;
	ir_diag_err(d, rc, "out of memory counting costs");
fail:
	cx_clear(&c);
	cx_clear(&nc);
	if (s)
		s->mem = arena;
	else
		for (struct ablk *k = arena, *nk; k; k = nk) {
			nk = k->next;
			free(k);
		}
	ir_stats_free(s);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Precision                                                                 */
/* ------------------------------------------------------------------------ */

int ir_precision_class(int dtype)
{
	switch (dtype) {
	case IR_INT8: case IR_UINT8: return IR_INT8;
	case IR_INT4: case IR_UINT4: return IR_INT4;
	case IR_INT2: case IR_UINT2: return IR_INT2;
	case IR_INT16: case IR_UINT16: return IR_INT16;
	case IR_F8E4M3FN: case IR_F8E4M3FNUZ: case IR_F8E5M2: case IR_F8E5M2FNUZ: return IR_F8E4M3FN;
	default: return dtype;
	}
}

const char *ir_precision_name(int prec)
{
	switch (ir_precision_class(prec)) {
	case IR_INT8: return "int8";
	case IR_INT4: return "int4";
	case IR_INT2: return "int2";
	case IR_INT16: return "int16";
	case IR_F8E4M3FN: return "fp8";
	case IR_F4E2M1: return "fp4";
	case 0: return "?";
	default: return ir_dtype_name(prec);
	}
}

/* The element type of v as inferred or declared (0: not known). */
static int elem_of(const struct ir_value *v)
{
	const struct ir_value *dv = defining(v);
	const struct ir_tensor *t = dv ? ir_value_const(dv) : NULL;
	if (t)
		return t->dtype;
	const struct ir_type *ty = v ? ir_value_type(v) : NULL;
	return ty && (ty->kind == IR_TYPE_TENSOR || ty->kind == IR_TYPE_SPARSE_TENSOR) ? ty->elem : 0;
}

static bool passes_data(int op)
{
	return op == IR_OP_Reshape || op == IR_OP_Transpose || op == IR_OP_Flatten || op == IR_OP_Squeeze ||
	       op == IR_OP_Unsqueeze || op == IR_OP_Identity;
}

int ir_dequantized_dtype(const struct ir_value *v, const struct ir_node **dq)
{
	if (dq)
		*dq = NULL;
	/* a chain of shape-only ops is short in practice; the bound keeps a hostile graph cheap */
	for (int hops = 0; v && v->producer && hops < 16; hops++) {
		const struct ir_node *p = v->producer;
		if (p->op == IR_OP_DequantizeLinear) {
			if (p->n_inputs < 1 || !p->inputs[0])
				return 0;
			if (dq)
				*dq = p;
			return elem_of(p->inputs[0]);
		}
		if (p->op < 0 || !passes_data(p->op) || p->n_inputs < 1)
			return 0;
		v = p->inputs[0];
	}
	return 0;
}

bool ir_node_is_weight_dq(const struct ir_node *n, int *dtype)
{
	if (n->op != IR_OP_DequantizeLinear || n->n_inputs < 1 || !n->inputs[0])
		return false;
	const struct ir_tensor *t = ir_value_const(n->inputs[0]);
	if (!t || n->inputs[0]->is_input)
		return false;
	if (dtype)
		*dtype = t->dtype;
	return true;
}

/* The node's own float type: output 0's, else the first float input's; else output 0's type. */
static int own_precision(const struct ir_node *n)
{
	int out = n->n_outputs > 0 && n->outputs[0] ? elem_of(n->outputs[0]) : 0;
	if (out && ir_dtype_is_float(out))
		return out;
	for (int i = 0; i < n->n_inputs; i++) {
		int e = n->inputs[i] ? elem_of(n->inputs[i]) : 0;
		if (e && ir_dtype_is_float(e))
			return e;
	}
	return out;
}

static bool weight_op(const struct ir_node *n)
{
	if (n->op == IR_OP_Conv || n->op == IR_OP_ConvTranspose || n->op == IR_OP_Gemm || n->op == IR_OP_MatMul)
		return true;
	return n->op == IR_OP_UNKNOWN && n->domain && !strcmp(n->domain, "ai.ogsh") &&
	       (!strcmp(n->op_type, "FusedConv") || !strcmp(n->op_type, "FusedGemm"));
}

int ir_node_precision(const struct ir_node *n)
{
	if (n->op == IR_OP_DequantizeLinear) {
		int e = n->n_outputs > 0 && n->outputs[0] ? elem_of(n->outputs[0]) : 0;
		return e ? e : IR_FLOAT;
	}
	if (n->op == IR_OP_QuantizeLinear) {
		int e = n->n_inputs > 0 && n->inputs[0] ? elem_of(n->inputs[0]) : 0;
		return e ? e : IR_FLOAT;
	}
	if (weight_op(n)) {
		int w = n->n_inputs > 1 ? ir_dequantized_dtype(n->inputs[1], NULL) : 0;
		if (w)
			return ir_precision_class(w);
		int a = n->n_inputs > 0 ? ir_dequantized_dtype(n->inputs[0], NULL) : 0;
		if (a)
			return ir_precision_class(a);
		return own_precision(n);
	}
	/* every non-constant float input dequantized: the first one's class */
	int q = 0;
	bool all = true;
	for (int i = 0; i < n->n_inputs && all; i++) {
		const struct ir_value *v = n->inputs[i];
		if (!v || is_const(v))
			continue;
		int dq = ir_dequantized_dtype(v, NULL);
		if (dq) {
			if (!q)
				q = ir_precision_class(dq);
			continue;
		}
		int e = elem_of(v);
		if (!e || ir_dtype_is_float(e))
			all = false;
	}
	if (q && all)
		return q;
	return own_precision(n);
}

int ir_qdq_params(const struct ir_node *n, struct ir_qdq *q)
{
	memset(q, 0, sizeof(*q));
	if ((n->op != IR_OP_QuantizeLinear && n->op != IR_OP_DequantizeLinear) || n->n_inputs < 2)
		return IR_ERR;
	const struct ir_value *x = n->inputs[0], *sv = n->inputs[1], *zv = n->n_inputs > 2 ? n->inputs[2] : NULL;
	q->weight = x && !x->is_input && ir_value_is_const(x);
	q->has_zero_point = zv != NULL;
	q->zero_point = zv && !zv->is_input ? ir_value_const(zv) : NULL;
	/* the quantized type: x's for a DequantizeLinear; the zero point's, output_dtype or the output's for a QuantizeLinear */
	if (n->op == IR_OP_DequantizeLinear) {
		q->dtype = x ? elem_of(x) : 0;
	} else {
		int64_t od = ir_node_attr_int(n, "output_dtype", 0);
		q->dtype = zv ? elem_of(zv) : 0;
		if (!q->dtype && od > 0 && od < IR_DTYPE_COUNT)
			q->dtype = (int)od;
		if (!q->dtype && n->n_outputs > 0 && n->outputs[0])
			q->dtype = elem_of(n->outputs[0]);
		if (!q->dtype && !zv)
			q->dtype = IR_UINT8;   /* the default of the op */
	}
	q->block_size = ir_node_attr_int(n, "block_size", 0);
	q->axis = ir_node_attr_int(n, "axis", 1);
	const struct ir_type *xt = x ? ir_value_type(x) : NULL;
	if (xt && xt->kind == IR_TYPE_TENSOR && xt->rank > 0 && q->axis < 0 && q->axis >= -xt->rank)
		q->axis += xt->rank;
	const struct ir_tensor *st = sv && !sv->is_input ? ir_value_const(sv) : NULL;
	q->scale = st;
	if (!st || st->dtype == IR_STRING || (st->numel && !ir_tensor_data(st)))
		return 0;   /* IR_QDQ_UNKNOWN */
	q->n_scales = st->numel;
	q->kind = q->block_size > 0 ? IR_QDQ_BLOCKED : st->numel > 1 || st->rank > 0 ? IR_QDQ_CHANNEL : IR_QDQ_TENSOR;
	if (q->kind == IR_QDQ_CHANNEL && st->numel == 1 && st->rank <= 1)
		q->kind = IR_QDQ_TENSOR;   /* a [1] scale is per tensor */
	if (ir_tensor_check(st, NULL))
		return 0;
	for (uint64_t i = 0; i < st->numel; i++) {
		double v = ir_tensor_get_f64(st, i);
		if (i == 0 || v < q->scale_min)
			q->scale_min = v;
		if (i == 0 || v > q->scale_max)
			q->scale_max = v;
	}
	const struct ir_tensor *zt = q->zero_point;
	if (zt && zt->dtype != IR_STRING && (!zt->numel || ir_tensor_data(zt)) && !ir_tensor_check(zt, NULL))
		for (uint64_t i = 0; i < zt->numel; i++) {
			double v = ir_tensor_get_f64(zt, i);
			if (i == 0 || v < q->zp_min)
				q->zp_min = v;
			if (i == 0 || v > q->zp_max)
				q->zp_max = v;
		}
	return 0;
}
