/*
 * cpu.h - private to kernels/cpu/: what every CPU kernel uses (inputs,
 * outputs, attributes, element access in any dtype, broadcasting, axes) and
 * the kernel lists of the op families.
 *
 * To add a kernel: write `static int k_myop(struct cpu_kctx *k)` in the
 * family file it belongs to and add `{ IR_OP_MyOp, k_myop }` to that file's
 * list (cpu_kernels_<family>[], ended by { -1 }); registry.c reads the lists.
 */
#ifndef OGSH_KERNELS_CPU_H
#define OGSH_KERNELS_CPU_H

#include "kernels/kernels.h"
#include "kernels/cpu/pool.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct cpu_kernel {
	int op;                 /* enum ir_op; -1 ends a list */
	cpu_kernel_fn run;
	/* optional: false (with a reason) for nodes this kernel cannot run */
	bool (*supports)(const struct ir_node *n, char *why, size_t size);
};

/* the family lists (one per file) */
extern const struct cpu_kernel cpu_kernels_elementwise[];
extern const struct cpu_kernel cpu_kernels_cast[];
extern const struct cpu_kernel cpu_kernels_tensor[];
extern const struct cpu_kernel cpu_kernels_index[];
extern const struct cpu_kernel cpu_kernels_reduce[];
extern const struct cpu_kernel cpu_kernels_norm[];
extern const struct cpu_kernel cpu_kernels_gemm[];
extern const struct cpu_kernel cpu_kernels_conv[];
extern const struct cpu_kernel cpu_kernels_pool[];
extern const struct cpu_kernel cpu_kernels_quant[];
extern const struct cpu_kernel cpu_kernels_image[];
extern const struct cpu_kernel cpu_kernels_signal[];
extern const struct cpu_kernel cpu_kernels_rnn[];
extern const struct cpu_kernel cpu_kernels_attention[];
extern const struct cpu_kernel cpu_kernels_sequence[];
extern const struct cpu_kernel cpu_kernels_control[];
extern const struct cpu_kernel cpu_kernels_string[];
extern const struct cpu_kernel cpu_kernels_ml[];
extern const struct cpu_kernel cpu_kernels_fused[];

/* --- errors --- */

