/*
 * save.c - IR -> ONNX file, written atomically.
 *
 * The protobuf-c messages are built in an arena and point at the IR's own
 * strings and tensor bytes (nothing is copied but the narrow typed
 * encodings); packing streams straight into a temporary file next to the
 * target, which is fsync'd and renamed over it, then the folder is fsync'd.
 */
#include "ir_private.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define TWO_GB ((uint64_t)2 << 30)
#define EXT_ALIGN 4096

/* ---- arena: every protobuf-c struct of one save ---- */

struct arena_block { struct arena_block *next; size_t used, size; max_align_t data[]; };
struct arena { struct arena_block *head; bool failed; };

static void *arena_alloc(struct arena *a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	if (!size)
		size = 16;
	struct arena_block *b = a->head;
	if (!b || b->size - b->used < size) {
		size_t bs = size > 65536 ? size : 65536;
		b = malloc(sizeof(*b) + bs);
		if (!b) {
			a->failed = true;
			return NULL;
		}
		b->next = a->head;
		b->used = 0;
		b->size = bs;
		a->head = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += size;
	memset(p, 0, size);
	return p;
}

static void *arena_array(struct arena *a, size_t n, size_t size)
{
	if (n && size > SIZE_MAX / n) {
		a->failed = true;
		return NULL;
	}
	return arena_alloc(a, n * size);
}

static void arena_free(struct arena *a)
{
	for (struct arena_block *b = a->head, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	a->head = NULL;
}

/* ---- what goes external ---- */

struct ext_item { const struct ir_tensor *t; uint64_t offset; };

struct saver {
	struct arena a;
	/* messages unpacked from verbatim bytes, freed after packing */
	ProtobufCMessage **unpacked;
	size_t n_unpacked, cap_unpacked;
	/* external data */
	bool external;
	size_t threshold;
	const char *data_name;   /* location written into the model */
	struct ext_item *items;
	size_t n_items, cap_items;
	uint64_t ext_size;
	struct ir_diag *d;
	bool bad;                /* a verbatim message did not unpack */
	/* files the tensors are mapped from: their bytes are copied file to file */
	const struct ir_mapping **maps;
	size_t n_maps, cap_maps;
};

static void note_mapping(struct saver *S, const struct ir_tensor *t)
{
	const struct ir_mapping *m = t->buf ? t->buf->map : NULL;
	if (!m || m->heap || m->fd < 0)
		return;
	for (size_t i = 0; i < S->n_maps; i++)
		if (S->maps[i] == m)
			return;
	if (ir_grow(&S->maps, &S->cap_maps, S->n_maps + 1, sizeof(*S->maps)) == 0)
		S->maps[S->n_maps++] = m;
}

static void *new_msg(struct saver *S, size_t size, const void *init)
{
	void *p = arena_alloc(&S->a, size);
	if (p)
		memcpy(p, init, size);
	return p;
}

/* A new protobuf-c message of type T, initialised with its INIT macro. */
#define NEW(S, T, INIT) ((T *)new_msg((S), sizeof(T), &(T)INIT))

static char *kv_str(const char *s)
{
	return (char *)s;
}

static Onnx__StringStringEntryProto **conv_kv(struct saver *S, const struct ir_kv *kv, size_t n)
{
	if (!n)
		return NULL;
	Onnx__StringStringEntryProto **out = arena_array(&S->a, n, sizeof(*out));
	for (size_t i = 0; out && i < n; i++) {
		out[i] = NEW(S, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
		if (!out[i])
			return NULL;
		out[i]->key = kv_str(kv[i].key);
		out[i]->value = kv_str(kv[i].value);
	}
	return out;
}

static void **unpack_list(struct saver *S, const ProtobufCMessageDescriptor *desc,
			  const struct ir_bytes *b, size_t n)
{
	if (!n)
		return NULL;
	void **out = arena_array(&S->a, n, sizeof(*out));
	for (size_t i = 0; out && i < n; i++) {
		ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, b[i].len, (const uint8_t *)b[i].data);
		if (!m || ir_grow(&S->unpacked, &S->cap_unpacked, S->n_unpacked + 1, sizeof(*S->unpacked))) {
			if (m)
				protobuf_c_message_free_unpacked(m, NULL);
			S->bad = true;
			return NULL;
		}
		S->unpacked[S->n_unpacked++] = m;
		out[i] = m;
	}
	return out;
}

static bool goes_external(const struct saver *S, const struct ir_tensor *t)
{
	return S->external && t->dtype != IR_STRING && t->nbytes && t->nbytes >= S->threshold;
}

static Onnx__TensorProto *conv_tensor(struct saver *S, const struct ir_tensor *t, const char *name)
{
	Onnx__TensorProto *tp = NEW(S, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
	if (!tp)
		return NULL;
	tp->n_dims = (size_t)t->rank;
	tp->dims = t->dims;
	tp->has_data_type = 1;
	tp->data_type = t->dtype;
	tp->name = (char *)(name ? name : t->name);
	tp->doc_string = t->doc;
	tp->metadata_props = conv_kv(S, t->meta, t->n_meta);
	tp->n_metadata_props = t->n_meta;
	if (t->has_data_location) {
		tp->has_data_location = 1;
		tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
	}
	const uint8_t *data = ir_tensor_data(t);
	note_mapping(S, t);
	if (goes_external(S, t)) {
		if (ir_grow(&S->items, &S->cap_items, S->n_items + 1, sizeof(*S->items))) {
			S->a.failed = true;
			return NULL;
		}
		uint64_t off = (S->ext_size + EXT_ALIGN - 1) / EXT_ALIGN * EXT_ALIGN;
		S->items[S->n_items++] = (struct ext_item){ t, off };
		S->ext_size = off + t->nbytes;
		char *offs = arena_alloc(&S->a, 24), *lens = arena_alloc(&S->a, 24);
		if (!offs || !lens)
			return NULL;
		snprintf(offs, 24, "%" PRIu64, off);
		snprintf(lens, 24, "%zu", t->nbytes);
		struct ir_kv kv[3] = { { "location", (char *)S->data_name }, { "offset", offs }, { "length", lens } };
		tp->external_data = conv_kv(S, kv, 3);
		tp->n_external_data = 3;
		tp->has_data_location = 1;
		tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
		return tp;
	}
	if (t->dtype == IR_STRING) {
		tp->n_string_data = (size_t)t->numel;
		tp->string_data = arena_array(&S->a, tp->n_string_data, sizeof(ProtobufCBinaryData));
		for (size_t i = 0; tp->string_data && i < tp->n_string_data; i++) {
			tp->string_data[i].len = t->strings[i].len;
			tp->string_data[i].data = (uint8_t *)t->strings[i].data;
		}
		return tp;
	}
	if (t->enc != IR_ENC_TYPED) {
		tp->has_raw_data = 1;
		tp->raw_data.len = t->nbytes;
		tp->raw_data.data = (uint8_t *)data;
		return tp;
	}
	/* the typed field the tensor came in */
	uint64_t n = t->numel;
	if (!t->nbytes)
		return tp;
	switch (t->dtype) {
	case IR_FLOAT: case IR_COMPLEX64:
		tp->n_float_data = t->nbytes / 4;
		tp->float_data = (float *)data;   /* aligned: typed data live in heap blocks */
		break;
	case IR_DOUBLE: case IR_COMPLEX128:
		tp->n_double_data = t->nbytes / 8;
		tp->double_data = (double *)data;
		break;
	case IR_INT64:
		tp->n_int64_data = (size_t)n;
		tp->int64_data = (int64_t *)data;
		break;
	case IR_UINT64:
		tp->n_uint64_data = (size_t)n;
		tp->uint64_data = (uint64_t *)data;
		break;
	case IR_UINT32:
		tp->n_uint64_data = (size_t)n;
		if ((tp->uint64_data = arena_array(&S->a, (size_t)n, 8)))
			for (uint64_t i = 0; i < n; i++) {
				uint32_t v;
				memcpy(&v, data + 4 * i, 4);
				tp->uint64_data[i] = v;
			}
		break;
	case IR_INT32:
		tp->n_int32_data = (size_t)n;
		tp->int32_data = (int32_t *)data;
		break;
	default: {   /* int32_data entries of 16, 8, 4 or 2 bits */
		int bits = ir_dtype_bits(t->dtype);
		size_t count = bits == 16 ? (size_t)n : t->nbytes;
		tp->n_int32_data = count;
		if ((tp->int32_data = arena_array(&S->a, count, 4)))
			for (size_t i = 0; i < count; i++) {
				if (bits == 16)
					tp->int32_data[i] = (int32_t)(data[2 * i] | (uint32_t)data[2 * i + 1] << 8);
				else if (t->dtype == IR_INT8)
					tp->int32_data[i] = (int8_t)data[i];
				else
					tp->int32_data[i] = data[i];
			}
		if (t->dtype == IR_INT16)
			for (size_t i = 0; tp->int32_data && i < count; i++)
				tp->int32_data[i] = (int16_t)tp->int32_data[i];
	}
	}
	return tp;
}

static Onnx__SparseTensorProto *conv_sparse(struct saver *S, const struct ir_sparse *s, const char *name)
{
	Onnx__SparseTensorProto *sp = NEW(S, Onnx__SparseTensorProto, ONNX__SPARSE_TENSOR_PROTO__INIT);
	if (!sp)
		return NULL;
	sp->values = conv_tensor(S, s->values, name);
	sp->indices = conv_tensor(S, s->indices, NULL);
	sp->n_dims = (size_t)s->rank;
	sp->dims = s->dims;
	return sp;
}

static Onnx__TypeProto *conv_type(struct saver *S, const struct ir_type *t);

static Onnx__TensorShapeProto *conv_shape(struct saver *S, const struct ir_type *t)
{
	if (t->rank < 0)
		return NULL;
	Onnx__TensorShapeProto *sh = NEW(S, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
	if (!sh)
		return NULL;
	sh->n_dim = (size_t)t->rank;
	sh->dim = arena_array(&S->a, sh->n_dim, sizeof(*sh->dim));
	for (int i = 0; sh->dim && i < t->rank; i++) {
		Onnx__TensorShapeProto__Dimension *dm =
			NEW(S, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
		if (!(sh->dim[i] = dm))
			return NULL;
		dm->denotation = t->dims[i].denotation;
		if (t->dims[i].kind == IR_DIM_VALUE) {
			dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			dm->dim_value = t->dims[i].value;
		} else if (t->dims[i].kind == IR_DIM_PARAM) {
			dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			dm->dim_param = t->dims[i].param;
		}
	}
	return sh;
}

static Onnx__TypeProto *conv_type(struct saver *S, const struct ir_type *t)
{
	Onnx__TypeProto *tp = NEW(S, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
	if (!tp)
		return NULL;
	tp->denotation = t->denotation;
	switch (t->kind) {
	case IR_TYPE_NONE:
		break;
	case IR_TYPE_TENSOR: {
		Onnx__TypeProto__Tensor *x = NEW(S, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
		if (!x)
			return NULL;
		x->has_elem_type = t->has_elem;
		x->elem_type = t->elem;
		x->shape = conv_shape(S, t);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
		tp->tensor_type = x;
		break;
	}
	case IR_TYPE_SPARSE_TENSOR: {
		Onnx__TypeProto__SparseTensor *x = NEW(S, Onnx__TypeProto__SparseTensor, ONNX__TYPE_PROTO__SPARSE_TENSOR__INIT);
		if (!x)
			return NULL;
		x->has_elem_type = t->has_elem;
		x->elem_type = t->elem;
		x->shape = conv_shape(S, t);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
		tp->sparse_tensor_type = x;
		break;
	}
	case IR_TYPE_SEQUENCE: {
		Onnx__TypeProto__Sequence *x = NEW(S, Onnx__TypeProto__Sequence, ONNX__TYPE_PROTO__SEQUENCE__INIT);
		if (!x)
			return NULL;
		x->elem_type = t->inner ? conv_type(S, t->inner) : NULL;
		tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
		tp->sequence_type = x;
		break;
	}
	case IR_TYPE_OPTIONAL: {
		Onnx__TypeProto__Optional *x = NEW(S, Onnx__TypeProto__Optional, ONNX__TYPE_PROTO__OPTIONAL__INIT);
		if (!x)
			return NULL;
		x->elem_type = t->inner ? conv_type(S, t->inner) : NULL;
		tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
		tp->optional_type = x;
		break;
	}
	case IR_TYPE_MAP: {
		Onnx__TypeProto__Map *x = NEW(S, Onnx__TypeProto__Map, ONNX__TYPE_PROTO__MAP__INIT);
		if (!x)
			return NULL;
		x->has_key_type = t->has_elem;
		x->key_type = t->key;
		x->value_type = t->inner ? conv_type(S, t->inner) : NULL;
		tp->value_case = ONNX__TYPE_PROTO__VALUE_MAP_TYPE;
		tp->map_type = x;
		break;
	}
	}
	return tp;
}

static Onnx__ValueInfoProto *conv_vinfo(struct saver *S, const struct ir_value *v)
{
	Onnx__ValueInfoProto *vi = NEW(S, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
	if (!vi)
		return NULL;
	vi->name = v->name;
	if (v->has_type_proto)
		vi->type = conv_type(S, &v->type);
	vi->doc_string = v->vi_doc;
	vi->metadata_props = conv_kv(S, v->vi_meta, v->n_vi_meta);
	vi->n_metadata_props = v->n_vi_meta;
	return vi;
}

static Onnx__GraphProto *conv_graph(struct saver *S, const struct ir_graph *g);

static ProtobufCBinaryData bin(const struct ir_bytes *b)
{
	ProtobufCBinaryData r = { b->len, (uint8_t *)b->data };
	return r;
}

static Onnx__AttributeProto *conv_attr(struct saver *S, const struct ir_attr *a)
{
	Onnx__AttributeProto *ap = NEW(S, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
	if (!ap)
		return NULL;
	ap->name = a->name;
	ap->ref_attr_name = a->ref_attr_name;
	ap->doc_string = a->doc;
	if (a->has_type) {
		ap->has_type = 1;
		ap->type = (Onnx__AttributeProto__AttributeType)a->type;
	}
	if (a->ref_attr_name)
		return ap;
	switch (a->type) {
	case IR_ATTR_FLOAT: ap->has_f = 1; ap->f = a->f; break;
	case IR_ATTR_INT: ap->has_i = 1; ap->i = a->i; break;
	case IR_ATTR_STRING: ap->has_s = 1; ap->s = bin(&a->s); break;
	case IR_ATTR_TENSOR: ap->t = conv_tensor(S, a->t, NULL); break;
	case IR_ATTR_GRAPH: ap->g = conv_graph(S, a->g); break;
	case IR_ATTR_SPARSE_TENSOR: ap->sparse_tensor = conv_sparse(S, a->sp, NULL); break;
	case IR_ATTR_TYPE_PROTO: ap->tp = conv_type(S, a->tp); break;
	case IR_ATTR_FLOATS: ap->n_floats = a->n; ap->floats = a->floats; break;
	case IR_ATTR_INTS: ap->n_ints = a->n; ap->ints = a->ints; break;
	case IR_ATTR_STRINGS:
		ap->n_strings = a->n;
		ap->strings = arena_array(&S->a, a->n, sizeof(*ap->strings));
		for (size_t i = 0; ap->strings && i < a->n; i++)
			ap->strings[i] = bin(&a->strings[i]);
		break;
	case IR_ATTR_TENSORS:
		ap->n_tensors = a->n;
		ap->tensors = arena_array(&S->a, a->n, sizeof(*ap->tensors));
		for (size_t i = 0; ap->tensors && i < a->n; i++)
			ap->tensors[i] = conv_tensor(S, a->tensors[i], NULL);
		break;
	case IR_ATTR_GRAPHS:
		ap->n_graphs = a->n;
		ap->graphs = arena_array(&S->a, a->n, sizeof(*ap->graphs));
		for (size_t i = 0; ap->graphs && i < a->n; i++)
			ap->graphs[i] = conv_graph(S, a->graphs[i]);
		break;
	case IR_ATTR_SPARSE_TENSORS:
		ap->n_sparse_tensors = a->n;
		ap->sparse_tensors = arena_array(&S->a, a->n, sizeof(*ap->sparse_tensors));
		for (size_t i = 0; ap->sparse_tensors && i < a->n; i++)
			ap->sparse_tensors[i] = conv_sparse(S, a->sparses[i], NULL);
		break;
	case IR_ATTR_TYPE_PROTOS:
		ap->n_type_protos = a->n;
		ap->type_protos = arena_array(&S->a, a->n, sizeof(*ap->type_protos));
		for (size_t i = 0; ap->type_protos && i < a->n; i++)
			ap->type_protos[i] = conv_type(S, &a->tps[i]);
		break;
	default:
		break;
	}
	return ap;
}

static char **value_names(struct saver *S, struct ir_value *const *vals, int n)
{
	char **out = arena_array(&S->a, (size_t)n, sizeof(char *));
	for (int i = 0; out && i < n; i++)
		out[i] = vals[i] ? vals[i]->name : (char *)"";
	return out;
}

static Onnx__NodeProto *conv_node(struct saver *S, const struct ir_node *n)
{
	Onnx__NodeProto *np = NEW(S, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
	if (!np)
		return NULL;
	np->n_input = (size_t)n->n_inputs;
	np->input = value_names(S, n->inputs, n->n_inputs);
	np->n_output = (size_t)n->n_outputs;
	np->output = value_names(S, n->outputs, n->n_outputs);
	np->name = n->name && *n->name ? n->name : NULL;
	np->op_type = n->op_type;
	np->domain = n->domain;
	np->overload = n->overload;
	np->doc_string = n->doc;
	np->n_attribute = (size_t)n->n_attrs;
	np->attribute = arena_array(&S->a, np->n_attribute, sizeof(*np->attribute));
	for (int i = 0; np->attribute && i < n->n_attrs; i++)
		np->attribute[i] = conv_attr(S, &n->attrs[i]);
	np->metadata_props = conv_kv(S, n->meta, n->n_meta);
	np->n_metadata_props = n->n_meta;
	np->device_configurations = (Onnx__NodeDeviceConfigurationProto **)
		unpack_list(S, &onnx__node_device_configuration_proto__descriptor, n->devcfg, n->n_devcfg);
	np->n_device_configurations = n->n_devcfg;
	return np;
}

static int cmp_vinfo(const void *x, const void *y)
{
	const struct ir_value *a = *(struct ir_value *const *)x, *b = *(struct ir_value *const *)y;
	return (a->vinfo_order > b->vinfo_order) - (a->vinfo_order < b->vinfo_order);
}

static Onnx__ValueInfoProto **conv_value_info(struct saver *S, const struct ir_graph *g, size_t *count)
{
	size_t n = 0;
	for (size_t i = 0; i < g->n_values; i++)
		n += g->values[i]->has_vinfo;
	*count = n;
	if (!n)
		return NULL;
	struct ir_value **vs = arena_array(&S->a, n, sizeof(*vs));
	Onnx__ValueInfoProto **out = arena_array(&S->a, n, sizeof(*out));
	if (!vs || !out)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < g->n_values; i++)
		if (g->values[i]->has_vinfo)
			vs[k++] = g->values[i];
	qsort(vs, n, sizeof(*vs), cmp_vinfo);
	for (size_t i = 0; i < n; i++)
		out[i] = conv_vinfo(S, vs[i]);
	return out;
}

static Onnx__GraphProto *conv_graph(struct saver *S, const struct ir_graph *g)
{
	Onnx__GraphProto *gp = NEW(S, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
	if (!gp)
		return NULL;
	gp->name = g->name;
	gp->doc_string = g->doc;
	gp->n_node = (size_t)g->n_nodes;
	gp->node = arena_array(&S->a, gp->n_node, sizeof(*gp->node));
	size_t i = 0;
	ir_for_each_node(g, n)
		if (gp->node)
			gp->node[i++] = conv_node(S, n);
	gp->n_initializer = (size_t)g->n_inits;
	gp->initializer = arena_array(&S->a, gp->n_initializer, sizeof(*gp->initializer));
	for (int k = 0; gp->initializer && k < g->n_inits; k++)
		gp->initializer[k] = conv_tensor(S, g->inits[k]->init, g->inits[k]->name);
	gp->n_sparse_initializer = (size_t)g->n_sparse_inits;
	gp->sparse_initializer = arena_array(&S->a, gp->n_sparse_initializer, sizeof(*gp->sparse_initializer));
	for (int k = 0; gp->sparse_initializer && k < g->n_sparse_inits; k++)
		gp->sparse_initializer[k] = conv_sparse(S, g->sparse_inits[k]->sparse_init, g->sparse_inits[k]->name);
	gp->n_input = (size_t)g->n_inputs;
	gp->input = arena_array(&S->a, gp->n_input, sizeof(*gp->input));
	for (int k = 0; gp->input && k < g->n_inputs; k++)
		gp->input[k] = conv_vinfo(S, g->inputs[k]);
	gp->n_output = (size_t)g->n_outputs;
	gp->output = arena_array(&S->a, gp->n_output, sizeof(*gp->output));
	for (int k = 0; gp->output && k < g->n_outputs; k++)
		gp->output[k] = conv_vinfo(S, g->outputs[k]);
	gp->value_info = conv_value_info(S, g, &gp->n_value_info);
	gp->quantization_annotation = (Onnx__TensorAnnotation **)
		unpack_list(S, &onnx__tensor_annotation__descriptor, g->qannot, g->n_qannot);
	gp->n_quantization_annotation = g->n_qannot;
	gp->metadata_props = conv_kv(S, g->meta, g->n_meta);
	gp->n_metadata_props = g->n_meta;
	return gp;
}

static Onnx__OperatorSetIdProto **conv_opsets(struct saver *S, const struct ir_opset *o, size_t n)
{
	Onnx__OperatorSetIdProto **out = arena_array(&S->a, n, sizeof(*out));
	for (size_t i = 0; out && i < n; i++) {
		if (!(out[i] = NEW(S, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT)))
			return NULL;
		out[i]->domain = o[i].domain;
		out[i]->has_version = o[i].has_version;
		out[i]->version = o[i].version;
	}
	return out;
}

static Onnx__FunctionProto *conv_function(struct saver *S, const struct ir_function *f)
{
	Onnx__FunctionProto *fp = NEW(S, Onnx__FunctionProto, ONNX__FUNCTION_PROTO__INIT);
	if (!fp)
		return NULL;
	fp->name = f->name;
	fp->domain = f->domain;
	fp->overload = f->overload;
	fp->doc_string = f->doc;
	fp->n_attribute = f->n_attr_names;
	fp->attribute = f->attr_names;
	fp->n_attribute_proto = f->n_attr_defaults;
	fp->attribute_proto = arena_array(&S->a, f->n_attr_defaults, sizeof(*fp->attribute_proto));
	for (size_t i = 0; fp->attribute_proto && i < f->n_attr_defaults; i++)
		fp->attribute_proto[i] = conv_attr(S, &f->attr_defaults[i]);
	fp->n_opset_import = f->n_opsets;
	fp->opset_import = conv_opsets(S, f->opsets, f->n_opsets);
	fp->metadata_props = conv_kv(S, f->meta, f->n_meta);
	fp->n_metadata_props = f->n_meta;
	const struct ir_graph *b = f->body;
	if (b) {
		fp->n_input = (size_t)b->n_inputs;
		fp->input = value_names(S, b->inputs, b->n_inputs);
		fp->n_output = (size_t)b->n_outputs;
		fp->output = value_names(S, b->outputs, b->n_outputs);
		fp->n_node = (size_t)b->n_nodes;
		fp->node = arena_array(&S->a, fp->n_node, sizeof(*fp->node));
		size_t i = 0;
		ir_for_each_node(b, n)
			if (fp->node)
				fp->node[i++] = conv_node(S, n);
		fp->value_info = conv_value_info(S, b, &fp->n_value_info);
	}
	return fp;
}

static Onnx__ModelProto *conv_model(struct saver *S, const struct ir_model *m)
{
	Onnx__ModelProto *mp = NEW(S, Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);
	if (!mp)
		return NULL;
	mp->has_ir_version = m->has_ir_version;
	mp->ir_version = m->ir_version;
	mp->producer_name = m->producer_name;
	mp->producer_version = m->producer_version;
	mp->domain = m->domain;
	mp->has_model_version = m->has_model_version;
	mp->model_version = m->model_version;
	mp->doc_string = m->doc;
	mp->n_opset_import = m->n_opsets;
	mp->opset_import = conv_opsets(S, m->opsets, m->n_opsets);
	mp->metadata_props = conv_kv(S, m->meta, m->n_meta);
	mp->n_metadata_props = m->n_meta;
	mp->graph = m->graph ? conv_graph(S, m->graph) : NULL;
	mp->n_functions = m->n_functions;
	mp->functions = arena_array(&S->a, m->n_functions, sizeof(*mp->functions));
	for (size_t i = 0; mp->functions && i < m->n_functions; i++)
		mp->functions[i] = conv_function(S, &m->functions[i]);
	mp->training_info = (Onnx__TrainingInfoProto **)
		unpack_list(S, &onnx__training_info_proto__descriptor, m->training, m->n_training);
	mp->n_training_info = m->n_training;
	mp->configuration = (Onnx__DeviceConfigurationProto **)
		unpack_list(S, &onnx__device_configuration_proto__descriptor, m->devconfig, m->n_devconfig);
	mp->n_configuration = m->n_devconfig;
	return mp;
}

/* ---- files ---- */

/* A ProtobufCBuffer that writes through a 1 MiB buffer to a file. */
struct file_buf {
	ProtobufCBuffer base;
	int fd;
	unsigned char *buf;
	size_t used, cap;
	int err;        /* errno of the first failed write */
	uint64_t total;
	const struct saver *S;
	/* progress over model + external data */
	const struct ir_save_opts *o;
	uint64_t done_before, grand_total, next_report;
};

static void report(struct file_buf *fb, uint64_t done)
{
	if (fb->o && fb->o->progress && done >= fb->next_report) {
		fb->o->progress(fb->o->progress_arg, done, fb->grand_total);
		fb->next_report = done + (64u << 20);
	}
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Writes `len` bytes at `data` to `fd`. Bytes that lie in a mapped file are
 * copied file to file with copy_file_range, so their pages never come into
 * this process (saving a 650 MB model then takes no 650 MB of memory);
 * where the kernel cannot do that, they are written from the mapping.
 * Progress is reported from `at` on. Returns 0 or an errno.
 */
static int put_bytes(struct file_buf *fb, int fd, const void *data, size_t len, uint64_t at)
{
	const struct ir_mapping *m = NULL;
	for (size_t i = 0; fb->S && i < fb->S->n_maps; i++) {
		const struct ir_mapping *x = fb->S->maps[i];
		if (len <= x->size && (const char *)data >= (const char *)x->addr &&
		    (size_t)((const char *)data - (const char *)x->addr) <= x->size - len) {
			m = x;
			break;
		}
	}
	const size_t chunk = 64u << 20;
	size_t done = 0;
	if (m) {
		loff_t off = (loff_t)((const char *)data - (const char *)m->addr);
		while (done < len) {
			if (ir_interrupted)
				return EINTR;
			size_t n = len - done < chunk ? len - done : chunk;
			ssize_t r = copy_file_range(m->fd, &off, fd, NULL, n, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;   /* not supported here (or the file shrank): write the rest */
			done += (size_t)r;
			report(fb, at + done);
		}
	}
	while (done < len) {
		if (ir_interrupted)
			return EINTR;
		size_t n = len - done < chunk ? len - done : chunk;
		int err = write_all(fd, (const char *)data + done, n);
		if (err)
			return err;
		done += n;
		report(fb, at + done);
	}
	return 0;
}

static void fb_flush(struct file_buf *fb)
{
	if (fb->used && !fb->err)
		fb->err = write_all(fb->fd, fb->buf, fb->used);
	fb->used = 0;
}

static void fb_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct file_buf *fb = (struct file_buf *)b;
	fb->total += len;
	if (!fb->err && ir_interrupted)
		fb->err = EINTR;   /* Ctrl-C: the rest is skipped, the temporary file removed */
	if (fb->err)
		return;
	if (len >= fb->cap) {   /* big tensors go straight from their buffer to the file */
		fb_flush(fb);
		if (!fb->err)
			fb->err = put_bytes(fb, fb->fd, data, len, fb->done_before + fb->total - len);
		return;
	}
	report(fb, fb->done_before + fb->total);
	if (!len)
		return;
	if (fb->used + len > fb->cap)
		fb_flush(fb);
	memcpy(fb->buf + fb->used, data, len);
	fb->used += len;
}

/* A temporary file next to `path`; its name goes into tmp (size >= strlen(path)+16). */
static int make_temp(const char *path, char *tmp, size_t size, mode_t mode, struct ir_diag *d)
{
	char eb[128];
	snprintf(tmp, size, "%s.tmp-XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0 && errno == ENOENT)
		return ir_diag_err(d, IR_EIO, "cannot save '%s': its folder does not exist", path);
	if (fd < 0)
		return ir_diag_err(d, IR_EIO, "cannot save '%s': cannot create a file in its folder: %s", path,
				   ir_errstr(errno, eb, sizeof(eb)));
	if (fchmod(fd, mode) < 0) {
		/* not fatal: the file keeps mkstemp's 0600 */
	}
	return fd;
}

/* Syncs and closes a written temporary file; on error removes it. */
static int close_temp(int fd, const char *tmp, const char *path, int err, struct ir_diag *d)
{
	char eb[128];
	if (!err && fsync(fd) < 0)
		err = errno;
	if (close(fd) < 0 && !err)
		err = errno;
	if (err) {
		unlink(tmp);
		if (err == EINTR)
			return ir_diag_err(d, IR_EINTR, "saving '%s' was interrupted: nothing was changed", path);
		if (err == EFBIG)
			return ir_diag_err(d, IR_EIO, "cannot write '%s': the file would be too large", path);
		return ir_diag_err(d, IR_EIO, "cannot write '%s': %s", path, ir_errstr(err, eb, sizeof(eb)));
	}
	return 0;
}

static void sync_folder(const char *path)
{
	char *dir = ir_strdup(path);
	if (!dir)
		return;
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = 0;
	else if (slash)
		*slash = 0;
	int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dir);
}

static mode_t file_mode(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0)
		return st.st_mode & 07777;
	mode_t um = umask(0);
	umask(um);
	return 0666 & ~um;
}

/* Writes the external data to a synced temporary file next to `path`,
 * named in *tmp_out (the caller renames or removes it). */
static int write_external(struct saver *S, const char *path, struct file_buf *prog, char **tmp_out,
			  struct ir_diag *d)
{
	size_t tl = strlen(path) + 32;
	char *tmp = malloc(tl);
	*tmp_out = NULL;
	if (!tmp)
		return ir_diag_err(d, IR_ENOMEM, "out of memory");
	int fd = make_temp(path, tmp, tl, file_mode(path), d);
	if (fd < 0) {
		free(tmp);
		return IR_EIO;
	}
	static const unsigned char zeros[EXT_ALIGN];
	uint64_t at = 0;
	int err = 0;
	for (size_t i = 0; i < S->n_items && !err; i++) {
		const struct ext_item *it = &S->items[i];
		while (at < it->offset && !err) {
			size_t pad = (size_t)(it->offset - at < EXT_ALIGN ? it->offset - at : EXT_ALIGN);
			err = write_all(fd, zeros, pad);
			at += pad;
		}
		if (!err)
			err = put_bytes(prog, fd, ir_tensor_data(it->t), it->t->nbytes, at);
		at += it->t->nbytes;
	}
	int rc = close_temp(fd, tmp, path, err, d);
	if (rc)
		free(tmp);
	else
		*tmp_out = tmp;
	return rc;
}

/* Bytes the tensors would take inside the model file. */
static int size_cb(struct ir_graph *g, void *arg)
{
	uint64_t *total = arg;
	for (int i = 0; i < g->n_inits; i++)
		*total += g->inits[i]->init->nbytes;
	ir_for_each_node(g, n)
		for (int i = 0; i < n->n_attrs; i++)
			if (n->attrs[i].t)
				*total += n->attrs[i].t->nbytes;
	return 0;
}

int ir_model_save(const struct ir_model *m, const char *path, const struct ir_save_opts *opts,
		  struct ir_diag *d)
{
	struct ir_save_opts o = opts ? *opts : (struct ir_save_opts){ 0 };
	char eb[128];
	struct stat st;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return ir_diag_err(d, IR_ERR, "cannot save '%s': it is a folder", path);
		if (m->path && (uint64_t)st.st_dev == m->file_dev && (uint64_t)st.st_ino == m->file_ino && !o.force)
			return ir_diag_err(d, IR_ERR, "'%s' is the file the model was loaded from: use save --force to overwrite it", path);
	}
	/* reading a mapped file that was truncated would kill the process */
	if (ir_model_check_files(m, d)) {
		ir_diag_prefix(d, "cannot save '%s'", path);
		return IR_ERR;
	}
	uint64_t tensor_bytes = 0;
	if (m->graph)
		ir_graph_walk(m->graph, size_cb, &tensor_bytes);

	struct saver S = { .d = d };
	S.threshold = o.threshold ? o.threshold : 1024;
	switch (o.external) {
	case IR_EXT_NONE:
		if (tensor_bytes >= TWO_GB)
			return ir_diag_err(d, IR_ERR, "cannot save '%s' as one file: its tensors take %" PRIu64 " bytes, more than protobuf's 2 GB limit (use save --external)",
					   path, tensor_bytes);
		break;
	case IR_EXT_ALL:
		S.external = true;
		break;
	case IR_EXT_AUTO:
		S.external = m->had_external || tensor_bytes >= TWO_GB - (64u << 20);
		if (!m->had_external && S.external)
			S.threshold = 1;   /* too big for one file: every tensor goes out */
		break;
	}

	char *data_path = NULL, *data_name = NULL;
	if (S.external) {
		const char *base = strrchr(path, '/');
		base = base ? base + 1 : path;
		data_name = o.data_name ? ir_strdup(o.data_name) : ir_fmt("%s.data", base);
		if (!data_name)
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		if (!*data_name || strchr(data_name, '/') || strcmp(data_name, "..") == 0 || strcmp(data_name, ".") == 0) {
			free(data_name);
			return ir_diag_err(d, IR_ERR, "external data name '%s' must be a plain file name", o.data_name);
		}
		data_path = base == path ? ir_strdup(data_name) : ir_fmt("%.*s%s", (int)(base - path), path, data_name);
		if (!data_path) {
			free(data_name);
			return ir_diag_err(d, IR_ENOMEM, "out of memory");
		}
		S.data_name = data_name;
	}

	int rc = 0;
	Onnx__ModelProto *mp = conv_model(&S, m);
	if (S.bad) {
		rc = ir_diag_err(d, IR_ERR, "cannot save '%s': a kept verbatim message does not parse", path);
		goto out;
	}
	if (!mp || S.a.failed) {
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory while saving '%s'", path);
		goto out;
	}
	struct file_buf fb = { .base = { fb_append }, .cap = 1 << 20, .o = &o, .S = &S };
	if (o.progress) {
		fb.grand_total = protobuf_c_message_get_packed_size(&mp->base) + (S.external ? S.ext_size : 0);
		fb.next_report = 64u << 20;
	}
	char *data_tmp = NULL;
	if (S.external && S.n_items && (rc = write_external(&S, data_path, &fb, &data_tmp, d)))
		goto out;
	fb.done_before = S.external ? S.ext_size : 0;

	size_t tl = strlen(path) + 32;
	char *tmp = malloc(tl);
	fb.buf = malloc(fb.cap);
	if (!tmp || !fb.buf) {
		free(tmp);
		free(fb.buf);
		rc = ir_diag_err(d, IR_ENOMEM, "out of memory");
		goto out_data;
	}
	fb.fd = make_temp(path, tmp, tl, file_mode(path), d);
	if (fb.fd < 0) {
		free(tmp);
		free(fb.buf);
		rc = IR_EIO;
		goto out_data;
	}
	protobuf_c_message_pack_to_buffer(&mp->base, &fb.base);
	fb_flush(&fb);
	if (o.progress && fb.grand_total >= (64u << 20))
		o.progress(o.progress_arg, fb.grand_total, fb.grand_total);
	bool too_big = !fb.err && fb.total >= TWO_GB;
	rc = close_temp(fb.fd, tmp, path, too_big ? EFBIG : fb.err, d);
	if (too_big)
		ir_diag_prefix(d, "the model is larger than protobuf's 2 GB limit (use save --external)");
	/* both files are complete and synced: now they replace the old ones, data first */
	if (!rc && data_tmp && rename(data_tmp, data_path) < 0) {
		rc = ir_diag_err(d, IR_EIO, "cannot write '%s': %s", data_path, ir_errstr(errno, eb, sizeof(eb)));
		unlink(tmp);
	}
	if (!rc && rename(tmp, path) < 0)
		rc = ir_diag_err(d, IR_EIO, "cannot write '%s': %s", path, ir_errstr(errno, eb, sizeof(eb)));
	if (rc)
		unlink(tmp);
	free(tmp);
	free(fb.buf);
	if (!rc)
		sync_folder(path);
out_data:
	if (data_tmp) {
		if (rc)
			unlink(data_tmp);
		free(data_tmp);
	}
out:
	for (size_t i = 0; i < S.n_unpacked; i++)
		protobuf_c_message_free_unpacked(S.unpacked[i], NULL);
	free(S.unpacked);
	free(S.items);
	free(S.maps);
	arena_free(&S.a);
	free(data_name);
	free(data_path);
	return rc;
}
