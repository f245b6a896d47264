/*
 * fuse_matmul_add.c - the fuse-matmul-add pass: MatMul by a constant 2-D
 * weight followed by an Add of a constant bias becomes one Gemm.
 *
 * pass_drop_dead_consts() is a static copy of the one in fuse_conv_bn.c.
 */
#include "passes/pass.h"
#include "passes/qweight.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Element types Gemm computes in (and that the bias copy keeps exactly). */
static bool gemm_type(int dtype)
{
	return dtype == IR_FLOAT || dtype == IR_DOUBLE || dtype == IR_FLOAT16 || dtype == IR_BFLOAT16;
}

/* A new int64 1-D initializer holding v[0..n). */
static struct ir_value *new_shape(struct ir_graph *g, const char *base, const int64_t *v, int n, struct ir_diag *d)
{
	int64_t dims[1] = { n };
	struct ir_tensor *t = ir_tensor_new(IR_INT64, 1, dims, d);
	if (!t)
		return NULL;
	memcpy(ir_tensor_mutable(t), v, sizeof(int64_t) * (size_t)n);
	struct ir_value *r = pass_new_init(g, base, t, d);
	ir_tensor_unref(t);
	return r;
}

/* A new node before `before` with its inputs and one output connected. */
static struct ir_node *new_node(struct ir_graph *g, const char *op, const char *name, struct ir_value **in, int n_in,
				struct ir_value *out, struct ir_node *before, struct ir_diag *d)
{
	struct ir_node *n = ir_node_new(g, op, NULL, name, n_in, 1, before);
	if (!n) {
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	for (int i = 0; i < n_in; i++)
		if (ir_node_set_input(n, i, in[i])) {
			ir_diag_err(d, IR_ENOMEM, "out of memory");
			return NULL;
		}
	if (ir_node_set_output(n, 0, out, d))
		return NULL;
	return n;
}

/* Looks at one MatMul. Returns 0 (the report says what happened, if it was a match) or an error code. */
static int try_matmul(struct pass_ctx *c, struct ir_node *mm)
{
	struct ir_graph *g = mm->graph;
	char mn[256], ds[128], why[512];
	if (mm->n_inputs != 2 || mm->n_outputs != 1 || !mm->outputs[0] || !mm->inputs[0] || !mm->inputs[1])
		return 0;
	struct ir_value *a = mm->inputs[0], *y = mm->outputs[0];

	/* the Add: the pattern starts when the product feeds one */
	struct ir_node *ad = pass_only_reader(y);
	if (!ad) {
		bool to_add = false;
		for (size_t i = 0; i < y->n_uses; i++)
			to_add = to_add || (y->uses[i].slot >= 0 && y->uses[i].node->op == IR_OP_Add);
		if (to_add && y->is_output)
			pass_rejected(c, mm, "its output '%s' is also a graph output: it must stay without the bias", y->name);
		else if (to_add)
			pass_rejected(c, mm, "its output has %d consumers: the others need it without the bias",
				      pass_n_readers(y));
		return 0;
	}
	if (ad->op != IR_OP_Add)
		return 0;
	if (ad->n_inputs != 2 || ad->n_outputs != 1 || !ad->outputs[0] || !ad->inputs[0] || !ad->inputs[1])
		return 0;
	int slot = ad->inputs[0] == y ? 0 : 1;
	struct ir_value *bias_v = ad->inputs[1 - slot];

	const struct ir_tensor *b = pass_const_input(mm, 1);
	if (!b) {
		/* Gemm's weight would have to be float: a quantized one stays as it is */
		if (qw_value_quantized(mm->inputs[1], why, sizeof(why)))
			pass_rejected(c, mm, "B: %s", why);
		else
			pass_rejected(c, mm, "B ('%s') is not a constant", mm->inputs[1]->name);
		return 0;
	}
	if (b->rank != 2) {
		pass_rejected(c, mm, "B has shape %s: Gemm takes a 2-D B", ir_dims_str(b->rank, b->dims, ds, sizeof(ds)));
		return 0;
	}
	if (!gemm_type(b->dtype)) {
		pass_rejected(c, mm, "B is %s: only float types are fused into Gemm", ir_dtype_name(b->dtype));
		return 0;
	}
	const struct ir_tensor *bias = pass_const_input(ad, 1 - slot);
	if (!bias) {
		if (qw_value_quantized(bias_v, why, sizeof(why)))
			pass_rejected(c, mm, "the bias: %s", why);
		else
			pass_rejected(c, mm, "the Add's other operand '%s' is not a constant", bias_v->name);
		return 0;
	}
	if (bias->dtype != b->dtype) {
		pass_rejected(c, mm, "the bias is %s but B is %s", ir_dtype_name(bias->dtype), ir_dtype_name(b->dtype));
		return 0;
	}
	int64_t K = b->dims[0], N = b->dims[1];
	ir_dims_str(bias->rank, bias->dims, ds, sizeof(ds));
	bool per_n = bias->numel > 0;
	for (int i = 0; i < bias->rank && per_n; i++)
		per_n = bias->dims[i] == 1 || (i == bias->rank - 1 && bias->dims[i] == N);
	if (!per_n) {
		pass_rejected(c, mm, "the bias has shape %s: it is not one value per output feature (%lld) or a scalar", ds,
			      (long long)N);
		return 0;
	}

	/* A: Gemm multiplies matrices */
	const struct ir_type *at = ir_value_type(a);
	int rank = at->kind == IR_TYPE_TENSOR ? at->rank : -1;
	if (rank < 0) {
		pass_rejected(c, mm, "the rank of A ('%s') is unknown: Gemm takes 2-D inputs", a->name);
		return 0;
	}
	if (bias->rank > rank) {
		pass_rejected(c, mm, "the bias has shape %s, more axes than the product's %d: the Add broadcasts it up", ds,
			      rank);
		return 0;
	}
	bool reshape = pass_opt_bool(c, "reshape");
	if (rank < 2 || (rank > 2 && !reshape)) {
		pass_rejected(c, mm, "A has rank %d: Gemm takes 2-D inputs%s", rank,
			      rank > 2 ? " (reshape=off; reshape=on wraps it in Reshapes to 2-D and back)" : "");
		return 0;
	}
	const struct ir_dim *last = &at->dims[rank - 1];
	if (last->kind == IR_DIM_VALUE && last->value != K) {
		pass_rejected(c, mm, "A's last dim is %lld but B has %lld rows", (long long)last->value, (long long)K);
		return 0;
	}
	int64_t out_shape[IR_MAX_RANK];
	bool dyn_back = false;
	if (rank > 2) {
		/* back to [d0, ..., d(r-2), N]: Reshape can work out one unknown dim (-1), not two */
		int unknown = 0;
		for (int i = 0; i < rank - 1; i++) {
			const struct ir_dim *dm = &at->dims[i];
			if (dm->kind != IR_DIM_VALUE) {
				unknown++;
				out_shape[i] = -1;
			} else if (dm->value == 0) {
				pass_rejected(c, mm, "A has an empty axis %d: the Reshapes could not tell the shape back", i);
				return 0;
			} else {
				out_shape[i] = dm->value;
			}
		}
		/* two or more unknown: the shape back is computed from A's at run time, Shape(A)[:-1] ++ [N]
		 * (a GPU plan folds it, the dims being bound there); Slice with inputs needs opset 10 */
		if (unknown > 1 && ir_model_opset(c->m, "") < 10) {
			char ts[160];
			pass_rejected(c, mm, "A has type %s: with %d leading dims unknown the shape back is computed with "
				      "Slice, which takes its bounds as inputs only from opset 10",
				      ir_type_str(at, ts, sizeof(ts)), unknown);
			return 0;
		}
		dyn_back = unknown > 1;
		/* a projection into heads (read by a Reshape): fuse-attention and fuse-qkv follow the
		 * MatMul through that Reshape, not through a shape computed at run time */
		struct ir_node *rd = NULL;
		for (size_t u = 0; dyn_back && u < ad->outputs[0]->n_uses && !rd; u++)
			if (ad->outputs[0]->uses[u].node->op == IR_OP_Reshape)
				rd = ad->outputs[0]->uses[u].node;
		if (rd) {
			char ts[160], rn[256];
			pass_rejected(c, mm, "A has type %s: with %d leading dims unknown the shape back would be computed "
				      "at run time, and the Reshape '%s' after it (into attention heads?) is what "
				      "fuse-attention and fuse-qkv follow", ir_type_str(at, ts, sizeof(ts)), unknown,
				      pass_node_name(rd, rn, sizeof(rn)));
			return 0;
		}
		out_shape[rank - 1] = N;
	}

	/* C: the bias itself when Gemm takes its shape ([N], [1,N], scalar), else a [N] (or [1]) copy */
	struct ir_value *cv = bias_v;
	if (bias->rank > 2) {
		int64_t cd[1] = { (int64_t)bias->numel };
		double *vals = pass_tensor_f64(bias);
		if (!vals)
			return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		struct ir_tensor *ct = pass_tensor_from_f64(bias->dtype, 1, cd, vals, c->d);
		free(vals);
		if (!ct)
			return IR_ERR;
		char base[1024];
		snprintf(base, sizeof(base), "%s_1d", bias_v->name);
		cv = pass_new_init(g, base, ct, c->d);
		ir_tensor_unref(ct);
		if (!cv)
			return IR_ERR;
	}

	/* rewrite: the Add's output value becomes the Gemm's (or the last Reshape's) */
	pass_node_name(mm, mn, sizeof(mn));
	char an[256], shape_s[160] = "";
	if (rank > 2 && !dyn_back)
		ir_dims_str(rank, out_shape, shape_s, sizeof(shape_s));
	else if (rank > 2)
		snprintf(shape_s, sizeof(shape_s), "A's leading dims + [%lld] (Shape, Slice, Concat)", (long long)N);
	char *name = strdup(mm->name ? mm->name : "");   /* the Gemm takes the MatMul's name */
	if (!name)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	const char *stem = *name ? name : mn;
	struct ir_value *z = ad->outputs[0], *bv = mm->inputs[1];
	if (rank == 2)
		pass_rewrote(c, mm, "fused with '%s' into Gemm(A, B, C): [M,%lld] x [%lld,%lld] + bias %s",
			     pass_node_name(ad, an, sizeof(an)), (long long)K, (long long)K, (long long)N, ds);
	else
		pass_rewrote(c, mm, "fused with '%s' into Reshape(A, [-1,%lld]), Gemm(., B, C), Reshape back to %s; bias %s",
			     pass_node_name(ad, an, sizeof(an)), (long long)K, shape_s, ds);
	struct ir_node *before = ad->next;
	int rc;
	if ((rc = ir_node_set_output(ad, 0, NULL, c->d)) || (rc = ir_node_remove(ad, c->d)) ||
	    (rc = ir_node_remove(mm, c->d)))
		goto done;

	rc = IR_ERR;
	if (rank == 2) {
		struct ir_value *in[3] = { a, bv, cv };
		if (!new_node(g, "Gemm", name, in, 3, z, before, c->d))
			goto done;
	} else {
		char base[1024];
		int64_t s_in[2] = { -1, K };
		snprintf(base, sizeof(base), "%s.shape_2d", stem);
		struct ir_value *s1 = new_shape(g, base, s_in, 2, c->d);
		snprintf(base, sizeof(base), "%s.shape_out", stem);
		struct ir_value *s2 = NULL;
		if (s1 && !dyn_back) {
			s2 = new_shape(g, base, out_shape, rank, c->d);
		} else if (s1) {
			/* Shape(A) -> Slice [0, rank-1) -> Concat with [N] */
			int64_t zero = 0, lead = rank - 1, nn = N;
			char b2[1100];
			snprintf(b2, sizeof(b2), "%s.lead_start", stem);
			struct ir_value *st = new_shape(g, b2, &zero, 1, c->d);
			snprintf(b2, sizeof(b2), "%s.lead_end", stem);
			struct ir_value *en = st ? new_shape(g, b2, &lead, 1, c->d) : NULL;
			snprintf(b2, sizeof(b2), "%s.n", stem);
			struct ir_value *nv = en ? new_shape(g, b2, &nn, 1, c->d) : NULL;
			snprintf(b2, sizeof(b2), "%s.shape_a", stem);
			struct ir_value *sa = nv ? pass_new_value(g, b2, c->d) : NULL;
			snprintf(b2, sizeof(b2), "%s.lead", stem);
			struct ir_value *ld = sa ? pass_new_value(g, b2, c->d) : NULL;
			s2 = ld ? pass_new_value(g, base, c->d) : NULL;
			struct ir_value *i1[1] = { a }, *i2[4] = { sa, st, en, st }, *i3[2] = { ld, nv };
			struct ir_node *cn = NULL;
			snprintf(b2, sizeof(b2), "%s_shape", stem);
			if (!s2 || !new_node(g, "Shape", b2, i1, 1, sa, before, c->d))
				goto done;
			snprintf(b2, sizeof(b2), "%s_lead", stem);
			if (!new_node(g, "Slice", b2, i2, 4, ld, before, c->d))
				goto done;
			snprintf(b2, sizeof(b2), "%s_shape_out", stem);
			if (!(cn = new_node(g, "Concat", b2, i3, 2, s2, before, c->d)))
				goto done;
			if (pass_set_int_attr(cn, "axis", 0, c->d))
				goto done;
		}
		snprintf(base, sizeof(base), "%s_2d", a->name);
		struct ir_value *a2 = s2 ? pass_new_value(g, base, c->d) : NULL;
		snprintf(base, sizeof(base), "%s_2d", z->name);
		struct ir_value *g2 = a2 ? pass_new_value(g, base, c->d) : NULL;
		if (!g2)
			goto done;
		struct ir_value *in1[2] = { a, s1 }, *in2[3] = { a2, bv, cv }, *in3[2] = { g2, s2 };
		snprintf(base, sizeof(base), "%s_reshape_in", stem);
		if (!new_node(g, "Reshape", base, in1, 2, a2, before, c->d) ||
		    !new_node(g, "Gemm", name, in2, 3, g2, before, c->d))
			goto done;
		snprintf(base, sizeof(base), "%s_reshape_out", stem);
		if (!new_node(g, "Reshape", base, in3, 2, z, before, c->d))
			goto done;
	}
	if (cv != bias_v)
		pass_drop_dead_consts(&bias_v, 1);
	rc = 0;
done:
	free(name);
	return rc;
}

static bool is_matmul(const struct ir_node *n)
{
	return n->op == IR_OP_MatMul;
}

static int run(struct pass_ctx *c)
{
	pass_infer(c);   /* A's rank and dims */
	/* the candidates first: a rewrite removes nodes */
	return pass_each_node(c, is_matmul, try_matmul);
}

static const struct pass_option options[] = {
	{ "reshape", "bool", "on", "when A has rank > 2, wrap the Gemm in Reshapes to [-1,K] and back (needs A's shape)" },
	{ NULL, NULL, NULL, NULL },
};

const struct pass pass_fuse_matmul_add = {
	.name = "fuse-matmul-add",
	.summary = "fuse MatMul by a constant 2-D weight and an Add of a constant bias into one Gemm",
	.explain =
		"A linear layer exported as two nodes, Y = MatMul(A, B) then Z = Add(Y, bias), is what Gemm "
		"computes in one: Z = Gemm(A, B, C) = A * B + C, with alpha = beta = 1 and C = bias. One node "
		"instead of two means the product is not written out and read back just to add the bias: the "
		"bias is added while each output element is still in registers.\n\n"
		"B must be a constant matrix [K,N], and the bias a constant that is the same for every row: a "
		"scalar, [N], [1,N] (used as C directly), or [1,...,1,N] (copied to [N]). Gemm takes 2-D inputs, "
		"so A must have rank 2. When A has rank 3 or more (a sequence of tokens, [batch,seq,K]), A is "
		"reshaped to [-1,K], multiplied by the Gemm, and the result reshaped back to [d0,...,N] (option "
		"reshape, on by default; reshape=off rejects such MatMuls instead). The Reshapes cost nothing on "
		"the GPU, where a Reshape shares its input's memory, and the bias is added in the GEMM's "
		"epilogue. Reshape can work out one unknown dim (-1), so at most one leading dim of A may be "
		"unknown.\n\n"
		"It does not apply when: B or the bias is not a constant; B is not 2-D or not a float type; the "
		"bias varies along the rows (for example [M,N]) or has more axes than the product; the product is "
		"read by another node or is a graph output (they need it without the bias); A's rank is not known "
		"(shape inference could not tell it). The Add's output keeps its name: the Gemm (or the last "
		"Reshape) produces it.",
	.options = options,
	.level = PASS_LEVEL_EXTENDED,
	.run = run,
};
