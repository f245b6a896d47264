/*
 * data.c - datasets: what --data names (arrays, ONNX test data, images,
 * random), fed to a model's inputs batch by batch, and labels.
 *
 * Opening scans what is cheap (folder listings, .npy headers, every
 * test-data set once) and checks dtypes and shapes against the graph's
 * inputs, so that a bad file is found before a long run starts. Batches are
 * then read as they are asked for: arrays a few rows at a time (an .npy file
 * or a stored .npz entry is read in place; a compressed entry or a
 * Fortran-order array is read whole while the batches are in its file),
 * images decoded one by one. Memory stays bounded by one batch and one file,
 * never the dataset.
 *
 * Conversions to the input's dtype: numeric arrays (integers, floats) to a
 * float input always (rounding as a cast does), to an integer input when
 * every value is whole and fits (checked as the values are read); bool,
 * strings and complex numbers only to their own type.
 */
#include "exec/exec.h"
#include "exec/exec_io.h"
#include "exec/exec_private.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An image file larger than this is refused before it is read. */
#define IMG_MAX_FILE ((size_t)256 << 20)
/* A labels file larger than this is refused (a text file of 100M labels). */
#define LABELS_MAX_FILE ((size_t)1 << 30)
#define RANDOM_SAMPLES 64

enum ds_kind { DS_RANDOM, DS_ARRAYS, DS_TESTDATA, DS_IMAGES };

/* A graph input the dataset feeds. */
struct ds_input {
	const struct ir_value *v;
	int dtype;
	int rank;                      /* declared rank; -1 when unknown */
	/* one sample's dims (after the batch dim), from the first file read */
	bool have_sdims;
	int srank;
	int64_t sdims[IR_MAX_RANK];
	uint64_t per_sample;           /* elements in one sample */
};

/* One file (arrays, images) or one test-data set. */
struct ds_file {
	char *path;                    /* as opened */
	char *rel;                     /* the name under the dataset's folder (hashed, shown) */
	uint64_t samples;
	bool npz;
	struct exec_npy_loc *loc;      /* arrays: one per input (copies; names owned by `locs`) */
	struct exec_npy_loc *locs;     /* arrays: what the file holds */
	int n_locs;
	bool whole;                    /* an array must be read whole (compressed, Fortran order) */
};

/* What --preprocess says. */
struct pp {
	int resize_short;              /* resize=N */
	int resize_w, resize_h;        /* resize=WxH */
	int crop_w, crop_h;            /* crop=N or WxH (0: none) */
	int n_mean, n_std;
	double mean[3], std[3];
	bool has_scale;
	double scale;
	int layout;                    /* 0: from the input, 1: nchw, 2: nhwc */
	bool bgr;
	int gray;                      /* -1: not given, 0, 1 */
};

struct exec_data {
	enum ds_kind kind;
	const struct ir_model *m;
	char *spec;
	struct ds_input *in;
	int n_in;
	int batch;
	bool batch_fixed;              /* an input fixes the batch dim */
	int max_batches;
	bool skip_bad;
	uint64_t total;                /* samples in the data */
	uint64_t samples;              /* samples fed (after max_batches and a dropped remainder) */
	int n_batches;                 /* batches to feed (images: at most) */
	char desc[512];
	char hash[17];
	bool hashed;

	struct ds_file *files;
	int n_files;

	/* where the next batch starts */
	int given;                     /* batches fed */
	uint64_t fed;                  /* samples fed */
	int fi;
	uint64_t row;
	int fd, fd_file;               /* the open array file */
	struct ir_tensor **whole;      /* the arrays of file whole_file, when read whole */
	int whole_file;

	/* images */
	struct pp pp;
	char pp_canon[256];            /* the preprocessing in one canonical form (hashed) */
	int img_c, img_h, img_w;       /* the input's channels and size (0: symbolic, fixed by the first image) */
	bool img_fixed;                /* the input fixes H and W */
	bool nhwc;
	double scale;

