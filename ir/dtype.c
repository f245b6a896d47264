/*
 * dtype.c - element types: names, sizes, and scalar conversions of the
 * narrow float formats (float16, bfloat16, the float8 and float4 types).
 */
#include "ir_private.h"

#include <math.h>
#include <strings.h>

struct dtype_info {
	const char *name;   /* ogsh's name (numpy's where numpy has one) */
	const char *onnx;   /* TensorProto.DataType name */
	int bits;
	char kind;          /* f float, i signed, u unsigned, b bool, s string, c complex */
};

static const struct dtype_info dtypes[IR_DTYPE_COUNT] = {
	[IR_UNDEFINED] = { "undefined", "UNDEFINED", 0, '?' },
	[IR_FLOAT] = { "float32", "FLOAT", 32, 'f' },
	[IR_UINT8] = { "uint8", "UINT8", 8, 'u' },
	[IR_INT8] = { "int8", "INT8", 8, 'i' },
	[IR_UINT16] = { "uint16", "UINT16", 16, 'u' },
	[IR_INT16] = { "int16", "INT16", 16, 'i' },
	[IR_INT32] = { "int32", "INT32", 32, 'i' },
	[IR_INT64] = { "int64", "INT64", 64, 'i' },
	[IR_STRING] = { "string", "STRING", 0, 's' },
	[IR_BOOL] = { "bool", "BOOL", 8, 'b' },
	[IR_FLOAT16] = { "float16", "FLOAT16", 16, 'f' },
	[IR_DOUBLE] = { "float64", "DOUBLE", 64, 'f' },
	[IR_UINT32] = { "uint32", "UINT32", 32, 'u' },
	[IR_UINT64] = { "uint64", "UINT64", 64, 'u' },
	[IR_COMPLEX64] = { "complex64", "COMPLEX64", 64, 'c' },
	[IR_COMPLEX128] = { "complex128", "COMPLEX128", 128, 'c' },
	[IR_BFLOAT16] = { "bfloat16", "BFLOAT16", 16, 'f' },
	[IR_F8E4M3FN] = { "float8e4m3fn", "FLOAT8E4M3FN", 8, 'f' },
	[IR_F8E4M3FNUZ] = { "float8e4m3fnuz", "FLOAT8E4M3FNUZ", 8, 'f' },
	[IR_F8E5M2] = { "float8e5m2", "FLOAT8E5M2", 8, 'f' },
	[IR_F8E5M2FNUZ] = { "float8e5m2fnuz", "FLOAT8E5M2FNUZ", 8, 'f' },
	[IR_UINT4] = { "uint4", "UINT4", 4, 'u' },
	[IR_INT4] = { "int4", "INT4", 4, 'i' },
	[IR_F4E2M1] = { "float4e2m1", "FLOAT4E2M1", 4, 'f' },
	[IR_F8E8M0] = { "float8e8m0", "FLOAT8E8M0", 8, 'f' },
	[IR_UINT2] = { "uint2", "UINT2", 2, 'u' },
	[IR_INT2] = { "int2", "INT2", 2, 'i' },
};

bool ir_dtype_valid(int dt)
{
	return dt > IR_UNDEFINED && dt < IR_DTYPE_COUNT;
}

const char *ir_dtype_name(int dt)
{
	return dt >= 0 && dt < IR_DTYPE_COUNT ? dtypes[dt].name : "?";
}

int ir_dtype_from_name(const char *name)
{
	static const struct { const char *alias; int dt; } aliases[] = {
		{ "float", IR_FLOAT }, { "f32", IR_FLOAT }, { "half", IR_FLOAT16 },
		{ "f16", IR_FLOAT16 }, { "double", IR_DOUBLE }, { "f64", IR_DOUBLE },
		{ "bf16", IR_BFLOAT16 },
	};
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcasecmp(name, aliases[i].alias) == 0)
			return aliases[i].dt;
	for (int i = 1; i < IR_DTYPE_COUNT; i++)
		if (strcasecmp(name, dtypes[i].name) == 0 || strcasecmp(name, dtypes[i].onnx) == 0)
			return i;
	return -1;
}

