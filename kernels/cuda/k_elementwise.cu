// k_elementwise.cu - CUDA kernels and launchers of the elementwise family (entries in k_elementwise.c).
//
// Float types are computed in float and rounded once when stored; integers
// in int64 (wrapping, like the CPU reference) and stored to their width.
// Every kernel is a grid-stride loop with 64-bit element indices. Same-shape
// operands (and single-element ones) take a flat path, vectorised by 4
// elements when the pointers allow; the others map an output index to each
// operand's offset through the merged dims and strides of struct ew_shape.

#include "kernels/cuda/k_elementwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace {

typedef __nv_bfloat16 bf16;

const int THREADS = 256;

unsigned grid_for(int64_t work)
{
	int64_t b = (work + THREADS - 1) / THREADS;
	if (b > 65535 * 8)
		b = 65535 * 8;
	return b < 1 ? 1u : (unsigned)b;
}

bool aligned(const void *p, size_t a)
{
	return ((uintptr_t)p % a) == 0;
}

// ---- element traits: the compute type C, load and store ----

template <typename T> struct Tr;
template <> struct Tr<float> {
	typedef float C;
	static __device__ __forceinline__ float ld(float v) { return v; }
	static __device__ __forceinline__ float st(float c) { return c; }
};
template <> struct Tr<__half> {
	typedef float C;
	static __device__ __forceinline__ float ld(__half v) { return __half2float(v); }
	static __device__ __forceinline__ __half st(float c) { return __float2half_rn(c); }
};
template <> struct Tr<bf16> {
	typedef float C;
	static __device__ __forceinline__ float ld(bf16 v) { return __bfloat162float(v); }
	static __device__ __forceinline__ bf16 st(float c) { return __float2bfloat16_rn(c); }
};
template <> struct Tr<int32_t> {
	typedef int64_t C;
	static __device__ __forceinline__ int64_t ld(int32_t v) { return v; }
	static __device__ __forceinline__ int32_t st(int64_t c) { return (int32_t)(uint32_t)(uint64_t)c; }
};
template <> struct Tr<int64_t> {
	typedef int64_t C;
	static __device__ __forceinline__ int64_t ld(int64_t v) { return v; }
	static __device__ __forceinline__ int64_t st(int64_t c) { return c; }
};
template <> struct Tr<uint8_t> {
	typedef int64_t C;
	static __device__ __forceinline__ int64_t ld(uint8_t v) { return v; }
	static __device__ __forceinline__ uint8_t st(int64_t c) { return (uint8_t)(uint64_t)c; }
};

// four elements moved as one load or store (the pointer must be aligned to it)
template <typename T> struct alignas(4 * sizeof(T)) V4 {
	T v[4];
};

// output index i -> offsets of the first `na` operands
template <typename IT>
__device__ __forceinline__ void bcast_off(const ew_shape &sh, IT i, int na, IT *off)
{
#pragma unroll
	for (int a = 0; a < EW_MAX_ARGS; a++)
		off[a] = 0;
#pragma unroll
	for (int d = EW_MAX_RANK - 1; d >= 0; d--) {
		if (d < sh.rank) {
			IT dim = (IT)sh.dims[d];
			IT q = i / dim, r = i - q * dim;
#pragma unroll
			for (int a = 0; a < EW_MAX_ARGS; a++)
				if (a < na)
					off[a] += r * (IT)sh.st[a][d];
			i = q;
		}
	}
}

#define GRID_LOOP(i, n) \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// ------------------------------------------------------------------------
// Unary
// ------------------------------------------------------------------------

struct UP {
	float a, b, c;
};

__device__ __forceinline__ float sigm(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ float softplus(float x)
{
	return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

#define UCASE(OP, E)                           \
	case OP:                               \
		_Pragma("unroll")              \
		for (int j = 0; j < N; j++) {  \
			float x = v[j];        \
			v[j] = (E);            \
		}                              \
		break;

template <int N> __device__ __forceinline__ void uop(int op, float *v, const UP &p)
{
	switch (op) {
	UCASE(EU_RELU, x > 0 ? x : (x != x ? x : 0.0f))
	UCASE(EU_LEAKY, x < 0 ? p.a * x : x)
	UCASE(EU_SIGMOID, sigm(x))
	UCASE(EU_HSIGMOID, fmaxf(0.0f, fminf(1.0f, p.a * x + p.b)))
	UCASE(EU_HSWISH, x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f)))
	UCASE(EU_TANH, tanhf(x))
	UCASE(EU_EXP, expf(x))
	UCASE(EU_LOG, logf(x))
	UCASE(EU_SQRT, sqrtf(x))
	UCASE(EU_RECIP, 1.0f / x)
	UCASE(EU_NEG, -x)
	UCASE(EU_ABS, fabsf(x))
	UCASE(EU_ERF, erff(x))
	UCASE(EU_GELU, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)))
	UCASE(EU_GELU_TANH, 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))))
	UCASE(EU_ELU, x < 0 ? p.a * expm1f(x) : x)
	UCASE(EU_SELU, x > 0 ? p.c * x : p.c * (p.a * expm1f(x)))
	UCASE(EU_CELU, (x > 0 ? x : 0.0f) + fminf(0.0f, p.a * expm1f(x / p.a)))
	UCASE(EU_SOFTPLUS, softplus(x))
	UCASE(EU_SOFTSIGN, x / (1.0f + fabsf(x)))
	UCASE(EU_MISH, x * tanhf(softplus(x)))
	UCASE(EU_SIN, sinf(x))
	UCASE(EU_COS, cosf(x))
	UCASE(EU_TAN, tanf(x))
	UCASE(EU_ASIN, asinf(x))
	UCASE(EU_ACOS, acosf(x))
	UCASE(EU_ATAN, atanf(x))
	UCASE(EU_SINH, sinhf(x))
	UCASE(EU_COSH, coshf(x))
	UCASE(EU_ASINH, asinhf(x))
	UCASE(EU_ACOSH, acoshf(x))
	UCASE(EU_ATANH, atanhf(x))
	UCASE(EU_FLOOR, floorf(x))
	UCASE(EU_CEIL, ceilf(x))
	UCASE(EU_ROUND, rintf(x))
	UCASE(EU_SIGN, x > 0 ? 1.0f : x < 0 ? -1.0f : x)
	UCASE(EU_SWISH, x * sigm(p.a * x))
	UCASE(EU_THRELU, x > p.a ? x : 0.0f)
	UCASE(EU_SHRINK, x < -p.a ? x + p.b : x > p.a ? x - p.b : 0.0f)
	UCASE(EU_POWC, p.a == 2.0f ? x * x : p.a == 1.0f ? x : powf(x, p.a))
	default:
		break;
	}
}
#undef UCASE

