/*
 * k_tensor.c - CPU kernels: shape and data-movement ops (Identity,
 * Constant, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split,
 * Slice, Expand, Tile, Pad, Shape, Size, ConstantOfShape, Range, Trilu,
 * EyeLike, DepthToSpace, SpaceToDepth, CenterCropPad, Dropout,
 * ReverseSequence).
 *
 * Data movement works for every element type: whole bytes (1, 2, 4, 8, 16),
 * packed 4- and 2-bit types, and strings, through `struct mover`.
 */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

#include "move.h"


/* A one-element source holding zero (or ""), to fill with. */
struct fill {
	unsigned char bytes[16];
	struct ir_bytes str;
};

static void fill_mover(struct mover *m, struct fill *f, int dtype, struct ir_tensor *o)
{
	mv_init(m, dtype, o, NULL);
	m->src = f->bytes;
	m->ss = &f->str;
}

static void fill_zero(struct fill *f)
{
	memset(f, 0, sizeof(*f));
	f->str.data = (char *)"";
}

/*
 * Writes every element of the output (dims od, rank up to 2*IR_MAX_RANK)
 * from the source at offset base + sum(idx[j] * ss[j]) (strides in
 * elements, negative and zero allowed).
 */
struct strided_job {
	const struct mover *m;
	int rank;
	const int64_t *od, *ss;
	int64_t base, inner;
};

/* output rows [r0, r1) (of od[rank-1] elements) of copy_strided, whole bytes */
static void strided_rows(void *ctx, int64_t r0, int64_t r1, int worker)
{
	const struct strided_job *j = ctx;
	struct mover m = *j->m;
	const int64_t *od = j->od, *ss = j->ss;
	int64_t inner = j->inner, is = j->rank ? ss[j->rank - 1] : 0;
	(void)worker;
	for (int64_t r = r0; r < r1; r++) {
		int64_t off = j->base, rest = r;
		for (int d = j->rank - 2; d >= 0; d--) {
			off += (rest % od[d]) * ss[d];
			rest /= od[d];
		}
		uint64_t di = (uint64_t)(r * inner);
		if (is == 1) {
			mv_block(&m, di, (uint64_t)off, (uint64_t)inner);
		} else if (m.esz == 4) {
			uint32_t *dp = (uint32_t *)(void *)m.dst + di;
			const uint32_t *sp = (const uint32_t *)(const void *)m.src + off;
			for (int64_t e = 0; e < inner; e++)
				dp[e] = sp[e * is];
		} else {
			for (int64_t e = 0; e < inner; e++)
				mv(&m, di + (uint64_t)e, (uint64_t)(off + e * is));
		}
	}
}

static int copy_strided(struct cpu_kctx *k, struct mover *m, int rank, const int64_t *od, int64_t base,
			const int64_t *ss)
{
	int64_t idx[2 * IR_MAX_RANK];
	uint64_t n = 1;
	for (int j = 0; j < rank; j++)
		n *= (uint64_t)od[j];
	if (!n)
		return 0;
	if (m->kind == MV_BYTES && rank > 0) {
		/* whole bytes: rows on the pool */
		struct strided_job j = { m, rank, od, ss, base, od[rank - 1] };
		return kpar(k, (int64_t)(n / (uint64_t)od[rank - 1]), kgrain(od[rank - 1]), strided_rows, &j);
	}
	for (int j = 0; j < rank; j++)
		idx[j] = 0;
	int64_t inner = rank ? od[rank - 1] : 1, is = rank ? ss[rank - 1] : 0;
	int64_t off = base;
	uint64_t di = 0, since = 0;
	for (;;) {
		if (is == 1) {
			mv_block(m, di, (uint64_t)off, (uint64_t)inner);
		} else if (m->kind == MV_BYTES && m->esz == 4) {
			/* the common float32 case, e.g. Transpose */
			uint32_t *d = (uint32_t *)(void *)m->dst + di;
			const uint32_t *s = (const uint32_t *)(const void *)m->src + off;
			for (int64_t j = 0; j < inner; j++)
				d[j] = s[j * is];
		} else {
			for (int64_t j = 0; j < inner; j++)
				mv(m, di + (uint64_t)j, (uint64_t)(off + j * is));
		}
		di += (uint64_t)inner;
		if (di >= n)
			break;
		for (int d = rank - 2; d >= 0; d--) {
			off += ss[d];
			if (++idx[d] < od[d])
				break;
			off -= ss[d] * od[d];
			idx[d] = 0;
		}
		since += (uint64_t)inner;
		if (since >= (1u << 20)) {
			since = 0;
			int rc = kstop(k);
			if (rc)
				return rc;
		}
	}
	return mv_done(k, m);
}

