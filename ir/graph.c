/*
 * graph.c - graphs, values and nodes, and the mutators that keep producer
 * and use lists true.
 */
#include "ir_private.h"

#include <stdio.h>

struct ir_graph *ir_graph_new(const char *name)
{
	struct ir_graph *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->value_names = ir_map_new(64);
	g->node_names = ir_map_new(64);
	if (!g->value_names || !g->node_names || (name && !(g->name = ir_strdup(name)))) {
		ir_graph_free(g);
		return NULL;
	}
	return g;
}

void ir_value_free(struct ir_value *v)
{
	if (!v)
		return;
	free(v->name);
	ir_type_clear(&v->type);
	free(v->uses);
	ir_tensor_unref(v->init);
	ir_sparse_free(v->sparse_init);
	free(v->vi_doc);
	ir_kv_free(v->vi_meta, v->n_vi_meta);
	ir_type_clear(&v->inferred);
	free(v->why);
	ir_dims_clear(v->known, v->n_known > 0 ? v->n_known : 0);
	free(v->known);
	free(v);
}

void ir_node_free(struct ir_node *n)
{
	if (!n)
		return;
	free(n->name);
	free(n->op_type);
	free(n->domain);
	free(n->overload);
	free(n->inputs);
	free(n->outputs);
	for (int i = 0; i < n->n_attrs; i++)
		ir_attr_clear(&n->attrs[i]);
	free(n->attrs);
	free(n->implicit);
	free(n->doc);
	ir_kv_free(n->meta, n->n_meta);
	ir_bytes_free_array(n->devcfg, n->n_devcfg);
	for (int i = 0; i < n->n_from; i++)
		free(n->from[i]);
	free(n->from);
	free(n);
}

void ir_graph_free(struct ir_graph *g)
{
	if (!g)
		return;
	for (struct ir_node *n = g->first, *nx; n; n = nx) {
		nx = n->next;
		ir_node_free(n);
	}
	for (size_t i = 0; i < g->n_values; i++)
		ir_value_free(g->values[i]);
	free(g->values);
	free(g->by_id);
	ir_map_free(g->value_names);
	ir_map_free(g->node_names);
	free(g->inputs);
	free(g->outputs);
	free(g->inits);
	free(g->sparse_inits);
	ir_bytes_free_array(g->qannot, g->n_qannot);
	free(g->name);
	free(g->doc);
	ir_kv_free(g->meta, g->n_meta);
	free(g);
}

/* ---- values ---- */

int ir_graph_register_value(struct ir_graph *g, struct ir_value *v, struct ir_diag *d)
{
	if (ir_map_get(g->value_names, v->name))
		return ir_diag_err(d, IR_ERR, "value '%s' is defined twice", v->name);
	if (ir_grow(&g->values, &g->cap_values, g->n_values + 1, sizeof(*g->values)) ||
	    ir_map_put(g->value_names, v->name, v))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	v->graph = g;
	v->idx = g->n_values;
	g->values[g->n_values++] = v;
	return 0;
}

