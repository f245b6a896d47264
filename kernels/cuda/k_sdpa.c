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
#include "kernels/cuda/cudnn_api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SD_MAX_DESC 64
#define SD_MAX_CFG 16
#define SD_WS_LIMIT ((int64_t)256 << 20)

enum { U_Q = 1, U_K, U_V, U_O, U_BIAS, U_SCALE, U_NEGINF, U_VIRT = 100 };

struct sdpa {
	const struct cudnn_api *api;
	cudnnBackendDescriptor_t all[SD_MAX_DESC];   /* every descriptor made, destroyed by sdpa_free */
	int n_all;
	cudnnBackendDescriptor_t graph, heur, plan, vpack, cfg[SD_MAX_CFG];
	int n_cfg, engine;
	int64_t ws, next_uid;
	bool bias, causal;
	float scale, neginf;   /* the by-value scalars: the variant pack points at them */
	const void *vq, *vk, *vv, *vb, *vws;
	void *vy;
};

static int chk(cudnnStatus_t st, const char *what, struct ir_diag *d)
{
	return cuda_cudnn_check(st, what, d);
}

/* A new descriptor of type ty, kept in s->all; NULL on failure (d says why). */
static cudnnBackendDescriptor_t mk(struct sdpa *s, cudnnBackendDescriptorType_t ty, struct ir_diag *d)
{
	if (s->n_all >= SD_MAX_DESC) {
		ir_diag_err(d, IR_ERR, "cuDNN attention: too many descriptors");
		return NULL;
	}
	cudnnBackendDescriptor_t x = NULL;
	if (chk(s->api->BackendCreateDescriptor(ty, &x), "cudnnBackendCreateDescriptor", d))
		return NULL;
	s->all[s->n_all++] = x;
	return x;
}

static int set(struct sdpa *s, cudnnBackendDescriptor_t x, cudnnBackendAttributeName_t name,
	       cudnnBackendAttributeType_t ty, int64_t n, const void *v, struct ir_diag *d)
{
	return chk(s->api->BackendSetAttribute(x, name, ty, n, v), "cudnnBackendSetAttribute", d);
}

static int fin(struct sdpa *s, cudnnBackendDescriptor_t x, const char *what, struct ir_diag *d)
{
	return chk(s->api->BackendFinalize(x), what, d);
}

/* A 4-D tensor; uid 0 gives the next virtual uid. by_value: a host scalar. */
static cudnnBackendDescriptor_t tensor(struct sdpa *s, int64_t uid, cudnnDataType_t ty, const int64_t dims[4],
				       const int64_t strides[4], bool virt, bool by_value, struct ir_diag *d)
{
	cudnnBackendDescriptor_t t = mk(s, CUDNN_BACKEND_TENSOR_DESCRIPTOR, d);
	const int64_t align = 16;
	if (!uid)
		uid = s->next_uid++;
	if (!t || set(s, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ty, d) ||
	    set(s, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, d) ||
	    set(s, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, d) ||
	    set(s, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, d) ||
	    set(s, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, d) ||
	    (virt && set(s, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, d)) ||
	    (by_value && set(s, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, d)) ||
	    fin(s, t, "cudnnBackendFinalize (tensor)", d))
		return NULL;
	return t;
}

/* A packed virtual [b, h, r, c] tensor of type ty. */
static cudnnBackendDescriptor_t vtensor(struct sdpa *s, cudnnDataType_t ty, int64_t b, int64_t h, int64_t r, int64_t c,
					struct ir_diag *d)
{
	const int64_t dims[4] = { b, h, r, c }, st[4] = { h * r * c, r * c, c, 1 };
	return tensor(s, 0, ty, dims, st, true, false, d);
}

