/*
 * test_calib.c - unit tests of the calibration statistics (ir/calib.c):
 * streaming and re-binning, every method on known distributions (and the
 * fast entropy and mse searches against a direct computation from their
 * definitions), NaN/Inf, per-channel sums, the cache file (round trip, and
 * every kind of malformed file refused with a message), and the model
 * content hash. Prints how long re-deriving 300 tensors' thresholds takes.
 */
#include "ir/ir.h"
#include "calib_equal.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); checks++; if (!(fabs(a_ - b_) <= (tol))) { failures++; \
	fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g (+- %g)\n", __FILE__, __LINE__, #a, a_, b_, (double)(tol)); } } while (0)

#define B IR_CALIB_BINS

/* ------------------------------------------------------------------------ */
/* Data                                                                      */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static double uniform(void)   /* [0, 1) */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0;
}

static double gauss(void)
{
	double u = uniform(), v = uniform();
	return sqrt(-2.0 * log(1.0 - u)) * cos(2 * M_PI * v);
}

static void fill_gauss(float *x, size_t n, double sigma)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(sigma * gauss());
}

static uint64_t hist_total(const struct ir_calib_tensor *t)
{
	uint64_t s = 0;
	for (int i = 0; i < B; i++)
		s += t->hist[i];
	return s;
}

static const struct ir_calib_how HOW_MAX = { IR_CALIB_MAX, 0 };
static const struct ir_calib_how HOW_ENTROPY = { IR_CALIB_ENTROPY, 0 };
static const struct ir_calib_how HOW_MSE = { IR_CALIB_MSE, 0 };

static struct ir_calib_how pct(double p)
{
	struct ir_calib_how h = { IR_CALIB_PERCENTILE, p };
	return h;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------------ */
/* Reference computations straight from the definitions                      */
/* ------------------------------------------------------------------------ */

/* KL(P||Q) of TensorRT's entropy calibration for candidate i (INFINITY when Q misses P's mass) */
static double ref_kl(const uint64_t *h, int i)
{
	static double P[B], Q[B];
	double outl = 0;
	for (int j = 0; j < B; j++)
		if (j >= i)
			outl += (double)h[j];
	for (int j = 0; j < i; j++)
		P[j] = (double)h[j];
	P[i - 1] += outl;
	int m = i / 128;
	for (int g = 0; g < 128; g++) {
		int start = g * m, stop = g == 127 ? i : start + m;
		double G = 0;
		int nz = 0;
		for (int j = start; j < stop; j++) {
			G += (double)h[j];
			nz += P[j] != 0;
		}
		for (int j = start; j < stop; j++)
			Q[j] = P[j] != 0 ? G / nz : 0;
	}
	double sp = 0, sq = 0;
	for (int j = 0; j < i; j++) {
		sp += P[j];
		sq += Q[j];
	}
	if (sq == 0)
		return INFINITY;
	double kl = 0;
	for (int j = 0; j < i; j++) {
		if (P[j] == 0)
			continue;
		if (Q[j] == 0)
			return INFINITY;
		double p = P[j] / sp, q = Q[j] / sq;
		kl += p * log(p / q);
	}
	return kl;
}

/* expected int8 squared error (bin units, bin centres) for threshold k bins */
static double ref_mse(const uint64_t *h, int k)
{
	double s = k / 127.0, err = 0;
	for (int j = 0; j < B; j++) {
		if (!h[j])
			continue;
		double c = j + 0.5, q = floor(c / s + 0.5);
		if (q > 127)
			q = 127;
		double e = c - q * s;
		err += (double)h[j] * e * e;
	}
	return err;
}

static double stat_amax(const struct ir_calib_tensor *t)
{
	return fmax(fabs(t->min), fabs(t->max));
}

/* the fast entropy threshold must be the one with the smallest KL (or tie with it) */
static void check_entropy_ref(const struct ir_calib_tensor *t, const char *what)
{
	double w = t->hist_max / B, best = INFINITY;
	int bi = B;
	/* the zero spike: bin 0 counts as much as bin 1 (see amax_entropy) */
	static uint64_t h[B];
	memcpy(h, t->hist, sizeof h);
	h[0] = h[1];
	int nonempty = 0;
	for (int j = 0; j < B; j++)
		nonempty += t->hist[j] != 0;
	if (nonempty < 128)   /* coarse data keeps its range */
		bi = B;
	else
	for (int i = 128; i <= B; i++) {
		double kl = ref_kl(h, i);
		if (kl <= best) {
			best = kl;
			bi = i;
		}
	}
	double T = ir_calib_amax(t, &HOW_ENTROPY);
	double Tref = fmin((bi + 0.5) * w, stat_amax(t));
	checks++;
	if (T == Tref)
		return;
	int fi = (int)floor(T / w);   /* the fast pick, when it was not clamped to the max */
	double kl = fi >= 128 && fi <= B ? ref_kl(h, fi) : INFINITY;
	if (!(kl <= best + 1e-9)) {
		failures++;
		fprintf(stderr, "%s:%d: entropy of %s: %g (KL %.12g), the definition gives %g (bin %d, KL %.12g)\n",
			__FILE__, __LINE__, what, T, kl, Tref, bi, best);
	}
}

static void check_mse_ref(const struct ir_calib_tensor *t, const char *what)
{
	int top = -1;
	for (int j = 0; j < B; j++)
		if (t->hist[j])
			top = j;
	int kmax = top + 1 < 128 ? 128 : top + 1;
	double best = INFINITY;
	int bk = kmax;
	for (int k = 128; k <= kmax; k++) {
		double e = ref_mse(t->hist, k);
		if (e < best) {
			best = e;
			bk = k;
		}
	}
	double w = t->hist_max / B;
	double T = ir_calib_amax(t, &HOW_MSE);
	checks++;
	if (T == fmin(bk * w, stat_amax(t)))
		return;
	int fk = (int)llround(T / w);
	double e = ref_mse(t->hist, fk);
	if (!(e <= best * (1 + 1e-6))) {
		failures++;
		fprintf(stderr, "%s:%d: mse of %s: %g (error %.12g), the definition gives %g (error %.12g)\n", __FILE__,
			__LINE__, what, T, e, bk * w, best);
	}
}

/* ------------------------------------------------------------------------ */
/* Streaming and methods                                                     */
/* ------------------------------------------------------------------------ */

static void test_gaussian_stream(void)
{
	struct ir_calib c;
	ir_calib_init(&c);
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "x");
	CHECK(t != NULL);
	CHECK(ir_calib_add_tensor(&c, "x") == t && c.n == 1);
	CHECK(ir_calib_find(&c, "x") == t && !ir_calib_find(&c, "y"));
	enum { BATCHES = 100, N = 100000 };
	float *x = malloc(N * sizeof(float));
	double seen_max = 0, seen_min = 0, bmax_lo = INFINITY, bmax_hi = -INFINITY;
	for (int b = 0; b < BATCHES; b++) {
		fill_gauss(x, N, 1.0);
		double bmax = -INFINITY;
		for (int i = 0; i < N; i++) {
			bmax = fmax(bmax, x[i]);
			seen_min = fmin(seen_min, x[i]);
		}
		seen_max = fmax(seen_max, bmax);
		bmax_lo = fmin(bmax_lo, bmax);
		bmax_hi = fmax(bmax_hi, bmax);
		CHECK(ir_calib_observe(t, x, N, 0, NULL) == 0);
	}
	free(x);
	CHECK(t->count == (uint64_t)BATCHES * N && t->batches == BATCHES && t->n_nonfinite == 0);
	CHECK(hist_total(t) == t->count);
	CHECK(t->max == seen_max && t->min == seen_min);
	CHECK(t->ema_max >= bmax_lo && t->ema_max <= bmax_hi);
	double amax = fmax(seen_max, -seen_min);
	CHECK(ir_calib_amax(t, &HOW_MAX) == amax);
	/* P(|x| > 3.8906) = 1e-4 for N(0,1); median of |x| is 0.6745 */
	struct ir_calib_how p = pct(99.99);
	double p9999 = ir_calib_amax(t, &p);
	CHECK_NEAR(p9999, 3.8906, 0.03);
	p = pct(50);
	CHECK_NEAR(ir_calib_amax(t, &p), 0.6745, 0.005);
	p = pct(100);
	CHECK(ir_calib_amax(t, &p) == amax);
	double te = ir_calib_amax(t, &HOW_ENTROPY), tm = ir_calib_amax(t, &HOW_MSE);
	printf("N(0,1), %d values: max %.4f, percentile=99.99 %.4f, entropy %.4f, mse %.4f\n", BATCHES * N, amax, p9999,
	       te, tm);
	CHECK(te > 2.0 && te <= amax);
	CHECK(tm > 2.0 && tm <= amax);
	check_entropy_ref(t, "N(0,1)");
	check_mse_ref(t, "N(0,1)");
	ir_calib_clear(&c);
	CHECK(c.n == 0 && c.t == NULL);
}

