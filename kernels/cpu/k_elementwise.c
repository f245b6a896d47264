/*
 * k_elementwise.c - CPU kernels: elementwise ops (unary math and
 * activations, binary arithmetic with numpy broadcasting, comparisons,
 * logic and bit ops, the variadic Sum/Mean/Max/Min, Clip, Where).
 *
 * Values are computed in one of four domains chosen once per node:
 * float32 (tight loops for the common ops, used by most models), double
 * (every other float type: loaded with kld, computed in double, rounded
 * once by kst), exact int64 (integer types: wrapping arithmetic, unsigned
 * types compared as unsigned), and strings (Equal, Where).
 *
 * Broadcasting: the output shape is split into rows (the innermost dim,
 * after dropping 1s and merging dims that are contiguous for every
 * operand); a row kernel runs over each row with per-operand strides of 0
 * (broadcast) or 1. Same-shape and scalar operands thus become one long row.
 */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

/* --- dtype classes --- */

static bool is_unsigned(int dt)
{
	switch (dt) {
	case IR_UINT8: case IR_UINT16: case IR_UINT32: case IR_UINT64:
	case IR_UINT4: case IR_UINT2: case IR_BOOL:
		return true;
	default:
		return false;
	}
}

static bool is_intlike(int dt)
{
	return ir_dtype_is_int(dt) || dt == IR_BOOL;
}

/* Numeric element types the double/int domains can load and store. */
static bool is_numeric(int dt)
{
	return ir_dtype_is_float(dt) || is_intlike(dt);
}

/* --- broadcasting plans --- */

#define MAXOPS 3

/* An operand as seen by a plan: data and dims (right-aligned to the output). */
struct bview {
	int dtype;
	const void *data;
	int rank;
	const int64_t *dims;
	const struct ir_tensor *t;   /* for strings; NULL otherwise */
};

static struct bview view_of(const struct ir_tensor *t)
{
	struct bview v = { t->dtype, kdata(t), t->rank, t->dims, t };
	return v;
}

/* The output shape split into rows: dims[rank-1] is the row length. */
struct plan {
	int rank;   /* >= 1 */
	int nops;
	int64_t dims[IR_MAX_RANK];
	int64_t st[MAXOPS][IR_MAX_RANK];
};

static void plan_make(struct plan *p, int rank, const int64_t *dims, int nops, const struct bview *ops)
{
	int64_t st[MAXOPS][IR_MAX_RANK];
	p->nops = nops;
	for (int o = 0; o < nops; o++) {
		int64_t s = 1;
		for (int j = rank - 1; j >= 0; j--) {
			int oj = j - (rank - ops[o].rank);
			if (oj < 0 || ops[o].dims[oj] == 1) {
				st[o][j] = 0;
			} else {
				st[o][j] = s;
				s *= ops[o].dims[oj];
			}
		}
	}
	/* drop dims of size 1, then merge a dim into the one before it when
	 * every operand walks both as one contiguous (or broadcast) run */
	int r = 0;
	for (int j = 0; j < rank; j++) {
		if (dims[j] == 1)
			continue;
		bool merge = r > 0;
		for (int o = 0; o < nops && merge; o++)
			if (p->st[o][r - 1] != st[o][j] * dims[j])
				merge = false;
		if (merge) {
			p->dims[r - 1] *= dims[j];
			for (int o = 0; o < nops; o++)
				p->st[o][r - 1] = st[o][j];
			continue;
		}
		p->dims[r] = dims[j];
		for (int o = 0; o < nops; o++)
			p->st[o][r] = st[o][j];
		r++;
	}
	if (r == 0) {
		p->dims[0] = 1;
		for (int o = 0; o < nops; o++)
			p->st[o][0] = 0;
		r = 1;
	}
	p->rank = r;
}

/* A row kernel: n elements; output elements from yoff (contiguous);
 * operand o from off[o] with stride st[o]. */
typedef void (*row_fn)(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st);

/*
 * Threads split the output into blocks of EW_BLOCK elements (so range
 * edges fall on multiples of any vector width), at least EW_GRAIN elements
 * (EW_GRAIN_SLOW for the costly functions) a range.
 */
#define EW_BLOCK 64
#define EW_GRAIN (8192 / EW_BLOCK)
#define EW_GRAIN_SLOW (2048 / EW_BLOCK)

struct plan_job {
	const struct plan *p;
	row_fn fn;
	void *ctx;
	int64_t numel;
};

/* fn over the output elements [b, e) of the plan, row piece by row piece */
static void plan_range(const struct plan_job *j, int64_t b, int64_t e)
{
	const struct plan *p = j->p;
	int64_t idx[IR_MAX_RANK] = { 0 }, off[MAXOPS] = { 0 }, inner[MAXOPS], cur[MAXOPS];
	int outer = p->rank - 1;
	int64_t n = p->dims[outer], row = b / n, col = b % n, yoff = b;
	for (int o = 0; o < p->nops; o++)
		inner[o] = p->st[o][outer];
	for (int jd = outer - 1; jd >= 0; jd--) {
		idx[jd] = row % p->dims[jd];
		row /= p->dims[jd];
		for (int o = 0; o < p->nops; o++)
			off[o] += idx[jd] * p->st[o][jd];
	}
	while (yoff < e) {
		int64_t len = n - col < e - yoff ? n - col : e - yoff;
		for (int o = 0; o < p->nops; o++)
			cur[o] = off[o] + col * inner[o];
		j->fn(j->ctx, len, yoff, cur, inner);
		yoff += len;
		col = 0;
		/* next row: odometer over the outer dims */
		for (int jd = outer - 1; jd >= 0; jd--) {
			if (++idx[jd] < p->dims[jd]) {
				for (int o = 0; o < p->nops; o++)
					off[o] += p->st[o][jd];
				break;
			}
			idx[jd] = 0;
			for (int o = 0; o < p->nops; o++)
				off[o] -= p->st[o][jd] * (p->dims[jd] - 1);
		}
	}
}

static void plan_blocks(void *ctx, int64_t b, int64_t e, int worker)
{
	const struct plan_job *j = ctx;
	(void)worker;
	plan_range(j, b * EW_BLOCK, e * EW_BLOCK < j->numel ? e * EW_BLOCK : j->numel);
}

/* Runs fn over every row of the plan, on the pool unless `serial`; 0 or
 * IR_EINTR. */
static int plan_run(struct cpu_kctx *k, const struct plan *p, row_fn fn, void *ctx, bool serial)
{
	struct plan_job j = { p, fn, ctx, 1 };
	for (int d = 0; d < p->rank; d++)
		j.numel *= p->dims[d];
	if (serial) {
		plan_range(&j, 0, j.numel);
		return 0;
	}
	return kpar(k, (j.numel + EW_BLOCK - 1) / EW_BLOCK, EW_GRAIN, plan_blocks, &j);
}

/* numpy broadcasting of views; error when they do not broadcast. */
static int bcast_views(struct cpu_kctx *k, int n, const struct bview *v, int *rank, int64_t *dims)
{
	int r = 0;
	for (int i = 0; i < n; i++)
		if (v[i].rank > r)
			r = v[i].rank;
	for (int j = 0; j < r; j++)
		dims[j] = 1;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < v[i].rank; j++) {
			int64_t d = v[i].dims[j], *o = &dims[r - v[i].rank + j];
			if (d == *o || d == 1)
				continue;
			if (*o == 1) {
				*o = d;
				continue;
			}
			return kerr(k, "shapes do not broadcast: input %d has %lld at axis %d, another input has %lld",
				    i, (long long)d, j, (long long)*o);
		}
	}
	*rank = r;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Binary ops                                                                */
/* ------------------------------------------------------------------------ */

enum bop {
	B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MOD, B_FMOD, B_MAX, B_MIN, B_PRELU,
	B_SHL, B_SHR, B_BAND, B_BOR, B_BXOR,
	B_AND, B_OR, B_XOR,   /* logical: bool out */
	B_EQ, B_LT, B_LE, B_GT, B_GE,   /* comparisons: bool out */
};

static bool bop_is_bool_out(int op)
{
	return op >= B_AND;
}

/* The op in double. Max/Min propagate NaN like numpy. */
static inline __attribute__((always_inline)) double bop_f(int op, double a, double b)
{
	switch (op) {
	case B_ADD: return a + b;
	case B_SUB: return a - b;
	case B_MUL: return a * b;
	case B_DIV: return a / b;
	case B_POW: return pow(a, b);
	case B_MOD: case B_FMOD: return fmod(a, b);   /* floats: C fmod (the reference's np.fmod) */
	case B_MAX: return a != a ? a : b != b ? b : a >= b ? a : b;
	case B_MIN: return a != a ? a : b != b ? b : a <= b ? a : b;
	case B_PRELU: return a < 0 ? a * b : a;
	case B_AND: return (a != 0) && (b != 0);
	case B_OR: return (a != 0) || (b != 0);
	case B_XOR: return (a != 0) != (b != 0);
	case B_EQ: return a == b;
	case B_LT: return a < b;
	case B_LE: return a <= b;
	case B_GT: return a > b;
	case B_GE: return a >= b;
	default: return 0;   /* bit ops have no float form (rejected earlier) */
	}
}

/* a^b for integers, wrapping; negative exponents give 1/a^|b| truncated. */
static int64_t ipow(int64_t a, int64_t b)
{
	if (b < 0)
		return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
	uint64_t r = 1, x = (uint64_t)a, e = (uint64_t)b;
	while (e) {
		if (e & 1)
			r *= x;
		x *= x;
		e >>= 1;
	}
	return (int64_t)r;
}

/* The op on integers held in int64 (unsigned types: the same bits, seen
 * as uint64 where the sign matters); the store wraps to the type's width.
 * Division by zero gives 0 (numpy's result, without its warning). */
