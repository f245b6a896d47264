/*
 * k_cast.c - CPU kernels: Cast, CastLike, BitCast, and the conversions to
 * the small float types (float16, bfloat16, float8, float4, e8m0).
 *
 * Conversions follow numpy/ml_dtypes, which the ONNX reference uses:
 * floats round to nearest even; floats to integers truncate toward zero
 * and wrap to the type's width (int4/int2 too); float8 types saturate to
 * their largest finite value unless `saturate` is 0, in which case values
 * past it become inf (e5m2) or NaN (the others); float4 e2m1 always
 * saturates and has no NaN; e8m0 keeps only the exponent (round_mode).
 */
#include "cpu.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A binary float format of 1 sign bit, ebits exponent bits, mbits
 * mantissa bits. */
struct sfmt {
	int ebits, mbits, bias;
	double maxfin;     /* largest finite value */
	bool has_inf;      /* all-ones exponent with zero mantissa is inf (IEEE-like) */
	bool uz;           /* "fnuz": no negative zero, 0x80 is the only NaN */
	bool no_nan;       /* float4: no NaN at all */
};

static const struct sfmt fmt_f16 = { 5, 10, 15, 65504.0, true, false, false };
static const struct sfmt fmt_bf16 = { 8, 7, 127, 3.3895313892515355e38, true, false, false };
static const struct sfmt fmt_e4m3fn = { 4, 3, 7, 448.0, false, false, false };
static const struct sfmt fmt_e4m3fnuz = { 4, 3, 8, 240.0, false, true, false };
static const struct sfmt fmt_e5m2 = { 5, 2, 15, 57344.0, true, false, false };
static const struct sfmt fmt_e5m2fnuz = { 5, 2, 16, 57344.0, false, true, false };
static const struct sfmt fmt_e2m1 = { 2, 1, 1, 6.0, false, false, true };

/* The format of a small float dtype, or NULL (e8m0 is not of this kind). */
static const struct sfmt *sfmt_of(int dtype)
{
	switch (dtype) {
	case IR_FLOAT16: return &fmt_f16;
	case IR_BFLOAT16: return &fmt_bf16;
	case IR_F8E4M3FN: return &fmt_e4m3fn;
	case IR_F8E4M3FNUZ: return &fmt_e4m3fnuz;
	case IR_F8E5M2: return &fmt_e5m2;
	case IR_F8E5M2FNUZ: return &fmt_e5m2fnuz;
	case IR_F4E2M1: return &fmt_e2m1;
	default: return NULL;
	}
}

/* The code of the NaN a format writes (quiet NaN, sign clear). */
static uint32_t sf_nan(const struct sfmt *f)
{
	uint32_t sbit = 1u << (f->ebits + f->mbits);
	uint32_t eall = ((1u << f->ebits) - 1) << f->mbits;
	if (f->no_nan || f->uz)
		return sbit;   /* float4 writes -0 like ml_dtypes; fnuz: 0x80 is NaN */
	if (f->has_inf)
		return eall | (1u << (f->mbits - 1));
	return eall | ((1u << f->mbits) - 1);   /* e4m3fn: S.1111.111 */
}

/* Encodes a value that the format represents exactly (|a| <= maxfin). */
static uint32_t sf_pack(const struct sfmt *f, uint32_t s, double a)
{
	if (a == 0)
		return f->uz ? 0 : s;
	int ex;
	frexp(a, &ex);
	int e = ex - 1, emin = 1 - f->bias;
	if (e < emin)   /* subnormal: exponent field 0 */
		return s | (uint32_t)ldexp(a, f->mbits - emin);
	uint32_t m = (uint32_t)ldexp(a, f->mbits - e) - (1u << f->mbits);
	return s | ((uint32_t)(e + f->bias) << f->mbits) | m;
}

/*
 * v rounded to nearest even in format f, as its code. Out of range:
 * saturate gives the largest finite value; otherwise inf where the format
 * has one, NaN where it does not (float4 always saturates).
 */
