/*
 * test_qgemm.c - the quantized GEMMs of kernels/cuda/k_qgemm.{c,cu}:
 *
 * - INT4 weight-only (int4/uint4, with and without zero point, block sizes
 *   16..128, float/float16/bfloat16 scales, float16/bfloat16/float32 x,
 *   m = 1, 3, 16, 64, bias or not) against a host reference in double of
 *   ONNX's DequantizeLinear -> MatMul, with a tolerance for the output's
 *   rounding (and the float16 weights of the dequantize + GEMM path);
 * - int8 and float8 e4m3 cuBLASLt GEMMs with the k_qepi.h epilogue: the
 *   product read back from the workspace is compared with the exact one
 *   (int32; float8 inputs are multiples of 1/2 up to 2 in magnitude, so
 *   every partial sum is exact in float32), and every output element with
 *   kqe_value/kqe_store of that product on the host, bit for bit;
 * - timings (CUDA events, the median of 20 samples of 10 runs after a
 *   warm-up): the INT4 GEMV against a float16 cuBLASLt GEMM of the same
 *   shape, and int8/float8 cuBLASLt TOPS at M=8192 K=768 N=3072.
 *
 * One line per failing case with the first wrong element, then "N cases,
 * N failed". `--pack-only` checks the host packing without a GPU.
 *
 * Exit status: 0 all passed, 1 a failure, 77 (skip) without a GPU.
 */
#include "exec/exec.h"
#include "tests/gpu/gpu_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef OGSH_HAVE_CUDA
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/k_qgemm.h"

static int n_cases, n_failed, n_noalgo;

/* ---- host helpers ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* uniform in [lo, hi) */
static double urand(double lo, double hi)
{
	return lo + (hi - lo) * (rnd() / 2097152.0 / 1024.0);
}

static const struct kq_f8fmt f16fmt = { 5, 10, 15, 0x7bff, 0x7e00, true, false, false };

static uint16_t f2h(float v)
{
	return (uint16_t)kq_f8_encode(&f16fmt, v, false);
}

static uint16_t f2bf(float v)
{
	uint32_t u = kq_f2u(v);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fc0;
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static size_t dt_size(int dt)
{
	switch (dt) {
	case KQ_FLOAT: case KQ_INT32: return 4;
	case KQ_FLOAT16: case KQ_BFLOAT16: return 2;
	default: return 1;
	}
}

static const char *dt_name(int dt)
{
	switch (dt) {
	case KQ_FLOAT: return "float";
	case KQ_FLOAT16: return "float16";
	case KQ_BFLOAT16: return "bfloat16";
	case KQ_INT8: return "int8";
	case KQ_UINT8: return "uint8";
	case KQ_INT4: return "int4";
	case KQ_UINT4: return "uint4";
	case KQ_F8E4M3FN: return "float8e4m3fn";
	case KQ_INT32: return "int32";
	default: return "?";
	}
}

/* v rounded to type dt, stored at element i of p; returns the rounded value */
static float put(int dt, void *p, int64_t i, float v)
{
	if (dt == KQ_FLOAT16)
		((uint16_t *)p)[i] = f2h(v);
	else if (dt == KQ_BFLOAT16)
		((uint16_t *)p)[i] = f2bf(v);
	else
		((float *)p)[i] = v;
	return kqe_load(p, i, dt);
}

static void *dev_alloc(size_t bytes)
{
	void *p = NULL;
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		fprintf(stderr, "cudaMalloc(%zu): %s\n", bytes, cudaGetErrorString(cudaGetLastError()));
		exit(1);
	}
	return p;
}

static void *dev_copy(const void *h, size_t bytes)
{
	void *p = dev_alloc(bytes);
	if (cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
		fprintf(stderr, "cudaMemcpy: %s\n", cudaGetErrorString(cudaGetLastError()));
		exit(1);
	}
	return p;
}

static bool cuda_ok(cudaError_t e, const char *what, char *why, size_t size)
{
	if (e == cudaSuccess)
		return true;
	snprintf(why, size, "%s: %s", what, cudaGetErrorString(e));
	(void)cudaGetLastError();
	return false;
}

/* ---- INT4 ---- */

struct w4_case {
	int64_t k, n;
	int m, bs;
	int wdt, sdt, xdt;
	bool zp, bias;
	int path;            /* KQG_W4_AUTO / REGS / DQ_GEMM */
};

/* ONNX's weights of a case, on the host */
struct w4_data {
	uint8_t *wq, *zq;
	void *scale;
	double *dq;          /* [K][N] the reference's dequantized weights */
};

static unsigned nib(const uint8_t *p, int64_t i)
{
	return (p[i >> 1] >> ((i & 1) * 4)) & 0xfu;
}

static void set_nib(uint8_t *p, int64_t i, unsigned v)
{
	p[i >> 1] = (uint8_t)((p[i >> 1] & ~(0xfu << ((i & 1) * 4))) | ((v & 0xfu) << ((i & 1) * 4)));
}

