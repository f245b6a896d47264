/*
 * cmd_edit.c - hand edits: rm, rename, set-attr, set-input-shape.
 */
#include "shell.h"

#include "passes/pass.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void edited(struct session *s)
{
	sh_model_changed(s);
}

/* Checks the graph after an edit; a failure here is a bug in ogsh, said plainly. */
static int verify(struct session *s)
{
	struct ir_diag d;
	ir_diag_init(&d);
	if (ir_verify(s->model->graph, &d)) {
		sh_error(s, "internal error, the graph is inconsistent after the edit: %s", d.error);
		ir_diag_clear(&d);
		return -1;
	}
	return 0;
}

int cmd_rm(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 1)
		return sh_usage(s, argv[0]);
	struct ir_node *n = sh_node(s, a.pos[0]);
	if (!n)
		return -1;
	char nd[300];
	sh_node_desc(n, nd, sizeof(nd));
	struct ir_diag d;
	ir_diag_init(&d);
	if (pass_remove_node(s->model->graph, n, &d))
		return sh_diag(s, &d);
	sh_diag(s, &d);
	edited(s);
	if (s->interactive)
		sh_printf(s, "removed %s\n", nd);
	return verify(s);
}

int cmd_rename(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 2)
		return sh_usage(s, argv[0]);
	if (!sh_need_model(s))
		return -1;
	const char *old = a.pos[0], *nw = a.pos[1];
	struct ir_graph *g = s->model->graph;
	bool want_node = sh_flag(&a, "node"), want_value = sh_flag(&a, "value");
	if (want_node && want_value)
		return sh_error(s, "rename: --node and --value contradict each other");
	struct ir_value *v = want_node ? NULL : ir_value_find(g, old);
	if (v && v->outer)
		v = NULL;
	struct ir_node *n = NULL;
	int count = 0;
	if (!want_value) {
		/* by name; by id (n12, #12) only when no tensor has that name */
		n = ir_node_by_name(g, old, &count);
		if (!n && !v)
			n = sh_find_node(g, old, &count);
	}
	if (n && v)
		return sh_error(s, "both a node and a tensor are named '%s': add --node or --value", sh_esc(old));
	if (n && count > 1)
		return sh_ambiguous(s, g, old, count);
	if (!n && !v)
		return sh_error(s, "no %s is named '%s'", want_node ? "node" : want_value ? "tensor" : "node or tensor",
				sh_esc(old));
	if (!*nw)
		return sh_error(s, "rename: the new name is empty");
	struct ir_diag d;
	ir_diag_init(&d);
	if (n) {
		int dup = 0;
		ir_node_by_name(g, nw, &dup);
		if (dup && strcmp(nw, n->name) != 0)
			return sh_error(s, "a node named '%s' already exists", sh_esc(nw));
		if (ir_node_rename(n, nw, &d))
			return sh_diag(s, &d);
	} else if (strcmp(nw, v->name) != 0) {
		if (ir_value_find(g, nw))
			return sh_error(s, "a tensor named '%s' already exists", sh_esc(nw));
		if (ir_value_rename(v, nw, &d))
			return sh_diag(s, &d);
	}
	edited(s);
	return verify(s);
}

/* ---- set-attr ---- */

static bool parse_int(const char *t, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(t, &end, 10);
	if (!*t || *end || errno)
		return false;
	*out = v;
	return true;
}

static bool parse_float(const char *t, float *out)
{
	char *end;
	errno = 0;
	double v = strtod(t, &end);
	if (!*t || *end || errno == ERANGE || (isfinite(v) && fabs(v) > 3.4028234663852886e38))
		return false;
	*out = (float)v;
	return true;
}

/* After parse_int failed: an integer too large for int64? */
static bool int_too_large(const char *t)
{
	if (*t == '-' || *t == '+')
		t++;
	return *t && strspn(t, "0123456789") == strlen(t);
}

