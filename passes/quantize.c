/*
 * quantize.c - the quantize pass: INT8 and FP8 QDQ quantization of Conv,
 * ConvTranspose, Gemm, MatMul (and ogsh's FusedConv, FusedGemm,
 * FusedAttention) from the session's calibration, and INT4 weight-only
 * quantization of MatMul/Gemm weights with blocked scales (round to
 * nearest, or activation-aware scaling: AWQ's idea).
 *
 * Everything written is standard ONNX: weights become quantized
 * initializers read by a DequantizeLinear (never float weights with Q+DQ),
 * activations get a QuantizeLinear+DequantizeLinear pair at the input of
 * the op that is quantized. The pass works in phases: choose the nodes (and
 * say why each other one stays float), collect the activation tensors they
 * read (the residual input of a skip Add, the inputs of a Concat that
 * feeds one, which then share one scale), take their ranges from the
 * calibration, raise the opset when DequantizeLinear needs it, and only
 * then rewrite.
 */
#include "passes/pass.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PREC_INT8, PREC_FP8, PREC_INT4 };
static const char *const prec_name[] = { "int8", "fp8", "int4" };

/* What a candidate node is, for where its weights and channels are. */
enum { K_NONE, K_CONV, K_CONVT, K_GEMM, K_MATMUL, K_ATTN };

#define FP8_MAX 448.0         /* the largest finite float8 E4M3FN */
#define MAX_WALK 16           /* commuting ops followed back from a tensor */

struct qopts {
	int prec;
	struct ir_calib_how how;
	bool per_tensor, asym, awq;
	bool keep_f16;                /* keep-float=float16: convert-fp16 runs on the result */
	int64_t min_ch, block;
	const char *exclude, *only;   /* comma lists as given (NULL or "": none) */
};

struct quse {
	struct ir_node *n;
	int slot;
};

/* An activation tensor that gets one Q/DQ pair, shared by its quantized readers. */
struct qact {
	struct ir_value *v;
	int dtype;
	const struct ir_calib_tensor *st;   /* the statistics its range comes from */
	const char *st_name;                /* whose they are (v's, or a tensor before a commuting op) */
	double lo, hi;                      /* the range: [-amax, amax] when symmetric */
	int parent;                         /* union-find: a Concat group shares one range */
	struct quse *uses;
	int n_uses, cap_uses;
	const char *why;                    /* what asked for it: "input", "residual", "Concat input" */
};

/* A node chosen for quantization. */
struct qnode {
	struct ir_node *n;
	int kind;
	int w_slot;          /* its constant weight input, -1 when none */
	int w_axis;          /* int8: the output-channel axis; int4: the K axis */
	int64_t cin, cout;   /* channels (0: not told) */
	int a_slot[3];       /* activation inputs */
	int n_a;
};

struct qstate {
	struct pass_ctx *c;
	struct qopts o;
	struct qact *acts;
	int n_acts, cap_acts;
	struct qnode *nodes;
	int n_nodes, cap_nodes;
	int *pos;            /* node id -> position in the graph's order */
	int n_pos;
	bool need_half;      /* a quantized tensor is float16/bfloat16: scales of that type need opset 19 */
	bool old_ir;         /* IR version < 4: every initializer is also listed as a graph input */
	int n_unlisted;      /* float weights of such a model taken out of the graph inputs */
	int64_t old_ir_version;
	/* weights already quantized: the DequantizeLinear output that stands for each */
	struct { struct ir_value *w; int axis; struct ir_value *dq; } *wdone;
	int n_wdone, cap_wdone;
	/* counters for the summary */
	int n_q, n_float, n_pairs, n_weights;
	double w_bytes_before, w_bytes_after;
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static int oom(struct pass_ctx *c)
{
	return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
}

static int elem_of(const struct ir_value *v)
{
	if (!v)
		return 0;
	const struct ir_type *t = ir_value_type(v);
	if (t && t->kind == IR_TYPE_TENSOR && t->elem)
		return t->elem;
	const struct ir_tensor *k = ir_value_const(v);
	return k ? k->dtype : 0;
}

static bool quant_float(int dt)
{
	return dt == IR_FLOAT || dt == IR_FLOAT16 || dt == IR_BFLOAT16;
}

static const char *dt_name(int dt)
{
	return dt ? ir_dtype_name(dt) : "of an unknown type";
}

static bool is_default_domain(const char *d)
{
	return !d || !*d || !strcmp(d, "ai.onnx");
}

/* A node name made unique in g from base. Owned by the caller. */
static char *unique_node_name(const struct ir_graph *g, const char *base)
{
	size_t n = strlen(base) + 24;
	char *s = malloc(n);
	if (!s)
		return NULL;
	snprintf(s, n, "%s", base);
	int count = 0;
	for (unsigned k = 1; ir_node_by_name(g, s, &count) && count; k++)
		snprintf(s, n, "%s_%u", base, k);
	return s;
}

/*
 * A new node op(in...) -> a new value named after `out_base` (made
 * unique), placed before `before`. Its output goes to *out.
 */
static struct ir_node *add_node(struct pass_ctx *c, struct ir_graph *g, const char *op, const char *node_base,
				struct ir_value *const *in, int n_in, const char *out_base, struct ir_node *before,
				struct ir_value **out)
{
	char *nn = unique_node_name(g, node_base);
	char *vn = pass_unique_name(g, out_base);
	struct ir_node *n = nn && vn ? ir_node_new(g, op, NULL, nn, n_in, 1, before) : NULL;
	free(nn);
	if (!n) {
		free(vn);
		oom(c);
		return NULL;
	}
	for (int i = 0; i < n_in; i++)
		if (ir_node_set_input(n, i, in[i])) {
			free(vn);
			oom(c);
			return NULL;
		}
	struct ir_value *v = ir_value_new(g, vn, c->d);
	free(vn);
	if (!v || ir_node_set_output(n, 0, v, c->d)) {
		if (c->d && !c->d->error)
			oom(c);
		return NULL;
	}
	*out = v;
	return n;
}

/* A scalar or 1-D initializer of float dtype `dt` from doubles. */
static struct ir_value *float_init(struct pass_ctx *c, const char *base, int dt, int rank, const int64_t *dims,
				   const double *v)
{
	struct ir_tensor *t = pass_tensor_from_f64(dt, rank, dims, v, c->d);
	if (!t)
		return NULL;
	struct ir_value *iv = pass_new_init(c->m->graph, base, t, c->d);
	ir_tensor_unref(t);
	return iv;
}

/* A scalar zero point of dtype dt holding the byte `b`. */
static struct ir_value *zp_init(struct pass_ctx *c, const char *base, int dt, uint8_t b)
{
	struct ir_tensor *t = ir_tensor_new(dt, 0, NULL, c->d);
	if (!t)
		return NULL;
	((uint8_t *)ir_tensor_mutable(t))[0] = b;
	struct ir_value *iv = pass_new_init(c->m->graph, base, t, c->d);
	ir_tensor_unref(t);
	return iv;
}

/* v rounded to float dtype dt (what a scale of that type holds). */
static double round_to(int dt, double v)
{
	switch (dt) {
	case IR_FLOAT16: return ir_f16_to_f32(ir_f32_to_f16((float)v));
	case IR_BFLOAT16: return ir_bf16_to_f32(ir_f32_to_bf16((float)v));
	default: return (float)v;
	}
}

/* A usable scale of dtype dt: amax / qmax, rounded to dt, never 0 or below dt's smallest normal. */
static double make_scale(int dt, double amax, double qmax)
{
	double s = amax > 0 && isfinite(amax) ? amax / qmax : 1.0;
	double tiny = dt == IR_FLOAT16 ? 6.103515625e-05 : 1.1754943508222875e-38;
	if (s < tiny)
		s = tiny;
	s = round_to(dt, s);
	if (!(s > 0))
		s = tiny;
	return s;
}

/* Round half to even, as QuantizeLinear does. */
static double rne(double v)
{
	return nearbyint(v);
}

/*
 * float8 E4M3FN: the byte nearest to v (ties to the even code), saturating
 * at +-448 as QuantizeLinear's saturate=1 does. Codes 0x00..0x7e are the
 * finite non-negative values in increasing order, so the two codes around
 * |v| are neighbours and exactly one of them is even.
 */
static uint8_t to_e4m3(double v)
{
	static double tab[127];
	static bool ready;
	if (!ready) {
		for (int i = 0; i < 127; i++) {
			uint8_t b = (uint8_t)i;
			tab[i] = ir_elem_to_f64(IR_F8E4M3FN, &b, 0);
		}
		ready = true;
	}
	if (isnan(v))
		return 0x7f;
	uint8_t sign = v < 0 ? 0x80 : 0;
	double a = fabs(v);
	if (a >= tab[126])
		return sign | 0x7e;
	int lo = 0, hi = 126;   /* tab[lo] <= a < tab[hi] */
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;
		if (tab[mid] <= a)
			lo = mid;
		else
			hi = mid;
	}
	double dl = a - tab[lo], dh = tab[hi] - a;
	int code = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
	return sign | (uint8_t)code;
}

/* ------------------------------------------------------------------------ */
/* Selection: exclude= and only=                                             */
/* ------------------------------------------------------------------------ */

/* Whether item (a node name, "n<id>", an op type or a glob pattern) names n. */
static bool item_matches(const char *item, const struct ir_node *n)
{
	const char *name = n->name ? n->name : "";
	char idn[32];
	snprintf(idn, sizeof(idn), "n%d", n->id);
	if (!strcmp(item, name) || !strcmp(item, idn) || !strcmp(item, n->op_type))
		return true;
	if (strpbrk(item, "*?[") && (fnmatch(item, name, 0) == 0 || fnmatch(item, idn, 0) == 0))
		return true;
	return false;
}

/*
 * The next item of a comma list starting at *p, into item (NUL-ended; empty
 * for an empty item or one longer than the buffer); *p moves past it and its
 * comma. False at the end of the list.
 */
static bool list_next(const char **p, char *item, size_t size)
{
	if (!*p || !**p)
		return false;
	const char *e = strchr(*p, ',');
	size_t len = e ? (size_t)(e - *p) : strlen(*p);
	item[0] = 0;
	if (len && len < size) {
		memcpy(item, *p, len);
		item[len] = 0;
	}
	*p += len;
	if (**p == ',')
		(*p)++;
	return true;
}

/* The item of the comma list that names n, copied into buf; false when none. */
static bool list_matches(const char *list, const struct ir_node *n, char *buf, size_t size)
{
	char item[512];
	for (const char *p = list; list_next(&p, item, sizeof(item));)
		if (item[0] && item_matches(item, n)) {
			snprintf(buf, size, "%s", item);
			return true;
		}
	return false;
}

