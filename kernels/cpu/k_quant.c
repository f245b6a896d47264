/*
 * k_quant.c - CPU kernels: linear quantization (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear).
 *
 * Scales and zero points come per tensor (one element), per axis (a 1-D
 * tensor along `axis`) or per block (the shape of x with dimension `axis`
 * divided by `block_size`, rounded up). struct qmap turns an element index
 * of x into the index of its scale/zero point.
 */
#include "cpu.h"

#include <math.h>

/* How the scale (and zero point) of element i of x is found. */
struct qmap {
	int mode;          /* 0: one value, 1: per axis, 2: blocked */
	int64_t adim;      /* x's size along the axis */
	int64_t inner;     /* product of x's dims after the axis */
	int64_t bs;        /* block size (mode 2) */
	int64_t sdim;      /* the scale's size along the axis (mode 2) */
};

static uint64_t qmap_index(const struct qmap *m, uint64_t i)
{
	if (m->mode == 0)
		return 0;
	uint64_t a = (i / (uint64_t)m->inner) % (uint64_t)m->adim;
	if (m->mode == 1)
		return a;
	uint64_t o = i / ((uint64_t)m->adim * (uint64_t)m->inner);
	uint64_t in = i % (uint64_t)m->inner;
	return (o * (uint64_t)m->sdim + a / (uint64_t)m->bs) * (uint64_t)m->inner + in;
}

/*
 * Checks the shapes of scale and zero point (zp may be NULL) against x and
 * fills *m from the axis and block_size attributes.
 */
static int qmap_init(struct cpu_kctx *k, const struct ir_tensor *x, const struct ir_tensor *scale,
		     const struct ir_tensor *zp, struct qmap *m)
{
	memset(m, 0, sizeof(*m));
	int64_t bs = kattr_i(k, "block_size", 0);
	if (bs < 0)
		return kerr(k, "block_size %lld must not be negative", (long long)bs);
	if (scale->numel == 0)
		return kerr(k, "the scale is empty");
	if (zp) {
		if (zp->numel != scale->numel || (zp->rank != scale->rank && zp->numel != 1))
			return kerr(k, "the zero point %s and the scale %s have different shapes",
				    kshape(zp), kshape(scale));
		for (int d = 0; d < zp->rank && zp->rank == scale->rank; d++)
			if (zp->dims[d] != scale->dims[d])
				return kerr(k, "the zero point %s and the scale %s have different shapes",
					    kshape(zp), kshape(scale));
	}
	if (scale->numel == 1 && bs == 0)
		return 0;
	if (x->rank == 0)
		return kerr(k, "the scale %s has more than one element for a scalar input", kshape(scale));
	int axis;
	if (kaxis(k, kattr_i(k, "axis", 1), x->rank, &axis))
		return IR_ERR;
	m->adim = x->dims[axis];
	m->inner = 1;
	for (int d = axis + 1; d < x->rank; d++)
		m->inner *= x->dims[d];
	if (x->numel == 0)
		return 0;
	if (bs == 0) {
		if (scale->rank != 1 || scale->dims[0] != m->adim)
			return kerr(k, "the scale %s must be 1-D with %lld elements (x is %s, axis %d)",
				    kshape(scale), (long long)m->adim, kshape(x), axis);
		m->mode = 1;
		return 0;
	}
	if (scale->rank != x->rank)
		return kerr(k, "blocked quantization needs a scale of the rank of x: scale %s, x %s",
			    kshape(scale), kshape(x));
	for (int d = 0; d < x->rank; d++) {
		int64_t want = d == axis ? (x->dims[d] + bs - 1) / bs : x->dims[d];
		if (scale->dims[d] != want)
			return kerr(k, "the scale %s does not fit x %s with block_size %lld on axis %d",
				    kshape(scale), kshape(x), (long long)bs, axis);
	}
	m->mode = 2;
	m->bs = bs;
	m->sdim = scale->dims[axis];
	return 0;
}

/* v rounded to the precision of a float dtype (computations in fp16/bf16
 * happen in float and round once per operation, like numpy does). */
static double round_to(int dtype, double v)
{
	switch (dtype) {
	case IR_FLOAT: return (float)v;
	case IR_FLOAT16: return ir_f16_to_f32(ir_f32_to_f16((float)v));
	case IR_BFLOAT16: return ir_bf16_to_f32(ir_f32_to_bf16((float)v));
	default: return v;
	}
}