/* re-binning merges bins in order and loses no count: the histogram equals one made at the final range at once */
static void test_rebin(void)
{
	enum { N1 = 1000, N2 = 10000 };
	float *all = malloc((N1 + N2) * sizeof(float));
	for (int i = 0; i < N1; i++)
		all[i] = (float)((i % 2 ? -1 : 1) * 0.999 * uniform());
	for (int i = 0; i < N2; i++)
		all[N1 + i] = (float)((i % 2 ? -1 : 1) * (1.0 + 9.0 * uniform()));
	struct ir_calib c;
	ir_calib_init(&c);
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "grow");
	CHECK(ir_calib_observe(t, all, N1, 0, NULL) == 0);
	CHECK(t->hist_max == 1.0);
	uint64_t before[B];
	memcpy(before, t->hist, sizeof(before));
	CHECK(ir_calib_observe(t, all + N1, N2, 0, NULL) == 0);
	CHECK(t->hist_max == 16.0);
	CHECK(hist_total(t) == N1 + N2 && t->count == N1 + N2);
	/* the small values are exactly the first 128 bins (16 of the old bins each) */
	uint64_t low = 0;
	for (int i = 0; i < 128; i++) {
		low += t->hist[i];
		uint64_t old = 0;
		for (int j = 0; j < 16; j++)
			old += before[i * 16 + j];
		CHECK(t->hist[i] == old);
	}
	CHECK(low == N1);
	struct ir_calib_tensor *u = ir_calib_add_tensor(&c, "once");
	t = ir_calib_find(&c, "grow");   /* the array may have moved */
	CHECK(ir_calib_observe(u, all, N1 + N2, 0, NULL) == 0);
	CHECK(u->hist_max == 16.0);
	CHECK(!memcmp(t->hist, u->hist, B * sizeof(uint64_t)));

	/* growth by more than 2^11 puts everything in bin 0, then the new values spread out */
	struct ir_calib_tensor *v = ir_calib_add_tensor(&c, "jump");
	float small[3] = { 0.5f, -0.25f, 0.125f }, big[2] = { 3e6f, -1e6f };
	CHECK(ir_calib_observe(v, small, 3, 0, NULL) == 0);
	CHECK(ir_calib_observe(v, big, 2, 0, NULL) == 0);
	CHECK(v->hist_max == 4194304.0 && v->hist[0] == 3 && hist_total(v) == 5);
	CHECK(v->hist[(int)(3e6 / 4194304.0 * B)] == 1 && v->hist[(int)(1e6 / 4194304.0 * B)] == 1);

	/* zeros first: counted in bin 0 before any range exists */
	struct ir_calib_tensor *z = ir_calib_add_tensor(&c, "zeros");
	float zeros[4] = { 0, -0.0f, 0, 0 };
	CHECK(ir_calib_observe(z, zeros, 4, 0, NULL) == 0);
	CHECK(z->hist_max == 0 && z->hist[0] == 4 && z->count == 4);
	CHECK(ir_calib_amax(z, &HOW_MAX) == 0 && ir_calib_amax(z, &HOW_ENTROPY) == 0 && ir_calib_amax(z, &HOW_MSE) == 0);
	CHECK(ir_calib_observe(z, small, 3, 0, NULL) == 0);
	CHECK(z->hist_max == 0.5 && z->hist[0] == 4 && hist_total(z) == 7);
	/* a large batch takes the sub-histogram path: same result as the simple one */
	enum { NL = 200000 };
	float *lg = malloc(NL * sizeof(float));
	fill_gauss(lg, NL, 2.0);
	for (int i = 0; i < NL; i += 3)
		lg[i] = 0;
	struct ir_calib_tensor *l1 = ir_calib_add_tensor(&c, "large");
	struct ir_calib_tensor *l2 = ir_calib_add_tensor(&c, "pieces");
	l1 = ir_calib_find(&c, "large");
	CHECK(ir_calib_observe(l1, lg, NL, 0, NULL) == 0);
	CHECK(ir_calib_observe(l2, lg, NL, 0, NULL) == 0);   /* sets the same range */
	memset(l2->hist, 0, B * sizeof(uint64_t));
	l2->count = 0;
	for (int i = 0; i < NL; i += 1000)
		CHECK(ir_calib_observe(l2, lg + i, 1000, 0, NULL) == 0);
	CHECK(!memcmp(l1->hist, l2->hist, B * sizeof(uint64_t)));
	free(lg);
	free(all);
	ir_calib_clear(&c);
}

