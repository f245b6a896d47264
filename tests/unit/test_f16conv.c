/*
 * test_f16conv.c - cpu_f16_to_f32 and cpu_f32_to_f16 (kernels/cpu/k_conv.c)
 * against ir_f16_to_f32 and ir_f32_to_f16, bit for bit, on the instruction
 * set OGSH_CPU_ISA selects: every float16 value (signaling NaNs included),
 * and as float32 inputs every float16 value, its float32 neighbours, the
 * midpoints between consecutive float16 values and theirs (the ties of
 * rounding), and random bit patterns (NaN payloads, subnormals); array
 * lengths that leave every tail length of the 16-wide blocks.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static uint32_t bits_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float of_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void check_to_f32(const uint16_t *h, int64_t n)
{
	float *f = malloc((size_t)(n ? n : 1) * sizeof(float));
	cpu_f16_to_f32(h, f, n);
	for (int64_t i = 0; i < n; i++)
		if (bits_of(f[i]) != bits_of(ir_f16_to_f32(h[i])) && failures++ < 10)
			printf("FAIL f16 0x%04x -> 0x%08x, want 0x%08x\n", h[i], bits_of(f[i]),
			       bits_of(ir_f16_to_f32(h[i])));
	free(f);
}

static void check_to_f16(const float *f, int64_t n)
{
	uint16_t *h = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
	cpu_f32_to_f16(f, h, n);
	for (int64_t i = 0; i < n; i++)
		if (h[i] != ir_f32_to_f16(f[i]) && failures++ < 10)
			printf("FAIL f32 0x%08x -> 0x%04x, want 0x%04x\n", bits_of(f[i]), h[i], ir_f32_to_f16(f[i]));
	free(h);
}

int main(void)
{
	uint16_t *all = malloc(65536 * sizeof(uint16_t));
	for (int i = 0; i < 65536; i++)
		all[i] = (uint16_t)i;
	check_to_f32(all, 65536);
	for (int64_t n = 0; n < 40; n++)   /* every tail, from odd offsets */
		check_to_f32(all + 31744 + 3 * n, n);
	/* float32 inputs */
	int64_t cap = 65536 * 6 + (1 << 22), n = 0;
	float *f = malloc((size_t)cap * sizeof(float));
	for (int i = 0; i < 65536; i++) {
		float v = ir_f16_to_f32((uint16_t)i);
		f[n++] = v;
		if (isfinite(v)) {
			f[n++] = nextafterf(v, INFINITY);
			f[n++] = nextafterf(v, -INFINITY);
			if ((i & 0x7fff) < 0x7bff) {   /* the midpoint to the next float16 up (in magnitude) */
				float w = ir_f16_to_f32((uint16_t)(i + 1)), mid = (float)(((double)v + (double)w) / 2);
				f[n++] = mid;
				f[n++] = nextafterf(mid, INFINITY);
				f[n++] = nextafterf(mid, -INFINITY);
			}
		}
	}
	uint64_t s = 0x9E3779B97F4A7C15ull;
	while (n < cap) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		f[n++] = of_bits((uint32_t)s);
	}
	check_to_f16(f, n);
	for (int64_t k = 0; k < 40; k++)
		check_to_f16(f + 1000 + 3 * k, k);
	printf("test_f16conv: %d failures\n", failures);
	free(f);
	free(all);
	return failures ? 1 : 0;
}