static inline __attribute__((always_inline)) int64_t bop_i(int op, int64_t a, int64_t b, bool uns)
{
	uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
	switch (op) {
	case B_ADD: return (int64_t)(ua + ub);
	case B_SUB: return (int64_t)(ua - ub);
	case B_MUL: return (int64_t)(ua * ub);
	case B_DIV:
		if (b == 0)
			return 0;
		if (uns)
			return (int64_t)(ua / ub);
		if (b == -1)
			return (int64_t)(0 - ua);   /* INT64_MIN / -1 wraps */
		return a / b;   /* truncates toward zero, like C and ONNX */
	case B_MOD:   /* Python's rule: the result has the divisor's sign */
		if (b == 0)
			return 0;
		if (uns)
			return (int64_t)(ua % ub);
		if (b == -1)
			return 0;
		{
			int64_t r = a % b;
			if (r != 0 && ((r < 0) != (b < 0)))
				r += b;
			return r;
		}
	case B_FMOD:   /* C's rule: the result has the dividend's sign */
		if (b == 0)
			return 0;
		if (uns)
			return (int64_t)(ua % ub);
		return b == -1 ? 0 : a % b;
	case B_POW: return ipow(a, b);
	case B_MAX: return (uns ? ua >= ub : a >= b) ? a : b;
	case B_MIN: return (uns ? ua <= ub : a <= b) ? a : b;
	case B_PRELU: return !uns && a < 0 ? (int64_t)(ua * ub) : a;
	case B_SHL: return ub >= 64 ? 0 : (int64_t)(ua << ub);
	case B_SHR: return ub >= 64 ? 0 : (int64_t)(ua >> ub);
	case B_BAND: return a & b;
	case B_BOR: return a | b;
	case B_BXOR: return a ^ b;
	case B_AND: return a && b;
	case B_OR: return a || b;
	case B_XOR: return (a != 0) != (b != 0);
	case B_EQ: return a == b;
	case B_LT: return uns ? ua < ub : a < b;
	case B_LE: return uns ? ua <= ub : a <= b;
	case B_GT: return uns ? ua > ub : a > b;
	case B_GE: return uns ? ua >= ub : a >= b;
	default: return 0;
	}
}

enum domain { D_F32, D_I64, D_F32_CMP, D_I64_CMP, D_DOUBLE, D_INT, D_STRING };

struct bctx {
	int op;
	struct bview a, b;
	int ydt;
	void *y;
	struct ir_tensor *yt;   /* for string outputs (none here) */
	bool uns;               /* integer domain: operands are unsigned */
};

/* One loop over a row with operands x (from a) and z (from b); strides are
 * 0 or 1 after planning, so the common cases get their own loops. */
#define ROW_LOOP(T, A, B, Y, EXPR)                                                     \
	do {                                                                           \
		if (as == 1 && bs == 1) {                                              \
			for (int64_t i = 0; i < n; i++) {                              \
				T x = (A)[i], z = (B)[i];                              \
				(Y)[i] = (EXPR);                                       \
			}                                                              \
		} else if (as == 1 && bs == 0) {                                       \
			T z = (B)[0];                                                  \
			for (int64_t i = 0; i < n; i++) {                              \
				T x = (A)[i];                                          \
				(Y)[i] = (EXPR);                                       \
			}                                                              \
		} else if (as == 0 && bs == 1) {                                       \
			T x = (A)[0];                                                  \
			for (int64_t i = 0; i < n; i++) {                              \
				T z = (B)[i];                                          \
				(Y)[i] = (EXPR);                                       \
			}                                                              \
		} else {                                                               \
			for (int64_t i = 0; i < n; i++) {                              \
				T x = (A)[i * as], z = (B)[i * bs];                    \
				(Y)[i] = (EXPR);                                       \
			}                                                              \
		}                                                                      \
	} while (0)

static void row_f32(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	const struct bctx *c = ctx;
	const float *a = (const float *)c->a.data + off[0], *b = (const float *)c->b.data + off[1];
	float *y = (float *)c->y + yoff;
	int64_t as = st[0], bs = st[1];
	switch (c->op) {
	case B_ADD: ROW_LOOP(float, a, b, y, x + z); break;
	case B_SUB: ROW_LOOP(float, a, b, y, x - z); break;
	case B_MUL: ROW_LOOP(float, a, b, y, x * z); break;
	case B_DIV: ROW_LOOP(float, a, b, y, x / z); break;
	case B_MAX: ROW_LOOP(float, a, b, y, (float)bop_f(B_MAX, x, z)); break;
	case B_MIN: ROW_LOOP(float, a, b, y, (float)bop_f(B_MIN, x, z)); break;
	case B_PRELU: ROW_LOOP(float, a, b, y, x < 0 ? x * z : x); break;
	default: ROW_LOOP(float, a, b, y, (float)bop_f(c->op, x, z)); break;
	}
}

static void row_i64(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	const struct bctx *c = ctx;
	const int64_t *a = (const int64_t *)c->a.data + off[0], *b = (const int64_t *)c->b.data + off[1];
	int64_t *y = (int64_t *)c->y + yoff;
	int64_t as = st[0], bs = st[1];
	switch (c->op) {
	case B_ADD: ROW_LOOP(int64_t, a, b, y, (int64_t)((uint64_t)x + (uint64_t)z)); break;
	case B_SUB: ROW_LOOP(int64_t, a, b, y, (int64_t)((uint64_t)x - (uint64_t)z)); break;
	case B_MUL: ROW_LOOP(int64_t, a, b, y, (int64_t)((uint64_t)x * (uint64_t)z)); break;
	default: ROW_LOOP(int64_t, a, b, y, bop_i(c->op, x, z, false)); break;
	}
}

/* Comparisons of float32 or int64 operands (bool out). */
#define CMP_ROW(T)                                                                     \
	do {                                                                           \
		const T *a = (const T *)c->a.data + off[0], *b = (const T *)c->b.data + off[1]; \
		uint8_t *y = (uint8_t *)c->y + yoff;                                   \
		int64_t as = st[0], bs = st[1];                                        \
		switch (c->op) {                                                       \
		case B_EQ: ROW_LOOP(T, a, b, y, x == z); break;                        \
		case B_LT: ROW_LOOP(T, a, b, y, x < z); break;                         \
		case B_LE: ROW_LOOP(T, a, b, y, x <= z); break;                        \
		case B_GT: ROW_LOOP(T, a, b, y, x > z); break;                         \
		case B_GE: ROW_LOOP(T, a, b, y, x >= z); break;                        \
		default: break;                                                        \
		}                                                                      \
	} while (0)

static void row_f32_cmp(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	const struct bctx *c = ctx;
	CMP_ROW(float);
}

static void row_i64_cmp(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	const struct bctx *c = ctx;
	CMP_ROW(int64_t);
}

/* Any numeric types, computed in double. */
static void row_double(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	const struct bctx *c = ctx;
	for (int64_t i = 0; i < n; i++) {
		double x = kld(c->a.dtype, c->a.data, (uint64_t)(off[0] + i * st[0]));
		double z = kld(c->b.dtype, c->b.data, (uint64_t)(off[1] + i * st[1]));
		kst(c->ydt, c->y, (uint64_t)(yoff + i), bop_f(c->op, x, z));
	}
}

/* Integer types, exact. */
static void row_int(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	const struct bctx *c = ctx;
	for (int64_t i = 0; i < n; i++) {
		int64_t x = kldi(c->a.dtype, c->a.data, (uint64_t)(off[0] + i * st[0]));
		int64_t z = kldi(c->b.dtype, c->b.data, (uint64_t)(off[1] + i * st[1]));
		ksti(c->ydt, c->y, (uint64_t)(yoff + i), bop_i(c->op, x, z, c->uns));
	}
}

static bool str_eq(const struct ir_bytes *x, const struct ir_bytes *z)
{
	return x->len == z->len && (!x->len || !memcmp(x->data, z->data, x->len));
}

/* Strings: Equal only. */
static void row_str(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	const struct bctx *c = ctx;
	uint8_t *y = (uint8_t *)c->y + yoff;
	for (int64_t i = 0; i < n; i++)
		y[i] = str_eq(&c->a.t->strings[off[0] + i * st[0]], &c->b.t->strings[off[1] + i * st[1]]);
}

/* The domain for an op on dtypes da, db (and output ydt). */
static enum domain pick_domain(int op, int da, int db, int ydt)
{
	if (da == IR_STRING)
		return D_STRING;
	if (da == IR_FLOAT && db == IR_FLOAT && ydt == IR_FLOAT && op != B_POW && op != B_MOD && op != B_FMOD)
		return D_F32;
	if (da == IR_INT64 && db == IR_INT64 && ydt == IR_INT64 && (op == B_ADD || op == B_SUB || op == B_MUL))
		return D_I64;
	if (op >= B_EQ && da == db && (da == IR_FLOAT || da == IR_INT64))
		return da == IR_FLOAT ? D_F32_CMP : D_I64_CMP;
	if (ir_dtype_is_float(da) || ir_dtype_is_float(db) || ir_dtype_is_float(ydt))
		return D_DOUBLE;
	return D_INT;
}

/* y (dtype ydt, shape rank/dims, already allocated) = op(a, b), broadcasting. */
static int bin_run(struct cpu_kctx *k, int op, const struct bview *a, const struct bview *b, int ydt, void *y,
		   int rank, const int64_t *dims)
{
	if (!y || knumel(rank, dims) == 0)
		return 0;
	struct bview ops[2] = { *a, *b };
	struct plan p;
	plan_make(&p, rank, dims, 2, ops);
	struct bctx c = { op, *a, *b, ydt, y, NULL, is_unsigned(a->dtype) };
	row_fn fn;
	switch (pick_domain(op, a->dtype, b->dtype, ydt)) {
	case D_F32: fn = row_f32; break;
	case D_I64: fn = row_i64; break;
	case D_F32_CMP: fn = row_f32_cmp; break;
	case D_I64_CMP: fn = row_i64_cmp; break;
	case D_DOUBLE: fn = row_double; break;
	case D_STRING: fn = row_str; break;
	default: fn = row_int; break;
	}
	return plan_run(k, &p, fn, &c, fn == row_str);
}

