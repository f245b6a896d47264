/*
 * k_ml.c - CPU kernels: ops of the ai.onnx.ml domain (LabelEncoder,
 * Binarizer, ArrayFeatureExtractor, TreeEnsemble, Normalizer, Scaler,
 * OneHotEncoder, Imputer, LinearRegressor, LinearClassifier).
 *
 * k->opset is the ai.onnx.ml version here; kernels take the newest form of
 * each op and read the older attribute forms when they are present.
 */
#include "cpu.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

static int bytes_cmp(const struct ir_bytes *a, const struct ir_bytes *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->data, b->data, n) : 0;
	if (c)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

/* Reads X as [N, C] (a 1-D X is one row); an error for other ranks. */
static int rows_cols(struct cpu_kctx *k, const struct ir_tensor *x, int64_t *n, int64_t *c)
{
	if (x->rank == 1) {
		*n = 1;
		*c = x->dims[0];
	} else if (x->rank == 2) {
		*n = x->dims[0];
		*c = x->dims[1];
	} else {
		return kerr(k, "input must be [N, C] or [C], not %s", kshape(x));
	}
	return 0;
}

static bool is_num(int dtype)
{
	return dtype != IR_STRING && (ir_dtype_is_float(dtype) || ir_dtype_is_int(dtype) || dtype == IR_BOOL);
}

/* ------------------------------------------------------------------------ */
/* Score post-transforms (TreeEnsemble, LinearRegressor, LinearClassifier)    */
/* ------------------------------------------------------------------------ */

enum { PT_NONE, PT_SOFTMAX, PT_LOGISTIC, PT_SOFTMAX_ZERO, PT_PROBIT };

static int post_transform_of(struct cpu_kctx *k, const char *s)
{
	static const char *names[] = { "NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT" };
	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i]))
			return i;
	return kerr(k, "post_transform '%s' is not one of NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT", s);
}

/* The inverse error function, by Winitzki's approximation (a = 0.147),
 * the one ONNX Runtime's PROBIT uses. */
static double erf_inv_approx(double x)
{
	double sgn = x < 0 ? -1.0 : 1.0;
	double t = (1.0 - x) * (1.0 + x);
	if (t < 0 || isnan(t))
		return NAN;   /* |x| > 1 */
	if (t == 0)
		return sgn * INFINITY;   /* x = +-1 (onnxruntime gives the same) */
	double l = log(t);
	double a = 2.0 / (M_PI * 0.147) + 0.5 * l;
	double b = l / 0.147;
	return sgn * sqrt(-a + sqrt(a * a - b));
}

