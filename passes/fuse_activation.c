/*
 * fuse_activation.c - the fuse-activation pass: a Conv or Gemm followed by
 * an activation (and for a Conv, a residual Add before it) becomes one
 * ai.ogsh FusedConv or FusedGemm node.
 *
 * The model-local ONNX function that says what a fused op computes in
 * standard ops (so saved models run elsewhere) is built by fused.c.
 */
#include "passes/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Activations                                                               */
/* ------------------------------------------------------------------------ */

struct act {
	const char *name;     /* the activation attribute: "Relu"... ("" for none) */
	int n_params;
	double p[2];
};

/* Whether op is an activation this pass fuses. */
static bool is_act_op(int op)
{
	switch (op) {
	case IR_OP_Relu: case IR_OP_Clip: case IR_OP_LeakyRelu: case IR_OP_Sigmoid: case IR_OP_HardSigmoid:
	case IR_OP_HardSwish: case IR_OP_Tanh: case IR_OP_Gelu: case IR_OP_ogsh_Gelu:
		return true;
	default:
		return false;
	}
}

/* Clip's bound input i (1 min, 2 max): absent (*v = dflt), or a constant float scalar. */
static bool clip_bound(const struct ir_node *a, int i, double dflt, double *v, char *why, size_t size)
{
	const char *what = i == 1 ? "min" : "max";
	*v = dflt;
	if (i >= a->n_inputs || !a->inputs[i])
		return true;
	const struct ir_tensor *t = pass_const_input(a, i);
	if (!t) {
		snprintf(why, size, "its %s is not a constant", what);
		return false;
	}
	if (t->numel != 1 || !ir_dtype_is_float(t->dtype) || !ir_tensor_data(t)) {
		snprintf(why, size, "its %s is not a float scalar", what);
		return false;
	}
	*v = ir_tensor_get_f64(t, 0);
	if (isnan(*v)) {
		snprintf(why, size, "its %s is NaN", what);
		return false;
	}
	return true;
}

/* Reads activation node a into *act; false with why when it cannot be fused. */
static bool read_act(const struct ir_model *m, const struct ir_node *a, struct act *act, char *why, size_t size)
{
	memset(act, 0, sizeof(*act));
	act->name = a->op_type;
	int max_in = a->op == IR_OP_Clip ? 3 : 1;
	if (a->n_inputs < 1 || a->n_inputs > max_in || !a->inputs[0] || a->n_outputs != 1 || !a->outputs[0]) {
		snprintf(why, size, "it does not have the usual inputs and one output");
		return false;
	}
	switch (a->op) {
	case IR_OP_Clip: {
		act->n_params = 2;
		if (ir_model_opset(m, "") < 11) {
			/* min/max attributes before opset 11 */
			act->p[0] = ir_node_attr_float(a, "min", -INFINITY);
			act->p[1] = ir_node_attr_float(a, "max", INFINITY);
			if (a->n_inputs > 1) {
				snprintf(why, size, "it has bound inputs, which opset %lld does not have",
					 (long long)ir_model_opset(m, ""));
				return false;
			}
		} else if (!clip_bound(a, 1, -INFINITY, &act->p[0], why, size) ||
			   !clip_bound(a, 2, INFINITY, &act->p[1], why, size)) {
			return false;
		}
		if (act->p[0] > act->p[1]) {
			snprintf(why, size, "its min %g is above its max %g", act->p[0], act->p[1]);
			return false;
		}
		return true;
	}
	case IR_OP_LeakyRelu:
		act->n_params = 1;
		act->p[0] = ir_node_attr_float(a, "alpha", 0.01f);
		return true;
	case IR_OP_HardSigmoid:
		act->n_params = 2;
		act->p[0] = ir_node_attr_float(a, "alpha", 0.2f);
		act->p[1] = ir_node_attr_float(a, "beta", 0.5f);
		return true;
	case IR_OP_Gelu: case IR_OP_ogsh_Gelu: {
		const struct ir_attr *ap = ir_node_attr(a, "approximate");
		const char *s = ap && ap->type == IR_ATTR_STRING && ap->s.data ? ap->s.data : "none";
		if (strcmp(s, "none") && strcmp(s, "tanh")) {
			snprintf(why, size, "approximate='%.40s' is neither 'none' nor 'tanh'", s);
			return false;
		}
		act->n_params = 1;
		act->p[0] = strcmp(s, "tanh") == 0;
		return true;
	}
	default:
		return is_act_op(a->op);
	}
}

