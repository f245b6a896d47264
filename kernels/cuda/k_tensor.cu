// k_tensor.cu - CUDA kernels and launchers of the tensor family (entries in k_tensor.c).
//
// Data movement copies elements by their size (1, 2, 4, 8 bytes) or, where
// rows are contiguous and aligned, in wider units up to 16 bytes. Index
// math is 32-bit where the element count allows it, else 64-bit; loops are
// grid-stride so that any size fits a capped grid.
#include "k_tensor.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>

namespace {

const int kThreads = 256;

// Blocks for n items at kThreads per block, capped (the loops are grid-stride).
unsigned grid_for(int64_t n, int per_block = kThreads)
{
	int64_t b = (n + per_block - 1) / per_block;
	if (b > (1 << 20))
		b = 1 << 20;
	return b < 1 ? 1u : (unsigned)b;
}

bool aligned(const void *p, int64_t w)
{
	return ((uintptr_t)p % (uintptr_t)w) == 0;
}

// Copy units by width in bytes.
template <int W> struct unit_of;
template <> struct unit_of<1> { typedef uint8_t T; };
template <> struct unit_of<2> { typedef uint16_t T; };
template <> struct unit_of<4> { typedef uint32_t T; };
template <> struct unit_of<8> { typedef unsigned long long T; };
template <> struct unit_of<16> { typedef uint4 T; };

// Float loads and stores for the computing kernels.
__device__ __forceinline__ float tof(float v) { return v; }
__device__ __forceinline__ float tof(__half v) { return __half2float(v); }
__device__ __forceinline__ float tof(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T fromf(float v);
template <> __device__ __forceinline__ float fromf<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromf<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromf<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename X> __device__ __forceinline__ int64_t ldidx(const X *p, int64_t i) { return (int64_t)p[i]; }

// ---------------------------------------------------------------------------
// Strided views: Transpose, Slice, Expand, Tile, DepthToSpace...
// ---------------------------------------------------------------------------

// dims and strides innermost first
struct strided_args {
	int rank;
	int64_t dims[KT_MAX_DIMS];
	int64_t str[KT_MAX_DIMS];
	int64_t base;
};

template <typename T, typename I>
__global__ void strided_kernel(const strided_args a, const T *__restrict__ x, T *__restrict__ y, I n)
{
	I stride = (I)gridDim.x * (I)blockDim.x;
	for (I i = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += stride) {
		I rem = i;
		int64_t off = a.base;
#pragma unroll
		for (int d = 0; d < KT_MAX_DIMS; d++) {
			if (d >= a.rank)
				break;
			if (d == a.rank - 1) {
				off += (int64_t)rem * a.str[d];
				break;
			}
			I dd = (I)a.dims[d];
			I q = rem / dd;
			off += (int64_t)(rem - q * dd) * a.str[d];
			rem = q;
		}
		y[i] = x[off];
	}
}

template <int W>
void strided_launch(const strided_args &a, const void *x, void *y, int64_t n, cudaStream_t st)
{
	typedef typename unit_of<W>::T T;
	if (n <= INT32_MAX)
		strided_kernel<T, uint32_t><<<grid_for(n), kThreads, 0, st>>>(a, (const T *)x, (T *)y, (uint32_t)n);
	else
		strided_kernel<T, uint64_t><<<grid_for(n), kThreads, 0, st>>>(a, (const T *)x, (T *)y, (uint64_t)n);
}

// ---------------------------------------------------------------------------
// Tiled transpose
// ---------------------------------------------------------------------------

const int kTile = 32, kTileRows = 8;

struct tiled_args {
	int nb;
	int64_t bdims[KT_MAX_DIMS];   // innermost first
	int64_t bsrc[KT_MAX_DIMS];
	int64_t bdst[KT_MAX_DIMS];
	int64_t dq, dl, sl, oq;
	int64_t tq, tl, total;        // tiles along q, along l, in all
};

template <typename T>
__global__ void tiled_kernel(const tiled_args a, const T *__restrict__ x, T *__restrict__ y)
{
	__shared__ T tile[kTile][kTile + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	for (int64_t t = blockIdx.x; t < a.total; t += gridDim.x) {
		int64_t tl = t % a.tl, r = t / a.tl;
		int64_t tq = r % a.tq, b = r / a.tq;
		int64_t so = 0, dof = 0;
#pragma unroll
		for (int d = 0; d < KT_MAX_DIMS; d++) {
			if (d >= a.nb)
				break;
			int64_t c = b % a.bdims[d];
			b /= a.bdims[d];
			so += c * a.bsrc[d];
			dof += c * a.bdst[d];
		}
		int64_t q0 = tq * kTile, l0 = tl * kTile;
		// reads run along q (source stride 1)
		for (int k = 0; k < kTile; k += kTileRows) {
			int64_t q = q0 + tx, l = l0 + ty + k;
			if (q < a.dq && l < a.dl)
				tile[ty + k][tx] = x[so + q + l * a.sl];
		}
		__syncthreads();
		// writes run along l (destination stride 1)
		for (int k = 0; k < kTile; k += kTileRows) {
			int64_t l = l0 + tx, q = q0 + ty + k;
			if (q < a.dq && l < a.dl)
				y[dof + q * a.oq + l] = tile[tx][ty + k];
		}
		__syncthreads();
	}
}

// ---------------------------------------------------------------------------
// Rows: Concat, Split
// ---------------------------------------------------------------------------

struct rows_args {
	const void *src[KT_ROWS_BATCH];
	void *dst[KT_ROWS_BATCH];
	int64_t w[KT_ROWS_BATCH], sp[KT_ROWS_BATCH], dp[KT_ROWS_BATCH];   // in units
	int64_t rows;
};

template <typename T, typename I>
__global__ void rows_kernel(const rows_args a)
{
	const int j = blockIdx.y;
	const T *__restrict__ s = (const T *)a.src[j];
	T *__restrict__ d = (T *)a.dst[j];
	I w = (I)a.w[j], n = (I)a.rows * w;
	int64_t sp = a.sp[j], dp = a.dp[j];
	I stride = (I)gridDim.x * (I)blockDim.x;
	for (I e = (I)blockIdx.x * (I)blockDim.x + threadIdx.x; e < n; e += stride) {
		I r = e / w, c = e - r * w;
		d[(int64_t)r * dp + (int64_t)c] = s[(int64_t)r * sp + (int64_t)c];
	}
}

// ---------------------------------------------------------------------------
// Gather family
// ---------------------------------------------------------------------------

template <typename T, typename X>
__global__ void gather_kernel(const T *__restrict__ x, const X *__restrict__ idx, T *__restrict__ y, int64_t dim,
			      int64_t nidx, int64_t inner, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t t = e / inner, c = e - t * inner;
		int64_t p = t / nidx, j = t - p * nidx;
		int64_t v = ldidx(idx, j);
		if (v < 0)
			v += dim;
		T val{};
		if (v >= 0 && v < dim)
			val = x[(p * dim + v) * inner + c];
		y[e] = val;
	}
}

// The data offset of index element e (row-major over a.dims), -1 when out of range.
template <typename X>
__device__ __forceinline__ int64_t elems_off(const kt_elems &a, const X *idx, int64_t e)
{
	int64_t v = ldidx(idx, e);
	if (v < 0)
		v += a.axdim;
	if (v < 0 || v >= a.axdim)
		return -1;
	int64_t off = 0, rem = e;
#pragma unroll
	for (int d = KT_MAX_RANK - 1; d >= 0; d--) {
		if (d >= a.rank)
			continue;
		int64_t c = rem % a.dims[d];
		rem /= a.dims[d];
		off += (d == a.axis ? v : c) * a.xstr[d];
	}
	return off;
}

template <typename T, typename X>
__global__ void gather_elements_kernel(const kt_elems a, const T *__restrict__ x, const X *__restrict__ idx,
				       T *__restrict__ y, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t off = elems_off(a, idx, e);
		T val{};
		if (off >= 0)
			val = x[off];
		y[e] = val;
	}
}

template <typename T, typename X>
__global__ void scatter_elements_kernel(const kt_elems a, const T *__restrict__ up, const X *__restrict__ idx,
					T *__restrict__ y, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t off = elems_off(a, idx, e);
		if (off >= 0)
			y[off] = up[e];
	}
}

