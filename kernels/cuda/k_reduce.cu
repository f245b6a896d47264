// k_reduce.cu - CUDA kernels and launchers of the reduce family (entries in k_reduce.c).
//
// Rows are reduced by a warp (short rows) or a block of 256 threads (long
// rows) with shuffles and a shared-memory tree; strided "column" reductions
// give each thread one output, so that neighbouring threads read
// neighbouring elements. Float types accumulate in float.
#include "kernels/cuda/k_reduce.h"
#include "kernels/cuda/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

namespace {

constexpr int BS = 256;   // threads of a block
constexpr unsigned FULL = 0xffffffffu;

// ---- element conversion ----

template <typename T> __device__ __forceinline__ float tof(T v) { return (float)v; }
template <> __device__ __forceinline__ float tof<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float tof<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T fromf(float v) { return (T)v; }
template <> __device__ __forceinline__ __half fromf<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromf<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// element i of a float tensor of runtime dtype
__device__ __forceinline__ float ldf(const void *p, int dt, int64_t i)
{
	switch (dt) {
	case RD_F16: return __half2float(((const __half *)p)[i]);
	case RD_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
	case RD_F64: return (float)((const double *)p)[i];
	default: return ((const float *)p)[i];
	}
}

__device__ __forceinline__ void stf(void *p, int dt, int64_t i, float v)
{
	switch (dt) {
	case RD_F16: ((__half *)p)[i] = __float2half_rn(v); break;
	case RD_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
	case RD_F64: ((double *)p)[i] = (double)v; break;
	default: ((float *)p)[i] = v; break;
	}
}

// ---- group reductions: TPR == 32 (a warp) or BS (the whole block) ----

struct FSum { __device__ float operator()(float a, float b) const { return a + b; } };
struct FMax { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };

template <typename A, typename F> __device__ __forceinline__ A warp_all(A v, F f)
{
	for (int o = 16; o > 0; o >>= 1)
		v = f(v, __shfl_xor_sync(FULL, v, o));
	return v;
}

// every thread of the block gets the result; sm holds 32 entries
template <typename A, typename F> __device__ A block_all(A v, F f, A *sm)
{
	v = warp_all(v, f);
	const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		sm[w] = v;
	__syncthreads();
	v = sm[0];
	for (int i = 1; i < nw; i++)
		v = f(v, sm[i]);
	return v;
}

template <int TPR, typename A, typename F> __device__ __forceinline__ A group_all(A v, F f, A *sm)
{
	if (TPR == 32)
		return warp_all(v, f);
	return block_all(v, f, sm);
}

// ---- plans ----

__device__ __forceinline__ int64_t kept_off(const rd_plan &p, int64_t o)
{
	int64_t off = 0;
	for (int d = p.nk - 1; d >= 0; d--) {
		int64_t q = o / p.kdims[d];
		off += (o - q * p.kdims[d]) * p.kstr[d];
		o = q;
	}
	return off;
}

__device__ __forceinline__ int64_t red_off(const rd_plan &p, int64_t j)
{
	if (p.nr == 1)
		return j * p.rstr[0];
	int64_t off = 0;
	for (int d = p.nr - 1; d >= 0; d--) {
		int64_t q = j / p.rdims[d];
		off += (j - q * p.rdims[d]) * p.rstr[d];
		j = q;
	}
	return off;
}

static unsigned grid_for(int64_t n, int64_t per_block)
{
	int64_t g = (n + per_block - 1) / per_block;
	if (g < 1)
		g = 1;
	if (g > (1 << 20))
		g = 1 << 20;
	return (unsigned)g;
}

// ------------------------------------------------------------------------
// Reduce*
// ------------------------------------------------------------------------

template <typename T> struct RT { using A = float; static constexpr bool isint = false; };
template <> struct RT<int32_t> { using A = long long; static constexpr bool isint = true; };
template <> struct RT<int64_t> { using A = long long; static constexpr bool isint = true; };

template <typename T> __device__ __forceinline__ typename RT<T>::A r_init(int op)
{
	if constexpr (RT<T>::isint) {
		const long long lo = sizeof(T) == 4 ? (long long)INT32_MIN : (long long)INT64_MIN;
		const long long hi = sizeof(T) == 4 ? (long long)INT32_MAX : (long long)INT64_MAX;
		return op == RD_MAX ? lo : op == RD_MIN ? hi : op == RD_PROD ? 1 : 0;
	} else {
		return op == RD_MAX ? -INFINITY : op == RD_MIN ? INFINITY : op == RD_PROD ? 1.f : 0.f;
	}
}

// the contribution of one element (m: RD_LSE's shift)
template <typename T> __device__ __forceinline__ typename RT<T>::A r_map(int op, T x, float m)
{
	if constexpr (RT<T>::isint) {
		unsigned long long u = (unsigned long long)(long long)x;
		switch (op) {
		case RD_L1: return (long long)((long long)x < 0 ? 0ull - u : u);
		case RD_SUMSQ: return (long long)(u * u);
		default: return (long long)x;
		}
	} else {
		float v = tof(x);
		switch (op) {
		case RD_L1: return fabsf(v);
		case RD_L2: case RD_SUMSQ: return v * v;
		case RD_LSE: return expf(v - m);
		default: return v;
		}
	}
}

struct RComb {
	int op;
	__device__ float operator()(float a, float b) const
	{
		switch (op) {
		case RD_MAX: return isnan(a) ? a : (b > a || isnan(b)) ? b : a;
		case RD_MIN: return isnan(a) ? a : (b < a || isnan(b)) ? b : a;
		case RD_PROD: return a * b;
		default: return a + b;
		}
	}
	__device__ long long operator()(long long a, long long b) const
	{
		switch (op) {
		case RD_MAX: return b > a ? b : a;
		case RD_MIN: return b < a ? b : a;
		case RD_PROD: return (long long)((unsigned long long)a * (unsigned long long)b);
		default: return (long long)((unsigned long long)a + (unsigned long long)b);
		}
	}
};

template <typename T> __device__ __forceinline__ T r_final(int op, typename RT<T>::A a, int64_t nred, float m)
{
	if constexpr (RT<T>::isint) {
		if (op == RD_MEAN)
			a = nred ? a / nred : 0;
		return (T)a;
	} else {
		switch (op) {
		case RD_MEAN: a = a / (float)nred; break;
		case RD_L2: a = sqrtf(a); break;
		case RD_LOGSUM: a = logf(a); break;
		case RD_LSE: a = logf(a) + m; break;
		default: break;
		}
		return fromf<T>(a);
	}
}

// RD_LSE's shift: the largest finite element, 0 when there is none
struct FMaxFinite {
	__device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// one output per group of TPR threads (blockDim.x == BS)
template <typename T, int TPR> __global__ void __launch_bounds__(BS) reduce_rows(const T *x, T *y, rd_plan p, int op)
{
	using A = typename RT<T>::A;
	__shared__ A sm[32];
	__shared__ float smf[32];
	const int G = BS / TPR, g = threadIdx.x / TPR, l = threadIdx.x % TPR;
	for (int64_t o0 = (int64_t)blockIdx.x * G; o0 < p.nout; o0 += (int64_t)gridDim.x * G) {
		const int64_t o = o0 + g;
		if (TPR == 32 && o >= p.nout)
			continue;   // a whole warp: no block-wide synchronisation in this path
		const int64_t base = kept_off(p, o);
		float m = 0;
		if constexpr (!RT<T>::isint) {
			if (op == RD_LSE) {
				float mx = -INFINITY;
				for (int64_t j = l; j < p.nred; j += TPR) {
					float v = tof(x[base + red_off(p, j)]);
					if (isfinite(v))
						mx = fmaxf(mx, v);
				}
				mx = group_all<TPR>(mx, FMaxFinite(), smf);
				m = mx == -INFINITY ? 0.f : mx;
			}
		}
		RComb c{op};
		A a = r_init<T>(op);
		for (int64_t j = l; j < p.nred; j += TPR)
			a = c(a, r_map<T>(op, x[base + red_off(p, j)], m));
		a = group_all<TPR>(a, c, sm);
		if (l == 0)
			y[o] = r_final<T>(op, a, p.nred, m);
	}
}

// one output per threadIdx.x, the reduced elements split over threadIdx.y
template <typename T> __global__ void __launch_bounds__(1024) reduce_cols(const T *x, T *y, rd_plan p, int op)
{
	using A = typename RT<T>::A;
	__shared__ A sm[32][33];
	__shared__ float smf[32][33];
	const int tx = threadIdx.x, ty = threadIdx.y, ny = blockDim.y;
	for (int64_t o0 = (int64_t)blockIdx.x * 32; o0 < p.nout; o0 += (int64_t)gridDim.x * 32) {
		const int64_t o = o0 + tx;
		const bool act = o < p.nout;
		const int64_t base = act ? kept_off(p, o) : 0;
		float m = 0;
		if constexpr (!RT<T>::isint) {
			if (op == RD_LSE) {
				float mx = -INFINITY;
				for (int64_t j = ty; act && j < p.nred; j += ny) {
					float v = tof(x[base + red_off(p, j)]);
					if (isfinite(v))
						mx = fmaxf(mx, v);
				}
				smf[ty][tx] = mx;
				__syncthreads();
				mx = smf[0][tx];
				for (int i = 1; i < ny; i++)
					mx = fmaxf(mx, smf[i][tx]);
				m = mx == -INFINITY ? 0.f : mx;
			}
		}
		RComb c{op};
		A a = r_init<T>(op);
		for (int64_t j = ty; act && j < p.nred; j += ny)
			a = c(a, r_map<T>(op, x[base + red_off(p, j)], m));
		sm[ty][tx] = a;
		__syncthreads();
		if (ty == 0 && act) {
			for (int i = 1; i < ny; i++)
				a = c(a, sm[i][tx]);
			y[o] = r_final<T>(op, a, p.nred, m);
		}
		__syncthreads();
	}
}

template <typename T>
static cudaError_t reduce_t(int op, const rd_plan *p, const void *x, void *y, cudaStream_t s, const char **impl)
{
	const T *xx = (const T *)x;
	T *yy = (T *)y;
	if (p->nr >= 1 && p->rstr[p->nr - 1] == 1) {
		if (p->nred >= 2048 || p->nout < 1024) {
			*impl = "ogsh reduce rows block";
			reduce_rows<T, BS><<<grid_for(p->nout, 1), BS, 0, s>>>(xx, yy, *p, op);
		} else {
			*impl = "ogsh reduce rows warp";
			reduce_rows<T, 32><<<grid_for(p->nout, BS / 32), BS, 0, s>>>(xx, yy, *p, op);
		}
	} else {
		*impl = "ogsh reduce cols";
		int ny = p->nout >= 132 * 32 * 4 || p->nred < 64 ? 8 : 32;
		reduce_cols<T><<<grid_for(p->nout, 32), dim3(32, ny), 0, s>>>(xx, yy, *p, op);
	}
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// Softmax, LogSoftmax
// ------------------------------------------------------------------------

// 16 bytes of T
template <typename T> struct alignas(16) Vec16 {
	T v[16 / sizeof(T)];
};

// lane's share of row xr as float: vectors lane, lane + 32... below nvec (VPL at most)
template <typename T, int VPL>
__device__ __forceinline__ void row_to_regs(const Vec16<T> *__restrict__ xr, int lane, int nvec,
					    float (*v)[16 / sizeof(T)])
{
#pragma unroll
	for (int k = 0; k < VPL; k++) {
		const int c = lane + 32 * k;
		if (c < nvec) {
			Vec16<T> t = xr[c];
#pragma unroll
			for (int j = 0; j < 16 / (int)sizeof(T); j++)
				v[k][j] = tof(t.v[j]);
		}
	}
}

__device__ __forceinline__ float warp_sum(float x)
{
	for (int o = 16; o > 0; o >>= 1)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

__device__ __forceinline__ float warp_max(float x)
{
	for (int o = 16; o > 0; o >>= 1)
		x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
	return x;
}

// one warp per row held in registers (n % (16 / sizeof(T)) == 0, at most
// 32 * VPL vectors of 16 bytes per row): each element read once, exp once
template <typename T, int VPL>
__global__ void __launch_bounds__(BS) softmax_reg(const T *__restrict__ x, T *__restrict__ y, int64_t rows, int n,
						  bool logsm)
{
	const int W = 16 / sizeof(T);
	const int lane = threadIdx.x % 32, nvec = n / W;
	const int64_t warps = (int64_t)gridDim.x * (BS / 32);
	for (int64_t r = (int64_t)blockIdx.x * (BS / 32) + threadIdx.x / 32; r < rows; r += warps) {
		const Vec16<T> *xr = reinterpret_cast<const Vec16<T> *>(x + r * n);
		Vec16<T> *yr = reinterpret_cast<Vec16<T> *>(y + r * n);
		float v[VPL][W];
		row_to_regs<T, VPL>(xr, lane, nvec, v);
		float mx = -INFINITY;
#pragma unroll
		for (int k = 0; k < VPL; k++)
			if (lane + 32 * k < nvec)
#pragma unroll
				for (int j = 0; j < W; j++)
					mx = fmaxf(mx, v[k][j]);
		mx = warp_max(mx);
		if (mx == -INFINITY)
			mx = 0;
		float su = 0;
#pragma unroll
		for (int k = 0; k < VPL; k++)
			if (lane + 32 * k < nvec)
#pragma unroll
				for (int j = 0; j < W; j++) {
					v[k][j] -= mx;
					const float e = expf(v[k][j]);
					su += e;
					if (!logsm)
						v[k][j] = e;
				}
		su = warp_sum(su);
		const float ls = logf(su), inv = 1.f / su;
#pragma unroll
		for (int k = 0; k < VPL; k++) {
			const int c = lane + 32 * k;
			if (c < nvec) {
				Vec16<T> t;
#pragma unroll
				for (int j = 0; j < W; j++)
					t.v[j] = fromf<T>(logsm ? v[k][j] - ls : v[k][j] * inv);
				yr[c] = t;
			}
		}
	}
}

template <typename T, int VPL>
static void softmax_reg_launch(bool logsm, int64_t rows, int64_t n, const void *x, void *y, cudaStream_t s)
{
	softmax_reg<T, VPL><<<grid_for(rows, BS / 32), BS, 0, s>>>((const T *)x, (T *)y, rows, (int)n, logsm);
}

template <typename T, int TPR>
__global__ void __launch_bounds__(BS) softmax_rows(const T *x, T *y, int64_t rows, int64_t n, bool logsm)
{
	__shared__ float sm[32];
	const int G = BS / TPR, g = threadIdx.x / TPR, l = threadIdx.x % TPR;
	for (int64_t r0 = (int64_t)blockIdx.x * G; r0 < rows; r0 += (int64_t)gridDim.x * G) {
		const int64_t r = r0 + g;
		if (TPR == 32 && r >= rows)
			continue;
		const T *xr = x + r * n;
		T *yr = y + r * n;
		float mx = -INFINITY;
		for (int64_t j = l; j < n; j += TPR)
			mx = fmaxf(mx, tof(xr[j]));
		mx = group_all<TPR>(mx, FMax(), sm);
		if (mx == -INFINITY)
			mx = 0;
		float su = 0;
		for (int64_t j = l; j < n; j += TPR)
			su += expf(tof(xr[j]) - mx);
		su = group_all<TPR>(su, FSum(), sm);
		if (logsm) {
			const float ls = logf(su);
			for (int64_t j = l; j < n; j += TPR)
				yr[j] = fromf<T>((tof(xr[j]) - mx) - ls);
		} else {
			const float inv = 1.f / su;
			for (int64_t j = l; j < n; j += TPR)
				yr[j] = fromf<T>(expf(tof(xr[j]) - mx) * inv);
		}
	}
}

// one thread per (outer, inner) column
template <typename T>
__global__ void softmax_cols(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, bool logsm)
{
	const int64_t cols = outer * inner;
	for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
		const int64_t a = c / inner, b = c - a * inner;
		const T *xc = x + a * n * inner + b;
		T *yc = y + a * n * inner + b;
		float mx = -INFINITY;
		for (int64_t j = 0; j < n; j++)
			mx = fmaxf(mx, tof(xc[j * inner]));
		if (mx == -INFINITY)
			mx = 0;
		float su = 0;
		for (int64_t j = 0; j < n; j++)
			su += expf(tof(xc[j * inner]) - mx);
		const float ls = logf(su), inv = 1.f / su;
		for (int64_t j = 0; j < n; j++) {
			float v = tof(xc[j * inner]) - mx;
			yc[j * inner] = fromf<T>(logsm ? v - ls : expf(v) * inv);
		}
	}
}

template <typename T>
static cudaError_t softmax_t(bool logsm, int64_t outer, int64_t n, int64_t inner, const void *x, void *y,
			     cudaStream_t s, const char **impl)
{
	const int64_t W = 16 / sizeof(T), nvec = n / W;
	if (inner == 1 && n % W == 0 && nvec <= 32 * 8 && ((uintptr_t)x % 16) == 0 && ((uintptr_t)y % 16) == 0) {
		*impl = logsm ? "ogsh logsoftmax warp, row in registers" : "ogsh softmax warp, row in registers";
		if (nvec <= 32)
			softmax_reg_launch<T, 1>(logsm, outer, n, x, y, s);
		else if (nvec <= 64)
			softmax_reg_launch<T, 2>(logsm, outer, n, x, y, s);
		else if (nvec <= 128)
			softmax_reg_launch<T, 4>(logsm, outer, n, x, y, s);
		else
			softmax_reg_launch<T, 8>(logsm, outer, n, x, y, s);
	} else if (inner == 1) {
		if (n >= 1024 || outer < 1024) {
			*impl = "ogsh softmax block";
			softmax_rows<T, BS><<<grid_for(outer, 1), BS, 0, s>>>((const T *)x, (T *)y, outer, n, logsm);
		} else {
			*impl = "ogsh softmax warp";
			softmax_rows<T, 32><<<grid_for(outer, BS / 32), BS, 0, s>>>((const T *)x, (T *)y, outer, n, logsm);
		}
	} else {
		*impl = "ogsh softmax cols";
		softmax_cols<T><<<grid_for(outer * inner, BS), BS, 0, s>>>((const T *)x, (T *)y, outer, n, inner, logsm);
	}
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// ArgMax, ArgMin
// ------------------------------------------------------------------------

template <typename T> struct AV { using V = float; };
template <> struct AV<int32_t> { using V = long long; };
template <> struct AV<int64_t> { using V = long long; };

template <typename T> __device__ __forceinline__ typename AV<T>::V av_load(T v)
{
	if constexpr (std::is_same<typename AV<T>::V, long long>::value)
		return (long long)v;
	else
		return tof(v);
}

__device__ __forceinline__ bool isnan_v(float v) { return isnan(v); }
__device__ __forceinline__ bool isnan_v(long long) { return false; }

// whether (va, ia) is a better pick than (vb, ib): the first NaN wins,
// then the larger (smaller) value, ties by the lower (higher with last) index
template <typename V> __device__ __forceinline__ bool arg_better(V va, int64_t ia, V vb, int64_t ib, bool is_max, bool last)
{
	bool na = isnan_v(va), nb = isnan_v(vb);
	if (na || nb)
		return na && nb ? ia < ib : na;
	if (va != vb)
		return is_max ? va > vb : va < vb;
	return last ? ia > ib : ia < ib;
}

template <typename T, int TPR>
__global__ void __launch_bounds__(BS) arg_rows(const T *x, int64_t *y, int64_t rows, int64_t n, bool is_max, bool last)
{
	using V = typename AV<T>::V;
	__shared__ V smv[32];
	__shared__ int64_t smi[32];
	const int G = BS / TPR, g = threadIdx.x / TPR, l = threadIdx.x % TPR;
	for (int64_t r0 = (int64_t)blockIdx.x * G; r0 < rows; r0 += (int64_t)gridDim.x * G) {
		const int64_t r = r0 + g;
		if (TPR == 32 && r >= rows)
			continue;
		const T *xr = x + r * n;
		V bv = av_load<T>(xr[0]);
		int64_t bi = 0;
		for (int64_t j = l; j < n; j += TPR) {
			V v = av_load<T>(xr[j]);
			if (arg_better(v, j, bv, bi, is_max, last)) {
				bv = v;
				bi = j;
			}
		}
		for (int o = 16; o > 0; o >>= 1) {
			V v = __shfl_xor_sync(FULL, bv, o);
			int64_t i = __shfl_xor_sync(FULL, bi, o);
			if (arg_better(v, i, bv, bi, is_max, last)) {
				bv = v;
				bi = i;
			}
		}
		if (TPR != 32) {
			__syncthreads();
			if ((threadIdx.x & 31) == 0) {
				smv[threadIdx.x >> 5] = bv;
				smi[threadIdx.x >> 5] = bi;
			}
			__syncthreads();
			bv = smv[0];
			bi = smi[0];
			for (int w = 1; w < BS / 32; w++)
				if (arg_better(smv[w], smi[w], bv, bi, is_max, last)) {
					bv = smv[w];
					bi = smi[w];
				}
		}
		if (l == 0)
			y[r] = bi;
	}
}

template <typename T>
__global__ void arg_cols(const T *x, int64_t *y, int64_t outer, int64_t n, int64_t inner, bool is_max, bool last)
{
	using V = typename AV<T>::V;
	const int64_t cols = outer * inner;
	for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
		const int64_t a = c / inner, b = c - a * inner;
		const T *xc = x + a * n * inner + b;
		V bv = av_load<T>(xc[0]);
		int64_t bi = 0;
		for (int64_t j = 1; j < n; j++) {
			V v = av_load<T>(xc[j * inner]);
			if (arg_better(v, j, bv, bi, is_max, last)) {
				bv = v;
				bi = j;
			}
		}
		y[c] = bi;
	}
}

template <typename T>
static cudaError_t arg_t(bool is_max, bool last, int64_t outer, int64_t n, int64_t inner, const void *x, int64_t *y,
			 cudaStream_t s, const char **impl)
{
	if (inner == 1) {
		if (n >= 1024 || outer < 1024) {
			*impl = "ogsh argreduce block";
			arg_rows<T, BS><<<grid_for(outer, 1), BS, 0, s>>>((const T *)x, y, outer, n, is_max, last);
		} else {
			*impl = "ogsh argreduce warp";
			arg_rows<T, 32><<<grid_for(outer, BS / 32), BS, 0, s>>>((const T *)x, y, outer, n, is_max, last);
		}
	} else {
		*impl = "ogsh argreduce cols";
		arg_cols<T><<<grid_for(outer * inner, BS), BS, 0, s>>>((const T *)x, y, outer, n, inner, is_max, last);
	}
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// TopK: radix select of the k-th key, the candidates gathered in shared
// memory, then a bitonic sort of at most 256 of them
// ------------------------------------------------------------------------

template <typename T> struct TK { using K = unsigned int; };
template <> struct TK<int64_t> { using K = unsigned long long; };

// order-preserving unsigned keys; NaN above everything, -0 equal to +0
template <typename T> __device__ __forceinline__ typename TK<T>::K tk_key(T v, bool largest)
{
	typename TK<T>::K k;
	if constexpr (std::is_same<T, int64_t>::value) {
		k = (unsigned long long)v ^ (1ull << 63);
	} else if constexpr (std::is_same<T, int32_t>::value) {
		k = (unsigned int)v ^ 0x80000000u;
	} else {
		float f = tof(v);
		if (isnan(f)) {
			k = 0xffffffffu;
		} else {
			if (f == 0.f)
				f = 0.f;
			unsigned int u = __float_as_uint(f);
			k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
		}
	}
	return largest ? k : ~k;
}

template <typename T>
__global__ void __launch_bounds__(BS) topk_rows(const T *x, T *vals, int64_t *idx, int64_t outer, int64_t n, int64_t inner,
						 int kk, int kp, bool largest)
{
	using K = typename TK<T>::K;
	__shared__ unsigned int hist[256];
	__shared__ K ck[256];
	__shared__ int64_t ci[256];
	__shared__ K s_prefix;
	__shared__ long long s_rem;
	__shared__ unsigned int cnt_better;
	__shared__ int wsum[BS / 32];
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int64_t rows = outer * inner;
	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const int64_t pa = r / inner, pb = r - pa * inner;
		const T *xr = x + pa * n * inner + pb;
		// radix select: the kk-th largest key is `prefix`, rem of its kind needed
		K prefix = 0, mask = 0;
		long long rem = kk;
		for (int shift = (int)sizeof(K) * 8 - 8; shift >= 0; shift -= 8) {
			for (int i = tid; i < 256; i += BS)
				hist[i] = 0;
			__syncthreads();
			for (int64_t j = tid; j < n; j += BS) {
				K key = tk_key<T>(xr[j * inner], largest);
				if ((key & mask) == prefix)
					atomicAdd(&hist[(unsigned)(key >> shift) & 255u], 1u);
			}
			__syncthreads();
			if (tid == 0) {
				long long cum = 0;
				int b = 255;
				for (; b > 0; b--) {
					if (cum + (long long)hist[b] >= rem)
						break;
					cum += hist[b];
				}
				s_rem = rem - cum;
				s_prefix = prefix | ((K)b << shift);
			}
			__syncthreads();
			rem = s_rem;
			prefix = s_prefix;
			mask |= (K)255 << shift;
			__syncthreads();
		}
		const long long nbetter = kk - rem;
		for (int i = tid; i < kp; i += BS) {
			ck[i] = 0;
			ci[i] = INT64_MAX;
		}
		if (tid == 0)
			cnt_better = 0;
		__syncthreads();
		// gather: every key above the threshold, the first rem equal to it
		long long eq_base = 0;
		for (int64_t j0 = 0; j0 < n; j0 += BS) {
			const int64_t j = j0 + tid;
			K key = 0;
			bool eq = false;
			if (j < n) {
				key = tk_key<T>(xr[j * inner], largest);
				eq = key == prefix;
				if (key > prefix) {
					unsigned pos = atomicAdd(&cnt_better, 1u);
					if (pos < 256u) {
						ck[pos] = key;
						ci[pos] = j;
					}
				}
			}
			unsigned bal = __ballot_sync(FULL, eq);
			if (lane == 0)
				wsum[warp] = __popc(bal);
			__syncthreads();
			int before = 0, total = 0;
			for (int w = 0; w < BS / 32; w++) {
				if (w < warp)
					before += wsum[w];
				total += wsum[w];
			}
			if (eq) {
				long long pos = eq_base + before + __popc(bal & ((1u << lane) - 1u));
				if (pos < rem) {
					ck[nbetter + pos] = key;
					ci[nbetter + pos] = j;
				}
			}
			eq_base += total;
			__syncthreads();
		}
		// bitonic sort of kp entries: larger key first, then lower index
		for (int size = 2; size <= kp; size <<= 1)
			for (int stride = size >> 1; stride > 0; stride >>= 1) {
				for (int i = tid; i < kp; i += BS) {
					int p = i ^ stride;
					if (p > i) {
						bool p_first = ck[p] > ck[i] || (ck[p] == ck[i] && ci[p] < ci[i]);
						bool swap = (i & size) == 0 ? p_first : !p_first;
						if (swap) {
							K tkk = ck[i];
							ck[i] = ck[p];
							ck[p] = tkk;
							int64_t ti = ci[i];
							ci[i] = ci[p];
							ci[p] = ti;
						}
					}
				}
				__syncthreads();
			}
		for (int i = tid; i < kk; i += BS) {
			const int64_t o = (pa * kk + i) * inner + pb;
			const int64_t src = ci[i];
			vals[o] = xr[src * inner];
			idx[o] = src;
		}
		__syncthreads();
	}
}

template <typename T>
static cudaError_t topk_t(bool largest, int64_t outer, int64_t n, int64_t inner, int64_t k, const void *x, void *vals,
			  int64_t *idx, cudaStream_t s, const char **impl)
{
	int kp = 1;
	while (kp < k)
		kp <<= 1;
	*impl = "ogsh topk radix select";
	topk_rows<T><<<grid_for(outer * inner, 1), BS, 0, s>>>((const T *)x, (T *)vals, idx, outer, n, inner, (int)k, kp,
								 largest);
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// LayerNormalization, RMSNormalization
// ------------------------------------------------------------------------

__device__ __forceinline__ float prm_ld(const rd_param &q, int64_t c)
{
	if (q.nd == 0)
		return ldf(q.p, q.dtype, c);
	int64_t off = 0;
	for (int d = q.nd - 1; d >= 0; d--) {
		int64_t t = c / q.dims[d];
		off += (c - t * q.dims[d]) * q.str[d];
		c = t;
	}
	return ldf(q.p, q.dtype, off);
}

template <typename T, int TPR>
__global__ void __launch_bounds__(BS) rownorm(const T *x, T *y, int64_t rows, int64_t cols, float eps, bool rms,
					      rd_param sc, rd_param bi, void *mean_out, void *inv_out, int sdt)
{
	__shared__ float sm[32];
	const int G = BS / TPR, g = threadIdx.x / TPR, l = threadIdx.x % TPR;
	for (int64_t r0 = (int64_t)blockIdx.x * G; r0 < rows; r0 += (int64_t)gridDim.x * G) {
		const int64_t r = r0 + g;
		if (TPR == 32 && r >= rows)
			continue;
		const T *xr = x + r * cols;
		T *yr = y + r * cols;
		float mean = 0;
		if (!rms) {
			float su = 0;
			for (int64_t j = l; j < cols; j += TPR)
				su += tof(xr[j]);
			mean = group_all<TPR>(su, FSum(), sm) / (float)cols;
		}
		float sq = 0;
		for (int64_t j = l; j < cols; j += TPR) {
			float d = tof(xr[j]) - mean;
			sq += d * d;
		}
		const float var = group_all<TPR>(sq, FSum(), sm) / (float)cols;
		const float inv = 1.f / sqrtf(var + eps);
		if (l == 0) {
			if (mean_out)
				stf(mean_out, sdt, r, mean);
			if (inv_out)
				stf(inv_out, sdt, r, inv);
		}
		for (int64_t j = l; j < cols; j += TPR) {
			float v = (tof(xr[j]) - mean) * inv * prm_ld(sc, j);
			if (bi.p)
				v += prm_ld(bi, j);
			yr[j] = fromf<T>(v);
		}
	}
}

// one warp per row held in registers: each lane loads VPL vectors of 16
// bytes once (cols % (16 / sizeof(T)) == 0, at most 32 * VPL vectors per
// row), the mean and the variance from the registers, then the output;
// scale and bias are [cols] (nd 0). PV: scale (and bias) have the rows'
// type and 16-byte aligned rows, so they are read 16 bytes at a time (from
// L1: every row reads the same ones) instead of element by element; held
// in registers across rows they had cost the occupancy below. A block is
// blockDim.x / 32 warps (64 threads where rows are few, so the rows spread
// over more multiprocessors).
// the rd_* number of a row type
template <typename T> static int host_dtype();
template <> int host_dtype<float>() { return RD_F32; }
template <> int host_dtype<__half>() { return RD_F16; }
template <> int host_dtype<__nv_bfloat16>() { return RD_BF16; }

// blocks of BS threads a multiprocessor must hold (the register cap): 6 hold ViT-B's or BERT's
// rows at batch 32 (6304 warps) in one wave on a 132-SM GPU; bfloat16's conversions need more
// registers (spills at 40), and so do scale and bias read element by element (!PV): 4 there
template <typename T, int VPL, bool PV> struct rownorm_minb {
	static constexpr int v = VPL > 4 ? 1 : !PV || (sizeof(T) == 2 && !std::is_same<T, __half>::value) ? 4 : 6;
};

template <typename T, int VPL, bool PV>
__global__ void __launch_bounds__(BS, (rownorm_minb<T, VPL, PV>::v)) rownorm_reg(const T *__restrict__ x, T *__restrict__ y, int64_t rows, int cols,
						  float eps, bool rms, rd_param sc, rd_param bi, void *mean_out,
						  void *inv_out, int sdt)
{
	const int W = 16 / sizeof(T);
	const int lane = threadIdx.x % 32, nvec = cols / W, wpb = blockDim.x / 32;
	const int64_t warps = (int64_t)gridDim.x * wpb;
	pdl_wait();   // launched early (pdl.cuh): nothing is read before the kernel before has finished
	for (int64_t r = (int64_t)blockIdx.x * wpb + threadIdx.x / 32; r < rows; r += warps) {
		const Vec16<T> *xr = reinterpret_cast<const Vec16<T> *>(x + r * cols);
		Vec16<T> *yr = reinterpret_cast<Vec16<T> *>(y + r * cols);
		// the row as loaded, in its own type: half the registers of floats, so that 4 blocks
		// of 256 fit a multiprocessor (97 registers a thread had allowed 2: three waves of
		// blocks for ViT-B's 6304 rows)
		Vec16<T> raw[VPL];
#pragma unroll
		for (int k = 0; k < VPL; k++)
			if (lane + 32 * k < nvec)
				raw[k] = xr[lane + 32 * k];
		float mean = 0;
		if (!rms) {
			float su = 0;
#pragma unroll
			for (int k = 0; k < VPL; k++)
				if (lane + 32 * k < nvec)
#pragma unroll
					for (int j = 0; j < W; j++)
						su += tof(raw[k].v[j]);
			mean = warp_sum(su) / (float)cols;
		}
		float sq = 0;
#pragma unroll
		for (int k = 0; k < VPL; k++)
			if (lane + 32 * k < nvec)
#pragma unroll
				for (int j = 0; j < W; j++) {
					const float d = tof(raw[k].v[j]) - mean;
					sq += d * d;
				}
		sq = warp_sum(sq);
		const float inv = 1.f / sqrtf(sq / (float)cols + eps);
		if (lane == 0) {
			if (mean_out)
				stf(mean_out, sdt, r, mean);
			if (inv_out)
				stf(inv_out, sdt, r, inv);
		}
#pragma unroll
		for (int k = 0; k < VPL; k++) {
			const int c = lane + 32 * k;
			if (c < nvec) {
				Vec16<T> t, gs, gb;
				if (PV) {
					gs = reinterpret_cast<const Vec16<T> *>(sc.p)[c];
					if (bi.p)
						gb = reinterpret_cast<const Vec16<T> *>(bi.p)[c];
				}
#pragma unroll
				for (int j = 0; j < W; j++) {
					const float v = tof(raw[k].v[j]);
					float o;
					if (PV) {
						o = (v - mean) * inv * tof(gs.v[j]);
						if (bi.p)
							o += tof(gb.v[j]);
					} else {
						o = (v - mean) * inv * ldf(sc.p, sc.dtype, (int64_t)c * W + j);
						if (bi.p)
							o += ldf(bi.p, bi.dtype, (int64_t)c * W + j);
					}
					t.v[j] = fromf<T>(o);
				}
				yr[c] = t;
			}
		}
	}
}

template <typename T, int VPL>
static void rownorm_reg_launch(bool rms, int64_t rows, int64_t cols, float eps, const void *x, void *y,
			       const rd_param *sc, const rd_param *bi, void *mean, void *inv, int sdt, cudaStream_t s)
{
	// 64 threads a block below about 16 rows per multiprocessor of the largest GPUs
	const int threads = rows < 2048 ? 64 : BS;
	const int dt = host_dtype<T>();
	const bool pv = ((uintptr_t)sc->p % 16) == 0 && sc->dtype == dt &&
			(!bi->p || (((uintptr_t)bi->p % 16) == 0 && bi->dtype == dt));
	if (pv)
		pdl_launch(rownorm_reg<T, VPL, true>, grid_for(rows, threads / 32), threads, s, (const T *)x, (T *)y, rows,
			   (int)cols, eps, rms, *sc, *bi, mean, inv, sdt);
	else
		pdl_launch(rownorm_reg<T, VPL, false>, grid_for(rows, threads / 32), threads, s, (const T *)x, (T *)y, rows,
			   (int)cols, eps, rms, *sc, *bi, mean, inv, sdt);
}

template <typename T>
static cudaError_t rownorm_t(bool rms, int64_t rows, int64_t cols, float eps, const void *x, void *y,
			     const rd_param *sc, const rd_param *bi, void *mean, void *inv, int sdt, cudaStream_t s,
			     const char **impl)
{
	const int64_t W = 16 / sizeof(T), nvec = cols / W;
	if (cols % W == 0 && nvec <= 32 * 8 && ((uintptr_t)x % 16) == 0 && ((uintptr_t)y % 16) == 0 && sc->nd == 0 &&
	    (!bi->p || bi->nd == 0)) {
		*impl = rms ? "ogsh rmsnorm warp, row in registers" : "ogsh layernorm warp, row in registers";
		if (nvec <= 32)
			rownorm_reg_launch<T, 1>(rms, rows, cols, eps, x, y, sc, bi, mean, inv, sdt, s);
		else if (nvec <= 64)
			rownorm_reg_launch<T, 2>(rms, rows, cols, eps, x, y, sc, bi, mean, inv, sdt, s);
		else if (nvec <= 96)   // 768 float16/bfloat16 columns (BERT-base, ViT-B): no idle fourth vector
			rownorm_reg_launch<T, 3>(rms, rows, cols, eps, x, y, sc, bi, mean, inv, sdt, s);
		else if (nvec <= 128)
			rownorm_reg_launch<T, 4>(rms, rows, cols, eps, x, y, sc, bi, mean, inv, sdt, s);
		else
			rownorm_reg_launch<T, 8>(rms, rows, cols, eps, x, y, sc, bi, mean, inv, sdt, s);
		return cudaGetLastError();
	}
	if (cols >= 1024 || rows < 1024) {
		*impl = rms ? "ogsh rmsnorm block" : "ogsh layernorm block";
		rownorm<T, BS><<<grid_for(rows, 1), BS, 0, s>>>((const T *)x, (T *)y, rows, cols, eps, rms, *sc, *bi, mean,
								inv, sdt);
	} else {
		*impl = rms ? "ogsh rmsnorm warp" : "ogsh layernorm warp";
		rownorm<T, 32><<<grid_for(rows, BS / 32), BS, 0, s>>>((const T *)x, (T *)y, rows, cols, eps, rms, *sc, *bi,
								      mean, inv, sdt);
	}
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// GroupNormalization, InstanceNormalization, BatchNormalization
// ------------------------------------------------------------------------

// one block per (n, group)
template <typename T>
__global__ void __launch_bounds__(BS) groupnorm(const T *x, T *y, int64_t N, int64_t C, int64_t S, int64_t groups,
						bool per_group, float eps, const void *sc, int sdt, const void *bi, int bdt)
{
	__shared__ float sm[32];
	const int64_t cpg = C / groups, len = cpg * S;
	for (int64_t ng = blockIdx.x; ng < N * groups; ng += gridDim.x) {
		const int64_t gi = ng % groups;
		const T *xg = x + ng * len;   // (n*C + g*cpg)*S == ng*len
		T *yg = y + ng * len;
		float su = 0;
		for (int64_t j = threadIdx.x; j < len; j += BS)
			su += tof(xg[j]);
		const float mean = block_all(su, FSum(), sm) / (float)len;
		float sq = 0;
		for (int64_t j = threadIdx.x; j < len; j += BS) {
			float d = tof(xg[j]) - mean;
			sq += d * d;
		}
		const float inv = 1.f / sqrtf(block_all(sq, FSum(), sm) / (float)len + eps);
		for (int64_t j = threadIdx.x; j < len; j += BS) {
			const int64_t p = per_group ? gi : gi * cpg + j / S;
			yg[j] = fromf<T>((tof(xg[j]) - mean) * (ldf(sc, sdt, p) * inv) + ldf(bi, bdt, p));
		}
	}
}

template <typename T>
__global__ void batchnorm(const T *x, T *y, int64_t total, int64_t C, int64_t S, float eps, const void *sc, int sdt,
			  const void *bi, int bdt, const void *mn, int mdt, const void *vr, int vdt)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t c = (i / S) % C;
		const float a = ldf(sc, sdt, c) / sqrtf(ldf(vr, vdt, c) + eps);
		const float b = ldf(bi, bdt, c) - ldf(mn, mdt, c) * a;
		y[i] = fromf<T>(tof(x[i]) * a + b);
	}
}

// ------------------------------------------------------------------------
// LpNormalization
// ------------------------------------------------------------------------

template <typename T, int TPR>
__global__ void __launch_bounds__(BS) lpnorm_rows(const T *x, T *y, int64_t rows, int64_t n, int p)
{
	__shared__ float sm[32];
	const int G = BS / TPR, g = threadIdx.x / TPR, l = threadIdx.x % TPR;
	for (int64_t r0 = (int64_t)blockIdx.x * G; r0 < rows; r0 += (int64_t)gridDim.x * G) {
		const int64_t r = r0 + g;
		if (TPR == 32 && r >= rows)
			continue;
		const T *xr = x + r * n;
		T *yr = y + r * n;
		float su = 0;
		for (int64_t j = l; j < n; j += TPR) {
			float v = tof(xr[j]);
			su += p == 1 ? fabsf(v) : v * v;
		}
		su = group_all<TPR>(su, FSum(), sm);
		const float nrm = p == 1 ? su : sqrtf(su);
		for (int64_t j = l; j < n; j += TPR)
			yr[j] = fromf<T>(nrm == 0.f ? 0.f : tof(xr[j]) / nrm);
	}
}

template <typename T>
__global__ void lpnorm_cols(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, int p)
{
	const int64_t cols = outer * inner;
	for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
		const int64_t a = c / inner, b = c - a * inner;
		const T *xc = x + a * n * inner + b;
		T *yc = y + a * n * inner + b;
		float su = 0;
		for (int64_t j = 0; j < n; j++) {
			float v = tof(xc[j * inner]);
			su += p == 1 ? fabsf(v) : v * v;
		}
		const float nrm = p == 1 ? su : sqrtf(su);
		for (int64_t j = 0; j < n; j++)
			yc[j * inner] = fromf<T>(nrm == 0.f ? 0.f : tof(xc[j * inner]) / nrm);
	}
}

// ------------------------------------------------------------------------
// MeanVarianceNormalization
// ------------------------------------------------------------------------

template <typename T> __global__ void __launch_bounds__(BS) mvn_stats(const T *x, rd_plan p, float *ws)
{
	__shared__ float sm[32];
	for (int64_t o = blockIdx.x; o < p.nout; o += gridDim.x) {
		const int64_t base = kept_off(p, o);
		// two passes (mean, then squared deviations): E[x^2] - E[x]^2 in float cancels badly
		float s1 = 0, s2 = 0;
		for (int64_t j = threadIdx.x; j < p.nred; j += BS)
			s1 += tof(x[base + red_off(p, j)]);
		const float mean = block_all(s1, FSum(), sm) / (float)p.nred;
		for (int64_t j = threadIdx.x; j < p.nred; j += BS) {
			float d = tof(x[base + red_off(p, j)]) - mean;
			s2 += d * d;
		}
		const float var = block_all(s2, FSum(), sm) / (float)p.nred;
		if (threadIdx.x == 0) {
			ws[o] = mean;
			ws[p.nout + o] = sqrtf(var) + 1e-9f;
		}
	}
}

struct MvnMap {
	int rank;
	int64_t dims[RD_MAX_DIMS], sstr[RD_MAX_DIMS];
};

template <typename T> __global__ void mvn_apply(const T *x, T *y, int64_t total, MvnMap m, const float *ws, int64_t ns)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t rest = i, si = 0;
		for (int d = m.rank - 1; d >= 0; d--) {
			int64_t q = rest / m.dims[d];
			si += (rest - q * m.dims[d]) * m.sstr[d];
			rest = q;
		}
		y[i] = fromf<T>((tof(x[i]) - ws[si]) / ws[ns + si]);
	}
}

