/*
 * patch_matmul.c - the patch-matmul pass: a patch embedding (a 2-D Conv
 * whose kernel is its stride, without padding) whose output is only turned
 * into tokens (Reshape to [N, M, OH*OW] then Transpose [0, 2, 1], or
 * Transpose [0, 2, 3, 1]) becomes the patches of the image (Reshape,
 * Transpose, Reshape) and one MatMul by the weights as a [C*kh*kw, M]
 * matrix, plus the bias: the product comes out in the tokens' layout, so
 * neither the conv's NCHW output nor the transpose back is made.
 */
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ints attribute `name` into out (at most max): its count, -1 when absent, -2 when not ints or too long */
static int ints_attr(const struct ir_node *n, const char *name, int64_t *out, int max)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a)
		return -1;
	if (a->type != IR_ATTR_INTS || a->n > (size_t)max)
		return -2;
	for (size_t k = 0; k < a->n; k++)
		out[k] = a->ints[k];
	return (int)a->n;
}

static bool all_are(const int64_t *v, int n, int64_t x)
{
	for (int i = 0; i < n; i++)
		if (v[i] != x)
			return false;
	return true;
}

/* The known static dim i of v's shape, or -1. */
static int64_t dim_of(const struct ir_value *v, int i)
{
	const struct ir_type *t = ir_value_type(v);
	if (!t || t->kind != IR_TYPE_TENSOR || t->rank <= i || t->dims[i].kind != IR_DIM_VALUE)
		return -1;
	return t->dims[i].value;
}

static int rank_of(const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	return t && t->kind == IR_TYPE_TENSOR ? t->rank : -1;
}

/* Whether dim i of a and dim j of b are known to be equal (one value, or one symbol). */
static bool same_dim(const struct ir_value *a, int i, const struct ir_value *b, int j)
{
	const struct ir_type *ta = ir_value_type(a), *tb = ir_value_type(b);
	if (!ta || !tb || ta->kind != IR_TYPE_TENSOR || tb->kind != IR_TYPE_TENSOR || ta->rank <= i || tb->rank <= j)
		return false;
	const struct ir_dim *x = &ta->dims[i], *y = &tb->dims[j];
	if (x->kind == IR_DIM_UNKNOWN || y->kind == IR_DIM_UNKNOWN)
		return false;
	return ir_dim_equal(x, y);
}

/* A new int64 initializer of the k values v. */
static struct ir_value *int64_init(struct pass_ctx *c, const char *base, const int64_t *v, int k)
{
	int64_t dims[1] = { k };
	struct ir_tensor *t = ir_tensor_new(IR_INT64, 1, dims, c->d);
	if (!t)
		return NULL;
	memcpy(ir_tensor_mutable(t), v, sizeof(int64_t) * (size_t)k);
	struct ir_value *x = pass_new_init(c->m->graph, base, t, c->d);
	ir_tensor_unref(t);
	return x;
}

/* W [M, K] (row-major, any element type) as Wt [K, M]. */
static struct ir_value *transposed_weight(struct pass_ctx *c, const struct ir_value *wv, const struct ir_tensor *w,
					  int64_t M, int64_t K)
{
	int64_t dims[2] = { K, M };
	struct ir_tensor *t = ir_tensor_new(w->dtype, 2, dims, c->d);
	if (!t)
		return NULL;
	const size_t es = (size_t)ir_dtype_bits(w->dtype) / 8;
	const char *src = ir_tensor_data(w);
	char *dst = ir_tensor_mutable(t);
	for (int64_t m = 0; m < M; m++)
		for (int64_t k = 0; k < K; k++)
			memcpy(dst + ((size_t)(k * M + m)) * es, src + ((size_t)(m * K + k)) * es, es);
	char base[300];
	snprintf(base, sizeof(base), "%s_patch_t", wv->name);
	struct ir_value *x = pass_new_init(c->m->graph, base, t, c->d);
	ir_tensor_unref(t);
	return x;
}

/*
 * Looks at one Conv. Returns 0 (rewritten, rejected or not a patch
 * embedding: the report says which) or an error code.
 */
