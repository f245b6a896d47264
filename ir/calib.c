/*
 * calib.c - calibration statistics: what a float stage's activations looked
 * like over representative data (streamed batch by batch), the methods that
 * take a quantization range from them (max, percentile, entropy, mse), the
 * cache file that keeps them, and the model content hash that keys it.
 *
 * The cache file is text, one item a line, so that a person can read it and
 * an error can name its line:
 *
 *   ogsh-calib 1
 *   model_hash 0123456789abcdef        (or "-" when not set)
 *   stage 3
 *   data_hash 0123456789abcdef         (or "-")
 *   data_desc "digits/train.npz (1,257 samples)"
 *   random 0
 *   samples 1257
 *   batch 32
 *   tensors 2
 *   tensor "conv1_out"                 (then, for each tensor:)
 *   count 123456
 *   nonfinite 0
 *   batches 40
 *   min -1.25                          (doubles as %.17g: they read back exactly)
 *   max 6.5
 *   ema_min -1.1
 *   ema_max 6.2
 *   hist_max 8
 *   hist 2048 3                        (bins, then how many non-empty bins follow)
 *   0 1000                             (bin index and its count, increasing)
 *   17 455
 *   1663 1
 *   channels 0 0                       (n_chan and rows, then n_chan sums, one a line)
 *   end
 *
 * Strings are in double quotes with \\ \" \n \t \r and \xHH escapes. Every
 * prefix of a valid file is refused (the last line must be "end" and end
 * with a newline).
 */
#include "ir_private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define B IR_CALIB_BINS
#define LEVELS 128              /* entropy: int8's magnitudes 0..127 */
#define HIST_MAX_MIN 0x1p-64    /* the smallest range: 2048/hist_max stays a normal float */
#define MAX_NAME 4096           /* a tensor name in a cache file */
#define MAX_CHAN (1 << 24)
#define MAX_FILE ((size_t)1 << 31)

/* ------------------------------------------------------------------------ */
/* The set of tensors                                                        */
/* ------------------------------------------------------------------------ */

void ir_calib_init(struct ir_calib *c)
{
	memset(c, 0, sizeof(*c));
}

static void tensor_clear(struct ir_calib_tensor *t)
{
	free(t->name);
	free(t->hist);
	free(t->chan_abssum);
	memset(t, 0, sizeof(*t));
}

void ir_calib_clear(struct ir_calib *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		tensor_clear(&c->t[i]);
	free(c->t);
	ir_calib_init(c);
}

struct ir_calib_tensor *ir_calib_find(const struct ir_calib *c, const char *name)
{
	if (!c || !name)
		return NULL;
	for (int i = 0; i < c->n; i++)
		if (c->t[i].name[0] == name[0] && !strcmp(c->t[i].name, name))
			return &c->t[i];
	return NULL;
}

/* A new empty tensor at the end (the name is not looked up). */
static struct ir_calib_tensor *append_tensor(struct ir_calib *c, const char *name)
{
	struct ir_calib_tensor *t;
	if (c->n == INT_MAX)
		return NULL;
	if (c->n >= c->cap) {
		size_t cap = (size_t)c->cap;
		if (ir_grow(&c->t, &cap, (size_t)c->n + 1, sizeof(*c->t)) || cap > INT_MAX)
			return NULL;
		c->cap = (int)cap;
	}
	t = &c->t[c->n];
	memset(t, 0, sizeof(*t));
	t->name = ir_strdup(name);
	t->hist = calloc(B, sizeof(*t->hist));
	if (!t->name || !t->hist) {
		tensor_clear(t);
		return NULL;
	}
	c->n++;
	return t;
}

struct ir_calib_tensor *ir_calib_add_tensor(struct ir_calib *c, const char *name)
{
	struct ir_calib_tensor *t = ir_calib_find(c, name);
	return t || !name ? t : append_tensor(c, name);
}

static int tensor_copy(struct ir_calib_tensor *dst, const struct ir_calib_tensor *src)
{
	*dst = *src;
	dst->name = ir_strdup(src->name);
	dst->hist = calloc(B, sizeof(*dst->hist));
	dst->chan_abssum = NULL;
	if (src->n_chan > 0 && src->chan_abssum) {
		dst->chan_abssum = malloc((size_t)src->n_chan * sizeof(double));
		if (dst->chan_abssum)
			memcpy(dst->chan_abssum, src->chan_abssum, (size_t)src->n_chan * sizeof(double));
	}
	if (!dst->name || !dst->hist || (src->n_chan > 0 && src->chan_abssum && !dst->chan_abssum)) {
		tensor_clear(dst);
		return IR_ENOMEM;
	}
	if (src->hist)
		memcpy(dst->hist, src->hist, B * sizeof(*dst->hist));
	return 0;
}

