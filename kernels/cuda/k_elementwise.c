/*
 * k_elementwise.c - GPU kernel entries of the elementwise family (launchers in k_elementwise.cu).
 *
 * Unary math and activations, binary arithmetic/comparisons/logic with
 * numpy broadcasting, the variadic Sum/Mean/Max/Min, Clip, Where, Cast,
 * CastLike, inference Dropout, and ai.ogsh Pointwise: its expression is
 * compiled at prepare into a small register program; that program is then
 * turned into CUDA C and compiled with NVRTC (opened with dlopen) into a
 * kernel of its own, cached per source text; when NVRTC is missing or fails
 * (or OGSH_NO_NVRTC is set), one interpreter kernel runs the program.
 *
 * Float types (float32, float16, bfloat16) are computed in float and
 * rounded once; integer types (int32, int64) exactly, like the CPU
 * reference (kernels/cpu/k_elementwise.c), whose semantics these follow.
 */
#include "kernels/cuda/cuda.h"
#include "kernels/fused.h"
#include "kernels/cuda/k_elementwise.h"

#include <ctype.h>
#include <stdarg.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static bool has_in(const struct cuda_kctx *k, int i)
{
	return i < k->n_in && k->in[i].dtype != 0;
}

static bool has_out(const struct cuda_kctx *k, int i)
{
	return i < k->n_out && k->out[i].dtype != 0;
}

static bool is_fl(int dt)
{
	return dt == IR_FLOAT || dt == IR_FLOAT16 || dt == IR_BFLOAT16;
}

static bool is_i(int dt)
{
	return dt == IR_INT32 || dt == IR_INT64;
}

static bool refuse_dtype(int dt, char *why, size_t size)
{
	snprintf(why, size, "dtype %s is not supported on the GPU", ir_dtype_name(dt));
	return false;
}

static const char *attr_s(const struct ir_node *n, const char *name, const char *dflt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	return a && a->type == IR_ATTR_STRING && a->s.data ? a->s.data : dflt;
}

/* "ogsh WHAT opname[ SUFFIX]" into k->impl, the op name in lowercase */
static void set_impl(struct cuda_kctx *k, const char *what, const char *suffix)
{
	char name[48];
	const char *s = ir_ops[k->node->op].name;
	size_t i = 0;
	for (; s && s[i] && i + 1 < sizeof(name); i++)
		name[i] = (char)tolower((unsigned char)s[i]);
	name[i] = 0;
	snprintf(k->impl, sizeof(k->impl), "ogsh %s %s%s%s", what, name, suffix ? " " : "", suffix ? suffix : "");
}

/* The value of a constant scalar input as a double (float or integer types). */
static bool host_scalar(const struct cuda_tensor *t, double *v)
{
	if (!t->host || t->host->numel != 1)
		return false;
	const void *p = ir_tensor_data(t->host);
	if (!p)
		return false;
	switch (t->host->dtype) {
	case IR_FLOAT: { float f; memcpy(&f, p, 4); *v = f; return true; }
	case IR_DOUBLE: { double f; memcpy(&f, p, 8); *v = f; return true; }
	case IR_FLOAT16: { uint16_t h; memcpy(&h, p, 2); *v = ir_f16_to_f32(h); return true; }
	case IR_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); *v = ir_bf16_to_f32(h); return true; }
	case IR_INT64: { int64_t x; memcpy(&x, p, 8); *v = (double)x; return true; }
	case IR_INT32: { int32_t x; memcpy(&x, p, 4); *v = x; return true; }
	case IR_INT8: { int8_t x; memcpy(&x, p, 1); *v = x; return true; }
	case IR_UINT8: case IR_BOOL: { uint8_t x; memcpy(&x, p, 1); *v = x; return true; }
	default: return false;
	}
}

/*
 * The broadcast shape of `n` operands (dims right-aligned to the output's),
 * with dims of 1 dropped and dims merged where every operand walks them as
 * one run, as the CPU plan does. False with why when an operand does not
 * broadcast to the output or more than EW_MAX_RANK dims remain.
 */
static bool make_shape(const struct cuda_tensor *out, int n, const int *ranks, const int64_t *const *dims,
		       struct ew_shape *sh, char *why, size_t size)
{
	memset(sh, 0, sizeof(*sh));
	int rank = out->rank;
	const int64_t *od = out->dims;
	int64_t st[EW_MAX_ARGS][IR_MAX_RANK];
	sh->nargs = n;
	sh->n = cuda_numel(out);
	sh->flat = true;
	for (int o = 0; o < n; o++) {
		if (ranks[o] > rank) {
			snprintf(why, size, "input %d has rank %d, more than the output's %d", o, ranks[o], rank);
			return false;
		}
		int64_t s = 1, numel = 1;
		for (int j = rank - 1; j >= 0; j--) {
			int oj = j - (rank - ranks[o]);
			int64_t d = oj < 0 ? 1 : dims[o][oj];
			if (d != 1 && d != od[j]) {
				snprintf(why, size, "input %d does not broadcast to the output's shape", o);
				return false;
			}
			numel *= d;
			if (d == 1) {
				st[o][j] = 0;
			} else {
				st[o][j] = s;
				s *= d;
			}
		}
		sh->scalar[o] = numel == 1;
		if (numel != 1 && numel != sh->n)
			sh->flat = false;
	}
	int r = 0;
	for (int j = 0; j < rank; j++) {
		if (od[j] == 1)
			continue;
		bool merge = r > 0;
		for (int o = 0; o < n && merge; o++)
			if (sh->st[o][r - 1] != st[o][j] * od[j])
				merge = false;
		if (merge) {
			sh->dims[r - 1] *= od[j];
			for (int o = 0; o < n; o++)
				sh->st[o][r - 1] = st[o][j];
			continue;
		}
		if (r >= EW_MAX_RANK) {
			snprintf(why, size, "the broadcast has more than %d dims", EW_MAX_RANK);
			return false;
		}
		sh->dims[r] = od[j];
		for (int o = 0; o < n; o++)
			sh->st[o][r] = st[o][j];
		r++;
	}
	if (r == 0) {
		sh->dims[0] = 1;
		for (int o = 0; o < n; o++)
			sh->st[o][0] = 0;
		r = 1;
	}
	sh->rank = r;
	return true;
}

/* make_shape over inputs first..first+n-1 of k as they are. */
static bool shape_of_inputs(const struct cuda_kctx *k, int first, int n, struct ew_shape *sh, char *why, size_t size)
{
	int ranks[EW_MAX_ARGS];
	const int64_t *dims[EW_MAX_ARGS];
	for (int i = 0; i < n; i++) {
		ranks[i] = k->in[first + i].rank;
		dims[i] = k->in[first + i].dims;
	}
	return make_shape(&k->out[0], n, ranks, dims, sh, why, size);
}

static int fail(struct cuda_kctx *k, const char *why)
{
	return ir_diag_err(k->d, IR_ERR, "%s", why);
}

static int launched(cudaError_t e, const char *name, struct cuda_kctx *k)
{
	return cuda_check(e, name, k->d);
}

/* ------------------------------------------------------------------------ */
/* Unary                                                                     */
/* ------------------------------------------------------------------------ */

/* The kernel op of a unary node, its parameters, and whether integers (int32,
 * int64) are allowed; -1 when not unary. */
