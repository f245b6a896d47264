/*
 * edit.c - hand edits that need more than one mutator: removing a node and
 * rewiring around it.
 */
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *desc(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && *n->name)
		snprintf(buf, size, "'%s' (n%d, %s)", n->name, n->id, n->op_type);
	else
		snprintf(buf, size, "n%d (%s)", n->id, n->op_type);
	return buf;
}

/* Would re-pointing the subgraph captures of `out` at `src` hit a local
 * value of the subgraph named like `src`? */
static bool shadowed(const struct ir_value *out, const struct ir_value *src)
{
	for (size_t u = 0; u < out->n_uses; u++) {
		if (out->uses[u].slot >= 0)
			continue;
		const struct ir_node *m = out->uses[u].node;
		for (int i = 0; i < m->n_attrs; i++) {
			const struct ir_attr *a = &m->attrs[i];
			for (size_t k = 0; k < (a->g ? 1 : a->graphs ? a->n : 0); k++) {
				const struct ir_graph *sg = a->g ? a->g : a->graphs[k];
				const struct ir_value *have = ir_value_find(sg, src->name);
				if (have && have->outer != src)
					return true;
			}
		}
	}
	return false;
}

int pass_remove_node(struct ir_graph *g, struct ir_node *n, struct ir_diag *d)
{
	char nd[300];
	desc(n, nd, sizeof(nd));
	struct ir_value *out = NULL;
	int used = 0;
	for (int i = 0; i < n->n_outputs; i++) {
		struct ir_value *o = n->outputs[i];
		if (o && (o->n_uses || o->is_output)) {
			used++;
			out = o;
		}
	}
	if (!used)
		return ir_node_remove(n, d);
	if (used > 1)
		return ir_diag_err(d, IR_ERR, "cannot remove %s: %d of its outputs are used, so there is no single value to rewire",
				   nd, used);
	struct ir_value *src = NULL;
	int data = 0, present = 0;
	for (int i = 0; i < n->n_inputs; i++) {
		struct ir_value *v = n->inputs[i];
		if (!v)
			continue;
		present++;
		if (!ir_value_is_const(v)) {
			data++;
			src = v;
		}
	}
	if (data == 0 && present == 1) {
		for (int i = 0; i < n->n_inputs; i++)
			if (n->inputs[i])
				src = n->inputs[i];
		data = 1;
	}
	if (data != 1)
		return ir_diag_err(d, IR_ERR, "cannot remove %s: it has %d data inputs, so its consumers cannot be rewired to one",
				   nd, data);
	if (src == out)
		return ir_diag_err(d, IR_ERR, "cannot remove %s: it reads its own output", nd);
	if (shadowed(out, src))
		return ir_diag_err(d, IR_ERR, "cannot remove %s: a subgraph reading '%s' has its own value named '%s'",
				   nd, out->name, src->name);
	bool was_output = out->is_output;
	if (was_output && (src->is_input || src->init || src->sparse_init || src->is_output || src->outer))
		return ir_diag_err(d, IR_ERR, "cannot remove %s: its output '%s' is a graph output and its input '%s' is a graph input, initializer or output, which cannot take over the name",
				   nd, out->name, src->name);
	/* types the consumers will see change? */
	const struct ir_type *a = &src->type, *b = &out->type;
	if (a->kind == IR_TYPE_TENSOR && b->kind == IR_TYPE_TENSOR && a->elem && b->elem && a->elem != b->elem)
		ir_diag_warn(d, "'%s' is %s but the consumers of '%s' expected %s", src->name,
			     ir_dtype_name(a->elem), out->name, ir_dtype_name(b->elem));
	else if (a->kind == IR_TYPE_TENSOR && b->kind == IR_TYPE_TENSOR && a->rank >= 0 && b->rank >= 0 &&
		 !ir_type_equal(a, b) && a->rank != b->rank)
		ir_diag_warn(d, "'%s' has rank %d but the consumers of '%s' expected rank %d", src->name, a->rank,
			     out->name, b->rank);

	char *name = NULL;
	struct ir_type decl = { 0 };
	bool decl_has = out->has_type_proto;
	if (was_output) {
		if (!(name = strdup(out->name)) || ir_type_copy(&decl, &out->type)) {
			free(name);
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
	}
	ir_value_replace_uses(out, src);
	if (was_output)
		ir_graph_replace_output(g, out, src);
	int rc = ir_node_remove(n, d);
	if (!rc && was_output) {
		rc = ir_value_rename(src, name, d);
		ir_type_clear(&src->type);
		src->type = decl;
		memset(&decl, 0, sizeof(decl));
		src->has_type_proto = decl_has;
	}
	free(name);
	ir_type_clear(&decl);
	return rc;
}
