/*
 * shape_tensor.c - shape functions of ops that create, move or reshape
 * data: Shape, Size, Constant, Reshape, Gather, Concat, Squeeze... They also
 * carry the known values of small integer tensors, which is how shapes
 * computed inside a graph (Shape -> Gather -> Concat -> Reshape) resolve.
 *
 * Where a dim is a symbol, the arithmetic stays symbolic ("batch*seq",
 * "seq - 1"). Indices that are symbols (a Slice end taken from a Shape)
 * are read as lying inside the dim they index, and a symbolic dim as at
 * least as large as a constant offset from its end: the shapes exported
 * models compute, without which nothing downstream of them would resolve.
 */
#include "infer.h"

#include <inttypes.h>
#include <math.h>

#define MAXV 64   /* known values are tracked for tensors up to this many elements (infer.c) */
/* A Slice index at least this large means "to the end" (INT_MAX, INT64_MAX) */
#define SLICE_BIG ((int64_t)INT32_MAX)

/* ---- helpers ---- */


static bool int_elem(int dt)
{
	return ir_dtype_is_int(dt) && ir_dtype_bits(dt) >= 8;
}

/* Output o gets the known values of input i (an op that keeps the element order). */
static void pass_vals(struct ir_infer *x, struct ir_node *n, int o, int i)
{
	int c;
	const struct ir_dim *v = sx_vals(x, n, i, &c);
	if (v)
		sx_out_vals(x, n, o, c, v);
}


/* Dims as numbers, when every one is a value; their product in *total (false past `max`). */
static bool dims_values(const struct ir_dim *d, int r, int64_t *out, int64_t *total, int64_t max)
{
	int64_t t = 1;
	for (int k = 0; k < r; k++) {
		if (d[k].kind != IR_DIM_VALUE || d[k].value < 0)
			return false;
		out[k] = d[k].value;
		if (out[k] && t > max / out[k])
			return false;
		t *= out[k];
	}
	if (t > max)
		return false;
	*total = t;
	return true;
}




/* Elements of a constant numeric input as doubles: the count, or -1. */
static int const_doubles(struct ir_infer *x, const struct ir_node *n, int i, double *out, int max)
{
	const struct ir_tensor *t = sx_const(x, n, i);
	if (!t || t->dtype == IR_STRING || t->numel > (uint64_t)max || (t->numel && !ir_tensor_data(t)))
		return -1;
	for (uint64_t k = 0; k < t->numel; k++)
		out[k] = ir_tensor_get_f64(t, k);
	return (int)t->numel;
}

/* Known elements of an integer tensor (exact for 64-bit ones): the count, or -1. */
static int tensor_ints(const struct ir_tensor *t, int64_t *out, int max)
{
	if (!t || !int_elem(t->dtype) || t->numel > (uint64_t)max || (t->numel && !ir_tensor_data(t)))
		return -1;
	for (uint64_t k = 0; k < t->numel; k++)
		if (!ir_elem_to_i64(t->dtype, ir_tensor_data(t), k, &out[k]))
			return -1;
	return (int)t->numel;
}

/* The number of elements of input i when its dims say (a 0 dim is enough); -1 otherwise. */
static int64_t input_len(struct ir_infer *x, const struct ir_node *n, int i)
{
	const struct ir_dim *d = sx_dims(x, n, i);
	int r = sx_rank(x, n, i);
	if (!d)
		return -1;
	int64_t t = 1;
	bool open = false;
	for (int k = 0; k < r; k++) {
		if (sx_known(&d[k]) && d[k].value == 0)
			return 0;
		if (!sx_known(&d[k]) || d[k].value < 0)
			open = true;
		else if (!open && t > INT64_MAX / d[k].value)
			open = true;
		else if (!open)
			t *= d[k].value;
	}
	return open ? -1 : t;
}

/*
 * sx_vals, and also the (no) values of an empty integer tensor, which the
 * driver does not record (infer.c's known_from_tensor skips tensors
 * without data).
 */
static const struct ir_dim *vals_of(struct ir_infer *x, const struct ir_node *n, int i, int *count)
{
	static const struct ir_dim none;
	const struct ir_dim *v = sx_vals(x, n, i, count);
	if (v || !sx_has(n, i) || !int_elem(sx_elem(x, n, i)) || input_len(x, n, i) != 0)
		return v;
	*count = 0;
	return &none;
}

/* sx_ints the same way: the count, or -1 unless every element is a number. */
static int ints_of(struct ir_infer *x, const struct ir_node *n, int i, int64_t *out, int max)
{
	int c;
	const struct ir_dim *v = vals_of(x, n, i, &c);
	if (!v || c > max)
		return -1;
	for (int k = 0; k < c; k++) {
		if (!sx_known(&v[k]))
			return -1;
		out[k] = v[k].value;
	}
	return c;
}

enum { LIST_ABSENT = -1, LIST_UNKNOWN = -2 };

/*
 * An int list that is an attribute before opset `since` and an input from
 * it on (axes, split, pads...). Returns the count, LIST_ABSENT, or
 * LIST_UNKNOWN when the input is there but its values are not known. A
 * model whose opset does not match where the list is looks in the other
 * place too. *too_many: the list does not fit in `max`.
 */
static int int_list(struct ir_infer *x, struct ir_node *n, const char *attr, int in, int64_t since,
		    int64_t *out, int max, bool *too_many)
{
	*too_many = false;
	bool from_input = sx_opset(x, n) >= since;
	for (int pass = 0; pass < 2; pass++, from_input = !from_input) {
		if (from_input) {
			if (in < 0 || !sx_has(n, in))
				continue;
			int c = ints_of(x, n, in, out, max);
			if (c >= 0)
				return c;
			int64_t len = input_len(x, n, in);
			if (len > max)
				*too_many = true;
			return LIST_UNKNOWN;
		}
		if (!attr || !sx_attr(x, n, attr))
			continue;
		int c = sx_attr_ints(x, n, attr, out, max);
		if (c > max)
			*too_many = true;
		if (c >= 0)
			return c > max ? max : c;
	}
	return LIST_ABSENT;
}

/* Normalizes axes of rank r in place; false (with a failure) when one is out of range or repeats. */
static bool norm_axes(struct ir_infer *x, struct ir_node *n, int64_t *axes, int c, int r)
{
	bool seen[IR_MAX_RANK] = { false };
	for (int k = 0; k < c; k++) {
		int a = sx_axis(axes[k], r);
		if (a < 0) {
			sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axes[k], r);
			return false;
		}
		if (seen[a]) {
			sx_fail(x, n, "axis %" PRId64 " is given twice", axes[k]);
			return false;
		}
		seen[a] = true;
		axes[k] = a;
	}
	return true;
}

/* ---- Shape, Size, Constant, ConstantOfShape ---- */

static void shape(struct ir_infer *x, struct ir_node *n)
{
	int r;
	const struct ir_dim *d = sx_dims(x, n, 0);
	r = sx_rank(x, n, 0);
	if (!d) {
		/* a 1-D tensor in any case */
		sx_out_rank(x, n, 0, IR_INT64, 1, "the rank of its input is not known");
		return;
	}
	/* opset 15: start and end slice the dims */
	int64_t start = sx_attr_int(x, n, "start", 0), end = sx_attr_int(x, n, "end", r);
	if (start < 0)
		start += r;
	if (end < 0)
		end += r;
	start = start < 0 ? 0 : start > r ? r : start;
	end = end < 0 ? 0 : end > r ? r : end;
	int count = end > start ? (int)(end - start) : 0;
	struct ir_dim len = sx_v(count);
	sx_out(x, n, 0, IR_INT64, 1, &len);
	sx_out_vals(x, n, 0, count, d + start);
}

static void size(struct ir_infer *x, struct ir_node *n)
{
	sx_out(x, n, 0, IR_INT64, 0, NULL);
	const struct ir_dim *d = sx_dims(x, n, 0);
	if (!d)
		return;
	struct ir_dim p = sx_prod(x, d, 0, sx_rank(x, n, 0));
	sx_out_vals(x, n, 0, 1, &p);
}

static void constant_tensor(struct ir_infer *x, struct ir_node *n, const struct ir_tensor *t)
{
	struct ir_dim d[IR_MAX_RANK];
	if (t->rank < 0 || t->rank > IR_MAX_RANK) {
		sx_fail(x, n, "its value has rank %d", t->rank);
		return;
	}
	for (int k = 0; k < t->rank; k++)
		d[k] = sx_v(t->dims[k]);
	sx_out(x, n, 0, t->dtype, t->rank, d);
	int64_t v[MAXV];
	int c = tensor_ints(t, v, MAXV);
	if (c >= 0) {
		struct ir_dim vals[MAXV];
		for (int k = 0; k < c; k++)
			vals[k] = sx_v(v[k]);
		sx_out_vals(x, n, 0, c, vals);
	}
}

