/*
 * k_tensor.c - GPU kernel entries of the tensor family (launchers in k_tensor.cu):
 * the data-movement ops (Identity, Reshape, Flatten, Squeeze, Unsqueeze,
 * Transpose, Concat, Split, Slice, Gather, GatherElements, GatherND,
 * Scatter, ScatterElements, ScatterND, Expand, Tile, Pad, Resize, Upsample,
 * ConstantOfShape, Range, Trilu, DepthToSpace, SpaceToDepth, CumSum, OneHot).
 *
 * Data movement works for every element type of 1, 2, 4 or 8 bytes (bool
 * is one byte); the views (Identity, Reshape...) also for packed types.
 * Each entry's `build` reads the node and its constant inputs into a plan
 * (struct kt_state): `supports` builds one to see whether it can, `prepare`
 * keeps it, `run` only launches. Many ops are one strided view of the input
 * (Transpose, Slice, Expand, Tile, DepthToSpace, SpaceToDepth): their dims
 * are merged where contiguous, and transposes of two dims go through
 * shared-memory tiles.
 *
 * Indices out of range cannot be reported from the GPU: gathers write zeros
 * for them and scatters skip them (the CPU kernels report an error).
 */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/k_tensor.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */
/* ------------------------------------------------------------------------ */

enum { PL_NONE, PL_MEMCPY, PL_STRIDED, PL_TILED };

struct kt_state {
	int esz;
	/* a view: y = x seen through s (or t, or a memcpy of `bytes` from element `base`) */
	int plan;
	struct kt_strided s;
	struct kt_tiled t;
	int64_t base, bytes;
	/* the other ops */
	int axis, kind, flag1, flag2;
	int64_t outer, dim, inner, n, kk;
	unsigned char value[8];
	bool zero_value;
	struct kt_elems el;
	struct kt_nd nd;
	struct kt_pad pad;
	struct kt_resize rs;
	bool linear;
	int64_t tab_len;
	int64_t *h_i0, *h_i1;   /* resize tables on the host until prepare uploads them */
	float *h_w;
	void *dev;              /* device memory of the tables (cudaFree) */
	struct kt_rows_job *jobs;
	int njobs;
};

static void state_free_host(struct kt_state *s)
{
	free(s->h_i0);
	free(s->h_i1);
	free(s->h_w);
	s->h_i0 = s->h_i1 = NULL;
	s->h_w = NULL;
	free(s->jobs);
	s->jobs = NULL;
}

static void release_state(void *p)
{
	struct kt_state *s = p;
	if (!s)
		return;
	state_free_host(s);
	if (s->dev)
		cudaFree(s->dev);
	free(s);
}

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

/* Bytes per element for the types moved as whole elements, else 0. */
static int esz_of(int dtype)
{
	if (dtype == IR_STRING)
		return 0;
	int b = ir_dtype_bits(dtype);
	return b == 8 || b == 16 || b == 32 || b == 64 ? b / 8 : 0;
}

static bool dtype_ok(int dtype, int *esz, char *why, size_t size)
{
	*esz = esz_of(dtype);
	if (!*esz)
		return no(why, size, "dtype %s is not supported on the GPU", ir_dtype_name(dtype));
	return true;
}

static bool has_in(const struct cuda_kctx *k, int i)
{
	return i < k->n_in && k->in[i].dtype != 0;
}

/* Whether input i is present with elements (an empty tensor counts as omitted where ONNX says so). */
static bool has_elems(const struct cuda_kctx *k, int i)
{
	return has_in(k, i) && cuda_numel(&k->in[i]) > 0;
}

static const char *attr_s(const struct cuda_kctx *k, const char *name, const char *dflt)
{
	const struct ir_attr *a = ir_node_attr(k->node, name);
	if (!a || a->type != IR_ATTR_STRING)
		return dflt;
	return a->s.data ? a->s.data : "";
}

static const int64_t *attr_ints(const struct cuda_kctx *k, const char *name, int *n)
{
	const struct ir_attr *a = ir_node_attr(k->node, name);
	*n = 0;
	if (!a || a->type != IR_ATTR_INTS)
		return NULL;
	*n = (int)a->n;
	return a->ints;
}

static int64_t attr_i(const struct cuda_kctx *k, const char *name, int64_t dflt)
{
	return ir_node_attr_int(k->node, name, dflt);
}

/* The values of constant integer input i (up to max); the count, or -1 with a reason. */
static int host_ints(const struct cuda_kctx *k, int i, const char *what, int64_t *v, int max, char *why, size_t size)
{
	const struct ir_tensor *t = k->in[i].host;
	if (!t)
		return no(why, size, "%s is not a constant", what), -1;
	if (t->numel > (uint64_t)max)
		return no(why, size, "%s has too many values", what), -1;
	const void *p = ir_tensor_data(t);
	for (uint64_t j = 0; j < t->numel; j++)
		if (!ir_elem_to_i64(t->dtype, p, j, &v[j]))
			return no(why, size, "%s is not an integer tensor", what), -1;
	return (int)t->numel;
}

static bool same_dims(const struct cuda_tensor *t, int rank, const int64_t *dims)
{
	if (t->rank != rank)
		return false;
	for (int i = 0; i < rank; i++)
		if (t->dims[i] != dims[i])
			return false;
	return true;
}

static bool out_matches(const struct cuda_kctx *k, int rank, const int64_t *dims, char *why, size_t size)
{
	if (!same_dims(&k->out[0], rank, dims))
		return no(why, size, "the planned output shape differs from what the node computes");
	return true;
}

static int64_t prod(const int64_t *d, int n)
{
	int64_t p = 1;
	for (int i = 0; i < n; i++)
		p *= d[i];
	return p;
}

static void strides_of(int rank, const int64_t *dims, int64_t *st)
{
	int64_t s = 1;
	for (int i = rank - 1; i >= 0; i--) {
		st[i] = s;
		s *= dims[i];
	}
}

static int norm_axis(int64_t a, int rank)
{
	if (a < -rank || a >= rank)
		return -1;
	return (int)(a < 0 ? a + rank : a);
}

/*
 * Plans y = x seen through (rank, dims, str, base): size-1 dims dropped,
 * dims that stay contiguous merged; a plain copy when the view is
 * contiguous, tiles when it transposes two large dims. false when too many
 * dims remain.
 */
static bool plan_view(struct kt_state *s, int rank, const int64_t *dims, const int64_t *str, int64_t base, char *why,
		      size_t size)
{
	int64_t d[2 * IR_MAX_RANK], ss[2 * IR_MAX_RANK];
	int n = 0;
	s->base = base;
	for (int j = 0; j < rank; j++)
		if (dims[j] == 0) {
			s->plan = PL_NONE;
			return true;
		}
	for (int j = 0; j < rank; j++) {
		if (dims[j] == 1)
			continue;
		if (n && ss[n - 1] == str[j] * dims[j]) {
			d[n - 1] *= dims[j];
			ss[n - 1] = str[j];
			continue;
		}
		d[n] = dims[j];
		ss[n++] = str[j];
	}
	if (n == 0 || (n == 1 && ss[0] == 1)) {
		s->plan = PL_MEMCPY;
		s->bytes = (n ? d[0] : 1) * s->esz;
		return true;
	}
	if (n > KT_MAX_DIMS)
		return no(why, size, "the view has %d dims after merging, at most %d are supported on the GPU", n,
			  KT_MAX_DIMS);
	int q = -1;
	if (base == 0 && n >= 2 && ss[n - 1] != 1)
		for (int j = 0; j < n - 1; j++)
			if (ss[j] == 1)
				q = j;
	if (q >= 0 && d[q] >= 16 && d[n - 1] >= 16) {
		int64_t os[2 * IR_MAX_RANK];
		strides_of(n, d, os);
		struct kt_tiled *t = &s->t;
		memset(t, 0, sizeof(*t));
		for (int j = 0; j < n - 1; j++) {
			if (j == q)
				continue;
			t->bdims[t->nb] = d[j];
			t->bsrc[t->nb] = ss[j];
			t->bdst[t->nb++] = os[j];
		}
		t->dq = d[q];
		t->dl = d[n - 1];
		t->sl = ss[n - 1];
		t->oq = os[q];
		s->plan = PL_TILED;
		return true;
	}
	memset(&s->s, 0, sizeof(s->s));
	s->s.rank = n;
	for (int j = 0; j < n; j++) {
		s->s.dims[j] = d[j];
		s->s.str[j] = ss[j];
	}
	s->s.base = base;
	s->plan = PL_STRIDED;
	return true;
}

