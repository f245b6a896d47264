/*
 * fuse_pad.c - the fuse-pad pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_fuse_pad = {
	.name = "fuse-pad",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 2,
	.run = run,
};
