/*
 * k_reduce.c - CPU kernels: reductions (ReduceSum, ReduceMean, ReduceMax,
 * ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
 * ReduceSumSquare), ArgMax/ArgMin and the softmax family (Softmax,
 * LogSoftmax, Hardmax).
 *
 * Floating-point inputs accumulate in double and are rounded once when
 * stored; integer inputs accumulate exactly in 64-bit (wrapping) where the
 * result is an integer (sum, product, max...).
 */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

/* Whether the kernels here can read elements of this dtype. */
static bool numeric_dtype(int dtype)
{
	return dtype != IR_STRING && dtype != IR_UNDEFINED && ir_dtype_valid(dtype);
}

/* The smallest and largest values of an integer (or bool) dtype. */
static void int_limits(int dtype, int64_t *lo, int64_t *hi)
{
	switch (dtype) {
	case IR_BOOL: *lo = 0; *hi = 1; return;
	case IR_INT8: *lo = INT8_MIN; *hi = INT8_MAX; return;
	case IR_UINT8: *lo = 0; *hi = UINT8_MAX; return;
	case IR_INT16: *lo = INT16_MIN; *hi = INT16_MAX; return;
	case IR_UINT16: *lo = 0; *hi = UINT16_MAX; return;
	case IR_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return;
	case IR_UINT32: *lo = 0; *hi = UINT32_MAX; return;
	case IR_INT4: *lo = -8; *hi = 7; return;
	case IR_UINT4: *lo = 0; *hi = 15; return;
	case IR_INT2: *lo = -2; *hi = 1; return;
	case IR_UINT2: *lo = 0; *hi = 3; return;
	/* uint64 past INT64_MAX is not representable in the int64 path */
	default: *lo = INT64_MIN; *hi = INT64_MAX; return;
	}
}

/* ------------------------------------------------------------------------ */
/* Reduce*                                                                   */
/* ------------------------------------------------------------------------ */

enum rop { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LSE, R_SUMSQ };

/*
 * How one reduction walks its input: the kept axes (in output order) and
 * the reduced axes, each with its input strides, adjacent axes of the same
 * kind merged and axes of size 1 dropped.
 */
struct rplan {
	int nk, nr;
	int64_t kdims[IR_MAX_RANK], kstr[IR_MAX_RANK];
	int64_t rdims[IR_MAX_RANK], rstr[IR_MAX_RANK];
	uint64_t nout, nred;      /* output elements; input elements per output */
	int orank;
	int64_t odims[IR_MAX_RANK];
};

/* Builds the plan for reducing x over the axes flagged in red[] (rank entries). */
static void rplan_build(struct rplan *p, const struct ir_tensor *x, const bool *red, bool keepdims)
{
	int64_t s[IR_MAX_RANK];
	kstrides(x->rank, x->dims, s);
	p->nk = p->nr = 0;
	p->nout = p->nred = 1;
	p->orank = 0;
	int last = -1;   /* kind of the last appended axis: 0 kept, 1 reduced */
	for (int d = 0; d < x->rank; d++) {
		int64_t n = x->dims[d];
		if (red[d]) {
			p->nred *= (uint64_t)n;
			if (keepdims)
				p->odims[p->orank++] = 1;
		} else {
			p->nout *= (uint64_t)n;
			p->odims[p->orank++] = n;
		}
		if (n == 1)
			continue;
		int kind = red[d] ? 1 : 0;
		int64_t *dims = kind ? p->rdims : p->kdims;
		int64_t *str = kind ? p->rstr : p->kstr;
		int *cnt = kind ? &p->nr : &p->nk;
		if (last == kind && *cnt > 0 && str[*cnt - 1] == n * s[d]) {
			/* contiguous with the previous axis of the same kind: merge */
			dims[*cnt - 1] *= n;
			str[*cnt - 1] = s[d];
		} else {
			dims[*cnt] = n;
			str[*cnt] = s[d];
			(*cnt)++;
		}
		last = kind;
	}
}

/* The running state of one output element's reduction. */
struct racc {
	enum rop op;
	bool isint;
	double a;          /* float path accumulator */
	double m;          /* R_LSE: the shift (max of the finite values) */
	uint64_t ia;       /* int path accumulator (two's complement, wraps) */
	int64_t lo, hi;    /* int limits of the dtype (max/min identities) */
	bool flip;         /* uint64 max/min: elements are read with FLIP applied */
};

