/*
 * cse.c - the cse pass: common subexpression elimination. Initializers
 * holding the same tensor are merged, then nodes that compute the same
 * thing from the same inputs.
 *
 * Linear time: every initializer and every node is hashed once into an
 * open-addressing table and compared in full only with the entries whose
 * hash is the same. Nodes are visited in topological order, and a merged
 * node's readers read the kept node's outputs at once, so the nodes after
 * it hash with the kept inputs and chains of duplicates merge in one walk.
 */
#include "passes/pass.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Hashing                                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 33);
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i = 0;
	uint64_t acc = 0xcbf29ce484222325ULL ^ n;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		acc = (acc ^ w) * 0x100000001b3ULL;
		acc ^= acc >> 29;
	}
	for (; i < n; i++)
		acc = (acc ^ s[i]) * 0x100000001b3ULL;
	return mix(h, acc);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	return s ? hash_bytes(h, s, strlen(s)) : mix(h, 7);
}

static uint64_t hash_shape(const struct ir_tensor *t)
{
	uint64_t h = mix((uint64_t)t->dtype, (uint64_t)t->rank);
	for (int i = 0; i < t->rank; i++)
		h = mix(h, (uint64_t)t->dims[i]);
	return mix(h, t->nbytes);
}

static uint64_t hash_tensor(const struct ir_tensor *t)
{
	uint64_t h = hash_shape(t);
	if (t->dtype == IR_STRING) {
		for (uint64_t i = 0; i < t->numel; i++)
			h = hash_bytes(h, t->strings[i].data ? t->strings[i].data : "", t->strings[i].len);
	} else if (t->nbytes && ir_tensor_data(t)) {
		const unsigned char *p = ir_tensor_data(t);
		size_t n = t->nbytes;
		if (n <= 8192) {
			h = hash_bytes(h, p, n);
		} else {
			/* big weights: a sample (both ends and 64 places between) puts
			 * them in buckets; equality is still checked on every byte */
			h = hash_bytes(h, p, 1024);
			h = hash_bytes(h, p + n - 1024, 1024);
			for (size_t k = 1; k <= 64; k++)
				h = hash_bytes(h, p + (n - 16) / 65 * k, 16);
		}
	}
	return h;
}

/* A table of pointers by hash (open addressing, linear probing, never full). */
struct table {
	uint64_t *hash;
	void **item;
	size_t mask;
};

static int table_init(struct table *t, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n + 2)
		cap *= 2;
	t->hash = calloc(cap, sizeof(*t->hash));
	t->item = calloc(cap, sizeof(*t->item));
	t->mask = cap - 1;
	return t->hash && t->item ? 0 : IR_ENOMEM;
}

static void table_free(struct table *t)
{
	free(t->hash);
	free(t->item);
}

/*
 * Looks for an item equal to `x` (same hash, then eq()); when none is,
 * puts x in and returns NULL.
 */