// nd: strides, bstride and block in units
template <typename X>
__device__ __forceinline__ int64_t nd_off(const kt_nd &a, const X *idx, int64_t t)
{
	int64_t off = (t / a.per) * a.bstride;
	for (int j = 0; j < a.m && j < KT_MAX_RANK; j++) {
		int64_t v = ldidx(idx, t * a.m + j);
		if (v < 0)
			v += a.dims[j];
		if (v < 0 || v >= a.dims[j])
			return -1;
		off += v * a.str[j];
	}
	return off;
}

template <typename T, typename X>
__global__ void gather_nd_kernel(const kt_nd a, const T *__restrict__ x, const X *__restrict__ idx,
				 T *__restrict__ y, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t t = e / a.block_bytes, c = e - t * a.block_bytes;
		int64_t off = nd_off(a, idx, t);
		T val{};
		if (off >= 0)
			val = x[off + c];
		y[e] = val;
	}
}

template <typename T, typename X>
__global__ void scatter_nd_kernel(const kt_nd a, const T *__restrict__ up, const X *__restrict__ idx,
				  T *__restrict__ y, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t t = e / a.block_bytes, c = e - t * a.block_bytes;
		int64_t off = nd_off(a, idx, t);
		if (off >= 0)
			y[off + c] = up[e];
	}
}

// ---------------------------------------------------------------------------
// Pad
// ---------------------------------------------------------------------------

template <typename T>
__global__ void pad_kernel(const struct kt_pad a, const T *__restrict__ x, T *__restrict__ y, T fill, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t rem = e, off = 0, st = 1;
		bool out = false;
#pragma unroll
		for (int d = KT_MAX_RANK - 1; d >= 0; d--) {
			if (d >= a.rank)
				continue;
			int64_t q = rem % a.odims[d];
			rem /= a.odims[d];
			int64_t D = a.idims[d], i = q - a.pb[d];
			if (i < 0 || i >= D) {
				if (a.mode == 0 || D <= 0) {
					out = true;
				} else if (a.mode == 1) {
					if (D == 1) {
						i = 0;
					} else {
						int64_t per = 2 * (D - 1);
						i %= per;
						if (i < 0)
							i += per;
						if (i >= D)
							i = per - i;
					}
				} else if (a.mode == 2) {
					i = i < 0 ? 0 : D - 1;
				} else {
					i %= D;
					if (i < 0)
						i += D;
				}
			}
			off += i * st;
			st *= D;
		}
		y[e] = out ? fill : x[off];
	}
}