#define FLIP ((uint64_t)1 << 63)

static void racc_init(struct racc *a)
{
	switch (a->op) {
	case R_PROD: a->a = 1; a->ia = 1; break;
	case R_MAX: a->a = -INFINITY; a->ia = (uint64_t)a->lo; break;
	case R_MIN: a->a = INFINITY; a->ia = (uint64_t)a->hi; break;
	default: a->a = 0; a->ia = 0; break;
	}
}

#define CHUNK 256

static void racc_chunk_f(struct racc *a, const double *v, int n)
{
	double s = a->a;
	switch (a->op) {
	case R_SUM: case R_MEAN: case R_LOGSUM:
		for (int j = 0; j < n; j++)
			s += v[j];
		break;
	case R_MAX:
		/* a NaN propagates (as numpy's maximum.reduce): once s is NaN no
		 * comparison replaces it but another NaN */
		for (int j = 0; j < n; j++)
			if (v[j] > s || isnan(v[j]))
				s = v[j];
		break;
	case R_MIN:
		for (int j = 0; j < n; j++)
			if (v[j] < s || isnan(v[j]))
				s = v[j];
		break;
	case R_PROD:
		for (int j = 0; j < n; j++)
			s *= v[j];
		break;
	case R_L1:
		for (int j = 0; j < n; j++)
			s += fabs(v[j]);
		break;
	case R_L2: case R_SUMSQ:
		for (int j = 0; j < n; j++)
			s += v[j] * v[j];
		break;
	case R_LSE:
		for (int j = 0; j < n; j++)
			s += exp(v[j] - a->m);
		break;
	}
	a->a = s;
}

static void racc_chunk_i(struct racc *a, const int64_t *v, int n)
{
	uint64_t s = a->ia;
	switch (a->op) {
	case R_SUM: case R_MEAN:
		for (int j = 0; j < n; j++)
			s += (uint64_t)v[j];
		break;
	case R_MAX:
		for (int j = 0; j < n; j++)
			if (v[j] > (int64_t)s)
				s = (uint64_t)v[j];
		break;
	case R_MIN:
		for (int j = 0; j < n; j++)
			if (v[j] < (int64_t)s)
				s = (uint64_t)v[j];
		break;
	case R_PROD:
		for (int j = 0; j < n; j++)
			s *= (uint64_t)v[j];
		break;
	case R_L1:
		for (int j = 0; j < n; j++)
			s += v[j] < 0 ? -(uint64_t)v[j] : (uint64_t)v[j];
		break;
	case R_SUMSQ:
		for (int j = 0; j < n; j++)
			s += (uint64_t)v[j] * (uint64_t)v[j];
		break;
	default:
		break;
	}
	a->ia = s;
}

/* Feeds n elements of x starting at element `off`, `stride` apart. */
static void racc_run(struct racc *a, const struct ir_tensor *x, int64_t off, int64_t stride, int64_t n)
{
	const void *data = kdata(x);
	if (a->isint) {
		int64_t buf[CHUNK];
		while (n > 0) {
			int m = n < CHUNK ? (int)n : CHUNK;
			for (int j = 0; j < m; j++)
				buf[j] = kldi(x->dtype, data, (uint64_t)(off + j * stride));
			if (a->flip)
				for (int j = 0; j < m; j++)
					buf[j] = (int64_t)((uint64_t)buf[j] ^ FLIP);
			racc_chunk_i(a, buf, m);
			off += m * stride;
			n -= m;
		}
		return;
	}
	double buf[CHUNK];
	while (n > 0) {
		int m = n < CHUNK ? (int)n : CHUNK;
		if (x->dtype == IR_FLOAT) {
			const float *f = (const float *)data + off;
			for (int j = 0; j < m; j++)
				buf[j] = f[j * stride];
		} else if (x->dtype == IR_DOUBLE) {
			const double *f = (const double *)data + off;
			for (int j = 0; j < m; j++)
				buf[j] = f[j * stride];
		} else {
			for (int j = 0; j < m; j++)
				buf[j] = kld(x->dtype, data, (uint64_t)(off + j * stride));
		}
		racc_chunk_f(a, buf, m);
		off += m * stride;
		n -= m;
	}
}

