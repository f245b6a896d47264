/*
 * k_conv.c - CPU kernels: convolutions (Conv, ConvTranspose, ConvInteger,
 * QLinearConv, DeformConv).
 *
 * To add a kernel: write `static int k_myop(struct cpu_kctx *k)` here and
 * add it to cpu_kernels_conv[] at the end of the file.
 *
 * Float32 (and float16/bfloat16, computed in float32) Conv is a product
 * of the weights (packed once and cached for initializers) and the im2col
 * matrix, which is never stored: col_pack writes it straight into the
 * GEMM's panels (cpu_sgemm_src, k_gemm.c). A 1x1 stride-1 unpadded conv
 * multiplies the image directly; a depthwise 2-D conv is direct; a 3x3
 * stride-1 one with 32 or more channels in and out goes through Winograd's
 * F(2x2, 3x3) (conv_wino: 16 products with 2.25 times fewer multiply-adds,
 * and additions to transform the tiles in and out). Everything
 * else computes in double: im2col and a plain product, or for ConvTranspose
 * a product and col2im.
 */
#include "cpu.h"
#include "pool.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

/* The geometry of one convolution. For ConvTranspose, `in` is the small
 * side (X) and `out` the large one (Y); the index relation is the same:
 * out position o and kernel tap q read input position o*s - pb + q*d. */
struct cgeom {
	int nd;                      /* spatial dims */
	int64_t N, C, M, G;          /* batch, input channels, output channels, groups */
	int64_t in[IR_MAX_RANK], ker[IR_MAX_RANK], out[IR_MAX_RANK];
	int64_t str[IR_MAX_RANK], dil[IR_MAX_RANK], pb[IR_MAX_RANK], pe[IR_MAX_RANK];
	int64_t insz, kersz, outsz;  /* products of in, ker, out */
};

/*
 * Fills g from X, W and the attributes. transpose: ConvTranspose (W is
 * [C, M/G, k...], output size from output_shape/output_padding); else W is
 * [M, C/G, k...]. For DeformConv the output size comes from `offset`.
 */
static int conv_geom(struct cpu_kctx *k, const struct ir_tensor *x, const struct ir_tensor *w, bool transpose,
		     struct cgeom *g)
{
	memset(g, 0, sizeof(*g));
	if (x->rank < 3)
		return kerr(k, "input must be [N, C, spatial...], got %s", kshape(x));
	if (w->rank != x->rank)
		return kerr(k, "weight %s does not match input %s in rank", kshape(w), kshape(x));
	int nd = g->nd = x->rank - 2;
	g->N = x->dims[0];
	g->C = x->dims[1];
	g->G = kattr_i(k, "group", 1);
	if (g->G < 1 || g->G > (g->C > 0 ? g->C : 1))
		return kerr(k, "group %lld is out of range", (long long)g->G);
	if (g->C % g->G)
		return kerr(k, "%lld input channels do not divide into %lld groups", (long long)g->C, (long long)g->G);
	if (transpose) {
		if (w->dims[0] != g->C)
			return kerr(k, "weight %s needs %lld input channels", kshape(w), (long long)g->C);
		if (!kmul62(w->dims[1], g->G, &g->M))
			return kerr(k, "weight %s is too large", kshape(w));
	} else {
		g->M = w->dims[0];
		if (g->M % g->G)
			return kerr(k, "%lld output channels do not divide into %lld groups", (long long)g->M,
				    (long long)g->G);
		if (w->dims[1] != g->C / g->G)
			return kerr(k, "weight %s needs %lld channels per group", kshape(w), (long long)(g->C / g->G));
	}
	int n;
	const int64_t *ks = kattr_ints(k, "kernel_shape", &n);
	for (int i = 0; i < nd; i++) {
		g->in[i] = x->dims[i + 2];
		g->ker[i] = w->dims[i + 2];
		if (ks && n == nd && ks[i] != g->ker[i])
			return kerr(k, "kernel_shape does not match weight %s", kshape(w));
	}
	if (ks && n != nd)
		return kerr(k, "kernel_shape has %d values, %d expected", n, nd);
	int rc;
	if ((rc = kattr_ints_n(k, "strides", nd, g->str, 1, 1)) || (rc = kattr_ints_n(k, "dilations", nd, g->dil, 1, 1)))
		return rc;
	int64_t pads[2 * IR_MAX_RANK];
	if ((rc = kattr_ints_n(k, "pads", 2 * nd, pads, 0, transpose ? -((int64_t)1 << 40) : 0)))
		return rc;
	const char *ap = kattr_s(k, "auto_pad", "NOTSET");
	bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), upper = !strcmp(ap, "SAME_UPPER");
	bool valid = !strcmp(ap, "VALID");
	if (!same && !valid && strcmp(ap, "NOTSET") && *ap)
		return kerr(k, "auto_pad '%s' is not supported", ap);

	if (transpose) {
		int64_t opad[IR_MAX_RANK];
		if ((rc = kattr_ints_n(k, "output_padding", nd, opad, 0, 0)))
			return rc;
		const int64_t *os = kattr_ints(k, "output_shape", &n);
		if (os && n != nd && n != nd + 2)
			return kerr(k, "output_shape has %d values, %d expected", n, nd);
		if (os)
			os += n - nd;
		for (int i = 0; i < nd; i++) {
			int64_t eff, full;
			if (!kmul62(g->ker[i] ? g->ker[i] - 1 : 0, g->dil[i], &eff) ||
			    !kmul62(g->str[i], g->in[i] ? g->in[i] - 1 : 0, &full))
				return kerr(k, "convolution sizes overflow along axis %d", i + 2);
			eff += 1;
			full += opad[i] + eff;
			if (os || same) {
				/* output size given: the pads follow from it */
				int64_t o = os ? os[i] : g->in[i] * g->str[i];
				int64_t total = full - o;
				int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);   /* floor */
				g->out[i] = o;
				if (upper) {
					g->pb[i] = half;
					g->pe[i] = total - half;
				} else {
					g->pe[i] = half;
					g->pb[i] = total - half;
				}
			} else {
				if (!valid) {
					g->pb[i] = pads[i];
					g->pe[i] = pads[nd + i];
				}
				g->out[i] = full - g->pb[i] - g->pe[i];
			}
			if (g->out[i] < 0 || g->out[i] > ((int64_t)1 << 40))
				return kerr(k, "output size %lld along axis %d is out of range", (long long)g->out[i],
					    i + 2);
		}
	} else {
		for (int i = 0; i < nd; i++) {
			int64_t eff;
			if (!kmul62(g->ker[i] ? g->ker[i] - 1 : 0, g->dil[i], &eff))
				return kerr(k, "convolution sizes overflow along axis %d", i + 2);
			eff += 1;
			if (same) {
				g->out[i] = (g->in[i] + g->str[i] - 1) / g->str[i];
				int64_t total = (g->out[i] - 1) * g->str[i] + eff - g->in[i];
				if (total < 0)
					total = 0;
				if (upper) {
					g->pb[i] = total / 2;
					g->pe[i] = total - total / 2;
				} else {
					g->pe[i] = total / 2;
					g->pb[i] = total - total / 2;
				}
			} else {
				if (!valid) {
					g->pb[i] = pads[i];
					g->pe[i] = pads[nd + i];
				}
				int64_t span = g->in[i] + g->pb[i] + g->pe[i] - eff;
				if (span < 0)
					return kerr(k, "kernel %lld (dilated) is larger than the padded input %lld along axis %d",
						    (long long)eff, (long long)(g->in[i] + g->pb[i] + g->pe[i]), i + 2);
				g->out[i] = span / g->str[i] + 1;
			}
		}
	}
	g->insz = g->kersz = g->outsz = 1;
	for (int i = 0; i < nd; i++)
		if (!kmul62(g->insz, g->in[i], &g->insz) || !kmul62(g->kersz, g->ker[i], &g->kersz) ||
		    !kmul62(g->outsz, g->out[i], &g->outsz))
			return kerr(k, "convolution sizes overflow");
	int64_t t;
	if (!kmul62(g->kersz, g->C / g->G, &t) || !kmul62(t, g->outsz, &t) || !kmul62(g->N * g->M, g->outsz, &t))
		return kerr(k, "convolution sizes overflow");
	return 0;
}

/*
 * im2col of output rows [u0, u1) (a "row" is one line along the last
 * spatial dim, ol = out[last] positions; rows are counted over the other
 * output dims): col[(c * kersz + q) * ncols + (u - u0) * ol + o] =
 * x[c, pos * s - pb + q * d] (0 in the padding), ncols = (u1 - u0) * ol,
 * for c < nc channels of x (each insz long). The last spatial dim is an
 * explicit loop (a copy when the stride is 1); the others an odometer.
 */
#define IM2COL(NAME, T)                                                                          \
static void NAME(const struct cgeom *g, const T *x, int64_t nc, int64_t u0, int64_t u1, T *col)  \
{                                                                                                \
	int nd = g->nd, L = nd - 1;                                                              \
	int64_t ol = g->out[L], il = g->in[L], sl = g->str[L], dl = g->dil[L], pl = g->pb[L];    \
	int64_t ncols = (u1 - u0) * ol;                                                          \
	for (int64_t c = 0; c < nc; c++) {                                                       \
		const T *xc = x + c * g->insz;                                                   \
		for (int64_t q = 0; q < g->kersz; q++) {                                         \
			int64_t kq[IR_MAX_RANK], oo[IR_MAX_RANK], r = q, u = u0;                 \
			for (int i = nd - 1; i >= 0; i--) {                                      \
				kq[i] = r % g->ker[i];                                           \
				r /= g->ker[i];                                                  \
			}                                                                        \
			for (int i = L - 1; i >= 0; i--) {                                       \
				oo[i] = u % g->out[i];                                           \
				u /= g->out[i];                                                  \
			}                                                                        \
			T *dst = col + (c * g->kersz + q) * ncols;                               \
			/* the valid output range of the last dim for this tap */               \
			int64_t off = kq[L] * dl - pl, lo = 0, hi = ol;                          \
			if (off < 0)                                                             \
				lo = (-off + sl - 1) / sl;                                       \
			if (il - off <= 0)                                                       \
				hi = 0;                                                          \
			else if ((il - off + sl - 1) / sl < hi)                                  \
				hi = (il - off + sl - 1) / sl;                                   \
			if (lo > hi)                                                             \
				lo = hi;                                                         \
			for (u = u0; u < u1; u++, dst += ol) {                                   \
				int64_t base = 0;                                                \
				bool inside = true;                                              \
				for (int i = 0; i < L; i++) {                                    \
					int64_t p = oo[i] * g->str[i] - g->pb[i] + kq[i] * g->dil[i]; \
					if (p < 0 || p >= g->in[i])                              \
						inside = false;                                  \
					base = base * g->in[i] + p;                              \
				}                                                                \
				for (int i = L - 1; i >= 0; i--) {                               \
					if (++oo[i] < g->out[i])                                 \
						break;                                           \
					oo[i] = 0;                                               \
				}                                                                \
				if (!inside || lo >= hi) {                                       \
					memset(dst, 0, (size_t)ol * sizeof(T));                  \
					continue;                                                \
				}                                                                \
				const T *xr = xc + base * il;                                    \
				for (int64_t o = 0; o < lo; o++)                                 \
					dst[o] = 0;                                              \
				if (sl == 1)                                                     \
					memcpy(dst + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(T)); \
				else                                                             \
					for (int64_t o = lo; o < hi; o++)                        \
						dst[o] = xr[o * sl + off];                       \
				for (int64_t o = hi; o < ol; o++)                                \
					dst[o] = 0;                                              \
			}                                                                        \
		}                                                                                \
	}                                                                                        \
}

IM2COL(im2col_f64, double)
IM2COL(im2col_f32, float)

/* Whether the conv is 1x1, stride 1, unpadded: the image is its own im2col. */
static bool pointwise(const struct cgeom *g)
{
	for (int i = 0; i < g->nd; i++)
		if (g->ker[i] != 1 || g->str[i] != 1 || g->pb[i] || g->pe[i])
			return false;
	return true;
}

/* y[m, o] += sum_r w[m, r] * col[r, o]: m < M rows, r < K, o < N (double). */
static void dmm_acc(const double *w, const double *col, double *y, int64_t M, int64_t K, int64_t N)
{
	for (int64_t m = 0; m < M; m++)
		for (int64_t r = 0; r < K; r++) {
			double a = w[m * K + r];
			if (a == 0)
				continue;
			const double *c = col + r * N;
			double *yr = y + m * N;
			for (int64_t o = 0; o < N; o++)
				yr[o] += a * c[o];
		}
}

/*
 * Depthwise 2-D convolution (one input channel per group, as in MobileNet):
 * direct, tap by tap. For each kernel tap and output row the valid output
 * columns are found once, then a row of y gets w * (a row of x), which
 * vectorizes for stride 1. im2col + GEMM would multiply by a single row.
 * Planes (image, output channel) are independent: the pool splits them.
 */
