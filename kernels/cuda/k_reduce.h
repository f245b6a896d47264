/*
 * k_reduce.h - launchers of the reduce family (k_reduce.cu): reductions,
 * softmax, normalizations, ArgMax/ArgMin, TopK and Attention, called by the
 * entries in k_reduce.c. Plain C types only.
 *
 * Element types are ONNX's numbers (RD_*). Float inputs (float32, float16,
 * bfloat16) are computed and accumulated in float and rounded once when
 * stored. Every launcher returns the cudaError_t of its last launch
 * (cudaSuccess when there was nothing to do) and sets *impl, when impl is
 * not NULL, to a short name of the kernel it chose.
 */
#ifndef OGSH_KERNELS_CUDA_K_REDUCE_H
#define OGSH_KERNELS_CUDA_K_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ONNX element types the launchers know */
enum { RD_F32 = 1, RD_U8 = 2, RD_I8 = 3, RD_I32 = 6, RD_I64 = 7, RD_BOOL = 9, RD_F16 = 10, RD_F64 = 11, RD_BF16 = 16 };

#define RD_MAX_DIMS 8   /* kept or reduced dims after merging, parameter dims */

enum rd_op { RD_SUM, RD_MEAN, RD_MAX, RD_MIN, RD_PROD, RD_L1, RD_L2, RD_LOGSUM, RD_LSE, RD_SUMSQ };

/*
 * A reduction of x: output element o (row-major over kdims) reduces the
 * nred elements at kept_offset(o) + reduced_offset(j), where the offsets are
 * the row-major indices over kdims/rdims times the input strides kstr/rstr.
 * nk or nr may be 0 (no dims: offset 0).
 */
struct rd_plan {
	int nk, nr;
	int64_t kdims[RD_MAX_DIMS], kstr[RD_MAX_DIMS];
	int64_t rdims[RD_MAX_DIMS], rstr[RD_MAX_DIMS];
	int64_t nout, nred;
};

/* Reduce* (float types: every op; int32/int64: all but RD_L2, RD_LOGSUM, RD_LSE, in 64-bit
 * wrapping arithmetic, RD_MEAN dividing as integers). y has nout elements of dtype. */
cudaError_t rd_reduce(int dtype, enum rd_op op, const struct rd_plan *p, const void *x, void *y, cudaStream_t s,
		      const char **impl);

/* Softmax / LogSoftmax over n of a [outer, n, inner] view (float types). */
cudaError_t rd_softmax(int dtype, bool logsm, int64_t outer, int64_t n, int64_t inner, const void *x, void *y,
		       cudaStream_t s, const char **impl);

/* ArgMax / ArgMin over n of [outer, n, inner] (float types, int32, int64): int64 [outer, inner]. n >= 1. */
cudaError_t rd_arg(int dtype, bool is_max, bool last, int64_t outer, int64_t n, int64_t inner, const void *x,
		   int64_t *y, cudaStream_t s, const char **impl);

/* TopK over n of [outer, n, inner]: values (dtype) and int64 indices [outer, k, inner],
 * sorted best first, ties by lower index. k <= 256, n < 2^31. */
cudaError_t rd_topk(int dtype, bool largest, int64_t outer, int64_t n, int64_t inner, int64_t k, const void *x,
		    void *vals, int64_t *idx, cudaStream_t s, const char **impl);

/*
 * A per-column parameter of LayerNormalization/RMSNormalization: element
 * for column c (row-major index over the normalized dims) is at c when nd is
 * 0, else at the index decoded over dims[nd] times str[nd]. p NULL: absent.
 */
struct rd_param {
	const void *p;
	int dtype;
	int nd;
	int64_t dims[RD_MAX_DIMS], str[RD_MAX_DIMS];
};

/* LayerNormalization (rms false) / RMSNormalization over rows x cols; mean and
 * inv (per row, of stat_dtype, may be NULL) are LayerNormalization's extra outputs. */
cudaError_t rd_rownorm(int dtype, bool rms, int64_t rows, int64_t cols, float eps, const void *x, void *y,
		       const struct rd_param *scale, const struct rd_param *bias, void *mean, void *inv,
		       int stat_dtype, cudaStream_t s, const char **impl);

/* GroupNormalization / InstanceNormalization on [N, C, S]: scale and bias
 * per channel, or per group when per_group. */
cudaError_t rd_groupnorm(int dtype, int64_t N, int64_t C, int64_t S, int64_t groups, bool per_group, float eps,
			 const void *x, void *y, const void *scale, int scale_dtype, const void *bias, int bias_dtype,
			 cudaStream_t s, const char **impl);

/* BatchNormalization in inference mode on [N, C, S]. */
cudaError_t rd_batchnorm(int dtype, int64_t N, int64_t C, int64_t S, float eps, const void *x, void *y,
			 const void *scale, int scale_dtype, const void *bias, int bias_dtype, const void *mean,
			 int mean_dtype, const void *var, int var_dtype, cudaStream_t s, const char **impl);

/* LpNormalization (p 1 or 2) over n of [outer, n, inner]. */
cudaError_t rd_lpnorm(int dtype, int p, int64_t outer, int64_t n, int64_t inner, const void *x, void *y,
		      cudaStream_t s, const char **impl);

/*
 * MeanVarianceNormalization: statistics of each output of plan p (over its
 * reduced elements) into ws (2 * p->nout floats), then every element of x
 * (row-major over xdims[rank]) uses the statistics at the index given by
 * sstr (0 on the reduced dims).
 */
cudaError_t rd_mvn(int dtype, const struct rd_plan *p, int rank, const int64_t *xdims, const int64_t *sstr,
		   const void *x, void *y, float *ws, cudaStream_t s, const char **impl);

/*
 * Attention (opset 23), first output only. Element (b, h, s, d) of q, k, v
 * and y is at b*sb + h*sh + s*ss + d. K and V have Hkv heads (query head h
 * reads kv head h / (Hq / Hkv)) and T positions. The mask (NULL: none) is
 * bool (true keeps) or float (added), element (b, h, i, j) at
 * b*mstr[0] + h*mstr[1] + i*mstr[2] + j*mstr[3] for j < mcols, masked
 * beyond. causal masks j > i. D, Dv <= 256.
 */
struct rd_attn {
	int64_t B, Hq, Hkv, Lq, T, D, Dv;
	int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, y_sb, y_sh, y_ss;
	float scale;
	int causal;
	int nan_zero;   /* FusedAttention: softmax rows that are NaN count as zeros */
	const void *mask;
	int mask_dtype;
	int64_t mcols;
	int64_t mstr[4];
};
cudaError_t rd_attention(int dtype, const struct rd_attn *a, const void *q, const void *k, const void *v, void *y,
			 cudaStream_t s, const char **impl);
/* a's mask (mask, mask_dtype, mstr, mcols) as an additive bias of dtype (RD_F16 or RD_BF16) in dst:
 * [Bm, Hm, Lq, T] with rows Tp elements apart; bool masks give 0 and -inf, keys past the mask's
 * columns -inf, finite values below the type's range its lowest finite value. */
cudaError_t rd_attn_bias(int dtype, const struct rd_attn *a, int64_t Bm, int64_t Hm, int64_t Tp, void *dst,
			 cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
