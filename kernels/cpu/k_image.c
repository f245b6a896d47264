/*
 * k_image.c - CPU kernels: image ops (Resize, Upsample, GridSample,
 * AffineGrid, RoiAlign, MaxRoiPool, NonMaxSuppression).
 *
 * Interpolation happens in double and rounds once when the result is
 * stored; integer outputs round half to even and saturate, like the ONNX
 * reference.
 */
#include "cpu.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                            */
/* ------------------------------------------------------------------------ */

/* The value range of an integer dtype (as doubles). */
static void int_range(int dt, double *lo, double *hi)
{
	switch (dt) {
	case IR_UINT8: *lo = 0; *hi = 255; return;
	case IR_INT8: *lo = -128; *hi = 127; return;
	case IR_UINT16: *lo = 0; *hi = 65535; return;
	case IR_INT16: *lo = -32768; *hi = 32767; return;
	case IR_UINT32: *lo = 0; *hi = 4294967295.0; return;
	case IR_INT32: *lo = -2147483648.0; *hi = 2147483647.0; return;
	case IR_UINT64: *lo = 0; *hi = 18446744073709549568.0; return;
	case IR_UINT4: *lo = 0; *hi = 15; return;
	case IR_INT4: *lo = -8; *hi = 7; return;
	case IR_UINT2: *lo = 0; *hi = 3; return;
	case IR_INT2: *lo = -2; *hi = 1; return;
	default: *lo = -9223372036854775808.0; *hi = 9223372036854774784.0; return;
	}
}

/* Stores v as element i of dtype dt, saturating to the type's range
 * (integers round half to even first). */
static void st_sat(int dt, void *p, uint64_t i, double v)
{
	if (ir_dtype_is_int(dt)) {
		double lo, hi;
		int_range(dt, &lo, &hi);
		v = isnan(v) ? 0 : nearbyint(v);
		v = v < lo ? lo : v > hi ? hi : v;
		if (dt == IR_UINT64)
			((uint64_t *)p)[i] = (uint64_t)v;
		else
			ksti(dt, p, i, (int64_t)v);
		return;
	}
	double m = dt == IR_FLOAT16 ? 65504.0 : dt == IR_BFLOAT16 ? 3.3895313892515355e38 :
		dt == IR_FLOAT ? FLT_MAX : 0;
	if (m && !isnan(v))
		v = v < -m ? -m : v > m ? m : v;
	kst(dt, p, i, v);
}

static bool numeric(int dt)
{
	return dt != IR_STRING && dt != IR_UNDEFINED && dt != IR_COMPLEX64 && dt != IR_COMPLEX128;
}

/* ------------------------------------------------------------------------ */
/* Resize, Upsample                                                          */
/* ------------------------------------------------------------------------ */

enum { RM_NEAREST, RM_LINEAR, RM_CUBIC };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC,
       CT_TF_HALF_PIXEL_NN, CT_TF_CROP };
/* NM_SIMPLE: Resize-10/Upsample (floor when upsampling, ceil when downsampling) */
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

struct rsz_opts {
	int mode, ctm, nm;
	double A;             /* cubic_coeff_a */
	bool exclude;         /* exclude_outside */
	bool antialias;
	double ev;            /* extrapolation_value */
};

static int str_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static const char *const rsz_modes[] = { "nearest", "linear", "cubic" };
static const char *const rsz_ctms[] = { "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
					"align_corners", "asymmetric", "tf_half_pixel_for_nn",
					"tf_crop_and_resize" };
static const char *const rsz_nms[] = { "round_prefer_floor", "round_prefer_ceil", "floor", "ceil" };

static const char *node_attr_s(const struct ir_node *n, const char *name, const char *dflt)
{
	const struct ir_attr *a = ir_node_attr(n, name);
	if (!a || a->type != IR_ATTR_STRING)
		return dflt;
	return a->s.data ? a->s.data : "";
}

static bool resize_supports(const struct ir_node *n, char *why, size_t size)
{
	const char *m = node_attr_s(n, "mode", "nearest");
	const char *c = node_attr_s(n, "coordinate_transformation_mode", "half_pixel");
	const char *nm = node_attr_s(n, "nearest_mode", "round_prefer_floor");
	const char *kp = node_attr_s(n, "keep_aspect_ratio_policy", "stretch");
	if (str_index(m, rsz_modes, 3) < 0 && strcmp(m, "bilinear")) {
		snprintf(why, size, "mode '%s' is not supported", m);
		return false;
	}
	if (str_index(c, rsz_ctms, 7) < 0) {
		snprintf(why, size, "coordinate_transformation_mode '%s' is not supported", c);
		return false;
	}
	if (str_index(nm, rsz_nms, 4) < 0) {
		snprintf(why, size, "nearest_mode '%s' is not supported", nm);
		return false;
	}
	if (strcmp(kp, "stretch") && strcmp(kp, "not_larger") && strcmp(kp, "not_smaller")) {
		snprintf(why, size, "keep_aspect_ratio_policy '%s' is not supported", kp);
		return false;
	}
	return true;
}

/* The filter taps of one axis: output position o reads input indices
 * idx[o*n .. o*n+n) with weights w[...]; ext[o] says "extrapolated". */
struct axis_taps {
	int n;
	int64_t *idx;
	double *w;
	unsigned char *ext;
};

static void taps_free(struct axis_taps *t)
{
	free(t->idx);
	free(t->w);
	free(t->ext);
	memset(t, 0, sizeof(*t));
}

static double cubic_kernel(double x, double A)
{
	x = fabs(x);
	if (x <= 1)
		return ((A + 2) * x - (A + 3)) * x * x + 1;
	if (x < 2)
		return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
	return 0;
}

/* Coefficients of the n taps for a source coordinate with fractional part
 * `ratio` in (0, 1] (1 when the coordinate is an integer), see
 * rsz_taps for the positions they apply to. */
static void rsz_coeffs(const struct rsz_opts *o, double ratio, double scale, int n, double *c)
{
	if (o->mode == RM_NEAREST) {
		bool hi;
		if (ratio == 1)
			hi = true;
		else if (o->nm == NM_ROUND_FLOOR)
			hi = ratio > 0.5;
		else if (o->nm == NM_ROUND_CEIL)
			hi = ratio >= 0.5;
		else if (o->nm == NM_FLOOR)
			hi = false;
		else if (o->nm == NM_CEIL)
			hi = true;
		else
			hi = scale < 1;
		c[0] = hi ? 0 : 1;
		c[1] = hi ? 1 : 0;
		return;
	}
	if (!o->antialias || scale >= 1) {
		if (o->mode == RM_LINEAR) {
			c[0] = 1 - ratio;
			c[1] = ratio;
		} else {
			c[0] = cubic_kernel(ratio + 1, o->A);
			c[1] = cubic_kernel(ratio, o->A);
			c[2] = cubic_kernel(1 - ratio, o->A);
			c[3] = cubic_kernel(2 - ratio, o->A);
		}
		return;
	}
	/* antialiasing: the filter stretched by 1/scale, normalized */
	int start = 1 - n / 2;
	double sum = 0;
	for (int j = 0; j < n; j++) {
		double a = ((double)(start + j) - ratio) * scale;
		if (o->mode == RM_LINEAR) {
			double v = 1 - fabs(a);
			c[j] = v < 0 ? 0 : v > 1 ? 1 : v;
		} else {
			c[j] = cubic_kernel(a, o->A);
		}
		sum += c[j];
	}
	if (sum != 0)
		for (int j = 0; j < n; j++)
			c[j] /= sum;
}