/* Feeds every reduced element of the output element whose input offset is `base`. */
static void racc_all(struct racc *a, const struct rplan *p, const struct ir_tensor *x, int64_t base)
{
	if (p->nred == 0)
		return;
	if (p->nr == 0) {
		racc_run(a, x, base, 1, 1);
		return;
	}
	/* the innermost reduced axis is a run; an odometer walks the others */
	int outer = p->nr - 1;
	int64_t idx[IR_MAX_RANK] = { 0 };
	int64_t off = base;
	for (;;) {
		racc_run(a, x, off, p->rstr[outer], p->rdims[outer]);
		int j = outer - 1;
		for (; j >= 0; j--) {
			if (++idx[j] < p->rdims[j]) {
				off += p->rstr[j];
				break;
			}
			off -= p->rstr[j] * (p->rdims[j] - 1);
			idx[j] = 0;
		}
		if (j < 0)
			break;
	}
}

/* R_LSE's shift: the largest finite element (0 when there is none), so
 * that +inf elements give +inf and all -inf give -inf. */
static double lse_shift(const struct rplan *p, const struct ir_tensor *x, int64_t base)
{
	if (p->nred == 0)
		return 0;
	double best = -INFINITY;
	bool any = false;
	int outer = p->nr - 1;
	int64_t idx[IR_MAX_RANK] = { 0 };
	int64_t off = base;
	const void *data = kdata(x);
	for (;;) {
		int64_t n = p->nr ? p->rdims[outer] : 1, st = p->nr ? p->rstr[outer] : 1;
		for (int64_t j = 0; j < n; j++) {
			double v = kld(x->dtype, data, (uint64_t)(off + j * st));
			if (isfinite(v) && (!any || v > best)) {
				best = v;
				any = true;
			}
		}
		if (p->nr == 0)
			break;
		int j = outer - 1;
		for (; j >= 0; j--) {
			if (++idx[j] < p->rdims[j]) {
				off += p->rstr[j];
				break;
			}
			off -= p->rstr[j] * (p->rdims[j] - 1);
			idx[j] = 0;
		}
		if (j < 0)
			break;
	}
	return any ? best : 0;
}

static double racc_final_f(const struct racc *a, uint64_t nred)
{
	switch (a->op) {
	case R_MEAN: return a->a / (double)nred;
	case R_L2: return sqrt(a->a);
	case R_LOGSUM: return log(a->a);
	case R_LSE: return log(a->a) + a->m;
	default: return a->a;
	}
}

/* Reads the axes of a Reduce* node: the `axes` input from `input_since`
 * on, the attribute before. *n is -1 when there are none. */
static int reduce_axes(struct cpu_kctx *k, int64_t input_since, int64_t *axes, int *n)
{
	*n = -1;
	if (k->opset >= input_since) {
		const struct ir_tensor *t = kin(k, 1);
		if (!t)
			return 0;
		if (t->rank > 1)
			return kerr(k, "axes must be 1-D, not %s", kshape(t));
		int r = kread_ints(k, t, axes, IR_MAX_RANK, "axes");
		if (r < 0)
			return IR_ERR;
		*n = r;
		return 0;
	}
	int na;
	const int64_t *a = kattr_ints(k, "axes", &na);
	if (!a)
		return 0;
	if (na > IR_MAX_RANK)
		return kerr(k, "axes has %d values, at most %d are allowed", na, IR_MAX_RANK);
	memcpy(axes, a, sizeof(*a) * (size_t)na);
	*n = na;
	return 0;
}

struct reduce_job {
	const struct rplan *p;
	const struct ir_tensor *x;
	void *y;
	struct racc a;   /* the op and limits; each output element starts from racc_init */
};