/* Notes each item of `list` (option `opt`) that names no node of g. */
static void note_unmatched(struct pass_ctx *c, const char *opt, const char *list)
{
	char item[512];
	for (const char *p = list; list_next(&p, item, sizeof(item));) {
		if (!item[0])
			continue;
		bool any = false;
		ir_for_each_node(c->m->graph, n)
			if (item_matches(item, n)) {
				any = true;
				break;
			}
		if (!any)
			pass_note(c, NULL, "%s: '%s' names no node, op type or pattern of the graph", opt, item);
	}
}

/* ------------------------------------------------------------------------ */
/* Candidates                                                                */
/* ------------------------------------------------------------------------ */

static int kind_of(const struct ir_node *n)
{
	switch (n->op) {
	case IR_OP_Conv: case IR_OP_ogsh_FusedConv: return K_CONV;
	case IR_OP_ConvTranspose: return K_CONVT;
	case IR_OP_Gemm: case IR_OP_ogsh_FusedGemm: return K_GEMM;
	case IR_OP_MatMul: return K_MATMUL;
	case IR_OP_ogsh_FusedAttention: return K_ATTN;
	default: return K_NONE;
	}
}

/* Ops a quantized tensor passes through unchanged in scale (TensorRT commutes Q/DQ across them). */
static bool commutes(const struct ir_node *p)
{
	switch (p->op) {
	case IR_OP_Reshape: case IR_OP_Transpose: case IR_OP_Flatten: case IR_OP_Squeeze: case IR_OP_Unsqueeze:
		return p->n_outputs >= 1 && p->outputs[0];
	case IR_OP_MaxPool:
		/* the Indices output would say where the maxima were: a different computation */
		return p->n_outputs >= 1 && p->outputs[0] && (p->n_outputs < 2 || !p->outputs[1] ||
							     !pass_n_readers(p->outputs[1]));
	default:
		return false;
	}
}

/*
 * The statistics of v: its own, or those of the tensor before the
 * commuting ops that made it (the range is the same through a reshape;
 * MaxPool keeps the largest values). NULL when none; *from gets the name.
 */
static const struct ir_calib_tensor *find_stats(const struct ir_calib *cal, const struct ir_value *v,
						const char **from)
{
	if (!cal)
		return NULL;
	for (int k = 0; v && k < MAX_WALK; k++) {
		const struct ir_calib_tensor *t = ir_calib_find(cal, v->name);
		if (t && t->count > 0) {
			*from = v->name;
			return t;
		}
		struct ir_node *p = v->producer;
		if (!p || !commutes(p) || p->outputs[0] != v || p->n_inputs < 1)
			return NULL;
		v = p->inputs[0];
	}
	return NULL;
}

static int act_find(struct qstate *S, const struct ir_value *v)
{
	for (int i = 0; i < S->n_acts; i++)
		if (S->acts[i].v == v)
			return i;
	return -1;
}

/* Records that input `slot` of n reads activation v through its Q/DQ pair. */
static int act_add(struct qstate *S, struct ir_value *v, const struct ir_calib_tensor *st, const char *st_name,
		   struct ir_node *n, int slot, const char *why)
{
	int i = act_find(S, v);
	if (i < 0) {
		if (S->n_acts == S->cap_acts) {
			int cap = S->cap_acts ? 2 * S->cap_acts : 32;
			struct qact *a = realloc(S->acts, sizeof(*a) * (size_t)cap);
			if (!a)
				return oom(S->c);
			S->acts = a;
			S->cap_acts = cap;
		}
		i = S->n_acts++;
		S->acts[i] = (struct qact){ .v = v, .dtype = elem_of(v), .st = st, .st_name = st_name, .parent = i,
					    .why = why };
		if (S->acts[i].dtype != IR_FLOAT)
			S->need_half = true;
	}
	struct qact *a = &S->acts[i];
	for (int k = 0; k < a->n_uses; k++)
		if (a->uses[k].n == n && a->uses[k].slot == slot)
			return 0;
	if (a->n_uses == a->cap_uses) {
		int cap = a->cap_uses ? 2 * a->cap_uses : 4;
		struct quse *u = realloc(a->uses, sizeof(*u) * (size_t)cap);
		if (!u)
			return oom(S->c);
		a->uses = u;
		a->cap_uses = cap;
	}
	a->uses[a->n_uses++] = (struct quse){ n, slot };
	return 0;
}

static int uf_find(struct qstate *S, int i)
{
	while (S->acts[i].parent != i) {
		S->acts[i].parent = S->acts[S->acts[i].parent].parent;
		i = S->acts[i].parent;
	}
	return i;
}

static struct qnode *qnode_of(struct qstate *S, const struct ir_node *n)
{
	for (int i = 0; i < S->n_nodes; i++)
		if (S->nodes[i].n == n)
			return &S->nodes[i];
	return NULL;
}

/*
 * Where a candidate's weights and channels are: w_slot, w_axis (int8's
 * per-channel axis and, for int4, the K axis into *k_axis), cin/cout.
 * NULL, or why the weights cannot be quantized (the node then stays float).
 */
static const char *weight_layout(const struct qstate *S, struct qnode *q, const struct ir_tensor *w, int *k_axis,
				 char *why, size_t size)
{
	const struct ir_node *n = q->n;
	int64_t group = ir_node_attr_int(n, "group", 1);
	if (group < 1)
		group = 1;
	switch (q->kind) {
	case K_CONV:
	case K_CONVT:
		if (w->rank < 3) {
			snprintf(why, size, "its weights have rank %d, not a conv kernel's (3 or more)", w->rank);
			return why;
		}
		/* Conv's kernel is [cout, cin/group, ...], ConvTranspose's [cin, cout/group, ...] */
		q->w_axis = q->kind == K_CONV ? 0 : 1;
		q->cout = q->kind == K_CONV ? w->dims[0] : w->dims[1] * group;
		q->cin = q->kind == K_CONV ? w->dims[1] * group : w->dims[0];
		return NULL;
	case K_GEMM: {
		if (w->rank != 2) {
			snprintf(why, size, "its B has rank %d, not 2", w->rank);
			return why;
		}
		bool tb = ir_node_attr_int(n, "transB", 0) != 0;
		q->w_axis = tb ? 0 : 1;
		*k_axis = tb ? 1 : 0;
		q->cout = w->dims[q->w_axis];
		q->cin = w->dims[*k_axis];
		return NULL;
	}
	case K_MATMUL:
		if (w->rank < 1) {
			snprintf(why, size, "its B is a scalar");
			return why;
		}
		if (w->rank == 1) {
			if (S->o.prec == PREC_INT4) {
				snprintf(why, size, "its B is 1-D: int4 blocks need a [K, N] matrix");
				return why;
			}
			q->w_axis = -1;   /* one scale */
			q->cin = w->dims[0];
			q->cout = 1;
			return NULL;
		}
		q->w_axis = w->rank - 1;
		*k_axis = w->rank - 2;
		q->cout = w->dims[w->rank - 1];
		q->cin = w->dims[w->rank - 2];
		return NULL;
	default:
		snprintf(why, size, "it has no weights");
		return why;
	}
}

static int add_qnode(struct qstate *S, const struct qnode *q)
{
	if (S->n_nodes == S->cap_nodes) {
		int cap = S->cap_nodes ? 2 * S->cap_nodes : 32;
		struct qnode *a = realloc(S->nodes, sizeof(*a) * (size_t)cap);
		if (!a)
			return oom(S->c);
		S->nodes = a;
		S->cap_nodes = cap;
	}
	S->nodes[S->n_nodes++] = *q;
	return 0;
}

/*
 * The constant weights at input i of n: an initializer that is not a graph
 * input, or a Constant's; in a model of IR version < 4, where every
 * initializer is listed as a graph input too, an initializer that is one.
 */
static const struct ir_tensor *weight_const(const struct qstate *S, const struct ir_node *n, int i)
{
	const struct ir_tensor *t = pass_const_input(n, i);
	if (t || !S->old_ir || i >= n->n_inputs || !n->inputs[i])
		return t;
	return n->inputs[i]->init;
}

/* Drops the float weights wv when nothing reads them any more (in an IR < 4
 * model, taking them out of the graph inputs first). */
static void drop_weights(struct qstate *S, struct ir_value *wv)
{
	if (pass_n_readers(wv))
		return;
	if (S->old_ir && wv->is_input && wv->init && !wv->producer) {
		struct ir_graph *g = S->c->m->graph;
		int k = 0;
		for (int i = 0; i < g->n_inputs; i++)
			if (g->inputs[i] != wv)
				g->inputs[k++] = g->inputs[i];
		g->n_inputs = k;
		wv->is_input = false;
		S->n_unlisted++;
	}
	pass_drop_dead_consts(&wv, 1);
}

