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

#endif
