/*
 * cmd_stats.c - stats and cost: what the model and its nodes cost
 * (parameters, MACs, FLOPs, bytes, activation memory), from ir/cost.c.
 */
#include "shell.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- numbers ---- */


static const char *bytes(double v, char *buf, size_t size)
{
	if (!isfinite(v) || v < 0) {
		snprintf(buf, size, "?");
		return buf;
	}
	if (v >= 1.8e19) {
		snprintf(buf, size, "%.3g B", v);
		return buf;
	}
	return sh_bytes((uint64_t)v, buf, size);
}

/* "25,557,032" for integers that fit, else sh_si() */
static const char *count(double v, char *buf, size_t size)
{
	if (v >= 0 && v < 9007199254740992.0 && v == floor(v))
		return sh_count((uint64_t)v, buf, size);
	return sh_si(v, buf, size);
}

/* "458,752 (459 K)", "650" */
static const char *both(double v, char *buf, size_t size)
{
	char a[64], b[64];
	if (v >= 1000)
		snprintf(buf, size, "%s (%s)", count(v, a, sizeof(a)), sh_si(v, b, sizeof(b)));
	else
		snprintf(buf, size, "%s", count(v, a, sizeof(a)));
	return buf;
}

static const char *ratio(double v, char *buf, size_t size)
{
	if (!isfinite(v))
		snprintf(buf, size, "?");
	else if (v < 10)
		snprintf(buf, size, "%.2f", v);
	else if (v < 100)
		snprintf(buf, size, "%.1f", v);
	else
		snprintf(buf, size, "%.0f", v);
	return buf;
}

static const char *pct(double part, double whole, char *buf, size_t size)
{
	if (whole <= 0 || !isfinite(part / whole))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.1f%%", 100 * part / whole);
	return buf;
}

/* integers exactly, other numbers as numbers */
static void jnum(struct sh_json *j, const char *k, double v)
{
	sh_json_key(j, k);
	if (v >= 0 && v < 9007199254740992.0 && v == floor(v))
		sh_json_uint(j, (uint64_t)v);
	else
		sh_json_num(j, v);
}

/* a figure of a node: null when the node's cost is not known */
static void jfig(struct sh_json *j, const char *k, double v, bool known)
{
	if (known) {
		jnum(j, k, v);
	} else {
		sh_json_key(j, k);
		sh_json_null(j);
	}
}

static const char *dom(const char *d)
{
	return d && *d ? d : "ai.onnx";
}

static void json_symbols(struct sh_json *j, char **syms, int n)
{
	sh_json_key(j, "assumed");
	sh_json_obj(j);
	for (int i = 0; i < n; i++)
		sh_json_kint(j, syms[i], 1);
	sh_json_obj_end(j);
}

/* "batch and seq taken as 1" */
static const char *symbols_text(char **syms, int n, char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < n && o + 1 < size; i++) {
		int w = snprintf(buf + o, size - o, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", sh_esc(syms[i]));
		if (w < 0)
			break;
		o += (size_t)w;
	}
	if (o + 1 < size)
		snprintf(buf + o, size - o, " taken as 1");
	return buf;
}

/* ---- stats ---- */

enum col { C_NODE, C_NAME, C_OP, C_OUTPUT, C_COUNT, C_PARAMS, C_MACS, C_FLOPS, C_READ, C_WRITTEN, C_BYTES,
	   C_INTENSITY, C_SHARE, C_UNKNOWN };

/* Sort keys (case does not matter); aliases are the tables' headings. */
static const struct { const char *name; enum col col; bool node, op, alias; } columns[] = {
	{ "node", C_NODE, true, false, false }, { "name", C_NAME, true, false, false },
	{ "op", C_OP, true, true, false }, { "output", C_OUTPUT, true, false, false },
	{ "count", C_COUNT, false, true, false }, { "unknown", C_UNKNOWN, false, true, false },
	{ "params", C_PARAMS, true, true, false }, { "macs", C_MACS, true, true, false },
	{ "flops", C_FLOPS, true, true, false }, { "read", C_READ, true, true, false },
	{ "written", C_WRITTEN, true, true, false }, { "bytes", C_BYTES, true, true, false },
	{ "intensity", C_INTENSITY, true, true, false }, { "share", C_SHARE, true, true, false },
	{ "flops/b", C_INTENSITY, true, true, true }, { "flops%", C_SHARE, true, true, true },
	{ "%", C_SHARE, true, true, true },
};

