/*
 * clone.c - cheap copies of graphs and models for the stage history:
 * structure, names and ids are copied, tensor data is shared.
 */
#include "ir_private.h"

static int copy_value_fields(struct ir_value *dst, const struct ir_value *src)
{
	if (ir_type_copy(&dst->type, &src->type))
		return IR_ENOMEM;
	dst->is_input = src->is_input;
	dst->is_output = src->is_output;
	dst->has_vinfo = src->has_vinfo;
	dst->vinfo_order = src->vinfo_order;
	dst->has_type_proto = src->has_type_proto;
	if (src->vi_doc && !(dst->vi_doc = ir_strdup(src->vi_doc)))
		return IR_ENOMEM;
	if (ir_kv_copy(&dst->vi_meta, &dst->n_vi_meta, src->vi_meta, src->n_vi_meta))
		return IR_ENOMEM;
	if (src->init) {
		dst->init = src->init;
		ir_tensor_ref(dst->init);
	}
	if (src->sparse_init && !(dst->sparse_init = ir_sparse_clone(src->sparse_init)))
		return IR_ENOMEM;
	return 0;
}

static struct ir_value **map_list(struct ir_value *const *src, int n, const struct ir_graph *dst)
{
	struct ir_value **out = ir_alloc_array((size_t)n, sizeof(*out));
	if (!out)
		return NULL;
	for (int i = 0; i < n; i++)
		out[i] = ir_value_find(dst, src[i]->name);
	return out;
}

struct ir_graph *ir_graph_clone(const struct ir_graph *g, struct ir_graph *parent)
{
	struct ir_graph *c = ir_graph_new(g->name);
	if (!c)
		return NULL;
	c->parent = parent;
	c->depth = g->depth;
	c->is_function = g->is_function;
	c->fresh = g->fresh;
	if ((g->doc && !(c->doc = ir_strdup(g->doc))) ||
	    ir_kv_copy(&c->meta, &c->n_meta, g->meta, g->n_meta) ||
	    ir_bytes_copy_array(&c->qannot, g->qannot, g->n_qannot))
		goto fail;
	c->n_qannot = g->n_qannot;

	/* values first (all of them, so that uses can be connected by name) */
	for (size_t i = 0; i < g->n_values; i++) {
		const struct ir_value *v = g->values[i];
		if (v->outer)
			continue;   /* captures are re-made against the new parent below */
		struct ir_value *nv = ir_value_new(c, v->name, NULL);
		if (!nv || copy_value_fields(nv, v))
			goto fail;
	}
	for (size_t i = 0; i < g->n_values; i++) {
		const struct ir_value *v = g->values[i];
		if (!v->outer)
			continue;
		struct ir_value *nv = parent ? ir_graph_capture(c, v->name, NULL) : NULL;
		if (!nv)
			goto fail;
		/* type and flags (a capture may be a graph output, or in value_info) */
		ir_type_clear(&nv->type);
		if (copy_value_fields(nv, v))
			goto fail;
	}
	if (!(c->inputs = map_list(g->inputs, g->n_inputs, c)) ||
	    !(c->outputs = map_list(g->outputs, g->n_outputs, c)) ||
	    !(c->inits = map_list(g->inits, g->n_inits, c)) ||
	    !(c->sparse_inits = map_list(g->sparse_inits, g->n_sparse_inits, c)))
		goto fail;
	c->n_inputs = g->n_inputs;
	c->n_outputs = g->n_outputs;
	c->n_inits = g->n_inits;
	c->n_sparse_inits = g->n_sparse_inits;