static void constant(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_attr *a = NULL;
	static const char *const names[] = { "value", "sparse_value", "value_int", "value_ints", "value_float",
					     "value_floats", "value_string", "value_strings" };
	int found = 0;
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (sx_attr(x, n, names[k])) {
			if (!a)
				a = sx_attr(x, n, names[k]);
			found++;
		}
	if (!a) {
		sx_fail(x, n, "it has no value attribute");
		return;
	}
	if (found > 1) {
		sx_fail(x, n, "it has more than one value attribute");
		return;
	}
	struct ir_dim len = sx_v((int64_t)a->n);
	switch (a->type) {
	case IR_ATTR_TENSOR:
		if (a->t)
			constant_tensor(x, n, a->t);
		else
			sx_fail(x, n, "its value tensor is missing");
		return;
	case IR_ATTR_SPARSE_TENSOR: {
		const struct ir_sparse *s = a->sp;
		if (!s || !s->values || s->rank < 0 || s->rank > IR_MAX_RANK) {
			sx_fail(x, n, "its sparse value is malformed");
			return;
		}
		struct ir_dim d[IR_MAX_RANK];
		for (int k = 0; k < s->rank; k++)
			d[k] = sx_v(s->dims[k]);
		sx_out(x, n, 0, s->values->dtype, s->rank, d);
		return;
	}
	case IR_ATTR_INT: {
		struct ir_dim v = sx_v(a->i);
		sx_out(x, n, 0, IR_INT64, 0, NULL);
		sx_out_vals(x, n, 0, 1, &v);
		return;
	}
	case IR_ATTR_INTS: {
		sx_out(x, n, 0, IR_INT64, 1, &len);
		if (a->n <= MAXV) {
			struct ir_dim v[MAXV];
			for (size_t k = 0; k < a->n; k++)
				v[k] = sx_v(a->ints[k]);
			sx_out_vals(x, n, 0, (int)a->n, v);
		}
		return;
	}
	case IR_ATTR_FLOAT:
		sx_out(x, n, 0, IR_FLOAT, 0, NULL);
		return;
	case IR_ATTR_FLOATS:
		sx_out(x, n, 0, IR_FLOAT, 1, &len);
		return;
	case IR_ATTR_STRING:
		sx_out(x, n, 0, IR_STRING, 0, NULL);
		return;
	case IR_ATTR_STRINGS:
		sx_out(x, n, 0, IR_STRING, 1, &len);
		return;
	default:
		sx_fail(x, n, "attribute '%s' has the wrong type (%s)", a->name, ir_attr_type_name(a->type));
		return;
	}
}

static void constant_of_shape(struct ir_infer *x, struct ir_node *n)
{
	int elem = IR_FLOAT;
	int64_t fill = 0;
	const struct ir_attr *a = sx_attr(x, n, "value");
	if (a) {
		if (a->type != IR_ATTR_TENSOR || !a->t) {
			sx_fail(x, n, "'value' is not a tensor");
			return;
		}
		if (a->t->numel != 1) {
			sx_fail(x, n, "'value' has %" PRIu64 " elements, not one", a->t->numel);
			return;
		}
		elem = a->t->dtype;
		int64_t v[1];
		if (tensor_ints(a->t, v, 1) == 1)
			fill = v[0];
	}
	int c;
	const struct ir_dim *v = vals_of(x, n, 0, &c);
	if (!v) {
		int64_t len = -1;
		const struct ir_dim *d = sx_dims(x, n, 0);
		if (d && sx_rank(x, n, 0) == 1 && sx_known(&d[0]))
			len = d[0].value;
		if (len > IR_MAX_RANK)
			sx_fail(x, n, "the output would have rank %" PRId64, len);
		else
			sx_out_rank(x, n, 0, elem, (int)len, "the values of its shape input are not known");
		return;
	}
	if (c > IR_MAX_RANK) {
		sx_fail(x, n, "the output would have rank %d", c);
		return;
	}
	for (int k = 0; k < c; k++)
		if (v[k].kind == IR_DIM_VALUE && v[k].value < 0) {
			sx_fail(x, n, "its shape input has a negative value (%" PRId64 ")", v[k].value);
			return;
		}
	sx_out_dims(x, n, 0, elem, c, v, "some values of its shape input are not known");
	int64_t dv[IR_MAX_RANK], total;
	if (int_elem(elem) && dims_values(v, c, dv, &total, MAXV)) {
		struct ir_dim vals[MAXV];
		for (int64_t k = 0; k < total; k++)
			vals[k] = sx_v(fill);
		sx_out_vals(x, n, 0, (int)total, vals);
	}
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze ---- */

static void reshape(struct ir_infer *x, struct ir_node *n)
{
	int64_t ver = sx_opset(x, n);
	int elem = sx_elem(x, n, 0);
	struct ir_dim want[IR_MAX_RANK];
	int rr;
	bool from_attr = ver < 5 ? (sx_attr(x, n, "shape") || !sx_has(n, 1)) : (!sx_has(n, 1) && sx_attr(x, n, "shape"));
	if (from_attr) {
		int64_t s[IR_MAX_RANK];
		int c = sx_attr_ints(x, n, "shape", s, IR_MAX_RANK);
		if (c < 0) {
			sx_fail(x, n, "it has no 'shape' attribute");
			return;
		}
		if (c > IR_MAX_RANK) {
			sx_fail(x, n, "the output would have rank %d", c);
			return;
		}
		for (int k = 0; k < c; k++)
			want[k] = sx_v(s[k]);
		rr = c;
	} else {
		int c;
		const struct ir_dim *v = vals_of(x, n, 1, &c);
		if (!v) {
			int64_t len = -1;
			const struct ir_dim *d1 = sx_dims(x, n, 1);
			if (!sx_has(n, 1)) {
				sx_fail(x, n, "its shape input is missing");
				return;
			}
			if (d1 && sx_rank(x, n, 1) == 1 && sx_known(&d1[0]))
				len = d1[0].value;
			if (len > IR_MAX_RANK)
				sx_fail(x, n, "the output would have rank %" PRId64, len);
			else
				sx_out_rank(x, n, 0, elem, (int)len, "the values of its shape input are not known");
			return;
		}
		if (c > IR_MAX_RANK) {
			sx_fail(x, n, "the output would have rank %d", c);
			return;
		}
		sx_copy_dims(want, v, c);
		rr = c;
	}
	bool allowzero = ver >= 14 && sx_attr_int(x, n, "allowzero", 0) != 0;
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	struct ir_dim out[IR_MAX_RANK];
	int neg = -1;
	bool zero = false;
	for (int k = 0; k < rr; k++) {
		const struct ir_dim *w = &want[k];
		out[k] = *w;
		if (w->kind != IR_DIM_VALUE)
			continue;
		if (w->value == -1) {
			if (neg >= 0) {
				sx_fail(x, n, "its shape has more than one -1");
				return;
			}
			neg = k;
			out[k] = sx_unknown();
		} else if (w->value < -1) {
			sx_fail(x, n, "its shape has the value %" PRId64, w->value);
			return;
		} else if (w->value == 0 && !allowzero) {
			/* 0 copies the input's dim */
			if (d && k >= r) {
				sx_fail(x, n, "its shape copies dim %d (a 0) of an input of rank %d", k, r);
				return;
			}
			out[k] = d ? d[k] : sx_unknown();
		} else if (w->value == 0) {
			zero = true;
		}
	}
	if (zero && neg >= 0) {
		sx_fail(x, n, "with allowzero, its shape cannot hold both 0 and -1");
		return;
	}
	if (d) {
		struct ir_dim total = sx_prod(x, d, 0, r);
		struct ir_dim rest = sx_v(1);
		for (int k = 0; k < rr; k++)
			if (k != neg)
				rest = sx_mul(x, &rest, &out[k]);
		if (neg >= 0 && sx_known(&rest) && rest.value == 0) {
			/* the -1 next to a 0 dim: any size fits */
		} else if (neg >= 0) {
			if (sx_known(&total) && sx_known(&rest)) {
				if (total.value % rest.value) {
					sx_fail(x, n, "%" PRId64 " elements do not reshape into a multiple of %" PRId64,
						total.value, rest.value);
					return;
				}
				out[neg] = sx_v(total.value / rest.value);
			} else {
				out[neg] = sx_div(x, &total, &rest);
			}
		} else if (sx_known(&total) && sx_known(&rest) && total.value != rest.value) {
			sx_fail(x, n, "%" PRId64 " elements cannot take a shape of %" PRId64, total.value, rest.value);
			return;
		}
	}
	sx_out_dims(x, n, 0, elem, rr, out,
		 d ? "the shape it is given leaves this dim open" : "its input's shape is not known");
	pass_vals(x, n, 0, 0);
}

static void flatten(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_rank(x, n, 0, elem, 2, sx_why(x, n, 0));
		return;
	}
	int64_t axis = sx_attr_int(x, n, "axis", 1);
	int64_t lo = sx_opset(x, n) >= 11 ? -r : 0;
	if (axis < lo || axis > r) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis, r);
		return;
	}
	if (axis < 0)
		axis += r;
	struct ir_dim out[2] = { sx_prod(x, d, 0, (int)axis), sx_prod(x, d, (int)axis, r) };
	sx_out_dims(x, n, 0, elem, 2, out, "some dims of its input are not known");
	pass_vals(x, n, 0, 0);
}

static void squeeze(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int64_t axes[IR_MAX_RANK];
	bool many;
	int c = int_list(x, n, "axes", 1, 13, axes, IR_MAX_RANK, &many);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (many) {
		sx_fail(x, n, "it has more axes than dims");
		return;
	}
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (c == LIST_UNKNOWN) {
		int64_t len = input_len(x, n, 1);
		sx_out_rank(x, n, 0, elem, len >= 0 && len <= r ? r - (int)len : -1, "the values of its axes input are not known");
		return;
	}
	bool drop[IR_MAX_RANK] = { false };
	if (c == LIST_ABSENT) {
		/* every dim of size 1 */
		for (int k = 0; k < r; k++) {
			if (!sx_known(&d[k])) {
				char b[64];
				sx_out_unknown(x, n, 0, elem, "without axes it removes every dim of size 1, and dim %d (%s) may be 1",
					       k, ir_dim_str(&d[k], b, sizeof(b)));
				return;
			}
			drop[k] = d[k].value == 1;
		}
	} else {
		if (!norm_axes(x, n, axes, c, r))
			return;
		for (int k = 0; k < c; k++) {
			const struct ir_dim *e = &d[axes[k]];
			if (sx_known(e) && e->value != 1) {
				sx_fail(x, n, "dim %d is %" PRId64 ", not 1", (int)axes[k], e->value);
				return;
			}
			drop[axes[k]] = true;
		}
	}
	struct ir_dim out[IR_MAX_RANK];
	int o = 0;
	for (int k = 0; k < r; k++)
		if (!drop[k])
			out[o++] = d[k];
	sx_out_dims(x, n, 0, elem, o, out, "some dims of its input are not known");
	pass_vals(x, n, 0, 0);
}

