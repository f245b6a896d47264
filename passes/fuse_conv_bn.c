/*
 * fuse_conv_bn.c - the fuse-conv-bn pass: an inference BatchNormalization
 * after Conv, ConvTranspose or Gemm folds into that node's weights and bias.
 *
 * Static helpers here that pass.h could share one day: foldable(),
 * drop_dead_consts(), the weight layout (which output channel each weight
 * element feeds) and the per-channel affine fold. fuse_conv_add.c has its
 * own copies of the layout and fold.
 */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Element types the fold computes in (double) and rounds back to. */
static bool foldable(int dtype)
{
	return dtype == IR_FLOAT || dtype == IR_DOUBLE || dtype == IR_FLOAT16 || dtype == IR_BFLOAT16;
}

/*
 * Removes the constants in vs[] (initializers or Constant nodes) that
 * nothing reads any more. vs may hold NULLs and repeats.
 */
static void drop_dead_consts(struct ir_value **vs, int n)
{
	for (int i = 0; i < n; i++) {
		struct ir_value *v = vs[i];
		if (!v)
			continue;
		for (int j = i + 1; j < n; j++)   /* each value once: removing frees it */
			if (vs[j] == v)
				vs[j] = NULL;
		if (pass_n_readers(v) || v->is_input)
			continue;
		if (v->producer) {
			if (v->producer->op == IR_OP_Constant && v->producer->n_outputs == 1)
				ir_node_remove(v->producer, NULL);
		} else if (v->init) {
			ir_value_remove(v);
		}
	}
}

/* Where the output channels are in the weights of a Conv, ConvTranspose or Gemm. */
enum { L_CONV, L_CONVT, L_GEMM };
struct layout {
	int kind;
	int64_t channels;     /* output channels (Gemm: output features N) */
	int64_t inner;        /* Conv/ConvTranspose: elements of one kernel slice */
	int64_t per_group;    /* ConvTranspose: output channels per group; input channels per group in cin_g */
	int64_t cin_g;
	int64_t rows, cols;   /* Gemm: B's shape */
	bool trans_b;
};

/*
 * Fills L for node p with weights w. Returns NULL, or why the channels
 * cannot be told (a sentence for the report).
 */
static const char *weight_layout(const struct ir_node *p, const struct ir_tensor *w, struct layout *L,
				 char *why, size_t size)
{
	char dims[128];
	memset(L, 0, sizeof(*L));
	ir_dims_str(w->rank, w->dims, dims, sizeof(dims));
	if (!w->numel) {
		snprintf(why, size, "its weights are empty (%s)", dims);
		return why;
	}
	if (p->op == IR_OP_Gemm) {
		if (w->rank != 2) {
			snprintf(why, size, "cannot tell the output features: B has shape %s, not 2-D", dims);
			return why;
		}
		L->kind = L_GEMM;
		L->trans_b = ir_node_attr_int(p, "transB", 0) != 0;
		L->rows = w->dims[0];
		L->cols = w->dims[1];
		L->channels = L->trans_b ? L->rows : L->cols;
		return NULL;
	}
	if (w->rank < 3) {
		snprintf(why, size, "cannot tell the output channels: weights have shape %s (a %s needs 3 axes or more)",
			 dims, p->op_type);
		return why;
	}
	L->inner = 1;
	for (int k = 2; k < w->rank; k++)
		L->inner *= w->dims[k];
	if (p->op == IR_OP_Conv) {
		L->kind = L_CONV;
		L->channels = w->dims[0];
		return NULL;
	}
	int64_t group = ir_node_attr_int(p, "group", 1);
	if (group < 1 || w->dims[0] % group) {
		snprintf(why, size, "cannot tell the output channels: group=%lld does not divide the %lld input channels",
			 (long long)group, (long long)w->dims[0]);
		return why;
	}
	L->kind = L_CONVT;
	L->per_group = w->dims[1];
	L->cin_g = w->dims[0] / group;
	L->channels = w->dims[1] * group;
	return NULL;
}

/* The output channel that element i of the weights feeds. */
static int64_t channel_of(const struct layout *L, uint64_t i)
{
	switch (L->kind) {
	case L_CONV:
		return (int64_t)(i / (uint64_t)L->inner);
	case L_CONVT: {
		/* W is [C_in, C_out/group, k...]: input channel ci of group ci / cin_g feeds
		 * output channel (ci / cin_g) * per_group + j */
		uint64_t slice = i / (uint64_t)L->inner;
		int64_t ci = (int64_t)(slice / (uint64_t)L->per_group);
		int64_t j = (int64_t)(slice % (uint64_t)L->per_group);
		return (ci / L->cin_g) * L->per_group + j;
	}
	default:
		return L->trans_b ? (int64_t)(i / (uint64_t)L->cols) : (int64_t)(i % (uint64_t)L->cols);
	}
}

