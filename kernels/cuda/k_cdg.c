/*
 * k_cdg.c - a cuDNN operation graph through the backend descriptors (see
 * k_cdg.h).
 */
#include "kernels/cuda/k_cdg.h"

#include <stdlib.h>
#include <string.h>

static int chk(cudnnStatus_t st, const char *what, struct ir_diag *d)
{
	return cuda_cudnn_check(st, what, d);
}

/* A new descriptor of type ty, kept in g->all; NULL on failure (d says why). */
static cudnnBackendDescriptor_t mk(struct cdg *g, cudnnBackendDescriptorType_t ty, struct ir_diag *d)
{
	if (g->n_all >= CDG_MAX_DESC) {
		ir_diag_err(d, IR_ERR, "%s: too many descriptors", g->who);
		return NULL;
	}
	cudnnBackendDescriptor_t x = NULL;
	if (chk(g->api->BackendCreateDescriptor(ty, &x), "cudnnBackendCreateDescriptor", d))
		return NULL;
	g->all[g->n_all++] = x;
	return x;
}

static int set(struct cdg *g, cudnnBackendDescriptor_t x, cudnnBackendAttributeName_t name,
	       cudnnBackendAttributeType_t ty, int64_t n, const void *v, struct ir_diag *d)
{
	return chk(g->api->BackendSetAttribute(x, name, ty, n, v), "cudnnBackendSetAttribute", d);
}

static int fin(struct cdg *g, cudnnBackendDescriptor_t x, const char *what, struct ir_diag *d)
{
	return chk(g->api->BackendFinalize(x), what, d);
}

static int add_op(struct cdg *g, cudnnBackendDescriptor_t op, struct ir_diag *d)
{
	if (!op)
		return IR_ERR;
	if (g->n_ops >= CDG_MAX_OPS)
		return ir_diag_err(d, IR_ERR, "%s: too many operations", g->who);
	g->ops[g->n_ops++] = op;
	return 0;
}

struct cdg *cdg_new(const struct cudnn_api *api, const char *who, struct ir_diag *d)
{
	struct cdg *g = calloc(1, sizeof(*g));
	if (!g) {
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	g->api = api;
	g->who = who;
	g->next_uid = CDG_UID_VIRT;
	g->cfg_i = -1;
	g->engine = -1;
	return g;
}

void cdg_free(struct cdg *g)
{
	if (!g)
		return;
	const struct cudnn_api *api = g->api;
	if (g->vpack)
		api->BackendDestroyDescriptor(g->vpack);
	if (g->plan)
		api->BackendDestroyDescriptor(g->plan);
	for (int i = 0; i < CDG_MAX_CFG; i++)
		if (g->cfg[i])
			api->BackendDestroyDescriptor(g->cfg[i]);
	/* operations before the tensors and descriptors they name */
	for (int i = g->n_all - 1; i >= 0; i--)
		api->BackendDestroyDescriptor(g->all[i]);
	free(g);
}

cudnnBackendDescriptor_t cdg_tensor(struct cdg *g, int64_t uid, cudnnDataType_t ty, int nd, const int64_t *dims,
				    const int64_t *strides, bool virt, bool by_value, struct ir_diag *d)
{
	cudnnBackendDescriptor_t t = mk(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, d);
	const int64_t align = 16;
	if (!uid)
		uid = g->next_uid++;
	if (!t || set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ty, d) ||
	    set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims, d) ||
	    set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides, d) ||
	    set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, d) ||
	    set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, d) ||
	    (virt && set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, d)) ||
	    (by_value && set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, d)) ||
	    fin(g, t, "cudnnBackendFinalize (tensor)", d))
		return NULL;
	return t;
}

