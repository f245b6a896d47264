/*
 * extdata.h - external tensor data (private to ir/).
 */
#ifndef OGSH_IR_EXTDATA_H
#define OGSH_IR_EXTDATA_H

#include "ir_private.h"

#include <strings.h>

struct ext_file {
	char *location;            /* points into map->path */
	struct ir_mapping *map;
	bool checked;              /* sha1 computed */
	char sha1[41];             /* SHA-1 of the whole file, hex */
};

/* The external files one load has opened, resolved inside `dirfd`. */
struct ext_cache {
	int dirfd;                 /* the model's folder; -1: external data refused */
	struct ext_file *files;
	size_t n, cap;
};

struct ext_file *ext_open(struct ext_cache *c, const char *location, struct ir_diag *d);
void ext_cache_clear(struct ext_cache *c);
/* Checks the external_data keys of a tensor needing `nbytes` and returns a
 * buffer over the mapped bytes (NULL for 0 bytes). */
int ext_resolve(struct ext_cache *c, const struct ir_kv *keys, size_t n, uint64_t nbytes,
		struct ir_buffer **out, char **location_out, uint64_t *offset_out, struct ir_diag *d);

#endif
