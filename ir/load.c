/*
 * load.c - ONNX file -> IR.
 *
 * The file is mapped, checked and rewritten by wire.c (big raw tensors stay
 * in the mapping), unpacked by protobuf-c, converted to the IR, validated,
 * and the protobuf tree is freed. Buffers protobuf-c allocated for small
 * tensors are taken over by the IR, not copied. Every failure is one line:
 * "<file>: <object>: <what is wrong>".
 */
#include "extdata.h"
#include "wire.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ogsh keeps tensors in ONNX's little-endian raw layout and needs a little-endian host"
#endif

/* raw_data payloads at least this big stay in the mapped file */
#define HOLE_MIN 256

struct loader {
	struct ir_mapping *map;    /* the model file */
	struct wire_out wire;
	unsigned char *hole_used;
	struct ext_cache ext;
	int max_depth;
	bool had_external;
	bool reordered;
	struct ir_diag *d;
};

static char *steal(char **p)
{
	char *s = *p;
	*p = NULL;
	return s;
}

static int nomem(struct loader *L)
{
	return ir_diag_err(L->d, IR_ENOMEM, "out of memory");
}

static int conv_kv(struct loader *L, struct ir_kv **out, size_t *n_out,
		   Onnx__StringStringEntryProto **e, size_t n)
{
	*out = NULL;
	*n_out = 0;
	if (!n)
		return 0;
	if (!(*out = ir_alloc_array(n, sizeof(**out))))
		return nomem(L);
	for (size_t i = 0; i < n; i++) {
		(*out)[i].key = steal(&e[i]->key);
		(*out)[i].value = steal(&e[i]->value);
	}
	*n_out = n;
	return 0;
}

/* Packs a message we keep verbatim. */
static int pack_bytes(struct loader *L, struct ir_bytes *out, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	out->data = malloc(n + 1);
	if (!out->data)
		return nomem(L);
	out->len = protobuf_c_message_pack(msg, (uint8_t *)out->data);
	out->data[out->len] = 0;
	return 0;
}

static int pack_list(struct loader *L, struct ir_bytes **out, size_t *n_out, void **msgs, size_t n)
{
	*out = NULL;
	*n_out = 0;
	if (!n)
		return 0;
	if (!(*out = ir_alloc_array(n, sizeof(**out))))
		return nomem(L);
	for (size_t i = 0; i < n; i++) {
		if (pack_bytes(L, &(*out)[i], msgs[i]))
			return IR_ENOMEM;
		(*n_out)++;
	}
	return 0;
}

/* ---- tensors ---- */

/* The typed field that holds elements of `dt`, and how many entries `numel` takes. */
enum typed_field { TF_NONE, TF_FLOAT, TF_INT32, TF_STRING, TF_INT64, TF_DOUBLE, TF_UINT64 };

static const char *typed_field_name(enum typed_field f)
{
	static const char *names[] = { "raw_data", "float_data", "int32_data", "string_data",
				       "int64_data", "double_data", "uint64_data" };
	return names[f];
}

static enum typed_field typed_field_of(int dt, uint64_t numel, uint64_t *count)
{
	*count = numel;
	switch (dt) {
	case IR_FLOAT: return TF_FLOAT;
	case IR_COMPLEX64: *count = numel * 2; return TF_FLOAT;
	case IR_DOUBLE: return TF_DOUBLE;
	case IR_COMPLEX128: *count = numel * 2; return TF_DOUBLE;
	case IR_INT64: return TF_INT64;
	case IR_UINT32: case IR_UINT64: return TF_UINT64;
	case IR_STRING: return TF_STRING;
	case IR_UINT4: case IR_INT4: case IR_F4E2M1: *count = (numel + 1) / 2; return TF_INT32;
	case IR_UINT2: case IR_INT2: *count = (numel + 3) / 4; return TF_INT32;
	default: return TF_INT32;   /* 8/16/32-bit ints, bool, 16-bit and 8-bit floats */
	}
}

/*
 * Converts one TensorProto. `what` names it for messages ("initializer 'w'").
 * Errors are "<what>: <problem>".
 */
