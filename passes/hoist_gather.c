/*
 * hoist_gather.c - the hoist-gather pass: a Gather of some rows by constant
 * indices (ViT's class token, x[:, 0]) moves before the row-wise node that
 * makes its input (elementwise ops, MatMul by a 2-D weight, a LayerNorm over
 * later axes), so that node computes only the rows the Gather keeps. It
 * moves again from there, as far as row-wise nodes read by nothing else go:
 * a ViT's last encoder MLP, its LayerNorms and residual Adds then run on one
 * token a picture instead of 197.
 */
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HG_MAX_IN 8
#define HG_MAX_ROUNDS 10000

enum kind { K_NONE, K_ELTWISE, K_MATMUL, K_LAYERNORM };

static enum kind kind_of(const struct ir_node *n)
{
	switch (n->op) {
	case IR_OP_Relu: case IR_OP_Gelu: case IR_OP_ogsh_Gelu: case IR_OP_Erf: case IR_OP_Tanh: case IR_OP_Sigmoid: case IR_OP_Sqrt:
	case IR_OP_Exp: case IR_OP_Log: case IR_OP_Neg: case IR_OP_Abs: case IR_OP_Reciprocal: case IR_OP_Cast:
	case IR_OP_Identity: case IR_OP_Softplus: case IR_OP_HardSwish: case IR_OP_HardSigmoid: case IR_OP_LeakyRelu:
	case IR_OP_Clip: case IR_OP_Add: case IR_OP_Sub: case IR_OP_Mul: case IR_OP_Div: case IR_OP_Pow:
	case IR_OP_Max: case IR_OP_Min: case IR_OP_Where:
		return K_ELTWISE;
	case IR_OP_MatMul:
		return K_MATMUL;
	case IR_OP_LayerNormalization: case IR_OP_ogsh_LayerNormalization:
		return K_LAYERNORM;
	default:
		return K_NONE;
	}
}

static const struct ir_type *tensor_type(const struct ir_value *v)
{
	const struct ir_type *t = v ? ir_value_type(v) : NULL;
	return t && t->kind == IR_TYPE_TENSOR && t->rank >= 0 ? t : NULL;
}

/* Gather's axis in [0, rank), or -1 */
static int gather_axis(const struct ir_node *g, int rank)
{
	int64_t a = ir_node_attr_int(g, "axis", 0);
	if (a < 0)
		a += rank;
	return a >= 0 && a < rank ? (int)a : -1;
}

static bool same_tensor(const struct ir_tensor *a, const struct ir_tensor *b)
{
	if (a == b)
		return true;
	if (a->dtype != b->dtype || a->rank != b->rank || a->nbytes != b->nbytes)
		return false;
	for (int i = 0; i < a->rank; i++)
		if (a->dims[i] != b->dims[i])
			return false;
	return !a->nbytes || !memcmp(ir_tensor_data(a), ir_tensor_data(b), a->nbytes);
}

/* Whether o is a Gather of v (input 0) by the same indices on the same axis as g. */
static bool twin(const struct ir_node *g, const struct ir_node *o, const struct ir_value *v, int rank)
{
	const struct ir_tensor *oi = o->op == IR_OP_Gather && o->n_inputs >= 2 && o->inputs[0] == v &&
						     o->inputs[1] != v && o->n_outputs == 1 && o->outputs[0] &&
						     !o->outputs[0]->is_output
					     ? pass_const_input(o, 1)
					     : NULL;
	return oi && gather_axis(o, rank) == gather_axis(g, rank) && same_tensor(pass_const_input(g, 1), oi);
}

/* When every reader of g's data is a Gather like g (one Gather per use), makes
 * their readers read g's output and removes them; whether g is then the only reader. */
static bool merge_twins(struct ir_node *g, int rank)
{
	struct ir_value *v = g->inputs[0];
	if (v->is_output)
		return false;
	for (size_t i = 0; i < v->n_uses; i++)
		if (v->uses[i].slot != 0 || !twin(g, v->uses[i].node, v, rank))
			return false;
	for (size_t i = 0; i < v->n_uses;) {
		struct ir_node *o = v->uses[i].node;
		if (o == g) {
			i++;
			continue;
		}
		ir_value_replace_uses(o->outputs[0], g->outputs[0]);
		if (ir_node_remove(o, NULL))
			return false;   /* still read through a subgraph */
	}
	return pass_only_reader(v) == g;
}

/* A new int constant of idx's type and shape, all zeros. */
static struct ir_value *zero_indices(struct pass_ctx *c, const struct ir_tensor *idx, const char *base)
{
	struct ir_tensor *t = ir_tensor_new(idx->dtype, idx->rank, idx->dims, c->d);
	if (!t)
		return NULL;
	if (t->nbytes)
		memset(ir_tensor_mutable(t), 0, t->nbytes);
	struct ir_value *x = pass_new_init(c->m->graph, base, t, c->d);
	ir_tensor_unref(t);
	return x;
}