static bool is_float8(int dt)
{
	return dt == IR_F8E4M3FN || dt == IR_F8E4M3FNUZ || dt == IR_F8E5M2 || dt == IR_F8E5M2FNUZ;
}

/* The saturation range of an integer quantized type; false for others. */
static bool qrange(int dt, double *lo, double *hi)
{
	switch (dt) {
	case IR_UINT8: *lo = 0; *hi = 255; return true;
	case IR_INT8: *lo = -128; *hi = 127; return true;
	case IR_UINT16: *lo = 0; *hi = 65535; return true;
	case IR_INT16: *lo = -32768; *hi = 32767; return true;
	case IR_UINT4: *lo = 0; *hi = 15; return true;
	case IR_INT4: *lo = -8; *hi = 7; return true;
	case IR_UINT2: *lo = 0; *hi = 3; return true;
	case IR_INT2: *lo = -2; *hi = 1; return true;
	case IR_INT32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
	default: return false;
	}
}

/* y = saturate(round(x / scale) + zero_point) */
static int k_quantize(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *scale = kin_req(k, 1), *zp = kin(k, 2);
	if (!x || !scale)
		return IR_ERR;
	if (!ir_dtype_is_float(scale->dtype) && scale->dtype != IR_INT32)
		return kerr(k, "the scale must be a float tensor, not %s", ir_dtype_name(scale->dtype));
	if (x->dtype == IR_STRING || x->dtype == IR_BOOL)
		return kerr(k, "cannot quantize a %s tensor", ir_dtype_name(x->dtype));
	int64_t odt = kattr_i(k, "output_dtype", 0);
	int dt;
	if (zp) {
		if (odt && odt != zp->dtype)
			return kerr(k, "output_dtype %s does not match the zero point's type %s",
				    ir_dtype_name((int)odt), ir_dtype_name(zp->dtype));
		dt = zp->dtype;
	} else {
		dt = odt ? (int)odt : IR_UINT8;
	}
	double lo = 0, hi = 0;
	bool isint = dt != IR_INT32 && qrange(dt, &lo, &hi);
	if (!isint && !is_float8(dt) && dt != IR_F4E2M1)
		return kerr(k, "cannot quantize to %s", ir_dtype_name(dt));
	struct qmap m;
	if (qmap_init(k, x, scale, zp, &m))
		return IR_ERR;
	/* the type the division happens in: `precision`, else x's own type */
	int64_t prec = kattr_i(k, "precision", 0);
	int cdt = x->dtype;
	if (prec) {
		if (prec != IR_FLOAT && prec != IR_FLOAT16 && prec != IR_BFLOAT16 && prec != IR_DOUBLE)
			return kerr(k, "precision %s is not a float type", ir_dtype_name((int)prec));
		cdt = (int)prec;
	} else if (!ir_dtype_is_float(cdt) || cdt == IR_DOUBLE) {
		cdt = scale->dtype == IR_DOUBLE || cdt == IR_DOUBLE ? IR_DOUBLE : IR_FLOAT;
	} else if (cdt != IR_FLOAT16 && cdt != IR_BFLOAT16) {
		cdt = IR_FLOAT;
	}
	bool saturate = kattr_i(k, "saturate", 1) != 0;

	struct ir_tensor *o = kout(k, 0, dt, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	const void *xp = kdata(x), *sp = kdata(scale), *zpp = kdata(zp);
	for (uint64_t i = 0; i < x->numel; i++) {
		if ((i & 0xfffff) == 0xfffff && kstop(k))
			return IR_EINTR;
		uint64_t q = qmap_index(&m, i);
		double s = round_to(cdt, kld(scale->dtype, sp, q));
		double v = round_to(cdt, round_to(cdt, kld(x->dtype, xp, i)) / s);
		if (isint) {
			double z = zp ? (double)kldi(zp->dtype, zpp, q) : 0;
			/* round half to even; NaN quantizes to the zero point */
			double r = isnan(v) ? z : nearbyint(v) + z;
			if (r < lo)
				r = lo;
			if (r > hi)
				r = hi;
			ksti(dt, y, i, (int64_t)r);
		} else {
			double z = zp ? kld(zp->dtype, zpp, q) : 0;
			uint8_t b = kcvt_f32_to_small(dt, (float)(v + z), dt == IR_F4E2M1 ? true : saturate);
			if (dt == IR_F4E2M1)
				ksti(IR_UINT4, y, i, b);
			else
				((uint8_t *)y)[i] = b;
		}
	}
	return 0;
}

/* y = (x - zero_point) * scale */
static int k_dequantize(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *scale = kin_req(k, 1), *zp = kin(k, 2);
	if (!x || !scale)
		return IR_ERR;
	if (!ir_dtype_is_float(scale->dtype))
		return kerr(k, "the scale must be a float tensor, not %s", ir_dtype_name(scale->dtype));
	double lo, hi;
	if (!qrange(x->dtype, &lo, &hi) && !is_float8(x->dtype) && x->dtype != IR_F4E2M1)
		return kerr(k, "cannot dequantize a %s tensor", ir_dtype_name(x->dtype));
	if (zp && zp->dtype != x->dtype)
		return kerr(k, "the zero point is %s, x is %s", ir_dtype_name(zp->dtype), ir_dtype_name(x->dtype));
	int64_t odt = kattr_i(k, "output_dtype", 0);
	int dt = odt ? (int)odt : scale->dtype;
	if (!ir_dtype_is_float(dt))
		return kerr(k, "output_dtype %s is not a float type", ir_dtype_name(dt));
	struct qmap m;
	if (qmap_init(k, x, scale, zp, &m))
		return IR_ERR;
	struct ir_tensor *o = kout(k, 0, dt, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	const void *xp = kdata(x), *sp = kdata(scale), *zpp = kdata(zp);
	bool isint = ir_dtype_is_int(x->dtype);
	for (uint64_t i = 0; i < x->numel; i++) {
		if ((i & 0xfffff) == 0xfffff && kstop(k))
			return IR_EINTR;
		uint64_t q = qmap_index(&m, i);
		double v;
		if (isint)
			v = (double)(kldi(x->dtype, xp, i) - (zp ? kldi(zp->dtype, zpp, q) : 0));
		else
			v = kld(x->dtype, xp, i) - (zp ? kld(zp->dtype, zpp, q) : 0);
		/* the difference is a float32 in the reference; the product is
		 * exact in double, so rounding once when storing matches it */
		v = (float)v;
		kst(dt, y, i, v * kld(scale->dtype, sp, q));
	}
	return 0;
}

/* uint8 quantization of float x with a scale and zero point chosen so that
 * [min(x, 0), max(x, 0)] maps onto [0, 255] (float32 arithmetic). */
static int k_dynquant(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!ir_dtype_is_float(x->dtype))
		return kerr(k, "x must be a float tensor, not %s", ir_dtype_name(x->dtype));
	const void *xp = kdata(x);
	float mx = 0, mn = 0;
	for (uint64_t i = 0; i < x->numel; i++) {
		float v = (float)kld(x->dtype, xp, i);
		if (v > mx)
			mx = v;
		if (v < mn)
			mn = v;
	}
	float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
	float izp = 0.0f - mn / scale;
	if (izp < 0)
		izp = 0;
	if (izp > 255)
		izp = 255;
	float zp = nearbyintf(izp);

	struct ir_tensor *y = kout(k, 0, IR_UINT8, x->rank, x->dims);
	if (!y)
		return IR_ERR;
	uint8_t *yp = kwdata(y);
	for (uint64_t i = 0; i < x->numel; i++) {
		float v = (float)kld(x->dtype, xp, i) / scale;
		float r = isnan(v) ? zp : nearbyintf(v) + zp;
		if (r < 0)
			r = 0;
		if (r > 255)
			r = 255;
		yp[i] = (uint8_t)r;
	}
	struct ir_tensor *s = kout(k, 1, x->dtype, 0, NULL);
	if (!s)
		return IR_ERR;
	kst(x->dtype, kwdata(s), 0, scale);
	struct ir_tensor *z = kout(k, 2, IR_UINT8, 0, NULL);
	if (!z)
		return IR_ERR;
	((uint8_t *)kwdata(z))[0] = (uint8_t)zp;
	return 0;
}

const struct cpu_kernel cpu_kernels_quant[] = {
	{ IR_OP_QuantizeLinear, k_quantize, NULL },
	{ IR_OP_DequantizeLinear, k_dequantize, NULL },
	{ IR_OP_DynamicQuantizeLinear, k_dynquant, NULL },
	{ -1, NULL, NULL },
};
