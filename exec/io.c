/*
 * io.c - tensors in NumPy files: .npy (format 1.0, 2.0, 3.0) and .npz (a
 * zip archive of .npy entries, stored or deflated).
 *
 * Files are hostile: every length, offset and size read from one is checked
 * against the bytes really there before it is used, and no allocation is
 * larger than what the file can fill (except a deflated entry, whose claimed
 * size is checked against deflate's largest ratio). Entry names are only
 * names, never paths.
 *
 * The in-memory layout is ONNX's raw_data (little-endian), so writing never
 * depends on the host's byte order, and reading converts big-endian files.
 * Deflated .npz entries need zlib (OGSH_HAVE_ZLIB); the CRC-32 is our own so
 * that stored archives work without it.
 */
#include "exec/exec_io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef OGSH_HAVE_ZLIB
#include <zlib.h>
#endif

/* Largest .npy header we accept: numpy itself refuses more than 10,000 bytes
 * by default; 64 dimensions need well under 2,000. */
#define NPY_MAX_HEADER (1u << 20)
/* Bytes read or written between two looks at ir_interrupted. */
#define IO_CHUNK ((size_t)16 << 20)
/* Deflate cannot compress by more than about 1032:1. */
#define DEFLATE_MAX_RATIO 1032u

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static uint32_t ld16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t ld32(const unsigned char *p) { return ld16(p) | ld16(p + 2) << 16; }
static uint64_t ld64(const unsigned char *p) { return ld32(p) | (uint64_t)ld32(p + 4) << 32; }
static void st16(unsigned char *p, uint32_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void st32(unsigned char *p, uint32_t v) { st16(p, v & 0xffff); st16(p + 2, v >> 16); }
static void st64(unsigned char *p, uint64_t v) { st32(p, (uint32_t)v); st32(p + 4, (uint32_t)(v >> 32)); }

static bool host_is_big_endian(void)
{
	const uint16_t one = 1;
	unsigned char c;
	memcpy(&c, &one, 1);
	return c == 0;
}

/* CRC-32 (IEEE 802.3, reflected, as zip uses): zlib's when we have it (it
 * is several times faster), else a table built on first use. */
#ifdef OGSH_HAVE_ZLIB
static uint32_t crc32_update(uint32_t crc, const void *data, size_t n)
{
	const unsigned char *p = data;
	while (n) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
		crc = (uint32_t)crc32(crc, p, k);
		p += k;
		n -= k;
	}
	return crc;
}
#else
static uint32_t crc_table[256];
static bool crc_ready;

static uint32_t crc32_update(uint32_t crc, const void *data, size_t n)
{
	if (!crc_ready) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			crc_table[i] = c;
		}
		crc_ready = true;
	}
	const unsigned char *p = data;
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
#endif