/* Records an error for the running node and returns IR_ERR. */
int kerr(struct cpu_kctx *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* IR_EINTR (with a message) when the user pressed Ctrl-C, else 0. */
int kstop(struct cpu_kctx *k);

/* --- threads (see pool.h: split by output elements only) --- */

/*
 * Runs fn over [0, n) on the pool, in slabs of a few hundred grains run one
 * after the other with kstop between them, so Ctrl-C stops a long kernel
 * (a slab in flight completes). fn must not call kstop or kerr. 0 or
 * IR_EINTR.
 */
int kpar(struct cpu_kctx *k, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);

/* A grain for kpar: indexes of about `cost` element operations each, so
 * a range holds at least KPAR_WORK of them (a microsecond or two: a
 * BERT-base row-wise kernel of 128 rows still spreads over 16 threads,
 * and the pool hands out about four ranges a thread whatever the grain). */
#define KPAR_WORK 4096
static inline int64_t kgrain(int64_t cost)
{
	return cost >= KPAR_WORK ? 1 : KPAR_WORK / (cost > 0 ? cost : 1);
}

/* --- inputs and outputs --- */

/* Input i as a tensor; NULL when omitted (or i >= n_in) or not a tensor. */
const struct ir_tensor *kin(const struct cpu_kctx *k, int i);
/* Input i, which must be a present tensor: NULL with an error otherwise. */
const struct ir_tensor *kin_req(struct cpu_kctx *k, int i);
/* Whether input i is present (any kind). */
bool khas(const struct cpu_kctx *k, int i);
/* Whether output i is wanted (the node has a value in that slot). */
bool kwant(const struct cpu_kctx *k, int i);
/* Makes output i: a writable tensor the kernel must fill. NULL with an
 * error on overflow or no memory. Works for unwanted outputs too. */
struct ir_tensor *kout(struct cpu_kctx *k, int i, int dtype, int rank, const int64_t *dims);
/* Output i as a copy of tensor t (shared data, no copy of the bytes); also
 * with other dims of the same element count (a reshape). 0 or an error. */
int kout_share(struct cpu_kctx *k, int i, const struct ir_tensor *t, int rank, const int64_t *dims);
/* Output i as a sequence of n tensors (taking the references). */
int kout_seq(struct cpu_kctx *k, int i, int elem, struct ir_tensor **items, int n);

/* Typed data pointers (aligned for the dtype; NULL for empty/string tensors). */
static inline const void *kdata(const struct ir_tensor *t) { return t ? ir_tensor_data(t) : NULL; }
static inline void *kwdata(struct ir_tensor *t) { return t->buf ? t->buf->data : NULL; }
#define KF32(t)  ((const float *)kdata(t))
#define KF64(t)  ((const double *)kdata(t))
#define KI64(t)  ((const int64_t *)kdata(t))
#define KI32(t)  ((const int32_t *)kdata(t))

/* --- attributes (of the running node) --- */

int64_t kattr_i(const struct cpu_kctx *k, const char *name, int64_t dflt);
float kattr_f(const struct cpu_kctx *k, const char *name, float dflt);
/* A string attribute, or dflt. */
const char *kattr_s(const struct cpu_kctx *k, const char *name, const char *dflt);
/* An ints attribute: its values and count; NULL (and *n 0) when absent. */
const int64_t *kattr_ints(const struct cpu_kctx *k, const char *name, int *n);
const float *kattr_floats(const struct cpu_kctx *k, const char *name, int *n);
bool kattr_has(const struct cpu_kctx *k, const char *name);
const struct ir_attr *kattr(const struct cpu_kctx *k, const char *name);

/* --- elements in any dtype (raw ONNX layout, sub-byte types packed) --- */

/* Element i as a double (bool 0/1; complex: the real part). */
double kld(int dtype, const void *p, uint64_t i);
/* Element i of an integer/bool type exactly (uint64 past INT64_MAX wraps to
 * negative: read it back as uint64; floats are truncated toward zero and clamped). */
int64_t kldi(int dtype, const void *p, uint64_t i);
/* Stores v (rounded to nearest even for floats; integers truncate toward
 * zero and wrap like a C cast; bool is v != 0; float8 types saturate). */
void kst(int dtype, void *p, uint64_t i, double v);
/* Stores an integer exactly (wrapping to the type's width). */
void ksti(int dtype, void *p, uint64_t i, int64_t v);
/* float -> float8/float4/e8m0 bits, ONNX's rules (round to nearest even;
 * saturate: clamp finite values to the largest finite; NaN stays NaN). */
uint8_t kcvt_f32_to_small(int dtype, float v, bool saturate);

/* --- shapes --- */

/* Element count of dims (no overflow check: tensors already exist). */
uint64_t knumel(int rank, const int64_t *dims);
/* Row-major strides of dims. */
void kstrides(int rank, const int64_t *dims, int64_t *strides);
/* Normalizes a possibly negative axis for a tensor of rank `rank`
 * (allowing [-rank, rank-1]); error naming the attribute otherwise. */
int kaxis(struct cpu_kctx *k, int64_t axis, int rank, int *out);
/* Numpy broadcasting of n shapes; error naming the inputs when they do not broadcast. */
int kbcast_shape(struct cpu_kctx *k, int n, const struct ir_tensor *const *ts, int *rank, int64_t *dims);
/* Strides of t seen through dims of `rank` (0 where t broadcasts). */
void kbcast_strides(const struct ir_tensor *t, int rank, const int64_t *dims, int64_t *strides);
/* An odometer over dims: idx[] advances; offsets of up to 4 operands follow. */
struct kiter {
	int rank;
	int64_t dims[IR_MAX_RANK];
	int64_t idx[IR_MAX_RANK];
	int nops;
	int64_t strides[4][IR_MAX_RANK];
	int64_t off[4];
};
void kiter_init(struct kiter *it, int rank, const int64_t *dims);
/* Adds operand with the given strides (returns its number). */
int kiter_add(struct kiter *it, const int64_t *strides);
/* Moves to the next index (row-major); offsets follow. */
void kiter_next(struct kiter *it);
/* Moves to the row-major index `flat` (from anywhere); offsets follow. */
void kiter_seek(struct kiter *it, int64_t flat);

/* A shape as "[2,3,4]" in a static per-thread buffer (for messages). */
const char *kshape(const struct ir_tensor *t);

/* For a kernel tap at input offset off (column o reads o * stride + off), the
 * output columns [*lo, *hi) of out whose input lies in [0, in); *lo >= *hi
 * when none does. */
void ktap_range(int64_t off, int64_t in, int64_t stride, int64_t out, int64_t *lo, int64_t *hi);

/* Reads a 1-D (or scalar) integer tensor into vals (up to max); -1 with an error if not integer. */
int kread_ints(struct cpu_kctx *k, const struct ir_tensor *t, int64_t *vals, int max, const char *what);

/* Bytes per element for byte-addressable types (0 for strings and packed sub-byte types). */
int kelem_bytes(int dtype);
/*
 * Block copy along an axis: a tensor seen as [outer, src_len, inner] bytes
 * per element group; copies rows [start, start+len) of each outer block
 * to rows [dst_start, dst_start+len) of a [outer, dst_len, inner] buffer.
 */
void kcopy_rows(void *dst, int64_t dst_len, int64_t dst_start, const void *src, int64_t src_len, int64_t start,
		int64_t len, int64_t outer, size_t inner_bytes);

/* --- memory --- */

/* Sets a string element to a copy of len bytes (NUL added); false on no memory. */
bool kstr_set(struct ir_bytes *b, const char *data, size_t len);

/* IR_ENOMEM with "out of memory" recorded. */
int kenomem(struct cpu_kctx *k);
/* a * b into *out; false on overflow. */
bool kmul_ok(uint64_t a, uint64_t b, uint64_t *out);
/* malloc of n elements of `size` bytes; NULL (with an error recorded) on
 * overflow or no memory. At least one byte is allocated. */
void *kalloc_arr(struct cpu_kctx *k, uint64_t n, size_t size);
/* A tensor's elements as a new array of doubles (free it); NULL on no memory. */
double *kload_f64(const struct ir_tensor *t);

/* Rows [start, start+len) of t along `axis` as a new tensor (the axis kept
 * with length len when `keep`, else dropped; then len must be 1). Byte-sized
 * dtypes only: an error for strings and packed types. */
struct ir_tensor *ktake_rows(struct cpu_kctx *k, const struct ir_tensor *t, int axis, int64_t start, int64_t len,
			     bool keep);
/* a * b into *r for sizes: false when negative or past 2^62. */
bool kmul62(int64_t a, int64_t b, int64_t *r);
/* An ints attribute of exactly n values each in [min, 2^40] into v (dflt
 * for each when absent); an error naming the attribute otherwise. */
int kattr_ints_n(struct cpu_kctx *k, const char *name, int n, int64_t *v, int64_t dflt, int64_t min);

/* --- instruction sets (k_gemm.c) --- */

/*
 * The best instruction set the CPU kernels may use: CPU_ISA_GENERIC (0,
 * portable C), CPU_ISA_AVX2 (1, AVX2 + FMA) or CPU_ISA_AVX512 (2, AVX-512F).
 * It is what the CPU supports, capped by the environment variable
 * OGSH_CPU_ISA=generic|avx2|avx512 (read once; an unknown value is ignored),
 * so that every dispatch path can be tested on one machine.
 */
enum { CPU_ISA_GENERIC, CPU_ISA_AVX2, CPU_ISA_AVX512 };
int cpu_isa(void);

/* y[i] = op(x[i]) for n float32 values (x == y allowed), computed in
 * double with polynomials and rounded once (Gelu: in float32, within a few
 * ulp): the unary ops' vectorized paths (k_elementwise.c), on this CPU's
 * instruction set, serially. CPU_FAST_SOFTMAX: y is the softmax of the row
 * x[0..n) (float32). Gelu and softmax use FMA where the ISA has it, so
 * their bits depend on the ISA; every op's bits are the same whatever the
 * thread count. */
enum { CPU_FAST_EXP, CPU_FAST_TANH, CPU_FAST_SIGMOID, CPU_FAST_ERF, CPU_FAST_GELU, CPU_FAST_SOFTMAX };
void cpu_fast_f32(int op, const float *x, float *y, int64_t n);
/* cpu_fast_f32(CPU_FAST_GELU, r, r, cols) on each of rows rows r of c,
 * ldc floats apart (the same bits, one dispatch). */
void cpu_fast_gelu_rows(float *c, int64_t ldc, int64_t rows, int64_t cols);

/* float16 <-> float32 for n elements, the same bits as ir_f16_to_f32 and
 * ir_f32_to_f16 element by element (AVX-512's conversions where the CPU
 * has them; k_conv.c). */
void cpu_f16_to_f32(const uint16_t *h, float *f, int64_t n);
void cpu_f32_to_f16(const float *f, uint16_t *h, int64_t n);

/* --- GEMM (k_gemm.c) --- */

/* Frees the calling thread's GEMM packing buffer (a pool worker, as it exits). */
void cpu_sgemm_thread_done(void);
/* Frees this thread's im2col segment lists (k_conv.c); pool workers call
 * it as they exit. */
void cpu_conv_thread_done(void);

/* C = alpha * op(A) op(B) + beta * C, row-major float32; op transposes when
 * ta/tb. Packed panels and an AVX2/FMA or AVX-512 micro-kernel when the
 * CPU has them; split among the pool's threads by blocks of C, the same
 * bits at any thread count. */
void cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
	       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/*
 * cpu_sgemm with op(A) and/or op(B) already packed (apk / bpk from
 * cpu_sgemm_pack_a / cpu_sgemm_pack_b of the same matrix, transposes and
 * sizes; NULL: packed on the fly): the same bits as cpu_sgemm, without
 * the packing. A and B are still read where the product does not pack
 * (M <= 2), so pass them too. With beta 0, rowbias (M values, or NULL)
 * is C's start: C = rowbias[i] + alpha * op(A) op(B), the same bits as
 * filling C with it and passing beta 1, without the extra pass over C.
 * epi (NULL: none) is applied to C at the end (struct cpu_epi).
 */
void cpu_sgemm_pre(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
		   const float *apk, const float *B, int64_t ldb, const float *bpk, float beta, const float *rowbias,
		   float *C, int64_t ldc, const struct cpu_epi *epi);
/*
 * A fused epilogue (FusedConv's residual and activation, handed to its
 * Conv through cpu_kctx.epi): what a product does to each element of C
 * once the element is complete, while its tile is still in cache: v += Z
 * at the same place (z NULL: no residual), then the activation:
 * CPU_EPI_RELU v < 0 ? 0 : v, CPU_EPI_CLIP v < lo ? lo : v > hi ? hi : v
 * (NaN stays NaN), CPU_EPI_GELU GELU's erf form by cpu_fast_f32's
 * CPU_FAST_GELU (FusedGemm's only: the products apply it to each finished
 * block of C of a task, mc x nc, while it is in L2; the convolutions do
 * not know it). The same bits as k_fused.c's separate pass. For the
 * products (cpu_sgemm_pre / _src), z is laid out as C (row stride ldc)
 * and points at C's first element's residual. The kernel that applied it
 * sets `done`; when it does not, the caller applies it.
 */
enum { CPU_EPI_NONE, CPU_EPI_RELU, CPU_EPI_CLIP, CPU_EPI_GELU };
struct cpu_epi {
	const float *z;
	int act;
	float lo, hi;
	const struct ir_tensor *zt;   /* for the kernel: Z's tensor, to check against its output */
	bool done;
};
/* Applies e to rows x cols elements at c (rows ldc apart); Z's element for
 * c[i * ldc + j] is e->z[off + i * ldc + j]. */
void cpu_epi_apply(const struct cpu_epi *e, float *c, int64_t off, int64_t ldc, int64_t rows, int64_t cols);
/* The floats of op(A) (mn = M) or op(B) (b_side, mn = N) packed for
 * cpu_sgemm_pre on this CPU's instruction set (0 when empty). */
size_t cpu_sgemm_pack_floats(bool b_side, int64_t mn, int64_t K);
/* Packs op(A) (M x K) / op(B) (K x N) into dst (cpu_sgemm_pack_floats
 * floats, 64-byte aligned). */
void cpu_sgemm_pack_a(bool ta, int64_t M, int64_t K, const float *A, int64_t lda, float *dst);
void cpu_sgemm_pack_b(bool tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *dst);
/*
 * A producer of op(B) for cpu_sgemm_src, in place of a B matrix (a
 * convolution's im2col, made straight into the panels): fills bp with rows
 * [p0, p0 + kc) and columns [j0, j0 + nc) of op(B) as panels of nr
 * columns, k-major (element (p, j) at ((j - j0) / nr) * kc * nr +
 * (p - p0) * nr + (j - j0) % nr), zero past column j0 + nc in the last
 * panel. Called from the pool's threads, several at once.
 */
typedef void (*cpu_bpack_fn)(const void *ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *bp, int nr);
/* C += alpha * A op(B) (A row-major M x K, or apk: A packed beforehand)
 * with op(B) (K x N) produced by bsrc, always through the packed path
 * (also for M <= 2); with init, C = rowbias[i] (0 when NULL) + alpha * A
 * op(B), C unread; then epi, if any. False on no memory (C then partly
 * updated). */
bool cpu_sgemm_src(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *apk,
		   cpu_bpack_fn bsrc, const void *bctx, bool init, const float *rowbias, float *C, int64_t ldc,
		   const struct cpu_epi *epi);

/*
 * The packed forms of constant weights (wcache.c), kept across runs:
 * input `in` of the running node, when it is an initializer, with `tag`
 * naming the packing (the caller's kind of use and layout). On a miss
 * make(arg) builds it: nfloats floats in a malloc'd block the cache
 * takes. The cache holds a reference to the weight tensor, so its address
 * is not reused while the entry lives; entries whose tensor nothing else
 * holds any more (its model was freed) are dropped on the next miss, and
 * past CPU_WCACHE_MAX bytes nothing more is kept. NULL (pack on the fly) for
 * inputs that are not initializers, past the cap, or on no memory.
 */
#define CPU_WCACHE_MAX ((size_t)1 << 30)
typedef float *(*cpu_wcache_make)(const void *arg);
const float *cpu_wcache_get(struct cpu_kctx *k, int in, uint32_t tag, size_t nfloats, cpu_wcache_make make,
			   const void *arg);
/* cpu_wcache_clear() (every entry dropped) is declared in kernels.h. */
#endif
