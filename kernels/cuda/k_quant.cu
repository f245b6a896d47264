// k_quant.cu - CUDA kernels and launchers of the quantization family
// (QuantizeLinear, DequantizeLinear; entries in k_quant.c).
//
// Memory-bound elementwise kernels: each thread takes groups of 4
// consecutive elements, loaded and stored as one vector access when the
// pointers are aligned (4 nibbles: one 16-bit store); the last n % 4
// elements are done by one thread, so that no two threads write one byte
// of nibbles. One kernel per storage of the quantized side (bytes, shorts,
// words, nibbles; integers and float8 apart), the float side's type read at
// run time: few instantiations, quick to compile. The scale index of an
// element, (i / inner) % C or the blocked form, uses 32-bit multiply-shift
// division when the count fits, else 64-bit division. The element
// arithmetic (k_quant_math.h) is the CPU reference's, rounding for
// rounding: IEEE division and products (__fdiv_rn, __fmul_rn), float16 and
// bfloat16 rounding to nearest even.

#include "kernels/cuda/k_quant.h"
#include "kernels/cuda/k_quant_math.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace {

const int THREADS = 256;
const int G = 4;   // elements a thread takes at a time

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

// ---- the index of an element's scale and zero point ----

struct Map {
	int mode;                      // 0 one scale, 1 per axis, 2 blocked
	bool m32;                      // indices fit 32 bits: multiply-shift division
	kq_div inner, adim, bs;
	uint32_t sdim32;
	uint64_t inner64, adim64, bs64, sdim64;
};

// the 64-bit form, out of line: it is rare (over 2^31 elements) and its divisions are long
__device__ __noinline__ uint64_t map64(int mode, uint64_t inner, uint64_t adim, uint64_t bs, uint64_t sdim, uint64_t i)
{
	uint64_t t = i / inner, o = t / adim, a = t - o * adim;
	if (mode == 1)
		return a;
	return (o * sdim + a / bs) * inner + (i - t * inner);
}

__device__ __forceinline__ uint64_t scale_idx(const Map &m, uint64_t i)
{
	if (m.mode == 0)
		return 0;
	if (!m.m32)
		return map64(m.mode, m.inner64, m.adim64, m.bs64, m.sdim64, i);
	uint32_t i32 = (uint32_t)i;
	uint32_t t = kq_div_q(&m.inner, i32);
	uint32_t o = kq_div_q(&m.adim, t);
	uint32_t a = t - o * m.adim.d;
	if (m.mode == 1)
		return a;
	return (o * m.sdim32 + kq_div_q(&m.bs, a)) * m.inner.d + (i32 - t * m.inner.d);
}

Map map_of(const kq_launch *L)
{
	Map m;
	m.mode = L->mode;
	m.m32 = L->n <= INT32_MAX;
	m.inner64 = L->inner > 0 ? (uint64_t)L->inner : 1u;
	m.adim64 = L->adim > 0 ? (uint64_t)L->adim : 1u;
	m.bs64 = L->bs > 0 ? (uint64_t)L->bs : 1u;
	m.sdim64 = L->sdim > 0 ? (uint64_t)L->sdim : 1u;
	m.inner = kq_div_make(m.m32 ? (uint32_t)m.inner64 : 1u);
	m.adim = kq_div_make(m.m32 ? (uint32_t)m.adim64 : 1u);
	m.bs = kq_div_make(m.m32 ? (uint32_t)m.bs64 : 1u);
	m.sdim32 = (uint32_t)m.sdim64;
	return m;
}

// ---- parameters of a launch ----

struct Params {
	const void *x, *s, *z;
	void *y;
	uint64_t n;
	int xdt, sdt, ydt, cdt;
	int sh;                // integer codes: 32 - bits for signed types (sign extension), else 0
	bool sat, vec;
	float lo, hi;          // QuantizeLinear to integers: the saturation range
	kq_f8fmt fmt;          // the float8/float4 format of the quantized side
	Map m;
};

// ---- the float side: float, float16, bfloat16 by dtype at run time ----

