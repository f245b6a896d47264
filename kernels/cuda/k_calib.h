/*
 * k_calib.h - launchers of the calibration statistics (k_calib.cu), called
 * by cuda_calib_observe (k_calib.c). Plain C types only.
 *
 * x is one tensor of n elements of ONNX type xdt (float, float16 or
 * bfloat16), read as float (float16 and bfloat16 convert exactly). A value
 * is finite when its exponent bits are not all ones; non-finite values are
 * counted and left out of everything else, as ir_calib_observe does.
 * Every launcher returns the cudaError_t of its launches (cudaSuccess when
 * there was nothing to do).
 */
#ifndef OGSH_KERNELS_CUDA_K_CALIB_H
#define OGSH_KERNELS_CUDA_K_CALIB_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KC_BINS 2048          /* IR_CALIB_BINS (k_calib.c checks they are equal) */
#define KC_MAX_PARTS 2048     /* the most blocks kc_stats uses (the size of its `parts`) */

/* What pass 1 gives: the non-finite count and, over the finite elements,
 * min, max and max |x| (min = +inf, max = -inf, amax = 0 when none is). */
struct kc_summary {
	unsigned long long finite, nonfinite;
	float min, max, amax;
	float pad;
};

/* Pass 1: a two-kernel reduction; `parts` holds KC_MAX_PARTS kc_summary of
 * device memory (per-block results), `out` one kc_summary of device memory. */
cudaError_t kc_stats(const void *x, int xdt, int64_t n, struct kc_summary *parts, struct kc_summary *out,
		     cudaStream_t st);

/* Pass 2: adds to bins[KC_BINS] (device memory, 64-bit counts) the
 * histogram of the finite |x|: bin k = (uint32_t)(|x| * scale) in float
 * arithmetic (one IEEE multiply, round to nearest; the product truncated),
 * clamped to KC_BINS - 1: ir_calib_observe's formula, bit for bit. Each
 * block counts into a shared-memory histogram of 32-bit counts (at most
 * 2^30 elements a block), merged into bins with 64-bit atomics. */
cudaError_t kc_hist(const void *x, int xdt, int64_t n, float scale, unsigned long long *bins, cudaStream_t st);

/*
 * Per-channel sums of the finite |x|, added to sums[n_chan] (device
 * memory, doubles). Element e belongs to channel (e / inner) % n_chan: x
 * is `outer` rows of n_chan * inner elements (inner = 1: rows of n_chan
 * channels, the last axis; a channels-last [N, H, W, C] store of an
 * [N, C, H, W] value summed over W has inner = C, outer = N * H). Each
 * thread sums a column over a run of rows in double precision (every |x|
 * converted to double exactly, then added), then adds its sum to its
 * channel's with a double atomicAdd: the result is the exact sum rounded a
 * few times in double, its order not fixed.
 */
cudaError_t kc_chan_abssum(const void *x, int xdt, int64_t outer, int64_t n_chan, int64_t inner, double *sums,
			   cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
