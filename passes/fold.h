/*
 * fold.h - private to passes/: folding per-channel affine maps into Conv,
 * ConvTranspose and Gemm weights (fold.c), for fuse-conv-bn and
 * fuse-conv-add.
 */
#ifndef OGSH_PASSES_FOLD_H
#define OGSH_PASSES_FOLD_H

#include "passes/pass.h"

/* Where the output channels are in the weights of a Conv, ConvTranspose or Gemm. */
enum { L_CONV, L_CONVT, L_GEMM };
struct layout {
	int kind;
	int64_t channels;     /* output channels (Gemm: output features N) */
	int64_t inner;        /* Conv: elements per output channel; ConvTranspose: per (C_in, C_out/group) pair */
	int64_t per_group;    /* ConvTranspose: output channels per group; input channels per group in cin_g */
	int64_t cin_g;
	int64_t rows, cols;   /* Gemm: B's shape */
	bool trans_b;
};

/* Element types the fold computes in (double) and rounds back to. */
bool fold_dtype_ok(int dtype);

/* Fills L for node p with weights w. Returns NULL, or why the channels
 * cannot be told (written into why). */
const char *fold_weight_layout(const struct ir_node *p, const struct ir_tensor *w, struct layout *L,
			       char *why, size_t size);

/* The output channel that element i of the weights feeds. */
int64_t fold_channel_of(const struct layout *L, uint64_t i);

/* An attribute float set on n (replacing any). */
int fold_set_attr_float(struct ir_node *n, const char *name, float f, struct ir_diag *d);

/* Base name for a new initializer: old name + suffix. */
void fold_base_name(char *buf, size_t size, const char *old, const char *suffix);

/*
 * Makes node p compute y' = y * mul[c] + add[c] per output channel c by
 * giving it new weights (input 1) and bias (input 2) as new initializers;
 * tensors are shared between stages, so none is changed in place. The
 * weights stay as they are when every mul is 1, and no bias is added when
 * there is none and every add is 0. bias_t is the current bias tensor (NULL:
 * none). Old weights and bias go when nothing reads them any more. Returns
 * 0 or an error code.
 */
int fold_affine(struct pass_ctx *c, struct ir_node *p, const struct layout *L, const struct ir_tensor *w,
		const struct ir_tensor *bias_t, const double *mul, const double *add, const char *suffix);

/* The constant bias of p (input 2; NULL when it has none) into *bias and
 * the layout of its weights w into L, checked: NULL, or why not (written
 * into why; pn names p in the message). */
const char *fold_bias_layout(const struct ir_node *p, const struct ir_tensor *w, const char *pn,
			     const struct ir_tensor **bias, struct layout *L, char *why, size_t size);
#endif
