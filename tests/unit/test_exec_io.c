/*
 * test_exec_io.c - unit tests of the NumPy file readers and writers
 * (exec/io.c) and of the comparison function (exec/compare.c).
 *
 * Without arguments: round trips of every dtype numpy has, hostile files
 * made by hand, and known comparisons. With a folder (what
 * tests/unit/test_npy_numpy.py passes): also checks the files numpy wrote
 * there against its manifest.txt, and writes each tensor back under
 * FOLDER/out/ (with out/manifest.txt) for the script to load with numpy.
 */
#include "exec/exec_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures, checks;
static char tmpdir[256];

#define CHECK(c) do { checks++; if (!(c)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)

static const char *tpath(const char *name)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
	return buf[k];
}

/* A tensor of dtype/shape with deterministic contents (bools 0/1, strings
 * with some non-ASCII text). */
static struct ir_tensor *make(int dtype, int rank, const int64_t *dims, unsigned seed)
{
	struct ir_tensor *t = ir_tensor_new(dtype, rank, dims, NULL);
	if (!t)
		return NULL;
	if (dtype == IR_STRING) {
		static const char *words[] = { "", "a", "hello", "caf\xc3\xa9", "\xe2\x82\xac 5", "\xf0\x9f\x98\x80!" };
		for (uint64_t i = 0; i < t->numel; i++) {
			const char *w = words[(i + seed) % 6];
			free(t->strings[i].data);
			t->strings[i].len = strlen(w);
			t->strings[i].data = strdup(w);
		}
		return t;
	}
	unsigned char *p = ir_tensor_mutable(t);
	for (size_t i = 0; i < t->nbytes; i++)
		p[i] = dtype == IR_BOOL ? (unsigned char)((i * 7 + seed) % 3 == 0)
					: (unsigned char)(i * 131 + seed * 17 + 5);
	return t;
}

static bool same(const struct ir_tensor *a, const struct ir_tensor *b)
{
	return a && b && ir_tensor_equal(a, b);
}

static void test_npy_round_trip(void)
{
	static const int dtypes[] = { IR_FLOAT, IR_DOUBLE, IR_FLOAT16, IR_BFLOAT16, IR_INT8, IR_INT16, IR_INT32,
				      IR_INT64, IR_UINT8, IR_UINT16, IR_UINT32, IR_UINT64, IR_BOOL, IR_COMPLEX64,
				      IR_COMPLEX128, IR_STRING };
	static const int64_t shapes[][4] = { { 0 }, { 0 }, { 5 }, { 2, 3, 4 }, { 2, 0, 3 }, { 1, 1, 1, 7 } };
	static const int ranks[] = { 0, 1, 1, 3, 3, 4 };
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		for (size_t s = 0; s < sizeof(ranks) / sizeof(ranks[0]); s++) {
			struct ir_diag d;
			ir_diag_init(&d);
			struct ir_tensor *t = make(dtypes[i], ranks[s], shapes[s], (unsigned)(i + s)), *u = NULL;
			CHECK(t != NULL);
			const char *p = tpath("rt.npy");
			int rc = exec_npy_write(p, t, &d);
			CHECK(rc == 0);
			if (!rc)
				rc = exec_npy_read(p, &u, &d);
			CHECK(rc == 0);
			if (rc || !same(t, u))
				fprintf(stderr, "npy round trip of %s rank %d: %s\n", ir_dtype_name(dtypes[i]), ranks[s],
					d.error ? d.error : "differs");
			CHECK(same(t, u));
			ir_tensor_unref(t);
			ir_tensor_unref(u);
			ir_diag_clear(&d);
		}
	/* the header is padded to 64 bytes and ends with '\n', as numpy writes it */
	struct ir_tensor *t = make(IR_FLOAT, 0, NULL, 1);
	CHECK(exec_npy_write(tpath("s.npy"), t, NULL) == 0);
	FILE *f = fopen(tpath("s.npy"), "rb");
	unsigned char h[128];
	CHECK(f && fread(h, 1, 128, f) == 128);
	if (f)
		fclose(f);
	CHECK(!memcmp(h, "\x93NUMPY\x01\x00", 8) && (h[8] + 10) % 64 == 0 && h[h[8] + 9] == '\n');
	CHECK(!memcmp(h + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 54));
	ir_tensor_unref(t);
	/* types numpy lacks are refused with a message */
	struct ir_diag d;
	ir_diag_init(&d);
	int64_t dims[1] = { 4 };
	t = ir_tensor_new(IR_F8E4M3FN, 1, dims, NULL);
	CHECK(exec_npy_write(tpath("f8.npy"), t, &d) == IR_ERR);
	CHECK(d.error && strstr(d.error, "numpy has no float8"));
	CHECK(access(tpath("f8.npy"), F_OK) != 0);
	ir_tensor_unref(t);
	ir_diag_clear(&d);
	/* no temporary file is left behind */
	t = make(IR_FLOAT, 0, NULL, 0);
	CHECK(exec_npy_write(tpath("no/such/dir/x.npy"), t, NULL) == IR_EIO);
	ir_tensor_unref(t);
}