static int try_conv(struct pass_ctx *c, struct ir_node *cv)
{
	char cn[256], why[300];
	pass_node_name(cv, cn, sizeof(cn));
	if (cv->n_inputs < 2 || !cv->inputs[0] || !cv->inputs[1] || cv->n_outputs != 1 || !cv->outputs[0])
		return 0;
	int64_t ks[8], st[8], pads[16], dil[8];
	int nk = ints_attr(cv, "kernel_shape", ks, 8), ns = ints_attr(cv, "strides", st, 8);
	int np = ints_attr(cv, "pads", pads, 16), nd = ints_attr(cv, "dilations", dil, 8);
	const struct ir_tensor *w = pass_const_input(cv, 1);
	/* a patch embedding: 2-D, kernel == stride, no padding, no dilation */
	const int64_t kh = w && w->rank == 4 ? w->dims[2] : nk == 2 ? ks[0] : -1;
	const int64_t kw = w && w->rank == 4 ? w->dims[3] : nk == 2 ? ks[1] : -1;
	if (ns != 2 || st[0] != kh || st[1] != kw || (nk >= 0 && (nk != 2 || ks[0] != kh || ks[1] != kw)) ||
	    (np >= 0 && (np != 4 || !all_are(pads, 4, 0))) || (nd >= 0 && (nd != 2 || !all_are(dil, 2, 1))) || np == -2 ||
	    nd == -2 || kh * kw < 2)
		return 0;
	const struct ir_attr *ap = ir_node_attr(cv, "auto_pad");
	if (ap && ap->type == IR_ATTR_STRING && ap->s.len && !(ap->s.len == 6 && !memcmp(ap->s.data, "NOTSET", 6)) &&
	    !(ap->s.len == 5 && !memcmp(ap->s.data, "VALID", 5)))
		return 0;

	if (!w) {
		pass_rejected(c, cv, "its weights are not a constant");
		return 0;
	}
	if (!ir_dtype_is_float(w->dtype)) {
		pass_rejected(c, cv, "its weights are %s, not a float type", ir_dtype_name(w->dtype));
		return 0;
	}
	if (ir_node_attr_int(cv, "group", 1) != 1) {
		pass_rejected(c, cv, "group=%lld: a grouped conv is not one matrix product",
			      (long long)ir_node_attr_int(cv, "group", 1));
		return 0;
	}
	const struct ir_tensor *bias = NULL;
	if (cv->n_inputs > 2 && cv->inputs[2]) {
		bias = pass_const_input(cv, 2);
		if (!bias) {
			pass_rejected(c, cv, "its bias is not a constant");
			return 0;
		}
	}
	struct ir_value *x = cv->inputs[0], *y = cv->outputs[0];
	const int64_t M = w->dims[0], C = w->dims[1], H = dim_of(x, 2), W = dim_of(x, 3);
	if (rank_of(x) != 4 || dim_of(x, 1) != C || H < 0 || W < 0) {
		pass_rejected(c, cv, "its input's channels, height and width are not known numbers");
		return 0;
	}
	if (H % kh || W % kw) {
		pass_rejected(c, cv, "the input's %lldx%lld is not a whole number of %lldx%lld patches (the conv drops "
			      "the rest)", (long long)H, (long long)W, (long long)kh, (long long)kw);
		return 0;
	}
	if (M <= 0 || C <= 0 || H == 0 || W == 0) {
		pass_rejected(c, cv, "an empty conv");
		return 0;
	}
	const int64_t OH = H / kh, OW = W / kw, K = C * kh * kw;

	/* what reads the output: the tokens' layout */
	if (y->is_output) {
		pass_rejected(c, cv, "its output '%s' is a graph output", y->name);
		return 0;
	}
	struct ir_node *r = pass_sole_reader(y, why, sizeof(why));
	if (!r) {
		pass_rejected(c, cv, "its output: %s", why);
		return 0;
	}
	struct ir_node *t = NULL, *view = NULL;
	int64_t perm[8];
	int out_rank = 0;
	if (r->op == IR_OP_Reshape && r->inputs[0] == y && r->n_outputs == 1 && r->outputs[0]) {
		struct ir_value *rv = r->outputs[0];
		if (rank_of(rv) != 3 || dim_of(rv, 1) != M || dim_of(rv, 2) != OH * OW || !same_dim(rv, 0, x, 0)) {
			pass_rejected(c, cv, "the Reshape after it does not make [N, %lld, %lld] of it", (long long)M,
				      (long long)(OH * OW));
			return 0;
		}
		if (rv->is_output) {
			pass_rejected(c, cv, "the Reshape's output '%s' is a graph output", rv->name);
			return 0;
		}
		t = pass_sole_reader(rv, why, sizeof(why));
		if (!t || t->op != IR_OP_Transpose || ints_attr(t, "perm", perm, 8) != 3 || perm[0] != 0 || perm[1] != 2 ||
		    perm[2] != 1) {
			pass_rejected(c, cv, "the Reshape to [N, %lld, %lld] is not read by one Transpose [0, 2, 1] only",
				      (long long)M, (long long)(OH * OW));
			return 0;
		}
		view = r;
		out_rank = 3;
	} else if (r->op == IR_OP_Transpose && ints_attr(r, "perm", perm, 8) == 4 && perm[0] == 0 && perm[1] == 2 &&
		   perm[2] == 3 && perm[3] == 1) {
		t = r;
		out_rank = 4;
	} else {
		pass_rejected(c, cv, "its output is read by %s, not made into tokens (Reshape to [N, M, OH*OW] then "
			      "Transpose [0, 2, 1], or Transpose [0, 2, 3, 1])", r->op_type);
		return 0;
	}
	struct ir_value *z = t->outputs[0];
	if (t->n_outputs != 1 || !z)
		return 0;

	/* the patches: [N, C, OH, kh, OW, kw] -> [N, OH, OW, C, kh, kw] -> [N, OH*OW, K] (or [N, OH, OW, K]) */
	const int64_t s1[6] = { 0, C, OH, kh, OW, kw }, p1[6] = { 0, 2, 4, 1, 3, 5 };
	const int64_t s3[3] = { 0, OH * OW, K }, s4[4] = { 0, OH, OW, K };
	char base[300];
	snprintf(base, sizeof(base), "%s_patch_shape", cn);
	struct ir_value *sh1 = int64_init(c, base, s1, 6);
	struct ir_value *sh2 = sh1 ? int64_init(c, base, out_rank == 3 ? s3 : s4, out_rank) : NULL;
	struct ir_value *wt = sh2 ? transposed_weight(c, cv->inputs[1], w, M, K) : NULL;
	if (!wt)
		return IR_ERR;
	struct ir_value *in[2] = { x, sh1 };
	struct ir_node *n1 = pass_emit(c, "Reshape", cv, in, 2, "patch_grid", t);
	if (!n1)
		return IR_ERR;
	in[0] = n1->outputs[0];
	struct ir_node *n2 = pass_emit(c, "Transpose", cv, in, 1, "patch_rows", t);
	if (!n2 || pass_set_ints_attr(n2, "perm", p1, 6, c->d))
		return IR_ERR;
	in[0] = n2->outputs[0], in[1] = sh2;
	struct ir_node *n3 = pass_emit(c, "Reshape", cv, in, 2, "patches", t);
	if (!n3)
		return IR_ERR;
	in[0] = n3->outputs[0], in[1] = wt;
	struct ir_node *last = pass_emit(c, "MatMul", cv, in, 2, "patch_mm", t);
	if (!last)
		return IR_ERR;
	if (bias) {
		in[0] = last->outputs[0], in[1] = cv->inputs[2];
		if (!(last = pass_emit(c, "Add", cv, in, 2, "patch_bias", t)))
			return IR_ERR;
	}
	/* the last new node takes over the tokens' value (its name is what the rest reads) */
	struct ir_value *tmp = last->outputs[0];
	int rc;
	if ((rc = ir_node_set_output(t, 0, NULL, c->d)) || (rc = ir_node_set_output(last, 0, NULL, c->d)))
		return rc;
	ir_value_remove(tmp);
	if ((rc = ir_node_set_output(last, 0, z, c->d)))
		return rc;
	struct ir_node *from[3] = { cv, view ? view : t, t };
	pass_set_from(last, from, view ? 3 : 2);
	pass_rewrote(c, cv, "%lldx%lld patches of %lld channels times a [%lld, %lld] matrix%s, straight into the "
		     "tokens' layout [N, %s%lld]: the conv's NCHW output and its Transpose back are gone",
		     (long long)kh, (long long)kw, (long long)C, (long long)K, (long long)M, bias ? " plus the bias" : "",
		     out_rank == 3 ? "" : "OH, OW, ", out_rank == 3 ? (long long)(OH * OW) : (long long)M);
	/* the old nodes, then what fed only them: the weights, the Reshape's shape (an initializer, or a
	 * Shape/Concat chain); Constant nodes go with pass_remove_nodes */
	struct ir_value *olds[2];
	int n_old = 0;
	if (cv->inputs[1]->init)
		olds[n_old++] = cv->inputs[1];
	struct ir_value *shv = view && view->n_inputs > 1 ? view->inputs[1] : NULL;
	if (shv && shv->init)
		olds[n_old++] = shv;
	struct ir_node *shp = shv ? pass_producer(shv) : NULL;
	const int shp_id = shp && shp->op != IR_OP_Constant ? shp->id : -1;
	struct ir_node *dead[3];
	int n_dead = 0;
	dead[n_dead++] = t;
	if (view)
		dead[n_dead++] = view;
	dead[n_dead++] = cv;
	if ((rc = pass_remove_nodes(c, dead, n_dead)))
		return rc;
	pass_drop_dead_consts(olds, n_old);
	struct ir_node *sn = shp_id >= 0 ? ir_node_by_id(c->m->graph, shp_id) : NULL;
	if (sn && pass_node_dead(sn))
		pass_remove_dead_from(c->m->graph, sn);
	c->m->infer_current = false;
	return 0;
}