int ir_dtype_bits(int dt)
{
	return ir_dtype_valid(dt) ? dtypes[dt].bits : 0;
}

bool ir_dtype_is_float(int dt)
{
	return ir_dtype_valid(dt) && dtypes[dt].kind == 'f';
}

bool ir_dtype_is_int(int dt)
{
	return ir_dtype_valid(dt) && (dtypes[dt].kind == 'i' || dtypes[dt].kind == 'u');
}

bool ir_dtype_is_signed(int dt)
{
	return ir_dtype_valid(dt) && (dtypes[dt].kind == 'i' || dtypes[dt].kind == 'f' ||
				      dtypes[dt].kind == 'c');
}

bool ir_dtype_nbytes(int dt, uint64_t numel, uint64_t *out)
{
	uint64_t bits;
	if (ir_mul_overflow(numel, (uint64_t)ir_dtype_bits(dt), &bits))
		return false;
	*out = bits / 8 + (bits % 8 != 0);
	return true;
}

/* ---- narrow floats ---- */

float ir_f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
	if (e == 0) {
		if (m == 0) {
			bits = s;
		} else {   /* subnormal: normalise */
			e = 113;
			while (!(m & 0x400)) {
				m <<= 1;
				e--;
			}
			m &= 0x3ff;
			bits = s | (e << 23) | (m << 13);
		}
	} else if (e == 31) {
		bits = s | 0x7f800000u | (m << 13);
	} else {
		bits = s | ((e + 112) << 23) | (m << 13);
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t ir_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint16_t s = (uint16_t)((x >> 16) & 0x8000);
	uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffff;
	if (e == 0xff)
		return s | 0x7c00 | (m ? 0x200 | (m >> 13) : 0);
	int32_t ne = (int32_t)e - 127 + 15;
	if (ne >= 31)
		return s | 0x7c00;
	if (ne <= 0) {   /* subnormal or zero, round to nearest even */
		if (ne < -10)
			return s;
		m |= 0x800000;
		int shift = 14 - ne;
		uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (hm & 1)))
			hm++;
		return s | (uint16_t)hm;
	}
	uint32_t hm = m >> 13, rem = m & 0x1fff;
	uint32_t r = ((uint32_t)ne << 10) | hm;
	if (rem > 0x1000 || (rem == 0x1000 && (hm & 1)))
		r++;   /* may carry into the exponent, up to inf: correct */
	return s | (uint16_t)r;
}

float ir_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t ir_f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);   /* quiet NaN */
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* A small float of 1 sign bit, `eb` exponent bits, `mb` mantissa bits. */
static double small_float(unsigned v, int eb, int mb, int bias)
{
	unsigned s = v >> (eb + mb), e = (v >> mb) & ((1u << eb) - 1), m = v & ((1u << mb) - 1);
	double r = e == 0 ? ldexp((double)m, 1 - bias - mb)
			  : ldexp((double)(m | (1u << mb)), (int)e - bias - mb);
	return s ? -r : r;
}

static double f8_to_f64(int dt, uint8_t v)
{
	switch (dt) {
	case IR_F8E4M3FN:
		if ((v & 0x7f) == 0x7f)
			return NAN;
		return small_float(v, 4, 3, 7);
	case IR_F8E4M3FNUZ:
		if (v == 0x80)
			return NAN;
		return small_float(v, 4, 3, 8);
	case IR_F8E5M2:
		if ((v & 0x7f) > 0x7c)
			return NAN;
		if ((v & 0x7f) == 0x7c)
			return v & 0x80 ? -INFINITY : INFINITY;
		return small_float(v, 5, 2, 15);
	case IR_F8E5M2FNUZ:
		if (v == 0x80)
			return NAN;
		return small_float(v, 5, 2, 16);
	case IR_F8E8M0:
		if (v == 0xff)
			return NAN;
		return ldexp(1.0, (int)v - 127);
	}
	return NAN;
}

