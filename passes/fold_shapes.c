/*
 * fold_shapes.c - the fold-shapes pass.
 */
#include "passes/pass.h"

static int run(struct pass_ctx *c)
{
	(void)c;
	return 0;
}

const struct pass pass_fold_shapes = {
	.name = "fold-shapes",
	.summary = "(being written)",
	.explain = "(being written)",
	.level = 1,
	.run = run,
};
