/*
 * fuse_elementwise.c - the fuse-elementwise pass: trees of elementwise
 * float ops whose intermediate values have one reader become one ai.ogsh
 * Pointwise node that evaluates an expression per element.
 *
 * The expression language is defined (and run) in kernels/cpu/k_fused.c;
 * the explain text below documents it for users. The model-local function
 * helpers are in fuse_activation.c.
 */
#include "passes/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define MAX_OPS 64      /* ops in one Pointwise */
#define MAX_DEPTH 24    /* nesting of its expression */
#define MAX_EN 512      /* expression nodes */

/* ------------------------------------------------------------------------ */
/* Expressions                                                               */
/* ------------------------------------------------------------------------ */

enum { EN_IN, EN_LIT, EN_FN1, EN_BIN, EN_FN2 };

/* The functions and operators, with the ONNX op each is written with in the function body. */
enum { F_ABS, F_NEG, F_EXP, F_LOG, F_SQRT, F_SIGMOID, F_TANH, F_RELU, F_ERF, F_ADD, F_SUB, F_MUL, F_DIV, F_POW,
       F_MAX, F_MIN };
static const struct {
	const char *text;    /* function name, or the operator */
	const char *onnx;
	int prec;            /* binary operators: 1 (+ -) or 2 (* /); 0: a function */
} fns[] = {
	[F_ABS] = { "abs", "Abs", 0 }, [F_NEG] = { "neg", "Neg", 0 }, [F_EXP] = { "exp", "Exp", 0 },
	[F_LOG] = { "log", "Log", 0 }, [F_SQRT] = { "sqrt", "Sqrt", 0 }, [F_SIGMOID] = { "sigmoid", "Sigmoid", 0 },
	[F_TANH] = { "tanh", "Tanh", 0 }, [F_RELU] = { "relu", "Relu", 0 }, [F_ERF] = { "erf", "Erf", 0 },
	[F_ADD] = { "+", "Add", 1 }, [F_SUB] = { "-", "Sub", 1 }, [F_MUL] = { "*", "Mul", 2 },
	[F_DIV] = { "/", "Div", 2 }, [F_POW] = { "pow", "Pow", 0 }, [F_MAX] = { "max", "Max", 0 },
	[F_MIN] = { "min", "Min", 0 },
};

struct en {
	int kind;       /* EN_* */
	int fn;         /* F_* */
	int a, b;       /* operands (expression node indexes) */
	int in;         /* EN_IN: input index */
	double lit;     /* EN_LIT */
};

/* A tree being grown from a root node. */
struct tree {
	struct en e[MAX_EN];
	int n_e;
	struct ir_value *ins[64];     /* the Pointwise's inputs (x0, x1...) */
	int n_ins, max_ins;
	struct ir_node *nodes[MAX_OPS];
	int n_nodes;
	int dtype;
	bool full;                    /* the expression node table is full */
	char *taken;                  /* by node id: already in a tree */
	int cap_taken;
};

static int en_add(struct tree *t, struct en e)
{
	if (t->n_e >= MAX_EN) {
		t->full = true;
		return -1;
	}
	t->e[t->n_e] = e;
	return t->n_e++;
}

static int en_fn(struct tree *t, int fn, int a, int b)
{
	if (a < 0 || (fns[fn].prec || fn == F_POW || fn == F_MAX || fn == F_MIN ? b < 0 : false))
		return -1;
	int kind = fns[fn].prec ? EN_BIN : (fn == F_POW || fn == F_MAX || fn == F_MIN) ? EN_FN2 : EN_FN1;
	return en_add(t, (struct en){ .kind = kind, .fn = fn, .a = a, .b = b });
}

static int en_lit(struct tree *t, double v)
{
	return en_add(t, (struct en){ .kind = EN_LIT, .lit = v });
}

/* Writes the expression of node i to buf (precedence-aware; an operand on
 * the right of an operator of the same precedence keeps its parentheses,
 * so the order of evaluation is the graph's). */