static void test_npz_round_trip(void)
{
	int64_t d1[1] = { 3 }, d2[2] = { 2, 2 };
	struct exec_named_tensor a[4] = {
		{ "x", make(IR_FLOAT, 1, d1, 1) },
		{ "layer.0.weight", make(IR_INT64, 2, d2, 2) },
		{ "empty", make(IR_FLOAT16, 1, (int64_t[]){ 0 }, 3) },
		{ "s", make(IR_STRING, 2, d2, 4) },
	};
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(exec_npz_write(tpath("rt.npz"), a, 4, &d) == 0);
	struct exec_named_tensor *b = NULL;
	int n = -1;
	CHECK(exec_npz_read(tpath("rt.npz"), &b, &n, &d) == 0);
	if (d.error)
		fprintf(stderr, "npz: %s\n", d.error);
	CHECK(n == 4);
	for (int i = 0; i < n && i < 4; i++) {
		CHECK(!strcmp(a[i].name, b[i].name));
		CHECK(same(a[i].t, b[i].t));
	}
	exec_named_free(b, n);
	/* an empty archive */
	CHECK(exec_npz_write(tpath("e.npz"), a, 0, &d) == 0);
	CHECK(exec_npz_read(tpath("e.npz"), &b, &n, &d) == 0 && n == 0 && b == NULL);
	/* names that would be paths elsewhere, and duplicates, are refused */
	const char *bad[] = { "", "../x", "a/../../b", "/etc/x", "a\\b" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct exec_named_tensor one = { (char *)bad[i], a[0].t };
		ir_diag_clear(&d);
		CHECK(exec_npz_write(tpath("bad.npz"), &one, 1, &d) == IR_ERR);
		CHECK(d.error && strstr(d.error, "bad entry name"));
	}
	struct exec_named_tensor dup[2] = { a[0], a[0] };
	ir_diag_clear(&d);
	CHECK(exec_npz_write(tpath("bad.npz"), dup, 2, &d) == IR_ERR);
	CHECK(access(tpath("bad.npz"), F_OK) != 0);
	/* "a/b" is fine: a name, never a path */
	struct exec_named_tensor sub = { "a/b", a[0].t };
	CHECK(exec_npz_write(tpath("sub.npz"), &sub, 1, &d) == 0);
	CHECK(exec_npz_read(tpath("sub.npz"), &b, &n, &d) == 0 && n == 1 && !strcmp(b[0].name, "a/b"));
	exec_named_free(b, n);
	/* more than 65535 entries: the zip64 end records */
	ir_diag_clear(&d);
	enum { MANY = 70000 };
	struct exec_named_tensor *m = calloc(MANY, sizeof(*m));
	CHECK(m != NULL);
	for (int i = 0; m && i < MANY; i++) {
		m[i].name = malloc(16);
		snprintf(m[i].name, 16, "t%d", i);
		m[i].t = a[i % 2].t;
	}
	CHECK(m && exec_npz_write(tpath("many.npz"), m, MANY, &d) == 0);
	CHECK(exec_npz_read(tpath("many.npz"), &b, &n, &d) == 0 && n == MANY);
	if (d.error)
		fprintf(stderr, "many.npz: %s\n", d.error);
	CHECK(n == MANY && !strcmp(b[MANY - 1].name, "t69999") && same(b[MANY - 1].t, a[1].t));
	exec_named_free(b, n);
	for (int i = 0; m && i < MANY; i++)
		free(m[i].name);
	free(m);
	for (int i = 0; i < 4; i++)
		ir_tensor_unref(a[i].t);
	ir_diag_clear(&d);
}

/* ---- hostile files ---- */

static void put(const char *name, const void *data, size_t n)
{
	FILE *f = fopen(tpath(name), "wb");
	CHECK(f != NULL);
	if (f) {
		CHECK(fwrite(data, 1, n, f) == n);
		fclose(f);
	}
}

