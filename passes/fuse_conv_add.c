/*
 * fuse_conv_add.c - the fuse-conv-add pass: a constant Add, Sub, Mul or Div
 * per output channel after Conv, ConvTranspose or Gemm folds into that
 * node's weights and bias.
 *
 * The weight layout and the per-channel fold are in fold.c.
 */
#include "passes/fold.h"
#include "passes/qweight.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */

/*
 * Whether constant k broadcasts per output channel against an output of
 * rank `rank` whose channel axis is 1: every axis of k is 1 except perhaps
 * the one lined up with axis 1, which may be `channels`. Fills why if not.
 */
static bool per_channel(const struct ir_tensor *k, int rank, int64_t channels, char *why, size_t size)
{
	char ds[96];
	ir_dims_str(k->rank, k->dims, ds, sizeof(ds));
	if (!k->numel) {
		snprintf(why, size, "the constant operand is empty (%s)", ds);
		return false;
	}
	if (k->rank > rank) {
		snprintf(why, size, "the constant has shape %s, more axes than the output's %d: it would change the output's shape",
			 ds, rank);
		return false;
	}
	for (int j = 0; j < k->rank; j++) {
		int axis = j + rank - k->rank;
		if (k->dims[j] == 1 || (axis == 1 && k->dims[j] == channels))
			continue;
		if (axis == 1)
			snprintf(why, size, "the constant has shape %s: %lld values on the channel axis, but there are %lld channels",
				 ds, (long long)k->dims[j], (long long)channels);
		else if (k->dims[j] == channels && rank > 2)
			snprintf(why, size, "the constant has shape %s, which lines up with output axis %d, not the channel axis 1 "
				 "(per channel it would be [%lld%s])", ds, axis, (long long)channels,
				 rank == 3 ? ",1" : rank == 4 ? ",1,1" : ",1,1,1...");
		else
			snprintf(why, size, "the constant has shape %s: it varies along output axis %d, not only per channel",
				 ds, axis);
		return false;
	}
	return true;
}

static bool is_conv(const struct ir_node *p)
{
	return p && (p->op == IR_OP_Conv || p->op == IR_OP_ConvTranspose || p->op == IR_OP_Gemm);
}

/* Looks at one Add/Sub/Mul/Div. Returns 0 (the report says what happened) or an error code. */
static int try_op(struct pass_ctx *c, struct ir_node *n)
{
	char pn[256], why[512];
	double *kv = NULL, *mul = NULL, *add = NULL;
	int rc = 0;

	if (n->n_inputs != 2 || n->n_outputs != 1 || !n->outputs[0] || !n->inputs[0] || !n->inputs[1])
		return 0;
	bool c0 = is_conv(n->inputs[0]->producer), c1 = is_conv(n->inputs[1]->producer);
	if (!c0 && !c1)
		return 0;   /* not after a conv: not this pass's pattern */
	/* the conv's side: the one whose other operand is a constant */
	int slot = c0 && pass_const_input(n, 1) ? 0 : c1 && pass_const_input(n, 0) ? 1 : c0 ? 0 : 1;
	struct ir_value *y = n->inputs[slot], *kval = n->inputs[1 - slot];
	struct ir_node *p = y->producer;
	pass_node_name(p, pn, sizeof(pn));
	const char *op = n->op_type;

	const struct ir_tensor *k = pass_const_input(n, 1 - slot);
	if (!k) {
		pass_rejected(c, n, "its other operand '%s' is not a constant", kval->name);
		return 0;
	}
	if (n->op == IR_OP_Div && slot == 1) {
		pass_rejected(c, n, "it divides a constant by %s's output: k / y is not a linear function of y", pn);
		return 0;
	}
	if (y->is_output) {
		pass_rejected(c, n, "its input '%s' is also a graph output: %s's own result must stay", y->name, pn);
		return 0;
	}
	if (pass_n_readers(y) != 1) {
		pass_rejected(c, n, "its input has %d consumers: the others need %s's output as it is", pass_n_readers(y),
			      pn);
		return 0;
	}
	if (p->n_outputs != 1 || p->outputs[0] != y || p->n_inputs < 2) {
		pass_rejected(c, n, "%s does not have the usual inputs and one output", pn);
		return 0;
	}
	const struct ir_tensor *w = pass_const_input(p, 1);
	if (!w) {
		/* folding into a quantized weight would need it in float: it stays quantized */
		if (qw_value_quantized(p->inputs[1], why, sizeof(why)))
			pass_rejected(c, n, "%s's %s", pn, why);
		else
			pass_rejected(c, n, "%s's weights are not a constant", pn);
		return 0;
	}
	if (!fold_dtype_ok(w->dtype)) {
		pass_rejected(c, n, "%s's weights are %s, not a float type", pn, ir_dtype_name(w->dtype));
		return 0;
	}
	if (k->dtype != w->dtype) {
		pass_rejected(c, n, "the constant is %s but %s's weights are %s", ir_dtype_name(k->dtype), pn,
			      ir_dtype_name(w->dtype));
		return 0;
	}
	const struct ir_tensor *bias = NULL;
	struct layout L;
	if (fold_bias_layout(p, w, pn, &bias, &L, why, sizeof(why))) {
		pass_rejected(c, n, "%s", why);
		return 0;
	}
	/* the output's rank: the weights' for a conv, 2 for Gemm */
	int rank = L.kind == L_GEMM ? 2 : w->rank;
	if (!per_channel(k, rank, L.channels, why, sizeof(why))) {
		pass_rejected(c, n, "%s", why);
		return 0;
	}

	kv = pass_tensor_f64(k);
	mul = malloc(sizeof(double) * (size_t)L.channels);
	add = malloc(sizeof(double) * (size_t)L.channels);
	if (!kv || !mul || !add)
		goto nomem;
	const char *what;
	for (int64_t ch = 0; ch < L.channels; ch++) {
		/* every axis of k but the channel axis is 1, so the flat index is the channel */
		double kc = kv[k->numel == 1 ? 0 : ch];
		switch (n->op) {
		case IR_OP_Add: mul[ch] = 1; add[ch] = kc; break;
		case IR_OP_Sub:
			mul[ch] = slot == 0 ? 1 : -1;
			add[ch] = slot == 0 ? -kc : kc;
			break;
		case IR_OP_Mul: mul[ch] = kc; add[ch] = 0; break;
		default:
			if (kc == 0) {
				pass_rejected(c, n, "it divides by zero at channel %lld", (long long)ch);
				goto out;
			}
			mul[ch] = 1 / kc;
			add[ch] = 0;
			break;
		}
	}
	switch (n->op) {
	case IR_OP_Add: what = "b' = b + k"; break;
	case IR_OP_Sub: what = slot == 0 ? "b' = b - k" : "W' = -W, b' = k - b"; break;
	case IR_OP_Mul: what = "W' = W * k, b' = b * k"; break;
	default: what = "W' = W / k, b' = b / k"; break;
	}
	if (pass_n_readers(p->inputs[1]) > 1 && (n->op == IR_OP_Mul || n->op == IR_OP_Div || slot == 1))
		pass_note(c, n, "%s's weights '%s' are shared with another node: %s gets its own copy", pn,
			  p->inputs[1]->name, pn);
	const char *suffix = n->op == IR_OP_Add ? "_add" : n->op == IR_OP_Sub ? "_sub" : n->op == IR_OP_Mul ? "_mul" : "_div";
	if ((rc = fold_affine(c, p, &L, w, bias, mul, add, suffix)))
		goto out;

	/* p now produces the op's output (its name is what the consumers and the graph know) */
	struct ir_value *z = n->outputs[0];
	/* the Conv now computes what the Add did too: provenance for drawings and show */
	if (!p->n_from)
		pass_add_from(p, p);
	pass_add_from(p, n);
	pass_rewrote(c, n, "%s folded into '%s' (%s, %lld output channels): %s", op, pn, p->op_type,
		     (long long)L.channels, what);
	if ((rc = ir_node_set_output(p, 0, NULL, c->d)) || (rc = ir_node_set_output(n, 0, NULL, c->d)) ||
	    (rc = ir_node_set_output(p, 0, z, c->d)) || (rc = ir_node_remove(n, c->d)))
		goto out;
	ir_value_remove(y);
	pass_drop_dead_consts(&kval, 1);
	goto out;
nomem:
	rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
out:
	free(kv);
	free(mul);
	free(add);
	return rc;
}