/* Writes the activation in standard ops after t; returns its output. */
static struct ir_value *fb_act(struct pass_fbody *b, const struct act *a, struct ir_value *t)
{
	struct ir_node *n = NULL;
	const char *name = a->name;
	if (!*name)
		return t;
	if (!strcmp(name, "Relu") || !strcmp(name, "Sigmoid") || !strcmp(name, "Tanh"))
		return pass_fb_node(b, name, &t, 1, NULL);
	if (!strcmp(name, "LeakyRelu")) {
		struct ir_value *y = pass_fb_node(b, "LeakyRelu", &t, 1, &n);
		pass_fb_attr_float(b, n, "alpha", a->p[0]);
		return y;
	}
	if (!strcmp(name, "HardSigmoid") || !strcmp(name, "HardSwish")) {
		bool swish = !strcmp(name, "HardSwish");
		struct ir_value *y = pass_fb_node(b, "HardSigmoid", &t, 1, &n);
		pass_fb_attr_float(b, n, "alpha", swish ? 1.0 / 6 : a->p[0]);
		pass_fb_attr_float(b, n, "beta", swish ? 0.5 : a->p[1]);
		if (!swish)
			return y;
		struct ir_value *in[2] = { t, y };
		return pass_fb_node(b, "Mul", in, 2, NULL);
	}
	if (!strcmp(name, "Clip")) {
		if (b->opset >= 11) {
			struct ir_value *in[3] = { t, NULL, NULL };
			if (isfinite(a->p[0]))
				in[1] = pass_fb_const(b, a->p[0]);
			if (isfinite(a->p[1]))
				in[2] = pass_fb_const(b, a->p[1]);
			return pass_fb_node(b, "Clip", in, isfinite(a->p[1]) ? 3 : isfinite(a->p[0]) ? 2 : 1, NULL);
		}
		struct ir_value *y = pass_fb_node(b, "Clip", &t, 1, &n);
		if (isfinite(a->p[0]))
			pass_fb_attr_float(b, n, "min", a->p[0]);
		if (isfinite(a->p[1]))
			pass_fb_attr_float(b, n, "max", a->p[1]);
		return y;
	}
	if (!strcmp(name, "Gelu"))
		return pass_fb_gelu(b, t, a->p[0] != 0);
	b->rc = ir_diag_err(b->d, IR_ERR, "internal error: no function for activation '%s'", name);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The fused node's function                                                 */
/* ------------------------------------------------------------------------ */

static const char *const conv_attrs[] = { "auto_pad", "dilations", "group", "kernel_shape", "pads", "strides",
					  "activation", "activation_params" };
static const enum ir_attr_type conv_attr_types[] = { IR_ATTR_STRING, IR_ATTR_INTS, IR_ATTR_INT, IR_ATTR_INTS,
						     IR_ATTR_INTS, IR_ATTR_INTS };
static const char *const gemm_attrs[] = { "alpha", "beta", "transA", "transB", "activation", "activation_params" };
static const enum ir_attr_type gemm_attr_types[] = { IR_ATTR_FLOAT, IR_ATTR_FLOAT, IR_ATTR_INT, IR_ATTR_INT };

struct fn_arg {
	bool conv;
	int n_in;            /* the fused node's inputs: 2 or 3 (and 4 with Z) */
	bool z;
	const struct act *act;
};

static void build_fused(struct pass_fbody *b, void *arg)
{
	const struct fn_arg *f = arg;
	static const char *const conv_in[] = { "X", "W", "B", "Z" };
	static const char *const gemm_in[] = { "A", "B", "C", "Z" };
	struct ir_value *in[4] = { NULL };
	for (int i = 0; i < f->n_in; i++)
		in[i] = pass_fb_input(b, f->conv ? conv_in[i] : gemm_in[i]);
	struct ir_node *n = NULL;
	int n_op = f->z ? 3 : f->n_in;
	struct ir_value *t = pass_fb_node(b, f->conv ? "Conv" : "Gemm", in, n_op, &n);
	for (int i = 0; i < (f->conv ? 6 : 4); i++)
		pass_fb_attr_ref(b, n, f->conv ? conv_attrs[i] : gemm_attrs[i],
				 f->conv ? conv_attr_types[i] : gemm_attr_types[i]);
	if (f->z) {
		struct ir_value *s[2] = { t, in[3] };
		t = pass_fb_node(b, "Add", s, 2, NULL);
	}
	pass_fb_output(b, fb_act(b, f->act, t));
}

/* ------------------------------------------------------------------------ */
/* The pass                                                                  */
/* ------------------------------------------------------------------------ */

/* Whether v depends on node p's outputs (a walk back over producers, within g). */
static bool depends_on(struct ir_graph *g, struct ir_value *v, const struct ir_node *p)
{
	if (!v->producer)
		return false;
	int cap = g->next_id + 1;
	char *seen = calloc((size_t)cap, 1);
	int *st = malloc(sizeof(int) * (size_t)cap);
	bool found = false;
	if (!seen || !st) {
		free(seen);
		free(st);
		return true;   /* cannot tell: say yes, the match is then rejected */
	}
	int top = 0;
	st[top++] = v->producer->id;
	seen[v->producer->id] = 1;
	while (top && !found) {
		struct ir_node *n = ir_node_by_id(g, st[--top]);
		if (!n)
			continue;
		if (n == p) {
			found = true;
			break;
		}
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			struct ir_value *u = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			struct ir_node *q = u ? u->producer : NULL;
			if (q && q->graph == g && q->id >= 0 && q->id < cap && !seen[q->id]) {
				seen[q->id] = 1;
				st[top++] = q->id;
			}
		}
	}
	free(seen);
	free(st);
	return found;
}

