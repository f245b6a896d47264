/*
 * test_qconv.c - the int8/FP8 implicit-GEMM convolution and GEMM of
 * kernels/cuda/k_qconv.cu (kqc_*) against a host reference: every variant
 * of every case, then the fastest variant timed.
 *
 * The reference computes each output's accumulator exactly (int8: an
 * integer sum; FP8: a double sum and the sum of |products|, the GPU's
 * float accumulation is allowed 2^-12 of that), then k_qepi.h's kqe_value
 * at the accumulator's bounds, widened by a few float roundings (the GPU
 * may fuse multiplies and adds); the output must lie between the stored
 * (quantized, rounded) values of the two bounds. Cases marked exact (a
 * power-of-two scale and nothing else: every value and tie representable)
 * get no widening: round half to even is checked bit for bit. Outputs are
 * poisoned before each run, and a guard after y must stay untouched.
 * Large cases are checked at 20000 random elements plus the first and last
 * 256, others everywhere.
 *
 * Prints one line per failing (case, variant) with the first wrong element,
 * a timing line per case (median of 20 runs of each variant after 3 warm-up
 * runs, the fastest kept, achieved TOPS = 2 * M * N * K / time), and
 * "N cases, N failed". Also checks kqc_supported's refusals (these need no
 * GPU). Exit status: 0 all passed, 1 a failure, 77 (skip) without a GPU.
 */
#include "kernels/cuda/k_qconv.h"
#include "tests/gpu/gpu_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

static int n_cases, n_failed, checks_failed;

#define CHECK(c) do { if (!(c)) { checks_failed++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

/* uniform in [lo, hi) */
static float frand(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f;
}

static struct kq_f8fmt fmt_e4m3(void)
{
	struct kq_f8fmt f;
	kq_f8_format(KQ_F8E4M3FN, &f);
	return f;
}

/* binary16 through the same generic encoder (round half to even, inf beyond range) */
static float round_half(float v)
{
	struct kq_f8fmt h = { 5, 10, 15, 0x7bff, 0x7e00, true, false, false };
	float scratch = 0;
	uint16_t code = (uint16_t)kq_f8_encode(&h, v, false);
	memcpy(&scratch, &code, 2);
	return kqe_load(&scratch, 0, KQ_FLOAT16);
}

static size_t dt_size(int dt)
{
	switch (dt) {
	case KQ_FLOAT: return 4;
	case KQ_FLOAT16: case KQ_BFLOAT16: return 2;
	default: return 1;
	}
}

static const char *dt_name(int dt)
{
	switch (dt) {
	case KQ_INT8: return "i8";
	case KQ_UINT8: return "u8";
	case KQ_F8E4M3FN: return "e4m3";
	case KQ_FLOAT: return "f32";
	case KQ_FLOAT16: return "f16";
	case KQ_BFLOAT16: return "bf16";
	default: return "-";
	}
}

/* ---- cases ---- */

struct tcase {
	char name[160];
	struct kqc_conv p;
	bool beta;
	bool exact;    /* alpha a power of two, no beta, no residual */
	bool timed;    /* print TOPS prominently */
};

/* A conv case with symmetric pads (pad_b: the bottom/right pads; -1 the same as top/left). */
static struct tcase conv(int xdt, int n, int hw, int c, int k, int rs, int stride, int pad, int dil, int groups,
			 int ydt, int act, int zdt, bool beta)
{
	struct tcase t;
	memset(&t, 0, sizeof t);
	struct kqc_conv *p = &t.p;
	p->xdt = xdt;
	p->n = n;
	p->h = p->w = hw;
	p->c = c;
	p->k = k;
	p->r = p->s = rs;
	p->groups = groups;
	p->pad_h = p->pad_w = pad;
	p->stride_h = p->stride_w = stride;
	p->dil_h = p->dil_w = dil;
	p->p = p->q = (hw + 2 * pad - dil * (rs - 1) - 1) / stride + 1;
	p->e.ydt = ydt;
	p->e.act = act;
	if (act == KQE_ACT_CLIP) {
		p->e.act0 = -30.0f;
		p->e.act1 = 50.0f;
	}
	if (ydt == KQ_UINT8)
		p->e.yzp = 128.0f;
	p->e.zdt = zdt;
	p->e.zscale = zdt ? 0.7f : 0.0f;
	t.beta = beta;
	snprintf(t.name, sizeof t.name, "%s n%d %dx%dx%d->%d %dx%d s%d p%d d%d g%d y%s act%d z%s%s",
		 xdt == KQ_INT8 ? "i8" : "e4m3", n, hw, hw, c, k, rs, rs, stride, pad, dil, groups, dt_name(ydt), act,
		 dt_name(zdt), beta ? " beta" : "");
	return t;
}

