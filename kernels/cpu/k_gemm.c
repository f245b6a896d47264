/*
 * k_gemm.c - CPU kernels: matrix products (Gemm, MatMul, MatMulInteger,
 * QLinearMatMul, Einsum, Det) and the single-precision GEMM that they and
 * the convolutions use.
 *
 * To add a kernel: write `static int k_myop(struct cpu_kctx *k)` here and
 * add it to cpu_kernels_gemm[] at the end of the file.
 *
 * The exported GEMM, for other families (cpu.h's GEMM section):
 *
 *   void cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K,
 *                  float alpha, const float *A, int64_t lda,
 *                  const float *B, int64_t ldb, float beta,
 *                  float *C, int64_t ldc);
 *
 * Row-major C = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T; op(A)
 * is M x K, op(B) K x N. beta == 0 overwrites C (NaNs in C do not leak).
 * cpu_sgemm_pre takes op(A) or op(B) packed beforehand (the weight cache,
 * wcache.c) and a row bias as C's start; cpu_sgemm_src takes a function
 * that makes op(B)'s panels (a convolution's im2col). The work is split
 * among the pool's threads by blocks of C, never along K: the bits do not
 * depend on the thread count.
 */
#include "cpu.h"
#include "pool.h"

#include <math.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SGEMM_X86 1
#endif

/* ------------------------------------------------------------------------ */
/* Instruction-set cap                                                       */
/* ------------------------------------------------------------------------ */

/* cpu_isa(): see cpu.h */

int cpu_isa(void)
{
	static int isa = -1;
	if (isa >= 0)
		return isa;
	int have = CPU_ISA_GENERIC;
#ifdef SGEMM_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		have = CPU_ISA_AVX2;
		if (__builtin_cpu_supports("avx512f"))
			have = CPU_ISA_AVX512;
	}
#endif
	const char *e = getenv("OGSH_CPU_ISA");
	int cap = CPU_ISA_AVX512;
	if (e && !strcmp(e, "generic"))
		cap = CPU_ISA_GENERIC;
	else if (e && !strcmp(e, "avx2"))
		cap = CPU_ISA_AVX2;
	isa = have < cap ? have : cap;
	return isa;
}

/* ------------------------------------------------------------------------ */
/* sgemm: Goto-style blocking. A task owns a block of C (at most NC        */
/* columns); B is packed in KC x NCH chunks (panels of nr columns), A in    */
/* MC x KC blocks (panels of mr rows); a register-blocked mr x nr           */
/* micro-kernel multiplies one A panel by one B panel. The micro-kernel     */
/* (and so mr, nr) is picked per call by cpu_isa().                         */
/* ------------------------------------------------------------------------ */

#define MR_MAX 14
#define NR_MAX 32
#define KC 256
#define MC 144   /* rounded down to a multiple of mr; an A block stays in L2 */
#define NC 2048  /* columns of C per task (at most): a multiple of every nr */
#define SPLIT_MAX_PER_THREAD 16 /* a product is cut into at most this many tasks a thread */
/* sgemm_split's costs, in multiply-adds (16 a cycle with AVX-512) */
#define SPLIT_TASK_COST 32768       /* starting a task */
#define SPLIT_PREPACK_COST 131072   /* a second job (prepack_task's) */
#define SPLIT_READ 2                /* reading an element of packed A or B */
#define SPLIT_WRITE 4               /* writing one to memory and reading it back (prepack) */
#define SPLIT_COST_A 24             /* packing an element of A */
#define SPLIT_COST_B 4              /* of B */
#define SPLIT_COST_BT 8             /* of B transposed */
#define SPLIT_COST_SRC 16           /* of B from a cpu_bpack_fn (im2col) */

#ifdef SGEMM_X86
/* The 16 rows in r transposed in place (r[q] becomes column q). */
__attribute__((target("avx512f"), always_inline))
static inline void transpose16(__m512 *r)
{
	__m512 t[16];
	for (int q = 0; q < 16; q += 2) {
		t[q] = _mm512_unpacklo_ps(r[q], r[q + 1]);
		t[q + 1] = _mm512_unpackhi_ps(r[q], r[q + 1]);
	}
	/* rows 4g..4g+3 of columns c, c + 4, c + 8, c + 12 (c = 0..3) in r[4g + c] */
	for (int g = 0; g < 16; g += 4) {
		__m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 1]);
		__m512d c = _mm512_castps_pd(t[g + 2]), d = _mm512_castps_pd(t[g + 3]);
		r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
		r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
		r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
		r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
	}
	/* 128-bit lanes: rows 0-7 (t[c], t[c + 4]) and rows 8-15 (t[c + 8], t[c + 12]) */
	for (int h = 0; h < 16; h += 8)
		for (int c = 0; c < 4; c++) {
			t[h + c] = _mm512_shuffle_f32x4(r[h + c], r[h + c + 4], 0x88);
			t[h + c + 4] = _mm512_shuffle_f32x4(r[h + c], r[h + c + 4], 0xdd);
		}
	for (int c = 0; c < 8; c++) {
		r[c] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0x88);
		r[c + 8] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0xdd);
	}
}

/* pack_a for a row-major A (no transpose) and mr <= 16: blocks of 16
 * columns of a panel's rows transposed in registers, each column stored as
 * mr contiguous floats (the scalar loop's strided stores cost ~5 cycles an
 * element). The same floats in the same places. */
__attribute__((target("avx512f")))
static void pack_a_avx512(const float *A, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc, float *ap,
			  int MR)
{
	const __mmask16 sm = (__mmask16)((1u << MR) - 1);
	for (int64_t i = 0; i < mc; i += MR) {
		int mr = (int)(mc - i < MR ? mc - i : MR);
		const float *s = A + (i0 + i) * lda + p0;
		for (int64_t p = 0; p < kc; p += 16) {
			int n = (int)(kc - p < 16 ? kc - p : 16);
			__mmask16 lm = n == 16 ? 0xffff : (__mmask16)((1u << n) - 1);
			__m512 r[16];
			for (int q = 0; q < 16; q++)
				r[q] = q < mr ? _mm512_maskz_loadu_ps(lm, s + q * lda + p) : _mm512_setzero_ps();
			transpose16(r);
			for (int q = 0; q < n; q++)
				_mm512_mask_storeu_ps(ap + (p + q) * MR, sm, r[q]);
		}
		ap += kc * MR;
	}
}
#endif

/* Packs op(A)[i0:i0+mc, p0:p0+kc] as panels of mr rows, k-major inside a
 * panel, zero-padding the last panel. */
static void pack_a(bool ta, const float *A, int64_t lda, int64_t i0, int64_t p0, int64_t mc, int64_t kc, float *ap,
		   int MR)
{
#ifdef SGEMM_X86
	if (!ta && MR <= 16 && cpu_isa() >= CPU_ISA_AVX512) {
		pack_a_avx512(A, lda, i0, p0, mc, kc, ap, MR);
		return;
	}
#endif
	for (int64_t i = 0; i < mc; i += MR) {
		int64_t mr = mc - i < MR ? mc - i : MR;
		if (ta) {
			/* rows of op(A) are columns of A: copy runs of mr */
			for (int64_t p = 0; p < kc; p++) {
				const float *s = A + (p0 + p) * lda + i0 + i;
				for (int64_t r = 0; r < mr; r++)
					ap[p * MR + r] = s[r];
				for (int64_t r = mr; r < MR; r++)
					ap[p * MR + r] = 0;
			}
		} else {
			/* each row is read once, in order */
			for (int64_t r = 0; r < mr; r++) {
				const float *s = A + (i0 + i + r) * lda + p0;
				for (int64_t p = 0; p < kc; p++)
					ap[p * MR + r] = s[p];
			}
			for (int64_t r = mr; r < MR; r++)
				for (int64_t p = 0; p < kc; p++)
					ap[p * MR + r] = 0;
		}
		ap += kc * MR;
	}
}

/* Packs op(B)[p0:p0+kc, j0:j0+nc] as panels of nr columns, k-major. */
static void pack_b(bool tb, const float *B, int64_t ldb, int64_t p0, int64_t j0, int64_t kc, int64_t nc, float *bp,
		   int NR)
{
	int64_t full = nc / NR * NR;
	if (!tb) {
		/* row by row: each row of B is read once, in order (a column
		 * strip would read NR floats per row at a large stride, which
		 * the prefetchers do not follow) */
		for (int64_t p = 0; p < kc; p++) {
			const float *s = B + (p0 + p) * ldb + j0;
			float *d = bp + p * NR;
			/* copies of a constant size, which the compiler makes
			 * a few vector moves (a call each costs more) */
			if (NR == 32)   /* AVX-512's */
				for (int64_t j = 0; j < full; j += 32)
					memcpy(d + j * kc, s + j, 32 * sizeof(float));
			else if (NR == 16)   /* AVX2's */
				for (int64_t j = 0; j < full; j += 16)
					memcpy(d + j * kc, s + j, 16 * sizeof(float));
			else
				for (int64_t j = 0; j < full; j += NR)
					memcpy(d + j * kc, s + j, (size_t)NR * sizeof(float));
		}
	} else {
		/* columns of op(B) are rows of B: read each once, in order */
		for (int64_t j = 0; j < full; j += NR)
			for (int64_t c = 0; c < NR; c++) {
				const float *s = B + (j0 + j + c) * ldb + p0;
				float *d = bp + j * kc + c;
				for (int64_t p = 0; p < kc; p++)
					d[p * NR] = s[p];
			}
	}
	if (full == nc)
		return;
	/* the last, partial panel: zero-padded to NR columns */
	int64_t nr = nc - full;
	float *d = bp + full * kc;
	for (int64_t p = 0; p < kc; p++)
		for (int64_t c = 0; c < NR; c++)
			d[p * NR + c] = c >= nr ? 0 : tb ? B[(j0 + full + c) * ldb + p0 + p] : B[(p0 + p) * ldb + j0 + full + c];
}

/* C[0:mr, 0:nr] += alpha * acc (acc has rows of ld floats); with ci, C's
 * row i is set to ci[i] + alpha * acc instead (C is not read: the first
 * KC block of a product whose C starts as zero or a row bias). */
static void add_tile(const float *acc, int ld, float alpha, float *c, int64_t ldc, int mr, int nr, const float *ci)
{
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++)
			c[i * ldc + j] = (ci ? ci[i] : c[i * ldc + j]) + alpha * acc[i * ld + j];
}

/* Portable micro-kernel (4 x 8: the accumulators fit in 8 SSE registers): acc = A panel * B panel over kc, then added to C. */
#define C_MR 4
#define C_NR 8
static void ukr_c(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int mr, int nr,
		  const float *ci)
{
	float acc[C_MR * C_NR] = { 0 };
	for (int64_t p = 0; p < kc; p++) {
		for (int i = 0; i < C_MR; i++) {
			float av = a[i];
			for (int j = 0; j < C_NR; j++)
				acc[i * C_NR + j] += av * b[j];
		}
		a += C_MR;
		b += C_NR;
	}
	add_tile(acc, C_NR, alpha, c, ldc, mr, nr, ci);
}

