/*
 * k_tensor.h - launchers of the tensor (data-movement) family, in
 * k_tensor.cu; the entries that read the nodes are in k_tensor.c.
 *
 * Plain C types only (usable from C and C++). Every launcher enqueues on
 * `st` and launches nothing for empty tensors; the caller checks the launch
 * with cuda_check_launch. Shapes are row-major (dims[0] outermost), element
 * counts and offsets in elements unless a name says bytes.
 */
#ifndef OGSH_KERNELS_CUDA_K_TENSOR_H
#define OGSH_KERNELS_CUDA_K_TENSOR_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KT_MAX_DIMS 16   /* dims of a strided view (after merging) */
#define KT_MAX_RANK 8    /* rank of the per-element index ops */
#define KT_ROWS_BATCH 16 /* jobs per launch of kt_copy_rows */

/* Element kinds of the ops that compute. */
enum kt_kind { KT_F32, KT_F16, KT_BF16, KT_I32, KT_I64 };

/*
 * A strided view: y (contiguous, dims) gets y[idx] = x[base + sum idx[j] * str[j]]
 * (strides may be 0 or negative). esz is 1, 2, 4 or 8; the launcher copies
 * wider units when the inner dim is contiguous and aligned.
 */
struct kt_strided {
	int rank;
	int64_t dims[KT_MAX_DIMS];
	int64_t str[KT_MAX_DIMS];
	int64_t base;
};
void kt_strided_copy(const struct kt_strided *s, int esz, const void *x, void *y, cudaStream_t st);

/*
 * A batched 2-D transpose by shared-memory tiles: for every batch index b
 * (dims bdims, source strides bsrc, destination strides bdst), q in [0, dq),
 * l in [0, dl): y[bo + q * oq + l] = x[bi + q + l * sl].
 */
struct kt_tiled {
	int nb;
	int64_t bdims[KT_MAX_DIMS];
	int64_t bsrc[KT_MAX_DIMS];
	int64_t bdst[KT_MAX_DIMS];
	int64_t dq, dl, sl, oq;
};
void kt_transpose_tiled(const struct kt_tiled *t, int esz, const void *x, void *y, cudaStream_t st);

/* Copies `rows` rows of `width` bytes from src (row pitch spitch bytes) to
 * dst (pitch dpitch) for each job: Concat and Split. */
struct kt_rows_job {
	const void *src;
	void *dst;
	int64_t width, spitch, dpitch;
};
void kt_copy_rows(const struct kt_rows_job *jobs, int n, int64_t rows, cudaStream_t st);

/* Gather: x [outer, dim, inner_bytes] -> y [outer, nidx, inner_bytes]
 * with idx (int32, or int64 when idx64) of nidx values; negative indices
 * count from the end, out-of-range ones give zeros. */
void kt_gather(const void *x, const void *idx, int idx64, void *y, int64_t outer, int64_t dim, int64_t nidx,
	       int64_t inner_bytes, cudaStream_t st);

/* GatherElements / ScatterElements: dims are the indices' dims, xstr the
 * strides of the data (output for scatter), axdim the data's dim on axis. */
struct kt_elems {
	int rank, axis;
	int64_t dims[KT_MAX_RANK];
	int64_t xstr[KT_MAX_RANK];
	int64_t axdim;
};
/* y[i] = x[off(i)] (0 for an out-of-range index). */
void kt_gather_elements(const struct kt_elems *e, int esz, const void *x, const void *idx, int idx64, void *y,
			cudaStream_t st);
/* y[off(i)] = up[i] (skipped for an out-of-range index). */
void kt_scatter_elements(const struct kt_elems *e, int esz, const void *up, const void *idx, int idx64, void *y,
			 cudaStream_t st);

/*
 * GatherND / ScatterND: tuple t in [0, nb * per) of m indices selects the
 * block of block_bytes at (t / per) * bstride + sum v_j * str[j] (bytes;
 * v_j made non-negative against dims[j]).
 */
struct kt_nd {
	int m;
	int64_t dims[KT_MAX_RANK];
	int64_t str[KT_MAX_RANK];
	int64_t nb, per, bstride, block_bytes;
};
/* y[t] = block of x (zeros for an out-of-range tuple). */
void kt_gather_nd(const struct kt_nd *g, const void *x, const void *idx, int idx64, void *y, cudaStream_t st);
/* block of y = up[t] (skipped for an out-of-range tuple); y already holds the data. */
void kt_scatter_nd(const struct kt_nd *g, const void *up, const void *idx, int idx64, void *y, cudaStream_t st);

/* Pad: modes 0 constant, 1 reflect, 2 edge, 3 wrap; fill holds the constant's bytes. */
struct kt_pad {
	int rank, mode;
	int64_t odims[KT_MAX_RANK];
	int64_t idims[KT_MAX_RANK];
	int64_t pb[KT_MAX_RANK];
	uint64_t fill;
};
void kt_pad(const struct kt_pad *p, int esz, const void *x, void *y, cudaStream_t st);

/*
 * Resize by tables: output index q on dim d reads input i0[tab[d] + q]
 * (nearest), or i0 and i1 with weights 1-w and w (linear, at most 3 dims
 * with tables); tab[d] < 0: the dim is copied as is. istr: input strides.
 */
#define KT_RESIZE_LINEAR_DIMS 3
struct kt_resize {
	int rank;
	int64_t odims[KT_MAX_RANK];
	int64_t istr[KT_MAX_RANK];
	int64_t tab[KT_MAX_RANK];
	const int64_t *i0, *i1;   /* device */
	const float *w;           /* device */
};
void kt_resize_nearest(const struct kt_resize *r, int esz, const void *x, void *y, cudaStream_t st);
void kt_resize_linear(const struct kt_resize *r, enum kt_kind kind, const void *x, void *y, cudaStream_t st);

/* Fills n elements of esz bytes with the value at `value` (host). */
void kt_fill(void *y, int64_t n, int esz, const void *value, cudaStream_t st);

/* Range: y[i] for i < n from the device scalars start and delta (ONNX/numpy
 * rounding for floats: start + i * ((start + delta) - start)). */
void kt_range(enum kt_kind kind, const void *start, const void *delta, void *y, int64_t n, cudaStream_t st);

/* Trilu over batch matrices of R x C: keeps j - i >= k (upper) or <= k. */
void kt_trilu(const void *x, void *y, int esz, int64_t batch, int64_t R, int64_t C, int64_t k, int upper,
	      cudaStream_t st);

/* CumSum of x [outer, dim, inner] along dim. */
void kt_cumsum(enum kt_kind kind, const void *x, void *y, int64_t outer, int64_t dim, int64_t inner, int exclusive,
	       int reverse, cudaStream_t st);

/* OneHot: y [outer, depth, inner] of esz bytes from indices [outer, inner]
 * of kind KT_I32, KT_I64 or KT_F32 and values = {off, on} on the device. */
void kt_onehot(const void *idx, enum kt_kind idx_kind, const void *values, void *y, int esz, int64_t outer,
	       int64_t depth, int64_t inner, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