static int unary_of(const struct ir_node *n, float *a, float *b, float *c, bool *ints)
{
	*a = *b = *c = 0;
	*ints = false;
	switch (n->op) {
	case IR_OP_Relu: *ints = true; return EU_RELU;
	case IR_OP_Neg: *ints = true; return EU_NEG;
	case IR_OP_Abs: *ints = true; return EU_ABS;
	case IR_OP_Sign: *ints = true; return EU_SIGN;
	case IR_OP_LeakyRelu: *a = ir_node_attr_float(n, "alpha", 0.01f); return EU_LEAKY;
	case IR_OP_Sigmoid: return EU_SIGMOID;
	case IR_OP_HardSigmoid:
		*a = ir_node_attr_float(n, "alpha", 0.2f);
		*b = ir_node_attr_float(n, "beta", 0.5f);
		return EU_HSIGMOID;
	case IR_OP_HardSwish: return EU_HSWISH;
	case IR_OP_Tanh: return EU_TANH;
	case IR_OP_Exp: return EU_EXP;
	case IR_OP_Log: return EU_LOG;
	case IR_OP_Sqrt: return EU_SQRT;
	case IR_OP_Reciprocal: return EU_RECIP;
	case IR_OP_Erf: return EU_ERF;
	case IR_OP_Gelu: case IR_OP_ogsh_Gelu: return strcmp(attr_s(n, "approximate", "none"), "tanh") ? EU_GELU : EU_GELU_TANH;
	case IR_OP_Elu: *a = ir_node_attr_float(n, "alpha", 1.0f); return EU_ELU;
	case IR_OP_Selu:
		*a = ir_node_attr_float(n, "alpha", 1.67326319217681884765625f);
		*c = ir_node_attr_float(n, "gamma", 1.05070102214813232421875f);
		return EU_SELU;
	case IR_OP_Celu: *a = ir_node_attr_float(n, "alpha", 1.0f); return EU_CELU;
	case IR_OP_Softplus: return EU_SOFTPLUS;
	case IR_OP_Softsign: return EU_SOFTSIGN;
	case IR_OP_Mish: return EU_MISH;
	case IR_OP_Sin: return EU_SIN;
	case IR_OP_Cos: return EU_COS;
	case IR_OP_Tan: return EU_TAN;
	case IR_OP_Asin: return EU_ASIN;
	case IR_OP_Acos: return EU_ACOS;
	case IR_OP_Atan: return EU_ATAN;
	case IR_OP_Sinh: return EU_SINH;
	case IR_OP_Cosh: return EU_COSH;
	case IR_OP_Asinh: return EU_ASINH;
	case IR_OP_Acosh: return EU_ACOSH;
	case IR_OP_Atanh: return EU_ATANH;
	case IR_OP_Floor: return EU_FLOOR;
	case IR_OP_Ceil: return EU_CEIL;
	case IR_OP_Round: return EU_ROUND;
	case IR_OP_Swish: *a = ir_node_attr_float(n, "alpha", 1.0f); return EU_SWISH;
	case IR_OP_ThresholdedRelu: *a = ir_node_attr_float(n, "alpha", 1.0f); return EU_THRELU;
	case IR_OP_Shrink:
		*a = ir_node_attr_float(n, "lambd", 0.5f);
		*b = ir_node_attr_float(n, "bias", 0.0f);
		return EU_SHRINK;
	default: return -1;
	}
}

static bool sup_unary(const struct cuda_kctx *k, char *why, size_t size)
{
	float a, b, c;
	bool ints;
	int op = unary_of(k->node, &a, &b, &c, &ints);
	if (op < 0 || !has_in(k, 0)) {
		snprintf(why, size, "not a unary op");
		return false;
	}
	int dt = k->in[0].dtype;
	if (!is_fl(dt) && !(ints && is_i(dt)))
		return refuse_dtype(dt, why, size);
	if (k->out[0].dtype != dt)
		return refuse_dtype(k->out[0].dtype, why, size);
	if (k->node->op == IR_OP_Gelu || k->node->op == IR_OP_ogsh_Gelu) {
		const char *s = attr_s(k->node, "approximate", "none");
		if (strcmp(s, "none") && strcmp(s, "tanh")) {
			snprintf(why, size, "approximate '%s' is not none or tanh", s);
			return false;
		}
	}
	if (k->node->op == IR_OP_Celu && a == 0) {
		snprintf(why, size, "alpha must not be 0");
		return false;
	}
	return true;
}

static int run_unary(struct cuda_kctx *k)
{
	float a, b, c;
	bool ints;
	int op = unary_of(k->node, &a, &b, &c, &ints);
	int dt = k->in[0].dtype;
	int64_t n = cuda_numel(&k->out[0]);
	set_impl(k, "unary", NULL);
	if (op < 0)
		return fail(k, "not a unary op");
	if (is_i(dt))
		return launched(ew_unary_int(op, dt, k->in[0].data, k->out[0].data, n, k->ctx->stream), "ew_unary_int", k);
	return launched(ew_unary(op, dt, k->in[0].data, k->out[0].data, n, a, b, c, k->ctx->stream), "ew_unary", k);
}

/* Not: bool only */
static bool sup_not(const struct cuda_kctx *k, char *why, size_t size)
{
	if (!has_in(k, 0) || k->in[0].dtype != IR_BOOL)
		return refuse_dtype(has_in(k, 0) ? k->in[0].dtype : 0, why, size);
	return true;
}

static int run_not(struct cuda_kctx *k)
{
	set_impl(k, "unary", NULL);
	return launched(ew_not(k->in[0].data, k->out[0].data, cuda_numel(&k->out[0]), k->ctx->stream), "ew_not", k);
}

/* IsNaN, IsInf: float types; integers are never NaN or inf (all false) */
static bool sup_isspecial(const struct cuda_kctx *k, char *why, size_t size)
{
	int dt = has_in(k, 0) ? k->in[0].dtype : 0;
	if (!is_fl(dt) && !is_i(dt) && dt != IR_INT8 && dt != IR_UINT8)
		return refuse_dtype(dt, why, size);
	return true;
}

static int run_isspecial(struct cuda_kctx *k)
{
	int dt = k->in[0].dtype;
	int64_t n = cuda_numel(&k->out[0]);
	set_impl(k, "unary", NULL);
	if (!is_fl(dt))
		return launched(ew_fill(k->out[0].data, 1, 0, n, k->ctx->stream), "ew_fill", k);
	bool nan = k->node->op == IR_OP_IsNaN;
	bool pos = ir_node_attr_int(k->node, "detect_positive", 1) != 0;
	bool neg = ir_node_attr_int(k->node, "detect_negative", 1) != 0;
	return launched(ew_isspecial(dt, nan, pos, neg, k->in[0].data, k->out[0].data, n, k->ctx->stream),
			"ew_isspecial", k);
}

/* Clip: bounds from attributes before opset 11, from (optional) scalar
 * inputs of X's type after; the inputs are read on the device, so they need
 * not be constants. */
static bool sup_clip(const struct cuda_kctx *k, char *why, size_t size)
{
	int dt = has_in(k, 0) ? k->in[0].dtype : 0;
	bool old = k->opset > 0 && k->opset < 11;
	if (!is_fl(dt) && !(is_i(dt) && !old))
		return refuse_dtype(dt, why, size);
	if (!old) {
		for (int i = 1; i <= 2; i++) {
			if (!has_in(k, i))
				continue;
			if (k->in[i].dtype != dt) {
				snprintf(why, size, "%s is %s, X is %s", i == 1 ? "min" : "max",
					 ir_dtype_name(k->in[i].dtype), ir_dtype_name(dt));
				return false;
			}
			if (cuda_numel(&k->in[i]) != 1) {
				snprintf(why, size, "%s is not a scalar", i == 1 ? "min" : "max");
				return false;
			}
		}
	}
	return true;
}

