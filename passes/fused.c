/*
 * fused.c - model-local functions for ogsh's fused ops: a body in standard
 * ONNX ops per variant (overload), added to the model once (declared in
 * fused.h).
 */
#include "passes/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ONNX opset the model imports when a fused op's function can be
 * written for it, else 0 with why. */
int64_t pass_fused_opset(const struct ir_model *m, char *why, size_t size)
{
	int64_t v = ir_model_opset(m, "");
	if (v <= 0) {
		snprintf(why, size, "the model imports no ONNX opset to write the fused op's function with");
		return 0;
	}
	if (v < FUSED_MIN_OPSET) {
		snprintf(why, size, "the model imports ONNX opset %lld: the fused op's function needs %d or later",
			 (long long)v, FUSED_MIN_OPSET);
		return 0;
	}
	return v;
}

static struct ir_value *fb_value(struct pass_fbody *b)
{
	char name[32];
	snprintf(name, sizeof(name), "t%u", b->fresh++);
	struct ir_value *v = ir_value_new(b->g, name, b->d);
	if (!v)
		b->rc = IR_ENOMEM;
	return v;
}

/* A formal input of the body. */
struct ir_value *pass_fb_input(struct pass_fbody *b, const char *name)
{
	if (b->rc)
		return NULL;
	struct ir_value *v = ir_value_new(b->g, name, b->d);
	if (!v || ir_graph_add_input(b->g, v)) {
		b->rc = IR_ENOMEM;
		return NULL;
	}
	return v;
}

/* A node of the default domain reading in[] (NULL entries: omitted);
 * returns its one output. */
struct ir_value *pass_fb_node(struct pass_fbody *b, const char *op, struct ir_value *const *in, int n_in,
			      struct ir_node **node)
{
	if (b->rc)
		return NULL;
	for (int i = 0; i < n_in; i++)
		if (in[i] && in[i]->graph != b->g) {
			b->rc = ir_diag_err(b->d, IR_ERR, "internal error: a function body reads a value of another graph");
			return NULL;
		}
	char name[32];
	snprintf(name, sizeof(name), "n%d_%s", b->g->next_id, op);
	struct ir_node *n = ir_node_new(b->g, op, "", name, n_in, 1, NULL);
	struct ir_value *out = n ? fb_value(b) : NULL;
	if (!n || !out) {
		b->rc = IR_ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n_in; i++)
		if (ir_node_set_input(n, i, in[i])) {
			b->rc = IR_ENOMEM;
			return NULL;
		}
	if ((b->rc = ir_node_set_output(n, 0, out, b->d)))
		return NULL;
	if (node)
		*node = n;
	return out;
}

/* A Constant node of the body holding t (its reference is taken, also on error). */
static struct ir_value *fb_const_node(struct pass_fbody *b, struct ir_tensor *t)
{
	struct ir_node *n;
	struct ir_value *out = pass_fb_node(b, "Constant", NULL, 0, &n);
	if (!out) {
		ir_tensor_unref(t);
		return NULL;
	}
	struct ir_attr a = { 0 };
	a.name = strdup("value");
	a.type = IR_ATTR_TENSOR;
	a.has_type = true;
	a.t = t;
	if (!a.name || ir_node_set_attr(n, &a, b->d)) {
		ir_attr_clear(&a);
		b->rc = IR_ENOMEM;
	}
	return out;
}

/* A scalar Constant of the body's element type. */
struct ir_value *pass_fb_const(struct pass_fbody *b, double v)
{
	if (b->rc)
		return NULL;
	struct ir_tensor *t = pass_tensor_from_f64(b->dtype, 0, NULL, &v, b->d);
	if (!t) {
		b->rc = IR_ERR;
		return NULL;
	}
	return fb_const_node(b, t);
}

/* op(x, y): a node of two inputs. */
struct ir_value *pass_fb_bin(struct pass_fbody *b, const char *op, struct ir_value *x, struct ir_value *y)
{
	struct ir_value *in[2] = { x, y };
	return pass_fb_node(b, op, in, 2, NULL);
}

