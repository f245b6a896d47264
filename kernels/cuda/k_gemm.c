/*
 * k_gemm.c - GPU kernel entries of the gemm family: MatMul, Gemm and
 * ai.ogsh FusedGemm through cuBLASLt (launchers of our own kernels in
 * k_gemm.cu).
 *
 * To add an op: describe it as a `struct gemm_shape` in a shape_of_X
 * function (the row-major product, its batch and its C/activation), call it
 * from supports/prepare like the others and list it in the table at the end.
 *
 * Layout. ONNX tensors are row-major and cuBLASLt is column-major. A
 * row-major [r, c] matrix X is, read column-major, the [c, r] matrix X^T
 * with leading dimension c. So for Y = op(A) op(B) (row-major [M, N]) we
 * ask cuBLASLt for Y^T = op(B)^T op(A)^T (column-major [N, M], ld N): its
 * "A" is our B, stored column-major as [b_cols, b_rows] with ld b_cols and
 * transposed when transB is set, its "B" is our A likewise with transA, and
 * its m, n, k are our N, M, K. A bias vector in cuBLASLt has one value per
 * row of its D, which is one per column of our Y: Gemm's C of shape [N] or
 * [1, N].
 *
 * Plans. MatMul folds the batch into M when B has no batch (a [B*M, K] x
 * [K, N] product), uses a strided batch when both have the same batch dims
 * or only B has one (A's stride is then 0), and refuses other broadcasts.
 * Gemm's C is a bias epilogue when it is [N] or [1, N] and beta is 1, else
 * it is copied into Y (broadcast, our kernel) and cuBLASLt adds beta * Y.
 * FusedGemm's Relu and tanh-Gelu become cuBLASLt epilogues when C is not
 * copied in; other activations run after as our kernel. FusedGemm's
 * residual Z (input 3, Y's shape) is cuBLASLt's C with beta 1 when Gemm's C
 * is not copied in (D = act(A B + bias + Z) in one call), else our kernel
 * adds it after the product. When cuBLASLt has no algorithm for the fused
 * form, prepare falls back to the plainer one.
 *
 * Choice. prepare asks for up to 8 heuristics (32 MiB workspace); when the
 * plan is being tuned it times them on scratch buffers and remembers the
 * fastest one's index in the tuning cache; a cached index is used without
 * timing. Pointers are assumed 16-byte aligned (run checks).
 */
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/k_gemm.h"
#include "kernels/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEMM_MAX_ALGOS 8
#define GEMM_MAX_WS ((size_t)32 << 20)
#define GEMM_ALIGN 16u
#define GEMM_TIME_RUNS 5

struct act {
	int kind;        /* GEMM_ACT_* */
	float p0, p1;
};

/* A row-major product Y = act(alpha * op(A) op(B) + beta * C), batched. */
struct gemm_shape {
	int dt;
	bool ta, tb;
	int64_t M, N, K;               /* per batch; MatMul's folded batch is in M */
	int64_t a_rows, a_cols;        /* A as stored (per batch) */
	int64_t b_rows, b_cols;
	int64_t batch;                 /* 1: a single product */
	int64_t sa, sb, sy;            /* batch strides in elements (sa 0: A shared) */
	float alpha, beta;
	bool has_c;                    /* C given and beta != 0 */
	int64_t cm, cn;                /* C's shape as [cm, cn], broadcast to [M, N] */
	bool has_z;                    /* FusedGemm's residual Z (input 3), of Y's shape */
	struct act act;
};

/* ------------------------------------------------------------------------ */
/* reading the node                                                          */
/* ------------------------------------------------------------------------ */

/* FusedGemm's activation, read as the CPU reads it (kernels/fused.h), in
 * the launcher's terms (GEMM_ACT_*). */
