/*
 * shape_elementwise.c - shape functions of ops whose output has their
 * input's shape or the broadcast of their inputs' shapes: unary math and
 * activations, normalizations, binary and variadic arithmetic, comparisons,
 * Where, Cast, quantization. Integer results of Add/Sub/Mul/Div... on known
 * values are computed, so that shape arithmetic in a graph resolves.
 */
#include "infer.h"

#include <inttypes.h>

/* Output 0 is input 0: shape and element type. */
static void same(struct ir_infer *x, struct ir_node *n)
{
	sx_out_like(x, n, 0, 0);
}

/* Identity also passes known values through. */
static void identity(struct ir_infer *x, struct ir_node *n)
{
	sx_out_like(x, n, 0, 0);
	int c;
	const struct ir_dim *v = sx_vals(x, n, 0, &c);
	if (v)
		sx_out_vals(x, n, 0, c, v);
}

/* Input 0's shape with another element type. */
static void shape_as(struct ir_infer *x, struct ir_node *n, int out, int elem)
{
	int r;
	const struct ir_dim *d = sx_need(x, n, 0, &r);
	if (d)
		sx_out(x, n, out, elem, r, d);
	else if (out < n->n_outputs && n->outputs[out])
		sx_out_from(x, n, out, elem, 0);
}

static void to_bool(struct ir_infer *x, struct ir_node *n)
{
	shape_as(x, n, 0, IR_BOOL);
}

/* Broadcast of inputs [first, last); element type from input `type_from` (or `elem`). */
static void broadcast(struct ir_infer *x, struct ir_node *n, int first, int last, int elem)
{
	struct ir_dim acc[IR_MAX_RANK], tmp[IR_MAX_RANK];
	int r = -1;
	for (int i = first; i < last; i++) {
		if (!sx_has(n, i))
			continue;
		int ri;
		const struct ir_dim *d = sx_dims(x, n, i);
		ri = sx_rank(x, n, i);
		if (!d) {
			sx_out_from(x, n, 0, elem, i);
			return;
		}
		if (r < 0) {
			sx_copy_dims(acc, d, ri);
			r = ri;
			continue;
		}
		const char *err;
		int rr = sx_broadcast(acc, r, d, ri, tmp, &err);
		if (rr < 0) {
			char a[256], b[256];
			struct ir_type ta = { .kind = IR_TYPE_TENSOR, .rank = r, .dims = acc };
			struct ir_type tb = { .kind = IR_TYPE_TENSOR, .rank = ri, .dims = (struct ir_dim *)d };
			sx_fail(x, n, "input shapes %s and %s do not broadcast", ir_type_str(&ta, a, sizeof(a)),
				ir_type_str(&tb, b, sizeof(b)));
			return;
		}
		sx_copy_dims(acc, tmp, rr);
		r = rr;
	}
	if (r < 0) {
		sx_out_unknown(x, n, 0, elem, "it has no inputs");
		return;
	}
	sx_out(x, n, 0, elem, r, acc);
}

/*
 * The dims of input i as numbers when all are known, with their product;
 * false otherwise (a symbol, an unknown dim, an unknown shape).
 */
static bool number_dims(struct ir_infer *x, const struct ir_node *n, int i, int64_t *dims, int *rank, int64_t *numel)
{
	int r = sx_rank(x, n, i);
	const struct ir_dim *d = sx_dims(x, n, i);
	if (r < 0 || r > IR_MAX_RANK || (r > 0 && !d))
		return false;
	int64_t p = 1;
	for (int k = 0; k < r; k++) {
		if (d[k].kind != IR_DIM_VALUE || d[k].value < 0 || __builtin_mul_overflow(p, d[k].value, &p))
			return false;
		dims[k] = d[k].value;
	}
	*rank = r;
	*numel = p;
	return true;
}

/*
 * Known integer values through elementwise arithmetic (shape computations).
 * The values follow numpy broadcasting: both inputs' shapes must be known
 * numbers (int64[1,4] - int64[4,1] has 16 values, taken by index), else
 * nothing is known.
 */
