/*
 * type.c - value types (ONNX TypeProto) and node attributes.
 */
#include "ir_private.h"

#include <inttypes.h>
#include <stdio.h>

void ir_type_clear(struct ir_type *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->rank; i++)
		ir_dim_clear(&t->dims[i]);
	free(t->dims);
	if (t->inner) {
		ir_type_clear(t->inner);
		free(t->inner);
	}
	free(t->denotation);
	memset(t, 0, sizeof(*t));
}

int ir_type_copy(struct ir_type *dst, const struct ir_type *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->kind = src->kind;
	dst->elem = src->elem;
	dst->has_elem = src->has_elem;
	dst->key = src->key;
	dst->rank = src->rank;
	if (src->denotation && !(dst->denotation = ir_strdup(src->denotation)))
		goto nomem;
	if (src->rank > 0) {
		dst->dims = ir_alloc_array((size_t)src->rank, sizeof(struct ir_dim));
		if (!dst->dims) {
			dst->rank = 0;
			goto nomem;
		}
		for (int i = 0; i < src->rank; i++) {
			const struct ir_dim *s = &src->dims[i];
			struct ir_dim *d = &dst->dims[i];
			d->kind = s->kind;
			d->value = s->value;
			if ((s->param && !(d->param = ir_strdup(s->param))) ||
			    (s->denotation && !(d->denotation = ir_strdup(s->denotation))))
				goto nomem;
		}
	}
	if (src->inner) {
		dst->inner = calloc(1, sizeof(*dst->inner));
		if (!dst->inner || ir_type_copy(dst->inner, src->inner))
			goto nomem;
	}
	return 0;
nomem:
	ir_type_clear(dst);
	return IR_ENOMEM;
}

bool ir_type_equal(const struct ir_type *a, const struct ir_type *b)
{
	if (a->kind != b->kind || a->elem != b->elem || a->has_elem != b->has_elem ||
	    a->key != b->key || a->rank != b->rank || !ir_str_eq(a->denotation, b->denotation))
		return false;
	for (int i = 0; i < a->rank; i++) {
		const struct ir_dim *x = &a->dims[i], *y = &b->dims[i];
		if (x->kind != y->kind || !ir_str_eq(x->denotation, y->denotation))
			return false;
		if (x->kind == IR_DIM_VALUE && x->value != y->value)
			return false;
		if (x->kind == IR_DIM_PARAM && !ir_str_eq(x->param, y->param))
			return false;
	}
	if (!a->inner || !b->inner)
		return a->inner == b->inner;
	return ir_type_equal(a->inner, b->inner);
}

static size_t dims_out(const struct ir_type *t, char *buf, size_t size)
{
	size_t o = 0;
#define PUT(...) do { if (o < size) o += (size_t)snprintf(buf + o, size - o, __VA_ARGS__); } while (0)
	if (t->rank < 0) {
		PUT("[?]");   /* unknown rank */
		return o;
	}
	PUT("[");
	for (int i = 0; i < t->rank; i++) {
		const struct ir_dim *dm = &t->dims[i];
		if (i)
			PUT(",");
		if (dm->kind == IR_DIM_VALUE)
			PUT("%" PRId64, dm->value);
		else if (dm->kind == IR_DIM_PARAM)
			PUT("%s", dm->param);
		else
			PUT("?");
	}
	PUT("]");
	return o;
}

char *ir_type_str(const struct ir_type *t, char *buf, size_t size)
{
	if (!size)
		return buf;
	buf[0] = 0;
	size_t o = 0;
	switch (t->kind) {
	case IR_TYPE_NONE:
		PUT("?");
		break;
	case IR_TYPE_TENSOR:
	case IR_TYPE_SPARSE_TENSOR:
		PUT("%s%s", t->kind == IR_TYPE_SPARSE_TENSOR ? "sparse " : "",
		    t->elem ? ir_dtype_name(t->elem) : "?");
		if (o < size)
			o += dims_out(t, buf + o, size - o);
		break;
	case IR_TYPE_SEQUENCE:
	case IR_TYPE_OPTIONAL: {
		char inner[256];
		PUT("%s(%s)", t->kind == IR_TYPE_SEQUENCE ? "seq" : "optional",
		    t->inner ? ir_type_str(t->inner, inner, sizeof(inner)) : "?");
		break;
	}
	case IR_TYPE_MAP: {
		char inner[256];
		PUT("map(%s,%s)", ir_dtype_name(t->key),
		    t->inner ? ir_type_str(t->inner, inner, sizeof(inner)) : "?");
		break;
	}
	}
	return buf;
}