/* Which dtypes an op takes. */
enum { T_FLOAT = 1, T_INT = 2, T_BOOL = 4, T_STRING = 8, T_NUM = T_FLOAT | T_INT, T_ANY = 15 };

static bool type_ok(int dt, unsigned allowed)
{
	if (dt == IR_STRING)
		return allowed & T_STRING;
	if (dt == IR_BOOL)
		return allowed & T_BOOL;
	if (ir_dtype_is_int(dt))
		return allowed & T_INT;
	if (ir_dtype_is_float(dt))
		return allowed & T_FLOAT;
	return false;   /* complex, undefined */
}

static int bad_type(struct cpu_kctx *k, int dt)
{
	return kerr(k, "%s inputs are not supported by %s", ir_dtype_name(dt), ir_ops[k->node->op].name);
}

/*
 * Pow of float32 x by one exponent e (a scalar: x^2 in a variance, x^3 in
 * GELU's tanh form): the small integer and half powers as products and a
 * square root, which vectorize; any other exponent through powf. Each
 * result is within an ulp or two of the double-rounded-once value.
 */
struct pow_job {
	const float *x;
	double e;
	float *y;
	int64_t n;
};

static void pow_blocks(void *ctx, int64_t b, int64_t e, int worker)
{
	const struct pow_job *j = ctx;
	const float *x = j->x;
	float *y = j->y;
	int64_t lo = b * EW_BLOCK, hi = e * EW_BLOCK < j->n ? e * EW_BLOCK : j->n;
	(void)worker;
	if (j->e == 2) {
		for (int64_t i = lo; i < hi; i++)
			y[i] = x[i] * x[i];
	} else if (j->e == 3) {
		for (int64_t i = lo; i < hi; i++)
			y[i] = (float)((double)x[i] * x[i] * x[i]);
	} else if (j->e == 1) {
		for (int64_t i = lo; i < hi; i++)
			y[i] = x[i];
	} else if (j->e == 0.5) {
		/* pow(-0, 0.5) is +0 and pow(-inf, 0.5) +inf, unlike sqrt */
		for (int64_t i = lo; i < hi; i++)
			y[i] = x[i] == -INFINITY ? INFINITY : sqrtf(x[i]) + 0.0f;
	} else {
		float ef = (float)j->e;
		if ((double)ef != j->e) {
			for (int64_t i = lo; i < hi; i++)
				y[i] = (float)pow(x[i], j->e);
		} else {
			for (int64_t i = lo; i < hi; i++)
				y[i] = powf(x[i], ef);
		}
	}
}

static int pow_f32_scalar(struct cpu_kctx *k, const float *x, double e, float *y, uint64_t n)
{
	struct pow_job j = { x, e, y, (int64_t)n };
	return kpar(k, (j.n + EW_BLOCK - 1) / EW_BLOCK, EW_GRAIN, pow_blocks, &j);
}

