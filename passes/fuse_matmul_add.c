/*
 * fuse_matmul_add.c - the fuse-matmul-add pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_fuse_matmul_add = {
	.name = "fuse-matmul-add",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 2,
	.run = run,
};