static uint64_t load_le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

bool ir_elem_to_i64(int dt, const void *data, uint64_t i, int64_t *out)
{
	const unsigned char *p = data;
	switch (dt) {
	case IR_UINT8: *out = p[i]; return true;
	case IR_INT8: *out = (int8_t)p[i]; return true;
	case IR_BOOL: *out = p[i] != 0; return true;
	case IR_UINT16: *out = (int64_t)load_le(p + 2 * i, 2); return true;
	case IR_INT16: *out = (int16_t)load_le(p + 2 * i, 2); return true;
	case IR_UINT32: *out = (int64_t)load_le(p + 4 * i, 4); return true;
	case IR_INT32: *out = (int32_t)load_le(p + 4 * i, 4); return true;
	case IR_INT64: *out = (int64_t)load_le(p + 8 * i, 8); return true;
	case IR_UINT64: {
		uint64_t v = load_le(p + 8 * i, 8);
		if (v > (uint64_t)INT64_MAX)
			return false;
		*out = (int64_t)v;
		return true;
	}
	case IR_UINT4: case IR_INT4: {
		unsigned v = (p[i / 2] >> (4 * (i % 2))) & 0xf;
		*out = dt == IR_UINT4 ? (int64_t)v : (int64_t)((int)(v ^ 8) - 8);
		return true;
	}
	case IR_UINT2: case IR_INT2: {
		unsigned v = (p[i / 4] >> (2 * (i % 4))) & 3;
		*out = dt == IR_UINT2 ? (int64_t)v : (int64_t)((int)(v ^ 2) - 2);
		return true;
	}
	}
	return false;
}

double ir_elem_to_f64(int dt, const void *data, uint64_t i)
{
	const unsigned char *p = data;
	switch (dt) {
	case IR_FLOAT: case IR_COMPLEX64: {
		uint32_t u = (uint32_t)load_le(p + i * (dt == IR_FLOAT ? 4 : 8), 4);
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	case IR_DOUBLE: case IR_COMPLEX128: {
		uint64_t u = load_le(p + i * (dt == IR_DOUBLE ? 8 : 16), 8);
		double f;
		memcpy(&f, &u, 8);
		return f;
	}
	case IR_FLOAT16: return ir_f16_to_f32((uint16_t)load_le(p + 2 * i, 2));
	case IR_BFLOAT16: return ir_bf16_to_f32((uint16_t)load_le(p + 2 * i, 2));
	case IR_UINT8: return p[i];
	case IR_INT8: return (int8_t)p[i];
	case IR_BOOL: return p[i] != 0;
	case IR_UINT16: return (double)load_le(p + 2 * i, 2);
	case IR_INT16: return (int16_t)load_le(p + 2 * i, 2);
	case IR_UINT32: return (double)load_le(p + 4 * i, 4);
	case IR_INT32: return (int32_t)load_le(p + 4 * i, 4);
	case IR_UINT64: return (double)load_le(p + 8 * i, 8);
	case IR_INT64: return (double)(int64_t)load_le(p + 8 * i, 8);
	case IR_F8E4M3FN: case IR_F8E4M3FNUZ: case IR_F8E5M2: case IR_F8E5M2FNUZ: case IR_F8E8M0:
		return f8_to_f64(dt, p[i]);
	case IR_UINT4: case IR_INT4: case IR_F4E2M1: {
		unsigned v = (p[i / 2] >> (4 * (i % 2))) & 0xf;
		if (dt == IR_UINT4)
			return v;
		if (dt == IR_INT4)
			return (int)(v ^ 8) - 8;
		return small_float(v, 2, 1, 1);
	}
	case IR_UINT2: case IR_INT2: {
		unsigned v = (p[i / 4] >> (2 * (i % 4))) & 3;
		return dt == IR_UINT2 ? (double)v : (double)((int)(v ^ 2) - 2);
	}
	}
	return NAN;
}
