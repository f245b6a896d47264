// k_calib.cu - the calibration statistics of one tensor on the GPU
// (launchers declared in k_calib.h, used by k_calib.c): pass 1 a
// reduction (non-finite count, min, max, max |x|), pass 2 the 2048-bin
// histogram of |x|, and per-channel sums of |x|. Memory-bound: grid-stride
// loops over coalesced loads, one template instance per float type.
//
// The histogram must equal ir_calib_observe's bin for bin, so the bin of a
// finite x is computed as the CPU does: fabsf(x) * scale in float (a
// single IEEE multiply rounded to nearest: __fmul_rn, which nvcc never
// contracts; denormals are kept, as the build does not flush them), then
// truncated to an unsigned integer and clamped to the last bin.

#include "kernels/cuda/k_calib.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

namespace {

const int THREADS = 256;
const int WARPS = THREADS / 32;
const unsigned FULL = 0xffffffffu;

template <int DT> __device__ __forceinline__ float ld(const void *x, int64_t i);
template <> __device__ __forceinline__ float ld<1>(const void *x, int64_t i)
{
	return static_cast<const float *>(x)[i];
}
template <> __device__ __forceinline__ float ld<10>(const void *x, int64_t i)
{
	return __half2float(static_cast<const __half *>(x)[i]);
}
template <> __device__ __forceinline__ float ld<16>(const void *x, int64_t i)
{
	return __bfloat162float(static_cast<const __nv_bfloat16 *>(x)[i]);
}

__device__ __forceinline__ bool finite_bits(float v)
{
	return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}

// ---- pass 1 ----

// min/max/count of a thread's values reduced over the block; thread 0 gets the result
__device__ void block_reduce(float &mn, float &mx, unsigned long long &nf, unsigned long long &fi)
{
	__shared__ float smn[WARPS], smx[WARPS];
	__shared__ unsigned long long snf[WARPS], sfi[WARPS];
	for (int o = 16; o > 0; o >>= 1) {
		float a = __shfl_down_sync(FULL, mn, o), b = __shfl_down_sync(FULL, mx, o);
		unsigned long long c = __shfl_down_sync(FULL, nf, o), e = __shfl_down_sync(FULL, fi, o);
		mn = a < mn ? a : mn;
		mx = b > mx ? b : mx;
		nf += c;
		fi += e;
	}
	int w = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0) {
		smn[w] = mn;
		smx[w] = mx;
		snf[w] = nf;
		sfi[w] = fi;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int k = 1; k < WARPS; k++) {
			mn = smn[k] < mn ? smn[k] : mn;
			mx = smx[k] > mx ? smx[k] : mx;
			nf += snf[k];
			fi += sfi[k];
		}
	}
}

template <int DT>
__global__ void __launch_bounds__(THREADS) k_stats(const void *x, int64_t n, kc_summary *parts)
{
	float mn = INFINITY, mx = -INFINITY;
	unsigned long long nf = 0, fi = 0;
	int64_t stride = (int64_t)gridDim.x * THREADS;
	for (int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
		float v = ld<DT>(x, i);
		if (!finite_bits(v)) {
			nf++;
			continue;
		}
		fi++;
		mn = v < mn ? v : mn;
		mx = v > mx ? v : mx;
	}
	block_reduce(mn, mx, nf, fi);
	if (threadIdx.x == 0) {
		kc_summary &p = parts[blockIdx.x];
		p.finite = fi;
		p.nonfinite = nf;
		p.min = mn;
		p.max = mx;
		p.amax = 0;
		p.pad = 0;
	}
}

// one block: the blocks' results into one
__global__ void __launch_bounds__(THREADS) k_stats_final(const kc_summary *parts, int nparts, kc_summary *out)
{
	float mn = INFINITY, mx = -INFINITY;
	unsigned long long nf = 0, fi = 0;
	for (int i = threadIdx.x; i < nparts; i += THREADS) {
		kc_summary p = parts[i];
		mn = p.min < mn ? p.min : mn;
		mx = p.max > mx ? p.max : mx;
		nf += p.nonfinite;
		fi += p.finite;
	}
	block_reduce(mn, mx, nf, fi);
	if (threadIdx.x == 0) {
		out->finite = fi;
		out->nonfinite = nf;
		out->min = mn;
		out->max = mx;
		out->amax = fi ? fmaxf(fabsf(mn), fabsf(mx)) : 0.0f;
		out->pad = 0;
	}
}

// ---- pass 2 ----

template <int DT>
__global__ void __launch_bounds__(THREADS) k_hist(const void *x, int64_t n, float scale, unsigned long long *bins)
{
	__shared__ unsigned int h[KC_BINS];
	for (int i = threadIdx.x; i < KC_BINS; i += THREADS)
		h[i] = 0;
	__syncthreads();
	// bin 0 (the zeros after a ReLU) in a register: no shared atomics on one counter
	unsigned int zero = 0;
	int64_t stride = (int64_t)gridDim.x * THREADS;
	for (int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
		float v = ld<DT>(x, i);
		if (!finite_bits(v))
			continue;
		unsigned int k = __float2uint_rz(__fmul_rn(fabsf(v), scale));
		k = k < KC_BINS ? k : KC_BINS - 1;
		if (k == 0)
			zero++;
		else
			atomicAdd(&h[k], 1u);
	}
	for (int o = 16; o > 0; o >>= 1)
		zero += __shfl_down_sync(FULL, zero, o);
	if (threadIdx.x % 32 == 0 && zero)
		atomicAdd(&h[0], zero);
	__syncthreads();
	for (int i = threadIdx.x; i < KC_BINS; i += THREADS)
		if (h[i])
			atomicAdd(&bins[i], (unsigned long long)h[i]);
}

