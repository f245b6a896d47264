/*
 * k_reduce.c - GPU kernel entries of the reduce family (launchers in
 * k_reduce.cu): Reduce*, GlobalAveragePool/GlobalMaxPool, ArgMax/ArgMin,
 * Softmax/LogSoftmax, TopK, the normalizations (Layer, RMS, Batch in
 * inference mode, Instance, Group, Lp, MeanVariance) and Attention.
 *
 * Each op has a `setup` that reads the node and the shapes into launcher
 * parameters or says why it cannot run; supports calls it at plan time and
 * run again (with the data pointers) per execution: it is host arithmetic
 * only, so run stays capturable.
 */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/k_reduce.h"
#include "kernels/cuda/k_sdpa.h"
#include "kernels/cuda/cudnn_api.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

/* Writes the reason into why (may be NULL). */
static void no(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void no(char *why, size_t size, const char *fmt, ...)
{
	if (why && size) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, size, fmt, ap);
		va_end(ap);
	}
}
/* in a setup function (with why and size): records the reason, evaluates to false */
#define NO(...) (no(why, size, __VA_ARGS__), false)

static bool has_in(const struct cuda_kctx *k, int i)
{
	return i < k->n_in && k->in[i].dtype != 0;
}

static bool wants_out(const struct cuda_kctx *k, int i)
{
	return i < k->n_out && i < k->node->n_outputs && k->node->outputs[i] && k->out[i].dtype != 0;
}

static int64_t attr_i(const struct cuda_kctx *k, const char *name, int64_t dflt)
{
	return ir_node_attr_int(k->node, name, dflt);
}

static float attr_f(const struct cuda_kctx *k, const char *name, float dflt)
{
	return ir_node_attr_float(k->node, name, dflt);
}

static bool attr_has(const struct cuda_kctx *k, const char *name)
{
	return ir_node_attr(k->node, name) != NULL;
}

/* An ints attribute: values and count, NULL (and *n 0) when absent. */
static const int64_t *attr_ints(const struct cuda_kctx *k, const char *name, int *n)
{
	const struct ir_attr *a = ir_node_attr(k->node, name);
	*n = 0;
	if (!a || a->type != IR_ATTR_INTS)
		return NULL;
	*n = (int)a->n;
	return a->ints;
}

/* The values of a constant int32/int64 tensor (up to max); -1 when not an integer tensor or too long. */
static int host_ints(const struct ir_tensor *t, int64_t *v, int max)
{
	if (!t || (t->dtype != IR_INT64 && t->dtype != IR_INT32) || t->numel > (uint64_t)max)
		return -1;
	const unsigned char *p = ir_tensor_data(t);
	for (uint64_t i = 0; i < t->numel; i++) {
		if (t->dtype == IR_INT64) {
			memcpy(&v[i], p + 8 * i, 8);
		} else {
			int32_t x;
			memcpy(&x, p + 4 * i, 4);
			v[i] = x;
		}
	}
	return (int)t->numel;
}

/* Normalizes axis for rank (allowing [-rank, rank-1]); false when out of range. */
static bool norm_axis(int64_t axis, int rank, int *out)
{
	if (axis < -rank || axis >= rank)
		return false;
	*out = (int)(axis < 0 ? axis + rank : axis);
	return true;
}

static bool float_or_double(int dt)
{
	return cuda_is_float(dt) || dt == IR_DOUBLE;
}

static const char *dtname(int dt)
{
	return ir_dtype_name(dt);
}

/* Splits x's dims around axis: [outer, n, inner]. */
static void split_axis(const struct cuda_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
	*outer = *inner = 1;
	*n = x->rank ? x->dims[axis] : 1;
	for (int d = 0; d < axis; d++)
		*outer *= x->dims[d];
	for (int d = axis + 1; d < x->rank; d++)
		*inner *= x->dims[d];
}

/*
 * The plan reducing x over the axes flagged in red[]: kept and reduced
 * axes with their strides, adjacent axes of the same kind merged when
 * contiguous and axes of size 1 dropped. False when more than RD_MAX_DIMS
 * of either kind remain.
 */
static bool plan_build(struct rd_plan *p, const struct cuda_tensor *x, const bool *red)
{
	int64_t s[IR_MAX_RANK];
	cuda_strides(x, s);
	memset(p, 0, sizeof(*p));
	p->nout = p->nred = 1;
	int last = -1;
	for (int d = 0; d < x->rank; d++) {
		int64_t n = x->dims[d];
		if (red[d])
			p->nred *= n;
		else
			p->nout *= n;
		if (n == 1)
			continue;
		int kind = red[d] ? 1 : 0;
		int64_t *dims = kind ? p->rdims : p->kdims;
		int64_t *str = kind ? p->rstr : p->kstr;
		int *cnt = kind ? &p->nr : &p->nk;
		if (last == kind && *cnt > 0 && str[*cnt - 1] == n * s[d]) {
			dims[*cnt - 1] *= n;
			str[*cnt - 1] = s[d];
		} else {
			if (*cnt >= RD_MAX_DIMS)
				return false;
			dims[*cnt] = n;
			str[*cnt] = s[d];
			(*cnt)++;
		}
		last = kind;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Reduce*, GlobalAveragePool, GlobalMaxPool                                 */
/* ------------------------------------------------------------------------ */

static bool reduce_setup(const struct cuda_kctx *k, enum rd_op op, int64_t input_since, struct rd_plan *p, char *why,
			 size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	bool intok = op != RD_L2 && op != RD_LOGSUM && op != RD_LSE;
	if (!cuda_is_float(x->dtype) && !(intok && (x->dtype == IR_INT32 || x->dtype == IR_INT64)))
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	int64_t axes[IR_MAX_RANK];
	int na = -1;
	if (k->opset >= input_since) {
		if (has_in(k, 1)) {
			if (!k->in[1].host)
				return NO("axes is not a constant");
			na = host_ints(k->in[1].host, axes, IR_MAX_RANK);
			if (na < 0)
				return NO("axes is not a short integer tensor");
		}
	} else {
		int n;
		const int64_t *a = attr_ints(k, "axes", &n);
		if (a) {
			if (n > IR_MAX_RANK)
				return NO("axes has too many values");
			memcpy(axes, a, sizeof(*a) * (size_t)n);
			na = n;
		}
	}
	bool noop = attr_i(k, "noop_with_empty_axes", 0) != 0;
	bool red[IR_MAX_RANK];
	for (int d = 0; d < x->rank; d++)
		red[d] = na <= 0 && !noop;
	for (int i = 0; i < na; i++) {
		int ax;
		if (x->rank == 0)
			continue;
		if (!norm_axis(axes[i], x->rank, &ax))
			return NO("axis %lld is out of range", (long long)axes[i]);
		if (red[ax])
			return NO("axis %lld appears twice in axes", (long long)axes[i]);
		red[ax] = true;
	}
	if (!plan_build(p, x, red))
		return NO("too many dims to reduce on the GPU");
	if (k->out[0].dtype != x->dtype || cuda_numel(&k->out[0]) != p->nout)
		return NO("the output's shape or type does not match the reduction");
	return true;
}

static bool global_setup(const struct cuda_kctx *k, struct rd_plan *p, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype))
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	if (x->rank < 2)
		return NO("input must be [N, C, spatial...]");
	if (k->out[0].nhwc)
		return NO("the pooled output is not written channels-last");
	bool red[IR_MAX_RANK];
	if (x->nhwc) {
		/* [N, C, H, W] stored as [N, H, W, C]: reduce the middle axes of that view */
		if (x->rank != 4)
			return NO("a channels-last input must be 4-D");
		struct cuda_tensor v = *x;
		v.dims[1] = x->dims[2], v.dims[2] = x->dims[3], v.dims[3] = x->dims[1];
		v.nhwc = false;
		red[0] = red[3] = false;
		red[1] = red[2] = true;
		if (!plan_build(p, &v, red))
			return NO("too many dims to reduce on the GPU");
		if (cuda_numel(&k->out[0]) != p->nout)
			return NO("the output's shape does not match the pooling");
		return true;
	}
	for (int d = 0; d < x->rank; d++)
		red[d] = d >= 2;
	if (!plan_build(p, x, red))
		return NO("too many dims to reduce on the GPU");
	if (cuda_numel(&k->out[0]) != p->nout)
		return NO("the output's shape does not match the pooling");
	return true;
}