struct row {
	const struct ir_node_cost *nc;   /* --by=node */
	const struct ir_op_cost *oc;     /* --by=op */
	int index;
};

static enum col sort_col;

static double node_val(const struct ir_node_cost *n, enum col c)
{
	/* unknown nodes sort below every known one */
	if (!n->known && c != C_PARAMS && c != C_OUTPUT)
		return -1;
	switch (c) {
	case C_PARAMS: return n->params;
	case C_MACS: return n->macs;
	case C_FLOPS: case C_SHARE: return n->flops;
	case C_READ: return n->bytes_read;
	case C_WRITTEN: return n->bytes_written;
	case C_BYTES: return n->bytes_read + n->bytes_written;
	case C_INTENSITY: return n->intensity;
	case C_OUTPUT: return n->n_outputs && n->outputs[0].name ? n->outputs[0].numel : -1;
	default: return 0;
	}
}

static double op_val(const struct ir_op_cost *o, enum col c)
{
	switch (c) {
	case C_COUNT: return o->count;
	case C_UNKNOWN: return o->n_unknown;
	case C_PARAMS: return o->params;
	case C_MACS: return o->macs;
	case C_FLOPS: case C_SHARE: return o->flops;
	case C_READ: return o->bytes_read;
	case C_WRITTEN: return o->bytes_written;
	case C_BYTES: return o->bytes_read + o->bytes_written;
	case C_INTENSITY: {
		double b = o->bytes_read + o->bytes_written;
		return b > 0 ? o->flops / b : 0;
	}
	default: return 0;
	}
}

static int cmp_rows(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	int r = 0;
	if (sort_col == C_NODE) {
		r = 0;
	} else if (sort_col == C_NAME) {
		r = strcmp(a->nc->name, b->nc->name);
	} else if (sort_col == C_OP) {
		r = a->nc ? strcmp(a->nc->op_type, b->nc->op_type) : strcmp(a->oc->op_type, b->oc->op_type);
	} else {
		double x = a->nc ? node_val(a->nc, sort_col) : op_val(a->oc, sort_col);
		double y = b->nc ? node_val(b->nc, sort_col) : op_val(b->oc, sort_col);
		r = x < y ? 1 : x > y ? -1 : 0;
	}
	return r ? r : a->index - b->index;
}

/* Whether some compute is in a precision below float32 (quantized, float16, bfloat16). */
bool sh_stats_reduced(const struct ir_stats *st)
{
	for (int i = 0; i < st->n_precs; i++) {
		int p = st->precs[i].prec;
		bool low = p == IR_FLOAT16 || p == IR_BFLOAT16 || p == IR_INT8 || p == IR_INT4 || p == IR_INT2 ||
			   p == IR_INT16 || p == IR_F8E4M3FN || p == IR_F4E2M1;
		if (low && (st->precs[i].flops > 0 || st->precs[i].macs > 0))
			return true;
	}
	return false;
}

