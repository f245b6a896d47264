/*
 * k_index.c - CPU kernels: indexing ops (Gather, GatherElements, GatherND,
 * Scatter, ScatterElements, ScatterND, TensorScatter, OneHot, Compress,
 * NonZero, Unique, TopK, CumSum, CumProd, Col2Im).
 *
 * Indices may be negative where ONNX allows it (counted from the end); an
 * index out of range is an error naming the index and the dim.
 */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

#include "move.h"


/* Output 0 as a fresh copy of x (to scatter into). NULL on error. */
static struct ir_tensor *copy_out(struct cpu_kctx *k, const struct ir_tensor *x)
{
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!o)
		return NULL;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	mv_block(&m, 0, 0, x->numel);
	if (mv_done(k, &m))
		return NULL;
	return o;
}

/* Index element i of t, made non-negative against dim; error when out of range. */
static int get_index(struct cpu_kctx *k, const struct ir_tensor *t, uint64_t i, int64_t dim, int64_t *out)
{
	int64_t v = kldi(t->dtype, kdata(t), i);
	int64_t w = v < 0 ? v + dim : v;
	*out = 0;
	if (w < 0 || w >= dim)
		return kerr(k, "index %lld is out of range for a dim of %lld", (long long)v, (long long)dim);
	*out = w;
	return 0;
}

