/*
 * k_quant.c - GPU kernel entries of the quantization family (launchers in
 * k_quant.cu): QuantizeLinear and DequantizeLinear, so that a QDQ model
 * runs on the GPU without CPU islands and replays as a CUDA graph.
 *
 * The semantics are the CPU reference's (kernels/cpu/k_quant.c), which
 * follows the ONNX spec; integer results are bit-identical to it, float8
 * codes too:
 * - QuantizeLinear: x float32/float16/bfloat16, the scale float32/float16/
 *   bfloat16; the output type is the zero point's, else `output_dtype`,
 *   else uint8: int8, uint8, int16, uint16, int4, uint4, float8 e4m3fn,
 *   e4m3fnuz, e5m2, e5m2fnuz (`saturate`). x, the scale and x / scale are
 *   rounded to x's type (or `precision`'s), as the CPU does.
 * - DequantizeLinear: x int8, uint8, int16, uint16, int32, int4, uint4,
 *   the float8 types or float4 e2m1; the output is the scale's type (or
 *   `output_dtype`'s): float32, float16 or bfloat16.
 * - scales per tensor, per axis (`axis`, negative counts from the end) or
 *   blocked (`block_size` along the axis, the last block may be short); the
 *   zero point is optional and shaped like the scale.
 * What the CPU would reject, or the GPU cannot do (float64, float4
 * outputs, channels-last values), is refused by `supports` with the reason;
 * the node then runs on the CPU, which reports the error if there is one.
 */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/k_quant.h"
#include "kernels/cuda/k_quant_math.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)KQ_FLOAT == (int)IR_FLOAT && (int)KQ_UINT8 == (int)IR_UINT8 &&
	       (int)KQ_INT8 == (int)IR_INT8 && (int)KQ_UINT16 == (int)IR_UINT16 && (int)KQ_INT16 == (int)IR_INT16 &&
	       (int)KQ_INT32 == (int)IR_INT32 && (int)KQ_FLOAT16 == (int)IR_FLOAT16 &&
	       (int)KQ_BFLOAT16 == (int)IR_BFLOAT16 && (int)KQ_F8E4M3FN == (int)IR_F8E4M3FN &&
	       (int)KQ_F8E4M3FNUZ == (int)IR_F8E4M3FNUZ && (int)KQ_F8E5M2 == (int)IR_F8E5M2 &&
	       (int)KQ_F8E5M2FNUZ == (int)IR_F8E5M2FNUZ && (int)KQ_UINT4 == (int)IR_UINT4 &&
	       (int)KQ_INT4 == (int)IR_INT4 && (int)KQ_F4E2M1 == (int)IR_F4E2M1,
	       "KQ_* are ONNX's element types");

static bool no(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool no(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && size)
		vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return false;
}

static bool has_in(const struct cuda_kctx *k, int i)
{
	return i < k->n_in && k->in[i].dtype != 0;
}

/* The types QuantizeLinear writes on the GPU. */
static bool q_type(int dt)
{
	switch (dt) {
	case IR_INT8: case IR_UINT8: case IR_INT16: case IR_UINT16: case IR_INT4: case IR_UINT4:
	case IR_F8E4M3FN: case IR_F8E4M3FNUZ: case IR_F8E5M2: case IR_F8E5M2FNUZ:
		return true;
	default:
		return false;
	}
}

/* The types DequantizeLinear reads on the GPU. */
static bool dq_type(int dt)
{
	return (q_type(dt) || dt == IR_INT32 || dt == IR_F4E2M1);
}

/*
 * Where the scale of each element is, by the CPU's rules (k_quant.c,
 * qmap_init): one scale (mode 0), one per index of `axis` (mode 1), or
 * blocks of `block_size` along it (mode 2); the zero point has the
 * scale's shape. False with why when the shapes do not fit.
 */
