/*
 * qfuse.h - the GPU planner's quantized islands (DESIGN.md "Precision and
 * quantization"): in the plan's copy of a stage, after its shapes are bound
 * and inferred, the island rewriter finds what TensorRT's explicit
 * quantization fuses and replaces each island by one node of ogsh's
 * internal ops (never seen in a stage, no CPU kernel):
 *
 *   ai.ogsh QConv   DQ(x_q) -> Conv/FusedConv(DQ(W_q)) [+bias] [+DQ(z)] [act] [-> Q]
 *                   inputs: x_q, x_scale, W_q, W_scale, bias (float or none),
 *                   z (quantized or float, or none), z_scale (when z is
 *                   quantized), y_scale (when the island ends in a Q: the
 *                   output is then quantized, else float); Conv's attributes
 *   ai.ogsh QGemm   DQ(a_q) -> Gemm/FusedGemm/MatMul(DQ(B_q)) [+bias] [act] [-> Q]
 *                   the same inputs (B [K,N], or [N,K] with transB = 1; no z)
 *   ai.ogsh MatMulW4 MatMul(a, DQ(blocked int4/uint4 B [K,N]))
 *                   inputs: a (float, float16, bfloat16), B_q, scale [K/bs,N],
 *                   zero point or none; attribute block_size
 *
 * x, z and y of a QConv may be stored channels-last like float16
 * activations. Zero points must be zero (int8, float8): an asymmetric
 * island stays as it is, with the reason kept for `plan`.
 *
 * The device says whether it runs a candidate (`supports`); a refused
 * candidate is undone and its reason kept, so that its Q/DQ nodes run as
 * they are (correct, not fused).
 */
#ifndef OGSH_EXEC_QFUSE_H
#define OGSH_EXEC_QFUSE_H

#include "ir/ir.h"

#include <stdbool.h>

/* One fused island (`plan` prints them) or one Q/DQ left as it is. */
struct exec_qfuse_item {
	int node_id;            /* fused: the new node's id in the plan's graph; left: the Q/DQ's id */
	int orig_id;            /* fused: the Conv/Gemm/MatMul it was made from */
	char precision[8];      /* "int8", "fp8", "int4" */
	char *absorbed;         /* fused: names (or n<id>) of the nodes it took in, ", "-separated */
	char why[200];          /* left: why it was not fused */
	double flops;           /* fused: the original node's FLOPs (cost model), 0 when unknown */
};

struct exec_qfuse_result {
	struct exec_qfuse_item *fused;
	int n_fused;
	struct exec_qfuse_item *left;   /* Q/DQ of activations not absorbed */
	int n_left;
	int n_commuted;                 /* Q -> DQ -> Relu/Clip -> Q (one scale) made Relu/Clip -> Q */
};

/* Whether the device runs the candidate node `n` (in m's graph, inputs
 * typed); false with a reason. */
typedef bool (*exec_qfuse_supports_fn)(void *arg, const struct ir_model *m, const struct ir_node *n, char *why,
				       size_t size);

/* Rewrites m's main graph in place (m is the planner's copy with every
 * shape inferred). 0, or IR_ENOMEM/IR_ERR. */
int exec_qfuse(struct ir_model *m, exec_qfuse_supports_fn supports, void *arg, struct exec_qfuse_result *r,
	       struct ir_diag *d);
void exec_qfuse_result_free(struct exec_qfuse_result *r);
/* The island made from node id `orig` (or that became `node_id`), or NULL. */
const struct exec_qfuse_item *exec_qfuse_find(const struct exec_qfuse_result *r, int node_id);

#endif