int ir_type_set_tensor(struct ir_type *t, int elem, int rank, const struct ir_dim *dims)
{
	struct ir_type n = { .kind = IR_TYPE_TENSOR, .elem = elem, .has_elem = elem != 0, .rank = rank };
	if (rank > 0) {
		n.dims = ir_alloc_array((size_t)rank, sizeof(struct ir_dim));
		if (!n.dims)
			return IR_ENOMEM;
		for (int i = 0; i < rank; i++) {
			n.dims[i].kind = dims ? dims[i].kind : IR_DIM_UNKNOWN;
			n.dims[i].value = dims ? dims[i].value : 0;
			if (dims && dims[i].param && !(n.dims[i].param = ir_strdup(dims[i].param))) {
				ir_type_clear(&n);
				return IR_ENOMEM;
			}
		}
	}
	ir_type_clear(t);
	*t = n;
	return 0;
}

/* ---- attributes ---- */

const char *ir_attr_type_name(enum ir_attr_type t)
{
	static const char *names[] = {
		"undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
		"strings", "tensors", "graphs", "sparse_tensor", "sparse_tensors", "type",
		"types",
	};
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

void ir_attr_clear(struct ir_attr *a)
{
	free(a->name);
	free(a->ref_attr_name);
	free(a->doc);
	free(a->s.data);
	ir_tensor_unref(a->t);
	ir_graph_free(a->g);
	ir_sparse_free(a->sp);
	if (a->tp) {
		ir_type_clear(a->tp);
		free(a->tp);
	}
	free(a->floats);
	free(a->ints);
	ir_bytes_free_array(a->strings, a->type == IR_ATTR_STRINGS ? a->n : 0);
	if (a->tensors) {
		for (size_t i = 0; i < a->n; i++)
			ir_tensor_unref(a->tensors[i]);
		free(a->tensors);
	}
	if (a->graphs) {
		for (size_t i = 0; i < a->n; i++)
			ir_graph_free(a->graphs[i]);
		free(a->graphs);
	}
	if (a->sparses) {
		for (size_t i = 0; i < a->n; i++)
			ir_sparse_free(a->sparses[i]);
		free(a->sparses);
	}
	if (a->tps) {
		for (size_t i = 0; i < a->n; i++)
			ir_type_clear(&a->tps[i]);
		free(a->tps);
	}
	memset(a, 0, sizeof(*a));
}

int ir_attr_copy(struct ir_attr *dst, const struct ir_attr *s, struct ir_graph *scope)
{
	memset(dst, 0, sizeof(*dst));
	dst->type = s->type;
	dst->has_type = s->has_type;
	dst->f = s->f;
	dst->i = s->i;
	dst->n = s->n;
	if ((s->name && !(dst->name = ir_strdup(s->name))) ||
	    (s->ref_attr_name && !(dst->ref_attr_name = ir_strdup(s->ref_attr_name))) ||
	    (s->doc && !(dst->doc = ir_strdup(s->doc))))
		goto nomem;
	if (s->s.data && ir_bytes_set(&dst->s, s->s.data, s->s.len))
		goto nomem;
	if (s->t) {
		dst->t = s->t;
		ir_tensor_ref(dst->t);
	}
	if (s->g && !(dst->g = ir_graph_clone(s->g, scope)))
		goto nomem;
	if (s->sp && !(dst->sp = ir_sparse_clone(s->sp)))
		goto nomem;
	if (s->tp) {
		dst->tp = calloc(1, sizeof(*dst->tp));
		if (!dst->tp || ir_type_copy(dst->tp, s->tp))
			goto nomem;
	}
	if (s->floats) {
		if (!(dst->floats = ir_alloc_array(s->n, sizeof(float))))
			goto nomem;
		memcpy(dst->floats, s->floats, s->n * sizeof(float));
	}
	if (s->ints) {
		if (!(dst->ints = ir_alloc_array(s->n, sizeof(int64_t))))
			goto nomem;
		memcpy(dst->ints, s->ints, s->n * sizeof(int64_t));
	}
	if (s->strings && ir_bytes_copy_array(&dst->strings, s->strings, s->n))
		goto nomem;
	if (s->tensors) {
		if (!(dst->tensors = ir_alloc_array(s->n, sizeof(*dst->tensors))))
			goto nomem;
		for (size_t i = 0; i < s->n; i++) {
			dst->tensors[i] = s->tensors[i];
			ir_tensor_ref(dst->tensors[i]);
		}
	}
	if (s->graphs) {
		if (!(dst->graphs = ir_alloc_array(s->n, sizeof(*dst->graphs))))
			goto nomem;
		for (size_t i = 0; i < s->n; i++)
			if (!(dst->graphs[i] = ir_graph_clone(s->graphs[i], scope)))
				goto nomem;
	}
	if (s->sparses) {
		if (!(dst->sparses = ir_alloc_array(s->n, sizeof(*dst->sparses))))
			goto nomem;
		for (size_t i = 0; i < s->n; i++)
			if (!(dst->sparses[i] = ir_sparse_clone(s->sparses[i])))
				goto nomem;
	}
	if (s->tps) {
		if (!(dst->tps = ir_alloc_array(s->n, sizeof(*dst->tps))))
			goto nomem;
		for (size_t i = 0; i < s->n; i++)
			if (ir_type_copy(&dst->tps[i], &s->tps[i]))
				goto nomem;
	}
	return 0;
nomem:
	ir_attr_clear(dst);
	return IR_ENOMEM;
}

static size_t bytes_out(const struct ir_bytes *b, char *buf, size_t size)
{
	size_t o = 0;
	PUT("'");
	for (size_t i = 0; i < b->len && o + 8 < size; i++) {
		unsigned char c = (unsigned char)b->data[i];
		if (i >= 60) {
			PUT("...");
			break;
		}
		if (c == '\'' || c == '\\')
			PUT("\\%c", c);
		else if (c >= 32 && c < 127)
			PUT("%c", c);
		else
			PUT("\\x%02x", c);
	}
	PUT("'");
	return o;
}

char *ir_attr_str(const struct ir_attr *a, char *buf, size_t size)
{
	size_t o = 0;
	char tmp[256];
	if (!size)
		return buf;
	buf[0] = 0;
	if (a->ref_attr_name) {
		PUT("@%s", a->ref_attr_name);
		return buf;
	}
	switch (a->type) {
	case IR_ATTR_FLOAT: PUT("%g", (double)a->f); break;
	case IR_ATTR_INT: PUT("%" PRId64, a->i); break;
	case IR_ATTR_STRING: o += bytes_out(&a->s, buf + o, size - o); break;
	case IR_ATTR_TENSOR:
		PUT("tensor %s%s", ir_dtype_name(a->t->dtype), ir_dims_str(a->t->rank, a->t->dims, tmp, sizeof(tmp)));
		if (a->t->numel == 1 && a->t->dtype != IR_STRING)
			PUT(" = %g", ir_tensor_get_f64(a->t, 0));
		break;
	case IR_ATTR_GRAPH: PUT("graph '%s' (%d node%s)", a->g->name ? a->g->name : "", a->g->n_nodes, a->g->n_nodes == 1 ? "" : "s"); break;
	case IR_ATTR_SPARSE_TENSOR:
		PUT("sparse %s%s", ir_dtype_name(a->sp->values->dtype), ir_dims_str(a->sp->rank, a->sp->dims, tmp, sizeof(tmp)));
		break;
	case IR_ATTR_TYPE_PROTO: PUT("type %s", ir_type_str(a->tp, tmp, sizeof(tmp))); break;
	case IR_ATTR_FLOATS: case IR_ATTR_INTS: case IR_ATTR_STRINGS:
	case IR_ATTR_TENSORS: case IR_ATTR_GRAPHS: case IR_ATTR_SPARSE_TENSORS: case IR_ATTR_TYPE_PROTOS:
		PUT("[");
		for (size_t i = 0; i < a->n && o + 16 < size; i++) {
			if (i)
				PUT(",");
			if (i >= 16) {
				PUT("... %zu in all", a->n);
				break;
			}
			if (a->type == IR_ATTR_FLOATS)
				PUT("%g", (double)a->floats[i]);
			else if (a->type == IR_ATTR_INTS)
				PUT("%" PRId64, a->ints[i]);
			else if (a->type == IR_ATTR_STRINGS)
				o += bytes_out(&a->strings[i], buf + o, size - o);
			else if (a->type == IR_ATTR_TENSORS)
				PUT("%s%s", ir_dtype_name(a->tensors[i]->dtype),
				    ir_dims_str(a->tensors[i]->rank, a->tensors[i]->dims, tmp, sizeof(tmp)));
			else if (a->type == IR_ATTR_GRAPHS)
				PUT("graph(%d node%s)", a->graphs[i]->n_nodes, a->graphs[i]->n_nodes == 1 ? "" : "s");
			else if (a->type == IR_ATTR_SPARSE_TENSORS)
				PUT("sparse");
			else
				PUT("%s", ir_type_str(&a->tps[i], tmp, sizeof(tmp)));
		}
		PUT("]");
		break;
	default: PUT("?"); break;
	}
	return buf;
}

void ir_dims_clear(struct ir_dim *dims, int rank)
{
	for (int i = 0; i < rank; i++)
		ir_dim_clear(&dims[i]);
}

static bool ident_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && ((c >= '0' && c <= '9') || c == '*' || c == '+' || c == '-' || c == '/' || c == '.'));
}

