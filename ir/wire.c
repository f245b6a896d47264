/*
 * wire.c - validate and rewrite the protobuf wire format before unpacking.
 *
 * Why: protobuf-c copies every bytes field and recurses without a depth
 * limit. Walking the message first lets ogsh (1) reject truncated or
 * absurdly nested input with a byte offset, before protobuf-c sees it, and
 * (2) leave big tensor payloads where they lie in the mapped file, so a
 * 650 MB model loads without copying its weights.
 */
#include "wire.h"

#include "onnx.pb-c.h"

#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

struct walker {
	const uint8_t *base;
	struct wire_out *o;
	size_t min_hole;
	int max_depth;
	struct ir_diag *d;
};

static int wbad(struct walker *w, const uint8_t *at, const char *what)
{
	return ir_diag_err(w->d, IR_ERR, "malformed protobuf at byte %zu: %s", (size_t)(at - w->base), what);
}

static int reserve(struct wire_out *o, size_t more)
{
	if (o->len + more <= o->cap)
		return 0;
	size_t cap = o->cap ? o->cap : 4096;
	while (cap < o->len + more) {
		if (cap > SIZE_MAX / 2)
			return IR_ENOMEM;
		cap *= 2;
	}
	uint8_t *p = realloc(o->buf, cap);
	if (!p)
		return IR_ENOMEM;
	o->buf = p;
	o->cap = cap;
	return 0;
}

static int put(struct wire_out *o, const void *p, size_t n)
{
	if (reserve(o, n))
		return IR_ENOMEM;
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	return 0;
}

/* Reads a varint of at most 10 bytes; returns bytes used, 0 if bad. */
static size_t get_varint(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < 10 && p + i < end; i++) {
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			if (i == 9 && p[i] > 1)
				return 0;   /* more than 64 bits */
			*out = v;
			return i + 1;
		}
	}
	return 0;
}

/* A 5-byte varint (padded with continuation bits): lengths are written before
 * the content is known, then filled in. protobuf-c reads up to 5 bytes. */
static void put_len5(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++) {
		p[i] = (uint8_t)((v & 0x7f) | 0x80);
		v >>= 7;
	}
	p[4] = (uint8_t)(v & 0x7f);
}