/* GELU of t in standard ops: 0.5 * t * (1 + erf(t / sqrt(2))), or with
 * tanh_form 0.5 * t * (1 + tanh(sqrt(2 / pi) * (t + 0.044715 * t^3))). */
struct ir_value *pass_fb_gelu(struct pass_fbody *b, struct ir_value *t, bool tanh_form)
{
	struct ir_value *u;
	if (!tanh_form) {
		/* erf(x / sqrt(2)) */
		u = pass_fb_bin(b, "Div", t, pass_fb_const(b, sqrt(2.0)));
		u = pass_fb_node(b, "Erf", &u, 1, NULL);
	} else {
		/* tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)) */
		struct ir_value *x3 = pass_fb_bin(b, "Mul", pass_fb_bin(b, "Mul", t, t), t);
		u = pass_fb_bin(b, "Add", t, pass_fb_bin(b, "Mul", x3, pass_fb_const(b, 0.044715)));
		u = pass_fb_bin(b, "Mul", u, pass_fb_const(b, 0.79788456080286535588));
		u = pass_fb_node(b, "Tanh", &u, 1, NULL);
	}
	/* 0.5 * x * (1 + u) */
	struct ir_value *p = pass_fb_bin(b, "Mul", t, pass_fb_bin(b, "Add", u, pass_fb_const(b, 1.0)));
	return pass_fb_bin(b, "Mul", p, pass_fb_const(b, 0.5));
}

/* Attribute `name` of n refers to the calling node's attribute of that name. */
void pass_fb_attr_ref(struct pass_fbody *b, struct ir_node *n, const char *name, enum ir_attr_type type)
{
	if (b->rc || !n)
		return;
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.ref_attr_name = strdup(name);
	a.type = type;
	a.has_type = true;
	if (!a.name || !a.ref_attr_name || ir_node_set_attr(n, &a, b->d)) {
		ir_attr_clear(&a);
		b->rc = IR_ENOMEM;
	}
}

void pass_fb_attr_float(struct pass_fbody *b, struct ir_node *n, const char *name, double v)
{
	if (b->rc || !n)
		return;
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_FLOAT;
	a.has_type = true;
	a.f = (float)v;
	if (!a.name || ir_node_set_attr(n, &a, b->d)) {
		ir_attr_clear(&a);
		b->rc = IR_ENOMEM;
	}
}

/* v (a node's output) becomes the body's output "Y". */
void pass_fb_output(struct pass_fbody *b, struct ir_value *v)
{
	if (b->rc)
		return;
	if (!v || !v->producer) {
		b->rc = ir_diag_err(b->d, IR_ERR, "internal error: a function body's output is not computed");
		return;
	}
	if (ir_value_rename(v, "Y", b->d) || ir_graph_add_output(b->g, v))
		b->rc = IR_ERR;
}

/* Sets a string attribute (a copy). */
int pass_fused_set_str(struct ir_node *n, const char *name, const char *value, struct ir_diag *d)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_STRING;
	a.has_type = true;
	a.s.data = strdup(value);
	a.s.len = strlen(value);
	if (!a.name || !a.s.data) {
		ir_attr_clear(&a);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	return ir_node_set_attr(n, &a, d);
}

static const char *fn_key(const struct ir_function *f)
{
	for (size_t i = 0; i < f->n_meta; i++)
		if (f->meta[i].key && !strcmp(f->meta[i].key, "ogsh.key"))
			return f->meta[i].value;
	return NULL;
}

static bool fn_overload_taken(const struct ir_model *m, const char *op, const char *overload)
{
	for (size_t i = 0; i < m->n_functions; i++) {
		const struct ir_function *f = &m->functions[i];
		if (f->name && !strcmp(f->name, op) && f->domain && !strcmp(f->domain, FUSED_DOMAIN) &&
		    !strcmp(f->overload ? f->overload : "", overload))
			return true;
	}
	return false;
}

