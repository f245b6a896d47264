/*
 * move.h - private to kernels/cpu/: moving elements of any dtype between
 * tensors (whole bytes, packed 4- and 2-bit types, strings), for the
 * data-movement kernels (k_tensor.c, k_index.c).
 */
#ifndef OGSH_KERNELS_CPU_MOVE_H
#define OGSH_KERNELS_CPU_MOVE_H

#include "cpu.h"

#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Moving elements of any type                                               */
/* ------------------------------------------------------------------------ */

enum { MV_BYTES, MV_BITS, MV_STR };

/* Copies elements of one dtype from a source to a destination tensor. */
struct mover {
	int kind;
	size_t esz;                   /* MV_BYTES: bytes per element */
	int bits;                     /* MV_BITS: 4 or 2 */
	const unsigned char *src;
	unsigned char *dst;
	const struct ir_bytes *ss;    /* MV_STR */
	struct ir_bytes *ds;
	bool nomem;                   /* a string copy failed */
};

/* Source tensor t (or NULL: set src/ss by hand), destination o (may be NULL). */
static inline void mv_init(struct mover *m, int dtype, struct ir_tensor *o, const struct ir_tensor *t)
{
	int bits = ir_dtype_bits(dtype);
	memset(m, 0, sizeof(*m));
	if (dtype == IR_STRING) {
		m->kind = MV_STR;
	} else if (bits % 8) {
		m->kind = MV_BITS;
		m->bits = bits;
	} else {
		m->kind = MV_BYTES;
		m->esz = (size_t)bits / 8;
	}
	if (t) {
		m->src = kdata(t);
		m->ss = t->strings;
	}
	if (o) {
		m->dst = kwdata(o);
		m->ds = o->strings;
	}
}

static inline bool str_set(struct ir_bytes *b, const struct ir_bytes *from)
{
	return kstr_set(b, from->data, from->len);
}

static inline unsigned bits_get(const unsigned char *p, int bits, uint64_t i)
{
	if (bits == 4)
		return (p[i / 2] >> (4 * (i % 2))) & 0xfu;
	return (p[i / 4] >> (2 * (i % 4))) & 0x3u;
}

static inline void bits_put(unsigned char *p, int bits, uint64_t i, unsigned v)
{
	if (bits == 4) {
		unsigned sh = 4 * (unsigned)(i % 2);
		p[i / 2] = (unsigned char)((p[i / 2] & ~(0xfu << sh)) | ((v & 0xfu) << sh));
	} else {
		unsigned sh = 2 * (unsigned)(i % 4);
		p[i / 4] = (unsigned char)((p[i / 4] & ~(0x3u << sh)) | ((v & 0x3u) << sh));
	}
}

/* dst[di] = src[si] */
static inline void mv(struct mover *m, uint64_t di, uint64_t si)
{
	switch (m->kind) {
	case MV_BYTES:
		switch (m->esz) {
		case 1: m->dst[di] = m->src[si]; return;
		case 2: memcpy(m->dst + di * 2, m->src + si * 2, 2); return;
		case 4: memcpy(m->dst + di * 4, m->src + si * 4, 4); return;
		case 8: memcpy(m->dst + di * 8, m->src + si * 8, 8); return;
		default: memcpy(m->dst + di * m->esz, m->src + si * m->esz, m->esz); return;
		}
	case MV_BITS:
		bits_put(m->dst, m->bits, di, bits_get(m->src, m->bits, si));
		return;
	default:
		if (!str_set(&m->ds[di], &m->ss[si]))
			m->nomem = true;
		return;
	}
}

/* dst[di .. di+n) = src[si .. si+n) */
static inline void mv_block(struct mover *m, uint64_t di, uint64_t si, uint64_t n)
{
	if (!n)
		return;
	if (m->kind == MV_BYTES) {
		memcpy(m->dst + di * m->esz, m->src + si * m->esz, n * m->esz);
		return;
	}
	for (uint64_t j = 0; j < n; j++)
		mv(m, di + j, si + j);
}


static inline int mv_done(struct cpu_kctx *k, const struct mover *m)
{
	if (m->nomem)
		return ir_diag_err(k->d, IR_ENOMEM, "out of memory");
	return 0;
}

#endif