__device__ __forceinline__ float from16(int dt, uint32_t raw)
{
	return dt == KQ_FLOAT16 ? __half2float(__ushort_as_half((unsigned short)raw)) : kq_u2f(raw << 16);
}

__device__ __forceinline__ uint32_t to16(int dt, float v)
{
	return dt == KQ_FLOAT16 ? __half_as_ushort(__float2half_rn(v)) : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

__device__ __forceinline__ float ldf(int dt, const void *p, uint64_t i)
{
	if (dt == KQ_FLOAT)
		return ((const float *)p)[i];
	return from16(dt, ((const uint16_t *)p)[i]);
}

// x of QuantizeLinear, group g
__device__ __forceinline__ void load_x4(const Params &p, uint64_t g, float *v)
{
	if (p.xdt == KQ_FLOAT) {
		if (p.vec) {
			float4 t = ((const float4 *)p.x)[g];
			v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
		} else {
			for (int j = 0; j < G; j++)
				v[j] = ((const float *)p.x)[g * G + j];
		}
	} else {
		uint32_t r[G];
		if (p.vec) {
			uint2 t = ((const uint2 *)p.x)[g];
			r[0] = t.x & 0xffffu, r[1] = t.x >> 16, r[2] = t.y & 0xffffu, r[3] = t.y >> 16;
		} else {
			for (int j = 0; j < G; j++)
				r[j] = ((const uint16_t *)p.x)[g * G + j];
		}
		for (int j = 0; j < G; j++)
			v[j] = from16(p.xdt, r[j]);
	}
}

// y of DequantizeLinear, group g
__device__ __forceinline__ void store_y4(const Params &p, uint64_t g, const float *v)
{
	if (p.ydt == KQ_FLOAT) {
		if (p.vec) {
			((float4 *)p.y)[g] = make_float4(v[0], v[1], v[2], v[3]);
		} else {
			for (int j = 0; j < G; j++)
				((float *)p.y)[g * G + j] = v[j];
		}
	} else {
		uint32_t r[G];
		for (int j = 0; j < G; j++)
			r[j] = to16(p.ydt, v[j]);
		if (p.vec) {
			((uint2 *)p.y)[g] = make_uint2(r[0] | (r[1] << 16), r[2] | (r[3] << 16));
		} else {
			for (int j = 0; j < G; j++)
				((uint16_t *)p.y)[g * G + j] = (uint16_t)r[j];
		}
	}
}

__device__ __forceinline__ void store_y1(const Params &p, uint64_t i, float v)
{
	if (p.ydt == KQ_FLOAT)
		((float *)p.y)[i] = v;
	else
		((uint16_t *)p.y)[i] = (uint16_t)to16(p.ydt, v);
}

// ---- the quantized side: codes by storage ----

enum { S_BYTE, S_SHORT, S_WORD, S_NIB };

template <int S> __device__ __forceinline__ uint32_t ld_code(const void *p, uint64_t i)
{
	if (S == S_SHORT)
		return ((const uint16_t *)p)[i];
	if (S == S_WORD)
		return ((const uint32_t *)p)[i];
	if (S == S_NIB)
		return (((const uint8_t *)p)[i >> 1] >> ((unsigned)(i & 1) * 4)) & 0xfu;
	return ((const uint8_t *)p)[i];
}

// group g of codes (nibbles: two bytes)
template <int S> __device__ __forceinline__ void load_codes(const Params &p, uint64_t g, uint32_t *c)
{
	if (S == S_BYTE && p.vec) {
		uint32_t w = ((const uint32_t *)p.x)[g];
		for (int j = 0; j < G; j++)
			c[j] = (w >> (8 * j)) & 0xffu;
	} else if (S == S_SHORT && p.vec) {
		uint2 w = ((const uint2 *)p.x)[g];
		c[0] = w.x & 0xffffu, c[1] = w.x >> 16, c[2] = w.y & 0xffffu, c[3] = w.y >> 16;
	} else if (S == S_WORD && p.vec) {
		uint4 w = ((const uint4 *)p.x)[g];
		c[0] = w.x, c[1] = w.y, c[2] = w.z, c[3] = w.w;
	} else if (S == S_NIB) {
		uint32_t w = p.vec ? ((const uint16_t *)p.x)[g]
				   : ((const uint8_t *)p.x)[2 * g] | ((uint32_t)((const uint8_t *)p.x)[2 * g + 1] << 8);
		for (int j = 0; j < G; j++)
			c[j] = (w >> (4 * j)) & 0xfu;
	} else {
		for (int j = 0; j < G; j++)
			c[j] = ld_code<S>(p.x, g * G + j);
	}
}

template <int S> __device__ __forceinline__ void store_codes(const Params &p, uint64_t g, const uint32_t *c)
{
	if (S == S_NIB) {
		uint32_t w = (c[0] & 0xfu) | ((c[1] & 0xfu) << 4) | ((c[2] & 0xfu) << 8) | ((c[3] & 0xfu) << 12);
		if (p.vec) {
			((uint16_t *)p.y)[g] = (uint16_t)w;
		} else {
			((uint8_t *)p.y)[2 * g] = (uint8_t)w;
			((uint8_t *)p.y)[2 * g + 1] = (uint8_t)(w >> 8);
		}
	} else if (S == S_SHORT) {
		if (p.vec) {
			((uint2 *)p.y)[g] = make_uint2((c[0] & 0xffffu) | (c[1] << 16), (c[2] & 0xffffu) | (c[3] << 16));
		} else {
			for (int j = 0; j < G; j++)
				((uint16_t *)p.y)[g * G + j] = (uint16_t)c[j];
		}
	} else {
		if (p.vec) {
			((uint32_t *)p.y)[g] = (c[0] & 0xffu) | ((c[1] & 0xffu) << 8) | ((c[2] & 0xffu) << 16) | (c[3] << 24);
		} else {
			for (int j = 0; j < G; j++)
				((uint8_t *)p.y)[g * G + j] = (uint8_t)c[j];
		}
	}
}

// the integer an integer code stands for
__device__ __forceinline__ int32_t code_int(int sh, uint32_t c)
{
	return (int32_t)(c << sh) >> sh;
}

// ---- QuantizeLinear ----

// kinds: integers in bytes, float8 in bytes, integers in shorts, integers in nibbles
enum { QK_B, QK_F8, QK_S, QK_N };

constexpr int q_storage(int K)
{
	return K == QK_S ? S_SHORT : K == QK_N ? S_NIB : S_BYTE;
}

// x (or its scale) rounded to the type the division happens in
__device__ __forceinline__ float round_to(int cdt, float v)
{
	if (cdt == KQ_FLOAT16)
		return __half2float(__float2half_rn(v));
	if (cdt == KQ_BFLOAT16)
		return __bfloat162float(__float2bfloat16_rn(v));
	return v;
}

template <int K> __device__ __forceinline__ uint32_t quant_one(const Params &p, float x, uint64_t q)
{
	float s = round_to(p.cdt, ldf(p.sdt, p.s, q));
	float v = round_to(p.cdt, __fdiv_rn(round_to(p.cdt, x), s));
	if (K == QK_F8) {
		float z = p.z ? kq_f8_decode(&p.fmt, ((const uint8_t *)p.z)[q]) : 0.0f;
		return kq_f8_encode(&p.fmt, __fadd_rn(v, z), p.sat);
	}
	float z = p.z ? (float)code_int(p.sh, ld_code<q_storage(K)>(p.z, q)) : 0.0f;
	return (uint32_t)kq_round_sat(v, z, p.lo, p.hi);
}

template <int K> __global__ void __launch_bounds__(THREADS) k_quantize(Params p)
{
	const int S = q_storage(K);
	uint64_t ng = p.n / G, stride = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += stride) {
		float xv[G];
		load_x4(p, g, xv);
		uint32_t c[G];
#pragma unroll
		for (int j = 0; j < G; j++)
			c[j] = quant_one<K>(p, xv[j], scale_idx(p.m, g * G + j));
		store_codes<S>(p, g, c);
	}
	// the tail (it starts on a byte of nibbles: 4 elements a group)
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		for (uint64_t i = ng * G; i < p.n; i++) {
			uint32_t c = quant_one<K>(p, ldf(p.xdt, p.x, i), scale_idx(p.m, i));
			if (S == S_NIB) {
				uint8_t *b = (uint8_t *)p.y + i / 2;
				*b = (i & 1) ? (uint8_t)((*b & 0x0fu) | ((c & 0xfu) << 4)) : (uint8_t)(c & 0xfu);
			} else if (S == S_SHORT) {
				((uint16_t *)p.y)[i] = (uint16_t)c;
			} else {
				((uint8_t *)p.y)[i] = (uint8_t)c;
			}
		}
	}
}