struct reduce_desc {
	int op;
	enum rd_op rop;
	int64_t since;   /* axes as an input from this opset; 0: a global pool */
};

static const struct reduce_desc reduce_descs[] = {
	{ IR_OP_ReduceSum, RD_SUM, 13 },
	{ IR_OP_ReduceMean, RD_MEAN, 18 },
	{ IR_OP_ReduceMax, RD_MAX, 18 },
	{ IR_OP_ReduceMin, RD_MIN, 18 },
	{ IR_OP_ReduceProd, RD_PROD, 18 },
	{ IR_OP_ReduceL1, RD_L1, 18 },
	{ IR_OP_ReduceL2, RD_L2, 18 },
	{ IR_OP_ReduceSumSquare, RD_SUMSQ, 18 },
	{ IR_OP_ReduceLogSumExp, RD_LSE, 18 },
	{ IR_OP_ReduceLogSum, RD_LOGSUM, 18 },
	{ IR_OP_GlobalAveragePool, RD_MEAN, 0 },
	{ IR_OP_GlobalMaxPool, RD_MAX, 0 },
};

static const struct reduce_desc *reduce_desc(int op)
{
	for (size_t i = 0; i < sizeof(reduce_descs) / sizeof(reduce_descs[0]); i++)
		if (reduce_descs[i].op == op)
			return &reduce_descs[i];
	return NULL;
}

static bool reduce_any_setup(const struct cuda_kctx *k, struct rd_plan *p, enum rd_op *rop, char *why, size_t size)
{
	const struct reduce_desc *rd = reduce_desc(k->node->op);
	if (!rd)
		return NO("not a reduction");
	*rop = rd->rop;
	if (rd->since == 0)
		return global_setup(k, p, why, size);
	return reduce_setup(k, rd->rop, rd->since, p, why, size);
}

static bool supports_reduce(const struct cuda_kctx *k, char *why, size_t size)
{
	struct rd_plan p;
	enum rd_op rop;
	return reduce_any_setup(k, &p, &rop, why, size);
}

