/*
 * util.c - what every CPU kernel uses: inputs, outputs, attributes,
 * elements in any dtype, broadcasting and axes (declared in cpu.h).
 */
#include "cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int kerr(struct cpu_kctx *k, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return ir_diag_err(k->d, IR_ERR, "%s", buf);
}

int kstop(struct cpu_kctx *k)
{
	if (ir_interrupted)
		return ir_diag_err(k->d, IR_EINTR, "stopped");
	return 0;
}

/* a slab of kpar: fn over [base + b, base + e) */
struct kpar_slab {
	cpu_range_fn fn;
	void *ctx;
	int64_t base;
};

static void kpar_slab_run(void *ctx, int64_t b, int64_t e, int worker)
{
	const struct kpar_slab *s = ctx;
	s->fn(s->ctx, s->base + b, s->base + e, worker);
}

int kpar(struct cpu_kctx *k, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx)
{
	int64_t slab, grains = 16 * (int64_t)cpu_threads();
	if (grain < 1)
		grain = 1;
	if (grains < 256)
		grains = 256;
	slab = grain > INT64_MAX / grains ? INT64_MAX : grain * grains;
	if (n <= slab) {
		cpu_parallel_for(n, grain, fn, ctx);
		return 0;
	}
	for (int64_t lo = 0; lo < n; lo += slab) {
		struct kpar_slab s = { fn, ctx, lo };
		if (lo && kstop(k))
			return IR_EINTR;
		cpu_parallel_for(n - lo < slab ? n - lo : slab, grain, kpar_slab_run, &s);
	}
	return 0;
}

const struct ir_tensor *kin(const struct cpu_kctx *k, int i)
{
	if (i < 0 || i >= k->n_in || k->in[i].kind != KV_TENSOR)
		return NULL;
	return k->in[i].t;
}

const struct ir_tensor *kin_req(struct cpu_kctx *k, int i)
{
	const struct ir_tensor *t = kin(k, i);
	if (!t) {
		if (i < k->n_in && k->in[i].kind == KV_SEQ)
			kerr(k, "input %d is a sequence, a tensor is needed", i);
		else
			kerr(k, "input %d is missing", i);
	}
	return t;
}

bool khas(const struct cpu_kctx *k, int i)
{
	return i >= 0 && i < k->n_in && k->in[i].kind != KV_NONE;
}

bool kwant(const struct cpu_kctx *k, int i)
{
	return i >= 0 && i < k->n_out && i < k->node->n_outputs && k->node->outputs[i];
}

struct ir_tensor *kout(struct cpu_kctx *k, int i, int dtype, int rank, const int64_t *dims)
{
	if (i < 0 || i >= k->n_out) {
		kerr(k, "output %d does not exist", i);
		return NULL;
	}
	struct ir_tensor *t;
	if (k->hooks && k->hooks->alloc)
		t = k->hooks->alloc(k, i, dtype, rank, dims);
	else
		t = ir_tensor_new(dtype, rank, dims, k->d);
	if (!t)
		return NULL;
	kern_value_clear(&k->out[i]);
	k->out[i].kind = KV_TENSOR;
	k->out[i].t = t;
	return t;
}

int kout_share(struct cpu_kctx *k, int i, const struct ir_tensor *t, int rank, const int64_t *dims)
{
	if (i < 0 || i >= k->n_out)
		return kerr(k, "output %d does not exist", i);
	if (knumel(rank, dims) != t->numel)
		return kerr(k, "cannot view %s as another shape with a different element count", kshape(t));
	struct ir_tensor *o;
	if (t->dtype == IR_STRING) {
		o = ir_tensor_new(IR_STRING, rank, dims, k->d);
		if (!o)
			return IR_ENOMEM;
		for (uint64_t j = 0; j < t->numel; j++) {
			if (!kstr_set(&o->strings[j], t->strings[j].data, t->strings[j].len)) {
				ir_tensor_unref(o);
				return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
			}
		}
	} else if (t->buf && ((uintptr_t)t->buf->data % 16)) {
		/* bytes at an odd offset of a mapped file (a Constant's tensor):
		 * kernels read aligned data, so this one is copied */
		o = ir_tensor_new(t->dtype, rank, dims, k->d);
		if (!o)
			return IR_ERR;
		memcpy(ir_tensor_mutable(o), t->buf->data, t->nbytes);
	} else {
		o = ir_tensor_wrap(t->dtype, rank, dims, t->buf, k->d);
		if (!o)
			return IR_ERR;
	}
	kern_value_clear(&k->out[i]);
	k->out[i].kind = KV_TENSOR;
	k->out[i].t = o;
	return 0;
}