/*
 * Builds the taps of one axis resized from `in` to `out` elements with
 * scale factor `scale` (roi r0..r1 for tf_crop_and_resize).
 */
static int rsz_taps(struct cpu_kctx *k, const struct rsz_opts *o, int64_t in, int64_t out, double scale,
		    double r0, double r1, struct axis_taps *t)
{
	int64_t n = 2;
	if (o->mode == RM_CUBIC)
		n = 4;
	if (o->antialias && o->mode != RM_NEAREST && scale < 1) {
		double reach = o->mode == RM_LINEAR ? 1 : 2;
		double st = floor(-reach / scale) + 1;
		if (!(st > -(1 << 20)))
			return kerr(k, "scale %g is too small for an antialiasing filter", scale);
		n = 2 - 2 * (int64_t)st;
	}
	uint64_t cnt;
	if (!kmul_ok((uint64_t)out, (uint64_t)n, &cnt) || cnt > ((uint64_t)1 << 40))
		return kerr(k, "the interpolation filter is too large");
	t->n = (int)n;
	t->idx = malloc(sizeof(*t->idx) * (cnt ? cnt : 1));
	t->w = malloc(sizeof(*t->w) * (cnt ? cnt : 1));
	t->ext = calloc(out ? (size_t)out : 1, 1);
	double *c = malloc(sizeof(*c) * (size_t)n);
	if (!t->idx || !t->w || !t->ext || !c) {
		free(c);
		return kenomem(k);
	}
	double ow = scale * (double)in;   /* the output length before truncation */
	double win = (double)in;
	for (int64_t i = 0; i < out; i++) {
		double y = (double)i, x;
		switch (o->ctm) {
		case CT_ALIGN_CORNERS:
			x = ow == 1 ? 0 : y * (win - 1) / (ow - 1);
			break;
		case CT_ASYMMETRIC:
			x = y / scale;
			break;
		case CT_TF_HALF_PIXEL_NN:
			x = (y + 0.5) / scale;
			break;
		case CT_TF_CROP:
			if (ow == 1)
				x = (r1 - r0) * (win - 1) / 2;
			else
				x = y * (r1 - r0) * (win - 1) / (ow - 1);
			x += r0 * (win - 1);
			t->ext[i] = x < 0 || x > win - 1;
			break;
		case CT_PYTORCH_HALF_PIXEL:
			x = ow == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
			break;
		case CT_HALF_PIXEL_SYM: {
			double adj = (double)out / ow;
			double center = win / 2;
			x = center * (1 - adj) + (y + 0.5) / scale - 0.5;
			break;
		}
		default:
			x = (y + 0.5) / scale - 0.5;
			break;
		}
		if (!isfinite(x) || fabs(x) > 4e15) {
			if (!t->ext[i]) {
				free(c);
				return kerr(k, "output position %lld maps to the invalid input coordinate %g",
					    (long long)i, x);
			}
			x = 0;
		}
		double fl = floor(x);
		double ratio = x == fl ? 1 : x - fl;
		rsz_coeffs(o, ratio, scale, (int)n, c);
		/* the n nearest input positions, the left one preferred */
		int64_t first = (int64_t)fl + (x == fl ? -n / 2 : -n / 2 + 1);
		int64_t *ix = t->idx + i * n;
		double *w = t->w + i * n;
		double sum = 0;
		for (int64_t j = 0; j < n; j++) {
			int64_t p = first + j;
			w[j] = c[j];
			if (o->exclude && (p < 0 || p >= in))
				w[j] = 0;
			sum += w[j];
			ix[j] = p < 0 ? 0 : p >= in ? in - 1 : p;
		}
		if (o->exclude && sum != 0)
			for (int64_t j = 0; j < n; j++)
				w[j] /= sum;
	}
	free(c);
	return 0;
}

/*
 * Resizes x to dims outd (scales[] per axis, roi[2*rank] or NULL) and
 * makes output 0.
 */
static int resize_run(struct cpu_kctx *k, const struct ir_tensor *x, const struct rsz_opts *o,
		      const double *scales, const int64_t *outd, const double *roi)
{
	int r = x->rank;
	uint64_t onum = 1, big = 1;
	for (int d = 0; d < r; d++) {
		if (outd[d] < 0)
			return kerr(k, "output dimension %d would be negative (%lld)", d, (long long)outd[d]);
		if (x->dims[d] == 0 && outd[d] > 0)
			return kerr(k, "cannot resize the empty axis %d to %lld elements", d, (long long)outd[d]);
		if (!kmul_ok(onum, (uint64_t)outd[d], &onum) ||
		    !kmul_ok(big, (uint64_t)(outd[d] > x->dims[d] ? outd[d] : x->dims[d]), &big) ||
		    big > ((uint64_t)1 << 40))
			return kerr(k, "the output of %s resized would be too large", kshape(x));
	}
	struct ir_tensor *ot = kout(k, 0, x->dtype, r, outd);
	if (!ot)
		return IR_ERR;
	if (onum == 0)
		return 0;
	/* two work buffers in double, each large enough for every stage */
	double *a = malloc(sizeof(double) * big), *b = malloc(sizeof(double) * big);
	if (!a || !b) {
		free(a);
		free(b);
		return kenomem(k);
	}
	const void *xp = kdata(x);
	for (uint64_t i = 0; i < x->numel; i++)
		a[i] = kld(x->dtype, xp, i);
	int64_t cur[IR_MAX_RANK];
	for (int d = 0; d < r; d++)
		cur[d] = x->dims[d];
	int rc = 0;
	for (int d = 0; d < r && !rc; d++) {
		double r0 = roi ? roi[d] : 0, r1 = roi ? roi[r + d] : 1;
		bool tf = o->ctm == CT_TF_CROP;
		if (scales[d] == 1.0 && outd[d] == cur[d] && (!tf || (r0 == 0 && r1 == 1)))
			continue;   /* identity along this axis */
		struct axis_taps t = { 0 };
		if ((rc = rsz_taps(k, o, cur[d], outd[d], scales[d], r0, r1, &t))) {
			taps_free(&t);
			break;
		}
		int64_t outer = 1, inner = 1, in = cur[d], out = outd[d];
		for (int e = 0; e < d; e++)
			outer *= cur[e];
		for (int e = d + 1; e < r; e++)
			inner *= cur[e];
		for (int64_t p = 0; p < outer && !rc; p++) {
			if ((rc = kstop(k)))
				break;
			const double *src = a + p * in * inner;
			double *dst = b + p * out * inner;
			for (int64_t q = 0; q < out; q++) {
				double *row = dst + q * inner;
				if (t.ext[q]) {
					for (int64_t s = 0; s < inner; s++)
						row[s] = o->ev;
					continue;
				}
				for (int64_t s = 0; s < inner; s++)
					row[s] = 0;
				for (int j = 0; j < t.n; j++) {
					double w = t.w[q * t.n + j];
					if (w == 0)
						continue;
					const double *sr = src + t.idx[q * t.n + j] * inner;
					for (int64_t s = 0; s < inner; s++)
						row[s] += w * sr[s];
				}
			}
		}
		taps_free(&t);
		cur[d] = outd[d];
		double *tmp = a;
		a = b;
		b = tmp;
	}
	if (!rc) {
		void *yp = kwdata(ot);
		for (uint64_t i = 0; i < onum; i++)
			st_sat(x->dtype, yp, i, a[i]);
	}
	free(a);
	free(b);
	return rc;
}