struct dw_job {
	const struct cgeom *g;
	const float *x, *w, *bias;
	float *y;
	bool avx512;             /* dw_plane_avx512 (stride 1 or 2 along the rows) */
	bool dw3;                /* dw3_s1/_s2 (3x3, dilation 1, stride 1 or 2 both ways) */
	const struct cpu_epi *epi;   /* applied to each plane once done, or NULL */
};

/* the largest plane the AVX-512 depthwise kernel takes: blocks of 16
 * output columns, kernel columns */
#define DW_MAXB 16
#define DW_MAXK 16

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/*
 * One depthwise plane with AVX-512, stride 1 or 2 along the columns: for
 * each output row, 16 output columns at a time are summed over every tap
 * in registers (bias, then the taps in (row, column) order, one FMA each)
 * and stored once. Input lanes outside the row (the padding) are masked
 * off in the loads, which then do not touch that memory. The masks and
 * offsets depend only on the block of columns and the kernel column, so
 * they are found once per plane (at most DW_MAXB blocks x DW_MAXK columns;
 * wider planes take the portable loop).
 */
__attribute__((target("avx512f"), always_inline))
static inline void dw_plane_avx512_t(const struct cgeom *g, const float *xc, const float *wc, float b, float *yc,
				     int act, float lo, float hi, const int64_t KH, const int64_t KW)
{
	/* KH, KW > 0: the kernel's size as constants (the tap loops unroll) */
	int64_t ih = g->in[0], iw = g->in[1], oh = g->out[0], ow = g->out[1];
	int64_t kh = KH > 0 ? KH : g->ker[0], kw = KW > 0 ? KW : g->ker[1], sh = g->str[0], sw = g->str[1];
	int64_t dh = g->dil[0], dw = g->dil[1], ph = g->pb[0], pw = g->pb[1];
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	int64_t nb = (ow + 15) / 16;
	/* per block and kernel column: the first input column, the lanes to
	 * load (bits of the sw * 16-float span) */
	int64_t i0s[DW_MAXB][DW_MAXK];
	uint32_t ms[DW_MAXB][DW_MAXK];
	for (int64_t bi = 0; bi < nb; bi++) {
		int64_t o0 = bi * 16, no = ow - o0 < 16 ? ow - o0 : 16, span = (no - 1) * sw + 1;
		for (int64_t c = 0; c < kw; c++) {
			int64_t i0 = o0 * sw - pw + c * dw;
			int64_t elo = i0 < 0 ? -i0 : 0, ehi = iw - i0 < span ? iw - i0 : span;
			uint64_t m = elo >= ehi ? 0 : (((uint64_t)1 << ehi) - 1) & ~(((uint64_t)1 << elo) - 1);
			i0s[bi][c] = i0;
			ms[bi][c] = (uint32_t)(sw == 2 ? m & 0x55555555u : m);
		}
	}
	for (int64_t r = 0; r < oh; r++) {
		float *yr = yc + r * ow;
		for (int64_t bi = 0; bi < nb; bi++) {
			int64_t o0 = bi * 16, no = ow - o0 < 16 ? ow - o0 : 16;
			__m512 acc = _mm512_set1_ps(b);
			for (int64_t a = 0; a < kh; a++) {
				int64_t ir = r * sh - ph + a * dh;
				if (ir < 0 || ir >= ih)
					continue;
				const float *xr = xc + ir * iw;
				const float *wa = wc + a * kw;
				for (int64_t c = 0; c < kw; c++) {
					uint32_t m = ms[bi][c];
					if (!m)
						continue;
					const float *xp = xr + i0s[bi][c];
					__m512 xv;
					if (sw == 1) {
						xv = _mm512_maskz_loadu_ps((__mmask16)m, xp);
					} else {
						__m512 v0 = _mm512_maskz_loadu_ps((__mmask16)m, xp);
						__m512 v1 = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), xp + 16);
						xv = _mm512_permutex2var_ps(v0, even, v1);
					}
					acc = _mm512_fmadd_ps(_mm512_set1_ps(wa[c]), xv, acc);
				}
			}
			/* a fused Relu or Clip (lo <= hi) in the register: the
			 * order of cpu_epi_apply's compares */
			if (act == CPU_EPI_RELU)
				acc = _mm512_max_ps(_mm512_setzero_ps(), acc);
			else if (act == CPU_EPI_CLIP)
				acc = _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), acc));
			_mm512_mask_storeu_ps(yr + o0, (__mmask16)((1u << no) - 1), acc);
		}
	}
}

/* The plane, with the loops over a 3x3 kernel's taps unrolled (MobileNet's
 * depthwise convolutions): the same FMAs in the same order. */
__attribute__((target("avx512f")))
static void dw_plane_avx512(const struct cgeom *g, const float *xc, const float *wc, float b, float *yc, int act,
			    float lo, float hi)
{
	if (g->ker[0] == 3 && g->ker[1] == 3)
		dw_plane_avx512_t(g, xc, wc, b, yc, act, lo, hi, 3, 3);
	else
		dw_plane_avx512_t(g, xc, wc, b, yc, act, lo, hi, 0, 0);
}

/*
 * Depthwise 3x3, dilation 1, the same stride S (1 or 2) along rows and
 * columns (MobileNet's), with AVX-512: the nine weights sit in registers
 * for the whole plane, and R output rows are computed together, so each
 * input row is loaded once for the (up to 3 / S) output rows that read it
 * and R independent chains of FMAs run side by side. For stride 2 an input
 * row is split once into its columns 2o-1, 2o, 2o+1 (two permutes of a
 * pair of loads, one more pair for the third). PAIR: the plane is at most
 * 8 (S = 1) or 7 (S = 2) columns wide, and two planes share each vector
 * (lanes 0-7 the first, 8-15 the second), so the small planes of the last
 * layers do not leave most lanes idle. Every output element gets the
 * bias, then its taps in (row, column) order, one FMA each, as in
 * dw_plane_avx512: the same bits whichever path computes it.
 */
struct dw3_plane {
	const float *x, *w;
	float b;
	float *y;
};

/* bits j < 16 with 0 <= s + j < n: the lanes of a load at column s */
static inline uint32_t dw3_mask(int64_t s, int64_t n)
{
	int64_t lo = s < 0 ? -s : 0, hi = n - s < 16 ? n - s : 16;
	if (lo >= hi)
		return 0;
	return (uint32_t)((((uint64_t)1 << hi) - 1) & ~(((uint64_t)1 << lo) - 1));
}

__attribute__((target("avx512f"), always_inline))
static inline void dw3_rows_t(const struct cgeom *g, const struct dw3_plane *pa, const struct dw3_plane *pb,
			      const __m512 *wv, __m512 bv, int act, __m512 vlo, __m512 vhi, int64_t r0, const int S,
			      const int R, const bool PAIR)
{
	int64_t ih = g->in[0], iw = g->in[1], ow = g->out[1], ph = g->pb[0], pw = g->pb[1];
	const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	/* PAIR, stride 2: lanes 0-7 from the first plane's load, 8-15 from
	 * the second's, at offsets 0, 1, 2 of the columns 2o + s */
	const __m512i p0 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i p1 = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	const __m512i p2 = _mm512_set_epi32(0, 30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2);
	int64_t step = PAIR ? ow : 16;
	for (int64_t o0 = 0; o0 < ow; o0 += step) {
		int64_t no = PAIR ? ow : ow - o0 < 16 ? ow - o0 : 16;
		int64_t s = o0 * S - pw;
		uint32_t m[4];
		__mmask16 sm;
		if (PAIR) {
			/* ow <= 8: the first plane's lanes 0..no-1, the second's 8.. */
			if (S == 1)
				for (int c = 0; c < 3; c++)
					m[c] = dw3_mask(s + c, iw) & 0xffu;
			else
				m[0] = dw3_mask(s, iw) & 0xffffu;
			sm = (__mmask16)(((1u << no) - 1) | (((1u << no) - 1) << 8));
		} else {
			if (S == 1)
				for (int c = 0; c < 3; c++)
					m[c] = dw3_mask(s + c, iw);
			else {
				m[0] = dw3_mask(s, iw);
				m[1] = dw3_mask(s + 16, iw);
				m[2] = dw3_mask(s + 2, iw);
				m[3] = dw3_mask(s + 18, iw);
			}
			sm = (__mmask16)((1u << no) - 1);
		}
		__m512 acc[4];
		for (int i = 0; i < R; i++)
			acc[i] = bv;
		/* input rows (r0 + i) * S - ph + a for output row r0 + i, tap row a */
#pragma GCC unroll 16
		for (int t = 0; t < (R - 1) * S + 3; t++) {
			int64_t ir = r0 * S - ph + t;
			if (ir < 0 || ir >= ih)
				continue;
			const float *xa = pa->x + ir * iw + s, *xb = PAIR ? pb->x + ir * iw + s : NULL;
			/* the same columns of the next step's rows: into the
			 * cache while this step computes */
			if (!PAIR && ir + R * S < ih) {
				_mm_prefetch((const char *)(xa + R * S * iw), _MM_HINT_T0);
				if (S == 2)
					_mm_prefetch((const char *)(xa + R * S * iw + 16), _MM_HINT_T0);
			}
			__m512 xv[3];
			if (S == 1) {
				for (int c = 0; c < 3; c++) {
					xv[c] = _mm512_maskz_loadu_ps((__mmask16)m[c], xa + c);
					if (PAIR)
						xv[c] = _mm512_mask_loadu_ps(xv[c], (__mmask16)(m[c] << 8), xb + c - 8);
				}
			} else if (PAIR) {
				__m512 va = _mm512_maskz_loadu_ps((__mmask16)m[0], xa);
				__m512 vb = _mm512_maskz_loadu_ps((__mmask16)m[0], xb);
				xv[0] = _mm512_permutex2var_ps(va, p0, vb);
				xv[1] = _mm512_permutex2var_ps(va, p1, vb);
				xv[2] = _mm512_permutex2var_ps(va, p2, vb);
			} else {
				__m512 v0 = _mm512_maskz_loadu_ps((__mmask16)m[0], xa);
				__m512 v1 = _mm512_maskz_loadu_ps((__mmask16)m[1], xa + 16);
				__m512 v2 = _mm512_maskz_loadu_ps((__mmask16)m[2], xa + 2);
				__m512 v3 = _mm512_maskz_loadu_ps((__mmask16)m[3], xa + 18);
				xv[0] = _mm512_permutex2var_ps(v0, ev, v1);
				xv[1] = _mm512_permutex2var_ps(v0, od, v1);
				xv[2] = _mm512_permutex2var_ps(v2, ev, v3);
			}
#pragma GCC unroll 4
			for (int i = 0; i < R; i++) {
				int a = t - i * S;
				if (a < 0 || a > 2)
					continue;
				for (int c = 0; c < 3; c++)
					acc[i] = _mm512_fmadd_ps(wv[a * 3 + c], xv[c], acc[i]);
			}
		}
		for (int i = 0; i < R; i++) {
			__m512 v = acc[i];
			if (act == CPU_EPI_RELU)
				v = _mm512_max_ps(_mm512_setzero_ps(), v);
			else if (act == CPU_EPI_CLIP)
				v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
			float *ya = pa->y + (r0 + i) * ow + o0;
			if (PAIR) {
				_mm512_mask_storeu_ps(ya, (__mmask16)(sm & 0xffu), v);
				_mm512_mask_storeu_ps(pb->y + (r0 + i) * ow - 8, (__mmask16)(sm & 0xff00u), v);
			} else {
				_mm512_mask_storeu_ps(ya, sm, v);
			}
		}
	}
}

/* one plane (pb NULL) or two (PAIR) through dw3_rows_t, R rows a step */
__attribute__((target("avx512f"), always_inline))
static inline void dw3_plane_t(const struct cgeom *g, const struct dw3_plane *pa, const struct dw3_plane *pb, int act,
			       float lo, float hi, const int S, const bool PAIR)
{
	__m512 wv[9], bv;
	for (int i = 0; i < 9; i++)
		wv[i] = PAIR ? _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(pa->w[i]), _mm512_set1_ps(pb->w[i]))
			     : _mm512_set1_ps(pa->w[i]);
	bv = PAIR ? _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(pa->b), _mm512_set1_ps(pb->b)) : _mm512_set1_ps(pa->b);
	__m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
	int64_t oh = g->out[0], r = 0;
	for (; r + 4 <= oh; r += 4)
		dw3_rows_t(g, pa, pb, wv, bv, act, vlo, vhi, r, S, 4, PAIR);
	for (; r + 2 <= oh; r += 2)
		dw3_rows_t(g, pa, pb, wv, bv, act, vlo, vhi, r, S, 2, PAIR);
	for (; r < oh; r++)
		dw3_rows_t(g, pa, pb, wv, bv, act, vlo, vhi, r, S, 1, PAIR);
}