/* After a ReLU half the values are exactly 0: the spike must not pull the
 * entropy threshold down to the first candidates. Pixels on a grid of 17
 * values (the digits' 0..16 / 16) keep their whole range. */
static void test_entropy_relu_and_coarse(void)
{
	enum { N = 400000 };
	float *x = malloc(N * sizeof(float));
	fill_gauss(x, N, 1.0);
	for (int i = 0; i < N; i++)
		x[i] = x[i] > 0 ? x[i] : 0.0f;
	struct ir_calib c;
	ir_calib_init(&c);
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "relu");
	CHECK(ir_calib_observe(t, x, N, 0, NULL) == 0);
	double mx = ir_calib_amax(t, &HOW_MAX), te = ir_calib_amax(t, &HOW_ENTROPY);
	printf("ReLU(N(0,1)): max %.4f, entropy %.4f\n", mx, te);
	CHECK(te > 2.5 && te <= mx);
	check_entropy_ref(t, "ReLU(N(0,1))");
	struct ir_calib_tensor *p = ir_calib_add_tensor(&c, "pixels");
	for (int i = 0; i < N; i++)
		x[i] = (float)(((unsigned)i * 7919u) % 17u) / 16.0f;
	CHECK(ir_calib_observe(p, x, N, 0, NULL) == 0);
	CHECK(ir_calib_amax(p, &HOW_ENTROPY) == 1.0);
	free(x);
	ir_calib_clear(&c);
}

static void test_entropy_outliers(void)
{
	enum { N = 1000000 };
	float *x = malloc(N * sizeof(float));
	fill_gauss(x, N, 1.0);
	for (int i = 0; i < 10; i++)
		x[i * 1000] = (float)(i % 2 ? -20.0 : 20.0);
	struct ir_calib c;
	ir_calib_init(&c);
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "x");
	for (int b = 0; b < 10; b++)
		CHECK(ir_calib_observe(t, x + b * (N / 10), N / 10, 0, NULL) == 0);
	double mx = ir_calib_amax(t, &HOW_MAX), te = ir_calib_amax(t, &HOW_ENTROPY), tm = ir_calib_amax(t, &HOW_MSE);
	struct ir_calib_how p = pct(99.99);
	double tp = ir_calib_amax(t, &p);
	printf("N(0,1) + 10 outliers at 20: max %.4f, percentile=99.99 %.4f, entropy %.4f, mse %.4f\n", mx, tp, te, tm);
	CHECK(mx == 20.0);
	CHECK(te > 3.0 && te < 10.0);
	/* 10 (20 - T)^2 against 1e6 T^2 / (12 * 127^2): T near 13.2 */
	CHECK(tm > 10.0 && tm < 16.0 && tm < mx);
	check_entropy_ref(t, "N(0,1) with outliers");
	check_mse_ref(t, "N(0,1) with outliers");
	free(x);
	ir_calib_clear(&c);
}

/* the fast searches agree with the definitions on assorted histograms */
static void test_methods_vs_definition(void)
{
	struct ir_calib c;
	ir_calib_init(&c);
	enum { N = 50000 };
	float *x = malloc(N * sizeof(float));
	const char *kinds[] = { "uniform", "exponential", "bimodal", "relu", "sparse", "laplace", "tiny", "spike" };
	for (int k = 0; k < 8; k++) {
		for (int i = 0; i < N; i++) {
			double u = uniform();
			switch (k) {
			case 0: x[i] = (float)(u * 2 - 1); break;
			case 1: x[i] = (float)-log(1 - u); break;
			case 2: x[i] = (float)(gauss() * 0.3 + (i % 2 ? 3 : -5)); break;
			case 3: x[i] = (float)fmax(0.0, gauss()); break;
			case 4: x[i] = (float)(i % 97 == 0 ? floor(u * 8) : 0); break;
			case 5: x[i] = (float)((i % 2 ? 1 : -1) * -log(1 - u) * 0.1); break;
			case 6: x[i] = (float)(gauss() * 1e-30); break;
			default: x[i] = (float)(i == 7 ? 1000.0 : gauss() * 0.01); break;
			}
		}
		struct ir_calib_tensor *t = ir_calib_add_tensor(&c, kinds[k]);
		CHECK(ir_calib_observe(t, x, N, 0, NULL) == 0);
		check_entropy_ref(t, kinds[k]);
		check_mse_ref(t, kinds[k]);
		double mx = ir_calib_amax(t, &HOW_MAX);
		for (int m = 0; m < IR_CALIB_METHOD_COUNT; m++) {
			struct ir_calib_how h = { (enum ir_calib_method)m, 99.9 };
			double T = ir_calib_amax(t, &h);
			CHECK(T > 0 && T <= mx && isfinite(T));
		}
	}
	free(x);
	ir_calib_clear(&c);
}

