/*
 * k_cdg.h - a cuDNN operation graph built with the backend descriptors:
 * tensors, pointwise/reduction/matmul operations, the heuristics' engine
 * configs, an execution plan and its variant pack. Shared by the attention
 * (k_sdpa.c) and the GEMM with an epilogue cuBLASLt lacks (k_gemm.c). C only.
 *
 * Use: cdg_new; make the tensors and operations in the order they run
 * (each operation is appended to the graph); cdg_heuristics; cdg_plan of
 * one config (or cdg_plan_first); then cdg_run as often as needed. Every
 * call returns 0 or IR_ERR with the reason in d (an operation or tensor
 * function returns NULL instead). cdg_free destroys everything.
 */
#ifndef OGSH_KERNELS_CUDA_K_CDG_H
#define OGSH_KERNELS_CUDA_K_CDG_H

#include "kernels/cuda/cudnn_api.h"

#include <stdbool.h>
#include <stdint.h>

#define CDG_MAX_DESC 64
#define CDG_MAX_OPS 24
#define CDG_MAX_CFG 16
#define CDG_MAX_UID 12
#define CDG_UID_VIRT 100   /* virtual tensors are numbered from here */

struct cdg {
	const struct cudnn_api *api;
	const char *who;   /* "cuDNN attention": the start of its messages */
	cudnnBackendDescriptor_t all[CDG_MAX_DESC];   /* every descriptor made, destroyed by cdg_free */
	int n_all;
	cudnnBackendDescriptor_t ops[CDG_MAX_OPS];
	int n_ops;
	cudnnBackendDescriptor_t graph, heur, plan, vpack, cfg[CDG_MAX_CFG];
	int n_cfg;         /* configs the heuristics gave */
	int cfg_i;         /* the planned one, -1 before */
	int engine;        /* its engine's global index, -1 unknown */
	int64_t ws, next_uid;
	/* what the variant pack points at */
	int n_uid;
	int64_t uids[CDG_MAX_UID];
	void *ptrs[CDG_MAX_UID];
	void *vws;
};

struct cdg *cdg_new(const struct cudnn_api *api, const char *who, struct ir_diag *d);
void cdg_free(struct cdg *g);

/* A tensor of nd (<= 8) dims; uid 0 gives the next virtual uid. by_value: a host scalar. */
cudnnBackendDescriptor_t cdg_tensor(struct cdg *g, int64_t uid, cudnnDataType_t ty, int nd, const int64_t *dims,
				    const int64_t *strides, bool virt, bool by_value, struct ir_diag *d);
/* A packed virtual tensor. */
cudnnBackendDescriptor_t cdg_vtensor(struct cdg *g, cudnnDataType_t ty, int nd, const int64_t *dims, struct ir_diag *d);

/* y = mode(x[, b][, t]) computed in prec; axis >= 0 for GEN_INDEX. */
int cdg_pointwise(struct cdg *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
		  cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis,
		  struct ir_diag *d);
/* y = reduce(x) in float */
int cdg_reduction(struct cdg *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
		  struct ir_diag *d);
/* c = a . b over the last two dims, accumulated in float */
int cdg_matmul(struct cdg *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
	       struct ir_diag *d);

/* The graph of the operations made so far and heuristics mode A's configs
 * (g->n_cfg of them; IR_ERR when there is none). */
int cdg_heuristics(struct cdg *g, cudnnHandle_t h, struct ir_diag *d);
/* The plan of config i, with at most ws_limit bytes of workspace. */
int cdg_plan(struct cdg *g, cudnnHandle_t h, int i, int64_t ws_limit, struct ir_diag *d);
/* The plan of the first config that finalizes. */
int cdg_plan_first(struct cdg *g, cudnnHandle_t h, int64_t ws_limit, struct ir_diag *d);
/* Runs the plan on the handle's stream (capturable) with the n tensors
 * uids[i] at ptrs[i] (a by-value tensor: a pointer to its host value). */
int cdg_run(struct cdg *g, cudnnHandle_t h, int n, const int64_t *uids, void *const *ptrs, void *ws, struct ir_diag *d);

#endif