/* output elements [i0, i1) of a reduction */
static void reduce_range(void *ctx, int64_t i0, int64_t i1, int worker)
{
	const struct reduce_job *j = ctx;
	const struct rplan *p = j->p;
	const struct ir_tensor *x = j->x;
	struct racc a = j->a;
	enum rop op = a.op;
	void *y = j->y;
	int64_t kidx[IR_MAX_RANK] = { 0 };
	int64_t base = 0, rest = i0;
	(void)worker;
	for (int d = p->nk - 1; d >= 0; d--) {
		kidx[d] = rest % p->kdims[d];
		rest /= p->kdims[d];
		base += kidx[d] * p->kstr[d];
	}
	for (uint64_t i = (uint64_t)i0; i < (uint64_t)i1; i++) {
		racc_init(&a);
		if (op == R_LSE)
			a.m = lse_shift(p, x, base);
		racc_all(&a, p, x, base);
		if (a.isint) {
			int64_t v = (int64_t)(a.flip ? a.ia ^ FLIP : a.ia);
			if (op == R_MEAN)
				v = p->nred ? v / (int64_t)p->nred : 0;
			ksti(x->dtype, y, i, v);
		} else {
			double v = racc_final_f(&a, p->nred);
			if (x->dtype == IR_FLOAT)
				((float *)y)[i] = (float)v;
			else
				kst(x->dtype, y, i, v);
		}
		/* next output element: advance the kept-axes odometer */
		for (int d = p->nk - 1; d >= 0; d--) {
			if (++kidx[d] < p->kdims[d]) {
				base += p->kstr[d];
				break;
			}
			base -= p->kstr[d] * (p->kdims[d] - 1);
			kidx[d] = 0;
		}
	}
}

static int reduce_generic(struct cpu_kctx *k, enum rop op, int64_t input_since)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!numeric_dtype(x->dtype) || x->dtype == IR_COMPLEX64 || x->dtype == IR_COMPLEX128)
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int64_t axes[IR_MAX_RANK];
	int na;
	int rc = reduce_axes(k, input_since, axes, &na);
	if (rc)
		return rc;
	bool keepdims = kattr_i(k, "keepdims", 1) != 0;
	bool noop = kattr_i(k, "noop_with_empty_axes", 0) != 0;
	bool red[IR_MAX_RANK];
	for (int d = 0; d < x->rank; d++)
		red[d] = na <= 0 && !noop;   /* no axes: all of them, or none with noop */
	for (int i = 0; i < na; i++) {
		int ax;
		if (kaxis(k, axes[i], x->rank, &ax))
			return IR_ERR;
		if (x->rank == 0)
			continue;
		if (red[ax])
			return kerr(k, "axis %lld appears twice in axes", (long long)axes[i]);
		red[ax] = true;
	}

	struct rplan p;
	rplan_build(&p, x, red, keepdims);
	struct ir_tensor *o = kout(k, 0, x->dtype, p.orank, p.odims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	if (p.nout == 0)
		return 0;

	bool isint = !ir_dtype_is_float(x->dtype) && op != R_L2 && op != R_LOGSUM && op != R_LSE;
	struct racc a = { .op = op, .isint = isint };
	int_limits(x->dtype, &a.lo, &a.hi);
	/* uint64 max/min compare with the sign bit flipped (an order-preserving
	 * map onto int64), flipped back when stored */
	a.flip = x->dtype == IR_UINT64 && (op == R_MAX || op == R_MIN);
	if (a.flip) {
		a.lo = INT64_MIN;
		a.hi = INT64_MAX;
	}

	struct reduce_job j = { &p, x, y, a };
	if (ir_dtype_bits(x->dtype) < 8) {
		/* sub-byte elements share bytes: one thread */
		reduce_range(&j, 0, (int64_t)p.nout, 0);
		return 0;
	}
	return kpar(k, (int64_t)p.nout, kgrain((int64_t)p.nred), reduce_range, &j);
}

static int k_reduce_sum(struct cpu_kctx *k) { return reduce_generic(k, R_SUM, 13); }
static int k_reduce_mean(struct cpu_kctx *k) { return reduce_generic(k, R_MEAN, 18); }
static int k_reduce_max(struct cpu_kctx *k) { return reduce_generic(k, R_MAX, 18); }
static int k_reduce_min(struct cpu_kctx *k) { return reduce_generic(k, R_MIN, 18); }
static int k_reduce_prod(struct cpu_kctx *k) { return reduce_generic(k, R_PROD, 18); }
static int k_reduce_l1(struct cpu_kctx *k) { return reduce_generic(k, R_L1, 18); }
static int k_reduce_l2(struct cpu_kctx *k) { return reduce_generic(k, R_L2, 18); }
static int k_reduce_logsum(struct cpu_kctx *k) { return reduce_generic(k, R_LOGSUM, 18); }
static int k_reduce_lse(struct cpu_kctx *k) { return reduce_generic(k, R_LSE, 18); }
static int k_reduce_sumsq(struct cpu_kctx *k) { return reduce_generic(k, R_SUMSQ, 18); }