static void en_print(const struct tree *t, int i, int dtype, char *buf, size_t size, size_t *len)
{
	const struct en *e = &t->e[i];
#define PUT(...)                                                                   \
	do {                                                                       \
		if (*len < size) {                                                 \
			int k_ = snprintf(buf + *len, size - *len, __VA_ARGS__);   \
			if (k_ > 0)                                                \
				*len += (size_t)k_;                                \
		}                                                                  \
	} while (0)
	switch (e->kind) {
	case EN_IN:
		PUT("x%d", e->in);
		return;
	case EN_LIT:
		if (dtype == IR_DOUBLE)
			PUT("%.17g", e->lit);
		else
			PUT("%.9g", e->lit);
		return;
	case EN_FN1:
	case EN_FN2:
		PUT("%s(", fns[e->fn].text);
		en_print(t, e->a, dtype, buf, size, len);
		if (e->kind == EN_FN2) {
			PUT(", ");
			en_print(t, e->b, dtype, buf, size, len);
		}
		PUT(")");
		return;
	default: {
		int p = fns[e->fn].prec;
		const struct en *l = &t->e[e->a], *r = &t->e[e->b];
		int lp = l->kind == EN_BIN ? fns[l->fn].prec : 3, rp = r->kind == EN_BIN ? fns[r->fn].prec : 3;
		/* a negative literal on the left of a binary op would read as a negation of the whole */
		if (l->kind == EN_LIT && l->lit < 0)
			lp = 0;
		if (lp < p)
			PUT("(");
		en_print(t, e->a, dtype, buf, size, len);
		if (lp < p)
			PUT(")");
		PUT(" %s ", fns[e->fn].text);
		if (rp <= p)
			PUT("(");
		en_print(t, e->b, dtype, buf, size, len);
		if (rp <= p)
			PUT(")");
		return;
	}
	}
#undef PUT
}

static int en_depth(const struct tree *t, int i)
{
	const struct en *e = &t->e[i];
	if (e->kind == EN_IN || e->kind == EN_LIT)
		return 1;
	int a = en_depth(t, e->a), b = e->kind == EN_FN1 ? 0 : en_depth(t, e->b);
	return 1 + (a > b ? a : b);
}

/* ------------------------------------------------------------------------ */
/* What fuses                                                                */
/* ------------------------------------------------------------------------ */

/* Whether op is one this pass can write as an expression. */
static bool op_known(int op)
{
	switch (op) {
	case IR_OP_Add: case IR_OP_Sub: case IR_OP_Mul: case IR_OP_Div: case IR_OP_Pow: case IR_OP_Max:
	case IR_OP_Min: case IR_OP_Sum: case IR_OP_Abs: case IR_OP_Neg: case IR_OP_Exp: case IR_OP_Log:
	case IR_OP_Sqrt: case IR_OP_Sigmoid: case IR_OP_Tanh: case IR_OP_Relu: case IR_OP_Erf:
	case IR_OP_Reciprocal: case IR_OP_Identity: case IR_OP_Clip: case IR_OP_LeakyRelu:
	case IR_OP_HardSigmoid: case IR_OP_HardSwish: case IR_OP_Gelu:
		return true;
	default:
		return false;
	}
}

/* Ops whose expression reads their input twice: it must then be a plain input. */
static bool reads_twice(int op)
{
	return op == IR_OP_LeakyRelu || op == IR_OP_HardSwish || op == IR_OP_Gelu;
}

static int elem_of(const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	if (t && t->kind == IR_TYPE_TENSOR && t->elem)
		return t->elem;
	const struct ir_tensor *c = ir_value_const(v);
	return c ? c->dtype : 0;
}

/*
 * Whether v is a constant that can be written as a literal in the
 * expression of a node whose output has rank `rank` (-1: unknown): one
 * finite number, of a rank that cannot change the output's shape.
 */
static bool literal_of(const struct ir_value *v, int rank, double *out)
{
	if (!v || v->is_input)
		return false;
	const struct ir_tensor *t = ir_value_const(v);
	if (!t || t->numel != 1 || !ir_tensor_data(t) || !(ir_dtype_is_float(t->dtype) || ir_dtype_is_int(t->dtype)))
		return false;
	if (t->rank > 0 && (rank < 0 || t->rank > rank))
		return false;
	*out = ir_tensor_get_f64(t, 0);
	return isfinite(*out);
}

/* Clip's bound i as a constant scalar (absent: *v stays), else false. */
static bool clip_bound(const struct ir_node *n, int i, double *v)
{
	if (i >= n->n_inputs || !n->inputs[i])
		return true;
	const struct ir_tensor *t = pass_const_input(n, i);
	if (!t || t->numel != 1 || !ir_tensor_data(t) || !ir_dtype_is_float(t->dtype))
		return false;
	*v = ir_tensor_get_f64(t, 0);
	return !isnan(*v);
}

/*
 * Whether node n can be part of a Pointwise of element type dtype: an op
 * of the language, one output of that type, every data input of that type
 * or a literal, its parameters constant. why says what is missing.
 */