/* GEMM [M,K]x[K,N] as a 1x1 conv */
static struct tcase gemm(int xdt, int M, int K, int N, int ydt, int act, int zdt, bool beta)
{
	struct tcase t = conv(xdt, M, 1, K, N, 1, 1, 0, 1, 1, ydt, act, zdt, beta);
	snprintf(t.name, sizeof t.name, "%s gemm M%d K%d N%d y%s act%d z%s%s", xdt == KQ_INT8 ? "i8" : "e4m3", M, K, N,
		 dt_name(ydt), act, dt_name(zdt), beta ? " beta" : "");
	return t;
}

/* ---- the reference ---- */

struct expect {
	long long idx;
	float lo, hi;   /* bounds of the value before the store */
	float mid;      /* the value from the exact accumulator */
};

struct data {
	int8_t *x, *w;        /* host (FP8: codes) */
	float *alpha, *beta;
	void *z;
	float lut[256];
};

/* The accumulator of output (m, ch): exact for int8 (as the GPU's float of it), a double sum and |sum| for FP8. */
static void ref_acc(const struct kqc_conv *p, const struct data *d, long long m, int ch, double *acc, double *absum)
{
	int cg = p->c / p->groups, kg = p->k / p->groups, grp = ch / kg;
	int ow = (int)(m % p->q), oh = (int)(m / p->q % p->p), nb = (int)(m / ((long long)p->q * p->p));
	long long isum = 0;
	double fsum = 0, fabsum = 0;
	for (int r = 0; r < p->r; r++) {
		int ih = oh * p->stride_h - p->pad_h + r * p->dil_h;
		if (ih < 0 || ih >= p->h)
			continue;
		for (int s = 0; s < p->s; s++) {
			int iw = ow * p->stride_w - p->pad_w + s * p->dil_w;
			if (iw < 0 || iw >= p->w)
				continue;
			const int8_t *xr = d->x + (((long long)nb * p->h + ih) * p->w + iw) * p->c + (long long)grp * cg;
			const int8_t *wr = d->w + (((long long)ch * p->r + r) * p->s + s) * cg;
			if (p->xdt == KQ_INT8) {
				for (int c = 0; c < cg; c++)
					isum += (int)xr[c] * (int)wr[c];
			} else {
				for (int c = 0; c < cg; c++) {
					double pr = (double)d->lut[(uint8_t)xr[c]] * d->lut[(uint8_t)wr[c]];
					fsum += pr;
					fabsum += fabs(pr);
				}
			}
		}
	}
	if (p->xdt == KQ_INT8) {
		*acc = (double)(float)(int32_t)isum;
		*absum = 0;
	} else {
		*acc = fsum;
		*absum = fabsum;
	}
}

