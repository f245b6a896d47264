// k_gemm.cu - CUDA kernels and launchers of the gemm family (entries in k_gemm.c):
// Gemm's C broadcast into the output and the activations cuBLASLt has no
// epilogue for. Both are memory-bound grid-stride loops; values are computed
// in float and rounded once when stored.
#include "kernels/cuda/k_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int DT_F32 = 1, DT_F16 = 10, DT_BF16 = 16;
constexpr int THREADS = 256;
// enough blocks to fill 132 SMs many times over; the loops stride past it
constexpr int64_t MAX_BLOCKS = 132 * 32;

__device__ __forceinline__ float ld(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half *p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half *p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

unsigned blocks_for(int64_t n)
{
	int64_t b = (n + THREADS - 1) / THREADS;
	return (unsigned)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
}

template <typename T>
__global__ void fill_c_kernel(T *y, const T *c, int64_t M, int64_t N, int64_t cm, int64_t cn, float scale)
{
	int64_t n = M * N;
	for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
	     idx += (int64_t)gridDim.x * blockDim.x) {
		if (!c) {
			st(y, idx, 0.0f);
			continue;
		}
		int64_t i = idx / N, j = idx - i * N;
		int64_t ci = (cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j);
		st(y, idx, scale * ld(c, ci));
	}
}

// the same formulas, NaN handling and defaults as kernels/cpu/k_fused.c
__device__ __forceinline__ float act_of(int act, float v, float p0, float p1)
{
	switch (act) {
	case GEMM_ACT_RELU: return v < 0.0f ? 0.0f : v;   // NaN stays NaN
	case GEMM_ACT_CLIP: return v < p0 ? p0 : v > p1 ? p1 : v;
	case GEMM_ACT_LEAKY: return v < 0.0f ? p0 * v : v;
	case GEMM_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
	case GEMM_ACT_HSIGMOID: {
		float t = p0 * v + p1;
		return t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
	}
	case GEMM_ACT_HSWISH: {
		float t = v / 6.0f + 0.5f;
		return v * (t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t);
	}
	case GEMM_ACT_TANH: return tanhf(v);
	case GEMM_ACT_GELU:
		if (p0 != 0.0f)
			return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
		return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
	default: return v;
	}
}

template <typename T>
__global__ void act_kernel(T *y, int64_t n, int act, float p0, float p1)
{
	for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
	     idx += (int64_t)gridDim.x * blockDim.x)
		st(y, idx, act_of(act, ld(y, idx), p0, p1));
}

template <typename T>
cudaError_t fill_c_t(void *y, const void *c, int64_t M, int64_t N, int64_t cm, int64_t cn, float scale,
		     cudaStream_t stream)
{
	fill_c_kernel<T><<<blocks_for(M * N), THREADS, 0, stream>>>((T *)y, (const T *)c, M, N, cm, cn, scale);
	return cudaGetLastError();
}

template <typename T>
cudaError_t act_t(void *y, int64_t n, int act, float p0, float p1, cudaStream_t stream)
{
	act_kernel<T><<<blocks_for(n), THREADS, 0, stream>>>((T *)y, n, act, p0, p1);
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t ogsh_gemm_fill_c(int dtype, void *y, const void *c, int64_t M, int64_t N, int64_t cm,
					int64_t cn, float scale, cudaStream_t stream)
{
	if (M <= 0 || N <= 0)
		return cudaSuccess;
	if (c && (cm < 1 || cn < 1))
		return cudaErrorInvalidValue;
	switch (dtype) {
	case DT_F32: return fill_c_t<float>(y, c, M, N, cm, cn, scale, stream);
	case DT_F16: return fill_c_t<__half>(y, c, M, N, cm, cn, scale, stream);
	case DT_BF16: return fill_c_t<__nv_bfloat16>(y, c, M, N, cm, cn, scale, stream);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t ogsh_gemm_act(int dtype, void *y, int64_t n, int act, float p0, float p1, cudaStream_t stream)
{
	if (n <= 0 || act == GEMM_ACT_NONE)
		return cudaSuccess;
	switch (dtype) {
	case DT_F32: return act_t<float>(y, n, act, p0, p1, stream);
	case DT_F16: return act_t<__half>(y, n, act, p0, p1, stream);
	case DT_BF16: return act_t<__nv_bfloat16>(y, n, act, p0, p1, stream);
	default: return cudaErrorInvalidValue;
	}
}