static bool fusable(const struct ir_model *m, const struct ir_node *n, int dtype, char *why, size_t size)
{
	if (n->op < 0 || !op_known(n->op))
		return false;
	if (n->n_outputs != 1 || !n->outputs[0] || n->n_inputs < 1) {
		snprintf(why, size, "it does not have one output");
		return false;
	}
	int out = elem_of(n->outputs[0]);
	if (!out) {
		snprintf(why, size, "its element type is not known");
		return false;
	}
	if (!ir_dtype_is_float(out)) {
		snprintf(why, size, "it computes %s, not a float type", ir_dtype_name(out));
		return false;
	}
	if (dtype && out != dtype) {
		snprintf(why, size, "it computes %s, not %s", ir_dtype_name(out), ir_dtype_name(dtype));
		return false;
	}
	int n_data = n->op == IR_OP_Clip ? 1 : n->n_inputs;
	int rank = pass_rank_of(n->outputs[0]);
	for (int i = 0; i < n_data; i++) {
		double lit;
		if (!n->inputs[i]) {
			snprintf(why, size, "its input %d is omitted", i);
			return false;
		}
		if (elem_of(n->inputs[i]) != out && !literal_of(n->inputs[i], rank, &lit)) {
			snprintf(why, size, "its input '%s' is not %s", n->inputs[i]->name, ir_dtype_name(out));
			return false;
		}
	}
	switch (n->op) {
	case IR_OP_Clip: {
		double lo = -INFINITY, hi = INFINITY;
		if (ir_model_opset(m, "") < 11) {
			if (n->n_inputs != 1) {
				snprintf(why, size, "it has bound inputs, which its opset does not have");
				return false;
			}
		} else if (n->n_inputs > 3 || !clip_bound(n, 1, &lo) || !clip_bound(n, 2, &hi)) {
			snprintf(why, size, "its min or max is not a constant float scalar");
			return false;
		}
		return true;
	}
	case IR_OP_Gelu: {
		const struct ir_attr *a = ir_node_attr(n, "approximate");
		const char *s = a && a->type == IR_ATTR_STRING && a->s.data ? a->s.data : "none";
		if (strcmp(s, "none") && strcmp(s, "tanh")) {
			snprintf(why, size, "approximate='%.40s' is neither 'none' nor 'tanh'", s);
			return false;
		}
		return true;
	}
	case IR_OP_Add: case IR_OP_Sub: case IR_OP_Mul: case IR_OP_Div: case IR_OP_Pow:
		if (n->n_inputs != 2) {
			snprintf(why, size, "it has %d inputs, not 2", n->n_inputs);
			return false;
		}
		return true;
	case IR_OP_Max: case IR_OP_Min: case IR_OP_Sum:
		if (n->n_inputs > 8) {
			snprintf(why, size, "it has %d inputs", n->n_inputs);
			return false;
		}
		return true;
	default:
		if (n->n_inputs != 1) {
			snprintf(why, size, "it has %d inputs, not 1", n->n_inputs);
			return false;
		}
		return true;
	}
}

/* ------------------------------------------------------------------------ */
/* Growing a tree                                                            */
/* ------------------------------------------------------------------------ */

struct grow {
	struct pass_ctx *c;
	struct tree *t;
	int depth;
	bool plain;           /* the operands of the node being grown are inputs (the second try) */
};

/* Input index of leaf v (added if new), or -1 when max-inputs is reached. */
static int leaf(struct tree *t, struct ir_value *v)
{
	for (int i = 0; i < t->n_ins; i++)
		if (t->ins[i] == v)
			return i;
	if (t->n_ins >= t->max_ins)
		return -1;
	t->ins[t->n_ins] = v;
	return t->n_ins++;
}

static int grow_node(struct grow *G, struct ir_node *n);
static int grow_ops(struct grow *G, struct ir_node *n, int rank);

/*
 * The expression of operand v of tree node `reader` (v's rank context:
 * `rank`). Its producer joins the tree when it fuses and v has no other
 * reader (and `plain` does not ask for a plain input); else v is a literal
 * or an input. -1 when even that does not fit.
 */
