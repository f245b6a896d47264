/*
 * k_ml.c - CPU kernels: ops of the ai.onnx.ml domain.
 */
#include "cpu.h"

const struct cpu_kernel cpu_kernels_ml[] = {
	{ -1, NULL, NULL },
};
