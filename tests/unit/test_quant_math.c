/*
 * test_quant_math.c - the element arithmetic of the GPU's QuantizeLinear and
 * DequantizeLinear (kernels/cuda/k_quant_math.h, compiled here for the
 * host) against the CPU reference, on a machine with or without a GPU:
 * - float8/float4 codes from floats: kq_f8_encode against the CPU's
 *   kcvt_f32_to_small for every format, saturate on and off, on every
 *   significand pattern of the top 12 bits with sticky-bit variants across
 *   the exponents that matter, the special values, and random floats;
 * - codes to floats: kq_f8_decode against ir_elem_to_f64 for every code;
 * - integer quantization: kq_round_sat against round-half-even in double
 *   with the zero point added and the type's range, ties and saturation;
 * - kq_div (multiply-shift division) against '/' for many divisors.
 */
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/k_quant_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static long checks;

#define FAIL(...) do { if (failures++ < 20) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static float bits_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static const int f8_types[] = { IR_F8E4M3FN, IR_F8E4M3FNUZ, IR_F8E5M2, IR_F8E5M2FNUZ, IR_F4E2M1 };

static void check_encode(int dt, const struct kq_f8fmt *f, uint32_t u)
{
	float v = bits_f(u);
	for (int sat = 0; sat < 2; sat++) {
		uint32_t want = kcvt_f32_to_small(dt, v, sat != 0 || dt == IR_F4E2M1);
		uint32_t got = kq_f8_encode(f, v, sat != 0);
		checks++;
		if (got != want)
			FAIL("encode %s saturate=%d of %.9g (0x%08x): got 0x%02x, want 0x%02x", ir_dtype_name(dt), sat,
			     (double)v, u, got, want);
	}
}

static void test_encode(void)
{
	static const uint32_t low[] = { 0, 1, 0x3ff, 0x400, 0x401, 0x7ff };
	for (size_t t = 0; t < sizeof(f8_types) / sizeof(f8_types[0]); t++) {
		int dt = f8_types[t];
		struct kq_f8fmt f;
		if (!kq_f8_format(dt, &f)) {
			FAIL("no format for %s", ir_dtype_name(dt));
			continue;
		}
		/* float exponents from 2^-40 to 2^20, the subnormals and the top */
		for (int e = 0; e < 256; e++) {
			if (!(e <= 1 || e >= 254 || (e >= 127 - 40 && e <= 127 + 20)))
				continue;
			for (uint32_t top = 0; top < 4096; top++)
				for (size_t l = 0; l < sizeof(low) / sizeof(low[0]); l++)
					for (uint32_t s = 0; s < 2; s++)
						check_encode(dt, &f, (s << 31) | ((uint32_t)e << 23) | (top << 11) | low[l]);
		}
		for (int i = 0; i < 300000; i++)
			check_encode(dt, &f, (uint32_t)rng());
		static const uint32_t special[] = { 0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
						    0x7f800001u, 0x7f7fffffu, 0xff7fffffu, 1, 0x80000001u };
		for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
			check_encode(dt, &f, special[i]);
	}
}

static void test_decode(void)
{
	for (size_t t = 0; t < sizeof(f8_types) / sizeof(f8_types[0]); t++) {
		int dt = f8_types[t];
		struct kq_f8fmt f;
		if (!kq_f8_format(dt, &f)) {
			FAIL("no format for %s", ir_dtype_name(dt));
			continue;
		}
		unsigned n = dt == IR_F4E2M1 ? 16 : 256;
		for (unsigned c = 0; c < n; c++) {
			uint8_t b = (uint8_t)c;
			float want = (float)ir_elem_to_f64(dt, &b, 0), got = kq_f8_decode(&f, c);
			checks++;
			bool ok = isnan(want) ? isnan(got) : memcmp(&want, &got, 4) == 0;
			if (!ok)
				FAIL("decode %s 0x%02x: got %.9g, want %.9g", ir_dtype_name(dt), c, (double)got, (double)want);
			/* encoding a decoded value gives the code back (NaN: the format's NaN) */
			if (!isnan(want)) {
				uint32_t back = kq_f8_encode(&f, want, false);
				bool same = back == c || (f.uz && c == 0);
				checks++;
				if (!same)
					FAIL("%s: code 0x%02x decodes to %.9g, which encodes to 0x%02x", ir_dtype_name(dt), c,
					     (double)want, back);
			}
		}
	}
}