/* y = mode(x[, b][, t]) computed in prec; axis >= 0 for GEN_INDEX. Returns the operation. */
static cudnnBackendDescriptor_t pointwise(struct sdpa *s, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
					  cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
					  cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis,
					  struct ir_diag *d)
{
	cudnnBackendDescriptor_t pw = mk(s, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, d);
	if (!pw || set(s, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, d) ||
	    set(s, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, d) ||
	    (axis >= 0 && set(s, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, d)) ||
	    fin(s, pw, "cudnnBackendFinalize (pointwise)", d))
		return NULL;
	cudnnBackendDescriptor_t op = mk(s, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, d);
	if (!op || set(s, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, d) ||
	    set(s, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, d) ||
	    (b && set(s, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, d)) ||
	    (t && set(s, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, d)) ||
	    set(s, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, d) ||
	    fin(s, op, "cudnnBackendFinalize (pointwise operation)", d))
		return NULL;
	return op;
}

static cudnnBackendDescriptor_t reduction(struct sdpa *s, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
					  cudnnBackendDescriptor_t y, struct ir_diag *d)
{
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t r = mk(s, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, d);
	if (!r || set(s, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, d) ||
	    set(s, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, d) ||
	    fin(s, r, "cudnnBackendFinalize (reduction)", d))
		return NULL;
	cudnnBackendDescriptor_t op = mk(s, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, d);
	if (!op || set(s, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, d) ||
	    set(s, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, d) ||
	    set(s, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r, d) ||
	    fin(s, op, "cudnnBackendFinalize (reduction operation)", d))
		return NULL;
	return op;
}

static cudnnBackendDescriptor_t matmul(struct sdpa *s, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
				       cudnnBackendDescriptor_t c, struct ir_diag *d)
{
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t m = mk(s, CUDNN_BACKEND_MATMUL_DESCRIPTOR, d);
	if (!m || set(s, m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, d) ||
	    fin(s, m, "cudnnBackendFinalize (matmul)", d))
		return NULL;
	cudnnBackendDescriptor_t op = mk(s, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, d);
	if (!op || set(s, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, d) ||
	    set(s, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, d) ||
	    set(s, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, d) ||
	    set(s, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m, d) ||
	    fin(s, op, "cudnnBackendFinalize (matmul operation)", d))
		return NULL;
	return op;
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
	cudnnBackendDescriptor_t ops[16];
	int n = 0;

	cudnnBackendDescriptor_t Q = tensor(s, U_Q, io, qd, qs, false, false, d);
	cudnnBackendDescriptor_t KT = Q ? tensor(s, U_K, io, kd, ks, false, false, d) : NULL;
	cudnnBackendDescriptor_t V = KT ? tensor(s, U_V, io, vd, vs, false, false, d) : NULL;
	cudnnBackendDescriptor_t O = V ? tensor(s, U_O, io, od, os, false, false, d) : NULL;
	cudnnBackendDescriptor_t scale = O ? tensor(s, U_SCALE, F, one, one, false, true, d) : NULL;
	if (!scale)
		return IR_ERR;
	/* S = Q K^T, then * scale */
	cudnnBackendDescriptor_t S = vtensor(s, F, B, H, Lq, T, d);
	if (!S || !(ops[n++] = matmul(s, Q, KT, S, d)))
		return IR_ERR;
	cudnnBackendDescriptor_t S1 = vtensor(s, F, B, H, Lq, T, d);
	if (!S1 || !(ops[n++] = pointwise(s, CUDNN_POINTWISE_MUL, F, S, scale, NULL, S1, -1, d)))
		return IR_ERR;
	S = S1;
	if (bias) {
		cudnnBackendDescriptor_t Bt = tensor(s, U_BIAS, io, bias->dims, bias->strides, false, false, d);
		cudnnBackendDescriptor_t S2 = Bt ? vtensor(s, F, B, H, Lq, T, d) : NULL;
		if (!S2 || !(ops[n++] = pointwise(s, CUDNN_POINTWISE_ADD, F, S, Bt, NULL, S2, -1, d)))
			return IR_ERR;
		S = S2;
	}
	if (a->causal) {
		cudnnBackendDescriptor_t row = vtensor(s, CUDNN_DATA_INT32, B, H, Lq, T, d);
		cudnnBackendDescriptor_t col = row ? vtensor(s, CUDNN_DATA_INT32, B, H, Lq, T, d) : NULL;
		cudnnBackendDescriptor_t keep = col ? vtensor(s, CUDNN_DATA_BOOLEAN, B, H, Lq, T, d) : NULL;
		cudnnBackendDescriptor_t ninf = keep ? tensor(s, U_NEGINF, F, one, one, false, true, d) : NULL;
		cudnnBackendDescriptor_t S3 = ninf ? vtensor(s, F, B, H, Lq, T, d) : NULL;
		if (!S3 || !(ops[n++] = pointwise(s, CUDNN_POINTWISE_GEN_INDEX, F, S, NULL, NULL, row, 2, d)) ||
		    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_GEN_INDEX, F, S, NULL, NULL, col, 3, d)) ||
		    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1, d)) ||
		    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_BINARY_SELECT, F, S, ninf, keep, S3, -1, d)))
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
	if (!ST || !(ops[n++] = reduction(s, CUDNN_REDUCE_TENSOR_MAX, S, M, d)) ||
	    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_SUB, F, S, M, NULL, Sm, -1, d)) ||
	    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_EXP, F, Sm, NULL, NULL, E, -1, d)) ||
	    !(ops[n++] = reduction(s, CUDNN_REDUCE_TENSOR_ADD, E, L, d)) ||
	    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_LOG, F, L, NULL, NULL, LL, -1, d)) ||
	    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_ADD, F, M, LL, NULL, ST, -1, d)) ||
	    !(ops[n++] = pointwise(s, CUDNN_POINTWISE_DIV, F, E, L, NULL, P, -1, d)) ||
	    !(ops[n++] = matmul(s, P, V, O, d)))
		return IR_ERR;

	cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
	if (!(s->graph = mk(s, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, d)) ||
	    set(s, s->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, d) ||
	    set(s, s->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops, d) ||
	    fin(s, s->graph, "cudnnBackendFinalize (operation graph)", d) ||
	    !(s->heur = mk(s, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, d)) ||
	    set(s, s->heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &s->graph, d) ||
	    set(s, s->heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, d) ||
	    fin(s, s->heur, "cudnnBackendFinalize (heuristics)", d))
		return IR_ERR;
	return 0;
}