static struct ir_tensor *conv_tensor(struct loader *L, Onnx__TensorProto *tp, const char *what)
{
	struct ir_diag *d = L->d;
	char dbuf[160];
	if (!tp->has_data_type) {
		ir_diag_err(d, IR_ERR, "%s: has no data_type", what);
		return NULL;
	}
	int dt = tp->data_type;
	if (dt == IR_UNDEFINED) {
		ir_diag_err(d, IR_ERR, "%s: data_type is 0 (UNDEFINED)", what);
		return NULL;
	}
	if (!ir_dtype_valid(dt)) {
		ir_diag_err(d, IR_ERR, "%s: unknown data_type %d", what, dt);
		return NULL;
	}
	if (tp->n_dims > IR_MAX_RANK) {
		ir_diag_err(d, IR_ERR, "%s: rank %zu is more than %d", what, tp->n_dims, IR_MAX_RANK);
		return NULL;
	}
	int rank = (int)tp->n_dims;
	uint64_t numel = 1;
	for (int i = 0; i < rank; i++) {
		if (tp->dims[i] < 0) {
			ir_diag_err(d, IR_ERR, "%s: dimension %d is negative (%" PRId64 ")", what, i, tp->dims[i]);
			return NULL;
		}
		/* element counts are int64 in ONNX (and in the IR's dims) */
		if (ir_mul_overflow(numel, (uint64_t)tp->dims[i], &numel) || numel > (uint64_t)INT64_MAX) {
			ir_diag_err(d, IR_ERR, "%s: the product of dims %s overflows int64", what,
				    ir_dims_str(rank, tp->dims, dbuf, sizeof(dbuf)));
			return NULL;
		}
	}
	uint64_t nbytes;
	if (!ir_dtype_nbytes(dt, numel, &nbytes) || nbytes > (uint64_t)SIZE_MAX / 4) {
		ir_diag_err(d, IR_ERR, "%s: dims %s are too large", what, ir_dims_str(rank, tp->dims, dbuf, sizeof(dbuf)));
		return NULL;
	}
	if (tp->segment) {
		ir_diag_err(d, IR_ERR, "%s: segmented tensors (the segment field) are not supported", what);
		return NULL;
	}
	bool external = (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
	if (tp->has_data_location && tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL &&
	    tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT) {
		ir_diag_err(d, IR_ERR, "%s: unknown data_location %d", what, (int)tp->data_location);
		return NULL;
	}
	if (tp->n_external_data && !external) {
		ir_diag_err(d, IR_ERR, "%s: has external_data but data_location is not EXTERNAL", what);
		return NULL;
	}
	/* which source holds the data: exactly one */
	enum typed_field present[8];
	int np = 0;
	if (tp->has_raw_data) present[np++] = TF_NONE;
	if (tp->n_float_data) present[np++] = TF_FLOAT;
	if (tp->n_int32_data) present[np++] = TF_INT32;
	if (tp->n_string_data) present[np++] = TF_STRING;
	if (tp->n_int64_data) present[np++] = TF_INT64;
	if (tp->n_double_data) present[np++] = TF_DOUBLE;
	if (tp->n_uint64_data) present[np++] = TF_UINT64;
	if (external && np) {
		ir_diag_err(d, IR_ERR, "%s: has both external data and %s", what, typed_field_name(present[0]));
		return NULL;
	}
	if (np > 1) {
		ir_diag_err(d, IR_ERR, "%s: has data in both %s and %s", what, typed_field_name(present[0]),
			    typed_field_name(present[1]));
		return NULL;
	}
	uint64_t count;
	enum typed_field want = typed_field_of(dt, numel, &count);
	struct ir_tensor *t = NULL;
	enum ir_tensor_enc enc = IR_ENC_RAW;

	if (dt == IR_STRING) {
		if (external || tp->has_raw_data) {
			ir_diag_err(d, IR_ERR, "%s: string tensors must use string_data", what);
			return NULL;
		}
		if (np && present[0] != TF_STRING) {
			ir_diag_err(d, IR_ERR, "%s: %s cannot hold string elements", what, typed_field_name(present[0]));
			return NULL;
		}
		if (tp->n_string_data != numel) {
			ir_diag_err(d, IR_ERR, "%s: string_data has %zu entries, dims %s need %" PRIu64, what,
				    tp->n_string_data, ir_dims_str(rank, tp->dims, dbuf, sizeof(dbuf)), numel);
			return NULL;
		}
		t = ir_tensor_new(IR_STRING, rank, tp->dims, d);
		if (!t)
			return NULL;
		for (uint64_t i = 0; i < numel; i++) {
			free(t->strings[i].data);
			t->strings[i].data = NULL;
			if (ir_bytes_set(&t->strings[i], tp->string_data[i].data, tp->string_data[i].len)) {
				ir_tensor_unref(t);
				nomem(L);
				return NULL;
			}
		}
		enc = IR_ENC_TYPED;
	} else if (external) {
		struct ir_kv *keys;
		size_t nk;
		struct ir_buffer *buf = NULL;
		char *loc = NULL;
		uint64_t off = 0;
		if (conv_kv(L, &keys, &nk, tp->external_data, tp->n_external_data))
			return NULL;
		int rc = ext_resolve(&L->ext, keys, nk, nbytes, &buf, &loc, &off, d);
		ir_kv_free(keys, nk);
		if (rc) {
			ir_diag_prefix(d, "%s", what);
			return NULL;
		}
		t = ir_tensor_wrap(dt, rank, tp->dims, buf, d);
		ir_buffer_unref(buf);
		if (!t) {
			free(loc);
			return NULL;
		}
		t->ext_location = loc;
		t->ext_offset = off;
		enc = IR_ENC_EXTERNAL;
		L->had_external = true;
	} else if (tp->has_raw_data) {
		const uint8_t *raw = tp->raw_data.data;
		size_t len = tp->raw_data.len;
		long hole = wire_marker_hole(&L->wire, raw, len);
		struct ir_buffer *buf = NULL;
		if (hole >= 0) {
			if (L->hole_used[hole]) {
				ir_diag_err(d, IR_ERR, "%s: raw_data is shared with another tensor", what);
				return NULL;
			}
			L->hole_used[hole] = 1;
			len = L->wire.holes[hole].len;
		}
		if (len != nbytes) {
			ir_diag_err(d, IR_ERR, "%s: raw_data has %zu bytes, dims %s %s need %" PRIu64, what, len,
				    ir_dims_str(rank, tp->dims, dbuf, sizeof(dbuf)), ir_dtype_name(dt), nbytes);
			return NULL;
		}
		if (hole >= 0) {
			buf = ir_buffer_mapped(L->map, L->wire.holes[hole].off, len);
		} else if (len) {
			buf = ir_buffer_adopt(tp->raw_data.data, len);
			if (buf) {
				tp->raw_data.data = NULL;
				tp->raw_data.len = 0;
			}
		}
		if (len && !buf) {
			nomem(L);
			return NULL;
		}
		t = ir_tensor_wrap(dt, rank, tp->dims, buf, d);
		ir_buffer_unref(buf);
		if (!t)
			return NULL;
	} else {
		/* typed fields (or nothing, for an empty tensor) */
		size_t have = 0;
		if (np) {
			if (present[0] != want) {
				ir_diag_err(d, IR_ERR, "%s: %s cannot hold %s elements (expected %s)", what,
					    typed_field_name(present[0]), ir_dtype_name(dt), typed_field_name(want));
				return NULL;
			}
			have = want == TF_FLOAT ? tp->n_float_data : want == TF_INT32 ? tp->n_int32_data
			     : want == TF_INT64 ? tp->n_int64_data : want == TF_DOUBLE ? tp->n_double_data
			     : tp->n_uint64_data;
		} else if (count) {
			ir_diag_err(d, IR_ERR, "%s: has no data (dims %s %s need %" PRIu64 " bytes)", what,
				    ir_dims_str(rank, tp->dims, dbuf, sizeof(dbuf)), ir_dtype_name(dt), nbytes);
			return NULL;
		}
		if (have != count) {
			ir_diag_err(d, IR_ERR, "%s: %s has %zu entries, dims %s %s need %" PRIu64, what,
				    typed_field_name(want), have, ir_dims_str(rank, tp->dims, dbuf, sizeof(dbuf)),
				    ir_dtype_name(dt), count);
			return NULL;
		}
		struct ir_buffer *buf = NULL;
		int bits = ir_dtype_bits(dt);
		if (count == 0) {
			buf = NULL;
		} else if (want == TF_FLOAT || want == TF_INT64 || want == TF_DOUBLE ||
			   (want == TF_UINT64 && dt == IR_UINT64) || (want == TF_INT32 && dt == IR_INT32)) {
			/* same layout: take protobuf-c's array */
			void **arr = want == TF_FLOAT ? (void **)&tp->float_data : want == TF_INT64 ? (void **)&tp->int64_data
				   : want == TF_DOUBLE ? (void **)&tp->double_data : want == TF_UINT64 ? (void **)&tp->uint64_data
				   : (void **)&tp->int32_data;
			buf = ir_buffer_adopt(*arr, (size_t)nbytes);
			if (buf)
				*arr = NULL;
		} else if (want == TF_UINT64) {   /* uint32 */
			if ((buf = ir_buffer_new((size_t)nbytes))) {
				uint32_t *o = buf->data;
				for (uint64_t i = 0; i < numel; i++) {
					if (tp->uint64_data[i] > UINT32_MAX) {
						ir_diag_err(d, IR_ERR, "%s: uint64_data[%" PRIu64 "] does not fit uint32", what, i);
						ir_buffer_unref(buf);
						return NULL;
					}
					o[i] = (uint32_t)tp->uint64_data[i];
				}
			}
		} else {   /* int32_data holding narrower elements */
			if ((buf = ir_buffer_new((size_t)nbytes))) {
				uint8_t *o = buf->data;
				for (uint64_t i = 0; i < count; i++) {
					uint32_t v = (uint32_t)tp->int32_data[i];
					if (bits == 16) {
						o[2 * i] = (uint8_t)v;
						o[2 * i + 1] = (uint8_t)(v >> 8);
					} else if (dt == IR_BOOL) {
						o[i] = v != 0;
					} else {
						o[i] = (uint8_t)v;   /* 8-bit types; 4- and 2-bit come packed per byte */
					}
				}
			}
		}
		if (count && !buf) {
			nomem(L);
			return NULL;
		}
		t = ir_tensor_wrap(dt, rank, tp->dims, buf, d);
		ir_buffer_unref(buf);
		if (!t)
			return NULL;
		enc = np ? IR_ENC_TYPED : IR_ENC_RAW;
	}
	t->enc = enc;
	t->has_data_location = tp->has_data_location;
	t->name = steal(&tp->name);
	t->doc = steal(&tp->doc_string);
	if (conv_kv(L, &t->meta, &t->n_meta, tp->metadata_props, tp->n_metadata_props)) {
		ir_tensor_unref(t);
		return NULL;
	}
	return t;
}

static struct ir_sparse *conv_sparse(struct loader *L, Onnx__SparseTensorProto *sp, const char *what)
{
	struct ir_diag *d = L->d;
	char w[400];
	if (!sp->values || !sp->indices) {
		ir_diag_err(d, IR_ERR, "%s: a sparse tensor needs values and indices", what);
		return NULL;
	}
	if (sp->n_dims > IR_MAX_RANK) {
		ir_diag_err(d, IR_ERR, "%s: rank %zu is more than %d", what, sp->n_dims, IR_MAX_RANK);
		return NULL;
	}
	struct ir_sparse *s = calloc(1, sizeof(*s));
	if (!s || !(s->dims = ir_alloc_array(sp->n_dims, sizeof(int64_t)))) {
		free(s);
		nomem(L);
		return NULL;
	}
	s->rank = (int)sp->n_dims;
	uint64_t total = 1;
	for (int i = 0; i < s->rank; i++) {
		s->dims[i] = sp->dims[i];
		if (sp->dims[i] < 0 || ir_mul_overflow(total, (uint64_t)sp->dims[i], &total) || total > (uint64_t)INT64_MAX) {
			ir_diag_err(d, IR_ERR, "%s: sparse dims are negative or overflow", what);
			goto fail;
		}
	}
	snprintf(w, sizeof(w), "%s values", what);
	if (!(s->values = conv_tensor(L, sp->values, w)))
		goto fail;
	snprintf(w, sizeof(w), "%s indices", what);
	if (!(s->indices = conv_tensor(L, sp->indices, w)))
		goto fail;
	const struct ir_tensor *v = s->values, *ix = s->indices;
	if (v->rank != 1) {
		ir_diag_err(d, IR_ERR, "%s: sparse values must be 1-D", what);
		goto fail;
	}
	uint64_t nnz = v->numel;
	if (ix->dtype != IR_INT64 || !((ix->rank == 1 && ix->dims[0] == (int64_t)nnz) ||
				      (ix->rank == 2 && ix->dims[0] == (int64_t)nnz && ix->dims[1] == s->rank))) {
		ir_diag_err(d, IR_ERR, "%s: sparse indices must be int64 [%" PRIu64 "] or [%" PRIu64 ",%d]", what, nnz, nnz, s->rank);
		goto fail;
	}
	for (uint64_t i = 0; i < ix->numel; i++) {
		int64_t k;
		memcpy(&k, (const char *)ir_tensor_data(ix) + 8 * i, 8);
		uint64_t lim = ix->rank == 1 ? total : (uint64_t)s->dims[i % (uint64_t)s->rank];
		if (k < 0 || (uint64_t)k >= lim) {
			ir_diag_err(d, IR_ERR, "%s: sparse index %" PRId64 " is out of range", what, k);
			goto fail;
		}
	}
	return s;
fail:
	ir_sparse_free(s);
	return NULL;
}

/* ---- types ---- */

static int conv_shape(struct loader *L, struct ir_type *t, Onnx__TensorShapeProto *sh, const char *what)
{
	if (!sh) {
		t->rank = -1;
		return 0;
	}
	if (sh->n_dim > IR_MAX_RANK)
		return ir_diag_err(L->d, IR_ERR, "%s: rank %zu is more than %d", what, sh->n_dim, IR_MAX_RANK);
	if (!sh->n_dim) {
		t->rank = 0;
		return 0;
	}
	/* rank is set once dims exist: ir_type_clear walks them */
	if (!(t->dims = ir_alloc_array(sh->n_dim, sizeof(*t->dims))))
		return nomem(L);
	t->rank = (int)sh->n_dim;
	bool warned = false;
	for (size_t i = 0; i < sh->n_dim; i++) {
		Onnx__TensorShapeProto__Dimension *dm = sh->dim[i];
		struct ir_dim *o = &t->dims[i];
		o->denotation = steal(&dm->denotation);
		if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dm->dim_value < 0) {
			/* Paddle2ONNX and older exporters write -1 for a dimension they
			 * do not know; onnxruntime reads it so. Unknown here too (and
			 * saved as unknown) */
			if (!warned)
				ir_diag_warn(L->d, "%s: %s: dimension %zu is %" PRId64 ", read as unknown (older exporters "
					     "write -1 for a dimension they do not know; save writes it as unknown); give it "
					     "with set-input-shape or --shape",
					     L->map && L->map->path ? L->map->path : "<memory>", what, i, dm->dim_value);
			warned = true;
		} else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
			o->kind = IR_DIM_VALUE;
			o->value = dm->dim_value;
		} else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
			o->kind = IR_DIM_PARAM;
			o->param = steal(&dm->dim_param);
			if (!o->param && !(o->param = ir_strdup("")))
				return nomem(L);
		}
	}
	return 0;
}