cudnnBackendDescriptor_t cdg_vtensor(struct cdg *g, cudnnDataType_t ty, int nd, const int64_t *dims, struct ir_diag *d)
{
	int64_t st[8];
	if (nd < 1 || nd > 8) {
		ir_diag_err(d, IR_ERR, "%s: a tensor of %d dims", g->who, nd);
		return NULL;
	}
	int64_t s = 1;
	for (int i = nd - 1; i >= 0; i--) {
		st[i] = s;
		s *= dims[i];
	}
	return cdg_tensor(g, 0, ty, nd, dims, st, true, false, d);
}

int cdg_pointwise(struct cdg *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
		  cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis,
		  struct ir_diag *d)
{
	if (!x || !y)
		return IR_ERR;
	cudnnBackendDescriptor_t pw = mk(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, d);
	if (!pw || set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, d) ||
	    set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, d) ||
	    (axis >= 0 && set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, d)) ||
	    fin(g, pw, "cudnnBackendFinalize (pointwise)", d))
		return IR_ERR;
	cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, d);
	if (!op || set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, d) ||
	    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, d) ||
	    (b && set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, d)) ||
	    (t && set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, d)) ||
	    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, d) ||
	    fin(g, op, "cudnnBackendFinalize (pointwise operation)", d))
		return IR_ERR;
	return add_op(g, op, d);
}

int cdg_reduction(struct cdg *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
		  struct ir_diag *d)
{
	if (!x || !y)
		return IR_ERR;
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t r = mk(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, d);
	if (!r || set(g, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, d) ||
	    set(g, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, d) ||
	    fin(g, r, "cudnnBackendFinalize (reduction)", d))
		return IR_ERR;
	cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, d);
	if (!op || set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, d) ||
	    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, d) ||
	    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r, d) ||
	    fin(g, op, "cudnnBackendFinalize (reduction operation)", d))
		return IR_ERR;
	return add_op(g, op, d);
}

int cdg_matmul(struct cdg *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
	       struct ir_diag *d)
{
	if (!a || !b || !c)
		return IR_ERR;
	cudnnDataType_t comp = CUDNN_DATA_FLOAT;
	cudnnBackendDescriptor_t m = mk(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, d);
	if (!m || set(g, m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, d) ||
	    fin(g, m, "cudnnBackendFinalize (matmul)", d))
		return IR_ERR;
	cudnnBackendDescriptor_t op = mk(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, d);
	if (!op || set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, d) ||
	    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, d) ||
	    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, d) ||
	    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m, d) ||
	    fin(g, op, "cudnnBackendFinalize (matmul operation)", d))
		return IR_ERR;
	return add_op(g, op, d);
}

int cdg_heuristics(struct cdg *g, cudnnHandle_t h, struct ir_diag *d)
{
	const struct cudnn_api *api = g->api;
	cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
	if (!(g->graph = mk(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, d)) ||
	    set(g, g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, d) ||
	    set(g, g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, d) ||
	    fin(g, g->graph, "cudnnBackendFinalize (operation graph)", d) ||
	    !(g->heur = mk(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, d)) ||
	    set(g, g->heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->graph, d) ||
	    set(g, g->heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, d) ||
	    fin(g, g->heur, "cudnnBackendFinalize (heuristics)", d))
		return IR_ERR;
	for (int i = 0; i < CDG_MAX_CFG; i++)
		if (chk(api->BackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &g->cfg[i]),
			"cudnnBackendCreateDescriptor", d))
			return IR_ERR;
	int64_t got = 0;
	if (chk(api->BackendGetAttribute(g->heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
					 CDG_MAX_CFG, &got, g->cfg),
		"cudnnBackendGetAttribute (heuristics results)", d))
		return IR_ERR;
	if (got <= 0)
		return ir_diag_err(d, IR_ERR, "%s: cuDNN has no engine for it", g->who);
	g->n_cfg = got < CDG_MAX_CFG ? (int)got : CDG_MAX_CFG;
	return 0;
}

