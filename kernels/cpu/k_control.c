/*
 * k_control.c - CPU kernels: If, Loop, Scan. They run their subgraphs
 * through the executor's run_graph hook.
 */
#include "cpu.h"

#include <stdlib.h>

/* out[i] = a copy of v (shared tensors). */
static int put(struct cpu_kctx *k, int i, const struct kern_value *v)
{
	if (i >= k->n_out)
		return 0;
	kern_value_clear(&k->out[i]);
	if (kern_value_copy(&k->out[i], v))
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	return 0;
}

static const struct ir_graph *graph_attr(struct cpu_kctx *k, const char *name)
{
	const struct ir_attr *a = kattr(k, name);
	if (!a || a->type != IR_ATTR_GRAPH || !a->g) {
		kerr(k, "has no '%s' subgraph", name);
		return NULL;
	}
	return a->g;
}

static bool truthy(const struct ir_tensor *t)
{
	return t->numel && kld(t->dtype, kdata(t), 0) != 0;
}

static int k_if(struct cpu_kctx *k)
{
	const struct ir_tensor *c = kin_req(k, 0);
	if (!c)
		return IR_ERR;
	if (c->numel != 1)
		return kerr(k, "the condition must have one element, it has shape %s", kshape(c));
	const struct ir_graph *g = graph_attr(k, truthy(c) ? "then_branch" : "else_branch");
	if (!g)
		return IR_ERR;
	if (g->n_outputs != k->n_out)
		return kerr(k, "the %s branch has %d outputs, the node %d", truthy(c) ? "then" : "else", g->n_outputs, k->n_out);
	struct kern_value *out = calloc((size_t)(g->n_outputs ? g->n_outputs : 1), sizeof(*out));
	if (!out)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	int rc = k->hooks->run_graph(k, g, 0, NULL, out);
	for (int i = 0; !rc && i < g->n_outputs; i++)
		rc = put(k, i, &out[i]);
	for (int i = 0; i < g->n_outputs; i++)
		kern_value_clear(&out[i]);
	free(out);
	return rc;
}

/* Stacks n tensors of one shape along a new axis `axis` (0..rank). */
static struct ir_tensor *stack(struct cpu_kctx *k, int slot, struct ir_tensor **ts, int n, int axis,
			       bool reverse, const struct ir_type *decl)
{
	int64_t dims[IR_MAX_RANK];
	if (n == 0) {
		/* no iterations: [0] + the declared element shape where known */
		int rank = 1;
		dims[0] = 0;
		int dt = IR_FLOAT;
		if (decl && decl->kind == IR_TYPE_TENSOR) {
			if (decl->elem)
				dt = decl->elem;
			if (decl->rank >= 1 && decl->rank <= IR_MAX_RANK) {
				rank = decl->rank;
				for (int i = 0; i < rank; i++)
					dims[i] = decl->dims[i].kind == IR_DIM_VALUE ? decl->dims[i].value : 0;
				dims[0] = 0;
			}
		}
		return kout(k, slot, dt, rank, dims);
	}
	const struct ir_tensor *t0 = ts[0];
	if (t0->rank + 1 > IR_MAX_RANK) {
		kerr(k, "scan output rank is too large");
		return NULL;
	}
	for (int i = 1; i < n; i++) {
		bool same = ts[i]->dtype == t0->dtype && ts[i]->rank == t0->rank;
		for (int j = 0; same && j < t0->rank; j++)
			same = ts[i]->dims[j] == t0->dims[j];
		if (!same) {
			kerr(k, "scan output %d changes shape between iterations (%s, then %s)", slot, kshape(t0), kshape(ts[i]));
			return NULL;
		}
	}
	int es = kelem_bytes(t0->dtype);
	if (!es && t0->numel) {
		kerr(k, "scan outputs of %s are not supported", ir_dtype_name(t0->dtype));
		return NULL;
	}
	int r = 0;
	for (int j = 0; j <= t0->rank; j++)
		dims[j] = j == axis ? n : t0->dims[r++];
	struct ir_tensor *o = kout(k, slot, t0->dtype, t0->rank + 1, dims);
	if (!o)
		return NULL;
	int64_t outer = 1, inner = 1;
	for (int j = 0; j < axis; j++)
		outer *= t0->dims[j];
	for (int j = axis; j < t0->rank; j++)
		inner *= t0->dims[j];
	for (int i = 0; i < n && o->numel; i++)
		kcopy_rows(kwdata(o), n, reverse ? n - 1 - i : i, kdata(ts[i]), 1, 0, 1, outer, (size_t)inner * (size_t)es);
	return o;
}