static const char *plan_impl(const struct kt_state *s)
{
	switch (s->plan) {
	case PL_MEMCPY: return "cudaMemcpyAsync";
	case PL_TILED: return "ogsh transpose tiled";
	case PL_STRIDED: return "ogsh strided copy";
	default: return "nothing (empty)";
	}
}

static int run_view(struct cuda_kctx *k, const struct kt_state *s)
{
	const unsigned char *x = k->in[0].data;
	void *y = k->out[0].data;
	cudaStream_t st = k->ctx->stream;
	switch (s->plan) {
	case PL_MEMCPY:
		return cuda_check(cudaMemcpyAsync(y, x + s->base * s->esz, (size_t)s->bytes, cudaMemcpyDeviceToDevice, st),
				  "cudaMemcpyAsync", k->d);
	case PL_TILED:
		kt_transpose_tiled(&s->t, s->esz, x, y, st);
		return cuda_check_launch("kt_transpose_tiled", k->d);
	case PL_STRIDED:
		kt_strided_copy(&s->s, s->esz, x, y, st);
		return cuda_check_launch("kt_strided_copy", k->d);
	default:
		return 0;
	}
}

/* The entry points of an op from its build function. */
typedef bool (*build_fn)(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size);

static bool supports_with(const struct cuda_kctx *k, char *why, size_t size, build_fn build)
{
	struct kt_state *s = calloc(1, sizeof(*s));
	if (!s)
		return no(why, size, "out of memory");
	bool ok = build(k, s, why, size);
	release_state(s);
	return ok;
}

static int prepare_with(struct cuda_kctx *k, build_fn build)
{
	struct kt_state *s = calloc(1, sizeof(*s));
	if (!s)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	char why[200];
	if (!build(k, s, why, sizeof(why))) {
		release_state(s);
		return ir_diag_err(k->d, IR_ERR, "%s", why);
	}
	k->state = s;
	return 0;
}

#define ENTRIES(name)                                                                \
	static bool supports_##name(const struct cuda_kctx *k, char *why, size_t size) \
	{                                                                            \
		return supports_with(k, why, size, build_##name);                    \
	}                                                                            \
	static int prepare_##name(struct cuda_kctx *k)                               \
	{                                                                            \
		return prepare_with(k, build_##name);                                \
	}

/* ------------------------------------------------------------------------ */
/* Views as copies: Identity, Reshape, Flatten, Squeeze, Unsqueeze           */
/* ------------------------------------------------------------------------ */

static bool build_copy(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	if (!has_in(k, 0))
		return no(why, size, "the input is not a tensor");
	int dt = k->in[0].dtype;
	if (dt == IR_STRING)
		return no(why, size, "dtype string is not supported on the GPU");
	if (k->out[0].dtype != dt || cuda_numel(&k->out[0]) != cuda_numel(&k->in[0]))
		return no(why, size, "the output does not have the input's type and element count");
	uint64_t bytes;
	if (!ir_dtype_nbytes(dt, (uint64_t)cuda_numel(&k->in[0]), &bytes))
		return no(why, size, "the tensor is too large");
	s->bytes = (int64_t)bytes;
	return true;
}
ENTRIES(copy)

static int run_copy(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "cudaMemcpyAsync");
	if (!s->bytes || k->out[0].data == k->in[0].data)
		return 0;
	return cuda_check(cudaMemcpyAsync(k->out[0].data, k->in[0].data, (size_t)s->bytes, cudaMemcpyDeviceToDevice,
					  k->ctx->stream),
			  "cudaMemcpyAsync", k->d);
}

/* ------------------------------------------------------------------------ */
/* Strided views: Transpose, Slice, Expand, Tile, DepthToSpace, SpaceToDepth */
/* ------------------------------------------------------------------------ */

static int run_view_op(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "%s", plan_impl(s));
	return run_view(k, s);
}

static bool build_transpose(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	int r = x->rank, n;
	int64_t perm[IR_MAX_RANK], st[IR_MAX_RANK], od[IR_MAX_RANK], ss[IR_MAX_RANK];
	bool seen[IR_MAX_RANK] = { false };
	const int64_t *p = attr_ints(k, "perm", &n);
	if (p && n != r)
		return no(why, size, "perm has %d values for rank %d", n, r);
	for (int i = 0; i < r; i++) {
		int a = p ? norm_axis(p[i], r) : r - 1 - i;
		if (a < 0 || seen[a])
			return no(why, size, "perm is not a permutation");
		seen[a] = true;
		perm[i] = a;
	}
	strides_of(r, x->dims, st);
	for (int i = 0; i < r; i++) {
		od[i] = x->dims[perm[i]];
		ss[i] = st[perm[i]];
	}
	return out_matches(k, r, od, why, size) && plan_view(s, r, od, ss, 0, why, size);
}
ENTRIES(transpose)

static bool build_slice(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	int r = x->rank, n, ne, na = -1, ns = -1;
	int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
	if (k->opset < 10) {
		const int64_t *a = attr_ints(k, "starts", &n), *b = attr_ints(k, "ends", &ne), *c;
		if (!a || !b || n > IR_MAX_RANK || ne > IR_MAX_RANK)
			return no(why, size, "attributes 'starts' and 'ends' are missing or too long");
		memcpy(starts, a, sizeof(int64_t) * (size_t)n);
		memcpy(ends, b, sizeof(int64_t) * (size_t)ne);
		if ((c = attr_ints(k, "axes", &na))) {
			if (na > IR_MAX_RANK)
				return no(why, size, "axes has too many values");
			memcpy(axes, c, sizeof(int64_t) * (size_t)na);
		} else {
			na = -1;
		}
	} else {
		if (!has_in(k, 1) || !has_in(k, 2))
			return no(why, size, "starts and ends are missing");
		if ((n = host_ints(k, 1, "starts", starts, IR_MAX_RANK, why, size)) < 0 ||
		    (ne = host_ints(k, 2, "ends", ends, IR_MAX_RANK, why, size)) < 0)
			return false;
		if (has_in(k, 3) && (na = host_ints(k, 3, "axes", axes, IR_MAX_RANK, why, size)) < 0)
			return false;
		if (has_in(k, 4) && (ns = host_ints(k, 4, "steps", steps, IR_MAX_RANK, why, size)) < 0)
			return false;
	}
	if (ne != n || (na >= 0 && na != n) || (ns >= 0 && ns != n) || n > r)
		return no(why, size, "starts, ends, axes and steps do not match");
	bool seen[IR_MAX_RANK] = { false };
	for (int i = 0; i < n; i++) {
		int a = na < 0 ? i : norm_axis(axes[i], r);
		if (a < 0 || seen[a])
			return no(why, size, "axes are out of range or repeated");
		seen[a] = true;
		axes[i] = a;
		if (ns < 0)
			steps[i] = 1;
		if (steps[i] == 0)
			return no(why, size, "a step is 0");
	}
	int64_t st[IR_MAX_RANK], od[IR_MAX_RANK], ss[IR_MAX_RANK], base = 0;
	strides_of(r, x->dims, st);
	for (int i = 0; i < r; i++) {
		od[i] = x->dims[i];
		ss[i] = st[i];
	}
	for (int i = 0; i < n; i++) {
		int ax = (int)axes[i];
		int64_t s0, len, step = steps[i];
		kern_slice_dim(x->dims[ax], starts[i], ends[i], step, &s0, &len);
		if (len <= 1)
			step = 1;
		od[ax] = len;
		if (len)
			base += s0 * st[ax];
		ss[ax] = st[ax] * step;
	}
	if (!out_matches(k, r, od, why, size))
		return false;
	if (prod(od, r) == 0) {
		s->plan = PL_NONE;
		return true;
	}
	return plan_view(s, r, od, ss, base, why, size);
}
ENTRIES(slice)

