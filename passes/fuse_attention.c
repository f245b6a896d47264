/*
 * fuse_attention.c - the fuse-attention pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_fuse_attention = {
	.name = "fuse-attention",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 3,
	.run = run,
};
