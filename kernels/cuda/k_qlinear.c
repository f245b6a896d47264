/*
 * k_qlinear.c - the GPU entries of the planner's quantized islands
 * (exec/qfuse.h): ai.ogsh QConv and QGemm through ogsh's int8/FP8
 * implicit-GEMM kernel (k_qconv.cu), timed per shape among its variants.
 *
 * prepare re-lays the weights once (ONNX's [K][C/g][R][S] to [K][R][S][C/g];
 * a GEMM's to [N][K]) and folds the scales into one multiplier per output
 * channel: alpha = S_x * S_w / S_y, beta = bias / S_y, and the residual's
 * S_z / S_y (S_y = 1 when the island ends in float). Values not stored
 * channels-last are transposed through the workspace on the way in and out.
 */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/k_conv.h"
#include "kernels/cuda/k_qconv.h"
#include "kernels/cuda/k_qgemm.h"
#include "kernels/fused.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QL_TIME_RUNS 10

struct ql_state {
	struct kqc_conv p;       /* pointers alpha, beta set; z set per run */
	int variant;
	void *w;                 /* device: the re-laid weights */
	float *ab;               /* device: alpha then beta (k floats each) */
	bool x_t, z_t, y_t;      /* transposed through the workspace */
	size_t x_bytes, z_bytes, y_bytes;   /* their workspace parts */
	int ydt_nat;             /* y's element type */
	char name[80];
	/* a QGemm: cuBLASLt's int8/FP8 product and ogsh's epilogue, the
	 * candidate after the kernel's variants (variant == its count) */
	struct kqg_lt_plan *lt;
	struct kqg_lt ltp;
	size_t lt_ws;
};

static bool no(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool no(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && size)
		vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return false;
}

static bool has(const struct cuda_kctx *k, int i)
{
	return i < k->n_in && k->in[i].dtype != 0;
}

/* A scalar or per-channel host constant's element i as a double (float types). */
static double hval(const struct ir_tensor *t, int64_t i)
{
	return ir_tensor_get_f64(t, t->numel == 1 ? 0 : (uint64_t)i);
}

static int kq_type(int dt)
{
	return dt;   /* KQ_* are ONNX's numbers */
}

static size_t esize(int dt)
{
	return dt == IR_FLOAT ? 4 : dt == IR_FLOAT16 || dt == IR_BFLOAT16 ? 2 : 1;
}

static int conv_dtype(int dt)
{
	return dt == IR_FLOAT ? KCONV_F32 : dt == IR_FLOAT16 ? KCONV_F16 : dt == IR_BFLOAT16 ? KCONV_BF16 : KCONV_BYTE;
}

/* Reads the node into p (all but the device pointers) and the scales'
 * meaning; false with why. */