// ---- per-channel sums ----

// thread: column j of the rows [r0, r1); channel j / inner
template <int DT>
__global__ void __launch_bounds__(THREADS) k_chan(const void *x, int64_t outer, int64_t ncol, int64_t inner,
						  int64_t rows_per_block, double *sums)
{
	int64_t j = (int64_t)blockIdx.x * THREADS + threadIdx.x;
	if (j >= ncol)
		return;
	int64_t r0 = (int64_t)blockIdx.y * rows_per_block, r1 = r0 + rows_per_block;
	if (r1 > outer)
		r1 = outer;
	if (r0 >= r1)
		return;
	double s = 0;
	for (int64_t r = r0; r < r1; r++) {
		float v = ld<DT>(x, r * ncol + j);
		if (finite_bits(v))
			s += (double)fabsf(v);
	}
	atomicAdd(&sums[j / inner], s);
}

int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

bool known(int xdt)
{
	return xdt == 1 || xdt == 10 || xdt == 16;
}

} // namespace

extern "C" cudaError_t kc_stats(const void *x, int xdt, int64_t n, kc_summary *parts, kc_summary *out, cudaStream_t st)
{
	if (!known(xdt) || n < 0)
		return cudaErrorInvalidValue;
	int64_t b = cdiv(n, THREADS * 8);
	if (b > KC_MAX_PARTS)
		b = KC_MAX_PARTS;
	if (b < 1)
		b = 1;
	unsigned g = (unsigned)b;
	switch (xdt) {
	case 1:
		k_stats<1><<<g, THREADS, 0, st>>>(x, n, parts);
		break;
	case 10:
		k_stats<10><<<g, THREADS, 0, st>>>(x, n, parts);
		break;
	default:
		k_stats<16><<<g, THREADS, 0, st>>>(x, n, parts);
		break;
	}
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	k_stats_final<<<1, THREADS, 0, st>>>(parts, (int)g, out);
	return cudaGetLastError();
}

extern "C" cudaError_t kc_hist(const void *x, int xdt, int64_t n, float scale, unsigned long long *bins,
			       cudaStream_t st)
{
	if (!known(xdt) || n < 0)
		return cudaErrorInvalidValue;
	if (n == 0)
		return cudaSuccess;
	int64_t b = cdiv(n, THREADS * 8);
	if (b > 1024)
		b = 1024;
	// a block's 32-bit shared counts (and a thread's bin-0 count) stay below 2^30
	if (cdiv(n, b) > ((int64_t)1 << 30))
		b = cdiv(n, (int64_t)1 << 30);
	if (b > INT32_MAX)
		return cudaErrorInvalidValue;
	unsigned g = (unsigned)b;
	switch (xdt) {
	case 1:
		k_hist<1><<<g, THREADS, 0, st>>>(x, n, scale, bins);
		break;
	case 10:
		k_hist<10><<<g, THREADS, 0, st>>>(x, n, scale, bins);
		break;
	default:
		k_hist<16><<<g, THREADS, 0, st>>>(x, n, scale, bins);
		break;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t kc_chan_abssum(const void *x, int xdt, int64_t outer, int64_t n_chan, int64_t inner,
				      double *sums, cudaStream_t st)
{
	if (!known(xdt) || outer < 0 || n_chan <= 0 || inner <= 0 || n_chan > INT64_MAX / inner)
		return cudaErrorInvalidValue;
	if (outer == 0)
		return cudaSuccess;
	int64_t ncol = n_chan * inner;
	int64_t gx = cdiv(ncol, THREADS);
	if (gx > INT32_MAX)
		return cudaErrorInvalidValue;
	// about 2^21 threads in all: enough to fill the GPU, each summing a run of rows
	int64_t gy = cdiv((int64_t)1 << 21, gx * THREADS);
	if (gy > outer)
		gy = outer;
	if (gy > 65535)
		gy = 65535;
	if (gy < 1)
		gy = 1;
	int64_t rpb = cdiv(outer, gy);
	gy = cdiv(outer, rpb);
	dim3 grid((unsigned)gx, (unsigned)gy);
	switch (xdt) {
	case 1:
		k_chan<1><<<grid, THREADS, 0, st>>>(x, outer, ncol, inner, rpb, sums);
		break;
	case 10:
		k_chan<10><<<grid, THREADS, 0, st>>>(x, outer, ncol, inner, rpb, sums);
		break;
	default:
		k_chan<16><<<grid, THREADS, 0, st>>>(x, outer, ncol, inner, rpb, sums);
		break;
	}
	return cudaGetLastError();
}
