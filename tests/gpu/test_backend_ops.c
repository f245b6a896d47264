/*
 * test_backend_ops.c - every GPU kernel against the CPU reference (anchor:
 * ggml's test-backend-ops).
 *
 * Each case is a one-node model built with the ir API: it runs on the CPU
 * reference (exec_run), then the node's GPU kernel runs directly (not
 * through the planner, so this test depends only on kernels/cuda): inputs
 * uploaded, outputs filled with 0xFF bytes first (NaN for floats, -1 for
 * integers) so that elements a kernel does not write are caught, supports,
 * prepare, run twice, download, compare. A case the kernel's `supports`
 * refuses is "skipped" with its reason (a failure when the case is marked
 * must-support).
 *
 * Exit status: 0 when every case passes, 1 on a failure, 77 (skip) when
 * there is no GPU or ogsh was built without CUDA. `--cpu-only` runs only the
 * CPU half of every case (checks this table on a machine without a GPU);
 * `--coverage` lists the ops the CPU runs and the GPU does not.
 *
 * To add cases: a row in `specs` below. Inputs are written
 *   [!][TYPE:]DIMS[@GEN][=V,V,...]
 * `!` makes the input a constant (an initializer: the kernel sees it in
 * cuda_tensor.host); TYPE is f32 f16 bf16 f64 i64 i32 i8 u8 b i16 u16 i4 u4
 * e4m3 e4m3uz e5m2 e5m2uz e2m1 (float8 e4m3fn..., float4), or $ (the
 * default) for the dtype the row sweeps; DIMS is 2x3x4, or s for a scalar;
 * GEN picks the random values (pos nz big half sm near1 nan ge1, i:LO:HI); =V
 * gives every value. `|` separates the shapes of the row's variants (input
 * k of variant j is its j-th alternative, or its last); an empty
 * alternative is an omitted input. Attributes are `name=value;...`: 3,
 * 0.5, 'text', [1,2], [0.5,1.0], #TYPE:V (a one-element tensor); $ in a
 * value is the swept dtype's number.
 */
#include "exec/exec.h"
#include "exec/exec_io.h"
#include "kernels/kernels.h"

#ifdef OGSH_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXIN 8
#define MAXOUT 4
#define MAXALT 8

enum {
	MUST_F32 = 1 << 0,   /* the float32 variants must be supported when the op has a GPU kernel */
	EXACT = 1 << 1,      /* outputs must equal the CPU's exactly (float outputs too) */
	MUST_ALL = 1 << 2,   /* every case must be supported (--cpu-only asks supports() too) */
};

struct spec {
	const char *op;        /* "Relu", or "ai.ogsh:Pointwise" */
	const char *dts;       /* dtypes swept: "F" (float32, float16, bfloat16) and/or names */
	const char *attrs;
	const char *in[MAXIN]; /* NULL ends */
	int n_out;             /* 0: 1 */
	double tol;            /* tolerance multiplier (0: 1) */
	int opset;             /* 0: 21 */
	unsigned flags;
	/* the kernel's description (k.impl) in the NCHW run and the "nhwc
	 * out" one must contain this text, or with a leading '!' must not
	 * (NULL: anything); not checked when OGSH_CONV_PATCH or OGSH_CONV_API
	 * changes the choice */
	const char *impl;
};

#define F "F"
/* rows name only the fields they need */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define U_SHAPES "3x5x7|300x257|s|1"