/* Reads a float tensor (scales, roi) into vals[max]; the count, or -1. */
static int read_floats(struct cpu_kctx *k, const struct ir_tensor *t, double *vals, int max, const char *what)
{
	if (!ir_dtype_is_float(t->dtype))
		return kerr(k, "%s must be a float tensor, not %s", what, ir_dtype_name(t->dtype)), -1;
	if (t->numel > (uint64_t)max)
		return kerr(k, "%s has %llu elements, %d at most are allowed", what,
			    (unsigned long long)t->numel, max), -1;
	for (uint64_t i = 0; i < t->numel; i++)
		vals[i] = kld(t->dtype, kdata(t), i);
	return (int)t->numel;
}

static int rsz_parse(struct cpu_kctx *k, struct rsz_opts *o, bool legacy)
{
	memset(o, 0, sizeof(*o));   /* the legacy form sets only some options */
	const char *m = kattr_s(k, "mode", "nearest");
	if (!strcmp(m, "bilinear"))
		m = "linear";
	if ((o->mode = str_index(m, rsz_modes, 3)) < 0)
		return kerr(k, "mode '%s' is not supported", m);
	if (legacy) {
		if (o->mode == RM_CUBIC)
			return kerr(k, "mode 'cubic' needs opset 11 or later");
		o->ctm = CT_ASYMMETRIC;
		o->nm = NM_SIMPLE;
		o->A = -0.75;
		return 0;
	}
	const char *c = kattr_s(k, "coordinate_transformation_mode", "half_pixel");
	if ((o->ctm = str_index(c, rsz_ctms, 7)) < 0)
		return kerr(k, "coordinate_transformation_mode '%s' is not supported", c);
	const char *nm = kattr_s(k, "nearest_mode", "round_prefer_floor");
	if ((o->nm = str_index(nm, rsz_nms, 4)) < 0)
		return kerr(k, "nearest_mode '%s' is not supported", nm);
	o->A = kattr_f(k, "cubic_coeff_a", -0.75f);
	o->exclude = kattr_i(k, "exclude_outside", 0) != 0;
	o->antialias = kattr_i(k, "antialias", 0) != 0;
	o->ev = kattr_f(k, "extrapolation_value", 0.0f);
	return 0;
}

static int k_resize(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!numeric(x->dtype))
		return kerr(k, "cannot resize a %s tensor", ir_dtype_name(x->dtype));
	int r = x->rank;
	bool legacy = k->opset > 0 && k->opset < 11;
	struct rsz_opts o;
	if (rsz_parse(k, &o, legacy))
		return IR_ERR;
	const struct ir_tensor *roi_t = legacy ? NULL : kin(k, 1);
	const struct ir_tensor *sc_t = kin(k, legacy ? 1 : 2), *sz_t = legacy ? NULL : kin(k, 3);
	if (sc_t && sc_t->numel == 0)
		sc_t = NULL;
	if (sz_t && sz_t->numel == 0)
		sz_t = NULL;
	if (roi_t && roi_t->numel == 0)
		roi_t = NULL;
	if (!sc_t == !sz_t)
		return kerr(k, sc_t ? "scales and sizes cannot both be given" : "one of scales and sizes is needed");

	/* the resized axes */
	int axes[IR_MAX_RANK], na = 0, nax;
	const int64_t *av = kattr_ints(k, "axes", &nax);
	if (av) {
		bool seen[IR_MAX_RANK] = { false };
		if (nax > r)
			return kerr(k, "axes has %d entries for rank %d", nax, r);
		for (int i = 0; i < nax; i++) {
			if (kaxis(k, av[i], r, &axes[i]))
				return IR_ERR;
			if (seen[axes[i]])
				return kerr(k, "axis %lld appears twice in axes", (long long)av[i]);
			seen[axes[i]] = true;
		}
		na = nax;
	} else {
		for (int i = 0; i < r; i++)
			axes[i] = i;
		na = r;
	}

	double scales[IR_MAX_RANK];
	int64_t outd[IR_MAX_RANK];
	for (int d = 0; d < r; d++) {
		scales[d] = 1;
		outd[d] = x->dims[d];
	}
	if (sc_t) {
		double v[IR_MAX_RANK];
		int n = read_floats(k, sc_t, v, IR_MAX_RANK, "scales");
		if (n < 0)
			return IR_ERR;
		if (n != na)
			return kerr(k, "scales has %d elements, %d are needed", n, na);
		for (int i = 0; i < na; i++) {
			if (!(v[i] > 0) || !isfinite(v[i]))
				return kerr(k, "scale %g must be positive", v[i]);
			double od = floor(v[i] * (double)x->dims[axes[i]]);
			if (od > 4e18)
				return kerr(k, "scale %g makes axis %d too large", v[i], axes[i]);
			scales[axes[i]] = v[i];
			outd[axes[i]] = (int64_t)od;
		}
	} else {
		int64_t v[IR_MAX_RANK];
		int n = kread_ints(k, sz_t, v, IR_MAX_RANK, "sizes");
		if (n < 0)
			return IR_ERR;
		if (n != na)
			return kerr(k, "sizes has %d elements, %d are needed", n, na);
		for (int i = 0; i < na; i++) {
			int d = axes[i];
			if (v[i] < 0)
				return kerr(k, "size %lld is negative", (long long)v[i]);
			if (x->dims[d] == 0 && v[i] != 0)
				return kerr(k, "cannot resize the empty axis %d to %lld elements", d, (long long)v[i]);
			scales[d] = x->dims[d] ? (double)v[i] / (double)x->dims[d] : 1;
			outd[d] = v[i];
		}
		const char *kp = kattr_s(k, "keep_aspect_ratio_policy", "stretch");
		if (strcmp(kp, "stretch")) {
			bool larger = !strcmp(kp, "not_smaller");
			if (!larger && strcmp(kp, "not_larger"))
				return kerr(k, "keep_aspect_ratio_policy '%s' is not supported", kp);
			double s = scales[axes[0]];
			for (int i = 1; i < na; i++) {
				double si = scales[axes[i]];
				if (larger ? si > s : si < s)
					s = si;
			}
			for (int i = 0; i < na; i++) {
				int d = axes[i];
				double od = floor(s * (double)x->dims[d] + 0.5);
				if (od > 4e18)
					return kerr(k, "the resized axis %d would be too large", d);
				scales[d] = s;
				outd[d] = (int64_t)od;
			}
		}
	}
	double roi[2 * IR_MAX_RANK];
	bool have_roi = false;
	if (o.ctm == CT_TF_CROP) {
		if (!roi_t)
			return kerr(k, "coordinate_transformation_mode 'tf_crop_and_resize' needs roi");
		double v[2 * IR_MAX_RANK];
		int n = read_floats(k, roi_t, v, 2 * IR_MAX_RANK, "roi");
		if (n < 0)
			return IR_ERR;
		if (n != 2 * na)
			return kerr(k, "roi has %d elements, %d are needed", n, 2 * na);
		for (int d = 0; d < r; d++) {
			roi[d] = 0;
			roi[r + d] = 1;
		}
		for (int i = 0; i < na; i++) {
			roi[axes[i]] = v[i];
			roi[r + axes[i]] = v[na + i];
		}
		have_roi = true;
	}
	return resize_run(k, x, &o, scales, outd, have_roi ? roi : NULL);
}