	/* random */
	uint64_t seed;
	struct exec_shape *shapes;
	int n_shapes;
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

/* n with thousands separators: "1,257". */
static const char *num_str(uint64_t n, char *buf, size_t size)
{
	char raw[32];
	int len = snprintf(raw, sizeof(raw), "%" PRIu64, n), o = 0;
	for (int i = 0; i < len && (size_t)o + 2 < size; i++) {
		if (i && (len - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = raw[i];
	}
	buf[o] = 0;
	return buf;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcasecmp(s + n - k, suffix);
}

static bool is_image_name(const char *s)
{
	return ends_with(s, ".png") || ends_with(s, ".jpg") || ends_with(s, ".jpeg");
}

static bool is_array_name(const char *s)
{
	return ends_with(s, ".npy") || ends_with(s, ".npz");
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] != '/' ? "/" : "", name);
	return p;
}

/* The dims part of an input's type: "[N,64]" (its type string without the dtype). */
static const char *input_dims_str(const struct ir_value *v, char *buf, size_t size)
{
	char tb[256];
	ir_type_str(&v->type, tb, sizeof(tb));
	const char *b = strchr(tb, '[');
	snprintf(buf, size, "%s", b ? b : "[?]");
	return buf;
}

/* Moves what a local diag holds into d: its warnings, and its error as an
 * error (returns rc) or, when skipping bad files, as a warning (returns 0).
 * Out of memory and Ctrl-C are never skipped. */
static int take_diag(struct ir_diag *d, struct ir_diag *local, int rc, bool skip)
{
	for (size_t i = 0; i < local->n_warnings; i++)
		ir_diag_warn(d, "%s", local->warnings[i]);
	if (rc && skip && rc != IR_ENOMEM && rc != IR_EINTR) {
		ir_diag_warn(d, "%s (skipped)", local->error ? local->error : "bad file");
		rc = 0;
	} else if (rc) {
		ir_diag_err(d, rc, "%s", local->error ? local->error : "error");
	}
	ir_diag_clear(local);
	ir_diag_init(local);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Converting elements to the input's dtype                                  */
/* ------------------------------------------------------------------------ */

static bool is_numeric(int dt)
{
	return (ir_dtype_is_int(dt) || ir_dtype_is_float(dt)) && ir_dtype_bits(dt) >= 8;
}

/* Whether arrays of `from` can feed an input of `to` (values are checked later). */
static bool conv_allowed(int from, int to)
{
	return from == to || (is_numeric(from) && is_numeric(to));
}

/* The range of an integer dtype. */
static void int_range(int dt, double *lo, double *hi)
{
	int bits = ir_dtype_bits(dt);
	/* 64 bits: the largest double below 2^63 or 2^64 (2^64 - 1 rounds up to 2^64) */
	double top = ldexp(1, ir_dtype_is_signed(dt) ? bits - 1 : bits);
	*lo = ir_dtype_is_signed(dt) ? -top : 0;
	*hi = bits >= 64 ? nextafter(top, 0) : top - 1;
}

static void store_int(int dt, void *p, uint64_t i, int64_t v)
{
	switch (dt) {
	case IR_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
	case IR_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case IR_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
	case IR_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
	case IR_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
	case IR_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case IR_INT64: ((int64_t *)p)[i] = v; break;
	case IR_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	}
}

/* Stores a whole number f within dt's range (int_range) as element i. */
static void store_whole(int dt, void *p, uint64_t i, double f)
{
	if (dt == IR_UINT64)
		((uint64_t *)p)[i] = (uint64_t)f;
	else
		store_int(dt, p, i, f >= 9223372036854775807.0 ? INT64_MAX : (int64_t)f);
}

/* Whether integer v fits dt (integers past 2^53 compared exactly). */
static bool int_fits(int dt, int64_t v)
{
	switch (dt) {
	case IR_INT8: return v >= INT8_MIN && v <= INT8_MAX;
	case IR_UINT8: return v >= 0 && v <= UINT8_MAX;
	case IR_INT16: return v >= INT16_MIN && v <= INT16_MAX;
	case IR_UINT16: return v >= 0 && v <= UINT16_MAX;
	case IR_INT32: return v >= INT32_MIN && v <= INT32_MAX;
	case IR_UINT32: return v >= 0 && v <= (int64_t)UINT32_MAX;
	case IR_INT64: return true;
	case IR_UINT64: return v >= 0;
	}
	return false;
}

/* Where converted values come from, for messages. */
struct conv_ctx {
	const char *file;
	const char *input;
	uint64_t first_sample;         /* the file's sample index of element 0 */
	uint64_t per_sample;
};

/*
 * Converts n elements of dtype `from` at src into elements dst_first... of
 * dtype `to` at dst. 0, or IR_ERR naming the file, the sample and the value
 * when an integer input cannot hold it exactly.
 */
static int conv_elems(const void *src, int from, void *dst, int to, uint64_t dst_first, uint64_t n,
		      const struct conv_ctx *cx, struct ir_diag *d)
{
	if (from == to) {
		size_t es = (size_t)ir_dtype_bits(to) / 8;
		if (n)
			memcpy((char *)dst + dst_first * es, src, (size_t)n * es);
		return 0;
	}
	if (ir_dtype_is_float(to)) {
		for (uint64_t i = 0; i < n; i++) {
			double v = ir_elem_to_f64(from, src, i);
			if (to == IR_FLOAT)
				((float *)dst)[dst_first + i] = (float)v;
			else
				kern_store_f64(to, dst, dst_first + i, v);
		}
		return 0;
	}
	double lo, hi;
	int_range(to, &lo, &hi);
	for (uint64_t i = 0; i < n; i++) {
		int64_t v = 0;
		bool ok;
		if (ir_dtype_is_int(from)) {
			/* (uint64 values past INT64_MAX fit no other type) */
			ok = ir_elem_to_i64(from, src, i, &v) && int_fits(to, v);
		} else {
			double f = ir_elem_to_f64(from, src, i);
			ok = isfinite(f) && f == floor(f) && f >= lo && f <= hi;
			if (ok) {
				store_whole(to, dst, i + dst_first, f);
				continue;
			}
		}
		if (!ok) {
			uint64_t s = cx->per_sample ? i / cx->per_sample : 0;
			char vb[64];
			if (ir_dtype_is_int(from))
				snprintf(vb, sizeof(vb), "%.17g", ir_elem_to_f64(from, src, i));
			else
				snprintf(vb, sizeof(vb), "%.9g", ir_elem_to_f64(from, src, i));
			return ir_diag_err(d, IR_ERR, "%s: sample %" PRIu64 ": %s value %s does not convert exactly to %s (input '%s')",
					   cx->file, cx->first_sample + s, ir_dtype_name(from), vb, ir_dtype_name(to), cx->input);
		}
		store_int(to, dst, i + dst_first, v);
	}
	return 0;
}

/* Replaces *t by a tensor of `dtype` with the same values (checked as above). */
static int conv_tensor(struct ir_tensor **t, int dtype, const char *file, const char *input, struct ir_diag *d)
{
	struct ir_tensor *a = *t;
	if (a->dtype == dtype)
		return 0;
	if (!conv_allowed(a->dtype, dtype))
		return ir_diag_err(d, IR_ERR, "%s: input '%s' is %s, not %s", file, input, ir_dtype_name(a->dtype),
				   ir_dtype_name(dtype));
	struct ir_tensor *b = ir_tensor_new(dtype, a->rank, a->dims, d);
	if (!b)
		return IR_ENOMEM;
	uint64_t ps = a->rank && a->dims[0] ? a->numel / (uint64_t)a->dims[0] : a->numel;
	struct conv_ctx cx = { file, input, 0, ps };
	int rc = a->numel ? conv_elems(ir_tensor_data(a), a->dtype, ir_tensor_mutable(b), dtype, 0, a->numel, &cx, d) : 0;
	if (rc) {
		ir_tensor_unref(b);
		return rc;
	}
	ir_tensor_unref(a);
	*t = b;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The preprocessing spec                                                    */
/* ------------------------------------------------------------------------ */

#define PP_KEYS "resize, crop, mean, std, scale, layout, order, gray"

/* A size: "N" (n x n, *square) or "WxH". */
static bool parse_size(const char *s, int *w, int *h, bool *square)
{
	char *end;
	errno = 0;
	long a = strtol(s, &end, 10);
	if (end == s || errno || a < 1 || a > 16384 || !isdigit((unsigned char)*s))
		return false;
	if (!*end) {
		*w = *h = (int)a;
		*square = true;
		return true;
	}
	if (*end != 'x' && *end != 'X')
		return false;
	const char *s2 = end + 1;
	long b = strtol(s2, &end, 10);
	if (end == s2 || *end || errno || b < 1 || b > 16384 || !isdigit((unsigned char)*s2))
		return false;
	*w = (int)a;
	*h = (int)b;
	*square = false;
	return true;
}

static bool parse_number(const char *s, double *v)
{
	char *end;
	if (!*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return end != s && !*end && !errno && isfinite(*v);
}

/* "0.0039", "1/255". */
static bool parse_scale(const char *s, double *v)
{
	const char *slash = strchr(s, '/');
	if (!slash)
		return parse_number(s, v);
	char num[64];
	size_t k = (size_t)(slash - s);
	if (k == 0 || k >= sizeof(num))
		return false;
	memcpy(num, s, k);
	num[k] = 0;
	double a, b;
	if (!parse_number(num, &a) || !parse_number(slash + 1, &b) || b == 0)
		return false;
	*v = a / b;
	return isfinite(*v);
}

/*
 * Parses the spec ("resize=256,crop=224,mean=0.485,0.456,0.406,...") into
 * *pp. mean and std take 1 or 3 values: the tokens after them that are not
 * KEY=VALUE. 0 or IR_ERR ("--preprocess: ...").
 */
static int pp_parse(const char *spec, struct pp *pp, struct ir_diag *d)
{
	memset(pp, 0, sizeof(*pp));
	pp->gray = -1;
	if (!spec || !*spec)
		return 0;
	char *copy = strdup(spec);
	if (!copy)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int rc = 0;
	bool seen[8] = { false };
	static const char *keys[] = { "resize", "crop", "mean", "std", "scale", "layout", "order", "gray" };
	int list = -1;   /* 2: mean, 3: std: bare numbers go there */
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			double v;
			int *nv = list == 2 ? &pp->n_mean : list == 3 ? &pp->n_std : NULL;
			if (!nv) {
				rc = ir_diag_err(d, IR_ERR, "--preprocess: '%s' is not KEY=VALUE (" PP_KEYS ")", tok);
				break;
			}
			if (!parse_number(tok, &v)) {
				rc = ir_diag_err(d, IR_ERR, "--preprocess: %s: '%s' is not a number", keys[list], tok);
				break;
			}
			if (*nv == 3) {
				rc = ir_diag_err(d, IR_ERR, "--preprocess: %s takes 1 or 3 values", keys[list]);
				break;
			}
			(list == 2 ? pp->mean : pp->std)[(*nv)++] = v;
			continue;
		}
		*eq = 0;
		const char *key = tok, *val = eq + 1;
		int k;
		for (k = 0; k < 8 && strcmp(key, keys[k]); k++)
			;
		if (k == 8) {
			rc = ir_diag_err(d, IR_ERR, "--preprocess: unknown key '%s' (" PP_KEYS ")", key);
			break;
		}
		if (seen[k]) {
			rc = ir_diag_err(d, IR_ERR, "--preprocess: '%s' is given twice", key);
			break;
		}
		seen[k] = true;
		list = -1;
		bool square = false, ok = true;
		double v = 0;
		switch (k) {
		case 0:
			ok = parse_size(val, &pp->resize_w, &pp->resize_h, &square);
			if (ok && square) {
				pp->resize_short = pp->resize_w;
				pp->resize_w = pp->resize_h = 0;
			}
			if (!ok)
				rc = ir_diag_err(d, IR_ERR, "--preprocess: resize=%s: not N or WxH (1 to 16384)", val);
			break;
		case 1:
			ok = parse_size(val, &pp->crop_w, &pp->crop_h, &square);
			if (!ok)
				rc = ir_diag_err(d, IR_ERR, "--preprocess: crop=%s: not N or WxH (1 to 16384)", val);
			break;
		case 2: case 3:
			if (!parse_number(val, &v)) {
				rc = ir_diag_err(d, IR_ERR, "--preprocess: %s=%s: not a number", key, val);
				break;
			}
			(k == 2 ? pp->mean : pp->std)[0] = v;
			*(k == 2 ? &pp->n_mean : &pp->n_std) = 1;
			list = k;
			break;
		case 4:
			if (!parse_scale(val, &pp->scale) || pp->scale == 0)
				rc = ir_diag_err(d, IR_ERR, "--preprocess: scale=%s: not a non-zero number or fraction (1/255)", val);
			pp->has_scale = true;
			break;
		case 5:
			if (!strcmp(val, "nchw"))
				pp->layout = 1;
			else if (!strcmp(val, "nhwc"))
				pp->layout = 2;
			else
				rc = ir_diag_err(d, IR_ERR, "--preprocess: layout=%s: not nchw or nhwc", val);
			break;
		case 6:
			if (!strcmp(val, "rgb") || !strcmp(val, "bgr"))
				pp->bgr = val[0] == 'b';
			else
				rc = ir_diag_err(d, IR_ERR, "--preprocess: order=%s: not rgb or bgr", val);
			break;
		case 7:
			if (!strcmp(val, "0") || !strcmp(val, "1"))
				pp->gray = val[0] - '0';
			else
				rc = ir_diag_err(d, IR_ERR, "--preprocess: gray=%s: not 0 or 1", val);
			break;
		}
		if (rc)
			break;
	}
	free(copy);
	if (rc)
		return rc;
	if (pp->n_mean == 2 || pp->n_std == 2)
		return ir_diag_err(d, IR_ERR, "--preprocess: %s takes 1 or 3 values", pp->n_mean == 2 ? "mean" : "std");
	for (int i = 0; i < pp->n_std; i++)
		if (pp->std[i] == 0)
			return ir_diag_err(d, IR_ERR, "--preprocess: std must not be 0");
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The inputs and the batch                                                  */
/* ------------------------------------------------------------------------ */

static int find_inputs(struct exec_data *ds, struct ir_diag *d)
{
	const struct ir_graph *g = ds->m->graph;
	char tb[256];
	ds->in = calloc(g->n_inputs ? (size_t)g->n_inputs : 1, sizeof(*ds->in));
	if (!ds->in)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	for (int i = 0; i < g->n_inputs; i++) {
		const struct ir_value *v = g->inputs[i];
		if (v->init || v->sparse_init)
			continue;
		const struct ir_type *ty = &v->type;
		if (ty->kind != IR_TYPE_TENSOR || !ty->elem)
			return ir_diag_err(d, IR_ERR, "input '%s' is %s: datasets feed tensors of a known dtype", v->name,
					   ir_type_str(ty, tb, sizeof(tb)));
		if (ty->rank == 0)
			return ir_diag_err(d, IR_ERR, "input '%s' is a scalar: datasets feed inputs whose first dim counts samples",
					   v->name);
		struct ds_input *in = &ds->in[ds->n_in++];
		in->v = v;
		in->dtype = ty->elem;
		in->rank = ty->rank;
	}
	if (!ds->n_in)
		return ir_diag_err(d, IR_ERR, "the model has no inputs to feed");
	return 0;
}

/* The batch: o->batch, else the inputs' fixed batch dim, else (a symbolic
 * or unknown batch dim) EXEC_DATA_BATCH samples: one sample a run would
 * leave calibrate and eval paying a run's overhead per sample. */
static int choose_batch(struct exec_data *ds, int want, struct ir_diag *d)
{
	int64_t fixed = 0;
	const char *who = NULL;
	for (int i = 0; i < ds->n_in; i++) {
		const struct ir_type *ty = &ds->in[i].v->type;
		if (ty->rank < 1 || ty->dims[0].kind != IR_DIM_VALUE)
			continue;
		int64_t b = ty->dims[0].value;
		if (b < 1 || b > INT32_MAX)
			return ir_diag_err(d, IR_ERR, "input '%s' has a batch dim of %" PRId64, ds->in[i].v->name, b);
		if (fixed && b != fixed)
			return ir_diag_err(d, IR_ERR, "inputs '%s' and '%s' fix different batch dims (%" PRId64 " and %" PRId64 ")",
					   who, ds->in[i].v->name, fixed, b);
		fixed = b;
		who = ds->in[i].v->name;
	}
	if (want < 0)
		return ir_diag_err(d, IR_ERR, "--batch %d: must be at least 1", want);
	if (want && fixed && want != fixed)
		return ir_diag_err(d, IR_ERR, "--batch %d: input '%s' fixes its batch dim to %" PRId64, want, who, fixed);
	ds->batch = want ? want : fixed ? (int)fixed : EXEC_DATA_BATCH;
	ds->batch_fixed = fixed != 0;
	return 0;
}

/* Batches and samples fed from ds->total. */
static void plan_batches(struct exec_data *ds, struct ir_diag *d)
{
	uint64_t b = (uint64_t)ds->batch, nb;
	if (ds->batch_fixed && ds->kind != DS_RANDOM) {
		nb = ds->total / b;
		uint64_t left = ds->total - nb * b;
		if (left && (!ds->max_batches || nb < (uint64_t)ds->max_batches)) {
			char nb1[32];
			ir_diag_warn(d, "%s: the last %s samples are not used (the model's batch dim is fixed to %d)",
				     ds->spec, num_str(left, nb1, sizeof(nb1)), ds->batch);
		}
	} else {
		nb = (ds->total + b - 1) / b;
	}
	if (ds->max_batches && nb > (uint64_t)ds->max_batches)
		nb = (uint64_t)ds->max_batches;
	if (nb > INT32_MAX)
		nb = INT32_MAX;
	ds->n_batches = (int)nb;
	ds->samples = nb * b < ds->total || ds->kind == DS_RANDOM ? nb * b : ds->total;
	if (ds->kind == DS_RANDOM && !ds->batch_fixed && ds->samples > ds->total)
		ds->samples = ds->total;
}

/* ------------------------------------------------------------------------ */
/* Arrays (.npy, .npz, folders of them)                                      */
/* ------------------------------------------------------------------------ */

/* Checks one array for input `in` and counts its samples. */
static int check_array(const struct ds_file *f, struct ds_input *in, const struct exec_npy_loc *l, uint64_t *samples,
		       struct ir_diag *d)
{
	char ab[256], ib[256], whose[320];
	const struct ir_value *v = in->v;
	if (f->npz)
		snprintf(whose, sizeof(whose), "%s: array '%s'", f->path, l->name);
	else
		snprintf(whose, sizeof(whose), "%s", f->path);
	ir_dims_str(l->rank, l->dims, ab, sizeof(ab));
	input_dims_str(v, ib, sizeof(ib));
	if (!conv_allowed(l->dtype, in->dtype))
		return ir_diag_err(d, IR_ERR, "%s: %s %s, input '%s' needs %s%s", whose, ir_dtype_name(l->dtype), ab,
				   v->name, ir_dtype_name(in->dtype), ib);
	const struct ir_type *ty = &v->type;
	int srank;
	const int64_t *sd;
	if (ty->rank < 0 || l->rank == ty->rank) {
		if (l->rank < 1)
			return ir_diag_err(d, IR_ERR, "%s: a scalar, input '%s' needs %s", whose, v->name, ib);
		*samples = (uint64_t)l->dims[0];
		srank = l->rank - 1;
		sd = l->dims + 1;
	} else if (l->rank == ty->rank - 1) {
		*samples = 1;
		srank = l->rank;
		sd = l->dims;
	} else {
		return ir_diag_err(d, IR_ERR, "%s: %s %s, input '%s' needs %s", whose, ir_dtype_name(l->dtype), ab, v->name, ib);
	}
	for (int j = 0; ty->rank >= 0 && j < srank; j++)
		if (ty->dims[j + 1].kind == IR_DIM_VALUE && ty->dims[j + 1].value != sd[j])
			return ir_diag_err(d, IR_ERR, "%s: %s %s, input '%s' needs %s", whose, ir_dtype_name(l->dtype), ab,
					   v->name, ib);
	if (in->have_sdims) {
		if (in->srank != srank || memcmp(in->sdims, sd, sizeof(int64_t) * (size_t)srank)) {
			char b1[256], b2[256];
			return ir_diag_err(d, IR_ERR, "%s: samples of %s, the files before have samples of %s (mixed shapes)",
					   whose, ir_dims_str(srank, sd, b1, sizeof(b1)),
					   ir_dims_str(in->srank, in->sdims, b2, sizeof(b2)));
		}
	} else {
		uint64_t ps = 1;
		for (int j = 0; j < srank; j++)
			if (__builtin_mul_overflow(ps, (uint64_t)sd[j], &ps))
				return ir_diag_err(d, IR_ERR, "%s: the sample size overflows", whose);
		in->have_sdims = true;
		in->srank = srank;
		memcpy(in->sdims, sd, sizeof(int64_t) * (size_t)srank);
		in->per_sample = ps;
	}
	return 0;
}

/* Reads the headers of one array file and pairs its arrays with the inputs. */
static int scan_array_file(struct exec_data *ds, struct ds_file *f, struct ir_diag *d)
{
	int rc;
	f->npz = ends_with(f->path, ".npz");
	if (f->npz) {
		rc = exec_npz_locate(f->path, &f->locs, &f->n_locs, d);
	} else {
		f->locs = calloc(1, sizeof(*f->locs));
		if (!f->locs)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		f->n_locs = 1;
		rc = exec_npy_locate(f->path, f->locs, d);
	}
	if (rc)
		return rc;
	if (!f->npz && ds->n_in != 1)
		return ir_diag_err(d, IR_ERR, "%s: one array, the model has %d inputs (use an .npz with arrays named after them)",
				   f->path, ds->n_in);
	if (!(f->loc = calloc((size_t)ds->n_in, sizeof(*f->loc))))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	uint64_t samples = 0;
	for (int i = 0; i < ds->n_in; i++) {
		const struct exec_npy_loc *l = NULL;
		if (!f->npz) {
			l = &f->locs[0];
		} else {
			for (int k = 0; k < f->n_locs && !l; k++)
				if (!strcmp(f->locs[k].name, ds->in[i].v->name))
					l = &f->locs[k];
			if (!l && ds->n_in == 1 && f->n_locs == 1)
				l = &f->locs[0];
			if (!l) {
				char names[256] = "";
				size_t o = 0;
				for (int k = 0; k < f->n_locs && o < sizeof(names); k++)
					o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", k ? ", " : "", f->locs[k].name);
				return ir_diag_err(d, IR_ERR, "%s: no array named '%s' (it has %s)", f->path, ds->in[i].v->name,
						   f->n_locs ? names : "none");
			}
		}
		uint64_t s = 0;
		if ((rc = check_array(f, &ds->in[i], l, &s, d)))
			return rc;
		if (i && s != samples)
			return ir_diag_err(d, IR_ERR, "%s: arrays '%s' and '%s' hold different numbers of samples (%" PRIu64
					   " and %" PRIu64 ")", f->path, f->loc[0].name ? f->loc[0].name : "?",
					   l->name ? l->name : "?", samples, s);
		samples = s;
		f->loc[i] = *l;
		if (l->deflated || l->fortran)
			f->whole = true;
	}
	f->samples = samples;
	return 0;
}

static void drop_whole(struct exec_data *ds)
{
	if (!ds->whole)
		return;
	for (int i = 0; i < ds->n_in; i++)
		ir_tensor_unref(ds->whole[i]);
	free(ds->whole);
	ds->whole = NULL;
	ds->whole_file = -1;
}

/* Reads the arrays of a file that cannot be read in pieces, whole. */
static int load_whole(struct exec_data *ds, int fi, struct ir_diag *d)
{
	if (ds->whole && ds->whole_file == fi)
		return 0;
	drop_whole(ds);
	struct ds_file *f = &ds->files[fi];
	if (!(ds->whole = calloc((size_t)ds->n_in, sizeof(*ds->whole))))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	ds->whole_file = fi;
	int rc = 0;
	if (!f->npz) {
		rc = exec_npy_read(f->path, &ds->whole[0], d);
	} else {
		struct exec_named_tensor *a = NULL;
		int n = 0;
		if ((rc = exec_npz_read(f->path, &a, &n, d)))
			return rc;
		for (int i = 0; i < ds->n_in; i++)
			for (int k = 0; k < n; k++)
				if (!strcmp(a[k].name, f->loc[i].name)) {
					ds->whole[i] = a[k].t;
					ir_tensor_ref(a[k].t);
					break;
				}
		exec_named_free(a, n);
	}
	for (int i = 0; !rc && i < ds->n_in; i++) {
		const struct exec_npy_loc *l = &f->loc[i];
		const struct ir_tensor *t = ds->whole[i];
		if (!t || t->dtype != l->dtype || t->rank != l->rank ||
		    memcmp(t->dims, l->dims, sizeof(int64_t) * (size_t)l->rank))
			rc = ir_diag_err(d, IR_ERR, "%s: the file changed while it was read", f->path);
	}
	if (rc)
		drop_whole(ds);
	return rc;
}

/* Copies samples [row, row + k) of file fi's array for input i into t from sample `at` on. */
static int copy_rows(struct exec_data *ds, int fi, int i, uint64_t row, uint64_t k, struct ir_tensor *t, uint64_t at,
		     struct ir_diag *d)
{
	struct ds_file *f = &ds->files[fi];
	const struct exec_npy_loc *l = &f->loc[i];
	struct ds_input *in = &ds->in[i];
	uint64_t ps = in->per_sample, n = k * ps;
	char whose[320];
	if (f->npz)
		snprintf(whose, sizeof(whose), "%s: array '%s'", f->path, l->name);
	else
		snprintf(whose, sizeof(whose), "%s", f->path);
	struct conv_ctx cx = { whose, in->v->name, row, ps };
	if (!n)
		return 0;
	void *dst = ir_tensor_mutable(t);
	if (f->whole) {
		int rc = load_whole(ds, fi, d);
		if (rc)
			return rc;
		const struct ir_tensor *w = ds->whole[i];
		size_t es = (size_t)ir_dtype_bits(w->dtype) / 8;
		return conv_elems((const char *)ir_tensor_data(w) + row * ps * es, w->dtype, dst, in->dtype, at * ps, n, &cx, d);
	}
	if (ds->fd_file != fi) {
		if (ds->fd >= 0)
			close(ds->fd);
		ds->fd_file = -1;
		ds->fd = open(f->path, O_RDONLY | O_CLOEXEC);
		if (ds->fd < 0) {
			char eb[128];
			return ir_diag_err(d, IR_EIO, "cannot open '%s': %s", f->path, ir_errstr(errno, eb, sizeof(eb)));
		}
		ds->fd_file = fi;
	}
	if (l->dtype == in->dtype) {
		size_t es = (size_t)ir_dtype_bits(in->dtype) / 8;
		return exec_npy_read_elems(ds->fd, f->path, l, row * ps, n, (char *)dst + at * ps * es, d);
	}
	void *tmp = malloc((size_t)(n * l->esize));
	if (!tmp)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int rc = exec_npy_read_elems(ds->fd, f->path, l, row * ps, n, tmp, d);
	if (!rc)
		rc = conv_elems(tmp, l->dtype, dst, in->dtype, at * ps, n, &cx, d);
	free(tmp);
	return rc;
}

static int next_arrays(struct exec_data *ds, struct exec_values *inputs, int *n_out, struct ir_diag *d)
{
	uint64_t n = ds->samples - ds->fed;
	if (n > (uint64_t)ds->batch)
		n = (uint64_t)ds->batch;
	struct ir_tensor **t = calloc((size_t)ds->n_in, sizeof(*t));
	if (!t)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int rc = 0;
	for (int i = 0; i < ds->n_in && !rc; i++) {
		int64_t dims[IR_MAX_RANK];
		dims[0] = (int64_t)n;
		memcpy(dims + 1, ds->in[i].sdims, sizeof(int64_t) * (size_t)ds->in[i].srank);
		if (!(t[i] = ir_tensor_new(ds->in[i].dtype, ds->in[i].srank + 1, dims, d)))
			rc = IR_ENOMEM;
	}
	uint64_t at = 0;
	while (!rc && at < n) {
		if (ir_interrupted) {
			rc = ir_diag_err(d, IR_EINTR, "interrupted");
			break;
		}
		if (ds->fi >= ds->n_files) {
			rc = ir_diag_err(d, IR_ERR, "%s: the data ended early", ds->spec);
			break;
		}
		struct ds_file *f = &ds->files[ds->fi];
		uint64_t k = f->samples - ds->row;
		if (k > n - at)
			k = n - at;
		for (int i = 0; i < ds->n_in && !rc; i++)
			rc = copy_rows(ds, ds->fi, i, ds->row, k, t[i], at, d);
		at += k;
		ds->row += k;
		if (ds->row >= f->samples) {
			ds->fi++;
			ds->row = 0;
			drop_whole(ds);
		}
	}
	for (int i = 0; i < ds->n_in && !rc; i++)
		if (exec_values_add_tensor(inputs, ds->in[i].v->name, t[i]))
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
	for (int i = 0; i < ds->n_in; i++)
		ir_tensor_unref(t[i]);
	free(t);
	if (rc)
		return rc;
	*n_out = (int)n;
	ds->fed += n;
	return 1;
}

/* ------------------------------------------------------------------------ */
/* ONNX test data (input_N.pb, test_data_set_N folders)                      */
/* ------------------------------------------------------------------------ */

/* Reads one set into `vals`, in the inputs' dtypes, checked against the graph. */
static int read_set(struct exec_data *ds, const struct ds_file *f, struct exec_values *vals, uint64_t *samples,
		    struct ir_diag *d)
{
	int rc = exec_read_test_dir(ds->m, f->path, vals, NULL, d);
	if (rc)
		return rc;
	for (int i = 0; i < vals->n; i++) {
		struct kern_value *kv = &vals->a[i].v;
		const struct ir_value *v = ir_value_find(ds->m->graph, vals->a[i].name);
		if (kv->kind != KV_TENSOR || !v || v->type.kind != IR_TYPE_TENSOR || !v->type.elem)
			continue;
		if ((rc = conv_tensor(&kv->t, v->type.elem, f->path, v->name, d)))
			return rc;
	}
	if ((rc = exec_check_inputs(ds->m, vals, d))) {
		ir_diag_prefix(d, "%s", f->path);
		return rc;
	}
	const struct kern_value *first = exec_values_find(vals, ds->in[0].v->name);
	*samples = first && first->kind == KV_TENSOR && first->t->rank > 0 ? (uint64_t)first->t->dims[0] : 1;
	return 0;
}

static int next_testdata(struct exec_data *ds, struct exec_values *inputs, int *n_out, struct ir_diag *d)
{
	uint64_t s = 0;
	int rc = read_set(ds, &ds->files[ds->fi], inputs, &s, d);
	if (rc)
		return rc;
	ds->fi++;
	ds->fed += s;
	*n_out = s > INT32_MAX ? INT32_MAX : (int)s;
	return 1;
}

/* ------------------------------------------------------------------------ */
/* Images                                                                    */
/* ------------------------------------------------------------------------ */

/* Checks the input against images and the preprocessing; fixes C, H, W and the layout. */
static int setup_images(struct exec_data *ds, struct ir_diag *d)
{
	char ib[256];
	if (ds->n_in != 1)
		return ir_diag_err(d, IR_ERR, "%s: images feed one-input models, this one has %d inputs", ds->spec, ds->n_in);
	const struct ir_value *v = ds->in[0].v;
	const struct ir_type *ty = &v->type;
	if (ty->rank != 4)
		return ir_diag_err(d, IR_ERR, "%s: images need an input of [N,C,H,W] or [N,H,W,C], input '%s' is %s",
				   ds->spec, v->name, input_dims_str(v, ib, sizeof(ib)));
	if (!is_numeric(ds->in[0].dtype))
		return ir_diag_err(d, IR_ERR, "%s: images cannot feed input '%s' of %s", ds->spec, v->name,
				   ir_dtype_name(ds->in[0].dtype));
	const struct pp *pp = &ds->pp;
	int64_t dv[4];
	for (int j = 0; j < 4; j++)
		dv[j] = ty->dims[j].kind == IR_DIM_VALUE ? ty->dims[j].value : 0;
	bool c1 = dv[1] == 1 || dv[1] == 3, c3 = dv[3] == 1 || dv[3] == 3;
	if (pp->layout)
		ds->nhwc = pp->layout == 2;
	else
		ds->nhwc = !c1 && c3;
	int64_t c = ds->nhwc ? dv[3] : dv[1], h = ds->nhwc ? dv[1] : dv[2], w = ds->nhwc ? dv[2] : dv[3];
	if (c && c != 1 && c != 3)
		return ir_diag_err(d, IR_ERR, "%s: input '%s' %s has %" PRId64 " channels in %s layout: images give 1 or 3",
				   ds->spec, v->name, input_dims_str(v, ib, sizeof(ib)), c, ds->nhwc ? "nhwc" : "nchw");
	if (pp->gray == 1 && c == 3)
		return ir_diag_err(d, IR_ERR, "--preprocess gray=1: input '%s' %s takes 3 channels", v->name,
				   input_dims_str(v, ib, sizeof(ib)));
	if (pp->gray == 0 && c == 1)
		return ir_diag_err(d, IR_ERR, "--preprocess gray=0: input '%s' %s takes 1 channel", v->name,
				   input_dims_str(v, ib, sizeof(ib)));
	if (!c)
		c = pp->gray == 1 ? 1 : 3;
	if (h > 16384 || w > 16384)
		return ir_diag_err(d, IR_ERR, "input '%s' %s: images of at most 16384x16384", v->name,
				   input_dims_str(v, ib, sizeof(ib)));
	ds->img_c = (int)c;
	ds->img_h = (int)h;
	ds->img_w = (int)w;
	ds->img_fixed = h && w;
	if ((pp->n_mean == 3 || pp->n_std == 3) && c == 1)
		return ir_diag_err(d, IR_ERR, "--preprocess: %s has 3 values, the images have 1 channel",
				   pp->n_mean == 3 ? "mean" : "std");
	ds->scale = pp->has_scale ? pp->scale : ir_dtype_is_float(ds->in[0].dtype) ? 1.0 / 255 : 1.0;
	/* the size the preprocessing gives, when it does not depend on the image */
	int fw = pp->crop_w ? pp->crop_w : pp->resize_w, fh = pp->crop_w ? pp->crop_h : pp->resize_h;
	if (fw && ((w && fw != w) || (h && fh != h)))
		return ir_diag_err(d, IR_ERR, "--preprocess gives %dx%d images, input '%s' %s needs %" PRId64 "x%" PRId64,
				   fw, fh, v->name, input_dims_str(v, ib, sizeof(ib)), w ? w : fw, h ? h : fh);
	if (fw) {
		ds->img_w = fw;
		ds->img_h = fh;
	}
	/* the canonical form, hashed with the images */
	char mb[96] = "", sb[96] = "";
	size_t o = 0;
	for (int i = 0; i < pp->n_mean; i++)
		o += (size_t)snprintf(mb + o, sizeof(mb) - o, "%s%.17g", i ? "," : "", pp->mean[i]);
	o = 0;
	for (int i = 0; i < pp->n_std; i++)
		o += (size_t)snprintf(sb + o, sizeof(sb) - o, "%s%.17g", i ? "," : "", pp->std[i]);
	snprintf(ds->pp_canon, sizeof(ds->pp_canon), "resize=%d,%dx%d;crop=%dx%d;mean=%s;std=%s;scale=%.17g;%s;%s;c=%d",
		 pp->resize_short, pp->resize_w, pp->resize_h, pp->crop_w, pp->crop_h, mb, sb, ds->scale,
		 ds->nhwc ? "nhwc" : "nchw", pp->bgr ? "bgr" : "rgb", ds->img_c);
	return 0;
}

/* Bilinear taps along one axis: output i of n from a source of `src`
 * pixels resized to `rn`, starting at `off` in the resized image. */
static void taps(int n, int off, int rn, int src, int *i0, int *i1, float *f)
{
	double s = (double)src / rn;
	for (int i = 0; i < n; i++) {
		double x = (i + off + 0.5) * s - 0.5;
		if (x < 0)
			x = 0;
		int a = (int)x;
		if (a > src - 1)
			a = src - 1;
		i0[i] = a;
		i1[i] = a + 1 < src ? a + 1 : a;
		f[i] = i1[i] == a ? 0.0f : (float)(x - a);
	}
}

/*
 * Preprocesses one decoded image (h x w x c bytes) into sample `slot` of t:
 * resize (bilinear, half-pixel centres), centre crop, channel order, then
 * (x * scale - mean) / std per channel, in the input's layout and dtype.
 */
static int put_image(struct exec_data *ds, const char *name, const uint8_t *px, int h, int w, int c,
		     struct ir_tensor *t, int slot, struct ir_diag *d)
{
	const struct pp *pp = &ds->pp;
	int rh, rw;
	if (pp->resize_short) {
		int64_t n = pp->resize_short;
		if (w <= h) {
			rw = (int)n;
			rh = (int)(n * h / w);
		} else {
			rh = (int)n;
			rw = (int)(n * w / h);
		}
		if (rh < 1)
			rh = 1;
		if (rw < 1)
			rw = 1;
	} else if (pp->resize_w) {
		rw = pp->resize_w;
		rh = pp->resize_h;
	} else if (!pp->crop_w && ds->img_fixed) {
		rh = ds->img_h;
		rw = ds->img_w;
	} else {
		rh = h;
		rw = w;
	}
	if (rh > 16384 || rw > 16384)
		return ir_diag_err(d, IR_ERR, "%s: %dx%d after resize, larger than 16384x16384", name, rw, rh);
	int ch = pp->crop_w ? pp->crop_h : rh, cw = pp->crop_w ? pp->crop_w : rw;
	if (ch > rh || cw > rw)
		return ir_diag_err(d, IR_ERR, "%s: %dx%d after resize, smaller than crop=%dx%d", name, rw, rh, cw, ch);
	if (ds->img_h && ds->img_w && (ch != ds->img_h || cw != ds->img_w))
		return ir_diag_err(d, IR_ERR, "%s: %dx%d image, the %s %dx%d (give --preprocess resize=WxH)", name, cw, ch,
				   ds->img_fixed ? "input needs" : "images before are", ds->img_w, ds->img_h);
	int top = (int)lrint((rh - ch) / 2.0), left = (int)lrint((rw - cw) / 2.0);
	int *y0 = malloc(sizeof(int) * (size_t)ch * 2), *x0 = malloc(sizeof(int) * (size_t)cw * 2);
	float *fy = malloc(sizeof(float) * (size_t)ch), *fx = malloc(sizeof(float) * (size_t)cw);
	if (!y0 || !x0 || !fy || !fx) {
		free(y0);
		free(x0);
		free(fy);
		free(fx);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	int *y1 = y0 + ch, *x1 = x0 + cw;
	taps(ch, top, rh, h, y0, y1, fy);
	taps(cw, left, rw, w, x0, x1, fx);
	int C = ds->img_c, dt = ds->in[0].dtype;
	double lo = 0, hi = 0;
	bool is_int = !ir_dtype_is_float(dt);
	if (is_int)
		int_range(dt, &lo, &hi);
	void *dst = ir_tensor_mutable(t);
	uint64_t base = (uint64_t)slot * (uint64_t)C * (uint64_t)ch * (uint64_t)cw;
	for (int k = 0; k < C; k++) {
		int sc = C == 3 && pp->bgr ? 2 - k : k;   /* the decoded channel feeding output channel k */
		if (sc >= c)
			sc = c - 1;
		double mean = pp->n_mean ? pp->mean[pp->n_mean == 3 ? k : 0] : 0;
		double sd = pp->n_std ? pp->std[pp->n_std == 3 ? k : 0] : 1;
		for (int y = 0; y < ch; y++) {
			const uint8_t *r0 = px + (size_t)y0[y] * (size_t)w * (size_t)c;
			const uint8_t *r1 = px + (size_t)y1[y] * (size_t)w * (size_t)c;
			for (int x = 0; x < cw; x++) {
				float a = r0[(size_t)x0[x] * (size_t)c + (size_t)sc], b = r0[(size_t)x1[x] * (size_t)c + (size_t)sc];
				float e = r1[(size_t)x0[x] * (size_t)c + (size_t)sc], g = r1[(size_t)x1[x] * (size_t)c + (size_t)sc];
				float top_v = a + (b - a) * fx[x], bot_v = e + (g - e) * fx[x];
				double val = ((double)(top_v + (bot_v - top_v) * fy[y]) * ds->scale - mean) / sd;
				uint64_t idx = ds->nhwc ? base + ((uint64_t)y * (uint64_t)cw + (uint64_t)x) * (uint64_t)C + (uint64_t)k
							: base + ((uint64_t)k * (uint64_t)ch + (uint64_t)y) * (uint64_t)cw + (uint64_t)x;
				if (dt == IR_FLOAT) {
					((float *)dst)[idx] = (float)val;
				} else if (is_int) {
					val = nearbyint(val);
					store_whole(dt, dst, idx, val < lo ? lo : val > hi ? hi : isnan(val) ? 0 : val);
				} else {
					kern_store_f64(dt, dst, idx, val);
				}
			}
		}
	}
	free(y0);
	free(x0);
	free(fy);
	free(fx);
	return 0;
}

/* Reads, decodes and preprocesses one image file into sample `slot` of *t
 * (made here at the first image, when the size is known). */
static int load_image(struct exec_data *ds, const struct ds_file *f, struct ir_tensor **t, int slot, int b,
		      struct ir_diag *d)
{
	unsigned char *buf;
	size_t n;
	int rc = exec_read_whole(f->path, IMG_MAX_FILE, &buf, &n, d);
	if (rc)
		return rc;
	uint8_t *px = NULL;
	int h = 0, w = 0, c = 0;
	rc = exec_image_decode(buf, n, f->path, ds->img_c, &px, &h, &w, &c, d);
	free(buf);
	if (rc)
		return rc;
	if (!ds->img_h && !ds->pp.resize_short && !ds->pp.resize_w && !ds->pp.crop_w) {
		/* a symbolic size and nothing to resize to: the first image decides */
		ds->img_h = h;
		ds->img_w = w;
	}
	if (!*t) {
		/* the size the first image gives (resize=N with a symbolic input) */
		int ch = ds->img_h, cw = ds->img_w;
		if (!ch) {
			const struct pp *pp = &ds->pp;
			int64_t s = pp->resize_short;
			ch = pp->crop_w ? pp->crop_h : w <= h ? (int)(s * h / w) : (int)s;
			cw = pp->crop_w ? pp->crop_w : w <= h ? (int)s : (int)(s * w / h);
			ds->img_h = ch < 1 ? 1 : ch;
			ds->img_w = cw < 1 ? 1 : cw;
		}
		int64_t dims[4] = { b, ds->nhwc ? ds->img_h : ds->img_c, ds->nhwc ? ds->img_w : ds->img_h,
				    ds->nhwc ? ds->img_c : ds->img_w };
		if (!(*t = ir_tensor_new(ds->in[0].dtype, 4, dims, d))) {
			free(px);
			return IR_ENOMEM;
		}
	}
	rc = put_image(ds, f->path, px, h, w, c, *t, slot, d);
	free(px);
	return rc;
}

static int next_images(struct exec_data *ds, struct exec_values *inputs, int *n_out, struct ir_diag *d)
{
	int b = ds->batch, got = 0, rc = 0;
	if (!ds->batch_fixed && b > ds->n_files - ds->fi)
		b = ds->n_files - ds->fi;   /* no larger than what is left */
	struct ir_tensor *t = NULL;
	struct ir_diag local;
	ir_diag_init(&local);
	while (got < b && ds->fi < ds->n_files) {
		if (ir_interrupted) {
			rc = ir_diag_err(d, IR_EINTR, "interrupted");
			break;
		}
		rc = load_image(ds, &ds->files[ds->fi], &t, got, b, &local);
		ds->fi++;
		if (!rc)
			got++;
		if ((rc = take_diag(d, &local, rc, ds->skip_bad)))
			break;
	}
	if (rc || !got) {
		ir_tensor_unref(t);
		return rc ? rc : 0;
	}
	if (got < b && ds->batch_fixed) {
		ir_diag_warn(d, "%s: the last %d images are not used (the model's batch dim is fixed to %d)", ds->spec, got, b);
		ir_tensor_unref(t);
		return 0;
	}
	if (got < b) {
		/* a short last batch: the first `got` samples */
		int64_t dims[4];
		memcpy(dims, t->dims, sizeof(dims));
		dims[0] = got;
		struct ir_tensor *s = ir_tensor_new(t->dtype, 4, dims, d);
		if (!s) {
			ir_tensor_unref(t);
			return IR_ENOMEM;
		}
		memcpy(ir_tensor_mutable(s), ir_tensor_data(t), s->nbytes);
		ir_tensor_unref(t);
		t = s;
	}
	rc = exec_values_add_tensor(inputs, ds->in[0].v->name, t);
	ir_tensor_unref(t);
	if (rc)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	*n_out = got;
	ds->fed += (uint64_t)got;
	return 1;
}

/* ------------------------------------------------------------------------ */
/* Random data                                                               */
/* ------------------------------------------------------------------------ */

static int setup_random(struct exec_data *ds, const struct exec_data_opts *o, struct ir_diag *d)
{
	ds->seed = o->seed;
	ds->total = o->random_samples > 0 ? (uint64_t)o->random_samples : RANDOM_SAMPLES;
	if (o->random_samples < 0)
		return ir_diag_err(d, IR_ERR, "random: %d samples", o->random_samples);
	int n = o->n_shapes > 0 ? o->n_shapes : 0;
	ds->shapes = calloc((size_t)n + (size_t)ds->n_in + 1, sizeof(*ds->shapes));
	if (!ds->shapes)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	for (int i = 0; i < n; i++) {
		ds->shapes[i] = o->shapes[i];
		if (!(ds->shapes[i].name = strdup(o->shapes[i].name)))
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		ds->n_shapes++;
	}
	/* without --batch or a fixed dim, a --shape of an input or of its batch symbol gives the batch */
	if (!o->batch && !ds->batch_fixed) {
		for (int i = 0; i < ds->n_in; i++) {
			const struct ir_type *ty = &ds->in[i].v->type;
			for (int k = 0; k < n; k++) {
				const struct exec_shape *s = &ds->shapes[k];
				bool own = !strcmp(s->name, ds->in[i].v->name) && s->rank >= 1 && s->rank == ty->rank;
				bool sym = ty->rank >= 1 && ty->dims[0].kind == IR_DIM_PARAM && ty->dims[0].param &&
					   !strcmp(s->name, ty->dims[0].param) && (s->rank == 1 || s->rank == -1);
				if ((own || sym) && s->dims[0] >= 1 && s->dims[0] <= INT32_MAX) {
					ds->batch = (int)s->dims[0];
					i = ds->n_in;
					break;
				}
			}
		}
	}
	return 0;
}

/* The shapes for a batch of b: the user's, with every batch dim set to b. */
static int random_shapes(struct exec_data *ds, int b, struct exec_shape **out, int *n_out)
{
	struct exec_shape *sh = calloc((size_t)ds->n_shapes + (size_t)ds->n_in + 1, sizeof(*sh));
	if (!sh)
		return IR_ENOMEM;
	int n = 0;
	/* the batch symbols first: exec_random_inputs takes the first match */
	for (int i = 0; i < ds->n_in; i++) {
		const struct ir_type *ty = &ds->in[i].v->type;
		if (ty->rank >= 1 && ty->dims[0].kind == IR_DIM_PARAM && ty->dims[0].param) {
			sh[n].name = ty->dims[0].param;
			sh[n].rank = 1;
			sh[n].dims[0] = b;
			n++;
		}
	}
	for (int k = 0; k < ds->n_shapes; k++) {
		sh[n] = ds->shapes[k];
		const struct ir_value *v = ir_value_find(ds->m->graph, sh[n].name);
		if (v && v->is_input && sh[n].rank >= 1 && sh[n].rank == v->type.rank)
			sh[n].dims[0] = b;
		n++;
	}
	*out = sh;
	*n_out = n;
	return 0;
}

static int next_random(struct exec_data *ds, struct exec_values *inputs, int *n_out, struct ir_diag *d)
{
	uint64_t left = ds->samples - ds->fed;
	int b = left < (uint64_t)ds->batch ? (int)left : ds->batch;
	struct exec_shape *sh;
	int n_sh;
	if (random_shapes(ds, b, &sh, &n_sh))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	/* the warnings of the first batch only (they are the same each time) */
	struct ir_diag local;
	ir_diag_init(&local);
	int rc = exec_random_inputs(ds->m, ds->seed + (uint64_t)ds->given, sh, n_sh, NULL, inputs, &local);
	free(sh);
	if (!rc && (rc = exec_check_inputs(ds->m, inputs, &local)))
		ir_diag_prefix(&local, "random");
	if (ds->given && !rc) {
		ir_diag_clear(&local);
		ir_diag_init(&local);
	}
	if ((rc = take_diag(d, &local, rc, false)))
		return rc;
	*n_out = b;
	ds->fed += (uint64_t)b;
	return 1;
}

/* ------------------------------------------------------------------------ */
/* Finding the files                                                         */
/* ------------------------------------------------------------------------ */

static int add_file(struct exec_data *ds, const char *path, const char *rel, struct ir_diag *d)
{
	struct ds_file *a = realloc(ds->files, sizeof(*a) * (size_t)(ds->n_files + 1));
	if (!a)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	ds->files = a;
	struct ds_file *f = &a[ds->n_files];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	f->rel = strdup(rel);
	ds->n_files++;
	if (!f->path || !f->rel)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "test_data_set_12" -> 12 (sets are taken in numeric order); -1 if not one. */
static long set_number(const char *name)
{
	const char *p = name + strlen("test_data_set_");
	if (strncmp(name, "test_data_set_", strlen("test_data_set_")) || !isdigit((unsigned char)*p))
		return -1;
	char *end;
	long n = strtol(p, &end, 10);
	return *end ? -1 : n;
}

static int cmp_set(const void *a, const void *b)
{
	long x = set_number(*(char *const *)a), y = set_number(*(char *const *)b);
	return x < y ? -1 : x > y;
}

/* Lists the folder and decides what kind of dataset it is. */
static int scan_dir(struct exec_data *ds, const char *dir, struct ir_diag *d)
{
	char eb[128];
	DIR *dp = opendir(dir);
	if (!dp)
		return ir_diag_err(d, IR_EIO, "cannot open '%s': %s", dir, ir_errstr(errno, eb, sizeof(eb)));
	char **names = NULL;
	int n = 0, cap = 0, n_arr = 0, n_img = 0, n_set = 0, rc = 0;
	bool has_pb = false;
	struct dirent *e;
	while ((e = readdir(dp))) {
		const char *nm = e->d_name;
		if (nm[0] == '.')
			continue;
		if (!strcmp(nm, "input_0.pb"))
			has_pb = true;
		bool set = set_number(nm) >= 0;
		if (!set && !is_array_name(nm) && !is_image_name(nm))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **a = realloc(names, sizeof(*a) * (size_t)cap);
			if (!a) {
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
				break;
			}
			names = a;
		}
		if (!(names[n] = strdup(nm))) {
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			break;
		}
		n++;
		n_set += set;
		n_arr += is_array_name(nm);
		n_img += is_image_name(nm);
	}
	closedir(dp);
	if (!rc) {
		if (has_pb) {
			ds->kind = DS_TESTDATA;
			rc = add_file(ds, dir, ".", d);
		} else if (n_set) {
			ds->kind = DS_TESTDATA;
			char **sets = malloc(sizeof(*sets) * (size_t)n_set);
			int k = 0;
			if (!sets)
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
			for (int i = 0; sets && i < n; i++)
				if (set_number(names[i]) >= 0)
					sets[k++] = names[i];
			if (sets)
				qsort(sets, (size_t)k, sizeof(*sets), cmp_set);
			for (int i = 0; !rc && i < k; i++) {
				char *p = path_join(dir, sets[i]);
				rc = p ? add_file(ds, p, sets[i], d) : ir_diag_err(d, IR_ENOMEM, "out of memory");
				free(p);
			}
			free(sets);
		} else if (n_arr && n_img) {
			rc = ir_diag_err(d, IR_ERR, "%s: holds both arrays (.npy, .npz) and images: give one kind", dir);
		} else if (!n_arr && !n_img) {
			rc = ir_diag_err(d, IR_ERR, "%s: empty folder (no .npy, .npz, .png, .jpg or input_N.pb files)", dir);
		} else {
			ds->kind = n_arr ? DS_ARRAYS : DS_IMAGES;
			qsort(names, (size_t)n, sizeof(*names), cmp_str);
			for (int i = 0; !rc && i < n; i++) {
				if (set_number(names[i]) >= 0)
					continue;
				char *p = path_join(dir, names[i]);
				rc = p ? add_file(ds, p, names[i], d) : ir_diag_err(d, IR_ENOMEM, "out of memory");
				free(p);
			}
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* Reads the headers (arrays) or every set (test data) once and drops bad
 * files under skip_bad; counts the samples. */
static int scan_files(struct exec_data *ds, struct ir_diag *d)
{
	struct ir_diag local;
	ir_diag_init(&local);
	int kept = 0, rc = 0;
	for (int i = 0; i < ds->n_files; i++) {
		struct ds_file *f = &ds->files[i];
		if (ir_interrupted)
			return ir_diag_err(d, IR_EINTR, "interrupted");
		if (ds->kind == DS_ARRAYS) {
			rc = scan_array_file(ds, f, &local);
		} else if (ds->kind == DS_TESTDATA) {
			struct exec_values vals = { 0 };
			rc = read_set(ds, f, &vals, &f->samples, &local);
			exec_values_clear(&vals);
		} else {
			struct stat st;
			f->samples = 1;
			if (stat(f->path, &st) || !S_ISREG(st.st_mode))
				rc = ir_diag_err(&local, IR_ERR, "%s: not a regular file", f->path);
		}
		bool bad = rc != 0;
		if ((rc = take_diag(d, &local, rc, ds->skip_bad)))
			return rc;
		if (bad) {
			free(f->path);
			free(f->rel);
			free(f->loc);
			exec_npy_loc_free(f->locs, f->n_locs);
			continue;
		}
		ds->files[kept++] = *f;
		ds->total += f->samples;
	}
	ds->n_files = kept;
	if (!kept)
		return ir_diag_err(d, IR_ERR, "%s: no usable files", ds->spec);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The API                                                                   */
/* ------------------------------------------------------------------------ */

static void make_desc(struct exec_data *ds)
{
	char nb[32], sb[32];
	num_str(ds->samples, nb, sizeof(nb));
	switch (ds->kind) {
	case DS_RANDOM:
		snprintf(ds->desc, sizeof(ds->desc), "random (%s samples, seed %" PRIu64 ")", nb, ds->seed);
		break;
	case DS_ARRAYS:
		snprintf(ds->desc, sizeof(ds->desc), "%s (%s samples)", ds->spec, nb);
		break;
	case DS_TESTDATA:
		snprintf(ds->desc, sizeof(ds->desc), "%s (%s samples in %s test-data set%s)", ds->spec, nb,
			 num_str((uint64_t)ds->n_batches, sb, sizeof(sb)), ds->n_batches == 1 ? "" : "s");
		break;
	case DS_IMAGES:
		snprintf(ds->desc, sizeof(ds->desc), "%s (%s images)", ds->spec, nb);
		break;
	}
}

int exec_data_open(const struct ir_model *m, const struct exec_data_opts *o, struct exec_data **out,
		   struct ir_diag *d)
{
	*out = NULL;
	if (!o || !o->spec || !*o->spec)
		return ir_diag_err(d, IR_ERR, "no data given (--data=FILE|DIR|random)");
	struct exec_data *ds = calloc(1, sizeof(*ds));
	if (!ds)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	ds->m = m;
	ds->fd = -1;
	ds->fd_file = -1;
	ds->whole_file = -1;
	ds->max_batches = o->max_batches > 0 ? o->max_batches : 0;
	ds->skip_bad = o->skip_bad;
	int rc = 0;
	if (!(ds->spec = strdup(o->spec))) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = pp_parse(o->preprocess, &ds->pp, d)) || (rc = find_inputs(ds, d)) || (rc = choose_batch(ds, o->batch, d)))
		goto fail;
	if (!strcmp(o->spec, "random")) {
		ds->kind = DS_RANDOM;
		if ((rc = setup_random(ds, o, d)))
			goto fail;
	} else {
		struct stat st;
		char eb[128];
		if (stat(o->spec, &st)) {
			rc = ir_diag_err(d, IR_ERR, "cannot open '%s': %s", o->spec, ir_errstr(errno, eb, sizeof(eb)));
			goto fail;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = scan_dir(ds, o->spec, d);
		} else if (is_array_name(o->spec) || is_image_name(o->spec)) {
			ds->kind = is_array_name(o->spec) ? DS_ARRAYS : DS_IMAGES;
			const char *base = strrchr(o->spec, '/');
			rc = add_file(ds, o->spec, base ? base + 1 : o->spec, d);
		} else {
			rc = ir_diag_err(d, IR_ERR, "%s: not an .npy, .npz, .png or .jpg file, a folder or 'random'", o->spec);
		}
		if (rc)
			goto fail;
		if (ds->kind == DS_IMAGES && (rc = setup_images(ds, d)))
			goto fail;
		if ((rc = scan_files(ds, d)))
			goto fail;
	}
	if (o->preprocess && *o->preprocess && ds->kind != DS_IMAGES)
		ir_diag_warn(d, "--preprocess is for images: not used for %s", ds->spec);
	if (ds->kind == DS_TESTDATA) {
		/* a set is one batch as it is */
		if (o->batch && (uint64_t)o->batch != ds->files[0].samples)
			ir_diag_warn(d, "%s: test-data sets are fed as they are (--batch %d not used)", ds->spec, o->batch);
		ds->batch = ds->files[0].samples > INT32_MAX ? INT32_MAX : (int)ds->files[0].samples;
		ds->n_batches = ds->n_files;
		if (ds->max_batches && ds->n_batches > ds->max_batches)
			ds->n_batches = ds->max_batches;
		for (int i = 0; i < ds->n_batches; i++)
			ds->samples += ds->files[i].samples;
	} else {
		if (ds->total == 0) {
			rc = ir_diag_err(d, IR_ERR, "%s: no samples", ds->spec);
			goto fail;
		}
		if (ds->batch_fixed && ds->kind != DS_RANDOM && ds->total < (uint64_t)ds->batch) {
			char nb[32];
			rc = ir_diag_err(d, IR_ERR, "%s: %s samples, fewer than the model's fixed batch of %d", ds->spec,
					 num_str(ds->total, nb, sizeof(nb)), ds->batch);
			goto fail;
		}
		plan_batches(ds, d);
	}
	make_desc(ds);
	*out = ds;
	return 0;
fail:
	exec_data_free(ds);
	return rc;
}

void exec_data_free(struct exec_data *ds)
{
	if (!ds)
		return;
	drop_whole(ds);
	if (ds->fd >= 0)
		close(ds->fd);
	for (int i = 0; i < ds->n_files; i++) {
		free(ds->files[i].path);
		free(ds->files[i].rel);
		free(ds->files[i].loc);
		exec_npy_loc_free(ds->files[i].locs, ds->files[i].n_locs);
	}
	free(ds->files);
	for (int i = 0; i < ds->n_shapes; i++)
		free(ds->shapes[i].name);
	free(ds->shapes);
	free(ds->in);
	free(ds->spec);
	free(ds);
}

int exec_data_next(struct exec_data *ds, struct exec_values *inputs, int *n, struct ir_diag *d)
{
	exec_values_clear(inputs);
	*n = 0;
	if (ds->given >= ds->n_batches)
		return 0;
	if (ds->kind != DS_IMAGES && ds->fed >= ds->samples)
		return 0;
	if (ds->kind == DS_TESTDATA && ds->fi >= ds->n_files)
		return 0;
	int rc;
	switch (ds->kind) {
	case DS_RANDOM: rc = next_random(ds, inputs, n, d); break;
	case DS_ARRAYS: rc = next_arrays(ds, inputs, n, d); break;
	case DS_TESTDATA: rc = next_testdata(ds, inputs, n, d); break;
	default: rc = next_images(ds, inputs, n, d); break;
	}
	if (rc == 1 && (ds->kind == DS_ARRAYS || ds->kind == DS_IMAGES) && (rc = exec_check_inputs(ds->m, inputs, d)) == 0)
		rc = 1;
	if (rc == 1)
		ds->given++;
	else
		exec_values_clear(inputs);
	return rc;
}

void exec_data_rewind(struct exec_data *ds)
{
	ds->given = 0;
	ds->fed = 0;
	ds->fi = 0;
	ds->row = 0;
	drop_whole(ds);
}

uint64_t exec_data_samples(const struct exec_data *ds)
{
	return ds->samples;
}

int exec_data_batch(const struct exec_data *ds)
{
	return ds->batch;
}

const char *exec_data_desc(const struct exec_data *ds)
{
	return ds->desc;
}

bool exec_data_random(const struct exec_data *ds)
{
	return ds->kind == DS_RANDOM;
}

/* Hashes a file's contents (a read error is hashed as such: the hash then
 * differs from any readable file's). */
static uint64_t hash_file(uint64_t h, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ir_hash_bytes(h, "\0unreadable", 11);
	unsigned char buf[65536];
	uint64_t size = 0;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0)
				h = ir_hash_bytes(h, "\0unreadable", 11);
			break;
		}
		h = ir_hash_bytes(h, buf, (size_t)r);
		size += (uint64_t)r;
	}
	close(fd);
	return ir_hash_bytes(h, &size, sizeof(size));
}

/* The input_N.pb files of a test-data set, in name order. */
static uint64_t hash_set(uint64_t h, const char *dir)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return ir_hash_bytes(h, "\0unreadable", 11);
	char **names = NULL;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dp))) {
		if (strncmp(e->d_name, "input_", 6) || !ends_with(e->d_name, ".pb"))
			continue;
		char **a = realloc(names, sizeof(*a) * (size_t)(n + 1));
		if (!a)
			break;
		names = a;
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(dp);
	if (names)
		qsort(names, (size_t)n, sizeof(*names), cmp_str);
	for (int i = 0; i < n; i++) {
		char *p = path_join(dir, names[i]);
		h = ir_hash_bytes(h, names[i], strlen(names[i]) + 1);
		h = p ? hash_file(h, p) : ir_hash_bytes(h, "\0nomem", 6);
		free(p);
		free(names[i]);
	}
	free(names);
	return h;
}