/* A binary op: inputs 0 and 1 of the same dtype (mixed for Pow). */
static int binary(struct cpu_kctx *k, int op, unsigned allowed)
{
	const struct ir_tensor *a = kin_req(k, 0), *b = kin_req(k, 1);
	if (!a || !b)
		return IR_ERR;
	if (!type_ok(a->dtype, allowed))
		return bad_type(k, a->dtype);
	if (op == B_POW) {
		if (!type_ok(b->dtype, T_NUM))
			return bad_type(k, b->dtype);
	} else if (a->dtype != b->dtype) {
		return kerr(k, "input types differ: %s and %s", ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
	}
	struct bview v[2] = { view_of(a), view_of(b) };
	int rank = 0;
	int64_t dims[IR_MAX_RANK];
	int rc = bcast_views(k, 2, v, &rank, dims);
	if (rc)
		return rc;
	int ydt = bop_is_bool_out(op) ? IR_BOOL : a->dtype;
	struct ir_tensor *o = kout(k, 0, ydt, rank, dims);
	if (!o)
		return IR_ERR;
	if (op == B_POW && a->dtype == IR_FLOAT && b->numel == 1 && o->numel == a->numel && is_numeric(b->dtype))
		return pow_f32_scalar(k, KF32(a), kld(b->dtype, kdata(b), 0), kwdata(o), o->numel);
	return bin_run(k, op, &v[0], &v[1], ydt, kwdata(o), rank, dims);
}

static int k_add(struct cpu_kctx *k) { return binary(k, B_ADD, T_NUM); }
static int k_sub(struct cpu_kctx *k) { return binary(k, B_SUB, T_NUM); }
static int k_mul(struct cpu_kctx *k) { return binary(k, B_MUL, T_NUM); }
static int k_div(struct cpu_kctx *k) { return binary(k, B_DIV, T_NUM); }
static int k_pow(struct cpu_kctx *k) { return binary(k, B_POW, T_NUM); }
static int k_equal(struct cpu_kctx *k) { return binary(k, B_EQ, T_ANY); }
static int k_less(struct cpu_kctx *k) { return binary(k, B_LT, T_NUM | T_BOOL); }
static int k_less_eq(struct cpu_kctx *k) { return binary(k, B_LE, T_NUM | T_BOOL); }
static int k_greater(struct cpu_kctx *k) { return binary(k, B_GT, T_NUM | T_BOOL); }
static int k_greater_eq(struct cpu_kctx *k) { return binary(k, B_GE, T_NUM | T_BOOL); }
static int k_and(struct cpu_kctx *k) { return binary(k, B_AND, T_BOOL | T_INT); }
static int k_or(struct cpu_kctx *k) { return binary(k, B_OR, T_BOOL | T_INT); }
static int k_xor(struct cpu_kctx *k) { return binary(k, B_XOR, T_BOOL | T_INT); }
static int k_bitwise_and(struct cpu_kctx *k) { return binary(k, B_BAND, T_INT | T_BOOL); }
static int k_bitwise_or(struct cpu_kctx *k) { return binary(k, B_BOR, T_INT | T_BOOL); }
static int k_bitwise_xor(struct cpu_kctx *k) { return binary(k, B_BXOR, T_INT | T_BOOL); }

/* Mod: integers follow Python's sign rule unless fmod=1; floats always use
 * C's fmod (ONNX requires fmod=1 for them). */
static int k_mod(struct cpu_kctx *k)
{
	int64_t fm = kattr_i(k, "fmod", 0);
	if (fm != 0 && fm != 1)
		return kerr(k, "fmod must be 0 or 1, not %lld", (long long)fm);
	return binary(k, fm ? B_FMOD : B_MOD, T_NUM);
}

static bool bitshift_supports(const struct ir_node *n, char *why, size_t size)
{
	const struct ir_attr *a = ir_node_attr(n, "direction");
	const char *d = a && a->type == IR_ATTR_STRING && a->s.data ? a->s.data : "";
	if (!strcmp(d, "LEFT") || !strcmp(d, "RIGHT"))
		return true;
	snprintf(why, size, "direction '%s' is not LEFT or RIGHT", d);
	return false;
}

static int k_bitshift(struct cpu_kctx *k)
{
	const char *d = kattr_s(k, "direction", "");
	int op;
	if (!strcmp(d, "LEFT"))
		op = B_SHL;
	else if (!strcmp(d, "RIGHT"))
		op = B_SHR;
	else
		return kerr(k, "direction '%s' is not LEFT or RIGHT", d);
	return binary(k, op, T_INT);
}

/* PRelu: slope broadcasts to X's shape (one way). A 1-D slope that does not
 * broadcast but matches exactly one axis of X applies along that axis, as
 * the ONNX reference allows. */
static int k_prelu(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *s = kin_req(k, 1);
	if (!x || !s)
		return IR_ERR;
	if (!type_ok(x->dtype, T_NUM))
		return bad_type(k, x->dtype);
	if (x->dtype != s->dtype)
		return kerr(k, "input types differ: %s and %s", ir_dtype_name(x->dtype), ir_dtype_name(s->dtype));
	struct bview v[2] = { view_of(x), view_of(s) };
	int64_t sdims[IR_MAX_RANK];
	int rank = 0;
	int64_t dims[IR_MAX_RANK];
	bool ok = s->rank <= x->rank;
	for (int j = 0; ok && j < s->rank; j++) {
		int64_t d = s->dims[j];
		if (d != 1 && d != x->dims[x->rank - s->rank + j])
			ok = false;
	}
	if (!ok && s->rank == 1) {
		int hits = 0, at = -1;
		for (int j = 0; j < x->rank; j++)
			if (x->dims[j] == s->dims[0]) {
				hits++;
				at = j;
			}
		if (hits == 1) {
			for (int j = 0; j < x->rank; j++)
				sdims[j] = j == at ? s->dims[0] : 1;
			v[1].rank = x->rank;
			v[1].dims = sdims;
			ok = true;
		}
	}
	if (!ok)
		return kerr(k, "slope of shape %s does not broadcast to X of shape %s", kshape(s), kshape(x));
	int rc = bcast_views(k, 2, v, &rank, dims);
	if (rc)
		return rc;
	struct ir_tensor *o = kout(k, 0, x->dtype, rank, dims);
	if (!o)
		return IR_ERR;
	return bin_run(k, B_PRELU, &v[0], &v[1], x->dtype, kwdata(o), rank, dims);
}

/* Sum, Mean, Max, Min: folds the inputs left to right into the output
 * (which has the broadcast shape of all of them). */
static int variadic(struct cpu_kctx *k, int op, bool mean)
{
	if (k->n_in < 1)
		return kerr(k, "at least one input is needed");
	struct bview *v = calloc((size_t)k->n_in, sizeof(*v));
	if (!v)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	int rc = IR_ERR, rank = 0, dt = 0;
	int64_t dims[IR_MAX_RANK];
	for (int i = 0; i < k->n_in; i++) {
		const struct ir_tensor *t = kin_req(k, i);
		if (!t)
			goto out;
		if (i == 0)
			dt = t->dtype;
		if (!type_ok(t->dtype, mean ? T_FLOAT : T_NUM)) {
			rc = bad_type(k, t->dtype);
			goto out;
		}
		if (t->dtype != dt) {
			rc = kerr(k, "input types differ: %s and %s", ir_dtype_name(dt), ir_dtype_name(t->dtype));
			goto out;
		}
		v[i] = view_of(t);
	}
	if ((rc = bcast_views(k, k->n_in, v, &rank, dims)))
		goto out;
	struct ir_tensor *o = kout(k, 0, dt, rank, dims);
	if (!o) {
		rc = IR_ERR;
		goto out;
	}
	void *y = kwdata(o);
	struct bview acc = { dt, y, rank, dims, NULL };
	if (k->n_in == 1)   /* y = x0 (broadcast to itself): x0 max x0 */
		rc = bin_run(k, B_MAX, &v[0], &v[0], dt, y, rank, dims);
	else
		rc = bin_run(k, op, &v[0], &v[1], dt, y, rank, dims);
	for (int i = 2; i < k->n_in && !rc; i++)
		rc = bin_run(k, op, &acc, &v[i], dt, y, rank, dims);
	if (!rc && mean && y) {
		uint64_t n = o->numel;
		double cnt = (double)k->n_in;
		if (dt == IR_FLOAT) {
			float *yf = y;
			for (uint64_t i = 0; i < n; i++)
				yf[i] = (float)(yf[i] / cnt);
		} else {
			for (uint64_t i = 0; i < n; i++)
				kst(dt, y, i, kld(dt, y, i) / cnt);
		}
	}
out:
	free(v);
	return rc;
}

static int k_sum(struct cpu_kctx *k) { return variadic(k, B_ADD, false); }
static int k_mean(struct cpu_kctx *k) { return variadic(k, B_ADD, true); }
static int k_max(struct cpu_kctx *k) { return variadic(k, B_MAX, false); }
static int k_min(struct cpu_kctx *k) { return variadic(k, B_MIN, false); }

/* ------------------------------------------------------------------------ */
/* Where                                                                     */
/* ------------------------------------------------------------------------ */

struct wctx {
	const struct ir_tensor *c, *x, *y;
	struct ir_tensor *o;
	void *out;
	int esize;   /* bytes per element; 0: sub-byte (raw codes moved one by one) */
	int err;
};

/* Raw code of element i of a 4- or 2-bit type, and its store. */
static unsigned sub_get(int bits, const void *p, int64_t i)
{
	const unsigned char *b = p;
	int per = 8 / bits;
	return (b[i / per] >> (bits * (int)(i % per))) & ((1u << bits) - 1);
}

static void sub_set(int bits, void *p, int64_t i, unsigned v)
{
	unsigned char *b = p;
	int per = 8 / bits, sh = bits * (int)(i % per);
	unsigned mask = ((1u << bits) - 1) << sh;
	b[i / per] = (unsigned char)((b[i / per] & ~mask) | ((v << sh) & mask));
}

static char *dup_bytes(const struct ir_bytes *s)
{
	char *d = malloc(s->len + 1);
	if (!d)
		return NULL;
	if (s->len)
		memcpy(d, s->data, s->len);
	d[s->len] = 0;
	return d;
}

/* Where's row for elements of a C type T (one straight loop each). */
#define WHERE_ROW(T)                                                                   \
	do {                                                                           \
		const T *xs = kdata(w->x), *ys = kdata(w->y);                          \
		T *out = (T *)w->out + yoff;                                           \
		for (int64_t i = 0; i < n; i++)                                        \
			out[i] = c[off[0] + i * st[0]] ? xs[off[1] + i * st[1]] : ys[off[2] + i * st[2]]; \
	} while (0)

static void row_where(void *ctx, int64_t n, int64_t yoff, const int64_t *off, const int64_t *st)
{
	struct wctx *w = ctx;
	const uint8_t *c = kdata(w->c);
	if (w->o->dtype != IR_STRING) {
		switch (w->esize) {
		case 1: WHERE_ROW(uint8_t); return;
		case 2: WHERE_ROW(uint16_t); return;
		case 4: WHERE_ROW(uint32_t); return;
		case 8: WHERE_ROW(uint64_t); return;
		default: break;
		}
	}
	for (int64_t i = 0; i < n; i++) {
		bool take_x = c[off[0] + i * st[0]] != 0;
		const struct ir_tensor *src = take_x ? w->x : w->y;
		int64_t si = take_x ? off[1] + i * st[1] : off[2] + i * st[2];
		int64_t di = yoff + i;
		if (w->o->dtype == IR_STRING) {
			char *d = dup_bytes(&src->strings[si]);
			if (!d) {
				w->err = IR_ENOMEM;
				return;
			}
			free(w->o->strings[di].data);
			w->o->strings[di].data = d;
			w->o->strings[di].len = src->strings[si].len;
		} else if (w->esize) {
			memcpy((char *)w->out + di * w->esize, (const char *)kdata(src) + si * w->esize,
			       (size_t)w->esize);
		} else {
			int bits = ir_dtype_bits(src->dtype);
			sub_set(bits, w->out, di, sub_get(bits, kdata(src), si));
		}
	}
}

static int k_where(struct cpu_kctx *k)
{
	const struct ir_tensor *c = kin_req(k, 0), *x = kin_req(k, 1), *y = kin_req(k, 2);
	if (!c || !x || !y)
		return IR_ERR;
	if (c->dtype != IR_BOOL)
		return kerr(k, "condition must be bool, not %s", ir_dtype_name(c->dtype));
	if (x->dtype != y->dtype)
		return kerr(k, "input types differ: %s and %s", ir_dtype_name(x->dtype), ir_dtype_name(y->dtype));
	int bits = ir_dtype_bits(x->dtype);
	if (x->dtype != IR_STRING && bits <= 0)
		return bad_type(k, x->dtype);
	struct bview v[3] = { view_of(c), view_of(x), view_of(y) };
	int rank = 0;
	int64_t dims[IR_MAX_RANK];
	int rc = bcast_views(k, 3, v, &rank, dims);
	if (rc)
		return rc;
	struct ir_tensor *o = kout(k, 0, x->dtype, rank, dims);
	if (!o)
		return IR_ERR;
	if (!o->numel)
		return 0;
	struct wctx w = { c, x, y, o, kwdata(o), bits % 8 ? 0 : bits / 8, 0 };
	struct plan p;
	plan_make(&p, rank, dims, 3, v);
	rc = plan_run(k, &p, row_where, &w, o->dtype == IR_STRING || !w.esize);
	if (!rc && w.err)
		rc = ir_diag_err(k->d, w.err, "out of memory");
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Unary ops                                                                 */
/* ------------------------------------------------------------------------ */

#define UNARY_OPS(X)                                                              \
	X(U_NEG) X(U_ABS) X(U_SIGN) X(U_RECIP) X(U_SQRT) X(U_EXP) X(U_LOG)        \
	X(U_CEIL) X(U_FLOOR) X(U_ROUND) X(U_ERF) X(U_SIN) X(U_COS) X(U_TAN)       \
	X(U_ASIN) X(U_ACOS) X(U_ATAN) X(U_SINH) X(U_COSH) X(U_ASINH) X(U_ACOSH)   \
	X(U_ATANH) X(U_RELU) X(U_LEAKY) X(U_ELU) X(U_SELU) X(U_CELU) X(U_GELU)    \
	X(U_GELU_TANH) X(U_SIGMOID) X(U_HSIGMOID) X(U_HSWISH) X(U_MISH)           \
	X(U_SOFTPLUS) X(U_SOFTSIGN) X(U_SWISH) X(U_TANH) X(U_THRELU) X(U_SHRINK)

enum uop {
#define X(op) op,
	UNARY_OPS(X)
#undef X
};

struct uparm {
	double alpha, beta, gamma;   /* activation parameters (Shrink: alpha=lambd, beta=bias) */
};

static inline double softplus(double x)
{
	/* log(1 + e^x) without overflow */
	return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static inline double sigmoid(double x)
{
	return 1 / (1 + exp(-x));   /* exp overflows to inf for x << 0: 1/inf = 0, no NaN */
}

/* The op in double (always inlined: the float32 loops pass a constant op
 * and so become one straight loop per op). */
static inline __attribute__((always_inline)) double uop_f(int op, double x, const struct uparm *p)
{
	switch (op) {
	case U_NEG: return -x;
	case U_ABS: return fabs(x);
	case U_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;   /* 0 and NaN stay */
	case U_RECIP: return 1 / x;
	case U_SQRT: return sqrt(x);
	case U_EXP: return exp(x);
	case U_LOG: return log(x);
	case U_CEIL: return ceil(x);
	case U_FLOOR: return floor(x);
	case U_ROUND: return nearbyint(x);   /* half to even (default rounding mode) */
	case U_ERF: return erf(x);
	case U_SIN: return sin(x);
	case U_COS: return cos(x);
	case U_TAN: return tan(x);
	case U_ASIN: return asin(x);
	case U_ACOS: return acos(x);
	case U_ATAN: return atan(x);
	case U_SINH: return sinh(x);
	case U_COSH: return cosh(x);
	case U_ASINH: return asinh(x);
	case U_ACOSH: return acosh(x);
	case U_ATANH: return atanh(x);
	case U_RELU: return x > 0 ? x : x != x ? x : 0;
	case U_LEAKY: return x < 0 ? p->alpha * x : x;
	case U_ELU: return x < 0 ? p->alpha * (exp(x) - 1) : x;
	case U_SELU: return x > 0 ? p->gamma * x : p->gamma * (p->alpha * exp(x) - p->alpha);
	case U_CELU: return (x > 0 ? x : 0) + fmin(0, p->alpha * (exp(x / p->alpha) - 1));
	case U_GELU: return 0.5 * x * (1 + erf(x * 0.70710678118654752440));
	case U_GELU_TANH:
		return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
	case U_SIGMOID: return sigmoid(x);
	case U_HSIGMOID: return fmax(0, fmin(1, p->alpha * x + p->beta));
	case U_HSWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
	case U_MISH: return x * tanh(softplus(x));
	case U_SOFTPLUS: return softplus(x);
	case U_SOFTSIGN: return x / (1 + fabs(x));
	case U_SWISH: return x * sigmoid(p->alpha * x);
	case U_TANH: return tanh(x);
	case U_THRELU: return x > p->alpha ? x : 0;
	case U_SHRINK: return x < -p->alpha ? x + p->beta : x > p->alpha ? x - p->beta : 0;
	default: return x;
	}
}

/* The ops with an exact integer form; others reject integer inputs
 * (Shrink computes integers in double). */
static bool uop_has_int(int op)
{
	return op == U_NEG || op == U_ABS || op == U_SIGN || op == U_RELU;
}

static inline int64_t uop_i(int op, int64_t x, bool uns)
{
	switch (op) {
	case U_NEG: return (int64_t)(0 - (uint64_t)x);
	case U_ABS: return uns || x >= 0 ? x : (int64_t)(0 - (uint64_t)x);
	case U_SIGN: return uns ? x != 0 : (x > 0) - (x < 0);
	case U_RELU: return uns || x > 0 ? x : 0;
	default: return x;
	}
}

/* ------------------------------------------------------------------------ */
/* float32 fast paths: Exp, Tanh, Sigmoid, Erf, Gelu                         */
/* ------------------------------------------------------------------------ */

/*
 * These compute in double with polynomials and no library calls, so the
 * loops vectorize; the result is rounded once to float32, like the
 * generic path (which calls libm's double functions). Each kernel body is
 * compiled three times (portable, AVX2, AVX-512) and picked by cpu_isa()
 * (cpu.h: the CPU's best, capped by OGSH_CPU_ISA).
 */

/* No trapping math in this section: selects between computed values may
 * then be vectorized (an ordered compare of a NaN raises "invalid", which
 * these kernels never test). The results are the same. */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")

/* e^x in double for |x| <= 745 (the caller clamps): x = n ln2 + r with
 * |r| <= ln2/2, e^r by its Taylor series to r^11 (error < 1e-13), 2^n
 * put into the exponent bits. */
static inline __attribute__((always_inline)) double exp_d(double x)
{
	const double shift = 6755399441055744.0;   /* 1.5 * 2^52: rounds to an integer in the low bits */
	double t = x * 1.4426950408889634 + shift;
	double n = t - shift;
	double r = x - n * 0.69314718036912382 - n * 1.9082149292705877e-10;
	double p = 1.0 / 39916800;
	p = p * r + 1.0 / 3628800;
	p = p * r + 1.0 / 362880;
	p = p * r + 1.0 / 40320;
	p = p * r + 1.0 / 5040;
	p = p * r + 1.0 / 720;
	p = p * r + 1.0 / 120;
	p = p * r + 1.0 / 24;
	p = p * r + 1.0 / 6;
	p = p * r + 0.5;
	p = p * r + 1;
	p = p * r + 1;
	/* 2^n, n in [-1075, 1075]: as two factors so neither over- nor underflows */
	int64_t bits;
	memcpy(&bits, &t, sizeof bits);
	int64_t ni = (int64_t)((uint64_t)bits << 32) >> 32;   /* n, sign-extended from the low 32 bits */
	int64_t n1 = ni >> 1, n2 = ni - n1;
	uint64_t b1 = (uint64_t)(n1 + 1023) << 52, b2 = (uint64_t)(n2 + 1023) << 52;
	double s1, s2;
	memcpy(&s1, &b1, sizeof s1);
	memcpy(&s2, &b2, sizeof s2);
	return p * s1 * s2;
}

static inline __attribute__((always_inline)) float exp_f(float xf)
{
	double x = xf;
	double c = x < -746 ? -746 : x > 710 ? 710 : x;
	float v = (float)exp_d(c);
	return x != x ? xf : v;
}

static inline __attribute__((always_inline)) float tanh_f(float xf)
{
	/* both forms are computed and one is selected: no branches, so the
	 * loop vectorizes (with trapping math, a branch is not speculated) */
	double x = xf, a = x < 0 ? -x : x;
	double ac = a > 20 ? 20 : a != a ? 0 : a;
	/* small |x|: the odd Taylor series to x^13 (next term < 1e-10 relative) */
	double xs = a < 0.3 ? x : 0.3, z = xs * xs;
	double p = 21844.0 / 6081075;
	p = p * z - 1382.0 / 155925;
	p = p * z + 62.0 / 2835;
	p = p * z - 17.0 / 315;
	p = p * z + 2.0 / 15;
	p = p * z - 1.0 / 3;
	double vs = xs + xs * z * p;
	/* else 1 - 2 / (e^2|x| + 1), with x's sign */
	double t = 1 - 2 / (exp_d(2 * ac) + 1);
	double v = a < 0.3 ? vs : x < 0 ? -t : t;
	float f = (float)v;
	return x != x ? xf : f;
}

static inline __attribute__((always_inline)) float sigmoid_f(float xf)
{
	double x = xf;
	double c = x < -746 ? 746 : x > 746 ? -746 : x != x ? 0 : -x;
	float v = (float)(1 / (1 + exp_d(c)));
	return x != x ? xf : v;
}

/* erf in double: the Taylor series below 0.75 (error < 1e-13), a fitted
 * polynomial (Chebyshev fit of degree 18, |error| < 2e-10) on [0.75, 4],
 * and 1 beyond (erf(4) rounds to 1 in float32). */
static const double erf_hi[19] = {
	0.99921706174444891,
	0.0065105240284266119,
	-0.025126555682384234,
	0.058918083644719371,
	-0.091576845462320158,
	0.094694673559863676,
	-0.057335629707447648,
	0.0037094004226592208,
	0.028864307301426934,
	-0.02675903952647813,
	0.0071091870552812669,
	0.0068251189596663393,
	-0.0072548422694946055,
	0.0013819629504068104,
	0.0018047904467095688,
	-0.0010312751163715993,
	-0.0001017689360906794,
	0.00017272667132273617,
	-2.1895405424039761e-05
};

static inline __attribute__((always_inline)) double erf_d(double x)
{
	/* both forms, then a select (see tanh_f) */
	double a = x < 0 ? -x : x, v;
	{
		double xs = a < 0.75 ? x : 0.75, z = xs * xs;
		/* 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)), n <= 11 */
		double p = -1.0 / (39916800.0 * 23);
		p = p * z + 1.0 / (3628800.0 * 21);
		p = p * z - 1.0 / (362880.0 * 19);
		p = p * z + 1.0 / (40320.0 * 17);
		p = p * z - 1.0 / (5040.0 * 15);
		p = p * z + 1.0 / (720.0 * 13);
		p = p * z - 1.0 / (120.0 * 11);
		p = p * z + 1.0 / (24.0 * 9);
		p = p * z - 1.0 / (6.0 * 7);
		p = p * z + 1.0 / (2.0 * 5);
		p = p * z - 1.0 / 3;
		p = p * z + 1;
		v = 1.1283791670955126 * xs * p;
	}
	double ac = a > 4 ? 4 : a < 0.75 ? 0.75 : a;
	double t = ac * (2.0 / 3.25) - (4.75 / 3.25);
	double p = erf_hi[18];
#pragma GCC unroll 18
	for (int i = 17; i >= 0; i--)
		p = p * t + erf_hi[i];
	p = a >= 4 ? 1 : p;
	return a < 0.75 ? v : x < 0 ? -p : p;
}

static inline __attribute__((always_inline)) float erf_f(float xf)
{
	float v = (float)erf_d(xf);
	return xf != xf ? xf : v;
}

/* e^x in float32 for x <= 0 (the caller's), 0 below -87: x = n ln2 + r,
 * e^r by Cephes' expf polynomial (relative error < 2e-7), 2^n put into the
 * exponent bits. exp_neg_core gives some number for NaN (gelu_f returns
 * NaN itself); exp_neg_f keeps NaN. */
static inline __attribute__((always_inline)) float exp_neg_core(float x)
{
	float xc = x < -87.0f ? -87.0f : x;
	xc = xc == xc ? xc : 0.0f;   /* NaN: no integer conversion of it (the result is NaN below) */
	const float shift = 12582912.0f;   /* 1.5 * 2^23: rounds to an integer in the low bits */
	float n = (xc * 1.44269504088896341f + shift) - shift;
	float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
	float s;
	memcpy(&s, &bits, sizeof s);
	return x < -87.0f ? 0.0f : p * s;
}

static inline __attribute__((always_inline)) float exp_neg_f(float x)
{
	float v = exp_neg_core(x);
	return x == x ? v : x;
}

/*
 * GELU's erf form in float32: with z = x / sqrt(2) and a = |z|,
 * erfc(a) = t e^(-a^2 + P(t)), t = 1 / (1 + a/2) (Numerical Recipes'
 * erfcc, relative error < 1.2e-7 for every a >= 0), and gelu(x) =
 * x - x erfc(a) / 2 for z > 0, x erfc(a) / 2 below: no cancellation on
 * either side. Measured against a double erfc: relative error below
 * 1.5e-6 where |gelu(x)| > 1e-3, below 5e-6 down to 1e-10 (x > -6.6),
 * absolute below 2.4e-7 everywhere, 1.5 ulp on average for |x| < 5 (the
 * double series this replaces: 18 ulp, 6e-3 relative in its tail);
 * results below float32's normal range are 0 (the figures with and without
 * FMA, see fastc_* below). Float32 vectors hold twice the elements of double
 * ones: a few times faster than a double erf, for BERT's MLP (and
 * FusedGemm's Gelu epilogue, the same function).
 */
static inline __attribute__((always_inline)) float gelu_f(float x)
{
	float z = x * 0.70710678118654752440f, a = z < 0 ? -z : z;
	float t = 1.0f / (1.0f + 0.5f * a);
	float p = 0.17087277f;
	p = p * t - 0.82215223f;
	p = p * t + 1.48851587f;
	p = p * t - 1.13520398f;
	p = p * t + 0.27886807f;
	p = p * t - 0.18628806f;
	p = p * t + 0.09678418f;
	p = p * t + 0.37409196f;
	p = p * t + 1.00002368f;
	p = p * t - 1.26551223f;
	float ac = a > 10.0f ? 10.0f : a;   /* e^-100: 0 in float32 */
	float h = 0.5f * x * (t * exp_neg_core(p - ac * ac));
	float v = z > 0 ? x - h : h;
	/* |z| > 10: x itself above, -0 below (NaN for -inf, as -inf * 0) */
	v = z > 10.0f ? x : z < -10.0f ? x * 0.0f : v;
	return x != x ? x : v;
}

/*
 * The softmax of one row of n float32 values (x == y allowed), attention's:
 * the max, e^(x - max) by exp_neg_f (the argument is never positive), the
 * sum, then each divided by it. Max and sum are kept in 16 lanes (element
 * t in lane t % 16, the lanes combined in a fixed tree), so the loops
 * vectorize and the result does not depend on how rows are split. A row of
 * -inf (or with a NaN) gives NaN.
 */
#define SM_LANES 16

static inline __attribute__((always_inline)) void softmax_body(const float *x, float *y, int64_t n)
{
	float m[SM_LANES], s[SM_LANES];
	const int64_t nv = n - n % SM_LANES;
	for (int l = 0; l < SM_LANES; l++) {
		m[l] = -INFINITY;
		s[l] = 0;
	}
	for (int64_t t = 0; t < nv; t += SM_LANES)
		for (int l = 0; l < SM_LANES; l++)
			m[l] = x[t + l] > m[l] ? x[t + l] : m[l];
	for (int64_t t = nv; t < n; t++)
		m[t % SM_LANES] = x[t] > m[t % SM_LANES] ? x[t] : m[t % SM_LANES];
	for (int w = SM_LANES / 2; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			m[l] = m[l + w] > m[l] ? m[l + w] : m[l];
	const float mx = m[0];
	for (int64_t t = 0; t < nv; t += SM_LANES)
		for (int l = 0; l < SM_LANES; l++) {
			float e = exp_neg_f(x[t + l] - mx);
			y[t + l] = e;
			s[l] += e;
		}
	for (int64_t t = nv; t < n; t++) {
		float e = exp_neg_f(x[t] - mx);
		y[t] = e;
		s[t % SM_LANES] += e;
	}
	for (int w = SM_LANES / 2; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			s[l] += s[l + w];
	const float sum = s[0];
	for (int64_t t = 0; t < n; t++)
		y[t] /= sum;
}

/*
 * gelu_f over n elements: whole blocks of GELU_VL in one loop, and the
 * last n % GELU_VL through a block of GELU_VL padded with zeros, so that
 * every element takes the main loop's vector code. Left to itself the
 * compiler gives the tail its own loop at half the vector width (AVX-512:
 * 8 lanes), whose FMAs round differently (1 ulp here and there): a
 * value's GELU then depended on where it sat in the array and on the
 * array's length. Now its bits are a function of the value (on one ISA),
 * so FusedGemm's epilogue, which runs it on rows of a tile, gives the bits
 * of the pass over the whole tensor.
 */
#define GELU_VL 16

static inline __attribute__((always_inline)) void gelu_body(const float *x, float *y, int64_t n)
{
	const int64_t nv = n - n % GELU_VL;
	for (int64_t i = 0; i < nv; i++)
		y[i] = gelu_f(x[i]);
	if (nv < n) {
		float t[GELU_VL] = { 0 };
		for (int64_t i = nv; i < n; i++)
			t[i - nv] = x[i];
		for (int i = 0; i < GELU_VL; i++)
			t[i] = gelu_f(t[i]);
		for (int64_t i = nv; i < n; i++)
			y[i] = t[i - nv];
	}
}

/* The float32 fast ops, and the loop over n elements for each ISA. */
enum { F_EXP, F_TANH, F_SIGMOID, F_ERF, F_GELU, F_SOFTMAX };

static inline __attribute__((always_inline)) void fast_body(int op, const float *x, float *y, int64_t n)
{
	switch (op) {
	case F_EXP: for (int64_t i = 0; i < n; i++) y[i] = exp_f(x[i]); break;
	case F_TANH: for (int64_t i = 0; i < n; i++) y[i] = tanh_f(x[i]); break;
	case F_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = sigmoid_f(x[i]); break;
	case F_ERF: for (int64_t i = 0; i < n; i++) y[i] = erf_f(x[i]); break;
	case F_GELU: gelu_body(x, y, n); break;
	case F_SOFTMAX: softmax_body(x, y, n); break;
	default: break;
	}
}

static void fast_generic(int op, const float *x, float *y, int64_t n)
{
	fast_body(op, x, y, n);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
static void fast_avx2(int op, const float *x, float *y, int64_t n)
{
	fast_body(op, x, y, n);
}

__attribute__((target("avx512f,avx512dq")))
static void fast_avx512(int op, const float *x, float *y, int64_t n)
{
	fast_body(op, x, y, n);
}
#endif

/*
 * Gelu and softmax, the float32 ones, again with multiplies and adds fused
 * where the ISA has FMA (a product and a sum rounded once: slightly more
 * accurate, and about 1.4x faster on BERT's MLP). Their bits then depend on
 * the ISA (not on the thread count); the double ops above do not change.
 */
#pragma GCC optimize("fp-contract=fast")
static void fastc_generic(int op, const float *x, float *y, int64_t n)
{
	fast_body(op, x, y, n);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
static void fastc_avx2(int op, const float *x, float *y, int64_t n)
{
	fast_body(op, x, y, n);
}

__attribute__((target("avx512f,avx512dq")))
static void fastc_avx512(int op, const float *x, float *y, int64_t n)
{
	fast_body(op, x, y, n);
}
#endif

/*
 * GELU in place on rows x cols floats at c (rows ldc apart), the bits of
 * cpu_fast_f32(CPU_FAST_GELU, ...) on each element (gelu_body's are a
 * function of the value): FusedGemm's epilogue on a finished block of its
 * product (rows of up to 512 columns). Short rows are copied into one
 * contiguous block first, so that the loop's setup (its constants
 * broadcast into registers) is not paid for every few vectors.
 */
#define GELU_BUF 1024

/* (the copies stay loops of vector moves, not a memcpy call per row) */
#pragma GCC push_options
#pragma GCC optimize("no-tree-loop-distribute-patterns")

static inline __attribute__((always_inline)) void gelu_rows_body(float *c, int64_t ldc, int64_t rows, int64_t cols)
{
	if (cols == ldc || cols > GELU_BUF / 4) {
		if (cols == ldc)
			gelu_body(c, c, rows * cols);
		else
			for (int64_t i = 0; i < rows; i++)
				gelu_body(c + i * ldc, c + i * ldc, cols);
		return;
	}
	float buf[GELU_BUF] __attribute__((aligned(64)));
	int64_t per = GELU_BUF / cols;
	for (int64_t i0 = 0; i0 < rows; i0 += per) {
		int64_t nr = rows - i0 < per ? rows - i0 : per;
		for (int64_t i = 0; i < nr; i++)
			for (int64_t j = 0; j < cols; j++)
				buf[i * cols + j] = c[(i0 + i) * ldc + j];
		gelu_body(buf, buf, nr * cols);
		for (int64_t i = 0; i < nr; i++)
			for (int64_t j = 0; j < cols; j++)
				c[(i0 + i) * ldc + j] = buf[i * cols + j];
	}
}

static void gelu_rows_generic(float *c, int64_t ldc, int64_t rows, int64_t cols)
{
	gelu_rows_body(c, ldc, rows, cols);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
static void gelu_rows_avx2(float *c, int64_t ldc, int64_t rows, int64_t cols)
{
	gelu_rows_body(c, ldc, rows, cols);
}

__attribute__((target("avx512f,avx512dq")))
static void gelu_rows_avx512(float *c, int64_t ldc, int64_t rows, int64_t cols)
{
	gelu_rows_body(c, ldc, rows, cols);
}
#endif
#pragma GCC pop_options

#pragma GCC pop_options

/* cpu_fast_gelu_rows(): see cpu.h */

void cpu_fast_gelu_rows(float *c, int64_t ldc, int64_t rows, int64_t cols)
{
#if defined(__x86_64__)
	int isa = cpu_isa();
	if (isa >= 2) {
		gelu_rows_avx512(c, ldc, rows, cols);
		return;
	}
	if (isa >= 1) {
		gelu_rows_avx2(c, ldc, rows, cols);
		return;
	}
#endif
	gelu_rows_generic(c, ldc, rows, cols);
}

/* cpu_fast_f32(): see cpu.h (its ops are F_EXP..F_ERF in order) */

void cpu_fast_f32(int op, const float *x, float *y, int64_t n)
{
	_Static_assert((int)CPU_FAST_EXP == (int)F_EXP && (int)CPU_FAST_TANH == (int)F_TANH &&
			       (int)CPU_FAST_SIGMOID == (int)F_SIGMOID && (int)CPU_FAST_ERF == (int)F_ERF &&
			       (int)CPU_FAST_GELU == (int)F_GELU && (int)CPU_FAST_SOFTMAX == (int)F_SOFTMAX,
		       "cpu_fast_f32's ops are the fast ops");
	bool fused = op == F_GELU || op == F_SOFTMAX;
#if defined(__x86_64__)
	int isa = cpu_isa();
	if (isa >= 2) {
		(fused ? fastc_avx512 : fast_avx512)(op, x, y, n);
		return;
	}
	if (isa >= 1) {
		(fused ? fastc_avx2 : fast_avx2)(op, x, y, n);
		return;
	}
#endif
	(fused ? fastc_generic : fast_generic)(op, x, y, n);
}

/* The fast op for a unary op, or -1. */
static int fast_op(int op)
{
	switch (op) {
	case U_EXP: return F_EXP;
	case U_TANH: return F_TANH;
	case U_SIGMOID: return F_SIGMOID;
	case U_ERF: return F_ERF;
	case U_GELU: return F_GELU;
	default: return -1;
	}
}

struct fast_job {
	void (*fn)(int, const float *, float *, int64_t);
	int fop;
	const float *x;
	float *y;
	int64_t n;
};

static void fast_blocks(void *ctx, int64_t b, int64_t e, int worker)
{
	const struct fast_job *j = ctx;
	int64_t lo = b * EW_BLOCK, hi = e * EW_BLOCK < j->n ? e * EW_BLOCK : j->n;
	(void)worker;
	j->fn(j->fop, j->x + lo, j->y + lo, hi - lo);
}

/* y = op(x) for n float32 values, on the pool (Ctrl-C between slabs). */
static int fast_run(struct cpu_kctx *k, int fop, const float *x, float *y, uint64_t n)
{
	bool fused = fop == F_GELU;
	struct fast_job j = { fused ? fastc_generic : fast_generic, fop, x, y, (int64_t)n };
#if defined(__x86_64__)
	int isa = cpu_isa();
	if (isa >= 2)
		j.fn = fused ? fastc_avx512 : fast_avx512;
	else if (isa >= 1)
		j.fn = fused ? fastc_avx2 : fast_avx2;
#endif
	return kpar(k, (j.n + EW_BLOCK - 1) / EW_BLOCK, EW_GRAIN_SLOW, fast_blocks, &j);
}

struct unary_job {
	int op, dt;
	const struct uparm *p;
	const void *xs;
	void *ys;
	int64_t n;
	bool uns;
};

static void unary_blocks(void *ctx, int64_t b, int64_t e, int worker)
{
	const struct unary_job *j = ctx;
	const struct uparm *p = j->p;
	int dt = j->dt;
	const void *xs = j->xs;
	void *ys = j->ys;
	int64_t lo = b * EW_BLOCK, hi = e * EW_BLOCK < j->n ? e * EW_BLOCK : j->n;
	(void)worker;
	if (dt == IR_FLOAT) {
		const float *xf = xs;
		float *yf = ys;
		switch (j->op) {
#define X(OP) case OP: for (int64_t i = lo; i < hi; i++) yf[i] = (float)uop_f(OP, xf[i], p); break;
		UNARY_OPS(X)
#undef X
		}
	} else if (dt == IR_DOUBLE) {
		const double *xd = xs;
		double *yd = ys;
		for (int64_t i = lo; i < hi; i++)
			yd[i] = uop_f(j->op, xd[i], p);
	} else if (ir_dtype_is_float(dt) || j->op == U_SHRINK) {
		for (int64_t i = lo; i < hi; i++)
			kst(dt, ys, (uint64_t)i, uop_f(j->op, kld(dt, xs, (uint64_t)i), p));
	} else {
		for (int64_t i = lo; i < hi; i++)
			ksti(dt, ys, (uint64_t)i, uop_i(j->op, kldi(dt, xs, (uint64_t)i), j->uns));
	}
}

static int unary_run(struct cpu_kctx *k, int op, const struct uparm *p)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int dt = x->dtype;
	bool intok = is_intlike(dt) && dt != IR_BOOL && (uop_has_int(op) || op == U_SHRINK);
	if (!ir_dtype_is_float(dt) && !intok)
		return bad_type(k, dt);
	if (op == U_NEG && is_unsigned(dt))
		return bad_type(k, dt);
	struct ir_tensor *o = kout(k, 0, dt, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	uint64_t n = x->numel;
	if (dt == IR_FLOAT && fast_op(op) >= 0)
		return fast_run(k, fast_op(op), kdata(x), kwdata(o), n);
	struct unary_job j = { op, dt, p, kdata(x), kwdata(o), (int64_t)n, is_unsigned(dt) };
	if (ir_dtype_bits(dt) < 8) {
		/* sub-byte elements share bytes: one thread */
		unary_blocks(&j, 0, (j.n + EW_BLOCK - 1) / EW_BLOCK, 0);
		return 0;
	}
	return kpar(k, (j.n + EW_BLOCK - 1) / EW_BLOCK, EW_GRAIN_SLOW, unary_blocks, &j);
}

static int unary(struct cpu_kctx *k, int op)
{
	struct uparm p = { 0, 0, 0 };
	return unary_run(k, op, &p);
}

static int k_neg(struct cpu_kctx *k) { return unary(k, U_NEG); }
static int k_abs(struct cpu_kctx *k) { return unary(k, U_ABS); }
static int k_sign(struct cpu_kctx *k) { return unary(k, U_SIGN); }
static int k_reciprocal(struct cpu_kctx *k) { return unary(k, U_RECIP); }
static int k_sqrt(struct cpu_kctx *k) { return unary(k, U_SQRT); }
static int k_exp(struct cpu_kctx *k) { return unary(k, U_EXP); }
static int k_log(struct cpu_kctx *k) { return unary(k, U_LOG); }
static int k_ceil(struct cpu_kctx *k) { return unary(k, U_CEIL); }
static int k_floor(struct cpu_kctx *k) { return unary(k, U_FLOOR); }
static int k_round(struct cpu_kctx *k) { return unary(k, U_ROUND); }
static int k_erf(struct cpu_kctx *k) { return unary(k, U_ERF); }
static int k_sin(struct cpu_kctx *k) { return unary(k, U_SIN); }
static int k_cos(struct cpu_kctx *k) { return unary(k, U_COS); }
static int k_tan(struct cpu_kctx *k) { return unary(k, U_TAN); }
static int k_asin(struct cpu_kctx *k) { return unary(k, U_ASIN); }
static int k_acos(struct cpu_kctx *k) { return unary(k, U_ACOS); }
static int k_atan(struct cpu_kctx *k) { return unary(k, U_ATAN); }
static int k_sinh(struct cpu_kctx *k) { return unary(k, U_SINH); }
static int k_cosh(struct cpu_kctx *k) { return unary(k, U_COSH); }
static int k_asinh(struct cpu_kctx *k) { return unary(k, U_ASINH); }
static int k_acosh(struct cpu_kctx *k) { return unary(k, U_ACOSH); }
static int k_atanh(struct cpu_kctx *k) { return unary(k, U_ATANH); }
static int k_relu(struct cpu_kctx *k) { return unary(k, U_RELU); }
static int k_sigmoid(struct cpu_kctx *k) { return unary(k, U_SIGMOID); }
static int k_hardswish(struct cpu_kctx *k) { return unary(k, U_HSWISH); }
static int k_mish(struct cpu_kctx *k) { return unary(k, U_MISH); }
static int k_softplus(struct cpu_kctx *k) { return unary(k, U_SOFTPLUS); }
static int k_softsign(struct cpu_kctx *k) { return unary(k, U_SOFTSIGN); }
static int k_tanh(struct cpu_kctx *k) { return unary(k, U_TANH); }

/* Activations with parameters (attribute defaults from the ONNX spec). */
static int unary_a(struct cpu_kctx *k, int op, double alpha, double beta, double gamma)
{
	struct uparm p = { alpha, beta, gamma };
	return unary_run(k, op, &p);
}

static int k_leakyrelu(struct cpu_kctx *k) { return unary_a(k, U_LEAKY, kattr_f(k, "alpha", 0.01f), 0, 0); }
static int k_elu(struct cpu_kctx *k) { return unary_a(k, U_ELU, kattr_f(k, "alpha", 1.0f), 0, 0); }
static int k_thresholdedrelu(struct cpu_kctx *k) { return unary_a(k, U_THRELU, kattr_f(k, "alpha", 1.0f), 0, 0); }
static int k_swish(struct cpu_kctx *k) { return unary_a(k, U_SWISH, kattr_f(k, "alpha", 1.0f), 0, 0); }

static int k_selu(struct cpu_kctx *k)
{
	return unary_a(k, U_SELU, kattr_f(k, "alpha", 1.67326319217681884765625f), 0,
		       kattr_f(k, "gamma", 1.05070102214813232421875f));
}

static int k_celu(struct cpu_kctx *k)
{
	float alpha = kattr_f(k, "alpha", 1.0f);
	if (alpha == 0)
		return kerr(k, "alpha must not be 0");
	return unary_a(k, U_CELU, alpha, 0, 0);
}

static int k_hardsigmoid(struct cpu_kctx *k)
{
	return unary_a(k, U_HSIGMOID, kattr_f(k, "alpha", 0.2f), kattr_f(k, "beta", 0.5f), 0);
}

static int k_shrink(struct cpu_kctx *k)
{
	return unary_a(k, U_SHRINK, kattr_f(k, "lambd", 0.5f), kattr_f(k, "bias", 0.0f), 0);
}

static bool gelu_supports(const struct ir_node *n, char *why, size_t size)
{
	const struct ir_attr *a = ir_node_attr(n, "approximate");
	const char *s = a && a->type == IR_ATTR_STRING && a->s.data ? a->s.data : "none";
	if (!strcmp(s, "none") || !strcmp(s, "tanh"))
		return true;
	snprintf(why, size, "approximate '%s' is not none or tanh", s);
	return false;
}

static int k_gelu(struct cpu_kctx *k)
{
	const char *s = kattr_s(k, "approximate", "none");
	if (!strcmp(s, "none"))
		return unary(k, U_GELU);
	if (!strcmp(s, "tanh"))
		return unary(k, U_GELU_TANH);
	return kerr(k, "approximate '%s' is not none or tanh", s);
}

/* Not, BitwiseNot: bool -> bool, integers -> their complement. */
static int k_not(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (x->dtype != IR_BOOL)
		return bad_type(k, x->dtype);
	struct ir_tensor *o = kout(k, 0, IR_BOOL, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	const uint8_t *xs = kdata(x);
	uint8_t *y = kwdata(o);
	for (uint64_t i = 0; i < x->numel; i++)
		y[i] = !xs[i];
	return 0;
}

static int k_bitwise_not(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!ir_dtype_is_int(x->dtype))
		return bad_type(k, x->dtype);
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	for (uint64_t i = 0; i < x->numel; i++)
		ksti(x->dtype, kwdata(o), i, ~kldi(x->dtype, kdata(x), i));
	return 0;
}

/* IsInf (detect_positive, detect_negative) and IsNaN: bool outputs;
 * integer inputs are never inf or NaN. */
static int is_special(struct cpu_kctx *k, bool nan)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!is_numeric(x->dtype))
		return bad_type(k, x->dtype);
	bool pos = kattr_i(k, "detect_positive", 1) != 0, neg = kattr_i(k, "detect_negative", 1) != 0;
	struct ir_tensor *o = kout(k, 0, IR_BOOL, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	uint8_t *y = kwdata(o);
	bool isf = ir_dtype_is_float(x->dtype);
	for (uint64_t i = 0; i < x->numel; i++) {
		double v = isf ? kld(x->dtype, kdata(x), i) : 0;
		y[i] = nan ? isnan(v) : isinf(v) && (v > 0 ? pos : neg);
	}
	return 0;
}

static int k_isinf(struct cpu_kctx *k) { return is_special(k, false); }
static int k_isnan(struct cpu_kctx *k) { return is_special(k, true); }

/* ------------------------------------------------------------------------ */
/* Clip                                                                      */
/* ------------------------------------------------------------------------ */

/* A scalar bound input (1 element, X's type), or none. */
static int clip_bound(struct cpu_kctx *k, int i, int dt, const struct ir_tensor **out)
{
	const struct ir_tensor *t = kin(k, i);
	*out = NULL;
	if (!t)
		return 0;
	if (t->numel != 1)
		return kerr(k, "%s must be a scalar, not of shape %s", i == 1 ? "min" : "max", kshape(t));
	if (t->dtype != dt)
		return kerr(k, "%s is %s, X is %s", i == 1 ? "min" : "max", ir_dtype_name(t->dtype), ir_dtype_name(dt));
	*out = t;
	return 0;
}

static int k_clip(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *tlo = NULL, *thi = NULL;
	if (!x)
		return IR_ERR;
	int dt = x->dtype;
	if (!type_ok(dt, T_NUM))
		return bad_type(k, dt);
	double lo = -INFINITY, hi = INFINITY;
	if (k->opset > 0 && k->opset < 11) {
		if (!ir_dtype_is_float(dt))   /* Clip-6 takes floats only */
			return bad_type(k, dt);
		lo = kattr_f(k, "min", -INFINITY);
		hi = kattr_f(k, "max", INFINITY);
	} else {
		int rc = clip_bound(k, 1, dt, &tlo);
		if (!rc)
			rc = clip_bound(k, 2, dt, &thi);
		if (rc)
			return rc;
	}
	struct ir_tensor *o = kout(k, 0, dt, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	uint64_t n = x->numel;
	void *y = kwdata(o);
	if (ir_dtype_is_float(dt)) {
		/* y = min(max(x, lo), hi) like numpy's clip: NaN stays, lo > hi gives hi */
		if (tlo)
			lo = kld(dt, kdata(tlo), 0);
		if (thi)
			hi = kld(dt, kdata(thi), 0);
		if (dt == IR_FLOAT) {
			const float *xf = KF32(x);
			float *yf = y, flo = (float)lo, fhi = (float)hi;
			for (uint64_t i = 0; i < n; i++) {
				float v = xf[i];
				v = v < flo ? flo : v;
				yf[i] = v > fhi ? fhi : v;
			}
		} else {
			for (uint64_t i = 0; i < n; i++) {
				double v = kld(dt, kdata(x), i);
				v = v < lo ? lo : v;
				kst(dt, y, i, v > hi ? hi : v);
			}
		}
		return 0;
	}
	/* integers: exact, with bounds from the inputs or the attributes */
	bool uns = is_unsigned(dt);
	bool has_lo = tlo || lo > -INFINITY, has_hi = thi || hi < INFINITY;
	int64_t ilo = tlo ? kldi(dt, kdata(tlo), 0) : has_lo ? (int64_t)ceil(lo) : 0;
	int64_t ihi = thi ? kldi(dt, kdata(thi), 0) : has_hi ? (int64_t)floor(hi) : 0;
	for (uint64_t i = 0; i < n; i++) {
		int64_t v = kldi(dt, kdata(x), i);
		if (has_lo && (uns ? (uint64_t)v < (uint64_t)ilo : v < ilo))
			v = ilo;
		if (has_hi && (uns ? (uint64_t)v > (uint64_t)ihi : v > ihi))
			v = ihi;
		ksti(dt, y, i, v);
	}
	return 0;
}

const struct cpu_kernel cpu_kernels_elementwise[] = {
	{ IR_OP_Add, k_add, NULL },
	{ IR_OP_Sub, k_sub, NULL },
	{ IR_OP_Mul, k_mul, NULL },
	{ IR_OP_Div, k_div, NULL },
	{ IR_OP_Pow, k_pow, NULL },
	{ IR_OP_Mod, k_mod, NULL },
	{ IR_OP_Neg, k_neg, NULL },
	{ IR_OP_Abs, k_abs, NULL },
	{ IR_OP_Sign, k_sign, NULL },
	{ IR_OP_Reciprocal, k_reciprocal, NULL },
	{ IR_OP_Sqrt, k_sqrt, NULL },
	{ IR_OP_Exp, k_exp, NULL },
	{ IR_OP_Log, k_log, NULL },
	{ IR_OP_Ceil, k_ceil, NULL },
	{ IR_OP_Floor, k_floor, NULL },
	{ IR_OP_Round, k_round, NULL },
	{ IR_OP_Erf, k_erf, NULL },
	{ IR_OP_Sin, k_sin, NULL },
	{ IR_OP_Cos, k_cos, NULL },
	{ IR_OP_Tan, k_tan, NULL },
	{ IR_OP_Asin, k_asin, NULL },
	{ IR_OP_Acos, k_acos, NULL },
	{ IR_OP_Atan, k_atan, NULL },
	{ IR_OP_Sinh, k_sinh, NULL },
	{ IR_OP_Cosh, k_cosh, NULL },
	{ IR_OP_Asinh, k_asinh, NULL },
	{ IR_OP_Acosh, k_acosh, NULL },
	{ IR_OP_Atanh, k_atanh, NULL },
	{ IR_OP_Relu, k_relu, NULL },
	{ IR_OP_LeakyRelu, k_leakyrelu, NULL },
	{ IR_OP_PRelu, k_prelu, NULL },
	{ IR_OP_Elu, k_elu, NULL },
	{ IR_OP_Selu, k_selu, NULL },
	{ IR_OP_Celu, k_celu, NULL },
	{ IR_OP_Gelu, k_gelu, gelu_supports },
	{ IR_OP_ogsh_Gelu, k_gelu, gelu_supports },
	{ IR_OP_Sigmoid, k_sigmoid, NULL },
	{ IR_OP_HardSigmoid, k_hardsigmoid, NULL },
	{ IR_OP_HardSwish, k_hardswish, NULL },
	{ IR_OP_Mish, k_mish, NULL },
	{ IR_OP_Softplus, k_softplus, NULL },
	{ IR_OP_Softsign, k_softsign, NULL },
	{ IR_OP_Swish, k_swish, NULL },
	{ IR_OP_Tanh, k_tanh, NULL },
	{ IR_OP_ThresholdedRelu, k_thresholdedrelu, NULL },
	{ IR_OP_Shrink, k_shrink, NULL },
	{ IR_OP_Clip, k_clip, NULL },
	{ IR_OP_Sum, k_sum, NULL },
	{ IR_OP_Mean, k_mean, NULL },
	{ IR_OP_Max, k_max, NULL },
	{ IR_OP_Min, k_min, NULL },
	{ IR_OP_Equal, k_equal, NULL },
	{ IR_OP_Less, k_less, NULL },
	{ IR_OP_LessOrEqual, k_less_eq, NULL },
	{ IR_OP_Greater, k_greater, NULL },
	{ IR_OP_GreaterOrEqual, k_greater_eq, NULL },
	{ IR_OP_And, k_and, NULL },
	{ IR_OP_Or, k_or, NULL },
	{ IR_OP_Xor, k_xor, NULL },
	{ IR_OP_Not, k_not, NULL },
	{ IR_OP_BitShift, k_bitshift, bitshift_supports },
	{ IR_OP_BitwiseAnd, k_bitwise_and, NULL },
	{ IR_OP_BitwiseOr, k_bitwise_or, NULL },
	{ IR_OP_BitwiseXor, k_bitwise_xor, NULL },
	{ IR_OP_BitwiseNot, k_bitwise_not, NULL },
	{ IR_OP_IsInf, k_isinf, NULL },
	{ IR_OP_IsNaN, k_isnan, NULL },
	{ IR_OP_Where, k_where, NULL },
	{ -1, NULL, NULL },
};
