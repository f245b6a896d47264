/*
 * k_conv.c - GPU kernel entries of the conv family: Conv, ConvTranspose,
 * ai.ogsh FusedConv, MaxPool, AveragePool and LRN through cuDNN's legacy API
 * (opened with dlopen, libs_cudnn.c), with our own kernels (k_conv.cu) for
 * what cuDNN does not do: asymmetric pads (the input is padded into the
 * workspace, or a ConvTranspose output cropped from it) and the epilogue
 * (bias, residual Z, any activation of FusedConv). A conv whose kernel is
 * its stride (ViT's patch embedding) runs as patches and one cuBLASLt
 * product instead (see "The patch GEMM" below).
 *
 * To add a kernel: write supports/prepare/run here and list them in
 * cuda_k_conv[] at the end of the file.
 *
 * Algorithms: with ctx->tuning, prepare times the candidates
 * (cudnnFind*AlgorithmEx on scratch buffers) and keeps the fastest in the
 * tuning cache; otherwise the cached choice or cuDNN's first heuristic
 * choice. float32 runs without TF32 unless ctx->tf32.
 */
#include "kernels/cuda/cudnn_api.h"
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/fused.h"
#include "kernels/cuda/k_conv.h"

#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS_LIMIT ((size_t)256 << 20)   /* the most workspace an algorithm may take */
#define MAX_SP KCONV_MAX_SPATIAL

/* ------------------------------------------------------------------------ */
/* Attributes and geometry                                                   */
/* ------------------------------------------------------------------------ */

static const int64_t *attr_ints(const struct ir_node *n, const char *name, int *cnt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	*cnt = 0;
	if (!a || a->type != IR_ATTR_INTS)
		return NULL;
	*cnt = (int)a->n;
	return a->ints;
}

__attribute__((noinline)) static const char *attr_s(const struct ir_node *n, const char *name, const char *dflt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a || a->type != IR_ATTR_STRING)
		return dflt;
	return a->s.data ? a->s.data : "";
}

/* cnt values of ints attribute `name` (dflt each when absent), each >= min. */
static bool ints_n(const struct ir_node *n, const char *name, int cnt, int64_t *v, int64_t dflt, int64_t min,
		   char *why, size_t size)
{
	int have;
	const int64_t *a = attr_ints(n, name, &have);
	for (int i = 0; i < cnt; i++)
		v[i] = dflt;
	if (!a)
		return true;
	if (have != cnt) {
		snprintf(why, size, "%s has %d values, %d expected", name, have, cnt);
		return false;
	}
	for (int i = 0; i < cnt; i++) {
		if (a[i] < min || a[i] > INT_MAX / 4) {
			snprintf(why, size, "%s value %lld is out of range", name, (long long)a[i]);
			return false;
		}
		v[i] = a[i];
	}
	return true;
}

/* One convolution or pool. For ConvTranspose `in` is X (the small side)
 * and `out` is Y; out position o and tap q meet input position
 * o*str - pb + q*dil either way. */
struct geom {
	int nd;
	int64_t N, C, M, G;
	int64_t in[MAX_SP], ker[MAX_SP], out[MAX_SP], str[MAX_SP], dil[MAX_SP], pb[MAX_SP], pe[MAX_SP];
};

static const char *dtname(int dt)
{
	return ir_dtype_name(dt);
}

static bool no(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool no(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return false;
}

/* Whether t fits cuDNN's int dims and strides. */
static bool fits_int(const struct cuda_tensor *t)
{
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i] > INT_MAX)
			return false;
	return cuda_numel(t) < INT_MAX;
}

/* The planner's output dims against ours. */
static bool out_matches(const struct cuda_kctx *k, const struct geom *g, char *why, size_t size)
{
	const struct cuda_tensor *y = &k->out[0];
	bool ok = y->rank == g->nd + 2 && y->dims[0] == g->N && y->dims[1] == g->M;
	for (int i = 0; ok && i < g->nd; i++)
		ok = y->dims[i + 2] == g->out[i];
	if (!ok)
		return no(why, size, "the output shape does not match the convolution's");
	return true;
}

/* Conv/ConvTranspose/FusedConv geometry from X, W and the attributes (the
 * rules of kernels/cpu/k_conv.c's conv_geom). */
static bool conv_geom(const struct cuda_kctx *k, bool transpose, struct geom *g, char *why, size_t size)
{
	const struct ir_node *n = k->node;
	const struct cuda_tensor *x = &k->in[0], *w = &k->in[1];
	memset(g, 0, sizeof(*g));
	if (x->rank < 3 || x->rank > 2 + MAX_SP)
		return no(why, size, "%d-d convolutions are not supported on the GPU", x->rank - 2);
	if (w->rank != x->rank)
		return no(why, size, "weight and input differ in rank");
	int nd = g->nd = x->rank - 2;
	g->N = x->dims[0];
	g->C = x->dims[1];
	g->G = ir_node_attr_int(n, "group", 1);
	if (g->G < 1 || g->G > (g->C > 0 ? g->C : 1) || g->C % g->G)
		return no(why, size, "group %lld does not divide %lld channels", (long long)g->G, (long long)g->C);
	if (transpose) {
		if (w->dims[0] != g->C)
			return no(why, size, "weight does not match the input channels");
		g->M = w->dims[1] * g->G;
	} else {
		g->M = w->dims[0];
		if (g->M % g->G || w->dims[1] != g->C / g->G)
			return no(why, size, "weight does not match the channels and groups");
	}
	int cnt;
	const int64_t *ks = attr_ints(n, "kernel_shape", &cnt);
	if (ks && cnt != nd)
		return no(why, size, "kernel_shape has %d values, %d expected", cnt, nd);
	for (int i = 0; i < nd; i++) {
		g->in[i] = x->dims[i + 2];
		g->ker[i] = w->dims[i + 2];
		if (ks && ks[i] != g->ker[i])
			return no(why, size, "kernel_shape does not match the weight");
		if (g->ker[i] < 1)
			return no(why, size, "the kernel is empty");
	}
	int64_t pads[2 * MAX_SP];
	if (!ints_n(n, "strides", nd, g->str, 1, 1, why, size) || !ints_n(n, "dilations", nd, g->dil, 1, 1, why, size) ||
	    !ints_n(n, "pads", 2 * nd, pads, 0, transpose ? -(INT_MAX / 4) : 0, why, size))
		return false;
	const char *ap = attr_s(n, "auto_pad", "NOTSET");
	bool upper = !strcmp(ap, "SAME_UPPER"), same = upper || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
	if (!same && !valid && strcmp(ap, "NOTSET") && *ap)
		return no(why, size, "auto_pad '%s' is not supported", ap);
	if (transpose) {
		int64_t opad[MAX_SP];
		if (!ints_n(n, "output_padding", nd, opad, 0, 0, why, size))
			return false;
		const int64_t *os = attr_ints(n, "output_shape", &cnt);
		if (os && cnt != nd && cnt != nd + 2)
			return no(why, size, "output_shape has %d values, %d expected", cnt, nd);
		if (os)
			os += cnt - nd;
		for (int i = 0; i < nd; i++) {
			if (opad[i] >= g->str[i])
				return no(why, size, "output_padding not below the stride is not supported on the GPU");
			int64_t eff = (g->ker[i] - 1) * g->dil[i] + 1;
			int64_t full = g->str[i] * (g->in[i] - 1) + opad[i] + eff;
			if (os || same) {
				int64_t o = os ? os[i] : g->in[i] * g->str[i];
				int64_t total = full - o;
				int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
				g->out[i] = o;
				if (upper) {
					g->pb[i] = half;
					g->pe[i] = total - half;
				} else {
					g->pe[i] = half;
					g->pb[i] = total - half;
				}
			} else {
				if (!valid) {
					g->pb[i] = pads[i];
					g->pe[i] = pads[nd + i];
				}
				g->out[i] = full - g->pb[i] - g->pe[i];
			}
		}
	} else {
		for (int i = 0; i < nd; i++) {
			int64_t eff = (g->ker[i] - 1) * g->dil[i] + 1;
			if (same) {
				g->out[i] = (g->in[i] + g->str[i] - 1) / g->str[i];
				int64_t total = (g->out[i] - 1) * g->str[i] + eff - g->in[i];
				if (total < 0)
					total = 0;
				g->pb[i] = upper ? total / 2 : total - total / 2;
				g->pe[i] = total - g->pb[i];
			} else {
				if (!valid) {
					g->pb[i] = pads[i];
					g->pe[i] = pads[nd + i];
				}
				int64_t span = g->in[i] + g->pb[i] + g->pe[i] - eff;
				if (span < 0)
					return no(why, size, "the kernel is larger than the padded input");
				g->out[i] = span / g->str[i] + 1;
			}
		}
	}
	return out_matches(k, g, why, size);
}

/* Makes a 1-d geometry 2-d (a leading spatial axis of 1): cuDNN wants 4 dims or more. */
static void promote(struct geom *g)
{
	if (g->nd != 1)
		return;
	int64_t *a[] = { g->in, g->ker, g->out, g->str, g->dil, g->pb, g->pe };
	int64_t one[] = { 1, 1, 1, 1, 1, 0, 0 };
	for (int j = 0; j < 7; j++) {
		a[j][1] = a[j][0];
		a[j][0] = one[j];
	}
	g->nd = 2;
}

/* ------------------------------------------------------------------------ */
/* Activations of FusedConv (as kernels/cpu/k_fused.c reads them)            */
/* ------------------------------------------------------------------------ */

struct act {
	int kind;
	float p0, p1;
};

static bool act_of(const struct ir_node *n, struct act *a, char *why, size_t size)
{
	static const int conv_act[] = {
		[KACT_NONE] = KCONV_ACT_NONE, [KACT_RELU] = KCONV_ACT_RELU, [KACT_CLIP] = KCONV_ACT_CLIP,
		[KACT_LEAKY] = KCONV_ACT_LEAKY, [KACT_SIGMOID] = KCONV_ACT_SIGMOID, [KACT_HSIGMOID] = KCONV_ACT_HSIGMOID,
		[KACT_HSWISH] = KCONV_ACT_HSWISH, [KACT_TANH] = KCONV_ACT_TANH, [KACT_GELU] = KCONV_ACT_GELU_ERF,
	};
	struct kern_act ka;
	if (!kern_act_of(n, &ka, why, size))
		return false;
	if (ka.kind < 0 || (size_t)ka.kind >= sizeof(conv_act) / sizeof(conv_act[0]))
		return no(why, size, "activation '%s' is not supported on the GPU", kern_act_name(ka.kind));
	a->kind = conv_act[ka.kind];
	a->p0 = (float)ka.p0;
	a->p1 = (float)ka.p1;
	if (ka.kind == KACT_GELU && ka.p0 == 1)
		a->kind = KCONV_ACT_GELU_TANH;
	return true;
}

/* ------------------------------------------------------------------------ */
/* cuDNN descriptors                                                         */
/* ------------------------------------------------------------------------ */