static void summary(struct session *s, const struct ir_stats *st)
{
	char b1[64], b2[64], b3[64], tb[1024];
	struct sh_table t;
	sh_table_init(&t, 2, "", "");
	if (st->n_unknown)
		snprintf(tb, sizeof(tb), "'%s': %d node%s, %d not counted (the totals are lower bounds)", sh_esc(st->graph_name),
			 st->n_nodes, st->n_nodes == 1 ? "" : "s", st->n_unknown);
	else
		snprintf(tb, sizeof(tb), "'%s': %d node%s, all counted", sh_esc(st->graph_name), st->n_nodes,
			 st->n_nodes == 1 ? "" : "s");
	sh_table_row(&t, "graph", tb);
	/* parameters, by dtype when there are several */
	int kinds = 0;
	for (int i = 0; i < st->n_dtypes; i++)
		kinds += st->dtypes[i].params > 0;
	/* "25,557,032 float32 (25.6 M, 97.5 MiB)"; with several dtypes the split follows */
	const char *dt = "";
	for (int i = 0; kinds == 1 && i < st->n_dtypes; i++)
		if (st->dtypes[i].params > 0)
			dt = ir_dtype_name(st->dtypes[i].dtype);
	size_t o;
	if (st->params >= 1000)
		o = (size_t)snprintf(tb, sizeof(tb), "%s%s%s (%s, %s)", count(st->params, b1, sizeof(b1)), *dt ? " " : "", dt,
				     sh_si(st->params, b2, sizeof(b2)), bytes(st->param_bytes, b3, sizeof(b3)));
	else
		o = (size_t)snprintf(tb, sizeof(tb), "%s%s%s (%s)", count(st->params, b1, sizeof(b1)), *dt ? " " : "", dt,
				     bytes(st->param_bytes, b3, sizeof(b3)));
	if (kinds > 1) {
		o += (size_t)snprintf(tb + o, sizeof(tb) - o, ":");
		for (int i = 0; i < st->n_dtypes && o < sizeof(tb); i++)
			if (st->dtypes[i].params > 0)
				o += (size_t)snprintf(tb + o, sizeof(tb) - o, "%s %s %s", i ? "," : "",
						      ir_dtype_name(st->dtypes[i].dtype), count(st->dtypes[i].params, b1, sizeof(b1)));
	}
	sh_table_row(&t, "parameters", st->params > 0 ? tb : "0");
	/* weight bytes by dtype: where the bytes are (int8 weights and their float32 scales) */
	if (kinds > 1) {
		o = 0;
		for (int i = 0, k = 0; i < st->n_dtypes && o < sizeof(tb); i++)
			if (st->dtypes[i].params > 0)
				o += (size_t)snprintf(tb + o, sizeof(tb) - o, "%s%s %s", k++ ? ", " : "",
						      bytes(st->dtypes[i].param_bytes, b1, sizeof(b1)),
						      ir_dtype_name(st->dtypes[i].dtype));
		sh_table_row(&t, "weight bytes", tb);
	}
	if (st->buffers > 0) {
		snprintf(tb, sizeof(tb), "%s (%s): running statistics and caches, not learned", count(st->buffers, b1, sizeof(b1)),
			 bytes(st->buffer_bytes, b2, sizeof(b2)));
		sh_table_row(&t, "buffers", tb);
	}
	if (st->constants > 0) {
		snprintf(tb, sizeof(tb), "%s (%s): shapes, axes, indices, masks, scalars", count(st->constants, b1, sizeof(b1)),
			 bytes(st->constant_bytes, b2, sizeof(b2)));
		sh_table_row(&t, "constants", tb);
	}
	sh_table_row(&t, "MACs", sh_si(st->macs, b1, sizeof(b1)));
	sh_table_row(&t, "FLOPs", sh_si(st->flops, b1, sizeof(b1)));
	/* compute by precision, when some is quantized or in half precision */
	if (sh_stats_reduced(st)) {
		int k = 0;
		for (int i = 0; i < st->n_precs; i++) {
			const struct ir_stats_prec *p = &st->precs[i];
			if (p->flops <= 0 && p->macs <= 0)
				continue;
			snprintf(tb, sizeof(tb), "%-8s %8s MACs  %8s FLOPs  %6s", ir_precision_name(p->prec),
				 sh_si(p->macs, b1, sizeof(b1)), sh_si(p->flops, b2, sizeof(b2)),
				 pct(p->flops, st->flops, b3, sizeof(b3)));
			sh_table_row(&t, k++ ? "" : "compute", tb);
		}
	}
	snprintf(tb, sizeof(tb), "%s read, %s written", bytes(st->bytes_read, b1, sizeof(b1)),
		 bytes(st->bytes_written, b2, sizeof(b2)));
	sh_table_row(&t, "bytes", tb);
	sh_table_row(&t, "FLOPs/byte", ratio(st->intensity, b1, sizeof(b1)));
	o = (size_t)snprintf(tb, sizeof(tb), "%d values, %s in all; peak %s", st->n_activations,
			     bytes(st->activation_bytes, b1, sizeof(b1)), bytes(st->peak_bytes, b2, sizeof(b2)));
	if (st->peak_index >= 0) {
		const struct ir_node_cost *pn = &st->nodes[st->peak_index];
		if (*pn->name)
			o += (size_t)snprintf(tb + o, sizeof(tb) - o, " at n%d '%s' (%s)", pn->id, sh_esc(pn->name), sh_esc(pn->op_type));
		else
			o += (size_t)snprintf(tb + o, sizeof(tb) - o, " at n%d (%s)", pn->id, sh_esc(pn->op_type));
	}
	if (st->n_activations_unknown && o < sizeof(tb))
		snprintf(tb + o, sizeof(tb) - o, " (%d of unknown size not counted)", st->n_activations_unknown);
	sh_table_row(&t, "activations", tb);
	if (st->n_symbols)
		sh_table_row(&t, "assumed", symbols_text(st->symbols, st->n_symbols, tb, sizeof(tb)));
	sh_table_print(s, &t, false);
	sh_table_free(&t);
}