// ---- DequantizeLinear ----

// kinds: integers in bytes, float8, integers in shorts, int32, integers in nibbles, float4
enum { DK_B, DK_F8, DK_S, DK_W, DK_N, DK_F4 };

constexpr int dq_storage(int K)
{
	return K == DK_S ? S_SHORT : K == DK_W ? S_WORD : (K == DK_N || K == DK_F4) ? S_NIB : S_BYTE;
}

template <int K> __device__ __forceinline__ float dequant_one(const Params &p, uint32_t c, uint64_t q)
{
	const int S = dq_storage(K);
	float s = ldf(p.sdt, p.s, q);
	float v;
	if (K == DK_F8 || K == DK_F4) {
		float z = p.z ? kq_f8_decode(&p.fmt, ld_code<S>(p.z, q)) : 0.0f;
		v = __fsub_rn(kq_f8_decode(&p.fmt, c), z);
	} else {
		int32_t xi = code_int(p.sh, c), zi = p.z ? code_int(p.sh, ld_code<S>(p.z, q)) : 0;
		// int32 differences may need more than 32 bits; the narrower ones are exact floats
		v = K == DK_W ? __ll2float_rn((long long)xi - (long long)zi) : __int2float_rn(xi - zi);
	}
	return __fmul_rn(v, s);
}

