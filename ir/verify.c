/*
 * verify.c - ir_verify(): every structural invariant of a graph, checked
 * in time linear in its size. Passes and tests run it after each change.
 */
#include "ir_private.h"

#define FAIL(...) return ir_diag_err(d, IR_ERR, "ir_verify: " __VA_ARGS__)

static int verify_graph(const struct ir_graph *g, struct ir_diag *d);
static int verify_values_in(const struct ir_graph *g, struct ir_value **implicit, int n_implicit,
			    struct ir_diag *d);

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
	return (x > y) - (x < y);
}

static int verify_values(const struct ir_graph *g, struct ir_diag *d)
{
	/* the owner's implicit inputs, sorted, to look captures up in */
	struct ir_value **implicit = NULL;
	int n_implicit = g->owner ? g->owner->n_implicit : 0;
	if (n_implicit) {
		if (!(implicit = malloc((size_t)n_implicit * sizeof(*implicit))))
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		memcpy(implicit, g->owner->implicit, (size_t)n_implicit * sizeof(*implicit));
		qsort(implicit, (size_t)n_implicit, sizeof(*implicit), cmp_ptr);
	}
	int rc = verify_values_in(g, implicit, n_implicit, d);
	free(implicit);
	return rc;
}

static int verify_values_in(const struct ir_graph *g, struct ir_value **implicit, int n_implicit,
			    struct ir_diag *d)
{
	if (ir_map_count(g->value_names) != g->n_values)
		FAIL("graph '%s': %zu values but %zu names in the index", g->name ? g->name : "",
		     g->n_values, ir_map_count(g->value_names));
	int n_in = 0, n_out = 0, n_init = 0, n_sparse = 0;
	for (size_t i = 0; i < g->n_values; i++) {
		const struct ir_value *v = g->values[i];
		if (!v->name || v->graph != g || v->idx != i)
			FAIL("value %zu is not registered properly", i);
		if (ir_value_find(g, v->name) != v)
			FAIL("value '%s' is not the one its name finds", v->name);
		int defs = (v->producer != NULL) + (v->outer != NULL) + (v->is_input || v->init || v->sparse_init);
		if (defs > 1)
			FAIL("value '%s' is defined more than once", v->name);
		if (defs == 0 && (v->n_uses || v->is_output) && !g->is_function)
			FAIL("value '%s' is used but never defined", v->name);
		if (v->producer) {
			const struct ir_node *p = v->producer;
			if (p->graph != g || v->producer_slot < 0 || v->producer_slot >= p->n_outputs ||
			    p->outputs[v->producer_slot] != v)
				FAIL("value '%s': its producer does not list it as an output", v->name);
		}
		if (v->outer) {
			if (!g->parent || ir_value_find_scoped(g->parent, v->name) != v->outer)
				FAIL("capture '%s' does not read the enclosing value of its name", v->name);
			if (!implicit || !bsearch(&v->outer, implicit, (size_t)n_implicit, sizeof(*implicit), cmp_ptr))
				FAIL("capture '%s' is not an implicit input of the node owning its graph", v->name);
		}
		if (v->init && v->init->refcount < 1)
			FAIL("initializer '%s' has a dead tensor", v->name);
		n_in += v->is_input;
		n_out += v->is_output;
		n_init += v->init != NULL;
		n_sparse += v->sparse_init != NULL;
		for (size_t u = 0; u < v->n_uses; u++) {
			const struct ir_node *n = v->uses[u].node;
			int s = v->uses[u].slot;
			if (!n || n->graph != g)
				FAIL("value '%s' has a use in another graph", v->name);
			if (s >= 0 ? (s >= n->n_inputs || n->inputs[s] != v)
				   : (-1 - s >= n->n_implicit || n->implicit[-1 - s] != v))
				FAIL("value '%s': use by n%d slot %d does not point back", v->name, n->id, s);
		}
	}
	for (int i = 0; i < g->n_inputs; i++)
		if (!g->inputs[i] || g->inputs[i]->graph != g || !g->inputs[i]->is_input)
			FAIL("graph input %d is not a marked value of the graph", i);
	for (int i = 0; i < g->n_outputs; i++)
		if (!g->outputs[i] || g->outputs[i]->graph != g || !g->outputs[i]->is_output)
			FAIL("graph output %d is not a marked value of the graph", i);
	for (int i = 0; i < g->n_inits; i++)
		if (!g->inits[i] || g->inits[i]->graph != g || !g->inits[i]->init)
			FAIL("initializer %d is not a value with data", i);
	for (int i = 0; i < g->n_sparse_inits; i++)
		if (!g->sparse_inits[i] || !g->sparse_inits[i]->sparse_init)
			FAIL("sparse initializer %d is not a value with data", i);
	/* a value may be listed as an output twice (ONNX allows it); inputs and initializers once */
	if (n_in != g->n_inputs || n_init != g->n_inits || n_sparse != g->n_sparse_inits ||
	    n_out > g->n_outputs)
		FAIL("graph '%s': input/output/initializer lists disagree with value flags", g->name ? g->name : "");
	return 0;
}

