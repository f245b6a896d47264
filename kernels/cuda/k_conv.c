/*
 * k_conv.c - GPU kernel entries of the conv family (launchers in k_conv.cu).
 */
#include "kernels/cuda/cuda.h"

const struct cuda_kernel cuda_k_conv[] = {
	{ .op = -1 },
};