static int run_reduce(struct cuda_kctx *k)
{
	struct rd_plan p;
	enum rd_op rop;
	char why[160];
	if (!reduce_any_setup(k, &p, &rop, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const char *impl = NULL;
	cudaError_t e = rd_reduce(k->in[0].dtype, rop, &p, k->in[0].data, k->out[0].data, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_reduce", k->d);
}

/* ------------------------------------------------------------------------ */
/* Softmax, LogSoftmax                                                       */
/* ------------------------------------------------------------------------ */

/* The [outer, n, inner] view: one axis from opset 13, before the input
 * coerced to 2-D at axis (the whole second dimension). */
static bool softmax_setup(const struct cuda_kctx *k, int64_t *outer, int64_t *n, int64_t *inner, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype))
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	bool v13 = k->opset >= 13;
	if (x->rank == 0) {
		*outer = *n = *inner = 1;
		return true;
	}
	int64_t axis_attr = attr_i(k, "axis", v13 ? -1 : 1);
	int axis;
	if (!v13 && axis_attr == x->rank)
		axis = x->rank;
	else if (!norm_axis(axis_attr, x->rank, &axis))
		return NO("axis %lld is out of range", (long long)axis_attr);
	if (v13) {
		split_axis(x, axis, outer, n, inner);
		return true;
	}
	*outer = *n = *inner = 1;
	for (int d = 0; d < x->rank; d++) {
		if (d < axis)
			*outer *= x->dims[d];
		else
			*n *= x->dims[d];
	}
	return true;
}

static bool supports_softmax(const struct cuda_kctx *k, char *why, size_t size)
{
	int64_t o, n, i;
	return softmax_setup(k, &o, &n, &i, why, size);
}

static int run_softmax(struct cuda_kctx *k)
{
	int64_t outer, n, inner;
	char why[160];
	if (!softmax_setup(k, &outer, &n, &inner, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const char *impl = NULL;
	cudaError_t e = rd_softmax(k->in[0].dtype, k->node->op == IR_OP_LogSoftmax, outer, n, inner, k->in[0].data,
				   k->out[0].data, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_softmax", k->d);
}

/* ------------------------------------------------------------------------ */
/* ArgMax, ArgMin                                                            */
/* ------------------------------------------------------------------------ */

static bool arg_setup(const struct cuda_kctx *k, int64_t *outer, int64_t *n, int64_t *inner, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype) && x->dtype != IR_INT32 && x->dtype != IR_INT64)
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	if (x->rank == 0)
		return NO("a scalar input is not supported on the GPU");
	int axis;
	if (!norm_axis(attr_i(k, "axis", 0), x->rank, &axis))
		return NO("axis %lld is out of range", (long long)attr_i(k, "axis", 0));
	split_axis(x, axis, outer, n, inner);
	if (*n == 0 && *outer * *inner > 0)
		return NO("the axis has size 0");
	if (k->out[0].dtype != IR_INT64)
		return NO("the output must be int64");
	return true;
}

static bool supports_arg(const struct cuda_kctx *k, char *why, size_t size)
{
	int64_t o, n, i;
	return arg_setup(k, &o, &n, &i, why, size);
}

static int run_arg(struct cuda_kctx *k)
{
	int64_t outer, n, inner;
	char why[160];
	if (!arg_setup(k, &outer, &n, &inner, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const char *impl = NULL;
	cudaError_t e = rd_arg(k->in[0].dtype, k->node->op == IR_OP_ArgMax, attr_i(k, "select_last_index", 0) != 0, outer,
			       n, inner, k->in[0].data, k->out[0].data, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_arg", k->d);
}

/* ------------------------------------------------------------------------ */
/* TopK                                                                      */
/* ------------------------------------------------------------------------ */

struct topk_args {
	int64_t outer, n, inner, k;
};

static bool topk_setup(const struct cuda_kctx *k, struct topk_args *t, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype) && x->dtype != IR_INT32 && x->dtype != IR_INT64)
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	if (x->rank < 1)
		return NO("a scalar input is not supported");
	if (k->opset < 10) {
		if (!attr_has(k, "k"))
			return NO("attribute 'k' is missing");
		t->k = attr_i(k, "k", 0);
	} else {
		if (!has_in(k, 1) || !k->in[1].host)
			return NO("k is not a constant");
		int64_t v[1];
		if (host_ints(k->in[1].host, v, 1) != 1)
			return NO("k is not one integer");
		t->k = v[0];
	}
	int axis;
	if (!norm_axis(attr_i(k, "axis", -1), x->rank, &axis))
		return NO("axis %lld is out of range", (long long)attr_i(k, "axis", -1));
	split_axis(x, axis, &t->outer, &t->n, &t->inner);
	if (t->k < 0 || t->k > t->n)
		return NO("k %lld is out of range for an axis of %lld", (long long)t->k, (long long)t->n);
	if (t->k > 256)
		return NO("k %lld is larger than the 256 the GPU kernel does", (long long)t->k);
	if (t->n >= ((int64_t)1 << 31))
		return NO("the axis of %lld is too long for the GPU kernel", (long long)t->n);
	if (!wants_out(k, 0) || !wants_out(k, 1))
		return NO("both outputs must be used");
	if (k->out[1].dtype != IR_INT64 || k->out[0].dtype != x->dtype)
		return NO("output types do not match");
	return true;
}

static bool supports_topk(const struct cuda_kctx *k, char *why, size_t size)
{
	struct topk_args t;
	return topk_setup(k, &t, why, size);
}

static int run_topk(struct cuda_kctx *k)
{
	struct topk_args t;
	char why[160];
	if (!topk_setup(k, &t, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const char *impl = NULL;
	cudaError_t e = rd_topk(k->in[0].dtype, attr_i(k, "largest", 1) != 0, t.outer, t.n, t.inner, t.k, k->in[0].data,
				k->out[0].data, k->out[1].data, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_topk", k->d);
}

/* ------------------------------------------------------------------------ */
/* LayerNormalization, RMSNormalization                                      */
/* ------------------------------------------------------------------------ */

/* A scale or bias of x normalized from axis on, as the kernel reads it. */
static bool param_setup(const struct cuda_tensor *t, const struct cuda_tensor *x, int axis, const char *what,
			struct rd_param *q, char *why, size_t size)
{
	memset(q, 0, sizeof(*q));
	if (!t)
		return true;
	if (!float_or_double(t->dtype))
		return NO("%s of type %s is not supported on the GPU", what, dtname(t->dtype));
	if (t->rank > x->rank)
		return NO("%s does not broadcast to the input", what);
	for (int j = 0; j < t->rank; j++) {
		int64_t d = t->dims[j], xd = x->dims[x->rank - t->rank + j];
		if (d != xd && d != 1)
			return NO("%s does not broadcast to the input", what);
	}
	int64_t str[IR_MAX_RANK];
	cuda_bcast_strides(t, x->rank, x->dims, str);
	bool simple = true;
	int64_t s = 1;
	for (int d = x->rank - 1; d >= 0; d--) {
		if (x->dims[d] == 1)
			continue;
		if (d < axis && str[d] != 0)
			return NO("%s varies over the rows: not supported on the GPU", what);
		if (d >= axis && str[d] != s)
			simple = false;
		if (d >= axis)
			s *= x->dims[d];
	}
	q->dtype = t->dtype;
	if (!simple) {
		if (x->rank - axis > RD_MAX_DIMS)
			return NO("%s broadcast over too many dims for the GPU", what);
		q->nd = x->rank - axis;
		for (int d = axis; d < x->rank; d++) {
			q->dims[d - axis] = x->dims[d];
			q->str[d - axis] = str[d];
		}
	}
	return true;
}

struct rownorm_args {
	int64_t rows, cols;
	float eps;
	struct rd_param sc, bi;
	bool mean, inv;
};

static bool rownorm_setup(const struct cuda_kctx *k, bool rms, struct rownorm_args *r, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype))
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	if (!has_in(k, 1))
		return NO("scale is missing");
	int axis;
	if (!norm_axis(attr_i(k, "axis", -1), x->rank, &axis))
		return NO("axis %lld is out of range", (long long)attr_i(k, "axis", -1));
	r->eps = attr_f(k, "epsilon", 1e-5f);
	if (!param_setup(&k->in[1], x, axis, "scale", &r->sc, why, size))
		return false;
	if (!param_setup(!rms && has_in(k, 2) ? &k->in[2] : NULL, x, axis, "bias", &r->bi, why, size))
		return false;
	r->rows = r->cols = 1;
	for (int d = 0; d < x->rank; d++) {
		if (d < axis)
			r->rows *= x->dims[d];
		else
			r->cols *= x->dims[d];
	}
	r->mean = !rms && wants_out(k, 1);
	r->inv = !rms && wants_out(k, 2);
	if (r->mean && r->inv && k->out[1].dtype != k->out[2].dtype)
		return NO("Mean and InvStdDev have different types");
	for (int o = 1; o <= 2; o++)
		if ((o == 1 ? r->mean : r->inv) && !float_or_double(k->out[o].dtype))
			return NO("statistics of type %s are not supported on the GPU", dtname(k->out[o].dtype));
	return true;
}

static bool supports_rownorm(const struct cuda_kctx *k, char *why, size_t size)
{
	struct rownorm_args r;
	return rownorm_setup(k, k->node->op == IR_OP_RMSNormalization, &r, why, size);
}

static int run_rownorm(struct cuda_kctx *k)
{
	struct rownorm_args r;
	char why[160];
	bool rms = k->node->op == IR_OP_RMSNormalization;
	if (!rownorm_setup(k, rms, &r, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	r.sc.p = k->in[1].data;
	if (r.bi.dtype)
		r.bi.p = k->in[2].data;
	void *mean = r.mean ? k->out[1].data : NULL, *inv = r.inv ? k->out[2].data : NULL;
	int sdt = r.mean ? k->out[1].dtype : r.inv ? k->out[2].dtype : IR_FLOAT;
	const char *impl = NULL;
	cudaError_t e = rd_rownorm(k->in[0].dtype, rms, r.rows, r.cols, r.eps, k->in[0].data, k->out[0].data, &r.sc, &r.bi,
				   mean, inv, sdt, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_rownorm", k->d);
}

/* ------------------------------------------------------------------------ */
/* GroupNormalization, InstanceNormalization, BatchNormalization             */
/* ------------------------------------------------------------------------ */

static bool vec_ok(const struct cuda_kctx *k, int i, int64_t n, const char *what, char *why, size_t size)
{
	if (!has_in(k, i))
		return NO("%s is missing", what);
	const struct cuda_tensor *t = &k->in[i];
	if (t->rank != 1 || t->dims[0] != n)
		return NO("%s must have shape [%lld]", what, (long long)n);
	if (!float_or_double(t->dtype))
		return NO("%s of type %s is not supported on the GPU", what, dtname(t->dtype));
	return true;
}

/* N, C and S (the spatial size) of x [N, C, ...]. */
static bool ncs(const struct cuda_tensor *x, int64_t *N, int64_t *C, int64_t *S, char *why, size_t size)
{
	if (!cuda_is_float(x->dtype))
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	if (x->rank < 2)
		return NO("input must have rank 2 or more");
	*N = x->dims[0];
	*C = x->dims[1];
	*S = 1;
	for (int d = 2; d < x->rank; d++)
		*S *= x->dims[d];
	return true;
}

static bool groupnorm_setup(const struct cuda_kctx *k, int64_t *groups, bool *per_group, char *why, size_t size)
{
	int64_t N, C, S;
	if (!ncs(&k->in[0], &N, &C, &S, why, size))
		return false;
	if (k->node->op == IR_OP_InstanceNormalization) {
		*groups = C;
		*per_group = false;
	} else {
		if (!attr_has(k, "num_groups"))
			return NO("attribute 'num_groups' is missing");
		*groups = attr_i(k, "num_groups", 1);
		if (*groups <= 0 || C % *groups)
			return NO("num_groups %lld does not divide the %lld channels", (long long)*groups,
				  (long long)C);
		int64_t sn = has_in(k, 1) ? cuda_numel(&k->in[1]) : 0;
		*per_group = sn == *groups && sn != C;
	}
	int64_t np = *per_group ? *groups : C;
	return vec_ok(k, 1, np, "scale", why, size) && vec_ok(k, 2, np, "bias", why, size);
}

static bool supports_groupnorm(const struct cuda_kctx *k, char *why, size_t size)
{
	int64_t g;
	bool pg;
	return groupnorm_setup(k, &g, &pg, why, size);
}

static int run_groupnorm(struct cuda_kctx *k)
{
	int64_t groups, N, C, S;
	bool per_group;
	char why[160];
	if (!groupnorm_setup(k, &groups, &per_group, why, sizeof(why)) || !ncs(&k->in[0], &N, &C, &S, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const char *impl = NULL;
	cudaError_t e = rd_groupnorm(k->in[0].dtype, N, C, S, groups, per_group, attr_f(k, "epsilon", 1e-5f),
				     k->in[0].data, k->out[0].data, k->in[1].data, k->in[1].dtype, k->in[2].data,
				     k->in[2].dtype, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_groupnorm", k->d);
}

static bool supports_batchnorm(const struct cuda_kctx *k, char *why, size_t size)
{
	const struct ir_attr *sp = ir_node_attr(k->node, "spatial");
	if (sp && sp->type == IR_ATTR_INT && sp->i == 0)
		return NO("spatial=0 is not supported");
	bool training;
	if (k->opset >= 14)
		training = attr_i(k, "training_mode", 0) != 0;
	else
		training = wants_out(k, 1) && !(k->opset < 7 && attr_i(k, "is_test", 0));
	if (training)
		return NO("training mode is not supported on the GPU");
	int64_t N, C, S;
	if (!ncs(&k->in[0], &N, &C, &S, why, size))
		return false;
	return vec_ok(k, 1, C, "scale", why, size) && vec_ok(k, 2, C, "bias", why, size) &&
	       vec_ok(k, 3, C, "mean", why, size) && vec_ok(k, 4, C, "var", why, size);
}

static int run_batchnorm(struct cuda_kctx *k)
{
	int64_t N, C, S;
	char why[160];
	if (!supports_batchnorm(k, why, sizeof(why)) || !ncs(&k->in[0], &N, &C, &S, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const char *impl = NULL;
	cudaError_t e = rd_batchnorm(k->in[0].dtype, N, C, S, attr_f(k, "epsilon", 1e-5f), k->in[0].data, k->out[0].data,
				     k->in[1].data, k->in[1].dtype, k->in[2].data, k->in[2].dtype, k->in[3].data,
				     k->in[3].dtype, k->in[4].data, k->in[4].dtype, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_batchnorm", k->d);
}

/* ------------------------------------------------------------------------ */
/* LpNormalization, MeanVarianceNormalization                                */
/* ------------------------------------------------------------------------ */

static bool lpnorm_setup(const struct cuda_kctx *k, int *p, int64_t *outer, int64_t *n, int64_t *inner, char *why,
			 size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype))
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	if (x->rank == 0)
		return NO("a scalar input is not supported on the GPU");
	int axis;
	if (!norm_axis(attr_i(k, "axis", -1), x->rank, &axis))
		return NO("axis %lld is out of range", (long long)attr_i(k, "axis", -1));
	int64_t pp = attr_i(k, "p", 2);
	if (pp != 1 && pp != 2)
		return NO("p must be 1 or 2, not %lld", (long long)pp);
	*p = (int)pp;
	split_axis(x, axis, outer, n, inner);
	return true;
}

static bool supports_lpnorm(const struct cuda_kctx *k, char *why, size_t size)
{
	int p;
	int64_t o, n, i;
	return lpnorm_setup(k, &p, &o, &n, &i, why, size);
}

static int run_lpnorm(struct cuda_kctx *k)
{
	int p;
	int64_t outer, n, inner;
	char why[160];
	if (!lpnorm_setup(k, &p, &outer, &n, &inner, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const char *impl = NULL;
	cudaError_t e = rd_lpnorm(k->in[0].dtype, p, outer, n, inner, k->in[0].data, k->out[0].data, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_lpnorm", k->d);
}

static bool mvn_setup(const struct cuda_kctx *k, struct rd_plan *p, int64_t *sstr, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype))
		return NO("dtype %s is not supported on the GPU", dtname(x->dtype));
	if (x->rank > RD_MAX_DIMS)
		return NO("rank %d is too large for the GPU kernel", x->rank);
	static const int64_t dflt[3] = { 0, 2, 3 };
	int na;
	const int64_t *axes = attr_ints(k, "axes", &na);
	if (!axes) {
		axes = dflt;
		na = 3;
	}
	bool red[IR_MAX_RANK] = { false };
	for (int i = 0; i < na; i++) {
		int ax;
		if (x->rank == 0)
			continue;
		if (!norm_axis(axes[i], x->rank, &ax))
			return NO("axis %lld is out of range", (long long)axes[i]);
		if (red[ax])
			return NO("axis %lld appears twice in axes", (long long)axes[i]);
		red[ax] = true;
	}
	int64_t ns = 1;
	for (int d = x->rank - 1; d >= 0; d--) {
		if (red[d]) {
			sstr[d] = 0;
		} else {
			sstr[d] = ns;
			ns *= x->dims[d];
		}
	}
	if (!plan_build(p, x, red))
		return NO("too many dims to reduce on the GPU");
	return true;
}

static bool supports_mvn(const struct cuda_kctx *k, char *why, size_t size)
{
	struct rd_plan p;
	int64_t sstr[IR_MAX_RANK];
	return mvn_setup(k, &p, sstr, why, size);
}

static int prepare_mvn(struct cuda_kctx *k)
{
	struct rd_plan p;
	int64_t sstr[IR_MAX_RANK];
	char why[160];
	if (!mvn_setup(k, &p, sstr, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	k->ws_bytes = sizeof(float) * 2 * (size_t)(p.nout > 0 ? p.nout : 1);
	snprintf(k->impl, sizeof(k->impl), "ogsh mvn stats+apply");
	return 0;
}

static int run_mvn(struct cuda_kctx *k)
{
	struct rd_plan p;
	int64_t sstr[IR_MAX_RANK];
	char why[160];
	if (!mvn_setup(k, &p, sstr, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	if (k->ws_bytes < sizeof(float) * 2 * (size_t)(p.nout > 0 ? p.nout : 1) || !k->ws)
		return ir_diag_err(k->d, IR_ERR, "the workspace is too small");
	const char *impl = NULL;
	cudaError_t e = rd_mvn(k->in[0].dtype, &p, k->in[0].rank, k->in[0].dims, sstr, k->in[0].data, k->out[0].data,
			       k->ws, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_mvn", k->d);
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

/* Heads, sequence, head size and strides of a 4-D [B, H, S, D] (bshd: [B, S, H, D]) or 3-D [B, S, H*D] input. */
static bool attn_view(const struct cuda_tensor *t, const char *what, int64_t heads, bool bshd, int64_t *h,
		      int64_t *seq, int64_t *hs, int64_t *sb, int64_t *sh, int64_t *ss, char *why, size_t size)
{
	if (t->rank == 4) {   /* heads on axis 1, or 2 with bshd */
		const int hx = bshd ? 2 : 1, sx = 3 - hx;
		const int64_t st[3] = { t->dims[1] * t->dims[2] * t->dims[3], t->dims[2] * t->dims[3], t->dims[3] };
		*h = t->dims[hx];
		*seq = t->dims[sx];
		*hs = t->dims[3];
		*sb = st[0];
		*sh = st[hx];
		*ss = st[sx];
		return true;
	}
	if (heads <= 0)
		return NO("%s is 3-D: q_num_heads and kv_num_heads must be positive", what);
	if (t->dims[2] % heads)
		return NO("%s's last dimension is not a multiple of its heads", what);
	*h = heads;
	*seq = t->dims[1];
	*hs = t->dims[2] / heads;
	*sh = *hs;
	*ss = t->dims[2];
	*sb = *seq * *ss;
	return true;
}

/* The string attribute `name` of the node, or NULL. */
static const char *attr_str(const struct cuda_kctx *k, const char *name)
{
	const struct ir_attr *a = ir_node_attr(k->node, name);
	return a && a->type == IR_ATTR_STRING && a->s.data ? a->s.data : NULL;
}

/* One of Q (which 0), K, V of FusedAttention's packed input 0: its strides, and its
 * offset from the input's start in elements (K and V are Q's pointer moved on). */
static bool attn_packed_view(const struct ir_attn_layout *l, const struct cuda_tensor *t, int which, int64_t heads,
			     int64_t *h, int64_t *seq, int64_t *hs, int64_t *sb, int64_t *sh, int64_t *ss, int64_t *off,
			     char *why, size_t size)
{
	struct ir_attn_view w;
	if (ir_attn_view(l, which, t->rank, t->dims, heads, &w, why, size))
		return false;
	*h = w.h;
	*seq = w.s;
	*hs = w.d;
	*sb = w.sb;
	*sh = w.sh;
	*ss = w.ss;
	*off = w.off;
	return true;
}

/*
 * Attention, and ogsh's FusedAttention: its layout (Q, K, V packed in input
 * 0 included: off[] gets where K and V start, in elements past Q's pointer),
 * out_layout, nan_to_zero and a mask broadcast as numpy's.
 */
static bool attn_setup(const struct cuda_kctx *k, struct rd_attn *a, int64_t off[3], char *why, size_t size)
{
	memset(a, 0, sizeof(*a));
	off[0] = off[1] = off[2] = 0;
	const bool fused = k->node->op == IR_OP_ogsh_FusedAttention;
	struct ir_attn_layout al;
	if (ir_attn_layout_parse(fused ? attr_str(k, "layout") : NULL, fused ? attr_str(k, "out_layout") : NULL, &al,
				 why, size))
		return false;
	if (al.packed && (has_in(k, 1) || has_in(k, 2)))
		return NO("layout %s packs Q, K and V in input 0: inputs 1 and 2 must be omitted", al.in);
	if (!al.packed && (!has_in(k, 1) || !has_in(k, 2)))
		return NO("K and V are missing (layout %s does not pack them in input 0)", al.in);
	const struct cuda_tensor *Q = &k->in[0], *K = al.packed ? Q : &k->in[1], *V = al.packed ? Q : &k->in[2];
	const bool bshd = !strcmp(al.in, "BSHD");
	a->nan_zero = fused && attr_i(k, "nan_to_zero", 0) != 0;
	if (!cuda_is_float(Q->dtype))
		return NO("dtype %s is not supported on the GPU", dtname(Q->dtype));
	if (K->dtype != Q->dtype || V->dtype != Q->dtype)
		return NO("Q, K and V of different types are not supported on the GPU");
	if (has_in(k, 4) || has_in(k, 5))
		return NO("past_key/past_value are not supported on the GPU");
	if (has_in(k, 6))
		return NO("nonpad_kv_seqlen is not supported on the GPU");
	for (int o = 1; o <= 3; o++)
		if (wants_out(k, o))
			return NO("output %d (present key/value or qk) is not supported on the GPU", o);
	if (attr_f(k, "softcap", 0) != 0)
		return NO("softcap is not supported on the GPU");
	if (!al.packed && ((Q->rank != 3 && Q->rank != 4) || K->rank != Q->rank || V->rank != Q->rank))
		return NO("Q, K and V must all be 3-D or all 4-D");
	int64_t qh = attr_i(k, "q_num_heads", 0), kvh = attr_i(k, "kv_num_heads", 0);
	int64_t Lk, Dk, Hv, Lv;
	if (al.packed) {
		if (!attn_packed_view(&al, Q, 0, qh, &a->Hq, &a->Lq, &a->D, &a->q_sb, &a->q_sh, &a->q_ss, &off[0], why,
				      size) ||
		    !attn_packed_view(&al, Q, 1, qh, &a->Hkv, &Lk, &Dk, &a->k_sb, &a->k_sh, &a->k_ss, &off[1], why, size) ||
		    !attn_packed_view(&al, Q, 2, qh, &Hv, &Lv, &a->Dv, &a->v_sb, &a->v_sh, &a->v_ss, &off[2], why, size))
			return false;
		struct ir_attn_view w;
		if (ir_attn_view(&al, 0, Q->rank, Q->dims, qh, &w, why, size))
			return false;
		a->B = w.b;
	} else {
		if (!attn_view(Q, "Q", qh, bshd, &a->Hq, &a->Lq, &a->D, &a->q_sb, &a->q_sh, &a->q_ss, why, size) ||
		    !attn_view(K, "K", kvh, bshd, &a->Hkv, &Lk, &Dk, &a->k_sb, &a->k_sh, &a->k_ss, why, size) ||
		    !attn_view(V, "V", kvh, bshd, &Hv, &Lv, &a->Dv, &a->v_sb, &a->v_sh, &a->v_ss, why, size))
			return false;
		a->B = Q->dims[0];
		if (K->dims[0] != a->B || V->dims[0] != a->B)
			return NO("Q, K and V have different batch sizes");
	}
	a->T = Lk;
	if (Hv != a->Hkv || Lv != Lk)
		return NO("K and V differ in heads or sequence length");
	if (Dk != a->D)
		return NO("Q's head size differs from K's");
	if (a->Hkv <= 0 || a->Hq % a->Hkv)
		return NO("q heads are not a multiple of kv heads");
	if (a->D > 256 || a->Dv > 256)
		return NO("head sizes over 256 are not supported on the GPU");
	if (a->Hq > 65535 || a->B > 65535 || (a->Lq + 15) / 16 > INT32_MAX)
		return NO("too many heads, batches or queries for the GPU kernel");
	if (al.packed || al.has_out) {
		int64_t yd[4];
		ir_attn_out(&al, a->B, a->Hq, a->Lq, a->Dv, yd, &a->y_sb, &a->y_sh, &a->y_ss);
	} else if (Q->rank == 4 && bshd) {
		a->y_sh = a->Dv;
		a->y_ss = a->Hq * a->Dv;
		a->y_sb = a->Lq * a->y_ss;
	} else if (Q->rank == 4) {
		a->y_ss = a->Dv;
		a->y_sh = a->Lq * a->Dv;
		a->y_sb = a->Hq * a->y_sh;
	} else {
		a->y_sh = a->Dv;
		a->y_ss = a->Hq * a->Dv;
		a->y_sb = a->Lq * a->y_ss;
	}
	if (cuda_numel(&k->out[0]) != a->B * a->Hq * a->Lq * a->Dv || k->out[0].dtype != Q->dtype)
		return NO("the output's shape or type does not match");
	a->causal = attr_i(k, "is_causal", 0) != 0;
	a->scale = attr_has(k, "scale") ? attr_f(k, "scale", 0) : (float)(1.0 / sqrt((double)a->D));
	if (has_in(k, 3)) {
		const struct cuda_tensor *M = &k->in[3];
		if (M->rank < 1 || M->rank > 4)
			return NO("attn_mask must have rank 1 to 4");
		if (M->dtype != IR_BOOL && !float_or_double(M->dtype))
			return NO("attn_mask of type %s is not supported on the GPU", dtname(M->dtype));
		int64_t mdims[4] = { 1, 1, 1, 1 };
		int64_t want[4] = { a->B, a->Hq, a->Lq, a->T };
		int64_t s = 1;
		for (int i = 3, j = M->rank - 1; j >= 0; i--, j--) {
			mdims[i] = M->dims[j];
			if (i < 3 && mdims[i] != 1 && mdims[i] != want[i])
				return NO("attn_mask does not broadcast");
			a->mstr[i] = mdims[i] == 1 && i < 3 ? 0 : s;
			s *= mdims[i];
		}
		if (mdims[3] > a->T)
			return NO("attn_mask's last dimension is longer than the keys");
		a->mask_dtype = M->dtype;
		a->mcols = mdims[3];
		if (fused && M->dtype == IR_BOOL)
			return NO("FusedAttention's mask is additive, not bool");
		if (fused && mdims[3] == 1) {   /* numpy broadcasting: one column for every key */
			a->mstr[3] = 0;
			a->mcols = a->T;
		} else if (fused && mdims[3] != a->T) {
			return NO("the mask does not broadcast to the keys");
		}
	}
	return true;
}

static bool supports_attention(const struct cuda_kctx *k, char *why, size_t size)
{
	struct rd_attn a;
	int64_t off[3];
	return attn_setup(k, &a, off, why, size);
}

/*
 * float16/bfloat16 attention through cuDNN's fused flash-attention engines
 * (k_sdpa.c) when cuDNN plans it; ogsh's own kernels otherwise, and for
 * what the graph does not express: a row whose every key is masked is NaN by
 * the softmax's definition, and zeros on cuDNN, so a mask (or a causal limit
 * with more queries than keys) goes to cuDNN only with FusedAttention's
 * nan_to_zero, which asks for those zeros. The mask goes in as cuDNN's additive bias: in place
 * when it is [b|1, h|1, Lq, T] of the attention's type with rows 16-byte
 * aligned, else made by rd_attn_bias into the workspace on every run.
 * OGSH_ATTN_CUDNN=0 turns the path off (read once).
 */
struct attn_state {
	struct sdpa *sd;
	bool mask, mask_direct;
	int64_t bm, hm, tp;     /* the materialized bias: [bm, hm, Lq, T], rows tp apart */
	size_t bias_off;        /* where it starts in the workspace */
};

static void release_attention(void *p)
{
	struct attn_state *st = p;
	if (!st)
		return;
	sdpa_free(st->sd);
	free(st);
}

static bool attn_cudnn_on(void)
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("OGSH_ATTN_CUDNN");
		v = !(e && !strcmp(e, "0"));
	}
	return v == 1;
}

static size_t up256(size_t n)
{
	return (n + 255) / 256 * 256;
}

static int prepare_attention(struct cuda_kctx *k)
{
	struct rd_attn a;
	int64_t off[3];
	char why[200];
	if (!attn_setup(k, &a, off, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const int dt = k->in[0].dtype;
	if (!attn_cudnn_on() || (dt != IR_FLOAT16 && dt != IR_BFLOAT16))
		return 0;
	const bool mask = has_in(k, 3);
	const char *skip = NULL;
	const int64_t st8[] = { a.q_sb, a.q_sh, a.q_ss, a.k_sb, a.k_sh, a.k_ss, a.v_sb, a.v_sh, a.v_ss, a.y_sb, a.y_sh, a.y_ss };
	for (size_t i = 0; i < sizeof(st8) / sizeof(st8[0]); i++)
		if (st8[i] % 8)
			skip = "a stride is not a multiple of 8 elements";
	if (a.D != a.Dv || a.D % 8 || a.D > 128)
		skip = "head sizes differ, or are not a multiple of 8 up to 128";
	if (off[1] % 8 || off[2] % 8)
		skip = "packed K or V does not start 16-byte aligned";
	/* a row every key of which is masked gives zeros on cuDNN (as nan_to_zero asks), NaN on ours (as
	 * the softmax of -inf everywhere is) */
	if (!a.nan_zero && (mask || (a.causal && a.Lq > a.T)))
		skip = "a row masked everywhere must give NaN (nan_to_zero is 0), and cuDNN gives zeros";
	if (a.Lq < 1 || a.T < 1)
		skip = "no queries or no keys";
	if (skip) {
		if (getenv("OGSH_CUDNN_DEBUG"))
			fprintf(stderr, "cudnn attention: %s: %s\n", k->node->name, skip);
		return 0;
	}
	struct attn_state *st = calloc(1, sizeof(*st));
	if (!st)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	struct sdpa_bias bias;
	if (mask) {
		const struct cuda_tensor *M = &k->in[3];
		int64_t md[4] = { 1, 1, 1, 1 };
		for (int i = 3, j = M->rank - 1; j >= 0; i--, j--)
			md[i] = M->dims[j];
		st->mask = true;
		st->bm = md[0];
		st->hm = md[1];
		st->mask_direct = M->dtype == dt && md[2] == a.Lq && md[3] == a.T && a.mstr[3] == 1 && a.mstr[2] % 8 == 0 &&
				  (md[0] == 1 || a.mstr[0] % 8 == 0) && (md[1] == 1 || a.mstr[1] % 8 == 0);
		bias.dims[0] = st->bm, bias.dims[1] = st->hm, bias.dims[2] = a.Lq, bias.dims[3] = a.T;
		if (st->mask_direct) {
			bias.strides[3] = 1;
			bias.strides[2] = a.mstr[2];
			bias.strides[1] = md[1] == 1 ? a.Lq * a.mstr[2] : a.mstr[1];
			bias.strides[0] = md[0] == 1 ? st->hm * bias.strides[1] : a.mstr[0];
		} else {
			st->tp = (a.T + 7) / 8 * 8;
			bias.strides[3] = 1;
			bias.strides[2] = st->tp;
			bias.strides[1] = a.Lq * st->tp;
			bias.strides[0] = st->hm * a.Lq * st->tp;
		}
	}
	struct ir_diag quiet;
	ir_diag_init(&quiet);
	const struct cudnn_api *api = cuda_cudnn(&quiet);
	void *h = api ? cuda_cudnn_handle(k->ctx, &quiet) : NULL;
	st->sd = h ? sdpa_new(api, h, dt, &a, mask ? &bias : NULL, &quiet) : NULL;
	if (!st->sd) {
		if (getenv("OGSH_CUDNN_DEBUG"))
			fprintf(stderr,
				"cudnn attention: %s: %s (B %lld Hq %lld Hkv %lld Lq %lld T %lld D %lld; q %lld %lld %lld, k %lld %lld %lld, "
				"y %lld %lld %lld; mask %d causal %d)\n",
				k->node->name, quiet.error ? quiet.error : "no reason given", (long long)a.B, (long long)a.Hq,
				(long long)a.Hkv, (long long)a.Lq, (long long)a.T, (long long)a.D, (long long)a.q_sb,
				(long long)a.q_sh, (long long)a.q_ss, (long long)a.k_sb, (long long)a.k_sh, (long long)a.k_ss,
				(long long)a.y_sb, (long long)a.y_sh, (long long)a.y_ss, mask, a.causal);
		ir_diag_clear(&quiet);
		free(st);
		return 0;
	}
	ir_diag_clear(&quiet);
	k->state = st;
	st->bias_off = up256((size_t)sdpa_ws(st->sd));
	k->ws_bytes = st->bias_off;
	if (mask && !st->mask_direct)
		k->ws_bytes += (size_t)(st->bm * st->hm * a.Lq * st->tp) * 2;
	snprintf(k->impl, sizeof(k->impl), "cudnn sdpa engine %d%s", sdpa_engine(st->sd),
		 mask ? (st->mask_direct ? " +bias" : " +bias (converted)") : "");
	if (getenv("OGSH_CUDNN_DEBUG"))
		fprintf(stderr, "cudnn attention: %s: planned: %s, workspace %zu bytes\n", k->node->name, k->impl, k->ws_bytes);
	return 0;
}

/* Whether the pointers of this run suit the cuDNN plan: 16-byte aligned. */
static bool attn_ptrs_ok(const void *q, const void *kp, const void *vp, const void *y, const void *m)
{
	const void *p[] = { q, kp, vp, y, m };
	for (size_t i = 0; i < 5; i++)
		if ((uintptr_t)p[i] % 16)
			return false;
	return true;
}

static int run_attention(struct cuda_kctx *k)
{
	struct rd_attn a;
	int64_t off[3];
	char why[200];
	if (!attn_setup(k, &a, off, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	if (has_in(k, 3))
		a.mask = k->in[3].data;
	const void *q = k->in[0].data;
	const void *kp = has_in(k, 1) ? k->in[1].data : NULL, *vp = has_in(k, 2) ? k->in[2].data : NULL;
	if (off[1] || off[2]) {   /* packed: K and V are further on in input 0 */
		const size_t es = (size_t)(ir_dtype_bits(k->in[0].dtype) / 8);
		kp = (const char *)q + (size_t)off[1] * es;
		vp = (const char *)q + (size_t)off[2] * es;
	}
	struct attn_state *st = k->state;
	if (st && st->sd) {
		void *bias = st->mask ? (void *)a.mask : NULL;
		if (st->mask && !st->mask_direct) {
			bias = (char *)k->ws + st->bias_off;
			if (cuda_check(rd_attn_bias(k->in[0].dtype, &a, st->bm, st->hm, st->tp, bias, k->ctx->stream),
				       "rd_attn_bias", k->d))
				return IR_ERR;
		}
		if (attn_ptrs_ok(q, kp, vp, k->out[0].data, bias)) {
			void *h = cuda_cudnn_handle(k->ctx, k->d);
			if (!h)
				return IR_ERR;
			return sdpa_run(st->sd, h, q, kp, vp, bias, k->out[0].data, k->ws, k->d);
		}
	}
	const char *impl = NULL;
	cudaError_t e = rd_attention(k->in[0].dtype, &a, q, kp, vp, k->out[0].data, k->ctx->stream, &impl);
	if (impl)
		snprintf(k->impl, sizeof(k->impl), "%s", impl);
	return cuda_check(e, "rd_attention", k->d);
}

const struct cuda_kernel cuda_k_reduce[] = {
	{ IR_OP_ReduceSum, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceMean, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceMax, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceMin, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceProd, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceL1, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceL2, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceSumSquare, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceLogSumExp, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ReduceLogSum, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_GlobalAveragePool, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_GlobalMaxPool, supports_reduce, NULL, run_reduce, NULL },
	{ IR_OP_ArgMax, supports_arg, NULL, run_arg, NULL },
	{ IR_OP_ArgMin, supports_arg, NULL, run_arg, NULL },
	{ IR_OP_Softmax, supports_softmax, NULL, run_softmax, NULL },
	{ IR_OP_LogSoftmax, supports_softmax, NULL, run_softmax, NULL },
	{ IR_OP_TopK, supports_topk, NULL, run_topk, NULL },
	{ IR_OP_LayerNormalization, supports_rownorm, NULL, run_rownorm, NULL },
	{ IR_OP_ogsh_LayerNormalization, supports_rownorm, NULL, run_rownorm, NULL },
	{ IR_OP_RMSNormalization, supports_rownorm, NULL, run_rownorm, NULL },
	{ IR_OP_BatchNormalization, supports_batchnorm, NULL, run_batchnorm, NULL },
	{ IR_OP_InstanceNormalization, supports_groupnorm, NULL, run_groupnorm, NULL },
	{ IR_OP_GroupNormalization, supports_groupnorm, NULL, run_groupnorm, NULL },
	{ IR_OP_LpNormalization, supports_lpnorm, NULL, run_lpnorm, NULL },
	{ IR_OP_MeanVarianceNormalization, supports_mvn, prepare_mvn, run_mvn, NULL },
	{ IR_OP_Attention, supports_attention, prepare_attention, run_attention, release_attention },
	{ IR_OP_ogsh_FusedAttention, supports_attention, prepare_attention, run_attention, release_attention },
	{ .op = -1 },
};