static void *table_find_or_add(struct table *t, uint64_t h, void *x, bool (*eq)(const void *, const void *))
{
	size_t i = (size_t)h & t->mask;
	for (; t->item[i]; i = (i + 1) & t->mask)
		if (t->hash[i] == h && eq(t->item[i], x))
			return t->item[i];
	t->item[i] = x;
	t->hash[i] = h;
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Initializers                                                              */
/* ------------------------------------------------------------------------ */

static bool init_eq(const void *a, const void *b)
{
	return ir_tensor_equal(((const struct ir_value *)a)->init, ((const struct ir_value *)b)->init);
}

static bool shape_eq(const void *a, const void *b)
{
	const struct ir_tensor *x = ((const struct ir_value *)a)->init, *y = ((const struct ir_value *)b)->init;
	return x->dtype == y->dtype && x->rank == y->rank && x->nbytes == y->nbytes &&
	       (!x->rank || !memcmp(x->dims, y->dims, sizeof(int64_t) * (size_t)x->rank));
}

/* Whether an initializer may be merged away or kept for another: a constant of this graph, not the interface. */
static bool plain_init(const struct ir_value *v)
{
	return v->init && !v->sparse_init && !v->is_input && !v->is_output && !v->outer &&
	       !ir_tensor_check(v->init, NULL);
}

/*
 * Merges initializers holding the same tensor. Only tensors whose dtype
 * and dims another one shares get their bytes hashed. The merged ones are
 * taken out of g->inits in one sweep (removing them one by one would scan
 * the list each time).
 */
static int merge_inits(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	int n = g->n_inits;
	if (n < 2)
		return 0;
	struct table shapes, same;
	uint64_t *sh = malloc(sizeof(uint64_t) * (size_t)n);
	bool *dup = calloc((size_t)n, sizeof(bool));
	if (!sh || !dup || table_init(&shapes, (size_t)n) || table_init(&same, (size_t)n)) {
		free(sh);
		free(dup);
		table_free(&shapes);
		table_free(&same);
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	}
	/* first: which shapes occur twice (the first of each shape is in `shapes`; a second one marks it) */
	for (int i = 0; i < n; i++) {
		struct ir_value *v = g->inits[i];
		if (!plain_init(v))
			continue;
		sh[i] = hash_shape(v->init);
		struct ir_value *first = table_find_or_add(&shapes, sh[i], v, shape_eq);
		if (first)
			first->mark = 1, v->mark = 1;
	}
	int merged = 0;
	double saved = 0;
	for (int i = 0; i < n; i++) {
		struct ir_value *v = g->inits[i];
		if (!plain_init(v) || !v->mark)
			continue;
		struct ir_value *keep = table_find_or_add(&same, hash_tensor(v->init), v, init_eq);
		if (!keep)
			continue;
		char tb[160], db[96], bb[64];
		snprintf(tb, sizeof(tb), "%s%s", ir_dtype_name(v->init->dtype),
			 ir_dims_str(v->init->rank, v->init->dims, db, sizeof(db)));
		/* (only v's readers move: whether keep is read in a subgraph does not matter, and keep may have many readers) */
		if (pass_read_in_subgraph(v)) {
			pass_rejected(c, NULL, "initializer '%s' holds the same %s as '%s', but '%s' is read inside a "
				      "subgraph: left alone", v->name, tb, keep->name, v->name);
			continue;
		}
		ir_value_replace_uses(v, keep);
		dup[i] = true;
		merged++;
		saved += (double)v->init->nbytes;
		pass_rewrote(c, NULL, "initializer '%s' holds the same %s as '%s' (%s): its readers read '%s'", v->name, tb,
			     keep->name, pass_bytes_text((double)v->init->nbytes, bb, sizeof(bb)), keep->name);
	}
	for (int i = 0; i < n; i++)
		g->inits[i]->mark = 0;
	/* take the merged ones out of the list, then drop them */
	struct ir_value **gone = malloc(sizeof(*gone) * (size_t)(merged ? merged : 1));
	int k = 0, ng = 0;
	if (!gone) {
		merged = 0;   /* leave them: unread initializers, prune-initializers' business */
	} else {
		for (int i = 0; i < n; i++) {
			if (dup[i])
				gone[ng++] = g->inits[i];
			else
				g->inits[k++] = g->inits[i];
		}
		g->n_inits = k;
		for (int i = 0; i < ng; i++) {
			ir_tensor_unref(gone[i]->init);
			gone[i]->init = NULL;
			ir_value_remove(gone[i]);
		}
	}
	free(gone);
	if (merged) {
		char bb[64];
		pass_note(c, NULL, "merged %d initializer%s, %s less", merged, merged > 1 ? "s" : "",
			  pass_bytes_text(saved, bb, sizeof(bb)));
	}
	free(sh);
	free(dup);
	table_free(&shapes);
	table_free(&same);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Nodes                                                                     */
/* ------------------------------------------------------------------------ */

static const char *dom(const char *d)
{
	return !d || !strcmp(d, "ai.onnx") ? "" : d;
}

/* Whether the node's attributes are all of kinds this pass compares. */
static bool comparable(const struct ir_node *n)
{
	if (n->n_implicit)
		return false;
	for (int i = 0; i < n->n_attrs; i++) {
		const struct ir_attr *a = &n->attrs[i];
		if (a->ref_attr_name)
			return false;
		switch (a->type) {
		case IR_ATTR_FLOAT: case IR_ATTR_INT: case IR_ATTR_STRING: case IR_ATTR_FLOATS:
		case IR_ATTR_INTS: case IR_ATTR_STRINGS:
			break;
		case IR_ATTR_TENSOR:
			if (!a->t || ir_tensor_check(a->t, NULL))
				return false;
			break;
		case IR_ATTR_TENSORS:
			for (size_t k = 0; k < a->n; k++)
				if (!a->tensors[k] || ir_tensor_check(a->tensors[k], NULL))
					return false;
			break;
		default:
			return false;   /* graphs, sparse tensors, type protos */
		}
	}
	return true;
}

static uint64_t hash_attr(const struct ir_attr *a)
{
	uint64_t h = hash_str(mix(0, (uint64_t)a->type), a->name);
	switch (a->type) {
	case IR_ATTR_FLOAT: return hash_bytes(h, &a->f, sizeof(a->f));
	case IR_ATTR_INT: return mix(h, (uint64_t)a->i);
	case IR_ATTR_STRING: return hash_bytes(h, a->s.data ? a->s.data : "", a->s.len);
	case IR_ATTR_FLOATS: return hash_bytes(h, a->floats ? (const void *)a->floats : "", a->n * sizeof(float));
	case IR_ATTR_INTS: return hash_bytes(h, a->ints ? (const void *)a->ints : "", a->n * sizeof(int64_t));
	case IR_ATTR_STRINGS:
		for (size_t k = 0; k < a->n; k++)
			h = hash_bytes(h, a->strings[k].data ? a->strings[k].data : "", a->strings[k].len);
		return h;
	case IR_ATTR_TENSOR: return mix(h, hash_tensor(a->t));
	case IR_ATTR_TENSORS:
		for (size_t k = 0; k < a->n; k++)
			h = mix(h, hash_tensor(a->tensors[k]));
		return h;
	default: return h;
	}
}

static uint64_t hash_node(const struct ir_node *n)
{
	uint64_t h = hash_str(hash_str(hash_str(1, n->op_type), dom(n->domain)), n->overload ? n->overload : "");
	h = mix(h, (uint64_t)n->n_inputs);
	h = mix(h, (uint64_t)n->n_outputs);
	for (int i = 0; i < n->n_inputs; i++)
		h = mix(h, (uint64_t)(uintptr_t)n->inputs[i]);
	uint64_t ah = 0;   /* attributes in any order: a sum */
	for (int i = 0; i < n->n_attrs; i++)
		ah += hash_attr(&n->attrs[i]);
	return mix(h, ah);
}

static bool bytes_eq(const struct ir_bytes *a, const struct ir_bytes *b)
{
	return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

static bool attr_eq(const struct ir_attr *a, const struct ir_attr *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case IR_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof(a->f));
	case IR_ATTR_INT: return a->i == b->i;
	case IR_ATTR_STRING: return bytes_eq(&a->s, &b->s);
	case IR_ATTR_FLOATS: return a->n == b->n && (!a->n || !memcmp(a->floats, b->floats, a->n * sizeof(float)));
	case IR_ATTR_INTS: return a->n == b->n && (!a->n || !memcmp(a->ints, b->ints, a->n * sizeof(int64_t)));
	case IR_ATTR_STRINGS:
		if (a->n != b->n)
			return false;
		for (size_t k = 0; k < a->n; k++)
			if (!bytes_eq(&a->strings[k], &b->strings[k]))
				return false;
		return true;
	case IR_ATTR_TENSOR: return ir_tensor_equal(a->t, b->t);
	case IR_ATTR_TENSORS:
		if (a->n != b->n)
			return false;
		for (size_t k = 0; k < a->n; k++)
			if (!ir_tensor_equal(a->tensors[k], b->tensors[k]))
				return false;
		return true;
	default: return false;
	}
}

static bool node_eq(const void *pa, const void *pb)
{
	const struct ir_node *a = pa, *b = pb;
	if (a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs || a->n_attrs != b->n_attrs ||
	    strcmp(a->op_type, b->op_type) || strcmp(dom(a->domain), dom(b->domain)) ||
	    strcmp(a->overload ? a->overload : "", b->overload ? b->overload : ""))
		return false;
	for (int i = 0; i < a->n_inputs; i++)
		if (a->inputs[i] != b->inputs[i])
			return false;
	for (int i = 0; i < a->n_attrs; i++) {
		const struct ir_attr *y = ir_node_attr(b, a->attrs[i].name);
		if (!y || !attr_eq(&a->attrs[i], y))
			return false;
	}
	return true;
}

/* Why n (equal to `keep`) cannot be merged into it, or NULL. */
static const char *cannot_merge(const struct ir_node *n, const struct ir_node *keep, char *why, size_t size)
{
	if (n->op == IR_OP_UNKNOWN) {
		snprintf(why, size, "'%s' is not an op ogsh knows: it may not give the same output twice", n->op_type);
		return why;
	}
	if (ir_ops[n->op].flags & IR_OPF_RANDOM) {
		snprintf(why, size, "%s is random: two of them draw different numbers", n->op_type);
		return why;
	}
	for (int i = 0; i < n->n_outputs; i++) {
		const struct ir_value *v = n->outputs[i];
		if (!v || !pass_n_readers(v))
			continue;
		if (!keep->outputs[i]) {
			snprintf(why, size, "its output '%s' is used but the other node does not compute output %d", v->name, i);
			return why;
		}
		if (v->is_output) {
			snprintf(why, size, "its output '%s' is a graph output: merging would change the output's name", v->name);
			return why;
		}
		if (pass_read_in_subgraph(v)) {
			snprintf(why, size, "its output '%s' is read inside a subgraph", v->name);
			return why;
		}
	}
	return NULL;
}

static int merge_nodes(struct pass_ctx *c)
{
	struct ir_graph *g = c->m->graph;
	struct table t;
	if (table_init(&t, (size_t)g->n_nodes)) {
		table_free(&t);
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	}
	int rc = 0;
	for (struct ir_node *n = g->first, *next; n; n = next) {
		next = n->next;
		if (ir_interrupted) {
			rc = ir_diag_err(c->d, IR_EINTR, "stopped");
			break;
		}
		if (n->n_outputs < 1 || !comparable(n))
			continue;
		struct ir_node *keep = table_find_or_add(&t, hash_node(n), n, node_eq);
		if (!keep)
			continue;
		char kb[64], why[400];
		pass_node_name(keep, kb, sizeof(kb));
		if (cannot_merge(n, keep, why, sizeof(why))) {
			pass_rejected(c, n, "computes the same as '%s', but %s", kb, why);
			continue;
		}
		/* the report names the node after it is gone: keep its name and id */
		char self[256], op[64], outs[300] = "";
		snprintf(self, sizeof(self), "%s", n->name ? n->name : "");
		struct ir_node who = { .id = n->id, .name = self };
		snprintf(op, sizeof(op), "%s", n->op_type);
		size_t o = 0;
		for (int i = 0; i < n->n_outputs; i++) {
			struct ir_value *v = n->outputs[i];
			if (!v || !pass_n_readers(v))
				continue;
			if (o < sizeof(outs))
				o += (size_t)snprintf(outs + o, sizeof(outs) - o, "%s'%s'", o ? ", " : "", keep->outputs[i]->name);
			ir_value_replace_uses(v, keep->outputs[i]);
		}
		if ((rc = ir_node_remove(n, c->d)))
			break;
		pass_rewrote(c, &who, "%s with the same attributes and inputs as '%s': its readers read %s", op, kb,
			     *outs ? outs : "nothing");
	}
	table_free(&t);
	return rc;
}

static int run(struct pass_ctx *c)
{
	int rc = merge_inits(c);
	if (rc)
		return rc;
	return merge_nodes(c);
}

const struct pass pass_cse = {
	.name = "cse",
	.summary = "merge nodes that compute the same thing, and initializers that hold the same tensor",
	.explain =
		"Common subexpression elimination. Two nodes with the same op (and domain), the same attributes "
		"and the same inputs in the same order compute the same outputs, since ONNX ops are functions of "
		"their inputs. The first one is kept; the readers of the second read the first one's outputs and "
		"the second goes. Exporters make such duplicates often: the same Shape(x) taken in every layer, "
		"the same mask built twice.\n\n"
		"Initializers that hold the same tensor (same element type, dims and bytes) are merged first, so "
		"that nodes reading two copies of one weight become duplicates too. Initializers listed as graph "
		"inputs are part of the interface and stay.\n\n"
		"Not merged: random ops (two RandomNormal nodes draw different numbers), ops ogsh does not know "
		"(they might not be functions of their inputs), nodes with subgraphs, and a node whose output is "
		"a graph output (its readers would see another name, and the model's interface would change). "
		"The report says which.\n\n"
		"The pass hashes each node once (op, attributes, and the identity of its inputs) and compares in "
		"full only nodes whose hashes agree, walking the graph in order: once a duplicate is merged, the "
		"nodes after it read the kept values, so whole duplicated chains merge in one walk, in linear time. "
		"Only the main graph is rewritten.",
	.level = PASS_LEVEL_BASIC,
	.run = run,
};