static int conv_elem(struct loader *L, int elem, bool has, const char *what, int *out)
{
	if (has && elem != 0 && !ir_dtype_valid(elem))
		return ir_diag_err(L->d, IR_ERR, "%s: unknown element type %d", what, elem);
	*out = has ? elem : 0;
	return 0;
}

static int conv_type(struct loader *L, struct ir_type *t, Onnx__TypeProto *tp, const char *what)
{
	memset(t, 0, sizeof(*t));
	t->rank = -1;
	if (!tp)
		return 0;
	t->denotation = steal(&tp->denotation);
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: {
		bool sparse = tp->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
		t->kind = sparse ? IR_TYPE_SPARSE_TENSOR : IR_TYPE_TENSOR;
		int32_t elem = sparse ? tp->sparse_tensor_type->elem_type : tp->tensor_type->elem_type;
		bool has = sparse ? tp->sparse_tensor_type->has_elem_type : tp->tensor_type->has_elem_type;
		t->has_elem = has;
		if (conv_elem(L, elem, has, what, &t->elem))
			return IR_ERR;
		return conv_shape(L, t, sparse ? tp->sparse_tensor_type->shape : tp->tensor_type->shape, what);
	}
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: {
		bool seq = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
		t->kind = seq ? IR_TYPE_SEQUENCE : IR_TYPE_OPTIONAL;
		Onnx__TypeProto *inner = seq ? tp->sequence_type->elem_type : tp->optional_type->elem_type;
		if (!inner)
			return 0;
		if (!(t->inner = calloc(1, sizeof(*t->inner))))
			return nomem(L);
		return conv_type(L, t->inner, inner, what);
	}
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		t->kind = IR_TYPE_MAP;
		if (conv_elem(L, tp->map_type->key_type, tp->map_type->has_key_type, what, &t->key))
			return IR_ERR;
		t->has_elem = tp->map_type->has_key_type;
		if (!tp->map_type->value_type)
			return 0;
		if (!(t->inner = calloc(1, sizeof(*t->inner))))
			return nomem(L);
		return conv_type(L, t->inner, tp->map_type->value_type, what);
	default:
		return 0;   /* a TypeProto with no value: kind NONE */
	}
}

