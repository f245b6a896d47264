/*
 * test_data.c - unit tests of datasets (exec/data.c) and the image decoder
 * (exec/image.c): every kind of source, batching, dtype conversion, labels,
 * the preprocessing arithmetic on tiny images computed by hand, the hash,
 * and hostile files (truncated, not images, mixed shapes, wrong dtypes).
 * Every file is written here, in a temporary folder removed at the end.
 */
#include "exec/exec.h"
#include "exec/exec_io.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img_write.h"

static int failures, checks;
static char tmpdir[256];

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)
/* An error (or warning) that must contain `s`. */
#define CHECK_MSG(msg, s) do { checks++; if (!(msg) || !strstr((msg), (s))) { failures++; \
	fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__, (msg) ? (msg) : "(none)", (s)); } } while (0)

static const char *tpath(const char *name)
{
	static char buf[8][512];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
	return buf[k];
}

static void mkdir_t(const char *name)
{
	CHECK(mkdir(tpath(name), 0755) == 0);
}

/* ------------------------------------------------------------------------ */
/* Models: only their inputs matter                                          */
/* ------------------------------------------------------------------------ */

/* A model whose inputs are given as "name:dtype:dims;..." ("x:float32:N,64"). */
static struct ir_model *model(const char *spec)
{
	struct ir_model *m = ir_model_new();
	m->graph = ir_graph_new("t");
	char *copy = strdup(spec), *save = NULL;
	for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		char *c1 = strchr(tok, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c1 || !c2)
			abort();
		*c1 = *c2 = 0;
		struct ir_value *v = ir_value_new(m->graph, tok, NULL);
		v->type.kind = IR_TYPE_TENSOR;
		v->type.elem = ir_dtype_from_name(c1 + 1);
		struct ir_dim dims[IR_MAX_RANK];
		int rank = ir_parse_dims(c2 + 1, dims, NULL);
		if (rank < 0 || v->type.elem <= 0)
			abort();
		v->type.rank = rank;
		v->type.dims = calloc((size_t)rank + 1, sizeof(struct ir_dim));
		memcpy(v->type.dims, dims, sizeof(struct ir_dim) * (size_t)rank);
		ir_graph_add_input(m->graph, v);
	}
	free(copy);
	return m;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

/* A tensor of dtype and dims whose element i is f(i) = i * mul + add. */
static struct ir_tensor *ramp(int dtype, int rank, const int64_t *dims, double mul, double add)
{
	struct ir_tensor *t = ir_tensor_new(dtype, rank, dims, NULL);
	for (uint64_t i = 0; i < t->numel; i++)
		kern_store_f64(dtype, ir_tensor_mutable(t), i, (double)i * mul + add);
	return t;
}

static void npy(const char *name, int dtype, int rank, const int64_t *dims, double mul, double add)
{
	struct ir_tensor *t = ramp(dtype, rank, dims, mul, add);
	CHECK(exec_npy_write(tpath(name), t, NULL) == 0);
	ir_tensor_unref(t);
}

/* A .npy written by hand: header dict and raw data. */
static void npy_raw(const char *name, const char *dict, const void *data, size_t n)
{
	struct tbuf b = { 0 };
	size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
	unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)((total - 10) & 0xff),
				  (unsigned char)((total - 10) >> 8) };
	tbuf_put(&b, pre, 10);
	tbuf_put(&b, dict, dl);
	while (b.n < total - 1)
		tbuf_put(&b, " ", 1);
	tbuf_put(&b, "\n", 1);
	if (n)
		tbuf_put(&b, data, n);
	write_bytes(tpath(name), b.p, b.n);
	free(b.p);
}

/* An .npz of stored entries. */
static void npz(const char *name, int n, const char **names, struct ir_tensor **t)
{
	struct exec_named_tensor a[8];
	for (int i = 0; i < n; i++) {
		a[i].name = (char *)names[i];
		a[i].t = t[i];
	}
	CHECK(exec_npz_write(tpath(name), a, n, NULL) == 0);
	for (int i = 0; i < n; i++)
		ir_tensor_unref(t[i]);
}

static void le16(struct tbuf *b, unsigned v)
{
	unsigned char x[2] = { (unsigned char)v, (unsigned char)(v >> 8) };
	tbuf_put(b, x, 2);
}

static void le32(struct tbuf *b, uint32_t v)
{
	le16(b, v & 0xffff);
	le16(b, v >> 16);
}

/* An .npz with one deflated entry `entry`.npy holding the .npy bytes of t. */
static void npz_deflated(const char *name, const char *entry, struct ir_tensor *t)
{
	const char *tmp = tpath("deflate_tmp.npy");
	CHECK(exec_npy_write(tmp, t, NULL) == 0);
	FILE *f = fopen(tmp, "rb");
	unsigned char raw[65536];
	size_t rn = fread(raw, 1, sizeof(raw), f);
	fclose(f);
	unlink(tmp);
	unsigned char z[70000];
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	zs.next_in = raw;
	zs.avail_in = (uInt)rn;
	zs.next_out = z;
	zs.avail_out = sizeof(z);
	CHECK(deflate(&zs, Z_FINISH) == Z_STREAM_END);
	size_t zn = sizeof(z) - zs.avail_out;
	deflateEnd(&zs);
	uint32_t crc = (uint32_t)crc32(0, raw, (uInt)rn);
	char ename[64];
	snprintf(ename, sizeof(ename), "%s.npy", entry);
	size_t nl = strlen(ename);
	struct tbuf b = { 0 };
	le32(&b, 0x04034b50u);
	le16(&b, 20); le16(&b, 0); le16(&b, 8); le16(&b, 0); le16(&b, 0x21);
	le32(&b, crc); le32(&b, (uint32_t)zn); le32(&b, (uint32_t)rn);
	le16(&b, (unsigned)nl); le16(&b, 0);
	tbuf_put(&b, ename, nl);
	tbuf_put(&b, z, zn);
	uint32_t cd = (uint32_t)b.n;
	le32(&b, 0x02014b50u);
	le16(&b, 20); le16(&b, 20); le16(&b, 0); le16(&b, 8); le16(&b, 0); le16(&b, 0x21);
	le32(&b, crc); le32(&b, (uint32_t)zn); le32(&b, (uint32_t)rn);
	le16(&b, (unsigned)nl); le16(&b, 0); le16(&b, 0); le16(&b, 0); le16(&b, 0);
	le32(&b, 0); le32(&b, 0);
	tbuf_put(&b, ename, nl);
	uint32_t cds = (uint32_t)b.n - cd;
	le32(&b, 0x06054b50u);
	le16(&b, 0); le16(&b, 0); le16(&b, 1); le16(&b, 1);
	le32(&b, cds); le32(&b, cd); le16(&b, 0);
	write_bytes(tpath(name), b.p, b.n);
	free(b.p);
}

