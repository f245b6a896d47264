/*
 * cuda.c - the CUDA device of the planner (exec/device.h): contexts and
 * streams, device memory and copies, the kernels of kernels/cuda/ (their
 * supports, prepare with tuning runs, run), graph capture and replay, and
 * events; plus what `gpu` asks (exec_gpu_available, exec_gpu_info,
 * exec_gpu_tune_cache). The planner itself is exec/plan.c. Built without
 * CUDA, only those three are here and say so.
 */
#include "exec/device.h"
#include "exec/exec.h"
#include "exec/exec_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef OGSH_HAVE_CUDA
#include "kernels/cuda/cublaslt_api.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cudnn_api.h"
#endif

static bool turned_off(char *why, size_t size)
{
	const char *e = getenv("OGSH_DEVICE");
	if (e && !strcmp(e, "cpu")) {
		snprintf(why, size, "the GPU is turned off (OGSH_DEVICE=cpu)");
		return true;
	}
	return false;
}

#ifndef OGSH_HAVE_CUDA

/* ------------------------------------------------------------------------ */
/* A build without CUDA: `gpu` says so (plan.c has no device then)          */
/* ------------------------------------------------------------------------ */

#define NO_CUDA "ogsh was built without CUDA"

bool exec_gpu_available(char *why, size_t size)
{
	if (!turned_off(why, size))
		snprintf(why, size, NO_CUDA);
	return false;
}

int exec_gpu_info(struct exec_gpu_info *info, struct ir_diag *d)
{
	char why[160];
	memset(info, 0, sizeof(*info));
	exec_gpu_available(why, sizeof(why));
	return ir_diag_err(d, IR_ERR, "%s", why);
}

int exec_gpu_tune_cache(const char *path, char *used, size_t size, int *entries, struct ir_diag *d)
{
	(void)path;
	char why[160];
	if (size)
		used[0] = 0;
	*entries = 0;
	exec_gpu_available(why, sizeof(why));
	return ir_diag_err(d, IR_ERR, "%s", why);
}

#else

/* ------------------------------------------------------------------------ */
/* What `gpu` asks: the GPU here, its figures, the tuning cache             */
/* ------------------------------------------------------------------------ */

bool exec_gpu_available(char *why, size_t size)
{
	char dummy[8];
	if (!why) {
		why = dummy;
		size = sizeof(dummy);
	}
	if (turned_off(why, size))
		return false;
	int drv = 0, n = 0;
	if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0) {
		snprintf(why, size, "no CUDA driver found");
		return false;
	}
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e == cudaErrorInsufficientDriver) {
		int rt = 0;
		cudaRuntimeGetVersion(&rt);
		snprintf(why, size, "the CUDA driver is too old (driver %d.%d, ogsh needs %d.%d)", drv / 1000,
			 drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
		return false;
	}
	if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
		snprintf(why, size, "no GPU found");
		return false;
	}
	if (e != cudaSuccess) {
		snprintf(why, size, "no GPU found (%s)", cudaGetErrorString(e));
		return false;
	}
	return true;
}

static int need_gpu(struct ir_diag *d)
{
	char why[160];
	if (!exec_gpu_available(why, sizeof(why)))
		return ir_diag_err(d, IR_ERR, "%s", why);
	return 0;
}