/* A candidate left float, with why (counted): "<why>: kept float32". */
static void keep_float(struct qstate *S, const struct ir_node *n, int dt, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void keep_float(struct qstate *S, const struct ir_node *n, int dt, const char *fmt, ...)
{
	char why[800];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	S->n_float++;
	if (quant_float(dt))
		pass_rejected(S->c, n, "%s: kept %s", why, ir_dtype_name(dt));
	else
		pass_rejected(S->c, n, "%s: left as it is", why);
}

/*
 * Looks at one candidate: decides whether it is quantized (recording its
 * weights and activation inputs) or stays float (with the reason in the
 * report). 0 or an error code.
 */
static int plan_node(struct qstate *S, struct ir_node *n, int kind)
{
	struct pass_ctx *c = S->c;
	char item[512], why[600];
	int dt = n->n_inputs > 0 ? elem_of(n->inputs[0]) : 0;
	if (list_matches(S->o.exclude, n, item, sizeof(item))) {
		keep_float(S, n, dt, "excluded by exclude=%s", item);
		return 0;
	}
	if (S->o.only && *S->o.only && !list_matches(S->o.only, n, item, sizeof(item))) {
		keep_float(S, n, dt, "not named by only=%s", S->o.only);
		return 0;
	}
	if (n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1] || n->n_outputs < 1 || !n->outputs[0]) {
		keep_float(S, n, dt, "it does not have the usual inputs and output");
		return 0;
	}
	for (int i = 0; i < n->n_inputs; i++) {
		struct ir_node *p = n->inputs[i] ? n->inputs[i]->producer : NULL;
		if (p && p->op == IR_OP_DequantizeLinear) {
			pass_rejected(c, n, "already quantized: its input '%s' comes from a DequantizeLinear: left as it is",
				      n->inputs[i]->name);
			return 0;
		}
	}
	if (!quant_float(dt)) {
		keep_float(S, n, dt, "its input '%s' is %s, not float32, float16 or bfloat16", n->inputs[0]->name,
			   dt_name(dt));
		return 0;
	}
	if (ir_value_is_const(n->inputs[0]) && !n->inputs[0]->is_input) {
		keep_float(S, n, dt, "its input '%s' is a constant, not an activation", n->inputs[0]->name);
		return 0;
	}

	struct qnode q = { .n = n, .kind = kind, .w_slot = -1, .w_axis = -1 };
	int k_axis = -1;
	const struct ir_tensor *w = kind == K_ATTN ? NULL : weight_const(S, n, 1);
	if (w) {
		if (!quant_float(w->dtype)) {
			keep_float(S, n, dt, "its weights '%s' are %s, not float32, float16 or bfloat16",
				 n->inputs[1]->name, ir_dtype_name(w->dtype));
			return 0;
		}
		if (weight_layout(S, &q, w, &k_axis, why, sizeof(why))) {
			keep_float(S, n, dt, "%s", why);
			return 0;
		}
		q.w_slot = 1;
		if (w->dtype != IR_FLOAT)
			S->need_half = true;
	} else if (kind == K_CONV || kind == K_CONVT) {
		keep_float(S, n, dt, "its weights '%s' are not a constant", n->inputs[1]->name);
		return 0;
	}

	/* fuse-qkv's packed attention: Q, K and V are one tensor, not two activations to quantize apart */
	if (kind == K_ATTN && (n->n_inputs < 2 || !n->inputs[1])) {
		keep_float(S, n, dt, "it reads Q, K and V packed in one input (fuse-qkv): quantized attention reads Q "
			   "and K apart");
		return 0;
	}

	/* int4: weight-only, MatMul and Gemm */
	if (S->o.prec == PREC_INT4) {
		if (kind == K_CONV || kind == K_CONVT || kind == K_ATTN) {
			snprintf(why, sizeof(why), "int4 is weight-only quantization of MatMul and Gemm weights "
				 "(blocks of K for GEMM kernels); %s is refused", n->op_type);
			keep_float(S, n, dt, "%s", why);
			return 0;
		}
		if (!w) {
			keep_float(S, n, dt, "its B '%s' is an activation: int4 quantizes constant weights only",
				 n->inputs[1]->name);
			return 0;
		}
		q.w_axis = k_axis;
	}

	/* the channel rule */
	if (q.w_slot >= 0 && S->o.min_ch > 0) {
		if (q.cin < S->o.min_ch || q.cout < S->o.min_ch) {
			bool in = q.cin < S->o.min_ch;
			keep_float(S, n, dt, "%lld %s channels, below %lld", (long long)(in ? q.cin : q.cout),
				 in ? "input" : "output", (long long)S->o.min_ch);
			return 0;
		}
	}

	/* activations and their calibration (int8, fp8) */
	if (S->o.prec != PREC_INT4) {
		int slots[3], ns = 0;
		slots[ns++] = 0;
		if ((kind == K_GEMM || kind == K_MATMUL || kind == K_ATTN) && !w)
			slots[ns++] = 1;
		if (kind == K_CONV && n->op == IR_OP_ogsh_FusedConv && n->n_inputs > 3 && n->inputs[3])
			slots[ns++] = 3;   /* the residual Z */
		const struct ir_calib_tensor *st[3];
		const char *from[3];
		for (int i = 0; i < ns; i++) {
			struct ir_value *v = n->inputs[slots[i]];
			int vdt = elem_of(v);
			if (ir_value_is_const(v) && !v->is_input) {
				keep_float(S, n, dt, "its input '%s' is a constant, not an activation", v->name);
				return 0;
			}
			if (!quant_float(vdt)) {
				keep_float(S, n, dt, "its input '%s' is %s, not float32, float16 or bfloat16", v->name,
					 dt_name(vdt));
				return 0;
			}
			if (!(st[i] = find_stats(c->calib, v, &from[i]))) {
				keep_float(S, n, dt, "no calibration for its input '%s'", v->name);
				return 0;
			}
		}
		for (int i = 0; i < ns; i++) {
			int rc = act_add(S, n->inputs[slots[i]], st[i], from[i], n, slots[i],
					 slots[i] == 3 ? "residual" : "input");
			if (rc)
				return rc;
			q.a_slot[q.n_a++] = slots[i];
		}
	}
	return add_qnode(S, &q);
}

/* The node's position in the graph's order (ids past the table: after everything). */
static int pos_of(const struct qstate *S, const struct ir_node *n)
{
	return n && n->id >= 0 && n->id < S->n_pos ? S->pos[n->id] : 1 << 30;
}

/*
 * The residual input of a skip-connection Add: when one input of an Add
 * comes from a quantized Conv (or ConvTranspose, FusedConv), the other one
 * is quantized too, so the Add can run as the conv's int8 epilogue. When
 * both come from quantized convs, the one computed first is the residual
 * (the later conv is the one the Add fuses into).
 */