static cudnnDataType_t dnn_type(int dt)
{
	return dt == IR_FLOAT16 ? CUDNN_DATA_HALF : dt == IR_BFLOAT16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

static size_t dt_size(int dt)
{
	return dt == IR_FLOAT ? 4 : 2;
}

static size_t align256(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

/* A packed NC... tensor descriptor: [a, b, sp[0..nd)]. */
static int set_tensor(const struct cudnn_api *api, cudnnTensorDescriptor_t td, int dt, int64_t a, int64_t b,
		      int nd, const int64_t *sp, struct ir_diag *d)
{
	int dims[2 + MAX_SP], strides[2 + MAX_SP];
	dims[0] = (int)a;
	dims[1] = (int)b;
	for (int i = 0; i < nd; i++)
		dims[i + 2] = (int)sp[i];
	int64_t s = 1;
	for (int i = nd + 1; i >= 0; i--) {
		strides[i] = (int)s;
		s *= dims[i];
	}
	return cuda_cudnn_check(api->SetTensorNdDescriptor(td, dnn_type(dt), nd + 2, dims, strides),
				"cudnnSetTensorNdDescriptor", d);
}

/* A packed channels-last 4-D descriptor: dims [a, b, h, w], memory [a, h, w, b]. */
static int set_tensor_nhwc(const struct cudnn_api *api, cudnnTensorDescriptor_t td, int dt, int64_t a, int64_t b,
			   const int64_t *sp, struct ir_diag *d)
{
	int dims[4] = { (int)a, (int)b, (int)sp[0], (int)sp[1] };
	int strides[4] = { (int)(b * sp[0] * sp[1]), 1, (int)(sp[1] * b), (int)b };
	return cuda_cudnn_check(api->SetTensorNdDescriptor(td, dnn_type(dt), 4, dims, strides),
				"cudnnSetTensorNdDescriptor", d);
}

/* ------------------------------------------------------------------------ */
/* Convolutions                                                              */
/* ------------------------------------------------------------------------ */

enum { CONV_FWD, CONV_BWD };   /* cudnnConvolutionForward, or BackwardData for ConvTranspose */

struct conv_state {
	const struct cudnn_api *api;
	int dir, dt;
	struct geom g;   /* promoted to 2-d or more */
	cudnnTensorDescriptor_t xd, yd, bd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	cudnnActivationDescriptor_t ad;
	cudnnMathType_t math;
	int algo;
	size_t algo_ws;
	size_t buf_bytes;        /* the pad or crop buffer at the start of the workspace */
	bool pad_x;              /* X padded into the buffer (asymmetric pads) */
	bool crop_y;             /* ConvTranspose: the result goes to the buffer, Y is cut from it */
	struct kconv_window win;
	bool fused;              /* cudnnConvolutionBiasActivationForward (relu) */
	void *zero_bias;         /* device zeros for a fused conv without B */
	bool epilogue;
	struct kconv_epilogue ep;
	int bias_in, z_in;       /* inputs of B and Z, -1 when absent */
	bool nhwc;               /* X or Y is channels-last (the planner's choice, see conv_prepare_any) */
	bool xcl, ycl;           /* which */
	bool cl_nchw;            /* no channels-last algorithm: NCHW between transposes */
	void *w_nhwc;            /* W as [M, kh, kw, C/G] (owned) */
	size_t xt_bytes, yt_bytes;   /* workspace for X and the result transposed */
	struct kconv_epilogue ep_cl, ep_tx;   /* the epilogue on channels-last Y; X back to NCHW */
	struct cg_conv *cg;      /* the convolution through cuDNN's graph API, or NULL (legacy API) */
	bool cg_fused;           /* cg computes bias, Z and the activation too */
	bool dw;                 /* depthwise channels-last: our kernel (w_nhwc is W as [kh*kw][C]) */
	bool dw_nchw;            /* depthwise NCHW: our tiled kernel on W as it is */
	int cpad;                /* X of fewer than 8 channels padded to 8 in xt (and W so), or 0 */
	struct kconv_dw dwp;
	struct patch_gemm *pg;   /* the patch GEMM, or NULL (then cuDNN or the depthwise kernels) */
};

struct cg_conv;
static void cg_free(struct cg_conv *c);
struct patch_gemm;
static void patch_free(struct patch_gemm *pg);

static void conv_release(void *p)
{
	struct conv_state *s = p;
	if (!s)
		return;
	if (s->api) {
		if (s->xd)
			s->api->DestroyTensorDescriptor(s->xd);
		if (s->yd)
			s->api->DestroyTensorDescriptor(s->yd);
		if (s->bd)
			s->api->DestroyTensorDescriptor(s->bd);
		if (s->wd)
			s->api->DestroyFilterDescriptor(s->wd);
		if (s->cd)
			s->api->DestroyConvolutionDescriptor(s->cd);
		if (s->ad)
			s->api->DestroyActivationDescriptor(s->ad);
	}
	if (s->zero_bias)
		cudaFree(s->zero_bias);
	if (s->w_nhwc)
		cudaFree(s->w_nhwc);
	cg_free(s->cg);
	patch_free(s->pg);
	free(s);
}

static bool present(const struct cuda_kctx *k, int i)
{
	return i < k->n_in && k->in[i].dtype != 0;
}

static bool conv_supports_any(const struct cuda_kctx *k, bool transpose, bool fused, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0], *w = &k->in[1], *y = &k->out[0];
	int dt = x->dtype;
	if (!cuda_is_float(dt))
		return no(why, size, "dtype %s is not supported on the GPU", dtname(dt));
	if (w->dtype != dt || y->dtype != dt)
		return no(why, size, "inputs and output differ in dtype");
	if (present(k, 2)) {
		const struct cuda_tensor *b = &k->in[2];
		if (b->dtype != dt || b->rank != 1)
			return no(why, size, "bias must be a vector of the input's dtype");
	}
	struct geom g;
	if (!conv_geom(k, transpose, &g, why, size))
		return false;
	if (present(k, 2) && k->in[2].dims[0] != g.M)
		return no(why, size, "bias does not have one value per output channel");
	if (fused) {
		struct act a;
		if (!act_of(k->node, &a, why, size))
			return false;
		if (present(k, 3)) {
			const struct cuda_tensor *z = &k->in[3];
			if (z->dtype != dt)
				return no(why, size, "Z differs from the output in dtype");
			bool ok = z->rank <= y->rank;
			for (int j = 0; ok && j < z->rank; j++) {
				int64_t dz = z->dims[j], o = y->dims[y->rank - z->rank + j];
				ok = dz == o || dz == 1;
			}
			if (!ok)
				return no(why, size, "Z does not broadcast to the output's shape");
		}
	}
	if (x->nhwc || y->nhwc || (present(k, 3) && k->in[3].nhwc)) {
		if (transpose || x->rank != 4 || (dt != IR_FLOAT16 && dt != IR_BFLOAT16))
			return no(why, size, "channels-last convolutions are 2-d forward ones in float16 or bfloat16");
		if (w->nhwc || (present(k, 2) && k->in[2].nhwc))
			return no(why, size, "channels-last weights or bias are not supported");
		for (int i = 0; i < g.nd; i++)
			if (g.pb[i] != g.pe[i])
				return no(why, size, "channels-last convolutions need symmetric pads");
		if (fused && present(k, 3) &&
		    (k->in[3].nhwc != y->nhwc || cuda_numel(&k->in[3]) != cuda_numel(y)))
			return no(why, size, "a channels-last Z must be the output's size and layout");
	}
	if (!fits_int(x) || !fits_int(w) || !fits_int(y))
		return no(why, size, "tensors of 2^31 elements or more are not supported by cuDNN");
	if (cuda_numel(y) > 0 && (cuda_numel(x) == 0 || cuda_numel(w) == 0))
		return no(why, size, "an empty input with a non-empty output is not supported on the GPU");
	return true;
}

static bool conv_supports(const struct cuda_kctx *k, char *why, size_t size)
{
	return conv_supports_any(k, false, false, why, size);
}

static bool convt_supports(const struct cuda_kctx *k, char *why, size_t size)
{
	return conv_supports_any(k, true, false, why, size);
}

static bool fusedconv_supports(const struct cuda_kctx *k, char *why, size_t size)
{
	return conv_supports_any(k, false, true, why, size);
}

static const char *fwd_algo_name(int a)
{
	static const char *const names[] = { "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
					     "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED" };
	return a >= 0 && a < (int)(sizeof(names) / sizeof(names[0])) ? names[a] : "?";
}

static const char *bwd_algo_name(int a)
{
	static const char *const names[] = { "ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED" };
	return a >= 0 && a < (int)(sizeof(names) / sizeof(names[0])) ? names[a] : "?";
}

/* The workspace of algorithm a, or false when it cannot run this conv. */
static bool algo_ws(const struct cuda_kctx *k, const struct conv_state *s, cudnnHandle_t h, int a, size_t *ws)
{
	cudnnStatus_t st;
	if (s->dir == CONV_FWD)
		st = s->api->GetConvolutionForwardWorkspaceSize(h, s->xd, s->wd, s->cd, s->yd,
								 (cudnnConvolutionFwdAlgo_t)a, ws);
	else
		st = s->api->GetConvolutionBackwardDataWorkspaceSize(h, s->wd, s->xd, s->cd, s->yd,
								      (cudnnConvolutionBwdDataAlgo_t)a, ws);
	(void)k;
	return st == CUDNN_STATUS_SUCCESS && *ws <= WS_LIMIT;
}

/* Whether a result's math type keeps float32 off TF32 when that is asked. */
static bool math_ok(const struct conv_state *s, cudnnMathType_t m)
{
	return s->math != CUDNN_FMA_MATH || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

/* The perf results of either direction, reduced to what we use. */
struct cand {
	int algo;
	cudnnStatus_t status;
	float time;
	size_t memory;
	cudnnMathType_t math;
};

static int get_cands(struct cuda_kctx *k, struct conv_state *s, cudnnHandle_t h, bool find, void *bx, void *bw,
		     void *by, void *bws, size_t wsz, struct cand *c, int max, int *got)
{
	*got = 0;
	if (s->dir == CONV_FWD) {
		cudnnConvolutionFwdAlgoPerf_t r[16];
		int n = 0;
		cudnnStatus_t st = find ? s->api->FindConvolutionForwardAlgorithmEx(h, s->xd, bx, s->wd, bw, s->cd, s->yd, by,
										      16, &n, r, bws, wsz)
					: s->api->GetConvolutionForwardAlgorithm_v7(h, s->xd, s->wd, s->cd, s->yd, 16, &n, r);
		if (cuda_cudnn_check(st, find ? "cudnnFindConvolutionForwardAlgorithmEx" : "cudnnGetConvolutionForwardAlgorithm_v7",
				     k->d))
			return IR_ERR;
		for (int i = 0; i < n && *got < max; i++, (*got)++)
			c[*got] = (struct cand){ (int)r[i].algo, r[i].status, r[i].time, r[i].memory, r[i].mathType };
	} else {
		cudnnConvolutionBwdDataAlgoPerf_t r[16];
		int n = 0;
		cudnnStatus_t st = find ? s->api->FindConvolutionBackwardDataAlgorithmEx(h, s->wd, bw, s->xd, bx, s->cd, s->yd,
											 by, 16, &n, r, bws, wsz)
					: s->api->GetConvolutionBackwardDataAlgorithm_v7(h, s->wd, s->xd, s->cd, s->yd, 16, &n, r);
		if (cuda_cudnn_check(st, find ? "cudnnFindConvolutionBackwardDataAlgorithmEx"
					      : "cudnnGetConvolutionBackwardDataAlgorithm_v7",
				     k->d))
			return IR_ERR;
		for (int i = 0; i < n && *got < max; i++, (*got)++)
			c[*got] = (struct cand){ (int)r[i].algo, r[i].status, r[i].time, r[i].memory, r[i].mathType };
	}
	return 0;
}

/* The first usable candidate, or -1. The math type that runs is always the
 * descriptor's; a candidate timed with another is taken only when none was
 * timed with ours. */
static int first_usable(const struct cuda_kctx *k, const struct conv_state *s, cudnnHandle_t h, const struct cand *c,
			int n, size_t *ws)
{
	for (int strict = 1; strict >= 0; strict--)
		for (int i = 0; i < n; i++)
			if (c[i].status == CUDNN_STATUS_SUCCESS && c[i].memory <= WS_LIMIT &&
			    (!strict || math_ok(s, c[i].math)) && algo_ws(k, s, h, c[i].algo, ws))
				return i;
	return -1;
}

/* Times the candidates on scratch buffers; 0 with *best = -1 when nothing
 * could be timed (no memory for the scratch buffers). */
static int find_algo(struct cuda_kctx *k, struct conv_state *s, cudnnHandle_t h, int64_t xn, int64_t wn, int64_t yn,
		     int *best, size_t *ws, float *ms)
{
	*best = -1;
	size_t es = dt_size(s->dt);
	void *bx = NULL, *bw = NULL, *by = NULL, *bws = NULL;
	size_t wsz = WS_LIMIT;
	if (cudaMalloc(&bx, (size_t)xn * es) != cudaSuccess || cudaMalloc(&bw, (size_t)wn * es) != cudaSuccess ||
	    cudaMalloc(&by, (size_t)yn * es) != cudaSuccess) {
		cudaGetLastError();
		goto out;
	}
	while (wsz && cudaMalloc(&bws, wsz) != cudaSuccess) {
		cudaGetLastError();
		bws = NULL;
		wsz /= 4;
		if (wsz < ((size_t)1 << 20))
			wsz = 0;
	}
	/* zeros: garbage could hold NaNs or denormals that slow some algorithms
	 * down; on ctx->stream, where the timing runs (it does not block) */
	if (cuda_check(cudaMemsetAsync(bx, 0, (size_t)xn * es, k->ctx->stream), "cudaMemsetAsync", k->d) ||
	    cuda_check(cudaMemsetAsync(bw, 0, (size_t)wn * es, k->ctx->stream), "cudaMemsetAsync", k->d))
		goto fail;
	struct cand c[16];
	int n;
	if (get_cands(k, s, h, true, bx, bw, by, bws, wsz, c, 16, &n))
		goto fail;
	/* OGSH_CUDNN_DEBUG=1: every candidate cuDNN timed, on stderr (for tuning work) */
	if (getenv("OGSH_CUDNN_DEBUG"))
		for (int j = 0; j < n; j++)
			fprintf(stderr, "cudnn find: %s algo %d status %d %.4f ms ws %zu math %d\n", k->node->name,
				c[j].algo, (int)c[j].status, (double)c[j].time, c[j].memory, (int)c[j].math);
	/* the results come sorted by time */
	int i = first_usable(k, s, h, c, n, ws);
	if (i >= 0) {
		*best = c[i].algo;
		*ms = c[i].time;
	}
out:
	cudaFree(bx);
	cudaFree(bw);
	cudaFree(by);
	cudaFree(bws);
	return 0;
fail:
	cudaFree(bx);
	cudaFree(bw);
	cudaFree(by);
	cudaFree(bws);
	return IR_ERR;
}

static const char *math_name(cudnnMathType_t m)
{
	return m == CUDNN_FMA_MATH ? "fma" : m == CUDNN_TENSOR_OP_MATH ? "tensor" : "default";
}

/* Chooses s->algo and s->algo_ws: the cache, else timing, else the
 * heuristic. *ms_out: the choice's time when cached or timed, else -1. */
static int choose_algo(struct cuda_kctx *k, struct conv_state *s, cudnnHandle_t h, int64_t xn, int64_t wn, int64_t yn,
		       float *ms_out)
{
	*ms_out = -1;
	const struct geom *g = &s->g;
	char key[512];
	int len = snprintf(key, sizeof(key), "cudnn %s %s x[%lld,%lld", s->dir == CONV_FWD ? "conv" : "convtranspose",
			   dtname(s->dt), (long long)g->N, (long long)g->C);
	for (int i = 0; i < g->nd && len < (int)sizeof(key); i++)
		len += snprintf(key + len, sizeof(key) - (size_t)len, ",%lld", (long long)g->in[i]);
	for (int i = 0; i < g->nd && len < (int)sizeof(key); i++)
		len += snprintf(key + len, sizeof(key) - (size_t)len, "%s%lld", i ? "," : "] k[", (long long)g->ker[i]);
	for (int i = 0; i < g->nd && len < (int)sizeof(key); i++)
		len += snprintf(key + len, sizeof(key) - (size_t)len, "%s%lld/%lld/%lld/%lld/%lld", i ? "," : "] pads/str/dil/out[",
				(long long)g->pb[i], (long long)g->pe[i], (long long)g->str[i], (long long)g->dil[i],
				(long long)g->out[i]);
	if (len < (int)sizeof(key))
		snprintf(key + len, sizeof(key) - (size_t)len, "] m%lld g%lld %s%s", (long long)g->M, (long long)g->G,
			 math_name(s->math), s->nhwc && !s->cl_nchw ? " nhwc" : "");
	int choice;
	float ms;
	size_t ws;
	struct cuda_ctx *ctx = k->ctx;
	if (ctx->tune && cuda_tune_get(ctx->tune, key, &choice, &ms) && algo_ws(k, s, h, choice, &ws)) {
		s->algo = choice;
		s->algo_ws = ws;
		*ms_out = ms;
		return 0;
	}
	if (ctx->tuning) {
		int best;
		if (find_algo(k, s, h, xn, wn, yn, &best, &ws, &ms))
			return IR_ERR;
		if (best >= 0) {
			s->algo = best;
			s->algo_ws = ws;
			*ms_out = ms;
			if (ctx->tune)
				cuda_tune_put(ctx->tune, key, best, ms);
			return 0;
		}
	}
	struct cand c[16];
	int n;
	if (get_cands(k, s, h, false, NULL, NULL, NULL, NULL, 0, c, 16, &n))
		return IR_ERR;
	int i = first_usable(k, s, h, c, n, &ws);
	if (i < 0)
		return ir_diag_err(k->d, IR_ERR, "cudnn has no algorithm for this %s within %zu MiB of workspace",
				   s->dir == CONV_FWD ? "convolution" : "transposed convolution", WS_LIMIT >> 20);
	s->algo = c[i].algo;
	s->algo_ws = ws;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Forward convolutions through cuDNN's graph API                           */
/* ------------------------------------------------------------------------ */

/*
 * cuDNN's legacy convolution API reaches only the legacy algorithms; its
 * graph (backend) API lets the engine heuristics pick from every engine,
 * Hopper's included. Used for float16/bfloat16 forward convolutions with
 * symmetric pads (engines that would break ogsh's precision promises are
 * skipped, see cg_cfg_ok); anything that fails here falls back to the
 * legacy path.
 * OGSH_CONV_API=legacy turns it off (for comparisons).
 */
#define CG_MAX_CFG 32
#define CG_MAX_PW 3
enum { CG_X = 1, CG_W = 2, CG_Y = 3, CG_B = 4, CG_Z = 5, CG_T = 10 };

/* What a graph-API convolution computes after the conv, in this order:
 * + bias[c], + Z (Y's size and layout), then Relu or a Clip from 0 (cuDNN's
 * RELU_FWD with an upper clip). All false/none: the conv alone. */
struct cg_fuse {
	bool bias, z;
	int act;           /* KCONV_ACT_NONE, _RELU or _CLIP with p0 == 0 */
	float upper;       /* the Clip's max */
};

struct cg_conv {
	const struct cudnn_api *api;
	cudnnBackendDescriptor_t x, w, y, b, z, conv, op, graph, heur, cfg[CG_MAX_CFG], plan, vpack;
	cudnnBackendDescriptor_t t[CG_MAX_PW], pw[CG_MAX_PW], pwop[CG_MAX_PW];
	int n_pw;
	int n_cfg, choice;
	int64_t ws;
	float ms;                              /* the choice's time when timed now or cached, else -1 */
	const void *vx, *vw, *vb, *vz, *vws;   /* the pointers vpack was made for */
	void *vy;
};

static void cg_free(struct cg_conv *c)
{
	if (!c)
		return;
	const struct cudnn_api *api = c->api;
	cudnnBackendDescriptor_t all[] = { c->vpack, c->plan, c->heur, c->graph, c->op, c->conv, c->x, c->w, c->y, c->b, c->z };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i])
			api->BackendDestroyDescriptor(all[i]);
	for (int i = 0; i < CG_MAX_PW; i++) {
		if (c->pwop[i])
			api->BackendDestroyDescriptor(c->pwop[i]);
		if (c->pw[i])
			api->BackendDestroyDescriptor(c->pw[i]);
		if (c->t[i])
			api->BackendDestroyDescriptor(c->t[i]);
	}
	for (int i = 0; i < c->n_cfg; i++)
		if (c->cfg[i])
			api->BackendDestroyDescriptor(c->cfg[i]);
	free(c);
}

static int cg_set(const struct cudnn_api *api, cudnnBackendDescriptor_t dsc, cudnnBackendAttributeName_t name,
		  cudnnBackendAttributeType_t type, int64_t n, const void *v, struct ir_diag *d)
{
	return cuda_cudnn_check(api->BackendSetAttribute(dsc, name, type, n, v), "cudnnBackendSetAttribute", d);
}

/*
 * A packed tensor of rank n: NCHW-style strides, or with cl (4-D) the
 * channels-last ones of [N, C, H, W] stored as [N, H, W, C]. A virtual
 * tensor (an intermediate of a fused graph) lives in no buffer.
 */
static int cg_tensor(const struct cudnn_api *api, cudnnBackendDescriptor_t *t, int64_t uid, cudnnDataType_t ty, int n,
		     const int64_t *dims, bool cl, bool virt, struct ir_diag *d)
{
	int64_t strides[2 + MAX_SP], st = 1, align = 16;
	for (int i = n - 1; i >= 0; i--) {
		strides[i] = st;
		st *= dims[i];
	}
	if (cl && n == 4) {
		strides[1] = 1;
		strides[3] = dims[1];
		strides[2] = dims[3] * dims[1];
		strides[0] = dims[2] * dims[3] * dims[1];
	}
	bool v = virt;
	if (cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t), "cudnnBackendCreateDescriptor",
			     d) ||
	    cg_set(api, *t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ty, d) ||
	    cg_set(api, *t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, n, dims, d) ||
	    cg_set(api, *t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, n, strides, d) ||
	    cg_set(api, *t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, d) ||
	    cg_set(api, *t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, d) ||
	    (v && cg_set(api, *t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v, d)))
		return IR_ERR;
	return cuda_cudnn_check(api->BackendFinalize(*t), "cudnnBackendFinalize (tensor)", d);
}

