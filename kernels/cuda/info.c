/*
 * info.c - what CUDA, cuDNN and cuBLAS the machine has (for `ogsh
 * --version`). The libraries are opened with dlopen only when asked: linking
 * them would cost every start of ogsh about 0.1 s and 100 MB (cuBLASLt's
 * initialisation), and a CPU-only machine would not start ogsh at all.
 */
#include "kernels/kernels.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifdef OGSH_HAVE_CUDA
#include <cudnn_version.h>

static void *open_first(const char *const *names)
{
	for (; *names; names++) {
		void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
	}
	return NULL;
}

/* dlsym returns an object pointer; going through memcpy keeps the
 * conversion to a function pointer well defined */
#define SYM(h, name, var) do { void *p_ = (h) ? dlsym((h), (name)) : NULL; memcpy(&(var), &p_, sizeof(p_)); } while (0)
#endif

void kern_cuda_info(struct kern_cuda_info *info)
{
	memset(info, 0, sizeof(*info));
#ifdef OGSH_HAVE_CUDA
	info->compiled = true;
	info->cudnn_built = CUDNN_VERSION;
	static const char *const cudart[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL };
	static const char *const cuda[] = { "libcuda.so.1", "libcuda.so", NULL };
	static const char *const cudnn[] = { "libcudnn.so.9", "libcudnn.so", NULL };
	static const char *const cublaslt[] = { "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so", NULL };
	void *hrt = open_first(cudart), *hdrv = open_first(cuda), *hdnn = open_first(cudnn), *hlt = open_first(cublaslt);
	int (*rt_version)(int *) = NULL;
	SYM(hrt, "cudaRuntimeGetVersion", rt_version);
	if (!rt_version || rt_version(&info->runtime_version) != 0)
		info->runtime_version = 0;
	/* the driver API: plain C signatures, no structs to match */
	int (*cu_init)(unsigned) = NULL, (*cu_version)(int *) = NULL, (*cu_count)(int *) = NULL;
	int (*cu_get)(int *, int) = NULL, (*cu_name)(char *, int, int) = NULL;
	SYM(hdrv, "cuInit", cu_init);
	SYM(hdrv, "cuDriverGetVersion", cu_version);
	SYM(hdrv, "cuDeviceGetCount", cu_count);
	SYM(hdrv, "cuDeviceGet", cu_get);
	SYM(hdrv, "cuDeviceGetName", cu_name);
	if (cu_version && cu_version(&info->driver_version) != 0)
		info->driver_version = 0;
	if (info->driver_version && cu_init && cu_init(0) == 0 && cu_count && cu_count(&info->device_count) == 0 &&
	    info->device_count > 0 && cu_get && cu_name) {
		int dev;
		if (cu_get(&dev, 0) == 0 && cu_name(info->device_name, (int)sizeof(info->device_name) - 1, dev) != 0)
			info->device_name[0] = 0;
	} else if (!info->driver_version || info->device_count < 0) {
		info->device_count = 0;
	}
	size_t (*dnn_version)(void) = NULL, (*lt_version)(void) = NULL;
	SYM(hdnn, "cudnnGetVersion", dnn_version);
	SYM(hlt, "cublasLtGetVersion", lt_version);
	info->cudnn_version = dnn_version ? (long)dnn_version() : 0;
	info->cublas_version = lt_version ? (int)lt_version() : 0;
	/* the handles stay open: unloading CUDA libraries at exit is not safe */
#endif
}