// ---------------------------------------------------------------------------
// Resize
// ---------------------------------------------------------------------------

template <typename T>
__global__ void resize_nearest_kernel(const kt_resize a, const T *__restrict__ x, T *__restrict__ y, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t rem = e, off = 0;
#pragma unroll
		for (int d = KT_MAX_RANK - 1; d >= 0; d--) {
			if (d >= a.rank)
				continue;
			int64_t q = rem % a.odims[d];
			rem /= a.odims[d];
			int64_t i = a.tab[d] < 0 ? q : a.i0[a.tab[d] + q];
			off += i * a.istr[d];
		}
		y[e] = x[off];
	}
}

template <typename T>
__global__ void resize_linear_kernel(const kt_resize a, const T *__restrict__ x, T *__restrict__ y, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t rem = e, off = 0;
		int64_t delta[KT_RESIZE_LINEAR_DIMS] = { 0, 0, 0 };
		float w[KT_RESIZE_LINEAR_DIMS] = { 0, 0, 0 };
		int m = 0;
#pragma unroll
		for (int d = KT_MAX_RANK - 1; d >= 0; d--) {
			if (d >= a.rank)
				continue;
			int64_t q = rem % a.odims[d];
			rem /= a.odims[d];
			if (a.tab[d] < 0) {
				off += q * a.istr[d];
			} else {
				int64_t i0 = a.i0[a.tab[d] + q], i1 = a.i1[a.tab[d] + q];
				off += i0 * a.istr[d];
				if (m < KT_RESIZE_LINEAR_DIMS) {
					delta[m] = (i1 - i0) * a.istr[d];
					w[m] = a.w[a.tab[d] + q];
					m++;
				}
			}
		}
		float acc = 0;
		for (int c = 0; c < (1 << m); c++) {
			int64_t o = off;
			float wt = 1;
			for (int j = 0; j < m; j++) {
				if (c & (1 << j)) {
					o += delta[j];
					wt *= w[j];
				} else {
					wt *= 1 - w[j];
				}
			}
			if (wt != 0)
				acc += wt * tof(x[o]);
		}
		y[e] = fromf<T>(acc);
	}
}

// ---------------------------------------------------------------------------
// Fill, Range, Trilu, CumSum, OneHot
// ---------------------------------------------------------------------------

template <typename T>
__global__ void fill_kernel(T *__restrict__ y, T v, int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride)
		y[e] = v;
}

template <typename T>
__global__ void range_float_kernel(const T *__restrict__ start, const T *__restrict__ delta, T *__restrict__ y,
				   int64_t n)
{
	float s = tof(start[0]), dl = tof(delta[0]);
	float s1 = __fadd_rn(s, dl), d = __fsub_rn(s1, s);
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		float v = e == 0 ? s : e == 1 ? s1 : __fadd_rn(s, __fmul_rn((float)e, d));
		y[e] = fromf<T>(v);
	}
}

template <typename T>
__global__ void range_int_kernel(const T *__restrict__ start, const T *__restrict__ delta, T *__restrict__ y,
				 int64_t n)
{
	uint64_t s = (uint64_t)(int64_t)start[0], dl = (uint64_t)(int64_t)delta[0];
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride)
		y[e] = (T)(int64_t)(s + (uint64_t)e * dl);
}

template <typename T>
__global__ void trilu_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t R, int64_t C, int64_t k, bool upper,
			     int64_t n)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t t = e / C, j = e - t * C, i = t % R;
		bool keep = upper ? j - i >= k : j - i <= k;
		T v{};
		if (keep)
			v = x[e];
		y[e] = v;
	}
}

// accumulators: float for float types, wrapping uint64 for integers
template <typename T> struct acc_of { typedef float A; };
template <> struct acc_of<int32_t> { typedef unsigned long long A; };
template <> struct acc_of<int64_t> { typedef unsigned long long A; };
template <typename T> __device__ __forceinline__ float ld_acc(const T *p, int64_t i, float) { return tof(p[i]); }
template <typename T>
__device__ __forceinline__ unsigned long long ld_acc(const T *p, int64_t i, unsigned long long)
{
	return (unsigned long long)(int64_t)p[i];
}
template <typename T> __device__ __forceinline__ void st_acc(T *p, int64_t i, float v) { p[i] = fromf<T>(v); }
template <typename T> __device__ __forceinline__ void st_acc(T *p, int64_t i, unsigned long long v)
{
	p[i] = (T)(int64_t)v;
}