static void test_range(void)
{
	enum { N = 100000 };
	float *x = malloc(N * sizeof(float));
	struct ir_calib c;
	ir_calib_init(&c);
	for (int i = 0; i < N; i++)
		x[i] = (float)(-1 + 6 * uniform());
	x[0] = -1;
	x[1] = 5;
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "skewed");
	CHECK(ir_calib_observe(t, x, N, 0, NULL) == 0);
	double lo, hi;
	ir_calib_range(t, &HOW_MAX, &lo, &hi);
	CHECK(lo == -1 && hi == 5);
	/* |x| <= T with probability (1 + T) / 6 for T > 1: the 99th percentile is 4.94 */
	struct ir_calib_how p = pct(99);
	ir_calib_range(t, &p, &lo, &hi);
	CHECK(lo == -1);
	CHECK_NEAR(hi, 4.94, 0.02);
	for (int i = 0; i < N; i++)
		x[i] = (float)(1 + 4 * uniform());
	t = ir_calib_add_tensor(&c, "positive");
	CHECK(ir_calib_observe(t, x, N, 0, NULL) == 0);
	ir_calib_range(t, &HOW_MAX, &lo, &hi);
	CHECK(lo == 0 && hi == t->max);   /* widened to hold 0 */
	for (int i = 0; i < N; i++)
		x[i] = -x[i];
	t = ir_calib_add_tensor(&c, "negative");
	CHECK(ir_calib_observe(t, x, N, 0, NULL) == 0);
	ir_calib_range(t, &HOW_MAX, &lo, &hi);
	CHECK(lo == t->min && hi == 0);
	t = ir_calib_add_tensor(&c, "empty");
	ir_calib_range(t, &HOW_ENTROPY, &lo, &hi);
	CHECK(lo == 0 && hi == 0 && ir_calib_amax(t, &HOW_MSE) == 0);
	free(x);
	ir_calib_clear(&c);
}

static void test_nonfinite_and_channels(void)
{
	struct ir_calib c;
	ir_calib_init(&c);
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "nf");
	float x[8] = { 1, NAN, -2, INFINITY, -INFINITY, 0.5f, 3, -NAN };
	CHECK(ir_calib_observe(t, x, 8, 4, &d) == 0);
	CHECK(t->count == 4 && t->n_nonfinite == 4);
	CHECK(t->min == -2 && t->max == 3 && hist_total(t) == 4);
	CHECK(ir_calib_amax(t, &HOW_MAX) == 3);
	CHECK(t->n_chan == 4 && t->chan_rows == 2);
	CHECK(t->chan_abssum[0] == 1 && t->chan_abssum[1] == 0.5 && t->chan_abssum[2] == 5 && t->chan_abssum[3] == 0);
	float nan_only[2] = { NAN, NAN };
	CHECK(ir_calib_observe(t, nan_only, 2, 0, NULL) == 0);
	CHECK(t->count == 4 && t->n_nonfinite == 6 && t->batches == 2);
	/* an infinity must not widen the range in the large-batch path either */
	enum { N = 100000 };
	float *y = malloc(N * sizeof(float));
	fill_gauss(y, N, 1.0);
	y[5] = INFINITY;
	y[6] = NAN;
	y[7] = -INFINITY;
	struct ir_calib_tensor *u = ir_calib_add_tensor(&c, "nf_large");
	CHECK(ir_calib_observe(u, y, N, 0, NULL) == 0);
	CHECK(u->count == N - 3 && u->n_nonfinite == 3 && hist_total(u) == N - 3);
	CHECK(isfinite(u->min) && isfinite(u->max) && u->hist_max <= 8);
	/* only NaN: nothing to range */
	struct ir_calib_tensor *v = ir_calib_add_tensor(&c, "nan");
	CHECK(ir_calib_observe(v, nan_only, 2, 0, NULL) == 0);
	CHECK(v->count == 0 && v->n_nonfinite == 2 && ir_calib_amax(v, &HOW_MAX) == 0 &&
	      ir_calib_amax(v, &HOW_ENTROPY) == 0);
	/* channel errors */
	t = ir_calib_find(&c, "nf");
	CHECK(ir_calib_observe(t, x, 6, 4, &d) == IR_ERR && d.error && strstr(d.error, "not rows of 4 channels"));
	ir_diag_clear(&d);
	CHECK(ir_calib_observe(t, x, 8, 2, &d) == IR_ERR && d.error && strstr(d.error, "earlier batches had 4"));
	ir_diag_clear(&d);
	CHECK(t->batches == 2);   /* refused batches change nothing */
	/* EMA: the first batch sets it, then 1% steps */
	struct ir_calib_tensor *e = ir_calib_add_tensor(&c, "ema");
	float b1[2] = { -1, 1 }, b2[2] = { -3, 11 };
	CHECK(ir_calib_observe(e, b1, 2, 0, NULL) == 0);
	CHECK(e->ema_min == -1 && e->ema_max == 1);
	CHECK(ir_calib_observe(e, b2, 2, 0, NULL) == 0);
	CHECK_NEAR(e->ema_min, -1.02, 1e-12);
	CHECK_NEAR(e->ema_max, 1.1, 1e-12);
	CHECK(e->min == -3 && e->max == 11);
	free(y);
	ir_calib_clear(&c);
}