/* Upsample (opsets 7-9): Resize with asymmetric coordinates */
static int k_upsample(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!numeric(x->dtype))
		return kerr(k, "cannot upsample a %s tensor", ir_dtype_name(x->dtype));
	struct rsz_opts o;
	if (rsz_parse(k, &o, true))
		return IR_ERR;
	double v[IR_MAX_RANK];
	int n;
	const struct ir_tensor *st = kin(k, 1);
	if (st) {
		if ((n = read_floats(k, st, v, IR_MAX_RANK, "scales")) < 0)
			return IR_ERR;
	} else {
		const float *f = kattr_floats(k, "scales", &n);
		if (!f)
			return kerr(k, "scales is missing");
		if (n > IR_MAX_RANK)
			return kerr(k, "scales has %d elements, %d at most are allowed", n, IR_MAX_RANK);
		for (int i = 0; i < n; i++)
			v[i] = f[i];
	}
	if (n != x->rank)
		return kerr(k, "scales has %d elements, the input has rank %d", n, x->rank);
	int64_t outd[IR_MAX_RANK];
	for (int d = 0; d < n; d++) {
		if (!(v[d] > 0) || !isfinite(v[d]))
			return kerr(k, "scale %g must be positive", v[d]);
		double od = floor(v[d] * (double)x->dims[d]);
		if (od > 4e18)
			return kerr(k, "scale %g makes axis %d too large", v[d], d);
		outd[d] = (int64_t)od;
	}
	return resize_run(k, x, &o, v, outd, NULL);
}

/* ------------------------------------------------------------------------ */
/* GridSample, AffineGrid                                                    */
/* ------------------------------------------------------------------------ */

enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static int gs_mode(const char *m)
{
	if (!strcmp(m, "nearest"))
		return RM_NEAREST;
	if (!strcmp(m, "linear") || !strcmp(m, "bilinear"))
		return RM_LINEAR;
	if (!strcmp(m, "cubic") || !strcmp(m, "bicubic"))
		return RM_CUBIC;
	return -1;
}

static int gs_padding(const char *p)
{
	if (!strcmp(p, "zeros"))
		return GS_ZEROS;
	if (!strcmp(p, "border"))
		return GS_BORDER;
	if (!strcmp(p, "reflection"))
		return GS_REFLECTION;
	return -1;
}

static bool gridsample_supports(const struct ir_node *n, char *why, size_t size)
{
	const char *m = node_attr_s(n, "mode", "linear");
	const char *p = node_attr_s(n, "padding_mode", "zeros");
	if (gs_mode(m) < 0) {
		snprintf(why, size, "mode '%s' is not supported", m);
		return false;
	}
	if (gs_padding(p) < 0) {
		snprintf(why, size, "padding_mode '%s' is not supported", p);
		return false;
	}
	return true;
}

/* Reflects x into [lo, hi] by its borders, repeatedly. */
static double gs_reflect(double x, double lo, double hi)
{
	double rng = hi - lo;
	if (rng <= 0)
		return lo;
	if (x < lo) {
		double dx = lo - x, n = floor(dx / rng), r = dx - n * rng;
		return fmod(n, 2) == 0 ? lo + r : hi - r;
	}
	if (x > hi) {
		double dx = x - hi, n = floor(dx / rng), r = dx - n * rng;
		return fmod(n, 2) == 0 ? hi - r : lo + r;
	}
	return x;
}

/* The input index read for integer position i of an axis of length len;
 * -1 for a zero (padding "zeros" outside). */
static int64_t gs_pixel(int64_t i, int64_t len, int pad, double lo, double hi)
{
	if (pad == GS_ZEROS)
		return i >= 0 && i < len ? i : -1;
	if (pad == GS_REFLECTION)
		i = (int64_t)gs_reflect((double)i, lo, hi);
	return i < 0 ? 0 : i >= len ? len - 1 : i;
}

