/*
 * test_sgemm.c - cpu_sgemm (kernels/cpu/k_gemm.c) against a plain product
 * in double, on the instruction set OGSH_CPU_ISA selects:
 * - every combination of transposes, odd and tiny M, N, K (K = 1, M and N
 *   around the micro-kernel's tiles and the cache blocks), leading
 *   dimensions larger than the rows, alpha and beta (beta 0 with NaN in C);
 * - the same product twice gives the same bits, and so does
 *   cpu_sgemm_pre with op(A), op(B) or both packed beforehand
 *   (cpu_sgemm_pack_a/_b, what the weight cache keeps), and a row bias
 *   as C's start (beta 0) the same bits as C filled with it (beta 1);
 * - the fused epilogue (struct cpu_epi: a residual, then Relu, Clip or
 *   GELU) the same bits as a pass after the product (GELU: cpu_fast_f32
 *   over all of C, or over each row when C has padding, where the
 *   product runs it on the rows of each tile), at beta 0 with a
 *   row bias and at beta 1 (C filled with a bias, Gemm's way);
 *
 * `test_sgemm bench` times the products of the benchmark models instead
 * (GFLOP/s per shape, one thread) and checks nothing.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;
static long checks;

#define FAIL(...) do { if (failures++ < 20) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static float frand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng_state >> 40) & 0xffff) / 32768.0f - 1.0f;
}

/* C = alpha op(A) op(B) + beta C in double, the reference. */
static void ref_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
		     const float *B, int64_t ldb, float beta, double *C, int64_t ldc)
{
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			double s = 0;
			for (int64_t p = 0; p < K; p++)
				s += (double)(ta ? A[p * lda + i] : A[i * lda + p]) *
				     (double)(tb ? B[j * ldb + p] : B[p * ldb + j]);
			double c = beta == 0 ? 0 : (double)beta * C[i * ldc + j];
			C[i * ldc + j] = (double)alpha * s + c;
		}
}

