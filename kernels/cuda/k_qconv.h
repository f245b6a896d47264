/*
 * k_qconv.h - the integer/FP8 tensor-core kernel of a quantized island
 * (k_qconv.cu): an implicit-GEMM convolution on channels-last int8 or float8
 * E4M3FN tensors with int32 (FP8: float32) accumulation and the fused
 * epilogue of k_qepi.h. A GEMM [M,K]x[K,N] is the 1x1 convolution with
 * n = M, h = w = p = q = 1, c = K, k = N (w then is the [N][K] matrix,
 * K contiguous: the "TN" layout). Plain C types only.
 *
 * Grouped convolutions with c/groups a multiple of 16 run on tensor cores
 * (mma.sync m16n8k32, ldmatrix, a cp.async pipeline); c/groups == 1
 * (depthwise, with any channel multiplier k/groups) runs on a direct kernel
 * with the same accumulation and epilogue. Other shapes are unsupported.
 */
#ifndef OGSH_KERNELS_CUDA_K_QCONV_H
#define OGSH_KERNELS_CUDA_K_QCONV_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/k_qepi.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kqc_conv {
	int xdt;              /* x and w (and a quantized z): KQ_INT8 or KQ_F8E4M3FN */
	int n, h, w, c;       /* x: [n][h][w][c], channels-last, contiguous */
	int k, r, s;          /* w: [k][r][s][c / groups], contiguous (the caller re-lays ONNX's [k][c/g][r][s]) */
	int groups;
	int p, q;             /* y: [n][p][q][k], channels-last; z (if any) the same shape */
	int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;   /* pads: top/left (bottom/right follow from p, q) */
	struct kqe_params e;  /* the epilogue (k_qepi.h): ydt, activation, residual type/scale */
	const float *alpha;   /* device: k floats */
	const float *beta;    /* device: k floats, or NULL */
	const void *z;        /* device: the residual, or NULL (then e.zdt is 0) */
};

/* Whether the kernel runs this shape; false with a reason ("input channels
 * per group (24) not a multiple of 16"). */
bool kqc_supported(const struct kqc_conv *p, char *why, size_t size);

/* How many tile variants the launcher offers for this shape (>= 1 when
 * supported, 0 when not); the caller times them. */
int kqc_variants(const struct kqc_conv *p);

/* A short name of variant v, for `profile` ("int8 igemm 128x128x64 4-stage");
 * "" for a v out of range. */
const char *kqc_variant_name(const struct kqc_conv *p, int v);

/* Launches variant v on st; no allocation, no synchronisation (capturable
 * in a CUDA graph). x, w, y must be 16-byte aligned (cudaErrorInvalidValue
 * otherwise, as for an unsupported shape or a v out of range). */
cudaError_t kqc_conv(const struct kqc_conv *p, int v, const void *x, const void *w, void *y, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
