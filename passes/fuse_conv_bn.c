/*
 * fuse_conv_bn.c - the fuse-conv-bn pass: an inference BatchNormalization
 * after Conv, ConvTranspose or Gemm folds into that node's weights and bias.
 * The weight layout and the per-channel fold are in fold.c (shared with
 * fuse-conv-add).
 */
#include "passes/fold.h"
#include "passes/qweight.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const bn_param[5] = { "X", "scale", "B", "mean", "var" };

/*
 * Looks at one BatchNormalization. Returns 0 (rewritten or rejected: the
 * report says which) or an error code.
 */
static int try_bn(struct pass_ctx *c, struct ir_node *bn)
{
	char pn[256], why[512];
	double *par[5] = { NULL };
	double *mul = NULL, *add = NULL;
	int rc = 0;

	/* the inference form: one output, running statistics */
	int n_out = 0;
	for (int i = 0; i < bn->n_outputs; i++)
		n_out += bn->outputs[i] != NULL;
	if (ir_node_attr_int(bn, "training_mode", 0)) {
		pass_rejected(c, bn, "training_mode=1: it normalizes with the batch's own statistics, not constants");
		return 0;
	}
	if (n_out != 1 || !bn->outputs[0]) {
		pass_rejected(c, bn, "it has %d outputs (the training form): only the one-output inference form folds",
			      n_out);
		return 0;
	}
	if (ir_node_attr_int(bn, "spatial", 1) == 0) {
		pass_rejected(c, bn, "spatial=0: its statistics are per element, not per channel");
		return 0;
	}
	if (bn->n_inputs < 5 || !bn->inputs[0]) {
		pass_rejected(c, bn, "it has %d inputs, not 5", bn->n_inputs);
		return 0;
	}

	/* what it follows */
	struct ir_value *x = bn->inputs[0];
	struct ir_node *p = x->producer;
	if (!p || (p->op != IR_OP_Conv && p->op != IR_OP_ConvTranspose && p->op != IR_OP_Gemm)) {
		pass_rejected(c, bn, "its input comes from %s, not from a Conv, ConvTranspose or Gemm",
			      p ? p->op_type : x->init ? "an initializer" : "a graph input");
		return 0;
	}
	pass_node_name(p, pn, sizeof(pn));
	if (x->is_output) {
		pass_rejected(c, bn, "its input '%s' is also a graph output: %s's own result must stay", x->name, pn);
		return 0;
	}
	if (pass_n_readers(x) != 1) {
		pass_rejected(c, bn, "its input has %d consumers: the others need %s's unscaled output",
			      pass_n_readers(x), pn);
		return 0;
	}
	if (p->n_outputs != 1 || p->outputs[0] != x || p->n_inputs < 2) {
		pass_rejected(c, bn, "%s does not have the usual inputs and one output", pn);
		return 0;
	}

	/* constants */
	for (int i = 1; i < 5; i++)
		if (!pass_const_input(bn, i)) {
			if (qw_value_quantized(bn->inputs[i], why, sizeof(why)))
				pass_rejected(c, bn, "%s: %s", bn_param[i], why);
			else
				pass_rejected(c, bn, "%s is not a constant", bn_param[i]);
			return 0;
		}
	const struct ir_tensor *w = pass_const_input(p, 1);
	if (!w) {
		/* folding into a quantized weight would need it in float: it stays quantized */
		if (qw_value_quantized(p->inputs[1], why, sizeof(why)))
			pass_rejected(c, bn, "%s's %s", pn, why);
		else
			pass_rejected(c, bn, "%s's weights are not a constant", pn);
		return 0;
	}
	if (!fold_dtype_ok(w->dtype)) {
		pass_rejected(c, bn, "%s's weights are %s, not a float type", pn, ir_dtype_name(w->dtype));
		return 0;
	}
	const struct ir_tensor *bias = NULL;
	struct layout L;
	if (fold_bias_layout(p, w, pn, &bias, &L, why, sizeof(why))) {
		pass_rejected(c, bn, "%s", why);
		return 0;
	}
	for (int i = 1; i < 5; i++) {
		const struct ir_tensor *t = pass_const_input(bn, i);
		if (!ir_dtype_is_float(t->dtype)) {
			pass_rejected(c, bn, "%s is %s, not a float type", bn_param[i], ir_dtype_name(t->dtype));
			goto out;
		}
		if (t->numel != (uint64_t)L.channels) {
			pass_rejected(c, bn, "%s has %llu values but %s has %lld output channels", bn_param[i],
				      (unsigned long long)t->numel, pn, (long long)L.channels);
			goto out;
		}
		if (!(par[i] = pass_tensor_f64(t)))
			goto nomem;
	}

	/* s = gamma / sqrt(var + eps); y' = y * s + (beta - mean * s) */
	double eps = ir_node_attr_float(bn, "epsilon", 1e-5f);
	mul = malloc(sizeof(double) * (size_t)L.channels);
	add = malloc(sizeof(double) * (size_t)L.channels);
	if (!mul || !add)
		goto nomem;
	for (int64_t k = 0; k < L.channels; k++) {
		double ve = par[4][k] + eps;
		if (!(ve > 0) || !isfinite(ve)) {
			pass_rejected(c, bn, "var + epsilon is %g at channel %lld: not a positive number", ve, (long long)k);
			goto out;
		}
		mul[k] = par[1][k] / sqrt(ve);
		add[k] = par[2][k] - par[3][k] * mul[k];
	}

	if (pass_n_readers(p->inputs[1]) > 1)
		pass_note(c, bn, "%s's weights '%s' are shared with another node: %s gets its own copy", pn,
			  p->inputs[1]->name, pn);
	struct ir_value *old[5];
	for (int i = 0; i < 5; i++)
		old[i] = bn->inputs[i];
	if ((rc = fold_affine(c, p, &L, w, bias, mul, add, "_bn")))
		goto out;

	/* p now produces the BN's output (its name is the graph's interface) */
	struct ir_value *z = bn->outputs[0];
	/* the Conv now computes what the BatchNormalization did too: provenance for drawings and show */
	if (!p->n_from)
		pass_add_from(p, p);
	pass_add_from(p, bn);
	pass_rewrote(c, bn, "folded into '%s' (%s, %lld output channels): W' = W * s, b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps)",
		     pn, p->op_type, (long long)L.channels);
	if ((rc = ir_node_set_output(p, 0, NULL, c->d)) || (rc = ir_node_set_output(bn, 0, NULL, c->d)) ||
	    (rc = ir_node_set_output(p, 0, z, c->d)) || (rc = ir_node_remove(bn, c->d)))
		goto out;
	ir_value_remove(x);
	pass_drop_dead_consts(old + 1, 4);
	goto out;
nomem:
	rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
out:
	for (int i = 0; i < 5; i++)
		free(par[i]);
	free(mul);
	free(add);
	return rc;
}

