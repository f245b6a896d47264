/*
 * inputs.c - what a run reads: shape bindings, random inputs, and ONNX
 * test-data folders (test_data_set_N/input_N.pb, output_N.pb).
 */
#include "exec/exec.h"
#include "exec/exec_private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int exec_shape_parse(const char *s, struct exec_shape *out, struct ir_diag *d)
{
	memset(out, 0, sizeof(*out));
	const char *eq = strchr(s, '=');
	if (!eq || eq == s || !eq[1])
		return ir_diag_err(d, IR_ERR, "'%s' is not NAME=DIMS (e.g. input=1x3x224x224 or batch=4)", s);
	if (!(out->name = strndup(s, (size_t)(eq - s))))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	struct ir_dim dims[IR_MAX_RANK];
	int rank = ir_parse_dims(eq + 1, dims, d);
	if (rank < 0) {
		ir_diag_prefix(d, "'%s'", s);
		exec_shape_clear(out);
		return IR_ERR;
	}
	bool bad = false;
	for (int i = 0; i < rank; i++)
		if (dims[i].kind != IR_DIM_VALUE)
			bad = true;
		else
			out->dims[i] = dims[i].value;
	ir_dims_clear(dims, rank);
	if (bad) {
		exec_shape_clear(out);
		return ir_diag_err(d, IR_ERR, "'%s': every dim must be a number", s);
	}
	out->rank = rank;
	/* "batch=4" binds a symbol (or a 1-D input of 4 elements: both are tried) */
	return 0;
}

void exec_shape_clear(struct exec_shape *s)
{
	free(s->name);
	memset(s, 0, sizeof(*s));
}

/* --- random inputs --- */

static uint64_t xs_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static double xs_unit(uint64_t *s)
{
	return (double)(xs_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Integer inputs that index a table get values inside it: `rows` > 0 gives
 * [0, rows), else signed integers take [-10, 10] and unsigned [0, 10]. */
static int fill_random(struct ir_tensor *t, uint64_t *s, int64_t rows)
{
	void *p = ir_tensor_mutable(t);
	int dt = t->dtype;
	for (uint64_t i = 0; i < t->numel; i++) {
		if (dt == IR_STRING) {
			char buf[32];
			snprintf(buf, sizeof(buf), "s%u", (unsigned)(xs_next(s) % 100));
			free(t->strings[i].data);
			t->strings[i].len = strlen(buf);
			if (!(t->strings[i].data = strdup(buf))) {
				t->strings[i].len = 0;
				return IR_ENOMEM;
			}
			continue;
		}
		double v;
		if (dt == IR_BOOL)
			v = (double)(xs_next(s) & 1);
		else if (ir_dtype_is_float(dt) || dt == IR_COMPLEX64 || dt == IR_COMPLEX128)
			v = 2 * xs_unit(s) - 1;
		else if (rows > 0)
			v = (double)(xs_next(s) % (uint64_t)rows);
		else if (ir_dtype_is_signed(dt))
			v = (double)(int)(xs_next(s) % 21) - 10;
		else
			v = (double)(xs_next(s) % 11);
		if (dt == IR_FLOAT)
			((float *)p)[i] = (float)v;
		else
			kern_store_f64(dt, p, i, v);
	}
	return 0;
}

/* The rows of the smallest table that `v` indexes: the size of the gathered
 * axis of every Gather that reads `v` (or a Cast or Identity of it, which keep
 * its shape and values) as its indices, when that dim is known; 0 if none. */
static int64_t gather_rows(const struct ir_value *v, int depth)
{
	int64_t rows = 0;
	if (depth > 8)
		return 0;
	for (size_t u = 0; u < v->n_uses; u++) {
		const struct ir_node *n = v->uses[u].node;
		int64_t r = 0;
		if ((n->op == IR_OP_Cast || n->op == IR_OP_Identity) && v->uses[u].slot == 0 && n->n_outputs >= 1 &&
		    n->outputs[0]) {
			int to = n->op == IR_OP_Cast ? (int)ir_node_attr_int(n, "to", 0) : ir_value_type(v)->elem;
			if (ir_dtype_is_int(to))
				r = gather_rows(n->outputs[0], depth + 1);
		} else if (n->op == IR_OP_Gather && v->uses[u].slot == 1 && n->n_inputs >= 2 && n->inputs[0]) {
			const struct ir_value *tab = n->inputs[0];
			const struct ir_type *ty = ir_value_type(tab);
			int rank = tab->init ? tab->init->rank : ty->rank;
			int64_t axis = ir_node_attr_int(n, "axis", 0);
			if (axis < 0)
				axis += rank;
			if (rank > 0 && axis >= 0 && axis < rank) {
				if (tab->init)
					r = tab->init->dims[axis];
				else if (ty->kind == IR_TYPE_TENSOR && ty->dims[axis].kind == IR_DIM_VALUE)
					r = ty->dims[axis].value;
			}
		}
		if (r > 0 && (!rows || r < rows))
			rows = r;
	}
	return rows;
}

static const struct exec_shape *find_shape(const struct exec_shape *sh, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(sh[i].name, name))
			return &sh[i];
	return NULL;
}

/* The value of symbol `sym` from the shapes given or the inputs already bound. */
static bool symbol_value(const struct ir_model *m, const char *sym, const struct exec_shape *sh, int n_sh,
			 const struct exec_values *have, const struct exec_values *out, int64_t *val)
{
	const struct exec_shape *s = find_shape(sh, n_sh, sym);
	if (s && s->rank == 0) {
		/* "batch=4" parses as the 1-D dims [4] */
	}
	if (s && (s->rank == 1 || s->rank == -1)) {
		*val = s->dims[0];
		return true;
	}
	const struct ir_graph *g = m->graph;
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_value *v = g->inputs[i];
		const struct ir_type *ty = &v->type;
		if (ty->kind != IR_TYPE_TENSOR || ty->rank < 0)
			continue;
		const struct kern_value *kv = exec_values_find(have, v->name);
		if (!kv)
			kv = exec_values_find(out, v->name);
		const struct exec_shape *vs = find_shape(sh, n_sh, v->name);
		for (int j = 0; j < ty->rank; j++) {
			if (ty->dims[j].kind != IR_DIM_PARAM || strcmp(ty->dims[j].param, sym))
				continue;
			if (kv && kv->kind == KV_TENSOR && kv->t->rank == ty->rank) {
				*val = kv->t->dims[j];
				return true;
			}
			if (vs && vs->rank == ty->rank) {
				*val = vs->dims[j];
				return true;
			}
		}
	}
	return false;
}

