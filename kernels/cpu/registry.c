/*
 * registry.c - the CPU kernel table: one row per op of ir/ops.def, filled
 * from the family lists (cpu_kernels_<family>[] in the k_*.c files).
 *
 * To add a family: make kernels/cpu/k_<family>.c with its list, declare the
 * list in cpu.h, add it to `families` below and the file to meson.build.
 */
#include "cpu.h"

#include <stdio.h>
#include <pthread.h>

static const struct cpu_kernel *const families[] = {
	cpu_kernels_elementwise, cpu_kernels_cast, cpu_kernels_tensor, cpu_kernels_index,
	cpu_kernels_reduce, cpu_kernels_norm, cpu_kernels_gemm, cpu_kernels_conv,
	cpu_kernels_pool, cpu_kernels_quant, cpu_kernels_image, cpu_kernels_signal,
	cpu_kernels_rnn, cpu_kernels_attention, cpu_kernels_sequence, cpu_kernels_control,
	cpu_kernels_string, cpu_kernels_ml, cpu_kernels_fused,
};

static const struct cpu_kernel *table[IR_OP_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void)
{
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
		for (const struct cpu_kernel *e = families[f]; e->op >= 0; e++)
			if (e->op < IR_OP_COUNT && !table[e->op])
				table[e->op] = e;
}

cpu_kernel_fn cpu_kernel(int op)
{
	pthread_once(&once, build);
	if (op < 0 || op >= IR_OP_COUNT || !table[op])
		return NULL;
	return table[op]->run;
}

bool cpu_supports(const struct ir_node *n, char *why, size_t size)
{
	pthread_once(&once, build);
	if (n->op < 0 || n->op >= IR_OP_COUNT || !table[n->op]) {
		snprintf(why, size, "has no cpu kernel");
		return false;
	}
	if (table[n->op]->supports)
		return table[n->op]->supports(n, why, size);
	return true;
}

int cpu_run_node(struct cpu_kctx *k)
{
	char why[256];
	if (!cpu_supports(k->node, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	return cpu_kernel(k->node->op)(k);
}
