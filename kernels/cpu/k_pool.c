/*
 * k_pool.c - CPU kernels: pooling (MaxPool, AveragePool, LpPool, their
 * Global forms, MaxUnpool).
 *
 * To add a kernel: write `static int k_myop(struct cpu_kctx *k)` here and
 * add it to cpu_kernels_pool[] at the end of the file.
 *
 * Windows: output position o and kernel tap q read input position
 * o*stride - pad_begin + q*dilation along each spatial axis; taps outside
 * the input are padding. Values are read and combined in double and stored
 * once in the output type.
 */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

struct pgeom {
	int nd;
	int64_t N, C;
	int64_t in[IR_MAX_RANK], ker[IR_MAX_RANK], out[IR_MAX_RANK];
	int64_t str[IR_MAX_RANK], dil[IR_MAX_RANK], pb[IR_MAX_RANK], pe[IR_MAX_RANK];
	int64_t insz, kersz, outsz;
};

/* Fills g for a windowed pool of x from the node's attributes. */
static int pool_geom(struct cpu_kctx *k, const struct ir_tensor *x, struct pgeom *g)
{
	memset(g, 0, sizeof(*g));
	if (x->rank < 3)
		return kerr(k, "input must be [N, C, spatial...], got %s", kshape(x));
	int nd = g->nd = x->rank - 2;
	g->N = x->dims[0];
	g->C = x->dims[1];
	int n;
	const int64_t *ks = kattr_ints(k, "kernel_shape", &n);
	if (!ks)
		return kerr(k, "kernel_shape is missing");
	if (n != nd)
		return kerr(k, "kernel_shape has %d values, input %s needs %d", n, kshape(x), nd);
	int64_t pads[2 * IR_MAX_RANK];
	int rc;
	if ((rc = kattr_ints_n(k, "kernel_shape", nd, g->ker, 1, 1)) || (rc = kattr_ints_n(k, "strides", nd, g->str, 1, 1)) ||
	    (rc = kattr_ints_n(k, "dilations", nd, g->dil, 1, 1)) || (rc = kattr_ints_n(k, "pads", 2 * nd, pads, 0, 0)))
		return rc;
	bool ceil_mode = kattr_i(k, "ceil_mode", 0) != 0;
	const char *ap = kattr_s(k, "auto_pad", "NOTSET");
	bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
	if (!same && !valid && strcmp(ap, "NOTSET") && *ap)
		return kerr(k, "auto_pad '%s' is not supported", ap);
	for (int i = 0; i < nd; i++) {
		g->in[i] = x->dims[i + 2];
		int64_t eff;
		if (!kmul62(g->ker[i] - 1, g->dil[i], &eff))
			return kerr(k, "pooling sizes overflow along axis %d", i + 2);
		eff += 1;
		if (same) {
			g->out[i] = (g->in[i] + g->str[i] - 1) / g->str[i];
			int64_t total = (g->out[i] - 1) * g->str[i] + eff - g->in[i];
			if (total < 0)
				total = 0;
			if (!strcmp(ap, "SAME_UPPER")) {
				g->pb[i] = total / 2;
				g->pe[i] = total - total / 2;
			} else {
				g->pe[i] = total / 2;
				g->pb[i] = total - total / 2;
			}
			continue;
		}
		if (!valid) {
			g->pb[i] = pads[i];
			g->pe[i] = pads[nd + i];
		}
		int64_t span = g->in[i] + g->pb[i] + g->pe[i] - eff;
		if (span < 0)
			return kerr(k, "kernel %lld (dilated) is larger than the padded input %lld along axis %d",
				    (long long)eff, (long long)(g->in[i] + g->pb[i] + g->pe[i]), i + 2);
		if (ceil_mode) {
			g->out[i] = (span + g->str[i] - 1) / g->str[i] + 1;
			/* the last window must start inside the input or its begin padding */
			if ((g->out[i] - 1) * g->str[i] >= g->in[i] + g->pb[i])
				g->out[i]--;
		} else {
			g->out[i] = span / g->str[i] + 1;
		}
	}
	g->insz = g->kersz = g->outsz = 1;
	for (int i = 0; i < nd; i++)
		if (!kmul62(g->insz, g->in[i], &g->insz) || !kmul62(g->kersz, g->ker[i], &g->kersz) ||
		    !kmul62(g->outsz, g->out[i], &g->outsz))
			return kerr(k, "pooling sizes overflow");
	int64_t t;
	if (!kmul62(g->N, g->C, &t) || !kmul62(t, g->outsz, &t))
		return kerr(k, "pooling sizes overflow");
	return 0;
}

enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP };

/* The p of LpPool/GlobalLpPool: an int, or a float before opset 2. */
static int lp_p(struct cpu_kctx *k, double *p)
{
	const struct ir_attr *a = kattr(k, "p");
	*p = 2;
	if (a && a->type == IR_ATTR_FLOAT)
		*p = a->f;
	else if (a && a->type == IR_ATTR_INT)
		*p = (double)a->i;
	if (!(*p > 0) || *p > 1e6)
		return kerr(k, "p %g must be positive", *p);
	return 0;
}

/*
 * Runs a windowed pool over every (n, c) plane. For MAX, idx (if not NULL)
 * gets the flat input index of each maximum (column-major spatial order
 * when colmajor).
 */
struct pool_job {
	const struct pgeom *g;
	enum pool_kind kind;
	const struct ir_tensor *x;
	struct ir_tensor *y;
	int64_t *idx;
	bool colmajor, include_pad;
	double p;
};

/* the (batch, channel) planes [pl0, pl1) of a pooling */
static void pool_planes(void *ctx, int64_t pl0, int64_t pl1, int worker)
{
	const struct pool_job *j = ctx;
	const struct pgeom *g = j->g;
	enum pool_kind kind = j->kind;
	const struct ir_tensor *x = j->x;
	struct ir_tensor *y = j->y;
	int64_t *idx = j->idx;
	bool colmajor = j->colmajor, include_pad = j->include_pad;
	double p = j->p;
	int nd = g->nd, dt = x->dtype;
	(void)worker;
	const void *px = kdata(x);
	const float *xf = dt == IR_FLOAT ? KF32(x) : NULL;   /* the common case, read directly */
	void *py = kwdata(y);
	int64_t instr[IR_MAX_RANK], cmstr[IR_MAX_RANK];
	kstrides(nd, g->in, instr);
	/* column-major strides of the spatial dims, for storage_order 1 */
	int64_t s = 1;
	for (int i = 0; i < nd; i++) {
		cmstr[i] = s;
		s *= g->in[i];
	}
	for (int64_t pl = pl0; pl < pl1; pl++) {
		uint64_t xb = (uint64_t)(pl * g->insz), yb = (uint64_t)(pl * g->outsz);
		int64_t oo[IR_MAX_RANK] = { 0 };
		for (int64_t o = 0; o < g->outsz; o++) {
			int64_t st[IR_MAX_RANK], q[IR_MAX_RANK];
			for (int i = 0; i < nd; i++) {
				st[i] = oo[i] * g->str[i] - g->pb[i];
				q[i] = 0;
			}
			double acc = kind == POOL_MAX ? -INFINITY : 0;
			int64_t cnt = 0, best = -1;
			for (int64_t t = 0; t < g->kersz; t++) {
				int64_t off = 0, cm = 0;
				bool inside = true, inpad = true;
				for (int i = 0; i < nd; i++) {
					int64_t pos = st[i] + q[i] * g->dil[i];
					if (pos < 0 || pos >= g->in[i])
						inside = false;
					if (pos >= g->in[i] + g->pe[i])
						inpad = false;
					off += pos * instr[i];
					cm += pos * cmstr[i];
				}
				for (int i = nd - 1; i >= 0; i--) {
					if (++q[i] < g->ker[i])
						break;
					q[i] = 0;
				}
				if (!inside) {
					if (include_pad && inpad)
						cnt++;
					continue;
				}
				double v = xf ? xf[xb + (uint64_t)off] : kld(dt, px, xb + (uint64_t)off);
				cnt++;
				if (kind == POOL_MAX) {
					/* NaNs lose unless every tap is NaN */
					if (best < 0 || v > acc || (isnan(acc) && !isnan(v))) {
						acc = v;
						best = colmajor ? cm : off;
					}
				} else if (kind == POOL_AVG) {
					acc += v;
				} else {
					acc += pow(fabs(v), p);
				}
			}
			if (kind == POOL_AVG)
				acc = cnt ? acc / (double)cnt : 0;
			else if (kind == POOL_LP)
				acc = pow(acc, 1.0 / p);
			kst(y->dtype, py, yb + (uint64_t)o, acc);
			if (idx)
				idx[yb + (uint64_t)o] = best < 0 ? -1 : pl * g->insz + best;
			for (int i = nd - 1; i >= 0; i--) {
				if (++oo[i] < g->out[i])
					break;
				oo[i] = 0;
			}
		}
	}
}