/* IR version 10 (overloaded functions) and the ai.ogsh opset import. */
static int fn_model_needs(struct ir_model *m, struct ir_diag *d)
{
	if (!m->has_ir_version || m->ir_version < 10) {
		m->ir_version = 10;
		m->has_ir_version = true;
	}
	for (size_t i = 0; i < m->n_opsets; i++)
		if (m->opsets[i].domain && !strcmp(m->opsets[i].domain, FUSED_DOMAIN))
			return 0;
	struct ir_opset *o = realloc(m->opsets, (m->n_opsets + 1) * sizeof(*o));
	if (!o)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	m->opsets = o;
	o[m->n_opsets].domain = strdup(FUSED_DOMAIN);
	o[m->n_opsets].version = 1;
	o[m->n_opsets].has_version = true;
	if (!o[m->n_opsets].domain)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	m->n_opsets++;
	return 0;
}

/*
 * Gives fused node n (op n->op_type of ai.ogsh) the model-local function
 * for its variant: the one whose key (metadata "ogsh.key") is `key` when
 * the model has it, else a new one whose body `build` writes (inputs,
 * nodes, output) for the model's ONNX opset, with overload `base` (or
 * base_2, base_3... when taken), attributes attrs[] and `doc`. Sets
 * n->overload, the model's IR version (10) and its ai.ogsh import.
 */
int pass_fused_fn_use(struct pass_ctx *c, struct ir_node *n, const char *base, const char *key, const char *doc,
		      const char *const *attrs, int n_attrs, int dtype,
		      void (*build)(struct pass_fbody *b, void *arg), void *arg)
{
	struct ir_model *m = c->m;
	const char *op = n->op_type;
	const char *overload = NULL;
	for (size_t i = 0; i < m->n_functions && !overload; i++) {
		const struct ir_function *f = &m->functions[i];
		const char *k = fn_key(f);
		if (k && !strcmp(k, key) && f->name && !strcmp(f->name, op) && f->domain &&
		    !strcmp(f->domain, FUSED_DOMAIN))
			overload = f->overload ? f->overload : "";
	}
	char ov[200];
	if (!overload) {
		char why[200];
		int64_t opset = pass_fused_opset(m, why, sizeof(why));
		if (!opset)
			return ir_diag_err(c->d, IR_ERR, "internal error: %s", why);
		snprintf(ov, sizeof(ov), "%s", base);
		for (int k = 2; fn_overload_taken(m, op, ov) && k < 100000; k++)
			snprintf(ov, sizeof(ov), "%s_%d", base, k);
		struct pass_fbody b = { .dtype = dtype, .opset = opset, .d = c->d };
		if (!(b.g = ir_graph_new(op)))
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		b.g->is_function = true;
		build(&b, arg);
		if (b.rc) {
			ir_graph_free(b.g);
			if (!c->d || !c->d->error)
				ir_diag_err(c->d, IR_ERR, "cannot write the function of %s", op);
			return IR_ERR;
		}
		struct ir_function *fs = realloc(m->functions, (m->n_functions + 1) * sizeof(*fs));
		if (!fs) {
			ir_graph_free(b.g);
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		}
		m->functions = fs;
		struct ir_function *f = &fs[m->n_functions];
		memset(f, 0, sizeof(*f));
		f->body = b.g;
		m->n_functions++;
		f->name = strdup(op);
		f->domain = strdup(FUSED_DOMAIN);
		f->overload = strdup(ov);
		f->doc = strdup(doc);
		f->attr_names = calloc((size_t)(n_attrs ? n_attrs : 1), sizeof(char *));
		f->opsets = calloc(1, sizeof(*f->opsets));
		f->meta = calloc(1, sizeof(*f->meta));
		if (!f->name || !f->domain || !f->overload || !f->doc || !f->attr_names || !f->opsets || !f->meta)
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		for (int i = 0; i < n_attrs; i++)
			if ((f->attr_names[f->n_attr_names] = strdup(attrs[i])))
				f->n_attr_names++;
		if ((f->opsets[0].domain = strdup("")))
			f->n_opsets = 1;
		f->opsets[0].version = opset;
		f->opsets[0].has_version = true;
		f->meta[0].key = strdup("ogsh.key");
		f->meta[0].value = strdup(key);
		f->n_meta = 1;
		if (f->n_attr_names != (size_t)n_attrs || !f->n_opsets || !f->meta[0].key || !f->meta[0].value)
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		overload = ov;
	}
	char *o = strdup(overload);
	if (!o)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	free(n->overload);
	n->overload = o;
	return fn_model_needs(m, c->d);
}

