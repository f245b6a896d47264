/*
 * exec.h - running graphs: the CPU reference interpreter (exec/run.c),
 * plans on a device (exec/plan.c, the planner; exec/cuda.c, the CUDA
 * device), timing, data and the comparison of numbers. The only public
 * header of exec/.
 */
#ifndef OGSH_EXEC_H
#define OGSH_EXEC_H

#include "ir/ir.h"
#include "kernels/kernels.h"

/*
 * Statistics of a tensor's elements. String tensors have none (an error);
 * a tensor with no elements gives count 0 and NaN min/max. Returns 0,
 * IR_EINTR if stopped by Ctrl-C, or IR_ERR.
 */
int exec_tensor_stats(const struct ir_tensor *t, struct kern_stats *st, struct ir_diag *d);

/* ------------------------------------------------------------------------ */
/* Named values (inputs, outputs, kept intermediates)                        */
/* ------------------------------------------------------------------------ */

struct exec_binding {
	char *name;
	struct kern_value v;
};
struct exec_values {
	struct exec_binding *a;
	int n, cap;
};
/* Appends a binding, taking over `v` (it is left KV_NONE). 0 or IR_ENOMEM. */
int exec_values_add(struct exec_values *vs, const char *name, struct kern_value *v);
/* Appends a tensor (taking a new reference). */
int exec_values_add_tensor(struct exec_values *vs, const char *name, struct ir_tensor *t);
const struct kern_value *exec_values_find(const struct exec_values *vs, const char *name);
void exec_values_clear(struct exec_values *vs);

/* ------------------------------------------------------------------------ */
/* Running a graph on the CPU reference interpreter (exec/run.c)             */
/* ------------------------------------------------------------------------ */

/*
 * exec_run interprets the graph node by node with the kernels of
 * kernels/cpu (cpu_supports, cpu_run_node): the reference every device is
 * checked against. Devices run plans (below), not exec_run.
 */
struct exec_opts {
	bool keep_all;          /* keep every value the main graph computes (in `all`) */
	bool time_nodes;        /* fill exec_report.node_ms */
	/* called after each node of the main graph (may be NULL) */
	void (*progress)(void *arg, int done, int total);
	void *progress_arg;
	uint64_t max_live;      /* activation memory limit in bytes; 0: half the machine's memory */
	uint64_t max_steps;     /* limit on nodes run (subgraph iterations included); 0: none */
	/* called for each output of each node of the main graph once it is
	 * computed, before its buffer may be reused (calibration streams
	 * statistics through it; may be NULL). A non-zero return stops the run
	 * with that code (the callback puts the message in its own state). */
	int (*on_value)(void *arg, const struct ir_value *v, const struct kern_value *kv);
	void *on_value_arg;
};

struct exec_report {
	double ms;              /* wall time of the run */
	int n_nodes;            /* nodes of the main graph run */
	uint64_t peak_bytes;    /* the largest set of live activations (bytes) */
	uint64_t total_bytes;   /* bytes of every activation made (no reuse) */
	uint64_t n_allocs, n_reused;   /* activation buffers made, and of those taken from freed ones */
	double *node_ms;        /* time_nodes: per main-graph node in order (owned; exec_report_clear) */
	const char **node_impl; /* time_nodes: per main-graph node, the CPU kernel's algorithm when it
				 * picks one (static strings, cpu_kctx.impl) or NULL (the array owned) */
	int n_node_ms;
};
void exec_report_clear(struct exec_report *r);

/* Drops what CPU runs keep across runs: the aligned copies of mapped
 * initializers (a mapped tensor at an odd offset is copied once and the
 * copy reused while its model lives), the activation buffers of the last
 * run (reused by the next run of the same model) and the kernels' packed
 * weights (cpu_wcache_clear). Call it when a model is closed, before
 * exiting, or to give memory back. */
void exec_cache_clear(void);

/* Whether every node of the main graph (subgraphs and the bodies of the
 * model functions it calls included) can run on the CPU reference; when
 * not, `why` names the first node that cannot: "n17 'NonMaxSuppression'
 * has no cpu kernel". */
bool exec_graph_runnable(const struct ir_model *m, char *why, size_t size);
bool exec_node_runnable_at(const struct ir_model *m, const struct ir_node *n, int depth, char *why, size_t size);

