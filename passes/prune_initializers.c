/*
 * prune_initializers.c - the prune-initializers pass: initializers nothing
 * reads. Initializers listed as graph inputs are part of the interface and
 * stay.
 *
 * Linear time: one look at each initializer of each graph; the unread ones
 * are taken out of the graph's initializer list in one sweep (removing them
 * one at a time would scan the list each time).
 */
#include "passes/pass.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct prune {
	struct pass_ctx *c;
	int removed, kept;
	double bytes;
	int rc;
};

static double tensor_bytes(const struct ir_tensor *t)
{
	if (!t)
		return 0;
	if (t->dtype == IR_STRING) {
		double b = 0;
		for (uint64_t i = 0; i < t->numel; i++)
			b += (double)t->strings[i].len;
		return b;
	}
	return (double)t->nbytes;
}

static double value_bytes(const struct ir_value *v)
{
	if (v->init)
		return tensor_bytes(v->init);
	if (v->sparse_init)
		return tensor_bytes(v->sparse_init->values) + tensor_bytes(v->sparse_init->indices);
	return 0;
}

static const char *type_text(const struct ir_value *v, char *buf, size_t size)
{
	const struct ir_tensor *t = v->init ? v->init : v->sparse_init ? v->sparse_init->values : NULL;
	char db[96];
	if (v->sparse_init)
		snprintf(buf, size, "sparse %s%s", t ? ir_dtype_name(t->dtype) : "?",
			 ir_dims_str(v->sparse_init->rank, v->sparse_init->dims, db, sizeof(db)));
	else if (t)
		snprintf(buf, size, "%s%s", ir_dtype_name(t->dtype), ir_dims_str(t->rank, t->dims, db, sizeof(db)));
	else
		snprintf(buf, size, "?");
	return buf;
}

static bool unread(const struct ir_value *v)
{
	return !v->n_uses && !v->is_output;
}

/* Prunes one list (dense or sparse initializers) of g. */
static int prune_list(struct prune *P, struct ir_graph *g, struct ir_value ***list, int *count)
{
	struct pass_ctx *c = P->c;
	int n = *count, k = 0, ng = 0;
	struct ir_value **gone = malloc(sizeof(*gone) * (size_t)(n ? n : 1));
	if (!gone)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	struct ir_value **a = *list;
	for (int i = 0; i < n; i++) {
		struct ir_value *v = a[i];
		if (!unread(v)) {
			a[k++] = v;
			continue;
		}
		char tb[200], bb[64];
		type_text(v, tb, sizeof(tb));
		if (v->is_input) {
			a[k++] = v;
			P->kept++;
			pass_rejected(c, NULL, "initializer '%s' (%s) is unread but it is a graph input: a default the user "
				      "may override, part of the interface (remove the input by hand if it is not needed)",
				      v->name, tb);
			continue;
		}
		double b = value_bytes(v);
		P->bytes += b;
		P->removed++;
		if (g->parent)
			pass_rewrote(c, NULL, "removed initializer '%s' (%s, %s) of subgraph '%s': nothing reads it", v->name, tb,
				     pass_bytes_text(b, bb, sizeof(bb)), g->name ? g->name : "?");
		else
			pass_rewrote(c, NULL, "removed initializer '%s' (%s, %s): nothing reads it", v->name, tb,
				     pass_bytes_text(b, bb, sizeof(bb)));
		gone[ng++] = v;
	}
	*count = k;
	for (int i = 0; i < ng; i++) {
		struct ir_value *v = gone[i];
		/* out of the list already: clear the data so that removing the value does not look for it there */
		ir_tensor_unref(v->init);
		v->init = NULL;
		ir_sparse_free(v->sparse_init);
		v->sparse_init = NULL;
		ir_value_remove(v);
	}
	free(gone);
	return 0;
}

static int prune_graph(struct ir_graph *g, void *arg)
{
	struct prune *P = arg;
	if (g->is_function)
		return 0;
	int rc = prune_list(P, g, &g->inits, &g->n_inits);
	if (!rc)
		rc = prune_list(P, g, &g->sparse_inits, &g->n_sparse_inits);
	return rc;
}

static int run(struct pass_ctx *c)
{
	struct prune P = { .c = c };
	int rc = ir_graph_walk(c->m->graph, prune_graph, &P);
	if (rc)
		return rc;
	char bb[64];
	if (P.removed)
		pass_note(c, NULL, "removed %d initializer%s, %s", P.removed, P.removed > 1 ? "s" : "",
			  pass_bytes_text(P.bytes, bb, sizeof(bb)));
	else
		pass_note(c, NULL, "every initializer is read%s", P.kept ? " (or is a graph input)" : "");
	return 0;
}

const struct pass pass_prune_initializers = {
	.name = "prune-initializers",
	.summary = "remove initializers that nothing reads",
	.explain =
		"An initializer that no node reads (and that is not a graph output) only makes the file bigger. "
		"Other passes leave such initializers behind: fold-constants folds the nodes that read a weight, "
		"cse merges two copies of one tensor, dce removes the nodes that read it. This pass removes them "
		"and says how many bytes went. Subgraphs' own initializers count too; a value a subgraph reads "
		"from an enclosing graph counts as read.\n\n"
		"An initializer that is also listed as a graph input is kept even when nothing reads it: it is a "
		"default value the user may override when running the model, so it is part of the model's "
		"interface. The report lists those; removing such an input is a hand edit.",
	.level = PASS_LEVEL_BASIC,
	.run = run,
};