static bool scale_map(const struct cuda_kctx *k, const struct cuda_tensor *x, const struct cuda_tensor *s,
		      const struct cuda_tensor *z, struct kq_launch *L, char *why, size_t size)
{
	int64_t bs = ir_node_attr_int(k->node, "block_size", 0);
	if (bs < 0)
		return no(why, size, "block_size %lld must not be negative", (long long)bs);
	int64_t sn = cuda_numel(s);
	if (sn == 0)
		return no(why, size, "the scale is empty");
	if (z) {
		bool same = cuda_numel(z) == sn && (z->rank == s->rank || sn == 1);
		for (int d = 0; same && z->rank == s->rank && d < z->rank; d++)
			same = z->dims[d] == s->dims[d];
		if (!same)
			return no(why, size, "the zero point and the scale have different shapes");
	}
	L->mode = 0;
	L->inner = L->adim = L->bs = L->sdim = 1;
	if (sn == 1 && bs == 0)
		return true;
	if (x->rank == 0)
		return no(why, size, "the scale has more than one element for a scalar input");
	int64_t axis = ir_node_attr_int(k->node, "axis", 1);
	if (axis < -x->rank || axis >= x->rank)
		return no(why, size, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	if (axis < 0)
		axis += x->rank;
	L->adim = x->dims[axis];
	for (int d = (int)axis + 1; d < x->rank; d++)
		L->inner *= x->dims[d];
	if (cuda_numel(x) == 0)
		return true;
	if (bs == 0) {
		if (s->rank != 1 || s->dims[0] != L->adim)
			return no(why, size, "the scale must be 1-D with %lld elements (axis %lld)", (long long)L->adim,
				  (long long)axis);
		L->mode = 1;
		return true;
	}
	if (s->rank != x->rank)
		return no(why, size, "blocked quantization needs a scale of the rank of x");
	for (int d = 0; d < x->rank; d++) {
		int64_t want = d == axis ? (x->dims[d] + bs - 1) / bs : x->dims[d];
		if (s->dims[d] != want)
			return no(why, size, "the scale does not fit x with block_size %lld on axis %lld", (long long)bs,
				  (long long)axis);
	}
	L->mode = 2;
	/* a block longer than the axis is the whole axis (the index stays 32-bit) */
	L->bs = bs < L->adim ? bs : L->adim;
	L->sdim = s->dims[axis];
	return true;
}

/* Reads the node into *L (all but the pointers); false with why. */
static bool plan(const struct cuda_kctx *k, struct kq_launch *L, char *why, size_t size)
{
	bool quant = k->node->op == IR_OP_QuantizeLinear;
	memset(L, 0, sizeof(*L));
	if (!has_in(k, 0) || !has_in(k, 1))
		return no(why, size, "x and the scale are required");
	if (k->n_out < 1 || !k->out[0].dtype)
		return no(why, size, "the output is not used");
	const struct cuda_tensor *x = &k->in[0], *s = &k->in[1], *z = has_in(k, 2) ? &k->in[2] : NULL;
	/* one scale: element i of y is element i of x in either layout */
	if ((x->nhwc || k->out[0].nhwc) && (x->nhwc != k->out[0].nhwc || cuda_numel(s) != 1 || (z && cuda_numel(z) != 1)))
		return no(why, size, "channels-last values take one scale");
	if (s->nhwc || (z && z->nhwc))
		return no(why, size, "channels-last scales are not supported");
	if (!cuda_is_float(s->dtype))
		return no(why, size, "the scale is %s: the GPU takes float, float16 and bfloat16 scales",
			  ir_dtype_name(s->dtype));
	int64_t odt = ir_node_attr_int(k->node, "output_dtype", 0);
	L->xdt = x->dtype;
	L->sdt = s->dtype;
	L->zdt = z ? z->dtype : 0;
	if (quant) {
		if (!cuda_is_float(x->dtype))
			return no(why, size, "x is %s: the GPU quantizes float, float16 and bfloat16",
				  ir_dtype_name(x->dtype));
		if (z && odt && odt != z->dtype)
			return no(why, size, "output_dtype %s does not match the zero point's type %s",
				  ir_dtype_name((int)odt), ir_dtype_name(z->dtype));
		L->ydt = z ? z->dtype : odt ? (int)odt : IR_UINT8;
		if (!q_type(L->ydt))
			return no(why, size, "quantizing to %s is not supported on the GPU", ir_dtype_name(L->ydt));
		/* the division's type: `precision`, else x's own (float, float16, bfloat16) */
		int64_t prec = ir_node_attr_int(k->node, "precision", 0);
		if (prec && !cuda_is_float((int)prec))
			return no(why, size, "precision %s is not supported on the GPU", ir_dtype_name((int)prec));
		L->cdt = prec ? (int)prec : x->dtype;
		L->saturate = ir_node_attr_int(k->node, "saturate", 1) != 0;
	} else {
		if (!dq_type(x->dtype))
			return no(why, size, "dequantizing %s is not supported on the GPU", ir_dtype_name(x->dtype));
		if (z && z->dtype != x->dtype)
			return no(why, size, "the zero point is %s, x is %s", ir_dtype_name(z->dtype),
				  ir_dtype_name(x->dtype));
		L->ydt = odt ? (int)odt : s->dtype;
		if (!cuda_is_float(L->ydt))
			return no(why, size, "output_dtype %s is not supported on the GPU", ir_dtype_name(L->ydt));
	}
	if (k->out[0].dtype != L->ydt)
		return no(why, size, "the planned output is %s, the node computes %s", ir_dtype_name(k->out[0].dtype),
			  ir_dtype_name(L->ydt));
	bool same = k->out[0].rank == x->rank;
	for (int d = 0; same && d < x->rank; d++)
		same = k->out[0].dims[d] == x->dims[d];
	if (!same)
		return no(why, size, "the planned output shape differs from x's");
	if (!scale_map(k, x, s, z, L, why, size))
		return false;
	L->n = cuda_numel(x);
	return true;
}

static bool sup_quant(const struct cuda_kctx *k, char *why, size_t size)
{
	struct kq_launch L;
	return plan(k, &L, why, size);
}

static int prep_quant(struct cuda_kctx *k)
{
	char why[200] = "";
	struct kq_launch L;
	if (!plan(k, &L, why, sizeof(why)))
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	struct kq_launch *st = malloc(sizeof(*st));
	if (!st)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	*st = L;
	k->state = st;
	static const char *const modes[] = { "per-tensor", "per-axis", "blocked" };
	char blk[32] = "";
	if (L.mode == 2)
		snprintf(blk, sizeof(blk), " %lld", (long long)ir_node_attr_int(k->node, "block_size", 0));
	bool quant = k->node->op == IR_OP_QuantizeLinear;
	snprintf(k->impl, sizeof(k->impl), "ogsh %s %s to %s %s%s", quant ? "quantize" : "dequantize",
		 ir_dtype_name(L.xdt), ir_dtype_name(L.ydt), modes[L.mode], blk);
	return 0;
}

static int run_quant(struct cuda_kctx *k)
{
	const struct kq_launch *L = k->state;
	if (!L)
		return ir_diag_err(k->d, IR_ERR, "the quantization kernel was not prepared");
	const void *z = has_in(k, 2) ? k->in[2].data : NULL;
	if (k->node->op == IR_OP_QuantizeLinear)
		return cuda_check(kq_quantize(L, k->in[0].data, k->in[1].data, z, k->out[0].data, k->ctx->stream),
				  "kq_quantize", k->d);
	return cuda_check(kq_dequantize(L, k->in[0].data, k->in[1].data, z, k->out[0].data, k->ctx->stream),
			  "kq_dequantize", k->d);
}

static void release_quant(void *state)
{
	free(state);
}

const struct cuda_kernel cuda_k_quant[] = {
	{ IR_OP_QuantizeLinear, sup_quant, prep_quant, run_quant, release_quant },
	{ IR_OP_DequantizeLinear, sup_quant, prep_quant, run_quant, release_quant },
	{ .op = -1 },
};