// one thread per line (outer, inner), walking the axis in order
template <typename T>
__global__ void cumsum_line_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t dim, int64_t inner,
				   int64_t lines, bool excl, bool rev)
{
	typedef typename acc_of<T>::A A;
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t L = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; L < lines; L += stride) {
		int64_t p = L / inner, i = L - p * inner;
		int64_t base = p * dim * inner + i;
		A acc = 0;
		for (int64_t s = 0; s < dim; s++) {
			int64_t j = rev ? dim - 1 - s : s;
			int64_t e = base + j * inner;
			A v = ld_acc(x, e, A());
			if (excl)
				st_acc(y, e, acc);
			acc += v;
			if (!excl)
				st_acc(y, e, acc);
		}
	}
}

// one warp per contiguous row (inner == 1): chunks of 32 scanned with shuffles
const int kScanWarps = 8;

template <typename T>
__global__ void cumsum_warp_kernel(const T *__restrict__ x, T *__restrict__ y, int64_t dim, int64_t rows, bool excl,
				   bool rev)
{
	typedef typename acc_of<T>::A A;
	const unsigned full = 0xffffffffu;
	const int lane = threadIdx.x & 31;
	int64_t wstride = (int64_t)gridDim.x * kScanWarps;
	for (int64_t row = (int64_t)blockIdx.x * kScanWarps + (threadIdx.x >> 5); row < rows; row += wstride) {
		const T *xr = x + row * dim;
		T *yr = y + row * dim;
		A carry = 0;
		for (int64_t c0 = 0; c0 < dim; c0 += 32) {
			int64_t s = c0 + lane, j = rev ? dim - 1 - s : s;
			A v = s < dim ? ld_acc(xr, j, A()) : (A)0;
			for (int o = 1; o < 32; o <<= 1) {
				A t = __shfl_up_sync(full, v, o);
				if (lane >= o)
					v += t;
			}
			A prev = __shfl_up_sync(full, v, 1);   // the inclusive sum of the lane before
			if (s < dim)
				st_acc(yr, j, excl ? (lane ? (A)(carry + prev) : carry) : (A)(carry + v));
			carry += __shfl_sync(full, v, 31);
		}
	}
}

template <typename T, typename X>
__global__ void onehot_kernel(const X *__restrict__ idx, const T *__restrict__ values, T *__restrict__ y,
			      int64_t depth, int64_t inner, int64_t n)
{
	T off = values[0], on = values[1];
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
		int64_t t = e / inner, i = e - t * inner;
		int64_t p = t / depth, d = t - p * depth;
		double v = (double)idx[p * inner + i];
		if (v < 0)
			v += (double)depth;
		bool hit = v >= 0 && v < (double)depth && (int64_t)v == d;
		y[e] = hit ? on : off;
	}
}

} // namespace

// ---------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------

extern "C" void kt_strided_copy(const struct kt_strided *s, int esz, const void *x, void *y, cudaStream_t st)
{
	strided_args a;
	memset(&a, 0, sizeof(a));
	a.rank = s->rank;
	a.base = s->base;
	int64_t n = 1;
	for (int d = 0; d < s->rank; d++) {
		a.dims[d] = s->dims[s->rank - 1 - d];
		a.str[d] = s->str[s->rank - 1 - d];
		n *= a.dims[d];
	}
	if (n <= 0)
		return;
	int w = esz;
	// wider units when the inner dim is contiguous and everything is aligned
	if (a.rank > 0 && a.str[0] == 1) {
		for (int cand = 16; cand > esz; cand /= 2) {
			int64_t v = cand / esz;
			bool ok = a.dims[0] % v == 0 && a.base % v == 0 && aligned(x, cand) && aligned(y, cand);
			for (int d = 1; ok && d < a.rank; d++)
				ok = a.str[d] % v == 0;
			if (!ok)
				continue;
			a.dims[0] /= v;
			for (int d = 1; d < a.rank; d++)
				a.str[d] /= v;
			a.base /= v;
			n /= v;
			w = cand;
			break;
		}
	}
	switch (w) {
	case 1: strided_launch<1>(a, x, y, n, st); break;
	case 2: strided_launch<2>(a, x, y, n, st); break;
	case 4: strided_launch<4>(a, x, y, n, st); break;
	case 8: strided_launch<8>(a, x, y, n, st); break;
	default: strided_launch<16>(a, x, y, n, st); break;
	}
}

extern "C" void kt_transpose_tiled(const struct kt_tiled *t, int esz, const void *x, void *y, cudaStream_t st)
{
	tiled_args a;
	memset(&a, 0, sizeof(a));
	a.nb = t->nb;
	int64_t nbatch = 1;
	for (int d = 0; d < t->nb; d++) {
		a.bdims[d] = t->bdims[t->nb - 1 - d];
		a.bsrc[d] = t->bsrc[t->nb - 1 - d];
		a.bdst[d] = t->bdst[t->nb - 1 - d];
		nbatch *= a.bdims[d];
	}
	a.dq = t->dq;
	a.dl = t->dl;
	a.sl = t->sl;
	a.oq = t->oq;
	a.tq = (t->dq + kTile - 1) / kTile;
	a.tl = (t->dl + kTile - 1) / kTile;
	a.total = nbatch * a.tq * a.tl;
	if (a.total <= 0)
		return;
	dim3 block(kTile, kTileRows);
	unsigned grid = a.total > (1 << 20) ? (1u << 20) : (unsigned)a.total;
	switch (esz) {
	case 1: tiled_kernel<uint8_t><<<grid, block, 0, st>>>(a, (const uint8_t *)x, (uint8_t *)y); break;
	case 2: tiled_kernel<uint16_t><<<grid, block, 0, st>>>(a, (const uint16_t *)x, (uint16_t *)y); break;
	case 4: tiled_kernel<uint32_t><<<grid, block, 0, st>>>(a, (const uint32_t *)x, (uint32_t *)y); break;
	default:
		tiled_kernel<unsigned long long>
			<<<grid, block, 0, st>>>(a, (const unsigned long long *)x, (unsigned long long *)y);
		break;
	}
}

