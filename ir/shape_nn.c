/*
 * shape_nn.c - shape functions of neural-network ops: convolutions,
 * pooling, Gemm and MatMul, reductions, recurrent layers, attention.
 */
#include "infer.h"

#include <inttypes.h>

const struct sx_entry sx_nn[] = {
	{ -1, NULL },
};