/*
 * One step: moves Gather g before the node making its data. Returns 1 when
 * it moved, 0 when not (rejected or not a candidate), or an error code.
 */
static int try_gather(struct pass_ctx *c, struct ir_node *g, bool report)
{
	char pn[256], why[300];
	struct ir_value *v = g->n_inputs >= 2 ? g->inputs[0] : NULL;
	const struct ir_tensor *idx = pass_const_input(g, 1);
	if (!v || !idx || g->n_outputs != 1 || !g->outputs[0] || (idx->dtype != IR_INT64 && idx->dtype != IR_INT32))
		return 0;
	struct ir_node *p = v->producer;
	const enum kind k = p ? kind_of(p) : K_NONE;
	const struct ir_type *vt = tensor_type(v);
	if (k == K_NONE || !vt)
		return 0;
	const int r = vt->rank, axis = gather_axis(g, r);
	if (axis < 0)
		return 0;
	/* only where it keeps fewer rows than there are (a lookup of many indices, such as an
	 * embedding's, would make the node before compute more, not less) */
	const struct ir_dim *ad = &vt->dims[axis];
	if (idx->numel != 1 && !(ad->kind == IR_DIM_VALUE && idx->numel <= (uint64_t)ad->value))
		return 0;
	/* the node must be one whose rows along `axis` are independent */
	if (k == K_MATMUL) {
		const struct ir_type *at = tensor_type(p->inputs[0]), *bt = tensor_type(p->inputs[1]);
		if (!at || !bt || bt->rank != 2 || at->rank != r || r < 2 || axis >= r - 1)
			return 0;
	}
	int ln_axis = 0;
	if (k == K_LAYERNORM) {
		int64_t a = ir_node_attr_int(p, "axis", -1);
		ln_axis = (int)(a < 0 ? a + r : a);
		if (axis >= ln_axis)
			return 0;
	}
	pass_node_name(p, pn, sizeof(pn));
	/* checks that change nothing come first; merging identical Gathers is the last of them */
#define REJECT(...) do { if (report) pass_rejected(c, g, __VA_ARGS__); return 0; } while (0)
	if (!pass_only_reader(v) && !merge_twins(g, r)) {
		pass_sole_reader(v, why, sizeof(why));
		REJECT("%s (%s) computes every row: %s", pn, p->op_type, why);
	}
	if (p->n_outputs < 1 || p->outputs[0] != v || p->n_inputs > HG_MAX_IN)
		REJECT("%s does not have the usual outputs", pn);
	for (int i = 1; i < p->n_outputs; i++)
		if (p->outputs[i] && pass_n_readers(p->outputs[i]))
			REJECT("%s's output %d ('%s') is read too", pn, i, p->outputs[i]->name);

	/* which inputs take the Gather, and how: the rows' own indices where the input has the axis at
	 * full size, zeros where it broadcasts (size 1) there, nothing where it lacks it */
	int how[HG_MAX_IN] = { 0 };   /* 0 unchanged, 1 indices, 2 zeros, at that input axis in ax[] */
	int ax[HG_MAX_IN] = { 0 };
	const struct ir_dim *od = &vt->dims[axis];
	for (int i = 0; i < p->n_inputs; i++) {
		struct ir_value *in = p->inputs[i];
		if (!in)
			continue;
		if (k == K_MATMUL && i == 1)
			break;   /* the weight */
		if (k == K_LAYERNORM && i > 0)
			break;   /* scale and bias: over the normalized axes */
		const struct ir_type *it = tensor_type(in);
		if (!it)
			REJECT("%s's input '%s' has no known shape", pn, in->name);
		const int ai = axis - (r - it->rank);
		if (k != K_ELTWISE && ai != axis)
			REJECT("%s's input '%s' does not have the output's rank", pn, in->name);
		if (ai < 0)
			continue;
		const struct ir_dim *d = &it->dims[ai];
		if (d->kind != IR_DIM_UNKNOWN && od->kind != IR_DIM_UNKNOWN && ir_dim_equal(d, od))
			how[i] = 1;
		else if (d->kind == IR_DIM_VALUE && d->value == 1)
			how[i] = 2;
		else
			REJECT("%s's input '%s' is not known to have the rows along axis %d", pn, in->name, axis);
		ax[i] = ai;
	}
#undef REJECT

	/* the new Gathers, before p */
	struct ir_value *zeros = NULL;
	for (int i = 0; i < p->n_inputs; i++) {
		if (!how[i])
			continue;
		if (how[i] == 2 && !zeros && !(zeros = zero_indices(c, idx, "gather_zeros")))
			return IR_ERR;
		struct ir_value *in2[2] = { p->inputs[i], how[i] == 1 ? g->inputs[1] : zeros };
		struct ir_node *ng = pass_emit(c, "Gather", p, in2, 2, p->inputs[i]->name, p);
		if (!ng || pass_set_int_attr(ng, "axis", ax[i], c->d) || ir_node_set_input(p, i, ng->outputs[0]))
			return IR_ERR;
	}
	/* what the report says, read before v (and its type) goes */
	const unsigned long long kept = (unsigned long long)idx->numel;
	char rows[32] = "the";
	if (od->kind == IR_DIM_VALUE)
		snprintf(rows, sizeof(rows), "%lld", (long long)od->value);
	/* p now makes the Gather's output; the normalized axes keep their place from the end */
	struct ir_value *z = g->outputs[0];
	int rc;
	if ((rc = ir_node_set_output(g, 0, NULL, c->d)) || (rc = ir_node_set_output(p, 0, NULL, c->d)) ||
	    (rc = ir_node_remove(g, c->d)))
		return rc;
	ir_value_remove(v);
	if ((rc = ir_node_set_output(p, 0, z, c->d)))
		return rc;
	if (k == K_LAYERNORM && (rc = pass_set_int_attr(p, "axis", ln_axis - r, c->d)))
		return rc;
	pass_rewrote(c, p, "now computes only the %llu of %s rows along axis %d that the Gather after it kept: the "
		     "Gather moved before it, onto %s", kept, rows, axis,
		     k == K_ELTWISE ? "its inputs that have that axis" : "its input");
	c->m->infer_current = false;
	return 1;
}

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	/* move every Gather as far as it goes: a move may let the new Gathers move in turn */
	for (int round = 0; round < HG_MAX_ROUNDS; round++) {
		int rc = pass_infer(c);
		if (rc)
			return rc;
		int *ids = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1)), n_ids = 0;
		if (!ids)
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		ir_for_each_node(g, n)
			if (n->op == IR_OP_Gather)
				ids[n_ids++] = n->id;
		int moved = 0;
		for (int i = 0; i < n_ids; i++) {
			struct ir_node *n = ir_node_by_id(g, ids[i]);
			if (!n)
				continue;
			rc = try_gather(c, n, false);
			if (rc < 0) {
				free(ids);
				return rc;
			}
			if (rc == 1) {
				moved = 1;
				break;   /* the shapes changed: infer again before the next move */
			}
		}
		if (!moved) {
			/* where each Gather stopped, and why (nothing moves now) */
			for (int i = 0; i < n_ids && rc >= 0; i++) {
				struct ir_node *n = ir_node_by_id(g, ids[i]);
				if (n)
					rc = try_gather(c, n, true);
			}
			free(ids);
			return rc < 0 ? rc : 0;
		}
		free(ids);
	}
	return 0;
}

