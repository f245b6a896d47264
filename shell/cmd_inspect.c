/*
 * cmd_inspect.c - info, nodes, show, tensor, ops, inputs, outputs.
 */
#include "shell.h"

#include "exec/exec.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ir_type_str, except that a tensor of unknown rank says so ("float32[?]"
 * would read as one dimension of unknown size) */
static const char *type_s(const struct ir_type *t, char *buf, size_t size)
{
	if ((t->kind == IR_TYPE_TENSOR || t->kind == IR_TYPE_SPARSE_TENSOR) && t->rank < 0) {
		snprintf(buf, size, "%s%s (shape unknown)", t->kind == IR_TYPE_SPARSE_TENSOR ? "sparse " : "",
			 t->elem ? ir_dtype_name(t->elem) : "?");
		return buf;
	}
	return ir_type_str(t, buf, size);
}

static const char *domain_s(const char *d)
{
	return d && *d ? d : "ai.onnx";
}

/* "a, b, c" of value names, "" for omitted optional slots shown as "-" */
static char *names_list(struct ir_value *const *vals, int n)
{
	size_t cap = 64, len = 0;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	s[0] = 0;
	for (int i = 0; i < n; i++) {
		const char *nm = vals[i] ? sh_esc(vals[i]->name) : "-";
		size_t need = len + strlen(nm) + 3;
		if (need > cap) {
			while (cap < need)
				cap *= 2;
			char *t = realloc(s, cap);
			if (!t)
				break;
			s = t;
		}
		len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? ", " : "", nm);
	}
	return s;
}

/* An attribute's value as text, without the type ir_attr_str starts some
 * with ("graph 'body' (3 nodes)"): the type has a column of its own. */
static const char *attr_value(const struct ir_attr *a, char *buf, size_t size)
{
	ir_attr_str(a, buf, size);
	const char *t = ir_attr_type_name(a->type);
	size_t n = strlen(t);
	if (strncmp(buf, t, n) == 0 && buf[n] == ' ')
		memmove(buf, buf + n + 1, strlen(buf + n + 1) + 1);
	return buf;
}

/* The model's function that a node calls, if any. */
static const struct ir_function *function_of(const struct ir_model *m, const char *domain, const char *op)
{
	const char *dom = domain_s(domain);
	for (size_t i = 0; i < m->n_functions; i++)
		if (strcmp(m->functions[i].name, op) == 0 && strcmp(domain_s(m->functions[i].domain), dom) == 0)
			return &m->functions[i];
	return NULL;
}

static int parse_common(struct session *s, int argc, char **argv, struct sh_args *a)
{
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, a))
		return -1;
	return sh_need_model(s) ? 0 : -1;
}

/* ---- info ---- */

/* What `info` says about precision: stored bytes by dtype (initializers and
 * Constant tensors, as the weights row counts them), and the nodes that
 * quantize and cast. */
struct precision_info {
	uint64_t bytes[IR_DTYPE_COUNT];
	int n_q, n_dq, n_dq_weights, n_cast;
	int cast_to[IR_DTYPE_COUNT];     /* Cast nodes by their `to` */
	bool qtypes[IR_DTYPE_COUNT];     /* types quantized to (Q outputs, DQ inputs) */
};

static void qtype(struct precision_info *p, const struct ir_value *v)
{
	const struct ir_type *t = v ? ir_value_type(v) : NULL;
	const struct ir_tensor *c = v ? ir_value_const(v) : NULL;
	int e = c ? c->dtype : t && t->kind == IR_TYPE_TENSOR ? t->elem : 0;
	if (e > 0 && e < IR_DTYPE_COUNT)
		p->qtypes[e] = true;
}

static int precision_cb(struct ir_graph *g, void *arg)
{
	struct precision_info *p = arg;
	for (int i = 0; i < g->n_inits; i++) {
		const struct ir_tensor *t = g->inits[i]->init;
		if (t && t->dtype > 0 && t->dtype < IR_DTYPE_COUNT)
			p->bytes[t->dtype] += t->nbytes;
	}
	ir_for_each_node(g, n) {
		if (n->op == IR_OP_Constant) {
			const struct ir_attr *a = ir_node_attr(n, "value");
			if (a && a->type == IR_ATTR_TENSOR && a->t && a->t->dtype > 0 && a->t->dtype < IR_DTYPE_COUNT)
				p->bytes[a->t->dtype] += a->t->nbytes;
		} else if (n->op == IR_OP_QuantizeLinear) {
			p->n_q++;
			if (n->n_outputs > 0)
				qtype(p, n->outputs[0]);
		} else if (n->op == IR_OP_DequantizeLinear) {
			p->n_dq++;
			p->n_dq_weights += ir_node_is_weight_dq(n, NULL);
			if (n->n_inputs > 0)
				qtype(p, n->inputs[0]);
		} else if (n->op == IR_OP_Cast) {
			p->n_cast++;
			int64_t to = ir_node_attr_int(n, "to", 0);
			if (to > 0 && to < IR_DTYPE_COUNT)
				p->cast_to[to]++;
		}
	}
	return 0;
}

/* Whether a type is a reduced float precision a Cast converts to (float16, bfloat16, float8). */
static bool low_float(int dtype)
{
	return dtype == IR_FLOAT16 || dtype == IR_BFLOAT16 || ir_precision_class(dtype) == IR_F8E4M3FN;
}

/* The dtypes of p->bytes, most bytes first, into order[]; returns how many. */
static int by_bytes(const struct precision_info *p, int *order)
{
	int n = 0;
	for (int t = 1; t < IR_DTYPE_COUNT; t++)
		if (p->bytes[t]) {
			int k = n++;
			while (k > 0 && p->bytes[order[k - 1]] < p->bytes[t]) {
				order[k] = order[k - 1];
				k--;
			}
			order[k] = t;
		}
	return n;
}

