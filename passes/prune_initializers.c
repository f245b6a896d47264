/*
 * prune_initializers.c - the prune-initializers pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_prune_initializers = {
	.name = "prune-initializers",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 1,
	.run = run,
};
