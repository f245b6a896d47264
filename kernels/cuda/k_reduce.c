/*
 * k_reduce.c - GPU kernel entries of the reduce family (launchers in k_reduce.cu).
 */
#include "kernels/cuda/cuda.h"

const struct cuda_kernel cuda_k_reduce[] = {
	{ .op = -1 },
};