/* Whether two values are known to have the same shape. */
static bool same_shape(const struct ir_value *a, const struct ir_value *b, bool *known)
{
	const struct ir_type *ta = ir_value_type(a), *tb = ir_value_type(b);
	*known = ta->kind == IR_TYPE_TENSOR && tb->kind == IR_TYPE_TENSOR && ta->rank >= 0 && tb->rank >= 0;
	if (!*known)
		return false;
	if (ta->rank != tb->rank)
		return false;
	for (int i = 0; i < ta->rank; i++) {
		if (ta->dims[i].kind == IR_DIM_UNKNOWN || tb->dims[i].kind == IR_DIM_UNKNOWN) {
			*known = false;
			return false;
		}
		if (!ir_dim_equal(&ta->dims[i], &tb->dims[i]))
			return false;
	}
	return true;
}

/* The element type of v: inferred or declared, else the constant's. */
static int elem_of(const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	if (t && t->kind == IR_TYPE_TENSOR && t->elem)
		return t->elem;
	const struct ir_tensor *c = ir_value_const(v);
	return c ? c->dtype : 0;
}

/* The reader of y that this pass would fuse with p: an activation or an Add. */
static struct ir_node *pattern_reader(const struct ir_value *y)
{
	for (size_t u = 0; u < y->n_uses; u++) {
		struct ir_node *r = y->uses[u].node;
		if (y->uses[u].slot == 0 && is_act_op(r->op))
			return r;
		if (y->uses[u].slot >= 0 && r->op == IR_OP_Add)
			return r;
	}
	return NULL;
}

static const char *readers_text(const struct ir_value *v, char *buf, size_t size)
{
	if (v->is_output)
		snprintf(buf, size, "'%s' is also a graph output", v->name);
	else if (pass_read_in_subgraph(v))
		snprintf(buf, size, "'%s' is also read inside a subgraph", v->name);
	else
		snprintf(buf, size, "'%s' has %d readers", v->name, pass_n_readers(v));
	return buf;
}

/* A zero bias of `m` elements for a Conv or Gemm that has none (Z takes input slot 3): one per output
 * channel of a Conv (W's first dim), per output column of a Gemm (B's second dim, its first with transB). */
