/*
 * k_sdpa.h - attention through cuDNN's fused flash-attention engines: the
 * graph API's scaled-dot-product pattern (Q.K^T, scale, an optional additive
 * bias, an optional causal limit, softmax, .V) built with the backend
 * descriptors, for float16 and bfloat16. C only.
 */
#ifndef OGSH_KERNELS_CUDA_K_SDPA_H
#define OGSH_KERNELS_CUDA_K_SDPA_H

#include "kernels/cuda/k_reduce.h"

#include <stdbool.h>
#include <stdint.h>

struct cudnn_api;
struct ir_diag;
struct sdpa;

/* The bias the graph adds to the scaled scores: dims [b, h, Lq, T] with b
 * in {1, B} and h in {1, Hq}, strides in elements, of the attention's type. */
struct sdpa_bias {
	int64_t dims[4], strides[4];
};

/*
 * Builds and plans the graph for a (shapes, strides, scale, causal) of
 * dtype IR_FLOAT16 or IR_BFLOAT16 on handle h (a cudnnHandle_t), with bias
 * when non-NULL. NULL with the reason in d when cuDNN has no engine for it.
 */
struct sdpa *sdpa_new(const struct cudnn_api *api, void *h, int dtype, const struct rd_attn *a,
		      const struct sdpa_bias *bias, struct ir_diag *d);
/* The device workspace sdpa_run needs, in bytes. */
int64_t sdpa_ws(const struct sdpa *s);
/* The engine the plan uses (its global index), for `profile`. */
int sdpa_engine(const struct sdpa *s);
/* Launches on the handle's stream (capturable). */
int sdpa_run(struct sdpa *s, void *h, const void *q, const void *k, const void *v, const void *bias, void *y, void *ws,
	     struct ir_diag *d);
void sdpa_free(struct sdpa *s);

#endif
