/*
 * test_cuda_tune.c - unit tests of the tuning cache (kernels/cuda/tune.c):
 * round trips, another machine's file, hostile files (junk, NUL bytes, long
 * lines, bad numbers, a cut-off last line), key limits, atomic save into a
 * folder that does not exist yet, and save errors. Needs no GPU.
 */
#include "kernels/cuda/cuda.h"

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

static void write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fwrite(data, 1, n, f) == n);
	fclose(f);
}

static bool exists(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0;
}

static void test_round_trip(void)
{
	struct ir_diag d;
	ir_diag_init(&d);
	const char *path = tpath("new/deeper/tune.txt");   /* folders made on save */
	struct cuda_tune *t = cuda_tune_open(path, "H100 drv 580 lt 13.0", &d);
	CHECK(t != NULL);
	CHECK(cuda_tune_count(t) == 0);
	/* nothing added: nothing written */
	CHECK(cuda_tune_save(t, &d) == 0);
	CHECK(!exists(path));
	cuda_tune_put(t, "gemm m=1 n=2 k=3", 4, 0.25f);
	cuda_tune_put(t, "conv x", 0, 1.5f);
	cuda_tune_put(t, "gemm m=1 n=2 k=3", 5, 0.125f);   /* replaces */
	CHECK(cuda_tune_count(t) == 2);
	int c = -1;
	float ms = -1;
	CHECK(cuda_tune_get(t, "gemm m=1 n=2 k=3", &c, &ms) && c == 5 && ms == 0.125f);
	CHECK(!cuda_tune_get(t, "gemm m=1 n=2 k=4", &c, &ms));
	CHECK(cuda_tune_save(t, &d) == 0);
	CHECK(d.error == NULL);
	CHECK(exists(path));
	cuda_tune_free(t);

	t = cuda_tune_open(path, "H100 drv 580 lt 13.0", &d);
	CHECK(t && cuda_tune_count(t) == 2);
	CHECK(cuda_tune_get(t, "conv x", &c, &ms) && c == 0 && ms == 1.5f);
	CHECK(cuda_tune_get(t, "gemm m=1 n=2 k=3", &c, NULL) && c == 5);
	cuda_tune_free(t);

	/* another machine: ignored, then replaced */
	t = cuda_tune_open(path, "H200 drv 580 lt 13.0", &d);
	CHECK(t && cuda_tune_count(t) == 0);
	cuda_tune_put(t, "k", 1, 2.0f);
	CHECK(cuda_tune_save(t, &d) == 0);
	cuda_tune_free(t);
	t = cuda_tune_open(path, "H100 drv 580 lt 13.0", &d);
	CHECK(t && cuda_tune_count(t) == 0);
	cuda_tune_free(t);
	t = cuda_tune_open(path, "H200 drv 580 lt 13.0", &d);
	CHECK(t && cuda_tune_count(t) == 1);
	cuda_tune_free(t);
	/* no temporary files left behind */
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "ls '%s' | grep -q tmp", tpath("new/deeper"));
	CHECK(system(cmd) != 0);
	CHECK(d.error == NULL);
	ir_diag_clear(&d);
}

static void test_keys(void)
{
	struct cuda_tune *t = cuda_tune_open(NULL, "fp", NULL);   /* in memory only */
	CHECK(t != NULL);
	char key[600];
	memset(key, 'k', sizeof(key));
	key[512] = 0;
	cuda_tune_put(t, key, 1, 1);
	CHECK(cuda_tune_get(t, key, NULL, NULL));
	key[512] = 'k';
	key[513] = 0;
	cuda_tune_put(t, key, 1, 1);   /* too long: not kept */
	CHECK(!cuda_tune_get(t, key, NULL, NULL));
	cuda_tune_put(t, "a\tb", 1, 1);
	cuda_tune_put(t, "a\nb", 1, 1);
	cuda_tune_put(t, "", 1, 1);
	CHECK(cuda_tune_count(t) == 1);
	cuda_tune_put(t, "nan", 3, 0.0f / 0.0f);   /* a NaN time is kept as 0 */
	float ms = -1;
	CHECK(cuda_tune_get(t, "nan", NULL, &ms) && ms == 0);
	CHECK(cuda_tune_save(t, NULL) == 0);
	cuda_tune_free(t);
	cuda_tune_free(NULL);
	CHECK(cuda_tune_count(NULL) == 0);
	CHECK(!cuda_tune_get(NULL, "x", NULL, NULL));
}