static bool is_conv(const struct ir_node *n)
{
	return n->op == IR_OP_Conv;
}

static int run(struct pass_ctx *c)
{
	int rc = pass_infer(c);
	if (rc)
		return rc;
	/* the candidates first: a rewrite removes nodes */
	return pass_each_node(c, is_conv, try_conv);
}

const struct pass pass_patch_matmul = {
	.name = "patch-matmul",
	.summary = "turn a patch-embedding Conv (kernel = stride) read as tokens into the image's patches and one MatMul",
	.explain =
		"Vision transformers (ViT, DeiT, Swin, ConvNeXt's stem) cut the image into patches with a Conv whose "
		"kernel equals its stride and that has no padding: the windows do not overlap, so every output pixel "
		"is one patch of C x kh x kw input values times the weights, a matrix product. The model then turns "
		"the conv's NCHW output into tokens: Reshape to [N, M, OH*OW] and Transpose [0, 2, 1] (or, for "
		"channels-last stages, Transpose [0, 2, 3, 1]). Computed as written, the conv writes its output "
		"channel-major and the Transpose reads it back and writes it token-major.\n\n"
		"This pass writes the product in the tokens' layout directly. The image is cut into patches by "
		"moves alone: Reshape X [N, C, H, W] to [N, C, OH, kh, OW, kw], Transpose [0, 2, 4, 1, 3, 5] to "
		"[N, OH, OW, C, kh, kw], Reshape to [N, OH*OW, C*kh*kw]; then MatMul by the weights as a "
		"[C*kh*kw, M] matrix (W reshaped to [M, C*kh*kw] and transposed, once, here) and Add the bias. "
		"The result is the Transpose's output, under its name. Each output is the same sum of the same "
		"products as the conv's, in an order a backend may choose, so it agrees up to rounding; "
		"fuse-matmul-add then makes the MatMul and Add one FusedGemm.\n\n"
		"It does not apply when: the weights or bias are not constants or not a float type; group is not 1; "
		"the input's channels, height or width are not known numbers, or the height or width is not a whole "
		"number of patches (the conv would drop the rest); the conv's output is a graph output or is read "
		"by anything but the Reshape to [N, M, OH*OW] followed by Transpose [0, 2, 1] and nothing else, or "
		"by one Transpose [0, 2, 3, 1]. Convs whose kernel is not their stride, or that pad or dilate, are "
		"not patch embeddings and are not listed.",
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