__attribute__((target("avx512f")))
static void dw3_s1(const struct cgeom *g, const struct dw3_plane *pa, int act, float lo, float hi)
{
	dw3_plane_t(g, pa, NULL, act, lo, hi, 1, false);
}

__attribute__((target("avx512f")))
static void dw3_s2(const struct cgeom *g, const struct dw3_plane *pa, int act, float lo, float hi)
{
	dw3_plane_t(g, pa, NULL, act, lo, hi, 2, false);
}

__attribute__((target("avx512f")))
static void dw3_s1_pair(const struct cgeom *g, const struct dw3_plane *pa, const struct dw3_plane *pb, int act,
			float lo, float hi)
{
	dw3_plane_t(g, pa, pb, act, lo, hi, 1, true);
}

__attribute__((target("avx512f")))
static void dw3_s2_pair(const struct cgeom *g, const struct dw3_plane *pa, const struct dw3_plane *pb, int act,
			float lo, float hi)
{
	dw3_plane_t(g, pa, pb, act, lo, hi, 2, true);
}
#endif

static void dw_planes(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct dw_job *j = ctx;
	const struct cgeom *g = j->g;
	(void)worker;
	int64_t mg = g->M / g->G;
	int64_t ih = g->in[0], iw = g->in[1], oh = g->out[0], ow = g->out[1];
	int64_t kh = g->ker[0], kw = g->ker[1], sh = g->str[0], sw = g->str[1];
	int64_t dh = g->dil[0], dw = g->dil[1], ph = g->pb[0], pw = g->pb[1];
#if defined(__x86_64__) || defined(__i386__)
	if (j->dw3) {
		/* an activation without residual in the kernel's registers,
		 * else the epilogue over the plane after */
		const struct cpu_epi *e = j->epi;
		bool inreg = e && !e->z && (e->act != CPU_EPI_CLIP || e->lo <= e->hi);
		int act = inreg ? e->act : CPU_EPI_NONE;
		float lo = e ? e->lo : 0, hi = e ? e->hi : 0;
		int64_t s = g->str[0];
		bool pair = s == 1 ? ow <= 8 : ow <= 7;
		for (int64_t pl = begin; pl < end;) {
			struct dw3_plane p[2];
			int np = pair && pl + 1 < end ? 2 : 1;
			for (int q = 0; q < np; q++) {
				int64_t n = (pl + q) / g->M, oc = (pl + q) % g->M;
				p[q] = (struct dw3_plane){ j->x + (n * g->C + oc / mg) * g->insz, j->w + oc * 9,
							   j->bias ? j->bias[oc] : 0, j->y + (n * g->M + oc) * g->outsz };
			}
			if (np == 2 && s == 1)
				dw3_s1_pair(g, &p[0], &p[1], act, lo, hi);
			else if (np == 2)
				dw3_s2_pair(g, &p[0], &p[1], act, lo, hi);
			else if (s == 1)
				dw3_s1(g, &p[0], act, lo, hi);
			else
				dw3_s2(g, &p[0], act, lo, hi);
			if (e && !inreg)
				for (int q = 0; q < np; q++)
					cpu_epi_apply(e, p[q].y, p[q].y - j->y, 0, 1, g->outsz);
			pl += np;
		}
		return;
	}
#endif
	for (int64_t pl = begin; pl < end; pl++) {
		int64_t n = pl / g->M, oc = pl % g->M;
		const float *xc = j->x + (n * g->C + oc / mg) * g->insz;
		const float *wc = j->w + oc * g->kersz;
		float *yc = j->y + (n * g->M + oc) * g->outsz;
		float b = j->bias ? j->bias[oc] : 0;
#if defined(__x86_64__) || defined(__i386__)
		if (j->avx512) {
			/* an activation without residual in the kernel's
			 * registers, else the epilogue over the plane after */
			const struct cpu_epi *e = j->epi;
			bool inreg = e && !e->z && (e->act != CPU_EPI_CLIP || e->lo <= e->hi);
			dw_plane_avx512(g, xc, wc, b, yc, inreg ? e->act : CPU_EPI_NONE, e ? e->lo : 0, e ? e->hi : 0);
			if (e && !inreg)
				cpu_epi_apply(e, yc, yc - j->y, 0, 1, g->outsz);
			continue;
		}
#endif
		for (int64_t o = 0; o < g->outsz; o++)
			yc[o] = b;
		for (int64_t a = 0; a < kh; a++) {
			for (int64_t c = 0; c < kw; c++) {
				float wv = wc[a * kw + c];
				/* columns: 0 <= o * sw - pw + c * dw < iw */
				int64_t off = c * dw - pw, lo, hi;
				ktap_range(off, iw, sw, ow, &lo, &hi);
				if (lo >= hi)
					continue;
				for (int64_t r = 0; r < oh; r++) {
					int64_t ir = r * sh - ph + a * dh;
					if (ir < 0 || ir >= ih)
						continue;
					const float *xr = xc + ir * iw + off;
					float *yr = yc + r * ow;
					if (sw == 1)
						for (int64_t o = lo; o < hi; o++)
							yr[o] += wv * xr[o];
					else
						for (int64_t o = lo; o < hi; o++)
							yr[o] += wv * xr[o * sw];
				}
			}
		}
		if (j->epi)
			cpu_epi_apply(j->epi, yc, yc - j->y, 0, 1, g->outsz);
	}
}

static int conv_dw_f32(struct cpu_kctx *k, const struct cgeom *g, const float *x, const float *w, const float *bias,
		       float *y, const struct cpu_epi *epi)
{
	bool avx512 = cpu_isa() >= CPU_ISA_AVX512;
	struct dw_job j = { g, x, w, bias, y,
			    avx512 && (g->str[1] == 1 || g->str[1] == 2) && (g->out[1] + 15) / 16 <= DW_MAXB &&
				    g->ker[1] <= DW_MAXK,
			    avx512 && g->ker[0] == 3 && g->ker[1] == 3 && g->dil[0] == 1 && g->dil[1] == 1 &&
				    g->str[0] == g->str[1] && (g->str[0] == 1 || g->str[0] == 2),
			    epi };
	cpu_parallel_for(g->N * g->M, 1, dw_planes, &j);
	return kstop(k);
}

/* The im2col matrix of one image and group (rows c * kersz + q, one column
 * per output position), produced panel by panel for cpu_sgemm_src. */
struct colsrc {
	const struct cgeom *g;
	const float *x;          /* the group's first input channel */
	bool avx512;             /* segments moved by col_move_avx512 */
};


/*
 * cpu_bpack_fn for a convolution: rows [p0, p0 + kc), columns [j0, j0 +
 * nc) of the im2col matrix straight into the panels. Row p is input
 * channel p / kersz read through kernel tap p % kersz, and every row of a
 * tap reads its channel at the same places: so the places are worked out
 * once per tap and call, as a list of segments (a run of columns inside
 * one panel that is padding, or a stretch of one input line), and each row
 * replays its tap's list on its own channel.
 */
struct cseg {
	int64_t dst;             /* offset in the panels for row p0 (panel * kc * nr + column) */
	int64_t src;             /* offset in the channel of the first element, or -1: zeros */
	int64_t len;
};

/* A list of segments, grown as needed; false on no memory. */
struct cseg_list {
	struct cseg *a;
	size_t n, cap;
};

static bool cseg_add(struct cseg_list *l, int64_t dst, int64_t src, int64_t len)
{
	if (len <= 0)
		return true;
	if (l->n == l->cap) {
		size_t c = l->cap ? 2 * l->cap : 256;
		struct cseg *b = realloc(l->a, c * sizeof(*b));
		if (!b)
			return false;
		l->a = b;
		l->cap = c;
	}
	l->a[l->n++] = (struct cseg){ dst, src, len };
	return true;
}

/* this thread's segment list, kept between calls; a pool worker frees
 * its own as it exits (cpu_conv_thread_done) */
static _Thread_local struct cseg_list cseg_tl;
/* and its buffer for pw_transposed's T */
static _Thread_local float *pwt_buf, *pwt_col;
static _Thread_local size_t pwt_cap, pwt_colcap;
/* and conv_wino's V and products */
static _Thread_local float *wino_vbuf, *wino_mbuf;
static _Thread_local size_t wino_vcap, wino_mcap;

/* cpu_conv_thread_done(): see cpu.h */

void cpu_conv_thread_done(void)
{
	free(cseg_tl.a);
	cseg_tl = (struct cseg_list){ 0 };
	free(pwt_buf);
	free(pwt_col);
	free(wino_vbuf);
	free(wino_mbuf);
	wino_vbuf = wino_mbuf = NULL;
	wino_vcap = wino_mcap = 0;
	pwt_buf = pwt_col = NULL;
	pwt_cap = pwt_colcap = 0;
}

/* Appends the segments of tap q for the chunk's columns [j0, j0 + nc). */
static bool col_tap_segs(const struct cgeom *g, int64_t q, int64_t j0, int64_t nc, int64_t kc, int nr,
			 struct cseg_list *l)
{
	int nd = g->nd, L = nd - 1;
	int64_t ol = g->out[L], il = g->in[L], sl = g->str[L], dl = g->dil[L], pl = g->pb[L];
	int64_t kq[IR_MAX_RANK], pos[IR_MAX_RANK];
	for (int i = nd - 1; i >= 0; i--) {
		kq[i] = q % g->ker[i];
		q /= g->ker[i];
	}
	/* the valid output range of the last dim for this tap */
	int64_t off = kq[L] * dl - pl, lo = 0, hi = ol;
	if (off < 0)
		lo = (-off + sl - 1) / sl;
	if (il - off <= 0)
		hi = 0;
	else if ((il - off + sl - 1) / sl < hi)
		hi = (il - off + sl - 1) / sl;
	if (lo > hi)
		lo = hi;
	/* the output line of column j0 and the position along it */
	int64_t u0 = j0 / ol, o = j0 % ol;
	for (int i = L - 1; i >= 0; i--) {
		pos[i] = u0 % g->out[i];
		u0 /= g->out[i];
	}
	bool ok = true;
	int64_t j = 0;   /* column of the chunk */
	while (j < nc) {
		/* the input line of this output line, or none (padding) */
		int64_t base = 0;
		bool inside = true;
		for (int i = 0; i < L; i++) {
			int64_t pi = pos[i] * g->str[i] - g->pb[i] + kq[i] * g->dil[i];
			if (pi < 0 || pi >= g->in[i])
				inside = false;
			base = base * g->in[i] + pi;
		}
		int64_t send = j + (ol - o) < nc ? j + (ol - o) : nc;
		while (j < send) {
			/* a run inside one panel: zeros, the inside part [a, b), zeros */
			int64_t k = j % nr, run = nr - k < send - j ? nr - k : send - j;
			int64_t a = !inside ? run : lo - o < 0 ? 0 : lo - o > run ? run : lo - o;
			int64_t b = !inside ? run : hi - o < a ? a : hi - o > run ? run : hi - o;
			int64_t dst = j / nr * kc * nr + k;
			ok = ok && cseg_add(l, dst, -1, a);
			ok = ok && cseg_add(l, dst + a, base * il + (o + a) * sl + off, b - a);
			ok = ok && cseg_add(l, dst + b, -1, run - b);
			j += run;
			o += run;
		}
		/* the next output line */
		o = 0;
		for (int i = L - 1; i >= 0; i--) {
			if (++pos[i] < g->out[i])
				break;
			pos[i] = 0;
		}
	}
	/* the last panel's columns past nc */
	if (nc % nr)
		ok = ok && cseg_add(l, nc / nr * kc * nr + nc % nr, -1, nr - nc % nr);
	return ok;
}

#if defined(__x86_64__) || defined(__i386__)
/* n floats (at most 32) from src to d, or zeros when src is NULL; masked. */
__attribute__((target("avx512f")))
static void col_move_avx512(float *d, const float *src, int64_t n)
{
	uint32_t m = n >= 32 ? 0xffffffffu : (1u << n) - 1;
	__m512 v0 = src ? _mm512_maskz_loadu_ps((__mmask16)m, src) : _mm512_setzero_ps();
	_mm512_mask_storeu_ps(d, (__mmask16)m, v0);
	if (n > 16) {
		__m512 v1 = src ? _mm512_maskz_loadu_ps((__mmask16)(m >> 16), src + 16) : _mm512_setzero_ps();
		_mm512_mask_storeu_ps(d + 16, (__mmask16)(m >> 16), v1);
	}
}

/* n floats (at most 32) from src at stride 2 to d: the even lanes of
 * pairs of masked loads (only the elements read are touched). */