/* ------------------------------------------------------------------------ */
/* ArgMax, ArgMin                                                            */
/* ------------------------------------------------------------------------ */

/* Splits dims around axis: outer (before), n (the axis), inner (after). */
static void split_axis(const struct ir_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
	*outer = *inner = 1;
	*n = x->rank ? x->dims[axis] : 1;
	for (int d = 0; d < axis; d++)
		*outer *= x->dims[d];
	for (int d = axis + 1; d < x->rank; d++)
		*inner *= x->dims[d];
}

struct arg_job {
	const struct ir_tensor *x;
	int64_t *y;
	int64_t n, inner;
	bool is_max, last;
};

/* output elements [p0, p1) of an ArgMax or ArgMin */
static void arg_range(void *ctx, int64_t p0, int64_t p1, int worker)
{
	const struct arg_job *jb = ctx;
	const struct ir_tensor *x = jb->x;
	const void *data = kdata(x);
	int64_t n = jb->n, inner = jb->inner;
	bool is_max = jb->is_max, last = jb->last;
	bool useint = !ir_dtype_is_float(x->dtype);
	/* uint64 compares with the sign bit flipped (order-preserving onto int64) */
	uint64_t flip = x->dtype == IR_UINT64 ? FLIP : 0;
	(void)worker;
	for (int64_t pi = p0; pi < p1; pi++) {
		int64_t a = pi / inner, b = pi % inner;
		uint64_t off = (uint64_t)(a * n * inner + b);
		int64_t besti = 0;
		if (useint) {
			int64_t best = (int64_t)((uint64_t)kldi(x->dtype, data, off) ^ flip);
			for (int64_t j = 1; j < n; j++) {
				int64_t v = (int64_t)((uint64_t)kldi(x->dtype, data, off + (uint64_t)(j * inner)) ^ flip);
				bool better = is_max ? v > best : v < best;
				if (better || (last && v == best)) {
					best = v;
					besti = j;
				}
			}
		} else {
			/* the first NaN wins, as numpy's argmax/argmin */
			double best = kld(x->dtype, data, off);
			for (int64_t j = 1; j < n && !isnan(best); j++) {
				double v = kld(x->dtype, data, off + (uint64_t)(j * inner));
				bool better = isnan(v) || (is_max ? v > best : v < best);
				if (better || (last && v == best)) {
					best = v;
					besti = j;
				}
			}
		}
		jb->y[pi] = besti;
	}
}

static int arg_generic(struct cpu_kctx *k, bool is_max)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!numeric_dtype(x->dtype) || x->dtype == IR_COMPLEX64 || x->dtype == IR_COMPLEX128)
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int axis;
	if (kaxis(k, kattr_i(k, "axis", 0), x->rank, &axis))
		return IR_ERR;
	bool keepdims = kattr_i(k, "keepdims", 1) != 0;
	bool last = kattr_i(k, "select_last_index", 0) != 0;
	int64_t outer, n, inner;
	split_axis(x, axis, &outer, &n, &inner);
	if (n == 0 && outer * inner > 0)
		return kerr(k, "cannot take the %s over axis %d of size 0", is_max ? "argmax" : "argmin", axis);

	int64_t odims[IR_MAX_RANK];
	int orank = 0;
	for (int d = 0; d < x->rank; d++) {
		if (d == axis) {
			if (keepdims)
				odims[orank++] = 1;
		} else {
			odims[orank++] = x->dims[d];
		}
	}
	struct ir_tensor *o = kout(k, 0, IR_INT64, orank, odims);
	if (!o)
		return IR_ERR;
	int64_t *y = kwdata(o);
	struct arg_job j = { x, y, n, inner, is_max, last };
	return kpar(k, outer * inner, kgrain(n), arg_range, &j);
}

