/*
 * k_fused.c - CPU kernels: ogsh's fused ops (ai.ogsh FusedConv, FusedGemm,
 * Pointwise).
 *
 * FusedConv and FusedGemm run the Conv and Gemm kernels on the fused node
 * itself (the attribute names are the same), then add the residual Z and
 * apply the activation in place on the output; FusedConv hands a float32
 * residual and a Relu or Clip to its Conv instead (struct cpu_epi), whose
 * products apply them to each tile as it finishes, and FusedGemm the same
 * and GELU's erf form to its Gemm. Pointwise compiles its
 * `expr` once per call into a small postfix program and runs it over blocks
 * of elements: float for float32, double for the other float types.
 *
 * The expression language is kernels/fused.h's (one parser for the CPU
 * and the GPU).
 */
#include "cpu.h"
#include "kernels/fused.h"
#include "pool.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Activations                                                               */
/* ------------------------------------------------------------------------ */

static double act_f64(const struct kern_act *a, double v)
{
	switch (a->kind) {
	case KACT_RELU: return v < 0 ? 0 : v;   /* NaN stays NaN */
	case KACT_CLIP: return v < a->p0 ? a->p0 : v > a->p1 ? a->p1 : v;
	case KACT_LEAKY: return v < 0 ? a->p0 * v : v;
	case KACT_SIGMOID: return 1 / (1 + exp(-v));
	case KACT_HSIGMOID: {
		double t = a->p0 * v + a->p1;
		return t < 0 ? 0 : t > 1 ? 1 : t;
	}
	case KACT_HSWISH: {
		double t = v / 6 + 0.5;
		return v * (t < 0 ? 0 : t > 1 ? 1 : t);
	}
	case KACT_TANH: return tanh(v);
	case KACT_GELU:
		if (a->p0 != 0)
			return 0.5 * v * (1 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
		return 0.5 * v * (1 + erf(v / sqrt(2.0)));
	default: return v;
	}
}

static void act_f32(const struct kern_act *a, float *y, uint64_t n)
{
	float lo = (float)a->p0, hi = (float)a->p1, al = (float)a->p0, be = (float)a->p1;
	switch (a->kind) {
	case KACT_NONE: return;
	case KACT_RELU:
		for (uint64_t i = 0; i < n; i++)
			y[i] = y[i] < 0 ? 0 : y[i];
		return;
	case KACT_CLIP:
		for (uint64_t i = 0; i < n; i++)
			y[i] = y[i] < lo ? lo : y[i] > hi ? hi : y[i];
		return;
	case KACT_LEAKY:
		for (uint64_t i = 0; i < n; i++)
			y[i] = y[i] < 0 ? al * y[i] : y[i];
		return;
	case KACT_SIGMOID:
		for (uint64_t i = 0; i < n; i++)
			y[i] = 1.0f / (1.0f + expf(-y[i]));
		return;
	case KACT_HSIGMOID:
		for (uint64_t i = 0; i < n; i++) {
			float t = al * y[i] + be;
			y[i] = t < 0 ? 0 : t > 1 ? 1 : t;
		}
		return;
	case KACT_HSWISH:
		for (uint64_t i = 0; i < n; i++) {
			float t = y[i] / 6.0f + 0.5f;
			y[i] = y[i] * (t < 0 ? 0 : t > 1 ? 1 : t);
		}
		return;
	case KACT_TANH:
		for (uint64_t i = 0; i < n; i++)
			y[i] = tanhf(y[i]);
		return;
	case KACT_GELU:
		if (a->p0 == 0) {   /* the erf form: Gelu's own float32 path */
			cpu_fast_f32(CPU_FAST_GELU, y, y, (int64_t)n);
			return;
		}
		/* fall through */
	default:
		for (uint64_t i = 0; i < n; i++)
			y[i] = (float)act_f64(a, y[i]);
		return;
	}
}

static bool supports_fused(const struct ir_node *n, char *why, size_t size)
{
	struct kern_act a;
	return kern_act_of(n, &a, why, size);
}

/* y += z (same shape, or no z) and the activation, float32, elements
 * [begin, end) of a range the pool hands out: each element on its own, so
 * any split gives the same bits. */
struct epi_job {
	const struct kern_act *a;
	float *y;
	const float *z;          /* NULL: no residual */
	uint64_t n;              /* elements of y */
};

#define EPI_CHUNK 4096   /* elements per index of epi_range */

static void epi_range(void *ctx, int64_t begin, int64_t end, int worker)
{
	const struct epi_job *j = ctx;
	(void)worker;
	uint64_t i0 = (uint64_t)begin * EPI_CHUNK, i1 = (uint64_t)end * EPI_CHUNK;
	if (i1 > j->n)
		i1 = j->n;
	float *y = j->y + i0;
	if (j->z) {
		const float *z = j->z + i0;
		for (uint64_t i = 0; i < i1 - i0; i++)
			y[i] += z[i];
	}
	act_f32(j->a, y, i1 - i0);
}

/*
 * Adds Z (input zi, when present) and applies the activation to output 0
 * in place. Z must have Y's element type and broadcast to Y's shape.
 */
static int finish(struct cpu_kctx *k, int zi)
{
	char why[200];
	struct kern_act a;
	if (!kern_act_of(k->node, &a, why, sizeof(why)))
		return kerr(k, "%s", why);
	struct ir_tensor *y = k->out[0].kind == KV_TENSOR ? k->out[0].t : NULL;
	if (!y)
		return kerr(k, "the fused op made no output");
	int dt = y->dtype;
	if (!ir_dtype_is_float(dt))
		return kerr(k, "a fused activation needs a floating-point output, not %s", ir_dtype_name(dt));
	void *yd = kwdata(y);
	if (!y->numel || !yd)
		return 0;
	const struct ir_tensor *z = zi >= 0 ? kin(k, zi) : NULL;
	if (z) {
		if (z->dtype != dt)
			return kerr(k, "Z is %s but the output is %s", ir_dtype_name(z->dtype), ir_dtype_name(dt));
		bool ok = z->rank <= y->rank;
		for (int j = 0; ok && j < z->rank; j++) {
			int64_t d = z->dims[j], o = y->dims[y->rank - z->rank + j];
			ok = d == o || d == 1;
		}
		if (!ok)
			return kerr(k, "Z of shape %s does not broadcast to the output's shape", kshape(z));
		const void *zd = kdata(z);
		if (dt == IR_FLOAT && z->numel == y->numel) {
			/* the common case (a residual): one pass, split */
			struct epi_job j = { &a, yd, zd, y->numel };
			cpu_parallel_for((int64_t)((y->numel + EPI_CHUNK - 1) / EPI_CHUNK), 1, epi_range, &j);
			return 0;
		}
		if (z->numel == y->numel) {
			for (uint64_t i = 0; i < y->numel; i++)
				kst(dt, yd, i, kld(dt, yd, i) + kld(dt, zd, i));
		} else if (z->numel) {
			struct kiter it;
			int64_t st[IR_MAX_RANK];
			kbcast_strides(z, y->rank, y->dims, st);
			kiter_init(&it, y->rank, y->dims);
			int op = kiter_add(&it, st);
			for (uint64_t i = 0; i < y->numel; i++, kiter_next(&it)) {
				uint64_t o = (uint64_t)it.off[op];
				if (dt == IR_FLOAT)
					((float *)yd)[i] += ((const float *)zd)[o];
				else
					kst(dt, yd, i, kld(dt, yd, i) + kld(dt, zd, o));
			}
		}
	}
	if (a.kind == KACT_NONE)
		return 0;
	if (dt == IR_FLOAT) {
		struct epi_job j = { &a, yd, NULL, y->numel };
		cpu_parallel_for((int64_t)((y->numel + EPI_CHUNK - 1) / EPI_CHUNK), 1, epi_range, &j);
	} else
		for (uint64_t i = 0; i < y->numel; i++)
			kst(dt, yd, i, act_f64(&a, kld(dt, yd, i)));
	return 0;
}

/* The fused node run as the op it extends (inputs [0, n_in) only). */
static int run_as(struct cpu_kctx *k, int op, int n_in)
{
	cpu_kernel_fn fn = cpu_kernel(op);
	if (!fn)
		return kerr(k, "no %s kernel", ir_ops[op].name);
	struct cpu_kctx sub = *k;
	if (sub.n_in > n_in)
		sub.n_in = n_in;
	int rc = fn(&sub);
	k->impl = sub.impl;
	return rc;
}

/* The activations the products apply as they finish (struct cpu_epi);
 * GELU's erf form (act_f32's cpu_fast_f32 path) only where gelu (the
 * Gemm's products know it, the convolutions do not). */
static bool epi_of(const struct kern_act *a, struct cpu_epi *e, bool gelu)
{
	memset(e, 0, sizeof(*e));
	switch (a->kind) {
	case KACT_NONE: e->act = CPU_EPI_NONE; return true;
	case KACT_RELU: e->act = CPU_EPI_RELU; return true;
	case KACT_CLIP:
		e->act = CPU_EPI_CLIP;
		e->lo = (float)a->p0;
		e->hi = (float)a->p1;
		return true;
	case KACT_GELU:
		e->act = CPU_EPI_GELU;
		return gelu && a->p0 == 0;
	default: return false;
	}
}

/* The fused node run as `op` (Conv or Gemm), whose products apply a
 * float32 residual of the output's shape and a Relu or Clip (and for the
 * Gemm, gelu: GELU's erf form) to each tile as it finishes; anything else
 * (or a path of the op that does not) is finished in a pass after. */
static int run_fused(struct cpu_kctx *k, int op, bool gelu)
{
	char why[200];
	struct kern_act a;
	struct cpu_epi e;
	const struct ir_tensor *z = kin(k, 3);
	if (kern_act_of(k->node, &a, why, sizeof(why)) && epi_of(&a, &e, gelu) && (!z || z->dtype == IR_FLOAT)) {
		e.zt = z;
		e.z = z ? kdata(z) : NULL;
		struct cpu_kctx sub = *k;
		sub.epi = &e;
		int rc = run_as(&sub, op, 3);
		k->impl = sub.impl;
		if (rc || e.done)
			return rc;
		return finish(k, 3);
	}
	int rc = run_as(k, op, 3);
	return rc ? rc : finish(k, 3);
}

static int k_fusedconv(struct cpu_kctx *k)
{
	return run_fused(k, IR_OP_Conv, false);
}

/* FusedGemm: its products know GELU too (k_gemm.c) */
static int k_fusedgemm(struct cpu_kctx *k)
{
	return run_fused(k, IR_OP_Gemm, true);
}

/* ------------------------------------------------------------------------ */
/* Pointwise: the expression                                                 */
/* ------------------------------------------------------------------------ */

static bool supports_pointwise(const struct ir_node *n, char *why, size_t size)
{
	const struct ir_attr *e = ir_node_attr(n, "expr");
	if (!e || e->type != IR_ATTR_STRING || !e->s.data) {
		snprintf(why, size, "has no 'expr' attribute");
		return false;
	}
	struct pw_prog *P = malloc(sizeof(*P));
	if (!P) {
		snprintf(why, size, "out of memory");
		return false;
	}
	bool ok = pw_compile(P, e->s.data);
	if (!ok)
		snprintf(why, size, "cannot read expr '%.60s': %s", e->s.data, P->err);
	else if (n->n_inputs > 64) {
		snprintf(why, size, "has %d inputs, more than 64", n->n_inputs);
		ok = false;
	} else if (P->max_in >= n->n_inputs) {
		snprintf(why, size, "expr reads x%d but the node has %d inputs", P->max_in, n->n_inputs);
		ok = false;
	}
	free(P);
	if (!ok)
		return false;
	int64_t dt = ir_node_attr_int(n, "dtype", IR_FLOAT);
	if (dt != IR_FLOAT && dt != IR_DOUBLE && dt != IR_FLOAT16 && dt != IR_BFLOAT16) {
		snprintf(why, size, "dtype %lld is not float32, float64, float16 or bfloat16", (long long)dt);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Pointwise: running it                                                     */
/* ------------------------------------------------------------------------ */

#define PW_BLK 256

/* The program over a block of nb elements; in[i] holds input i's block. */
#define PW_RUN(NAME, T, EXP, LOG, SQRT, TANH, ERF, POW)                                                  \
static void NAME(const struct pw_prog *P, T *const *in, T *st, int nb, T *out)                          \
{                                                                                                       \
	int sp = 0;                                                                                     \
	for (int c = 0; c < P->n; c++) {                                                                \
		const struct pw_ins *I = &P->code[c];                                                   \
		T *b = st + (size_t)sp * PW_BLK, *a = sp > 0 ? b - PW_BLK : st;                         \
		switch (I->op) {                                                                        \
		case PW_IN: memcpy(b, in[I->in], (size_t)nb * sizeof(T)); sp++; break;                  \
		case PW_LIT: for (int i = 0; i < nb; i++) b[i] = (T)I->lit; sp++; break;                \
		case PW_NEG: for (int i = 0; i < nb; i++) a[i] = -a[i]; break;                          \
		case PW_ABS: for (int i = 0; i < nb; i++) a[i] = a[i] < 0 ? -a[i] : a[i]; break;        \
		case PW_EXP: VEXP(a, nb); break;                                                        \
		case PW_LOG: for (int i = 0; i < nb; i++) a[i] = LOG(a[i]); break;                      \
		case PW_SQRT: for (int i = 0; i < nb; i++) a[i] = SQRT(a[i]); break;                    \
		case PW_SIGMOID: VSIGMOID(a, nb); break;                                                \
		case PW_TANH: VTANH(a, nb); break;                                                      \
		case PW_RELU: for (int i = 0; i < nb; i++) a[i] = a[i] < 0 ? 0 : a[i]; break;           \
		case PW_ERF: VERF(a, nb); break;                                                        \
		default: {                                                                              \
			T *r = a, *l = sp > 1 ? a - PW_BLK : st;                                        \
			switch (I->op) {                                                                \
			case PW_ADD: for (int i = 0; i < nb; i++) l[i] += r[i]; break;                  \
			case PW_SUB: for (int i = 0; i < nb; i++) l[i] -= r[i]; break;                  \
			case PW_MUL: for (int i = 0; i < nb; i++) l[i] *= r[i]; break;                  \
			case PW_DIV: for (int i = 0; i < nb; i++) l[i] /= r[i]; break;                  \
			case PW_POW: for (int i = 0; i < nb; i++) l[i] = POW(l[i], r[i]); break;        \
			case PW_MAX:                                                                    \
				for (int i = 0; i < nb; i++)                                            \
					l[i] = isnan(l[i]) || isnan(r[i]) ? l[i] + r[i] : l[i] > r[i] ? l[i] : r[i]; \
				break;                                                                  \
			case PW_MIN:                                                                    \
				for (int i = 0; i < nb; i++)                                            \
					l[i] = isnan(l[i]) || isnan(r[i]) ? l[i] + r[i] : l[i] < r[i] ? l[i] : r[i]; \
				break;                                                                  \
			}                                                                               \
			sp--;                                                                           \
		}                                                                                       \
		}                                                                                       \
	}                                                                                               \
	memcpy(out, st, (size_t)nb * sizeof(T));                                                        \
}

/* exp, sigmoid, tanh and erf over a block in place: float32 through the
 * unary ops' vectorized paths (computed in double, rounded once), double
 * through libm */
static void pw_exp_f32(float *a, int n) { cpu_fast_f32(CPU_FAST_EXP, a, a, n); }
static void pw_sigmoid_f32(float *a, int n) { cpu_fast_f32(CPU_FAST_SIGMOID, a, a, n); }
static void pw_tanh_f32(float *a, int n) { cpu_fast_f32(CPU_FAST_TANH, a, a, n); }
static void pw_erf_f32(float *a, int n) { cpu_fast_f32(CPU_FAST_ERF, a, a, n); }
static void pw_exp_f64(double *a, int n) { for (int i = 0; i < n; i++) a[i] = exp(a[i]); }
static void pw_sigmoid_f64(double *a, int n) { for (int i = 0; i < n; i++) a[i] = 1 / (1 + exp(-a[i])); }
static void pw_tanh_f64(double *a, int n) { for (int i = 0; i < n; i++) a[i] = tanh(a[i]); }
static void pw_erf_f64(double *a, int n) { for (int i = 0; i < n; i++) a[i] = erf(a[i]); }

#define VEXP pw_exp_f32
#define VSIGMOID pw_sigmoid_f32
#define VTANH pw_tanh_f32
#define VERF pw_erf_f32
PW_RUN(pw_run_f32, float, expf, logf, sqrtf, tanhf, erff, powf)
#undef VEXP
#undef VSIGMOID
#undef VTANH
#undef VERF
#define VEXP pw_exp_f64
#define VSIGMOID pw_sigmoid_f64
#define VTANH pw_tanh_f64
#define VERF pw_erf_f64
PW_RUN(pw_run_f64, double, exp, log, sqrt, tanh, erf, pow)
#undef VEXP
#undef VSIGMOID
#undef VTANH
#undef VERF

/* How an input is read: as long as the output (same shape), one value, or broadcast. */
enum { PW_FULL, PW_SCALAR, PW_BCAST };

struct pw_job {
	const struct pw_prog *P;
	const struct ir_tensor **x;
	int n_in;
	const int *kind;
	const int64_t (*strides)[IR_MAX_RANK];
	int rank;
	const int64_t *dims;
	bool f32;
	int dt;
	void *od;
	uint64_t total;
	void *stack;           /* per worker, stack_size bytes */
	size_t stack_size;
	void **inp;            /* per worker, n_in block pointers */
};

/* the blocks [b0, b1) of PW_BLK output elements of a Pointwise */
static void pw_blocks(void *ctx, int64_t b0, int64_t b1, int worker)
{
	const struct pw_job *j = ctx;
	const struct pw_prog *P = j->P;
	const struct ir_tensor **x = j->x;
	const int n_in = j->n_in, rank = j->rank, dt = j->dt, *kind = j->kind;
	const int64_t (*strides)[IR_MAX_RANK] = j->strides;
	const int64_t *dims = j->dims;
	const bool f32 = j->f32;
	const uint64_t total = j->total;
	void *od = j->od;
	void *stack = (char *)j->stack + (size_t)worker * j->stack_size;
	void **inp = j->inp + (size_t)worker * (size_t)n_in;
	float ob32[PW_BLK];
	double ob64[PW_BLK];
	int64_t idx[IR_MAX_RANK];
	int64_t off[64];
	for (int64_t blk = b0; blk < b1; blk++) {
		uint64_t base = (uint64_t)blk * PW_BLK;
		int nb = (int)(total - base < PW_BLK ? total - base : PW_BLK);
		/* the output index of `base`, for broadcast inputs */
		bool any_bcast = false;
		for (int i = 0; i < n_in; i++)
			any_bcast = any_bcast || kind[i] == PW_BCAST;
		if (any_bcast) {
			uint64_t r = base;
			for (int d = rank - 1; d >= 0; d--) {
				idx[d] = dims[d] ? (int64_t)(r % (uint64_t)dims[d]) : 0;
				r = dims[d] ? r / (uint64_t)dims[d] : 0;
			}
		}
		for (int i = 0; i < n_in; i++) {
			const void *src = kdata(x[i]);
			if (kind[i] == PW_FULL) {
				if (f32)
					memcpy(inp[i], (const float *)src + base, (size_t)nb * sizeof(float));
				else
					for (int e = 0; e < nb; e++)
						((double *)inp[i])[e] = kld(x[i]->dtype, src, base + (uint64_t)e);
			} else if (kind[i] == PW_SCALAR) {
				if (f32)
					for (int e = 0; e < nb; e++)
						((float *)inp[i])[e] = ((const float *)src)[0];
				else {
					double v = kld(x[i]->dtype, src, 0);
					for (int e = 0; e < nb; e++)
						((double *)inp[i])[e] = v;
				}
			}
		}
		if (any_bcast) {
			/* walk the block's indices once, filling every broadcast input */
			int nbi = 0, which[64];
			for (int i = 0; i < n_in && nbi < 64; i++)
				if (kind[i] == PW_BCAST)
					which[nbi++] = i;
			for (int q = 0; q < nbi; q++) {
				int64_t s = 0;
				for (int d = 0; d < rank; d++)
					s += idx[d] * strides[which[q]][d];
				off[q] = s;
			}
			/* in runs along the last dim: a copy (stride 1), a
			 * fill (stride 0) or a strided loop, then the carry */
			const int L = rank - 1;
			for (int e = 0; e < nb;) {
				int run = (int)(dims[L] - idx[L] < nb - e ? dims[L] - idx[L] : nb - e);
				for (int q = 0; q < nbi; q++) {
					int i = which[q];
					int64_t st = strides[i][L], o0 = off[q];
					if (f32) {
						const float *src = (const float *)kdata(x[i]) + o0;
						float *dst = (float *)inp[i] + e;
						if (st == 1)
							memcpy(dst, src, (size_t)run * sizeof(float));
						else
							for (int t = 0; t < run; t++)
								dst[t] = src[t * st];
					} else {
						double *dst = (double *)inp[i] + e;
						for (int t = 0; t < run; t++)
							dst[t] = kld(x[i]->dtype, kdata(x[i]), (uint64_t)(o0 + t * st));
					}
					off[q] += st * run;
				}
				e += run;
				idx[L] += run;
				if (idx[L] < dims[L])
					continue;
				/* the last dim wrapped: carry into the others */
				for (int q = 0; q < nbi; q++)
					off[q] -= strides[which[q]][L] * dims[L];
				idx[L] = 0;
				for (int d = L - 1; d >= 0; d--) {
					for (int q = 0; q < nbi; q++)
						off[q] += strides[which[q]][d];
					if (++idx[d] < dims[d])
						break;
					for (int q = 0; q < nbi; q++)
						off[q] -= strides[which[q]][d] * dims[d];
					idx[d] = 0;
				}
			}
		}
		if (f32) {
			pw_run_f32(P, (float *const *)inp, stack, nb, ob32);
			memcpy((float *)od + base, ob32, (size_t)nb * sizeof(float));
		} else {
			pw_run_f64(P, (double *const *)inp, stack, nb, ob64);
			for (int e = 0; e < nb; e++)
				kst(dt, od, base + (uint64_t)e, ob64[e]);
		}
	}
}

static int k_pointwise(struct cpu_kctx *k)
{
	char why[256];
	if (!supports_pointwise(k->node, why, sizeof(why)))
		return kerr(k, "%s", why);
	int n_in = k->n_in;
	if (n_in < 1)
		return kerr(k, "pointwise needs inputs");
	const struct ir_tensor **x = calloc((size_t)n_in, sizeof(*x));
	struct pw_prog *P = malloc(sizeof(*P));
	if (!x || !P) {
		free(x);
		free(P);
		return kenomem(k);
	}
	int rc = 0;
	void *stack = NULL, *inb = NULL;
	int64_t(*strides)[IR_MAX_RANK] = NULL;
	int *kind = NULL;
	pw_compile(P, kattr_s(k, "expr", ""));
	for (int i = 0; i < n_in; i++) {
		if (!(x[i] = kin_req(k, i))) {
			rc = IR_ERR;
			goto out;
		}
		if (!ir_dtype_is_float(x[i]->dtype)) {
			rc = kerr(k, "input %d is %s, not a float type", i, ir_dtype_name(x[i]->dtype));
			goto out;
		}
	}
	int dt = (int)kattr_i(k, "dtype", x[0]->dtype);
	int rank;
	int64_t dims[IR_MAX_RANK];
	if ((rc = kbcast_shape(k, n_in, x, &rank, dims)))
		goto out;
	struct ir_tensor *o = kout(k, 0, dt, rank, dims);
	if (!o) {
		rc = IR_ERR;
		goto out;
	}
	uint64_t total = o->numel;
	if (!total)
		goto out;
	bool f32 = dt == IR_FLOAT;
	for (int i = 0; f32 && i < n_in; i++)
		f32 = x[i]->dtype == IR_FLOAT;
	size_t esz = f32 ? sizeof(float) : sizeof(double);
	int depth = P->max_depth > 0 ? P->max_depth : 1;
	size_t threads = (size_t)cpu_threads();
	/* per worker: an evaluation stack, input blocks and pointers to them */
	stack = malloc(threads * (size_t)depth * PW_BLK * esz);
	inb = malloc(threads * (size_t)n_in * PW_BLK * esz);
	strides = calloc((size_t)n_in, sizeof(*strides));
	kind = calloc((size_t)n_in, sizeof(int));
	void **inp = calloc(threads * (size_t)n_in, sizeof(void *));
	if (!stack || !inb || !strides || !kind || !inp) {
		free(inp);
		rc = kenomem(k);
		goto out;
	}
	for (int i = 0; i < n_in; i++) {
		kind[i] = x[i]->numel == total ? PW_FULL : x[i]->numel == 1 ? PW_SCALAR : PW_BCAST;
		if (kind[i] == PW_BCAST)
			kbcast_strides(x[i], rank, dims, strides[i]);
	}
	for (size_t w = 0; w < threads; w++)
		for (int i = 0; i < n_in; i++)
			inp[w * (size_t)n_in + (size_t)i] = (char *)inb + (w * (size_t)n_in + (size_t)i) * PW_BLK * esz;
	struct pw_job j = { P, x, n_in, kind, strides, rank, dims, f32, dt, kwdata(o), total, stack,
			    (size_t)depth * PW_BLK * esz, inp };
	int64_t nblocks = (int64_t)((total + PW_BLK - 1) / PW_BLK);
	rc = kpar(k, nblocks, kgrain(PW_BLK * (int64_t)(P->n > 0 ? P->n : 1)), pw_blocks, &j);
	free(inp);
out:
	free(x);
	free(P);
	free(stack);
	free(inb);
	free(strides);
	free(kind);
	return rc;
}

const struct cpu_kernel cpu_kernels_fused[] = {
	{ IR_OP_ogsh_FusedConv, k_fusedconv, supports_fused },
	{ IR_OP_ogsh_FusedGemm, k_fusedgemm, supports_fused },
	{ IR_OP_ogsh_Pointwise, k_pointwise, supports_pointwise },
	{ -1, NULL, NULL },
};