/*
 * Checks `inputs` against the graph's declared inputs: every input without
 * an initializer is given, dtypes match, ranks and fixed dims match, and a
 * symbolic dim has one value everywhere it appears. Extra names are errors.
 * 0, or IR_ERR naming the input and the dims.
 */
int exec_check_inputs(const struct ir_model *m, const struct exec_values *inputs, struct ir_diag *d);

/*
 * The cost model's FLOPs and bytes (read + written) of every node of the
 * main graph, in graph order, with the graph's inputs bound to the dims of
 * `inputs` (a symbolic batch or sequence counts as given, not as 1): on a
 * clone, with shapes inferred. A node whose cost is unknown gets 0. 0, or
 * an error (out of memory, inference failed).
 */
int exec_node_costs(const struct ir_model *m, const struct exec_values *inputs, int n, double *flops, double *bytes,
		    struct ir_diag *d);

/*
 * Runs the model's main graph on `inputs` (checked with exec_check_inputs)
 * and appends its outputs, in order, to `outputs`. With opts->keep_all,
 * every value computed is appended to `all` (non-NULL) as well. Buffers of
 * values no later node reads are reused (the memory plan); `rep` (may be
 * NULL) gets the figures. Errors name the node: "n17 'NonMaxSuppression'
 * has no cpu kernel". Returns 0, IR_ERR, IR_ENOMEM or IR_EINTR (Ctrl-C).
 */
int exec_run(const struct ir_model *m, const struct exec_values *inputs, const struct exec_opts *opts,
	     struct exec_values *outputs, struct exec_values *all, struct exec_report *rep, struct ir_diag *d);

/* ------------------------------------------------------------------------ */
/* Plans on the GPU (exec/plan.c, exec/cuda.c): runs, timing and profiles   */
/* ------------------------------------------------------------------------ */

/*
 * The planner (exec/plan.c) knows no device: it asks one through a table
 * of functions (exec/device.h, private to exec/), which exec/cuda.c fills
 * for CUDA. Nodes the device does not take run on the CPU reference's
 * kernels, with the copies planned.
 */

/*
 * Whether GPU work can happen here: built with CUDA, a driver, a device,
 * and not turned off by OGSH_DEVICE=cpu (which the golden tests set so
 * their transcripts are the same on every machine). When false, `why` is
 * one line: "ogsh was built without CUDA", "no CUDA driver found",
 * "no GPU found", "the GPU is turned off (OGSH_DEVICE=cpu)".
 */
bool exec_gpu_available(char *why, size_t size);

/* What `gpu` shows. */
struct exec_gpu_info {
	char name[256];
	int cc_major, cc_minor;
	int sm_count;
	uint64_t mem_total, mem_free;      /* bytes */
	int clock_mhz, mem_clock_mhz, bus_bits;
	double peak_fp32_tflops;           /* estimates from SMs and clock, for `profile` */
	double peak_fp16_tflops;           /* dense tensor cores */
	double peak_int8_tops;             /* dense int8 (and fp8) tensor cores */
	double peak_gbps;                  /* memory bandwidth */
	int driver_version, runtime_version;
	long cudnn_version;
	int cublaslt_version;
};
int exec_gpu_info(struct exec_gpu_info *info, struct ir_diag *d);
/* The tuning cache file (`path`, NULL: the default one) written into `used`,
 * and how many kernel choices it holds for this GPU and these library
 * versions (0 when there is no file yet). 0 or IR_ERR. */
int exec_gpu_tune_cache(const char *path, char *used, size_t size, int *entries, struct ir_diag *d);

struct exec_plan;   /* one stage, one set of input shapes */

struct exec_plan_opts {
	bool tf32;                 /* TF32 tensor cores for float32 (`set tf32 on`) */
	bool no_graph;             /* never capture a CUDA graph */
	const char *tune_path;     /* the tuning cache file; NULL: $XDG_CACHE_HOME/ogsh/tune (or ~/.cache) */
	bool keep_all;             /* keep every value for exec_plan_run's `all` */
	void (*progress)(void *arg, const char *what, int done, int total);   /* tuning, may be NULL */
	void *progress_arg;
};

