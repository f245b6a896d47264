/*
 * cmd_shapes.c - shapes: every value's element type and shape as inferred,
 * with the reason wherever something stays unknown.
 */
#include "shell.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct shapes_opts {
	const char *pattern;
	bool unknown_only;
	bool json;
	bool subgraphs;
	int shown, total, unknown, conflicts;
	struct sh_json j;
	struct sh_table t;
};


static void source(const struct ir_value *v, char *buf, size_t size)
{
	if (v->init && v->is_input)
		snprintf(buf, size, "input (initializer)");
	else if (v->init)
		snprintf(buf, size, "initializer");
	else if (v->sparse_init)
		snprintf(buf, size, "sparse initializer");
	else if (v->is_input)
		snprintf(buf, size, "input");
	else if (v->producer)
		sh_node_desc(v->producer, buf, size);
	else if (v->outer)
		snprintf(buf, size, "enclosing graph");
	else
		snprintf(buf, size, "declared only");
}

static void one(struct shapes_opts *o, const char *prefix, const struct ir_value *v)
{
	const struct ir_type *t = ir_value_type(v);
	bool known = ir_type_fully_known(t);
	o->total++;
	o->unknown += !known;
	o->conflicts += v->conflict;
	char name[1024];
	snprintf(name, sizeof(name), "%s%s", prefix, v->name);
	if (o->unknown_only && known && !v->conflict)
		return;
	if (o->pattern && fnmatch(o->pattern, v->name, 0) != 0 && fnmatch(o->pattern, name, 0) != 0)
		return;
	o->shown++;
	char src[300], ty[512], note[1024] = "";
	source(v, src, sizeof(src));
	if (v->conflict) {
		char d[256];
		snprintf(note, sizeof(note), "the model declares %s", ir_type_str(&v->type, d, sizeof(d)));
	} else if (!known) {
		snprintf(note, sizeof(note), "%s", v->why ? v->why : "unknown");
	}
	if (o->json) {
		sh_json_obj(&o->j);
		sh_json_kstr(&o->j, "name", name);
		sh_json_key(&o->j, "type");
		sh_json_type(&o->j, t);
		sh_json_kstr(&o->j, "source", src);
		sh_json_key(&o->j, "producer");
		if (v->producer)
			sh_json_int(&o->j, v->producer->id);
		else
			sh_json_null(&o->j);
		sh_json_kbool(&o->j, "known", known);
		sh_json_kstr(&o->j, "why", known ? NULL : v->why);
		sh_json_kbool(&o->j, "conflict", v->conflict);
		if (v->conflict) {
			sh_json_key(&o->j, "declared");
			sh_json_type(&o->j, &v->type);
		}
		sh_json_key(&o->j, "values");
		if (v->n_known >= 0) {
			sh_json_arr(&o->j);
			for (int k = 0; k < v->n_known; k++) {
				if (v->known[k].kind == IR_DIM_VALUE)
					sh_json_int(&o->j, v->known[k].value);
				else if (v->known[k].kind == IR_DIM_PARAM)
					sh_json_str(&o->j, v->known[k].param);
				else
					sh_json_null(&o->j);
			}
			sh_json_arr_end(&o->j);
		} else {
			sh_json_null(&o->j);
		}
		sh_json_obj_end(&o->j);
		return;
	}
	const char *elem = "?";
	char shape[512] = "?";
	if (t->kind == IR_TYPE_TENSOR || t->kind == IR_TYPE_SPARSE_TENSOR) {
		elem = t->elem ? ir_dtype_name(t->elem) : "?";
		ir_type_str(t, ty, sizeof(ty));
		const char *br = strchr(ty, '[');
		snprintf(shape, sizeof(shape), "%s", br ? br : "?");
		if (!strcmp(shape, "[?]") && t->rank < 0)
			snprintf(shape, sizeof(shape), "?");
	} else if (t->kind != IR_TYPE_NONE) {
		elem = "";
		ir_type_str(t, shape, sizeof(shape));
	}
	sh_table_row(&o->t, sh_esc(name), elem, shape, src, sh_esc(note));
}

static void list_graph(struct shapes_opts *o, const struct ir_graph *g, const char *prefix)
{
	for (int i = 0; i < g->n_inputs; i++)
		one(o, prefix, g->inputs[i]);
	for (int i = 0; i < g->n_inits; i++)
		if (!g->inits[i]->is_input)
			one(o, prefix, g->inits[i]);
	for (int i = 0; i < g->n_sparse_inits; i++)
		if (!g->sparse_inits[i]->is_input)
			one(o, prefix, g->sparse_inits[i]);
	ir_for_each_node(g, n) {
		for (int k = 0; k < n->n_outputs; k++)
			if (n->outputs[k])
				one(o, prefix, n->outputs[k]);
		if (!o->subgraphs)
			continue;
		for (int a = 0; a < n->n_attrs; a++) {
			const struct ir_attr *at = &n->attrs[a];
			for (size_t k = 0; k < (at->g ? 1 : at->graphs ? at->n : 0); k++) {
				const struct ir_graph *sg = at->g ? at->g : at->graphs[k];
				char p[512];
				if (at->g)
					snprintf(p, sizeof(p), "%sn%d.%s/", prefix, n->id, at->name);
				else
					snprintf(p, sizeof(p), "%sn%d.%s[%zu]/", prefix, n->id, at->name, k);
				list_graph(o, sg, p);
			}
		}
	}
}

int cmd_shapes(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos > 1)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s) || sh_infer(s))
		return -1;
	struct shapes_opts o = {
		.pattern = a.npos ? a.pos[0] : NULL,
		.unknown_only = sh_flag(&a, "unknown"),
		.json = sh_flag(&a, "json"),
		.subgraphs = sh_flag(&a, "subgraphs"),
	};
	if (o.json) {
		sh_json_begin(&o.j, s->out);
		sh_json_arr(&o.j);
	} else {
		sh_table_init(&o.t, 5, "value", "dtype", "shape", "from", "note");
	}
	list_graph(&o, s->model->graph, "");
	if (o.json) {
		sh_json_arr_end(&o.j);
		sh_json_end(&o.j);
	} else {
		if (o.shown)
			sh_table_print(s, &o.t, true);
		sh_table_free(&o.t);
		if (o.pattern || o.unknown_only)
			sh_printf(s, "%d shown; ", o.shown);
		sh_printf(s, "%d value%s, %d not fully known, %d contradicting the model's declarations\n", o.total,
			  o.total == 1 ? "" : "s", o.unknown, o.conflicts);
	}
	/* the contradictions, once per inference run */
	struct ir_diag *d = &s->infer_diag;
	if (!o.json && !s->infer_warned) {
		s->infer_warned = true;
		for (size_t i = 0; i < d->n_warnings; i++)
			sh_warn(s, "%s", sh_esc(d->warnings[i]));
		if (d->dropped)
			sh_warn(s, "%zu more warnings not shown", d->dropped);
	}
	return 0;
}
