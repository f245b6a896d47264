/*
 * shape_nn.c - shape functions of neural-network ops: convolutions,
 * pooling, Gemm and MatMul, reductions, recurrent layers, attention, losses,
 * signal processing (DFT, STFT), sampling grids and ROI ops.
 *
 * Symbolic spatial dims stay symbolic where the output is an exact
 * expression of them (stride 1, 'same' padding on a multiple of the stride,
 * transposed convolutions, global pooling); where a floor of a quotient is
 * needed that ogsh cannot write, the dim is unknown with a reason.
 */
#include "infer.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Kernel sizes, strides, dilations and pads beyond this are nonsense (and
 * their products would overflow). */
#define ATTR_LIM ((int64_t)1 << 31)

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */




static const char *dstr(const struct ir_dim *d, char *buf, size_t size)
{
	return ir_dim_str(d, buf, size);
}

/*
 * Output i gets elem and dims; when some dim stays unknown, the reason is
 * the formatted message (NULL: none).
 */
static void out_dims(struct ir_infer *x, struct ir_node *n, int i, int elem, int r, const struct ir_dim *d,
		     const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void out_dims(struct ir_infer *x, struct ir_node *n, int i, int elem, int r, const struct ir_dim *d,
		     const char *fmt, ...)
{
	char msg[400] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
	}
	sx_out_dims(x, n, i, elem, r, d, fmt ? msg : NULL);
}

/* The element type of input a, else of input b (inputs of one type T). */
static int elem_of(struct ir_infer *x, const struct ir_node *n, int a, int b)
{
	int e = sx_elem(x, n, a);
	return e ? e : sx_elem(x, n, b);
}


/*
 * An ints attribute of exactly `want` values in [lo, hi] into out; absent:
 * every value is dflt and *present false. false after sx_fail when the
 * attribute does not fit.
 */
static bool ints_attr(struct ir_infer *x, struct ir_node *n, const char *name, int want, int64_t *out,
		      int64_t dflt, int64_t lo, int64_t hi, bool *present)
{
	int64_t tmp[2 * IR_MAX_RANK];
	int c = sx_attr_ints(x, n, name, tmp, 2 * IR_MAX_RANK);
	if (present)
		*present = c >= 0;
	if (c < 0) {
		for (int k = 0; k < want; k++)
			out[k] = dflt;
		return true;
	}
	if (c != want) {
		sx_fail(x, n, "'%s' has %d values where %d are needed", name, c, want);
		return false;
	}
	for (int k = 0; k < c; k++) {
		if (tmp[k] < lo || tmp[k] > hi) {
			sx_fail(x, n, "'%s' has a value out of range (%" PRId64 ")", name, tmp[k]);
			return false;
		}
		out[k] = tmp[k];
	}
	return true;
}

/* The opset of the node, with "not imported" read as the newest. */

/* ------------------------------------------------------------------------ */
/* Sliding windows: convolution and pooling                                  */
/* ------------------------------------------------------------------------ */