static int k_argmax(struct cpu_kctx *k) { return arg_generic(k, true); }
static int k_argmin(struct cpu_kctx *k) { return arg_generic(k, false); }

/* ------------------------------------------------------------------------ */
/* Softmax, LogSoftmax, Hardmax                                              */
/* ------------------------------------------------------------------------ */

enum smop { SM_SOFTMAX, SM_LOG, SM_HARD };

/*
 * The [outer, n, inner] view these ops work on. From opset 13 they act on
 * one axis (default -1); before, the input is coerced to 2-D at axis
 * (default 1) and the op acts on the whole second dimension.
 */
static int softmax_view(struct cpu_kctx *k, const struct ir_tensor *x, int64_t *outer, int64_t *n, int64_t *inner)
{
	bool v13 = k->opset >= 13;
	if (x->rank == 0) {
		*outer = *n = *inner = 1;
		return 0;
	}
	int64_t axis_attr = kattr_i(k, "axis", v13 ? -1 : 1);
	int axis;
	if (!v13 && axis_attr == x->rank) {
		axis = x->rank;   /* coercion at rank: [numel, 1] */
	} else if (kaxis(k, axis_attr, x->rank, &axis)) {
		return IR_ERR;
	}
	if (v13) {
		split_axis(x, axis, outer, n, inner);
		return 0;
	}
	*outer = *n = 1;
	*inner = 1;
	for (int d = 0; d < x->rank; d++) {
		if (d < axis)
			*outer *= x->dims[d];
		else
			*n *= x->dims[d];
	}
	return 0;
}

/* Float32 softmax/logsoftmax of one contiguous row (the hot case); the
 * softmax vectorized (cpu_fast_f32's, as attention's). */
static void softmax_row_f32(const float *x, float *y, int64_t n, bool logsm)
{
	if (!logsm) {
		cpu_fast_f32(CPU_FAST_SOFTMAX, x, y, n);
		return;
	}
	float mx = -INFINITY;
	for (int64_t j = 0; j < n; j++)
		if (x[j] > mx)
			mx = x[j];
	if (isinf(mx) && mx < 0)
		mx = 0;   /* all -inf: avoid -inf - -inf */
	double s = 0;
	for (int64_t j = 0; j < n; j++)
		s += expf(x[j] - mx);
	double ls = log(s) + mx;
	for (int64_t j = 0; j < n; j++)
		y[j] = (float)((double)x[j] - ls);
}

struct sm_job {
	const struct ir_tensor *x;
	void *y;
	int64_t outer, n, inner;
	enum smop op;
	char *scratch;   /* per worker: inner doubles (max), inner doubles (sum), inner int64 (argmax) */
};

/* rows [a0, a1) of the float32 softmax/logsoftmax over a contiguous axis */
static void sm_rows_f32(void *ctx, int64_t a0, int64_t a1, int worker)
{
	const struct sm_job *j = ctx;
	int64_t n = j->n;
	(void)worker;
	for (int64_t a = a0; a < a1; a++)
		softmax_row_f32(KF32(j->x) + a * n, (float *)j->y + a * n, n, j->op == SM_LOG);
}

