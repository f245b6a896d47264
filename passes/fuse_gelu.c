/*
 * fuse_gelu.c - the fuse-gelu pass: the erf and tanh forms of GELU written
 * out in elementwise ops become one Gelu node (ONNX opset 20; before it,
 * ogsh's Gelu, domain ai.ogsh, with a model-local function from fused.c).
 *
 * Anchors are the Erf and Tanh nodes; from each the pattern is followed in
 * both directions (the argument of the erf/tanh back to x, the result
 * forward through "+ 1" and the product with x and 0.5). Every intermediate
 * value must be read by the pattern alone. Only the main graph is looked at.
 *
 * Helpers that other fusion passes have too (const_scalar, sole_reader,
 * remove_nodes...) are static here: pass.h has no shared ones yet.
 */
#include "passes/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GELU_OPSET 20
#define TOL 1e-6
#define MAXN 16

/* ------------------------------------------------------------------------ */
/* Small helpers                                                              */
/* ------------------------------------------------------------------------ */

/* a equals the textbook constant b: within TOL, or b rounded to float16 or
 * bfloat16 (the constant a float16/bfloat16 model stores for it) */
static bool near(double a, double b)
{
	return fabs(a - b) <= TOL || a == (double)ir_f16_to_f32(ir_f32_to_f16((float)b)) ||
	       a == (double)ir_bf16_to_f32(ir_f32_to_bf16((float)b));
}

