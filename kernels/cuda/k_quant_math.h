/*
 * k_quant_math.h - the element arithmetic of QuantizeLinear and
 * DequantizeLinear on the GPU (k_quant.cu), written once for the device and
 * the host: plain C that nvcc compiles as __host__ __device__, so that
 * tests/unit/test_quant_math.c can check it on a machine without a GPU
 * against the CPU reference (kernels/cpu/k_cast.c's float8 conversion,
 * exact division).
 *
 * - float8/float4 codes from a float and back, bit for bit what the CPU's
 *   kcvt_f32_to_small and ir_elem_to_f64 give (round half to even; out of
 *   range saturates, or becomes inf/NaN when `saturate` is off);
 * - integer quantization of a quotient: NaN to the zero point, round half
 *   to even, add the zero point, saturate;
 * - division of 32-bit indices by an invariant divisor with a multiply and
 *   a shift (Granlund and Montgomery), for the scale index (i / inner) % C.
 *
 * Element types are ONNX's numbers (KQ_*), so the .cu needs no ir.h.
 */
#ifndef OGSH_KERNELS_CUDA_K_QUANT_MATH_H
#define OGSH_KERNELS_CUDA_K_QUANT_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define KQ_FN static __host__ __device__ __forceinline__
#else
#define KQ_FN static inline
#endif

/* ONNX element types (the values of ir.h's IR_*) */
enum {
	KQ_FLOAT = 1, KQ_UINT8 = 2, KQ_INT8 = 3, KQ_UINT16 = 4, KQ_INT16 = 5, KQ_INT32 = 6,
	KQ_FLOAT16 = 10, KQ_BFLOAT16 = 16, KQ_F8E4M3FN = 17, KQ_F8E4M3FNUZ = 18, KQ_F8E5M2 = 19,
	KQ_F8E5M2FNUZ = 20, KQ_UINT4 = 21, KQ_INT4 = 22, KQ_F4E2M1 = 23,
};

KQ_FN uint32_t kq_f2u(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
#endif
}

KQ_FN float kq_u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;
	memcpy(&f, &u, 4);
	return f;
#endif
}

/* 2^k as a float, for -126 <= k <= 127 (exact) */
KQ_FN float kq_pow2(int k)
{
	return kq_u2f((uint32_t)(k + 127) << 23);
}

/* ---- float8 and float4 ---- */

/* A small float format: 1 sign bit, eb exponent bits, mb mantissa bits. */
struct kq_f8fmt {
	int eb, mb, bias;
	uint32_t maxcode;  /* code of the largest finite value */
	uint32_t nan;      /* the NaN written (sign clear; fnuz: 0x80) */
	bool has_inf;      /* e5m2: all-ones exponent and zero mantissa is inf */
	bool uz;           /* fnuz: no -0, 0x80 is the only NaN */
	bool no_nan;       /* float4 e2m1: no NaN, no inf, always saturates */
};

/* The format of a float8/float4 type; false for other types. */
KQ_FN bool kq_f8_format(int dtype, struct kq_f8fmt *f)
{
	struct kq_f8fmt r = { 0, 0, 0, 0, 0, false, false, false };
	switch (dtype) {
	case KQ_F8E4M3FN: r.eb = 4; r.mb = 3; r.bias = 7; r.maxcode = 0x7e; r.nan = 0x7f; break;
	case KQ_F8E4M3FNUZ: r.eb = 4; r.mb = 3; r.bias = 8; r.maxcode = 0x7f; r.nan = 0x80; r.uz = true; break;
	case KQ_F8E5M2: r.eb = 5; r.mb = 2; r.bias = 15; r.maxcode = 0x7b; r.nan = 0x7e; r.has_inf = true; break;
	case KQ_F8E5M2FNUZ: r.eb = 5; r.mb = 2; r.bias = 16; r.maxcode = 0x7f; r.nan = 0x80; r.uz = true; break;
	case KQ_F4E2M1: r.eb = 2; r.mb = 1; r.bias = 1; r.maxcode = 0x7; r.nan = 0x8; r.no_nan = true; break;
	default: return false;
	}
	*f = r;
	return true;
}