/* The plan of engine config i: 0 with s->ws and s->engine, else IR_ERR. */
static int plan(struct sdpa *s, cudnnHandle_t h, int i, struct ir_diag *d)
{
	const struct cudnn_api *api = s->api;
	if (s->plan)
		api->BackendDestroyDescriptor(s->plan);
	s->plan = NULL;
	int64_t ws = 0, got = 0;
	if (chk(api->BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &s->plan),
		"cudnnBackendCreateDescriptor", d) ||
	    set(s, s->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, d) ||
	    set(s, s->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &s->cfg[i], d) ||
	    fin(s, s->plan, "cudnnBackendFinalize (execution plan)", d) ||
	    chk(api->BackendGetAttribute(s->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws),
		"cudnnBackendGetAttribute (workspace size)", d))
		return IR_ERR;
	if (ws < 0 || ws > SD_WS_LIMIT)
		return ir_diag_err(d, IR_ERR, "cuDNN attention: engine config %d wants %lld bytes of workspace", i,
				   (long long)ws);
	s->ws = ws;
	/* the engine's global index, for profile */
	cudnnBackendDescriptor_t eng = NULL;
	int64_t idx = -1;
	s->engine = -1;
	if (api->BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) == CUDNN_STATUS_SUCCESS) {
		if (api->BackendGetAttribute(s->cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
					     &eng) == CUDNN_STATUS_SUCCESS &&
		    api->BackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &idx) ==
			    CUDNN_STATUS_SUCCESS)
			s->engine = (int)idx;
		api->BackendDestroyDescriptor(eng);
	}
	return 0;
}