static void ref_one(const struct tcase *t, const struct data *d, long long idx, struct expect *ex)
{
	const struct kqc_conv *p = &t->p;
	int ch = (int)(idx % p->k);
	long long m = idx / p->k;
	double acc, absum;
	ref_acc(p, d, m, ch, &acc, &absum);
	float a = d->alpha[ch], b = d->beta ? d->beta[ch] : 0.0f;
	float zv = p->e.zdt ? kqe_load(d->z, idx, p->e.zdt) : 0.0f;
	double tol = absum * (1.0 / 4096.0);
	/* the value before the activation at both ends of the accumulator's range */
	struct kqe_params lin = p->e;
	lin.act = KQE_ACT_NONE;
	float vlo = kqe_value(&lin, (float)(acc - tol), a, b, zv);
	float vhi = kqe_value(&lin, (float)(acc + tol), a, b, zv);
	if (vlo > vhi) {
		float tmp = vlo;
		vlo = vhi;
		vhi = tmp;
	}
	/* the GPU may fuse acc * a + b and the residual's multiply-add: allow a few roundings */
	float mag = fabsf((float)acc * a) + fabsf(b) + fabsf(p->e.zscale * zv);
	float eps = t->exact ? 0.0f : mag * 0x1p-20f + 1e-30f;
	ex->idx = idx;
	ex->lo = kqe_act(&p->e, vlo - eps);   /* the activation is monotone */
	ex->hi = kqe_act(&p->e, vhi + eps);
	ex->mid = kqe_value(&p->e, (float)acc, a, b, zv);
}

/* Whether stored value got (element i of y) is within the bounds; *want the expected store of mid. */
static bool ok_value(const struct kqe_params *e, const void *y, long long i, const struct expect *ex, float *got,
		     float *want)
{
	*got = kqe_load(y, i, e->ydt);
	switch (e->ydt) {
	case KQ_INT8:
	case KQ_UINT8:
	case KQ_F8E4M3FN: {
		float blo = 0, bhi = 0, bmid = 0;   /* scratch of a float's size: the store writes one byte */
		kqe_store(e, &blo, 0, ex->lo);
		kqe_store(e, &bhi, 0, ex->hi);
		kqe_store(e, &bmid, 0, ex->mid);
		float lo = kqe_load(&blo, 0, e->ydt), hi = kqe_load(&bhi, 0, e->ydt);
		*want = kqe_load(&bmid, 0, e->ydt);
		return *got >= lo && *got <= hi;
	}
	case KQ_FLOAT16: {
		*want = round_half(ex->mid);
		return *got >= round_half(ex->lo) && *got <= round_half(ex->hi);
	}
	default:
		*want = ex->mid;
		return *got >= ex->lo && *got <= ex->hi;
	}
}

/* ---- GPU ---- */

#define CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

static cudaStream_t stream;

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static void fill_x8(int xdt, int8_t *v, long long n, float lo, float hi)
{
	struct kq_f8fmt f = fmt_e4m3();
	for (long long i = 0; i < n; i++)
		v[i] = xdt == KQ_INT8 ? (int8_t)(rnd() & 0xff) : (int8_t)kq_f8_encode(&f, frand(lo, hi), true);
}