	ir_for_each_node(g, n) {
		struct ir_node *m = ir_node_alloc_id(c, n->id);
		if (!m)
			goto fail;
		/* link at the end, in the same order */
		m->prev = c->last;
		if (c->last)
			c->last->next = m;
		else
			c->first = m;
		c->last = m;
		c->n_nodes++;
		m->op = n->op;
		if (!(m->name = ir_strdup(n->name)) || !(m->op_type = ir_strdup(n->op_type)) ||
		    (n->domain && !(m->domain = ir_strdup(n->domain))) ||
		    (n->overload && !(m->overload = ir_strdup(n->overload))) ||
		    (n->doc && !(m->doc = ir_strdup(n->doc))) ||
		    ir_kv_copy(&m->meta, &m->n_meta, n->meta, n->n_meta) ||
		    ir_bytes_copy_array(&m->devcfg, n->devcfg, n->n_devcfg))
			goto fail;
		m->n_devcfg = n->n_devcfg;
		if (m->name[0] && !ir_map_get(c->node_names, m->name))
			ir_map_put(c->node_names, m->name, m);
		if (n->n_from) {
			if (!(m->from = ir_alloc_array((size_t)n->n_from, sizeof(char *))))
				goto fail;
			for (int i = 0; i < n->n_from; i++)
				if (!(m->from[m->n_from++] = ir_strdup(n->from[i])))
					goto fail;
		}
		if (!(m->inputs = ir_alloc_array((size_t)n->n_inputs, sizeof(*m->inputs))) ||
		    !(m->outputs = ir_alloc_array((size_t)n->n_outputs, sizeof(*m->outputs))))
			goto fail;
		m->n_inputs = n->n_inputs;
		m->n_outputs = n->n_outputs;
		for (int i = 0; i < n->n_outputs; i++) {
			if (!n->outputs[i])
				continue;
			struct ir_value *v = ir_value_find(c, n->outputs[i]->name);
			m->outputs[i] = v;
			v->producer = m;
			v->producer_slot = i;
		}
		for (int i = 0; i < n->n_inputs; i++)
			if (n->inputs[i] && ir_node_set_input(m, i, ir_value_find(c, n->inputs[i]->name)))
				goto fail;
		if (n->n_attrs) {
			if (!(m->attrs = ir_alloc_array((size_t)n->n_attrs, sizeof(*m->attrs))))
				goto fail;
			for (int i = 0; i < n->n_attrs; i++) {
				if (ir_attr_copy(&m->attrs[i], &n->attrs[i], c))
					goto fail;
				m->n_attrs++;
			}
			if (ir_node_update_implicit(m, NULL))
				goto fail;
		}
	}
	c->name_dups = g->name_dups;
	c->next_id = g->next_id;
	return c;
fail:
	ir_graph_free(c);
	return NULL;
}

static int opsets_copy(struct ir_opset **dst, size_t *n_dst, const struct ir_opset *src, size_t n)
{
	*dst = NULL;
	*n_dst = 0;
	if (!n)
		return 0;
	struct ir_opset *o = ir_alloc_array(n, sizeof(*o));
	if (!o)
		return IR_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		o[i] = src[i];
		o[i].domain = NULL;
		if (src[i].domain && !(o[i].domain = ir_strdup(src[i].domain))) {
			for (size_t j = 0; j < i; j++)
				free(o[j].domain);
			free(o);
			return IR_ENOMEM;
		}
	}
	*dst = o;
	*n_dst = n;
	return 0;
}

void ir_function_clear(struct ir_function *f)
{
	free(f->name);
	free(f->domain);
	free(f->overload);
	free(f->doc);
	ir_graph_free(f->body);
	for (size_t i = 0; i < f->n_attr_names; i++)
		free(f->attr_names[i]);
	free(f->attr_names);
	for (size_t i = 0; i < f->n_attr_defaults; i++)
		ir_attr_clear(&f->attr_defaults[i]);
	free(f->attr_defaults);
	for (size_t i = 0; i < f->n_opsets; i++)
		free(f->opsets[i].domain);
	free(f->opsets);
	ir_kv_free(f->meta, f->n_meta);
	memset(f, 0, sizeof(*f));
}

