/*
 * device.h - what the planner (exec/plan.c) asks of a device: a table of
 * functions a device fills (exec/cuda.c fills exec_device_cuda). Private
 * to exec/.
 *
 * The planner does everything that does not depend on the device: binding
 * the inputs' dims, shape inference, folding, placement (asking the
 * device's `supports`), layout, views, liveness and the arena plan, the CPU
 * nodes and the host copies. The device owns its context (stream, library
 * handles, the tuning cache), its memory, its kernels' per-node state and
 * its clocks. Every function that can fail returns 0 or an error code with
 * the message in d.
 */
#ifndef OGSH_EXEC_DEVICE_H
#define OGSH_EXEC_DEVICE_H

#include "exec/exec.h"

/* One tensor of a node as the planner knows it before anything runs. */
struct exec_dev_io {
	void *data;                   /* device memory: NULL while placing, set before prepare */
	int dtype;                    /* ONNX element type; 0 for an omitted input or output */
	int rank;
	int64_t dims[IR_MAX_RANK];
	const struct ir_tensor *host; /* a constant's value on the host (initializer, folded), else NULL */
	bool nhwc;                    /* a 4-D [N, C, H, W] value stored as [N, H, W, C] (the layout plan) */
};

/* One node of the plan's graph with its tensors. */
struct exec_dev_node {
	const struct ir_node *node;
	int64_t opset;                /* the version of the node's domain the model imports */
	int n_in, n_out;
	const struct exec_dev_io *in, *out;
};

/* One plan's device: context, stream, handles (the device's own). */
struct exec_dev_ctx;

struct exec_device {
	const char *name;             /* "cuda" */
	/* whether the device can be used here; false with one line in why */
	bool (*available)(char *why, size_t size);

	/* ---- placement (no context needed: called before open) ---- */
	/* whether the device has a kernel for the node's op at all; false with a reason */
	bool (*has_kernel)(const struct ir_node *n, char *why, size_t size);
	/* whether the device runs this node with these types, shapes, layouts
	 * and constant inputs (data not set): 1, or 0 with a reason in why, or
	 * a negative error code (out of memory) */
	int (*supports)(const struct exec_dev_node *dn, char *why, size_t size, struct ir_diag *d);

	/* ---- the context ---- */
	/* makes the context (o->tf32 and the like are read) */
	int (*open)(const struct exec_plan_opts *o, struct exec_dev_ctx **out, struct ir_diag *d);
	/* frees what open and the device functions made (the capture, the
	 * tuning cache, handles, the stream); per-node state and memory are
	 * released by the planner first */
	void (*close)(struct exec_dev_ctx *dc);

	/* ---- the tuning cache ---- */
	/* the cache's key of this machine (device, driver and library versions) */
	void (*fingerprint)(struct exec_dev_ctx *dc, char *buf, size_t size);
	/* opens the cache file for prepare to read and fill; IR_ERR when it cannot be used */
	int (*tune_open)(struct exec_dev_ctx *dc, const char *path, const char *fingerprint, struct ir_diag *d);
	/* the choices it holds; -1 when no cache is open */
	int (*tune_count)(struct exec_dev_ctx *dc);
	int (*tune_save)(struct exec_dev_ctx *dc, struct ir_diag *d);

	/* ---- nodes ---- */
	/* once per plan, with the tensors' data set: descriptors, algorithm
	 * choice (may time candidates), the workspace size and what computes
	 * it (impl, at most 96 bytes with the 0). *state is the device's, freed
	 * by release; NULL after a failure */
	int (*prepare)(struct exec_dev_ctx *dc, const struct exec_dev_node *dn, void **state, size_t *ws_bytes,
		       char *impl, size_t impl_size, struct ir_diag *d);
	void (*release)(struct exec_dev_ctx *dc, void *state);
	/* launches the node on the context's stream (capturable: no synchronisation,
	 * no allocation); ws: at least ws_bytes of device memory, NULL when 0 */
	int (*launch)(struct exec_dev_ctx *dc, void *state, void *ws, struct ir_diag *d);
	/* what computed it in the last launch (kernels that choose when they run name it then); may be "" */
	const char *(*impl)(const void *state);

