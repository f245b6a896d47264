/*
 * k_qgemm.c - host parts of the quantized GEMMs (kernels in k_qgemm.cu,
 * the interface and the layouts in k_qgemm.h): packing INT4 weights, and
 * the cuBLASLt plans of the INT4 GEMM for larger m and of the int8 and
 * float8 e4m3 GEMMs.
 *
 * cuBLASLt is column-major and our matrices are row-major: y[M][N] =
 * A[M][K] * B[N][K]^T is, read column-major, y^T [N][M] (ld N) = B' * A'
 * with B stored as the column-major [K][N] (ld K) transposed (op T) and A
 * as the column-major [K][M] (ld K) not transposed (op N): the "TN" layout
 * that cuBLASLt's int8 (IMMA) and float8 kernels need. Its m, n, k are our
 * N, M, K. The INT4 path for large m uses the same with B = dq(W)^T.
 */
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/k_qgemm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LT_MAX_WS ((size_t)32 << 20)
#define LT_ALIGN 16u
#define WS_ALIGN 256u

static int fail(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && size)
		vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return -1;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p % LT_ALIGN) == 0;
}

/* ------------------------------------------------------------------------ */
/* INT4 packing                                                              */
/* ------------------------------------------------------------------------ */

static int log2_exact(int64_t v)
{
	int l = 0;
	while (l < 62 && ((int64_t)1 << l) < v)
		l++;
	return ((int64_t)1 << l) == v ? l : -1;
}

int kqg_w4_check(int64_t k, int64_t n, int bs, char *why, size_t size)
{
	if (bs < 16 || bs > 256 || log2_exact(bs) < 0)
		return fail(why, size, "int4 block size %d is not a power of two from 16 to 256", bs);
	if (k <= 0 || n <= 0)
		return fail(why, size, "int4 weights of shape [%lld,%lld] are empty", (long long)k, (long long)n);
	if (k % bs)
		return fail(why, size, "K (%lld) is not a multiple of the block size %d", (long long)k, bs);
	/* the kernels index with 32-bit k and n, and packed offsets in 64 bits */
	if (k > ((int64_t)1 << 30) || n > ((int64_t)1 << 30))
		return fail(why, size, "int4 weights of shape [%lld,%lld] are too large", (long long)k, (long long)n);
	return 0;
}

/* float16's format in k_quant_math.h's terms (1 sign, 5 exponent, 10 mantissa bits) */
static const struct kq_f8fmt f16fmt = { 5, 10, 15, 0x7bff, 0x7e00, true, false, false };

static float scale_at(int sdt, const void *s, int64_t i)
{
	return kqe_load(s, i, sdt == KQ_FLOAT16 ? KQ_FLOAT16 : sdt == KQ_BFLOAT16 ? KQ_BFLOAT16 : KQ_FLOAT);
}

/* whether v is a finite float16 value (so packing it as float16 loses nothing) */
static bool is_f16(float v)
{
	if (!isfinite(v))
		return false;
	uint32_t c = kq_f8_encode(&f16fmt, v, false);
	float back = kq_f8_decode(&f16fmt, c);
	return back == v && (signbit(back) == signbit(v));
}

static unsigned nib(const uint8_t *p, int64_t i)
{
	return (p[i >> 1] >> ((i & 1) * 4)) & 0xfu;
}

