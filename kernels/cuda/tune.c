/*
 * tune.c - the tuning cache: kernel choices timed once per shape and kept in
 * a text file (cuda.h).
 *
 * The file, one entry a line:
 *   ogsh-tune 1<TAB>FINGERPRINT
 *   KEY<TAB>CHOICE<TAB>MS
 * A file whose first line is not this header with our fingerprint (another
 * GPU, driver or library) is ignored and replaced on save. Lines that do not
 * parse (no tabs, junk, NUL bytes, keys over TUNE_MAX_KEY bytes, an
 * unfinished last line) are skipped: the file is a cache, never trusted.
 * A later line for the same key wins. Saving writes a temporary file in the
 * same folder, syncs it and renames it over the old one, so a reader never
 * sees half a file.
 *
 * The cache is one table guarded by a mutex: prepare runs on one thread, but
 * nothing breaks if two plans share a cache.
 */
#include "kernels/cuda/cuda.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TUNE_MAGIC "ogsh-tune 1"
#define TUNE_MAX_KEY 512
#define TUNE_MAX_FP 512
/* a cache file larger than this is not ours (or not worth reading) */
#define TUNE_MAX_FILE (64L << 20)

struct tune_entry {
	char *key;
	int choice;
	float ms;
	uint64_t hash;
};

struct cuda_tune {
	char *path;                 /* NULL: kept in memory only */
	char *fingerprint;
	struct tune_entry *e;
	int n, cap;
	bool dirty;                 /* something was put since the last save */
	pthread_mutex_t mu;
};

static uint64_t hash_of(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* Whether s[0:len] can be written as a key: not empty, not too long, no
 * control characters (tabs and newlines would break the format). */
static bool key_ok(const char *s, size_t len)
{
	if (len == 0 || len > TUNE_MAX_KEY)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static int find(const struct cuda_tune *t, const char *key, size_t len, uint64_t h)
{
	for (int i = 0; i < t->n; i++)
		if (t->e[i].hash == h && !strncmp(t->e[i].key, key, len) && t->e[i].key[len] == 0)
			return i;
	return -1;
}

/* Adds or replaces; false when out of memory. */
static bool set(struct cuda_tune *t, const char *key, size_t len, int choice, float ms)
{
	uint64_t h = hash_of(key, len);
	int i = find(t, key, len, h);
	if (i >= 0) {
		t->e[i].choice = choice;
		t->e[i].ms = ms;
		return true;
	}
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 64;
		struct tune_entry *e = realloc(t->e, (size_t)cap * sizeof(*e));
		if (!e)
			return false;
		t->e = e;
		t->cap = cap;
	}
	char *k = malloc(len + 1);
	if (!k)
		return false;
	memcpy(k, key, len);
	k[len] = 0;
	t->e[t->n++] = (struct tune_entry){ .key = k, .choice = choice, .ms = ms, .hash = h };
	return true;
}

/* Parses "KEY\tCHOICE\tMS" (line[0:len], no newline, may hold anything);
 * false when it is not an entry. */
static bool parse_entry(const char *line, size_t len, size_t *klen, int *choice, float *ms)
{
	if (memchr(line, 0, len))
		return false;
	const char *t1 = memchr(line, '\t', len);
	if (!t1)
		return false;
	*klen = (size_t)(t1 - line);
	if (!key_ok(line, *klen))
		return false;
	const char *rest = t1 + 1, *end = line + len;
	const char *t2 = memchr(rest, '\t', (size_t)(end - rest));
	if (!t2 || t2 == rest || end - t2 - 1 <= 0 || end - t2 - 1 > 40 || t2 - rest > 12)
		return false;
	char num[48];
	memcpy(num, rest, (size_t)(t2 - rest));
	num[t2 - rest] = 0;
	char *e;
	errno = 0;
	long c = strtol(num, &e, 10);
	if (errno || *e || e == num || c < -1000000000L || c > 1000000000L)
		return false;
	memcpy(num, t2 + 1, (size_t)(end - t2 - 1));
	num[end - t2 - 1] = 0;
	errno = 0;
	float m = strtof(num, &e);
	if (errno || *e || e == num || !isfinite(m) || m < 0)
		return false;
	*choice = (int)c;
	*ms = m;
	return true;
}

/* Reads the file into t (entries only when its fingerprint is ours). A
 * missing file is an empty cache; an unreadable one a warning. */
static int load(struct cuda_tune *t, struct ir_diag *d)
{
	FILE *f = fopen(t->path, "rb");
	if (!f) {
		if (errno != ENOENT) {
			char eb[128];
			ir_diag_warn(d, "cannot read the tuning cache '%s': %s", t->path, ir_errstr(errno, eb, sizeof(eb)));
		}
		return 0;
	}
	char *buf = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (;;) {
		if (cap - n < 65536) {
			if (cap >= (size_t)TUNE_MAX_FILE) {
				ir_diag_warn(d, "the tuning cache '%s' is larger than %ld MiB: ignored", t->path,
					     TUNE_MAX_FILE >> 20);
				goto out;
			}
			size_t nc = cap ? cap * 2 : 65536 * 2;
			char *nb = realloc(buf, nc);
			if (!nb) {
				rc = ir_diag_err(d, IR_ENOMEM, "out of memory reading the tuning cache");
				goto out;
			}
			buf = nb;
			cap = nc;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0) {
			if (ferror(f)) {
				char eb[128];
				ir_diag_warn(d, "cannot read the tuning cache '%s': %s", t->path,
					     ir_errstr(errno, eb, sizeof(eb)));
				goto out;
			}
			break;
		}
	}
	/* the header */
	const char *p = buf, *end = buf + n;
	const char *nl = n ? memchr(p, '\n', n) : NULL;
	if (!nl)
		goto out;
	size_t mlen = strlen(TUNE_MAGIC), flen = strlen(t->fingerprint);
	if ((size_t)(nl - p) != mlen + 1 + flen || memcmp(p, TUNE_MAGIC, mlen) || p[mlen] != '\t' ||
	    memcmp(p + mlen + 1, t->fingerprint, flen))
		goto out;   /* another machine's, or not a cache: replaced on save */
	p = nl + 1;
	/* the entries: only whole lines (a last line without its newline was cut short) */
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		size_t len = (size_t)(nl - p), klen;
		if (len && p[len - 1] == '\r')
			len--;
		int choice;
		float ms;
		if (parse_entry(p, len, &klen, &choice, &ms) && !set(t, p, klen, choice, ms)) {
			rc = ir_diag_err(d, IR_ENOMEM, "out of memory reading the tuning cache");
			goto out;
		}
		p = nl + 1;
	}
out:
	free(buf);
	fclose(f);
	return rc;
}