static void test_method_names(void)
{
	struct ir_calib_how h;
	struct ir_diag d;
	ir_diag_init(&d);
	char buf[64];
	CHECK(ir_calib_method_parse("max", &h, &d) == 0 && h.method == IR_CALIB_MAX);
	CHECK(ir_calib_method_parse("entropy", &h, &d) == 0 && h.method == IR_CALIB_ENTROPY);
	CHECK(ir_calib_method_parse("mse", &h, &d) == 0 && h.method == IR_CALIB_MSE);
	CHECK(ir_calib_method_parse("percentile", &h, &d) == 0 && h.method == IR_CALIB_PERCENTILE && h.pct == 99.99);
	CHECK(!strcmp(ir_calib_method_name(&h, buf, sizeof(buf)), "percentile=99.99"));
	CHECK(ir_calib_method_parse("percentile=99.9", &h, &d) == 0 && h.pct == 99.9);
	CHECK(!strcmp(ir_calib_method_name(&h, buf, sizeof(buf)), "percentile=99.9"));
	CHECK(ir_calib_method_parse("percentile=100", &h, &d) == 0 && h.pct == 100);
	const char *bad[] = { "percentile=0", "percentile=101", "percentile=", "percentile=nan", "percentile=9x",
			      "percentile=0x10", "percentile=-5", "percentile= 99", "percentile=99 ", "percentile=inf",
			      "percentile=1e999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(ir_calib_method_parse(bad[i], &h, &d) == IR_ERR && d.error && strstr(d.error, "bad percentile"));
		ir_diag_clear(&d);
	}
	CHECK(ir_calib_method_parse("minmax", &h, &d) == IR_ERR && d.error &&
	      !strcmp(d.error, "unknown calibration method 'minmax' (max, percentile=P, entropy, mse)"));
	ir_diag_clear(&d);
	for (int m = 0; m < IR_CALIB_METHOD_COUNT; m++) {
		struct ir_calib_how a = { (enum ir_calib_method)m, 99.5 }, b;
		CHECK(ir_calib_method_parse(ir_calib_method_name(&a, buf, sizeof(buf)), &b, NULL) == 0);
		CHECK(b.method == a.method && (m != IR_CALIB_PERCENTILE || b.pct == 99.5));
	}
}

/* ------------------------------------------------------------------------ */
/* The cache file                                                            */
/* ------------------------------------------------------------------------ */

static char *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)sz + 1);
	*n = fread(buf, 1, (size_t)sz, f);
	buf[*n] = 0;
	fclose(f);
	return buf;
}

static char tmpdir[256];

static void make_sample(struct ir_calib *c, bool small)
{
	ir_calib_init(c);
	strcpy(c->model_hash, "0123456789abcdef");
	strcpy(c->data_hash, "fedcba9876543210");
	snprintf(c->data_desc, sizeof(c->data_desc), "digits \"train\".npz\t(1,257 samples)");
	c->stage = 2;
	c->random = true;
	c->samples = 1257;
	c->batch = 32;
	float x[64];
	for (int i = 0; i < 64; i++)
		x[i] = (float)(i % 5 - 1.5) * (i % 3 ? 1.0f : 0.25f);
	struct ir_calib_tensor *t = ir_calib_add_tensor(c, "conv1_out");
	ir_calib_observe(t, x, small ? 8 : 64, 4, NULL);
	t = ir_calib_add_tensor(c, small ? "b" : "odd \"name\"\n\\ \x01 é");
	ir_calib_observe(t, x + 8, small ? 4 : 40, 0, NULL);
	if (!small) {
		enum { N = 20000 };
		float *y = malloc(N * sizeof(float));
		fill_gauss(y, N, 3.0);
		t = ir_calib_add_tensor(c, "gauss");
		for (int b = 0; b < 4; b++)
			ir_calib_observe(t, y + b * (N / 4), N / 4, 0, NULL);
		free(y);
		ir_calib_add_tensor(c, "never_seen");
		float zeros[3] = { 0, 0, NAN };
		ir_calib_observe(ir_calib_add_tensor(c, "zeros"), zeros, 3, 0, NULL);
	}
}

static void test_save_load(void)
{
	struct ir_calib c, l, cp;
	struct ir_diag d;
	ir_diag_init(&d);
	make_sample(&c, false);
	char path[300];
	snprintf(path, sizeof(path), "%s/calib.cache", tmpdir);
	CHECK(ir_calib_save(&c, path, &d) == 0);
	CHECK(ir_calib_load(path, &l, &d) == 0);
	if (d.error)
		fprintf(stderr, "load: %s\n", d.error);
	CHECK(calib_equal(&c, &l));
	CHECK(ir_calib_copy(&cp, &c) == 0 && calib_equal(&c, &cp));
	/* same thresholds after the trip */
	for (int i = 0; i < c.n; i++)
		for (int m = 0; m < IR_CALIB_METHOD_COUNT; m++) {
			struct ir_calib_how h = { (enum ir_calib_method)m, 99.9 };
			CHECK(ir_calib_amax(&c.t[i], &h) == ir_calib_amax(&l.t[i], &h));
		}
	/* a loaded tensor keeps streaming */
	float more[4] = { 100, -1, 2, 3 };
	CHECK(ir_calib_observe(ir_calib_find(&l, "conv1_out"), more, 4, 4, NULL) == 0);
	CHECK(ir_calib_find(&l, "conv1_out")->max == 100);
	/* no temporary file is left, and saving again replaces the file */
	CHECK(ir_calib_save(&l, path, &d) == 0);
	DIR *dir = opendir(tmpdir);
	int files = 0;
	for (struct dirent *e; dir && (e = readdir(dir));)
		files += e->d_name[0] != '.';
	closedir(dir);
	CHECK(files == 1);
	struct ir_calib l2;
	CHECK(ir_calib_load(path, &l2, &d) == 0 && calib_equal(&l, &l2));
	ir_calib_clear(&l2);
	/* errors: a missing file, a folder, a save into a missing folder */
	CHECK(ir_calib_load("/nonexistent/calib.cache", &l2, &d) == IR_EIO && d.error &&
	      strstr(d.error, "cannot open '/nonexistent/calib.cache'"));
	ir_diag_clear(&d);
	CHECK(ir_calib_load(tmpdir, &l2, &d) != 0 && d.error && strstr(d.error, "folder"));
	ir_diag_clear(&d);
	CHECK(ir_calib_save(&c, "/nonexistent/x/calib.cache", &d) == IR_EIO && d.error && strstr(d.error, "folder"));
	ir_diag_clear(&d);
	unlink(path);
	ir_calib_clear(&c);
	ir_calib_clear(&l);
	ir_calib_clear(&cp);
}

