/*
 * fuse_conv_add.c - the fuse-conv-add pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_fuse_conv_add = {
	.name = "fuse-conv-add",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 2,
	.run = run,
};