int ir_parse_dims(const char *s, struct ir_dim *dims, struct ir_diag *d)
{
	const char *p = s;
	while (*p == ' ')
		p++;
	bool bracket = *p == '[';
	if (bracket)
		p++;
	int rank = 0;
	while (*p == ' ')
		p++;
	if (bracket && *p == ']') {
		p++;
		while (*p == ' ')
			p++;
		if (*p)
			return ir_diag_err(d, IR_ERR, "unexpected '%s' after ']' in '%s'", p, s), -1;
		return 0;
	}
	if (!*p)
		return ir_diag_err(d, IR_ERR, "no dimensions given (use [] for a scalar)"), -1;
	for (;;) {
		while (*p == ' ')
			p++;
		if (rank == IR_MAX_RANK) {
			ir_dims_clear(dims, rank);
			return ir_diag_err(d, IR_ERR, "more than %d dimensions in '%s'", IR_MAX_RANK, s), -1;
		}
		struct ir_dim *dm = &dims[rank];
		memset(dm, 0, sizeof(*dm));
		if (*p >= '0' && *p <= '9') {
			int64_t v = 0;
			while (*p >= '0' && *p <= '9') {
				if (v > (INT64_MAX - 9) / 10) {
					ir_dims_clear(dims, rank);
					return ir_diag_err(d, IR_ERR, "dimension %d of '%s' is too large", rank, s), -1;
				}
				v = v * 10 + (*p++ - '0');
			}
			dm->kind = IR_DIM_VALUE;
			dm->value = v;
		} else if (*p == '?') {
			p++;
			dm->kind = IR_DIM_UNKNOWN;
		} else if (ident_char(*p, true)) {
			const char *st = p;
			while (ident_char(*p, false))
				p++;
			dm->kind = IR_DIM_PARAM;
			if (!(dm->param = ir_strndup(st, (size_t)(p - st)))) {
				ir_dims_clear(dims, rank);
				return ir_diag_err(d, IR_ENOMEM, "out of memory"), -1;
			}
		} else {
			ir_dims_clear(dims, rank);
			if (*p == '-')
				return ir_diag_err(d, IR_ERR, "dimension %d of '%s' is negative", rank, s), -1;
			return ir_diag_err(d, IR_ERR, "cannot read dimension %d of '%s' (expected a number, a name or ?)", rank, s), -1;
		}
		rank++;
		while (*p == ' ')
			p++;
		if (*p == ',' || *p == 'x') {
			p++;
			continue;
		}
		if (bracket && *p == ']') {
			p++;
			bracket = false;
			while (*p == ' ')
				p++;
		}
		if (!*p && !bracket)
			return rank;
		ir_dims_clear(dims, rank);
		return ir_diag_err(d, IR_ERR, "unexpected '%s' in dimensions '%s'", *p ? p : "end", s), -1;
	}
}