#ifdef SGEMM_X86
/* AVX2/FMA micro-kernel: 6 x 16 accumulators in 12 ymm registers. */
#define A2_MR 6
#define A2_NR 16
__attribute__((target("avx2,fma")))
static void ukr_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int mr, int nr,
		  const float *ci)
{
	__m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
	__m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
	__m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
	__m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
	__m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
	__m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
	for (int64_t p = 0; p < kc; p++) {
		__m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
		__m256 av;
		av = _mm256_broadcast_ss(a + 0); c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);
		av = _mm256_broadcast_ss(a + 1); c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);
		av = _mm256_broadcast_ss(a + 2); c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);
		av = _mm256_broadcast_ss(a + 3); c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);
		av = _mm256_broadcast_ss(a + 4); c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);
		av = _mm256_broadcast_ss(a + 5); c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);
		a += A2_MR;
		b += A2_NR;
	}
	if (mr == A2_MR && nr == A2_NR) {
		__m256 va = _mm256_set1_ps(alpha);
#define ROW(i, x0, x1) \
		_mm256_storeu_ps(c + (i) * ldc, _mm256_fmadd_ps(va, x0, ci ? _mm256_set1_ps(ci[i]) : _mm256_loadu_ps(c + (i) * ldc))); \
		_mm256_storeu_ps(c + (i) * ldc + 8, \
				 _mm256_fmadd_ps(va, x1, ci ? _mm256_set1_ps(ci[i]) : _mm256_loadu_ps(c + (i) * ldc + 8)))
		ROW(0, c00, c01); ROW(1, c10, c11); ROW(2, c20, c21);
		ROW(3, c30, c31); ROW(4, c40, c41); ROW(5, c50, c51);
#undef ROW
		return;
	}
	float acc[A2_MR * A2_NR] __attribute__((aligned(32)));
	_mm256_store_ps(acc + 0 * A2_NR, c00); _mm256_store_ps(acc + 0 * A2_NR + 8, c01);
	_mm256_store_ps(acc + 1 * A2_NR, c10); _mm256_store_ps(acc + 1 * A2_NR + 8, c11);
	_mm256_store_ps(acc + 2 * A2_NR, c20); _mm256_store_ps(acc + 2 * A2_NR + 8, c21);
	_mm256_store_ps(acc + 3 * A2_NR, c30); _mm256_store_ps(acc + 3 * A2_NR + 8, c31);
	_mm256_store_ps(acc + 4 * A2_NR, c40); _mm256_store_ps(acc + 4 * A2_NR + 8, c41);
	_mm256_store_ps(acc + 5 * A2_NR, c50); _mm256_store_ps(acc + 5 * A2_NR + 8, c51);
	add_tile(acc, A2_NR, alpha, c, ldc, mr, nr, ci);
}

/*
 * AVX-512 micro-kernel: A5_MR x 32 accumulators in 2 * A5_MR zmm registers
 * (plus two for the B row and one broadcast of A). The loops over rows have
 * constant bounds and are unrolled, so the accumulators stay in registers.
 * Partial tiles (mr < A5_MR or nr < 32) store through masks; edge tiles of
 * at most 6 rows or 16 columns compute only those (ukr_avx512_t with
 * smaller constant bounds): every element still gets the same FMAs in the
 * same order, so the result does not depend on which variant ran.
 */
#define A5_MR 12
#define A5_NR 32
/* The fused epilogue on one vector of a finished tile (struct cpu_epi;
 * max(lo, v) is v < lo ? lo : v lane for lane, NaN and -0 included, and
 * min(hi, .) after it the clip's order when lo <= hi, which the caller
 * checks). */
__attribute__((target("avx512f"), always_inline))
static inline __m512 epi_vec(const struct cpu_epi *e, __m512 v, const float *z, __mmask16 m)
{
	if (z)
		v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, z));
	if (e->act == CPU_EPI_RELU)
		v = _mm512_max_ps(_mm512_setzero_ps(), v);
	else if (e->act == CPU_EPI_CLIP)
		v = _mm512_min_ps(_mm512_set1_ps(e->hi), _mm512_max_ps(_mm512_set1_ps(e->lo), v));
	return v;
}

__attribute__((target("avx512f"), always_inline))
static inline void ukr_avx512_t(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int mr,
				int nr, const float *ci, int64_t ldb, const struct cpu_epi *e, const float *z,
				const int rows, const int halves)
{
	__m512 acc[A5_MR][2];
	/* lanes of the two halves that are inside C (and, read straight from
	 * B, inside B's row) */
	__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
	__mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
#pragma GCC unroll 16
	for (int i = 0; i < rows; i++)
		acc[i][0] = acc[i][1] = _mm512_setzero_ps();
	for (int64_t p = 0; p < kc; p++) {
		__m512 b0, b1;
		if (!ldb) {
			b0 = _mm512_load_ps(b);
			b1 = halves > 1 ? _mm512_load_ps(b + 16) : b0;
		} else {
			/* a row of B itself: the lanes past nr read as 0, as in
			 * a packed panel's padding */
			b0 = _mm512_maskz_loadu_ps(m0, b);
			b1 = halves > 1 ? _mm512_maskz_loadu_ps(m1, b + 16) : b0;
		}
#pragma GCC unroll 16
		for (int i = 0; i < rows; i++) {
			__m512 av = _mm512_set1_ps(a[i]);
			acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
			if (halves > 1)
				acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
		}
		a += A5_MR;
		b += ldb ? ldb : A5_NR;
	}
	__m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
	for (int i = 0; i < rows; i++) {
		if (i >= mr)
			break;
		float *cr = c + i * ldc;
		const float *zr = z ? z + i * ldc : NULL;
		__m512 i0 = ci ? _mm512_set1_ps(ci[i]) : nr == A5_NR ? _mm512_loadu_ps(cr) : _mm512_maskz_loadu_ps(m0, cr);
		if (nr == A5_NR) {
			__m512 i1 = ci ? i0 : _mm512_loadu_ps(cr + 16);
			__m512 r0 = _mm512_fmadd_ps(va, acc[i][0], i0), r1 = _mm512_fmadd_ps(va, acc[i][1], i1);
			if (e) {
				r0 = epi_vec(e, r0, zr, 0xffff);
				r1 = epi_vec(e, r1, zr ? zr + 16 : NULL, 0xffff);
			}
			_mm512_storeu_ps(cr, r0);
			_mm512_storeu_ps(cr + 16, r1);
		} else {
			__m512 r0 = _mm512_fmadd_ps(va, acc[i][0], i0);
			if (e)
				r0 = epi_vec(e, r0, zr, m0);
			_mm512_mask_storeu_ps(cr, m0, r0);
			if (halves > 1) {
				__m512 i1 = ci ? i0 : _mm512_maskz_loadu_ps(m1, cr + 16);
				__m512 r1 = _mm512_fmadd_ps(va, acc[i][1], i1);
				if (e)
					r1 = epi_vec(e, r1, zr ? zr + 16 : NULL, m1);
				_mm512_mask_storeu_ps(cr + 16, m1, r1);
			}
		}
	}
}

/* The variants by tile size; ldb 0: b is a packed panel, else b is B's
 * own rows, ldb floats apart. */
__attribute__((target("avx512f")))
static void ukr_avx512_any(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int mr,
			   int nr, const float *ci, int64_t ldb, const struct cpu_epi *e, const float *z)
{
	if (mr == A5_MR && nr > 16)
		ukr_avx512_t(kc, a, b, c, ldc, alpha, mr, nr, ci, ldb, e, z, A5_MR, 2);
	else if (mr <= A5_MR / 2 && nr <= 16)
		ukr_avx512_t(kc, a, b, c, ldc, alpha, mr, nr, ci, ldb, e, z, A5_MR / 2, 1);
	else if (mr <= A5_MR / 2)
		ukr_avx512_t(kc, a, b, c, ldc, alpha, mr, nr, ci, ldb, e, z, A5_MR / 2, 2);
	else if (nr <= 16)
		ukr_avx512_t(kc, a, b, c, ldc, alpha, mr, nr, ci, ldb, e, z, A5_MR, 1);
	else
		ukr_avx512_t(kc, a, b, c, ldc, alpha, mr, nr, ci, ldb, e, z, A5_MR, 2);
}

__attribute__((target("avx512f")))
static void ukr_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int mr, int nr,
		       const float *ci)
{
	ukr_avx512_any(kc, a, b, c, ldc, alpha, mr, nr, ci, 0, NULL, NULL);
}
#endif

/* Dot product and y += a * x, for products with one or two rows (a
 * fully-connected layer at batch 1), which need no packing: B streams
 * through once. */
static float dot_c(const float *x, const float *y, int64_t n)
{
	float s = 0;
	for (int64_t i = 0; i < n; i++)
		s += x[i] * y[i];
	return s;
}

static void axpy_c(float a, const float *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

#ifdef SGEMM_X86
__attribute__((target("avx2,fma")))
static float dot_avx2(const float *x, const float *y, int64_t n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
	s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
	float t[8];
	_mm256_storeu_ps(t, s0);
	float s = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
	for (; i < n; i++)
		s += x[i] * y[i];
	return s;
}

__attribute__((target("avx2,fma")))
static void axpy_avx2(float a, const float *x, float *y, int64_t n)
{
	__m256 va = _mm256_set1_ps(a);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += a * x[i];
}
#endif

static bool have_avx2(void)
{
	return cpu_isa() >= CPU_ISA_AVX2;
}

/* The dot product of n floats (vectorized where the CPU allows). */
static float sdot(const float *x, const float *y, int64_t n)
{
#ifdef SGEMM_X86
	if (have_avx2())
		return dot_avx2(x, y, n);
#endif
	return dot_c(x, y, n);
}

static void saxpy(float a, const float *x, float *y, int64_t n)
{
#ifdef SGEMM_X86
	if (have_avx2()) {
		axpy_avx2(a, x, y, n);
		return;
	}
#endif
	axpy_c(a, x, y, n);
}

/* C += alpha * op(A) * op(B) for a few rows of C, without packing. */
static void sgemm_rows(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
		       const float *B, int64_t ldb, float *C, int64_t ldc)
{
	for (int64_t i = 0; i < M; i++) {
		float *c = C + i * ldc;
		if (tb && !ta) {
			for (int64_t j = 0; j < N; j++)
				c[j] += alpha * sdot(A + i * lda, B + j * ldb, K);
		} else if (!tb) {
			for (int64_t p = 0; p < K; p++)
				saxpy(alpha * (ta ? A[p * lda + i] : A[i * lda + p]), B + p * ldb, c, N);
		} else {
			for (int64_t j = 0; j < N; j++) {
				float s = 0;
				for (int64_t p = 0; p < K; p++)
					s += A[p * lda + i] * B[j * ldb + p];
				c[j] += alpha * s;
			}
		}
	}
}

typedef void (*ukr_fn)(int64_t, const float *, const float *, float *, int64_t, float, int, int, const float *);

/* A micro-kernel and its tile. */
/* A micro-kernel that reads B's rows itself (ldb floats apart) instead of
 * a packed panel, with the same arithmetic. */
typedef void (*ukr_direct_fn)(int64_t, const float *, const float *, float *, int64_t, float, int, int,
			      const float *, int64_t, const struct cpu_epi *, const float *);

/* A micro-kernel and its tile; dfn: its unpacked-B form, or NULL. */
struct ukr {
	ukr_fn fn;
	int mr, nr;
	ukr_direct_fn dfn;
};

static struct ukr pick_ukr(void)
{
	struct ukr u = { ukr_c, C_MR, C_NR, NULL };
#ifdef SGEMM_X86
	int isa = cpu_isa();
	if (isa >= CPU_ISA_AVX512) {
		u.fn = ukr_avx512;
		u.mr = A5_MR;
		u.nr = A5_NR;
		u.dfn = ukr_avx512_any;
	} else if (isa >= CPU_ISA_AVX2) {
		u.fn = ukr_avx2;
		u.mr = A2_MR;
		u.nr = A2_NR;
	}
#endif
	return u;
}

/* Unblocked product, used when the packing buffers cannot be allocated. */
static void sgemm_naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
			const float *B, int64_t ldb, float *C, int64_t ldc)
{
	for (int64_t i = 0; i < M; i++)
		for (int64_t p = 0; p < K; p++) {
			float av = alpha * (ta ? A[p * lda + i] : A[i * lda + p]);
			for (int64_t j = 0; j < N; j++)
				C[i * ldc + j] += av * (tb ? B[j * ldb + p] : B[p * ldb + j]);
		}
}

/*
 * The packing buffers of this thread, kept between calls: fresh large
 * blocks come from mmap and cost a page fault per 4 KiB on first touch,
 * which for a conv net is as slow as the packing itself. At most
 * (MC + NCH) * KC floats (0.66 MiB) per thread; a pool worker frees its
 * own when it exits (cpu_sgemm_thread_done), the calling thread's stays
 * reachable. Per thread rather than per pool worker index: a product
 * started from inside a parallel range runs on that range's thread, and
 * the thread's buffer is free then.
 */