struct cuda_tune *cuda_tune_open(const char *path, const char *fingerprint, struct ir_diag *d)
{
	struct cuda_tune *t = calloc(1, sizeof(*t));
	if (!t) {
		ir_diag_err(d, IR_ENOMEM, "out of memory opening the tuning cache");
		return NULL;
	}
	pthread_mutex_init(&t->mu, NULL);
	/* the fingerprint goes on the header line: no control characters */
	const char *fp = fingerprint ? fingerprint : "";
	size_t fl = strnlen(fp, TUNE_MAX_FP);
	t->fingerprint = malloc(fl + 1);
	t->path = path && *path ? strdup(path) : NULL;
	if (!t->fingerprint || (path && *path && !t->path)) {
		ir_diag_err(d, IR_ENOMEM, "out of memory opening the tuning cache");
		cuda_tune_free(t);
		return NULL;
	}
	for (size_t i = 0; i < fl; i++)
		t->fingerprint[i] = ((unsigned char)fp[i] < 0x20 || fp[i] == 0x7f) ? ' ' : fp[i];
	t->fingerprint[fl] = 0;
	if (t->path && load(t, d)) {
		cuda_tune_free(t);
		return NULL;
	}
	return t;
}

/* Makes the folders leading to path (like mkdir -p of its dirname). */
static int make_parents(const char *path, struct ir_diag *d)
{
	char *dir = strdup(path);
	if (!dir)
		return ir_diag_err(d, IR_ENOMEM, "out of memory saving the tuning cache");
	char *slash = strrchr(dir, '/');
	int rc = 0;
	if (slash && slash != dir) {
		*slash = 0;
		for (char *p = dir + 1; ; p++) {
			if (*p != '/' && *p != 0)
				continue;
			char c = *p;
			*p = 0;
			if (mkdir(dir, 0777) && errno != EEXIST) {
				char eb[128];
				rc = ir_diag_err(d, IR_EIO, "cannot create the folder '%s': %s", dir,
						 ir_errstr(errno, eb, sizeof(eb)));
				break;
			}
			*p = c;
			if (!c)
				break;
		}
	}
	free(dir);
	return rc;
}