static int run_clip(struct cuda_kctx *k)
{
	int dt = k->in[0].dtype;
	int64_t n = cuda_numel(&k->out[0]);
	bool old = k->opset > 0 && k->opset < 11;
	const void *lo_p = NULL, *hi_p = NULL;
	bool has_lo = false, has_hi = false;
	double lo = 0, hi = 0;
	set_impl(k, "unary", NULL);
	if (old) {
		has_lo = has_hi = true;
		lo = ir_node_attr_float(k->node, "min", -INFINITY);
		hi = ir_node_attr_float(k->node, "max", INFINITY);
	} else {
		if (has_in(k, 1))
			lo_p = k->in[1].data;
		if (has_in(k, 2))
			hi_p = k->in[2].data;
	}
	return launched(ew_clip(dt, k->in[0].data, k->out[0].data, n, lo_p, hi_p, has_lo, lo, has_hi, hi,
				k->ctx->stream),
			"ew_clip", k);
}

/* Dropout in inference: Y = X, the mask (when asked for) all ones. */
static bool dropout_training(const struct cuda_kctx *k, bool *known)
{
	*known = true;
	if (k->opset >= 12) {
		if (!has_in(k, 2))
			return false;
		double v;
		if (!host_scalar(&k->in[2], &v)) {
			*known = false;
			return false;
		}
		return v != 0;
	}
	if (k->opset > 0 && k->opset < 7)
		return ir_node_attr_int(k->node, "is_test", 0) == 0;
	return false;
}

static bool sup_dropout(const struct cuda_kctx *k, char *why, size_t size)
{
	bool known;
	bool tr = dropout_training(k, &known);
	if (!known) {
		snprintf(why, size, "training_mode is not a constant");
		return false;
	}
	if (tr) {
		/* ratio 0 drops nothing: still the identity */
		double r = ir_node_attr_float(k->node, "ratio", 0.5f);
		if (k->opset >= 12 && has_in(k, 1) && !host_scalar(&k->in[1], &r)) {
			snprintf(why, size, "training mode is not supported on the GPU");
			return false;
		}
		if (r != 0) {
			snprintf(why, size, "training mode is not supported on the GPU");
			return false;
		}
	}
	int dt = has_in(k, 0) ? k->in[0].dtype : 0;
	int bits = ir_dtype_bits(dt);
	if (dt == IR_STRING || bits < 8 || bits % 8 || bits > 64)
		return refuse_dtype(dt, why, size);
	if (has_out(k, 1)) {
		int m = k->out[1].dtype;
		if (m != IR_BOOL && !is_fl(m) && m != IR_DOUBLE && !is_i(m))
			return refuse_dtype(m, why, size);
	}
	return true;
}

static uint64_t one_bits(int dt, int *esize)
{
	switch (dt) {
	case IR_FLOAT: *esize = 4; return 0x3f800000u;
	case IR_DOUBLE: *esize = 8; return 0x3ff0000000000000ull;
	case IR_FLOAT16: *esize = 2; return 0x3c00u;
	case IR_BFLOAT16: *esize = 2; return 0x3f80u;
	case IR_INT32: *esize = 4; return 1;
	case IR_INT64: *esize = 8; return 1;
	default: *esize = 1; return 1;   /* bool */
	}
}