static int nib_value(int wdt, unsigned v)
{
	return wdt == KQ_INT4 ? (int)(v ^ 8u) - 8 : (int)v;
}

static bool w4_make(const struct w4_case *c, struct w4_data *d)
{
	int64_t K = c->k, N = c->n, nb = K / c->bs;
	d->wq = calloc((size_t)(K * N + 1) / 2, 1);
	d->zq = c->zp ? calloc((size_t)(nb * N + 1) / 2, 1) : NULL;
	d->scale = malloc((size_t)(nb * N) * 4);
	d->dq = malloc((size_t)(K * N) * sizeof(double));
	if (!d->wq || (c->zp && !d->zq) || !d->scale || !d->dq)
		return false;
	for (int64_t i = 0; i < K * N; i++)
		set_nib(d->wq, i, rnd() & 15u);
	for (int64_t i = 0; i < nb * N; i++) {
		/* float scales that float16 cannot hold (packed as float32), or values of sdt */
		float s = (float)urand(0.004, 0.02);
		if (c->sdt == KQ_FLOAT)
			((float *)d->scale)[i] = s;
		else
			put(c->sdt, d->scale, i, s);
		if (d->zq)
			set_nib(d->zq, i, rnd() & 15u);
	}
	for (int64_t k = 0; k < K; k++)
		for (int64_t n = 0; n < N; n++) {
			int64_t si = (k / c->bs) * N + n;
			int q = nib_value(c->wdt, nib(d->wq, k * N + n));
			int z = d->zq ? nib_value(c->wdt, nib(d->zq, si)) : 0;
			d->dq[k * N + n] = (double)(q - z) * (double)kqe_load(d->scale, si, c->sdt);
		}
	return true;
}

static void w4_free(struct w4_data *d)
{
	free(d->wq);
	free(d->zq);
	free(d->scale);
	free(d->dq);
}

static struct kqg_w4_src w4_src(const struct w4_case *c, const struct w4_data *d)
{
	struct kqg_w4_src s = { c->wdt, d->wq, c->sdt, d->scale, d->zq, c->k, c->n, c->bs };
	return s;
}

static void w4_name(const struct w4_case *c, char *buf, size_t size)
{
	snprintf(buf, size, "int4 %s K=%lld N=%lld m=%d bs=%d scale %s%s x %s%s%s", dt_name(c->wdt), (long long)c->k,
		 (long long)c->n, c->m, c->bs, dt_name(c->sdt), c->zp ? " zp" : "", dt_name(c->xdt),
		 c->bias ? " bias" : "",
		 c->path == KQG_W4_REGS ? " [regs]" : c->path == KQG_W4_DQ_GEMM ? " [dequant+gemm]" : "");
}

/* The packing alone: every packed value equals ONNX's dequantized one. */
static void w4_pack_case(const struct w4_case *c)
{
	char name[200], why[200];
	w4_name(c, name, sizeof(name));
	struct w4_data d;
	memset(&d, 0, sizeof(d));
	n_cases++;
	if (!w4_make(c, &d)) {
		printf("FAIL pack %s: out of memory\n", name);
		n_failed++;
		w4_free(&d);
		return;
	}
	struct kqg_w4_src src = w4_src(c, &d);
	struct kqg_w4_layout l;
	void *buf = NULL;
	if (kqg_w4_pack(&src, &l, &buf, why, sizeof(why))) {
		printf("FAIL pack %s: %s\n", name, why);
		n_failed++;
		w4_free(&d);
		return;
	}
	int want_sdt = c->sdt == KQ_FLOAT ? KQ_FLOAT : c->sdt == KQ_FLOAT16 ? KQ_FLOAT16 : -1;
	bool bad = false;
	if (want_sdt > 0 && l.sdt != want_sdt) {
		printf("FAIL pack %s: scales packed as %s, expected %s\n", name, dt_name(l.sdt), dt_name(want_sdt));
		bad = true;
	}
	for (int64_t k = 0; k < c->k && !bad; k++)
		for (int64_t n = 0; n < c->n && !bad; n++) {
			double got = kqg_w4_packed_value(&l, buf, n, k), want = d.dq[k * c->n + n];
			if (got != (double)(float)want) {
				printf("FAIL pack %s: k=%lld n=%lld: expected %.9g, got %.9g\n", name, (long long)k,
				       (long long)n, want, got);
				bad = true;
			}
		}
	n_failed += bad;
	free(buf);
	w4_free(&d);
}

static void pack_refusals(void)
{
	char why[200];
	static const struct {
		int64_t k, n;
		int bs;
		const char *msg;
	} r[] = {
		{ 96, 8, 64, "multiple of the block size" }, { 64, 8, 48, "power of two" },
		{ 64, 8, 8, "power of two" }, { 1024, 8, 512, "power of two" }, { 0, 8, 32, "empty" },
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		n_cases++;
		why[0] = 0;
		if (kqg_w4_check(r[i].k, r[i].n, r[i].bs, why, sizeof(why)) == 0 || !strstr(why, r[i].msg)) {
			printf("FAIL refusal K=%lld N=%lld bs=%d: got '%s', expected a message with '%s'\n",
			       (long long)r[i].k, (long long)r[i].n, r[i].bs, why, r[i].msg);
			n_failed++;
		}
	}
}

