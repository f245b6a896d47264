/*
 * tensor.c - reference-counted buffers, file mappings and tensors.
 */
#include "ir_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct ir_mapping *ir_mapping_open(int fd, const char *path, size_t size, int64_t mtime_ns, struct ir_diag *d)
{
	struct ir_mapping *m = calloc(1, sizeof(*m));
	if (!m || !(m->path = ir_strdup(path))) {
		free(m);
		close(fd);
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	m->refcount = 1;
	m->size = size;
	m->fd = fd;
	m->mtime_ns = mtime_ns;
	if (size) {
		/* mapped, not read: pages come in when a tensor is first used */
		m->addr = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m->addr == MAP_FAILED) {
			int e = errno;
			m->addr = NULL;
			ir_mapping_unref(m);
			char eb[128];
			ir_diag_err(d, IR_EIO, "cannot map '%s': %s", path, ir_errstr(e, eb, sizeof(eb)));
			return NULL;
		}
	}
	return m;
}

int ir_mapping_check(const struct ir_mapping *m, struct ir_diag *d)
{
	if (!m || m->heap || m->fd < 0)
		return 0;
	struct stat st;
	char eb[128];
	if (fstat(m->fd, &st) < 0)
		return ir_diag_err(d, IR_EIO, "cannot check '%s': %s", m->path, ir_errstr(errno, eb, sizeof(eb)));
	int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if ((uint64_t)st.st_size < m->size)
		return ir_diag_err(d, IR_ERR, "'%s' was truncated since it was loaded (%zu bytes, now %jd): load it again",
				   m->path, m->size, (intmax_t)st.st_size);
	if (mt != m->mtime_ns)
		return ir_diag_err(d, IR_ERR, "'%s' was changed on disk since it was loaded: load it again", m->path);
	return 0;
}

int ir_tensor_check(const struct ir_tensor *t, struct ir_diag *d)
{
	return t && t->buf ? ir_mapping_check(t->buf->map, d) : 0;
}

void ir_mapping_unref(struct ir_mapping *m)
{
	if (!m || --m->refcount > 0)
		return;
	if (m->fd >= 0 && !m->heap)
		close(m->fd);
	if (m->heap)
		free(m->addr);
	else if (m->addr && m->size)
		munmap(m->addr, m->size);
	free(m->path);
	free(m);
}

struct ir_buffer *ir_buffer_new(size_t size)
{
	void *p = calloc(size ? size : 1, 1);
	if (!p)
		return NULL;
	struct ir_buffer *b = ir_buffer_adopt(p, size);
	if (!b)
		free(p);
	return b;
}

struct ir_buffer *ir_buffer_adopt(void *heap, size_t size)
{
	struct ir_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->refcount = 1;
	b->data = heap;
	b->size = size;
	return b;
}

struct ir_buffer *ir_buffer_mapped(struct ir_mapping *m, size_t off, size_t size)
{
	if (off > m->size || size > m->size - off)
		return NULL;
	struct ir_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->refcount = 1;
	b->data = (char *)m->addr + off;
	b->size = size;
	b->map = m;
	m->refcount++;
	return b;
}

void ir_buffer_ref(struct ir_buffer *b)
{
	if (b)
		b->refcount++;
}

void ir_buffer_unref(struct ir_buffer *b)
{
	if (!b || --b->refcount > 0)
		return;
	if (b->map)
		ir_mapping_unref(b->map);
	else
		free(b->data);
	free(b);
}

static struct ir_tensor *tensor_shell(int dtype, int rank, const int64_t *dims, struct ir_diag *d)
{
	if (!ir_dtype_valid(dtype)) {
		ir_diag_err(d, IR_ERR, "unknown element type %d", dtype);
		return NULL;
	}
	if (rank < 0 || rank > IR_MAX_RANK) {
		ir_diag_err(d, IR_ERR, "rank %d is out of range (0..%d)", rank, IR_MAX_RANK);
		return NULL;
	}
	uint64_t numel = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0) {
			ir_diag_err(d, IR_ERR, "dimension %d is negative (%" PRId64 ")", i, dims[i]);
			return NULL;
		}
		if (ir_mul_overflow(numel, (uint64_t)dims[i], &numel) || numel > (uint64_t)INT64_MAX) {
			ir_diag_err(d, IR_ERR, "the element count overflows int64");
			return NULL;
		}
	}
	uint64_t nbytes;
	if (!ir_dtype_nbytes(dtype, numel, &nbytes) || nbytes > (uint64_t)SIZE_MAX / 2) {
		ir_diag_err(d, IR_ERR, "the byte size overflows");
		return NULL;
	}
	struct ir_tensor *t = calloc(1, sizeof(*t));
	if (!t || !(t->dims = ir_alloc_array((size_t)rank, sizeof(int64_t)))) {
		free(t);
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		return NULL;
	}
	t->refcount = 1;
	t->dtype = dtype;
	t->rank = rank;
	if (rank)
		memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
	t->numel = numel;
	t->nbytes = (size_t)nbytes;
	return t;
}