static int pool_run(struct cpu_kctx *k, const struct pgeom *g, enum pool_kind kind, const struct ir_tensor *x,
		    struct ir_tensor *y, int64_t *idx, bool colmajor, bool include_pad, double p)
{
	struct pool_job j = { g, kind, x, y, idx, colmajor, include_pad, p };
	if (ir_dtype_bits(y->dtype) < 8) {
		/* sub-byte elements share bytes: one thread */
		pool_planes(&j, 0, g->N * g->C, 0);
		return 0;
	}
	return kpar(k, g->N * g->C, kgrain(g->outsz * g->kersz), pool_planes, &j);
}

/*
 * Float32 2-D max pool without indices: with AVX-512 at column stride 1
 * or 2, maxpool_plane_avx512 (16 outputs in a register over every tap);
 * else tap by tap: for each kernel tap and output row, the row of y takes
 * the max with the valid columns of a row of x. Both take the taps in the
 * same order, so they give the same bits. NaN rule as in pool_run: the
 * max of the non-NaN taps, NaN when every tap is NaN, -inf when none is
 * inside.
 */
struct maxpool_job {
	const struct pgeom *g;
	const float *x;
	float *y;
};

/* The largest plane maxpool_plane_avx512 takes: blocks of 16 output
 * columns, kernel columns. */
#define MP_MAXB 16
#define MP_MAXK 16

/* the planes [pl0, pl1) of maxpool2d_f32 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/*
 * One plane of a 2-D max pool (stride 1 or 2 along the columns), 16
 * output columns at a time held in a register across every tap: the taps
 * in the order of the row-by-row loop below (kernel column, then kernel
 * row), each u = (v > u || u != u) ? v : u on the lanes whose tap is
 * inside the input, u starting as NaN ("no tap yet"); lanes that no tap
 * reached become -inf. Loads are masked to the input's elements, and the
 * output is stored once. The lane masks and offsets depend only on the
 * block and the kernel column, so they are found once per plane.
 */
