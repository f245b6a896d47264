/*
 * registry.c - every pass, in the order optimize runs them.
 *
 * To add a pass: write passes/NAME.c defining `const struct pass
 * pass_NAME = { .name, .summary, .explain, .options, .level, .run }`,
 * declare it below, list it in pass_registry[] (where in the pipeline it
 * belongs), add the file to passes/meson.build, and add a golden script
 * test (tests/script/) and a unit test (tests/passes/).
 */
#include "passes/pass.h"

#include <stddef.h>

extern const struct pass pass_eliminate_nops;
extern const struct pass pass_fold_shapes;
extern const struct pass pass_fold_constants;
extern const struct pass pass_cse;
extern const struct pass pass_dce;
extern const struct pass pass_prune_initializers;
extern const struct pass pass_hoist_gather;
extern const struct pass pass_fuse_pad;
extern const struct pass pass_fuse_conv_bn;
extern const struct pass pass_fuse_conv_add;
extern const struct pass pass_patch_matmul;
extern const struct pass pass_fuse_matmul_add;
extern const struct pass pass_fuse_gelu;
extern const struct pass pass_fuse_layernorm;
extern const struct pass pass_fuse_attention;
extern const struct pass pass_fuse_qkv;
extern const struct pass pass_fuse_activation;
extern const struct pass pass_fuse_elementwise;
extern const struct pass pass_convert_fp16;
extern const struct pass pass_convert_bf16;
extern const struct pass pass_quantize;

const struct pass *const pass_registry[] = {
	&pass_eliminate_nops,
	&pass_fold_shapes,
	&pass_fold_constants,
	&pass_cse,
	&pass_dce,
	&pass_prune_initializers,
	&pass_hoist_gather,
	&pass_fuse_pad,
	&pass_fuse_conv_bn,
	&pass_fuse_conv_add,
	&pass_patch_matmul,
	&pass_fuse_matmul_add,
	&pass_fuse_gelu,
	&pass_fuse_layernorm,
	&pass_fuse_activation,
	&pass_fuse_attention,
	&pass_fuse_qkv,
	&pass_fuse_elementwise,
	&pass_convert_fp16,
	&pass_convert_bf16,
	&pass_quantize,
	NULL,
};