static uint32_t sf_encode(const struct sfmt *f, double v, bool saturate)
{
	uint32_t sbit = 1u << (f->ebits + f->mbits);
	if (isnan(v)) {
		/* float4 has no NaN: ml_dtypes writes 0 with the sign flipped */
		if (f->no_nan)
			return signbit(v) ? 0 : sbit;
		return sf_nan(f);
	}
	uint32_t s = signbit(v) ? sbit : 0;
	double a = fabs(v), r;
	if (f->no_nan)
		saturate = true;
	if (!isinf(a)) {
		int ex;
		frexp(a, &ex);
		int e = ex - 1, emin = 1 - f->bias;
		if (e < emin)
			e = emin;
		/* a / 2^(e - mbits) is exact; rint rounds half to even, and
		 * the parity of that integer is the parity of the code */
		r = ldexp(rint(ldexp(a, f->mbits - e)), e - f->mbits);
		if (r <= f->maxfin)
			return sf_pack(f, s, r);
	}
	if (saturate)
		return sf_pack(f, s, f->maxfin);
	if (f->has_inf)
		return s | (((1u << f->ebits) - 1) << f->mbits);
	return sf_nan(f);
}

/* float -> e8m0 (2^(code-127), 0xff NaN) by the exponent bits, as the
 * ONNX reference does: round_mode "up" (any fraction rounds up), "down"
 * (truncate) or "nearest"; the sign is dropped; inf and NaN give 0xff. */
static uint8_t e8m0_encode(float v, bool saturate, int mode)
{
	uint32_t bits;
	memcpy(&bits, &v, 4);
	uint32_t e = (bits >> 23) & 0xff;
	if (e == 0xff)
		return 0xff;
	bool up = false;
	if (mode == 0) {   /* up */
		up = (bits & 0x7fffff) != 0;
	} else if (mode == 2) {   /* nearest */
		bool g = bits & 0x400000, r = bits & 0x200000, st = bits & 0x1fffff, lsb = e > 0;
		up = g && (r || st || lsb);
	}
	if (up && saturate && e == 0xfe)
		up = false;
	return (uint8_t)(e + up);
}

/* Float -> float8/float4/e8m0 bits (declared in cpu.h; kst() uses it). */
uint8_t kcvt_f32_to_small(int dtype, float v, bool saturate)
{
	if (dtype == IR_F8E8M0)
		return e8m0_encode(v, saturate, 0);
	const struct sfmt *f = sfmt_of(dtype);
	if (!f)
		return 0;
	return (uint8_t)sf_encode(f, v, saturate);
}

/* --- strings --- */

/* Whether `back` (a value read back from text) is v in dtype's precision. */
static bool same_value(int dtype, double back, double v)
{
	const struct sfmt *f = sfmt_of(dtype);
	switch (dtype) {
	case IR_FLOAT: case IR_COMPLEX64: return (float)back == (float)v;
	case IR_DOUBLE: case IR_COMPLEX128: return back == v;
	default: break;
	}
	if (f)
		return sf_encode(f, back, true) == sf_encode(f, v, true);
	return back == v;
}

/*
 * A number as Cast writes it to a string. Integers in full; floats like
 * numpy's str() (the ONNX reference): the fewest significant digits that
 * read back to the same value in the source type, positional for
 * 1e-4 <= |v| < 1e6 (float32; 1e3 float16, 1e16 float64) ("0.5", "100.0"),
 * scientific otherwise ("1e-05", "1.5e+16"); the special values as the spec's literals "INF", "-INF",
 * "NaN" (numpy writes "inf", "nan"; Cast from string reads both).
 */