// ------------------------------------------------------------------------
// Attention: one block of 4 warps per (query tile of 4*QW, head, batch); a
// warp owns QW queries (4, or 1 where a grid of 4 would not fill the GPU),
// a lane one key of each 32-key tile for the scores
// and 1/32 of the head dims for the output; online softmax in float
// ------------------------------------------------------------------------

constexpr int AT_KT = 32, AT_NW = 4;

// the offset of query i's mask row (b, h, i) when a has a mask
__device__ __forceinline__ int64_t attn_mrow(const rd_attn &a, int64_t b, int64_t h, int64_t i)
{
	return a.mask ? b * a.mstr[0] + h * a.mstr[1] + i * a.mstr[2] : 0;
}

// the score s of query i and key `key` scaled and masked (-inf: masked out,
// or past the keys); mrow is attn_mrow of the query
__device__ __forceinline__ float attn_masked_at(const rd_attn &a, float s, int64_t mrow, int64_t i, int64_t key)
{
	if (key >= a.T || (a.causal && key > i))
		return -INFINITY;
	const float x = s * a.scale;
	if (!a.mask)
		return x;
	if (key >= a.mcols)
		return -INFINITY;
	const int64_t mo = mrow + key * a.mstr[3];
	if (a.mask_dtype == RD_BOOL)
		return ((const uint8_t *)a.mask)[mo] ? x : -INFINITY;
	return x + ldf(a.mask, a.mask_dtype, mo);
}