static void varint(struct tbuf *b, uint64_t v)
{
	while (v >= 0x80) {
		unsigned char c = (unsigned char)(v | 0x80);
		tbuf_put(b, &c, 1);
		v >>= 7;
	}
	unsigned char c = (unsigned char)v;
	tbuf_put(b, &c, 1);
}

/* A TensorProto file: dims, data_type, raw_data. */
static void pb(const char *name, const struct ir_tensor *t)
{
	struct tbuf b = { 0 };
	for (int i = 0; i < t->rank; i++) {
		varint(&b, 0x08);
		varint(&b, (uint64_t)t->dims[i]);
	}
	varint(&b, 0x10);
	varint(&b, (uint64_t)t->dtype);
	varint(&b, 0x4a);
	varint(&b, t->nbytes);
	tbuf_put(&b, ir_tensor_data(t), t->nbytes);
	write_bytes(tpath(name), b.p, b.n);
	free(b.p);
}

static void text(const char *name, const char *s)
{
	write_bytes(tpath(name), s, strlen(s));
}

/* ------------------------------------------------------------------------ */
/* Opening and reading                                                       */
/* ------------------------------------------------------------------------ */

struct run {
	int rc;
	char err[512];
	char warn[1024];          /* every warning, joined by " | " */
	int n_batches;
	int sizes[64];
	struct ir_tensor *first, *last;   /* the first and last batch of the first input */
	char hash[17];
	uint64_t samples;
	int batch;
	bool random;
	char desc[256];
};

static void run_clear(struct run *r)
{
	ir_tensor_unref(r->first);
	ir_tensor_unref(r->last);
	memset(r, 0, sizeof(*r));
}

static void collect(struct run *r, struct ir_diag *d)
{
	if (d->error && !r->err[0])
		snprintf(r->err, sizeof(r->err), "%s", d->error);
	for (size_t i = 0; i < d->n_warnings; i++) {
		size_t o = strlen(r->warn);
		snprintf(r->warn + o, sizeof(r->warn) - o, "%s%s", o ? " | " : "", d->warnings[i]);
	}
	ir_diag_clear(d);
	ir_diag_init(d);
}

/* Opens `spec` for the model and reads every batch. */
static void run_data(struct run *r, const struct ir_model *m, const struct exec_data_opts *o0)
{
	memset(r, 0, sizeof(*r));
	struct ir_diag d;
	ir_diag_init(&d);
	struct exec_data *ds = NULL;
	r->rc = exec_data_open(m, o0, &ds, &d);
	collect(r, &d);
	if (r->rc)
		return;
	r->samples = exec_data_samples(ds);
	r->batch = exec_data_batch(ds);
	r->random = exec_data_random(ds);
	snprintf(r->desc, sizeof(r->desc), "%s", exec_data_desc(ds));
	const char *h = exec_data_hash(ds);
	CHECK(strlen(h) == 16 && strspn(h, "0123456789abcdef") == 16);
	snprintf(r->hash, sizeof(r->hash), "%s", h);
	struct exec_values in = { 0 };
	int n = 0, rc;
	while ((rc = exec_data_next(ds, &in, &n, &d)) == 1) {
		if (r->n_batches < 64)
			r->sizes[r->n_batches] = n;
		r->n_batches++;
		struct ir_tensor *t = in.a[0].v.t;
		CHECK(in.n >= 1 && in.a[0].v.kind == KV_TENSOR && t->rank >= 1 && t->dims[0] == n);
		if (!r->first) {
			r->first = t;
			ir_tensor_ref(t);
		}
		ir_tensor_unref(r->last);
		r->last = t;
		ir_tensor_ref(t);
	}
	r->rc = rc;
	collect(r, &d);
	/* a rewind gives the same first batch again */
	if (!rc && r->first) {
		exec_data_rewind(ds);
		CHECK(exec_data_next(ds, &in, &n, &d) == 1);
		CHECK(in.n >= 1 && ir_tensor_equal(in.a[0].v.t, r->first));
		ir_diag_clear(&d);
		ir_diag_init(&d);
	}
	exec_values_clear(&in);
	exec_data_free(ds);
}

static void run_spec(struct run *r, const struct ir_model *m, const char *spec, int batch)
{
	struct exec_data_opts o = { .spec = spec, .batch = batch };
	run_data(r, m, &o);
}

static float fat(const struct ir_tensor *t, uint64_t i)
{
	return (float)ir_tensor_get_f64(t, i);
}

/* ------------------------------------------------------------------------ */
/* Arrays                                                                    */
/* ------------------------------------------------------------------------ */