static int k_gridsample(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *g = kin_req(k, 1);
	if (!x || !g)
		return IR_ERR;
	if (!numeric(x->dtype) || !ir_dtype_is_float(g->dtype))
		return kerr(k, "GridSample needs a numeric input and a float grid, not %s and %s",
			    ir_dtype_name(x->dtype), ir_dtype_name(g->dtype));
	int r = x->rank - 2;
	if (r < 1 || g->rank != x->rank || g->dims[0] != x->dims[0] || g->dims[g->rank - 1] != r)
		return kerr(k, "the grid %s does not fit the input %s (it must be [N, ..., %d])",
			    kshape(g), kshape(x), r);
	const char *ms = kattr_s(k, "mode", "linear"), *ps = kattr_s(k, "padding_mode", "zeros");
	int mode = gs_mode(ms), pad = gs_padding(ps);
	if (mode < 0)
		return kerr(k, "mode '%s' is not supported", ms);
	if (pad < 0)
		return kerr(k, "padding_mode '%s' is not supported", ps);
	bool align = kattr_i(k, "align_corners", 0) != 0;
	int per = mode == RM_NEAREST ? 1 : mode == RM_LINEAR ? 2 : 4;
	if ((mode == RM_LINEAR && r > 10) || (mode == RM_CUBIC && r > 5))
		return kerr(k, "%d spatial dimensions are too many for mode '%s'", r, ms);
	int ntaps = 1;
	for (int d = 0; d < r; d++)
		ntaps *= per;

	int64_t N = x->dims[0], C = x->dims[1];
	int64_t odims[IR_MAX_RANK];
	odims[0] = N;
	odims[1] = C;
	int64_t npts = 1, spatial = 1;
	for (int d = 0; d < r; d++) {
		odims[2 + d] = g->dims[1 + d];
		npts *= g->dims[1 + d];
		spatial *= x->dims[2 + d];
	}
	struct ir_tensor *ot = kout(k, 0, x->dtype, x->rank, odims);
	if (!ot)
		return IR_ERR;
	if (ot->numel == 0)
		return 0;
	if (spatial == 0 && pad != GS_ZEROS)
		return kerr(k, "cannot sample an empty input %s", kshape(x));
	int64_t *tidx = malloc(sizeof(*tidx) * (size_t)ntaps);
	double *tw = malloc(sizeof(*tw) * (size_t)ntaps);
	if (!tidx || !tw) {
		free(tidx);
		free(tw);
		return kenomem(k);
	}
	const void *xp = kdata(x), *gp = kdata(g);
	void *yp = kwdata(ot);
	int64_t sstr[IR_MAX_RANK];   /* strides of the spatial dims of x */
	kstrides(r, x->dims + 2, sstr);
	for (int64_t n = 0; n < N; n++) {
		if (kstop(k)) {
			free(tidx);
			free(tw);
			return IR_EINTR;
		}
		for (int64_t p = 0; p < npts; p++) {
			/* per spatial axis: up to 4 (index, weight) taps */
			int64_t ai[IR_MAX_RANK][4];
			double aw[IR_MAX_RANK][4];
			for (int d = 0; d < r; d++) {
				int64_t len = x->dims[2 + d];
				/* the grid lists coordinates innermost axis first */
				uint64_t gi = ((uint64_t)(n * npts + p)) * (uint64_t)r + (uint64_t)(r - 1 - d);
				float gn = (float)kld(g->dtype, gp, gi);
				float fl = (float)len;
				double c = align ? (gn + 1.0f) / 2.0f * (fl - 1.0f) : ((gn + 1.0f) * fl - 1.0f) / 2.0f;
				double lo = align ? 0 : -0.5, hi = align ? (double)len - 1 : (double)len - 0.5;
				if (mode == RM_NEAREST)
					c = nearbyint(c);
				if (isnan(c))
					c = -1e12;
				if (c < lo || c > hi) {
					if (pad == GS_BORDER)
						c = c < 0 ? 0 : c > (double)len - 1 ? (double)len - 1 : c;
					else if (pad == GS_REFLECTION)
						c = gs_reflect(c, lo, hi);
				}
				/* far-away coordinates only read padding: keep them in range of int64 */
				if (c < -1e12)
					c = -1e12;
				if (c > 1e12)
					c = 1e12;
				if (mode == RM_NEAREST) {
					ai[d][0] = gs_pixel((int64_t)c, len, pad, lo, hi);
					aw[d][0] = 1;
				} else {
					double f = floor(c), t = c - f;
					int64_t i0 = (int64_t)f;
					if (mode == RM_LINEAR) {
						aw[d][0] = 1 - t;
						aw[d][1] = t;
						for (int j = 0; j < 2; j++)
							ai[d][j] = gs_pixel(i0 + j, len, pad, lo, hi);
					} else {
						aw[d][0] = cubic_kernel(t + 1, -0.75);
						aw[d][1] = cubic_kernel(t, -0.75);
						aw[d][2] = cubic_kernel(1 - t, -0.75);
						aw[d][3] = cubic_kernel(2 - t, -0.75);
						for (int j = 0; j < 4; j++)
							ai[d][j] = gs_pixel(i0 - 1 + j, len, pad, lo, hi);
					}
				}
			}
			/* combine the axes: offsets and weights of all corners */
			int nt = 0;
			for (int t = 0; t < ntaps; t++) {
				int rem = t;
				int64_t off = 0;
				double w = 1;
				for (int d = r - 1; d >= 0; d--) {
					int j = rem % per;
					rem /= per;
					if (ai[d][j] < 0) {
						off = -1;
						break;
					}
					off += ai[d][j] * sstr[d];
					w *= aw[d][j];
				}
				if (off < 0 || w == 0)
					continue;
				tidx[nt] = off;
				tw[nt++] = w;
			}
			for (int64_t c = 0; c < C; c++) {
				uint64_t base = (uint64_t)(n * C + c) * (uint64_t)spatial;
				double s = 0;
				for (int t = 0; t < nt; t++)
					s += tw[t] * kld(x->dtype, xp, base + (uint64_t)tidx[t]);
				st_sat(x->dtype, yp, (uint64_t)(n * C + c) * (uint64_t)npts + (uint64_t)p, s);
			}
		}
	}
	free(tidx);
	free(tw);
	return 0;
}

/* The normalized coordinate of position i of an axis of `len` positions. */
static double ag_coord(int64_t i, int64_t len, bool align)
{
	if (align)
		return len > 1 ? -1.0 + (double)i * (2.0 / (double)(len - 1)) : -1.0;
	double step = 2.0 / (double)len;
	return -1.0 + step / 2 + (double)i * step;
}