static void unsqueeze(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int64_t axes[IR_MAX_RANK];
	bool many;
	int c = int_list(x, n, "axes", 1, 13, axes, IR_MAX_RANK, &many);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (many) {
		sx_fail(x, n, "the output would have more than %d dims", IR_MAX_RANK);
		return;
	}
	if (c == LIST_ABSENT) {
		sx_fail(x, n, "it has no axes");
		return;
	}
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (c == LIST_UNKNOWN) {
		int64_t len = input_len(x, n, 1);
		sx_out_rank(x, n, 0, elem, len >= 0 && len <= IR_MAX_RANK - r ? r + (int)len : -1,
			 "the values of its axes input are not known");
		return;
	}
	int rr = r + c;
	if (rr > IR_MAX_RANK) {
		sx_fail(x, n, "the output would have rank %d", rr);
		return;
	}
	if (!norm_axes(x, n, axes, c, rr))
		return;
	bool ins[IR_MAX_RANK] = { false };
	for (int k = 0; k < c; k++)
		ins[axes[k]] = true;
	struct ir_dim out[IR_MAX_RANK];
	for (int k = 0, j = 0; k < rr; k++)
		out[k] = ins[k] ? sx_v(1) : d[j++];
	sx_out_dims(x, n, 0, elem, rr, out, "some dims of its input are not known");
	pass_vals(x, n, 0, 0);
}

/* ---- Concat, Split ---- */

static void concat(struct ir_infer *x, struct ir_node *n)
{
	int elem = 0, r = -1;
	for (int i = 0; i < n->n_inputs; i++) {
		if (!elem)
			elem = sx_elem(x, n, i);
		int ri = sx_rank(x, n, i);
		if (ri < 0)
			continue;
		if (r >= 0 && ri != r) {
			sx_fail(x, n, "its inputs have ranks %d and %d", r, ri);
			return;
		}
		r = ri;
	}
	const struct ir_attr *aa = sx_attr(x, n, "axis");
	int64_t axis = aa && aa->type == IR_ATTR_INT ? aa->i : 1;   /* opset 1: 1 by default */
	if (!aa && sx_opset(x, n) >= 4) {
		sx_fail(x, n, "it has no 'axis' attribute");
		return;
	}
	if (r < 0) {
		for (int i = 0; i < n->n_inputs; i++)
			if (sx_has(n, i)) {
				sx_out_from(x, n, 0, elem, i);
				return;
			}
		sx_fail(x, n, "it has no inputs");
		return;
	}
	if (r == 0) {
		sx_fail(x, n, "its inputs are scalars");
		return;
	}
	int a = sx_axis(axis, r);
	if (a < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis, r);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	for (int k = 0; k < r; k++)
		out[k] = sx_unknown();
	out[a] = sx_v(0);
	for (int i = 0; i < n->n_inputs; i++) {
		if (!sx_has(n, i))
			continue;
		const struct ir_dim *d = sx_dims(x, n, i);
		if (!d) {
			out[a] = sx_unknown();
			continue;
		}
		out[a] = sx_add(x, &out[a], &d[a]);
		for (int k = 0; k < r; k++) {
			if (k == a)
				continue;
			if (sx_known(&d[k]) && sx_known(&out[k]) && d[k].value != out[k].value) {
				sx_fail(x, n, "its inputs differ in dim %d (%" PRId64 " and %" PRId64 ")", k, out[k].value,
					d[k].value);
				return;
			}
			/* a number beats a symbol, a symbol beats nothing */
			if ((sx_known(&d[k]) && !sx_known(&out[k])) ||
			    (out[k].kind == IR_DIM_UNKNOWN && d[k].kind != IR_DIM_UNKNOWN))
				out[k] = d[k];
		}
	}
	sx_out_dims(x, n, 0, elem, r, out, "some dims of its inputs are not known");
	if (r != 1)
		return;
	struct ir_dim vals[MAXV];
	int total = 0;
	for (int i = 0; i < n->n_inputs; i++) {
		if (!sx_has(n, i))
			continue;
		int c;
		const struct ir_dim *v = vals_of(x, n, i, &c);
		if (!v || total + c > MAXV)
			return;
		sx_copy_dims(vals + total, v, c);
		total += c;
	}
	sx_out_vals(x, n, 0, total, vals);
}

static void split(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int64_t ver = sx_opset(x, n);
	int nout = n->n_outputs;
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (nout < 1) {
		sx_fail(x, n, "it has no outputs");
		return;
	}
	if (!d) {
		for (int k = 0; k < nout; k++)
			sx_out_from(x, n, k, elem, 0);
		return;
	}
	int64_t axis = sx_attr_int(x, n, "axis", 0);
	int a = sx_axis(axis, r);
	if (a < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis, r);
		return;
	}
	const struct ir_dim *D = &d[a];
	struct ir_dim sizes[MAXV];
	bool sizes_known = true;
	const char *why = NULL;
	/* the split: an input (opset 13, and opset 1 as an alternative), else the attribute */
	bool use_input = sx_has(n, 1) && (ver >= 13 || ver < 2 || !sx_attr(x, n, "split"));
	const struct ir_attr *sa = sx_attr(x, n, "split");
	if (nout > MAXV) {
		sizes_known = false;
		why = "it has too many outputs to follow";
	} else if (use_input || (sa && sa->type == IR_ATTR_INTS)) {
		int c;
		const struct ir_dim *v = NULL;
		struct ir_dim tmp[MAXV];
		if (use_input) {
			v = vals_of(x, n, 1, &c);
		} else {
			c = (int)(sa->n > MAXV ? MAXV + 1 : sa->n);
			for (int k = 0; k < c && k < MAXV; k++)
				tmp[k] = sx_v(sa->ints[k]);
			v = tmp;
		}
		if (!v) {
			sizes_known = false;
			why = "the values of its split input are not known";
		} else if (c != nout) {
			sx_fail(x, n, "its split has %d entries for %d outputs", c, nout);
			return;
		} else {
			struct ir_dim sum = sx_v(0);
			for (int k = 0; k < c; k++) {
				if (sx_known(&v[k]) && v[k].value < 0) {
					sx_fail(x, n, "its split has a negative entry (%" PRId64 ")", v[k].value);
					return;
				}
				sizes[k] = v[k];
				sum = sx_add(x, &sum, &v[k]);
			}
			if (sx_known(&sum) && sx_known(D) && sum.value != D->value) {
				sx_fail(x, n, "its split adds up to %" PRId64 ", but dim %d is %" PRId64, sum.value, a,
					D->value);
				return;
			}
		}
	} else {
		int64_t parts = nout;
		bool uneven = ver >= 18;
		if (ver >= 18 && sx_attr(x, n, "num_outputs")) {
			parts = sx_attr_int(x, n, "num_outputs", 0);
			if (parts != nout) {
				sx_fail(x, n, "num_outputs is %" PRId64 " but it has %d outputs", parts, nout);
				return;
			}
		}
		if (sx_known(D)) {
			int64_t chunk = D->value / parts + (D->value % parts != 0);
			if (D->value % parts && !uneven) {
				sx_fail(x, n, "dim %d (%" PRId64 ") does not split into %d equal parts", a, D->value, nout);
				return;
			}
			int64_t used;
			bool over = __builtin_mul_overflow(chunk, parts - 1, &used);
			for (int k = 0; k < nout - 1; k++)
				sizes[k] = sx_v(chunk);
			sizes[nout - 1] = over ? sx_unknown() : sx_v(D->value - used);
			if (over || used > D->value) {
				/* the last part would be negative: an error when it runs (maybe in a
				 * branch that never does); the other parts and the types still hold */
				sx_fail(x, n, "dim %d (%" PRId64 ") is too small for %d parts of %" PRId64, a, D->value,
					nout, chunk);
				sizes[nout - 1] = sx_unknown();
				why = "the last part would have a negative size";
			}
		} else {
			struct ir_dim part = sx_div(x, D, &(struct ir_dim){ .kind = IR_DIM_VALUE, .value = parts });
			for (int k = 0; k < nout; k++)
				sizes[k] = part;
			why = "its input's dim does not divide evenly into symbols";
		}
	}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	for (int k = 0; k < nout; k++) {
		out[a] = sizes_known ? sizes[k] : sx_unknown();
		sx_out_dims(x, n, k, elem, r, out, why ? why : "some dims of its input are not known");
	}
	/* known values of a 1-D input go to the parts */
	int c;
	const struct ir_dim *v = vals_of(x, n, 0, &c);
	if (!v || r != 1 || !sizes_known)
		return;
	int64_t off = 0;
	for (int k = 0; k < nout; k++) {
		if (!sx_known(&sizes[k]) || sizes[k].value > c - off)
			return;
		sx_out_vals(x, n, k, (int)sizes[k].value, v + off);
		off += sizes[k].value;
	}
}

/* ---- Gather family ---- */