/* Where one node of the main graph runs, and why. */
enum exec_place { EXEC_ON_GPU, EXEC_ON_CPU, EXEC_FOLDED };
struct exec_plan_node {
	const struct ir_node *node;        /* in the plan's model (the stage's) */
	enum exec_place place;
	char why[160];                     /* EXEC_ON_CPU: why not the GPU; EXEC_FOLDED: "inputs are constant" */
	char impl[96];                     /* what computes it */
	int copies_in;                     /* host<->device copies made before it */
	uint64_t copy_bytes;
	uint64_t out_bytes;                /* its outputs */
	double flops;                      /* from the cost model (0 when unknown) */
	double bytes;                      /* bytes read and written, from the cost model */
	/* quantized islands (exec/qfuse.h): `node` is then the stage's Conv/Gemm/MatMul */
	char precision[8];                 /* an island: "int8", "fp8", "int4"; else "" */
	const char *absorbed;              /* an island: the nodes it took in (", "-separated); else NULL */
	const char *unfused;               /* a Q/DQ of an activation left as it is: why; else NULL */
};
struct exec_plan_summary {
	int n_gpu, n_cpu, n_folded;
	int n_copies;                      /* per run */
	uint64_t copy_bytes;
	uint64_t arena_bytes;              /* the activation arena (liveness plan) */
	uint64_t naive_bytes;              /* every activation in its own buffer */
	uint64_t weight_bytes;             /* constants on the device */
	uint64_t ws_bytes;                 /* the largest kernel workspace */
	bool graph;                        /* runs replay a CUDA graph */
	char graph_why[160];               /* why not, when not */
	int tuned, tune_hits;              /* kernel choices timed now / found in the cache */
	int n_nhwc;                        /* activations stored channels-last */
	int n_views;                       /* view nodes sharing their input's memory (nothing launched) */
	int n_if_inlined;                  /* Ifs whose condition was constant: their branch joined the graph */
	int n_islands[3];                  /* quantized islands: int8, fp8, int4 */
	int n_unfused;                     /* Q/DQ of activations left unfused */
	int n_relu_moved;                  /* Q -> DQ -> Relu/Clip -> Q of one scale made Relu/Clip -> Q (qfuse) */
	double plan_ms;
};

/*
 * Plans the model's main graph for the input shapes of `inputs` (their
 * values are not read): binds the dims, infers every shape, folds what is
 * constant, places each node (GPU when a kernel supports it, else CPU with
 * the copies planned), sizes one arena by liveness, uploads the constants,
 * prepares kernels (timing choices not in the tuning cache). The plan keeps
 * a reference to `m`, which must outlive it. 0, IR_ERR, IR_ENOMEM (naming
 * the allocation) or IR_EINTR.
 */
int exec_plan_new(const struct ir_model *m, const struct exec_values *inputs, const struct exec_plan_opts *o,
		  struct exec_plan **out, struct ir_diag *d);
void exec_plan_free(struct exec_plan *p);
/*
 * Placement only (for `check`): the steps of exec_plan_new up to placement
 * (inputs bound, shapes inferred, constants folded, quantized islands,
 * every node placed by the device's rules, which need no context) and no
 * further: no GPU is needed and no device is opened. exec_plan_nodes gives
 * each node's place and why, exactly as the full plan would; the plan can
 * only be freed. Without a device compiled in, every node that is not
 * folded is on the CPU with the why "ogsh was built without CUDA".
 */
int exec_plan_place(const struct ir_model *m, const struct exec_values *inputs, struct exec_plan **out,
		    struct ir_diag *d);
/* Whether placement asks a device's rules (one is compiled in); false with why. */
bool exec_plan_has_device(char *why, size_t size);
/* Whether the plan was made for these inputs' shapes and dtypes. */
bool exec_plan_fits(const struct exec_plan *p, const struct exec_values *inputs);
/* The plan's nodes in order (n_nodes of them) and its figures. */
const struct exec_plan_node *exec_plan_nodes(const struct exec_plan *p, int *n_nodes);
void exec_plan_summary(const struct exec_plan *p, struct exec_plan_summary *s);

/* Runs once: uploads inputs, runs, downloads outputs (and with keep_all,
 * every value into `all`, which may then be NULL otherwise). */
int exec_plan_run(struct exec_plan *p, const struct exec_values *inputs, struct exec_values *outputs,
		  struct exec_values *all, struct exec_report *rep, struct ir_diag *d);