struct ir_value *ir_value_new(struct ir_graph *g, const char *name, struct ir_diag *d)
{
	struct ir_value *v = calloc(1, sizeof(*v));
	if (!v) {
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	v->type.rank = -1;
	v->n_known = -1;
	if (name) {
		v->name = ir_strdup(name);
	} else {
		do {
			free(v->name);
			v->name = ir_fmt("_v%u", g->fresh++);
		} while (v->name && ir_map_get(g->value_names, v->name));
	}
	if (!v->name) {
		free(v);
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	if (ir_graph_register_value(g, v, d)) {
		ir_value_free(v);
		return NULL;
	}
	return v;
}

struct ir_value *ir_value_find(const struct ir_graph *g, const char *name)
{
	return ir_map_get(g->value_names, name);
}

struct ir_value *ir_value_find_scoped(const struct ir_graph *g, const char *name)
{
	for (; g; g = g->parent) {
		struct ir_value *v = ir_map_get(g->value_names, name);
		if (v)
			return v;
	}
	return NULL;
}

int ir_use_add(struct ir_value *v, struct ir_node *n, int slot)
{
	if (ir_grow(&v->uses, &v->cap_uses, v->n_uses + 1, sizeof(*v->uses)))
		return IR_ENOMEM;
	v->uses[v->n_uses].node = n;
	v->uses[v->n_uses].slot = slot;
	v->n_uses++;
	return 0;
}

void ir_use_del(struct ir_value *v, struct ir_node *n, int slot)
{
	for (size_t i = 0; i < v->n_uses; i++) {
		if (v->uses[i].node == n && v->uses[i].slot == slot) {
			/* keep the order: consumers are listed as they were connected */
			memmove(&v->uses[i], &v->uses[i + 1], (v->n_uses - i - 1) * sizeof(*v->uses));
			v->n_uses--;
			return;
		}
	}
}

static void list_remove(struct ir_value **arr, int *n, const struct ir_value *v)
{
	for (int i = 0; i < *n; i++) {
		if (arr[i] == v) {
			memmove(&arr[i], &arr[i + 1], (size_t)(*n - i - 1) * sizeof(*arr));
			(*n)--;
			return;
		}
	}
}

/* Unlinks a value from its graph and frees it; no checks. */
static void value_drop(struct ir_value *v)
{
	struct ir_graph *g = v->graph;
	if (v->init)
		list_remove(g->inits, &g->n_inits, v);
	if (v->sparse_init)
		list_remove(g->sparse_inits, &g->n_sparse_inits, v);
	ir_map_del(g->value_names, v->name);
	struct ir_value *last = g->values[--g->n_values];
	g->values[v->idx] = last;
	last->idx = v->idx;
	ir_value_free(v);
}

void ir_value_remove(struct ir_value *v)
{
	if (!v || v->n_uses || v->is_input || v->is_output || v->producer)
		return;
	value_drop(v);
}

static int append_value(struct ir_value ***arr, int *n, struct ir_value *v)
{
	struct ir_value **p = realloc(*arr, (size_t)(*n + 1) * sizeof(**arr));
	if (!p)
		return IR_ENOMEM;
	p[(*n)++] = v;
	*arr = p;
	return 0;
}

int ir_value_set_init(struct ir_value *v, struct ir_tensor *t, struct ir_diag *d)
{
	if (v->producer)
		return ir_diag_err(d, IR_ERR, "value '%s' is computed by a node: it cannot be an initializer", v->name);
	if (!v->init && append_value(&v->graph->inits, &v->graph->n_inits, v))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	ir_tensor_ref(t);
	ir_tensor_unref(v->init);
	v->init = t;
	return 0;
}

int ir_graph_add_input(struct ir_graph *g, struct ir_value *v)
{
	if (append_value(&g->inputs, &g->n_inputs, v))
		return IR_ENOMEM;
	v->is_input = true;
	return 0;
}

int ir_graph_add_output(struct ir_graph *g, struct ir_value *v)
{
	if (append_value(&g->outputs, &g->n_outputs, v))
		return IR_ENOMEM;
	v->is_output = true;
	return 0;
}

void ir_graph_replace_output(struct ir_graph *g, struct ir_value *from, struct ir_value *to)
{
	bool any = false;
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == from) {
			g->outputs[i] = to;
			any = true;
		}
	if (any) {
		from->is_output = false;
		to->is_output = true;
	}
}

const struct ir_tensor *ir_value_const(const struct ir_value *v)
{
	if (!v)
		return NULL;
	if (v->init)
		return v->init;
	if (v->producer && v->producer->op == IR_OP_Constant) {
		const struct ir_attr *a = ir_node_attr(v->producer, "value");
		if (a && a->type == IR_ATTR_TENSOR)
			return a->t;
	}
	return NULL;
}

bool ir_value_is_const(const struct ir_value *v)
{
	return v && (v->init || v->sparse_init || (v->producer && v->producer->op == IR_OP_Constant));
}

struct ir_value *ir_graph_capture(struct ir_graph *g, const char *name, struct ir_diag *d)
{
	struct ir_value *v = ir_value_find(g, name);
	if (v)
		return v;
	if (!g->parent) {
		ir_diag_err(d, IR_ERR, "'%s' is not defined", name);
		return NULL;
	}
	struct ir_value *outer = ir_graph_capture(g->parent, name, d);
	if (!outer)
		return NULL;
	v = ir_value_new(g, name, d);
	if (!v)
		return NULL;
	v->outer = outer;
	if (ir_type_copy(&v->type, &outer->type)) {
		v->type.rank = -1;
		return v;   /* a capture with no type is still correct */
	}
	return v;
}

/* Every graph held by a node's attributes. */
static int node_subgraphs(const struct ir_node *n, struct ir_graph ***out)
{
	int count = 0;
	for (int i = 0; i < n->n_attrs; i++)
		count += n->attrs[i].g ? 1 : (n->attrs[i].graphs ? (int)n->attrs[i].n : 0);
	*out = NULL;
	if (!count)
		return 0;
	struct ir_graph **gs = malloc((size_t)count * sizeof(*gs));
	if (!gs)
		return -1;
	int k = 0;
	for (int i = 0; i < n->n_attrs; i++) {
		if (n->attrs[i].g)
			gs[k++] = n->attrs[i].g;
		if (n->attrs[i].graphs)
			for (size_t j = 0; j < n->attrs[i].n; j++)
				gs[k++] = n->attrs[i].graphs[j];
	}
	*out = gs;
	return k;
}

int ir_node_update_implicit(struct ir_node *n, struct ir_diag *d)
{
	for (int k = 0; k < n->n_implicit; k++)
		ir_use_del(n->implicit[k], n, -1 - k);
	free(n->implicit);
	n->implicit = NULL;
	n->n_implicit = 0;
	struct ir_graph **gs;
	int ng = node_subgraphs(n, &gs);
	if (ng < 0)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int cap = 0;
	for (int i = 0; i < ng; i++) {
		gs[i]->owner = n;
		gs[i]->parent = n->graph;
		gs[i]->depth = n->graph->depth + 1;
		for (size_t j = 0; j < gs[i]->n_values; j++) {
			struct ir_value *c = gs[i]->values[j];
			/* mark: already listed (a scan of the list would be quadratic) */
			if (!c->outer || c->outer->mark)
				continue;
			if (n->n_implicit == cap) {
				cap = cap ? cap * 2 : 4;
				struct ir_value **p = realloc(n->implicit, (size_t)cap * sizeof(*p));
				if (!p)
					goto nomem;
				n->implicit = p;
			}
			if (ir_use_add(c->outer, n, -1 - n->n_implicit))
				goto nomem;
			c->outer->mark = 1;
			n->implicit[n->n_implicit++] = c->outer;
		}
	}
	for (int k = 0; k < n->n_implicit; k++)
		n->implicit[k]->mark = 0;
	free(gs);
	return 0;
nomem:
	for (int k = 0; k < n->n_implicit; k++)
		n->implicit[k]->mark = 0;
	free(gs);
	return ir_diag_err(d, IR_ENOMEM, "out of memory");
}

/* Re-points the captures of `from` in n's subgraphs at `to`. */
static void retarget_captures(struct ir_node *n, struct ir_value *from, struct ir_value *to)
{
	struct ir_graph **gs;
	int ng = node_subgraphs(n, &gs);
	for (int i = 0; i < ng; i++) {
		struct ir_graph *s = gs[i];
		for (size_t j = 0; j < s->n_values; j++) {
			struct ir_value *c = s->values[j];
			if (c->outer != from)
				continue;
			struct ir_value *have = ir_value_find(s, to->name);
			if (have && have->outer == to) {
				/* the subgraph already reads `to`: merge the two captures */
				ir_value_replace_uses(c, have);
				c->outer = NULL;
				if (!c->n_uses)
					value_drop(c);
				j = (size_t)-1;   /* the array changed: rescan */
				continue;
			}
			if (have)
				continue;   /* a local value shadows the name: leave it */
			ir_map_del(s->value_names, c->name);
			char *nm = ir_strdup(to->name);
			if (nm) {
				free(c->name);
				c->name = nm;
			}
			ir_map_put(s->value_names, c->name, c);
			c->outer = to;
		}
	}
	free(gs);
	ir_node_update_implicit(n, NULL);
}

void ir_value_replace_uses(struct ir_value *from, struct ir_value *to)
{
	if (from == to)
		return;
	/* node inputs in one sweep (removing uses one at a time from the front
	 * would be quadratic in the readers); captures below */
	if (to && !ir_grow(&to->uses, &to->cap_uses, to->n_uses + from->n_uses, sizeof(*to->uses))) {
		size_t k = 0;
		for (size_t i = 0; i < from->n_uses; i++) {
			struct ir_use u = from->uses[i];
			if (u.slot >= 0) {
				u.node->inputs[u.slot] = to;
				to->uses[to->n_uses++] = u;
			} else {
				from->uses[k++] = u;
			}
		}
		from->n_uses = k;
	}
	while (from->n_uses) {
		struct ir_use u = from->uses[0];
		if (u.slot >= 0) {
			ir_node_set_input(u.node, u.slot, to);
		} else {
			retarget_captures(u.node, from, to);
			/* a capture left in place (shadowed) keeps its use: stop rather than loop */
			for (size_t i = 0; i < from->n_uses; i++)
				if (from->uses[i].node == u.node && from->uses[i].slot < 0)
					return;
		}
	}
}

int ir_value_rename(struct ir_value *v, const char *name, struct ir_diag *d)
{
	if (!name || !*name)
		return ir_diag_err(d, IR_ERR, "a value name cannot be empty");
	if (strcmp(v->name, name) == 0)
		return 0;
	if (ir_value_find(v->graph, name))
		return ir_diag_err(d, IR_ERR, "a value named '%s' already exists", name);
	char *nm = ir_strdup(name);
	if (!nm)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	ir_map_del(v->graph->value_names, v->name);
	free(v->name);
	v->name = nm;
	ir_map_put(v->graph->value_names, v->name, v);
	/* captures in subgraphs read the value by name: rename them too */
	for (size_t i = 0; i < v->n_uses; i++) {
		if (v->uses[i].slot >= 0)
			continue;
		struct ir_graph **gs;
		int ng = node_subgraphs(v->uses[i].node, &gs);
		for (int k = 0; k < ng; k++)
			for (size_t j = 0; j < gs[k]->n_values; j++)
				if (gs[k]->values[j]->outer == v)
					ir_value_rename(gs[k]->values[j], name, NULL);
		free(gs);
	}
	return 0;
}

/* ---- nodes ---- */

static int register_node_name(struct ir_graph *g, struct ir_node *n)
{
	if (!n->name || !*n->name)
		return 0;
	if (ir_map_get(g->node_names, n->name)) {
		g->name_dups++;
		return 0;
	}
	return ir_map_put(g->node_names, n->name, n);
}

static void unregister_node_name(struct ir_graph *g, struct ir_node *n)
{
	if (!n->name || !*n->name || ir_map_get(g->node_names, n->name) != n)
		return;
	ir_map_del(g->node_names, n->name);
	if (!g->name_dups)
		return;
	ir_for_each_node(g, m)
		if (m != n && m->name && strcmp(m->name, n->name) == 0) {
			ir_map_put(g->node_names, m->name, m);
			return;
		}
}

static void link_before(struct ir_graph *g, struct ir_node *n, struct ir_node *before)
{
	if (!before) {
		n->prev = g->last;
		n->next = NULL;
		if (g->last)
			g->last->next = n;
		else
			g->first = n;
		g->last = n;
	} else {
		n->next = before;
		n->prev = before->prev;
		if (before->prev)
			before->prev->next = n;
		else
			g->first = n;
		before->prev = n;
	}
}

static void unlink_node(struct ir_graph *g, struct ir_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		g->first = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		g->last = n->prev;
	n->prev = n->next = NULL;
}

struct ir_node *ir_node_alloc_id(struct ir_graph *g, int id)
{
	if (id < 0 || ir_grow(&g->by_id, &g->cap_id, (size_t)id + 1, sizeof(*g->by_id)))
		return NULL;
	if (g->by_id[id])
		return NULL;
	struct ir_node *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->id = id;
	n->graph = g;
	n->op = IR_OP_UNKNOWN;
	g->by_id[id] = n;
	if (id >= g->next_id)
		g->next_id = id + 1;
	return n;
}

void ir_node_resolve_op(struct ir_node *n)
{
	n->op = ir_op_lookup(n->domain ? n->domain : "", n->op_type ? n->op_type : "");
}

struct ir_node *ir_node_new(struct ir_graph *g, const char *op_type, const char *domain,
			    const char *name, int n_inputs, int n_outputs, struct ir_node *before)
{
	if (n_inputs < 0 || n_outputs < 0)
		return NULL;
	struct ir_node *n = ir_node_alloc_id(g, g->next_id);
	if (!n)
		return NULL;
	n->op_type = ir_strdup(op_type ? op_type : "");
	n->domain = domain ? ir_strdup(domain) : NULL;
	n->name = ir_strdup(name ? name : "");
	n->inputs = ir_alloc_array((size_t)n_inputs, sizeof(*n->inputs));
	n->outputs = ir_alloc_array((size_t)n_outputs, sizeof(*n->outputs));
	if (!n->op_type || (domain && !n->domain) || !n->name || !n->inputs || !n->outputs ||
	    register_node_name(g, n)) {
		g->by_id[n->id] = NULL;
		ir_node_free(n);
		return NULL;
	}
	n->n_inputs = n_inputs;
	n->n_outputs = n_outputs;
	ir_node_resolve_op(n);
	link_before(g, n, before);
	g->n_nodes++;
	return n;
}

int ir_node_set_input(struct ir_node *n, int slot, struct ir_value *v)
{
	if (slot < 0 || slot >= n->n_inputs)
		return IR_ERR;
	if (n->inputs[slot])
		ir_use_del(n->inputs[slot], n, slot);
	n->inputs[slot] = NULL;
	if (v && ir_use_add(v, n, slot))
		return IR_ENOMEM;
	n->inputs[slot] = v;
	return 0;
}

int ir_node_add_input(struct ir_node *n, struct ir_value *v)
{
	struct ir_value **p = realloc(n->inputs, (size_t)(n->n_inputs + 1) * sizeof(*p));
	if (!p)
		return IR_ENOMEM;
	n->inputs = p;
	n->inputs[n->n_inputs++] = NULL;
	return ir_node_set_input(n, n->n_inputs - 1, v);
}

int ir_node_set_output(struct ir_node *n, int slot, struct ir_value *v, struct ir_diag *d)
{
	if (slot < 0 || slot >= n->n_outputs)
		return ir_diag_err(d, IR_ERR, "output slot %d out of range", slot);
	if (v && (v->producer || v->init || v->is_input || v->outer))
		return ir_diag_err(d, IR_ERR, "value '%s' is already defined elsewhere", v->name);
	struct ir_value *old = n->outputs[slot];
	if (old) {
		old->producer = NULL;
		old->producer_slot = 0;
	}
	n->outputs[slot] = v;
	if (v) {
		v->producer = n;
		v->producer_slot = slot;
	}
	return 0;
}

int ir_node_remove(struct ir_node *n, struct ir_diag *d)
{
	struct ir_graph *g = n->graph;
	for (int i = 0; i < n->n_outputs; i++) {
		struct ir_value *o = n->outputs[i];
		if (!o)
			continue;
		if (o->n_uses)
			return ir_diag_err(d, IR_ERR, "output '%s' of n%d is still used by n%d", o->name,
					   n->id, o->uses[0].node->id);
		if (o->is_output)
			return ir_diag_err(d, IR_ERR, "output '%s' of n%d is a graph output", o->name, n->id);
	}
	for (int i = 0; i < n->n_inputs; i++)
		ir_node_set_input(n, i, NULL);
	for (int k = 0; k < n->n_implicit; k++)
		ir_use_del(n->implicit[k], n, -1 - k);
	n->n_implicit = 0;
	for (int i = 0; i < n->n_outputs; i++)
		if (n->outputs[i])
			value_drop(n->outputs[i]);
	unregister_node_name(g, n);
	unlink_node(g, n);
	g->by_id[n->id] = NULL;
	g->n_nodes--;
	ir_node_free(n);
	return 0;
}

int ir_node_rename(struct ir_node *n, const char *name, struct ir_diag *d)
{
	char *nm = ir_strdup(name ? name : "");
	if (!nm)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	unregister_node_name(n->graph, n);
	free(n->name);
	n->name = nm;
	if (register_node_name(n->graph, n))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	return 0;
}

struct ir_node *ir_node_by_id(const struct ir_graph *g, int id)
{
	return id >= 0 && id < g->next_id && (size_t)id < g->cap_id ? g->by_id[id] : NULL;
}

struct ir_node *ir_node_by_name(const struct ir_graph *g, const char *name, int *count)
{
	struct ir_node *n = ir_map_get(g->node_names, name);
	if (count) {
		*count = n ? 1 : 0;
		if (n && g->name_dups) {
			*count = 0;
			ir_for_each_node(g, m)
				if (strcmp(m->name, name) == 0)
					(*count)++;
		}
	}
	return n;
}

void ir_node_move(struct ir_node *n, struct ir_node *before)
{
	if (n == before)
		return;
	unlink_node(n->graph, n);
	link_before(n->graph, n, before);
}

struct ir_attr *ir_node_attr(const struct ir_node *n, const char *name)
{
	for (int i = 0; i < n->n_attrs; i++)
		if (n->attrs[i].name && strcmp(n->attrs[i].name, name) == 0)
			return &n->attrs[i];
	return NULL;
}

int ir_node_set_attr(struct ir_node *n, struct ir_attr *a, struct ir_diag *d)
{
	struct ir_attr *old = ir_node_attr(n, a->name);
	bool graphs = a->g || a->graphs;
	if (old) {
		graphs = graphs || old->g || old->graphs;
		ir_attr_clear(old);
		*old = *a;
	} else {
		struct ir_attr *p = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof(*p));
		if (!p)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		n->attrs = p;
		n->attrs[n->n_attrs++] = *a;
	}
	memset(a, 0, sizeof(*a));
	return graphs ? ir_node_update_implicit(n, d) : 0;
}