static bool read_node(const struct cuda_kctx *k, struct kqc_conv *p, char *why, size_t size)
{
	const struct ir_node *n = k->node;
	bool conv = n->op == IR_OP_ogsh_QConv;
	memset(p, 0, sizeof(*p));
	if (!has(k, 0) || !has(k, 1) || !has(k, 2) || !has(k, 3) || k->n_out < 1 || !k->out[0].dtype)
		return no(why, size, "the island lacks an input");
	const struct cuda_tensor *x = &k->in[0], *w = &k->in[2], *y = &k->out[0];
	if (x->dtype != IR_INT8 && x->dtype != IR_F8E4M3FN)
		return no(why, size, "the input is %s", ir_dtype_name(x->dtype));
	if (w->dtype != x->dtype || !w->host)
		return no(why, size, "the weights are not a constant of the input's type");
	for (int i = 1; i < 9; i++)
		if (i != 2 && i != 5 && has(k, i) && (!k->in[i].host || !cuda_is_float(k->in[i].dtype)))
			return no(why, size, "input %d is not a float constant", i);
	bool yq = has(k, 7);
	if (yq ? y->dtype != x->dtype : !cuda_is_float(y->dtype))
		return no(why, size, "the output is %s", ir_dtype_name(y->dtype));
	p->xdt = kq_type(x->dtype);
	p->e.ydt = kq_type(y->dtype);
	struct kern_act a;
	char w2[120];
	if (!kern_act_of(n, &a, w2, sizeof(w2)))
		return no(why, size, "%s", w2);
	if (a.kind != KACT_NONE && a.kind != KACT_RELU && a.kind != KACT_CLIP && a.kind != KACT_LEAKY)
		return no(why, size, "the activation %s is not in the epilogue", kern_act_name(a.kind));
	double sy = yq ? hval(k->in[7].host, 0) : 1.0;
	if (!(sy > 0) || !isfinite(sy))
		return no(why, size, "the output scale is not positive");
	p->e.act = a.kind;
	p->e.act0 = (float)(a.kind == KACT_CLIP ? a.p0 / sy : a.p0);
	p->e.act1 = (float)(a.kind == KACT_CLIP ? a.p1 / sy : a.p1);
	if (has(k, 8)) {   /* the product rounded to int8 of scale S_a first (qfuse.c: find_residual_add) */
		double sa = hval(k->in[8].host, 0);
		if (!(sa > 0) || !isfinite(sa) || k->in[8].host->numel != 1 || !yq || x->dtype != IR_INT8)
			return no(why, size, "the intermediate scale is not one positive value of an int8 island");
		p->e.mid = (float)(sa / sy);
	}
	if (has(k, 5)) {
		const struct cuda_tensor *z = &k->in[5];
		if (cuda_numel(z) != cuda_numel(y))
			return no(why, size, "the residual is not the output's size");
		if (has(k, 6)) {
			if (z->dtype != x->dtype)
				return no(why, size, "the quantized residual is %s", ir_dtype_name(z->dtype));
			p->e.zscale = (float)(hval(k->in[6].host, 0) / sy);
		} else {
			if (!cuda_is_float(z->dtype))
				return no(why, size, "the residual is %s", ir_dtype_name(z->dtype));
			p->e.zscale = (float)(1.0 / sy);
		}
		p->e.zdt = kq_type(z->dtype);
	}
	if (conv) {
		if (x->rank != 4 || w->rank != 4 || y->rank != 4)
			return no(why, size, "not a 2-D convolution");
		int64_t g = ir_node_attr_int(n, "group", 1);
		p->n = (int)x->dims[0];
		p->c = (int)x->dims[1];
		p->h = (int)x->dims[2];
		p->w = (int)x->dims[3];
		p->k = (int)w->dims[0];
		p->r = (int)w->dims[2];
		p->s = (int)w->dims[3];
		p->groups = (int)g;
		p->p = (int)y->dims[2];
		p->q = (int)y->dims[3];
		if (g < 1 || p->c % g || p->k % g || w->dims[1] != p->c / g || y->dims[1] != p->k || y->dims[0] != p->n)
			return no(why, size, "the weights do not match the channels and groups");
		int64_t st[2] = { 1, 1 }, dl[2] = { 1, 1 }, pd[4] = { 0, 0, 0, 0 };
		const struct ir_attr *at;
		if ((at = ir_node_attr(n, "strides")) && at->n == 2)
			memcpy(st, at->ints, sizeof(st));
		if ((at = ir_node_attr(n, "dilations")) && at->n == 2)
			memcpy(dl, at->ints, sizeof(dl));
		if ((at = ir_node_attr(n, "pads")) && at->n == 4)
			memcpy(pd, at->ints, sizeof(pd));
		const struct ir_attr *ap = ir_node_attr(n, "auto_pad");
		char apv[16] = "NOTSET";
		if (ap && ap->s.len && ap->s.len < sizeof(apv)) {
			memcpy(apv, ap->s.data, ap->s.len);
			apv[ap->s.len] = 0;
		}
		int64_t in[2] = { p->h, p->w }, ker[2] = { p->r, p->s }, out[2] = { p->p, p->q };
		for (int i = 0; i < 2; i++) {
			int64_t eff = (ker[i] - 1) * dl[i] + 1;
			if (!strcmp(apv, "SAME_UPPER") || !strcmp(apv, "SAME_LOWER")) {
				int64_t total = (out[i] - 1) * st[i] + eff - in[i];
				total = total < 0 ? 0 : total;
				pd[i] = !strcmp(apv, "SAME_UPPER") ? total / 2 : total - total / 2;
			} else if (!strcmp(apv, "VALID")) {
				pd[i] = 0;
			} else if (strcmp(apv, "NOTSET") && apv[0]) {
				return no(why, size, "auto_pad '%s'", apv);
			}
			if (st[i] < 1 || dl[i] < 1 || pd[i] < 0 || (in[i] + 2 * pd[i] + st[i]) > (int64_t)1 << 30)
				return no(why, size, "strides, dilations or pads out of range");
		}
		p->stride_h = (int)st[0];
		p->stride_w = (int)st[1];
		p->dil_h = (int)dl[0];
		p->dil_w = (int)dl[1];
		p->pad_h = (int)pd[0];
		p->pad_w = (int)pd[1];
	} else {
		bool tb = ir_node_attr_int(n, "transB", 0) != 0;
		if (x->rank < 2 || w->rank != 2)
			return no(why, size, "the product is not of a matrix by a 2-D weight");
		int64_t K = x->dims[x->rank - 1], N = tb ? w->dims[0] : w->dims[1];
		if ((tb ? w->dims[1] : w->dims[0]) != K || y->dims[y->rank - 1] != N)
			return no(why, size, "the weights do not match the input");
		int64_t M = cuda_numel(x) / (K ? K : 1);
		if (M > INT32_MAX || K > INT32_MAX || N > INT32_MAX)
			return no(why, size, "the product is too large");
		p->n = (int)M;
		p->h = p->w = p->p = p->q = 1;
		p->c = (int)K;
		p->k = (int)N;
		p->r = p->s = 1;
		p->groups = 1;
		p->stride_h = p->stride_w = p->dil_h = p->dil_w = 1;
	}
	/* scales */
	if (k->in[1].host->numel != 1)
		return no(why, size, "the input scale is not one value");
	if (k->in[3].host->numel != 1 && (int64_t)k->in[3].host->numel != p->k)
		return no(why, size, "the weight scales are not one per output channel");
	if (has(k, 4) && (int64_t)k->in[4].host->numel != p->k)
		return no(why, size, "the bias is not one per output channel");
	return kqc_supported(p, why, size);
}