/* Applies post-transform pt to n scores in place. */
static void post_transform(int pt, double *v, int64_t n)
{
	switch (pt) {
	case PT_SOFTMAX: {
		double mx = -INFINITY, s = 0;
		for (int64_t j = 0; j < n; j++)
			mx = v[j] > mx ? v[j] : mx;
		for (int64_t j = 0; j < n; j++)
			s += (v[j] = exp(v[j] - mx));
		for (int64_t j = 0; j < n; j++)
			v[j] /= s;
		break;
	}
	case PT_LOGISTIC:
		for (int64_t j = 0; j < n; j++)
			v[j] = 1.0 / (1.0 + exp(-v[j]));
		break;
	case PT_SOFTMAX_ZERO: {
		/* softmax where exact zeros stay (near) zero; all zeros give 0.5 */
		double mx = -INFINITY, s = 0;
		for (int64_t j = 0; j < n; j++)
			mx = v[j] > mx ? v[j] : mx;
		double e = exp(-mx);
		for (int64_t j = 0; j < n; j++) {
			v[j] = (v[j] > 1e-7 || v[j] < -1e-7) ? exp(v[j] - mx) : v[j] * e;
			s += v[j];
		}
		for (int64_t j = 0; j < n; j++)
			v[j] = s == 0 ? 0.5 : v[j] / s;
		break;
	}
	case PT_PROBIT:
		for (int64_t j = 0; j < n; j++)
			v[j] = M_SQRT2 * erf_inv_approx(2 * v[j] - 1);
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------------------ */
/* LabelEncoder                                                              */
/* ------------------------------------------------------------------------ */

/* A key or looked-up value: an integer, a float or a string. */
enum { LE_INT, LE_FLT, LE_STR };

struct le_key {
	int64_t i;
	double f;
	const struct ir_bytes *s;
	int kind;
	int64_t idx;   /* position in the keys */
};

static int le_cmp(const void *pa, const void *pb)
{
	const struct le_key *a = pa, *b = pb;
	switch (a->kind) {
	case LE_STR:
		return bytes_cmp(a->s, b->s);
	case LE_INT:
		return (a->i > b->i) - (a->i < b->i);
	default:
		/* NaN equals NaN and sorts last */
		if (isnan(a->f) || isnan(b->f))
			return isnan(a->f) - isnan(b->f);
		return (a->f > b->f) - (a->f < b->f);
	}
}

static int le_cmp_idx(const void *pa, const void *pb)
{
	int c = le_cmp(pa, pb);
	if (c)
		return c;
	const struct le_key *a = pa, *b = pb;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

static int le_kind(int dtype)
{
	if (dtype == IR_STRING)
		return LE_STR;
	if (ir_dtype_is_float(dtype))
		return LE_FLT;
	return LE_INT;
}

/* Element i of a tensor as a key. */
static void le_from_tensor(const struct ir_tensor *t, uint64_t i, struct le_key *key)
{
	memset(key, 0, sizeof(*key));
	key->kind = le_kind(t->dtype);
	if (key->kind == LE_STR)
		key->s = &t->strings[i];
	else if (key->kind == LE_FLT)
		key->f = kld(t->dtype, kdata(t), i);
	else
		key->i = kldi(t->dtype, kdata(t), i);
}

/*
 * Maps each element of X through keys -> values (the first of repeated
 * keys wins), writing the default where a key is missing. Keys and values
 * come from keys_{strings,int64s,floats,tensor} and values_*; the output
 * type is the values' type. Opset 1's classes_strings maps strings to
 * their index and back.
 */
static int k_label_encoder(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!is_num(x->dtype) && x->dtype != IR_STRING)
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int xkind = le_kind(x->dtype);
	const struct ir_attr *a;

	/* the keys */
	struct le_key *keys = NULL;
	size_t nk = 0;
	/* the values: numbers in vbuf (vdtype), or strings */
	int vdtype = 0;
	const void *vnum = NULL;
	const struct ir_bytes *vstr = NULL;
	size_t nv = 0;
	/* the default, one element */
	int64_t di = -1;
	float dfl = -0.0f;
	struct ir_bytes dstr = { 7, (char *)"_Unused" };
	const void *dnum = NULL;
	int64_t *idx_vals = NULL;   /* opset 1, string -> int64: the class indexes */
	int rc = 0;

	const struct ir_attr *ka = NULL, *va = NULL;
	const struct ir_attr *cls = kattr(k, "classes_strings");
	if (cls && cls->type == IR_ATTR_STRINGS && !kattr(k, "keys_strings") && !kattr(k, "keys_int64s") &&
	    !kattr(k, "keys_floats") && !kattr(k, "keys_tensor")) {
		/* opset 1: strings -> index, or int64 index -> string */
		if (xkind == LE_STR) {
			ka = cls;
			if (!(idx_vals = kalloc_arr(k, cls->n, sizeof(*idx_vals))))
				return IR_ENOMEM;
			for (size_t j = 0; j < cls->n; j++)
				idx_vals[j] = (int64_t)j;
			vdtype = IR_INT64;
			vnum = idx_vals;
			nv = cls->n;
		} else {
			/* index -> string: the keys are 0..n-1 */
			if (!(idx_vals = kalloc_arr(k, cls->n, sizeof(*idx_vals))))
				return IR_ENOMEM;
			for (size_t j = 0; j < cls->n; j++)
				idx_vals[j] = (int64_t)j;
			if (!(keys = kalloc_arr(k, cls->n, sizeof(*keys)))) {
				free(idx_vals);
				return IR_ENOMEM;
			}
			nk = cls->n;
			for (size_t j = 0; j < nk; j++) {
				memset(&keys[j], 0, sizeof(keys[j]));
				keys[j].kind = LE_INT;
				keys[j].i = (int64_t)j;
				keys[j].idx = (int64_t)j;
			}
			vdtype = IR_STRING;
			vstr = cls->strings;
			nv = cls->n;
		}
	} else {
		if ((a = kattr(k, "keys_tensor")) && a->type == IR_ATTR_TENSOR)
			ka = a;
		else if ((a = kattr(k, "keys_strings")) && a->type == IR_ATTR_STRINGS)
			ka = a;
		else if ((a = kattr(k, "keys_int64s")) && a->type == IR_ATTR_INTS)
			ka = a;
		else if ((a = kattr(k, "keys_floats")) && a->type == IR_ATTR_FLOATS)
			ka = a;
		else
			return kerr(k, "has no keys attribute");
		if ((a = kattr(k, "values_tensor")) && a->type == IR_ATTR_TENSOR)
			va = a;
		else if ((a = kattr(k, "values_strings")) && a->type == IR_ATTR_STRINGS)
			va = a;
		else if ((a = kattr(k, "values_int64s")) && a->type == IR_ATTR_INTS)
			va = a;
		else if ((a = kattr(k, "values_floats")) && a->type == IR_ATTR_FLOATS)
			va = a;
		else
			return kerr(k, "has no values attribute");
		switch (va->type) {
		case IR_ATTR_TENSOR:
			vdtype = va->t->dtype;
			nv = va->t->numel;
			if (vdtype == IR_STRING)
				vstr = va->t->strings;
			else if (!kelem_bytes(vdtype))
				return kerr(k, "values_tensor of type %s is not supported", ir_dtype_name(vdtype));
			else
				vnum = kdata(va->t);
			break;
		case IR_ATTR_STRINGS: vdtype = IR_STRING; vstr = va->strings; nv = va->n; break;
		case IR_ATTR_INTS: vdtype = IR_INT64; vnum = va->ints; nv = va->n; break;
		default: vdtype = IR_FLOAT; vnum = va->floats; nv = va->n; break;
		}
	}
	if (!keys && ka) {
		nk = ka->type == IR_ATTR_TENSOR ? ka->t->numel : ka->n;
		if (!(keys = kalloc_arr(k, nk, sizeof(*keys)))) {
			free(idx_vals);
			return IR_ENOMEM;
		}
		for (size_t j = 0; j < nk; j++) {
			struct le_key *e = &keys[j];
			if (ka->type == IR_ATTR_TENSOR) {
				le_from_tensor(ka->t, j, e);
			} else {
				memset(e, 0, sizeof(*e));
				if (ka->type == IR_ATTR_STRINGS) {
					e->kind = LE_STR;
					e->s = &ka->strings[j];
				} else if (ka->type == IR_ATTR_INTS) {
					e->kind = LE_INT;
					e->i = ka->ints[j];
				} else {
					e->kind = LE_FLT;
					e->f = ka->floats[j];
				}
			}
			e->idx = (int64_t)j;
		}
	}
	if (nk != nv) {
		rc = kerr(k, "has %zu keys and %zu values", nk, nv);
		goto out;
	}
	if (nk && keys[0].kind != xkind) {
		rc = kerr(k, "input of type %s does not match the keys' type", ir_dtype_name(x->dtype));
		goto out;
	}
	qsort(keys, nk, sizeof(*keys), le_cmp_idx);

	/* the default */
	int esz = vdtype == IR_STRING ? 0 : kelem_bytes(vdtype);
	if ((a = kattr(k, "default_tensor")) && a->type == IR_ATTR_TENSOR) {
		if (a->t->dtype != vdtype || a->t->numel < 1) {
			rc = kerr(k, "default_tensor must hold one %s", ir_dtype_name(vdtype));
			goto out;
		}
		if (vdtype == IR_STRING)
			dstr = a->t->strings[0];
		else
			dnum = kdata(a->t);
	} else if (vdtype == IR_STRING) {
		if ((a = kattr(k, "default_string")) && a->type == IR_ATTR_STRING)
			dstr = a->s;
	} else if (vdtype == IR_INT64) {
		di = kattr_i(k, "default_int64", -1);
		dnum = &di;
	} else if (vdtype == IR_FLOAT) {
		dfl = kattr_f(k, "default_float", -0.0f);
		dnum = &dfl;
	} else {
		rc = kerr(k, "values of type %s need a default_tensor", ir_dtype_name(vdtype));
		goto out;
	}

	struct ir_tensor *o = kout(k, 0, vdtype, x->rank, x->dims);
	if (!o) {
		rc = IR_ERR;
		goto out;
	}
	unsigned char *y = kwdata(o);
	for (uint64_t i = 0; i < x->numel; i++) {
		struct le_key key;
		le_from_tensor(x, i, &key);
		const struct le_key *hit = nk ? bsearch(&key, keys, nk, sizeof(*keys), le_cmp) : NULL;
		/* the first of equal keys (they sort by position) */
		while (hit && hit > keys && le_cmp(hit - 1, &key) == 0)
			hit--;
		if (vdtype == IR_STRING) {
			const struct ir_bytes *v = hit ? &vstr[hit->idx] : &dstr;
			if (!kstr_set(&o->strings[i], v->data, v->len)) {
				rc = kenomem(k);
				goto out;
			}
		} else {
			const unsigned char *src = hit ? (const unsigned char *)vnum + (size_t)hit->idx * (size_t)esz
						       : (const unsigned char *)dnum;
			memcpy(y + i * (size_t)esz, src, (size_t)esz);
		}
	}
out:
	free(keys);
	free(idx_vals);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Binarizer, ArrayFeatureExtractor                                           */
/* ------------------------------------------------------------------------ */

/* Y = X > threshold ? 1 : 0, in X's type. */
static int k_binarizer(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!is_num(x->dtype))
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	double th = kattr_f(k, "threshold", 0.0f);
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	const void *p = kdata(x);
	for (uint64_t i = 0; i < x->numel; i++)
		kst(x->dtype, y, i, kld(x->dtype, p, i) > th ? 1.0 : 0.0);
	return 0;
}

/* Picks elements of X's last axis by the indices in Y; a 1-D X gives [1, n]. */
static int k_array_feature_extractor(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0), *ix = kin_req(k, 1);
	if (!x || !ix)
		return IR_ERR;
	if (!ir_dtype_is_int(ix->dtype))
		return kerr(k, "indices must be integers, not %s", ir_dtype_name(ix->dtype));
	if (x->rank < 1)
		return kerr(k, "input must have at least one axis");
	int esz = x->dtype == IR_STRING ? 0 : kelem_bytes(x->dtype);
	if (x->dtype != IR_STRING && !esz)
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int64_t last = x->dims[x->rank - 1];
	uint64_t nidx = ix->numel;
	if (nidx == 0)
		return kerr(k, "needs at least one index");
	for (uint64_t j = 0; j < nidx; j++) {
		int64_t v = kldi(ix->dtype, kdata(ix), j);
		if (v < 0 || v >= last)
			return kerr(k, "index %" PRId64 " is out of range for a last axis of %" PRId64, v, last);
	}
	int64_t dims[IR_MAX_RANK];
	int rank;
	if (x->rank == 1) {
		rank = 2;
		dims[0] = 1;
	} else {
		rank = x->rank;
		for (int j = 0; j < x->rank - 1; j++)
			dims[j] = x->dims[j];
	}
	dims[rank - 1] = (int64_t)nidx;
	struct ir_tensor *o = kout(k, 0, x->dtype, rank, dims);
	if (!o)
		return IR_ERR;
	uint64_t outer = last ? x->numel / (uint64_t)last : 0;
	unsigned char *y = kwdata(o);
	const unsigned char *src = kdata(x);
	for (uint64_t r = 0; r < outer; r++)
		for (uint64_t j = 0; j < nidx; j++) {
			uint64_t s = r * (uint64_t)last + (uint64_t)kldi(ix->dtype, kdata(ix), j);
			uint64_t d = r * nidx + j;
			if (x->dtype == IR_STRING) {
				if (!kstr_set(&o->strings[d], x->strings[s].data, x->strings[s].len))
					return kenomem(k);
			} else {
				memcpy(y + d * (size_t)esz, src + s * (size_t)esz, (size_t)esz);
			}
		}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* TreeEnsemble (ai.onnx.ml 5)                                               */
/* ------------------------------------------------------------------------ */

enum { TM_LEQ, TM_LT, TM_GTE, TM_GT, TM_EQ, TM_NEQ, TM_MEMBER };

struct tree_node {
	int mode;
	int64_t feature;
	double split;
	int64_t next[2];     /* [0] false, [1] true: a node or a leaf index */
	bool leaf[2];
	bool missing_true;   /* NaN takes the true branch */
	const double *set;   /* BRANCH_MEMBER: sorted members */
	size_t nset;
};

static int dbl_cmp(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	return (a > b) - (a < b);
}

/* An ints attribute that must have n values (n < 0: any count, set). */
static const int64_t *tree_ints(struct cpu_kctx *k, const char *name, int64_t *n, bool required, int *rc)
{
	int cnt;
	const int64_t *v = kattr_ints(k, name, &cnt);
	if (!v) {
		if (required && *n != 0)
			*rc = kerr(k, "needs the %s attribute", name);
		return NULL;
	}
	if (*n >= 0 && cnt != *n) {
		*rc = kerr(k, "%s has %d values, not %" PRId64, name, cnt, *n);
		return NULL;
	}
	*n = cnt;
	return v;
}

static const struct ir_tensor *tree_tensor(struct cpu_kctx *k, const char *name, bool required, int *rc)
{
	const struct ir_attr *a = kattr(k, name);
	if (!a || a->type != IR_ATTR_TENSOR) {
		if (required)
			*rc = kerr(k, "needs the %s attribute", name);
		return NULL;
	}
	if (!is_num(a->t->dtype)) {
		*rc = kerr(k, "%s of type %s is not supported", name, ir_dtype_name(a->t->dtype));
		return NULL;
	}
	return a->t;
}

/* The largest finite value of a float type (MIN/MAX aggregation starts there). */
static double dtype_max(int dtype)
{
	switch (dtype) {
	case IR_FLOAT16: return 65504.0;
	case IR_BFLOAT16: return 3.3895313892515355e38;
	case IR_FLOAT: return FLT_MAX;
	default: return DBL_MAX;
	}
}

static int k_tree_ensemble(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!ir_dtype_is_float(x->dtype) || !kelem_bytes(x->dtype))
		return kerr(k, "input must be float, double or float16, not %s", ir_dtype_name(x->dtype));
	int64_t N = 0, F = 0;
	if (rows_cols(k, x, &N, &F))
		return IR_ERR;
	int rc = 0;
	int64_t nn = -1, nl = -1, nr = -1;
	const int64_t *feat = tree_ints(k, "nodes_featureids", &nn, true, &rc);
	if (rc)
		return rc;
	const int64_t *tid = tree_ints(k, "nodes_truenodeids", &nn, true, &rc);
	const int64_t *fid = rc ? NULL : tree_ints(k, "nodes_falsenodeids", &nn, true, &rc);
	const int64_t *tlf = rc ? NULL : tree_ints(k, "nodes_trueleafs", &nn, true, &rc);
	const int64_t *flf = rc ? NULL : tree_ints(k, "nodes_falseleafs", &nn, true, &rc);
	int64_t nmiss = nn;
	const int64_t *miss = rc ? NULL : tree_ints(k, "nodes_missing_value_tracks_true", &nmiss, false, &rc);
	const int64_t *ltg = rc ? NULL : tree_ints(k, "leaf_targetids", &nl, true, &rc);
	const int64_t *roots = rc ? NULL : tree_ints(k, "tree_roots", &nr, true, &rc);
	if (rc)
		return rc;
	const struct ir_tensor *splits = tree_tensor(k, "nodes_splits", true, &rc);
	const struct ir_tensor *modes = rc ? NULL : tree_tensor(k, "nodes_modes", true, &rc);
	const struct ir_tensor *lw = rc ? NULL : tree_tensor(k, "leaf_weights", true, &rc);
	const struct ir_tensor *mv = rc ? NULL : tree_tensor(k, "membership_values", false, &rc);
	if (rc)
		return rc;
	if ((int64_t)splits->numel != nn || (int64_t)modes->numel != nn)
		return kerr(k, "nodes_splits and nodes_modes must have %" PRId64 " values like nodes_featureids", nn);
	if ((int64_t)lw->numel != nl)
		return kerr(k, "leaf_weights must have %" PRId64 " values like leaf_targetids", nl);
	int64_t ntg = kattr_i(k, "n_targets", 0);
	if (ntg < 1 || ntg > ((int64_t)1 << 31))
		return kerr(k, "n_targets %" PRId64 " is out of range", ntg);
	int64_t agg = kattr_i(k, "aggregate_function", 1);
	int64_t pt = kattr_i(k, "post_transform", 0);
	if (agg < 0 || agg > 3)
		return kerr(k, "aggregate_function %" PRId64 " is not one of 0..3", agg);
	if (pt < 0 || pt > 4)
		return kerr(k, "post_transform %" PRId64 " is not one of 0..4", pt);
	for (int64_t j = 0; j < nl; j++)
		if (ltg[j] < 0 || ltg[j] >= ntg)
			return kerr(k, "leaf_targetids value %" PRId64 " is out of range for %" PRId64 " targets", ltg[j], ntg);

	struct tree_node *nodes = NULL;
	double *members = NULL, *wts = NULL, *acc = NULL;
	int64_t *cnt = NULL;
	if (!(nodes = kalloc_arr(k, (uint64_t)nn, sizeof(*nodes))) || !(wts = kload_f64(lw))) {
		rc = nodes ? kenomem(k) : IR_ENOMEM;
		goto out;
	}
	uint64_t nmem = mv ? mv->numel : 0;
	if (mv && !(members = kload_f64(mv))) {
		rc = kenomem(k);
		goto out;
	}
	uint64_t mpos = 0;   /* the next member set, in node order */
	for (int64_t j = 0; j < nn; j++) {
		struct tree_node *t = &nodes[j];
		t->mode = (int)kldi(modes->dtype, kdata(modes), (uint64_t)j);
		t->feature = feat[j];
		t->split = kld(splits->dtype, kdata(splits), (uint64_t)j);
		t->next[1] = tid[j];
		t->next[0] = fid[j];
		t->leaf[1] = tlf[j] != 0;
		t->leaf[0] = flf[j] != 0;
		t->missing_true = miss && miss[j];
		t->set = NULL;
		t->nset = 0;
		if (t->mode < TM_LEQ || t->mode > TM_MEMBER) {
			rc = kerr(k, "nodes_modes value %d is not a known mode", t->mode);
			goto out;
		}
		if (t->feature < 0 || t->feature >= F) {
			rc = kerr(k, "nodes_featureids value %" PRId64 " is out of range for %" PRId64 " features",
				  t->feature, F);
			goto out;
		}
		for (int b = 0; b < 2; b++)
			if (t->next[b] < 0 || t->next[b] >= (t->leaf[b] ? nl : nn)) {
				rc = kerr(k, "node %" PRId64 " points to %s %" PRId64 ", out of range", j,
					  t->leaf[b] ? "leaf" : "node", t->next[b]);
				goto out;
			}
		if (t->mode == TM_MEMBER) {
			/* the next run of membership_values up to a NaN */
			if (mpos >= nmem && nmem) {
				rc = kerr(k, "membership_values has fewer sets than BRANCH_MEMBER nodes");
				goto out;
			}
			if (!members) {
				rc = kerr(k, "a BRANCH_MEMBER node needs membership_values");
				goto out;
			}
			uint64_t e = mpos;
			while (e < nmem && !isnan(members[e]))
				e++;
			t->set = members + mpos;
			t->nset = e - mpos;
			qsort(members + mpos, t->nset, sizeof(double), dbl_cmp);
			mpos = e + 1;
		}
	}
	for (int64_t r = 0; r < nr; r++)
		if (roots[r] < 0 || roots[r] >= nn) {
			rc = kerr(k, "tree_roots value %" PRId64 " is out of range for %" PRId64 " nodes", roots[r], nn);
			goto out;
		}

	int64_t odims[2] = { N, ntg };
	struct ir_tensor *o = kout(k, 0, x->dtype, 2, odims);
	if (!o) {
		rc = IR_ERR;
		goto out;
	}
	if (!(acc = kalloc_arr(k, (uint64_t)ntg, sizeof(*acc))) || !(cnt = kalloc_arr(k, (uint64_t)ntg, sizeof(*cnt)))) {
		rc = IR_ENOMEM;
		goto out;
	}
	void *y = kwdata(o);
	const void *xp = kdata(x);
	double big = dtype_max(x->dtype);
	for (int64_t i = 0; i < N; i++) {
		for (int64_t t = 0; t < ntg; t++) {
			acc[t] = agg == 2 ? big : agg == 3 ? -big : 0.0;
			cnt[t] = 0;
		}
		for (int64_t r = 0; r < nr; r++) {
			const struct tree_node *t = &nodes[roots[r]];
			int64_t leaf;
			if (t->leaf[0] && t->leaf[1] && t->next[0] == t->next[1]) {
				leaf = t->next[1];   /* a tree that is a single leaf */
			} else {
				int64_t steps = 0;
				for (;;) {
					double v = kld(x->dtype, xp, (uint64_t)(i * F + t->feature));
					bool go;
					if (isnan(v) && t->missing_true) {
						go = true;
					} else {
						switch (t->mode) {
						case TM_LEQ: go = v <= t->split; break;
						case TM_LT: go = v < t->split; break;
						case TM_GTE: go = v >= t->split; break;
						case TM_GT: go = v > t->split; break;
						case TM_EQ: go = v == t->split; break;
						case TM_NEQ: go = v != t->split; break;
						default:
							go = !isnan(v) && bsearch(&v, t->set, t->nset, sizeof(double), dbl_cmp);
							break;
						}
					}
					if (t->leaf[go]) {
						leaf = t->next[go];
						break;
					}
					t = &nodes[t->next[go]];
					if (++steps > nn) {
						rc = kerr(k, "tree %" PRId64 " has a cycle", r);
						goto out;
					}
				}
			}
			int64_t tg = ltg[leaf];
			double w = wts[leaf];
			if (agg == 2)
				acc[tg] = w < acc[tg] ? w : acc[tg];
			else if (agg == 3)
				acc[tg] = w > acc[tg] ? w : acc[tg];
			else
				acc[tg] += w;
			cnt[tg]++;
		}
		for (int64_t t = 0; t < ntg; t++) {
			if (!cnt[t])
				acc[t] = 0.0;   /* no leaf voted (MIN/MAX): 0, as onnxruntime gives */
			else if (agg == 0)
				acc[t] /= (double)nr;
		}
		post_transform((int)pt, acc, ntg);
		for (int64_t t = 0; t < ntg; t++)
			kst(x->dtype, y, (uint64_t)(i * ntg + t), acc[t]);
		if ((i & 0xff) == 0xff && (rc = kstop(k)))
			goto out;
	}
out:
	free(nodes);
	free(members);
	free(wts);
	free(acc);
	free(cnt);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Normalizer, Scaler, Imputer, OneHotEncoder                                 */
/* ------------------------------------------------------------------------ */

/* Each row divided by its MAX, L1 or L2 norm; float32 out. */
static int k_normalizer(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!is_num(x->dtype))
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int64_t N = 0, C = 0;
	if (rows_cols(k, x, &N, &C))
		return IR_ERR;
	const char *norm = kattr_s(k, "norm", "MAX");
	int m = !strcmp(norm, "MAX") ? 0 : !strcmp(norm, "L1") ? 1 : !strcmp(norm, "L2") ? 2 : -1;
	if (m < 0)
		return kerr(k, "norm '%s' is not one of MAX, L1, L2", norm);
	struct ir_tensor *o = kout(k, 0, IR_FLOAT, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	float *y = kwdata(o);
	const void *p = kdata(x);
	for (int64_t i = 0; i < N; i++) {
		double d = m == 0 ? -INFINITY : 0.0;
		for (int64_t j = 0; j < C; j++) {
			double v = kld(x->dtype, p, (uint64_t)(i * C + j));
			if (m == 0)
				d = v > d ? v : d;
			else if (m == 1)
				d += fabs(v);
			else
				d += v * v;
		}
		if (m == 2)
			d = sqrt(d);
		for (int64_t j = 0; j < C; j++) {
			double v = kld(x->dtype, p, (uint64_t)(i * C + j));
			/* a zero (or, for MAX, non-positive) norm leaves the row as it is */
			y[i * C + j] = (float)(d > 0 ? v / d : v);
		}
	}
	return 0;
}

/* Y = (X - offset) * scale over the last axis (offset/scale: 1 or C values); float32 out. */
static int k_scaler(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!is_num(x->dtype))
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int64_t C = x->rank ? x->dims[x->rank - 1] : 1;
	int no, ns;
	const float *off = kattr_floats(k, "offset", &no);
	const float *sc = kattr_floats(k, "scale", &ns);
	if ((no > 1 && no != C) || (ns > 1 && ns != C))
		return kerr(k, "offset and scale must have 1 or %" PRId64 " values, not %d and %d", C, no, ns);
	struct ir_tensor *o = kout(k, 0, IR_FLOAT, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	float *y = kwdata(o);
	for (uint64_t i = 0; i < x->numel; i++) {
		int64_t c = C ? (int64_t)(i % (uint64_t)C) : 0;
		double ofs = no == 0 ? 0.0 : off[no == 1 ? 0 : c];
		double s = ns == 0 ? 1.0 : sc[ns == 1 ? 0 : c];
		y[i] = (float)((kld(x->dtype, kdata(x), i) - ofs) * s);
	}
	return 0;
}

/* Replaces replaced_value_* (NaN: NaNs) by imputed_value_* (1 or C values, last axis). */
static int k_imputer(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	int64_t C = x->rank ? x->dims[x->rank - 1] : 1;
	int nf, ni;
	const float *vf = kattr_floats(k, "imputed_value_floats", &nf);
	const int64_t *vi = kattr_ints(k, "imputed_value_int64s", &ni);
	bool isf = ir_dtype_is_float(x->dtype);
	if (!isf && !ir_dtype_is_int(x->dtype))
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int n = isf ? nf : ni;
	if (n == 0)
		return kerr(k, "needs imputed_value_%s", isf ? "floats" : "int64s");
	if (n != 1 && n != C)
		return kerr(k, "has %d imputed values for a last axis of %" PRId64, n, C);
	struct ir_tensor *o = kout(k, 0, x->dtype, x->rank, x->dims);
	if (!o)
		return IR_ERR;
	void *y = kwdata(o);
	const void *p = kdata(x);
	if (isf) {
		double rep = kattr_f(k, "replaced_value_float", 0.0f);
		for (uint64_t i = 0; i < x->numel; i++) {
			double v = kld(x->dtype, p, i);
			int64_t c = C ? (int64_t)(i % (uint64_t)C) : 0;
			bool hit = isnan(rep) ? isnan(v) : v == rep;
			kst(x->dtype, y, i, hit ? vf[n == 1 ? 0 : c] : v);
		}
	} else {
		int64_t rep = kattr_i(k, "replaced_value_int64", 0);
		for (uint64_t i = 0; i < x->numel; i++) {
			int64_t v = kldi(x->dtype, p, i);
			int64_t c = C ? (int64_t)(i % (uint64_t)C) : 0;
			ksti(x->dtype, y, i, v == rep ? vi[n == 1 ? 0 : c] : v);
		}
	}
	return 0;
}

/* One-hot of each element over cats_int64s or cats_strings: X's shape + [ncats], float32. */
static int k_one_hot_encoder(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (x->rank >= IR_MAX_RANK)
		return kerr(k, "input of rank %d leaves no room for the added axis", x->rank);
	int nci;
	const int64_t *ci = kattr_ints(k, "cats_int64s", &nci);
	const struct ir_attr *cs = kattr(k, "cats_strings");
	size_t ncs = cs && cs->type == IR_ATTR_STRINGS ? cs->n : 0;
	bool xs = x->dtype == IR_STRING;
	if (!xs && !is_num(x->dtype))
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	size_t ncat = xs ? ncs : (size_t)nci;
	if (!ncat)
		return kerr(k, "needs cats_%s for %s input", xs ? "strings" : "int64s", ir_dtype_name(x->dtype));
	bool zeros = kattr_i(k, "zeros", 1) != 0;
	int64_t dims[IR_MAX_RANK];
	for (int j = 0; j < x->rank; j++)
		dims[j] = x->dims[j];
	dims[x->rank] = (int64_t)ncat;
	struct ir_tensor *o = kout(k, 0, IR_FLOAT, x->rank + 1, dims);
	if (!o)
		return IR_ERR;
	float *y = kwdata(o);
	for (uint64_t i = 0; i < x->numel; i++) {
		int64_t hit = -1;
		if (xs) {
			for (size_t c = 0; c < ncat && hit < 0; c++)
				if (!bytes_cmp(&x->strings[i], &cs->strings[c]))
					hit = (int64_t)c;
		} else {
			/* numbers are compared as int64 (floats truncated, as onnxruntime does) */
			int64_t v = kldi(x->dtype, kdata(x), i);
			for (size_t c = 0; c < ncat && hit < 0; c++)
				if (ci[c] == v)
					hit = (int64_t)c;
		}
		if (hit < 0 && !zeros)
			return kerr(k, "element %" PRIu64 " is not one of the categories (zeros is 0)", i);
		for (size_t c = 0; c < ncat; c++)
			y[i * ncat + c] = (int64_t)c == hit ? 1.0f : 0.0f;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* LinearRegressor, LinearClassifier                                          */
/* ------------------------------------------------------------------------ */

/* scores[N, T] = X[N, F] coefficients[T, F]^T + intercepts (the caller frees). */
static double *linear_scores(struct cpu_kctx *k, const struct ir_tensor *x, int64_t N, int64_t F, int64_t T)
{
	int nc, ni;
	const float *coef = kattr_floats(k, "coefficients", &nc);
	const float *icp = kattr_floats(k, "intercepts", &ni);
	if ((int64_t)nc != T * F) {
		kerr(k, "coefficients has %d values, not %" PRId64 " x %" PRId64, nc, T, F);
		return NULL;
	}
	if (ni && ni != T) {
		kerr(k, "intercepts has %d values, not %" PRId64, ni, T);
		return NULL;
	}
	double *s = kalloc_arr(k, (uint64_t)(N * T), sizeof(double));
	if (!s)
		return NULL;
	for (int64_t i = 0; i < N; i++)
		for (int64_t t = 0; t < T; t++) {
			double a = ni ? icp[t] : 0.0;
			for (int64_t f = 0; f < F; f++)
				a += kld(x->dtype, kdata(x), (uint64_t)(i * F + f)) * coef[t * F + f];
			s[i * T + t] = a;
		}
	return s;
}

static int k_linear_regressor(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!is_num(x->dtype))
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int64_t N = 0, F = 0;
	if (rows_cols(k, x, &N, &F))
		return IR_ERR;
	int64_t T = kattr_i(k, "targets", 1);
	if (T < 1 || T > ((int64_t)1 << 31))
		return kerr(k, "targets %" PRId64 " is out of range", T);
	int pt = post_transform_of(k, kattr_s(k, "post_transform", "NONE"));
	if (pt < 0)
		return IR_ERR;
	int64_t dims[2] = { N, T };
	struct ir_tensor *o = kout(k, 0, IR_FLOAT, 2, dims);
	if (!o)
		return IR_ERR;
	double *s = linear_scores(k, x, N, F, T);
	if (!s)
		return IR_ERR;
	float *y = kwdata(o);
	for (int64_t i = 0; i < N; i++) {
		post_transform(pt, s + i * T, T);
		for (int64_t t = 0; t < T; t++)
			y[i * T + t] = (float)s[i * T + t];
	}
	free(s);
	return 0;
}

/*
 * Scores of each class (coefficients has one row per class, or one row for
 * two classes: the scores are then [1 - s, s]), post-transformed; the label
 * is the class of the best score (one row of one class: the class when the
 * score is over 0, or 0.5 after a post-transform, else label 0 / "").
 */
static int k_linear_classifier(struct cpu_kctx *k)
{
	const struct ir_tensor *x = kin_req(k, 0);
	if (!x)
		return IR_ERR;
	if (!is_num(x->dtype))
		return kerr(k, "input type %s is not supported", ir_dtype_name(x->dtype));
	int64_t N = 0, F = 0;
	if (rows_cols(k, x, &N, &F))
		return IR_ERR;
	int nli;
	const int64_t *li = kattr_ints(k, "classlabels_ints", &nli);
	const struct ir_attr *ls = kattr(k, "classlabels_strings");
	size_t nls = ls && ls->type == IR_ATTR_STRINGS ? ls->n : 0;
	bool strl = nls > 0;
	int64_t ncls = strl ? (int64_t)nls : nli;
	if (ncls < 1)
		return kerr(k, "needs classlabels_ints or classlabels_strings");
	int nc;
	kattr_floats(k, "coefficients", &nc);
	if (F <= 0 || nc % F)
		return kerr(k, "coefficients has %d values, not a multiple of %" PRId64 " features", nc, F);
	int64_t T = nc / F;   /* score rows */
	if (T != ncls && !(T == 1 && ncls <= 2))
		return kerr(k, "coefficients has %" PRId64 " rows for %" PRId64 " classes", T, ncls);
	int pt = post_transform_of(k, kattr_s(k, "post_transform", "NONE"));
	if (pt < 0)
		return IR_ERR;
	int64_t W = T == 1 && ncls == 2 ? 2 : T;   /* score columns out */
	int64_t sd[2] = { N, W };
	struct ir_tensor *lab = kout(k, 0, strl ? IR_STRING : IR_INT64, 1, &N);
	struct ir_tensor *sc = lab ? kout(k, 1, IR_FLOAT, 2, sd) : NULL;
	if (!sc)
		return IR_ERR;
	double *s = linear_scores(k, x, N, F, T);
	if (!s)
		return IR_ERR;
	float *z = kwdata(sc);
	int64_t *yl = strl ? NULL : kwdata(lab);
	int rc = 0;
	for (int64_t i = 0; i < N; i++) {
		double *v = s + i * T;
		int64_t best = 0;
		if (T == 1) {
			/* one score s for two classes: [1 - t, t] with t = s, or the
			 * logistic/probit of s (the other post-transforms leave it, as
			 * in onnxruntime); the second class when s > 0 */
			if (W == 2) {
				double t = v[0];
				if (pt == PT_LOGISTIC || pt == PT_PROBIT)
					post_transform(pt, &t, 1);
				best = v[0] > 0 ? 1 : 0;
				z[i * 2] = (float)(1.0 - t);
				z[i * 2 + 1] = (float)t;
			} else {
				double th = pt == PT_NONE ? 0.0 : 0.5;
				post_transform(pt, v, 1);
				best = v[0] > th ? 0 : -1;
				z[i] = (float)v[0];
			}
		} else {
			post_transform(pt, v, T);
			for (int64_t t = 1; t < T; t++)
				if (v[t] > v[best])
					best = t;
			for (int64_t t = 0; t < T; t++)
				z[i * T + t] = (float)v[t];
		}
		if (strl) {
			const struct ir_bytes *b = best >= 0 ? &ls->strings[best] : NULL;
			if (!kstr_set(&lab->strings[i], b ? b->data : "", b ? b->len : 0)) {
				rc = kenomem(k);
				break;
			}
		} else {
			yl[i] = best >= 0 ? li[best] : 0;
		}
	}
	free(s);
	return rc;
}

const struct cpu_kernel cpu_kernels_ml[] = {
	{ IR_OP_ml_LabelEncoder, k_label_encoder, NULL },
	{ IR_OP_ml_Binarizer, k_binarizer, NULL },
	{ IR_OP_ml_ArrayFeatureExtractor, k_array_feature_extractor, NULL },
	{ IR_OP_ml_TreeEnsemble, k_tree_ensemble, NULL },
	{ IR_OP_ml_Normalizer, k_normalizer, NULL },
	{ IR_OP_ml_Scaler, k_scaler, NULL },
	{ IR_OP_ml_Imputer, k_imputer, NULL },
	{ IR_OP_ml_OneHotEncoder, k_one_hot_encoder, NULL },
	{ IR_OP_ml_LinearRegressor, k_linear_regressor, NULL },
	{ IR_OP_ml_LinearClassifier, k_linear_classifier, NULL },
	{ -1, NULL, NULL },
};
