/*
 * kernels.h - the arithmetic: CPU reference kernels (kernels/cpu/) and, in a
 * CUDA build, the GPU kernels (kernels/cuda/). The only public header of
 * kernels/.
 */
#ifndef OGSH_KERNELS_H
#define OGSH_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

/* Summary statistics of n elements of one ONNX element type. */
struct kern_stats {
	uint64_t count;      /* elements looked at */
	uint64_t nan, inf;   /* NaN and +-Inf elements (floats only) */
	uint64_t zeros;
	double min, max;     /* over finite elements; NaN if there are none */
	double mean, std;    /* population std, over finite elements */
	double abs_max;
};

/*
 * Computes statistics of `n` elements of `dtype` in raw ONNX layout at
 * `data` (may be unaligned). Complex types use the real parts. Returns
 * false if stopped by ir_interrupted (partial results in *st).
 */
bool cpu_stats(int dtype, const void *data, uint64_t n, struct kern_stats *st);

/* What the CUDA side of the build was compiled with and what the machine
 * has (libraries opened with dlopen, nothing linked). In a build without
 * CUDA, `compiled` is false and the rest is zero. */
struct kern_cuda_info {
	bool compiled;
	int runtime_version;   /* cudaRuntimeGetVersion, e.g. 13000 */
	int driver_version;    /* 0: no driver */
	int device_count;
	long cudnn_version;    /* cudnnGetVersion of the library found; 0: none */
	long cudnn_built;      /* CUDNN_VERSION of the headers ogsh was built with */
	int cublas_version;    /* cublasLtGetVersion; 0: none found */
	char device_name[256]; /* device 0 */
};
void kern_cuda_info(struct kern_cuda_info *info);

#endif