static char *dup_mem(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

/* "what" of a failing system call, with errno's text. */
static int sys_err(struct ir_diag *d, const char *what, const char *path, int e)
{
	char eb[128];
	return ir_diag_err(d, IR_EIO, "cannot %s '%s': %s", what, path, ir_errstr(e, eb, sizeof(eb)));
}

/*
 * Where a read is: the file, and inside an .npz the entry. Every read error
 * says "cannot read 'f.npz' entry 'x.npy': why".
 */
struct rd {
	const char *path;
	const char *entry;   /* NULL for a plain .npy file */
	struct ir_diag *d;
};

static int rd_err(const struct rd *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rd_err(const struct rd *c, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->entry)
		return ir_diag_err(c->d, code, "cannot read '%s' entry '%s': %s", c->path, c->entry, msg);
	return ir_diag_err(c->d, code, "cannot read '%s': %s", c->path, msg);
}

static void rd_warn(const struct rd *c, const char *msg)
{
	if (c->entry)
		ir_diag_warn(c->d, "'%s' entry '%s': %s", c->path, c->entry, msg);
	else
		ir_diag_warn(c->d, "'%s': %s", c->path, msg);
}

/* Opens c->path for reading: *fd and its size *size. Anything but a regular
 * file is refused (a pipe or a device has no size to check offsets against). */
static int open_regular(const struct rd *c, int *fd, uint64_t *size)
{
	*fd = open(c->path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return sys_err(c->d, "open", c->path, errno);
	struct stat st;
	if (fstat(*fd, &st) < 0) {
		int e = errno;
		close(*fd);
		return sys_err(c->d, "stat", c->path, e);
	}
	if (!S_ISREG(st.st_mode)) {
		close(*fd);
		return rd_err(c, IR_ERR, "not a regular file");
	}
	*size = (uint64_t)st.st_size;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* A region of bytes read in order: a file range or a memory block           */
/* ------------------------------------------------------------------------ */

struct src {
	int fd;                     /* -1: read from mem */
	const unsigned char *mem;
	uint64_t off, end;          /* next byte and end (file offsets or offsets in mem) */
	bool crc_on;
	uint32_t crc;               /* of the bytes read so far, when crc_on */
};

static uint64_t src_left(const struct src *s)
{
	return s->end - s->off;
}

/* Reads exactly n bytes; `what` names them for the "is truncated" message. */
static int src_read(struct src *s, void *buf, uint64_t n, const char *what, const struct rd *c)
{
	if (n > src_left(s))
		return rd_err(c, IR_ERR, "%s is truncated (%" PRIu64 " bytes needed, %" PRIu64 " left)",
			      what, n, src_left(s));
	unsigned char *p = buf;
	uint64_t done = 0;
	char eb[128];
	while (done < n) {
		size_t want = n - done > IO_CHUNK ? IO_CHUNK : (size_t)(n - done);
		if (ir_interrupted)
			return rd_err(c, IR_EINTR, "interrupted");
		if (s->fd < 0) {
			memcpy(p + done, s->mem + s->off, want);
		} else {
			ssize_t got = pread(s->fd, p + done, want, (off_t)s->off);
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				return rd_err(c, IR_EIO, "%s", ir_errstr(errno, eb, sizeof(eb)));
			if (got == 0)
				return rd_err(c, IR_ERR, "the file ended early (was it truncated while reading?)");
			want = (size_t)got;
		}
		if (s->crc_on)
			s->crc = crc32_update(s->crc, p + done, want);
		done += want;
		s->off += want;
	}
	return 0;
}

/* Reads and drops what is left (so that the CRC covers it). */
static int src_drain(struct src *s, const struct rd *c)
{
	unsigned char tmp[4096];
	while (src_left(s)) {
		uint64_t n = src_left(s) < sizeof(tmp) ? src_left(s) : sizeof(tmp);
		int rc = src_read(s, tmp, n, "trailing data", c);
		if (rc)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The .npy header                                                           */
/* ------------------------------------------------------------------------ */

/* What a descriptor such as '<f4' means for us. */
struct npy_type {
	int dtype;
	size_t esize;       /* bytes per element in the file */
	bool swap;          /* the file's byte order is not little-endian */
	char kind;          /* numpy's kind: 'f', 'i', 'u', 'b', 'c', 'V', 'S', 'U' */
};

struct npy_header {
	char descr[64];
	bool have_descr, have_fortran, have_shape;
	bool fortran;
	int rank;
	int64_t dims[IR_MAX_RANK];
};

/* A tiny parser of the Python dict literal numpy writes:
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } */
struct lex {
	const char *p, *end;
};

static void lex_ws(struct lex *x)
{
	while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r'))
		x->p++;
}

static bool lex_char(struct lex *x, char ch)
{
	lex_ws(x);
	if (x->p < x->end && *x->p == ch) {
		x->p++;
		return true;
	}
	return false;
}

/* A quoted string without escapes into buf; false if malformed or too long. */
static bool lex_str(struct lex *x, char *buf, size_t size)
{
	lex_ws(x);
	if (x->p >= x->end || (*x->p != '\'' && *x->p != '"'))
		return false;
	char q = *x->p++;
	size_t n = 0;
	while (x->p < x->end && *x->p != q) {
		if (*x->p == '\\' || n + 1 >= size)
			return false;
		buf[n++] = *x->p++;
	}
	if (x->p >= x->end)
		return false;
	x->p++;
	buf[n] = 0;
	return true;
}

static bool lex_word(struct lex *x, const char *w)
{
	size_t n = strlen(w);
	lex_ws(x);
	if ((size_t)(x->end - x->p) >= n && !memcmp(x->p, w, n)) {
		x->p += n;
		return true;
	}
	return false;
}

static int parse_header(const char *text, size_t len, struct npy_header *h, const struct rd *c)
{
	struct lex x = { text, text + len };
	memset(h, 0, sizeof(*h));
	if (!lex_char(&x, '{'))
		return rd_err(c, IR_ERR, "the header is not a dictionary");
	for (;;) {
		char key[32];
		if (lex_char(&x, '}'))
			break;
		if (!lex_str(&x, key, sizeof(key)) || !lex_char(&x, ':'))
			return rd_err(c, IR_ERR, "the header is malformed near offset %td", x.p - text);
		if (!strcmp(key, "descr")) {
			lex_ws(&x);
			if (x.p < x.end && *x.p == '[')
				return rd_err(c, IR_ERR, "structured dtypes are not supported");
			if (!lex_str(&x, h->descr, sizeof(h->descr)))
				return rd_err(c, IR_ERR, "the header's descr is malformed");
			h->have_descr = true;
		} else if (!strcmp(key, "fortran_order")) {
			if (lex_word(&x, "True"))
				h->fortran = true;
			else if (lex_word(&x, "False"))
				h->fortran = false;
			else
				return rd_err(c, IR_ERR, "the header's fortran_order is neither True nor False");
			h->have_fortran = true;
		} else if (!strcmp(key, "shape")) {
			if (!lex_char(&x, '('))
				return rd_err(c, IR_ERR, "the header's shape is not a tuple");
			h->rank = 0;
			for (;;) {
				lex_ws(&x);
				if (lex_char(&x, ')'))
					break;
				if (x.p >= x.end || *x.p < '0' || *x.p > '9')
					return rd_err(c, IR_ERR, "the header's shape is malformed");
				uint64_t v = 0;
				while (x.p < x.end && *x.p >= '0' && *x.p <= '9') {
					v = v * 10 + (uint64_t)(*x.p++ - '0');
					if (v > (uint64_t)INT64_MAX)
						return rd_err(c, IR_ERR, "a dimension of the shape is too large");
				}
				if (x.p < x.end && *x.p == 'L')   /* Python 2's long */
					x.p++;
				if (h->rank == IR_MAX_RANK)
					return rd_err(c, IR_ERR, "the shape has more than %d dimensions", IR_MAX_RANK);
				h->dims[h->rank++] = (int64_t)v;
				if (lex_char(&x, ')'))
					break;
				if (!lex_char(&x, ','))
					return rd_err(c, IR_ERR, "the header's shape is malformed");
			}
			h->have_shape = true;
		} else {
			return rd_err(c, IR_ERR, "the header has an unknown key '%s'", key);
		}
		if (lex_char(&x, ','))
			continue;
		if (lex_char(&x, '}'))
			break;
		return rd_err(c, IR_ERR, "the header is malformed near offset %td", x.p - text);
	}
	lex_ws(&x);
	if (x.p != x.end)
		return rd_err(c, IR_ERR, "the header has text after the dictionary");
	if (!h->have_descr || !h->have_fortran || !h->have_shape)
		return rd_err(c, IR_ERR, "the header lacks '%s'",
			      !h->have_descr ? "descr" : !h->have_fortran ? "fortran_order" : "shape");
	return 0;
}

static int parse_descr(const char *descr, struct npy_type *ty, const struct rd *c)
{
	const char *p = descr;
	char order = '=';
	memset(ty, 0, sizeof(*ty));
	if (*p == '<' || *p == '>' || *p == '|' || *p == '=')
		order = *p++;
	char kind = *p ? *p++ : 0;
	if (!kind)
		return rd_err(c, IR_ERR, "dtype '%s' has no kind", descr);
	if (kind == 'a')   /* numpy's old name of 'S' */
		kind = 'S';
	uint64_t size = 0;
	if (*p < '0' || *p > '9')
		size = kind == 'b' || kind == '?' ? 1 : 0;
	while (*p >= '0' && *p <= '9') {
		size = size * 10 + (uint64_t)(*p++ - '0');
		if (size > (1u << 30))
			return rd_err(c, IR_ERR, "dtype '%s' has an element size that is too large", descr);
	}
	if (*p)
		return rd_err(c, IR_ERR, "unsupported dtype '%s'", descr);
	ty->kind = kind;
	ty->esize = (size_t)size;
	switch (kind) {
	case 'f':
		ty->dtype = size == 2 ? IR_FLOAT16 : size == 4 ? IR_FLOAT : size == 8 ? IR_DOUBLE : -1;
		break;
	case 'i':
		ty->dtype = size == 1 ? IR_INT8 : size == 2 ? IR_INT16 : size == 4 ? IR_INT32 : size == 8 ? IR_INT64 : -1;
		break;
	case 'u':
		ty->dtype = size == 1 ? IR_UINT8 : size == 2 ? IR_UINT16 : size == 4 ? IR_UINT32 : size == 8 ? IR_UINT64 : -1;
		break;
	case 'b': case '?':
		ty->kind = 'b';
		ty->dtype = size == 1 ? IR_BOOL : -1;
		break;
	case 'c':
		ty->dtype = size == 8 ? IR_COMPLEX64 : size == 16 ? IR_COMPLEX128 : -1;
		break;
	case 'V':
		/* ml_dtypes' bfloat16 is saved as a 2-byte void; 1-byte voids
		 * (float8 and int4 kinds) cannot be told apart */
		if (size == 1)
			return rd_err(c, IR_ERR, "dtype '%s' is a 1-byte opaque type (an ml_dtypes float8 or int4?) "
				      "whose kind numpy does not record: save it as another type", descr);
		ty->dtype = size == 2 ? IR_BFLOAT16 : -1;
		break;
	case 'S': case 'U':
		ty->dtype = IR_STRING;
		if (kind == 'U') {
			if (size > (1u << 28))
				return rd_err(c, IR_ERR, "dtype '%s' has an element size that is too large", descr);
			ty->esize = (size_t)size * 4;
		}
		break;
	case 'O':
		return rd_err(c, IR_ERR, "object arrays (pickled Python objects) are not supported");
	default:
		ty->dtype = -1;
	}
	if (ty->dtype < 0)
		return rd_err(c, IR_ERR, "unsupported dtype '%s'", descr);
	if (order == '>' || (order == '=' && host_is_big_endian()))
		ty->swap = ty->esize > 1 && kind != 'S';
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading a .npy stream                                                     */
/* ------------------------------------------------------------------------ */

/* Reverses the bytes of each `w`-byte word of n bytes (big-endian files). */
static void swap_words(unsigned char *p, size_t n, size_t w)
{
	for (size_t i = 0; i + w <= n; i += w)
		for (size_t a = i, b = i + w - 1; a < b; a++, b--) {
			unsigned char t = p[a];
			p[a] = p[b];
			p[b] = t;
		}
}

/*
 * Fortran order to C order: element (i0, ..., in-1) is at
 * i0 + d0*(i1 + d1*(...)) in the file. `src` and `dst` hold numel elements
 * of esize bytes.
 */
static void fortran_to_c(const unsigned char *src, unsigned char *dst, size_t esize,
			 int rank, const int64_t *dims, uint64_t numel)
{
	uint64_t fstride[IR_MAX_RANK], idx[IR_MAX_RANK] = { 0 };
	uint64_t s = 1, off = 0;
	for (int i = 0; i < rank; i++) {
		fstride[i] = s;
		s *= (uint64_t)dims[i];
	}
	for (uint64_t j = 0; j < numel; j++) {
		memcpy(dst + j * esize, src + off * esize, esize);
		/* next C-order index: the last dimension moves fastest */
		for (int i = rank - 1; i >= 0; i--) {
			if (++idx[i] < (uint64_t)dims[i]) {
				off += fstride[i];
				break;
			}
			off -= (idx[i] - 1) * fstride[i];
			idx[i] = 0;
		}
	}
}

/* Appends code point u as UTF-8 to out (room for 4 bytes); returns the bytes written. */
static size_t utf8_put(char *out, uint32_t u)
{
	if (u < 0x80) {
		out[0] = (char)u;
		return 1;
	}
	if (u < 0x800) {
		out[0] = (char)(0xc0 | (u >> 6));
		out[1] = (char)(0x80 | (u & 0x3f));
		return 2;
	}
	if (u < 0x10000) {
		out[0] = (char)(0xe0 | (u >> 12));
		out[1] = (char)(0x80 | ((u >> 6) & 0x3f));
		out[2] = (char)(0x80 | (u & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (u >> 18));
	out[1] = (char)(0x80 | ((u >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((u >> 6) & 0x3f));
	out[3] = (char)(0x80 | (u & 0x3f));
	return 4;
}

/* Fills the string tensor t from numel fixed-size numpy strings ('S': bytes,
 * 'U': UCS-4 code points); numpy drops trailing NULs, so do we. */
static int strings_from_npy(struct ir_tensor *t, const unsigned char *raw, const struct npy_type *ty,
			    const struct rd *c)
{
	size_t cp = ty->kind == 'U' ? ty->esize / 4 : ty->esize;
	for (uint64_t i = 0; i < t->numel; i++) {
		const unsigned char *e = raw + i * ty->esize;
		size_t n = cp;
		char *s;
		size_t len = 0;
		if (ty->kind == 'S') {
			while (n && !e[n - 1])
				n--;
			s = dup_mem((const char *)e, n);
			len = n;
		} else {
			while (n && ld32(e + 4 * (n - 1)) == 0)   /* zero in either byte order */
				n--;
			s = malloc(4 * n + 1);
			for (size_t k = 0; s && k < n; k++) {
				const unsigned char *q = e + 4 * k;
				uint32_t u = ty->swap ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]
						      : ld32(q);
				if (u > 0x10ffff || (u >= 0xd800 && u < 0xe000)) {
					free(s);
					return rd_err(c, IR_ERR, "string %" PRIu64 " has an invalid code point U+%X", i, u);
				}
				len += utf8_put(s + len, u);
			}
			if (s)
				s[len] = 0;
		}
		if (!s)
			return rd_err(c, IR_ENOMEM, "out of memory");
		free(t->strings[i].data);
		t->strings[i].data = s;
		t->strings[i].len = len;
	}
	return 0;
}

/* Reads the preamble and header of one .npy stream; s is left at the data. */
static int npy_read_head(struct src *s, struct npy_header *h, struct npy_type *ty, const struct rd *c)
{
	unsigned char pre[12];
	int rc;
	if ((rc = src_read(s, pre, 8, "the .npy preamble", c)))
		return rc;
	if (memcmp(pre, "\x93NUMPY", 6))
		return rd_err(c, IR_ERR, "not a .npy file (no \\x93NUMPY magic)");
	int major = pre[6];
	uint64_t hlen;
	if (major == 1) {
		if ((rc = src_read(s, pre + 8, 2, "the .npy preamble", c)))
			return rc;
		hlen = ld16(pre + 8);
	} else if (major == 2 || major == 3) {
		if ((rc = src_read(s, pre + 8, 4, "the .npy preamble", c)))
			return rc;
		hlen = ld32(pre + 8);
	} else {
		return rd_err(c, IR_ERR, ".npy format version %d.%d is not supported", major, pre[7]);
	}
	if (hlen > NPY_MAX_HEADER)
		return rd_err(c, IR_ERR, "the header length %" PRIu64 " is too large", hlen);
	char *text = malloc(hlen + 1);
	if (!text)
		return rd_err(c, IR_ENOMEM, "out of memory");
	if ((rc = src_read(s, text, hlen, "the header", c))) {
		free(text);
		return rc;
	}
	text[hlen] = 0;
	if (memchr(text, 0, hlen)) {
		free(text);
		return rd_err(c, IR_ERR, "the header contains a NUL byte");
	}
	rc = parse_header(text, hlen, h, c);
	free(text);
	if (rc || (rc = parse_descr(h->descr, ty, c)))
		return rc;
	if (ty->dtype == IR_BFLOAT16)
		rd_warn(c, "dtype '<V2' read as bfloat16 (what ml_dtypes saves)");
	return 0;
}

/* The element count and byte size of the data, checked against the `left`
 * bytes the stream holds before anything is allocated. */
static int npy_data_size(const struct npy_header *h, const struct npy_type *ty, uint64_t left,
			 uint64_t *numel_out, uint64_t *need_out, const struct rd *c)
{
	uint64_t numel = 1, need;
	for (int i = 0; i < h->rank; i++)
		if (__builtin_mul_overflow(numel, (uint64_t)h->dims[i], &numel) || numel > (uint64_t)INT64_MAX)
			return rd_err(c, IR_ERR, "the shape's element count overflows");
	if (__builtin_mul_overflow(numel, (uint64_t)ty->esize, &need))
		return rd_err(c, IR_ERR, "the data size overflows");
	if (need > left) {
		char sb[128];
		return rd_err(c, IR_ERR, "the data is truncated: shape %s of '%s' needs %" PRIu64 " bytes, %" PRIu64 " are there",
			      ir_dims_str(h->rank, h->dims, sb, sizeof(sb)), h->descr, need, left);
	}
	if (need > (uint64_t)SIZE_MAX / 2)
		return rd_err(c, IR_ERR, "the data is too large for this machine");
	*numel_out = numel;
	*need_out = need;
	return 0;
}

/* Reads one .npy stream (a file or an .npz entry) into a new tensor. */
static int npy_read_src(struct src *s, struct ir_tensor **out, const struct rd *c)
{
	struct npy_header h;
	struct npy_type ty;
	*out = NULL;
	int rc = npy_read_head(s, &h, &ty, c);
	if (rc)
		return rc;

	uint64_t numel = 0, need = 0;
	if ((rc = npy_data_size(&h, &ty, src_left(s), &numel, &need, c)))
		return rc;

	struct ir_tensor *t = ir_tensor_new(ty.dtype, h.rank, h.dims, c->d);
	if (!t)
		return IR_ENOMEM;
	/* numeric data goes straight into the tensor unless it must be
	 * transposed; strings always go through a temporary block */
	bool direct = ty.dtype != IR_STRING && !(h.fortran && h.rank > 1);
	unsigned char *raw = NULL, *dst = NULL;
	if (need) {
		dst = direct ? ir_tensor_mutable(t) : NULL;
		raw = direct ? dst : malloc((size_t)need);
		if (!raw) {
			ir_tensor_unref(t);
			return rd_err(c, IR_ENOMEM, "out of memory for %" PRIu64 " bytes", need);
		}
		if ((rc = src_read(s, raw, need, "the data", c)))
			goto fail;
		if (ty.swap) {
			size_t w = ty.kind == 'c' ? ty.esize / 2 : ty.esize;
			if (ty.kind != 'U')   /* UCS-4 strings are swapped when decoded */
				swap_words(raw, (size_t)need, w);
		}
	}
	if (ty.dtype == IR_STRING) {
		const unsigned char *from = raw;
		unsigned char *tmp = NULL;
		if (h.fortran && h.rank > 1 && need) {
			if (!(tmp = malloc((size_t)need))) {
				rc = rd_err(c, IR_ENOMEM, "out of memory");
				goto fail;
			}
			fortran_to_c(raw, tmp, ty.esize, h.rank, h.dims, numel);
			from = tmp;
		}
		rc = need ? strings_from_npy(t, from, &ty, c) : 0;
		free(tmp);
		if (rc)
			goto fail;
	} else if (!direct && need) {
		fortran_to_c(raw, ir_tensor_mutable(t), ty.esize, h.rank, h.dims, numel);
	}
	if (ty.dtype == IR_BOOL && need) {   /* numpy's bools are 0/1; be sure */
		unsigned char *b = ir_tensor_mutable(t);
		for (uint64_t i = 0; i < numel; i++)
			b[i] = b[i] != 0;
	}
	if (!direct)
		free(raw);
	*out = t;
	return 0;
fail:
	if (!direct)
		free(raw);
	ir_tensor_unref(t);
	return rc;
}

int exec_npy_read(const char *path, struct ir_tensor **out, struct ir_diag *d)
{
	struct rd c = { path, NULL, d };
	*out = NULL;
	int fd;
	uint64_t fsize;
	int rc = open_regular(&c, &fd, &fsize);
	if (rc)
		return rc;
	struct src s = { fd, NULL, 0, fsize, false, 0 };
	rc = npy_read_src(&s, out, &c);
	if (!rc && src_left(&s)) {
		char msg[96];
		snprintf(msg, sizeof(msg), "%" PRIu64 " bytes after the data are ignored", src_left(&s));
		rd_warn(&c, msg);
	}
	close(fd);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

/* A file being written: counts the bytes and their CRC. */
struct sink {
	int fd;
	const char *path;    /* the file being replaced, for messages */
	uint64_t count;
	bool crc_on;
	uint32_t crc;        /* of the bytes written while crc_on */
	struct ir_diag *d;
};

static int sink_write(struct sink *k, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	if (k->crc_on)
		k->crc = crc32_update(k->crc, buf, n);
	k->count += n;
	while (n) {
		if (ir_interrupted)
			return ir_diag_err(k->d, IR_EINTR, "writing '%s' was interrupted", k->path);
		size_t want = n > IO_CHUNK ? IO_CHUNK : n;
		ssize_t got = write(k->fd, p, want);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return sys_err(k->d, "write", k->path, errno);
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

/*
 * Makes a new temporary file next to `path` (same folder, so that rename is
 * atomic). *tmp is malloc'd. Returns the fd, or -1 with a message.
 */
static int temp_open(const char *path, char **tmp, struct ir_diag *d)
{
	static unsigned counter;
	size_t n = strlen(path) + 48;
	*tmp = malloc(n);
	if (!*tmp) {
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return -1;
	}
	for (int tries = 0; tries < 100; tries++) {
		snprintf(*tmp, n, "%s.tmp%ld.%u", path, (long)getpid(), counter++);
		int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST) {
			sys_err(d, "create", *tmp, errno);
			break;
		}
	}
	if (!d || !d->error)
		ir_diag_err(d, IR_EIO, "cannot create a temporary file for '%s'", path);
	free(*tmp);
	*tmp = NULL;
	return -1;
}

/* Flushes, closes and renames the temporary file onto path; removes it on
 * failure (also when rc is already an error). */
static int temp_finish(int fd, char *tmp, const char *path, int rc, struct ir_diag *d)
{
	if (!rc && fsync(fd) < 0)
		rc = sys_err(d, "sync", tmp, errno);
	if (close(fd) < 0 && !rc)
		rc = sys_err(d, "close", tmp, errno);
	if (!rc && rename(tmp, path) < 0)
		rc = sys_err(d, "replace", path, errno);
	if (rc) {
		unlink(tmp);
	} else {
		/* make the rename itself durable; failing that is not an error */
		char *dir = strdup(path);
		char *slash = dir ? strrchr(dir, '/') : NULL;
		const char *dname = !dir ? NULL : !slash ? "." : slash == dir ? "/" : (*slash = 0, dir);
		int dfd = dname ? open(dname, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
	}
	free(tmp);
	return rc;
}

/* Decodes one UTF-8 sequence at s[*i] (n bytes); returns the code point or
 * -1 if malformed. */
static int32_t utf8_get(const unsigned char *s, size_t n, size_t *i)
{
	unsigned char b = s[*i];
	int extra;
	uint32_t u, min;
	if (b < 0x80) {
		(*i)++;
		return b;
	}
	if ((b & 0xe0) == 0xc0) { extra = 1; u = b & 0x1f; min = 0x80; }
	else if ((b & 0xf0) == 0xe0) { extra = 2; u = b & 0x0f; min = 0x800; }
	else if ((b & 0xf8) == 0xf0) { extra = 3; u = b & 0x07; min = 0x10000; }
	else return -1;
	if (n - *i <= (size_t)extra)
		return -1;
	for (int k = 1; k <= extra; k++) {
		unsigned char x = s[*i + (size_t)k];
		if ((x & 0xc0) != 0x80)
			return -1;
		u = u << 6 | (x & 0x3f);
	}
	if (u < min || u > 0x10ffff || (u >= 0xd800 && u < 0xe000))
		return -1;
	*i += (size_t)extra + 1;
	return (int32_t)u;
}

/* Code points of a UTF-8 string, or -1 if it is not valid UTF-8. */
static int64_t utf8_count(const struct ir_bytes *b)
{
	int64_t n = 0;
	size_t i = 0;
	while (i < b->len) {
		if (utf8_get((const unsigned char *)b->data, b->len, &i) < 0)
			return -1;
		n++;
	}
	return n;
}

/*
 * The .npy descriptor of t ('<f4'...) and its element size in the file.
 * Strings are '<U<n>' with n the longest string's code points.
 */
static int npy_descr_of(const struct ir_tensor *t, char *descr, size_t size, size_t *esize,
			const char *path, struct ir_diag *d)
{
	const char *s = NULL;
	switch (t->dtype) {
	case IR_FLOAT: s = "<f4"; break;
	case IR_DOUBLE: s = "<f8"; break;
	case IR_FLOAT16: s = "<f2"; break;
	case IR_BFLOAT16: s = "<V2"; break;   /* as ml_dtypes saves it */
	case IR_INT8: s = "|i1"; break;
	case IR_INT16: s = "<i2"; break;
	case IR_INT32: s = "<i4"; break;
	case IR_INT64: s = "<i8"; break;
	case IR_UINT8: s = "|u1"; break;
	case IR_UINT16: s = "<u2"; break;
	case IR_UINT32: s = "<u4"; break;
	case IR_UINT64: s = "<u8"; break;
	case IR_BOOL: s = "|b1"; break;
	case IR_COMPLEX64: s = "<c8"; break;
	case IR_COMPLEX128: s = "<c16"; break;
	case IR_STRING: {
		int64_t longest = 1;   /* numpy's width for empty strings too */
		for (uint64_t i = 0; i < t->numel; i++) {
			int64_t n = utf8_count(&t->strings[i]);
			if (n < 0)
				return ir_diag_err(d, IR_ERR, "cannot write '%s': string %" PRIu64 " is not valid UTF-8",
						   path, i);
			if (n > longest)
				longest = n;
		}
		if (longest > (1 << 28))
			return ir_diag_err(d, IR_ERR, "cannot write '%s': a string is too long for numpy", path);
		snprintf(descr, size, "<U%" PRId64, longest);
		*esize = (size_t)longest * 4;
		return 0;
	}
	default:
		return ir_diag_err(d, IR_ERR, "cannot write '%s': numpy has no %s type", path, ir_dtype_name(t->dtype));
	}
	snprintf(descr, size, "%s", s);
	*esize = (size_t)ir_dtype_bits(t->dtype) / 8;
	return 0;
}

/*
 * Builds the preamble and header of t's .npy form into *hdr (malloc'd,
 * *hlen bytes, a multiple of 64) and the data's size into *dlen.
 */
static int npy_header_of(const struct ir_tensor *t, unsigned char **hdr, size_t *hlen, uint64_t *dlen,
			 size_t *esize, const char *path, struct ir_diag *d)
{
	char descr[32], shape[IR_MAX_RANK * 22 + 4];
	int rc = npy_descr_of(t, descr, sizeof(descr), esize, path, d);
	if (rc)
		return rc;
	if (__builtin_mul_overflow(t->numel, (uint64_t)*esize, dlen))
		return ir_diag_err(d, IR_ERR, "cannot write '%s': the data size overflows", path);
	size_t n = 0;
	shape[n++] = '(';
	for (int i = 0; i < t->rank; i++)
		n += (size_t)snprintf(shape + n, sizeof(shape) - n, i ? ", %" PRId64 : "%" PRId64, t->dims[i]);
	if (t->rank == 1)
		shape[n++] = ',';
	shape[n++] = ')';
	shape[n] = 0;
	char dict[sizeof(shape) + 96];
	int dl = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
	/* preamble (10 bytes for 1.0, 12 for 2.0) + dict + spaces + '\n', a multiple of 64 */
	size_t pre = 10, total = (pre + (size_t)dl + 1 + 63) / 64 * 64;
	if (total - pre > 65535) {   /* too long for 1.0's 16-bit length: format 2.0 */
		pre = 12;
		total = (pre + (size_t)dl + 1 + 63) / 64 * 64;
	}
	unsigned char *h = malloc(total);
	if (!h)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	memcpy(h, "\x93NUMPY", 6);
	h[6] = pre == 10 ? 1 : 2;
	h[7] = 0;
	if (pre == 10)
		st16(h + 8, (uint32_t)(total - pre));
	else
		st32(h + 8, (uint32_t)(total - pre));
	memcpy(h + pre, dict, (size_t)dl);
	memset(h + pre + dl, ' ', total - pre - (size_t)dl - 1);
	h[total - 1] = '\n';
	*hdr = h;
	*hlen = total;
	return 0;
}

/* Writes t's data as .npy data (esize bytes an element). */
static int npy_write_data(struct sink *k, const struct ir_tensor *t, size_t esize)
{
	if (t->dtype != IR_STRING)
		return t->nbytes ? sink_write(k, ir_tensor_data(t), t->nbytes) : 0;
	/* strings: UCS-4 little-endian, padded with zeros to esize */
	unsigned char *e = malloc(esize ? esize : 1);
	if (!e)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	int rc = 0;
	for (uint64_t i = 0; i < t->numel && !rc; i++) {
		const struct ir_bytes *b = &t->strings[i];
		size_t at = 0, j = 0;
		memset(e, 0, esize);
		while (j < b->len && at + 4 <= esize) {
			int32_t u = utf8_get((const unsigned char *)b->data, b->len, &j);
			if (u < 0)
				break;   /* checked before: cannot happen */
			st32(e + at, (uint32_t)u);
			at += 4;
		}
		rc = sink_write(k, e, esize);
	}
	free(e);
	return rc;
}

int exec_npy_write(const char *path, const struct ir_tensor *t, struct ir_diag *d)
{
	unsigned char *hdr;
	size_t hlen, esize;
	uint64_t dlen;
	int rc = ir_tensor_check(t, d);
	if (rc || (rc = npy_header_of(t, &hdr, &hlen, &dlen, &esize, path, d)))
		return rc;
	char *tmp;
	int fd = temp_open(path, &tmp, d);
	if (fd < 0) {
		free(hdr);
		return IR_EIO;
	}
	struct sink k = { fd, path, 0, false, 0, d };
	rc = sink_write(&k, hdr, hlen);
	free(hdr);
	if (!rc)
		rc = npy_write_data(&k, t, esize);
	return temp_finish(fd, tmp, path, rc, d);
}

/* ------------------------------------------------------------------------ */
/* .npz: zip archives                                                        */
/* ------------------------------------------------------------------------ */

#define ZIP_LOCAL_SIG 0x04034b50u
#define ZIP_CENTRAL_SIG 0x02014b50u
#define ZIP_EOCD_SIG 0x06054b50u
#define ZIP64_EOCD_SIG 0x06064b50u
#define ZIP64_LOC_SIG 0x07064b50u
#define ZIP_MAX32 0xffffffffu

void exec_named_free(struct exec_named_tensor *a, int n)
{
	if (!a)
		return;
	for (int i = 0; i < n; i++) {
		free(a[i].name);
		ir_tensor_unref(a[i].t);
	}
	free(a);
}

static int cmp_name(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* A name that appears twice among a[0..n), or NULL; *nomem on no memory.
 * (Sorting: archives of many thousands of tensors exist.) */
static const char *duplicate_name(const struct exec_named_tensor *a, int n, bool *nomem)
{
	*nomem = false;
	if (n < 2)
		return NULL;
	const char **v = malloc((size_t)n * sizeof(*v));
	if (!v) {
		*nomem = true;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		v[i] = a[i].name;
	qsort(v, (size_t)n, sizeof(*v), cmp_name);
	const char *dup = NULL;
	for (int i = 1; i < n && !dup; i++)
		if (!strcmp(v[i - 1], v[i]))
			dup = v[i];
	free(v);
	return dup;
}

/* pread of exactly n bytes at off; a short file is an error. */
static int pread_all(int fd, void *buf, size_t n, uint64_t off, const struct rd *c)
{
	size_t done = 0;
	char eb[128];
	while (done < n) {
		ssize_t got = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return rd_err(c, IR_EIO, "%s", ir_errstr(errno, eb, sizeof(eb)));
		if (got == 0)
			return rd_err(c, IR_ERR, "the file ended early");
		done += (size_t)got;
	}
	return 0;
}

/* The central directory's place and size, from the end records. */
struct zip_end {
	uint64_t entries, cd_off, cd_size;
};

static int zip_find_end(int fd, uint64_t fsize, struct zip_end *z, const struct rd *c)
{
	/* the end record (22 bytes) is followed by a comment of at most 65535 */
	size_t tail = fsize < 22 + 65535 ? (size_t)fsize : 22 + 65535;
	if (tail < 22)
		return rd_err(c, IR_ERR, "not a zip archive (too short)");
	unsigned char *buf = malloc(tail);
	if (!buf)
		return rd_err(c, IR_ENOMEM, "out of memory");
	uint64_t base = fsize - tail;
	int rc = pread_all(fd, buf, tail, base, c);
	if (rc) {
		free(buf);
		return rc;
	}
	size_t at = SIZE_MAX;
	for (size_t i = tail - 22 + 1; i-- > 0;)
		if (ld32(buf + i) == ZIP_EOCD_SIG && i + 22 + ld16(buf + i + 20) <= tail) {
			at = i;
			break;
		}
	if (at == SIZE_MAX) {
		free(buf);
		return rd_err(c, IR_ERR, "not a zip archive (no end of central directory record)");
	}
	const unsigned char *e = buf + at;
	uint64_t eocd = base + at;
	if (ld16(e + 4) != 0 || ld16(e + 6) != 0) {
		free(buf);
		return rd_err(c, IR_ERR, "multi-volume zip archives are not supported");
	}
	z->entries = ld16(e + 10);
	z->cd_size = ld32(e + 12);
	z->cd_off = ld32(e + 16);
	free(buf);
	/* zip64: a locator right before the end record points to the real one */
	if (eocd >= 20) {
		unsigned char loc[20];
		if ((rc = pread_all(fd, loc, 20, eocd - 20, c)))
			return rc;
		if (ld32(loc) == ZIP64_LOC_SIG) {
			uint64_t off64 = ld64(loc + 8);
			unsigned char r[56];
			if (off64 > eocd - 20 || eocd - 20 - off64 < 56)
				return rd_err(c, IR_ERR, "the zip64 end record is out of the file");
			if ((rc = pread_all(fd, r, 56, off64, c)))
				return rc;
			if (ld32(r) != ZIP64_EOCD_SIG)
				return rd_err(c, IR_ERR, "the zip64 end record is missing");
			z->entries = ld64(r + 32);
			z->cd_size = ld64(r + 40);
			z->cd_off = ld64(r + 48);
			eocd = off64;
		}
	}
	if (z->cd_off > eocd || z->cd_size > eocd - z->cd_off)
		return rd_err(c, IR_ERR, "the central directory (offset %" PRIu64 ", %" PRIu64 " bytes) is out of the file",
			      z->cd_off, z->cd_size);
	if (z->entries > z->cd_size / 46 || z->entries > (uint64_t)INT32_MAX)
		return rd_err(c, IR_ERR, "the archive claims %" PRIu64 " entries in a central directory of %" PRIu64 " bytes",
			      z->entries, z->cd_size);
	return 0;
}

/* One central directory entry, with the zip64 values applied. */
struct zip_entry {
	const char *name;     /* points into the central directory (not NUL-terminated) */
	size_t name_len;
	uint32_t flags, method, crc;
	uint64_t csize, usize, loff;
};

static int zip_parse_entry(const unsigned char *cd, size_t cd_size, size_t *pos, struct zip_entry *e,
			   const struct rd *c)
{
	size_t p = *pos;
	if (cd_size - p < 46 || ld32(cd + p) != ZIP_CENTRAL_SIG)
		return rd_err(c, IR_ERR, "the central directory is corrupt at offset %zu", p);
	const unsigned char *h = cd + p;
	size_t nl = ld16(h + 28), xl = ld16(h + 30), cl = ld16(h + 32);
	if (cd_size - p - 46 < nl + xl + cl)
		return rd_err(c, IR_ERR, "the central directory is corrupt at offset %zu", p);
	e->flags = ld16(h + 8);
	e->method = ld16(h + 10);
	e->crc = ld32(h + 16);
	e->csize = ld32(h + 20);
	e->usize = ld32(h + 24);
	e->loff = ld32(h + 42);
	e->name = (const char *)h + 46;
	e->name_len = nl;
	/* zip64 extra field: the 64-bit values of the fields set to 0xffffffff, in order */
	const unsigned char *x = h + 46 + nl, *xend = x + xl;
	while (xend - x >= 4) {
		uint32_t tag = ld16(x), len = ld16(x + 2);
		if ((size_t)(xend - x - 4) < len)
			break;
		if (tag == 1) {
			const unsigned char *v = x + 4, *vend = v + len;
			uint64_t *f[3] = { &e->usize, &e->csize, &e->loff };
			for (int k = 0; k < 3; k++) {
				if (*f[k] != ZIP_MAX32)
					continue;
				if (vend - v < 8)
					return rd_err(c, IR_ERR, "a zip64 extra field is too short");
				*f[k] = ld64(v);
				v += 8;
			}
		}
		x += 4 + len;
	}
	*pos = p + 46 + nl + xl + cl;
	return 0;
}

/* Reads the central directory into *cd (a new block of z->cd_size bytes). */
static int zip_read_directory(int fd, uint64_t fsize, struct zip_end *z, unsigned char **cd, const struct rd *c)
{
	*cd = NULL;
	int rc = zip_find_end(fd, fsize, z, c);
	if (rc)
		return rc;
	if (z->cd_size > (uint64_t)SIZE_MAX / 2)
		return rd_err(c, IR_ERR, "the central directory is too large");
	*cd = malloc(z->cd_size ? (size_t)z->cd_size : 1);
	if (!*cd)
		return rd_err(c, IR_ENOMEM, "out of memory");
	return pread_all(fd, *cd, (size_t)z->cd_size, z->cd_off, c);
}

/* Parses entry number i of the directory at *pos; a name with a NUL byte is
 * refused, since the name is used as a C string afterwards. */
static int zip_next_entry(const unsigned char *cd, const struct zip_end *z, size_t *pos, uint64_t i,
			  struct zip_entry *e, const struct rd *c)
{
	int rc = zip_parse_entry(cd, (size_t)z->cd_size, pos, e, c);
	if (rc)
		return rc;
	if (memchr(e->name, 0, e->name_len))
		return rd_err(c, IR_ERR, "entry %" PRIu64 "'s name contains a NUL byte", i);
	return 0;
}

#ifdef OGSH_HAVE_ZLIB
/* Inflates a raw deflate stream of csize bytes at file offset off into a
 * new block of exactly usize bytes (*outp). */
static int zip_inflate(int fd, uint64_t off, uint64_t csize, uint64_t usize, unsigned char **outp,
		       const struct rd *c)
{
	*outp = NULL;
	if (usize > csize * DEFLATE_MAX_RATIO + 1024)
		return rd_err(c, IR_ERR, "the entry claims %" PRIu64 " bytes from %" PRIu64 " compressed, more than deflate can give",
			      usize, csize);
	if (usize > (uint64_t)SIZE_MAX / 2 || csize > (uint64_t)SIZE_MAX / 2)
		return rd_err(c, IR_ERR, "the entry is too large for this machine");
	unsigned char *out = malloc(usize ? (size_t)usize : 1);
	unsigned char *in = malloc(IO_CHUNK);
	if (!out || !in) {
		free(out);
		free(in);
		return rd_err(c, IR_ENOMEM, "out of memory for %" PRIu64 " bytes", usize);
	}
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {
		free(out);
		free(in);
		return rd_err(c, IR_ENOMEM, "cannot start zlib");
	}
	int rc = 0, zr = Z_OK;
	uint64_t read_so_far = 0, produced = 0;
	while (zr != Z_STREAM_END) {
		if (ir_interrupted) {
			rc = rd_err(c, IR_EINTR, "interrupted");
			break;
		}
		if (z.avail_in == 0) {
			if (read_so_far == csize) {
				rc = rd_err(c, IR_ERR, "the compressed data ends early");
				break;
			}
			size_t n = csize - read_so_far > IO_CHUNK ? IO_CHUNK : (size_t)(csize - read_so_far);
			if ((rc = pread_all(fd, in, n, off + read_so_far, c)))
				break;
			read_so_far += n;
			z.next_in = in;
			z.avail_in = (uInt)n;
		}
		/* avail_out is a uInt: feed the output in pieces; one spare byte
		 * past usize would mean the entry is larger than it claims */
		uint64_t room = usize - produced;
		unsigned char spare;
		if (room) {
			z.next_out = out + produced;
			z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
		} else {
			z.next_out = &spare;
			z.avail_out = 1;
		}
		uInt before = z.avail_out;
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			rc = rd_err(c, IR_ERR, "the compressed data is corrupt (%s)", z.msg ? z.msg : "zlib error");
			break;
		}
		if (!room && z.avail_out == 0) {
			rc = rd_err(c, IR_ERR, "the entry is larger than its declared %" PRIu64 " bytes", usize);
			break;
		}
		produced += before - z.avail_out;
		if (zr == Z_BUF_ERROR && z.avail_in == 0 && read_so_far == csize) {
			rc = rd_err(c, IR_ERR, "the compressed data ends early");
			break;
		}
	}
	inflateEnd(&z);
	free(in);
	if (!rc && produced != usize)
		rc = rd_err(c, IR_ERR, "the entry has %" PRIu64 " bytes, not the declared %" PRIu64, produced, usize);
	if (rc) {
		free(out);
		return rc;
	}
	*outp = out;
	return 0;
}
#endif

/* The file offset of an entry's data (after its local header), checked
 * against the file's size. */
static int zip_entry_start(int fd, uint64_t fsize, const struct zip_entry *e, uint64_t *start_out,
			   const struct rd *c)
{
	unsigned char lh[30];
	int rc;
	if (e->flags & 1)
		return rd_err(c, IR_ERR, "encrypted entries are not supported");
	if (e->loff > fsize || fsize - e->loff < 30)
		return rd_err(c, IR_ERR, "the local header offset %" PRIu64 " is past the end of the file", e->loff);
	if ((rc = pread_all(fd, lh, 30, e->loff, c)))
		return rc;
	if (ld32(lh) != ZIP_LOCAL_SIG)
		return rd_err(c, IR_ERR, "no local header at offset %" PRIu64, e->loff);
	uint64_t start = e->loff + 30 + ld16(lh + 26) + ld16(lh + 28);
	if (start > fsize || e->csize > fsize - start)
		return rd_err(c, IR_ERR, "the entry's data (%" PRIu64 " bytes at offset %" PRIu64 ") is past the end of the file",
			      e->csize, start);
	*start_out = start;
	return 0;
}

/* Reads the tensor of one entry. */
static int zip_read_entry(int fd, uint64_t fsize, const struct zip_entry *e, struct ir_tensor **t,
			  const struct rd *c)
{
	uint64_t start = 0;
	int rc = zip_entry_start(fd, fsize, e, &start, c);
	if (rc)
		return rc;
	if (e->method == 0) {
		if (e->csize != e->usize)
			return rd_err(c, IR_ERR, "a stored entry has different sizes (%" PRIu64 " and %" PRIu64 ")",
				      e->csize, e->usize);
		struct src s = { fd, NULL, start, start + e->csize, true, 0 };
		if ((rc = npy_read_src(&s, t, c)) || (rc = src_drain(&s, c)))
			goto fail;
		if (s.crc != e->crc) {
			rc = rd_err(c, IR_ERR, "CRC mismatch (the entry is corrupt)");
			goto fail;
		}
		return 0;
	}
	if (e->method == 8) {
#ifdef OGSH_HAVE_ZLIB
		unsigned char *buf;
		if ((rc = zip_inflate(fd, start, e->csize, e->usize, &buf, c)))
			return rc;
		if (crc32_update(0, buf, (size_t)e->usize) != e->crc) {
			free(buf);
			return rd_err(c, IR_ERR, "CRC mismatch (the entry is corrupt)");
		}
		struct src s = { -1, buf, 0, e->usize, false, 0 };
		rc = npy_read_src(&s, t, c);
		free(buf);
		return rc;
#else
		return rd_err(c, IR_ERR, "the entry is compressed (np.savez_compressed) and ogsh was built without zlib");
#endif
	}
	return rd_err(c, IR_ERR, "compression method %u is not supported", e->method);
fail:
	ir_tensor_unref(*t);
	*t = NULL;
	return rc;
}

int exec_npz_read(const char *path, struct exec_named_tensor **out, int *n, struct ir_diag *d)
{
	struct rd c = { path, NULL, d };
	*out = NULL;
	*n = 0;
	int fd;
	uint64_t fsize;
	int rc = open_regular(&c, &fd, &fsize);
	if (rc)
		return rc;
	struct zip_end z = { 0, 0, 0 };
	unsigned char *cd = NULL;
	struct exec_named_tensor *a = NULL;
	int count = 0;
	if ((rc = zip_read_directory(fd, fsize, &z, &cd, &c)))
		goto done;
	a = calloc(z.entries ? (size_t)z.entries : 1, sizeof(*a));
	if (!a) {
		rc = rd_err(&c, IR_ENOMEM, "out of memory");
		goto done;
	}
	size_t pos = 0;
	for (uint64_t i = 0; i < z.entries; i++) {
		struct zip_entry e;
		if ((rc = zip_next_entry(cd, &z, &pos, i, &e, &c)))
			goto done;
		char *name = dup_mem(e.name, e.name_len);
		if (!name) {
			rc = rd_err(&c, IR_ENOMEM, "out of memory");
			goto done;
		}
		struct rd ce = { path, name, d };
		if (e.name_len == 0 || name[e.name_len - 1] == '/') {   /* a folder: nothing to read */
			free(name);
			continue;
		}
		if (e.name_len < 5 || strcmp(name + e.name_len - 4, ".npy")) {
			rd_warn(&ce, "not a .npy entry: skipped");
			free(name);
			continue;
		}
		struct ir_tensor *t = NULL;
		if ((rc = zip_read_entry(fd, fsize, &e, &t, &ce))) {
			free(name);
			goto done;
		}
		name[e.name_len - 4] = 0;   /* the name numpy gives it */
		a[count].name = name;
		a[count].t = t;
		count++;
	}
	bool nomem;
	const char *dup = duplicate_name(a, count, &nomem);
	if (nomem)
		rc = rd_err(&c, IR_ENOMEM, "out of memory");
	else if (dup)
		rc = rd_err(&c, IR_ERR, "the archive has two entries named '%s.npy'", dup);
done:
	free(cd);
	close(fd);
	if (rc) {
		exec_named_free(a, count);
		return rc;
	}
	if (!count) {
		free(a);
		a = NULL;
	}
	*out = a;
	*n = count;
	return 0;
}

/* Whether `name` is acceptable as an entry name: no path tricks, since other
 * tools will unzip the archive into a folder. */
static const char *bad_entry_name(const char *name)
{
	size_t n = strlen(name);
	if (!n)
		return "it is empty";
	if (n > 60000)
		return "it is too long";
	if (name[0] == '/' || strchr(name, '\\'))
		return "it looks like an absolute or Windows path";
	for (const char *p = name; p; p = strchr(p, '/')) {
		if (*p == '/')
			p++;
		if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || !p[2]))
			return "it has a '..' component";
	}
	return NULL;
}

/* Where each written entry went, for the central directory. */
struct zip_written {
	uint64_t off, size;
	uint32_t crc;
};

static int npz_write_body(struct sink *k, const struct exec_named_tensor *a, int n, struct zip_written *w)
{
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		unsigned char *hdr;
		size_t hlen, esize;
		uint64_t dlen, size;
		if ((rc = ir_tensor_check(a[i].t, k->d)) ||
		    (rc = npy_header_of(a[i].t, &hdr, &hlen, &dlen, &esize, k->path, k->d)))
			return rc;
		size = hlen + dlen;
		size_t nl = strlen(a[i].name) + 4;
		bool z64 = size >= ZIP_MAX32;
		unsigned char lh[30 + 20];
		st32(lh, ZIP_LOCAL_SIG);
		st16(lh + 4, z64 ? 45 : 20);   /* version needed */
		st16(lh + 6, 0);               /* flags */
		st16(lh + 8, 0);               /* stored */
		st16(lh + 10, 0);              /* time 00:00 */
		st16(lh + 12, 0x21);           /* date 1980-01-01: the same bytes every time */
		st32(lh + 14, 0);              /* CRC: patched below */
		st32(lh + 18, z64 ? ZIP_MAX32 : (uint32_t)size);
		st32(lh + 22, z64 ? ZIP_MAX32 : (uint32_t)size);
		st16(lh + 26, (uint32_t)nl);
		st16(lh + 28, z64 ? 20 : 0);
		if (z64) {
			st16(lh + 30, 1);
			st16(lh + 32, 16);
			st64(lh + 34, size);
			st64(lh + 42, size);
		}
		w[i].off = k->count;
		char *ename = malloc(nl + 1);
		if (!ename) {
			free(hdr);
			return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
		}
		snprintf(ename, nl + 1, "%s.npy", a[i].name);
		rc = sink_write(k, lh, 30);
		if (!rc)
			rc = sink_write(k, ename, nl);
		if (!rc && z64)
			rc = sink_write(k, lh + 30, 20);
		k->crc = 0;   /* the entry's CRC covers the .npy bytes only */
		k->crc_on = true;
		if (!rc)
			rc = sink_write(k, hdr, hlen);
		if (!rc)
			rc = npy_write_data(k, a[i].t, esize);
		k->crc_on = false;
		free(ename);
		free(hdr);
		if (rc)
			return rc;
		w[i].crc = k->crc;
		w[i].size = size;
		unsigned char crc[4];
		st32(crc, w[i].crc);
		if (pwrite(k->fd, crc, 4, (off_t)(w[i].off + 14)) != 4)
			return sys_err(k->d, "write", k->path, errno);
	}
	return rc;
}

static int npz_write_directory(struct sink *k, const struct exec_named_tensor *a, int n,
			       const struct zip_written *w)
{
	uint64_t cd_off = k->count;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		unsigned char h[46], x[4 + 24];
		size_t xl = 0;
		bool big = w[i].size >= ZIP_MAX32, far = w[i].off >= ZIP_MAX32;
		if (big || far) {   /* zip64 extra: only the fields that overflow */
			xl = 4;
			if (big) {
				st64(x + xl, w[i].size);
				st64(x + xl + 8, w[i].size);
				xl += 16;
			}
			if (far) {
				st64(x + xl, w[i].off);
				xl += 8;
			}
			st16(x, 1);
			st16(x + 2, (uint32_t)(xl - 4));
		}
		size_t nl = strlen(a[i].name) + 4;
		st32(h, ZIP_CENTRAL_SIG);
		st16(h + 4, 3u << 8 | (xl ? 45 : 20));   /* made by: Unix, zip version */
		st16(h + 6, xl ? 45 : 20);    /* needed */
		st16(h + 8, 0);
		st16(h + 10, 0);
		st16(h + 12, 0);
		st16(h + 14, 0x21);
		st32(h + 16, w[i].crc);
		st32(h + 20, big ? ZIP_MAX32 : (uint32_t)w[i].size);
		st32(h + 24, big ? ZIP_MAX32 : (uint32_t)w[i].size);
		st16(h + 28, (uint32_t)nl);
		st16(h + 30, (uint32_t)xl);
		st16(h + 32, 0);
		st16(h + 34, 0);
		st16(h + 36, 0);
		st32(h + 38, 0100644u << 16);   /* external attributes: a regular file, mode 0644 */
		st32(h + 42, far ? ZIP_MAX32 : (uint32_t)w[i].off);
		if ((rc = sink_write(k, h, 46)) || (rc = sink_write(k, a[i].name, nl - 4)) ||
		    (rc = sink_write(k, ".npy", 4)) || (xl && (rc = sink_write(k, x, xl))))
			return rc;
	}
	uint64_t cd_size = k->count - cd_off, z64_off = k->count;
	bool z64 = n >= 0xffff || cd_off >= ZIP_MAX32 || cd_size >= ZIP_MAX32;
	if (z64) {
		unsigned char r[56 + 20];
		st32(r, ZIP64_EOCD_SIG);
		st64(r + 4, 44);              /* size of the rest of the record */
		st16(r + 12, 45);
		st16(r + 14, 45);
		st32(r + 16, 0);
		st32(r + 20, 0);
		st64(r + 24, (uint64_t)n);
		st64(r + 32, (uint64_t)n);
		st64(r + 40, cd_size);
		st64(r + 48, cd_off);
		st32(r + 56, ZIP64_LOC_SIG);
		st32(r + 60, 0);
		st64(r + 64, z64_off);
		st32(r + 72, 1);
		if ((rc = sink_write(k, r, sizeof(r))))
			return rc;
	}
	unsigned char e[22];
	st32(e, ZIP_EOCD_SIG);
	st16(e + 4, 0);
	st16(e + 6, 0);
	st16(e + 8, z64 ? 0xffff : (uint32_t)n);
	st16(e + 10, z64 ? 0xffff : (uint32_t)n);
	st32(e + 12, z64 ? ZIP_MAX32 : (uint32_t)cd_size);
	st32(e + 16, z64 ? ZIP_MAX32 : (uint32_t)cd_off);
	st16(e + 20, 0);
	return sink_write(k, e, 22);
}

int exec_npz_write(const char *path, const struct exec_named_tensor *a, int n, struct ir_diag *d)
{
	if (n < 0)
		return ir_diag_err(d, IR_ERR, "cannot write '%s': %d entries", path, n);
	for (int i = 0; i < n; i++) {
		const char *why = a[i].name ? bad_entry_name(a[i].name) : "it is missing";
		if (why)
			return ir_diag_err(d, IR_ERR, "cannot write '%s': bad entry name '%s': %s",
					   path, a[i].name ? a[i].name : "", why);
		if (!a[i].t)
			return ir_diag_err(d, IR_ERR, "cannot write '%s': entry '%s' has no tensor", path, a[i].name);
	}
	bool nomem;
	const char *dup = duplicate_name(a, n, &nomem);
	if (nomem)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	if (dup)
		return ir_diag_err(d, IR_ERR, "cannot write '%s': two entries are named '%s'", path, dup);
	struct zip_written *w = calloc(n ? (size_t)n : 1, sizeof(*w));
	if (!w)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	char *tmp;
	int fd = temp_open(path, &tmp, d);
	if (fd < 0) {
		free(w);
		return IR_EIO;
	}
	struct sink k = { fd, path, 0, false, 0, d };
	int rc = npz_write_body(&k, a, n, w);
	if (!rc)
		rc = npz_write_directory(&k, a, n, w);
	free(w);
	return temp_finish(fd, tmp, path, rc, d);
}

/* ------------------------------------------------------------------------ */
/* Locating arrays, to read them a few rows at a time (datasets)             */
/* ------------------------------------------------------------------------ */

/* The prefix of a .npy stream the locator inflates to find a compressed
 * entry's header: numpy writes headers of well under 10,000 bytes. */
#define NPY_HEAD_PREFIX ((size_t)65536 + 12)

static void loc_fill(struct exec_npy_loc *l, const struct npy_header *h, const struct npy_type *ty)
{
	l->dtype = ty->dtype;
	l->rank = h->rank;
	memcpy(l->dims, h->dims, sizeof(int64_t) * (size_t)h->rank);
	l->esize = ty->esize;
	l->swap = ty->swap;
	l->fortran = h->fortran && h->rank > 1;
}

int exec_npy_locate(const char *path, struct exec_npy_loc *out, struct ir_diag *d)
{
	struct rd c = { path, NULL, d };
	memset(out, 0, sizeof(*out));
	int fd;
	uint64_t fsize;
	int rc = open_regular(&c, &fd, &fsize);
	if (rc)
		return rc;
	struct src s = { fd, NULL, 0, fsize, false, 0 };
	struct npy_header h;
	struct npy_type ty;
	uint64_t numel = 0, need = 0;
	rc = npy_read_head(&s, &h, &ty, &c);
	if (!rc)
		rc = npy_data_size(&h, &ty, src_left(&s), &numel, &need, &c);
	close(fd);
	if (rc)
		return rc;
	loc_fill(out, &h, &ty);
	out->off = s.off;
	out->size = need;
	return 0;
}

#ifdef OGSH_HAVE_ZLIB
/* Inflates the first bytes (at most `want`) of a raw deflate stream of
 * csize bytes at file offset off into buf; *got is how many came. */
static int zip_inflate_prefix(int fd, uint64_t off, uint64_t csize, unsigned char *buf, size_t want, size_t *got,
			      const struct rd *c)
{
	unsigned char in[16384];
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
		return rd_err(c, IR_ENOMEM, "cannot start zlib");
	int rc = 0, zr = Z_OK;
	uint64_t read_so_far = 0;
	z.next_out = buf;
	z.avail_out = (uInt)want;
	while (zr != Z_STREAM_END && z.avail_out) {
		if (z.avail_in == 0) {
			if (read_so_far == csize)
				break;
			size_t n = csize - read_so_far > sizeof(in) ? sizeof(in) : (size_t)(csize - read_so_far);
			if ((rc = pread_all(fd, in, n, off + read_so_far, c)))
				break;
			read_so_far += n;
			z.next_in = in;
			z.avail_in = (uInt)n;
		}
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			rc = rd_err(c, IR_ERR, "the compressed data is corrupt (%s)", z.msg ? z.msg : "zlib error");
			break;
		}
	}
	*got = want - z.avail_out;
	inflateEnd(&z);
	return rc;
}
#endif

/* Finds the header of one entry: its dtype, shape and where its data starts. */
static int zip_locate_entry(int fd, uint64_t fsize, const struct zip_entry *e, struct exec_npy_loc *l,
			    const struct rd *c)
{
	uint64_t start = 0;
	int rc = zip_entry_start(fd, fsize, e, &start, c);
	if (rc)
		return rc;
	struct npy_header h;
	struct npy_type ty;
	uint64_t numel = 0, need = 0;
	if (e->method == 0) {
		if (e->csize != e->usize)
			return rd_err(c, IR_ERR, "a stored entry has different sizes (%" PRIu64 " and %" PRIu64 ")",
				      e->csize, e->usize);
		struct src s = { fd, NULL, start, start + e->csize, false, 0 };
		if ((rc = npy_read_head(&s, &h, &ty, c)) ||
		    (rc = npy_data_size(&h, &ty, src_left(&s), &numel, &need, c)))
			return rc;
		loc_fill(l, &h, &ty);
		l->off = s.off;
		l->size = need;
		return 0;
	}
	if (e->method == 8) {
#ifdef OGSH_HAVE_ZLIB
		size_t want = e->usize < NPY_HEAD_PREFIX ? (size_t)e->usize : NPY_HEAD_PREFIX, got = 0;
		unsigned char *buf = malloc(want ? want : 1);
		if (!buf)
			return rd_err(c, IR_ENOMEM, "out of memory");
		if ((rc = zip_inflate_prefix(fd, start, e->csize, buf, want, &got, c))) {
			free(buf);
			return rc;
		}
		struct src s = { -1, buf, 0, got, false, 0 };
		rc = npy_read_head(&s, &h, &ty, c);
		free(buf);
		if (!rc)
			rc = npy_data_size(&h, &ty, e->usize - s.off, &numel, &need, c);
		if (rc)
			return rc;
		loc_fill(l, &h, &ty);
		l->deflated = true;
		l->size = need;
		return 0;
#else
		return rd_err(c, IR_ERR, "the entry is compressed (np.savez_compressed) and ogsh was built without zlib");
#endif
	}
	return rd_err(c, IR_ERR, "compression method %u is not supported", e->method);
}

void exec_npy_loc_free(struct exec_npy_loc *a, int n)
{
	if (!a)
		return;
	for (int i = 0; i < n; i++)
		free(a[i].name);
	free(a);
}

int exec_npz_locate(const char *path, struct exec_npy_loc **out, int *n, struct ir_diag *d)
{
	struct rd c = { path, NULL, d };
	*out = NULL;
	*n = 0;
	int fd;
	uint64_t fsize;
	int rc = open_regular(&c, &fd, &fsize);
	if (rc)
		return rc;
	struct zip_end z = { 0, 0, 0 };
	unsigned char *cd = NULL;
	struct exec_npy_loc *a = NULL;
	int count = 0;
	if ((rc = zip_read_directory(fd, fsize, &z, &cd, &c)))
		goto done;
	a = calloc(z.entries ? (size_t)z.entries : 1, sizeof(*a));
	if (!a) {
		rc = rd_err(&c, IR_ENOMEM, "out of memory");
		goto done;
	}
	size_t pos = 0;
	for (uint64_t i = 0; i < z.entries; i++) {
		struct zip_entry e;
		if ((rc = zip_next_entry(cd, &z, &pos, i, &e, &c)))
			goto done;
		/* folders and entries that are not arrays: nothing to read */
		if (e.name_len < 5 || memcmp(e.name + e.name_len - 4, ".npy", 4))
			continue;
		char *name = dup_mem(e.name, e.name_len);
		if (!name) {
			rc = rd_err(&c, IR_ENOMEM, "out of memory");
			goto done;
		}
		struct rd ce = { path, name, d };
		rc = zip_locate_entry(fd, fsize, &e, &a[count], &ce);
		if (rc) {
			free(name);
			goto done;
		}
		name[e.name_len - 4] = 0;
		a[count].name = name;
		count++;
		for (int k = 0; k < count - 1; k++)
			if (!strcmp(a[k].name, name)) {
				rc = rd_err(&c, IR_ERR, "the archive has two entries named '%s.npy'", name);
				goto done;
			}
	}
done:
	free(cd);
	close(fd);
	if (rc) {
		exec_npy_loc_free(a, count);
		return rc;
	}
	*out = a;
	*n = count;
	return 0;
}

int exec_npy_read_elems(int fd, const char *path, const struct exec_npy_loc *l, uint64_t first, uint64_t count,
			void *dst, struct ir_diag *d)
{
	struct rd c = { path, l->name, d };
	if (l->deflated || l->fortran || l->dtype == IR_STRING)
		return rd_err(&c, IR_ERR, "the array cannot be read in pieces (%s)",
			      l->deflated ? "compressed" : l->fortran ? "Fortran order" : "strings");
	uint64_t at, n;
	if (__builtin_mul_overflow(first, (uint64_t)l->esize, &at) ||
	    __builtin_mul_overflow(count, (uint64_t)l->esize, &n) || at > l->size || n > l->size - at)
		return rd_err(&c, IR_ERR, "elements %" PRIu64 "..%" PRIu64 " are out of the array", first, first + count);
	if (n > (uint64_t)SIZE_MAX / 2)
		return rd_err(&c, IR_ERR, "the data is too large for this machine");
	struct src s = { fd, NULL, l->off + at, l->off + at + n, false, 0 };
	int rc = src_read(&s, dst, n, "the data", &c);
	if (rc)
		return rc;
	if (l->swap)
		swap_words(dst, (size_t)n, l->dtype == IR_COMPLEX64 || l->dtype == IR_COMPLEX128 ? l->esize / 2 : l->esize);
	if (l->dtype == IR_BOOL) {
		unsigned char *b = dst;
		for (uint64_t i = 0; i < count; i++)
			b[i] = b[i] != 0;
	}
	return 0;
}
