/*
 * wire.h - a pre-pass over the protobuf wire format of a model (private to ir/).
 */
#ifndef OGSH_IR_WIRE_H
#define OGSH_IR_WIRE_H

#include "ir_private.h"

#include <protobuf-c/protobuf-c.h>

/* A payload of TensorProto.raw_data left in the original buffer. */
struct wire_hole {
	size_t off, len;
};

struct wire_out {
	uint8_t *buf;            /* the rewritten message, with holes replaced by markers */
	size_t len, cap;
	struct wire_hole *holes;
	size_t n_holes, cap_holes;
	uint64_t nonce;          /* the first 8 bytes of every marker */
};

#define WIRE_MARKER_LEN 16

/*
 * Checks the wire format of `data` as a message of `desc` (every tag,
 * varint and length inside its parent; nesting at most `max_depth`) and
 * writes a copy in which each TensorProto.raw_data of at least `min_hole`
 * bytes is replaced by a 16-byte marker (nonce, hole index). Messages
 * inside ModelProto.training_info are copied without holes: ogsh keeps them
 * verbatim. Returns 0, or an error naming the byte offset.
 */
int wire_prepare(const uint8_t *data, size_t size, const ProtobufCMessageDescriptor *desc,
		 size_t min_hole, int max_depth, struct wire_out *o, struct ir_diag *d);
void wire_out_free(struct wire_out *o);
/* The hole a raw_data marker stands for, or -1 if `raw` is not a marker. */
long wire_marker_hole(const struct wire_out *o, const uint8_t *raw, size_t len);

#endif
