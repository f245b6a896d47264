/*
 * k_qgemm.h - quantized GEMMs on the GPU: the launchers of k_qgemm.cu and
 * the host parts of k_qgemm.c (weight packing, cuBLASLt plans). Plain C
 * types; the .cu includes this header only. Element types are ONNX's
 * numbers (KQ_* of k_quant_math.h).
 *
 * 1. INT4 weight-only MatMul: y[m][n] = sum_k x[m][k] * dq(W)[k][n] (+ bias[n])
 *    where W is ONNX's blocked DequantizeLinear (opset 21, axis 0) of
 *    W_q [K][N] int4/uint4 (two a byte, low nibble first, element k*N + n),
 *    scale [K/bs][N] and an optional zero point [K/bs][N] of W_q's type:
 *    dq = (q - zp) * scale[k/bs][n]. x, bias and y are float16, bfloat16 or
 *    float32 (all one type).
 *
 *    kqg_w4_pack re-lays W_q, scale and zp once, on the host, into one
 *    buffer (struct kqg_w4_layout says where each part is):
 *      weights  [N][Kp/2] bytes, column n's K values contiguous, low nibble
 *               first, stored unsigned: u = q for uint4, q + 8 for int4;
 *               Kp = K rounded up to 32 (the padding is never read);
 *      scales   [N][K/bs] float16 when every scale is exactly a float16,
 *               else float32;
 *      zeros    [N][K/bs] bytes, u's zero point (zp, or zp + 8 for int4),
 *               only when a zero point is given (else 0 or 8 for all).
 *    The kernel (kqg_w4_gemm, m <= KQG_W4_MAX_M) reads each column's
 *    weights in coalesced 16-byte loads (32 values), dequantizes them in
 *    registers and accumulates in float32. For larger m, kqg_w4_dequant
 *    writes dq(W) as [N][K] of x's type into a workspace and a cuBLASLt
 *    GEMM (the plan of kqg_w4_prepare) computes x * dq(W)^T.
 *
 * 2. int8 and float8 e4m3 GEMMs through cuBLASLt, for the quantized islands
 *    of Gemm/MatMul: A [M][K] (activations, row-major), B [N][K] (weights,
 *    K contiguous: cuBLASLt's "TN" layout), the product into a workspace
 *    (int32 for int8, float32 for e4m3), then kqg_epilogue applies
 *    k_qepi.h per element (alpha[n], beta[n], residual z [M][N], the
 *    activation, quantize or write float) into y [M][N].
 */
#ifndef OGSH_KERNELS_CUDA_K_QGEMM_H
#define OGSH_KERNELS_CUDA_K_QGEMM_H

#include "kernels/cuda/k_qepi.h"

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* INT4 weight-only                                                          */
/* ------------------------------------------------------------------------ */

#define KQG_W4_MAX_M 16     /* the register kernel's largest m */
#define KQG_W4_KALIGN 32    /* Kp: K rounded up to this */

/* ONNX's inputs of DequantizeLinear(W_q, scale, zp) with block_size bs on
 * axis 0 of W [K][N], on the host. */
struct kqg_w4_src {
	int wdt;              /* KQ_INT4 or KQ_UINT4 */
	const void *wq;       /* [K][N] packed two a byte, low nibble first */
	int sdt;              /* KQ_FLOAT, KQ_FLOAT16 or KQ_BFLOAT16 */
	const void *scale;    /* [K/bs][N] */
	const void *zp;       /* [K/bs][N] of wdt, packed like wq; NULL: none */
	int64_t k, n;
	int bs;               /* a power of two, 16..256; K a multiple of it */
};

/* Where kqg_w4_pack put things (byte offsets into its buffer). */
struct kqg_w4_layout {
	int64_t k, n, kp;     /* kp: K rounded up to KQG_W4_KALIGN */
	int64_t nblk;         /* K / bs */
	int bs, lbs;          /* block size and its log2 */
	int sdt;              /* the packed scales: KQ_FLOAT16 or KQ_FLOAT */
	int has_zp;           /* zeros present; else every zero is zp_const */
	int zp_const;         /* 8 (int4 without zp) or 0 (uint4 without zp) */
	size_t w_off, s_off, z_off, bytes;   /* offsets (16-byte aligned) and the total */
};

/* Whether K, N and bs can be packed: 0, or -1 with the reason. */
int kqg_w4_check(int64_t k, int64_t n, int bs, char *why, size_t size);

/* Packs src on the host into a new buffer (*buf, l->bytes, free with
 * free()) laid out as *l says; 0, or -1 with the reason (then *buf is NULL). */
int kqg_w4_pack(const struct kqg_w4_src *src, struct kqg_w4_layout *l, void **buf, char *why, size_t size);

/* The dequantized weight (n, k) of a packed buffer on the host (what the
 * kernels compute): for tests. */
float kqg_w4_packed_value(const struct kqg_w4_layout *l, const void *buf, int64_t n, int64_t k);

