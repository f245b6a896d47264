/*
 * k_sdpa.c - attention through cuDNN's fused flash-attention engines (see
 * k_sdpa.h). cuDNN has no single "attention" operation in its backend API:
 * its engines recognise a graph of elementary operations and run it as one
 * kernel. The graph built here, with every intermediate virtual (in no
 * buffer) and computed in float:
 *
 *   S  = Q . K^T            matmul; K is given as K^T by swapping its last
 *                           two dims and strides, no copy
 *   S  = S * scale          pointwise MUL by a scalar passed by value
 *   S  = S + bias           pointwise ADD (optional; bias [b|1, h|1, Lq, T])
 *   S  = row >= col ? S : -inf
 *                           causal (optional): GEN_INDEX along the query and
 *                           key axes, CMP_GE, BINARY_SELECT
 *   M  = max over keys      reduction MAX to [B, H, Lq, 1]
 *   E  = exp(S - M)         pointwise SUB, EXP
 *   L  = sum over keys      reduction ADD
 *   max + log(L)            pointwise LOG, ADD: the softmax statistics, which
 *                           nothing reads, but without them cuDNN's
 *                           heuristics match no engine (cuDNN 9.19)
 *   P  = E / L              pointwise DIV, in the inputs' type (the second
 *                           matmul's A must be)
 *   O  = P . V              matmul into Y (any strides)
 *
 * Tensors are [batch, heads, rows, cols] with strides in elements, so the
 * packed BS3HD projection and the BSHD output are read and written in place.
 * The plan is the heuristics' first engine config that finalizes. A row
 * whose every key is masked (-inf) comes out as zeros.
 */
#include "kernels/cuda/k_sdpa.h"
#include "kernels/cuda/k_cdg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SD_WS_LIMIT ((int64_t)256 << 20)

enum { U_Q = 1, U_K, U_V, U_O, U_BIAS, U_SCALE, U_NEGINF };

struct sdpa {
	struct cdg *g;
	bool bias, causal;
	float scale, neginf;   /* the by-value scalars: the variant pack points at them */
};

/* A 4-D tensor; uid 0 gives the next virtual uid. by_value: a host scalar. */
static cudnnBackendDescriptor_t tensor(struct sdpa *s, int64_t uid, cudnnDataType_t ty, const int64_t dims[4],
				       const int64_t strides[4], bool virt, bool by_value, struct ir_diag *d)
{
	return cdg_tensor(s->g, uid, ty, 4, dims, strides, virt, by_value, d);
}

/* A packed virtual [b, h, r, c] tensor of type ty. */
static cudnnBackendDescriptor_t vtensor(struct sdpa *s, cudnnDataType_t ty, int64_t b, int64_t h, int64_t r, int64_t c,
					struct ir_diag *d)
{
	const int64_t dims[4] = { b, h, r, c };
	return cdg_vtensor(s->g, ty, 4, dims, d);
}