static int set_attr_str(struct ir_node *n, const char *name, const char *val, struct ir_diag *d)
{
	struct ir_attr a;
	memset(&a, 0, sizeof(a));
	a.name = strdup(name);
	a.type = IR_ATTR_STRING;
	a.has_type = true;
	a.s.len = strlen(val);
	a.s.data = strdup(val);
	if (!a.name || !a.s.data) {
		free(a.name);
		free(a.s.data);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	return ir_node_set_attr(n, &a, d);
}

/* ------------------------------------------------------------------------ */
/* The pattern                                                                */
/* ------------------------------------------------------------------------ */

struct match {
	struct ir_value *x;          /* GELU's argument */
	struct ir_node *nodes[MAXN]; /* every node of the pattern */
	int n;
	struct ir_node *last;        /* the node whose output becomes Gelu's */
	bool tanh;
	char why[256];               /* why it does not match */
};

static void add(struct match *m, struct ir_node *n)
{
	if (m->n < MAXN)
		m->nodes[m->n++] = n;
}

/* x * 0.5 (Mul by 0.5 in either order, or Div by 2). */
static bool is_half_of(const struct ir_node *n, const struct ir_value *x, int rank)
{
	double k;
	if (pass_is_op(n, IR_OP_Mul, 2)) {
		const struct ir_value *o = pass_other_input(n, x);
		return o && pass_const_scalar(o, rank, &k) && near(k, 0.5);
	}
	if (pass_is_op(n, IR_OP_Div, 2))
		return n->inputs[0] == x && pass_const_scalar(n->inputs[1], rank, &k) && near(k, 2.0);
	return false;
}

/*
 * From a = 1 + erf(...) (or 1 + tanh(...)): the product x * a * 0.5 in any
 * of its groupings: (x * a) * 0.5, (x * a) / 2, x * (a * 0.5), (x * 0.5) * a.
 */
static bool match_product(struct match *m, const struct ir_value *a)
{
	const struct ir_value *x = m->x;
	int rank = pass_rank_of(x);
	struct ir_node *m1 = pass_sole_reader(a, m->why, sizeof(m->why));
	if (!m1)
		return false;
	const struct ir_value *o = pass_is_op(m1, IR_OP_Mul, 2) ? pass_other_input(m1, a) : NULL;
	if (!o) {
		snprintf(m->why, sizeof(m->why), "'%s' (1 + %s) is not multiplied by x and 0.5", a->name,
			 m->tanh ? "tanh" : "erf");
		return false;
	}
	add(m, m1);
	double k;
	if (o == x) {   /* (x * a) * 0.5 or (x * a) / 2 */
		struct ir_node *m2 = pass_sole_reader(m1->outputs[0], m->why, sizeof(m->why));
		if (!m2)
			return false;
		if (!is_half_of(m2, m1->outputs[0], rank)) {
			snprintf(m->why, sizeof(m->why), "'%s' (x * (1 + %s)) is not then halved", m1->outputs[0]->name,
				 m->tanh ? "tanh" : "erf");
			return false;
		}
		add(m, m2);
		m->last = m2;
		return true;
	}
	if (pass_const_scalar(o, rank, &k) && near(k, 0.5)) {   /* x * (a * 0.5) */
		struct ir_node *m2 = pass_sole_reader(m1->outputs[0], m->why, sizeof(m->why));
		if (!m2)
			return false;
		if (!pass_is_op(m2, IR_OP_Mul, 2) || pass_other_input(m2, m1->outputs[0]) != x) {
			snprintf(m->why, sizeof(m->why), "'%s' is not multiplied by x ('%s')", m1->outputs[0]->name,
				 x->name);
			return false;
		}
		add(m, m2);
		m->last = m2;
		return true;
	}
	struct ir_node *h = pass_producer(o);   /* (x * 0.5) * a */
	if (h && is_half_of(h, x, rank)) {
		if (!pass_sole_reader(o, m->why, sizeof(m->why)))
			return false;
		add(m, h);
		m->last = m1;
		return true;
	}
	snprintf(m->why, sizeof(m->why), "'%s' (1 + %s) is multiplied by '%s', which is not x, 0.5 or x * 0.5",
		 a->name, m->tanh ? "tanh" : "erf", o->name);
	return false;
}

/* From the Erf or Tanh node's output: "+ 1", then the product. */
static bool match_tail(struct match *m, struct ir_node *anchor)
{
	struct ir_value *e = anchor->outputs[0];
	struct ir_node *p = pass_sole_reader(e, m->why, sizeof(m->why));
	if (!p)
		return false;
	double k;
	const struct ir_value *o = pass_is_op(p, IR_OP_Add, 2) ? pass_other_input(p, e) : NULL;
	if (!o || !pass_const_scalar(o, pass_rank_of(m->x), &k) || !near(k, 1.0)) {
		snprintf(m->why, sizeof(m->why), "'%s' is not then added to 1", e->name);
		return false;
	}
	add(m, p);
	return match_product(m, p->outputs[0]);
}

/* erf(x / sqrt(2)) or erf(x * (1/sqrt(2))). */
static bool match_erf(struct match *m, struct ir_node *erf)
{
	m->tanh = false;
	add(m, erf);
	struct ir_node *s = pass_producer(erf->inputs[0]);
	double k;
	if (pass_is_op(s, IR_OP_Div, 2) && pass_const_scalar(s->inputs[1], pass_rank_of(s->inputs[0]), &k)) {
		if (!near(k, sqrt(2.0))) {
			snprintf(m->why, sizeof(m->why), "erf's argument is divided by %g, not sqrt(2)", k);
			return false;
		}
		m->x = s->inputs[0];
	} else if (pass_is_op(s, IR_OP_Mul, 2) && (pass_const_scalar(s->inputs[1], pass_rank_of(s->inputs[0]), &k) ||
					      pass_const_scalar(s->inputs[0], pass_rank_of(s->inputs[1]), &k))) {
		if (!near(k, 1.0 / sqrt(2.0))) {
			snprintf(m->why, sizeof(m->why), "erf's argument is multiplied by %g, not 1/sqrt(2)", k);
			return false;
		}
		double k2;
		m->x = pass_const_scalar(s->inputs[1], pass_rank_of(s->inputs[0]), &k2) ? s->inputs[0] : s->inputs[1];
	} else if (pass_is_op(s, IR_OP_Div, 2) || pass_is_op(s, IR_OP_Mul, 2)) {
		snprintf(m->why, sizeof(m->why), "erf's argument '%s' is a %s by a value that is not a constant scalar "
			 "(fold-constants may make it one)", erf->inputs[0]->name, s->op_type);
		return false;
	} else {
		snprintf(m->why, sizeof(m->why), "erf's argument '%s' is not x / sqrt(2)", erf->inputs[0]->name);
		return false;
	}
	if (!pass_sole_reader(erf->inputs[0], m->why, sizeof(m->why)))
		return false;
	add(m, s);
	return match_tail(m, erf);
}

/* x^3 as Pow(x, 3), x * (x * x) or (x * x) * x; returns x or NULL. */
static struct ir_value *cube_base(struct match *m, const struct ir_value *cube)
{
	struct ir_node *p = pass_producer(cube);
	double k;
	if (pass_is_op(p, IR_OP_Pow, 2) && !p->inputs[1]->is_input && ir_value_const(p->inputs[1]) &&
	    ir_value_const(p->inputs[1])->numel == 1 && ir_tensor_data(ir_value_const(p->inputs[1]))) {
		k = ir_tensor_get_f64(ir_value_const(p->inputs[1]), 0);
		if (k != 3.0)
			return NULL;
		add(m, p);
		return p->inputs[0];
	}
	if (!pass_is_op(p, IR_OP_Mul, 2))
		return NULL;
	for (int i = 0; i < 2; i++) {
		struct ir_node *sq = pass_producer(p->inputs[i]);
		struct ir_value *x = p->inputs[1 - i];
		if (pass_is_op(sq, IR_OP_Mul, 2) && sq->inputs[0] == x && sq->inputs[1] == x && pass_only_reader(p->inputs[i])) {
			add(m, p);
			add(m, sq);
			return x;
		}
	}
	return NULL;
}

/* tanh(sqrt(2/pi) * (x + 0.044715 * x^3)). */
static bool match_tanh(struct match *m, struct ir_node *th)
{
	m->tanh = true;
	add(m, th);
	struct ir_node *s = pass_producer(th->inputs[0]);
	double k;
	struct ir_value *p = NULL;
	if (pass_is_op(s, IR_OP_Mul, 2)) {
		for (int i = 0; i < 2 && !p; i++)
			if (pass_const_scalar(s->inputs[i], pass_rank_of(s->inputs[1 - i]), &k))
				p = s->inputs[1 - i];
	}
	if (!p)
		return false;   /* not a candidate: a plain Tanh */
	if (!near(k, sqrt(2.0 / 3.14159265358979323846))) {
		snprintf(m->why, sizeof(m->why), "tanh's argument is multiplied by %g, not sqrt(2/pi) = 0.7978846", k);
		return false;
	}
	if (!pass_sole_reader(th->inputs[0], m->why, sizeof(m->why)))
		return false;
	add(m, s);
	struct ir_node *a = pass_producer(p);
	if (!pass_is_op(a, IR_OP_Add, 2)) {
		snprintf(m->why, sizeof(m->why), "'%s' is not x + 0.044715 * x^3", p->name);
		return false;
	}
	if (!pass_sole_reader(p, m->why, sizeof(m->why)))
		return false;
	add(m, a);
	for (int i = 0; i < 2; i++) {
		struct ir_value *x = a->inputs[1 - i], *q = a->inputs[i];
		struct ir_node *mq = pass_producer(q);
		if (!pass_is_op(mq, IR_OP_Mul, 2))
			continue;
		for (int j = 0; j < 2; j++) {
			if (!pass_const_scalar(mq->inputs[j], pass_rank_of(x), &k))
				continue;
			if (!near(k, 0.044715)) {
				snprintf(m->why, sizeof(m->why), "the cubic term's factor is %g, not 0.044715", k);
				return false;
			}
			int n0 = m->n;
			struct ir_value *base = cube_base(m, mq->inputs[1 - j]);
			if (base != x) {
				m->n = n0;
				continue;
			}
			if (!pass_sole_reader(q, m->why, sizeof(m->why)) ||
			    !pass_sole_reader(mq->inputs[1 - j], m->why, sizeof(m->why)))
				return false;
			add(m, mq);
			m->x = x;
			return match_tail(m, th);
		}
	}
	snprintf(m->why, sizeof(m->why), "'%s' is not x + 0.044715 * x^3", p->name);
	return false;
}

/* ------------------------------------------------------------------------ */
/* The pass                                                                   */
/* ------------------------------------------------------------------------ */

static int rewrite(struct pass_ctx *c, struct match *m, struct ir_node *anchor, bool ogsh, int elem)
{
	struct ir_graph *g = c->m->graph;
	char *name = pass_new_node_name(g, anchor, "Gelu");
	if (!name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_node *n = ir_node_new(g, "Gelu", ogsh ? FUSED_DOMAIN : NULL, name, 1, 1, m->last);
	free(name);
	if (!n)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	int rc = ir_node_set_input(n, 0, m->x);
	if (!rc && m->tanh)
		rc = set_attr_str(n, "approximate", "tanh", c->d);
	if (!rc && ogsh)
		rc = pass_fused_gelu_fn(c, n, m->tanh, elem);
	struct ir_value *y = m->last->outputs[0];
	if (!rc)
		rc = ir_node_set_output(m->last, 0, NULL, c->d);
	if (!rc)
		rc = ir_node_set_output(n, 0, y, c->d);
	if (rc)
		return rc;
	pass_set_from(n, m->nodes, m->n);
	int count = m->n;
	char nb[64];
	pass_node_name(n, nb, sizeof(nb));
	rc = pass_remove_nodes(c, m->nodes, m->n);
	if (rc)
		return rc;
	pass_rewrote(c, n, "%d nodes (%s form) fused into Gelu%s%s of '%s'", count, m->tanh ? "tanh" : "erf",
		     m->tanh ? " (approximate=tanh)" : "", ogsh ? " (ai.ogsh: the model's opset is older than 20)" : "",
		     m->x->name);
	return 0;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int rc = pass_infer(c);
	if (rc == IR_EINTR || rc == IR_ENOMEM)
		return ir_diag_err(c->d, rc, rc == IR_EINTR ? "stopped" : "out of memory");
	int64_t opset = ir_model_opset(c->m, "");
	/* anchors first: rewriting removes nodes */
	int n_ids = 0, *ids = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
	if (!ids)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	ir_for_each_node(g, n)
		if (pass_is_op(n, IR_OP_Erf, 1) || pass_is_op(n, IR_OP_Tanh, 1))
			ids[n_ids++] = n->id;
	for (int i = 0; i < n_ids && !rc; i++) {
		struct ir_node *a = ir_node_by_id(g, ids[i]);
		if (!a)
			continue;   /* went with an earlier rewrite */
		struct match m;
		memset(&m, 0, sizeof(m));
		bool ok = a->op == IR_OP_Erf ? match_erf(&m, a) : match_tanh(&m, a);
		if (!ok) {
			if (m.why[0])
				pass_rejected(c, a, "not fused: %s", m.why);
			continue;
		}
		const struct ir_type *t = ir_value_type(m.x);
		if (t && t->kind == IR_TYPE_TENSOR && t->elem && !ir_dtype_is_float(t->elem)) {
			pass_rejected(c, a, "'%s' is %s: Gelu takes floating-point tensors", m.x->name, ir_dtype_name(t->elem));
			continue;
		}
		bool ogsh = opset < GELU_OPSET;
		int elem = t && t->kind == IR_TYPE_TENSOR ? t->elem : 0;
		if (ogsh) {
			/* ogsh's Gelu, written out in the function it gets */
			char fw[200];
			if (!pass_fused_opset(c->m, fw, sizeof(fw))) {
				pass_rejected(c, a, "GELU (%s form) of '%s' found, but the model imports opset %lld (Gelu needs "
					      "%d) and ogsh's Gelu cannot be used: %s", m.tanh ? "tanh" : "erf", m.x->name,
					      (long long)opset, GELU_OPSET, fw);
				continue;
			}
			if (!elem) {
				pass_rejected(c, a, "GELU (%s form) of '%s' not fused: its element type is not known (ogsh's Gelu "
					      "needs it for its function's constants)", m.tanh ? "tanh" : "erf", m.x->name);
				continue;
			}
		}
		rc = rewrite(c, &m, a, ogsh, elem);
	}
	free(ids);
	return rc;
}

const struct pass pass_fuse_gelu = {
	.name = "fuse-gelu",
	.summary = "fuse GELU written out with Erf or Tanh into one Gelu node (opset 20; before it ogsh's Gelu)",
	.explain =
		"GELU, the activation of BERT, GPT-2 and most transformers' MLPs, is x times the probability that a "
		"standard normal variable is below x: gelu(x) = x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))). "
		"Exporters write it out as four or five elementwise nodes (Div, Erf, Add, Mul, Mul). This pass finds "
		"them and puts one Gelu node (ONNX opset 20) in their place: one kernel reads x and writes the "
		"result, instead of five kernels each reading and writing a whole tensor.\n\n"
		"Two forms are recognised. The exact one: x * 0.5 * (1 + erf(x / sqrt(2))), with the division by "
		"sqrt(2) written as a Div by 1.4142135 or a Mul by 0.70710678, and the three factors x, 0.5 and "
		"(1 + erf(...)) multiplied in any grouping and operand order. It becomes Gelu(x). The tanh "
		"approximation (GPT-2's gelu_new): 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), with x^3 "
		"as Pow(x, 3) or x * x * x. It becomes Gelu(x, approximate=\"tanh\"), which computes the same "
		"approximation, so the numbers do not move beyond rounding. Constants must equal the textbook ones "
		"within 1e-6, or be them rounded to float16 or bfloat16, as a float16 or bfloat16 model stores them "
		"(0.044708252 for 0.044715 in float16): Gelu then uses the exact constants, a change far below the "
		"rounding of the model's own type.\n\n"
		"Nothing is fused when a value inside the pattern is read by anything else (another node, a "
		"subgraph, or as a graph output): the Gelu node would not produce it, so those nodes would have to "
		"stay and nothing would be saved.\n\n"
		"Before opset 20 (BERT and GPT-2 exported with opset 11 to 19), where ONNX has no Gelu, the pattern "
		"becomes ogsh's own Gelu (domain ai.ogsh): the same op, with the same approximate attribute and "
		"kernels, which fuse-activation then takes into the Gemm before it like ONNX's. The pass does not "
		"change the model's opset; the saved model stays runnable elsewhere: it gets a model-local ONNX "
		"function (domain ai.ogsh, name Gelu, overload 'erf' or 'tanh') whose body is the pattern again, "
		"its IR version becomes 10 and it imports ai.ogsh version 1. That needs opset 9 or later and the "
		"element type of x to be known. Constants that "
		"are graph inputs (they can be overridden at run time) are not constants here. Only the main "
		"graph is rewritten.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
