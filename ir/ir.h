/*
 * ir.h - the model in memory: graphs, nodes, values, tensors, the op table,
 * diagnostics, ONNX load and save.
 *
 * This is the only public header of ir/. It needs libc alone; protobuf-c is
 * an implementation detail of load.c and save.c.
 *
 * Ownership in one paragraph: a model owns its graph and functions; a graph
 * owns its nodes, values and the strings in them; nodes own their attributes.
 * Tensors and the buffers under them are reference-counted and immutable once
 * built, so clones of a graph (the stage history) share them; a pass that
 * changes weights builds new tensors. Mappings of model and external-data
 * files are reference-counted by the buffers that point into them.
 */
#ifndef OGSH_IR_H
#define OGSH_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Diagnostics                                                               */
/* ------------------------------------------------------------------------ */

/* Error codes: functions that act return 0 or one of these. */
enum {
	IR_OK = 0,
	IR_ERR = -1,     /* invalid input or operation; message in the diag */
	IR_ENOMEM = -2,  /* out of memory */
	IR_EIO = -3,     /* a system call failed (open, write, mmap...) */
	IR_EINTR = -4,   /* stopped by the user (Ctrl-C) */
};

/*
 * A diagnostics object collects the first error and any warnings of one
 * operation. Nothing below shell/ prints: callers pass a diag, the shell
 * shows it. A NULL diag is allowed everywhere and discards the messages.
 */
struct ir_diag {
	char *error;       /* first error, NULL if none (owned) */
	char **warnings;   /* owned strings */
	size_t n_warnings;
	size_t max_warnings; /* 0: unlimited; past it warnings are only counted */
	size_t dropped;      /* warnings not kept because of max_warnings */
};