int cdg_plan(struct cdg *g, cudnnHandle_t h, int i, int64_t ws_limit, struct ir_diag *d)
{
	const struct cudnn_api *api = g->api;
	if (g->vpack)
		api->BackendDestroyDescriptor(g->vpack);
	g->vpack = NULL;
	if (g->plan)
		api->BackendDestroyDescriptor(g->plan);
	g->plan = NULL;
	g->cfg_i = -1;
	if (i < 0 || i >= g->n_cfg)
		return ir_diag_err(d, IR_ERR, "%s: no engine config %d", g->who, i);
	int64_t ws = 0, got = 0;
	if (chk(api->BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &g->plan),
		"cudnnBackendCreateDescriptor", d) ||
	    set(g, g->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, d) ||
	    set(g, g->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->cfg[i], d) ||
	    fin(g, g->plan, "cudnnBackendFinalize (execution plan)", d) ||
	    chk(api->BackendGetAttribute(g->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws),
		"cudnnBackendGetAttribute (workspace size)", d))
		return IR_ERR;
	if (ws < 0 || ws > ws_limit)
		return ir_diag_err(d, IR_ERR, "%s: engine config %d wants %lld bytes of workspace", g->who, i,
				   (long long)ws);
	g->ws = ws;
	g->cfg_i = i;
	/* the engine's global index, for profile */
	cudnnBackendDescriptor_t eng = NULL;
	int64_t idx = -1;
	g->engine = -1;
	if (api->BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) == CUDNN_STATUS_SUCCESS) {
		if (api->BackendGetAttribute(g->cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
					     &eng) == CUDNN_STATUS_SUCCESS &&
		    api->BackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &idx) ==
			    CUDNN_STATUS_SUCCESS)
			g->engine = (int)idx;
		api->BackendDestroyDescriptor(eng);
	}
	return 0;
}

int cdg_plan_first(struct cdg *g, cudnnHandle_t h, int64_t ws_limit, struct ir_diag *d)
{
	for (int i = 0; i < g->n_cfg; i++) {
		struct ir_diag quiet;
		ir_diag_init(&quiet);
		int rc = cdg_plan(g, h, i, ws_limit, &quiet);
		ir_diag_clear(&quiet);
		if (!rc)
			return 0;
	}
	return ir_diag_err(d, IR_ERR, "%s: none of cuDNN's %d engine configs finalizes", g->who, g->n_cfg);
}

int cdg_run(struct cdg *g, cudnnHandle_t h, int n, const int64_t *uids, void *const *ptrs, void *ws, struct ir_diag *d)
{
	const struct cudnn_api *api = g->api;
	if (!g->plan)
		return ir_diag_err(d, IR_ERR, "%s: not planned", g->who);
	if (n < 0 || n > CDG_MAX_UID)
		return ir_diag_err(d, IR_ERR, "%s: %d tensors", g->who, n);
	bool same = g->vpack && g->n_uid == n && g->vws == ws;
	for (int i = 0; same && i < n; i++)
		same = g->uids[i] == uids[i] && g->ptrs[i] == ptrs[i];
	if (!same) {
		if (g->vpack)
			api->BackendDestroyDescriptor(g->vpack);
		g->vpack = NULL;
		if (chk(api->BackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &g->vpack),
			"cudnnBackendCreateDescriptor", d) ||
		    set(g, g->vpack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids, d) ||
		    set(g, g->vpack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs, d) ||
		    set(g, g->vpack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, d) ||
		    fin(g, g->vpack, "cudnnBackendFinalize (variant pack)", d)) {
			g->n_uid = 0;
			return IR_ERR;
		}
		g->n_uid = n;
		memcpy(g->uids, uids, sizeof(*uids) * (size_t)n);
		memcpy(g->ptrs, ptrs, sizeof(*ptrs) * (size_t)n);
		g->vws = ws;
	}
	return chk(api->BackendExecute(h, g->plan, g->vpack), "cudnnBackendExecute", d);
}