static int plan_residuals(struct qstate *S)
{
	struct pass_ctx *c = S->c;
	char item[512];
	ir_for_each_node(c->m->graph, n) {
		if (n->op != IR_OP_Add || n->n_inputs != 2 || !n->inputs[0] || !n->inputs[1] || n->inputs[0] == n->inputs[1])
			continue;
		bool from_conv[2];
		struct ir_node *conv[2] = { NULL, NULL };
		for (int i = 0; i < 2; i++) {
			struct ir_value *v = n->inputs[i];
			struct ir_node *p = v->producer;
			/* an unfolded inference BatchNormalization is folded into the conv by the builder */
			if (p && p->op == IR_OP_BatchNormalization && p->n_inputs > 0 && p->inputs[0] &&
			    pass_only_reader(p->inputs[0]) == p) {
				v = p->inputs[0];
				p = v->producer;
			}
			struct qnode *q = p ? qnode_of(S, p) : NULL;
			from_conv[i] = q && (q->kind == K_CONV || q->kind == K_CONVT) && p->outputs[0] == v;
			conv[i] = p;
		}
		if (!from_conv[0] && !from_conv[1])
			continue;
		int r;
		if (from_conv[0] && from_conv[1])
			r = pos_of(S, conv[0]) < pos_of(S, conv[1]) ? 0 : 1;
		else
			r = from_conv[0] ? 1 : 0;
		struct ir_value *v = n->inputs[r];
		if (list_matches(S->o.exclude, n, item, sizeof(item))) {
			pass_note(c, n, "residual Add excluded by exclude=%s: its input '%s' stays float", item, v->name);
			continue;
		}
		if ((ir_value_is_const(v) && !v->is_input) || (v->producer && v->producer->op == IR_OP_DequantizeLinear))
			continue;   /* a bias, not a residual (fuse-conv-add folds it); or quantized already */
		int vdt = elem_of(v);
		if (!quant_float(vdt)) {
			pass_note(c, n, "residual input '%s' is %s: not quantized", v->name, dt_name(vdt));
			continue;
		}
		const char *from;
		const struct ir_calib_tensor *st = find_stats(c->calib, v, &from);
		if (!st) {
			pass_rejected(c, n, "no calibration for its residual input '%s': the skip Add stays float", v->name);
			continue;
		}
		int rc = act_add(S, v, st, from, n, r, "residual");
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Concat groups: a quantized tensor that a Concat made (through commuting
 * ops) has that Concat's inputs quantized too, all with one range (the
 * union of theirs), so the Concat moves integers. Runs over acts[] as it
 * grows (a Concat's input may come from another Concat).
 */
static int plan_concats(struct qstate *S)
{
	struct pass_ctx *c = S->c;
	for (int i = 0; i < S->n_acts; i++) {
		struct ir_value *v = S->acts[i].v;
		struct ir_node *p = v->producer;
		for (int k = 0; p && commutes(p) && k < MAX_WALK; k++)
			p = p->n_inputs > 0 && p->inputs[0] ? p->inputs[0]->producer : NULL;
		if (!p || p->op != IR_OP_Concat || p->n_outputs != 1 || !p->outputs[0])
			continue;
		char item[512];
		if (list_matches(S->o.exclude, p, item, sizeof(item))) {
			if (!p->mark) {
				pass_note(c, p, "Concat excluded by exclude=%s: its inputs stay float", item);
				p->mark = 1;
			}
			continue;
		}
		bool ok = true;
		const struct ir_calib_tensor *st[64];
		const char *from[64];
		if (p->n_inputs > 64) {
			pass_note(c, p, "Concat with %d inputs: its inputs are not given one shared scale", p->n_inputs);
			continue;
		}
		for (int j = 0; j < p->n_inputs && ok; j++) {
			struct ir_value *u = p->inputs[j];
			if (!u)
				continue;
			if (u->producer && u->producer->op == IR_OP_DequantizeLinear) {
				ok = false;   /* quantized already */
			} else if (ir_value_is_const(u) && !u->is_input) {
				pass_note(c, p, "Concat input '%s' is a constant: the inputs are not given one shared scale "
					  "(the Concat stays float, '%s' is quantized after it)", u->name, v->name);
				ok = false;
			} else if (!quant_float(elem_of(u))) {
				ok = false;
			} else if (!(st[j] = find_stats(c->calib, u, &from[j]))) {
				pass_note(c, p, "no calibration for Concat input '%s': the inputs are not given one shared "
					  "scale ('%s' is quantized after the Concat)", u->name, v->name);
				ok = false;
			}
		}
		if (!ok)
			continue;
		for (int j = 0; j < p->n_inputs; j++) {
			struct ir_value *u = p->inputs[j];
			if (!u)
				continue;
			int rc = act_add(S, u, st[j], from[j], p, j, "Concat input");
			if (rc)
				return rc;
			int a = uf_find(S, act_find(S, u)), b = uf_find(S, i);
			if (a != b)
				S->acts[a].parent = b;
		}
	}
	return 0;
}

/* The ranges: each tensor's from its statistics, then one per Concat group. */
static void plan_ranges(struct qstate *S)
{
	for (int i = 0; i < S->n_acts; i++) {
		struct qact *a = &S->acts[i];
		if (S->o.asym) {
			ir_calib_range(a->st, &S->o.how, &a->lo, &a->hi);
		} else {
			double m = ir_calib_amax(a->st, &S->o.how);
			a->lo = -m;
			a->hi = m;
		}
	}
	for (int i = 0; i < S->n_acts; i++) {
		int r = uf_find(S, i);
		if (r == i)
			continue;
		if (S->acts[i].lo < S->acts[r].lo)
			S->acts[r].lo = S->acts[i].lo;
		if (S->acts[i].hi > S->acts[r].hi)
			S->acts[r].hi = S->acts[i].hi;
	}
	for (int i = 0; i < S->n_acts; i++) {
		int r = uf_find(S, i);
		S->acts[i].lo = S->acts[r].lo;
		S->acts[i].hi = S->acts[r].hi;
	}
}

/* ------------------------------------------------------------------------ */
/* Raising the opset                                                         */
/* ------------------------------------------------------------------------ */

struct raise_ctx {
	struct pass_ctx *c;
	int64_t from, to;
	int converted;
	char *err;            /* why not (set once) */
	size_t err_size;
	bool failed;
};

static bool is_reduce(int op)
{
	switch (op) {
	case IR_OP_ReduceL1: case IR_OP_ReduceL2: case IR_OP_ReduceLogSum: case IR_OP_ReduceLogSumExp:
	case IR_OP_ReduceMax: case IR_OP_ReduceMean: case IR_OP_ReduceMin: case IR_OP_ReduceProd:
	case IR_OP_ReduceSum: case IR_OP_ReduceSumSquare:
		return true;
	default:
		return false;
	}
}

/* A Constant node before n in n's graph holding t; its output, or NULL. */
static struct ir_value *const_before(struct raise_ctx *R, struct ir_node *n, const char *base, struct ir_tensor *t)
{
	struct ir_graph *g = n->graph;
	struct ir_value *out = NULL;
	char nb[300];
	snprintf(nb, sizeof(nb), "%s_Constant", base);
	struct ir_node *k = add_node(R->c, g, "Constant", nb, NULL, 0, base, n, &out);
	if (!k)
		return NULL;
	struct ir_attr a = { 0 };
	a.name = strdup("value");
	a.type = IR_ATTR_TENSOR;
	a.has_type = true;
	ir_tensor_ref(t);
	a.t = t;
	if (!a.name || ir_node_set_attr(k, &a, R->c->d)) {
		ir_attr_clear(&a);
		oom(R->c);
		return NULL;
	}
	return out;
}

static void raise_fail(struct raise_ctx *R, const struct ir_node *n, const char *fmt, const char *what)
{
	if (R->failed)
		return;
	R->failed = true;
	char nb[128], text[400];
	snprintf(text, sizeof(text), fmt, what);
	snprintf(R->err, R->err_size, "node '%s' (%s) %s", pass_node_name(n, nb, sizeof(nb)), n->op_type, text);
}

/* Moves attribute `name` (ints) of n to a new int64 input at `slot`. */
static int attr_to_input(struct raise_ctx *R, struct ir_node *n, const char *name, int slot)
{
	struct ir_attr *a = ir_node_attr(n, name);
	if (!a || a->type != IR_ATTR_INTS)
		return 0;
	if (n->n_inputs > slot) {
		raise_fail(R, n, "has both its '%s' attribute and input", name);
		return 0;
	}
	int64_t dims[1] = { (int64_t)a->n };
	struct ir_tensor *t = ir_tensor_new(IR_INT64, 1, dims, R->c->d);
	if (!t)
		return IR_ENOMEM;
	if (a->n)
		memcpy(ir_tensor_mutable(t), a->ints, sizeof(int64_t) * a->n);
	char base[300];
	snprintf(base, sizeof(base), "%s_%s", n->outputs[0] ? n->outputs[0]->name : "node", name);
	struct ir_value *v = const_before(R, n, base, t);
	ir_tensor_unref(t);
	if (!v)
		return IR_ERR;
	while (n->n_inputs < slot)
		if (ir_node_add_input(n, NULL))
			return oom(R->c);
	if (ir_node_add_input(n, v))
		return oom(R->c);
	ir_node_remove_attr(n, name);
	R->converted++;
	return 0;
}

/* Clip's min/max attributes (before opset 11) as inputs. */
static int clip_to_inputs(struct raise_ctx *R, struct ir_node *n)
{
	struct ir_attr *mn = ir_node_attr(n, "min"), *mx = ir_node_attr(n, "max");
	if (!mn && !mx)
		return 0;
	int dt = n->n_inputs > 0 ? elem_of(n->inputs[0]) : 0;
	if (!quant_float(dt) && dt != IR_DOUBLE) {
		raise_fail(R, n, "has min/max attributes and an input of %s: cannot write them as inputs", dt_name(dt));
		return 0;
	}
	if (n->n_inputs != 1) {
		raise_fail(R, n, "has min/max attributes and %s inputs", n->n_inputs ? "several" : "no");
		return 0;
	}
	struct ir_attr *as[2] = { mn, mx };
	const char *names[2] = { "min", "max" };
	struct ir_value *vs[2] = { NULL, NULL };
	for (int i = 0; i < 2; i++) {
		if (!as[i])
			continue;
		double v = as[i]->f;
		struct ir_tensor *t = dt == IR_DOUBLE ? ir_tensor_new(IR_DOUBLE, 0, NULL, R->c->d)
						     : pass_tensor_from_f64(dt, 0, NULL, &v, R->c->d);
		if (!t)
			return IR_ERR;
		if (dt == IR_DOUBLE)
			*(double *)ir_tensor_mutable(t) = v;
		char base[300];
		snprintf(base, sizeof(base), "%s_%s", n->outputs[0] ? n->outputs[0]->name : "clip", names[i]);
		vs[i] = const_before(R, n, base, t);
		ir_tensor_unref(t);
		if (!vs[i])
			return IR_ERR;
	}
	if (ir_node_add_input(n, vs[0]) || (vs[1] && ir_node_add_input(n, vs[1])))
		return oom(R->c);
	ir_node_remove_attr(n, "min");
	ir_node_remove_attr(n, "max");
	R->converted++;
	return 0;
}

/* Checks (and where it can, converts) one node for the new opset. */
static int raise_node(struct raise_ctx *R, struct ir_node *n)
{
	if (R->failed || !is_default_domain(n->domain))
		return 0;
	if (n->op == IR_OP_UNKNOWN) {
		raise_fail(R, n, "is not an op ogsh knows: %s", "it cannot tell whether it means the same in the new opset");
		return 0;
	}
	int64_t from = R->from, to = R->to;
	int op = n->op;
	if ((op == IR_OP_Softmax || op == IR_OP_LogSoftmax || op == IR_OP_Hardmax) && from < 13 && to >= 13) {
		/* before 13: the input is flattened to 2-D at axis; after: one axis. The same when axis is the last. */
		int rank = n->n_inputs ? pass_rank_of(n->inputs[0]) : -1;
		int64_t axis = ir_node_attr_int(n, "axis", 1);
		if (rank < 0 || (axis < 0 ? axis + rank : axis) != rank - 1) {
			raise_fail(R, n, "%s", "flattens its input at 'axis' before opset 13 and works on one axis after: "
				   "the meaning changes unless axis is the last one");
			return 0;
		}
		if (!ir_node_attr(n, "axis") && pass_set_int_attr(n, "axis", 1, R->c->d))
			return IR_ERR;
	}
	if ((op == IR_OP_Resize && from < 11 && to >= 11) || (op == IR_OP_Upsample && to >= 10) ||
	    (op == IR_OP_Scatter && to >= 11)) {
		raise_fail(R, n, "%s", "changed meaning or was removed in the newer opset");
		return 0;
	}
	/* attributes the new opset no longer has */
	for (int i = 0; i < n->n_attrs && !R->failed; i++) {
		const char *an = n->attrs[i].name;
		const struct ir_attr_schema *s = ir_op_attr(op, an, 0);
		if (!s || ir_op_attr(op, an, to))
			continue;   /* unknown to the table (kept as is) or still there */
		int rc = 0;
		if (!strcmp(an, "consumed_inputs")) {
			ir_node_remove_attr(n, an);   /* a legacy hint with no meaning */
			i--;
			continue;
		}
		if ((op == IR_OP_Squeeze || op == IR_OP_Unsqueeze || is_reduce(op)) && !strcmp(an, "axes"))
			rc = attr_to_input(R, n, "axes", 1);
		else if (op == IR_OP_Split && !strcmp(an, "split"))
			rc = attr_to_input(R, n, "split", 1);
		else if (op == IR_OP_Clip && (!strcmp(an, "min") || !strcmp(an, "max")))
			rc = clip_to_inputs(R, n);
		else {
			char what[200];
			snprintf(what, sizeof(what), "has attribute '%s', which opset %lld does not have", an, (long long)to);
			raise_fail(R, n, "%s", what);
			return 0;
		}
		if (rc)
			return rc;
		i = -1;   /* the attribute list changed */
	}
	return 0;
}

static int raise_graph(struct ir_graph *g, void *arg)
{
	struct raise_ctx *R = arg;
	/* ids, not links: conversions insert Constant nodes */
	int cnt = g->n_nodes, k = 0;
	int *ids = malloc(sizeof(int) * (size_t)(cnt ? cnt : 1));
	if (!ids)
		return oom(R->c);
	ir_for_each_node(g, n)
		if (k < cnt)
			ids[k++] = n->id;
	int rc = 0;
	for (int i = 0; i < k && !rc && !R->failed; i++) {
		struct ir_node *n = ir_node_by_id(g, ids[i]);
		if (n)
			rc = raise_node(R, n);
	}
	free(ids);
	return rc;
}

/* The IR version an opset of the default domain needs. */
static int64_t ir_for_opset(int64_t opset)
{
	return opset >= 21 ? 10 : opset >= 19 ? 9 : opset >= 15 ? 8 : opset >= 13 ? 7 : opset >= 11 ? 6 : 3;
}

/*
 * Raises the model's default opset to `to` (with the functions of the
 * model that import it), converting the attributes that became inputs.
 * 0, or IR_ERR with why (nothing is kept then: the pass fails).
 */
static int raise_opset(struct pass_ctx *c, int64_t to, const char *need)
{
	struct ir_model *m = c->m;
	int64_t from = ir_model_opset(m, "");
	if (from >= to)
		return 0;
	char err[600] = "";
	struct raise_ctx R = { .c = c, .from = from ? from : 1, .to = to, .err = err, .err_size = sizeof(err) };
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "interrupted" : "out of memory");
	if ((rc = ir_graph_walk(m->graph, raise_graph, &R)))
		return rc;
	for (size_t i = 0; i < m->n_functions && !R.failed; i++) {
		struct ir_function *f = &m->functions[i];
		for (size_t j = 0; j < f->n_opsets; j++) {
			if (!is_default_domain(f->opsets[j].domain) || f->opsets[j].version >= to)
				continue;
			R.from = f->opsets[j].version;
			if ((rc = ir_graph_walk(f->body, raise_graph, &R)))
				return rc;
			f->opsets[j].version = to;
		}
	}
	if (R.failed)
		return ir_diag_err(c->d, IR_ERR, "%s needs ONNX opset %lld, the model imports %lld, and it cannot be "
				   "raised safely: %s", need, (long long)to, (long long)from, err);
	bool found = false;
	for (size_t i = 0; i < m->n_opsets; i++)
		if (is_default_domain(m->opsets[i].domain)) {
			m->opsets[i].version = to;
			m->opsets[i].has_version = true;
			found = true;
		}
	if (!found) {
		struct ir_opset *o = realloc(m->opsets, (m->n_opsets + 1) * sizeof(*o));
		if (!o)
			return oom(c);
		m->opsets = o;
		o[m->n_opsets] = (struct ir_opset){ .domain = strdup(""), .version = to, .has_version = true };
		if (!o[m->n_opsets].domain)
			return oom(c);
		m->n_opsets++;
	}
	m->infer_current = false;
	if (R.converted)
		pass_note(c, NULL, "raised the model's ONNX opset from %lld to %lld (%s needs it); %d node%s "
			  "had attributes that became inputs and were rewritten", (long long)from, (long long)to, need,
			  R.converted, R.converted == 1 ? "" : "s");
	else
		pass_note(c, NULL, "raised the model's ONNX opset from %lld to %lld (%s needs it)", (long long)from,
			  (long long)to, need);
	c->rep->changed = true;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Rewriting: weights                                                        */
/* ------------------------------------------------------------------------ */

/* The weight already quantized on that axis (shared by several nodes), or NULL. */
static struct ir_value *wdone_find(struct qstate *S, struct ir_value *w, int axis)
{
	for (int i = 0; i < S->n_wdone; i++)
		if (S->wdone[i].w == w && S->wdone[i].axis == axis)
			return S->wdone[i].dq;
	return NULL;
}

static int wdone_add(struct qstate *S, struct ir_value *w, int axis, struct ir_value *dq)
{
	if (S->n_wdone == S->cap_wdone) {
		int cap = S->cap_wdone ? 2 * S->cap_wdone : 16;
		void *p = realloc(S->wdone, sizeof(*S->wdone) * (size_t)cap);
		if (!p)
			return oom(S->c);
		S->wdone = p;
		S->cap_wdone = cap;
	}
	S->wdone[S->n_wdone].w = w;
	S->wdone[S->n_wdone].axis = axis;
	S->wdone[S->n_wdone].dq = dq;
	S->n_wdone++;
	return 0;
}

/* Elements of w before, along and after axis. */
static void split_dims(const struct ir_tensor *w, int axis, uint64_t *outer, uint64_t *adim, uint64_t *inner)
{
	*outer = 1;
	*inner = 1;
	*adim = axis >= 0 ? (uint64_t)w->dims[axis] : 1;
	for (int d = 0; d < w->rank; d++) {
		if (axis < 0)
			*inner *= (uint64_t)w->dims[d];
		else if (d < axis)
			*outer *= (uint64_t)w->dims[d];
		else if (d > axis)
			*inner *= (uint64_t)w->dims[d];
	}
}

/*
 * Quantizes weights wv (values wf) per channel along axis (-1: one scale)
 * to int8 ([-127, 127]) or float8 E4M3FN. Writes the quantized tensor and
 * the scales (s[] gets them, in the weights' float type); returns the
 * quantized tensor or NULL.
 */
static struct ir_tensor *quant_channels(struct qstate *S, const struct ir_tensor *w, const double *wf, int axis,
					double *s)
{
	uint64_t outer, adim, inner;
	split_dims(w, axis, &outer, &adim, &inner);
	bool fp8 = S->o.prec == PREC_FP8;
	double qmax = fp8 ? FP8_MAX : 127;
	for (uint64_t a = 0; a < adim; a++) {
		double m = 0;
		for (uint64_t o = 0; o < outer; o++)
			for (uint64_t i = 0; i < inner; i++) {
				double v = fabs(wf[(o * adim + a) * inner + i]);
				if (v > m)
					m = v;
			}
		s[a] = make_scale(w->dtype, m, qmax);
	}
	struct ir_tensor *q = ir_tensor_new(fp8 ? IR_F8E4M3FN : IR_INT8, w->rank, w->dims, S->c->d);
	if (!q)
		return NULL;
	uint8_t *p = ir_tensor_mutable(q);
	for (uint64_t e = 0; e < w->numel; e++) {
		uint64_t a = (e / inner) % adim;
		double v = wf[e] / s[a];
		if (fp8) {
			p[e] = to_e4m3(v);
		} else {
			double r = rne(v);
			if (!(r >= -127))
				r = -127;   /* NaN too */
			if (r > 127)
				r = 127;
			((int8_t *)p)[e] = (int8_t)r;
		}
	}
	return q;
}

/*
 * int4 blocks along axis `k` (block size bs): a scale per block
 * (amax / 7), values rounded into [-8, 7] and packed two per byte, low
 * nibble first. mul (NULL: none) scales row k of the weights first (AWQ).
 * sc gets the scales (the scale tensor's shape: w's with dims[k] =
 * ceil(K / bs)); returns the packed tensor. err (may be NULL) gets the sum
 * over rows of wt[k] * (w - dequantized / mul)^2.
 */
static struct ir_tensor *quant_blocks(struct qstate *S, const struct ir_tensor *w, const double *wf, int k, int64_t bs,
				      const double *mul, double *sc, const double *wt, double *err, bool build)
{
	uint64_t outer, K, inner;
	split_dims(w, k, &outer, &K, &inner);
	uint64_t nb = (K + (uint64_t)bs - 1) / (uint64_t)bs;
	for (uint64_t o = 0; o < outer; o++)
		for (uint64_t b = 0; b < nb; b++)
			for (uint64_t i = 0; i < inner; i++) {
				double m = 0;
				for (uint64_t r = b * (uint64_t)bs; r < K && r < (b + 1) * (uint64_t)bs; r++) {
					double v = fabs(wf[(o * K + r) * inner + i] * (mul ? mul[r] : 1));
					if (v > m)
						m = v;
				}
				sc[(o * nb + b) * inner + i] = make_scale(w->dtype, m, 7);
			}
	struct ir_tensor *q = NULL;
	uint8_t *p = NULL;
	if (build) {
		if (!(q = ir_tensor_new(IR_INT4, w->rank, w->dims, S->c->d)))
			return NULL;
		p = ir_tensor_mutable(q);
		memset(p, 0, q->nbytes);
	}
	double e2 = 0;
	for (uint64_t e = 0; e < w->numel; e++) {
		uint64_t i = e % inner, r = (e / inner) % K, o = e / (inner * K);
		double s = sc[(o * nb + r / (uint64_t)bs) * inner + i];
		double mr = mul ? mul[r] : 1;
		double v = rne(wf[e] * mr / s);
		if (!(v >= -8))
			v = -8;
		if (v > 7)
			v = 7;
		if (err) {
			double d = wf[e] - round_to(w->dtype, v * s) / mr;
			e2 += (wt ? wt[r] : 1) * d * d;
		}
		if (p)
			p[e / 2] |= (uint8_t)(((int)v & 0xf) << (4 * (e % 2)));
	}
	if (err)
		*err = e2;
	return q;
}

/* min and max of n doubles */
static void min_max(const double *v, uint64_t n, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (uint64_t i = 0; i < n; i++) {
		if (v[i] < *lo)
			*lo = v[i];
		if (v[i] > *hi)
			*hi = v[i];
	}
}

/* A DequantizeLinear of the quantized initializer qv with scales sv (axis,
 * block_size when >= 0 / > 0) before node `before`; its output, mapped to
 * the original weight's name. */
static struct ir_value *weight_dq(struct qstate *S, struct ir_value *w, struct ir_value *qv, struct ir_value *sv,
				  int axis, int64_t block, struct ir_node *before, bool map)
{
	struct pass_ctx *c = S->c;
	struct ir_value *in[2] = { qv, sv }, *out = NULL;
	char base[600], nb[600];
	snprintf(base, sizeof(base), "%s_dq", w->name);
	snprintf(nb, sizeof(nb), "%s_DequantizeLinear", w->name);
	struct ir_node *dq = add_node(c, c->m->graph, "DequantizeLinear", nb, in, 2, base, before, &out);
	if (!dq)
		return NULL;
	if (axis >= 0 && pass_set_int_attr(dq, "axis", axis, c->d))
		return NULL;
	if (block > 0 && pass_set_int_attr(dq, "block_size", block, c->d))
		return NULL;
	if (map)
		pass_maps(c, out->name, w->name);
	return out;
}

/* q reads the DequantizeLinear dq made for another reader of the same
 * weights: the report says so, and the float weights go when unread. */
static int reuse_weights(struct qstate *S, struct qnode *q, struct ir_value *dq, char *what, size_t size)
{
	struct ir_value *wv = q->n->inputs[q->w_slot];
	snprintf(what, size, "weights '%s' (already quantized for another node)", wv->name);
	if (ir_node_set_input(q->n, q->w_slot, dq))
		return oom(S->c);
	drop_weights(S, wv);
	return 0;
}

/* The initializer "W_quantized" holding qt, the quantized copy of weights
 * wv (qt's reference is given to it; NULL on error). */
static struct ir_value *quantized_init(struct pass_ctx *c, const struct ir_value *wv, struct ir_tensor *qt)
{
	char base[600];
	snprintf(base, sizeof(base), "%s_quantized", wv->name);
	struct ir_value *qv = pass_new_init(c->m->graph, base, qt, c->d);
	ir_tensor_unref(qt);
	return qv;
}

/* The summary's count of quantized weights and their bytes before and after. */
static void count_weights(struct qstate *S, const struct ir_tensor *w, const struct ir_value *qv)
{
	S->n_weights++;
	S->w_bytes_before += (double)w->nbytes;
	S->w_bytes_after += (double)qv->init->nbytes;
}

/* Quantizes the weights of q (int8, fp8) and makes q read them through a DequantizeLinear. */
static int rewrite_weights(struct qstate *S, struct qnode *q, char *what, size_t size)
{
	struct pass_ctx *c = S->c;
	struct ir_node *n = q->n;
	struct ir_value *wv = n->inputs[q->w_slot];
	const struct ir_tensor *w = wv->init ? wv->init : ir_value_const(wv);
	bool fp8 = S->o.prec == PREC_FP8;
	int axis = fp8 || S->o.per_tensor ? -1 : q->w_axis;
	struct ir_value *dq = wdone_find(S, wv, axis);
	if (dq)
		return reuse_weights(S, q, dq, what, size);
	double *wf = pass_tensor_f64(w);
	uint64_t adim = axis >= 0 ? (uint64_t)w->dims[axis] : 1;
	double *s = malloc(sizeof(double) * (adim ? adim : 1));
	if (!wf || !s) {
		free(wf);
		free(s);
		return oom(c);
	}
	int rc = IR_ERR;
	struct ir_tensor *qt = quant_channels(S, w, wf, axis, s);
	if (!qt)
		goto out;
	struct ir_value *qv = quantized_init(c, wv, qt);
	char base[600];
	snprintf(base, sizeof(base), "%s_scale", wv->name);
	int64_t sd[1] = { (int64_t)adim };
	struct ir_value *sv = qv ? float_init(c, base, w->dtype, axis >= 0 ? 1 : 0, sd, s) : NULL;
	if (!sv)
		goto out;
	if (!(dq = weight_dq(S, wv, qv, sv, axis, 0, n, true)))
		goto out;
	if (ir_node_set_input(n, q->w_slot, dq) || wdone_add(S, wv, axis, dq)) {
		rc = oom(c);
		goto out;
	}
	double lo, hi;
	min_max(s, adim, &lo, &hi);
	count_weights(S, w, qv);
	if (axis >= 0)
		snprintf(what, size, "weights '%s' %s per channel (axis %d, %llu scales %.3g..%.3g)", wv->name,
			 fp8 ? "float8e4m3fn" : "int8", axis, (unsigned long long)adim, lo, hi);
	else
		snprintf(what, size, "weights '%s' %s per tensor (scale %.3g)", wv->name, fp8 ? "float8e4m3fn" : "int8", lo);
	drop_weights(S, wv);
	rc = 0;
out:
	free(wf);
	free(s);
	return rc;
}

/* Per input channel k of the activation: mean |x_k| from the calibration, or NULL. */
static double *awq_means(struct qstate *S, struct qnode *q, uint64_t K, char *why, size_t size)
{
	struct ir_value *a = q->n->inputs[0];
	const struct ir_calib_tensor *t = S->c->calib ? ir_calib_find(S->c->calib, a->name) : NULL;
	if (!t) {
		snprintf(why, size, "no calibration for its input '%s'", a->name);
		return NULL;
	}
	if (q->kind == K_GEMM && ir_node_attr_int(q->n, "transA", 0)) {
		snprintf(why, size, "transA=1: the calibration's channels are not K");
		return NULL;
	}
	if (t->n_chan != (int)K || !t->chan_abssum || !t->chan_rows) {
		snprintf(why, size, "the calibration of '%s' has no per-channel statistics for its %llu channels", a->name,
			 (unsigned long long)K);
		return NULL;
	}
	double *m = malloc(sizeof(double) * K);
	if (!m)
		return NULL;
	for (uint64_t k = 0; k < K; k++)
		m[k] = t->chan_abssum[k] / (double)t->chan_rows;
	return m;
}

/*
 * AWQ: the scale per input channel s_k = mean|x_k|^alpha (normalised so
 * the largest and smallest multiply to 1), alpha from {0, .25, .5, .75, 1}
 * minimising the weight error weighted by mean|x_k|^2 (the output error
 * when channels are independent). mul gets s; returns the alpha (0: plain
 * round to nearest is best) and the errors.
 */
static double awq_search(struct qstate *S, const struct ir_tensor *w, const double *wf, int k, const double *mean,
			 uint64_t K, double *mul, double *sc, double *err_best, double *err_rtn)
{
	static const double alphas[] = { 0, 0.25, 0.5, 0.75, 1 };
	double *wt = malloc(sizeof(double) * K), *s = malloc(sizeof(double) * K);
	if (!wt || !s) {
		free(wt);
		free(s);
		return -1;
	}
	double best_a = 0;
	*err_best = INFINITY;
	for (uint64_t r = 0; r < K; r++)
		wt[r] = mean[r] * mean[r];
	for (size_t ai = 0; ai < sizeof(alphas) / sizeof(alphas[0]); ai++) {
		double a = alphas[ai], smax = 0, smin = INFINITY;
		for (uint64_t r = 0; r < K; r++) {
			s[r] = pow(mean[r] > 1e-8 ? mean[r] : 1e-8, a);
			if (s[r] > smax)
				smax = s[r];
			if (s[r] < smin)
				smin = s[r];
		}
		double norm = sqrt(smax * smin);
		for (uint64_t r = 0; r < K; r++)
			s[r] = round_to(w->dtype, s[r] / norm);
		double e;
		quant_blocks(S, w, wf, k, S->o.block, a == 0 ? NULL : s, sc, wt, &e, false);
		if (a == 0)
			*err_rtn = e;
		if (e < *err_best) {
			*err_best = e;
			best_a = a;
			memcpy(mul, s, sizeof(double) * K);
		}
	}
	free(wt);
	free(s);
	return best_a;
}

/* int4 weight-only: blocked scales along K, optionally AWQ. */
static int rewrite_int4(struct qstate *S, struct qnode *q, char *what, size_t size)
{
	struct pass_ctx *c = S->c;
	struct ir_node *n = q->n;
	struct ir_value *wv = n->inputs[q->w_slot];
	const struct ir_tensor *w = wv->init ? wv->init : ir_value_const(wv);
	int k = q->w_axis;
	/* round to nearest gives the same blocks to every reader: one copy (AWQ scales per reader) */
	struct ir_value *shared = S->o.awq ? NULL : wdone_find(S, wv, 1000 + k);
	if (shared)
		return reuse_weights(S, q, shared, what, size);
	uint64_t outer, K, inner;
	split_dims(w, k, &outer, &K, &inner);
	int64_t bs = S->o.block;
	uint64_t nb = (K + (uint64_t)bs - 1) / (uint64_t)bs;
	uint64_t n_sc = outer * nb * inner;
	double *wf = pass_tensor_f64(w), *sc = malloc(sizeof(double) * (n_sc ? n_sc : 1));
	double *mul = NULL, *mean = NULL;
	int rc = IR_ERR;
	if (!wf || !sc) {
		rc = oom(c);
		goto out;
	}
	double alpha = 0, e_best = 0, e_rtn = 0;
	char awq_note[400] = "";
	if (S->o.awq) {
		char why[300];
		if (!(mean = awq_means(S, q, K, why, sizeof(why)))) {
			if (c->d && c->d->error)
				goto out;
			snprintf(awq_note, sizeof(awq_note), "; awq not applied (%s): round to nearest", why);
		} else if (!(mul = malloc(sizeof(double) * K))) {
			rc = oom(c);
			goto out;
		} else {
			alpha = awq_search(S, w, wf, k, mean, K, mul, sc, &e_best, &e_rtn);
			if (alpha < 0) {
				rc = oom(c);
				goto out;
			}
			if (alpha == 0)
				snprintf(awq_note, sizeof(awq_note), "; awq: no scaling beats round to nearest on the "
					 "calibration statistics (alpha 0)");
			else
				snprintf(awq_note, sizeof(awq_note), "; awq alpha %.2f: activation-weighted error %.3g of "
					 "round to nearest's", alpha, e_rtn > 0 ? e_best / e_rtn : 0.0);
		}
	}
	bool scaled = mul && alpha > 0;
	struct ir_tensor *qt = quant_blocks(S, w, wf, k, bs, scaled ? mul : NULL, sc, NULL, NULL, true);
	if (!qt)
		goto out;
	struct ir_value *qv = quantized_init(c, wv, qt);
	if (!qv)
		goto out;
	char base[600];
	int64_t sd[IR_MAX_RANK];
	for (int d = 0; d < w->rank; d++)
		sd[d] = d == k ? (int64_t)nb : w->dims[d];
	snprintf(base, sizeof(base), "%s_scale", wv->name);
	struct ir_tensor *st = pass_tensor_from_f64(w->dtype, w->rank, sd, sc, c->d);
	struct ir_value *sv = st ? pass_new_init(c->m->graph, base, st, c->d) : NULL;
	if (st)
		ir_tensor_unref(st);
	if (!sv)
		goto out;
	/* scaled by AWQ, the weights stand for no tensor of the old stage */
	struct ir_value *dq = weight_dq(S, wv, qv, sv, k, bs, n, !scaled);
	if (!dq)
		goto out;
	if (!S->o.awq && wdone_add(S, wv, 1000 + k, dq))
		goto out;
	if (ir_node_set_input(n, q->w_slot, dq)) {
		rc = oom(c);
		goto out;
	}
	if (scaled) {
		/* the activation is divided by s: x/s . (s*W) = x . W */
		struct ir_value *a = n->inputs[0];
		int adt = elem_of(a);
		bool ta = q->kind == K_GEMM && ir_node_attr_int(n, "transA", 0);
		for (uint64_t r = 0; r < K; r++)
			mul[r] = 1 / mul[r];
		int64_t vd[2] = { (int64_t)K, 1 };
		snprintf(base, sizeof(base), "%s_awq_inv_scale", wv->name);
		struct ir_value *iv = float_init(c, base, quant_float(adt) ? adt : w->dtype, ta ? 2 : 1, vd, mul);
		if (!iv)
			goto out;
		struct ir_value *in[2] = { a, iv }, *out = NULL;
		char vb[600], nb2[600];
		snprintf(vb, sizeof(vb), "%s_awq", a->name);
		snprintf(nb2, sizeof(nb2), "%s_awq_Mul", wv->name);
		if (!add_node(c, c->m->graph, "Mul", nb2, in, 2, vb, n, &out))
			goto out;
		if (ir_node_set_input(n, 0, out)) {
			rc = oom(c);
			goto out;
		}
	}
	double lo, hi;
	min_max(sc, n_sc, &lo, &hi);
	count_weights(S, w, qv);
	snprintf(what, size, "weights '%s' int4 in blocks of %lld along K (axis %d, %llu scales %.3g..%.3g)%s", wv->name,
		 (long long)bs, k, (unsigned long long)n_sc, lo, hi, awq_note);
	drop_weights(S, wv);
	rc = 0;
out:
	free(wf);
	free(sc);
	free(mul);
	free(mean);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Rewriting: activations                                                    */
/* ------------------------------------------------------------------------ */

/* The scale (and zero point byte) of an activation's range. */
static double act_scale(const struct qstate *S, const struct qact *a, uint8_t *zp)
{
	*zp = 0;
	if (S->o.prec == PREC_FP8)
		return make_scale(a->dtype, fmax(fabs(a->lo), fabs(a->hi)), FP8_MAX);
	if (!S->o.asym)
		return make_scale(a->dtype, fmax(fabs(a->lo), fabs(a->hi)), 127);
	double s = make_scale(a->dtype, a->hi - a->lo, 255);
	double z = rne(-a->lo / s);
	*zp = (uint8_t)(z < 0 ? 0 : z > 255 ? 255 : z);
	return s;
}

/* The Q/DQ pair of activation a, before its first quantized reader. */
static int rewrite_act(struct qstate *S, struct qact *a)
{
	struct pass_ctx *c = S->c;
	struct ir_graph *g = c->m->graph;
	struct ir_node *first = NULL;
	ir_for_each_node(g, n) {
		for (int k = 0; k < a->n_uses && !first; k++)
			if (a->uses[k].n == n)
				first = n;
		if (first)
			break;
	}
	if (!first)
		return ir_diag_err(c->d, IR_ERR, "internal error: no reader of '%s' found", a->v->name);
	uint8_t zb;
	double s = act_scale(S, a, &zb);
	int zdt = S->o.prec == PREC_FP8 ? IR_F8E4M3FN : S->o.asym ? IR_UINT8 : IR_INT8;
	const char *x = a->v->name;
	char base[600], nb[600];
	snprintf(base, sizeof(base), "%s_scale", x);
	struct ir_value *sv = float_init(c, base, a->dtype, 0, NULL, &s);
	snprintf(base, sizeof(base), "%s_zero_point", x);
	struct ir_value *zv = sv ? zp_init(c, base, zdt, zb) : NULL;
	if (!zv)
		return IR_ERR;
	struct ir_value *in[3] = { a->v, sv, zv }, *qo = NULL, *dqo = NULL;
	snprintf(base, sizeof(base), "%s_q", x);
	snprintf(nb, sizeof(nb), "%s_QuantizeLinear", x);
	if (!add_node(c, g, "QuantizeLinear", nb, in, 3, base, first, &qo))
		return IR_ERR;
	in[0] = qo;
	snprintf(base, sizeof(base), "%s_dq", x);
	snprintf(nb, sizeof(nb), "%s_DequantizeLinear", x);
	if (!add_node(c, g, "DequantizeLinear", nb, in, 3, base, first, &dqo))
		return IR_ERR;
	for (int k = 0; k < a->n_uses; k++)
		if (ir_node_set_input(a->uses[k].n, a->uses[k].slot, dqo))
			return oom(c);
	pass_maps(c, dqo->name, x);
	S->n_pairs++;
	return 0;
}

/* "input 'x' (scale 0.0235 from amax 2.99)" for the report */
static void act_text(const struct qstate *S, const struct qact *a, char *buf, size_t size)
{
	uint8_t zb;
	double s = act_scale(S, a, &zb);
	char via[300] = "";
	if (a->st_name && strcmp(a->st_name, a->v->name))
		snprintf(via, sizeof(via), ", range of '%s' before %s", a->st_name,
			 a->v->producer ? a->v->producer->op_type : "it");
	if (S->o.asym && S->o.prec == PREC_INT8)
		snprintf(buf, size, "'%s' uint8 (scale %.4g, zero point %u, range [%.4g, %.4g]%s)", a->v->name, s, zb,
			 a->lo, a->hi, via);
	else
		snprintf(buf, size, "'%s' %s (scale %.4g, amax %.4g%s)", a->v->name,
			 S->o.prec == PREC_FP8 ? "float8e4m3fn" : "int8", s, a->hi, via);
}

/* ------------------------------------------------------------------------ */
/* The pass                                                                  */
/* ------------------------------------------------------------------------ */

static bool opt_given(const struct pass_ctx *c, const char *name)
{
	for (int i = 0; i < c->n_args; i++)
		if (!strcmp(c->args[i].name, name))
			return true;
	return false;
}

static int read_opts(struct pass_ctx *c, struct qopts *o)
{
	const char *p = pass_opt_str(c, "precision");
	if (!strcmp(p, "int8"))
		o->prec = PREC_INT8;
	else if (!strcmp(p, "fp8") || !strcmp(p, "float8") || !strcmp(p, "float8e4m3fn"))
		o->prec = PREC_FP8;
	else if (!strcmp(p, "int4"))
		o->prec = PREC_INT4;
	else
		return ir_diag_err(c->d, IR_ERR, "unknown precision '%s' (int8, fp8, int4)", p);
	if (ir_calib_method_parse(pass_opt_str(c, "method"), &o->how, c->d))
		return IR_ERR;
	o->per_tensor = pass_opt_bool(c, "per-tensor-weights");
	o->asym = pass_opt_bool(c, "asymmetric");
	o->awq = pass_opt_bool(c, "awq");
	o->min_ch = pass_opt_int(c, "min-channels");
	o->block = pass_opt_int(c, "block");
	o->exclude = pass_opt_str(c, "exclude");
	o->only = pass_opt_str(c, "only");
	const char *kf = pass_opt_str(c, "keep-float");
	o->keep_f16 = !strcmp(kf, "float16");
	if (!o->keep_f16 && strcmp(kf, "float32"))
		return ir_diag_err(c->d, IR_ERR, "keep-float must be float32 or float16, not '%s'", kf);
	if (o->min_ch < 0)
		return ir_diag_err(c->d, IR_ERR, "min-channels must not be negative");
	if (o->block != 32 && o->block != 64 && o->block != 128)
		return ir_diag_err(c->d, IR_ERR, "block must be 32, 64 or 128, not %lld", (long long)o->block);
	if (o->asym && o->prec != PREC_INT8)
		return ir_diag_err(c->d, IR_ERR, "asymmetric is for int8 activations (uint8 with a zero point): %s %s",
				   prec_name[o->prec], o->prec == PREC_FP8 ? "has no zero point" : "weights are symmetric");
	if (o->awq && o->prec != PREC_INT4)
		return ir_diag_err(c->d, IR_ERR, "awq is for precision=int4 (activation-aware weight scaling)");
	if (o->prec != PREC_INT4 && opt_given(c, "block"))
		return ir_diag_err(c->d, IR_ERR, "block is for precision=int4 (int8 and fp8 weights are per channel or per "
				   "tensor)");
	if (o->prec == PREC_FP8 && o->per_tensor)
		pass_note(c, NULL, "per-tensor-weights: fp8 weights are per tensor anyway");
	if (o->prec != PREC_INT4 && !c->calib)
		return ir_diag_err(c->d, IR_ERR, "no calibration: run calibrate first (%s needs the activations' ranges)",
				   prec_name[o->prec]);
	if (o->awq && !c->calib)
		return ir_diag_err(c->d, IR_ERR, "no calibration: run calibrate first (awq needs the activations' "
				   "per-channel statistics)");
	return 0;
}

static void qstate_free(struct qstate *S)
{
	for (int i = 0; i < S->n_acts; i++)
		free(S->acts[i].uses);
	free(S->acts);
	free(S->nodes);
	free(S->pos);
	free(S->wdone);
}

/*
 * keep-float=float16: what quantize left float becomes float16, by the
 * convert-fp16 pass with its defaults (model inputs and outputs keep their
 * type; its block list and overflow rules hold; Q/DQ scales become float16
 * where the opset allows it). Its report is appended to quantize's.
 */
extern const struct pass pass_convert_fp16;
static int keep_float16(struct pass_ctx *c)
{
	struct pass_report sub;
	pass_report_init(&sub, pass_convert_fp16.name);
	struct pass_ctx cc = { .m = c->m, .pass = &pass_convert_fp16, .rep = &sub, .d = c->d, .calib = c->calib };
	c->m->infer_current = false;   /* the graph has Q/DQ now: shapes and types again */
	int rc = pass_convert_fp16.run(&cc);
	if (!rc) {
		pass_note(c, NULL, "keep-float=float16: convert-fp16 on the rest: %d rewritten, %d kept float32",
			  sub.rewritten, sub.rejected);
		if (pass_report_merge(c->rep, &sub))
			rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	} else {
		ir_diag_prefix(c->d, "keep-float=float16");
	}
	pass_report_clear(&sub);
	return rc;
}

static int run(struct pass_ctx *c)
{
	struct qstate S = { .c = c };
	S.old_ir = c->m->has_ir_version && c->m->ir_version < 4;
	S.old_ir_version = c->m->ir_version;
	int rc = read_opts(c, &S.o);
	if (rc)
		return rc;
	struct ir_graph *g = c->m->graph;
	rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "interrupted" : "out of memory");
	rc = 0;

	/* positions, and the candidates in order */
	S.n_pos = g->next_id > 0 ? g->next_id : 1;
	int *ids = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1)), n_ids = 0;
	S.pos = malloc(sizeof(int) * (size_t)S.n_pos);
	if (!ids || !S.pos) {
		free(ids);
		qstate_free(&S);
		return oom(c);
	}
	int k = 0;
	ir_for_each_node(g, n) {
		if (n->id >= 0 && n->id < S.n_pos)
			S.pos[n->id] = k;
		k++;
		if (kind_of(n) != K_NONE)
			ids[n_ids++] = n->id;
	}
	note_unmatched(c, "exclude", S.o.exclude);
	note_unmatched(c, "only", S.o.only);
	if (S.o.prec != PREC_INT4 && c->calib && c->calib->random)
		pass_note(c, NULL, "the calibration ran on random data: its ranges say nothing about accuracy");

	for (int i = 0; i < n_ids && !rc; i++)
		rc = plan_node(&S, ir_node_by_id(g, ids[i]), kind_of(ir_node_by_id(g, ids[i])));
	free(ids);
	if (!rc && S.o.prec != PREC_INT4)
		rc = plan_residuals(&S);
	if (!rc && S.o.prec != PREC_INT4)
		rc = plan_concats(&S);
	ir_for_each_node(g, n)
		n->mark = 0;
	if (rc)
		goto out;
	if (S.o.prec != PREC_INT4)
		plan_ranges(&S);
	if (!S.n_nodes) {
		pass_note(c, NULL, "nothing to quantize: the model is unchanged");
		goto out;
	}

	/* the opset DequantizeLinear needs */
	int64_t need = S.o.prec == PREC_INT4 ? 21 : S.o.prec == PREC_FP8 ? 19 : S.need_half || S.o.keep_f16 ? 19 : 13;
	const char *why = S.o.prec == PREC_INT4 ? "int4 DequantizeLinear with block_size"
			  : S.o.prec == PREC_FP8 ? "float8 E4M3FN QuantizeLinear/DequantizeLinear"
			  : S.need_half ? "QuantizeLinear/DequantizeLinear with float16/bfloat16 scales"
			  : S.o.keep_f16 ? "keep-float=float16: QuantizeLinear/DequantizeLinear with float16 scales"
			  : "per-channel DequantizeLinear (axis)";
	if ((rc = raise_opset(c, need, why)))
		goto out;
	/* the IR version the opset (and int4, float8 initializers) need */
	int64_t irv = ir_for_opset(ir_model_opset(c->m, "") > need ? ir_model_opset(c->m, "") : need);
	if (!c->m->has_ir_version || c->m->ir_version < irv) {
		if (c->m->has_ir_version)
			pass_note(c, NULL, "raised the model's IR version from %lld to %lld (opset %lld needs it)",
				  (long long)c->m->ir_version, (long long)irv, (long long)need);
		c->m->ir_version = irv;
		c->m->has_ir_version = true;
	}

	/* weights, node by node, and the report */
	for (int i = 0; i < S.n_nodes && !rc; i++) {
		struct qnode *q = &S.nodes[i];
		char wtext[900] = "", atext[1400] = "";
		if (q->w_slot >= 0)
			rc = S.o.prec == PREC_INT4 ? rewrite_int4(&S, q, wtext, sizeof(wtext))
						   : rewrite_weights(&S, q, wtext, sizeof(wtext));
		if (rc)
			break;
		for (int j = 0; j < q->n_a; j++) {
			int ai = act_find(&S, q->n->inputs[q->a_slot[j]]);
			if (ai < 0)
				continue;
			char one[600];
			act_text(&S, &S.acts[ai], one, sizeof(one));
			snprintf(atext + strlen(atext), sizeof(atext) - strlen(atext), "%s%s", j ? ", " : "", one);
		}
		S.n_q++;
		if (S.o.prec == PREC_INT4)
			pass_rewrote(c, q->n, "int4 weight-only: %s; activations stay float", wtext);
		else
			pass_rewrote(c, q->n, "%s: %s%s%s per tensor", prec_name[S.o.prec], wtext, *wtext ? "; input " : "input ",
				     atext);
	}
	if (rc)
		goto out;
	/* the residual Adds and Concats that got pairs (reported once per node) */
	for (int i = 0; i < S.n_acts; i++) {
		struct qact *a = &S.acts[i];
		for (int u = 0; u < a->n_uses; u++) {
			struct ir_node *n = a->uses[u].n;
			if (qnode_of(&S, n))
				continue;
			char one[600];
			act_text(&S, a, one, sizeof(one));
			if (n->op == IR_OP_Concat)
				pass_rewrote(c, n, "Concat input %s: one scale shared by every input of the Concat and its "
					     "quantized output", one);
			else
				pass_rewrote(c, n, "residual input %s: the skip Add can run as the conv's epilogue", one);
		}
	}
	for (int i = 0; i < S.n_acts && !rc; i++)
		rc = rewrite_act(&S, &S.acts[i]);
	if (rc)
		goto out;

	if (S.n_unlisted)
		pass_note(c, NULL, "IR version %lld lists every initializer as a graph input: the %d float weight tensor%s "
			  "replaced by quantized ones left the graph inputs", (long long)S.old_ir_version, S.n_unlisted,
			  S.n_unlisted == 1 ? "" : "s");
	char b1[64], b2[64], mth[64];
	if (S.o.prec == PREC_INT4)
		snprintf(mth, sizeof(mth), "round to nearest%s", S.o.awq ? " with awq" : "");
	else
		ir_calib_method_name(&S.o.how, mth, sizeof(mth));
	pass_note(c, NULL, "%s (%s): %d node%s quantized, %d kept float; %d activation Q/DQ pair%s; %d weight tensor%s, "
		  "%s -> %s", prec_name[S.o.prec], mth, S.n_q, S.n_q == 1 ? "" : "s", S.n_float, S.n_pairs,
		  S.n_pairs == 1 ? "" : "s", S.n_weights, S.n_weights == 1 ? "" : "s",
		  pass_bytes_text(S.w_bytes_before, b1, sizeof(b1)), pass_bytes_text(S.w_bytes_after, b2, sizeof(b2)));
	c->rep->changed = true;
	if (S.o.keep_f16 && (rc = keep_float16(c)))
		goto out;
out:
	qstate_free(&S);
	return rc;
}