__attribute__((target("avx512f")))
static void maxpool_plane_avx512(const struct pgeom *g, const float *xp, float *yp)
{
	int64_t ih = g->in[0], iw = g->in[1], oh = g->out[0], ow = g->out[1];
	int64_t kh = g->ker[0], kw = g->ker[1], sh = g->str[0], sw = g->str[1];
	int64_t dh = g->dil[0], dw = g->dil[1], ph = g->pb[0], pw = g->pb[1];
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	int64_t nb = (ow + 15) / 16;
	int64_t i0s[MP_MAXB][MP_MAXK];
	uint32_t ms[MP_MAXB][MP_MAXK];  /* input lanes to load (bits of the sw * 16-float span) */
	__mmask16 oms[MP_MAXB][MP_MAXK]; /* output lanes whose tap is inside the row */
	for (int64_t c = 0; c < kw; c++) {
		int64_t lo, hi;
		ktap_range(c * dw - pw, iw, sw, ow, &lo, &hi);
		for (int64_t bi = 0; bi < nb; bi++) {
			int64_t o0 = bi * 16, no = ow - o0 < 16 ? ow - o0 : 16;
			int64_t a = lo > o0 ? lo - o0 : 0, b = hi - o0 < no ? hi - o0 : no;
			uint32_t om = a >= b ? 0 : (uint32_t)(((1u << b) - 1) & ~((1u << a) - 1));
			uint64_t m = 0;
			for (int64_t l = a; l < b; l++)
				m |= (uint64_t)1 << (l * sw);
			i0s[bi][c] = o0 * sw - pw + c * dw;
			ms[bi][c] = (uint32_t)m;
			oms[bi][c] = (__mmask16)om;
		}
	}
	const __m512 nan = _mm512_set1_ps(NAN), ninf = _mm512_set1_ps(-INFINITY);
	for (int64_t r = 0; r < oh; r++) {
		float *yr = yp + r * ow;
		for (int64_t bi = 0; bi < nb; bi++) {
			int64_t o0 = bi * 16, no = ow - o0 < 16 ? ow - o0 : 16;
			__m512 u = nan;
			__mmask16 have = 0;
			for (int64_t c = 0; c < kw; c++) {
				__mmask16 om = oms[bi][c];
				if (!om)
					continue;
				uint32_t m = ms[bi][c];
				for (int64_t a = 0; a < kh; a++) {
					int64_t ir = r * sh - ph + a * dh;
					if (ir < 0 || ir >= ih)
						continue;
					const float *xq = xp + ir * iw + i0s[bi][c];
					__m512 v;
					if (sw == 1) {
						v = _mm512_maskz_loadu_ps((__mmask16)m, xq);
					} else {
						__m512 v0 = _mm512_maskz_loadu_ps((__mmask16)m, xq);
						__m512 v1 = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), xq + 16);
						v = _mm512_permutex2var_ps(v0, even, v1);
					}
					__mmask16 take = (__mmask16)((_mm512_cmp_ps_mask(v, u, _CMP_GT_OQ) |
								      _mm512_cmp_ps_mask(u, u, _CMP_UNORD_Q)) & om);
					u = _mm512_mask_mov_ps(u, take, v);
					have |= om;
				}
			}
			u = _mm512_mask_mov_ps(u, (__mmask16)~have, ninf);
			_mm512_mask_storeu_ps(yr + o0, (__mmask16)((1u << no) - 1), u);
		}
	}
}
#endif

static void maxpool2d_planes(void *ctx, int64_t pl0, int64_t pl1, int worker)
{
	const struct maxpool_job *j = ctx;
	const struct pgeom *g = j->g;
	const float *x = j->x;
	float *y = j->y;
	(void)worker;
	int64_t ih = g->in[0], iw = g->in[1], oh = g->out[0], ow = g->out[1];
	int64_t kh = g->ker[0], kw = g->ker[1], sh = g->str[0], sw = g->str[1];
	int64_t dh = g->dil[0], dw = g->dil[1], ph = g->pb[0], pw = g->pb[1];
	const bool avx512 = cpu_isa() >= CPU_ISA_AVX512 && (sw == 1 || sw == 2) && (ow + 15) / 16 <= MP_MAXB &&
			    kw <= MP_MAXK;
	(void)avx512;
	for (int64_t pl = pl0; pl < pl1; pl++) {
		const float *xp = x + pl * g->insz;
		float *yp = y + pl * g->outsz;
#if defined(__x86_64__) || defined(__i386__)
		if (avx512) {
			maxpool_plane_avx512(g, xp, yp);
			continue;
		}
#endif
		for (int64_t o = 0; o < g->outsz; o++)
			yp[o] = NAN;   /* "no tap yet": any tap replaces it */
		for (int64_t c = 0; c < kw; c++) {
			int64_t off = c * dw - pw, lo, hi;
			ktap_range(off, iw, sw, ow, &lo, &hi);
			if (lo >= hi)
				continue;
			for (int64_t a = 0; a < kh; a++) {
				for (int64_t r = 0; r < oh; r++) {
					int64_t ir = r * sh - ph + a * dh;
					if (ir < 0 || ir >= ih)
						continue;
					const float *xr = xp + ir * iw + off;
					float *yr = yp + r * ow;
					if (sw == 1) {
						for (int64_t o = lo; o < hi; o++) {
							float v = xr[o], u = yr[o];
							yr[o] = (v > u || u != u) ? v : u;
						}
					} else {
						for (int64_t o = lo; o < hi; o++) {
							float v = xr[o * sw], u = yr[o];
							yr[o] = (v > u || u != u) ? v : u;
						}
					}
				}
			}
		}
		/* outputs whose window has no tap inside the input: -inf */
		for (int64_t r = 0; r < oh; r++) {
			bool rin = false;
			for (int64_t a = 0; a < kh && !rin; a++) {
				int64_t ir = r * sh - ph + a * dh;
				rin = ir >= 0 && ir < ih;
			}
			for (int64_t o = 0; o < ow; o++) {
				bool cin = false;
				for (int64_t c = 0; c < kw && !cin && rin; c++) {
					int64_t ic = o * sw - pw + c * dw;
					cin = ic >= 0 && ic < iw;
				}
				if (!rin || !cin)
					yp[r * ow + o] = -INFINITY;
			}
		}
	}
}