__attribute__((target("avx512f")))
static void col_move2_avx512(float *d, const float *src, int64_t n)
{
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	for (int64_t h = 0; h < n; h += 16) {
		int64_t cnt = n - h < 16 ? n - h : 16;
		/* elements 0, 2, ..., 2 (cnt - 1) of the 32 from src + 2h */
		uint32_t m = (uint32_t)((((uint64_t)1 << (2 * cnt - 1)) - 1) & 0x55555555u);
		__m512 v0 = _mm512_maskz_loadu_ps((__mmask16)m, src + 2 * h);
		__m512 v1 = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), src + 2 * h + 16);
		_mm512_mask_storeu_ps(d + h, (__mmask16)((1u << cnt) - 1), _mm512_permutex2var_ps(v0, even, v1));
	}
}
#endif

/* Row p of the panels element by element, with no memory of its own:
 * col_pack when the segment lists get none. */
static void col_row_slow(const struct colsrc *s, int64_t p, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
			 float *bp, int nr)
{
	const struct cgeom *g = s->g;
	int nd = g->nd;
	int64_t c = p / g->kersz, q = p % g->kersz, kq[IR_MAX_RANK];
	for (int i = nd - 1; i >= 0; i--) {
		kq[i] = q % g->ker[i];
		q /= g->ker[i];
	}
	int64_t cols = (nc + nr - 1) / nr * nr;
	for (int64_t j = 0; j < cols; j++) {
		float v = 0;
		if (j < nc) {
			int64_t u = j0 + j, idx = 0;
			bool inside = true;
			int64_t o[IR_MAX_RANK];
			for (int i = nd - 1; i >= 0; i--) {
				o[i] = u % g->out[i];
				u /= g->out[i];
			}
			for (int i = 0; i < nd; i++) {
				int64_t pi = o[i] * g->str[i] - g->pb[i] + kq[i] * g->dil[i];
				inside = inside && pi >= 0 && pi < g->in[i];
				idx = idx * g->in[i] + pi;
			}
			if (inside)
				v = s->x[c * g->insz + idx];
		}
		bp[j / nr * kc * nr + (p - p0) * nr + j % nr] = v;
	}
}

static void col_pack(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *bp, int nr)
{
	const struct colsrc *s = ctx;
	const struct cgeom *g = s->g;
	int64_t sl = g->str[g->nd - 1], kersz = g->kersz;
	struct cseg_list *l = &cseg_tl;
	/* the taps the rows use (all of them when kc >= kersz), in row order */
	int64_t ntap = kc < kersz ? kc : kersz, q0 = p0 % kersz;
	size_t start[65];
	bool small = ntap <= 64;
	l->n = 0;
	for (int64_t t = 0; small && t < ntap; t++) {
		start[t] = l->n;
		if (!col_tap_segs(g, (q0 + t) % kersz, j0, nc, kc, nr, l)) {
			small = false;
			break;
		}
	}
	if (small)
		start[ntap] = l->n;
	for (int64_t p = p0; p < p0 + kc; p++) {
		int64_t c = p / kersz, t = (p - p0) % ntap;
		size_t e0, e1;
		if (small) {
			e0 = start[t];
			e1 = start[t + 1];
		} else {
			/* many taps (or no memory for them all): this row's own */
			l->n = 0;
			if (!col_tap_segs(g, p % kersz, j0, nc, kc, nr, l)) {
				col_row_slow(s, p, p0, kc, j0, nc, bp, nr);
				continue;
			}
			e0 = 0;
			e1 = l->n;
		}
		const float *xc = s->x + c * g->insz;
		float *row = bp + (p - p0) * nr;
		for (size_t e = e0; e < e1; e++) {
			const struct cseg *sg = &l->a[e];
			float *d = row + sg->dst;
			const float *src = sg->src >= 0 ? xc + sg->src : NULL;
#if defined(__x86_64__) || defined(__i386__)
			if (s->avx512 && (sl == 1 || !src)) {
				col_move_avx512(d, src, sg->len);
				continue;
			}
			if (s->avx512 && sl == 2) {
				col_move2_avx512(d, src, sg->len);
				continue;
			}
#endif
			if (!src)
				for (int64_t t2 = 0; t2 < sg->len; t2++)
					d[t2] = 0;
			else if (sl == 1)
				for (int64_t t2 = 0; t2 < sg->len; t2++)
					d[t2] = src[t2];
			else
				for (int64_t t2 = 0; t2 < sg->len; t2++)
					d[t2] = src[t2 * sl];
		}
	}
}

/* One float32 convolution, cut by (image, group). */
struct conv_job {
	const struct cgeom *g;
	const float *x, *w, *bias;
	float *y;
	bool pw;                 /* 1x1, stride 1, unpadded: the image is B */
	bool nomem;              /* a product could not get its packing buffer */
	const float *wpk;        /* the weights packed per group (conv_wpack) or NULL */
	int64_t wpk_g;           /* floats per group in wpk */
	const struct cpu_epi *epi;   /* the fused epilogue (Z laid out as y) or NULL */
	bool tr;                 /* pw with few positions: computed transposed (pw_transposed) */
	const float *wtk;        /* W^T packed per group (conv_wtpack) or NULL */
	int64_t wtk_g;           /* floats per group in wtk */
};

/*
 * A conv over few positions (a 7x7 image: 49 columns of C, which panels
 * of 32 columns pad to 64) computed transposed: T = X^T W^T (positions x
 * output channels, the channels along the vector lanes, which MobileNet
 * and ResNet have in multiples of 16; X the image for a 1x1 stride-1 conv,
 * else its im2col matrix, made first), started at
 * the bias, then T is transposed into y and the epilogue applied. Each
 * element of y gets the same arithmetic as in the direct product (the
 * bias, then each K block's sum added; beta 1 on a C that holds the bias
 * is the same as the direct product's rowbias): the same bits.
 */
struct pwt_job {
	const float *t;          /* T, N x mg */
	float *y;                /* the group's output, mg x N */
	int64_t N, mg;
	const struct cpu_epi *e; /* z from y's first element, or NULL */
};

#define PWT_MB 16   /* output channels a task transposes */

#if defined(__x86_64__) || defined(__i386__)
/* y[m0 + i][n0 + r] = t[(n0 + r) * mg + m0 + i] for i < 16, r < nn (<= 16):
 * a 16 x 16 block transposed in registers. */