static int operand(struct grow *G, struct ir_node *reader, struct ir_value *v, int rank, bool plain)
{
	struct tree *t = G->t;
	struct ir_node *p = v->producer;
	char why[300], rn[256];
	double lit;
	if (literal_of(v, rank, &lit))
		return en_lit(t, lit);
	if (p && plain && p->graph == reader->graph && p->op >= 0 && op_known(p->op) && pass_only_reader(v) == reader)
		pass_note(G->c, p, "not fused into '%s': %s reads its input twice, so that input stays a separate value",
			  pass_node_name(reader, rn, sizeof(rn)), reader->op_type);
	bool retry = G->plain;   /* the second try: n's operands are inputs */
	if (p && retry && !plain && p->graph == reader->graph && p->op >= 0 && op_known(p->op) &&
	    pass_only_reader(v) == reader && !v->is_output && fusable(G->c->m, p, t->dtype, why, sizeof(why)))
		pass_rejected(G->c, p, "not fused into '%s': the Pointwise would need more than max-inputs=%d inputs",
			      pass_node_name(reader, rn, sizeof(rn)), t->max_ins);
	if (p && p->graph == reader->graph && !plain && !retry && p->op >= 0 && op_known(p->op) &&
	    p->id < t->cap_taken && !t->taken[p->id]) {
		why[0] = 0;
		if (!fusable(G->c->m, p, t->dtype, why, sizeof(why))) {
			if (*why)
				pass_rejected(G->c, p, "not fused into '%s': %s", pass_node_name(reader, rn, sizeof(rn)), why);
		} else if (pass_only_reader(v) != reader || v->is_output) {
			char rt[300];
			if (v->is_output)
				snprintf(rt, sizeof(rt), "'%s' is also a graph output", v->name);
			else if (pass_read_in_subgraph(v))
				snprintf(rt, sizeof(rt), "'%s' is also read inside a subgraph", v->name);
			else
				snprintf(rt, sizeof(rt), "its output '%s' has %d readers", v->name, pass_n_readers(v));
			pass_rejected(G->c, p, "not fused into '%s': %s (it stays a separate node)",
				      pass_node_name(reader, rn, sizeof(rn)), rt);
		} else if (t->n_nodes >= MAX_OPS || G->depth >= MAX_DEPTH) {
			pass_note(G->c, p, "not fused into '%s': one Pointwise holds at most %d ops nested %d deep",
				  pass_node_name(reader, rn, sizeof(rn)), MAX_OPS, MAX_DEPTH);
		} else {
			/* try it; roll back when it would need too many inputs */
			int n_e = t->n_e, n_ins = t->n_ins, n_nodes = t->n_nodes;
			int r = grow_node(G, p);
			if (r >= 0)
				return r;
			for (int i = n_nodes; i < t->n_nodes; i++)
				t->taken[t->nodes[i]->id] = 0;
			t->n_e = n_e;
			t->n_ins = n_ins;
			t->n_nodes = n_nodes;
			if (t->full)
				pass_note(G->c, p, "not fused into '%s': the expression would be too large",
					  pass_node_name(reader, rn, sizeof(rn)));
			else
				pass_rejected(G->c, p, "not fused into '%s': the Pointwise would need more than max-inputs=%d inputs",
					      pass_node_name(reader, rn, sizeof(rn)), t->max_ins);
			t->full = false;
		}
	}
	int i = leaf(t, v);
	return i < 0 ? -1 : en_add(t, (struct en){ .kind = EN_IN, .in = i });
}

/* Adds node n (fusable) to the tree; returns its expression, or -1. */
static int grow_node(struct grow *G, struct ir_node *n)
{
	struct tree *t = G->t;
	if (t->n_nodes >= MAX_OPS)
		return -1;
	t->nodes[t->n_nodes++] = n;
	t->taken[n->id] = 1;
	int rank = pass_rank_of(n->outputs[0]);
	G->depth++;
	int r = -1;
	/* greedily first; when that needs too many inputs, with n's operands as inputs */
	int n_e = t->n_e, n_ins = t->n_ins, n_nodes = t->n_nodes;
	bool was_plain = G->plain;
	for (int attempt = 0; attempt < 2 && r < 0; attempt++) {
		if (attempt) {
			for (int i = n_nodes; i < t->n_nodes; i++)
				t->taken[t->nodes[i]->id] = 0;
			t->n_e = n_e;
			t->n_ins = n_ins;
			t->n_nodes = n_nodes;
			t->full = false;
		}
		G->plain = attempt == 1;
		r = grow_ops(G, n, rank);
	}
	G->plain = was_plain;
	G->depth--;
	return t->full ? -1 : r;
}