static cudaStream_t stream;
static void *lt_handle;

static void w4_gpu_case(const struct w4_case *c)
{
	char name[240], why[300];
	w4_name(c, name, sizeof(name));
	n_cases++;
	struct w4_data d;
	memset(&d, 0, sizeof(d));
	void *buf = NULL, *dpk = NULL, *dx = NULL, *dy = NULL, *db = NULL, *dws = NULL;
	void *hx = NULL, *hb = NULL, *hy = NULL;
	double *xf = NULL;
	struct kqg_w4_plan *pl = NULL;
	bool ok = false;
	const int64_t K = c->k, N = c->n, M = c->m;
	const size_t es = dt_size(c->xdt);
	if (!w4_make(c, &d)) {
		snprintf(why, sizeof(why), "out of memory");
		goto out;
	}
	struct kqg_w4_src src = w4_src(c, &d);
	struct kqg_w4_layout l;
	if (kqg_w4_pack(&src, &l, &buf, why, sizeof(why)))
		goto out;
	hx = malloc((size_t)(M * K) * es);
	hb = malloc((size_t)N * es);
	hy = malloc((size_t)(M * N) * es);
	xf = malloc((size_t)(M * K) * sizeof(double));
	if (!hx || !hb || !hy || !xf) {
		snprintf(why, sizeof(why), "out of memory");
		goto out;
	}
	for (int64_t i = 0; i < M * K; i++)
		xf[i] = put(c->xdt, hx, i, (float)urand(-1, 1));
	for (int64_t i = 0; i < N; i++)
		put(c->xdt, hb, i, (float)urand(-1, 1));
	dpk = dev_copy(buf, l.bytes);
	dx = dev_copy(hx, (size_t)(M * K) * es);
	db = c->bias ? dev_copy(hb, (size_t)N * es) : NULL;
	dy = dev_alloc((size_t)(M * N) * es);
	/* poison: an element never written reads as NaN (or a huge value) */
	if (!cuda_ok(cudaMemset(dy, 0xff, (size_t)(M * N) * es), "cudaMemset", why, sizeof(why)))
		goto out;
	size_t ws = 0;
	pl = kqg_w4_prepare(lt_handle, &l, c->xdt, c->m, c->bias, c->path, &ws, why, sizeof(why));
	if (!pl)
		goto out;
	dws = ws ? dev_alloc(ws) : NULL;
	if (kqg_w4_run(pl, dpk, dx, db, dy, dws, stream, why, sizeof(why)))
		goto out;
	if (!cuda_ok(cudaStreamSynchronize(stream), "run", why, sizeof(why)) ||
	    !cuda_ok(cudaMemcpy(hy, dy, (size_t)(M * N) * es, cudaMemcpyDeviceToHost), "cudaMemcpy", why, sizeof(why)))
		goto out;
	/* tolerances: the output's rounding (1 ulp), float32 accumulation, and
	 * for the dequantize + GEMM path the weights' rounding to x's type
	 * (random errors: a few times their standard deviation) */
	double u = c->xdt == KQ_FLOAT16 ? 0x1p-11 : c->xdt == KQ_BFLOAT16 ? 0x1p-8 : 0x1p-24;
	bool dqpath = strstr(kqg_w4_impl(pl), "dequant") != NULL;
	int64_t bad = 0, first = -1;
	double fe = 0, fg = 0, ft = 0;
	for (int64_t r = 0; r < M; r++)
		for (int64_t n = 0; n < N; n++) {
			double ref = c->bias ? kqe_load(hb, n, c->xdt) : 0, sa = 0, sq = 0;
			for (int64_t k = 0; k < K; k++) {
				double t = xf[r * K + k] * d.dq[k * N + n];
				ref += t;
				sa += fabs(t);
				sq += t * t;
			}
			double tol = 2 * u * fabs(ref) + 1e-5 * sa + (dqpath ? 6 * u * sqrt(sq) : 0) + 1e-30;
			double got = kqe_load(hy, r * N + n, c->xdt);
			if (!(fabs(got - ref) <= tol)) {
				if (bad++ == 0) {
					first = r * N + n;
					fe = ref;
					fg = got;
					ft = tol;
				}
			}
		}
	if (bad) {
		snprintf(why, sizeof(why), "%lld of %lld wrong, first y[%lld][%lld]: expected %.7g, got %.7g (tolerance %.3g)",
			 (long long)bad, (long long)(M * N), (long long)(first / N), (long long)(first % N), fe, fg, ft);
		goto out;
	}
	ok = true;
out:
	if (!ok) {
		printf("FAIL %s: %s\n", name, why);
		n_failed++;
	}
	kqg_w4_free(pl);
	cudaFree(dpk);
	cudaFree(dx);
	cudaFree(dy);
	cudaFree(db);
	cudaFree(dws);
	(void)cudaGetLastError();
	free(buf);
	free(hx);
	free(hb);
	free(hy);
	free(xf);
	w4_free(&d);
}