/* ------------------------------------------------------------------------ */
/* FusedAttention with packed Q, K, V or an output layout                    */
/* ------------------------------------------------------------------------ */

/* An int64 Constant of the body: rank 0 (one value) or 1. */
static struct ir_value *fb_const_i64(struct pass_fbody *b, const int64_t *v, int n, int rank)
{
	if (b->rc)
		return NULL;
	int64_t dims[1] = { n };
	struct ir_tensor *t = ir_tensor_new(IR_INT64, rank, dims, b->d);
	if (!t) {
		b->rc = IR_ERR;
		return NULL;
	}
	int64_t *p = ir_tensor_mutable(t);
	for (int i = 0; i < n; i++)
		p[i] = v[i];
	return fb_const_node(b, t);
}

static void fb_set_ints(struct pass_fbody *b, struct ir_node *n, const char *name, const int64_t *v, int k)
{
	if (b->rc || !n)
		return;
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.ints = malloc(sizeof(int64_t) * (size_t)(k ? k : 1));
	a.type = IR_ATTR_INTS;
	a.has_type = true;
	a.n = (size_t)k;
	if (a.ints)
		memcpy(a.ints, v, sizeof(int64_t) * (size_t)k);
	if (!a.name || !a.ints || ir_node_set_attr(n, &a, b->d)) {
		ir_attr_clear(&a);
		b->rc = IR_ENOMEM;
	}
}

static void fb_set_int(struct pass_fbody *b, struct ir_node *n, const char *name, int64_t v)
{
	if (b->rc || !n)
		return;
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_INT;
	a.has_type = true;
	a.i = v;
	if (!a.name || ir_node_set_attr(n, &a, b->d)) {
		ir_attr_clear(&a);
		b->rc = IR_ENOMEM;
	}
}

static struct ir_value *fb_transpose(struct pass_fbody *b, struct ir_value *x, const int64_t *perm, int k)
{
	struct ir_node *n = NULL;
	struct ir_value *y = pass_fb_node(b, "Transpose", &x, 1, &n);
	fb_set_ints(b, n, "perm", perm, k);
	return y;
}


struct ir_value *pass_fb_sdpa(struct pass_fbody *b, struct ir_value *q, struct ir_value *kt, struct ir_value *v,
			      struct ir_value *mask, double scale, bool nan_zero)
{
	struct ir_value *in[3] = { q, kt, NULL };
	struct ir_value *s = pass_fb_node(b, "MatMul", in, 2, NULL);
	in[0] = s;
	in[1] = pass_fb_const(b, scale);
	s = pass_fb_node(b, "Mul", in, 2, NULL);
	if (mask) {
		in[0] = s;
		in[1] = mask;
		s = pass_fb_node(b, "Add", in, 2, NULL);
	}
	struct ir_node *sm = NULL;
	struct ir_value *p = pass_fb_node(b, "Softmax", &s, 1, &sm);
	fb_set_int(b, sm, "axis", -1);
	if (nan_zero) {
		struct ir_value *isn = pass_fb_node(b, "IsNaN", &p, 1, NULL);
		in[0] = isn;
		in[1] = pass_fb_const(b, 0);
		in[2] = p;
		p = pass_fb_node(b, "Where", in, 3, NULL);
	}
	in[0] = p;
	in[1] = v;
	return pass_fb_node(b, "MatMul", in, 2, NULL);
}

