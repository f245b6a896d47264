/*
 * fold.c - folding a per-output-channel affine map (y * s + t) into the
 * weights and bias of Conv, ConvTranspose or Gemm: what fuse-conv-bn and
 * fuse-conv-add share (declared in fold.h).
 */
#include "passes/fold.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Element types the fold computes in (double) and rounds back to. */
bool fold_dtype_ok(int dtype)
{
	return dtype == IR_FLOAT || dtype == IR_DOUBLE || dtype == IR_FLOAT16 || dtype == IR_BFLOAT16;
}

/*
 * Fills L for node p with weights w. Returns NULL, or why the channels
 * cannot be told (a sentence for the report).
 */
const char *fold_weight_layout(const struct ir_node *p, const struct ir_tensor *w, struct layout *L,
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
		L->inner *= w->dims[1];   /* W is [C_out, C_in/group, k...]: a channel is one slice of axis 0 */
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
int64_t fold_channel_of(const struct layout *L, uint64_t i)
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
int fold_set_attr_float(struct ir_node *n, const char *name, float f, struct ir_diag *d)
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
void fold_base_name(char *buf, size_t size, const char *old, const char *suffix)
{
	snprintf(buf, size, "%s%s", old, suffix);
}

/*
 * Makes node p compute y' = y * mul[c] + add[c] per output channel c by
 * giving it new weights (input 1) and bias (input 2) as new initializers;
 * tensors are shared between stages, so none is changed in place. The
 * weights stay as they are when every mul is 1, and no bias is added when
 * there is none and every add is 0. bias_t is the current bias tensor (NULL:
 * none). Old weights and bias go when nothing reads them any more. Returns
 * 0 or an error code.
 */
int fold_affine(struct pass_ctx *c, struct ir_node *p, const struct layout *L, const struct ir_tensor *w,
		       const struct ir_tensor *bias_t, const double *mul, const double *add, const char *suffix)
{
	struct ir_graph *g = p->graph;
	int rc = IR_ENOMEM;
	double *wv = NULL, *bv = NULL, *nb = NULL;
	struct ir_tensor *wt = NULL, *bt = NULL;
	char base[1024], pn[256];
	struct ir_value *old_w = p->inputs[1], *old_b = p->n_inputs > 2 ? p->inputs[2] : NULL;
	bool scale = false, shift = bias_t != NULL;
	for (int64_t k = 0; k < L->channels; k++) {
		scale = scale || mul[k] != 1;
		shift = shift || add[k] != 0;
	}

	if (scale) {
		wv = pass_tensor_f64(w);
		if (!wv)
			goto nomem;
		for (uint64_t i = 0; i < w->numel; i++)
			wv[i] *= mul[fold_channel_of(L, i)];
		wt = pass_tensor_from_f64(w->dtype, w->rank, w->dims, wv, c->d);
		if (!wt) {
			rc = IR_ERR;
			goto out;
		}
	}

	int64_t bdims[2];
	int brank = 1;
	if (shift && L->kind == L_GEMM) {
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
	} else if (shift) {
		bdims[0] = L->channels;
		if (bias_t && !(bv = pass_tensor_f64(bias_t)))
			goto nomem;
		nb = malloc(sizeof(double) * (size_t)L->channels);
		if (!nb)
			goto nomem;
		for (int64_t k = 0; k < L->channels; k++)
			nb[k] = (bv ? bv[k] : 0) * mul[k] + add[k];
	}
	if (shift && !(bt = pass_tensor_from_f64(w->dtype, brank, bdims, nb, c->d))) {
		rc = IR_ERR;
		goto out;
	}

	struct ir_value *nw = NULL, *nbv = NULL;
	if (wt) {
		fold_base_name(base, sizeof(base), old_w->name, suffix);
		if (!(nw = pass_new_init(g, base, wt, c->d))) {
			rc = IR_ERR;
			goto out;
		}
	}
	if (bt) {
		if (old_b)
			fold_base_name(base, sizeof(base), old_b->name, suffix);
		else
			snprintf(base, sizeof(base), "%s.bias%s", pass_node_name(p, pn, sizeof(pn)), suffix);
		if (!(nbv = pass_new_init(g, base, bt, c->d))) {
			rc = IR_ERR;
			goto out;
		}
	}
	if (nw && ir_node_set_input(p, 1, nw))
		goto nomem;
	if (nbv && (p->n_inputs > 2 ? ir_node_set_input(p, 2, nbv) : ir_node_add_input(p, nbv)))
		goto nomem;
	if (nbv && L->kind == L_GEMM && (rc = fold_set_attr_float(p, "beta", 1.0f, c->d)))
		goto out;
	struct ir_value *olds[2] = { old_w, old_b };
	pass_drop_dead_consts(olds, 2);
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

const char *fold_bias_layout(const struct ir_node *p, const struct ir_tensor *w, const char *pn,
			     const struct ir_tensor **bias_out, struct layout *L, char *why, size_t size)
{
	const struct ir_tensor *bias = NULL;
	*bias_out = NULL;
	if (p->n_inputs > 2 && p->inputs[2]) {
		bias = pass_const_input(p, 2);
		if (!bias) {
			snprintf(why, size, "%s's bias is not a constant", pn);
			return why;
		}
		if (bias->dtype != w->dtype) {
			snprintf(why, size, "%s's bias is %s but its weights are %s", pn, ir_dtype_name(bias->dtype),
				 ir_dtype_name(w->dtype));
			return why;
		}
	}
	if (fold_weight_layout(p, w, L, why, size))
		return why;
	if (bias) {
		bool ok;
		if (L->kind == L_GEMM) {
			int64_t last = bias->rank >= 1 ? bias->dims[bias->rank - 1] : 1;
			ok = bias->rank <= 2 && bias->numel > 0 && (last == 1 || last == L->channels);
		} else {
			ok = bias->numel == (uint64_t)L->channels;
		}
		if (!ok) {
			char ds[96];
			snprintf(why, size, "%s's bias has shape %s, not one value per output channel (%lld)", pn,
				 ir_dims_str(bias->rank, bias->dims, ds, sizeof(ds)), (long long)L->channels);
			return why;
		}
	}
	*bias_out = bias;
	return NULL;
}