/* Element `i` along `axis` of t, as a tensor of one rank less. */
static struct ir_tensor *slice_at(struct cpu_kctx *k, const struct ir_tensor *t, int axis, int64_t i)
{
	return ktake_rows(k, t, axis, i, 1, false);
}

struct scan_acc {
	struct ir_tensor **ts;
	int n, cap;
};

static int acc_push(struct cpu_kctx *k, struct scan_acc *a, struct ir_tensor *t)
{
	if (a->n == a->cap) {
		int cap = a->cap ? 2 * a->cap : 16;
		struct ir_tensor **x = realloc(a->ts, sizeof(*x) * (size_t)cap);
		if (!x)
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		a->ts = x;
		a->cap = cap;
	}
	ir_tensor_ref(t);
	a->ts[a->n++] = t;
	return 0;
}

static void acc_free(struct scan_acc *a, int n)
{
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < a[i].n; j++)
			ir_tensor_unref(a[i].ts[j]);
		free(a[i].ts);
	}
	free(a);
}

static int k_loop(struct cpu_kctx *k)
{
	const struct ir_graph *g = graph_attr(k, "body");
	if (!g)
		return IR_ERR;
	int n_carried = k->n_in - 2;
	if (n_carried < 0 || g->n_inputs != n_carried + 2)
		return kerr(k, "the body takes %d inputs, the node gives %d loop-carried values", g->n_inputs, n_carried);
	int n_scan = g->n_outputs - 1 - n_carried;
	if (n_scan < 0)
		return kerr(k, "the body has %d outputs, fewer than 1 + %d loop-carried", g->n_outputs, n_carried);
	const struct ir_tensor *M = kin(k, 0), *C = kin(k, 1);
	int64_t max_trip = INT64_MAX;
	if (M) {
		if (M->numel != 1 || !ir_dtype_is_int(M->dtype))
			return kerr(k, "the trip count M must be one integer, it is %s %s", ir_dtype_name(M->dtype), kshape(M));
		max_trip = kldi(M->dtype, kdata(M), 0);
	}
	bool cond = C ? truthy(C) : true;
	int nin = g->n_inputs, nout = g->n_outputs;
	struct kern_value *cur = calloc((size_t)nin, sizeof(*cur));
	struct kern_value *res = calloc((size_t)nout, sizeof(*res));
	struct scan_acc *acc = calloc((size_t)(n_scan ? n_scan : 1), sizeof(*acc));
	struct ir_tensor *iter_t = NULL, *cond_t = NULL;
	int rc = 0;
	if (!cur || !res || !acc) {
		rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < n_carried; i++)
		if (kern_value_copy(&cur[2 + i], &k->in[2 + i])) {
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
			goto out;
		}
	for (int64_t it = 0; it < max_trip && cond; it++) {
		if ((rc = kstop(k)))
			goto out;
		if (!(iter_t = ir_tensor_new(IR_INT64, 0, NULL, k->d)) || !(cond_t = ir_tensor_new(IR_BOOL, 0, NULL, k->d))) {
			rc = IR_ENOMEM;
			goto out;
		}
		*(int64_t *)ir_tensor_mutable(iter_t) = it;
		*(uint8_t *)ir_tensor_mutable(cond_t) = cond;
		kern_value_clear(&cur[0]);
		kern_value_clear(&cur[1]);
		cur[0] = (struct kern_value){ .kind = KV_TENSOR, .t = iter_t };
		cur[1] = (struct kern_value){ .kind = KV_TENSOR, .t = cond_t };
		iter_t = cond_t = NULL;
		if ((rc = k->hooks->run_graph(k, g, nin, cur, res)))
			goto out;
		if (res[0].kind != KV_TENSOR || !res[0].t->numel) {
			rc = kerr(k, "iteration %lld: the body's condition output is not a tensor", (long long)it);
			goto out;
		}
		cond = truthy(res[0].t);
		for (int i = 0; i < n_carried; i++) {
			kern_value_clear(&cur[2 + i]);
			cur[2 + i] = res[1 + i];
			memset(&res[1 + i], 0, sizeof(res[1 + i]));
		}
		for (int i = 0; i < n_scan; i++) {
			struct kern_value *v = &res[1 + n_carried + i];
			if (v->kind != KV_TENSOR) {
				rc = kerr(k, "iteration %lld: scan output %d is not a tensor", (long long)it, i);
				goto out;
			}
			if ((rc = acc_push(k, &acc[i], v->t)))
				goto out;
		}
		for (int i = 0; i < nout; i++)
			kern_value_clear(&res[i]);
	}
	for (int i = 0; i < n_carried; i++)
		if ((rc = put(k, i, &cur[2 + i])))
			goto out;
	for (int i = 0; i < n_scan; i++) {
		const struct ir_value *ov = g->outputs[1 + n_carried + i];
		const struct ir_type *decl = ov ? ir_value_type(ov) : NULL;
		if (n_carried + i < k->n_out && !stack(k, n_carried + i, acc[i].ts, acc[i].n, 0, false, NULL)) {
			(void)decl;
			rc = IR_ERR;
			goto out;
		}
	}
out:
	ir_tensor_unref(iter_t);
	ir_tensor_unref(cond_t);
	for (int i = 0; cur && i < nin; i++)
		kern_value_clear(&cur[i]);
	for (int i = 0; res && i < nout; i++)
		kern_value_clear(&res[i]);
	free(cur);
	free(res);
	if (acc)
		acc_free(acc, n_scan);
	return rc;
}