static const struct spec specs[] = {
	/* ---- unary ---- */
	{ "Relu", F " i32 i64", "", { "3x5x7|300x257|s|2x0x3" }, .flags = MUST_F32 },
	{ "Sigmoid", F, "", { U_SHAPES }, .flags = MUST_F32 },
	{ "Tanh", F, "", { U_SHAPES } },
	{ "Exp", F, "", { "3x5x7@big|300x257|s" } },
	{ "Log", F, "", { "3x5x7@pos|300x257@pos|s@pos" } },
	{ "Sqrt", F, "", { "3x5x7@pos|300x257@pos|s@pos" } },
	{ "Reciprocal", F, "", { "3x5x7@nz|300x257@nz|s@nz" } },
	{ "Neg", F " i64 i32", "", { U_SHAPES } },
	{ "Abs", F " i64 i32", "", { U_SHAPES } },
	{ "Erf", F, "", { "3x5x7@big|300x257|s" } },
	{ "Sin", F, "", { "3x5x7@big|300x257|s" } },
	{ "Cos", F, "", { "3x5x7@big|300x257|s" } },
	{ "Floor", F, "", { "3x5x7@big|300x257@half|s" } },
	{ "Ceil", F, "", { "3x5x7@big|300x257@half|s" } },
	{ "Round", F, "", { "3x5x7@half|300x257@big|s@half" } },
	{ "Sign", F " i64 i32", "", { "3x5x7@sm|300x257|s" } },
	{ "Softplus", F, "", { "3x5x7@big|300x257|s" } },
	{ "HardSwish", F, "", { "3x5x7@big|300x257|s" } },
	{ "Selu", F, "", { "3x5x7@big|300x257|s" } },
	{ "Selu", F, "alpha=1.5;gamma=0.8", { "3x5x7@big" } },
	{ "Elu", F, "alpha=0.5", { "3x5x7@big|300x257|s" } },
	{ "HardSigmoid", F, "alpha=0.3;beta=0.4", { "3x5x7@big|300x257|s" } },
	{ "HardSigmoid", F, "", { "3x5x7@big" } },
	{ "LeakyRelu", F, "alpha=0.1", { "3x5x7|300x257|s" } },
	{ "LeakyRelu", F, "", { "3x5x7" } },
	{ "Gelu", F, "", { "3x5x7@big|300x257|s" } },
	{ "Gelu", F, "approximate='tanh'", { "3x5x7@big|300x257|s" } },
	/* ogsh's Gelu (fuse-gelu before opset 20): ONNX Gelu's kernels */
	{ "ai.ogsh:Gelu", F, "", { "3x5x7@big|128x3072" } },
	{ "ai.ogsh:Gelu", F, "approximate='tanh'", { "3x5x7@big" } },
	{ "IsNaN", F, "", { "3x5x7@nan|300x257@nan|s|16x64@nan" } },
	{ "Not", "b", "", { "3x5x7|300x257|s" } },
	{ "IsInf", F, "", { "3x5x7@nan|300x257@nan|s" } },
	{ "IsInf", F, "detect_negative=0", { "3x5x7@nan" } },
	{ "Celu", F, "alpha=1.5", { "3x5x7@big|300x257|s" } },
	{ "Softsign", F, "", { "3x5x7@big|300x257|s" } },
	{ "Mish", F, "", { "3x5x7@big|300x257|s" } },
	{ "Tan", F, "", { "3x5x7|300x257|s" } },
	{ "Asin", F, "", { "3x5x7|300x257|s" } },
	{ "Acos", F, "", { "3x5x7|300x257|s" } },
	{ "Atan", F, "", { "3x5x7@big|300x257|s" } },
	{ "Sinh", F, "", { "3x5x7@big|300x257|s" } },
	{ "Cosh", F, "", { "3x5x7@big|300x257|s" } },
	{ "Asinh", F, "", { "3x5x7@big|300x257|s" } },
	{ "Acosh", F, "", { "3x5x7@ge1|300x257@ge1|s@ge1" } },
	{ "Atanh", F, "", { "3x5x7|300x257|s" } },
	{ "Swish", F, "", { "3x5x7@big|300x257|s" }, .opset = 24 },
	{ "Swish", F, "alpha=1.5", { "3x5x7@big" }, .opset = 24 },
	{ "ThresholdedRelu", F, "alpha=0.5", { "3x5x7|300x257|s" } },
	{ "ThresholdedRelu", F, "", { "3x5x7@big" } },
	{ "Shrink", F, "bias=0.5;lambd=0.3", { "3x5x7|300x257|s" } },
	{ "Shrink", F, "", { "3x5x7@big" } },
	{ "Dropout", F, "", { "3x5x7|300x257" } },
	{ "Clip", F, "", { "3x5x7|300x257|3x5x7", "!s=-0.5|!s=-0.25|", "!s=0.5|!s=0.75|!s=0.25" } },
	{ "Clip", F, "", { "3x5x7|300x257", "s=-0.5", "s=0.5" } },
	{ "Clip", "i64 i32", "", { "3x5x7|300x257", "!s=-3|", "!s=4|!s=2" } },
	{ "Clip", F, "", { "3x5x7" } },
	/* ---- binary, broadcasting ---- */
	{ "Add", F " i64 i32", "", { "3x5x7|300x257|4x1x6|s|2x3x1x5|2x0x3|40x96|40x96|2x3x40x16|s|1x1x37|2x3x4x16|2x3x16",
						  "3x5x7|257|1x5x1|4x5|3x4x1|3|96|40x1|16|96x40|2x3x37|2x1x1x16|3x1" }, .flags = MUST_F32 },
	{ "Sub", F " i64 i32", "", { "3x5x7|300x257|4x1x6|s|8x64|24", "3x5x7|300x1|1x5x1|4x5|8x1|5x24" } },
	{ "Mul", F " i64 i32", "", { "3x5x7|300x257|4x1x6|s", "3x5x7|257|1x5x1|4x5" }, .flags = MUST_F32 },
	{ "Div", F, "", { "3x5x7|300x257|4x1x6|s", "3x5x7@nz|257@nz|1x5x1@nz|4x5@nz" } },
	{ "Div", "i64 i32", "", { "3x5x7@big|300x257@big|4x1x6@big", "3x5x7@nz|257@nz|1x5x1@nz" } },
	{ "Pow", F, "", { "3x5x7@pos|300x257@pos|4x1x6@pos", "3x5x7|257|1x5x1" } },
	{ "Pow", F, "", { "3x5x7", "!s=2|!s=3" } },
	{ "Max", F " i64 i32", "", { "3x5x7|300x257|4x1x6", "5x7|257|1x5x1", "1x1x7|300x1|6" } },
	{ "Min", F " i64 i32", "", { "3x5x7|300x257|4x1x6", "5x7|257|1x5x1", "1x1x7|300x1|6" } },
	{ "Max", F, "", { "3x5x7|s" } },
	{ "Sum", F, "", { "3x5x7|300x257|4x1x6", "5x7|257|1x5x1", "1x1x7|300x1|6" } },
	{ "Sum", F, "", { "3x5x7", "3x5x7" } },
	{ "Mean", F, "", { "3x5x7|300x257|4x1x6", "5x7|257|1x5x1", "1x1x7|300x1|6" } },
	{ "Mod", "i64 i32", "", { "3x5x7@big|300x257@big|4x1x6@big", "3x5x7@nz|257@nz|1x5x1@nz" } },
	{ "Mod", F, "fmod=1", { "3x5x7@big|300x257@big|4x1x6@big", "3x5x7@nz|257@nz|1x5x1@nz" } },
	{ "Mod", "i64 i32", "fmod=1", { "3x5x7@big", "3x5x7@nz" } },
	{ "Equal", F " i64 i32 b", "", { "3x5x7@sm|300x257@sm|4x1x6@sm|16x64@sm", "3x5x7@sm|257@sm|1x5x1@sm|64@sm" } },
	{ "Less", F " i64 i32", "", { "3x5x7@sm|300x257@sm|4x1x6@sm|16x64@sm", "3x5x7@sm|257@sm|1x5x1@sm|16x1@sm" } },
	{ "Greater", F " i64 i32", "", { "3x5x7@sm|300x257@sm|4x1x6@sm", "3x5x7@sm|257@sm|1x5x1@sm" } },
	{ "LessOrEqual", F " i64 i32", "", { "3x5x7@sm|300x257@sm|4x1x6@sm", "3x5x7@sm|257@sm|1x5x1@sm" } },
	{ "GreaterOrEqual", F " i64 i32", "", { "3x5x7@sm|300x257@sm|4x1x6@sm", "3x5x7@sm|257@sm|1x5x1@sm" } },
	{ "BitwiseAnd", "i64 i32 u8", "", { "3x5x7@big|300x257@big|4x1x6@big", "3x5x7@big|257@big|1x5x1@big" } },
	{ "BitwiseOr", "i64 i32 u8", "", { "3x5x7@big|300x257@big|4x1x6@big", "3x5x7@big|257@big|1x5x1@big" } },
	{ "BitwiseXor", "i64 i32 u8", "", { "3x5x7@big|300x257@big|4x1x6@big", "3x5x7@big|257@big|1x5x1@big" } },
	{ "And", "b", "", { "3x5x7|300x257|4x1x6", "3x5x7|257|1x5x1" } },
	{ "Or", "b", "", { "3x5x7|300x257|4x1x6", "3x5x7|257|1x5x1" } },
	{ "Xor", "b", "", { "3x5x7|300x257|4x1x6", "3x5x7|257|1x5x1" } },
	{ "Where", F " i64 i32 b", "", { "b:3x5x7|b:300x257|b:4x1x6|b:s|b:16x40|b:s", "3x5x7|257|1x5x1|2x3|16x40|s",
					    "3x5x7|300x1|6|s|s|16x41" } },
	{ "PRelu", F, "", { "2x5x7x3|300x257|3x5x7", "5x1x1|257|1" } },
	{ "PRelu", F, "", { "2x5x7x3", "!5x1x1" } },
	/* ---- Cast ---- */
	{ "Cast", "f16 bf16 i64 i32 b u8 f32", "to=1", { "3x5x7@big|300x257@big|s@big" } },
	{ "Cast", "f32 bf16 i64 i32 b", "to=10", { "3x5x7@big|300x257@big|s@big" } },
	{ "Cast", "f32 f16 i64 b", "to=16", { "3x5x7@big|300x257@big|s@big" } },
	{ "Cast", "f32 f16 bf16 i32 b", "to=7", { "3x5x7@big|300x257@big|s@big" } },
	{ "Cast", "f32 i64 b", "to=6", { "3x5x7@big|300x257@big" } },
	{ "Cast", "f32 f16 i64 i32 u8", "to=9", { "3x5x7@sm|300x257@sm" } },
	{ "Cast", "f32 i64 i32 b", "to=2", { "3x5x7@i:0:200|300x257@i:0:200" } },
	{ "Cast", "f32 i32", "to=3", { "3x5x7@i:-100:100" } },
	{ "Cast", "f32 f16", "to=1", { "3x5x7@nan" } },
	{ "CastLike", "f32 bf16 i64 b", "", { "3x5x7@big|300x257@big", "f16:1" } },
	{ "CastLike", "f32 f16", "", { "3x5x7@big", "i32:s" } },
	/* ---- Pointwise (ai.ogsh) ---- */
	{ "ai.ogsh:Pointwise", F, "expr='x0*sigmoid(x0)+x1';dtype=$", { "3x5x7|300x257|4x1x6", "3x5x7|257|1x5x1" }, .tol = 4 },
	{ "ai.ogsh:Pointwise", F, "expr='max(x0, 0) * 0.5 - tanh(x1) / (1.5 + abs(x2))';dtype=$",
	  { "3x5x7|300x257", "5x7|257", "3x1x7|300x1" }, .tol = 4 },
	{ "ai.ogsh:Pointwise", F, "expr='pow(sqrt(x0), 2.5) + exp(-x0) + log(x0) + erf(x0) + relu(-x0) + min(x0, 1) + neg(x0)';dtype=$",
	  { "3x5x7@pos|300x257@pos" }, .tol = 4 },
	/* whole and one-element inputs only: 4 elements a thread, tails of 3 and 0 */
	{ "ai.ogsh:Pointwise", F, "expr='x0 * x1 + erf(x2)';dtype=$", { "7x9|64x130|2", "1|1|1", "7x9|64x130|2" }, .tol = 4 },
	/* ---- data movement ---- */
	{ "Identity", F " i64 b", "", { "3x5x7|300x257|s" } },
	{ "Reshape", F " i64", "", { "2x3x4|300x257|2x3x4", "!i64:2=4,6|!i64:2=257,300|!i64:3=0,-1,2" }, .flags = MUST_F32 },
	{ "Reshape", F, "", { "2x3x4", "i64:2=6,4" } },
	{ "Flatten", F " i64", "axis=2", { "2x3x4x5|300x257x1" } },
	{ "Flatten", F, "axis=0", { "2x3x4x5" } },
	{ "Flatten", F, "", { "2x3x4x5" } },
	{ "Squeeze", F " i64", "", { "2x1x3x1|300x1x257", "!i64:1=1|!i64:1=-2" } },
	{ "Squeeze", F, "", { "2x1x3x1" } },
	{ "Unsqueeze", F " i64", "", { "2x3|300x257|s", "!i64:2=0,3|!i64:1=-1|!i64:1=0" } },
	{ "Transpose", F " i64 b", "perm=[2,0,1]", { "2x3x4|33x65x40" }, .flags = MUST_F32 },
	{ "Transpose", F, "perm=[0,2,3,1]", { "3x5x7x9|2x64x33x17" } },
	{ "Transpose", F, "perm=[1,0]", { "300x257|1x7" } },
	{ "Transpose", F, "perm=[0,2,1,3]", { "2x12x33x64" } },
	{ "Transpose", F, "", { "3x5x7" } },
	{ "Concat", F " i64", "axis=1", { "2x3x4|2x300x257", "2x5x4|2x1x257", "2x1x4|2x7x257" }, .flags = MUST_F32 },
	{ "Concat", F, "axis=-1", { "2x3x4|3x5", "2x3x5|3x0" } },
	{ "Concat", F, "axis=0", { "7|300x257" } },
	{ "Split", F " i64", "axis=1", { "4x6x5|3x300x257", "!i64:3=2,3,1|!i64:3=100,57,143" }, .n_out = 3 },
	{ "Split", F, "axis=-1;num_outputs=2", { "4x6x6|3x7" }, .n_out = 2 },
	{ "Split", F, "axis=0;num_outputs=3", { "7x5" }, .n_out = 3 },
	{ "Slice", F " i64", "", { "5x6x7|300x257", "!i64:2=1,0|!i64:1=10", "!i64:2=4,7|!i64:1=290", "!i64:2=0,2|!i64:1=0",
				     "!i64:2=1,2|!i64:1=3" } },
	{ "Slice", F, "", { "5x6x7|300x257", "!i64:1=-1|!i64:2=-1,5", "!i64:1=-100|!i64:2=-1000,-1", "!i64:1=1|!i64:2=0,1",
			    "!i64:1=-2|!i64:2=-3,1" } },
	{ "Slice", F, "", { "5x6x7", "!i64:3=0,0,0", "!i64:3=5,6,7" } },
	{ "Gather", F " i64", "axis=0", { "5x4x3|300x257|5x4", "i64:2x3@i:-5:4|i64:100@i:0:299|i64:s=3" } },
	{ "Gather", F, "axis=1", { "5x4x3|300x257", "i32:7@i:0:3|i32:2x50@i:-257:256" } },
	{ "Gather", F, "axis=-1", { "5x4x3", "!i64:2=2,0" } },
	{ "GatherElements", F " i64", "axis=1", { "4x5|300x257", "i64:4x3@i:-5:4|i64:300x100@i:0:256" } },
	{ "GatherElements", F, "axis=0", { "4x5x3", "i64:2x5x3@i:-4:3" } },
	{ "GatherND", F " i64", "", { "4x5x6|4x5x6|300x257", "i64:3x2@i:0:3|i64:2x1x3@i:0:3|i64:1000x2@i:0:256" } },
	{ "GatherND", F, "batch_dims=1", { "4x5x6", "i64:4x2x1@i:0:4" } },
	{ "ScatterND", F " i64", "", { "4x5x6|4x5x6", "i64:2x1=3,0|i64:3x2=0,1,2,3,3,4", "2x5x6|3x6" } },
	{ "ScatterND", F, "", { "4x5x6", "!i64:2x3=0,0,0,3,4,5", "2" } },
	{ "ScatterND", F, "reduction='add'", { "4x5x6", "i64:3x1=1,1,2", "3x5x6" } },
	{ "ScatterElements", F " i64", "axis=0", { "4x5", "i64:2x5=0,1,2,3,0,3,2,1,0,3", "2x5" } },
	{ "ScatterElements", F, "axis=1", { "4x5", "i64:4x2=0,4,1,-1,2,0,4,1", "4x2" } },
	{ "ScatterElements", F, "axis=0;reduction='add'", { "4x5", "i64:3x5@i:0:3", "3x5" }, .tol = 2 },
	{ "Scatter", F, "axis=1", { "4x5", "i64:4x2=0,4,1,-1,2,0,4,1", "4x2" }, .opset = 10 },
	{ "OneHot", "f32 f16 i64", "", { "i64:2x3@i:-5:4|i64:300@i:0:255", "!i64:s=5|!i64:s=256", "!$:2=-1,3" } },
	{ "OneHot", "f32", "axis=1", { "i32:2x3@i:-5:4", "!i64:1=5", "!2=0,1" } },
	{ "Expand", F " i64 b", "", { "3x1x5|1x257|s", "!i64:4=2,3,4,5|!i64:2=300,257|!i64:2=3,4" } },
	{ "Expand", F, "", { "3x1x5", "!i64:2=1,5" } },
	{ "Tile", F " i64", "", { "2x3x4|300x257", "!i64:3=2,1,3|!i64:2=1,2" } },
	{ "Pad", F " i64", "", { "2x3x4|300x257", "!i64:6=0,1,2,1,0,1|!i64:4=1,3,2,0", "!s=0.5|" } },
	{ "Pad", F, "mode='reflect'", { "2x3x4|2x3x40x41", "!i64:6=0,1,2,0,1,2|!i64:8=0,0,1,2,0,0,2,1" } },
	{ "Pad", F, "mode='edge'", { "2x3x4|2x3x40x41", "!i64:6=0,1,2,0,1,2|!i64:8=0,0,1,2,0,0,2,1" } },
	{ "Pad", F, "", { "2x3x4", "!i64:6=0,-1,2,1,0,-1" } },
	{ "Pad", F, "", { "2x3x4x5", "!i64:4=1,2,1,0", "!s=-1", "!i64:2=1,3" } },
	{ "Resize", F, "mode='nearest'", { "1x2x5x7|2x3x30x40", "", "!f32:4=1,1,2,1.5|!f32:4=1,1,0.5,0.75" } },
	{ "Resize", F, "mode='linear'", { "1x2x5x7|2x3x30x40", "", "!f32:4=1,1,2,1.5|!f32:4=1,1,0.5,0.75" } },
	{ "Resize", F, "mode='linear';coordinate_transformation_mode='align_corners'", { "1x2x5x7", "", "", "!i64:4=1,2,9,4" } },
	{ "Resize", F, "mode='nearest';coordinate_transformation_mode='asymmetric';nearest_mode='floor'",
	  { "1x2x5x7", "", "!f32:4=1,1,3,2" } },
	{ "Resize", F, "mode='linear';coordinate_transformation_mode='pytorch_half_pixel'", { "1x2x5x7", "", "", "!i64:4=1,2,1,13" } },
	{ "Resize", F, "mode='cubic'", { "1x2x5x7", "", "!f32:4=1,1,2,2" } },
	{ "Upsample", F, "", { "1x2x5x7|2x3x30x40", "!f32:4=1,1,2,3|!f32:4=1,1,2,2" }, .opset = 9 },
	{ "Upsample", F, "mode='linear'", { "1x2x5x7", "!f32:4=1,1,2,1.5" }, .opset = 9 },
	{ "ConstantOfShape", "f32 f16 bf16 i64 i32 b", "value=#$:1", { "!i64:3=2,3,4|!i64:2=300,257|!i64:1=0" } },
	{ "ConstantOfShape", "f32", "", { "!i64:2=3,5" } },
	{ "Range", "f32 i64 i32", "", { "!$:s=1|!$:s=-3", "!$:s=20|!$:s=100000", "!$:s=3|!$:s=1" } },
	{ "Range", "f32", "", { "!s=0.5", "!s=-2", "!s=-0.25" } },
	{ "Trilu", F " i64", "", { "3x5x7|2x300x257", "!i64:s=1|" } },
	{ "Trilu", F, "upper=0", { "3x5x7|5x4", "!i64:s=-1|!i64:s=2" } },
	{ "DepthToSpace", F, "blocksize=2", { "1x8x3x4|2x64x16x17" } },
	{ "DepthToSpace", F, "blocksize=2;mode='CRD'", { "1x8x3x4|2x64x16x17" } },
	{ "SpaceToDepth", F, "blocksize=2", { "1x2x6x4|2x16x64x34" } },
	{ "CumSum", F " i64 i32", "", { "3x5x7|300x257", "!i64:s=1|!i64:s=-1" }, .tol = 4 },
	{ "CumSum", F, "exclusive=1;reverse=1", { "3x5x7|300x257", "!i64:s=0|!i64:s=1" }, .tol = 4 },
	{ "CumSum", F, "reverse=1", { "3x5x7", "!i32:s=2" }, .tol = 4 },
	/* ---- reductions and normalizations ---- */
	{ "ReduceSum", F " i64 i32", "", { "3x5x7|300x257|300x257|3x5x7", "!i64:1=1|!i64:1=0|!i64:1=1|" }, .tol = 10 },
	{ "ReduceSum", F, "keepdims=0", { "3x5x7|2x3x400x50", "!i64:2=0,2|!i64:2=2,3" }, .tol = 10 },
	{ "ReduceMean", F, "", { "3x5x7|300x257|2x64x33x17|3x5x7", "!i64:1=1|!i64:1=0|!i64:2=2,3|" }, .tol = 10 },
	{ "ReduceMean", F, "keepdims=0", { "3x5x7", "!i64:2=0,2" }, .tol = 10 },
	{ "ReduceMax", F " i64 i32", "", { "3x5x7|300x257|3x5x7", "!i64:1=1|!i64:1=0|" } },
	{ "ReduceMax", F, "keepdims=0", { "3x5x7", "!i64:2=-1,0" } },
	{ "ReduceMin", F " i64 i32", "", { "3x5x7|300x257|3x5x7", "!i64:1=1|!i64:1=-1|" } },
	{ "ReduceProd", F, "", { "3x5x7@near1|300x257@near1|3x5x7@near1", "!i64:1=1|!i64:1=1|" }, .tol = 10 },
	{ "ReduceProd", "i64 i32", "", { "3x5x7@i:-2:2", "!i64:1=1" } },
	{ "ReduceL1", F " i64 i32", "", { "3x5x7|300x257|3x5x7", "!i64:1=1|!i64:1=0|" }, .tol = 10 },
	{ "ReduceLogSum", F, "", { "3x5x7@pos|300x257@pos|3x5x7@pos", "!i64:1=1|!i64:1=0|" }, .tol = 10 },
	{ "ReduceL2", F, "", { "3x5x7|300x257|3x5x7", "!i64:1=1|!i64:1=0|" }, .tol = 10 },
	{ "ReduceSumSquare", F, "", { "3x5x7|300x257|3x5x7", "!i64:1=1|!i64:1=0|" }, .tol = 10 },
	{ "ReduceLogSumExp", F, "", { "3x5x7@big|300x257|3x5x7", "!i64:1=1|!i64:1=0|" }, .tol = 10 },
	{ "ReduceMax", F, "noop_with_empty_axes=1", { "3x5x7" } },
	{ "Softmax", F, "", { "3x5x7@big|300x257|4x20000|1x1|6x128@big|3x40|2x2048" }, .tol = 4, .flags = MUST_F32 },
	{ "Softmax", F, "axis=1", { "3x5x7|2x300x257" }, .tol = 4 },
	{ "LogSoftmax", F, "", { "3x5x7@big|300x257|4x20000|6x128@big|3x40" }, .tol = 4 },
	{ "LogSoftmax", F, "axis=0", { "3x5x7" }, .tol = 4 },
	{ "LayerNormalization", F, "epsilon=1e-5", { "3x5x7|300x257|4x8x768", "7|257|768", "7|257|768" }, .tol = 10 },
	{ "LayerNormalization", F, "axis=1", { "3x5x7", "5x7" }, .tol = 10 },
	{ "LayerNormalization", F, "", { "16x40|5x2048|3x8", "40|2048|8" }, .tol = 10 },
	/* rows in registers: 64-thread blocks below 2048 rows, scale and bias as vectors once a warp */
	{ "LayerNormalization", F, "", { "4100x768|33x128x64|197x768", "768|64|!768", "768|64|!768" }, .tol = 10 },
	{ "LayerNormalization", F, "", { "3x5x7|2x2x4096", "!7|!4096", "!7|!4096" }, .tol = 10 },
	/* ogsh's LayerNormalization (fuse-layernorm before opset 17): ONNX's kernels */
	{ "ai.ogsh:LayerNormalization", F, "epsilon=1e-12", { "128x768|3x5x7", "!768|!7", "!768|!7" }, .tol = 10 },
	{ "ai.ogsh:LayerNormalization", F, "axis=1", { "3x5x7", "5x7" }, .tol = 10 },
	{ "RMSNormalization", F, "", { "3x5x7|300x257|4x8x768", "7|257|768" }, .tol = 10, .opset = 23 },
	{ "RMSNormalization", F, "axis=1;epsilon=0.001", { "3x5x7", "5x7" }, .tol = 10, .opset = 23 },
	{ "BatchNormalization", F, "", { "2x3x5x7|2x64x33x17|5x3", "!3|!64|!3", "!3|!64|!3", "!3|!64|!3", "!3@pos|!64@pos|!3@pos" },
	  .tol = 4, .opset = 15 },
	{ "BatchNormalization", F, "epsilon=0.01", { "2x3x5x7", "3", "3", "3", "3@pos" }, .tol = 4, .opset = 15 },
	{ "InstanceNormalization", F, "", { "2x3x5x7|2x64x33x17|2x3x9", "3|64|3", "3|64|3" }, .tol = 10 },
	{ "GroupNormalization", F, "num_groups=3", { "2x6x5x7|2x12x33x17", "6|12", "6|12" }, .tol = 10 },
	{ "GroupNormalization", F, "num_groups=32;epsilon=0.001", { "2x64x33x17", "64", "64" }, .tol = 10 },
	{ "LpNormalization", F, "", { "3x5x7|300x257" }, .tol = 10 },
	{ "LpNormalization", F, "axis=1;p=1", { "3x5x7|300x257" }, .tol = 10 },
	{ "MeanVarianceNormalization", F, "", { "2x3x5x7|2x64x33x17" }, .tol = 10 },
	{ "MeanVarianceNormalization", F, "axes=[1]", { "2x3x5x7" }, .tol = 10 },
	{ "LRN", F, "size=3", { "2x8x5x7|2x64x33x17" }, .tol = 10 },
	{ "LRN", F, "size=4;alpha=0.001;beta=0.5;bias=2.0", { "2x8x5x7" }, .tol = 10 },
	{ "GlobalAveragePool", F, "", { "2x3x5x7|2x64x33x17|1x2048x7x7|2x3x9" }, .tol = 10 },
	{ "GlobalMaxPool", F, "", { "2x3x5x7|2x64x33x17|2x3x9" } },
	{ "ArgMax", F " i64 i32", "axis=1", { "3x5x7@sm|300x257|3x5x7" } },
	{ "ArgMax", F, "axis=-1;keepdims=0;select_last_index=1", { "3x5x7@sm|300x257@sm" } },
	{ "ArgMin", F " i64 i32", "axis=0", { "3x5x7@sm|300x257" } },
	{ "ArgMin", F, "axis=-1;keepdims=0;select_last_index=1", { "3x5x7@sm|4x20000" } },
	{ "TopK", F " i64 i32", "", { "3x50|300x257|7", "!i64:1=5|!i64:1=17|!i64:1=7" }, .n_out = 2 },
	{ "TopK", F, "axis=0;largest=0", { "50x3|300x257", "!i64:1=3|!i64:1=300" }, .n_out = 2 },
	{ "Attention", F, "", { "2x4x8x16|1x2x33x64", "2x4x10x16|1x2x33x64", "2x4x10x16|1x2x33x64" }, .tol = 10, .opset = 23 },
	{ "Attention", F, "is_causal=1", { "2x4x8x16|1x2x33x64", "2x4x8x16|1x2x33x64", "2x4x8x16|1x2x33x64" }, .tol = 10, .opset = 23 },
	{ "Attention", F, "q_num_heads=4;kv_num_heads=2", { "2x8x64", "2x10x32", "2x10x32" }, .tol = 10, .opset = 23 },
	{ "Attention", F, "scale=0.2", { "2x4x8x16", "2x4x10x16", "2x4x10x16", "2x4x8x10" }, .tol = 10, .opset = 23 },
	/* head sizes 32/64/128: float16/bfloat16 take the tensor-core kernel (key tails, 1 and 4 warps a block) */
	{ "Attention", F, "", { "2x3x70x64|1x2x20x32|1x2x33x128|8x16x128x64", "2x3x130x64|1x2x20x32|1x2x65x128|8x16x128x64",
				"2x3x130x64|1x2x20x32|1x2x65x128|8x16x128x64" }, .tol = 10, .opset = 23 },
	{ "Attention", F, "is_causal=1", { "1x2x100x64|2x32x100x64", "1x2x100x64|2x32x100x64", "1x2x100x64|2x32x100x64" },
	  .tol = 10, .opset = 23 },
	/* the key/value tiles copied a step ahead (cp.async): batch 1 and 33, odd sequence lengths (ViT's
	 * 197, 1 to 4 key tiles and a tail), head sizes 64 and 128, masks and causal */
	{ "Attention", F, "", { "1x12x197x64|33x2x77x128|1x4x64x64|33x3x129x64",
				"1x12x197x64|33x2x77x128|1x4x64x64|33x3x255x64",
				"1x12x197x64|33x2x77x128|1x4x64x64|33x3x255x64" }, .tol = 10, .opset = 23 },
	{ "Attention", F, "is_causal=1", { "33x2x129x128|1x12x197x64", "33x2x129x128|1x12x197x64",
					   "33x2x129x128|1x12x197x64" }, .tol = 10, .opset = 23 },
	{ "ai.ogsh:FusedAttention", F, "layout='BSHD';nan_to_zero=1",
	  { "33x197x2x64|1x128x12x64", "33x197x2x64|1x128x12x64", "33x197x2x64|1x128x12x64",
	    "33x1x1x197|1x1x1x128" }, .tol = 10 },
	/* the flash kernel with 4 queries a warp (grids of 256+ blocks that neither kernel above takes) */
	{ "Attention", F, "", { "4x16x200x32|2x16x300x80", "4x16x150x32|2x16x170x80", "4x16x150x32|2x16x170x80" },
	  .tol = 10, .opset = 23 },
	/* float32 grids of 128+ blocks take the register-tile kernel (head size 128, tails) */
	{ "Attention", F, "", { "4x16x70x128", "4x16x90x128", "4x16x90x128", "4x1x70x90" }, .tol = 10, .opset = 23 },
	{ "ai.ogsh:FusedAttention", F, "layout='BSHD';nan_to_zero=1",
	  { "4x130x32x64", "4x130x32x64", "4x130x32x64", "4x1x130x130|1x1x1x1=-inf" }, .tol = 10 },
	/* padding masks (the same for every query: the float32 kernel reads a key tile's once) */
	{ "ai.ogsh:FusedAttention", F, "layout='BSHD';nan_to_zero=1",
	  { "4x130x32x64", "4x130x32x64", "4x130x32x64", "4x1x1x130" }, .tol = 10 },
	{ "Attention", F, "", { "8x16x128x64", "8x16x128x64", "8x16x128x64", "b:8x1x1x128|8x1x1x128" }, .tol = 10, .opset = 23 },
	{ "Attention", F, "", { "2x4x40x64", "2x2x50x64", "2x2x50x64", "2x1x40x50|b:2x1x1x50|b:40x50" }, .tol = 10, .opset = 23 },
	{ "ai.ogsh:FusedAttention", F, "layout='BSHD';nan_to_zero=1;scale=0.125",
	  { "2x70x3x64|1x16x2x64|1x9x2x40", "2x130x3x64|1x16x2x64|1x9x2x40", "2x130x3x64|1x16x2x64|1x9x2x40",
	    "2x1x70x130|1x1x1x1=-inf|1x1x9x1" }, .tol = 10 },
	{ "ai.ogsh:FusedAttention", F, "", { "2x3x16x64", "2x3x16x64", "2x3x16x64", "1x1x1x1=-inf|2x1x16x16@big" }, .tol = 10 },
	/* Q, K and V packed in input 0 (fuse-qkv), read in place: [B, S, 3*H*D] (ViT-B: 12 heads of 64, rows of
	 * 2304), sequence-first [S, B, 3*H*D] (torch's MultiheadAttention), a rank-5 [B, S, 3, H, D]; the output
	 * in any order of B, S, H */
	{ "ai.ogsh:FusedAttention", F, "layout='BS3HD';q_num_heads=12", { "2x197x2304", "", "" }, .tol = 10 },
	{ "ai.ogsh:FusedAttention", F, "layout='SB3HD';q_num_heads=4;out_layout='SBHD'",
	  { "10x2x192|70x3x384", "", "", "2x1x1x10|3x1x1x70" }, .tol = 10 },
	{ "ai.ogsh:FusedAttention", F, "layout='SB3HD';q_num_heads=2;out_layout='BSHD';nan_to_zero=1",
	  { "33x2x384", "", "", "1x1x1x1=-inf" }, .tol = 10 },
	{ "ai.ogsh:FusedAttention", F, "layout='BS3HD';out_layout='BHSD'", { "2x40x3x4x32|1x130x3x8x64", "", "" },
	  .tol = 10 },
	/* ---- convolution, pooling ---- */
	{ "Conv", F, "pads=[1,1,1,1]", { "1x3x9x11|2x16x33x35", "!4x3x3x3|!32x16x3x3", "!4|!32" }, .tol = 10, .flags = MUST_F32 },
	/* 3x3 stride 1 with 32+ channels: the CPU reference takes Winograd's F(2x2, 3x3) */
	{ "Conv", F, "pads=[1,1,1,1]", { "2x32x15x13", "!48x32x3x3", "!48" }, .tol = 10 },
	{ "Conv", F, "strides=[2,2];pads=[0,1,2,1];dilations=[1,2]", { "2x3x9x11", "!5x3x3x3" }, .tol = 10 },
	{ "Conv", F, "group=6;pads=[1,1,1,1]", { "1x6x8x8", "!6x1x3x3", "!6" }, .tol = 10 },
	{ "Conv", F, "group=64;strides=[2,2];pads=[1,1,1,1]", { "2x64x31x33", "!64x1x3x3", "!64" }, .tol = 10 },
	{ "Conv", F, "group=2", { "1x4x8x8", "!6x2x1x1" }, .tol = 10 },
	{ "Conv", F, "", { "2x4x20", "!5x4x3", "!5" }, .tol = 10 },
	{ "Conv", F, "auto_pad='SAME_UPPER';strides=[2,2]", { "1x3x9x10", "!8x3x3x3" }, .tol = 10 },
	{ "Conv", F, "", { "1x2x5x6x7", "!3x2x3x3x3" }, .tol = 10 },
	{ "Conv", F, "pads=[1,1,1,1]", { "1x3x9x11", "4x3x3x3", "4" }, .tol = 10 },
	{ "ConvTranspose", F, "strides=[2,2];pads=[1,1,1,1];output_padding=[1,1]", { "1x4x5x6|2x32x9x9", "!4x3x3x3|!32x16x3x3", "!3|!16" },
	  .tol = 10 },
	{ "ConvTranspose", F, "group=2", { "1x4x5x6", "!4x3x2x2" }, .tol = 10 },
	{ "ConvTranspose", F, "strides=[3]", { "2x3x7", "!3x5x4", "!5" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "pads=[1,1,1,1];activation='Relu'", { "1x3x9x11|2x16x33x35", "!4x3x3x3|!32x16x3x3", "!4|!32" },
	  .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "activation='Relu'", { "1x3x9x11", "!4x3x3x3", "!4", "1x4x7x9" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "strides=[2,2];activation='Clip';activation_params=[0.0,6.0]", { "1x3x9x11", "!4x3x3x3", "" },
	  .tol = 10 },
	/* the shapes of MobileNetV2's and ResNet's blocks, where cuDNN's fused engines run
	 * (channels-last): Clip's max low enough to clip often, a residual Z */
	{ "ai.ogsh:FusedConv", F, "activation='Clip';activation_params=[0.0,0.5]", { "2x16x12x12", "!32x16x1x1", "!32" },
	  .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "group=32;pads=[1,1,1,1];activation='Clip';activation_params=[0.0,0.5]",
	  { "2x32x12x12", "!32x1x3x3", "!32" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "pads=[1,1,1,1];activation='Relu'", { "2x16x12x12", "!16x16x3x3", "!16", "2x16x12x12" },
	  .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "", { "2x32x12x12", "!16x32x1x1", "!16", "2x16x12x12" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "activation='LeakyRelu';activation_params=[0.2]", { "1x3x9x11", "!4x3x3x3" }, .tol = 10 },
	/* depthwise with dilation, bias and residual; depthwise 3x3 stride 2 with Clip (MobileNetV2) */
	{ "ai.ogsh:FusedConv", F, "group=16;pads=[2,2,2,2];dilations=[2,2];activation='Relu'",
	  { "2x16x20x20", "!16x1x3x3", "!16", "2x16x20x20" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "group=96;pads=[1,1,1,1];strides=[2,2];activation='Clip';activation_params=[0.0,6.0]",
	  { "3x96x57x57", "!96x1x3x3", "!96" }, .tol = 10 },
	/* depthwise NCHW through ogsh's tiled kernel: planes split into row tiles (a short last
	 * tile), several planes a block (a short last group), 5x5, stride 2, no pads, a residual */
	{ "ai.ogsh:FusedConv", F, "group=16;pads=[1,1,1,1];activation='Clip';activation_params=[0.0,0.5]",
	  { "1x16x112x112|2x16x45x71", "!16x1x3x3", "!16" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "group=40;pads=[1,1,1,1];activation='Relu'", { "2x40x7x7|3x40x14x13", "!40x1x3x3", "!40",
	  "2x40x7x7|3x40x14x13" }, .tol = 10 },
	{ "Conv", F, "group=24;pads=[2,2,2,2]", { "2x24x37x41|1x24x130x70", "!24x1x5x5", "!24" }, .tol = 10 },
	{ "Conv", F, "group=12;pads=[2,2,2,2];strides=[2,2]", { "1x12x17x19", "!12x1x5x5" }, .tol = 10 },
	{ "Conv", F, "group=8;strides=[2,2]", { "1x8x10x9|2x8x3x3", "!8x1x3x3", "!8" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "activation='Sigmoid'", { "1x3x9x11", "!4x3x3x3", "!4" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "activation='HardSwish'", { "1x3x9x11", "!4x3x3x3", "!4", "1x4x7x9" }, .tol = 10 },
	{ "ai.ogsh:FusedConv", F, "", { "1x3x9x11", "!4x3x3x3", "!4", "1x4x7x9" }, .tol = 10 },
	/* the patch GEMM (kernel == stride, no pads, C*kh*kw % 8 == 0: patches and one cuBLASLt
	 * product; ViT's patch embedding): batch 1 and 3, with and without bias, inputs not a whole
	 * number of patches, non-square, ViT's 16x16 over 3 channels (K = 768), 1-D, FusedConv's
	 * activation and Z, an odd M (Y's rows 4-byte aligned, 2-byte in the nhwc-out run); then
	 * C*kh*kw = 12 and a 1x1 window: cuDNN.
	 * kernel_shape marks them: --filter 'Conv .*kernel_shape' */
	{ "Conv", F, "kernel_shape=[4,4];strides=[4,4]", { "1x3x16x16|3x3x17x18|1x3x16x16|3x3x17x18", "!16x3x4x4",
	  "!16|!16|" }, .tol = 10, .impl = "patch GEMM" },
	{ "Conv", F, "kernel_shape=[4,2];strides=[4,2]", { "1x3x8x6|3x3x8x6|1x3x8x6|3x3x8x6", "!5x3x4x2", "!5|!5|" },
	  .tol = 10, .impl = "patch GEMM" },
	{ "Conv", F, "kernel_shape=[16,16];strides=[16,16]", { "2x3x64x48|1x3x32x32", "!96x3x16x16", "!96|" },
	  .tol = 10, .impl = "patch GEMM" },
	{ "Conv", F, "kernel_shape=[4];strides=[4]", { "2x8x12|3x8x13", "!4x8x4", "!4|" }, .tol = 10, .impl = "patch GEMM" },
	{ "ai.ogsh:FusedConv", F, "kernel_shape=[2,2];strides=[2,2];activation='Relu'",
	  { "2x4x6x8|3x4x6x8", "!8x4x2x2", "!8|", "2x8x3x4|1x8x1x1" }, .tol = 10, .impl = "patch GEMM" },
	{ "Conv", F, "kernel_shape=[2,2];strides=[2,2]", { "1x3x8x6|3x3x8x6", "!5x3x2x2", "!5|" }, .tol = 10,
	  .impl = "!patch GEMM" },
	{ "Conv", F, "kernel_shape=[1,1]", { "2x16x5x7", "!8x16x1x1", "!8" }, .tol = 10, .impl = "!patch GEMM" },
	{ "MaxPool", F, "kernel_shape=[3,3];strides=[2,2];pads=[1,1,1,1]", { "1x3x9x11|2x64x56x56" }, .flags = MUST_F32 },
	{ "MaxPool", F, "kernel_shape=[2,2];strides=[2,2]", { "1x3x9x11|2x64x33x17" } },
	{ "MaxPool", F, "kernel_shape=[3,3];ceil_mode=1;strides=[2,2]", { "1x3x10x11" } },
	{ "MaxPool", F, "kernel_shape=[3,3];dilations=[2,2]", { "1x3x10x11" } },
	{ "MaxPool", F, "kernel_shape=[3]", { "2x3x20" } },
	{ "AveragePool", F, "kernel_shape=[3,3];strides=[2,2];pads=[1,1,1,1]", { "1x3x9x11|2x64x56x56" }, .tol = 4 },
	{ "AveragePool", F, "kernel_shape=[3,3];strides=[2,2];pads=[1,1,1,1];count_include_pad=1", { "1x3x9x11" }, .tol = 4 },
	{ "AveragePool", F, "kernel_shape=[2,2];strides=[2,2];ceil_mode=1", { "1x3x9x11" }, .tol = 4 },
	{ "AveragePool", F, "kernel_shape=[3]", { "2x3x20" }, .tol = 4 },
	/* ---- matrix products ---- */
	{ "MatMul", F, "", { "3x17x33|2x3x16x32|4x1x7x5|33|256x512|17x33", "33x9|2x3x32x8|3x5x6|33x9|512x300|33" }, .tol = 10,
	  .flags = MUST_F32 },
	{ "MatMul", F, "", { "3x17x33|8x128x64", "!33x9|!64x256" }, .tol = 10 },
	{ "MatMul", F, "", { "1x1x33", "33x1" }, .tol = 10 },
	{ "Gemm", F, "", { "17x33|256x512", "33x9|512x300", "9|300" }, .tol = 10, .flags = MUST_F32 },
	{ "Gemm", F, "alpha=0.5;beta=2.0;transA=1", { "33x17", "33x9", "17x9|1x9|s" }, .tol = 10 },
	{ "Gemm", F, "transB=1", { "17x33|64x2048", "!9x33|!1000x2048", "!9|!1000" }, .tol = 10 },
	{ "Gemm", F, "transA=1;transB=1", { "33x17", "9x33" }, .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "transB=1;activation='Relu'", { "17x33|64x2048", "!9x33|!1000x2048", "!9|!1000" }, .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "activation='Gelu'", { "17x33", "33x9", "9" }, .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "activation='Gelu';activation_params=[1.0]", { "17x33", "33x9", "9" }, .tol = 10 },
	/* the exact Gelu after a product (ogsh's pass after cuBLASLt), ViT-B's FFN1 among them */
	{ "ai.ogsh:FusedGemm", F, "activation='Gelu'", { "6304x768|100x64|33x40", "!768x3072|!64x40|40x24", "!3072|!40|24" },
	  .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "transB=1;activation='Gelu'", { "256x768|40x64", "!1024x768|!24x64" }, .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "transA=1;activation='Gelu'", { "64x96", "64x32", "32" }, .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "alpha=0.5;beta=0.5;activation='Tanh'", { "17x33", "33x9", "17x9" }, .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "activation='HardSigmoid';activation_params=[0.3,0.4]", { "17x33", "33x9" }, .tol = 10 },
	/* the residual Z: cuBLASLt's C with beta 1 (bias epilogue, exact Gelu after), or added after a C copied in */
	{ "ai.ogsh:FusedGemm", F, "activation='Gelu'", { "17x33|4100x64", "33x9|64x768", "9|768", "17x9|4100x768" },
	  .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "transB=1;activation=''", { "17x33|128x768", "!9x33|!768x768", "!9|!768", "17x9|128x768" },
	  .tol = 10 },
	{ "ai.ogsh:FusedGemm", F, "beta=0.5;activation='Relu'", { "17x33", "33x9", "17x9", "17x9" }, .tol = 10 },
	/* ---- quantization: exact (integers and float8 codes bit for bit, floats equal); the
	 * output type comes from the zero point's type, from output_dtype, else uint8 ---- */
	/* per tensor, each type (from the zero point's), odd sizes: 105, 1000003, 1, 3, scalar */
	{ "QuantizeLinear", F, "", { "3x5x7@big|1000003@big|1|3|s|2x3x4x5@big|7x9@big|1000003@big|5x1x3@big|2x2@big", "!s=0.08|!s=0.04|!1=0.001|s=0.001|!s=1.3|!s=1.4|!s=0.05|!s=0.05|!s=0.001|!s=0.001", "!i8:s=3|!u8:s=128|!i16:1=-300|u16:s=20000|!i4:s=1|!u4:s=8|!e4m3:s=0|!e4m3uz:s=0|!e5m2:s=0|!e5m2uz:s=0" }, .flags = EXACT | MUST_ALL },
	/* per tensor, saturating: values far outside each type's range */
	{ "QuantizeLinear", F, "", { "3x5x7@big|1000003@big|33@big|3|s|2x3x4x5@big|7x9@big|1000003@big|5x1x3@big|2x2@big", "!s=0.01|!s=0.01|!s=0.0001|!s=0.0001|!s=0.1|!s=0.1|!s=0.01|!s=0.01|!s=0.0001|!s=0.0001", "!i8:s=3|!u8:s=100|!i16:s=-300|!u16:s=1000|!i4:s=-2|!u4:s=9|!e4m3:s=0.5|!e4m3uz:s=0|!e5m2:s=-1|!e5m2uz:s=0" }, .flags = EXACT | MUST_ALL },
	/* no zero point: output_dtype int8 */
	{ "QuantizeLinear", F, "output_dtype=3", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.05|s=0.05|!1=0.05|!s=0.05|f32:s=0.05" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=2", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.02|s=0.02|!1=0.02|!s=0.02|f32:s=0.02" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=5", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.0005|s=0.0005|!1=0.0005|!s=0.0005|f32:s=0.0005" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=4", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.0002|s=0.0002|!1=0.0002|!s=0.0002|f32:s=0.0002" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=22", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.8|s=0.8|!1=0.8|!s=0.8|f32:s=0.8" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=21", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.7|s=0.7|!1=0.7|!s=0.7|f32:s=0.7" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=17", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.03|s=0.03|!1=0.03|!s=0.03|f32:s=0.03" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=18", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.05|s=0.05|!1=0.05|!s=0.05|f32:s=0.05" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=19", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.0003|s=0.0003|!1=0.0003|!s=0.0003|f32:s=0.0003" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "output_dtype=20", { "3x5x7@big|1000003@big|1|s|64x33@big", "!s=0.0003|s=0.0003|!1=0.0003|!s=0.0003|f32:s=0.0003" }, .flags = EXACT | MUST_ALL },
	/* no zero point, no output_dtype: uint8 */
	{ "QuantizeLinear", F, "", { "3x5x7@big|1000003@big|s|2x9", "!s=0.05|s=0.02|!s=0.1|!s=0.3" }, .flags = EXACT | MUST_ALL },
	/* output_dtype given with a zero point of that type */
	{ "QuantizeLinear", F, "output_dtype=3", { "3x5x7@big", "!s=0.05", "!i8:s=-4" }, .flags = EXACT | MUST_ALL },
	/* scales float32, float16, bfloat16 with every x type */
	{ "QuantizeLinear", F, "", { "3x5x7@big|1000003@big|2x3x40", "!f32:s=0.05|f32:s=0.03|!f32:s=0.07", "!i8:s=-7|!u8:s=128|!e4m3:s=0" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "", { "3x5x7@big|1000003@big|2x3x40", "!f16:s=0.05|f16:s=0.03|!f16:s=0.07", "!i8:s=-7|!u8:s=128|!e4m3:s=0" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "", { "3x5x7@big|1000003@big|2x3x40", "!bf16:s=0.05|bf16:s=0.03|!bf16:s=0.07", "!i8:s=-7|!u8:s=128|!e4m3:s=0" }, .flags = EXACT | MUST_ALL },
	/* ties: x / scale = k / 2 (round half to even) */
	{ "QuantizeLinear", F, "", { "6x7@half|1000003@half|5x5@half|40@half|6x7@half|6x7@half|6x7@half|6x7@half|6x7@half|6x7@half", "!s=1|!s=1|s=1|!s=1|!s=1|!s=1|!s=1|!s=1|!s=1|!s=1", "!i8:s=0|!u8:s=10|!i16:s=3|!u16:s=7|!i4:s=0|!u4:s=8|!e4m3:s=0|!e4m3uz:s=0|!e5m2:s=0|!e5m2uz:s=0" }, .flags = EXACT | MUST_ALL },
	/* ties at .5 with a scale of 0.5: 0.5, 1.5, 2.5, 127.5, 128.5, -128.5... */
	{ "QuantizeLinear", F, "", { "16=0.25,0.75,1.25,-0.25,-0.75,-1.25,63.75,64.25,-64.25,-63.75,127.25,-0.125,0.375,1.75,2.25,-2.25", "!s=0.5|!f32:s=0.5|!f16:s=0.5|!bf16:s=0.5|!s=0.5|!s=0.5", "!i8:s=0|!u8:s=0|!i16:s=-1|!u16:s=1|!i4:s=0|!u4:s=0" }, .flags = EXACT | MUST_ALL },
	/* NaN quantizes to the zero point, +-inf saturates */
	{ "QuantizeLinear", F, "", { "16x64@nan|1000003@nan|16x64@nan|16x64@nan|16x64@nan|16x64@nan", "!s=0.05|!s=0.05|!s=0.001|!s=0.001|!s=0.5|!s=0.5", "!i8:s=3|!u8:s=128|!i16:s=-7|!u16:s=700|!i4:s=-1|!u4:s=9" }, .flags = EXACT | MUST_ALL },
	/* float8 with NaN, +-inf and values past the largest finite one, saturate on */
	{ "QuantizeLinear", F, "saturate=1", { "16x64@nan|1000003@nan|16x64@nan|16x64@nan", "!s=0.002|!s=0.002|!s=0.00001|!s=0.00001", "!e4m3:s=0|!e4m3uz:s=0|!e5m2:s=0|!e5m2uz:s=0" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "saturate=1;output_dtype=17", { "3x5x7@nan|1000003@nan", "!s=0.002|!f16:s=0.003" }, .flags = EXACT | MUST_ALL },
	/* float8 with NaN, +-inf and values past the largest finite one, saturate off */
	{ "QuantizeLinear", F, "saturate=0", { "16x64@nan|1000003@nan|16x64@nan|16x64@nan", "!s=0.002|!s=0.002|!s=0.00001|!s=0.00001", "!e4m3:s=0|!e4m3uz:s=0|!e5m2:s=0|!e5m2uz:s=0" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "saturate=0;output_dtype=17", { "3x5x7@nan|1000003@nan", "!s=0.002|!f16:s=0.003" }, .flags = EXACT | MUST_ALL },
	/* float8 edges: -0, the largest finite values and the halfway points past them, subnormals, underflow */
	{ "QuantizeLinear", F, "saturate=1", { "20=-0,0,448,464,-464,480,1e-9,-1e-9,0.001953125,0.0009765625,57344,61440,-61440,65536,240,248,1e30,-1e30,0.5,-0.5", "!s=1", "!e4m3:s=0|!e4m3uz:s=0|!e5m2:s=0|!e5m2uz:s=0" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "saturate=0", { "20=-0,0,448,464,-464,480,1e-9,-1e-9,0.001953125,0.0009765625,57344,61440,-61440,65536,240,248,1e30,-1e30,0.5,-0.5", "!s=1", "!e4m3:s=0|!e4m3uz:s=0|!e5m2:s=0|!e5m2uz:s=0|" },
	  .flags = EXACT | MUST_ALL },
	/* per axis: axis 0, 1 (the default), last, negative; every type; 1000003 channels */
	{ "QuantizeLinear", F, "axis=0", { "3x5x7@big|1000003@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big", "!3@pos|!1000003@pos|3@pos|!3@pos", "!i8:3@i:-20:20|!u8:1000003@i:100:150|!i16:3@i:-1000:1000|!u16:3@i:0:60000|!i4:3@i:-8:7|!u4:3@i:0:15|!e4m3:3@sm|!e4m3uz:3@sm|!e5m2:3@sm|!e5m2uz:3@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "", { "3x5x7@big|2x5x1001@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big", "!5@pos|5@pos|!5@pos", "!i8:5@i:-20:20|!u8:5@i:100:150|!i16:5@i:-1000:1000|!u16:5@i:0:60000|!i4:5@i:-8:7|!u4:5@i:0:15|!e4m3:5@sm|!e4m3uz:5@sm|!e5m2:5@sm|!e5m2uz:5@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=2", { "3x5x7@big|2x3x1001@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big|3x5x7@big", "!7@pos|!1001@pos|!7@pos", "!i8:7@i:-20:20|!u8:1001@i:100:150|!i16:7@i:-1000:1000|!u16:7@i:0:60000|!i4:7@i:-8:7|!u4:7@i:0:15|!e4m3:7@sm|!e4m3uz:7@sm|!e5m2:7@sm|!e5m2uz:7@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=-1", { "3x5x7@big|64x130@big|3x5x7@big", "!7@pos|!130@pos|!7@pos", "!i8:7@i:-20:20|!i4:130@i:-8:7|!e4m3:7@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=-2", { "3x5x7@big|4x64x33@big", "!5@pos|!64@pos", "!u8:5@i:100:150|!u4:64@i:0:15" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=-3", { "3x5x7@big", "!3@pos", "!i16:3@i:-1000:1000" }, .flags = EXACT | MUST_ALL },
	/* per axis without a zero point (uint8) */
	{ "QuantizeLinear", F, "axis=1", { "3x5x7@big|2x3x40", "!5@pos|f16:3@pos", "|!u8:3@i:0:255" }, .flags = EXACT | MUST_ALL },
	/* per axis with output_dtype int4 */
	{ "QuantizeLinear", F, "axis=1;output_dtype=22", { "3x5x7@big|2x3x40", "!5@pos|bf16:3@pos" }, .flags = EXACT | MUST_ALL },
	/* a zero scale and a negative one */
	{ "QuantizeLinear", F, "axis=0", { "3x5x7@big", "!3=0.5,0,-2", "!i8:3=0,3,-3" }, .flags = EXACT | MUST_ALL },
	/* blocked: block 32, 64, 128 on axis 0, 1, last, negative, short last blocks, every type */
	{ "QuantizeLinear", F, "axis=1;block_size=32", { "64x100@big|64x100@big|64x100@big|64x100@big|64x100@big|64x100@big|64x100@big|64x100@big|64x100@big|64x100@big", "!64x4@pos|64x4@pos|!64x4@pos", "!i8:64x4@i:-20:20|!u8:64x4@i:100:150|!i16:64x4@i:-1000:1000|!u16:64x4@i:0:60000|!i4:64x4@i:-8:7|!u4:64x4@i:0:15|!e4m3:64x4@sm|!e4m3uz:64x4@sm|!e5m2:64x4@sm|!e5m2uz:64x4@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=0;block_size=64", { "100x48@big", "!2x48@pos", "!i8:2x48@i:-20:20|!u8:2x48@i:100:150|!i16:2x48@i:-1000:1000|!u16:2x48@i:0:60000|!i4:2x48@i:-8:7|!u4:2x48@i:0:15|!e4m3:2x48@sm|!e4m3uz:2x48@sm|!e5m2:2x48@sm|!e5m2uz:2x48@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=-1;block_size=128", { "3x5x300@big", "!3x5x3@pos", "!i8:3x5x3@i:-20:20|!u8:3x5x3@i:100:150|!i16:3x5x3@i:-1000:1000|!u16:3x5x3@i:0:60000|!i4:3x5x3@i:-8:7|!u4:3x5x3@i:0:15|!e4m3:3x5x3@sm|!e4m3uz:3x5x3@sm|!e5m2:3x5x3@sm|!e5m2uz:3x5x3@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=1;block_size=128", { "2x256x3@big|2x300x7@big", "!2x2x3@pos|!2x3x7@pos", "!i4:2x2x3@i:-8:7|!u8:2x3x7@i:100:150" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=0;block_size=128", { "1000003@big|1000003@big", "!7813@pos|7813@pos", "!i4:7813@i:-8:7|!e4m3:7813@sm" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=-2;block_size=32", { "2x70x9@big", "!2x3x9@pos", "|!i8:2x3x9@i:-20:20" }, .flags = EXACT | MUST_ALL },
	/* a block longer than the axis */
	{ "QuantizeLinear", F, "axis=1;block_size=32;output_dtype=21", { "4x20@big|4x20@big", "!4x1@pos|f16:4x1@pos" }, .flags = EXACT | MUST_ALL },
	{ "QuantizeLinear", F, "axis=1;block_size=64;output_dtype=22", { "8x256@big", "!8x4@pos|bf16:8x4@pos|f16:8x4@pos" }, .flags = EXACT | MUST_ALL },
	/* opset 10 and 13 (no saturate, output_dtype) */
	{ "QuantizeLinear", "f32", "", { "3x5x7@big|300x257@big", "!s=0.05|s=0.02", "!u8:s=128|i8:s=1" }, .flags = EXACT | MUST_ALL, .opset = 10 },
	{ "QuantizeLinear", "f32", "axis=1", { "3x5x7@big", "!5@pos", "!i8:5@i:-5:5" }, .flags = EXACT | MUST_ALL, .opset = 13 },
	{ "QuantizeLinear", F, "", { "3x5x7@big", "!s=0.05", "!e4m3:s=0" }, .flags = EXACT | MUST_ALL, .opset = 19 },

	/* per tensor, every type with a zero point, odd sizes: 105, 1000003, 1, 3, scalar */
	{ "DequantizeLinear", F, "", { "i8:3x5x7@i:-128:127|u8:1000003@i:0:255|i16:1@i:-32768:32767|u16:3@i:0:65535|i4:s@i:-8:7|u4:2x3x4x5@i:0:15|i32:7x9@i:-100000:100000|e4m3:5x1x3@big|e4m3uz:2x2@big|e5m2:33@nan|e5m2uz:1000003@big|e2m1:9@big", "!s=0.05|s=0.01|!1=0.3|!s=0.002|!s=1.5|!s=0.25|!s=0.001|!s=0.5|!s=0.5|!s=2|!s=0.125|!s=3", "!i8:s=3|!u8:s=128|!i16:1=-300|u16:s=20000|!i4:s=1|!u4:s=8|!i32:s=-70000|!e4m3:s=0.5|!e4m3uz:s=0|!e5m2:s=-1|!e5m2uz:s=0|!e2m1:s=1.5" }, .flags = EXACT | MUST_ALL },
	/* per tensor, every type without a zero point */
	{ "DequantizeLinear", F, "", { "i8:9@i:-128:127|u8:1000003@i:0:255|i16:33@i:-32768:32767|u16:2x2@i:0:65535|i4:5x1x3@i:-8:7|u4:7x9@i:0:15|i32:2x3x4x5@i:-100000:100000|e4m3:s@big|e4m3uz:3@big|e5m2:1@nan|e5m2uz:1000003@big|e2m1:3x5x7@big", "!s=0.05|s=0.01|!s=0.3|!1=0.002|!s=1.5|!s=0.25|!s=0.001|!s=0.5|!s=0.5|!s=2|!s=0.125|!s=3" }, .flags = EXACT | MUST_ALL },
	/* int32 differences beyond 2^31 (rounded to float once) */
	{ "DequantizeLinear", F, "", { "i32:7x9@i:-2000000000:2000000000|i32:1000003@i:-2000000000:2000000000", "!s=0.001|s=3.0e-5", "!i32:s=-2000000000|i32:s=2000000000" }, .flags = EXACT | MUST_ALL },
	/* float8 and float4 with NaN and inf codes */
	{ "DequantizeLinear", F, "", { "e4m3:16x64@nan|e4m3uz:16x64@nan|e5m2:16x64@nan|e5m2uz:16x64@nan|e2m1:16x64@nan", "!s=0.5|!s=0.5|!s=0.5|!s=0.5|!s=0.5", "|!e4m3uz:s=1|!e5m2:s=0|" }, .flags = EXACT | MUST_ALL },
	/* per axis: axis 0, 1 (the default), last, negative; every type; 1000003 channels */
	{ "DequantizeLinear", F, "axis=0", { "i8:3x5x7@i:-128:127|u8:1000003@i:0:255|i16:3x5x7@i:-32768:32767|u16:3x4@i:0:65535|i4:3x5x7@i:-8:7|u4:3x5x7@i:0:15|i32:3x2@i:-100000:100000|e4m3:3x5x7@big|e4m3uz:3x5x7@big|e5m2:3x5x7@nan|e5m2uz:3x5x7@big|e2m1:3x5x7@big", "!3@pos|!1000003@pos|3@pos|!3@pos", "!i8:3@i:-20:20|!u8:1000003@i:100:150|!i16:3@i:-1000:1000|!u16:3@i:0:60000|!i4:3@i:-8:7|!u4:3@i:0:15|!i32:3@i:-100000:100000|!e4m3:3@sm|!e4m3uz:3@sm|!e5m2:3@sm|!e5m2uz:3@sm|!e2m1:3@sm" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "", { "i8:3x5x7@i:-128:127|u8:2x5x1001@i:0:255|i16:3x5x7@i:-32768:32767|u16:3x5@i:0:65535|i4:3x5x7x2@i:-8:7|u4:3x5x7@i:0:15|i32:1x5@i:-100000:100000|e4m3:3x5x7@big|e4m3uz:3x5x7@big|e5m2:3x5x7@nan|e5m2uz:3x5x7@big|e2m1:3x5x7@big", "!5@pos|5@pos|!5@pos", "!i8:5@i:-20:20|!u8:5@i:100:150|!i16:5@i:-1000:1000|!u16:5@i:0:60000|!i4:5@i:-8:7|!u4:5@i:0:15|!i32:5@i:-100000:100000|!e4m3:5@sm|!e4m3uz:5@sm|!e5m2:5@sm|!e5m2uz:5@sm|!e2m1:5@sm" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=2", { "i8:3x5x7@i:-128:127|u8:2x3x7@i:0:255|i16:3x5x7@i:-32768:32767|u16:2x2x7@i:0:65535|i4:3x5x7@i:-8:7|u4:3x5x7@i:0:15|i32:1x1x7@i:-100000:100000|e4m3:3x5x7@big|e4m3uz:3x5x7@big|e5m2:3x5x7@nan|e5m2uz:3x5x7@big|e2m1:3x5x7@big", "!7@pos|7@pos|!7@pos", "|!u8:7@i:100:150|!i16:7@i:-1000:1000|!u16:7@i:0:60000|!i4:7@i:-8:7|!u4:7@i:0:15|!i32:7@i:-100000:100000|!e4m3:7@sm|!e4m3uz:7@sm|!e5m2:7@sm|!e5m2uz:7@sm|!e2m1:7@sm" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=-1", { "i8:3x5x7@i:-128:127|i4:64x130@i:-8:7|e4m3:3x5x7@big|u4:9x31@i:0:15", "!7@pos|!130@pos|!7@pos|!31@pos", "!i8:7@i:-20:20|!i4:130@i:-8:7||" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=-2", { "u8:3x5x7@i:0:255|u4:4x64x33@i:0:15", "!5@pos|!64@pos", "!u8:5@i:100:150|!u4:64@i:0:15" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=-3", { "i16:3x5x7@i:-32768:32767", "!3@pos", "!i16:3@i:-1000:1000" }, .flags = EXACT | MUST_ALL },
	/* a zero scale and a negative one */
	{ "DequantizeLinear", F, "axis=0", { "i8:3x5x7@i:-128:127", "!3=0.5,0,-2", "!i8:3=0,3,-3" }, .flags = EXACT | MUST_ALL },
	/* blocked: block 32, 64, 128 on axis 0, 1, last, negative, short last blocks, every type */
	{ "DequantizeLinear", F, "axis=1;block_size=32", { "i8:64x100@i:-128:127|u8:64x100@i:0:255|i16:64x100@i:-32768:32767|u16:64x100@i:0:65535|i4:64x100@i:-8:7|u4:64x100@i:0:15|i32:64x100@i:-100000:100000|e4m3:64x100@big|e4m3uz:64x100@big|e5m2:64x100@nan|e5m2uz:64x100@big|e2m1:64x100@big", "!64x4@pos|64x4@pos|!64x4@pos", "!i8:64x4@i:-20:20|!u8:64x4@i:100:150|!i16:64x4@i:-1000:1000|!u16:64x4@i:0:60000|!i4:64x4@i:-8:7|!u4:64x4@i:0:15|!i32:64x4@i:-100000:100000|!e4m3:64x4@sm|!e4m3uz:64x4@sm|!e5m2:64x4@sm|!e5m2uz:64x4@sm|!e2m1:64x4@sm" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=0;block_size=64", { "i8:100x48@i:-128:127|u8:100x48@i:0:255|i16:100x48@i:-32768:32767|u16:100x48@i:0:65535|i4:100x48@i:-8:7|u4:100x48@i:0:15|i32:100x48@i:-100000:100000|e4m3:100x48@big|e4m3uz:100x48@big|e5m2:100x48@nan|e5m2uz:100x48@big|e2m1:100x48@big", "!2x48@pos", "!i8:2x48@i:-20:20|!u8:2x48@i:100:150|!i16:2x48@i:-1000:1000|!u16:2x48@i:0:60000|!i4:2x48@i:-8:7|!u4:2x48@i:0:15|!i32:2x48@i:-100000:100000|!e4m3:2x48@sm|!e4m3uz:2x48@sm|!e5m2:2x48@sm|!e5m2uz:2x48@sm|!e2m1:2x48@sm" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=-1;block_size=128", { "i8:3x5x300@i:-128:127|u8:3x5x300@i:0:255|i16:3x5x300@i:-32768:32767|u16:3x5x300@i:0:65535|i4:3x5x300@i:-8:7|u4:3x5x300@i:0:15|i32:3x5x300@i:-100000:100000|e4m3:3x5x300@big|e4m3uz:3x5x300@big|e5m2:3x5x300@nan|e5m2uz:3x5x300@big|e2m1:3x5x300@big", "!3x5x3@pos", "|!u8:3x5x3@i:100:150|!i16:3x5x3@i:-1000:1000|!u16:3x5x3@i:0:60000|!i4:3x5x3@i:-8:7|!u4:3x5x3@i:0:15|!i32:3x5x3@i:-100000:100000|!e4m3:3x5x3@sm|!e4m3uz:3x5x3@sm|!e5m2:3x5x3@sm|!e5m2uz:3x5x3@sm|!e2m1:3x5x3@sm" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=1;block_size=128", { "i4:2x256x3@i:-8:7|u4:2x300x7@i:0:15|i8:2x300x7@i:-128:127", "!2x2x3@pos|!2x3x7@pos", "|!u4:2x3x7@i:0:15|!i8:2x3x7@i:-5:5" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=0;block_size=128", { "i4:1000003@i:-8:7|u4:1000003@i:0:15|e4m3:1000003@big", "!7813@pos|7813@pos", "!i4:7813@i:-8:7||!e4m3:7813@sm" }, .flags = EXACT | MUST_ALL },
	{ "DequantizeLinear", F, "axis=-2;block_size=32", { "i4:2x70x9@i:-8:7|u8:2x70x9@i:0:255", "!2x3x9@pos", "|!u8:2x3x9@i:100:150" }, .flags = EXACT | MUST_ALL },
	/* a block longer than the axis */
	{ "DequantizeLinear", F, "axis=1;block_size=32", { "i4:4x20@i:-8:7|u4:4x20@i:0:15", "!4x1@pos|4x1@pos" }, .flags = EXACT | MUST_ALL },
	/* int4 weights of a 4096x4096 MatMul, block 64 (AWQ/GPTQ-style) */
	{ "DequantizeLinear", F, "axis=1;block_size=64", { "i4:8x256@i:-8:7|u4:4096x4096@i:0:15", "!8x4@pos|!4096x64@pos", "!i4:8x4@i:-8:7|!u4:4096x64@i:0:15" }, .flags = EXACT | MUST_ALL },
	/* output_dtype (opset 23) and opsets 10, 13, 19 */
	{ "DequantizeLinear", "f32", "output_dtype=10", { "i8:3x5x7@i:-128:127|u4:33@i:0:15|e4m3:40@big", "!s=0.05|!f32:s=0.5|!s=0.3", "!i8:s=3||" }, .flags = EXACT | MUST_ALL, .opset = 23 },
	{ "DequantizeLinear", "f32 f16", "output_dtype=16", { "i8:3x5x7@i:-128:127|i16:40@i:-32768:32767", "!s=0.05|f16:s=0.001" }, .flags = EXACT | MUST_ALL, .opset = 23 },
	{ "DequantizeLinear", "f32", "", { "i8:3x5x7@i:-128:127|u8:300x257@i:0:255|i32:40@i:-100000:100000", "!s=0.05|s=0.02|!s=0.5", "!i8:s=1|u8:s=128|" }, .flags = EXACT | MUST_ALL, .opset = 10 },
	{ "DequantizeLinear", "f32", "axis=1", { "i8:3x5x7@i:-128:127", "!5@pos", "!i8:5@i:-5:5" }, .flags = EXACT | MUST_ALL, .opset = 13 },
	{ "DequantizeLinear", F, "", { "e4m3:3x5x7@big|e5m2:40@big", "!s=0.05|s=0.2", "!e4m3:s=0|" }, .flags = EXACT | MUST_ALL, .opset = 19 },

};
#pragma GCC diagnostic pop
#define N_SPECS ((int)(sizeof(specs) / sizeof(specs[0])))

/* ------------------------------------------------------------------------ */
/* Parsing the table                                                         */
/* ------------------------------------------------------------------------ */

enum gen { G_DEFAULT, G_POS, G_NZ, G_BIG, G_HALF, G_SM, G_NEAR1, G_NAN, G_GE1, G_RANGE };

struct input {
	bool omitted, cnst;
	int dtype, rank;
	int64_t dims[IR_MAX_RANK];
	int gen;
	double lo, hi;
	double *vals;        /* given values (owned), or NULL */
	int64_t n_vals;
};

static const struct {
	const char *name;
	int dtype;
} dtype_names[] = {
	{ "f32", IR_FLOAT }, { "f16", IR_FLOAT16 }, { "bf16", IR_BFLOAT16 }, { "f64", IR_DOUBLE }, { "i64", IR_INT64 },
	{ "i32", IR_INT32 }, { "i8", IR_INT8 }, { "u8", IR_UINT8 }, { "b", IR_BOOL }, { "i16", IR_INT16 },
	{ "u16", IR_UINT16 }, { "i4", IR_INT4 }, { "u4", IR_UINT4 }, { "e4m3", IR_F8E4M3FN }, { "e4m3uz", IR_F8E4M3FNUZ },
	{ "e5m2", IR_F8E5M2 }, { "e5m2uz", IR_F8E5M2FNUZ }, { "e2m1", IR_F4E2M1 },
};

static int dtype_of(const char *s, size_t n)
{
	for (size_t i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++)
		if (strlen(dtype_names[i].name) == n && !strncmp(dtype_names[i].name, s, n))
			return dtype_names[i].dtype;
	return -1;
}

static const char *short_name(int dtype)
{
	for (size_t i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++)
		if (dtype_names[i].dtype == dtype)
			return dtype_names[i].name;
	return ir_dtype_name(dtype);
}

/* Alternative `k` of a '|'-separated list (its last one when there are fewer) into buf. */
static void alt(const char *list, int k, char *buf, size_t size)
{
	const char *p = list;
	for (int i = 0; i < k; i++) {
		const char *bar = strchr(p, '|');
		if (!bar)
			break;
		p = bar + 1;
	}
	size_t n = strcspn(p, "|");
	snprintf(buf, size, "%.*s", (int)n, p);
}

static int n_alts(const char *list)
{
	int n = 1;
	for (const char *p = list; *p; p++)
		n += *p == '|';
	return n;
}

/* Parses one input spec; false with why. */
static bool parse_input(const char *s, int swept, struct input *in, char *why, size_t size)
{
	memset(in, 0, sizeof(*in));
	in->dtype = swept;
	if (!*s) {
		in->omitted = true;
		return true;
	}
	if (*s == '!') {
		in->cnst = true;
		s++;
	}
	const char *colon = strchr(s, ':');
	const char *at = strchr(s, '@');
	if (colon && (!at || colon < at)) {
		if (!(colon - s == 1 && *s == '$')) {
			in->dtype = dtype_of(s, (size_t)(colon - s));
			if (in->dtype < 0) {
				snprintf(why, size, "unknown dtype in '%s'", s);
				return false;
			}
		}
		s = colon + 1;
	}
	if (*s == 's' && (s[1] == 0 || s[1] == '@' || s[1] == '=')) {
		in->rank = 0;
		s++;
	} else {
		for (;;) {
			char *end;
			long long v = strtoll(s, &end, 10);
			if (end == s || v < 0 || in->rank == IR_MAX_RANK) {
				snprintf(why, size, "bad dims in '%s'", s);
				return false;
			}
			in->dims[in->rank++] = v;
			s = end;
			if (*s != 'x')
				break;
			s++;
		}
	}
	if (*s == '@') {
		s++;
		size_t n = strcspn(s, "=");
		static const struct {
			const char *name;
			int gen;
		} gens[] = { { "pos", G_POS }, { "nz", G_NZ }, { "big", G_BIG }, { "half", G_HALF },
			     { "sm", G_SM }, { "near1", G_NEAR1 }, { "nan", G_NAN }, { "ge1", G_GE1 } };
		bool found = false;
		for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++)
			if (strlen(gens[i].name) == n && !strncmp(s, gens[i].name, n)) {
				in->gen = gens[i].gen;
				found = true;
			}
		if (!found && n > 2 && !strncmp(s, "i:", 2)) {
			char *end;
			in->gen = G_RANGE;
			in->lo = strtod(s + 2, &end);
			if (*end == ':') {
				in->hi = strtod(end + 1, &end);
				found = end == s + n;
			}
		}
		if (!found) {
			snprintf(why, size, "bad generator in '%s'", s);
			return false;
		}
		s += n;
	}
	if (*s == '=') {
		s++;
		int64_t numel = 1;
		for (int i = 0; i < in->rank; i++)
			numel *= in->dims[i];
		in->vals = calloc((size_t)(numel ? numel : 1), sizeof(double));
		if (!in->vals)
			return false;
		for (;;) {
			char *end;
			double v = strtod(s, &end);
			if (end == s || in->n_vals == numel) {
				snprintf(why, size, "bad values or more values than elements in '%s'", s);
				return false;
			}
			in->vals[in->n_vals++] = v;
			s = end;
			if (*s != ',')
				break;
			s++;
		}
		if (in->n_vals != numel) {
			snprintf(why, size, "%lld values for %lld elements", (long long)in->n_vals, (long long)numel);
			return false;
		}
	}
	if (*s) {
		snprintf(why, size, "trailing '%s'", s);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static double uni(double lo, double hi)   /* [lo, hi) */
{
	return lo + (hi - lo) * (double)(rng() >> 11) / 9007199254740992.0;
}

static double ints(double lo, double hi)   /* integers in [lo, hi] */
{
	return lo + (double)(rng() % (uint64_t)(hi - lo + 1));
}

static double gen_value(const struct input *in)
{
	bool fl = ir_dtype_is_float(in->dtype);
	bool un = in->dtype == IR_UINT8 || in->dtype == IR_UINT16 || in->dtype == IR_UINT4;
	if (in->dtype == IR_BOOL && in->gen != G_RANGE)
		return (double)(rng() & 1);
	switch (in->gen) {
	case G_POS: return fl ? uni(0.1, 2) : ints(1, 10);
	case G_NZ: {
		double v = fl ? uni(0.5, 1.5) : ints(1, 10);
		return (!un && (rng() & 1)) ? -v : v;
	}
	case G_BIG: return fl ? uni(-10, 10) : un ? ints(0, 200) : ints(-100, 100);
	case G_HALF: return fl ? ints(-10, 10) / 2 : ints(-10, 10);
	case G_SM: return un ? ints(0, 3) : ints(-3, 3);
	case G_NEAR1: return fl ? uni(0.9, 1.1) : 1;
	case G_GE1: return fl ? uni(1, 3) : ints(1, 3);
	case G_NAN: {
		uint64_t r = rng() % 20;
		return !fl ? ints(-10, 10) : r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : uni(-1, 1);
	}
	case G_RANGE: return ints(in->lo, in->hi);
	default: return fl ? uni(-1, 1) : un ? ints(0, 10) : ints(-10, 10);
	}
}

static void put(int dtype, void *p, uint64_t i, double v)
{
	switch (dtype) {
	case IR_FLOAT: ((float *)p)[i] = (float)v; break;
	case IR_DOUBLE: ((double *)p)[i] = v; break;
	case IR_FLOAT16: ((uint16_t *)p)[i] = ir_f32_to_f16((float)v); break;
	case IR_BFLOAT16: ((uint16_t *)p)[i] = ir_f32_to_bf16((float)v); break;
	case IR_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
	case IR_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
	case IR_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
	case IR_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case IR_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	default: kern_store_f64(dtype, p, i, v); break;   /* int16, int4, float8...: the CPU's conversion */
	}
}

static struct ir_tensor *make_tensor(const struct input *in, struct ir_diag *d)
{
	struct ir_tensor *t = ir_tensor_new(in->dtype, in->rank, in->dims, d);
	if (!t || !t->numel)
		return t;
	void *p = ir_tensor_mutable(t);
	for (uint64_t i = 0; i < t->numel; i++)
		put(in->dtype, p, i, in->vals ? in->vals[i] : gen_value(in));
	return t;
}

/* ------------------------------------------------------------------------ */
/* Attributes                                                                */
/* ------------------------------------------------------------------------ */

static char *dup_n(const char *s, size_t n)
{
	char *r = malloc(n + 1);
	if (r) {
		memcpy(r, s, n);
		r[n] = 0;
	}
	return r;
}

static bool looks_float(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == 'i' || s[i] == 'n')
			return true;
	return false;
}

/* Sets one "name=value" attribute on n; false with why. */
static bool set_attr(struct ir_node *n, int64_t opset, const char *item, size_t len, int swept, char *why, size_t size)
{
	const char *eq = memchr(item, '=', len);
	if (!eq) {
		snprintf(why, size, "attribute '%.*s' has no value", (int)len, item);
		return false;
	}
	struct ir_attr a = { .has_type = true };
	a.name = dup_n(item, (size_t)(eq - item));
	const char *v = eq + 1;
	size_t vn = len - (size_t)(eq - item) - 1;
	char num[64];
	const struct ir_attr_schema *sc = n->op >= 0 ? ir_op_attr(n->op, a.name, opset) : NULL;
	if (!a.name)
		goto bad;
	if (vn && v[0] == '\'') {
		const char *q = memchr(v + 1, '\'', vn - 1);
		if (!q)
			goto bad;
		a.type = IR_ATTR_STRING;
		a.s.len = (size_t)(q - v - 1);
		a.s.data = dup_n(v + 1, a.s.len);
	} else if (vn && v[0] == '[') {
		bool fl = sc ? sc->type == IR_ATTR_FLOATS : looks_float(v, vn);
		a.type = fl ? IR_ATTR_FLOATS : IR_ATTR_INTS;
		size_t cnt = 0;
		for (size_t i = 1; i < vn && v[i] != ']'; i++)
			cnt += v[i] == ',' || i == 1;
		a.n = cnt;
		a.floats = fl ? calloc(cnt + 1, sizeof(float)) : NULL;
		a.ints = fl ? NULL : calloc(cnt + 1, sizeof(int64_t));
		if (fl ? !a.floats : !a.ints)
			goto bad;
		const char *p = v + 1;
		for (size_t i = 0; i < cnt; i++) {
			char *end;
			if (fl)
				a.floats[i] = strtof(p, &end);
			else
				a.ints[i] = strtoll(p, &end, 10);
			if (end == p)
				goto bad;
			p = end + 1;
		}
	} else if (vn && v[0] == '#') {
		/* #TYPE:V - a one-element tensor */
		const char *c = memchr(v, ':', vn);
		if (!c)
			goto bad;
		struct input in = { .dtype = c - v - 1 == 1 && v[1] == '$' ? swept : dtype_of(v + 1, (size_t)(c - v - 1)),
				    .rank = 1, .dims = { 1 } };
		if (in.dtype < 0)
			goto bad;
		snprintf(num, sizeof(num), "%.*s", (int)(vn - (size_t)(c - v) - 1), c + 1);
		double val = strtod(num, NULL);
		in.vals = &val;
		in.n_vals = 1;
		a.type = IR_ATTR_TENSOR;
		if (!(a.t = make_tensor(&in, NULL)))
			goto bad;
	} else {
		snprintf(num, sizeof(num), "%.*s", (int)vn, v);
		if (!strcmp(num, "$"))
			snprintf(num, sizeof(num), "%d", swept);
		bool fl = sc ? sc->type == IR_ATTR_FLOAT : looks_float(num, strlen(num));
		a.type = fl ? IR_ATTR_FLOAT : IR_ATTR_INT;
		char *end;
		if (fl)
			a.f = strtof(num, &end);
		else
			a.i = strtoll(num, &end, 10);
		if (end == num || *end)
			goto bad;
	}
	if (ir_node_set_attr(n, &a, NULL))
		goto bad;
	return true;
bad:
	snprintf(why, size, "bad attribute '%.*s'", (int)len, item);
	ir_attr_clear(&a);
	return false;
}

/* ------------------------------------------------------------------------ */
/* One case                                                                  */
/* ------------------------------------------------------------------------ */

struct tcase {
	const struct spec *sp;
	int variant, dtype;
	char label[512];
	char domain[32], op_type[64];
	int64_t opset;
	int n_in, n_out;
	struct input in[MAXIN];
	struct ir_tensor *t[MAXIN];   /* input values (NULL when omitted) */
	struct ir_model *m;
	struct ir_node *node;
	struct exec_values feeds, want;
};

static void case_clear(struct tcase *c)
{
	for (int i = 0; i < MAXIN; i++) {
		free(c->in[i].vals);
		ir_tensor_unref(c->t[i]);
	}
	ir_model_free(c->m);
	exec_values_clear(&c->feeds);
	exec_values_clear(&c->want);
	memset(c, 0, sizeof(*c));
}

static int add_opset(struct ir_model *m, const char *domain, int64_t v)
{
	struct ir_opset *o = realloc(m->opsets, (m->n_opsets + 1) * sizeof(*o));
	if (!o)
		return IR_ENOMEM;
	m->opsets = o;
	o[m->n_opsets].domain = strdup(domain);
	o[m->n_opsets].version = v;
	o[m->n_opsets].has_version = true;
	if (!o[m->n_opsets].domain)
		return IR_ENOMEM;
	m->n_opsets++;
	return 0;
}

/* Builds case (spec, variant, dtype); false with why when the spec is bad. */
static bool case_build(struct tcase *c, const struct spec *sp, int variant, int dtype, char *why, size_t size)
{
	memset(c, 0, sizeof(*c));
	c->sp = sp;
	c->variant = variant;
	c->dtype = dtype;
	const char *colon = strchr(sp->op, ':');
	if (colon) {
		snprintf(c->domain, sizeof(c->domain), "%.*s", (int)(colon - sp->op), sp->op);
		snprintf(c->op_type, sizeof(c->op_type), "%s", colon + 1);
	} else {
		snprintf(c->op_type, sizeof(c->op_type), "%s", sp->op);
	}
	c->opset = colon ? 1 : sp->opset ? sp->opset : 21;
	c->n_out = sp->n_out ? sp->n_out : 1;
	if (c->n_out > MAXOUT) {
		snprintf(why, size, "more than %d outputs", MAXOUT);
		return false;
	}
	size_t len = (size_t)snprintf(c->label, sizeof(c->label), "%s %s", c->op_type, short_name(dtype));
	for (int i = 0; i < MAXIN && sp->in[i]; i++) {
		char s[256];
		alt(sp->in[i], variant, s, sizeof(s));
		if (!parse_input(s, dtype, &c->in[i], why, size))
			return false;
		c->n_in = i + 1;
		char dims[128];
		const struct input *in = &c->in[i];
		if (len < sizeof(c->label)) {
			if (in->omitted)
				len += (size_t)snprintf(c->label + len, sizeof(c->label) - len, " -");
			else
				len += (size_t)snprintf(c->label + len, sizeof(c->label) - len, " %s%s%s%s", in->cnst ? "!" : "",
							 in->dtype != dtype ? short_name(in->dtype) : "",
							 ir_dims_str(in->rank, in->dims, dims, sizeof(dims)),
							 in->vals && in->n_vals <= 8 ? "=.." : "");
		}
	}
	/* omitted trailing inputs are dropped */
	while (c->n_in > 0 && c->in[c->n_in - 1].omitted)
		c->n_in--;
	if (*sp->attrs && len < sizeof(c->label))
		snprintf(c->label + len, sizeof(c->label) - len, " {%s}", sp->attrs);

	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_model *m = c->m = ir_model_new();
	struct ir_graph *g = m ? (m->graph = ir_graph_new("case")) : NULL;
	if (!g)
		goto nomem;
	m->has_ir_version = true;
	m->ir_version = 10;
	if (add_opset(m, "", colon ? 21 : c->opset) || (colon && add_opset(m, c->domain, c->opset)))
		goto nomem;
	struct ir_node *n = c->node = ir_node_new(g, c->op_type, colon ? c->domain : NULL, "node", c->n_in, c->n_out, NULL);
	if (!n)
		goto nomem;
	if (n->op < 0) {
		snprintf(why, size, "unknown op '%s'", sp->op);
		return false;
	}
	for (int i = 0; i < c->n_in; i++) {
		struct input *in = &c->in[i];
		if (in->omitted)
			continue;
		char name[16];
		snprintf(name, sizeof(name), "x%d", i);
		struct ir_value *v = ir_value_new(g, name, NULL);
		if (!v || !(c->t[i] = make_tensor(in, &d)))
			goto nomem;
		struct ir_dim dims[IR_MAX_RANK];
		for (int k = 0; k < in->rank; k++)
			dims[k] = (struct ir_dim){ .kind = IR_DIM_VALUE, .value = in->dims[k] };
		if (ir_type_set_tensor(&v->type, in->dtype, in->rank, dims))
			goto nomem;
		v->has_type_proto = true;
		if (in->cnst ? ir_value_set_init(v, c->t[i], &d) : ir_graph_add_input(g, v))
			goto nomem;
		if (!in->cnst && exec_values_add_tensor(&c->feeds, name, c->t[i]))
			goto nomem;
		if (ir_node_set_input(n, i, v))
			goto nomem;
	}
	for (int i = 0; i < c->n_out; i++) {
		char name[16];
		snprintf(name, sizeof(name), "y%d", i);
		struct ir_value *v = ir_value_new(g, name, NULL);
		if (!v || ir_node_set_output(n, i, v, &d) || ir_graph_add_output(g, v))
			goto nomem;
	}
	const char *a = sp->attrs;
	while (*a) {
		size_t l = strcspn(a, ";");
		if (l && !set_attr(n, c->opset, a, l, dtype, why, size))
			return false;
		a += l;
		if (*a == ';')
			a++;
	}
	ir_diag_clear(&d);
	return true;
nomem:
	snprintf(why, size, "cannot build the model: %s", d.error ? d.error : "out of memory");
	ir_diag_clear(&d);
	return false;
}

/* ------------------------------------------------------------------------ */
/* Comparing                                                                 */
/* ------------------------------------------------------------------------ */

static void tolerance(int dtype, double scale, double *atol, double *rtol)
{
	switch (dtype) {
	case IR_FLOAT: *atol = 1e-5; *rtol = 1e-4; break;
	case IR_FLOAT16: *atol = 2e-3; *rtol = 2e-3; break;
	case IR_BFLOAT16: *atol = 1.6e-2; *rtol = 1.6e-2; break;
	case IR_DOUBLE: *atol = 1e-10; *rtol = 1e-9; break;
	default: *atol = *rtol = 0; return;   /* integers and bool: exact */
	}
	*atol *= scale;
	*rtol *= scale;
}

/* Compares the GPU's `a` with the CPU's `b`; false with a description in msg. */
static bool compare(const struct ir_tensor *a, const struct ir_tensor *b, double scale, bool exact, char *msg,
		    size_t size)
{
	double atol, rtol;
	tolerance(b->dtype, scale, &atol, &rtol);
	if (exact)
		atol = rtol = 0;
	/* float8: the codes themselves (the sign of zero, which NaN) */
	bool f8 = b->dtype == IR_F8E4M3FN || b->dtype == IR_F8E4M3FNUZ || b->dtype == IR_F8E5M2 || b->dtype == IR_F8E5M2FNUZ;
	const uint8_t *ca = f8 ? ir_tensor_data(a) : NULL, *cb = f8 ? ir_tensor_data(b) : NULL;
	double max_abs = 0, max_rel = 0;
	uint64_t n_bad = 0, first = 0, n_nonfinite = 0;
	double fa = 0, fb = 0;
	/* bool: the raw bytes, which must be 0 or 1 (get_f64 would read the
	 * 0xFF poison as true) */
	const uint8_t *ra = b->dtype == IR_BOOL ? ir_tensor_data(a) : NULL, *rb = ra ? ir_tensor_data(b) : NULL;
	for (uint64_t i = 0; i < b->numel; i++) {
		double x = ra ? ra[i] : ir_tensor_get_f64(a, i), y = rb ? rb[i] : ir_tensor_get_f64(b, i);
		bool bad;
		if (isnan(x) || isnan(y)) {
			bad = isnan(x) != isnan(y);
		} else if (isinf(x) || isinf(y)) {
			bad = x != y;
		} else {
			double e = fabs(x - y);
			if (e > max_abs)
				max_abs = e;
			if (y != 0 && e / fabs(y) > max_rel)
				max_rel = e / fabs(y);
			bad = e > atol + rtol * fabs(y);
		}
		if (ca && ca[i] != cb[i])
			bad = true;
		if (!isfinite(x) && isfinite(y))
			n_nonfinite++;
		if (bad && !n_bad++) {
			first = i;
			fa = x;
			fb = y;
		}
	}
	if (!n_bad)
		return true;
	snprintf(msg, size, "max abs err %.3g, max rel err %.3g, %llu of %llu bad (%llu NaN/Inf where the cpu has none), "
		 "first bad at %llu: gpu %.9g, cpu %.9g (atol %.3g, rtol %.3g)", max_abs, max_rel, (unsigned long long)n_bad,
		 (unsigned long long)b->numel, (unsigned long long)n_nonfinite, (unsigned long long)first, fa, fb, atol, rtol);
	return false;
}

/* ------------------------------------------------------------------------ */
/* The GPU half                                                              */
/* ------------------------------------------------------------------------ */

static const char *current = "";

static void on_signal(int sig)
{
	/* a crash or a hang in a case: say which one */
	const char *m1 = sig == SIGALRM ? "\ntest_backend_ops: timed out in case: " : "\ntest_backend_ops: crashed in case: ";
	ssize_t r = write(2, m1, strlen(m1));
	r = write(2, current, strlen(current));
	r = write(2, "\n", 1);
	(void)r;
	_exit(1);
}

enum result { R_PASS, R_FAIL, R_SKIP };

#ifdef OGSH_HAVE_CUDA
static struct cuda_ctx gpu;

/* Whether a kernel described as `impl` is what the row's `want` asks
 * (struct spec's impl). */
static bool impl_ok(const char *want, const char *impl)
{
	if (!want || getenv("OGSH_CONV_PATCH") || getenv("OGSH_CONV_API"))
		return true;
	bool neg = *want == '!';
	return (strstr(impl, want + neg) != NULL) != neg;
}

/* msg (the kernel's description) becomes the failure's message. */
static void impl_msg(const char *want, char *msg, size_t size)
{
	char ran[160];
	snprintf(ran, sizeof(ran), "%.150s", msg);
	snprintf(msg, size, "ran as '%s', expected %s'%s'", ran, *want == '!' ? "not " : "", want + (*want == '!'));
}

static bool gpu_init(char *why, size_t size)
{
	/* the executor's answer (driver, device, OGSH_DEVICE=cpu), then our own */
	if (!exec_gpu_available(why, size))
		return false;
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		snprintf(why, size, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no GPU found");
		return false;
	}
	struct cudaDeviceProp p;
	if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&p, 0) != cudaSuccess ||
	    cudaStreamCreate(&gpu.stream) != cudaSuccess) {
		snprintf(why, size, "cannot use GPU 0: %s", cudaGetErrorString(cudaGetLastError()));
		return false;
	}
	gpu.device = 0;
	gpu.sm = p.major * 10 + p.minor;
	gpu.tf32 = false;
	printf("GPU: %s (sm_%d, %d SMs)\n", p.name, gpu.sm, p.multiProcessorCount);
	return true;
}

static int byte_size(const struct cuda_tensor *t, size_t *n)
{
	uint64_t b;
	if (!ir_dtype_nbytes(t->dtype, (uint64_t)cuda_numel(t), &b))
		return IR_ERR;
	*n = (size_t)b;
	return 0;
}

/* Layouts a case runs in besides NCHW: bit L_X input 0 channels-last, L_Y
 * output 0 (and FusedConv's Z) channels-last, as the planner stores them. */
enum { L_X = 1, L_Y = 2 };

/* [N, C, H, W] <-> [N, H, W, C] on the host (to_nhwc, or back). */
static void permute4(const int64_t *dims, size_t es, const void *src, void *dst, bool to_nhwc)
{
	int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
	const unsigned char *a = src;
	unsigned char *b = dst;
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t h = 0; h < H; h++)
				for (int64_t w = 0; w < W; w++) {
					size_t nchw = (size_t)(((n * C + c) * H + h) * W + w), nhwc = (size_t)(((n * H + h) * W + w) * C + c);
					memcpy(b + (to_nhwc ? nhwc : nchw) * es, a + (to_nhwc ? nchw : nhwc) * es, es);
				}
}

/* The channels-last layouts worth a run for this case (0: none). */
static int layouts_of(const struct tcase *c)
{
	if ((c->dtype != IR_FLOAT16 && c->dtype != IR_BFLOAT16) || c->n_in < 1 || c->in[0].omitted || c->in[0].rank != 4)
		return 0;
	switch (c->node->op) {
	case IR_OP_Conv:
	case IR_OP_ogsh_FusedConv: return L_X | L_Y;
	case IR_OP_MaxPool:
	case IR_OP_AveragePool: return L_X | L_Y;
	case IR_OP_GlobalAveragePool:
	case IR_OP_GlobalMaxPool: return L_X;
	default: return 0;
	}
}

/* Runs the node's GPU kernel on the case (with the layouts of `lay`); R_SKIP with the reason in msg. */
/* The kernel's view of the case's inputs and outputs (shapes, types,
 * constants; no data yet) in the layouts of `lay`. */
static void case_tensors(const struct tcase *c, const struct exec_values *want, int lay, struct cuda_tensor *tin,
			 struct cuda_tensor *tout)
{
	memset(tin, 0, sizeof(*tin) * MAXIN);
	memset(tout, 0, sizeof(*tout) * MAXOUT);
	for (int i = 0; i < c->n_in; i++) {
		const struct input *in = &c->in[i];
		if (in->omitted)
			continue;
		tin[i].dtype = in->dtype;
		tin[i].rank = in->rank;
		memcpy(tin[i].dims, in->dims, sizeof(in->dims));
		tin[i].host = in->cnst ? c->t[i] : NULL;
		tin[i].nhwc = ((lay & L_X) && i == 0) ||
			      ((lay & L_Y) && i == 3 && c->node->op == IR_OP_ogsh_FusedConv && in->rank == 4);
	}
	for (int j = 0; j < c->n_out && j < MAXOUT; j++) {
		const struct kern_value *v = &want->a[j].v;
		if (v->kind != KV_TENSOR)
			continue;
		tout[j].dtype = v->t->dtype;
		tout[j].rank = v->t->rank;
		for (int r = 0; r < v->t->rank && r < IR_MAX_RANK; r++)
			tout[j].dims[r] = v->t->dims[r];
		tout[j].nhwc = (lay & L_Y) && j == 0 && v->t->rank == 4;
	}
}

/* --cpu-only: whether the kernel's supports() takes the case (it reads
 * types, shapes and constants only, no GPU needed); false with why. */
static bool cpu_only_supports(struct tcase *c, const struct cuda_kernel *kern, char *why, size_t size)
{
	struct cuda_tensor tin[MAXIN], tout[MAXOUT];
	case_tensors(c, &c->want, 0, tin, tout);
	struct cuda_ctx ctx = { .sm = 90 };
	struct ir_diag d;
	ir_diag_init(&d);
	struct cuda_kctx k = { .node = c->node, .opset = c->opset, .n_in = c->n_in, .n_out = c->n_out, .in = tin,
			       .out = tout, .ctx = &ctx, .d = &d };
	why[0] = 0;
	bool ok = kern->supports(&k, why, size);
	ir_diag_clear(&d);
	return ok;
}

/* Runs the node's GPU kernel on the case (with the layouts of `lay`); R_SKIP with the reason in msg. */
static enum result gpu_case(struct tcase *c, const struct cuda_kernel *kern, const struct exec_values *want, int lay,
			    char *msg, size_t size)
{
	struct cuda_tensor tin[MAXIN], tout[MAXOUT];
	case_tensors(c, want, lay, tin, tout);
	struct ir_diag d;
	ir_diag_init(&d);
	struct cuda_kctx k = { .node = c->node, .opset = c->opset, .n_in = c->n_in, .n_out = c->n_out, .in = tin,
			       .out = tout, .ctx = &gpu, .d = &d };
	char why[256] = "";
	if (!kern->supports(&k, why, sizeof(why))) {
		snprintf(msg, size, "%s", *why ? why : "supports() gave no reason");
		ir_diag_clear(&d);
		return R_SKIP;
	}
	enum result res = R_FAIL;
	void *dev_in[MAXIN] = { 0 }, *dev_out[MAXOUT] = { 0 };
	size_t out_bytes[MAXOUT] = { 0 };
	struct ir_tensor *got[MAXOUT] = { 0 };
	bool prepared = false;
	const char *step = "cudaMalloc";
	cudaError_t e = cudaSuccess;
	for (int i = 0; i < c->n_in && e == cudaSuccess; i++) {
		if (c->in[i].omitted)
			continue;
		size_t nb = c->t[i]->nbytes;
		e = cudaMalloc(&dev_in[i], nb ? nb : 1);
		if (e == cudaSuccess && nb) {
			step = "cudaMemcpy (upload)";
			const void *src = ir_tensor_data(c->t[i]);
			void *perm = NULL;
			if (tin[i].nhwc) {
				if (!(perm = malloc(nb))) {
					snprintf(msg, size, "out of memory");
					goto out;
				}
				permute4(tin[i].dims, nb / (size_t)cuda_numel(&tin[i]), src, perm, true);
				src = perm;
			}
			e = cudaMemcpy(dev_in[i], src, nb, cudaMemcpyHostToDevice);
			free(perm);
		}
		tin[i].data = dev_in[i];
	}
	for (int j = 0; j < c->n_out && e == cudaSuccess; j++) {
		if (!tout[j].dtype)
			continue;
		step = "cudaMalloc";
		if (byte_size(&tout[j], &out_bytes[j])) {
			snprintf(msg, size, "output %d: bad size", j);
			goto out;
		}
		e = cudaMalloc(&dev_out[j], out_bytes[j] ? out_bytes[j] : 1);
		tout[j].data = dev_out[j];
		if (e == cudaSuccess && !(got[j] = ir_tensor_new(tout[j].dtype, tout[j].rank, tout[j].dims, &d)))
			e = cudaErrorMemoryAllocation;
	}
	if (e != cudaSuccess) {
		snprintf(msg, size, "%s: %s", step, cudaGetErrorString(e));
		goto out;
	}
	if (kern->prepare && kern->prepare(&k)) {
		snprintf(msg, size, "prepare: %s", d.error ? d.error : "failed without a message");
		goto out;
	}
	prepared = true;
	if (k.ws_bytes && (e = cudaMalloc(&k.ws, k.ws_bytes)) != cudaSuccess) {
		snprintf(msg, size, "cudaMalloc (workspace of %zu bytes): %s", k.ws_bytes, cudaGetErrorString(e));
		goto out;
	}
	for (int iter = 0; iter < 2; iter++) {
		for (int j = 0; j < c->n_out && e == cudaSuccess; j++)
			if (dev_out[j] && out_bytes[j])
				e = cudaMemset(dev_out[j], 0xFF, out_bytes[j]);
		if (e == cudaSuccess)
			e = cudaDeviceSynchronize();
		if (e != cudaSuccess) {
			snprintf(msg, size, "cudaMemset (poison): %s", cudaGetErrorString(e));
			goto out;
		}
		if (kern->run(&k)) {
			snprintf(msg, size, "run%s: %s", iter ? " (second)" : "", d.error ? d.error : "failed without a message");
			goto out;
		}
		if ((e = cudaStreamSynchronize(gpu.stream)) != cudaSuccess || (e = cudaGetLastError()) != cudaSuccess) {
			snprintf(msg, size, "run%s: %s: %s", iter ? " (second)" : "", cudaGetErrorName(e), cudaGetErrorString(e));
			goto out;
		}
		for (int j = 0; j < c->n_out; j++) {
			if (!dev_out[j])
				continue;
			if (out_bytes[j] && (e = cudaMemcpy(ir_tensor_mutable(got[j]), dev_out[j], out_bytes[j],
							    cudaMemcpyDeviceToHost)) != cudaSuccess) {
				snprintf(msg, size, "cudaMemcpy (download): %s", cudaGetErrorString(e));
				goto out;
			}
			if (tout[j].nhwc && out_bytes[j]) {
				void *perm = malloc(out_bytes[j]);
				if (!perm) {
					snprintf(msg, size, "out of memory");
					goto out;
				}
				memcpy(perm, ir_tensor_data(got[j]), out_bytes[j]);
				permute4(tout[j].dims, out_bytes[j] / (size_t)cuda_numel(&tout[j]), perm, ir_tensor_mutable(got[j]),
					 false);
				free(perm);
			}
			char m2[400];
			if (!compare(got[j], want->a[j].v.t, c->sp->tol > 0 ? c->sp->tol : 1, (c->sp->flags & EXACT) != 0, m2,
				     sizeof(m2))) {
				snprintf(msg, size, "%soutput %d %s: %s", iter ? "second run, " : "", j, k.impl[0] ? k.impl : "", m2);
				goto out;
			}
		}
	}
	res = R_PASS;
	snprintf(msg, size, "%s", k.impl);
out:
	/* release frees what prepare made, also when prepare failed half-way */
	if (kern->release && (prepared || k.state))
		kern->release(k.state);
	cudaFree(k.ws);
	for (int i = 0; i < MAXIN; i++)
		cudaFree(dev_in[i]);
	for (int j = 0; j < MAXOUT; j++) {
		cudaFree(dev_out[j]);
		ir_tensor_unref(got[j]);
	}
	/* a sticky error ruins every later case: stop now */
	cudaError_t sticky = cudaDeviceSynchronize();
	if (sticky != cudaSuccess) {
		fprintf(stderr, "test_backend_ops: the GPU is in error after '%s': %s\n", c->label, cudaGetErrorString(sticky));
		exit(1);
	}
	ir_diag_clear(&d);
	return res;
}
#endif

/* ------------------------------------------------------------------------ */
/* Coverage                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Op types roughly by how many models of the ONNX Model Zoo (vision, text,
 * the Hugging Face exports) use them, most common first: our own ranking,
 * written from the op counts of those models; ops not listed follow by name.
 */
static const char *const common_ops[] = {
	"Conv", "Relu", "Add", "Reshape", "MatMul", "Mul", "Concat", "Transpose", "Gemm", "MaxPool",
	"BatchNormalization", "Softmax", "Unsqueeze", "Gather", "Shape", "Slice", "Sigmoid", "GlobalAveragePool",
	"Flatten", "Constant", "Sub", "Div", "Cast", "AveragePool", "Squeeze", "Clip", "ReduceMean", "Pow", "Sqrt",
	"Tanh", "Erf", "Resize", "Split", "Pad", "LeakyRelu", "Expand", "Where", "Equal", "ConstantOfShape",
	"LayerNormalization", "Identity", "Exp", "Range", "Dropout", "HardSwish", "HardSigmoid", "Less", "Greater",
	"Not", "Neg", "ReduceSum", "ReduceMax", "ArgMax", "TopK", "Tile", "Min", "Max", "Abs", "Log", "Floor",
	"Ceil", "Round", "NonZero", "ScatterND", "GatherElements", "GatherND", "ConvTranspose", "Upsample",
	"InstanceNormalization", "GroupNormalization", "Einsum", "Softplus", "Gelu", "CumSum", "And", "Or",
	"PRelu", "Elu", "Selu", "LSTM", "GRU", "NonMaxSuppression", "RoiAlign", "DepthToSpace", "SpaceToDepth",
	"Trilu", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "LogSoftmax",
	"Sin", "Cos", "Mod", "Sign", "Reciprocal", "IsNaN", "IsInf", "ScatterElements", "OneHot", "Size",
	"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear",
	"MatMulInteger", "ConvInteger", "If", "Loop", "Scan", "LRN", "MeanVarianceNormalization", "Sum", "Mean",
	"GlobalMaxPool", "ArgMin", "Xor", "Attention", "RMSNormalization", "RotaryEmbedding", "Einsum",
	"BitShift", "Celu", "Mish", "Shrink", "ThresholdedRelu", "Softsign", "CastLike", "Unique", "ReverseSequence",
	"GridSample", "Compress", "EyeLike", "LpNormalization", "LpPool", "MaxRoiPool", "MaxUnpool", "RNN",
	"DFT", "STFT",
};

/* The ONNX op type: the C name of an op outside the default domain has a
 * prefix ("ogsh_FusedConv"). */
static const char *op_type(int op)
{
	const char *u = *ir_ops[op].domain ? strchr(ir_ops[op].name, '_') : NULL;
	return u ? u + 1 : ir_ops[op].name;
}

static int op_rank(int op)
{
	for (size_t i = 0; i < sizeof(common_ops) / sizeof(common_ops[0]); i++)
		if (!strcmp(common_ops[i], ir_ops[op].name) && !*ir_ops[op].domain)
			return (int)i;
	return 100000;
}

static int cmp_rank(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	int rx = op_rank(x), ry = op_rank(y);
	if (rx != ry)
		return rx < ry ? -1 : 1;
	int c = strcmp(ir_ops[x].domain, ir_ops[y].domain);
	return c ? c : strcmp(op_type(x), op_type(y));
}

static bool has_gpu_kernel(int op)
{
#ifdef OGSH_HAVE_CUDA
	return cuda_kernel_find(op) != NULL;
#else
	(void)op;
	return false;
#endif
}

static bool has_cases(int op)
{
	for (int i = 0; i < N_SPECS; i++) {
		const char *c = strchr(specs[i].op, ':');
		const char *name = c ? c + 1 : specs[i].op;
		if (!strcmp(name, op_type(op)) && (c ? !strncmp(specs[i].op, ir_ops[op].domain, (size_t)(c - specs[i].op)) &&
							      !ir_ops[op].domain[(size_t)(c - specs[i].op)]
							    : !*ir_ops[op].domain))
			return true;
	}
	return false;
}

static int coverage(void)
{
	int missing[IR_OP_COUNT], n = 0, n_gpu = 0;
	for (int op = 0; op < IR_OP_COUNT; op++) {
		if (has_gpu_kernel(op))
			n_gpu++;
		else if (cpu_kernel(op))
			missing[n++] = op;
	}
	qsort(missing, (size_t)n, sizeof(int), cmp_rank);
	printf("%d ops have a GPU kernel. %d ops run on the CPU and not on the GPU, most common in models first\n"
	       "(ranking: a fixed list of op types by how many ONNX Model Zoo / Hugging Face models use them,\n"
	       "in tests/gpu/test_backend_ops.c; unlisted ops follow by name):\n", n_gpu, n);
	for (int i = 0; i < n; i++)
		printf("  %s%s%s%s\n", ir_ops[missing[i]].domain, *ir_ops[missing[i]].domain ? ":" : "", op_type(missing[i]),
		       has_cases(missing[i]) ? "  (has test cases here)" : "");
	int untested = 0;
	for (int op = 0; op < IR_OP_COUNT; op++)
		if (has_gpu_kernel(op) && !has_cases(op)) {
			if (!untested++)
				printf("GPU kernels without a case in this test:\n");
			printf("  %s%s%s\n", ir_ops[op].domain, *ir_ops[op].domain ? ":" : "", op_type(op));
		}
	if (!untested)
		printf("Every GPU kernel has cases in this test.\n");
	return 0;
}

/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: test_backend_ops [--filter REGEX] [--verbose] [--cpu-only] [--coverage]\n"
		   "  every GPU kernel against the CPU reference on one-node models;\n"
		   "  --filter keeps cases whose label (\"Op dtype shapes {attrs}\") matches a POSIX extended regex;\n"
		   "  --cpu-only runs only the CPU half (checks the case table without a GPU);\n"
		   "  --coverage lists the ops the CPU runs and the GPU does not.\n"
		   "exit: 0 all passed, 1 a failure, 77 no GPU (or built without CUDA)\n");
}

int main(int argc, char **argv)
{
	const char *filter = NULL;
	bool verbose = false, cpu_only = false, cov = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--filter") && i + 1 < argc)
			filter = argv[++i];
		else if (!strncmp(argv[i], "--filter=", 9))
			filter = argv[i] + 9;
		else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v"))
			verbose = true;
		else if (!strcmp(argv[i], "--cpu-only"))
			cpu_only = true;
		else if (!strcmp(argv[i], "--coverage"))
			cov = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (cov)
		return coverage();
	regex_t re;
	if (filter && regcomp(&re, filter, REG_EXTENDED | REG_NOSUB)) {
		fprintf(stderr, "test_backend_ops: bad --filter '%s'\n", filter);
		return 2;
	}
#ifdef OGSH_HAVE_CUDA
	if (!cpu_only) {
		char why[256];
		if (!gpu_init(why, sizeof(why))) {
			printf("test_backend_ops: skipped: %s\n", why);
			return 77;
		}
	}
#else
	if (!cpu_only) {
		printf("test_backend_ops: skipped: ogsh was built without CUDA\n");
		return 77;
	}
#endif
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGALRM, on_signal);

	int n_cases = 0, n_pass = 0, n_fail = 0, n_skip = 0, n_nokernel = 0, n_ops = 0;
	bool op_seen[IR_OP_COUNT];
	memset(op_seen, 0, sizeof(op_seen));
	for (int si = 0; si < N_SPECS; si++) {
		const struct spec *sp = &specs[si];
		int dts[16], n_dts = 0;
		for (const char *p = sp->dts; *p;) {
			size_t l = strcspn(p, " ");
			if (l == 1 && *p == 'F') {
				dts[n_dts++] = IR_FLOAT;
				dts[n_dts++] = IR_FLOAT16;
				dts[n_dts++] = IR_BFLOAT16;
			} else if (l) {
				dts[n_dts++] = dtype_of(p, l);
			}
			p += l;
			while (*p == ' ')
				p++;
		}
		int nv = 1;
		for (int i = 0; i < MAXIN && sp->in[i]; i++)
			if (n_alts(sp->in[i]) > nv)
				nv = n_alts(sp->in[i]);
		for (int di = 0; di < n_dts; di++)
			for (int v = 0; v < nv; v++) {
				struct tcase c;
				char why[512] = "";
				rng_state = 0x9E3779B97F4A7C15ull ^ ((uint64_t)si << 32) ^ ((uint64_t)v << 16) ^ (uint64_t)dts[di];
				if (!case_build(&c, sp, v, dts[di], why, sizeof(why))) {
					printf("FAIL %s (spec %d, variant %d): bad case: %s\n", sp->op, si, v, why);
					n_cases++;
					n_fail++;
					case_clear(&c);
					continue;
				}
				if (filter && regexec(&re, c.label, 0, NULL, 0)) {
					case_clear(&c);
					continue;
				}
				current = c.label;
#ifdef OGSH_HAVE_CUDA
				const struct cuda_kernel *kern = cpu_only ? NULL : cuda_kernel_find(c.node->op);
				if (!cpu_only && !kern) {
					n_nokernel++;
					case_clear(&c);
					continue;
				}
#endif
				if (!op_seen[c.node->op]) {
					op_seen[c.node->op] = true;
					n_ops++;
				}
				n_cases++;
				alarm(120);
				struct ir_diag d;
				ir_diag_init(&d);
				struct exec_opts o = { 0 };
				if (exec_run(c.m, &c.feeds, &o, &c.want, NULL, NULL, &d)) {
					printf("FAIL %s: cpu reference: %s\n", c.label, d.error ? d.error : "failed");
					n_fail++;
					ir_diag_clear(&d);
					case_clear(&c);
					continue;
				}
				ir_diag_clear(&d);
				bool ok_outs = c.want.n == c.n_out;
				for (int j = 0; j < c.want.n; j++)
					ok_outs = ok_outs && c.want.a[j].v.kind == KV_TENSOR;
				if (!ok_outs) {
					printf("FAIL %s: the cpu reference gave %d outputs, not %d tensors\n", c.label, c.want.n, c.n_out);
					n_fail++;
					case_clear(&c);
					continue;
				}
				if (cpu_only) {
#ifdef OGSH_HAVE_CUDA
					const struct cuda_kernel *ck = cuda_kernel_find(c.node->op);
					char sw[256];
					if ((sp->flags & MUST_ALL) && ck && ck->supports && !cpu_only_supports(&c, ck, sw, sizeof(sw))) {
						printf("FAIL %s: must be supported, but: %s\n", c.label, *sw ? sw : "supports() gave no reason");
						n_fail++;
						case_clear(&c);
						continue;
					}
#endif
					n_pass++;
					if (verbose) {
						char dims[128];
						const struct ir_tensor *y = c.want.a[0].v.t;
						printf("ok   %s -> %s%s\n", c.label, short_name(y->dtype), ir_dims_str(y->rank, y->dims, dims, sizeof(dims)));
					}
					case_clear(&c);
					continue;
				}
#ifdef OGSH_HAVE_CUDA
				char msg[1024] = "";
				enum result r = gpu_case(&c, kern, &c.want, 0, msg, sizeof(msg));
				if (r == R_PASS && !impl_ok(sp->impl, msg)) {
					impl_msg(sp->impl, msg, sizeof(msg));
					r = R_FAIL;
				}
				/* the channels-last layouts the planner may give the node */
				int lays = r == R_PASS ? layouts_of(&c) : 0;
				static const int tries[] = { L_X, L_Y, L_X | L_Y };
				for (size_t li = 0; li < sizeof(tries) / sizeof(tries[0]); li++) {
					int lay = tries[li];
					if ((lay & lays) != lay)
						continue;
					char m2[1024] = "";
					n_cases++;
					enum result r2 = gpu_case(&c, kern, &c.want, lay, m2, sizeof(m2));
					if (r2 == R_PASS && lay == L_Y && !impl_ok(sp->impl, m2)) {
						impl_msg(sp->impl, m2, sizeof(m2));
						r2 = R_FAIL;
					}
					const char *ln = lay == L_X ? "nhwc in" : lay == L_Y ? "nhwc out" : "nhwc";
					if (r2 == R_FAIL) {
						n_fail++;
						printf("FAIL %s [%s]: %s\n", c.label, ln, m2);
					} else if (r2 == R_SKIP) {
						n_skip++;
						printf("skip %s [%s]: %s\n", c.label, ln, m2);
					} else {
						n_pass++;
						if (verbose)
							printf("ok   %s [%s] (%s)\n", c.label, ln, m2);
					}
				}
				bool must = ((sp->flags & MUST_F32) && c.dtype == IR_FLOAT && v == 0) || (sp->flags & MUST_ALL);
				if (r == R_SKIP && must) {
					printf("FAIL %s: must be supported, but: %s\n", c.label, msg);
					n_fail++;
				} else if (r == R_SKIP) {
					n_skip++;
					printf("skip %s: %s\n", c.label, msg);
				} else if (r == R_FAIL) {
					n_fail++;
					printf("FAIL %s: %s\n", c.label, msg);
				} else {
					n_pass++;
					if (verbose)
						printf("ok   %s (%s)\n", c.label, msg);
				}
#endif
				alarm(0);
				case_clear(&c);
			}
	}
	alarm(0);
	current = "";
	printf("%d ops, %d cases: %d passed, %d failed, %d skipped%s\n", n_ops, n_cases, n_pass, n_fail, n_skip,
	       cpu_only ? " (cpu only)" : "");
	if (n_nokernel)
		printf("(%d cases of ops without a GPU kernel were not run: see --coverage)\n", n_nokernel);
	if (filter)
		regfree(&re);
	exec_cache_clear();
	return n_fail ? 1 : 0;
}