static int verify_graph(const struct ir_graph *g, struct ir_diag *d)
{
	int rc = verify_values(g, d);
	if (rc)
		return rc;
	for (size_t i = 0; i < g->n_values; i++)
		g->values[i]->mark = 0;
	/* node list, ids, order, slots */
	int count = 0;
	const struct ir_node *prev = NULL;
	for (const struct ir_node *n = g->first; n; prev = n, n = n->next) {
		if (++count > g->n_nodes)
			FAIL("the node list is longer than n_nodes (%d)", g->n_nodes);
		if (n->prev != prev || n->graph != g)
			FAIL("node n%d is badly linked", n->id);
		if (ir_node_by_id(g, n->id) != n)
			FAIL("node n%d is not found by its id", n->id);
		if (!n->op_type || !n->name)
			FAIL("node n%d has no op type or name string", n->id);
		if (n->name[0] && !ir_map_get(g->node_names, n->name))
			FAIL("node n%d: its name '%s' is not indexed", n->id, n->name);
		for (int i = 0; i < n->n_inputs + n->n_implicit; i++) {
			const struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			if (!v) {
				if (i >= n->n_inputs)
					FAIL("node n%d has an empty implicit input", n->id);
				continue;
			}
			if (v->graph != g)
				FAIL("node n%d input %d is a value of another graph", n->id, i);
			if (v->producer && !v->producer->mark)
				FAIL("node n%d uses '%s' before its producer n%d runs", n->id, v->name, v->producer->id);
			((struct ir_value *)v)->mark++;
		}
		for (int i = 0; i < n->n_outputs; i++) {
			const struct ir_value *v = n->outputs[i];
			if (v && (v->producer != n || v->producer_slot != i))
				FAIL("node n%d output %d '%s' does not name n%d as producer", n->id, i, v->name, n->id);
		}
		((struct ir_node *)n)->mark = 1;
		for (int i = 0; i < n->n_attrs; i++) {
			const struct ir_attr *a = &n->attrs[i];
			const struct ir_graph *subs[1] = { a->g };
			for (size_t j = 0; j < (a->g ? 1 : a->graphs ? a->n : 0); j++) {
				const struct ir_graph *s = a->g ? subs[0] : a->graphs[j];
				if (s->parent != g || s->owner != n)
					FAIL("subgraph of n%d does not point back at it", n->id);
				if ((rc = verify_graph(s, d)))
					return rc;
			}
		}
	}
	if (count != g->n_nodes || prev != g->last)
		FAIL("n_nodes is %d but the list has %d", g->n_nodes, count);
	for (const struct ir_node *n = g->first; n; n = n->next)
		((struct ir_node *)n)->mark = 0;
	for (size_t i = 0; i < g->n_values; i++) {
		struct ir_value *v = g->values[i];
		if (v->mark != v->n_uses)
			FAIL("value '%s' has %zu uses listed but %u slots read it", v->name, v->n_uses, v->mark);
		v->mark = 0;
	}
	return 0;
}

int ir_verify(const struct ir_graph *g, struct ir_diag *d)
{
	return verify_graph(g, d);
}

int ir_model_verify(const struct ir_model *m, struct ir_diag *d)
{
	int rc = m->graph ? ir_verify(m->graph, d) : 0;
	for (size_t i = 0; !rc && i < m->n_functions; i++)
		if (m->functions[i].body)
			rc = ir_verify(m->functions[i].body, d);
	return rc;
}