static void arith_vals(struct ir_infer *x, struct ir_node *n)
{
	int ca, cb;
	const struct ir_dim *a = sx_vals(x, n, 0, &ca), *b = sx_vals(x, n, 1, &cb);
	if (!a || !b)
		return;
	int64_t da[IR_MAX_RANK], db[IR_MAX_RANK], dout[IR_MAX_RANK];
	int ra, rb;
	int64_t na, nb;
	if (!number_dims(x, n, 0, da, &ra, &na) || !number_dims(x, n, 1, db, &rb, &nb) || na != ca || nb != cb)
		return;
	int r = ra > rb ? ra : rb;
	int64_t c = 1;
	for (int k = 0; k < r; k++) {
		int64_t p = k - (r - ra) >= 0 ? da[k - (r - ra)] : 1, q = k - (r - rb) >= 0 ? db[k - (r - rb)] : 1;
		if (p != q && p != 1 && q != 1)
			return;
		dout[k] = p == 1 ? q : p;
		c *= dout[k];
		if (c > 64)
			return;
	}
	struct ir_dim out[64];
	for (int64_t e = 0; e < c; e++) {
		/* the index of element e in each input: its output index with broadcast axes at 0 */
		int64_t rem = e, ia = 0, ib = 0, sa = 1, sb = 1;
		for (int k = r - 1; k >= 0; k--) {
			int64_t i = dout[k] ? rem % dout[k] : 0;
			rem = dout[k] ? rem / dout[k] : 0;
			int ka = k - (r - ra), kb = k - (r - rb);
			if (ka >= 0) {
				ia += (da[ka] == 1 ? 0 : i) * sa;
				sa *= da[ka];
			}
			if (kb >= 0) {
				ib += (db[kb] == 1 ? 0 : i) * sb;
				sb *= db[kb];
			}
		}
		const struct ir_dim *p = &a[ia], *q = &b[ib];
		switch (n->op) {
		case IR_OP_Add: out[e] = sx_add(x, p, q); break;
		case IR_OP_Sub: out[e] = sx_sub(x, p, q); break;
		case IR_OP_Mul: out[e] = sx_mul(x, p, q); break;
		case IR_OP_Div:
			if (p->kind == IR_DIM_VALUE && q->kind == IR_DIM_VALUE && q->value != 0 &&
			    !(p->value == INT64_MIN && q->value == -1)) {
				/* integer division truncates toward zero (C semantics, as ONNX kernels do) */
				out[e] = sx_v(p->value / q->value);
			} else {
				out[e] = sx_div(x, p, q);
			}
			break;
		default:
			return;
		}
	}
	sx_out_vals(x, n, 0, (int)c, out);
}

static void binary(struct ir_infer *x, struct ir_node *n)
{
	broadcast(x, n, 0, 2, sx_elem(x, n, 0));
	if (ir_dtype_is_int(sx_elem(x, n, 0)))
		arith_vals(x, n);
}

static void logical(struct ir_infer *x, struct ir_node *n)
{
	broadcast(x, n, 0, 2, IR_BOOL);
}

static void variadic(struct ir_infer *x, struct ir_node *n)
{
	broadcast(x, n, 0, n->n_inputs, sx_elem(x, n, 0));
}

static void where(struct ir_infer *x, struct ir_node *n)
{
	broadcast(x, n, 0, 3, sx_elem(x, n, 1));
}

static void prelu(struct ir_infer *x, struct ir_node *n)
{
	/* slope broadcasts to X (one way): the output is X */
	sx_out_like(x, n, 0, 0);
}

static void cast(struct ir_infer *x, struct ir_node *n)
{
	int to = (int)sx_attr_int(x, n, "to", 0);
	if (!ir_dtype_valid(to)) {
		sx_fail(x, n, "'to' is not an element type (%d)", to);
		return;
	}
	shape_as(x, n, 0, to);
	int c;
	const struct ir_dim *v = sx_vals(x, n, 0, &c);
	if (v && ir_dtype_is_int(to) && ir_dtype_bits(to) >= 32)
		sx_out_vals(x, n, 0, c, v);
}

static void cast_like(struct ir_infer *x, struct ir_node *n)
{
	shape_as(x, n, 0, sx_elem(x, n, 1));
	int c;
	const struct ir_dim *v = sx_vals(x, n, 0, &c);
	if (v && ir_dtype_is_int(sx_elem(x, n, 1)) && ir_dtype_bits(sx_elem(x, n, 1)) >= 32)
		sx_out_vals(x, n, 0, c, v);
}

