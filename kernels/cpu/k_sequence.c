/*
 * k_sequence.c - CPU kernels: sequences of tensors and optionals
 * (SequenceEmpty/Construct/Insert/Erase/At/Length, SplitToSequence,
 * ConcatFromSequence, SequenceMap, Optional, OptionalHasElement,
 * OptionalGetElement).
 */
#include "cpu.h"

#include <stdlib.h>

static const struct kern_value *seq_in(struct cpu_kctx *k, int i)
{
	if (i >= k->n_in || k->in[i].kind != KV_SEQ) {
		kerr(k, "input %d must be a sequence", i);
		return NULL;
	}
	return &k->in[i];
}

/* A copy of the items of s (new references), with room for `extra` more. */
static struct ir_tensor **items_copy(struct cpu_kctx *k, const struct kern_value *s, int extra)
{
	struct ir_tensor **a = malloc(sizeof(*a) * (size_t)(s->n_items + extra + 1));
	if (!a) {
		ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	for (int i = 0; i < s->n_items; i++) {
		a[i] = s->items[i];
		ir_tensor_ref(a[i]);
	}
	return a;
}

static void items_free(struct ir_tensor **a, int n)
{
	for (int i = 0; i < n; i++)
		ir_tensor_unref(a[i]);
	free(a);
}

/* A position input (scalar int) normalized to [0, n] (insert) or [0, n-1]. */
static int position(struct cpu_kctx *k, int i, int n, bool insert, int *out)
{
	const struct ir_tensor *p = kin(k, i);
	if (!p) {
		*out = insert ? n : n - 1;
		if (*out < 0)
			return kerr(k, "the sequence is empty");
		return 0;
	}
	if (p->numel != 1 || !ir_dtype_is_int(p->dtype))
		return kerr(k, "position must be one integer");
	int64_t v = kldi(p->dtype, kdata(p), 0);
	int64_t hi = insert ? n : n - 1;
	if (v < -(int64_t)n || v > hi)
		return kerr(k, "position %lld is out of range for a sequence of %d", (long long)v, n);
	*out = (int)(v < 0 ? v + n : v);
	return 0;
}

static int k_seq_empty(struct cpu_kctx *k)
{
	return kout_seq(k, 0, (int)kattr_i(k, "dtype", IR_FLOAT), NULL, 0);
}

static int k_seq_construct(struct cpu_kctx *k)
{
	struct ir_tensor **a = malloc(sizeof(*a) * (size_t)(k->n_in + 1));
	if (!a)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	for (int i = 0; i < k->n_in; i++) {
		const struct ir_tensor *t = kin_req(k, i);
		if (!t || (i && t->dtype != a[0]->dtype)) {
			items_free(a, i);
			return t ? kerr(k, "input %d is %s, the others %s", i, ir_dtype_name(t->dtype), ir_dtype_name(a[0]->dtype))
				 : IR_ERR;
		}
		a[i] = (struct ir_tensor *)t;
		ir_tensor_ref(a[i]);
	}
	int rc = kout_seq(k, 0, k->n_in ? a[0]->dtype : 0, a, k->n_in);
	free(a);
	return rc;
}

static int k_seq_insert(struct cpu_kctx *k)
{
	const struct kern_value *s = seq_in(k, 0);
	const struct ir_tensor *t = kin_req(k, 1);
	int pos;
	if (!s || !t || position(k, 2, s->n_items, true, &pos))
		return IR_ERR;
	if (s->elem && t->dtype != s->elem)
		return kerr(k, "cannot insert a %s tensor into a sequence of %s", ir_dtype_name(t->dtype), ir_dtype_name(s->elem));
	struct ir_tensor **a = items_copy(k, s, 1);
	if (!a)
		return IR_ENOMEM;
	memmove(a + pos + 1, a + pos, sizeof(*a) * (size_t)(s->n_items - pos));
	a[pos] = (struct ir_tensor *)t;
	ir_tensor_ref(a[pos]);
	int rc = kout_seq(k, 0, t->dtype, a, s->n_items + 1);
	free(a);
	return rc;
}

static int k_seq_erase(struct cpu_kctx *k)
{
	const struct kern_value *s = seq_in(k, 0);
	int pos;
	if (!s || position(k, 1, s->n_items, false, &pos))
		return IR_ERR;
	struct ir_tensor **a = items_copy(k, s, 0);
	if (!a)
		return IR_ENOMEM;
	ir_tensor_unref(a[pos]);
	memmove(a + pos, a + pos + 1, sizeof(*a) * (size_t)(s->n_items - pos - 1));
	int rc = kout_seq(k, 0, s->elem, a, s->n_items - 1);
	free(a);
	return rc;
}

static int k_seq_at(struct cpu_kctx *k)
{
	const struct kern_value *s = seq_in(k, 0);
	int pos;
	if (!s)
		return IR_ERR;
	if (!kin(k, 1))
		return kerr(k, "position is missing");
	if (position(k, 1, s->n_items, false, &pos))
		return IR_ERR;
	const struct ir_tensor *t = s->items[pos];
	return kout_share(k, 0, t, t->rank, t->dims);
}

static int k_seq_length(struct cpu_kctx *k)
{
	const struct kern_value *s = seq_in(k, 0);
	if (!s)
		return IR_ERR;
	struct ir_tensor *o = kout(k, 0, IR_INT64, 0, NULL);
	if (!o)
		return IR_ERR;
	*(int64_t *)kwdata(o) = s->n_items;
	return 0;
}

static int k_split_to_seq(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int axis;
	if (x->rank < 1)
		return kerr(k, "the input must have rank 1 or more");
	if (kaxis(k, kattr_i(k, "axis", 0), x->rank, &axis))
		return IR_ERR;
	int64_t total = x->dims[axis];
	const struct ir_tensor *sp = kin(k, 1);
	int64_t *sizes = NULL;
	int64_t n = 0;
	bool keep = true;
	if (!sp) {
		keep = kattr_i(k, "keepdims", 1) != 0;
		n = total;
		if (!(sizes = malloc(sizeof(*sizes) * (size_t)(n ? n : 1))))
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		for (int64_t i = 0; i < n; i++)
			sizes[i] = 1;
	} else if (sp->rank == 0) {
		int64_t c = kldi(sp->dtype, kdata(sp), 0);
		if (c <= 0)
			return kerr(k, "split size %lld must be positive", (long long)c);
		n = (total + c - 1) / c;
		if (!(sizes = malloc(sizeof(*sizes) * (size_t)(n ? n : 1))))
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		for (int64_t i = 0; i < n; i++)
			sizes[i] = i == n - 1 ? total - c * (n - 1) : c;
	} else {
		n = (int64_t)sp->numel;
		if (!(sizes = malloc(sizeof(*sizes) * (size_t)(n ? n : 1))))
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		int64_t sum = 0;
		for (int64_t i = 0; i < n; i++) {
			sizes[i] = kldi(sp->dtype, kdata(sp), (uint64_t)i);
			if (sizes[i] < 0) {
				free(sizes);
				return kerr(k, "split sizes must not be negative");
			}
			sum += sizes[i];
		}
		if (sum != total) {
			free(sizes);
			return kerr(k, "split sizes add up to %lld, the axis has %lld", (long long)sum, (long long)total);
		}
	}
	if (n > INT32_MAX / 2) {
		free(sizes);
		return kerr(k, "too many pieces");
	}
	struct ir_tensor **a = malloc(sizeof(*a) * (size_t)(n ? n : 1));
	int rc = 0;
	if (!a) {
		free(sizes);
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	}
	int64_t at = 0;
	for (int64_t i = 0; i < n; i++) {
		if (!(a[i] = ktake_rows(k, x, axis, at, sizes[i], keep))) {
			items_free(a, (int)i);
			free(sizes);
			return IR_ERR;
		}
		at += sizes[i];
	}
	rc = kout_seq(k, 0, x->dtype, a, (int)n);
	free(a);
	free(sizes);
	return rc;
}

static int k_concat_from_seq(struct cpu_kctx *k)
{
	const struct kern_value *s = seq_in(k, 0);
	if (!s)
		return IR_ERR;
	if (!s->n_items)
		return kerr(k, "the sequence is empty");
	bool new_axis = kattr_i(k, "new_axis", 0) != 0;
	const struct ir_tensor *t0 = s->items[0];
	int out_rank = t0->rank + (new_axis ? 1 : 0);
	int axis;
	if (kaxis(k, kattr_i(k, "axis", 0), out_rank, &axis))
		return IR_ERR;
	if (!new_axis && t0->rank == 0)
		return kerr(k, "cannot concatenate scalars without new_axis");
	int es = kelem_bytes(t0->dtype);
	if (!es)
		return kerr(k, "%s tensors are not supported here", ir_dtype_name(t0->dtype));
	int64_t dims[IR_MAX_RANK], total = 0;
	for (int i = 0; i < s->n_items; i++) {
		const struct ir_tensor *t = s->items[i];
		if (t->rank != t0->rank || t->dtype != t0->dtype)
			return kerr(k, "item %d is %s %s, item 0 is %s %s", i, ir_dtype_name(t->dtype), kshape(t),
				    ir_dtype_name(t0->dtype), kshape(t0));
		for (int j = 0; j < t->rank; j++)
			if ((new_axis || j != axis) && t->dims[j] != t0->dims[j])
				return kerr(k, "item %d has shape %s, item 0 %s", i, kshape(t), kshape(t0));
		total += new_axis ? 1 : t->dims[axis];
	}
	if (!new_axis)
		for (int j = 0; j < out_rank; j++)
			dims[j] = j == axis ? total : t0->dims[j];
	else
		for (int j = 0, q = 0; j < out_rank; j++)
			dims[j] = j == axis ? total : t0->dims[q++];
	struct ir_tensor *o = kout(k, 0, t0->dtype, out_rank, dims);
	if (!o)
		return IR_ERR;
	int64_t outer = 1, inner = 1;
	for (int j = 0; j < axis; j++)
		outer *= dims[j];
	for (int j = axis + 1; j < out_rank; j++)
		inner *= dims[j];
	int64_t at = 0;
	for (int i = 0; i < s->n_items && o->numel; i++) {
		const struct ir_tensor *t = s->items[i];
		int64_t len = new_axis ? 1 : t->dims[axis];
		kcopy_rows(kwdata(o), total, at, kdata(t), len, 0, len, outer, (size_t)inner * (size_t)es);
		at += len;
	}
	return 0;
}

static int k_seq_map(struct cpu_kctx *k)
{
	const struct ir_attr *ba = kattr(k, "body");
	if (!ba || ba->type != IR_ATTR_GRAPH || !ba->g)
		return kerr(k, "has no body");
	const struct ir_graph *g = ba->g;
	const struct kern_value *s = seq_in(k, 0);
	if (!s)
		return IR_ERR;
	if (g->n_inputs != k->n_in || g->n_outputs != k->n_out)
		return kerr(k, "the body's inputs and outputs do not match the node's");
	int n = s->n_items;
	for (int i = 1; i < k->n_in; i++)
		if (k->in[i].kind == KV_SEQ && k->in[i].n_items != n)
			return kerr(k, "input %d has %d items, input 0 has %d", i, k->in[i].n_items, n);
	struct kern_value *in = calloc((size_t)k->n_in, sizeof(*in));
	struct kern_value *res = calloc((size_t)k->n_out, sizeof(*res));
	struct ir_tensor ***outs = calloc((size_t)k->n_out, sizeof(*outs));
	int rc = 0;
	if (!in || !res || !outs) {
		rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int j = 0; j < k->n_out; j++)
		if (!(outs[j] = calloc((size_t)(n ? n : 1), sizeof(**outs)))) {
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
			goto out;
		}
	for (int i = 0; i < n && !rc; i++) {
		for (int j = 0; j < k->n_in; j++) {
			if (k->in[j].kind == KV_SEQ)
				in[j] = (struct kern_value){ .kind = KV_TENSOR, .t = k->in[j].items[i] };
			else
				in[j] = k->in[j];
		}
		if ((rc = k->hooks->run_graph(k, g, k->n_in, in, res)))
			break;
		for (int j = 0; j < k->n_out; j++) {
			if (res[j].kind != KV_TENSOR) {
				rc = kerr(k, "the body's output %d is not a tensor", j);
				break;
			}
			outs[j][i] = res[j].t;
			ir_tensor_ref(res[j].t);
			kern_value_clear(&res[j]);
		}
	}
	for (int j = 0; !rc && j < k->n_out; j++) {
		int elem = n ? outs[j][0]->dtype : 0;
		rc = kout_seq(k, j, elem, outs[j], n);
		memset(outs[j], 0, sizeof(**outs) * (size_t)(n ? n : 1));
	}
out:
	for (int j = 0; outs && j < k->n_out; j++) {
		if (outs[j])
			for (int i = 0; i < n; i++)
				ir_tensor_unref(outs[j][i]);
		free(outs[j]);
	}
	for (int j = 0; res && j < k->n_out; j++)
		kern_value_clear(&res[j]);
	free(outs);
	free(in);
	free(res);
	return rc;
}

static int k_optional(struct cpu_kctx *k)
{
	kern_value_clear(&k->out[0]);
	if (khas(k, 0) && kern_value_copy(&k->out[0], &k->in[0]))
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->out[0].optional = true;
	return 0;
}

static int k_opt_has(struct cpu_kctx *k)
{
	struct ir_tensor *o = kout(k, 0, IR_BOOL, 0, NULL);
	if (!o)
		return IR_ERR;
	*(uint8_t *)kwdata(o) = khas(k, 0);
	return 0;
}

static int k_opt_get(struct cpu_kctx *k)
{
	if (!khas(k, 0))
		return kerr(k, "the optional is empty");
	kern_value_clear(&k->out[0]);
	if (kern_value_copy(&k->out[0], &k->in[0]))
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->out[0].optional = false;
	return 0;
}

const struct cpu_kernel cpu_kernels_sequence[] = {
	{ IR_OP_SequenceEmpty, k_seq_empty, NULL },
	{ IR_OP_SequenceConstruct, k_seq_construct, NULL },
	{ IR_OP_SequenceInsert, k_seq_insert, NULL },
	{ IR_OP_SequenceErase, k_seq_erase, NULL },
	{ IR_OP_SequenceAt, k_seq_at, NULL },
	{ IR_OP_SequenceLength, k_seq_length, NULL },
	{ IR_OP_SplitToSequence, k_split_to_seq, NULL },
	{ IR_OP_ConcatFromSequence, k_concat_from_seq, NULL },
	{ IR_OP_SequenceMap, k_seq_map, NULL },
	{ IR_OP_Optional, k_optional, NULL },
	{ IR_OP_OptionalHasElement, k_opt_has, NULL },
	{ IR_OP_OptionalGetElement, k_opt_get, NULL },
	{ -1, NULL, NULL },
};