static void one(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int64_t pad)
{
	int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
	int64_t ar = ta ? K : M, br = tb ? N : K;
	float *A = malloc((size_t)(ar * lda + 1) * sizeof(float)), *B = malloc((size_t)(br * ldb + 1) * sizeof(float));
	float *C = malloc((size_t)(M * ldc + 1) * sizeof(float)), *C2 = malloc((size_t)(M * ldc + 1) * sizeof(float));
	double *R = malloc((size_t)(M * ldc + 1) * sizeof(double));
	float *C0 = malloc((size_t)(M * ldc + 1) * sizeof(float));
	for (int64_t i = 0; i < ar * lda; i++)
		A[i] = frand();
	for (int64_t i = 0; i < br * ldb; i++)
		B[i] = frand();
	for (int64_t i = 0; i < M * ldc; i++) {
		C[i] = beta == 0 ? NAN : frand();
		R[i] = C[i];
	}
	memcpy(C2, C, (size_t)(M * ldc) * sizeof(float));
	memcpy(C0, C, (size_t)(M * ldc) * sizeof(float));
	cpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	ref_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			checks++;
			double r = R[i * ldc + j], got = C[i * ldc + j];
			/* float32 sums of K terms of size <= 1 */
			double tol = 1e-5 * (double)(K + 1) * fabs(alpha) + 1e-6 * fabs(r) + 1e-6;
			if (!(fabs(got - r) <= tol)) {
				FAIL("ta %d tb %d M %lld N %lld K %lld alpha %g beta %g pad %lld: C[%lld,%lld] = %.8g, want %.8g",
				     ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)pad,
				     (long long)i, (long long)j, got, r);
				goto out;
			}
		}
	/* the padding of C is not touched */
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = N; j < ldc; j++)
			if (memcmp(&C[i * ldc + j], &C2[i * ldc + j], sizeof(float)) && !(isnan(C[i * ldc + j]) && isnan(C2[i * ldc + j]))) {
				FAIL("M %lld N %lld K %lld: padding C[%lld,%lld] written", (long long)M, (long long)N,
				     (long long)K, (long long)i, (long long)j);
				goto out;
			}
	/* again: the same bits */
	cpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc);
	checks++;
	for (int64_t i = 0; i < M; i++)
		if (memcmp(C + i * ldc, C2 + i * ldc, (size_t)N * sizeof(float))) {
			FAIL("M %lld N %lld K %lld: a second run differs in row %lld", (long long)M, (long long)N,
			     (long long)K, (long long)i);
			break;
		}
	/* packed beforehand: the same bits */
	size_t na = cpu_sgemm_pack_floats(false, M, K), nb = cpu_sgemm_pack_floats(true, N, K);
	float *ap = aligned_alloc(64, (na * sizeof(float) + 63) / 64 * 64 + 64);
	float *bp = aligned_alloc(64, (nb * sizeof(float) + 63) / 64 * 64 + 64);
	if (ap && bp) {
		cpu_sgemm_pack_a(ta, M, K, A, lda, ap);
		cpu_sgemm_pack_b(tb, K, N, B, ldb, bp);
		for (int v = 1; v < 4; v++) {
			memcpy(C2, C0, (size_t)(M * ldc) * sizeof(float));
			cpu_sgemm_pre(ta, tb, M, N, K, alpha, A, lda, v & 1 ? ap : NULL, B, ldb, v & 2 ? bp : NULL, beta,
				      NULL, C2, ldc, NULL);
			checks++;
			for (int64_t i = 0; i < M; i++)
				if (memcmp(C + i * ldc, C2 + i * ldc, (size_t)N * sizeof(float))) {
					FAIL("M %lld N %lld K %lld ta %d tb %d: prepacked (%s) differs in row %lld",
					     (long long)M, (long long)N, (long long)K, ta, tb,
					     v == 1 ? "A" : v == 2 ? "B" : "A and B", (long long)i);
					break;
				}
		}
	}
	/* a row bias as C's start: the same bits as C filled with it, beta 1 */
	float *rb = malloc((size_t)M * sizeof(float));
	if (rb) {
		for (int64_t i = 0; i < M; i++)
			rb[i] = frand();
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < ldc; j++) {
				C[i * ldc + j] = j < N ? rb[i] : 7.0f;
				C2[i * ldc + j] = j < N ? NAN : 7.0f;
			}
		cpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, 1.0f, C, ldc);
		cpu_sgemm_pre(ta, tb, M, N, K, alpha, A, lda, NULL, B, ldb, NULL, 0.0f, rb, C2, ldc, NULL);
		checks++;
		if (memcmp(C, C2, (size_t)(M * ldc) * sizeof(float)))
			FAIL("M %lld N %lld K %lld ta %d tb %d: a row bias as C's start differs", (long long)M,
			     (long long)N, (long long)K, ta, tb);
		/* a fused epilogue (a residual, then Relu, Clip or GELU): the
		 * same bits as the product followed by a plain pass (GELU:
		 * cpu_fast_f32 over all of C, or each row with padding, where
		 * the product runs it on the rows of each tile), with C's start a row bias (beta
		 * 0) or C filled with it (beta 1, Gemm's bias) */
		float *Z = malloc((size_t)(M * ldc) * sizeof(float));
		for (int v = 0; Z && v < 2 * (CPU_EPI_GELU + 1); v++) {
			int act = v / 2;
			bool fill = v & 1;
			for (int64_t i = 0; i < M * ldc; i++)
				Z[i] = i % 7 == 3 ? -0.0f : frand();
			struct cpu_epi e = { act == CPU_EPI_RELU ? NULL : Z, act, -0.25f, 0.5f, NULL, false };
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < ldc; j++)
					C2[i * ldc + j] = j >= N ? 7.0f : fill ? rb[i] : NAN;
			cpu_sgemm_pre(ta, tb, M, N, K, alpha, A, lda, NULL, B, ldb, NULL, fill ? 1.0f : 0.0f,
				      fill ? NULL : rb, C2, ldc, &e);
			float *R2 = malloc((size_t)(M * ldc) * sizeof(float));
			if (!R2)
				break;
			memcpy(R2, C, (size_t)(M * ldc) * sizeof(float));
			for (int64_t i = 0; i < M; i++) {
				for (int64_t j = 0; j < N; j++) {
					float x = R2[i * ldc + j];
					if (e.z)
						x += Z[i * ldc + j];
					if (act == CPU_EPI_RELU)
						x = x < 0 ? 0 : x;
					else if (act == CPU_EPI_CLIP)
						x = x < e.lo ? e.lo : x > e.hi ? e.hi : x;
					R2[i * ldc + j] = x;
				}
				if (act == CPU_EPI_GELU && ldc > N)
					cpu_fast_f32(CPU_FAST_GELU, R2 + i * ldc, R2 + i * ldc, N);
			}
			/* C without padding: one pass over all of it (FusedGemm's) */
			if (act == CPU_EPI_GELU && ldc == N)
				cpu_fast_f32(CPU_FAST_GELU, R2, R2, M * N);
			checks++;
			if (memcmp(R2, C2, (size_t)(M * ldc) * sizeof(float)))
				FAIL("M %lld N %lld K %lld ta %d tb %d: the fused epilogue (act %d, beta %d) differs",
				     (long long)M, (long long)N, (long long)K, ta, tb, act, fill);
			/* GELU against the erf form in double */
			for (int64_t i = 0; act == CPU_EPI_GELU && i < M; i++)
				for (int64_t j = 0; j < N; j++) {
					double x = (double)C[i * ldc + j] + (double)Z[i * ldc + j];
					double g = 0.5 * x * (1 + erf(x / sqrt(2.0))), got = C2[i * ldc + j];
					if (!(fabs(got - g) <= 1e-5 * fabs(g) + 1e-6)) {
						FAIL("M %lld N %lld K %lld: GELU epilogue [%lld,%lld] = %.8g, want %.8g",
						     (long long)M, (long long)N, (long long)K, (long long)i, (long long)j,
						     got, g);
						i = M;
						break;
					}
				}
			free(R2);
		}
		free(Z);
	}
	free(rb);
	free(ap);
	free(bp);