/* After parse_float failed: a number too large for float32? */
static bool float_too_large(const char *t)
{
	char *end;
	strtod(t, &end);
	return *t && !*end;
}

/* Splits "[a,b,c]" or "a,b,c" into items (in place). Returns count or -1. */
static int split_list(char *v, char **items, int max)
{
	size_t n = strlen(v);
	if (n && v[0] == '[') {
		if (v[n - 1] != ']')
			return -1;
		v[n - 1] = 0;
		v++;
	}
	while (*v == ' ')
		v++;
	if (!*v)
		return 0;
	int k = 0;
	for (char *p = v;;) {
		if (k == max)
			return -1;
		char *c = strchr(p, ',');
		if (c)
			*c = 0;
		while (*p == ' ')
			p++;
		char *e = p + strlen(p);
		while (e > p && e[-1] == ' ')
			*--e = 0;
		items[k++] = p;
		if (!c)
			break;
		p = c + 1;
	}
	return k;
}

static enum ir_attr_type guess_type(const char *v)
{
	int64_t i;
	float f;
	if (v[0] == '[') {
		char *copy = strdup(v), *items[4096];
		int n = copy ? split_list(copy, items, 4096) : -1;
		enum ir_attr_type t = IR_ATTR_INTS;
		for (int k = 0; k < n; k++) {
			if (parse_int(items[k], &i))
				continue;
			if (parse_float(items[k], &f))
				t = t == IR_ATTR_STRINGS ? t : IR_ATTR_FLOATS;
			else
				t = IR_ATTR_STRINGS;
		}
		free(copy);
		return t;
	}
	if (parse_int(v, &i))
		return IR_ATTR_INT;
	if (parse_float(v, &f))
		return IR_ATTR_FLOAT;
	return IR_ATTR_STRING;
}

static int type_from_name(const char *t)
{
	static const struct { const char *n; enum ir_attr_type t; } names[] = {
		{ "int", IR_ATTR_INT }, { "float", IR_ATTR_FLOAT }, { "string", IR_ATTR_STRING },
		{ "ints", IR_ATTR_INTS }, { "floats", IR_ATTR_FLOATS }, { "strings", IR_ATTR_STRINGS },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(t, names[i].n) == 0)
			return (int)names[i].t;
	return -1;
}

/* Builds attribute `name` of `type` from the text `v`. */
static int make_attr(struct session *s, struct ir_attr *a, const char *name, enum ir_attr_type type, const char *v)
{
	memset(a, 0, sizeof(*a));
	a->type = type;
	a->has_type = true;
	if (!(a->name = strdup(name)))
		return sh_error(s, "out of memory");
	switch (type) {
	case IR_ATTR_INT:
		if (!parse_int(v, &a->i))
			return sh_error(s, "set-attr %s: '%s' is not an integer%s", sh_esc(name), sh_esc(v),
					int_too_large(v) ? " in the int64 range" : "");
		return 0;
	case IR_ATTR_FLOAT:
		if (!parse_float(v, &a->f))
			return sh_error(s, "set-attr %s: '%s' is not a number%s", sh_esc(name), sh_esc(v),
					float_too_large(v) ? " in the float32 range" : "");
		return 0;
	case IR_ATTR_STRING:
		a->s.len = strlen(v);
		if (!(a->s.data = strdup(v)))
			return sh_error(s, "out of memory");
		return 0;
	case IR_ATTR_INTS: case IR_ATTR_FLOATS: case IR_ATTR_STRINGS: {
		char *copy = strdup(v);
		char **items = malloc(65536 * sizeof(char *));
		int n = copy && items ? split_list(copy, items, 65536) : -1;
		int rc = 0;
		if (n < 0) {
			rc = sh_error(s, "set-attr %s: '%s' is not a list like [1,2,3]", sh_esc(name), sh_esc(v));
			goto done;
		}
		a->n = (size_t)n;
		if (type == IR_ATTR_INTS)
			a->ints = calloc((size_t)n + 1, sizeof(int64_t));
		else if (type == IR_ATTR_FLOATS)
			a->floats = calloc((size_t)n + 1, sizeof(float));
		else
			a->strings = calloc((size_t)n + 1, sizeof(struct ir_bytes));
		if (!a->ints && !a->floats && !a->strings) {
			rc = sh_error(s, "out of memory");
			goto done;
		}
		for (int k = 0; k < n && !rc; k++) {
			if (type == IR_ATTR_INTS && !parse_int(items[k], &a->ints[k]))
				rc = sh_error(s, "set-attr %s: item %d '%s' is not an integer", sh_esc(name), k, sh_esc(items[k]));
			else if (type == IR_ATTR_FLOATS && !parse_float(items[k], &a->floats[k]))
				rc = sh_error(s, "set-attr %s: item %d '%s' is not a number", sh_esc(name), k, sh_esc(items[k]));
			else if (type == IR_ATTR_STRINGS) {
				a->strings[k].len = strlen(items[k]);
				if (!(a->strings[k].data = strdup(items[k])))
					rc = sh_error(s, "out of memory");
			}
		}
done:
		free(copy);
		free(items);
		return rc;
	}
	default:
		return sh_error(s, "set-attr %s: attributes of type %s cannot be set from text", sh_esc(name),
				ir_attr_type_name(type));
	}
}

