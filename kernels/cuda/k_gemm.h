/*
 * k_gemm.h - launchers of the gemm family (k_gemm.cu), called by the entries
 * in k_gemm.c: what cuBLASLt does not do for Gemm/MatMul/FusedGemm, namely
 * C broadcast into the output and the activations it has no epilogue for.
 * Plain C types only.
 *
 * Element types are ONNX's numbers: 1 (float), 10 (float16), 16 (bfloat16).
 * Every launcher returns the cudaError_t of its launch (cudaSuccess when
 * there was nothing to do, cudaErrorInvalidValue for another dtype), read
 * with cudaGetLastError right after the launch; the entries check it with
 * cuda_check.
 */
#ifndef OGSH_KERNELS_CUDA_K_GEMM_H
#define OGSH_KERNELS_CUDA_K_GEMM_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the activations of ai.ogsh FusedGemm (kernels/cpu/k_fused.c's meaning) */
enum {
	GEMM_ACT_NONE, GEMM_ACT_RELU, GEMM_ACT_CLIP, GEMM_ACT_LEAKY, GEMM_ACT_SIGMOID, GEMM_ACT_HSIGMOID,
	GEMM_ACT_HSWISH, GEMM_ACT_TANH, GEMM_ACT_GELU,
};

/*
 * y[i, j] = scale * c[ci(i, j)] for the row-major [M, N] output y, where c is
 * [cm, cn] broadcast to [M, N] (cm is 1 or M, cn is 1 or N); c NULL: zeros.
 */
cudaError_t ogsh_gemm_fill_c(int dtype, void *y, const void *c, int64_t M, int64_t N, int64_t cm, int64_t cn,
			     float scale, cudaStream_t stream);

/*
 * y = act(y + z) in place over n elements (z NULL: act(y)); what cuBLASLt's
 * epilogue did not do: FusedGemm's residual Z when Gemm's C was copied in,
 * and the activations it has none for. p0, p1: Clip's min and max,
 * LeakyRelu's alpha, HardSigmoid's alpha and beta, Gelu's approximate
 * (0: erf, 1: tanh). 16 bytes a load where y and z are 16-byte aligned.
 */
cudaError_t ogsh_gemm_epi(int dtype, void *y, const void *z, int64_t n, int act, float p0, float p1,
			  cudaStream_t stream);

/*
 * Fills n elements of y with values spread over [-1, 1] (a hash of the
 * index and seed, not zeros: tensor-core products of zeros run faster
 * than of real data, so kernel choices are timed on these).
 */
cudaError_t ogsh_gemm_fill_scratch(int dtype, void *y, int64_t n, uint32_t seed, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