static bool is_bn(const struct ir_node *n)
{
	return n->op == IR_OP_BatchNormalization;
}

static int run(struct pass_ctx *c)
{
	/* the candidates first: a rewrite removes nodes */
	return pass_each_node(c, is_bn, try_bn);
}

const struct pass pass_fuse_conv_bn = {
	.name = "fuse-conv-bn",
	.summary = "fold an inference BatchNormalization into the Conv, ConvTranspose or Gemm before it",
	.explain =
		"At inference a BatchNormalization is a fixed affine map per channel: "
		"y = (x - mean) / sqrt(var + eps) * gamma + beta, with mean, var, gamma (scale) and beta (B) constants. "
		"When x is the output of a Conv, each output channel c of the conv is already a weighted sum plus a "
		"bias, so scaling and shifting that channel can be done once, on the weights, instead of on every "
		"pixel at run time. The BatchNormalization node disappears and the conv produces its output "
		"(same name, same values up to rounding).\n\n"
		"For each output channel c: s = gamma[c] / sqrt(var[c] + eps); W'[c,...] = W[c,...] * s; "
		"b'[c] = (b[c] - mean[c]) * s + beta[c], with b = 0 when the conv has no bias (one is added). "
		"The numbers are computed in double and rounded once to the weights' type.\n\n"
		"ConvTranspose keeps its output channels on the second axis of W, which has shape "
		"[C_in, C_out/group, k...]: W[i,j,...] connects input channel i to output channel "
		"g * (C_out/group) + j, where g = i / (C_in/group) is the group of input channel i, so "
		"W'[i,j,...] = W[i,j,...] * s[g * (C_out/group) + j]. Gemm (Y = alpha*A*B + beta*C) is scaled "
		"along its output features, the columns of B (its rows when transB=1), and its C becomes "
		"C' = s * (beta*C - mean) + B_bn (B_bn: the BatchNormalization's shift), with beta set to 1.\n\n"
		"It does not apply when: the BatchNormalization is in training mode (training_mode=1, or more than "
		"one output) or spatial=0; its input does not come from a Conv, ConvTranspose or Gemm; the conv's "
		"output is read by another node or is a graph output (they need the unscaled values); a BN "
		"parameter, the weights or the bias is not a constant; the weights are not a float type; or the "
		"number of output channels cannot be told or does not match the BN parameters. Weights shared with "
		"another node are never changed in place: the folded conv gets new initializers, and the old ones "
		"go only when nothing reads them any more. Subgraphs (If/Loop bodies) are left as they are.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
