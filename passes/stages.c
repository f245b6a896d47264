/*
 * stages.c - the stage history: stage 0 is the model as loaded, every pass
 * or hand edit appends a stage made from the current one.
 */
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pass_history_init(struct pass_history *h, struct ir_model *m, const char *label)
{
	memset(h, 0, sizeof(*h));
	h->cap = 8;
	if (!(h->st = calloc((size_t)h->cap, sizeof(*h->st))))
		return IR_ENOMEM;
	h->st[0].m = m;
	h->st[0].label = strdup(label ? label : "loaded");
	h->st[0].parent = -1;
	pass_report_init(&h->st[0].rep, NULL);
	h->n = 1;
	h->cur = 0;
	return h->st[0].label ? 0 : IR_ENOMEM;
}

static void stage_free(struct pass_stage *s)
{
	ir_model_free(s->m);
	free(s->label);
	pass_report_clear(&s->rep);
	memset(s, 0, sizeof(*s));
}

void pass_history_free(struct pass_history *h)
{
	for (int i = 0; i < h->n; i++)
		stage_free(&h->st[i]);
	free(h->st);
	memset(h, 0, sizeof(*h));
}

int pass_history_push(struct pass_history *h, struct ir_model *m, const char *label, struct pass_report *rep)
{
	/* the stages after the current one (undone) go */
	while (h->n > h->cur + 1)
		stage_free(&h->st[--h->n]);
	if (h->n == h->cap) {
		int cap = 2 * h->cap;
		struct pass_stage *s = realloc(h->st, sizeof(*s) * (size_t)cap);
		if (!s)
			return IR_ENOMEM;
		h->st = s;
		h->cap = cap;
	}
	struct pass_stage *s = &h->st[h->n];
	memset(s, 0, sizeof(*s));
	if (!(s->label = strdup(label ? label : "")))
		return IR_ENOMEM;
	s->m = m;
	s->parent = h->cur;
	if (rep) {
		s->rep = *rep;
		memset(rep, 0, sizeof(*rep));
	} else {
		pass_report_init(&s->rep, NULL);
	}
	h->cur = h->n++;
	return 0;
}

struct ir_model *pass_history_model(const struct pass_history *h)
{
	return h->n ? h->st[h->cur].m : NULL;
}

/* The old name of `name` across one stage's report (new -> old). */
static const char *map_back(const struct pass_stage *s, const char *name)
{
	for (int i = 0; i < s->rep.n_map; i++)
		if (!strcmp(s->rep.map[i].new_name, name))
			return s->rep.map[i].old_name;
	return name;
}

/* The new name of `name` across one stage's report (old -> new). */
static const char *map_fwd(const struct pass_stage *s, const char *name)
{
	for (int i = 0; i < s->rep.n_map; i++)
		if (!strcmp(s->rep.map[i].old_name, name))
			return s->rep.map[i].new_name;
	return name;
}

static bool descends(const struct pass_history *h, int from, int to)
{
	for (int s = to; s >= 0; s = h->st[s].parent)
		if (s == from)
			return true;
	return false;
}

const char *pass_history_map(const struct pass_history *h, int to, int from, const char *name)
{
	if (to < 0 || from < 0 || to >= h->n || from >= h->n)
		return NULL;
	if (to == from)
		return name;
	if (descends(h, from, to)) {
		/* walk back from `to` to `from` */
		for (int s = to; s != from; s = h->st[s].parent)
			name = map_back(&h->st[s], name);
		return name;
	}
	if (descends(h, to, from)) {
		/* forward: collect the chain from `to` down to `from`, apply in order */
		int chain[4096], n = 0;
		for (int s = from; s != to && n < 4096; s = h->st[s].parent)
			chain[n++] = s;
		for (int i = n - 1; i >= 0; i--)
			name = map_fwd(&h->st[chain[i]], name);
		return name;
	}
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Matching nodes between stages (diff, dot --diff)                          */
/* ------------------------------------------------------------------------ */

const struct ir_node *pass_stage_match(const struct ir_graph *other, const struct ir_node *n)
{
	const struct ir_node *m = ir_node_by_id(other, n->id);
	if (!m || strcmp(m->op_type, n->op_type))
		return NULL;
	return m;
}

bool pass_node_same_io(const struct ir_node *x, const struct ir_node *y)
{
	if (x->n_inputs != y->n_inputs || x->n_outputs != y->n_outputs)
		return false;
	for (int i = 0; i < x->n_inputs; i++) {
		const char *p = x->inputs[i] ? x->inputs[i]->name : "", *q = y->inputs[i] ? y->inputs[i]->name : "";
		if (strcmp(p, q))
			return false;
	}
	for (int i = 0; i < x->n_outputs; i++) {
		const char *p = x->outputs[i] ? x->outputs[i]->name : "", *q = y->outputs[i] ? y->outputs[i]->name : "";
		if (strcmp(p, q))
			return false;
	}
	return true;
}

bool pass_node_same_attrs(const struct ir_node *x, const struct ir_node *y, char *which, size_t size)
{
	char b1[256], b2[256];
	if (size)
		which[0] = 0;
	size_t k = 0;
	bool same = true;
	for (int i = 0; i < x->n_attrs; i++) {
		const struct ir_attr *ya = ir_node_attr(y, x->attrs[i].name);
		if (!ya || strcmp(ir_attr_str(&x->attrs[i], b1, sizeof(b1)), ir_attr_str(ya, b2, sizeof(b2)))) {
			same = false;
			k += (size_t)snprintf(which + k, k < size ? size - k : 0, "%s%s", k ? ", " : "", x->attrs[i].name);
		}
	}
	for (int i = 0; i < y->n_attrs; i++)
		if (!ir_node_attr(x, y->attrs[i].name)) {
			same = false;
			k += (size_t)snprintf(which + k, k < size ? size - k : 0, "%s%s", k ? ", " : "", y->attrs[i].name);
		}
	return same;
}