enum pad_mode { PAD_EXPLICIT, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

struct window {
	int n;                        /* spatial axes */
	int64_t k[IR_MAX_RANK];       /* kernel; 0 when not known */
	int64_t s[IR_MAX_RANK];       /* strides */
	int64_t d[IR_MAX_RANK];       /* dilations */
	int64_t pb[IR_MAX_RANK], pe[IR_MAX_RANK];   /* explicit pads (begin, end) */
	enum pad_mode mode;
	bool ceil;                    /* ceil_mode */
	bool drop;                    /* ceil_mode drops a window that starts in the end padding */
};

/*
 * Reads strides, dilations (when `dilations`), pads and auto_pad for `nsp`
 * spatial axes. The kernel is filled by the caller. false after sx_fail.
 */
static bool read_window(struct ir_infer *x, struct ir_node *n, int nsp, bool dilations, struct window *w)
{
	memset(w, 0, sizeof(*w));
	w->n = nsp;
	int64_t pads[2 * IR_MAX_RANK];
	bool has_pads;
	if (!ints_attr(x, n, "strides", nsp, w->s, 1, 1, ATTR_LIM, NULL))
		return false;
	if (dilations) {
		if (!ints_attr(x, n, "dilations", nsp, w->d, 1, 1, ATTR_LIM, NULL))
			return false;
	} else {
		for (int k = 0; k < nsp; k++)
			w->d[k] = 1;
	}
	if (!ints_attr(x, n, "pads", 2 * nsp, pads, 0, 0, ATTR_LIM, &has_pads))
		return false;
	for (int k = 0; k < nsp; k++) {
		w->pb[k] = pads[k];
		w->pe[k] = pads[k + nsp];
	}
	const char *ap = sx_attr_str(x, n, "auto_pad", "NOTSET");
	if (strcmp(ap, "NOTSET") == 0) {
		w->mode = PAD_EXPLICIT;
	} else if (strcmp(ap, "VALID") == 0) {
		w->mode = PAD_VALID;
	} else if (strcmp(ap, "SAME_UPPER") == 0) {
		w->mode = PAD_SAME_UPPER;
	} else if (strcmp(ap, "SAME_LOWER") == 0) {
		w->mode = PAD_SAME_LOWER;
	} else {
		sx_fail(x, n, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
		return false;
	}
	/* explicit pads win over auto_pad (as ONNX's own inference reads them) */
	if (has_pads)
		w->mode = PAD_EXPLICIT;
	if (w->mode == PAD_VALID)
		for (int k = 0; k < nsp; k++)
			w->pb[k] = w->pe[k] = 0;
	return true;
}

/* The kernel from kernel_shape (or, when absent and `wd` is given, from the
 * weight's spatial dims). false after sx_fail. */
static bool read_kernel(struct ir_infer *x, struct ir_node *n, struct window *w, bool required,
			const struct ir_dim *wd)
{
	bool present;
	if (!ints_attr(x, n, "kernel_shape", w->n, w->k, 0, 1, ATTR_LIM, &present))
		return false;
	if (!present && required) {
		sx_fail(x, n, "it has no kernel_shape");
		return false;
	}
	for (int k = 0; k < w->n && wd; k++) {
		const struct ir_dim *e = &wd[2 + k];
		if (e->kind != IR_DIM_VALUE)
			continue;
		if (present && e->value != w->k[k]) {
			sx_fail(x, n, "kernel_shape[%d] is %" PRId64 " but the weight's kernel is %" PRId64, k, w->k[k],
				e->value);
			return false;
		}
		if (!present) {
			if (e->value < 1 || e->value > ATTR_LIM) {
				sx_fail(x, n, "the weight's kernel size %" PRId64 " is out of range", e->value);
				return false;
			}
			w->k[k] = e->value;
		}
	}
	return true;
}

/*
 * Output size of spatial axis i for input size `in`. Unknown when it cannot
 * be written; *bad set when the (padded) input is smaller than the kernel.
 */
static struct ir_dim window_out(struct ir_infer *x, const struct window *w, int i, const struct ir_dim *in, bool *bad)
{
	int64_t s = w->s[i];
	if (in->kind == IR_DIM_UNKNOWN || (in->kind == IR_DIM_VALUE && (in->value < 0 || in->value > INT64_MAX / 4)))
		return sx_unknown();
	/*
	 * 'same' padding: ceil(in / stride) whatever the kernel (ONNX's own
	 * inference before opset 22 adds one with ceil_mode when the kernel is
	 * smaller than the stride; the spec and onnxruntime do not)
	 */
	if (w->mode == PAD_SAME_UPPER || w->mode == PAD_SAME_LOWER)
		return sx_ceildiv(x, in, s);
	if (!w->k[i])
		return sx_unknown();
	int64_t ek = (w->k[i] - 1) * w->d[i] + 1;   /* at most 2^62 */
	int64_t pb = w->pb[i], pe = w->pe[i];
	if (in->kind == IR_DIM_VALUE) {
		int64_t v = in->value, eff = v + pb + pe;
		if (eff < ek) {
			*bad = true;
			return sx_unknown();
		}
		int64_t o = (eff - ek + (w->ceil ? s - 1 : 0)) / s + 1;
		if (w->ceil && w->drop && (o - 1) * s >= v + pb)
			o--;
		return sx_v(o);
	}
	struct ir_dim c = sx_v(pb + pe - ek);
	struct ir_dim base = sx_add(x, in, &c);
	struct ir_dim q = w->ceil ? sx_ceildiv(x, &base, s) : sx_floordiv(x, &base, s);
	if (q.kind == IR_DIM_UNKNOWN)
		return q;
	/* q is exact: the last window starts at q*s = in + pb + pe - ek, in the end padding iff pe >= ek */
	struct ir_dim one = sx_v(w->ceil && w->drop && pe >= ek ? 0 : 1);
	return sx_add(x, &q, &one);
}

/*
 * Fills out[2..2+n) with the spatial output sizes for input dims `in`
 * (rank n + 2); why (size bytes) gets the reason of the first that stays
 * unknown. false after sx_fail.
 */
static bool window_dims(struct ir_infer *x, struct ir_node *n, const struct window *w, const struct ir_dim *in,
			struct ir_dim *out, char *why, size_t size)
{
	*why = 0;
	for (int k = 0; k < w->n; k++) {
		bool bad = false;
		char b[64];
		const struct ir_dim *d = &in[2 + k];
		out[2 + k] = window_out(x, w, k, d, &bad);
		if (bad) {
			sx_fail(x, n, "the kernel (%" PRId64 ", dilation %" PRId64 ") is larger than the padded input (%s + %" PRId64
				") on spatial axis %d", w->k[k], w->d[k], dstr(d, b, sizeof(b)), w->pb[k] + w->pe[k], k);
			return false;
		}
		if (out[2 + k].kind != IR_DIM_UNKNOWN || *why)
			continue;
		if (d->kind == IR_DIM_UNKNOWN)
			snprintf(why, size, "the input's size on spatial axis %d is not known", k);
		else if (w->mode == PAD_SAME_UPPER || w->mode == PAD_SAME_LOWER)
			snprintf(why, size, "spatial axis %d: ceil(%s / %" PRId64 ") is not an exact expression", k,
				 dstr(d, b, sizeof(b)), w->s[k]);
		else if (!w->k[k])
			snprintf(why, size, "the kernel size on spatial axis %d is not known (no kernel_shape, and the weight's "
				 "dim is not known)", k);
		else {
			int64_t c = w->pb[k] + w->pe[k] - (w->k[k] - 1) * w->d[k] - 1;
			snprintf(why, size, "spatial axis %d: %s((%s %c %" PRId64 ") / %" PRId64 ") + 1 is not an exact expression",
				 k, w->ceil ? "ceil" : "floor", dstr(d, b, sizeof(b)), c < 0 ? '-' : '+', c < 0 ? -c : c, w->s[k]);
		}
	}
	return true;
}

/*
 * Conv, ConvInteger, QLinearConv, DeformConv: input xi (N, C, D...), weight
 * wi (M, C/group, k...), bias bi (-1: none); output elem.
 */
static void conv_like(struct ir_infer *x, struct ir_node *n, int xi, int wi, int bi, int elem)
{
	int rx = sx_rank(x, n, xi), rw = sx_rank(x, n, wi);
	const struct ir_dim *dx = sx_dims(x, n, xi), *dw = sx_dims(x, n, wi);
	if (rx >= 0 && rw >= 0 && rx != rw) {
		sx_fail(x, n, "the input has rank %d but the weight rank %d", rx, rw);
		return;
	}
	int r = rx >= 0 ? rx : rw;
	if (r < 0) {
		sx_out_from(x, n, 0, elem, xi);
		return;
	}
	if (r < 3) {
		sx_fail(x, n, "the input must have rank 3 or more (N, C, spatial axes), not %d", r);
		return;
	}
	int64_t group = sx_attr_int(x, n, "group", 1);
	if (group < 1 || group > ATTR_LIM) {
		sx_fail(x, n, "group %" PRId64 " is not positive", group);
		return;
	}
	struct window w;
	if (!read_window(x, n, r - 2, true, &w) || !read_kernel(x, n, &w, false, dw))
		return;
	struct ir_dim out[IR_MAX_RANK], unk[IR_MAX_RANK];
	for (int k = 0; k < r; k++)
		unk[k] = sx_unknown();
	if (!dx)
		dx = unk;
	if (!dw)
		dw = unk;
	/* channels: C == (C/group) * group, M divisible by group */
	int64_t cin;
	if (dx[1].kind == IR_DIM_VALUE && dw[1].kind == IR_DIM_VALUE &&
	    (__builtin_mul_overflow(dw[1].value, group, &cin) || dx[1].value != cin)) {
		sx_fail(x, n, "the input has %" PRId64 " channels but the weight expects %" PRId64 " x group %" PRId64,
			dx[1].value, dw[1].value, group);
		return;
	}
	if (dw[0].kind == IR_DIM_VALUE && dw[0].value % group) {
		sx_fail(x, n, "the weight's %" PRId64 " output channels are not a multiple of group %" PRId64, dw[0].value,
			group);
		return;
	}
	out[0] = dx[0];
	out[1] = dw[0];
	if (bi >= 0 && sx_has(n, bi)) {
		struct ir_dim b = sx_in_dim(x, n, bi, 0), m;
		if (sx_rank(x, n, bi) == 1 && sx_merge(&out[1], &b, &m))
			out[1] = m;
	}
	char why[300];
	if (!window_dims(x, n, &w, dx, out, why, sizeof(why)))
		return;
	if (n->op == IR_OP_DeformConv && sx_rank(x, n, 2) == r) {
		/* the offset input is (N, offset_group * 2 * kernel size, out spatial...) */
		for (int k = 2; k < r; k++) {
			struct ir_dim o = sx_in_dim(x, n, 2, k), m;
			if (!sx_merge(&out[k], &o, &m)) {
				char a[64], b[64];
				sx_fail(x, n, "output spatial size %s disagrees with the offset's %s", dstr(&out[k], a, sizeof(a)),
					dstr(&o, b, sizeof(b)));
				return;
			}
			out[k] = m;
		}
	}
	out_dims(x, n, 0, elem, r, out, "%s", dx == unk ? sx_why(x, n, xi) : *why ? why : "a dimension of its inputs is not known");
}

static void conv(struct ir_infer *x, struct ir_node *n)
{
	conv_like(x, n, 0, 1, 2, elem_of(x, n, 0, 1));
}

static void conv_integer(struct ir_infer *x, struct ir_node *n)
{
	conv_like(x, n, 0, 1, -1, IR_INT32);
}

static void qlinear_conv(struct ir_infer *x, struct ir_node *n)
{
	/* x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B */
	conv_like(x, n, 0, 3, 8, sx_elem(x, n, 7));
}

static void deform_conv(struct ir_infer *x, struct ir_node *n)
{
	conv_like(x, n, 0, 1, 3, elem_of(x, n, 0, 1));
}

static void conv_transpose(struct ir_infer *x, struct ir_node *n)
{
	int elem = elem_of(x, n, 0, 1);
	int rx = sx_rank(x, n, 0), rw = sx_rank(x, n, 1);
	const struct ir_dim *dx = sx_dims(x, n, 0), *dw = sx_dims(x, n, 1);
	if (rx >= 0 && rw >= 0 && rx != rw) {
		sx_fail(x, n, "the input has rank %d but the weight rank %d", rx, rw);
		return;
	}
	int r = rx >= 0 ? rx : rw;
	if (r < 0) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (r < 3) {
		sx_fail(x, n, "the input must have rank 3 or more (N, C, spatial axes), not %d", r);
		return;
	}
	int nsp = r - 2;
	int64_t group = sx_attr_int(x, n, "group", 1);
	if (group < 1 || group > ATTR_LIM) {
		sx_fail(x, n, "group %" PRId64 " is not positive", group);
		return;
	}
	struct window w;
	int64_t opad[IR_MAX_RANK], oshape[IR_MAX_RANK];
	if (!read_window(x, n, nsp, true, &w) || !read_kernel(x, n, &w, false, dw) ||
	    !ints_attr(x, n, "output_padding", nsp, opad, 0, 0, ATTR_LIM, NULL))
		return;
	/* output_shape: the spatial sizes (some exporters write N and C too) */
	int64_t os_raw[IR_MAX_RANK + 2];
	int nos = sx_attr_ints(x, n, "output_shape", os_raw, IR_MAX_RANK + 2);
	if (nos >= 0 && nos != nsp && nos != nsp + 2) {
		sx_fail(x, n, "output_shape has %d values for %d spatial axes", nos, nsp);
		return;
	}
	for (int k = 0; k < nsp && nos >= 0; k++) {
		oshape[k] = os_raw[k + (nos - nsp)];
		if (oshape[k] < 0 || oshape[k] > ((int64_t)1 << 62)) {
			sx_fail(x, n, "output_shape has a value out of range (%" PRId64 ")", oshape[k]);
			return;
		}
	}
	struct ir_dim out[IR_MAX_RANK], unk[IR_MAX_RANK];
	for (int k = 0; k < r; k++)
		unk[k] = sx_unknown();
	if (!dx)
		dx = unk;
	if (!dw)
		dw = unk;
	if (dx[1].kind == IR_DIM_VALUE && dw[0].kind == IR_DIM_VALUE && dx[1].value != dw[0].value) {
		sx_fail(x, n, "the input has %" PRId64 " channels but the weight %" PRId64, dx[1].value, dw[0].value);
		return;
	}
	struct ir_dim g = sx_v(group);
	out[0] = dx[0];
	out[1] = sx_mul(x, &dw[1], &g);
	if (sx_has(n, 2) && sx_rank(x, n, 2) == 1) {
		struct ir_dim b = sx_in_dim(x, n, 2, 0), m;
		if (sx_merge(&out[1], &b, &m))
			out[1] = m;
	}
	for (int k = 0; k < nsp; k++) {
		const struct ir_dim *in = &dx[2 + k];
		if (nos >= 0) {
			out[2 + k] = sx_v(oshape[k]);
			continue;
		}
		if (!w.k[k] || in->kind == IR_DIM_UNKNOWN) {
			out[2 + k] = sx_unknown();
			continue;
		}
		int64_t ek = (w.k[k] - 1) * w.d[k] + 1, pads = w.pb[k] + w.pe[k];
		if (w.mode == PAD_SAME_UPPER || w.mode == PAD_SAME_LOWER)
			pads = ek - w.s[k] > 0 ? ek - w.s[k] : 0;
		/* s * (in - 1) + output_padding + ek - pads */
		struct ir_dim s = sx_v(w.s[k]), c = sx_v(opad[k] + ek - pads - w.s[k]);
		struct ir_dim t = sx_mul(x, &s, in);
		out[2 + k] = sx_add(x, &t, &c);
	}
	out_dims(x, n, 0, elem, r, out, "%s", dx == unk ? sx_why(x, n, 0) : "a spatial size of its input or kernel is not known");
}

/* AveragePool, MaxPool, LpPool */
static void pool(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int64_t v = sx_opset(x, n);
	int64_t dil_since = n->op == IR_OP_MaxPool ? 10 : n->op == IR_OP_AveragePool ? 19 : 18;
	int64_t ceil_since = n->op == IR_OP_LpPool ? 18 : 10;
	int r;
	const struct ir_dim *d = sx_dims(x, n, 0);
	r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		sx_out_from(x, n, 1, IR_INT64, 0);
		return;
	}
	if (r < 3) {
		sx_fail(x, n, "the input must have rank 3 or more (N, C, spatial axes), not %d", r);
		return;
	}
	struct window w;
	if (!read_window(x, n, r - 2, v >= dil_since, &w) || !read_kernel(x, n, &w, true, NULL))
		return;
	if (v >= ceil_since)
		w.ceil = sx_attr_int(x, n, "ceil_mode", 0) != 0;
	/* ONNX's inference drops a last window that starts in the end padding from opset 22 */
	w.drop = v >= 22;
	struct ir_dim out[IR_MAX_RANK];
	out[0] = d[0];
	out[1] = d[1];
	char why[300];
	if (!window_dims(x, n, &w, d, out, why, sizeof(why)))
		return;
	out_dims(x, n, 0, elem, r, out, "%s", *why ? why : "a dimension of the input is not known");
	out_dims(x, n, 1, IR_INT64, r, out, "%s", *why ? why : "a dimension of the input is not known");
}

static void global_pool(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (!sx_rank_in(x, n, 0, 2, IR_MAX_RANK, "the input"))
		return;
	struct ir_dim out[IR_MAX_RANK];
	for (int k = 0; k < r; k++)
		out[k] = k < 2 ? d[k] : sx_v(1);
	sx_out(x, n, 0, elem, r, out);
}

static void max_unpool(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (sx_has(n, 2)) {
		/* output_shape gives the whole shape */
		int c;
		const struct ir_dim *v = sx_vals(x, n, 2, &c);
		if (v) {
			if (d && c != r) {
				sx_fail(x, n, "output_shape has %d values for an input of rank %d", c, r);
				return;
			}
			out_dims(x, n, 0, elem, c, v, "some values of the output_shape input are not known");
			return;
		}
		int rs = sx_rank(x, n, 2);
		struct ir_dim len = sx_in_dim(x, n, 2, 0);
		int ro = d ? r : (rs == 1 && len.kind == IR_DIM_VALUE && len.value <= IR_MAX_RANK) ? (int)len.value : -1;
		if (ro < 0) {
			sx_out_unknown(x, n, 0, elem, "the output_shape input is not known");
			return;
		}
		struct ir_dim out[IR_MAX_RANK];
		for (int k = 0; k < ro; k++)
			out[k] = sx_unknown();
		out_dims(x, n, 0, elem, ro, out, "the values of the output_shape input are not known");
		return;
	}
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (r < 3) {
		sx_fail(x, n, "the input must have rank 3 or more (N, C, spatial axes), not %d", r);
		return;
	}
	struct window w;
	if (!read_window(x, n, r - 2, false, &w) || !read_kernel(x, n, &w, true, NULL))
		return;
	struct ir_dim out[IR_MAX_RANK];
	out[0] = d[0];
	out[1] = d[1];
	for (int k = 0; k < w.n; k++) {
		/* (in - 1) * stride + kernel - pads */
		struct ir_dim s = sx_v(w.s[k]), c = sx_v(w.k[k] - w.pb[k] - w.pe[k] - w.s[k]);
		struct ir_dim t = sx_mul(x, &s, &d[2 + k]);
		out[2 + k] = sx_add(x, &t, &c);
	}
	out_dims(x, n, 0, elem, r, out, "a spatial size of its input is not known");
}

static void max_roi_pool(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	if (!sx_rank_in(x, n, 0, 3, IR_MAX_RANK, "the input") || !sx_rank_in(x, n, 1, 2, 2, "rois"))
		return;
	int r = sx_rank(x, n, 0);
	if (r < 0) {
		/* the rank follows from pooled_shape */
		int64_t tmp[IR_MAX_RANK];
		int c = sx_attr_ints(x, n, "pooled_shape", tmp, IR_MAX_RANK);
		if (c < 1 || c > IR_MAX_RANK - 2) {
			sx_out_from(x, n, 0, elem, 0);
			return;
		}
		r = c + 2;
	}
	int64_t ps[IR_MAX_RANK];
	bool present;
	if (!ints_attr(x, n, "pooled_shape", r - 2, ps, 0, 1, ATTR_LIM, &present))
		return;
	if (!present) {
		sx_fail(x, n, "it has no pooled_shape");
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	out[0] = sx_in_dim(x, n, 1, 0);
	out[1] = sx_in_dim(x, n, 0, 1);
	for (int k = 2; k < r; k++)
		out[k] = sx_v(ps[k - 2]);
	out_dims(x, n, 0, elem, r, out, "the number of rois or of channels is not known");
}

static void roi_align(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	if (!sx_rank_in(x, n, 0, 4, 4, "the input") || !sx_rank_in(x, n, 1, 2, 2, "rois") ||
	    !sx_rank_in(x, n, 2, 1, 1, "batch_indices"))
		return;
	int64_t oh = sx_attr_int(x, n, "output_height", 1), ow = sx_attr_int(x, n, "output_width", 1);
	if (oh < 1 || ow < 1 || oh > ATTR_LIM || ow > ATTR_LIM) {
		sx_fail(x, n, "output_height and output_width must be positive (%" PRId64 ", %" PRId64 ")", oh, ow);
		return;
	}
	struct ir_dim out[4], a = sx_in_dim(x, n, 1, 0), b = sx_in_dim(x, n, 2, 0);
	if (!sx_merge(&a, &b, &out[0])) {
		sx_fail(x, n, "rois has %" PRId64 " rows but batch_indices %" PRId64, a.value, b.value);
		return;
	}
	out[1] = sx_in_dim(x, n, 0, 1);
	out[2] = sx_v(oh);
	out[3] = sx_v(ow);
	out_dims(x, n, 0, elem, 4, out, "the number of rois or of channels is not known");
}

/* ------------------------------------------------------------------------ */
/* Matrix products                                                           */
/* ------------------------------------------------------------------------ */

/* numpy matmul of inputs ai and bi into output 0. */
static void matmul_of(struct ir_infer *x, struct ir_node *n, int ai, int bi, int elem)
{
	const struct ir_dim *a = sx_dims(x, n, ai), *b = sx_dims(x, n, bi);
	int ra = sx_rank(x, n, ai), rb = sx_rank(x, n, bi);
	if (!a || !b) {
		if ((a && ra == 0) || (b && rb == 0)) {
			sx_fail(x, n, "an operand is a scalar");
			return;
		}
		sx_out_from(x, n, 0, elem, a ? bi : ai);
		return;
	}
	if (ra < 1 || rb < 1) {
		sx_fail(x, n, "an operand is a scalar");
		return;
	}
	struct ir_dim am[IR_MAX_RANK], bm[IR_MAX_RANK], out[IR_MAX_RANK];
	int ra2 = ra, rb2 = rb;
	if (ra == 1) {
		am[0] = sx_v(1);
		am[1] = a[0];
		ra2 = 2;
	} else {
		sx_copy_dims(am, a, ra);
	}
	if (rb == 1) {
		bm[0] = b[0];
		bm[1] = sx_v(1);
		rb2 = 2;
	} else {
		sx_copy_dims(bm, b, rb);
	}
	const struct ir_dim *ka = &am[ra2 - 1], *kb = &bm[rb2 - 2];
	if (ka->kind == IR_DIM_VALUE && kb->kind == IR_DIM_VALUE && ka->value != kb->value) {
		sx_fail(x, n, "the inner dimensions differ (%" PRId64 " and %" PRId64 ")", ka->value, kb->value);
		return;
	}
	const char *err;
	int r = sx_broadcast(am, ra2 - 2, bm, rb2 - 2, out, &err);
	if (r < 0) {
		sx_fail(x, n, "the batch dimensions: %s", err);
		return;
	}
	if (ra > 1)
		out[r++] = am[ra2 - 2];
	if (rb > 1)
		out[r++] = bm[rb2 - 1];
	out_dims(x, n, 0, elem, r, out, "a dimension of its inputs is not known");
}

static void matmul(struct ir_infer *x, struct ir_node *n)
{
	matmul_of(x, n, 0, 1, elem_of(x, n, 0, 1));
}

static void matmul_integer(struct ir_infer *x, struct ir_node *n)
{
	matmul_of(x, n, 0, 1, IR_INT32);
}

static void qlinear_matmul(struct ir_infer *x, struct ir_node *n)
{
	/* a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point */
	matmul_of(x, n, 0, 3, sx_elem(x, n, 7));
}

static void gemm(struct ir_infer *x, struct ir_node *n)
{
	int elem = elem_of(x, n, 0, 1);
	if (!sx_rank_in(x, n, 0, 2, 2, "A") || !sx_rank_in(x, n, 1, 2, 2, "B"))
		return;
	bool ta = sx_attr_int(x, n, "transA", 0) != 0, tb = sx_attr_int(x, n, "transB", 0) != 0;
	struct ir_dim m = sx_in_dim(x, n, 0, ta ? 1 : 0), ka = sx_in_dim(x, n, 0, ta ? 0 : 1);
	struct ir_dim kb = sx_in_dim(x, n, 1, tb ? 1 : 0), nn = sx_in_dim(x, n, 1, tb ? 0 : 1), k;
	if (!sx_merge(&ka, &kb, &k)) {
		sx_fail(x, n, "the inner dimensions differ (%" PRId64 " and %" PRId64 ")", ka.value, kb.value);
		return;
	}
	if (!sx_dims(x, n, 0) && !sx_dims(x, n, 1)) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	/* C broadcasts to (M, N): a 2-D C with a dim other than 1 gives it */
	struct ir_dim out[2] = { m, nn };
	if (sx_rank(x, n, 2) == 2) {
		for (int j = 0; j < 2; j++) {
			struct ir_dim c = sx_in_dim(x, n, 2, j);
			if (out[j].kind == IR_DIM_UNKNOWN && c.kind == IR_DIM_VALUE && c.value != 1)
				out[j] = c;
		}
	}
	out_dims(x, n, 0, elem, 2, out, "%s", sx_dims(x, n, 0) ? sx_why(x, n, 1) : sx_why(x, n, 0));
}

/* ogsh's FusedConv (X, W, B?, Z?): a Conv's output; Z is added to it, not broadcast over it. */
static void fused_conv(struct ir_infer *x, struct ir_node *n)
{
	conv(x, n);
}

/* ogsh's FusedGemm (A, B, C?, Z?): a Gemm's output; Z is added to it, not broadcast over it. */
static void fused_gemm(struct ir_infer *x, struct ir_node *n)
{
	gemm(x, n);
}

/* Einsum: labels a-z A-Z, one "..." per term, spaces ignored. */
static void einsum(struct ir_infer *x, struct ir_node *n)
{
	int elem = 0;
	for (int i = 0; i < n->n_inputs && !elem; i++)
		elem = sx_elem(x, n, i);
	const char *eq = sx_attr_str(x, n, "equation", NULL);
	if (!eq) {
		sx_fail(x, n, "it has no equation");
		return;
	}
	char buf[1024];
	size_t len = 0;
	for (const char *p = eq; *p; p++) {
		if (*p == ' ')
			continue;
		if (len + 1 >= sizeof(buf)) {
			sx_fail(x, n, "the equation is too long");
			return;
		}
		buf[len++] = *p;
	}
	buf[len] = 0;
	char *arrow = strstr(buf, "->");
	char *rhs = NULL;
	if (arrow) {
		*arrow = 0;
		rhs = arrow + 2;
	}
	/* per label: its dim and how many times it occurs on the left */
	struct ir_dim lab[128];
	int count[128] = { 0 };
	struct ir_dim ell[IR_MAX_RANK], tmp[IR_MAX_RANK];
	int nell = -1;   /* dims under "...": -1 none seen */
	int term = 0;
	char *p = buf;
	for (;;) {
		char *end = strchr(p, ',');
		if (end)
			*end = 0;
		if (term >= n->n_inputs) {
			sx_fail(x, n, "the equation has more operands than the %d inputs", n->n_inputs);
			return;
		}
		const struct ir_dim *d = sx_dims(x, n, term);
		int r = sx_rank(x, n, term);
		if (!d) {
			sx_out_from(x, n, 0, elem, term);
			return;
		}
		int letters = 0, dots = 0;
		for (char *c = p; *c; c++) {
			if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) {
				letters++;
			} else if (c[0] == '.' && c[1] == '.' && c[2] == '.') {
				dots++;
				c += 2;
			} else {
				sx_fail(x, n, "the equation has '%c', which is not a label", *c);
				return;
			}
		}
		if (dots > 1 || (dots ? r < letters : r != letters)) {
			sx_fail(x, n, "term %d of the equation ('%s') does not fit an input of rank %d", term, p, r);
			return;
		}
		int ne = r - letters, pos = 0;
		for (char *c = p; *c; c++) {
			if (*c == '.') {
				if (nell < 0) {
					sx_copy_dims(ell, d + pos, ne);
					nell = ne;
				} else {
					const char *err;
					int rr = ne == nell ? sx_broadcast(ell, nell, d + pos, ne, tmp, &err) : -1;
					if (ne != nell)
						err = "they are not as many in every operand";
					if (rr < 0) {
						sx_fail(x, n, "the dims under '...': %s", err);
						return;
					}
					sx_copy_dims(ell, tmp, rr);
					nell = rr;
				}
				pos += ne;
				c += 2;
				continue;
			}
			unsigned char l = (unsigned char)*c;
			const struct ir_dim *e = &d[pos++];
			if (!count[l]) {
				lab[l] = *e;
				lab[l].denotation = NULL;
			} else if (lab[l].kind == IR_DIM_VALUE && lab[l].value == 1 && e->kind != IR_DIM_UNKNOWN) {
				lab[l] = *e;   /* a dim of 1 broadcasts */
				lab[l].denotation = NULL;
			} else if (!(e->kind == IR_DIM_VALUE && e->value == 1)) {
				struct ir_dim m;
				if (!sx_merge(&lab[l], e, &m)) {
					sx_fail(x, n, "label '%c' has sizes %" PRId64 " and %" PRId64, l, lab[l].value, e->value);
					return;
				}
				lab[l] = m;
			}
			count[l]++;
		}
		term++;
		if (!end)
			break;
		p = end + 1;
	}
	if (term != n->n_inputs) {
		sx_fail(x, n, "the equation has %d operands for %d inputs", term, n->n_inputs);
		return;
	}
	if (nell < 0)
		nell = 0;
	struct ir_dim out[IR_MAX_RANK];
	int r = 0;
	if (rhs) {
		int seen[128] = { 0 };
		bool dots = false;
		for (char *c = rhs; *c; c++) {
			if (c[0] == '.' && c[1] == '.' && c[2] == '.' && !dots) {
				dots = true;
				for (int k = 0; k < nell && r < IR_MAX_RANK; k++)
					out[r++] = ell[k];
				c += 2;
				continue;
			}
			unsigned char l = (unsigned char)*c;
			if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) || !count[l] || seen[l]) {
				sx_fail(x, n, "the output term '%s' has '%c', which is not a label of an input (once)", rhs, *c);
				return;
			}
			seen[l] = 1;
			if (r >= IR_MAX_RANK) {
				sx_fail(x, n, "the output has too many dims");
				return;
			}
			out[r++] = lab[l];
		}
	} else {
		for (int k = 0; k < nell; k++)
			out[r++] = ell[k];
		for (int l = 'A'; l <= 'z'; l++)
			if (count[l] == 1 && r < IR_MAX_RANK)
				out[r++] = lab[l];
	}
	out_dims(x, n, 0, elem, r, out, "a dimension of its inputs is not known");
}