/* The expression of node n (in the tree), its operands grown by operand(). */
static int grow_ops(struct grow *G, struct ir_node *n, int rank)
{
	struct tree *t = G->t;
	int r = -1, a = -1, b = -1;
	bool plain = reads_twice(n->op);
	struct ir_value *const *in = n->inputs;
	switch (n->op) {
	case IR_OP_Add: case IR_OP_Sub: case IR_OP_Mul: case IR_OP_Div: case IR_OP_Pow: {
		int fn = n->op == IR_OP_Add ? F_ADD : n->op == IR_OP_Sub ? F_SUB : n->op == IR_OP_Mul ? F_MUL
		       : n->op == IR_OP_Div ? F_DIV : F_POW;
		/* Mul(v, v) reads v twice: it is an input then */
		bool same = in[0] == in[1];
		if ((a = operand(G, n, in[0], rank, same)) >= 0 && (b = operand(G, n, in[1], rank, same)) >= 0)
			r = en_fn(t, fn, a, b);
		break;
	}
	case IR_OP_Max: case IR_OP_Min: case IR_OP_Sum: {
		int fn = n->op == IR_OP_Max ? F_MAX : n->op == IR_OP_Min ? F_MIN : F_ADD;
		bool dup = false;
		for (int i = 0; i < n->n_inputs; i++)
			for (int j = 0; j < i; j++)
				dup = dup || in[i] == in[j];
		r = operand(G, n, in[0], rank, dup);
		for (int i = 1; i < n->n_inputs && r >= 0; i++)
			r = (b = operand(G, n, in[i], rank, dup)) >= 0 ? en_fn(t, fn, r, b) : -1;
		break;
	}
	case IR_OP_Identity:
		r = operand(G, n, in[0], rank, false);
		break;
	case IR_OP_Reciprocal:
		if ((a = en_lit(t, 1)) >= 0 && (b = operand(G, n, in[0], rank, false)) >= 0)
			r = en_fn(t, F_DIV, a, b);
		break;
	case IR_OP_Clip: {
		double lo = -INFINITY, hi = INFINITY;
		if (ir_model_opset(G->c->m, "") < 11) {
			lo = ir_node_attr_float(n, "min", -INFINITY);
			hi = ir_node_attr_float(n, "max", INFINITY);
		} else {
			clip_bound(n, 1, &lo);
			clip_bound(n, 2, &hi);
		}
		/* min(max(x, lo), hi) */
		r = operand(G, n, in[0], rank, false);
		if (r >= 0 && isfinite(lo) && lo > -3.4e38)
			r = (a = en_lit(t, lo)) >= 0 ? en_fn(t, F_MAX, r, a) : -1;
		if (r >= 0 && isfinite(hi) && hi < 3.4e38)
			r = (a = en_lit(t, hi)) >= 0 ? en_fn(t, F_MIN, r, a) : -1;
		break;
	}
	case IR_OP_LeakyRelu: {
		/* max(x, 0) + alpha * min(x, 0) */
		double al = ir_node_attr_float(n, "alpha", 0.01f);
		int x = operand(G, n, in[0], rank, plain);
		int z0 = en_lit(t, 0), z1 = en_lit(t, 0), al_e = en_lit(t, al);
		if (x >= 0 && z0 >= 0 && z1 >= 0 && al_e >= 0) {
			int pos = en_fn(t, F_MAX, x, z0), neg = en_fn(t, F_MIN, x, z1);
			r = en_fn(t, F_ADD, pos, en_fn(t, F_MUL, al_e, neg));
		}
		break;
	}
	case IR_OP_HardSigmoid:
	case IR_OP_HardSwish: {
		/* max(min(alpha * x + beta, 1), 0), times x for HardSwish */
		bool swish = n->op == IR_OP_HardSwish;
		double al = swish ? 1.0 / 6 : ir_node_attr_float(n, "alpha", 0.2f);
		double be = swish ? 0.5 : ir_node_attr_float(n, "beta", 0.5f);
		int x = operand(G, n, in[0], rank, plain);
		if (x >= 0) {
			int s = en_fn(t, F_ADD, en_fn(t, F_MUL, en_lit(t, al), x), en_lit(t, be));
			s = en_fn(t, F_MAX, en_fn(t, F_MIN, s, en_lit(t, 1)), en_lit(t, 0));
			r = swish ? en_fn(t, F_MUL, x, s) : s;
		}
		break;
	}
	case IR_OP_Gelu: {
		const struct ir_attr *ap = ir_node_attr(n, "approximate");
		bool tanh_form = ap && ap->type == IR_ATTR_STRING && ap->s.data && !strcmp(ap->s.data, "tanh");
		int x = operand(G, n, in[0], rank, plain);
		if (x < 0)
			break;
		int inner;
		if (tanh_form) {
			/* 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))) */
			int cube = en_fn(t, F_MUL, en_fn(t, F_MUL, x, x), x);
			int s = en_fn(t, F_ADD, x, en_fn(t, F_MUL, en_lit(t, 0.044715), cube));
			inner = en_fn(t, F_TANH, en_fn(t, F_MUL, en_lit(t, 0.79788456080286535588), s), -1);
		} else {
			/* 0.5 * x * (1 + erf(x / 1.41421356)) */
			inner = en_fn(t, F_ERF, en_fn(t, F_DIV, x, en_lit(t, 1.41421356237309504880)), -1);
		}
		r = en_fn(t, F_MUL, en_fn(t, F_MUL, en_lit(t, 0.5), x), en_fn(t, F_ADD, en_lit(t, 1), inner));
		break;
	}
	default: {
		int fn = n->op == IR_OP_Abs ? F_ABS : n->op == IR_OP_Neg ? F_NEG : n->op == IR_OP_Exp ? F_EXP
		       : n->op == IR_OP_Log ? F_LOG : n->op == IR_OP_Sqrt ? F_SQRT : n->op == IR_OP_Sigmoid ? F_SIGMOID
		       : n->op == IR_OP_Tanh ? F_TANH : n->op == IR_OP_Relu ? F_RELU : F_ERF;
		if ((a = operand(G, n, in[0], rank, false)) >= 0)
			r = en_fn(t, fn, a, -1);
		break;
	}
	}
	return r;
}

