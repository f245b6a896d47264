/*
 * cuda.h - the GPU kernels as the CUDA device (exec/cuda.c) sees them.
 * C only (included by exec/ and by the kernels' C entry files); the .cu
 * files of each family include only their own launcher header
 * (kernels/cuda/k_FAMILY.h), which uses plain C types.
 *
 * A GPU kernel file has three layers (DESIGN.md): the __global__ kernel and
 * a launcher taking a stream (k_FAMILY.cu), and the entry that reads
 * the node (k_FAMILY.c): `supports` at plan time, `prepare` once per plan
 * (descriptors, algorithm choice, workspace size), `run` per execution.
 *
 * To add a GPU kernel for an op: write supports/prepare/run in the
 * k_FAMILY.c of its family, list it in that file's table (ended by
 * {.op = -1}); kernels/cuda/registry.c collects the tables. The GPU op
 * test (tests/gpu) checks every listed op against the CPU reference.
 */
#ifndef OGSH_KERNELS_CUDA_H
#define OGSH_KERNELS_CUDA_H

#include "kernels/kernels.h"

#include <cuda_runtime_api.h>

/* A tensor in device memory. Shapes are known before anything runs: the
 * planner takes them from shape inference with the inputs' dims bound. */
struct cuda_tensor {
	void *data;                   /* device memory; NULL while planning, and for an omitted input */
	int dtype;                    /* ONNX element type; 0 for an omitted input or output */
	int rank;
	int64_t dims[IR_MAX_RANK];
	/* the value on the host when it is a constant (initializer, Constant,
	 * or folded by the planner), else NULL: kernels read small inputs
	 * such as Slice's starts or Pad's pads from here */
	const struct ir_tensor *host;
	/* channels-last: a 4-D [N, C, H, W] value stored as [N, H, W, C]. The
	 * planner (exec/plan.c, plan_layout) sets it only on values whose
	 * producer and readers all take it: Conv and FusedConv in float16 and
	 * bfloat16, MaxPool, AveragePool, GlobalAveragePool/GlobalMaxPool
	 * (input), and elementwise ops whose operands are all of one shape */
	bool nhwc;
};
/* Elements of t (1 for rank 0). */
int64_t cuda_numel(const struct cuda_tensor *t);

/* Per-run state shared by the kernels of one plan (the CUDA device, exec/cuda.c, owns it). */
struct cuda_ctx {
	cudaStream_t stream;
	int device;
	int sm;                       /* compute capability, major*10 + minor (90 for H100) */
	bool tf32;                    /* `set tf32 on`: TF32 tensor cores for float32 */
	void *cudnn;                  /* cudnnHandle_t, made by cuda_cudnn_handle() on first use */
	void *cublaslt;               /* cublasLtHandle_t, made by cuda_cublaslt_handle() */
	struct cuda_tune *tune;       /* the tuning cache (kernels/cuda/tune.c), may be NULL */
	bool tuning;                  /* prepare may time candidate algorithms */
};

/* One node on the GPU. */
struct cuda_kctx {
	const struct ir_node *node;
	int64_t opset;                /* the version of the node's domain the model imports */
	int n_in, n_out;
	const struct cuda_tensor *in;
	struct cuda_tensor *out;      /* dtype, rank and dims set by the planner; data set before run */
	struct cuda_ctx *ctx;
	struct ir_diag *d;            /* errors: without the node's name (the executor adds it) */
	void *state;                  /* the kernel's own, from prepare; freed by the table's release */
	size_t ws_bytes;              /* prepare sets: device workspace run needs */
	void *ws;                     /* run: at least ws_bytes of device memory (NULL when 0) */
	char impl[96];                /* prepare or run sets: what computes it, for `profile`
				       * ("cudnn conv IMPLICIT_PRECOMP_GEMM", "cublasLt gemm+bias+relu") */
};

struct cuda_kernel {
	int op;                                   /* enum ir_op; -1 ends a table */
	/* whether this node (types, attributes, constant inputs) can run;
	 * in/out have shapes but no data; false with a reason */
	bool (*supports)(const struct cuda_kctx *k, char *why, size_t size);
	/* once per plan, may be NULL; may time algorithms when ctx->tuning */
	int (*prepare)(struct cuda_kctx *k);
	/* launches on ctx->stream; must be capturable in a CUDA graph: no
	 * synchronisation, no allocation, no host copies */
	int (*run)(struct cuda_kctx *k);
	void (*release)(void *state);             /* may be NULL */
};