static _Thread_local float *pack_buf;
static _Thread_local size_t pack_cap;
static _Thread_local float *pre_a, *pre_b;   /* sgemm_blocked's prepacked A and B (pre_space) */
static _Thread_local size_t pre_acap, pre_bcap;

void cpu_sgemm_thread_done(void)
{
	free(pack_buf);
	pack_buf = NULL;
	pack_cap = 0;
	free(pre_a);
	free(pre_b);
	pre_a = pre_b = NULL;
	pre_acap = pre_bcap = 0;
}

static float *pack_space(size_t nfloats)
{
	if (nfloats > pack_cap) {
		free(pack_buf);
		size_t bytes = (nfloats * sizeof(float) + 63) / 64 * 64;
		pack_buf = aligned_alloc(64, bytes);
		pack_cap = pack_buf ? bytes / sizeof(float) : 0;
	}
	return pack_buf;
}

/* ------------------------------------------------------------------------ */
/* The fused epilogue (struct cpu_epi)                                       */
/* ------------------------------------------------------------------------ */

static void epi_rows_c(const struct cpu_epi *e, float *c, const float *z, int64_t ldc, int64_t rows, int64_t cols)
{
	float lo = e->lo, hi = e->hi;
	for (int64_t i = 0; i < rows; i++) {
		float *cr = c + i * ldc;
		const float *zr = z ? z + i * ldc : NULL;
		for (int64_t j = 0; j < cols; j++) {
			float v = cr[j];
			if (zr)
				v += zr[j];
			if (e->act == CPU_EPI_RELU)
				v = v < 0 ? 0 : v;
			else if (e->act == CPU_EPI_CLIP)
				v = v < lo ? lo : v > hi ? hi : v;
			cr[j] = v;
		}
	}
}

#ifdef SGEMM_X86
/* The same with AVX-512: max(0, v) is v < 0 ? 0 : v lane for lane (NaN
 * and -0 come out as v), max then min the clip when lo <= hi. */
__attribute__((target("avx512f")))
static void epi_rows_avx512(const struct cpu_epi *e, float *c, const float *z, int64_t ldc, int64_t rows,
			    int64_t cols)
{
	__m512 lo = _mm512_set1_ps(e->act == CPU_EPI_RELU ? 0.0f : e->lo), hi = _mm512_set1_ps(e->hi);
	bool clamp = e->act != CPU_EPI_NONE, top = e->act == CPU_EPI_CLIP;
	for (int64_t i = 0; i < rows; i++) {
		float *cr = c + i * ldc;
		const float *zr = z ? z + i * ldc : NULL;
		for (int64_t j = 0; j < cols; j += 16) {
			__mmask16 m = cols - j >= 16 ? 0xffff : (__mmask16)((1u << (cols - j)) - 1);
			__m512 v = _mm512_maskz_loadu_ps(m, cr + j);
			if (zr)
				v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, zr + j));
			if (clamp)
				v = _mm512_max_ps(lo, v);
			if (top)
				v = _mm512_min_ps(hi, v);
			_mm512_mask_storeu_ps(cr + j, m, v);
		}
	}
}
#endif

/* cpu_epi_apply(): see cpu.h */

void cpu_epi_apply(const struct cpu_epi *e, float *c, int64_t off, int64_t ldc, int64_t rows, int64_t cols)
{
	const float *z = e->z ? e->z + off : NULL;
	if (!z && e->act == CPU_EPI_NONE)
		return;
	if (e->act == CPU_EPI_GELU) {
		/* Z first, then GELU row by row, while the block is in
		 * cache: the separate pass's order and bits */
		if (z) {
			struct cpu_epi ez = *e;
			ez.act = CPU_EPI_NONE;
			cpu_epi_apply(&ez, c, off, ldc, rows, cols);
		}
		cpu_fast_gelu_rows(c, ldc, rows, cols);
		return;
	}
#ifdef SGEMM_X86
	/* lo <= hi (and neither NaN): the clip's max-then-min order is the
	 * scalar's compare order */
	if (cpu_isa() >= CPU_ISA_AVX512 && (e->act != CPU_EPI_CLIP || e->lo <= e->hi)) {
		epi_rows_avx512(e, c, z, ldc, rows, cols);
		return;
	}
#endif
	epi_rows_c(e, c, z, ldc, rows, cols);
}

/* Columns of B packed at a time inside a task: a KC x NCH block (512 KiB)
 * stays in L2 next to the A block while the micro-kernels read it. */
#define NCH 512
/* K blocks at most this long run a task's tiles row by row (sgemm_task) */
#define SHORT_KC 64

/*
 * One product cut into tasks: a task computes the C block of rows
 * [im * mb, +mb) and columns [jn * nb, +nb), all of K, in a fixed order
 * (KC blocks, then NCH chunks, then micro-tiles). mb and nb are multiples
 * of the micro-kernel's mr and nr, so every element of C lies in the same
 * micro-tile and sees the same arithmetic whatever the number of tasks or
 * threads: results are bit-identical at any thread count.
 */
struct sgemm_job {
	bool ta, tb;
	int64_t M, N, K;
	float alpha;
	const float *A, *B;
	int64_t lda, ldb, ldc;
	float *C;
	struct ukr u;
	int64_t mb;             /* rows of A packed at a time (MC rounded to mr) */
	int64_t mt, nb, tn;     /* task rows (a multiple of mr, at most mb unless
				 * A is packed beforehand), task columns (a
				 * multiple of nr), tasks along N */
	bool failed;            /* a task could not get its packing buffer */
	const float *apk, *bpk; /* op(A), op(B) packed whole (cpu_sgemm_pack_a/_b) or NULL */
	int64_t mpad, npad;     /* M and N rounded up to mr and nr */
	cpu_bpack_fn bsrc;      /* packs op(B)'s panels itself (no B matrix) or NULL */
	const void *bctx;
	bool init;              /* C starts as rowbias (or 0): the first KC block sets it, unread */
	const float *rowbias;   /* M values or NULL */
	bool bdirect;           /* few rows: the micro-kernel reads B itself (u.dfn), unpacked */
	const struct cpu_epi *epi;   /* applied to each tile after its last KC block, or NULL */
	bool vepi;              /* u.dfn applies epi in its registers */
	bool bepi;              /* epi applied per block of mc x nc rows and
				 * columns (in L2), not per tile: GELU, whose
				 * loop costs too much to start for each row
				 * of 32 of a tile */
};

/* The row values of a C that starts as zero. */
static const float zero_rows[MR_MAX];

static void sgemm_task(void *ctx, int64_t begin, int64_t end, int worker)
{
	struct sgemm_job *j = ctx;
	int64_t MR = j->u.mr, NR = j->u.nr;
	(void)worker;
	for (int64_t t = begin; t < end; t++) {
		int64_t i0 = t / j->tn * j->mt, j0 = t % j->tn * j->nb;
		int64_t mt = j->M - i0 < j->mt ? j->M - i0 : j->mt, nt = j->N - j0 < j->nb ? j->N - j0 : j->nb;
		int64_t kcap = j->K < KC ? j->K : KC, mcap = j->apk ? 0 : (mt + MR - 1) / MR * MR;
		int64_t ncap = nt < NCH ? (nt + NR - 1) / NR * NR : NCH;
		/* more than one chunk of columns and of K: the chunks outside
		 * the KC blocks, so that a chunk's block of C stays in L2
		 * through all of K instead of the task's whole C going to
		 * memory and back once per KC block; A is then packed for all
		 * of K first. Every tile still sees its KC blocks in order:
		 * the same bits. (Not for a cpu_bpack_fn's B, the convolutions'.) */
		bool jout = !j->bsrc && !j->bdirect && nt > NCH && j->K > KC;
		int64_t arows = jout ? j->K : kcap;
		/* B's chunk first: both stay 64-byte aligned (NR * 4 bytes divides 64) */
		float *bp = pack_space((size_t)(ncap * kcap + mcap * arows));
		if (!bp && j->bsrc) {
			j->failed = true;
			continue;
		}
		if (!bp) {
			/* only when memory runs out; the element order differs
			 * from the blocked path, which then matters little */
			for (int64_t i = 0; i < mt && j->init; i++)
				for (int64_t c = 0; c < nt; c++)
					j->C[(i0 + i) * j->ldc + j0 + c] = j->rowbias ? j->rowbias[i0 + i] : 0;
			sgemm_naive(j->ta, j->tb, mt, nt, j->K, j->alpha, j->ta ? j->A + i0 : j->A + i0 * j->lda,
				    j->lda, j->tb ? j->B + j0 * j->ldb : j->B + j0, j->ldb, j->C + i0 * j->ldc + j0,
				    j->ldc);
			if (j->epi)
				cpu_epi_apply(j->epi, j->C + i0 * j->ldc + j0, i0 * j->ldc + j0, j->ldc, mt, nt);
			j->failed = true;
			continue;
		}
		float *apack0 = bp + ncap * kcap;
		for (int64_t jo = 0; jo < (jout ? nt : 1); jo += NCH)
		for (int64_t pc = 0; pc < j->K; pc += KC) {
			int64_t kc = j->K - pc < KC ? j->K - pc : KC;
			/* unpacked A: the task is one block of rows, packed here
			 * (block pc at pc * mcap when packed for all of K) */
			float *apack = jout ? apack0 + pc * mcap : apack0;
			if (!j->apk && jo == 0)
				pack_a(j->ta, j->A, j->lda, i0, pc, mt, kc, apack, (int)MR);
			for (int64_t jc = jout ? jo : 0; jc < (jout ? jo + 1 : nt); jc += NCH) {
				int64_t nc = nt - jc < NCH ? nt - jc : NCH;
				if (j->bdirect)
					;       /* read in place below */
				else if (j->bpk)
					bp = (float *)j->bpk + pc * j->npad + (j0 + jc) * kc;
				else if (j->bsrc)
					j->bsrc(j->bctx, pc, kc, j0 + jc, nc, bp, (int)NR);
				else
					pack_b(j->tb, j->B, j->ldb, pc, j0 + jc, kc, nc, bp, (int)NR);
				/* the chunk of B stays in L2 while every block of
				 * the task's rows goes by */
				for (int64_t ic = 0; ic < mt; ic += j->mb) {
					int64_t mc = mt - ic < j->mb ? mt - ic : j->mb;
					/* packed A: the panels from row i0 + ic of block pc */
					const float *ap = j->apk ? j->apk + pc * j->mpad + (i0 + ic) * kc : apack + ic * kc;
					/* panel by panel, every tile of rows of a panel
					 * while it is in L1; with a short K (a tile
					 * costs little next to writing it) tile row by
					 * tile row instead, so C is written as a few
					 * rows at a time, not as a column of tiles
					 * over all the block's rows */
					int64_t ntr = (mc + MR - 1) / MR, npn = (nc + NR - 1) / NR;
					bool by_rows = kc <= SHORT_KC;
					for (int64_t q = 0; q < ntr * npn; q++) {
						int64_t ir = (by_rows ? q / npn : q % ntr) * MR;
						int64_t jr = (by_rows ? q % npn : q / ntr) * NR;
						int nr = (int)(nc - jr < NR ? nc - jr : NR);
						float *c = j->C + (i0 + ic) * j->ldc + j0 + jc + jr;
						{
							int mr = (int)(mc - ir < MR ? mc - ir : MR);
							const float *ci = NULL;
							if (pc == 0 && j->init)
								ci = j->rowbias ? j->rowbias + i0 + ic + ir : zero_rows;
							/* the epilogue on the last KC block: in the
							 * micro-kernel's registers when it can */
							bool last = j->epi && pc + kc == j->K;
							const struct cpu_epi *e = last && j->vepi ? j->epi : NULL;
							const float *z = e && e->z ? e->z + (c + ir * j->ldc - j->C) : NULL;
							if (j->bdirect)
								j->u.dfn(kc, ap + ir * kc, j->B + pc * j->ldb + j0 + jc + jr,
									 c + ir * j->ldc, j->ldc, j->alpha, mr, nr, ci, j->ldb,
									 e, z);
							else if (e)
								j->u.dfn(kc, ap + ir * kc, bp + jr * kc, c + ir * j->ldc,
									 j->ldc, j->alpha, mr, nr, ci, 0, e, z);
							else
								j->u.fn(kc, ap + ir * kc, bp + jr * kc, c + ir * j->ldc,
									j->ldc, j->alpha, mr, nr, ci);
							if (last && !e && !j->bepi)
								cpu_epi_apply(j->epi, c + ir * j->ldc,
									      c + ir * j->ldc - j->C, j->ldc, mr, nr);
						}
					}
					/* GELU: over the block's mc rows of nc
					 * columns once its tiles are done, while it
					 * is in L2 */
					if (j->bepi && pc + kc == j->K) {
						float *cb = j->C + (i0 + ic) * j->ldc + j0 + jc;
						cpu_epi_apply(j->epi, cb, cb - j->C, j->ldc, mc, nc);
					}
				}
			}
		}
	}
}