static void test_hostile(void)
{
	const char *path = tpath("hostile.txt");
	size_t cap = 300000, n = 0;
	char *buf = malloc(cap);
	CHECK(buf != NULL);
	if (!buf)
		return;
#define ADD(s) do { memcpy(buf + n, (s), sizeof(s) - 1); n += sizeof(s) - 1; } while (0)
	ADD("ogsh-tune 1\tfp\n");
	ADD("good1\t1\t0.5\n");
	ADD("no tabs at all\n");
	ADD("one tab\t3\n");
	ADD("\t1\t1\n");                    /* empty key */
	ADD("badnum\tx\t1\n");
	ADD("badms\t1\tfast\n");
	ADD("negms\t1\t-1\n");
	ADD("nanms\t1\tnan\n");
	ADD("hugems\t1\t1e99999\n");
	ADD("hugechoice\t99999999999999999999\t1\n");
	ADD("trailing\t1\t1 \n");
	ADD("three tabs\t1\t1\t1\n");
	ADD("crlf\t7\t0.75\r\n");
	memcpy(buf + n, "nul\0key\t1\t1\n", 12);
	n += 12;
	for (int i = 0; i < 256; i++)     /* binary junk with a newline in it somewhere */
		buf[n++] = (char)(i * 37 + 11);
	buf[n++] = '\n';
	memset(buf + n, 'L', 200000);      /* a long line */
	n += 200000;
	ADD("\t1\t1\n");
	char longkey[600];
	memset(longkey, 'q', 513);
	memcpy(longkey + 513, "\t1\t1\n", 5);
	memcpy(buf + n, longkey, 518);
	n += 518;
	ADD("good2\t2\t0.25\n");
	ADD("good1\t9\t0.125\n");          /* a later line wins */
	ADD("cut\t1\t1");                  /* no newline: cut short */
	write_file(path, buf, n);

	struct ir_diag d;
	ir_diag_init(&d);
	struct cuda_tune *t = cuda_tune_open(path, "fp", &d);
	CHECK(t != NULL);
	int c = -1;
	float ms = -1;
	CHECK(cuda_tune_get(t, "good1", &c, &ms) && c == 9 && ms == 0.125f);
	CHECK(cuda_tune_get(t, "good2", &c, &ms) && c == 2 && ms == 0.25f);
	CHECK(cuda_tune_get(t, "crlf", &c, &ms) && c == 7 && ms == 0.75f);
	CHECK(!cuda_tune_get(t, "cut", NULL, NULL));
	CHECK(!cuda_tune_get(t, "negms", NULL, NULL));
	CHECK(!cuda_tune_get(t, "hugechoice", NULL, NULL));
	CHECK(cuda_tune_count(t) == 3);
	cuda_tune_free(t);

	/* pure junk, an empty file, a header without a newline */
	for (size_t i = 0; i < cap; i++)
		buf[i] = (char)((i * 2654435761u) >> 13);
	write_file(path, buf, cap);
	t = cuda_tune_open(path, "fp", &d);
	CHECK(t && cuda_tune_count(t) == 0);
	cuda_tune_free(t);
	write_file(path, "", 0);
	t = cuda_tune_open(path, "fp", &d);
	CHECK(t && cuda_tune_count(t) == 0);
	cuda_tune_free(t);
	write_file(path, "ogsh-tune 1\tfp", 14);
	t = cuda_tune_open(path, "fp", &d);
	CHECK(t && cuda_tune_count(t) == 0);
	cuda_tune_free(t);
	/* a fingerprint with control characters still round-trips */
	t = cuda_tune_open(path, "a\nb\tc", &d);
	CHECK(t != NULL);
	cuda_tune_put(t, "x", 1, 1);
	CHECK(cuda_tune_save(t, &d) == 0);
	cuda_tune_free(t);
	t = cuda_tune_open(path, "a\nb\tc", &d);
	CHECK(t && cuda_tune_count(t) == 1);
	cuda_tune_free(t);
	CHECK(d.error == NULL);
	ir_diag_clear(&d);
	free(buf);
}

static void test_errors(void)
{
	struct ir_diag d;
	ir_diag_init(&d);
	/* the folder is a file: save fails with a message, nothing crashes */
	write_file(tpath("afile"), "x", 1);
	struct cuda_tune *t = cuda_tune_open(tpath("afile/tune.txt"), "fp", &d);
	CHECK(t && cuda_tune_count(t) == 0);
	cuda_tune_put(t, "x", 1, 1);
	CHECK(cuda_tune_save(t, &d) != 0);
	CHECK(d.error != NULL);
	cuda_tune_free(t);
	ir_diag_clear(&d);
	/* the path is a folder: reading warns, saving fails */
	ir_diag_init(&d);
	t = cuda_tune_open(tmpdir, "fp", &d);
	CHECK(t && cuda_tune_count(t) == 0);
	CHECK(d.error == NULL);
	cuda_tune_put(t, "x", 1, 1);
	CHECK(cuda_tune_save(t, &d) != 0);
	cuda_tune_free(t);
	ir_diag_clear(&d);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ogsh-tune-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_round_trip();
	test_keys();
	test_hostile();
	test_errors();
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