static bool build_expand(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0], *y = &k->out[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	int r = y->rank;
	if (x->rank > r)
		return no(why, size, "the output has a lower rank than the input");
	int64_t st[IR_MAX_RANK], ss[IR_MAX_RANK];
	strides_of(x->rank, x->dims, st);
	for (int i = 0; i < r; i++) {
		int xi = i - (r - x->rank);
		int64_t a = xi >= 0 ? x->dims[xi] : 1;
		if (a != y->dims[i] && a != 1)
			return no(why, size, "the input does not broadcast to the output");
		ss[i] = xi >= 0 && a != 1 ? st[xi] : 0;
	}
	return plan_view(s, r, y->dims, ss, 0, why, size);
}
ENTRIES(expand)

static bool build_tile(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0], *y = &k->out[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	int r = x->rank;
	if (y->rank != r)
		return no(why, size, "the output rank differs from the input's");
	int64_t st[IR_MAX_RANK], vd[2 * IR_MAX_RANK], vs[2 * IR_MAX_RANK];
	strides_of(r, x->dims, st);
	if (cuda_numel(y) == 0) {
		s->plan = PL_NONE;
		return true;
	}
	/* the output seen as [rep0, d0, rep1, d1, ...] with stride 0 on the repeats */
	for (int i = 0; i < r; i++) {
		if (x->dims[i] == 0 || y->dims[i] % x->dims[i])
			return no(why, size, "the output dims are not multiples of the input's");
		vd[2 * i] = y->dims[i] / x->dims[i];
		vd[2 * i + 1] = x->dims[i];
		vs[2 * i] = 0;
		vs[2 * i + 1] = st[i];
	}
	return plan_view(s, 2 * r, vd, vs, 0, why, size);
}
ENTRIES(tile)

static bool build_depth_to_space(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	if (x->rank != 4)
		return no(why, size, "the input is not 4-D");
	int64_t b = attr_i(k, "blocksize", 0);
	const char *mode = attr_s(k, "mode", "DCR");
	bool crd = !strcmp(mode, "CRD");
	if (!crd && strcmp(mode, "DCR"))
		return no(why, size, "mode '%s' is not supported on the GPU", mode);
	int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
	if (b <= 0 || b > (1 << 20) || C % (b * b))
		return no(why, size, "blocksize %lld does not divide the channels", (long long)b);
	int64_t c2 = C / (b * b), od[4] = { N, c2, H * b, W * b }, HW = H * W;
	int64_t vd[6] = { N, c2, H, b, W, b };
	int64_t vs[6] = { C * HW, crd ? b * b * HW : HW, W, crd ? b * HW : b * c2 * HW, 1, crd ? HW : c2 * HW };
	return out_matches(k, 4, od, why, size) && plan_view(s, 6, vd, vs, 0, why, size);
}
ENTRIES(depth_to_space)

static bool build_space_to_depth(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	if (x->rank != 4)
		return no(why, size, "the input is not 4-D");
	int64_t b = attr_i(k, "blocksize", 0);
	int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
	if (b <= 0 || b > (1 << 20) || H % b || W % b)
		return no(why, size, "blocksize %lld does not divide the spatial dims", (long long)b);
	int64_t od[4] = { N, C * b * b, H / b, W / b }, HW = H * W;
	/* the output as [N, b, b, C, H/b, W/b] */
	int64_t vd[6] = { N, b, b, C, H / b, W / b };
	int64_t vs[6] = { C * HW, W, 1, HW, b * W, b };
	return out_matches(k, 4, od, why, size) && plan_view(s, 6, vd, vs, 0, why, size);
}
ENTRIES(space_to_depth)

/* ------------------------------------------------------------------------ */
/* Concat, Split                                                             */
/* ------------------------------------------------------------------------ */

static bool build_concat(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *y = &k->out[0];
	if (k->n_in < 1 || !has_in(k, 0))
		return no(why, size, "has no inputs");
	if (!dtype_ok(y->dtype, &s->esz, why, size))
		return false;
	int r = y->rank, ax = norm_axis(attr_i(k, "axis", 0), r);
	if (r == 0 || ax < 0)
		return no(why, size, "axis is out of range");
	int64_t total = 0;
	for (int i = 0; i < k->n_in; i++) {
		const struct cuda_tensor *t = &k->in[i];
		if (!has_in(k, i) || t->dtype != y->dtype || t->rank != r)
			return no(why, size, "input %d does not match the output", i);
		for (int j = 0; j < r; j++)
			if (j != ax && t->dims[j] != y->dims[j])
				return no(why, size, "input %d does not match the output", i);
		total += t->dims[ax];
	}
	if (total != y->dims[ax])
		return no(why, size, "the inputs do not add up to the output");
	s->axis = ax;
	s->outer = prod(y->dims, ax);
	s->inner = prod(y->dims + ax + 1, r - ax - 1);
	s->jobs = calloc((size_t)k->n_in, sizeof(*s->jobs));
	if (!s->jobs)
		return no(why, size, "out of memory");
	return true;
}
ENTRIES(concat)

static int run_concat(struct cuda_kctx *k)
{
	struct kt_state *s = k->state;
	const struct cuda_tensor *y = &k->out[0];
	int64_t row = y->dims[s->axis] * s->inner * s->esz, off = 0;
	int n = 0;
	for (int i = 0; i < k->n_in; i++) {
		int64_t w = k->in[i].dims[s->axis] * s->inner * s->esz;
		if (w) {
			s->jobs[n].src = k->in[i].data;
			s->jobs[n].dst = (unsigned char *)y->data + off;
			s->jobs[n].width = w;
			s->jobs[n].spitch = w;
			s->jobs[n].dpitch = row;
			n++;
		}
		off += w;
	}
	snprintf(k->impl, sizeof(k->impl), "ogsh copy rows");
	if (!n || !s->outer)
		return 0;
	kt_copy_rows(s->jobs, n, s->outer, k->ctx->stream);
	return cuda_check_launch("kt_copy_rows", k->d);
}

static bool build_split(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	int r = x->rank, ax = norm_axis(attr_i(k, "axis", 0), r);
	if (r == 0 || ax < 0)
		return no(why, size, "axis is out of range");
	int64_t total = 0;
	for (int i = 0; i < k->n_out; i++) {
		const struct cuda_tensor *t = &k->out[i];
		if (t->dtype == 0)
			return no(why, size, "output %d is omitted", i);
		if (t->dtype != x->dtype || t->rank != r)
			return no(why, size, "output %d does not match the input", i);
		for (int j = 0; j < r; j++)
			if (j != ax && t->dims[j] != x->dims[j])
				return no(why, size, "output %d does not match the input", i);
		total += t->dims[ax];
	}
	if (total != x->dims[ax])
		return no(why, size, "the outputs do not add up to the input");
	s->axis = ax;
	s->outer = prod(x->dims, ax);
	s->inner = prod(x->dims + ax + 1, r - ax - 1);
	s->jobs = calloc((size_t)(k->n_out > 0 ? k->n_out : 1), sizeof(*s->jobs));
	if (!s->jobs)
		return no(why, size, "out of memory");
	return true;
}
ENTRIES(split)