static const int gemm_act[] = {
	[KACT_NONE] = GEMM_ACT_NONE, [KACT_RELU] = GEMM_ACT_RELU, [KACT_CLIP] = GEMM_ACT_CLIP,
	[KACT_LEAKY] = GEMM_ACT_LEAKY, [KACT_SIGMOID] = GEMM_ACT_SIGMOID, [KACT_HSIGMOID] = GEMM_ACT_HSIGMOID,
	[KACT_HSWISH] = GEMM_ACT_HSWISH, [KACT_TANH] = GEMM_ACT_TANH, [KACT_GELU] = GEMM_ACT_GELU,
};

static const char *act_name(int kind)
{
	for (size_t i = 0; i < sizeof(gemm_act) / sizeof(gemm_act[0]); i++)
		if (gemm_act[i] == kind)
			return kern_act_name((int)i);
	return "?";
}

static bool act_of(const struct ir_node *n, struct act *a, char *why, size_t size)
{
	struct kern_act ka;
	if (!kern_act_of(n, &ka, why, size))
		return false;
	if (ka.kind < 0 || (size_t)ka.kind >= sizeof(gemm_act) / sizeof(gemm_act[0])) {
		snprintf(why, size, "activation '%s' is not supported on the GPU", kern_act_name(ka.kind));
		return false;
	}
	a->kind = gemm_act[ka.kind];
	a->p0 = (float)ka.p0;
	a->p1 = (float)ka.p1;
	return true;
}

static bool in_given(const struct cuda_kctx *k, int i)
{
	return i < k->n_in && k->in[i].dtype != 0;
}

static bool dtype_ok(const struct cuda_kctx *k, int dt, char *why, size_t size)
{
	if (!cuda_is_float(dt)) {
		snprintf(why, size, "dtype %s is not supported on the GPU", ir_dtype_name(dt));
		return false;
	}
	for (int i = 0; i < k->n_in; i++)
		if (in_given(k, i) && k->in[i].dtype != dt) {
			snprintf(why, size, "inputs of different dtypes (%s and %s)", ir_dtype_name(dt),
				 ir_dtype_name(k->in[i].dtype));
			return false;
		}
	if (k->n_out < 1 || k->out[0].dtype != dt) {
		snprintf(why, size, "the output's dtype is not %s", ir_dtype_name(dt));
		return false;
	}
	return true;
}

/* cuBLASLt takes 32-bit sizes and batch counts */
static bool fits(int64_t v)
{
	return v >= 0 && v <= INT32_MAX;
}

static bool shape_of_matmul(const struct cuda_kctx *k, struct gemm_shape *g, char *why, size_t size)
{
	memset(g, 0, sizeof(*g));
	if (k->n_in < 2 || !in_given(k, 0) || !in_given(k, 1)) {
		snprintf(why, size, "matmul needs two inputs");
		return false;
	}
	const struct cuda_tensor *a = &k->in[0], *b = &k->in[1];
	g->dt = a->dtype;
	if (!dtype_ok(k, g->dt, why, size))
		return false;
	int ra = a->rank, rb = b->rank;
	if (ra < 1 || rb < 1) {
		snprintf(why, size, "matmul of a scalar");
		return false;
	}
	int64_t M = ra == 1 ? 1 : a->dims[ra - 2], K = a->dims[ra - 1];
	int64_t Kb = rb == 1 ? b->dims[0] : b->dims[rb - 2], N = rb == 1 ? 1 : b->dims[rb - 1];
	if (K != Kb) {
		snprintf(why, size, "inner dimensions differ (%lld and %lld)", (long long)K, (long long)Kb);
		return false;
	}
	int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, br = ba > bb ? ba : bb;
	int64_t nba = 1, nbb = 1;
	for (int j = 0; j < ba; j++)
		nba *= a->dims[j];
	for (int j = 0; j < bb; j++)
		nbb *= b->dims[j];
	g->alpha = 1;
	g->K = K;
	g->N = N;
	g->b_rows = K;
	g->b_cols = N;
	if (nbb == 1) {
		/* B has no batch: fold A's into M */
		g->M = nba * M;
		g->batch = 1;
	} else {
		bool same = true;
		for (int j = 0; j < br; j++) {
			int ja = j - (br - ba), jb = j - (br - bb);
			int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
			same = same && da == db;
		}
		if (nba != 1 && !same) {
			snprintf(why, size, "matmul with broadcast batch dimensions is not supported on the GPU");
			return false;
		}
		g->M = M;
		g->batch = nbb;
		g->sa = nba == 1 ? 0 : M * K;
		g->sb = K * N;
		g->sy = M * N;
	}
	g->a_rows = g->M;
	g->a_cols = K;
	if (!fits(g->M) || !fits(N) || !fits(K) || !fits(g->batch)) {
		snprintf(why, size, "matmul dimensions over 2^31 are not supported on the GPU");
		return false;
	}
	if (cuda_numel(&k->out[0]) != g->batch * g->M * N) {
		snprintf(why, size, "the output's shape does not match the inputs'");
		return false;
	}
	return true;
}