/* ------------------------------------------------------------------------ */
/* The rewrite                                                               */
/* ------------------------------------------------------------------------ */

struct body_arg {
	const struct tree *t;
	int root;
	struct ir_value *in[64];
};

static struct ir_value *body_of(struct pass_fbody *b, struct body_arg *A, int i)
{
	const struct en *e = &A->t->e[i];
	switch (e->kind) {
	case EN_IN:
		return A->in[e->in];
	case EN_LIT:
		return pass_fb_const(b, e->lit);
	case EN_FN1: {
		struct ir_value *x = body_of(b, A, e->a);
		return pass_fb_node(b, fns[e->fn].onnx, &x, 1, NULL);
	}
	default: {
		struct ir_value *x[2] = { body_of(b, A, e->a), NULL };
		x[1] = body_of(b, A, e->b);
		return pass_fb_node(b, fns[e->fn].onnx, x, 2, NULL);
	}
	}
}

static void build_pointwise(struct pass_fbody *b, void *arg)
{
	struct body_arg *A = arg;
	for (int i = 0; i < A->t->n_ins; i++) {
		char name[16];
		snprintf(name, sizeof(name), "x%d", i);
		A->in[i] = pass_fb_input(b, name);
	}
	struct ir_value *y = body_of(b, A, A->root);
	if (y && !y->producer) {
		/* the expression is an input: copy it */
		y = pass_fb_node(b, "Identity", &y, 1, NULL);
	}
	pass_fb_output(b, y);
}