static void json_totals(struct sh_json *j, const struct ir_stats *st)
{
	sh_json_kstr(j, "graph", st->graph_name);
	sh_json_kint(j, "nodes", st->n_nodes);
	sh_json_kint(j, "unknown_nodes", st->n_unknown);
	sh_json_kbool(j, "lower_bounds", st->n_unknown > 0);
	json_symbols(j, st->symbols, st->n_symbols);
	sh_json_key(j, "totals");
	sh_json_obj(j);
	jnum(j, "params", st->params);
	jnum(j, "param_bytes", st->param_bytes);
	jnum(j, "buffers", st->buffers);
	jnum(j, "buffer_bytes", st->buffer_bytes);
	jnum(j, "constants", st->constants);
	jnum(j, "constant_bytes", st->constant_bytes);
	jnum(j, "macs", st->macs);
	jnum(j, "flops", st->flops);
	jnum(j, "bytes_read", st->bytes_read);
	jnum(j, "bytes_written", st->bytes_written);
	jnum(j, "intensity", st->intensity);
	sh_json_obj_end(j);
	sh_json_key(j, "by_dtype");
	sh_json_arr(j);
	for (int i = 0; i < st->n_dtypes; i++) {
		const struct ir_stats_dtype *d = &st->dtypes[i];
		sh_json_obj(j);
		sh_json_kstr(j, "dtype", ir_dtype_name(d->dtype));
		sh_json_kint(j, "tensors", d->n_tensors);
		jnum(j, "params", d->params);
		jnum(j, "param_bytes", d->param_bytes);
		jnum(j, "buffers", d->buffers);
		jnum(j, "buffer_bytes", d->buffer_bytes);
		jnum(j, "constants", d->constants);
		jnum(j, "constant_bytes", d->constant_bytes);
		sh_json_obj_end(j);
	}
	sh_json_arr_end(j);
	sh_json_key(j, "by_precision");
	sh_json_arr(j);
	for (int i = 0; i < st->n_precs; i++) {
		const struct ir_stats_prec *p = &st->precs[i];
		sh_json_obj(j);
		sh_json_kstr(j, "precision", ir_precision_name(p->prec));
		sh_json_kint(j, "nodes", p->n_nodes);
		jnum(j, "macs", p->macs);
		jnum(j, "flops", p->flops);
		jnum(j, "share", st->flops > 0 ? p->flops / st->flops : 0);
		sh_json_obj_end(j);
	}
	sh_json_arr_end(j);
	sh_json_key(j, "activations");
	sh_json_obj(j);
	sh_json_kint(j, "values", st->n_activations);
	sh_json_kint(j, "unknown", st->n_activations_unknown);
	jnum(j, "bytes", st->activation_bytes);
	jnum(j, "peak_bytes", st->peak_bytes);
	sh_json_key(j, "peak_node");
	if (st->peak_index >= 0) {
		const struct ir_node_cost *pn = &st->nodes[st->peak_index];
		sh_json_obj(j);
		sh_json_kint(j, "id", pn->id);
		sh_json_kstr(j, "name", pn->name);
		sh_json_kstr(j, "op", pn->op_type);
		sh_json_kint(j, "position", st->peak_index);
		sh_json_obj_end(j);
	} else {
		sh_json_null(j);
	}
	sh_json_obj_end(j);
}

