/*
 * equal.c - structural equality of models, for round-trip tests and for
 * telling whether a stage changed anything.
 */
#include "ir_private.h"

#include <stdarg.h>
#include <stdio.h>

struct why { char *buf; size_t size; };

static bool differ(struct why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool differ(struct why *w, const char *fmt, ...)
{
	if (w->buf && w->size) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(w->buf, w->size, fmt, ap);
		va_end(ap);
	}
	return false;
}

#define S(x) ((x) ? (x) : "(none)")

static bool kv_eq(const struct ir_kv *a, size_t na, const struct ir_kv *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!ir_str_eq(a[i].key, b[i].key) || !ir_str_eq(a[i].value, b[i].value))
			return false;
	return true;
}

static bool bytes_eq(const struct ir_bytes *a, const struct ir_bytes *b)
{
	if (!a->data || !b->data)
		return a->data == b->data;
	return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

static bool bytes_arr_eq(const struct ir_bytes *a, size_t na, const struct ir_bytes *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!bytes_eq(&a[i], &b[i]))
			return false;
	return true;
}

static bool tensor_eq(const struct ir_tensor *a, const struct ir_tensor *b, const char *what, struct why *w)
{
	if (!ir_tensor_equal(a, b))
		return differ(w, "%s: tensor type, shape or bytes differ", what);
	if (!ir_str_eq(a->name, b->name) || !ir_str_eq(a->doc, b->doc) ||
	    !kv_eq(a->meta, a->n_meta, b->meta, b->n_meta))
		return differ(w, "%s: tensor name, doc or metadata differ", what);
	return true;
}

static bool sparse_eq(const struct ir_sparse *a, const struct ir_sparse *b, const char *what, struct why *w)
{
	if (a->rank != b->rank || (a->rank && memcmp(a->dims, b->dims, (size_t)a->rank * 8)))
		return differ(w, "%s: sparse dims differ", what);
	if ((a->values == NULL) != (b->values == NULL) || (a->indices == NULL) != (b->indices == NULL))
		return differ(w, "%s: sparse parts differ", what);
	return (!a->values || tensor_eq(a->values, b->values, what, w)) &&
	       (!a->indices || tensor_eq(a->indices, b->indices, what, w));
}

static bool graph_eq(const struct ir_graph *a, const struct ir_graph *b, struct why *w);

static bool attr_eq(const struct ir_attr *a, const struct ir_attr *b, const char *where, struct why *w)
{
	char what[300];
	snprintf(what, sizeof(what), "%s attribute '%s'", where, S(a->name));
	if (!ir_str_eq(a->name, b->name) || a->type != b->type || a->has_type != b->has_type ||
	    !ir_str_eq(a->ref_attr_name, b->ref_attr_name) || !ir_str_eq(a->doc, b->doc))
		return differ(w, "%s: name, type, reference or doc differ", what);
	if (a->n != b->n)
		return differ(w, "%s: list lengths differ", what);
	if (memcmp(&a->f, &b->f, sizeof(float)) || a->i != b->i || !bytes_eq(&a->s, &b->s))
		return differ(w, "%s: values differ", what);
	if ((a->t == NULL) != (b->t == NULL) || (a->t && !tensor_eq(a->t, b->t, what, w)))
		return differ(w, "%s: tensors differ", what);
	if ((a->g == NULL) != (b->g == NULL) || (a->g && !graph_eq(a->g, b->g, w)))
		return false;
	if ((a->sp == NULL) != (b->sp == NULL) || (a->sp && !sparse_eq(a->sp, b->sp, what, w)))
		return false;
	if ((a->tp == NULL) != (b->tp == NULL) || (a->tp && !ir_type_equal(a->tp, b->tp)))
		return differ(w, "%s: type protos differ", what);
	if ((a->floats == NULL) != (b->floats == NULL) ||
	    (a->floats && memcmp(a->floats, b->floats, a->n * sizeof(float))) ||
	    (a->ints == NULL) != (b->ints == NULL) ||
	    (a->ints && memcmp(a->ints, b->ints, a->n * sizeof(int64_t))))
		return differ(w, "%s: list values differ", what);
	if ((a->strings == NULL) != (b->strings == NULL) ||
	    (a->strings && !bytes_arr_eq(a->strings, a->n, b->strings, b->n)))
		return differ(w, "%s: strings differ", what);
	for (size_t i = 0; a->tensors && b->tensors && i < a->n; i++)
		if (!tensor_eq(a->tensors[i], b->tensors[i], what, w))
			return false;
	for (size_t i = 0; a->graphs && b->graphs && i < a->n; i++)
		if (!graph_eq(a->graphs[i], b->graphs[i], w))
			return false;
	for (size_t i = 0; a->sparses && b->sparses && i < a->n; i++)
		if (!sparse_eq(a->sparses[i], b->sparses[i], what, w))
			return false;
	for (size_t i = 0; a->tps && b->tps && i < a->n; i++)
		if (!ir_type_equal(&a->tps[i], &b->tps[i]))
			return differ(w, "%s: type protos differ", what);
	if ((a->tensors == NULL) != (b->tensors == NULL) || (a->graphs == NULL) != (b->graphs == NULL) ||
	    (a->sparses == NULL) != (b->sparses == NULL) || (a->tps == NULL) != (b->tps == NULL))
		return differ(w, "%s: list kinds differ", what);
	return true;
}

