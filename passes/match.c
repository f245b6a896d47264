/*
 * match.c - helpers for matching and rewriting patterns, shared by the
 * passes (declared in pass.h).
 */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n is op `op` with exactly n_in inputs, all given, and a first output. */
bool pass_is_op(const struct ir_node *n, int op, int n_in)
{
	if (!n || n->op != op || n->n_inputs != n_in || n->n_outputs < 1 || !n->outputs[0])
		return false;
	for (int i = 0; i < n_in; i++)
		if (!n->inputs[i])
			return false;
	return true;
}

struct ir_node *pass_producer(const struct ir_value *v)
{
	return v ? v->producer : NULL;
}

/* The other input of a two-input node, or NULL when v is not one of them (or both). */
struct ir_value *pass_other_input(const struct ir_node *n, const struct ir_value *v)
{
	if (n->n_inputs != 2)
		return NULL;
	if (n->inputs[0] == v && n->inputs[1] != v)
		return n->inputs[1];
	if (n->inputs[1] == v && n->inputs[0] != v)
		return n->inputs[0];
	return NULL;
}

int pass_rank_of(const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	return t && t->kind == IR_TYPE_TENSOR ? t->rank : -1;
}

/*
 * Whether v is a constant float scalar (one element) that cannot change the
 * shape of a value of rank `rank` it is combined with (rank -1: unknown, then
 * only a 0-d constant will do). Its value goes to *out.
 */
bool pass_const_scalar(const struct ir_value *v, int rank, double *out)
{
	if (!v || v->is_input)
		return false;
	const struct ir_tensor *t = ir_value_const(v);
	if (!t || t->numel != 1 || !ir_dtype_is_float(t->dtype) || !ir_tensor_data(t))
		return false;
	if (t->rank > 0 && (rank < 0 || t->rank > rank))
		return false;
	*out = ir_tensor_get_f64(t, 0);
	return true;
}

/* The only node reading v through an input slot, or NULL with why. */
struct ir_node *pass_sole_reader(const struct ir_value *v, char *why, size_t size)
{
	struct ir_node *r = pass_only_reader(v);
	if (r)
		return r;
	if (v->is_output)
		snprintf(why, size, "'%s' is also a graph output", v->name);
	else if (v->n_uses == 0)
		snprintf(why, size, "nothing reads '%s'", v->name);
	else if (v->n_uses == 1)
		snprintf(why, size, "'%s' is read by a subgraph", v->name);
	else
		snprintf(why, size, "'%s' has %zu readers", v->name, v->n_uses);
	return NULL;
}

/* A name for a new node: the anchor's scope ("/a/b/Erf" -> "/a/b/Gelu") or "<anchor>_<op>", unique. */
char *pass_new_node_name(const struct ir_graph *g, const struct ir_node *anchor, const char *op)
{
	const char *nm = anchor->name ? anchor->name : "";
	const char *slash = strrchr(nm, '/');
	size_t n = strlen(nm) + strlen(op) + 32;
	char *base = malloc(n), *s = malloc(n);
	if (!base || !s) {
		free(base);
		free(s);
		return NULL;
	}
	if (slash)
		snprintf(base, n, "%.*s/%s", (int)(slash - nm), nm, op);
	else if (*nm)
		snprintf(base, n, "%s_%s", nm, op);
	else
		snprintf(base, n, "%s", op);
	snprintf(s, n, "%s", base);
	int count = 0;
	for (unsigned k = 1; ir_node_by_name(g, s, &count) && count; k++)
		snprintf(s, n, "%s_%u", base, k);
	free(base);
	return s;
}

/* Appends one name to n->from (nothing when out of memory). */
static void from_add(struct ir_node *n, const char *name)
{
	for (int i = 0; i < n->n_from; i++)
		if (!strcmp(n->from[i], name))
			return;
	char **a = realloc(n->from, sizeof(char *) * (size_t)(n->n_from + 1));
	if (!a)
		return;
	n->from = a;
	if ((a[n->n_from] = strdup(name)))
		n->n_from++;
}

/* Appends what node m was made from: its own provenance when it was made
 * by an earlier fusion, else its name. */