/* ---- graphs ---- */

static struct ir_graph *build_graph(struct loader *L, Onnx__GraphProto *gp, struct ir_graph *parent,
				    int depth, bool is_function);

static int conv_attr(struct loader *L, struct ir_attr *a, Onnx__AttributeProto *ap,
		     struct ir_graph *scope, int depth, const char *where)
{
	struct ir_diag *d = L->d;
	char what[512];
	memset(a, 0, sizeof(*a));
	if (!ap->name || !*ap->name)
		return ir_diag_err(d, IR_ERR, "%s: an attribute has no name", where);
	snprintf(what, sizeof(what), "%s attribute '%s'", where, ap->name);
	a->name = steal(&ap->name);
	a->ref_attr_name = steal(&ap->ref_attr_name);
	a->doc = steal(&ap->doc_string);
	a->has_type = ap->has_type;
	int type = ap->has_type ? (int)ap->type : 0;
	if (!ap->has_type) {
		/* old files: infer the type from the field that is set */
		type = ap->t ? IR_ATTR_TENSOR : ap->g ? IR_ATTR_GRAPH : ap->sparse_tensor ? IR_ATTR_SPARSE_TENSOR
		     : ap->tp ? IR_ATTR_TYPE_PROTO : ap->n_floats ? IR_ATTR_FLOATS : ap->n_ints ? IR_ATTR_INTS
		     : ap->n_strings ? IR_ATTR_STRINGS : ap->n_tensors ? IR_ATTR_TENSORS
		     : ap->n_graphs ? IR_ATTR_GRAPHS : ap->n_sparse_tensors ? IR_ATTR_SPARSE_TENSORS
		     : ap->n_type_protos ? IR_ATTR_TYPE_PROTOS : ap->has_s ? IR_ATTR_STRING
		     : ap->has_i ? IR_ATTR_INT : ap->has_f ? IR_ATTR_FLOAT : 0;
	}
	a->type = (enum ir_attr_type)type;
	if (a->ref_attr_name) {
		/* a reference to the calling node's attribute: no value, so only in a function body
		 * (elsewhere, code that reads a Constant's tensor or an If's graph would find none) */
		const struct ir_graph *f = scope;
		while (f && !f->is_function)
			f = f->parent;
		if (!f)
			return ir_diag_err(d, IR_ERR, "%s: refers to the caller's attribute '%s' outside a function body",
					   what, a->ref_attr_name);
		return 0;
	}
	switch (type) {
	case IR_ATTR_FLOAT: a->f = ap->f; break;
	case IR_ATTR_INT: a->i = ap->i; break;
	case IR_ATTR_STRING:
		if (ir_bytes_set(&a->s, ap->s.data ? (const char *)ap->s.data : "", ap->s.len))
			return nomem(L);
		break;
	case IR_ATTR_TENSOR:
		if (!ap->t)
			return ir_diag_err(d, IR_ERR, "%s: type tensor but no tensor", what);
		if (!(a->t = conv_tensor(L, ap->t, what)))
			return IR_ERR;
		break;
	case IR_ATTR_GRAPH:
		if (!ap->g)
			return ir_diag_err(d, IR_ERR, "%s: type graph but no graph", what);
		if (!(a->g = build_graph(L, ap->g, scope, depth + 1, false))) {
			ir_diag_prefix(d, "%s", what);
			return IR_ERR;
		}
		break;
	case IR_ATTR_SPARSE_TENSOR:
		if (!ap->sparse_tensor)
			return ir_diag_err(d, IR_ERR, "%s: type sparse_tensor but no sparse tensor", what);
		if (!(a->sp = conv_sparse(L, ap->sparse_tensor, what)))
			return IR_ERR;
		break;
	case IR_ATTR_TYPE_PROTO:
		if (!ap->tp)
			return ir_diag_err(d, IR_ERR, "%s: type type_proto but no type", what);
		if (!(a->tp = calloc(1, sizeof(*a->tp))))
			return nomem(L);
		if (conv_type(L, a->tp, ap->tp, what))
			return IR_ERR;
		break;
	case IR_ATTR_FLOATS:
		a->n = ap->n_floats;
		if (!(a->floats = ir_alloc_array(a->n, sizeof(float))))
			return nomem(L);
		if (a->n)
			memcpy(a->floats, ap->floats, a->n * sizeof(float));
		break;
	case IR_ATTR_INTS:
		a->n = ap->n_ints;
		if (!(a->ints = ir_alloc_array(a->n, sizeof(int64_t))))
			return nomem(L);
		if (a->n)
			memcpy(a->ints, ap->ints, a->n * sizeof(int64_t));
		break;
	case IR_ATTR_STRINGS:
		a->n = ap->n_strings;
		if (!a->n)
			break;   /* no array for an empty list, as ir_attr_copy makes it */
		if (!(a->strings = ir_alloc_array(a->n, sizeof(*a->strings))))
			return nomem(L);
		for (size_t i = 0; i < a->n; i++)
			if (ir_bytes_set(&a->strings[i], ap->strings[i].data ? (const char *)ap->strings[i].data : "",
					 ap->strings[i].len))
				return nomem(L);
		break;
	case IR_ATTR_TENSORS:
		if (!(a->tensors = ir_alloc_array(ap->n_tensors, sizeof(*a->tensors))))
			return nomem(L);
		for (size_t i = 0; i < ap->n_tensors; i++, a->n++)
			if (!(a->tensors[i] = conv_tensor(L, ap->tensors[i], what)))
				return IR_ERR;
		break;
	case IR_ATTR_GRAPHS:
		if (!(a->graphs = ir_alloc_array(ap->n_graphs, sizeof(*a->graphs))))
			return nomem(L);
		for (size_t i = 0; i < ap->n_graphs; i++, a->n++)
			if (!(a->graphs[i] = build_graph(L, ap->graphs[i], scope, depth + 1, false))) {
				ir_diag_prefix(d, "%s", what);
				return IR_ERR;
			}
		break;
	case IR_ATTR_SPARSE_TENSORS:
		if (!(a->sparses = ir_alloc_array(ap->n_sparse_tensors, sizeof(*a->sparses))))
			return nomem(L);
		for (size_t i = 0; i < ap->n_sparse_tensors; i++, a->n++)
			if (!(a->sparses[i] = conv_sparse(L, ap->sparse_tensors[i], what)))
				return IR_ERR;
		break;
	case IR_ATTR_TYPE_PROTOS:
		if (!(a->tps = ir_alloc_array(ap->n_type_protos, sizeof(*a->tps))))
			return nomem(L);
		for (size_t i = 0; i < ap->n_type_protos; i++) {
			/* counted first: a half-converted type is freed with the attribute */
			int rc = conv_type(L, &a->tps[i], ap->type_protos[i], what);
			a->n++;
			if (rc)
				return IR_ERR;
		}
		break;
	default:
		return ir_diag_err(d, IR_ERR, "%s: unknown attribute type %d", what, type);
	}
	return 0;
}

