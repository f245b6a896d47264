/*
 * fuse_elementwise.c - the fuse-elementwise pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_fuse_elementwise = {
	.name = "fuse-elementwise",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 3,
	.run = run,
};