__device__ __forceinline__ float attn_masked(const rd_attn &a, float s, int64_t b, int64_t h, int64_t i, int64_t key)
{
	return attn_masked_at(a, s, attn_mrow(a, b, h, i), i, key);
}

// 16 bytes from global to shared memory without the registers (zeros where !pred)
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool pred)
{
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

template <typename T, int DM, int QW> __global__ void __launch_bounds__(AT_NW * 32)
attention(const T *q, const T *k, const T *v, T *y, rd_attn a)
{
	extern __shared__ float smem[];
	const int D = (int)a.D, Dv = (int)a.Dv;
	float *qs = smem;                    // [(QW * AT_NW)][D]
	float *ks = qs + (QW * AT_NW) * D;          // [D][AT_KT + 1]
	float *vs = ks + D * (AT_KT + 1);    // [AT_KT][Dv]
	const int64_t b = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * (QW * AT_NW);
	const int64_t hk = h / (a.Hq / a.Hkv);
	const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
	const int nt = AT_NW * 32;

	for (int e = tid; e < (QW * AT_NW) * D; e += nt) {
		const int qi = e / D, d = e - qi * D;
		const int64_t i = i0 + qi;
		qs[e] = i < a.Lq ? tof(q[b * a.q_sb + h * a.q_sh + i * a.q_ss + d]) : 0.f;
	}
	float acc[QW][DM / 32], m[QW], l[QW];
#pragma unroll
	for (int qi = 0; qi < QW; qi++) {
		m[qi] = -INFINITY;
		l[qi] = 0.f;
#pragma unroll
		for (int t = 0; t < DM / 32; t++)
			acc[qi][t] = 0.f;
	}
	int64_t tend = a.T;
	if (a.causal) {
		int64_t last = i0 + (QW * AT_NW) < a.Lq ? i0 + (QW * AT_NW) : a.Lq;   // keys j <= i < last
		if (last < tend)
			tend = last;
	}
	const T *kb = k + b * a.k_sb + hk * a.k_sh;
	const T *vb = v + b * a.v_sb + hk * a.v_sh;
	for (int64_t t0 = 0; t0 < tend; t0 += AT_KT) {
		__syncthreads();
		for (int e = tid; e < AT_KT * D; e += nt) {
			const int j = e / D, d = e - j * D;
			const int64_t t = t0 + j;
			ks[d * (AT_KT + 1) + j] = t < a.T ? tof(kb[t * a.k_ss + d]) : 0.f;
		}
		for (int e = tid; e < AT_KT * Dv; e += nt) {
			const int j = e / Dv, d = e - j * Dv;
			const int64_t t = t0 + j;
			vs[e] = t < a.T ? tof(vb[t * a.v_ss + d]) : 0.f;
		}
		__syncthreads();
		float s[QW];
#pragma unroll
		for (int qi = 0; qi < QW; qi++)
			s[qi] = 0.f;
		const float *qw = qs + w * QW * D;
		for (int d = 0; d < D; d++) {
			const float kv = ks[d * (AT_KT + 1) + lane];
#pragma unroll
			for (int qi = 0; qi < QW; qi++)
				s[qi] += qw[qi * D + d] * kv;
		}
		const int64_t t = t0 + lane;
#pragma unroll
		for (int qi = 0; qi < QW; qi++) {
			const int64_t i = i0 + w * QW + qi;
			const float sc = i >= a.Lq ? -INFINITY : attn_masked(a, s[qi], b, h, i, t);
			const float tmax = warp_all(sc, FMax());
			const float mn = fmaxf(m[qi], tmax);
			float p = 0.f, corr = 1.f;
			if (mn != -INFINITY) {
				corr = m[qi] == -INFINITY ? 0.f : expf(m[qi] - mn);
				p = expf(sc - mn);
			}
			m[qi] = mn;
			l[qi] = l[qi] * corr + p;
#pragma unroll
			for (int tt = 0; tt < DM / 32; tt++)
				acc[qi][tt] *= corr;
			s[qi] = p;
		}
		for (int j = 0; j < AT_KT; j++) {
			float pj[QW];
#pragma unroll
			for (int qi = 0; qi < QW; qi++)
				pj[qi] = __shfl_sync(FULL, s[qi], j);
#pragma unroll
			for (int tt = 0; tt < DM / 32; tt++) {
				const int d = lane + 32 * tt;
				if (d < Dv) {
					const float vv = vs[j * Dv + d];
#pragma unroll
					for (int qi = 0; qi < QW; qi++)
						acc[qi][tt] += pj[qi] * vv;
				}
			}
		}
	}
#pragma unroll
	for (int qi = 0; qi < QW; qi++) {
		const float L = warp_all(l[qi], FSum());
		const int64_t i = i0 + w * QW + qi;
		if (i >= a.Lq)
			continue;
		T *yr = y + b * a.y_sb + h * a.y_sh + i * a.y_ss;
#pragma unroll
		for (int tt = 0; tt < DM / 32; tt++) {
			const int d = lane + 32 * tt;
			if (d < Dv) {
				// a row masked everywhere, or with a NaN (L NaN): NaN, or zeros with nan_zero
				float o = a.T == 0 || (a.nan_zero && (m[qi] == -INFINITY || !(L > 0.f))) ? 0.f
					  : m[qi] == -INFINITY ? NAN : acc[qi][tt] / L;
				yr[d] = fromf<T>(o);
			}
		}
	}
}

// ------------------------------------------------------------------------
// Attention on tensor cores (float16/bfloat16, head size 32, 64 or 128 for
// Q, K and V): mma.sync m16n8k16 with float accumulators. A block of NW
// warps takes NW*16 queries of one (batch, head); K and V pass through
// shared memory in tiles of 64 keys. A warp keeps its 16 rows of scores in
// the accumulator layout (row lane/4 and lane/4 + 8, columns 2*(lane%4) and
// +1 of each 8-key slice), does the online softmax there (a row is spread
// over 4 lanes), and feeds the probabilities, rounded to T, straight back
// as the A operand of P.V (the accumulators of two 8-key slices are the A
// fragment of one 16-key step); V's B fragments come from ldmatrix.trans.
// Scores, the running max and sums stay float.
// ------------------------------------------------------------------------

constexpr int FM_KT = 64;   // keys per tile

// D += A B for one m16n8k16 tile; TY is the PTX name of the element type
#define MMA_M16N8K16(TY, c, a, b0, b1)                                                                  \
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
		     "{%8,%9}, {%0,%1,%2,%3};\n"                                                          \
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                          \
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

template <typename T> struct Mma;
template <> struct Mma<__half> {
	static __device__ __forceinline__ uint32_t pack(float lo, float hi)
	{
		__half2 h = __floats2half2_rn(lo, hi);
		return *reinterpret_cast<uint32_t *>(&h);
	}
	static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
	{
		MMA_M16N8K16("f16", c, a, b0, b1);
	}
};
template <> struct Mma<__nv_bfloat16> {
	static __device__ __forceinline__ uint32_t pack(float lo, float hi)
	{
		__nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
		return *reinterpret_cast<uint32_t *>(&h);
	}
	static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
	{
		MMA_M16N8K16("bf16", c, a, b0, b1);
	}
};

// a tile of FM_KT rows of D elements (row stride ss) into shared rows of D + 8; rows past n are zeros.
// The copies are cp.async (16 bytes each, zero-filled past n): every one of the thread's copies is in
// flight at once, and the caller overlaps them with arithmetic (fm_commit, then fm_wait before reading)
template <typename T, int D, int NT>
__device__ __forceinline__ void fm_tile(T *dst, const T *src, int64_t ss, int64_t n, int tid)
{
	constexpr int C = D / 8;   // 16-byte chunks per row
#pragma unroll 4
	for (int e = tid; e < FM_KT * C; e += NT) {
		const int j = e / C, c = e - j * C;
		const bool in = j < n;
		const T *p = in ? src + j * ss + c * 8 : src;
		const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst + j * (D + 8) + c * 8);
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(p), "r"(in ? 16 : 0));
	}
}