static void dropout(struct ir_infer *x, struct ir_node *n)
{
	sx_out_like(x, n, 0, 0);
	/* the mask is bool from opset 10, the input's type before */
	shape_as(x, n, 1, sx_opset(x, n) >= 10 ? IR_BOOL : sx_elem(x, n, 0));
}

/* output dtype given by the 'dtype' attribute, else input 0's */
static void like_dtype_attr(struct ir_infer *x, struct ir_node *n)
{
	int dt = (int)sx_attr_int(x, n, "dtype", 0);
	if (dt && !ir_dtype_valid(dt)) {
		sx_fail(x, n, "'dtype' is not an element type (%d)", dt);
		return;
	}
	shape_as(x, n, 0, dt ? dt : sx_elem(x, n, 0));
}

static void random_like(struct ir_infer *x, struct ir_node *n)
{
	like_dtype_attr(x, n);
}

static void quantize(struct ir_infer *x, struct ir_node *n)
{
	/* the zero point's type; else output_dtype (opset 21); else uint8 */
	int elem = sx_elem(x, n, 2);
	if (!elem && !sx_has(n, 2)) {
		elem = (int)sx_attr_int(x, n, "output_dtype", 0);
		if (!elem)
			elem = IR_UINT8;
	}
	shape_as(x, n, 0, elem);
}

static void dequantize(struct ir_infer *x, struct ir_node *n)
{
	int elem = (int)sx_attr_int(x, n, "output_dtype", 0);
	if (!elem)
		elem = sx_opset(x, n) >= 19 ? sx_elem(x, n, 1) : IR_FLOAT;
	shape_as(x, n, 0, elem);
}

static void dynamic_quantize(struct ir_infer *x, struct ir_node *n)
{
	shape_as(x, n, 0, IR_UINT8);
	sx_out(x, n, 1, IR_FLOAT, 0, NULL);
	sx_out(x, n, 2, IR_UINT8, 0, NULL);
}

static void batch_norm(struct ir_infer *x, struct ir_node *n)
{
	sx_out_like(x, n, 0, 0);
	/* training outputs (running mean/var; saved mean/var before opset 14): the shape of the scale */
	for (int k = 1; k < n->n_outputs; k++)
		if (n->outputs[k])
			sx_out_like(x, n, k, sx_opset(x, n) >= 14 ? 3 : 1);
}

static void layer_norm(struct ir_infer *x, struct ir_node *n)
{
	sx_out_like(x, n, 0, 0);
	if (n->n_outputs < 2)
		return;
	int stash = (int)sx_attr_int(x, n, "stash_type", IR_FLOAT);
	int r;
	const struct ir_dim *d = sx_dims(x, n, 0);
	r = sx_rank(x, n, 0);
	if (!d) {
		for (int k = 1; k < n->n_outputs; k++)
			sx_out_from(x, n, k, stash, 0);
		return;
	}
	int axis = sx_axis(sx_attr_int(x, n, "axis", -1), r);
	if (axis < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", sx_attr_int(x, n, "axis", -1), r);
		return;
	}
	struct ir_dim s[IR_MAX_RANK];
	for (int k = 0; k < r; k++)
		s[k] = k < axis ? d[k] : sx_v(1);
	for (int k = 1; k < n->n_outputs && k < 3; k++)
		sx_out(x, n, k, stash, r, s);
}

/* ogsh's Pointwise: its inputs broadcast (numpy rules); the element type is its 'dtype'. */
static void pointwise(struct ir_infer *x, struct ir_node *n)
{
	int dt = (int)sx_attr_int(x, n, "dtype", 0);
	if (dt && !ir_dtype_is_float(dt)) {
		sx_fail(x, n, "'dtype' is not a float type (%d)", dt);
		return;
	}
	broadcast(x, n, 0, n->n_inputs, dt ? dt : sx_elem(x, n, 0));
}

static void eye_like(struct ir_infer *x, struct ir_node *n)
{
	like_dtype_attr(x, n);
}

static void bernoulli(struct ir_infer *x, struct ir_node *n)
{
	like_dtype_attr(x, n);
}