/* Pointwise op i of the fused tail: y = mode(x[, b]); RELU_FWD clipped at upper when finite. */
static int cg_pointwise(struct cg_conv *c, int i, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
			cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, double upper, struct ir_diag *d)
{
	const struct cudnn_api *api = c->api;
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	if (cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &c->pw[i]),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->pw[i], CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, d) ||
	    cg_set(api, c->pw[i], CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, d) ||
	    (mode == CUDNN_POINTWISE_RELU_FWD && isfinite(upper) &&
	     cg_set(api, c->pw[i], CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &upper, d)) ||
	    cuda_cudnn_check(api->BackendFinalize(c->pw[i]), "cudnnBackendFinalize (pointwise)", d) ||
	    cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &c->pwop[i]),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->pwop[i], CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		   &c->pw[i], d) ||
	    cg_set(api, c->pwop[i], CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, d) ||
	    (b && cg_set(api, c->pwop[i], CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, d)) ||
	    cg_set(api, c->pwop[i], CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, d))
		return IR_ERR;
	return cuda_cudnn_check(api->BackendFinalize(c->pwop[i]), "cudnnBackendFinalize (pointwise op)", d);
}

/* The buffers of one execution (b and z only when the graph reads them). */
struct cg_bufs {
	const void *x, *w, *b, *z;
	void *y, *ws;
};

/* The variant pack for these pointers (made again when they change). */
static int cg_pack(struct cg_conv *c, const struct cg_bufs *p, struct ir_diag *d)
{
	if (c->vpack && c->vx == p->x && c->vw == p->w && c->vy == p->y && c->vb == p->b && c->vz == p->z &&
	    c->vws == p->ws)
		return 0;
	const struct cudnn_api *api = c->api;
	if (c->vpack)
		api->BackendDestroyDescriptor(c->vpack);
	c->vpack = NULL;
	int64_t uids[5] = { CG_X, CG_W, CG_Y };
	void *ptrs[5] = { (void *)p->x, (void *)p->w, p->y };
	int n = 3;
	if (c->b)
		uids[n] = CG_B, ptrs[n++] = (void *)p->b;
	if (c->z)
		uids[n] = CG_Z, ptrs[n++] = (void *)p->z;
	void *ws = p->ws;
	if (cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &c->vpack),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->vpack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids, d) ||
	    cg_set(api, c->vpack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs, d) ||
	    cg_set(api, c->vpack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, d) ||
	    cuda_cudnn_check(api->BackendFinalize(c->vpack), "cudnnBackendFinalize (variant pack)", d))
		return IR_ERR;
	c->vx = p->x, c->vw = p->w, c->vy = p->y, c->vb = p->b, c->vz = p->z, c->vws = p->ws;
	return 0;
}

/* The execution plan of engine config i; 0 with *ws, IR_ERR when it does not finalize. */
static int cg_plan(struct cg_conv *c, cudnnHandle_t h, int i, struct ir_diag *d)
{
	const struct cudnn_api *api = c->api;
	if (c->plan)
		api->BackendDestroyDescriptor(c->plan);
	c->plan = NULL;
	int64_t ws = 0, got = 0;
	if (cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &c->plan),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, d) ||
	    cg_set(api, c->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->cfg[i], d) ||
	    cuda_cudnn_check(api->BackendFinalize(c->plan), "cudnnBackendFinalize (execution plan)", d) ||
	    cuda_cudnn_check(api->BackendGetAttribute(c->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
						      1, &got, &ws),
			     "cudnnBackendGetAttribute (workspace size)", d))
		return IR_ERR;
	if (ws < 0 || (uint64_t)ws > WS_LIMIT)
		return ir_diag_err(d, IR_ERR, "engine config %d wants %lld bytes of workspace", i, (long long)ws);
	c->ws = ws;
	c->choice = i;
	return 0;
}

/* cg_plan for a candidate: whether it finalizes (its error is not one). */
static bool cg_try(struct cg_conv *c, cudnnHandle_t h, int i)
{
	struct ir_diag quiet;
	ir_diag_init(&quiet);
	int rc = cg_plan(c, h, i, &quiet);
	ir_diag_clear(&quiet);
	return rc == 0;
}

/* Times the current plan on the real buffers; ms, or a negative value when it fails. */
static float cg_time(struct cg_conv *c, struct cuda_kctx *k, cudnnHandle_t h, const struct cg_bufs *b)
{
	struct ir_diag quiet;
	ir_diag_init(&quiet);
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms = -1;
	if (cg_pack(c, b, &quiet) || cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
		goto out;
	if (c->api->BackendExecute(h, c->plan, c->vpack) != CUDNN_STATUS_SUCCESS)
		goto out;
	cudaEventRecord(e0, k->ctx->stream);
	for (int r = 0; r < 3; r++)
		if (c->api->BackendExecute(h, c->plan, c->vpack) != CUDNN_STATUS_SUCCESS)
			goto out;
	cudaEventRecord(e1, k->ctx->stream);
	if (cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess)
		ms /= 3;
	else
		ms = -1;
out:
	cudaGetLastError();
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	ir_diag_clear(&quiet);
	return ms;
}

/* Whether engine config i computes as ogsh promises: accumulation in float
 * (no reduced-precision reduction), and for float32 without `set tf32 on`
 * no tensor cores (TF32) and no down-converted inputs. */
static bool cg_cfg_ok(struct cg_conv *c, int i, int dt, bool tf32)
{
	const struct cudnn_api *api = c->api;
	cudnnBackendDescriptor_t eng = NULL;
	int64_t got = 0;
	cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
	bool ok = false;
	if (api->BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS)
		return false;
	if (api->BackendGetAttribute(c->cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
				     &eng) != CUDNN_STATUS_SUCCESS ||
	    api->BackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
				     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &got, notes) != CUDNN_STATUS_SUCCESS)
		goto out;
	ok = true;
	for (int64_t j = 0; j < got && j < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; j++) {
		if (notes[j] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
			ok = false;
		if (dt == IR_FLOAT && !tf32 &&
		    (notes[j] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[j] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
			ok = false;
	}
out:
	api->BackendDestroyDescriptor(eng);
	return ok;
}

/* The operation graph of the conv (X, W -> Y, or -> virtual tensors through
 * the fused tail of f -> Y); 0, or IR_ERR with the reason in d. */
static int cg_build(struct cg_conv *c, const struct conv_state *s, cudnnHandle_t h, bool cl, const struct cg_fuse *f,
		    const int64_t *xdims, const int64_t *wdims, const int64_t *ydims, const int *pad, const int *str,
		    const int *dil, struct ir_diag *d)
{
	const struct cudnn_api *api = c->api;
	int nd = s->g.nd, n = nd + 2;
	int64_t pads[MAX_SP], strides[MAX_SP], dils[MAX_SP], snd = nd;
	for (int i = 0; i < nd; i++)
		pads[i] = pad[i], strides[i] = str[i], dils[i] = dil[i];
	cudnnDataType_t comp = CUDNN_DATA_FLOAT, ty = dnn_type(s->dt);
	cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
	float alpha = 1, beta = 0;
	int steps = f ? (f->bias ? 1 : 0) + (f->z ? 1 : 0) + (f->act != KCONV_ACT_NONE ? 1 : 0) : 0;
	if (cg_tensor(api, &c->x, CG_X, ty, n, xdims, cl, false, d) || cg_tensor(api, &c->w, CG_W, ty, n, wdims, cl, false, d) ||
	    cg_tensor(api, &c->y, CG_Y, ty, n, ydims, cl, false, d))
		return IR_ERR;
	/* the intermediates of the tail, in float */
	for (int i = 0; i < steps; i++)
		if (cg_tensor(api, &c->t[i], CG_T + i, CUDNN_DATA_FLOAT, n, ydims, cl, true, d))
			return IR_ERR;
	if (f && f->bias) {
		int64_t bd[2 + MAX_SP];
		for (int i = 0; i < n; i++)
			bd[i] = i == 1 ? ydims[1] : 1;
		if (cg_tensor(api, &c->b, CG_B, ty, n, bd, cl, false, d))
			return IR_ERR;
	}
	if (f && f->z && cg_tensor(api, &c->z, CG_Z, ty, n, ydims, cl, false, d))
		return IR_ERR;
	cudnnBackendDescriptor_t conv_y = steps ? c->t[0] : c->y;
	if (cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &c->conv),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, d) ||
	    cg_set(api, c->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, d) ||
	    cg_set(api, c->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &snd, d) ||
	    cg_set(api, c->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nd, dils, d) ||
	    cg_set(api, c->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nd, strides, d) ||
	    cg_set(api, c->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nd, pads, d) ||
	    cg_set(api, c->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nd, pads, d) ||
	    cuda_cudnn_check(api->BackendFinalize(c->conv), "cudnnBackendFinalize (convolution)", d) ||
	    cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &c->op),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->x, d) ||
	    cg_set(api, c->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->w, d) ||
	    cg_set(api, c->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_y, d) ||
	    cg_set(api, c->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
		   &c->conv, d) ||
	    cg_set(api, c->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, d) ||
	    cg_set(api, c->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, d) ||
	    cuda_cudnn_check(api->BackendFinalize(c->op), "cudnnBackendFinalize (operation)", d))
		return IR_ERR;
	int at = 0;
	cudnnBackendDescriptor_t prev = conv_y;
	if (f && f->bias) {
		cudnnBackendDescriptor_t out = at + 1 < steps ? c->t[at + 1] : c->y;
		if (cg_pointwise(c, at, CUDNN_POINTWISE_ADD, prev, c->b, out, INFINITY, d))
			return IR_ERR;
		prev = out, at++;
	}
	if (f && f->z) {
		cudnnBackendDescriptor_t out = at + 1 < steps ? c->t[at + 1] : c->y;
		if (cg_pointwise(c, at, CUDNN_POINTWISE_ADD, prev, c->z, out, INFINITY, d))
			return IR_ERR;
		prev = out, at++;
	}
	if (f && f->act != KCONV_ACT_NONE) {
		double up = f->act == KCONV_ACT_CLIP ? (double)f->upper : INFINITY;
		if (cg_pointwise(c, at, CUDNN_POINTWISE_RELU_FWD, prev, NULL, c->y, up, d))
			return IR_ERR;
		at++;
	}
	c->n_pw = at;
	cudnnBackendDescriptor_t ops[1 + CG_MAX_PW] = { c->op };
	for (int i = 0; i < at; i++)
		ops[1 + i] = c->pwop[i];
	cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
	if (cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &c->graph),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, d) ||
	    cg_set(api, c->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1 + at, ops, d) ||
	    cuda_cudnn_check(api->BackendFinalize(c->graph), "cudnnBackendFinalize (operation graph)", d) ||
	    cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &c->heur),
			     "cudnnBackendCreateDescriptor", d) ||
	    cg_set(api, c->heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->graph, d) ||
	    cg_set(api, c->heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, d) ||
	    cuda_cudnn_check(api->BackendFinalize(c->heur), "cudnnBackendFinalize (heuristics)", d))
		return IR_ERR;
	return 0;
}