/* ---- int8 and float8 through cuBLASLt ---- */

struct lt_opt {
	int ydt, zdt, act;
	bool beta;
	float yzp;
};

static const struct lt_opt lt_opts[] = {
	{ KQ_INT8, 0, KQE_ACT_NONE, false, 0 },
	{ KQ_INT8, KQ_INT8, KQE_ACT_RELU, true, 0 },
	{ KQ_FLOAT, 0, KQE_ACT_NONE, true, 0 },
	{ KQ_FLOAT16, KQ_FLOAT16, KQE_ACT_RELU, true, 0 },
	{ KQ_FLOAT, KQ_FLOAT, KQE_ACT_CLIP, false, 0 },
	{ KQ_BFLOAT16, 0, KQE_ACT_LEAKY, true, 0 },
	{ KQ_UINT8, KQ_UINT8, KQE_ACT_NONE, true, 128 },
	{ KQ_F8E4M3FN, KQ_F8E4M3FN, KQE_ACT_RELU, true, 0 },
};
#define N_LT_OPTS ((int)(sizeof(lt_opts) / sizeof(lt_opts[0])))

/* the expected bits of y[i] from the accumulator the GPU computed */
static void lt_expect(const struct kqe_params *e, float acc, float a, float b, float z, void *out)
{
	float v = kqe_value(e, acc, a, b, z);
	if (e->ydt == KQ_FLOAT16) {
		uint16_t h = f2h(v);
		memcpy(out, &h, 2);
	} else if (e->ydt == KQ_BFLOAT16) {
		uint16_t h = f2bf(v);
		memcpy(out, &h, 2);
	} else {
		kqe_store(e, out, 0, v);   /* int8, uint8, e4m3fn, float: the sizes kqe_store writes on the host */
	}
}

static const struct kq_f8fmt e4 = { 4, 3, 7, 0x7e, 0x7f, false, false, false };

/* an e4m3fn code of a multiple of 1/2 in [-2, 2] */
static int8_t e4_small(void)
{
	return (int8_t)kq_f8_encode(&e4, (float)((int)(rnd() % 9) - 4) * 0.5f, true);
}

/* rows checked against the exact product (all for small M) */
static bool row_checked(int64_t r, int64_t M)
{
	return M <= 256 || r < 8 || r >= M - 8 || r % 61 == 0;
}