/* The GPU kernel of an op, or NULL. */
const struct cuda_kernel *cuda_kernel_find(int op);
/* Every op with a GPU kernel (for the op test and `--coverage`); returns how many. */
int cuda_kernel_ops(int *ops, int max);

/* The families' tables (each k_FAMILY.c exports one). */
extern const struct cuda_kernel cuda_k_elementwise[];
extern const struct cuda_kernel cuda_k_tensor[];
extern const struct cuda_kernel cuda_k_reduce[];
extern const struct cuda_kernel cuda_k_conv[];
extern const struct cuda_kernel cuda_k_gemm[];
extern const struct cuda_kernel cuda_k_quant[];
extern const struct cuda_kernel cuda_k_qlinear[];   /* the planner's quantized islands (exec/qfuse.h) */

/* ---- errors: every CUDA, cuDNN and cuBLAS status is checked ---- */

/* 0 when err is cudaSuccess, else IR_ERR (IR_ENOMEM for out of memory) with
 * "CALL: cuda error NAME: TEXT" in d. */
int cuda_check(cudaError_t err, const char *call, struct ir_diag *d);
/* Checks the last launch (cudaGetLastError) the same way. */
int cuda_check_launch(const char *kernel, struct ir_diag *d);

/* ---- libraries, opened with dlopen on first use (kernels/cuda/libs.c) ---- */

/* The handles, made on first use on ctx->stream; NULL with an error in d when the
 * library is missing. */
void *cuda_cudnn_handle(struct cuda_ctx *ctx, struct ir_diag *d);
void *cuda_cublaslt_handle(struct cuda_ctx *ctx, struct ir_diag *d);

/* ---- the tuning cache (kernels/cuda/tune.c) ---- */

/*
 * Choices of kernels timed once per shape, kept in a file keyed by the GPU,
 * driver and library versions (`fingerprint`): a file made elsewhere is
 * ignored, so the second run of a model on the same machine starts fast.
 * Keys name the op, shapes, dtypes and options; values are small integers
 * (an algorithm id, a heuristic index) and the time measured.
 */
struct cuda_tune *cuda_tune_open(const char *path, const char *fingerprint, struct ir_diag *d);
/* Writes the file atomically when something was added; 0 or IR_ERR. */
int cuda_tune_save(struct cuda_tune *t, struct ir_diag *d);
void cuda_tune_free(struct cuda_tune *t);
int cuda_tune_count(const struct cuda_tune *t);
bool cuda_tune_get(struct cuda_tune *t, const char *key, int *choice, float *ms);
void cuda_tune_put(struct cuda_tune *t, const char *key, int choice, float ms);

/* ---- calibration statistics on the device (k_calib.c) ---- */

/* Scratch device and host memory of cuda_calib_observe, kept between calls
 * (NULL at first: made on first use); freed by cuda_calib_ws_free. */
struct cuda_calib_ws;
/*
 * Adds one batch, the device tensor x (float, float16 or bfloat16; nhwc
 * allowed), to t's statistics as ir_calib_observe would add the same
 * values (equal histogram counts, min, max, ema, counts; per-channel sums
 * of the last axis when n_chan > 0, equal within double rounding), on
 * stream st, which it synchronises. Downloads only the small results.
 * 0, IR_ERR or IR_ENOMEM.
 */
int cuda_calib_observe(struct ir_calib_tensor *t, const struct cuda_tensor *x, int n_chan, cudaStream_t st,
		       struct cuda_calib_ws **ws, struct ir_diag *d);
void cuda_calib_ws_free(struct cuda_calib_ws *ws);

/* ---- small helpers for entries ---- */

/* Whether dtype is one of float, float16, bfloat16. */
bool cuda_is_float(int dtype);
/* Contiguous strides of t in elements (strides[rank-1] = 1). */
void cuda_strides(const struct cuda_tensor *t, int64_t *strides);
/* Strides of `t` broadcast to `rank` dims of `out` (0 on broadcast dims),
 * aligned to the right as ONNX broadcasting does. */
void cuda_bcast_strides(const struct cuda_tensor *t, int rank, const int64_t *out_dims, int64_t *strides);

#endif
