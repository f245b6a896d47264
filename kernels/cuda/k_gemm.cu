// k_gemm.cu - CUDA kernels and launchers of the gemm family (entries in k_gemm.c):
// Gemm's C broadcast into the output, FusedGemm's residual and the
// activations cuBLASLt's epilogue did not do, and the scratch fill kernel
// choices are timed on. All are memory-bound grid-stride loops; values are
// computed in float and rounded once when stored.
#include "kernels/cuda/k_gemm.h"
#include "kernels/cuda/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

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

// y = act(y + z): V elements (16 bytes) a step where the pointers allow it (vec), the rest one by one
template <typename T> struct alignas(16) V16 {
	T v[16 / sizeof(T)];
};

template <typename T>
__global__ void epi_kernel(T *__restrict__ y, const T *__restrict__ z, int64_t n, int act, float p0, float p1, bool vec)
{
	constexpr int V = 16 / sizeof(T);
	const int64_t nv = vec ? n / V : 0, step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += step) {
		V16<T> a = reinterpret_cast<const V16<T> *>(y)[i], b;
		if (z)
			b = reinterpret_cast<const V16<T> *>(z)[i];
#pragma unroll
		for (int j = 0; j < V; j++) {
			float v = ld(a.v, j);
			if (z)
				v += ld(b.v, j);
			st(a.v, j, act_of(act, v, p0, p1));
		}
		reinterpret_cast<V16<T> *>(y)[i] = a;
	}
	for (int64_t i = nv * V + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
		st(y, i, act_of(act, ld(y, i) + (z ? ld(z, i) : 0.0f), p0, p1));
}

// 0.5 v (1 + erf(v / sqrt 2)) with erf by Abramowitz and Stegun's 7.1.26 (absolute error at most
// 1.5e-7): erf(x) = 1 - q, q = t (a1 + t (a2 + ... a5 t)) exp(-x^2), t = 1 / (1 + p x) for x >= 0.
// Branch-free, two MUFU operations and a few FMAs an element where erff takes tens of instructions and
// branches: the exact GELU after a float16/bfloat16 GEMM was bound by arithmetic, not memory. For
// v < 0 it is 0.5 v q (no cancellation in 1 + erf), for v >= 0 0.5 v (2 - q).
__device__ __forceinline__ float gelu_as(float v)
{
	const float x = fabsf(v) * 0.7071067811865476f;
	const float t = __fdividef(1.0f, fmaf(0.3275911f, x, 1.0f));
	float q = fmaf(t, 1.061405429f, -1.453152027f);
	q = fmaf(t, q, 1.421413741f);
	q = fmaf(t, q, -0.284496736f);
	q = fmaf(t, q, 0.254829592f);
	q = q * t * __expf(-x * x);
	return 0.5f * v * (v < 0.0f ? q : 2.0f - q);
}

// y = gelu(y [+ z]) for 2-byte types, 16 bytes a step (y and z 16-byte aligned, n a multiple of 8)
template <typename T, bool Z>
__global__ void gelu_epi_kernel(T *__restrict__ y, const T *__restrict__ z, int64_t nv)
{
	constexpr int V = 16 / sizeof(T);
	const int64_t step = (int64_t)gridDim.x * blockDim.x;
	pdl_wait();   // launched early (pdl.cuh): y is the product the kernel before writes
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += step) {
		V16<T> a = reinterpret_cast<const V16<T> *>(y)[i], b;
		if (Z)
			b = reinterpret_cast<const V16<T> *>(z)[i];
#pragma unroll
		for (int j = 0; j < V; j++) {
			float v = ld(a.v, j);
			if (Z)
				v += ld(b.v, j);
			st(a.v, j, gelu_as(v));
		}
		reinterpret_cast<V16<T> *>(y)[i] = a;
	}
}

template <typename T>
cudaError_t fill_c_t(void *y, const void *c, int64_t M, int64_t N, int64_t cm, int64_t cn, float scale,
		     cudaStream_t stream)
{
	fill_c_kernel<T><<<blocks_for(M * N), THREADS, 0, stream>>>((T *)y, (const T *)c, M, N, cm, cn, scale);
	return cudaGetLastError();
}

// element i of the scratch fill: a 32-bit mix of (i, seed) mapped to [-1, 1]
template <typename T> __global__ void scratch_kernel(T *y, int64_t n, uint32_t seed)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)(i >> 32) ^ seed;
		h ^= h >> 16;
		h *= 0x7FEB352Du;
		h ^= h >> 15;
		h *= 0x846CA68Bu;
		h ^= h >> 16;
		st(y, i, (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
	}
}

template <typename T>
cudaError_t epi_t(void *y, const void *z, int64_t n, int act, float p0, float p1, cudaStream_t stream)
{
	const bool vec = (uintptr_t)y % 16 == 0 && (uintptr_t)z % 16 == 0;
	if (sizeof(T) == 2 && vec && act == GEMM_ACT_GELU && p0 == 0.0f && n % 8 == 0) {
		const int64_t nv = n / 8;
		if (z)
			return pdl_launch(gelu_epi_kernel<T, true>, blocks_for(nv), THREADS, stream, (T *)y, (const T *)z, nv);
		return pdl_launch(gelu_epi_kernel<T, false>, blocks_for(nv), THREADS, stream, (T *)y, (const T *)NULL, nv);
	}
	const int64_t units = vec ? n / (16 / (int64_t)sizeof(T)) + 1 : n;
	epi_kernel<T><<<blocks_for(units), THREADS, 0, stream>>>((T *)y, (const T *)z, n, act, p0, p1, vec);
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

extern "C" cudaError_t ogsh_gemm_epi(int dtype, void *y, const void *z, int64_t n, int act, float p0, float p1,
				     cudaStream_t stream)
{
	if (n <= 0 || (act == GEMM_ACT_NONE && !z))
		return cudaSuccess;
	switch (dtype) {
	case DT_F32: return epi_t<float>(y, z, n, act, p0, p1, stream);
	case DT_F16: return epi_t<__half>(y, z, n, act, p0, p1, stream);
	case DT_BF16: return epi_t<__nv_bfloat16>(y, z, n, act, p0, p1, stream);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t ogsh_gemm_fill_scratch(int dtype, void *y, int64_t n, uint32_t seed, cudaStream_t stream)
{
	if (n <= 0)
		return cudaSuccess;
	switch (dtype) {
	case DT_F32: scratch_kernel<float><<<blocks_for(n), THREADS, 0, stream>>>((float *)y, n, seed); break;
	case DT_F16: scratch_kernel<__half><<<blocks_for(n), THREADS, 0, stream>>>((__half *)y, n, seed); break;
	case DT_BF16:
		scratch_kernel<__nv_bfloat16><<<blocks_for(n), THREADS, 0, stream>>>((__nv_bfloat16 *)y, n, seed);
		break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}
