/*
 * k_norm.c - CPU kernels: normalizations (BatchNormalization,
 * InstanceNormalization, LayerNormalization, GroupNormalization,
 * RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN) and
 * the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
 *
 * Statistics are computed in double whatever the input type (which is at
 * least as precise as any stash_type) and each result is rounded once when
 * stored.
 */
#include "cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Input i as a floating-point tensor (required), NULL with an error otherwise. */
static const struct ir_tensor *kin_float(struct cpu_kctx *k, int i, const char *what)
{
	const struct ir_tensor *t = kin_req(k, i);
	if (t && !ir_dtype_is_float(t->dtype)) {
		kerr(k, "%s must be a floating-point tensor, not %s", what, ir_dtype_name(t->dtype));
		return NULL;
	}
	return t;
}

/* Checks that t is a 1-D tensor of n elements (a per-channel parameter). */
static int check_vec(struct cpu_kctx *k, const struct ir_tensor *t, int64_t n, const char *what)
{
	if (t->rank != 1 || t->dims[0] != n)
		return kerr(k, "%s must have shape [%lld], not %s", what, (long long)n, kshape(t));
	if (!ir_dtype_is_float(t->dtype))
		return kerr(k, "%s must be a floating-point tensor, not %s", what, ir_dtype_name(t->dtype));
	return 0;
}

/* Stores v as element i of a tensor of dtype. */
static inline void st(int dtype, void *y, uint64_t i, double v)
{
	if (dtype == IR_FLOAT)
		((float *)y)[i] = (float)v;
	else
		kst(dtype, y, i, v);
}

/* Element i of t as a double. */
static inline double ld(const struct ir_tensor *t, uint64_t i)
{
	if (t->dtype == IR_FLOAT)
		return KF32(t)[i];
	return kld(t->dtype, kdata(t), i);
}

/* ------------------------------------------------------------------------ */
/* LayerNormalization, RMSNormalization                                      */
/* ------------------------------------------------------------------------ */

/*
 * A parameter (scale or bias) broadcast to X. `simple` when its element
 * for X's element (row, col) is simply element col: it has exactly the
 * normalized shape (leading 1s aside).
 */
struct bparam {
	const struct ir_tensor *t;
	int64_t str[IR_MAX_RANK];
	bool simple;
};

static int bparam_init(struct cpu_kctx *k, struct bparam *bp, const struct ir_tensor *t,
		       const struct ir_tensor *x, int axis, const char *what)
{
	bp->t = t;
	if (!t)
		return 0;
	if (!ir_dtype_is_float(t->dtype))
		return kerr(k, "%s must be a floating-point tensor, not %s", what, ir_dtype_name(t->dtype));
	if (t->rank > x->rank)
		return kerr(k, "%s of shape %s does not broadcast to the input's %s", what, kshape(t), kshape(x));
	for (int j = 0; j < t->rank; j++) {
		int64_t d = t->dims[j], xd = x->dims[x->rank - t->rank + j];
		if (d != xd && d != 1)
			return kerr(k, "%s of shape %s does not broadcast to the input's %s", what, kshape(t), kshape(x));
	}
	kbcast_strides(t, x->rank, x->dims, bp->str);
	bp->simple = true;
	int64_t s = 1;
	for (int d = x->rank - 1; d >= 0; d--) {
		if (x->dims[d] == 1)
			continue;
		if (d >= axis ? bp->str[d] != s : bp->str[d] != 0)
			bp->simple = false;
		if (d >= axis)
			s *= x->dims[d];
	}
	return 0;
}

struct rownorm_job {
	const struct ir_tensor *x, *w, *b;
	void *yd, *mean_out, *inv_out;
	int sdt;
	int64_t cols;
	double eps;
	bool rms, simple;
	struct kiter it;   /* over x, with the offsets of w and b */
};

/*
 * float32 rows with a scale and bias of the normalized shape: the same
 * double arithmetic as the generic loop below, with the sums kept in 8
 * lanes (element c goes to lane c % 8, the lanes added in a fixed tree), so
 * the loops vectorize. The order depends neither on the ISA nor on the
 * threads: every build and thread count gives the same bits. Compiled
 * three times (portable, AVX2, AVX-512) and picked by cpu_isa().
 */
#define LN_LANES 8