static int run_split(struct cuda_kctx *k)
{
	struct kt_state *s = k->state;
	const struct cuda_tensor *x = &k->in[0];
	int64_t row = x->dims[s->axis] * s->inner * s->esz, off = 0;
	int n = 0;
	for (int i = 0; i < k->n_out; i++) {
		int64_t w = k->out[i].dims[s->axis] * s->inner * s->esz;
		if (w && k->out[i].data) {
			s->jobs[n].src = (const unsigned char *)x->data + off;
			s->jobs[n].dst = k->out[i].data;
			s->jobs[n].width = w;
			s->jobs[n].spitch = row;
			s->jobs[n].dpitch = w;
			n++;
		}
		off += w;
	}
	snprintf(k->impl, sizeof(k->impl), "ogsh copy rows");
	if (!n || !s->outer)
		return 0;
	kt_copy_rows(s->jobs, n, s->outer, k->ctx->stream);
	return cuda_check_launch("kt_copy_rows", k->d);
}

/* ------------------------------------------------------------------------ */
/* Gather, GatherElements, GatherND, Scatter(Elements), ScatterND            */
/* ------------------------------------------------------------------------ */

static bool index_ok(const struct cuda_kctx *k, int i, bool allow32, char *why, size_t size)
{
	int dt = k->in[i].dtype;
	if (dt == IR_INT64 || (allow32 && dt == IR_INT32))
		return true;
	return no(why, size, "indices of dtype %s are not supported on the GPU", ir_dtype_name(dt));
}

static bool build_gather(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0], *ix = &k->in[1];
	if (!dtype_ok(x->dtype, &s->esz, why, size) || !index_ok(k, 1, true, why, size))
		return false;
	int r = x->rank, ax = norm_axis(attr_i(k, "axis", 0), r);
	if (r < 1 || ax < 0)
		return no(why, size, "axis is out of range");
	int64_t od[IR_MAX_RANK];
	int n = 0;
	if (r - 1 + ix->rank > IR_MAX_RANK)
		return no(why, size, "the output rank is too large");
	for (int i = 0; i < ax; i++)
		od[n++] = x->dims[i];
	for (int i = 0; i < ix->rank; i++)
		od[n++] = ix->dims[i];
	for (int i = ax + 1; i < r; i++)
		od[n++] = x->dims[i];
	if (!out_matches(k, n, od, why, size))
		return false;
	s->outer = prod(x->dims, ax);
	s->dim = x->dims[ax];
	s->n = cuda_numel(ix);
	s->inner = prod(x->dims + ax + 1, r - ax - 1);
	return true;
}
ENTRIES(gather)

static int run_gather(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh gather");
	if (!cuda_numel(&k->out[0]))
		return 0;
	kt_gather(k->in[0].data, k->in[1].data, k->in[1].dtype == IR_INT64, k->out[0].data, s->outer, s->dim, s->n,
		  s->inner * s->esz, k->ctx->stream);
	return cuda_check_launch("kt_gather", k->d);
}

/* GatherElements and ScatterElements: data rank r, indices of the same rank. */
static bool build_elems(const struct cuda_kctx *k, struct kt_state *s, bool scatter, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0], *ix = &k->in[1];
	if (!dtype_ok(x->dtype, &s->esz, why, size) || !index_ok(k, 1, true, why, size))
		return false;
	int r = x->rank, ax = norm_axis(attr_i(k, "axis", 0), r);
	if (r < 1 || ix->rank != r || ax < 0)
		return no(why, size, "indices must have the rank of data and axis be in range");
	if (r > KT_MAX_RANK)
		return no(why, size, "rank %d is above %d on the GPU", r, KT_MAX_RANK);
	for (int j = 0; j < r; j++)
		if (j != ax && ix->dims[j] > x->dims[j])
			return no(why, size, "indices do not fit in data at axis %d", j);
	if (scatter) {
		const char *red = attr_s(k, "reduction", "none");
		if (k->node->op != IR_OP_Scatter && strcmp(red, "none"))
			return no(why, size, "reduction '%s' is not supported on the GPU", red);
		if (!has_in(k, 2) || k->in[2].dtype != x->dtype || !same_dims(&k->in[2], r, ix->dims))
			return no(why, size, "updates do not match indices and data");
		if (!out_matches(k, r, x->dims, why, size))
			return false;
	} else if (!out_matches(k, r, ix->dims, why, size)) {
		return false;
	}
	memset(&s->el, 0, sizeof(s->el));
	s->el.rank = r;
	s->el.axis = ax;
	for (int j = 0; j < r; j++)
		s->el.dims[j] = ix->dims[j];
	strides_of(r, x->dims, s->el.xstr);
	s->el.axdim = x->dims[ax];
	return true;
}

static bool build_gather_elements(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	return build_elems(k, s, false, why, size);
}
ENTRIES(gather_elements)

static int run_gather_elements(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh gather elements");
	if (!cuda_numel(&k->out[0]))
		return 0;
	kt_gather_elements(&s->el, s->esz, k->in[0].data, k->in[1].data, k->in[1].dtype == IR_INT64, k->out[0].data,
			   k->ctx->stream);
	return cuda_check_launch("kt_gather_elements", k->d);
}

static bool build_scatter_elements(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	return build_elems(k, s, true, why, size);
}
ENTRIES(scatter_elements)

/* Output 0 = input 0 (the data a scatter writes into). */
static int copy_data(struct cuda_kctx *k, int esz)
{
	int64_t bytes = cuda_numel(&k->in[0]) * esz;
	if (!bytes || k->out[0].data == k->in[0].data)
		return 0;
	return cuda_check(cudaMemcpyAsync(k->out[0].data, k->in[0].data, (size_t)bytes, cudaMemcpyDeviceToDevice,
					  k->ctx->stream),
			  "cudaMemcpyAsync", k->d);
}

static int run_scatter_elements(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh scatter elements");
	if (copy_data(k, s->esz))
		return IR_ERR;
	if (!cuda_numel(&k->in[1]))
		return 0;
	kt_scatter_elements(&s->el, s->esz, k->in[2].data, k->in[1].data, k->in[1].dtype == IR_INT64, k->out[0].data,
			    k->ctx->stream);
	return cuda_check_launch("kt_scatter_elements", k->d);
}

static bool build_gather_nd(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0], *ix = &k->in[1];
	if (!dtype_ok(x->dtype, &s->esz, why, size) || !index_ok(k, 1, true, why, size))
		return false;
	int r = x->rank, q = ix->rank;
	int64_t b = attr_i(k, "batch_dims", 0);
	if (q < 1 || r < 1 || b < 0 || b >= q || b >= r)
		return no(why, size, "batch_dims or the ranks are out of range");
	int64_t ml = ix->dims[q - 1];
	if (ml < 1 || b + ml > r || ml > KT_MAX_RANK)
		return no(why, size, "the last dim of indices is out of range");
	int m = (int)ml, bi = (int)b;
	for (int j = 0; j < bi; j++)
		if (ix->dims[j] != x->dims[j])
			return no(why, size, "batch dims of indices and data differ");
	int64_t od[IR_MAX_RANK], st[IR_MAX_RANK];
	int orank = 0;
	for (int j = 0; j < q - 1; j++)
		od[orank++] = ix->dims[j];
	for (int j = bi + m; j < r; j++) {
		if (orank >= IR_MAX_RANK)
			return no(why, size, "the output rank is too large");
		od[orank++] = x->dims[j];
	}
	if (!out_matches(k, orank, od, why, size))
		return false;
	strides_of(r, x->dims, st);
	struct kt_nd *g = &s->nd;
	memset(g, 0, sizeof(*g));
	g->m = m;
	for (int j = 0; j < m; j++) {
		g->dims[j] = x->dims[bi + j];
		g->str[j] = st[bi + j] * s->esz;
	}
	g->nb = prod(x->dims, bi);
	g->per = prod(ix->dims + bi, q - 1 - bi);
	g->bstride = bi ? st[bi - 1] * s->esz : 0;
	g->block_bytes = prod(x->dims + bi + m, r - bi - m) * s->esz;
	return true;
}
ENTRIES(gather_nd)