int kout_seq(struct cpu_kctx *k, int i, int elem, struct ir_tensor **items, int n)
{
	if (i < 0 || i >= k->n_out) {
		for (int j = 0; j < n; j++)
			ir_tensor_unref(items[j]);
		return kerr(k, "output %d does not exist", i);
	}
	struct ir_tensor **a = NULL;
	if (n && !(a = malloc(sizeof(*a) * (size_t)n))) {
		for (int j = 0; j < n; j++)
			ir_tensor_unref(items[j]);
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	}
	if (n)
		memcpy(a, items, sizeof(*a) * (size_t)n);
	kern_value_clear(&k->out[i]);
	k->out[i].kind = KV_SEQ;
	k->out[i].items = a;
	k->out[i].n_items = n;
	k->out[i].elem = elem;
	return 0;
}

void kern_value_clear(struct kern_value *v)
{
	if (v->kind == KV_TENSOR)
		ir_tensor_unref(v->t);
	if (v->kind == KV_SEQ) {
		for (int i = 0; i < v->n_items; i++)
			ir_tensor_unref(v->items[i]);
		free(v->items);
	}
	bool opt = v->optional;
	memset(v, 0, sizeof(*v));
	v->optional = opt;
}

int kern_value_copy(struct kern_value *dst, const struct kern_value *src)
{
	*dst = *src;
	if (src->kind == KV_TENSOR) {
		ir_tensor_ref(src->t);
	} else if (src->kind == KV_SEQ) {
		dst->items = NULL;
		if (src->n_items && !(dst->items = malloc(sizeof(*dst->items) * (size_t)src->n_items))) {
			dst->kind = KV_NONE;
			dst->n_items = 0;
			return IR_ENOMEM;
		}
		for (int i = 0; i < src->n_items; i++) {
			dst->items[i] = src->items[i];
			ir_tensor_ref(src->items[i]);
		}
	}
	return 0;
}

/* --- attributes --- */

const struct ir_attr *kattr(const struct cpu_kctx *k, const char *name)
{
	return ir_node_attr(k->node, name);
}

bool kattr_has(const struct cpu_kctx *k, const char *name)
{
	return ir_node_attr(k->node, name) != NULL;
}

int64_t kattr_i(const struct cpu_kctx *k, const char *name, int64_t dflt)
{
	return ir_node_attr_int(k->node, name, dflt);
}

float kattr_f(const struct cpu_kctx *k, const char *name, float dflt)
{
	return ir_node_attr_float(k->node, name, dflt);
}

const char *kattr_s(const struct cpu_kctx *k, const char *name, const char *dflt)
{
	const struct ir_attr *a = ir_node_attr(k->node, name);
	if (!a || a->type != IR_ATTR_STRING)
		return dflt;
	return a->s.data ? a->s.data : "";
}

const int64_t *kattr_ints(const struct cpu_kctx *k, const char *name, int *n)
{
	const struct ir_attr *a = ir_node_attr(k->node, name);
	*n = 0;
	if (!a || a->type != IR_ATTR_INTS)
		return NULL;
	*n = (int)a->n;
	return a->ints;
}

const float *kattr_floats(const struct cpu_kctx *k, const char *name, int *n)
{
	const struct ir_attr *a = ir_node_attr(k->node, name);
	*n = 0;
	if (!a || a->type != IR_ATTR_FLOATS)
		return NULL;
	*n = (int)a->n;
	return a->floats;
}

/* --- elements --- */

double kld(int dtype, const void *p, uint64_t i)
{
	switch (dtype) {
	case IR_FLOAT: return ((const float *)p)[i];
	case IR_DOUBLE: return ((const double *)p)[i];
	case IR_INT64: return (double)((const int64_t *)p)[i];
	case IR_INT32: return ((const int32_t *)p)[i];
	default: return ir_elem_to_f64(dtype, p, i);
	}
}

int64_t kldi(int dtype, const void *p, uint64_t i)
{
	int64_t v;
	switch (dtype) {
	case IR_INT64: return ((const int64_t *)p)[i];
	case IR_INT32: return ((const int32_t *)p)[i];
	case IR_UINT64: return (int64_t)((const uint64_t *)p)[i];
	default: break;
	}
	if (ir_elem_to_i64(dtype, p, i, &v))
		return v;
	double d = ir_elem_to_f64(dtype, p, i);
	if (isnan(d))
		return 0;
	if (d >= 9223372036854775807.0)
		return INT64_MAX;
	if (d <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)d;
}