/* Gemm and FusedGemm (fused: with an activation). */
static bool shape_of_gemm(const struct cuda_kctx *k, bool fused, struct gemm_shape *g, char *why, size_t size)
{
	memset(g, 0, sizeof(*g));
	if (k->n_in < 2 || !in_given(k, 0) || !in_given(k, 1)) {
		snprintf(why, size, "gemm needs inputs A and B");
		return false;
	}
	const struct cuda_tensor *a = &k->in[0], *b = &k->in[1];
	g->dt = a->dtype;
	if (!dtype_ok(k, g->dt, why, size))
		return false;
	if (a->rank != 2 || b->rank != 2) {
		snprintf(why, size, "gemm needs 2-d inputs");
		return false;
	}
	const struct ir_node *n = k->node;
	g->ta = ir_node_attr_int(n, "transA", 0) != 0;
	g->tb = ir_node_attr_int(n, "transB", 0) != 0;
	g->alpha = ir_node_attr_float(n, "alpha", 1.0f);
	g->beta = ir_node_attr_float(n, "beta", 1.0f);
	g->a_rows = a->dims[0];
	g->a_cols = a->dims[1];
	g->b_rows = b->dims[0];
	g->b_cols = b->dims[1];
	g->M = g->ta ? a->dims[1] : a->dims[0];
	g->K = g->ta ? a->dims[0] : a->dims[1];
	int64_t Kb = g->tb ? b->dims[1] : b->dims[0];
	g->N = g->tb ? b->dims[0] : b->dims[1];
	g->batch = 1;
	if (g->K != Kb) {
		snprintf(why, size, "inner dimensions differ (%lld and %lld)", (long long)g->K, (long long)Kb);
		return false;
	}
	if (!fits(g->M) || !fits(g->N) || !fits(g->K) || !fits(a->dims[0] * a->dims[1]) ||
	    !fits(b->dims[0] * b->dims[1])) {
		snprintf(why, size, "gemm dimensions over 2^31 are not supported on the GPU");
		return false;
	}
	/* C broadcasts one way to [M, N]; beta == 0 ignores it (as the CPU does) */
	if (in_given(k, 2)) {
		const struct cuda_tensor *c = &k->in[2];
		g->cm = c->rank == 2 ? c->dims[0] : 1;
		g->cn = c->rank == 2 ? c->dims[1] : c->rank == 1 ? c->dims[0] : 1;
		if (c->rank > 2 || (g->cm != 1 && g->cm != g->M) || (g->cn != 1 && g->cn != g->N)) {
			snprintf(why, size, "C does not broadcast to [%lld,%lld]", (long long)g->M, (long long)g->N);
			return false;
		}
		g->has_c = g->beta != 0;
	}
	if (cuda_numel(&k->out[0]) != g->M * g->N) {
		snprintf(why, size, "the output's shape does not match the inputs'");
		return false;
	}
	g->act.kind = GEMM_ACT_NONE;
	if (fused && !act_of(n, &g->act, why, size))
		return false;
	if (fused && in_given(k, 3)) {
		if (cuda_numel(&k->in[3]) != g->M * g->N) {
			snprintf(why, size, "Z does not have the output's shape [%lld,%lld] (a broadcast Z is not "
				 "supported on the GPU)", (long long)g->M, (long long)g->N);
			return false;
		}
		g->has_z = true;
	}
	return true;
}

