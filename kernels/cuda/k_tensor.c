/*
 * k_tensor.c - GPU kernel entries of the tensor family (launchers in k_tensor.cu).
 */
#include "kernels/cuda/cuda.h"

const struct cuda_kernel cuda_k_tensor[] = {
	{ .op = -1 },
};