static void test_npy(void)
{
	struct ir_model *m = model("x:float32:N,4");
	int64_t d10[2] = { 10, 4 };
	npy("a.npy", IR_FLOAT, 2, d10, 1, 0);
	struct run r;
	/* symbolic batch: 4, 4, then a short 2 */
	run_spec(&r, m, tpath("a.npy"), 4);
	CHECK(r.rc == 0 && r.n_batches == 3 && r.sizes[0] == 4 && r.sizes[2] == 2);
	CHECK(r.samples == 10 && r.batch == 4 && !r.random);
	CHECK(r.first && r.first->dims[0] == 4 && r.first->dims[1] == 4 && fat(r.first, 5) == 5);
	CHECK(r.last && r.last->dims[0] == 2 && fat(r.last, 0) == 32 && fat(r.last, 7) == 39);
	CHECK_MSG(r.desc, "a.npy (10 samples)");
	char h1[17];
	snprintf(h1, sizeof(h1), "%s", r.hash);
	run_clear(&r);
	/* no --batch and a symbolic dim: EXEC_DATA_BATCH (all 10 in one short batch) */
	run_spec(&r, m, tpath("a.npy"), 0);
	CHECK(r.rc == 0 && r.n_batches == 1 && r.batch == EXEC_DATA_BATCH && r.sizes[0] == 10);
	CHECK(!strcmp(r.hash, h1));   /* the batch is not part of what the data is */
	run_clear(&r);
	/* max_batches */
	struct exec_data_opts o = { .spec = tpath("a.npy"), .batch = 4, .max_batches = 2 };
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.n_batches == 2 && r.samples == 8);
	run_clear(&r);
	/* the content changes the hash */
	npy("a.npy", IR_FLOAT, 2, d10, 1, 1);
	run_spec(&r, m, tpath("a.npy"), 4);
	CHECK(r.rc == 0 && strcmp(r.hash, h1));
	run_clear(&r);
	ir_model_free(m);

	/* a fixed batch dim: the remainder is dropped with a note */
	m = model("x:float32:4,4");
	run_spec(&r, m, tpath("a.npy"), 0);
	CHECK(r.rc == 0 && r.n_batches == 2 && r.sizes[1] == 4 && r.samples == 8 && r.batch == 4);
	CHECK_MSG(r.warn, "the last 2 samples are not used");
	run_clear(&r);
	run_spec(&r, m, tpath("a.npy"), 8);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "--batch 8: input 'x' fixes its batch dim to 4");
	run_clear(&r);
	ir_model_free(m);

	/* an array of one sample (the input's rank less one) */
	m = model("x:float32:1,4");
	int64_t d4[1] = { 4 };
	npy("one.npy", IR_FLOAT, 1, d4, 2, 0);
	run_spec(&r, m, tpath("one.npy"), 0);
	CHECK(r.rc == 0 && r.n_batches == 1 && r.samples == 1 && fat(r.first, 3) == 6);
	run_clear(&r);
	ir_model_free(m);

	/* big-endian (read in pieces, swapped) and Fortran order (read whole) */
	m = model("x:float32:N,2");
	unsigned char be[16];
	for (int i = 0; i < 4; i++) {
		float f = (float)(i + 1);
		uint32_t u;
		memcpy(&u, &f, 4);
		be[4 * i] = (unsigned char)(u >> 24);
		be[4 * i + 1] = (unsigned char)(u >> 16);
		be[4 * i + 2] = (unsigned char)(u >> 8);
		be[4 * i + 3] = (unsigned char)u;
	}
	npy_raw("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", be, 16);
	run_spec(&r, m, tpath("be.npy"), 2);
	CHECK(r.rc == 0 && r.first && fat(r.first, 0) == 1 && fat(r.first, 1) == 2 && fat(r.first, 3) == 4);
	run_clear(&r);
	float fo[4] = { 1, 3, 2, 4 };   /* [[1,2],[3,4]] in Fortran order */
	npy_raw("fo.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", fo, 16);
	run_spec(&r, m, tpath("fo.npy"), 1);
	CHECK(r.rc == 0 && r.n_batches == 2 && fat(r.first, 1) == 2 && fat(r.last, 0) == 3 && fat(r.last, 1) == 4);
	run_clear(&r);
	ir_model_free(m);
}

static void test_conversion(void)
{
	struct run r;
	int64_t d[2] = { 3, 2 };
	/* int64 and float64 arrays feed a float32 input */
	struct ir_model *m = model("x:float32:N,2");
	npy("i64.npy", IR_INT64, 2, d, 3, -4);
	run_spec(&r, m, tpath("i64.npy"), 3);
	CHECK(r.rc == 0 && r.first && r.first->dtype == IR_FLOAT && fat(r.first, 0) == -4 && fat(r.first, 5) == 11);
	run_clear(&r);
	npy("f64.npy", IR_DOUBLE, 2, d, 0.5, 0.25);
	run_spec(&r, m, tpath("f64.npy"), 3);
	CHECK(r.rc == 0 && r.first && r.first->dtype == IR_FLOAT && fat(r.first, 1) == 0.75f);
	run_clear(&r);
	/* a bool array cannot */
	npy("b.npy", IR_BOOL, 2, d, 1, 0);
	run_spec(&r, m, tpath("b.npy"), 3);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "b.npy: bool [3,2], input 'x' needs float32[N,2]");
	run_clear(&r);
	ir_model_free(m);

	/* integer inputs: exact values convert, others are errors naming the sample */
	m = model("ids:int64:N,2");
	npy("i32.npy", IR_INT32, 2, d, 1, 7);
	run_spec(&r, m, tpath("i32.npy"), 0);
	CHECK(r.rc == 0 && r.first && r.first->dtype == IR_INT64 && fat(r.first, 1) == 8);
	run_clear(&r);
	npy("whole.npy", IR_DOUBLE, 2, d, 2, 0);
	run_spec(&r, m, tpath("whole.npy"), 3);
	CHECK(r.rc == 0 && r.first && fat(r.first, 5) == 10);
	run_clear(&r);
	npy("half.npy", IR_FLOAT, 2, d, 0.5, 0);
	run_spec(&r, m, tpath("half.npy"), 3);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "half.npy: sample 0: float32 value 0.5 does not convert exactly to int64 (input 'ids')");
	run_clear(&r);
	ir_model_free(m);
	m = model("u:uint8:N,2");
	npy("big.npy", IR_INT64, 2, d, 100, 0);
	run_spec(&r, m, tpath("big.npy"), 1);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "sample 1: int64 value 300 does not convert exactly to uint8");
	CHECK(r.n_batches == 1);   /* the first sample was fine */
	run_clear(&r);
	ir_model_free(m);
	/* past 2^63: a uint64 holds it, an int64 does not */
	int64_t d1[2] = { 1, 2 };
	npy("huge.npy", IR_DOUBLE, 2, d1, 1, 9223372036854775808.0);
	m = model("u:uint64:N,2");
	run_spec(&r, m, tpath("huge.npy"), 1);
	CHECK(r.rc == 0 && r.first && ((const uint64_t *)ir_tensor_data(r.first))[0] == 9223372036854775808ull);
	run_clear(&r);
	ir_model_free(m);
	m = model("s:int64:N,2");
	run_spec(&r, m, tpath("huge.npy"), 1);
	CHECK_MSG(r.err, "float64 value 9.22337204e+18 does not convert exactly to int64");
	run_clear(&r);
	ir_model_free(m);
}