static bool shape_of(const struct cuda_kctx *k, struct gemm_shape *g, char *why, size_t size)
{
	if (k->node->op == IR_OP_MatMul)
		return shape_of_matmul(k, g, why, size);
	return shape_of_gemm(k, k->node->op == IR_OP_ogsh_FusedGemm, g, why, size);
}

static bool supports_gemm(const struct cuda_kctx *k, char *why, size_t size)
{
	struct gemm_shape g;
	if (!shape_of(k, &g, why, size))
		return false;
	if (!cuda_lt_api(NULL)) {
		snprintf(why, size, "cuBLASLt is not available");
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* the plan                                                                  */
/* ------------------------------------------------------------------------ */

/* How one node runs: [fill Y from C] -> [cuBLASLt, maybe with an epilogue]
 * -> [our activation]. */
struct gemm_state {
	struct gemm_shape g;
	const struct cuda_lt_api *lt;
	cublasLtHandle_t h;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, ly;   /* cuBLASLt's A (our B), B (our A), C and D (Y) */
	cublasLtMatmulAlgo_t algo;
	cublasLtEpilogue_t ep;
	bool empty;                          /* nothing to compute (an empty output) */
	bool skip_mm;                        /* K == 0: Y is beta * C (or 0) */
	bool fill;                           /* Y = C broadcast before the product */
	bool bias;                           /* C is the epilogue's bias */
	bool zc;                             /* Z is cuBLASLt's C (beta 1) */
	bool zpost;                          /* Z added by our kernel after the product */
	int post;                            /* our activation after (GEMM_ACT_*) */
	float beta;                          /* cuBLASLt's: beta when C was filled in or Z is its C, else 0 */
};

static void release_gemm(void *p)
{
	struct gemm_state *st = p;
	if (!st)
		return;
	if (st->lt) {
		if (st->desc)
			(void)st->lt->MatmulDescDestroy(st->desc);
		if (st->la)
			(void)st->lt->MatrixLayoutDestroy(st->la);
		if (st->lb)
			(void)st->lt->MatrixLayoutDestroy(st->lb);
		if (st->ly)
			(void)st->lt->MatrixLayoutDestroy(st->ly);
	}
	free(st);
}

static cudaDataType_t lt_type(int dt)
{
	return dt == IR_FLOAT16 ? CUDA_R_16F : dt == IR_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

static size_t dt_size(int dt)
{
	return dt == IR_FLOAT ? 4 : 2;
}

#define LT(call, name) do { if (cuda_lt_check((call), (name), k->d)) return IR_ERR; } while (0)

static int make_layout(struct cuda_kctx *k, struct gemm_state *st, cublasLtMatrixLayout_t *l, int64_t rows,
		       int64_t cols, int64_t ld, int64_t stride)
{
	LT(st->lt->MatrixLayoutCreate(l, lt_type(st->g.dt), (uint64_t)rows, (uint64_t)cols, ld),
	   "cublasLtMatrixLayoutCreate");
	if (st->g.batch > 1) {
		int32_t count = (int32_t)st->g.batch;
		LT(st->lt->MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
		   "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
		LT(st->lt->MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
						    sizeof(stride)),
		   "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
	}
	return 0;
}

/* The descriptors (once per state) and the epilogue (per try). */
static int make_descs(struct cuda_kctx *k, struct gemm_state *st)
{
	const struct gemm_shape *g = &st->g;
	cublasComputeType_t ct = g->dt == IR_FLOAT && k->ctx->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	LT(st->lt->MatmulDescCreate(&st->desc, ct, CUDA_R_32F), "cublasLtMatmulDescCreate");
	int32_t opa = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	LT(st->lt->MatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)),
	   "cublasLtMatmulDescSetAttribute(TRANSA)");
	LT(st->lt->MatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)),
	   "cublasLtMatmulDescSetAttribute(TRANSB)");
	/* see the top of the file: our B is cuBLASLt's A and the other way round */
	if (make_layout(k, st, &st->la, g->b_cols, g->b_rows, g->b_cols, g->sb) ||
	    make_layout(k, st, &st->lb, g->a_cols, g->a_rows, g->a_cols, g->sa) ||
	    make_layout(k, st, &st->ly, g->N, g->M, g->N, g->sy))
		return IR_ERR;
	return 0;
}