static const struct pass_option options[] = {
	{ "precision", "string", "int8", "int8 (QDQ, per-channel weights), fp8 (E4M3FN, opset 19) or int4 (weight-only MatMul/Gemm, opset 21)" },
	{ "method", "string", "max", "how the activations' ranges are taken: max, percentile, percentile=P, entropy, mse" },
	{ "exclude", "string", "", "nodes left float: names, ids (n12), op types (Gemm) or patterns (/layer4/*), comma-separated" },
	{ "only", "string", "", "quantize only these nodes (same forms as exclude)" },
	{ "per-tensor-weights", "bool", "off", "one scale per weight tensor instead of one per output channel" },
	{ "asymmetric", "bool", "off", "uint8 activations with a zero point (int8 only)" },
	{ "keep-float", "string", "float32", "what is not quantized stays: float32, or float16 (convert-fp16 on the rest)" },
	{ "min-channels", "int", "16", "layers with fewer input or output channels stay float" },
	{ "block", "int", "128", "int4: the block size along K (32, 64 or 128)" },
	{ "awq", "bool", "off", "int4: scale salient input channels before rounding (activation-aware, needs calibration)" },
	{ NULL, NULL, NULL, NULL },
};

const struct pass pass_quantize = {
	.name = "quantize",
	.summary = "quantize Conv, Gemm and MatMul to int8 or fp8 (QDQ from the calibration) or their weights to int4",
	.explain =
		"Quantization stores a tensor as small integers (or 8-bit floats) and a scale: a real value v is "
		"represented as v ~ S * (q - Z), where q is the stored integer, S the scale (a float) and Z the zero "
		"point (an integer of q's type). QuantizeLinear computes q = saturate(round(v / S) + Z), rounding half "
		"to even; DequantizeLinear computes S * (q - Z). Between the two, a value is rounded to one of 256 "
		"levels (int8) and clipped to the range they cover: [S * (-128 - Z), S * (127 - Z)]. The error is at "
		"most S/2 inside the range, and the clipping error outside it, so the choice of range trades one "
		"against the other.\n\n"
		"Symmetric (the default for int8, what GPU int8 kernels take): Z = 0 and S = amax / 127, so [-amax, "
		"amax] maps onto [-127, 127]. Asymmetric (asymmetric=on): uint8 activations with S = (hi - lo) / 255 "
		"and Z = round(-lo / S), which spends no levels on negative values a tensor never has (after a Relu) "
		"at the price of a zero point in every product. Weights are always symmetric and, by default, per "
		"channel: one scale per output channel (axis 0 of a Conv's [C_out, C_in/g, k...] weights, axis 1 of a "
		"ConvTranspose's [C_in, C_out/g, k...], the N axis of Gemm's B (axis 1, or 0 with transB=1), the last "
		"axis of MatMul's constant B), because channels differ in size by orders of magnitude and one scale "
		"for all would round the small ones to zero. The weights are stored as an int8 initializer read by a "
		"DequantizeLinear (axis attribute: opset 13, which the pass raises the model to, saying so), never as "
		"float weights with a QuantizeLinear in front; biases stay float (the kernel adds them in int32 or "
		"float). per-tensor-weights=on uses one scale.\n\n"
		"Activations get one scale per tensor, from the calibration (run `calibrate` first: it ran the float "
		"stage over data and kept a 2048-bin histogram of |x| for every activation). The method picks amax: "
		"max takes the largest |x| seen (no clipping, but one outlier stretches S for everyone); "
		"percentile=P takes the P-th percentile of |x| (default 99.99), clipping the rarest values; entropy is "
		"TensorRT's calibrator: for each threshold from bin 128 up, the histogram below it (with everything "
		"above folded into its last bin) is compared with the same histogram squeezed into 128 levels, and the "
		"threshold with the smallest KL divergence KL(P||Q) is chosen; mse picks the threshold minimising the "
		"expected squared error (rounding inside, clipping outside) over the histogram. Changing the method "
		"needs no new run: the ranges are functions of the histograms.\n\n"
		"Placement follows TensorRT's explicit-quantization rules, so that every Q/DQ pair sits where the "
		"builder fuses it into an integer kernel and none blocks a fusion. (1) Quantize the inputs of the ops "
		"that compute in int8: Conv, ConvTranspose, Gemm, MatMul and ogsh's FusedConv, FusedGemm and "
		"FusedAttention; not their outputs (the next op's input pair requantizes). A MatMul of two activations "
		"(attention's Q.K^T) gets both inputs quantized; FusedAttention gets Q and K. (2) A tensor read by "
		"several quantized ops gets one pair, shared. (3) The residual input of a skip-connection Add whose "
		"other input comes from a quantized conv is quantized too (a FusedConv's Z input likewise), so the Add "
		"runs as the conv's int8 epilogue (a BatchNormalization between the conv and the Add, which the builder "
		"folds into the conv, does not change that); when both inputs come from quantized convs, the one "
		"computed first is the residual. (4) Ops that commute with quantization (MaxPool, Reshape, Transpose, Flatten, "
		"Squeeze, Unsqueeze) are not interrupted: the pair goes at the quantized op's input, after them (a "
		"MaxPool's output is quantized, not its input), and the builder moves it across them; when a "
		"tensor has no statistics of its own its range is taken from the tensor before those ops. (5) A "
		"Concat that feeds a quantized op has all its inputs quantized with one shared scale (the largest "
		"range of the group), so the Concat moves integers and the pairs cancel across it.\n\n"
		"Each pair is a QuantizeLinear and a DequantizeLinear with a scalar scale and an int8 zero point 0 "
		"(uint8 and the zero point when asymmetric); the quantized op reads the DequantizeLinear's output, "
		"named x_dq, which stands for x in `compare --stages`. What is left float and why is in the report: "
		"nodes named by exclude= or not named by only= (node names, ids such as n12, op types such as Gemm, "
		"or glob patterns such as /layer4/*; a residual Add or a Concat named there keeps its inputs float), layers with fewer than min-channels (16) input or output "
		"channels (the first conv of an image model, with 3 input channels, gains nothing and loses "
		"accuracy), inputs without calibration, inputs that are not float32/float16/bfloat16, and constants "
		"in an activation's place.\n\n"
		"fp8 uses float8 E4M3FN (1 sign bit, 4 exponent bits, 3 mantissa bits, no infinities, largest value "
		"448, relative precision about 6%): scale = amax / 448 per tensor for activations and weights, the "
		"weights stored as float8 initializers; QuantizeLinear/DequantizeLinear for float8 need opset 19, which "
		"the pass raises the model to. Rounding is to the nearest representable value, saturating at +-448.\n\n"
		"int4 is weight-only quantization of MatMul and Gemm weights (activations stay float, the usual form "
		"for large language models): each block of `block` (32, 64 or 128) consecutive weights along K, the "
		"reduction axis, gets its own scale amax/7, and values round to nearest in [-8, 7]. The weights are "
		"an int4 initializer (two per byte, low nibble first) read by a DequantizeLinear with axis = K and "
		"block_size (opset 21, raised). Conv is refused: int4 GEMM kernels take [K, N] matrices in K blocks. "
		"awq=on (activation-aware, AWQ's idea) uses the calibration's per-channel mean |x_k| of the "
		"MatMul's input: the input channels that carry large activations matter most, so row k of W is "
		"multiplied by s_k = mean|x_k|^alpha before rounding (its small weights then round more finely) and "
		"the activation is multiplied by 1/s_k (a Mul by a constant vector before the MatMul), which leaves "
		"x.W unchanged in exact arithmetic. alpha is searched in {0, 0.25, 0.5, 0.75, 1}, minimising the "
		"weight error weighted by mean|x_k|^2 (the output error when channels are independent); alpha 0 is "
		"plain round to nearest.\n\n"
		"Opset: when the model imports an older ONNX opset, the pass raises it (13 for per-channel int8, 19 "
		"for fp8 or float16 scales, 21 for int4) and converts the attributes that became inputs on the way "
		"(Squeeze/Unsqueeze/Reduce axes, Split's split, Clip's min/max); a model with an op whose meaning "
		"changed (Softmax on an inner axis before 13, Resize before 11) is refused with the node named. "
		"Nothing later undoes the quantization: fold-constants keeps a DequantizeLinear of a quantized "
		"initializer.",
	.options = options,
	.level = 0,
	.run = run,
};