static void test_npz(void)
{
	struct run r;
	struct ir_model *m = model("a:float32:N,3;b:int64:N");
	int64_t da[2] = { 5, 3 }, db[1] = { 5 }, dy[1] = { 5 };
	const char *names[3] = { "b", "a", "y" };
	struct ir_tensor *t[3] = { ramp(IR_INT64, 1, db, 1, 100), ramp(IR_FLOAT, 2, da, 1, 0), ramp(IR_INT64, 1, dy, 0, 1) };
	npz("two.npz", 3, names, t);
	run_spec(&r, m, tpath("two.npz"), 2);
	CHECK(r.rc == 0 && r.n_batches == 3 && r.sizes[2] == 1 && r.samples == 5);
	CHECK(r.first && r.first->dims[1] == 3 && fat(r.first, 4) == 4);
	run_clear(&r);
	/* a missing array */
	const char *n1[1] = { "a" };
	struct ir_tensor *t1[1] = { ramp(IR_FLOAT, 2, da, 1, 0) };
	npz("one.npz", 1, n1, t1);
	run_spec(&r, m, tpath("one.npz"), 2);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "one.npz: no array named 'b' (it has a)");
	run_clear(&r);
	/* different sample counts */
	int64_t db4[1] = { 4 };
	const char *n2[2] = { "a", "b" };
	struct ir_tensor *t2[2] = { ramp(IR_FLOAT, 2, da, 1, 0), ramp(IR_INT64, 1, db4, 1, 0) };
	npz("uneven.npz", 2, n2, t2);
	run_spec(&r, m, tpath("uneven.npz"), 2);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "different numbers of samples (5 and 4)");
	run_clear(&r);
	/* a one-input model takes the only array whatever its name */
	ir_model_free(m);
	m = model("input:float32:N,3");
	run_spec(&r, m, tpath("one.npz"), 5);
	CHECK(r.rc == 0 && r.n_batches == 1 && fat(r.first, 14) == 14);
	run_clear(&r);
	/* a compressed entry (read whole) */
	struct ir_tensor *c = ramp(IR_FLOAT, 2, da, 2, 1);
	npz_deflated("z.npz", "input", c);
	ir_tensor_unref(c);
	run_spec(&r, m, tpath("z.npz"), 2);
	CHECK(r.rc == 0 && r.n_batches == 3 && r.first && fat(r.first, 5) == 11 && fat(r.last, 2) == 29);
	run_clear(&r);
	ir_model_free(m);
}

static void test_folders(void)
{
	struct run r;
	struct ir_model *m = model("x:float32:N,4");
	mkdir_t("arr");
	int64_t d3[2] = { 3, 4 }, d5[2] = { 5, 4 };
	npy("arr/b.npy", IR_FLOAT, 2, d5, 1, 100);
	npy("arr/a.npy", IR_FLOAT, 2, d3, 1, 0);
	text("arr/notes.txt", "ignored\n");
	run_spec(&r, m, tpath("arr"), 4);
	/* a (3 samples) then b (5): the first batch spans both files */
	CHECK(r.rc == 0 && r.n_batches == 2 && r.sizes[0] == 4 && r.sizes[1] == 4 && r.samples == 8);
	CHECK(r.first && fat(r.first, 11) == 11 && fat(r.first, 12) == 100 && fat(r.last, 15) == 119);
	char h1[17];
	snprintf(h1, sizeof(h1), "%s", r.hash);
	run_clear(&r);
	/* the same files elsewhere hash the same */
	mkdir_t("arr2");
	npy("arr2/b.npy", IR_FLOAT, 2, d5, 1, 100);
	npy("arr2/a.npy", IR_FLOAT, 2, d3, 1, 0);
	run_spec(&r, m, tpath("arr2"), 4);
	CHECK(r.rc == 0 && !strcmp(r.hash, h1));
	run_clear(&r);
	ir_model_free(m);

	/* mixed shapes: an error, or a skipped file under skip_bad */
	m = model("x:float32:N,M");
	mkdir_t("mixed");
	int64_t d25[2] = { 2, 5 };
	npy("mixed/a.npy", IR_FLOAT, 2, d3, 1, 0);
	npy("mixed/b.npy", IR_FLOAT, 2, d25, 1, 0);
	run_spec(&r, m, tpath("mixed"), 2);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "mixed/b.npy: samples of [5], the files before have samples of [4] (mixed shapes)");
	run_clear(&r);
	struct exec_data_opts o = { .spec = tpath("mixed"), .batch = 2, .skip_bad = true };
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.samples == 3 && r.n_batches == 2);
	CHECK_MSG(r.warn, "(mixed shapes) (skipped)");
	run_clear(&r);
	ir_model_free(m);

	/* empty folders, arrays mixed with images, files that are not there */
	m = model("x:float32:N,4");
	mkdir_t("empty");
	text("empty/readme.txt", "nothing\n");
	run_spec(&r, m, tpath("empty"), 0);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "empty folder");
	run_clear(&r);
	mkdir_t("both");
	npy("both/a.npy", IR_FLOAT, 2, d3, 1, 0);
	text("both/b.png", "x");
	run_spec(&r, m, tpath("both"), 0);
	CHECK_MSG(r.err, "holds both arrays (.npy, .npz) and images");
	run_clear(&r);
	run_spec(&r, m, tpath("nope.npy"), 0);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "nope.npy': no such file or directory");
	run_clear(&r);
	text("data.csv", "1,2,3,4\n");
	run_spec(&r, m, tpath("data.csv"), 0);
	CHECK_MSG(r.err, "not an .npy, .npz, .png or .jpg file");
	run_clear(&r);
	/* wrong shapes, truncated files */
	int64_t d65[2] = { 10, 65 };
	npy("wide.npy", IR_FLOAT, 2, d65, 1, 0);
	run_spec(&r, m, tpath("wide.npy"), 0);
	CHECK_MSG(r.err, "wide.npy: float32 [10,65], input 'x' needs [N,4]");
	run_clear(&r);
	float some[6] = { 0 };
	npy_raw("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 4), }", some, sizeof(some));
	run_spec(&r, m, tpath("short.npy"), 0);
	CHECK_MSG(r.err, "the data is truncated");
	run_clear(&r);
	npy_raw("str.npy", "{'descr': '<U3', 'fortran_order': False, 'shape': (1, 4), }", NULL, 0);
	run_spec(&r, m, tpath("str.npy"), 0);
	CHECK(r.rc != 0);
	run_clear(&r);
	/* a .npy for a two-input model */
	ir_model_free(m);
	m = model("x:float32:N,4;y:float32:N,4");
	run_spec(&r, m, tpath("arr/a.npy"), 0);
	CHECK_MSG(r.err, "one array, the model has 2 inputs");
	run_clear(&r);
	ir_model_free(m);
}

