/*
 * gpu_test.h - the start of a GPU test program (tests/gpu): whether a GPU
 * is there to test on, and a stream on GPU 0. Header-only, one copy per
 * test program.
 */
#ifndef OGSH_TESTS_GPU_TEST_H
#define OGSH_TESTS_GPU_TEST_H

#include "exec/exec.h"

#include <stdbool.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

/* true with *stream made on GPU 0; false with why (the test then exits 77):
 * the executor's answer (driver, device, OGSH_DEVICE=cpu), then CUDA's */
static inline bool gpu_test_init(cudaStream_t *stream, char *why, size_t size)
{
	if (!exec_gpu_available(why, size))
		return false;
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		snprintf(why, size, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no GPU found");
		return false;
	}
	if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(stream) != cudaSuccess) {
		snprintf(why, size, "cannot use GPU 0: %s", cudaGetErrorString(cudaGetLastError()));
		return false;
	}
	return true;
}

#endif