// closes the group of copies issued since the last one (an empty group when none was)
__device__ __forceinline__ void fm_commit()
{
	asm volatile("cp.async.commit_group;\n" ::);
}

// waits until at most N of this thread's groups are still in flight
template <int N> __device__ __forceinline__ void fm_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// MB: the blocks a multiprocessor must hold (1: the compiler's choice, 167 registers a thread at head
// size 64 and 4 warps, 3 blocks; 4: 128 registers, a few spilled)
template <typename T, int D, int NW, int MB> __global__ void __launch_bounds__(NW * 32, MB)
attention_mma(const T *q, const T *k, const T *v, T *y, rd_attn a)
{
	__shared__ __align__(16) T ks[FM_KT * (D + 8)];
	__shared__ __align__(16) T vs[FM_KT * (D + 8)];
	constexpr float L2E = 1.4426950408889634f;
	const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, t4 = lane & 3;
	const int64_t b = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * NW * 16 + w * 16;
	const int64_t hk = h / (a.Hq / a.Hkv);
	const int64_t rows[2] = { i0 + g, i0 + g + 8 };

	// this warp's 16 rows of Q as A fragments (rows past Lq: zeros)
	uint32_t qa[D / 16][4];
#pragma unroll
	for (int r = 0; r < 2; r++) {
		const bool in = rows[r] < a.Lq;
		const T *qr = q + b * a.q_sb + h * a.q_sh + (in ? rows[r] : 0) * a.q_ss;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			qa[kk][r] = in ? *reinterpret_cast<const uint32_t *>(qr + kk * 16 + 2 * t4) : 0u;
			qa[kk][r + 2] = in ? *reinterpret_cast<const uint32_t *>(qr + kk * 16 + 8 + 2 * t4) : 0u;
		}
	}
	float o[D / 8][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.f, 0.f };
