/*
 * pass.h - graph rewrites. The only public header of passes/.
 *
 * Hand edits live here because they are rewrites a person asks for; the
 * pass registry and the stage history build on the same mutators.
 */
#ifndef OGSH_PASS_H
#define OGSH_PASS_H

#include "ir/ir.h"

/*
 * Removes node `n` from `g`. A node whose outputs are unused just goes.
 * Otherwise it must have one data input (the others constant or omitted)
 * and one used output: its consumers then read the data input instead. If
 * that output was a graph output, the data input takes over its name and
 * declared type, so the model's interface does not change. Warnings (a
 * type change seen by the consumers) go to `d`. Returns 0 or IR_ERR with
 * the reason; on error nothing changed.
 */
int pass_remove_node(struct ir_graph *g, struct ir_node *n, struct ir_diag *d);

#endif