template <typename T>
__global__ void __launch_bounds__(THREADS)
k_unary(int op, const T *__restrict__ x, T *__restrict__ y, int64_t n, UP p, bool vec)
{
	int64_t nv = vec ? n / 4 : 0;
	GRID_LOOP(i, nv) {
		V4<T> t = reinterpret_cast<const V4<T> *>(x)[i];
		float v[4];
		for (int j = 0; j < 4; j++)
			v[j] = Tr<T>::ld(t.v[j]);
		uop<4>(op, v, p);
		for (int j = 0; j < 4; j++)
			t.v[j] = Tr<T>::st(v[j]);
		reinterpret_cast<V4<T> *>(y)[i] = t;
	}
	GRID_LOOP(k, n - nv * 4) {
		int64_t i = nv * 4 + k;
		float v[1] = { Tr<T>::ld(x[i]) };
		uop<1>(op, v, p);
		y[i] = Tr<T>::st(v[0]);
	}
}

template <typename T>
__global__ void __launch_bounds__(THREADS) k_unary_int(int op, const T *__restrict__ x, T *__restrict__ y, int64_t n)
{
	GRID_LOOP(i, n) {
		int64_t v = x[i], r;
		switch (op) {
		case EU_NEG: r = (int64_t)(0 - (uint64_t)v); break;
		case EU_ABS: r = v >= 0 ? v : (int64_t)(0 - (uint64_t)v); break;
		case EU_SIGN: r = (v > 0) - (v < 0); break;
		case EU_RELU: r = v > 0 ? v : 0; break;
		default: r = v; break;
		}
		y[i] = Tr<T>::st(r);
	}
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
k_isspecial(const T *__restrict__ x, uint8_t *__restrict__ y, int64_t n, bool nan, bool pos, bool neg)
{
	// 4 elements per thread when x and y are aligned to them, the rest one per thread
	const int64_t nv = ((uintptr_t)x % (4 * sizeof(T)) == 0 && (uintptr_t)y % 4 == 0) ? n / 4 : 0;
	GRID_LOOP(i, nv) {
		V4<T> t = reinterpret_cast<const V4<T> *>(x)[i];
		V4<uint8_t> o;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			float v = Tr<T>::ld(t.v[j]);
			o.v[j] = nan ? (v != v) : (isinf(v) && (v > 0 ? pos : neg));
		}
		reinterpret_cast<V4<uint8_t> *>(y)[i] = o;
	}
	GRID_LOOP(k, n - nv * 4) {
		const int64_t i = nv * 4 + k;
		float v = Tr<T>::ld(x[i]);
		y[i] = nan ? (v != v) : (isinf(v) && (v > 0 ? pos : neg));
	}
}

__global__ void __launch_bounds__(THREADS) k_not(const uint8_t *__restrict__ x, uint8_t *__restrict__ y, int64_t n)
{
	GRID_LOOP(i, n)
		y[i] = !x[i];
}

template <typename T>
__global__ void __launch_bounds__(THREADS)
k_clip(const T *__restrict__ x, T *__restrict__ y, int64_t n, const T *lo_p, const T *hi_p, bool has_lo, double lo,
       bool has_hi, double hi)
{
	typedef typename Tr<T>::C C;
	C l = 0, h = 0;
	if (lo_p) {
		l = Tr<T>::ld(*lo_p);
		has_lo = true;
	} else if (has_lo) {
		l = (C)lo;
	}
	if (hi_p) {
		h = Tr<T>::ld(*hi_p);
		has_hi = true;
	} else if (has_hi) {
		h = (C)hi;
	}
	GRID_LOOP(i, n) {
		C v = Tr<T>::ld(x[i]);
		if (has_lo && v < l)
			v = l;
		if (has_hi && v > h)
			v = h;
		y[i] = Tr<T>::st(v);
	}
}

template <typename E> __global__ void __launch_bounds__(THREADS) k_fill(E *__restrict__ y, E v, int64_t n)
{
	GRID_LOOP(i, n)
		y[i] = v;
}

// ------------------------------------------------------------------------
// Binary
// ------------------------------------------------------------------------

#define BCASE(OP, E)                                   \
	case OP:                                       \
		_Pragma("unroll")                      \
		for (int j = 0; j < N; j++) {          \
			C x = xa[j], z = xb[j];        \
			r[j] = (E);                    \
		}                                      \
		break;