static void det(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (!sx_rank_in(x, n, 0, 2, IR_MAX_RANK, "the input"))
		return;
	struct ir_dim m;
	if (!sx_merge(&d[r - 1], &d[r - 2], &m)) {
		sx_fail(x, n, "the matrices are not square (%" PRId64 " x %" PRId64 ")", d[r - 2].value, d[r - 1].value);
		return;
	}
	sx_out(x, n, 0, elem, r - 2, d);
}

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

/* Known integer values through a reduction of a vector (shape arithmetic). */
static void reduce_vals(struct ir_infer *x, struct ir_node *n)
{
	int c;
	const struct ir_dim *v = sx_vals(x, n, 0, &c);
	int r = sx_rank(x, n, 0);
	if (!v || r > 1 || c < 1 || (n->op != IR_OP_ReduceSum && n->op != IR_OP_ReduceProd &&
				      n->op != IR_OP_ReduceMax && n->op != IR_OP_ReduceMin))
		return;
	struct ir_dim acc = v[0];
	for (int k = 1; k < c; k++) {
		switch (n->op) {
		case IR_OP_ReduceSum: acc = sx_add(x, &acc, &v[k]); break;
		case IR_OP_ReduceProd: acc = sx_mul(x, &acc, &v[k]); break;
		case IR_OP_ReduceMax:
		case IR_OP_ReduceMin:
			if (acc.kind != IR_DIM_VALUE || v[k].kind != IR_DIM_VALUE)
				return;
			if (n->op == IR_OP_ReduceMax ? v[k].value > acc.value : v[k].value < acc.value)
				acc = v[k];
			break;
		default:
			return;
		}
	}
	sx_out_vals(x, n, 0, 1, &acc);
}