static int run_gather_nd(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh gather nd");
	if (!cuda_numel(&k->out[0]))
		return 0;
	kt_gather_nd(&s->nd, k->in[0].data, k->in[1].data, k->in[1].dtype == IR_INT64, k->out[0].data, k->ctx->stream);
	return cuda_check_launch("kt_gather_nd", k->d);
}

static bool build_scatter_nd(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0], *ix = &k->in[1], *up = &k->in[2];
	if (!dtype_ok(x->dtype, &s->esz, why, size) || !index_ok(k, 1, false, why, size))
		return false;
	const char *red = attr_s(k, "reduction", "none");
	if (strcmp(red, "none"))
		return no(why, size, "reduction '%s' is not supported on the GPU", red);
	int r = x->rank, q = ix->rank;
	if (q < 1 || r < 1 || !has_in(k, 2) || up->dtype != x->dtype)
		return no(why, size, "data, indices and updates do not match");
	int64_t ml = ix->dims[q - 1];
	if (ml < 1 || ml > r || ml > KT_MAX_RANK)
		return no(why, size, "the last dim of indices is out of range");
	int m = (int)ml;
	bool ok = up->rank == q - 1 + r - m;
	for (int j = 0; ok && j < q - 1; j++)
		ok = up->dims[j] == ix->dims[j];
	for (int j = m; ok && j < r; j++)
		ok = up->dims[q - 1 + j - m] == x->dims[j];
	if (!ok)
		return no(why, size, "updates do not match indices and data");
	if (!out_matches(k, r, x->dims, why, size))
		return false;
	int64_t st[IR_MAX_RANK];
	strides_of(r, x->dims, st);
	struct kt_nd *g = &s->nd;
	memset(g, 0, sizeof(*g));
	g->m = m;
	for (int j = 0; j < m; j++) {
		g->dims[j] = x->dims[j];
		g->str[j] = st[j] * s->esz;
	}
	g->nb = 1;
	g->per = prod(ix->dims, q - 1);
	g->bstride = 0;
	g->block_bytes = prod(x->dims + m, r - m) * s->esz;
	return true;
}
ENTRIES(scatter_nd)

static int run_scatter_nd(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh scatter nd");
	if (copy_data(k, s->esz))
		return IR_ERR;
	if (!cuda_numel(&k->in[2]))
		return 0;
	kt_scatter_nd(&s->nd, k->in[2].data, k->in[1].data, 1, k->out[0].data, k->ctx->stream);
	return cuda_check_launch("kt_scatter_nd", k->d);
}

/* ------------------------------------------------------------------------ */
/* Pad                                                                       */
/* ------------------------------------------------------------------------ */

/* The bytes of v stored as dtype (the CPU kernels' kst: floats round to
 * nearest, integers truncate toward zero and wrap, bool is v != 0). */
static void value_bytes(int dtype, double v, unsigned char *out)
{
	memset(out, 0, 8);
	union {
		float f;
		double d;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
		unsigned char b[8];
	} u;
	memset(&u, 0, sizeof(u));
	switch (dtype) {
	case IR_FLOAT: u.f = (float)v; break;
	case IR_DOUBLE: u.d = v; break;
	case IR_FLOAT16: u.u16 = ir_f32_to_f16((float)v); break;
	case IR_BFLOAT16: u.u16 = ir_f32_to_bf16((float)v); break;
	case IR_BOOL: u.b[0] = v != 0; break;
	default: {
		int64_t i = isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0;
		u.u64 = (uint64_t)i;   /* little-endian: the low bytes are the narrower types */
		break;
	}
	}
	memcpy(out, u.b, 8);
}

static bool build_pad(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	int r = x->rank, np, na = -1;
	if (r > KT_MAX_RANK)
		return no(why, size, "rank %d is above %d on the GPU", r, KT_MAX_RANK);
	int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
	unsigned char fill[8] = { 0 };
	const char *mode = attr_s(k, "mode", "constant");
	if (k->opset < 11) {
		const int64_t *p = attr_ints(k, k->opset < 2 ? "paddings" : "pads", &np);
		if (!p || np > 2 * IR_MAX_RANK)
			return no(why, size, "attribute 'pads' is missing");
		memcpy(pads, p, sizeof(int64_t) * (size_t)np);
		value_bytes(x->dtype, ir_node_attr_float(k->node, "value", 0), fill);
	} else {
		if (!has_in(k, 1))
			return no(why, size, "pads are missing");
		if ((np = host_ints(k, 1, "pads", pads, 2 * IR_MAX_RANK, why, size)) < 0)
			return false;
		if (has_elems(k, 2)) {
			const struct ir_tensor *tv = k->in[2].host;
			if (!tv)
				return no(why, size, "constant_value is not a constant");
			if (tv->dtype != x->dtype || !ir_tensor_data(tv))
				return no(why, size, "constant_value does not have the data's type");
			memcpy(fill, ir_tensor_data(tv), (size_t)s->esz);
		}
		if (has_in(k, 3) && (na = host_ints(k, 3, "axes", axes, IR_MAX_RANK, why, size)) < 0)
			return false;
	}
	if (na < 0) {
		na = r;
		for (int i = 0; i < r; i++)
			axes[i] = i;
	}
	if (np != 2 * na)
		return no(why, size, "pads has %d values for %d axes", np, na);
	int md = !strcmp(mode, "constant") ? 0 : !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "edge") ? 2 :
		 !strcmp(mode, "wrap") ? 3 : -1;
	if (md < 0)
		return no(why, size, "mode '%s' is not supported on the GPU", mode);
	struct kt_pad *p = &s->pad;
	memset(p, 0, sizeof(*p));
	p->rank = r;
	p->mode = md;
	int64_t pe[KT_MAX_RANK] = { 0 }, od[KT_MAX_RANK];
	bool seen[KT_MAX_RANK] = { false };
	for (int i = 0; i < na; i++) {
		int a = norm_axis(axes[i], r);
		if (a < 0 || seen[a])
			return no(why, size, "axes are out of range or repeated");
		seen[a] = true;
		p->pb[a] = pads[i];
		pe[a] = pads[na + i];
	}
	for (int j = 0; j < r; j++) {
		od[j] = x->dims[j] + p->pb[j] + pe[j];
		if (od[j] < 0)
			return no(why, size, "pads do not fit axis %d", j);
		if (md && x->dims[j] == 0 && od[j] > 0)
			return no(why, size, "cannot pad the empty axis %d in mode '%s'", j, mode);
		p->odims[j] = od[j];
		p->idims[j] = x->dims[j];
	}
	if (!out_matches(k, r, od, why, size))
		return false;
	memcpy(&p->fill, fill, 8);
	return true;
}
ENTRIES(pad)

static int run_pad(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh pad");
	if (!cuda_numel(&k->out[0]))
		return 0;
	kt_pad(&s->pad, s->esz, k->in[0].data, k->out[0].data, k->ctx->stream);
	return cuda_check_launch("kt_pad", k->d);
}

/* ------------------------------------------------------------------------ */
/* Resize, Upsample                                                          */
/* ------------------------------------------------------------------------ */

enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC,
       CT_TF_HALF_PIXEL_NN };
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

static int str_index(const char *str, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(str, names[i]))
			return i;
	return -1;
}

/* Constant float input i into v (up to max); the count, or -1 with a reason. */
static int host_floats(const struct cuda_kctx *k, int i, const char *what, double *v, int max, char *why, size_t size)
{
	const struct ir_tensor *t = k->in[i].host;
	if (!t)
		return no(why, size, "%s is not a constant", what), -1;
	if (!ir_dtype_is_float(t->dtype) || t->numel > (uint64_t)max)
		return no(why, size, "%s is not a float tensor of at most %d values", what, max), -1;
	const void *p = ir_tensor_data(t);
	for (uint64_t j = 0; j < t->numel; j++)
		v[j] = ir_elem_to_f64(t->dtype, p, j);
	return (int)t->numel;
}