template <int K> __global__ void __launch_bounds__(THREADS) k_dequantize(Params p)
{
	const int S = dq_storage(K);
	uint64_t ng = p.n / G, stride = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < ng; g += stride) {
		uint32_t c[G];
		load_codes<S>(p, g, c);
		float v[G];
#pragma unroll
		for (int j = 0; j < G; j++)
			v[j] = dequant_one<K>(p, c[j], scale_idx(p.m, g * G + j));
		store_y4(p, g, v);
	}
	if (blockIdx.x == 0 && threadIdx.x == 0)
		for (uint64_t i = ng * G; i < p.n; i++)
			store_y1(p, i, dequant_one<K>(p, ld_code<S>(p.x, i), scale_idx(p.m, i)));
}

// ---- launches ----

bool int_range(int dt, float *lo, float *hi, int *sh)
{
	switch (dt) {
	case KQ_UINT8: *lo = 0; *hi = 255; *sh = 0; return true;
	case KQ_INT8: *lo = -128; *hi = 127; *sh = 24; return true;
	case KQ_UINT16: *lo = 0; *hi = 65535; *sh = 0; return true;
	case KQ_INT16: *lo = -32768; *hi = 32767; *sh = 16; return true;
	case KQ_UINT4: *lo = 0; *hi = 15; *sh = 0; return true;
	case KQ_INT4: *lo = -8; *hi = 7; *sh = 28; return true;
	case KQ_INT32: *lo = -2147483648.0f; *hi = 2147483647.0f; *sh = 0; return true;   // DequantizeLinear only
	default: return false;
	}
}

Params params_of(const kq_launch *L, const void *x, const void *scale, const void *zp, void *y)
{
	Params p;
	p.x = x;
	p.s = scale;
	p.z = zp;
	p.y = y;
	p.n = (uint64_t)L->n;
	p.xdt = L->xdt;
	p.sdt = L->sdt;
	p.ydt = L->ydt;
	p.cdt = L->cdt;
	p.sat = L->saturate != 0;
	p.vec = false;
	p.lo = p.hi = 0;
	p.sh = 0;
	p.m = map_of(L);
	return p;
}

} // namespace