static int maxpool2d_f32(struct cpu_kctx *k, const struct pgeom *g, const float *x, float *y)
{
	struct maxpool_job j = { g, x, y };
	return kpar(k, g->N * g->C, kgrain(g->outsz * g->ker[0] * g->ker[1]), maxpool2d_planes, &j);
}

static bool poolable(int dt, bool ints)
{
	return ir_dtype_is_float(dt) || (ints && (dt == IR_INT8 || dt == IR_UINT8));
}

static int out_dims(const struct pgeom *g, int64_t *dims)
{
	dims[0] = g->N;
	dims[1] = g->C;
	for (int i = 0; i < g->nd; i++)
		dims[i + 2] = g->out[i];
	return g->nd + 2;
}

static int k_maxpool(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!poolable(x->dtype, true))
		return kerr(k, "maxpool does not support %s", ir_dtype_name(x->dtype));
	struct pgeom g;
	int rc = pool_geom(k, x, &g);
	if (rc)
		return rc;
	int64_t so = kattr_i(k, "storage_order", 0);
	if (so != 0 && so != 1)
		return kerr(k, "storage_order %lld must be 0 or 1", (long long)so);
	int64_t dims[IR_MAX_RANK];
	int r = out_dims(&g, dims);
	struct ir_tensor *y = kout(k, 0, x->dtype, r, dims);
	if (!y)
		return IR_ERR;
	struct ir_tensor *iy = NULL;
	if (kwant(k, 1) && !(iy = kout(k, 1, IR_INT64, r, dims)))
		return IR_ERR;
	if (!y->numel)
		return 0;
	if (!iy && x->dtype == IR_FLOAT && g.nd == 2)
		return maxpool2d_f32(k, &g, KF32(x), kwdata(y));
	return pool_run(k, &g, POOL_MAX, x, y, iy ? kwdata(iy) : NULL, so == 1, false, 1);
}

static int k_averagepool(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!poolable(x->dtype, false))
		return kerr(k, "averagepool does not support %s", ir_dtype_name(x->dtype));
	struct pgeom g;
	int rc = pool_geom(k, x, &g);
	if (rc)
		return rc;
	int64_t dims[IR_MAX_RANK];
	struct ir_tensor *y = kout(k, 0, x->dtype, out_dims(&g, dims), dims);
	if (!y)
		return IR_ERR;
	if (!y->numel)
		return 0;
	return pool_run(k, &g, POOL_AVG, x, y, NULL, false, kattr_i(k, "count_include_pad", 0) != 0, 1);
}

