/*
 * k_signal.c - CPU kernels: signal ops (DFT, STFT, the window functions,
 * MelWeightMatrix).
 *
 * Complex values are pairs in the last dimension ([..., 2]); a last
 * dimension of 1 is a real signal. Transforms compute in double: a radix-2
 * FFT for power-of-two lengths, the direct sum with a twiddle table for
 * other lengths.
 */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

#define PI 3.14159265358979323846

/* The largest transform length accepted (the twiddle table and one line
 * must fit in memory comfortably). */
#define MAX_DFT ((int64_t)1 << 28)

/* A 1-D transform of length n: the twiddle table and scratch space. */
struct dft_plan {
	int64_t n;
	bool pow2;
	double *cs, *sn;     /* cos/sin(2 pi j / n), j < n */
	double *re, *im;     /* the line being transformed (n each) */
	double *tre, *tim;   /* scratch for the direct sum */
};

static void plan_free(struct dft_plan *p)
{
	free(p->cs);
	free(p->sn);
	free(p->re);
	free(p->im);
	free(p->tre);
	free(p->tim);
	memset(p, 0, sizeof(*p));
}

static int plan_init(struct cpu_kctx *k, struct dft_plan *p, int64_t n)
{
	memset(p, 0, sizeof(*p));
	if (n <= 0 || n > MAX_DFT)
		return kerr(k, "dft length %lld is out of range (1 to %lld)", (long long)n, (long long)MAX_DFT);
	p->n = n;
	p->pow2 = (n & (n - 1)) == 0;
	size_t sz = sizeof(double) * (size_t)n;
	p->cs = malloc(sz);
	p->sn = malloc(sz);
	p->re = malloc(sz);
	p->im = malloc(sz);
	p->tre = malloc(sz);
	p->tim = malloc(sz);
	if (!p->cs || !p->sn || !p->re || !p->im || !p->tre || !p->tim) {
		plan_free(p);
		return kenomem(k);
	}
	for (int64_t j = 0; j < n; j++) {
		double a = 2 * PI * (double)j / (double)n;
		p->cs[j] = cos(a);
		p->sn[j] = sin(a);
	}
	return 0;
}

/* Transforms p->re/p->im in place: X[k] = sum_j x[j] e^(-+2 pi i jk/n)
 * (minus forward, plus inverse; no scaling). 0 or IR_EINTR. */