static struct ir_value *zero_bias(struct pass_ctx *c, const struct ir_node *conv, int dtype, char *why, size_t size)
{
	const struct ir_type *tw = ir_value_type(conv->inputs[1]);
	const struct ir_tensor *w = ir_value_const(conv->inputs[1]);
	int axis = conv->op == IR_OP_Gemm && !ir_node_attr_int(conv, "transB", 0) ? 1 : 0;
	int64_t m = -1;
	if (w && w->rank > axis)
		m = w->dims[axis];
	else if (tw && tw->kind == IR_TYPE_TENSOR && tw->rank > axis && tw->dims[axis].kind == IR_DIM_VALUE)
		m = tw->dims[axis].value;
	if (m < 0 || m > (1 << 24)) {
		snprintf(why, size, "the %s has no bias and its number of output %s is not known (a zero bias "
			 "is needed to put Z in input 4)", conv->op == IR_OP_Gemm ? "Gemm" : "conv",
			 conv->op == IR_OP_Gemm ? "columns" : "channels");
		return NULL;
	}
	struct ir_tensor *t = ir_tensor_new(dtype, 1, &m, c->d);
	if (!t)
		return NULL;
	char base[300];
	snprintf(base, sizeof(base), "%s_zero_bias", conv->inputs[1]->name);
	struct ir_value *v = pass_new_init(c->m->graph, base, t, c->d);
	ir_tensor_unref(t);
	return v;
}

/* Copies attribute `name` of `from` to `to` when it has it. */
static int copy_attr(struct ir_node *to, const struct ir_node *from, const char *name, struct ir_diag *d)
{
	const struct ir_attr *a = ir_node_attr(from, name);
	if (!a)
		return 0;
	struct ir_attr cp;
	if (ir_attr_copy(&cp, a, NULL))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	return ir_node_set_attr(to, &cp, d);
}

/*
 * Whether Reshape rs only splits the rows of the 2-D [M, N] value y (its
 * output is [..., N] with the same N): fuse-matmul-add's Reshape back to
 * the MatMul's N-D shape. An activation or a residual after it then
 * commutes with it. *n gets N.
 */
static bool rows_reshape(const struct ir_value *y, const struct ir_node *rs, int64_t *n)
{
	if (rs->op != IR_OP_Reshape || rs->n_inputs < 2 || rs->inputs[0] != y || rs->n_outputs != 1 || !rs->outputs[0] ||
	    y->is_output)
		return false;
	const struct ir_type *ty = ir_value_type(y), *t2 = ir_value_type(rs->outputs[0]);
	if (!ty || !t2 || ty->kind != IR_TYPE_TENSOR || t2->kind != IR_TYPE_TENSOR || ty->rank != 2 || t2->rank < 2)
		return false;
	const struct ir_dim *a = &ty->dims[1], *b = &t2->dims[t2->rank - 1];
	if (a->kind != IR_DIM_VALUE || b->kind != IR_DIM_VALUE || a->value != b->value || a->value < 1)
		return false;
	*n = a->value;
	return true;
}