extern "C" cudaError_t kq_quantize(const struct kq_launch *L, const void *x, const void *scale, const void *zp, void *y,
				   cudaStream_t st)
{
	if (L->n <= 0)
		return cudaSuccess;
	if (L->xdt != KQ_FLOAT && L->xdt != KQ_FLOAT16 && L->xdt != KQ_BFLOAT16)
		return cudaErrorInvalidValue;
	Params p = params_of(L, x, scale, zp, y);
	bool isint = int_range(L->ydt, &p.lo, &p.hi, &p.sh) && L->ydt != KQ_INT32;
	bool f8 = !isint && kq_f8_format(L->ydt, &p.fmt) && L->ydt != KQ_F4E2M1;
	if (!isint && !f8)
		return cudaErrorInvalidValue;
	if (isint)
		kq_f8_format(KQ_F8E4M3FN, &p.fmt);   // unused
	int K = f8 ? QK_F8 : (L->ydt == KQ_INT16 || L->ydt == KQ_UINT16) ? QK_S
			 : (L->ydt == KQ_INT4 || L->ydt == KQ_UINT4)   ? QK_N
								       : QK_B;
	size_t yal = K == QK_S ? 8 : K == QK_N ? 2 : 4;
	p.vec = aligned(x, (L->xdt == KQ_FLOAT ? 4 : 2) * G) && aligned(y, yal);
	unsigned grid = grid_for(L->n / G);
	switch (K) {
	case QK_B: k_quantize<QK_B><<<grid, THREADS, 0, st>>>(p); break;
	case QK_F8: k_quantize<QK_F8><<<grid, THREADS, 0, st>>>(p); break;
	case QK_S: k_quantize<QK_S><<<grid, THREADS, 0, st>>>(p); break;
	default: k_quantize<QK_N><<<grid, THREADS, 0, st>>>(p); break;
	}
	return cudaGetLastError();
}

extern "C" cudaError_t kq_dequantize(const struct kq_launch *L, const void *x, const void *scale, const void *zp,
				     void *y, cudaStream_t st)
{
	if (L->n <= 0)
		return cudaSuccess;
	if (L->ydt != KQ_FLOAT && L->ydt != KQ_FLOAT16 && L->ydt != KQ_BFLOAT16)
		return cudaErrorInvalidValue;
	Params p = params_of(L, x, scale, zp, y);
	bool isint = int_range(L->xdt, &p.lo, &p.hi, &p.sh);
	bool f8 = !isint && kq_f8_format(L->xdt, &p.fmt);
	if (!isint && !f8)
		return cudaErrorInvalidValue;
	if (isint)
		kq_f8_format(KQ_F8E4M3FN, &p.fmt);   // unused
	int K;
	switch (L->xdt) {
	case KQ_INT8: case KQ_UINT8: K = DK_B; break;
	case KQ_INT16: case KQ_UINT16: K = DK_S; break;
	case KQ_INT32: K = DK_W; break;
	case KQ_INT4: case KQ_UINT4: K = DK_N; break;
	case KQ_F4E2M1: K = DK_F4; break;
	default: K = DK_F8; break;
	}
	size_t xal = K == DK_S ? 8 : K == DK_W ? 16 : (K == DK_N || K == DK_F4) ? 2 : 4;
	p.vec = aligned(x, xal) && aligned(y, (L->ydt == KQ_FLOAT ? 4 : 2) * G);
	unsigned grid = grid_for(L->n / G);
	switch (K) {
	case DK_B: k_dequantize<DK_B><<<grid, THREADS, 0, st>>>(p); break;
	case DK_F8: k_dequantize<DK_F8><<<grid, THREADS, 0, st>>>(p); break;
	case DK_S: k_dequantize<DK_S><<<grid, THREADS, 0, st>>>(p); break;
	case DK_W: k_dequantize<DK_W><<<grid, THREADS, 0, st>>>(p); break;
	case DK_N: k_dequantize<DK_N><<<grid, THREADS, 0, st>>>(p); break;
	default: k_dequantize<DK_F4><<<grid, THREADS, 0, st>>>(p); break;
	}
	return cudaGetLastError();
}
