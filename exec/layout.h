/*
 * layout.h - which activations a GPU plan stores channels-last: the rules
 * of exec/plan.c's layout plan, on plain arrays so that they build and are
 * tested without CUDA (tests/unit/test_layout.c). Internal to exec/,
 * like exec_private.h: exec/exec.h stays the layer's public header.
 *
 * A 4-D float16/bfloat16 value [N, C, H, W] is stored as [N, H, W, C]
 * when its producer and every reader take that: Conv and FusedConv take
 * either layout on X and on Y (FusedConv's Z shares Y's); MaxPool,
 * AveragePool and elementwise ops whose operands all have the output's
 * shape (or one element) keep one layout for those and the output; global
 * pools read either and write NCHW; any other op, a node on the CPU and the
 * graph's outputs read NCHW.
 */
#ifndef OGSH_EXEC_LAYOUT_H
#define OGSH_EXEC_LAYOUT_H

#include "exec/exec.h"
#include "ir/ir.h"

#include <stdbool.h>
#include <stdint.h>

/* What the rules know of a value of the main graph (indexed by v->idx). */
struct layout_val {
	bool act;                    /* computed by a node at run time (not an input, initializer or folded) */
	bool typed;                  /* dtype and every dim known */
	int dtype, rank;
	int64_t dims[IR_MAX_RANK];
	bool nhwc;                   /* in/out: stored channels-last */
};

/*
 * Marks the candidates (4-D float16/bfloat16 outputs of a GPU conv, pool or
 * elementwise op that are not graph outputs) and applies the rules until
 * nothing changes. place[] is per node in graph order. Returns how many
 * values stay channels-last.
 */
int exec_layout_plan(const struct ir_graph *g, const enum exec_place *place, struct layout_val *vals);

/* Applies the rules until nothing changes (after exec_layout_refuse). */
void exec_layout_settle(const struct ir_graph *g, const enum exec_place *place, struct layout_val *vals);

/* A kernel refused its layouts: every value n reads or writes goes back to
 * NCHW. Whether any was channels-last. */
bool exec_layout_refuse(const struct ir_node *n, struct layout_val *vals);

#endif
