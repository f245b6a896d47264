/*
 * cse.c - the cse pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_cse = {
	.name = "cse",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 1,
	.run = run,
};