/* the text with the first occurrence of `from` replaced by `to` */
static char *replace(const char *s, const char *from, const char *to)
{
	const char *p = strstr(s, from);
	if (!p) {
		fprintf(stderr, "test bug: '%s' not in the sample\n", from);
		abort();
	}
	size_t n = strlen(s) - strlen(from) + strlen(to);
	char *r = malloc(n + 1);
	size_t k = (size_t)(p - s);
	memcpy(r, s, k);
	strcpy(r + k, to);
	strcat(r, p + strlen(from));
	return r;
}

/* parsing `text` must fail with a message holding `want` */
static void refused(const char *text, size_t n, const char *want, int line)
{
	struct ir_calib c;
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = ir_calib_parse(text, n, "calib.cache", &c, &d);
	checks++;
	if (rc == 0 || !d.error || strncmp(d.error, "calib.cache: line ", 18) || (want && !strstr(d.error, want)) ||
	    c.n != 0 || c.t != NULL || strchr(d.error, '\n')) {
		failures++;
		fprintf(stderr, "%s:%d: expected a refusal with '%s', got rc %d: %s\n", __FILE__, line, want ? want : "",
			rc, d.error ? d.error : "(no message)");
	}
	ir_diag_clear(&d);
	if (rc == 0)
		ir_calib_clear(&c);
}

#define REFUSED(from, to, want) do { char *t_ = replace(text, from, to); refused(t_, strlen(t_), want, __LINE__); free(t_); } while (0)

static void test_malformed(void)
{
	struct ir_calib c;
	struct ir_diag d;
	ir_diag_init(&d);
	make_sample(&c, true);
	char path[300];
	snprintf(path, sizeof(path), "%s/small.cache", tmpdir);
	CHECK(ir_calib_save(&c, path, &d) == 0);
	ir_calib_clear(&c);
	size_t n;
	char *text = read_all(path, &n);
	unlink(path);
	CHECK(text != NULL);
	if (!text)
		return;
	if (getenv("SHOW_CACHE"))
		fputs(text, stdout);
	/* the whole file loads; every shorter prefix is refused */
	CHECK(ir_calib_parse(text, n, "calib.cache", &c, &d) == 0);
	ir_calib_clear(&c);
	for (size_t k = 0; k < n; k++) {
		char *pre = malloc(k ? k : 1);
		memcpy(pre, text, k);   /* a copy of exactly k bytes: the sanitizers see any read past it */
		refused(pre, k, NULL, __LINE__);
		free(pre);
	}
	refused(text, n - 1, "truncated", __LINE__);
	/* every kind of malformed content */
	REFUSED("count 8\n", "count 8x\n", "line 11: count: '8x' is not a whole number");
	REFUSED("count 8\n", "count -8\n", "not a whole number");
	REFUSED("count 8\n", "count 08\n", "not a whole number");
	REFUSED("count 8\n", "count 99999999999999999999999\n", "not a whole number");
	REFUSED("count 8\n", "count 9\n", "holds 8 values, its count is 9");
	REFUSED("count 8\n", "count 8 8\n", "'count' takes 1 value, found 2");
	REFUSED("count 8\n", "count  8\n", "extra space");
	REFUSED("count 8\n", "count 8 \n", "a space at the end");
	REFUSED("count 8\n", "cnt 8\n", "expected 'count', found 'cnt'");
	REFUSED("min -1.5\n", "min nan\n", "line 14: min: 'nan' is not a finite number");
	REFUSED("max 2.5\n", "max inf\n", "'inf' is not a finite number");
	REFUSED("max 2.5\n", "max 1e999\n", "'1e999' is not a finite number");
	REFUSED("max 2.5\n", "max 0x1p3\n", "is not a finite number");
	REFUSED("min -1.5\n", "min 7\n", "min 7 is above max 2.5");
	REFUSED("ema_min -1.5\n", "ema_min -100\n", "moving average outside");
	REFUSED("hist_max 4\n", "hist_max 0.5\n", "hist_max 0.5 is below the largest |x|");
	REFUSED("hist 2048", "hist 2049", "line 19: histogram of 'conv1_out' has 2049 bins, expected 2048");
	REFUSED("hist 2048 5", "hist 2048 4", "histogram of 'conv1_out' holds 7 values, its count is 8");
	REFUSED("hist 2048 5", "hist 2048 6", "expected 'BIN COUNT' (6 of 6)");
	REFUSED("hist 2048 5", "hist 2048 2049", "non-empty bins: 2049 is more than 2048");
	REFUSED("1280 1\n", "1280 0\n", "bin 1280 is listed with count 0");
	REFUSED("768 1\n", "100 1\n", "bin 100 after bin 256");
	REFUSED("768 1\n", "256 1\n", "bin 256 after bin 256");
	REFUSED("1280 1\n", "1000 1\n", "its top bin 1000 does not hold the largest |x| 2.5");
	REFUSED("1280 1\n", "2047 1\n", "its top bin 2047 does not hold");
	
	REFUSED("1280 1\n", "2048 1\n", "bin: 2048 is more than 2047");
	REFUSED("channels 4 2", "channels 4 3", "3 rows of 4 channels is more than the 8 values seen");
	REFUSED("channels 4 2", "channels 0 2", "2 rows of no channels");
	REFUSED("channels 4 2\n", "channels 4 2\n-1\n", "a negative sum");
	REFUSED("channels 4 2", "channels 16777217 2", "is more than 16777216");
	REFUSED("channels 4 2", "channels 9999 0", "the file is shorter than that");
	REFUSED("ogsh-calib 1", "ogsh-calib 2", "line 1: unsupported calibration cache version '2' (this ogsh reads 1)");
	REFUSED("ogsh-calib 1", "PK\x03\x04", "line 1: not an ogsh calibration cache");
	REFUSED("ogsh-calib 1", "ogsh-calib", "line 1: unsupported calibration cache version ''");
	REFUSED("model_hash 0123456789abcdef", "model_hash 0123456789ABCDEF", "not 16 lowercase hex digits");
	REFUSED("data_hash fedcba9876543210", "data_hash fedcba98765432", "not 16 lowercase hex digits");
	REFUSED("random 1", "random 2", "random: 2 is out of range [0, 1]");
	REFUSED("stage 2", "stage -2", "stage: -2 is out of range");
	REFUSED("batch 32", "batch 3000000000", "batch: 3000000000 is more than");
	REFUSED("batch 32", "batch -1", "batch: -1 is out of range");
	REFUSED("tensors 2", "tensors 3", "line 44: expected 'tensor', found 'end'");
	REFUSED("tensors 2", "tensors 1", "expected 'end' after 1 tensors, found 'tensor'");
	REFUSED("tensor \"b\"", "tensor \"conv1_out\"", "line 30: tensor 'conv1_out' appears twice (first on line 10)");
	REFUSED("tensor \"b\"", "tensor \"\"", "a tensor with an empty name");
	REFUSED("tensor \"b\"", "tensor \"b", "without its closing quote");
	REFUSED("tensor \"b\"", "tensor b", "expected a string in double quotes");
	REFUSED("tensor \"b\"", "tensor \"b\\x00\"", "a NUL byte");
	REFUSED("tensor \"b\"", "tensor \"b\\q\"", "unknown escape");
	REFUSED("tensor \"b\"", "tensor \"b\x01\"", "a control byte");
	REFUSED("data_desc \"", "data_desc \"\xff\x7f", "a control byte");
	REFUSED("end\n", "end\nend\n", "more after 'end'");
	REFUSED("end\n", "end extra\n", "expected 'end'");
	REFUSED("batches 1\n", "batches 0\n", "has values but no batches");
	/* a name that needs escapes is shown escaped: the message stays one line */
	char *esc = replace(text, "tensor \"b\"\ncount 4\n", "tensor \"b\\nc\"\ncount 5\n");
	refused(esc, strlen(esc), "line 42: histogram of 'b\\x0ac' holds 4 values, its count is 5", __LINE__);
	free(esc);
	REFUSED("random 1\n", "random 1\n\n", "empty line");
	/* a data description too long for the struct */
	char longdesc[400] = "data_desc \"";
	memset(longdesc + 11, 'a', 300);
	strcpy(longdesc + 311, "\"\nrandom");
	char *ld = replace(text, "data_desc \"digits \\\"train\\\".npz\\t(1,257 samples)\"\nrandom", longdesc);
	refused(ld, strlen(ld), "longer than 255 bytes", __LINE__);
	free(ld);
	ir_diag_clear(&d);
	free(text);
}