int kqg_w4_pack(const struct kqg_w4_src *src, struct kqg_w4_layout *l, void **buf, char *why, size_t size)
{
	*buf = NULL;
	memset(l, 0, sizeof(*l));
	if (src->wdt != KQ_INT4 && src->wdt != KQ_UINT4)
		return fail(why, size, "int4 weight-only gemm needs int4 or uint4 weights (type %d)", src->wdt);
	if (src->sdt != KQ_FLOAT && src->sdt != KQ_FLOAT16 && src->sdt != KQ_BFLOAT16)
		return fail(why, size, "int4 weight-only gemm needs float, float16 or bfloat16 scales (type %d)",
			    src->sdt);
	if (kqg_w4_check(src->k, src->n, src->bs, why, size))
		return -1;
	const int64_t K = src->k, N = src->n;
	l->k = K;
	l->n = N;
	l->bs = src->bs;
	l->lbs = log2_exact(src->bs);
	l->kp = (K + KQG_W4_KALIGN - 1) / KQG_W4_KALIGN * KQG_W4_KALIGN;
	l->nblk = K / src->bs;
	l->has_zp = src->zp != NULL;
	/* u = q + 8 for int4: the kernel subtracts an unsigned zero point */
	const unsigned flip = src->wdt == KQ_INT4 ? 8u : 0u;
	l->zp_const = (int)flip;
	const int64_t ns = l->nblk * N;
	l->sdt = KQ_FLOAT16;
	for (int64_t i = 0; i < ns && l->sdt == KQ_FLOAT16; i++)
		if (!is_f16(scale_at(src->sdt, src->scale, i)))
			l->sdt = KQ_FLOAT;
	size_t wbytes = (size_t)N * (size_t)(l->kp / 2), sbytes = (size_t)ns * (l->sdt == KQ_FLOAT16 ? 2 : 4);
	l->w_off = 0;
	l->s_off = align_up(wbytes, 16);
	l->z_off = align_up(l->s_off + sbytes, 16);
	l->bytes = align_up(l->z_off + (l->has_zp ? (size_t)ns : 0), 16);
	uint8_t *b = calloc(1, l->bytes);
	if (!b)
		return fail(why, size, "out of memory packing int4 weights (%zu bytes)", l->bytes);
	const uint8_t *wq = src->wq, *zq = src->zp;
	uint8_t *w = b + l->w_off;
	const int64_t cb = l->kp / 2;   /* bytes per column */
	for (int64_t k = 0; k < K; k++)
		for (int64_t n = 0; n < N; n++) {
			unsigned u = nib(wq, k * N + n) ^ flip;
			w[n * cb + k / 2] |= (uint8_t)(u << ((k & 1) * 4));
		}
	for (int64_t j = 0; j < l->nblk; j++)
		for (int64_t n = 0; n < N; n++) {
			int64_t si = j * N + n, di = n * l->nblk + j;
			float s = scale_at(src->sdt, src->scale, si);
			if (l->sdt == KQ_FLOAT16) {
				uint16_t h = (uint16_t)kq_f8_encode(&f16fmt, s, false);
				memcpy(b + l->s_off + (size_t)di * 2, &h, 2);
			} else {
				memcpy(b + l->s_off + (size_t)di * 4, &s, 4);
			}
			if (zq)
				b[l->z_off + (size_t)di] = (uint8_t)(nib(zq, si) ^ flip);
		}
	*buf = b;
	return 0;
}

float kqg_w4_packed_value(const struct kqg_w4_layout *l, const void *buf, int64_t n, int64_t k)
{
	const uint8_t *b = buf;
	unsigned u = nib(b + l->w_off + n * (l->kp / 2), k);
	int64_t mi = n * l->nblk + (k >> l->lbs);
	int z = l->has_zp ? b[l->z_off + mi] : l->zp_const;
	float s = l->sdt == KQ_FLOAT16 ? kqe_load(b + l->s_off, mi, KQ_FLOAT16) : kqe_load(b + l->s_off, mi, KQ_FLOAT);
	return (float)((int)u - z) * s;
}

/* ------------------------------------------------------------------------ */
/* one cuBLASLt product y^T = B' * A' (see the top)                          */
/* ------------------------------------------------------------------------ */

struct lt_mm {
	const struct cuda_lt_api *lt;
	cublasLtHandle_t h;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
	size_t ws;                   /* cuBLASLt's workspace for algo */
	bool bias;                   /* the BIAS epilogue (its pointer set per run) */
	union { int32_t i; float f; } one, zero;   /* alpha and beta in the scale type */
};