/*
 * y[m][N] = x[m][K] * dq(W) (+ bias[N]) with the weights dequantized in
 * registers, 1 <= m <= KQG_W4_MAX_M. xdt: KQ_FLOAT16, KQ_BFLOAT16 or
 * KQ_FLOAT (x, bias and y). packed: the device copy of kqg_w4_pack's
 * buffer (16-byte aligned); x and y 16-byte aligned, x rows K apart.
 * cudaErrorInvalidValue for other types, m or misaligned pointers.
 */
cudaError_t kqg_w4_gemm(const struct kqg_w4_layout *l, const void *packed, int xdt, int m, const void *x,
			const void *bias, void *y, cudaStream_t st);

/* w[N][K] (of type ydt: float16, bfloat16, float) = dq(W)^T. */
cudaError_t kqg_w4_dequant(const struct kqg_w4_layout *l, const void *packed, int ydt, void *w, cudaStream_t st);

/* A whole INT4 MatMul of one m: the register kernel for m <= KQG_W4_MAX_M
 * (or `path` 1), else (or `path` 2) dequantize into the workspace and a
 * cuBLASLt GEMM with its bias epilogue. */
struct kqg_w4_plan;
enum { KQG_W4_AUTO = 0, KQG_W4_REGS = 1, KQG_W4_DQ_GEMM = 2 };
/* NULL with the reason when unsupported (cuBLASLt: no algorithm); *ws_bytes
 * the device workspace run needs. cublaslt_handle may be NULL when only
 * the register kernel is used. */
struct kqg_w4_plan *kqg_w4_prepare(void *cublaslt_handle, const struct kqg_w4_layout *l, int xdt, int m,
				   int has_bias, int path, size_t *ws_bytes, char *why, size_t size);
/* Launches on st; 0, or -1 with the reason. */
int kqg_w4_run(struct kqg_w4_plan *pl, const void *packed, const void *x, const void *bias, void *y, void *ws,
	       cudaStream_t st, char *why, size_t size);
/* Only the cuBLASLt GEMM of a KQG_W4_DQ_GEMM plan, on the weights a
 * previous kqg_w4_run left in ws: a float16 (or x's type) GEMM of the same
 * shape, to time the INT4 kernel against. */
int kqg_w4_run_gemm_only(struct kqg_w4_plan *pl, const void *x, const void *bias, void *y, void *ws,
			 cudaStream_t st, char *why, size_t size);
/* "int4 gemv (registers)", "int4 dequant + cublasLt gemm" */
const char *kqg_w4_impl(const struct kqg_w4_plan *pl);
void kqg_w4_free(struct kqg_w4_plan *pl);

/* ------------------------------------------------------------------------ */
/* int8 and float8 GEMMs through cuBLASLt                                    */
/* ------------------------------------------------------------------------ */

/* One product y[M][N] = epilogue(A[M][K] * B[N][K]^T). */
struct kqg_lt {
	int m, n, k;
	int xdt;                /* A and B: KQ_INT8 or KQ_F8E4M3FN */
	struct kqe_params e;    /* y's type, activation, residual type and scale */
	const float *alpha;     /* [N] device: per output channel */
	const float *beta;      /* [N] device, NULL: 0 */
	const void *z;          /* [M][N] device of e.zdt when e.zdt != 0 */
};

/*
 * The per-element epilogue: y[i] = kqe_store(kqe_value(acc[i], alpha[n],
 * beta[n], z[i])) for the M x N accumulators acc (KQ_INT32 or KQ_FLOAT),
 * n = i % N.
 */
cudaError_t kqg_epilogue(int accdt, const void *acc, int64_t m, int64_t n, const struct kqe_params *e,
			 const float *alpha, const float *beta, const void *z, void *y, cudaStream_t st);

struct kqg_lt_plan;
/* Cheap checks without cuBLASLt (types, sizes, K a multiple of 4 for int8,
 * 16 for e4m3): 0, or -1 with the reason. */
int kqg_lt_check(const struct kqg_lt *p, char *why, size_t size);
/* Once per shape: descriptors, the heuristic's first algorithm and the
 * workspace (the product's int32/float32 buffer plus cuBLASLt's). NULL with
 * the reason when unsupported (then fall back). p's pointers may be NULL
 * here: run takes them from the struct given to it. */
struct kqg_lt_plan *kqg_lt_prepare(void *cublaslt_handle, const struct kqg_lt *p, size_t *ws_bytes, char *why,
				   size_t size);
/* Launches on st with p's alpha/beta/z; a, b, y, ws 16-byte aligned. 0,
 * or -1 with the reason. */
int kqg_lt_run(struct kqg_lt_plan *pl, const struct kqg_lt *p, const void *a, const void *b, void *y, void *ws,
	       cudaStream_t st, char *why, size_t size);
/* Only the cuBLASLt product into acc (int32 or float32 [M][N], the first
 * bytes of ws), for timing; 0 or -1. */
int kqg_lt_run_product(struct kqg_lt_plan *pl, const void *a, const void *b, void *ws, cudaStream_t st, char *why,
		       size_t size);
void kqg_lt_free(struct kqg_lt_plan *pl);

#ifdef __cplusplus
}
#endif

#endif
