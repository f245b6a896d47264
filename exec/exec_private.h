/*
 * exec_private.h - what the files of exec/ share and nobody else uses.
 */
#ifndef OGSH_EXEC_PRIVATE_H
#define OGSH_EXEC_PRIVATE_H

#include "exec/exec.h"

/* How errors name a node: "n17 'Conv' (conv1)", or "n17 'Conv'" without a name. */
void exec_node_label(const struct ir_node *n, char *buf, size_t size);

/* Reads the whole regular file at path (at most max bytes, else an error
 * naming the limit) into *data (malloc'd) and *size (inputs.c). */
int exec_read_whole(const char *path, size_t max, unsigned char **data, size_t *size, struct ir_diag *d);

/*
 * Runs node n of m (a node of m's main graph) once on the CPU reference,
 * its subgraphs included (If, Loop, Scan, SequenceMap): in holds
 * n->n_inputs values and implicit n->n_implicit (the values of n's graph
 * its subgraphs read, in n->implicit's order), both borrowed, KV_NONE for
 * an absent optional one. Fills out (n->n_outputs entries; the caller owns
 * them and clears them). For the GPU planner's CPU nodes (plan.c). 0, or
 * an error code with the message in d, which does not name the node.
 */
int exec_run_node(const struct ir_model *m, struct ir_node *n, const struct kern_value *in,
		  const struct kern_value *implicit, struct kern_value *out, struct ir_diag *d);

#endif