int ir_node_remove_attr(struct ir_node *n, const char *name)
{
	struct ir_attr *a = ir_node_attr(n, name);
	if (!a)
		return IR_ERR;
	bool graphs = a->g || a->graphs;
	ir_attr_clear(a);
	int i = (int)(a - n->attrs);
	memmove(&n->attrs[i], &n->attrs[i + 1], (size_t)(n->n_attrs - i - 1) * sizeof(*a));
	n->n_attrs--;
	return graphs ? ir_node_update_implicit(n, NULL) : 0;
}

int64_t ir_node_attr_int(const struct ir_node *n, const char *name, int64_t dflt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	return a && a->type == IR_ATTR_INT ? a->i : dflt;
}

float ir_node_attr_float(const struct ir_node *n, const char *name, float dflt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	return a && a->type == IR_ATTR_FLOAT ? a->f : dflt;
}

/* ---- order ---- */

/* Marks: 0 unseen, 1 on the DFS stack, 2 placed. */
int ir_graph_toposort(struct ir_graph *g, struct ir_diag *d)
{
	/* already in order? (the common case, one pass) */
	bool ok = true;
	ir_for_each_node(g, n)
		n->mark = 0;
	ir_for_each_node(g, n) {
		for (int i = 0; i < n->n_inputs + n->n_implicit && ok; i++) {
			struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
			if (v && v->producer && v->producer->graph == g && !v->producer->mark)
				ok = false;
		}
		n->mark = 1;
	}
	if (ok) {
		ir_for_each_node(g, n)
			n->mark = 0;
		return 0;
	}
	/* iterative DFS over producers, in the current order: each node lands as
	 * early as its inputs allow, independent nodes keep their order */
	struct frame { struct ir_node *n; int next; };
	struct frame *st = ir_alloc_array((size_t)g->n_nodes + 1, sizeof(*st));
	struct ir_node **order = ir_alloc_array((size_t)g->n_nodes + 1, sizeof(*order));
	if (!st || !order) {
		free(st);
		free(order);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	ir_for_each_node(g, n)
		n->mark = 0;
	int no = 0, rc = 0;
	ir_for_each_node(g, root) {
		if (root->mark)
			continue;
		int sp = 0;
		st[sp++] = (struct frame){ root, 0 };
		root->mark = 1;
		while (sp) {
			struct frame *f = &st[sp - 1];
			struct ir_node *n = f->n;
			if (f->next < n->n_inputs + n->n_implicit) {
				int i = f->next++;
				struct ir_value *v = i < n->n_inputs ? n->inputs[i] : n->implicit[i - n->n_inputs];
				struct ir_node *p = v ? v->producer : NULL;
				if (!p || p->graph != g || p->mark == 2)
					continue;
				if (p->mark == 1) {
					rc = ir_diag_err(d, IR_ERR, "the graph has a cycle through node '%s' (n%d, %s)",
							 p->name, p->id, p->op_type);
					goto out;
				}
				p->mark = 1;
				st[sp++] = (struct frame){ p, 0 };
				continue;
			}
			n->mark = 2;
			order[no++] = n;
			sp--;
		}
	}
	g->first = g->last = NULL;
	for (int i = 0; i < no; i++) {
		order[i]->prev = order[i]->next = NULL;
		link_before(g, order[i], NULL);
	}
out:
	ir_for_each_node(g, n)
		n->mark = 0;
	free(st);
	free(order);
	return rc;
}

int ir_graph_walk(struct ir_graph *g, int (*fn)(struct ir_graph *, void *), void *arg)
{
	int rc = fn(g, arg);
	if (rc)
		return rc;
	ir_for_each_node(g, n) {
		for (int i = 0; i < n->n_attrs; i++) {
			struct ir_attr *a = &n->attrs[i];
			if (a->g && (rc = ir_graph_walk(a->g, fn, arg)))
				return rc;
			for (size_t j = 0; a->graphs && j < a->n; j++)
				if ((rc = ir_graph_walk(a->graphs[j], fn, arg)))
					return rc;
		}
	}
	return 0;
}

static int totals_cb(struct ir_graph *g, void *arg)
{
	struct ir_graph_totals *t = arg;
	t->n_nodes_all += g->n_nodes;
	if (g->parent)
		t->n_subgraphs++;
	t->n_inits += g->n_inits;
	for (int i = 0; i < g->n_inits; i++) {
		t->n_params += g->inits[i]->init->numel;
		t->weight_bytes += g->inits[i]->init->nbytes;
	}
	ir_for_each_node(g, n) {
		if (n->op != IR_OP_Constant)
			continue;
		const struct ir_attr *a = ir_node_attr(n, "value");
		if (a && a->type == IR_ATTR_TENSOR) {
			t->n_params += a->t->numel;
			t->weight_bytes += a->t->nbytes;
		}
	}
	return 0;
}

void ir_graph_totals(const struct ir_graph *g, struct ir_graph_totals *t)
{
	memset(t, 0, sizeof(*t));
	t->n_nodes = g->n_nodes;
	ir_graph_walk((struct ir_graph *)g, totals_cb, t);
}

/* ---- the files behind the tensors ---- */

struct check_files {
	const struct ir_mapping **seen;
	size_t n, cap;
	struct ir_diag *d;
	int rc;
};

static void check_tensor(struct check_files *c, const struct ir_tensor *t)
{
	if (c->rc || !t || !t->buf || !t->buf->map)
		return;
	for (size_t i = 0; i < c->n; i++)
		if (c->seen[i] == t->buf->map)
			return;
	if (ir_grow(&c->seen, &c->cap, c->n + 1, sizeof(*c->seen)) == 0)
		c->seen[c->n++] = t->buf->map;
	c->rc = ir_mapping_check(t->buf->map, c->d);
}

static void check_attr_tensors(struct check_files *c, const struct ir_attr *a)
{
	check_tensor(c, a->t);
	if (a->sp) {
		check_tensor(c, a->sp->values);
		check_tensor(c, a->sp->indices);
	}
	for (size_t i = 0; a->tensors && i < a->n; i++)
		check_tensor(c, a->tensors[i]);
	for (size_t i = 0; a->sparses && i < a->n; i++) {
		check_tensor(c, a->sparses[i]->values);
		check_tensor(c, a->sparses[i]->indices);
	}
}

static int check_files_cb(struct ir_graph *g, void *arg)
{
	struct check_files *c = arg;
	for (int i = 0; i < g->n_inits; i++)
		check_tensor(c, g->inits[i]->init);
	for (int i = 0; i < g->n_sparse_inits; i++) {
		check_tensor(c, g->sparse_inits[i]->sparse_init->values);
		check_tensor(c, g->sparse_inits[i]->sparse_init->indices);
	}
	ir_for_each_node(g, n)
		for (int i = 0; i < n->n_attrs; i++)
			check_attr_tensors(c, &n->attrs[i]);
	return c->rc;
}

int ir_model_check_files(const struct ir_model *m, struct ir_diag *d)
{
	struct check_files c = { .d = d };
	if (m->graph)
		ir_graph_walk(m->graph, check_files_cb, &c);
	for (size_t i = 0; !c.rc && i < m->n_functions; i++) {
		if (m->functions[i].body)
			ir_graph_walk(m->functions[i].body, check_files_cb, &c);
		for (size_t k = 0; k < m->functions[i].n_attr_defaults; k++)
			check_attr_tensors(&c, &m->functions[i].attr_defaults[k]);
	}
	free(c.seen);
	return c.rc;
}