static void reduce(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	bool keep = sx_attr_int(x, n, "keepdims", 1) != 0;
	bool noop = sx_attr_int(x, n, "noop_with_empty_axes", 0) != 0;
	int64_t axes[IR_MAX_RANK];
	int na;
	int na_len = -1;   /* when the axes are not known: how many there are, if that is */
	bool known = true;
	if (sx_has(n, 1)) {
		na = sx_ints(x, n, 1, axes, IR_MAX_RANK);
		if (na < 0) {
			known = false;
			int ar = sx_rank(x, n, 1);
			struct ir_dim l = sx_in_dim(x, n, 1, 0);
			if (ar == 0)
				na_len = 1;
			else if (ar == 1 && l.kind == IR_DIM_VALUE && l.value <= IR_MAX_RANK)
				na_len = (int)l.value;
		}
	} else {
		na = sx_attr_ints(x, n, "axes", axes, IR_MAX_RANK);
		if (na > IR_MAX_RANK) {
			sx_fail(x, n, "it has %d axes", na);
			return;
		}
		if (na < 0)
			na = 0;
	}
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	struct ir_dim out[IR_MAX_RANK];
	bool empty = known ? na == 0 : na_len == 0;
	if (empty && noop) {
		/* the identity, except for the non-reducing step of ReduceL1, ReduceSumSquare, ReduceLogSum... */
		sx_out_like(x, n, 0, 0);
		int c;
		const struct ir_dim *v = sx_vals(x, n, 0, &c);
		if (v && (n->op == IR_OP_ReduceSum || n->op == IR_OP_ReduceProd || n->op == IR_OP_ReduceMax ||
			  n->op == IR_OP_ReduceMin || n->op == IR_OP_ReduceMean))
			sx_out_vals(x, n, 0, c, v);
		return;
	}
	if (empty && !keep) {
		sx_out(x, n, 0, elem, 0, NULL);
		reduce_vals(x, n);
		return;
	}
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (empty) {
		for (int k = 0; k < r; k++)
			out[k] = sx_v(1);
		sx_out(x, n, 0, elem, r, out);
		reduce_vals(x, n);
		return;
	}
	if (!known) {
		if (keep) {
			/* each dim is kept or becomes 1: a 1 stays 1 */
			for (int k = 0; k < r; k++)
				out[k] = d[k].kind == IR_DIM_VALUE && d[k].value == 1 ? d[k] : sx_unknown();
			out_dims(x, n, 0, elem, r, out, "the axes input is not known");
		} else if (na_len > 0 && na_len <= r) {
			for (int k = 0; k < r - na_len; k++)
				out[k] = sx_unknown();
			out_dims(x, n, 0, elem, r - na_len, out, "the axes input is not known");
		} else {
			sx_out_unknown(x, n, 0, elem, "the axes input is not known");
		}
		return;
	}
	bool red[IR_MAX_RANK] = { false };
	for (int k = 0; k < na; k++) {
		int a = sx_axis(axes[k], r);
		if (a < 0) {
			sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axes[k], r);
			return;
		}
		red[a] = true;
	}
	int ro = 0;
	for (int k = 0; k < r; k++) {
		if (!red[k])
			out[ro++] = d[k];
		else if (keep)
			out[ro++] = sx_v(1);
	}
	sx_out(x, n, 0, elem, ro, out);
	if (r == 1 && red[0])
		reduce_vals(x, n);
}