static void test_testdata(void)
{
	struct run r;
	struct ir_model *m = model("x:float32:N,2;k:int64:N");
	int64_t dx[2] = { 3, 2 }, dk[1] = { 3 };
	mkdir_t("td");
	mkdir_t("td/test_data_set_0");
	mkdir_t("td/test_data_set_1");
	mkdir_t("td/test_data_set_10");
	struct ir_tensor *x = ramp(IR_FLOAT, 2, dx, 1, 0), *k = ramp(IR_INT32, 1, dk, 1, 5);
	for (int s = 0; s < 3; s++) {
		char p[64];
		static const char *sets[] = { "td/test_data_set_0", "td/test_data_set_1", "td/test_data_set_10" };
		snprintf(p, sizeof(p), "%s/input_0.pb", sets[s]);
		pb(p, x);
		snprintf(p, sizeof(p), "%s/input_1.pb", sets[s]);
		pb(p, k);   /* int32 for an int64 input: converted */
	}
	run_spec(&r, m, tpath("td"), 0);
	CHECK(r.rc == 0 && r.n_batches == 3 && r.samples == 9 && r.batch == 3);
	CHECK(r.first && r.first->dims[0] == 3 && fat(r.first, 5) == 5);
	CHECK_MSG(r.desc, "(9 samples in 3 test-data sets)");
	run_clear(&r);
	/* one set given directly */
	run_spec(&r, m, tpath("td/test_data_set_1"), 0);
	CHECK(r.rc == 0 && r.n_batches == 1 && r.samples == 3);
	run_clear(&r);
	/* a set missing an input */
	unlink(tpath("td/test_data_set_1/input_1.pb"));
	run_spec(&r, m, tpath("td"), 0);
	CHECK(r.rc != 0);
	CHECK_MSG(r.err, "input_1.pb' is missing (input 'k')");
	run_clear(&r);
	struct exec_data_opts o = { .spec = tpath("td"), .skip_bad = true };
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.n_batches == 2);
	CHECK_MSG(r.warn, "(skipped)");
	run_clear(&r);
	ir_tensor_unref(x);
	ir_tensor_unref(k);
	ir_model_free(m);
}

static void test_random(void)
{
	struct run r, r2;
	struct ir_model *m = model("x:float32:N,4;ids:int64:N,3");
	struct exec_data_opts o = { .spec = "random", .batch = 4, .random_samples = 10, .seed = 7 };
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.random && r.n_batches == 3 && r.sizes[2] == 2 && r.samples == 10);
	CHECK(r.first && r.first->dtype == IR_FLOAT && r.first->dims[1] == 4);
	CHECK_MSG(r.desc, "random (10 samples, seed 7)");
	run_data(&r2, m, &o);
	CHECK(!strcmp(r.hash, r2.hash) && ir_tensor_equal(r.first, r2.first));
	run_clear(&r2);
	o.seed = 8;
	run_data(&r2, m, &o);
	CHECK(strcmp(r.hash, r2.hash) && !ir_tensor_equal(r.first, r2.first));
	run_clear(&r2);
	run_clear(&r);
	/* a --shape of the batch symbol gives the batch */
	struct exec_shape sh;
	CHECK(exec_shape_parse("N=5", &sh, NULL) == 0);
	struct exec_data_opts o2 = { .spec = "random", .random_samples = 10, .shapes = &sh, .n_shapes = 1 };
	run_data(&r, m, &o2);
	CHECK(r.rc == 0 && r.batch == 5 && r.n_batches == 2);
	run_clear(&r);
	exec_shape_clear(&sh);
	ir_model_free(m);
	/* a fixed batch: whole batches */
	m = model("x:float32:2,4");
	struct exec_data_opts o3 = { .spec = "random", .random_samples = 5 };
	run_data(&r, m, &o3);
	CHECK(r.rc == 0 && r.n_batches == 3 && r.sizes[2] == 2 && r.samples == 6);
	run_clear(&r);
	ir_model_free(m);
}

/* ------------------------------------------------------------------------ */
/* Labels                                                                    */
/* ------------------------------------------------------------------------ */