int ir_calib_copy(struct ir_calib *out, const struct ir_calib *c)
{
	*out = *c;
	out->t = NULL;
	out->n = out->cap = 0;
	if (c->n > 0) {
		out->t = ir_alloc_array((size_t)c->n, sizeof(*out->t));
		if (!out->t)
			return IR_ENOMEM;
		out->cap = c->n;
		for (int i = 0; i < c->n; i++) {
			if (tensor_copy(&out->t[i], &c->t[i])) {
				ir_calib_clear(out);
				return IR_ENOMEM;
			}
			out->n++;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Streaming one batch                                                       */
/* ------------------------------------------------------------------------ */

/* A name for a one-line message: control bytes escaped, at most 80 bytes shown. */
static const char *show_name(const char *name, char buf[100])
{
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)name; *p && k < 80; p++) {
		if (*p < 0x20 || *p == 0x7f)
			k += (size_t)snprintf(buf + k, 100 - k, "\\x%02x", *p);
		else
			buf[k++] = (char)*p;
	}
	if (strlen(name) > k && k >= 80) {
		memcpy(buf + k, "...", 3);
		k += 3;
	}
	buf[k] = 0;
	return buf;
}

static inline bool bits_nonfinite(float v)
{
	uint32_t u;
	memcpy(&u, &v, sizeof(u));
	return (u & 0x7f800000u) == 0x7f800000u;
}

/* The smallest power of two >= a (a > 0), at least HIST_MAX_MIN. */
static double pow2_ceil(double a)
{
	if (a <= HIST_MAX_MIN)
		return HIST_MAX_MIN;
	int e;
	double f = frexp(a, &e);   /* a = f * 2^e, f in [0.5, 1) */
	return f == 0.5 ? a : ldexp(1.0, e);
}

/* Doubles the range k times: bin i of the result holds bins [i*2^k, (i+1)*2^k). */
static void hist_merge(uint64_t *h, int k)
{
	if (k <= 0)
		return;
	int g = k >= 11 ? B : 1 << k;
	for (int i = 0; i < B / g; i++) {
		uint64_t s = 0;
		for (int j = 0; j < g; j++)
			s += h[i * g + j];
		h[i] = s;
	}
	memset(h + B / g, 0, (size_t)(B - B / g) * sizeof(*h));
}

/*
 * |x| binned with one float multiply per element (scale = B / hist_max, a
 * power of two when the range is one: the product is exact). Long batches
 * count into four interleaved 32-bit sub-histograms, so that a run of equal
 * values (the zeros after a ReLU) does not wait on one counter's
 * read-modify-write; they are added up every 2^30 elements.
 */
static void hist_add(uint64_t *h, const float *x, uint64_t n, float scale, bool skip_nonfinite)
{
	if (n < 65536 || skip_nonfinite) {
		for (uint64_t i = 0; i < n; i++) {
			if (skip_nonfinite && bits_nonfinite(x[i]))
				continue;
			uint32_t k = (uint32_t)(fabsf(x[i]) * scale);
			h[k < B ? k : B - 1]++;
		}
		return;
	}
	uint32_t (*sub)[B] = malloc(4 * sizeof(*sub));
	if (!sub) {
		hist_add(h, x, n, scale, true);   /* the simple loop (skipping nothing that is finite) */
		return;
	}
	while (n > 0) {
		uint64_t m = n < ((uint64_t)1 << 30) ? n : (uint64_t)1 << 30;
		memset(sub, 0, 4 * sizeof(*sub));
		uint64_t i = 0;
		for (; i + 4 <= m; i += 4) {
			uint32_t k0 = (uint32_t)(fabsf(x[i]) * scale);
			uint32_t k1 = (uint32_t)(fabsf(x[i + 1]) * scale);
			uint32_t k2 = (uint32_t)(fabsf(x[i + 2]) * scale);
			uint32_t k3 = (uint32_t)(fabsf(x[i + 3]) * scale);
			sub[0][k0 < B ? k0 : B - 1]++;
			sub[1][k1 < B ? k1 : B - 1]++;
			sub[2][k2 < B ? k2 : B - 1]++;
			sub[3][k3 < B ? k3 : B - 1]++;
		}
		for (; i < m; i++) {
			uint32_t k = (uint32_t)(fabsf(x[i]) * scale);
			sub[0][k < B ? k : B - 1]++;
		}
		for (int j = 0; j < B; j++)
			h[j] += (uint64_t)sub[0][j] + sub[1][j] + sub[2][j] + sub[3][j];
		x += m;
		n -= m;
	}
	free(sub);
}

static void minmax(const float *x, uint64_t n, float *mn_out, float *mx_out, uint64_t *nonfin_out)
{
	float mn[8], mx[8];
	uint32_t nf[8];
	for (int k = 0; k < 8; k++) {
		mn[k] = INFINITY;
		mx[k] = -INFINITY;
		nf[k] = 0;
	}
	uint64_t nonfin = 0, i = 0;
	while (i + 8 <= n) {
		/* blocks of at most 2^31 elements keep the 32-bit counts from overflowing */
		uint64_t stop = n - i > ((uint64_t)1 << 31) ? i + ((uint64_t)1 << 31) : n;
		for (; i + 8 <= stop; i += 8) {
			for (int k = 0; k < 8; k++) {
				float v = x[i + k];
				uint32_t u;
				memcpy(&u, &v, sizeof(u));
				mn[k] = v < mn[k] ? v : mn[k];
				mx[k] = v > mx[k] ? v : mx[k];
				nf[k] += (u & 0x7f800000u) == 0x7f800000u;
			}
		}
		for (int k = 0; k < 8; k++) {
			nonfin += nf[k];
			nf[k] = 0;
		}
	}
	for (; i < n; i++) {
		float v = x[i];
		mn[0] = v < mn[0] ? v : mn[0];
		mx[0] = v > mx[0] ? v : mx[0];
		nonfin += bits_nonfinite(v);
	}
	for (int k = 1; k < 8; k++) {
		mn[0] = mn[k] < mn[0] ? mn[k] : mn[0];
		mx[0] = mx[k] > mx[0] ? mx[k] : mx[0];
	}
	*mn_out = mn[0];
	*mx_out = mx[0];
	*nonfin_out = nonfin;
}

/*
 * The host half of observing a batch, shared by ir_calib_observe and the
 * GPU (kernels/cuda/k_calib.c), so that both keep one definition of the
 * statistics: everything but the bin counts and the per-channel sums.
 */
int ir_calib_observe_stats(struct ir_calib_tensor *t, uint64_t n, int n_chan, uint64_t nonfinite, double min,
			   double max, struct ir_diag *d)
{
	char nb[100];
	if (n_chan < 0 || n_chan > MAX_CHAN)
		return ir_diag_err(d, IR_ERR, "calibration of '%s': %d channels", show_name(t->name ? t->name : "?", nb), n_chan);
	if (nonfinite > n)
		return ir_diag_err(d, IR_ERR, "calibration of '%s': %" PRIu64 " non-finite elements of %" PRIu64,
				   show_name(t->name ? t->name : "?", nb), nonfinite, n);
	if (n_chan > 0) {
		if (n % (uint64_t)n_chan)
			return ir_diag_err(d, IR_ERR, "calibration of '%s': %" PRIu64 " elements are not rows of %d channels",
					   show_name(t->name ? t->name : "?", nb), n, n_chan);
		if (t->n_chan == 0) {
			t->chan_abssum = calloc((size_t)n_chan, sizeof(double));
			if (!t->chan_abssum)
				return ir_diag_err(d, IR_ENOMEM, "out of memory");
			t->n_chan = n_chan;
			t->chan_rows = 0;
		} else if (t->n_chan != n_chan) {
			return ir_diag_err(d, IR_ERR, "calibration of '%s': %d channels, earlier batches had %d",
					   show_name(t->name ? t->name : "?", nb), n_chan, t->n_chan);
		}
	}
	if (!t->hist && !(t->hist = calloc(B, sizeof(*t->hist))))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	t->batches++;
	if (n == 0)
		return 0;
	uint64_t finite = n - nonfinite;
	t->n_nonfinite += nonfinite;
	if (finite == 0)
		return 0;
	double amax = fmax(fabs(min), fabs(max));
	/* the range: set by the first non-zero |x| so that the data fills
	 * more than half of it, doubled (merging bin pairs) as it grows */
	if (amax > 0) {
		if (t->hist_max <= 0) {
			t->hist_max = pow2_ceil(amax);
		} else if (amax > t->hist_max) {
			int k = 0;
			double hm = t->hist_max;
			while (amax > hm) {
				hm *= 2;
				k++;
			}
			hist_merge(t->hist, k);
			t->hist_max = hm;
		}
	}
	if (t->count == 0) {
		t->min = min;
		t->max = max;
		t->ema_min = min;
		t->ema_max = max;
	} else {
		t->min = fmin(t->min, min);
		t->max = fmax(t->max, max);
		t->ema_min += IR_CALIB_EMA * (min - t->ema_min);
		t->ema_max += IR_CALIB_EMA * (max - t->ema_max);
	}
	t->count += finite;
	return 0;
}

float ir_calib_hist_scale(const struct ir_calib_tensor *t)
{
	return t->hist_max > 0 ? (float)(B / t->hist_max) : 0.0f;
}

void ir_calib_add_hist(struct ir_calib_tensor *t, const uint64_t *bins)
{
	if (!t->hist)
		return;
	for (int i = 0; i < B; i++)
		t->hist[i] += bins[i];
}

void ir_calib_add_chan(struct ir_calib_tensor *t, const double *sums, uint64_t rows)
{
	if (t->n_chan <= 0 || !t->chan_abssum)
		return;
	for (int c = 0; c < t->n_chan; c++)
		t->chan_abssum[c] += sums[c];
	t->chan_rows += rows;
}

int ir_calib_observe(struct ir_calib_tensor *t, const float *x, uint64_t n, int n_chan, struct ir_diag *d)
{
	/* one pass: min, max and the non-finite count, in eight independent
	 * lanes (the compiler makes vector min/max of them). A NaN fails both
	 * comparisons, so it never becomes the min or max; an infinity does,
	 * and is then left out by a second pass (rare: only batches with one). */
	float mn = INFINITY, mx = -INFINITY;
	uint64_t nonfin = 0;
	if (n > 0)
		minmax(x, n, &mn, &mx, &nonfin);
	if (nonfin && (isinf(mn) || isinf(mx))) {
		mn = INFINITY;
		mx = -INFINITY;
		for (uint64_t i = 0; i < n; i++) {
			float v = x[i];
			if (bits_nonfinite(v))
				continue;
			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
		}
	}
	int rc = ir_calib_observe_stats(t, n, n_chan, nonfin, mn, mx, d);
	if (rc || n == 0)
		return rc;
	uint64_t finite = n - nonfin;
	if (finite > 0) {
		float scale = ir_calib_hist_scale(t);
		if (scale > 0)
			hist_add(t->hist, x, n, scale, nonfin > 0);
		else
			t->hist[0] += finite;   /* only zeros so far: they are in bin 0 whatever the range */
	}

	if (n_chan > 0) {
		double *s = t->chan_abssum;
		uint64_t rows = n / (uint64_t)n_chan;
		for (uint64_t r = 0; r < rows; r++) {
			const float *row = x + r * (uint64_t)n_chan;
			if (nonfin) {
				for (int c = 0; c < n_chan; c++)
					if (!bits_nonfinite(row[c]))
						s[c] += fabsf(row[c]);
			} else {
				for (int c = 0; c < n_chan; c++)
					s[c] += fabsf(row[c]);
			}
		}
		t->chan_rows += rows;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Methods                                                                   */
/* ------------------------------------------------------------------------ */

static double stat_amax(const struct ir_calib_tensor *t)
{
	return t->count ? fmax(fabs(t->min), fabs(t->max)) : 0.0;
}

/*
 * percentile=P: the smallest T with P% of the |x| seen at or below it. The
 * cumulative count reaches P/100 * N inside some bin i; the values in a
 * bin are taken as spread evenly over it, so T = (i + f) * w where f is
 * the part of bin i's count still needed, over its count, and w the bin
 * width hist_max / 2048.
 */
static double amax_percentile(const struct ir_calib_tensor *t, double pct)
{
	const uint64_t *h = t->hist;
	double total = 0;
	for (int i = 0; i < B; i++)
		total += (double)h[i];
	if (total <= 0 || t->hist_max <= 0)
		return 0;
	double target = pct / 100.0 * total;
	double w = t->hist_max / B, cum = 0;
	for (int i = 0; i < B; i++) {
		double c = (double)h[i];
		if (c > 0 && cum + c >= target) {
			double f = (target - cum) / c;
			return (i + fmin(fmax(f, 0.0), 1.0)) * w;
		}
		cum += c;
	}
	return t->hist_max;
}

static double xlogx(double x)
{
	return x > 0 ? x * log(x) : 0.0;
}

/*
 * entropy (TensorRT's int8 calibrator). For each candidate i of 128..2048
 * bins kept: P is bins 0..i-1 with every count at or above bin i (the
 * outliers O_i) added into bin i-1; Q is bins 0..i-1 of the histogram
 * (without the outliers) merged into 128 groups of m = floor(i/128) bins
 * (the last group takes the remainder), each group's total spread evenly
 * over the bins of the group where P is non-zero. The i with the smallest
 * KL(P||Q) = sum_j p_j log(p_j/q_j) (p, q normalised; bins with p_j = 0
 * add nothing, a bin with p_j > 0 and q_j = 0 makes it infinite) gives
 * T = (i + 0.5) * w, at most the largest |x| seen.
 *
 * With N = sum P (all counts) and C_i = sum Q (the counts below bin i):
 *   KL = (1/N) sum P_j log P_j - log N - (1/N) sum P_j log Q_j + log C_i
 * and Q_j = G_g / nz_g on group g (total G_g over nz_g non-zero bins), so
 *   sum P_j log Q_j = sum_g (sum of P over g) * log(G_g / nz_g).
 * The first 127 groups depend on m only (P = the histogram there), so they
 * are summed once per m; each candidate then costs a few logs, not O(i).
 */
static double amax_entropy(const struct ir_calib_tensor *t)
{
	/* counts, sum of h log h, and non-empty bins below bin j */
	double *C = malloc(2 * (B + 1) * sizeof(double)), *HL = C + B + 1;
	int *Z = malloc((B + 1) * sizeof(int));
	uint64_t *h = malloc(B * sizeof(uint64_t));
	if (!C || !Z || !h) {
		free(C);
		free(Z);
		free(h);
		return -1;
	}
	/* The first bin holds every exact zero: after a ReLU that is half the
	 * tensor, and a spike that size makes any threshold that resolves bin 0
	 * look best, so the search would clip at bin 128 whatever the tail. As
	 * NVIDIA's calibrators do, bin 0 counts as much as bin 1. */
	memcpy(h, t->hist, B * sizeof(uint64_t));
	h[0] = h[1];
	/* Data with fewer distinct magnitudes than the 128 levels (an image's
	 * 0..255 pixels, one-hot inputs, a few spikes) is already as coarse as
	 * the grid: every candidate that ends just past a spike copies P exactly,
	 * so KL would pick a threshold that saturates the rest. Such data keeps
	 * its whole range. */
	int nonempty = 0;
	for (int j = 0; j < B; j++)
		nonempty += t->hist[j] != 0;
	if (nonempty < LEVELS) {
		free(C);
		free(Z);
		free(h);
		return stat_amax(t);
	}
	C[0] = HL[0] = 0;
	Z[0] = 0;
	for (int j = 0; j < B; j++) {
		double v = (double)h[j];
		C[j + 1] = C[j] + v;
		HL[j + 1] = HL[j] + xlogx(v);
		Z[j + 1] = Z[j] + (h[j] != 0);
	}
	double N = C[B];
	/* nz <= 143: a group has at most m <= 16 bins, the last one fewer than m + 128 */
	double logn[256];
	logn[0] = 0;
	for (int k = 1; k < 256; k++)
		logn[k] = log((double)k);
	/* sum over the first 127 groups of G log(G / nz), for each m */
	double A[B / LEVELS + 1];
	for (int m = 1; m <= B / LEVELS; m++) {
		double a = 0;
		for (int g = 0; g < LEVELS - 1; g++) {
			double G = C[(g + 1) * m] - C[g * m];
			int nz = Z[(g + 1) * m] - Z[g * m];
			if (G > 0)
				a += G * (log(G) - logn[nz]);
		}
		A[m] = a;
	}
	double best = INFINITY, log_N = log(N);
	int best_i = B;
	double last_C = -1, log_C = 0;
	for (int i = LEVELS; i <= B; i++) {
		double Ci = C[i];
		if (Ci <= 0)
			continue;               /* Q empty */
		int m = i / LEVELS, start = (LEVELS - 1) * m;
		double O = N - Ci;
		double P_last = (double)h[i - 1] + O;
		double G = Ci - C[start];
		int nz = Z[i - 1] - Z[start] + (P_last > 0);
		if (G <= 0 && P_last > 0)
			continue;               /* P has mass where Q has none */
		if (Ci != last_C) {
			last_C = Ci;
			log_C = log(Ci);
		}
		double plogp = HL[i - 1] + xlogx(P_last);
		double plogq = A[m] + (G > 0 ? (G + O) * (log(G) - logn[nz]) : 0.0);
		double kl = (plogp - plogq) / N - log_N + log_C;
		if (kl <= best) {      /* ties: the widest range */
			best = kl;
			best_i = i;
		}
	}
	free(C);
	free(Z);
	free(h);
	return fmin((best_i + 0.5) * (t->hist_max / B), stat_amax(t));
}

/*
 * mse: the T minimising the expected squared error of symmetric int8 over
 * the histogram, each bin's count taken at its centre c_j = (j + 0.5) * w.
 * With step s = T / 127, a value c becomes s * clamp(round(c / s), -127,
 * 127): below T the error is the rounding error (c - q s)^2, above it the
 * saturation error (c - T)^2. Candidates are every bin edge T = k * w from
 * k = 128 up to the edge above the last non-empty bin. In bin units, the
 * bins that round to level q are the run [a_q, a_q+1) with
 * a_q = ceil(((2q - 1) k - 127) / 254) (ties round up), so with prefix
 * sums S0, S1, S2 of h, h c and h c^2 the rounding error is
 *   sum_q (S2 - 2 q s S1 + q^2 s^2 S0 over the run)
 *     = S2[k] - 2 s (127 S1[k] - sum_q S1[a_q]) + s^2 (127^2 S0[k] - sum_q (2q - 1) S0[a_q])
 * (summing by parts over q = 1..127), and the saturation error is
 * S2 - 2 T S1 + T^2 S0 over the bins from k up: a candidate costs 127
 * look-ups.
 */
static double amax_mse(const struct ir_calib_tensor *t)
{
	const uint64_t *h = t->hist;
	double *S0 = malloc(3 * (B + 1) * sizeof(double));   /* in bin units: c_j = j + 0.5 */
	if (!S0)
		return -1;
	double *S1 = S0 + B + 1, *S2 = S1 + B + 1;
	S0[0] = S1[0] = S2[0] = 0;
	int top = -1;
	for (int j = 0; j < B; j++) {
		double v = (double)h[j], c = j + 0.5;
		S0[j + 1] = S0[j] + v;
		S1[j + 1] = S1[j] + v * c;
		S2[j + 1] = S2[j] + v * c * c;
		if (h[j])
			top = j;
	}
	int kmax = top + 1 < LEVELS ? LEVELS : top + 1;
	double best = INFINITY;
	int best_k = kmax;
	for (int k = LEVELS; k <= kmax; k++) {
		double T = k, s = T / 127.0;
		double sat = (S2[B] - S2[k]) - 2 * T * (S1[B] - S1[k]) + T * T * (S0[B] - S0[k]);
		double x0 = 0, x1 = 0, y0 = 0, y1 = 0, coef = 1;
		unsigned num = (unsigned)k + 126, step = 2 * (unsigned)k;   /* (2q - 1) k + 126 for q = 1 */
		for (int q = 1; q < 127; q += 2) {
			unsigned a0 = num / 254, a1 = (num + step) / 254;
			x0 += S1[a0];
			x1 += S1[a1];
			y0 += coef * S0[a0];
			y1 += (coef + 2) * S0[a1];
			coef += 4;
			num += 2 * step;
		}
		unsigned a = num / 254;   /* q = 127 */
		x0 += S1[a];
		y0 += coef * S0[a];
		double rnd = S2[k] - 2 * s * (127 * S1[k] - (x0 + x1)) + s * s * (127.0 * 127.0 * S0[k] - (y0 + y1));
		double err = sat + fmax(rnd, 0.0);
		if (err < best) {
			best = err;
			best_k = k;
		}
	}
	free(S0);
	return fmin(best_k * (t->hist_max / B), stat_amax(t));
}

double ir_calib_amax(const struct ir_calib_tensor *t, const struct ir_calib_how *h)
{
	if (!t || !t->count)
		return 0;
	double amax = stat_amax(t);
	if (!t->hist || amax <= 0 || t->hist_max <= 0 || !h)
		return amax;
	/* below: the histogram has counts and a range; -1 is no memory (then: max) */
	double T;
	switch (h->method) {
	case IR_CALIB_PERCENTILE:
		T = amax_percentile(t, h->pct > 0 && h->pct <= 100 ? h->pct : 99.99);
		break;
	case IR_CALIB_ENTROPY:
		T = amax_entropy(t);
		break;
	case IR_CALIB_MSE:
		T = amax_mse(t);
		break;
	default:
		T = amax;
		break;
	}
	return isfinite(T) && T >= 0 ? fmin(T, amax) : amax;
}

void ir_calib_range(const struct ir_calib_tensor *t, const struct ir_calib_how *h, double *lo, double *hi)
{
	*lo = *hi = 0;
	if (!t || !t->count)
		return;
	double T = ir_calib_amax(t, h);
	*lo = fmin(fmax(t->min, -T), 0.0);
	*hi = fmax(fmin(t->max, T), 0.0);
}

int ir_calib_method_parse(const char *s, struct ir_calib_how *out, struct ir_diag *d)
{
	out->method = IR_CALIB_MAX;
	out->pct = 99.99;
	if (!s)
		s = "";
	if (!strcmp(s, "max")) {
		out->method = IR_CALIB_MAX;
	} else if (!strcmp(s, "entropy")) {
		out->method = IR_CALIB_ENTROPY;
	} else if (!strcmp(s, "mse")) {
		out->method = IR_CALIB_MSE;
	} else if (!strcmp(s, "percentile")) {
		out->method = IR_CALIB_PERCENTILE;
	} else if (!strncmp(s, "percentile=", 11)) {
		const char *v = s + 11;
		char *end;
		double p = 0;
		/* a plain decimal number: no spaces, hex, inf or nan */
		bool ok = *v && (v[0] == '.' || (v[0] >= '0' && v[0] <= '9')) && strspn(v, "0123456789.eE+-") == strlen(v);
		if (ok) {
			p = strtod(v, &end);
			ok = !*end && isfinite(p) && p > 0 && p <= 100;
		}
		if (!ok)
			return ir_diag_err(d, IR_ERR, "bad percentile '%s': expected a number in (0, 100]", v);
		out->method = IR_CALIB_PERCENTILE;
		out->pct = p;
	} else {
		return ir_diag_err(d, IR_ERR, "unknown calibration method '%s' (max, percentile=P, entropy, mse)", s);
	}
	return 0;
}

const char *ir_calib_method_name(const struct ir_calib_how *h, char *buf, size_t size)
{
	switch (h->method) {
	case IR_CALIB_PERCENTILE:
		snprintf(buf, size, "percentile=%.10g", h->pct);
		break;
	case IR_CALIB_ENTROPY:
		snprintf(buf, size, "entropy");
		break;
	case IR_CALIB_MSE:
		snprintf(buf, size, "mse");
		break;
	default:
		snprintf(buf, size, "max");
		break;
	}
	return buf;
}

/* ------------------------------------------------------------------------ */
/* The cache file: writing                                                   */
/* ------------------------------------------------------------------------ */

static void put_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\t': fputs("\\t", f); break;
		case '\r': fputs("\\r", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\x%02x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

static bool hash_valid(const char *s)
{
	size_t n = strnlen(s, 17);
	if (n == 0)
		return true;
	if (n != 16)
		return false;
	for (size_t i = 0; i < 16; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

void ir_calib_write(FILE *f, const struct ir_calib *c)
{
	fprintf(f, "ogsh-calib 1\n");
	fprintf(f, "model_hash %s\n", c->model_hash[0] ? c->model_hash : "-");
	fprintf(f, "stage %d\n", c->stage);
	fprintf(f, "data_hash %s\n", c->data_hash[0] ? c->data_hash : "-");
	fputs("data_desc ", f);
	put_quoted(f, c->data_desc);
	fprintf(f, "\nrandom %d\nsamples %" PRIu64 "\nbatch %d\ntensors %d\n", c->random ? 1 : 0, c->samples,
		c->batch, c->n);
	for (int i = 0; i < c->n; i++) {
		const struct ir_calib_tensor *t = &c->t[i];
		fputs("tensor ", f);
		put_quoted(f, t->name);
		fprintf(f, "\ncount %" PRIu64 "\nnonfinite %" PRIu64 "\nbatches %" PRIu64 "\n", t->count,
			t->n_nonfinite, t->batches);
		fprintf(f, "min %.17g\nmax %.17g\nema_min %.17g\nema_max %.17g\nhist_max %.17g\n", t->min, t->max,
			t->ema_min, t->ema_max, t->hist_max);
		int nz = 0;
		for (int j = 0; t->hist && j < B; j++)
			nz += t->hist[j] != 0;
		fprintf(f, "hist %d %d\n", B, nz);
		for (int j = 0; t->hist && j < B; j++)
			if (t->hist[j])
				fprintf(f, "%d %" PRIu64 "\n", j, t->hist[j]);
		int nc = t->chan_abssum ? t->n_chan : 0;
		fprintf(f, "channels %d %" PRIu64 "\n", nc, nc ? t->chan_rows : 0);
		for (int j = 0; j < nc; j++)
			fprintf(f, "%.17g\n", t->chan_abssum[j]);
	}
	fputs("end\n", f);
}

int ir_calib_save(const struct ir_calib *c, const char *path, struct ir_diag *d)
{
	char eb[128];
	if (!hash_valid(c->model_hash) || !hash_valid(c->data_hash))
		return ir_diag_err(d, IR_ERR, "cannot save '%s': the model or data hash is not 16 hex digits", path);
	if (strnlen(c->data_desc, sizeof(c->data_desc)) >= sizeof(c->data_desc))
		return ir_diag_err(d, IR_ERR, "cannot save '%s': the data description is not a string", path);
	for (int i = 0; i < c->n; i++) {
		const char *nm = c->t[i].name;
		if (!nm || !*nm || strlen(nm) > MAX_NAME)
			return ir_diag_err(d, IR_ERR, "cannot save '%s': tensor %d has no name or one too long", path, i);
	}
	size_t tl = strlen(path) + 32;
	char *tmp = malloc(tl);
	if (!tmp)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	snprintf(tmp, tl, "%s.tmp-%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		if (e == ENOENT)
			return ir_diag_err(d, IR_EIO, "cannot save '%s': its folder does not exist", path);
		return ir_diag_err(d, IR_EIO, "cannot save '%s': %s", path, ir_errstr(e, eb, sizeof(eb)));
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		close(fd);
		unlink(tmp);
		free(tmp);
		return ir_diag_err(d, IR_EIO, "cannot save '%s': %s", path, ir_errstr(e, eb, sizeof(eb)));
	}
	ir_calib_write(f, c);
	int err = 0;
	if (fflush(f) || ferror(f))
		err = errno ? errno : EIO;
	if (!err && fsync(fileno(f)) < 0)
		err = errno;
	if (fclose(f) && !err)
		err = errno ? errno : EIO;
	if (!err && rename(tmp, path) < 0)
		err = errno;
	if (err) {
		unlink(tmp);
		free(tmp);
		return ir_diag_err(d, IR_EIO, "cannot write '%s': %s", path, ir_errstr(err, eb, sizeof(eb)));
	}
	free(tmp);
	/* the rename is durable once the folder is synced */
	char *dir = ir_strdup(path);
	if (dir) {
		char *slash = strrchr(dir, '/');
		const char *dn = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
		int dfd = open(dn, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The cache file: reading                                                   */
/* ------------------------------------------------------------------------ */

struct tok {
	const char *s;
	size_t n;
};

struct parser {
	const char *p, *end;
	const char *name;
	int line;                  /* of the line last read */
	struct ir_diag *d;
	struct tok tk[4];
	int n_tk;                  /* tokens on the line (at most 3 kept; more counts as 4) */
};

static int perr(struct parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int perr(struct parser *P, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ir_diag_err(P->d, IR_ERR, "%s: line %d: %s", P->name, P->line, msg);
}

/* A token for messages: at most 40 bytes, non-printing bytes as '?'. */
static const char *tokstr(const struct tok *t, char *buf)
{
	size_t n = t->n < 40 ? t->n : 40, k = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)t->s[i];
		buf[k++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	if (t->n > 40) {
		memcpy(buf + k, "...", 3);
		k += 3;
	}
	buf[k] = 0;
	return buf;
}

/*
 * Reads the next line into tokens: words separated by single spaces, a
 * quoted string being one word. 0, or IR_ERR at the end of the input, on
 * a line without its newline (a truncated file), a NUL or control byte,
 * or bad spacing.
 */
static int next_line(struct parser *P, const char *what)
{
	P->line++;
	P->n_tk = 0;
	if (P->p >= P->end)
		return perr(P, "the file ends here, expected %s (truncated?)", what);
	const char *nl = memchr(P->p, '\n', (size_t)(P->end - P->p));
	if (!nl)
		return perr(P, "the line has no end (truncated?)");
	const char *s = P->p;
	P->p = nl + 1;
	if (s == nl)
		return perr(P, "empty line, expected %s", what);
	while (s < nl) {
		if (*s == ' ')
			return perr(P, "extra space");
		const char *b = s;
		if (*s == '"') {
			s++;
			while (s < nl && *s != '"') {
				if (*s == '\\' && s + 1 < nl)
					s++;
				s++;
			}
			if (s >= nl)
				return perr(P, "a string without its closing quote");
			s++;
			if (s < nl && *s != ' ')
				return perr(P, "no space after a string");
		} else {
			while (s < nl && *s != ' ') {
				unsigned char ch = (unsigned char)*s;
				if (ch < 0x20 || ch == 0x7f || ch == '"')
					return perr(P, "unexpected byte 0x%02x", ch);
				s++;
			}
		}
		if (P->n_tk < 4)
			P->tk[P->n_tk].s = b, P->tk[P->n_tk].n = (size_t)(s - b);
		if (P->n_tk < 4)
			P->n_tk++;
		if (s < nl) {
			s++;   /* the space */
			if (s == nl)
				return perr(P, "a space at the end of the line");
		}
	}
	return 0;
}

static bool tok_is(const struct tok *t, const char *s)
{
	size_t n = strlen(s);
	return t->n == n && !memcmp(t->s, s, n);
}

/* The next line must be `key` followed by `nvals` values. */
static int expect(struct parser *P, const char *key, int nvals)
{
	char what[64], b[48];
	snprintf(what, sizeof(what), "'%s'", key);
	if (next_line(P, what))
		return IR_ERR;
	if (!tok_is(&P->tk[0], key))
		return perr(P, "expected '%s', found '%s'", key, tokstr(&P->tk[0], b));
	if (P->n_tk != nvals + 1)
		return perr(P, "'%s' takes %d value%s, found %s%d", key, nvals, nvals == 1 ? "" : "s",
			    P->n_tk > 3 ? "more than " : "", P->n_tk > 3 ? 2 : P->n_tk - 1);
	return 0;
}

static int tok_u64(struct parser *P, const struct tok *t, const char *what, uint64_t max, uint64_t *out)
{
	char b[48];
	uint64_t v = 0;
	bool ok = t->n > 0 && t->n <= 20 && !(t->n > 1 && t->s[0] == '0');
	for (size_t i = 0; ok && i < t->n; i++) {
		unsigned dg = (unsigned char)t->s[i] - '0';
		if (dg > 9 || v > (UINT64_MAX - dg) / 10)
			ok = false;
		else
			v = v * 10 + dg;
	}
	if (!ok)
		return perr(P, "%s: '%s' is not a whole number", what, tokstr(t, b));
	if (v > max)
		return perr(P, "%s: %" PRIu64 " is more than %" PRIu64, what, v, max);
	*out = v;
	return 0;
}

static int tok_int(struct parser *P, const struct tok *t, const char *what, int lo, int hi, int *out)
{
	char b[48];
	bool neg = t->n > 1 && t->s[0] == '-';
	struct tok u = { t->s + neg, t->n - neg };
	uint64_t v;
	if (tok_u64(P, &u, what, (uint64_t)INT_MAX + 1, &v))
		return IR_ERR;
	int64_t x = neg ? -(int64_t)v : (int64_t)v;
	if (x < lo || x > hi)
		return perr(P, "%s: %s is out of range [%d, %d]", what, tokstr(t, b), lo, hi);
	*out = (int)x;
	return 0;
}

static int tok_double(struct parser *P, const struct tok *t, const char *what, double *out)
{
	char b[48], num[64];
	bool ok = t->n > 0 && t->n < sizeof(num);
	if (ok) {
		memcpy(num, t->s, t->n);
		num[t->n] = 0;
		/* decimal only: no hex floats, inf or nan spelled out */
		for (size_t i = 0; i < t->n; i++)
			if (!strchr("0123456789+-.eE", num[i]))
				ok = false;
	}
	if (ok) {
		char *end;
		errno = 0;
		double v = strtod(num, &end);
		ok = end == num + t->n && isfinite(v);
		*out = v;
	}
	if (!ok)
		return perr(P, "%s: '%s' is not a finite number", what, tokstr(t, b));
	return 0;
}

/* A quoted string into out (NUL-terminated, at most cap-1 bytes). */
static int tok_string(struct parser *P, const struct tok *t, const char *what, char *out, size_t cap)
{
	if (t->n < 2 || t->s[0] != '"' || t->s[t->n - 1] != '"')
		return perr(P, "%s: expected a string in double quotes", what);
	size_t k = 0;
	for (size_t i = 1; i + 1 < t->n; i++) {
		unsigned char ch = (unsigned char)t->s[i];
		if (ch == '\\') {
			if (i + 2 >= t->n)
				return perr(P, "%s: a lone backslash at the end", what);
			char e = t->s[++i];
			if (e == 'n') ch = '\n';
			else if (e == 't') ch = '\t';
			else if (e == 'r') ch = '\r';
			else if (e == '\\' || e == '"') ch = (unsigned char)e;
			else if (e == 'x') {
				int v = 0;
				for (int j = 0; j < 2; j++) {
					if (i + 2 >= t->n)
						return perr(P, "%s: \\x needs two hex digits", what);
					char hd = t->s[++i];
					int dv = hd >= '0' && hd <= '9' ? hd - '0' : hd >= 'a' && hd <= 'f' ? hd - 'a' + 10 :
						 hd >= 'A' && hd <= 'F' ? hd - 'A' + 10 : -1;
					if (dv < 0)
						return perr(P, "%s: \\x needs two hex digits", what);
					v = v * 16 + dv;
				}
				if (v == 0)
					return perr(P, "%s: a NUL byte (\\x00)", what);
				ch = (unsigned char)v;
			} else {
				return perr(P, "%s: unknown escape '\\%c'", what, e >= 0x20 && e < 0x7f ? e : '?');
			}
		} else if (ch < 0x20 || ch == 0x7f) {
			return perr(P, "%s: a control byte in a string", what);
		}
		if (k + 1 >= cap)
			return perr(P, "%s: longer than %zu bytes", what, cap - 1);
		out[k++] = (char)ch;
	}
	out[k] = 0;
	return 0;
}

static int tok_hash(struct parser *P, const struct tok *t, const char *what, char out[17])
{
	char b[48];
	if (tok_is(t, "-")) {
		out[0] = 0;
		return 0;
	}
	bool ok = t->n == 16;
	for (size_t i = 0; ok && i < 16; i++)
		ok = (t->s[i] >= '0' && t->s[i] <= '9') || (t->s[i] >= 'a' && t->s[i] <= 'f');
	if (!ok)
		return perr(P, "%s: '%s' is not 16 lowercase hex digits", what, tokstr(t, b));
	memcpy(out, t->s, 16);
	out[16] = 0;
	return 0;
}

/* Whether a and b agree to rounding (for values derived from each other). */
static bool within(double x, double lo, double hi)
{
	double slack = 1e-9 * fmax(fabs(lo), fabs(hi));
	return x >= lo - slack && x <= hi + slack;
}

static int parse_tensor(struct parser *P, struct ir_calib *c, struct ir_map *seen, char *name)
{
	char b[48];
	if (expect(P, "tensor", 1) || tok_string(P, &P->tk[1], "tensor name", name, MAX_NAME + 1))
		return IR_ERR;
	if (!name[0])
		return perr(P, "a tensor with an empty name");
	char nb[100];
	const char *shown = show_name(name, nb);
	intptr_t first = (intptr_t)ir_map_get(seen, name);
	if (first)
		return perr(P, "tensor '%s' appears twice (first on line %ld)", shown, (long)first);
	int line = P->line;
	struct ir_calib_tensor *t = append_tensor(c, name);   /* not there: `seen` says so */
	if (!t)
		return ir_diag_err(P->d, IR_ENOMEM, "out of memory");
	if (ir_map_put(seen, t->name, (void *)(intptr_t)line))
		return ir_diag_err(P->d, IR_ENOMEM, "out of memory");
	const uint64_t big = (uint64_t)1 << 62;
	if (expect(P, "count", 1) || tok_u64(P, &P->tk[1], "count", big, &t->count) ||
	    expect(P, "nonfinite", 1) || tok_u64(P, &P->tk[1], "nonfinite", big, &t->n_nonfinite) ||
	    expect(P, "batches", 1) || tok_u64(P, &P->tk[1], "batches", big, &t->batches) ||
	    expect(P, "min", 1) || tok_double(P, &P->tk[1], "min", &t->min) ||
	    expect(P, "max", 1) || tok_double(P, &P->tk[1], "max", &t->max) ||
	    expect(P, "ema_min", 1) || tok_double(P, &P->tk[1], "ema_min", &t->ema_min) ||
	    expect(P, "ema_max", 1) || tok_double(P, &P->tk[1], "ema_max", &t->ema_max) ||
	    expect(P, "hist_max", 1) || tok_double(P, &P->tk[1], "hist_max", &t->hist_max))
		return IR_ERR;
	if (t->count + t->n_nonfinite > 0 && t->batches == 0)
		return perr(P, "tensor '%s' has values but no batches", shown);
	if (t->count == 0) {
		if (t->min != 0 || t->max != 0 || t->ema_min != 0 || t->ema_max != 0 || t->hist_max != 0)
			return perr(P, "tensor '%s' has no finite values but a range", shown);
	} else {
		if (t->min > t->max)
			return perr(P, "tensor '%s': min %g is above max %g", shown, t->min, t->max);
		if (!within(t->ema_min, t->min, t->max) || !within(t->ema_max, t->min, t->max))
			return perr(P, "tensor '%s': a moving average outside [min, max]", shown);
		if (t->hist_max < 0 || t->hist_max > 0x1p128 || (t->hist_max > 0 && t->hist_max < HIST_MAX_MIN / 2))
			return perr(P, "tensor '%s': hist_max %g is out of range", shown, t->hist_max);
		if (t->hist_max < fmax(fabs(t->min), fabs(t->max)))
			return perr(P, "tensor '%s': hist_max %g is below the largest |x| %g", shown, t->hist_max,
				    fmax(fabs(t->min), fabs(t->max)));
	}

	uint64_t bins, nz;
	if (expect(P, "hist", 2) || tok_u64(P, &P->tk[1], "bins", UINT64_MAX, &bins))
		return IR_ERR;
	if (bins != B)
		return perr(P, "histogram of '%s' has %" PRIu64 " bins, expected %d", shown, bins, B);
	if (tok_u64(P, &P->tk[2], "non-empty bins", B, &nz))
		return IR_ERR;
	uint64_t total = 0;
	int prev = -1;
	for (uint64_t k = 0; k < nz; k++) {
		uint64_t idx, cnt;
		if (next_line(P, "a histogram bin"))
			return IR_ERR;
		if (P->n_tk != 2)
			return perr(P, "histogram of '%s': expected 'BIN COUNT' (%" PRIu64 " of %" PRIu64 ")", shown, k + 1, nz);
		if (tok_u64(P, &P->tk[0], "bin", B - 1, &idx) || tok_u64(P, &P->tk[1], "bin count", big, &cnt))
			return IR_ERR;
		if ((int)idx <= prev)
			return perr(P, "histogram of '%s': bin %" PRIu64 " after bin %d (bins must increase)", shown, idx, prev);
		if (cnt == 0)
			return perr(P, "histogram of '%s': bin %" PRIu64 " is listed with count 0", shown, idx);
		total += cnt;
		if (total > big)
			return perr(P, "histogram of '%s': the counts add up to too much", shown);
		t->hist[idx] = cnt;
		prev = (int)idx;
	}
	if (total != t->count)
		return perr(P, "histogram of '%s' holds %" PRIu64 " values, its count is %" PRIu64, shown, total, t->count);
	if (t->count > 0) {
		double amax = fmax(fabs(t->min), fabs(t->max));
		if (t->hist_max == 0) {
			if (amax != 0 || prev != 0)
				return perr(P, "histogram of '%s' has no range but values other than 0", shown);
		} else {
			/* the top bin must be the one that holds the largest |x| */
			double at = amax / t->hist_max * B;
			if (prev == B - 1 ? at < B - 1 - 0.01 : !(at >= prev - 0.01 && at <= prev + 1.01))
				return perr(P, "histogram of '%s': its top bin %d does not hold the largest |x| %g (bin %.0f)",
					    shown, prev, amax, floor(at));
		}
	}

	uint64_t nc, rows;
	if (expect(P, "channels", 2) || tok_u64(P, &P->tk[1], "channels", MAX_CHAN, &nc) ||
	    tok_u64(P, &P->tk[2], "rows", big, &rows))
		return IR_ERR;
	if (nc == 0 && rows != 0)
		return perr(P, "tensor '%s': %" PRIu64 " rows of no channels", shown, rows);
	if (nc > 0) {
		uint64_t cells;
		if (ir_mul_overflow(nc, rows, &cells) || cells > t->count + t->n_nonfinite)
			return perr(P, "tensor '%s': %" PRIu64 " rows of %" PRIu64 " channels is more than the %" PRIu64 " values seen",
				    shown, rows, nc, t->count + t->n_nonfinite);
		/* each sum takes a line of at least two bytes: refuse a count the rest of the file cannot hold */
		if (nc > (uint64_t)(P->end - P->p) / 2)
			return perr(P, "tensor '%s': %" PRIu64 " channels, the file is shorter than that (truncated?)", shown, nc);
		t->chan_abssum = calloc((size_t)nc, sizeof(double));
		if (!t->chan_abssum)
			return ir_diag_err(P->d, IR_ENOMEM, "out of memory");
		t->n_chan = (int)nc;
		t->chan_rows = rows;
		for (uint64_t k = 0; k < nc; k++) {
			if (next_line(P, "a channel sum"))
				return IR_ERR;
			if (P->n_tk != 1)
				return perr(P, "tensor '%s': expected one channel sum, found '%s'", shown, tokstr(&P->tk[0], b));
			if (tok_double(P, &P->tk[0], "channel sum", &t->chan_abssum[k]))
				return IR_ERR;
			if (t->chan_abssum[k] < 0)
				return perr(P, "tensor '%s': a negative sum of |x|", shown);
			if (rows == 0 && t->chan_abssum[k] != 0)
				return perr(P, "tensor '%s': a channel sum over no rows", shown);
		}
	}
	return 0;
}

static int parse(struct parser *P, struct ir_calib *c)
{
	char b[48];
	/* a file of something else is named so before any other complaint */
	size_t k = (size_t)(P->end - P->p) < 11 ? (size_t)(P->end - P->p) : 11;
	if (memcmp(P->p, "ogsh-calib ", k) && !(k == 11 && !memcmp(P->p, "ogsh-calib\n", 11))) {
		struct tok t0 = { P->p, 0 };
		while (t0.n < 16 && P->p + t0.n < P->end && P->p[t0.n] != '\n')
			t0.n++;
		P->line = 1;
		return perr(P, "not an ogsh calibration cache (it starts '%s')", tokstr(&t0, b));
	}
	if (next_line(P, "'ogsh-calib 1'"))
		return IR_ERR;
	if (!tok_is(&P->tk[0], "ogsh-calib"))
		return perr(P, "not an ogsh calibration cache (it starts '%s')", tokstr(&P->tk[0], b));
	if (P->n_tk != 2 || !tok_is(&P->tk[1], "1"))
		return perr(P, "unsupported calibration cache version '%s' (this ogsh reads 1)",
			    P->n_tk >= 2 ? tokstr(&P->tk[1], b) : "");
	uint64_t n;
	int rnd;
	if (expect(P, "model_hash", 1) || tok_hash(P, &P->tk[1], "model_hash", c->model_hash) ||
	    expect(P, "stage", 1) || tok_int(P, &P->tk[1], "stage", -1, INT_MAX, &c->stage) ||
	    expect(P, "data_hash", 1) || tok_hash(P, &P->tk[1], "data_hash", c->data_hash) ||
	    expect(P, "data_desc", 1) || tok_string(P, &P->tk[1], "data_desc", c->data_desc, sizeof(c->data_desc)) ||
	    expect(P, "random", 1) || tok_int(P, &P->tk[1], "random", 0, 1, &rnd) ||
	    expect(P, "samples", 1) || tok_u64(P, &P->tk[1], "samples", (uint64_t)1 << 62, &c->samples) ||
	    expect(P, "batch", 1) || tok_int(P, &P->tk[1], "batch", 0, INT_MAX, &c->batch) ||
	    expect(P, "tensors", 1) || tok_u64(P, &P->tk[1], "tensors", INT_MAX, &n))
		return IR_ERR;
	c->random = rnd != 0;
	struct ir_map *seen = ir_map_new(16);
	char *name = malloc(MAX_NAME + 1);
	int rc = seen && name ? 0 : ir_diag_err(P->d, IR_ENOMEM, "out of memory");
	for (uint64_t i = 0; !rc && i < n; i++)
		rc = parse_tensor(P, c, seen, name);
	ir_map_free(seen);
	free(name);
	if (rc)
		return rc;
	if (next_line(P, "'end'"))
		return IR_ERR;
	if (!tok_is(&P->tk[0], "end") || P->n_tk != 1)
		return perr(P, "expected 'end' after %" PRIu64 " tensors, found '%s'", n, tokstr(&P->tk[0], b));
	if (P->p != P->end) {
		P->line++;
		return perr(P, "more after 'end'");
	}
	return 0;
}

int ir_calib_parse(const void *buf, size_t n, const char *name, struct ir_calib *c, struct ir_diag *d)
{
	ir_calib_init(c);
	struct parser P = { .p = buf, .end = (const char *)buf + n, .name = name ? name : "calibration cache", .d = d };
	if (!buf)
		P.p = P.end = "";
	int rc = parse(&P, c);
	if (rc) {
		ir_calib_clear(c);
		if (d && !d->error)
			ir_diag_err(d, rc, "%s: cannot read the calibration cache", P.name);
	}
	return rc;
}

int ir_calib_load(const char *path, struct ir_calib *c, struct ir_diag *d)
{
	char eb[128];
	ir_calib_init(c);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ir_diag_err(d, IR_EIO, "cannot open '%s': %s", path, ir_errstr(errno, eb, sizeof(eb)));
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return ir_diag_err(d, IR_EIO, "cannot read '%s': %s", path, ir_errstr(e, eb, sizeof(eb)));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return ir_diag_err(d, IR_ERR, "cannot read '%s': %s", path,
				   S_ISDIR(st.st_mode) ? "it is a folder" : "not a regular file");
	}
	if ((uint64_t)st.st_size > MAX_FILE) {
		close(fd);
		return ir_diag_err(d, IR_ERR, "cannot read '%s': %lld bytes is too large for a calibration cache", path,
				   (long long)st.st_size);
	}
	size_t size = (size_t)st.st_size, got = 0;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		close(fd);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	while (got < size) {
		ssize_t k = read(fd, buf + got, size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return ir_diag_err(d, IR_EIO, "cannot read '%s': %s", path, ir_errstr(e, eb, sizeof(eb)));
		}
		if (k == 0)
			break;   /* shrank under us: what was read is parsed (and refused as truncated) */
		got += (size_t)k;
	}
	close(fd);
	int rc = ir_calib_parse(buf, got, path, c, d);
	free(buf);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* The model's content hash                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Everything that decides what the model computes and what its values are
 * called goes in, each item behind a tag and strings behind their length,
 * so that no two different models give the same byte stream: opsets, the
 * model functions, and for the graph and every subgraph its inputs and
 * outputs (names and types), initializers (names, dtypes, dims, bytes) and
 * nodes in order (op, domain, overload, name, inputs, outputs, attributes).
 * Doc strings, metadata and node ids are left out: they change nothing.
 */
static uint64_t hu(uint64_t h, uint64_t v)
{
	return ir_hash_bytes(h, &v, sizeof(v));
}

static uint64_t hs(uint64_t h, const char *s)
{
	if (!s)
		return hu(h, UINT64_MAX);
	size_t n = strlen(s);
	return ir_hash_bytes(hu(h, n), s, n);
}

static uint64_t h_type(uint64_t h, const struct ir_type *t, int depth)
{
	if (!t || depth > 64)
		return hu(h, 0xfe);
	h = hu(h, (uint64_t)t->kind);
	h = hu(h, (uint64_t)t->elem);
	h = hu(h, (uint64_t)(int64_t)t->rank);
	for (int i = 0; i < t->rank && t->dims; i++) {
		const struct ir_dim *dm = &t->dims[i];
		h = hu(h, (uint64_t)dm->kind);
		if (dm->kind == IR_DIM_VALUE)
			h = hu(h, (uint64_t)dm->value);
		else if (dm->kind == IR_DIM_PARAM)
			h = hs(h, dm->param);
	}
	h = hu(h, (uint64_t)t->key);
	return h_type(h, t->inner, depth + 1);
}

static uint64_t h_tensor(uint64_t h, const struct ir_tensor *t)
{
	if (!t)
		return hu(h, 0xfd);
	h = hu(h, (uint64_t)t->dtype);
	h = hu(h, (uint64_t)t->rank);
	for (int i = 0; i < t->rank; i++)
		h = hu(h, (uint64_t)t->dims[i]);
	if (t->dtype == IR_STRING) {
		for (uint64_t i = 0; t->strings && i < t->numel; i++) {
			h = hu(h, t->strings[i].len);
			h = ir_hash_bytes(h, t->strings[i].data, t->strings[i].len);
		}
		return h;
	}
	const void *p = ir_tensor_data(t);
	h = hu(h, p ? t->nbytes : 0);
	return p ? ir_hash_bytes(h, p, t->nbytes) : h;
}

static uint64_t h_sparse(uint64_t h, const struct ir_sparse *s)
{
	if (!s)
		return hu(h, 0xfc);
	h = h_tensor(h, s->values);
	h = h_tensor(h, s->indices);
	h = hu(h, (uint64_t)s->rank);
	for (int i = 0; i < s->rank && s->dims; i++)
		h = hu(h, (uint64_t)s->dims[i]);
	return h;
}

static uint64_t h_graph(uint64_t h, const struct ir_graph *g, int depth);

static uint64_t h_attr(uint64_t h, const struct ir_attr *a, int depth)
{
	h = hs(h, a->name);
	h = hu(h, (uint64_t)a->type);
	h = hs(h, a->ref_attr_name);
	uint32_t fb;
	switch (a->type) {
	case IR_ATTR_FLOAT:
		memcpy(&fb, &a->f, sizeof(fb));
		return hu(h, fb);
	case IR_ATTR_INT:
		return hu(h, (uint64_t)a->i);
	case IR_ATTR_STRING:
		return ir_hash_bytes(hu(h, a->s.len), a->s.data, a->s.len);
	case IR_ATTR_TENSOR:
		return h_tensor(h, a->t);
	case IR_ATTR_GRAPH:
		return h_graph(h, a->g, depth + 1);
	case IR_ATTR_SPARSE_TENSOR:
		return h_sparse(h, a->sp);
	case IR_ATTR_TYPE_PROTO:
		return h_type(h, a->tp, 0);
	default:
		break;
	}
	h = hu(h, a->n);
	for (size_t i = 0; i < a->n; i++) {
		switch (a->type) {
		case IR_ATTR_FLOATS:
			memcpy(&fb, &a->floats[i], sizeof(fb));
			h = hu(h, fb);
			break;
		case IR_ATTR_INTS:
			h = hu(h, (uint64_t)a->ints[i]);
			break;
		case IR_ATTR_STRINGS:
			h = ir_hash_bytes(hu(h, a->strings[i].len), a->strings[i].data, a->strings[i].len);
			break;
		case IR_ATTR_TENSORS:
			h = h_tensor(h, a->tensors[i]);
			break;
		case IR_ATTR_GRAPHS:
			h = h_graph(h, a->graphs[i], depth + 1);
			break;
		case IR_ATTR_SPARSE_TENSORS:
			h = h_sparse(h, a->sparses[i]);
			break;
		case IR_ATTR_TYPE_PROTOS:
			h = h_type(h, &a->tps[i], 0);
			break;
		default:
			break;
		}
	}
	return h;
}

static uint64_t h_value_name(uint64_t h, const struct ir_value *v)
{
	return v ? hs(h, v->name) : hu(h, UINT64_MAX - 1);   /* an omitted input or output */
}

static uint64_t h_graph(uint64_t h, const struct ir_graph *g, int depth)
{
	if (!g || depth > 1000)
		return hu(h, 0xfb);
	h = hu(h, 0x67726170680a);   /* "graph" */
	h = hu(h, (uint64_t)g->n_inputs);
	for (int i = 0; i < g->n_inputs; i++) {
		h = h_value_name(h, g->inputs[i]);
		h = h_type(h, g->inputs[i] ? &g->inputs[i]->type : NULL, 0);
	}
	h = hu(h, (uint64_t)g->n_outputs);
	for (int i = 0; i < g->n_outputs; i++) {
		h = h_value_name(h, g->outputs[i]);
		h = h_type(h, g->outputs[i] ? &g->outputs[i]->type : NULL, 0);
	}
	h = hu(h, (uint64_t)g->n_inits);
	for (int i = 0; i < g->n_inits; i++) {
		h = h_value_name(h, g->inits[i]);
		h = h_tensor(h, g->inits[i] ? g->inits[i]->init : NULL);
	}
	h = hu(h, (uint64_t)g->n_sparse_inits);
	for (int i = 0; i < g->n_sparse_inits; i++) {
		h = h_value_name(h, g->sparse_inits[i]);
		h = h_sparse(h, g->sparse_inits[i] ? g->sparse_inits[i]->sparse_init : NULL);
	}
	h = hu(h, (uint64_t)g->n_nodes);
	ir_for_each_node(g, n) {
		h = hs(h, n->op_type);
		h = hs(h, n->domain && strcmp(n->domain, "ai.onnx") ? n->domain : "");
		h = hs(h, n->overload);
		h = hs(h, n->name);
		h = hu(h, (uint64_t)n->n_inputs);
		for (int i = 0; i < n->n_inputs; i++)
			h = h_value_name(h, n->inputs[i]);
		h = hu(h, (uint64_t)n->n_outputs);
		for (int i = 0; i < n->n_outputs; i++)
			h = h_value_name(h, n->outputs[i]);
		h = hu(h, (uint64_t)n->n_attrs);
		for (int i = 0; i < n->n_attrs; i++)
			h = h_attr(h, &n->attrs[i], depth);
	}
	return h;
}

void ir_model_hash(const struct ir_model *m, char out[17])
{
	uint64_t h = IR_HASH_SEED;
	h = hu(h, (uint64_t)m->ir_version);
	h = hu(h, m->n_opsets);
	for (size_t i = 0; i < m->n_opsets; i++) {
		const char *dom = m->opsets[i].domain;
		h = hs(h, dom && strcmp(dom, "ai.onnx") ? dom : "");
		h = hu(h, (uint64_t)m->opsets[i].version);
	}
	h = hu(h, m->n_functions);
	for (size_t i = 0; i < m->n_functions; i++) {
		const struct ir_function *f = &m->functions[i];
		h = hs(h, f->name);
		h = hs(h, f->domain);
		h = hs(h, f->overload);
		h = hu(h, f->n_attr_names);
		for (size_t k = 0; k < f->n_attr_names; k++)
			h = hs(h, f->attr_names[k]);
		h = hu(h, f->n_attr_defaults);
		for (size_t k = 0; k < f->n_attr_defaults; k++)
			h = h_attr(h, &f->attr_defaults[k], 0);
		h = hu(h, f->n_opsets);
		for (size_t k = 0; k < f->n_opsets; k++) {
			h = hs(h, f->opsets[k].domain);
			h = hu(h, (uint64_t)f->opsets[k].version);
		}
		h = h_graph(h, f->body, 0);
	}
	h = h_graph(h, m->graph, 0);
	/* a final mix (murmur3's), so that every bit of the state reaches every digit */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	snprintf(out, 17, "%016" PRIx64, h);
}