int exec_gpu_info(struct exec_gpu_info *info, struct ir_diag *d)
{
	memset(info, 0, sizeof(*info));
	int rc = need_gpu(d);
	if (rc)
		return rc;
	int dev = 0;
	struct cudaDeviceProp pr;
	if (cuda_check(cudaGetDevice(&dev), "cudaGetDevice", d) ||
	    cuda_check(cudaGetDeviceProperties(&pr, dev), "cudaGetDeviceProperties", d))
		return IR_ERR;
	snprintf(info->name, sizeof(info->name), "%s", pr.name);
	info->cc_major = pr.major;
	info->cc_minor = pr.minor;
	info->sm_count = pr.multiProcessorCount;
	info->bus_bits = pr.memoryBusWidth;
	int khz = 0, mkhz = 0;
	if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) == cudaSuccess)
		info->clock_mhz = khz / 1000;
	if (cudaDeviceGetAttribute(&mkhz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess)
		info->mem_clock_mhz = mkhz / 1000;
	size_t fr = 0, tot = 0;
	if (cuda_check(cudaMemGetInfo(&fr, &tot), "cudaMemGetInfo", d))
		return IR_ERR;
	info->mem_total = tot ? tot : pr.totalGlobalMem;
	info->mem_free = fr;
	double ghz = khz / 1e6;
	/* estimates: 128 FP32 FMA per SM per clock; dense fp16 tensor cores
	 * 2048 FMA per SM per clock on Hopper (989 TFLOP/s on an H100 SXM),
	 * 512 on Ampere/Ada, 256 on Volta/Turing; int8 and (Ada, Hopper) fp8
	 * twice the fp16 rate */
	info->peak_fp32_tflops = info->sm_count * 128.0 * 2 * ghz / 1e3;
	double tc = pr.major >= 9 ? 2048.0 : pr.major >= 8 ? 512.0 : pr.major >= 7 ? 256.0 : 0;
	info->peak_fp16_tflops = info->sm_count * tc * 2 * ghz / 1e3;
	info->peak_int8_tops = pr.major >= 8 || (pr.major == 7 && pr.minor >= 5) ? 2 * info->peak_fp16_tflops : 0;
	/* double data rate: two transfers per memory clock */
	info->peak_gbps = 2.0 * (mkhz * 1e3) * (info->bus_bits / 8.0) / 1e9;
	struct kern_cuda_info ki;
	kern_cuda_info(&ki);
	cudaDriverGetVersion(&info->driver_version);
	cudaRuntimeGetVersion(&info->runtime_version);
	info->cudnn_version = ki.cudnn_version;
	info->cublaslt_version = ki.cublas_version;
	return 0;
}

/* The tuning cache's key of this machine: GPU, driver and library versions. */
static void fingerprint_of(int dev, char *buf, size_t size)
{
	struct cudaDeviceProp pr;
	int drv = 0, rt = 0;
	struct kern_cuda_info ki;
	kern_cuda_info(&ki);
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	if (cudaGetDeviceProperties(&pr, dev) != cudaSuccess) {
		snprintf(pr.name, sizeof(pr.name), "?");
		pr.major = pr.minor = 0;
	}
	snprintf(buf, size, "%s sm%d%d driver %d runtime %d cudnn %ld cublaslt %d", pr.name, pr.major, pr.minor, drv,
		 rt, ki.cudnn_version, ki.cublas_version);
}

int exec_gpu_tune_cache(const char *path, char *used, size_t size, int *entries, struct ir_diag *d)
{
	*entries = 0;
	if (size)
		used[0] = 0;
	int rc = need_gpu(d), dev = 0;
	if (rc)
		return rc;
	char *dflt = path ? NULL : exec_default_tune_path();
	const char *pp = path ? path : dflt;
	if (!pp)
		return ir_diag_err(d, IR_ERR, "no tuning cache: neither XDG_CACHE_HOME nor HOME is set");
	snprintf(used, size, "%s", pp);
	char fp[512];
	if (cuda_check(cudaGetDevice(&dev), "cudaGetDevice", d)) {
		free(dflt);
		return IR_ERR;
	}
	fingerprint_of(dev, fp, sizeof(fp));
	struct cuda_tune *t = cuda_tune_open(pp, fp, d);
	free(dflt);
	if (!t)
		return IR_ERR;
	*entries = cuda_tune_count(t);
	cuda_tune_free(t);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The device table                                                          */
/* ------------------------------------------------------------------------ */

#define ALIGN 256

/* One plan's context. */
struct exec_dev_ctx {
	struct cuda_ctx ctx;
	cudaGraph_t graph;
	cudaGraphExec_t gexec;
	struct cuda_calib_ws *calib_ws;   /* exec_plan_calib_observe's scratch */
};

/* One prepared node: the kernel and its context. */
struct cnode {
	const struct cuda_kernel *k;
	struct cuda_tensor *in, *out;
	struct cuda_kctx kc;
};

static void to_cuda(struct cuda_tensor *t, const struct exec_dev_io *io, int n)
{
	for (int i = 0; i < n; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].data = io[i].data;
		t[i].dtype = io[i].dtype;
		t[i].rank = io[i].rank;
		memcpy(t[i].dims, io[i].dims, sizeof(t[i].dims));
		t[i].host = io[i].host;
		t[i].nhwc = io[i].nhwc;
	}
}

static bool dev_has_kernel(const struct ir_node *n, char *why, size_t size)
{
	if (cuda_kernel_find(n->op))
		return true;
	snprintf(why, size, "no GPU kernel for '%s'", n->op_type);
	return false;
}