static void test_labels(void)
{
	struct ir_diag d;
	ir_diag_init(&d);
	int64_t *l = NULL;
	uint64_t n = 0;
	int64_t d5[1] = { 5 }, d51[2] = { 5, 1 }, d52[2] = { 5, 2 };
	npy("l64.npy", IR_INT64, 1, d5, 2, -1);
	CHECK(exec_read_labels(tpath("l64.npy"), &l, &n, &d) == 0 && n == 5 && l[0] == -1 && l[4] == 7);
	free(l);
	npy("lf.npy", IR_FLOAT, 2, d51, 1, 0);
	CHECK(exec_read_labels(tpath("lf.npy"), &l, &n, &d) == 0 && n == 5 && l[3] == 3);
	free(l);
	npy("lhalf.npy", IR_FLOAT, 1, d5, 0.5, 0);
	CHECK(exec_read_labels(tpath("lhalf.npy"), &l, &n, &d) != 0);
	CHECK_MSG(d.error, "label 1 is 0.5, not a whole number");
	ir_diag_clear(&d);
	npy("l2.npy", IR_INT32, 2, d52, 1, 0);
	CHECK(exec_read_labels(tpath("l2.npy"), &l, &n, &d) != 0);
	CHECK_MSG(d.error, "labels of shape [5,2]");
	ir_diag_clear(&d);
	text("l.txt", "# digits\n3\n\n  7  \n-2 # negative\n");
	CHECK(exec_read_labels(tpath("l.txt"), &l, &n, &d) == 0 && n == 3 && l[0] == 3 && l[1] == 7 && l[2] == -2);
	free(l);
	text("bad.txt", "1\n2\ncat\n");
	CHECK(exec_read_labels(tpath("bad.txt"), &l, &n, &d) != 0);
	CHECK_MSG(d.error, "bad.txt:3: 'cat' is not an integer");
	ir_diag_clear(&d);
	text("none.txt", "# nothing\n");
	CHECK(exec_read_labels(tpath("none.txt"), &l, &n, &d) != 0);
	CHECK_MSG(d.error, "no labels");
	ir_diag_clear(&d);
	CHECK(exec_read_labels(tpath("missing.txt"), &l, &n, &d) != 0 && l == NULL);
	CHECK_MSG(d.error, "no such file");
	ir_diag_clear(&d);
}

/* ------------------------------------------------------------------------ */
/* Images                                                                    */
/* ------------------------------------------------------------------------ */

static void png_file(const char *name, int w, int h, int ctype, int depth, const uint8_t *s)
{
	unsigned char *b;
	size_t n = png_make(w, h, ctype, depth, s, NULL, 0, &b);
	write_bytes(tpath(name), b, n);
	free(b);
}

static void test_decode(void)
{
	struct ir_diag d;
	ir_diag_init(&d);
	uint8_t *px;
	int h, w, c;
	unsigned char *b;
	/* RGB, 2x1 */
	const uint8_t rgb[6] = { 10, 20, 30, 200, 100, 0 };
	size_t n = png_make(2, 1, 2, 8, rgb, NULL, 0, &b);
	CHECK(exec_image_decode(b, n, "a.png", 0, &px, &h, &w, &c, &d) == 0 && h == 1 && w == 2 && c == 3);
	CHECK(px && !memcmp(px, rgb, 6));
	free(px);
	/* to gray: ITU-R 601 luma, rounded */
	CHECK(exec_image_decode(b, n, "a.png", 1, &px, &h, &w, &c, &d) == 0 && c == 1);
	CHECK(px && px[0] == (10 * 299 + 20 * 587 + 30 * 114 + 500) / 1000 && px[1] == (200 * 299 + 100 * 587 + 500) / 1000);
	free(px);
	/* truncated: every cut before the end of the image data is an error (a
	 * file that lacks only its IEND chunk still has every pixel) */
	for (size_t k = 0; k < n - 12; k++) {
		CHECK(exec_image_decode(b, k, "cut.png", 0, &px, &h, &w, &c, &d) != 0 && px == NULL);
		ir_diag_clear(&d);
	}
	CHECK(exec_image_decode(b, n - 20, "cut.png", 0, &px, &h, &w, &c, &d) != 0);
	CHECK_MSG(d.error, "cut.png: truncated");
	ir_diag_clear(&d);
	free(b);
	/* gray+alpha, 16-bit: alpha dropped, high byte kept */
	const uint8_t ga[4] = { 50, 255, 60, 0 };
	n = png_make(2, 1, 4, 16, ga, NULL, 0, &b);
	CHECK(exec_image_decode(b, n, "ga.png", 0, &px, &h, &w, &c, &d) == 0 && c == 1 && px && px[0] == 50 && px[1] == 60);
	free(px);
	/* gray to 3 channels */
	CHECK(exec_image_decode(b, n, "ga.png", 3, &px, &h, &w, &c, &d) == 0 && c == 3 && px && px[3] == 60 && px[5] == 60);
	free(px);
	free(b);
	/* palette, and 1-bit gray */
	const uint8_t idx[3] = { 1, 0, 1 }, pal[6] = { 1, 2, 3, 250, 251, 252 };
	n = png_make(3, 1, 3, 8, idx, pal, 2, &b);
	CHECK(exec_image_decode(b, n, "p.png", 0, &px, &h, &w, &c, &d) == 0 && c == 3 && px && px[0] == 250 && px[3] == 1 &&
	      px[8] == 252);
	free(px);
	free(b);
	const uint8_t bits[9] = { 1, 0, 1, 1, 0, 0, 0, 0, 1 };
	n = png_make(9, 1, 0, 1, bits, NULL, 0, &b);
	CHECK(exec_image_decode(b, n, "bits.png", 0, &px, &h, &w, &c, &d) == 0 && c == 1 && w == 9 && px && px[0] == 255 &&
	      px[1] == 0 && px[8] == 255);
	free(px);
	free(b);
	/* a JPEG of one grey level decodes to (almost) that level; gray and colour */
	uint8_t flat[16 * 16 * 3];
	memset(flat, 128, sizeof(flat));
	n = jpeg_make(16, 16, 3, flat, 100, false, &b);
	CHECK(exec_image_decode(b, n, "f.jpg", 0, &px, &h, &w, &c, &d) == 0 && h == 16 && w == 16 && c == 3);
	CHECK(px && abs(px[0] - 128) <= 1 && abs(px[16 * 16 * 3 - 1] - 128) <= 1);
	free(px);
	CHECK(exec_image_decode(b, n / 2, "half.jpg", 0, &px, &h, &w, &c, &d) != 0 && px == NULL);
	CHECK_MSG(d.error, "half.jpg: truncated");
	ir_diag_clear(&d);
	for (size_t k = 0; k < n; k += 7) {
		CHECK(exec_image_decode(b, k, "cut.jpg", 0, &px, &h, &w, &c, &d) != 0);
		ir_diag_clear(&d);
	}
	free(b);
	n = jpeg_make(16, 16, 1, flat, 100, true, &b);
	CHECK(exec_image_decode(b, n, "g.jpg", 0, &px, &h, &w, &c, &d) == 0 && c == 1 && px && abs(px[17] - 128) <= 1);
	free(px);
	free(b);
	/* not images */
	CHECK(exec_image_decode("hello world\n", 12, "cat.jpg", 0, &px, &h, &w, &c, &d) != 0);
	CHECK_MSG(d.error, "cat.jpg: not a PNG or JPEG image");
	ir_diag_clear(&d);
	CHECK(exec_image_decode("", 0, "e.png", 0, &px, &h, &w, &c, &d) != 0);
	CHECK_MSG(d.error, "e.png: not a PNG or JPEG image (empty file)");
	ir_diag_clear(&d);
	/* a PNG whose IHDR claims a huge size */
	n = png_make(2, 1, 2, 8, rgb, NULL, 0, &b);
	b[16] = 0x7f;   /* width's top byte */
	uLong crc = crc32(0, b + 12, 17);
	b[29] = (unsigned char)(crc >> 24); b[30] = (unsigned char)(crc >> 16);
	b[31] = (unsigned char)(crc >> 8); b[32] = (unsigned char)crc;
	CHECK(exec_image_decode(b, n, "huge.png", 0, &px, &h, &w, &c, &d) != 0 && px == NULL);
	CHECK_MSG(d.error, "huge.png: invalid PNG");
	ir_diag_clear(&d);
	free(b);
}