/*
 * The taps of one axis resized from `in` to `out` with `scale` (as the CPU
 * kernel's rsz_taps for 2 taps): i0/i1 the clamped input positions, w the
 * weight of i1 (linear); nearest keeps its choice in i0.
 */
static bool resize_taps(bool linear, int ctm, int nm, int64_t in, int64_t out, double scale, int64_t *i0, int64_t *i1,
			float *w, char *why, size_t size)
{
	double ow = scale * (double)in, win = (double)in;
	for (int64_t i = 0; i < out; i++) {
		double y = (double)i, x;
		switch (ctm) {
		case CT_ALIGN_CORNERS: x = ow == 1 ? 0 : y * (win - 1) / (ow - 1); break;
		case CT_ASYMMETRIC: x = y / scale; break;
		case CT_TF_HALF_PIXEL_NN: x = (y + 0.5) / scale; break;
		case CT_PYTORCH_HALF_PIXEL: x = ow == 1 ? -0.5 : (y + 0.5) / scale - 0.5; break;
		case CT_HALF_PIXEL_SYM: {
			double adj = (double)out / ow, center = win / 2;
			x = center * (1 - adj) + (y + 0.5) / scale - 0.5;
			break;
		}
		default: x = (y + 0.5) / scale - 0.5; break;
		}
		if (!isfinite(x) || fabs(x) > 4e15)
			return no(why, size, "output position %lld maps to the invalid input coordinate %g", (long long)i, x);
		double fl = floor(x);
		double ratio = x == fl ? 1 : x - fl;
		int64_t first = (int64_t)fl + (x == fl ? -1 : 0);
		int64_t p0 = first < 0 ? 0 : first >= in ? in - 1 : first;
		int64_t p1 = first + 1 < 0 ? 0 : first + 1 >= in ? in - 1 : first + 1;
		if (linear) {
			i0[i] = p0;
			i1[i] = p1;
			w[i] = (float)ratio;
			continue;
		}
		bool hi;
		if (ratio == 1)
			hi = true;
		else if (nm == NM_ROUND_FLOOR)
			hi = ratio > 0.5;
		else if (nm == NM_ROUND_CEIL)
			hi = ratio >= 0.5;
		else if (nm == NM_FLOOR)
			hi = false;
		else if (nm == NM_CEIL)
			hi = true;
		else
			hi = scale < 1;
		i0[i] = i1[i] = hi ? p1 : p0;
		w[i] = 0;
	}
	return true;
}

static bool build_resize(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	static const char *const ctms[] = { "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
					    "align_corners", "asymmetric", "tf_half_pixel_for_nn" };
	static const char *const nms[] = { "round_prefer_floor", "round_prefer_ceil", "floor", "ceil" };
	const struct cuda_tensor *x = &k->in[0], *y = &k->out[0];
	int r = x->rank;
	bool upsample = k->node->op == IR_OP_Upsample;
	bool legacy = upsample || (k->opset > 0 && k->opset < 11);
	const char *m = attr_s(k, "mode", "nearest");
	bool linear = !strcmp(m, "linear") || !strcmp(m, "bilinear");
	if (!linear && strcmp(m, "nearest"))
		return no(why, size, "mode '%s' is not supported on the GPU", m);
	if (linear ? !cuda_is_float(x->dtype) : !esz_of(x->dtype))
		return no(why, size, "dtype %s is not supported on the GPU for mode '%s'", ir_dtype_name(x->dtype), m);
	s->esz = esz_of(x->dtype);
	if (r > KT_MAX_RANK)
		return no(why, size, "rank %d is above %d on the GPU", r, KT_MAX_RANK);
	int ctm = CT_ASYMMETRIC, nm = NM_SIMPLE;
	if (!legacy) {
		const char *c = attr_s(k, "coordinate_transformation_mode", "half_pixel");
		if ((ctm = str_index(c, ctms, 6)) < 0)
			return no(why, size, "coordinate_transformation_mode '%s' is not supported on the GPU", c);
		const char *n = attr_s(k, "nearest_mode", "round_prefer_floor");
		if ((nm = str_index(n, nms, 4)) < 0)
			return no(why, size, "nearest_mode '%s' is not supported on the GPU", n);
		if (attr_i(k, "exclude_outside", 0))
			return no(why, size, "exclude_outside is not supported on the GPU");
		if (linear && attr_i(k, "antialias", 0))
			return no(why, size, "antialias is not supported on the GPU");
	}
	double scales[KT_MAX_RANK];
	int64_t outd[KT_MAX_RANK];
	for (int d = 0; d < r; d++) {
		scales[d] = 1;
		outd[d] = x->dims[d];
	}
	/* the resized axes */
	int axes[KT_MAX_RANK], na = r;
	for (int i = 0; i < r; i++)
		axes[i] = i;
	int nax;
	const int64_t *av = legacy ? NULL : attr_ints(k, "axes", &nax);
	if (av) {
		bool seen[KT_MAX_RANK] = { false };
		if (nax > r)
			return no(why, size, "axes has too many values");
		for (int i = 0; i < nax; i++) {
			axes[i] = norm_axis(av[i], r);
			if (axes[i] < 0 || seen[axes[i]])
				return no(why, size, "axes are out of range or repeated");
			seen[axes[i]] = true;
		}
		na = nax;
	}
	double v[IR_MAX_RANK];
	int n = -1, isc = upsample || legacy ? 1 : 2, isz = legacy ? -1 : 3;
	bool have_sizes = isz > 0 && has_elems(k, isz);
	if (upsample && !has_in(k, 1)) {
		int cnt;
		const struct ir_attr *a = ir_node_attr(k->node, "scales");
		if (!a || a->type != IR_ATTR_FLOATS || a->n > IR_MAX_RANK)
			return no(why, size, "scales are missing");
		cnt = (int)a->n;
		for (int i = 0; i < cnt; i++)
			v[i] = a->floats[i];
		n = cnt;
	} else if (has_elems(k, isc)) {
		if (have_sizes)
			return no(why, size, "scales and sizes cannot both be given");
		if ((n = host_floats(k, isc, "scales", v, IR_MAX_RANK, why, size)) < 0)
			return false;
	}
	if (n >= 0) {
		if (n != na)
			return no(why, size, "scales has %d values for %d axes", n, na);
		for (int i = 0; i < na; i++) {
			if (!(v[i] > 0) || !isfinite(v[i]))
				return no(why, size, "scale %g is not positive", v[i]);
			double od = floor(v[i] * (double)x->dims[axes[i]]);
			if (od > 4e18)
				return no(why, size, "scale %g is too large", v[i]);
			scales[axes[i]] = v[i];
			outd[axes[i]] = (int64_t)od;
		}
	} else if (have_sizes) {
		int64_t sz[IR_MAX_RANK];
		if ((n = host_ints(k, isz, "sizes", sz, IR_MAX_RANK, why, size)) < 0)
			return false;
		if (n != na)
			return no(why, size, "sizes has %d values for %d axes", n, na);
		for (int i = 0; i < na; i++) {
			int d = axes[i];
			if (sz[i] < 0)
				return no(why, size, "size %lld is negative", (long long)sz[i]);
			scales[d] = x->dims[d] ? (double)sz[i] / (double)x->dims[d] : 1;
			outd[d] = sz[i];
		}
		const char *kp = attr_s(k, "keep_aspect_ratio_policy", "stretch");
		if (strcmp(kp, "stretch")) {
			bool larger = !strcmp(kp, "not_smaller");
			if (!larger && strcmp(kp, "not_larger"))
				return no(why, size, "keep_aspect_ratio_policy '%s' is not supported", kp);
			double sc = scales[axes[0]];
			for (int i = 1; i < na; i++)
				if (larger ? scales[axes[i]] > sc : scales[axes[i]] < sc)
					sc = scales[axes[i]];
			for (int i = 0; i < na; i++) {
				int d = axes[i];
				scales[d] = sc;
				outd[d] = (int64_t)floor(sc * (double)x->dims[d] + 0.5);
			}
		}
	} else {
		return no(why, size, "one of scales and sizes is needed");
	}
	if (!out_matches(k, r, outd, why, size))
		return false;
	for (int d = 0; d < r; d++)
		if (x->dims[d] == 0 && outd[d] > 0)
			return no(why, size, "cannot resize the empty axis %d", d);
	struct kt_resize *rs = &s->rs;
	memset(rs, 0, sizeof(*rs));
	rs->rank = r;
	int64_t tab = 0;
	int ntab = 0;
	strides_of(r, x->dims, rs->istr);
	for (int d = 0; d < r; d++) {
		rs->odims[d] = outd[d];
		if (scales[d] == 1.0 && outd[d] == x->dims[d]) {
			rs->tab[d] = -1;
			continue;
		}
		rs->tab[d] = tab;
		tab += outd[d];
		ntab++;
	}
	if (linear && ntab > KT_RESIZE_LINEAR_DIMS)
		return no(why, size, "linear resize of %d axes is not supported on the GPU (at most %d)", ntab,
			  KT_RESIZE_LINEAR_DIMS);
	s->linear = linear;
	s->tab_len = tab;
	s->kind = x->dtype == IR_FLOAT16 ? KT_F16 : x->dtype == IR_BFLOAT16 ? KT_BF16 : KT_F32;
	if (!tab || !cuda_numel(y))
		return true;
	s->h_i0 = malloc(sizeof(int64_t) * (size_t)tab);
	s->h_i1 = malloc(sizeof(int64_t) * (size_t)tab);
	s->h_w = malloc(sizeof(float) * (size_t)tab);
	if (!s->h_i0 || !s->h_i1 || !s->h_w)
		return no(why, size, "out of memory");
	for (int d = 0; d < r; d++) {
		if (rs->tab[d] < 0)
			continue;
		int64_t o = rs->tab[d];
		if (!resize_taps(linear, ctm, nm, x->dims[d], outd[d], scales[d], s->h_i0 + o, s->h_i1 + o, s->h_w + o,
				 why, size))
			return false;
	}
	return true;
}

