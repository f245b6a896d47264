/*
 * k_elementwise.c - GPU kernel entries of the elementwise family (launchers in k_elementwise.cu).
 */
#include "kernels/cuda/cuda.h"

const struct cuda_kernel cuda_k_elementwise[] = {
	{ .op = -1 },
};