namespace {

template <int W> void rows_launch(const rows_args &a, int n, int64_t maxn, cudaStream_t st)
{
	typedef typename unit_of<W>::T T;
	dim3 grid(grid_for(maxn), (unsigned)n);
	if (maxn <= INT32_MAX)
		rows_kernel<T, uint32_t><<<grid, kThreads, 0, st>>>(a);
	else
		rows_kernel<T, uint64_t><<<grid, kThreads, 0, st>>>(a);
}

// The widest unit (16..1 bytes) dividing every value and address given.
int unit_for(const int64_t *vals, int nv, const void *const *ptrs, int np)
{
	for (int w = 16; w > 1; w /= 2) {
		bool ok = true;
		for (int i = 0; ok && i < nv; i++)
			ok = vals[i] % w == 0;
		for (int i = 0; ok && i < np; i++)
			ok = aligned(ptrs[i], w);
		if (ok)
			return w;
	}
	return 1;
}

} // namespace

extern "C" void kt_copy_rows(const struct kt_rows_job *jobs, int n, int64_t rows, cudaStream_t st)
{
	if (rows <= 0)
		return;
	for (int j0 = 0; j0 < n; j0 += KT_ROWS_BATCH) {
		int cnt = n - j0 < KT_ROWS_BATCH ? n - j0 : KT_ROWS_BATCH;
		int64_t vals[3 * KT_ROWS_BATCH];
		const void *ptrs[2 * KT_ROWS_BATCH];
		int nv = 0, np = 0, used = 0;
		rows_args a;
		memset(&a, 0, sizeof(a));
		a.rows = rows;
		for (int j = 0; j < cnt; j++) {
			const struct kt_rows_job *jb = &jobs[j0 + j];
			if (jb->width <= 0)
				continue;
			vals[nv++] = jb->width;
			vals[nv++] = jb->spitch;
			vals[nv++] = jb->dpitch;
			ptrs[np++] = jb->src;
			ptrs[np++] = jb->dst;
			a.src[used] = jb->src;
			a.dst[used] = jb->dst;
			a.w[used] = jb->width;
			a.sp[used] = jb->spitch;
			a.dp[used] = jb->dpitch;
			used++;
		}
		if (!used)
			continue;
		int w = unit_for(vals, nv, ptrs, np);
		int64_t maxn = 0;
		for (int j = 0; j < used; j++) {
			a.w[j] /= w;
			a.sp[j] /= w;
			a.dp[j] /= w;
			if (a.w[j] * rows > maxn)
				maxn = a.w[j] * rows;
		}
		switch (w) {
		case 1: rows_launch<1>(a, used, maxn, st); break;
		case 2: rows_launch<2>(a, used, maxn, st); break;
		case 4: rows_launch<4>(a, used, maxn, st); break;
		case 8: rows_launch<8>(a, used, maxn, st); break;
		default: rows_launch<16>(a, used, maxn, st); break;
		}
	}
}

namespace {

template <int W>
void gather_launch(const void *x, const void *idx, int idx64, void *y, int64_t dim, int64_t nidx, int64_t inner,
		   int64_t n, cudaStream_t st)
{
	typedef typename unit_of<W>::T T;
	if (idx64)
		gather_kernel<T, int64_t><<<grid_for(n), kThreads, 0, st>>>((const T *)x, (const int64_t *)idx, (T *)y,
									    dim, nidx, inner, n);
	else
		gather_kernel<T, int32_t><<<grid_for(n), kThreads, 0, st>>>((const T *)x, (const int32_t *)idx, (T *)y,
									    dim, nidx, inner, n);
}

} // namespace

extern "C" void kt_gather(const void *x, const void *idx, int idx64, void *y, int64_t outer, int64_t dim,
			  int64_t nidx, int64_t inner_bytes, cudaStream_t st)
{
	const void *ptrs[2] = { x, y };
	int w = unit_for(&inner_bytes, 1, ptrs, 2);
	int64_t inner = inner_bytes / w, n = outer * nidx * inner;
	if (n <= 0)
		return;
	switch (w) {
	case 1: gather_launch<1>(x, idx, idx64, y, dim, nidx, inner, n, st); break;
	case 2: gather_launch<2>(x, idx, idx64, y, dim, nidx, inner, n, st); break;
	case 4: gather_launch<4>(x, idx, idx64, y, dim, nidx, inner, n, st); break;
	case 8: gather_launch<8>(x, idx, idx64, y, dim, nidx, inner, n, st); break;
	default: gather_launch<16>(x, idx, idx64, y, dim, nidx, inner, n, st); break;
	}
}