static void st_nibble(void *p, uint64_t i, unsigned v)
{
	unsigned char *b = (unsigned char *)p + i / 2;
	if (i % 2)
		*b = (unsigned char)((*b & 0x0f) | ((v & 0xf) << 4));
	else
		*b = (unsigned char)((*b & 0xf0) | (v & 0xf));
}

static void st_crumb(void *p, uint64_t i, unsigned v)
{
	unsigned char *b = (unsigned char *)p + i / 4;
	int sh = 2 * (int)(i % 4);
	*b = (unsigned char)((*b & ~(3u << sh)) | ((v & 3u) << sh));
}

void ksti(int dtype, void *p, uint64_t i, int64_t v)
{
	switch (dtype) {
	case IR_INT64: ((int64_t *)p)[i] = v; return;
	case IR_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; return;
	case IR_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)v; return;
	case IR_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; return;
	case IR_INT16: ((int16_t *)p)[i] = (int16_t)(uint16_t)v; return;
	case IR_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; return;
	case IR_INT8: ((int8_t *)p)[i] = (int8_t)(uint8_t)v; return;
	case IR_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; return;
	case IR_BOOL: ((uint8_t *)p)[i] = v != 0; return;
	case IR_INT4: case IR_UINT4: st_nibble(p, i, (unsigned)v); return;
	case IR_INT2: case IR_UINT2: st_crumb(p, i, (unsigned)v); return;
	default: kst(dtype, p, i, (double)v); return;
	}
}