int exec_random_inputs(const struct ir_model *m, uint64_t seed, const struct exec_shape *shapes, int n_shapes,
		       const struct exec_values *have, struct exec_values *out, struct ir_diag *d)
{
	const struct ir_graph *g = m->graph;
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
	if (!s)
		s = 1;
	char buf[256];
	for (int i = 0; i < n_shapes; i++) {
		const struct ir_value *v = ir_value_find(g, shapes[i].name);
		bool is_sym = false;
		for (int k = 0; !v && k < g->n_inputs; k++) {
			const struct ir_type *ty = &g->inputs[k]->type;
			for (int j = 0; ty->kind == IR_TYPE_TENSOR && j < ty->rank; j++)
				if (ty->dims[j].kind == IR_DIM_PARAM && !strcmp(ty->dims[j].param, shapes[i].name))
					is_sym = true;
		}
		if ((!v || !v->is_input) && !is_sym)
			return ir_diag_err(d, IR_ERR, "--shape '%s': no input or symbolic dim has that name", shapes[i].name);
	}
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_value *v = g->inputs[i];
		if (v->init || v->sparse_init || exec_values_find(have, v->name))
			continue;
		const struct ir_type *ty = &v->type;
		if (ty->kind == IR_TYPE_OPTIONAL)
			continue;   /* left empty */
		if (ty->kind != IR_TYPE_TENSOR)
			return ir_diag_err(d, IR_ERR, "input '%s' is %s: random values are made for tensors only",
					   v->name, ir_type_str(ty, buf, sizeof(buf)));
		if (!ty->elem)
			return ir_diag_err(d, IR_ERR, "input '%s' has no element type", v->name);
		const struct exec_shape *own = find_shape(shapes, n_shapes, v->name);
		int64_t dims[IR_MAX_RANK];
		int rank;
		if (own && (ty->rank < 0 || own->rank == ty->rank)) {
			rank = own->rank;
			memcpy(dims, own->dims, sizeof(int64_t) * (size_t)rank);
			for (int j = 0; j < rank && ty->rank >= 0; j++)
				if (ty->dims[j].kind == IR_DIM_VALUE && ty->dims[j].value != dims[j])
					return ir_diag_err(d, IR_ERR, "--shape %s: dim %d is %" PRId64 " but the model fixes it to %" PRId64,
							   v->name, j, dims[j], ty->dims[j].value);
		} else if (own) {
			return ir_diag_err(d, IR_ERR, "--shape %s has rank %d, the input is %s", v->name, own->rank,
					   ir_type_str(ty, buf, sizeof(buf)));
		} else {
			if (ty->rank < 0)
				return ir_diag_err(d, IR_ERR, "input '%s' has no declared shape: give --shape %s=DIMS", v->name, v->name);
			rank = ty->rank;
			for (int j = 0; j < rank; j++) {
				const struct ir_dim *dm = &ty->dims[j];
				if (dm->kind == IR_DIM_VALUE) {
					dims[j] = dm->value;
				} else if (dm->kind == IR_DIM_PARAM &&
					   symbol_value(m, dm->param, shapes, n_shapes, have, out, &dims[j])) {
				} else {
					/* nothing says: take 1, and say so */
					dims[j] = 1;
					if (dm->kind == IR_DIM_PARAM)
						ir_diag_warn(d, "input '%s' dim %d ('%s') is taken as 1 (--shape %s=N to choose)",
							     v->name, j, dm->param, dm->param);
					else
						ir_diag_warn(d, "input '%s' dim %d (unknown) is taken as 1 (--shape %s=DIMS to choose)",
							     v->name, j, v->name);
				}
			}
		}
		struct ir_tensor *t = ir_tensor_new(ty->elem, rank, dims, d);
		if (!t)
			return IR_ERR;
		int rc = fill_random(t, &s, ir_dtype_is_int(ty->elem) ? gather_rows(v, 0) : 0);
		if (!rc)
			rc = exec_values_add_tensor(out, v->name, t);
		ir_tensor_unref(t);
		if (rc)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	return 0;
}