static void json_node(struct sh_json *j, const struct ir_node_cost *n, double total_flops, bool detail)
{
	sh_json_obj(j);
	sh_json_kint(j, "id", n->id);
	sh_json_kstr(j, "name", n->name);
	sh_json_kstr(j, "op", n->op_type);
	sh_json_kstr(j, "domain", dom(n->domain));
	sh_json_kbool(j, "known", n->known);
	sh_json_kstr(j, "why", n->known ? NULL : n->why);
	sh_json_kstr(j, "precision", ir_precision_name(n->precision));
	jnum(j, "params", n->params);
	jnum(j, "weight_bytes", n->weight_bytes);
	jfig(j, "macs", n->macs, n->known);
	jfig(j, "flops", n->flops, n->known);
	jfig(j, "bytes_read", n->bytes_read, n->known);
	jfig(j, "bytes_written", n->bytes_written, n->known);
	jfig(j, "intensity", n->intensity, n->known);
	if (total_flops >= 0)
		jfig(j, "share", total_flops > 0 ? n->flops / total_flops : 0, n->known);
	json_symbols(j, n->symbols, n->n_symbols);
	if (!detail) {
		sh_json_key(j, "outputs");
		sh_json_arr(j);
		for (int k = 0; k < n->n_outputs; k++)
			sh_json_str(j, n->outputs[k].name);
		sh_json_arr_end(j);
	} else {
		sh_json_kstr(j, "how", n->how);
		const char *keys[2] = { "inputs", "outputs" };
		for (int side = 0; side < 2; side++) {
			const struct ir_cost_io *io = side ? n->outputs : n->inputs;
			int cnt = side ? n->n_outputs : n->n_inputs;
			sh_json_key(j, keys[side]);
			sh_json_arr(j);
			for (int i = 0; i < cnt; i++) {
				if (!io[i].name) {
					sh_json_null(j);
					continue;
				}
				sh_json_obj(j);
				sh_json_kstr(j, "name", io[i].name);
				sh_json_kstr(j, "type", io[i].type);
				sh_json_kstr(j, "role", io[i].role ? ir_const_role_name(io[i].role) : NULL);
				jfig(j, "elements", io[i].numel, io[i].known || io[i].numel > 0);
				jfig(j, "bytes", io[i].bytes, io[i].known);
				sh_json_obj_end(j);
			}
			sh_json_arr_end(j);
		}
	}
	sh_json_obj_end(j);
}

static const char *out_shape(const struct ir_node_cost *n)
{
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k].name) {
			const char *br = strchr(n->outputs[k].type, '[');
			return br ? br : n->outputs[k].type;
		}
	return "";
}