/* beta * C for rows [begin, end) (beta 0 overwrites, NaNs included). */
struct scale_job {
	int64_t N, ldc;
	float beta, *C;
};

static void scale_rows(void *ctx, int64_t begin, int64_t end, int worker)
{
	struct scale_job *s = ctx;
	(void)worker;
	for (int64_t i = begin; i < end; i++) {
		float *c = s->C + i * s->ldc;
		if (s->beta == 0)
			memset(c, 0, (size_t)s->N * sizeof(float));
		else
			for (int64_t j = 0; j < s->N; j++)
				c[j] *= s->beta;
	}
}

/* The products with one or two rows, split by columns of C. */
struct rows_job {
	bool ta, tb;
	int64_t M, N, K;
	float alpha;
	const float *A, *B;
	int64_t lda, ldb, ldc;
	float *C;
};

/* Columns per index of rows_task: a multiple of the vector width, so that
 * a column takes the vector loop or the scalar tail (FMA or not) as in an
 * unsplit call. */
#define ROWS_CW 16

static void rows_task(void *ctx, int64_t begin, int64_t end, int worker)
{
	struct rows_job *r = ctx;
	(void)worker;
	int64_t c0 = begin * ROWS_CW, c1 = end * ROWS_CW < r->N ? end * ROWS_CW : r->N;
	const float *b = r->tb ? r->B + c0 * r->ldb : r->B + c0;
	sgemm_rows(r->ta, r->tb, r->M, c1 - c0, r->K, r->alpha, r->A, r->lda, b, r->ldb, r->C + c0, r->ldc);
}

/* cpu_sgemm_pack_floats(): see cpu.h */

size_t cpu_sgemm_pack_floats(bool b_side, int64_t mn, int64_t K)
{
	struct ukr u = pick_ukr();
	int64_t r = b_side ? u.nr : u.mr;
	return mn > 0 && K > 0 ? (size_t)((mn + r - 1) / r * r * K) : 0;
}

/*
 * op(A) packed whole for cpu_sgemm_pre: for each KC block of K (block pc
 * at pc * mpad floats) the row panels of mr rows, k-major, zero-padded,
 * exactly as the product packs them itself, so a product with the packed
 * form gives the same bits.
 */
void cpu_sgemm_pack_a(bool ta, int64_t M, int64_t K, const float *A, int64_t lda, float *dst)
{
	struct ukr u = pick_ukr();
	int64_t mpad = (M + u.mr - 1) / u.mr * u.mr;
	for (int64_t pc = 0; pc < K; pc += KC)
		pack_a(ta, A, lda, 0, pc, M, K - pc < KC ? K - pc : KC, dst + pc * mpad, u.mr);
}

/* op(B) (K x N) packed whole the same way: per KC block (at pc * npad) the
 * column panels of nr columns. */
void cpu_sgemm_pack_b(bool tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *dst)
{
	struct ukr u = pick_ukr();
	int64_t npad = (N + u.nr - 1) / u.nr * u.nr;
	for (int64_t pc = 0; pc < K; pc += KC)
		pack_b(tb, B, ldb, pc, 0, K - pc < KC ? K - pc : KC, N, dst + pc * npad, u.nr);
}

static void sgemm_blocked(struct sgemm_job *jp);

void cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
	       const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
	cpu_sgemm_pre(ta, tb, M, N, K, alpha, A, lda, NULL, B, ldb, NULL, beta, NULL, C, ldc, NULL);
}

static void sgemm_pre(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
		      const float *apk, const float *B, int64_t ldb, const float *bpk, float beta, const float *rowbias,
		      float *C, int64_t ldc, const struct cpu_epi *epi);

void cpu_sgemm_pre(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
		   const float *apk, const float *B, int64_t ldb, const float *bpk, float beta, const float *rowbias,
		   float *C, int64_t ldc, const struct cpu_epi *epi)
{
	if (M <= 0 || N <= 0)
		return;
	if (beta == 0 && M > 2 && K > 0 && alpha != 0) {
		/* the first KC block writes C (the row bias plus its part),
		 * the last applies the epilogue */
		struct sgemm_job j = { ta, tb, M, N, K, alpha, A, B, lda, ldb, ldc, C, pick_ukr(), 0, 0, 0, 0, false,
				       apk, bpk, 0, 0, NULL, NULL, true, rowbias, false, epi, false, false };
		sgemm_blocked(&j);
		return;
	}
	sgemm_pre(ta, tb, M, N, K, alpha, A, lda, apk, B, ldb, bpk, beta, rowbias, C, ldc, epi);
}

/* cpu_sgemm_pre's other cases: the blocked product applies epi to each
 * tile after its last KC block (C's start, beta C, is complete before any
 * tile's first block), the others over C after the product */
static void sgemm_pre(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
		      const float *apk, const float *B, int64_t ldb, const float *bpk, float beta, const float *rowbias,
		      float *C, int64_t ldc, const struct cpu_epi *epi)
{
	if (beta == 0 && rowbias) {
		/* C = rowbias, then the product is added */
		for (int64_t i = 0; i < M; i++)
			for (int64_t jj = 0; jj < N; jj++)
				C[i * ldc + jj] = rowbias[i];
		beta = 1;
	}
	/* beta first, so the blocked loops only accumulate */
	if (beta != 1) {
		struct scale_job s = { N, ldc, beta, C };
		cpu_parallel_for(M, (1 << 14) / N + 1, scale_rows, &s);
	}
	if (K <= 0 || alpha == 0) {
		if (epi)
			cpu_epi_apply(epi, C, 0, ldc, M, N);
		return;
	}
	if (M <= 2) {
		/* each column of C is its own dot product or axpy lane, so
		 * splitting the columns (in whole vectors) keeps the bits */
		struct rows_job r = { ta, tb, M, N, K, alpha, A, B, lda, ldb, ldc, C };
		int64_t units = (N + ROWS_CW - 1) / ROWS_CW;
		cpu_parallel_for(units, (K * M < 4096 ? 4096 / (K * M + 1) : 1) + 1, rows_task, &r);
		if (epi)
			cpu_epi_apply(epi, C, 0, ldc, M, N);
		return;
	}

	struct sgemm_job j = { ta, tb, M, N, K, alpha, A, B, lda, ldb, ldc, C, pick_ukr(), 0, 0, 0, 0, false, apk,
			       bpk, 0, 0, NULL, NULL, false, NULL, false, epi, false, false };
	sgemm_blocked(&j);
}

/*
 * How sgemm_blocked cuts a product into tasks for `threads` threads: the
 * tiles of rows (*mper) and panels of columns (*per) of a task; returns
 * the estimated time of that cut. Tasks are blocks of whole micro-tiles,
 * so every element of C sees the same arithmetic whatever the cut. With A
 * packed beforehand (apacked) a task may take all of M (a packed chunk of B then
 * serves every row), else at most one block of mb rows (the task packs
 * them); at most NC columns.
 *
 * The cut is the one with the least estimated time, in multiply-adds: the
 * rounds of tasks the threads go through times the largest task, plus
 * half a task for the thread that finishes last, where a task costs its
 * multiply-adds (padded to whole panels), reading its rows of A and
 * columns of B, and the packing it does: each task packs the chunks of B
 * under its columns (cb an element; once per block of rows) and its rows
 * of A (ca; once per block of columns). So large products get
 * near-square tasks, a few per thread, and small ones (a 7x7 image, 96
 * rows) still split, down to one tile or panel, when the packing they
 * repeat costs less than the threads they would leave idle.
 */
static double sgemm_split(const struct sgemm_job *j, int64_t rtiles, int64_t npan, int threads, bool apacked,
			  double cb, double ca, int64_t *mper, int64_t *per)
{
	int64_t MR = j->u.mr, NR = j->u.nr, K = j->K;
	int64_t tpb = j->mb / MR, pmax = NC / NR;
	int64_t mmin = apacked ? 1 : (rtiles + tpb - 1) / tpb, nmin = (npan + pmax - 1) / pmax;
	int64_t most = SPLIT_MAX_PER_THREAD * (int64_t)threads;
	double best = -1;
	*mper = (rtiles + mmin - 1) / mmin;
	*per = (npan + nmin - 1) / nmin;
	if (threads <= 1 || mmin * nmin >= most)
		return 0;
	for (int64_t cm = mmin; cm <= rtiles && cm <= most; cm++) {
		int64_t mp = (rtiles + cm - 1) / cm;
		if (cm > mmin && mp == (rtiles + cm - 2) / (cm - 1))
			continue;   /* the same rows per task as cm - 1 */
		int64_t tm = (rtiles + mp - 1) / mp, rows = mp * MR < j->M ? mp * MR : j->M;
		for (int64_t cn = nmin; cn <= npan && tm * cn <= most; cn++) {
			int64_t pp = (npan + cn - 1) / cn;
			if (cn > nmin && pp == (npan + cn - 2) / (cn - 1))
				continue;
			int64_t tn = (npan + pp - 1) / pp, cols = pp * NR < j->N ? pp * NR : j->N;
			int64_t n = tm * tn;
			double w = (double)K * ((double)rows * (double)(pp * NR) + (cb + SPLIT_READ) * (double)cols +
					     (ca + SPLIT_READ) * (double)rows) + SPLIT_TASK_COST;
			double est = (double)((n + threads - 1) / threads) * w + w / 2;
			if (best < 0 || est < best) {
				best = est;
				*mper = mp;
				*per = pp;
			}
		}
	}
	return best;
}

/*
 * A product whose tasks would each pack the same rows of A (a column
 * split) or the same columns of B (a row split, when B comes from a
 * cpu_bpack_fn) may have op(A) or op(B) packed whole first, by all the
 * threads at once, in the layouts of cpu_sgemm_pack_a and _b: then the
 * tasks read them as they would a cached weight, and split either way
 * freely. The buffers are the calling thread's, kept between calls like
 * pack_buf, at most PREPACK_MAX floats each.
 */
#define PREPACK_MAX ((size_t)16 << 20)
#define PREPACK_PANELS 2   /* panels (or row panels) per prepack task */

static float *pre_space(float **buf, size_t *cap, size_t nfloats)
{
	if (nfloats > PREPACK_MAX)
		return NULL;
	if (nfloats > *cap) {
		free(*buf);
		size_t bytes = (nfloats * sizeof(float) + 63) / 64 * 64;
		*buf = aligned_alloc(64, bytes);
		*cap = *buf ? bytes / sizeof(float) : 0;
	}
	return *buf;
}

struct prepack_job {
	const struct sgemm_job *j;
	bool a_side;
	float *dst;
	int64_t nch;             /* prepack tasks per KC block */
};