__attribute__((target("avx512f")))
static void pwt_block16(const float *t, int64_t mg, float *y, int64_t N, int64_t nn)
{
	__m512 r[16], u[16];
	__mmask16 mk = (__mmask16)((1u << nn) - 1);
	for (int i = 0; i < 16; i++)
		r[i] = i < nn ? _mm512_loadu_ps(t + i * mg) : _mm512_setzero_ps();
	/* pairs of rows, then quads (32-bit, then 64-bit interleaves), then
	 * the 128-bit lanes across the 4 and 8 apart */
	for (int i = 0; i < 16; i += 2) {
		u[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		u[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[i]), _mm512_castps_pd(u[i + 2])));
		r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[i]), _mm512_castps_pd(u[i + 2])));
		r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[i + 1]), _mm512_castps_pd(u[i + 3])));
		r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[i + 1]), _mm512_castps_pd(u[i + 3])));
	}
	/* r[4q + j]: rows 4q..4q+3, column j + 4 * lane (lane = 128-bit part) */
	for (int j = 0; j < 4; j++) {
		u[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);        /* lanes 0, 2 of each */
		u[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);    /* lanes 1, 3 */
		u[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
		u[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
	}
	for (int j = 0; j < 4; j++) {
		/* column j + 4 * lane for lane 0..3: from u[j] (lanes 0, 2 of
		 * rows 0-7), u[4 + j] (1, 3), u[8 + j], u[12 + j] (rows 8-15) */
		__m512 c0 = _mm512_shuffle_f32x4(u[j], u[8 + j], 0x88);       /* lane 0 */
		__m512 c2 = _mm512_shuffle_f32x4(u[j], u[8 + j], 0xdd);       /* lane 2 */
		__m512 c1 = _mm512_shuffle_f32x4(u[4 + j], u[12 + j], 0x88);  /* lane 1 */
		__m512 c3 = _mm512_shuffle_f32x4(u[4 + j], u[12 + j], 0xdd);  /* lane 3 */
		_mm512_mask_storeu_ps(y + (j + 0) * N, mk, c0);
		_mm512_mask_storeu_ps(y + (j + 4) * N, mk, c1);
		_mm512_mask_storeu_ps(y + (j + 8) * N, mk, c2);
		_mm512_mask_storeu_ps(y + (j + 12) * N, mk, c3);
	}
}
#endif

static void pwt_rows(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct pwt_job *p = ctx;
	(void)worker;
	for (int64_t b = begin; b < end; b++) {
		int64_t m0 = b * PWT_MB, m1 = m0 + PWT_MB < p->mg ? m0 + PWT_MB : p->mg;
#if defined(__x86_64__) || defined(__i386__)
		if (m1 - m0 == 16 && cpu_isa() >= CPU_ISA_AVX512) {
			for (int64_t n0 = 0; n0 < p->N; n0 += 16)
				pwt_block16(p->t + n0 * p->mg + m0, p->mg, p->y + m0 * p->N + n0, p->N,
					    p->N - n0 < 16 ? p->N - n0 : 16);
			if (p->e)
				cpu_epi_apply(p->e, p->y + m0 * p->N, m0 * p->N, p->N, m1 - m0, p->N);
			continue;
		}
#endif
		for (int64_t m = m0; m < m1; m++) {
			float *yr = p->y + m * p->N;
			const float *tc = p->t + m;
			for (int64_t n = 0; n < p->N; n++)
				yr[n] = tc[n * p->mg];
		}
		if (p->e)
			cpu_epi_apply(p->e, p->y + m0 * p->N, m0 * p->N, p->N, m1 - m0, p->N);
	}
}

/* this thread's buffer *buf of at least n floats (kept, grown as needed), or NULL */
static float *pwt_space(float **buf, size_t *cap, size_t n)
{
	if (n > *cap) {
		free(*buf);
		*buf = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
		*cap = *buf ? n : 0;
	}
	return *buf;
}

/* im2col_f32 of channels [begin, end), for the threads to share */
struct i2c_job {
	const struct cgeom *g;
	const float *x;
	float *col;
	int64_t lines, per;      /* output lines; floats of col per channel */
};

static void i2c_chans(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct i2c_job *p = ctx;
	(void)worker;
	im2col_f32(p->g, p->x + begin * p->g->insz, end - begin, 0, p->lines, p->col + begin * p->per);
}

/* pw: x is its own im2col matrix; else the group's im2col matrix is made
 * first (the same elements col_pack would give the direct product). */
static bool pw_transposed(const struct cgeom *g, bool pw, const float *xg, const float *wg, const float *wtk,
			  const float *bg, float *yg, const struct cpu_epi *ep, int64_t mg, int64_t kk)
{
	int64_t N = g->outsz;
	float *t = pwt_space(&pwt_buf, &pwt_cap, (size_t)(N * mg));
	if (!t)
		return false;
	if (!pw) {
		float *col = pwt_space(&pwt_col, &pwt_colcap, (size_t)(kk * N));
		if (!col)
			return false;
		struct i2c_job ij = { g, xg, col, N / g->out[g->nd - 1], N * g->kersz };
		cpu_parallel_for(g->C / g->G, 8, i2c_chans, &ij);
		xg = col;
	}
	for (int64_t n = 0; n < N; n++)
		for (int64_t m = 0; m < mg; m++)
			t[n * mg + m] = bg ? bg[m] : 0;
	cpu_sgemm_pre(true, true, N, mg, kk, 1.0f, xg, N, NULL, wg, kk, wtk, 1.0f, NULL, t, mg, NULL);
	struct pwt_job pj = { t, yg, N, mg, ep };
	cpu_parallel_for((mg + PWT_MB - 1) / PWT_MB, 1, pwt_rows, &pj);
	return true;
}

/* Whether pw_transposed takes a conv: few positions, which panels of
 * 32 columns pad by a quarter or more, a K long enough for the padding's
 * multiply-adds (K * pad a column of C) to outweigh the transposing (a few
 * operations an element of C), and output channels in whole vectors. On a
 * Zen 4: 7x7 with K >= 320 gains (MobileNetV2's features.14-18, 10-20%),
 * with K = 160 and 14x14 (a pad of an eighth) not. */
static bool pw_by_positions(const struct cgeom *g, int64_t mg, int64_t kk)
{
	int64_t n = g->outsz, pad = (n + 31) / 32 * 32 - n;
	return n >= 16 && n <= 256 && pad * 4 >= n && kk * pad >= 64 * n && mg % 16 == 0 && mg >= 64;
}

/*
 * Computes the (image, group) pairs [begin, end): the bias plus the
 * product of the weights and the image (1x1) or its im2col matrix, which
 * col_pack makes straight into the product's panels. Called for all pairs
 * at once (the threads then share each product) or split among the
 * threads (the products inside then run serially); the arithmetic of
 * every output element is the same either way.
 */
static void conv_groups(void *ctx, int64_t begin, int64_t end, int worker)
{
	struct conv_job *j = ctx;
	const struct cgeom *g = j->g;
	(void)worker;
	int64_t cg = g->C / g->G, mg = g->M / g->G, kk = cg * g->kersz;
	for (int64_t t = begin; t < end; t++) {
		int64_t n = t / g->G, gi = t % g->G;
		const float *xg = j->x + (n * g->C + gi * cg) * g->insz;
		float *yg = j->y + (n * g->M + gi * mg) * g->outsz;
		const float *wg = j->w + gi * mg * kk, *wp = j->wpk ? j->wpk + gi * j->wpk_g : NULL;
		/* the products start the output at the bias (or 0) and end it
		 * with the epilogue (its Z from the group's first element) */
		const float *bg = j->bias ? j->bias + gi * mg : NULL;
		struct cpu_epi e, *ep = NULL;
		if (j->epi) {
			e = *j->epi;
			e.z = e.z ? e.z + (yg - j->y) : NULL;
			ep = &e;
		}
		if (j->tr) {
			if (!pw_transposed(g, j->pw, xg, wg, j->wtk ? j->wtk + gi * j->wtk_g : NULL, bg, yg, ep, mg, kk))
				j->nomem = true;
			continue;
		}
		if (j->pw) {
			cpu_sgemm_pre(false, false, mg, g->outsz, kk, 1.0f, wg, kk, wp, xg, g->outsz, NULL, 0.0f, bg, yg,
				      g->outsz, ep);
			continue;
		}
		struct colsrc cs = { g, xg, cpu_isa() >= CPU_ISA_AVX512 };
		if (!cpu_sgemm_src(mg, g->outsz, kk, 1.0f, wg, kk, wp, col_pack, &cs, true, bg, yg, g->outsz, ep))
			j->nomem = true;
	}
}

/* The weights of every group packed as the products' A (for the cache). */
struct wpack_arg {
	const struct cgeom *g;
	const float *w;
};

/* The weights of every group packed as the products' A (tr: W^T as the
 * transposed products' B). */
static float *conv_wpack_side(const struct wpack_arg *a, bool tr)
{
	const struct cgeom *g = a->g;
	int64_t mg = g->M / g->G, kk = g->C / g->G * g->kersz;
	size_t per = cpu_sgemm_pack_floats(tr, mg, kk);
	float *p = aligned_alloc(64, (per * (size_t)g->G * sizeof(float) + 63) / 64 * 64);
	for (int64_t gi = 0; p && gi < g->G; gi++) {
		if (tr)
			cpu_sgemm_pack_b(true, kk, mg, a->w + gi * mg * kk, kk, p + (size_t)gi * per);
		else
			cpu_sgemm_pack_a(false, mg, kk, a->w + gi * mg * kk, kk, p + (size_t)gi * per);
	}
	return p;
}

static float *conv_wpack(const void *arg)
{
	return conv_wpack_side(arg, false);
}

static float *conv_wtpack(const void *arg)
{
	return conv_wpack_side(arg, true);
}

/*
 * Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (Lavin and Gray,
 * "Fast Algorithms for Convolutional Neural Networks", 2016). Each 2x2
 * block of outputs (a tile) comes from a 4x4 block of the input d:
 * Y = A^T [U . V] A, U = G g G^T (the 3x3 weights g, transformed once and
 * cached), V = B^T d B. The 16 products U . V, summed over the input
 * channels, are 16 GEMMs (one per element xi of the 4x4 transform),
 * M x tiles x C, with 2.25 times fewer multiply-adds than the direct
 * product's M x positions x 9C. The transforms only add and subtract (G
 * also halves, done in double once), so the results differ from the
 * direct product's by rounding alone (the tests bound it).
 *
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 *
 * Three passes, each split by what it writes: V[xi][c][t] for the tiles t
 * of all images (the pool splits (image, channel) pairs), the 16 GEMMs
 * (split inside, as every product), then Y from the 16 results, plane by
 * plane (image, output channel), with the bias and the fused epilogue.
 * Each output element sees the same arithmetic at any thread count.
 */

/* floats of wino_pack's block: 16 packed U_xi, then the 16 U_xi plain */
static size_t wino_floats(int64_t M, int64_t C)
{
	return 16 * (cpu_sgemm_pack_floats(false, M, C) + (size_t)(M * C));
}

struct wino_warg {
	const float *w;          /* [M, C, 3, 3] */
	int64_t M, C;
};

static float *wino_pack(const void *arg)
{
	const struct wino_warg *a = arg;
	int64_t M = a->M, C = a->C;
	size_t per = cpu_sgemm_pack_floats(false, M, C);
	float *p = aligned_alloc(64, (wino_floats(M, C) * sizeof(float) + 63) / 64 * 64);
	if (!p)
		return NULL;
	float *plain = p + 16 * per;
	static const double G[4][3] = { { 1, 0, 0 }, { 0.5, 0.5, 0.5 }, { 0.5, -0.5, 0.5 }, { 0, 0, 1 } };
	for (int64_t m = 0; m < M; m++)
		for (int64_t c = 0; c < C; c++) {
			const float *g = a->w + (m * C + c) * 9;
			double t[4][3];
			for (int i = 0; i < 4; i++)
				for (int kx = 0; kx < 3; kx++)
					t[i][kx] = G[i][0] * g[kx] + G[i][1] * g[3 + kx] + G[i][2] * g[6 + kx];
			for (int i = 0; i < 4; i++)
				for (int jx = 0; jx < 4; jx++)
					plain[(size_t)(i * 4 + jx) * (size_t)(M * C) + (size_t)(m * C + c)] =
						(float)(t[i][0] * G[jx][0] + t[i][1] * G[jx][1] + t[i][2] * G[jx][2]);
		}
	for (int xi = 0; xi < 16; xi++)
		cpu_sgemm_pack_a(false, M, C, plain + (size_t)xi * (size_t)(M * C), C, p + (size_t)xi * per);
	return p;
}

struct wino_job {
	const struct cgeom *g;
	const float *x, *bias;
	float *y, *V, *Mo;       /* V [16][C][T], Mo [16][M][T] */
	int64_t th, tw, T;       /* tile rows and columns of an image; tiles of all images */
	const struct cpu_epi *epi;
	bool avx512;
	atomic_bool nonfinite;   /* an output came out NaN or infinite */
};

/* the widest row of tiles the transforms take (tw <= WINO_MAXTW) */
#define WINO_MAXTW 512
#define WINO_ROW (2 * WINO_MAXTW + 64)

/* Row r of tile row ty of channel plane xc, padded: rowbuf[x'] is input
 * column x' - pl, 0 outside; WINO_ROW floats. */
static void wino_row(const struct cgeom *g, const float *xc, int64_t iy, float *rowbuf, int64_t width)
{
	int64_t W = g->in[1], pl = g->pb[1];
	int64_t a = pl < width ? pl : width, b = pl + W < width ? pl + W : width;
	if (iy < 0 || iy >= g->in[0] || b <= a) {
		memset(rowbuf, 0, (size_t)width * sizeof(float));
		return;
	}
	memset(rowbuf, 0, (size_t)a * sizeof(float));
	memcpy(rowbuf + a, xc + iy * W + (a - pl), (size_t)(b - a) * sizeof(float));
	memset(rowbuf + b, 0, (size_t)(width - b) * sizeof(float));
}

#if defined(__x86_64__) || defined(__i386__)
/* The row transform of 16 tiles from a column-transformed row t (tile k
 * reads t[2k .. 2k + 3]): out[j] = (a - c, b + c, c - b, b - d)[j]. */
__attribute__((target("avx512f")))
static void wino_in16(const float *t, float *out0, float *out1, float *out2, float *out3, __mmask16 m)
{
	const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	__m512 l0 = _mm512_loadu_ps(t), l1 = _mm512_loadu_ps(t + 16);
	__m512 l2 = _mm512_loadu_ps(t + 2), l3 = _mm512_loadu_ps(t + 18);
	__m512 a = _mm512_permutex2var_ps(l0, ev, l1), b = _mm512_permutex2var_ps(l0, od, l1);
	__m512 c = _mm512_permutex2var_ps(l2, ev, l3), d = _mm512_permutex2var_ps(l2, od, l3);
	_mm512_mask_storeu_ps(out0, m, _mm512_sub_ps(a, c));
	_mm512_mask_storeu_ps(out1, m, _mm512_add_ps(b, c));
	_mm512_mask_storeu_ps(out2, m, _mm512_sub_ps(c, b));
	_mm512_mask_storeu_ps(out3, m, _mm512_sub_ps(b, d));
}

/* The column transform of four padded rows, n floats (a multiple of 16). */
__attribute__((target("avx512f")))
static void wino_cols16(float (*r)[WINO_ROW], float (*t)[WINO_ROW], int64_t n)
{
	for (int64_t x = 0; x < n; x += 16) {
		__m512 r0 = _mm512_load_ps(r[0] + x), r1 = _mm512_load_ps(r[1] + x);
		__m512 r2 = _mm512_load_ps(r[2] + x), r3 = _mm512_load_ps(r[3] + x);
		_mm512_store_ps(t[0] + x, _mm512_sub_ps(r0, r2));
		_mm512_store_ps(t[1] + x, _mm512_add_ps(r1, r2));
		_mm512_store_ps(t[2] + x, _mm512_sub_ps(r2, r1));
		_mm512_store_ps(t[3] + x, _mm512_sub_ps(r1, r3));
	}
}

/* 16 tiles of one row of tiles (cnt of them valid) from the 16 products
 * mx[xi]: the output rows y0 and y1 (y1 NULL past the image), ncol of
 * their columns from the tiles' first (at most 32), plus the bias. */
__attribute__((target("avx512f")))
static void wino_out16(const float *const *mx, int64_t tx, __mmask16 m, float b, float *y0, float *y1, int64_t ncol)
{
	__m512 s0[4], s1[4];
	for (int i = 0; i < 4; i++) {
		__m512 a0 = _mm512_maskz_loadu_ps(m, mx[i * 4] + tx), a1 = _mm512_maskz_loadu_ps(m, mx[i * 4 + 1] + tx);
		__m512 a2 = _mm512_maskz_loadu_ps(m, mx[i * 4 + 2] + tx), a3 = _mm512_maskz_loadu_ps(m, mx[i * 4 + 3] + tx);
		s0[i] = _mm512_add_ps(_mm512_add_ps(a0, a1), a2);
		s1[i] = _mm512_sub_ps(_mm512_sub_ps(a1, a2), a3);
	}
	const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
	__m512 bv = _mm512_set1_ps(b);
	uint32_t cm = ncol >= 32 ? 0xffffffffu : (1u << ncol) - 1;
	for (int r = 0; r < 2; r++) {
		float *yr = r ? y1 : y0;
		if (!yr)
			break;
		__m512 c0 = r ? _mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3])
			      : _mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2]);
		__m512 c1 = r ? _mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3])
			      : _mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2]);
		c0 = _mm512_add_ps(c0, bv);
		c1 = _mm512_add_ps(c1, bv);
		_mm512_mask_storeu_ps(yr, (__mmask16)cm, _mm512_permutex2var_ps(c0, lo, c1));
		_mm512_mask_storeu_ps(yr + 16, (__mmask16)(cm >> 16), _mm512_permutex2var_ps(c0, hi, c1));
	}
}
#endif

