/*
 * info.c - what CUDA, cuDNN and cuBLAS this build was compiled against and
 * what the machine has (for `ogsh --version`). Without CUDA it reports that.
 */
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

#ifdef OGSH_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#endif

void kern_cuda_info(struct kern_cuda_info *info)
{
	memset(info, 0, sizeof(*info));
#ifdef OGSH_HAVE_CUDA
	info->compiled = true;
	if (cudaRuntimeGetVersion(&info->runtime_version) != cudaSuccess)
		info->runtime_version = 0;
	if (cudaDriverGetVersion(&info->driver_version) != cudaSuccess)
		info->driver_version = 0;
	if (info->driver_version && cudaGetDeviceCount(&info->device_count) != cudaSuccess)
		info->device_count = 0;
	if (info->device_count > 0) {
		struct cudaDeviceProp p;
		if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
			snprintf(info->device_name, sizeof(info->device_name), "%s", p.name);
		}
	}
	info->cudnn_version = (long)cudnnGetVersion();
	info->cublas_version = (int)cublasLtGetVersion();
#endif
}
