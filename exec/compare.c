/*
 * compare.c - the one function that compares two tensors' numbers, used by
 * every command that checks results (conformance, backend against backend,
 * stage against stage).
 *
 * The rule is ONNX's (and numpy.allclose's): an element passes when
 * |a - b| <= atol + rtol*|b|, b being the expected value. Around it: the
 * largest absolute and relative errors, the worst element, cosine
 * similarity, SNR, NaN/Inf counts and top-k agreement along the last axis.
 * All sums are in double.
 */
#include "exec/exec_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Elements between two looks at ir_interrupted. */
#define POLL_EVERY ((uint64_t)1 << 20)

void exec_cmp_defaults(int dtype, struct exec_cmp_opts *o)
{
	o->topk = 5;
	switch (dtype) {
	case IR_FLOAT: case IR_COMPLEX64:
		/* ONNX's backend test runner (onnx/backend/test/loader) */
		o->rtol = 1e-3;
		o->atol = 1e-7;
		break;
	case IR_DOUBLE: case IR_COMPLEX128:
		/* numpy.allclose's defaults: far above double rounding after a
		 * different summation order, far below float32's precision (so a
		 * kernel that computes in float32 by mistake fails) */
		o->rtol = 1e-5;
		o->atol = 1e-8;
		break;
	case IR_FLOAT16:
		/* one float16 ulp is 2^-10 (9.8e-4) relative at worst: computing in
		 * float32 and rounding once can differ from the reference by that */
		o->rtol = 1e-3;
		o->atol = 1e-3;
		break;
	case IR_BFLOAT16:
		/* one bfloat16 ulp is 2^-7 (7.8e-3) relative at worst */
		o->rtol = 1e-2;
		o->atol = 1e-2;
		break;
	/* the 8- and 4-bit floats: one unit in the last place, relative (the
	 * mantissa's step at the bottom of a binade) and absolute (the smallest
	 * subnormal), since one rounding may land on either side */
	case IR_F8E4M3FN:
		o->rtol = 0.125;
		o->atol = 0x1p-9;
		break;
	case IR_F8E4M3FNUZ:
		o->rtol = 0.125;
		o->atol = 0x1p-10;
		break;
	case IR_F8E5M2:
		o->rtol = 0.25;
		o->atol = 0x1p-16;
		break;
	case IR_F8E5M2FNUZ:
		o->rtol = 0.25;
		o->atol = 0x1p-17;
		break;
	case IR_F4E2M1:
		o->rtol = 0.5;
		o->atol = 0.5;
		break;
	case IR_F8E8M0:   /* powers of two: one step doubles */
		o->rtol = 1.0;
		o->atol = 0;
		break;
	default:          /* integers, bool, strings: exact */
		o->rtol = 0;
		o->atol = 0;
		break;
	}
}

/* Running figures of one comparison. */
struct acc {
	double atol, rtol;
	uint64_t n_bad;
	double max_abs, max_rel;
	bool have_worst;
	double worst_excess;
	uint64_t worst;
	double worst_a, worst_b;
	double sab, saa, sbb, snoise;   /* over the pairs finite in both */
	uint64_t nan_a, nan_b, inf_a, inf_b, nan_mismatch;
};

static void acc_worst(struct acc *s, double excess, uint64_t idx, double x, double y)
{
	if (!s->have_worst || excess > s->worst_excess) {
		s->have_worst = true;
		s->worst_excess = excess;
		s->worst = idx;
		s->worst_a = x;
		s->worst_b = y;
	}
}

/*
 * Both finite, with |x - y| already known (`diff`: integers give it exactly).
 * Returns whether the pair fails.
 */
static inline bool acc_finite(struct acc *s, double x, double y, double diff, uint64_t idx)
{
	double ay = fabs(y), tol = s->atol + s->rtol * ay;
	double rel = ay > 0 ? diff / ay : diff > 0 ? INFINITY : 0;
	if (diff > s->max_abs)
		s->max_abs = diff;
	if (rel > s->max_rel)
		s->max_rel = rel;
	s->sab += x * y;
	s->saa += x * x;
	s->sbb += y * y;
	s->snoise += (x - y) * (x - y);
	acc_worst(s, diff - tol, idx, x, y);
	return !(diff <= tol);
}