const char *exec_data_hash(const struct exec_data *cds)
{
	/* computed when first asked for (it reads every file once); the
	 * dataset is never const where it was made, so the cache is written */
	struct exec_data *ds = (struct exec_data *)cds;
	if (ds->hashed)
		return ds->hash;
	uint64_t h = IR_HASH_SEED;
	static const char *kinds[] = { "random", "arrays", "testdata", "images" };
	h = ir_hash_bytes(h, kinds[ds->kind], strlen(kinds[ds->kind]) + 1);
	uint64_t fed = ds->samples;
	h = ir_hash_bytes(h, &fed, sizeof(fed));
	if (ds->kind == DS_RANDOM) {
		int64_t b = ds->batch;
		h = ir_hash_bytes(h, &ds->seed, sizeof(ds->seed));
		h = ir_hash_bytes(h, &b, sizeof(b));
		for (int i = 0; i < ds->n_shapes; i++) {
			const struct exec_shape *s = &ds->shapes[i];
			h = ir_hash_bytes(h, s->name, strlen(s->name) + 1);
			int64_t r = s->rank;
			h = ir_hash_bytes(h, &r, sizeof(r));
			if (s->rank > 0)
				h = ir_hash_bytes(h, s->dims, sizeof(int64_t) * (size_t)s->rank);
		}
		for (int i = 0; i < ds->n_in; i++)
			h = ir_hash_bytes(h, ds->in[i].v->name, strlen(ds->in[i].v->name) + 1);
	} else {
		if (ds->kind == DS_IMAGES)
			h = ir_hash_bytes(h, ds->pp_canon, strlen(ds->pp_canon) + 1);
		for (int i = 0; i < ds->n_files; i++) {
			const struct ds_file *f = &ds->files[i];
			h = ir_hash_bytes(h, f->rel, strlen(f->rel) + 1);
			h = ds->kind == DS_TESTDATA ? hash_set(h, f->path) : hash_file(h, f->path);
		}
	}
	snprintf(ds->hash, sizeof(ds->hash), "%016" PRIx64, h);
	ds->hashed = true;
	return ds->hash;
}