#pragma unroll
	for (int n = 0; n < D / 8; n++)
		o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

	int64_t tend = a.T;
	if (a.causal) {
		const int64_t last = (int64_t)blockIdx.x * NW * 16 + NW * 16;   // keys j <= i < last
		if (last < tend)
			tend = last;
	}
	// each of the thread's two rows: its query index for masks (the last one for rows past Lq) and
	// its row of the mask
	const int64_t ic[2] = { rows[0] < a.Lq ? rows[0] : a.Lq - 1, rows[1] < a.Lq ? rows[1] : a.Lq - 1 };
	const int64_t mrow[2] = { attn_mrow(a, b, h, ic[0]), attn_mrow(a, b, h, ic[1]) };
	// K and V tiles are copied one step ahead of their use: groups are committed in the order K0, V0,
	// K1, V1...; K(t+1) is copied while the softmax and P.V of tile t run, V(t+1) while Q.K^T of t+1 does
	const T *kb = k + b * a.k_sb + hk * a.k_sh, *vb = v + b * a.v_sb + hk * a.v_sh;
	if (tend > 0) {
		fm_tile<T, D, NW * 32>(ks, kb, a.k_ss, a.T, tid);
		fm_commit();
		fm_tile<T, D, NW * 32>(vs, vb, a.v_ss, a.T, tid);
		fm_commit();
	}
	for (int64_t t0 = 0; t0 < tend; t0 += FM_KT) {
		const bool more = t0 + FM_KT < tend;
		fm_wait<1>();   // K(t) is here; V(t) may not be
		__syncthreads();
		// S = Q K^T for 16 rows x 64 keys
		float s[FM_KT / 8][4];
#pragma unroll
		for (int j = 0; j < FM_KT / 8; j++) {
			s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
			const T *kr = ks + (j * 8 + g) * (D + 8) + 2 * t4;
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++)
				Mma<T>::run(s[j], qa[kk], *reinterpret_cast<const uint32_t *>(kr + kk * 16),
					    *reinterpret_cast<const uint32_t *>(kr + kk * 16 + 8));
		}
		__syncthreads();   // every warp is done with ks: copy the next K tile into it
		if (more)
			fm_tile<T, D, NW * 32>(ks, kb + (t0 + FM_KT) * a.k_ss, a.k_ss, a.T - t0 - FM_KT, tid);
		fm_commit();
		// scale, masks, the tile's row maxima; a whole tile with no mask and no causal limit is only scaled
		float mx[2] = { -INFINITY, -INFINITY };
		if (!a.mask && !a.causal && t0 + FM_KT <= a.T) {
#pragma unroll
			for (int j = 0; j < FM_KT / 8; j++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					const float x = s[j][e] * a.scale;
					s[j][e] = x;
					mx[e >> 1] = fmaxf(mx[e >> 1], x);
				}
		} else {
#pragma unroll
			for (int j = 0; j < FM_KT / 8; j++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					const int r = e >> 1;
					const int64_t key = t0 + j * 8 + 2 * t4 + (e & 1);
					const float x = attn_masked_at(a, s[j][e], mrow[r], ic[r], key);
					s[j][e] = x;
					mx[r] = fmaxf(mx[r], x);
				}
		}
		float corr[2], mu[2];