template <int N> __device__ __forceinline__ void bop(int op, const float *xa, const float *xb, float *r)
{
	typedef float C;
	switch (op) {
	BCASE(EB_ADD, x + z)
	BCASE(EB_SUB, x - z)
	BCASE(EB_MUL, x * z)
	BCASE(EB_DIV, x / z)
	BCASE(EB_POW, powf(x, z))
	BCASE(EB_MOD, fmodf(x, z))
	BCASE(EB_FMOD, fmodf(x, z))
	BCASE(EB_MAX, x != x ? x : z != z ? z : x >= z ? x : z)
	BCASE(EB_MIN, x != x ? x : z != z ? z : x <= z ? x : z)
	BCASE(EB_PRELU, x < 0 ? x * z : x)
	BCASE(EB_AND, (x != 0) && (z != 0) ? 1.0f : 0.0f)
	BCASE(EB_OR, (x != 0) || (z != 0) ? 1.0f : 0.0f)
	BCASE(EB_XOR, (x != 0) != (z != 0) ? 1.0f : 0.0f)
	BCASE(EB_EQ, x == z ? 1.0f : 0.0f)
	BCASE(EB_LT, x < z ? 1.0f : 0.0f)
	BCASE(EB_LE, x <= z ? 1.0f : 0.0f)
	BCASE(EB_GT, x > z ? 1.0f : 0.0f)
	BCASE(EB_GE, x >= z ? 1.0f : 0.0f)
	default:
		for (int j = 0; j < N; j++)
			r[j] = 0;
		break;
	}
}

// a^b for integers, wrapping; negative exponents give 1/a^|b| truncated
__device__ __forceinline__ int64_t ipow(int64_t a, int64_t b)
{
	if (b < 0)
		return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
	uint64_t r = 1, x = (uint64_t)a, e = (uint64_t)b;
	while (e) {
		if (e & 1)
			r *= x;
		x *= x;
		e >>= 1;
	}
	return (int64_t)r;
}

__device__ __forceinline__ int64_t idiv(int64_t a, int64_t b)
{
	if (b == 0)
		return 0;   // defined as 0 (numpy's result)
	if (b == -1)
		return (int64_t)(0 - (uint64_t)a);
	return a / b;
}