namespace {

int64_t elems_count(const kt_elems *e)
{
	int64_t n = 1;
	for (int d = 0; d < e->rank; d++)
		n *= e->dims[d];
	return n;
}

template <int W>
void elems_launch(bool scatter, const kt_elems &a, const void *x, const void *idx, int idx64, void *y, int64_t n,
		  cudaStream_t st)
{
	typedef typename unit_of<W>::T T;
	unsigned g = grid_for(n);
	if (scatter) {
		if (idx64)
			scatter_elements_kernel<T, int64_t>
				<<<g, kThreads, 0, st>>>(a, (const T *)x, (const int64_t *)idx, (T *)y, n);
		else
			scatter_elements_kernel<T, int32_t>
				<<<g, kThreads, 0, st>>>(a, (const T *)x, (const int32_t *)idx, (T *)y, n);
	} else {
		if (idx64)
			gather_elements_kernel<T, int64_t>
				<<<g, kThreads, 0, st>>>(a, (const T *)x, (const int64_t *)idx, (T *)y, n);
		else
			gather_elements_kernel<T, int32_t>
				<<<g, kThreads, 0, st>>>(a, (const T *)x, (const int32_t *)idx, (T *)y, n);
	}
}

void elems_dispatch(bool scatter, const kt_elems *e, int esz, const void *x, const void *idx, int idx64, void *y,
		    cudaStream_t st)
{
	int64_t n = elems_count(e);
	if (n <= 0)
		return;
	switch (esz) {
	case 1: elems_launch<1>(scatter, *e, x, idx, idx64, y, n, st); break;
	case 2: elems_launch<2>(scatter, *e, x, idx, idx64, y, n, st); break;
	case 4: elems_launch<4>(scatter, *e, x, idx, idx64, y, n, st); break;
	default: elems_launch<8>(scatter, *e, x, idx, idx64, y, n, st); break;
	}
}

} // namespace

extern "C" void kt_gather_elements(const struct kt_elems *e, int esz, const void *x, const void *idx, int idx64,
				   void *y, cudaStream_t st)
{
	elems_dispatch(false, e, esz, x, idx, idx64, y, st);
}

extern "C" void kt_scatter_elements(const struct kt_elems *e, int esz, const void *up, const void *idx, int idx64,
				    void *y, cudaStream_t st)
{
	elems_dispatch(true, e, esz, up, idx, idx64, y, st);
}

namespace {

template <int W>
void nd_launch(bool scatter, const kt_nd &a, const void *x, const void *idx, int idx64, void *y, int64_t n,
	       cudaStream_t st)
{
	typedef typename unit_of<W>::T T;
	unsigned g = grid_for(n);
	if (scatter) {
		if (idx64)
			scatter_nd_kernel<T, int64_t><<<g, kThreads, 0, st>>>(a, (const T *)x, (const int64_t *)idx, (T *)y, n);
		else
			scatter_nd_kernel<T, int32_t><<<g, kThreads, 0, st>>>(a, (const T *)x, (const int32_t *)idx, (T *)y, n);
	} else {
		if (idx64)
			gather_nd_kernel<T, int64_t><<<g, kThreads, 0, st>>>(a, (const T *)x, (const int64_t *)idx, (T *)y, n);
		else
			gather_nd_kernel<T, int32_t><<<g, kThreads, 0, st>>>(a, (const T *)x, (const int32_t *)idx, (T *)y, n);
	}
}

// Converts the byte strides of g to units (the block_bytes field then holds the block in units).
void nd_dispatch(bool scatter, const kt_nd *g, const void *x, const void *idx, int idx64, void *y, cudaStream_t st)
{
	const void *ptrs[2] = { x, y };
	int w = unit_for(&g->block_bytes, 1, ptrs, 2);
	kt_nd a = *g;
	for (int j = 0; j < a.m && j < KT_MAX_RANK; j++)
		a.str[j] /= w;
	a.bstride /= w;
	a.block_bytes /= w;
	if (a.per <= 0)
		return;
	int64_t n = a.nb * a.per * a.block_bytes;
	if (n <= 0)
		return;
	switch (w) {
	case 1: nd_launch<1>(scatter, a, x, idx, idx64, y, n, st); break;
	case 2: nd_launch<2>(scatter, a, x, idx, idx64, y, n, st); break;
	case 4: nd_launch<4>(scatter, a, x, idx, idx64, y, n, st); break;
	case 8: nd_launch<8>(scatter, a, x, idx, idx64, y, n, st); break;
	default: nd_launch<16>(scatter, a, x, idx, idx64, y, n, st); break;
	}
}

} // namespace

extern "C" void kt_gather_nd(const struct kt_nd *g, const void *x, const void *idx, int idx64, void *y,
			     cudaStream_t st)
{
	nd_dispatch(false, g, x, idx, idx64, y, st);
}

extern "C" void kt_scatter_nd(const struct kt_nd *g, const void *up, const void *idx, int idx64, void *y,
			      cudaStream_t st)
{
	nd_dispatch(true, g, up, idx, idx64, y, st);
}