#pragma unroll
		for (int r = 0; r < 2; r++) {
			mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL, mx[r], 1));
			mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL, mx[r], 2));
			const float mn = fmaxf(m[r], mx[r]);
			mu[r] = mn == -INFINITY ? 0.f : mn;   // a row masked so far: every p is 0
			corr[r] = exp2f((m[r] - mu[r]) * L2E);
			m[r] = mn;
			l[r] *= corr[r];
		}
#pragma unroll
		for (int n = 0; n < D / 8; n++) {
			o[n][0] *= corr[0];
			o[n][1] *= corr[0];
			o[n][2] *= corr[1];
			o[n][3] *= corr[1];
		}
		const float mul2[2] = { mu[0] * L2E, mu[1] * L2E };
#pragma unroll
		for (int j = 0; j < FM_KT / 8; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const float p = exp2f(fmaf(s[j][e], L2E, -mul2[e >> 1]));
				l[e >> 1] += p;
				s[j][e] = p;
			}
		fm_wait<1>();   // V(t) is here; K(t+1) may not be
		__syncthreads();
		// O += P V, 16 keys a step
#pragma unroll
		for (int kc = 0; kc < FM_KT / 16; kc++) {
			uint32_t pa[4] = { Mma<T>::pack(s[2 * kc][0], s[2 * kc][1]), Mma<T>::pack(s[2 * kc][2], s[2 * kc][3]),
					   Mma<T>::pack(s[2 * kc + 1][0], s[2 * kc + 1][1]),
					   Mma<T>::pack(s[2 * kc + 1][2], s[2 * kc + 1][3]) };
			const int mi = lane >> 3;
			const T *vrow = vs + (kc * 16 + (lane & 7) + (mi & 1) * 8) * (D + 8) + (mi >> 1) * 8;
#pragma unroll
			for (int nd = 0; nd < D / 16; nd++) {
				uint32_t r0, r1, r2, r3;
				const uint32_t addr = (uint32_t)__cvta_generic_to_shared(vrow + nd * 16);
				asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
					     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
					     : "r"(addr));
				Mma<T>::run(o[2 * nd], pa, r0, r1);
				Mma<T>::run(o[2 * nd + 1], pa, r2, r3);
			}
		}
		__syncthreads();   // every warp is done with vs: copy the next V tile into it
		if (more)
			fm_tile<T, D, NW * 32>(vs, vb + (t0 + FM_KT) * a.v_ss, a.v_ss, a.T - t0 - FM_KT, tid);
		fm_commit();
	}
	fm_wait<0>();
	// the rows' sums over their 4 lanes; a row masked everywhere (sum 0) or with a NaN (sum NaN)
	// is NaN, or zeros with nan_zero
#pragma unroll
	for (int r = 0; r < 2; r++) {
		l[r] += __shfl_xor_sync(FULL, l[r], 1);
		l[r] += __shfl_xor_sync(FULL, l[r], 2);
		if (rows[r] >= a.Lq)
			continue;
		const bool zero = a.T == 0 || (a.nan_zero && !(l[r] > 0.f));
		const float inv = zero ? 0.f : 1.f / l[r];
		T *yr = y + b * a.y_sb + h * a.y_sh + rows[r] * a.y_ss + 2 * t4;
#pragma unroll
		for (int n = 0; n < D / 8; n++) {
			const float o0 = zero ? 0.f : o[n][2 * r] * inv, o1 = zero ? 0.f : o[n][2 * r + 1] * inv;
			*reinterpret_cast<uint32_t *>(yr + n * 8) = Mma<T>::pack(o0, o1);
		}
	}
}

// The tensor-core attention with 4 warps and head size 64 or less is held to 128 registers (4 blocks
// a multiprocessor): on an H200 that took BERT-base's attention at batch 32 from 0.56 to 0.48 ms and
// ViT-B/16's from 0.77 to 0.68 (bench/RESULTS.md, issue 20). OGSH_ATTN_OCC=0 gives the compiler its own
// choice (167 registers, 3 blocks), for comparisons; read once.
static bool attn_occupancy()
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("OGSH_ATTN_OCC");
		v = !(e && !strcmp(e, "0"));
	}
	return v == 1;
}

template <typename T, int D, int NW>
static cudaError_t attention_mma_nw(const rd_attn *a, const void *q, const void *k, const void *v, void *y,
				    cudaStream_t s)
{
	dim3 grid((unsigned)((a->Lq + NW * 16 - 1) / (NW * 16)), (unsigned)a->Hq, (unsigned)a->B);
	if (NW == 4 && D <= 64 && attn_occupancy())
		attention_mma<T, D, NW, 4><<<grid, NW * 32, 0, s>>>((const T *)q, (const T *)k, (const T *)v, (T *)y, *a);
	else
		attention_mma<T, D, NW, 1><<<grid, NW * 32, 0, s>>>((const T *)q, (const T *)k, (const T *)v, (T *)y, *a);
	return cudaGetLastError();
}

// 4 warps a block, or 1 when that leaves fewer than about 2 blocks per SM
template <typename T, int D>
static cudaError_t attention_mma_d(const rd_attn *a, const void *q, const void *k, const void *v, void *y,
				   cudaStream_t s)
{
	if ((a->Lq + 63) / 64 * a->Hq * a->B >= 256)
		return attention_mma_nw<T, D, 4>(a, q, k, v, y, s);
	return attention_mma_nw<T, D, 1>(a, q, k, v, y, s);
}

// whether every row of Q, K, V and Y starts 16-byte aligned: strides multiples of `elems` elements
// of 16 bytes, pointers aligned
static bool attention_rows16(const rd_attn *a, const void *q, const void *k, const void *v, const void *y, int elems)
{
	const int64_t st[] = { a->q_sb, a->q_sh, a->q_ss, a->k_sb, a->k_sh, a->k_ss,
			       a->v_sb, a->v_sh, a->v_ss, a->y_sb, a->y_sh, a->y_ss };
	for (int64_t x : st)
		if (x % elems)
			return false;
	const void *p[] = { q, k, v, y };
	for (const void *x : p)
		if ((uintptr_t)x % 16)
			return false;
	return true;
}

// whether the tensor-core kernel takes a: head sizes, 16-byte rows, a mask it can read
static bool attention_mma_ok(const rd_attn *a, const void *q, const void *k, const void *v, const void *y)
{
	if (a->D != a->Dv || (a->D != 32 && a->D != 64 && a->D != 128) || !attention_rows16(a, q, k, v, y, 8))
		return false;
	return !a->mask || a->mask_dtype == RD_BOOL || a->mask_dtype == RD_F32 || a->mask_dtype == RD_F16 ||
	       a->mask_dtype == RD_BF16;
}

// ------------------------------------------------------------------------
// Attention in float32 for larger grids (head size 64 or 128 for Q, K and
// V): a block of 128 threads takes 64 queries of one (batch, head), key
// tiles of 64 through shared memory. Q and K sit there transposed
// ([d][row]), so both products are outer products of float4 loads: thread
// (ty, tx) of 8 x 16 owns queries {0, 32} + 4*ty..+3, keys 4*tx..+3 of a
// tile and output dims {0, 64} + 4*tx..+3 (head size 64: 4*tx..+3 only).
// A warp's float4 loads of a row read at most 256 distinct bytes. Rows come
// in by cp.async (all of a tile in flight at once) to the V buffer, K's and
// Q's to be transposed from there; V's load runs under Q.K^T. A padding
// mask (the same for every query) is read once a tile. A row's online
// softmax lives on the 16 lanes that share ty; the probabilities go,
// transposed, through the K buffer to P.V. On an H200, BERT-base's
// attention (64 x 12 heads x 128 x 64) takes 0.173 ms (19 TFLOP/s); with
// 64 threads a block and 8 x 8 tiles (255 registers, 8 warps an SM) 0.215.
// ------------------------------------------------------------------------

constexpr int FT_BQ = 64, FT_KT = 64;

template <int D> struct Ft {
	static constexpr int PS = FT_BQ + 4;   // a row of P^T
	static constexpr int VS = D + 4;       // a row of V (or of K, Q on their way in)
	static constexpr int KB = D * FT_KT > FT_KT * PS ? D * FT_KT : FT_KT * PS;
	static constexpr size_t floats = (size_t)D * FT_BQ + KB + (size_t)FT_KT * VS + FT_KT;
};

// the 64 rows of D floats at src (row stride ss) into dst [64][D + 4] by cp.async; zeros past n rows
template <int D, int NT>
__device__ __forceinline__ void ft_rows_async(float *dst, const float *src, int64_t ss, int64_t n, int tid)
{
	constexpr int C = D / 4;
	for (int e = tid; e < 64 * C; e += NT) {
		const int j = e / C, c = e - j * C;
		cp_async16(dst + j * Ft<D>::VS + 4 * c, j < n ? src + j * ss + 4 * c : src, j < n);
	}
	cp_async_commit();
}

// the (64 x D) tile staged in src [64][D + 4] transposed into dst [D][64]
template <int D, int NT> __device__ __forceinline__ void ft_transpose(float *dst, const float *src, int tid)
{
	for (int e = tid; e < 64 * (D / 4); e += NT) {
		const int j = e % 64, c = e / 64;
		const float4 x = *reinterpret_cast<const float4 *>(src + j * Ft<D>::VS + 4 * c);
		dst[(4 * c) * 64 + j] = x.x;
		dst[(4 * c + 1) * 64 + j] = x.y;
		dst[(4 * c + 2) * 64 + j] = x.z;
		dst[(4 * c + 3) * 64 + j] = x.w;
	}
}