/* ------------------------------------------------------------------------ */
/* Labels                                                                    */
/* ------------------------------------------------------------------------ */

static int labels_npy(const char *path, int64_t **labels, uint64_t *n, struct ir_diag *d)
{
	struct ir_tensor *t = NULL;
	int rc = exec_npy_read(path, &t, d);
	if (rc)
		return rc;
	char sb[128];
	if (!(t->rank == 1 || (t->rank == 2 && t->dims[1] == 1))) {
		rc = ir_diag_err(d, IR_ERR, "%s: labels of shape %s: one per sample ([N] or [N,1])", path,
				 ir_dims_str(t->rank, t->dims, sb, sizeof(sb)));
		ir_tensor_unref(t);
		return rc;
	}
	if (!ir_dtype_is_int(t->dtype) && !ir_dtype_is_float(t->dtype)) {
		rc = ir_diag_err(d, IR_ERR, "%s: labels of %s: integers needed", path, ir_dtype_name(t->dtype));
		ir_tensor_unref(t);
		return rc;
	}
	int64_t *a = malloc(sizeof(*a) * (t->numel ? t->numel : 1));
	if (!a) {
		ir_tensor_unref(t);
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	const void *p = ir_tensor_data(t);
	for (uint64_t i = 0; i < t->numel; i++) {
		if (ir_dtype_is_int(t->dtype)) {
			if (!ir_elem_to_i64(t->dtype, p, i, &a[i])) {
				rc = ir_diag_err(d, IR_ERR, "%s: label %" PRIu64 " is too large", path, i);
				break;
			}
			continue;
		}
		double v = ir_elem_to_f64(t->dtype, p, i);
		if (!isfinite(v) || v != floor(v) || fabs(v) > 9007199254740992.0) {
			rc = ir_diag_err(d, IR_ERR, "%s: label %" PRIu64 " is %.9g, not a whole number", path, i, v);
			break;
		}
		a[i] = (int64_t)v;
	}
	uint64_t count = t->numel;
	ir_tensor_unref(t);
	if (rc) {
		free(a);
		return rc;
	}
	*labels = a;
	*n = count;
	return 0;
}

static int labels_text(const char *path, const unsigned char *buf, size_t size, int64_t **labels, uint64_t *n,
		       struct ir_diag *d)
{
	uint64_t cap = 0, count = 0, line = 0;
	int64_t *a = NULL;
	size_t at = 0;
	while (at < size) {
		size_t end = at;
		while (end < size && buf[end] != '\n')
			end++;
		line++;
		char tmp[64];
		size_t b = at, e = end;
		at = end + 1;
		while (b < e && isspace(buf[b]))
			b++;
		while (e > b && isspace(buf[e - 1]))
			e--;
		if (b == e || buf[b] == '#')
			continue;
		const unsigned char *hash = memchr(buf + b, '#', e - b);
		if (hash) {
			e = (size_t)(hash - buf);
			while (e > b && isspace(buf[e - 1]))
				e--;
		}
		char *endp = NULL;
		long long v = 0;
		bool ok = e - b < sizeof(tmp);
		if (ok) {
			memcpy(tmp, buf + b, e - b);
			tmp[e - b] = 0;
			errno = 0;
			v = strtoll(tmp, &endp, 10);
			ok = endp != tmp && !*endp && !errno;
		}
		if (!ok) {
			char shown[40];
			size_t k = e - b < sizeof(shown) - 4 ? e - b : sizeof(shown) - 4;
			for (size_t i = 0; i < k; i++)
				shown[i] = isprint(buf[b + i]) ? (char)buf[b + i] : '?';
			strcpy(shown + k, e - b > k ? "..." : "");
			free(a);
			return ir_diag_err(d, IR_ERR, "%s:%" PRIu64 ": '%s' is not an integer", path, line, shown);
		}
		if (count == cap) {
			cap = cap ? 2 * cap : 1024;
			int64_t *na = realloc(a, sizeof(*a) * cap);
			if (!na) {
				free(a);
				return ir_diag_err(d, IR_ENOMEM, "out of memory");
			}
			a = na;
		}
		a[count++] = v;
	}
	if (!count) {
		free(a);
		return ir_diag_err(d, IR_ERR, "%s: no labels", path);
	}
	*labels = a;
	*n = count;
	return 0;
}

int exec_read_labels(const char *path, int64_t **labels, uint64_t *n, struct ir_diag *d)
{
	*labels = NULL;
	*n = 0;
	unsigned char *buf;
	size_t size;
	int rc = exec_read_whole(path, LABELS_MAX_FILE, &buf, &size, d);
	if (rc)
		return rc;
	if (size >= 6 && !memcmp(buf, "\x93NUMPY", 6)) {
		free(buf);
		rc = labels_npy(path, labels, n, d);
	} else {
		if (ends_with(path, ".npy")) {
			free(buf);
			return ir_diag_err(d, IR_ERR, "cannot read '%s': not a .npy file (no \\x93NUMPY magic)", path);
		}
		rc = labels_text(path, buf, size, labels, n, d);
		free(buf);
	}
	if (!rc && !*n) {
		free(*labels);
		*labels = NULL;
		return ir_diag_err(d, IR_ERR, "%s: no labels", path);
	}
	return rc;
}