static void gather(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0), *id = sx_dims(x, n, 1);
	int r = sx_rank(x, n, 0), q = sx_rank(x, n, 1);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	int64_t axis = sx_attr_int(x, n, "axis", 0);
	int a = sx_axis(axis, r);
	if (a < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis, r);
		return;
	}
	if (!id) {
		sx_out_from(x, n, 0, elem, 1);
		return;
	}
	int rr = r - 1 + q;
	if (rr > IR_MAX_RANK) {
		sx_fail(x, n, "the output would have rank %d", rr);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	int o = 0;
	for (int k = 0; k < a; k++)
		out[o++] = d[k];
	for (int k = 0; k < q; k++)
		out[o++] = id[k];
	for (int k = a + 1; k < r; k++)
		out[o++] = d[k];
	sx_out_dims(x, n, 0, elem, rr, out, "some dims of its inputs are not known");
	/* values: data with known values and dims, indices known */
	int cd;
	const struct ir_dim *dv = vals_of(x, n, 0, &cd);
	int64_t ds[IR_MAX_RANK], total, idx[MAXV];
	if (!dv || !dims_values(d, r, ds, &total, MAXV) || total != cd)
		return;
	int ci = ints_of(x, n, 1, idx, MAXV);
	if (ci < 0)
		return;
	int64_t outer = 1, inner = 1;
	for (int k = 0; k < a; k++)
		outer *= ds[k];
	for (int k = a + 1; k < r; k++)
		inner *= ds[k];
	for (int k = 0; k < ci; k++) {
		if (idx[k] < -ds[a] || idx[k] >= ds[a])
			return;   /* an error when it runs (maybe in a branch that never does) */
		if (idx[k] < 0)
			idx[k] += ds[a];
	}
	if (outer * ci * inner > MAXV)
		return;
	struct ir_dim vals[MAXV];
	int m = 0;
	for (int64_t o1 = 0; o1 < outer; o1++)
		for (int k = 0; k < ci; k++)
			for (int64_t i1 = 0; i1 < inner; i1++)
				vals[m++] = dv[(o1 * ds[a] + idx[k]) * inner + i1];
	sx_out_vals(x, n, 0, m, vals);
}

static void gather_elements(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int r = sx_rank(x, n, 0), q = sx_rank(x, n, 1);
	const struct ir_dim *id = sx_dims(x, n, 1);
	if (r >= 0 && q >= 0 && r != q) {
		sx_fail(x, n, "data has rank %d but indices rank %d", r, q);
		return;
	}
	if (r >= 0 && sx_axis(sx_attr_int(x, n, "axis", 0), r) < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", sx_attr_int(x, n, "axis", 0), r);
		return;
	}
	if (!id) {
		if (r >= 0)
			sx_out_rank(x, n, 0, elem, r, sx_why(x, n, 1));
		else
			sx_out_from(x, n, 0, elem, 1);
		return;
	}
	sx_out_dims(x, n, 0, elem, q, id, "some dims of its indices are not known");
}

static void gather_nd(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0), *id = sx_dims(x, n, 1);
	int r = sx_rank(x, n, 0), q = sx_rank(x, n, 1);
	int64_t b = sx_opset(x, n) >= 12 ? sx_attr_int(x, n, "batch_dims", 0) : 0;
	if (!d || !id) {
		sx_out_from(x, n, 0, elem, d ? 1 : 0);
		return;
	}
	if (r < 1 || q < 1) {
		sx_fail(x, n, "data and indices must have rank 1 or more (they have %d and %d)", r, q);
		return;
	}
	if (b < 0 || b >= (r < q ? r : q)) {
		sx_fail(x, n, "batch_dims %" PRId64 " is out of range for ranks %d and %d", b, r, q);
		return;
	}
	if (!sx_known(&id[q - 1])) {
		sx_out_unknown(x, n, 0, elem, "the last dim of its indices is not known, and the output's rank follows from it");
		return;
	}
	int64_t k = id[q - 1].value;
	if (k < 1 || k > r - b) {
		sx_fail(x, n, "the last dim of its indices (%" PRId64 ") must be between 1 and %" PRId64, k, r - b);
		return;
	}
	if (q - 1 + r - b - k > IR_MAX_RANK) {
		sx_fail(x, n, "the output would have rank %" PRId64, q - 1 + r - b - k);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	int o = 0;
	for (int j = 0; j < q - 1; j++)
		out[o++] = j < b && sx_known(&d[j]) ? d[j] : id[j];
	for (int j = (int)(b + k); j < r; j++)
		out[o++] = d[j];
	sx_out_dims(x, n, 0, elem, o, out, "some dims of its inputs are not known");
}

/* ---- Expand, Tile ---- */

/* The source element of output element `o` when dims `is` broadcast to `os` (or tile them). */
static int64_t src_index(int64_t o, const int64_t *os, int r, const int64_t *is, int ri, bool tile)
{
	int64_t src = 0, stride = 1;
	for (int k = r - 1; k >= 0; k--) {
		int64_t c = o % os[k];
		o /= os[k];
		int ki = k - (r - ri);
		if (ki < 0)
			continue;
		if (tile)
			src += (c % is[ki]) * stride;
		else if (is[ki] != 1)
			src += c * stride;
		stride *= is[ki];
	}
	return src;
}

/* Output 0's known values: input 0's, broadcast or tiled to the output dims. */
static void spread_vals(struct ir_infer *x, struct ir_node *n, const struct ir_dim *d, int r,
			const struct ir_dim *od, int rr, bool tile)
{
	int c;
	const struct ir_dim *v = vals_of(x, n, 0, &c);
	int64_t is[IR_MAX_RANK], os[IR_MAX_RANK], it, ot;
	if (!v || !dims_values(d, r, is, &it, MAXV) || it != c || !dims_values(od, rr, os, &ot, MAXV))
		return;
	if (ot && !it)
		return;
	struct ir_dim vals[MAXV];
	for (int64_t o = 0; o < ot; o++)
		vals[o] = v[src_index(o, os, rr, is, r, tile)];
	sx_out_vals(x, n, 0, (int)ot, vals);
}