static int64_t f64_to_i64(double v)
{
	if (isnan(v))
		return 0;
	if (v >= 9223372036854775807.0)
		return INT64_MAX;
	if (v <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}

void kst(int dtype, void *p, uint64_t i, double v)
{
	switch (dtype) {
	case IR_FLOAT: ((float *)p)[i] = (float)v; return;
	case IR_DOUBLE: ((double *)p)[i] = v; return;
	case IR_FLOAT16: ((uint16_t *)p)[i] = ir_f32_to_f16((float)v); return;
	case IR_BFLOAT16: ((uint16_t *)p)[i] = ir_f32_to_bf16((float)v); return;
	case IR_COMPLEX64: ((float *)p)[2 * i] = (float)v; ((float *)p)[2 * i + 1] = 0; return;
	case IR_COMPLEX128: ((double *)p)[2 * i] = v; ((double *)p)[2 * i + 1] = 0; return;
	case IR_BOOL: ((uint8_t *)p)[i] = v != 0; return;
	case IR_UINT64:
		if (v >= 18446744073709551615.0)
			((uint64_t *)p)[i] = UINT64_MAX;
		else if (v >= 9223372036854775808.0)
			((uint64_t *)p)[i] = (uint64_t)v;
		else
			((uint64_t *)p)[i] = (uint64_t)f64_to_i64(v);
		return;
	case IR_F8E4M3FN: case IR_F8E4M3FNUZ: case IR_F8E5M2: case IR_F8E5M2FNUZ: case IR_F8E8M0:
		((uint8_t *)p)[i] = kcvt_f32_to_small(dtype, (float)v, true);
		return;
	case IR_F4E2M1:
		st_nibble(p, i, kcvt_f32_to_small(dtype, (float)v, true));
		return;
	case IR_STRING: case IR_UNDEFINED:
		return;
	default:
		ksti(dtype, p, i, f64_to_i64(v));
		return;
	}
}

/* --- shapes --- */

uint64_t knumel(int rank, const int64_t *dims)
{
	uint64_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= (uint64_t)dims[i];
	return n;
}

void kstrides(int rank, const int64_t *dims, int64_t *strides)
{
	/* unsigned: a zero-size tensor may have other dims whose product overflows */
	uint64_t s = 1;
	for (int i = rank - 1; i >= 0; i--) {
		strides[i] = (int64_t)s;
		s *= (uint64_t)dims[i];
	}
}

int kaxis(struct cpu_kctx *k, int64_t axis, int rank, int *out)
{
	if (axis < -(int64_t)rank || axis >= (int64_t)(rank ? rank : 1)) {
		if (!(rank == 0 && (axis == 0 || axis == -1)))
			return kerr(k, "axis %lld is out of range for rank %d", (long long)axis, rank);
	}
	*out = (int)(axis < 0 ? axis + rank : axis);
	return 0;
}

const char *kshape(const struct ir_tensor *t)
{
	static _Thread_local char buf[4][256];
	static _Thread_local int which;
	char *b = buf[which++ % 4];
	if (!t)
		return "(none)";
	return ir_dims_str(t->rank, t->dims, b, 256);
}

int kbcast_shape(struct cpu_kctx *k, int n, const struct ir_tensor *const *ts, int *rank, int64_t *dims)
{
	int r = 0;
	for (int i = 0; i < n; i++)
		if (ts[i] && ts[i]->rank > r)
			r = ts[i]->rank;
	for (int j = 0; j < r; j++)
		dims[j] = 1;
	for (int i = 0; i < n; i++) {
		const struct ir_tensor *t = ts[i];
		if (!t)
			continue;
		for (int j = 0; j < t->rank; j++) {
			int64_t d = t->dims[j];
			int64_t *o = &dims[r - t->rank + j];
			if (d == *o || d == 1)
				continue;
			if (*o == 1) {
				*o = d;
				continue;
			}
			return kerr(k, "shapes do not broadcast: input %d is %s, another input has %lld at that axis",
				    i, kshape(t), (long long)*o);
		}
	}
	*rank = r;
	return 0;
}

void kbcast_strides(const struct ir_tensor *t, int rank, const int64_t *dims, int64_t *strides)
{
	(void)dims;
	uint64_t s = 1;
	for (int j = rank - 1; j >= 0; j--) {
		int tj = j - (rank - t->rank);
		if (tj < 0 || t->dims[tj] == 1) {
			strides[j] = 0;
			if (tj >= 0)
				s *= (uint64_t)t->dims[tj];
		} else {
			strides[j] = (int64_t)s;
			s *= (uint64_t)t->dims[tj];
		}
	}
}

void kiter_init(struct kiter *it, int rank, const int64_t *dims)
{
	it->rank = rank;
	it->nops = 0;
	for (int i = 0; i < rank; i++) {
		it->dims[i] = dims[i];
		it->idx[i] = 0;
	}
}

int kiter_add(struct kiter *it, const int64_t *strides)
{
	int o = it->nops++;
	for (int i = 0; i < it->rank; i++)
		it->strides[o][i] = strides[i];
	it->off[o] = 0;
	return o;
}

void kiter_next(struct kiter *it)
{
	for (int j = it->rank - 1; j >= 0; j--) {
		if (++it->idx[j] < it->dims[j]) {
			for (int o = 0; o < it->nops; o++)
				it->off[o] += it->strides[o][j];
			return;
		}
		it->idx[j] = 0;
		for (int o = 0; o < it->nops; o++)
			it->off[o] -= it->strides[o][j] * (it->dims[j] - 1);
	}
}

void kiter_seek(struct kiter *it, int64_t flat)
{
	for (int o = 0; o < it->nops; o++)
		it->off[o] = 0;
	for (int j = it->rank - 1; j >= 0; j--) {
		it->idx[j] = it->dims[j] ? flat % it->dims[j] : 0;
		flat = it->dims[j] ? flat / it->dims[j] : 0;
		for (int o = 0; o < it->nops; o++)
			it->off[o] += it->idx[j] * it->strides[o][j];
	}
}

int kread_ints(struct cpu_kctx *k, const struct ir_tensor *t, int64_t *vals, int max, const char *what)
{
	if (!ir_dtype_is_int(t->dtype))
		return kerr(k, "%s must be an integer tensor, not %s", what, ir_dtype_name(t->dtype)), -1;
	if (t->numel > (uint64_t)max)
		return kerr(k, "%s has %llu elements, at most %d are allowed", what,
			    (unsigned long long)t->numel, max), -1;
	for (uint64_t i = 0; i < t->numel; i++)
		vals[i] = kldi(t->dtype, kdata(t), i);
	return (int)t->numel;
}

void kern_store_f64(int dtype, void *p, uint64_t i, double v)
{
	kst(dtype, p, i, v);
}

int kelem_bytes(int dtype)
{
	int bits = ir_dtype_bits(dtype);
	if (dtype == IR_STRING || bits < 8)
		return 0;
	return bits / 8;
}

void kcopy_rows(void *dst, int64_t dst_len, int64_t dst_start, const void *src, int64_t src_len, int64_t start,
		int64_t len, int64_t outer, size_t inner_bytes)
{
	if (len <= 0 || !inner_bytes)
		return;
	for (int64_t o = 0; o < outer; o++)
		memcpy((char *)dst + ((size_t)(o * dst_len + dst_start)) * inner_bytes,
		       (const char *)src + ((size_t)(o * src_len + start)) * inner_bytes, (size_t)len * inner_bytes);
}

int kenomem(struct cpu_kctx *k)
{
	return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
}

bool kmul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	if (a && b > UINT64_MAX / a)
		return false;
	*out = a * b;
	return true;
}