static int set_epilogue(struct cuda_kctx *k, struct gemm_state *st, const void *bias)
{
	uint32_t ep = (uint32_t)st->ep;
	LT(st->lt->MatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
	   "cublasLtMatmulDescSetAttribute(EPILOGUE)");
	if (st->bias)
		LT(st->lt->MatmulDescSetAttribute(st->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
		   "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
	return 0;
}

/* Up to GEMM_MAX_ALGOS candidates for the current epilogue; *n 0 when
 * cuBLASLt has none. */
static int heuristics(struct cuda_kctx *k, struct gemm_state *st, cublasLtMatmulHeuristicResult_t *res, int *n)
{
	*n = 0;
	cublasLtMatmulPreference_t pref = NULL;
	LT(st->lt->MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
	uint64_t ws = GEMM_MAX_WS;
	uint32_t align = GEMM_ALIGN;
	cublasStatus_t s = st->lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
								 sizeof(ws));
	const char *what = "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)";
	static const cublasLtMatmulPreferenceAttributes_t aligns[] = {
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
	};
	for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]) && s == CUBLAS_STATUS_SUCCESS; i++) {
		s = st->lt->MatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof(align));
		what = "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)";
	}
	int got = 0;
	if (s == CUBLAS_STATUS_SUCCESS) {
		what = "cublasLtMatmulAlgoGetHeuristic";
		s = st->lt->MatmulAlgoGetHeuristic(st->h, st->desc, st->la, st->lb, st->ly, st->ly, pref,
						   GEMM_MAX_ALGOS, res, &got);
		/* "no algorithm for this problem" is an answer, not an error; a
		 * fused epilogue it refuses makes prepare try a plainer plan */
		if (s == CUBLAS_STATUS_NOT_SUPPORTED ||
		    (s == CUBLAS_STATUS_INVALID_VALUE && st->ep != CUBLASLT_EPILOGUE_DEFAULT)) {
			s = CUBLAS_STATUS_SUCCESS;
			got = 0;
		}
	}
	(void)st->lt->MatmulPreferenceDestroy(pref);
	if (cuda_lt_check(s, what, k->d))
		return IR_ERR;
	/* keep the usable ones, in cuBLASLt's order */
	for (int i = 0; i < got && i < GEMM_MAX_ALGOS; i++)
		if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= GEMM_MAX_WS)
			res[(*n)++] = res[i];
	return 0;
}

/*
 * The epilogue and our activation for plan `level`: 0 everything cuBLASLt
 * can fuse, 1 the bias only, 2 nothing (C copied in). An activation is fused
 * only when C is not copied in (cuBLASLt's epilogues are documented for the
 * product plus bias). false when the level would repeat a lower one.
 */