/*
 * The body: the packed input reshaped to its full rank (the merged axes
 * split), transposed to [3, B, H, S, D] and Gathered into Q, K, V (or Q, K,
 * V transposed from BSHD to BHSD); softmax(Q K^T * scale + mask) V; the
 * result transposed from BHSD to out_layout.
 */
static void build_attention_fn(struct pass_fbody *b, void *arg)
{
	const struct pass_attn_fn *a = arg;
	const struct ir_attn_layout *l = &a->l;
	struct ir_value *q, *k, *v;
	struct ir_value *in[3];
	if (l->packed) {
		struct ir_value *x = pass_fb_input(b, "QKV");
		if (a->mask) {
			pass_fb_input(b, "K");
			pass_fb_input(b, "V");
		}
		const int nl = (int)strlen(l->in);
		if (a->in_rank < nl) {   /* [.., 3*H*D] -> [.., 3, H, D]: 0 keeps an axis */
			int64_t shape[5];
			for (int i = 0; i < nl; i++)
				shape[i] = i < a->in_rank - 1 ? 0 : l->in[i] == '3' ? 3 : l->in[i] == 'H' ? a->heads : -1;
			in[0] = x;
			in[1] = fb_const_i64(b, shape, nl, 1);
			x = pass_fb_node(b, "Reshape", in, 2, NULL);
		}
		int64_t perm[5];
		const char *order = "3BHSD";
		for (int i = 0; i < 5; i++)
			perm[i] = strchr(l->in, order[i]) - l->in;
		x = fb_transpose(b, x, perm, 5);
		struct ir_value *parts[3];
		for (int64_t i = 0; i < 3; i++) {
			struct ir_node *g = NULL;
			in[0] = x;
			in[1] = fb_const_i64(b, &i, 1, 0);
			parts[i] = pass_fb_node(b, "Gather", in, 2, &g);
			fb_set_int(b, g, "axis", 0);
		}
		q = parts[0];
		k = parts[1];
		v = parts[2];
	} else {
		q = pass_fb_input(b, "Q");
		k = pass_fb_input(b, "K");
		v = pass_fb_input(b, "V");
		if (!strcmp(l->in, "BSHD")) {
			static const int64_t swap[4] = { 0, 2, 1, 3 };
			q = fb_transpose(b, q, swap, 4);
			k = fb_transpose(b, k, swap, 4);
			v = fb_transpose(b, v, swap, 4);
		}
	}
	struct ir_value *mask = a->mask ? pass_fb_input(b, "mask") : NULL;
	static const int64_t kt_perm[4] = { 0, 1, 3, 2 };
	struct ir_value *kt = fb_transpose(b, k, kt_perm, 4);
	struct ir_value *y = pass_fb_sdpa(b, q, kt, v, mask, a->scale, a->nan_zero);
	if (strcmp(l->out, "BHSD")) {
		int64_t perm[4];
		for (int i = 0; i < 4; i++)
			perm[i] = strchr("BHSD", l->out[i]) - "BHSD";
		y = fb_transpose(b, y, perm, 4);
	}
	pass_fb_output(b, y);
}

/*
 * Sets FusedAttention node n's layout, out_layout, q_num_heads (packed),
 * scale and nan_to_zero from `a`, and gives it the model-local function of
 * its variant.
 */