static int plan_run(struct cpu_kctx *k, struct dft_plan *p, bool inverse)
{
	int64_t n = p->n;
	double sg = inverse ? 1 : -1;
	if (p->pow2) {
		/* iterative radix-2: bit-reversal permutation, then butterflies */
		for (int64_t i = 1, j = 0; i < n; i++) {
			int64_t bit = n >> 1;
			for (; j & bit; bit >>= 1)
				j ^= bit;
			j ^= bit;
			if (i < j) {
				double t = p->re[i];
				p->re[i] = p->re[j];
				p->re[j] = t;
				t = p->im[i];
				p->im[i] = p->im[j];
				p->im[j] = t;
			}
		}
		for (int64_t len = 2; len <= n; len <<= 1) {
			int64_t step = n / len;
			for (int64_t i = 0; i < n; i += len) {
				for (int64_t j = 0; j < len / 2; j++) {
					double wr = p->cs[j * step], wi = sg * p->sn[j * step];
					int64_t a = i + j, b = i + j + len / 2;
					double xr = p->re[b] * wr - p->im[b] * wi;
					double xi = p->re[b] * wi + p->im[b] * wr;
					p->re[b] = p->re[a] - xr;
					p->im[b] = p->im[a] - xi;
					p->re[a] += xr;
					p->im[a] += xi;
				}
			}
		}
		return 0;
	}
	for (int64_t f = 0; f < n; f++) {
		if ((f & 1023) == 1023 && kstop(k))
			return IR_EINTR;
		double sr = 0, si = 0;
		int64_t idx = 0;   /* (f * j) mod n */
		for (int64_t j = 0; j < n; j++) {
			double wr = p->cs[idx], wi = sg * p->sn[idx];
			sr += p->re[j] * wr - p->im[j] * wi;
			si += p->re[j] * wi + p->im[j] * wr;
			idx += f;
			if (idx >= n)
				idx -= n;
		}
		p->tre[f] = sr;
		p->tim[f] = si;
	}
	memcpy(p->re, p->tre, sizeof(double) * (size_t)n);
	memcpy(p->im, p->tim, sizeof(double) * (size_t)n);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* DFT                                                                       */
/* ------------------------------------------------------------------------ */

static int k_dft(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!ir_dtype_is_float(x->dtype))
		return kerr(k, "the input must be a float tensor, not %s", ir_dtype_name(x->dtype));
	int r = x->rank;
	if (r < 2 || (x->dims[r - 1] != 1 && x->dims[r - 1] != 2))
		return kerr(k, "the input %s must be [..., signal, 1 or 2]", kshape(x));
	bool inverse = kattr_i(k, "inverse", 0) != 0, onesided = kattr_i(k, "onesided", 0) != 0;
	int64_t ax;
	if (k->opset >= 20) {
		ax = -2;
		const struct ir_tensor *at = kin(k, 2);
		if (at && at->numel) {
			if (!ir_dtype_is_int(at->dtype) || at->numel != 1)
				return kerr(k, "axis must be an integer scalar");
			ax = kldi(at->dtype, kdata(at), 0);
		}
	} else {
		ax = kattr_i(k, "axis", 1);
	}
	/* the axis counts dims of x; the last one (real/imaginary) is not allowed */
	if (ax < -r || ax >= r - 1 || ax == -1)
		return kerr(k, "axis %lld is out of range for an input of rank %d", (long long)ax, r);
	int a = (int)(ax < 0 ? ax + r : ax);
	int64_t lin = x->dims[a];
	int64_t n;
	const struct ir_tensor *lt = kin(k, 1);
	if (lt && lt->numel) {
		if (!ir_dtype_is_int(lt->dtype) || lt->numel != 1)
			return kerr(k, "dft_length must be an integer scalar");
		n = kldi(lt->dtype, kdata(lt), 0);
	} else {
		n = inverse && onesided ? 2 * (lin - 1) : lin;
	}
	if (n <= 0 || n > MAX_DFT)
		return kerr(k, "dft length %lld is out of range (1 to %lld)", (long long)n, (long long)MAX_DFT);
	bool irfft = inverse && onesided;
	/* output along the axis; last dim 2, or 1 for the inverse of a one-sided spectrum */
	int64_t lout = irfft ? n : onesided ? n / 2 + 1 : n;
	int64_t used = irfft ? n / 2 + 1 : n;   /* input points read along the axis */
	int64_t od[IR_MAX_RANK];
	for (int d = 0; d < r; d++)
		od[d] = x->dims[d];
	od[a] = lout;
	od[r - 1] = irfft ? 1 : 2;
	uint64_t tot = 1;
	for (int d = 0; d < r; d++)
		if (!kmul_ok(tot, (uint64_t)od[d], &tot))
			return kerr(k, "the output would be too large");
	struct ir_tensor *ot = kout(k, 0, x->dtype, r, od);
	if (!ot)
		return IR_ERR;
	if (ot->numel == 0)
		return 0;
	int64_t outer = 1, inner = 1, cin = x->dims[r - 1], cout = od[r - 1];
	for (int d = 0; d < a; d++)
		outer *= x->dims[d];
	for (int d = a + 1; d < r - 1; d++)
		inner *= x->dims[d];
	struct dft_plan p;
	if (plan_init(k, &p, n))
		return IR_ERR;
	const void *xp = kdata(x);
	void *yp = kwdata(ot);
	int rc = 0;
	for (int64_t o = 0; o < outer && !rc; o++) {
		if ((rc = kstop(k)))
			break;
		for (int64_t s = 0; s < inner && !rc; s++) {
			/* gather one line, zero-padded or truncated to the points used */
			for (int64_t j = 0; j < n; j++) {
				p.re[j] = 0;
				p.im[j] = 0;
			}
			for (int64_t j = 0; j < used && j < lin; j++) {
				uint64_t e = (uint64_t)(((o * lin + j) * inner + s) * cin);
				p.re[j] = kld(x->dtype, xp, e);
				p.im[j] = cin == 2 ? kld(x->dtype, xp, e + 1) : 0;
			}
			if (irfft) {
				/* the full spectrum of a real signal is Hermitian */
				for (int64_t j = n / 2 + 1; j < n; j++) {
					p.re[j] = p.re[n - j];
					p.im[j] = -p.im[n - j];
				}
			}
			if ((rc = plan_run(k, &p, inverse)))
				break;
			double scale = inverse ? 1.0 / (double)n : 1.0;
			for (int64_t j = 0; j < lout; j++) {
				uint64_t e = (uint64_t)(((o * lout + j) * inner + s) * cout);
				kst(x->dtype, yp, e, p.re[j] * scale);
				if (cout == 2)
					kst(x->dtype, yp, e + 1, p.im[j] * scale);
			}
		}
	}
	plan_free(&p);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* STFT                                                                      */
/* ------------------------------------------------------------------------ */

static int read_scalar_int(struct cpu_kctx *k, const struct ir_tensor *t, const char *what, int64_t *v)
{
	if (!ir_dtype_is_int(t->dtype) || t->numel != 1)
		return kerr(k, "%s must be an integer scalar", what);
	*v = kldi(t->dtype, kdata(t), 0);
	return 0;
}

static int k_stft(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *st = kin_req(k, 1);
	if (!x || !st)
		return IR_ERR;
	const struct ir_tensor *win = kin(k, 2), *flt = kin(k, 3);
	if (!ir_dtype_is_float(x->dtype))
		return kerr(k, "the signal must be a float tensor, not %s", ir_dtype_name(x->dtype));
	if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
		return kerr(k, "the signal %s must be [batch, length, 1 or 2]", kshape(x));
	int64_t step = 0, flen = 0;
	if (read_scalar_int(k, st, "frame_step", &step))
		return IR_ERR;
	if (step <= 0)
		return kerr(k, "frame_step %lld must be positive", (long long)step);
	if (win && win->rank != 1)
		return kerr(k, "the window %s must be 1-D", kshape(win));
	if (win && !ir_dtype_is_float(win->dtype))
		return kerr(k, "the window must be a float tensor, not %s", ir_dtype_name(win->dtype));
	if (flt) {
		if (read_scalar_int(k, flt, "frame_length", &flen))
			return IR_ERR;
		if (win && win->dims[0] != flen)
			return kerr(k, "frame_length %lld differs from the window length %lld", (long long)flen,
				    (long long)win->dims[0]);
	} else {
		flen = win ? win->dims[0] : x->dims[1];
	}
	int64_t L = x->dims[1], B = x->dims[0], cin = x->dims[2];
	if (flen <= 0 || flen > L)
		return kerr(k, "frame_length %lld must be in [1, %lld]", (long long)flen, (long long)L);
	if (flen > MAX_DFT)
		return kerr(k, "frame_length %lld is too large", (long long)flen);
	bool onesided = kattr_i(k, "onesided", 1) != 0;
	int64_t frames = 1 + (L - flen) / step;
	int64_t bins = onesided ? flen / 2 + 1 : flen;
	int64_t od[4] = { B, frames, bins, 2 };
	uint64_t tot;
	if (!kmul_ok((uint64_t)B * (uint64_t)frames, (uint64_t)bins * 2, &tot))
		return kerr(k, "the output would be too large");
	struct ir_tensor *ot = kout(k, 0, x->dtype, 4, od);
	if (!ot)
		return IR_ERR;
	if (ot->numel == 0)
		return 0;
	struct dft_plan p;
	if (plan_init(k, &p, flen))
		return IR_ERR;
	const void *xp = kdata(x), *wp = kdata(win);
	void *yp = kwdata(ot);
	int rc = 0;
	for (int64_t b = 0; b < B && !rc; b++) {
		for (int64_t f = 0; f < frames && !rc; f++) {
			if ((rc = kstop(k)))
				break;
			for (int64_t j = 0; j < flen; j++) {
				uint64_t e = (uint64_t)((b * L + f * step + j) * cin);
				double w = win ? kld(win->dtype, wp, (uint64_t)j) : 1;
				p.re[j] = kld(x->dtype, xp, e) * w;
				p.im[j] = cin == 2 ? kld(x->dtype, xp, e + 1) * w : 0;
			}
			if ((rc = plan_run(k, &p, false)))
				break;
			for (int64_t j = 0; j < bins; j++) {
				uint64_t e = (uint64_t)(((b * frames + f) * bins + j) * 2);
				kst(x->dtype, yp, e, p.re[j]);
				kst(x->dtype, yp, e + 1, p.im[j]);
			}
		}
	}
	plan_free(&p);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Windows, MelWeightMatrix                                                  */
/* ------------------------------------------------------------------------ */

enum { W_HANN, W_HAMMING, W_BLACKMAN };

static int window_run(struct cpu_kctx *k, int kind)
{
	const struct ir_tensor *st = kin_req(k, 0);
	if (!st)
		return IR_ERR;
	int64_t n = 0;
	if (read_scalar_int(k, st, "size", &n))
		return IR_ERR;
	if (n < 0 || n > ((int64_t)1 << 34))
		return kerr(k, "window size %lld is out of range", (long long)n);
	int64_t dt = kattr_i(k, "output_datatype", IR_FLOAT);
	if (!ir_dtype_valid((int)dt) || dt == IR_STRING || dt == IR_COMPLEX64 || dt == IR_COMPLEX128)
		return kerr(k, "output_datatype %lld is not a numeric type", (long long)dt);
	bool periodic = kattr_i(k, "periodic", 1) != 0;
	struct ir_tensor *ot = kout(k, 0, (int)dt, 1, &n);
	if (!ot)
		return IR_ERR;
	void *yp = kwdata(ot);
	/* N - 1 for symmetric windows, N for periodic ones */
	double den = (double)(periodic ? n : n - 1);
	for (int64_t i = 0; i < n; i++) {
		double t = (double)i / den, v;
		if (den == 0) {
			/* a symmetric window of one point is [1] (as numpy, scipy, torch) */
			kst((int)dt, yp, (uint64_t)i, 1.0);
			continue;
		}
		switch (kind) {
		case W_HANN: {
			double s = sin(PI * t);
			v = s * s;
			break;
		}
		case W_HAMMING:
			v = 25.0 / 46.0 - (21.0 / 46.0) * cos(2 * PI * t);
			break;
		default:
			v = 0.42 - 0.5 * cos(2 * PI * t) + 0.08 * cos(4 * PI * t);
			break;
		}
		kst((int)dt, yp, (uint64_t)i, v);
	}
	return 0;
}

static int k_hann(struct cpu_kctx *k) { return window_run(k, W_HANN); }
static int k_hamming(struct cpu_kctx *k) { return window_run(k, W_HAMMING); }
static int k_blackman(struct cpu_kctx *k) { return window_run(k, W_BLACKMAN); }

/* a // b for doubles as Python and numpy compute it (floor of the exact quotient) */
static double floordiv(double a, double b)
{
	double mod = fmod(a, b);
	double div = (a - mod) / b;
	if (mod != 0 && ((b < 0) != (mod < 0)))
		div -= 1;
	if (div == 0)
		return copysign(0.0, a / b);
	double fl = floor(div);
	if (div - fl > 0.5)
		fl += 1;
	return fl;
}

static int k_melweight(struct cpu_kctx *k)
{
	const struct ir_tensor *t[5];
	for (int i = 0; i < 5; i++)
		if (!(t[i] = kin_req(k, i)))
			return IR_ERR;
	int64_t nmel = 0, dftlen = 0, sr = 0;
	if (read_scalar_int(k, t[0], "num_mel_bins", &nmel) || read_scalar_int(k, t[1], "dft_length", &dftlen) ||
	    read_scalar_int(k, t[2], "sample_rate", &sr))
		return IR_ERR;
	for (int i = 3; i < 5; i++)
		if (!ir_dtype_is_float(t[i]->dtype) || t[i]->numel != 1)
			return kerr(k, "%s must be a float scalar", i == 3 ? "lower_edge_hertz" : "upper_edge_hertz");
	if (nmel <= 0 || nmel > (1 << 24))
		return kerr(k, "num_mel_bins %lld is out of range", (long long)nmel);
	if (dftlen <= 0 || dftlen > ((int64_t)1 << 30))
		return kerr(k, "dft_length %lld is out of range", (long long)dftlen);
	if (sr <= 0)
		return kerr(k, "sample_rate %lld must be positive", (long long)sr);
	int64_t dt = kattr_i(k, "output_datatype", IR_FLOAT);
	if (!ir_dtype_valid((int)dt) || dt == IR_STRING || dt == IR_COMPLEX64 || dt == IR_COMPLEX128)
		return kerr(k, "output_datatype %lld is not a numeric type", (long long)dt);
	int64_t nspec = dftlen / 2 + 1;
	uint64_t tot;
	if (!kmul_ok((uint64_t)nspec, (uint64_t)nmel, &tot) || tot > ((uint64_t)1 << 34))
		return kerr(k, "the matrix would be too large");
	float lo = (float)kld(t[3]->dtype, kdata(t[3]), 0), hi = (float)kld(t[4]->dtype, kdata(t[4]), 0);
	if (!isfinite(lo) || !isfinite(hi) || lo < 0 || hi < lo)
		return kerr(k, "the edges %g and %g hertz are not a valid range", lo, hi);
	/* mel edges in float32, the bin positions in double, as the reference */
	float lmel = 2595.0f * log10f(1.0f + lo / 700.0f), hmel = 2595.0f * log10f(1.0f + hi / 700.0f);
	float step = (hmel - lmel) / (float)(nmel + 2);
	int64_t *bins = malloc(sizeof(*bins) * (size_t)(nmel + 2));
	double *m = calloc((size_t)tot ? (size_t)tot : 1, sizeof(double));
	if (!bins || !m) {
		free(bins);
		free(m);
		return kenomem(k);
	}
	for (int64_t i = 0; i < nmel + 2; i++) {
		double f = (double)i * (double)step + (double)lmel;
		f = 700.0 * (pow(10.0, f / 2595.0) - 1.0);
		double b = floordiv((double)(dftlen + 1) * f, (double)sr);
		bins[i] = b < -1 ? -1 : b > (double)nspec ? nspec : (int64_t)b;
	}
	/* triangles rising from bins[i] to bins[i+1], falling to bins[i+2] */
	for (int64_t i = 0; i < nmel; i++) {
		int64_t l = bins[i], c = bins[i + 1], h = bins[i + 2];
		if (c - l == 0) {
			if (c >= 0 && c < nspec)
				m[c * nmel + i] = 1;
		} else {
			for (int64_t j = l; j <= c; j++)
				if (j >= 0 && j < nspec)
					m[j * nmel + i] = (double)(j - l) / (double)(c - l);
		}
		if (h - c > 0)
			for (int64_t j = c; j < h; j++)
				if (j >= 0 && j < nspec)
					m[j * nmel + i] = (double)(h - j) / (double)(h - c);
	}
	int64_t od[2] = { nspec, nmel };
	struct ir_tensor *ot = kout(k, 0, (int)dt, 2, od);
	if (!ot) {
		free(bins);
		free(m);
		return IR_ERR;
	}
	void *yp = kwdata(ot);
	for (uint64_t i = 0; i < tot; i++)
		kst((int)dt, yp, i, m[i]);
	free(bins);
	free(m);
	return 0;
}

const struct cpu_kernel cpu_kernels_signal[] = {
	{ IR_OP_DFT, k_dft, NULL },
	{ IR_OP_STFT, k_stft, NULL },
	{ IR_OP_HannWindow, k_hann, NULL },
	{ IR_OP_HammingWindow, k_hamming, NULL },
	{ IR_OP_BlackmanWindow, k_blackman, NULL },
	{ IR_OP_MelWeightMatrix, k_melweight, NULL },
	{ -1, NULL, NULL },
};