static bool supports_resize(const struct cuda_kctx *k, char *why, size_t size)
{
	return supports_with(k, why, size, build_resize);
}

static int prepare_resize(struct cuda_kctx *k)
{
	int rc = prepare_with(k, build_resize);
	if (rc)
		return rc;
	struct kt_state *s = k->state;
	if (s->h_i0) {
		size_t n = (size_t)s->tab_len, bytes = n * (2 * sizeof(int64_t) + sizeof(float));
		int err = cuda_check(cudaMalloc(&s->dev, bytes), "cudaMalloc", k->d);
		unsigned char *p = s->dev;
		if (!err)
			err = cuda_check(cudaMemcpy(p, s->h_i0, n * sizeof(int64_t), cudaMemcpyHostToDevice), "cudaMemcpy",
					 k->d);
		if (!err)
			err = cuda_check(cudaMemcpy(p + n * sizeof(int64_t), s->h_i1, n * sizeof(int64_t),
						    cudaMemcpyHostToDevice),
					 "cudaMemcpy", k->d);
		if (!err)
			err = cuda_check(cudaMemcpy(p + 2 * n * sizeof(int64_t), s->h_w, n * sizeof(float),
						    cudaMemcpyHostToDevice),
					 "cudaMemcpy", k->d);
		if (err) {
			release_state(s);
			k->state = NULL;
			return err;
		}
		s->rs.i0 = (const int64_t *)p;
		s->rs.i1 = (const int64_t *)(p + n * sizeof(int64_t));
		s->rs.w = (const float *)(p + 2 * n * sizeof(int64_t));
	}
	state_free_host(s);
	return 0;
}

static int run_resize(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	int64_t n = cuda_numel(&k->out[0]);
	if (!n)
		return 0;
	if (!s->rs.i0) {
		/* every axis kept as is */
		snprintf(k->impl, sizeof(k->impl), "cudaMemcpyAsync");
		if (k->out[0].data == k->in[0].data)
			return 0;
		return cuda_check(cudaMemcpyAsync(k->out[0].data, k->in[0].data, (size_t)(n * s->esz),
						  cudaMemcpyDeviceToDevice, k->ctx->stream),
				  "cudaMemcpyAsync", k->d);
	}
	if (s->linear) {
		snprintf(k->impl, sizeof(k->impl), "ogsh resize linear");
		kt_resize_linear(&s->rs, (enum kt_kind)s->kind, k->in[0].data, k->out[0].data, k->ctx->stream);
		return cuda_check_launch("kt_resize_linear", k->d);
	}
	snprintf(k->impl, sizeof(k->impl), "ogsh resize nearest");
	kt_resize_nearest(&s->rs, s->esz, k->in[0].data, k->out[0].data, k->ctx->stream);
	return cuda_check_launch("kt_resize_nearest", k->d);
}

/* ------------------------------------------------------------------------ */
/* ConstantOfShape, Range, Trilu, CumSum, OneHot                             */
/* ------------------------------------------------------------------------ */

static bool build_constant_of_shape(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *y = &k->out[0];
	const struct ir_attr *a = ir_node_attr(k->node, "value");
	const struct ir_tensor *v = a && a->type == IR_ATTR_TENSOR ? a->t : NULL;
	int dt = v ? v->dtype : IR_FLOAT;
	if (!dtype_ok(dt, &s->esz, why, size))
		return false;
	if (y->dtype != dt)
		return no(why, size, "the output type differs from the value's");
	if (v && (v->numel != 1 || !ir_tensor_data(v)))
		return no(why, size, "value must have one element");
	memset(s->value, 0, sizeof(s->value));
	if (v)
		memcpy(s->value, ir_tensor_data(v), (size_t)s->esz);
	s->zero_value = true;
	for (int i = 0; i < s->esz; i++)
		if (s->value[i])
			s->zero_value = false;
	return true;
}
ENTRIES(constant_of_shape)

static int run_constant_of_shape(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	int64_t n = cuda_numel(&k->out[0]);
	if (s->zero_value) {
		snprintf(k->impl, sizeof(k->impl), "cudaMemsetAsync");
		if (!n)
			return 0;
		return cuda_check(cudaMemsetAsync(k->out[0].data, 0, (size_t)(n * s->esz), k->ctx->stream),
				  "cudaMemsetAsync", k->d);
	}
	snprintf(k->impl, sizeof(k->impl), "ogsh fill");
	if (!n)
		return 0;
	kt_fill(k->out[0].data, n, s->esz, s->value, k->ctx->stream);
	return cuda_check_launch("kt_fill", k->d);
}

/* The computing kind of dtype, or -1. */
static int kind_of(int dtype, bool ints)
{
	switch (dtype) {
	case IR_FLOAT: return KT_F32;
	case IR_FLOAT16: return KT_F16;
	case IR_BFLOAT16: return KT_BF16;
	case IR_INT32: return ints ? KT_I32 : -1;
	case IR_INT64: return ints ? KT_I64 : -1;
	default: return -1;
	}
}

static bool build_range(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *y = &k->out[0];
	if ((s->kind = kind_of(y->dtype, true)) < 0)
		return no(why, size, "dtype %s is not supported on the GPU", ir_dtype_name(y->dtype));
	for (int i = 0; i < 3; i++)
		if (!has_in(k, i) || k->in[i].dtype != y->dtype || cuda_numel(&k->in[i]) != 1)
			return no(why, size, "start, limit and delta must be scalars of the output type");
	if (y->rank != 1)
		return no(why, size, "the output is not 1-D");
	return true;
}
ENTRIES(range)

static int run_range(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh range");
	int64_t n = cuda_numel(&k->out[0]);
	if (!n)
		return 0;
	kt_range((enum kt_kind)s->kind, k->in[0].data, k->in[2].data, k->out[0].data, n, k->ctx->stream);
	return cuda_check_launch("kt_range", k->d);
}