static void expand(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	int c;
	const struct ir_dim *v = vals_of(x, n, 1, &c);
	struct ir_dim shp[IR_MAX_RANK];
	if (!v) {
		/* the shape's length is known: dims of the input other than 1 carry over */
		int64_t len = -1;
		const struct ir_dim *d1 = sx_dims(x, n, 1);
		if (d1 && sx_rank(x, n, 1) == 1 && sx_known(&d1[0]))
			len = d1[0].value;
		if (len < 0 || len > IR_MAX_RANK || !d) {
			sx_out_unknown(x, n, 0, elem, "the values of its shape input are not known");
			return;
		}
		for (int k = 0; k < len; k++)
			shp[k] = sx_unknown();
		c = (int)len;
		v = shp;
	} else if (c > IR_MAX_RANK) {
		sx_fail(x, n, "the output would have rank %d", c);
		return;
	}
	for (int k = 0; k < c; k++)
		if (sx_known(&v[k]) && v[k].value < 0) {
			sx_fail(x, n, "its shape has a negative value (%" PRId64 ")", v[k].value);
			return;
		}
	if (!d) {
		/* the output's rank is at least the shape's length, but may be more */
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	const char *err;
	int rr = sx_broadcast(d, r, v, c, out, &err);
	if (rr < 0) {
		sx_fail(x, n, "its input does not expand to the shape: %s", err);
		return;
	}
	sx_out_dims(x, n, 0, elem, rr, out, "some values of its shape input are not known");
	spread_vals(x, n, d, r, out, rr, false);
}

static void tile(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	if (sx_opset(x, n) < 6 && sx_has(n, 2)) {
		/* opset 1: tiles and axis, two scalars */
		int64_t t[1], ax[1];
		if (ints_of(x, n, 1, t, 1) != 1 || ints_of(x, n, 2, ax, 1) != 1) {
			sx_out_rank(x, n, 0, elem, r, "the values of its tiles or axis inputs are not known");
			return;
		}
		int a = sx_axis(ax[0], r);
		if (a < 0 || t[0] < 0) {
			sx_fail(x, n, "tiles %" PRId64 " along axis %" PRId64 " do not fit rank %d", t[0], ax[0], r);
			return;
		}
		struct ir_dim tv = sx_v(t[0]);
		out[a] = sx_mul(x, &d[a], &tv);
		sx_out_dims(x, n, 0, elem, r, out, "some dims of its input are not known");
		return;
	}
	int c;
	const struct ir_dim *v = vals_of(x, n, 1, &c);
	if (!v) {
		sx_out_rank(x, n, 0, elem, r, "the values of its repeats input are not known");
		return;
	}
	if (c != r) {
		sx_fail(x, n, "it has %d repeats for rank %d", c, r);
		return;
	}
	for (int k = 0; k < r; k++) {
		if (sx_known(&v[k]) && v[k].value < 0) {
			sx_fail(x, n, "repeat %d is negative (%" PRId64 ")", k, v[k].value);
			return;
		}
		out[k] = sx_mul(x, &d[k], &v[k]);
	}
	sx_out_dims(x, n, 0, elem, r, out, "some repeats or dims of its input are not known");
	spread_vals(x, n, d, r, out, r, true);
}

/* ---- Slice ---- */

/* A position along a dim D: D + off when rel, else off. */
struct pos { bool rel; struct ir_dim off; };

/*
 * The effective start (end: is_end) of a slice of dim D with the given
 * step, clamped as the op does. Exact on numbers; on symbols it reads an
 * index that is a symbol as lying inside D, and D as large enough for a
 * constant start, or an end that counts from D's end. ok=false when it
 * cannot say.
 */
static struct pos slice_pos(const struct ir_dim *D, const struct ir_dim *idx, int64_t step, bool is_end, bool *ok)
{
	struct pos p = { false, sx_unknown() };
	if (idx->kind == IR_DIM_UNKNOWN) {
		*ok = false;
		return p;
	}
	if (idx->kind == IR_DIM_PARAM) {
		p.off = *idx;
		return p;
	}
	int64_t v = idx->value;
	if (sx_known(D)) {
		int64_t dv = D->value;
		if (v < 0)
			v += dv;   /* no overflow: v < 0 <= dv */
		if (step > 0)
			v = v < 0 ? 0 : v > dv ? dv : v;
		else
			v = v < -1 ? -1 : v > dv - 1 ? dv - 1 : v;
		if (step < 0 && !is_end && v < 0)
			v = 0;   /* start clamps to [0, D-1]; an empty dim gives no elements anyway */
		p.off = sx_v(v);
		return p;
	}
	if (step > 0) {
		if (v >= SLICE_BIG) {
			p.rel = true;
			p.off = sx_v(0);
		} else if (v <= -SLICE_BIG) {
			p.off = sx_v(0);
		} else if (v < 0) {
			p.rel = true;
			p.off = sx_v(v);
		} else if (is_end) {
			*ok = false;   /* min(D, end): D may be shorter */
		} else {
			p.off = sx_v(v);
		}
	} else {
		if (v >= SLICE_BIG) {
			p.rel = true;
			p.off = sx_v(-1);
		} else if (v <= -SLICE_BIG) {
			p.off = sx_v(-1);
			if (!is_end)
				*ok = false;
		} else if (v < 0) {
			p.rel = true;
			p.off = sx_v(v);
		} else if (!is_end) {
			*ok = false;   /* min(D - 1, start) */
		} else {
			p.off = sx_v(v);
		}
	}
	return p;
}

static struct ir_dim pos_dim(struct ir_infer *x, const struct pos *p, const struct ir_dim *D)
{
	return p->rel ? sx_add(x, D, &p->off) : p->off;
}

static struct ir_dim slice_len(struct ir_infer *x, const struct ir_dim *D, const struct ir_dim *s,
			       const struct ir_dim *e, int64_t step)
{
	bool ok = true;
	struct pos ps = slice_pos(D, s, step, false, &ok), pe = slice_pos(D, e, step, true, &ok);
	if (!ok)
		return sx_unknown();
	if (sx_known(D) && D->value == 0)
		return sx_v(0);
	struct ir_dim diff;
	if (ps.rel == pe.rel)
		diff = step > 0 ? sx_sub(x, &pe.off, &ps.off) : sx_sub(x, &ps.off, &pe.off);
	else {
		struct ir_dim a = pos_dim(x, &ps, D), b = pos_dim(x, &pe, D);
		diff = step > 0 ? sx_sub(x, &b, &a) : sx_sub(x, &a, &b);
	}
	uint64_t st = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
	if (sx_known(&diff)) {
		if (diff.value <= 0)
			return sx_v(0);
		return sx_v((int64_t)(((uint64_t)diff.value - 1) / st + 1));
	}
	if (st == 1)
		return diff;
	return st > (uint64_t)INT64_MAX ? sx_unknown() : sx_ceildiv(x, &diff, (int64_t)st);
}

static void slice(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int64_t ver = sx_opset(x, n);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	struct ir_dim starts[MAXV], ends[MAXV];
	int64_t axes[MAXV], steps[MAXV];
	int cs = -1, ce = -1, ca, cp;
	bool from_input = ver >= 10 ? sx_has(n, 1) || !sx_attr(x, n, "starts") : !sx_attr(x, n, "starts") && sx_has(n, 1);
	if (!from_input) {
		int64_t t[MAXV];
		cs = sx_attr_ints(x, n, "starts", t, MAXV);
		for (int k = 0; k < cs && k < MAXV; k++)
			starts[k] = sx_v(t[k]);
		ce = sx_attr_ints(x, n, "ends", t, MAXV);
		for (int k = 0; k < ce && k < MAXV; k++)
			ends[k] = sx_v(t[k]);
		if (cs < 0 || ce < 0) {
			sx_fail(x, n, "it has no starts or ends");
			return;
		}
		ca = sx_attr_ints(x, n, "axes", axes, MAXV);
		cp = LIST_ABSENT;
	} else {
		const struct ir_dim *v;
		int c;
		if (!sx_has(n, 1) || !sx_has(n, 2)) {
			sx_fail(x, n, "it has no starts or ends");
			return;
		}
		if ((v = vals_of(x, n, 1, &c)) && c <= MAXV) {
			sx_copy_dims(starts, v, c);
			cs = c;
		}
		if ((v = vals_of(x, n, 2, &c)) && c <= MAXV) {
			sx_copy_dims(ends, v, c);
			ce = c;
		}
		ca = LIST_ABSENT;
		if (sx_has(n, 3)) {
			ca = ints_of(x, n, 3, axes, MAXV);
			if (ca < 0)
				ca = LIST_UNKNOWN;
		}
		cp = LIST_ABSENT;
		if (sx_has(n, 4)) {
			cp = ints_of(x, n, 4, steps, MAXV);
			if (cp < 0)
				cp = LIST_UNKNOWN;
		}
	}
	if (cs > MAXV || ce > MAXV || ca > MAXV) {
		sx_fail(x, n, "it has more slice entries than dims");
		return;
	}
	int count = cs >= 0 ? cs : ce >= 0 ? ce : ca >= 0 ? ca : cp >= 0 ? cp : -1;
	if (count < 0 && from_input && input_len(x, n, 1) >= 0 && input_len(x, n, 1) <= MAXV)
		count = (int)input_len(x, n, 1);
	if ((cs >= 0 && cs != count) || (ce >= 0 && ce != count) || (ca >= 0 && ca != count) ||
	    (cp >= 0 && cp != count)) {
		sx_fail(x, n, "its starts, ends, axes and steps differ in length");
		return;
	}
	if (ca == LIST_ABSENT && count >= 0) {
		if (count > r) {
			sx_fail(x, n, "it slices %d axes of a rank-%d input", count, r);
			return;
		}
		for (int k = 0; k < count; k++)
			axes[k] = k;
		ca = count;
	}
	if (ca >= 0 && !norm_axes(x, n, axes, ca, r))
		return;
	if (cp == LIST_ABSENT && count >= 0) {
		for (int k = 0; k < count; k++)
			steps[k] = 1;
		cp = count;
	}
	for (int k = 0; k < cp; k++)
		if (steps[k] == 0) {
			sx_fail(x, n, "a step is 0");
			return;
		}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	if (ca < 0) {
		sx_out_rank(x, n, 0, elem, r, "the values of its axes input are not known");
		return;
	}
	for (int k = 0; k < ca; k++) {
		int a = (int)axes[k];
		if (cs < 0 || ce < 0 || cp < 0)
			out[a] = sx_unknown();
		else
			out[a] = slice_len(x, &d[a], &starts[k], &ends[k], steps[k]);
	}
	sx_out_dims(x, n, 0, elem, r, out,
		 cs < 0 || ce < 0 || cp < 0 ? "the values of its starts, ends or steps are not known"
					     : "the slice of a dim that is not known");
	/* known values of a 1-D input */
	int c;
	const struct ir_dim *v = vals_of(x, n, 0, &c);
	if (!v || r != 1 || !sx_known(&d[0]) || d[0].value != c || !sx_known(&out[0]))
		return;
	if (ca == 0) {
		sx_out_vals(x, n, 0, c, v);
		return;
	}
	if (!sx_known(&starts[0]))
		return;
	bool ok = true;
	struct pos ps = slice_pos(&d[0], &starts[0], steps[0], false, &ok);
	if (!ok || ps.rel || !sx_known(&ps.off))
		return;
	struct ir_dim vals[MAXV];
	int64_t len = out[0].value;
	if (len > MAXV)
		return;
	for (int64_t k = 0; k < len; k++) {
		int64_t i;
		if (__builtin_mul_overflow(k, steps[0], &i) || __builtin_add_overflow(i, ps.off.value, &i) || i < 0 ||
		    i >= c)
			return;
		vals[k] = v[i];
	}
	sx_out_vals(x, n, 0, (int)len, vals);
}

/* ---- Transpose, DepthToSpace, SpaceToDepth ---- */

static void transpose(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	int64_t perm[IR_MAX_RANK];
	int c = sx_attr_ints(x, n, "perm", perm, IR_MAX_RANK);
	if (c > IR_MAX_RANK) {
		sx_fail(x, n, "perm has %d entries", c);
		return;
	}
	if (!d) {
		if (c >= 0)
			sx_out_rank(x, n, 0, elem, c, sx_why(x, n, 0));
		else
			sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (c < 0) {
		c = r;
		for (int k = 0; k < r; k++)
			perm[k] = r - 1 - k;
	}
	if (c != r) {
		sx_fail(x, n, "perm has %d entries for rank %d", c, r);
		return;
	}
	bool seen[IR_MAX_RANK] = { false };
	struct ir_dim out[IR_MAX_RANK];
	for (int k = 0; k < r; k++) {
		if (perm[k] < 0 || perm[k] >= r || seen[perm[k]]) {
			sx_fail(x, n, "perm is not a permutation of 0..%d", r - 1);
			return;
		}
		seen[perm[k]] = true;
		out[k] = d[perm[k]];
	}
	sx_out_dims(x, n, 0, elem, r, out, "some dims of its input are not known");
	if (r <= 1)
		pass_vals(x, n, 0, 0);
}

static void depth_space(struct ir_infer *x, struct ir_node *n, bool to_space)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	int64_t b = sx_attr_int(x, n, "blocksize", 0);
	if (b <= 0 || b > INT32_MAX) {
		sx_fail(x, n, "blocksize %" PRId64 " is not positive", b);
		return;
	}
	if (!d) {
		sx_out_rank(x, n, 0, elem, 4, sx_why(x, n, 0));
		return;
	}
	if (r != 4) {
		sx_fail(x, n, "its input has rank %d, not 4", r);
		return;
	}
	struct ir_dim bb = sx_v(b), b2 = sx_v(b * b), out[4];
	out[0] = d[0];
	if (to_space) {
		if (sx_known(&d[1]) && d[1].value % (b * b)) {
			sx_fail(x, n, "its channels (%" PRId64 ") are not a multiple of blocksize^2 (%" PRId64 ")",
				d[1].value, b * b);
			return;
		}
		out[1] = sx_div(x, &d[1], &b2);
		out[2] = sx_mul(x, &d[2], &bb);
		out[3] = sx_mul(x, &d[3], &bb);
	} else {
		for (int k = 2; k < 4; k++)
			if (sx_known(&d[k]) && d[k].value % b) {
				sx_fail(x, n, "dim %d (%" PRId64 ") is not a multiple of blocksize %" PRId64, k, d[k].value, b);
				return;
			}
		out[1] = sx_mul(x, &d[1], &b2);
		out[2] = sx_div(x, &d[2], &bb);
		out[3] = sx_div(x, &d[3], &bb);
	}
	sx_out_dims(x, n, 0, elem, 4, out, "a dim of its input is not known or does not divide by the blocksize");
}

static void depth_to_space(struct ir_infer *x, struct ir_node *n)
{
	depth_space(x, n, true);
}

static void space_to_depth(struct ir_infer *x, struct ir_node *n)
{
	depth_space(x, n, false);
}

/* ---- Pad, CenterCropPad ---- */

static void pad(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int64_t ver = sx_opset(x, n);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	struct ir_dim pads[2 * IR_MAX_RANK];
	int cp = -1;
	if (ver >= 11 || (sx_has(n, 1) && !sx_attr(x, n, "pads") && !sx_attr(x, n, "paddings"))) {
		int c;
		const struct ir_dim *v = vals_of(x, n, 1, &c);
		if (!sx_has(n, 1)) {
			sx_fail(x, n, "it has no pads");
			return;
		}
		if (v && c <= 2 * IR_MAX_RANK) {
			sx_copy_dims(pads, v, c);
			cp = c;
		}
	} else {
		int64_t t[2 * IR_MAX_RANK];
		const char *name = sx_attr(x, n, "pads") ? "pads" : "paddings";
		cp = sx_attr_ints(x, n, name, t, 2 * IR_MAX_RANK);
		if (cp < 0) {
			sx_fail(x, n, "it has no pads");
			return;
		}
		if (cp > 2 * IR_MAX_RANK) {
			sx_fail(x, n, "it has %d pads for rank %d", cp, r);
			return;
		}
		for (int k = 0; k < cp; k++)
			pads[k] = sx_v(t[k]);
	}
	int64_t axes[IR_MAX_RANK];
	int ca = r;
	for (int k = 0; k < r; k++)
		axes[k] = k;
	if (ver >= 18 && sx_has(n, 3)) {
		ca = ints_of(x, n, 3, axes, IR_MAX_RANK);
		if (ca < 0) {
			sx_out_rank(x, n, 0, elem, r, "the values of its axes input are not known");
			return;
		}
		if (!norm_axes(x, n, axes, ca, r))
			return;
	}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	if (cp < 0) {
		for (int k = 0; k < ca; k++)
			out[axes[k]] = sx_unknown();
		sx_out_dims(x, n, 0, elem, r, out, "the values of its pads input are not known");
		return;
	}
	if (cp != 2 * ca) {
		sx_fail(x, n, "it has %d pads for %d axes", cp, ca);
		return;
	}
	for (int k = 0; k < ca; k++) {
		int a = (int)axes[k];
		struct ir_dim t = sx_add(x, &d[a], &pads[k]);
		t = sx_add(x, &t, &pads[k + ca]);
		if (sx_known(&t) && t.value < 0) {
			sx_fail(x, n, "its pads make dim %d negative (%" PRId64 ")", a, t.value);
			return;
		}
		out[a] = t;
	}
	sx_out_dims(x, n, 0, elem, r, out, "some dims of its input or its pads are not known");
}

static void center_crop_pad(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	int64_t axes[IR_MAX_RANK];
	int ca = sx_attr_ints(x, n, "axes", axes, IR_MAX_RANK);
	if (ca > r) {
		sx_fail(x, n, "it has %d axes for rank %d", ca, r);
		return;
	}
	if (ca < 0) {
		ca = r;
		for (int k = 0; k < r; k++)
			axes[k] = k;
	}
	if (!norm_axes(x, n, axes, ca, r))
		return;
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	int c;
	const struct ir_dim *v = vals_of(x, n, 1, &c);
	if (!v) {
		for (int k = 0; k < ca; k++)
			out[axes[k]] = sx_unknown();
		sx_out_dims(x, n, 0, elem, r, out, "the values of its shape input are not known");
		return;
	}
	if (c != ca) {
		sx_fail(x, n, "its shape has %d entries for %d axes", c, ca);
		return;
	}
	for (int k = 0; k < ca; k++) {
		if (sx_known(&v[k]) && v[k].value < 0) {
			sx_fail(x, n, "its shape has a negative value (%" PRId64 ")", v[k].value);
			return;
		}
		out[axes[k]] = v[k];
	}
	sx_out_dims(x, n, 0, elem, r, out, "some values of its shape input are not known");
}

/* ---- Resize, Upsample ---- */

/* floor(D * scale), computed in float as the runtimes do; symbolic when the scale is n or 1/n. */
static struct ir_dim scale_dim(struct ir_infer *x, const struct ir_dim *D, double scale)
{
	float s = (float)scale;
	if (!(s > 0) || !isfinite(s))
		return sx_unknown();
	if (sx_known(D)) {
		float f = floorf((float)D->value * s);
		if (!(f >= 0) || f >= 9.2e18f)
			return sx_unknown();
		return sx_v((int64_t)f);
	}
	if (s == floorf(s) && s < 1e9f) {
		struct ir_dim m = sx_v((int64_t)s);
		return sx_mul(x, D, &m);
	}
	float inv = 1.0f / s;
	if (inv == floorf(inv) && inv < 1e9f && 1.0f / inv == s)
		return sx_floordiv(x, D, (int64_t)inv);
	return sx_unknown();
}

static void resize_common(struct ir_infer *x, struct ir_node *n, int scales_in, int sizes_in, bool use_axes)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	int64_t axes[IR_MAX_RANK];
	int ca = -1;
	if (use_axes) {
		ca = sx_attr_ints(x, n, "axes", axes, IR_MAX_RANK);
		if (ca > IR_MAX_RANK) {
			sx_fail(x, n, "it has %d axes", ca);
			return;
		}
	}
	/* sizes, when given and not empty */
	bool have_sizes = sizes_in >= 0 && sx_has(n, sizes_in) && input_len(x, n, sizes_in) != 0;
	bool have_scales = scales_in >= 0 && sx_has(n, scales_in) && input_len(x, n, scales_in) != 0;
	if (have_sizes && have_scales && input_len(x, n, scales_in) > 0 && input_len(x, n, sizes_in) > 0) {
		sx_fail(x, n, "it has both scales and sizes");
		return;
	}
	int cs = -1;
	const struct ir_dim *sizes = NULL;
	double scales[IR_MAX_RANK];
	if (have_sizes) {
		sizes = vals_of(x, n, sizes_in, &cs);
		if (sizes && cs > IR_MAX_RANK) {
			sx_fail(x, n, "it has %d sizes", cs);
			return;
		}
	} else if (have_scales) {
		cs = const_doubles(x, n, scales_in, scales, IR_MAX_RANK);
	} else {
		sx_fail(x, n, "it has neither scales nor sizes");
		return;
	}
	if (!d) {
		/* all sizes of all axes: that is the output's shape */
		if (sizes && ca < 0) {
			sx_out_dims(x, n, 0, elem, cs, sizes, "some values of its sizes input are not known");
			return;
		}
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (ca < 0) {
		ca = r;
		for (int k = 0; k < r; k++)
			axes[k] = k;
	} else if (!norm_axes(x, n, axes, ca, r)) {
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	if (cs < 0 || (have_sizes && !sizes)) {
		for (int k = 0; k < ca; k++)
			out[axes[k]] = sx_unknown();
		sx_out_dims(x, n, 0, elem, r, out,
			 have_sizes ? "the values of its sizes input are not known" : "its scales are not a constant");
		return;
	}
	if (cs != ca) {
		sx_fail(x, n, "it has %d %s for %d axes", cs, have_sizes ? "sizes" : "scales", ca);
		return;
	}
	if (have_sizes) {
		const char *policy = sx_attr_str(x, n, "keep_aspect_ratio_policy", "stretch");
		for (int k = 0; k < cs; k++)
			if (sx_known(&sizes[k]) && sizes[k].value < 0) {
				sx_fail(x, n, "it has a negative size (%" PRId64 ")", sizes[k].value);
				return;
			}
		if (!use_axes || strcmp(policy, "stretch") == 0) {
			for (int k = 0; k < cs; k++)
				out[axes[k]] = sizes[k];
		} else if (strcmp(policy, "not_larger") == 0 || strcmp(policy, "not_smaller") == 0) {
			bool larger = strcmp(policy, "not_smaller") == 0, all = true;
			float scale = 0;
			for (int k = 0; k < cs; k++) {
				const struct ir_dim *D = &d[axes[k]];
				if (!sx_known(D) || !sx_known(&sizes[k]) || D->value == 0) {
					all = false;
					break;
				}
				float s = (float)sizes[k].value / (float)D->value;
				if (k == 0 || (larger ? s > scale : s < scale))
					scale = s;
			}
			for (int k = 0; k < cs; k++) {
				float f = all ? floorf(scale * (float)d[axes[k]].value + 0.5f) : -1;
				out[axes[k]] = all && f >= 0 && f < 9.2e18f ? sx_v((int64_t)f) : sx_unknown();
			}
		} else {
			sx_fail(x, n, "keep_aspect_ratio_policy '%s' is not one ONNX defines", policy);
			return;
		}
		sx_out_dims(x, n, 0, elem, r, out, "some values of its sizes input or dims of its input are not known");
		return;
	}
	for (int k = 0; k < cs; k++) {
		if (!(scales[k] > 0)) {
			sx_fail(x, n, "scale %g is not positive", scales[k]);
			return;
		}
		out[axes[k]] = scale_dim(x, &d[axes[k]], scales[k]);
	}
	sx_out_dims(x, n, 0, elem, r, out, "the scaled size of a dim that is not known");
}

static void resize(struct ir_infer *x, struct ir_node *n)
{
	int64_t ver = sx_opset(x, n);
	if (ver < 11)
		resize_common(x, n, 1, -1, false);
	else
		resize_common(x, n, 2, 3, ver >= 18);
}

static void upsample(struct ir_infer *x, struct ir_node *n)
{
	int64_t ver = sx_opset(x, n);
	if (ver >= 9 || sx_has(n, 1)) {
		resize_common(x, n, 1, -1, false);
		return;
	}
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	double scales[IR_MAX_RANK];
	int c;
	const struct ir_attr *a = sx_attr(x, n, "scales");
	if (a && a->type == IR_ATTR_FLOATS) {
		c = (int)(a->n > IR_MAX_RANK ? IR_MAX_RANK + 1 : a->n);
		for (int k = 0; k < c && k < IR_MAX_RANK; k++)
			scales[k] = a->floats[k];
	} else {
		/* opset 1: height_scale and width_scale of a 4-D input */
		c = 4;
		scales[0] = scales[1] = 1;
		scales[2] = sx_attr_float(x, n, "height_scale", 0);
		scales[3] = sx_attr_float(x, n, "width_scale", 0);
	}
	if (!d) {
		sx_out_rank(x, n, 0, elem, c <= IR_MAX_RANK ? c : -1, sx_why(x, n, 0));
		return;
	}
	if (c != r) {
		sx_fail(x, n, "it has %d scales for rank %d", c, r);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	for (int k = 0; k < r; k++) {
		if (!(scales[k] > 0)) {
			sx_fail(x, n, "scale %g is not positive", scales[k]);
			return;
		}
		out[k] = scale_dim(x, &d[k], scales[k]);
	}
	sx_out_dims(x, n, 0, elem, r, out, "the scaled size of a dim that is not known");
}

/* ---- data-dependent sizes: Compress, NonZero, Unique, TopK ---- */

static void compress(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	const struct ir_attr *aa = sx_attr(x, n, "axis");
	const char *why = "the number of elements it keeps depends on the values of its condition";
	/* the condition's trues, when it is a constant */
	const struct ir_tensor *t = sx_const(x, n, 1);
	int64_t trues = -1, clen = -1;
	if (t && t->dtype != IR_STRING && (t->numel == 0 || ir_tensor_data(t)) && t->numel <= (1u << 24)) {
		trues = 0;
		clen = (int64_t)t->numel;
	}
	struct ir_dim cnt = sx_unknown();
	const struct ir_dim *span = NULL;
	struct ir_dim all;
	if (!aa) {
		if (d) {
			all = sx_prod(x, d, 0, r);
			span = &all;
		}
	} else if (d) {
		int a = sx_axis(aa->i, r);
		if (a < 0) {
			sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", aa->i, r);
			return;
		}
		span = &d[a];
	}
	if (trues >= 0 && span && sx_known(span)) {
		int64_t m = clen < span->value ? clen : span->value;
		for (int64_t k = 0; k < m; k++)
			trues += ir_tensor_get_f64(t, (uint64_t)k) != 0;
		cnt = sx_v(trues);
	}
	if (!aa) {
		sx_out_dims(x, n, 0, elem, 1, &cnt, why);
		return;
	}
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	out[sx_axis(aa->i, r)] = cnt;
	sx_out_dims(x, n, 0, elem, r, out, why);
}

static void non_zero(struct ir_infer *x, struct ir_node *n)
{
	int r = sx_rank(x, n, 0);
	struct ir_dim out[2] = { r >= 0 ? sx_v(r) : sx_unknown(), sx_unknown() };
	const struct ir_tensor *t = sx_const(x, n, 0);
	if (t && t->dtype != IR_STRING && (t->numel == 0 || ir_tensor_data(t)) && t->numel <= (1u << 24)) {
		int64_t c = 0;
		for (uint64_t k = 0; k < t->numel; k++)
			c += ir_tensor_get_f64(t, k) != 0;
		out[1] = sx_v(c);
	}
	sx_out_dims(x, n, 0, IR_INT64, 2, out,
		 r < 0 ? "the rank of its input is not known" : "the number of nonzero elements depends on the input values");
}

static void unique(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	const struct ir_attr *aa = sx_attr(x, n, "axis");
	const char *why = "the number of unique values depends on the input values";
	struct ir_dim u = sx_unknown(), inv = sx_unknown();
	if (aa && d) {
		int a = sx_axis(aa->i, r);
		if (a < 0) {
			sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", aa->i, r);
			return;
		}
		struct ir_dim out[IR_MAX_RANK];
		sx_copy_dims(out, d, r);
		out[a] = sx_unknown();
		inv = d[a];
		sx_out_dims(x, n, 0, elem, r, out, why);
	} else if (aa) {
		sx_out_from(x, n, 0, elem, 0);
	} else {
		if (d)
			inv = sx_prod(x, d, 0, r);
		sx_out_dims(x, n, 0, elem, 1, &u, why);
	}
	sx_out_dims(x, n, 1, IR_INT64, 1, &u, why);
	sx_out_dims(x, n, 2, IR_INT64, 1, &inv, d ? "some dims of its input are not known" : sx_why(x, n, 0));
	sx_out_dims(x, n, 3, IR_INT64, 1, &u, why);
}

static void topk(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		sx_out_from(x, n, 1, IR_INT64, 0);
		return;
	}
	int64_t axis = sx_attr_int(x, n, "axis", -1);
	int a = sx_axis(axis, r);
	if (a < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis, r);
		return;
	}
	struct ir_dim k = sx_unknown();
	if (sx_opset(x, n) < 10 || (!sx_has(n, 1) && sx_attr(x, n, "k"))) {
		const struct ir_attr *ka = sx_attr(x, n, "k");
		if (!ka || ka->type != IR_ATTR_INT) {
			sx_fail(x, n, "it has no 'k' attribute");
			return;
		}
		k = sx_v(ka->i);
	} else {
		int c;
		const struct ir_dim *v = vals_of(x, n, 1, &c);
		if (v && c != 1) {
			sx_fail(x, n, "K has %d elements, not one", c);
			return;
		}
		if (v)
			k = v[0];
	}
	if (sx_known(&k) && (k.value < 0 || (sx_known(&d[a]) && k.value > d[a].value))) {
		char b[64];
		sx_fail(x, n, "k (%" PRId64 ") is out of range for a dim of %s", k.value, ir_dim_str(&d[a], b, sizeof(b)));
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	out[a] = k;
	const char *why = "the value of K is not known";
	sx_out_dims(x, n, 0, elem, r, out, why);
	sx_out_dims(x, n, 1, IR_INT64, r, out, why);
}

/* ---- OneHot, Range ---- */

static void one_hot(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 2);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (r + 1 > IR_MAX_RANK) {
		sx_fail(x, n, "the output would have rank %d", r + 1);
		return;
	}
	int64_t axis = sx_attr_int(x, n, "axis", -1);
	int a = sx_axis(axis, r + 1);
	if (a < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis, r + 1);
		return;
	}
	struct ir_dim depth = sx_unknown();
	int c;
	const struct ir_dim *v = vals_of(x, n, 1, &c);
	double f[1];
	if (v && c == 1) {
		depth = v[0];
	} else if (const_doubles(x, n, 1, f, 1) == 1) {
		if (!(f[0] > -1e18 && f[0] < 1e18)) {
			sx_fail(x, n, "depth %g is out of range", f[0]);
			return;
		}
		depth = sx_v((int64_t)f[0]);
	}
	if (sx_known(&depth) && depth.value < 1) {
		sx_fail(x, n, "depth %" PRId64 " is less than 1", depth.value);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	for (int k = 0, j = 0; k <= r; k++)
		out[k] = k == a ? depth : d[j++];
	sx_out_dims(x, n, 0, elem, r + 1, out, "the value of depth is not known");
}

/* ceil(diff / delta) for diff, delta != 0, without overflow; 0 when negative */
static int64_t range_count(int64_t start, int64_t limit, int64_t delta, bool *ok)
{
	*ok = true;
	if ((delta > 0 && limit <= start) || (delta < 0 && limit >= start))
		return 0;
	uint64_t diff = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
	uint64_t st = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
	uint64_t c = (diff - 1) / st + 1;
	if (c > (uint64_t)INT64_MAX) {
		*ok = false;
		return 0;
	}
	return (int64_t)c;
}

static void range(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	for (int i = 0; i < 3; i++) {
		int ri = sx_rank(x, n, i);
		if (ri > 1 || (ri == 1 && input_len(x, n, i) > 1)) {
			sx_fail(x, n, "its start, limit and delta must be scalars");
			return;
		}
	}
	const char *why = "its start, limit or delta are not known";
	struct ir_dim len = sx_unknown();
	int c0, c1, c2;
	const struct ir_dim *s = vals_of(x, n, 0, &c0), *l = vals_of(x, n, 1, &c1), *dl = vals_of(x, n, 2, &c2);
	if (s && l && dl && c0 == 1 && c1 == 1 && c2 == 1) {
		if (sx_known(dl) && dl->value == 0) {
			sx_fail(x, n, "delta is 0");
			return;
		}
		if (sx_known(s) && sx_known(l) && sx_known(dl)) {
			bool ok;
			int64_t cnt = range_count(s->value, l->value, dl->value, &ok);
			if (ok)
				len = sx_v(cnt);
		} else if (sx_known(dl)) {
			/* symbolic: limit - start steps of delta, read as not negative */
			int64_t st = dl->value;
			struct ir_dim diff = st > 0 ? sx_sub(x, l, s) : sx_sub(x, s, l);
			uint64_t ust = st > 0 ? (uint64_t)st : (uint64_t)0 - (uint64_t)st;
			if (sx_known(&diff))
				len = sx_v(diff.value <= 0 ? 0 : (int64_t)(((uint64_t)diff.value - 1) / ust + 1));
			else if (ust == 1)
				len = diff;
			else if (ust <= (uint64_t)INT64_MAX)
				len = sx_ceildiv(x, &diff, (int64_t)ust);
		}
		sx_out_dims(x, n, 0, elem, 1, &len, why);
		/* the values, when there are few */
		if (sx_known(&len) && len.value <= MAXV && sx_known(dl) && s->kind != IR_DIM_UNKNOWN) {
			struct ir_dim vals[MAXV];
			for (int64_t k = 0; k < len.value; k++) {
				struct ir_dim step;
				if (__builtin_mul_overflow(k, dl->value, &step.value))
					return;
				step.kind = IR_DIM_VALUE;
				step.param = NULL;
				vals[k] = sx_add(x, s, &step);
			}
			sx_out_vals(x, n, 0, (int)len.value, vals);
		}
		return;
	}
	/* floating point: the constants' values */
	double f[3];
	bool all = true;
	for (int i = 0; i < 3 && all; i++)
		all = const_doubles(x, n, i, &f[i], 1) == 1;
	if (all && !ir_dtype_is_int(elem)) {
		if (f[2] == 0) {
			sx_fail(x, n, "delta is 0");
			return;
		}
		double cnt;
		if (elem == IR_DOUBLE)
			cnt = ceil((f[1] - f[0]) / f[2]);
		else   /* float16, bfloat16 and float compute in float, as onnxruntime does */
			cnt = ceil((double)((float)f[1] - (float)f[0]) / (double)(float)f[2]);
		if (cnt != cnt || cnt > 9.2e18) {
			sx_fail(x, n, "its output would have %g elements", cnt);
			return;
		}
		len = sx_v(cnt > 0 ? (int64_t)cnt : 0);
	}
	sx_out_dims(x, n, 0, elem, 1, &len, why);
}

/* ---- random, simple ---- */

static void random_op(struct ir_infer *x, struct ir_node *n)
{
	int elem = (int)sx_attr_int(x, n, "dtype", IR_FLOAT);
	if (!ir_dtype_valid(elem)) {
		sx_fail(x, n, "'dtype' is not an element type (%d)", elem);
		return;
	}
	int64_t s[IR_MAX_RANK];
	int c = sx_attr_ints(x, n, "shape", s, IR_MAX_RANK);
	if (c < 0) {
		sx_fail(x, n, "it has no 'shape' attribute");
		return;
	}
	if (c > IR_MAX_RANK) {
		sx_fail(x, n, "the output would have rank %d", c);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	for (int k = 0; k < c; k++) {
		if (s[k] < 0) {
			sx_fail(x, n, "its shape has a negative value (%" PRId64 ")", s[k]);
			return;
		}
		out[k] = sx_v(s[k]);
	}
	sx_out(x, n, 0, elem, c, out);
}

static void multinomial(struct ir_infer *x, struct ir_node *n)
{
	int elem = (int)sx_attr_int(x, n, "dtype", IR_INT32);
	if (elem != IR_INT32 && elem != IR_INT64) {
		sx_fail(x, n, "'dtype' must be int32 or int64 (it is %d)", elem);
		return;
	}
	int64_t samples = sx_attr_int(x, n, "sample_size", 1);
	if (samples < 0) {
		sx_fail(x, n, "sample_size %" PRId64 " is negative", samples);
		return;
	}
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (d && r != 2) {
		sx_fail(x, n, "its input has rank %d, not 2", r);
		return;
	}
	struct ir_dim out[2] = { d ? d[0] : sx_unknown(), sx_v(samples) };
	sx_out_dims(x, n, 0, elem, 2, out, d ? "the batch dim of its input is not known" : sx_why(x, n, 0));
}

static void bit_cast(struct ir_infer *x, struct ir_node *n)
{
	int to = (int)sx_attr_int(x, n, "to", 0);
	int from = sx_elem(x, n, 0);
	if (!ir_dtype_valid(to) || to == IR_STRING) {
		sx_fail(x, n, "'to' is not an element type it can take (%d)", to);
		return;
	}
	if (from && (from == IR_STRING || ir_dtype_bits(from) != ir_dtype_bits(to))) {
		sx_fail(x, n, "%s and %s differ in width", ir_dtype_name(from), ir_dtype_name(to));
		return;
	}
	const struct ir_dim *d = sx_dims(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, to, 0);
		return;
	}
	sx_out(x, n, 0, to, sx_rank(x, n, 0), d);
}

/* Output 0 is input 0 (CumProd, TensorScatter). */
static void same_as_first(struct ir_infer *x, struct ir_node *n)
{
	sx_out_like(x, n, 0, 0);
}

static void col2im(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (d && r != 3) {
		sx_fail(x, n, "its input has rank %d, not 3", r);
		return;
	}
	int ci, cb;
	const struct ir_dim *img = vals_of(x, n, 1, &ci), *blk = vals_of(x, n, 2, &cb);
	int64_t m = img ? ci : input_len(x, n, 1) >= 0 && sx_rank(x, n, 1) == 1 ? input_len(x, n, 1) : -1;
	if (m < 0 && blk)
		m = cb;
	if (m < 0) {
		sx_out_unknown(x, n, 0, elem, "the length of its image_shape input is not known");
		return;
	}
	if (m < 1 || m + 2 > IR_MAX_RANK || (blk && cb != m)) {
		sx_fail(x, n, "image_shape and block_shape do not match (%" PRId64 " and %d entries)", m, blk ? cb : -1);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	out[0] = d ? d[0] : sx_unknown();
	out[1] = sx_unknown();
	if (d && blk) {
		struct ir_dim b = sx_prod(x, blk, 0, cb);
		if (sx_known(&b) && b.value <= 0) {
			sx_fail(x, n, "block_shape has no elements");
			return;
		}
		if (sx_known(&b) && sx_known(&d[1]) && d[1].value % b.value) {
			sx_fail(x, n, "dim 1 (%" PRId64 ") is not a multiple of the block size (%" PRId64 ")", d[1].value,
				b.value);
			return;
		}
		out[1] = sx_div(x, &d[1], &b);
	}
	for (int k = 0; k < m; k++)
		out[2 + k] = img ? img[k] : sx_unknown();
	sx_out_dims(x, n, 0, elem, (int)m + 2, out, "its image_shape, block_shape or input's dims are not all known");
}

const struct sx_entry sx_tensor_ops[] = {
	{ IR_OP_Shape, shape },
	{ IR_OP_Size, size },
	{ IR_OP_Constant, constant },
	{ IR_OP_ConstantOfShape, constant_of_shape },
	{ IR_OP_Reshape, reshape },
	{ IR_OP_Flatten, flatten },
	{ IR_OP_Squeeze, squeeze },
	{ IR_OP_Unsqueeze, unsqueeze },
	{ IR_OP_Concat, concat },
	{ IR_OP_Split, split },
	{ IR_OP_Gather, gather },
	{ IR_OP_GatherElements, gather_elements },
	{ IR_OP_GatherND, gather_nd },
	{ IR_OP_Expand, expand },
	{ IR_OP_Tile, tile },
	{ IR_OP_Slice, slice },
	{ IR_OP_Transpose, transpose },
	{ IR_OP_DepthToSpace, depth_to_space },
	{ IR_OP_SpaceToDepth, space_to_depth },
	{ IR_OP_Pad, pad },
	{ IR_OP_CenterCropPad, center_crop_pad },
	{ IR_OP_Resize, resize },
	{ IR_OP_Upsample, upsample },
	{ IR_OP_Compress, compress },
	{ IR_OP_NonZero, non_zero },
	{ IR_OP_Unique, unique },
	{ IR_OP_TopK, topk },
	{ IR_OP_OneHot, one_hot },
	{ IR_OP_Range, range },
	{ IR_OP_RandomNormal, random_op },
	{ IR_OP_RandomUniform, random_op },
	{ IR_OP_Multinomial, multinomial },
	{ IR_OP_BitCast, bit_cast },
	{ IR_OP_CumProd, same_as_first },
	{ IR_OP_TensorScatter, same_as_first },
	{ IR_OP_Col2Im, col2im },
	{ -1, NULL },
};