static int walk(struct walker *w, const uint8_t *p, const uint8_t *end,
		const ProtobufCMessageDescriptor *desc, int depth, bool holes)
{
	if (depth > w->max_depth)
		return ir_diag_err(w->d, IR_ERR, "protobuf messages are nested more than %d deep (at byte %zu)",
				   w->max_depth, (size_t)(p - w->base));
	if (ir_interrupted)
		return ir_diag_err(w->d, IR_EINTR, "interrupted");
	/* singular message fields seen (by index in desc->fields): given twice, protobuf-c
	 * would merge them, copying arrays each time (quadratic); ONNX files never do it */
	uint64_t seen = 0;
	while (p < end) {
		const uint8_t *field_start = p;
		uint64_t tag;
		size_t n = get_varint(p, end, &tag);
		if (!n)
			return wbad(w, p, "bad field tag");
		p += n;
		uint32_t fnum = (uint32_t)(tag >> 3);
		unsigned wt = tag & 7;
		if (fnum == 0 || tag >> 3 > 0x1fffffff)
			return wbad(w, field_start, "field number out of range");
		switch (wt) {
		case 0: {
			uint64_t v;
			if (!(n = get_varint(p, end, &v)))
				return wbad(w, p, "bad varint");
			p += n;
			break;
		}
		case 1:
			if (end - p < 8)
				return wbad(w, p, "truncated 64-bit field");
			p += 8;
			break;
		case 5:
			if (end - p < 4)
				return wbad(w, p, "truncated 32-bit field");
			p += 4;
			break;
		case 2: {
			uint64_t len;
			if (!(n = get_varint(p, end, &len)))
				return wbad(w, p, "bad length");
			p += n;
			if (len > (uint64_t)(end - p))
				return wbad(w, p, "a length runs past the end of its message");
			if (len > 0xffffffffu)
				return wbad(w, p, "a field is longer than 4 GiB");
			const ProtobufCFieldDescriptor *f = desc ? protobuf_c_message_descriptor_get_field(desc, fnum) : NULL;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				size_t fi = (size_t)(f - desc->fields);
				if (f->label != PROTOBUF_C_LABEL_REPEATED && fi < 64) {
					if (seen >> fi & 1) {
						char why[160];
						snprintf(why, sizeof(why), "field '%s' of %s is given more than once", f->name,
							 desc->short_name);
						return wbad(w, field_start, why);
					}
					seen |= (uint64_t)1 << fi;
				}
				/* tag, a 5-byte length, then the rewritten content */
				bool sub_holes = holes && !(desc == &onnx__model_proto__descriptor && fnum == 20);
				if (put(w->o, field_start, (size_t)(p - n - field_start)) || reserve(w->o, 5))
					return ir_diag_err(w->d, IR_ENOMEM, "out of memory");
				size_t at = w->o->len;
				w->o->len += 5;
				int rc = walk(w, p, p + len, f->descriptor, depth + 1, sub_holes);
				if (rc)
					return rc;
				size_t clen = w->o->len - at - 5;
				if (clen > 0xffffffffu)
					return wbad(w, p, "a message grows past 4 GiB");
				put_len5(w->o->buf + at, (uint32_t)clen);
				p += len;
				continue;
			}
			if (holes && desc == &onnx__tensor_proto__descriptor && fnum == 9 && len >= w->min_hole) {
				if (ir_grow(&w->o->holes, &w->o->cap_holes, w->o->n_holes + 1, sizeof(struct wire_hole)))
					return ir_diag_err(w->d, IR_ENOMEM, "out of memory");
				uint8_t marker[1 + 1 + WIRE_MARKER_LEN];
				marker[0] = (uint8_t)((9 << 3) | 2);
				marker[1] = WIRE_MARKER_LEN;
				uint64_t idx = w->o->n_holes;
				memcpy(marker + 2, &w->o->nonce, 8);
				memcpy(marker + 10, &idx, 8);
				if (put(w->o, marker, sizeof(marker)))
					return ir_diag_err(w->d, IR_ENOMEM, "out of memory");
				w->o->holes[w->o->n_holes].off = (size_t)(p - w->base);
				w->o->holes[w->o->n_holes].len = (size_t)len;
				w->o->n_holes++;
				p += len;
				continue;
			}
			p += len;
			break;
		}
		case 3: case 4:
			return wbad(w, field_start, "groups are not used by ONNX");
		default:
			return wbad(w, field_start, "unknown wire type");
		}
		if (put(w->o, field_start, (size_t)(p - field_start)))
			return ir_diag_err(w->d, IR_ENOMEM, "out of memory");
	}
	return 0;
}

int wire_prepare(const uint8_t *data, size_t size, const ProtobufCMessageDescriptor *desc,
		 size_t min_hole, int max_depth, struct wire_out *o, struct ir_diag *d)
{
	memset(o, 0, sizeof(*o));
	/* A random nonce: a file cannot forge a marker it cannot predict. */
	if (getrandom(&o->nonce, sizeof(o->nonce), 0) != (ssize_t)sizeof(o->nonce)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		o->nonce = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
		o->nonce *= 0xbf58476d1ce4e5b9ull;
	}
	struct walker w = { data, o, min_hole < WIRE_MARKER_LEN + 1 ? WIRE_MARKER_LEN + 1 : min_hole,
			    max_depth, d };
	if (reserve(o, size / 64 + 64))
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int rc = walk(&w, data, data + size, desc, 0, true);
	if (rc)
		wire_out_free(o);
	return rc;
}

void wire_out_free(struct wire_out *o)
{
	free(o->buf);
	free(o->holes);
	memset(o, 0, sizeof(*o));
}

long wire_marker_hole(const struct wire_out *o, const uint8_t *raw, size_t len)
{
	if (len != WIRE_MARKER_LEN || !raw || memcmp(raw, &o->nonce, 8) != 0)
		return -1;
	uint64_t idx;
	memcpy(&idx, raw + 8, 8);
	return idx < o->n_holes ? (long)idx : -1;
}