int cmd_set_attr(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos < 2)
		return sh_usage(s, argv[0]);
	struct ir_node *n = sh_node(s, a.pos[0]);
	if (!n)
		return -1;
	/* parse every assignment before changing anything */
	int count = a.npos - 1;
	struct ir_attr *attrs = calloc((size_t)count, sizeof(*attrs));
	bool *remove = calloc((size_t)count, sizeof(bool));
	int rc = 0;
	if (!attrs || !remove) {
		free(attrs);
		free(remove);
		return sh_error(s, "out of memory");
	}
	for (int k = 0; k < count && !rc; k++) {
		char *as = a.pos[k + 1];
		char *eq = strchr(as, '=');
		if (!eq || eq == as) {
			rc = sh_error(s, "set-attr: expected NAME=VALUE, not '%s'", sh_esc(as));
			break;
		}
		*eq = 0;
		const char *val = eq + 1;
		char *colon = strchr(as, ':');
		int forced = -1;
		if (colon) {
			*colon = 0;
			if ((forced = type_from_name(colon + 1)) < 0) {
				rc = sh_error(s, "set-attr: unknown attribute type '%s' (int, float, string, ints, floats, strings)",
					      sh_esc(colon + 1));
				break;
			}
		}
		const struct ir_attr *old = ir_node_attr(n, as);
		if (!*val && forced < 0) {
			if (!old) {
				char nd[300];
				rc = sh_error(s, "set-attr: %s has no attribute '%s' to remove", sh_node_desc(n, nd, sizeof(nd)),
					      sh_esc(as));
				break;
			}
			remove[k] = true;
			attrs[k].name = strdup(as);
			continue;
		}
		/* the type: forced, else the attribute's own, else the ONNX schema's, else a guess */
		int64_t opset = ir_model_opset(s->model, n->domain);
		const struct ir_attr_schema *sch = ir_op_attr(n->op, as, opset);
		enum ir_attr_type type = forced >= 0 ? (enum ir_attr_type)forced : old && !old->ref_attr_name ? old->type
				       : sch ? sch->type : guess_type(val);
		rc = make_attr(s, &attrs[k], as, type, val);
		if (rc)
			break;
		if (n->op != IR_OP_UNKNOWN && !sch && !old)
			sh_warn(s, "%s (opset %lld) has no attribute '%s' in the ONNX schema; set as %s",
				sh_esc(n->op_type), (long long)opset, sh_esc(as), ir_attr_type_name(type));
		else if (sch && type != sch->type)
			sh_warn(s, "the ONNX schema makes %s.%s %s, not %s", sh_esc(n->op_type), sh_esc(as),
				ir_attr_type_name(sch->type), ir_attr_type_name(type));
	}
	if (!rc) {
		struct ir_diag d;
		ir_diag_init(&d);
		for (int k = 0; k < count && !rc; k++) {
			if (remove[k])
				ir_node_remove_attr(n, attrs[k].name);
			else if (ir_node_set_attr(n, &attrs[k], &d))
				rc = sh_diag(s, &d);
		}
		edited(s);
	}
	for (int k = 0; k < count; k++)
		ir_attr_clear(&attrs[k]);
	free(attrs);
	free(remove);
	return rc ? rc : verify(s);
}