static int dev_supports(const struct exec_dev_node *dn, char *why, size_t size, struct ir_diag *d)
{
	if (size)
		why[0] = 0;
	const struct cuda_kernel *k = cuda_kernel_find(dn->node->op);
	if (!k) {
		snprintf(why, size, "no GPU kernel for '%s'", dn->node->op_type);
		return 0;
	}
	if (!k->supports)
		return 0;
	/* most nodes have a few tensors: no allocation for them */
	struct cuda_tensor sin[8], sout[8];
	struct cuda_tensor *in = dn->n_in <= 8 ? sin : malloc(sizeof(*in) * (size_t)dn->n_in);
	struct cuda_tensor *out = dn->n_out <= 8 ? sout : malloc(sizeof(*out) * (size_t)dn->n_out);
	int rc;
	if (!in || !out) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
	} else {
		to_cuda(in, dn->in, dn->n_in);
		to_cuda(out, dn->out, dn->n_out);
		/* placement comes before the context: supports reads none of it */
		struct cuda_ctx ctx;
		memset(&ctx, 0, sizeof(ctx));
		struct cuda_kctx kc = {
			.node = dn->node, .opset = dn->opset,
			.n_in = dn->n_in, .n_out = dn->n_out, .in = in, .out = out,
			.ctx = &ctx, .d = d,
		};
		rc = k->supports(&kc, why, size) ? 1 : 0;
	}
	if (in != sin)
		free(in);
	if (out != sout)
		free(out);
	return rc;
}

static int dev_open(const struct exec_plan_opts *o, struct exec_dev_ctx **out, struct ir_diag *d)
{
	*out = NULL;
	struct exec_dev_ctx *dc = calloc(1, sizeof(*dc));
	if (!dc)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	struct cudaDeviceProp pr;
	if (cuda_check(cudaGetDevice(&dc->ctx.device), "cudaGetDevice", d) ||
	    cuda_check(cudaGetDeviceProperties(&pr, dc->ctx.device), "cudaGetDeviceProperties", d)) {
		free(dc);
		return IR_ERR;
	}
	dc->ctx.sm = pr.major * 10 + pr.minor;
	dc->ctx.tf32 = o->tf32;
	if (cuda_check(cudaStreamCreateWithFlags(&dc->ctx.stream, cudaStreamNonBlocking), "cudaStreamCreate", d)) {
		free(dc);
		return IR_ERR;
	}
	*out = dc;
	return 0;
}

static void dev_close(struct exec_dev_ctx *dc)
{
	if (!dc)
		return;
	cuda_calib_ws_free(dc->calib_ws);
	if (dc->gexec)
		cudaGraphExecDestroy(dc->gexec);
	if (dc->graph)
		cudaGraphDestroy(dc->graph);
	/* the library handles: made lazily by the kernels on ctx */
	if (dc->ctx.cudnn)
		cuda_cudnn_handle_free(dc->ctx.cudnn);
	if (dc->ctx.cublaslt)
		cuda_cublaslt_free(dc->ctx.cublaslt);
	if (dc->ctx.tune)
		cuda_tune_free(dc->ctx.tune);
	cudaStreamDestroy(dc->ctx.stream);
	free(dc);
}

static void dev_fingerprint(struct exec_dev_ctx *dc, char *buf, size_t size)
{
	fingerprint_of(dc->ctx.device, buf, size);
}

static int dev_tune_open(struct exec_dev_ctx *dc, const char *path, const char *fp, struct ir_diag *d)
{
	if (dc->ctx.tune)
		cuda_tune_free(dc->ctx.tune);
	dc->ctx.tune = cuda_tune_open(path, fp, d);
	return dc->ctx.tune ? 0 : IR_ERR;
}

static int dev_tune_count(struct exec_dev_ctx *dc)
{
	return dc->ctx.tune ? cuda_tune_count(dc->ctx.tune) : -1;
}

static int dev_tune_save(struct exec_dev_ctx *dc, struct ir_diag *d)
{
	return dc->ctx.tune ? cuda_tune_save(dc->ctx.tune, d) : 0;
}

static void dev_release(struct exec_dev_ctx *dc, void *state)
{
	(void)dc;
	struct cnode *c = state;
	if (!c)
		return;
	if (c->k->release && c->kc.state)
		c->k->release(c->kc.state);
	free(c->in);
	free(c->out);
	free(c);
}