static int k_lppool(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!poolable(x->dtype, false))
		return kerr(k, "lppool does not support %s", ir_dtype_name(x->dtype));
	double p;
	struct pgeom g;
	int rc = lp_p(k, &p);
	if (!rc)
		rc = pool_geom(k, x, &g);
	if (rc)
		return rc;
	int64_t dims[IR_MAX_RANK];
	struct ir_tensor *y = kout(k, 0, x->dtype, out_dims(&g, dims), dims);
	if (!y)
		return IR_ERR;
	if (!y->numel)
		return 0;
	return pool_run(k, &g, POOL_LP, x, y, NULL, false, false, p);
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool: one value per (n, c). */
struct gpool_job {
	enum pool_kind kind;
	const struct ir_tensor *x;
	struct ir_tensor *y;
	uint64_t sp;
	double p;
};

/* the planes [pl0, pl1) of a global pooling */
static void gpool_planes(void *ctx, int64_t pl0, int64_t pl1, int worker)
{
	const struct gpool_job *j = ctx;
	const struct ir_tensor *x = j->x;
	enum pool_kind kind = j->kind;
	const void *px = kdata(x);
	const float *xf = x->dtype == IR_FLOAT ? KF32(x) : NULL;
	uint64_t sp = j->sp;
	double p = j->p;
	(void)worker;
	for (uint64_t pl = (uint64_t)pl0; pl < (uint64_t)pl1; pl++) {
		double acc = kind == POOL_MAX ? -INFINITY : 0;
		uint64_t b = pl * sp;
		for (uint64_t i = 0; i < sp; i++) {
			double v = xf ? xf[b + i] : kld(x->dtype, px, b + i);
			if (kind == POOL_MAX)
				acc = v > acc || isnan(v) ? v : acc;
			else if (kind == POOL_AVG)
				acc += v;
			else
				acc += pow(fabs(v), p);
		}
		if (kind == POOL_AVG)
			acc = sp ? acc / (double)sp : NAN;
		else if (kind == POOL_LP)
			acc = pow(acc, 1.0 / p);
		kst(j->y->dtype, kwdata(j->y), pl, acc);
	}
}

static int global_pool(struct cpu_kctx *k, enum pool_kind kind)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!ir_dtype_is_float(x->dtype))
		return kerr(k, "global pooling needs a floating-point input, not %s", ir_dtype_name(x->dtype));
	if (x->rank < 2)
		return kerr(k, "input must be [N, C, spatial...], got %s", kshape(x));
	double p = 2;
	if (kind == POOL_LP) {
		int rc = lp_p(k, &p);
		if (rc)
			return rc;
	}
	int64_t dims[IR_MAX_RANK];
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	uint64_t sp = 1;
	for (int i = 2; i < x->rank; i++) {
		dims[i] = 1;
		sp *= (uint64_t)x->dims[i];
	}
	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, dims);
	if (!y)
		return IR_ERR;
	struct gpool_job j = { kind, x, y, sp, p };
	if (ir_dtype_bits(y->dtype) < 8) {
		/* sub-byte elements share bytes: one thread */
		gpool_planes(&j, 0, (int64_t)y->numel, 0);
		return 0;
	}
	return kpar(k, (int64_t)y->numel, kgrain((int64_t)sp), gpool_planes, &j);
}

static int k_globalaveragepool(struct cpu_kctx *k)
{
	return global_pool(k, POOL_AVG);
}

static int k_globalmaxpool(struct cpu_kctx *k)
{
	return global_pool(k, POOL_MAX);
}

static int k_globallppool(struct cpu_kctx *k)
{
	return global_pool(k, POOL_LP);
}

/*
 * MaxUnpool: the values of X go to the flat positions given by I in a
 * zeroed tensor of the inferred shape ((in - 1) * stride - pads + kernel),
 * which is then placed at the start of each axis of the output shape
 * (output_shape when given), as the ONNX reference does.
 */