/* V for the (image, channel) pairs [begin, end) */
static void wino_in(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct wino_job *j = ctx;
	const struct cgeom *g = j->g;
	(void)worker;
	int64_t C = g->C, tw = j->tw, width = 2 * tw + 2;
	/* four padded input rows, then their column transform; room for
	 * the 16-tile loads past the last tile (never stored) */
	float r[4][WINO_ROW] __attribute__((aligned(64))), t[4][WINO_ROW] __attribute__((aligned(64)));
	memset(r, 0, sizeof(r));
	memset(t, 0, sizeof(t));
	for (int64_t pc = begin; pc < end; pc++) {
		int64_t n = pc / C, c = pc % C;
		const float *xc = j->x + (n * C + c) * g->insz;
		for (int64_t ty = 0; ty < j->th; ty++) {
			for (int q = 0; q < 4; q++)
				wino_row(g, xc, 2 * ty - g->pb[0] + q, r[q], width);
#if defined(__x86_64__) || defined(__i386__)
			if (j->avx512)
				wino_cols16(r, t, (width + 15) / 16 * 16);
			else
#endif
			for (int64_t xp = 0; xp < width; xp++) {
				t[0][xp] = r[0][xp] - r[2][xp];
				t[1][xp] = r[1][xp] + r[2][xp];
				t[2][xp] = r[2][xp] - r[1][xp];
				t[3][xp] = r[1][xp] - r[3][xp];
			}
			int64_t t0 = (n * j->th + ty) * tw;
			for (int i = 0; i < 4; i++) {
				float *o[4];
				for (int q = 0; q < 4; q++)
					o[q] = j->V + ((int64_t)(i * 4 + q) * C + c) * j->T + t0;
				int64_t tx = 0;
#if defined(__x86_64__) || defined(__i386__)
				if (j->avx512)
					for (; tx < tw; tx += 16) {
						int64_t cnt = tw - tx < 16 ? tw - tx : 16;
						wino_in16(t[i] + 2 * tx, o[0] + tx, o[1] + tx, o[2] + tx, o[3] + tx,
							  (__mmask16)((1u << cnt) - 1));
					}
#endif
				for (; tx < tw; tx++) {
					const float *s = t[i] + 2 * tx;
					o[0][tx] = s[0] - s[2];
					o[1][tx] = s[1] + s[2];
					o[2][tx] = s[2] - s[1];
					o[3][tx] = s[1] - s[3];
				}
			}
		}
	}
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f")))
static bool plane_finite_avx512(const float *y, int64_t n)
{
	__mmask16 bad = 0;
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_loadu_ps(y + i);
		bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_setzero_ps(), _CMP_NEQ_UQ);
	}
	__m512 v = _mm512_maskz_loadu_ps((__mmask16)((1u << (n - i)) - 1), y + i);
	bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_setzero_ps(), _CMP_NEQ_UQ);
	return !bad;
}
#endif

/* Whether the n floats at y are all finite (v - v is 0 for those, NaN
 * for infinities and NaNs). */
static bool plane_finite(const float *y, int64_t n, bool avx512)
{
#if defined(__x86_64__) || defined(__i386__)
	if (avx512)
		return plane_finite_avx512(y, n);
#endif
	bool bad = false;
	(void)avx512;
	for (int64_t i = 0; i < n; i++)
		bad |= !(y[i] - y[i] == 0);
	return !bad;
}

/* Y for the (image, output channel) planes [begin, end) */
static void wino_out(void *ctx, int64_t begin, int64_t end, int worker)
{
	struct wino_job *j = ctx;
	const struct cgeom *g = j->g;
	(void)worker;
	int64_t M = g->M, Ho = g->out[0], Wo = g->out[1], tw = j->tw;
	float s[4][2][WINO_MAXTW] __attribute__((aligned(64)));
	for (int64_t pm = begin; pm < end; pm++) {
		int64_t n = pm / M, m = pm % M;
		float b = j->bias ? j->bias[m] : 0;
		float *yp = j->y + (n * M + m) * g->outsz;
		for (int64_t ty = 0; ty < j->th; ty++) {
			int64_t t0 = (n * j->th + ty) * tw;
			const float *mx[16];
			for (int xi = 0; xi < 16; xi++)
				mx[xi] = j->Mo + ((int64_t)xi * M + m) * j->T + t0;
#if defined(__x86_64__) || defined(__i386__)
			if (j->avx512) {
				float *y0 = yp + 2 * ty * Wo, *y1 = 2 * ty + 1 < Ho ? y0 + Wo : NULL;
				for (int64_t tx = 0; tx < tw; tx += 16) {
					int64_t cnt = tw - tx < 16 ? tw - tx : 16;
					wino_out16(mx, tx, (__mmask16)((1u << cnt) - 1), b, y0 + 2 * tx,
						   y1 ? y1 + 2 * tx : NULL, Wo - 2 * tx);
				}
				continue;
			}
#endif
			/* the column transform of each row i of the 4x4 */
			for (int i = 0; i < 4; i++)
				for (int64_t tx = 0; tx < tw; tx++) {
					float a0 = mx[i * 4][tx], a1 = mx[i * 4 + 1][tx], a2 = mx[i * 4 + 2][tx],
					      a3 = mx[i * 4 + 3][tx];
					s[i][0][tx] = a0 + a1 + a2;
					s[i][1][tx] = a1 - a2 - a3;
				}
			for (int r = 0; r < 2 && 2 * ty + r < Ho; r++) {
				float *yr = yp + (2 * ty + r) * Wo;
				for (int64_t tx = 0; tx < tw; tx++)
					for (int q = 0; q < 2 && 2 * tx + q < Wo; q++) {
						float v = r == 0 ? s[0][q][tx] + s[1][q][tx] + s[2][q][tx]
								 : s[1][q][tx] - s[2][q][tx] - s[3][q][tx];
						yr[2 * tx + q] = v + b;
					}
			}
		}
		/* an infinity in a tile's input reaches every output of the
		 * tile through the transforms (and inf - inf makes NaNs), where
		 * the direct product confines it to the outputs that read it:
		 * the caller then computes the conv again directly */
		if (!plane_finite(yp, g->outsz, j->avx512))
			atomic_store_explicit(&j->nonfinite, true, memory_order_relaxed);
		if (j->epi)
			cpu_epi_apply(j->epi, yp, yp - j->y, g->outsz, 1, g->outsz);
	}
}

/* The 16 products U_xi V_xi, by blocks of columns (tiles) */
struct wino_gemm_job {
	const struct wino_job *j;
	const float *u;          /* wino_pack's block */
	size_t per;              /* floats of one packed U_xi */
	int64_t cols, nb;        /* columns a block; blocks a product */
};

static void wino_gemms(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct wino_gemm_job *p = ctx;
	const struct wino_job *j = p->j;
	int64_t M = j->g->M, C = j->g->C;
	const float *plain = p->u + 16 * p->per;
	(void)worker;
	for (int64_t b = begin; b < end; b++) {
		int64_t xi = b / p->nb, c0 = b % p->nb * p->cols, n = j->T - c0 < p->cols ? j->T - c0 : p->cols;
		cpu_sgemm_pre(false, false, M, n, C, 1.0f, plain + xi * M * C, C, p->u + (size_t)xi * p->per,
			      j->V + xi * C * j->T + c0, j->T, NULL, 0.0f, NULL, j->Mo + xi * M * j->T + c0, j->T,
			      NULL);
	}
}

/* Whether conv_wino takes g: 2-D, one group, 3x3, stride and dilation 1,
 * enough channels that the transforms cost little next to the products,
 * and images of at least 8x8 outputs (a 7x7 one pads its tiles by a
 * third). */
static bool wino_fits(const struct cgeom *g)
{
	if (g->nd != 2 || g->G != 1)
		return false;
	for (int i = 0; i < 2; i++)
		if (g->ker[i] != 3 || g->str[i] != 1 || g->dil[i] != 1 || g->out[i] < 7)
			return false;
	return g->C >= 32 && g->M >= 32 && (g->out[1] + 1) / 2 <= WINO_MAXTW;
}

/* V's and the products' floats at most (each), so a batch of large
 * images goes through a few images at a time */
#define WINO_MAX_FLOATS ((int64_t)16 << 20)

/* The conv through F(2x2, 3x3), a few images at a time; false when it
 * cannot (an image too large for the buffers, no memory for them or for
 * the cached weights) or an output came out NaN or infinite: the caller
 * then computes it directly (over whatever was written). */
static bool conv_wino(struct cpu_kctx *k, const struct cgeom *g, const float *x, const float *w, const float *bias,
		      float *y, const struct cpu_epi *epi)
{
	int64_t M = g->M, C = g->C, th = (g->out[0] + 1) / 2, tw = (g->out[1] + 1) / 2;
	int64_t per_img = 16 * (C > M ? C : M) * th * tw;
	if (per_img > WINO_MAX_FLOATS)
		return false;
	int64_t nimg = WINO_MAX_FLOATS / per_img < g->N ? WINO_MAX_FLOATS / per_img : g->N;
	struct wino_warg wa = { w, M, C };
	const float *u = cpu_wcache_get(k, 1, 0x57000000u, wino_floats(M, C), wino_pack, &wa);
	float *V = pwt_space(&wino_vbuf, &wino_vcap, (size_t)(16 * C * th * tw * nimg));
	float *Mo = pwt_space(&wino_mbuf, &wino_mcap, (size_t)(16 * M * th * tw * nimg));
	if (!u || !V || !Mo)
		return false;
	for (int64_t n0 = 0; n0 < g->N; n0 += nimg) {
		struct cgeom gc = *g;
		gc.N = g->N - n0 < nimg ? g->N - n0 : nimg;
		struct cpu_epi e, *ep = NULL;
		if (epi) {
			e = *epi;
			e.z = e.z ? e.z + n0 * M * g->outsz : NULL;
			ep = &e;
		}
		struct wino_job j = { &gc, x + n0 * C * g->insz, bias, y + n0 * M * g->outsz, V, Mo, th, tw,
				      gc.N * th * tw, ep, cpu_isa() >= CPU_ISA_AVX512, false };
		cpu_parallel_for(gc.N * C, 1, wino_in, &j);
		/* the 16 products cut into blocks of whole 32-column panels,
		 * at least two a thread when there are columns for them; each
		 * block runs serially (its elements' arithmetic does not
		 * depend on the cut) */
		struct wino_gemm_job gj = { &j, u, cpu_sgemm_pack_floats(false, M, C), 0, 1 };
		int64_t panels = (j.T + 31) / 32, want = (2 * (int64_t)cpu_threads() + 15) / 16;
		gj.nb = want < panels ? want : panels;
		gj.cols = (panels + gj.nb - 1) / gj.nb * 32;
		gj.nb = (j.T + gj.cols - 1) / gj.cols;
		cpu_parallel_for(16 * gj.nb, 1, wino_gemms, &gj);
		cpu_parallel_for(gc.N * M, 1, wino_out, &j);
		if (atomic_load(&j.nonfinite))
			return false;
	}
	return true;
}

/* Float32 convolution: x [N, C, in], w [M, C/G, ker], bias [M] or NULL,
 * y [N, M, out]. wconst: w is input 1's own data (or its float32 form, kept
 * by the weight cache), so its packed and transformed forms may
 * be cached. epi (NULL: none): a fused epilogue, Z laid out as y. */
static int conv_f32(struct cpu_kctx *k, const struct cgeom *g, const float *x, const float *w, const float *bias,
		    float *y, bool wconst, const struct cpu_epi *epi)
{
	int64_t cg = g->C / g->G, kk = cg * g->kersz;
	if (g->nd == 2 && cg == 1 && g->G > 1) {
		k->impl = "ogsh cpu depthwise direct";
		return conv_dw_f32(k, g, x, w, bias, y, epi);
	}
	if (wconst && wino_fits(g)) {
		k->impl = "ogsh cpu winograd F(2x2,3x3)";
		if (conv_wino(k, g, x, w, bias, y, epi))
			return kstop(k);
	}
	bool pw = pointwise(g);
	struct conv_job j = { g, x, w, bias, y, pw, false, NULL, 0, epi, false, NULL, 0 };
	int64_t mg = g->M / g->G;
	j.tr = pw_by_positions(g, mg, kk);
	k->impl = j.tr ? (pw ? "ogsh cpu 1x1 sgemm, transposed" : "ogsh cpu im2col sgemm, transposed")
		       : pw ? "ogsh cpu 1x1 sgemm" : "ogsh cpu im2col sgemm";
	if (wconst && j.tr) {
		struct wpack_arg wa = { g, w };
		j.wtk_g = (int64_t)cpu_sgemm_pack_floats(true, mg, kk);
		j.wtk = cpu_wcache_get(k, 1, 0x54000000u ^ (uint32_t)g->G, (size_t)(j.wtk_g * g->G), conv_wtpack, &wa);
	} else if (wconst && (mg > 2 || !pw)) {
		/* the products that pack A (more than two rows, or any from
		 * im2col): once, cached */
		struct wpack_arg wa = { g, w };
		j.wpk_g = (int64_t)cpu_sgemm_pack_floats(false, mg, kk);
		j.wpk = cpu_wcache_get(k, 1, 0x43000000u ^ (uint32_t)g->G, (size_t)(j.wpk_g * g->G), conv_wpack, &wa);
	}
	int64_t pairs = g->N * g->G;
	if (pairs >= 2 * (int64_t)cpu_threads())
		cpu_parallel_for(pairs, 1, conv_groups, &j);
	else
		conv_groups(&j, 0, pairs, 0);
	if (j.nomem)
		return kenomem(k);
	return kstop(k);
}