static void arg_reduce(struct ir_infer *x, struct ir_node *n)
{
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	bool keep = sx_attr_int(x, n, "keepdims", 1) != 0;
	if (!d) {
		sx_out_from(x, n, 0, IR_INT64, 0);
		return;
	}
	int64_t axis = sx_attr_int(x, n, "axis", 0);
	int a = sx_axis(axis, r);
	if (a < 0) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d", axis, r);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	int ro = 0;
	for (int k = 0; k < r; k++) {
		if (k != a)
			out[ro++] = d[k];
		else if (keep)
			out[ro++] = sx_v(1);
	}
	sx_out(x, n, 0, IR_INT64, ro, out);
}

/* ------------------------------------------------------------------------ */
/* Losses and detection                                                      */
/* ------------------------------------------------------------------------ */

/*
 * The per-element loss shape (N, d1, ..., dk) from scores (N, C, d1...) at
 * input 0 and labels (N, d1...) at input 1. rank -1 when not known; false
 * after sx_fail.
 */
static bool loss_shape(struct ir_infer *x, struct ir_node *n, struct ir_dim *out, int *rank)
{
	const struct ir_dim *s = sx_dims(x, n, 0), *t = sx_dims(x, n, 1);
	int rs = sx_rank(x, n, 0), rt = sx_rank(x, n, 1);
	*rank = -1;
	if (s && rs < 2) {
		sx_fail(x, n, "the input must have rank 2 or more (N, C, ...), not %d", rs);
		return false;
	}
	if (s && t && rt != rs - 1) {
		sx_fail(x, n, "the target has rank %d for an input of rank %d", rt, rs);
		return false;
	}
	if (!s && !t)
		return true;
	int r = s ? rs - 1 : rt;
	for (int k = 0; k < r; k++) {
		struct ir_dim a = s ? s[k ? k + 1 : 0] : sx_unknown(), b = t ? t[k] : sx_unknown();
		if (!sx_merge(&a, &b, &out[k])) {
			sx_fail(x, n, "the input and the target differ on dim %d (%" PRId64 " and %" PRId64 ")", k, a.value,
				b.value);
			return false;
		}
	}
	*rank = r;
	return true;
}

static bool reduction_kind(struct ir_infer *x, struct ir_node *n, bool *none)
{
	const char *red = sx_attr_str(x, n, "reduction", "mean");
	*none = strcmp(red, "none") == 0;
	if (!*none && strcmp(red, "mean") && strcmp(red, "sum")) {
		sx_fail(x, n, "reduction '%s' is not none, sum or mean", red);
		return false;
	}
	return true;
}

static void nll_loss(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	bool none;
	struct ir_dim out[IR_MAX_RANK];
	int r;
	if (!reduction_kind(x, n, &none) || !loss_shape(x, n, out, &r) || !sx_rank_in(x, n, 2, 1, 1, "weight"))
		return;
	if (!none)
		sx_out(x, n, 0, elem, 0, NULL);
	else if (r < 0)
		sx_out_from(x, n, 0, elem, 0);
	else
		out_dims(x, n, 0, elem, r, out, "a dimension of the input is not known");
}

static void sce_loss(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	bool none;
	struct ir_dim out[IR_MAX_RANK];
	int r;
	if (!reduction_kind(x, n, &none) || !loss_shape(x, n, out, &r))
		return;
	if (!none)
		sx_out(x, n, 0, elem, 0, NULL);
	else if (r < 0)
		sx_out_from(x, n, 0, elem, 0);
	else
		out_dims(x, n, 0, elem, r, out, "a dimension of the scores is not known");
	if (n->n_outputs > 1 && n->outputs[1])
		sx_out_like(x, n, 1, 0);
}

static void nms(struct ir_infer *x, struct ir_node *n)
{
	struct ir_dim out[2] = { sx_unknown(), sx_v(3) };
	out_dims(x, n, 0, IR_INT64, 2, out, "the number of selected boxes depends on the data");
}

/* ------------------------------------------------------------------------ */
/* Recurrent layers                                                          */
/* ------------------------------------------------------------------------ */

/* RNN, GRU, LSTM: X, W, R, B, sequence_lens, initial_h (, initial_c, P) */
static void rnn(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	const char *dir = sx_attr_str(x, n, "direction", "forward");
	int64_t nd;
	if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) {
		nd = 1;
	} else if (strcmp(dir, "bidirectional") == 0) {
		nd = 2;
	} else {
		sx_fail(x, n, "direction '%s' is not forward, reverse or bidirectional", dir);
		return;
	}
	int64_t layout = sx_opset(x, n) >= 14 ? sx_attr_int(x, n, "layout", 0) : 0;
	if (layout != 0 && layout != 1) {
		sx_fail(x, n, "layout %" PRId64 " is not 0 or 1", layout);
		return;
	}
	if (!sx_rank_in(x, n, 0, 3, 3, "X") || !sx_rank_in(x, n, 1, 3, 3, "W") || !sx_rank_in(x, n, 2, 3, 3, "R") ||
	    !sx_rank_in(x, n, 5, 3, 3, "initial_h"))
		return;
	struct ir_dim seq = sx_in_dim(x, n, 0, layout ? 1 : 0), batch = sx_in_dim(x, n, 0, layout ? 0 : 1);
	struct ir_dim hidden, dirs = sx_v(nd);
	const struct ir_attr *hs = sx_attr(x, n, "hidden_size");
	if (hs && hs->type == IR_ATTR_INT) {
		if (hs->i < 1 || hs->i > ATTR_LIM) {
			sx_fail(x, n, "hidden_size %" PRId64 " is not positive", hs->i);
			return;
		}
		hidden = sx_v(hs->i);
	} else {
		/* R is (num_directions, gates * hidden_size, hidden_size) */
		hidden = sx_in_dim(x, n, 2, 2);
	}
	struct ir_dim hb = sx_in_dim(x, n, 5, layout ? 0 : 1), hh = sx_in_dim(x, n, 5, 2), wd = sx_in_dim(x, n, 1, 0);
	if (!sx_unify(&batch, &hb)) {
		sx_fail(x, n, "initial_h has batch %" PRId64 " but X %" PRId64, hb.value, batch.value);
		return;
	}
	if (!sx_unify(&hidden, &hh) || !sx_unify(&dirs, &wd)) {
		sx_fail(x, n, "the hidden size or the number of directions of its inputs disagree");
		return;
	}
	struct ir_dim y[4], h[3];
	if (layout == 0) {
		y[0] = seq, y[1] = dirs, y[2] = batch, y[3] = hidden;
		h[0] = dirs, h[1] = batch, h[2] = hidden;
	} else {
		y[0] = batch, y[1] = seq, y[2] = dirs, y[3] = hidden;
		h[0] = batch, h[1] = dirs, h[2] = hidden;
	}
	const char *why = sx_dims(x, n, 0) ? "a dimension of X or the hidden size is not known" : sx_why(x, n, 0);
	out_dims(x, n, 0, elem, 4, y, "%s", why);
	out_dims(x, n, 1, elem, 3, h, "%s", why);
	if (n->op == IR_OP_LSTM)
		out_dims(x, n, 2, elem, 3, h, "%s", why);
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */
/* ------------------------------------------------------------------------ */

/* a / b exactly (b a positive number), else unknown */
static struct ir_dim div_by(struct ir_infer *x, const struct ir_dim *a, int64_t b)
{
	if (b < 1)
		return sx_unknown();
	struct ir_dim bd = sx_v(b);
	return sx_div(x, a, &bd);
}

/* The output's dims in the order of l->out. */
static void attn_out_dims(const struct ir_attn_layout *l, const struct ir_dim *b, const struct ir_dim *h,
			  const struct ir_dim *s, const struct ir_dim *d, struct ir_dim y[4])
{
	for (int i = 0; i < 4; i++)
		y[i] = l->out[i] == 'B' ? *b : l->out[i] == 'H' ? *h : l->out[i] == 'S' ? *s : *d;
}

/*
 * FusedAttention with Q, K and V packed in input 0 (layout with a 3): its
 * first rank-1 axes are letters of their own, the rest share the last axis
 * (3 and the heads divide it out; q_num_heads gives merged heads).
 */