/*
 * Where a value of the last exec_plan_run lives, for a plan made with
 * keep_all and run with all = NULL (nothing downloaded; every activation
 * stays on the device until the next run): on the device (`dev`, stored in
 * the plan's layout: nhwc means a 4-D [N, C, H, W] value stored as
 * [N, H, W, C]; dims are always the logical ones), or on the host (`host`:
 * a constant folded at plan time, or a value made by a CPU node that no
 * GPU node reads). Valid until the next run or exec_plan_free.
 */
struct exec_dev_tensor {
	const void *dev;
	const struct ir_tensor *host;
	int dtype, rank;
	int64_t dims[IR_MAX_RANK];
	uint64_t numel;
	bool nhwc;
};
/* 0 with *out filled; 1 when the plan holds no such value (no value of that
 * name, a graph input, one folded away before planning, one not kept);
 * IR_ERR when the plan was not made with keep_all. */
int exec_plan_value(struct exec_plan *p, const char *name, struct exec_dev_tensor *out, struct ir_diag *d);
/* ir_calib_observe of the device value x (exec_plan_value, with dev set;
 * float, float16 or bfloat16) computed on the plan's GPU: the statistics
 * and histogram on the device, only small results downloaded (kernels/cuda/
 * k_calib.c); n_chan > 0 sums |x| per channel of the last logical axis. */
int exec_plan_calib_observe(struct exec_plan *p, const struct exec_dev_tensor *x, struct ir_calib_tensor *t,
			    int n_chan, struct ir_diag *d);

struct exec_time_opts {
	int iters, warmup;         /* 0: 100 and 10; warmup < 0: none */
	bool no_graph;             /* launch node by node even when a graph was captured */
	bool with_copies;          /* include uploading inputs and downloading outputs */
};
struct exec_time_result {
	int iters;
	double median_ms, p90_ms, min_ms, max_ms, mean_ms;
	bool graph;                /* the runs replayed a CUDA graph */
};
/* Sorts ms (n run times) and fills r's iters, median, p90, min, max, mean. */
void exec_time_summary(double *ms, int n, struct exec_time_result *r);
/* The median of n values (sorts v). */
double exec_median(double *v, int n);
/* A monotonic clock in milliseconds (host-side timing). */
double exec_now_ms(void);

/* Times whole runs with CUDA events; Ctrl-C stops between iterations (IR_EINTR). */
int exec_plan_time(struct exec_plan *p, const struct exec_values *inputs, const struct exec_time_opts *o,
		   struct exec_time_result *r, struct ir_diag *d);
/* Per plan node (exec_plan_nodes order), the median time in ms over
 * `iters` runs, events around each node; node_ms has n_nodes entries. */
int exec_plan_profile(struct exec_plan *p, const struct exec_values *inputs, int iters, double *node_ms,
		      struct ir_diag *d);

/* ------------------------------------------------------------------------ */
/* Inputs                                                                    */
/* ------------------------------------------------------------------------ */

/* Dims for an input by name ("x=1x3x224x224") or for a symbol ("batch=4"). */
struct exec_shape {
	char *name;
	int rank;               /* -1 for a symbol binding */
	int64_t dims[IR_MAX_RANK];
};
/* Parses "NAME=1x3x224x224" or "SYMBOL=4"; 0 or IR_ERR. */
int exec_shape_parse(const char *s, struct exec_shape *out, struct ir_diag *d);
void exec_shape_clear(struct exec_shape *s);

/*
 * Random inputs for every graph input that has no initializer and is not in
 * `have` (may be NULL), from xorshift seeded with `seed`: floats uniform in
 * [-1, 1), signed ints in [-10, 10], unsigned in [0, 10], bool half true.
 * Dims come from `shapes` (an input's own or a symbol's), from a given input
 * that shares the symbol, else are 1 (with a warning in `d` naming the input and dim).
 */
int exec_random_inputs(const struct ir_model *m, uint64_t seed, const struct exec_shape *shapes, int n_shapes,
		       const struct exec_values *have, struct exec_values *out, struct ir_diag *d);

/* Reads one test-data file holding a value of type `ty` (NULL: a tensor). */
int exec_read_pb_value(const char *path, const struct ir_type *ty, struct kern_value *out, struct ir_diag *d);

/*
 * Reads an ONNX test-data folder: input_N.pb in the order of the graph's
 * inputs without initializers (names taken from the graph), and, if
 * `expected` is not NULL, output_N.pb in the order of the graph's outputs.
 */
int exec_read_test_dir(const struct ir_model *m, const char *dir, struct exec_values *inputs,
		       struct exec_values *expected, struct ir_diag *d);