/* ------------------------------------------------------------------------ */
/* The model hash                                                            */
/* ------------------------------------------------------------------------ */

static void test_model_hash(void)
{
	struct ir_model *m = ir_demo_model(), *m2 = ir_demo_model();
	CHECK(m && m2);
	if (!m || !m2)
		return;
	char h0[17], h1[17], h2[17];
	ir_model_hash(m, h0);
	CHECK(strlen(h0) == 16 && strspn(h0, "0123456789abcdef") == 16);
	ir_model_hash(m2, h1);
	CHECK(!strcmp(h0, h1));
	struct ir_model *cl = ir_model_clone(m);
	ir_model_hash(cl, h1);
	CHECK(!strcmp(h0, h1));
	/* a node renamed, then renamed back */
	struct ir_node *n = m->graph->first;
	char *old = strdup(n->name);
	CHECK(ir_node_rename(n, "renamed", NULL) == 0);
	ir_model_hash(m, h1);
	CHECK(strcmp(h0, h1) != 0);
	CHECK(ir_node_rename(n, old, NULL) == 0);
	ir_model_hash(m, h1);
	CHECK(!strcmp(h0, h1));
	free(old);
	/* an attribute */
	struct ir_node *conv = NULL;
	ir_for_each_node(cl->graph, k)
		if (!conv && ir_node_attr(k, "pads"))
			conv = k;
	CHECK(conv != NULL);
	if (conv) {
		struct ir_attr *a = ir_node_attr(conv, "pads");
		a->ints[0] ^= 1;
		ir_model_hash(cl, h2);
		CHECK(strcmp(h0, h2) != 0);
		a->ints[0] ^= 1;
		ir_model_hash(cl, h2);
		CHECK(!strcmp(h0, h2));
	}
	/* one bit of one weight, in the last byte and in the first */
	struct ir_value *w = cl->graph->inits[0];
	for (int pass = 0; pass < 2; pass++) {
		const struct ir_tensor *t0 = w->init;
		struct ir_tensor *t = ir_tensor_new(t0->dtype, t0->rank, t0->dims, NULL);
		unsigned char *p = ir_tensor_mutable(t);
		memcpy(p, ir_tensor_data(t0), t0->nbytes);
		p[pass ? 0 : t0->nbytes - 1] ^= 0x80;
		struct ir_tensor *keep = w->init;
		ir_tensor_ref(keep);
		CHECK(ir_value_set_init(w, t, NULL) == 0);
		ir_tensor_unref(t);
		ir_model_hash(cl, h2);
		CHECK(strcmp(h0, h2) != 0);
		CHECK(ir_value_set_init(w, keep, NULL) == 0);
		ir_tensor_unref(keep);
		ir_model_hash(cl, h2);
		CHECK(!strcmp(h0, h2));
	}
	/* an opset version */
	cl->opsets[0].version++;
	ir_model_hash(cl, h2);
	CHECK(strcmp(h0, h2) != 0);
	cl->opsets[0].version--;
	/* a graph input's type */
	struct ir_value *in = cl->graph->inputs[0];
	int64_t dv = in->type.dims[1].value;
	in->type.dims[1].value = dv + 1;
	ir_model_hash(cl, h2);
	CHECK(strcmp(h0, h2) != 0);
	in->type.dims[1].value = dv;
	ir_model_hash(cl, h2);
	CHECK(!strcmp(h0, h2));

	/* shape inference fills values' inferred types: not content */
	CHECK(ir_infer(cl, NULL) == 0);
	ir_model_hash(cl, h2);
	CHECK(!strcmp(h0, h2));

	/* an edit inside a subgraph: an If whose then-branch applies Relu to a captured value */
	struct ir_model *sm = ir_model_new();
	struct ir_graph *g = ir_graph_new("outer");
	sm->graph = g;
	struct ir_value *x = ir_value_new(g, "x", NULL), *cond = ir_value_new(g, "cond", NULL);
	ir_graph_add_input(g, x);
	ir_graph_add_input(g, cond);
	struct ir_node *ifn = ir_node_new(g, "If", NULL, "if", 1, 1, NULL);
	ir_node_set_input(ifn, 0, cond);
	ir_node_set_output(ifn, 0, ir_value_new(g, "y", NULL), NULL);
	ir_graph_add_output(g, ir_value_find(g, "y"));
	struct ir_graph *sub = ir_graph_new("then");
	sub->parent = g;
	struct ir_value *cx = ir_graph_capture(sub, "x", NULL);
	struct ir_node *r = ir_node_new(sub, "Relu", NULL, "inner", 1, 1, NULL);
	ir_node_set_input(r, 0, cx);
	ir_node_set_output(r, 0, ir_value_new(sub, "t", NULL), NULL);
	ir_graph_add_output(sub, ir_value_find(sub, "t"));
	struct ir_attr ga = { .type = IR_ATTR_GRAPH, .has_type = true, .g = sub };
	ga.name = strdup("then_branch");
	CHECK(ir_node_set_attr(ifn, &ga, NULL) == 0);
	char s0[17], s1[17];
	ir_model_hash(sm, s0);
	struct ir_model *smc = ir_model_clone(sm);
	CHECK(smc != NULL);
	if (smc) {
		ir_model_hash(smc, s1);
		CHECK(!strcmp(s0, s1));
		ir_model_free(smc);
	}
	CHECK(ir_node_rename(r, "inner2", NULL) == 0);
	ir_model_hash(sm, s1);
	CHECK(strcmp(s0, s1) != 0);
	ir_model_free(sm);

	/* the byte hash: the same bytes hash the same at any alignment, every byte counts */
	unsigned char buf[80], other[80];
	for (int i = 0; i < 80; i++)
		buf[i] = (unsigned char)(i * 37 + 1);
	uint64_t ref = ir_hash_bytes(IR_HASH_SEED, buf, 61);
	for (int off = 1; off < 8; off++) {
		memcpy(other + off, buf, 61);
		CHECK(ir_hash_bytes(IR_HASH_SEED, other + off, 61) == ref);
	}
	for (int i = 0; i < 61; i++) {
		memcpy(other, buf, 61);
		other[i] ^= (unsigned char)(1u << (i % 8));
		CHECK(ir_hash_bytes(IR_HASH_SEED, other, 61) != ref);
	}
	CHECK(ir_hash_bytes(IR_HASH_SEED, buf, 60) != ref);
	CHECK(ir_hash_bytes(IR_HASH_SEED, buf, 0) == IR_HASH_SEED);
	/* speed of a large weight (printed, not asserted) */
	size_t big = (size_t)64 << 20;
	unsigned char *mem = malloc(big);
	memset(mem, 0x5a, big);
	double t0 = now_ms();
	uint64_t hb = ir_hash_bytes(IR_HASH_SEED, mem, big);
	double t1 = now_ms();
	printf("ir_hash_bytes: 64 MiB in %.1f ms (%016llx)\n", t1 - t0, (unsigned long long)hb);
	free(mem);
	ir_model_free(m);
	ir_model_free(m2);
	ir_model_free(cl);
}

