/*
 * kernels.h - the arithmetic: CPU reference kernels (kernels/cpu/) and, in a
 * CUDA build, the GPU kernels (kernels/cuda/). The only public header of
 * kernels/.
 */
#ifndef OGSH_KERNELS_H
#define OGSH_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

/* Summary statistics of n elements of one ONNX element type. */
struct kern_stats {
	uint64_t count;      /* elements looked at */
	uint64_t nan, inf;   /* NaN and +-Inf elements (floats only) */
	uint64_t zeros;
	double min, max;     /* over finite elements; NaN if there are none */
	double mean, std;    /* population std, over finite elements */
	double abs_max;
};

/*
 * Computes statistics of `n` elements of `dtype` in raw ONNX layout at
 * `data` (may be unaligned). Complex types use the real parts. Returns
 * false if stopped by ir_interrupted (partial results in *st).
 */
bool cpu_stats(int dtype, const void *data, uint64_t n, struct kern_stats *st);

/* What the CUDA side of the build was compiled with and what the machine
 * has (libraries opened with dlopen, nothing linked). In a build without
 * CUDA, `compiled` is false and the rest is zero. */
struct kern_cuda_info {
	bool compiled;
	int runtime_version;   /* cudaRuntimeGetVersion, e.g. 13000 */
	int driver_version;    /* 0: no driver */
	int device_count;
	long cudnn_version;    /* cudnnGetVersion of the library found; 0: none */
	long cudnn_built;      /* CUDNN_VERSION of the headers ogsh was built with */
	int cublas_version;    /* cublasLtGetVersion; 0: none found */
	char device_name[256]; /* device 0 */
};
void kern_cuda_info(struct kern_cuda_info *info);

/* ------------------------------------------------------------------------ */
/* The CPU reference kernels (kernels/cpu/)                                  */
/* ------------------------------------------------------------------------ */

#include "ir/ir.h"

/*
 * A value while a graph runs: a tensor, a sequence of tensors, or nothing
 * (an omitted input or output, or an empty optional). Values own one
 * reference to each tensor they hold.
 */
enum kern_kind { KV_NONE = 0, KV_TENSOR, KV_SEQ };
struct kern_value {
	enum kern_kind kind;
	bool optional;              /* of an optional type (KV_NONE then means "empty") */
	struct ir_tensor *t;        /* KV_TENSOR */
	struct ir_tensor **items;   /* KV_SEQ: n_items tensors (owned references) */
	int n_items;
	int elem;                   /* KV_SEQ: element dtype (0 when not known) */
};
/* Drops what a value holds and makes it KV_NONE. */
void kern_value_clear(struct kern_value *v);
/* Stores v as element i of dtype (rounding, saturating float8; see kst in cpu/cpu.h). */
void kern_store_f64(int dtype, void *p, uint64_t i, double v);
/* Copies a value (tensors shared by reference); 0 or IR_ENOMEM. */
int kern_value_copy(struct kern_value *dst, const struct kern_value *src);
/* Slice of one dim of size `dim` by start/end/step as ONNX's Slice clamps
 * them (negative indices counted from the end; step != 0): the first index
 * *s0 and the number of elements *len. Used by the CPU and GPU kernels. */
void kern_slice_dim(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *s0, int64_t *len);

struct cpu_kctx;

/* What the executor offers kernels: output allocation (so it can reuse
 * buffers) and running a subgraph (If, Loop, Scan, SequenceMap). */
struct cpu_exec_hooks {
	/* A new tensor for output `slot` of the running node (zeroed, or a
	 * reused buffer: the kernel must write every element). NULL with a
	 * message in k->d on overflow or no memory. */
	struct ir_tensor *(*alloc)(struct cpu_kctx *k, int slot, int dtype, int rank, const int64_t *dims);
	/* Runs `g` (a subgraph of the running node) with its formal inputs
	 * bound to `in` (n_in of them); fills `out` (g->n_outputs values, owned
	 * by the caller). Values of enclosing graphs are found by name. */
	int (*run_graph)(struct cpu_kctx *k, const struct ir_graph *g, int n_in, const struct kern_value *in,
			 struct kern_value *out);
	void *arg;
};

/*
 * One node being run. `in` has n_in entries (KV_NONE for an omitted
 * optional input) whose tensors have aligned data; the kernel fills `out`
 * (n_out entries, all KV_NONE on entry), normally through cpu_out(). On
 * failure it returns IR_ERR/IR_ENOMEM/IR_EINTR with a message in `d`
 * (without the node's name: the executor adds it).
 */
struct cpu_epi;
struct cpu_kctx {
	const struct ir_node *node;
	int64_t opset;              /* the version of the node's domain the model imports */
	int n_in, n_out;
	const struct kern_value *in;
	struct kern_value *out;
	struct ir_diag *d;
	const struct cpu_exec_hooks *hooks;
	struct cpu_epi *epi;        /* private to kernels/cpu (a fused op's epilogue); NULL */
	const char *impl;           /* set by a kernel that picks among algorithms: the one that
				     * ran ("ogsh cpu winograd F(2x2,3x3)", a static string); NULL */
};

typedef int (*cpu_kernel_fn)(struct cpu_kctx *k);

/* Whether there is a CPU kernel for the node (its op, and for ops whose
 * support depends on attributes or types, those). When false, `why` says
 * what is missing ("has no cpu kernel", "mode 'xyz' is not supported"). */
bool cpu_supports(const struct ir_node *n, char *why, size_t size);
/* The kernel of an op, or NULL. */
cpu_kernel_fn cpu_kernel(int op);
/* Runs the node's kernel; IR_ERR naming what is missing if there is none. */
int cpu_run_node(struct cpu_kctx *k);

/*
 * The CPU kernels' threads (kernels/cpu/pool.c). Results do not depend on
 * the count: kernels split their work by output elements.
 */
/* The thread count the kernels use (>= 1): set by cpu_set_threads, else
 * cpu_default_threads(). */
int cpu_threads(void);
/* Sets the thread count: n >= 1, or 0 for cpu_default_threads(). Stops
 * the pool's threads (the next parallel kernel starts them again). 0, or
 * IR_ERR when n < 0 or a kernel is running on the pool. */
int cpu_set_threads(int n);
/* OGSH_THREADS from the environment when it is a number >= 1, else
 * cpu_machine_cores(). */
int cpu_default_threads(void);
/* False when OGSH_THREADS is set but not a number >= 1 (then ignored). */
bool cpu_threads_env_ok(void);
/* The cores this process may run on (its affinity mask), at least 1. */
int cpu_machine_cores(void);
/* For tests: caps every kernel's grain (the least work a thread takes) at
 * `cap` indexes, so that even small tensors are split among the threads
 * and range edges fall everywhere; 0 restores the kernels' own grains. */
void cpu_set_grain_cap(int64_t cap);
/* Stops and joins the pool's threads, if any (also done at exit); the next
 * parallel kernel starts them again. */
void cpu_pool_stop(void);
/* Drops the packed forms of constant weights the kernels keep across runs
 * (kernels/cpu/wcache.c); exec_cache_clear() calls it (a model closed,
 * exit), so a closed model's weights do not wait for the next miss. */
void cpu_wcache_clear(void);

#endif