static int check_index_type(struct cpu_kctx *k, const struct ir_tensor *t, const char *what)
{
	if (t->dtype != IR_INT32 && t->dtype != IR_INT64)
		return kerr(k, "%s must be int32 or int64, not %s", what, ir_dtype_name(t->dtype));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Gather, GatherElements, GatherND                                          */
/* ------------------------------------------------------------------------ */

struct gather_job {
	const struct mover *m;
	const struct ir_tensor *ix;
	int64_t dim;
	uint64_t ni, inner;
};

/* the output blocks [b0, b1) of a Gather: block b is index b % ni of outer
 * position b / ni (indices already checked) */
static void gather_blocks(void *ctx, int64_t b0, int64_t b1, int worker)
{
	const struct gather_job *j = ctx;
	struct mover m = *j->m;
	(void)worker;
	for (uint64_t b = (uint64_t)b0; b < (uint64_t)b1; b++) {
		uint64_t p = b / j->ni, i = b % j->ni;
		int64_t v = kldi(j->ix->dtype, kdata(j->ix), i);
		if (v < 0)
			v += j->dim;
		mv_block(&m, b * j->inner, (p * (uint64_t)j->dim + (uint64_t)v) * j->inner, j->inner);
	}
}

static int k_gather(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ix = kin_req(k, 1);
	if (!x || !ix || check_index_type(k, ix, "indices"))
		return IR_ERR;
	int ax;
	if (x->rank < 1)
		return kerr(k, "data must have rank >= 1");
	if (kaxis(k, kattr_i(k, "axis", 0), x->rank, &ax))
		return IR_ERR;
	int r = x->rank - 1 + ix->rank;
	if (r > IR_MAX_RANK)
		return kerr(k, "the output rank %d is above %d", r, IR_MAX_RANK);
	int64_t od[IR_MAX_RANK];
	int n = 0;
	for (int i = 0; i < ax; i++)
		od[n++] = x->dims[i];
	for (int i = 0; i < ix->rank; i++)
		od[n++] = ix->dims[i];
	for (int i = ax + 1; i < x->rank; i++)
		od[n++] = x->dims[i];
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	int64_t dim = x->dims[ax];
	uint64_t outer = knumel(ax, x->dims), inner = knumel(x->rank - ax - 1, x->dims + ax + 1);
	uint64_t ni = ix->numel, di = 0;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	if (m.kind == MV_BYTES && outer && ni) {
		/* whole bytes: the indices checked first, then the (outer,
		 * index) blocks on the pool */
		for (uint64_t i = 0; i < ni; i++) {
			int64_t v = 0;
			if (get_index(k, ix, i, dim, &v))
				return IR_ERR;
		}
		struct gather_job j = { &m, ix, dim, ni, inner };
		return kpar(k, (int64_t)(outer * ni), kgrain((int64_t)inner), gather_blocks, &j);
	}
	for (uint64_t p = 0; p < outer; p++) {
		for (uint64_t i = 0; i < ni; i++) {
			int64_t v = 0;
			if (get_index(k, ix, i, dim, &v))
				return IR_ERR;
			mv_block(&m, di, (p * (uint64_t)dim + (uint64_t)v) * inner, inner);
			di += inner;
		}
	}
	return mv_done(k, &m);
}

static int k_gather_elements(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ix = kin_req(k, 1);
	if (!x || !ix || check_index_type(k, ix, "indices"))
		return IR_ERR;
	int r = x->rank, ax;
	if (r < 1 || ix->rank != r)
		return kerr(k, "indices %s must have the rank of data %s (>= 1)", kshape(ix), kshape(x));
	if (kaxis(k, kattr_i(k, "axis", 0), r, &ax))
		return IR_ERR;
	for (int j = 0; j < r; j++)
		if (j != ax && ix->dims[j] > x->dims[j])
			return kerr(k, "indices %s do not fit in data %s at axis %d", kshape(ix), kshape(x), j);
	struct ir_tensor *o = kout(k, 0, x->dtype, r, ix->dims);
	if (!o)
		return IR_ERR;
	int64_t st[IR_MAX_RANK], idx[IR_MAX_RANK] = { 0 };
	kstrides(r, x->dims, st);
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	for (uint64_t i = 0; i < ix->numel; i++) {
		int64_t v = 0, off = 0;
		if (get_index(k, ix, i, x->dims[ax], &v))
			return IR_ERR;
		for (int j = 0; j < r; j++)
			off += (j == ax ? v : idx[j]) * st[j];
		mv(&m, i, (uint64_t)off);
		for (int j = r - 1; j >= 0; j--) {
			if (++idx[j] < ix->dims[j])
				break;
			idx[j] = 0;
		}
	}
	return mv_done(k, &m);
}

static int k_gather_nd(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ix = kin_req(k, 1);
	if (!x || !ix || check_index_type(k, ix, "indices"))
		return IR_ERR;
	int r = x->rank, q = ix->rank;
	int64_t b = kattr_i(k, "batch_dims", 0);
	if (q < 1 || r < 1)
		return kerr(k, "data and indices must have rank >= 1");
	if (b < 0 || b >= q || b >= r)
		return kerr(k, "batch_dims %lld must be below the ranks of data and indices", (long long)b);
	int64_t mlast = ix->dims[q - 1];
	if (mlast < 1 || b + mlast > r)
		return kerr(k, "the last dim of indices %s is %lld, it must be in [1, %lld]", kshape(ix),
			    (long long)mlast, (long long)(r - b));
	for (int j = 0; j < b; j++)
		if (ix->dims[j] != x->dims[j])
			return kerr(k, "batch dims of indices %s and data %s differ", kshape(ix), kshape(x));
	int m = (int)mlast;
	int64_t od[IR_MAX_RANK], st[IR_MAX_RANK];
	int orank = 0;
	for (int j = 0; j < q - 1; j++)
		od[orank++] = ix->dims[j];
	for (int j = (int)b + m; j < r; j++) {
		if (orank >= IR_MAX_RANK)
			return kerr(k, "the output rank is above %d", IR_MAX_RANK);
		od[orank++] = x->dims[j];
	}
	struct ir_tensor *o = kout(k, 0, x->dtype, orank, od);
	if (!o)
		return IR_ERR;
	kstrides(r, x->dims, st);
	uint64_t nb = knumel((int)b, x->dims), per = knumel(q - 1 - (int)b, ix->dims + b);
	uint64_t block = knumel(r - (int)b - m, x->dims + b + m);
	uint64_t bstride = b ? (uint64_t)st[b - 1] : 0, di = 0;
	struct mover mvr;
	mv_init(&mvr, x->dtype, o, x);
	for (uint64_t bi = 0; bi < nb; bi++) {
		for (uint64_t t = 0; t < per; t++) {
			uint64_t base = (bi * per + t) * (uint64_t)m, off = bi * bstride;
			for (int j = 0; j < m; j++) {
				int64_t v = 0;
				if (get_index(k, ix, base + (uint64_t)j, x->dims[b + j], &v))
					return IR_ERR;
				off += (uint64_t)v * (uint64_t)st[b + j];
			}
			mv_block(&mvr, di, off, block);
			di += block;
		}
	}
	return mv_done(k, &mvr);
}

/* ------------------------------------------------------------------------ */
/* Scatter reductions                                                        */
/* ------------------------------------------------------------------------ */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int red_kind(struct cpu_kctx *k, int dtype, int *kind)
{
	const char *s = kattr_s(k, "reduction", "none");
	*kind = !strcmp(s, "none") ? RED_NONE : !strcmp(s, "add") ? RED_ADD : !strcmp(s, "mul") ? RED_MUL :
		!strcmp(s, "max") ? RED_MAX : !strcmp(s, "min") ? RED_MIN : -1;
	if (*kind < 0)
		return kerr(k, "reduction '%s' is not none, add, mul, max or min", s);
	if (*kind != RED_NONE && (dtype == IR_STRING || ir_dtype_bits(dtype) % 8 ||
				  dtype == IR_COMPLEX64 || dtype == IR_COMPLEX128))
		return kerr(k, "reduction '%s' is not supported for %s", s, ir_dtype_name(dtype));
	return 0;
}

/* dst[di] = dst[di] (op) src[si]; fp16/bf16/float32 computed in float32. */
static void red_apply(int kind, int dtype, void *dst, uint64_t di, const void *src, uint64_t si)
{
	if (ir_dtype_is_int(dtype) || dtype == IR_BOOL) {
		int64_t a = kldi(dtype, dst, di), b = kldi(dtype, src, si), v;
		bool uns = dtype == IR_UINT64;
		switch (kind) {
		case RED_ADD: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
		case RED_MUL: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
		case RED_MAX: v = (uns ? (uint64_t)a >= (uint64_t)b : a >= b) ? a : b; break;
		default: v = (uns ? (uint64_t)a <= (uint64_t)b : a <= b) ? a : b; break;
		}
		ksti(dtype, dst, di, v);
		return;
	}
	double a = kld(dtype, dst, di), b = kld(dtype, src, si), v;
	switch (kind) {
	case RED_ADD: v = a + b; break;
	case RED_MUL: v = a * b; break;
	case RED_MAX: v = isnan(a) || isnan(b) ? NAN : a >= b ? a : b; break;
	default: v = isnan(a) || isnan(b) ? NAN : a <= b ? a : b; break;
	}
	if (dtype != IR_DOUBLE && kind != RED_MAX && kind != RED_MIN) {
		float f = kind == RED_ADD ? (float)a + (float)b : (float)a * (float)b;
		v = f;
	}
	kst(dtype, dst, di, v);
}

static int k_scatter_elements(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ix = kin_req(k, 1), *up = kin_req(k, 2);
	if (!x || !ix || !up || check_index_type(k, ix, "indices"))
		return IR_ERR;
	int r = x->rank, ax, kind = RED_NONE;
	if (r < 1 || ix->rank != r || up->rank != r)
		return kerr(k, "data %s, indices %s and updates %s must have one rank (>= 1)", kshape(x), kshape(ix),
			    kshape(up));
	if (up->dtype != x->dtype)
		return kerr(k, "updates are %s, data is %s", ir_dtype_name(up->dtype), ir_dtype_name(x->dtype));
	for (int j = 0; j < r; j++)
		if (ix->dims[j] != up->dims[j])
			return kerr(k, "indices %s and updates %s differ in shape", kshape(ix), kshape(up));
	if (kaxis(k, kattr_i(k, "axis", 0), r, &ax) || (k->node->op != IR_OP_Scatter && red_kind(k, x->dtype, &kind)))
		return IR_ERR;
	for (int j = 0; j < r; j++)
		if (j != ax && ix->dims[j] > x->dims[j])
			return kerr(k, "indices %s do not fit in data %s at axis %d", kshape(ix), kshape(x), j);
	struct ir_tensor *o = copy_out(k, x);
	if (!o)
		return IR_ERR;
	int64_t st[IR_MAX_RANK], idx[IR_MAX_RANK] = { 0 };
	kstrides(r, x->dims, st);
	struct mover m;
	mv_init(&m, x->dtype, o, up);
	for (uint64_t i = 0; i < ix->numel; i++) {
		int64_t v = 0, off = 0;
		if (get_index(k, ix, i, x->dims[ax], &v))
			return IR_ERR;
		for (int j = 0; j < r; j++)
			off += (j == ax ? v : idx[j]) * st[j];
		if (kind == RED_NONE)
			mv(&m, (uint64_t)off, i);
		else
			red_apply(kind, x->dtype, kwdata(o), (uint64_t)off, kdata(up), i);
		for (int j = r - 1; j >= 0; j--) {
			if (++idx[j] < ix->dims[j])
				break;
			idx[j] = 0;
		}
	}
	return mv_done(k, &m);
}

static int k_scatter_nd(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ix = kin_req(k, 1), *up = kin_req(k, 2);
	if (!x || !ix || !up)
		return IR_ERR;
	if (ix->dtype != IR_INT64)
		return kerr(k, "indices must be int64, not %s", ir_dtype_name(ix->dtype));
	int r = x->rank, q = ix->rank, kind;
	if (red_kind(k, x->dtype, &kind))
		return IR_ERR;
	if (up->dtype != x->dtype)
		return kerr(k, "updates are %s, data is %s", ir_dtype_name(up->dtype), ir_dtype_name(x->dtype));
	if (q < 1 || r < 1)
		return kerr(k, "data and indices must have rank >= 1");
	int64_t mlast = ix->dims[q - 1];
	if (mlast < 1 || mlast > r)
		return kerr(k, "the last dim of indices %s must be in [1, %d]", kshape(ix), r);
	int m = (int)mlast;
	/* updates: indices.shape[:-1] + data.shape[m:] */
	bool ok = up->rank == q - 1 + r - m;
	for (int j = 0; ok && j < q - 1; j++)
		ok = up->dims[j] == ix->dims[j];
	for (int j = m; ok && j < r; j++)
		ok = up->dims[q - 1 + j - m] == x->dims[j];
	if (!ok)
		return kerr(k, "updates %s do not match indices %s and data %s", kshape(up), kshape(ix), kshape(x));
	struct ir_tensor *o = copy_out(k, x);
	if (!o)
		return IR_ERR;
	int64_t st[IR_MAX_RANK];
	kstrides(r, x->dims, st);
	uint64_t n = knumel(q - 1, ix->dims), block = knumel(r - m, x->dims + m);
	struct mover mvr;
	mv_init(&mvr, x->dtype, o, up);
	for (uint64_t t = 0; t < n; t++) {
		uint64_t off = 0;
		for (int j = 0; j < m; j++) {
			int64_t v = 0;
			if (get_index(k, ix, t * (uint64_t)m + (uint64_t)j, x->dims[j], &v))
				return IR_ERR;
			off += (uint64_t)v * (uint64_t)st[j];
		}
		if (kind == RED_NONE)
			mv_block(&mvr, off, t * block, block);
		else
			for (uint64_t e = 0; e < block; e++)
				red_apply(kind, x->dtype, kwdata(o), off + e, kdata(up), t * block + e);
	}
	return mv_done(k, &mvr);
}

static int k_tensor_scatter(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *up = kin_req(k, 1), *wi = kin(k, 2);
	if (!x || !up)
		return IR_ERR;
	int r = x->rank, ax;
	const char *mode = kattr_s(k, "mode", "linear");
	bool circ = !strcmp(mode, "circular");
	if (!circ && strcmp(mode, "linear"))
		return kerr(k, "mode '%s' is not linear or circular", mode);
	if (kaxis(k, kattr_i(k, "axis", -2), r, &ax))
		return IR_ERR;
	if (ax < 1)
		return kerr(k, "axis %d must be after the batch axis", ax);
	if (up->dtype != x->dtype || up->rank != r)
		return kerr(k, "update %s %s does not match past_cache %s %s", ir_dtype_name(up->dtype), kshape(up),
			    ir_dtype_name(x->dtype), kshape(x));
	for (int j = 0; j < r; j++)
		if (j == ax ? up->dims[j] > x->dims[j] : up->dims[j] != x->dims[j])
			return kerr(k, "update %s does not fit past_cache %s at axis %d", kshape(up), kshape(x), j);
	int64_t B = x->dims[0];
	if (wi && (!ir_dtype_is_int(wi->dtype) || wi->rank != 1 || wi->dims[0] != B))
		return kerr(k, "write_indices must be an integer tensor of [%lld], not %s", (long long)B, kshape(wi));
	struct ir_tensor *o = copy_out(k, x);
	if (!o)
		return IR_ERR;
	int64_t L = x->dims[ax], S = up->dims[ax];
	uint64_t outer = knumel(ax, x->dims), inner = knumel(r - ax - 1, x->dims + ax + 1);
	uint64_t per_batch = B ? outer / (uint64_t)B : 0;
	struct mover m;
	mv_init(&m, x->dtype, o, up);
	for (uint64_t p = 0; p < outer; p++) {
		uint64_t b = p / (per_batch ? per_batch : 1);
		int64_t w = wi ? kldi(wi->dtype, kdata(wi), b) : 0;
		for (int64_t s = 0; s < S; s++) {
			int64_t pos;
			if (circ && L) {
				/* reduce first so that w + s cannot overflow */
				pos = w % L;
				pos = (pos < 0 ? pos + L : pos) + s % L;
				pos %= L;
			} else {
				if (w < 0 || w >= L - s)
					return kerr(k, "write index %lld + %lld is out of range for a dim of %lld",
						    (long long)w, (long long)s, (long long)L);
				pos = w + s;
			}
			mv_block(&m, (p * (uint64_t)L + (uint64_t)pos) * inner, (p * (uint64_t)S + (uint64_t)s) * inner,
				 inner);
		}
	}
	return mv_done(k, &m);
}

/* ------------------------------------------------------------------------ */
/* OneHot, Compress, NonZero                                                 */
/* ------------------------------------------------------------------------ */

static int k_onehot(struct cpu_kctx *k)
{
	const struct ir_tensor *ix = kin_req(k, 0), *td = kin_req(k, 1), *tv = kin_req(k, 2);
	if (!ix || !td || !tv)
		return IR_ERR;
	if (td->numel != 1 || tv->numel != 2)
		return kerr(k, "depth must have one element and values two, not %s and %s", kshape(td), kshape(tv));
	if (ix->dtype == IR_STRING || td->dtype == IR_STRING)
		return kerr(k, "indices and depth must be numbers");
	double dd = kld(td->dtype, kdata(td), 0);
	if (!(dd >= 1) || dd > 9e15)
		return kerr(k, "depth %g must be >= 1", dd);
	int64_t depth = (int64_t)dd;
	int r = ix->rank + 1, ax;
	if (r > IR_MAX_RANK)
		return kerr(k, "the output rank is above %d", IR_MAX_RANK);
	int64_t a = kattr_i(k, "axis", -1);
	if (a < -r || a >= r)
		return kerr(k, "axis %lld is out of range for rank %d", (long long)a, r);
	ax = (int)(a < 0 ? a + r : a);
	int64_t od[IR_MAX_RANK];
	for (int i = 0, j = 0; i < r; i++)
		od[i] = i == ax ? depth : ix->dims[j++];
	struct ir_tensor *o = kout(k, 0, tv->dtype, r, od);
	if (!o)
		return IR_ERR;
	uint64_t outer = knumel(ax, ix->dims), inner = knumel(ix->rank - ax, ix->dims + ax);
	struct mover m;
	mv_init(&m, tv->dtype, o, tv);
	for (uint64_t p = 0; p < outer; p++) {
		for (int64_t d = 0; d < depth; d++) {
			uint64_t di = (p * (uint64_t)depth + (uint64_t)d) * inner;
			for (uint64_t i = 0; i < inner; i++) {
				double v = kld(ix->dtype, kdata(ix), p * inner + i);
				if (v < 0)
					v += (double)depth;
				/* out-of-range indices give a row of off values */
				bool hit = v >= 0 && v < (double)depth && (int64_t)v == d;
				mv(&m, di + i, hit ? 1 : 0);
			}
		}
	}
	return mv_done(k, &m);
}

/* Whether element i is true (non-zero; strings: not empty). */
static bool is_true(const struct ir_tensor *t, uint64_t i)
{
	if (t->dtype == IR_STRING)
		return t->strings[i].len != 0;
	return kld(t->dtype, kdata(t), i) != 0;
}

static int k_compress(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *c = kin_req(k, 1);
	if (!x || !c)
		return IR_ERR;
	if (c->rank != 1 || c->dtype == IR_STRING)
		return kerr(k, "condition must be a 1-D tensor, not %s", kshape(c));
	int ax = -1, r;
	int64_t od[IR_MAX_RANK];
	uint64_t outer, inner, dim;
	if (kattr_has(k, "axis")) {
		if (kaxis(k, kattr_i(k, "axis", 0), x->rank, &ax))
			return IR_ERR;
		if (x->rank < 1)
			return kerr(k, "cannot compress a scalar along an axis");
		r = x->rank;
		memcpy(od, x->dims, sizeof(int64_t) * (size_t)r);
		outer = knumel(ax, x->dims);
		inner = knumel(r - ax - 1, x->dims + ax + 1);
		dim = (uint64_t)x->dims[ax];
	} else {
		r = 1;
		outer = inner = 1;
		dim = x->numel;
	}
	int64_t kept = 0;
	for (uint64_t i = 0; i < c->numel; i++) {
		if (!is_true(c, i))
			continue;
		if (i >= dim)
			return kerr(k, "condition is true at %llu, past the %llu slices", (unsigned long long)i,
				    (unsigned long long)dim);
		kept++;
	}
	od[ax < 0 ? 0 : ax] = kept;
	struct ir_tensor *o = kout(k, 0, x->dtype, r, od);
	if (!o)
		return IR_ERR;
	struct mover m;
	mv_init(&m, x->dtype, o, x);
	uint64_t di = 0;
	for (uint64_t p = 0; p < outer; p++)
		for (uint64_t i = 0; i < c->numel && i < dim; i++)
			if (is_true(c, i)) {
				mv_block(&m, di, (p * dim + i) * inner, inner);
				di += inner;
			}
	return mv_done(k, &m);
}

static int k_nonzero(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t nnz = 0;
	for (uint64_t i = 0; i < x->numel; i++)
		nnz += is_true(x, i);
	int r = x->rank ? x->rank : 1;
	int64_t od[2] = { r, nnz };
	struct ir_tensor *o = kout(k, 0, IR_INT64, 2, od);
	if (!o)
		return IR_ERR;
	int64_t *y = kwdata(o), idx[IR_MAX_RANK] = { 0 }, col = 0;
	for (uint64_t i = 0; i < x->numel; i++) {
		if (is_true(x, i)) {
			for (int j = 0; j < r; j++)
				y[j * nnz + col] = x->rank ? idx[j] : 0;
			col++;
		}
		for (int j = x->rank - 1; j >= 0; j--) {
			if (++idx[j] < x->dims[j])
				break;
			idx[j] = 0;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Sorting: Unique, TopK                                                     */
/* ------------------------------------------------------------------------ */

/* Compares elements i and j of a tensor's data: <0, 0, >0. NaN sorts last
 * and equals NaN; uint64 compares unsigned; strings by bytes. */
static int cmp_elem(const struct ir_tensor *t, uint64_t i, uint64_t j)
{
	int dt = t->dtype;
	if (dt == IR_STRING) {
		const struct ir_bytes *a = &t->strings[i], *b = &t->strings[j];
		size_t n = a->len < b->len ? a->len : b->len;
		int c = n ? memcmp(a->data, b->data, n) : 0;
		if (c)
			return c;
		return a->len < b->len ? -1 : a->len > b->len;
	}
	if (dt == IR_UINT64) {
		const uint64_t *p = kdata(t);
		uint64_t a = p[i], b = p[j];
		return a < b ? -1 : a > b;
	}
	if (ir_dtype_is_int(dt) || dt == IR_BOOL) {
		int64_t a = kldi(dt, kdata(t), i), b = kldi(dt, kdata(t), j);
		return a < b ? -1 : a > b;
	}
	double a = kld(dt, kdata(t), i), b = kld(dt, kdata(t), j);
	if (isnan(a) || isnan(b))
		return isnan(a) - isnan(b);
	return a < b ? -1 : a > b;
}

typedef int (*cmp_fn)(const void *ctx, int64_t a, int64_t b);

/* Stable bottom-up merge sort of a[0..n) with tmp[n] as scratch. */
static void msort(int64_t *a, int64_t *tmp, uint64_t n, cmp_fn cmp, const void *ctx)
{
	int64_t *src = a, *dst = tmp;
	for (uint64_t w = 1; w < n; w *= 2) {
		for (uint64_t lo = 0; lo < n; lo += 2 * w) {
			uint64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			uint64_t i = lo, j = mid, o = lo;
			while (i < mid && j < hi)
				dst[o++] = cmp(ctx, src[j], src[i]) < 0 ? src[j++] : src[i++];
			while (i < mid)
				dst[o++] = src[i++];
			while (j < hi)
				dst[o++] = src[j++];
		}
		int64_t *s = src;
		src = dst;
		dst = s;
	}
	if (src != a)
		memcpy(a, src, sizeof(int64_t) * n);
}

/* Slices of a tensor along an axis (or its elements when axis < 0). */
struct slices {
	const struct ir_tensor *t;
	uint64_t outer, dim, inner;
};

static int cmp_slices(const void *ctx, int64_t a, int64_t b)
{
	const struct slices *s = ctx;
	for (uint64_t p = 0; p < s->outer; p++)
		for (uint64_t i = 0; i < s->inner; i++) {
			int c = cmp_elem(s->t, (p * s->dim + (uint64_t)a) * s->inner + i,
					 (p * s->dim + (uint64_t)b) * s->inner + i);
			if (c)
				return c;
		}
	return 0;
}

static int cmp_first(const void *ctx, int64_t a, int64_t b)
{
	const int64_t *first = ctx;
	return first[a] < first[b] ? -1 : first[a] > first[b];
}

static int k_unique(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	struct slices s = { x, 1, x->numel, 1 };
	int ax = -1;
	if (kattr_has(k, "axis")) {
		if (x->rank < 1)
			return kerr(k, "cannot take unique slices of a scalar");
		if (kaxis(k, kattr_i(k, "axis", 0), x->rank, &ax))
			return IR_ERR;
		s.outer = knumel(ax, x->dims);
		s.dim = (uint64_t)x->dims[ax];
		s.inner = knumel(x->rank - ax - 1, x->dims + ax + 1);
	}
	bool sorted = kattr_i(k, "sorted", 1) != 0;
	uint64_t n = s.dim;
	int rc = IR_ERR;
	int64_t *ord = malloc(sizeof(int64_t) * (n ? n : 1)), *tmp = malloc(sizeof(int64_t) * (n ? n : 1));
	int64_t *grp = malloc(sizeof(int64_t) * (n ? n : 1)), *first = malloc(sizeof(int64_t) * (n ? n : 1));
	int64_t *cnt = malloc(sizeof(int64_t) * (n ? n : 1)), *rank = malloc(sizeof(int64_t) * (n ? n : 1));
	if (!ord || !tmp || !grp || !first || !cnt || !rank) {
		ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < n; i++)
		ord[i] = (int64_t)i;
	msort(ord, tmp, n, cmp_slices, &s);
	/* groups in sorted order: first occurrence (stable sort: the smallest index) and count */
	int64_t ng = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (i == 0 || cmp_slices(&s, ord[i - 1], ord[i])) {
			first[ng] = ord[i];
			cnt[ng] = 0;
			ng++;
		}
		grp[ord[i]] = ng - 1;
		cnt[ng - 1]++;
	}
	/* the output order of the groups: sorted, or by first occurrence */
	for (int64_t g = 0; g < ng; g++)
		tmp[g] = g;
	if (!sorted)
		msort(tmp, rank, (uint64_t)ng, cmp_first, first);
	for (int64_t g = 0; g < ng; g++)
		rank[tmp[g]] = g;   /* rank[group] = output position */
	int64_t od[IR_MAX_RANK];
	int r = ax < 0 ? 1 : x->rank;
	if (ax >= 0)
		memcpy(od, x->dims, sizeof(int64_t) * (size_t)r);
	od[ax < 0 ? 0 : ax] = ng;
	struct ir_tensor *y = kout(k, 0, x->dtype, r, od);
	if (!y)
		goto out;
	struct mover m;
	mv_init(&m, x->dtype, y, x);
	for (int64_t g = 0; g < ng; g++) {
		int64_t src = first[tmp[g]];
		for (uint64_t p = 0; p < s.outer; p++)
			mv_block(&m, (p * (uint64_t)ng + (uint64_t)g) * s.inner, (p * s.dim + (uint64_t)src) * s.inner,
				 s.inner);
	}
	if (mv_done(k, &m))
		goto out;
	if (k->n_out > 1) {
		struct ir_tensor *ti = kout(k, 1, IR_INT64, 1, &ng);
		int64_t nn = (int64_t)n;
		struct ir_tensor *tv = ti && k->n_out > 2 ? kout(k, 2, IR_INT64, 1, &nn) : NULL;
		struct ir_tensor *tc = tv && k->n_out > 3 ? kout(k, 3, IR_INT64, 1, &ng) : NULL;
		if (!ti || (k->n_out > 2 && !tv) || (k->n_out > 3 && !tc))
			goto out;
		for (int64_t g = 0; g < ng; g++) {
			((int64_t *)kwdata(ti))[g] = first[tmp[g]];
			if (tc)
				((int64_t *)kwdata(tc))[g] = cnt[tmp[g]];
		}
		for (uint64_t i = 0; tv && i < n; i++)
			((int64_t *)kwdata(tv))[i] = rank[grp[i]];
	}
	rc = 0;
out:
	free(ord);
	free(tmp);
	free(grp);
	free(first);
	free(cnt);
	free(rank);
	return rc;
}

/* One line of TopK: elements base + i * stride of t. */
struct topk_line {
	const struct ir_tensor *t;
	uint64_t base, stride;
	bool largest;
};

/* Best first; equal values keep the lower index first (the sort is stable). */
static int cmp_topk(const void *ctx, int64_t a, int64_t b)
{
	const struct topk_line *l = ctx;
	int c = cmp_elem(l->t, l->base + (uint64_t)a * l->stride, l->base + (uint64_t)b * l->stride);
	return l->largest ? -c : c;
}

static int k_topk(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t kk;
	if (k->opset < 10) {
		if (!kattr_has(k, "k"))
			return kerr(k, "attribute 'k' is missing");
		kk = kattr_i(k, "k", 0);
	} else {
		const struct ir_tensor *tk = kin_req(k, 1);
		if (!tk)
			return IR_ERR;
		if (tk->numel != 1 || !ir_dtype_is_int(tk->dtype))
			return kerr(k, "k must be one integer, not %s %s", ir_dtype_name(tk->dtype), kshape(tk));
		kk = kldi(tk->dtype, kdata(tk), 0);
	}
	int ax;
	if (x->rank < 1)
		return kerr(k, "input must have rank >= 1");
	if (kaxis(k, kattr_i(k, "axis", -1), x->rank, &ax))
		return IR_ERR;
	int64_t dim = x->dims[ax];
	if (kk < 0 || kk > dim)
		return kerr(k, "k %lld is out of range for an axis of %lld", (long long)kk, (long long)dim);
	if (x->dtype == IR_STRING)
		return kerr(k, "string inputs are not supported");
	int64_t od[IR_MAX_RANK];
	memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->rank);
	od[ax] = kk;
	struct ir_tensor *ov = kout(k, 0, x->dtype, x->rank, od), *oi = ov ? kout(k, 1, IR_INT64, x->rank, od) : NULL;
	if (!ov || !oi)
		return IR_ERR;
	uint64_t outer = knumel(ax, x->dims), inner = knumel(x->rank - ax - 1, x->dims + ax + 1);
	int64_t *ord = malloc(sizeof(int64_t) * (size_t)(dim ? dim : 1)), *tmp = malloc(sizeof(int64_t) * (size_t)(dim ? dim : 1));
	if (!ord || !tmp) {
		free(ord);
		free(tmp);
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	}
	struct topk_line l = { x, 0, inner, kattr_i(k, "largest", 1) != 0 };
	struct mover m;
	mv_init(&m, x->dtype, ov, x);
	int rc = 0;
	for (uint64_t p = 0; p < outer && !rc; p++) {
		for (uint64_t i = 0; i < inner; i++) {
			l.base = p * (uint64_t)dim * inner + i;
			for (int64_t j = 0; j < dim; j++)
				ord[j] = j;
			msort(ord, tmp, (uint64_t)dim, cmp_topk, &l);
			for (int64_t j = 0; j < kk; j++) {
				uint64_t di = (p * (uint64_t)kk + (uint64_t)j) * inner + i;
				mv(&m, di, l.base + (uint64_t)ord[j] * inner);
				((int64_t *)kwdata(oi))[di] = ord[j];
			}
		}
		rc = kstop(k);
	}
	free(ord);
	free(tmp);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* CumSum, CumProd, Col2Im                                                   */
/* ------------------------------------------------------------------------ */

static int cumulative(struct cpu_kctx *k, bool prod)
{
	const struct ir_tensor *x = kin_req(k, 0), *ta = kin_req(k, 1);
	if (!x || !ta)
		return IR_ERR;
	if (ta->numel != 1 || !ir_dtype_is_int(ta->dtype))
		return kerr(k, "axis must be one integer, not %s %s", ir_dtype_name(ta->dtype), kshape(ta));
	int ax, dt = x->dtype;
	if (x->rank < 1)
		return kerr(k, "input must have rank >= 1");
	if (kaxis(k, kldi(ta->dtype, kdata(ta), 0), x->rank, &ax))
		return IR_ERR;
	bool isint = ir_dtype_is_int(dt);
	if (!isint && !ir_dtype_is_float(dt))
		return kerr(k, "type %s is not supported", ir_dtype_name(dt));
	bool excl = kattr_i(k, "exclusive", 0) != 0, rev = kattr_i(k, "reverse", 0) != 0;
	struct ir_tensor *o = kout(k, 0, dt, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	uint64_t outer = knumel(ax, x->dims), inner = knumel(x->rank - ax - 1, x->dims + ax + 1);
	int64_t dim = x->dims[ax];
	const void *src = kdata(x);
	void *dst = kwdata(o);
	for (uint64_t p = 0; p < outer; p++) {
		for (uint64_t i = 0; i < inner; i++) {
			/* accumulators: int64 wrapping, double for float64, float for narrower floats */
			uint64_t ai = prod ? 1 : 0;
			double ad = prod ? 1 : 0;
			float af = prod ? 1 : 0;
			for (int64_t s = 0; s < dim; s++) {
				int64_t j = rev ? dim - 1 - s : s;
				uint64_t e = (p * (uint64_t)dim + (uint64_t)j) * inner + i;
				if (isint) {
					uint64_t v = (uint64_t)kldi(dt, src, e);
					if (excl)
						ksti(dt, dst, e, (int64_t)ai);
					ai = prod ? ai * v : ai + v;
					if (!excl)
						ksti(dt, dst, e, (int64_t)ai);
				} else if (dt == IR_DOUBLE) {
					double v = kld(dt, src, e);
					if (excl)
						kst(dt, dst, e, ad);
					ad = prod ? ad * v : ad + v;
					if (!excl)
						kst(dt, dst, e, ad);
				} else {
					float v = (float)kld(dt, src, e);
					if (excl)
						kst(dt, dst, e, af);
					af = prod ? af * v : af + v;
					if (!excl)
						kst(dt, dst, e, af);
				}
			}
		}
	}
	return 0;
}

static int k_cumsum(struct cpu_kctx *k)
{
	return cumulative(k, false);
}

static int k_cumprod(struct cpu_kctx *k)
{
	return cumulative(k, true);
}

static int k_col2im(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ti = kin_req(k, 1), *tb = kin_req(k, 2);
	if (!x || !ti || !tb)
		return IR_ERR;
	int64_t img[IR_MAX_RANK], blk[IR_MAX_RANK], dil[IR_MAX_RANK], pads[2 * IR_MAX_RANK], str[IR_MAX_RANK];
	int64_t nblk[IR_MAX_RANK];
	int nd = kread_ints(k, ti, img, IR_MAX_RANK - 2, "image_shape"), nb;
	if (nd < 0 || (nb = kread_ints(k, tb, blk, IR_MAX_RANK - 2, "block_shape")) < 0)
		return IR_ERR;
	if (nd != nb || nd < 1)
		return kerr(k, "image_shape and block_shape must have one length >= 1, not %d and %d", nd, nb);
	if (x->rank != 3)
		return kerr(k, "input must be 3-D [N, C*prod(block), L], not %s", kshape(x));
	if (!ir_dtype_is_float(x->dtype))
		return kerr(k, "type %s is not supported", ir_dtype_name(x->dtype));
	int n;
	const int64_t *a;
	for (int i = 0; i < nd; i++) {
		dil[i] = 1;
		str[i] = 1;
		pads[i] = pads[nd + i] = 0;
	}
	if ((a = kattr_ints(k, "dilations", &n))) {
		if (n != nd)
			return kerr(k, "dilations has %d values for %d dims", n, nd);
		memcpy(dil, a, sizeof(int64_t) * (size_t)n);
	}
	if ((a = kattr_ints(k, "strides", &n))) {
		if (n != nd)
			return kerr(k, "strides has %d values for %d dims", n, nd);
		memcpy(str, a, sizeof(int64_t) * (size_t)n);
	}
	if ((a = kattr_ints(k, "pads", &n))) {
		if (n != 2 * nd)
			return kerr(k, "pads has %d values for %d dims", n, nd);
		memcpy(pads, a, sizeof(int64_t) * (size_t)n);
	}
	uint64_t kprod = 1, lprod = 1;
	for (int i = 0; i < nd; i++) {
		if (img[i] < 0 || blk[i] < 1 || dil[i] < 1 || str[i] < 1 || pads[i] < 0 || pads[nd + i] < 0 ||
		    img[i] > (INT64_MAX >> 4) || blk[i] > (INT64_MAX >> 4) || dil[i] > (INT64_MAX >> 4) ||
		    pads[i] > (INT64_MAX >> 4) || pads[nd + i] > (INT64_MAX >> 4))
			return kerr(k, "image_shape, block_shape, dilations, strides or pads at dim %d are invalid", i);
		int64_t eff;
		if (!__builtin_mul_overflow(dil[i], blk[i] - 1, &eff) && eff < (INT64_MAX >> 2))
			eff += 1;
		else
			return kerr(k, "the block at dim %d is too large", i);
		int64_t span = img[i] + pads[i] + pads[nd + i] - eff;
		if (span < 0)
			return kerr(k, "the block does not fit the padded image at dim %d", i);
		nblk[i] = span / str[i] + 1;
		if (__builtin_mul_overflow(kprod, (uint64_t)blk[i], &kprod) ||
		    __builtin_mul_overflow(lprod, (uint64_t)nblk[i], &lprod))
			return kerr(k, "the block counts overflow");
	}
	int64_t N = x->dims[0], CK = x->dims[1], L = x->dims[2];
	if ((uint64_t)CK % kprod || (uint64_t)L != lprod)
		return kerr(k, "input %s does not match %llu block elements and %llu blocks", kshape(x),
			    (unsigned long long)kprod, (unsigned long long)lprod);
	int64_t C = (int64_t)((uint64_t)CK / kprod), od[IR_MAX_RANK];
	od[0] = N;
	od[1] = C;
	memcpy(od + 2, img, sizeof(int64_t) * (size_t)nd);
	struct ir_tensor *o = kout(k, 0, x->dtype, nd + 2, od);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	double *acc = calloc(o->numel, sizeof(double));
	if (!acc)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	uint64_t isz = knumel(nd, img);
	int64_t kp[IR_MAX_RANK], lp[IR_MAX_RANK];
	for (int64_t ni = 0; ni < N; ni++) {
		for (int64_t c = 0; c < C; c++) {
			double *plane = acc + (uint64_t)(ni * C + c) * isz;
			for (int i = 0; i < nd; i++)
				kp[i] = 0;
			for (uint64_t kidx = 0; kidx < kprod; kidx++) {
				for (int i = 0; i < nd; i++)
					lp[i] = 0;
				uint64_t row = ((uint64_t)ni * (uint64_t)CK + (uint64_t)c * kprod + kidx) * (uint64_t)L;
				for (uint64_t lidx = 0; lidx < lprod; lidx++) {
					uint64_t off = 0;
					bool in = true;
					for (int i = 0; i < nd && in; i++) {
						int64_t pos = lp[i] * str[i] - pads[i] + kp[i] * dil[i];
						in = pos >= 0 && pos < img[i];
						off = off * (uint64_t)img[i] + (uint64_t)pos;
					}
					if (in)
						plane[off] += kld(x->dtype, kdata(x), row + lidx);
					for (int i = nd - 1; i >= 0; i--) {
						if (++lp[i] < nblk[i])
							break;
						lp[i] = 0;
					}
				}
				for (int i = nd - 1; i >= 0; i--) {
					if (++kp[i] < blk[i])
						break;
					kp[i] = 0;
				}
			}
		}
	}
	for (uint64_t i = 0; i < o->numel; i++)
		kst(x->dtype, kwdata(o), i, acc[i]);
	free(acc);
	return 0;
}

const struct cpu_kernel cpu_kernels_index[] = {
	{ IR_OP_Gather, k_gather, NULL },
	{ IR_OP_GatherElements, k_gather_elements, NULL },
	{ IR_OP_GatherND, k_gather_nd, NULL },
	{ IR_OP_Scatter, k_scatter_elements, NULL },
	{ IR_OP_ScatterElements, k_scatter_elements, NULL },
	{ IR_OP_ScatterND, k_scatter_nd, NULL },
	{ IR_OP_TensorScatter, k_tensor_scatter, NULL },
	{ IR_OP_OneHot, k_onehot, NULL },
	{ IR_OP_Compress, k_compress, NULL },
	{ IR_OP_NonZero, k_nonzero, NULL },
	{ IR_OP_Unique, k_unique, NULL },
	{ IR_OP_TopK, k_topk, NULL },
	{ IR_OP_CumSum, k_cumsum, NULL },
	{ IR_OP_CumProd, k_cumprod, NULL },
	{ IR_OP_Col2Im, k_col2im, NULL },
	{ -1, NULL, NULL },
};