static bool build_trilu(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if (!dtype_ok(x->dtype, &s->esz, why, size))
		return false;
	if (x->rank < 2)
		return no(why, size, "the input has rank below 2");
	s->kk = 0;
	if (has_in(k, 1)) {
		int64_t v[1];
		int n = host_ints(k, 1, "k", v, 1, why, size);
		if (n < 0)
			return false;
		if (n != 1)
			return no(why, size, "k is not a scalar");
		s->kk = v[0];
	}
	s->flag1 = attr_i(k, "upper", 1) != 0;
	s->dim = x->dims[x->rank - 2];
	s->inner = x->dims[x->rank - 1];
	s->outer = prod(x->dims, x->rank - 2);
	return out_matches(k, x->rank, x->dims, why, size);
}
ENTRIES(trilu)

static int run_trilu(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh trilu");
	if (!cuda_numel(&k->out[0]))
		return 0;
	kt_trilu(k->in[0].data, k->out[0].data, s->esz, s->outer, s->dim, s->inner, s->kk, s->flag1, k->ctx->stream);
	return cuda_check_launch("kt_trilu", k->d);
}

static bool build_cumsum(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *x = &k->in[0];
	if ((s->kind = kind_of(x->dtype, true)) < 0)
		return no(why, size, "dtype %s is not supported on the GPU", ir_dtype_name(x->dtype));
	if (x->rank < 1 || !has_in(k, 1))
		return no(why, size, "the input has rank 0 or axis is missing");
	int64_t v[1];
	int n = host_ints(k, 1, "axis", v, 1, why, size);
	if (n < 0)
		return false;
	int ax = n == 1 ? norm_axis(v[0], x->rank) : -1;
	if (ax < 0)
		return no(why, size, "axis is not one value in range");
	s->outer = prod(x->dims, ax);
	s->dim = x->dims[ax];
	s->inner = prod(x->dims + ax + 1, x->rank - ax - 1);
	s->flag1 = attr_i(k, "exclusive", 0) != 0;
	s->flag2 = attr_i(k, "reverse", 0) != 0;
	return out_matches(k, x->rank, x->dims, why, size);
}
ENTRIES(cumsum)

static int run_cumsum(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), s->inner == 1 && s->dim >= 64 ? "ogsh cumsum warp scan" : "ogsh cumsum");
	if (!cuda_numel(&k->out[0]))
		return 0;
	kt_cumsum((enum kt_kind)s->kind, k->in[0].data, k->out[0].data, s->outer, s->dim, s->inner, s->flag1, s->flag2,
		  k->ctx->stream);
	return cuda_check_launch("kt_cumsum", k->d);
}

static bool build_onehot(const struct cuda_kctx *k, struct kt_state *s, char *why, size_t size)
{
	const struct cuda_tensor *ix = &k->in[0], *y = &k->out[0];
	int idt = ix->dtype;
	s->kind = idt == IR_INT64 ? KT_I64 : idt == IR_INT32 ? KT_I32 : idt == IR_FLOAT ? KT_F32 : -1;
	if (s->kind < 0)
		return no(why, size, "indices of dtype %s are not supported on the GPU", ir_dtype_name(idt));
	if (!has_in(k, 1) || !has_in(k, 2) || cuda_numel(&k->in[2]) != 2)
		return no(why, size, "depth or values are missing");
	if (!dtype_ok(k->in[2].dtype, &s->esz, why, size))
		return false;
	const struct ir_tensor *td = k->in[1].host;
	if (!td)
		return no(why, size, "depth is not a constant");
	if (td->numel != 1 || td->dtype == IR_STRING || !ir_tensor_data(td))
		return no(why, size, "depth is not a number");
	double dd = ir_elem_to_f64(td->dtype, ir_tensor_data(td), 0);
	if (!(dd >= 1) || dd > 9e15)
		return no(why, size, "depth %g is below 1", dd);
	int64_t depth = (int64_t)dd;
	int r = ix->rank + 1;
	if (r > IR_MAX_RANK)
		return no(why, size, "the output rank is too large");
	int ax = norm_axis(attr_i(k, "axis", -1), r);
	if (ax < 0)
		return no(why, size, "axis is out of range");
	int64_t od[IR_MAX_RANK];
	for (int i = 0, j = 0; i < r; i++)
		od[i] = i == ax ? depth : ix->dims[j++];
	if (y->dtype != k->in[2].dtype)
		return no(why, size, "the output type differs from the values'");
	s->dim = depth;
	s->outer = prod(ix->dims, ax);
	s->inner = prod(ix->dims + ax, ix->rank - ax);
	return out_matches(k, r, od, why, size);
}
ENTRIES(onehot)

static int run_onehot(struct cuda_kctx *k)
{
	const struct kt_state *s = k->state;
	snprintf(k->impl, sizeof(k->impl), "ogsh onehot");
	if (!cuda_numel(&k->out[0]))
		return 0;
	kt_onehot(k->in[0].data, (enum kt_kind)s->kind, k->in[2].data, k->out[0].data, s->esz, s->outer, s->dim,
		  s->inner, k->ctx->stream);
	return cuda_check_launch("kt_onehot", k->d);
}

const struct cuda_kernel cuda_k_tensor[] = {
	{ IR_OP_Identity, supports_copy, prepare_copy, run_copy, release_state },
	{ IR_OP_Reshape, supports_copy, prepare_copy, run_copy, release_state },
	{ IR_OP_Flatten, supports_copy, prepare_copy, run_copy, release_state },
	{ IR_OP_Squeeze, supports_copy, prepare_copy, run_copy, release_state },
	{ IR_OP_Unsqueeze, supports_copy, prepare_copy, run_copy, release_state },
	{ IR_OP_Transpose, supports_transpose, prepare_transpose, run_view_op, release_state },
	{ IR_OP_Slice, supports_slice, prepare_slice, run_view_op, release_state },
	{ IR_OP_Expand, supports_expand, prepare_expand, run_view_op, release_state },
	{ IR_OP_Tile, supports_tile, prepare_tile, run_view_op, release_state },
	{ IR_OP_DepthToSpace, supports_depth_to_space, prepare_depth_to_space, run_view_op, release_state },
	{ IR_OP_SpaceToDepth, supports_space_to_depth, prepare_space_to_depth, run_view_op, release_state },
	{ IR_OP_Concat, supports_concat, prepare_concat, run_concat, release_state },
	{ IR_OP_Split, supports_split, prepare_split, run_split, release_state },
	{ IR_OP_Gather, supports_gather, prepare_gather, run_gather, release_state },
	{ IR_OP_GatherElements, supports_gather_elements, prepare_gather_elements, run_gather_elements, release_state },
	{ IR_OP_GatherND, supports_gather_nd, prepare_gather_nd, run_gather_nd, release_state },
	{ IR_OP_Scatter, supports_scatter_elements, prepare_scatter_elements, run_scatter_elements, release_state },
	{ IR_OP_ScatterElements, supports_scatter_elements, prepare_scatter_elements, run_scatter_elements,
	  release_state },
	{ IR_OP_ScatterND, supports_scatter_nd, prepare_scatter_nd, run_scatter_nd, release_state },
	{ IR_OP_Pad, supports_pad, prepare_pad, run_pad, release_state },
	{ IR_OP_Resize, supports_resize, prepare_resize, run_resize, release_state },
	{ IR_OP_Upsample, supports_resize, prepare_resize, run_resize, release_state },
	{ IR_OP_ConstantOfShape, supports_constant_of_shape, prepare_constant_of_shape, run_constant_of_shape,
	  release_state },
	{ IR_OP_Range, supports_range, prepare_range, run_range, release_state },
	{ IR_OP_Trilu, supports_trilu, prepare_trilu, run_trilu, release_state },
	{ IR_OP_CumSum, supports_cumsum, prepare_cumsum, run_cumsum, release_state },
	{ IR_OP_OneHot, supports_onehot, prepare_onehot, run_onehot, release_state },
	{ .op = -1 },
};
