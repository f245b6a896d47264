/*
 * commands.c - the command table: dispatch, `help`, completion and
 * docs/commands.md are all made from it.
 *
 * To add a command: write cmd_NAME in a cmd_*.c file, declare it in
 * shell.h, add a row here (options it takes, what its arguments complete
 * to), add a golden script test in tests/script/, and regenerate
 * docs/commands.md with `build/shell/ogsh --doc > docs/commands.md`.
 */
#include "shell.h"

#include <string.h>

const struct sh_cmd sh_commands[] = {
	{ "help", cmd_help, "[COMMAND]", "list commands, or describe one",
	  "With no argument, lists every command with a one-line summary. With a command name, "
	  "shows its usage, what it does, its options and an example.",
	  "help save", "", SH_C_COMMAND, 0, "session" },
	{ "load", cmd_load, "FILE", "open an ONNX model, replacing the current one",
	  "Maps FILE, checks it and builds the editable graph. Large tensors stay in the mapped "
	  "file until a pass changes them. External data is read from the model's folder only. "
	  "Asks before discarding unsaved changes at a terminal.",
	  "load resnet50.onnx", "", SH_C_FILE, 0, "session" },
	{ "save", cmd_save, "FILE [--force] [--external] [--embed] [--threshold=BYTES] [--data=NAME]",
	  "write the model to an ONNX file",
	  "Writes atomically: a temporary file next to FILE is written, synced and renamed over it, "
	  "so a failed save never damages an existing file. The file the model was loaded from is "
	  "only overwritten with --force (`save --force` alone saves back to it). --external puts "
	  "tensors of at least --threshold bytes (default 1024) in FILE.data (or --data=NAME), "
	  "4 KiB-aligned, written fresh; --embed keeps everything in one file. By default a model "
	  "loaded with external data is saved with external data, and a model over 2 GB goes "
	  "external.",
	  "save optimized.onnx --external", "--force --external --embed --threshold= --data=",
	  SH_C_FILE, 0, "session" },
	{ "info", cmd_info, "[--json]", "summarise the model",
	  "Producer, IR version, opsets, graph inputs and outputs with their types, node and "
	  "initializer counts, parameters and weight bytes, functions and metadata. The precision "
	  "row gives the weight bytes by dtype (when not all float32); the quantization row counts "
	  "QuantizeLinear and DequantizeLinear nodes (those of weights apart) and the types they "
	  "quantize to, and the casts row the Casts when some convert to float16, bfloat16 or float8.",
	  "info", "--json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "nodes", cmd_nodes, "[PATTERN] [--op=TYPE] [--json]", "list nodes, in order",
	  "Lists the nodes of the main graph in execution order: id, name, op, inputs and outputs. "
	  "PATTERN is a shell-style pattern (* ? [..]) matched against node names and ids; "
	  "--op keeps only nodes of one op type.",
	  "nodes --op=Conv", "--op= --json", SH_C_NODE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "show", cmd_show, "NODE [--json]", "show one node in detail",
	  "Shows a node's op, domain, attributes, and each input and output with its type, "
	  "producer and consumers; for a QuantizeLinear or DequantizeLinear, its type, scale and "
	  "zero point (per channel: the axis, how many scales and their range; blocked: the block "
	  "size). NODE is a node name, an id such as n12, or #12.",
	  "show conv1", "--json", SH_C_NODE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "tensor", cmd_tensor, "NAME [--values=N] [--json]", "show a tensor and its statistics",
	  "For an initializer or a Constant's output: dtype, shape, size, min/max/mean/std of "
	  "the finite values, NaN/Inf/zero counts and the first values (--values, default 8); for a "
	  "quantized weight (int8, int4, float8... read by a DequantizeLinear), also the statistics "
	  "of the values it stands for, S*(q-Z). For other values: the type, where the value comes "
	  "from and what reads it.",
	  "tensor conv1.weight", "--values= --json", SH_C_VALUE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "ops", cmd_ops, "[--json]", "count nodes per op type",
	  "A histogram of op types over the main graph and its subgraphs, most frequent first. "
	  "Ops ogsh does not know are marked (unknown), or (function) when a function of the "
	  "model defines them.",
	  "ops", "--json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "inputs", cmd_inputs, "[--json]", "list the graph inputs",
	  "Graph inputs with their element type and shape; symbolic dimensions keep their names. "
	  "Inputs that also have an initializer (a default value) are marked.",
	  "inputs", "--json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "outputs", cmd_outputs, "[--json]", "list the graph outputs",
	  "Graph outputs with their element type, shape and the node that computes them.",
	  "outputs", "--json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "shapes", cmd_shapes, "[PATTERN] [--unknown] [--subgraphs] [--json]",
	  "every value's element type and shape",
	  "Infers the element type and shape of every value from the graph inputs, the "
	  "initializers and the ops, and lists them: graph inputs, initializers, then node outputs in "
	  "order. Symbolic dims flow through (batch, 2*seq); integer tensors computed from shapes are "
	  "tracked, so Shape/Gather/Concat/Reshape chains resolve. What stays unknown says why. A type "
	  "that contradicts the model's value_info is shown with what the model declares, and warned "
	  "about. --unknown lists only what is not fully known; --subgraphs adds the values of If, "
	  "Loop and Scan bodies (named nID.ATTR/VALUE). PATTERN filters names as in nodes. "
	  "set-input-shape and every edit make the next shapes infer again.",
	  "shapes --unknown", "--unknown --subgraphs --json", SH_C_VALUE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "check", cmd_check, "[GROUP...] [--only=LIST] [--json]", "lint the model: what will not run, not vary, not fit float16",
	  "Looks for problems and prints one line per finding, grouped, each with its severity (error: it "
	  "will fail; warning: it likely hurts; info: worth knowing), the node (id and name) or value, what is "
	  "wrong and, after the colon, what to do; then the counts (\"no findings\" when clean). GROUPs "
	  "(or --only=ops,shapes,...) pick some; all by default. ops: nodes ogsh cannot run on its CPU "
	  "reference, domains it does not know or the model does not import, ops and attributes that came "
	  "in a later opset than the model imports or were removed before it, and the nodes the CUDA plan would leave on the CPU with the reason `plan` gives "
	  "(the planner's own rules, with symbolic dims as 1; no GPU needed, but a build with CUDA; "
	  "OGSH_DEVICE=cpu turns this part off). shapes: every symbolic or unknown input dim is bound to 1, 2 "
	  "and 3 on a copy of the model and shapes inferred again: the first node that breaks at 2 or 3 fixes "
	  "the dim (e.g. a Reshape whose constant shape an exporter wrote for a batch-1 dummy input), and a dim "
	  "no output depends on is dropped somewhere; unknown dims without a name are listed too. precision: "
	  "float32 weights and Constant values that overflow (|x| > 65504) or vanish in float16, float16 nodes "
	  "known to lose accuracy (Pow, Exp, Softmax, ReduceSum/ReduceMean over more than 4,096 elements, "
	  "LayerNormalization with stash_type=0), and with the session's calibration (calibrate) activations "
	  "beyond float16's range. structure: unused initializers and inputs, nodes that reach no graph output, "
	  "node names used more than once (a value defined twice is refused when loading), inputs with an initializer (info), functions importing another "
	  "opset than the model. The model is not changed. --json gives {groups, findings: [{group, severity, "
	  "node_id, node, op, value, what, fix}], counts: {error, warning, info, total}}. The command succeeds "
	  "whatever it finds: the findings are its result, not an error.",
	  "check shapes", "--only= --json", SH_C_NONE, SH_F_JSON | SH_F_KEEP, "inspect" },
	{ "stats", cmd_stats, "[A B] [--by=op|node] [--sort=COLUMN] [--top=N] [--json]",
	  "parameters, MACs, FLOPs, bytes and activation memory",
	  "Counts what every node of the main graph costs from the inferred shapes, and sums it: "
	  "parameters (weights; BatchNormalization statistics and the constants read as shapes, axes, "
	  "indices or scalars are counted apart), MACs and FLOPs (a multiply-add is 1 MAC and 2 FLOPs), "
	  "bytes read and written, FLOPs per byte, every activation together and the peak of the live "
	  "set for the current node order. Symbolic dims are taken as 1, and said so. A node whose "
	  "shapes are not known is not counted and says why; the totals are then lower bounds. "
	  "--by=op (the default) sums per op type, most FLOPs first; --by=node lists the nodes in "
	  "order. --sort orders the table by a column (op types: op, count, unknown, params, macs, "
	  "flops, read, written, bytes, intensity, share; nodes: node, name, op, output (its "
	  "elements), params, macs, flops, read, written, bytes, intensity, share; FLOPs/B and FLOPs% "
	  "work too), largest first for numbers; --top=N keeps the first N rows. docs/costs.md says "
	  "how each op is counted. With several weight dtypes (an int8 model's weights and float32 "
	  "scales) the weight bytes of each are given, and when some compute is quantized or in half "
	  "precision, the MACs and FLOPs of each precision (a Conv whose inputs come from "
	  "DequantizeLinear of int8 computes in int8, of float8 in fp8). With two stages A B (numbers "
	  "from `stages`), puts their totals, weight bytes by dtype, MACs by precision and op "
	  "counts side by side with the change.",
	  "stats --by=node --sort=flops --top=10", "--by= --sort= --top= --json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "passes", cmd_passes, "[--json]", "list the passes",
	  "Lists every pass with its optimize level and what it does, in the order optimize runs them. "
	  "explain PASS tells how one works; apply PASS runs one.",
	  "passes", "--json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "passes" },
	{ "explain", cmd_explain, "PASS", "how a pass works, for teachers",
	  "What the pass rewrites, the algebra behind it, when it does not apply and why, and its options.",
	  "explain fuse-conv-bn", "", SH_C_NONE, 0, "passes" },
	{ "apply", cmd_apply, "PASS [OPTION=VALUE...] [--dry-run] [--all] [--json]",
	  "apply a pass, making a new stage",
	  "Runs the pass on a copy of the current stage and prints its report: what it matched, what it "
	  "rewrote, and what it left alone and why. The result is checked (ir_verify); a pass that breaks "
	  "the graph is rolled back with an error. When something changed, the result becomes a new stage "
	  "(undo goes back) and the node, parameter, FLOP and activation changes are shown. --dry-run "
	  "reports without keeping anything; --all shows every message of a long report. OPTION=VALUE "
	  "sets the pass's options (explain PASS lists them). Passes that read a calibration (quantize, "
	  "convert-fp16) get the session's (see calibrate).",
	  "apply fold-constants max-bytes=65536", "--dry-run --all --json", SH_C_NONE, SH_F_JSON | SH_F_KEEP, "passes" },
	{ "optimize", cmd_optimize, "[--level=basic|extended|all] [--quiet]",
	  "run the passes of a level until nothing changes",
	  "Runs every pass of the level and below in the order `passes` lists them, again and again until a "
	  "round changes nothing (at most 10 rounds), like ONNX Runtime's optimization levels: basic cleans "
	  "up (fold constants and shapes, remove no-ops, dead code and duplicates), extended adds fusions "
	  "(default; among them fuse-elementwise, which makes one Pointwise node of a chain of "
	  "elementwise ops, fuse-attention, and fuse-qkv, which lets the attention read Q, K and V packed from "
	  "one projection; and hoist-gather, which lets a classifier's last layers compute only the rows it "
	  "reads, such as ViT's class token), all is every pass (today the same passes as extended). Each "
	  "pass that changes the model makes a "
	  "stage and prints its report (--quiet prints the total only).",
	  "optimize --level=all", "--level= --quiet", SH_C_NONE, 0, "passes" },
	{ "stages", cmd_stages, "[--json]", "list the stages, with node, parameter and FLOP changes",
	  "Stage 0 is the model as loaded; every pass or hand edit made one more. The current stage is "
	  "marked *. Stages share tensor data, so many of them cost little memory.",
	  "stages", "--json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "passes" },
	{ "undo", cmd_undo, "", "go back to the stage the current one was made from",
	  "The stages after it stay until a new pass or edit replaces them (redo goes forward again).",
	  "undo", "", SH_C_NONE, 0, "passes" },
	{ "redo", cmd_redo, "", "go forward to the stage undo left", "Goes to the stage made from the current one.",
	  "redo", "", SH_C_NONE, 0, "passes" },
	{ "checkout", cmd_checkout, "STAGE", "make a stage the current one",
	  "STAGE is a number from `stages`, or -N for N stages back. A pass or edit from there makes the "
	  "next stage and drops the stages that came after it, as an editor's redo list goes.", "checkout 0", "", SH_C_NONE, 0, "passes" },
	{ "diff", cmd_diff, "[A B] [--all] [--json]", "what changed between two stages",
	  "Lists the nodes removed, added and rewired, nodes whose attributes changed, weights removed, "
	  "added or changed (the first 40 changes; --all lists every one), then the op-count, node, "
	  "parameter, FLOP and peak-activation changes. With no stages: the current stage against the one "
	  "it was made from.",
	  "diff 0 3", "--all --json", SH_C_NONE, SH_F_JSON | SH_F_PURE, "passes" },
	{ "run", cmd_run, "[--device=cpu|cuda] [--check=cpu|stage N] [--inputs=PATH] [--seed=N] [--shape=NAME=DIMS]... [--expect=PATH] [--atol=A] [--rtol=R] [--save-outputs=PATH] [--all-tensors] [--profile] [--backend=NAME] [--json]",
	  "run the model and summarise or check its outputs",
	  "Runs the current model and prints each output's dtype, shape, min, max, mean and std, the run "
	  "time and the activation memory. --device picks where: cuda (the default when there is a GPU) "
	  "runs each node on the GPU when a GPU kernel supports it and the rest on the CPU, with the "
	  "plan that `plan` shows (kept for the next run of the same stage and shapes); cpu runs on the "
	  "cpu backend, the reference (peak live bytes; freed buffers are reused for later values of the "
	  "same size). Inputs not given with --inputs "
	  "are random, from --seed (default 0): floats uniform in [-1, 1), signed integers in [-10, 10], "
	  "unsigned in [0, 10], and an integer input that is the indices of a Gather (directly or "
	  "through a Cast or Identity) in [0, rows of the table), the smallest table when it indexes "
	  "several (a token_type_ids input of a table of 2 rows gets 0 and 1). --inputs reads an .npz file (entries named after inputs, or arr_0... "
	  "in order), an .npy or .pb file (the first input), a folder of NAME.npy files, or an ONNX "
	  "test-data folder (input_N.pb). Symbolic dims take their value from the given inputs or from "
	  "--shape, which names an input (--shape=x=1x3x224x224) or a symbol (--shape=batch=4); repeat "
	  "it for several. --expect reads expected outputs the same way (output_N.pb in test folders) "
	  "and compares: max abs and rel error, cosine similarity, SNR, top-1/top-5 agreement, elements "
	  "outside |a-b| <= atol + rtol*|b| (defaults per dtype: float32 rtol 1e-3, atol 1e-7) and the "
	  "worst element; the command fails when an output does not match. --check cpu runs the model "
	  "on the CPU reference too and compares the outputs the same way (for GPU results: float32 "
	  "rtol 1e-3 (1e-2 with tf32) and atol 1e-4 of the output's largest value, float16 rtol 1e-2 "
	  "and atol 2.5e-3 of the largest value (five float16 steps: the CPU rounds every node's output "
	  "to float16, fused GPU kernels keep float32 between the ops they join); "
	  "a plan with int8 islands (see `plan`): rtol 2e-2 and atol 3% of the output's largest value, "
	  "about four int8 steps, since the GPU rounds each int32 sum once where the CPU's float "
	  "simulation rounds every product; with fp8 islands rtol 0.125 and atol 8%; an output of a quantized "
	  "plan outside that still passes when it is as close to the unrounded result as the CPU's is: the "
	  "CPU runs the stage again with every activation's QuantizeLinear/DequantizeLinear pair left "
	  "out, and the GPU's SNR against that may be at most 3 dB below the CPU's (a rounding tie "
	  "taken the other way moves the layers after it, so the two are different roundings of the "
	  "same model; a wrong kernel lands much further away)); "
	  "--check stage N compares with stage N run on the CPU on the same inputs. With --check every "
	  "node's largest difference is kept for `dot --color-by error`. --save-outputs writes the "
	  "outputs as NAME.npy files in a folder, or one .npz. --all-tensors keeps every intermediate "
	  "value (saved too with --save-outputs), so `compare last FILE` can check them. --profile times "
	  "every node and lists the time per op type, most first (on the CPU, with the thread count). "
	  "Ctrl-C stops the run between nodes; "
	  "progress shows after a second.",
	  "run --device=cuda --check=cpu",
	  "--device= --check= --inputs= --seed= --shape= --expect= --atol= --rtol= --save-outputs= --all-tensors --profile --backend= --json",
	  SH_C_FILE, SH_F_JSON | SH_F_KEEP, "run" },
	{ "gpu", cmd_gpu, "[--json]", "the GPU: device, memory, clocks, peaks, library versions",
	  "Shows the GPU ogsh runs on: its name, compute capability and SMs, memory (total and free), "
	  "clocks and memory bus, peak estimates (fp32, fp16 tensor cores, memory bandwidth: computed "
	  "from the SM count and clocks, used by `profile` for % of peak), the CUDA driver and runtime, "
	  "cuDNN and cuBLASLt versions, and the tuning cache (kernel choices timed once per GPU and "
	  "library versions). Without a GPU, says why in one line (OGSH_DEVICE=cpu turns the GPU off).",
	  "gpu", "--json", SH_C_NONE, SH_F_JSON | SH_F_KEEP, "run" },
	{ "plan", cmd_plan, "[--shape=NAME=DIMS]... [--json]", "where each node runs on the GPU, and the memory plan",
	  "Plans the current stage for the GPU (random inputs' shapes, --shape as in run) and lists every "
	  "node: where it runs (gpu; cpu, with why not the GPU: no GPU kernel, a type or attribute the "
	  "kernel refuses, a shape known only when running, subgraphs: If, Loop, Scan and SequenceMap run "
	  "on the CPU reference with their inputs and the outer values their subgraphs read copied to the "
	  "host; folded: its inputs are constant, so it ran once at plan time) and what computes it (the kernel, cuDNN algorithm or cuBLASLt choice). "
	  "Then: nodes per place, the copies between CPU and GPU per run, the activation arena (values "
	  "share memory when their lifetimes do not overlap) against every value in its own buffer, the "
	  "weights and the workspace on the GPU, whether runs replay a CUDA graph (only when every node "
	  "is on the GPU), how many activations are stored channels-last (float16/bfloat16 values between "
	  "convolutions; OGSH_LAYOUT=nchw turns that off), how many views (Reshape, Flatten, Squeeze, "
	  "Unsqueeze, Identity) share their input's memory instead of copying it, how many Ifs whose "
	  "condition is constant at plan time were replaced by the branch they take (whose nodes are then "
	  "placed like any other), the kernel choices timed now or found in the "
	  "tuning cache, and the time planning took. run, time and profile reuse the plan.",
	  "plan --shape=batch=8", "--shape= --json", SH_C_NONE, SH_F_JSON | SH_F_KEEP, "run" },
	{ "time", cmd_time, "[--iters=N] [--warmup=N] [--batch=B] [--no-graph] [--with-copies] [--device=cpu|cuda] [--shape=NAME=DIMS]... [--json]",
	  "time whole runs: median, p90, min, max, mean and throughput",
	  "Runs the current stage on random inputs (as `run` makes them) --warmup times (default 10 on the GPU, 1 on the CPU), "
	  "then --iters times (default 100 on the GPU, 10 on the CPU), each timed with CUDA events (the "
	  "host clock on the CPU), and prints the median, p90, min, max and mean in ms and the throughput "
	  "(batch / median). --batch binds the first dim of every input (its symbol, or the input's "
	  "shape). On the GPU the runs replay a CUDA graph when the plan allows it (--no-graph launches "
	  "node by node); inputs are uploaded once before, unless --with-copies, which times uploading "
	  "the inputs and downloading the outputs too. On the GPU it says whether float32 matrix "
	  "products and convolutions ran in TF32 (`set tf32 on`, as PyTorch's convolutions, TensorRT "
	  "and onnxruntime's CUDA provider do by default) or in full float32 (the default here); "
	  "--json has it as tf32. On the CPU it says how many threads the kernels ran on (`set threads`); "
	  "--json has it as threads. Ctrl-C stops between runs.",
	  "time --batch=8 --iters=200", "--iters= --warmup= --batch= --no-graph --with-copies --device= --shape= --json",
	  SH_C_NONE, SH_F_JSON | SH_F_KEEP, "run" },
	{ "profile", cmd_profile, "[--iters=N] [--top=N] [--device=cpu|cuda] [--shape=NAME=DIMS]... [--json]",
	  "time every node, slowest first, against the GPU's peak",
	  "Runs the current stage on random inputs (as `run` makes them) --iters times (default 20 on "
	  "the GPU, 3 on the CPU) timing every node "
	  "(CUDA events around each GPU node; the host clock for nodes on the CPU, their copies included) "
	  "and lists one row per node, slowest first: where it ran, what computed it (with --device=cpu, "
	  "a Conv's algorithm: Winograd F(2x2,3x3) for 3x3 stride-1 convs with 32 or more channels in and "
	  "out, a 1x1 product, the direct depthwise kernel, an im2col product), the median ms, its "
	  "share of the total, the GFLOP/s and GB/s it reached (from the cost model, see `cost`) and the "
	  "% of the GPU's peak (the larger of compute and memory bandwidth; peaks from `gpu`). --top=N "
	  "keeps the N slowest. The last line says whether float32 matrix math ran in TF32 (`set tf32`), "
	  "or on the CPU the thread count (`set threads`). "
	  "The times are kept for `dot --color-by time`.",
	  "profile --top=10", "--iters= --top= --device= --shape= --json", SH_C_NONE, SH_F_JSON | SH_F_KEEP, "run" },
	{ "compare", cmd_compare, "A B [--atol=A] [--rtol=R] [--stages] [--json]",
	  "compare two sets of tensors",
	  "Compares the tensors of A (actual) with those of B (expected), matched by name (or by "
	  "position when no name matches), with the same function as run --expect: max abs and rel "
	  "error, cosine similarity, SNR, top-1/top-5 agreement, NaN/Inf counts, the count of elements "
	  "outside |a-b| <= atol + rtol*|b| and the worst one. A and B are .npz, .npy or .pb files, "
	  "folders of NAME.npy files, ONNX test-data folders (output_N.pb), or `last`: the values of the "
	  "last run (every intermediate after run --all-tensors). Fails when a tensor does not match. "
	  "With --stages, A and B are stage numbers: both stages run on the same random inputs (seed 0) "
	  "and every tensor of B that stands for one of A (the same name, or the one a pass says it "
	  "replaces, e.g. a fused Conv's output for the old Relu's) is compared at rtol 1e-4 and atol 1e-5 "
	  "(or 1e-4 of the tensor's largest value: float32 rounding in deep nets), "
	  "in B's node order, naming the first that differs.",
	  "compare last expected.npz --rtol=1e-2", "--atol= --rtol= --stages --json", SH_C_FILE, SH_F_JSON | SH_F_KEEP, "run" },
	{ "conformance", cmd_conformance, "DIR... [--device=cpu|cuda] [--filter=REGEX] [--report=FILE] [--verbose] [--timeout=S] [--floor=N] [--in-process] [--json]",
	  "run ONNX backend test folders and compare their outputs",
	  "Runs every test under each DIR (folders holding model.onnx and test_data_set_N/ with "
	  "input_N.pb and output_N.pb, as in the onnx package's backend test data; or light_NAME.onnx "
	  "files with light_NAME_output_N.pb, the onnx package's light models, fed the inputs ONNX's "
	  "runner makes), or DIR itself when it is one test, on the cpu backend. Outputs are compared with |a-b| <= atol + rtol*|b| at "
	  "rtol 1e-3, atol 1e-7 (integers exactly). Prints each test that does not pass (failed, with "
	  "the worst element; unsupported, with the node and op; error; crashed; timed out) and a "
	  "summary; --verbose prints passes too. Each test runs in a child process with a time limit "
	  "(--timeout, default 60 s), so a crash or a hang is reported and the run goes on "
	  "(--in-process turns that off, for debuggers). --filter keeps tests whose folder name matches "
	  "a POSIX extended regex. --report writes a Markdown report with a table per suite (DIR) and per op type. --floor makes "
	  "the command fail when fewer than N tests pass (CI keeps progress from going back). "
	  "--device=cuda runs each test through the GPU planner (nodes the GPU cannot run fall back "
	  "to the CPU) and counts per suite the tests that ran on the GPU and those that stayed on "
	  "the CPU (cpu-only); the default is cpu, the reference.",
	  "conformance onnx/backend/test/data/node --filter='^test_(relu|conv)' --report=REPORT.md",
	  "--device= --filter= --report= --verbose --timeout= --floor= --backend= --in-process --json", SH_C_FILE, SH_F_JSON, "run" },
	{ "cost", cmd_cost, "NODE [--json]", "what one node costs, and how it was counted",
	  "Shows a node's inputs and outputs with the types the count used (what each constant input "
	  "is: param, buffer or constant), its parameters, MACs, FLOPs, bytes read and written and "
	  "FLOPs per byte, how they were counted, and the symbols taken as 1; or why its cost is not "
	  "known. NODE is a node name, an id such as n12, or #12.",
	  "cost conv1", "--json", SH_C_NODE, SH_F_JSON | SH_F_PURE, "inspect" },
	{ "dot", cmd_dot,
	  "[FILE] [--stage=N] [--diff=A] [--around=NODE [--radius=R]] [--from=TENSOR] [--to=TENSOR] [--collapse [--depth=D]] [--expand-fused] [--weights] [--qdq-nodes] [--color-by=op|flops|memory|time|error|precision] [--rankdir=TB|LR] [--max-nodes=N]",
	  "draw the graph with Graphviz: DOT, SVG, PNG or PDF",
	  "Draws the current stage (--stage=N another) with Graphviz: without FILE it prints the drawing "
	  "as DOT; FILE.dot or .gv writes DOT, FILE.svg, .png or .pdf lays it out and renders it (the file "
	  "is written whole or not at all). A node shows its op, name (or id), key attributes, the "
	  "constants it reads (initializers and Constant nodes are folded into their reader's label; "
	  "--weights draws them as nodes) and its output type; edges carry tensor types; graph inputs "
	  "and outputs are marked. Colours are op families, with a legend. --diff=A draws what changed "
	  "since stage A as diff matches nodes: added green, changed orange, removed (from A's graph) "
	  "dashed red. --color-by=flops|memory colours nodes on a 9-step scale by the cost model's "
	  "FLOPs or bytes moved, time|error by the figures of `profile` or `run --check` for the stage, "
	  "precision by what each node computes in (float32, float16, bfloat16, int8, fp8, int4: a Conv "
	  "reading DequantizeLinear of int8 is int8). A DequantizeLinear of a quantized weight is folded "
	  "into its reader's label (\"W int8[64,3,7,7] (9,408) per channel\"), and a QuantizeLinear -> "
	  "DequantizeLinear pair of activations is drawn as a mark on the edge (\"int8 0.0123\" and a "
	  "diamond) instead of two nodes; --qdq-nodes draws them as nodes. "
	  "--around=NODE draws the nodes within --radius steps (default 2); --from/--to the nodes "
	  "between two tensors; tensors coming from or going to nodes not drawn end in small labels. --collapse draws each name scope (/encoder/layer.3/...) as one box with "
	  "its node count and commonest ops, at --depth scope levels (chosen when not given), and the "
	  "subgraphs of If/Loop/Scan as clusters. --expand-fused draws a fused node as a cluster of the "
	  "nodes it was made from. Large drawings are laid out in seconds (a note says how): above 300 nodes edges carry "
	  "their types as tooltips, not labels; above 1,500 they are straight, with less crossing "
	  "minimisation, and long ones are cut short; above --max-nodes (default 20,000) the drawing "
	  "is refused.",
	  "dot model.svg --diff=0", "--stage= --diff= --around= --radius= --from= --to= --collapse --depth= --expand-fused --weights --qdq-nodes --color-by= --rankdir= --max-nodes=",
	  SH_C_FILE, 0, "inspect" },
	{ "calibrate", cmd_calibrate,
	  "--data=SPEC [--preprocess=SPEC] [--batch=N] [--batches=N] [--device=cuda|cpu] [--seed=N] [--save=FILE] "
	  "[--load=FILE] [--json]",
	  "run the current stage over data and keep its activations' statistics",
	  "Runs the current (float) stage over the data once and streams, for every float activation a "
	  "quantization could touch (graph inputs and node outputs that some node reads, float32, float16 or "
	  "bfloat16), its min and max, a moving average of each batch's min and max, and a histogram of "
	  "|x| in 2048 bins (the range doubles as larger values come), plus the mean |x| per channel of the "
	  "activation inputs of MatMul and Gemm (for quantize int4 --awq). Activations are never kept: "
	  "memory stays bounded by the histograms. --data reads .npy or .npz files or folders of them, ONNX "
	  "test-data folders (input_N.pb), folders of PNG and JPEG images (--preprocess, e.g. "
	  "resize=256,crop=224,mean=0.485,0.456,0.406,std=0.229,0.224,0.225,layout=nchw,order=rgb,scale=1/255), "
	  "or random (--seed; every result then says the ranges are meaningless for accuracy). --batch sets "
	  "the samples per batch (default: the model's batch dim when fixed, else 32), --batches stops after N. On the GPU "
	  "when there is one (--device=cpu runs the CPU reference): the statistics are computed there and only "
	  "they are read back, but the GPU holds every activation of one batch at once (a smaller --batch "
	  "needs less GPU memory). A bad file is an error, or a warning and "
	  "skipped with `set on-error continue`. Ctrl-C between batches keeps the statistics seen so far. "
	  "The result belongs to the session (calib shows it; quantize and convert-fp16 use it) and is keyed "
	  "by the stage's content hash and the data's hash. --save writes it to a cache file; --load reads one "
	  "instead of running, refusing a file made for another model (or a malformed one) with the reason; "
	  "a cache of an earlier stage is mapped through the stages to the current one. --save alone saves "
	  "the session's calibration.",
	  "calibrate --data=digits/train.npz --batch=32 --save=digits.calib",
	  "--data= --preprocess= --batch= --batches= --device= --seed= --save= --load= --json", SH_C_FILE, SH_F_JSON | SH_F_KEEP,
	  "quantize" },
	{ "calib", cmd_calib, "[TENSOR] [--method=M] [--json] | plot TENSOR FILE.png|FILE.svg",
	  "the calibrated ranges of each tensor under every method",
	  "Lists each calibrated tensor with its count, min, max and the threshold T each method takes from "
	  "the statistics (values with |x| <= T map onto the quantized range, larger ones saturate): max (the "
	  "largest |x|), percentile=99.99, entropy (TensorRT's: the threshold minimising the KL divergence "
	  "between the histogram and its 128-level quantization) and mse (the threshold minimising the "
	  "quantization error over the histogram). --method=M shows one method (percentile=P picks P). With "
	  "TENSOR: that tensor in detail, with the asymmetric range and the share of values each method "
	  "clips. Switching method needs no new run. `calib plot TENSOR FILE` draws its |x| histogram (log "
	  "counts) with each method's threshold as a labelled line, as PNG or SVG (cairo; written whole or "
	  "not at all).",
	  "calib plot conv1_out conv1.svg", "--method= --json", SH_C_VALUE, SH_F_JSON | SH_F_KEEP, "quantize" },
	{ "quantize", cmd_quantize,
	  "[int8|fp8|int4] [--method=M] [--exclude=LIST] [--only=LIST] [--per-tensor-weights] [--asymmetric] "
	  "[--keep-float=float16|float32] [--min-channels=N] [--block=N] [--awq] [--auto=TARGET --data=SPEC [--metric=M]] [--all] [--json]",
	  "insert QuantizeLinear/DequantizeLinear with the calibrated ranges: a new stage",
	  "Runs the quantize pass on the current stage with the session's calibration (its tensors mapped to "
	  "this stage) and prints its report, as apply does: what was quantized, what stayed in higher "
	  "precision and why. int8 (the default): per-channel symmetric int8 weights, per-tensor activations "
	  "from the calibrated ranges, Q/DQ placed as TensorRT's explicit quantization expects. fp8: E4M3FN "
	  "(the opset is raised to 19 when lower, and said so). int4: weight-only blocked int4 for MatMul and "
	  "Gemm (--block=32, 64 or 128; --awq scales salient channels first, from the calibration). "
	  "--method picks the calibration method (max, percentile=P, entropy, mse); --exclude and --only take "
	  "node names, op types or patterns, comma-separated; --asymmetric gives uint8 with a zero point; "
	  "--keep-float=float16 keeps what is not quantized in float16; layers with fewer than --min-channels (default "
	  "16) input or output channels stay float. int8 and fp8 need calibrate first. "
	  "--auto=TARGET (snr=35, cos=0.999, top1=99% or maxabs=X, against the current stage on --data) "
	  "quantizes everything, ranks the quantized nodes by their error when quantized alone, keeps the "
	  "most sensitive in float one at a time until the target holds, then drops each kept one again if "
	  "the target still holds (a minimal set, not a contiguous range), reports every step and makes the "
	  "stage. sensitivity replays these options node by node.",
	  "quantize int8 --method=entropy --exclude=conv1",
	  "--method= --exclude= --only= --per-tensor-weights --asymmetric --keep-float= --min-channels= --block= --awq --auto= --data= "
	  "--metric= --preprocess= --batch= --batches= --seed= --device= --all --json",
	  SH_C_NONE, SH_F_JSON, "quantize" },
	{ "convert-fp16", cmd_convert_fp16,
	  "[--no-keep-io] [--block-ops=LIST] [--block-nodes=LIST] [--clamp] [--data-max=X] [--max-reduction=N] "
	  "[--all] [--json]",
	  "convert the float32 graph to float16, with the fewest Casts: a new stage",
	  "Runs the convert-fp16 pass on the current stage and prints its report. The model's inputs and "
	  "outputs keep their types (--no-keep-io converts them too); ops of the block list (--block-ops, "
	  "default onnxruntime's: the ML ops, RandomUniformLike, NonMaxSuppression, TopK, RoiAlign, Range, "
	  "CumSum and the like) and the nodes of --block-nodes stay float32. Weights that overflow or vanish "
	  "in float16 are reported (--clamp clamps them and lists them). With a calibration (calibrate "
	  "first), nodes whose activations exceed --data-max (default 4096) or whose reductions are longer "
	  "than --max-reduction elements stay float32, each named with its value.",
	  "convert-fp16 --block-nodes=final_norm", "--no-keep-io --block-ops= --block-nodes= --clamp --data-max= "
	  "--max-reduction= --all --json", SH_C_NONE, SH_F_JSON, "quantize" },
	{ "convert-bf16", cmd_convert_fp16,
	  "[--no-keep-io] [--block-ops=LIST] [--block-nodes=LIST] [--clamp] [--data-max=X] [--max-reduction=N] "
	  "[--all] [--json]",
	  "convert the float32 graph to bfloat16, with the fewest Casts: a new stage",
	  "As convert-fp16, to bfloat16: float32's range with 8 bits of mantissa, so overflow is rare and "
	  "rounding is coarser.",
	  "convert-bf16", "--no-keep-io --block-ops= --block-nodes= --clamp --data-max= --max-reduction= --all --json",
	  SH_C_NONE, SH_F_JSON, "quantize" },
	{ "sensitivity", cmd_sensitivity, "[--data=SPEC] [--metric=snr|cos|top1] [--top=N] [--json]",
	  "each quantized node's own share of the error, most sensitive first",
	  "For a stage made by quantize: quantizes each of its quantized nodes alone (the same options, "
	  "only=NODE, on the float stage it was made from) and measures the outputs against the float "
	  "stage's on the data (--metric, default snr), and measures each node's local error: its output in "
	  "the quantized stage against the float stage's tensor it stands for, as SQNR in dB. Prints a ranked "
	  "table, most sensitive first (--top=N keeps N); the local errors colour `dot --color-by error`. "
	  "--data defaults to the data calibrate ran on (with --preprocess, --batch, --batches as in "
	  "calibrate). On the GPU when there is one.",
	  "sensitivity --metric=top1 --top=10",
	  "--data= --preprocess= --batch= --batches= --seed= --metric= --top= --device= --json", SH_C_NONE, SH_F_JSON | SH_F_KEEP,
	  "quantize" },
	{ "eval", cmd_eval,
	  "--data=SPEC [--against=STAGE|--labels=FILE] [--metric=top1|top5|snr|cos|maxabs] [--batch=N] "
	  "[--device=cuda|cpu] [--json]",
	  "run the current stage over a dataset against another stage or labels",
	  "Runs the current stage over the whole dataset (batched, on the GPU when there is one, progress on "
	  "a terminal, Ctrl-C between batches) and compares with stage --against (default 0) run on the same "
	  "batches, per output: SNR and cosine over every element, the largest |a-b|, and top-1/top-5 "
	  "agreement per row; or with --labels (one integer per sample: a .npy, or a text file of one per "
	  "line): top-1 and top-5 accuracy in % of samples. --metric names the figure the summary and --json's "
	  "value give (default snr, or top1 with labels; with several outputs the worst). --data, "
	  "--preprocess, --batch, --batches and --seed as in calibrate.",
	  "eval --data=digits/test.npz --labels=digits/test_labels.npy",
	  "--data= --preprocess= --batch= --batches= --seed= --against= --labels= --metric= --device= --json",
	  SH_C_FILE, SH_F_JSON | SH_F_KEEP, "quantize" },
	{ "rm", cmd_rm, "NODE", "remove a node, rewiring its consumers",
	  "Removes a node. If its outputs are used, the node must have one data input (other "
	  "inputs constant or absent) and one used output: consumers are rewired to read its "
	  "input instead. A removed node that produced a graph output hands the output's name to "
	  "its input.",
	  "rm dropout1", "", SH_C_NODE, SH_F_MODIFIES, "edit" },
	{ "rename", cmd_rename, "OLD NEW [--node] [--value]", "rename a node or a tensor",
	  "Renames the node or value called OLD. If both a node and a value have that name, say "
	  "which with --node or --value. Renaming a value renames it everywhere it is read, "
	  "subgraphs included.",
	  "rename conv1 stem_conv", "--node --value", SH_C_ANY, SH_F_MODIFIES, "edit" },
	{ "set-attr", cmd_set_attr, "NODE NAME=VALUE...", "set or change node attributes",
	  "VALUE is an int (3), a float (0.5), a list ([1,1,2,2] or [0.5,1.0]), or a string "
	  "('NOTSET' or text). An existing attribute keeps its type; force one with NAME:TYPE=VALUE "
	  "(int, float, string, ints, floats, strings). NAME= with no value removes the attribute.",
	  "set-attr pool strides=[1,1] auto_pad=NOTSET", "", SH_C_NODE, SH_F_MODIFIES, "edit" },
	{ "set-input-shape", cmd_set_input_shape, "NAME DIMS", "give a graph input a new shape",
	  "DIMS is 1x3x224x224, batch,3,224,224 or [batch,3,?,?]: numbers, symbolic names "
	  "(use commas or brackets with names) and ? for unknown; [] is a scalar. The element "
	  "type is kept. An input with an initializer (a default value) only takes a shape that "
	  "fits it.",
	  "set-input-shape image 1x3x32x32", "", SH_C_VALUE, SH_F_MODIFIES, "edit" },
	{ "source", cmd_source, "FILE", "run the commands in a script file",
	  "Runs FILE line by line, as `ogsh -f FILE` would. An error stops the script (and reports "
	  "FILE:LINE) unless `set on-error continue`. Scripts may source others, 16 deep at most.",
	  "source scripts/inspect.ogs", "", SH_C_FILE, 0, "session" },
	{ "expect", cmd_expect, "PATH OP VALUE [TOLERANCE]", "check a result, failing the script when it is not as wanted",
	  "Every command that takes --json keeps its last result, with or without --json; PATH names "
	  "the command and a field of that JSON: time.median_ms, run.outputs.probs.max, "
	  "compare.failed, stats.params, info.nodes. Objects are entered by field name; lists by "
	  "index (outputs[0] or outputs.0; -1 is the last) or by an element's name, op or id "
	  "(outputs.probs, stats.ops.Conv.flops); [\"NAME\"] takes a name with dots. OP is one of < "
	  "<= == != >= > (numbers; strings and true/false with == and !=), or ~= with a TOLERANCE, "
	  "relative (1%) or absolute (0.001). An expectation that holds prints `ok: PATH is VALUE`; "
	  "one that does not prints `FILE:LINE: expect failed: time.median_ms is 2.31, wanted < 2` and "
	  "stops the script with exit status 1 (with `set on-error continue` the script goes on and "
	  "still exits with 1). A PATH that is not there is an error that lists the fields there "
	  "are; `COMMAND --json` shows them all. Fields of the usual ones: time: median_ms, p90_ms, "
	  "min_ms, max_ms, mean_ms, throughput, batch, device, graph; run: ms, backend, "
	  "outputs.NAME.min|max|mean|std|nan|inf|shape (with --check or --expect: compared.NAME.pass|"
	  "max_abs|max_rel|cosine|snr_db|bad, passed, failed); compare: passed, failed, missing, "
	  "compared.NAME.(as run); stats: params, macs, flops, ops.OP.flops; info: nodes, "
	  "initializers, params; eval: the metric's fields; plan: gpu, cpu, copies.",
	  "expect time.median_ms < 2", "", SH_C_NONE, 0, "session" },
	{ "history", cmd_history, "[N] | save FILE.ogs", "list the session's commands, or save them as a script",
	  "With no argument, lists every command of the session with its outcome (ok or error); N "
	  "lists the last N. `history save FILE.ogs` writes a script that replays the session: a "
	  "header comment (date, ogsh version, the model file and its SHA-256), `load` of the model "
	  "the session started on (by its absolute path; nothing for the demo model), the settings the "
	  "session started with, then every command that succeeded, in order, except help, history, "
	  "source (the commands of the sourced file are there) and quit. `ogsh -f FILE.ogs` makes the "
	  "same stages. The file is written atomically.",
	  "history save session.ogs", "", SH_C_FILE, 0, "session" },
	{ "set", cmd_set, "[NAME [VALUE]]", "show or change a setting",
	  "Settings: on-error stop|continue (what a script does after an error), timer on|off "
	  "(print each command's wall time), color auto|on|off, tf32 on|off (TF32 tensor cores for "
	  "float32 matrix products and convolutions on the GPU: faster, about 1e-3 relative error; off "
	  "by default), threads N (the CPU kernels' thread count, 1 or more; 0 or auto: the cores ogsh "
	  "may use, the default unless OGSH_THREADS says otherwise; results do not depend on it). With "
	  "no argument, lists them.",
	  "set on-error continue", "", SH_C_SETTING, 0, "session" },
	{ "quit", cmd_quit, "[--force]", "leave ogsh",
	  "Leaves the shell. At a terminal, asks first when there are unsaved changes "
	  "(--force does not ask). `exit` and Ctrl-D do the same.",
	  "quit", "--force", SH_C_NONE, 0, "session" },
	{ "exit", cmd_quit, "[--force]", "leave ogsh (same as quit)",
	  "Same as quit.", "exit", "--force", SH_C_NONE, 0, "session" },
};

const int sh_n_commands = (int)(sizeof(sh_commands) / sizeof(sh_commands[0]));

const struct sh_cmd *sh_find_command(const char *name)
{
	for (int i = 0; i < sh_n_commands; i++)
		if (strcmp(sh_commands[i].name, name) == 0)
			return &sh_commands[i];
	return NULL;
}