template <int D, int NT> __global__ void __launch_bounds__(NT, D == 128 ? 2 : 4)
attention_f32t(const float *q, const float *k, const float *v, float *y, rd_attn a)
{
	constexpr int TX = NT / 8, KJ = FT_KT / TX, DU = D / TX, PS = Ft<D>::PS, VS = Ft<D>::VS;
	static_assert(KJ % 4 == 0 && DU % 4 == 0, "keys and dims a thread: float4s");
	extern __shared__ float4 ft_smem4[];
	float *qs = reinterpret_cast<float *>(ft_smem4);   // Q^T [D][FT_BQ]
	float *ks = qs + D * FT_BQ;                         // K^T [D][FT_KT], then P^T [FT_KT][PS]
	float *vs = ks + Ft<D>::KB;                         // V [FT_KT][VS] (K, Q on their way in)
	float *mk = vs + FT_KT * VS;                        // a tile's mask where no row has its own
	const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
	const int64_t b = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * FT_BQ;
	const int64_t hk = h / (a.Hq / a.Hkv);
	ft_rows_async<D, NT>(vs, q + b * a.q_sb + h * a.q_sh + i0 * a.q_ss, a.q_ss, a.Lq - i0, tid);
	cp_async_wait_all();
	__syncthreads();
	ft_transpose<D, NT>(qs, vs, tid);
	float o[8][DU], m[8], l[8];
#pragma unroll
	for (int i = 0; i < 8; i++) {
		m[i] = -INFINITY;
		l[i] = 0.f;
#pragma unroll
		for (int u = 0; u < DU; u++)
			o[i][u] = 0.f;
	}
	int64_t tend = a.T;
	if (a.causal && i0 + FT_BQ < tend)
		tend = i0 + FT_BQ;
	// a mask the same for every query (a padding mask [B, 1, 1, T]): a tile's 64 values once
	const bool rowfree = !a.mask || a.mstr[2] == 0;
	const float *kb = k + b * a.k_sb + hk * a.k_sh, *vb = v + b * a.v_sb + hk * a.v_sh;
	for (int64_t t0 = 0; t0 < tend; t0 += FT_KT) {
		__syncthreads();   // the last tile's P.V (and Q's transpose) done with ks and vs
		ft_rows_async<D, NT>(vs, kb + t0 * a.k_ss, a.k_ss, a.T - t0, tid);
		if (rowfree && tid < FT_KT)   // what attn_masked_at adds to key t0 + tid's score (-inf: masked)
			mk[tid] = attn_masked_at(a, 0.f, attn_mrow(a, b, h, 0), a.Lq, t0 + tid);
		cp_async_wait_all();
		__syncthreads();
		ft_transpose<D, NT>(ks, vs, tid);
		__syncthreads();
		ft_rows_async<D, NT>(vs, vb + t0 * a.v_ss, a.v_ss, a.T - t0, tid);   // lands under Q.K^T
		float s[8][KJ];
#pragma unroll
		for (int i = 0; i < 8; i++)
#pragma unroll
			for (int j = 0; j < KJ; j++)
				s[i][j] = 0.f;
#pragma unroll 4
		for (int d = 0; d < D; d++) {
			float qv[8], kv[KJ];
			*reinterpret_cast<float4 *>(qv) = *reinterpret_cast<const float4 *>(qs + d * FT_BQ + 4 * ty);
			*reinterpret_cast<float4 *>(qv + 4) = *reinterpret_cast<const float4 *>(qs + d * FT_BQ + 32 + 4 * ty);
#pragma unroll
			for (int g = 0; g < KJ / 4; g++)
				*reinterpret_cast<float4 *>(kv + 4 * g) =
					*reinterpret_cast<const float4 *>(ks + d * FT_KT + 4 * TX * g + 4 * tx);
#pragma unroll
			for (int i = 0; i < 8; i++)
#pragma unroll
				for (int j = 0; j < KJ; j++)
					s[i][j] = fmaf(qv[i], kv[j], s[i][j]);
		}
		// scale, masks, online softmax over the TX lanes of a row group
#pragma unroll
		for (int i = 0; i < 8; i++) {
			const int64_t r = i0 + 32 * (i / 4) + 4 * ty + i % 4, i_ = r < a.Lq ? r : a.Lq - 1;
			const int64_t mrow = rowfree ? 0 : attn_mrow(a, b, h, i_);
			float mx = -INFINITY;
#pragma unroll
			for (int j = 0; j < KJ; j++) {
				const int key = 4 * TX * (j / 4) + 4 * tx + j % 4;
				float x;
				if (rowfree) {
					const float mv = mk[key];
					x = mv == -INFINITY || (a.causal && t0 + key > i_) ? -INFINITY : s[i][j] * a.scale + mv;
				} else {
					x = attn_masked_at(a, s[i][j], mrow, i_, t0 + key);
				}
				s[i][j] = x;
				mx = fmaxf(mx, x);
			}
#pragma unroll
			for (int off = 1; off < TX; off <<= 1)
				mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, off));
			const float mn = fmaxf(m[i], mx), mu = mn == -INFINITY ? 0.f : mn;
			const float corr = expf(m[i] - mu);
			m[i] = mn;
			l[i] *= corr;
#pragma unroll
			for (int u = 0; u < DU; u++)
				o[i][u] *= corr;
#pragma unroll
			for (int j = 0; j < KJ; j++) {
				s[i][j] = expf(s[i][j] - mu);
				l[i] += s[i][j];
			}
		}
		__syncthreads();   // K^T read by all: its buffer takes P^T
#pragma unroll
		for (int j = 0; j < KJ; j++) {
			float *pr = ks + (4 * TX * (j / 4) + 4 * tx + j % 4) * PS + 4 * ty;
			*reinterpret_cast<float4 *>(pr) = make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
			*reinterpret_cast<float4 *>(pr + 32) = make_float4(s[4][j], s[5][j], s[6][j], s[7][j]);
		}
		cp_async_wait_all();
		__syncthreads();
		// O += P V
#pragma unroll 4
		for (int kk = 0; kk < FT_KT; kk++) {
			float pv[8], vv[DU];
			*reinterpret_cast<float4 *>(pv) = *reinterpret_cast<const float4 *>(ks + kk * PS + 4 * ty);
			*reinterpret_cast<float4 *>(pv + 4) = *reinterpret_cast<const float4 *>(ks + kk * PS + 32 + 4 * ty);
#pragma unroll
			for (int g = 0; g < DU / 4; g++)
				*reinterpret_cast<float4 *>(vv + 4 * g) =
					*reinterpret_cast<const float4 *>(vs + kk * VS + 4 * TX * g + 4 * tx);
#pragma unroll
			for (int i = 0; i < 8; i++)
#pragma unroll
				for (int u = 0; u < DU; u++)
					o[i][u] = fmaf(pv[i], vv[u], o[i][u]);
		}
	}
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float L = l[i];
#pragma unroll
		for (int off = 1; off < TX; off <<= 1)
			L += __shfl_xor_sync(FULL, L, off);
		const int64_t row = i0 + 32 * (i / 4) + 4 * ty + i % 4;
		if (row >= a.Lq)
			continue;
		// a row masked everywhere (L 0) or with a NaN (L NaN): NaN, or zeros with nan_zero
		const bool zero = a.T == 0 || (a.nan_zero && !(L > 0.f));
		const float inv = zero ? 0.f : 1.f / L;
		float *yr = y + b * a.y_sb + h * a.y_sh + row * a.y_ss;
#pragma unroll
		for (int g = 0; g < DU / 4; g++) {
			float4 out;
			out.x = zero ? 0.f : o[i][4 * g] * inv;
			out.y = zero ? 0.f : o[i][4 * g + 1] * inv;
			out.z = zero ? 0.f : o[i][4 * g + 2] * inv;
			out.w = zero ? 0.f : o[i][4 * g + 3] * inv;
			*reinterpret_cast<float4 *>(yr + 4 * TX * g + 4 * tx) = out;
		}
	}
}

template <int D, int NT>
static cudaError_t attention_f32t_d(const rd_attn *a, const void *q, const void *k, const void *v, void *y,
				    cudaStream_t s)
{
	const size_t smem = sizeof(float) * Ft<D>::floats;
	cudaError_t e = cudaFuncSetAttribute(attention_f32t<D, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
	if (e != cudaSuccess)
		return e;
	dim3 grid((unsigned)((a->Lq + FT_BQ - 1) / FT_BQ), (unsigned)a->Hq, (unsigned)a->B);
	attention_f32t<D, NT><<<grid, NT, smem, s>>>((const float *)q, (const float *)k, (const float *)v, (float *)y, *a);
	return cudaGetLastError();
}

// the register-tile kernel for float32 when it takes a and the grid fills the GPU (else cudaErrorNotSupported)
template <typename T>
static cudaError_t attention_f32t_t(const rd_attn *, const void *, const void *, const void *, void *, cudaStream_t,
				    const char **)
{
	return cudaErrorNotSupported;
}
template <>
cudaError_t attention_f32t_t<float>(const rd_attn *a, const void *q, const void *k, const void *v, void *y,
				    cudaStream_t s, const char **impl)
{
	if (a->D != a->Dv || (a->D != 64 && a->D != 128) || (a->Lq + FT_BQ - 1) / FT_BQ * a->Hq * a->B < 128 ||
	    !attention_rows16(a, q, k, v, y, 4))
		return cudaErrorNotSupported;
	*impl = "ogsh attention float32 (register tiles)";
	if (a->D == 128)
		return attention_f32t_d<128, 128>(a, q, k, v, y, s);
	return attention_f32t_d<64, 128>(a, q, k, v, y, s);
}

// the tensor-core kernel for float16/bfloat16 when it takes a (else cudaErrorNotSupported)
template <typename T>
static cudaError_t attention_mma_t(const rd_attn *a, const void *q, const void *k, const void *v, void *y,
				   cudaStream_t s, const char **impl)
{
	if (!attention_mma_ok(a, q, k, v, y))
		return cudaErrorNotSupported;
	*impl = "ogsh attention on tensor cores (mma.sync)";
	if (a->D == 32)
		return attention_mma_d<T, 32>(a, q, k, v, y, s);
	if (a->D == 64)
		return attention_mma_d<T, 64>(a, q, k, v, y, s);
	return attention_mma_d<T, 128>(a, q, k, v, y, s);
}
template <>
cudaError_t attention_mma_t<float>(const rd_attn *, const void *, const void *, const void *, void *, cudaStream_t,
				   const char **)
{
	return cudaErrorNotSupported;
}

template <typename T, int DM, int QW> static cudaError_t attention_dq(const rd_attn *a, const void *q, const void *k,
								      const void *v, void *y, cudaStream_t s)
{
	constexpr int BQ = QW * AT_NW;
	size_t smem = sizeof(float) * (size_t)(BQ * a->D + a->D * (AT_KT + 1) + AT_KT * a->Dv);
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(attention<T, DM, QW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
						     (int)smem);
		if (e != cudaSuccess)
			return e;
	}
	dim3 grid((unsigned)((a->Lq + BQ - 1) / BQ), (unsigned)a->Hq, (unsigned)a->B);
	attention<T, DM, QW><<<grid, AT_NW * 32, smem, s>>>((const T *)q, (const T *)k, (const T *)v, (T *)y, *a);
	return cudaGetLastError();
}

// a warp per 4 queries, or per query where 4 would leave fewer than 256
// blocks (BERT-base at batch 1: 96 blocks, 38 us a node on an H200)
template <typename T, int DM> static cudaError_t attention_dm(const rd_attn *a, const void *q, const void *k,
							      const void *v, void *y, cudaStream_t s, const char **impl)
{
	if ((a->Lq + 4 * AT_NW - 1) / (4 * AT_NW) * a->Hq * a->B >= 256)
		return attention_dq<T, DM, 4>(a, q, k, v, y, s);
	*impl = "ogsh attention flash (a query a warp)";
	return attention_dq<T, DM, 1>(a, q, k, v, y, s);
}

template <typename T>
static cudaError_t attention_t(const rd_attn *a, const void *q, const void *k, const void *v, void *y, cudaStream_t s,
			       const char **impl)
{
	cudaError_t e = attention_mma_t<T>(a, q, k, v, y, s, impl);
	if (e == cudaErrorNotSupported)
		e = attention_f32t_t<T>(a, q, k, v, y, s, impl);
	if (e != cudaErrorNotSupported)
		return e;
	*impl = "ogsh attention flash";
	int64_t dm = a->D > a->Dv ? a->D : a->Dv;
	if (dm <= 64)
		return attention_dm<T, 64>(a, q, k, v, y, s, impl);
	if (dm <= 128)
		return attention_dm<T, 128>(a, q, k, v, y, s, impl);
	return attention_dm<T, 256>(a, q, k, v, y, s, impl);
}

} // namespace

// ------------------------------------------------------------------------
// launchers
// ------------------------------------------------------------------------