static inline __attribute__((always_inline)) double lane_sum(const double *s)
{
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static inline __attribute__((always_inline)) void ln_rows_f32_body(const struct rownorm_job *j, int64_t r0, int64_t r1)
{
	const int64_t n = j->cols, nv = n - n % LN_LANES;
	const float *w = KF32(j->w), *b = j->b ? KF32(j->b) : NULL;
	const double eps = j->eps;
	for (int64_t r = r0; r < r1; r++) {
		const float *x = KF32(j->x) + r * n;
		float *y = (float *)j->yd + r * n;
		double s[LN_LANES] = { 0 }, mean = 0, var;
		int64_t c;
		if (!j->rms) {
			for (c = 0; c < nv; c += LN_LANES)
				for (int l = 0; l < LN_LANES; l++)
					s[l] += (double)x[c + l];
			for (; c < n; c++)
				s[c % LN_LANES] += (double)x[c];
			mean = lane_sum(s) / (double)n;
			for (int l = 0; l < LN_LANES; l++)
				s[l] = 0;
		}
		for (c = 0; c < nv; c += LN_LANES)
			for (int l = 0; l < LN_LANES; l++) {
				double v = (double)x[c + l] - mean;
				s[l] += v * v;
			}
		for (; c < n; c++) {
			double v = (double)x[c] - mean;
			s[c % LN_LANES] += v * v;
		}
		var = lane_sum(s) / (double)n;
		double inv = 1.0 / sqrt(var + eps);
		if (j->mean_out)
			kst(j->sdt, j->mean_out, (uint64_t)r, mean);
		if (j->inv_out)
			kst(j->sdt, j->inv_out, (uint64_t)r, inv);
		if (b)
			for (c = 0; c < n; c++)
				y[c] = (float)(((double)x[c] - mean) * inv * (double)w[c] + (double)b[c]);
		else
			for (c = 0; c < n; c++)
				y[c] = (float)(((double)x[c] - mean) * inv * (double)w[c]);
	}
}

static void ln_rows_f32_generic(const struct rownorm_job *j, int64_t r0, int64_t r1)
{
	ln_rows_f32_body(j, r0, r1);
}

#if defined(__x86_64__)
__attribute__((target("avx2")))
static void ln_rows_f32_avx2(const struct rownorm_job *j, int64_t r0, int64_t r1)
{
	ln_rows_f32_body(j, r0, r1);
}

__attribute__((target("avx512f")))
static void ln_rows_f32_avx512(const struct rownorm_job *j, int64_t r0, int64_t r1)
{
	ln_rows_f32_body(j, r0, r1);
}
#endif

static void ln_rows_f32(void *ctx, int64_t r0, int64_t r1, int worker)
{
	(void)worker;
#if defined(__x86_64__)
	int isa = cpu_isa();
	if (isa >= 2) {
		ln_rows_f32_avx512(ctx, r0, r1);
		return;
	}
	if (isa >= 1) {
		ln_rows_f32_avx2(ctx, r0, r1);
		return;
	}
#endif
	ln_rows_f32_generic(ctx, r0, r1);
}

/* rows [r0, r1) of a LayerNormalization or RMSNormalization */
static void rownorm_rows(void *ctx, int64_t r0, int64_t r1, int worker)
{
	const struct rownorm_job *j = ctx;
	const struct ir_tensor *x = j->x, *w = j->w, *b = j->b;
	int64_t cols = j->cols;
	bool simple = j->simple;
	struct kiter it = j->it;
	(void)worker;
	if (!simple)
		kiter_seek(&it, r0 * cols);
	for (int64_t r = r0; r < r1; r++) {
		uint64_t base = (uint64_t)(r * cols);
		double mean = 0, var = 0;
		if (!j->rms) {
			for (int64_t c = 0; c < cols; c++)
				mean += ld(x, base + (uint64_t)c);
			mean /= (double)cols;
		}
		for (int64_t c = 0; c < cols; c++) {
			double v = ld(x, base + (uint64_t)c) - mean;
			var += v * v;
		}
		var /= (double)cols;
		double inv = 1.0 / sqrt(var + j->eps);
		if (j->mean_out)
			kst(j->sdt, j->mean_out, (uint64_t)r, mean);
		if (j->inv_out)
			kst(j->sdt, j->inv_out, (uint64_t)r, inv);
		for (int64_t c = 0; c < cols; c++) {
			uint64_t i = base + (uint64_t)c;
			uint64_t wo = simple ? (uint64_t)c : (uint64_t)it.off[0];
			uint64_t bo = simple ? (uint64_t)c : (uint64_t)it.off[1];
			double v = (ld(x, i) - mean) * inv * ld(w, wo);
			if (b)
				v += ld(b, bo);
			st(x->dtype, j->yd, i, v);
			if (!simple)
				kiter_next(&it);
		}
	}
}

/* LayerNormalization (rms false) and RMSNormalization (rms true). */
static int row_norm(struct cpu_kctx *k, bool rms)
{
	const struct ir_tensor *x = kin_float(k, 0, "input");
	const struct ir_tensor *w = kin_req(k, 1);
	const struct ir_tensor *b = rms ? NULL : kin(k, 2);
	if (!x || !w)
		return IR_ERR;
	int axis;
	if (kaxis(k, kattr_i(k, "axis", -1), x->rank, &axis))
		return IR_ERR;
	double eps = kattr_f(k, "epsilon", 1e-5f);
	struct bparam bw, bb;
	if (bparam_init(k, &bw, w, x, axis, "scale") || bparam_init(k, &bb, b, x, axis, "bias"))
		return IR_ERR;

	int64_t rows = 1, cols = 1;
	int64_t sdims[IR_MAX_RANK];
	for (int d = 0; d < x->rank; d++) {
		if (d < axis) {
			rows *= x->dims[d];
			sdims[d] = x->dims[d];
		} else {
			cols *= x->dims[d];
			sdims[d] = 1;
		}
	}
	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return IR_ERR;
	/* Mean and InvStdDev (LayerNormalization only): of the stash type */
	int sdt = (int)kattr_i(k, "stash_type", 1);
	if (!ir_dtype_is_float(sdt))
		sdt = IR_FLOAT;
	void *mean_out = NULL, *inv_out = NULL;
	if (!rms && kwant(k, 1)) {
		struct ir_tensor *t = kout(k, 1, sdt, x->rank, sdims);
		if (!t)
			return IR_ERR;
		mean_out = kwdata(t);
	}
	if (!rms && kwant(k, 2)) {
		struct ir_tensor *t = kout(k, 2, sdt, x->rank, sdims);
		if (!t)
			return IR_ERR;
		inv_out = kwdata(t);
	}
	struct rownorm_job j = { x, w, b, kwdata(y), mean_out, inv_out, sdt, cols, eps, rms,
				 bw.simple && (!b || bb.simple), { 0 } };
	kiter_init(&j.it, x->rank, x->dims);
	kiter_add(&j.it, bw.str);
	kiter_add(&j.it, b ? bb.str : bw.str);
	if (ir_dtype_bits(x->dtype) < 8 || ir_dtype_bits(sdt) < 8) {
		/* sub-byte elements share bytes: one thread */
		rownorm_rows(&j, 0, rows, 0);
		return 0;
	}
	if (x->dtype == IR_FLOAT && w->dtype == IR_FLOAT && (!b || b->dtype == IR_FLOAT) && j.simple &&
	    w->numel == (uint64_t)cols && (!b || b->numel == (uint64_t)cols))
		return kpar(k, rows, kgrain(3 * cols), ln_rows_f32, &j);
	return kpar(k, rows, kgrain(3 * cols), rownorm_rows, &j);
}

static int k_layernorm(struct cpu_kctx *k) { return row_norm(k, false); }
static int k_rmsnorm(struct cpu_kctx *k) { return row_norm(k, true); }

/* ------------------------------------------------------------------------ */
/* GroupNormalization, InstanceNormalization                                 */
/* ------------------------------------------------------------------------ */

struct group_job {
	const struct ir_tensor *x, *s, *b;
	void *yd;
	int64_t groups, C, S, cpg;
	double eps;
	bool per_group;
};

/* the (batch, group) pairs [p0, p1) of a GroupNormalization */
static void group_rows(void *ctx, int64_t p0, int64_t p1, int worker)
{
	const struct group_job *j = ctx;
	const struct ir_tensor *x = j->x, *s = j->s, *b = j->b;
	int64_t cpg = j->cpg, S = j->S, len = cpg * S;
	(void)worker;
	for (int64_t pr = p0; pr < p1; pr++) {
		int64_t n = pr / j->groups, g = pr % j->groups;
		uint64_t base = (uint64_t)((n * j->C + g * cpg) * S);
		double mean = 0, var = 0;
		for (int64_t i = 0; i < len; i++)
			mean += ld(x, base + (uint64_t)i);
		mean /= (double)len;
		for (int64_t i = 0; i < len; i++) {
			double v = ld(x, base + (uint64_t)i) - mean;
			var += v * v;
		}
		var /= (double)len;
		double inv = 1.0 / sqrt(var + j->eps);
		for (int64_t c = 0; c < cpg; c++) {
			uint64_t p = (uint64_t)(j->per_group ? g : g * cpg + c);
			double sc = ld(s, p) * inv, bi = ld(b, p);
			uint64_t cb = base + (uint64_t)(c * S);
			for (int64_t i = 0; i < S; i++)
				st(x->dtype, j->yd, cb + (uint64_t)i, (ld(x, cb + (uint64_t)i) - mean) * sc + bi);
		}
	}
}

/*
 * Normalizes x [N, C, ...] over each group of C/groups channels (and the
 * spatial axes), then applies scale and bias: per channel (shape [C]) or
 * per group (shape [groups], GroupNormalization before opset 21).
 */
static int group_norm(struct cpu_kctx *k, int64_t groups)
{
	const struct ir_tensor *x = kin_float(k, 0, "input");
	const struct ir_tensor *s = kin_req(k, 1);
	const struct ir_tensor *b = kin_req(k, 2);
	if (!x || !s || !b)
		return IR_ERR;
	if (x->rank < 2)
		return kerr(k, "input must have rank 2 or more, not %s", kshape(x));
	double eps = kattr_f(k, "epsilon", 1e-5f);
	int64_t N = x->dims[0], C = x->dims[1], S = 1;
	for (int d = 2; d < x->rank; d++)
		S *= x->dims[d];
	if (groups <= 0 || C % groups)
		return kerr(k, "num_groups %lld does not divide the %lld channels", (long long)groups, (long long)C);
	int64_t cpg = C / groups;
	/* per channel, unless the parameters have one value per group */
	bool per_group = s->numel == (uint64_t)groups && s->numel != (uint64_t)C;
	int64_t np = per_group ? groups : C;
	if (check_vec(k, s, np, "scale") || check_vec(k, b, np, "bias"))
		return IR_ERR;
	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return IR_ERR;
	struct group_job j = { x, s, b, kwdata(y), groups, C, S, cpg, eps, per_group };
	if (ir_dtype_bits(x->dtype) < 8) {
		/* sub-byte elements share bytes: one thread */
		group_rows(&j, 0, N * groups, 0);
		return 0;
	}
	return kpar(k, N * groups, kgrain(3 * cpg * S), group_rows, &j);
}

static int k_groupnorm(struct cpu_kctx *k)
{
	if (!kattr_has(k, "num_groups"))
		return kerr(k, "attribute 'num_groups' is missing");
	return group_norm(k, kattr_i(k, "num_groups", 1));
}

static int k_instancenorm(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (x->rank < 2)
		return kerr(k, "input must have rank 2 or more, not %s", kshape(x));
	if (x->dims[1] == 0)
		return kout(k, 0, x->dtype, x->rank, x->dims) ? 0 : IR_ERR;
	return group_norm(k, x->dims[1]);
}

/* ------------------------------------------------------------------------ */
/* BatchNormalization                                                        */
/* ------------------------------------------------------------------------ */

static bool bn_supports(const struct ir_node *n, char *why, size_t size)
{
	const struct ir_attr *a = ir_node_attr(n, "spatial");
	if (a && a->type == IR_ATTR_INT && a->i == 0) {
		snprintf(why, size, "spatial=0 is not supported");
		return false;
	}
	return true;
}

struct bn_job {
	const struct ir_tensor *x, *sc, *bi;
	void *yd;
	const double *mean, *var;
	int64_t C, S;
	double eps;
};

/* the (batch, channel) pairs [p0, p1) of a BatchNormalization */
static void bn_rows(void *ctx, int64_t p0, int64_t p1, int worker)
{
	const struct bn_job *j = ctx;
	const struct ir_tensor *x = j->x;
	int64_t S = j->S;
	(void)worker;
	for (int64_t pr = p0; pr < p1; pr++) {
		int64_t c = pr % j->C;
		double a = ld(j->sc, (uint64_t)c) / sqrt(j->var[c] + j->eps);
		double b = ld(j->bi, (uint64_t)c) - j->mean[c] * a;
		uint64_t base = (uint64_t)(pr * S);
		if (!S)
			continue;
		if (x->dtype == IR_FLOAT) {
			/* float32: one scale and shift per channel, vectorized */
			const float *xs = KF32(x) + base;
			float *ys = (float *)j->yd + base, fa = (float)a, fb = (float)b;
			for (int64_t i = 0; i < S; i++)
				ys[i] = xs[i] * fa + fb;
			continue;
		}
		for (int64_t i = 0; i < S; i++)
			st(x->dtype, j->yd, base + (uint64_t)i, ld(x, base + (uint64_t)i) * a + b);
	}
}

static int k_batchnorm(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_float(k, 0, "input");
	const struct ir_tensor *sc = kin_req(k, 1), *bi = kin_req(k, 2);
	const struct ir_tensor *rm = kin_req(k, 3), *rv = kin_req(k, 4);
	if (!x || !sc || !bi || !rm || !rv)
		return IR_ERR;
	if (x->rank < 2)
		return kerr(k, "input must have rank 2 or more, not %s", kshape(x));
	int64_t N = x->dims[0], C = x->dims[1], S = 1;
	for (int d = 2; d < x->rank; d++)
		S *= x->dims[d];
	if (check_vec(k, sc, C, "scale") || check_vec(k, bi, C, "bias") || check_vec(k, rm, C, "mean") ||
	    check_vec(k, rv, C, "var"))
		return IR_ERR;
	double eps = kattr_f(k, "epsilon", 1e-5f);
	double mom = kattr_f(k, "momentum", 0.9f);
	/* training: the training_mode attribute from opset 14; before, the
	 * presence of the statistics outputs (and is_test=0 before opset 7) */
	bool training;
	if (k->opset >= 14)
		training = kattr_i(k, "training_mode", 0) != 0;
	else
		training = kwant(k, 1) && !(k->opset < 7 && kattr_i(k, "is_test", 0));

	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return IR_ERR;
	void *yd = kwdata(y);
	double *mean = kalloc_arr(k, (uint64_t)C, sizeof(double));
	double *var = kalloc_arr(k, (uint64_t)C, sizeof(double));
	int rc = IR_ENOMEM;
	if (!mean || !var)
		goto out;
	for (int64_t c = 0; c < C; c++) {
		if (!training) {
			mean[c] = ld(rm, (uint64_t)c);
			var[c] = ld(rv, (uint64_t)c);
			continue;
		}
		/* batch statistics over N and the spatial axes (population variance) */
		double m = 0, v = 0, cnt = (double)(N * S);
		for (int64_t n = 0; n < N; n++)
			for (int64_t j = 0; j < S; j++)
				m += ld(x, (uint64_t)((n * C + c) * S + j));
		m /= cnt;
		for (int64_t n = 0; n < N; n++)
			for (int64_t j = 0; j < S; j++) {
				double dv = ld(x, (uint64_t)((n * C + c) * S + j)) - m;
				v += dv * dv;
			}
		mean[c] = m;
		var[c] = v / cnt;
	}
	{
		struct bn_job j = { x, sc, bi, yd, mean, var, C, S, eps };
		if (ir_dtype_bits(x->dtype) < 8)
			bn_rows(&j, 0, N * C, 0);   /* sub-byte elements share bytes: one thread */
		else if ((rc = kpar(k, N * C, kgrain(S), bn_rows, &j)))
			goto out;
	}
	rc = 0;
	if (!training)
		goto out;
	/* outputs 1, 2: the updated running mean and variance; 3, 4 (before
	 * opset 14): the batch mean and variance */
	int64_t cd[1] = { C };
	for (int o = 1; o <= 4 && o < k->n_out; o++) {
		if (!kwant(k, o) || (o >= 3 && k->opset >= 14))
			continue;
		const struct ir_tensor *src = o == 2 || o == 4 ? rv : rm;
		struct ir_tensor *t = kout(k, o, src->dtype, 1, cd);
		if (!t) {
			rc = IR_ERR;
			goto out;
		}
		void *td = kwdata(t);
		for (int64_t c = 0; c < C; c++) {
			double batch = o == 2 || o == 4 ? var[c] : mean[c];
			double v = o >= 3 ? batch : ld(src, (uint64_t)c) * mom + batch * (1 - mom);
			st(src->dtype, td, (uint64_t)c, v);
		}
	}
out:
	free(mean);
	free(var);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* LpNormalization, MeanVarianceNormalization, LRN                           */
/* ------------------------------------------------------------------------ */

static int k_lpnorm(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_float(k, 0, "input");
	if (!x)
		return IR_ERR;
	int axis;
	if (kaxis(k, kattr_i(k, "axis", -1), x->rank, &axis))
		return IR_ERR;
	int64_t p = kattr_i(k, "p", 2);
	if (p != 1 && p != 2)
		return kerr(k, "p must be 1 or 2, not %lld", (long long)p);
	int64_t outer = 1, n = x->rank ? x->dims[axis] : 1, inner = 1;
	for (int d = 0; d < axis; d++)
		outer *= x->dims[d];
	for (int d = axis + 1; d < x->rank; d++)
		inner *= x->dims[d];
	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return IR_ERR;
	void *yd = kwdata(y);
	if (x->numel == 0)
		return 0;
	double *norm = kalloc_arr(k, (uint64_t)inner, sizeof(double));
	if (!norm)
		return IR_ENOMEM;
	int rc = 0;
	for (int64_t a = 0; a < outer; a++) {
		if ((rc = kstop(k)))
			break;
		uint64_t base = (uint64_t)(a * n * inner);
		for (int64_t b = 0; b < inner; b++)
			norm[b] = 0;
		for (int64_t j = 0; j < n; j++)
			for (int64_t b = 0; b < inner; b++) {
				double v = ld(x, base + (uint64_t)(j * inner + b));
				norm[b] += p == 1 ? fabs(v) : v * v;
			}
		if (p == 2)
			for (int64_t b = 0; b < inner; b++)
				norm[b] = sqrt(norm[b]);
		/* a zero norm gives zeros rather than 0/0 */
		for (int64_t j = 0; j < n; j++)
			for (int64_t b = 0; b < inner; b++) {
				uint64_t i = base + (uint64_t)(j * inner + b);
				st(x->dtype, yd, i, norm[b] == 0 ? 0.0 : ld(x, i) / norm[b]);
			}
	}
	free(norm);
	return rc;
}

/* MeanVarianceNormalization: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)
 * over `axes` (default [0, 2, 3]), as the op's function body defines it. */
static int k_mvn(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_float(k, 0, "input");
	if (!x)
		return IR_ERR;
	static const int64_t dflt[3] = { 0, 2, 3 };
	int na;
	const int64_t *axes = kattr_ints(k, "axes", &na);
	if (!axes) {
		axes = dflt;
		na = 3;
	}
	bool red[IR_MAX_RANK] = { false };
	for (int i = 0; i < na; i++) {
		int ax;
		if (kaxis(k, axes[i], x->rank, &ax))
			return IR_ERR;
		if (x->rank && red[ax])
			return kerr(k, "axis %lld appears twice in axes", (long long)axes[i]);
		if (x->rank)
			red[ax] = true;
	}
	/* statistics have x's shape with the reduced axes of size 1 */
	int64_t sstr[IR_MAX_RANK];
	uint64_t ns = 1, cnt = 1;
	for (int d = x->rank - 1; d >= 0; d--) {
		if (red[d]) {
			sstr[d] = 0;
			cnt *= (uint64_t)x->dims[d];
		} else {
			sstr[d] = (int64_t)ns;
			ns *= (uint64_t)x->dims[d];
		}
	}
	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return IR_ERR;
	void *yd = kwdata(y);
	if (x->numel == 0)
		return 0;
	double *s1 = kalloc_arr(k, ns, sizeof(double));
	double *s2 = kalloc_arr(k, ns, sizeof(double));
	int rc = IR_ENOMEM;
	if (!s1 || !s2)
		goto out;
	for (uint64_t i = 0; i < ns; i++)
		s1[i] = s2[i] = 0;
	struct kiter it;
	kiter_init(&it, x->rank, x->dims);
	kiter_add(&it, sstr);
	for (uint64_t i = 0; i < x->numel; i++, kiter_next(&it)) {
		double v = ld(x, i);
		s1[it.off[0]] += v;
		s2[it.off[0]] += v * v;
	}
	for (uint64_t i = 0; i < ns; i++) {
		s1[i] /= (double)cnt;
		double var = s2[i] / (double)cnt - s1[i] * s1[i];
		s2[i] = sqrt(var > 0 ? var : 0) + 1e-9;
	}
	kiter_init(&it, x->rank, x->dims);
	kiter_add(&it, sstr);
	for (uint64_t i = 0; i < x->numel; i++, kiter_next(&it))
		st(x->dtype, yd, i, (ld(x, i) - s1[it.off[0]]) / s2[it.off[0]]);
	rc = 0;
out:
	free(s1);
	free(s2);
	return rc;
}

/* LRN: x / (bias + alpha/size * sum of x^2 over the neighbouring channels)^beta */
static int k_lrn(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_float(k, 0, "input");
	if (!x)
		return IR_ERR;
	if (x->rank < 2)
		return kerr(k, "input must have rank 2 or more, not %s", kshape(x));
	if (!kattr_has(k, "size"))
		return kerr(k, "attribute 'size' is missing");
	int64_t size = kattr_i(k, "size", 1);
	if (size <= 0)
		return kerr(k, "size must be positive, not %lld", (long long)size);
	double alpha = kattr_f(k, "alpha", 1e-4f), beta = kattr_f(k, "beta", 0.75f);
	double bias = kattr_f(k, "bias", 1.0f);
	int64_t N = x->dims[0], C = x->dims[1], S = 1;
	for (int d = 2; d < x->rank; d++)
		S *= x->dims[d];
	int64_t lo = (size - 1) / 2, hi = size / 2;   /* floor, ceil of (size-1)/2 */
	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!y)
		return IR_ERR;
	void *yd = kwdata(y);
	int rc;
	for (int64_t n = 0; n < N; n++) {
		if ((rc = kstop(k)))
			return rc;
		for (int64_t c = 0; c < C; c++) {
			int64_t c0 = c - lo < 0 ? 0 : c - lo, c1 = c + hi > C - 1 ? C - 1 : c + hi;
			for (int64_t j = 0; j < S; j++) {
				double sq = 0;
				for (int64_t cc = c0; cc <= c1; cc++) {
					double v = ld(x, (uint64_t)((n * C + cc) * S + j));
					sq += v * v;
				}
				uint64_t i = (uint64_t)((n * C + c) * S + j);
				st(x->dtype, yd, i, ld(x, i) / pow(bias + alpha / (double)size * sq, beta));
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss                        */
/* ------------------------------------------------------------------------ */

/*
 * Both losses: input [N, C, d1..dk] (log-probabilities for NLL, scores for
 * SCE, which takes their log-softmax over C first), target [N, d1..dk] of
 * class indices, optional weight [C]. loss = -logp[n, target, d] *
 * weight[target], 0 where target is ignore_index; reduced by `reduction`
 * (mean divides by the sum of the weights used).
 */
static int loss_generic(struct cpu_kctx *k, bool sce)
{
	const struct ir_tensor *x = kin_float(k, 0, sce ? "scores" : "input");
	const struct ir_tensor *t = kin_req(k, 1);
	const struct ir_tensor *w = kin(k, 2);
	if (!x || !t)
		return IR_ERR;
	if (x->rank < 2)
		return kerr(k, "input must have rank 2 or more, not %s", kshape(x));
	if (!ir_dtype_is_int(t->dtype))
		return kerr(k, "target must be an integer tensor, not %s", ir_dtype_name(t->dtype));
	bool shape_ok = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
	for (int d = 1; shape_ok && d < t->rank; d++)
		shape_ok = t->dims[d] == x->dims[d + 1];
	if (!shape_ok)
		return kerr(k, "target shape %s does not match input shape %s", kshape(t), kshape(x));
	int64_t N = x->dims[0], C = x->dims[1], D = 1;
	for (int d = 2; d < x->rank; d++)
		D *= x->dims[d];
	if (w && check_vec(k, w, C, "weight"))
		return IR_ERR;
	const char *red = kattr_s(k, "reduction", "mean");
	int mode;
	if (!strcmp(red, "none"))
		mode = 0;
	else if (!strcmp(red, "sum"))
		mode = 1;
	else if (!strcmp(red, "mean"))
		mode = 2;
	else
		return kerr(k, "reduction '%s' is not one of none, sum, mean", red);
	bool has_ii = kattr_has(k, "ignore_index");
	int64_t ii = kattr_i(k, "ignore_index", 0);

	int64_t scalar_dims[1] = { 1 };
	struct ir_tensor *lo = mode == 0 ? kout(k, 0, x->dtype, t->rank, t->dims)
					 : kout(k, 0, x->dtype, 0, scalar_dims);
	if (!lo)
		return IR_ERR;
	void *ld_out = kwdata(lo);
	void *lp_out = NULL;
	if (sce && kwant(k, 1)) {
		struct ir_tensor *lp = kout(k, 1, x->dtype, x->rank, x->dims);
		if (!lp)
			return IR_ERR;
		lp_out = kwdata(lp);
	}
	double sum = 0, wsum = 0;
	int rc;
	for (int64_t n = 0; n < N; n++) {
		if ((rc = kstop(k)))
			return rc;
		for (int64_t d = 0; d < D; d++) {
			uint64_t col = (uint64_t)(n * C * D + d);   /* element (n, 0, d) */
			double shift = 0;
			if (sce) {
				/* log-softmax over C: x - (max + log(sum(exp(x - max)))) */
				double mx = -INFINITY, s = 0;
				for (int64_t c = 0; c < C; c++) {
					double v = ld(x, col + (uint64_t)(c * D));
					if (v > mx)
						mx = v;
				}
				if (isinf(mx) && mx < 0)
					mx = 0;
				for (int64_t c = 0; c < C; c++)
					s += exp(ld(x, col + (uint64_t)(c * D)) - mx);
				shift = mx + log(s);
				if (lp_out)
					for (int64_t c = 0; c < C; c++) {
						uint64_t i = col + (uint64_t)(c * D);
						st(x->dtype, lp_out, i, ld(x, i) - shift);
					}
			}
			int64_t tg = kldi(t->dtype, kdata(t), (uint64_t)(n * D + d));
			double l = 0, wt = 0;
			if (!(has_ii && tg == ii)) {
				if (tg < 0 || tg >= C)
					return kerr(k, "target %lld is out of range for %lld classes",
						    (long long)tg, (long long)C);
				wt = w ? ld(w, (uint64_t)tg) : 1.0;
				l = -(ld(x, col + (uint64_t)(tg * D)) - shift) * wt;
			}
			if (mode == 0)
				st(x->dtype, ld_out, (uint64_t)(n * D + d), l);
			sum += l;
			wsum += wt;
		}
	}
	if (mode == 1)
		st(x->dtype, ld_out, 0, sum);
	else if (mode == 2)
		st(x->dtype, ld_out, 0, sum / wsum);
	return 0;
}

static int k_nllloss(struct cpu_kctx *k) { return loss_generic(k, false); }
static int k_sceloss(struct cpu_kctx *k) { return loss_generic(k, true); }

const struct cpu_kernel cpu_kernels_norm[] = {
	{ IR_OP_BatchNormalization, k_batchnorm, bn_supports },
	{ IR_OP_InstanceNormalization, k_instancenorm, NULL },
	{ IR_OP_LayerNormalization, k_layernorm, NULL },
	{ IR_OP_ogsh_LayerNormalization, k_layernorm, NULL },
	{ IR_OP_GroupNormalization, k_groupnorm, NULL },
	{ IR_OP_RMSNormalization, k_rmsnorm, NULL },
	{ IR_OP_LpNormalization, k_lpnorm, NULL },
	{ IR_OP_MeanVarianceNormalization, k_mvn, NULL },
	{ IR_OP_LRN, k_lrn, NULL },
	{ IR_OP_NegativeLogLikelihoodLoss, k_nllloss, NULL },
	{ IR_OP_SoftmaxCrossEntropyLoss, k_sceloss, NULL },
	{ -1, NULL, NULL },
};