/* ------------------------------------------------------------------------ */
/* Conformance (exec/conformance.c)                                          */
/* ------------------------------------------------------------------------ */

enum exec_conf_status {
	EXEC_CONF_PASS = 0, EXEC_CONF_FAIL, EXEC_CONF_UNSUPPORTED, EXEC_CONF_ERROR, EXEC_CONF_CRASH, EXEC_CONF_TIMEOUT,
};
const char *exec_conf_status_name(enum exec_conf_status s);   /* "passed", "failed"... */

/* One test's result (plain data: it crosses a pipe from the child process). */
struct exec_conf_result {
	char test[256];          /* the test folder's name */
	enum exec_conf_status status;
	char detail[512];        /* why it did not pass */
	char ops[1024];          /* op types of the model, space-separated ("domain:Op" outside ONNX's) */
	double max_err;          /* largest |a-b| seen */
	double ms;               /* run time (reading inputs and running) */
};

struct exec_conf_opts {
	const char *filter;      /* POSIX extended regex on the test names, or NULL */
	int timeout_s;           /* per test; 0: 60 */
	bool in_process;         /* no child process (for debuggers and sanitizers) */
};

/*
 * Runs every test folder under `dir` (or `dir` itself when it holds a
 * model.onnx): each test_data_set_N's inputs through the model, outputs
 * compared with exec_compare at rtol 1e-3, atol 1e-7 (exact for integers).
 * Calls each() per test. Returns 0, or an error (bad folder, bad filter,
 * Ctrl-C).
 */
int exec_conformance(const char *dir, const struct exec_conf_opts *o,
		     void (*each)(void *arg, const struct exec_conf_result *r), void *arg, struct ir_diag *d);

/* The device variant of exec_conformance: `device` is "cpu" or "cuda"; each() also gets, per test, the plan's
 * count of nodes on the GPU, on the CPU and folded at plan time (all 0 on
 * the cpu device, or when the test did not get as far as a plan). */
int exec_conformance_on(const char *dir, const struct exec_conf_opts *o, const char *device,
			void (*each)(void *arg, const struct exec_conf_result *r, int n_gpu, int n_cpu, int n_folded),
			void *arg, struct ir_diag *d);

/* ------------------------------------------------------------------------ */
/* Datasets (exec/data.c): what --data names, in batches                     */
/* ------------------------------------------------------------------------ */

/*
 * A dataset feeds a stage's inputs batch by batch (calibrate, eval,
 * sensitivity, quantize --auto). `spec` is one of:
 *   random              random inputs (exec_random_inputs) from `seed`,
 *                       `random_samples` samples; exec_data_random() is true
 *                       and every result built on it says its ranges are
 *                       meaningless for accuracy
 *   FILE.npy            a single-input model's samples, the first axis
 *                       counting samples (an array of the input's own rank
 *                       whose first dim is the batch dim; or of rank-1 less:
 *                       one sample)
 *   FILE.npz            arrays named after the graph inputs (or one array
 *                       for a one-input model), first axis counting samples
 *   DIR of .npy/.npz    those files in name order, concatenated
 *   DIR with input_N.pb an ONNX test-data folder (one batch as it is), or a
 *                       folder of test_data_set_N folders
 *   DIR of images       .png/.jpg/.jpeg files in name order, decoded with
 *                       libpng/libjpeg-turbo and preprocessed by `preprocess`
 *                       (one-input models whose input is [N,C,H,W] or [N,H,W,C])
 * Samples are batched to `batch` (0: the model's batch dim when it is a
 * fixed number, else EXEC_DATA_BATCH); the last batch may be shorter when the batch dim
 * is symbolic, and is dropped (with a note) when it is fixed. Integer and
 * float64 arrays convert to the input's dtype when exact for integers and
 * always for floats; other mismatches are errors naming the file.
 *
 * preprocess: comma-separated keys, e.g.
 *   "resize=256,crop=224,mean=0.485,0.456,0.406,std=0.229,0.224,0.225,layout=nchw,order=rgb,scale=1/255"
 *   resize=N      shorter side to N (bilinear), keeping the aspect ratio
 *   resize=WxH    exactly W x H
 *   crop=N|WxH    centre crop
 *   mean=a[,b,c] std=a[,b,c]   per channel, applied after scale: (x*scale - mean) / std
 *                 (in the order of the input's channels, i.e. after order=bgr)
 *   scale=S       a number or a fraction ("1/255"; the default for float
 *                 inputs, 1 for integer ones, whose values are rounded)
 *   layout=nchw|nhwc   (default: from the input's shape)
 *   order=rgb|bgr      (default rgb); gray=1 for one channel
 * When no resize or crop is given, images are resized to the input's H x W
 * (when the input fixes them; else every image must have the first one's
 * size). Resizing is bilinear with half-pixel centres and no antialiasing
 * (OpenCV's INTER_LINEAR); crops are centred as torchvision's CenterCrop.
 * Arrays are read a few rows at a time (compressed .npz entries and
 * Fortran-order arrays: one file at a time), images decoded per batch.
 */