int cmd_info(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (parse_common(s, argc, argv, &a))
		return -1;
	if (a.npos)
		return sh_usage(s, argv[0]);
	const struct ir_model *m = s->model;
	const struct ir_graph *g = m->graph;
	struct ir_graph_totals t;
	ir_graph_totals(g, &t);
	sh_infer(s);   /* the types of quantized values, when not declared */
	struct precision_info pi;
	memset(&pi, 0, sizeof(pi));
	ir_graph_walk((struct ir_graph *)g, precision_cb, &pi);
	int order[IR_DTYPE_COUNT];
	int nd = by_bytes(&pi, order);
	char b1[64], b2[64], tb[256];
	if (sh_flag(&a, "json")) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		sh_json_kstr(&j, "name", s->name);
		sh_json_kstr(&j, "path", m->path);
		sh_json_kstr(&j, "producer_name", m->producer_name);
		sh_json_kstr(&j, "producer_version", m->producer_version);
		sh_json_key(&j, "ir_version");
		if (m->has_ir_version)
			sh_json_int(&j, m->ir_version);
		else
			sh_json_null(&j);
		sh_json_kstr(&j, "domain", m->domain);
		sh_json_key(&j, "opsets");
		sh_json_obj(&j);
		for (size_t i = 0; i < m->n_opsets; i++)
			sh_json_kint(&j, domain_s(m->opsets[i].domain), m->opsets[i].version);
		sh_json_obj_end(&j);
		sh_json_kstr(&j, "graph", g->name);
		sh_json_kint(&j, "nodes", t.n_nodes);
		sh_json_kint(&j, "nodes_in_subgraphs", t.n_nodes_all - t.n_nodes);
		sh_json_kint(&j, "subgraphs", t.n_subgraphs);
		sh_json_kint(&j, "initializers", t.n_inits);
		sh_json_kuint(&j, "weight_elements", t.n_params);
		sh_json_kuint(&j, "weight_bytes", t.weight_bytes);
		sh_json_kbool(&j, "external_data", m->had_external);
		sh_json_key(&j, "weight_bytes_by_dtype");
		sh_json_obj(&j);
		for (int i = 0; i < nd; i++)
			sh_json_kuint(&j, ir_dtype_name(order[i]), pi.bytes[order[i]]);
		sh_json_obj_end(&j);
		sh_json_key(&j, "quantization");
		sh_json_obj(&j);
		sh_json_kint(&j, "QuantizeLinear", pi.n_q);
		sh_json_kint(&j, "DequantizeLinear", pi.n_dq);
		sh_json_kint(&j, "DequantizeLinear_of_weights", pi.n_dq_weights);
		sh_json_kint(&j, "Cast", pi.n_cast);
		sh_json_key(&j, "types");
		sh_json_arr(&j);
		for (int q = 1; q < IR_DTYPE_COUNT; q++)
			if (pi.qtypes[q])
				sh_json_str(&j, ir_dtype_name(q));
		sh_json_arr_end(&j);
		sh_json_key(&j, "cast_to");
		sh_json_obj(&j);
		for (int q = 1; q < IR_DTYPE_COUNT; q++)
			if (pi.cast_to[q])
				sh_json_kint(&j, ir_dtype_name(q), pi.cast_to[q]);
		sh_json_obj_end(&j);
		sh_json_obj_end(&j);
		sh_json_key(&j, "inputs");
		sh_json_arr(&j);
		for (int i = 0; i < g->n_inputs; i++) {
			sh_json_obj(&j);
			sh_json_kstr(&j, "name", g->inputs[i]->name);
			sh_json_key(&j, "type");
			sh_json_type(&j, &g->inputs[i]->type);
			sh_json_kbool(&j, "has_initializer", g->inputs[i]->init != NULL);
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_key(&j, "outputs");
		sh_json_arr(&j);
		for (int i = 0; i < g->n_outputs; i++) {
			sh_json_obj(&j);
			sh_json_kstr(&j, "name", g->outputs[i]->name);
			sh_json_key(&j, "type");
			sh_json_type(&j, &g->outputs[i]->type);
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_key(&j, "functions");
		sh_json_arr(&j);
		for (size_t i = 0; i < m->n_functions; i++) {
			sh_json_obj(&j);
			sh_json_kstr(&j, "name", m->functions[i].name);
			sh_json_kstr(&j, "domain", domain_s(m->functions[i].domain));
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_key(&j, "metadata");
		sh_json_obj(&j);
		for (size_t i = 0; i < m->n_meta; i++)
			sh_json_kstr(&j, m->meta[i].key ? m->meta[i].key : "", m->meta[i].value);
		sh_json_obj_end(&j);
		sh_json_kstr(&j, "doc", m->doc);
		sh_json_kbool(&j, "unsaved_changes", s->dirty);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		return 0;
	}
	struct sh_table tab;
	sh_table_init(&tab, 2, "", "");
	sh_table_row(&tab, "model", m->path ? sh_esc(m->path) : "demo (built in)");
	snprintf(tb, sizeof(tb), "%s%s%s", sh_esc(m->producer_name ? m->producer_name : "?"),
		 m->producer_version && *m->producer_version ? " " : "", sh_esc(m->producer_version ? m->producer_version : ""));
	sh_table_row(&tab, "producer", tb);
	snprintf(tb, sizeof(tb), "%" PRId64, m->ir_version);
	sh_table_row(&tab, "ir_version", m->has_ir_version ? tb : "(not set)");
	char ops[512] = "";
	size_t o = 0;
	for (size_t i = 0; i < m->n_opsets && o < sizeof(ops); i++)
		o += (size_t)snprintf(ops + o, sizeof(ops) - o, "%s%s %" PRId64, i ? ", " : "",
				      sh_esc(domain_s(m->opsets[i].domain)), m->opsets[i].version);
	sh_table_row(&tab, "opsets", m->n_opsets ? ops : "(none)");
	snprintf(tb, sizeof(tb), "'%s': %s", sh_esc(g->name ? g->name : ""),
		 sh_nouns((uint64_t)t.n_nodes, "node", "nodes", b1, sizeof(b1)));
	if (t.n_subgraphs)
		snprintf(tb + strlen(tb), sizeof(tb) - strlen(tb), " (+%d in %s)", t.n_nodes_all - t.n_nodes,
			 sh_nouns((uint64_t)t.n_subgraphs, "subgraph", "subgraphs", b1, sizeof(b1)));
	sh_table_row(&tab, "graph", tb);
	char b3[64];
	snprintf(tb, sizeof(tb), "%s, %s, %s%s", sh_nouns((uint64_t)t.n_inits, "initializer", "initializers", b3, sizeof(b3)),
		 sh_nouns(t.n_params, "element", "elements", b1, sizeof(b1)), sh_bytes(t.weight_bytes, b2, sizeof(b2)),
		 m->had_external ? " (external data)" : "");
	sh_table_row(&tab, "weights", tb);
	/* by dtype, when that says more than "float32" */
	if (nd > 1 || (nd == 1 && order[0] != IR_FLOAT)) {
		size_t k = 0;
		for (int i = 0; i < nd && k < sizeof(tb); i++)
			k += (size_t)snprintf(tb + k, sizeof(tb) - k, "%s%s %s", i ? ", " : "",
					      sh_bytes(pi.bytes[order[i]], b1, sizeof(b1)), ir_dtype_name(order[i]));
		sh_table_row(&tab, "precision", tb);
	}
	if (pi.n_q || pi.n_dq) {
		size_t k = (size_t)snprintf(tb, sizeof(tb), "%d QuantizeLinear, %d DequantizeLinear", pi.n_q, pi.n_dq);
		if (pi.n_dq_weights)
			k += (size_t)snprintf(tb + k, sizeof(tb) - k, " (%d of weights)", pi.n_dq_weights);
		int nq = 0, seen = 0;
		for (int q = 1; q < IR_DTYPE_COUNT; q++)
			nq += pi.qtypes[q];
		for (int q = 1; q < IR_DTYPE_COUNT && k < sizeof(tb); q++)
			if (pi.qtypes[q]) {
				seen++;
				k += (size_t)snprintf(tb + k, sizeof(tb) - k, "%s%s",
						      seen == 1 ? ", " : seen == nq ? " and " : ", ", ir_dtype_name(q));
			}
		if (pi.n_cast && k < sizeof(tb))
			snprintf(tb + k, sizeof(tb) - k, "; %d Cast", pi.n_cast);
		sh_table_row(&tab, "quantization", tb);
	}
	/* Casts that change precision (float16, bfloat16, float8) */
	bool low = false;
	for (int q = 1; q < IR_DTYPE_COUNT; q++)
		low |= pi.cast_to[q] && low_float(q);
	if (low) {
		size_t k = (size_t)snprintf(tb, sizeof(tb), "%d Cast:", pi.n_cast);
		for (int q = 1, first = 1; q < IR_DTYPE_COUNT && k < sizeof(tb); q++)
			if (pi.cast_to[q]) {
				k += (size_t)snprintf(tb + k, sizeof(tb) - k, "%s %d to %s", first ? "" : ",", pi.cast_to[q],
						      ir_dtype_name(q));
				first = 0;
			}
		sh_table_row(&tab, "casts", tb);
	}
	/* names of inputs and outputs padded to one width, so their types line up */
	int nw = 0;
	for (int k = 0; k < g->n_inputs + g->n_outputs; k++) {
		const struct ir_value *v = k < g->n_inputs ? g->inputs[k] : g->outputs[k - g->n_inputs];
		int w = (int)strlen(sh_esc(v->name));
		if (!(k < g->n_inputs && v->init) && w > nw)
			nw = w < 40 ? w : 40;
	}
	for (int k = 0; k < g->n_inputs + g->n_outputs; k++) {
		bool in = k < g->n_inputs;
		const struct ir_value *v = in ? g->inputs[k] : g->outputs[k - g->n_inputs];
		if (in && v->init)
			continue;
		char ty[256];
		snprintf(tb, sizeof(tb), "%-*s  %s", nw, sh_esc(v->name), type_s(&v->type, ty, sizeof(ty)));
		sh_table_row(&tab, in ? "input" : "output", tb);
	}
	if (m->n_functions) {
		o = 0;
		for (size_t i = 0; i < m->n_functions && o < sizeof(ops); i++) {
			const struct ir_function *f = &m->functions[i];
			o += (size_t)snprintf(ops + o, sizeof(ops) - o, "%s%s%s%s", i ? ", " : "",
					      f->domain && *f->domain ? sh_esc(f->domain) : "", f->domain && *f->domain ? ":" : "",
					      sh_esc(f->name));
		}
		sh_table_row(&tab, "functions", ops);
	}
	for (size_t i = 0; i < m->n_meta; i++) {
		snprintf(tb, sizeof(tb), "%s = %s", sh_esc(m->meta[i].key), sh_esc(m->meta[i].value));
		sh_table_row(&tab, "metadata", tb);
	}
	if (m->doc && *m->doc) {
		snprintf(tb, sizeof(tb), "%.200s", m->doc);
		for (char *c = tb; *c; c++)
			if (*c == '\n')
				*c = ' ';
		sh_table_row(&tab, "doc", sh_esc(tb));
	}
	if (s->dirty)
		sh_table_row(&tab, "state", "unsaved changes");
	sh_table_print(s, &tab, false);
	sh_table_free(&tab);
	return 0;
}

/* ---- nodes ---- */

int cmd_nodes(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (parse_common(s, argc, argv, &a))
		return -1;
	if (a.npos > 1)
		return sh_usage(s, argv[0]);
	const char *pat = a.npos ? a.pos[0] : NULL, *op = sh_opt(&a, "op");
	bool json = sh_flag(&a, "json");
	struct sh_json j;
	struct sh_table tab;
	if (json) {
		sh_json_begin(&j, s->out);
		sh_json_arr(&j);
	} else {
		sh_table_init(&tab, 5, "id", "name", "op", "inputs", "outputs");
	}
	int shown = 0;
	ir_for_each_node(s->model->graph, n) {
		char id[24];
		snprintf(id, sizeof(id), "n%d", n->id);
		if (op && strcmp(n->op_type, op) != 0)
			continue;
		if (pat && fnmatch(pat, n->name, 0) != 0 && fnmatch(pat, id, 0) != 0)
			continue;
		shown++;
		if (json) {
			sh_json_obj(&j);
			sh_json_kint(&j, "id", n->id);
			sh_json_kstr(&j, "name", n->name);
			sh_json_kstr(&j, "op", n->op_type);
			sh_json_kstr(&j, "domain", domain_s(n->domain));
			sh_json_key(&j, "inputs");
			sh_json_arr(&j);
			for (int i = 0; i < n->n_inputs; i++)
				sh_json_str(&j, n->inputs[i] ? n->inputs[i]->name : NULL);
			sh_json_arr_end(&j);
			sh_json_key(&j, "outputs");
			sh_json_arr(&j);
			for (int i = 0; i < n->n_outputs; i++)
				sh_json_str(&j, n->outputs[i] ? n->outputs[i]->name : NULL);
			sh_json_arr_end(&j);
			sh_json_obj_end(&j);
		} else {
			char *ins = names_list(n->inputs, n->n_inputs), *outs = names_list(n->outputs, n->n_outputs);
			char opn[160];
			snprintf(opn, sizeof(opn), "%s%s%s", n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? sh_esc(n->domain) : "",
				 n->domain && *n->domain && strcmp(n->domain, "ai.onnx") ? ":" : "", sh_esc(n->op_type));
			sh_table_row(&tab, id, sh_esc(n->name), opn, ins ? ins : "", outs ? outs : "");
			free(ins);
			free(outs);
		}
	}
	if (json) {
		sh_json_arr_end(&j);
		sh_json_end(&j);
		return 0;
	}
	if (shown)
		sh_table_print(s, &tab, true);
	sh_table_free(&tab);
	if (pat || op)
		sh_printf(s, "%d of %d nodes\n", shown, s->model->graph->n_nodes);
	else if (!shown)
		sh_printf(s, "the graph has no nodes\n");
	return 0;
}

/* ---- show ---- */

/* Where a value comes from, in words. Names are made safe for a terminal,
 * except with `raw` (for JSON, whose writer escapes them itself). */
static void value_source(const struct ir_value *v, char *buf, size_t size, bool raw)
{
	char nd[256];
	const struct ir_node *p = v->producer;
	if (p && raw && p->name && *p->name)
		snprintf(nd, sizeof(nd), "'%s' (n%d, %s)", p->name, p->id, p->op_type);
	else if (p && raw)
		snprintf(nd, sizeof(nd), "n%d (%s)", p->id, p->op_type);
	else if (p)
		sh_node_desc(p, nd, sizeof(nd));
	if (v->init && v->is_input)
		snprintf(buf, size, "graph input with initializer");
	else if (v->init)
		snprintf(buf, size, "initializer");
	else if (v->sparse_init)
		snprintf(buf, size, "sparse initializer");
	else if (v->is_input)
		snprintf(buf, size, "graph input");
	else if (v->producer)
		snprintf(buf, size, "from %s", nd);
	else if (v->outer)
		snprintf(buf, size, "from the enclosing graph");
	else
		snprintf(buf, size, "undefined");
}

static char *consumers(const struct ir_value *v)
{
	size_t cap = 128, len = 0;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	s[0] = 0;
	for (size_t i = 0; i < v->n_uses; i++) {
		char nd[256];
		sh_node_desc(v->uses[i].node, nd, sizeof(nd));
		size_t need = len + strlen(nd) + 16;
		if (need > cap) {
			while (cap < need)
				cap *= 2;
			char *t = realloc(s, cap);
			if (!t)
				break;
			s = t;
		}
		len += (size_t)snprintf(s + len, cap - len, "%s%s%s", i ? ", " : "", nd,
					v->uses[i].slot < 0 ? " (in a subgraph)" : "");
	}
	if (v->is_output) {
		if (len + 32 > cap) {
			char *t = realloc(s, len + 32);
			if (!t)
				return s;
			s = t;
		}
		snprintf(s + len, 32, "%sgraph output", len ? ", " : "");
	}
	return s;
}

static void json_value_ref(struct sh_json *j, const struct ir_value *v)
{
	sh_json_obj(j);
	sh_json_kstr(j, "name", v->name);
	sh_json_key(j, "type");
	sh_json_type(j, ir_value_type(v));
	sh_json_key(j, "producer");
	if (v->producer)
		sh_json_int(j, v->producer->id);
	else
		sh_json_null(j);
	char src[300];
	value_source(v, src, sizeof(src), true);
	sh_json_kstr(j, "source", src);
	sh_json_key(j, "consumers");
	sh_json_arr(j);
	for (size_t i = 0; i < v->n_uses; i++)
		sh_json_int(j, v->uses[i].node->id);
	sh_json_arr_end(j);
	sh_json_kbool(j, "graph_output", v->is_output);
	sh_json_obj_end(j);
}

/* "key": [ {value}, null for an omitted slot, ... ] */
static void json_value_refs(struct sh_json *j, const char *key, struct ir_value *const *vals, int n)
{
	sh_json_key(j, key);
	sh_json_arr(j);
	for (int i = 0; i < n; i++) {
		if (vals[i])
			json_value_ref(j, vals[i]);
		else
			sh_json_null(j);
	}
	sh_json_arr_end(j);
}

/* A quantization's scale and zero point in words: "int8, per channel along axis 0: 16 scales from
 * 0.00123 to 0.00456, zero points all 0". */
static const char *qdq_text(const struct ir_qdq *q, const struct ir_node *n, char *buf, size_t size)
{
	const char *dt = q->dtype ? ir_dtype_name(q->dtype) : "?";
	size_t o;
	switch (q->kind) {
	case IR_QDQ_TENSOR:
		o = (size_t)snprintf(buf, size, "%s, per tensor: scale %.6g", dt, q->scale_min);
		break;
	case IR_QDQ_CHANNEL:
		o = (size_t)snprintf(buf, size, "%s, per channel along axis %" PRId64 ": %" PRIu64 " scales from %.6g to %.6g",
				     dt, q->axis, q->n_scales, q->scale_min, q->scale_max);
		break;
	case IR_QDQ_BLOCKED:
		o = (size_t)snprintf(buf, size, "%s, blocked along axis %" PRId64 ", block_size %" PRId64 ": %" PRIu64
				     " scales from %.6g to %.6g", dt, q->axis, q->block_size, q->n_scales, q->scale_min,
				     q->scale_max);
		break;
	default:
		snprintf(buf, size, "%s: the scale '%s' is not a constant", dt,
			 n->n_inputs > 1 && n->inputs[1] ? sh_esc(n->inputs[1]->name) : "?");
		return buf;
	}
	if (o >= size)
		return buf;
	bool many = q->kind != IR_QDQ_TENSOR;
	if (q->has_zero_point && !q->zero_point)
		snprintf(buf + o, size - o, ", zero point%s not constant", many ? "s" : "");
	else if (!many || (q->zp_min == q->zp_max && (!q->zero_point || q->zero_point->numel <= 1)))
		snprintf(buf + o, size - o, ", zero point %.6g", q->zp_min);
	else if (q->zp_min == q->zp_max)
		snprintf(buf + o, size - o, ", zero points all %.6g", q->zp_min);
	else
		snprintf(buf + o, size - o, ", zero points from %.6g to %.6g", q->zp_min, q->zp_max);
	return buf;
}

static const char *qdq_kind_name(enum ir_qdq_kind k)
{
	return k == IR_QDQ_TENSOR ? "per-tensor" : k == IR_QDQ_CHANNEL ? "per-channel" : k == IR_QDQ_BLOCKED ? "blocked"
											     : "unknown";
}

/* "quantization": { ... } of a QuantizeLinear or DequantizeLinear (show --json, tensor --json). */
static void json_qdq(struct sh_json *j, const struct ir_qdq *q)
{
	sh_json_obj(j);
	sh_json_kstr(j, "dtype", q->dtype ? ir_dtype_name(q->dtype) : NULL);
	sh_json_kstr(j, "granularity", qdq_kind_name(q->kind));
	if (q->kind == IR_QDQ_CHANNEL || q->kind == IR_QDQ_BLOCKED)
		sh_json_kint(j, "axis", q->axis);
	if (q->kind == IR_QDQ_BLOCKED)
		sh_json_kint(j, "block_size", q->block_size);
	if (q->kind != IR_QDQ_UNKNOWN) {
		sh_json_kuint(j, "scales", q->n_scales);
		sh_json_knum(j, "scale_min", q->scale_min);
		sh_json_knum(j, "scale_max", q->scale_max);
		if (q->kind == IR_QDQ_TENSOR)
			sh_json_knum(j, "scale", q->scale_min);
	}
	sh_json_kbool(j, "zero_point_given", q->has_zero_point);
	sh_json_kbool(j, "zero_point_constant", !q->has_zero_point || q->zero_point);
	if (!q->has_zero_point || q->zero_point) {
		sh_json_knum(j, "zero_point_min", q->zp_min);
		sh_json_knum(j, "zero_point_max", q->zp_max);
	}
	sh_json_kbool(j, "weight", q->weight);
	sh_json_obj_end(j);
}

int cmd_show(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (parse_common(s, argc, argv, &a))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	struct ir_node *n = sh_node(s, a.pos[0]);
	if (!n)
		return -1;
	sh_infer(s);   /* types as inferred; without them the declared ones */
	char buf[512], tb[256];
	if (sh_flag(&a, "json")) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		sh_json_kint(&j, "id", n->id);
		sh_json_kstr(&j, "name", n->name);
		sh_json_kstr(&j, "op", n->op_type);
		sh_json_kstr(&j, "domain", domain_s(n->domain));
		sh_json_kbool(&j, "known_op", n->op != IR_OP_UNKNOWN);
		sh_json_kbool(&j, "function", n->op == IR_OP_UNKNOWN && function_of(s->model, n->domain, n->op_type));
		sh_json_kstr(&j, "doc", n->doc);
		sh_json_key(&j, "attributes");
		sh_json_obj(&j);
		for (int i = 0; i < n->n_attrs; i++) {
			sh_json_key(&j, n->attrs[i].name);
			sh_json_obj(&j);
			sh_json_kstr(&j, "type", ir_attr_type_name(n->attrs[i].type));
			sh_json_kstr(&j, "value", attr_value(&n->attrs[i], buf, sizeof(buf)));
			sh_json_obj_end(&j);
		}
		sh_json_obj_end(&j);
		json_value_refs(&j, "inputs", n->inputs, n->n_inputs);
		sh_json_key(&j, "implicit_inputs");
		sh_json_arr(&j);
		for (int i = 0; i < n->n_implicit; i++)
			sh_json_str(&j, n->implicit[i]->name);
		sh_json_arr_end(&j);
		json_value_refs(&j, "outputs", n->outputs, n->n_outputs);
		sh_json_key(&j, "defaults");
		sh_json_obj(&j);
		int ns;
		const struct ir_attr_schema *sch = ir_op_attrs(n->op, &ns);
		int64_t opset = ir_model_opset(s->model, n->domain);
		for (int i = 0; i < ns; i++)
			if (sch[i].dflt && ir_attr_schema_at(&sch[i], opset) && !ir_node_attr(n, sch[i].name))
				sh_json_kstr(&j, sch[i].name, sch[i].dflt);
		sh_json_obj_end(&j);
		sh_json_key(&j, "fused_from");
		sh_json_arr(&j);
		for (int i = 0; i < n->n_from; i++)
			sh_json_str(&j, n->from[i]);
		sh_json_arr_end(&j);
		struct ir_qdq q;
		if (!ir_qdq_params(n, &q)) {
			sh_json_key(&j, "quantization");
			json_qdq(&j, &q);
		}
		sh_json_obj_end(&j);
		sh_json_end(&j);
		return 0;
	}
	sh_printf(s, "%snode%s %s\n", sh_c(s, SH_BOLD), sh_c(s, SH_RESET), sh_node_desc(n, buf, sizeof(buf)));
	sh_printf(s, "op   %s (%s)%s\n", sh_esc(n->op_type), sh_esc(domain_s(n->domain)),
		  n->op != IR_OP_UNKNOWN ? ""
		  : function_of(s->model, n->domain, n->op_type) ? ", a function of the model"
		  : ", not an op ogsh knows: kept as is");
	if (n->doc && *n->doc)
		sh_printf(s, "doc  %s\n", sh_esc(n->doc));
	if (n->n_from) {
		sh_printf(s, "made from");
		for (int i = 0; i < n->n_from; i++)
			sh_printf(s, "%s %s", i ? "," : "", sh_esc(n->from[i]));
		sh_printf(s, "\n");
	}
	if (n->n_attrs) {
		sh_printf(s, "attributes\n");
		struct sh_table t;
		sh_table_init(&t, 3, "", "", "");
		for (int i = 0; i < n->n_attrs; i++)
			sh_table_row(&t, sh_esc(n->attrs[i].name), ir_attr_type_name(n->attrs[i].type),
				     sh_esc(attr_value(&n->attrs[i], buf, sizeof(buf))));
		for (int i = 0; i < t.rows; i++) {
			char *c = t.cells[i * 3];
			char *ind = malloc(strlen(c) + 3);
			if (ind) {
				sprintf(ind, "  %s", c);
				free(c);
				t.cells[i * 3] = ind;
			}
		}
		sh_table_print(s, &t, false);
		sh_table_free(&t);
	}
	/* the schema's defaults for attributes the node leaves out */
	int ns;
	const struct ir_attr_schema *sch = ir_op_attrs(n->op, &ns);
	int64_t opset = ir_model_opset(s->model, n->domain);
	size_t o = 0;
	for (int i = 0; i < ns; i++) {
		if (!sch[i].dflt || !ir_attr_schema_at(&sch[i], opset) || ir_node_attr(n, sch[i].name) ||
		    o + 8 >= sizeof(buf))
			continue;
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s=%s", o ? ", " : "", sch[i].name, sch[i].dflt);
	}
	if (o)
		sh_printf(s, "defaults  %s\n", buf);
	struct ir_qdq q;
	if (!ir_qdq_params(n, &q)) {
		char qb[600];
		sh_printf(s, "%s  %s%s\n", n->op == IR_OP_QuantizeLinear ? "quantizes to" : "dequantizes",
			  qdq_text(&q, n, qb, sizeof(qb)),
			  !q.weight ? "" : n->op == IR_OP_QuantizeLinear ? " (a constant: a weight)" : " (a quantized weight)");
	}
	for (int pass = 0; pass < 3; pass++) {
		int count = pass == 0 ? n->n_inputs : pass == 1 ? n->n_implicit : n->n_outputs;
		if (!count)
			continue;
		sh_printf(s, "%s\n", pass == 0 ? "inputs" : pass == 1 ? "implicit inputs (read by subgraphs)" : "outputs");
		struct sh_table t;
		sh_table_init(&t, 4, "", "", "", "");
		for (int i = 0; i < count; i++) {
			struct ir_value *v = pass == 0 ? n->inputs[i] : pass == 1 ? n->implicit[i] : n->outputs[i];
			char idx[16];
			snprintf(idx, sizeof(idx), "  %d", i);
			if (!v) {
				sh_table_row(&t, idx, "-", "", "(omitted)");
				continue;
			}
			char where[512];
			if (pass == 2) {
				char *c = consumers(v);
				snprintf(where, sizeof(where), "-> %s", c && *c ? c : "(unused)");
				free(c);
			} else {
				value_source(v, where, sizeof(where), false);
			}
			sh_table_row(&t, idx, sh_esc(v->name), type_s(ir_value_type(v), tb, sizeof(tb)), where);
		}
		sh_table_print(s, &t, false);
		sh_table_free(&t);
	}
	return 0;
}

/* ---- tensor ---- */

static void fmt_elem(const struct ir_tensor *t, uint64_t i, char *buf, size_t size)
{
	if (t->dtype == IR_STRING) {
		const struct ir_bytes *b = &t->strings[i];
		snprintf(buf, size, "'%.*s'", (int)(b->len > 40 ? 40 : b->len), b->data);
		return;
	}
	double v = ir_tensor_get_f64(t, i);
	if (t->dtype == IR_BOOL)
		snprintf(buf, size, "%s", v != 0 ? "true" : "false");
	else if (ir_dtype_is_int(t->dtype))
		snprintf(buf, size, "%.0f", v);
	else if (t->dtype == IR_COMPLEX64 || t->dtype == IR_COMPLEX128) {
		double im = t->dtype == IR_COMPLEX64 ? ir_elem_to_f64(IR_FLOAT, ir_tensor_data(t), 2 * i + 1)
						     : ir_elem_to_f64(IR_DOUBLE, ir_tensor_data(t), 2 * i + 1);
		snprintf(buf, size, "%.6g%+.6gi", v, im);
	} else
		snprintf(buf, size, "%.6g", v);
}

static const struct ir_tensor *tensor_of(const struct ir_value *v)
{
	if (v->sparse_init)
		return v->sparse_init->values;
	return ir_value_const(v);
}

/* Statistics of a quantized weight as its DequantizeLinear gives it: S * (q - Z). */
struct deq_stats {
	const struct ir_node *dq;
	struct ir_qdq q;
	bool ok;
	char why[200];           /* when not ok */
	double min, max, mean, std;
	uint64_t count;          /* finite values */
};

/*
 * The index into the scale (and zero point) of element i of x: per tensor 0;
 * per channel the coordinate along the axis; blocked the coordinates of x
 * with the axis's divided by the block size (the scale has x's rank).
 */
static uint64_t scale_index(const struct ir_qdq *q, const struct ir_tensor *x, const struct ir_tensor *st, uint64_t i)
{
	if (q->kind == IR_QDQ_TENSOR)
		return 0;
	uint64_t idx = 0, stride = 1;
	for (int k = x->rank - 1; k >= 0; k--) {
		uint64_t d = (uint64_t)x->dims[k];
		uint64_t c = d ? i % d : 0;
		i = d ? i / d : 0;
		if (q->kind == IR_QDQ_CHANNEL) {
			if (k == q->axis)
				return c;
			continue;
		}
		uint64_t sd = (uint64_t)st->dims[k];
		if (k == q->axis)
			c /= (uint64_t)q->block_size;
		idx += c * stride;
		stride *= sd;
	}
	return idx;
}

/* The dequantized statistics of weight x, read by DequantizeLinear dq. */
static int deq_stats_of(const struct ir_tensor *x, const struct ir_node *dq, struct deq_stats *ds)
{
	memset(ds, 0, sizeof(*ds));
	ds->dq = dq;
	ir_qdq_params(dq, &ds->q);
	const struct ir_qdq *q = &ds->q;
	const struct ir_tensor *st = q->scale, *zt = q->zero_point;
	if (q->kind == IR_QDQ_UNKNOWN) {
		snprintf(ds->why, sizeof(ds->why), "its scale is not a constant");
		return 0;
	}
	if (q->has_zero_point && !zt) {
		snprintf(ds->why, sizeof(ds->why), "its zero point is not a constant");
		return 0;
	}
	/* the shapes must agree, or the indexes below would run past the scale */
	if (q->axis < 0 && q->axis >= -(int64_t)x->rank)
		ds->q.axis += x->rank;
	bool fits = true;
	if (q->kind == IR_QDQ_CHANNEL)
		fits = q->axis >= 0 && q->axis < x->rank && st->numel == (uint64_t)x->dims[q->axis];
	else if (q->kind == IR_QDQ_BLOCKED) {
		fits = q->axis >= 0 && q->axis < x->rank && st->rank == x->rank;
		for (int k = 0; fits && k < x->rank; k++) {
			int64_t want = k != q->axis ? x->dims[k] : x->dims[k] ? (x->dims[k] - 1) / q->block_size + 1 : 0;
			fits = st->dims[k] == want;
		}
	}
	if (fits && zt)
		fits = zt->numel == st->numel;
	if (!fits) {
		snprintf(ds->why, sizeof(ds->why), "its scale or zero point does not fit the weight's shape");
		return 0;
	}
	if (ir_tensor_check(x, NULL) || ir_tensor_check(st, NULL) || (zt && ir_tensor_check(zt, NULL))) {
		snprintf(ds->why, sizeof(ds->why), "the data cannot be read");
		return 0;
	}
	/* Welford's running mean and variance: one pass, stable for large weights */
	double mean = 0, m2 = 0;
	for (uint64_t i = 0; i < x->numel; i++) {
		if ((i & 0xfffff) == 0 && ir_interrupted)
			return IR_EINTR;
		uint64_t k = scale_index(q, x, st, i);
		double z = zt ? ir_tensor_get_f64(zt, k) : 0;
		double v = ir_tensor_get_f64(st, k) * (ir_tensor_get_f64(x, i) - z);
		if (!isfinite(v))
			continue;
		if (!ds->count || v < ds->min)
			ds->min = v;
		if (!ds->count || v > ds->max)
			ds->max = v;
		ds->count++;
		double dm = v - mean;
		mean += dm / (double)ds->count;
		m2 += dm * (v - mean);
	}
	ds->mean = mean;
	ds->std = ds->count ? sqrt(m2 / (double)ds->count) : 0;
	ds->ok = true;
	return 0;
}

/* The DequantizeLinear that reads v as its x, or NULL. */
static const struct ir_node *dq_reader(const struct ir_value *v)
{
	for (size_t u = 0; u < v->n_uses; u++)
		if (v->uses[u].slot == 0 && v->uses[u].node->op == IR_OP_DequantizeLinear)
			return v->uses[u].node;
	return NULL;
}

int cmd_tensor(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (parse_common(s, argc, argv, &a))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	long nvals = 8;
	const char *nv = sh_opt(&a, "values");
	if (nv) {
		char *end;
		nvals = strtol(nv, &end, 10);
		if (!*nv || *end || nvals < 0 || nvals > 100000)
			return sh_error(s, "tensor: --values needs a count from 0 to 100000, not '%s'", sh_esc(nv));
	}
	struct ir_value *v = sh_value(s, a.pos[0]);
	if (!v)
		return -1;
	sh_infer(s);
	const struct ir_tensor *t = tensor_of(v);
	struct kern_stats st = { 0 };
	bool have_stats = false;
	if (t && t->dtype != IR_STRING && t->numel) {
		struct ir_diag d;
		ir_diag_init(&d);
		if (exec_tensor_stats(t, &st, &d))
			return sh_diag(s, &d);
		have_stats = true;
	}
	/* a quantized weight: also what it stands for */
	struct deq_stats ds = { 0 };
	const struct ir_node *dq = t && t->numel && ir_dtype_bits(t->dtype) > 0 && !ir_dtype_is_float(t->dtype) ? dq_reader(v)
				   : t && t->numel && ir_precision_class(t->dtype) == IR_F8E4M3FN ? dq_reader(v) : NULL;
	if (!dq && t && t->numel && t->dtype == IR_F4E2M1)
		dq = dq_reader(v);
	if (dq && deq_stats_of(t, dq, &ds) == IR_EINTR)
		return sh_error(s, "tensor: interrupted");
	bool json = sh_flag(&a, "json");
	char src[300], tb[256], b1[64], b2[64];
	value_source(v, src, sizeof(src), json);
	uint64_t shown = t ? (uint64_t)nvals < t->numel ? (uint64_t)nvals : t->numel : 0;
	/* bytes of the data; for strings, of their text */
	uint64_t bytes = t ? t->nbytes : 0;
	if (t && t->dtype == IR_STRING)
		for (uint64_t i = 0; i < t->numel; i++)
			bytes += t->strings[i].len;
	/* NaN and Inf exist in floating types only */
	bool floating = t && (ir_dtype_is_float(t->dtype) || t->dtype == IR_COMPLEX64 || t->dtype == IR_COMPLEX128);
	const struct ir_sparse *sp = v->sparse_init;
	if (json) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		sh_json_kstr(&j, "name", v->name);
		sh_json_kstr(&j, "source", src);
		sh_json_key(&j, "type");
		sh_json_type(&j, ir_value_type(v));
		sh_json_key(&j, "producer");
		if (v->producer)
			sh_json_int(&j, v->producer->id);
		else
			sh_json_null(&j);
		sh_json_key(&j, "consumers");
		sh_json_arr(&j);
		for (size_t i = 0; i < v->n_uses; i++)
			sh_json_int(&j, v->uses[i].node->id);
		sh_json_arr_end(&j);
		sh_json_kbool(&j, "graph_output", v->is_output);
		sh_json_kbool(&j, "constant", t != NULL);
		if (t) {
			sh_json_kstr(&j, "dtype", ir_dtype_name(t->dtype));
			sh_json_key(&j, "shape");
			sh_json_arr(&j);
			uint64_t numel = 1;
			for (int i = 0; i < (sp ? sp->rank : t->rank); i++) {
				sh_json_int(&j, sp ? sp->dims[i] : t->dims[i]);
				numel *= (uint64_t)(sp ? sp->dims[i] : t->dims[i]);
			}
			sh_json_arr_end(&j);
			sh_json_kuint(&j, "elements", sp ? numel : t->numel);
			if (sp)
				sh_json_kuint(&j, "stored_values", t->numel);
			sh_json_kuint(&j, "bytes", bytes);
			sh_json_kstr(&j, "external_file", t->ext_location);
			if (have_stats) {
				sh_json_knum(&j, "min", st.min);
				sh_json_knum(&j, "max", st.max);
				sh_json_knum(&j, "mean", st.mean);
				sh_json_knum(&j, "std", st.std);
				sh_json_kuint(&j, "zeros", st.zeros);
				sh_json_kuint(&j, "nan", st.nan);
				sh_json_kuint(&j, "inf", st.inf);
			}
			if (dq) {
				sh_json_key(&j, "dequantized");
				sh_json_obj(&j);
				sh_json_kint(&j, "node", dq->id);
				sh_json_kstr(&j, "node_name", dq->name);
				sh_json_key(&j, "quantization");
				json_qdq(&j, &ds.q);
				sh_json_kbool(&j, "known", ds.ok);
				if (ds.ok) {
					sh_json_knum(&j, "min", ds.min);
					sh_json_knum(&j, "max", ds.max);
					sh_json_knum(&j, "mean", ds.mean);
					sh_json_knum(&j, "std", ds.std);
				} else {
					sh_json_kstr(&j, "why", ds.why);
				}
				sh_json_obj_end(&j);
			}
			sh_json_key(&j, "values");
			sh_json_arr(&j);
			for (uint64_t i = 0; i < shown; i++) {
				if (t->dtype == IR_STRING)
					sh_json_strn(&j, t->strings[i].data, t->strings[i].len);
				else if (t->dtype == IR_BOOL)
					sh_json_bool(&j, ir_tensor_get_f64(t, i) != 0);
				else
					sh_json_num(&j, ir_tensor_get_f64(t, i));
			}
			sh_json_arr_end(&j);
		}
		sh_json_obj_end(&j);
		sh_json_end(&j);
		return 0;
	}
	struct sh_table tab;
	sh_table_init(&tab, 2, "", "");
	sh_table_row(&tab, "tensor", sh_esc(v->name));
	sh_table_row(&tab, "source", src);
	if (!t) {
		sh_table_row(&tab, "type", type_s(ir_value_type(v), tb, sizeof(tb)));
		if (v->why)
			sh_table_row(&tab, "unknown", sh_esc(v->why));
		if (v->conflict) {
			char dt[256];
			sh_table_row(&tab, "declared", ir_type_str(&v->type, dt, sizeof(dt)));
		}
		char *c = consumers(v);
		sh_table_row(&tab, "used by", c && *c ? c : "(nothing)");
		free(c);
		if (v->n_known >= 0) {
			/* a small integer tensor whose values follow from shapes and constants */
			char kv[512];
			size_t o = (size_t)snprintf(kv, sizeof(kv), "[");
			for (int k = 0; k < v->n_known && o + 32 < sizeof(kv); k++) {
				char d[128];
				o += (size_t)snprintf(kv + o, sizeof(kv) - o, "%s%s", k ? ", " : "",
						      ir_dim_str(&v->known[k], d, sizeof(d)));
			}
			snprintf(kv + o, sizeof(kv) - o, "]");
			sh_table_row(&tab, "values", sh_esc(kv));
		}
		sh_table_row(&tab, "data", v->is_input ? "none stored: given when the graph runs"
				   : v->n_known >= 0 ? "computed when the graph runs; the values follow from shapes and constants"
				   : "none stored: computed when the graph runs");
		sh_table_print(s, &tab, false);
		sh_table_free(&tab);
		return 0;
	}
	sh_table_row(&tab, "dtype", ir_dtype_name(t->dtype));
	if (sp) {
		sh_table_row(&tab, "shape", ir_dims_str(sp->rank, sp->dims, tb, sizeof(tb)));
		snprintf(tb, sizeof(tb), "%s (sparse)", sh_nouns(t->numel, "stored value", "stored values", b1, sizeof(b1)));
		sh_table_row(&tab, "size", tb);
	} else if (t->dtype == IR_STRING) {
		sh_table_row(&tab, "shape", ir_dims_str(t->rank, t->dims, tb, sizeof(tb)));
		snprintf(tb, sizeof(tb), "%s, %s of text", sh_nouns(t->numel, "string", "strings", b1, sizeof(b1)),
			 sh_bytes(bytes, b2, sizeof(b2)));
		sh_table_row(&tab, "size", tb);
	} else {
		sh_table_row(&tab, "shape", ir_dims_str(t->rank, t->dims, tb, sizeof(tb)));
		snprintf(tb, sizeof(tb), "%s, %s", sh_nouns(t->numel, "element", "elements", b1, sizeof(b1)),
			 sh_bytes(t->nbytes, b2, sizeof(b2)));
		sh_table_row(&tab, "size", tb);
	}
	if (t->ext_location) {
		snprintf(tb, sizeof(tb), "external file '%s' at offset %" PRIu64, sh_esc(t->ext_location), t->ext_offset);
		sh_table_row(&tab, "stored", tb);
	}
	if (have_stats) {
		snprintf(tb, sizeof(tb), "%.6g", st.min);
		sh_table_row(&tab, "min", tb);
		snprintf(tb, sizeof(tb), "%.6g", st.max);
		sh_table_row(&tab, "max", tb);
		snprintf(tb, sizeof(tb), "%.6g", st.mean);
		sh_table_row(&tab, "mean", tb);
		snprintf(tb, sizeof(tb), "%.6g", st.std);
		sh_table_row(&tab, "std", tb);
		snprintf(tb, sizeof(tb), "%" PRIu64, st.zeros);
		sh_table_row(&tab, "zeros", tb);
		if (floating) {
			snprintf(tb, sizeof(tb), "%" PRIu64 " NaN, %" PRIu64 " Inf%s", st.nan, st.inf,
				 st.nan || st.inf ? " (left out of min, max, mean and std)" : "");
			sh_table_row(&tab, "nan/inf", tb);
		}
	}
	if (dq) {
		char qb[600], nd[256];
		snprintf(tb, sizeof(tb), "by %s: %s", sh_node_desc(dq, nd, sizeof(nd)), qdq_text(&ds.q, dq, qb, sizeof(qb)));
		sh_table_row(&tab, "dequantized", tb);
		if (ds.ok) {
			snprintf(tb, sizeof(tb), "min %.6g, max %.6g, mean %.6g, std %.6g (S*(q-Z))", ds.min, ds.max, ds.mean,
				 ds.std);
			sh_table_row(&tab, "", tb);
		} else {
			snprintf(tb, sizeof(tb), "no statistics: %s", ds.why);
			sh_table_row(&tab, "", tb);
		}
	}
	if (shown) {
		size_t cap = 64 + (size_t)shown * 24, len = 0;
		char *vals = malloc(cap);
		if (vals) {
			len += (size_t)snprintf(vals, cap, "[");
			for (uint64_t i = 0; i < shown; i++) {
				char e[80];
				fmt_elem(t, i, e, sizeof(e));
				len += (size_t)snprintf(vals + len, cap - len, "%s%s", i ? ", " : "", sh_esc(e));
				if (len >= cap)
					break;
			}
			if (len < cap)
				snprintf(vals + len, cap - len, "%s]", shown < t->numel ? ", ..." : "");
			sh_table_row(&tab, "values", vals);
			free(vals);
		}
	}
	sh_table_print(s, &tab, false);
	sh_table_free(&tab);
	return 0;
}