/* What ir_parse_dims would read wrongly or explain badly: in the
 * 1x3x224x224 form 'x' separates dimensions, so a name next to an 'x' is
 * ambiguous (is batchx3 one name, or batch and 3?) and names need commas or
 * brackets; and a '[' that is not closed. NULL when the text is fine. */
static const char *dims_problem(const char *t)
{
	size_t n = strlen(t);
	while (n && t[n - 1] == ' ')
		n--;
	const char *p = t;
	while (*p == ' ')
		p++;
	if (*p == '[' && (n == 0 || t[n - 1] != ']'))
		return "the ']' is missing";
	if (strpbrk(t, ",[]"))
		return NULL;
	bool name = false, x = false;
	for (p = t; *p; p++) {
		if (*p == 'x')
			x = true;
		else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_')
			name = true;
	}
	return name && x ? "with names, use commas (batch,3,224,224) or brackets ([seq_max]), not x"
			 : NULL;
}

/* Whether the initializer of an input fits the shape `dims`. */
static bool init_fits(const struct ir_tensor *t, int rank, const struct ir_dim *dims)
{
	if (t->rank != rank)
		return false;
	for (int i = 0; i < rank; i++)
		if (dims[i].kind == IR_DIM_VALUE && dims[i].value != t->dims[i])
			return false;
	return true;
}

int cmd_set_input_shape(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command(argv[0]), argc, argv, &a))
		return -1;
	if (a.npos != 2)
		return sh_usage(s, argv[0]);
	struct ir_value *v = sh_value(s, a.pos[0]);
	if (!v)
		return -1;
	if (!v->is_input)
		return sh_error(s, "'%s' is not a graph input", sh_esc(v->name));
	if (v->type.kind != IR_TYPE_TENSOR && v->type.kind != IR_TYPE_NONE)
		return sh_error(s, "'%s' is not a tensor input", sh_esc(v->name));
	const char *text = a.pos[1];
	const char *problem = dims_problem(text);
	if (problem)
		return sh_error(s, "cannot read the dimensions '%s': %s", sh_esc(text), problem);
	struct ir_dim dims[IR_MAX_RANK];
	struct ir_diag d;
	ir_diag_init(&d);
	int rank = ir_parse_dims(text, dims, &d);
	if (rank < 0)
		return sh_diag(s, &d);
	if (v->init && !init_fits(v->init, rank, dims)) {
		char tb[256], shape[256];
		struct ir_type want = { .kind = IR_TYPE_TENSOR, .elem = v->type.elem, .rank = rank, .dims = dims };
		ir_type_str(&want, tb, sizeof(tb));
		const char *br = strchr(tb, '[');
		ir_dims_clear(dims, rank);
		return sh_error(s, "cannot give '%s' the shape %s: its initializer has the shape %s", sh_esc(v->name),
				br ? br : tb, ir_dims_str(v->init->rank, v->init->dims, shape, sizeof(shape)));
	}
	int rc = ir_type_set_tensor(&v->type, v->type.elem, rank, dims);
	ir_dims_clear(dims, rank);
	if (rc)
		return sh_error(s, "out of memory");
	v->type.has_elem = v->type.elem != 0;
	v->has_type_proto = true;
	edited(s);
	return verify(s);
}