/* Scan (opset 9 and later; opset 8 with its batch axis is run per batch row). */
static int scan_run(struct cpu_kctx *k, const struct ir_graph *g, int n_state, int n_scan_in,
		    const struct kern_value *states, const struct ir_tensor *const *scan_in, int64_t seq_len,
		    const int *in_axes, const int64_t *in_dirs, struct kern_value *final_states,
		    struct scan_acc *acc)
{
	int nin = g->n_inputs, nout = g->n_outputs;
	int n_scan_out = nout - n_state;
	struct kern_value *cur = calloc((size_t)(nin ? nin : 1), sizeof(*cur));
	struct kern_value *res = calloc((size_t)(nout ? nout : 1), sizeof(*res));
	int rc = 0;
	if (!cur || !res) {
		rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < n_state; i++)
		if (kern_value_copy(&cur[i], &states[i])) {
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
			goto out;
		}
	for (int64_t t = 0; t < seq_len; t++) {
		if ((rc = kstop(k)))
			goto out;
		for (int j = 0; j < n_scan_in; j++) {
			int64_t at = in_dirs && in_dirs[j] ? seq_len - 1 - t : t;
			struct ir_tensor *s = slice_at(k, scan_in[j], in_axes[j], at);
			if (!s) {
				rc = IR_ERR;
				goto out;
			}
			kern_value_clear(&cur[n_state + j]);
			cur[n_state + j] = (struct kern_value){ .kind = KV_TENSOR, .t = s };
		}
		if ((rc = k->hooks->run_graph(k, g, nin, cur, res)))
			goto out;
		for (int i = 0; i < n_state; i++) {
			kern_value_clear(&cur[i]);
			cur[i] = res[i];
			memset(&res[i], 0, sizeof(res[i]));
		}
		for (int i = 0; i < n_scan_out; i++) {
			if (res[n_state + i].kind != KV_TENSOR) {
				rc = kerr(k, "scan output %d is not a tensor", i);
				goto out;
			}
			if ((rc = acc_push(k, &acc[i], res[n_state + i].t)))
				goto out;
		}
		for (int i = 0; i < nout; i++)
			kern_value_clear(&res[i]);
	}
	for (int i = 0; i < n_state; i++) {
		final_states[i] = cur[i];
		memset(&cur[i], 0, sizeof(cur[i]));
	}
out:
	for (int i = 0; cur && i < nin; i++)
		kern_value_clear(&cur[i]);
	for (int i = 0; res && i < nout; i++)
		kern_value_clear(&res[i]);
	free(cur);
	free(res);
	return rc;
}