/* An attribute float set on n (replacing any). */
static int set_attr_float(struct ir_node *n, const char *name, float f, struct ir_diag *d)
{
	struct ir_attr a;
	memset(&a, 0, sizeof(a));
	a.name = strdup(name);
	if (!a.name)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	a.type = IR_ATTR_FLOAT;
	a.has_type = true;
	a.f = f;
	return ir_node_set_attr(n, &a, d);
}

/* Base name for a new initializer: old name + suffix. */
static void base_name(char *buf, size_t size, const char *old, const char *suffix)
{
	snprintf(buf, size, "%s%s", old, suffix);
}

/*
 * Makes node p compute y' = y * mul[c] + add[c] per output channel c by
 * rewriting its weights (input 1) and bias (input 2) into new initializers.
 * bias_t is the current bias tensor (NULL: none). Returns 0 or an error.
 */
static int fold_affine(struct pass_ctx *c, struct ir_node *p, const struct layout *L, const struct ir_tensor *w,
		       const struct ir_tensor *bias_t, const double *mul, const double *add, const char *suffix)
{
	struct ir_graph *g = p->graph;
	int rc = IR_ENOMEM;
	double *wv = NULL, *bv = NULL, *nb = NULL;
	struct ir_tensor *wt = NULL, *bt = NULL;
	char base[256], pn[64];
	struct ir_value *old_w = p->inputs[1], *old_b = p->n_inputs > 2 ? p->inputs[2] : NULL;

	wv = pass_tensor_f64(w);
	if (!wv)
		goto nomem;
	for (uint64_t i = 0; i < w->numel; i++)
		wv[i] *= mul[channel_of(L, i)];
	wt = pass_tensor_from_f64(w->dtype, w->rank, w->dims, wv, c->d);
	if (!wt) {
		rc = IR_ERR;
		goto out;
	}

	int64_t bdims[2];
	int brank;
	if (L->kind == L_GEMM) {
		/* Y = alpha*A*B + beta*C: the new C' = mul * (beta*C) + add, and beta becomes 1 */
		double beta = ir_node_attr_float(p, "beta", 1.0f);
		int64_t crows = bias_t && bias_t->rank == 2 ? bias_t->dims[0] : 1;
		int64_t ccols = !bias_t ? 1 : bias_t->rank == 2 ? bias_t->dims[1] : bias_t->rank == 1 ? bias_t->dims[0] : 1;
		brank = bias_t && bias_t->rank == 2 ? 2 : 1;
		bdims[0] = brank == 2 ? crows : L->channels;
		bdims[1] = L->channels;
		if (bias_t && !(bv = pass_tensor_f64(bias_t)))
			goto nomem;
		nb = malloc(sizeof(double) * (size_t)(crows * L->channels));
		if (!nb)
			goto nomem;
		for (int64_t r = 0; r < crows; r++)
			for (int64_t k = 0; k < L->channels; k++) {
				double cv = bv ? bv[r * ccols + (ccols == 1 ? 0 : k)] : 0;
				nb[r * L->channels + k] = mul[k] * beta * cv + add[k];
			}
	} else {
		brank = 1;
		bdims[0] = L->channels;
		if (bias_t && !(bv = pass_tensor_f64(bias_t)))
			goto nomem;
		nb = malloc(sizeof(double) * (size_t)L->channels);
		if (!nb)
			goto nomem;
		for (int64_t k = 0; k < L->channels; k++)
			nb[k] = (bv ? bv[k] : 0) * mul[k] + add[k];
	}
	bt = pass_tensor_from_f64(w->dtype, brank, bdims, nb, c->d);
	if (!bt) {
		rc = IR_ERR;
		goto out;
	}

	base_name(base, sizeof(base), old_w->name, suffix);
	struct ir_value *nw = pass_new_init(g, base, wt, c->d);
	if (!nw) {
		rc = IR_ERR;
		goto out;
	}
	if (old_b)
		base_name(base, sizeof(base), old_b->name, suffix);
	else
		snprintf(base, sizeof(base), "%s.bias%s", pass_node_name(p, pn, sizeof(pn)), suffix);
	struct ir_value *nbv = pass_new_init(g, base, bt, c->d);
	if (!nbv) {
		rc = IR_ERR;
		goto out;
	}
	if (ir_node_set_input(p, 1, nw))
		goto nomem;
	if (p->n_inputs > 2)
		rc = ir_node_set_input(p, 2, nbv);
	else
		rc = ir_node_add_input(p, nbv);
	if (rc)
		goto nomem;
	if (L->kind == L_GEMM && (rc = set_attr_float(p, "beta", 1.0f, c->d)))
		goto out;
	struct ir_value *olds[2] = { old_w, old_b };
	drop_dead_consts(olds, 2);
	rc = 0;
	goto out;
nomem:
	rc = ir_diag_err(c->d, IR_ENOMEM, "out of memory");
out:
	ir_tensor_unref(wt);
	ir_tensor_unref(bt);
	free(wv);
	free(bv);
	free(nb);
	return rc;
}