static bool plan_level(struct gemm_state *st, int level)
{
	const struct gemm_shape *g = &st->g;
	bool vec_c = g->has_c && g->beta == 1 && g->cm == 1 && g->cn == g->N;
	bool fusable = g->act.kind == GEMM_ACT_RELU || (g->act.kind == GEMM_ACT_GELU && g->act.p0 == 1);
	bool bias = vec_c && level < 2;
	bool fill = g->has_c && !bias;
	bool fuse = level == 0 && fusable && !fill;
	if (level == 0 && !fuse && !bias)
		return false;   /* level 2 is the same */
	if (level == 1 && (!bias || !fusable))
		return false;   /* level 0 was this, or level 2 is */
	st->bias = bias;
	st->fill = fill;
	st->zc = g->has_z && !fill;
	st->zpost = g->has_z && fill;
	st->beta = fill ? g->beta : st->zc ? 1.0f : 0;
	st->post = fuse ? GEMM_ACT_NONE : g->act.kind;
	if (fuse && g->act.kind == GEMM_ACT_RELU)
		st->ep = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
	else if (fuse)
		st->ep = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
	else
		st->ep = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
	return true;
}

static void tune_key(const struct cuda_kctx *k, const struct gemm_state *st, char *key, size_t size)
{
	const struct gemm_shape *g = &st->g;
	snprintf(key, size, "cublaslt %s m=%lld n=%lld k=%lld batch=%lld sa=%lld ta=%d tb=%d ep=%u tf32=%d%s",
		 ir_dtype_name(g->dt), (long long)g->M, (long long)g->N, (long long)g->K, (long long)g->batch,
		 (long long)g->sa, g->ta, g->tb, (unsigned)st->ep, g->dt == IR_FLOAT && k->ctx->tf32,
		 st->beta != 0 ? " beta" : "");
}

/* D = Y; cuBLASLt's C is c (Y itself, or Z) */
static int launch_mm(struct gemm_state *st, const void *a, const void *b, const void *c, void *y,
		     const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes, cudaStream_t stream,
		     cublasStatus_t *status)
{
	*status = st->lt->Matmul(st->h, st->desc, &st->g.alpha, b, st->la, a, st->lb, &st->beta, c, st->ly, y, st->ly,
				 algo, ws, ws_bytes, stream);
	return *status == CUBLAS_STATUS_SUCCESS ? 0 : IR_ERR;
}

/*
 * Times the candidates on scratch buffers; the index of the fastest (0 when
 * none could be timed, e.g. no memory for the scratch buffers).
 */
static int time_algos(struct cuda_kctx *k, struct gemm_state *st, const cublasLtMatmulHeuristicResult_t *res, int n,
		      float *best_ms)
{
	const struct gemm_shape *g = &st->g;
	size_t es = dt_size(g->dt);
	size_t na = (size_t)cuda_numel(&k->in[0]), nb = (size_t)cuda_numel(&k->in[1]);
	size_t ny = (size_t)cuda_numel(&k->out[0]), nbias = (size_t)g->N;
	size_t ws = 0;
	for (int i = 0; i < n; i++)
		if (res[i].workspaceSize > ws)
			ws = res[i].workspaceSize;
	void *a = NULL, *b = NULL, *y = NULL, *bias = NULL, *w = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	int best = 0;
	*best_ms = 0;
	cudaStream_t s = k->ctx->stream;
	/* scratch memory is a nicety: without it the heuristic's first choice stands */
	if (cudaMalloc(&a, na * es) || cudaMalloc(&b, nb * es) || cudaMalloc(&y, ny * es) ||
	    (st->bias && cudaMalloc(&bias, nbias * es)) || (ws && cudaMalloc(&w, ws)) ||
	    cudaEventCreate(&e0) || cudaEventCreate(&e1))
		goto out;
	/* values in [-1, 1], not zeros: the tensor cores run faster on zeros than on
	 * real data, which would favour the wrong algorithm; no NaNs either */
	if (ogsh_gemm_fill_scratch(g->dt, a, (int64_t)na, 1, s) || ogsh_gemm_fill_scratch(g->dt, b, (int64_t)nb, 2, s) ||
	    ogsh_gemm_fill_scratch(g->dt, y, (int64_t)ny, 3, s) ||
	    (bias && ogsh_gemm_fill_scratch(g->dt, bias, (int64_t)nbias, 4, s)))
		goto out;
	if (set_epilogue(k, st, bias))
		goto out;
	float best_t = INFINITY;
	for (int i = 0; i < n; i++) {
		cublasStatus_t status;
		/* a warm-up run, then the timed ones */
		if (launch_mm(st, a, b, y, y, &res[i].algo, w, res[i].workspaceSize, s, &status))
			continue;
		if (cudaEventRecord(e0, s))
			break;
		bool ok = true;
		for (int r = 0; r < GEMM_TIME_RUNS && ok; r++)
			ok = !launch_mm(st, a, b, y, y, &res[i].algo, w, res[i].workspaceSize, s, &status);
		float ms = 0;
		if (cudaEventRecord(e1, s) || cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1))
			break;
		ms /= GEMM_TIME_RUNS;
		if (ok && ms < best_t) {
			best_t = ms;
			best = i;
		}
	}
	if (isfinite(best_t))
		*best_ms = best_t;