namespace {

template <int W> void pad_launch(const struct kt_pad &a, const void *x, void *y, int64_t n, cudaStream_t st)
{
	typedef typename unit_of<W>::T T;
	T fill;
	memcpy(&fill, &a.fill, sizeof(T));
	pad_kernel<T><<<grid_for(n), kThreads, 0, st>>>(a, (const T *)x, (T *)y, fill, n);
}

} // namespace

extern "C" void kt_pad(const struct kt_pad *p, int esz, const void *x, void *y, cudaStream_t st)
{
	int64_t n = 1;
	for (int d = 0; d < p->rank; d++)
		n *= p->odims[d];
	if (n <= 0)
		return;
	switch (esz) {
	case 1: pad_launch<1>(*p, x, y, n, st); break;
	case 2: pad_launch<2>(*p, x, y, n, st); break;
	case 4: pad_launch<4>(*p, x, y, n, st); break;
	default: pad_launch<8>(*p, x, y, n, st); break;
	}
}

namespace {

int64_t resize_count(const kt_resize *r)
{
	int64_t n = 1;
	for (int d = 0; d < r->rank; d++)
		n *= r->odims[d];
	return n;
}

} // namespace

extern "C" void kt_resize_nearest(const struct kt_resize *r, int esz, const void *x, void *y, cudaStream_t st)
{
	int64_t n = resize_count(r);
	if (n <= 0)
		return;
	unsigned g = grid_for(n);
	switch (esz) {
	case 1: resize_nearest_kernel<uint8_t><<<g, kThreads, 0, st>>>(*r, (const uint8_t *)x, (uint8_t *)y, n); break;
	case 2: resize_nearest_kernel<uint16_t><<<g, kThreads, 0, st>>>(*r, (const uint16_t *)x, (uint16_t *)y, n); break;
	case 4: resize_nearest_kernel<uint32_t><<<g, kThreads, 0, st>>>(*r, (const uint32_t *)x, (uint32_t *)y, n); break;
	default:
		resize_nearest_kernel<unsigned long long>
			<<<g, kThreads, 0, st>>>(*r, (const unsigned long long *)x, (unsigned long long *)y, n);
		break;
	}
}

extern "C" void kt_resize_linear(const struct kt_resize *r, enum kt_kind kind, const void *x, void *y,
				 cudaStream_t st)
{
	int64_t n = resize_count(r);
	if (n <= 0)
		return;
	unsigned g = grid_for(n);
	switch (kind) {
	case KT_F16: resize_linear_kernel<__half><<<g, kThreads, 0, st>>>(*r, (const __half *)x, (__half *)y, n); break;
	case KT_BF16:
		resize_linear_kernel<__nv_bfloat16>
			<<<g, kThreads, 0, st>>>(*r, (const __nv_bfloat16 *)x, (__nv_bfloat16 *)y, n);
		break;
	default: resize_linear_kernel<float><<<g, kThreads, 0, st>>>(*r, (const float *)x, (float *)y, n); break;
	}
}

extern "C" void kt_fill(void *y, int64_t n, int esz, const void *value, cudaStream_t st)
{
	if (n <= 0)
		return;
	int64_t bytes = n * esz;
	// the widest unit that holds whole elements, divides the size and fits the alignment
	int w = esz;
	for (int cand = 16; cand > esz; cand /= 2)
		if (cand % esz == 0 && bytes % cand == 0 && aligned(y, cand)) {
			w = cand;
			break;
		}
	unsigned char pat[16];
	for (int i = 0; i < w; i += esz)
		memcpy(pat + i, value, (size_t)esz);
	int64_t nu = bytes / w;
	unsigned g = grid_for(nu);
	switch (w) {
	case 1: { uint8_t v; memcpy(&v, pat, 1); fill_kernel<<<g, kThreads, 0, st>>>((uint8_t *)y, v, nu); break; }
	case 2: { uint16_t v; memcpy(&v, pat, 2); fill_kernel<<<g, kThreads, 0, st>>>((uint16_t *)y, v, nu); break; }
	case 4: { uint32_t v; memcpy(&v, pat, 4); fill_kernel<<<g, kThreads, 0, st>>>((uint32_t *)y, v, nu); break; }
	case 8: {
		unsigned long long v;
		memcpy(&v, pat, 8);
		fill_kernel<<<g, kThreads, 0, st>>>((unsigned long long *)y, v, nu);
		break;
	}
	default: { uint4 v; memcpy(&v, pat, 16); fill_kernel<<<g, kThreads, 0, st>>>((uint4 *)y, v, nu); break; }
	}
}