void *kalloc_arr(struct cpu_kctx *k, uint64_t n, size_t size)
{
	if (n && n > SIZE_MAX / size) {
		kerr(k, "scratch buffer of %llu elements is too large", (unsigned long long)n);
		return NULL;
	}
	void *p = malloc(n ? (size_t)n * size : 1);
	if (!p)
		ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	return p;
}

double *kload_f64(const struct ir_tensor *t)
{
	double *v = malloc(sizeof(double) * (t->numel ? t->numel : 1));
	if (!v)
		return NULL;
	const void *p = kdata(t);
	if (t->dtype == IR_FLOAT) {
		const float *f = p;
		for (uint64_t i = 0; i < t->numel; i++)
			v[i] = f[i];
	} else {
		for (uint64_t i = 0; i < t->numel; i++)
			v[i] = kld(t->dtype, p, i);
	}
	return v;
}

/* Rows [start, start+len) of t along axis, as a new tensor (keepdims or not). */
struct ir_tensor *ktake_rows(struct cpu_kctx *k, const struct ir_tensor *t, int axis, int64_t start, int64_t len,
				   bool keep)
{
	int64_t dims[IR_MAX_RANK];
	int r = 0;
	for (int j = 0; j < t->rank; j++) {
		if (j == axis) {
			if (keep)
				dims[r++] = len;
		} else {
			dims[r++] = t->dims[j];
		}
	}
	int es = kelem_bytes(t->dtype);
	if (!es) {
		kerr(k, "%s tensors are not supported here", ir_dtype_name(t->dtype));
		return NULL;
	}
	struct ir_tensor *o = ir_tensor_new(t->dtype, r, dims, k->d);
	if (!o)
		return NULL;
	int64_t outer = 1, inner = 1;
	for (int j = 0; j < axis; j++)
		outer *= t->dims[j];
	for (int j = axis + 1; j < t->rank; j++)
		inner *= t->dims[j];
	if (o->numel)
		kcopy_rows(ir_tensor_mutable(o), len, 0, kdata(t), t->dims[axis], start, len, outer, (size_t)inner * (size_t)es);
	return o;
}

bool kmul62(int64_t a, int64_t b, int64_t *r)
{
	if (a < 0 || b < 0)
		return false;
	if (a && b > ((int64_t)1 << 62) / a)
		return false;
	*r = a * b;
	return true;
}

int kattr_ints_n(struct cpu_kctx *k, const char *name, int n, int64_t *v, int64_t dflt, int64_t min)
{
	int cnt;
	const int64_t *a = kattr_ints(k, name, &cnt);
	if (!a) {
		for (int i = 0; i < n; i++)
			v[i] = dflt;
		return 0;
	}
	if (cnt != n)
		return kerr(k, "%s has %d values, %d expected", name, cnt, n);
	for (int i = 0; i < n; i++) {
		if (a[i] < min || a[i] > ((int64_t)1 << 40))
			return kerr(k, "%s value %lld is out of range", name, (long long)a[i]);
		v[i] = a[i];
	}
	return 0;
}

bool kstr_set(struct ir_bytes *b, const char *data, size_t len)
{
	char *p = malloc(len + 1);
	if (!p)
		return false;
	if (len)
		memcpy(p, data, len);
	p[len] = 0;
	free(b->data);
	b->data = p;
	b->len = len;
	return true;
}

void kern_slice_dim(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *s0, int64_t *len)
{
	if (start < 0)
		start += dim;
	if (end < 0)
		end += dim;
	if (step > 0) {
		start = start < 0 ? 0 : start > dim ? dim : start;
		end = end < 0 ? 0 : end > dim ? dim : end;
		*len = end > start ? (end - start - 1) / step + 1 : 0;
	} else {
		start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
		end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
		/* step may be INT64_MIN: compare instead of negating */
		if (start <= end)
			*len = 0;
		else if (step < -dim)
			*len = 1;
		else
			*len = (start - end - 1) / (-step) + 1;
	}
	*s0 = start;
}

void ktap_range(int64_t off, int64_t in, int64_t stride, int64_t out, int64_t *lo, int64_t *hi)
{
	*lo = off < 0 ? (-off + stride - 1) / stride : 0;
	*hi = out;
	if (in - off <= 0)
		*hi = 0;
	else if ((in - off + stride - 1) / stride < *hi)
		*hi = (in - off + stride - 1) / stride;
}