int cmd_stats(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos == 2) {
		if (!sh_need_model(s))
			return -1;
		if (sh_opt(&a, "by") || sh_opt(&a, "sort") || sh_opt(&a, "top"))
			return sh_error(s, "stats: --by, --sort and --top are for one stage; stats A B compares totals");
		return sh_stats_stages(s, a.pos[0], a.pos[1], sh_flag(&a, "json"));
	}
	if (a.npos)
		return sh_usage(s, argv[0]);
	const char *by = sh_opt(&a, "by"), *sort = sh_opt(&a, "sort"), *top = sh_opt(&a, "top");
	bool by_node = false;
	if (by && strcmp(by, "node") == 0)
		by_node = true;
	else if (by && strcmp(by, "op") != 0)
		return sh_error(s, "stats: --by takes op or node, not '%s'", sh_esc(by));
	sort_col = by_node ? C_NODE : C_FLOPS;
	if (sort) {
		bool found = false;
		char list[256] = "";
		size_t o = 0;
		for (size_t i = 0; i < sizeof(columns) / sizeof(columns[0]); i++) {
			if (!(by_node ? columns[i].node : columns[i].op))
				continue;
			if (!columns[i].alias)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", columns[i].name);
			if (strcasecmp(sort, columns[i].name) == 0 ||
			    (columns[i].alias && strcasecmp(sort, columns[i].name) == 0)) {
				sort_col = columns[i].col;
				found = true;
			}
		}
		if (!found)
			return sh_error(s, "stats: cannot sort %s by '%s' (columns: %s)", by_node ? "nodes" : "op types",
					sh_esc(sort), list);
	}
	long limit = -1;
	if (top) {
		char *end;
		limit = strtol(top, &end, 10);
		if (!*top || *end || limit <= 0)
			return sh_error(s, "stats: --top takes a positive number, not '%s'", sh_esc(top));
	}
	if (!sh_need_model(s) || sh_infer(s))
		return -1;
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_stats *st = ir_stats_new(s->model, &d);
	if (!st)
		return sh_diag(s, &d);
	ir_diag_clear(&d);

	int nrows = by_node ? st->n_nodes : st->n_ops;
	struct row *rows = nrows ? calloc((size_t)nrows, sizeof(*rows)) : NULL;
	if (nrows && !rows) {
		ir_stats_free(st);
		return sh_error(s, "stats: out of memory");
	}
	for (int i = 0; i < nrows; i++) {
		rows[i].index = i;
		if (by_node)
			rows[i].nc = &st->nodes[i];
		else
			rows[i].oc = &st->ops[i];
	}
	if (nrows)
		qsort(rows, (size_t)nrows, sizeof(*rows), cmp_rows);
	int shown = limit > 0 && limit < nrows ? (int)limit : nrows;

	if (sh_flag(&a, "json")) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		sh_json_obj(&j);
		json_totals(&j, st);
		sh_json_key(&j, by_node ? "nodes" : "ops");
		sh_json_arr(&j);
		for (int i = 0; i < shown; i++) {
			if (by_node) {
				json_node(&j, rows[i].nc, st->flops, false);
				continue;
			}
			const struct ir_op_cost *oc = rows[i].oc;
			sh_json_obj(&j);
			sh_json_kstr(&j, "op", oc->op_type);
			sh_json_kstr(&j, "domain", dom(oc->domain));
			sh_json_kint(&j, "count", oc->count);
			sh_json_kint(&j, "unknown", oc->n_unknown);
			jnum(&j, "params", oc->params);
			jnum(&j, "weight_bytes", oc->weight_bytes);
			jnum(&j, "macs", oc->macs);
			jnum(&j, "flops", oc->flops);
			jnum(&j, "bytes_read", oc->bytes_read);
			jnum(&j, "bytes_written", oc->bytes_written);
			jnum(&j, "share", st->flops > 0 ? oc->flops / st->flops : 0);
			sh_json_obj_end(&j);
		}
		sh_json_arr_end(&j);
		sh_json_obj_end(&j);
		sh_json_end(&j);
		free(rows);
		ir_stats_free(st);
		return 0;
	}

	summary(s, st);
	sh_printf(s, "\n");
	char b[8][64];
	struct sh_table t;
	if (by_node) {
		sh_table_init(&t, 11, "node", "name", "op", "output", ">params", ">MACs", ">FLOPs", ">read", ">written",
			      ">FLOPs/B", ">FLOPs %");
		for (int i = 0; i < shown; i++) {
			const struct ir_node_cost *n = rows[i].nc;
			char id[32];
			snprintf(id, sizeof(id), "n%d", n->id);
			if (n->known)
				sh_table_row(&t, id, sh_esc(n->name), sh_esc(n->op_type), sh_esc(out_shape(n)),
					     sh_si(n->params, b[0], 64), sh_si(n->macs, b[1], 64), sh_si(n->flops, b[2], 64),
					     bytes(n->bytes_read, b[3], 64), bytes(n->bytes_written, b[4], 64),
					     ratio(n->intensity, b[5], 64), pct(n->flops, st->flops, b[6], 64));
			else
				sh_table_row(&t, id, sh_esc(n->name), sh_esc(n->op_type), sh_esc(out_shape(n)),
					     sh_si(n->params, b[0], 64), "?", "?", "?", "?", "?", "?");
		}
	} else {
		sh_table_init(&t, 8, "op", ">count", ">params", ">MACs", ">FLOPs", ">read", ">written", ">FLOPs %");
		for (int i = 0; i < shown; i++) {
			const struct ir_op_cost *oc = rows[i].oc;
			char cnt[64], name[300];
			if (oc->n_unknown)
				snprintf(cnt, sizeof(cnt), "%d (%d ?)", oc->count, oc->n_unknown);
			else
				snprintf(cnt, sizeof(cnt), "%d", oc->count);
			if (*oc->domain)
				snprintf(name, sizeof(name), "%s:%s", sh_esc(oc->domain), sh_esc(oc->op_type));
			else
				snprintf(name, sizeof(name), "%s", sh_esc(oc->op_type));
			bool none = oc->n_unknown == oc->count;
			sh_table_row(&t, name, cnt, sh_si(oc->params, b[0], 64), none ? "?" : sh_si(oc->macs, b[1], 64),
				     none ? "?" : sh_si(oc->flops, b[2], 64), none ? "?" : bytes(oc->bytes_read, b[3], 64),
				     none ? "?" : bytes(oc->bytes_written, b[4], 64), pct(oc->flops, st->flops, b[5], 64));
		}
	}
	if (shown)
		sh_table_print(s, &t, true);
	sh_table_free(&t);
	if (shown < nrows)
		sh_printf(s, "(%d more %s not shown)\n", nrows - shown, by_node ? "nodes" : "op types");
	/* why nodes were not counted: the first few */
	if (st->n_unknown && !by_node) {
		sh_printf(s, "\nnot counted (%d node%s; `stats --by=node` lists them, `cost NODE` says more):\n", st->n_unknown,
			  st->n_unknown == 1 ? "" : "s");
		int k = 0;
		for (int i = 0; i < st->n_nodes && k < 3; i++) {
			const struct ir_node_cost *n = &st->nodes[i];
			if (n->known)
				continue;
			k++;
			if (*n->name)
				sh_printf(s, "  n%d '%s' (%s): %s\n", n->id, sh_esc(n->name), sh_esc(n->op_type), sh_esc(n->why));
			else
				sh_printf(s, "  n%d (%s): %s\n", n->id, sh_esc(n->op_type), sh_esc(n->why));
		}
		if (st->n_unknown > k)
			sh_printf(s, "  ... and %d more\n", st->n_unknown - k);
	}
	free(rows);
	ir_stats_free(st);
	return 0;
}