/* The same in double (other float types, integer convs). */
static int conv_f64(struct cpu_kctx *k, const struct cgeom *g, const double *x, const double *w, const double *bias,
		    double *y)
{
	int64_t cg = g->C / g->G, mg = g->M / g->G, kk = cg * g->kersz;
	double *col = malloc((size_t)(kk * g->outsz) * sizeof(double) + 1);
	if (!col)
		return kenomem(k);
	for (int64_t n = 0; n < g->N; n++) {
		for (int64_t gi = 0; gi < g->G; gi++) {
			double *yg = y + (n * g->M + gi * mg) * g->outsz;
			for (int64_t m = 0; m < mg; m++)
				for (int64_t o = 0; o < g->outsz; o++)
					yg[m * g->outsz + o] = bias ? bias[gi * mg + m] : 0;
			im2col_f64(g, x + (n * g->C + gi * cg) * g->insz, cg, 0, g->out[g->nd - 1] ? g->outsz / g->out[g->nd - 1] : 0, col);
			dmm_acc(w + gi * mg * kk, col, yg, mg, kk, g->outsz);
			int rc = kstop(k);
			if (rc) {
				free(col);
				return rc;
			}
		}
	}
	free(col);
	return 0;
}

/* Elements of t as doubles less a zero point: zp (if any) has 1 element or
 * one per index along axis 0 (per_m: W's output channels) or 1 (X's
 * channels). Caller frees; NULL on no memory. */
static double *f64_of(const struct ir_tensor *t, const struct ir_tensor *zp, int zaxis)
{
	double *v = malloc((t->numel ? t->numel : 1) * sizeof(double));
	if (!v)
		return NULL;
	const void *p = kdata(t);
	uint64_t inner = 1;
	for (int i = zaxis + 1; i < t->rank; i++)
		inner *= (uint64_t)t->dims[i];
	for (uint64_t i = 0; i < t->numel; i++) {
		double z = 0;
		if (zp)
			z = kld(zp->dtype, kdata(zp), zp->numel == 1 ? 0 : (i / inner) % (uint64_t)t->dims[zaxis]);
		v[i] = kld(t->dtype, p, i) - z;
	}
	return v;
}

#if defined(__x86_64__) || defined(__i386__)
/* 16 at a time: vcvtph2ps widens exactly (a signaling NaN keeps its
 * payload bits but comes out quiet, which ir_f16_to_f32 does not do: such
 * blocks take the scalar path); vcvtps2ph rounds to nearest even and
 * quiets NaNs keeping the top payload bits, as ir_f32_to_f16 does */
__attribute__((target("avx512f")))
static void f16_to_f32_avx512(const uint16_t *h, float *f, int64_t n)
{
	int64_t i = 0;
	const __m256i expm = _mm256_set1_epi16(0x7c00), qbit = _mm256_set1_epi16(0x0200);
	for (; i + 16 <= n; i += 16) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(h + i));
		/* exponent all ones, quiet bit clear, mantissa not zero: a
		 * signaling NaN */
		__m256i e = _mm256_cmpeq_epi16(_mm256_and_si256(v, expm), expm);
		__m256i q = _mm256_cmpeq_epi16(_mm256_and_si256(v, qbit), _mm256_setzero_si256());
		__m256i nz = _mm256_xor_si256(_mm256_cmpeq_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x01ff)),
								  _mm256_setzero_si256()), _mm256_set1_epi16(-1));
		if (!_mm256_testz_si256(_mm256_and_si256(e, _mm256_and_si256(q, nz)), _mm256_set1_epi16(-1))) {
			for (int k = 0; k < 16; k++)
				f[i + k] = ir_f16_to_f32(h[i + k]);
			continue;
		}
		_mm512_storeu_ps(f + i, _mm512_cvtph_ps(v));
	}
	for (; i < n; i++)
		f[i] = ir_f16_to_f32(h[i]);
}