const struct sx_entry sx_elementwise[] = {
	/* unary: the output is the input */
	{ IR_OP_Abs, same }, { IR_OP_Acos, same }, { IR_OP_Acosh, same }, { IR_OP_Asin, same },
	{ IR_OP_Asinh, same }, { IR_OP_Atan, same }, { IR_OP_Atanh, same }, { IR_OP_Ceil, same },
	{ IR_OP_Celu, same }, { IR_OP_Cos, same }, { IR_OP_Cosh, same }, { IR_OP_Elu, same },
	{ IR_OP_Erf, same }, { IR_OP_Exp, same }, { IR_OP_Floor, same }, { IR_OP_Gelu, same }, { IR_OP_ogsh_Gelu, same },
	{ IR_OP_HardSigmoid, same }, { IR_OP_HardSwish, same }, { IR_OP_Hardmax, same },
	{ IR_OP_Identity, identity }, { IR_OP_LeakyRelu, same }, { IR_OP_Log, same },
	{ IR_OP_LogSoftmax, same }, { IR_OP_LpNormalization, same }, { IR_OP_LRN, same },
	{ IR_OP_MeanVarianceNormalization, same }, { IR_OP_Mish, same }, { IR_OP_Neg, same },
	{ IR_OP_Reciprocal, same }, { IR_OP_Relu, same }, { IR_OP_Round, same }, { IR_OP_Selu, same },
	{ IR_OP_Shrink, same }, { IR_OP_Sigmoid, same }, { IR_OP_Sign, same }, { IR_OP_Sin, same },
	{ IR_OP_Sinh, same }, { IR_OP_Softmax, same }, { IR_OP_Softplus, same }, { IR_OP_Softsign, same },
	{ IR_OP_Sqrt, same }, { IR_OP_Tan, same }, { IR_OP_Tanh, same }, { IR_OP_ThresholdedRelu, same },
	{ IR_OP_BitwiseNot, same }, { IR_OP_Not, same }, { IR_OP_CumSum, same }, { IR_OP_Trilu, same },
	{ IR_OP_Clip, same }, { IR_OP_ReverseSequence, same }, { IR_OP_InstanceNormalization, same },
	{ IR_OP_GroupNormalization, same }, { IR_OP_RMSNormalization, same }, { IR_OP_Swish, same },
	{ IR_OP_Scatter, same }, { IR_OP_ScatterElements, same }, { IR_OP_ScatterND, same },
	{ IR_OP_PRelu, prelu },
	{ IR_OP_IsNaN, to_bool }, { IR_OP_IsInf, to_bool },
	/* binary and variadic, broadcasting */
	{ IR_OP_Add, binary }, { IR_OP_Sub, binary }, { IR_OP_Mul, binary }, { IR_OP_Div, binary },
	{ IR_OP_Mod, binary }, { IR_OP_Pow, binary }, { IR_OP_BitShift, binary },
	{ IR_OP_BitwiseAnd, binary }, { IR_OP_BitwiseOr, binary }, { IR_OP_BitwiseXor, binary },
	{ IR_OP_And, logical }, { IR_OP_Or, logical }, { IR_OP_Xor, logical },
	{ IR_OP_Equal, logical }, { IR_OP_Greater, logical }, { IR_OP_GreaterOrEqual, logical },
	{ IR_OP_Less, logical }, { IR_OP_LessOrEqual, logical },
	{ IR_OP_Sum, variadic }, { IR_OP_Mean, variadic }, { IR_OP_Max, variadic }, { IR_OP_Min, variadic },
	{ IR_OP_Where, where },
	/* types */
	{ IR_OP_Cast, cast }, { IR_OP_CastLike, cast_like },
	{ IR_OP_QuantizeLinear, quantize }, { IR_OP_DequantizeLinear, dequantize },
	{ IR_OP_DynamicQuantizeLinear, dynamic_quantize },
	/* normalizations with extra outputs, random */
	{ IR_OP_Dropout, dropout }, { IR_OP_BatchNormalization, batch_norm },
	{ IR_OP_LayerNormalization, layer_norm }, { IR_OP_ogsh_LayerNormalization, layer_norm },
	{ IR_OP_RandomUniformLike, random_like }, { IR_OP_RandomNormalLike, random_like },
	{ IR_OP_EyeLike, eye_like }, { IR_OP_Bernoulli, bernoulli },
	/* ogsh's fused elementwise op */
	{ IR_OP_ogsh_Pointwise, pointwise },
	{ -1, NULL },
};