/* blocks [a0, a1) of [n, inner] elements: any dtype, any op */
static void sm_rows(void *ctx, int64_t a0, int64_t a1, int worker)
{
	const struct sm_job *j = ctx;
	const struct ir_tensor *x = j->x;
	const void *data = kdata(x);
	void *y = j->y;
	int64_t n = j->n, inner = j->inner;
	enum smop op = j->op;
	char *w = j->scratch + (size_t)worker * (size_t)inner * (2 * sizeof(double) + sizeof(int64_t));
	double *mx = (double *)w, *sum = mx + inner;
	int64_t *arg = (int64_t *)(sum + inner);
	for (int64_t a = a0; a < a1; a++) {
		uint64_t base = (uint64_t)(a * n * inner);
		for (int64_t b = 0; b < inner; b++) {
			mx[b] = -INFINITY;
			arg[b] = -1;
			sum[b] = 0;
		}
		/* max and its first index (the first NaN wins, as numpy's argmax) */
		for (int64_t jj = 0; jj < n; jj++)
			for (int64_t b = 0; b < inner; b++) {
				double v = kld(x->dtype, data, base + (uint64_t)(jj * inner + b));
				if (arg[b] < 0 || v > mx[b] || (isnan(v) && !isnan(mx[b]))) {
					mx[b] = v;
					arg[b] = jj;
				}
			}
		if (op == SM_HARD) {
			for (int64_t jj = 0; jj < n; jj++)
				for (int64_t b = 0; b < inner; b++)
					kst(x->dtype, y, base + (uint64_t)(jj * inner + b), jj == arg[b] ? 1.0 : 0.0);
			continue;
		}
		for (int64_t b = 0; b < inner; b++)
			if (isinf(mx[b]) && mx[b] < 0)
				mx[b] = 0;
		for (int64_t jj = 0; jj < n; jj++)
			for (int64_t b = 0; b < inner; b++)
				sum[b] += exp(kld(x->dtype, data, base + (uint64_t)(jj * inner + b)) - mx[b]);
		for (int64_t jj = 0; jj < n; jj++)
			for (int64_t b = 0; b < inner; b++) {
				uint64_t i = base + (uint64_t)(jj * inner + b);
				double v = kld(x->dtype, data, i) - mx[b];
				kst(x->dtype, y, i, op == SM_LOG ? v - log(sum[b]) : exp(v) / sum[b]);
			}
	}
}

static int softmax_generic(struct cpu_kctx *k, enum smop op)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!numeric_dtype(x->dtype) || x->dtype == IR_COMPLEX64 || x->dtype == IR_COMPLEX128)
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int64_t outer, n, inner;
	if (softmax_view(k, x, &outer, &n, &inner))
		return IR_ERR;
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	if (x->numel == 0)
		return 0;
	struct sm_job j = { x, y, outer, n, inner, op, NULL };
	if (x->dtype == IR_FLOAT && inner == 1 && op != SM_HARD)
		return kpar(k, outer, kgrain(3 * n), sm_rows_f32, &j);

	/* general case: columns of n elements `inner` apart, a block of
	 * `inner` columns at a time so that the reads stay sequential; each
	 * thread has its own max, sum and argmax columns */
	int threads = cpu_threads();
	j.scratch = kalloc_arr(k, (uint64_t)threads * (uint64_t)inner, 2 * sizeof(double) + sizeof(int64_t));
	if (!j.scratch)
		return IR_ENOMEM;
	int rc = 0;
	if (ir_dtype_bits(x->dtype) < 8)
		sm_rows(&j, 0, outer, 0);   /* sub-byte elements share bytes: one thread */
	else
		rc = kpar(k, outer, kgrain(4 * n * inner), sm_rows, &j);
	free(j.scratch);
	return rc;
}

static int k_softmax(struct cpu_kctx *k) { return softmax_generic(k, SM_SOFTMAX); }
static int k_logsoftmax(struct cpu_kctx *k) { return softmax_generic(k, SM_LOG); }
static int k_hardmax(struct cpu_kctx *k) { return softmax_generic(k, SM_HARD); }

const struct cpu_kernel cpu_kernels_reduce[] = {
	{ IR_OP_ReduceSum, k_reduce_sum, NULL },
	{ IR_OP_ReduceMean, k_reduce_mean, NULL },
	{ IR_OP_ReduceMax, k_reduce_max, NULL },
	{ IR_OP_ReduceMin, k_reduce_min, NULL },
	{ IR_OP_ReduceProd, k_reduce_prod, NULL },
	{ IR_OP_ReduceL1, k_reduce_l1, NULL },
	{ IR_OP_ReduceL2, k_reduce_l2, NULL },
	{ IR_OP_ReduceLogSum, k_reduce_logsum, NULL },
	{ IR_OP_ReduceLogSumExp, k_reduce_lse, NULL },
	{ IR_OP_ReduceSumSquare, k_reduce_sumsq, NULL },
	{ IR_OP_ArgMax, k_argmax, NULL },
	{ IR_OP_ArgMin, k_argmin, NULL },
	{ IR_OP_Softmax, k_softmax, NULL },
	{ IR_OP_LogSoftmax, k_logsoftmax, NULL },
	{ IR_OP_Hardmax, k_hardmax, NULL },
	{ -1, NULL, NULL },
};
