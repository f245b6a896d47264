/*
 * registry.c - the GPU kernels of every family, by op.
 *
 * To add a family: write kernels/cuda/k_FAMILY.c (and .cu) exporting a
 * table, declare it in cuda.h, list it below and in kernels/meson.build.
 */
#include "kernels/cuda/cuda.h"

#include <pthread.h>

static const struct cuda_kernel *const tables[] = {
	cuda_k_elementwise, cuda_k_tensor, cuda_k_reduce, cuda_k_conv, cuda_k_gemm,
	cuda_k_quant,
	cuda_k_qlinear,
};

static const struct cuda_kernel *by_op[IR_OP_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void)
{
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct cuda_kernel *k = tables[t]; k->op >= 0; k++)
			if (k->op < IR_OP_COUNT && !by_op[k->op])
				by_op[k->op] = k;
}

const struct cuda_kernel *cuda_kernel_find(int op)
{
	if (op < 0 || op >= IR_OP_COUNT)
		return NULL;
	pthread_once(&once, build);
	return by_op[op];
}

int cuda_kernel_ops(int *ops, int max)
{
	pthread_once(&once, build);
	int n = 0;
	for (int op = 0; op < IR_OP_COUNT; op++)
		if (by_op[op]) {
			if (n < max)
				ops[n] = op;
			n++;
		}
	return n;
}