out:
	free(C0);
	free(A);
	free(B);
	free(C);
	free(C2);
	free(R);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* GFLOP/s of C = A B (no transposes) for the models' shapes. */
static int bench(void)
{
	static const int64_t shapes[][3] = {
		/* ResNet-50 convs as M (out channels) x N (pixels) x K */
		{ 64, 12544, 147 }, { 64, 3136, 64 }, { 64, 3136, 576 }, { 256, 3136, 64 }, { 128, 784, 1152 },
		{ 512, 784, 128 }, { 256, 196, 2304 }, { 1024, 196, 256 }, { 512, 49, 4608 }, { 2048, 49, 512 },
		/* MobileNetV2 1x1 convs */
		{ 96, 12544, 16 }, { 16, 12544, 32 }, { 144, 3136, 24 }, { 32, 784, 192 }, { 384, 196, 64 },
		{ 160, 49, 960 }, { 1280, 49, 320 },
		/* BERT-base at 128 tokens */
		{ 128, 768, 768 }, { 128, 3072, 768 }, { 128, 768, 3072 }, { 128, 128, 64 }, { 128, 64, 128 },
	};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
		float *A = malloc((size_t)(M * K) * sizeof(float)), *B = malloc((size_t)(K * N) * sizeof(float));
		float *C = malloc((size_t)(M * N) * sizeof(float));
		for (int64_t i = 0; i < M * K; i++)
			A[i] = frand();
		for (int64_t i = 0; i < K * N; i++)
			B[i] = frand();
		/* the weights packed beforehand, as the cache does: A for the
		 * convolutions (M = channels), B for BERT (M = 128 tokens) */
		bool wa = M != 128;
		float *wp = aligned_alloc(64, cpu_sgemm_pack_floats(!wa, wa ? M : N, K) * sizeof(float) + 64);
		if (wa)
			cpu_sgemm_pack_a(false, M, K, A, K, wp);
		else
			cpu_sgemm_pack_b(false, K, N, B, N, wp);
		double flop = 2.0 * (double)M * (double)N * (double)K, best = 1e30, bestp = 1e30;
		int reps = (int)(2e9 / flop) + 3;
		for (int r = 0; r < reps; r++) {
			double t = now();
			cpu_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
			t = now() - t;
			if (t < best)
				best = t;
			t = now();
			cpu_sgemm_pre(false, false, M, N, K, 1.0f, A, K, wa ? wp : NULL, B, N, wa ? NULL : wp, 0.0f, NULL, C,
				      N, NULL);
			t = now() - t;
			if (t < bestp)
				bestp = t;
		}
		printf("M %5lld N %5lld K %5lld  %8.3f ms  %6.1f GFLOP/s  %s packed: %8.3f ms  %6.1f GFLOP/s\n",
		       (long long)M, (long long)N, (long long)K, best * 1e3, flop / best * 1e-9, wa ? "A" : "B",
		       bestp * 1e3, flop / bestp * 1e-9);
		free(wp);
		free(A);
		free(B);
		free(C);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return bench();
	static const int64_t sizes[] = { 1, 2, 3, 5, 7, 11, 12, 13, 16, 17, 24, 31, 32, 33, 47, 65 };
	int ns = (int)(sizeof(sizes) / sizeof(sizes[0]));
	for (int t = 0; t < 4; t++)
		for (int a = 0; a < ns; a += 2)
			for (int b = 1; b < ns; b += 2)
				for (int c = 0; c < ns; c += 3)
					one(t & 1, t & 2, sizes[a], sizes[b], sizes[c], 1.0f, 0.0f, (a + b) % 3);
	/* alpha and beta, and sizes across the cache blocks (KC, MC, NC) */
	static const int64_t big[][3] = {
		{ 145, 70, 257 }, { 300, 33, 513 }, { 13, 2100, 40 }, { 200, 2050, 7 }, { 1, 3000, 300 },
		{ 2, 77, 600 }, { 3, 1, 1 }, { 290, 97, 1 }, { 37, 4100, 3 },
	};
	for (int t = 0; t < 4; t++)
		for (size_t s = 0; s < sizeof(big) / sizeof(big[0]); s++) {
			one(t & 1, t & 2, big[s][0], big[s][1], big[s][2], 1.0f, 0.0f, 0);
			one(t & 1, t & 2, big[s][0], big[s][1], big[s][2], 0.5f, 1.0f, 3);
			one(t & 1, t & 2, big[s][0], big[s][1], big[s][2], -1.5f, 0.25f, 1);
		}
	printf("test_sgemm (isa %d): %ld checks, %d failures\n", cpu_isa(), checks, failures);
	return failures ? 1 : 0;
}