static void prepack_task(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct prepack_job *p = ctx;
	const struct sgemm_job *j = p->j;
	(void)worker;
	for (int64_t t = begin; t < end; t++) {
		int64_t pc = t / p->nch * KC, kc = j->K - pc < KC ? j->K - pc : KC;
		if (p->a_side) {
			int64_t h = PREPACK_PANELS * j->u.mr, i0 = t % p->nch * h, mc = j->M - i0 < h ? j->M - i0 : h;
			pack_a(j->ta, j->A, j->lda, i0, pc, mc, kc, p->dst + pc * j->mpad + i0 * kc, j->u.mr);
		} else {
			int64_t w = PREPACK_PANELS * j->u.nr, j0 = t % p->nch * w, nc = j->N - j0 < w ? j->N - j0 : w;
			j->bsrc(j->bctx, pc, kc, j0, nc, p->dst + pc * j->npad + j0 * kc, j->u.nr);
		}
	}
}

/* Packs op(A) (a_side) or op(B) from j->bsrc whole into dst, in parallel. */
static void prepack(const struct sgemm_job *j, bool a_side, float *dst)
{
	int64_t units = a_side ? (j->M + j->u.mr - 1) / j->u.mr : (j->N + j->u.nr - 1) / j->u.nr;
	int64_t nch = (units + PREPACK_PANELS - 1) / PREPACK_PANELS;
	struct prepack_job pj = { j, a_side, dst, nch };
	cpu_parallel_for((j->K + KC - 1) / KC * nch, 1, prepack_task, &pj);
}

/*
 * sgemm_blocked's decision for a product: the cut (sgemm_split) and
 * whether A, B or both are packed first (pick bit 0: A, bit 1: B), when
 * the tasks would pack the same part more than once and packing it once
 * is quicker; mper0, per0: the cut without prepacking. Kept per thread
 * in a small table keyed by the shape, since a model asks for the same
 * products every run and the search costs microseconds at 16 threads.
 */
struct split_plan {
	int64_t M, N, K;
	uint32_t flags;
	int threads;
	int64_t mper, per, mper0, per0;
	int pick;
};

#define SPLIT_MEMO 64
static _Thread_local struct split_plan split_memo[SPLIT_MEMO];

static void sgemm_plan(const struct sgemm_job *j, int64_t rtiles, int64_t npan, int threads, struct split_plan *sp)
{
	int64_t M = j->M, N = j->N, K = j->K;
	uint32_t flags = 1u | (j->apk ? 2u : 0) | (j->bpk ? 4u : 0) | (j->bsrc ? 8u : 0) | (j->bdirect ? 16u : 0) |
			 (j->tb ? 32u : 0) | (j->u.mr == A5_MR ? 64u : 0);
	uint64_t h = ((uint64_t)M * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)N * 0xC2B2AE3D27D4EB4Full) ^
		     ((uint64_t)K * 0x165667B19E3779F9ull) ^ ((uint64_t)flags << 7) ^ (uint64_t)threads;
	struct split_plan *m = &split_memo[(h ^ h >> 29) % SPLIT_MEMO];
	if (m->flags == flags && m->M == M && m->N == N && m->K == K && m->threads == threads) {
		*sp = *m;
		return;
	}
	/* packing cost per element, in multiply-adds */
	double cb = j->bdirect || j->bpk ? 0 : j->bsrc ? SPLIT_COST_SRC : j->tb ? SPLIT_COST_BT : SPLIT_COST_B;
	double ca = j->apk ? 0 : SPLIT_COST_A;
	*sp = (struct split_plan){ M, N, K, flags, threads, 0, 0, 0, 0, 0 };
	double est = sgemm_split(j, rtiles, npan, threads, j->apk != NULL, cb, ca, &sp->mper0, &sp->per0);
	sp->mper = sp->mper0;
	sp->per = sp->per0;
	bool can_a = !j->apk && (npan + sp->per0 - 1) / sp->per0 > 1;
	bool can_b = j->bsrc && (rtiles + sp->mper0 - 1) / sp->mper0 > 1;
	for (int w = 1; w < 4; w++) {
		bool pa = w & 1, pb = w & 2;
		if ((pa && !can_a) || (pb && !can_b))
			continue;
		int64_t mp, pp;
		double e = sgemm_split(j, rtiles, npan, threads, pa || j->apk, pb ? 0 : cb, pa ? 0 : ca, &mp, &pp) +
			   (pa ? (ca + SPLIT_WRITE) * (double)M * (double)K / threads + SPLIT_PREPACK_COST : 0) +
			   (pb ? (cb + SPLIT_WRITE) * (double)K * (double)N / threads + SPLIT_PREPACK_COST : 0);
		if (e < est) {
			est = e;
			sp->pick = w;
			sp->mper = mp;
			sp->per = pp;
		}
	}
	*m = *sp;
}

/* Runs the blocked product of j (M > 2, K > 0; C already scaled by beta):
 * cuts it into tasks and hands them to the pool. */
static void sgemm_blocked(struct sgemm_job *jp)
{
	struct sgemm_job j = *jp;
	int64_t M = j.M, N = j.N, K = j.K;
	int64_t MR = j.u.mr, NR = j.u.nr;
	/* with at most four tiles of rows a packed panel of B would be used
	 * at most four times: packing it costs more than reading B's rows */
	j.bdirect = j.u.dfn && j.B && !j.tb && !j.bpk && !j.bsrc && M <= 4 * MR;
	j.vepi = j.u.dfn && j.epi && j.epi->act != CPU_EPI_GELU &&
		 (j.epi->act != CPU_EPI_CLIP || j.epi->lo <= j.epi->hi);
	j.bepi = j.epi && j.epi->act == CPU_EPI_GELU;
	j.mpad = (M + MR - 1) / MR * MR;
	j.npad = (N + NR - 1) / NR * NR;
	j.mb = MC / MR * MR;
	int64_t rtiles = (M + MR - 1) / MR, npan = (N + NR - 1) / NR;
	int threads = cpu_parallel_inside() ? 1 : cpu_threads();
	struct split_plan sp;
	sgemm_plan(&j, rtiles, npan, threads, &sp);
	int64_t mper = sp.mper, per = sp.per;
	float *abuf = sp.pick & 1 ? pre_space(&pre_a, &pre_acap, (size_t)(j.mpad * K)) : NULL;
	float *bbuf = sp.pick & 2 ? pre_space(&pre_b, &pre_bcap, (size_t)(K * j.npad)) : NULL;
	if ((sp.pick & 1 && !abuf) || (sp.pick & 2 && !bbuf)) {
		/* no memory for a prepacked side: the cut without it */
		abuf = bbuf = NULL;
		mper = sp.mper0;
		per = sp.per0;
	}
	if (abuf) {
		prepack(&j, true, abuf);
		j.apk = abuf;
	}
	if (bbuf) {
		prepack(&j, false, bbuf);
		j.bpk = bbuf;
		j.bsrc = NULL;
	}
	j.nb = per * NR;
	j.tn = (npan + per - 1) / per;
	j.mt = mper * MR;
	int64_t tm = (rtiles + mper - 1) / mper;
	cpu_parallel_for(tm * j.tn, 1, sgemm_task, &j);
	jp->failed = j.failed;
}

/* cpu_sgemm_src(): see cpu.h */

bool cpu_sgemm_src(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *apk,
		   cpu_bpack_fn bsrc, const void *bctx, bool init, const float *rowbias, float *C, int64_t ldc,
		   const struct cpu_epi *epi)
{
	if (M <= 0 || N <= 0)
		return true;
	if (K <= 0 || alpha == 0) {
		for (int64_t i = 0; i < M && init; i++)
			for (int64_t jj = 0; jj < N; jj++)
				C[i * ldc + jj] = rowbias ? rowbias[i] : 0;
		if (epi)
			cpu_epi_apply(epi, C, 0, ldc, M, N);
		return true;
	}
	struct sgemm_job j = { false, false, M, N, K, alpha, A, NULL, lda, 0, ldc, C, pick_ukr(), 0, 0, 0, 0, false,
			       apk, NULL, 0, 0, bsrc, bctx, init, rowbias, false, epi, false, false };
	sgemm_blocked(&j);
	return !j.failed;
}

/* ------------------------------------------------------------------------ */
/* helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* The elements of t as float32: t's own data for float32 (*owned NULL),
 * else a converted copy that the caller frees (*owned). NULL on no memory. */
static const float *f32_of(const struct ir_tensor *t, float **owned)
{
	*owned = NULL;
	if (t->dtype == IR_FLOAT)
		return t->numel ? KF32(t) : (const float *)"";
	float *f = malloc((t->numel ? t->numel : 1) * sizeof(float));
	if (!f)
		return NULL;
	const void *p = kdata(t);
	for (uint64_t i = 0; i < t->numel; i++)
		f[i] = (float)kld(t->dtype, p, i);
	*owned = f;
	return f;
}

/* Whether dtypes compute through float32 (float32, and float16/bfloat16
 * which compute in float32 and round once when stored). */
static bool via_f32(int dt)
{
	return dt == IR_FLOAT || dt == IR_FLOAT16 || dt == IR_BFLOAT16;
}

static bool numeric(int dt)
{
	return ir_dtype_is_float(dt) || ir_dtype_is_int(dt);
}