/* (p / 255 - mean) / std */
static float norm(double p, double mean, double sd)
{
	return (float)((p * (1.0 / 255) - mean) / sd);
}

static bool near(float a, float b)
{
	return fabsf(a - b) <= 1e-5f * (1 + fabsf(b));
}

static void test_images(void)
{
	struct run r;
	mkdir_t("img");
	/* a 2x2 RGB image: pixel (y, x) channel k = 10 * (2y + x) + k */
	uint8_t p4[12];
	for (int i = 0; i < 12; i++)
		p4[i] = (uint8_t)(10 * (i / 3) + i % 3);
	png_file("img/a.png", 2, 2, 2, 8, p4);
	/* NCHW, mean/std per channel */
	struct ir_model *m = model("x:float32:N,3,2,2");
	struct exec_data_opts o = { .spec = tpath("img"), .preprocess = "mean=0.1,0.2,0.3,std=0.5,0.25,2" };
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.n_batches == 1 && r.first && r.first->dims[1] == 3 && r.first->dims[3] == 2);
	if (r.first) {
		/* channel 1, pixel (1, 0): 10 * 2 + 1 = 21 */
		CHECK(near(fat(r.first, 1 * 4 + 2), norm(21, 0.2, 0.25)));
		CHECK(near(fat(r.first, 0), norm(0, 0.1, 0.5)));
		CHECK(near(fat(r.first, 11), norm(32, 0.3, 2)));
	}
	CHECK_MSG(r.desc, "(1 images)");
	char h1[17];
	snprintf(h1, sizeof(h1), "%s", r.hash);
	run_clear(&r);
	/* BGR and a scale of 1: channel 0 is blue */
	o.preprocess = "order=bgr,scale=1";
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && fat(r.first, 0) == 2 && fat(r.first, 8 + 3) == 30);
	CHECK(strcmp(r.hash, h1));   /* another preprocessing: another hash */
	run_clear(&r);
	ir_model_free(m);
	/* NHWC from the input's shape */
	m = model("x:float32:1,2,2,3");
	o.preprocess = "scale=1/1";
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && r.first->dims[3] == 3 && fat(r.first, 4) == 11 && fat(r.first, 11) == 32);
	run_clear(&r);
	ir_model_free(m);
	/* uint8 input: raw pixel values */
	m = model("x:uint8:N,2,2,3");
	o.preprocess = NULL;
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && r.first->dtype == IR_UINT8 && fat(r.first, 10) == 31);
	run_clear(&r);
	ir_model_free(m);
	/* gray: one channel of luma */
	m = model("x:float32:N,1,2,2");
	o.preprocess = "scale=1";
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && fat(r.first, 3) == (float)((30 * 299 + 31 * 587 + 32 * 114 + 500) / 1000));
	run_clear(&r);
	ir_model_free(m);

	/* resize 2 -> 4 wide (bilinear, half-pixel centres): a row [0, 100]
	 * samples at x = -0.25 (clamped), 0.25, 0.75, 1.25 (clamped) */
	mkdir_t("rs");
	uint8_t row[2] = { 0, 100 };
	png_file("rs/r.png", 2, 1, 0, 8, row);
	m = model("x:float32:N,1,1,4");
	o.spec = tpath("rs");
	o.preprocess = "scale=1";
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && fat(r.first, 0) == 0 && fat(r.first, 1) == 25 && fat(r.first, 2) == 75 &&
	      fat(r.first, 3) == 100);
	run_clear(&r);
	ir_model_free(m);
	/* resize=N: the shorter side; crop: the centre */
	mkdir_t("crop");
	uint8_t g44[16];
	for (int i = 0; i < 16; i++)
		g44[i] = (uint8_t)(i * 10);
	png_file("crop/c.png", 4, 4, 0, 8, g44);
	m = model("x:float32:N,1,2,2");
	o.spec = tpath("crop");
	o.preprocess = "crop=2,scale=1";
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && fat(r.first, 0) == 50 && fat(r.first, 1) == 60 && fat(r.first, 2) == 90 &&
	      fat(r.first, 3) == 100);
	run_clear(&r);
	ir_model_free(m);
	m = model("x:float32:N,1,H,W");
	mkdir_t("wide");
	uint8_t g24[8] = { 0 };
	png_file("wide/w.png", 4, 2, 0, 8, g24);
	o.spec = tpath("wide");
	o.preprocess = "resize=4";
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && r.first->dims[2] == 4 && r.first->dims[3] == 8);
	run_clear(&r);
	o.preprocess = "resize=3x5";
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.first && r.first->dims[2] == 5 && r.first->dims[3] == 3);
	run_clear(&r);
	/* the size a fixed input needs, when the preprocessing gives another */
	ir_model_free(m);
	m = model("x:float32:N,1,2,2");
	o.preprocess = "crop=3";
	run_data(&r, m, &o);
	CHECK_MSG(r.err, "--preprocess gives 3x3 images, input 'x' [N,1,2,2] needs 2x2");
	run_clear(&r);
	ir_model_free(m);

	/* hostile folders: a truncated PNG, a .jpg that is text, mixed sizes */
	mkdir_t("bad");
	png_file("bad/1.png", 2, 2, 2, 8, p4);
	unsigned char *b;
	size_t n = png_make(2, 2, 2, 8, p4, NULL, 0, &b);
	write_bytes(tpath("bad/2.png"), b, n - 15);
	free(b);
	text("bad/3.jpg", "this is not an image\n");
	uint8_t j[8 * 8 * 3];
	memset(j, 77, sizeof(j));
	n = jpeg_make(8, 8, 3, j, 95, false, &b);
	write_bytes(tpath("bad/4.jpeg"), b, n);
	free(b);
	m = model("x:float32:N,3,2,2");
	o.spec = tpath("bad");
	o.preprocess = NULL;
	o.batch = 2;
	run_data(&r, m, &o);
	CHECK(r.rc != 0 && r.n_batches == 0);
	CHECK_MSG(r.err, "bad/2.png: truncated");
	run_clear(&r);
	o.skip_bad = true;
	run_data(&r, m, &o);
	/* 1.png and 4.jpeg (resized to 2x2) fill one batch */
	CHECK(r.rc == 0 && r.n_batches == 1 && r.sizes[0] == 2);
	CHECK_MSG(r.warn, "bad/2.png: truncated (skipped)");
	CHECK_MSG(r.warn, "bad/3.jpg: not a PNG or JPEG image (skipped)");
	CHECK(r.last && fabsf(fat(r.last, 12) - 77.0f / 255) < 2.0f / 255);
	run_clear(&r);
	o.skip_bad = false;
	ir_model_free(m);
	/* symbolic size and no resize: images of two sizes */
	m = model("x:float32:N,3,H,W");
	mkdir_t("sizes");
	png_file("sizes/a.png", 2, 2, 2, 8, p4);
	png_file("sizes/b.png", 2, 1, 2, 8, p4);
	o.spec = tpath("sizes");
	o.batch = 1;
	run_data(&r, m, &o);
	CHECK(r.rc != 0 && r.n_batches == 1);
	CHECK_MSG(r.err, "sizes/b.png: 2x1 image, the images before are 2x2");
	run_clear(&r);
	o.batch = 0;
	ir_model_free(m);
	/* models images cannot feed */
	m = model("x:float32:N,64");
	o.spec = tpath("img");
	run_data(&r, m, &o);
	CHECK_MSG(r.err, "images need an input of [N,C,H,W] or [N,H,W,C]");
	run_clear(&r);
	ir_model_free(m);
	m = model("x:float32:N,4,2,2");
	run_data(&r, m, &o);
	CHECK_MSG(r.err, "has 4 channels in nchw layout");
	run_clear(&r);
	ir_model_free(m);
}