struct ir_tensor *ir_tensor_new(int dtype, int rank, const int64_t *dims, struct ir_diag *d)
{
	struct ir_tensor *t = tensor_shell(dtype, rank, dims, d);
	if (!t)
		return NULL;
	if (dtype == IR_STRING) {
		t->nbytes = 0;
		if (t->numel) {
			if (t->numel > SIZE_MAX / sizeof(struct ir_bytes) ||
			    !(t->strings = calloc((size_t)t->numel, sizeof(struct ir_bytes))))
				goto nomem;
			for (uint64_t i = 0; i < t->numel; i++)
				if (ir_bytes_set(&t->strings[i], "", 0))
					goto nomem;
		}
		return t;
	}
	if (t->nbytes && !(t->buf = ir_buffer_new(t->nbytes)))
		goto nomem;
	return t;
nomem:
	ir_diag_err(d, IR_ENOMEM, "out of memory for a tensor of %" PRIu64 " elements", t->numel);
	ir_tensor_unref(t);
	return NULL;
}

struct ir_tensor *ir_tensor_wrap(int dtype, int rank, const int64_t *dims,
				 struct ir_buffer *buf, struct ir_diag *d)
{
	if (dtype == IR_STRING) {
		ir_diag_err(d, IR_ERR, "string tensors cannot wrap a byte buffer");
		return NULL;
	}
	struct ir_tensor *t = tensor_shell(dtype, rank, dims, d);
	if (!t)
		return NULL;
	size_t have = buf ? buf->size : 0;
	if (have != t->nbytes) {
		char dbuf[128];
		ir_diag_err(d, IR_ERR, "has %zu bytes, dims %s %s need %zu", have,
			    ir_dims_str(rank, dims, dbuf, sizeof(dbuf)), ir_dtype_name(dtype), t->nbytes);
		ir_tensor_unref(t);
		return NULL;
	}
	if (buf && buf->size) {
		ir_buffer_ref(buf);
		t->buf = buf;
	}
	return t;
}

void ir_tensor_ref(struct ir_tensor *t)
{
	if (t)
		t->refcount++;
}

void ir_tensor_unref(struct ir_tensor *t)
{
	if (!t || --t->refcount > 0)
		return;
	ir_buffer_unref(t->buf);
	if (t->strings)
		ir_bytes_free_array(t->strings, (size_t)t->numel);
	free(t->dims);
	free(t->name);
	free(t->doc);
	free(t->ext_location);
	ir_kv_free(t->meta, t->n_meta);
	free(t);
}

const void *ir_tensor_data(const struct ir_tensor *t)
{
	return t && t->buf ? t->buf->data : NULL;
}

void *ir_tensor_mutable(struct ir_tensor *t)
{
	if (!t || !t->buf || t->buf->map || t->buf->refcount != 1 || t->refcount != 1)
		return NULL;
	return t->buf->data;
}

double ir_tensor_get_f64(const struct ir_tensor *t, uint64_t i)
{
	if (!t || i >= t->numel || !t->buf)
		return 0.0;
	return ir_elem_to_f64(t->dtype, t->buf->data, i);
}

bool ir_tensor_equal(const struct ir_tensor *a, const struct ir_tensor *b)
{
	if (a == b)
		return true;
	if (!a || !b || a->dtype != b->dtype || a->rank != b->rank)
		return false;
	if (a->rank && memcmp(a->dims, b->dims, (size_t)a->rank * sizeof(int64_t)))
		return false;
	if (a->dtype == IR_STRING) {
		for (uint64_t i = 0; i < a->numel; i++)
			if (a->strings[i].len != b->strings[i].len ||
			    memcmp(a->strings[i].data, b->strings[i].data, a->strings[i].len))
				return false;
		return true;
	}
	if (a->nbytes != b->nbytes)
		return false;
	return !a->nbytes || memcmp(a->buf->data, b->buf->data, a->nbytes) == 0;
}

char *ir_dims_str(int rank, const int64_t *dims, char *buf, size_t size)
{
	size_t o = 0;
	if (size == 0)
		return buf;
	buf[0] = 0;
	o += (size_t)snprintf(buf + o, size - o, "[");
	for (int i = 0; i < rank && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, i ? "," : "", dims[i]);
	if (o < size)
		snprintf(buf + o, size - o, "]");
	return buf;
}

void ir_sparse_free(struct ir_sparse *s)
{
	if (!s)
		return;
	ir_tensor_unref(s->values);
	ir_tensor_unref(s->indices);
	free(s->dims);
	free(s);
}

struct ir_sparse *ir_sparse_clone(const struct ir_sparse *s)
{
	struct ir_sparse *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->dims = ir_alloc_array((size_t)s->rank, sizeof(int64_t));
	if (!c->dims) {
		free(c);
		return NULL;
	}
	if (s->rank)
		memcpy(c->dims, s->dims, (size_t)s->rank * sizeof(int64_t));
	c->rank = s->rank;
	c->values = s->values;
	c->indices = s->indices;
	ir_tensor_ref(c->values);
	ir_tensor_ref(c->indices);
	return c;
}