void sdpa_free(struct sdpa *s)
{
	if (!s)
		return;
	const struct cudnn_api *api = s->api;
	if (s->vpack)
		api->BackendDestroyDescriptor(s->vpack);
	if (s->plan)
		api->BackendDestroyDescriptor(s->plan);
	for (int i = 0; i < s->n_cfg; i++)
		if (s->cfg[i])
			api->BackendDestroyDescriptor(s->cfg[i]);
	/* operations before the tensors and descriptors they name */
	for (int i = s->n_all - 1; i >= 0; i--)
		api->BackendDestroyDescriptor(s->all[i]);
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
	s->api = api;
	s->next_uid = U_VIRT;
	s->scale = a->scale;
	s->neginf = -INFINITY;
	s->bias = bias != NULL;
	s->causal = a->causal != 0;
	s->engine = -1;
	cudnnDataType_t io = dtype == IR_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
	if (build(s, h, io, a, bias, d))
		goto fail;
	for (int i = 0; i < SD_MAX_CFG; i++)
		if (chk(api->BackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &s->cfg[i]),
			"cudnnBackendCreateDescriptor", d))
			goto fail;
		else
			s->n_cfg = i + 1;
	int64_t got = 0;
	if (chk(api->BackendGetAttribute(s->heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
					 SD_MAX_CFG, &got, s->cfg),
		"cudnnBackendGetAttribute (heuristics results)", d))
		goto fail;
	if (got <= 0) {
		ir_diag_err(d, IR_ERR, "cuDNN has no engine for this attention");
		goto fail;
	}
	for (int i = 0; i < got && i < SD_MAX_CFG; i++) {
		struct ir_diag quiet;
		ir_diag_init(&quiet);
		int rc = plan(s, h, i, &quiet);
		ir_diag_clear(&quiet);
		if (!rc)
			return s;
	}
	ir_diag_err(d, IR_ERR, "none of cuDNN's %lld engine configs for this attention finalizes", (long long)got);
fail:
	sdpa_free(s);
	return NULL;
}

int64_t sdpa_ws(const struct sdpa *s)
{
	return s->ws;
}

int sdpa_engine(const struct sdpa *s)
{
	return s->engine;
}

int sdpa_run(struct sdpa *s, void *hv, const void *q, const void *k, const void *v, const void *bias, void *y, void *ws,
	     struct ir_diag *d)
{
	cudnnHandle_t h = (cudnnHandle_t)hv;
	const struct cudnn_api *api = s->api;
	if (!s->vpack || s->vq != q || s->vk != k || s->vv != v || s->vy != y || s->vb != bias || s->vws != ws) {
		if (s->vpack)
			api->BackendDestroyDescriptor(s->vpack);
		s->vpack = NULL;
		int64_t uids[7] = { U_Q, U_K, U_V, U_O, U_SCALE };
		void *ptrs[7] = { (void *)q, (void *)k, (void *)v, y, &s->scale };
		int n = 5;
		if (s->causal)
			uids[n] = U_NEGINF, ptrs[n++] = &s->neginf;
		if (s->bias)
			uids[n] = U_BIAS, ptrs[n++] = (void *)bias;
		if (chk(api->BackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &s->vpack),
			"cudnnBackendCreateDescriptor", d) ||
		    set(s, s->vpack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids, d) ||
		    set(s, s->vpack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs, d) ||
		    set(s, s->vpack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, d) ||
		    fin(s, s->vpack, "cudnnBackendFinalize (variant pack)", d))
			return IR_ERR;
		s->vq = q, s->vk = k, s->vv = v, s->vy = y, s->vb = bias, s->vws = ws;
	}
	return chk(api->BackendExecute(h, s->plan, s->vpack), "cudnnBackendExecute", d);
}