static void num_to_str(int dtype, const void *p, uint64_t i, char *buf, size_t size)
{
	if (ir_dtype_is_int(dtype) || dtype == IR_BOOL) {
		if (dtype == IR_UINT64)
			snprintf(buf, size, "%" PRIu64, (uint64_t)kldi(dtype, p, i));
		else
			snprintf(buf, size, "%" PRId64, kldi(dtype, p, i));
		return;
	}
	double v = kld(dtype, p, i);
	if (isnan(v)) {
		snprintf(buf, size, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, size, v > 0 ? "INF" : "-INF");
		return;
	}
	char sci[48];
	int prec = 1;
	for (; prec < 17; prec++) {
		snprintf(sci, sizeof(sci), "%.*e", prec - 1, v);
		if (same_value(dtype, strtod(sci, NULL), v))
			break;
	}
	snprintf(sci, sizeof(sci), "%.*e", prec - 1, v);
	/* numpy's switch to scientific notation: below 1e-4, and from 1e3
	 * (float16), 1e6 (float32) or 1e16 (float64) up */
	double a = fabs(v);
	double big = dtype == IR_DOUBLE || dtype == IR_COMPLEX128 ? 1e16 : dtype == IR_FLOAT16 ? 1e3 : 1e6;
	if (a != 0 && (a < 1e-4 || a >= big)) {
		snprintf(buf, size, "%s", sci);
		return;
	}
	/* positional: the digits of sci placed around the decimal point */
	char digits[24];
	int nd = 0, exp10 = 0;
	const char *c = sci + (sci[0] == '-');
	for (; *c && *c != 'e'; c++)
		if (*c >= '0' && *c <= '9' && nd < (int)sizeof(digits) - 1)
			digits[nd++] = *c;
	if (*c == 'e')
		exp10 = atoi(c + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	char out[64];
	size_t n = 0;
	if (signbit(v))
		out[n++] = '-';
	if (a == 0 || exp10 < 0) {
		out[n++] = '0';
		out[n++] = '.';
		for (int z = 0; a != 0 && z < -exp10 - 1; z++)
			out[n++] = '0';
		for (int d = 0; d < nd; d++)
			out[n++] = a == 0 ? '0' : digits[d];
	} else {
		for (int d = 0; d <= exp10; d++)
			out[n++] = d < nd ? digits[d] : '0';
		out[n++] = '.';
		if (nd <= exp10 + 1)
			out[n++] = '0';
		for (int d = exp10 + 1; d < nd; d++)
			out[n++] = digits[d];
	}
	out[n] = 0;
	snprintf(buf, size, "%s", out);
}

/* A string as a number: decimal/float syntax, "INF"/"inf"/"-INF",
 * "NaN"; false when it is not a number. Integers parse exactly. */
static bool str_to_num(const char *s, bool *is_int, int64_t *iv, uint64_t *uv, double *dv)
{
	char *end;
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return false;
	errno = 0;
	*is_int = false;
	long long ll = strtoll(s, &end, 10);
	if (end != s && !*end && !errno) {
		*is_int = true;
		*iv = ll;
		*uv = (uint64_t)ll;
		*dv = (double)ll;
		return true;
	}
	if (*s != '-') {
		errno = 0;
		unsigned long long ull = strtoull(s, &end, 10);
		if (end != s && !*end && !errno) {
			*is_int = true;
			*uv = ull;
			*iv = (int64_t)ull;
			*dv = (double)ull;
			return true;
		}
	}
	*dv = strtod(s, &end);
	return end != s && !*end;
}

/* --- Cast --- */

/* Rounding of e8m0 from the round_mode attribute; -1 if unknown. */
static int round_mode_of(const char *s)
{
	if (!strcmp(s, "up"))
		return 0;
	if (!strcmp(s, "down"))
		return 1;
	if (!strcmp(s, "nearest"))
		return 2;
	return -1;
}

/* Stores the double v as element i of y (dtype to), by Cast's rules. */
static void cast_store(int to, void *y, uint64_t i, double v, bool saturate, int rmode)
{
	const struct sfmt *f;
	switch (to) {
	case IR_FLOAT: ((float *)y)[i] = (float)v; return;
	case IR_DOUBLE: ((double *)y)[i] = v; return;
	case IR_FLOAT16: case IR_BFLOAT16:
		f = sfmt_of(to);
		((uint16_t *)y)[i] = (uint16_t)sf_encode(f, v, false);
		return;
	case IR_F8E4M3FN: case IR_F8E4M3FNUZ: case IR_F8E5M2: case IR_F8E5M2FNUZ:
		((uint8_t *)y)[i] = (uint8_t)sf_encode(sfmt_of(to), v, saturate);
		return;
	case IR_F8E8M0:
		((uint8_t *)y)[i] = e8m0_encode((float)v, saturate, rmode);
		return;
	case IR_F4E2M1: {
		unsigned char *b = (unsigned char *)y + i / 2;
		unsigned c = sf_encode(&fmt_e2m1, v, true);
		if (i % 2)
			*b = (unsigned char)((*b & 0x0f) | (c << 4));
		else
			*b = (unsigned char)((*b & 0xf0) | c);
		return;
	}
	default:
		kst(to, y, i, v);
		return;
	}
}

static bool is_intlike(int dt)
{
	return ir_dtype_is_int(dt) || dt == IR_BOOL;
}

static int set_string(struct cpu_kctx *k, struct ir_bytes *b, const char *s)
{
	size_t n = strlen(s);
	char *d = malloc(n + 1);
	if (!d)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	memcpy(d, s, n + 1);
	free(b->data);
	b->data = d;
	b->len = n;
	return 0;
}

/* Numeric casts split the elements into blocks of CAST_BLOCK, at least
 * CAST_GRAIN blocks a thread. */
#define CAST_BLOCK 64
#define CAST_GRAIN (4096 / CAST_BLOCK)

struct cast_job {
	int xd, to;
	bool saturate;
	int rmode;
	const void *src;
	void *y;
	uint64_t n;
};

static void cast_blocks(void *ctx, int64_t b, int64_t e, int worker)
{
	const struct cast_job *j = ctx;
	int xd = j->xd, to = j->to;
	const void *src = j->src;
	void *y = j->y;
	uint64_t lo = (uint64_t)b * CAST_BLOCK, hi = (uint64_t)e * CAST_BLOCK;
	(void)worker;
	if (hi > j->n)
		hi = j->n;
	if (is_intlike(xd) && is_intlike(to)) {
		/* exact, wrapping to the target's width (bool: != 0) */
		for (uint64_t i = lo; i < hi; i++)
			ksti(to, y, i, kldi(xd, src, i));
	} else if (to == IR_FLOAT && (xd == IR_INT64 || xd == IR_UINT64)) {
		/* one rounding, not two through a double */
		float *yf = y;
		for (uint64_t i = lo; i < hi; i++)
			yf[i] = xd == IR_INT64 ? (float)((const int64_t *)src)[i] : (float)((const uint64_t *)src)[i];
	} else if (xd == IR_FLOAT && to == IR_FLOAT16) {
		const float *xf = src;
		for (uint64_t i = lo; i < hi; i++)
			((uint16_t *)y)[i] = ir_f32_to_f16(xf[i]);
	} else {
		for (uint64_t i = lo; i < hi; i++)
			cast_store(to, y, i, kld(xd, src, i), j->saturate, j->rmode);
	}
}

static int cast_to(struct cpu_kctx *k, const struct ir_tensor *x, int to, bool saturate, int rmode)
{
	if (!ir_dtype_valid(to))
		return kerr(k, "cannot cast to element type %d: not a valid type", to);
	if (to == x->dtype)
		return kout_share(k, 0, x, x->rank, x->dims);
	struct ir_tensor *o = kout(k, 0, to, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	uint64_t n = x->numel;
	const void *src = kdata(x);
	void *y = kwdata(o);
	int xd = x->dtype;
	char buf[64];

	if (to == IR_STRING) {
		for (uint64_t i = 0; i < n; i++) {
			num_to_str(xd, src, i, buf, sizeof(buf));
			int rc = set_string(k, &o->strings[i], buf);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (xd == IR_STRING) {
		for (uint64_t i = 0; i < n; i++) {
			const char *s = x->strings[i].data ? x->strings[i].data : "";
			bool isint;
			int64_t iv = 0;
			uint64_t uv = 0;
			double dv = 0;
			if (!str_to_num(s, &isint, &iv, &uv, &dv)) {
				if (to == IR_BOOL) {   /* numpy: non-empty strings are true */
					ksti(to, y, i, *s != 0);
					continue;
				}
				return kerr(k, "cannot cast string '%.40s' to %s: not a number", s, ir_dtype_name(to));
			}
			if (isint && to == IR_UINT64)
				((uint64_t *)y)[i] = uv;
			else if (isint && is_intlike(to))
				ksti(to, y, i, iv);
			else
				cast_store(to, y, i, dv, saturate, rmode);
		}
		return 0;
	}
	if (!n)
		return 0;
	struct cast_job j = { xd, to, saturate, rmode, src, y, n };
	if (ir_dtype_bits(xd) < 8 || ir_dtype_bits(to) < 8) {
		/* sub-byte elements share bytes: one thread */
		cast_blocks(&j, 0, (int64_t)((n + CAST_BLOCK - 1) / CAST_BLOCK), 0);
		return 0;
	}
	return kpar(k, (int64_t)((n + CAST_BLOCK - 1) / CAST_BLOCK), CAST_GRAIN, cast_blocks, &j);
}

/* The saturate and round_mode attributes, checked. */
static int cast_attrs(struct cpu_kctx *k, bool *saturate, int *rmode)
{
	*saturate = kattr_i(k, "saturate", 1) != 0;
	const char *rm = kattr_s(k, "round_mode", "up");
	*rmode = round_mode_of(rm);
	if (*rmode < 0)
		return kerr(k, "round_mode '%s' is not one of up, down, nearest", rm);
	return 0;
}

static int k_cast(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!kattr_has(k, "to"))
		return kerr(k, "attribute 'to' is missing");
	bool sat;
	int rmode;
	int rc = cast_attrs(k, &sat, &rmode);
	if (rc)
		return rc;
	int64_t to = kattr_i(k, "to", 0);
	if (to <= 0 || to >= IR_DTYPE_COUNT)
		return kerr(k, "cannot cast to element type %lld: not a valid type", (long long)to);
	return cast_to(k, x, (int)to, sat, rmode);
}

static int k_castlike(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *like = kin_req(k, 1);
	if (!x || !like)
		return IR_ERR;
	bool sat;
	int rmode;
	int rc = cast_attrs(k, &sat, &rmode);
	if (rc)
		return rc;
	return cast_to(k, x, like->dtype, sat, rmode);
}

/* BitCast: the same bytes seen as another type of the same width. */
static int k_bitcast(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t to = kattr_i(k, "to", 0);
	if (to <= 0 || to >= IR_DTYPE_COUNT || !ir_dtype_valid((int)to))
		return kerr(k, "cannot bitcast to element type %lld: not a valid type", (long long)to);
	if (to == IR_STRING || x->dtype == IR_STRING)
		return kerr(k, "cannot bitcast %s to %s: strings have no fixed width",
			    ir_dtype_name(x->dtype), ir_dtype_name((int)to));
	if (ir_dtype_bits(x->dtype) != ir_dtype_bits((int)to))
		return kerr(k, "cannot bitcast %s to %s: the widths differ (%d and %d bits)",
			    ir_dtype_name(x->dtype), ir_dtype_name((int)to), ir_dtype_bits(x->dtype),
			    ir_dtype_bits((int)to));
	struct ir_tensor *o = kout(k, 0, (int)to, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	if (x->numel && o->nbytes)
		memcpy(kwdata(o), kdata(x), o->nbytes < x->nbytes ? o->nbytes : x->nbytes);
	return 0;
}

const struct cpu_kernel cpu_kernels_cast[] = {
	{ IR_OP_Cast, k_cast, NULL },
	{ IR_OP_CastLike, k_castlike, NULL },
	{ IR_OP_BitCast, k_bitcast, NULL },
	{ -1, NULL, NULL },
};