static bool value_eq(const struct ir_value *a, const struct ir_value *b, const char *what, struct why *w)
{
	if (!ir_str_eq(a->name, b->name))
		return differ(w, "%s: '%s' vs '%s'", what, a->name, b->name);
	if (!ir_type_equal(&a->type, &b->type) || a->has_type_proto != b->has_type_proto) {
		char x[128], y[128];
		return differ(w, "%s '%s': type %s vs %s", what, a->name, ir_type_str(&a->type, x, sizeof(x)),
			      ir_type_str(&b->type, y, sizeof(y)));
	}
	if (!ir_str_eq(a->vi_doc, b->vi_doc) || !kv_eq(a->vi_meta, a->n_vi_meta, b->vi_meta, b->n_vi_meta))
		return differ(w, "%s '%s': doc or metadata differ", what, a->name);
	return true;
}

static int cmp_vinfo(const void *x, const void *y)
{
	const struct ir_value *a = *(struct ir_value *const *)x, *b = *(struct ir_value *const *)y;
	return (a->vinfo_order > b->vinfo_order) - (a->vinfo_order < b->vinfo_order);
}

static bool vinfo_eq(const struct ir_graph *a, const struct ir_graph *b, struct why *w)
{
	size_t na = 0, nb = 0;
	for (size_t i = 0; i < a->n_values; i++)
		na += a->values[i]->has_vinfo;
	for (size_t i = 0; i < b->n_values; i++)
		nb += b->values[i]->has_vinfo;
	if (na != nb)
		return differ(w, "graph '%s': %zu vs %zu value_info entries", S(a->name), na, nb);
	struct ir_value **x = ir_alloc_array(na, sizeof(*x)), **y = ir_alloc_array(nb, sizeof(*y));
	bool ok = x && y;
	size_t k = 0, l = 0;
	for (size_t i = 0; ok && i < a->n_values; i++)
		if (a->values[i]->has_vinfo)
			x[k++] = a->values[i];
	for (size_t i = 0; ok && i < b->n_values; i++)
		if (b->values[i]->has_vinfo)
			y[l++] = b->values[i];
	if (ok) {
		qsort(x, na, sizeof(*x), cmp_vinfo);
		qsort(y, nb, sizeof(*y), cmp_vinfo);
		for (size_t i = 0; ok && i < na; i++)
			ok = value_eq(x[i], y[i], "value_info", w);
	}
	free(x);
	free(y);
	return ok;
}

static bool graph_eq(const struct ir_graph *a, const struct ir_graph *b, struct why *w)
{
	if (!ir_str_eq(a->name, b->name) || !ir_str_eq(a->doc, b->doc) ||
	    !kv_eq(a->meta, a->n_meta, b->meta, b->n_meta))
		return differ(w, "graph '%s': name, doc or metadata differ", S(a->name));
	if (a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs || a->n_inits != b->n_inits ||
	    a->n_sparse_inits != b->n_sparse_inits || a->n_nodes != b->n_nodes)
		return differ(w, "graph '%s': counts differ (inputs %d/%d, outputs %d/%d, initializers %d/%d, nodes %d/%d)",
			      S(a->name), a->n_inputs, b->n_inputs, a->n_outputs, b->n_outputs, a->n_inits,
			      b->n_inits, a->n_nodes, b->n_nodes);
	for (int i = 0; i < a->n_inputs; i++)
		if (!value_eq(a->inputs[i], b->inputs[i], "input", w))
			return false;
	for (int i = 0; i < a->n_outputs; i++)
		if (!value_eq(a->outputs[i], b->outputs[i], "output", w))
			return false;
	for (int i = 0; i < a->n_inits; i++) {
		char what[300];
		snprintf(what, sizeof(what), "initializer '%s'", a->inits[i]->name);
		if (!ir_str_eq(a->inits[i]->name, b->inits[i]->name))
			return differ(w, "initializer %d: '%s' vs '%s'", i, a->inits[i]->name, b->inits[i]->name);
		if (!tensor_eq(a->inits[i]->init, b->inits[i]->init, what, w))
			return false;
	}
	for (int i = 0; i < a->n_sparse_inits; i++)
		if (!ir_str_eq(a->sparse_inits[i]->name, b->sparse_inits[i]->name) ||
		    !sparse_eq(a->sparse_inits[i]->sparse_init, b->sparse_inits[i]->sparse_init, "sparse initializer", w))
			return differ(w, "sparse initializer %d differs", i);
	if (!vinfo_eq(a, b, w))
		return false;
	if (!bytes_arr_eq(a->qannot, a->n_qannot, b->qannot, b->n_qannot))
		return differ(w, "graph '%s': quantization annotations differ", S(a->name));
	const struct ir_node *n = a->first, *m = b->first;
	for (; n && m; n = n->next, m = m->next) {
		char where[300];
		snprintf(where, sizeof(where), "node '%s' (n%d, %s)", n->name, n->id, n->op_type);
		if (!ir_str_eq(n->name, m->name) || !ir_str_eq(n->op_type, m->op_type) ||
		    !ir_str_eq(n->domain, m->domain) || !ir_str_eq(n->overload, m->overload))
			return differ(w, "%s: vs '%s' (%s)", where, m->name, m->op_type);
		if (!ir_str_eq(n->doc, m->doc) || !kv_eq(n->meta, n->n_meta, m->meta, m->n_meta) ||
		    !bytes_arr_eq(n->devcfg, n->n_devcfg, m->devcfg, m->n_devcfg))
			return differ(w, "%s: doc, metadata or device configuration differ", where);
		if (n->n_inputs != m->n_inputs || n->n_outputs != m->n_outputs || n->n_attrs != m->n_attrs)
			return differ(w, "%s: input, output or attribute counts differ", where);
		for (int i = 0; i < n->n_inputs; i++)
			if ((n->inputs[i] == NULL) != (m->inputs[i] == NULL) ||
			    (n->inputs[i] && !ir_str_eq(n->inputs[i]->name, m->inputs[i]->name)))
				return differ(w, "%s: input %d differs", where, i);
		for (int i = 0; i < n->n_outputs; i++)
			if ((n->outputs[i] == NULL) != (m->outputs[i] == NULL) ||
			    (n->outputs[i] && !ir_str_eq(n->outputs[i]->name, m->outputs[i]->name)))
				return differ(w, "%s: output %d differs", where, i);
		for (int i = 0; i < n->n_attrs; i++)
			if (!attr_eq(&n->attrs[i], &m->attrs[i], where, w))
				return false;
	}
	return true;
}

