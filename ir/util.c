/*
 * util.c - diagnostics, allocation helpers and the string map of ir/.
 */
#include "ir_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

volatile int ir_interrupted;

void ir_diag_init(struct ir_diag *d)
{
	memset(d, 0, sizeof(*d));
}

void ir_diag_clear(struct ir_diag *d)
{
	if (!d)
		return;
	free(d->error);
	for (size_t i = 0; i < d->n_warnings; i++)
		free(d->warnings[i]);
	free(d->warnings);
	size_t max = d->max_warnings;
	memset(d, 0, sizeof(*d));
	d->max_warnings = max;
}

char *ir_vfmt(const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	int n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return NULL;
	char *s = malloc((size_t)n + 1);
	if (s)
		vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

char *ir_fmt(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = ir_vfmt(fmt, ap);
	va_end(ap);
	return s;
}

int ir_diag_err(struct ir_diag *d, int code, const char *fmt, ...)
{
	if (!d || d->error)
		return code;
	va_list ap;
	va_start(ap, fmt);
	d->error = ir_vfmt(fmt, ap);
	va_end(ap);
	return code;
}

void ir_diag_warn(struct ir_diag *d, const char *fmt, ...)
{
	if (!d)
		return;
	if (d->max_warnings && d->n_warnings >= d->max_warnings) {
		d->dropped++;
		return;
	}
	char **w = realloc(d->warnings, (d->n_warnings + 1) * sizeof(*w));
	if (!w)
		return;
	d->warnings = w;
	va_list ap;
	va_start(ap, fmt);
	char *s = ir_vfmt(fmt, ap);
	va_end(ap);
	if (s)
		d->warnings[d->n_warnings++] = s;
}

void ir_diag_prefix(struct ir_diag *d, const char *fmt, ...)
{
	if (!d || !d->error)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *p = ir_vfmt(fmt, ap);
	va_end(ap);
	if (!p)
		return;
	char *s = ir_fmt("%s: %s", p, d->error);
	free(p);
	if (s) {
		free(d->error);
		d->error = s;
	}
}

const char *ir_errstr(int err, char *buf, size_t size)
{
	snprintf(buf, size, "%s", strerror(err));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

char *ir_strdup(const char *s)
{
	return s ? ir_strndup(s, strlen(s)) : NULL;
}

char *ir_strndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

bool ir_mul_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out);
}

void *ir_alloc_array(size_t n, size_t size)
{
	if (n == 0)
		n = 1;
	return calloc(n, size);
}

int ir_grow(void *arr, size_t *cap, size_t need, size_t size)
{
	void **p = arr;
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 8;
	while (nc < need) {
		if (nc > SIZE_MAX / 2 / size)
			return IR_ENOMEM;
		nc *= 2;
	}
	void *q = realloc(*p, nc * size);
	if (!q)
		return IR_ENOMEM;
	memset((char *)q + *cap * size, 0, (nc - *cap) * size);
	*p = q;
	*cap = nc;
	return 0;
}

bool ir_str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

void ir_kv_free(struct ir_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

int ir_kv_copy(struct ir_kv **dst, size_t *n_dst, const struct ir_kv *src, size_t n)
{
	*dst = NULL;
	*n_dst = 0;
	if (!n)
		return 0;
	struct ir_kv *kv = ir_alloc_array(n, sizeof(*kv));
	if (!kv)
		return IR_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		kv[i].key = ir_strdup(src[i].key);
		kv[i].value = ir_strdup(src[i].value);
		if ((src[i].key && !kv[i].key) || (src[i].value && !kv[i].value)) {
			ir_kv_free(kv, i + 1);
			return IR_ENOMEM;
		}
	}
	*dst = kv;
	*n_dst = n;
	return 0;
}

int ir_bytes_set(struct ir_bytes *b, const void *data, size_t len)
{
	b->data = malloc(len + 1);
	if (!b->data) {
		b->len = 0;
		return IR_ENOMEM;
	}
	if (len)
		memcpy(b->data, data, len);
	b->data[len] = 0;
	b->len = len;
	return 0;
}

void ir_bytes_free_array(struct ir_bytes *b, size_t n)
{
	if (!b)
		return;
	for (size_t i = 0; i < n; i++)
		free(b[i].data);
	free(b);
}

int ir_bytes_copy_array(struct ir_bytes **dst, const struct ir_bytes *src, size_t n)
{
	*dst = NULL;
	if (!n)
		return 0;
	struct ir_bytes *b = ir_alloc_array(n, sizeof(*b));
	if (!b)
		return IR_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (ir_bytes_set(&b[i], src[i].data, src[i].len)) {
			ir_bytes_free_array(b, i);
			return IR_ENOMEM;
		}
	}
	*dst = b;
	return 0;
}