static void packed_attention(struct ir_infer *x, struct ir_node *n, const struct ir_attn_layout *l, int64_t qh)
{
	int eq = sx_elem(x, n, 0), r = sx_rank(x, n, 0);
	const int nl = (int)strlen(l->in);
	if (sx_has(n, 1) || sx_has(n, 2)) {
		sx_fail(x, n, "layout %s packs Q, K and V in input 0: inputs 1 and 2 must be omitted", l->in);
		return;
	}
	if (r < 0) {
		sx_out_from(x, n, 0, eq, 0);
		return;
	}
	if (r < 2 || r > nl) {
		sx_fail(x, n, "the packed input has rank %d: layout %s wants %d axes, or fewer with the trailing ones "
			"merged", r, l->in, nl);
		return;
	}
	struct ir_dim full[5];
	for (int i = 0; i < r - 1; i++)
		full[i] = sx_in_dim(x, n, 0, i);
	struct ir_dim rest = sx_in_dim(x, n, 0, r - 1);
	for (int i = r - 1; i < nl - 1; i++) {
		if (l->in[i] == 'B' || l->in[i] == 'S') {
			sx_fail(x, n, "layout %s merges %c into the last axis: only 3, H and D may share it", l->in, l->in[i]);
			return;
		}
		if (l->in[i] == 'H' && qh < 1) {
			sx_fail(x, n, "the packed input merges the heads into its last axis: q_num_heads must be positive");
			return;
		}
		full[i] = sx_v(l->in[i] == '3' ? 3 : qh);
		rest = div_by(x, &rest, l->in[i] == '3' ? 3 : qh);
	}
	full[nl - 1] = rest;
	struct ir_dim b = full[strchr(l->in, 'B') - l->in], s = full[strchr(l->in, 'S') - l->in];
	struct ir_dim h = full[strchr(l->in, 'H') - l->in], three = full[strchr(l->in, '3') - l->in];
	struct ir_dim want3 = sx_v(3), wanth = sx_v(qh);
	if (!sx_unify(&three, &want3)) {
		sx_fail(x, n, "the Q/K/V axis of the packed input does not have 3 entries");
		return;
	}
	if (qh > 0 && !sx_unify(&h, &wanth)) {
		sx_fail(x, n, "the packed input's heads differ from q_num_heads");
		return;
	}
	struct ir_dim y[4];
	attn_out_dims(l, &b, &h, &s, &rest, y);
	out_dims(x, n, 0, eq, 4, y, "%s", "a dimension of the packed input is not known");
}

/* Attention (opset 23): Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen */
static void attention(struct ir_infer *x, struct ir_node *n)
{
	int eq = sx_elem(x, n, 0);
	int rq = sx_rank(x, n, 0), rk = sx_rank(x, n, 1), rv = sx_rank(x, n, 2);
	/* ogsh's FusedAttention may have its 4-D tensors as [batch, sequence, heads, size],
	 * Q, K and V packed in input 0, and the output in another order */
	const bool fused = n->op == IR_OP_ogsh_FusedAttention;
	const char *layout = fused ? sx_attr_str(x, n, "layout", "BHSD") : "BHSD";
	const char *out_layout = fused ? sx_attr_str(x, n, "out_layout", NULL) : NULL;
	struct ir_attn_layout al;
	char lwhy[200];
	if (ir_attn_layout_parse(layout, out_layout, &al, lwhy, sizeof(lwhy))) {
		sx_fail(x, n, "%s", lwhy);
		return;
	}
	if (al.packed) {
		const struct ir_attr *pa = sx_attr(x, n, "q_num_heads");
		packed_attention(x, n, &al, pa && pa->type == IR_ATTR_INT ? pa->i : 0);
		return;
	}
	if (!sx_rank_in(x, n, 0, 3, 4, "Q") || !sx_rank_in(x, n, 1, 3, 4, "K") || !sx_rank_in(x, n, 2, 3, 4, "V") ||
	    !sx_rank_in(x, n, 4, 4, 4, "past_key") || !sx_rank_in(x, n, 5, 4, 4, "past_value"))
		return;
	const struct ir_attr *qa = sx_attr(x, n, "q_num_heads"), *ka = sx_attr(x, n, "kv_num_heads");
	int64_t qh = qa && qa->type == IR_ATTR_INT ? qa->i : 0, kh = ka && ka->type == IR_ATTR_INT ? ka->i : 0;
	if ((rq == 3 || rk == 3 || rv == 3) && (qh < 1 || kh < 1)) {
		sx_fail(x, n, "3-D inputs need positive q_num_heads and kv_num_heads attributes");
		return;
	}
	if (qh < 0 || kh < 0 || qh > ATTR_LIM || kh > ATTR_LIM) {
		sx_fail(x, n, "q_num_heads or kv_num_heads is out of range");
		return;
	}
	const int hx = strcmp(al.in, "BSHD") ? 1 : 2, sq = 3 - hx;
	struct ir_dim batch = sx_in_dim(x, n, 0, 0), kb = sx_in_dim(x, n, 1, 0), vb = sx_in_dim(x, n, 2, 0);
	if (!sx_unify(&batch, &kb) || !sx_unify(&batch, &vb)) {
		sx_fail(x, n, "Q, K and V have different batch sizes");
		return;
	}
	/* heads: dim 1 of a 4-D input, the attribute for a 3-D one */
	struct ir_dim q_heads = rq == 4 ? sx_in_dim(x, n, 0, hx) : rq == 3 ? sx_v(qh) : sx_unknown();
	struct ir_dim q_seq = sx_in_dim(x, n, 0, rq == 4 ? sq : 1);
	struct ir_dim kv_heads = rk == 4 ? sx_in_dim(x, n, 1, hx) : rk == 3 ? sx_v(kh) : sx_unknown();
	struct ir_dim vh = rv == 4 ? sx_in_dim(x, n, 2, hx) : rv == 3 ? sx_v(kh) : sx_unknown();
	if (!sx_unify(&kv_heads, &vh)) {
		sx_fail(x, n, "K and V have different numbers of heads");
		return;
	}
	struct ir_dim kv_seq = sx_in_dim(x, n, 1, rk == 4 ? sq : 1), vseq = sx_in_dim(x, n, 2, rv == 4 ? sq : 1);
	if (!sx_unify(&kv_seq, &vseq)) {
		sx_fail(x, n, "K and V have different sequence lengths");
		return;
	}
	struct ir_dim vlast = sx_in_dim(x, n, 2, -1), klast = sx_in_dim(x, n, 1, -1);
	struct ir_dim v_head = rv == 4 ? vlast : rv == 3 ? div_by(x, &vlast, kh) : sx_unknown();
	struct ir_dim k_head = rk == 4 ? klast : rk == 3 ? div_by(x, &klast, kh) : sx_unknown();
	/* past_key (B, kv_heads, past_seq, head_size): the present ones append K and V */
	struct ir_dim total = kv_seq;
	if (sx_has(n, 4)) {
		struct ir_dim ps = sx_in_dim(x, n, 4, 2), pk = sx_in_dim(x, n, 4, 3), pv = sx_in_dim(x, n, 5, 3);
		total = sx_add(x, &ps, &kv_seq);
		sx_unify(&k_head, &pk);
		sx_unify(&v_head, &pv);
	}
	const char *why = "a dimension of Q, K, V or the past is not known";
	if (rq < 0) {
		sx_out_from(x, n, 0, eq, 0);
	} else if (rq == 4 || al.has_out) {
		struct ir_dim y[4];
		attn_out_dims(&al, &batch, &q_heads, &q_seq, &v_head, y);
		out_dims(x, n, 0, eq, 4, y, "%s", why);
	} else {
		struct ir_dim y[3] = { batch, q_seq, sx_mul(x, &q_heads, &v_head) };
		out_dims(x, n, 0, eq, 3, y, "%s", why);
	}
	struct ir_dim pk[4] = { batch, kv_heads, total, k_head }, pv[4] = { batch, kv_heads, total, v_head };
	out_dims(x, n, 1, sx_has(n, 4) ? sx_elem(x, n, 4) : sx_elem(x, n, 1), 4, pk, "%s", why);
	out_dims(x, n, 2, sx_has(n, 5) ? sx_elem(x, n, 5) : sx_elem(x, n, 2), 4, pv, "%s", why);
	struct ir_dim qk[4] = { batch, q_heads, q_seq, total };
	out_dims(x, n, 3, eq, 4, qk, "%s", why);
}

static void rotary_embedding(struct ir_infer *x, struct ir_node *n)
{
	if (!sx_rank_in(x, n, 0, 3, 4, "the input"))
		return;
	sx_out_like(x, n, 0, 0);
}

/* CausalConvWithState: input (B, C, L), weight (C, 1, k), bias (C), past_state (B, C, k-1) */
static void causal_conv(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	if (!sx_rank_in(x, n, 0, 3, 3, "the input") || !sx_rank_in(x, n, 1, 3, 3, "the weight") ||
	    !sx_rank_in(x, n, 2, 1, 1, "the bias") || !sx_rank_in(x, n, 3, 3, 3, "past_state"))
		return;
	const char *act = sx_attr_str(x, n, "activation", "none");
	if (strcmp(act, "none") && strcmp(act, "silu") && strcmp(act, "swish")) {
		sx_fail(x, n, "activation '%s' is not none, silu or swish", act);
		return;
	}
	struct ir_dim b = sx_in_dim(x, n, 0, 0), c = sx_in_dim(x, n, 0, 1);
	struct ir_dim more[] = { sx_in_dim(x, n, 1, 0), sx_in_dim(x, n, 2, 0), sx_in_dim(x, n, 3, 1) };
	struct ir_dim pb = sx_in_dim(x, n, 3, 0);
	bool ok = sx_unify(&b, &pb);
	for (int k = 0; k < 3 && ok; k++)
		ok = sx_unify(&c, &more[k]);
	struct ir_dim kw = sx_in_dim(x, n, 1, 2), one = sx_v(1), km1 = sx_sub(x, &kw, &one), ps = sx_in_dim(x, n, 3, 2);
	if (kw.kind == IR_DIM_VALUE && kw.value < 1) {
		sx_fail(x, n, "the kernel size %" PRId64 " is not positive", kw.value);
		return;
	}
	if (!ok || !sx_unify(&km1, &ps)) {
		sx_fail(x, n, "the batch, channels or kernel size of its inputs disagree");
		return;
	}
	sx_out_like(x, n, 0, 0);
	struct ir_dim st[3] = { b, c, km1 };
	out_dims(x, n, 1, elem, 3, st, "a dimension of the input or the weight is not known");
}

