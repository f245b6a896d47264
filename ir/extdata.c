/*
 * extdata.c - external tensor data: resolving a location safely inside the
 * model's folder, mapping the file, and SHA-1 checksums.
 */
#include "extdata.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Opens `location` below the folder `dirfd`, one component at a time with
 * O_NOFOLLOW, so that no symbolic link (final or intermediate) is followed;
 * absolute paths, ".." and empty names are refused, and so is a final
 * component that is not a regular file (a fifo would block the open).
 * Returns an fd or -1.
 */
static int open_below(int dirfd, const char *location, struct ir_diag *d)
{
	char eb[128];
	if (!*location)
		return ir_diag_err(d, IR_ERR, "external_data has an empty location");
	if (location[0] == '/')
		return ir_diag_err(d, IR_ERR, "location '%s' is an absolute path", location);
	/* every component first: "sub/../../x" is refused whether or not sub exists */
	for (const char *c = location; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return ir_diag_err(d, IR_ERR, "location '%s' has a '..' component", location);
		c += n;
		c += strspn(c, "/");
	}
	char *copy = ir_strdup(location);
	if (!copy)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int fd = dup(dirfd);
	if (fd < 0)
		ir_diag_err(d, IR_EIO, "cannot open external data '%s': %s", location, ir_errstr(errno, eb, sizeof(eb)));
	char *save = NULL;
	char *comp = strtok_r(copy, "/", &save);
	while (comp && fd >= 0) {
		char *next = strtok_r(NULL, "/", &save);
		if (strcmp(comp, ".") == 0) {
			comp = next;
			continue;
		}
		struct stat st;
		int nfd = -1, err = 0;
		if (!next) {
			/* the file itself: looked at before it is opened */
			if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
				err = errno;
			else if (S_ISLNK(st.st_mode))
				err = ELOOP;
			else if (!S_ISREG(st.st_mode)) {
				ir_diag_err(d, IR_ERR, "external data '%s' is not a regular file", location);
				close(fd);
				fd = -1;
				break;
			}
		}
		if (!err) {
			int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (next ? O_DIRECTORY : O_NONBLOCK);
			nfd = openat(fd, comp, flags);
			err = errno;
		}
		if (nfd < 0 && err == ENOTDIR && fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			err = ELOOP;
		close(fd);
		fd = nfd;
		if (fd < 0) {
			if (err == ELOOP || err == EMLINK)
				ir_diag_err(d, IR_ERR, "location '%s': '%s' is a symbolic link", location, comp);
			else if (err == ENOTDIR)
				ir_diag_err(d, IR_ERR, "location '%s': '%s' is not a folder", location, comp);
			else
				ir_diag_err(d, IR_EIO, "cannot open external data '%s': %s", location,
					    ir_errstr(err, eb, sizeof(eb)));
		}
		comp = next;
	}
	free(copy);
	return fd;
}

struct ext_file *ext_open(struct ext_cache *c, const char *location, struct ir_diag *d)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->files[i].location, location) == 0)
			return &c->files[i];
	if (c->dirfd < 0) {
		ir_diag_err(d, IR_ERR, "external data '%s' cannot be resolved: the model has no folder", location);
		return NULL;
	}
	int fd = open_below(c->dirfd, location, d);
	if (fd < 0)
		return NULL;
	struct stat st;
	char eb[128];
	if (fstat(fd, &st) < 0) {
		ir_diag_err(d, IR_EIO, "cannot stat external data '%s': %s", location, ir_errstr(errno, eb, sizeof(eb)));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		ir_diag_err(d, IR_ERR, "external data '%s' is not a regular file", location);
		close(fd);
		return NULL;
	}
	if (st.st_nlink > 1) {
		ir_diag_err(d, IR_ERR, "external data '%s' has %ju hard links: refusing a file that may live outside the model's folder",
			    location, (uintmax_t)st.st_nlink);
		close(fd);
		return NULL;
	}
	struct ir_mapping *map = ir_mapping_open(fd, location, (size_t)st.st_size,
						 (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, d);
	if (!map) {
		ir_diag_prefix(d, "external data");
		return NULL;
	}
	if (ir_grow(&c->files, &c->cap, c->n + 1, sizeof(*c->files))) {
		ir_mapping_unref(map);
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	struct ext_file *f = &c->files[c->n++];
	memset(f, 0, sizeof(*f));
	f->location = map->path;
	f->map = map;
	return f;
}

void ext_cache_clear(struct ext_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		ir_mapping_unref(c->files[i].map);
	free(c->files);
	if (c->dirfd >= 0)
		close(c->dirfd);
	memset(c, 0, sizeof(*c));
	c->dirfd = -1;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return false;
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		unsigned digit = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - digit) / 10)
			return false;   /* past 2^64-1 */
		v = v * 10 + digit;
	}
	*out = v;
	return true;
}