/*
 * The code of v in format f, rounded to nearest even. With the exponent e
 * of |v| (at least the format's smallest, 1 - bias), n = rint(|v| * 2^(mb - e))
 * is the significand in units of the last place, and the code is
 * ((e + bias - 1) << mb) + n: a carry of n into the next binade and
 * subnormals (e = 1 - bias, n < 2^mb) come out right. Codes above maxcode
 * are out of range.
 */
KQ_FN uint32_t kq_f8_encode(const struct kq_f8fmt *f, float v, bool saturate)
{
	uint32_t u = kq_f2u(v), sbit = 1u << (f->eb + f->mb);
	uint32_t s = (u >> 31) ? sbit : 0, au = u & 0x7fffffffu;
	if (au > 0x7f800000u)   /* NaN; float4 has none: 0 with the sign flipped, as ml_dtypes */
		return f->no_nan ? (s ? 0 : sbit) : f->nan;
	if (f->no_nan)
		saturate = true;
	if (au < 0x7f800000u) {
		int emin = 1 - f->bias;
		int e = (int)(au >> 23) - 127;   /* float subnormals: -127, below every emin */
		if (e < emin)
			e = emin;
		/* exact: a power-of-two scaling that stays within float's range */
		float n = rintf(kq_u2f(au) * kq_pow2(f->mb - e));
		int code = ((e + f->bias - 1) << f->mb) + (int)n;
		if (code <= (int)f->maxcode)
			return code == 0 ? (f->uz ? 0u : s) : (s | (uint32_t)code);
	}
	if (saturate)
		return s | f->maxcode;
	if (f->has_inf)
		return s | (((1u << f->eb) - 1) << f->mb);
	return f->nan;
}

/* The value of code c in format f (NaN, inf where the format has them). */
KQ_FN float kq_f8_decode(const struct kq_f8fmt *f, uint32_t c)
{
	uint32_t sbit = 1u << (f->eb + f->mb), mmask = (1u << f->mb) - 1, emask = (1u << f->eb) - 1;
	uint32_t e = (c >> f->mb) & emask, m = c & mmask;
	if (f->uz) {
		if (c == sbit)
			return kq_u2f(0x7fc00000u);
	} else if (!f->no_nan && e == emask) {
		if (f->has_inf && m == 0)
			return kq_u2f((c & sbit ? 0xff800000u : 0x7f800000u));
		if (f->has_inf || m == mmask)
			return kq_u2f(0x7fc00000u);
	}
	float r = e == 0 ? (float)m * kq_pow2(1 - f->bias - f->mb)
			 : (float)(m | (1u << f->mb)) * kq_pow2((int)e - f->bias - f->mb);
	return (c & sbit) ? -r : r;
}

/* ---- integers ---- */

/* saturate(round_half_even(v) + z) to [lo, hi]; NaN gives z. z, lo and hi
 * are integers; a sum beyond 2^24 may round, but is then far outside every
 * range up to 16 bits and saturates the same. */
KQ_FN int32_t kq_round_sat(float v, float z, float lo, float hi)
{
	if (v != v)
		return (int32_t)z;
	float r = rintf(v) + z;
	r = r < lo ? lo : r;
	r = r > hi ? hi : r;
	return (int32_t)r;
}

/* ---- n / d for 32-bit n by a multiply-high and a shift ---- */

struct kq_div {
	uint32_t d, m, s;
};

/* For d >= 1: s = ceil(log2 d), m = floor(2^32 (2^s - d) / d) + 1 (fits 32 bits). */
KQ_FN struct kq_div kq_div_make(uint32_t d)
{
	struct kq_div r;
	uint32_t s = 0;
	while (s < 32 && ((uint64_t)1 << s) < d)
		s++;
	r.d = d;
	r.s = s;
	r.m = (uint32_t)(((((uint64_t)1 << s) - d) << 32) / d + 1);
	return r;
}

/* n / f.d for every 32-bit n */
KQ_FN uint32_t kq_div_q(const struct kq_div *f, uint32_t n)
{
#ifdef __CUDA_ARCH__
	uint32_t hi = __umulhi(n, f->m);
#else
	uint32_t hi = (uint32_t)(((uint64_t)n * f->m) >> 32);
#endif
	return (uint32_t)(((uint64_t)hi + n) >> f->s);
}

#endif