static int rewrite(struct pass_ctx *c, struct tree *t, int root_e, struct ir_node *root)
{
	struct ir_graph *g = c->m->graph;
	char expr[4096], key[4300], doc[4400], rn[256];
	size_t len = 0;
	en_print(t, root_e, t->dtype, expr, sizeof(expr), &len);
	if (len >= sizeof(expr) - 1) {
		pass_rejected(c, root, "the fused expression would be longer than %zu characters", sizeof(expr) - 2);
		return 0;
	}
	char *name = pass_new_node_name(g, root, "Pointwise");
	if (!name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_node *f = ir_node_new(g, "Pointwise", "ai.ogsh", name, t->n_ins, 1, root);
	free(name);
	if (!f)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	for (int i = 0; i < t->n_ins; i++)
		if (ir_node_set_input(f, i, t->ins[i]))
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	int rc = pass_fused_set_str(f, "expr", expr, c->d);
	if (rc)
		return rc;
	struct ir_attr da = { 0 };
	da.name = strdup("dtype");
	da.type = IR_ATTR_INT;
	da.has_type = true;
	da.i = t->dtype;
	if (!da.name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	if ((rc = ir_node_set_attr(f, &da, c->d)))
		return rc;

	snprintf(key, sizeof(key), "Pointwise|%s|in=%d|%s", expr, t->n_ins, ir_dtype_name(t->dtype));
	snprintf(doc, sizeof(doc), "ogsh fused op: Y = %s (elementwise, inputs broadcast; %s)", expr,
		 ir_dtype_name(t->dtype));
	/* pwN: N counts the distinct expressions of the model */
	int n_pw = 1;
	for (size_t i = 0; i < c->m->n_functions; i++)
		if (c->m->functions[i].name && !strcmp(c->m->functions[i].name, "Pointwise"))
			n_pw++;
	char base[32];
	snprintf(base, sizeof(base), "pw%d", n_pw);
	static const char *const attrs[] = { "dtype", "expr" };
	struct body_arg *A = calloc(1, sizeof(*A));
	if (!A)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	A->t = t;
	A->root = root_e;
	rc = pass_fused_fn_use(c, f, base, key, doc, attrs, 2, t->dtype, build_pointwise, A);
	free(A);
	if (rc)
		return rc;

	/* what it was made from, producers first (a walk of the whole graph
	 * per fused node would make the pass quadratic) */
	struct ir_node *order[MAX_OPS];
	bool placed[MAX_OPS] = { false };
	int k = 0;
	while (k < t->n_nodes && k < MAX_OPS) {
		int before = k;
		for (int i = 0; i < t->n_nodes && i < MAX_OPS; i++) {
			if (placed[i])
				continue;
			bool ready = true;
			for (int j = 0; ready && j < t->nodes[i]->n_inputs; j++) {
				const struct ir_value *v = t->nodes[i]->inputs[j];
				for (int q = 0; v && q < t->n_nodes && q < MAX_OPS; q++)
					if (!placed[q] && q != i && v->producer == t->nodes[q])
						ready = false;
			}
			if (ready) {
				placed[i] = true;
				order[k++] = t->nodes[i];
			}
		}
		if (k == before)
			break;
	}
	pass_set_from(f, order, k);
	char ops[600] = "";
	for (int i = 0; i < k; i++)
		snprintf(ops + strlen(ops), sizeof(ops) - strlen(ops), "%s%s", i ? ", " : "", order[i]->op_type);
	pass_rewrote(c, root, "fused %d ops (%s) into Pointwise '%s' with %d input%s: %s", k, ops, f->name, t->n_ins,
		     t->n_ins == 1 ? "" : "s", expr);
	(void)rn;

	/* f produces the root's output (its name is kept) */
	struct ir_value *out = root->outputs[0];
	if ((rc = ir_node_set_output(root, 0, NULL, c->d)) || (rc = ir_node_set_output(f, 0, out, c->d)))
		return rc;
	/* the constants that became literals go when nothing else reads them */
	struct ir_value *consts[MAX_OPS * 8];
	int nc = 0;
	for (int i = 0; i < k; i++)
		for (int j = 0; j < order[i]->n_inputs && nc < MAX_OPS * 8; j++)
			if (order[i]->inputs[j] && order[i]->inputs[j]->init && !order[i]->inputs[j]->producer)
				consts[nc++] = order[i]->inputs[j];
	if ((rc = pass_remove_nodes(c, order, k)))
		return rc;
	pass_drop_dead_consts(consts, nc);
	return 0;
}

/* Grows the tree rooted at n and rewrites it when it has 2 ops or more. */
static int try_root(struct pass_ctx *c, struct tree *t, struct ir_node *n)
{
	char why[300];
	why[0] = 0;
	if (!fusable(c->m, n, 0, why, sizeof(why))) {
		/* a reason matters only where a chain was possible: an elementwise op feeds it */
		bool chain = false;
		for (int i = 0; i < n->n_inputs && !chain; i++) {
			struct ir_node *p = n->inputs[i] ? n->inputs[i]->producer : NULL;
			chain = p && p->op >= 0 && op_known(p->op) && p->graph == n->graph;
		}
		if (*why && chain && op_known(n->op))
			pass_rejected(c, n, "%s", why);
		return 0;
	}
	t->dtype = elem_of(n->outputs[0]);
	t->n_e = t->n_ins = t->n_nodes = 0;
	t->full = false;
	struct grow G = { .c = c, .t = t };
	int r = grow_node(&G, n);
	if (r < 0) {
		for (int i = 0; i < t->n_nodes; i++)
			t->taken[t->nodes[i]->id] = 0;
		t->taken[n->id] = 1;
		if (t->full)
			pass_rejected(c, n, "its expression would be too large");
		else
			pass_rejected(c, n, "it reads more than max-inputs=%d inputs", t->max_ins);
		return 0;
	}
	if (t->n_nodes < 2)
		return 0;
	if (en_depth(t, r) > 4 * MAX_DEPTH) {
		pass_rejected(c, n, "its expression would nest too deeply");
		return 0;
	}
	char why2[200];
	if (!pass_fused_opset(c->m, why2, sizeof(why2))) {
		pass_rejected(c, n, "%s", why2);
		return 0;
	}
	return rewrite(c, t, r, n);
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "interrupted" : "out of memory");
	int64_t max_in = pass_opt_int(c, "max-inputs");
	if (max_in < 1 || max_in > 64)
		return ir_diag_err(c->d, IR_ERR, "max-inputs must be 1 to 64, not %lld", (long long)max_in);
	struct tree *t = calloc(1, sizeof(*t));
	int *ids = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1)), n_ids = 0;
	if (t)
		t->taken = calloc((size_t)g->next_id + 1, 1);
	if (!t || !ids || !t->taken) {
		if (t)
			free(t->taken);
		free(t);
		free(ids);
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	}
	t->cap_taken = g->next_id + 1;
	t->max_ins = (int)max_in;
	ir_for_each_node(g, n)
		ids[n_ids++] = n->id;
	/* roots from the end: a tree grows back through its inputs */
	for (int i = n_ids - 1; i >= 0 && !rc; i--) {
		struct ir_node *n = ir_node_by_id(g, ids[i]);
		if (!n || n->id >= t->cap_taken || t->taken[n->id] || n->op < 0 || !op_known(n->op))
			continue;
		rc = try_root(c, t, n);
	}
	free(t->taken);
	free(t);
	free(ids);
	return rc;
}