out:
	/* whatever failed above is not this node's error: finish the work and forget it */
	(void)cudaStreamSynchronize(s);
	(void)cudaGetLastError();
	if (e0)
		(void)cudaEventDestroy(e0);
	if (e1)
		(void)cudaEventDestroy(e1);
	cudaFree(a);
	cudaFree(b);
	cudaFree(y);
	cudaFree(bias);
	cudaFree(w);
	(void)cudaGetLastError();
	return best;
}

static void set_impl(struct cuda_kctx *k, const struct gemm_state *st)
{
	if (st->empty) {
		snprintf(k->impl, sizeof(k->impl), "none (empty output)");
		return;
	}
	if (st->skip_mm) {
		snprintf(k->impl, sizeof(k->impl), "ogsh gemm k=0%s%s%s", st->zpost ? " + Z" : "", st->post ? " + " : "",
			 st->post ? act_name(st->post) : "");
		return;
	}
	const char *fused = "";
	switch (st->ep) {
	case CUBLASLT_EPILOGUE_BIAS: fused = "+bias"; break;
	case CUBLASLT_EPILOGUE_RELU: fused = "+relu"; break;
	case CUBLASLT_EPILOGUE_RELU_BIAS: fused = "+bias+relu"; break;
	case CUBLASLT_EPILOGUE_GELU: fused = "+gelu"; break;
	case CUBLASLT_EPILOGUE_GELU_BIAS: fused = "+bias+gelu"; break;
	default: break;
	}
	snprintf(k->impl, sizeof(k->impl), "%scublasLt gemm%s%s%s%s%s%s", st->fill ? "ogsh fill C, " : "",
		 st->g.batch > 1 ? " batched" : "", st->zc ? "+residual" : "", fused, st->zpost ? ", ogsh add Z" : "",
		 st->post ? ", ogsh " : "", st->post ? act_name(st->post) : "");
}