extern "C" void kt_range(enum kt_kind kind, const void *start, const void *delta, void *y, int64_t n, cudaStream_t st)
{
	if (n <= 0)
		return;
	unsigned g = grid_for(n);
	switch (kind) {
	case KT_F32:
		range_float_kernel<float><<<g, kThreads, 0, st>>>((const float *)start, (const float *)delta, (float *)y, n);
		break;
	case KT_F16:
		range_float_kernel<__half>
			<<<g, kThreads, 0, st>>>((const __half *)start, (const __half *)delta, (__half *)y, n);
		break;
	case KT_BF16:
		range_float_kernel<__nv_bfloat16><<<g, kThreads, 0, st>>>(
			(const __nv_bfloat16 *)start, (const __nv_bfloat16 *)delta, (__nv_bfloat16 *)y, n);
		break;
	case KT_I32:
		range_int_kernel<int32_t>
			<<<g, kThreads, 0, st>>>((const int32_t *)start, (const int32_t *)delta, (int32_t *)y, n);
		break;
	default:
		range_int_kernel<int64_t>
			<<<g, kThreads, 0, st>>>((const int64_t *)start, (const int64_t *)delta, (int64_t *)y, n);
		break;
	}
}

extern "C" void kt_trilu(const void *x, void *y, int esz, int64_t batch, int64_t R, int64_t C, int64_t k, int upper,
			 cudaStream_t st)
{
	int64_t n = batch * R * C;
	if (n <= 0)
		return;
	unsigned g = grid_for(n);
	bool up = upper != 0;
	switch (esz) {
	case 1: trilu_kernel<uint8_t><<<g, kThreads, 0, st>>>((const uint8_t *)x, (uint8_t *)y, R, C, k, up, n); break;
	case 2: trilu_kernel<uint16_t><<<g, kThreads, 0, st>>>((const uint16_t *)x, (uint16_t *)y, R, C, k, up, n); break;
	case 4: trilu_kernel<uint32_t><<<g, kThreads, 0, st>>>((const uint32_t *)x, (uint32_t *)y, R, C, k, up, n); break;
	default:
		trilu_kernel<unsigned long long>
			<<<g, kThreads, 0, st>>>((const unsigned long long *)x, (unsigned long long *)y, R, C, k, up, n);
		break;
	}
}

namespace {

template <typename T>
void cumsum_launch(const void *x, void *y, int64_t outer, int64_t dim, int64_t inner, bool excl, bool rev,
		   cudaStream_t st)
{
	if (inner == 1 && dim >= 64) {
		int64_t blocks = (outer + kScanWarps - 1) / kScanWarps;
		unsigned g = blocks > (1 << 20) ? (1u << 20) : (unsigned)blocks;
		cumsum_warp_kernel<T><<<g, 32 * kScanWarps, 0, st>>>((const T *)x, (T *)y, dim, outer, excl, rev);
	} else {
		int64_t lines = outer * inner;
		cumsum_line_kernel<T><<<grid_for(lines), kThreads, 0, st>>>((const T *)x, (T *)y, dim, inner, lines, excl,
									    rev);
	}
}

} // namespace

extern "C" void kt_cumsum(enum kt_kind kind, const void *x, void *y, int64_t outer, int64_t dim, int64_t inner,
			  int exclusive, int reverse, cudaStream_t st)
{
	if (outer <= 0 || dim <= 0 || inner <= 0)
		return;
	bool ex = exclusive != 0, rv = reverse != 0;
	switch (kind) {
	case KT_F32: cumsum_launch<float>(x, y, outer, dim, inner, ex, rv, st); break;
	case KT_F16: cumsum_launch<__half>(x, y, outer, dim, inner, ex, rv, st); break;
	case KT_BF16: cumsum_launch<__nv_bfloat16>(x, y, outer, dim, inner, ex, rv, st); break;
	case KT_I32: cumsum_launch<int32_t>(x, y, outer, dim, inner, ex, rv, st); break;
	default: cumsum_launch<int64_t>(x, y, outer, dim, inner, ex, rv, st); break;
	}
}

namespace {

template <int W>
void onehot_launch(const void *idx, enum kt_kind ik, const void *values, void *y, int64_t depth, int64_t inner,
		   int64_t n, cudaStream_t st)
{
	typedef typename unit_of<W>::T T;
	unsigned g = grid_for(n);
	if (ik == KT_I64)
		onehot_kernel<T, int64_t>
			<<<g, kThreads, 0, st>>>((const int64_t *)idx, (const T *)values, (T *)y, depth, inner, n);
	else if (ik == KT_I32)
		onehot_kernel<T, int32_t>
			<<<g, kThreads, 0, st>>>((const int32_t *)idx, (const T *)values, (T *)y, depth, inner, n);
	else
		onehot_kernel<T, float><<<g, kThreads, 0, st>>>((const float *)idx, (const T *)values, (T *)y, depth, inner, n);
}

} // namespace

extern "C" void kt_onehot(const void *idx, enum kt_kind idx_kind, const void *values, void *y, int esz, int64_t outer,
			  int64_t depth, int64_t inner, cudaStream_t st)
{
	int64_t n = outer * depth * inner;
	if (n <= 0)
		return;
	switch (esz) {
	case 1: onehot_launch<1>(idx, idx_kind, values, y, depth, inner, n, st); break;
	case 2: onehot_launch<2>(idx, idx_kind, values, y, depth, inner, n, st); break;
	case 4: onehot_launch<4>(idx, idx_kind, values, y, depth, inner, n, st); break;
	default: onehot_launch<8>(idx, idx_kind, values, y, depth, inner, n, st); break;
	}
}