/* The operation graph and its heuristics; 0 or IR_ERR. */
static int build(struct sdpa *s, cudnnHandle_t h, cudnnDataType_t io, const struct rd_attn *a,
		 const struct sdpa_bias *bias, struct ir_diag *d)
{
	const int64_t B = a->B, H = a->Hq, Lq = a->Lq, T = a->T;
	const int64_t qd[4] = { B, H, Lq, a->D }, qs[4] = { a->q_sb, a->q_sh, a->q_ss, 1 };
	const int64_t kd[4] = { B, a->Hkv, a->D, T }, ks[4] = { a->k_sb, a->k_sh, 1, a->k_ss };
	const int64_t vd[4] = { B, a->Hkv, T, a->Dv }, vs[4] = { a->v_sb, a->v_sh, a->v_ss, 1 };
	const int64_t od[4] = { B, H, Lq, a->Dv }, os[4] = { a->y_sb, a->y_sh, a->y_ss, 1 };
	const int64_t one[4] = { 1, 1, 1, 1 };
	const cudnnDataType_t F = CUDNN_DATA_FLOAT;

	cudnnBackendDescriptor_t Q = tensor(s, U_Q, io, qd, qs, false, false, d);
	cudnnBackendDescriptor_t KT = Q ? tensor(s, U_K, io, kd, ks, false, false, d) : NULL;
	cudnnBackendDescriptor_t V = KT ? tensor(s, U_V, io, vd, vs, false, false, d) : NULL;
	cudnnBackendDescriptor_t O = V ? tensor(s, U_O, io, od, os, false, false, d) : NULL;
	cudnnBackendDescriptor_t scale = O ? tensor(s, U_SCALE, F, one, one, false, true, d) : NULL;
	if (!scale)
		return IR_ERR;
	/* S = Q K^T, then * scale */
	cudnnBackendDescriptor_t S = vtensor(s, F, B, H, Lq, T, d);
	if (!S || cdg_matmul(s->g, Q, KT, S, d))
		return IR_ERR;
	cudnnBackendDescriptor_t S1 = vtensor(s, F, B, H, Lq, T, d);
	if (!S1 || cdg_pointwise(s->g, CUDNN_POINTWISE_MUL, F, S, scale, NULL, S1, -1, d))
		return IR_ERR;
	S = S1;
	if (bias) {
		cudnnBackendDescriptor_t Bt = tensor(s, U_BIAS, io, bias->dims, bias->strides, false, false, d);
		cudnnBackendDescriptor_t S2 = Bt ? vtensor(s, F, B, H, Lq, T, d) : NULL;
		if (!S2 || cdg_pointwise(s->g, CUDNN_POINTWISE_ADD, F, S, Bt, NULL, S2, -1, d))
			return IR_ERR;
		S = S2;
	}
	if (a->causal) {
		cudnnBackendDescriptor_t row = vtensor(s, CUDNN_DATA_INT32, B, H, Lq, T, d);
		cudnnBackendDescriptor_t col = row ? vtensor(s, CUDNN_DATA_INT32, B, H, Lq, T, d) : NULL;
		cudnnBackendDescriptor_t keep = col ? vtensor(s, CUDNN_DATA_BOOLEAN, B, H, Lq, T, d) : NULL;
		cudnnBackendDescriptor_t ninf = keep ? tensor(s, U_NEGINF, F, one, one, false, true, d) : NULL;
		cudnnBackendDescriptor_t S3 = ninf ? vtensor(s, F, B, H, Lq, T, d) : NULL;
		if (!S3 || cdg_pointwise(s->g, CUDNN_POINTWISE_GEN_INDEX, F, S, NULL, NULL, row, 2, d) ||
		    cdg_pointwise(s->g, CUDNN_POINTWISE_GEN_INDEX, F, S, NULL, NULL, col, 3, d) ||
		    cdg_pointwise(s->g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1, d) ||
		    cdg_pointwise(s->g, CUDNN_POINTWISE_BINARY_SELECT, F, S, ninf, keep, S3, -1, d))
			return IR_ERR;
		S = S3;
	}
	/* softmax over the keys */
	const int64_t md[4] = { B, H, Lq, 1 }, ms[4] = { H * Lq, Lq, 1, 1 };
	cudnnBackendDescriptor_t M = tensor(s, 0, F, md, ms, true, false, d);
	cudnnBackendDescriptor_t Sm = M ? vtensor(s, F, B, H, Lq, T, d) : NULL;
	cudnnBackendDescriptor_t E = Sm ? vtensor(s, F, B, H, Lq, T, d) : NULL;
	cudnnBackendDescriptor_t L = E ? tensor(s, 0, F, md, ms, true, false, d) : NULL;
	cudnnBackendDescriptor_t P = L ? vtensor(s, io, B, H, Lq, T, d) : NULL;
	/* the softmax statistics max + log(sum), virtual: the engines' pattern has them even when
	 * nothing reads them (without, the heuristics find no engine) */
	cudnnBackendDescriptor_t LL = P ? tensor(s, 0, F, md, ms, true, false, d) : NULL;
	cudnnBackendDescriptor_t ST = LL ? tensor(s, 0, F, md, ms, true, false, d) : NULL;
	if (!ST || cdg_reduction(s->g, CUDNN_REDUCE_TENSOR_MAX, S, M, d) ||
	    cdg_pointwise(s->g, CUDNN_POINTWISE_SUB, F, S, M, NULL, Sm, -1, d) ||
	    cdg_pointwise(s->g, CUDNN_POINTWISE_EXP, F, Sm, NULL, NULL, E, -1, d) ||
	    cdg_reduction(s->g, CUDNN_REDUCE_TENSOR_ADD, E, L, d) ||
	    cdg_pointwise(s->g, CUDNN_POINTWISE_LOG, F, L, NULL, NULL, LL, -1, d) ||
	    cdg_pointwise(s->g, CUDNN_POINTWISE_ADD, F, M, LL, NULL, ST, -1, d) ||
	    cdg_pointwise(s->g, CUDNN_POINTWISE_DIV, F, E, L, NULL, P, -1, d) ||
	    cdg_matmul(s->g, P, V, O, d))
		return IR_ERR;

	return cdg_heuristics(s->g, h, d);
}

void sdpa_free(struct sdpa *s)
{
	if (!s)
		return;
	cdg_free(s->g);
	free(s);
}

struct sdpa *sdpa_new(const struct cudnn_api *api, void *hv, int dtype, const struct rd_attn *a,
		      const struct sdpa_bias *bias, struct ir_diag *d)
{
	cudnnHandle_t h = (cudnnHandle_t)hv;
	if (dtype != IR_FLOAT16 && dtype != IR_BFLOAT16) {
		ir_diag_err(d, IR_ERR, "cuDNN attention: float16 or bfloat16 only");
		return NULL;
	}
	struct sdpa *s = calloc(1, sizeof(*s));
	if (!s) {
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	s->scale = a->scale;
	s->neginf = -INFINITY;
	s->bias = bias != NULL;
	s->causal = a->causal != 0;
	cudnnDataType_t io = dtype == IR_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
	if (!(s->g = cdg_new(api, "cuDNN attention", d)) || build(s, h, io, a, bias, d) ||
	    cdg_plan_first(s->g, h, SD_WS_LIMIT, d)) {
		sdpa_free(s);
		return NULL;
	}
	return s;
}

int64_t sdpa_ws(const struct sdpa *s)
{
	return s->g->ws;
}

int sdpa_engine(const struct sdpa *s)
{
	return s->g->engine;
}

int sdpa_run(struct sdpa *s, void *hv, const void *q, const void *k, const void *v, const void *bias, void *y, void *ws,
	     struct ir_diag *d)
{
	int64_t uids[7] = { U_Q, U_K, U_V, U_O, U_SCALE };
	void *ptrs[7] = { (void *)q, (void *)k, (void *)v, y, &s->scale };
	int n = 5;
	if (s->causal)
		uids[n] = U_NEGINF, ptrs[n++] = &s->neginf;
	if (s->bias)
		uids[n] = U_BIAS, ptrs[n++] = (void *)bias;
	return cdg_run(s->g, (cudnnHandle_t)hv, n, uids, ptrs, ws, d);
}