struct exec_data;
#define EXEC_DATA_BATCH 32         /* samples per batch when neither --batch nor the model fixes it */

struct exec_data_opts {
	const char *spec;          /* as above */
	const char *preprocess;    /* images only; NULL: the defaults */
	int batch;                 /* samples per batch; 0: see above */
	int max_batches;           /* stop after this many batches; 0: all */
	uint64_t seed;             /* random */
	int random_samples;        /* random: samples in all (0: 64) */
	bool skip_bad;             /* a bad file is a warning and is skipped (`set on-error continue`); else an error */
	const struct exec_shape *shapes;   /* random: dims for inputs/symbols (run's --shape), may be NULL */
	int n_shapes;
};

/*
 * Opens a dataset for the model's inputs. Scans what it can up front (file
 * names, headers, sample counts; images are decoded batch by batch) and
 * checks the arrays' dtypes and shapes against the graph inputs. Errors are
 * one line naming the file and why ("digits/x.npy: float32 [10,65], input
 * 'x' needs [N,64]"). 0 or an error code.
 */
int exec_data_open(const struct ir_model *m, const struct exec_data_opts *o, struct exec_data **out,
		   struct ir_diag *d);
void exec_data_free(struct exec_data *ds);
/*
 * The next batch: `inputs` is cleared and gets one tensor per graph input
 * (without an initializer), *n the samples in it. Returns 1 for a batch, 0
 * at the end, or a negative error code. Bad files skipped under skip_bad are
 * warnings in d.
 */
int exec_data_next(struct exec_data *ds, struct exec_values *inputs, int *n, struct ir_diag *d);
/* Starts again from the first sample (same batches, same random values). */
void exec_data_rewind(struct exec_data *ds);
/* Samples in the whole dataset (after max_batches); 0 when not known up front. */
uint64_t exec_data_samples(const struct exec_data *ds);
/* Samples per batch. */
int exec_data_batch(const struct exec_data *ds);
/* A hash of what the data is: the files' names, sizes and contents (images:
 * their bytes) and the preprocessing, and the samples fed (max_batches);
 * random: the seed, samples, batch and shapes. 16 hex digits. The files are
 * read once, when it is first asked for. */
const char *exec_data_hash(const struct exec_data *ds);
/* What the data is, for people: "tests/data/digits/test.npz (540 samples)". */
const char *exec_data_desc(const struct exec_data *ds);
bool exec_data_random(const struct exec_data *ds);

/*
 * Labels, one integer per sample: a .npy of integers (any int dtype, or
 * float with whole values) of shape [N] or [N,1], or a text file of one
 * integer per line (blank lines and '#' comments skipped). *labels is
 * malloc'd. 0 or an error naming the file and line.
 */
int exec_read_labels(const char *path, int64_t **labels, uint64_t *n, struct ir_diag *d);

/*
 * Decodes a PNG or JPEG image in memory (the type from its signature) to
 * 8-bit pixels: *px is malloc'd, h*w*c bytes, rows top to bottom, c 1 or 3
 * (want_c 0: the file's own; 3: gray is repeated; 1: colour becomes
 * ITU-R 601 luma; alpha is dropped; palettes and 16-bit expanded or
 * reduced; CMYK JPEGs converted to RGB). Limits: 16384 x 16384 pixels. 0 or IR_ERR naming
 * `name` ("cat.jpg: not a PNG or JPEG image", "x.png: truncated").
 */
int exec_image_decode(const void *buf, size_t n, const char *name, int want_c, uint8_t **px, int *h, int *w,
		      int *c, struct ir_diag *d);

#endif