/*
 * Builds the graph-API convolution of the node (descriptors, heuristics,
 * the engine choice: timed when tuning, from the tuning cache when known,
 * else the heuristics' first that finalizes). cl: X, W and Y (and Z) are
 * channels-last; f: the fused tail, or NULL. b: the buffers to time on.
 * NULL with the reason in d.
 */
static struct cg_conv *cg_new(struct cuda_kctx *k, const struct conv_state *s, cudnnHandle_t h, const char *key,
			      bool cl, const struct cg_fuse *f, const struct cg_bufs *b, const int64_t *xdims,
			      const int64_t *wdims, const int64_t *ydims, const int *pad, const int *str, const int *dil)
{
	struct ir_diag *d = k->d;
	struct cg_conv *c = calloc(1, sizeof(*c));
	if (!c) {
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	const struct cudnn_api *api = c->api = s->api;
	c->ms = -1;
	if (cg_build(c, s, h, cl, f, xdims, wdims, ydims, pad, str, dil, d))
		goto fail;
	for (int i = 0; i < CG_MAX_CFG; i++)
		if (cuda_cudnn_check(api->BackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c->cfg[i]),
				     "cudnnBackendCreateDescriptor", d))
			goto fail;
	c->n_cfg = CG_MAX_CFG;
	int64_t got = 0;
	if (cuda_cudnn_check(api->BackendGetAttribute(c->heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
						      CG_MAX_CFG, &got, c->cfg),
			     "cudnnBackendGetAttribute (heuristics results)", d))
		goto fail;
	int n_ok = got < CG_MAX_CFG ? (int)got : CG_MAX_CFG;
	if (n_ok <= 0) {
		ir_diag_err(d, IR_ERR, "cudnn's heuristics have no engine for this convolution");
		goto fail;
	}
	struct cuda_ctx *ctx = k->ctx;
	bool usable[CG_MAX_CFG];
	for (int i = 0; i < n_ok; i++)
		usable[i] = cg_cfg_ok(c, i, s->dt, ctx->tf32);
	int choice;
	float ms;
	if (ctx->tune && cuda_tune_get(ctx->tune, key, &choice, &ms) && choice >= 0 && choice < n_ok && usable[choice]) {
		if (cg_try(c, h, choice)) {
			c->ms = ms;
			return c;
		}
	}
	if (ctx->tuning) {
		/* time each that finalizes; the workspace is a temporary buffer */
		int best = -1;
		float best_ms = 0;
		void *tws = NULL;
		if (cudaMalloc(&tws, WS_LIMIT) != cudaSuccess) {
			cudaGetLastError();
			tws = NULL;
		}
		struct cg_bufs tb = *b;
		tb.ws = tws;
		/* a fused graph's engines are compiled at run time (slow to plan): the
		 * heuristics' first four that finalize; else the first twelve */
		int timed = 0;
		for (int i = 0; tws && i < n_ok && timed < (c->n_pw ? 4 : 12); i++) {
			if (!usable[i])
				continue;
			if (!cg_try(c, h, i))
				continue;
			timed++;
			float t = cg_time(c, k, h, &tb);
			if (getenv("OGSH_CUDNN_DEBUG"))
				fprintf(stderr, "cudnn graph: %s engine config %d of %d: %.4f ms ws %lld\n", k->node->name, i,
					n_ok, (double)t, (long long)c->ws);
			if (t >= 0 && (best < 0 || t < best_ms))
				best = i, best_ms = t;
		}
		if (c->vpack) {
			api->BackendDestroyDescriptor(c->vpack);
			c->vpack = NULL;
		}
		cudaFree(tws);
		if (best >= 0) {
			if (cg_plan(c, h, best, d))
				goto fail;
			if (ctx->tune)
				cuda_tune_put(ctx->tune, key, best, best_ms);
			c->ms = best_ms;
			return c;
		}
	}
	for (int i = 0; i < n_ok; i++) {
		if (!usable[i])
			continue;
		if (cg_try(c, h, i))
			return c;
	}
	ir_diag_err(d, IR_ERR, "no engine of cudnn's heuristics finalizes for this convolution");
	if (getenv("OGSH_CUDNN_DEBUG")) {
		int nu = 0;
		for (int i = 0; i < n_ok; i++)
			nu += usable[i];
		fprintf(stderr, "cudnn graph: %s: none of %d engine configs (%d usable) finalizes\n", k->node->name, n_ok, nu);
	}
fail:
	cg_free(c);
	return NULL;
}

static int cg_run(struct cg_conv *c, cudnnHandle_t h, const struct cg_bufs *b, struct ir_diag *d)
{
	if (cg_pack(c, b, d))
		return IR_ERR;
	return cuda_cudnn_check(c->api->BackendExecute(h, c->plan, c->vpack), "cudnnBackendExecute", d);
}

/* The time of our epilogue on the output, channels-last (cl) or NCHW (3
 * runs after one), ms, or -1 when it cannot be timed. */
static float epilogue_ms(struct cuda_kctx *k, const struct act *a, const void *b, const void *z, bool cl)
{
	struct kconv_epilogue e = { 0 };
	e.n = cuda_numel(&k->out[0]);
	e.channels = k->out[0].dims[1];
	e.inner = cl || !e.n ? 1 : e.n / (k->out[0].dims[0] * e.channels);
	e.act = a->kind;
	e.p0 = a->p0;
	e.p1 = a->p1;
	e.zfull = 1;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms = -1;
	cudaStream_t st = k->ctx->stream;
	if (cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
		void (*launch)(int, void *, const void *, const void *, const struct kconv_epilogue *, cudaStream_t) =
			cl ? kconv_launch_epilogue_cl : kconv_launch_epilogue;
		launch(k->out[0].dtype, k->out[0].data, b, z, &e, st);
		cudaEventRecord(e0, st);
		for (int r = 0; r < 3; r++)
			launch(k->out[0].dtype, k->out[0].data, b, z, &e, st);
		cudaEventRecord(e1, st);
		if (cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess)
			ms /= 3;
		else
			ms = -1;
	}
	cudaGetLastError();
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return ms;
}

/* W [M, C/G, kh*kw] -> [M, kh*kw, C/G] in s->w_nhwc, once (the weights are on the device now). */
static int w_to_nhwc(struct cuda_kctx *k, struct conv_state *s, const int *wdims, int64_t wn)
{
	if (s->w_nhwc)
		cudaFree(s->w_nhwc);
	s->w_nhwc = NULL;
	if (cuda_check(cudaMalloc(&s->w_nhwc, (size_t)wn * dt_size(s->dt)), "cudaMalloc (the channels-last weights)", k->d))
		return IR_ERR;
	kconv_launch_to_nhwc(s->dt, k->in[1].data, s->w_nhwc, wdims[0], wdims[1], s->g.ker[0] * s->g.ker[1],
			     k->ctx->stream);
	return cuda_check_launch("kconv_to_nhwc", k->d);
}

/* W [M, C, kh*kw] -> [M, kh*kw, s->cpad] with zeros, in s->w_nhwc. */
static int pad_weights(struct cuda_kctx *k, struct conv_state *s)
{
	const struct geom *g = &s->g;
	int64_t kk = g->ker[0] * g->ker[1];
	if (s->w_nhwc)
		cudaFree(s->w_nhwc);
	s->w_nhwc = NULL;
	if (cuda_check(cudaMalloc(&s->w_nhwc, (size_t)(g->M * kk * s->cpad) * dt_size(s->dt)),
		       "cudaMalloc (the padded weights)", k->d))
		return IR_ERR;
	kconv_launch_pad_nhwc(s->dt, k->in[1].data, s->w_nhwc, g->M, (int)g->C, kk, s->cpad, k->ctx->stream);
	return cuda_check_launch("kconv_pad_nhwc", k->d);
}

/* OGSH_CONV_API=legacy: cuDNN's legacy API only (for comparisons) */
static bool capi_is_legacy(void)
{
	const char *capi = getenv("OGSH_CONV_API");
	return capi && !strcmp(capi, "legacy");
}

/* The legacy API on NCHW descriptors: X, Y and W, then the algorithm
 * (s->algo, s->algo_ws; *ms its time, or -1). For ConvTranspose, xd is
 * cuDNN's dy (our X) and yd its dx (our Y, before the crop). */
static int legacy_nchw(struct cuda_kctx *k, struct conv_state *s, cudnnHandle_t h, const int64_t *xin,
		       const int64_t *ybig, const int *wdims, int64_t xn, int64_t wn, int64_t yn, float *ms)
{
	const struct geom *g = &s->g;
	const struct cudnn_api *api = s->api;
	struct ir_diag *d = k->d;
	if (set_tensor(api, s->xd, s->dt, g->N, g->C, g->nd, xin, d) ||
	    set_tensor(api, s->yd, s->dt, g->N, g->M, g->nd, ybig, d) ||
	    cuda_cudnn_check(api->SetFilterNdDescriptor(s->wd, dnn_type(s->dt), CUDNN_TENSOR_NCHW, g->nd + 2, wdims),
			     "cudnnSetFilterNdDescriptor", d))
		return IR_ERR;
	return choose_algo(k, s, h, xn, wn, yn, ms);
}

/* A 2-D depthwise conv's parameters for ogsh's kernels. */
static void dw_params(struct kconv_dw *p, const struct geom *g, const int *pad, const int *str, const int *dil,
		      const struct act *a)
{
	p->n = (int)g->N, p->c = (int)g->C, p->h = (int)g->in[0], p->w = (int)g->in[1];
	p->oh = (int)g->out[0], p->ow = (int)g->out[1], p->kh = (int)g->ker[0], p->kw = (int)g->ker[1];
	p->sh = str[0], p->sw = str[1], p->ph = pad[0], p->pw = pad[1], p->dh = dil[0], p->dw = dil[1];
	p->act = a->kind, p->p0 = a->p0, p->p1 = a->p1;
}

/* s->ep (the epilogue on NCHW Y) and s->ep_cl (on channels-last Y) for the
 * activation a and FusedConv's Z (zfull: Z is Y's size; else broadcast);
 * the bias pointer is the caller's at run. 0 or an error. */
static int epilogue_init(struct cuda_kctx *k, struct conv_state *s, const struct act *a, bool zfull)
{
	const struct cuda_tensor *y = &k->out[0];
	const struct geom *g = &s->g;
	int64_t ynumel = cuda_numel(y);
	struct kconv_epilogue *e = &s->ep;
	e->n = ynumel;
	e->channels = g->M;
	e->inner = g->M ? ynumel / (g->N * g->M) : 1;
	if (e->inner < 1)
		e->inner = 1;
	e->act = a->kind;
	e->p0 = a->p0;
	e->p1 = a->p1;
	e->zfull = zfull;
	e->rank = y->rank;
	if (s->z_in >= 0 && !zfull) {
		if (y->rank > KCONV_MAX_RANK)
			return ir_diag_err(k->d, IR_ERR, "output rank %d is too large", y->rank);
		int64_t st[IR_MAX_RANK];
		cuda_bcast_strides(&k->in[s->z_in], y->rank, y->dims, st);
		for (int i = 0; i < y->rank; i++) {
			e->dims[i] = y->dims[i];
			e->zstrides[i] = st[i];
		}
	}
	/* the same epilogue on channels-last Y (the channel is the fastest axis) */
	s->ep_cl = *e;
	s->ep_cl.inner = 1;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The patch GEMM                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A 2-D (or 1-D) conv whose kernel is its stride, without pads or
 * dilation, in one group, is a matrix product: its windows do not overlap,
 * so the patches are a rearrangement of X. ViT's patch embedding (16x16
 * over 3 channels, where cuDNN has no tensor-core kernel: 0.29 ms at batch
 * 32 on an H200) is [N*196, 768] x [768, 768]. With K = C*kh*kw and
 * P = OH*OW:
 *
 *   Pt [N*P, Kp]  the patches (kconv_launch_patches, into the workspace
 *                 each run), row-major, columns in the (c, i, j) order of
 *                 W's [M, C, kh, kw]; Kp = K, plus 8 columns when there
 *                 is a bias: column K holds 1, the others 0
 *   Wp [M, Kp]    W's rows with the bias in column K (made once, at prepare)
 *   Y             per image b: Y_b [M, P] = Wp Pt_b^T (the bias through
 *                 column K: 1 times b[m], accumulated in float)
 *
 * cuBLASLt is column-major; a row-major [r, c] matrix is the column-major
 * [c, r] one with leading dimension c.
 *   Y NCHW: Y_b, row-major [M, P], is column-major D_b [P, M], ld P:
 *     D_b = op(A_b) op(B) with A_b = Pt_b stored column-major [Kp, P],
 *     ld Kp, op T; B = Wp stored column-major [Kp, M], ld Kp, op N;
 *     m = P, n = M, k = Kp; strided batch of N: A every P*Kp elements,
 *     B every 0 (shared), D every M*P.
 *   Y channels-last: row-major [N*P, M], column-major D [M, N*P], ld M:
 *     A = Wp as [Kp, M], ld Kp, op T; B = Pt as [Kp, N*P], ld Kp, op N;
 *     m = M, n = N*P, k = Kp; no batch.
 * Both products are "TN" (the inner dimension contiguous on both sides).
 * FusedConv's Z and activation run after as ogsh's epilogue.
 *   Y NCHW whose rows P are not a multiple of 16 bytes (ViT: 196 float16
 *     elements, 392 bytes): cuBLASLt's kernels for such a D were 4x slower
 *     (66 us against about 16 at batch 32 on an H200), so the product is the
 *     channels-last one into the workspace and one tiled transpose
 *     (kconv_launch_from_nhwc, with the epilogue) writes Y.
 *
 * Taken when the window has 2 elements or more (not ResNet's 1x1 convs),
 * K % 8 == 0 (rows of 16 bytes), X is NCHW, W (and B) are constants and
 * cuBLASLt has an algorithm; cuBLASLt's first heuristic
 * choice, not timed. OGSH_CONV_PATCH=0 (or OGSH_CONV_API=legacy) turns it
 * off.
 */
#define PATCH_MAX_WS ((size_t)32 << 20)

struct patch_gemm {
	const struct cuda_lt_api *lt;
	cublasLtHandle_t h;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, ld;   /* cuBLASLt's A, B and C = D, as above */
	cublasLtMatmulAlgo_t algo;
	size_t algo_ws;          /* its workspace, after the patches' */
	size_t p_bytes;          /* the patches, at the start of the workspace */
	size_t y_align;          /* the alignment of Y promised to cuBLASLt */
	struct kconv_patch q;
	void *wp;                /* Wp [M, Kp] (owned) */
	bool ycl;                /* Y channels-last: A is Wp, B the patches */
	bool via_t;              /* Y NCHW through a channels-last product in the workspace */
	size_t t_bytes;          /* that product, after the patches */
};

static void patch_free(struct patch_gemm *pg)
{
	if (!pg)
		return;
	if (pg->lt) {
		if (pg->desc)
			(void)pg->lt->MatmulDescDestroy(pg->desc);
		if (pg->la)
			(void)pg->lt->MatrixLayoutDestroy(pg->la);
		if (pg->lb)
			(void)pg->lt->MatrixLayoutDestroy(pg->lb);
		if (pg->ld)
			(void)pg->lt->MatrixLayoutDestroy(pg->ld);
	}
	if (pg->wp)
		cudaFree(pg->wp);
	free(pg);
}

/* Whether the patch GEMM is off (OGSH_CONV_PATCH=0, or cuDNN's legacy API only). */
static bool patch_off(void)
{
	const char *e = getenv("OGSH_CONV_PATCH");
	return (e && !strcmp(e, "0")) || capi_is_legacy();
}

/* Whether the conv of g (promoted to 2-d) has the patch GEMM's shape. */
static bool patch_fits(const struct cuda_kctx *k, const struct geom *g, bool transpose)
{
	if (transpose || g->nd != 2 || g->G != 1 || k->in[0].nhwc || patch_off())
		return false;
	for (int i = 0; i < 2; i++)
		if (g->ker[i] != g->str[i] || g->dil[i] != 1 || g->pb[i] || g->pe[i])
			return false;
	/* a 1x1 window (stride 1) is a product already: cuDNN runs it on X as
	 * it is, with the bias and activation fused (ResNet's 1x1 convs) */
	if (g->ker[0] * g->ker[1] < 2)
		return false;
	int64_t K = g->C * g->ker[0] * g->ker[1], P = g->out[0] * g->out[1];
	if (K <= 0 || K % 8 || K > INT_MAX - 8 || !k->in[1].host || (present(k, 2) && !k->in[2].host))
		return false;
	/* cuBLASLt's sizes and batch count are 32-bit */
	return g->M <= INT_MAX && P <= INT_MAX && g->N * P <= INT_MAX;
}

static cudaDataType_t lt_type(int dt)
{
	return dt == IR_FLOAT16 ? CUDA_R_16F : dt == IR_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* A column-major [rows, cols] layout with leading dimension ld, a strided
 * batch of `batch` when more than 1. */
static cublasStatus_t patch_layout(const struct cuda_lt_api *lt, cublasLtMatrixLayout_t *l, int dt, int64_t rows,
				   int64_t cols, int64_t ld, int32_t batch, int64_t stride)
{
	cublasStatus_t st = lt->MatrixLayoutCreate(l, lt_type(dt), (uint64_t)rows, (uint64_t)cols, ld);
	if (st == CUBLAS_STATUS_SUCCESS && batch > 1)
		st = lt->MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch));
	if (st == CUBLAS_STATUS_SUCCESS && batch > 1)
		st = lt->MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
	return st;
}

