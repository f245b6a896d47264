/*
 * k_string.c - CPU kernels: string ops and text features.
 */
#include "cpu.h"

const struct cpu_kernel cpu_kernels_string[] = {
	{ -1, NULL, NULL },
};