/* LinearAttention: query, key, value (B, T, H*D), past_state (B, H_kv, d_k, d_v), decay, beta */
static void linear_attention(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int64_t qh = sx_attr_int(x, n, "q_num_heads", 0), kh = sx_attr_int(x, n, "kv_num_heads", 0);
	if (qh < 1 || kh < 1 || qh > ATTR_LIM || kh > ATTR_LIM || qh % kh) {
		sx_fail(x, n, "q_num_heads (%" PRId64 ") must be a positive multiple of kv_num_heads (%" PRId64 ")", qh, kh);
		return;
	}
	const char *rule = sx_attr_str(x, n, "update_rule", "gated_delta");
	bool gated = strcmp(rule, "gated") == 0 || strcmp(rule, "gated_delta") == 0;
	bool delta = strcmp(rule, "delta") == 0 || strcmp(rule, "gated_delta") == 0;
	if (!gated && !delta && strcmp(rule, "linear")) {
		sx_fail(x, n, "update_rule '%s' is not linear, gated, delta or gated_delta", rule);
		return;
	}
	if (gated != sx_has(n, 4) || delta != sx_has(n, 5)) {
		sx_fail(x, n, "update_rule '%s' %s decay and %s beta", rule, gated ? "needs" : "forbids",
			delta ? "needs" : "forbids");
		return;
	}
	if (!sx_rank_in(x, n, 0, 3, 3, "query") || !sx_rank_in(x, n, 1, 3, 3, "key") || !sx_rank_in(x, n, 2, 3, 3, "value") ||
	    !sx_rank_in(x, n, 3, 4, 4, "past_state") || !sx_rank_in(x, n, 4, 3, 3, "decay") || !sx_rank_in(x, n, 5, 3, 3, "beta"))
		return;
	struct ir_dim b = sx_unknown(), tt = sx_unknown();
	static const int bt_inputs[] = { 0, 1, 2, 4, 5 };
	bool ok = true;
	for (size_t k = 0; k < sizeof(bt_inputs) / sizeof(bt_inputs[0]) && ok; k++) {
		struct ir_dim ib = sx_in_dim(x, n, bt_inputs[k], 0), it = sx_in_dim(x, n, bt_inputs[k], 1);
		ok = sx_unify(&b, &ib) && sx_unify(&tt, &it);
	}
	struct ir_dim pb = sx_in_dim(x, n, 3, 0), ph = sx_in_dim(x, n, 3, 1), hkv = sx_v(kh);
	struct ir_dim dk = sx_in_dim(x, n, 3, 2), dv = sx_in_dim(x, n, 3, 3);
	struct ir_dim ql = sx_in_dim(x, n, 0, 2), kl = sx_in_dim(x, n, 1, 2), vl = sx_in_dim(x, n, 2, 2);
	struct ir_dim qdk = div_by(x, &ql, qh), kdk = div_by(x, &kl, kh), vdv = div_by(x, &vl, kh);
	ok = ok && sx_unify(&b, &pb) && sx_unify(&hkv, &ph) && sx_unify(&dk, &qdk) && sx_unify(&dk, &kdk) && sx_unify(&dv, &vdv);
	if (!ok || (ql.kind == IR_DIM_VALUE && ql.value % qh) || (kl.kind == IR_DIM_VALUE && kl.value % kh) ||
	    (vl.kind == IR_DIM_VALUE && vl.value % kh)) {
		sx_fail(x, n, "the dimensions of query, key, value and past_state do not fit together");
		return;
	}
	struct ir_dim qhd = sx_v(qh);
	struct ir_dim y[3] = { b, tt, sx_mul(x, &qhd, &dv) }, st[4] = { b, hkv, dk, dv };
	const char *why = "a dimension of query, key, value or past_state is not known";
	out_dims(x, n, 0, elem, 3, y, "%s", why);
	out_dims(x, n, 1, sx_has(n, 3) && sx_elem(x, n, 3) ? sx_elem(x, n, 3) : elem, 4, st, "%s", why);
}

/* ai.onnx.preview FlexAttention: Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev) */
static void flex_attention(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	if (!sx_rank_in(x, n, 0, 4, 4, "Q") || !sx_rank_in(x, n, 1, 4, 4, "K") || !sx_rank_in(x, n, 2, 4, 4, "V"))
		return;
	int ek = sx_elem(x, n, 1), ev = sx_elem(x, n, 2);
	if ((elem && ek && elem != ek) || (elem && ev && elem != ev)) {
		sx_fail(x, n, "Q, K and V have different element types");
		return;
	}
	struct ir_dim b = sx_in_dim(x, n, 0, 0), kb = sx_in_dim(x, n, 1, 0), vb = sx_in_dim(x, n, 2, 0);
	struct ir_dim kh = sx_in_dim(x, n, 1, 1), vh = sx_in_dim(x, n, 2, 1), ks = sx_in_dim(x, n, 1, 2), vs = sx_in_dim(x, n, 2, 2);
	struct ir_dim qe = sx_in_dim(x, n, 0, 3), ke = sx_in_dim(x, n, 1, 3), hq = sx_in_dim(x, n, 0, 1), s = ks;
	if (!sx_unify(&b, &kb) || !sx_unify(&b, &vb) || !sx_unify(&kh, &vh) || !sx_unify(&s, &vs) || !sx_unify(&qe, &ke)) {
		sx_fail(x, n, "the dimensions of Q, K and V do not fit together");
		return;
	}
	if (hq.kind == IR_DIM_VALUE && kh.kind == IR_DIM_VALUE && (kh.value < 1 || hq.value % kh.value)) {
		sx_fail(x, n, "the query heads (%" PRId64 ") are not a multiple of the key heads (%" PRId64 ")", hq.value,
			kh.value);
		return;
	}
	struct ir_dim y[4] = { b, hq, sx_in_dim(x, n, 0, 2), sx_in_dim(x, n, 2, 3) };
	out_dims(x, n, 0, elem, 4, y, "a dimension of Q or V is not known");
	/* the modifiers see the scores (B, Hq, L, S) in the softmax precision */
	int sp = (int)sx_attr_int(x, n, "softmax_precision", elem == IR_DOUBLE ? IR_DOUBLE : IR_FLOAT);
	struct ir_dim sc[4] = { b, hq, y[2], s };
	const struct ir_type *ty = sx_tensor_type(x, ir_dtype_valid(sp) ? sp : 0, 4, sc);
	static const char *const mods[] = { "score_mod", "prob_mod" };
	for (int k = 0; k < 2 && ty; k++) {
		const struct ir_attr *a = sx_attr(x, n, mods[k]);
		if (a && a->type == IR_ATTR_GRAPH && a->g)
			sx_infer_subgraph(x, a->g, 1, &ty);
	}
}

/* ------------------------------------------------------------------------ */
/* Signal processing                                                         */
/* ------------------------------------------------------------------------ */

/* DFT: input (batch, signal..., 1 or 2), dft_length (input 1), axis (attribute before 20, input 2 after) */
static void dft(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	bool onesided = sx_attr_int(x, n, "onesided", 0) != 0, inverse = sx_attr_int(x, n, "inverse", 0) != 0;
	const struct ir_dim *d = sx_dims(x, n, 0);
	int r = sx_rank(x, n, 0);
	if (!d) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (r < 2) {
		sx_fail(x, n, "the input must have rank 2 or more (the last dim holds real and imaginary parts), not %d", r);
		return;
	}
	const struct ir_dim *last = &d[r - 1];
	if (onesided && last->kind == IR_DIM_VALUE && last->value != (inverse ? 2 : 1)) {
		sx_fail(x, n, "a one-sided %s needs a %s input (last dim %d)", inverse ? "inverse DFT" : "DFT",
			inverse ? "complex" : "real", inverse ? 2 : 1);
		return;
	}
	struct ir_dim out[IR_MAX_RANK];
	sx_copy_dims(out, d, r);
	out[r - 1] = sx_v(onesided && inverse ? 1 : 2);
	int64_t axis;
	if (sx_opset(x, n) >= 20) {
		axis = -2;
		if (sx_has(n, 2)) {
			int64_t av[2];
			if (sx_ints(x, n, 2, av, 2) != 1) {
				/* the axis is not known: every signal dim may change unless nothing changes sizes */
				if (onesided || sx_has(n, 1))
					for (int k = 0; k < r - 1; k++)
						out[k] = sx_unknown();
				out_dims(x, n, 0, elem, r, out, "the axis input is not known");
				return;
			}
			axis = av[0];
		}
	} else {
		axis = sx_attr_int(x, n, "axis", 1);
	}
	if (axis < -r || axis >= r - 1 || axis == -1) {
		sx_fail(x, n, "axis %" PRId64 " is out of range for rank %d (the last dim is not a signal axis)", axis, r);
		return;
	}
	int a = (int)(axis < 0 ? axis + r : axis);
	struct ir_dim *ad = &out[a];
	if (sx_has(n, 1)) {
		int64_t len;
		if (sx_ints(x, n, 1, &len, 1) != 1) {
			*ad = sx_unknown();
			out_dims(x, n, 0, elem, r, out, "the dft_length input is not known");
			return;
		}
		if (len < 1) {
			sx_fail(x, n, "dft_length %" PRId64 " is not positive", len);
			return;
		}
		*ad = sx_v(onesided && !inverse ? (len >> 1) + 1 : len);
	} else if (onesided) {
		struct ir_dim one = sx_v(1), two = sx_v(2);
		if (inverse) {
			/* 2 * (n - 1), the even length */
			struct ir_dim m = sx_sub(x, ad, &one);
			*ad = sx_mul(x, &m, &two);
		} else {
			struct ir_dim h = sx_floordiv(x, ad, 2);
			*ad = sx_add(x, &h, &one);
		}
	}
	out_dims(x, n, 0, elem, r, out, "the signal length is not known or not an exact expression");
}