static bool mul_ok(int64_t a, int64_t b, int64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

/* Reads an integer input of at most IR_MAX_RANK values; -1 on error. */
static int read_small_ints(struct cpu_kctx *k, const struct ir_tensor *t, int64_t *vals, const char *what)
{
	if (t->rank > 1)
		return kerr(k, "%s must be 1-D, not %s", what, kshape(t)), -1;
	return kread_ints(k, t, vals, IR_MAX_RANK, what);
}

/* Normalizes a list of axes for rank r (no duplicates); 0 or an error. */
static int norm_axes(struct cpu_kctx *k, int64_t *axes, int n, int r)
{
	for (int i = 0; i < n; i++) {
		if (axes[i] < -r || axes[i] >= r)
			return kerr(k, "axis %lld is out of range for rank %d", (long long)axes[i], r);
		if (axes[i] < 0)
			axes[i] += r;
		for (int j = 0; j < i; j++)
			if (axes[j] == axes[i])
				return kerr(k, "axis %lld is repeated", (long long)axes[i]);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Views: Identity, Reshape, Flatten, Squeeze, Unsqueeze                     */
/* ------------------------------------------------------------------------ */

static int k_identity(struct cpu_kctx *k)
{
	if (!khas(k, 0)) {
		/* an empty optional passes through as empty */
		kern_value_clear(&k->out[0]);
		return 0;
	}
	kern_value_clear(&k->out[0]);
	bool opt = k->out[0].optional;
	if (kern_value_copy(&k->out[0], &k->in[0]))
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	k->out[0].optional = opt || k->in[0].optional;
	return 0;
}

static int k_reshape(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t shape[IR_MAX_RANK];
	int n;
	if (k->opset < 5) {
		const int64_t *a = kattr_ints(k, "shape", &n);
		if (!a)
			return kerr(k, "attribute 'shape' is missing");
		if (n > IR_MAX_RANK)
			return kerr(k, "shape has %d dims, at most %d are allowed", n, IR_MAX_RANK);
		memcpy(shape, a, sizeof(int64_t) * (size_t)n);
	} else {
		const struct ir_tensor *s = kin_req(k, 1);
		if (!s)
			return IR_ERR;
		if ((n = read_small_ints(k, s, shape, "shape")) < 0)
			return IR_ERR;
	}
	bool allowzero = kattr_i(k, "allowzero", 0) != 0;
	int infer = -1;
	uint64_t known = 1;
	for (int i = 0; i < n; i++) {
		if (shape[i] == 0 && !allowzero) {
			if (i >= x->rank)
				return kerr(k, "shape[%d] is 0 (copy the input dim) but the input %s has rank %d", i,
					    kshape(x), x->rank);
			shape[i] = x->dims[i];
		}
		if (shape[i] == -1) {
			if (infer >= 0)
				return kerr(k, "shape has more than one -1");
			infer = i;
			continue;
		}
		if (shape[i] < 0)
			return kerr(k, "shape[%d] is %lld, dims must be >= 0 or -1", i, (long long)shape[i]);
		if (__builtin_mul_overflow(known, (uint64_t)shape[i], &known) || known > (uint64_t)INT64_MAX)
			return kerr(k, "the element count of the shape overflows");
	}
	if (infer >= 0) {
		if (known == 0 || x->numel % known)
			return kerr(k, "cannot reshape %s (%llu elements) with a -1 in the shape", kshape(x),
				    (unsigned long long)x->numel);
		shape[infer] = (int64_t)(x->numel / known);
	} else if (known != x->numel) {
		return kerr(k, "cannot reshape %s (%llu elements) to %llu elements", kshape(x),
			    (unsigned long long)x->numel, (unsigned long long)known);
	}
	return kout_share(k, 0, x, n, shape);
}

static int k_flatten(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t axis = kattr_i(k, "axis", 1);
	if (axis < -x->rank || axis > x->rank)
		return kerr(k, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	if (axis < 0)
		axis += x->rank;
	uint64_t u[2] = { 1, 1 };
	for (int i = 0; i < x->rank; i++)
		u[i >= axis] *= (uint64_t)x->dims[i];
	if (x->numel == 0 && (u[0] > INT64_MAX || u[1] > INT64_MAX))
		return kerr(k, "cannot flatten %s: a dim of the output overflows", kshape(x));
	int64_t d[2] = { (int64_t)u[0], (int64_t)u[1] };
	return kout_share(k, 0, x, 2, d);
}

/* The axes of Squeeze/Unsqueeze: attribute before opset 13, input after. -1 if none given. */
static int view_axes(struct cpu_kctx *k, int64_t *axes)
{
	int n;
	if (k->opset < 13) {
		const int64_t *a = kattr_ints(k, "axes", &n);
		if (!a)
			return -1;
		if (n > IR_MAX_RANK)
			return kerr(k, "axes has %d values, at most %d are allowed", n, IR_MAX_RANK), -2;
		memcpy(axes, a, sizeof(int64_t) * (size_t)n);
		return n;
	}
	const struct ir_tensor *t = kin(k, 1);
	if (!t)
		return -1;
	n = read_small_ints(k, t, axes, "axes");
	return n < 0 ? -2 : n;
}

static int k_squeeze(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t axes[IR_MAX_RANK], d[IR_MAX_RANK];
	bool drop[IR_MAX_RANK] = { false };
	int n = view_axes(k, axes);
	if (n == -2)
		return IR_ERR;
	if (n < 0) {
		for (int i = 0; i < x->rank; i++)
			drop[i] = x->dims[i] == 1;
	} else {
		if (norm_axes(k, axes, n, x->rank))
			return IR_ERR;
		for (int i = 0; i < n; i++) {
			if (x->dims[axes[i]] != 1)
				return kerr(k, "cannot squeeze axis %lld of %s: its size is not 1", (long long)axes[i],
					    kshape(x));
			drop[axes[i]] = true;
		}
	}
	int r = 0;
	for (int i = 0; i < x->rank; i++)
		if (!drop[i])
			d[r++] = x->dims[i];
	return kout_share(k, 0, x, r, d);
}

static int k_unsqueeze(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t axes[IR_MAX_RANK], d[IR_MAX_RANK];
	bool ins[IR_MAX_RANK] = { false };
	int n = view_axes(k, axes);
	if (n == -2)
		return IR_ERR;
	if (n < 0)
		return kerr(k, "axes are missing");
	int r = x->rank + n;
	if (r > IR_MAX_RANK)
		return kerr(k, "the output rank %d is above %d", r, IR_MAX_RANK);
	if (norm_axes(k, axes, n, r))
		return IR_ERR;
	for (int i = 0; i < n; i++)
		ins[axes[i]] = true;
	for (int i = 0, j = 0; i < r; i++)
		d[i] = ins[i] ? 1 : x->dims[j++];
	return kout_share(k, 0, x, r, d);
}

/* ------------------------------------------------------------------------ */
/* Constants: Constant, ConstantOfShape, Shape, Size, Range, EyeLike         */
/* ------------------------------------------------------------------------ */

/* A sparse constant made dense. */
static int sparse_const(struct cpu_kctx *k, const struct ir_sparse *sp)
{
	const struct ir_tensor *v = sp->values, *ix = sp->indices;
	if (!v || !ix || sp->rank < 0 || sp->rank > IR_MAX_RANK)
		return kerr(k, "sparse_value is malformed");
	if (v->dtype == IR_STRING)
		return kerr(k, "sparse string constants are not supported");
	struct ir_tensor *o = kout(k, 0, v->dtype, sp->rank, sp->dims);
	if (!o)
		return IR_ERR;
	if (o->nbytes)
		memset(kwdata(o), 0, o->nbytes);
	uint64_t nnz = v->numel;
	bool linear = ix->rank == 1;
	if (!ir_dtype_is_int(ix->dtype) || !(linear ? ix->dims[0] == (int64_t)nnz :
	     ix->rank == 2 && ix->dims[0] == (int64_t)nnz && ix->dims[1] == sp->rank))
		return kerr(k, "sparse_value indices %s do not match %llu values of rank %d", kshape(ix),
			    (unsigned long long)nnz, sp->rank);
	struct mover m;
	mv_init(&m, v->dtype, o, v);
	for (uint64_t i = 0; i < nnz; i++) {
		int64_t lin = 0;
		if (linear) {
			lin = kldi(ix->dtype, kdata(ix), i);
			if (lin < 0 || (uint64_t)lin >= o->numel)
				return kerr(k, "sparse index %lld is out of range for %s", (long long)lin, kshape(o));
		} else {
			for (int j = 0; j < sp->rank; j++) {
				int64_t c = kldi(ix->dtype, kdata(ix), i * (uint64_t)sp->rank + (uint64_t)j);
				if (c < 0 || c >= sp->dims[j])
					return kerr(k, "sparse index %lld is out of range for dim %lld", (long long)c,
						    (long long)sp->dims[j]);
				lin = lin * sp->dims[j] + c;
			}
		}
		mv(&m, (uint64_t)lin, i);
	}
	return mv_done(k, &m);
}

static int k_constant(struct cpu_kctx *k)
{
	const struct ir_attr *a;
	struct ir_tensor *o;
	if ((a = kattr(k, "value")) && a->type == IR_ATTR_TENSOR && a->t)
		return kout_share(k, 0, a->t, a->t->rank, a->t->dims);
	if ((a = kattr(k, "sparse_value")) && a->type == IR_ATTR_SPARSE_TENSOR && a->sp)
		return sparse_const(k, a->sp);
	if ((a = kattr(k, "value_float")) && a->type == IR_ATTR_FLOAT) {
		if (!(o = kout(k, 0, IR_FLOAT, 0, NULL)))
			return IR_ERR;
		((float *)kwdata(o))[0] = a->f;
		return 0;
	}
	if ((a = kattr(k, "value_int")) && a->type == IR_ATTR_INT) {
		if (!(o = kout(k, 0, IR_INT64, 0, NULL)))
			return IR_ERR;
		((int64_t *)kwdata(o))[0] = a->i;
		return 0;
	}
	if ((a = kattr(k, "value_floats")) && a->type == IR_ATTR_FLOATS) {
		int64_t d = (int64_t)a->n;
		if (!(o = kout(k, 0, IR_FLOAT, 1, &d)))
			return IR_ERR;
		if (a->n)
			memcpy(kwdata(o), a->floats, a->n * sizeof(float));
		return 0;
	}
	if ((a = kattr(k, "value_ints")) && a->type == IR_ATTR_INTS) {
		int64_t d = (int64_t)a->n;
		if (!(o = kout(k, 0, IR_INT64, 1, &d)))
			return IR_ERR;
		if (a->n)
			memcpy(kwdata(o), a->ints, a->n * sizeof(int64_t));
		return 0;
	}
	bool one = false;
	if (((a = kattr(k, "value_string")) && a->type == IR_ATTR_STRING && (one = true)) ||
	    ((a = kattr(k, "value_strings")) && a->type == IR_ATTR_STRINGS)) {
		int64_t d = one ? 1 : (int64_t)a->n;
		if (!(o = kout(k, 0, IR_STRING, one ? 0 : 1, &d)))
			return IR_ERR;
		for (int64_t i = 0; i < d; i++) {
			struct ir_bytes empty = { 0, (char *)"" };
			const struct ir_bytes *from = one ? &a->s : &a->strings[i];
			if (!from->data)
				from = &empty;
			if (!str_set(&o->strings[i], from))
				return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		}
		return 0;
	}
	return kerr(k, "has no value attribute");
}

static int k_constant_of_shape(struct cpu_kctx *k)
{
	const struct ir_tensor *s = kin_req(k, 0);
	if (!s)
		return IR_ERR;
	int64_t d[IR_MAX_RANK];
	int r = read_small_ints(k, s, d, "shape");
	if (r < 0)
		return IR_ERR;
	for (int i = 0; i < r; i++)
		if (d[i] < 0)
			return kerr(k, "shape[%d] is %lld, dims must be >= 0", i, (long long)d[i]);
	const struct ir_attr *a = kattr(k, "value");
	const struct ir_tensor *v = a && a->type == IR_ATTR_TENSOR ? a->t : NULL;
	if (v && v->numel != 1)
		return kerr(k, "value must have one element, it has %llu", (unsigned long long)v->numel);
	struct ir_tensor *o = kout(k, 0, v ? v->dtype : IR_FLOAT, r, d);
	if (!o)
		return IR_ERR;
	if (!v) {
		if (o->nbytes)
			memset(kwdata(o), 0, o->nbytes);
		return 0;
	}
	struct mover m;
	mv_init(&m, v->dtype, o, v);
	if (m.kind == MV_BYTES && o->numel) {
		/* doubling copies */
		mv(&m, 0, 0);
		uint64_t have = 1;
		while (have < o->numel) {
			uint64_t n = have < o->numel - have ? have : o->numel - have;
			memcpy(m.dst + have * m.esz, m.dst, n * m.esz);
			have += n;
		}
		return 0;
	}
	for (uint64_t i = 0; i < o->numel; i++)
		mv(&m, i, 0);
	return mv_done(k, &m);
}

static int k_shape(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t r = x->rank;
	int64_t start = kattr_i(k, "start", 0), end = kattr_i(k, "end", r);
	if (start < 0)
		start += r;
	if (end < 0)
		end += r;
	start = start < 0 ? 0 : start > r ? r : start;
	end = end < 0 ? 0 : end > r ? r : end;
	int64_t n = end > start ? end - start : 0;
	struct ir_tensor *o = kout(k, 0, IR_INT64, 1, &n);
	if (!o)
		return IR_ERR;
	for (int64_t i = 0; i < n; i++)
		((int64_t *)kwdata(o))[i] = x->dims[start + i];
	return 0;
}

static int k_size(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	struct ir_tensor *o = kout(k, 0, IR_INT64, 0, NULL);
	if (!o)
		return IR_ERR;
	((int64_t *)kwdata(o))[0] = (int64_t)x->numel;
	return 0;
}

static int k_range(struct cpu_kctx *k)
{
	const struct ir_tensor *ts[3];
	for (int i = 0; i < 3; i++) {
		if (!(ts[i] = kin_req(k, i)))
			return IR_ERR;
		if (ts[i]->numel != 1)
			return kerr(k, "input %d must be a scalar, not %s", i, kshape(ts[i]));
		if (ts[i]->dtype != ts[0]->dtype)
			return kerr(k, "inputs must have one type, not %s and %s", ir_dtype_name(ts[0]->dtype),
				    ir_dtype_name(ts[i]->dtype));
	}
	int dt = ts[0]->dtype;
	int64_t n;
	struct ir_tensor *o;
	if (ir_dtype_is_int(dt)) {
		int64_t s = kldi(dt, kdata(ts[0]), 0), l = kldi(dt, kdata(ts[1]), 0), dl = kldi(dt, kdata(ts[2]), 0);
		if (dl == 0)
			return kerr(k, "delta is 0");
		__int128 span = (__int128)l - s;
		__int128 q = span / dl;
		if (q * dl != span && ((span > 0) == (dl > 0)))
			q++;
		if (q < 0)
			q = 0;
		if (q > INT64_MAX)
			return kerr(k, "the output is too large");
		n = (int64_t)q;
		if (!(o = kout(k, 0, dt, 1, &n)))
			return IR_ERR;
		for (int64_t i = 0; i < n; i++)
			ksti(dt, kwdata(o), (uint64_t)i, (int64_t)((__int128)s + (__int128)i * dl));
		return 0;
	}
	if (!ir_dtype_is_float(dt))
		return kerr(k, "type %s is not supported", ir_dtype_name(dt));
	double s = kld(dt, kdata(ts[0]), 0), l = kld(dt, kdata(ts[1]), 0), dl = kld(dt, kdata(ts[2]), 0);
	if (dl == 0 || isnan(dl) || isnan(s) || isnan(l) || isinf(s) || isinf(l))
		return kerr(k, "start, limit and delta must be finite and delta not 0");
	double c = ceil((l - s) / dl);
	if (c > 9e15)
		return kerr(k, "the output is too large");
	n = c > 0 ? (int64_t)c : 0;
	if (!(o = kout(k, 0, dt, 1, &n)))
		return IR_ERR;
	if (dt == IR_DOUBLE) {
		/* numpy's arange: the first two values, then start + i * (second - first) */
		double d = (s + dl) - s;
		for (int64_t i = 0; i < n; i++)
			((double *)kwdata(o))[i] = i == 0 ? s : i == 1 ? s + dl : s + (double)i * d;
	} else {
		float fs = (float)s, d = (float)(fs + (float)dl) - fs;
		for (int64_t i = 0; i < n; i++) {
			float v = i == 0 ? fs : i == 1 ? (float)(fs + (float)dl) : fs + (float)i * d;
			kst(dt, kwdata(o), (uint64_t)i, v);
		}
	}
	return 0;
}

static int k_eyelike(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (x->rank != 2)
		return kerr(k, "input must be 2-D, not %s", kshape(x));
	int dt = (int)kattr_i(k, "dtype", x->dtype);
	if (!ir_dtype_valid(dt) || dt == IR_STRING)
		return kerr(k, "dtype %d is not supported", dt);
	int64_t kk = kattr_i(k, "k", 0);
	struct ir_tensor *o = kout(k, 0, dt, 2, x->dims);
	if (!o)
		return IR_ERR;
	if (o->nbytes)
		memset(kwdata(o), 0, o->nbytes);
	if (kk >= x->dims[1] || kk <= -x->dims[0])
		return 0;   /* the diagonal is outside the matrix */
	for (int64_t i = 0; i < x->dims[0]; i++) {
		int64_t j = i + kk;
		if (j >= 0 && j < x->dims[1])
			kst(dt, kwdata(o), (uint64_t)(i * x->dims[1] + j), 1.0);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Strided copies: Transpose, Slice, Expand, Tile, DepthToSpace...           */
/* ------------------------------------------------------------------------ */

/*
 * A tile of a transpose: rows [0, ni) of the output dim q (source stride
 * 1, output stride dq) by columns [0, nj) of the last output dim (output
 * stride 1, source stride sj). Reads and writes stay within a few cache
 * lines per row of the tile.
 */
#define TILE_COPY(T)                                                                   \
	do {                                                                           \
		const T *s_ = (const T *)src;                                          \
		T *d_ = (T *)dst;                                                      \
		for (int64_t i = 0; i < ni; i++)                                       \
			for (int64_t j = 0; j < nj; j++)                               \
				d_[i * dq + j] = s_[i + j * sj];                       \
	} while (0)

static void tile_copy(size_t esz, const unsigned char *src, unsigned char *dst, int64_t ni, int64_t nj, int64_t dq,
		      int64_t sj)
{
	switch (esz) {
	case 1: TILE_COPY(uint8_t); break;
	case 2: TILE_COPY(uint16_t); break;
	case 4: TILE_COPY(uint32_t); break;
	case 8: TILE_COPY(uint64_t); break;
	default:
		for (int64_t i = 0; i < ni; i++)
			for (int64_t j = 0; j < nj; j++)
				memcpy(dst + (size_t)(i * dq + j) * esz, src + (size_t)(i + j * sj) * esz, esz);
	}
}

/*
 * Transpose of byte-sized elements by cache tiles: the output dims are
 * reduced (size-1 dims dropped, dims that stay contiguous merged); when the
 * last output dim does not read the source in order, the output dim that
 * does (source stride 1) and the last dim are copied in square tiles, so
 * that neither side walks memory with a large stride across more than a
 * tile. Returns 1 when the plain strided copy is as good (the last dim is
 * contiguous in the source), else 0 or an error.
 */
#define TR_TILE 32

struct tiled_job {
	const struct mover *m;
	int n, q;
	const int64_t *d, *s, *os;   /* the reduced dims, their source and output strides */
	int64_t outer, strips;
};

/* work items [w0, w1) of transpose_tiled */
static void tiled_items(void *ctx, int64_t w0, int64_t w1, int worker)
{
	const struct tiled_job *j = ctx;
	const int64_t *d = j->d, *s = j->s, *os = j->os;
	int n = j->n, q = j->q;
	size_t esz = j->m->esz;
	(void)worker;
	for (int64_t w = w0; w < w1; w++) {
		int64_t rest = w / j->strips, i0 = (w % j->strips) * TR_TILE;
		int64_t soff = 0, doff = 0;
		for (int i = n - 2; i >= 0; i--) {
			if (i == q)
				continue;
			soff += (rest % d[i]) * s[i];
			doff += (rest % d[i]) * os[i];
			rest /= d[i];
		}
		int64_t ni = d[q] - i0 < TR_TILE ? d[q] - i0 : TR_TILE;
		for (int64_t j0 = 0; j0 < d[n - 1]; j0 += TR_TILE) {
			int64_t nj = d[n - 1] - j0 < TR_TILE ? d[n - 1] - j0 : TR_TILE;
			tile_copy(esz, j->m->src + (size_t)(soff + i0 + j0 * s[n - 1]) * esz,
				  j->m->dst + (size_t)(doff + i0 * os[q] + j0) * esz, ni, nj, os[q], s[n - 1]);
		}
	}
}

static int transpose_tiled(struct cpu_kctx *k, struct mover *m, int r, const int64_t *od, const int64_t *ss)
{
	int64_t d[IR_MAX_RANK], s[IR_MAX_RANK];
	int n = 0;
	for (int j = 0; j < r; j++) {
		if (od[j] == 1)
			continue;
		if (n && s[n - 1] == ss[j] * od[j]) {
			d[n - 1] *= od[j];
			s[n - 1] = ss[j];
			continue;
		}
		d[n] = od[j];
		s[n++] = ss[j];
	}
	if (n < 2 || s[n - 1] == 1)
		return 1;
	int q = -1;
	for (int j = 0; j < n - 1; j++)
		if (s[j] == 1)
			q = j;
	if (q < 0)
		return 1;
	/* output strides of the reduced dims */
	int64_t os[IR_MAX_RANK];
	os[n - 1] = 1;
	for (int j = n - 2; j >= 0; j--)
		os[j] = os[j + 1] * d[j + 1];
	/* work items: a position of the other dims (not q, not the last) and
	 * a strip of TR_TILE indexes of dim q */
	struct tiled_job j = { m, n, q, d, s, os, 1, (d[q] + TR_TILE - 1) / TR_TILE };
	for (int i = 0; i < n - 1; i++)
		if (i != q)
			j.outer *= d[i];
	return kpar(k, j.outer * j.strips, kgrain(TR_TILE * d[n - 1]), tiled_items, &j);
}

static int k_transpose(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int r = x->rank, n;
	int64_t perm[IR_MAX_RANK], od[IR_MAX_RANK], st[IR_MAX_RANK], ss[IR_MAX_RANK];
	const int64_t *p = kattr_ints(k, "perm", &n);
	if (p) {
		if (n != r)
			return kerr(k, "perm has %d values, the input %s has rank %d", n, kshape(x), r);
		memcpy(perm, p, sizeof(int64_t) * (size_t)n);
		if (norm_axes(k, perm, n, r))
			return IR_ERR;
	} else {
		for (int i = 0; i < r; i++)
			perm[i] = r - 1 - i;
	}
	kstrides(r, x->dims, st);
	for (int i = 0; i < r; i++) {
		od[i] = x->dims[perm[i]];
		ss[i] = st[perm[i]];
	}
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	if (m.kind == MV_BYTES && o->numel) {
		int rc = transpose_tiled(k, &m, r, od, ss);
		if (rc <= 0)
			return rc;
	}
	return copy_strided(k, &m, r, od, 0, ss);
}

static int k_slice(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int r = x->rank;
	int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
	int n, ne, na = -1, ns = -1;
	if (k->opset < 10) {
		const int64_t *a = kattr_ints(k, "starts", &n), *b = kattr_ints(k, "ends", &ne), *c;
		if (!a || !b)
			return kerr(k, "attributes 'starts' and 'ends' are needed");
		if (n > IR_MAX_RANK || ne > IR_MAX_RANK)
			return kerr(k, "starts and ends have too many values");
		memcpy(starts, a, sizeof(int64_t) * (size_t)n);
		memcpy(ends, b, sizeof(int64_t) * (size_t)ne);
		if ((c = kattr_ints(k, "axes", &na))) {
			if (na > IR_MAX_RANK)
				return kerr(k, "axes has too many values");
			memcpy(axes, c, sizeof(int64_t) * (size_t)na);
		} else {
			na = -1;
		}
	} else {
		const struct ir_tensor *ts = kin_req(k, 1), *te = kin_req(k, 2), *ta = kin(k, 3), *tp = kin(k, 4);
		if (!ts || !te)
			return IR_ERR;
		if ((n = read_small_ints(k, ts, starts, "starts")) < 0 ||
		    (ne = read_small_ints(k, te, ends, "ends")) < 0)
			return IR_ERR;
		if (ta && (na = read_small_ints(k, ta, axes, "axes")) < 0)
			return IR_ERR;
		if (tp && (ns = read_small_ints(k, tp, steps, "steps")) < 0)
			return IR_ERR;
	}
	if (ne != n || (na >= 0 && na != n) || (ns >= 0 && ns != n))
		return kerr(k, "starts, ends, axes and steps must have the same length");
	if (na < 0)
		for (int i = 0; i < n; i++)
			axes[i] = i;
	if (n > r)
		return kerr(k, "%d axes are sliced, the input %s has rank %d", n, kshape(x), r);
	if (norm_axes(k, axes, n, r))
		return IR_ERR;
	if (ns < 0)
		for (int i = 0; i < n; i++)
			steps[i] = 1;
	int64_t st[IR_MAX_RANK], od[IR_MAX_RANK], ss[IR_MAX_RANK], base = 0;
	kstrides(r, x->dims, st);
	for (int i = 0; i < r; i++) {
		od[i] = x->dims[i];
		ss[i] = st[i];
	}
	for (int i = 0; i < n; i++) {
		int ax = (int)axes[i];
		if (steps[i] == 0)
			return kerr(k, "steps[%d] is 0", i);
		int64_t s0, len, step = steps[i];
		kern_slice_dim(x->dims[ax], starts[i], ends[i], step, &s0, &len);
		if (len <= 1)
			step = 1;   /* keeps stride * step small */
		od[ax] = len;
		/* unsigned: exact when the input has elements, unused otherwise */
		if (len)
			base = (int64_t)((uint64_t)base + (uint64_t)s0 * (uint64_t)st[ax]);
		ss[ax] = (int64_t)((uint64_t)st[ax] * (uint64_t)step);
	}
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	return copy_strided(k, &m, r, od, base, ss);
}

static int k_expand(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *s = kin_req(k, 1);
	if (!x || !s)
		return IR_ERR;
	int64_t sh[IR_MAX_RANK], od[IR_MAX_RANK], st[IR_MAX_RANK], ss[IR_MAX_RANK];
	int n = read_small_ints(k, s, sh, "shape");
	if (n < 0)
		return IR_ERR;
	int r = n > x->rank ? n : x->rank;
	kstrides(x->rank, x->dims, st);
	for (int i = 0; i < r; i++) {
		int xi = i - (r - x->rank), si = i - (r - n);
		int64_t a = xi >= 0 ? x->dims[xi] : 1, b = si >= 0 ? sh[si] : 1;
		if (b < 0)
			return kerr(k, "shape[%d] is %lld, dims must be >= 0", si, (long long)b);
		if (a != b && a != 1 && b != 1)
			return kerr(k, "cannot expand %s to the shape given: dim %d is %lld, not 1 or %lld", kshape(x),
				    xi, (long long)a, (long long)b);
		od[i] = a == 1 ? b : a;
		ss[i] = xi >= 0 && a != 1 ? st[xi] : 0;
	}
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	if (m.kind == MV_BYTES && o->numel) {
		int rc = transpose_tiled(k, &m, r, od, ss);
		if (rc <= 0)
			return rc;
	}
	return copy_strided(k, &m, r, od, 0, ss);
}

static int k_tile(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *rt = kin_req(k, 1);
	if (!x || !rt)
		return IR_ERR;
	int r = x->rank;
	int64_t rep[IR_MAX_RANK], od[IR_MAX_RANK], st[IR_MAX_RANK];
	int64_t vd[2 * IR_MAX_RANK], vs[2 * IR_MAX_RANK];
	int n = read_small_ints(k, rt, rep, "repeats");
	if (n < 0)
		return IR_ERR;
	if (n != r)
		return kerr(k, "repeats has %d values, the input %s has rank %d", n, kshape(x), r);
	kstrides(r, x->dims, st);
	/* the output seen as [rep0, d0, rep1, d1, ...] with stride 0 on the repeats */
	for (int i = 0; i < r; i++) {
		if (rep[i] < 0)
			return kerr(k, "repeats[%d] is %lld, it must be >= 0", i, (long long)rep[i]);
		if (!mul_ok(x->dims[i], rep[i], &od[i]))
			return kerr(k, "the output dim %d overflows", i);
		vd[2 * i] = rep[i];
		vd[2 * i + 1] = x->dims[i];
		vs[2 * i] = 0;
		vs[2 * i + 1] = st[i];
	}
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	return copy_strided(k, &m, 2 * r, vd, 0, vs);
}

static int k_depth_to_space(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (x->rank != 4)
		return kerr(k, "input must be 4-D, not %s", kshape(x));
	int64_t b = kattr_i(k, "blocksize", 0);
	const char *mode = kattr_s(k, "mode", "DCR");
	bool crd = !strcmp(mode, "CRD");
	if (!crd && strcmp(mode, "DCR"))
		return kerr(k, "mode '%s' is not DCR or CRD", mode);
	int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], bb;
	if (b <= 0 || !mul_ok(b, b, &bb) || C % bb)
		return kerr(k, "blocksize %lld does not divide the %lld channels in blocks", (long long)b, (long long)C);
	int64_t hb, wb;
	if (!mul_ok(H, b, &hb) || !mul_ok(W, b, &wb))
		return kerr(k, "the output of %s with blocksize %lld is too large", kshape(x), (long long)b);
	int64_t c2 = C / bb, od[4] = { N, c2, hb, wb };
	int64_t HW = (int64_t)((uint64_t)H * (uint64_t)W);   /* only used when there are elements */
	/* the output as [N, C', H, b, W, b] */
	int64_t vd[6] = { N, c2, H, b, W, b };
	uint64_t uhw = (uint64_t)HW, ub = (uint64_t)b, uc2 = (uint64_t)c2;
	int64_t vs[6] = { (int64_t)((uint64_t)C * uhw), (int64_t)(crd ? ub * ub * uhw : uhw), W,
			  (int64_t)(crd ? ub * uhw : ub * uc2 * uhw), 1, (int64_t)(crd ? uhw : uc2 * uhw) };
	struct ir_tensor *o = kout(k, 0, x->dtype, 4, od);
	if (!o)
		return IR_ERR;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	return copy_strided(k, &m, 6, vd, 0, vs);
}

static int k_space_to_depth(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (x->rank != 4)
		return kerr(k, "input must be 4-D, not %s", kshape(x));
	int64_t b = kattr_i(k, "blocksize", 0);
	int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], bb;
	if (b <= 0 || !mul_ok(b, b, &bb) || H % b || W % b)
		return kerr(k, "blocksize %lld does not divide the spatial dims of %s", (long long)b, kshape(x));
	int64_t od[4] = { N, C * bb, H / b, W / b };
	/* the output as [N, b, b, C, H/b, W/b] */
	int64_t vd[6] = { N, b, b, C, H / b, W / b };
	int64_t HW = (int64_t)((uint64_t)H * (uint64_t)W);   /* only used when there are elements */
	int64_t vs[6] = { (int64_t)((uint64_t)C * (uint64_t)HW), W, 1, HW, (int64_t)((uint64_t)b * (uint64_t)W), b };
	struct ir_tensor *o = kout(k, 0, x->dtype, 4, od);
	if (!o)
		return IR_ERR;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	return copy_strided(k, &m, 6, vd, 0, vs);
}

/* ------------------------------------------------------------------------ */
/* Concat, Split                                                             */
/* ------------------------------------------------------------------------ */

struct concat_job {
	const struct cpu_kctx *k;
	struct ir_tensor *o;
	uint64_t row;   /* output elements per outer position */
	int ax;
};

/* outer positions [p0, p1) of a Concat of whole-byte elements */
static void concat_rows(void *ctx, int64_t p0, int64_t p1, int worker)
{
	const struct concat_job *j = ctx;
	const struct cpu_kctx *k = j->k;
	int r = j->o->rank, ax = j->ax;
	(void)worker;
	for (uint64_t p = (uint64_t)p0; p < (uint64_t)p1; p++) {
		uint64_t di = p * j->row;
		for (int i = 0; i < k->n_in; i++) {
			const struct ir_tensor *t = kin(k, i);
			uint64_t chunk = knumel(r - ax, t->dims + ax);
			struct mover m;
			mv_init(&m, t->dtype, j->o, t);
			mv_block(&m, di, p * chunk, chunk);
			di += chunk;
		}
	}
}

static int k_concat(struct cpu_kctx *k)
{
	if (k->n_in < 1)
		return kerr(k, "has no inputs");
	const struct ir_tensor *x0 = kin_req(k, 0);
	if (!x0)
		return IR_ERR;
	int r = x0->rank, ax;
	if (r == 0)
		return kerr(k, "cannot concatenate scalars");
	if (kaxis(k, kattr_i(k, "axis", 0), r, &ax))
		return IR_ERR;
	int64_t od[IR_MAX_RANK];
	memcpy(od, x0->dims, sizeof(int64_t) * (size_t)r);
	od[ax] = 0;
	for (int i = 0; i < k->n_in; i++) {
		const struct ir_tensor *t = kin_req(k, i);
		if (!t)
			return IR_ERR;
		if (t->dtype != x0->dtype || t->rank != r)
			return kerr(k, "input %d is %s %s, input 0 is %s %s", i, ir_dtype_name(t->dtype), kshape(t),
				    ir_dtype_name(x0->dtype), kshape(x0));
		for (int j = 0; j < r; j++)
			if (j != ax && t->dims[j] != x0->dims[j])
				return kerr(k, "input %d is %s, input 0 is %s: they differ off axis %d", i, kshape(t),
					    kshape(x0), ax);
		if (__builtin_add_overflow(od[ax], t->dims[ax], &od[ax]))
			return kerr(k, "the output dim overflows");
	}
	struct ir_tensor *o = kout(k, 0, x0->dtype, r, od);
	if (!o)
		return IR_ERR;
	uint64_t outer = knumel(ax, od), di = 0;
	if (ir_dtype_bits(x0->dtype) % 8 == 0 && x0->dtype != IR_STRING && o->numel) {
		/* whole bytes: the outer positions on the pool */
		struct concat_job j = { k, o, knumel(r - ax, od + ax), ax };
		return kpar(k, (int64_t)outer, kgrain((int64_t)j.row), concat_rows, &j);
	}
	for (uint64_t p = 0; p < outer; p++) {
		for (int i = 0; i < k->n_in; i++) {
			const struct ir_tensor *t = kin(k, i);
			uint64_t chunk = knumel(r - ax, t->dims + ax);
			struct mover m;
			mv_init(&m, t->dtype, o, t);
			mv_block(&m, di, p * chunk, chunk);
			if (m.nomem)
				return mv_done(k, &m);
			di += chunk;
		}
	}
	return 0;
}

static int k_split(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int r = x->rank, ax, n = k->n_out;
	if (kaxis(k, kattr_i(k, "axis", 0), r, &ax))
		return IR_ERR;
	if (r == 0)
		return kerr(k, "cannot split a scalar");
	int64_t dim = x->dims[ax];
	int64_t *sizes = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
	if (!sizes)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	int rc = IR_ERR;
	const struct ir_tensor *ts = k->opset >= 13 ? kin(k, 1) : NULL;
	int na = 0;
	const int64_t *sa = k->opset < 13 ? kattr_ints(k, "split", &na) : NULL;
	if (ts || sa) {
		uint64_t cnt = ts ? ts->numel : (uint64_t)na;
		if (ts && (!ir_dtype_is_int(ts->dtype) || ts->rank > 1)) {
			kerr(k, "split must be a 1-D integer tensor");
			goto out;
		}
		if (cnt != (uint64_t)n) {
			kerr(k, "split has %llu values for %d outputs", (unsigned long long)cnt, n);
			goto out;
		}
		int64_t sum = 0;
		for (int i = 0; i < n; i++) {
			sizes[i] = ts ? kldi(ts->dtype, kdata(ts), (uint64_t)i) : sa[i];
			if (sizes[i] < 0 || __builtin_add_overflow(sum, sizes[i], &sum)) {
				kerr(k, "split[%d] is %lld, sizes must be >= 0", i, (long long)sizes[i]);
				goto out;
			}
		}
		if (sum != dim) {
			kerr(k, "split sums to %lld, the axis has %lld", (long long)sum, (long long)dim);
			goto out;
		}
	} else {
		int64_t parts = kattr_i(k, "num_outputs", n);
		if (parts != n || n <= 0) {
			kerr(k, "num_outputs is %lld, the node has %d outputs", (long long)parts, n);
			goto out;
		}
		/* equal parts; with num_outputs the last one may be smaller */
		int64_t each = kattr_has(k, "num_outputs") ? (dim + n - 1) / n : dim / n;
		if (!kattr_has(k, "num_outputs") && dim % n) {
			kerr(k, "the axis has %lld, it does not split in %d equal parts", (long long)dim, n);
			goto out;
		}
		int64_t left = dim;
		for (int i = 0; i < n; i++) {
			sizes[i] = each < left ? each : left;
			left -= sizes[i];
		}
	}
	uint64_t outer = knumel(ax, x->dims), inner = knumel(r - ax - 1, x->dims + ax + 1);
	int64_t off = 0;
	for (int i = 0; i < n; i++) {
		int64_t od[IR_MAX_RANK];
		memcpy(od, x->dims, sizeof(int64_t) * (size_t)r);
		od[ax] = sizes[i];
		struct ir_tensor *o = kout(k, i, x->dtype, r, od);
		if (!o)
			goto out;
		struct mover m;
		mv_init(&m, x->dtype, o, x);
		uint64_t chunk = (uint64_t)sizes[i] * inner;
		for (uint64_t p = 0; p < outer; p++)
			mv_block(&m, p * chunk, (p * (uint64_t)dim + (uint64_t)off) * inner, chunk);
		if (mv_done(k, &m))
			goto out;
		off += sizes[i];
	}
	rc = 0;
out:
	free(sizes);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Pad, CenterCropPad                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Writes the output (dims od) where output index o on axis j reads input
 * index map[j][o] (-1: the fill value).
 */
static int copy_mapped(struct cpu_kctx *k, const struct ir_tensor *x, struct ir_tensor *o, int64_t **map,
		       struct mover *m, struct mover *fm)
{
	int r = x->rank;
	int64_t st[IR_MAX_RANK], idx[IR_MAX_RANK] = { 0 };
	kstrides(r, x->dims, st);
	for (uint64_t i = 0; i < o->numel; i++) {
		int64_t off = 0;
		bool fill = false;
		for (int j = 0; j < r; j++) {
			int64_t s = map[j][idx[j]];
			if (s < 0) {
				fill = true;
				break;
			}
			off += s * st[j];
		}
		if (fill)
			mv(fm, i, 0);
		else
			mv(m, i, (uint64_t)off);
		for (int j = r - 1; j >= 0; j--) {
			if (++idx[j] < o->dims[j])
				break;
			idx[j] = 0;
		}
		if ((i & 0xfffff) == 0xfffff) {
			int rc = kstop(k);
			if (rc)
				return rc;
		}
	}
	if (fm->nomem)
		return mv_done(k, fm);
	return mv_done(k, m);
}

static void free_maps(int64_t **map, int r)
{
	for (int j = 0; j < r; j++)
		free(map[j]);
}

static int k_pad(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int r = x->rank, np, na = -1;
	int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
	const char *mode = kattr_s(k, "mode", "constant");
	struct fill f;
	fill_zero(&f);
	if (k->opset < 11) {
		const int64_t *p = kattr_ints(k, k->opset < 2 ? "paddings" : "pads", &np);
		if (!p)
			return kerr(k, "attribute 'pads' is missing");
		if (np > 2 * IR_MAX_RANK)
			return kerr(k, "pads has too many values");
		memcpy(pads, p, sizeof(int64_t) * (size_t)np);
		if (x->dtype != IR_STRING)
			kst(x->dtype, f.bytes, 0, kattr_f(k, "value", 0));
	} else {
		const struct ir_tensor *tp = kin_req(k, 1), *tv = kin(k, 2), *ta = kin(k, 3);
		if (!tp)
			return IR_ERR;
		if (tp->rank > 1 || tp->numel > 2 * IR_MAX_RANK)
			return kerr(k, "pads must be 1-D with at most %d values", 2 * IR_MAX_RANK);
		if ((np = kread_ints(k, tp, pads, 2 * IR_MAX_RANK, "pads")) < 0)
			return IR_ERR;
		if (tv && tv->numel) {
			if (tv->dtype != x->dtype)
				return kerr(k, "constant_value is %s, data is %s", ir_dtype_name(tv->dtype),
					    ir_dtype_name(x->dtype));
			struct mover vm;
			mv_init(&vm, x->dtype, NULL, tv);
			if (vm.kind == MV_STR)
				f.str = tv->strings[0];
			else if (vm.kind == MV_BITS)
				f.bytes[0] = (unsigned char)bits_get(vm.src, vm.bits, 0);
			else
				memcpy(f.bytes, vm.src, vm.esz);
		}
		if (ta && (na = read_small_ints(k, ta, axes, "axes")) < 0)
			return IR_ERR;
	}
	if (na < 0) {
		na = r;
		for (int i = 0; i < r; i++)
			axes[i] = i;
	}
	if (np != 2 * na)
		return kerr(k, "pads has %d values for %d axes", np, na);
	if (norm_axes(k, axes, na, r))
		return IR_ERR;
	int md = !strcmp(mode, "constant") ? 0 : !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "edge") ? 2 :
		 !strcmp(mode, "wrap") ? 3 : -1;
	if (md < 0)
		return kerr(k, "mode '%s' is not constant, reflect, edge or wrap", mode);
	int64_t pb[IR_MAX_RANK] = { 0 }, pe[IR_MAX_RANK] = { 0 }, od[IR_MAX_RANK];
	for (int i = 0; i < na; i++) {
		pb[axes[i]] = pads[i];
		pe[axes[i]] = pads[na + i];
	}
	for (int j = 0; j < r; j++) {
		if (__builtin_add_overflow(x->dims[j], pb[j], &od[j]) || __builtin_add_overflow(od[j], pe[j], &od[j]) ||
		    od[j] < 0)
			return kerr(k, "pads %lld and %lld do not fit axis %d of %s", (long long)pb[j], (long long)pe[j],
				    j, kshape(x));
		if (md && x->dims[j] == 0 && od[j] > 0)
			return kerr(k, "cannot pad the empty axis %d in mode '%s'", j, mode);
	}
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	int64_t *map[IR_MAX_RANK] = { NULL };
	for (int j = 0; j < r; j++) {
		int64_t d = x->dims[j];
		if (!(map[j] = malloc(sizeof(int64_t) * (size_t)od[j]))) {
			free_maps(map, r);
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		}
		for (int64_t q = 0; q < od[j]; q++) {
			int64_t i = q - pb[j];
			if (i >= 0 && i < d) {
				map[j][q] = i;
				continue;
			}
			switch (md) {
			case 0:
				i = -1;
				break;
			case 1:
				if (d == 1) {
					i = 0;
				} else {
					/* mirror without repeating the edge: period 2(d-1) */
					int64_t per = 2 * (d - 1);
					i %= per;
					if (i < 0)
						i += per;
					if (i >= d)
						i = per - i;
				}
				break;
			case 2:
				i = i < 0 ? 0 : d - 1;
				break;
			default:
				i %= d;
				if (i < 0)
					i += d;
				break;
			}
			map[j][q] = i;
		}
	}
	struct mover m, fm;
	mv_init(&m, x->dtype, o, x);
	fill_mover(&fm, &f, x->dtype, o);
	int rc = copy_mapped(k, x, o, map, &m, &fm);
	free_maps(map, r);
	return rc;
}

static int k_center_crop_pad(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ts = kin_req(k, 1);
	if (!x || !ts)
		return IR_ERR;
	int r = x->rank, n, na;
	int64_t sh[IR_MAX_RANK], axes[IR_MAX_RANK], od[IR_MAX_RANK], off[IR_MAX_RANK] = { 0 };
	if ((n = read_small_ints(k, ts, sh, "shape")) < 0)
		return IR_ERR;
	const int64_t *a = kattr_ints(k, "axes", &na);
	if (a) {
		if (na > IR_MAX_RANK)
			return kerr(k, "axes has too many values");
		memcpy(axes, a, sizeof(int64_t) * (size_t)na);
	} else {
		na = r;
		for (int i = 0; i < r; i++)
			axes[i] = i;
	}
	if (n != na)
		return kerr(k, "shape has %d values for %d axes", n, na);
	if (norm_axes(k, axes, na, r))
		return IR_ERR;
	memcpy(od, x->dims, sizeof(int64_t) * (size_t)r);
	for (int i = 0; i < na; i++) {
		int ax = (int)axes[i];
		int64_t d = x->dims[ax];
		if (sh[i] < 0)
			return kerr(k, "shape[%d] is %lld, it must be >= 0", i, (long long)sh[i]);
		od[ax] = sh[i];
		/* crop: start (d - s) / 2 into the input; pad: start (s - d) / 2 into the output */
		off[ax] = sh[i] < d ? (d - sh[i]) / 2 : -((sh[i] - d) / 2);
	}
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	int64_t *map[IR_MAX_RANK] = { NULL };
	for (int j = 0; j < r; j++) {
		if (!(map[j] = malloc(sizeof(int64_t) * (size_t)od[j]))) {
			free_maps(map, r);
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		}
		for (int64_t q = 0; q < od[j]; q++) {
			int64_t i = q + off[j];
			map[j][q] = i >= 0 && i < x->dims[j] ? i : -1;
		}
	}
	struct fill f;
	struct mover m, fm;
	fill_zero(&f);
	mv_init(&m, x->dtype, o, x);
	fill_mover(&fm, &f, x->dtype, o);
	int rc = copy_mapped(k, x, o, map, &m, &fm);
	free_maps(map, r);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Trilu, Dropout, ReverseSequence                                           */
/* ------------------------------------------------------------------------ */

static int k_trilu(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *tk = kin(k, 1);
	if (!x)
		return IR_ERR;
	if (x->rank < 2)
		return kerr(k, "input must have rank >= 2, not %s", kshape(x));
	int64_t kk = 0;
	if (tk) {
		if (tk->numel != 1 || !ir_dtype_is_int(tk->dtype))
			return kerr(k, "k must be an integer scalar");
		kk = kldi(tk->dtype, kdata(tk), 0);
	}
	bool upper = kattr_i(k, "upper", 1) != 0;
	int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1];
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	struct fill f;
	struct mover m, fm;
	fill_zero(&f);
	mv_init(&m, x->dtype, o, x);
	fill_mover(&fm, &f, x->dtype, o);
	if (!o->numel)
		return 0;
	uint64_t batch = x->numel / (uint64_t)(R * C);
	for (uint64_t b = 0; b < batch; b++) {
		for (int64_t i = 0; i < R; i++) {
			uint64_t row = (b * (uint64_t)R + (uint64_t)i) * (uint64_t)C;
			for (int64_t j = 0; j < C; j++) {
				/* j - i cannot overflow: both are in [0, dim) */
				bool keep = upper ? j - i >= kk : j - i <= kk;
				if (keep)
					mv(&m, row + (uint64_t)j, row + (uint64_t)j);
				else
					mv(&fm, row + (uint64_t)j, 0);
			}
		}
	}
	if (fm.nomem)
		return mv_done(k, &fm);
	return mv_done(k, &m);
}

/*
 * The Mersenne Twister MT19937 as numpy's RandomState seeds it with an
 * integer, so that training-mode Dropout with a seed draws the same mask as
 * the ONNX reference (RandomState(seed).uniform(0, 1, shape) >= ratio).
 */
struct mt19937 {
	uint32_t mt[624];
	int pos;
};

static void mt_seed(struct mt19937 *g, uint32_t seed)
{
	g->mt[0] = seed;
	for (int i = 1; i < 624; i++)
		g->mt[i] = 1812433253u * (g->mt[i - 1] ^ (g->mt[i - 1] >> 30)) + (uint32_t)i;
	g->pos = 624;
}

static uint32_t mt_next(struct mt19937 *g)
{
	if (g->pos >= 624) {
		for (int i = 0; i < 624; i++) {
			uint32_t y = (g->mt[i] & 0x80000000u) | (g->mt[(i + 1) % 624] & 0x7fffffffu);
			g->mt[i] = g->mt[(i + 397) % 624] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
		}
		g->pos = 0;
	}
	uint32_t y = g->mt[g->pos++];
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680u;
	y ^= (y << 15) & 0xefc60000u;
	y ^= y >> 18;
	return y;
}

/* A double in [0, 1) from 53 random bits (numpy's random_sample). */
static double mt_double(struct mt19937 *g)
{
	uint32_t a = mt_next(g) >> 5, b = mt_next(g) >> 6;
	return (a * 67108864.0 + b) / 9007199254740992.0;
}

static int k_dropout(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	double ratio = kattr_f(k, "ratio", 0.5f);
	bool training = false;
	if (k->opset >= 12) {
		const struct ir_tensor *tr = kin(k, 1), *tt = kin(k, 2);
		if (tr) {
			if (tr->numel != 1 || !ir_dtype_is_float(tr->dtype))
				return kerr(k, "ratio must be a float scalar");
			ratio = kld(tr->dtype, kdata(tr), 0);
		}
		if (tt) {
			if (tt->numel != 1 || tt->dtype == IR_STRING)
				return kerr(k, "training_mode must be a scalar");
			training = kld(tt->dtype, kdata(tt), 0) != 0;
		}
	} else if (k->opset < 7) {
		training = kattr_i(k, "is_test", 0) == 0;
	}
	bool want_mask = k->n_out > 1 && kwant(k, 1);
	int mdt = k->opset >= 10 ? IR_BOOL : x->dtype;
	if (!training || ratio == 0) {
		/* inference (or nothing to drop): the identity and a mask of ones */
		if (kout_share(k, 0, x, x->rank, x->dims))
			return IR_ERR;
		if (want_mask) {
			struct ir_tensor *o = kout(k, 1, mdt, x->rank, x->dims);
			if (!o)
				return IR_ERR;
			for (uint64_t i = 0; i < o->numel; i++)
				kst(mdt, kwdata(o), i, 1.0);
		}
		return 0;
	}
	if (!(ratio >= 0 && ratio < 1))
		return kerr(k, "ratio %g must be in [0, 1)", ratio);
	if (!ir_dtype_is_float(x->dtype))
		return kerr(k, "type %s is not supported in training mode", ir_dtype_name(x->dtype));
	/* without a seed the mask is random anyway: seed 0 keeps runs repeatable */
	struct mt19937 *g = malloc(sizeof(*g));
	if (!g)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	mt_seed(g, (uint32_t)kattr_i(k, "seed", 0));
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	struct ir_tensor *om = o && want_mask ? kout(k, 1, mdt, x->rank, x->dims) : NULL;
	if (!o || (want_mask && !om)) {
		free(g);
		return IR_ERR;
	}
	float fscale = (float)(1.0 / (1.0 - (float)ratio));
	double dscale = 1.0 / (1.0 - ratio);
	for (uint64_t i = 0; i < x->numel; i++) {
		bool keep = mt_double(g) >= ratio;
		double v = kld(x->dtype, kdata(x), i);
		if (x->dtype == IR_DOUBLE)
			v = keep ? v * dscale : 0;
		else
			v = keep ? (float)v * fscale : 0.0f;
		kst(x->dtype, kwdata(o), i, v);
		if (om)
			kst(mdt, kwdata(om), i, keep);
	}
	free(g);
	return 0;
}

static int k_reverse_sequence(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *tl = kin_req(k, 1);
	if (!x || !tl)
		return IR_ERR;
	if (x->rank < 2)
		return kerr(k, "input must have rank >= 2, not %s", kshape(x));
	int64_t ba = kattr_i(k, "batch_axis", 1), ta = kattr_i(k, "time_axis", 0);
	if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
		return kerr(k, "batch_axis %lld and time_axis %lld must be 0 and 1 in some order", (long long)ba,
			    (long long)ta);
	int64_t B = x->dims[ba], T = x->dims[ta];
	if (!ir_dtype_is_int(tl->dtype) || tl->rank != 1 || tl->dims[0] != B)
		return kerr(k, "sequence_lens must be an integer tensor of [%lld], not %s", (long long)B, kshape(tl));
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	uint64_t inner = knumel(x->rank - 2, x->dims + 2);
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	for (int64_t b = 0; b < B; b++) {
		int64_t len = kldi(tl->dtype, kdata(tl), (uint64_t)b);
		if (len < 0 || len > T)
			return kerr(k, "sequence_lens[%lld] is %lld, the time axis has %lld", (long long)b,
				    (long long)len, (long long)T);
		for (int64_t t = 0; t < T; t++) {
			int64_t src = t < len ? len - 1 - t : t;
			uint64_t di = (uint64_t)(ta == 0 ? t * B + b : b * T + t) * inner;
			uint64_t si = (uint64_t)(ta == 0 ? src * B + b : b * T + src) * inner;
			mv_block(&m, di, si, inner);
		}
	}
	return mv_done(k, &m);
}

const struct cpu_kernel cpu_kernels_tensor[] = {
	{ IR_OP_Identity, k_identity, NULL },
	{ IR_OP_Constant, k_constant, NULL },
	{ IR_OP_Reshape, k_reshape, NULL },
	{ IR_OP_Flatten, k_flatten, NULL },
	{ IR_OP_Transpose, k_transpose, NULL },
	{ IR_OP_Squeeze, k_squeeze, NULL },
	{ IR_OP_Unsqueeze, k_unsqueeze, NULL },
	{ IR_OP_Concat, k_concat, NULL },
	{ IR_OP_Split, k_split, NULL },
	{ IR_OP_Slice, k_slice, NULL },
	{ IR_OP_Expand, k_expand, NULL },
	{ IR_OP_Tile, k_tile, NULL },
	{ IR_OP_Pad, k_pad, NULL },
	{ IR_OP_Shape, k_shape, NULL },
	{ IR_OP_Size, k_size, NULL },
	{ IR_OP_ConstantOfShape, k_constant_of_shape, NULL },
	{ IR_OP_Range, k_range, NULL },
	{ IR_OP_Trilu, k_trilu, NULL },
	{ IR_OP_EyeLike, k_eyelike, NULL },
	{ IR_OP_DepthToSpace, k_depth_to_space, NULL },
	{ IR_OP_SpaceToDepth, k_space_to_depth, NULL },
	{ IR_OP_CenterCropPad, k_center_crop_pad, NULL },
	{ IR_OP_Dropout, k_dropout, NULL },
	{ IR_OP_ReverseSequence, k_reverse_sequence, NULL },
	{ -1, NULL, NULL },
};