/* Any pair of doubles; returns whether it fails. */
static inline bool acc_one(struct acc *s, double x, double y, uint64_t idx)
{
	if (isfinite(x) && isfinite(y))
		return acc_finite(s, x, y, fabs(x - y), idx);
	bool nx = isnan(x), ny = isnan(y);
	s->nan_a += nx;
	s->nan_b += ny;
	s->inf_a += isinf(x) != 0;
	s->inf_b += isinf(y) != 0;
	if (nx || ny) {
		if (nx && ny) {   /* NaN where NaN is expected: equal */
			acc_worst(s, -INFINITY, idx, x, y);
			return false;
		}
		s->nan_mismatch++;
		acc_worst(s, INFINITY, idx, x, y);
		return true;
	}
	if (x == y) {   /* the same infinity */
		acc_worst(s, -INFINITY, idx, x, y);
		return false;
	}
	/* an infinity against a finite value or the other infinity */
	s->max_abs = INFINITY;
	s->max_rel = INFINITY;
	acc_worst(s, INFINITY, idx, x, y);
	return true;
}

static float ld_f32(const unsigned char *p, uint64_t i)
{
	float f;
	memcpy(&f, p + 4 * i, 4);   /* raw data is little-endian, as the host */
	return f;
}

/* Part `part` (0 real, 1 imaginary) of complex element i. */
static double ld_complex(int dtype, const unsigned char *p, uint64_t i, int part)
{
	if (dtype == IR_COMPLEX64) {
		float f;
		memcpy(&f, p + 8 * i + 4 * (uint64_t)part, 4);
		return f;
	}
	double v;
	memcpy(&v, p + 16 * i + 8 * (uint64_t)part, 8);
	return v;
}

static int interrupted(struct ir_diag *d, uint64_t i, uint64_t n)
{
	return ir_diag_err(d, IR_EINTR, "comparison interrupted after %llu of %llu elements",
			   (unsigned long long)i, (unsigned long long)n);
}

/* Integer element i exactly: signed values in *sv, uint64 in *uv. */
static void ld_int(int dtype, const void *p, uint64_t i, int64_t *sv, uint64_t *uv)
{
	if (dtype == IR_UINT64) {
		memcpy(uv, (const unsigned char *)p + 8 * i, 8);
		*sv = 0;
	} else {
		if (!ir_elem_to_i64(dtype, p, i, sv))
			*sv = 0;
		*uv = 0;
	}
}