static int set_vinfo(struct loader *L, struct ir_value *v, Onnx__ValueInfoProto *vi, const char *what)
{
	if (vi->type) {
		struct ir_type t;
		if (conv_type(L, &t, vi->type, what)) {
			ir_type_clear(&t);
			return IR_ERR;
		}
		if (!v->has_type_proto) {
			ir_type_clear(&v->type);
			v->type = t;
		} else {
			ir_type_clear(&t);
		}
		v->has_type_proto = true;
	}
	if (!v->vi_doc)
		v->vi_doc = steal(&vi->doc_string);
	if (!v->n_vi_meta && conv_kv(L, &v->vi_meta, &v->n_vi_meta, vi->metadata_props, vi->n_metadata_props))
		return IR_ERR;
	return 0;
}

static const char *gname(const struct ir_graph *g)
{
	return g->name ? g->name : "";
}

static char *node_desc(const struct ir_node *n, char *buf, size_t size)
{
	if (n->name && *n->name)
		snprintf(buf, size, "node '%s' (n%d, %s)", n->name, n->id, n->op_type);
	else
		snprintf(buf, size, "node n%d (%s)", n->id, n->op_type);
	return buf;
}

static struct ir_graph *build_graph(struct loader *L, Onnx__GraphProto *gp, struct ir_graph *parent,
				    int depth, bool is_function)
{
	struct ir_diag *d = L->d;
	char what[512];
	if (depth > L->max_depth) {
		ir_diag_err(d, IR_ERR, "subgraphs are nested more than %d deep", L->max_depth);
		return NULL;
	}
	struct ir_graph *g = ir_graph_new(NULL);
	if (!g) {
		nomem(L);
		return NULL;
	}
	g->name = steal(&gp->name);
	g->doc = steal(&gp->doc_string);
	g->parent = parent;
	g->depth = depth;
	g->is_function = is_function;
	if (conv_kv(L, &g->meta, &g->n_meta, gp->metadata_props, gp->n_metadata_props))
		goto fail;

	/* The lists are sized once: appending one by one reallocates each time, which is
	 * quadratic where realloc copies (sanitizers, other allocators) on 10^5 inputs. */
	if (gp->n_input > INT32_MAX || gp->n_output > INT32_MAX || gp->n_initializer > INT32_MAX ||
	    gp->n_sparse_initializer > INT32_MAX ||
	    !(g->inputs = ir_alloc_array(gp->n_input, sizeof(*g->inputs))) ||
	    !(g->outputs = ir_alloc_array(gp->n_output, sizeof(*g->outputs))) ||
	    !(g->inits = ir_alloc_array(gp->n_initializer, sizeof(*g->inits))) ||
	    !(g->sparse_inits = ir_alloc_array(gp->n_sparse_initializer, sizeof(*g->sparse_inits))))
		goto fail_nomem;

	/* 1. inputs, initializers, sparse initializers */
	for (size_t i = 0; i < gp->n_input; i++) {
		Onnx__ValueInfoProto *vi = gp->input[i];
		if (!vi->name || !*vi->name) {
			ir_diag_err(d, IR_ERR, "graph '%s': input %zu has no name", gname(g), i);
			goto fail;
		}
		snprintf(what, sizeof(what), "graph '%s' input '%s'", gname(g), vi->name);
		if (ir_value_find(g, vi->name)) {
			ir_diag_err(d, IR_ERR, "%s is listed twice", what);
			goto fail;
		}
		struct ir_value *v = ir_value_new(g, vi->name, d);
		if (!v || set_vinfo(L, v, vi, what))
			goto fail;
		v->is_input = true;   /* ir_graph_add_input, in the list sized above */
		g->inputs[g->n_inputs++] = v;
	}
	for (size_t i = 0; i < gp->n_initializer; i++) {
		Onnx__TensorProto *tp = gp->initializer[i];
		if (!tp->name || !*tp->name) {
			ir_diag_err(d, IR_ERR, "graph '%s': initializer %zu has no name", gname(g), i);
			goto fail;
		}
		snprintf(what, sizeof(what), "initializer '%s'", tp->name);
		struct ir_value *v = ir_value_find(g, tp->name);
		if (v && (!v->is_input || v->init)) {
			ir_diag_err(d, IR_ERR, "%s is defined twice", what);
			goto fail;
		}
		if (!v && !(v = ir_value_new(g, tp->name, d)))
			goto fail;
		struct ir_tensor *t = conv_tensor(L, tp, what);
		if (!t)
			goto fail;
		free(t->name);   /* the value's name is the tensor's */
		t->name = NULL;
		v->init = t;   /* ir_value_set_init (v has no producer yet), in the list sized above */
		g->inits[g->n_inits++] = v;
		if (!v->has_type_proto) {
			struct ir_dim dims[IR_MAX_RANK];
			for (int k = 0; k < t->rank; k++)
				dims[k] = (struct ir_dim){ .kind = IR_DIM_VALUE, .value = t->dims[k] };
			if (ir_type_set_tensor(&v->type, t->dtype, t->rank, dims))
				goto fail_nomem;
		}
	}
	for (size_t i = 0; i < gp->n_sparse_initializer; i++) {
		Onnx__SparseTensorProto *sp = gp->sparse_initializer[i];
		const char *nm = sp->values ? sp->values->name : NULL;
		if (!nm || !*nm) {
			ir_diag_err(d, IR_ERR, "graph '%s': sparse initializer %zu has no name (values.name)", gname(g), i);
			goto fail;
		}
		snprintf(what, sizeof(what), "sparse initializer '%s'", nm);
		struct ir_value *v = ir_value_find(g, nm);
		if (v && (!v->is_input || v->init || v->sparse_init)) {
			ir_diag_err(d, IR_ERR, "%s is defined twice", what);
			goto fail;
		}
		if (!v && !(v = ir_value_new(g, nm, d)))
			goto fail;
		if (!(v->sparse_init = conv_sparse(L, sp, what)))
			goto fail;
		g->sparse_inits[g->n_sparse_inits++] = v;
		if (!v->has_type_proto) {
			struct ir_dim dims[IR_MAX_RANK];
			const struct ir_sparse *s = v->sparse_init;
			for (int k = 0; k < s->rank; k++)
				dims[k] = (struct ir_dim){ .kind = IR_DIM_VALUE, .value = s->dims[k] };
			if (ir_type_set_tensor(&v->type, s->values->dtype, s->rank, dims))
				goto fail_nomem;
			v->type.kind = IR_TYPE_SPARSE_TENSOR;
		}
	}

	/* 2. nodes and the values they define */
	struct ir_node **nodes = ir_alloc_array(gp->n_node, sizeof(*nodes));
	if (!nodes)
		goto fail_nomem;
	for (size_t i = 0; i < gp->n_node; i++) {
		Onnx__NodeProto *np = gp->node[i];
		if (!np->op_type || !*np->op_type) {
			ir_diag_err(d, IR_ERR, "graph '%s': node %zu ('%s') has no op_type", gname(g), i,
				    np->name ? np->name : "");
			goto fail_nodes;
		}
		if (np->n_input > INT32_MAX / 2 || np->n_output > INT32_MAX / 2)
			goto fail_nomem_nodes;
		struct ir_node *n = ir_node_new(g, np->op_type, np->domain, np->name, (int)np->n_input,
						(int)np->n_output, NULL);
		if (!n)
			goto fail_nomem_nodes;
		nodes[i] = n;
		free(n->domain);
		n->domain = steal(&np->domain);
		n->overload = steal(&np->overload);
		n->doc = steal(&np->doc_string);
		if (conv_kv(L, &n->meta, &n->n_meta, np->metadata_props, np->n_metadata_props) ||
		    pack_list(L, &n->devcfg, &n->n_devcfg, (void **)np->device_configurations, np->n_device_configurations))
			goto fail_nodes;
		for (size_t k = 0; k < np->n_output; k++) {
			const char *on = np->output[k];
			if (!on || !*on)
				continue;
			struct ir_value *prev = ir_value_find(g, on);
			if (prev) {
				char a[300], b[300] = "a graph input or initializer";
				if (prev->producer)
					node_desc(prev->producer, b, sizeof(b));
				ir_diag_err(d, IR_ERR, "value '%s' is defined twice: by %s and by %s", on, b,
					    node_desc(n, a, sizeof(a)));
				goto fail_nodes;
			}
			struct ir_value *v = ir_value_new(g, on, d);
			if (!v || ir_node_set_output(n, (int)k, v, d))
				goto fail_nodes;
		}
	}

	/* 3. attributes (subgraphs) and inputs */
	for (size_t i = 0; i < gp->n_node; i++) {
		Onnx__NodeProto *np = gp->node[i];
		struct ir_node *n = nodes[i];
		char where[300];
		node_desc(n, where, sizeof(where));
		if (np->n_attribute) {
			if (!(n->attrs = ir_alloc_array(np->n_attribute, sizeof(*n->attrs))))
				goto fail_nomem_nodes;
			/* names seen so far; a map past a few, so that 10^6 attributes stay linear */
			struct ir_map *seen = NULL;
			if (np->n_attribute > 8 && !(seen = ir_map_new(np->n_attribute)))
				goto fail_nomem_nodes;
			for (size_t k = 0; k < np->n_attribute; k++) {
				const char *an = np->attribute[k]->name;
				bool dup = false;
				if (an && seen)
					dup = ir_map_get(seen, an) != NULL;
				for (int j = 0; an && !seen && !dup && j < n->n_attrs; j++)
					dup = strcmp(n->attrs[j].name, an) == 0;
				if (dup) {
					ir_diag_err(d, IR_ERR, "%s: attribute '%s' is given twice", where, an);
					ir_map_free(seen);
					goto fail_nodes;
				}
				int rc = conv_attr(L, &n->attrs[k], np->attribute[k], g, depth, where);
				n->n_attrs++;
				if (!rc && seen && ir_map_put(seen, n->attrs[k].name, &n->attrs[k]))
					rc = nomem(L);
				if (rc) {
					ir_map_free(seen);
					goto fail_nodes;
				}
			}
			ir_map_free(seen);
			if (ir_node_update_implicit(n, d))
				goto fail_nodes;
		}
		for (size_t k = 0; k < np->n_input; k++) {
			const char *in = np->input[k];
			if (!in || !*in)
				continue;
			struct ir_value *v = ir_value_find(g, in);
			if (!v && parent) {
				struct ir_diag tmp;
				ir_diag_init(&tmp);
				v = ir_graph_capture(g, in, &tmp);
				ir_diag_clear(&tmp);
			}
			if (!v) {
				ir_diag_err(d, IR_ERR, "%s: input %zu '%s' is not defined", where, k, in);
				goto fail_nodes;
			}
			if (ir_node_set_input(n, (int)k, v))
				goto fail_nomem_nodes;
		}
	}
	free(nodes);
	nodes = NULL;

	/* 4. outputs */
	for (size_t i = 0; i < gp->n_output; i++) {
		Onnx__ValueInfoProto *vi = gp->output[i];
		if (!vi->name || !*vi->name) {
			ir_diag_err(d, IR_ERR, "graph '%s': output %zu has no name", gname(g), i);
			goto fail;
		}
		snprintf(what, sizeof(what), "graph '%s' output '%s'", gname(g), vi->name);
		struct ir_value *v = ir_value_find(g, vi->name);
		if (!v && parent) {
			struct ir_diag tmp;
			ir_diag_init(&tmp);
			v = ir_graph_capture(g, vi->name, &tmp);
			ir_diag_clear(&tmp);
		}
		if (!v || (!v->producer && !v->is_input && !v->init && !v->sparse_init && !v->outer)) {
			ir_diag_err(d, IR_ERR, "%s is not defined", what);
			goto fail;
		}
		if (set_vinfo(L, v, vi, what))
			goto fail;
		v->is_output = true;   /* ir_graph_add_output, in the list sized above */
		g->outputs[g->n_outputs++] = v;
	}

	/* 5. value_info */
	int order = 0;
	for (size_t i = 0; i < gp->n_value_info; i++) {
		Onnx__ValueInfoProto *vi = gp->value_info[i];
		if (!vi->name || !*vi->name) {
			ir_diag_err(d, IR_ERR, "graph '%s': value_info %zu has no name", gname(g), i);
			goto fail;
		}
		snprintf(what, sizeof(what), "graph '%s' value_info '%s'", gname(g), vi->name);
		struct ir_value *v = ir_value_find(g, vi->name);
		if (v && v->has_vinfo) {
			ir_diag_warn(d, "%s is listed twice; the second entry is ignored", what);
			continue;
		}
		if (!v && !(v = ir_value_new(g, vi->name, d)))   /* describes nothing defined: kept as is */
			goto fail;
		bool had = v->has_type_proto;
		v->has_type_proto = false;   /* value_info's own type wins over a derived one */
		if (v->is_input || v->is_output)
			v->has_type_proto = had;
		if (set_vinfo(L, v, vi, what))
			goto fail;
		if (v->is_input || v->is_output)
			v->has_type_proto = had;
		v->has_vinfo = true;
		v->vinfo_order = order++;
	}

	/* 6. things kept verbatim */
	if (pack_list(L, &g->qannot, &g->n_qannot, (void **)gp->quantization_annotation, gp->n_quantization_annotation))
		goto fail;

	/* 7. order */
	{
		struct ir_node *first = g->first;
		if (ir_graph_toposort(g, d)) {
			ir_diag_prefix(d, "graph '%s'", gname(g));
			goto fail;
		}
		bool moved = false;
		struct ir_node *n = g->first;
		for (size_t i = 0; n && i < gp->n_node; i++, n = n->next)
			moved |= n->id != (int)i;
		if (moved || first != g->first)
			L->reordered = true;
	}
	return g;

fail_nomem_nodes:
	nomem(L);
fail_nodes:
	free(nodes);
	goto fail;
fail_nomem:
	nomem(L);
fail:
	ir_graph_free(g);
	return NULL;
}