static int dev_prepare(struct exec_dev_ctx *dc, const struct exec_dev_node *dn, void **state, size_t *ws_bytes,
		       char *impl, size_t impl_size, struct ir_diag *d)
{
	*state = NULL;
	*ws_bytes = 0;
	const struct ir_node *n = dn->node;
	const struct cuda_kernel *k = cuda_kernel_find(n->op);
	if (!k)
		return ir_diag_err(d, IR_ERR, "no GPU kernel for '%s'", n->op_type);
	struct cnode *c = calloc(1, sizeof(*c));
	if (!c)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	c->k = k;
	c->in = calloc((size_t)(dn->n_in ? dn->n_in : 1), sizeof(*c->in));
	c->out = calloc((size_t)(dn->n_out ? dn->n_out : 1), sizeof(*c->out));
	if (!c->in || !c->out) {
		dev_release(dc, c);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	to_cuda(c->in, dn->in, dn->n_in);
	to_cuda(c->out, dn->out, dn->n_out);
	c->kc = (struct cuda_kctx){
		.node = n, .opset = dn->opset,
		.n_in = dn->n_in, .n_out = dn->n_out, .in = c->in, .out = c->out,
		.ctx = &dc->ctx, .d = d,
	};
	int rc = 0;
	dc->ctx.tuning = true;
	if (k->prepare)
		rc = k->prepare(&c->kc);
	dc->ctx.tuning = false;
	if (rc) {
		dev_release(dc, c);
		return rc;
	}
	if (!c->kc.impl[0])
		snprintf(c->kc.impl, sizeof(c->kc.impl), "ogsh %s", n->op_type);
	snprintf(impl, impl_size, "%s", c->kc.impl);
	*ws_bytes = c->kc.ws_bytes;
	*state = c;
	return 0;
}

static int dev_launch(struct exec_dev_ctx *dc, void *state, void *ws, struct ir_diag *d)
{
	(void)dc;
	struct cnode *c = state;
	c->kc.d = d;
	c->kc.ws = ws;
	return c->k->run(&c->kc);
}

static const char *dev_impl(const void *state)
{
	const struct cnode *c = state;
	return c->kc.impl;
}

static int dev_alloc(struct exec_dev_ctx *dc, uint64_t bytes, const char *what, void **p, struct ir_diag *d)
{
	(void)dc;
	cudaError_t e = cudaMalloc(p, bytes ? bytes : ALIGN);
	if (e == cudaSuccess)
		return 0;
	*p = NULL;
	cudaGetLastError();
	if (e == cudaErrorMemoryAllocation) {
		double v = (double)bytes;
		const char *u = "B";
		if (v >= 1 << 30) {
			v /= 1 << 30;
			u = "GiB";
		} else if (v >= 1 << 20) {
			v /= 1 << 20;
			u = "MiB";
		} else if (v >= 1 << 10) {
			v /= 1 << 10;
			u = "KiB";
		}
		return ir_diag_err(d, IR_ENOMEM, "cannot allocate %s (%.1f %s): out of GPU memory", what, v, u);
	}
	return ir_diag_err(d, IR_ERR, "cannot allocate %s: cuda error %s: %s", what, cudaGetErrorName(e),
			   cudaGetErrorString(e));
}

static void dev_free(struct exec_dev_ctx *dc, void *p)
{
	(void)dc;
	cudaFree(p);
}

static int dev_upload(struct exec_dev_ctx *dc, void *dst, const void *src, uint64_t n, bool wait, const char *what,
		      struct ir_diag *d)
{
	if (wait)
		return cuda_check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), what, d);
	return cuda_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, dc->ctx.stream), what, d);
}

static int dev_download(struct exec_dev_ctx *dc, void *dst, const void *src, uint64_t n, const char *what,
			struct ir_diag *d)
{
	return cuda_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, dc->ctx.stream), what, d);
}

static int dev_sync(struct exec_dev_ctx *dc, const char *what, struct ir_diag *d)
{
	return cuda_check(cudaStreamSynchronize(dc->ctx.stream), what, d);
}

static void dev_sync_quiet(struct exec_dev_ctx *dc)
{
	cudaStreamSynchronize(dc->ctx.stream);
}

static void dev_clear_error(struct exec_dev_ctx *dc)
{
	(void)dc;
	cudaGetLastError();
}

static int dev_capture_begin(struct exec_dev_ctx *dc, char *why, size_t size)
{
	cudaError_t e = cudaStreamBeginCapture(dc->ctx.stream, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess) {
		snprintf(why, size, "capture failed: %s", cudaGetErrorString(e));
		cudaGetLastError();
		return IR_ERR;
	}
	return 0;
}