int ext_resolve(struct ext_cache *c, const struct ir_kv *keys, size_t n, uint64_t nbytes,
		struct ir_buffer **out, char **location_out, uint64_t *offset_out, struct ir_diag *d)
{
	const char *location = NULL, *offset = NULL, *length = NULL, *checksum = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *k = keys[i].key ? keys[i].key : "";
		const char **slot = strcmp(k, "location") == 0 ? &location
				  : strcmp(k, "offset") == 0 ? &offset
				  : strcmp(k, "length") == 0 ? &length
				  : strcmp(k, "checksum") == 0 ? &checksum : NULL;
		if (!slot)
			return ir_diag_err(d, IR_ERR, "external_data has an unknown key '%s'", k);
		if (*slot)
			return ir_diag_err(d, IR_ERR, "external_data has the key '%s' twice", k);
		*slot = keys[i].value ? keys[i].value : "";
	}
	if (!location)
		return ir_diag_err(d, IR_ERR, "external_data has no location");
	uint64_t off = 0, len = 0;
	if (offset && !parse_u64(offset, &off))
		return ir_diag_err(d, IR_ERR, "external_data offset '%s' is not a number", offset);
	if (length && !parse_u64(length, &len))
		return ir_diag_err(d, IR_ERR, "external_data length '%s' is not a number", length);
	struct ext_file *f = ext_open(c, location, d);
	if (!f)
		return IR_ERR;
	uint64_t size = f->map->size;
	if (off > size)
		return ir_diag_err(d, IR_ERR, "external data '%s': offset %" PRIu64 " is past the end of the file (%" PRIu64 " bytes)",
				   location, off, size);
	if (!length)
		len = size - off;
	if (len > size - off)
		return ir_diag_err(d, IR_ERR, "external data '%s': offset %" PRIu64 " + length %" PRIu64 " is past the end of the file (%" PRIu64 " bytes)",
				   location, off, len, size);
	if (len != nbytes)
		return ir_diag_err(d, IR_ERR, "external data '%s' has %" PRIu64 " bytes at offset %" PRIu64 ", the tensor needs %" PRIu64,
				   location, len, off, nbytes);
	if (checksum) {
		/* computed once per file, compared for every tensor that gives one */
		if (!f->checked) {
			unsigned char sum[20];
			ir_sha1(f->map->addr, f->map->size, sum);
			for (int i = 0; i < 20; i++)
				snprintf(f->sha1 + 2 * i, 3, "%02x", sum[i]);
			f->checked = true;
		}
		if (strcasecmp(f->sha1, checksum) != 0)
			return ir_diag_err(d, IR_ERR, "external data '%s': SHA-1 is %s, the model says %s", location,
					   f->sha1, checksum);
	}
	*out = NULL;
	if (len) {
		*out = ir_buffer_mapped(f->map, (size_t)off, (size_t)len);
		if (!*out)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
	}
	*location_out = ir_strdup(location);
	*offset_out = off;
	return 0;
}

/* ---- SHA-1 (FIPS 180-4) ---- */

struct sha1 { uint32_t h[5]; uint64_t n; unsigned char blk[64]; size_t used; };

static uint32_t rol(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

static void sha1_block(struct sha1 *s, const unsigned char *p)
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = s->h[0], b = s->h[1], c = s->h[2], dd = s->h[3], e = s->h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20) { f = (b & c) | (~b & dd); k = 0x5a827999; }
		else if (i < 40) { f = b ^ c ^ dd; k = 0x6ed9eba1; }
		else if (i < 60) { f = (b & c) | (b & dd) | (c & dd); k = 0x8f1bbcdc; }
		else { f = b ^ c ^ dd; k = 0xca62c1d6; }
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = dd; dd = c; c = rol(b, 30); b = a; a = t;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += dd; s->h[4] += e;
}

void ir_sha1(const void *data, size_t len, unsigned char out[20])
{
	struct sha1 s = { { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 }, 0, { 0 }, 0 };
	const unsigned char *p = data;
	s.n = (uint64_t)len * 8;
	size_t i = 0;
	for (; i + 64 <= len; i += 64)
		sha1_block(&s, p + i);
	unsigned char tail[128] = { 0 };
	size_t r = len - i;
	if (r)
		memcpy(tail, p + i, r);
	tail[r] = 0x80;
	size_t tl = r + 1 + 8 <= 64 ? 64 : 128;
	for (int k = 0; k < 8; k++)
		tail[tl - 1 - k] = (unsigned char)(s.n >> (8 * k));
	sha1_block(&s, tail);
	if (tl == 128)
		sha1_block(&s, tail + 64);
	for (int k = 0; k < 5; k++) {
		out[4 * k] = (unsigned char)(s.h[k] >> 24);
		out[4 * k + 1] = (unsigned char)(s.h[k] >> 16);
		out[4 * k + 2] = (unsigned char)(s.h[k] >> 8);
		out[4 * k + 3] = (unsigned char)s.h[k];
	}
}