void ir_diag_init(struct ir_diag *d);
void ir_diag_clear(struct ir_diag *d);
/* vsnprintf into a malloc'd string of the right size (NULL: no memory) */
char *ir_vfmt(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* Records an error (the first one wins) and returns `code`. */
int ir_diag_err(struct ir_diag *d, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ir_diag_warn(struct ir_diag *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prefixes the current error with "prefix: " (used to add a file name). */
void ir_diag_prefix(struct ir_diag *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* strerror, starting in lowercase like the rest of a message ("no such file or directory"). */
const char *ir_errstr(int err, char *buf, size_t size);

/* Set by the shell's SIGINT handler; long operations poll it and return IR_EINTR. */
extern volatile int ir_interrupted;

/* ------------------------------------------------------------------------ */
/* Element types (the numbers are ONNX's TensorProto.DataType)               */
/* ------------------------------------------------------------------------ */

enum ir_dtype {
	IR_UNDEFINED = 0,
	IR_FLOAT = 1,
	IR_UINT8 = 2,
	IR_INT8 = 3,
	IR_UINT16 = 4,
	IR_INT16 = 5,
	IR_INT32 = 6,
	IR_INT64 = 7,
	IR_STRING = 8,
	IR_BOOL = 9,
	IR_FLOAT16 = 10,
	IR_DOUBLE = 11,
	IR_UINT32 = 12,
	IR_UINT64 = 13,
	IR_COMPLEX64 = 14,
	IR_COMPLEX128 = 15,
	IR_BFLOAT16 = 16,
	IR_F8E4M3FN = 17,
	IR_F8E4M3FNUZ = 18,
	IR_F8E5M2 = 19,
	IR_F8E5M2FNUZ = 20,
	IR_UINT4 = 21,
	IR_INT4 = 22,
	IR_F4E2M1 = 23,
	IR_F8E8M0 = 24,
	IR_UINT2 = 25,
	IR_INT2 = 26,
	IR_DTYPE_COUNT
};

bool ir_dtype_valid(int dtype);           /* a defined element type (not UNDEFINED) */
const char *ir_dtype_name(int dtype);     /* "float32", "float16", "int4"...; "dtype(99)" style never: returns "?" */
int ir_dtype_from_name(const char *name); /* accepts our names and ONNX's ("FLOAT", "float"); -1 if unknown */
int ir_dtype_bits(int dtype);             /* bits per element; 0 for STRING/UNDEFINED */
bool ir_dtype_is_float(int dtype);        /* any floating type, complex excluded */
bool ir_dtype_is_int(int dtype);          /* signed or unsigned integers, bool excluded */
bool ir_dtype_is_signed(int dtype);
/* Bytes that `numel` elements take in raw_data layout (sub-byte types packed).
 * Returns false on overflow. */
bool ir_dtype_nbytes(int dtype, uint64_t numel, uint64_t *out);
/* Element i of raw little-endian data as a double (complex: the real part).
 * `data` may be unaligned. Float8/float4/e8m0 follow the ONNX definitions. */
double ir_elem_to_f64(int dtype, const void *data, uint64_t i);
/* Element i of an integer or bool tensor's raw data, exactly (no trip through
 * a double); false for other types and for uint64 values past INT64_MAX. */
bool ir_elem_to_i64(int dtype, const void *data, uint64_t i, int64_t *out);
/* Scalar conversions used by kernels and printing. */
float ir_f16_to_f32(uint16_t h);
uint16_t ir_f32_to_f16(float f);
float ir_bf16_to_f32(uint16_t h);
uint16_t ir_f32_to_bf16(float f);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

#define IR_MAX_RANK 64

struct ir_kv { char *key, *value; };   /* metadata_props, string maps */
struct ir_bytes { size_t len; char *data; };   /* owned byte string (NUL added, not counted) */

/* A read-only file mapping shared by the buffers that point into it. */
struct ir_mapping {
	int refcount;
	void *addr;
	size_t size;
	char *path;       /* for messages */
	bool heap;        /* addr is a malloc'd copy (models loaded from memory) */
	int fd;           /* the mapped file, kept open (-1 for heap copies) */
	int64_t mtime_ns; /* its modification time when mapped */
};

/*
 * Maps `size` bytes of the regular file `fd` read-only (no page is read
 * yet) and keeps fd, which the mapping now owns. NULL with a message on
 * failure (fd is then closed).
 */
struct ir_mapping *ir_mapping_open(int fd, const char *path, size_t size, int64_t mtime_ns, struct ir_diag *d);
/*
 * Checks that the mapped file has not been truncated or rewritten since it
 * was mapped (reading a truncated mapping kills the process with SIGBUS,
 * and a rewritten one gives other bytes). 0, or IR_ERR with a message.
 */
int ir_mapping_check(const struct ir_mapping *m, struct ir_diag *d);

/* A reference-counted block of bytes: heap memory or a region of a mapping. */
struct ir_buffer {
	int refcount;
	void *data;               /* may be unaligned when it points into a mapping */
	size_t size;
	struct ir_mapping *map;   /* NULL: heap block owned by the buffer */
};

struct ir_buffer *ir_buffer_new(size_t size);            /* zeroed heap block */
struct ir_buffer *ir_buffer_adopt(void *heap, size_t size);   /* takes a malloc'd block */
struct ir_buffer *ir_buffer_mapped(struct ir_mapping *m, size_t off, size_t size);
void ir_buffer_ref(struct ir_buffer *b);
void ir_buffer_unref(struct ir_buffer *b);
void ir_mapping_unref(struct ir_mapping *m);

/* How a tensor was stored in the file it came from; save writes it back the same way. */
enum ir_tensor_enc {
	IR_ENC_RAW = 0,       /* raw_data (the default for new tensors) */
	IR_ENC_TYPED,         /* float_data / int32_data / int64_data / ... */
	IR_ENC_EXTERNAL,      /* external data file */
};

/*
 * A dense tensor. Immutable once built and shared by reference count:
 * ir_tensor_ref() to keep it, ir_tensor_unref() to drop it. The element
 * bytes are in raw_data layout (little-endian, sub-byte types packed), at
 * buf->data; strings are in `strings`.
 */
struct ir_tensor {
	int refcount;
	int dtype;
	int rank;
	int64_t *dims;
	uint64_t numel;
	struct ir_buffer *buf;        /* NULL for STRING and for empty tensors */
	size_t nbytes;                /* == buf->size when buf */
	struct ir_bytes *strings;     /* STRING: numel entries */
	char *name;                   /* the TensorProto's name (attribute tensors; initializers use their value's) */
	char *doc;
	struct ir_kv *meta;
	size_t n_meta;
	enum ir_tensor_enc enc;
	bool has_data_location;       /* fidelity: the file set data_location explicitly */
	bool has_segment;             /* a segment field is kept as is; ogsh does not join segments */
	int64_t seg_begin, seg_end;
	char *ext_location;           /* IR_ENC_EXTERNAL: where it came from (for `info`) */
	uint64_t ext_offset;
};

/* Makes a tensor with zeroed data (strings empty); NULL on overflow or no memory. */
struct ir_tensor *ir_tensor_new(int dtype, int rank, const int64_t *dims, struct ir_diag *d);
/* Wraps an existing buffer (takes a reference); checks that the size fits. */
struct ir_tensor *ir_tensor_wrap(int dtype, int rank, const int64_t *dims,
				 struct ir_buffer *buf, struct ir_diag *d);
void ir_tensor_ref(struct ir_tensor *t);
void ir_tensor_unref(struct ir_tensor *t);
/* Bytes of the data (read-only, maybe unaligned). NULL for strings/empty. */
const void *ir_tensor_data(const struct ir_tensor *t);
/* Writable data of a tensor that has just been made and not yet shared. */
void *ir_tensor_mutable(struct ir_tensor *t);
double ir_tensor_get_f64(const struct ir_tensor *t, uint64_t i);
/* ir_mapping_check for the file a tensor's bytes are mapped from (0 for heap data). */
int ir_tensor_check(const struct ir_tensor *t, struct ir_diag *d);
bool ir_tensor_equal(const struct ir_tensor *a, const struct ir_tensor *b);
/* "[2,3,4]" into buf; returns buf. */
char *ir_dims_str(int rank, const int64_t *dims, char *buf, size_t size);

struct ir_sparse {
	struct ir_tensor *values;   /* 1-D [NNZ] */
	struct ir_tensor *indices;  /* int64 [NNZ] or [NNZ, rank] */
	int rank;
	int64_t *dims;
};
void ir_sparse_free(struct ir_sparse *s);
struct ir_sparse *ir_sparse_clone(const struct ir_sparse *s);

/* ------------------------------------------------------------------------ */
/* Types and shapes                                                          */
/* ------------------------------------------------------------------------ */

enum ir_dim_kind { IR_DIM_UNKNOWN = 0, IR_DIM_VALUE, IR_DIM_PARAM };

struct ir_dim {
	enum ir_dim_kind kind;
	int64_t value;      /* IR_DIM_VALUE */
	char *param;        /* IR_DIM_PARAM: a symbol such as "batch" */
	char *denotation;
};

enum ir_type_kind {
	IR_TYPE_NONE = 0,   /* no type known (function bodies, untyped value_info) */
	IR_TYPE_TENSOR,
	IR_TYPE_SPARSE_TENSOR,
	IR_TYPE_SEQUENCE,
	IR_TYPE_MAP,
	IR_TYPE_OPTIONAL,
};

/* A value's type: ONNX's TypeProto. For tensors, rank -1 is "shape unknown". */
struct ir_type {
	enum ir_type_kind kind;
	int elem;               /* tensor / sparse tensor element type (0: unknown) */
	bool has_elem;          /* fidelity: elem_type present in the file */
	int rank;               /* -1: no shape */
	struct ir_dim *dims;
	int key;                /* map key element type */
	struct ir_type *inner;  /* sequence/optional element, map value */
	char *denotation;
};

void ir_type_clear(struct ir_type *t);
int ir_type_copy(struct ir_type *dst, const struct ir_type *src);
bool ir_type_equal(const struct ir_type *a, const struct ir_type *b);
/* "float32[batch,3,224,224]", "seq(float32[?])", "?" into buf; returns buf. */
char *ir_type_str(const struct ir_type *t, char *buf, size_t size);
/* Sets `t` to a tensor type of `elem` with the given dims (NULL dims/param: unknown). */
int ir_type_set_tensor(struct ir_type *t, int elem, int rank, const struct ir_dim *dims);

/* ------------------------------------------------------------------------ */
/* Attributes                                                                */
/* ------------------------------------------------------------------------ */

enum ir_attr_type {   /* ONNX AttributeProto.AttributeType */
	IR_ATTR_UNDEFINED = 0,
	IR_ATTR_FLOAT = 1,
	IR_ATTR_INT = 2,
	IR_ATTR_STRING = 3,
	IR_ATTR_TENSOR = 4,
	IR_ATTR_GRAPH = 5,
	IR_ATTR_FLOATS = 6,
	IR_ATTR_INTS = 7,
	IR_ATTR_STRINGS = 8,
	IR_ATTR_TENSORS = 9,
	IR_ATTR_GRAPHS = 10,
	IR_ATTR_SPARSE_TENSOR = 11,
	IR_ATTR_SPARSE_TENSORS = 12,
	IR_ATTR_TYPE_PROTO = 13,
	IR_ATTR_TYPE_PROTOS = 14,
};

struct ir_graph;

struct ir_attr {
	char *name;
	enum ir_attr_type type;
	bool has_type;          /* fidelity: the file carried the type field */
	char *ref_attr_name;    /* in function bodies: refers to the caller's attribute */
	char *doc;
	/* exactly one group below is used, by `type` */
	float f;
	int64_t i;
	struct ir_bytes s;
	struct ir_tensor *t;
	struct ir_graph *g;
	struct ir_sparse *sp;
	struct ir_type *tp;
	size_t n;               /* element count of the list kinds */
	float *floats;
	int64_t *ints;
	struct ir_bytes *strings;
	struct ir_tensor **tensors;
	struct ir_graph **graphs;
	struct ir_sparse **sparses;
	struct ir_type *tps;
};

const char *ir_attr_type_name(enum ir_attr_type t);   /* "int", "floats", "graph"... */
void ir_attr_clear(struct ir_attr *a);
/* Deep copy (tensors shared); subgraphs are cloned with `scope` as their
 * enclosing graph (their captures are re-pointed there). */
int ir_attr_copy(struct ir_attr *dst, const struct ir_attr *src, struct ir_graph *scope);
/* Writes a short human form ("3", "[1,1,2,2]", "'NOTSET'", "tensor float32[64]", "graph(12 nodes)"). */
char *ir_attr_str(const struct ir_attr *a, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* The op table                                                              */
/* ------------------------------------------------------------------------ */

/* Op flags (columns of ops.def). */
enum {
	IR_OPF_ELEMENTWISE = 1 << 0,   /* output element i depends on input element i (broadcasting) */
	IR_OPF_FUSABLE     = 1 << 1,   /* a fusion pass may absorb it */
	IR_OPF_SHAPE_ONLY  = 1 << 2,   /* moves or views data, computes nothing */
	IR_OPF_CONTROL     = 1 << 3,   /* has subgraphs (If, Loop, Scan) */
	IR_OPF_TRAINING    = 1 << 4,   /* gradient/optimizer ops */
	IR_OPF_QUANT       = 1 << 5,   /* quantization ops */
	IR_OPF_RANDOM      = 1 << 6,   /* nondeterministic output */
	IR_OPF_SEQUENCE    = 1 << 7,   /* sequence/optional types */
	IR_OPF_REDUCE      = 1 << 8,   /* a reduction over axes */
	IR_OPF_NORM        = 1 << 9,   /* a normalization */
};

enum ir_op {
#define IR_OP(name, dom, in_min, in_max, out_min, out_max, flags, since) IR_OP_##name,
#include "ops.def"
#undef IR_OP
	IR_OP_COUNT,
	IR_OP_UNKNOWN = -1,   /* an op not in the table: kept opaque */
};

struct ir_op_info {
	const char *name;
	const char *domain;   /* "" for ONNX's default domain, "ai.ogsh"... */
	int in_min, in_max;   /* in_max -1: variadic */
	int out_min, out_max;
	unsigned flags;
	int since;            /* the first opset of its domain that has the op */
};

extern const struct ir_op_info ir_ops[IR_OP_COUNT];

struct ir_model;

/* An attribute of an op in the ONNX schema (attrs.def). */
struct ir_attr_schema {
	int op;                 /* enum ir_op */
	const char *name;
	enum ir_attr_type type;
	bool required;          /* in the newest version of the op */
	const char *dflt;       /* the default as text ("1", "NOTSET", "[1,1]"), or NULL */
	int since, until;       /* opset versions that have it: since <= v < until (until 0: all later) */
};
/* The schema of attribute `name` of `op` at `opset` (0: in any version), or
 * NULL (unknown op or attribute). */
const struct ir_attr_schema *ir_op_attr(int op, const char *name, int64_t opset);
/* Every attribute `op` has had (*count of them, sorted by name); NULL if none. */
const struct ir_attr_schema *ir_op_attrs(int op, int *count);
/* Whether the attribute exists at `opset` (0: always true). */
bool ir_attr_schema_at(const struct ir_attr_schema *a, int64_t opset);
/* The opset version a model imports for a domain (NULL, "" and "ai.onnx" are
 * the default domain); 0 when it imports none. */
int64_t ir_model_opset(const struct ir_model *m, const char *domain);
/* The op for a type and domain ("" and "ai.onnx" are the same); IR_OP_UNKNOWN if none. */
int ir_op_lookup(const char *domain, const char *op_type);

/* ------------------------------------------------------------------------ */
/* Graphs, nodes, values                                                     */
/* ------------------------------------------------------------------------ */

struct ir_node;

struct ir_use {
	struct ir_node *node;
	int slot;   /* input index, or -1-k for the node's k-th implicit (captured) input */
};

/*
 * One tensor edge, defined once (SSA) in its graph: by a node output, a
 * graph input, an initializer, or (in a subgraph) a capture of a value of
 * an enclosing graph.
 */
struct ir_value {
	char *name;
	struct ir_type type;
	struct ir_graph *graph;
	struct ir_node *producer;     /* NULL for inputs, initializers, captures */
	int producer_slot;
	struct ir_use *uses;
	size_t n_uses, cap_uses;
	struct ir_tensor *init;       /* initializer data, NULL if none */
	struct ir_sparse *sparse_init;/* sparse initializer, NULL if none */
	struct ir_value *outer;       /* a capture: the enclosing graph's value it reads */
	bool is_input, is_output;
	bool has_vinfo;               /* listed in value_info */
	int vinfo_order;              /* its place in value_info (fidelity) */
	char *vi_doc;                 /* doc_string of its ValueInfoProto */
	struct ir_kv *vi_meta;
	size_t n_vi_meta;
	bool has_type_proto;          /* fidelity: the ValueInfoProto had a type field */
	uint32_t mark;                /* scratch for algorithms; 0 between calls */
	void *aux;                    /* scratch for later layers (exec), not copied */
	size_t idx;                   /* its index in graph->values (private) */
	/* filled by ir_infer(); not copied by clone, not saved */
	struct ir_type inferred;      /* kind NONE until inference ran */
	char *why;                    /* why its type or shape is (partly) unknown, or NULL */
	struct ir_dim *known;         /* the elements of a small integer tensor, when known */
	int n_known;                  /* -1: not known */
	bool conflict;                /* the inferred type contradicts the declared one */
};

struct ir_node {
	int id;                       /* stable, shown as n<id>; unique in its graph */
	char *name;                   /* may be "" */
	char *op_type;
	char *domain;                 /* NULL when absent in the file */
	char *overload;
	int op;                       /* enum ir_op, or IR_OP_UNKNOWN */
	struct ir_value **inputs;     /* NULL entry: an omitted optional input ("") */
	int n_inputs;
	struct ir_value **outputs;    /* NULL entry: an omitted optional output */
	int n_outputs;
	struct ir_attr *attrs;
	int n_attrs;
	struct ir_value **implicit;   /* outer values its subgraphs read (in this graph) */
	int n_implicit;
	char *doc;
	struct ir_kv *meta;
	size_t n_meta;
	struct ir_bytes *devcfg;      /* packed NodeDeviceConfigurationProto messages, verbatim */
	size_t n_devcfg;
	char **from;                  /* provenance: names of the nodes it was made from */
	int n_from;
	struct ir_graph *graph;
	struct ir_node *prev, *next;  /* the graph's node order */
	uint32_t mark;
	void *aux;
};

struct ir_map;   /* private string map (ir/map.c) */

struct ir_graph {
	char *name;
	char *doc;
	struct ir_kv *meta;
	size_t n_meta;
	struct ir_node *first, *last; /* in topological order */
	int n_nodes;
	struct ir_node **by_id;       /* index: id -> node (NULL when removed) */
	int next_id;
	size_t cap_id;
	struct ir_value **values;     /* every value defined in this graph */
	size_t n_values, cap_values;
	struct ir_map *value_names;
	struct ir_map *node_names;    /* name -> first node of that name */
	int name_dups;                /* >0: some node names repeat */
	unsigned fresh;               /* counter for made-up value names */
	struct ir_value **inputs;  int n_inputs;
	struct ir_value **outputs; int n_outputs;
	struct ir_value **inits;   int n_inits;    /* initializers in file order */
	struct ir_value **sparse_inits; int n_sparse_inits;
	struct ir_bytes *qannot; size_t n_qannot;  /* packed TensorAnnotation messages, verbatim */
	struct ir_graph *parent;      /* enclosing graph of a subgraph */
	struct ir_node *owner;        /* the node whose attribute holds it */
	bool is_function;             /* a function body: untyped values allowed */
	int depth;                    /* nesting depth, 0 for the main graph */
};

struct ir_opset { char *domain; int64_t version; bool has_version; };

struct ir_function {
	char *name, *domain, *overload, *doc;
	struct ir_graph *body;        /* inputs/outputs are the function's formal parameters */
	char **attr_names; size_t n_attr_names;
	struct ir_attr *attr_defaults; size_t n_attr_defaults;
	struct ir_opset *opsets; size_t n_opsets;
	struct ir_kv *meta; size_t n_meta;
};

struct ir_model {
	int64_t ir_version; bool has_ir_version;
	char *producer_name, *producer_version, *domain, *doc;
	int64_t model_version; bool has_model_version;
	struct ir_opset *opsets; size_t n_opsets;
	struct ir_kv *meta; size_t n_meta;
	struct ir_function *functions; size_t n_functions;
	struct ir_graph *graph;
	struct ir_bytes *training;   size_t n_training;   /* packed TrainingInfoProto, verbatim */
	struct ir_bytes *devconfig;  size_t n_devconfig;  /* packed DeviceConfigurationProto, verbatim */
	char *path;                   /* the file it was loaded from, or NULL */
	uint64_t file_dev, file_ino;  /* identity of that file (save refuses to overwrite it) */
	uint64_t file_size;
	bool had_external;            /* some tensor came from an external data file */
	bool infer_current;           /* the passes' cache: ir_infer's results match the graph (not copied) */
};

/* --- graph life cycle --- */
struct ir_graph *ir_graph_new(const char *name);
void ir_graph_free(struct ir_graph *g);
/*
 * A copy of the graph sharing tensor data (reference counts) and copying
 * structure, ids and names. Captures of a subgraph are re-pointed at the
 * copy of the enclosing graph (`parent`, NULL for a main graph).
 * Returns NULL on no memory.
 */
struct ir_graph *ir_graph_clone(const struct ir_graph *g, struct ir_graph *parent);

struct ir_model *ir_model_new(void);
void ir_model_free(struct ir_model *m);
struct ir_model *ir_model_clone(const struct ir_model *m);
/* A deep copy of model function f into d (the body cloned): 0 or IR_ENOMEM (d is then cleared). */
int ir_function_copy(struct ir_function *d, const struct ir_function *f);
/* Frees what f owns and zeroes it. */
void ir_function_clear(struct ir_function *f);

/* --- values --- */
/* A new value named `name` (must be unique in the graph; NULL name: a fresh "_v<n>"). */
struct ir_value *ir_value_new(struct ir_graph *g, const char *name, struct ir_diag *d);
struct ir_value *ir_value_find(const struct ir_graph *g, const char *name);
/* Looks in g, then in the enclosing graphs. */
struct ir_value *ir_value_find_scoped(const struct ir_graph *g, const char *name);
/* Renames a value (and the captures that read it in subgraphs). */
int ir_value_rename(struct ir_value *v, const char *name, struct ir_diag *d);
/* Points every use of `from` at `to` (same graph); graph outputs are not moved. */
void ir_value_replace_uses(struct ir_value *from, struct ir_value *to);
/* Removes an unused value that nothing defines or lists. */
void ir_value_remove(struct ir_value *v);
/* Makes `v` an initializer holding `t` (takes a reference). */
int ir_value_set_init(struct ir_value *v, struct ir_tensor *t, struct ir_diag *d);
/* The constant tensor behind a value: its initializer, or a Constant node's value tensor. */
const struct ir_tensor *ir_value_const(const struct ir_value *v);
bool ir_value_is_const(const struct ir_value *v);
/* Puts `to` in every graph-output slot that holds `from`. */
void ir_graph_replace_output(struct ir_graph *g, struct ir_value *from, struct ir_value *to);
/* Makes the value a graph input / output (appended). */
int ir_graph_add_input(struct ir_graph *g, struct ir_value *v);
int ir_graph_add_output(struct ir_graph *g, struct ir_value *v);
/* Gets (or makes) the capture in `g` of an enclosing graph's value named `name`. */
struct ir_value *ir_graph_capture(struct ir_graph *g, const char *name, struct ir_diag *d);

/* --- nodes --- */
/*
 * A new node at the end of the graph (or before `before`). Inputs/outputs
 * start NULL; connect them with ir_node_set_input / ir_node_set_output.
 */
struct ir_node *ir_node_new(struct ir_graph *g, const char *op_type, const char *domain,
			    const char *name, int n_inputs, int n_outputs, struct ir_node *before);
/* Connects input `slot` to `v` (NULL: omitted), keeping use lists true.
 * 0, or IR_ENOMEM (the slot is then left empty). */
int ir_node_set_input(struct ir_node *n, int slot, struct ir_value *v);
/* Makes `v` (which must have no producer) output `slot` of `n`. */
int ir_node_set_output(struct ir_node *n, int slot, struct ir_value *v, struct ir_diag *d);
/* Appends an input slot. */
int ir_node_add_input(struct ir_node *n, struct ir_value *v);
/* Removes a node whose outputs are unused (outputs are removed too). */
int ir_node_remove(struct ir_node *n, struct ir_diag *d);
/* Renames a node ("" allowed; names need not be unique but usually are). */
int ir_node_rename(struct ir_node *n, const char *name, struct ir_diag *d);
struct ir_node *ir_node_by_id(const struct ir_graph *g, int id);
/* First node named `name`; *count gets how many have that name. */
struct ir_node *ir_node_by_name(const struct ir_graph *g, const char *name, int *count);
/* Moves `n` just before `before` (NULL: the end). Does not check order. */
void ir_node_move(struct ir_node *n, struct ir_node *before);

struct ir_attr *ir_node_attr(const struct ir_node *n, const char *name);
/* Adds or replaces an attribute; takes ownership of `a`'s contents. */
int ir_node_set_attr(struct ir_node *n, struct ir_attr *a, struct ir_diag *d);
int ir_node_remove_attr(struct ir_node *n, const char *name);
int64_t ir_node_attr_int(const struct ir_node *n, const char *name, int64_t dflt);
float ir_node_attr_float(const struct ir_node *n, const char *name, float dflt);
/* Re-resolves n->op from op_type/domain. */
void ir_node_resolve_op(struct ir_node *n);

/*
 * Recomputes the implicit inputs of a node from its subgraphs' captures,
 * keeping use lists true. Called after editing a subgraph's captures.
 */
int ir_node_update_implicit(struct ir_node *n, struct ir_diag *d);

/* Sorts nodes topologically, keeping the current order where it is already
 * valid. Fails (graph unchanged) on a cycle, naming a node on it. */
int ir_graph_toposort(struct ir_graph *g, struct ir_diag *d);

/* Checks every invariant of the graph (and its subgraphs); names the first
 * broken one in `d`. Cheap enough to run after every pass. */
int ir_verify(const struct ir_graph *g, struct ir_diag *d);
int ir_model_verify(const struct ir_model *m, struct ir_diag *d);

/*
 * Structural equality of two models or graphs: same nodes in the same
 * order, names, attributes, types, tensors (bytes), metadata. On a
 * difference returns false and describes the first one in `why`.
 */
bool ir_model_equal(const struct ir_model *a, const struct ir_model *b, char *why, size_t size);
bool ir_graph_equal(const struct ir_graph *a, const struct ir_graph *b, char *why, size_t size);

/* Iteration helpers. */
#define ir_for_each_node(g, n) for (struct ir_node *n = (g)->first; n; n = n->next)
/* Calls fn on g and on every subgraph below it (pre-order). */
int ir_graph_walk(struct ir_graph *g, int (*fn)(struct ir_graph *, void *), void *arg);

/* Totals for `info`: weights over initializers and Constant nodes. */
struct ir_graph_totals {
	int n_nodes;           /* main graph nodes */
	int n_nodes_all;       /* including subgraphs */
	int n_inits;
	uint64_t n_params;     /* elements of initializers and Constant tensors */
	uint64_t weight_bytes;
	int n_subgraphs;
};
void ir_graph_totals(const struct ir_graph *g, struct ir_graph_totals *t);

/* ------------------------------------------------------------------------ */
/* Shape and type inference (ir/infer.c, ir/shape_*.c)                       */
/* ------------------------------------------------------------------------ */

/*
 * Infers the element type and shape of every value of the model (subgraphs
 * and the bodies of model functions that are called included) from its
 * inputs, initializers and ops. Results go to v->inferred (and v->why where
 * something stays unknown, v->known for small integer tensors whose values
 * follow from constants, so that Shape->Gather->Concat->Reshape chains
 * resolve). Declared types (value_info, graph outputs) are compared with
 * what is inferred: a contradiction is a warning in `d` and sets
 * v->conflict; a declared dim fills in one that inference left unknown.
 * Returns 0, IR_EINTR, or IR_ENOMEM.
 */
int ir_infer(struct ir_model *m, struct ir_diag *d);
/* The model-local function a node calls (same name, domain and overload), or NULL. */
const struct ir_function *ir_model_find_function(const struct ir_model *m, const struct ir_node *n);
/* Whether ogsh has a shape function for the op. */
bool ir_infer_has_shape_fn(int op);
/* Forgets inferred results (after an edit makes them stale). */
void ir_infer_clear(struct ir_graph *g);
/* Element type and every dim known (for sequences, optionals, maps: their element's). */
bool ir_type_fully_known(const struct ir_type *t);
/* The best type known for a value: inferred if inference ran, else declared. */
const struct ir_type *ir_value_type(const struct ir_value *v);

/* Symbolic dims: "batch", "2*seq + 1", "batch*seq". Arithmetic on dims
 * whose params are polynomials over symbols with integer coefficients;
 * results that are constants become VALUE dims, results ogsh cannot write
 * (too many terms, overflow, an UNKNOWN operand) become UNKNOWN. The
 * result's param is allocated: free it with ir_dim_clear. Returns 0 or
 * IR_ENOMEM. */
void ir_dim_clear(struct ir_dim *d);
int ir_dim_mul(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out);
int ir_dim_add(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out);
int ir_dim_sub(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out);
/* a / b when it divides exactly (b a value or a's factor), else UNKNOWN */
int ir_dim_div(const struct ir_dim *a, const struct ir_dim *b, struct ir_dim *out);
/* Same value, or the same symbolic expression. */
bool ir_dim_equal(const struct ir_dim *a, const struct ir_dim *b);
/* "3", "batch", "?" into buf */
const char *ir_dim_str(const struct ir_dim *d, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Load and save                                                             */
/* ------------------------------------------------------------------------ */

struct ir_load_opts {
	int max_depth;          /* subgraph nesting limit; 0: default (IR_DEFAULT_MAX_DEPTH) */
	bool no_external;       /* refuse external data */
};
#define IR_DEFAULT_MAX_DEPTH 32

/*
 * Loads an ONNX model: maps the file, checks the wire format, unpacks it,
 * builds and validates the IR. Large raw tensors point into the mapping
 * (no copy). Returns NULL with one clear message in `d` on any problem.
 */
struct ir_model *ir_model_load(const char *path, const struct ir_load_opts *opts, struct ir_diag *d);
/* The same from bytes in memory (copied if needed); `name` is used in messages;
 * external data is refused unless `dir` names the folder to resolve it in. */
struct ir_model *ir_model_load_mem(const void *data, size_t size, const char *name,
				   const char *dir, const struct ir_load_opts *opts, struct ir_diag *d);

enum ir_external_mode {
	IR_EXT_AUTO = 0,   /* as loaded: external if the model came with external data, or if > 2 GB */
	IR_EXT_NONE,       /* everything inside (fails if > 2 GB) */
	IR_EXT_ALL,        /* tensors of at least `threshold` bytes go external */
};

struct ir_save_opts {
	bool force;                   /* allow overwriting the file the model came from */
	enum ir_external_mode external;
	size_t threshold;             /* bytes; 0: default 1024 */
	const char *data_name;        /* external file name; default "<file>.data" */
	/* called now and then with bytes written so far and the total (may be NULL) */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
};

/*
 * Writes the model atomically: a temporary file in the same folder, fsync,
 * rename over `path`, fsync of the folder. The external data file, if any,
 * is written fresh the same way. On failure nothing at `path` changes.
 */
int ir_model_save(const struct ir_model *m, const char *path, const struct ir_save_opts *opts,
		  struct ir_diag *d);

/*
 * A value from an ONNX test data file (input_N.pb / output_N.pb): a
 * TensorProto, a SequenceProto of tensors, or an OptionalProto; `want`
 * says which message the file holds (the model's type of the value).
 * Tensors are copied out of `data`. 0, or IR_ERR/IR_ENOMEM with a message.
 */
enum { IR_PB_NONE = 0, IR_PB_TENSOR, IR_PB_SEQUENCE };
struct ir_pb_value {
	int kind;                 /* IR_PB_*; NONE: an empty optional */
	bool optional;
	struct ir_tensor *t;
	struct ir_tensor **items;
	int n_items;
	int elem;
	char *name;               /* the name field, or NULL */
};
int ir_pb_value_load(const void *data, size_t size, enum ir_type_kind want, const char *name,
		     struct ir_pb_value *out, struct ir_diag *d);
void ir_pb_value_clear(struct ir_pb_value *v);
/* ir_mapping_check for every file the model's tensors are mapped from. */
int ir_model_check_files(const struct ir_model *m, struct ir_diag *d);

/* The built-in demo CNN (deterministic weights). */
struct ir_model *ir_demo_model(void);

/* ------------------------------------------------------------------------ */
/* Small utilities shared by the layers above                                */
/* ------------------------------------------------------------------------ */

/* Parses "1x3x224x224", "batch,3,224,224", "[N,3,?,?]" or "[]" (a scalar)
 * into dims (kind VALUE, PARAM, or UNKNOWN for "?"). `dims` holds
 * IR_MAX_RANK entries; their params are allocated: ir_dims_clear(dims, rank).
 * Returns the rank, or -1 with a message. */
int ir_parse_dims(const char *s, struct ir_dim *dims, struct ir_diag *d);
void ir_dims_clear(struct ir_dim *dims, int rank);

/* ------------------------------------------------------------------------ */
/* Cost model (ir/cost.c; conventions in docs/costs.md)                      */
/* ------------------------------------------------------------------------ */

/*
 * What a node costs, counted from the shapes shape inference found (run
 * ir_infer first; without it the declared types are used). Counts are
 * doubles: exact below 2^53, never overflowing. A multiply-add is 1 MAC and
 * 2 FLOPs; Conv, ConvTranspose, Gemm and MatMul count MACs as onnx-tool
 * does (a bias adds one MAC per output element). Symbolic dims are taken as
 * 1 (the symbols are listed); a dim that is not known makes the node's cost
 * unknown (known false, why says which value and why).
 *
 * The stats own every string they hold (copies): they stay valid after the
 * model they came from is changed or freed, so two stages can be compared.
 */

/* What a constant input is to the node that reads it. */
enum ir_const_role {
	IR_ROLE_NONE = 0,    /* not a constant */
	IR_ROLE_PARAM,       /* a weight: counts as parameters */
	IR_ROLE_BUFFER,      /* state that is not learned: BatchNormalization's running mean/var, rotary caches */
	IR_ROLE_CONST,       /* shapes, axes, indices, masks, scalar operands */
};

/* One input or output of a node as the cost model saw it. */
struct ir_cost_io {
	char *name;          /* the value's name (copied) */
	char *type;          /* "float32[batch,3,224,224]", "?" */
	int role;            /* enum ir_const_role */
	bool known;          /* bytes known */
	double numel;        /* elements with symbols taken as 1 (when known) */
	double bytes;
};

struct ir_node_cost {
	int id;                      /* the node's id (n<id>) */
	int op;                      /* enum ir_op, or IR_OP_UNKNOWN */
	char *name, *op_type, *domain;   /* copies; domain "" for ONNX's */
	bool known;                  /* every figure below is known */
	char *why;                   /* when not known: why (never NULL then) */
	double params;               /* elements of constant inputs that are weights (IR_ROLE_PARAM) */
	double weight_bytes;         /* their bytes */
	double macs, flops;
	double bytes_read;           /* every distinct input (weights included), once */
	double bytes_written;        /* every output */
	double intensity;            /* flops / (read + written); 0 when no bytes move */
	char *how;                   /* how it was counted, for people ("" when nothing to say) */
	char **symbols;              /* symbols taken as 1 (sorted, copied; the first 64) */
	int n_symbols;
	struct ir_cost_io *inputs;   /* n_inputs entries; an omitted input has name NULL */
	int n_inputs;
	struct ir_cost_io *outputs;
	int n_outputs;
	bool borrowed;               /* its memory belongs to the ir_stats holding it */
	int precision;               /* the precision it computes in (ir_node_precision); 0: not known */
};

/* Sums over the nodes of one op type (nodes whose cost is known). */
struct ir_op_cost {
	char *op_type, *domain;
	int count;                   /* nodes of this type */
	int n_unknown;               /* of which cost not known */
	double params, weight_bytes, macs, flops, bytes_read, bytes_written;
};

/* Constant tensors by element type, each tensor counted once. */
struct ir_stats_dtype {
	int dtype;
	int n_tensors;
	double params, param_bytes;       /* IR_ROLE_PARAM */
	double buffers, buffer_bytes;     /* IR_ROLE_BUFFER */
	double constants, constant_bytes; /* IR_ROLE_CONST */
};

/* Compute in one precision. */
struct ir_stats_prec {
	int prec;                    /* a precision class (ir_precision_class) */
	int n_nodes;                 /* nodes computing in it (known or not) */
	double macs, flops;          /* of those whose cost is known */
};

struct ir_stats {
	char *graph_name;
	struct ir_node_cost *nodes;  /* the main graph's nodes, in order */
	int n_nodes;
	int n_unknown;               /* nodes whose cost is not known */
	struct ir_op_cost *ops;      /* one per op type, most FLOPs first */
	int n_ops;
	/* totals over the nodes whose cost is known (lower bounds when n_unknown > 0) */
	double macs, flops, bytes_read, bytes_written, intensity;
	/* constants, each tensor once (subgraphs included), by dtype, most bytes first */
	struct ir_stats_dtype *dtypes;
	int n_dtypes;
	double params, param_bytes, buffers, buffer_bytes, constants, constant_bytes;
	/*
	 * Activations: graph inputs (without initializer) and node outputs that
	 * are not constants, main graph only. A value is live from its producer
	 * (graph inputs: from the start) to its last consumer (graph outputs: to
	 * the end; unused outputs: their producer's step); at a node, its inputs
	 * and outputs are live together (nothing in place).
	 */
	int n_activations;
	int n_activations_unknown;   /* not counted in the sums below */
	double activation_bytes;     /* all of them together */
	double peak_bytes;           /* the largest live set */
	int peak_index;              /* node position of the peak (-1: no nodes) */
	int peak_node_id;            /* its id, -1 when none */
	/* symbols taken as 1 anywhere (sorted, copied; the first 64) */
	char **symbols;
	int n_symbols;
	/* compute by precision (ir_node_precision), most FLOPs first; nodes whose cost is known */
	struct ir_stats_prec *precs;
	int n_precs;
	void *mem;                   /* private: the blocks holding the nodes' strings */
};

/*
 * Computes the stats of the model's main graph. Returns NULL with a
 * message on no memory or interruption (IR_ENOMEM, IR_EINTR); free with
 * ir_stats_free. Nothing in the result points into the model.
 */
struct ir_stats *ir_stats_new(const struct ir_model *m, struct ir_diag *d);
void ir_stats_free(struct ir_stats *s);
/* The cost of one node of any graph of m into *out (cleared first; free
 * with ir_node_cost_clear, which leaves the nodes of an ir_stats alone).
 * 0 or IR_ENOMEM. */
int ir_node_cost(const struct ir_model *m, const struct ir_node *n, struct ir_node_cost *out, struct ir_diag *d);
void ir_node_cost_clear(struct ir_node_cost *c);
/* Whether ogsh has a cost function for the op. */
bool ir_cost_has_fn(int op);
/* "param", "buffer", "constant", "" */
const char *ir_const_role_name(int role);

/*
 * Precision: what a node computes in. Quantization is in the graph as
 * QuantizeLinear/DequantizeLinear (QDQ) and Cast: a Conv whose inputs come
 * from DequantizeLinear of int8 is an int8 convolution (what TensorRT and
 * onnxruntime run it as), though its own inputs are float.
 *
 * ir_precision_class: the class of an element type: IR_INT8 for int8 and
 * uint8, IR_INT4 for int4/uint4, IR_INT2 for int2/uint2, IR_INT16 for
 * int16/uint16, IR_F8E4M3FN for every float8, the type itself otherwise.
 * ir_precision_name: "int8", "int4", "int2", "int16", "fp8", "fp4", else the
 * type's name ("float32", "float16", "bfloat16").
 */
int ir_precision_class(int dtype);
const char *ir_precision_name(int prec);
/*
 * When value v is computed by a DequantizeLinear (directly, or through
 * Reshape, Transpose, Flatten, Squeeze, Unsqueeze or Identity), the element
 * type of that DequantizeLinear's x (int8, float8e4m3fn...; inferred or
 * declared), and the node into *dq (may be NULL); 0 otherwise.
 */
int ir_dequantized_dtype(const struct ir_value *v, const struct ir_node **dq);
/* Whether n is a DequantizeLinear whose x is a constant (a quantized weight
 * stored quantized); its type into *dtype (may be NULL). */
bool ir_node_is_weight_dq(const struct ir_node *n, int *dtype);
/*
 * The precision class node n computes in (run ir_infer first for the best
 * answer). QuantizeLinear and DequantizeLinear: their float side. Conv,
 * ConvTranspose, Gemm, MatMul (and ai.ogsh's FusedConv, FusedGemm): the
 * class of the DequantizeLinear their weight (input 1) comes from, else of
 * the one their data (input 0) comes from. Other nodes: the class of the
 * DequantizeLinear every non-constant float input comes from, when they all
 * do. Otherwise the node's own float type (output 0, else an input), else
 * output 0's type; 0 when nothing is known.
 */
int ir_node_precision(const struct ir_node *n);

/* How a QuantizeLinear or DequantizeLinear maps values: v_float = S * (v_quant - Z). */
enum ir_qdq_kind {
	IR_QDQ_UNKNOWN = 0,      /* the scale is not a constant */
	IR_QDQ_TENSOR,           /* one scale */
	IR_QDQ_CHANNEL,          /* a 1-D scale along `axis` */
	IR_QDQ_BLOCKED,          /* a scale per block of `block_size` along `axis` (opset 21) */
};
struct ir_qdq {
	enum ir_qdq_kind kind;
	int dtype;               /* the quantized type (int8, uint8, int4, float8e4m3fn...); 0: not known */
	int64_t axis;            /* per channel and blocked: the axis (made non-negative when x's rank is known) */
	int64_t block_size;      /* blocked */
	const struct ir_tensor *scale, *zero_point;   /* the constants (NULL: not constant, or no zero point) */
	uint64_t n_scales;
	double scale_min, scale_max;
	bool has_zero_point;     /* a zero point input is given (constant or not) */
	double zp_min, zp_max;   /* the zero points (0 and 0 when there are none) */
	bool weight;             /* DequantizeLinear: x is a constant; QuantizeLinear: x is a constant */
};
/* Fills *q for n; IR_ERR when n is no QuantizeLinear or DequantizeLinear. */
int ir_qdq_params(const struct ir_node *n, struct ir_qdq *q);

/* ------------------------------------------------------------------------ */
/* Calibration statistics (ir/calib.c)                                       */
/* ------------------------------------------------------------------------ */

/*
 * What running a float stage over representative data saw of each float
 * activation, streamed batch by batch and never keeping the activations:
 * min/max, a moving average of the per-batch min/max, and a histogram of
 * |x| with IR_CALIB_BINS bins over [0, hist_max]. When a batch holds a
 * larger |x| the range doubles (pairs of bins merge) until it fits, so
 * memory stays bounded by the histograms. The quantization methods are
 * functions of these (ir_calib_amax): switching method needs no new run.
 * Calibration is session data, not graph data (DESIGN.md); it is saved in a
 * cache file keyed by the model's content hash, the stage and the data's hash.
 */
#define IR_CALIB_BINS 2048
#define IR_CALIB_EMA 0.01          /* the moving average's factor: ema = ema + 0.01 * (batch - ema) */

struct ir_calib_tensor {
	char *name;                /* the value's name in the stage calibrated */
	uint64_t count;            /* finite elements seen */
	uint64_t n_nonfinite;      /* NaN and Inf elements (left out of everything else) */
	double min, max;           /* over every batch (finite elements) */
	double ema_min, ema_max;   /* moving average of the per-batch min and max (the first batch sets them) */
	uint64_t batches;
	double hist_max;           /* the bins cover |x| in [0, hist_max]: bin i is [i, i+1) * hist_max / IR_CALIB_BINS;
				      0 until a non-zero |x| is seen */
	uint64_t *hist;            /* IR_CALIB_BINS counts (|x| == hist_max counts in the last bin) */
	/* per-channel mean |x| over the last axis (AWQ's salient channels), when asked for */
	int n_chan;                /* 0: not kept */
	double *chan_abssum;       /* n_chan sums of |x| */
	uint64_t chan_rows;        /* how many rows those sums are over */
};

struct ir_calib {
	struct ir_calib_tensor *t;
	int n, cap;
	char model_hash[17];       /* ir_model_hash of the stage calibrated, 16 hex digits */
	int stage;                 /* the stage's number in the session that calibrated */
	char data_hash[17];        /* the data's hash (exec_data_hash), 16 hex digits */
	char data_desc[256];       /* what the data was, for people: "tests/data/digits/train.npz (1,257 samples)" */
	bool random;               /* --data=random: the ranges say nothing about accuracy */
	uint64_t samples;          /* samples run */
	int batch;                 /* samples per batch */
};

void ir_calib_init(struct ir_calib *c);
void ir_calib_clear(struct ir_calib *c);   /* frees everything; c is then empty (as after init) */
/* The tensor called `name`, or NULL. */
struct ir_calib_tensor *ir_calib_find(const struct ir_calib *c, const char *name);
/* The tensor called `name`, added (empty) when missing; NULL on no memory. */
struct ir_calib_tensor *ir_calib_add_tensor(struct ir_calib *c, const char *name);
/*
 * Adds one batch of n float elements to t's statistics (one batch: one
 * moving-average step). n_chan > 0 also sums |x| per channel of the last
 * axis (n must then be a multiple of n_chan; the first call fixes n_chan).
 * 0 or IR_ENOMEM.
 */
int ir_calib_observe(struct ir_calib_tensor *t, const float *x, uint64_t n, int n_chan, struct ir_diag *d);
/*
 * ir_calib_observe in parts, for a batch whose elements are summarised
 * elsewhere (the GPU: kernels/cuda/k_calib.c); ir_calib_observe is
 * these with its own loops, so both give the same statistics.
 * ir_calib_observe_stats takes the batch's n elements, nonfinite of them
 * NaN or Inf, and min and max of the finite ones (ignored when none is
 * finite): checks and fixes n_chan as ir_calib_observe does, counts the
 * batch, moves the range (doubling hist_max, merging bins, when the
 * batch's max |x| exceeds it) and updates min/max/ema/count; 0, IR_ERR or
 * IR_ENOMEM (on IR_ERR t is unchanged). Then the batch's IR_CALIB_BINS counts
 * of |x| go to ir_calib_add_hist, each finite x binned as
 *   k = (uint32_t)(fabsf(x) * ir_calib_hist_scale(t)), clamped to IR_CALIB_BINS - 1,
 * a float multiply (scale 0: every finite x in bin 0); and with n_chan > 0
 * the per-channel sums of the finite |x| over `rows` rows to ir_calib_add_chan.
 */
int ir_calib_observe_stats(struct ir_calib_tensor *t, uint64_t n, int n_chan, uint64_t nonfinite, double min,
			   double max, struct ir_diag *d);
float ir_calib_hist_scale(const struct ir_calib_tensor *t);
void ir_calib_add_hist(struct ir_calib_tensor *t, const uint64_t *bins);
void ir_calib_add_chan(struct ir_calib_tensor *t, const double *sums, uint64_t rows);
/* A deep copy of c into *out (initialised here); 0 or IR_ENOMEM. */
int ir_calib_copy(struct ir_calib *out, const struct ir_calib *c);

/* How a range is taken from the statistics. */
enum ir_calib_method {
	IR_CALIB_MAX = 0,        /* the largest |x| seen */
	IR_CALIB_PERCENTILE,     /* the p-th percentile of |x| (default 99.99) */
	IR_CALIB_ENTROPY,        /* TensorRT's: the threshold minimising KL(P||Q), 128 levels, from bin 128 up */
	IR_CALIB_MSE,            /* the threshold minimising the int8 quantization error over the histogram */
	IR_CALIB_METHOD_COUNT
};
struct ir_calib_how {
	enum ir_calib_method method;
	double pct;              /* IR_CALIB_PERCENTILE: in (0, 100] */
};
/* Parses "max", "percentile", "percentile=99.9", "entropy", "mse"; 0 or
 * IR_ERR ("unknown calibration method 'x' (max, percentile=P, entropy, mse)"). */
int ir_calib_method_parse(const char *s, struct ir_calib_how *out, struct ir_diag *d);
/* "max", "percentile=99.99", "entropy", "mse" into buf. */
const char *ir_calib_method_name(const struct ir_calib_how *h, char *buf, size_t size);
/*
 * The threshold T >= 0 the method picks for t: values in [-T, T] map onto
 * the quantized range, larger ones saturate. 0 when t saw nothing (or only
 * zeros). Pure function of the statistics: fast enough to re-derive every
 * tensor's range for another method at once.
 */
double ir_calib_amax(const struct ir_calib_tensor *t, const struct ir_calib_how *h);
/* The asymmetric range the method picks: [max(min, -T), min(max, T)], widened to hold 0. */
void ir_calib_range(const struct ir_calib_tensor *t, const struct ir_calib_how *h, double *lo, double *hi);

/*
 * The cache file: everything in c (keys, statistics, histograms). Saved
 * atomically (a temporary file renamed over `path`). ir_calib_load reads
 * and checks a file (every count, size and number; a malformed or truncated
 * file is refused with where and why); ir_calib_parse does the same on
 * bytes in memory (the fuzz target). On error *c is left empty.
 */
int ir_calib_save(const struct ir_calib *c, const char *path, struct ir_diag *d);
int ir_calib_load(const char *path, struct ir_calib *c, struct ir_diag *d);
int ir_calib_parse(const void *buf, size_t n, const char *name, struct ir_calib *c, struct ir_diag *d);

/*
 * A 64-bit hash of the model's content (opsets, the graph's structure,
 * names, attributes, types and every initializer's bytes) as 16 lowercase
 * hex digits into out[17]. Clones hash the same; any edit changes it.
 */
void ir_model_hash(const struct ir_model *m, char out[17]);
/* FNV-1a-style 64-bit hash of bytes, continuing from h (start with IR_HASH_SEED). */
#define IR_HASH_SEED 0xcbf29ce484222325ULL
uint64_t ir_hash_bytes(uint64_t h, const void *p, size_t n);

/*
 * ai.ogsh FusedAttention's layouts (ir/attn_layout.c). `layout` names the
 * axes of Q, K and V in memory order with the letters B (batch), S
 * (sequence), H (heads) and D (head size): BHSD (the default) or BSHD, each
 * 4-D (or 3-D [batch, seq, heads*size] with q_num_heads/kv_num_heads). A
 * packed layout adds the letter 3, the Q/K/V axis, and input 0 then holds
 * all three (inputs 1 and 2 are omitted): BS3HD is [batch, seq, 3, heads,
 * size] (a fused QKV projection), SB3HD the sequence-first form of torch's
 * MultiheadAttention. A packed input may merge its trailing 3, H and D into
 * its last axis ([batch, seq, 3*heads*size]; q_num_heads gives the heads).
 * `out_layout` orders the 4-D output (B, S, H in any order, then D); by
 * default it is the input layout without its 3. D is last everywhere.
 */
struct ir_attn_layout {
	char in[6], out[5];    /* the letters */
	bool packed;           /* in has a 3 */
	bool has_out;          /* out_layout was given */
};
/* 0, or -1 with why (layout NULL: BHSD; out_layout NULL: the default). */
int ir_attn_layout_parse(const char *layout, const char *out_layout, struct ir_attn_layout *l, char *why, size_t size);
/* Sizes and element strides of Q (which 0), K (1) or V (2) read with l from
 * a tensor of dims[rank]: (b, h, s, d) is at off + b*sb + h*sh + s*ss + d.
 * heads: q_num_heads for Q and packed input, kv_num_heads for K, V (0:
 * none). 0, or -1 with why. */
struct ir_attn_view {
	int64_t b, h, s, d;
	int64_t sb, sh, ss, off;
};
int ir_attn_view(const struct ir_attn_layout *l, int which, int rank, const int64_t *dims, int64_t heads,
		 struct ir_attn_view *v, char *why, size_t size);
/* The 4-D output's dims in l->out order and its strides. */
void ir_attn_out(const struct ir_attn_layout *l, int64_t b, int64_t h, int64_t s, int64_t d, int64_t dims[4],
		 int64_t *sb, int64_t *sh, int64_t *ss);

#endif