static void lt_shape(int xdt, int M, int K, int N, int opt_from, int opt_to)
{
	char why[300];
	const size_t nA = (size_t)M * K, nB = (size_t)N * K, nY = (size_t)M * N;
	int8_t *ha = malloc(nA), *hb = malloc(nB);
	float *alpha = malloc((size_t)N * 4), *beta = malloc((size_t)N * 4), *zf = malloc(nY * 4);
	uint8_t *zraw = malloc(nY * 4), *hy = malloc(nY * 4), *acc = malloc(nY * 4);
	if (!ha || !hb || !alpha || !beta || !zf || !zraw || !hy || !acc) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	/* int8: the full range; e4m3fn: multiples of 1/2 in [-2, 2] */
	for (size_t i = 0; i < nA; i++)
		ha[i] = xdt == KQ_INT8 ? (int8_t)(rnd() & 0xff) : e4_small();
	for (size_t i = 0; i < nB; i++)
		hb[i] = xdt == KQ_INT8 ? (int8_t)(rnd() & 0xff) : e4_small();
	double rms = xdt == KQ_INT8 ? 73.9 * 73.9 : 1.29 * 1.29;   /* of one product */
	for (int n = 0; n < N; n++) {
		alpha[n] = (float)(urand(0.3, 1.5) * 60.0 / (sqrt((double)K) * rms));
		beta[n] = (float)urand(-10, 10);
	}
	void *da = dev_copy(ha, nA), *db = dev_copy(hb, nB), *dal = dev_copy(alpha, (size_t)N * 4);
	void *dbe = dev_copy(beta, (size_t)N * 4), *dz = dev_alloc(nY * 4), *dy = dev_alloc(nY * 4);
	struct kqg_lt p;
	memset(&p, 0, sizeof(p));
	p.m = M;
	p.n = N;
	p.k = K;
	p.xdt = xdt;
	size_t ws = 0;
	/* the plan is made once per shape; each run below brings its own epilogue */
	p.e.ydt = KQ_INT8;
	struct kqg_lt_plan *pl = kqg_lt_prepare(lt_handle, &p, &ws, why, sizeof(why));
	void *dws = pl ? dev_alloc(ws) : NULL;
	/* the exact product of the checked rows */
	int64_t *ref = malloc(nY * sizeof(int64_t));
	double *reff = malloc(nY * sizeof(double));
	/* float8 values decoded once */
	float *fa = xdt == KQ_INT8 ? NULL : malloc(nA * 4), *fb = xdt == KQ_INT8 ? NULL : malloc(nB * 4);
	for (size_t i = 0; fa && fb && i < nA; i++)
		fa[i] = kq_f8_decode(&e4, (uint8_t)ha[i]);
	for (size_t i = 0; fa && fb && i < nB; i++)
		fb[i] = kq_f8_decode(&e4, (uint8_t)hb[i]);
	if (xdt != KQ_INT8 && (!fa || !fb)) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (int64_t r = 0; r < M && ref && reff; r++) {
		if (!row_checked(r, M))
			continue;
		for (int64_t n = 0; n < N; n++) {
			int64_t s = 0;
			double sf = 0;
			const int8_t *ar = ha + r * K, *br = hb + n * K;
			if (xdt == KQ_INT8)
				for (int64_t k = 0; k < K; k++)
					s += (int64_t)ar[k] * br[k];
			else
				for (int64_t k = 0; k < K; k++)
					sf += (double)fa[r * K + k] * fb[n * K + k];
			ref[r * N + n] = s;
			reff[r * N + n] = sf;
		}
	}
	for (int oi = opt_from; oi < opt_to; oi++) {
		const struct lt_opt *o = &lt_opts[oi % N_LT_OPTS];
		char name[200];
		snprintf(name, sizeof(name), "%s M=%d K=%d N=%d -> %s%s%s%s%s", dt_name(xdt), M, K, N, dt_name(o->ydt),
			 o->beta ? " beta" : "", o->zdt ? " residual " : "", o->zdt ? dt_name(o->zdt) : "",
			 o->act == KQE_ACT_RELU ? " relu" : o->act == KQE_ACT_CLIP ? " clip" : o->act == KQE_ACT_LEAKY ? " leakyrelu" : "");
		n_cases++;
		if (!pl && strstr(why, "no algorithm")) {
			/* a refusal the planner falls back from: reported, not a failure */
			printf("NOALGO %s: %s\n", name, why);
			n_noalgo++;
			continue;
		}
		if (!pl || !ref || !reff) {
			printf("FAIL %s: %s\n", name, pl ? "out of memory" : why);
			n_failed++;
			continue;
		}
		p.e.ydt = o->ydt;
		p.e.zdt = o->zdt;
		p.e.act = o->act;
		p.e.act0 = o->act == KQE_ACT_CLIP ? -20.0f : 0.1f;
		p.e.act1 = 30.0f;
		p.e.yzp = o->yzp;
		p.e.zscale = 0.75f;
		p.alpha = dal;
		p.beta = o->beta ? dbe : NULL;
		p.z = o->zdt ? dz : NULL;
		if (o->zdt) {
			for (size_t i = 0; i < nY; i++) {
				float v = (float)urand(-60, 60);
				if (o->zdt == KQ_INT8)
					((int8_t *)zraw)[i] = (int8_t)kq_round_sat(v, 0, -128, 127);
				else if (o->zdt == KQ_UINT8)
					zraw[i] = (uint8_t)kq_round_sat(v, 128, 0, 255);
				else if (o->zdt == KQ_F8E4M3FN)
					zraw[i] = (uint8_t)kq_f8_encode(&e4, v, true);
				else
					put(o->zdt, zraw, (int64_t)i, v);
				zf[i] = kqe_load(zraw, (int64_t)i, o->zdt);
			}
			if (cudaMemcpy(dz, zraw, nY * dt_size(o->zdt), cudaMemcpyHostToDevice) != cudaSuccess) {
				printf("FAIL %s: cudaMemcpy\n", name);
				n_failed++;
				continue;
			}
		}
		size_t ys = dt_size(o->ydt);
		bool ok = cudaMemset(dy, 0xff, nY * 4) == cudaSuccess && cudaMemset(dws, 0xff, nY * 4) == cudaSuccess;
		if (!ok || kqg_lt_run(pl, &p, da, db, dy, dws, stream, why, sizeof(why)) ||
		    !cuda_ok(cudaStreamSynchronize(stream), "run", why, sizeof(why)) ||
		    !cuda_ok(cudaMemcpy(hy, dy, nY * ys, cudaMemcpyDeviceToHost), "cudaMemcpy", why, sizeof(why)) ||
		    !cuda_ok(cudaMemcpy(acc, dws, nY * 4, cudaMemcpyDeviceToHost), "cudaMemcpy", why, sizeof(why))) {
			printf("FAIL %s: %s\n", name, ok ? why : "cudaMemset");
			n_failed++;
			(void)cudaGetLastError();
			continue;
		}
		/* 1. the product */
		int64_t bad = 0;
		for (int64_t r = 0; r < M; r++) {
			if (!row_checked(r, M))
				continue;
			for (int64_t n = 0; n < N; n++) {
				int64_t i = r * N + n;
				bool eq;
				double want, got;
				if (xdt == KQ_INT8) {
					int32_t g;
					memcpy(&g, acc + i * 4, 4);
					eq = g == ref[i];
					want = (double)ref[i];
					got = g;
				} else {
					float g;
					memcpy(&g, acc + i * 4, 4);
					eq = (double)g == reff[i];
					want = reff[i];
					got = g;
				}
				if (!eq && bad++ == 0)
					printf("FAIL %s: product [%lld][%lld]: expected %.9g, got %.9g\n", name, (long long)r,
					       (long long)n, want, got);
			}
		}
		/* 2. the epilogue of every element, bit for bit */
		int64_t bad_y = 0;
		for (int64_t i = 0; i < (int64_t)nY && !bad; i++) {
			int64_t n = i % N;
			float a;
			if (xdt == KQ_INT8) {
				int32_t g;
				memcpy(&g, acc + i * 4, 4);
				a = (float)g;
			} else {
				memcpy(&a, acc + i * 4, 4);
			}
			uint8_t want[4] = { 0 };
			lt_expect(&p.e, a, alpha[n], o->beta ? beta[n] : 0.0f, o->zdt ? zf[i] : 0.0f, want);
			if (memcmp(want, hy + i * (int64_t)ys, ys) && bad_y++ == 0) {
				uint32_t w = 0, g = 0;
				memcpy(&w, want, ys);
				memcpy(&g, hy + i * (int64_t)ys, ys);
				printf("FAIL %s: y[%lld][%lld] (acc %.9g): expected 0x%0*x, got 0x%0*x\n", name,
				       (long long)(i / N), (long long)n, (double)a, (int)ys * 2, w, (int)ys * 2, g);
			}
		}
		if (bad || bad_y) {
			n_failed++;
			if (bad > 1 || bad_y > 1)
				printf("     %lld products and %lld outputs wrong\n", (long long)bad, (long long)bad_y);
		}
	}
	kqg_lt_free(pl);
	cudaFree(da);
	cudaFree(db);
	cudaFree(dal);
	cudaFree(dbe);
	cudaFree(dz);
	cudaFree(dy);
	cudaFree(dws);
	(void)cudaGetLastError();
	free(ha);
	free(hb);
	free(alpha);
	free(beta);
	free(zf);
	free(zraw);
	free(hy);
	free(acc);
	free(ref);
	free(reff);
	free(fa);
	free(fb);
}

