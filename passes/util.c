/*
 * util.c - helpers for writing passes (declared in pass.h).
 */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pass_n_readers(const struct ir_value *v)
{
	int n = (int)v->n_uses;
	if (v->is_output)
		n++;
	return n;
}

struct ir_node *pass_only_reader(const struct ir_value *v)
{
	if (v->is_output || v->n_uses != 1 || v->uses[0].slot < 0)
		return NULL;
	return v->uses[0].node;
}

const struct ir_tensor *pass_const_input(const struct ir_node *n, int i)
{
	if (i < 0 || i >= n->n_inputs || !n->inputs[i])
		return NULL;
	const struct ir_value *v = n->inputs[i];
	if (v->is_input)   /* an initializer that is also a graph input can be overridden */
		return NULL;
	return ir_value_const(v);
}

char *pass_unique_name(const struct ir_graph *g, const char *base)
{
	size_t n = strlen(base) + 24;
	char *s = malloc(n);
	if (!s)
		return NULL;
	snprintf(s, n, "%s", base);
	for (unsigned k = 1; ir_value_find_scoped(g, s); k++)
		snprintf(s, n, "%s_%u", base, k);
	return s;
}

struct ir_value *pass_new_value(struct ir_graph *g, const char *base, struct ir_diag *d)
{
	char *name = pass_unique_name(g, base);
	if (!name) {
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	struct ir_value *v = ir_value_new(g, name, d);
	free(name);
	return v;
}

struct ir_node *pass_emit(struct pass_ctx *c, const char *op, const struct ir_node *anchor, struct ir_value **in,
			  int n_in, const char *out_base, struct ir_node *before)
{
	struct ir_graph *g = c->m->graph;
	char *name = pass_new_node_name(g, anchor, op);
	if (!name) {
		ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	struct ir_node *n = ir_node_new(g, op, NULL, name, n_in, 1, before);
	free(name);
	if (!n) {
		ir_diag_err(c->d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	for (int i = 0; i < n_in; i++)
		if (ir_node_set_input(n, i, in[i])) {
			ir_diag_err(c->d, IR_ENOMEM, "out of memory");
			return NULL;
		}
	struct ir_value *v = pass_new_value(g, out_base, c->d);
	if (!v || ir_node_set_output(n, 0, v, c->d))
		return NULL;
	return n;
}

struct ir_value *pass_new_init(struct ir_graph *g, const char *base, struct ir_tensor *t, struct ir_diag *d)
{
	struct ir_value *v = pass_new_value(g, base, d);
	if (!v)
		return NULL;
	if (ir_value_set_init(v, t, d)) {
		ir_value_remove(v);
		return NULL;
	}
	return v;
}

const char *pass_node_name(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && *n->name)
		snprintf(buf, size, "%s", n->name);
	else
		snprintf(buf, size, "n%d", n->id);
	return buf;
}

double *pass_tensor_f64(const struct ir_tensor *t)
{
	if (t->dtype == IR_STRING || !ir_dtype_valid(t->dtype))
		return NULL;
	double *v = malloc(sizeof(double) * (t->numel ? t->numel : 1));
	if (!v)
		return NULL;
	const void *p = ir_tensor_data(t);
	for (uint64_t i = 0; i < t->numel; i++)
		v[i] = ir_elem_to_f64(t->dtype, p, i);
	return v;
}

struct ir_tensor *pass_tensor_from_f64(int dtype, int rank, const int64_t *dims, const double *v, struct ir_diag *d)
{
	struct ir_tensor *t = ir_tensor_new(dtype, rank, dims, d);
	if (!t)
		return NULL;
	void *p = ir_tensor_mutable(t);
	for (uint64_t i = 0; i < t->numel; i++) {
		switch (dtype) {
		case IR_FLOAT: ((float *)p)[i] = (float)v[i]; break;
		case IR_DOUBLE: ((double *)p)[i] = v[i]; break;
		case IR_FLOAT16: ((uint16_t *)p)[i] = ir_f32_to_f16((float)v[i]); break;
		case IR_BFLOAT16: ((uint16_t *)p)[i] = ir_f32_to_bf16((float)v[i]); break;
		default:
			ir_tensor_unref(t);
			ir_diag_err(d, IR_ERR, "cannot make a %s tensor from numbers here", ir_dtype_name(dtype));
			return NULL;
		}
	}
	return t;
}

/*
 * Removes the constants in vs[] (initializers or Constant nodes) that
 * nothing reads any more. vs may hold NULLs and repeats.
 */
void pass_drop_dead_consts(struct ir_value **vs, int n)
{
	for (int i = 0; i < n; i++) {
		struct ir_value *v = vs[i];
		if (!v)
			continue;
		for (int j = i + 1; j < n; j++)   /* each value once: removing frees it */
			if (vs[j] == v)
				vs[j] = NULL;
		if (pass_n_readers(v) || v->is_input)
			continue;
		if (v->producer) {
			if (v->producer->op == IR_OP_Constant && v->producer->n_outputs == 1)
				ir_node_remove(v->producer, NULL);
		} else if (v->init) {
			ir_value_remove(v);
		}
	}
}

int pass_infer(struct pass_ctx *c)
{
	if (c->m->infer_current)
		return 0;
	int rc = ir_infer(c->m, NULL);
	if (!rc)
		c->m->infer_current = true;
	return rc;
}

int pass_each_node(struct pass_ctx *c, bool (*want)(const struct ir_node *n),
		   int (*fn)(struct pass_ctx *c, struct ir_node *n))
{
	struct ir_graph *g = c->m->graph;
	int *ids = malloc(sizeof(int) * (size_t)(g->n_nodes ? g->n_nodes : 1)), n_ids = 0;
	if (!ids)
		return ir_diag_err(c->d, IR_ENOMEM, "out of memory");
	ir_for_each_node(g, n)
		if (want(n))
			ids[n_ids++] = n->id;
	int rc = 0;
	for (int i = 0; i < n_ids && !rc; i++) {
		struct ir_node *n = ir_node_by_id(g, ids[i]);
		if (n)
			rc = fn(c, n);
	}
	free(ids);
	return rc;
}

int pass_set_int_attr(struct ir_node *n, const char *name, int64_t v, struct ir_diag *d)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_INT;
	a.has_type = true;
	a.i = v;
	if (!a.name)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	return ir_node_set_attr(n, &a, d);
}

int pass_set_ints_attr(struct ir_node *n, const char *name, const int64_t *v, int k, struct ir_diag *d)
{
	struct ir_attr a = { 0 };
	a.name = strdup(name);
	a.type = IR_ATTR_INTS;
	a.has_type = true;
	a.n = (size_t)k;
	a.ints = malloc(sizeof(int64_t) * (size_t)(k ? k : 1));
	if (!a.name || !a.ints) {
		free(a.name);
		free(a.ints);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	if (k)
		memcpy(a.ints, v, sizeof(int64_t) * (size_t)k);
	return ir_node_set_attr(n, &a, d);
}