int pass_fused_attention_fn(struct pass_ctx *c, struct ir_node *n, const struct pass_attn_fn *a, int elem)
{
	const struct ir_attn_layout *l = &a->l;
	struct ir_attr sa = { 0 };
	sa.name = strdup("scale");
	sa.type = IR_ATTR_FLOAT;
	sa.has_type = true;
	sa.f = (float)a->scale;
	if (!sa.name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	int rc = ir_node_set_attr(n, &sa, c->d);
	if (!rc)
		rc = pass_fused_set_str(n, "layout", l->in, c->d);
	if (!rc && l->has_out)
		rc = pass_fused_set_str(n, "out_layout", l->out, c->d);
	if (!rc && a->nan_zero) {
		struct ir_attr na = { 0 };
		na.name = strdup("nan_to_zero");
		na.type = IR_ATTR_INT;
		na.has_type = true;
		na.i = 1;
		rc = na.name ? ir_node_set_attr(n, &na, c->d) : ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	}
	if (!rc && l->packed && a->heads > 0) {
		struct ir_attr ha = { 0 };
		ha.name = strdup("q_num_heads");
		ha.type = IR_ATTR_INT;
		ha.has_type = true;
		ha.i = a->heads;
		rc = ha.name ? ir_node_set_attr(n, &ha, c->d) : ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	}
	if (rc)
		return rc;
	char key[240], base[96], doc[400];
	double sc = (double)(float)a->scale;
	snprintf(key, sizeof(key), "FusedAttention|%s|out=%s|rank=%d|heads=%lld|mask=%d|nan=%d|scale=%.9g|%s", l->in,
		 l->out, a->in_rank, (long long)a->heads, a->mask, a->nan_zero, sc, ir_dtype_name(elem));
	snprintf(base, sizeof(base), "%s_to_%s%s%s%s%s", l->in, l->out, a->mask ? "_mask" : "", a->nan_zero ? "_nan0" : "",
		 elem != IR_FLOAT ? "_" : "", elem != IR_FLOAT ? ir_dtype_name(elem) : "");
	snprintf(doc, sizeof(doc), "ogsh fused op: Y = softmax(Q K^T * %.9g%s) V per batch and head%s; %s %s, Y %s", sc,
		 a->mask ? " + mask" : "", a->nan_zero ? ", NaN softmax rows as 0" : "",
		 l->packed ? "Q, K and V packed in input 0 as" : "Q, K, V", l->in, l->out);
	static const char *const names[] = { "scale", "nan_to_zero", "layout", "out_layout", "q_num_heads", "kv_num_heads" };
	struct pass_attn_fn copy = *a;
	copy.scale = sc;
	return pass_fused_fn_use(c, n, base, key, doc, names, 6, elem, build_attention_fn, &copy);
}

/* ------------------------------------------------------------------------ */
/* The model-local functions nodes call                                     */
/* ------------------------------------------------------------------------ */

struct fn_marks {
	const struct ir_model *m;
	bool *used;
};

static int mark_calls(struct ir_graph *g, void *arg)
{
	struct fn_marks *u = arg;
	ir_for_each_node(g, n) {
		const struct ir_function *f = ir_model_find_function(u->m, n);
		if (f)
			u->used[f - u->m->functions] = true;
	}
	return 0;
}

void pass_fns_called(const struct ir_model *m, bool *used)
{
	struct fn_marks u = { m, used };
	ir_graph_walk(m->graph, mark_calls, &u);
}

int pass_drop_uncalled_fns(struct ir_model *m, const bool *was, size_t n_was, const char *domain, struct ir_diag *d)
{
	bool *used = calloc(m->n_functions ? m->n_functions : 1, 1);
	if (!used)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	pass_fns_called(m, used);
	size_t k = 0, n = m->n_functions;
	for (size_t i = 0; i < n; i++) {
		const char *dom = m->functions[i].domain;
		if (i < n_was && was[i] && !used[i] && (!domain || (dom && !strcmp(dom, domain)))) {
			ir_function_clear(&m->functions[i]);
			continue;
		}
		m->functions[k++] = m->functions[i];
	}
	m->n_functions = k;
	free(used);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* LayerNormalization and Gelu before the ONNX opset that has them           */
/* ------------------------------------------------------------------------ */

struct ln_fn {
	int k;            /* normalized axes: the last k */
	double eps;
	bool bias;
};

/* mean = ReduceMean(X), d = X - mean, Y = d / sqrt(ReduceMean(d * d) + eps)
 * * Scale [+ B], the means over the last k axes (the axes an attribute
 * before opset 18, an input from 18 on) */
static void build_layernorm_fn(struct pass_fbody *b, void *arg)
{
	const struct ln_fn *f = arg;
	struct ir_value *x = pass_fb_input(b, "X");
	struct ir_value *scale = pass_fb_input(b, "Scale");
	struct ir_value *bias = f->bias ? pass_fb_input(b, "B") : NULL;
	int64_t axes[IR_MAX_RANK];
	for (int i = 0; i < f->k; i++)
		axes[i] = i - f->k;
	struct ir_value *axv = b->opset >= 18 ? fb_const_i64(b, axes, f->k, 1) : NULL;
	struct ir_value *in[2] = { x, axv };
	struct ir_node *r = NULL;
	struct ir_value *mean = pass_fb_node(b, "ReduceMean", in, axv ? 2 : 1, &r);
	if (!axv)
		fb_set_ints(b, r, "axes", axes, f->k);
	struct ir_value *d = pass_fb_bin(b, "Sub", x, mean);
	in[0] = pass_fb_bin(b, "Mul", d, d);
	in[1] = axv;
	struct ir_value *var = pass_fb_node(b, "ReduceMean", in, axv ? 2 : 1, &r);
	if (!axv)
		fb_set_ints(b, r, "axes", axes, f->k);
	struct ir_value *s = pass_fb_bin(b, "Add", var, pass_fb_const(b, f->eps));
	s = pass_fb_node(b, "Sqrt", &s, 1, NULL);
	struct ir_value *y = pass_fb_bin(b, "Mul", pass_fb_bin(b, "Div", d, s), scale);
	if (bias)
		y = pass_fb_bin(b, "Add", y, bias);
	pass_fb_output(b, y);
}

int pass_fused_layernorm_fn(struct pass_ctx *c, struct ir_node *n, int k, double eps, bool bias, int elem)
{
	char key[160], base[64], doc[300];
	double e = (double)(float)eps;
	snprintf(key, sizeof(key), "LayerNormalization|k=%d|eps=%.9g|bias=%d|%s", k, e, bias, ir_dtype_name(elem));
	snprintf(base, sizeof(base), "last%d%s%s%s", k, bias ? "" : "_nobias", elem != IR_FLOAT ? "_" : "",
		 elem != IR_FLOAT ? ir_dtype_name(elem) : "");
	snprintf(doc, sizeof(doc), "ogsh op: ONNX LayerNormalization (opset 17) for older opsets: Y = (X - mean) / "
		 "sqrt(var + %.9g) * Scale%s, mean and variance over the last %d axes", e, bias ? " + B" : "", k);
	static const char *const names[] = { "axis", "epsilon", "stash_type" };
	struct ln_fn f = { k, e, bias };
	return pass_fused_fn_use(c, n, base, key, doc, names, 3, elem, build_layernorm_fn, &f);
}

struct gelu_fn {
	bool tanh_form;
};

static void build_gelu_fn(struct pass_fbody *b, void *arg)
{
	const struct gelu_fn *f = arg;
	struct ir_value *x = pass_fb_input(b, "X");
	pass_fb_output(b, pass_fb_gelu(b, x, f->tanh_form));
}

int pass_fused_gelu_fn(struct pass_ctx *c, struct ir_node *n, bool tanh_form, int elem)
{
	char key[96], base[64], doc[200];
	snprintf(key, sizeof(key), "Gelu|%s|%s", tanh_form ? "tanh" : "none", ir_dtype_name(elem));
	snprintf(base, sizeof(base), "%s%s%s", tanh_form ? "tanh" : "erf", elem != IR_FLOAT ? "_" : "",
		 elem != IR_FLOAT ? ir_dtype_name(elem) : "");
	snprintf(doc, sizeof(doc), "ogsh op: ONNX Gelu (opset 20) for older opsets: Y = %s", tanh_form ?
		 "0.5 * X * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X^3)))" : "0.5 * X * (1 + erf(X / sqrt(2)))");
	static const char *const names[] = { "approximate" };
	struct gelu_fn f = { tanh_form };
	return pass_fused_fn_use(c, n, base, key, doc, names, 1, elem, build_gelu_fn, &f);
}