/* ------------------------------------------------------------------------ */

static const char *const bn_param[5] = { "X", "scale", "B", "mean", "var" };

/*
 * Looks at one BatchNormalization. Returns 0 (rewritten or rejected: the
 * report says which) or an error code.
 */
static int try_bn(struct pass_ctx *c, struct ir_node *bn)
{
	char pn[64], why[256];
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
			pass_rejected(c, bn, "%s is not a constant", bn_param[i]);
			return 0;
		}
	const struct ir_tensor *w = pass_const_input(p, 1);
	if (!w) {
		pass_rejected(c, bn, "%s's weights are not a constant", pn);
		return 0;
	}
	if (!foldable(w->dtype)) {
		pass_rejected(c, bn, "%s's weights are %s, not a float type", pn, ir_dtype_name(w->dtype));
		return 0;
	}
	const struct ir_tensor *bias = NULL;
	if (p->n_inputs > 2 && p->inputs[2]) {
		bias = pass_const_input(p, 2);
		if (!bias) {
			pass_rejected(c, bn, "%s's bias is not a constant", pn);
			return 0;
		}
		if (bias->dtype != w->dtype) {
			pass_rejected(c, bn, "%s's bias is %s but its weights are %s", pn, ir_dtype_name(bias->dtype),
				      ir_dtype_name(w->dtype));
			return 0;
		}
	}
	struct layout L;
	if (weight_layout(p, w, &L, why, sizeof(why))) {
		pass_rejected(c, bn, "%s", why);
		return 0;
	}
	if (bias) {
		bool ok;
		if (L.kind == L_GEMM) {
			int64_t last = bias->rank >= 1 ? bias->dims[bias->rank - 1] : 1;
			ok = bias->rank <= 2 && bias->numel > 0 && (last == 1 || last == L.channels);
		} else {
			ok = bias->numel == (uint64_t)L.channels;
		}
		if (!ok) {
			char ds[96];
			pass_rejected(c, bn, "%s's bias has shape %s, not one value per output channel (%lld)", pn,
				      ir_dims_str(bias->rank, bias->dims, ds, sizeof(ds)), (long long)L.channels);
			return 0;
		}
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
	pass_rewrote(c, bn, "folded into '%s' (%s, %lld output channels): s = gamma / sqrt(var + eps), W' = W * s, b' = (b - mean) * s + beta; '%s' now computes '%s'",
		     pn, p->op_type, (long long)L.channels, pn, z->name);
	if ((rc = ir_node_set_output(p, 0, NULL, c->d)) || (rc = ir_node_set_output(bn, 0, NULL, c->d)) ||
	    (rc = ir_node_set_output(p, 0, z, c->d)) || (rc = ir_node_remove(bn, c->d)))
		goto out;
	ir_value_remove(x);
	drop_dead_consts(old + 1, 4);
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

static int run(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	for (struct ir_node *n = g->first, *next; n; n = next) {
		next = n->next;
		if (n->op != IR_OP_BatchNormalization)
			continue;
		int rc = try_bn(c, n);
		if (rc)
			return rc;
	}
	return 0;
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
		"ConvTranspose keeps its output channels on the second axis of W ([C_in, C_out/group, k...]): "
		"input channel i of group i / (C_in/group) feeds output channel group_index * C_out/group + j, so "
		"W'[i,j,...] = W[i,j,...] * s[that channel]. Gemm (Y = alpha*A*B + beta*C) is scaled along its "
		"output features: the columns of B, or its rows when transB=1; C' = s * (beta*C - mean) + beta_bn "
		"and beta becomes 1.\n\n"
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