/* ------------------------------------------------------------------------ */
/* Speed of re-deriving thresholds (printed, not asserted)                   */
/* ------------------------------------------------------------------------ */

static void test_speed(void)
{
	struct ir_calib c;
	ir_calib_init(&c);
	enum { TENSORS = 300, N = 20000 };
	float *x = malloc(N * sizeof(float));
	for (int k = 0; k < TENSORS; k++) {
		char name[32];
		snprintf(name, sizeof(name), "t%d", k);
		struct ir_calib_tensor *t = ir_calib_add_tensor(&c, name);
		double sigma = 0.1 + k * 0.05;
		fill_gauss(x, N, sigma);
		if (k % 3 == 0)
			for (int i = 0; i < N; i++)
				x[i] = fmaxf(x[i], 0);
		if (k % 5 == 0)
			x[k] = (float)(sigma * 30);
		CHECK(ir_calib_observe(t, x, N, 0, NULL) == 0);
	}
	free(x);
	double sum = 0;
	for (int m = 0; m < IR_CALIB_METHOD_COUNT; m++) {
		struct ir_calib_how h = { (enum ir_calib_method)m, 99.99 };
		char nm[32];
		double t0 = now_ms();
		for (int k = 0; k < c.n; k++)
			sum += ir_calib_amax(&c.t[k], &h);
		double t1 = now_ms();
		printf("re-deriving %d thresholds with %s: %.1f ms\n", c.n, ir_calib_method_name(&h, nm, sizeof(nm)), t1 - t0);
	}
	CHECK(isfinite(sum) && sum > 0);
	/* streaming speed: a ResNet-50 batch of one is about 10M floats */
	enum { BIG = 10 << 20 };
	float *y = malloc((size_t)BIG * sizeof(float));
	fill_gauss(y, BIG, 1.0);
	for (size_t i = 0; i < BIG; i += 2)
		y[i] = 0;
	struct ir_calib_tensor *t = ir_calib_add_tensor(&c, "stream");
	CHECK(ir_calib_observe(t, y, BIG, 0, NULL) == 0);
	double t0 = now_ms();
	for (int r = 0; r < 3; r++)
		CHECK(ir_calib_observe(t, y, BIG, 0, NULL) == 0);
	double t1 = now_ms();
	printf("observe: %.1f ms per 10M floats (%.2f ns a value)\n", (t1 - t0) / 3, (t1 - t0) / 3 / BIG * 1e6);
	free(y);
	ir_calib_clear(&c);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ogsh-test-calib-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_gaussian_stream();
	test_rebin();
	test_entropy_outliers();
	test_entropy_relu_and_coarse();
	test_methods_vs_definition();
	test_range();
	test_nonfinite_and_channels();
	test_method_names();
	test_save_load();
	test_malformed();
	test_model_hash();
	test_speed();
	rmdir(tmpdir);
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