static bool supports_q(const struct cuda_kctx *k, char *why, size_t size)
{
	struct kqc_conv p;
	if (!read_node(k, &p, why, size))
		return false;
	bool conv = k->node->op == IR_OP_ogsh_QConv;
	if (!conv && (k->in[0].nhwc || k->out[0].nhwc))
		return no(why, size, "a GEMM's values are not channels-last");
	return true;
}

static void release_q(void *state)
{
	struct ql_state *s = state;
	if (!s)
		return;
	/* errors of cudaFree are of no use here (a broken context shows in the next call) */
	if (s->w)
		cudaFree(s->w);
	if (s->ab)
		cudaFree(s->ab);
	kqg_lt_free(s->lt);
	free(s);
}

/* The weights as the kernel reads them: [K][R][S][C/g] (a GEMM: [N][K]). */
static void *relayout(const struct cuda_kctx *k, const struct kqc_conv *p, size_t *bytes)
{
	const struct ir_tensor *w = k->in[2].host;
	const uint8_t *src = ir_tensor_data(w);
	size_t n = (size_t)w->numel;
	uint8_t *dst = malloc(n ? n : 1);
	if (!dst || (!src && n))
		return free(dst), NULL;
	*bytes = n;
	if (k->node->op == IR_OP_ogsh_QConv) {
		int64_t cg = p->c / p->groups, rs = (int64_t)p->r * p->s;
		for (int64_t o = 0; o < p->k; o++)
			for (int64_t c = 0; c < cg; c++)
				for (int64_t i = 0; i < rs; i++)
					dst[(o * rs + i) * cg + c] = src[(o * cg + c) * rs + i];
	} else if (ir_node_attr_int(k->node, "transB", 0)) {
		memcpy(dst, src, n);
	} else {
		/* [K][N] -> [N][K] */
		for (int64_t kk = 0; kk < p->c; kk++)
			for (int64_t j = 0; j < p->k; j++)
				dst[j * p->c + kk] = src[kk * p->k + j];
	}
	return dst;
}