void ir_dim_clear(struct ir_dim *d)
{
	free(d->param);
	free(d->denotation);
	memset(d, 0, sizeof(*d));
}

/* ---- string map: open addressing, linear probing, tombstones ---- */

struct ir_map_ent {
	const char *key;   /* NULL: empty; TOMB: deleted */
	uint64_t hash;
	void *val;
};

struct ir_map {
	struct ir_map_ent *ents;
	size_t cap;    /* power of two */
	size_t count;  /* live */
	size_t used;   /* live + tombstones */
};

static const char tomb_key[1];
#define TOMB (tomb_key)

/*
 * SipHash-1-3 with a key drawn once per process: names come from files, and
 * a file must not be able to pick names that all land in one slot (which
 * would make every lookup linear and a load quadratic).
 */
static uint64_t hash_key[2];
static bool hash_keyed;

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND do { \
	v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
	v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
	v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
	v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); } while (0)

static uint64_t hash_str(const char *s)
{
	if (!hash_keyed) {
		if (getrandom(hash_key, sizeof(hash_key), GRND_NONBLOCK) != (ssize_t)sizeof(hash_key)) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			hash_key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
			hash_key[1] = (uint64_t)ts.tv_sec * 0xbf58476d1ce4e5b9ull ^ (uint64_t)(uintptr_t)&ts;
		}
		hash_keyed = true;
	}
	size_t len = strlen(s);
	uint64_t v0 = 0x736f6d6570736575ull ^ hash_key[0], v1 = 0x646f72616e646f6dull ^ hash_key[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ hash_key[0], v3 = 0x7465646279746573ull ^ hash_key[1];
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t m;
		memcpy(&m, p + i, 8);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	uint64_t b = (uint64_t)len << 56;
	for (size_t k = 0; i + k < len; k++)
		b |= (uint64_t)p[i + k] << (8 * k);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

struct ir_map *ir_map_new(size_t hint)
{
	struct ir_map *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	size_t cap = 16;
	while (cap < hint * 2 && cap < ((size_t)1 << 40))
		cap *= 2;
	m->ents = calloc(cap, sizeof(*m->ents));
	if (!m->ents) {
		free(m);
		return NULL;
	}
	m->cap = cap;
	return m;
}

void ir_map_free(struct ir_map *m)
{
	if (!m)
		return;
	free(m->ents);
	free(m);
}

static struct ir_map_ent *find(const struct ir_map *m, const char *key, uint64_t h)
{
	size_t mask = m->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct ir_map_ent *e = &m->ents[i];
		if (!e->key)
			return NULL;
		if (e->key != TOMB && e->hash == h && strcmp(e->key, key) == 0)
			return e;
	}
}

void *ir_map_get(const struct ir_map *m, const char *key)
{
	if (!m || !key)
		return NULL;
	struct ir_map_ent *e = find(m, key, hash_str(key));
	return e ? e->val : NULL;
}

static int rehash(struct ir_map *m, size_t cap)
{
	struct ir_map_ent *old = m->ents;
	size_t oldcap = m->cap;
	struct ir_map_ent *ents = calloc(cap, sizeof(*ents));
	if (!ents)
		return IR_ENOMEM;
	for (size_t i = 0; i < oldcap; i++) {
		if (!old[i].key || old[i].key == TOMB)
			continue;
		size_t j = old[i].hash & (cap - 1);
		while (ents[j].key)
			j = (j + 1) & (cap - 1);
		ents[j] = old[i];
	}
	free(old);
	m->ents = ents;
	m->cap = cap;
	m->used = m->count;
	return 0;
}

int ir_map_put(struct ir_map *m, const char *key, void *val)
{
	uint64_t h = hash_str(key);
	struct ir_map_ent *e = find(m, key, h);
	if (e) {
		e->key = key;
		e->val = val;
		return 0;
	}
	if ((m->used + 1) * 4 > m->cap * 3) {
		size_t cap = m->count * 4 > m->cap ? m->cap * 2 : m->cap;
		if (rehash(m, cap))
			return IR_ENOMEM;
	}
	size_t mask = m->cap - 1;
	size_t i = h & mask;
	while (m->ents[i].key && m->ents[i].key != TOMB)
		i = (i + 1) & mask;
	if (!m->ents[i].key)
		m->used++;
	m->ents[i].key = key;
	m->ents[i].hash = h;
	m->ents[i].val = val;
	m->count++;
	return 0;
}

void ir_map_del(struct ir_map *m, const char *key)
{
	if (!m || !key)
		return;
	struct ir_map_ent *e = find(m, key, hash_str(key));
	if (e) {
		e->key = TOMB;
		e->val = NULL;
		m->count--;
	}
}

size_t ir_map_count(const struct ir_map *m)
{
	return m ? m->count : 0;
}