/* A new Reshape before `before`: out = Reshape(x, shape), `out` a new value named after x. */
static struct ir_value *add_reshape(struct pass_ctx *c, struct ir_value *x, struct ir_value *shape,
				    struct ir_value *out, const char *node_base, struct ir_node *before)
{
	struct ir_graph *g = c->m->graph;
	char *vname = NULL;
	if (!out) {
		char base[300];
		snprintf(base, sizeof(base), "%s_2d", x->name);
		if (!(vname = pass_unique_name(g, base)) || !(out = ir_value_new(g, vname, c->d))) {
			free(vname);
			if (!c->d || !c->d->error)
				ir_diag_err(c->d, IR_ENOMEM, "out of memory");
			return NULL;
		}
		free(vname);
	}
	char *name = pass_unique_name(g, node_base);
	struct ir_node *r = name ? ir_node_new(g, "Reshape", NULL, name, 2, 1, before) : NULL;
	free(name);
	if (!r || ir_node_set_input(r, 0, x) || ir_node_set_input(r, 1, shape)) {
		ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	if (ir_node_set_output(r, 0, out, c->d))
		return NULL;
	return out;
}

/*
 * Looks at Conv or Gemm node p. Returns 0 (rewritten, rejected, or not a
 * match: the report says which) or an error code.
 */
static int try_fuse(struct pass_ctx *c, struct ir_node *p)
{
	struct ir_graph *g = c->m->graph;
	char pn[256], rn[256], an[256], why[400], rt[300];
	bool conv = p->op == IR_OP_Conv;
	if (p->n_outputs != 1 || !p->outputs[0] || p->n_inputs < 2 || p->n_inputs > 3 || !p->inputs[0] ||
	    !p->inputs[1])
		return 0;
	struct ir_value *y0 = p->outputs[0], *y = y0;
	/* a Gemm reshaped back to N-D by fuse-matmul-add: the pattern reads the Reshape's output, and the
	 * Reshape moves after the fused node (it only splits rows, which the residual and activation keep) */
	struct ir_node *rs = NULL;
	int64_t n_cols = 0;
	if (!conv) {
		struct ir_node *only = pass_only_reader(y0);
		if (only && rows_reshape(y0, only, &n_cols) && pattern_reader(only->outputs[0])) {
			rs = only;
			y = rs->outputs[0];
		}
	}
	struct ir_node *r = pattern_reader(y);
	if (!r)
		return 0;
	pass_node_name(p, pn, sizeof(pn));
	pass_node_name(r, rn, sizeof(rn));
	bool add = r->op == IR_OP_Add;

	if (add && r->n_inputs == 2 && r->inputs[0] == y && r->inputs[1] == y) {
		pass_rejected(c, r, "both inputs of the Add are %s's output", pn);
		return 0;
	}
	/* the conv's own output must go nowhere else */
	if (pass_only_reader(y) != r || y->is_output) {
		pass_rejected(c, r, "its input comes from %s, whose output %s: %s's own result must stay", pn,
			      readers_text(y, rt, sizeof(rt)), pn);
		return 0;
	}
	int dtype = elem_of(y);
	if (!dtype)
		dtype = elem_of(p->inputs[1]);
	if (!ir_dtype_is_float(dtype)) {
		pass_rejected(c, r, "%s's output is %s, not a float type", pn, dtype ? ir_dtype_name(dtype) : "of an unknown type");
		return 0;
	}
	if (!pass_fused_opset(c->m, why, sizeof(why))) {
		pass_rejected(c, r, "%s", why);
		return 0;
	}

	struct ir_node *nodes[4] = { p, NULL, NULL, NULL };
	int k = 1;
	struct ir_value *z = NULL;
	struct ir_node *a = NULL;
	if (add) {
		if (r->n_inputs != 2 || r->n_outputs != 1 || !r->outputs[0]) {
			pass_rejected(c, r, "the Add does not have two inputs and one output");
			return 0;
		}
		z = pass_other_input(r, y);
		if (!z) {
			pass_rejected(c, r, "both inputs of the Add are %s's output", pn);
			return 0;
		}
		if (ir_value_is_const(z)) {
			pass_rejected(c, r, "the Add's other input '%s' is a constant, not a residual: %s", z->name,
				      conv ? "fuse-conv-add folds a per-channel constant into the bias"
					   : "fuse-matmul-add folds a constant bias into the Gemm");
			return 0;
		}
		if (elem_of(z) != dtype) {
			pass_rejected(c, r, "the Add's other input '%s' is %s but %s's output is %s", z->name,
				      elem_of(z) ? ir_dtype_name(elem_of(z)) : "of an unknown type", pn, ir_dtype_name(dtype));
			return 0;
		}
		if (depends_on(g, z, p)) {
			pass_rejected(c, r, "the Add's other input '%s' depends on %s's output", z->name, pn);
			return 0;
		}
		bool known;
		if (!conv && !same_shape(z, y, &known)) {
			pass_rejected(c, r, "the Add's other input '%s' is not known to have the shape of %s's output: "
				      "FusedGemm's Z is the residual itself, not a broadcast", z->name, pn);
			return 0;
		}
		if (!same_shape(y, r->outputs[0], &known)) {
			char ta[200], tb[200];
			if (known)
				pass_rejected(c, r, "the sum is %s but %s's output is %s: the Add may broadcast %s's output to "
					      "a larger shape, and Z must fit in it", ir_type_str(ir_value_type(r->outputs[0]), ta, sizeof(ta)),
					      pn, ir_type_str(ir_value_type(y), tb, sizeof(tb)), pn);
			else
				pass_rejected(c, r, "the shapes of %s's output and of the sum are not known to be the same", pn);
			return 0;
		}
		nodes[k++] = r;
		/* an activation after the Add, when the sum goes nowhere else */
		struct ir_value *s = r->outputs[0];
		struct ir_node *q = pattern_reader(s);
		if (q && is_act_op(q->op)) {
			pass_node_name(q, an, sizeof(an));
			if (pass_only_reader(s) != q || s->is_output)
				pass_note(c, q, "not fused: its input, the sum of %s, %s (the residual alone is fused)", rn,
					  readers_text(s, rt, sizeof(rt)));
			else
				a = q;
		}
	} else {
		a = r;
	}

	struct act act = { .name = "" };
	if (a && !read_act(c->m, a, &act, why, sizeof(why))) {
		if (!add) {
			pass_rejected(c, a, "%s", why);
			return 0;
		}
		/* the residual still fuses */
		pass_rejected(c, a, "%s (only the residual Add is fused)", why);
		a = NULL;
		act = (struct act){ .name = "" };
	}
	if (a)
		nodes[k++] = a;

	/* the fused node, where the pattern's last node is (Z is computed by then) */
	struct ir_node *last = nodes[k - 1];
	struct ir_value *out = last->outputs[0];
	struct ir_value *bias = p->n_inputs > 2 ? p->inputs[2] : NULL;
	if (z && !bias && !(bias = zero_bias(c, p, dtype, why, sizeof(why)))) {
		if (c->d && c->d->error)
			return IR_ERR;
		pass_rejected(c, r, "%s", why);
		return 0;
	}
	const char *op = conv ? "FusedConv" : "FusedGemm";
	/* through a Reshape: Z is reshaped to [-1, N] for the fused node (a view on the GPU) */
	struct ir_value *zin = z;
	if (rs && z) {
		char base[300];
		int64_t sh[2] = { -1, n_cols }, two = 2;
		struct ir_tensor *t = ir_tensor_new(IR_INT64, 1, &two, c->d);
		if (!t)
			return IR_ERR;
		memcpy(ir_tensor_mutable(t), sh, sizeof(sh));
		snprintf(base, sizeof(base), "%s.shape_2d", z->name);
		struct ir_value *zs = pass_new_init(g, base, t, c->d);
		ir_tensor_unref(t);
		snprintf(base, sizeof(base), "%s_reshape_2d", z->name);
		if (!zs || !(zin = add_reshape(c, z, zs, NULL, base, last)))
			return IR_ERR;
	}
	char *name = pass_new_node_name(g, p, op);
	if (!name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	int n_in = z ? 4 : bias ? 3 : 2;
	struct ir_node *f = ir_node_new(g, op, FUSED_DOMAIN, name, n_in, 1, last);
	free(name);
	if (!f)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_value *ins[4] = { p->inputs[0], p->inputs[1], bias, zin };
	int rc = 0;
	for (int i = 0; i < n_in && !rc; i++)
		rc = ir_node_set_input(f, i, ins[i]);
	const char *const *names = conv ? conv_attrs : gemm_attrs;
	for (int i = 0; i < (conv ? 6 : 4) && !rc; i++)
		rc = copy_attr(f, p, names[i], c->d);
	if (!rc)
		rc = pass_fused_set_str(f, "activation", act.name, c->d);
	if (!rc && act.n_params) {
		struct ir_attr pa = { 0 };
		pa.name = strdup("activation_params");
		pa.type = IR_ATTR_FLOATS;
		pa.has_type = true;
		pa.floats = malloc(sizeof(float) * (size_t)act.n_params);
		if (!pa.name || !pa.floats) {
			ir_attr_clear(&pa);
			rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		} else {
			pa.n = (size_t)act.n_params;
			for (int i = 0; i < act.n_params; i++)
				pa.floats[i] = (float)act.p[i];
			rc = ir_node_set_attr(f, &pa, c->d);
		}
	}
	if (rc) {
		if (!c->d || !c->d->error)
			ir_diag_err(c->d, rc, "out of memory");
		return rc;
	}

	/* its function: the variant by activation, parameters, inputs and element type */
	char key[400], base[120], doc[400], ps[120] = "";
	for (int i = 0; i < act.n_params; i++)
		snprintf(ps + strlen(ps), sizeof(ps) - strlen(ps), "%s%.9g", i ? "," : "", (double)(float)act.p[i]);
	snprintf(key, sizeof(key), "%s|%s|%s|in=%d|%s", op, act.name, ps, n_in, ir_dtype_name(dtype));
	snprintf(base, sizeof(base), "%s%s%s%s%s", *act.name ? act.name : z ? "" : "None",
		 z ? (*act.name ? "_Z" : "Z") : "", n_in == 2 ? "_noB" : "", dtype != IR_FLOAT ? "_" : "",
		 dtype != IR_FLOAT ? ir_dtype_name(dtype) : "");
	char inner[100];
	snprintf(inner, sizeof(inner), "%s%s", conv ? (n_in >= 3 ? "Conv(X, W, B)" : "Conv(X, W)")
						     : (n_in == 3 ? "Gemm(A, B, C)" : "Gemm(A, B)"), z ? " + Z" : "");
	if (*act.name)
		snprintf(doc, sizeof(doc), "ogsh fused op: Y = %s(%s)%s%s", act.name, inner, *ps ? ", parameters " : "", ps);
	else
		snprintf(doc, sizeof(doc), "ogsh fused op: Y = %s", inner);
	struct fn_arg fa = { .conv = conv, .n_in = n_in, .z = z != NULL, .act = &act };
	if ((rc = pass_fused_fn_use(c, f, base, key, doc, names, conv ? 8 : 6, dtype, build_fused, &fa)))
		return rc;

	pass_set_from(f, nodes, k);
	if (k == 1)
		return ir_diag_err(c->d, IR_ERR, "internal error: nothing to fuse");
	if (rs)
		pass_add_from(f, rs);
	char what[600];
	if (add && a)
		snprintf(what, sizeof(what), "fused with the residual Add '%s' and %s '%s' into %s '%s' (activation=%s)",
			 rn, a->op_type, pass_node_name(a, an, sizeof(an)), op, f->name, act.name);
	else if (add)
		snprintf(what, sizeof(what), "fused with the residual Add '%s' into %s '%s' (Y = %s + Z)", rn, op, f->name,
			 conv ? "Conv(X, W, B)" : "Gemm(A, B, C)");
	else
		snprintf(what, sizeof(what), "fused with %s '%s' into %s '%s' (activation=%s)", a->op_type, rn, op,
			 f->name, act.name);
	if (z && !(p->n_inputs > 2 && p->inputs[2]))
		snprintf(what + strlen(what), sizeof(what) - strlen(what), "; a zero bias '%s' holds input 3's place",
			 bias->name);
	if (rs)
		snprintf(what + strlen(what), sizeof(what) - strlen(what),
			 "; the Reshape '%s' back to %d-D now follows it%s", pass_node_name(rs, an, sizeof(an)),
			 ir_value_type(rs->outputs[0])->rank, z ? ", and Z is reshaped to [-1," : "");
	if (rs && z)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), "%lld]", (long long)n_cols);
	pass_rewrote(c, p, "%s", what);