/* ---- timing ---- */

enum { T_W4, T_W4_GEMM, T_LT_PRODUCT, T_LT_FULL };

struct timed {
	int kind;
	struct kqg_w4_plan *w4;
	struct kqg_lt_plan *lt;
	struct kqg_lt *p;
	const void *packed, *x, *a, *b;
	void *y, *ws;
};

static int launch(struct timed *t)
{
	char why[200];
	int r = 0;
	switch (t->kind) {
	case T_W4: r = kqg_w4_run(t->w4, t->packed, t->x, NULL, t->y, t->ws, stream, why, sizeof(why)); break;
	case T_W4_GEMM: r = kqg_w4_run_gemm_only(t->w4, t->x, NULL, t->y, t->ws, stream, why, sizeof(why)); break;
	case T_LT_PRODUCT: r = kqg_lt_run_product(t->lt, t->a, t->b, t->ws, stream, why, sizeof(why)); break;
	case T_LT_FULL: r = kqg_lt_run(t->lt, t->p, t->a, t->b, t->y, t->ws, stream, why, sizeof(why)); break;
	}
	if (r)
		printf("timing: %s\n", why);
	return r;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* median microseconds per run; negative on failure */
static double time_it(struct timed *t)
{
	enum { SAMPLES = 20, REPS = 10 };
	cudaEvent_t e0, e1;
	if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
		return -1;
	float ms[SAMPLES];
	double res = -1;
	for (int i = 0; i < 5; i++)
		if (launch(t))
			goto out;
	for (int s = 0; s < SAMPLES; s++) {
		if (cudaEventRecord(e0, stream) != cudaSuccess)
			goto out;
		for (int i = 0; i < REPS; i++)
			if (launch(t))
				goto out;
		if (cudaEventRecord(e1, stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
		    cudaEventElapsedTime(&ms[s], e0, e1) != cudaSuccess)
			goto out;
	}
	qsort(ms, SAMPLES, sizeof(float), cmp_float);
	res = (ms[SAMPLES / 2 - 1] + ms[SAMPLES / 2]) / 2 * 1000.0 / REPS;
out:
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	(void)cudaGetLastError();
	return res;
}

static void time_w4(int64_t K, int64_t N, int m)
{
	char why[300];
	struct w4_case c = { K, N, m, 128, KQ_INT4, KQ_FLOAT16, KQ_FLOAT16, false, false, KQG_W4_REGS };
	struct w4_data d;
	memset(&d, 0, sizeof(d));
	void *buf = NULL;
	struct kqg_w4_layout l;
	struct kqg_w4_src src;
	if (!w4_make(&c, &d))
		goto out;
	src = w4_src(&c, &d);
	if (kqg_w4_pack(&src, &l, &buf, why, sizeof(why))) {
		printf("timing: %s\n", why);
		goto out;
	}
	void *dpk = dev_copy(buf, l.bytes), *dx = dev_alloc((size_t)(m * K) * 2), *dy = dev_alloc((size_t)(m * N) * 2);
	cudaMemset(dx, 0x3c, (size_t)(m * K) * 2);   /* 1.0078 everywhere */
	size_t ws1 = 0, ws2 = 0;
	struct kqg_w4_plan *p1 = kqg_w4_prepare(lt_handle, &l, KQ_FLOAT16, m, 0, KQG_W4_REGS, &ws1, why, sizeof(why));
	struct kqg_w4_plan *p2 = kqg_w4_prepare(lt_handle, &l, KQ_FLOAT16, m, 0, KQG_W4_DQ_GEMM, &ws2, why, sizeof(why));
	void *dws = dev_alloc(ws2);
	double t4 = -1, t16 = -1;
	if (p1) {
		struct timed t = { T_W4, p1, NULL, NULL, dpk, dx, NULL, NULL, dy, NULL };
		t4 = time_it(&t);
	}
	if (p2) {
		/* once to dequantize into the workspace, then the float16 GEMM alone */
		struct timed t = { T_W4, p2, NULL, NULL, dpk, dx, NULL, NULL, dy, dws };
		if (!launch(&t)) {
			t.kind = T_W4_GEMM;
			t16 = time_it(&t);
		}
	} else {
		printf("timing: %s\n", why);
	}
	double gbs = t4 > 0 ? (double)l.bytes / (t4 * 1e3) : 0;
	printf("%6lld %6lld %3d | %9.2f | %9.2f | %6.2fx | %7.0f\n", (long long)K, (long long)N, m, t4, t16,
	       t4 > 0 && t16 > 0 ? t16 / t4 : 0.0, gbs);
	kqg_w4_free(p1);
	kqg_w4_free(p2);
	cudaFree(dpk);
	cudaFree(dx);
	cudaFree(dy);
	cudaFree(dws);
	(void)cudaGetLastError();
out:
	free(buf);
	w4_free(&d);
}

static void time_lt(int xdt, int M, int K, int N)
{
	char why[300];
	struct kqg_lt p;
	memset(&p, 0, sizeof(p));
	p.m = M;
	p.n = N;
	p.k = K;
	p.xdt = xdt;
	p.e.ydt = KQ_INT8;
	p.e.act = KQE_ACT_RELU;
	size_t ws = 0;
	struct kqg_lt_plan *pl = kqg_lt_prepare(lt_handle, &p, &ws, why, sizeof(why));
	if (!pl) {
		printf("%-12s %5d %5d %5d | no plan: %s\n", dt_name(xdt), M, K, N, why);
		return;
	}
	void *da = dev_alloc((size_t)M * K), *db = dev_alloc((size_t)N * K), *dy = dev_alloc((size_t)M * N);
	void *dws = dev_alloc(ws), *dal = dev_alloc((size_t)N * 4), *dbe = dev_alloc((size_t)N * 4);
	cudaMemset(da, 0x11, (size_t)M * K);
	cudaMemset(db, 0x11, (size_t)N * K);
	cudaMemset(dal, 0, (size_t)N * 4);
	cudaMemset(dbe, 0, (size_t)N * 4);
	p.alpha = dal;
	p.beta = dbe;
	struct timed t = { T_LT_PRODUCT, NULL, pl, &p, NULL, NULL, da, db, dy, dws };
	double tp = time_it(&t);
	t.kind = T_LT_FULL;
	double tf = time_it(&t);
	double ops = 2.0 * M * (double)K * N;
	printf("%-12s %5d %5d %5d | %9.2f | %7.1f | %9.2f | %7.1f\n", dt_name(xdt), M, K, N, tp,
	       tp > 0 ? ops / (tp * 1e6) : 0.0, tf, tf > 0 ? ops / (tf * 1e6) : 0.0);
	kqg_lt_free(pl);
	cudaFree(da);
	cudaFree(db);
	cudaFree(dy);
	cudaFree(dws);
	cudaFree(dal);
	cudaFree(dbe);
	(void)cudaGetLastError();
}

/* ---- the cases ---- */

static void w4_cases(bool gpu)
{
	/* small shapes: every combination */
	static const struct { int64_t k, n; } small[] = { { 64, 24 }, { 48, 5 }, { 96, 13 }, { 256, 40 } };
	static const int bss[] = { 16, 32, 64, 128 }, ms[] = { 1, 3, 16, 64 };
	static const int xdts[] = { KQ_FLOAT16, KQ_FLOAT, KQ_BFLOAT16 }, sdts[] = { KQ_FLOAT16, KQ_FLOAT, KQ_BFLOAT16 };
	int rot = 0;
	for (size_t si = 0; si < sizeof(small) / sizeof(small[0]); si++)
		for (int bi = 0; bi < 4; bi++) {
			if (small[si].k % bss[bi])
				continue;
			for (int w = 0; w < 2; w++)
				for (int z = 0; z < 2; z++)
					for (int xi = 0; xi < 3; xi++)
						for (int mi = 0; mi < (gpu ? 4 : 1); mi++) {
							struct w4_case c = { small[si].k, small[si].n, ms[mi], bss[bi],
									     w ? KQ_UINT4 : KQ_INT4, sdts[rot % 3],
									     xdts[xi], z != 0, (rot & 1) != 0, KQG_W4_AUTO };
							rot++;
							if (gpu) {
								w4_gpu_case(&c);
								/* the other path where both apply */
								if (c.m <= KQG_W4_MAX_M && rot % 4 == 0) {
									c.path = KQG_W4_DQ_GEMM;
									w4_gpu_case(&c);
								}
							} else {
								w4_pack_case(&c);
							}
						}
		}
	/* the large shapes: one combination per m */
	static const struct { int64_t k, n; } big[] = { { 4096, 4096 }, { 4096, 11008 }, { 11008, 4096 } };
	for (size_t si = 0; si < sizeof(big) / sizeof(big[0]); si++)
		for (int mi = 0; mi < 4; mi++) {
			struct w4_case c = { big[si].k, big[si].n, ms[mi], bss[1 + (rot % 3)], rot & 2 ? KQ_UINT4 : KQ_INT4,
					     sdts[rot % 3], mi == 2 ? KQ_FLOAT : KQ_FLOAT16, (rot & 1) != 0,
					     (rot & 4) != 0, KQG_W4_AUTO };
			rot++;
			if (gpu)
				w4_gpu_case(&c);
			else if (mi == 0)
				w4_pack_case(&c);
		}
}

static void lt_cases(void)
{
	static const int Ms[] = { 1, 7, 128, 8192 };
	static const struct { int k, n; } kn[] = { { 768, 768 }, { 768, 2304 }, { 768, 3072 }, { 3072, 768 }, { 3072, 3072 } };
	int rot = 0;
	for (int xi = 0; xi < 2; xi++) {
		int xdt = xi ? KQ_F8E4M3FN : KQ_INT8;
		for (int mi = 0; mi < 4; mi++)
			for (size_t s = 0; s < sizeof(kn) / sizeof(kn[0]); s++) {
				/* every epilogue for small M, two for the large ones */
				int from = Ms[mi] <= 7 ? 0 : rot, to = Ms[mi] <= 7 ? N_LT_OPTS : rot + 2;
				lt_shape(xdt, Ms[mi], kn[s].k, kn[s].n, from, to);
				rot += 2;
			}
	}
}

static bool gpu_init(char *why, size_t size)
{
	return gpu_test_init(&stream, why, size);
}

int main(int argc, char **argv)
{
	bool pack_only = argc > 1 && !strcmp(argv[1], "--pack-only");
	bool no_timing = argc > 1 && !strcmp(argv[1], "--no-timing");
	if (pack_only) {
		pack_refusals();
		w4_cases(false);
		printf("test_qgemm --pack-only: %d cases, %d failed\n", n_cases, n_failed);
		return n_failed ? 1 : 0;
	}
	char why[256];
	if (!gpu_init(why, sizeof(why))) {
		printf("test_qgemm: skipped: %s\n", why);
		return 77;
	}
	struct cuda_ctx ctx;
	memset(&ctx, 0, sizeof(ctx));
	ctx.stream = stream;
	struct ir_diag d;
	ir_diag_init(&d);
	lt_handle = cuda_cublaslt_handle(&ctx, &d);
	if (!lt_handle) {
		printf("test_qgemm: no cuBLASLt: %s\n", d.error ? d.error : "?");
		ir_diag_clear(&d);
		return 1;
	}
	pack_refusals();
	w4_cases(true);
	lt_cases();
	printf("test_qgemm: %d cases, %d failed (%d without a cublasLt algorithm)\n", n_cases, n_failed, n_noalgo);
	if (!no_timing) {
		printf("\nint4 weight-only (int4, bs 128, float16 x) vs float16 cublasLt (weights [N][K]), median us\n");
		printf("     K      N   m |  int4 gemv | f16 cublasLt | speedup | int4 GB/s\n");
		time_w4(4096, 4096, 1);
		time_w4(4096, 11008, 1);
		time_w4(11008, 4096, 1);
		time_w4(4096, 4096, 4);
		time_w4(4096, 4096, 16);
		printf("\ncublasLt quantized gemm (relu, int8 output), median us\n");
		printf("type             M     K     N |   product |    TOPS | +epilogue |    TOPS\n");
		time_lt(KQ_INT8, 8192, 768, 3072);
		time_lt(KQ_F8E4M3FN, 8192, 768, 3072);
		time_lt(KQ_INT8, 8192, 3072, 768);
	}
	cuda_cublaslt_free(lt_handle);
	cudaStreamDestroy(stream);
	return n_failed ? 1 : 0;
}

#else

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("test_qgemm: skipped: ogsh was built without CUDA\n");
	return 77;
}

#endif