static int dev_capture_end(struct exec_dev_ctx *dc, int rc, const char *err, char *why, size_t size)
{
	cudaGraph_t graph = NULL;
	cudaError_t e = cudaStreamEndCapture(dc->ctx.stream, &graph);
	if (rc || e != cudaSuccess || !graph) {
		snprintf(why, size, "capture failed: %s", rc && err ? err : cudaGetErrorString(e));
		if (graph)
			cudaGraphDestroy(graph);
		cudaGetLastError();
		return IR_ERR;
	}
	cudaGraphExec_t ge = NULL;
	e = cudaGraphInstantiate(&ge, graph, 0);
	if (e != cudaSuccess) {
		snprintf(why, size, "instantiating the graph failed: %s", cudaGetErrorString(e));
		cudaGraphDestroy(graph);
		cudaGetLastError();
		return IR_ERR;
	}
	dc->graph = graph;
	dc->gexec = ge;
	return 0;
}

static int dev_replay(struct exec_dev_ctx *dc, struct ir_diag *d)
{
	if (!dc->gexec)
		return ir_diag_err(d, IR_ERR, "no graph was captured");
	return cuda_check(cudaGraphLaunch(dc->gexec, dc->ctx.stream), "cudaGraphLaunch", d);
}

static int dev_event_new(struct exec_dev_ctx *dc, void **ev, struct ir_diag *d)
{
	(void)dc;
	cudaEvent_t e = NULL;
	*ev = NULL;
	if (cuda_check(cudaEventCreate(&e), "cudaEventCreate", d))
		return IR_ERR;
	*ev = e;
	return 0;
}

static void dev_event_free(struct exec_dev_ctx *dc, void *ev)
{
	(void)dc;
	if (ev)
		cudaEventDestroy((cudaEvent_t)ev);
}

static int dev_event_record(struct exec_dev_ctx *dc, void *ev, struct ir_diag *d)
{
	return cuda_check(cudaEventRecord((cudaEvent_t)ev, dc->ctx.stream), "cudaEventRecord", d);
}

static int dev_event_wait(struct exec_dev_ctx *dc, void *ev, const char *what, struct ir_diag *d)
{
	(void)dc;
	return cuda_check(cudaEventSynchronize((cudaEvent_t)ev), what, d);
}

static int dev_event_ms(struct exec_dev_ctx *dc, void *e0, void *e1, double *ms, struct ir_diag *d)
{
	(void)dc;
	float f = 0;
	int rc = cuda_check(cudaEventElapsedTime(&f, (cudaEvent_t)e0, (cudaEvent_t)e1), "cudaEventElapsedTime", d);
	*ms = f;
	return rc;
}

static int dev_calib_observe(struct exec_dev_ctx *dc, const struct exec_dev_tensor *x, struct ir_calib_tensor *t,
			     int n_chan, struct ir_diag *d)
{
	struct cuda_tensor ct;
	memset(&ct, 0, sizeof(ct));
	ct.data = (void *)x->dev;
	ct.dtype = x->dtype;
	ct.rank = x->rank;
	for (int i = 0; i < x->rank; i++)
		ct.dims[i] = x->dims[i];
	ct.nhwc = x->nhwc;
	return cuda_calib_observe(t, &ct, n_chan, dc->ctx.stream, &dc->calib_ws, d);
}

const struct exec_device exec_device_cuda = {
	.name = "cuda",
	.available = exec_gpu_available,
	.has_kernel = dev_has_kernel,
	.supports = dev_supports,
	.open = dev_open,
	.close = dev_close,
	.fingerprint = dev_fingerprint,
	.tune_open = dev_tune_open,
	.tune_count = dev_tune_count,
	.tune_save = dev_tune_save,
	.prepare = dev_prepare,
	.release = dev_release,
	.launch = dev_launch,
	.impl = dev_impl,
	.alloc = dev_alloc,
	.free = dev_free,
	.upload = dev_upload,
	.download = dev_download,
	.sync = dev_sync,
	.sync_quiet = dev_sync_quiet,
	.clear_error = dev_clear_error,
	.capture_begin = dev_capture_begin,
	.capture_end = dev_capture_end,
	.replay = dev_replay,
	.event_new = dev_event_new,
	.event_free = dev_event_free,
	.event_record = dev_event_record,
	.event_wait = dev_event_wait,
	.event_ms = dev_event_ms,
	.calib_observe = dev_calib_observe,
};

#endif