static const struct pass_option options[] = {
	{ "max-inputs", "int", "8", "the most inputs one Pointwise node may read (1 to 64)" },
	{ NULL, NULL, NULL, NULL },
};

const struct pass pass_fuse_elementwise = {
	.name = "fuse-elementwise",
	.summary = "fuse chains and trees of elementwise float ops into one ogsh Pointwise node that evaluates an expression",
	.explain =
		"Each elementwise op (Add, Mul, Relu, Exp...) reads its inputs from memory and writes its output "
		"back, though it does almost no arithmetic per element: a chain of them is limited by memory "
		"traffic. This pass gathers a tree of such ops, where every intermediate value is read by exactly "
		"one op of the tree, into one Pointwise node in ogsh's 'ai.ogsh' domain. It reads only the tree's "
		"inputs, computes the whole expression per element, and writes only the last output (under its "
		"name, so nothing after it changes). For example Mul(a, b) -> Add(_, c) -> Relu becomes one node "
		"with inputs x0=a, x1=b, x2=c and expr \"relu(x0 * x1 + x2)\".\n\n"
		"The expression language: numbers are decimal literals (2, 0.5, 1e-05); x0, x1... are the node's "
		"inputs, which broadcast together as numpy does; operators + - * / with the usual precedence "
		"(* and / before + and -, left to right, parentheses group, a leading - negates); functions abs, "
		"neg, exp, log, sqrt, sigmoid, tanh, relu, erf of one argument and pow, max, min of two. The "
		"attribute 'dtype' is the element type (float32 computes in float, the other float types in "
		"double, rounded once at the end).\n\n"
		"The ops it writes: Add, Sub, Mul, Div, Pow, Max, Min, Sum, Abs, Neg, Exp, Log, Sqrt, Sigmoid, "
		"Tanh, Relu, Erf, Identity, Reciprocal (1 / x), Clip with constant bounds (min(max(x, lo), hi)), "
		"HardSigmoid (max(min(alpha * x + beta, 1), 0)), and, when their input is a plain input of the "
		"node (they read it twice), LeakyRelu (max(x, 0) + alpha * min(x, 0)), HardSwish and Gelu "
		"(0.5 * x * (1 + erf(x / 1.41421356))). A constant with one element becomes a literal; larger "
		"constants are inputs.\n\n"
		"Saved models stay runnable elsewhere: each distinct expression gets a model-local ONNX function "
		"(domain ai.ogsh, name Pointwise, overload pw1, pw2...) whose body is the same expression written "
		"with standard ops; the model's IR version becomes 10.\n\n"
		"It does not apply to: values that are not a float type (integer shape arithmetic), or whose type "
		"is not known; an intermediate value with more than one reader or that is a graph output (it must "
		"exist, so its op stays a separate node); a tree that would need more than max-inputs inputs "
		"(default 8: the producer that would add too many stays outside); a single op (nothing to fuse); "
		"Clip with bounds that are not constants; subgraphs. At most 64 ops go into one node.",
	.options = options,
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