static int conv_opsets(struct loader *L, struct ir_opset **out, size_t *n_out,
		       Onnx__OperatorSetIdProto **ops, size_t n)
{
	*out = NULL;
	*n_out = 0;
	if (!n)
		return 0;
	if (!(*out = ir_alloc_array(n, sizeof(**out))))
		return nomem(L);
	for (size_t i = 0; i < n; i++) {
		(*out)[i].domain = steal(&ops[i]->domain);
		(*out)[i].version = ops[i]->version;
		(*out)[i].has_version = ops[i]->has_version;
	}
	*n_out = n;
	return 0;
}

static int conv_function(struct loader *L, struct ir_function *f, Onnx__FunctionProto *fp)
{
	struct ir_diag *d = L->d;
	char what[300];
	snprintf(what, sizeof(what), "function '%s'", fp->name ? fp->name : "");
	if (!fp->name || !*fp->name)
		return ir_diag_err(d, IR_ERR, "a function has no name");
	f->name = steal(&fp->name);
	f->domain = steal(&fp->domain);
	f->overload = steal(&fp->overload);
	f->doc = steal(&fp->doc_string);
	if (conv_opsets(L, &f->opsets, &f->n_opsets, fp->opset_import, fp->n_opset_import) ||
	    conv_kv(L, &f->meta, &f->n_meta, fp->metadata_props, fp->n_metadata_props))
		return IR_ERR;
	if (fp->n_attribute) {
		if (!(f->attr_names = ir_alloc_array(fp->n_attribute, sizeof(char *))))
			return nomem(L);
		for (size_t i = 0; i < fp->n_attribute; i++)
			f->attr_names[f->n_attr_names++] = steal(&fp->attribute[i]);
	}
	if (fp->n_attribute_proto) {
		if (!(f->attr_defaults = ir_alloc_array(fp->n_attribute_proto, sizeof(struct ir_attr))))
			return nomem(L);
		for (size_t i = 0; i < fp->n_attribute_proto; i++) {
			int rc = conv_attr(L, &f->attr_defaults[i], fp->attribute_proto[i], NULL, 0, what);
			f->n_attr_defaults++;
			if (rc)
				return rc;
		}
	}
	/* The body is a graph whose inputs/outputs are the formal parameters. */
	Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
	Onnx__ValueInfoProto *ins = NULL, *outs = NULL;
	Onnx__ValueInfoProto **inp = NULL, **outp = NULL;
	int rc = IR_ENOMEM;
	if ((fp->n_input && (!(ins = ir_alloc_array(fp->n_input, sizeof(*ins))) ||
			     !(inp = ir_alloc_array(fp->n_input, sizeof(*inp))))) ||
	    (fp->n_output && (!(outs = ir_alloc_array(fp->n_output, sizeof(*outs))) ||
			      !(outp = ir_alloc_array(fp->n_output, sizeof(*outp))))))
		goto out;
	for (size_t i = 0; i < fp->n_input; i++) {
		Onnx__ValueInfoProto init = ONNX__VALUE_INFO_PROTO__INIT;
		ins[i] = init;
		ins[i].name = fp->input[i];
		inp[i] = &ins[i];
	}
	for (size_t i = 0; i < fp->n_output; i++) {
		Onnx__ValueInfoProto init = ONNX__VALUE_INFO_PROTO__INIT;
		outs[i] = init;
		outs[i].name = fp->output[i];
		outp[i] = &outs[i];
	}
	gp.n_input = fp->n_input;
	gp.input = inp;
	gp.n_output = fp->n_output;
	gp.output = outp;
	gp.n_node = fp->n_node;
	gp.node = fp->node;
	gp.n_value_info = fp->n_value_info;
	gp.value_info = fp->value_info;
	f->body = build_graph(L, &gp, NULL, 1, true);
	rc = f->body ? 0 : IR_ERR;
	if (rc)
		ir_diag_prefix(d, "%s", what);
out:
	free(ins);
	free(inp);
	free(outs);
	free(outp);
	if (rc == IR_ENOMEM && !(d && d->error))
		nomem(L);
	return rc;
}