/* ---- cost ---- */

int cmd_cost(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (!sh_need_model(s))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	struct ir_node *node = sh_node(s, a.pos[0]);
	if (!node || sh_infer(s))
		return -1;
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_node_cost c;
	if (ir_node_cost(s->model, node, &c, &d))
		return sh_diag(s, &d);
	if (sh_flag(&a, "json")) {
		struct sh_json j;
		sh_json_begin(&j, s->out);
		json_node(&j, &c, -1, true);
		sh_json_end(&j);
		ir_node_cost_clear(&c);
		return 0;
	}
	char b1[64], b2[64], tb[1024];
	struct sh_table t;
	sh_table_init(&t, 2, "", "");
	sh_table_row(&t, "node", sh_node_desc(node, tb, sizeof(tb)));
	const char *labels[2] = { "inputs", "outputs" };
	for (int side = 0; side < 2; side++) {
		const struct ir_cost_io *io = side ? c.outputs : c.inputs;
		int cnt = side ? c.n_outputs : c.n_inputs, shown = 0;
		for (int i = 0; i < cnt; i++) {
			if (!io[i].name)
				continue;
			char what[128] = "";
			if (io[i].known && io[i].role)
				snprintf(what, sizeof(what), " (%s, %s)", ir_const_role_name(io[i].role), bytes(io[i].bytes, b1, sizeof(b1)));
			else if (io[i].known)
				snprintf(what, sizeof(what), " (%s)", bytes(io[i].bytes, b1, sizeof(b1)));
			else if (io[i].role)
				snprintf(what, sizeof(what), " (%s)", ir_const_role_name(io[i].role));
			snprintf(tb, sizeof(tb), "%s  %s%s", sh_esc(io[i].name), sh_esc(io[i].type), what);
			sh_table_row(&t, shown++ ? "" : labels[side], tb);
		}
		if (!shown)
			sh_table_row(&t, labels[side], "none");
	}
	snprintf(tb, sizeof(tb), "%s (%s)", count(c.params, b1, sizeof(b1)), bytes(c.weight_bytes, b2, sizeof(b2)));
	sh_table_row(&t, "params", c.params > 0 ? tb : "0");
	if (c.known) {
		sh_table_row(&t, "MACs", both(c.macs, tb, sizeof(tb)));
		sh_table_row(&t, "FLOPs", both(c.flops, tb, sizeof(tb)));
		snprintf(tb, sizeof(tb), "%s read, %s written", bytes(c.bytes_read, b1, sizeof(b1)),
			 bytes(c.bytes_written, b2, sizeof(b2)));
		sh_table_row(&t, "bytes", tb);
		sh_table_row(&t, "FLOPs/byte", ratio(c.intensity, b1, sizeof(b1)));
		if (*c.how)
			sh_table_row(&t, "counted", sh_esc(c.how));
	} else {
		snprintf(tb, sizeof(tb), "not known: %s", sh_esc(c.why));
		sh_table_row(&t, "cost", tb);
	}
	if (c.n_symbols)
		sh_table_row(&t, "assumed", symbols_text(c.symbols, c.n_symbols, tb, sizeof(tb)));
	sh_table_print(s, &t, false);
	sh_table_free(&t);
	ir_node_cost_clear(&c);
	return 0;
}