/* Stores n floats into a tensor of dtype dt (rounding once). */
static void store_f32(int dt, void *dst, const float *src, uint64_t n)
{
	if (dt == IR_FLOAT) {
		memcpy(dst, src, n * sizeof(float));
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		kst(dt, dst, i, src[i]);
}

/* A constant right side packed as the products' B (for the cache). */
struct bpack_arg {
	bool tb;
	int64_t K, N, ldb;
	const float *b;
};

static float *bpack(const void *arg)
{
	const struct bpack_arg *a = arg;
	size_t n = cpu_sgemm_pack_floats(true, a->N, a->K);
	float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
	if (p)
		cpu_sgemm_pack_b(a->tb, a->K, a->N, a->b, a->ldb, p);
	return p;
}

/* Input `in` (op(B), K x N, float32 data of the tensor itself) packed and
 * cached when it is an initializer and the product packs (rows > 2). */
static const float *cached_b(struct cpu_kctx *k, int in, bool tb, int64_t K, int64_t N, const float *b,
			     int64_t rows)
{
	if (rows <= 2 || K <= 0 || N <= 0)
		return NULL;
	struct bpack_arg a = { tb, K, N, tb ? K : N, b };
	return cpu_wcache_get(k, in, tb ? 0x42540000u : 0x42000000u, cpu_sgemm_pack_floats(true, N, K), bpack, &a);
}

/* ------------------------------------------------------------------------ */
/* Gemm                                                                      */
/* ------------------------------------------------------------------------ */

static int k_gemm(struct cpu_kctx *k)
{
	const struct ir_tensor *a = kin_req(k, 0), *b = kin_req(k, 1), *c = kin(k, 2);
	if (!a || !b)
		return IR_ERR;
	if (a->rank != 2 || b->rank != 2)
		return kerr(k, "gemm needs 2-d inputs, got %s and %s", kshape(a), kshape(b));
	if (a->dtype != b->dtype || (c && c->dtype != a->dtype))
		return kerr(k, "gemm inputs must have one element type");
	int dt = a->dtype;
	if (!numeric(dt))
		return kerr(k, "gemm does not support %s", ir_dtype_name(dt));
	bool ta = kattr_i(k, "transA", 0) != 0, tb = kattr_i(k, "transB", 0) != 0;
	float alpha = kattr_f(k, "alpha", 1.0f), beta = kattr_f(k, "beta", 1.0f);
	int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
	int64_t Kb = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
	if (K != Kb)
		return kerr(k, "inner dimensions differ: a is %s%s, b is %s%s", kshape(a), ta ? " (transposed)" : "",
			    kshape(b), tb ? " (transposed)" : "");
	/* C broadcasts one way to [M, N] */
	int64_t cm = 1, cn = 1;
	if (c) {
		if (c->rank > 2)
			return kerr(k, "c has rank %d, at most 2 is allowed", c->rank);
		if (c->rank == 2) {
			cm = c->dims[0];
			cn = c->dims[1];
		} else if (c->rank == 1) {
			cn = c->dims[0];
		}
		if ((cm != 1 && cm != M) || (cn != 1 && cn != N))
			return kerr(k, "c of shape %s does not broadcast to [%lld,%lld]", kshape(c), (long long)M,
				    (long long)N);
	}
	int64_t dims[2] = { M, N };
	struct ir_tensor *o = kout(k, 0, dt, 2, dims);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	void *y = kwdata(o);
	uint64_t MN = (uint64_t)M * (uint64_t)N;

	if (via_f32(dt)) {
		float *fa, *fb, *fc = NULL, *fy = dt == IR_FLOAT ? y : malloc(MN * sizeof(float));
		const float *pa = f32_of(a, &fa), *pb = f32_of(b, &fb);
		const float *pc = c ? f32_of(c, &fc) : NULL;
		int rc = 0;
		if (!fy || !pa || !pb || (c && !pc)) {
			rc = kenomem(k);
			goto f32_out;
		}
		/* C's start (beta 0 without C: the product writes all of it) */
		for (int64_t i = 0; pc && i < M; i++) {
			const float *cr = pc + (cm == 1 ? 0 : i) * cn;
			if (cn == N)
				memcpy(fy + i * N, cr, (size_t)N * sizeof(float));
			else
				for (int64_t j = 0; j < N; j++)
					fy[i * N + j] = cr[0];
		}
		const float *bpk = dt == IR_FLOAT ? cached_b(k, 1, tb, K, N, pb, M) : NULL;
		/* a FusedGemm's residual and activation (k_fused.c), applied
		 * by the product as its tiles finish (struct cpu_epi), when Z
		 * is float32 of the output's shape */
		struct cpu_epi *epi = dt == IR_FLOAT ? k->epi : NULL;
		const struct ir_tensor *z = epi ? epi->zt : NULL;
		if (z && !(z->dtype == IR_FLOAT && z->rank == 2 && z->dims[0] == M && z->dims[1] == N))
			epi = NULL;
		cpu_sgemm_pre(ta, tb, M, N, K, alpha, pa, a->dims[1], NULL, pb, b->dims[1], bpk, pc ? beta : 0, NULL, fy,
			      N, epi);
		if (epi)
			epi->done = true;
		if (dt != IR_FLOAT)
			store_f32(dt, y, fy, MN);
f32_out:
		free(fa);
		free(fb);
		free(fc);
		if (fy != y)
			free(fy);
		return rc;
	}

	/* other types: double accumulation (exact int64 for integers) */
	const void *pa = kdata(a), *pb = kdata(b), *pc = c ? kdata(c) : NULL;
	bool isint = ir_dtype_is_int(dt);
	for (int64_t i = 0; i < M; i++) {
		for (int64_t j = 0; j < N; j++) {
			uint64_t ci = c ? (uint64_t)((cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)) : 0;
			if (isint && alpha == 1 && (beta == 1 || !c)) {
				int64_t s = 0;
				for (int64_t p = 0; p < K; p++)
					s += kldi(dt, pa, (uint64_t)(ta ? p * a->dims[1] + i : i * a->dims[1] + p)) *
					     kldi(dt, pb, (uint64_t)(tb ? j * b->dims[1] + p : p * b->dims[1] + j));
				if (c)
					s += kldi(dt, pc, ci);
				ksti(dt, y, (uint64_t)(i * N + j), s);
				continue;
			}
			double s = 0;
			for (int64_t p = 0; p < K; p++)
				s += kld(dt, pa, (uint64_t)(ta ? p * a->dims[1] + i : i * a->dims[1] + p)) *
				     kld(dt, pb, (uint64_t)(tb ? j * b->dims[1] + p : p * b->dims[1] + j));
			s *= alpha;
			if (c)
				s += (double)beta * kld(dt, pc, ci);
			kst(dt, y, (uint64_t)(i * N + j), s);
		}
		int rc = kstop(k);
		if (rc)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* batched products with numpy matmul semantics                              */
/* ------------------------------------------------------------------------ */

/* The shape of a batched product: a is [..., M, K] (or [K]), b [..., K, N]
 * (or [K]); batch dims broadcast. Batch i's matrices start at element
 * aoff[i] / boff[i] of a / b and its output at i * M * N. */
struct bmm {
	int64_t M, N, K;
	uint64_t nb;
	int64_t *aoff, *boff;   /* nb entries each (owned) */
	int orank;
	int64_t odims[IR_MAX_RANK];
};

static void bmm_free(struct bmm *p)
{
	free(p->aoff);
	free(p->boff);
	p->aoff = p->boff = NULL;
}

static int bmm_plan(struct cpu_kctx *k, const struct ir_tensor *a, const struct ir_tensor *b, struct bmm *p)
{
	memset(p, 0, sizeof(*p));
	if (a->rank < 1 || b->rank < 1)
		return kerr(k, "matmul inputs must have rank 1 or more, got %s and %s", kshape(a), kshape(b));
	int ra = a->rank, rb = b->rank;
	p->M = ra == 1 ? 1 : a->dims[ra - 2];
	p->K = a->dims[ra - 1];
	int64_t kb = rb == 1 ? b->dims[0] : b->dims[rb - 2];
	p->N = rb == 1 ? 1 : b->dims[rb - 1];
	if (p->K != kb)
		return kerr(k, "inner dimensions differ: %s times %s", kshape(a), kshape(b));
	int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;
	int br = ba > bb ? ba : bb;
	int64_t bdims[IR_MAX_RANK], sa[IR_MAX_RANK], sb[IR_MAX_RANK];
	/* element strides of each batch dim in a and b (0 where broadcast) */
	int64_t s_a = p->M * p->K, s_b = p->K * p->N;
	for (int j = br - 1; j >= 0; j--) {
		int ja = j - (br - ba), jb = j - (br - bb);
		int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
		if (da != db && da != 1 && db != 1)
			return kerr(k, "batch dimensions do not broadcast: %s times %s", kshape(a), kshape(b));
		bdims[j] = da == 1 ? db : da;
		sa[j] = da == 1 ? 0 : s_a;
		sb[j] = db == 1 ? 0 : s_b;
		s_a *= da;
		s_b *= db;
	}
	uint64_t nb = 1;
	p->orank = 0;
	for (int j = 0; j < br; j++) {
		nb *= (uint64_t)bdims[j];
		p->odims[p->orank++] = bdims[j];
	}
	if (ra > 1)
		p->odims[p->orank++] = p->M;
	if (rb > 1)
		p->odims[p->orank++] = p->N;
	p->nb = nb;
	p->aoff = malloc((nb ? nb : 1) * sizeof(int64_t));
	p->boff = malloc((nb ? nb : 1) * sizeof(int64_t));
	if (!p->aoff || !p->boff) {
		bmm_free(p);
		return kenomem(k);
	}
	struct kiter it;
	kiter_init(&it, br, bdims);
	kiter_add(&it, sa);
	kiter_add(&it, sb);
	for (uint64_t i = 0; i < nb; i++) {
		p->aoff[i] = it.off[0];
		p->boff[i] = it.off[1];
		kiter_next(&it);
	}
	return 0;
}

/* The float32 products of a batched MatMul, one per batch. */
struct bmm_job {
	const struct bmm *p;
	const float *a, *b;
	float *y;
	const float *bpk;        /* b packed (a constant 2-d b, shared by the batches) or NULL */
};

/* Batches [begin, end): one cpu_sgemm each (serial inside when the
 * batches are split among the threads; the same bits either way). */
static void bmm_batches(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct bmm_job *j = ctx;
	const struct bmm *p = j->p;
	(void)worker;
	for (int64_t i = begin; i < end; i++)
		cpu_sgemm_pre(false, false, p->M, p->N, p->K, 1.0f, j->a + p->aoff[i], p->K, NULL, j->b + p->boff[i],
			      p->N, j->bpk, 0.0f, NULL, j->y + (uint64_t)i * (uint64_t)(p->M * p->N), p->N, NULL);
}

/* Matrix-vector (N == 1): output rows [begin, end) over all batches, a
 * dot product each. */
static void bmm_dots(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct bmm_job *j = ctx;
	const struct bmm *p = j->p;
	(void)worker;
	for (int64_t t = begin; t < end; t++) {
		int64_t i = t / p->M, r = t % p->M;
		j->y[t] = sdot(j->a + p->aoff[i] + r * p->K, j->b + p->boff[i], p->K);
	}
}

static int k_matmul(struct cpu_kctx *k)
{
	const struct ir_tensor *a = kin_req(k, 0), *b = kin_req(k, 1);
	if (!a || !b)
		return IR_ERR;
	if (a->dtype != b->dtype)
		return kerr(k, "matmul inputs have different types: %s and %s", ir_dtype_name(a->dtype),
			    ir_dtype_name(b->dtype));
	int dt = a->dtype;
	if (!numeric(dt))
		return kerr(k, "matmul does not support %s", ir_dtype_name(dt));
	struct bmm p;
	int rc = bmm_plan(k, a, b, &p);
	if (rc)
		return rc;
	struct ir_tensor *o = kout(k, 0, dt, p.orank, p.odims);
	if (!o) {
		bmm_free(&p);
		return IR_ERR;
	}
	void *y = kwdata(o);
	int64_t M = p.M, N = p.N, K = p.K;
	if (!o->numel)
		goto out;
	if (via_f32(dt)) {
		float *fa, *fb, *fy = dt == IR_FLOAT ? y : malloc(o->numel * sizeof(float));
		const float *pa = f32_of(a, &fa), *pb = f32_of(b, &fb);
		if (!fy || !pa || !pb) {
			rc = kenomem(k);
		} else {
			/* b shared by every batch and a contiguous: one product
			 * with nb * M rows (e.g. [batch, seq, k] x [k, n] weights) */
			bool shared = p.nb > 1 && N > 1;
			for (uint64_t i = 0; i < p.nb && shared; i++)
				shared = p.boff[i] == p.boff[0] && p.aoff[i] == (int64_t)i * M * K;
			/* a constant 2-d b (every batch's) is packed once, cached */
			const float *bpk = NULL;
			if (dt == IR_FLOAT && b->rank == 2 && N > 1)
				bpk = cached_b(k, 1, false, K, N, pb, shared ? (int64_t)p.nb * M : M);
			if (shared) {
				cpu_sgemm_pre(false, false, (int64_t)p.nb * M, N, K, 1.0f, pa + p.aoff[0], K, NULL,
					      pb + p.boff[0], N, bpk, 0.0f, NULL, fy, N, NULL);
				rc = kstop(k);
			}
			if (!shared) {
				struct bmm_job j = { &p, pa, pb, fy, bpk };
				if (N == 1 && K > 0)
					cpu_parallel_for((int64_t)p.nb * M, 4096 / (K + 1) + 1, bmm_dots, &j);
				else if (p.nb > 1)
					cpu_parallel_for((int64_t)p.nb, 1, bmm_batches, &j);
				else
					bmm_batches(&j, 0, 1, 0);
				rc = kstop(k);
			}
			if (!rc && dt != IR_FLOAT)
				store_f32(dt, y, fy, o->numel);
		}
		free(fa);
		free(fb);
		if (fy != y)
			free(fy);
		goto out;
	}
	const void *pa = kdata(a), *pb = kdata(b);
	bool isint = ir_dtype_is_int(dt);
	for (uint64_t i = 0; i < p.nb && !rc; i++) {
		uint64_t yo = i * (uint64_t)(M * N);
		for (int64_t r = 0; r < M; r++)
			for (int64_t c = 0; c < N; c++) {
				uint64_t ao = (uint64_t)(p.aoff[i] + r * K), bo = (uint64_t)(p.boff[i] + c);
				if (isint) {
					int64_t s = 0;
					for (int64_t q = 0; q < K; q++)
						s += kldi(dt, pa, ao + (uint64_t)q) * kldi(dt, pb, bo + (uint64_t)(q * N));
					ksti(dt, y, yo + (uint64_t)(r * N + c), s);
				} else {
					double s = 0;
					for (int64_t q = 0; q < K; q++)
						s += kld(dt, pa, ao + (uint64_t)q) * kld(dt, pb, bo + (uint64_t)(q * N));
					kst(dt, y, yo + (uint64_t)(r * N + c), s);
				}
			}
		rc = kstop(k);
	}
out:
	bmm_free(&p);
	return rc;
}

/* A per-tensor (1 element) or per-row/column (n elements) zero point or
 * scale: element i of it. Checks the count first with zp_ok. */
static bool qparam_ok(const struct ir_tensor *t, int64_t n)
{
	return !t || t->numel == 1 || (t->rank <= 1 && (int64_t)t->numel == n);
}

static double qparam(const struct ir_tensor *t, int64_t i, double dflt)
{
	if (!t)
		return dflt;
	return kld(t->dtype, kdata(t), t->numel == 1 ? 0 : (uint64_t)i);
}

/* Integer product of a and b less their zero points, batched like MatMul:
 * fills acc (nb * M * N int32 values, allocated here, caller frees). */
static int qmm(struct cpu_kctx *k, const struct ir_tensor *a, const struct ir_tensor *azp, const struct ir_tensor *b,
	       const struct ir_tensor *bzp, struct bmm *p, int32_t **acc)
{
	*acc = NULL;
	if ((a->dtype != IR_UINT8 && a->dtype != IR_INT8) || (b->dtype != IR_UINT8 && b->dtype != IR_INT8))
		return kerr(k, "inputs must be int8 or uint8, got %s and %s", ir_dtype_name(a->dtype),
			    ir_dtype_name(b->dtype));
	if ((azp && azp->dtype != a->dtype) || (bzp && bzp->dtype != b->dtype))
		return kerr(k, "zero points must have the type of their inputs");
	int rc = bmm_plan(k, a, b, p);
	if (rc)
		return rc;
	if (!qparam_ok(azp, p->M) || !qparam_ok(bzp, p->N)) {
		bmm_free(p);
		return kerr(k, "zero points must be scalars or per-row (a) / per-column (b) vectors");
	}
	int64_t M = p->M, N = p->N, K = p->K;
	uint64_t n = p->nb * (uint64_t)M * (uint64_t)N;
	int32_t *y = calloc(n ? n : 1, sizeof(int32_t));
	int32_t *bcol = malloc((K ? (size_t)K : 1) * sizeof(int32_t));
	if (!y || !bcol) {
		free(y);
		free(bcol);
		bmm_free(p);
		return kenomem(k);
	}
	const void *pa = kdata(a), *pb = kdata(b);
	for (uint64_t i = 0; i < p->nb; i++) {
		for (int64_t c = 0; c < N; c++) {
			int32_t bz = (int32_t)qparam(bzp, c, 0);
			for (int64_t q = 0; q < K; q++)
				bcol[q] = (int32_t)kldi(b->dtype, pb, (uint64_t)(p->boff[i] + q * N + c)) - bz;
			for (int64_t r = 0; r < M; r++) {
				int32_t az = (int32_t)qparam(azp, r, 0);
				int32_t s = 0;
				for (int64_t q = 0; q < K; q++)
					s += ((int32_t)kldi(a->dtype, pa, (uint64_t)(p->aoff[i] + r * K + q)) - az) * bcol[q];
				y[i * (uint64_t)(M * N) + (uint64_t)(r * N + c)] = s;
			}
		}
		if ((rc = kstop(k))) {
			free(y);
			free(bcol);
			bmm_free(p);
			return rc;
		}
	}
	free(bcol);
	*acc = y;
	return 0;
}

static int k_matmulinteger(struct cpu_kctx *k)
{
	const struct ir_tensor *a = kin_req(k, 0), *b = kin_req(k, 1);
	if (!a || !b)
		return IR_ERR;
	struct bmm p;
	int32_t *acc;
	int rc = qmm(k, a, kin(k, 2), b, kin(k, 3), &p, &acc);
	if (rc)
		return rc;
	struct ir_tensor *o = kout(k, 0, IR_INT32, p.orank, p.odims);
	if (o && o->numel)
		memcpy(kwdata(o), acc, o->numel * sizeof(int32_t));
	free(acc);
	bmm_free(&p);
	return o ? 0 : IR_ERR;
}

/* Rounds a float to float16 precision (numpy computes float16 scales so). */
static float round_like(int dt, float v)
{
	if (dt == IR_FLOAT16)
		return ir_f16_to_f32(ir_f32_to_f16(v));
	if (dt == IR_BFLOAT16)
		return ir_bf16_to_f32(ir_f32_to_bf16(v));
	return v;
}

static int k_qlinearmatmul(struct cpu_kctx *k)
{
	const struct ir_tensor *a = kin_req(k, 0), *as = kin_req(k, 1), *azp = kin(k, 2);
	const struct ir_tensor *b = kin_req(k, 3), *bs = kin_req(k, 4), *bzp = kin(k, 5);
	const struct ir_tensor *ys = kin_req(k, 6), *yzp = kin(k, 7);
	if (!a || !as || !b || !bs || !ys)
		return IR_ERR;
	if (ys->numel != 1 || (yzp && yzp->numel != 1))
		return kerr(k, "y_scale and y_zero_point must have one element");
	if (!ir_dtype_is_float(as->dtype) || !ir_dtype_is_float(bs->dtype) || !ir_dtype_is_float(ys->dtype))
		return kerr(k, "scales must be floating point");
	int odt = yzp ? yzp->dtype : a->dtype;
	if (odt != IR_UINT8 && odt != IR_INT8)
		return kerr(k, "y_zero_point must be int8 or uint8");
	struct bmm p;
	int32_t *acc;
	int rc = qmm(k, a, azp, b, bzp, &p, &acc);
	if (rc)
		return rc;
	if (!qparam_ok(as, p.M) || !qparam_ok(bs, p.N)) {
		free(acc);
		bmm_free(&p);
		return kerr(k, "scales must be scalars or per-row (a) / per-column (b) vectors");
	}
	struct ir_tensor *o = kout(k, 0, odt, p.orank, p.odims);
	if (!o) {
		free(acc);
		bmm_free(&p);
		return IR_ERR;
	}
	void *y = kwdata(o);
	double lo = odt == IR_UINT8 ? 0 : -128, hi = odt == IR_UINT8 ? 255 : 127;
	double zy = qparam(yzp, 0, 0);
	int sdt = as->dtype;
	float sy = (float)qparam(ys, 0, 1);
	uint64_t MN = (uint64_t)(p.M * p.N);
	for (uint64_t i = 0; i < o->numel; i++) {
		int64_t r = (int64_t)(i % MN) / p.N, c = (int64_t)(i % MN) % p.N;
		/* the multiplier in the scales' precision, like the reference */
		float m = round_like(sdt, round_like(sdt, (float)qparam(as, r, 1) * (float)qparam(bs, c, 1)) / sy);
		double v = nearbyint((double)acc[i] * m + zy);
		v = !(v >= lo) ? lo : v > hi ? hi : v;   /* NaN (a zero scale) goes to lo */
		ksti(odt, y, i, (int64_t)v);
	}
	free(acc);
	bmm_free(&p);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Einsum                                                                    */
/* ------------------------------------------------------------------------ */

#define ES_LETTERS 52          /* a-z, A-Z; ellipsis dims get labels from 52 on */
#define ES_MAXL (ES_LETTERS + IR_MAX_RANK)
#define ES_MAXIN 16

static int es_label(char c)
{
	if (c >= 'a' && c <= 'z')
		return c - 'a';
	if (c >= 'A' && c <= 'Z')
		return 26 + (c - 'A');
	return -1;
}

/* Parses one term ("ij", "...ii") into labels; ell gets the ellipsis
 * position (-1 if none). Returns the count, or -1. */
static int es_term(const char *s, size_t len, int *labels, int *ell)
{
	int n = 0;
	*ell = -1;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == ' ')
			continue;
		if (c == '.') {
			if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.' || *ell >= 0)
				return -1;
			*ell = n;
			i += 2;
			continue;
		}
		int l = es_label(c);
		if (l < 0 || n >= IR_MAX_RANK)
			return -1;
		labels[n++] = l;
	}
	return n;
}

/* Copies the elements of src visited by an odometer over labels ls (in
 * that order, label l advancing by st[l]) into dst, n of them. */
static void es_gather(const float *src, const int64_t *st, const int *ls, int nl, const int64_t *size, float *dst,
		      uint64_t n)
{
	int64_t idx[ES_MAXL] = { 0 }, off = 0;
	for (uint64_t i = 0; i < n; i++) {
		dst[i] = src[off];
		for (int q = nl - 1; q >= 0; q--) {
			int l = ls[q];
			if (++idx[q] < size[l]) {
				off += st[l];
				break;
			}
			idx[q] = 0;
			off -= st[l] * (size[l] - 1);
		}
	}
}

/*
 * Einsum of two float operands as a batched GEMM: labels in both inputs
 * and the output are batch dims, in A and the output rows (M), in B and
 * the output columns (N), in both inputs only the contraction (K). The
 * operands are gathered into [batch, M, K] and [batch, K, N] and the
 * product scattered into the output. Returns 1 when the equation does not
 * have that form (a label repeated in one input, or summed within one
 * input): the general loop runs then.
 */
static int es_gemm(struct cpu_kctx *k, const struct ir_tensor *const *x, int (*lab)[IR_MAX_RANK],
		   const int64_t *size, int64_t (*st)[ES_MAXL], const int *out, int nout, struct ir_tensor *o)
{
	bool in[2][ES_MAXL] = { { false } }, ino[ES_MAXL] = { false };
	for (int i = 0; i < 2; i++)
		for (int d = 0; d < x[i]->rank; d++) {
			if (in[i][lab[i][d]])
				return 1;
			in[i][lab[i][d]] = true;
		}
	for (int q = 0; q < nout; q++)
		ino[out[q]] = true;
	int bl[ES_MAXL], ml[ES_MAXL], nl[ES_MAXL], kl[ES_MAXL], nb = 0, nm = 0, nn = 0, nk = 0;
	uint64_t B = 1, M = 1, N = 1, K = 1;
	for (int l = 0; l < ES_MAXL; l++) {
		bool a = in[0][l], b = in[1][l], y = ino[l];
		if (!a && !b)
			continue;
		uint64_t sz = (uint64_t)size[l];
		if (a && b && y) {
			bl[nb++] = l;
			B *= sz;
		} else if (a && y) {
			ml[nm++] = l;
			M *= sz;
		} else if (b && y) {
			nl[nn++] = l;
			N *= sz;
		} else if (a && b) {
			kl[nk++] = l;
			K *= sz;
		} else {
			return 1;
		}
	}
	/* gather orders: A as batch+M+K, B as batch+K+N, Y as batch+M+N */
	int oa[ES_MAXL], ob[ES_MAXL], oy[ES_MAXL], na = 0, nbb = 0, ny = 0;
	for (int q = 0; q < nb; q++)
		oa[na++] = ob[nbb++] = oy[ny++] = bl[q];
	for (int q = 0; q < nm; q++)
		oa[na++] = oy[ny++] = ml[q];
	for (int q = 0; q < nk; q++)
		oa[na++] = ob[nbb++] = kl[q];
	for (int q = 0; q < nn; q++)
		ob[nbb++] = oy[ny++] = nl[q];
	/* the gathered copies (broadcast operands grow): keep them sane */
	uint64_t na_el, nb_el, ny_el;
	if (__builtin_mul_overflow(B * M, K, &na_el) || __builtin_mul_overflow(B * K, N, &nb_el) ||
	    __builtin_mul_overflow(B * M, N, &ny_el) || na_el > ((uint64_t)1 << 36) || nb_el > ((uint64_t)1 << 36) ||
	    ny_el > ((uint64_t)1 << 36))
		return 1;
	float *f0, *f1;
	const float *p0 = f32_of(x[0], &f0), *p1 = f32_of(x[1], &f1);
	float *ga = malloc((na_el + 1) * sizeof(float));
	float *gb = malloc((nb_el + 1) * sizeof(float));
	float *gy = malloc((ny_el + 1) * sizeof(float));
	int rc = 0;
	if (!p0 || !p1 || !ga || !gb || !gy) {
		rc = kenomem(k);
		goto out;
	}
	es_gather(p0, st[0], oa, na, size, ga, na_el);
	es_gather(p1, st[1], ob, nbb, size, gb, nb_el);
	for (uint64_t i = 0; i < B && !rc; i++) {
		cpu_sgemm(false, false, (int64_t)M, (int64_t)N, (int64_t)K, 1.0f, ga + i * M * K, (int64_t)K,
			  gb + i * K * N, (int64_t)N, 0.0f, gy + i * M * N, (int64_t)N);
		rc = kstop(k);
	}
	if (!rc) {
		/* scatter: walk gy in batch+M+N order, the output by its strides */
		int64_t ost[ES_MAXL] = { 0 }, os[IR_MAX_RANK], idx[ES_MAXL] = { 0 }, off = 0;
		kstrides(nout, o->dims, os);
		for (int q = 0; q < nout; q++)
			ost[out[q]] = os[q];
		void *yd = kwdata(o);
		for (uint64_t i = 0; i < ny_el; i++) {
			if (o->dtype == IR_FLOAT)
				((float *)yd)[off] = gy[i];
			else
				kst(o->dtype, yd, (uint64_t)off, gy[i]);
			for (int q = ny - 1; q >= 0; q--) {
				int l = oy[q];
				if (++idx[q] < size[l]) {
					off += ost[l];
					break;
				}
				idx[q] = 0;
				off -= ost[l] * (size[l] - 1);
			}
		}
	}
out:
	free(f0);
	free(f1);
	free(ga);
	free(gb);
	free(gy);
	return rc;
}

static int k_einsum(struct cpu_kctx *k)
{
	const char *eq = kattr_s(k, "equation", NULL);
	if (!eq)
		return kerr(k, "einsum needs an equation");
	int nin = k->n_in;
	if (nin < 1 || nin > ES_MAXIN)
		return kerr(k, "einsum has %d inputs, 1 to %d are supported", nin, ES_MAXIN);
	const struct ir_tensor *x[ES_MAXIN];
	int dt = -1;
	for (int i = 0; i < nin; i++) {
		if (!(x[i] = kin_req(k, i)))
			return IR_ERR;
		if (dt >= 0 && x[i]->dtype != dt)
			return kerr(k, "einsum inputs must have one element type");
		dt = x[i]->dtype;
	}
	if (!numeric(dt))
		return kerr(k, "einsum does not support %s", ir_dtype_name(dt));

	const char *arrow = strstr(eq, "->");
	size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
	/* labels of each input dim: letters, or ES_LETTERS + j for ellipsis
	 * dim j counted in the broadcast ellipsis (right-aligned) */
	int lab[ES_MAXIN][IR_MAX_RANK];
	int nell = 0, ellr[ES_MAXIN];
	int64_t size[ES_MAXL];
	int count[ES_MAXL];
	for (int l = 0; l < ES_MAXL; l++) {
		size[l] = -1;
		count[l] = 0;
	}
	size_t pos = 0;
	int tl[IR_MAX_RANK], ellpos[ES_MAXIN];
	for (int i = 0; i < nin; i++) {
		size_t end = pos;
		while (end < lhs_len && eq[end] != ',')
			end++;
		if (i < nin - 1 ? end >= lhs_len : end != lhs_len)
			return kerr(k, "equation '%s' does not have %d input terms", eq, nin);
		int ell, n = es_term(eq + pos, end - pos, tl, &ell);
		if (n < 0)
			return kerr(k, "cannot parse equation '%s'", eq);
		int r = x[i]->rank;
		if ((ell < 0 && n != r) || (ell >= 0 && n > r))
			return kerr(k, "term %d of '%s' does not match input %d of shape %s", i, eq, i, kshape(x[i]));
		ellr[i] = ell < 0 ? 0 : r - n;
		ellpos[i] = ell;
		if (ellr[i] > nell)
			nell = ellr[i];
		/* letters now; the ellipsis dims [ell, ell + ellr) below */
		int d = 0;
		for (int j = 0; j < n; j++) {
			if (j == ell)
				d += ellr[i];
			lab[i][d++] = tl[j];
		}
		pos = end + 1;
	}
	/* ellipsis labels (right-aligned across inputs), then sizes */
	for (int i = 0; i < nin; i++) {
		if (ellpos[i] >= 0)
			for (int j = 0; j < ellr[i]; j++)
				lab[i][ellpos[i] + j] = ES_LETTERS + (nell - ellr[i]) + j;
		for (int d = 0; d < x[i]->rank; d++) {
			int l = lab[i][d];
			int64_t s = x[i]->dims[d];
			count[l]++;
			/* a dim of size 1 broadcasts (its stride is 0 below) */
			if (size[l] < 0 || size[l] == 1)
				size[l] = s;
			else if (s != size[l] && s != 1)
				return kerr(k, "label '%c' has sizes %lld and %lld",
					    l < 26 ? 'a' + l : l < 52 ? 'A' + l - 26 : '.', (long long)size[l], (long long)s);
		}
	}
	/* output labels */
	int out[ES_MAXL], nout = 0;
	if (arrow) {
		int ell, ol[IR_MAX_RANK];
		int n = es_term(arrow + 2, strlen(arrow + 2), ol, &ell);
		if (n < 0)
			return kerr(k, "cannot parse the output of '%s'", eq);
		for (int j = 0; j <= n; j++) {
			if (j == ell)
				for (int e = 0; e < nell; e++)
					out[nout++] = ES_LETTERS + e;
			if (j == n)
				break;
			if (count[ol[j]] == 0)
				return kerr(k, "an output label of '%s' is not in the inputs", eq);
			for (int q = 0; q < nout; q++)
				if (out[q] == ol[j])
					return kerr(k, "output label repeats in '%s'", eq);
			out[nout++] = ol[j];
		}
	} else {
		for (int e = 0; e < nell; e++)
			out[nout++] = ES_LETTERS + e;
		for (int l = 26; l < 52; l++)   /* uppercase sorts first */
			if (count[l] == 1)
				out[nout++] = l;
		for (int l = 0; l < 26; l++)
			if (count[l] == 1)
				out[nout++] = l;
	}
	if (nout > IR_MAX_RANK)
		return kerr(k, "einsum output has too many dimensions");
	/* summed labels: the rest */
	int sum[ES_MAXL], nsum = 0;
	bool isout[ES_MAXL] = { false };
	for (int q = 0; q < nout; q++)
		isout[out[q]] = true;
	for (int l = 0; l < ES_MAXL; l++)
		if (count[l] && !isout[l])
			sum[nsum++] = l;
	int64_t odims[IR_MAX_RANK];
	for (int q = 0; q < nout; q++)
		odims[q] = size[out[q]] < 0 ? 1 : size[out[q]];
	struct ir_tensor *o = kout(k, 0, dt, nout, odims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	/* strides of each label in each input (summed over repeated labels) */
	int64_t (*st)[ES_MAXL] = calloc((size_t)nin, sizeof(*st));
	if (!st)
		return kenomem(k);
	for (int i = 0; i < nin; i++) {
		int64_t s = 1;
		for (int d = x[i]->rank - 1; d >= 0; d--) {
			if (x[i]->dims[d] != 1)
				st[i][lab[i][d]] += s;
			s *= x[i]->dims[d];
		}
	}
	if (nin == 2 && via_f32(dt) && o->numel) {
		int rc = es_gemm(k, x, lab, size, st, out, nout, o);
		if (rc <= 0) {
			free(st);
			return rc;
		}
	}
	bool isint = ir_dtype_is_int(dt);
	uint64_t nsumel = 1;
	for (int q = 0; q < nsum; q++)
		nsumel *= (uint64_t)size[sum[q]];
	int64_t oidx[IR_MAX_RANK] = { 0 }, sidx[ES_MAXL];
	int64_t base[ES_MAXIN] = { 0 }, off[ES_MAXIN];
	int rc = 0;
	uint64_t work = 0;   /* products done since the last Ctrl-C check */
	for (uint64_t oi = 0; oi < o->numel; oi++) {
		double accf = 0;
		int64_t acci = 0;
		for (int q = 0; q < nsum; q++)
			sidx[q] = 0;
		for (int i = 0; i < nin; i++)
			off[i] = base[i];
		for (uint64_t si = 0; si < nsumel; si++) {
			if (++work >= (1u << 22)) {
				work = 0;
				if ((rc = kstop(k)))
					goto done;
			}
			if (isint) {
				int64_t v = 1;
				for (int i = 0; i < nin; i++)
					v *= kldi(dt, kdata(x[i]), (uint64_t)off[i]);
				acci += v;
			} else {
				double v = 1;
				for (int i = 0; i < nin; i++)
					v *= kld(dt, kdata(x[i]), (uint64_t)off[i]);
				accf += v;
			}
			for (int q = nsum - 1; q >= 0; q--) {
				int l = sum[q];
				if (++sidx[q] < size[l]) {
					for (int i = 0; i < nin; i++)
						off[i] += st[i][l];
					break;
				}
				sidx[q] = 0;
				for (int i = 0; i < nin; i++)
					off[i] -= st[i][l] * (size[l] - 1);
			}
		}
		if (isint)
			ksti(dt, y, oi, acci);
		else
			kst(dt, y, oi, accf);
		for (int q = nout - 1; q >= 0; q--) {
			int l = out[q];
			if (++oidx[q] < odims[q]) {
				for (int i = 0; i < nin; i++)
					base[i] += st[i][l];
				break;
			}
			oidx[q] = 0;
			for (int i = 0; i < nin; i++)
				base[i] -= st[i][l] * (odims[q] - 1);
		}
	}
done:
	free(st);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Det                                                                       */
/* ------------------------------------------------------------------------ */

static int k_det(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!ir_dtype_is_float(x->dtype))
		return kerr(k, "det needs a floating-point input, not %s", ir_dtype_name(x->dtype));
	int r = x->rank;
	if (r < 2 || x->dims[r - 1] != x->dims[r - 2])
		return kerr(k, "det needs [..., n, n] matrices, got %s", kshape(x));
	int64_t n = x->dims[r - 1];
	if ((uint64_t)n > 46340)
		return kerr(k, "matrices of size %lld are too large", (long long)n);
	struct ir_tensor *o = kout(k, 0, x->dtype, r - 2, x->dims);
	if (!o)
		return IR_ERR;
	uint64_t nb = o->numel, nn = (uint64_t)(n * n);
	double *m = malloc((nn ? nn : 1) * sizeof(double));
	if (!m)
		return kenomem(k);
	for (uint64_t b = 0; b < nb; b++) {
		for (uint64_t i = 0; i < nn; i++)
			m[i] = kld(x->dtype, kdata(x), b * nn + i);
		/* LU with partial pivoting: det = sign * prod(diagonal) */
		double det = 1;
		for (int64_t c = 0; c < n && det != 0; c++) {
			int64_t piv = c;
			for (int64_t i = c + 1; i < n; i++)
				if (fabs(m[i * n + c]) > fabs(m[piv * n + c]))
					piv = i;
			if (m[piv * n + c] == 0) {
				det = 0;
				break;
			}
			if (piv != c) {
				for (int64_t j = 0; j < n; j++) {
					double t = m[c * n + j];
					m[c * n + j] = m[piv * n + j];
					m[piv * n + j] = t;
				}
				det = -det;
			}
			double d = m[c * n + c];
			det *= d;
			for (int64_t i = c + 1; i < n; i++) {
				double f = m[i * n + c] / d;
				for (int64_t j = c + 1; j < n; j++)
					m[i * n + j] -= f * m[c * n + j];
			}
		}
		kst(x->dtype, kwdata(o), b, det);
	}
	free(m);
	return 0;
}

const struct cpu_kernel cpu_kernels_gemm[] = {
	{ IR_OP_Gemm, k_gemm, NULL },
	{ IR_OP_MatMul, k_matmul, NULL },
	{ IR_OP_MatMulInteger, k_matmulinteger, NULL },
	{ IR_OP_QLinearMatMul, k_qlinearmatmul, NULL },
	{ IR_OP_Einsum, k_einsum, NULL },
	{ IR_OP_Det, k_det, NULL },
	{ -1, NULL, NULL },
};