void pass_add_from(struct ir_node *n, const struct ir_node *m)
{
	if (m->n_from) {
		for (int i = 0; i < m->n_from; i++)
			from_add(n, m->from[i]);
		return;
	}
	char nb[64];
	from_add(n, m->name && *m->name ? m->name : pass_node_name(m, nb, sizeof(nb)));
}

/* Records the names of the nodes a fused node was made from (through
 * earlier fusions: a FusedConv made of a Conv that a BatchNormalization
 * was folded into lists the Conv, the BatchNormalization and the Relu). */
void pass_set_from(struct ir_node *n, struct ir_node *const *nodes, int k)
{
	for (int i = 0; i < k; i++)
		pass_add_from(n, nodes[i]);
}

/*
 * Removes the pattern's nodes (whose outputs nothing reads any more) and then
 * the Constant nodes that fed them and are read by nothing else.
 */
int pass_remove_nodes(struct pass_ctx *c, struct ir_node **nodes, int k)
{
	struct ir_node *consts[64];
	int nc = 0;
	for (int i = 0; i < k; i++)
		for (int j = 0; j < nodes[i]->n_inputs; j++) {
			struct ir_node *p = pass_producer(nodes[i]->inputs[j]);
			if (p && p->op == IR_OP_Constant && nc < 64) {
				bool seen = false;
				for (int q = 0; q < nc; q++)
					seen = seen || consts[q] == p;
				if (!seen)
					consts[nc++] = p;
			}
		}
	bool again = true;
	int left = k;
	while (again && left) {
		again = false;
		for (int i = 0; i < k; i++) {
			if (!nodes[i])
				continue;
			bool used = false;
			for (int j = 0; j < nodes[i]->n_outputs; j++)
				if (nodes[i]->outputs[j] && pass_n_readers(nodes[i]->outputs[j]))
					used = true;
			if (used)
				continue;
			int rc = ir_node_remove(nodes[i], c->d);
			if (rc)
				return rc;
			nodes[i] = NULL;
			left--;
			again = true;
		}
	}
	if (left)
		return ir_diag_err(c->d, IR_ERR, "internal error: a fused node is still read");
	for (int i = 0; i < nc; i++)
		if (!pass_n_readers(consts[i]->outputs[0]))
			ir_node_remove(consts[i], NULL);
	return 0;
}

bool pass_node_dead(const struct ir_node *n)
{
	for (int i = 0; i < n->n_outputs; i++)
		if (n->outputs[i] && pass_n_readers(n->outputs[i]))
			return false;
	return true;
}

/*
 * Removes n when nothing reads it, then the producers of its inputs that
 * this leaves unread, transitively. Returns how many nodes went (n
 * included). Node ids, not pointers, sit on the work list: a node may be
 * reached twice and be gone the second time.
 */
int pass_remove_dead_from(struct ir_graph *g, struct ir_node *n)
{
	int cap = 16, top = 0, removed = 0;
	int *st = malloc(sizeof(int) * (size_t)cap);
	if (!st)
		return 0;
	st[top++] = n->id;
	while (top) {
		struct ir_node *m = ir_node_by_id(g, st[--top]);
		if (!m || !pass_node_dead(m))
			continue;
		for (int i = 0; i < m->n_inputs; i++) {
			struct ir_value *v = m->inputs[i];
			if (!v || !v->producer || v->producer->graph != g)
				continue;
			if (top == cap) {
				int *p = realloc(st, sizeof(int) * (size_t)(cap * 2));
				if (!p)
					break;
				st = p;
				cap *= 2;
			}
			st[top++] = v->producer->id;
		}
		if (!ir_node_remove(m, NULL))
			removed++;
	}
	free(st);
	return removed;
}

/* Whether a node reads v through a subgraph capture. */
bool pass_read_in_subgraph(const struct ir_value *v)
{
	for (size_t u = 0; u < v->n_uses; u++)
		if (v->uses[u].slot < 0)
			return true;
	return false;
}

const char *pass_bytes_text(double b, char *buf, size_t size)
{
	if (b < 1024)
		snprintf(buf, size, "%.0f bytes", b);
	else if (b < 1048576)
		snprintf(buf, size, "%.1f KiB", b / 1024);
	else
		snprintf(buf, size, "%.1f MiB", b / 1048576);
	return buf;
}