static bool opsets_eq(const struct ir_opset *a, size_t na, const struct ir_opset *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!ir_str_eq(a[i].domain, b[i].domain) || a[i].version != b[i].version ||
		    a[i].has_version != b[i].has_version)
			return false;
	return true;
}

bool ir_graph_equal(const struct ir_graph *a, const struct ir_graph *b, char *why, size_t size)
{
	struct why w = { why, size };
	return graph_eq(a, b, &w);
}

bool ir_model_equal(const struct ir_model *a, const struct ir_model *b, char *why, size_t size)
{
	struct why w = { why, size };
	if (a->ir_version != b->ir_version || a->has_ir_version != b->has_ir_version ||
	    a->model_version != b->model_version || a->has_model_version != b->has_model_version)
		return differ(&w, "ir_version or model_version differ");
	if (!ir_str_eq(a->producer_name, b->producer_name) || !ir_str_eq(a->producer_version, b->producer_version) ||
	    !ir_str_eq(a->domain, b->domain) || !ir_str_eq(a->doc, b->doc))
		return differ(&w, "producer, domain or doc differ");
	if (!opsets_eq(a->opsets, a->n_opsets, b->opsets, b->n_opsets))
		return differ(&w, "opset imports differ");
	if (!kv_eq(a->meta, a->n_meta, b->meta, b->n_meta))
		return differ(&w, "metadata differs");
	if (!bytes_arr_eq(a->training, a->n_training, b->training, b->n_training) ||
	    !bytes_arr_eq(a->devconfig, a->n_devconfig, b->devconfig, b->n_devconfig))
		return differ(&w, "training info or device configuration differ");
	if (a->n_functions != b->n_functions)
		return differ(&w, "%zu vs %zu functions", a->n_functions, b->n_functions);
	for (size_t i = 0; i < a->n_functions; i++) {
		const struct ir_function *f = &a->functions[i], *g = &b->functions[i];
		if (!ir_str_eq(f->name, g->name) || !ir_str_eq(f->domain, g->domain) ||
		    !ir_str_eq(f->overload, g->overload) || !ir_str_eq(f->doc, g->doc) ||
		    !opsets_eq(f->opsets, f->n_opsets, g->opsets, g->n_opsets) ||
		    !kv_eq(f->meta, f->n_meta, g->meta, g->n_meta) || f->n_attr_names != g->n_attr_names ||
		    f->n_attr_defaults != g->n_attr_defaults)
			return differ(&w, "function '%s' differs", S(f->name));
		for (size_t j = 0; j < f->n_attr_names; j++)
			if (!ir_str_eq(f->attr_names[j], g->attr_names[j]))
				return differ(&w, "function '%s': attribute names differ", S(f->name));
		for (size_t j = 0; j < f->n_attr_defaults; j++)
			if (!attr_eq(&f->attr_defaults[j], &g->attr_defaults[j], "function", &w))
				return false;
		if ((f->body == NULL) != (g->body == NULL) || (f->body && !graph_eq(f->body, g->body, &w)))
			return false;
	}
	if ((a->graph == NULL) != (b->graph == NULL))
		return differ(&w, "one model has no graph");
	return !a->graph || graph_eq(a->graph, b->graph, &w);
}