static int k_scan(struct cpu_kctx *k)
{
	const struct ir_graph *g = graph_attr(k, "body");
	if (!g)
		return IR_ERR;
	bool v8 = k->opset && k->opset < 9;
	int first = v8 ? 1 : 0;   /* opset 8: sequence_lens comes first */
	int64_t M = kattr_i(k, "num_scan_inputs", -1);
	int n_all = k->n_in - first;
	if (M < 1 || M > n_all)
		return kerr(k, "num_scan_inputs %lld does not fit %d inputs", (long long)M, n_all);
	int n_scan_in = (int)M, n_state = n_all - n_scan_in;
	if (g->n_inputs != n_state + n_scan_in)
		return kerr(k, "the body takes %d inputs, the node gives %d", g->n_inputs, n_state + n_scan_in);
	int n_scan_out = g->n_outputs - n_state;
	if (n_scan_out < 0 || k->n_out > g->n_outputs)
		return kerr(k, "the body has %d outputs for %d states", g->n_outputs, n_state);
	int na, nd, noa, nod;
	const int64_t *in_axes_a = kattr_ints(k, "scan_input_axes", &na);
	const int64_t *in_dirs = kattr_ints(k, v8 ? "directions" : "scan_input_directions", &nd);
	const int64_t *out_axes_a = kattr_ints(k, "scan_output_axes", &noa);
	const int64_t *out_dirs = kattr_ints(k, "scan_output_directions", &nod);
	if ((in_axes_a && na != n_scan_in) || (in_dirs && nd != n_scan_in) || (out_axes_a && noa != n_scan_out) ||
	    (out_dirs && nod != n_scan_out))
		return kerr(k, "an axes or directions attribute has the wrong length");
	if (v8 && khas(k, 0))
		return kerr(k, "sequence_lens is not supported (every sequence must be full)");
	const struct ir_tensor *scan_in[64];
	int in_axes[64];
	if (n_scan_in > 64 || n_state > 256)
		return kerr(k, "too many scan inputs");
	int64_t batch = 1;
	for (int j = 0; j < n_scan_in; j++) {
		if (!(scan_in[j] = kin_req(k, first + n_state + j)))
			return IR_ERR;
		int base = v8 ? 1 : 0;
		if (kaxis(k, in_axes_a ? in_axes_a[j] : 0, scan_in[j]->rank - base, &in_axes[j]))
			return IR_ERR;
		in_axes[j] += base;
		if (scan_in[j]->rank < 1 + base)
			return kerr(k, "scan input %d has rank %d", j, scan_in[j]->rank);
		if (v8)
			batch = scan_in[0]->dims[0];
	}
	int64_t seq_len = scan_in[0]->dims[in_axes[0]];
	for (int j = 1; j < n_scan_in; j++)
		if (scan_in[j]->dims[in_axes[j]] != seq_len)
			return kerr(k, "scan inputs have different lengths (%lld and %lld)", (long long)seq_len,
				    (long long)scan_in[j]->dims[in_axes[j]]);
	int rc = 0;
	if (!v8) {
		struct kern_value *fin = calloc((size_t)(n_state ? n_state : 1), sizeof(*fin));
		struct scan_acc *acc = calloc((size_t)(n_scan_out ? n_scan_out : 1), sizeof(*acc));
		if (!fin || !acc) {
			free(fin);
			free(acc);
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		}
		rc = scan_run(k, g, n_state, n_scan_in, &k->in[first], scan_in, seq_len, in_axes, in_dirs, fin, acc);
		for (int i = 0; !rc && i < n_state; i++)
			rc = put(k, i, &fin[i]);
		for (int i = 0; !rc && i < n_scan_out && n_state + i < k->n_out; i++) {
			int rank = acc[i].n ? acc[i].ts[0]->rank + 1 : 1;
			int ax;
			if ((rc = kaxis(k, out_axes_a ? out_axes_a[i] : 0, rank, &ax)))
				break;
			if (!stack(k, n_state + i, acc[i].ts, acc[i].n, ax, out_dirs && out_dirs[i], NULL))
				rc = IR_ERR;
		}
		for (int i = 0; i < n_state; i++)
			kern_value_clear(&fin[i]);
		free(fin);
		acc_free(acc, n_scan_out);
		return rc;
	}
	/* opset 8: run each batch row, then stack rows along axis 0; every
	 * state and scan input has the batch as its first dim */
	for (int i = 0; i < n_state + n_scan_in; i++) {
		const struct ir_tensor *t = kin_req(k, first + i);
		if (!t)
			return IR_ERR;
		if (t->rank < 1 || t->dims[0] != batch)
			return kerr(k, "input %d has shape %s: its first dim must be the batch, %lld", first + i,
				    kshape(t), (long long)batch);
	}
	struct scan_acc *rows = calloc((size_t)(n_state + n_scan_out), sizeof(*rows));
	if (!rows)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	for (int64_t b = 0; b < batch && !rc; b++) {
		struct kern_value st[256];
		const struct ir_tensor *sin[64];
		int ax0[64];
		memset(st, 0, sizeof(st[0]) * (size_t)n_state);
		for (int i = 0; i < n_state && !rc; i++) {
			const struct ir_tensor *s = kin_req(k, first + i);
			struct ir_tensor *x = s ? slice_at(k, s, 0, b) : NULL;
			if (!x)
				rc = IR_ERR;
			else
				st[i] = (struct kern_value){ .kind = KV_TENSOR, .t = x };
		}
		struct ir_tensor *sl[64] = { 0 };
		for (int j = 0; j < n_scan_in && !rc; j++) {
			if (!(sl[j] = slice_at(k, scan_in[j], 0, b)))
				rc = IR_ERR;
			sin[j] = sl[j];
			ax0[j] = in_axes[j] - 1;
		}
		struct kern_value fin[256];
		memset(fin, 0, sizeof(fin[0]) * (size_t)n_state);
		struct scan_acc *acc = calloc((size_t)(n_scan_out ? n_scan_out : 1), sizeof(*acc));
		if (!rc && !acc)
			rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		if (!rc)
			rc = scan_run(k, g, n_state, n_scan_in, st, sin, seq_len, ax0, in_dirs, fin, acc);
		for (int i = 0; !rc && i < n_state; i++)
			rc = fin[i].kind == KV_TENSOR ? acc_push(k, &rows[i], fin[i].t) : kerr(k, "a state is not a tensor");
		for (int i = 0; !rc && i < n_scan_out; i++) {
			/* this row's scan output: stack its iterations (on a scratch slot) */
			struct kern_value save = k->out[n_state + i];
			memset(&k->out[n_state + i], 0, sizeof(save));
			if (!stack(k, n_state + i, acc[i].ts, acc[i].n, 0, false, NULL))
				rc = IR_ERR;
			else
				rc = acc_push(k, &rows[n_state + i], k->out[n_state + i].t);
			kern_value_clear(&k->out[n_state + i]);
			k->out[n_state + i] = save;
		}
		for (int i = 0; i < n_state; i++) {
			kern_value_clear(&st[i]);
			kern_value_clear(&fin[i]);
		}
		for (int j = 0; j < n_scan_in; j++)
			ir_tensor_unref(sl[j]);
		if (acc)
			acc_free(acc, n_scan_out);
	}
	for (int i = 0; !rc && i < n_state + n_scan_out && i < k->n_out; i++)
		if (!stack(k, i, rows[i].ts, rows[i].n, 0, false, NULL))
			rc = IR_ERR;
	acc_free(rows, n_state + n_scan_out);
	return rc;
}

const struct cpu_kernel cpu_kernels_control[] = {
	{ IR_OP_If, k_if, NULL },
	{ IR_OP_Loop, k_loop, NULL },
	{ IR_OP_Scan, k_scan, NULL },
	{ -1, NULL, NULL },
};
