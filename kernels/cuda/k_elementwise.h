/*
 * k_elementwise.h - launchers of the elementwise family (k_elementwise.cu),
 * called by the entries in k_elementwise.c. Plain C types only.
 *
 * Element types are ONNX's numbers (EW_*). Every launcher returns the
 * cudaError_t of its launch (cudaSuccess when there was nothing to do);
 * the entries check it with cuda_check_launch.
 */
#ifndef OGSH_KERNELS_CUDA_K_ELEMENTWISE_H
#define OGSH_KERNELS_CUDA_K_ELEMENTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ONNX element types the launchers know */
enum {
	EW_F32 = 1, EW_U8 = 2, EW_I8 = 3, EW_I32 = 6, EW_I64 = 7, EW_BOOL = 9,
	EW_F16 = 10, EW_F64 = 11, EW_BF16 = 16,
};

#define EW_MAX_RANK 8   /* dims after merging */
#define EW_MAX_ARGS 8   /* broadcast operands of one launch */

/*
 * The output shape and each operand's strides over it (0 on broadcast
 * dims), after dropping dims of 1 and merging dims that every operand
 * walks contiguously. `flat` is set when every operand is either the
 * whole output (strides contiguous) or a single element: then `scalar`
 * says which operands are one element and no index math is needed.
 */
struct ew_shape {
	int rank;                               /* >= 1 */
	int nargs;
	bool flat;
	bool scalar[EW_MAX_ARGS];
	int64_t n;                              /* elements of the output */
	int64_t dims[EW_MAX_RANK];
	int64_t st[EW_MAX_ARGS][EW_MAX_RANK];
};

/* ---- unary ops on float32/float16/bfloat16 (computed in float) ---- */
enum ew_uop {
	EU_RELU, EU_LEAKY, EU_SIGMOID, EU_HSIGMOID, EU_HSWISH, EU_TANH, EU_EXP, EU_LOG,
	EU_SQRT, EU_RECIP, EU_NEG, EU_ABS, EU_ERF, EU_GELU, EU_GELU_TANH, EU_ELU, EU_SELU,
	EU_CELU, EU_SOFTPLUS, EU_SOFTSIGN, EU_MISH, EU_SIN, EU_COS, EU_TAN, EU_ASIN, EU_ACOS,
	EU_ATAN, EU_SINH, EU_COSH, EU_ASINH, EU_ACOSH, EU_ATANH, EU_FLOOR, EU_CEIL, EU_ROUND,
	EU_SIGN, EU_SWISH, EU_THRELU, EU_SHRINK, EU_POWC, EU_IDENT,
	EU_COUNT
};
/* y = op(x) over n elements of dtype (EW_F32, EW_F16, EW_BF16); a, b, c are
 * the op's parameters (alpha, beta, gamma; POWC: a is the exponent). */
cudaError_t ew_unary(int op, int dtype, const void *x, void *y, int64_t n, float a, float b, float c,
		     cudaStream_t s);
/* Neg, Abs, Sign, Relu on EW_I32 / EW_I64 (only those ops). */
cudaError_t ew_unary_int(int op, int dtype, const void *x, void *y, int64_t n, cudaStream_t s);
/* bool y = isnan(x) (nan) or isinf(x) with the sign filter; float types. */
cudaError_t ew_isspecial(int dtype, bool nan, bool pos, bool neg, const void *x, void *y, int64_t n,
			 cudaStream_t s);
/* bool y = !x */
cudaError_t ew_not(const void *x, void *y, int64_t n, cudaStream_t s);
/* Clip: y = min(max(x, lo), hi), bounds from device scalars (lo_p, hi_p, of
 * x's dtype) when not NULL, else from lo/hi when has_lo/has_hi. Float types,
 * EW_I32, EW_I64. */
cudaError_t ew_clip(int dtype, const void *x, void *y, int64_t n, const void *lo_p, const void *hi_p,
		    bool has_lo, double lo, bool has_hi, double hi, cudaStream_t s);
/* Fills n elements of elem_size bytes (1, 2, 4, 8) with the bits `v`. */
cudaError_t ew_fill(void *y, int elem_size, uint64_t v, int64_t n, cudaStream_t s);

/* ---- binary ops with broadcasting (shape: 2 operands) ---- */
enum ew_bop {
	/* same type out */
	EB_ADD, EB_SUB, EB_MUL, EB_DIV, EB_POW, EB_MOD, EB_FMOD, EB_MAX, EB_MIN, EB_PRELU,
	EB_SHL, EB_SHR, EB_BAND, EB_BOR, EB_BXOR,
	/* bool out */
	EB_AND, EB_OR, EB_XOR, EB_EQ, EB_LT, EB_LE, EB_GT, EB_GE,
	EB_COUNT
};
/* y = op(a, b). Arithmetic ops: float types, EW_I32, EW_I64 (bit ops:
 * integers only). Bool-out ops: also EW_BOOL and EW_U8. */
cudaError_t ew_binary(int op, int dtype, const void *a, const void *b, void *y, const struct ew_shape *sh,
		      cudaStream_t s);

/* ---- Sum, Mean, Max, Min over up to EW_MAX_ARGS operands (shape: nargs) ----
 * op is EB_ADD, EB_MAX or EB_MIN; the result is divided by `div` (Mean's
 * count; 1 for the others). Float types, EW_I32, EW_I64. */
cudaError_t ew_variadic(int op, int dtype, const void *const *x, void *y, const struct ew_shape *sh, float div,
			cudaStream_t s);

/* ---- Where: y = c ? a : b (shape: 3 operands c, a, b) by element size ---- */
cudaError_t ew_where(int elem_size, const void *c, const void *a, const void *b, void *y,
		     const struct ew_shape *sh, cudaStream_t s);

/* ---- Cast between EW_F32, EW_F16, EW_BF16, EW_F64, EW_I8, EW_U8, EW_I32,
 * EW_I64, EW_BOOL ---- */
cudaError_t ew_cast(int from, int to, const void *x, void *y, int64_t n, cudaStream_t s);

/* ---- Pointwise: a register program evaluated per element ---- */
enum ew_pop {
	EP_IN, EP_LIT,
	EP_NEG, EP_ABS, EP_EXP, EP_LOG, EP_SQRT, EP_SIGMOID, EP_TANH, EP_RELU, EP_ERF,
	EP_ADD, EP_SUB, EP_MUL, EP_DIV, EP_POW, EP_MAX, EP_MIN,
};
#define EW_PW_MAX_CODE 160
#define EW_PW_MAX_REGS 32
#define EW_PW_MAX_IN 16
/* one instruction: r[dst] = op(r[a], r[b]); EP_IN: r[dst] = input a;
 * EP_LIT: r[dst] = lit */
struct ew_pins {
	uint8_t op, dst, a, b;
	float lit;
};
struct ew_prog {
	int n_code, n_in;
	int out_dtype;                          /* EW_F32, EW_F16, EW_BF16 */
	int rank;
	int64_t n;
	int64_t dims[EW_MAX_RANK];
	int8_t in_dtype[EW_PW_MAX_IN];
	int8_t in_kind[EW_PW_MAX_IN];           /* 0: whole output, 1: one element, 2: broadcast */
	int64_t st[EW_PW_MAX_IN][EW_MAX_RANK];  /* kind 2 */
	struct ew_pins code[EW_PW_MAX_CODE];
};
cudaError_t ew_pointwise(const struct ew_prog *p, const void *const *x, void *y, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