/* The descriptors and cuBLASLt's first heuristic choice; false when
 * cuBLASLt refuses any of it. */
static bool patch_matmul(struct cuda_kctx *k, struct conv_state *s, struct patch_gemm *pg)
{
	const struct cuda_lt_api *lt = pg->lt;
	const struct geom *g = &s->g;
	int64_t P = g->out[0] * g->out[1], kp = pg->q.kp;
	size_t es = dt_size(s->dt);
	cublasComputeType_t ct = s->dt == IR_FLOAT && k->ctx->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	int32_t opt = CUBLAS_OP_T, opn = CUBLAS_OP_N;
	/* see above: m, n and the batch of either form */
	const bool cl = pg->ycl || pg->via_t;
	int64_t m = cl ? g->M : P, n = cl ? g->N * P : g->M;
	int32_t batch = cl ? 1 : (int32_t)g->N;
	cublasStatus_t st = lt->MatmulDescCreate(&pg->desc, ct, CUDA_R_32F);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->MatmulDescSetAttribute(pg->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof(opt));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->MatmulDescSetAttribute(pg->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof(opn));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = patch_layout(lt, &pg->la, s->dt, kp, m, kp, batch, cl ? 0 : P * kp);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = patch_layout(lt, &pg->lb, s->dt, kp, n, kp, batch, 0);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = patch_layout(lt, &pg->ld, s->dt, m, n, m, batch, m * n);
	if (st != CUBLAS_STATUS_SUCCESS)
		return false;
	/* the patches and Wp start 256-byte aligned with rows of 16-byte
	 * multiples; Y's columns (and images) may be less aligned than its start */
	size_t ya = 16;
	while (ya > es && (((size_t)m * es) % ya || (batch > 1 && ((size_t)(m * n) * es) % ya)))
		ya /= 2;
	pg->y_align = ya;
	uint32_t a16 = 16, a_y = (uint32_t)ya;
	uint64_t wsmax = PATCH_MAX_WS;
	cublasLtMatmulPreference_t pref = NULL;
	st = lt->MatmulPreferenceCreate(&pref);
	if (st != CUBLAS_STATUS_SUCCESS)
		return false;
	st = lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsmax, sizeof(wsmax));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a16, sizeof(a16));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &a16, sizeof(a16));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &a_y, sizeof(a_y));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &a_y, sizeof(a_y));
	cublasLtMatmulHeuristicResult_t res;
	int got = 0;
	memset(&res, 0, sizeof(res));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->MatmulAlgoGetHeuristic(pg->h, pg->desc, pg->la, pg->lb, pg->ld, pg->ld, pref, 1, &res, &got);
	(void)lt->MatmulPreferenceDestroy(pref);
	if (st != CUBLAS_STATUS_SUCCESS || got < 1 || res.state != CUBLAS_STATUS_SUCCESS ||
	    res.workspaceSize > PATCH_MAX_WS)
		return false;
	pg->algo = res.algo;
	pg->algo_ws = res.workspaceSize;
	return true;
}

/*
 * Prepares the patch GEMM of a node patch_fits takes (a: FusedConv's
 * activation): 0 with s->pg set, 1 when cuBLASLt is missing or has no
 * algorithm (s->pg stays NULL: the caller goes on to cuDNN), or an error.
 */
static int patch_prepare(struct cuda_kctx *k, struct conv_state *s, const struct act *a)
{
	const struct geom *g = &s->g;
	struct ir_diag *d = k->d;
	struct ir_diag quiet;
	ir_diag_init(&quiet);
	const struct cuda_lt_api *lt = cuda_lt_api(&quiet);
	cublasLtHandle_t h = lt ? cuda_cublaslt_handle(k->ctx, &quiet) : NULL;
	if (getenv("OGSH_CUDNN_DEBUG") && !h)
		fprintf(stderr, "ogsh: %s: no patch GEMM: %s\n", k->node->name, quiet.error ? quiet.error : "?");
	ir_diag_clear(&quiet);
	if (!h)
		return 1;
	struct patch_gemm *pg = calloc(1, sizeof(*pg));
	if (!pg)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	pg->lt = lt;
	pg->h = h;
	pg->ycl = k->out[0].nhwc;
	int64_t K = g->C * g->ker[0] * g->ker[1], P = g->out[0] * g->out[1];
	bool bias = s->bias_in >= 0;
	bool zfull = s->z_in >= 0 && cuda_numel(&k->in[s->z_in]) == cuda_numel(&k->out[0]);
	pg->via_t = !pg->ycl && ((size_t)P * dt_size(s->dt)) % 16 && (s->z_in < 0 || zfull);
	int kp = (int)K + (bias ? 8 : 0);
	pg->q = (struct kconv_patch){ .n = g->N, .c = (int)g->C, .h = (int)g->in[0], .w = (int)g->in[1],
				      .oh = (int)g->out[0], .ow = (int)g->out[1], .kh = (int)g->ker[0],
				      .kw = (int)g->ker[1], .k = (int)K, .kp = kp, .one = bias };
	size_t es = dt_size(s->dt);
	if (!patch_matmul(k, s, pg)) {
		if (getenv("OGSH_CUDNN_DEBUG"))
			fprintf(stderr, "ogsh: %s: no patch GEMM: cuBLASLt has no algorithm\n", k->node->name);
		patch_free(pg);
		return 1;
	}
	s->pg = pg;   /* conv_release frees it from here on */
	pg->p_bytes = align256((size_t)(g->N * P * kp) * es);
	pg->t_bytes = pg->via_t ? align256((size_t)(g->N * P * g->M) * es) : 0;
	if (cuda_check(cudaMalloc(&pg->wp, (size_t)(g->M * kp) * es), "cudaMalloc (the patch GEMM's weights)", d))
		return IR_ERR;
	kconv_launch_patch_weights(s->dt, k->in[1].data, bias ? k->in[s->bias_in].data : NULL, pg->wp, g->M, (int)K, kp,
				   k->ctx->stream);
	if (cuda_check_launch("kconv_patch_weights", d))
		return IR_ERR;
	s->epilogue = s->z_in >= 0 || a->kind != KCONV_ACT_NONE;
	if ((s->epilogue || pg->via_t) && epilogue_init(k, s, a, zfull))
		return IR_ERR;
	snprintf(k->impl, sizeof(k->impl), "patch GEMM (cuBLASLt)%s%s", pg->ycl ? " nhwc out" : pg->via_t ? " + transpose" : "",
		 s->epilogue ? " + ogsh epilogue" : "");
	k->ws_bytes = pg->p_bytes + pg->t_bytes + pg->algo_ws;
	return 0;
}

/* The patches into the workspace, the product into Y, then the epilogue. */
static int patch_run(struct cuda_kctx *k, const struct conv_state *s)
{
	const struct patch_gemm *pg = s->pg;
	struct ir_diag *d = k->d;
	cudaStream_t st = k->ctx->stream;
	void *pt = k->ws, *y = k->out[0].data;
	void *algo_ws = pg->algo_ws ? (char *)k->ws + pg->p_bytes + pg->t_bytes : NULL;
	void *d_out = pg->via_t ? (char *)k->ws + pg->p_bytes : y;
	if ((uintptr_t)pt % 16 || (uintptr_t)d_out % pg->y_align)
		return ir_diag_err(d, IR_ERR, "the patch GEMM needs its workspace aligned to 16 bytes and Y to %zu",
				   pg->y_align);
	kconv_launch_patches(s->dt, k->in[0].data, pt, &pg->q, st);
	if (cuda_check_launch("kconv_patches", d))
		return IR_ERR;
	float one = 1.0f, zero = 0.0f;
	const bool cl = pg->ycl || pg->via_t;
	const void *a = cl ? pg->wp : pt, *b = cl ? pt : pg->wp;
	if (cuda_lt_check(pg->lt->Matmul(pg->h, pg->desc, &one, a, pg->la, b, pg->lb, &zero, d_out, pg->ld, d_out,
					 pg->ld, &pg->algo, algo_ws, pg->algo_ws, st),
			  "cublasLtMatmul", d))
		return IR_ERR;
	if (pg->via_t) {   /* [N, P, M] -> Y [N, M, P], with the epilogue on the way */
		const void *z = s->z_in >= 0 ? k->in[s->z_in].data : NULL;
		kconv_launch_from_nhwc(s->dt, d_out, y, NULL, z, &s->ep, pg->q.n, st);
		return cuda_check_launch("kconv_from_nhwc", d);
	}
	if (!s->epilogue)
		return 0;
	const void *z = s->z_in >= 0 ? k->in[s->z_in].data : NULL;
	if (pg->ycl)
		kconv_launch_epilogue_cl(s->dt, y, NULL, z, &s->ep_cl, st);
	else
		kconv_launch_epilogue(s->dt, y, NULL, z, &s->ep, st);
	return cuda_check_launch("kconv_epilogue", d);
}

