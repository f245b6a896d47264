/*
 * eliminate_nops.c - the eliminate-nops pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_eliminate_nops = {
	.name = "eliminate-nops",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 1,
	.run = run,
};
