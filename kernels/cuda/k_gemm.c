/*
 * k_gemm.c - GPU kernel entries of the gemm family (launchers in k_gemm.cu).
 */
#include "kernels/cuda/cuda.h"

const struct cuda_kernel cuda_k_gemm[] = {
	{ .op = -1 },
};
