/*
 * fuse_activation.c - the fuse-activation pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_fuse_activation = {
	.name = "fuse-activation",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 2,
	.run = run,
};