#define DISPATCH_FLOAT(dt, call)                                     \
	switch (dt) {                                                \
	case RD_F32: { typedef float T; return call; }               \
	case RD_F16: { typedef __half T; return call; }              \
	case RD_BF16: { typedef __nv_bfloat16 T; return call; }      \
	default: return cudaErrorInvalidValue;                       \
	}

static const char *dummy_impl;

extern "C" cudaError_t rd_reduce(int dtype, enum rd_op op, const struct rd_plan *p, const void *x, void *y,
				 cudaStream_t s, const char **impl)
{
	if (!impl)
		impl = &dummy_impl;
	if (p->nout <= 0)
		return cudaSuccess;
	switch (dtype) {
	case RD_I32: return reduce_t<int32_t>(op, p, x, y, s, impl);
	case RD_I64: return reduce_t<int64_t>(op, p, x, y, s, impl);
	default: break;
	}
	DISPATCH_FLOAT(dtype, reduce_t<T>(op, p, x, y, s, impl))
}

extern "C" cudaError_t rd_softmax(int dtype, bool logsm, int64_t outer, int64_t n, int64_t inner, const void *x,
				  void *y, cudaStream_t s, const char **impl)
{
	if (!impl)
		impl = &dummy_impl;
	if (outer <= 0 || n <= 0 || inner <= 0)
		return cudaSuccess;
	DISPATCH_FLOAT(dtype, softmax_t<T>(logsm, outer, n, inner, x, y, s, impl))
}

extern "C" cudaError_t rd_arg(int dtype, bool is_max, bool last, int64_t outer, int64_t n, int64_t inner,
			      const void *x, int64_t *y, cudaStream_t s, const char **impl)
{
	if (!impl)
		impl = &dummy_impl;
	if (outer <= 0 || n <= 0 || inner <= 0)
		return cudaSuccess;
	switch (dtype) {
	case RD_I32: return arg_t<int32_t>(is_max, last, outer, n, inner, x, y, s, impl);
	case RD_I64: return arg_t<int64_t>(is_max, last, outer, n, inner, x, y, s, impl);
	default: break;
	}
	DISPATCH_FLOAT(dtype, arg_t<T>(is_max, last, outer, n, inner, x, y, s, impl))
}

extern "C" cudaError_t rd_topk(int dtype, bool largest, int64_t outer, int64_t n, int64_t inner, int64_t k,
			       const void *x, void *vals, int64_t *idx, cudaStream_t s, const char **impl)
{
	if (!impl)
		impl = &dummy_impl;
	if (outer <= 0 || n <= 0 || inner <= 0 || k <= 0)
		return cudaSuccess;
	if (k > 256 || k > n)
		return cudaErrorInvalidValue;
	switch (dtype) {
	case RD_I32: return topk_t<int32_t>(largest, outer, n, inner, k, x, vals, idx, s, impl);
	case RD_I64: return topk_t<int64_t>(largest, outer, n, inner, k, x, vals, idx, s, impl);
	default: break;
	}
	DISPATCH_FLOAT(dtype, topk_t<T>(largest, outer, n, inner, k, x, vals, idx, s, impl))
}

extern "C" cudaError_t rd_rownorm(int dtype, bool rms, int64_t rows, int64_t cols, float eps, const void *x, void *y,
				  const struct rd_param *scale, const struct rd_param *bias, void *mean, void *inv,
				  int stat_dtype, cudaStream_t s, const char **impl)
{
	if (!impl)
		impl = &dummy_impl;
	if (rows <= 0)
		return cudaSuccess;
	DISPATCH_FLOAT(dtype, rownorm_t<T>(rms, rows, cols, eps, x, y, scale, bias, mean, inv, stat_dtype, s, impl))
}

template <typename T>
static cudaError_t groupnorm_t(int64_t N, int64_t C, int64_t S, int64_t groups, bool per_group, float eps,
			       const void *x, void *y, const void *sc, int sdt, const void *bi, int bdt, cudaStream_t s)
{
	groupnorm<T><<<grid_for(N * groups, 1), BS, 0, s>>>((const T *)x, (T *)y, N, C, S, groups, per_group, eps, sc,
							     sdt, bi, bdt);
	return cudaGetLastError();
}

extern "C" cudaError_t rd_groupnorm(int dtype, int64_t N, int64_t C, int64_t S, int64_t groups, bool per_group,
				    float eps, const void *x, void *y, const void *scale, int scale_dtype,
				    const void *bias, int bias_dtype, cudaStream_t s, const char **impl)
{
	if (impl)
		*impl = "ogsh groupnorm block";
	if (N <= 0 || C <= 0 || S <= 0 || groups <= 0)
		return cudaSuccess;
	DISPATCH_FLOAT(dtype, groupnorm_t<T>(N, C, S, groups, per_group, eps, x, y, scale, scale_dtype, bias, bias_dtype, s))
}

template <typename T>
static cudaError_t batchnorm_t(int64_t total, int64_t C, int64_t S, float eps, const void *x, void *y, const void *sc,
			       int sdt, const void *bi, int bdt, const void *mn, int mdt, const void *vr, int vdt,
			       cudaStream_t s)
{
	batchnorm<T><<<grid_for(total, BS), BS, 0, s>>>((const T *)x, (T *)y, total, C, S, eps, sc, sdt, bi, bdt, mn, mdt,
							vr, vdt);
	return cudaGetLastError();
}

extern "C" cudaError_t rd_batchnorm(int dtype, int64_t N, int64_t C, int64_t S, float eps, const void *x, void *y,
				    const void *scale, int scale_dtype, const void *bias, int bias_dtype,
				    const void *mean, int mean_dtype, const void *var, int var_dtype, cudaStream_t s,
				    const char **impl)
{
	if (impl)
		*impl = "ogsh batchnorm inference";
	const int64_t total = N * C * S;
	if (total <= 0)
		return cudaSuccess;
	DISPATCH_FLOAT(dtype, batchnorm_t<T>(total, C, S, eps, x, y, scale, scale_dtype, bias, bias_dtype, mean,
					     mean_dtype, var, var_dtype, s))
}

template <typename T>
static cudaError_t lpnorm_t(int p, int64_t outer, int64_t n, int64_t inner, const void *x, void *y, cudaStream_t s,
			    const char **impl)
{
	if (inner == 1) {
		if (n >= 1024 || outer < 1024) {
			*impl = "ogsh lpnorm block";
			lpnorm_rows<T, BS><<<grid_for(outer, 1), BS, 0, s>>>((const T *)x, (T *)y, outer, n, p);
		} else {
			*impl = "ogsh lpnorm warp";
			lpnorm_rows<T, 32><<<grid_for(outer, BS / 32), BS, 0, s>>>((const T *)x, (T *)y, outer, n, p);
		}
	} else {
		*impl = "ogsh lpnorm cols";
		lpnorm_cols<T><<<grid_for(outer * inner, BS), BS, 0, s>>>((const T *)x, (T *)y, outer, n, inner, p);
	}
	return cudaGetLastError();
}

extern "C" cudaError_t rd_lpnorm(int dtype, int p, int64_t outer, int64_t n, int64_t inner, const void *x, void *y,
				 cudaStream_t s, const char **impl)
{
	if (!impl)
		impl = &dummy_impl;
	if (outer <= 0 || n <= 0 || inner <= 0)
		return cudaSuccess;
	DISPATCH_FLOAT(dtype, lpnorm_t<T>(p, outer, n, inner, x, y, s, impl))
}

template <typename T>
static cudaError_t mvn_t(const rd_plan *p, const MvnMap *m, int64_t total, const void *x, void *y, float *ws,
			 cudaStream_t s)
{
	mvn_stats<T><<<grid_for(p->nout, 1), BS, 0, s>>>((const T *)x, *p, ws);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	mvn_apply<T><<<grid_for(total, BS), BS, 0, s>>>((const T *)x, (T *)y, total, *m, ws, p->nout);
	return cudaGetLastError();
}

extern "C" cudaError_t rd_mvn(int dtype, const struct rd_plan *p, int rank, const int64_t *xdims, const int64_t *sstr,
			      const void *x, void *y, float *ws, cudaStream_t s, const char **impl)
{
	if (impl)
		*impl = "ogsh mvn stats+apply";
	if (rank > RD_MAX_DIMS)
		return cudaErrorInvalidValue;
	MvnMap m;
	m.rank = rank;
	int64_t total = 1;
	for (int d = 0; d < rank; d++) {
		m.dims[d] = xdims[d];
		m.sstr[d] = sstr[d];
		total *= xdims[d];
	}
	if (total <= 0 || p->nout <= 0)
		return cudaSuccess;
	DISPATCH_FLOAT(dtype, mvn_t<T>(p, &m, total, x, y, ws, s))
}

extern "C" cudaError_t rd_attention(int dtype, const struct rd_attn *a, const void *q, const void *k, const void *v,
				    void *y, cudaStream_t s, const char **impl)
{
	if (!impl)
		impl = &dummy_impl;
	if (a->B <= 0 || a->Hq <= 0 || a->Lq <= 0 || a->Dv <= 0)
		return cudaSuccess;
	if (a->D > 256 || a->Dv > 256 || a->Hkv <= 0 || a->Hq % a->Hkv)
		return cudaErrorInvalidValue;
	DISPATCH_FLOAT(dtype, attention_t<T>(a, q, k, v, y, s, impl))
}

// The attention mask of a as the additive bias cuDNN's attention graph adds: [Bm, Hm, Lq, T] of T with
// rows Tp apart; a bool mask gives 0 (kept) and -inf, keys past the mask's columns -inf, and finite
// values below T's range the lowest finite T (a float32 -3.4e38 stays a finite "masked")
template <typename T>
__global__ void attn_bias_k(rd_attn a, int64_t Bm, int64_t Hm, int64_t Tp, T *dst, int64_t total)
{
	const float lo = std::is_same<T, __half>::value ? -65504.f : -3.38953139e38f;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = e;
		const int64_t j = r % a.T;
		r /= a.T;
		const int64_t i = r % a.Lq;
		r /= a.Lq;
		const int64_t h = r % Hm, b = r / Hm;
		float x = -INFINITY;
		if (j < a.mcols) {
			const int64_t mo = b * a.mstr[0] + h * a.mstr[1] + i * a.mstr[2] + j * a.mstr[3];
			if (a.mask_dtype == RD_BOOL)
				x = ((const uint8_t *)a.mask)[mo] ? 0.f : -INFINITY;
			else {
				x = ldf(a.mask, a.mask_dtype, mo);
				if (x < lo && x != -INFINITY)
					x = lo;
			}
		}
		dst[((b * Hm + h) * a.Lq + i) * Tp + j] = fromf<T>(x);
	}
}

extern "C" cudaError_t rd_attn_bias(int dtype, const struct rd_attn *a, int64_t Bm, int64_t Hm, int64_t Tp, void *dst,
				    cudaStream_t s)
{
	const int64_t total = Bm * Hm * a->Lq * a->T;
	if (total <= 0)
		return cudaSuccess;
	const int64_t blocks = (total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096;
	if (dtype == RD_F16)
		attn_bias_k<__half><<<(unsigned)blocks, 256, 0, s>>>(*a, Bm, Hm, Tp, (__half *)dst, total);
	else if (dtype == RD_BF16)
		attn_bias_k<__nv_bfloat16><<<(unsigned)blocks, 256, 0, s>>>(*a, Bm, Hm, Tp, (__nv_bfloat16 *)dst, total);
	else
		return cudaErrorInvalidValue;
	return cudaGetLastError();
}