static void lt_mm_clear(struct lt_mm *mm)
{
	if (mm->lt) {
		if (mm->desc)
			(void)mm->lt->MatmulDescDestroy(mm->desc);
		if (mm->la)
			(void)mm->lt->MatrixLayoutDestroy(mm->la);
		if (mm->lb)
			(void)mm->lt->MatrixLayoutDestroy(mm->lb);
		if (mm->lc)
			(void)mm->lt->MatrixLayoutDestroy(mm->lc);
	}
	memset(mm, 0, sizeof(*mm));
}

#define LTC(call, name)                                                                                        \
	do {                                                                                                   \
		cublasStatus_t s_ = (call);                                                                    \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
			fail(why, size, "%s: cublasLt error %s", (name), cuda_lt_status_name(s_));             \
			goto bad;                                                                              \
		}                                                                                              \
	} while (0)

/* Descriptors and the heuristic's first algorithm for y[M][N] = A[M][K]
 * B[N][K]^T with A/B of type ab, y of type cd; 0, or -1 with the reason
 * (mm cleared). */
static int lt_mm_make(struct lt_mm *mm, void *handle, int M, int N, int K, cudaDataType_t ab, cudaDataType_t cd,
		      cublasComputeType_t ct, cudaDataType_t sc, bool bias, char *why, size_t size)
{
	memset(mm, 0, sizeof(*mm));
	struct ir_diag d;
	ir_diag_init(&d);
	mm->lt = cuda_lt_api(&d);
	if (!mm->lt) {
		fail(why, size, "%s", d.error ? d.error : "cuBLASLt is not available");
		ir_diag_clear(&d);
		return -1;
	}
	ir_diag_clear(&d);
	if (!handle) {
		memset(mm, 0, sizeof(*mm));
		return fail(why, size, "no cuBLASLt handle");
	}
	mm->h = handle;
	mm->bias = bias;
	if (sc == CUDA_R_32I) {
		mm->one.i = 1;
		mm->zero.i = 0;
	} else {
		mm->one.f = 1.0f;
		mm->zero.f = 0.0f;
	}
	cublasLtMatmulPreference_t pref = NULL;
	LTC(mm->lt->MatmulDescCreate(&mm->desc, ct, sc), "cublasLtMatmulDescCreate");
	int32_t opa = CUBLAS_OP_T, opb = CUBLAS_OP_N;
	LTC(mm->lt->MatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)),
	    "cublasLtMatmulDescSetAttribute(TRANSA)");
	LTC(mm->lt->MatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)),
	    "cublasLtMatmulDescSetAttribute(TRANSB)");
	if (bias) {
		uint32_t ep = CUBLASLT_EPILOGUE_BIAS;
		LTC(mm->lt->MatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
		    "cublasLtMatmulDescSetAttribute(EPILOGUE)");
	}
	LTC(mm->lt->MatrixLayoutCreate(&mm->la, ab, (uint64_t)K, (uint64_t)N, K), "cublasLtMatrixLayoutCreate(A)");
	LTC(mm->lt->MatrixLayoutCreate(&mm->lb, ab, (uint64_t)K, (uint64_t)M, K), "cublasLtMatrixLayoutCreate(B)");
	LTC(mm->lt->MatrixLayoutCreate(&mm->lc, cd, (uint64_t)N, (uint64_t)M, N), "cublasLtMatrixLayoutCreate(D)");
	LTC(mm->lt->MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
	uint64_t maxws = LT_MAX_WS;
	LTC(mm->lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxws, sizeof(maxws)),
	    "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
	static const cublasLtMatmulPreferenceAttributes_t aligns[] = {
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
	};
	uint32_t al = LT_ALIGN;
	for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++)
		LTC(mm->lt->MatmulPreferenceSetAttribute(pref, aligns[i], &al, sizeof(al)),
		    "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
	cublasLtMatmulHeuristicResult_t res[4];
	int got = 0;
	cublasStatus_t s = mm->lt->MatmulAlgoGetHeuristic(mm->h, mm->desc, mm->la, mm->lb, mm->lc, mm->lc, pref, 4,
							   res, &got);
	(void)mm->lt->MatmulPreferenceDestroy(pref);
	pref = NULL;
	if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_INVALID_VALUE) {
		fail(why, size, "cublasLtMatmulAlgoGetHeuristic: cublasLt error %s", cuda_lt_status_name(s));
		goto bad;
	}
	int pick = -1;
	for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < got && pick < 0; i++)
		if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= LT_MAX_WS)
			pick = i;
	if (pick < 0) {
		fail(why, size, "cublasLt has no algorithm for this product (%s)",
		     s == CUBLAS_STATUS_SUCCESS ? "none returned" : cuda_lt_status_name(s));
		goto bad;
	}
	mm->algo = res[pick].algo;
	mm->ws = res[pick].workspaceSize;
	return 0;