/* A .npy of format 1.0 with the given dict text and n data bytes; returns its size. */
static size_t npy_bytes(unsigned char *out, const char *dict, const void *data, size_t n)
{
	size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
	memcpy(out, "\x93NUMPY\x01\x00", 8);
	out[8] = (unsigned char)((total - 10) & 0xff);
	out[9] = (unsigned char)((total - 10) >> 8);
	memcpy(out + 10, dict, dl);
	memset(out + 10 + dl, ' ', total - 10 - dl - 1);
	out[total - 1] = '\n';
	if (n)
		memcpy(out + total, data, n);
	return total + n;
}

/* Reading `name` fails with a message containing `want`. */
static void expect_npy_error(const char *name, const char *want)
{
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_tensor *t = (struct ir_tensor *)1;
	int rc = exec_npy_read(tpath(name), &t, &d);
	CHECK(rc != 0 && t == NULL);
	CHECK(d.error && strstr(d.error, want));
	if (!d.error || !strstr(d.error, want))
		fprintf(stderr, "  %s: got '%s', wanted '%s'\n", name, d.error ? d.error : "(no error)", want);
	ir_diag_clear(&d);
}

static struct ir_tensor *read_ok(const char *name)
{
	struct ir_diag d;
	ir_diag_init(&d);
	struct ir_tensor *t = NULL;
	int rc = exec_npy_read(tpath(name), &t, &d);
	CHECK(rc == 0);
	if (rc)
		fprintf(stderr, "  %s: %s\n", name, d.error);
	ir_diag_clear(&d);
	return t;
}