/* STFT: signal (batch, length, 1 or 2), frame_step, window, frame_length -> (batch, frames, bins, 2) */
static void stft(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	bool onesided = sx_attr_int(x, n, "onesided", 1) != 0;
	if (!sx_rank_in(x, n, 0, 3, 3, "the signal") || !sx_rank_in(x, n, 1, 0, 1, "frame_step") ||
	    !sx_rank_in(x, n, 2, 1, 1, "the window") || !sx_rank_in(x, n, 3, 0, 1, "frame_length"))
		return;
	int64_t step = 0, flen = 0;
	bool have_step = sx_ints(x, n, 1, &step, 1) == 1;
	struct ir_dim len = sx_unknown();
	if (sx_has(n, 3)) {
		if (sx_ints(x, n, 3, &flen, 1) == 1)
			len = sx_v(flen);
	}
	struct ir_dim wl = sx_in_dim(x, n, 2, 0);
	if (!sx_unify(&len, &wl)) {
		sx_fail(x, n, "frame_length %" PRId64 " differs from the window's length %" PRId64, flen, wl.value);
		return;
	}
	if ((have_step && step < 1) || (len.kind == IR_DIM_VALUE && len.value < 1)) {
		sx_fail(x, n, "frame_step and frame_length must be positive");
		return;
	}
	struct ir_dim sig = sx_in_dim(x, n, 0, 1), out[4] = { sx_in_dim(x, n, 0, 0), sx_unknown(), sx_unknown(), sx_v(2) };
	if (len.kind == IR_DIM_VALUE)
		out[2] = sx_v(onesided ? (len.value >> 1) + 1 : len.value);
	if (have_step && len.kind == IR_DIM_VALUE && sig.kind != IR_DIM_UNKNOWN) {
		if (sig.kind == IR_DIM_VALUE && sig.value < len.value) {
			sx_fail(x, n, "the signal (%" PRId64 ") is shorter than a frame (%" PRId64 ")", sig.value, len.value);
			return;
		}
		/* floor((length - frame_length) / frame_step) + 1 */
		struct ir_dim fl = sx_v(len.value), one = sx_v(1);
		struct ir_dim m = sx_sub(x, &sig, &fl), q = sx_floordiv(x, &m, step);
		if (q.kind != IR_DIM_UNKNOWN)
			out[1] = sx_add(x, &q, &one);
	}
	out_dims(x, n, 0, elem, 4, out, "%s",
		 !have_step ? "the frame_step input is not known" :
		 len.kind != IR_DIM_VALUE ? "the frame length (frame_length input or window length) is not known" :
		 "the signal length is not known or not an exact expression");
}

/* ------------------------------------------------------------------------ */
/* Sampling grids                                                            */
/* ------------------------------------------------------------------------ */

/* AffineGrid: theta (N, 2, 3) or (N, 3, 4), size (N, C, H, W) or (N, C, D, H, W) */
static void affine_grid(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	if (!sx_rank_in(x, n, 0, 3, 3, "theta") || !sx_rank_in(x, n, 1, 1, 1, "size"))
		return;
	int c;
	const struct ir_dim *v = sx_vals(x, n, 1, &c);
	struct ir_dim sl = sx_in_dim(x, n, 1, 0), tr = sx_in_dim(x, n, 0, 1), nb = sx_in_dim(x, n, 0, 0);
	int count = v ? c : sl.kind == IR_DIM_VALUE ? (int)(sl.value > 8 ? 8 : sl.value) : -1;
	if (count < 0 && tr.kind == IR_DIM_VALUE)
		count = tr.value == 2 ? 4 : tr.value == 3 ? 5 : -1;
	if (count < 0) {
		sx_out_unknown(x, n, 0, elem, "the length of the size input is not known");
		return;
	}
	if (count != 4 && count != 5) {
		sx_fail(x, n, "size has %d values; it must be (N, C, H, W) or (N, C, D, H, W)", count);
		return;
	}
	int nsp = count - 2;
	if (tr.kind == IR_DIM_VALUE && tr.value != nsp) {
		sx_fail(x, n, "theta is for %" PRId64 "-D but size for %d-D", tr.value, nsp);
		return;
	}
	struct ir_dim out[5];
	out[0] = nb;
	if (v && !sx_merge(&nb, &v[0], &out[0])) {
		sx_fail(x, n, "theta has batch %" PRId64 " but size %" PRId64, nb.value, v[0].value);
		return;
	}
	for (int k = 0; k < nsp; k++) {
		out[1 + k] = v ? v[2 + k] : sx_unknown();
		if (out[1 + k].kind == IR_DIM_VALUE && out[1 + k].value < 0) {
			sx_fail(x, n, "size has a negative value");
			return;
		}
	}
	out[1 + nsp] = sx_v(nsp);
	out_dims(x, n, 0, elem, nsp + 2, out, "the values of the size input are not known");
}

/* GridSample: X (N, C, D...), grid (N, D_out..., n) -> (N, C, D_out...) */
static void grid_sample(struct ir_infer *x, struct ir_node *n)
{
	int elem = sx_elem(x, n, 0);
	int rx = sx_rank(x, n, 0), rg = sx_rank(x, n, 1);
	if (rx >= 0 && rg >= 0 && rx != rg) {
		sx_fail(x, n, "the input has rank %d but the grid rank %d", rx, rg);
		return;
	}
	int r = rx >= 0 ? rx : rg;
	if (r < 0) {
		sx_out_from(x, n, 0, elem, 0);
		return;
	}
	if (r < 3) {
		sx_fail(x, n, "the input and the grid must have rank 3 or more, not %d", r);
		return;
	}
	struct ir_dim gl = sx_in_dim(x, n, 1, -1);
	if (gl.kind == IR_DIM_VALUE && gl.value != r - 2) {
		sx_fail(x, n, "the grid's last dim is %" PRId64 ", not %d", gl.value, r - 2);
		return;
	}
	struct ir_dim out[IR_MAX_RANK], a = sx_in_dim(x, n, 0, 0), b = sx_in_dim(x, n, 1, 0);
	if (!sx_merge(&a, &b, &out[0])) {
		sx_fail(x, n, "the input has batch %" PRId64 " but the grid %" PRId64, a.value, b.value);
		return;
	}
	out[1] = sx_in_dim(x, n, 0, 1);
	for (int k = 2; k < r; k++)
		out[k] = sx_in_dim(x, n, 1, k - 1);
	out_dims(x, n, 0, elem, r, out, "a dimension of the input or the grid is not known");
}

const struct sx_entry sx_nn[] = {
	/* convolutions */
	{ IR_OP_Conv, conv }, { IR_OP_ConvInteger, conv_integer }, { IR_OP_QLinearConv, qlinear_conv },
	{ IR_OP_DeformConv, deform_conv }, { IR_OP_ConvTranspose, conv_transpose },
	{ IR_OP_CausalConvWithState, causal_conv },
	/* pooling */
	{ IR_OP_AveragePool, pool }, { IR_OP_MaxPool, pool }, { IR_OP_LpPool, pool },
	{ IR_OP_GlobalAveragePool, global_pool }, { IR_OP_GlobalMaxPool, global_pool },
	{ IR_OP_GlobalLpPool, global_pool }, { IR_OP_MaxUnpool, max_unpool },
	{ IR_OP_MaxRoiPool, max_roi_pool }, { IR_OP_RoiAlign, roi_align },
	/* products */
	{ IR_OP_Gemm, gemm }, { IR_OP_MatMul, matmul }, { IR_OP_MatMulInteger, matmul_integer },
	{ IR_OP_QLinearMatMul, qlinear_matmul }, { IR_OP_Einsum, einsum }, { IR_OP_Det, det },
	/* reductions */
	{ IR_OP_ReduceL1, reduce }, { IR_OP_ReduceL2, reduce }, { IR_OP_ReduceLogSum, reduce },
	{ IR_OP_ReduceLogSumExp, reduce }, { IR_OP_ReduceMax, reduce }, { IR_OP_ReduceMean, reduce },
	{ IR_OP_ReduceMin, reduce }, { IR_OP_ReduceProd, reduce }, { IR_OP_ReduceSum, reduce },
	{ IR_OP_ReduceSumSquare, reduce }, { IR_OP_ArgMax, arg_reduce }, { IR_OP_ArgMin, arg_reduce },
	/* losses, detection */
	{ IR_OP_NegativeLogLikelihoodLoss, nll_loss }, { IR_OP_SoftmaxCrossEntropyLoss, sce_loss },
	{ IR_OP_NonMaxSuppression, nms },
	/* recurrent */
	{ IR_OP_RNN, rnn }, { IR_OP_GRU, rnn }, { IR_OP_LSTM, rnn },
	/* attention */
	{ IR_OP_Attention, attention }, { IR_OP_RotaryEmbedding, rotary_embedding },
	{ IR_OP_LinearAttention, linear_attention }, { IR_OP_preview_FlexAttention, flex_attention },
	/* signal, grids */
	{ IR_OP_DFT, dft }, { IR_OP_STFT, stft }, { IR_OP_AffineGrid, affine_grid }, { IR_OP_GridSample, grid_sample },
	/* ogsh's fused ops */
	{ IR_OP_ogsh_FusedConv, fused_conv }, { IR_OP_ogsh_FusedGemm, fused_gemm },
	{ IR_OP_ogsh_FusedAttention, attention },
	{ -1, NULL },
};