	/* ---- memory ---- */
	/* `what` names the allocation in errors ("the activation arena") */
	int (*alloc)(struct exec_dev_ctx *dc, uint64_t bytes, const char *what, void **p, struct ir_diag *d);
	void (*free)(struct exec_dev_ctx *dc, void *p);
	/* host to device; wait: done when it returns, else queued on the stream.
	 * `what` names the copy in errors */
	int (*upload)(struct exec_dev_ctx *dc, void *dst, const void *src, uint64_t n, bool wait, const char *what,
		      struct ir_diag *d);
	/* device to host, queued on the stream (sync before reading dst) */
	int (*download)(struct exec_dev_ctx *dc, void *dst, const void *src, uint64_t n, const char *what,
			struct ir_diag *d);
	/* waits for the stream; errors say `what` */
	int (*sync)(struct exec_dev_ctx *dc, const char *what, struct ir_diag *d);
	/* waits for the stream, ignoring errors (cleaning up) */
	void (*sync_quiet)(struct exec_dev_ctx *dc);
	/* forgets a launch error so it does not surface in a later check */
	void (*clear_error)(struct exec_dev_ctx *dc);

	/* ---- graph capture: record the launches once, replay them ---- */
	/* starts recording; IR_ERR with why ("capture failed: ...") */
	int (*capture_begin)(struct exec_dev_ctx *dc, char *why, size_t size);
	/* stops recording the launches made since capture_begin; rc and err:
	 * how those launches went (err may be NULL); keeps the graph for replay
	 * when all went well, else IR_ERR with why */
	int (*capture_end)(struct exec_dev_ctx *dc, int rc, const char *err, char *why, size_t size);
	int (*replay)(struct exec_dev_ctx *dc, struct ir_diag *d);

	/* ---- timing: events recorded on the stream ---- */
	int (*event_new)(struct exec_dev_ctx *dc, void **ev, struct ir_diag *d);
	void (*event_free)(struct exec_dev_ctx *dc, void *ev);
	int (*event_record)(struct exec_dev_ctx *dc, void *ev, struct ir_diag *d);
	/* waits until ev has happened; errors say `what` */
	int (*event_wait)(struct exec_dev_ctx *dc, void *ev, const char *what, struct ir_diag *d);
	/* milliseconds from e0 to e1 (both happened) */
	int (*event_ms)(struct exec_dev_ctx *dc, void *e0, void *e1, double *ms, struct ir_diag *d);

	/* ---- calibration ---- */
	/* ir_calib_observe of the device value x (exec_plan_calib_observe) */
	int (*calib_observe)(struct exec_dev_ctx *dc, const struct exec_dev_tensor *x, struct ir_calib_tensor *t,
			     int n_chan, struct ir_diag *d);
};

#ifdef OGSH_HAVE_CUDA
extern const struct exec_device exec_device_cuda;
#endif

/*
 * A node of a plan's graph (the clone, after inference) as a device sees
 * it, from the types inference gives and the initializers' values (host):
 * for planning steps that ask the device about a node before placement
 * (plan.c's plan_graph). in and out have n->n_inputs and n->n_outputs
 * entries. 1, or 0 when some tensor's type or dims are not known.
 */
int exec_dev_node_of(const struct ir_model *m, const struct ir_node *n, struct exec_dev_node *dn,
		     struct exec_dev_io *in, struct exec_dev_io *out);

/* The default tuning cache file: $XDG_CACHE_HOME/ogsh/tune, else
 * ~/.cache/ogsh/tune; NULL when neither is set (malloc'd). */
char *exec_default_tune_path(void);

#endif