static int k_affinegrid(struct cpu_kctx *k)
{
	const struct ir_tensor *th = kin_req(k, 0), *sz = kin_req(k, 1);
	if (!th || !sz)
		return IR_ERR;
	if (!ir_dtype_is_float(th->dtype))
		return kerr(k, "theta must be a float tensor, not %s", ir_dtype_name(th->dtype));
	int64_t s[5];
	int ns = kread_ints(k, sz, s, 5, "size");
	if (ns < 0)
		return IR_ERR;
	if (ns != 4 && ns != 5)
		return kerr(k, "size has %d elements, 4 (2-D) or 5 (3-D) are needed", ns);
	int r = ns - 2;
	for (int i = 0; i < ns; i++)
		if (s[i] < 0)
			return kerr(k, "size has the negative value %lld", (long long)s[i]);
	if (th->rank != 3 || th->dims[0] != s[0] || th->dims[1] != r || th->dims[2] != r + 1)
		return kerr(k, "theta %s must be [%lld, %d, %d]", kshape(th), (long long)s[0], r, r + 1);
	bool align = kattr_i(k, "align_corners", 0) != 0;
	int64_t od[5];
	od[0] = s[0];
	uint64_t cnt = (uint64_t)s[0] * (uint64_t)r;
	for (int d = 0; d < r; d++) {
		od[1 + d] = s[2 + d];
		if (!kmul_ok(cnt, (uint64_t)s[2 + d], &cnt) || cnt > ((uint64_t)1 << 40))
			return kerr(k, "the grid for size %s would be too large", kshape(sz));
	}
	od[1 + r] = r;
	struct ir_tensor *ot = kout(k, 0, th->dtype, r + 2, od);
	if (!ot)
		return IR_ERR;
	if (ot->numel == 0)
		return 0;
	void *yp = kwdata(ot);
	const void *tp = kdata(th);
	int64_t npts = 1;
	for (int d = 0; d < r; d++)
		npts *= s[2 + d];
	uint64_t o = 0;
	for (int64_t n = 0; n < s[0]; n++) {
		double T[3][4];
		for (int i = 0; i < r; i++)
			for (int j = 0; j <= r; j++)
				T[i][j] = kld(th->dtype, tp, (uint64_t)((n * r + i) * (r + 1) + j));
		for (int64_t p = 0; p < npts; p++) {
			/* the homogeneous point (x, y[, z], 1), x along the last axis */
			double h[4];
			int64_t rem = p;
			for (int d = r - 1; d >= 0; d--) {
				int64_t len = s[2 + d];
				h[r - 1 - d] = ag_coord(rem % len, len, align);
				rem /= len;
			}
			h[r] = 1;
			for (int i = 0; i < r; i++) {
				double v = 0;
				for (int j = 0; j <= r; j++)
					v += T[i][j] * h[j];
				kst(th->dtype, yp, o++, v);
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* RoiAlign, MaxRoiPool                                                      */
/* ------------------------------------------------------------------------ */

static int k_roialign(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *rois = kin_req(k, 1), *bi = kin_req(k, 2);
	if (!x || !rois || !bi)
		return IR_ERR;
	if (!ir_dtype_is_float(x->dtype) || !ir_dtype_is_float(rois->dtype))
		return kerr(k, "RoiAlign needs float tensors, not %s and %s", ir_dtype_name(x->dtype),
			    ir_dtype_name(rois->dtype));
	if (!ir_dtype_is_int(bi->dtype))
		return kerr(k, "batch_indices must be an integer tensor, not %s", ir_dtype_name(bi->dtype));
	if (x->rank != 4)
		return kerr(k, "the input %s must be 4-D", kshape(x));
	if (rois->rank != 2 || rois->dims[1] != 4)
		return kerr(k, "rois %s must be [num_rois, 4]", kshape(rois));
	if (bi->rank != 1 || bi->dims[0] != rois->dims[0])
		return kerr(k, "batch_indices %s must be [%lld]", kshape(bi), (long long)rois->dims[0]);
	const char *ms = kattr_s(k, "mode", "avg");
	bool maxmode = !strcmp(ms, "max");
	if (!maxmode && strcmp(ms, "avg"))
		return kerr(k, "mode '%s' is not supported", ms);
	const char *cs = kattr_s(k, "coordinate_transformation_mode", k->opset >= 16 ? "half_pixel" : "output_half_pixel");
	bool half = !strcmp(cs, "half_pixel");
	if (!half && strcmp(cs, "output_half_pixel"))
		return kerr(k, "coordinate_transformation_mode '%s' is not supported", cs);
	int64_t ph = kattr_i(k, "output_height", 1), pw = kattr_i(k, "output_width", 1);
	int64_t sr = kattr_i(k, "sampling_ratio", 0);
	double ss = kattr_f(k, "spatial_scale", 1.0f);
	if (ph <= 0 || pw <= 0 || ph > (1 << 20) || pw > (1 << 20))
		return kerr(k, "output size %lldx%lld is invalid", (long long)ph, (long long)pw);
	if (sr < 0 || sr > (1 << 16))
		return kerr(k, "sampling_ratio %lld is invalid", (long long)sr);
	int64_t R = rois->dims[0], N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
	int64_t od[4] = { R, C, ph, pw };
	uint64_t tot;
	if (!kmul_ok((uint64_t)R * (uint64_t)C, (uint64_t)(ph * pw), &tot))
		return kerr(k, "the output would be too large");
	struct ir_tensor *ot = kout(k, 0, x->dtype, 4, od);
	if (!ot)
		return IR_ERR;
	if (ot->numel == 0)
		return 0;
	if (H == 0 || W == 0)
		return kerr(k, "the input %s is empty", kshape(x));
	const void *xp = kdata(x), *rp = kdata(rois), *bp = kdata(bi);
	void *yp = kwdata(ot);
	for (int64_t n = 0; n < R; n++) {
		if (kstop(k))
			return IR_EINTR;
		int64_t b = kldi(bi->dtype, bp, (uint64_t)n);
		if (b < 0 || b >= N)
			return kerr(k, "batch index %lld of roi %lld is out of range for %lld images",
				    (long long)b, (long long)n, (long long)N);
		double off = half ? 0.5 : 0;
		double x0 = kld(rois->dtype, rp, (uint64_t)n * 4) * ss - off;
		double y0 = kld(rois->dtype, rp, (uint64_t)n * 4 + 1) * ss - off;
		double x1 = kld(rois->dtype, rp, (uint64_t)n * 4 + 2) * ss - off;
		double y1 = kld(rois->dtype, rp, (uint64_t)n * 4 + 3) * ss - off;
		if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1))
			return kerr(k, "roi %lld has a non-finite coordinate", (long long)n);
		double rw = x1 - x0, rh = y1 - y0;
		if (!half) {
			/* malformed rois become 1x1 */
			rw = rw > 1 ? rw : 1;
			rh = rh > 1 ? rh : 1;
		}
		double bh = rh / (double)ph, bw = rw / (double)pw;
		double gh_d = sr > 0 ? (double)sr : ceil(rh / (double)ph);
		double gw_d = sr > 0 ? (double)sr : ceil(rw / (double)pw);
		if (gh_d > 1e4 || gw_d > 1e4)
			return kerr(k, "roi %lld needs too many samples per bin", (long long)n);
		int64_t gh = gh_d > 0 ? (int64_t)gh_d : 0, gw = gw_d > 0 ? (int64_t)gw_d : 0;
		double count = gh * gw > 1 ? (double)(gh * gw) : 1;
		for (int64_t c = 0; c < C; c++) {
			uint64_t base = (uint64_t)((b * C + c) * H * W);
			for (int64_t i = 0; i < ph; i++) {
				for (int64_t j = 0; j < pw; j++) {
					double acc = 0;
					bool first = true;
					for (int64_t iy = 0; iy < gh; iy++) {
						double yy = y0 + (double)i * bh + ((double)iy + 0.5) * bh / (double)gh;
						for (int64_t ix = 0; ix < gw; ix++) {
							double xx = x0 + (double)j * bw + ((double)ix + 0.5) * bw / (double)gw;
							double v[4] = { 0, 0, 0, 0 };
							if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
								double y = yy > 0 ? yy : 0, xq = xx > 0 ? xx : 0;
								int64_t yl = (int64_t)y, xl = (int64_t)xq, yh, xh;
								if (yl >= H - 1) {
									yh = yl = H - 1;
									y = (double)yl;
								} else {
									yh = yl + 1;
								}
								if (xl >= W - 1) {
									xh = xl = W - 1;
									xq = (double)xl;
								} else {
									xh = xl + 1;
								}
								double ly = y - (double)yl, lx = xq - (double)xl;
								double hy = 1 - ly, hx = 1 - lx;
								v[0] = hy * hx * kld(x->dtype, xp, base + (uint64_t)(yl * W + xl));
								v[1] = hy * lx * kld(x->dtype, xp, base + (uint64_t)(yl * W + xh));
								v[2] = ly * hx * kld(x->dtype, xp, base + (uint64_t)(yh * W + xl));
								v[3] = ly * lx * kld(x->dtype, xp, base + (uint64_t)(yh * W + xh));
							}
							if (maxmode) {
								/* the largest weighted corner (as onnxruntime) */
								double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
								acc = first ? m : fmax(acc, m);
								first = false;
							} else {
								acc += v[0] + v[1] + v[2] + v[3];
							}
						}
					}
					if (!maxmode)
						acc /= count;
					kst(x->dtype, yp, (uint64_t)(((n * C + c) * ph + i) * pw + j), acc);
				}
			}
		}
	}
	return 0;
}

/* MaxRoiPool: the max of each of pooled_shape bins of each roi
 * [batch, x1, y1, x2, y2] (Caffe's ROIPooling). */
static int k_maxroipool(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *rois = kin_req(k, 1);
	if (!x || !rois)
		return IR_ERR;
	if (!ir_dtype_is_float(x->dtype) || !ir_dtype_is_float(rois->dtype))
		return kerr(k, "MaxRoiPool needs float tensors, not %s and %s", ir_dtype_name(x->dtype),
			    ir_dtype_name(rois->dtype));
	if (x->rank != 4)
		return kerr(k, "the input %s must be 4-D", kshape(x));
	if (rois->rank != 2 || rois->dims[1] != 5)
		return kerr(k, "rois %s must be [num_rois, 5]", kshape(rois));
	int np;
	const int64_t *ps = kattr_ints(k, "pooled_shape", &np);
	if (!ps || np != 2)
		return kerr(k, "pooled_shape must have 2 values");
	int64_t ph = ps[0], pw = ps[1];
	if (ph <= 0 || pw <= 0 || ph > (1 << 20) || pw > (1 << 20))
		return kerr(k, "pooled_shape %lldx%lld is invalid", (long long)ph, (long long)pw);
	double ss = kattr_f(k, "spatial_scale", 1.0f);
	int64_t R = rois->dims[0], N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
	int64_t od[4] = { R, C, ph, pw };
	struct ir_tensor *ot = kout(k, 0, x->dtype, 4, od);
	if (!ot)
		return IR_ERR;
	const void *xp = kdata(x), *rp = kdata(rois);
	void *yp = kwdata(ot);
	for (int64_t n = 0; n < R; n++) {
		if (kstop(k))
			return IR_EINTR;
		double rv[5];
		for (int j = 0; j < 5; j++)
			rv[j] = kld(rois->dtype, rp, (uint64_t)(n * 5 + j));
		for (int j = 0; j < 5; j++)
			if (!isfinite(rv[j]) || fabs(rv[j] * (j ? ss : 1)) > 1e15)
				return kerr(k, "roi %lld has an invalid value", (long long)n);
		int64_t b = (int64_t)rv[0];
		if (b < 0 || b >= N)
			return kerr(k, "batch index %lld of roi %lld is out of range for %lld images",
				    (long long)b, (long long)n, (long long)N);
		int64_t xs = (int64_t)round(rv[1] * ss), ys = (int64_t)round(rv[2] * ss);
		int64_t xe = (int64_t)round(rv[3] * ss), ye = (int64_t)round(rv[4] * ss);
		int64_t rw = xe - xs + 1 > 1 ? xe - xs + 1 : 1, rh = ye - ys + 1 > 1 ? ye - ys + 1 : 1;
		double bh = (double)rh / (double)ph, bw = (double)rw / (double)pw;
		for (int64_t c = 0; c < C; c++) {
			uint64_t base = (uint64_t)((b * C + c) * H * W);
			for (int64_t i = 0; i < ph; i++) {
				int64_t hs = (int64_t)floor((double)i * bh) + ys, he = (int64_t)ceil((double)(i + 1) * bh) + ys;
				hs = hs < 0 ? 0 : hs > H ? H : hs;
				he = he < 0 ? 0 : he > H ? H : he;
				for (int64_t j = 0; j < pw; j++) {
					int64_t ws = (int64_t)floor((double)j * bw) + xs, we = (int64_t)ceil((double)(j + 1) * bw) + xs;
					ws = ws < 0 ? 0 : ws > W ? W : ws;
					we = we < 0 ? 0 : we > W ? W : we;
					double m = 0;
					bool any = false;
					for (int64_t yy = hs; yy < he; yy++)
						for (int64_t xx = ws; xx < we; xx++) {
							double v = kld(x->dtype, xp, base + (uint64_t)(yy * W + xx));
							if (!any || v > m)
								m = v;
							any = true;
						}
					kst(x->dtype, yp, (uint64_t)(((n * C + c) * ph + i) * pw + j), any ? m : 0);
				}
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* NonMaxSuppression                                                         */
/* ------------------------------------------------------------------------ */

struct nms_box {
	float score;
	int64_t idx;
};

/* highest score first; equal scores: lower index first; NaN last */
static int nms_cmp(const void *pa, const void *pb)
{
	const struct nms_box *a = pa, *b = pb;
	bool na = isnan(a->score), nb = isnan(b->score);
	if (na != nb)
		return na ? 1 : -1;
	if (!na && a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* The corners (ymin, xmin, ymax, xmax) of box i of a batch. */
static void nms_corners(const float *bx, bool center, float *c)
{
	if (center) {
		float hw = bx[2] / 2, hh = bx[3] / 2;
		c[0] = bx[1] - hh;
		c[1] = bx[0] - hw;
		c[2] = bx[1] + hh;
		c[3] = bx[0] + hw;
	} else {
		c[0] = fminf(bx[0], bx[2]);
		c[1] = fminf(bx[1], bx[3]);
		c[2] = fmaxf(bx[0], bx[2]);
		c[3] = fmaxf(bx[1], bx[3]);
	}
}

/* Whether the IoU of two boxes (corners) exceeds the threshold. */
static bool nms_suppress(const float *a, const float *b, float thr)
{
	float ix0 = fmaxf(a[1], b[1]), ix1 = fminf(a[3], b[3]);
	if (ix1 <= ix0)
		return false;
	float iy0 = fmaxf(a[0], b[0]), iy1 = fminf(a[2], b[2]);
	if (iy1 <= iy0)
		return false;
	float inter = (ix1 - ix0) * (iy1 - iy0);
	if (inter <= 0)
		return false;
	float a1 = (a[3] - a[1]) * (a[2] - a[0]), a2 = (b[3] - b[1]) * (b[2] - b[0]);
	float uni = a1 + a2 - inter;
	if (a1 <= 0 || a2 <= 0 || uni <= 0)
		return false;
	return inter / uni > thr;
}

static int k_nms(struct cpu_kctx *k)
{
	const struct ir_tensor *boxes = kin_req(k, 0), *scores = kin_req(k, 1);
	if (!boxes || !scores)
		return IR_ERR;
	const struct ir_tensor *mo = kin(k, 2), *it = kin(k, 3), *st = kin(k, 4);
	if (!ir_dtype_is_float(boxes->dtype) || !ir_dtype_is_float(scores->dtype))
		return kerr(k, "boxes and scores must be float tensors, not %s and %s",
			    ir_dtype_name(boxes->dtype), ir_dtype_name(scores->dtype));
	if (boxes->rank != 3 || boxes->dims[2] != 4)
		return kerr(k, "boxes %s must be [batches, boxes, 4]", kshape(boxes));
	if (scores->rank != 3 || scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
		return kerr(k, "scores %s do not fit boxes %s (they must be [%lld, classes, %lld])",
			    kshape(scores), kshape(boxes), (long long)boxes->dims[0], (long long)boxes->dims[1]);
	int64_t maxout = 0;
	float iou = 0, sthr = 0;
	bool has_sthr = false;
	if (mo && mo->numel) {
		if (!ir_dtype_is_int(mo->dtype))
			return kerr(k, "max_output_boxes_per_class must be an integer");
		maxout = kldi(mo->dtype, kdata(mo), 0);
		if (maxout < 0)
			maxout = 0;
	}
	if (it && it->numel) {
		if (!ir_dtype_is_float(it->dtype))
			return kerr(k, "iou_threshold must be a float");
		iou = (float)kld(it->dtype, kdata(it), 0);
	}
	if (st && st->numel) {
		if (!ir_dtype_is_float(st->dtype))
			return kerr(k, "score_threshold must be a float");
		sthr = (float)kld(st->dtype, kdata(st), 0);
		has_sthr = true;
	}
	bool center = kattr_i(k, "center_point_box", 0) != 0;
	int64_t B = boxes->dims[0], NB = boxes->dims[1], NC = scores->dims[1];
	int64_t per = maxout < NB ? maxout : NB;
	uint64_t cap;
	if (!kmul_ok((uint64_t)B * (uint64_t)NC, (uint64_t)per, &cap) || cap > ((uint64_t)1 << 32))
		return kerr(k, "too many boxes");
	float *corn = malloc(sizeof(float) * 4 * (size_t)(NB ? NB : 1));
	struct nms_box *cand = malloc(sizeof(*cand) * (size_t)(NB ? NB : 1));
	int64_t *sel = malloc(sizeof(int64_t) * (size_t)(per ? per : 1));
	int64_t *res = malloc(sizeof(int64_t) * 3 * (size_t)(cap ? cap : 1));
	int rc = 0;
	uint64_t nres = 0;
	if (!corn || !cand || !sel || !res) {
		rc = kenomem(k);
		goto out;
	}
	const void *bp = kdata(boxes), *sp = kdata(scores);
	for (int64_t b = 0; b < B && per > 0; b++) {
		for (int64_t i = 0; i < NB; i++) {
			float bx[4];
			for (int j = 0; j < 4; j++)
				bx[j] = (float)kld(boxes->dtype, bp, (uint64_t)((b * NB + i) * 4 + j));
			nms_corners(bx, center, corn + 4 * i);
		}
		for (int64_t c = 0; c < NC; c++) {
			if ((rc = kstop(k)))
				goto out;
			int64_t nc = 0;
			for (int64_t i = 0; i < NB; i++) {
				float s = (float)kld(scores->dtype, sp, (uint64_t)((b * NC + c) * NB + i));
				if (has_sthr && !(s > sthr))
					continue;
				cand[nc].score = s;
				cand[nc++].idx = i;
			}
			qsort(cand, (size_t)nc, sizeof(*cand), nms_cmp);
			int64_t ns = 0;
			for (int64_t i = 0; i < nc && ns < per; i++) {
				const float *ci = corn + 4 * cand[i].idx;
				bool keep = true;
				for (int64_t j = 0; j < ns && keep; j++)
					keep = !nms_suppress(ci, corn + 4 * sel[j], iou);
				if (!keep)
					continue;
				sel[ns++] = cand[i].idx;
				res[3 * nres] = b;
				res[3 * nres + 1] = c;
				res[3 * nres + 2] = cand[i].idx;
				nres++;
			}
		}
	}
	int64_t od[2] = { (int64_t)nres, 3 };
	struct ir_tensor *ot = kout(k, 0, IR_INT64, 2, od);
	if (!ot) {
		rc = IR_ERR;
		goto out;
	}
	if (nres)
		memcpy(kwdata(ot), res, sizeof(int64_t) * 3 * nres);
out:
	free(corn);
	free(cand);
	free(sel);
	free(res);
	return rc;
}

const struct cpu_kernel cpu_kernels_image[] = {
	{ IR_OP_Resize, k_resize, resize_supports },
	{ IR_OP_Upsample, k_upsample, NULL },
	{ IR_OP_GridSample, k_gridsample, gridsample_supports },
	{ IR_OP_AffineGrid, k_affinegrid, NULL },
	{ IR_OP_RoiAlign, k_roialign, NULL },
	{ IR_OP_MaxRoiPool, k_maxroipool, NULL },
	{ IR_OP_NonMaxSuppression, k_nms, NULL },
	{ -1, NULL, NULL },
};