__device__ __forceinline__ int64_t imod(int64_t a, int64_t b, bool c_rule)
{
	if (b == 0 || b == -1)
		return 0;
	int64_t r = a % b;
	if (!c_rule && r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}

template <int N> __device__ __forceinline__ void bop(int op, const int64_t *xa, const int64_t *xb, int64_t *r)
{
	typedef int64_t C;
	switch (op) {
	BCASE(EB_ADD, (int64_t)((uint64_t)x + (uint64_t)z))
	BCASE(EB_SUB, (int64_t)((uint64_t)x - (uint64_t)z))
	BCASE(EB_MUL, (int64_t)((uint64_t)x * (uint64_t)z))
	BCASE(EB_DIV, idiv(x, z))
	BCASE(EB_POW, ipow(x, z))
	BCASE(EB_MOD, imod(x, z, false))
	BCASE(EB_FMOD, imod(x, z, true))
	BCASE(EB_MAX, x >= z ? x : z)
	BCASE(EB_MIN, x <= z ? x : z)
	BCASE(EB_PRELU, x < 0 ? (int64_t)((uint64_t)x * (uint64_t)z) : x)
	BCASE(EB_SHL, (uint64_t)z >= 64 ? 0 : (int64_t)((uint64_t)x << (uint64_t)z))
	BCASE(EB_SHR, (uint64_t)z >= 64 ? 0 : (int64_t)((uint64_t)x >> (uint64_t)z))
	BCASE(EB_BAND, x & z)
	BCASE(EB_BOR, x | z)
	BCASE(EB_BXOR, x ^ z)
	BCASE(EB_AND, x && z)
	BCASE(EB_OR, x || z)
	BCASE(EB_XOR, (x != 0) != (z != 0))
	BCASE(EB_EQ, x == z)
	BCASE(EB_LT, x < z)
	BCASE(EB_LE, x <= z)
	BCASE(EB_GT, x > z)
	BCASE(EB_GE, x >= z)
	default:
		for (int j = 0; j < N; j++)
			r[j] = 0;
		break;
	}
}
#undef BCASE

// the result stored: the operand type, or bool (0/1) for comparisons
template <typename T, bool CMP> struct Out {
	typedef T Y;
	static __device__ __forceinline__ T st(typename Tr<T>::C c) { return Tr<T>::st(c); }
};
template <typename T> struct Out<T, true> {
	typedef uint8_t Y;
	static __device__ __forceinline__ uint8_t st(typename Tr<T>::C c) { return c != 0; }
};

enum { M_FLAT, M_BC32, M_BC64 };

// the offsets of output element i in the first na operands: M_FLAT, each
// operand full or a scalar; M_BC32/M_BC64, from the merged broadcast shape
// in 32- or 64-bit arithmetic
__device__ __forceinline__ void op_offsets(const ew_shape &sh, int64_t i, int mode, int na, int64_t *off)
{
	if (mode == M_BC32) {
		int32_t o32[EW_MAX_ARGS];
		bcast_off<int32_t>(sh, (int32_t)i, na, o32);
		for (int a = 0; a < EW_MAX_ARGS; a++)
			off[a] = o32[a];
	} else if (mode == M_BC64) {
		bcast_off<int64_t>(sh, i, na, off);
	} else {
		for (int a = 0; a < EW_MAX_ARGS; a++)
			off[a] = sh.scalar[a] ? 0 : i;
	}
}

// W elements moved as one load or store (the pointer must be aligned to it)
template <typename T, int W> struct alignas(W * sizeof(T)) VW {
	T v[W];
};

// vector i of W elements of p, or p[0] W times when p is a scalar
template <typename E, int W> __device__ __forceinline__ VW<E, W> ld_or_splat(const E *__restrict__ p, bool scalar, int64_t i)
{
	VW<E, W> t;
	if (scalar) {
#pragma unroll
		for (int j = 0; j < W; j++)
			t.v[j] = p[0];
	} else {
		t = reinterpret_cast<const VW<E, W> *>(p)[i];
	}
	return t;
}

// the same in the compute type
template <typename T, int W>
__device__ __forceinline__ void ld_c(const T *__restrict__ p, bool scalar, int64_t i, typename Tr<T>::C *x)
{
	const VW<T, W> t = ld_or_splat<T, W>(p, scalar, i);
#pragma unroll
	for (int j = 0; j < W; j++)
		x[j] = Tr<T>::ld(t.v[j]);
}

// the broadcasting path: one element per thread, offsets from the merged shape
template <typename T, bool CMP>
__global__ void __launch_bounds__(THREADS)
k_binary(int op, const T *__restrict__ a, const T *__restrict__ b, typename Out<T, CMP>::Y *__restrict__ y, ew_shape sh,
	 int mode)
{
	typedef typename Tr<T>::C C;
	GRID_LOOP(i, sh.n) {
		int64_t off[EW_MAX_ARGS];
		op_offsets(sh, i, mode, 2, off);
		C xa[1] = { Tr<T>::ld(a[off[0]]) }, xb[1] = { Tr<T>::ld(b[off[1]]) }, r[1];
		bop<1>(op, xa, xb, r);
		y[i] = Out<T, CMP>::st(r[0]);
	}
}

// y's vector i of W elements: op over xa and xb, stored as the output type
template <typename T, bool CMP, int W>
__device__ __forceinline__ void bop_store(int op, const typename Tr<T>::C *xa, const typename Tr<T>::C *xb,
					  typename Out<T, CMP>::Y *__restrict__ y, int64_t i)
{
	typedef typename Out<T, CMP>::Y Y;
	typename Tr<T>::C r[W];
	bop<W>(op, xa, xb, r);
	VW<Y, W> o;
#pragma unroll
	for (int j = 0; j < W; j++)
		o.v[j] = Out<T, CMP>::st(r[j]);
	reinterpret_cast<VW<Y, W> *>(y)[i] = o;
}

// W output elements per thread, each operand full or a scalar; the n % W
// last elements one per thread
template <typename T, bool CMP, int W>
__global__ void __launch_bounds__(THREADS)
k_binary_vec(int op, const T *__restrict__ a, const T *__restrict__ b, typename Out<T, CMP>::Y *__restrict__ y,
	     int64_t n, bool sa, bool sb)
{
	typedef typename Tr<T>::C C;
	const int64_t nv = n / W;
	GRID_LOOP(i, nv) {
		C xa[W], xb[W];
		ld_c<T, W>(a, sa, i, xa);
		ld_c<T, W>(b, sb, i, xb);
		bop_store<T, CMP, W>(op, xa, xb, y, i);
	}
	GRID_LOOP(k, n - nv * W) {
		int64_t i = nv * W + k;
		C xa[1] = { Tr<T>::ld(a[sa ? 0 : i]) }, xb[1] = { Tr<T>::ld(b[sb ? 0 : i]) }, r[1];
		bop<1>(op, xa, xb, r);
		y[i] = Out<T, CMP>::st(r[0]);
	}
}

// W output elements per thread over any broadcast whose innermost dim is a
// multiple of W and walked by each operand with stride 1 or 0: the offsets
// of the first element from the merged shape, then W elements (vector
// load) or one (repeated)
template <typename T, bool CMP, int W>
__global__ void __launch_bounds__(THREADS)
k_binary_vbc(int op, const T *__restrict__ a, const T *__restrict__ b, typename Out<T, CMP>::Y *__restrict__ y,
	     ew_shape sh)
{
	typedef typename Tr<T>::C C;
	typedef typename Out<T, CMP>::Y Y;
	const int last = sh.rank - 1;
	const bool sa = sh.st[0][last] == 0, sb = sh.st[1][last] == 0;
	GRID_LOOP(i, sh.n / W) {
		int64_t off[EW_MAX_ARGS];
		bcast_off<int64_t>(sh, i * W, 2, off);
		C xa[W], xb[W];
		ld_c<T, W>(a + off[0], sa, 0, xa);
		ld_c<T, W>(b + off[1], sb, 0, xb);
		bop_store<T, CMP, W>(op, xa, xb, y, i);
	}
}

// W elements per thread when the operands are full or scalars, or broadcast
// with the innermost dim in whole vectors of W, and aligned; false: not
template <typename T, bool CMP, int W>
bool launch_binary_vec(int op, const void *a, const void *b, void *y, const ew_shape *sh, cudaStream_t s)
{
	typedef typename Out<T, CMP>::Y Y;
	if (sh->n < W || !aligned(y, W * sizeof(Y)))
		return false;
	const void *p[2] = { a, b };
	if (sh->flat) {
		for (int i = 0; i < 2; i++)
			if (!sh->scalar[i] && !aligned(p[i], W * sizeof(T)))
				return false;
		k_binary_vec<T, CMP, W><<<grid_for(sh->n / W + sh->n % W), THREADS, 0, s>>>(
			op, (const T *)a, (const T *)b, (Y *)y, sh->n, sh->scalar[0], sh->scalar[1]);
		return true;
	}
	// a bias (a repeated row), a column, a mask...: each operand's stride in the innermost dim 1 or 0
	const int last = sh->rank - 1;
	if (sh->dims[last] % W)
		return false;
	for (int i = 0; i < 2; i++) {
		if (sh->st[i][last] != 0 && sh->st[i][last] != 1)
			return false;
		// every vector's start is a multiple of W elements from p (the other strides are multiples of W)
		if (sh->st[i][last] == 1 && !aligned(p[i], W * sizeof(T)))
			return false;
		for (int d = 0; d < last; d++)
			if (sh->st[i][last] == 1 && sh->st[i][d] % W)
				return false;
	}
	k_binary_vbc<T, CMP, W><<<grid_for(sh->n / W), THREADS, 0, s>>>(op, (const T *)a, (const T *)b, (Y *)y, *sh);
	return true;
}

template <typename T>
cudaError_t launch_binary(int op, const void *a, const void *b, void *y, const ew_shape *sh, cudaStream_t s)
{
	// 16 bytes of each operand per thread (8 bytes for the bool results of comparisons of 16-bit types)
	const int W = 16 / sizeof(T) > 8 ? 8 : 16 / sizeof(T);
	bool cmp = op >= EB_AND;
	if (cmp ? launch_binary_vec<T, true, W>(op, a, b, y, sh, s) : launch_binary_vec<T, false, W>(op, a, b, y, sh, s))
		return cudaGetLastError();
	int mode = sh->n <= INT32_MAX ? M_BC32 : M_BC64;
	if (cmp)
		k_binary<T, true><<<grid_for(sh->n), THREADS, 0, s>>>(op, (const T *)a, (const T *)b, (uint8_t *)y, *sh,
								       mode);
	else
		k_binary<T, false><<<grid_for(sh->n), THREADS, 0, s>>>(op, (const T *)a, (const T *)b, (T *)y, *sh, mode);
	return cudaGetLastError();
}

// uint8/bool: comparisons and logic only
template <>
cudaError_t launch_binary<uint8_t>(int op, const void *a, const void *b, void *y, const ew_shape *sh, cudaStream_t s)
{
	if (op < EB_AND)
		return cudaErrorInvalidValue;
	if (launch_binary_vec<uint8_t, true, 8>(op, a, b, y, sh, s))
		return cudaGetLastError();
	k_binary<uint8_t, true><<<grid_for(sh->n), THREADS, 0, s>>>(op, (const uint8_t *)a, (const uint8_t *)b,
								     (uint8_t *)y, *sh, sh->n <= INT32_MAX ? M_BC32 : M_BC64);
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// Sum, Mean, Max, Min
// ------------------------------------------------------------------------

struct Ptrs {
	const void *p[EW_MAX_ARGS];
};

template <typename T>
__global__ void __launch_bounds__(THREADS) k_variadic(int op, Ptrs x, T *y, ew_shape sh, float div, int mode)
{
	typedef typename Tr<T>::C C;
	const int na = sh.nargs;
	GRID_LOOP(i, sh.n) {
		int64_t off[EW_MAX_ARGS];
		op_offsets(sh, i, mode, na, off);
		C acc[1] = { Tr<T>::ld(((const T *)x.p[0])[off[0]]) };
#pragma unroll
		for (int a = 1; a < EW_MAX_ARGS; a++) {
			if (a < na) {
				C v[1] = { Tr<T>::ld(((const T *)x.p[a])[off[a]]) };
				bop<1>(op, acc, v, acc);
			}
		}
		if (div != 1.0f)
			acc[0] = (C)(acc[0] / (C)div);
		y[i] = Tr<T>::st(acc[0]);
	}
}

template <typename T>
cudaError_t launch_variadic(int op, const void *const *x, void *y, const ew_shape *sh, float div, cudaStream_t s)
{
	Ptrs p = {};
	for (int i = 0; i < sh->nargs && i < EW_MAX_ARGS; i++)
		p.p[i] = x[i];
	int mode = sh->flat ? M_FLAT : sh->n <= INT32_MAX ? M_BC32 : M_BC64;
	k_variadic<T><<<grid_for(sh->n), THREADS, 0, s>>>(op, p, (T *)y, *sh, div, mode);
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// Where
// ------------------------------------------------------------------------

template <typename E>
__global__ void __launch_bounds__(THREADS)
k_where(const uint8_t *__restrict__ c, const E *__restrict__ a, const E *__restrict__ b, E *__restrict__ y, ew_shape sh,
	int mode)
{
	GRID_LOOP(i, sh.n) {
		int64_t off[EW_MAX_ARGS];
		op_offsets(sh, i, mode, 3, off);
		y[i] = c[off[0]] ? a[off[1]] : b[off[2]];
	}
}

// every operand full or scalar: 8 elements per thread (vector loads), the n % 8 last one per thread
template <typename E>
__global__ void __launch_bounds__(THREADS)
k_where_vec(const uint8_t *__restrict__ c, const E *__restrict__ a, const E *__restrict__ b, E *__restrict__ y,
	    int64_t n, bool sc, bool sa, bool sb)
{
	const int64_t nv = n / 8;
	GRID_LOOP(i, nv) {
		const VW<uint8_t, 8> vc = ld_or_splat<uint8_t, 8>(c, sc, i);
		const VW<E, 8> va = ld_or_splat<E, 8>(a, sa, i), vb = ld_or_splat<E, 8>(b, sb, i);
		VW<E, 8> o;
#pragma unroll
		for (int j = 0; j < 8; j++)
			o.v[j] = vc.v[j] ? va.v[j] : vb.v[j];
		reinterpret_cast<VW<E, 8> *>(y)[i] = o;
	}
	GRID_LOOP(k, n - nv * 8) {
		int64_t i = nv * 8 + k;
		y[i] = c[sc ? 0 : i] ? a[sa ? 0 : i] : b[sb ? 0 : i];
	}
}

template <typename E>
cudaError_t launch_where(const void *c, const void *a, const void *b, void *y, const ew_shape *sh, cudaStream_t s)
{
	if (sh->flat && sh->n >= 8 && aligned(y, 8 * sizeof(E)) && (sh->scalar[0] || aligned(c, 8)) &&
	    (sh->scalar[1] || aligned(a, 8 * sizeof(E))) && (sh->scalar[2] || aligned(b, 8 * sizeof(E)))) {
		k_where_vec<E><<<grid_for(sh->n / 8 + sh->n % 8), THREADS, 0, s>>>(
			(const uint8_t *)c, (const E *)a, (const E *)b, (E *)y, sh->n, sh->scalar[0], sh->scalar[1],
			sh->scalar[2]);
		return cudaGetLastError();
	}
	int mode = sh->flat ? M_FLAT : sh->n <= INT32_MAX ? M_BC32 : M_BC64;
	k_where<E><<<grid_for(sh->n), THREADS, 0, s>>>((const uint8_t *)c, (const E *)a, (const E *)b, (E *)y, *sh,
							mode);
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// Cast
// ------------------------------------------------------------------------

// float -> integer as the CPU does: NaN 0, saturate to int64, truncate, then wrap
__device__ __forceinline__ int64_t d2i(double d)
{
	if (d != d)
		return 0;
	if (d >= 9223372036854775807.0)
		return INT64_MAX;
	if (d <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)d;
}

__device__ __forceinline__ void store_i(int to, void *y, int64_t i, int64_t v)
{
	switch (to) {
	case EW_I64: ((int64_t *)y)[i] = v; break;
	case EW_I32: ((int32_t *)y)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
	case EW_I8: ((int8_t *)y)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
	case EW_U8: ((uint8_t *)y)[i] = (uint8_t)(uint64_t)v; break;
	case EW_BOOL: ((uint8_t *)y)[i] = v != 0; break;
	case EW_F32: ((float *)y)[i] = (float)v; break;
	case EW_F64: ((double *)y)[i] = (double)v; break;
	case EW_F16: ((__half *)y)[i] = __double2half((double)v); break;
	case EW_BF16: ((bf16 *)y)[i] = __double2bfloat16((double)v); break;
	default: break;
	}
}

__device__ __forceinline__ void store_d(int to, void *y, int64_t i, double d)
{
	switch (to) {
	case EW_F32: ((float *)y)[i] = (float)d; break;
	case EW_F64: ((double *)y)[i] = d; break;
	case EW_F16: ((__half *)y)[i] = __double2half(d); break;
	case EW_BF16: ((bf16 *)y)[i] = __double2bfloat16(d); break;
	case EW_BOOL: ((uint8_t *)y)[i] = d != 0; break;
	default: store_i(to, y, i, d2i(d)); break;
	}
}

template <typename T> struct CastLd {
	static const bool is_float = false;
	static __device__ __forceinline__ int64_t ld(T v) { return (int64_t)v; }
};
template <> struct CastLd<float> {
	static const bool is_float = true;
	static __device__ __forceinline__ double ld(float v) { return v; }
};
template <> struct CastLd<double> {
	static const bool is_float = true;
	static __device__ __forceinline__ double ld(double v) { return v; }
};
template <> struct CastLd<__half> {
	static const bool is_float = true;
	static __device__ __forceinline__ double ld(__half v) { return (double)__half2float(v); }
};
template <> struct CastLd<bf16> {
	static const bool is_float = true;
	static __device__ __forceinline__ double ld(bf16 v) { return (double)__bfloat162float(v); }
};

template <typename T> __global__ void __launch_bounds__(THREADS) k_cast(const T *__restrict__ x, void *__restrict__ y, int64_t n, int to)
{
	GRID_LOOP(i, n) {
		if (CastLd<T>::is_float)
			store_d(to, y, i, (double)CastLd<T>::ld(x[i]));
		else
			store_i(to, y, i, (int64_t)CastLd<T>::ld(x[i]));
	}
}

// the common float32 <-> float16/bfloat16 casts, 4 at a time
template <typename S, typename D>
__global__ void __launch_bounds__(THREADS) k_cast_f(const S *__restrict__ x, D *__restrict__ y, int64_t n, bool vec)
{
	int64_t nv = vec ? n / 4 : 0;
	GRID_LOOP(i, nv) {
		V4<S> t = reinterpret_cast<const V4<S> *>(x)[i];
		V4<D> o;
		for (int j = 0; j < 4; j++)
			o.v[j] = Tr<D>::st(Tr<S>::ld(t.v[j]));
		reinterpret_cast<V4<D> *>(y)[i] = o;
	}
	GRID_LOOP(k, n - nv * 4) {
		int64_t i = nv * 4 + k;
		y[i] = Tr<D>::st(Tr<S>::ld(x[i]));
	}
}

template <typename S, typename D> cudaError_t launch_cast_f(const void *x, void *y, int64_t n, cudaStream_t s)
{
	bool vec = n >= 4 && aligned(x, 4 * sizeof(S)) && aligned(y, 4 * sizeof(D));
	k_cast_f<S, D><<<grid_for(vec ? n / 4 : n), THREADS, 0, s>>>((const S *)x, (D *)y, n, vec);
	return cudaGetLastError();
}

template <typename T> cudaError_t launch_cast(const void *x, void *y, int64_t n, int to, cudaStream_t s)
{
	k_cast<T><<<grid_for(n), THREADS, 0, s>>>((const T *)x, y, n, to);
	return cudaGetLastError();
}

// ------------------------------------------------------------------------
// Pointwise
// ------------------------------------------------------------------------

struct PwIn {
	const void *p[EW_PW_MAX_IN];
};

__device__ __forceinline__ float pw_ld(int dt, const void *p, int64_t i)
{
	switch (dt) {
	case EW_F16: return __half2float(((const __half *)p)[i]);
	case EW_BF16: return __bfloat162float(((const bf16 *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

__global__ void __launch_bounds__(THREADS) k_pointwise(ew_prog P, PwIn in, void *__restrict__ y)
{
	float r[EW_PW_MAX_REGS];
	for (int q = 0; q < EW_PW_MAX_REGS; q++)
		r[q] = 0;
	GRID_LOOP(i, P.n) {
		int64_t idx[EW_MAX_RANK];
		bool any_bc = false;
		for (int q = 0; q < P.n_in; q++)
			any_bc = any_bc || P.in_kind[q] == 2;
		if (any_bc) {
			int64_t t = i;
			for (int d = P.rank - 1; d >= 0; d--) {
				int64_t q = t / P.dims[d];
				idx[d] = t - q * P.dims[d];
				t = q;
			}
		}
		for (int c = 0; c < P.n_code; c++) {
			const ew_pins I = P.code[c];
			float a = 0, b = 0, v;
			if (I.op >= EP_NEG) {
				a = r[I.a];
				b = r[I.b];
			}
			switch (I.op) {
			case EP_IN: {
				int q = I.a;
				int64_t off = 0;
				if (P.in_kind[q] == 0) {
					off = i;
				} else if (P.in_kind[q] == 2) {
					for (int d = 0; d < P.rank; d++)
						off += idx[d] * P.st[q][d];
				}
				v = pw_ld(P.in_dtype[q], in.p[q], off);
				break;
			}
			case EP_LIT: v = I.lit; break;
			case EP_NEG: v = -a; break;
			case EP_ABS: v = fabsf(a); break;
			case EP_EXP: v = expf(a); break;
			case EP_LOG: v = logf(a); break;
			case EP_SQRT: v = sqrtf(a); break;
			case EP_SIGMOID: v = 1.0f / (1.0f + expf(-a)); break;
			case EP_TANH: v = tanhf(a); break;
			case EP_RELU: v = a < 0 ? 0.0f : a; break;
			case EP_ERF: v = erff(a); break;
			case EP_ADD: v = a + b; break;
			case EP_SUB: v = a - b; break;
			case EP_MUL: v = a * b; break;
			case EP_DIV: v = a / b; break;
			case EP_POW: v = powf(a, b); break;
			case EP_MAX: v = (a != a || b != b) ? a + b : a > b ? a : b; break;
			case EP_MIN: v = (a != a || b != b) ? a + b : a < b ? a : b; break;
			default: v = 0; break;
			}
			r[I.dst] = v;
		}
		switch (P.out_dtype) {
		case EW_F16: ((__half *)y)[i] = __float2half_rn(r[0]); break;
		case EW_BF16: ((bf16 *)y)[i] = __float2bfloat16_rn(r[0]); break;
		default: ((float *)y)[i] = r[0]; break;
		}
	}
}

} // namespace

// ------------------------------------------------------------------------
// Launchers
// ------------------------------------------------------------------------

extern "C" cudaError_t ew_unary(int op, int dtype, const void *x, void *y, int64_t n, float a, float b, float c,
				cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	UP p = { a, b, c };
	size_t es = dtype == EW_F32 ? 4 : 2;
	bool vec = n >= 4 && aligned(x, 4 * es) && aligned(y, 4 * es);
	unsigned g = grid_for(vec ? n / 4 : n);
	switch (dtype) {
	case EW_F32: k_unary<float><<<g, THREADS, 0, s>>>(op, (const float *)x, (float *)y, n, p, vec); break;
	case EW_F16: k_unary<__half><<<g, THREADS, 0, s>>>(op, (const __half *)x, (__half *)y, n, p, vec); break;
	case EW_BF16: k_unary<bf16><<<g, THREADS, 0, s>>>(op, (const bf16 *)x, (bf16 *)y, n, p, vec); break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t ew_unary_int(int op, int dtype, const void *x, void *y, int64_t n, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	switch (dtype) {
	case EW_I32: k_unary_int<int32_t><<<grid_for(n), THREADS, 0, s>>>(op, (const int32_t *)x, (int32_t *)y, n); break;
	case EW_I64: k_unary_int<int64_t><<<grid_for(n), THREADS, 0, s>>>(op, (const int64_t *)x, (int64_t *)y, n); break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t ew_isspecial(int dtype, bool nan, bool pos, bool neg, const void *x, void *y, int64_t n,
				    cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	/* k_isspecial moves 4 elements per thread when x and y allow it (it checks), the rest one per thread */
	size_t es = dtype == EW_F32 ? 4 : 2;
	unsigned g = grid_for(aligned(x, 4 * es) && aligned(y, 4) ? n / 4 + n % 4 : n);
	uint8_t *o = (uint8_t *)y;
	switch (dtype) {
	case EW_F32: k_isspecial<float><<<g, THREADS, 0, s>>>((const float *)x, o, n, nan, pos, neg); break;
	case EW_F16: k_isspecial<__half><<<g, THREADS, 0, s>>>((const __half *)x, o, n, nan, pos, neg); break;
	case EW_BF16: k_isspecial<bf16><<<g, THREADS, 0, s>>>((const bf16 *)x, o, n, nan, pos, neg); break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t ew_not(const void *x, void *y, int64_t n, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	k_not<<<grid_for(n), THREADS, 0, s>>>((const uint8_t *)x, (uint8_t *)y, n);
	return cudaGetLastError();
}

extern "C" cudaError_t ew_clip(int dtype, const void *x, void *y, int64_t n, const void *lo_p, const void *hi_p,
			       bool has_lo, double lo, bool has_hi, double hi, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	unsigned g = grid_for(n);
#define CLIP(T) k_clip<T><<<g, THREADS, 0, s>>>((const T *)x, (T *)y, n, (const T *)lo_p, (const T *)hi_p, has_lo, lo, has_hi, hi)
	switch (dtype) {
	case EW_F32: CLIP(float); break;
	case EW_F16: CLIP(__half); break;
	case EW_BF16: CLIP(bf16); break;
	case EW_I32: CLIP(int32_t); break;
	case EW_I64: CLIP(int64_t); break;
	default: return cudaErrorInvalidValue;
	}
#undef CLIP
	return cudaGetLastError();
}

extern "C" cudaError_t ew_fill(void *y, int elem_size, uint64_t v, int64_t n, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	unsigned g = grid_for(n);
	switch (elem_size) {
	case 1: k_fill<uint8_t><<<g, THREADS, 0, s>>>((uint8_t *)y, (uint8_t)v, n); break;
	case 2: k_fill<uint16_t><<<g, THREADS, 0, s>>>((uint16_t *)y, (uint16_t)v, n); break;
	case 4: k_fill<uint32_t><<<g, THREADS, 0, s>>>((uint32_t *)y, (uint32_t)v, n); break;
	case 8: k_fill<uint64_t><<<g, THREADS, 0, s>>>((uint64_t *)y, v, n); break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t ew_binary(int op, int dtype, const void *a, const void *b, void *y, const struct ew_shape *sh,
				 cudaStream_t s)
{
	if (sh->n <= 0)
		return cudaSuccess;
	switch (dtype) {
	case EW_F32: return launch_binary<float>(op, a, b, y, sh, s);
	case EW_F16: return launch_binary<__half>(op, a, b, y, sh, s);
	case EW_BF16: return launch_binary<bf16>(op, a, b, y, sh, s);
	case EW_I32: return launch_binary<int32_t>(op, a, b, y, sh, s);
	case EW_I64: return launch_binary<int64_t>(op, a, b, y, sh, s);
	case EW_BOOL: case EW_U8: return launch_binary<uint8_t>(op, a, b, y, sh, s);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t ew_variadic(int op, int dtype, const void *const *x, void *y, const struct ew_shape *sh,
				   float div, cudaStream_t s)
{
	if (sh->n <= 0)
		return cudaSuccess;
	if (sh->nargs < 1 || sh->nargs > EW_MAX_ARGS)
		return cudaErrorInvalidValue;
	switch (dtype) {
	case EW_F32: return launch_variadic<float>(op, x, y, sh, div, s);
	case EW_F16: return launch_variadic<__half>(op, x, y, sh, div, s);
	case EW_BF16: return launch_variadic<bf16>(op, x, y, sh, div, s);
	case EW_I32: return launch_variadic<int32_t>(op, x, y, sh, 1.0f, s);
	case EW_I64: return launch_variadic<int64_t>(op, x, y, sh, 1.0f, s);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t ew_where(int elem_size, const void *c, const void *a, const void *b, void *y,
				const struct ew_shape *sh, cudaStream_t s)
{
	if (sh->n <= 0)
		return cudaSuccess;
	switch (elem_size) {
	case 1: return launch_where<uint8_t>(c, a, b, y, sh, s);
	case 2: return launch_where<uint16_t>(c, a, b, y, sh, s);
	case 4: return launch_where<uint32_t>(c, a, b, y, sh, s);
	case 8: return launch_where<uint64_t>(c, a, b, y, sh, s);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t ew_cast(int from, int to, const void *x, void *y, int64_t n, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	if (from == EW_F32 && to == EW_F16)
		return launch_cast_f<float, __half>(x, y, n, s);
	if (from == EW_F16 && to == EW_F32)
		return launch_cast_f<__half, float>(x, y, n, s);
	if (from == EW_F32 && to == EW_BF16)
		return launch_cast_f<float, bf16>(x, y, n, s);
	if (from == EW_BF16 && to == EW_F32)
		return launch_cast_f<bf16, float>(x, y, n, s);
	switch (from) {
	case EW_F32: return launch_cast<float>(x, y, n, to, s);
	case EW_F16: return launch_cast<__half>(x, y, n, to, s);
	case EW_BF16: return launch_cast<bf16>(x, y, n, to, s);
	case EW_F64: return launch_cast<double>(x, y, n, to, s);
	case EW_I8: return launch_cast<int8_t>(x, y, n, to, s);
	case EW_U8: case EW_BOOL: return launch_cast<uint8_t>(x, y, n, to, s);
	case EW_I32: return launch_cast<int32_t>(x, y, n, to, s);
	case EW_I64: return launch_cast<int64_t>(x, y, n, to, s);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t ew_pointwise(const struct ew_prog *p, const void *const *x, void *y, cudaStream_t s)
{
	if (p->n <= 0)
		return cudaSuccess;
	if (p->n_in < 0 || p->n_in > EW_PW_MAX_IN)
		return cudaErrorInvalidValue;
	PwIn in = {};
	for (int i = 0; i < p->n_in; i++)
		in.p[i] = x[i];
	k_pointwise<<<grid_for(p->n), THREADS, 0, s>>>(*p, in, y);
	return cudaGetLastError();
}