static int conv_prepare_any(struct cuda_kctx *k, bool transpose, bool fused)
{
	char why[200];
	struct geom g;
	if (!conv_geom(k, transpose, &g, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	promote(&g);
	struct conv_state *s = calloc(1, sizeof(*s));
	if (!s)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->state = s;
	s->dir = transpose ? CONV_BWD : CONV_FWD;
	s->dt = k->in[0].dtype;
	s->g = g;
	s->bias_in = present(k, 2) ? 2 : -1;
	s->z_in = fused && present(k, 3) ? 3 : -1;
	struct act a = { KCONV_ACT_NONE, 0, 0 };
	if (fused && !act_of(k->node, &a, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	int64_t ynumel = cuda_numel(&k->out[0]);
	snprintf(k->impl, sizeof(k->impl), "cudnn %s", transpose ? "convtranspose" : "conv");
	if (ynumel == 0)
		return 0;   /* run does nothing */
	if (patch_fits(k, &g, transpose)) {
		int rc = patch_prepare(k, s, &a);
		if (rc <= 0)
			return rc;
	}

	const struct cudnn_api *api = cuda_cudnn(k->d);
	cudnnHandle_t h = api ? cuda_cudnn_handle(k->ctx, k->d) : NULL;
	if (!h)
		return IR_ERR;
	s->api = api;
	struct ir_diag *d = k->d;
	int nd = g.nd;

	/* pads: cuDNN takes one per axis; the rest is our window copy */
	int pad[MAX_SP], str[MAX_SP], dil[MAX_SP];
	int64_t xin[MAX_SP], ybig[MAX_SP];
	s->win.nd = nd;
	for (int i = 0; i < nd; i++) {
		int64_t p = g.pb[i] < g.pe[i] ? g.pb[i] : g.pe[i];
		if (p < 0)
			p = 0;
		pad[i] = (int)p;
		str[i] = (int)g.str[i];
		dil[i] = (int)g.dil[i];
		xin[i] = g.in[i];
		ybig[i] = g.out[i];
		if (transpose) {
			/* Y[o] = Ybig[o + pb - p], Ybig the output with pads p on both sides */
			ybig[i] = g.out[i] + g.pb[i] + g.pe[i] - 2 * p;
			s->win.src[i] = ybig[i];
			s->win.dst[i] = g.out[i];
			s->win.lo[i] = -(g.pb[i] - p);
			if (g.pb[i] != p || g.pe[i] != p)
				s->crop_y = true;
		} else {
			xin[i] = g.in[i] + (g.pb[i] - p) + (g.pe[i] - p);
			s->win.src[i] = g.in[i];
			s->win.dst[i] = xin[i];
			s->win.lo[i] = g.pb[i] - p;
			if (g.pb[i] != p || g.pe[i] != p)
				s->pad_x = true;
		}
		if (xin[i] > INT_MAX || ybig[i] > INT_MAX)
			return ir_diag_err(d, IR_ERR, "the padded convolution is too large for cuDNN");
	}
	size_t es = dt_size(s->dt);
	int64_t xn = g.N * g.C, yn = g.N * g.M, wn = g.C / (transpose ? 1 : g.G) * (transpose ? g.M / g.G : g.M);
	for (int i = 0; i < nd; i++) {
		xn *= xin[i];
		yn *= ybig[i];
		wn *= g.ker[i];
	}
	if (xn >= INT_MAX || yn >= INT_MAX)
		return ir_diag_err(d, IR_ERR, "the padded convolution is too large for cuDNN");
	s->win.outer = s->pad_x ? g.N * g.C : g.N * g.M;
	if (s->pad_x)
		s->buf_bytes = align256((size_t)xn * es);
	else if (s->crop_y)
		s->buf_bytes = align256((size_t)yn * es);

	if (cuda_cudnn_check(api->CreateTensorDescriptor(&s->xd), "cudnnCreateTensorDescriptor", d) ||
	    cuda_cudnn_check(api->CreateTensorDescriptor(&s->yd), "cudnnCreateTensorDescriptor", d) ||
	    cuda_cudnn_check(api->CreateFilterDescriptor(&s->wd), "cudnnCreateFilterDescriptor", d) ||
	    cuda_cudnn_check(api->CreateConvolutionDescriptor(&s->cd), "cudnnCreateConvolutionDescriptor", d))
		return IR_ERR;
	/*
	 * Channels-last: the planner stores X or Y as [N, H, W, C] (cuDNN's
	 * tensor-core kernels and its fused conv+bias+add+activation engines
	 * want that layout). conv_supports_any checked what that needs: a
	 * float16/bfloat16 2-D forward conv with symmetric pads, Z full-size in
	 * Y's layout. W is transposed once to [M, kh, kw, C/G].
	 */
	s->xcl = k->in[0].nhwc;
	s->ycl = k->out[0].nhwc;
	bool zfull = s->z_in >= 0 && cuda_numel(&k->in[s->z_in]) == ynumel;   /* Z as large as Y */
	s->nhwc = s->xcl || s->ycl;
	int wdims[2 + MAX_SP];
	/* the filter of the forward conv: [out channels, in channels per group, k...];
	 * ONNX's ConvTranspose W [C, M/G, k...] is that of the conv it inverts */
	wdims[0] = (int)(transpose ? g.C : g.M);
	wdims[1] = (int)(transpose ? g.M / g.G : g.C / g.G);
	for (int i = 0; i < nd; i++)
		wdims[i + 2] = (int)g.ker[i];
	if (cuda_cudnn_check(api->SetConvolutionNdDescriptor(s->cd, nd, pad, str, dil, CUDNN_CROSS_CORRELATION,
							     CUDNN_DATA_FLOAT),
			     "cudnnSetConvolutionNdDescriptor", d) ||
	    cuda_cudnn_check(api->SetConvolutionGroupCount(s->cd, (int)g.G), "cudnnSetConvolutionGroupCount", d))
		return IR_ERR;
	s->math = s->dt != IR_FLOAT ? CUDNN_TENSOR_OP_MATH : k->ctx->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
	if (cuda_cudnn_check(api->SetConvolutionMathType(s->cd, s->math), "cudnnSetConvolutionMathType", d))
		return IR_ERR;
	if (s->xcl && s->ycl && nd == 2 && g.G == g.C && g.M == g.C && !transpose &&
	    g.N * g.out[0] * g.out[1] * g.C < INT_MAX && !capi_is_legacy()) {
		/* depthwise, channels-last on both sides: our kernel with the epilogue
		 * (cuDNN has no fast engine for it: 2 to 3 times slower at batch 1) */
		int64_t kk = g.ker[0] * g.ker[1];
		if (cuda_check(cudaMalloc(&s->w_nhwc, (size_t)wn * es), "cudaMalloc (the depthwise weights)", d))
			return IR_ERR;
		kconv_launch_to_nhwc(s->dt, k->in[1].data, s->w_nhwc, 1, g.C, kk, k->ctx->stream);
		if (cuda_check_launch("kconv_to_nhwc", d))
			return IR_ERR;
		s->dw = true;
		struct kconv_dw *p = &s->dwp;
		dw_params(p, &g, pad, str, dil, &a);
		snprintf(k->impl, sizeof(k->impl), "ogsh depthwise nhwc (bias/z/act in)");
		k->ws_bytes = 0;
		return 0;
	}
	if (!s->xcl && !s->ycl && nd == 2 && g.G == g.C && g.M == g.C && !transpose && !s->pad_x && !capi_is_legacy()) {
		/* depthwise NCHW: our tiled kernel with the epilogue where it has a
		 * variant (cuDNN's FMA engines ran MobileNetV2's float32 depthwise
		 * convs at batch 64 at 1.2 to 1.6 TFLOP/s, a fifth of the memory
		 * bandwidth, on an H100) */
		struct kconv_dw *p = &s->dwp;
		dw_params(p, &g, pad, str, dil, &a);
		if (g.N * g.C < INT_MAX && (s->z_in < 0 || zfull) && kconv_depthwise_nchw_ok(p)) {
			s->dw_nchw = true;
			snprintf(k->impl, sizeof(k->impl), "ogsh depthwise nchw %lldx%lld/%d (bias/z/act in)",
				 (long long)g.ker[0], (long long)g.ker[1], str[0]);
			k->ws_bytes = 0;
			return 0;
		}
	}
	/* an NCHW input of few channels (an image): padded to 8 channels on the
	 * way to NHWC, where cuDNN's tensor-core kernels are fast (3 channels:
	 * ResNet-50's first conv at batch 64 was a quarter of the run) */
	if (s->nhwc && !s->xcl && g.G == 1 && g.C < 8 && s->dt != IR_FLOAT && !transpose && !capi_is_legacy())
		s->cpad = 8;
	if (s->nhwc && (w_to_nhwc(k, s, wdims, wn) || (s->cpad && pad_weights(k, s))))
		return IR_ERR;
	/* the legacy API's descriptors and algorithm (NCHW), made at most once */
	bool legacy_ready = false;
	float lms = -1;
	/* float32 conv+bias+relu with a full-size Z or none: the legacy API's one call */
	bool relu_call = fused && a.kind == KCONV_ACT_RELU && s->dt == IR_FLOAT && (s->z_in < 0 || zfull) && !transpose &&
			 !s->nhwc;
	/* forward convolutions: cuDNN's graph API first (OGSH_CONV_API=legacy:
	 * the legacy API only); float32 takes whichever of the graph API's
	 * engine and the legacy algorithm timed faster for the node (on an
	 * H200 neither won everywhere: the graph API gained 4% at batch 1 and
	 * lost 5% at batch 64 on ResNet-50, where the legacy conv+bias+relu
	 * call saves the epilogue's pass) */
	if (!transpose && !s->pad_x && !capi_is_legacy()) {
		int64_t xdims[2 + MAX_SP], wd64[2 + MAX_SP], ydims[2 + MAX_SP];
		char key[512];
		int len = snprintf(key, sizeof(key), "cudnn graph conv %s", dtname(s->dt));
		xdims[0] = g.N, xdims[1] = s->cpad ? s->cpad : g.C, wd64[0] = g.M, wd64[1] = s->cpad ? s->cpad : g.C / g.G;
		ydims[0] = g.N, ydims[1] = g.M;
		for (int i = 0; i < nd; i++) {
			xdims[i + 2] = xin[i], wd64[i + 2] = g.ker[i], ydims[i + 2] = ybig[i];
			if (len < (int)sizeof(key))
				len += snprintf(key + len, sizeof(key) - (size_t)len, " %lld/%lld/%lld/%d/%d/%d",
						(long long)xin[i], (long long)g.ker[i], (long long)ybig[i], pad[i], str[i], dil[i]);
		}
		if (len < (int)sizeof(key))
			len += snprintf(key + len, sizeof(key) - (size_t)len, " n%lld c%lld m%lld g%lld%s%s", (long long)g.N,
					(long long)g.C, (long long)g.M, (long long)g.G, k->ctx->tf32 ? " tf32" : "",
					s->nhwc ? s->cpad ? " nhwc cpad8" : " nhwc" : "");
		struct cg_bufs tb = { k->in[0].data, s->nhwc ? s->w_nhwc : k->in[1].data,
				      s->bias_in >= 0 ? k->in[s->bias_in].data : NULL,
				      s->z_in >= 0 ? k->in[s->z_in].data : NULL, k->out[0].data, NULL };
		void *tmpx = NULL;   /* the padded X to time on */
		if (s->cpad) {
			size_t nb = (size_t)(xn / g.C * s->cpad) * es;
			if (cuda_check(cudaMalloc(&tmpx, nb), "cudaMalloc (a padded input to time on)", d) ||
			    cuda_check(cudaMemsetAsync(tmpx, 0, nb, k->ctx->stream), "cudaMemsetAsync", d)) {
				cudaFree(tmpx);
				return IR_ERR;
			}
			tb.x = tmpx;
		}
		struct ir_diag gd;
		ir_diag_init(&gd);
		struct cuda_kctx kq = *k;
		kq.d = &gd;
		/* Y channels-last: bias, Z and Relu or Clip(0, max) fused into the conv */
		struct cg_fuse f = { s->bias_in >= 0, s->z_in >= 0, a.kind, a.p1 };
		bool fusable = a.kind == KCONV_ACT_NONE || a.kind == KCONV_ACT_RELU || (a.kind == KCONV_ACT_CLIP && a.p0 == 0);
		if (s->ycl && fusable && !f.bias && (f.z || f.act != KCONV_ACT_NONE)) {
			/* cuDNN compiles conv+bias+act where conv+act alone fails: a zero bias */
			if (cuda_check(cudaMalloc(&s->zero_bias, (size_t)g.M * es), "cudaMalloc", d) ||
			    cuda_check(cudaMemsetAsync(s->zero_bias, 0, (size_t)g.M * es, k->ctx->stream), "cudaMemsetAsync", d)) {
				cudaFree(tmpx);
				return IR_ERR;
			}
			f.bias = true;
			tb.b = s->zero_bias;
		}
		if (s->ycl && fusable && (f.bias || f.z || f.act != KCONV_ACT_NONE) && len < (int)sizeof(key)) {
			char fkey[600], pick[640];
			snprintf(fkey, sizeof(fkey), "%s fused%s%s%s", key, f.bias ? " bias" : "", f.z ? " z" : "",
				 f.act == KCONV_ACT_RELU ? " relu" : f.act == KCONV_ACT_CLIP ? " clip" : "");
			/* fused, or the conv alone and our epilogue: whichever timed faster
			 * (cuDNN's fused engines are not always its fastest convs) */
			snprintf(pick, sizeof(pick), "%s: pick", fkey);
			int pc = 1;
			float pms;
			bool known = k->ctx->tune && cuda_tune_get(k->ctx->tune, pick, &pc, &pms);
			if (pc == 1)
				s->cg = cg_new(&kq, s, h, fkey, true, &f, &tb, xdims, wd64, ydims, pad, str, dil);
			s->cg_fused = s->cg != NULL;
			if (!s->cg && pc == 1 && getenv("OGSH_CUDNN_DEBUG"))
				fprintf(stderr, "ogsh: fused conv not built (%s): %s\n", fkey, gd.error ? gd.error : "?");
			/* a graph cuDNN cannot build is not tried again (its compile is slow) */
			if (!s->cg && pc == 1 && !known && k->ctx->tune && k->ctx->tuning)
				cuda_tune_put(k->ctx->tune, pick, 0, 0);
			ir_diag_clear(&gd);
			ir_diag_init(&gd);
			if (s->cg && !known && k->ctx->tuning && s->cg->ms >= 0) {
				struct cg_conv *u = cg_new(&kq, s, h, key, true, NULL, &tb, xdims, wd64, ydims, pad, str, dil);
				ir_diag_clear(&gd);
				ir_diag_init(&gd);
				float ems = u && u->ms >= 0 ? epilogue_ms(k, &a, s->bias_in >= 0 ? tb.b : NULL, tb.z, true) : -1;
				bool alone = ems >= 0 && u->ms + ems < s->cg->ms;
				if (getenv("OGSH_CUDNN_DEBUG"))
					fprintf(stderr, "ogsh: %s: fused %.4f ms, conv %.4f + epilogue %.4f ms\n", fkey,
						(double)s->cg->ms, u ? (double)u->ms : -1.0, (double)ems);
				if (k->ctx->tune && ems >= 0)
					cuda_tune_put(k->ctx->tune, pick, alone ? 0 : 1, alone ? u->ms + ems : s->cg->ms);
				if (alone) {
					cg_free(s->cg);
					s->cg = u;
					s->cg_fused = false;
				} else {
					cg_free(u);
				}
			}
		}
		if (!s->cg)
			s->cg = cg_new(&kq, s, h, key, s->nhwc, NULL, &tb, xdims, wd64, ydims, pad, str, dil);
		ir_diag_clear(&gd);
		if (s->cg && s->dt == IR_FLOAT && !s->nhwc && len < (int)sizeof(key)) {
			/* float32: the graph API's engine or the legacy algorithm; an
			 * untimed graph engine leaves the legacy API in place */
			char pick[600];
			snprintf(pick, sizeof(pick), "%s: api", key);
			int pc = 0;
			float pms;
			bool known = k->ctx->tune && cuda_tune_get(k->ctx->tune, pick, &pc, &pms);
			if (!known && k->ctx->tuning && s->cg->ms >= 0) {
				if (legacy_nchw(k, s, h, xin, ybig, wdims, xn, wn, yn, &lms)) {
					cudaFree(tmpx);
					return IR_ERR;
				}
				legacy_ready = true;
				bool ep = s->bias_in >= 0 || s->z_in >= 0 || a.kind != KCONV_ACT_NONE;
				/* the legacy conv+bias+relu call is one kernel with IMPLICIT_PRECOMP_GEMM */
				bool one_call = relu_call && s->algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
				float ems = ep ? epilogue_ms(k, &a, s->bias_in >= 0 ? tb.b : NULL, zfull ? tb.z : NULL, false) : 0;
				if (ems >= 0) {
					/* a legacy algorithm cuDNN could not time loses to the timed engine */
					float lt = lms >= 0 ? lms + (one_call ? 0 : ems) : INFINITY, gt = s->cg->ms + ems;
					pc = gt < lt;
					if (getenv("OGSH_CUDNN_DEBUG"))
						fprintf(stderr, "ogsh: %s: graph engine %d %.4f ms, legacy %s %.4f ms (+ epilogue %.4f ms)\n",
							k->node->name, s->cg->choice, (double)s->cg->ms, fwd_algo_name(s->algo),
							(double)lms, (double)ems);
					if (k->ctx->tune)
						cuda_tune_put(k->ctx->tune, pick, pc, pc ? gt : lt);
				} else {
					pc = lms < 0;
				}
			}
			if (!pc) {
				cg_free(s->cg);
				s->cg = NULL;
			}
		}
		if (tmpx) {
			cudaStreamSynchronize(k->ctx->stream);
			cudaFree(tmpx);
		}
		if (s->cg)
			s->algo_ws = (size_t)s->cg->ws;
	}
	if (!s->cg && s->cpad) {
		/* the padding was for the graph API's engines */
		s->cpad = 0;
		if (w_to_nhwc(k, s, wdims, wn))
			return IR_ERR;
	}
	if (!s->cg && s->nhwc) {
		/* the legacy API on channels-last descriptors, else NCHW between transposes */
		s->cl_nchw = !(!set_tensor_nhwc(api, s->xd, s->dt, g.N, g.C, xin, d) &&
			       !set_tensor_nhwc(api, s->yd, s->dt, g.N, g.M, ybig, d) &&
			       !cuda_cudnn_check(api->SetFilterNdDescriptor(s->wd, dnn_type(s->dt), CUDNN_TENSOR_NHWC,
									    nd + 2, wdims),
						 "cudnnSetFilterNdDescriptor", d) &&
			       !choose_algo(k, s, h, xn, wn, yn, &lms));
		if (s->cl_nchw && k->d) {
			free(k->d->error);
			k->d->error = NULL;
		}
	}
	if (!s->cg && (!s->nhwc || s->cl_nchw) && !legacy_ready && legacy_nchw(k, s, h, xin, ybig, wdims, xn, wn, yn, &lms))
		return IR_ERR;
	if (s->nhwc) {
		/* the transposes around the conv (see conv_run) */
		if (s->cl_nchw) {
			s->xt_bytes = s->xcl ? align256((size_t)xn * es) : 0;
			s->yt_bytes = s->ycl ? align256((size_t)yn * es) : 0;
		} else {
			s->xt_bytes = s->xcl ? 0 : align256((size_t)(s->cpad ? xn / g.C * s->cpad : xn) * es);
			s->yt_bytes = s->ycl ? 0 : align256((size_t)yn * es);
		}
	}

	/* the epilogue: cuDNN's fused conv+bias+relu for float32 with a full-size Z
	 * or none, else our kernel */
	if (relu_call && !s->cg) {
		int64_t ones[MAX_SP] = { 1, 1, 1 };
		if (cuda_cudnn_check(api->CreateTensorDescriptor(&s->bd), "cudnnCreateTensorDescriptor", d) ||
		    set_tensor(api, s->bd, s->dt, 1, g.M, nd, ones, d) ||
		    cuda_cudnn_check(api->CreateActivationDescriptor(&s->ad), "cudnnCreateActivationDescriptor", d) ||
		    cuda_cudnn_check(api->SetActivationDescriptor(s->ad, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
				     "cudnnSetActivationDescriptor", d))
			return IR_ERR;
		if (s->bias_in < 0) {
			if (cuda_check(cudaMalloc(&s->zero_bias, (size_t)g.M * es), "cudaMalloc", d) ||
			    cuda_check(cudaMemsetAsync(s->zero_bias, 0, (size_t)g.M * es, k->ctx->stream), "cudaMemsetAsync",
				       d))
				return IR_ERR;
		}
		s->fused = true;
		snprintf(k->impl, sizeof(k->impl), "cudnn conv+bias+relu %s", fwd_algo_name(s->algo));
	} else {
		s->epilogue = !s->cg_fused && (s->bias_in >= 0 || s->z_in >= 0 || a.kind != KCONV_ACT_NONE);
		if (epilogue_init(k, s, &a, zfull))
			return IR_ERR;
		/* X back to NCHW: a transpose of [N][HW][C] with nothing applied */
		memset(&s->ep_tx, 0, sizeof(s->ep_tx));
		s->ep_tx.channels = g.C;
		s->ep_tx.inner = g.N && g.C ? xn / (g.N * g.C) : 1;
		char engine[32];
		snprintf(engine, sizeof(engine), "graph-api engine %d", s->cg ? s->cg->choice : 0);
		char impl[256];
		snprintf(impl, sizeof(impl), "cudnn %s %s%s%s%s%s", transpose ? "convtranspose bwd-data" : "conv fwd",
			 s->cg ? engine : transpose ? bwd_algo_name(s->algo) : fwd_algo_name(s->algo),
			 !s->nhwc ? "" : s->cl_nchw ? " nchw via transposes" : s->xcl && s->ycl ? " nhwc" : s->xcl ? " nhwc in" : s->cpad ? " nhwc out (x padded to 8 ch)" : " nhwc out",
			 s->cg_fused ? " fused tail" : "",
			 s->epilogue ? " + ogsh epilogue" : "", s->pad_x ? " (padded)" : s->crop_y ? " (cropped)" : "");
		snprintf(k->impl, sizeof(k->impl), "%.*s", (int)sizeof(k->impl) - 1, impl);
	}
	k->ws_bytes = s->buf_bytes + s->xt_bytes + s->yt_bytes + s->algo_ws;
	return 0;
}

static int conv_prepare(struct cuda_kctx *k)
{
	return conv_prepare_any(k, false, false);
}

static int convt_prepare(struct cuda_kctx *k)
{
	return conv_prepare_any(k, true, false);
}

static int fusedconv_prepare(struct cuda_kctx *k)
{
	return conv_prepare_any(k, false, true);
}

/* cudnnConvolutionForward with the prepared descriptors and algorithm. */
static int legacy_fwd(const struct conv_state *s, cudnnHandle_t h, const void *x, const void *w, void *y, void *algo_ws,
		      struct ir_diag *d)
{
	float one = 1.0f, zero = 0.0f;
	return cuda_cudnn_check(s->api->ConvolutionForward(h, &one, s->xd, x, s->wd, w, s->cd,
							   (cudnnConvolutionFwdAlgo_t)s->algo, algo_ws, s->algo_ws, &zero,
							   s->yd, y),
				"cudnnConvolutionForward", d);
}

static int conv_run(struct cuda_kctx *k)
{
	struct conv_state *s = k->state;
	if (s && s->pg)
		return patch_run(k, s);
	if (!s || !s->api)
		return 0;   /* an empty output */
	struct ir_diag *d = k->d;
	/* the handle prepare made, already on ctx->stream (cudnnSetStream is
	 * left out of run, which may be captured into a CUDA graph) */
	cudnnHandle_t h = k->ctx->cudnn;
	if (!h)
		return ir_diag_err(d, IR_ERR, "no cudnn handle: the node was not prepared");
	cudaStream_t st = k->ctx->stream;
	char *ws = k->ws;
	void *buf = s->buf_bytes ? ws : NULL;
	void *xt = s->xt_bytes ? ws + s->buf_bytes : NULL;
	void *yt = s->yt_bytes ? ws + s->buf_bytes + s->xt_bytes : NULL;
	void *algo_ws = s->algo_ws ? ws + s->buf_bytes + s->xt_bytes + s->yt_bytes : NULL;
	const void *x = k->in[0].data, *w = k->in[1].data;
	const void *b = s->bias_in >= 0 ? k->in[s->bias_in].data : NULL;
	const void *z = s->z_in >= 0 ? k->in[s->z_in].data : NULL;
	void *y = k->out[0].data;
	const struct geom *g = &s->g;
	float one = 1.0f, zero = 0.0f;
	if (s->pad_x) {
		kconv_launch_window(s->dt, x, buf, &s->win, 0.0f, st);
		if (cuda_check_launch("kconv_window", d))
			return IR_ERR;
		x = buf;
	}
	if (s->dw) {
		kconv_launch_depthwise(s->dt, x, s->w_nhwc, b, z, y, &s->dwp, st);
		return cuda_check_launch("kconv_depthwise", d);
	}
	if (s->dw_nchw) {
		kconv_launch_depthwise_nchw(s->dt, x, w, b, z, y, &s->dwp, st);
		return cuda_check_launch("kconv_depthwise_nchw", d);
	}
	if (s->nhwc && !s->cl_nchw) {
		/* channels-last: X into NHWC when it is not, the conv (with its tail
		 * when fused), then the epilogue in place or on the way back to NCHW */
		if (!s->xcl) {
			if (s->cpad)
				kconv_launch_pad_nhwc(s->dt, x, xt, g->N, (int)g->C, g->in[0] * g->in[1], s->cpad, st);
			else
				kconv_launch_to_nhwc(s->dt, x, xt, g->N, g->C, g->in[0] * g->in[1], st);
			if (cuda_check_launch("kconv_to_nhwc", d))
				return IR_ERR;
			x = xt;
		}
		void *dst = s->ycl ? y : yt;
		if (s->cg) {
			struct cg_bufs cb = { x, s->w_nhwc, b ? b : s->zero_bias, z, dst, algo_ws };
			if (cg_run(s->cg, h, &cb, d))
				return IR_ERR;
		} else if (legacy_fwd(s, h, x, s->w_nhwc, dst, algo_ws, d)) {
			return IR_ERR;
		}
		if (s->cg_fused)
			return 0;
		if (!s->ycl) {
			kconv_launch_from_nhwc(s->dt, yt, y, b, z, &s->ep, g->N, st);
			return cuda_check_launch("kconv_from_nhwc", d);
		}
		if (s->epilogue) {
			kconv_launch_epilogue_cl(s->dt, y, b, z, &s->ep_cl, st);
			return cuda_check_launch("kconv_epilogue_cl", d);
		}
		return 0;
	}
	if (s->nhwc) {
		/* no channels-last algorithm: NCHW between transposes */
		if (s->xcl) {
			kconv_launch_from_nhwc(s->dt, x, xt, NULL, NULL, &s->ep_tx, g->N, st);
			if (cuda_check_launch("kconv_from_nhwc", d))
				return IR_ERR;
			x = xt;
		}
		void *dst = s->ycl ? yt : y;
		if (legacy_fwd(s, h, x, w, dst, algo_ws, d))
			return IR_ERR;
		if (s->ycl) {
			kconv_launch_to_nhwc(s->dt, yt, y, g->N, g->M, g->out[0] * g->out[1], st);
			if (cuda_check_launch("kconv_to_nhwc", d))
				return IR_ERR;
		}
		if (s->epilogue) {
			if (s->ycl)
				kconv_launch_epilogue_cl(s->dt, y, b, z, &s->ep_cl, st);
			else
				kconv_launch_epilogue(s->dt, y, b, z, &s->ep, st);
			return cuda_check_launch("kconv_epilogue", d);
		}
		return 0;
	}
	if (s->dir == CONV_BWD) {
		void *dst = s->crop_y ? buf : y;
		if (cuda_cudnn_check(s->api->ConvolutionBackwardData(h, &one, s->wd, w, s->xd, x, s->cd,
								     (cudnnConvolutionBwdDataAlgo_t)s->algo, algo_ws,
								     s->algo_ws, &zero, s->yd, dst),
				     "cudnnConvolutionBackwardData", d))
			return IR_ERR;
		if (s->crop_y) {
			kconv_launch_window(s->dt, buf, y, &s->win, 0.0f, st);
			if (cuda_check_launch("kconv_window", d))
				return IR_ERR;
		}
	} else if (s->fused) {
		float alpha2 = z ? 1.0f : 0.0f;
		if (!z) {
			/* z aliases y with alpha2 0: cleared so that no NaN left in y leaks in */
			if (cuda_check(cudaMemsetAsync(y, 0, (size_t)cuda_numel(&k->out[0]) * dt_size(s->dt), st),
				       "cudaMemsetAsync", d))
				return IR_ERR;
			z = y;
		}
		if (cuda_cudnn_check(s->api->ConvolutionBiasActivationForward(
					     h, &one, s->xd, x, s->wd, w, s->cd, (cudnnConvolutionFwdAlgo_t)s->algo, algo_ws,
					     s->algo_ws, &alpha2, s->yd, z, s->bd, b ? b : s->zero_bias, s->ad, s->yd, y),
				     "cudnnConvolutionBiasActivationForward", d))
			return IR_ERR;
		return 0;
	} else if (s->cg) {
		struct cg_bufs cb = { x, w, NULL, NULL, y, algo_ws };
		if (cg_run(s->cg, h, &cb, d))
			return IR_ERR;
	} else if (legacy_fwd(s, h, x, w, y, algo_ws, d)) {
		return IR_ERR;
	}
	if (s->epilogue) {
		kconv_launch_epilogue(s->dt, y, b, z, &s->ep, st);
		return cuda_check_launch("kconv_epilogue", d);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* MaxPool, AveragePool                                                      */
/* ------------------------------------------------------------------------ */

struct pool_state {
	const struct cudnn_api *api;
	int dt;
	cudnnTensorDescriptor_t xd, yd;
	cudnnPoolingDescriptor_t pd;
	bool pad_x;
	struct kconv_window win;
	float fill;
};

static void pool_release(void *p)
{
	struct pool_state *s = p;
	if (!s)
		return;
	if (s->api) {
		if (s->xd)
			s->api->DestroyTensorDescriptor(s->xd);
		if (s->yd)
			s->api->DestroyTensorDescriptor(s->yd);
		if (s->pd)
			s->api->DestroyPoolingDescriptor(s->pd);
	}
	free(s);
}

/*
 * The pool's geometry with the pads cuDNN needs: pe grows to reach the
 * planner's output dims (ceil_mode), *ceil_extra says whether it did.
 */
static bool pool_geom(const struct cuda_kctx *k, bool is_max, struct geom *g, bool *ceil_extra, char *why, size_t size)
{
	const struct ir_node *n = k->node;
	const struct cuda_tensor *x = &k->in[0], *y = &k->out[0];
	memset(g, 0, sizeof(*g));
	*ceil_extra = false;
	int dt = x->dtype;
	if (!cuda_is_float(dt))
		return no(why, size, "dtype %s is not supported on the GPU", dtname(dt));
	if (y->dtype != dt)
		return no(why, size, "input and output differ in dtype");
	if (is_max && k->n_out > 1 && k->out[1].dtype != 0)
		return no(why, size, "the Indices output is not supported on the GPU");
	if (x->rank < 3 || x->rank > 2 + MAX_SP)
		return no(why, size, "%d-d pooling is not supported on the GPU", x->rank - 2);
	if (!fits_int(x) || !fits_int(y))
		return no(why, size, "tensors of 2^31 elements or more are not supported by cuDNN");
	int nd = g->nd = x->rank - 2;
	g->N = x->dims[0];
	g->C = g->M = x->dims[1];
	g->G = 1;
	int cnt;
	if (!attr_ints(n, "kernel_shape", &cnt) || cnt != nd)
		return no(why, size, "kernel_shape is missing or has the wrong length");
	int64_t pads[2 * MAX_SP];
	if (!ints_n(n, "kernel_shape", nd, g->ker, 1, 1, why, size) || !ints_n(n, "strides", nd, g->str, 1, 1, why, size) ||
	    !ints_n(n, "dilations", nd, g->dil, 1, 1, why, size) || !ints_n(n, "pads", 2 * nd, pads, 0, 0, why, size))
		return false;
	for (int i = 0; i < nd; i++)
		if (g->dil[i] != 1)
			return no(why, size, "dilated pooling is not supported on the GPU");
	const char *ap = attr_s(n, "auto_pad", "NOTSET");
	bool upper = !strcmp(ap, "SAME_UPPER"), same = upper || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
	if (!same && !valid && strcmp(ap, "NOTSET") && *ap)
		return no(why, size, "auto_pad '%s' is not supported", ap);
	if (y->rank != x->rank || y->dims[0] != g->N || y->dims[1] != g->C)
		return no(why, size, "the output shape does not match the pool's");
	for (int i = 0; i < nd; i++) {
		g->in[i] = x->dims[i + 2];
		g->out[i] = y->dims[i + 2];
		if (same) {
			int64_t o = (g->in[i] + g->str[i] - 1) / g->str[i];
			int64_t total = (o - 1) * g->str[i] + g->ker[i] - g->in[i];
			if (total < 0)
				total = 0;
			g->pb[i] = upper ? total / 2 : total - total / 2;
			g->pe[i] = total - g->pb[i];
		} else if (!valid) {
			g->pb[i] = pads[i];
			g->pe[i] = pads[nd + i];
		}
		if (g->out[i] < 1)
			continue;
		/* the end padding that makes floor((in + pb + pe - k) / s) + 1 the planner's dims */
		int64_t need = (g->out[i] - 1) * g->str[i] + g->ker[i] - g->in[i] - g->pb[i];
		if (need > g->pe[i]) {
			if (need - g->pe[i] >= g->str[i] + g->ker[i])
				return no(why, size, "the output shape does not match the pool's");
			g->pe[i] = need;
			*ceil_extra = true;
		} else if ((g->in[i] + g->pb[i] + g->pe[i] - g->ker[i]) / g->str[i] + 1 != g->out[i]) {
			return no(why, size, "the output shape does not match the pool's");
		}
	}
	return true;
}

static bool pool_supports_any(const struct cuda_kctx *k, bool is_max, char *why, size_t size)
{
	struct geom g;
	bool ceil_extra;
	if (!pool_geom(k, is_max, &g, &ceil_extra, why, size))
		return false;
	if (k->in[0].nhwc || k->out[0].nhwc) {
		if (k->in[0].nhwc != k->out[0].nhwc || g.nd != 2)
			return no(why, size, "channels-last pooling needs a 2-d pool with both sides channels-last");
		for (int i = 0; i < g.nd; i++)
			if (g.pb[i] != g.pe[i])
				return no(why, size, "channels-last pooling needs symmetric pads");
	}
	if (is_max)
		return true;
	bool include = ir_node_attr_int(k->node, "count_include_pad", 0) != 0;
	bool sym = true;
	for (int i = 0; i < g.nd; i++)
		if (g.pb[i] != g.pe[i])
			sym = false;
	if (ceil_extra && (include || !sym))
		return no(why, size, "ceil_mode that adds a window is not supported on the GPU with these pads");
	if (!include && !sym)
		return no(why, size, "asymmetric pads without count_include_pad are not supported on the GPU");
	return true;
}

static bool maxpool_supports(const struct cuda_kctx *k, char *why, size_t size)
{
	return pool_supports_any(k, true, why, size);
}

static bool avgpool_supports(const struct cuda_kctx *k, char *why, size_t size)
{
	return pool_supports_any(k, false, why, size);
}

static int pool_prepare_any(struct cuda_kctx *k, bool is_max)
{
	char why[200];
	struct geom g;
	bool ceil_extra;
	if (!pool_geom(k, is_max, &g, &ceil_extra, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	promote(&g);
	struct pool_state *s = calloc(1, sizeof(*s));
	if (!s)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->state = s;
	s->dt = k->in[0].dtype;
	bool include = !is_max && ir_node_attr_int(k->node, "count_include_pad", 0) != 0;
	snprintf(k->impl, sizeof(k->impl), "cudnn pool %s%s", is_max ? "max" : "avg", k->in[0].nhwc ? " nhwc" : "");
	if (cuda_numel(&k->out[0]) == 0)
		return 0;
	const struct cudnn_api *api = cuda_cudnn(k->d);
	if (!api || !cuda_cudnn_handle(k->ctx, k->d))
		return IR_ERR;
	s->api = api;
	struct ir_diag *d = k->d;
	int nd = g.nd;
	int win[MAX_SP], pad[MAX_SP], str[MAX_SP];
	int64_t xin[MAX_SP];
	s->win.nd = nd;
	s->win.outer = g.N * g.C;
	int64_t xn = g.N * g.C;
	for (int i = 0; i < nd; i++) {
		int64_t p = g.pb[i] < g.pe[i] ? g.pb[i] : g.pe[i];
		win[i] = (int)g.ker[i];
		pad[i] = (int)p;
		str[i] = (int)g.str[i];
		xin[i] = g.in[i] + (g.pb[i] - p) + (g.pe[i] - p);
		s->win.src[i] = g.in[i];
		s->win.dst[i] = xin[i];
		s->win.lo[i] = g.pb[i] - p;
		if (g.pb[i] != p || g.pe[i] != p)
			s->pad_x = true;
		xn *= xin[i];
	}
	if (xn >= INT_MAX)
		return ir_diag_err(d, IR_ERR, "the padded pool is too large for cuDNN");
	/* padding we add ourselves: never the max; zeros counted as ONNX counts
	 * them (count_include_pad, pads within the declared ones) */
	s->fill = is_max ? -INFINITY : 0.0f;
	cudnnPoolingMode_t mode = is_max ? CUDNN_POOLING_MAX
				 : include ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
					   : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
	if (cuda_cudnn_check(api->CreateTensorDescriptor(&s->xd), "cudnnCreateTensorDescriptor", d) ||
	    cuda_cudnn_check(api->CreateTensorDescriptor(&s->yd), "cudnnCreateTensorDescriptor", d) ||
	    cuda_cudnn_check(api->CreatePoolingDescriptor(&s->pd), "cudnnCreatePoolingDescriptor", d) ||
	    (k->in[0].nhwc ? set_tensor_nhwc(api, s->xd, s->dt, g.N, g.C, xin, d) || set_tensor_nhwc(api, s->yd, s->dt, g.N, g.C, g.out, d)
			   : set_tensor(api, s->xd, s->dt, g.N, g.C, nd, xin, d) ||
				     set_tensor(api, s->yd, s->dt, g.N, g.C, nd, g.out, d)) ||
	    cuda_cudnn_check(api->SetPoolingNdDescriptor(s->pd, mode, CUDNN_NOT_PROPAGATE_NAN, nd, win, pad, str),
			     "cudnnSetPoolingNdDescriptor", d))
		return IR_ERR;
	if (s->pad_x) {
		k->ws_bytes = align256((size_t)xn * dt_size(s->dt));
		snprintf(k->impl, sizeof(k->impl), "cudnn pool %s (padded)", is_max ? "max" : "avg");
	}
	return 0;
}

static int maxpool_prepare(struct cuda_kctx *k)
{
	return pool_prepare_any(k, true);
}

static int avgpool_prepare(struct cuda_kctx *k)
{
	return pool_prepare_any(k, false);
}

static int pool_run(struct cuda_kctx *k)
{
	struct pool_state *s = k->state;
	if (!s || !s->api)
		return 0;
	struct ir_diag *d = k->d;
	/* the handle prepare made, already on ctx->stream (cudnnSetStream is
	 * left out of run, which may be captured into a CUDA graph) */
	cudnnHandle_t h = k->ctx->cudnn;
	if (!h)
		return ir_diag_err(d, IR_ERR, "no cudnn handle: the node was not prepared");
	const void *x = k->in[0].data;
	if (s->pad_x) {
		kconv_launch_window(s->dt, x, k->ws, &s->win, s->fill, k->ctx->stream);
		if (cuda_check_launch("kconv_window", d))
			return IR_ERR;
		x = k->ws;
	}
	float one = 1.0f, zero = 0.0f;
	return cuda_cudnn_check(s->api->PoolingForward(h, s->pd, &one, s->xd, x, &zero, s->yd, k->out[0].data),
				"cudnnPoolingForward", d);
}

/* ------------------------------------------------------------------------ */
/* LRN (across channels; the spatial dims are one axis to cuDNN)             */
/* ------------------------------------------------------------------------ */

struct lrn_state {
	const struct cudnn_api *api;
	cudnnTensorDescriptor_t xd;
	cudnnLRNDescriptor_t ld;
};

static void lrn_release(void *p)
{
	struct lrn_state *s = p;
	if (!s)
		return;
	if (s->api) {
		if (s->xd)
			s->api->DestroyTensorDescriptor(s->xd);
		if (s->ld)
			s->api->DestroyLRNDescriptor(s->ld);
	}
	free(s);
}

static bool lrn_supports(const struct cuda_kctx *k, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!cuda_is_float(x->dtype))
		return no(why, size, "dtype %s is not supported on the GPU", dtname(x->dtype));
	/* cuDNN's LRN answers CUDNN_STATUS_NOT_SUPPORTED for bfloat16 (seen on cuDNN 9.19, H200) */
	if (x->dtype == IR_BFLOAT16)
		return no(why, size, "LRN in bfloat16 is not supported by cuDNN");
	if (k->out[0].dtype != x->dtype)
		return no(why, size, "input and output differ in dtype");
	if (x->rank < 2)
		return no(why, size, "input must have rank 2 or more");
	if (!fits_int(x))
		return no(why, size, "tensors of 2^31 elements or more are not supported by cuDNN");
	if (!ir_node_attr(k->node, "size"))
		return no(why, size, "attribute 'size' is missing");
	int64_t n = ir_node_attr_int(k->node, "size", 1);
	/* cuDNN centres the window; ONNX's even windows lean one way */
	if (n < CUDNN_LRN_MIN_N || n > CUDNN_LRN_MAX_N || n % 2 == 0)
		return no(why, size, "size %lld is not supported on the GPU (odd, 1 to %d)", (long long)n, CUDNN_LRN_MAX_N);
	double beta = ir_node_attr_float(k->node, "beta", 0.75f), bias = ir_node_attr_float(k->node, "bias", 1.0f);
	if (beta < CUDNN_LRN_MIN_BETA || bias < CUDNN_LRN_MIN_K)
		return no(why, size, "beta below %g or bias below %g is not supported on the GPU", CUDNN_LRN_MIN_BETA,
			  CUDNN_LRN_MIN_K);
	return true;
}

static int lrn_prepare(struct cuda_kctx *k)
{
	struct lrn_state *s = calloc(1, sizeof(*s));
	if (!s)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->state = s;
	snprintf(k->impl, sizeof(k->impl), "cudnn lrn");
	const struct cuda_tensor *x = &k->in[0];
	if (cuda_numel(x) == 0)
		return 0;
	const struct cudnn_api *api = cuda_cudnn(k->d);
	if (!api || !cuda_cudnn_handle(k->ctx, k->d))
		return IR_ERR;
	s->api = api;
	struct ir_diag *d = k->d;
	int64_t sp[2] = { 1, 1 };
	for (int i = 2; i < x->rank; i++)
		sp[0] *= x->dims[i];
	/* alpha as ONNX gives it: cuDNN divides it by the window too */
	unsigned n = (unsigned)ir_node_attr_int(k->node, "size", 1);
	double alpha = ir_node_attr_float(k->node, "alpha", 1e-4f), beta = ir_node_attr_float(k->node, "beta", 0.75f);
	double bias = ir_node_attr_float(k->node, "bias", 1.0f);
	if (cuda_cudnn_check(api->CreateTensorDescriptor(&s->xd), "cudnnCreateTensorDescriptor", d) ||
	    set_tensor(api, s->xd, x->dtype, x->dims[0], x->dims[1], 2, sp, d) ||
	    cuda_cudnn_check(api->CreateLRNDescriptor(&s->ld), "cudnnCreateLRNDescriptor", d) ||
	    cuda_cudnn_check(api->SetLRNDescriptor(s->ld, n, alpha, beta, bias), "cudnnSetLRNDescriptor", d))
		return IR_ERR;
	return 0;
}

static int lrn_run(struct cuda_kctx *k)
{
	struct lrn_state *s = k->state;
	if (!s || !s->api)
		return 0;
	cudnnHandle_t h = k->ctx->cudnn;
	if (!h)
		return ir_diag_err(k->d, IR_ERR, "no cudnn handle: the node was not prepared");
	float one = 1.0f, zero = 0.0f;
	return cuda_cudnn_check(s->api->LRNCrossChannelForward(h, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, s->xd,
							       k->in[0].data, &zero, s->xd, k->out[0].data),
				"cudnnLRNCrossChannelForward", k->d);
}

const struct cuda_kernel cuda_k_conv[] = {
	{ IR_OP_Conv, conv_supports, conv_prepare, conv_run, conv_release },
	{ IR_OP_ConvTranspose, convt_supports, convt_prepare, conv_run, conv_release },
	{ IR_OP_ogsh_FusedConv, fusedconv_supports, fusedconv_prepare, conv_run, conv_release },
	{ IR_OP_MaxPool, maxpool_supports, maxpool_prepare, pool_run, pool_release },
	{ IR_OP_AveragePool, avgpool_supports, avgpool_prepare, pool_run, pool_release },
	{ IR_OP_LRN, lrn_supports, lrn_prepare, lrn_run, lrn_release },
	{ .op = -1 },
};