/* ---- ops ---- */

struct op_count { const char *op, *domain; int count; bool known; };

static int count_ops(struct ir_graph *g, void *arg)
{
	struct { struct op_count *c; int n, cap; } *acc = arg;
	ir_for_each_node(g, n) {
		int i;
		for (i = 0; i < acc->n; i++)
			if (strcmp(acc->c[i].op, n->op_type) == 0 && strcmp(acc->c[i].domain, domain_s(n->domain)) == 0)
				break;
		if (i == acc->n) {
			if (acc->n == acc->cap) {
				int cap = acc->cap ? acc->cap * 2 : 32;
				struct op_count *c = realloc(acc->c, (size_t)cap * sizeof(*c));
				if (!c)
					return -1;
				acc->c = c;
				acc->cap = cap;
			}
			acc->c[acc->n++] = (struct op_count){ n->op_type, domain_s(n->domain), 0, n->op != IR_OP_UNKNOWN };
		}
		acc->c[i].count++;
	}
	return 0;
}

static int cmp_count(const void *x, const void *y)
{
	const struct op_count *a = x, *b = y;
	if (a->count != b->count)
		return b->count - a->count;
	return strcmp(a->op, b->op);
}

int cmd_ops(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (parse_common(s, argc, argv, &a))
		return -1;
	if (a.npos)
		return sh_usage(s, argv[0]);
	struct { struct op_count *c; int n, cap; } acc = { 0 };
	if (ir_graph_walk(s->model->graph, count_ops, &acc)) {
		free(acc.c);
		return sh_error(s, "out of memory");
	}
	qsort(acc.c, (size_t)acc.n, sizeof(*acc.c), cmp_count);
	int total = 0;
	for (int i = 0; i < acc.n; i++)
		total += acc.c[i].count;
	if (sh_flag(&a, "json")) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_arr(&j);
		for (int i = 0; i < acc.n; i++) {
			sh_json_obj(&j);
			sh_json_kstr(&j, "op", acc.c[i].op);
			sh_json_kstr(&j, "domain", acc.c[i].domain);
			sh_json_kint(&j, "count", acc.c[i].count);
			sh_json_kbool(&j, "known", acc.c[i].known);
			sh_json_kbool(&j, "function",
				      !acc.c[i].known && function_of(s->model, acc.c[i].domain, acc.c[i].op));
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_end(&j);
	} else {
		struct sh_table t;
		sh_table_init(&t, 4, "op", "domain", ">count", ">share");
		for (int i = 0; i < acc.n; i++) {
			char c[32], sh[32], opn[160];
			snprintf(c, sizeof(c), "%d", acc.c[i].count);
			snprintf(sh, sizeof(sh), "%.1f%%", 100.0 * acc.c[i].count / (total ? total : 1));
			snprintf(opn, sizeof(opn), "%s%s", sh_esc(acc.c[i].op),
				 acc.c[i].known ? ""
				 : function_of(s->model, acc.c[i].domain, acc.c[i].op) ? " (function)"
				 : " (unknown)");
			sh_table_row(&t, opn, sh_esc(acc.c[i].domain), c, sh);
		}
		sh_table_print(s, &t, true);
		sh_table_free(&t);
		char b1[64], b2[64];
		int sub = total - s->model->graph->n_nodes;
		sh_printf(s, "%s", sh_nouns((uint64_t)total, "node", "nodes", b1, sizeof(b1)));
		if (sub)
			sh_printf(s, " (%d in subgraphs)", sub);
		sh_printf(s, ", %s\n", sh_nouns((uint64_t)acc.n, "op type", "op types", b2, sizeof(b2)));
	}
	free(acc.c);
	return 0;
}

