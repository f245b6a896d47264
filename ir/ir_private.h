/*
 * ir_private.h - helpers shared by the files of ir/ only.
 */
#ifndef OGSH_IR_PRIVATE_H
#define OGSH_IR_PRIVATE_H

#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* Allocation helpers: NULL on failure (never abort). */
char *ir_strdup(const char *s);            /* NULL -> NULL */
char *ir_strndup(const char *s, size_t n);
void *ir_alloc_array(size_t n, size_t size);   /* zeroed; overflow-checked */
/* Grows *arr (element `size`) so that index `need-1` fits; 0 or IR_ENOMEM. */
int ir_grow(void *arr, size_t *cap, size_t need, size_t size);
bool ir_mul_overflow(uint64_t a, uint64_t b, uint64_t *out);


/* printf into a fresh string. */
char *ir_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copies of small owned arrays. */
int ir_kv_copy(struct ir_kv **dst, size_t *n_dst, const struct ir_kv *src, size_t n);
void ir_kv_free(struct ir_kv *kv, size_t n);
int ir_bytes_set(struct ir_bytes *b, const void *data, size_t len);
void ir_bytes_free_array(struct ir_bytes *b, size_t n);
int ir_bytes_copy_array(struct ir_bytes **dst, const struct ir_bytes *src, size_t n);
bool ir_str_eq(const char *a, const char *b);   /* NULL-safe */

/* String map (open addressing). Keys are not copied: they must outlive
 * their entry (they point at the owner's name). */
struct ir_map *ir_map_new(size_t hint);
void ir_map_free(struct ir_map *m);
void *ir_map_get(const struct ir_map *m, const char *key);
int ir_map_put(struct ir_map *m, const char *key, void *val);   /* replaces */
void ir_map_del(struct ir_map *m, const char *key);
size_t ir_map_count(const struct ir_map *m);

/* Graph internals used by load and clone. */
int ir_graph_register_value(struct ir_graph *g, struct ir_value *v, struct ir_diag *d);
struct ir_node *ir_node_alloc_id(struct ir_graph *g, int id);
int ir_use_add(struct ir_value *v, struct ir_node *n, int slot);
void ir_use_del(struct ir_value *v, struct ir_node *n, int slot);
void ir_value_free(struct ir_value *v);
void ir_node_free(struct ir_node *n);

/* The calibration cache file's text for c (calib.c; ir_calib_save writes it, the fuzz target reads it back). */
void ir_calib_write(FILE *f, const struct ir_calib *c);

/* SHA-1 of a byte range (external data checksums). */
void ir_sha1(const void *data, size_t len, unsigned char out[20]);

#endif