const struct pass pass_hoist_gather = {
	.name = "hoist-gather",
	.summary = "move a Gather of some rows (ViT's class token) before the row-wise nodes that make them",
	.explain =
		"A classifier often reads one row of a sequence: ViT and BERT-style models take the class token, "
		"x[:, 0], exported as Gather(x, 0, axis=1), after the last encoder layer and its LayerNorm. Those "
		"layers compute every token, and all but one are thrown away.\n\n"
		"When the node making the Gather's input treats rows along the Gather's axis independently, the "
		"Gather can go first: elementwise ops (Add, Mul, Gelu, Cast...) with their inputs broadcast, MatMul "
		"by a 2-D weight when the axis is not the last, and LayerNormalization when the axis comes before "
		"the normalized ones. Each input that has the axis gets its own Gather (by the same indices, or by "
		"zeros where it is broadcast along that axis, size 1); inputs without the axis stay as they are. "
		"The node then computes only the kept rows and produces the Gather's output, under its name. The "
		"pass repeats this as long as it can, so the Gather climbs through a ViT's last LayerNorm, residual "
		"Add, MLP and the LayerNorm before it: the FLOPs of that block drop by the sequence length (197 "
		"for ViT-B/16). Each kept row is computed by the same operations, so the numbers agree up to rounding (a product of fewer rows may sum in another order).\n\n"
		"It does not apply when: the indices are not a constant, or are more than one and not known to be "
		"fewer than the rows along the axis (a lookup such as an embedding's would make the node compute "
		"more); the Gather's input is read by anything "
		"else (the other reader needs all rows; identical Gathers of it are merged first) or is a graph "
		"output; a node's input shapes are not known well enough to tell whether they have the rows; a "
		"LayerNormalization's extra outputs are read; or the node is not row-wise (Reshape, Transpose, "
		"Softmax or attention over the rows, Conv...), where the Gather stops.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