static int compare_numbers(const struct ir_tensor *a, const struct ir_tensor *b, struct acc *s,
			   struct ir_diag *d)
{
	const unsigned char *pa = ir_tensor_data(a), *pb = ir_tensor_data(b);
	uint64_t n = b->numel;
	int da = a->dtype, db = b->dtype;
	if (!n)
		return 0;
	if (!pa || !pb)
		return ir_diag_err(d, IR_ERR, "a tensor of %llu elements has no data", (unsigned long long)n);
	if (da == IR_FLOAT && db == IR_FLOAT) {   /* the common case, without a switch per element */
		for (uint64_t i = 0; i < n; i++) {
			if (!(i % POLL_EVERY) && ir_interrupted)
				return interrupted(d, i, n);
			s->n_bad += acc_one(s, ld_f32(pa, i), ld_f32(pb, i), i);
		}
	} else if (da == db && (ir_dtype_is_int(da) || da == IR_BOOL)) {
		/* integers: the difference is exact, even past 2^53 */
		for (uint64_t i = 0; i < n; i++) {
			if (!(i % POLL_EVERY) && ir_interrupted)
				return interrupted(d, i, n);
			int64_t xs, ys;
			uint64_t xu, yu, diff;
			ld_int(da, pa, i, &xs, &xu);
			ld_int(db, pb, i, &ys, &yu);
			double x, y;
			if (da == IR_UINT64) {
				diff = xu > yu ? xu - yu : yu - xu;
				x = (double)xu;
				y = (double)yu;
			} else {
				diff = xs > ys ? (uint64_t)xs - (uint64_t)ys : (uint64_t)ys - (uint64_t)xs;
				x = (double)xs;
				y = (double)ys;
			}
			s->n_bad += acc_finite(s, x, y, (double)diff, i);
		}
	} else if (da == IR_COMPLEX64 || da == IR_COMPLEX128) {
		/* both complex (checked by the caller): an element fails when its
		 * real or its imaginary part does */
		for (uint64_t i = 0; i < n; i++) {
			if (!(i % POLL_EVERY) && ir_interrupted)
				return interrupted(d, i, n);
			bool re = acc_one(s, ld_complex(da, pa, i, 0), ld_complex(db, pb, i, 0), i);
			bool im = acc_one(s, ld_complex(da, pa, i, 1), ld_complex(db, pb, i, 1), i);
			s->n_bad += re || im;
		}
	} else {
		for (uint64_t i = 0; i < n; i++) {
			if (!(i % POLL_EVERY) && ir_interrupted)
				return interrupted(d, i, n);
			s->n_bad += acc_one(s, ir_elem_to_f64(da, pa, i), ir_elem_to_f64(db, pb, i), i);
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Top-k agreement                                                           */
/* ------------------------------------------------------------------------ */

/* Whether (v, i) ranks above (w, j): larger first, NaN largest (as numpy's
 * argmax), ties to the lower index. */
static bool ranks_above(double v, uint64_t i, double w, uint64_t j)
{
	bool nv = isnan(v), nw = isnan(w);
	if (nv || nw)
		return nv && (!nw || i < j);
	return v > w || (v == w && i < j);
}

/* The k best of row [base, base+len) of t, best first, into idx (k <= len). */
static void row_topk(const struct ir_tensor *t, uint64_t base, uint64_t len, int k, uint64_t *idx, double *val)
{
	const unsigned char *p = ir_tensor_data(t);
	int have = 0;
	for (uint64_t j = 0; j < len; j++) {
		double v = t->dtype == IR_FLOAT ? ld_f32(p, base + j) : ir_elem_to_f64(t->dtype, p, base + j);
		if (have == k && !ranks_above(v, j, val[k - 1], idx[k - 1]))
			continue;
		int at = have < k ? have++ : k - 1;
		while (at > 0 && ranks_above(v, j, val[at - 1], idx[at - 1])) {
			val[at] = val[at - 1];
			idx[at] = idx[at - 1];
			at--;
		}
		val[at] = v;
		idx[at] = j;
	}
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static int compare_topk(const struct ir_tensor *a, const struct ir_tensor *b, int topk, struct exec_cmp *r,
			struct ir_diag *d)
{
	uint64_t len = (uint64_t)b->dims[b->rank - 1], rows = b->numel / len;
	int k = (uint64_t)topk < len ? topk : (int)len;
	uint64_t *ia = malloc(4 * (size_t)k * sizeof(uint64_t));
	double *va = malloc(2 * (size_t)k * sizeof(double));
	if (!ia || !va) {
		free(ia);
		free(va);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	uint64_t *ib = ia + k, *sa = ib + k, *sb = sa + k;
	double *vb = va + k;
	uint64_t top1 = 0, since_poll = 0;
	double overlap = 0;
	for (uint64_t row = 0; row < rows; row++) {
		since_poll += len;
		if (since_poll >= POLL_EVERY) {
			since_poll = 0;
			if (ir_interrupted) {
				free(ia);
				free(va);
				return interrupted(d, row * len, b->numel);
			}
		}
		row_topk(a, row * len, len, k, ia, va);
		row_topk(b, row * len, len, k, ib, vb);
		top1 += ia[0] == ib[0];
		/* |top-k(a) & top-k(b)|: sort both index lists and merge */
		memcpy(sa, ia, (size_t)k * sizeof(uint64_t));
		memcpy(sb, ib, (size_t)k * sizeof(uint64_t));
		qsort(sa, (size_t)k, sizeof(uint64_t), cmp_u64);
		qsort(sb, (size_t)k, sizeof(uint64_t), cmp_u64);
		int common = 0;
		for (int x = 0, y = 0; x < k && y < k;) {
			if (sa[x] == sb[y]) {
				common++;
				x++;
				y++;
			} else if (sa[x] < sb[y]) {
				x++;
			} else {
				y++;
			}
		}
		overlap += (double)common / k;
	}
	free(ia);
	free(va);
	r->has_topk = true;
	r->top1_agree = (double)top1 / (double)rows;
	r->topk_agree = overlap / (double)rows;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The comparison                                                            */
/* ------------------------------------------------------------------------ */

static bool is_complex(int dt)
{
	return dt == IR_COMPLEX64 || dt == IR_COMPLEX128;
}

static int compare_strings(const struct ir_tensor *a, const struct ir_tensor *b, struct exec_cmp *r,
			   struct ir_diag *d)
{
	bool first = true;
	for (uint64_t i = 0; i < b->numel; i++) {
		if (!(i % POLL_EVERY) && ir_interrupted)
			return interrupted(d, i, b->numel);
		const struct ir_bytes *x = &a->strings[i], *y = &b->strings[i];
		if (x->len == y->len && (!x->len || !memcmp(x->data, y->data, x->len)))
			continue;
		r->n_bad++;
		if (first) {   /* the first differing string is the one to show */
			r->worst = i;
			first = false;
		}
	}
	return 0;
}

int exec_compare(const struct ir_tensor *a, const struct ir_tensor *b, const struct exec_cmp_opts *o,
		 struct exec_cmp *r, struct ir_diag *d)
{
	struct exec_cmp_opts dflt;
	char sa[256], sb[256];
	memset(r, 0, sizeof(*r));
	r->worst_a = r->worst_b = NAN;
	r->cosine = 1;
	r->snr_db = INFINITY;
	if (!o) {
		exec_cmp_defaults(b->dtype, &dflt);
		o = &dflt;
	}
	r->shape_ok = a->rank == b->rank &&
		(!a->rank || !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof(int64_t)));
	r->dtype_ok = a->dtype == b->dtype;
	r->n = b->numel;
	if (!r->shape_ok) {
		snprintf(r->why, sizeof(r->why), "shapes differ: %s, expected %s",
			 ir_dims_str(a->rank, a->dims, sa, sizeof(sa)), ir_dims_str(b->rank, b->dims, sb, sizeof(sb)));
		r->n = 0;
		return 0;
	}
	bool sa_str = a->dtype == IR_STRING, sb_str = b->dtype == IR_STRING;
	if (sa_str != sb_str || is_complex(a->dtype) != is_complex(b->dtype)) {
		snprintf(r->why, sizeof(r->why), "cannot compare %s with %s",
			 ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
		r->n = 0;
		return 0;
	}
	if (!r->dtype_ok)   /* numbers of different types: compared, never passing */
		snprintf(r->why, sizeof(r->why), "types differ: %s, expected %s",
			 ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
	int rc;
	if ((rc = ir_tensor_check(a, d)) || (rc = ir_tensor_check(b, d)))
		return rc;

	if (sb_str) {
		if ((rc = compare_strings(a, b, r, d)))
			return rc;
		r->max_abs = r->max_rel = NAN;   /* not numbers */
		r->cosine = r->snr_db = NAN;
		r->pass = r->n_bad == 0;
		return 0;
	}

	struct acc s;
	memset(&s, 0, sizeof(s));
	s.atol = o->atol;
	s.rtol = o->rtol;
	if ((rc = compare_numbers(a, b, &s, d)))
		return rc;
	r->n_bad = s.n_bad;
	r->max_abs = s.max_abs;
	r->max_rel = s.max_rel;
	if (s.have_worst) {
		r->worst = s.worst;
		r->worst_a = s.worst_a;
		r->worst_b = s.worst_b;
	}
	r->nan_a = s.nan_a;
	r->nan_b = s.nan_b;
	r->inf_a = s.inf_a;
	r->inf_b = s.inf_b;
	r->nan_mismatch = s.nan_mismatch;
	/* cosine: 1 when both are all zeros, 0 when only one is */
	if (s.saa > 0 && s.sbb > 0)
		r->cosine = s.sab / (sqrt(s.saa) * sqrt(s.sbb));
	else
		r->cosine = s.saa == s.sbb ? 1 : 0;
	r->snr_db = s.snoise > 0 ? 10 * log10(s.sbb / s.snoise) : INFINITY;

	if (o->topk > 0 && b->rank >= 1 && b->dims[b->rank - 1] > 1 && b->numel &&
	    !is_complex(b->dtype) && b->dtype != IR_BOOL && a->dtype != IR_BOOL &&
	    (rc = compare_topk(a, b, o->topk, r, d)))
		return rc;
	r->pass = r->dtype_ok && r->n_bad == 0;
	return 0;
}