bad:
	if (pref)
		(void)mm->lt->MatmulPreferenceDestroy(pref);
	lt_mm_clear(mm);
	return -1;
}

#undef LTC

/* y = a * b^T on st; 0 or -1 with the reason. */
static int lt_mm_run(struct lt_mm *mm, const void *a, const void *b, void *y, const void *bias, void *ws,
		     cudaStream_t st, char *why, size_t size)
{
	if (mm->bias) {
		cublasStatus_t s = mm->lt->MatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
								   sizeof(bias));
		if (s != CUBLAS_STATUS_SUCCESS)
			return fail(why, size, "cublasLtMatmulDescSetAttribute(BIAS_POINTER): cublasLt error %s",
				    cuda_lt_status_name(s));
	}
	cublasStatus_t s = mm->lt->Matmul(mm->h, mm->desc, &mm->one, b, mm->la, a, mm->lb, &mm->zero, y, mm->lc, y,
					  mm->lc, &mm->algo, ws, mm->ws, st);
	if (s != CUBLAS_STATUS_SUCCESS)
		return fail(why, size, "cublasLtMatmul: cublasLt error %s", cuda_lt_status_name(s));
	return 0;
}

static cudaDataType_t lt_float_type(int dt)
{
	return dt == KQ_FLOAT16 ? CUDA_R_16F : dt == KQ_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

static size_t float_size(int dt)
{
	return dt == KQ_FLOAT ? 4 : 2;
}

/* ------------------------------------------------------------------------ */
/* INT4 plans                                                                */
/* ------------------------------------------------------------------------ */

struct kqg_w4_plan {
	struct kqg_w4_layout l;
	int xdt, m, path;
	bool has_bias;
	struct lt_mm mm;       /* path KQG_W4_DQ_GEMM */
	size_t dq_bytes;       /* the dequantized weights at the start of ws */
};

void kqg_w4_free(struct kqg_w4_plan *pl)
{
	if (!pl)
		return;
	lt_mm_clear(&pl->mm);
	free(pl);
}

struct kqg_w4_plan *kqg_w4_prepare(void *cublaslt_handle, const struct kqg_w4_layout *l, int xdt, int m,
				   int has_bias, int path, size_t *ws_bytes, char *why, size_t size)
{
	*ws_bytes = 0;
	if (xdt != KQ_FLOAT16 && xdt != KQ_BFLOAT16 && xdt != KQ_FLOAT) {
		fail(why, size, "int4 weight-only gemm needs float, float16 or bfloat16 activations (type %d)", xdt);
		return NULL;
	}
	if (kqg_w4_check(l->k, l->n, l->bs, why, size))
		return NULL;
	if (m < 1 || m > INT32_MAX) {
		fail(why, size, "int4 weight-only gemm with m = %d", m);
		return NULL;
	}
	if (path == KQG_W4_AUTO)
		path = m <= KQG_W4_MAX_M ? KQG_W4_REGS : KQG_W4_DQ_GEMM;
	if (path == KQG_W4_REGS && m > KQG_W4_MAX_M) {
		fail(why, size, "the int4 register kernel takes m up to %d (m = %d)", KQG_W4_MAX_M, m);
		return NULL;
	}
	struct kqg_w4_plan *pl = calloc(1, sizeof(*pl));
	if (!pl) {
		fail(why, size, "out of memory");
		return NULL;
	}
	pl->l = *l;
	pl->xdt = xdt;
	pl->m = m;
	pl->path = path;
	pl->has_bias = has_bias != 0;
	if (path == KQG_W4_DQ_GEMM) {
		cudaDataType_t t = lt_float_type(xdt);
		if (lt_mm_make(&pl->mm, cublaslt_handle, m, (int)l->n, (int)l->k, t, t, CUBLAS_COMPUTE_32F, CUDA_R_32F,
			       pl->has_bias, why, size)) {
			free(pl);
			return NULL;
		}
		pl->dq_bytes = align_up((size_t)l->n * (size_t)l->k * float_size(xdt), WS_ALIGN);
		*ws_bytes = pl->dq_bytes + pl->mm.ws;
	}
	return pl;
}

const char *kqg_w4_impl(const struct kqg_w4_plan *pl)
{
	return pl->path == KQG_W4_REGS ? "int4 gemv (registers)" : "int4 dequant + cublasLt gemm";
}

int kqg_w4_run(struct kqg_w4_plan *pl, const void *packed, const void *x, const void *bias, void *y, void *ws,
	       cudaStream_t st, char *why, size_t size)
{
	if (pl->has_bias != (bias != NULL))
		return fail(why, size, "int4 gemm: bias %s but the plan says otherwise", bias ? "given" : "missing");
	if (pl->path == KQG_W4_REGS) {
		cudaError_t e = kqg_w4_gemm(&pl->l, packed, pl->xdt, pl->m, x, bias, y, st);
		if (e != cudaSuccess)
			return fail(why, size, "kqg_w4_gemm: cuda error %s: %s", cudaGetErrorName(e),
				    cudaGetErrorString(e));
		return 0;
	}
	if (!aligned16(x) || !aligned16(y) || !aligned16(ws) || (bias && !aligned16(bias)))
		return fail(why, size, "int4 gemm needs buffers aligned to 16 bytes");
	cudaError_t e = kqg_w4_dequant(&pl->l, packed, pl->xdt, ws, st);
	if (e != cudaSuccess)
		return fail(why, size, "kqg_w4_dequant: cuda error %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
	return lt_mm_run(&pl->mm, x, ws, y, bias, (char *)ws + pl->dq_bytes, st, why, size);
}

int kqg_w4_run_gemm_only(struct kqg_w4_plan *pl, const void *x, const void *bias, void *y, void *ws,
			 cudaStream_t st, char *why, size_t size)
{
	if (pl->path != KQG_W4_DQ_GEMM)
		return fail(why, size, "not a dequantize + gemm plan");
	return lt_mm_run(&pl->mm, x, ws, y, bias, (char *)ws + pl->dq_bytes, st, why, size);
}

/* ------------------------------------------------------------------------ */
/* int8 and float8 plans                                                     */
/* ------------------------------------------------------------------------ */

struct kqg_lt_plan {
	struct kqg_lt p;
	int accdt;             /* KQ_INT32 or KQ_FLOAT */
	struct lt_mm mm;
	size_t acc_bytes;      /* the product at the start of ws */
};

int kqg_lt_check(const struct kqg_lt *p, char *why, size_t size)
{
	if (p->xdt != KQ_INT8 && p->xdt != KQ_F8E4M3FN)
		return fail(why, size, "cublasLt quantized gemm takes int8 or float8e4m3fn inputs (type %d)", p->xdt);
	if (p->m < 1 || p->n < 1 || p->k < 1)
		return fail(why, size, "empty product [%d,%d] x [%d,%d]", p->m, p->k, p->k, p->n);
	/* int8 (IMMA) wants leading dimensions that are multiples of 4 bytes,
	 * float8 of 16 bytes; the output's are N elements */
	int ka = p->xdt == KQ_INT8 ? 4 : 16;
	if (p->k % ka)
		return fail(why, size, "K (%d) is not a multiple of %d for cublasLt %s gemm", p->k, ka,
			    p->xdt == KQ_INT8 ? "int8" : "float8");
	if (p->n % 4)
		return fail(why, size, "N (%d) is not a multiple of 4 for cublasLt %s gemm", p->n,
			    p->xdt == KQ_INT8 ? "int8" : "float8");
	switch (p->e.ydt) {
	case KQ_INT8: case KQ_UINT8: case KQ_F8E4M3FN: case KQ_FLOAT: case KQ_FLOAT16: case KQ_BFLOAT16: break;
	default: return fail(why, size, "quantized gemm output type %d is not supported", p->e.ydt);
	}
	switch (p->e.zdt) {
	case 0: case KQ_INT8: case KQ_UINT8: case KQ_F8E4M3FN: case KQ_FLOAT: case KQ_FLOAT16: case KQ_BFLOAT16: break;
	default: return fail(why, size, "quantized gemm residual type %d is not supported", p->e.zdt);
	}
	return 0;
}

void kqg_lt_free(struct kqg_lt_plan *pl)
{
	if (!pl)
		return;
	lt_mm_clear(&pl->mm);
	free(pl);
}

struct kqg_lt_plan *kqg_lt_prepare(void *cublaslt_handle, const struct kqg_lt *p, size_t *ws_bytes, char *why,
				   size_t size)
{
	*ws_bytes = 0;
	if (kqg_lt_check(p, why, size))
		return NULL;
	struct kqg_lt_plan *pl = calloc(1, sizeof(*pl));
	if (!pl) {
		fail(why, size, "out of memory");
		return NULL;
	}
	pl->p = *p;
	int r;
	if (p->xdt == KQ_INT8) {
		pl->accdt = KQ_INT32;
		r = lt_mm_make(&pl->mm, cublaslt_handle, p->m, p->n, p->k, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I,
			       CUDA_R_32I, false, why, size);
	} else {
		pl->accdt = KQ_FLOAT;
		r = lt_mm_make(&pl->mm, cublaslt_handle, p->m, p->n, p->k, CUDA_R_8F_E4M3, CUDA_R_32F,
			       CUBLAS_COMPUTE_32F, CUDA_R_32F, false, why, size);
	}
	if (r) {
		free(pl);
		return NULL;
	}
	pl->acc_bytes = align_up((size_t)p->m * (size_t)p->n * 4, WS_ALIGN);
	*ws_bytes = pl->acc_bytes + pl->mm.ws;
	return pl;
}

int kqg_lt_run_product(struct kqg_lt_plan *pl, const void *a, const void *b, void *ws, cudaStream_t st, char *why,
		       size_t size)
{
	if (!aligned16(a) || !aligned16(b) || !aligned16(ws))
		return fail(why, size, "cublasLt quantized gemm needs buffers aligned to 16 bytes");
	return lt_mm_run(&pl->mm, a, b, ws, NULL, (char *)ws + pl->acc_bytes, st, why, size);
}

int kqg_lt_run(struct kqg_lt_plan *pl, const struct kqg_lt *p, const void *a, const void *b, void *y, void *ws,
	       cudaStream_t st, char *why, size_t size)
{
	if (p->m != pl->p.m || p->n != pl->p.n || p->k != pl->p.k || p->xdt != pl->p.xdt)
		return fail(why, size, "quantized gemm run with another shape than prepared");
	if (!p->alpha || (p->e.zdt && !p->z))
		return fail(why, size, "quantized gemm without alpha%s", p->e.zdt ? " or residual" : "");
	if (kqg_lt_run_product(pl, a, b, ws, st, why, size))
		return -1;
	cudaError_t e = kqg_epilogue(pl->accdt, ws, p->m, p->n, &p->e, p->alpha, p->beta, p->z, y, st);
	if (e != cudaSuccess)
		return fail(why, size, "kqg_epilogue: cuda error %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
	return 0;
}