static struct ir_model *load_bytes(struct loader *L, const uint8_t *data, size_t size)
{
	struct ir_diag *d = L->d;
	int wire_depth = 3 * L->max_depth + 24;
	if (wire_prepare(data, size, &onnx__model_proto__descriptor, HOLE_MIN, wire_depth, &L->wire, d))
		return NULL;
	if (!(L->hole_used = calloc(L->wire.n_holes + 1, 1))) {
		nomem(L);
		return NULL;
	}
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, L->wire.len, L->wire.buf);
	/* the rewritten copy is no longer needed; raw_data markers were copied out */
	free(L->wire.buf);
	L->wire.buf = NULL;
	if (!mp) {
		ir_diag_err(d, IR_ERR, "not an ONNX model: the protobuf does not match ModelProto");
		return NULL;
	}
	struct ir_model *m = ir_model_new();
	if (!m) {
		nomem(L);
		goto out;
	}
	m->ir_version = mp->ir_version;
	m->has_ir_version = mp->has_ir_version;
	m->model_version = mp->model_version;
	m->has_model_version = mp->has_model_version;
	m->producer_name = steal(&mp->producer_name);
	m->producer_version = steal(&mp->producer_version);
	m->domain = steal(&mp->domain);
	m->doc = steal(&mp->doc_string);
	if (conv_opsets(L, &m->opsets, &m->n_opsets, mp->opset_import, mp->n_opset_import) ||
	    conv_kv(L, &m->meta, &m->n_meta, mp->metadata_props, mp->n_metadata_props) ||
	    pack_list(L, &m->training, &m->n_training, (void **)mp->training_info, mp->n_training_info) ||
	    pack_list(L, &m->devconfig, &m->n_devconfig, (void **)mp->configuration, mp->n_configuration))
		goto fail;
	if (!mp->graph) {
		ir_diag_err(d, IR_ERR, "not an ONNX model: it has no graph");
		goto fail;
	}
	if (mp->n_functions) {
		if (!(m->functions = ir_alloc_array(mp->n_functions, sizeof(*m->functions)))) {
			nomem(L);
			goto fail;
		}
		for (size_t i = 0; i < mp->n_functions; i++) {
			int rc = conv_function(L, &m->functions[i], mp->functions[i]);
			m->n_functions++;
			if (rc)
				goto fail;
		}
	}
	if (!(m->graph = build_graph(L, mp->graph, NULL, 0, false)))
		goto fail;
	m->had_external = L->had_external;
	if (L->reordered)
		ir_diag_warn(d, "nodes were not in topological order: reordered");
	goto out;
fail:
	ir_model_free(m);
	m = NULL;
out:
	protobuf_c_message_free_unpacked(&mp->base, NULL);
	return m;
}

static void loader_done(struct loader *L)
{
	wire_out_free(&L->wire);
	free(L->hole_used);
	ext_cache_clear(&L->ext);
	ir_mapping_unref(L->map);
}

static int default_depth(const struct ir_load_opts *o)
{
	return o && o->max_depth > 0 ? o->max_depth : IR_DEFAULT_MAX_DEPTH;
}

/* A failed load leaves one message: the warnings it added before failing go. */
static void fail_diag(struct ir_diag *d, size_t n_warnings, size_t dropped, const char *name)
{
	if (!d)
		return;
	ir_diag_prefix(d, "%s", name);
	for (size_t i = n_warnings; i < d->n_warnings; i++)
		free(d->warnings[i]);
	if (d->n_warnings > n_warnings)
		d->n_warnings = n_warnings;
	d->dropped = dropped;
}