static int prepare_gemm(struct cuda_kctx *k)
{
	char why[200];
	struct gemm_state *st = calloc(1, sizeof(*st));
	if (!st)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->state = st;
	k->ws_bytes = 0;
	if (!shape_of(k, &st->g, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	const struct gemm_shape *g = &st->g;
	if (g->M == 0 || g->N == 0 || g->batch == 0) {
		st->empty = true;
		set_impl(k, st);
		return 0;
	}
	if (g->K == 0) {
		/* no product: Y = act(beta * C + Z), or act(Z), or act(0) */
		st->skip_mm = true;
		st->fill = true;
		st->zpost = g->has_z;
		st->post = g->act.kind;
		set_impl(k, st);
		return 0;
	}
	st->lt = cuda_lt_api(k->d);
	if (!st->lt)
		return IR_ERR;
	st->h = cuda_cublaslt_handle(k->ctx, k->d);
	if (!st->h || make_descs(k, st))
		return IR_ERR;

	cublasLtMatmulHeuristicResult_t res[GEMM_MAX_ALGOS];
	int n = 0;
	for (int level = 0; level < 3 && n == 0; level++) {
		if (!plan_level(st, level))
			continue;
		if (set_epilogue(k, st, NULL) || heuristics(k, st, res, &n))
			return IR_ERR;
	}
	if (n == 0)
		return ir_diag_err(k->d, IR_ERR,
				   "cublasLtMatmulAlgoGetHeuristic: no algorithm for a %s product of [%lld,%lld] and "
				   "[%lld,%lld] (batch %lld)",
				   ir_dtype_name(g->dt), (long long)g->M, (long long)g->K, (long long)g->K, (long long)g->N,
				   (long long)g->batch);

	char key[256];
	tune_key(k, st, key, sizeof(key));
	int choice = 0;
	float ms = 0;
	if (k->ctx->tune && cuda_tune_get(k->ctx->tune, key, &choice, &ms) && choice >= 0 && choice < n) {
		/* remembered */
	} else if (k->ctx->tuning && n > 1) {
		choice = time_algos(k, st, res, n, &ms);
		if (k->ctx->tune && ms > 0)
			cuda_tune_put(k->ctx->tune, key, choice, ms);
	} else {
		choice = 0;
	}
	st->algo = res[choice].algo;
	k->ws_bytes = res[choice].workspaceSize;
	set_impl(k, st);
	return 0;
}

static bool aligned(const void *p)
{
	return ((uintptr_t)p % GEMM_ALIGN) == 0;
}

static int run_gemm(struct cuda_kctx *k)
{
	struct gemm_state *st = k->state;
	if (!st)
		return ir_diag_err(k->d, IR_ERR, "gemm was not prepared");
	const struct gemm_shape *g = &st->g;
	if (st->empty)
		return 0;
	void *y = k->out[0].data;
	const void *c = g->has_c ? k->in[2].data : NULL;
	cudaStream_t s = k->ctx->stream;
	if (st->fill) {
		/* only Gemm has C (and no batch); MatMul fills every batch with zeros when K is 0 */
		float scale = st->skip_mm ? g->beta : 1.0f;
		if (cuda_check(ogsh_gemm_fill_c(g->dt, y, c, g->batch * g->M, g->N, g->cm, g->cn, scale, s),
			       "ogsh_gemm_fill_c", k->d))
			return IR_ERR;
	}
	if (!st->skip_mm) {
		const void *a = k->in[0].data, *b = k->in[1].data;
		const void *cc = st->zc ? k->in[3].data : y;
		if (!aligned(a) || !aligned(b) || !aligned(y) || (st->bias && !aligned(c)) || !aligned(cc))
			return ir_diag_err(k->d, IR_ERR, "cublasLt gemm needs buffers aligned to %u bytes", GEMM_ALIGN);
		if (set_epilogue(k, st, c))
			return IR_ERR;
		cublasStatus_t status;
		if (launch_mm(st, a, b, cc, y, &st->algo, k->ws, k->ws_bytes, s, &status))
			return cuda_lt_check(status, "cublasLtMatmul", k->d);
	}
	if (st->zpost || st->post) {
		if (cuda_check(ogsh_gemm_epi(g->dt, y, st->zpost ? k->in[3].data : NULL, cuda_numel(&k->out[0]), st->post,
					     g->act.p0, g->act.p1, s),
			       "ogsh_gemm_epi", k->d))
			return IR_ERR;
	}
	return 0;
}

const struct cuda_kernel cuda_k_gemm[] = {
	{ IR_OP_MatMul, supports_gemm, prepare_gemm, run_gemm, release_gemm },
	{ IR_OP_Gemm, supports_gemm, prepare_gemm, run_gemm, release_gemm },
	{ IR_OP_ogsh_FusedGemm, supports_gemm, prepare_gemm, run_gemm, release_gemm },
	{ .op = -1 },
};