	/* rewire: f produces the pattern's output (its name is kept), or a 2-D value the Reshape reads */
	if ((rc = ir_node_set_output(last, 0, NULL, c->d)))
		return rc;
	if (rs) {
		char rbase[300];
		snprintf(rbase, sizeof(rbase), "%s", rs->name && *rs->name ? rs->name : "reshape_out");
		struct ir_value *f2 = NULL;
		char *vn = pass_unique_name(g, y0->name);
		if (!vn || !(f2 = ir_value_new(g, vn, c->d))) {
			free(vn);
			return c->d && c->d->error ? IR_ERR : ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		}
		free(vn);
		if ((rc = ir_node_set_output(f, 0, f2, c->d)))
			return rc;
		if (!add_reshape(c, f2, rs->inputs[1], out, rbase, last))
			return IR_ERR;
		nodes[k++] = rs;
	} else if ((rc = ir_node_set_output(f, 0, out, c->d))) {
		return rc;
	}
	/* Clip's bounds are attributes now: they go when nothing else reads them */
	struct ir_value *consts[2] = { NULL, NULL };
	if (a && a->op == IR_OP_Clip)
		for (int i = 1; i < a->n_inputs && i < 3; i++)
			if (a->inputs[i] && a->inputs[i]->init && !a->inputs[i]->producer)
				consts[i - 1] = a->inputs[i];
	if ((rc = pass_remove_nodes(c, nodes, k)))
		return rc;
	pass_drop_dead_consts(consts, 2);
	return 0;
}