int ir_function_copy(struct ir_function *d, const struct ir_function *s)
{
	memset(d, 0, sizeof(*d));
	if ((s->name && !(d->name = ir_strdup(s->name))) ||
	    (s->domain && !(d->domain = ir_strdup(s->domain))) ||
	    (s->overload && !(d->overload = ir_strdup(s->overload))) ||
	    (s->doc && !(d->doc = ir_strdup(s->doc))) ||
	    (s->body && !(d->body = ir_graph_clone(s->body, NULL))) ||
	    opsets_copy(&d->opsets, &d->n_opsets, s->opsets, s->n_opsets) ||
	    ir_kv_copy(&d->meta, &d->n_meta, s->meta, s->n_meta))
		goto fail;
	if (s->n_attr_names) {
		if (!(d->attr_names = ir_alloc_array(s->n_attr_names, sizeof(char *))))
			goto fail;
		for (size_t i = 0; i < s->n_attr_names; i++)
			if (!(d->attr_names[d->n_attr_names++] = ir_strdup(s->attr_names[i])))
				goto fail;
	}
	if (s->n_attr_defaults) {
		if (!(d->attr_defaults = ir_alloc_array(s->n_attr_defaults, sizeof(struct ir_attr))))
			goto fail;
		for (size_t i = 0; i < s->n_attr_defaults; i++) {
			if (ir_attr_copy(&d->attr_defaults[i], &s->attr_defaults[i], NULL))
				goto fail;
			d->n_attr_defaults++;
		}
	}
	return 0;
fail:
	ir_function_clear(d);
	return IR_ENOMEM;
}

struct ir_model *ir_model_new(void)
{
	return calloc(1, sizeof(struct ir_model));
}

void ir_model_free(struct ir_model *m)
{
	if (!m)
		return;
	free(m->producer_name);
	free(m->producer_version);
	free(m->domain);
	free(m->doc);
	for (size_t i = 0; i < m->n_opsets; i++)
		free(m->opsets[i].domain);
	free(m->opsets);
	ir_kv_free(m->meta, m->n_meta);
	for (size_t i = 0; i < m->n_functions; i++)
		ir_function_clear(&m->functions[i]);
	free(m->functions);
	ir_graph_free(m->graph);
	ir_bytes_free_array(m->training, m->n_training);
	ir_bytes_free_array(m->devconfig, m->n_devconfig);
	free(m->path);
	free(m);
}

struct ir_model *ir_model_clone(const struct ir_model *m)
{
	struct ir_model *c = ir_model_new();
	if (!c)
		return NULL;
	c->ir_version = m->ir_version;
	c->has_ir_version = m->has_ir_version;
	c->model_version = m->model_version;
	c->has_model_version = m->has_model_version;
	c->file_dev = m->file_dev;
	c->file_ino = m->file_ino;
	c->file_size = m->file_size;
	c->had_external = m->had_external;
	if ((m->producer_name && !(c->producer_name = ir_strdup(m->producer_name))) ||
	    (m->producer_version && !(c->producer_version = ir_strdup(m->producer_version))) ||
	    (m->domain && !(c->domain = ir_strdup(m->domain))) ||
	    (m->doc && !(c->doc = ir_strdup(m->doc))) ||
	    (m->path && !(c->path = ir_strdup(m->path))) ||
	    opsets_copy(&c->opsets, &c->n_opsets, m->opsets, m->n_opsets) ||
	    ir_kv_copy(&c->meta, &c->n_meta, m->meta, m->n_meta) ||
	    ir_bytes_copy_array(&c->training, m->training, m->n_training) ||
	    ir_bytes_copy_array(&c->devconfig, m->devconfig, m->n_devconfig))
		goto fail;
	c->n_training = m->n_training;
	c->n_devconfig = m->n_devconfig;
	if (m->graph && !(c->graph = ir_graph_clone(m->graph, NULL)))
		goto fail;
	if (m->n_functions) {
		if (!(c->functions = ir_alloc_array(m->n_functions, sizeof(*c->functions))))
			goto fail;
		for (size_t i = 0; i < m->n_functions; i++) {
			if (ir_function_copy(&c->functions[i], &m->functions[i]))
				goto fail;
			c->n_functions++;
		}
	}
	return c;
fail:
	ir_model_free(c);
	return NULL;
}