int cuda_tune_save(struct cuda_tune *t, struct ir_diag *d)
{
	if (!t || !t->path)
		return 0;
	pthread_mutex_lock(&t->mu);
	int rc = 0, fd = -1;
	FILE *f = NULL;
	char *tmp = NULL;
	char eb[128];
	if (!t->dirty)
		goto out;
	rc = make_parents(t->path, d);
	if (rc)
		goto out;
	size_t pl = strlen(t->path);
	tmp = malloc(pl + 16);
	if (!tmp) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory saving the tuning cache");
		goto out;
	}
	memcpy(tmp, t->path, pl);
	memcpy(tmp + pl, ".tmp.XXXXXX", 12);
	fd = mkstemp(tmp);
	if (fd < 0) {
		rc = ir_diag_err(d, IR_EIO, "cannot write the tuning cache '%s': %s", t->path,
				 ir_errstr(errno, eb, sizeof(eb)));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	(void)fchmod(fd, 0644);
	f = fdopen(fd, "wb");
	if (!f) {
		rc = ir_diag_err(d, IR_EIO, "cannot write '%s': %s", tmp, ir_errstr(errno, eb, sizeof(eb)));
		close(fd);
		goto fail;
	}
	fprintf(f, "%s\t%s\n", TUNE_MAGIC, t->fingerprint);
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s\t%d\t%.6g\n", t->e[i].key, t->e[i].choice, (double)t->e[i].ms);
	if (fflush(f) || ferror(f) || fsync(fileno(f))) {
		rc = ir_diag_err(d, IR_EIO, "cannot write '%s': %s", tmp, ir_errstr(errno, eb, sizeof(eb)));
		fclose(f);
		goto fail;
	}
	if (fclose(f)) {
		rc = ir_diag_err(d, IR_EIO, "cannot write '%s': %s", tmp, ir_errstr(errno, eb, sizeof(eb)));
		goto fail;
	}
	if (rename(tmp, t->path)) {
		rc = ir_diag_err(d, IR_EIO, "cannot replace the tuning cache '%s': %s", t->path,
				 ir_errstr(errno, eb, sizeof(eb)));
		goto fail;
	}
	/* the rename itself reaches the disk with its folder */
	char *slash = strrchr(tmp, '/');
	if (slash)
		slash[slash == tmp ? 1 : 0] = 0;
	int dfd = open(slash ? tmp : ".", O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	t->dirty = false;
	goto out;
fail:
	unlink(tmp);
out:
	free(tmp);
	pthread_mutex_unlock(&t->mu);
	return rc;
}

void cuda_tune_free(struct cuda_tune *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n; i++)
		free(t->e[i].key);
	free(t->e);
	free(t->path);
	free(t->fingerprint);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

int cuda_tune_count(const struct cuda_tune *t)
{
	return t ? t->n : 0;
}

bool cuda_tune_get(struct cuda_tune *t, const char *key, int *choice, float *ms)
{
	if (!t || !key)
		return false;
	size_t len = strnlen(key, TUNE_MAX_KEY + 1);
	if (!key_ok(key, len))
		return false;
	pthread_mutex_lock(&t->mu);
	int i = find(t, key, len, hash_of(key, len));
	if (i >= 0) {
		if (choice)
			*choice = t->e[i].choice;
		if (ms)
			*ms = t->e[i].ms;
	}
	pthread_mutex_unlock(&t->mu);
	return i >= 0;
}

void cuda_tune_put(struct cuda_tune *t, const char *key, int choice, float ms)
{
	if (!t || !key)
		return;
	size_t len = strnlen(key, TUNE_MAX_KEY + 1);
	/* a key the file cannot hold is not kept (the choice is timed again) */
	if (!key_ok(key, len))
		return;
	if (!isfinite(ms) || ms < 0)
		ms = 0;
	pthread_mutex_lock(&t->mu);
	if (set(t, key, len, choice, ms))
		t->dirty = true;
	pthread_mutex_unlock(&t->mu);
}