/* ---- inputs / outputs ---- */

static int list_io(struct session *s, int argc, char **argv, bool inputs)
{
	struct sh_args a;
	if (parse_common(s, argc, argv, &a))
		return -1;
	if (a.npos)
		return sh_usage(s, argv[0]);
	const struct ir_graph *g = s->model->graph;
	int n = inputs ? g->n_inputs : g->n_outputs;
	struct ir_value *const *vals = inputs ? g->inputs : g->outputs;
	if (sh_flag(&a, "json")) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_arr(&j);
		for (int i = 0; i < n; i++) {
			sh_json_obj(&j);
			sh_json_kstr(&j, "name", vals[i]->name);
			sh_json_key(&j, "type");
			sh_json_type(&j, &vals[i]->type);
			if (inputs)
				sh_json_kbool(&j, "has_initializer", vals[i]->init != NULL);
			else {
				sh_json_key(&j, "producer");
				if (vals[i]->producer)
					sh_json_int(&j, vals[i]->producer->id);
				else
					sh_json_null(&j);
			}
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_end(&j);
		return 0;
	}
	/* the note column only when some input has a default value */
	bool notes = !inputs;
	for (int i = 0; i < n && !notes; i++)
		notes = vals[i]->init != NULL;
	struct sh_table t;
	sh_table_init(&t, notes ? 4 : 3, "name", "dtype", "shape", inputs ? "note" : "source");
	for (int i = 0; i < n; i++) {
		const struct ir_type *ty = &vals[i]->type;
		bool tensor = ty->kind == IR_TYPE_TENSOR || ty->kind == IR_TYPE_SPARSE_TENSOR;
		char shape[256] = "", note[300] = "";
		if (tensor && ty->rank < 0) {
			snprintf(shape, sizeof(shape), "unknown");
		} else if (tensor) {
			char full[300];
			ir_type_str(ty, full, sizeof(full));
			const char *br = strchr(full, '[');
			snprintf(shape, sizeof(shape), "%s", br ? br : "");
		} else {
			type_s(ty, shape, sizeof(shape));
		}
		if (inputs && vals[i]->init)
			snprintf(note, sizeof(note), "has an initializer (default value)");
		if (!inputs)
			value_source(vals[i], note, sizeof(note), false);
		sh_table_row(&t, sh_esc(vals[i]->name), tensor ? (ty->elem ? ir_dtype_name(ty->elem) : "?") : "", shape,
			     note);
	}
	if (n)
		sh_table_print(s, &t, true);
	else
		sh_printf(s, "the graph has no %s\n", inputs ? "inputs" : "outputs");
	sh_table_free(&t);
	return 0;
}

int cmd_inputs(struct session *s, int argc, char **argv)
{
	return list_io(s, argc, argv, true);
}

int cmd_outputs(struct session *s, int argc, char **argv)
{
	return list_io(s, argc, argv, false);
}