/* One launch of variant v (v == the kernel's variant count: cuBLASLt). */
static int launch(struct ql_state *s, int nv, int v, const struct kqc_conv *p, const void *x, void *y, void *ws,
		  cudaStream_t st, char *why, size_t size)
{
	if (v == nv && s->lt) {
		struct kqg_lt lp = s->ltp;
		lp.z = p->z;
		return kqg_lt_run(s->lt, &lp, x, s->w, y, ws, st, why, size);
	}
	cudaError_t e = kqc_conv(p, v, x, s->w, y, st);
	if (e != cudaSuccess) {
		snprintf(why, size, "kqc_conv: cuda error %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
		return -1;
	}
	return 0;
}

/* Times variant v (zeroed scratch buffers); <0 when it fails. */
static float time_variant(struct cuda_kctx *k, struct ql_state *s, int nv, int v, void *x, void *y, void *z,
			  void *ws)
{
	cudaStream_t st = k->ctx->stream;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms = -1;
	struct kqc_conv p = s->p;
	p.z = z;
	char why[160];
	if (cudaEventCreate(&e0) || cudaEventCreate(&e1))
		goto out;
	if (launch(s, nv, v, &p, x, y, ws, st, why, sizeof(why)))
		goto out;
	if (cudaEventRecord(e0, st))
		goto out;
	for (int i = 0; i < QL_TIME_RUNS; i++)
		if (launch(s, nv, v, &p, x, y, ws, st, why, sizeof(why)))
			goto out;
	float t = 0;
	if (cudaEventRecord(e1, st) || cudaEventSynchronize(e1) || cudaEventElapsedTime(&t, e0, e1))
		goto out;
	ms = t / QL_TIME_RUNS;
out:
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	cudaGetLastError();   /* a failed variant leaves no sticky error: the others may still run */
	return ms;
}

static int pick_variant(struct cuda_kctx *k, struct ql_state *s)
{
	int nv = kqc_variants(&s->p);
	if (nv < 1)
		return ir_diag_err(k->d, IR_ERR, "the integer kernel offers no variant for this shape");
	const struct kqc_conv *p = &s->p;
	char key[256];
	snprintf(key, sizeof(key), "qconv x%d y%d z%d n%d h%d w%d c%d k%d r%d s%d g%d p%d q%d st%d,%d d%d,%d pd%d,%d",
		 p->xdt, p->e.ydt, p->e.zdt, p->n, p->h, p->w, p->c, p->k, p->r, p->s, p->groups, p->p, p->q,
		 p->stride_h, p->stride_w, p->dil_h, p->dil_w, p->pad_h, p->pad_w);
	int nc = nv + (s->lt != NULL);   /* candidates: the variants, then cuBLASLt */
	if (s->lt)
		snprintf(key + strlen(key), sizeof(key) - strlen(key), " lt");
	int choice = 0;
	float ms;
	if (k->ctx->tune && cuda_tune_get(k->ctx->tune, key, &choice, &ms) && choice >= 0 && choice < nc) {
		s->variant = choice;
		return 0;
	}
	s->variant = 0;
	if (!k->ctx->tuning || nc == 1)
		return 0;
	size_t xb = (size_t)p->n * p->h * p->w * p->c, yb = (size_t)p->n * p->p * p->q * p->k * esize(s->ydt_nat);
	size_t zb = p->e.zdt ? (size_t)p->n * p->p * p->q * p->k * esize(p->e.zdt) : 0;
	void *x = NULL, *y = NULL, *z = NULL, *ws = NULL;
	/* scratch memory is a nicety: without it the first variant stands
	 * (out of memory while tuning is survived) */
	if (cudaMalloc(&x, xb ? xb : 1) || cudaMalloc(&y, yb ? yb : 1) || (zb && cudaMalloc(&z, zb)) ||
	    (s->lt && cudaMalloc(&ws, s->lt_ws ? s->lt_ws : 1)) ||
	    cudaMemsetAsync(x, 0, xb, k->ctx->stream) || (z && cudaMemsetAsync(z, 0, zb, k->ctx->stream))) {
		cudaGetLastError();
		goto out;
	}
	float best = INFINITY;
	for (int v = 0; v < nc; v++) {
		float t = time_variant(k, s, nv, v, x, y, z, ws);
		if (t >= 0 && t < best) {
			best = t;
			s->variant = v;
		}
	}
	if (k->ctx->tune && isfinite(best))
		cuda_tune_put(k->ctx->tune, key, s->variant, best);
out:
	if (x)
		cudaFree(x);
	if (y)
		cudaFree(y);
	if (z)
		cudaFree(z);
	if (ws)
		cudaFree(ws);
	cudaGetLastError();
	return 0;
}

static int prepare_q(struct cuda_kctx *k)
{
	struct ql_state *s = calloc(1, sizeof(*s));
	if (!s)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->state = s;
	char why[160];
	if (!read_node(k, &s->p, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	struct kqc_conv *p = &s->p;
	s->ydt_nat = k->out[0].dtype;
	/* scales folded per output channel */
	float *ab = malloc(sizeof(float) * 2 * (size_t)p->k);
	if (!ab)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	double sx = hval(k->in[1].host, 0), sy = has(k, 7) ? hval(k->in[7].host, 0) : 1.0;
	if (has(k, 8))   /* alpha and beta in units of the intermediate int8's scale */
		sy = hval(k->in[8].host, 0);
	for (int i = 0; i < p->k; i++) {
		ab[i] = (float)(sx * hval(k->in[3].host, i) / sy);
		ab[p->k + i] = has(k, 4) ? (float)(hval(k->in[4].host, i) / sy) : 0.0f;
	}
	size_t wbytes = 0;
	void *hw = relayout(k, p, &wbytes);
	int rc = 0;
	if (!hw)
		rc = ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	if (!rc)
		rc = cuda_check(cudaMalloc(&s->w, wbytes ? wbytes : 1), "cudaMalloc (island weights)", k->d);
	if (!rc)
		rc = cuda_check(cudaMalloc((void **)&s->ab, sizeof(float) * 2 * (size_t)p->k), "cudaMalloc (island scales)",
				k->d);
	if (!rc)
		rc = cuda_check(cudaMemcpy(s->w, hw, wbytes, cudaMemcpyHostToDevice), "cudaMemcpy (island weights)", k->d);
	if (!rc)
		rc = cuda_check(cudaMemcpy(s->ab, ab, sizeof(float) * 2 * (size_t)p->k, cudaMemcpyHostToDevice),
				"cudaMemcpy (island scales)", k->d);
	free(hw);
	free(ab);
	if (rc)
		return rc;
	p->alpha = s->ab;
	p->beta = has(k, 4) ? s->ab + p->k : NULL;
	/* layouts */
	bool conv = k->node->op == IR_OP_ogsh_QConv;
	size_t ynum = (size_t)p->n * p->p * p->q * p->k;
	s->x_t = conv && !k->in[0].nhwc && p->c > 1 && (p->h * p->w) > 1;
	s->z_t = conv && has(k, 5) && !k->in[5].nhwc && p->k > 1 && (p->p * p->q) > 1;
	s->y_t = conv && !k->out[0].nhwc && p->k > 1 && (p->p * p->q) > 1;
	s->x_bytes = s->x_t ? ((size_t)p->n * p->h * p->w * p->c + 255) / 256 * 256 : 0;
	s->z_bytes = s->z_t ? (ynum * esize(k->in[5].dtype) + 255) / 256 * 256 : 0;
	s->y_bytes = s->y_t ? (ynum * esize(s->ydt_nat) + 255) / 256 * 256 : 0;
	k->ws_bytes = s->x_bytes + s->z_bytes + s->y_bytes;
	/* an int8 GEMM: cuBLASLt's int8 product too, when it takes the shape
	 * (a refusal only leaves ogsh's kernel). Not FP8: on the H200 its E4M3
	 * products near zero land up to 30 E4M3 steps from the CPU's (Hopper's
	 * FP8 accumulation), where ogsh's kernel stays within one (gpu-islands) */
	const char *lt_env = getenv("OGSH_QGEMM_LT");   /* "0": only ogsh's kernel (to compare) */
	if (!conv && p->xdt == KQ_INT8 && !(lt_env && !strcmp(lt_env, "0"))) {
		s->ltp = (struct kqg_lt){ .m = p->n, .n = p->k, .k = p->c, .xdt = p->xdt, .e = p->e,
					  .alpha = p->alpha, .beta = p->beta };
		char lwhy[160];
		if (!kqg_lt_check(&s->ltp, lwhy, sizeof(lwhy))) {
			struct ir_diag hd;
			ir_diag_init(&hd);
			void *h = cuda_cublaslt_handle(k->ctx, &hd);
			ir_diag_clear(&hd);
			if (h)
				s->lt = kqg_lt_prepare(h, &s->ltp, &s->lt_ws, lwhy, sizeof(lwhy));
		}
	}
	rc = pick_variant(k, s);
	if (rc)
		return rc;
	if (s->lt && s->variant == kqc_variants(p)) {
		if (k->ws_bytes < s->lt_ws)
			k->ws_bytes = s->lt_ws;
		snprintf(k->impl, sizeof(k->impl), "cublasLt %s gemm + ogsh epilogue",
			 p->xdt == KQ_INT8 ? "int8" : "fp8");
	} else {
		kqg_lt_free(s->lt);   /* not chosen: its plan is not kept */
		s->lt = NULL;
		snprintf(k->impl, sizeof(k->impl), "ogsh %s", kqc_variant_name(p, s->variant));
	}
	return 0;
}

static int run_q(struct cuda_kctx *k)
{
	struct ql_state *s = k->state;
	if (!s)
		return ir_diag_err(k->d, IR_ERR, "the island was not prepared");
	struct kqc_conv p = s->p;
	cudaStream_t st = k->ctx->stream;
	char *ws = k->ws;
	const void *x = k->in[0].data;
	void *y = k->out[0].data;
	p.z = has(k, 5) ? k->in[5].data : NULL;
	if (s->x_t) {
		kconv_launch_to_nhwc(KCONV_BYTE, x, ws, p.n, p.c, (int64_t)p.h * p.w, st);
		if (cuda_check_launch("transpose (island input)", k->d))
			return IR_ERR;
		x = ws;
	}
	if (s->z_t) {
		void *zt = ws + s->x_bytes;
		kconv_launch_to_nhwc(conv_dtype(k->in[5].dtype), p.z, zt, p.n, p.k, (int64_t)p.p * p.q, st);
		if (cuda_check_launch("transpose (island residual)", k->d))
			return IR_ERR;
		p.z = zt;
	}
	void *dst = s->y_t ? ws + s->x_bytes + s->z_bytes : y;
	char why[160];
	if (launch(s, kqc_variants(&p), s->variant, &p, x, dst, ws, st, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	if (s->y_t) {
		struct kconv_epilogue e;
		memset(&e, 0, sizeof(e));
		e.channels = p.k;
		e.inner = (int64_t)p.p * p.q;
		e.n = (int64_t)p.n * p.k * e.inner;
		kconv_launch_from_nhwc(conv_dtype(s->ydt_nat), dst, y, NULL, NULL, &e, p.n, st);
		if (cuda_check_launch("transpose (island output)", k->d))
			return IR_ERR;
	}
	return 0;
}

/* ---- MatMulW4: float activations times blocked int4 weights ---- */

struct w4_state {
	struct kqg_w4_layout l;
	void *packed;              /* device */
	struct kqg_w4_plan *pl;
};

static bool read_w4(const struct cuda_kctx *k, struct kqg_w4_src *src, int *m, char *why, size_t size)
{
	if (!has(k, 0) || !has(k, 1) || !has(k, 2) || k->n_out < 1 || !k->out[0].dtype)
		return no(why, size, "the node lacks an input");
	const struct cuda_tensor *x = &k->in[0], *w = &k->in[1], *sc = &k->in[2], *y = &k->out[0];
	if (!cuda_is_float(x->dtype) || y->dtype != x->dtype)
		return no(why, size, "the activation is %s", ir_dtype_name(x->dtype));
	if ((w->dtype != IR_INT4 && w->dtype != IR_UINT4) || !w->host || w->rank != 2)
		return no(why, size, "the weights are not a 2-D int4/uint4 constant");
	if (!sc->host || !cuda_is_float(sc->dtype) || (has(k, 3) && (!k->in[3].host || k->in[3].dtype != w->dtype)))
		return no(why, size, "the scales or zero points are not constants");
	if (x->nhwc || y->nhwc)
		return no(why, size, "channels-last values");
	int64_t K = w->dims[0], N = w->dims[1], bs = ir_node_attr_int(k->node, "block_size", 0);
	if (x->rank < 1 || x->dims[x->rank - 1] != K || y->dims[y->rank - 1] != N)
		return no(why, size, "the weights do not match the input");
	if (bs < 1 || bs > 4096 || sc->rank != 2 || sc->dims[1] != N || sc->dims[0] * bs != K)
		return no(why, size, "the scales are not [K/%lld, N]", (long long)bs);
	int64_t M = cuda_numel(x) / (K ? K : 1);
	if (M < 1 || M > INT32_MAX)
		return no(why, size, "%lld rows", (long long)M);
	*m = (int)M;
	*src = (struct kqg_w4_src){ .wdt = w->dtype, .wq = ir_tensor_data(w->host), .sdt = sc->dtype,
				    .scale = ir_tensor_data(sc->host), .zp = has(k, 3) ? ir_tensor_data(k->in[3].host) : NULL,
				    .k = K, .n = N, .bs = (int)bs };
	return kqg_w4_check(K, N, (int)bs, why, size) == 0;
}

static bool supports_w4(const struct cuda_kctx *k, char *why, size_t size)
{
	struct kqg_w4_src src;
	int m;
	return read_w4(k, &src, &m, why, size);
}

static void release_w4(void *state)
{
	struct w4_state *s = state;
	if (!s)
		return;
	if (s->pl)
		kqg_w4_free(s->pl);
	if (s->packed)
		cudaFree(s->packed);
	free(s);
}

static int prepare_w4(struct cuda_kctx *k)
{
	struct w4_state *s = calloc(1, sizeof(*s));
	if (!s)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->state = s;
	struct kqg_w4_src src;
	int m;
	char why[160];
	if (!read_w4(k, &src, &m, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	void *buf = NULL;
	if (kqg_w4_pack(&src, &s->l, &buf, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	int rc = cuda_check(cudaMalloc(&s->packed, s->l.bytes), "cudaMalloc (int4 weights)", k->d);
	if (!rc)
		rc = cuda_check(cudaMemcpy(s->packed, buf, s->l.bytes, cudaMemcpyHostToDevice), "cudaMemcpy (int4 weights)",
				k->d);
	free(buf);
	if (rc)
		return rc;
	void *lt = m > KQG_W4_MAX_M ? cuda_cublaslt_handle(k->ctx, k->d) : NULL;
	if (m > KQG_W4_MAX_M && !lt)
		return IR_ERR;
	size_t ws = 0;
	s->pl = kqg_w4_prepare(lt, &s->l, k->in[0].dtype, m, 0, KQG_W4_AUTO, &ws, why, sizeof(why));
	if (!s->pl)
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	k->ws_bytes = ws;
	snprintf(k->impl, sizeof(k->impl), "ogsh %s", kqg_w4_impl(s->pl));
	return 0;
}

static int run_w4(struct cuda_kctx *k)
{
	struct w4_state *s = k->state;
	if (!s || !s->pl)
		return ir_diag_err(k->d, IR_ERR, "the int4 MatMul was not prepared");
	char why[160];
	if (kqg_w4_run(s->pl, s->packed, k->in[0].data, NULL, k->out[0].data, k->ws, k->ctx->stream, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	return 0;
}

const struct cuda_kernel cuda_k_qlinear[] = {
	{ IR_OP_ogsh_MatMulW4, supports_w4, prepare_w4, run_w4, release_w4 },
	{ IR_OP_ogsh_QConv, supports_q, prepare_q, run_q, release_q },
	{ IR_OP_ogsh_QGemm, supports_q, prepare_q, run_q, release_q },
	{ .op = -1 },
};