static int run_dropout(struct cuda_kctx *k)
{
	int64_t n = cuda_numel(&k->out[0]);
	size_t bytes = (size_t)n * (size_t)(ir_dtype_bits(k->in[0].dtype) / 8);
	snprintf(k->impl, sizeof(k->impl), "ogsh dropout (identity)");
	if (bytes && k->out[0].data != k->in[0].data &&
	    cuda_check(cudaMemcpyAsync(k->out[0].data, k->in[0].data, bytes, cudaMemcpyDeviceToDevice, k->ctx->stream),
		       "cudaMemcpyAsync", k->d))
		return IR_ERR;
	if (has_out(k, 1) && k->out[1].data) {
		int es;
		uint64_t v = one_bits(k->out[1].dtype, &es);
		return launched(ew_fill(k->out[1].data, es, v, cuda_numel(&k->out[1]), k->ctx->stream), "ew_fill", k);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Binary                                                                    */
/* ------------------------------------------------------------------------ */

enum { C_FLOAT = 1, C_INT = 2, C_BOOL = 4, C_U8 = 8 };

/* The kernel op of a binary node and the dtype classes it takes; -1 if none. */
static int binary_of(const struct ir_node *n, unsigned *classes)
{
	*classes = C_FLOAT | C_INT;
	switch (n->op) {
	case IR_OP_Add: return EB_ADD;
	case IR_OP_Sub: return EB_SUB;
	case IR_OP_Mul: return EB_MUL;
	case IR_OP_Div: return EB_DIV;
	case IR_OP_Pow: return EB_POW;
	case IR_OP_Mod: return ir_node_attr_int(n, "fmod", 0) ? EB_FMOD : EB_MOD;
	case IR_OP_PRelu: return EB_PRELU;
	case IR_OP_BitwiseAnd: *classes = C_INT; return EB_BAND;
	case IR_OP_BitwiseOr: *classes = C_INT; return EB_BOR;
	case IR_OP_BitwiseXor: *classes = C_INT; return EB_BXOR;
	case IR_OP_Equal: *classes = C_FLOAT | C_INT | C_BOOL | C_U8; return EB_EQ;
	case IR_OP_Less: *classes = C_FLOAT | C_INT | C_BOOL | C_U8; return EB_LT;
	case IR_OP_LessOrEqual: *classes = C_FLOAT | C_INT | C_BOOL | C_U8; return EB_LE;
	case IR_OP_Greater: *classes = C_FLOAT | C_INT | C_BOOL | C_U8; return EB_GT;
	case IR_OP_GreaterOrEqual: *classes = C_FLOAT | C_INT | C_BOOL | C_U8; return EB_GE;
	case IR_OP_And: *classes = C_BOOL | C_INT | C_U8; return EB_AND;
	case IR_OP_Or: *classes = C_BOOL | C_INT | C_U8; return EB_OR;
	case IR_OP_Xor: *classes = C_BOOL | C_INT | C_U8; return EB_XOR;
	default: return -1;
	}
}

static bool class_ok(int dt, unsigned classes)
{
	return (is_fl(dt) && (classes & C_FLOAT)) || (is_i(dt) && (classes & C_INT)) ||
	       (dt == IR_BOOL && (classes & C_BOOL)) || (dt == IR_UINT8 && (classes & C_U8));
}

/* Pow of a float base by a constant scalar exponent (of any numeric type)
 * runs as a unary op. */
static bool pow_const(const struct cuda_kctx *k, double *e)
{
	return k->node->op == IR_OP_Pow && is_fl(k->in[0].dtype) && has_in(k, 1) && cuda_numel(&k->in[1]) == 1 &&
	       host_scalar(&k->in[1], e) && cuda_numel(&k->in[0]) == cuda_numel(&k->out[0]);
}

/*
 * PRelu's slope as a view: it broadcasts to X one way; a 1-D slope that does
 * not broadcast but matches exactly one axis of X applies along that axis
 * (as the CPU kernel and the ONNX reference allow). False when neither.
 */
static bool prelu_view(const struct cuda_kctx *k, int *rank, int64_t *dims)
{
	const struct cuda_tensor *x = &k->in[0], *s = &k->in[1];
	bool ok = s->rank <= x->rank;
	for (int j = 0; ok && j < s->rank; j++) {
		int64_t d = s->dims[j];
		if (d != 1 && d != x->dims[x->rank - s->rank + j])
			ok = false;
	}
	if (ok) {
		*rank = s->rank;
		memcpy(dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
		return true;
	}
	if (s->rank != 1 || x->rank > IR_MAX_RANK)
		return false;
	int hits = 0, at = -1;
	for (int j = 0; j < x->rank; j++)
		if (x->dims[j] == s->dims[0]) {
			hits++;
			at = j;
		}
	if (hits != 1)
		return false;
	for (int j = 0; j < x->rank; j++)
		dims[j] = j == at ? s->dims[0] : 1;
	*rank = x->rank;
	return true;
}

static bool binary_shape(const struct cuda_kctx *k, struct ew_shape *sh, char *why, size_t size)
{
	if (k->node->op != IR_OP_PRelu)
		return shape_of_inputs(k, 0, 2, sh, why, size);
	int64_t sdims[IR_MAX_RANK];
	int srank;
	if (!prelu_view(k, &srank, sdims)) {
		snprintf(why, size, "slope does not broadcast to X");
		return false;
	}
	int ranks[2] = { k->in[0].rank, srank };
	const int64_t *dims[2] = { k->in[0].dims, sdims };
	return make_shape(&k->out[0], 2, ranks, dims, sh, why, size);
}

static bool sup_binary(const struct cuda_kctx *k, char *why, size_t size)
{
	unsigned classes;
	int op = binary_of(k->node, &classes);
	if (op < 0 || !has_in(k, 0) || !has_in(k, 1)) {
		snprintf(why, size, "not a binary op with two inputs");
		return false;
	}
	int da = k->in[0].dtype, db = k->in[1].dtype;
	if (k->node->op == IR_OP_Mod) {
		int64_t fm = ir_node_attr_int(k->node, "fmod", 0);
		if (fm != 0 && fm != 1) {
			snprintf(why, size, "fmod must be 0 or 1");
			return false;
		}
	}
	double e;
	if (pow_const(k, &e))
		return k->out[0].dtype == da || refuse_dtype(k->out[0].dtype, why, size);
	if (!class_ok(da, classes))
		return refuse_dtype(da, why, size);
	if (da != db) {
		snprintf(why, size, "input types differ (%s and %s) and the exponent is not a constant scalar",
			 ir_dtype_name(da), ir_dtype_name(db));
		return false;
	}
	struct ew_shape sh;
	return binary_shape(k, &sh, why, size);
}

static int run_binary(struct cuda_kctx *k)
{
	char why[160];
	unsigned classes;
	int op = binary_of(k->node, &classes);
	double e;
	if (pow_const(k, &e)) {
		set_impl(k, "unary", "scalar exponent");
		return launched(ew_unary(EU_POWC, k->in[0].dtype, k->in[0].data, k->out[0].data, cuda_numel(&k->out[0]),
					 (float)e, 0, 0, k->ctx->stream),
				"ew_unary", k);
	}
	struct ew_shape sh;
	if (op < 0 || !binary_shape(k, &sh, why, sizeof(why)))
		return fail(k, op < 0 ? "not a binary op" : why);
	set_impl(k, "binary", sh.flat ? NULL : "bcast");
	return launched(ew_binary(op, k->in[0].dtype, k->in[0].data, k->in[1].data, k->out[0].data, &sh,
				  k->ctx->stream),
			"ew_binary", k);
}

/* ------------------------------------------------------------------------ */
/* Sum, Mean, Max, Min                                                       */
/* ------------------------------------------------------------------------ */

static bool sup_variadic(const struct cuda_kctx *k, char *why, size_t size)
{
	if (k->n_in < 1) {
		snprintf(why, size, "has no inputs");
		return false;
	}
	int dt = k->in[0].dtype;
	bool mean = k->node->op == IR_OP_Mean;
	if (!is_fl(dt) && !(is_i(dt) && !mean))
		return refuse_dtype(dt, why, size);
	int ranks[1];
	const int64_t *dims[1];
	for (int i = 0; i < k->n_in; i++) {
		if (k->in[i].dtype != dt) {
			snprintf(why, size, "input types differ: %s and %s", ir_dtype_name(dt),
				 ir_dtype_name(k->in[i].dtype));
			return false;
		}
		struct ew_shape sh;
		ranks[0] = k->in[i].rank;
		dims[0] = k->in[i].dims;
		if (!make_shape(&k->out[0], 1, ranks, dims, &sh, why, size))
			return false;
	}
	/* the merged shape of a group of inputs may keep more dims than each
	 * alone: check the groups run() makes */
	for (int first = 0; first < k->n_in;) {
		int cnt = first == 0 ? (k->n_in < EW_MAX_ARGS ? k->n_in : EW_MAX_ARGS) : 0;
		int ranksg[EW_MAX_ARGS];
		const int64_t *dimsg[EW_MAX_ARGS];
		int g = 0;
		if (first > 0) {
			ranksg[g] = k->out[0].rank;
			dimsg[g++] = k->out[0].dims;
			cnt = k->n_in - first < EW_MAX_ARGS - 1 ? k->n_in - first : EW_MAX_ARGS - 1;
		}
		for (int i = 0; i < cnt; i++) {
			ranksg[g] = k->in[first + i].rank;
			dimsg[g++] = k->in[first + i].dims;
		}
		struct ew_shape sh;
		if (!make_shape(&k->out[0], g, ranksg, dimsg, &sh, why, size))
			return false;
		first += cnt;
	}
	return true;
}

static int run_variadic(struct cuda_kctx *k)
{
	char why[160];
	int op = k->node->op == IR_OP_Max ? EB_MAX : k->node->op == IR_OP_Min ? EB_MIN : EB_ADD;
	bool mean = k->node->op == IR_OP_Mean;
	int dt = k->in[0].dtype;
	set_impl(k, "variadic", NULL);
	for (int first = 0; first < k->n_in;) {
		int ranks[EW_MAX_ARGS];
		const int64_t *dims[EW_MAX_ARGS];
		const void *ptrs[EW_MAX_ARGS];
		int g = 0, cnt;
		if (first == 0) {
			cnt = k->n_in < EW_MAX_ARGS ? k->n_in : EW_MAX_ARGS;
		} else {
			/* the running result first: y = y op x[first..] */
			ranks[g] = k->out[0].rank;
			dims[g] = k->out[0].dims;
			ptrs[g++] = k->out[0].data;
			cnt = k->n_in - first < EW_MAX_ARGS - 1 ? k->n_in - first : EW_MAX_ARGS - 1;
		}
		for (int i = 0; i < cnt; i++) {
			ranks[g] = k->in[first + i].rank;
			dims[g] = k->in[first + i].dims;
			ptrs[g++] = k->in[first + i].data;
		}
		struct ew_shape sh;
		if (!make_shape(&k->out[0], g, ranks, dims, &sh, why, sizeof(why)))
			return fail(k, why);
		first += cnt;
		float div = mean && first >= k->n_in ? (float)k->n_in : 1.0f;
		if (launched(ew_variadic(op, dt, ptrs, k->out[0].data, &sh, div, k->ctx->stream), "ew_variadic", k))
			return IR_ERR;
		if (!sh.flat)
			set_impl(k, "variadic", "bcast");
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Where                                                                     */
/* ------------------------------------------------------------------------ */

static bool sup_where(const struct cuda_kctx *k, char *why, size_t size)
{
	if (!has_in(k, 0) || !has_in(k, 1) || !has_in(k, 2)) {
		snprintf(why, size, "needs three inputs");
		return false;
	}
	if (k->in[0].dtype != IR_BOOL) {
		snprintf(why, size, "condition is not bool");
		return false;
	}
	int dt = k->in[1].dtype, bits = ir_dtype_bits(dt);
	if (dt != k->in[2].dtype) {
		snprintf(why, size, "input types differ");
		return false;
	}
	if (dt == IR_STRING || (bits != 8 && bits != 16 && bits != 32 && bits != 64))
		return refuse_dtype(dt, why, size);
	struct ew_shape sh;
	return shape_of_inputs(k, 0, 3, &sh, why, size);
}

static int run_where(struct cuda_kctx *k)
{
	char why[160];
	struct ew_shape sh;
	if (!shape_of_inputs(k, 0, 3, &sh, why, sizeof(why)))
		return fail(k, why);
	snprintf(k->impl, sizeof(k->impl), sh.flat ? "ogsh where" : "ogsh where bcast");
	return launched(ew_where(ir_dtype_bits(k->in[1].dtype) / 8, k->in[0].data, k->in[1].data, k->in[2].data,
				 k->out[0].data, &sh, k->ctx->stream),
			"ew_where", k);
}

/* ------------------------------------------------------------------------ */
/* Cast, CastLike                                                            */
/* ------------------------------------------------------------------------ */

static bool cast_type(int dt)
{
	return is_fl(dt) || dt == IR_DOUBLE || is_i(dt) || dt == IR_INT8 || dt == IR_UINT8 || dt == IR_BOOL;
}

static bool sup_cast(const struct cuda_kctx *k, char *why, size_t size)
{
	int from = has_in(k, 0) ? k->in[0].dtype : 0, to = k->out[0].dtype;
	if (k->node->op == IR_OP_Cast) {
		int64_t t = ir_node_attr_int(k->node, "to", 0);
		if (t != to) {
			snprintf(why, size, "attribute 'to' (%lld) is not the output's type", (long long)t);
			return false;
		}
	} else if (!has_in(k, 1) || k->in[1].dtype != to) {
		snprintf(why, size, "the output's type is not target_type's");
		return false;
	}
	if (!cast_type(from))
		return refuse_dtype(from, why, size);
	if (!cast_type(to)) {
		snprintf(why, size, "cast to %s is not supported on the GPU", ir_dtype_name(to));
		return false;
	}
	return true;
}

static int run_cast(struct cuda_kctx *k)
{
	int from = k->in[0].dtype, to = k->out[0].dtype;
	int64_t n = cuda_numel(&k->out[0]);
	if (from == to) {
		snprintf(k->impl, sizeof(k->impl), "ogsh cast (copy)");
		size_t bytes = (size_t)n * (size_t)(ir_dtype_bits(from) / 8);
		if (!bytes || k->out[0].data == k->in[0].data)
			return 0;
		return cuda_check(cudaMemcpyAsync(k->out[0].data, k->in[0].data, bytes, cudaMemcpyDeviceToDevice,
						  k->ctx->stream),
				  "cudaMemcpyAsync", k->d);
	}
	snprintf(k->impl, sizeof(k->impl), "ogsh cast %s to %s", ir_dtype_name(from), ir_dtype_name(to));
	return launched(ew_cast(from, to, k->in[0].data, k->out[0].data, n, k->ctx->stream), "ew_cast", k);
}

/* ------------------------------------------------------------------------ */
/* Pointwise: the expression compiled into a register program                */
/* ------------------------------------------------------------------------ */

/*
 * The expression is compiled by the shared parser (kernels/fused.h)
 * into a postfix program, then into register code here: a value pushed at
 * stack depth d lives in register d.
 */
struct pwc {
	struct ew_prog *P;
	int depth, max_depth;
	char err[200];
};

_Static_assert((int)EP_IN == (int)PW_IN && (int)EP_LIT == (int)PW_LIT && (int)EP_NEG == (int)PW_NEG &&
		       (int)EP_ERF == (int)PW_ERF && (int)EP_ADD == (int)PW_ADD && (int)EP_MIN == (int)PW_MIN,
	       "the GPU's op codes follow the parser's");

static bool pwc_fail(struct pwc *c, const char *what)
{
	if (!c->err[0])
		snprintf(c->err, sizeof(c->err), "%s", what);
	return false;
}

static bool pwc_emit(struct pwc *c, int op, int in, double lit)
{
	struct ew_prog *P = c->P;
	if (P->n_code >= EW_PW_MAX_CODE)
		return pwc_fail(c, "the expression is too long for the GPU");
	struct ew_pins *I = &P->code[P->n_code++];
	I->op = (uint8_t)op;
	I->lit = 0;
	I->a = I->b = 0;
	if (op == EP_IN || op == EP_LIT) {
		if (c->depth >= EW_PW_MAX_REGS)
			return pwc_fail(c, "the expression nests too deeply for the GPU");
		I->dst = (uint8_t)c->depth++;
		I->a = (uint8_t)in;
		I->lit = (float)lit;
		if (c->depth > c->max_depth)
			c->max_depth = c->depth;
	} else if (op >= EP_ADD) {
		if (c->depth < 2)
			return pwc_fail(c, "internal error: unbalanced program");
		I->a = (uint8_t)(c->depth - 2);
		I->b = (uint8_t)(c->depth - 1);
		I->dst = I->a;
		c->depth--;
	} else {
		if (c->depth < 1)
			return pwc_fail(c, "internal error: unbalanced program");
		I->a = I->dst = (uint8_t)(c->depth - 1);
	}
	return true;
}

/* Compiles the node's expression and shapes into P; false with why. */
static bool pw_build(const struct cuda_kctx *k, struct ew_prog *P, char *why, size_t size)
{
	memset(P, 0, sizeof(*P));
	const struct ir_attr *e = ir_node_attr(k->node, "expr");
	if (!e || e->type != IR_ATTR_STRING || !e->s.data) {
		snprintf(why, size, "has no 'expr' attribute");
		return false;
	}
	struct pw_prog *pp = malloc(sizeof(*pp));
	if (!pp) {
		snprintf(why, size, "out of memory");
		return false;
	}
	struct pwc c = { P, 0, 0, "" };
	bool ok = pw_compile(pp, e->s.data);
	if (!ok)
		snprintf(c.err, sizeof(c.err), "%s", pp->err);
	if (ok && pp->max_in >= EW_PW_MAX_IN)
		ok = pwc_fail(&c, "the expression reads more inputs than the GPU kernel takes");
	for (int i = 0; ok && i < pp->n; i++)
		ok = pwc_emit(&c, pp->code[i].op, pp->code[i].in, pp->code[i].lit);
	if (ok && c.depth != 1)
		ok = pwc_fail(&c, "internal error: unbalanced program");
	int max_in = pp->max_in;
	free(pp);
	if (!ok) {
		snprintf(why, size, "cannot run expr '%.40s' on the GPU: %s", e->s.data, c.err);
		return false;
	}
	if (k->n_in > EW_PW_MAX_IN) {
		snprintf(why, size, "has %d inputs, more than the GPU kernel's %d", k->n_in, EW_PW_MAX_IN);
		return false;
	}
	if (max_in >= k->n_in) {
		snprintf(why, size, "expr reads x%d but the node has %d inputs", max_in, k->n_in);
		return false;
	}
	const struct cuda_tensor *out = &k->out[0];
	if (!is_fl(out->dtype))
		return refuse_dtype(out->dtype, why, size);
	P->out_dtype = out->dtype;
	P->n_in = k->n_in;
	P->n = cuda_numel(out);
	bool any_bc = false;
	for (int i = 0; i < k->n_in; i++) {
		const struct cuda_tensor *t = &k->in[i];
		if (!has_in(k, i) || !is_fl(t->dtype))
			return refuse_dtype(t->dtype, why, size);
		P->in_dtype[i] = (int8_t)t->dtype;
		int64_t n = cuda_numel(t);
		if (t->rank > out->rank) {
			snprintf(why, size, "input %d has a higher rank than the output", i);
			return false;
		}
		for (int j = 0; j < t->rank; j++) {
			int64_t d = t->dims[j];
			if (d != 1 && d != out->dims[out->rank - t->rank + j]) {
				snprintf(why, size, "input %d does not broadcast to the output's shape", i);
				return false;
			}
		}
		P->in_kind[i] = n == P->n ? 0 : n == 1 ? 1 : 2;
		if (P->in_kind[i] == 2)
			any_bc = true;
	}
	if (any_bc) {
		if (out->rank > EW_MAX_RANK) {
			snprintf(why, size, "broadcasting over more than %d dims", EW_MAX_RANK);
			return false;
		}
		P->rank = out->rank;
		for (int j = 0; j < out->rank; j++)
			P->dims[j] = out->dims[j];
		for (int i = 0; i < k->n_in; i++)
			if (P->in_kind[i] == 2)
				cuda_bcast_strides(&k->in[i], out->rank, out->dims, P->st[i]);
	}
	return true;
}

static bool sup_pointwise(const struct cuda_kctx *k, char *why, size_t size)
{
	struct ew_prog *P = malloc(sizeof(*P));
	if (!P) {
		snprintf(why, size, "out of memory");
		return false;
	}
	bool ok = pw_build(k, P, why, size);
	free(P);
	return ok;
}

/* ---- Pointwise through NVRTC ---- */

static dim3 dim3_of(unsigned x)
{
	dim3 d = { x, 1, 1 };
	return d;
}

/* The generated kernel's one parameter (8-byte members only: the same
 * layout on the host and in the generated source). */
struct nv_args {
	int64_t n;
	void *y;
	const void *x[EW_PW_MAX_IN];
	int64_t dims[EW_MAX_RANK];
	int64_t st[EW_PW_MAX_IN][EW_MAX_RANK];
};

typedef int nvrtc_result;
typedef struct nvrtc_prog_ *nvrtc_prog;
static struct {
	nvrtc_result (*create)(nvrtc_prog *, const char *, const char *, int, const char *const *, const char *const *);
	nvrtc_result (*compile)(nvrtc_prog, int, const char *const *);
	nvrtc_result (*cubin_size)(nvrtc_prog, size_t *);
	nvrtc_result (*cubin)(nvrtc_prog, char *);
	nvrtc_result (*destroy)(nvrtc_prog *);
	bool ok;
} nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nv_open(void)
{
	if (getenv("OGSH_NO_NVRTC"))
		return;
	const char *names[] = { "libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13" };
	void *h = NULL;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&nv.create = dlsym(h, "nvrtcCreateProgram");
	*(void **)&nv.compile = dlsym(h, "nvrtcCompileProgram");
	*(void **)&nv.cubin_size = dlsym(h, "nvrtcGetCUBINSize");
	*(void **)&nv.cubin = dlsym(h, "nvrtcGetCUBIN");
	*(void **)&nv.destroy = dlsym(h, "nvrtcDestroyProgram");
	nv.ok = nv.create && nv.compile && nv.cubin_size && nv.cubin && nv.destroy;
}

/* compiled kernels by source text (failures too, as NULL) */
struct nv_entry {
	char *src;
	cudaKernel_t kern, kern4;   /* ogsh_pw (NULL: did not compile), ogsh_pw4 (NULL: none) */
	struct nv_entry *next;
};
static struct nv_entry *nv_cache;
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;

/* a growing string */
struct sbuf {
	char *s;
	size_t n, cap;
	bool oom;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int m = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (m < 0) {
			b->oom = true;
			return;
		}
		if (b->s && b->n + (size_t)m < b->cap) {
			b->n += (size_t)m;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)m;
		char *t = realloc(b->s, cap);
		if (!t) {
			b->oom = true;
			return;
		}
		b->s = t;
		b->cap = cap;
	}
}

/* a float literal of CUDA C */
static void sb_lit(struct sbuf *b, float v)
{
	if (isnan(v))
		sb_add(b, "__int_as_float(0x7fc00000)");
	else if (isinf(v))
		sb_add(b, "__int_as_float(%s)", v > 0 ? "0x7f800000" : "(int)0xff800000");
	else
		sb_add(b, "(%.9ef)", (double)v);
}

/* whether P reads no broadcast input (then the 4-a-thread kernel ogsh_pw4 is made too) */
static bool nv_flat(const struct ew_prog *P)
{
	for (int q = 0; q < P->n_in; q++)
		if (P->in_kind[q] == 2)
			return false;
	return true;
}

/* CUDA C that declares float NAMEq, element off of input q (of dtype dt) */
static void nv_load(struct sbuf *b, const char *name, int q, int dt, const char *off)
{
	switch (dt) {
	case IR_FLOAT16: sb_add(b, "    float %s%d = h2f(((const unsigned short *)a.x[%d])[%s]);\n", name, q, q, off); break;
	case IR_BFLOAT16: sb_add(b, "    float %s%d = b2f(((const unsigned short *)a.x[%d])[%s]);\n", name, q, q, off); break;
	default: sb_add(b, "    float %s%d = ((const float *)a.x[%d])[%s];\n", name, q, q, off); break;
	}
}

/* CUDA C that loads element i of every input (x0, x1, ...; broadcast
 * inputs through the indexes i0, i1, ...), applies ogsh_f and stores y[i] */
static void nv_elem(struct sbuf *b, const struct ew_prog *P, const bool *used)
{
	for (int q = 0; q < P->n_in; q++) {
		if (!used[q]) {
			sb_add(b, "    float x%d = 0.0f;\n", q);
			continue;
		}
		char off[400];
		if (P->in_kind[q] == 0) {
			snprintf(off, sizeof(off), "i");
		} else if (P->in_kind[q] == 1) {
			snprintf(off, sizeof(off), "0");
		} else {
			size_t o = 0;
			o += (size_t)snprintf(off + o, sizeof(off) - o, "0");
			for (int d = 0; d < P->rank && o < sizeof(off); d++)
				if (P->st[q][d])
					o += (size_t)snprintf(off + o, sizeof(off) - o, " + i%d * a.st[%d][%d]", d, q, d);
		}
		nv_load(b, "x", q, P->in_dtype[q], off);
	}
	sb_add(b, "    float r0 = ogsh_f(");
	for (int q = 0; q < P->n_in; q++)
		sb_add(b, "%sx%d", q ? ", " : "", q);
	sb_add(b, ");\n");
	switch (P->out_dtype) {
	case IR_FLOAT16: sb_add(b, "    ((unsigned short *)a.y)[i] = f2h(r0);\n"); break;
	case IR_BFLOAT16: sb_add(b, "    ((unsigned short *)a.y)[i] = f2b(r0);\n"); break;
	default: sb_add(b, "    ((float *)a.y)[i] = r0;\n"); break;
	}
}

/* CUDA C of the program P; NULL when out of memory. The expression is one
 * function, ogsh_f (an argument per input); ogsh_pw applies it an element a
 * thread with 64-bit indexes and any broadcast, ogsh_pw4 (inputs whole or
 * one element only) 4 elements a thread: 16 or 8 byte loads and stores,
 * 32-bit indexes (n < 2^31, every whole input and the output 16-byte
 * aligned: the launcher's to see), the last n % 4 elements after. */
static char *nv_source(const struct ew_prog *P)
{
	struct sbuf b = { 0 };
	bool any_bc = !nv_flat(P);
	sb_add(&b, "struct A { long long n; void *y; const void *x[%d]; long long dims[%d]; long long st[%d][%d]; };\n",
	       EW_PW_MAX_IN, EW_MAX_RANK, EW_PW_MAX_IN, EW_MAX_RANK);
	sb_add(&b, "__device__ __forceinline__ float h2f(unsigned short h) { float f; asm(\"cvt.f32.f16 %%0, %%1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
		   "__device__ __forceinline__ float b2f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }\n"
		   "__device__ __forceinline__ unsigned short f2h(float f) { unsigned short h; asm(\"cvt.rn.f16.f32 %%0, %%1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
		   "__device__ __forceinline__ unsigned short f2b(float f) { unsigned short h; asm(\"cvt.rn.bf16.f32 %%0, %%1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
		   "__device__ __forceinline__ float mx(float a, float b) { return (a != a || b != b) ? a + b : a > b ? a : b; }\n"
		   "__device__ __forceinline__ float mn(float a, float b) { return (a != a || b != b) ? a + b : a < b ? a : b; }\n");
	/* the inputs the program reads */
	bool used[EW_PW_MAX_IN] = { false };
	for (int c = 0; c < P->n_code; c++)
		if (P->code[c].op == EP_IN)
			used[P->code[c].a] = true;

	/* the expression */
	sb_add(&b, "__device__ __forceinline__ float ogsh_f(");
	for (int q = 0; q < P->n_in; q++)
		sb_add(&b, "%sfloat x%d", q ? ", " : "", q);
	sb_add(&b, "%s)\n{\n", P->n_in ? "" : "void");
	int nreg = 1;
	for (int c = 0; c < P->n_code; c++)
		if (P->code[c].dst + 1 > nreg)
			nreg = P->code[c].dst + 1;
	sb_add(&b, "    float r0");
	for (int r = 1; r < nreg; r++)
		sb_add(&b, ", r%d", r);
	sb_add(&b, ";\n");
	for (int c = 0; c < P->n_code; c++) {
		const struct ew_pins *I = &P->code[c];
		int a = I->a, bb = I->b;
		sb_add(&b, "    r%d = ", I->dst);
		switch (I->op) {
		case EP_IN: sb_add(&b, "x%d", a); break;
		case EP_LIT: sb_lit(&b, I->lit); break;
		case EP_NEG: sb_add(&b, "-r%d", a); break;
		case EP_ABS: sb_add(&b, "fabsf(r%d)", a); break;
		case EP_EXP: sb_add(&b, "expf(r%d)", a); break;
		case EP_LOG: sb_add(&b, "logf(r%d)", a); break;
		case EP_SQRT: sb_add(&b, "sqrtf(r%d)", a); break;
		case EP_SIGMOID: sb_add(&b, "1.0f / (1.0f + expf(-r%d))", a); break;
		case EP_TANH: sb_add(&b, "tanhf(r%d)", a); break;
		case EP_RELU: sb_add(&b, "(r%d < 0.0f ? 0.0f : r%d)", a, a); break;
		case EP_ERF: sb_add(&b, "erff(r%d)", a); break;
		case EP_ADD: sb_add(&b, "r%d + r%d", a, bb); break;
		case EP_SUB: sb_add(&b, "r%d - r%d", a, bb); break;
		case EP_MUL: sb_add(&b, "r%d * r%d", a, bb); break;
		case EP_DIV: sb_add(&b, "r%d / r%d", a, bb); break;
		case EP_POW: sb_add(&b, "powf(r%d, r%d)", a, bb); break;
		case EP_MAX: sb_add(&b, "mx(r%d, r%d)", a, bb); break;
		case EP_MIN: sb_add(&b, "mn(r%d, r%d)", a, bb); break;
		default: sb_add(&b, "0.0f"); break;
		}
		sb_add(&b, ";\n");
	}
	sb_add(&b, "    return r0;\n}\n");

	/* an element at a time */
	sb_add(&b, "extern \"C\" __global__ void __launch_bounds__(256) ogsh_pw(const A a)\n{\n"
		   "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (long long)gridDim.x * blockDim.x) {\n");
	if (any_bc) {
		sb_add(&b, "    long long t = i, q;\n");
		for (int d = P->rank - 1; d >= 0; d--)
			sb_add(&b, "    q = t / a.dims[%d]; long long i%d = t - q * a.dims[%d]; t = q;\n", d, d, d);
	}
	nv_elem(&b, P, used);
	sb_add(&b, "  }\n}\n");

	/* 4 elements a thread */
	if (!any_bc) {
		sb_add(&b, "__device__ __forceinline__ void ld4(float *v, const void *p, unsigned i, int dt)\n{\n"
			   "  if (dt == 0) { float4 t = ((const float4 *)p)[i]; v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w; return; }\n"
			   "  uint2 t = ((const uint2 *)p)[i];\n"
			   "  unsigned short h[4] = { (unsigned short)t.x, (unsigned short)(t.x >> 16), (unsigned short)t.y, (unsigned short)(t.y >> 16) };\n"
			   "  for (int e = 0; e < 4; e++) v[e] = dt == 1 ? h2f(h[e]) : b2f(h[e]);\n}\n"
			   "extern \"C\" __global__ void __launch_bounds__(256) ogsh_pw4(const A a)\n{\n"
			   "  const unsigned n4 = (unsigned)(a.n >> 2), stride = gridDim.x * blockDim.x;\n"
			   "  for (unsigned v = blockIdx.x * blockDim.x + threadIdx.x; v < n4; v += stride) {\n");
		for (int q = 0; q < P->n_in; q++) {
			int dt = P->in_dtype[q] == IR_FLOAT16 ? 1 : P->in_dtype[q] == IR_BFLOAT16 ? 2 : 0;
			if (!used[q])
				sb_add(&b, "    float x%d[4] = { 0.0f, 0.0f, 0.0f, 0.0f };\n", q);
			else if (P->in_kind[q] == 1) {
				nv_load(&b, "s", q, P->in_dtype[q], "0");
				sb_add(&b, "    float x%d[4] = { s%d, s%d, s%d, s%d };\n", q, q, q, q, q);
			} else
				sb_add(&b, "    float x%d[4]; ld4(x%d, a.x[%d], v, %d);\n", q, q, q, dt);
		}
		sb_add(&b, "    float r[4];\n    for (int e = 0; e < 4; e++) r[e] = ogsh_f(");
		for (int q = 0; q < P->n_in; q++)
			sb_add(&b, "%sx%d[e]", q ? ", " : "", q);
		sb_add(&b, ");\n");
		if (P->out_dtype == IR_FLOAT16 || P->out_dtype == IR_BFLOAT16) {
			const char *f = P->out_dtype == IR_FLOAT16 ? "f2h" : "f2b";
			sb_add(&b, "    ((uint2 *)a.y)[v] = make_uint2((unsigned)%s(r[0]) | ((unsigned)%s(r[1]) << 16), "
				   "(unsigned)%s(r[2]) | ((unsigned)%s(r[3]) << 16));\n", f, f, f, f);
		} else {
			sb_add(&b, "    ((float4 *)a.y)[v] = make_float4(r[0], r[1], r[2], r[3]);\n");
		}
		sb_add(&b, "  }\n  const long long i = ((long long)n4 << 2) + blockIdx.x * blockDim.x + threadIdx.x;\n"
			   "  if (i < a.n) {\n");
		nv_elem(&b, P, used);
		sb_add(&b, "  }\n}\n");
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* Compiles src for sm (compute capability major*10+minor) into e's
 * kernels (ogsh_pw4 where src has it); e->kern NULL when it cannot. */
static void nv_compile(struct nv_entry *e, int sm)
{
	e->kern = e->kern4 = NULL;
	nvrtc_prog prog;
	if (nv.create(&prog, e->src, "ogsh_pointwise.cu", 0, NULL, NULL) != 0)
		return;
	char arch[40];
	snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d", sm);
	const char *opts[] = { arch, "--std=c++17" };
	size_t size = 0;
	char *cubin = NULL;
	if (nv.compile(prog, 2, opts) == 0 && nv.cubin_size(prog, &size) == 0 && size > 0 && (cubin = malloc(size)) &&
	    nv.cubin(prog, cubin) == 0) {
		cudaLibrary_t lib;
		if (cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess) {
			if (cudaLibraryGetKernel(&e->kern, lib, "ogsh_pw") != cudaSuccess) {
				e->kern = NULL;
				cudaLibraryUnload(lib);
			} else if (strstr(e->src, "ogsh_pw4") && cudaLibraryGetKernel(&e->kern4, lib, "ogsh_pw4") != cudaSuccess) {
				e->kern4 = NULL;
			}
		}
	}
	cudaGetLastError();   /* a failure here only means the fallback */
	free(cubin);
	nv.destroy(&prog);
}

/* The compiled kernels of P, from the cache or made now (*kern NULL: use
 * the interpreter; *kern4 NULL: no 4-a-thread kernel). */
static void nv_kernel(const struct ew_prog *P, int sm, cudaKernel_t *kern, cudaKernel_t *kern4)
{
	*kern = *kern4 = NULL;
	pthread_once(&nv_once, nv_open);
	if (!nv.ok || sm <= 0)
		return;
	char *body = nv_source(P);
	if (!body)
		return;
	char *src = malloc(strlen(body) + 32);
	if (!src) {
		free(body);
		return;
	}
	sprintf(src, "// sm_%d\n%s", sm, body);
	free(body);
	pthread_mutex_lock(&nv_lock);
	struct nv_entry *e = nv_cache;
	while (e && strcmp(e->src, src))
		e = e->next;
	if (!e && (e = malloc(sizeof(*e)))) {
		e->src = src;
		src = NULL;
		nv_compile(e, sm);
		e->next = nv_cache;
		nv_cache = e;
	}
	if (e) {
		*kern = e->kern;
		*kern4 = e->kern4;
	}
	pthread_mutex_unlock(&nv_lock);
	free(src);
}

struct pw_state {
	struct ew_prog P;
	cudaKernel_t kern;    /* NULL: the interpreter */
	cudaKernel_t kern4;   /* 4 elements a thread, where the pointers allow (NULL: none) */
	struct nv_args args;
};

static int prep_pointwise(struct cuda_kctx *k)
{
	char why[200];
	struct pw_state *S = calloc(1, sizeof(*S));
	if (!S)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	if (!pw_build(k, &S->P, why, sizeof(why))) {
		free(S);
		return fail(k, why);
	}
	nv_kernel(&S->P, k->ctx ? k->ctx->sm : 0, &S->kern, &S->kern4);
	S->args.n = S->P.n;
	memcpy(S->args.dims, S->P.dims, sizeof(S->args.dims));
	memcpy(S->args.st, S->P.st, sizeof(S->args.st));
	k->state = S;
	snprintf(k->impl, sizeof(k->impl), S->kern ? "ogsh pointwise nvrtc" : "ogsh pointwise bytecode");
	return 0;
}

static int run_pointwise(struct cuda_kctx *k)
{
	struct pw_state *S = k->state;
	if (!S)
		return fail(k, "pointwise was not prepared");
	const void *x[EW_PW_MAX_IN] = { NULL };
	for (int i = 0; i < S->P.n_in; i++)
		x[i] = k->in[i].data;
	if (S->kern) {
		if (S->P.n <= 0)
			return 0;
		struct nv_args a = S->args;
		a.y = k->out[0].data;
		memcpy(a.x, x, sizeof(a.x));
		/* 4 a thread: 32-bit indexes, 16-byte aligned whole inputs and output */
		bool four = S->kern4 && S->P.n <= INT32_MAX && (uintptr_t)a.y % 16 == 0;
		for (int i = 0; i < S->P.n_in && four; i++)
			four = S->P.in_kind[i] != 0 || (uintptr_t)x[i] % 16 == 0;
		snprintf(k->impl, sizeof(k->impl), four ? "ogsh pointwise nvrtc (4 a thread)" : "ogsh pointwise nvrtc");
		int64_t blocks = ((four ? (S->P.n + 3) / 4 : S->P.n) + 255) / 256;
		if (blocks > 65535 * 8)
			blocks = 65535 * 8;
		void *params[] = { &a };
		if (cuda_check(cudaLaunchKernel((const void *)(four ? S->kern4 : S->kern), dim3_of((unsigned)blocks),
						dim3_of(256), params, 0, k->ctx->stream),
			       "cudaLaunchKernel", k->d))
			return IR_ERR;
		return cuda_check_launch("ogsh_pw (nvrtc)", k->d);
	}
	snprintf(k->impl, sizeof(k->impl), "ogsh pointwise bytecode");
	return launched(ew_pointwise(&S->P, x, k->out[0].data, k->ctx->stream), "ew_pointwise", k);
}

static void release_free(void *state)
{
	free(state);
}

/* ------------------------------------------------------------------------ */

#define U(OP) { IR_OP_##OP, sup_unary, NULL, run_unary, NULL }
#define B(OP) { IR_OP_##OP, sup_binary, NULL, run_binary, NULL }
#define V(OP) { IR_OP_##OP, sup_variadic, NULL, run_variadic, NULL }

const struct cuda_kernel cuda_k_elementwise[] = {
	U(Relu), U(LeakyRelu), U(Sigmoid), U(HardSigmoid), U(HardSwish), U(Tanh), U(Exp), U(Log), U(Sqrt),
	U(Reciprocal), U(Neg), U(Abs), U(Erf), U(Gelu), U(ogsh_Gelu), U(Elu), U(Selu), U(Celu), U(Softplus), U(Softsign),
	U(Mish), U(Sin), U(Cos), U(Tan), U(Asin), U(Acos), U(Atan), U(Sinh), U(Cosh), U(Asinh), U(Acosh),
	U(Atanh), U(Floor), U(Ceil), U(Round), U(Sign), U(Swish), U(ThresholdedRelu), U(Shrink),
	{ IR_OP_Not, sup_not, NULL, run_not, NULL },
	{ IR_OP_IsNaN, sup_isspecial, NULL, run_isspecial, NULL },
	{ IR_OP_IsInf, sup_isspecial, NULL, run_isspecial, NULL },
	{ IR_OP_Clip, sup_clip, NULL, run_clip, NULL },
	{ IR_OP_Dropout, sup_dropout, NULL, run_dropout, NULL },
	B(Add), B(Sub), B(Mul), B(Div), B(Pow), B(Mod), B(PRelu), B(BitwiseAnd), B(BitwiseOr), B(BitwiseXor),
	B(Equal), B(Less), B(LessOrEqual), B(Greater), B(GreaterOrEqual), B(And), B(Or), B(Xor),
	V(Sum), V(Mean), V(Max), V(Min),
	{ IR_OP_Where, sup_where, NULL, run_where, NULL },
	{ IR_OP_Cast, sup_cast, NULL, run_cast, NULL },
	{ IR_OP_CastLike, sup_cast, NULL, run_cast, NULL },
	{ IR_OP_ogsh_Pointwise, sup_pointwise, prep_pointwise, run_pointwise, release_free },
	{ .op = -1 },
};