static bool is_conv_gemm(const struct ir_node *n)
{
	return n->op == IR_OP_Conv || n->op == IR_OP_Gemm;
}

static int run(struct pass_ctx *c)
{
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "interrupted" : "out of memory");
	/* the candidates first: a rewrite removes nodes */
	return pass_each_node(c, is_conv_gemm, try_fuse);
}

const struct pass pass_fuse_activation = {
	.name = "fuse-activation",
	.summary = "fuse a Conv or Gemm with the activation after it (and with a residual Add) into one ogsh FusedConv/FusedGemm",
	.explain =
		"A convolution writes its whole output to memory, and the activation after it reads it all back "
		"to apply one cheap function per element. Fused, the activation runs on each output while it is "
		"still at hand: one node, one pass over the output instead of three (write, read, write). This pass "
		"turns Conv -> act into FusedConv and Gemm -> act into FusedGemm, ogsh's own ops in the 'ai.ogsh' "
		"domain, where act is Relu, Clip (Relu6 is Clip(0, 6)), LeakyRelu, Sigmoid, HardSigmoid, HardSwish, "
		"Tanh or Gelu (ONNX's, or the ai.ogsh Gelu that fuse-gelu makes before opset 20). Nothing is rounded differently: Y = act(Conv(X, W, B)) is computed by the same "
		"convolution, then the same function.\n\n"
		"A residual connection, Conv -> Add(other) -> act as in ResNet, also fuses: "
		"Y = act(Conv(X, W, B) + Z), with Z the Add's other input given to FusedConv as its fourth input "
		"(a conv without a bias gets a zero bias to keep input 3's place). Without an activation after the "
		"Add, the residual alone fuses (activation=\"\"). The Add must not broadcast the conv's output to a "
		"larger shape (both shapes must be known), and Z must not depend on the conv's output.\n\n"
		"A transformer's projection, Gemm -> Add(residual) as in every encoder layer, fuses the same way: "
		"Y = act(Gemm(A, B, C) + Z) as FusedGemm with Z its fourth input, which must have the output's "
		"shape (on the GPU the product, the bias and Z are one cuBLASLt call: Z is its C, with beta 1). "
		"fuse-matmul-add turns a MatMul of N-D activations into Reshape -> Gemm -> Reshape back; the "
		"Reshape back only splits rows, so an activation or a residual after it commutes with it: the "
		"pass fuses them into the Gemm, reshapes Z to [-1, N] (a view, no copy) and puts the Reshape back "
		"after the fused node.\n\n"
		"The fused node keeps the Conv's attributes (auto_pad, dilations, group, kernel_shape, pads, strides) "
		"or the Gemm's (alpha, beta, transA, transB) and adds activation (the op's name) and "
		"activation_params: Clip's [min, max], LeakyRelu's [alpha], HardSigmoid's [alpha, beta], Gelu's "
		"[approximate] as 0 (erf) or 1 (tanh). It produces the activation's output under its name, so "
		"nothing after it changes.\n\n"
		"Saved models stay runnable elsewhere: the model gets a model-local ONNX function for each variant "
		"(domain ai.ogsh, name FusedConv or FusedGemm, overload such as 'Relu', 'Relu_Z', 'Clip', 'Z') whose "
		"body computes the same thing with standard ops, its conv attributes referring to the node's; the "
		"model's IR version becomes 10 and it imports ai.ogsh version 1. ogsh itself runs the fused kernel.\n\n"
		"It does not apply when: the conv's output is read by another node or is a graph output (the others "
		"need the value before the activation); the output is not a float type; Clip's min or max is not a "
		"constant scalar, or Gelu's approximate is unknown; the Add's other input is a constant (that is "
		"fuse-conv-add's job), depends on the conv, or broadcasts the output; after a Gemm, Z does not have "
		"the output's shape; or the model's ONNX opset is below 9. Subgraphs are left alone.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