/* --- ONNX test-data folders --- */

#define MAX_PB_FILE ((size_t)1 << 32)

int exec_read_whole(const char *path, size_t max, unsigned char **data, size_t *size, struct ir_diag *d)
{
	char eb[128];
	*data = NULL;
	*size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ir_diag_err(d, IR_EIO, "cannot open '%s': %s", path, ir_errstr(errno, eb, sizeof(eb)));
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return ir_diag_err(d, IR_ERR, "'%s' is not a regular file", path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		if (max > ((size_t)1 << 30) && !(max & (((size_t)1 << 30) - 1)))
			return ir_diag_err(d, IR_ERR, "'%s' is larger than %zu GiB", path, max >> 30);
		return ir_diag_err(d, IR_ERR, "'%s' is larger than %zu MiB", path, max >> 20);
	}
	size_t n = (size_t)st.st_size, got = 0;
	unsigned char *p = malloc(n ? n : 1);
	if (!p) {
		close(fd);
		return ir_diag_err(d, IR_ENOMEM, "out of memory reading '%s'", path);
	}
	while (got < n) {
		ssize_t r = read(fd, p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(p);
			close(fd);
			return ir_diag_err(d, IR_EIO, "cannot read '%s': %s", path,
					   r < 0 ? ir_errstr(errno, eb, sizeof(eb)) : "the file shrank");
		}
		got += (size_t)r;
	}
	close(fd);
	*data = p;
	*size = n;
	return 0;
}

int exec_read_pb_value(const char *path, const struct ir_type *ty, struct kern_value *out, struct ir_diag *d)
{
	unsigned char *data = NULL;
	size_t size = 0;
	int rc = exec_read_whole(path, MAX_PB_FILE, &data, &size, d);
	if (rc)
		return rc;
	enum ir_type_kind want = ty ? ty->kind : IR_TYPE_TENSOR;
	if (want == IR_TYPE_NONE)
		want = IR_TYPE_TENSOR;
	struct ir_pb_value pv;
	rc = ir_pb_value_load(data, size, want, path, &pv, d);
	free(data);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->optional = pv.optional;
	if (pv.kind == IR_PB_TENSOR) {
		out->kind = KV_TENSOR;
		out->t = pv.t;
		pv.t = NULL;
	} else if (pv.kind == IR_PB_SEQUENCE) {
		out->kind = KV_SEQ;
		out->items = pv.items;
		out->n_items = pv.n_items;
		out->elem = pv.elem;
		if (!out->elem && ty && ty->kind == IR_TYPE_SEQUENCE && ty->inner)
			out->elem = ty->inner->elem;
		pv.items = NULL;
		pv.n_items = 0;
	}
	ir_pb_value_clear(&pv);
	return 0;
}

int exec_read_test_dir(const struct ir_model *m, const char *dir, struct exec_values *inputs,
		       struct exec_values *expected, struct ir_diag *d)
{
	const struct ir_graph *g = m->graph;
	char path[4096];
	int k = 0;
	/* input_N.pb pairs with the N-th input that has no initializer; files
	 * past those feed inputs with initializers, in order */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < g->n_inputs; i++) {
			const struct ir_value *v = g->inputs[i];
			if ((pass == 0) != !(v->init || v->sparse_init))
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s/input_%d.pb", dir, k) >= sizeof(path))
				return ir_diag_err(d, IR_ERR, "path too long: '%s'", dir);
			if (access(path, F_OK)) {
				if (pass == 0)
					return ir_diag_err(d, IR_ERR, "'%s' is missing (input '%s')", path, v->name);
				break;
			}
			struct kern_value kv;
			int rc = exec_read_pb_value(path, &v->type, &kv, d);
			if (rc)
				return rc;
			if ((rc = exec_values_add(inputs, v->name, &kv))) {
				kern_value_clear(&kv);
				return ir_diag_err(d, IR_ENOMEM, "out of memory");
			}
			k++;
		}
	}
	if (!expected)
		return 0;
	for (int i = 0; i < g->n_outputs; i++) {
		const struct ir_value *v = g->outputs[i];
		if ((size_t)snprintf(path, sizeof(path), "%s/output_%d.pb", dir, i) >= sizeof(path))
			return ir_diag_err(d, IR_ERR, "path too long: '%s'", dir);
		struct kern_value kv;
		int rc = exec_read_pb_value(path, &v->type, &kv, d);
		if (rc)
			return rc;
		if ((rc = exec_values_add(expected, v->name, &kv))) {
			kern_value_clear(&kv);
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
	}
	return 0;
}