struct ir_model *ir_model_load(const char *path, const struct ir_load_opts *opts, struct ir_diag *d)
{
	struct loader L = { .max_depth = default_depth(opts), .d = d };
	L.ext.dirfd = -1;
	struct ir_model *m = NULL;
	size_t n_warnings = d ? d->n_warnings : 0, dropped = d ? d->dropped : 0;
	char eb[128];
	struct stat st;
	int fd = -1;
	/* looked at before it is opened: opening a fifo or a device could block or act */
	if (stat(path, &st) < 0) {
		ir_diag_err(d, IR_EIO, "cannot open: %s", ir_errstr(errno, eb, sizeof(eb)));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		ir_diag_err(d, IR_ERR, "cannot load: it is a folder");
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ir_diag_err(d, IR_ERR, "cannot load: not a regular file");
		goto out;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ir_diag_err(d, IR_EIO, "cannot open: %s", ir_errstr(errno, eb, sizeof(eb)));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ir_diag_err(d, IR_EIO, "cannot stat: %s", ir_errstr(errno, eb, sizeof(eb)));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {   /* replaced since the stat above */
		ir_diag_err(d, IR_ERR, "cannot load: not a regular file");
		goto out;
	}
	if (st.st_size == 0) {
		ir_diag_err(d, IR_ERR, "cannot load: the file is empty");
		goto out;
	}
	L.map = ir_mapping_open(fd, path, (size_t)st.st_size,
				(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, d);
	fd = -1;   /* the mapping owns it */
	if (!L.map)
		goto out;
	if (!(opts && opts->no_external)) {
		char *dir = ir_strdup(path);
		if (!dir) {
			ir_diag_err(d, IR_ENOMEM, "out of memory");
			goto out;
		}
		char *slash = strrchr(dir, '/');
		if (slash == dir)
			dir[1] = 0;
		else if (slash)
			*slash = 0;
		L.ext.dirfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		free(dir);
	}
	m = load_bytes(&L, L.map->addr, L.map->size);
	if (m) {
		m->path = ir_strdup(path);
		m->file_dev = (uint64_t)st.st_dev;
		m->file_ino = (uint64_t)st.st_ino;
		m->file_size = (uint64_t)st.st_size;
		if (!m->path) {
			ir_model_free(m);
			m = NULL;
			ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
	}
out:
	if (fd >= 0)
		close(fd);
	if (!m)
		fail_diag(d, n_warnings, dropped, path);
	loader_done(&L);
	return m;
}

struct ir_model *ir_model_load_mem(const void *data, size_t size, const char *name,
				   const char *dir, const struct ir_load_opts *opts, struct ir_diag *d)
{
	struct loader L = { .max_depth = default_depth(opts), .d = d };
	L.ext.dirfd = -1;
	struct ir_model *m = NULL;
	size_t n_warnings = d ? d->n_warnings : 0, dropped = d ? d->dropped : 0;
	if (!name)
		name = "<memory>";
	if (!size || !data) {
		ir_diag_err(d, IR_ERR, "the model is empty");
		goto out;
	}
	/* a private copy that big tensors can point into */
	if (!(L.map = calloc(1, sizeof(*L.map))) || !(L.map->addr = malloc(size)) ||
	    !(L.map->path = ir_strdup(name))) {
		if (L.map)
			free(L.map->addr);
		free(L.map);
		L.map = NULL;
		ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(L.map->addr, data, size);
	L.map->refcount = 1;
	L.map->size = size;
	L.map->heap = true;
	L.map->fd = -1;
	if (dir && !(opts && opts->no_external))
		L.ext.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	m = load_bytes(&L, L.map->addr, size);
out:
	if (!m)
		fail_diag(d, n_warnings, dropped, name);
	loader_done(&L);
	return m;
}

/* --- test data files --- */

static int pb_seq(struct loader *L, Onnx__SequenceProto *sp, struct ir_pb_value *out, const char *name)
{
	char what[300];
	if (sp->n_sparse_tensor_values || sp->n_sequence_values || sp->n_map_values || sp->n_optional_values)
		return ir_diag_err(L->d, IR_ERR, "'%s': sequences of anything but tensors are not supported", name);
	out->kind = IR_PB_SEQUENCE;
	out->elem = 0;
	if (sp->n_tensor_values > (size_t)INT32_MAX)
		return ir_diag_err(L->d, IR_ERR, "'%s': too many sequence items", name);
	if (sp->n_tensor_values && !(out->items = calloc(sp->n_tensor_values, sizeof(*out->items))))
		return nomem(L);
	for (size_t i = 0; i < sp->n_tensor_values; i++) {
		snprintf(what, sizeof(what), "'%s' item %zu", name, i);
		if (!(out->items[i] = conv_tensor(L, sp->tensor_values[i], what)))
			return IR_ERR;
		out->n_items = (int)i + 1;
		out->elem = out->items[i]->dtype;
	}
	return 0;
}

int ir_pb_value_load(const void *data, size_t size, enum ir_type_kind want, const char *name,
		     struct ir_pb_value *out, struct ir_diag *d)
{
	struct loader L = { .max_depth = IR_DEFAULT_MAX_DEPTH, .d = d };
	L.ext.dirfd = -1;
	memset(out, 0, sizeof(*out));
	int rc = IR_ERR;
	if (!name)
		name = "<memory>";
	if (want == IR_TYPE_TENSOR || want == IR_TYPE_NONE) {
		Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, data);
		if (!tp)
			return ir_diag_err(d, IR_ERR, "'%s' is not a TensorProto", name);
		char what[300];
		snprintf(what, sizeof(what), "'%s'", name);
		out->t = conv_tensor(&L, tp, what);
		if (out->t && tp->name && !(out->name = ir_strdup(tp->name))) {
			ir_tensor_unref(out->t);
			out->t = NULL;
			nomem(&L);
		}
		onnx__tensor_proto__free_unpacked(tp, NULL);
		if (out->t) {
			out->kind = IR_PB_TENSOR;
			rc = 0;
		}
	} else if (want == IR_TYPE_SEQUENCE) {
		Onnx__SequenceProto *sp = onnx__sequence_proto__unpack(NULL, size, data);
		if (!sp)
			return ir_diag_err(d, IR_ERR, "'%s' is not a SequenceProto", name);
		rc = pb_seq(&L, sp, out, name);
		if (!rc && sp->name && !(out->name = ir_strdup(sp->name)))
			rc = nomem(&L);
		onnx__sequence_proto__free_unpacked(sp, NULL);
	} else if (want == IR_TYPE_OPTIONAL) {
		Onnx__OptionalProto *op = onnx__optional_proto__unpack(NULL, size, data);
		if (!op)
			return ir_diag_err(d, IR_ERR, "'%s' is not an OptionalProto", name);
		out->optional = true;
		if (op->tensor_value) {
			char what[300];
			snprintf(what, sizeof(what), "'%s'", name);
			out->t = conv_tensor(&L, op->tensor_value, what);
			if (out->t) {
				out->kind = IR_PB_TENSOR;
				rc = 0;
			}
		} else if (op->sequence_value) {
			rc = pb_seq(&L, op->sequence_value, out, name);
		} else if (op->sparse_tensor_value || op->has_map_value || op->optional_value) {
			rc = ir_diag_err(d, IR_ERR, "'%s': optionals of sparse tensors, maps or optionals are not supported", name);
		} else {
			out->kind = IR_PB_NONE;
			rc = 0;
		}
		onnx__optional_proto__free_unpacked(op, NULL);
	} else {
		return ir_diag_err(d, IR_ERR, "'%s': only tensors, sequences and optionals can be read", name);
	}
	loader_done(&L);
	if (rc)
		ir_pb_value_clear(out);
	return rc;
}

void ir_pb_value_clear(struct ir_pb_value *v)
{
	ir_tensor_unref(v->t);
	for (int i = 0; i < v->n_items; i++)
		ir_tensor_unref(v->items[i]);
	free(v->items);
	free(v->name);
	memset(v, 0, sizeof(*v));
}
