/*
 * libs_cudnn.c - cuDNN, opened with dlopen on first use: ogsh does not link
 * it, so it starts on a machine without one and pays for the library only
 * when a plan puts a convolution or pool on the GPU.
 *
 * To use another cuDNN function: add it to struct cudnn_api (cudnn_api.h)
 * and to syms[] below.
 */
#include "kernels/cuda/cudnn_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static struct cudnn_api api;
static const struct cudnn_api *api_ok;
static char api_err[512];
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

#define SYM(name) { "cudnn" #name, offsetof(struct cudnn_api, name) }
static const struct {
	const char *name;
	size_t off;
} syms[] = {
	SYM(GetVersion), SYM(GetErrorString), SYM(Create), SYM(Destroy), SYM(SetStream),
	SYM(CreateTensorDescriptor), SYM(DestroyTensorDescriptor), SYM(SetTensorNdDescriptor),
	SYM(CreateFilterDescriptor), SYM(DestroyFilterDescriptor), SYM(SetFilterNdDescriptor),
	SYM(CreateConvolutionDescriptor), SYM(DestroyConvolutionDescriptor), SYM(SetConvolutionNdDescriptor),
	SYM(SetConvolutionMathType), SYM(SetConvolutionGroupCount),
	SYM(CreateActivationDescriptor), SYM(DestroyActivationDescriptor), SYM(SetActivationDescriptor),
	SYM(CreatePoolingDescriptor), SYM(DestroyPoolingDescriptor), SYM(SetPoolingNdDescriptor),
	SYM(GetConvolutionForwardAlgorithmMaxCount), SYM(GetConvolutionForwardAlgorithm_v7),
	SYM(FindConvolutionForwardAlgorithmEx), SYM(GetConvolutionForwardWorkspaceSize),
	SYM(ConvolutionForward), SYM(ConvolutionBiasActivationForward),
	SYM(GetConvolutionBackwardDataAlgorithmMaxCount), SYM(GetConvolutionBackwardDataAlgorithm_v7),
	SYM(FindConvolutionBackwardDataAlgorithmEx), SYM(GetConvolutionBackwardDataWorkspaceSize),
	SYM(ConvolutionBackwardData),
	SYM(PoolingForward),
	SYM(CreateLRNDescriptor), SYM(DestroyLRNDescriptor), SYM(SetLRNDescriptor), SYM(LRNCrossChannelForward),
	SYM(BackendCreateDescriptor), SYM(BackendDestroyDescriptor), SYM(BackendSetAttribute), SYM(BackendGetAttribute),
	SYM(BackendFinalize), SYM(BackendExecute),
};
#undef SYM

static void api_open(void)
{
	static const char *const names[] = { "libcudnn.so.9", "libcudnn.so" };
	void *h = NULL;
	char first[400] = "";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !h; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!h && !first[0]) {
			const char *e = dlerror();
			snprintf(first, sizeof(first), "%s", e ? e : names[i]);
		}
	}
	if (!h) {
		snprintf(api_err, sizeof(api_err), "cuDNN not found: %s", first);
		return;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *p = dlsym(h, syms[i].name);
		if (!p) {
			snprintf(api_err, sizeof(api_err), "cuDNN has no %s (version 9 or later is needed)", syms[i].name);
			return;   /* the library stays open: unloading CUDA libraries is not safe */
		}
		/* every member is a function pointer of one size; memcpy keeps the
		 * object-to-function pointer conversion well defined */
		memcpy((char *)&api + syms[i].off, &p, sizeof(p));
	}
	size_t v = api.GetVersion();
	if (v < 90000) {
		snprintf(api_err, sizeof(api_err), "cuDNN %zu.%zu is too old: version 9 or later is needed", v / 10000,
			 v / 100 % 100);
		return;
	}
	api_ok = &api;
}

const struct cudnn_api *cuda_cudnn(struct ir_diag *d)
{
	pthread_once(&api_once, api_open);
	if (!api_ok)
		ir_diag_err(d, IR_ERR, "%s", api_err);
	return api_ok;
}

int cuda_cudnn_check(cudnnStatus_t st, const char *call, struct ir_diag *d)
{
	if (st == CUDNN_STATUS_SUCCESS)
		return 0;
	const char *text = api_ok ? api_ok->GetErrorString(st) : NULL;
	bool oom = st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
		   st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
	return ir_diag_err(d, oom ? IR_ENOMEM : IR_ERR, "%s: cudnn error %s", call,
			   text ? text : "(unknown status)");
}

void *cuda_cudnn_handle(struct cuda_ctx *ctx, struct ir_diag *d)
{
	const struct cudnn_api *a = cuda_cudnn(d);
	if (!a)
		return NULL;
	if (!ctx->cudnn) {
		cudnnHandle_t h = NULL;
		if (cuda_cudnn_check(a->Create(&h), "cudnnCreate", d))
			return NULL;
		ctx->cudnn = h;
	}
	/* the stream is set on every use: cheap, and right if ctx->stream changed */
	if (cuda_cudnn_check(a->SetStream((cudnnHandle_t)ctx->cudnn, ctx->stream), "cudnnSetStream", d))
		return NULL;
	return ctx->cudnn;
}

void cuda_cudnn_handle_free(void *handle)
{
	if (handle && api_ok)
		api_ok->Destroy((cudnnHandle_t)handle);
}