static void test_preprocess_errors(void)
{
	struct run r;
	struct ir_model *m = model("x:float32:N,3,2,2");
	static const struct { const char *spec, *msg; } cases[] = {
		{ "x=1", "--preprocess: unknown key 'x' (resize, crop, mean, std, scale, layout, order, gray)" },
		{ "resize=abc", "--preprocess: resize=abc: not N or WxH" },
		{ "resize=0", "resize=0: not N or WxH" },
		{ "crop=3x", "crop=3x: not N or WxH" },
		{ "std=0", "std must not be 0" },
		{ "mean=0.1,0.2", "mean takes 1 or 3 values" },
		{ "mean=1,2,3,4", "mean takes 1 or 3 values" },
		{ "mean=a", "mean=a: not a number" },
		{ "scale=1/0", "scale=1/0: not a non-zero number or fraction" },
		{ "scale=", "scale=: not a non-zero number" },
		{ "layout=chw", "layout=chw: not nchw or nhwc" },
		{ "order=rbg", "order=rbg: not rgb or bgr" },
		{ "gray=2", "gray=2: not 0 or 1" },
		{ "gray=1", "gray=1: input 'x' [N,3,2,2] takes 3 channels" },
		{ "crop=2,crop=2", "'crop' is given twice" },
		{ "resize=2,0.5", "'0.5' is not KEY=VALUE" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct exec_data_opts o = { .spec = tpath("img"), .preprocess = cases[i].spec };
		run_data(&r, m, &o);
		CHECK(r.rc != 0);
		CHECK_MSG(r.err, cases[i].msg);
		run_clear(&r);
	}
	/* a good spec with every key */
	struct exec_data_opts o = { .spec = tpath("img"),
		.preprocess = "resize=4,crop=2,mean=0.485,0.456,0.406,std=0.229,0.224,0.225,layout=nchw,order=rgb,scale=1/255,gray=0" };
	run_data(&r, m, &o);
	CHECK(r.rc == 0 && r.n_batches == 1);
	run_clear(&r);
	/* on arrays it is not used (a note) */
	int64_t d[4] = { 1, 3, 2, 2 };
	npy("img4.npy", IR_FLOAT, 4, d, 1, 0);
	o.spec = tpath("img4.npy");
	run_data(&r, m, &o);
	CHECK(r.rc == 0);
	CHECK_MSG(r.warn, "--preprocess is for images");
	run_clear(&r);
	ir_model_free(m);
}

/* ------------------------------------------------------------------------ */

static void rm_tree(const char *path)
{
	DIR *dp = opendir(path);
	if (dp) {
		struct dirent *e;
		while ((e = readdir(dp))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[1024];
			snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
			rm_tree(p);
		}
		closedir(dp);
		rmdir(path);
	} else {
		unlink(path);
	}
}

int main(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/ogsh-data-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_npy();
	test_conversion();
	test_npz();
	test_folders();
	test_testdata();
	test_random();
	test_labels();
	test_decode();
	test_images();
	test_preprocess_errors();
	exec_cache_clear();
	rm_tree(tmpdir);
	printf("test_data: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