static void run_case(struct tcase *t)
{
	struct kqc_conv p = t->p;
	char why[160];
	n_cases++;
	if (!kqc_supported(&p, why, sizeof why)) {
		printf("FAIL %s: unsupported: %s\n", t->name, why);
		n_failed++;
		return;
	}
	int cg = p.c / p.groups;
	long long M = (long long)p.n * p.p * p.q, kred = (long long)p.r * p.s * cg;
	long long nx = (long long)p.n * p.h * p.w * p.c, nw = (long long)p.k * kred, ny = M * p.k;
	size_t ysz = dt_size(p.e.ydt), guard = 256;

	struct data d;
	memset(&d, 0, sizeof d);
	struct kq_f8fmt f8 = fmt_e4m3();
	for (int i = 0; i < 256; i++)
		d.lut[i] = kq_f8_decode(&f8, (uint32_t)i);
	d.x = malloc((size_t)nx);
	d.w = malloc((size_t)nw);
	d.alpha = malloc(sizeof(float) * p.k);
	d.beta = t->beta ? malloc(sizeof(float) * p.k) : NULL;
	d.z = p.e.zdt ? malloc((size_t)ny * dt_size(p.e.zdt)) : NULL;
	void *yh = malloc((size_t)ny * ysz + guard);
	if (!d.x || !d.w || !d.alpha || (t->beta && !d.beta) || (p.e.zdt && !d.z) || !yh) {
		fprintf(stderr, "out of host memory\n");
		exit(1);
	}
	fill_x8(p.xdt, d.x, nx, -2.0f, 2.0f);
	fill_x8(p.xdt, d.w, nw, -1.0f, 1.0f);
	/* scale so that the values before the store spread over about +-60 (some saturate) */
	double accstd = p.xdt == KQ_INT8 ? 5461.0 * sqrt((double)kred) : 0.67 * sqrt((double)kred);
	for (int i = 0; i < p.k; i++) {
		if (t->exact)
			d.alpha[i] = (float)pow(2.0, -floor(log2(accstd / 60.0)));
		else
			d.alpha[i] = (float)(60.0 / accstd) * frand(0.5f, 1.5f);
		if (d.beta)
			d.beta[i] = frand(-20.0f, 20.0f);
	}
	if (p.e.zdt) {
		for (long long i = 0; i < ny; i++) {
			switch (p.e.zdt) {
			case KQ_INT8: ((int8_t *)d.z)[i] = (int8_t)(rnd() & 0xff); break;
			case KQ_F8E4M3FN: ((uint8_t *)d.z)[i] = (uint8_t)kq_f8_encode(&f8, frand(-40.0f, 40.0f), true); break;
			case KQ_FLOAT: ((float *)d.z)[i] = frand(-50.0f, 50.0f); break;
			case KQ_FLOAT16: {
				struct kq_f8fmt h = { 5, 10, 15, 0x7bff, 0x7e00, true, false, false };
				((uint16_t *)d.z)[i] = (uint16_t)kq_f8_encode(&h, frand(-50.0f, 50.0f), false);
				break;
			}
			default: ((uint16_t *)d.z)[i] = (uint16_t)(kq_f2u(frand(-50.0f, 50.0f)) >> 16); break;
			}
		}
	}

	/* the elements to check */
	long long nchk;
	struct expect *ex;
	bool full = (double)ny * (double)kred <= 3e8;
	if (full) {
		nchk = ny;
		ex = malloc(sizeof *ex * (size_t)nchk);
		for (long long i = 0; ex && i < ny; i++)
			ref_one(t, &d, i, &ex[i]);
	} else {
		long long nb = ny < 256 ? ny : 256;
		nchk = 20000 + 2 * nb;
		ex = malloc(sizeof *ex * (size_t)nchk);
		for (long long i = 0; ex && i < nchk; i++) {
			long long idx;
			if (i < nb)
				idx = i;
			else if (i < 2 * nb)
				idx = ny - 1 - (i - nb);
			else
				idx = (long long)(((uint64_t)rnd() << 32 | rnd()) % (uint64_t)ny);
			ref_one(t, &d, idx, &ex[i]);
		}
	}
	if (!ex) {
		fprintf(stderr, "out of host memory\n");
		exit(1);
	}

	void *dx, *dw, *dy, *dalpha, *dbeta = NULL, *dz = NULL;
	CU(cudaMalloc(&dx, (size_t)nx));
	CU(cudaMalloc(&dw, (size_t)nw));
	CU(cudaMalloc(&dy, (size_t)ny * ysz + guard));
	CU(cudaMalloc(&dalpha, sizeof(float) * p.k));
	CU(cudaMemcpy(dx, d.x, (size_t)nx, cudaMemcpyHostToDevice));
	CU(cudaMemcpy(dw, d.w, (size_t)nw, cudaMemcpyHostToDevice));
	CU(cudaMemcpy(dalpha, d.alpha, sizeof(float) * p.k, cudaMemcpyHostToDevice));
	if (d.beta) {
		CU(cudaMalloc(&dbeta, sizeof(float) * p.k));
		CU(cudaMemcpy(dbeta, d.beta, sizeof(float) * p.k, cudaMemcpyHostToDevice));
	}
	if (d.z) {
		CU(cudaMalloc(&dz, (size_t)ny * dt_size(p.e.zdt)));
		CU(cudaMemcpy(dz, d.z, (size_t)ny * dt_size(p.e.zdt), cudaMemcpyHostToDevice));
	}
	p.alpha = dalpha;
	p.beta = dbeta;
	p.z = dz;

	bool case_failed = false;
	int nv = kqc_variants(&p);
	float best = 1e30f;
	int bestv = -1;
	for (int v = 0; v < nv; v++) {
		/* poison: 0xA5 bytes (int8 -91, a float16/float NaN-free pattern) and the guard */
		CU(cudaMemset(dy, 0xa5, (size_t)ny * ysz + guard));
		cudaError_t e = kqc_conv(&p, v, dx, dw, dy, stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(stream);
		if (e != cudaSuccess) {
			printf("FAIL %s [%s]: launch: %s\n", t->name, kqc_variant_name(&p, v), cudaGetErrorString(e));
			case_failed = true;
			if (e != cudaErrorInvalidValue)
				exit(1);   /* a sticky device error: nothing after it can be trusted */
			continue;
		}
		CU(cudaMemcpy(yh, dy, (size_t)ny * ysz + guard, cudaMemcpyDeviceToHost));
		long long wrong = 0;
		for (long long i = 0; i < nchk; i++) {
			float got, want;
			if (!ok_value(&p.e, yh, ex[i].idx, &ex[i], &got, &want)) {
				if (!wrong) {
					long long idx = ex[i].idx, m = idx / p.k;
					printf("FAIL %s [%s]: y[n=%lld,p=%lld,q=%lld,k=%lld] (element %lld) = %.9g, expected %.9g "
					       "(value %.9g, bounds [%.9g, %.9g])\n",
					       t->name, kqc_variant_name(&p, v), m / ((long long)p.p * p.q), m / p.q % p.p,
					       m % p.q, idx % p.k, idx, got, want, ex[i].mid, ex[i].lo, ex[i].hi);
				}
				wrong++;
			}
		}
		const unsigned char *g = (const unsigned char *)yh + (size_t)ny * ysz;
		for (size_t i = 0; i < guard; i++)
			if (g[i] != 0xa5) {
				printf("FAIL %s [%s]: wrote past y's end (guard byte %zu)\n", t->name,
				       kqc_variant_name(&p, v), i);
				wrong++;
				break;
			}
		if (wrong) {
			printf("     %s [%s]: %lld of %lld checked elements wrong\n", t->name, kqc_variant_name(&p, v),
			       wrong, nchk);
			case_failed = true;
			continue;
		}
		/* timing: 3 warm-up runs, then the median of 20 */
		cudaEvent_t e0, e1;
		CU(cudaEventCreate(&e0));
		CU(cudaEventCreate(&e1));
		for (int i = 0; i < 3; i++)
			CU(kqc_conv(&p, v, dx, dw, dy, stream));
		float ms[20];
		for (int i = 0; i < 20; i++) {
			CU(cudaEventRecord(e0, stream));
			CU(kqc_conv(&p, v, dx, dw, dy, stream));
			CU(cudaEventRecord(e1, stream));
			CU(cudaEventSynchronize(e1));
			CU(cudaEventElapsedTime(&ms[i], e0, e1));
		}
		CU(cudaEventDestroy(e0));
		CU(cudaEventDestroy(e1));
		qsort(ms, 20, sizeof ms[0], cmp_float);
		float med = 0.5f * (ms[9] + ms[10]);
		if (med < best) {
			best = med;
			bestv = v;
		}
	}
	if (case_failed)
		n_failed++;
	if (bestv >= 0) {
		double ops = 2.0 * (double)M * (double)p.k * (double)kred;
		printf("%s %s: %d variants ok, fastest %s %.1f us, %.1f TOPS%s\n", t->timed ? "TIME" : "    ", t->name, nv,
		       kqc_variant_name(&p, bestv), best * 1e3, ops / (best * 1e-3) / 1e12, full ? "" : " (sampled check)");
	}

	cudaFree(dx);
	cudaFree(dw);
	cudaFree(dy);
	cudaFree(dalpha);
	cudaFree(dbeta);
	cudaFree(dz);
	free(d.x);
	free(d.w);
	free(d.alpha);
	free(d.beta);
	free(d.z);
	free(yh);
	free(ex);
}

/* kqc_supported's refusals and variant counts (no GPU needed) */
static void check_support(void)
{
	char why[160];
	struct tcase t = conv(KQ_INT8, 1, 7, 24, 32, 3, 1, 1, 1, 1, KQ_INT8, 0, 0, false);
	CHECK(!kqc_supported(&t.p, why, sizeof why) && strstr(why, "(24) not a multiple of 16"));
	CHECK(kqc_variants(&t.p) == 0 && !strcmp(kqc_variant_name(&t.p, 0), ""));
	t = conv(KQ_INT8, 1, 7, 64, 32, 3, 1, 1, 1, 2, KQ_INT8, 0, 0, false);   /* 32 per group */
	t.p.alpha = (const float *)&t;   /* any non-NULL pointer: not dereferenced */
	CHECK(kqc_supported(&t.p, why, sizeof why));
	CHECK(kqc_variants(&t.p) >= 1 && strstr(kqc_variant_name(&t.p, 0), "int8 igemm"));
	t = conv(KQ_INT8, 1, 7, 64, 32, 3, 1, 1, 1, 8, KQ_INT8, 0, 0, false);    /* 8 per group */
	t.p.alpha = (const float *)&t;
	CHECK(!kqc_supported(&t.p, why, sizeof why) && strstr(why, "(8) not a multiple of 16"));
	t = conv(KQ_F8E4M3FN, 1, 7, 64, 64, 3, 1, 1, 1, 64, KQ_FLOAT, 0, 0, false); /* depthwise */
	t.p.alpha = (const float *)&t;
	CHECK(kqc_supported(&t.p, why, sizeof why) && kqc_variants(&t.p) == 1);
	CHECK(strstr(kqc_variant_name(&t.p, 0), "fp8 direct") != NULL);
	t = conv(KQ_UINT8, 1, 7, 64, 64, 3, 1, 1, 1, 1, KQ_FLOAT, 0, 0, false);
	t.p.alpha = (const float *)&t;
	CHECK(!kqc_supported(&t.p, why, sizeof why) && strstr(why, "input type"));
	t = conv(KQ_INT8, 1, 7, 64, 48, 3, 1, 1, 1, 1, KQ_FLOAT, 0, KQ_INT8, false);
	t.p.alpha = (const float *)&t;
	/* the pointers are the launch's: the shape is supported, the launch refuses */
	CHECK(kqc_supported(&t.p, why, sizeof why));
	CHECK(kqc_conv(&t.p, 0, &t, &t, &t, 0) == cudaErrorInvalidValue);   /* a residual type without a residual */
	t.p.e.zdt = 0;
	t.p.alpha = NULL;
	CHECK(kqc_conv(&t.p, 0, &t, &t, &t, 0) == cudaErrorInvalidValue);   /* no per-channel scale */
}

#define NCASES 80

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;   /* a substring of the case names to run */
	check_support();
	if (checks_failed) {
		printf("kqc_supported: %d checks failed\n", checks_failed);
		return 1;
	}
	char why[200];
	if (!gpu_test_init(&stream, why, sizeof(why))) {
		printf("skipped: %s\n", why);
		return 77;
	}

	static struct tcase cs[NCASES];
	int nc = 0;
	const int I8 = KQ_INT8, F8 = KQ_F8E4M3FN, F32 = KQ_FLOAT, F16 = KQ_FLOAT16, U8 = KQ_UINT8;
	const int NONE = KQE_ACT_NONE, RELU = KQE_ACT_RELU, CLIP = KQE_ACT_CLIP;
	/* convolutions: xdt n hw c k rs stride pad dil groups ydt act zdt beta */
	cs[nc++] = conv(I8, 1, 56, 64, 256, 1, 1, 0, 1, 1, I8, RELU, 0, true);
	cs[nc++] = conv(I8, 1, 56, 64, 64, 3, 1, 1, 1, 1, I8, RELU, I8, true);
	cs[nc++] = conv(I8, 1, 28, 128, 256, 3, 2, 1, 1, 1, I8, NONE, 0, true);
	cs[nc++] = conv(I8, 1, 13, 32, 48, 5, 1, 2, 1, 1, F32, NONE, 0, false);
	cs[nc++] = conv(I8, 1, 56, 16, 64, 7, 2, 3, 1, 1, I8, RELU, 0, true);
	cs[nc++] = conv(I8, 2, 13, 64, 64, 3, 1, 2, 2, 1, I8, CLIP, 0, true);
	cs[nc++] = conv(I8, 1, 13, 64, 128, 3, 1, 1, 1, 2, I8, RELU, 0, true);
	cs[nc++] = conv(I8, 1, 7, 128, 64, 3, 1, 1, 1, 4, F32, NONE, F32, true);
	cs[nc++] = conv(I8, 1, 13, 32, 32, 3, 1, 1, 1, 32, I8, RELU, 0, true);
	cs[nc++] = conv(I8, 1, 56, 96, 96, 5, 2, 2, 1, 96, I8, CLIP, I8, true);
	cs[nc++] = conv(I8, 2, 7, 16, 32, 3, 1, 1, 1, 16, F16, NONE, 0, false);
	cs[nc++] = conv(I8, 1, 7, 2048, 512, 1, 1, 0, 1, 1, I8, RELU, 0, true);
	cs[nc++] = conv(I8, 1, 7, 512, 2048, 1, 1, 0, 1, 1, I8, RELU, I8, true);
	cs[nc++] = conv(I8, 33, 7, 16, 16, 3, 1, 1, 1, 1, I8, NONE, 0, true);
	cs[nc++] = conv(I8, 33, 1, 512, 1000, 1, 1, 0, 1, 1, F32, NONE, 0, true);
	cs[nc++] = conv(I8, 33, 13, 64, 128, 3, 1, 1, 1, 1, I8, RELU, F32, true);
	cs[nc++] = conv(I8, 1, 14, 256, 256, 3, 1, 1, 1, 1, F16, RELU, F16, true);
	cs[nc++] = conv(I8, 1, 14, 256, 256, 3, 1, 1, 1, 1, U8, RELU, 0, true);
	cs[nc++] = conv(I8, 1, 13, 48, 40, 3, 1, 1, 1, 1, I8, NONE, 0, true);
	cs[nc++] = conv(I8, 3, 9, 16, 7, 1, 1, 0, 1, 1, I8, NONE, 0, true);
	cs[nc++] = conv(I8, 33, 56, 256, 64, 1, 1, 0, 1, 1, I8, RELU, 0, true);
	cs[nc++] = conv(I8, 1, 7, 1024, 1024, 3, 2, 1, 1, 1, I8, RELU, 0, true);
	{
		struct tcase t = conv(I8, 1, 7, 256, 64, 1, 1, 0, 1, 1, I8, NONE, 0, false);
		t.exact = true;
		snprintf(t.name + strlen(t.name), sizeof t.name - strlen(t.name), " exact");
		cs[nc++] = t;
		t = conv(I8, 2, 13, 32, 64, 3, 1, 1, 1, 1, I8, NONE, 0, false);
		t.exact = true;
		snprintf(t.name + strlen(t.name), sizeof t.name - strlen(t.name), " exact");
		cs[nc++] = t;
	}
	{
		/* pads 1 top/left and 0 bottom/right, rectangular */
		struct tcase t = conv(I8, 2, 13, 32, 32, 3, 1, 1, 1, 1, I8, RELU, 0, true);
		t.p.w = 11;
		t.p.p = 13 + 1 - 3 + 1;
		t.p.q = 11 + 1 - 3 + 1;
		snprintf(t.name + strlen(t.name), sizeof t.name - strlen(t.name), " 13x11 pads 1,0");
		cs[nc++] = t;
	}
	{
		/* onnxruntime's residual: the product rounded to int8 of its own scale, then the
		 * residual and the Relu in the output's scale (k_qepi.h's mid) */
		struct tcase t = conv(I8, 2, 14, 64, 256, 1, 1, 0, 1, 1, I8, RELU, I8, true);
		t.p.e.mid = 0.8125f;
		snprintf(t.name + strlen(t.name), sizeof t.name - strlen(t.name), " mid");
		cs[nc++] = t;
		t = conv(I8, 33, 7, 64, 64, 3, 1, 1, 1, 1, I8, NONE, I8, false);
		t.p.e.mid = 1.375f;
		snprintf(t.name + strlen(t.name), sizeof t.name - strlen(t.name), " mid");
		cs[nc++] = t;
	}
	/* the staged epilogue (8-bit y and z, channels per group a multiple of 16): rows past
	 * M in the last tile, fewer channels than a tile, groups */
	cs[nc++] = conv(I8, 3, 9, 32, 48, 3, 1, 1, 1, 1, I8, RELU, I8, true);
	cs[nc++] = conv(I8, 2, 8, 64, 64, 3, 1, 1, 1, 2, I8, CLIP, I8, false);
	cs[nc++] = conv(F8, 3, 9, 32, 48, 1, 1, 0, 1, 1, F8, NONE, F8, true);
	/* GEMMs: xdt M K N ydt act zdt beta */
	cs[nc++] = gemm(I8, 1, 768, 768, I8, NONE, 0, true);
	cs[nc++] = gemm(I8, 7, 768, 2304, F32, NONE, 0, true);
	cs[nc++] = gemm(I8, 128, 3072, 768, I8, NONE, I8, true);
	cs[nc++] = gemm(I8, 128, 768, 3072, F16, RELU, 0, false);
	cs[nc++] = gemm(I8, 8192, 3072, 768, F16, NONE, F16, true);
	cs[nc++] = gemm(I8, 1, 3072, 768, F32, NONE, F32, true);
	/* FP8 */
	cs[nc++] = gemm(F8, 128, 768, 768, F32, NONE, 0, true);
	cs[nc++] = gemm(F8, 7, 3072, 768, I8, RELU, 0, true);
	cs[nc++] = gemm(F8, 1, 768, 2304, F16, NONE, 0, false);
	cs[nc++] = gemm(F8, 8192, 768, 3072, F8, NONE, 0, true);
	cs[nc++] = conv(F8, 1, 13, 64, 64, 3, 1, 1, 1, 1, F16, RELU, 0, true);
	cs[nc++] = conv(F8, 1, 13, 32, 32, 3, 1, 1, 1, 32, F32, NONE, 0, true);
	cs[nc++] = conv(F8, 2, 14, 64, 64, 3, 1, 1, 1, 1, F8, RELU, F8, true);
	cs[nc++] = conv(F8, 1, 13, 64, 128, 3, 2, 1, 1, 2, F8, CLIP, 0, false);
	cs[nc++] = conv(F8, 33, 7, 16, 48, 5, 1, 2, 1, 1, F32, NONE, F32, true);
	/* the big shapes, timed */
	{
		struct tcase t = conv(I8, 256, 14, 256, 256, 3, 1, 1, 1, 1, I8, RELU, 0, true);
		t.timed = true;
		cs[nc++] = t;
		t = gemm(I8, 8192, 768, 3072, I8, NONE, 0, true);
		t.timed = true;
		cs[nc++] = t;
		t = conv(I8, 256, 56, 64, 64, 3, 1, 1, 1, 1, I8, RELU, 0, true);
		t.timed = true;
		cs[nc++] = t;
		t = conv(I8, 256, 7, 512, 512, 3, 1, 1, 1, 1, I8, RELU, I8, true);
		t.timed = true;
		cs[nc++] = t;
		t = conv(F8, 256, 14, 256, 256, 3, 1, 1, 1, 1, F8, RELU, 0, true);
		t.timed = true;
		cs[nc++] = t;
		t = gemm(F8, 8192, 768, 3072, F16, NONE, 0, true);
		t.timed = true;
		cs[nc++] = t;
	}
	if (nc > NCASES)
		return 1;
	for (int i = 0; i < nc; i++) {
		if (only && !strstr(cs[i].name, only))
			continue;
		run_case(&cs[i]);
		fflush(stdout);
	}
	printf("%d cases, %d failed\n", n_cases, n_failed);
	cudaStreamDestroy(stream);
	return n_failed ? 1 : 0;
}