__attribute__((target("avx512f")))
static void f32_to_f16_avx512(const float *f, uint16_t *h, int64_t n)
{
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(h + i),
				    _mm512_cvtps_ph(_mm512_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		h[i] = ir_f32_to_f16(f[i]);
}
#endif

/* cpu_f16_to_f32(), cpu_f32_to_f16(): see cpu.h */

void cpu_f16_to_f32(const uint16_t *h, float *f, int64_t n)
{
#if defined(__x86_64__) || defined(__i386__)
	if (cpu_isa() >= CPU_ISA_AVX512) {
		f16_to_f32_avx512(h, f, n);
		return;
	}
#endif
	for (int64_t i = 0; i < n; i++)
		f[i] = ir_f16_to_f32(h[i]);
}

void cpu_f32_to_f16(const float *f, uint16_t *h, int64_t n)
{
#if defined(__x86_64__) || defined(__i386__)
	if (cpu_isa() >= CPU_ISA_AVX512) {
		f32_to_f16_avx512(f, h, n);
		return;
	}
#endif
	for (int64_t i = 0; i < n; i++)
		h[i] = ir_f32_to_f16(f[i]);
}

static float *f32_copy(const struct ir_tensor *t)
{
	float *v = malloc((t->numel ? t->numel : 1) * sizeof(float));
	if (!v)
		return NULL;
	if (t->dtype == IR_FLOAT16)
		cpu_f16_to_f32(kdata(t), v, (int64_t)t->numel);
	else
		for (uint64_t i = 0; i < t->numel; i++)
			v[i] = (float)kld(t->dtype, kdata(t), i);
	return v;
}

static float *f32_copy_of(const void *arg)
{
	return f32_copy(arg);
}

static int check_bias(struct cpu_kctx *k, const struct ir_tensor *b, int64_t M, int dt)
{
	if (!b)
		return 0;
	if (b->rank != 1 || b->dims[0] != M)
		return kerr(k, "bias %s must be [%lld]", kshape(b), (long long)M);
	if (dt >= 0 && b->dtype != dt)
		return kerr(k, "bias must be %s, not %s", ir_dtype_name(dt), ir_dtype_name(b->dtype));
	return 0;
}

static int out_dims(const struct cgeom *g, int64_t *dims)
{
	dims[0] = g->N;
	dims[1] = g->M;
	for (int i = 0; i < g->nd; i++)
		dims[i + 2] = g->out[i];
	return g->nd + 2;
}

static int k_conv(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *w = kin_req(k, 1), *b = kin(k, 2);
	if (!x || !w)
		return IR_ERR;
	int dt = x->dtype;
	if (!ir_dtype_is_float(dt) || w->dtype != dt)
		return kerr(k, "conv needs floating-point inputs of one type, got %s and %s", ir_dtype_name(dt),
			    ir_dtype_name(w->dtype));
	struct cgeom g;
	int rc = conv_geom(k, x, w, false, &g);
	if (!rc)
		rc = check_bias(k, b, g.M, dt);
	if (rc)
		return rc;
	int64_t dims[IR_MAX_RANK];
	struct ir_tensor *o = kout(k, 0, dt, out_dims(&g, dims), dims);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	if (!x->numel || !w->numel) {
		/* no input channels (C = 0): every output is its bias */
		uint64_t per = o->numel / (uint64_t)(g.N * g.M);
		for (uint64_t i = 0; i < o->numel; i++)
			kst(dt, kwdata(o), i, b ? kld(dt, kdata(b), (i / per) % (uint64_t)g.M) : 0.0);
		return 0;
	}
	if (dt == IR_FLOAT) {
		/* a FusedConv's residual and activation, applied as the
		 * products finish, when Z has the output's shape */
		struct cpu_epi *epi = k->epi;
		const struct ir_tensor *z = epi ? epi->zt : NULL;
		if (z && !(z->dtype == IR_FLOAT && z->rank == o->rank &&
			   !memcmp(z->dims, o->dims, sizeof(o->dims[0]) * (size_t)o->rank)))
			epi = NULL;
		rc = conv_f32(k, &g, KF32(x), KF32(w), b ? KF32(b) : NULL, kwdata(o), true, epi);
		if (!rc && epi)
			epi->done = true;
		return rc;
	}
	if (dt == IR_FLOAT16 || dt == IR_BFLOAT16) {
		/* compute in float32, round once; an initializer's weights are
		 * converted once and kept (with their packed forms) */
		const float *cw = cpu_wcache_get(k, 1, 0x46000000u, (size_t)w->numel, f32_copy_of, w);
		float *fx = f32_copy(x), *fw = cw ? NULL : f32_copy(w), *fb = b ? f32_copy(b) : NULL;
		float *fy = malloc(o->numel * sizeof(float));
		if (!fx || (!cw && !fw) || (b && !fb) || !fy)
			rc = kenomem(k);
		else
			rc = conv_f32(k, &g, fx, cw ? cw : fw, fb, fy, cw != NULL, NULL);
		if (!rc && dt == IR_FLOAT16)
			cpu_f32_to_f16(fy, kwdata(o), (int64_t)o->numel);
		else if (!rc)
			for (uint64_t i = 0; i < o->numel; i++)
				kst(dt, kwdata(o), i, fy[i]);
		free(fx);
		free(fw);
		free(fb);
		free(fy);
		return rc;
	}
	double *dx = f64_of(x, NULL, 0), *dw = f64_of(w, NULL, 0), *db = b ? f64_of(b, NULL, 0) : NULL;
	double *dy = malloc(o->numel * sizeof(double));
	if (!dx || !dw || (b && !db) || !dy)
		rc = kenomem(k);
	else
		rc = conv_f64(k, &g, dx, dw, db, dy);
	if (!rc)
		for (uint64_t i = 0; i < o->numel; i++)
			kst(dt, kwdata(o), i, dy[i]);
	free(dx);
	free(dw);
	free(db);
	free(dy);
	return rc;
}

static bool int8ish(int dt)
{
	return dt == IR_UINT8 || dt == IR_INT8;
}

/* zero point checks: scalar, or one per channel along axis of length n */
static int check_zp(struct cpu_kctx *k, const struct ir_tensor *zp, const struct ir_tensor *of, int64_t n,
		    const char *what)
{
	if (!zp)
		return 0;
	if (zp->dtype != of->dtype)
		return kerr(k, "%s must be %s, not %s", what, ir_dtype_name(of->dtype), ir_dtype_name(zp->dtype));
	if (zp->numel != 1 && !(zp->rank == 1 && zp->dims[0] == n))
		return kerr(k, "%s %s must be a scalar or have %lld elements", what, kshape(zp), (long long)n);
	return 0;
}

/* ConvInteger and QLinearConv: integer conv in double, exact for int8. */
static int conv_int(struct cpu_kctx *k, const struct ir_tensor *x, const struct ir_tensor *xzp,
		    const struct ir_tensor *w, const struct ir_tensor *wzp, struct cgeom *g, double **y)
{
	*y = NULL;
	if (!int8ish(x->dtype) || !int8ish(w->dtype))
		return kerr(k, "inputs must be int8 or uint8, got %s and %s", ir_dtype_name(x->dtype),
			    ir_dtype_name(w->dtype));
	int rc = conv_geom(k, x, w, false, g);
	if (rc)
		return rc;
	if ((rc = check_zp(k, xzp, x, 1, "x_zero_point")) || (rc = check_zp(k, wzp, w, g->M, "w_zero_point")))
		return rc;
	uint64_t n = (uint64_t)(g->N * g->M * g->outsz);
	double *dx = f64_of(x, xzp, 1), *dw = f64_of(w, wzp, 0), *dy = malloc((n ? n : 1) * sizeof(double));
	if (!dx || !dw || !dy)
		rc = kenomem(k);
	else
		rc = conv_f64(k, g, dx, dw, NULL, dy);
	free(dx);
	free(dw);
	if (rc)
		free(dy);
	else
		*y = dy;
	return rc;
}

static int k_convinteger(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *w = kin_req(k, 1);
	if (!x || !w)
		return IR_ERR;
	struct cgeom g;
	double *y;
	int rc = conv_int(k, x, kin(k, 2), w, kin(k, 3), &g, &y);
	if (rc)
		return rc;
	int64_t dims[IR_MAX_RANK];
	struct ir_tensor *o = kout(k, 0, IR_INT32, out_dims(&g, dims), dims);
	if (o)
		for (uint64_t i = 0; i < o->numel; i++)
			((int32_t *)kwdata(o))[i] = (int32_t)(int64_t)y[i];
	free(y);
	return o ? 0 : IR_ERR;
}

static int k_qlinearconv(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *xs = kin_req(k, 1), *xzp = kin(k, 2);
	const struct ir_tensor *w = kin_req(k, 3), *ws = kin_req(k, 4), *wzp = kin(k, 5);
	const struct ir_tensor *ys = kin_req(k, 6), *yzp = kin(k, 7), *b = kin(k, 8);
	if (!x || !xs || !w || !ws || !ys)
		return IR_ERR;
	if (xs->numel != 1 || ys->numel != 1 || (yzp && yzp->numel != 1))
		return kerr(k, "x_scale, y_scale and y_zero_point must have one element");
	int odt = yzp ? yzp->dtype : x->dtype;
	if (!int8ish(odt))
		return kerr(k, "y_zero_point must be int8 or uint8");
	if (b && b->dtype != IR_INT32)
		return kerr(k, "bias must be int32");
	struct cgeom g;
	double *y;
	int rc = conv_int(k, x, xzp, w, wzp, &g, &y);
	if (rc)
		return rc;
	if ((rc = check_bias(k, b, g.M, IR_INT32)) || (rc = check_zp(k, ws, ws, g.M, "w_scale"))) {
		free(y);
		return rc;
	}
	int64_t dims[IR_MAX_RANK];
	struct ir_tensor *o = kout(k, 0, odt, out_dims(&g, dims), dims);
	if (!o) {
		free(y);
		return IR_ERR;
	}
	double sx = kld(xs->dtype, kdata(xs), 0), sy = kld(ys->dtype, kdata(ys), 0);
	double zy = yzp ? kld(yzp->dtype, kdata(yzp), 0) : 0;
	double lo = odt == IR_UINT8 ? 0 : -128, hi = odt == IR_UINT8 ? 255 : 127;
	for (uint64_t i = 0; i < o->numel; i++) {
		uint64_t m = (i / (uint64_t)g.outsz) % (uint64_t)g.M;
		double sw = kld(ws->dtype, kdata(ws), ws->numel == 1 ? 0 : m);
		double acc = y[i] + (b ? KI32(b)[m] : 0);
		double v = nearbyint(acc * (sx * sw / sy) + zy);
		v = !(v >= lo) ? lo : v > hi ? hi : v;   /* NaN (a zero scale) goes to lo */
		ksti(odt, kwdata(o), i, (int64_t)v);
	}
	free(y);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* ConvTranspose: y = col2im(W^T x); float types through cpu_sgemm          */
/* ------------------------------------------------------------------------ */

/*
 * col2im for one group: col is [mg * kersz, insz]; input position i and
 * tap q of channel m add col[(m, q), i] into y[m, i*s - pb + q*d] when
 * that is inside the output.
 */
#define COL2IM(NAME, T)                                                                          \
static void NAME(const struct cgeom *g, const T *col, int64_t mg, T *y)                          \
{                                                                                                \
	int nd = g->nd;                                                                          \
	for (int64_t r = 0; r < mg * g->kersz; r++) {                                            \
		int64_t m = r / g->kersz, q = r % g->kersz, kq[IR_MAX_RANK], ii[IR_MAX_RANK];     \
		for (int d = nd - 1; d >= 0; d--) {                                              \
			kq[d] = q % g->ker[d];                                                   \
			q /= g->ker[d];                                                          \
			ii[d] = 0;                                                               \
		}                                                                                \
		const T *cr = col + r * g->insz;                                                 \
		T *ym = y + m * g->outsz;                                                        \
		for (int64_t i = 0; i < g->insz; i++) {                                          \
			int64_t off = 0;                                                         \
			bool inside = true;                                                      \
			for (int d = 0; d < nd; d++) {                                           \
				int64_t p = ii[d] * g->str[d] - g->pb[d] + kq[d] * g->dil[d];    \
				if (p < 0 || p >= g->out[d])                                     \
					inside = false;                                          \
				off = off * g->out[d] + p;                                       \
			}                                                                        \
			if (inside)                                                              \
				ym[off] += cr[i];                                                \
			for (int d = nd - 1; d >= 0; d--) {                                      \
				if (++ii[d] < g->in[d])                                          \
					break;                                                   \
				ii[d] = 0;                                                       \
			}                                                                        \
		}                                                                                \
	}                                                                                        \
}

COL2IM(col2im_f32, float)
COL2IM(col2im_f64, double)

static int k_convtranspose(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *w = kin_req(k, 1), *b = kin(k, 2);
	if (!x || !w)
		return IR_ERR;
	int dt = x->dtype;
	if (!ir_dtype_is_float(dt) || w->dtype != dt)
		return kerr(k, "convtranspose needs floating-point inputs of one type");
	struct cgeom g;
	int rc = conv_geom(k, x, w, true, &g);
	if (!rc)
		rc = check_bias(k, b, g.M, dt);
	if (rc)
		return rc;
	int64_t dims[IR_MAX_RANK];
	struct ir_tensor *o = kout(k, 0, dt, out_dims(&g, dims), dims);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	int64_t cg = g.C / g.G, mg = g.M / g.G, rows = mg * g.kersz, t;
	if (!kmul62(rows, g.insz, &t))
		return kerr(k, "convolution sizes overflow");
	bool f32 = dt == IR_FLOAT || dt == IR_FLOAT16 || dt == IR_BFLOAT16;
	size_t es = f32 ? sizeof(float) : sizeof(double);
	void *vx = NULL, *vw = NULL, *vy = malloc(o->numel * es), *col = malloc((size_t)t * es + 1), *wt = NULL;
	if (f32) {
		vx = f32_copy(x);
		vw = f32_copy(w);
	} else {
		vx = f64_of(x, NULL, 0);
		vw = f64_of(w, NULL, 0);
		/* W^T of a group for the double product: wt[r, c] = w[c, r] */
		wt = malloc((size_t)(rows * cg) * sizeof(double) + 1);
	}
	if (!vx || !vw || !vy || !col || (!f32 && !wt)) {
		rc = kenomem(k);
		goto out;
	}
	for (int64_t n = 0; n < g.N && !rc; n++) {
		for (int64_t gi = 0; gi < g.G && !rc; gi++) {
			int64_t xo = (n * g.C + gi * cg) * g.insz, wo = gi * cg * rows, yo = (n * g.M + gi * mg) * g.outsz;
			for (int64_t m = 0; m < mg; m++) {
				double bv = b ? kld(dt, kdata(b), (uint64_t)(gi * mg + m)) : 0;
				for (int64_t p = 0; p < g.outsz; p++) {
					if (f32)
						((float *)vy)[yo + m * g.outsz + p] = (float)bv;
					else
						((double *)vy)[yo + m * g.outsz + p] = bv;
				}
			}
			if (f32) {
				cpu_sgemm(true, false, rows, g.insz, cg, 1.0f, (const float *)vw + wo, rows,
					  (const float *)vx + xo, g.insz, 0.0f, col, g.insz);
				col2im_f32(&g, col, mg, (float *)vy + yo);
			} else {
				const double *wg = (const double *)vw + wo;
				double *wtd = wt;
				for (int64_t c = 0; c < cg; c++)
					for (int64_t r = 0; r < rows; r++)
						wtd[r * cg + c] = wg[c * rows + r];
				memset(col, 0, (size_t)t * sizeof(double));
				dmm_acc(wtd, (const double *)vx + xo, col, rows, cg, g.insz);
				col2im_f64(&g, col, mg, (double *)vy + yo);
			}
			rc = kstop(k);
		}
	}
	if (!rc) {
		if (dt == IR_FLOAT)
			memcpy(kwdata(o), vy, o->numel * sizeof(float));
		else
			for (uint64_t i = 0; i < o->numel; i++)
				kst(dt, kwdata(o), i, f32 ? ((float *)vy)[i] : ((double *)vy)[i]);
	}
out:
	free(vx);
	free(vw);
	free(vy);
	free(col);
	free(wt);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* DeformConv (2-D): im2col at offset positions, bilinear, times a mask      */
/* ------------------------------------------------------------------------ */

/* x (h x w) at real position (py, px), bilinear; 0 outside the image. */
static double bilinear(const double *x, int64_t h, int64_t w, double py, double px)
{
	if (!(py > -1 && py < (double)h && px > -1 && px < (double)w))
		return 0;
	double fy = floor(py), fx = floor(px);
	int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
	double ly = py - fy, lx = px - fx;
	double v = 0;
	for (int dy = 0; dy < 2; dy++)
		for (int dx = 0; dx < 2; dx++) {
			int64_t yy = y0 + dy, xx = x0 + dx;
			if (yy < 0 || yy >= h || xx < 0 || xx >= w)
				continue;
			v += (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx) * x[yy * w + xx];
		}
	return v;
}

static int k_deformconv(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *w = kin_req(k, 1), *off = kin_req(k, 2);
	const struct ir_tensor *b = kin(k, 3), *mask = kin(k, 4);
	if (!x || !w || !off)
		return IR_ERR;
	int dt = x->dtype;
	if (!ir_dtype_is_float(dt) || w->dtype != dt || off->dtype != dt || (mask && mask->dtype != dt))
		return kerr(k, "deformconv needs floating-point inputs of one type");
	if (x->rank != 4)
		return kerr(k, "only 2-d deformconv is supported, input is %s", kshape(x));
	struct cgeom g;
	int rc = conv_geom(k, x, w, false, &g);
	if (!rc)
		rc = check_bias(k, b, g.M, dt);
	if (rc)
		return rc;
	int64_t og = kattr_i(k, "offset_group", 1);
	if (og < 1 || g.C % og)
		return kerr(k, "offset_group %lld does not divide %lld channels", (long long)og, (long long)g.C);
	int64_t kh = g.ker[0], kw = g.ker[1], oh = g.out[0], ow = g.out[1], ih = g.in[0], iw = g.in[1];
	if (off->rank != 4 || off->dims[0] != g.N || off->dims[1] != og * g.kersz * 2 || off->dims[2] != oh ||
	    off->dims[3] != ow)
		return kerr(k, "offset %s must be [%lld,%lld,%lld,%lld]", kshape(off), (long long)g.N,
			    (long long)(og * g.kersz * 2), (long long)oh, (long long)ow);
	if (mask && (mask->rank != 4 || mask->dims[0] != g.N || mask->dims[1] != og * g.kersz ||
		     mask->dims[2] != oh || mask->dims[3] != ow))
		return kerr(k, "mask %s must be [%lld,%lld,%lld,%lld]", kshape(mask), (long long)g.N,
			    (long long)(og * g.kersz), (long long)oh, (long long)ow);
	int64_t dims[IR_MAX_RANK];
	struct ir_tensor *o = kout(k, 0, dt, out_dims(&g, dims), dims);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	int64_t cg = g.C / g.G, mg = g.M / g.G, kk = cg * g.kersz, cog = g.C / og;
	double *dx = f64_of(x, NULL, 0), *dw = f64_of(w, NULL, 0), *dy = malloc(o->numel * sizeof(double));
	double *col = malloc((size_t)(kk * g.outsz) * sizeof(double) + 1);
	if (!dx || !dw || !dy || !col) {
		rc = kenomem(k);
		goto out;
	}
	const void *po = kdata(off), *pm = mask ? kdata(mask) : NULL;
	for (int64_t n = 0; n < g.N && !rc; n++) {
		for (int64_t gi = 0; gi < g.G; gi++) {
			for (int64_t c = 0; c < cg; c++) {
				int64_t ch = gi * cg + c, ogi = ch / cog;
				const double *xc = dx + (n * g.C + ch) * g.insz;
				for (int64_t q = 0; q < g.kersz; q++) {
					int64_t ki = q / kw, kj = q % kw;
					double *dst = col + (c * g.kersz + q) * g.outsz;
					uint64_t ob = (uint64_t)(((n * og + ogi) * g.kersz + q) * 2) * (uint64_t)g.outsz;
					uint64_t mb = (uint64_t)((n * og + ogi) * g.kersz + q) * (uint64_t)g.outsz;
					for (int64_t i = 0; i < oh; i++)
						for (int64_t j = 0; j < ow; j++) {
							uint64_t p = (uint64_t)(i * ow + j);
							double py = (double)(i * g.str[0] - g.pb[0] + ki * g.dil[0]) +
								    kld(dt, po, ob + p);
							double px = (double)(j * g.str[1] - g.pb[1] + kj * g.dil[1]) +
								    kld(dt, po, ob + (uint64_t)g.outsz + p);
							double v = bilinear(xc, ih, iw, py, px);
							if (pm)
								v *= kld(dt, pm, mb + p);
							dst[p] = v;
						}
				}
			}
			double *yg = dy + (n * g.M + gi * mg) * g.outsz;
			for (int64_t m = 0; m < mg; m++)
				for (int64_t p = 0; p < g.outsz; p++)
					yg[m * g.outsz + p] = b ? kld(dt, kdata(b), (uint64_t)(gi * mg + m)) : 0;
			dmm_acc(dw + gi * mg * kk, col, yg, mg, kk, g.outsz);
		}
		rc = kstop(k);
	}
	(void)kh;
	if (!rc)
		for (uint64_t i = 0; i < o->numel; i++)
			kst(dt, kwdata(o), i, dy[i]);
out:
	free(dx);
	free(dw);
	free(dy);
	free(col);
	return rc;
}

const struct cpu_kernel cpu_kernels_conv[] = {
	{ IR_OP_Conv, k_conv, NULL },
	{ IR_OP_ConvTranspose, k_convtranspose, NULL },
	{ IR_OP_ConvInteger, k_convinteger, NULL },
	{ IR_OP_QLinearConv, k_qlinearconv, NULL },
	{ IR_OP_DeformConv, k_deformconv, NULL },
	{ -1, NULL, NULL },
};