static void check_round(float v, float z, float lo, float hi)
{
	double r = isnan(v) ? z : nearbyint((double)v) + z;
	if (r < lo)
		r = lo;
	if (r > hi)
		r = hi;
	int32_t got = kq_round_sat(v, z, lo, hi);
	checks++;
	if ((double)got != r)
		FAIL("round_sat(%.9g, z=%g, [%g, %g]): got %d, want %.0f", (double)v, (double)z, (double)lo, (double)hi,
		     got, r);
}

static void test_round(void)
{
	static const float ranges[][2] = { { -128, 127 }, { 0, 255 }, { -32768, 32767 }, { 0, 65535 }, { -8, 7 }, { 0, 15 } };
	static const float special[] = { 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.5f, -128.5f, -127.5f,
					 254.5f, 255.5f, 32766.5f, 32767.5f, -32768.5f, 65534.5f, 65535.5f, 7.5f, -8.5f,
					 16777216.0f, -16777216.0f, 16777215.0f, 3e9f, -3e9f, 1e30f, -1e30f, 0.0f, -0.0f,
					 0.49999997f, -0.49999997f };
	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
		float lo = ranges[r][0], hi = ranges[r][1];
		float zs[] = { lo, hi, 0, (float)floor((lo + hi) / 2), lo + 1 };
		for (size_t zi = 0; zi < sizeof(zs) / sizeof(zs[0]); zi++) {
			float z = zs[zi];
			for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
				check_round(special[i], z, lo, hi);
			check_round(NAN, z, lo, hi);
			check_round(-NAN, z, lo, hi);
			check_round(INFINITY, z, lo, hi);
			check_round(-INFINITY, z, lo, hi);
			for (int k = -70000; k <= 70000; k += 7)
				check_round((float)k + 0.5f, z, lo, hi);
			for (int i = 0; i < 20000; i++) {
				float v = (float)((double)(int64_t)(rng() % 400001) - 200000.0) / 3.0f;
				check_round(v, z, lo, hi);
				check_round(bits_f((uint32_t)rng()), z, lo, hi);
			}
		}
	}
}

static void check_div(uint32_t d, uint32_t n)
{
	struct kq_div f = kq_div_make(d);
	uint32_t got = kq_div_q(&f, n);
	checks++;
	if (got != n / d)
		FAIL("%u / %u: got %u, want %u", n, d, got, n / d);
}

static void check_divisor(uint32_t d)
{
	static const uint32_t ns[] = { 0, 1, 2, 3, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu };
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		check_div(d, ns[i]);
	for (uint64_t k = 1; k < 8; k++) {
		uint64_t m = k * d;
		if (m - 1 <= 0xffffffffu)
			check_div(d, (uint32_t)(m - 1));
		if (m <= 0xffffffffu)
			check_div(d, (uint32_t)m);
		if (m + 1 <= 0xffffffffu)
			check_div(d, (uint32_t)(m + 1));
	}
	uint64_t top = 0xffffffffu / d * (uint64_t)d;   /* the largest multiple, and around it */
	check_div(d, (uint32_t)top);
	check_div(d, (uint32_t)(top - 1));
	for (int i = 0; i < 64; i++)
		check_div(d, (uint32_t)rng());
}

static void test_div(void)
{
	for (uint32_t d = 1; d <= 5000; d++)
		check_divisor(d);
	for (int s = 1; s < 32; s++) {
		uint32_t p = 1u << s;
		check_divisor(p - 1);
		check_divisor(p);
		check_divisor(p + 1);
	}
	check_divisor(0xffffffffu);
	check_divisor(0xfffffffeu);
	check_divisor(1000003);
	for (int i = 0; i < 20000; i++) {
		uint32_t d = (uint32_t)rng() >> (rng() % 32);
		check_divisor(d ? d : 1);
	}
}

int main(void)
{
	test_encode();
	test_decode();
	test_round();
	test_div();
	printf("test_quant_math: %ld checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