static int k_maxunpool(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ind = kin_req(k, 1), *os = kin(k, 2);
	if (!x || !ind)
		return IR_ERR;
	if (x->rank < 3)
		return kerr(k, "input must be [N, C, spatial...], got %s", kshape(x));
	if (ind->dtype != IR_INT64 || ind->rank != x->rank || ind->numel != x->numel)
		return kerr(k, "indices must be int64 of the input's shape %s, got %s", kshape(x), kshape(ind));
	for (int i = 0; i < x->rank; i++)
		if (ind->dims[i] != x->dims[i])
			return kerr(k, "indices %s do not match the input %s", kshape(ind), kshape(x));
	int nd = x->rank - 2, n;
	int64_t ker[IR_MAX_RANK], str[IR_MAX_RANK], pads[2 * IR_MAX_RANK], inf[IR_MAX_RANK], odims[IR_MAX_RANK];
	if (!kattr_ints(k, "kernel_shape", &n))
		return kerr(k, "kernel_shape is missing");
	int rc;
	if ((rc = kattr_ints_n(k, "kernel_shape", nd, ker, 1, 1)) || (rc = kattr_ints_n(k, "strides", nd, str, 1, 1)) ||
	    (rc = kattr_ints_n(k, "pads", 2 * nd, pads, 0, 0)))
		return rc;
	inf[0] = x->dims[0];
	inf[1] = x->dims[1];
	for (int i = 0; i < nd; i++) {
		if (!kmul62(x->dims[i + 2] ? x->dims[i + 2] - 1 : 0, str[i], &inf[i + 2]))
			return kerr(k, "output sizes overflow along axis %d", i + 2);
		inf[i + 2] += ker[i] - pads[i] - pads[nd + i];
		if (inf[i + 2] < 0 || inf[i + 2] > ((int64_t)1 << 40))
			return kerr(k, "inferred output size %lld along axis %d is out of range",
				    (long long)inf[i + 2], i + 2);
	}
	if (os) {
		int64_t v[IR_MAX_RANK];
		int c = kread_ints(k, os, v, IR_MAX_RANK, "output_shape");
		if (c < 0)
			return IR_ERR;
		if (c != x->rank)
			return kerr(k, "output_shape has %d values, %d expected", c, x->rank);
		for (int i = 0; i < c; i++) {
			if (v[i] < 0 || v[i] > ((int64_t)1 << 40))
				return kerr(k, "output_shape value %lld is out of range", (long long)v[i]);
			odims[i] = v[i];
		}
	} else {
		memcpy(odims, inf, sizeof(int64_t) * (size_t)x->rank);
	}
	int64_t infn = 1;
	for (int i = 0; i < x->rank; i++)
		if (!kmul62(infn, inf[i], &infn))
			return kerr(k, "output sizes overflow");
	struct ir_tensor *y = kout(k, 0, x->dtype, x->rank, odims);
	if (!y)
		return IR_ERR;
	void *py = kwdata(y);
	for (uint64_t i = 0; i < y->numel; i++)
		kst(y->dtype, py, i, 0);
	int64_t istr[IR_MAX_RANK], ostr[IR_MAX_RANK];
	kstrides(x->rank, inf, istr);
	kstrides(x->rank, odims, ostr);
	const int64_t *pi = KI64(ind);
	for (uint64_t i = 0; i < x->numel; i++) {
		int64_t f = pi[i];
		if (f < 0 || f >= infn)
			return kerr(k, "index %lld is out of range for %lld output elements", (long long)f,
				    (long long)infn);
		/* from the inferred shape's flat index to the output's */
		int64_t off = 0;
		bool inside = true;
		for (int d = 0; d < x->rank; d++) {
			int64_t c = f / istr[d];
			f %= istr[d];
			if (c >= odims[d])
				inside = false;
			off += c * ostr[d];
		}
		if (inside)
			kst(y->dtype, py, (uint64_t)off, kld(x->dtype, kdata(x), i));
	}
	return 0;
}

const struct cpu_kernel cpu_kernels_pool[] = {
	{ IR_OP_MaxPool, k_maxpool, NULL },
	{ IR_OP_AveragePool, k_averagepool, NULL },
	{ IR_OP_LpPool, k_lppool, NULL },
	{ IR_OP_GlobalAveragePool, k_globalaveragepool, NULL },
	{ IR_OP_GlobalMaxPool, k_globalmaxpool, NULL },
	{ IR_OP_GlobalLpPool, k_globallppool, NULL },
	{ IR_OP_MaxUnpool, k_maxunpool, NULL },
	{ -1, NULL, NULL },
};