static void test_hostile_npy(void)
{
	unsigned char buf[4096];
	float six[6] = { 0, 1, 2, 3, 4, 5 };
	size_t n;

	put("empty.npy", "", 0);
	expect_npy_error("empty.npy", "truncated");
	put("magic.npy", "PK\x03\x04-------------------", 20);
	expect_npy_error("magic.npy", "not a .npy file");
	n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six, sizeof(six));
	put("ok.npy", buf, n);
	struct ir_tensor *t = read_ok("ok.npy");
	CHECK(t && t->rank == 2 && t->dims[1] == 3 && ((const float *)ir_tensor_data(t))[5] == 5);
	ir_tensor_unref(t);
	put("short.npy", buf, n - 1);
	expect_npy_error("short.npy", "data is truncated");
	/* header length past the end */
	memcpy(buf + 100, buf, 64);
	buf[108] = 0xff;
	buf[109] = 0x7f;
	put("hlen.npy", buf + 100, 64);
	expect_npy_error("hlen.npy", "header is truncated");
	/* version 9 */
	n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", six, 4);
	buf[6] = 9;
	put("v9.npy", buf, n);
	expect_npy_error("v9.npy", "version 9.0");
	/* huge shapes: overflow, and larger than the file */
	n = npy_bytes(buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", six, 8);
	put("ovf.npy", buf, n);
	expect_npy_error("ovf.npy", "overflows");
	n = npy_bytes(buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", six, 8);
	put("huge.npy", buf, n);
	expect_npy_error("huge.npy", "data is truncated");
	n = npy_bytes(buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", six, 8);
	put("dim.npy", buf, n);
	expect_npy_error("dim.npy", "too large");
	n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", six, 8);
	put("neg.npy", buf, n);
	expect_npy_error("neg.npy", "shape is malformed");
	/* malformed and unsupported headers */
	n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False}", six, 4);
	put("noshape.npy", buf, n);
	expect_npy_error("noshape.npy", "lacks 'shape'");
	n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", six, 4);
	put("key.npy", buf, n);
	expect_npy_error("key.npy", "unknown key 'x'");
	n = npy_bytes(buf, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", six, 8);
	put("obj.npy", buf, n);
	expect_npy_error("obj.npy", "pickled");
	n = npy_bytes(buf, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", six, 8);
	put("struct.npy", buf, n);
	expect_npy_error("struct.npy", "structured");
	n = npy_bytes(buf, "{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", six, 16);
	put("f128.npy", buf, n);
	expect_npy_error("f128.npy", "unsupported dtype '<f16'");
	n = npy_bytes(buf, "{'descr': '|V1', 'fortran_order': False, 'shape': (1,), }", six, 1);
	put("v1.npy", buf, n);
	expect_npy_error("v1.npy", "1-byte opaque");
	n = npy_bytes(buf, "{'descr': '', 'fortran_order': False, 'shape': (1,), }", six, 1);
	put("nodescr.npy", buf, n);
	expect_npy_error("nodescr.npy", "no kind");
	/* shape with 65 dimensions */
	char dict[512];
	strcpy(dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
	for (int i = 0; i < 65; i++)
		strcat(dict, "1,");
	strcat(dict, "), }");
	n = npy_bytes(buf, dict, six, 4);
	put("rank.npy", buf, n);
	expect_npy_error("rank.npy", "more than 64");

	/* Fortran order: transposed to C order */
	n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", six, sizeof(six));
	put("fortran.npy", buf, n);
	t = read_ok("fortran.npy");
	if (t) {
		/* file: column-major [[0,2,4],[1,3,5]] */
		const float *f = ir_tensor_data(t);
		CHECK(f[0] == 0 && f[1] == 2 && f[2] == 4 && f[3] == 1 && f[4] == 3 && f[5] == 5);
	}
	ir_tensor_unref(t);
	/* big-endian: converted */
	unsigned char be[8] = { 0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0 };   /* 1.0f, -2.0f */
	n = npy_bytes(buf, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be, 8);
	put("be.npy", buf, n);
	t = read_ok("be.npy");
	CHECK(t && ((const float *)ir_tensor_data(t))[0] == 1.0f && ((const float *)ir_tensor_data(t))[1] == -2.0f);
	ir_tensor_unref(t);
	unsigned char beu[8] = { 0, 0, 0, 'h', 0, 0, 0x20, 0xac };   /* ">U2": "h€" */
	n = npy_bytes(buf, "{'descr': '>U2', 'fortran_order': False, 'shape': (), }", beu, 8);
	put("beu.npy", buf, n);
	t = read_ok("beu.npy");
	CHECK(t && t->dtype == IR_STRING && t->strings[0].len == 4 && !memcmp(t->strings[0].data, "h\xe2\x82\xac", 4));
	ir_tensor_unref(t);
	unsigned char badu[4] = { 0, 0xd8, 0, 0 };   /* a surrogate */
	n = npy_bytes(buf, "{'descr': '<U1', 'fortran_order': False, 'shape': (), }", badu, 4);
	put("badu.npy", buf, n);
	expect_npy_error("badu.npy", "invalid code point");
	/* bools other than 0/1 are normalised */
	unsigned char bools[3] = { 0, 1, 7 };
	n = npy_bytes(buf, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3);
	put("bool.npy", buf, n);
	t = read_ok("bool.npy");
	CHECK(t && t->dtype == IR_BOOL && ((const unsigned char *)ir_tensor_data(t))[2] == 1);
	ir_tensor_unref(t);
	/* not a regular file */
	expect_npy_error("", "not a regular file");
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(exec_npy_read(tpath("missing.npy"), &t, &d) == IR_EIO && d.error && strstr(d.error, "cannot open"));
	ir_diag_clear(&d);
}

static unsigned char *slurp(const char *name, size_t *n)
{
	FILE *f = fopen(tpath(name), "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *p = malloc((size_t)sz + 1);
	if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) {
		free(p);
		p = NULL;
	}
	fclose(f);
	*n = (size_t)sz;
	return p;
}

static void expect_npz_error(const char *name, const char *want)
{
	struct ir_diag d;
	ir_diag_init(&d);
	struct exec_named_tensor *a = NULL;
	int n = -1;
	int rc = exec_npz_read(tpath(name), &a, &n, &d);
	CHECK(rc != 0 && a == NULL && n == 0);
	CHECK(d.error && strstr(d.error, want));
	if (!d.error || !strstr(d.error, want))
		fprintf(stderr, "  %s: got '%s', wanted '%s'\n", name, d.error ? d.error : "(no error)", want);
	ir_diag_clear(&d);
}

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void test_hostile_npz(void)
{
	int64_t dims[1] = { 16 };
	struct exec_named_tensor a[2] = { { "a", make(IR_FLOAT, 1, dims, 1) }, { "b", make(IR_INT32, 1, dims, 2) } };
	CHECK(exec_npz_write(tpath("good.npz"), a, 2, NULL) == 0);
	ir_tensor_unref(a[0].t);
	ir_tensor_unref(a[1].t);
	size_t n;
	unsigned char *z = slurp("good.npz", &n), *c = malloc(n);
	CHECK(z && c && n > 200);
	if (!z || !c)
		return;
	size_t eocd = n - 22, cd = rd32(z + eocd + 16);
	CHECK(rd32(z + eocd) == 0x06054b50);

	put("short.npz", z, 10);
	expect_npz_error("short.npz", "not a zip archive");
	put("cut.npz", z, n - 30);   /* the end record is gone */
	expect_npz_error("cut.npz", "not a zip archive");
	memcpy(c, z, n);
	wr32(c + eocd + 16, (uint32_t)n);   /* central directory past the end */
	put("cdoff.npz", c, n);
	expect_npz_error("cdoff.npz", "out of the file");
	memcpy(c, z, n);
	c[eocd + 10] = 0xff;   /* entry count larger than the directory holds */
	c[eocd + 11] = 0x7f;
	put("count.npz", c, n);
	expect_npz_error("count.npz", "claims");
	memcpy(c, z, n);
	wr32(c + cd + 42, 0x7fffffff);   /* first entry's local header past the end */
	put("loff.npz", c, n);
	expect_npz_error("loff.npz", "past the end");
	memcpy(c, z, n);
	wr32(c + cd + 20, 0x7ffffff0);   /* its size past the end */
	wr32(c + cd + 24, 0x7ffffff0);
	put("size.npz", c, n);
	expect_npz_error("size.npz", "past the end");
	memcpy(c, z, n);
	c[cd + 10] = 12;   /* bzip2 */
	put("method.npz", c, n);
	expect_npz_error("method.npz", "compression method 12");
	memcpy(c, z, n);
	c[cd + 8] |= 1;    /* encrypted */
	put("enc.npz", c, n);
	expect_npz_error("enc.npz", "encrypted");
	memcpy(c, z, n);
	c[35 + 128 + 10] ^= 0x40;   /* a data byte of the first entry: the CRC catches it */
	put("crc.npz", c, n);
	expect_npz_error("crc.npz", "CRC mismatch");
	memcpy(c, z, n);
	c[cd + 46] = 'a';  /* rename entry "b.npy" to "a.npy" in the directory: duplicate */
	{
		size_t cd2 = cd + 46 + 5;
		c[cd2 + 46] = 'a';
	}
	put("dup.npz", c, n);
	expect_npz_error("dup.npz", "two entries");
	free(z);
	free(c);
	put("notzip.npz", "hello world, this is not a zip file at all", 42);
	expect_npz_error("notzip.npz", "not a zip archive");
}

/* ---- the comparison ---- */

static struct ir_tensor *fvec(int dtype, int rank, const int64_t *dims, const double *v)
{
	struct ir_tensor *t = ir_tensor_new(dtype, rank, dims, NULL);
	unsigned char *p = ir_tensor_mutable(t);
	for (uint64_t i = 0; p && i < t->numel; i++) {
		if (dtype == IR_FLOAT) {
			float f = (float)v[i];
			memcpy(p + 4 * i, &f, 4);
		} else if (dtype == IR_DOUBLE) {
			memcpy(p + 8 * i, &v[i], 8);
		} else if (dtype == IR_FLOAT16) {
			uint16_t h = ir_f32_to_f16((float)v[i]);
			memcpy(p + 2 * i, &h, 2);
		} else if (dtype == IR_INT64) {
			int64_t x = (int64_t)v[i];
			memcpy(p + 8 * i, &x, 8);
		} else if (dtype == IR_INT32) {
			int32_t x = (int32_t)v[i];
			memcpy(p + 4 * i, &x, 4);
		}
	}
	return t;
}

static void cmp(const struct ir_tensor *a, const struct ir_tensor *b, const struct exec_cmp_opts *o,
		struct exec_cmp *r)
{
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(exec_compare(a, b, o, r, &d) == 0);
	ir_diag_clear(&d);
}

static void test_compare(void)
{
	struct exec_cmp r;
	struct exec_cmp_opts o;
	int64_t d4[1] = { 4 };
	double x[4] = { 1, 2, 3, 4 };
	struct ir_tensor *a = fvec(IR_FLOAT, 1, d4, x), *b = fvec(IR_FLOAT, 1, d4, x), *c;

	exec_cmp_defaults(IR_FLOAT, &o);
	CHECK(o.rtol == 1e-3 && o.atol == 1e-7 && o.topk == 5);
	exec_cmp_defaults(IR_INT32, &o);
	CHECK(o.rtol == 0 && o.atol == 0);

	/* identical */
	cmp(a, b, NULL, &r);
	CHECK(r.pass && r.shape_ok && r.dtype_ok && r.n == 4 && r.n_bad == 0 && r.max_abs == 0);
	CHECK(fabs(r.cosine - 1) < 1e-12 && isinf(r.snr_db) && r.snr_db > 0);
	CHECK(r.has_topk && r.top1_agree == 1 && r.topk_agree == 1);   /* a vector is one row */
	o = (struct exec_cmp_opts){ 1e-7, 1e-3, 0 };
	cmp(a, b, &o, &r);
	CHECK(r.pass && !r.has_topk);
	int64_t d41[2] = { 4, 1 };   /* a last dim of 1 has no ranking */
	c = fvec(IR_FLOAT, 2, d41, x);
	cmp(c, c, NULL, &r);
	CHECK(r.pass && !r.has_topk);
	ir_tensor_unref(c);

	/* the atol/rtol boundary: |a-b| <= atol + rtol*|b| passes, just above fails */
	double y[4] = { 1, 2, 3, 4.5 };
	double xd[4] = { 1, 2, 3, 4 };
	struct ir_tensor *ad = fvec(IR_DOUBLE, 1, d4, xd), *bd = fvec(IR_DOUBLE, 1, d4, y);
	o = (struct exec_cmp_opts){ 0.05, 0.1, 0 };   /* tol at 4.5 = 0.5 */
	cmp(ad, bd, &o, &r);
	CHECK(r.pass && r.n_bad == 0 && r.max_abs == 0.5 && fabs(r.max_rel - 0.5 / 4.5) < 1e-15);
	CHECK(r.worst == 3 && r.worst_a == 4 && r.worst_b == 4.5);
	o.atol = 0.0499;
	cmp(ad, bd, &o, &r);
	CHECK(!r.pass && r.n_bad == 1 && r.worst == 3);
	ir_tensor_unref(ad);
	ir_tensor_unref(bd);

	/* NaN: in both is equal, in one only fails; infinities */
	double na[4] = { NAN, 1, INFINITY, -INFINITY }, nb[4] = { NAN, NAN, INFINITY, INFINITY };
	ad = fvec(IR_FLOAT, 1, d4, na);
	bd = fvec(IR_FLOAT, 1, d4, nb);
	cmp(ad, bd, NULL, &r);
	CHECK(!r.pass && r.n_bad == 2 && r.nan_a == 1 && r.nan_b == 2 && r.nan_mismatch == 1);
	CHECK(r.inf_a == 2 && r.inf_b == 2 && isinf(r.max_abs));
	CHECK(r.worst == 1 && isnan(r.worst_b));   /* the first element failing by infinity */
	cmp(ad, ad, NULL, &r);
	CHECK(r.pass && r.n_bad == 0 && r.nan_mismatch == 0);
	ir_tensor_unref(ad);
	ir_tensor_unref(bd);

	/* shape and dtype mismatches */
	int64_t d22[2] = { 2, 2 };
	c = fvec(IR_FLOAT, 2, d22, x);
	cmp(c, b, NULL, &r);
	CHECK(!r.pass && !r.shape_ok && strstr(r.why, "shapes differ: [2,2], expected [4]"));
	ir_tensor_unref(c);
	c = fvec(IR_FLOAT16, 1, d4, x);
	cmp(c, b, NULL, &r);
	CHECK(!r.pass && r.shape_ok && !r.dtype_ok && r.n_bad == 0 && strstr(r.why, "float16"));
	ir_tensor_unref(c);
	c = ir_tensor_new(IR_STRING, 1, d4, NULL);
	cmp(c, b, NULL, &r);
	CHECK(!r.pass && strstr(r.why, "cannot compare string with float32"));
	ir_tensor_unref(c);

	/* integers are exact, even past 2^53 */
	int64_t big[2] = { INT64_MAX, INT64_MAX - 1 }, d2[1] = { 2 };
	struct ir_tensor *i1 = ir_tensor_new(IR_INT64, 1, d2, NULL), *i2 = ir_tensor_new(IR_INT64, 1, d2, NULL);
	memcpy(ir_tensor_mutable(i1), big, 16);
	big[1] = INT64_MAX;
	memcpy(ir_tensor_mutable(i2), big, 16);
	cmp(i1, i2, NULL, &r);
	CHECK(!r.pass && r.n_bad == 1 && r.worst == 1 && r.max_abs == 1);
	cmp(i1, i1, NULL, &r);
	CHECK(r.pass);
	ir_tensor_unref(i1);
	ir_tensor_unref(i2);
	uint64_t ub[2] = { UINT64_MAX, 0 };
	i1 = ir_tensor_new(IR_UINT64, 1, d2, NULL);
	i2 = ir_tensor_new(IR_UINT64, 1, d2, NULL);
	memcpy(ir_tensor_mutable(i1), ub, 16);
	ub[0] = UINT64_MAX - 1;
	memcpy(ir_tensor_mutable(i2), ub, 16);
	cmp(i1, i2, NULL, &r);
	CHECK(!r.pass && r.n_bad == 1 && r.worst == 0 && r.max_abs == 1);
	ir_tensor_unref(i1);
	ir_tensor_unref(i2);

	/* top-k over rows: 3 rows of 4 */
	int64_t d34[2] = { 3, 4 };
	double ta[12] = { 1, 5, 2, 0,   9, 1, 8, 7,   0, 0, 3, 4 };
	double tb[12] = { 1, 5, 2, 0,   8, 1, 9, 7,   0, 3, 0, 4 };
	ad = fvec(IR_FLOAT, 2, d34, ta);
	bd = fvec(IR_FLOAT, 2, d34, tb);
	o = (struct exec_cmp_opts){ 0, 0, 2 };
	cmp(ad, bd, &o, &r);
	/* argmax: row 0 agrees (1), row 1: 0 vs 2, row 2: 3 vs 3; top-2: {1,2}/{1,2},
	 * {0,2}/{2,0}, {3,2}/{3,1} -> 1, 1, 0.5 */
	CHECK(r.has_topk && fabs(r.top1_agree - 2.0 / 3) < 1e-12 && fabs(r.topk_agree - 2.5 / 3) < 1e-12);
	CHECK(r.n_bad == 4);
	ir_tensor_unref(ad);
	ir_tensor_unref(bd);

	/* cosine and SNR of known vectors */
	double ca[4] = { 1, 0, 0, 0 }, cb[4] = { 0, 1, 0, 0 };
	ad = fvec(IR_DOUBLE, 1, d4, ca);
	bd = fvec(IR_DOUBLE, 1, d4, cb);
	cmp(ad, bd, NULL, &r);
	CHECK(fabs(r.cosine) < 1e-12 && fabs(r.snr_db - 10 * log10(0.5)) < 1e-12);
	ir_tensor_unref(ad);
	ir_tensor_unref(bd);

	/* strings */
	struct ir_tensor *s1 = make(IR_STRING, 1, d4, 0), *s2 = make(IR_STRING, 1, d4, 0);
	cmp(s1, s2, NULL, &r);
	CHECK(r.pass && r.n == 4);
	free(s2->strings[2].data);
	s2->strings[2].data = strdup("x");
	s2->strings[2].len = 1;
	cmp(s1, s2, NULL, &r);
	CHECK(!r.pass && r.n_bad == 1 && r.worst == 2);
	ir_tensor_unref(s1);
	ir_tensor_unref(s2);

	/* complex: the imaginary part counts */
	struct ir_tensor *z1 = ir_tensor_new(IR_COMPLEX64, 1, d2, NULL), *z2 = ir_tensor_new(IR_COMPLEX64, 1, d2, NULL);
	float zv[4] = { 1, 2, 3, 4 };
	memcpy(ir_tensor_mutable(z1), zv, 16);
	zv[3] = 5;
	memcpy(ir_tensor_mutable(z2), zv, 16);
	cmp(z1, z2, NULL, &r);
	CHECK(!r.pass && r.n == 2 && r.n_bad == 1 && r.worst == 1 && r.max_abs == 1);
	ir_tensor_unref(z1);
	ir_tensor_unref(z2);

	/* empty tensors pass */
	int64_t d0[1] = { 0 };
	ad = ir_tensor_new(IR_FLOAT, 1, d0, NULL);
	cmp(ad, ad, NULL, &r);
	CHECK(r.pass && r.n == 0);
	ir_tensor_unref(ad);

	/* Ctrl-C */
	ir_interrupted = 1;
	struct ir_diag d;
	ir_diag_init(&d);
	CHECK(exec_compare(a, b, NULL, &r, &d) == IR_EINTR);
	ir_interrupted = 0;
	ir_diag_clear(&d);
	ir_tensor_unref(a);
	ir_tensor_unref(b);
}

/* ---- files numpy wrote (test_npy_numpy.py) ---- */

/* Sum of the elements (complex: real + imaginary parts; strings: their
 * UTF-8 byte lengths), the manifest's checksum. */
static double checksum(const struct ir_tensor *t)
{
	double s = 0;
	const void *p = ir_tensor_data(t);
	for (uint64_t i = 0; i < t->numel; i++) {
		if (t->dtype == IR_STRING) {
			s += (double)t->strings[i].len;
		} else if (t->dtype == IR_COMPLEX64) {
			float f[2];
			memcpy(f, (const char *)p + 8 * i, 8);
			s += (double)f[0] + f[1];
		} else if (t->dtype == IR_COMPLEX128) {
			double f[2];
			memcpy(f, (const char *)p + 16 * i, 16);
			s += f[0] + f[1];
		} else {
			s += ir_elem_to_f64(t->dtype, p, i);
		}
	}
	return s;
}

static bool close_to(double x, double y)
{
	return x == y || fabs(x - y) <= 1e-6 * fmax(fabs(x), fabs(y));
}

/* Checks one tensor against a manifest line; writes it back under out/. */
static void check_numpy_tensor(const char *dir, FILE *outm, const char *file, const char *entry,
			       const struct ir_tensor *t, const char *dtype, const char *shape, double sum)
{
	char sb[256], path[1024];
	ir_dims_str(t->rank, t->dims, sb, sizeof(sb));
	bool ok = !strcmp(ir_dtype_name(t->dtype), dtype) && !strcmp(sb, shape) && close_to(checksum(t), sum);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  %s %s: got %s %s sum %.17g, wanted %s %s sum %.17g\n", file, entry,
			ir_dtype_name(t->dtype), sb, checksum(t), dtype, shape, sum);
	if (t->dtype == IR_BFLOAT16 || !outm)
		return;
	/* write it back for numpy to read */
	static int k;
	char name[64];
	snprintf(name, sizeof(name), "t%d.npy", k++);
	snprintf(path, sizeof(path), "%s/out/%s", dir, name);
	struct ir_diag d;
	ir_diag_init(&d);
	int rc = exec_npy_write(path, t, &d);
	CHECK(rc == 0);
	if (rc)
		fprintf(stderr, "  writing %s: %s\n", path, d.error);
	else
		fprintf(outm, "%s %s %s %s\n", name, file, entry, dtype);
	ir_diag_clear(&d);
}

static void test_numpy_files(const char *dir)
{
	char path[1024], line[1024];
	snprintf(path, sizeof(path), "%s/manifest.txt", dir);
	FILE *m = fopen(path, "r");
	CHECK(m != NULL);
	if (!m)
		return;
	snprintf(path, sizeof(path), "%s/out", dir);
	mkdir(path, 0777);
	snprintf(path, sizeof(path), "%s/out/manifest.txt", dir);
	FILE *outm = fopen(path, "w");
	CHECK(outm != NULL);
	int lines = 0;
	/* lines: FILE ENTRY DTYPE SHAPE SUM, ENTRY "-" for .npy files; or
	 * FILE - error TEXT for files that must be refused */
	while (fgets(line, sizeof(line), m)) {
		char file[256], entry[256], dtype[64], shape[256];
		double sum;
		if (sscanf(line, "%255s %255s %63s %255s %lf", file, entry, dtype, shape, &sum) < 4)
			continue;
		lines++;
		snprintf(path, sizeof(path), "%s/%s", dir, file);
		struct ir_diag d;
		ir_diag_init(&d);
		if (!strcmp(dtype, "error")) {
			struct ir_tensor *t = NULL;
			struct exec_named_tensor *a = NULL;
			int n = 0;
			int rc = strstr(file, ".npz") ? exec_npz_read(path, &a, &n, &d) : exec_npy_read(path, &t, &d);
			CHECK(rc != 0 && d.error && strstr(d.error, shape));
			if (!(rc != 0 && d.error && strstr(d.error, shape)))
				fprintf(stderr, "  %s: got '%s', wanted '%s'\n", file, d.error ? d.error : "(none)", shape);
			ir_tensor_unref(t);
			exec_named_free(a, n);
		} else if (!strcmp(entry, "-")) {
			struct ir_tensor *t = NULL;
			int rc = exec_npy_read(path, &t, &d);
			CHECK(rc == 0);
			if (rc)
				fprintf(stderr, "  %s: %s\n", file, d.error);
			else
				check_numpy_tensor(dir, outm, file, entry, t, dtype, shape, sum);
			ir_tensor_unref(t);
		} else {
			struct exec_named_tensor *a = NULL;
			int n = 0;
			int rc = exec_npz_read(path, &a, &n, &d);
			CHECK(rc == 0);
			if (rc)
				fprintf(stderr, "  %s: %s\n", file, d.error);
			int found = -1;
			for (int i = 0; i < n; i++)
				if (!strcmp(a[i].name, entry))
					found = i;
			CHECK(rc || found >= 0);
			if (!rc && found < 0)
				fprintf(stderr, "  %s: no entry '%s'\n", file, entry);
			if (found >= 0)
				check_numpy_tensor(dir, outm, file, entry, a[found].t, dtype, shape, sum);
			exec_named_free(a, n);
		}
		ir_diag_clear(&d);
	}
	fclose(m);
	if (outm)
		fclose(outm);
	CHECK(lines > 0);
	printf("%d files from numpy checked\n", lines);
}

static void remove_tmpdir(void)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

int main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_exec_io.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	test_npy_round_trip();
	test_npz_round_trip();
	test_hostile_npy();
	test_hostile_npz();
	test_compare();
	if (argc > 1)
		test_numpy_files(argv[1]);
	remove_tmpdir();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