static bool is_arith(const struct ir_node *n)
{
	return n->op == IR_OP_Add || n->op == IR_OP_Sub || n->op == IR_OP_Mul || n->op == IR_OP_Div;
}

static int run(struct pass_ctx *c)
{
	/* the candidates first: a rewrite removes nodes */
	return pass_each_node(c, is_arith, try_op);
}

const struct pass pass_fuse_conv_add = {
	.name = "fuse-conv-add",
	.summary = "fold a per-channel constant Add, Sub, Mul or Div after a Conv, ConvTranspose or Gemm into its weights and bias",
	.explain =
		"A conv computes each output channel c as a weighted sum plus a bias: y[c] = W[c] * x + b[c]. "
		"Adding, subtracting, multiplying or dividing that channel by a constant k[c] afterwards gives "
		"another weighted sum plus a bias, so the arithmetic node can go and the conv takes new weights "
		"and bias instead. The conv then produces the node's output (same name).\n\n"
		"The algebra, per output channel c: y + k: b' = b + k. y - k: b' = b - k. k - y: W' = -W, "
		"b' = k - b. y * k: W' = W * k, b' = b * k. y / k: W' = W / k, b' = b / k (not when some k is 0). "
		"A conv without a bias gets one when the fold needs it. Numbers are computed in double and rounded "
		"once to the weights' type. For Gemm (Y = alpha*A*B + beta*C) the channels are the output "
		"features, the columns of B (rows when transB=1), and C' = k_mul * beta * C + k_add with beta set "
		"to 1; for ConvTranspose they are the second axis of W, per group.\n\n"
		"The constant must be the same for every pixel of a channel: a scalar, or a shape whose axes are "
		"all 1 except the one lining up with the channel axis (axis 1) when shapes are aligned from the "
		"right: [C,1,1] or [1,C,1,1] after a 2-D Conv, [C] after a Gemm. A [C] constant after a Conv lines "
		"up with the width axis and is rejected: it is not per channel.\n\n"
		"It does not apply when: the other operand is not a constant (a residual Add of two branches); "
		"the conv's output is also read by another node or is a graph output; k / y (not linear); the "
		"conv's weights or bias are not constants or not a float type; the constant's type differs from "
		"the weights'. Weights shared with another node are never changed in place: the folded conv gets "
		"new initializers. Subgraphs are left as they are.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
