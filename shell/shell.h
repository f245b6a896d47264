/*
 * shell.h - the REPL, commands and scripts (private to shell/).
 */
#ifndef OGSH_SHELL_H
#define OGSH_SHELL_H

#include "ir/ir.h"
#include "exec/exec.h"
#include "passes/pass.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#define OGSH_VERSION "0.1.0"
#define SH_MAX_ARGS 256
#define SH_MAX_SOURCE_DEPTH 16

/* Where the current command came from, for "FILE:LINE: error: ..." */
struct sh_source {
	const char *name;   /* script path, "-c", "<stdin>"; NULL: the keyboard */
	int line;
	struct sh_source *up;
};

/*
 * Per-node figures measured on one stage (time from `profile`, error from
 * `run --check`), for `dot --color-by time|error`: v[id] for node id n<id>
 * of the main graph, NaN where there is no figure. Empty (v NULL) until
 * measured; dropped with the last run's values (sh_run_forget: any stage
 * change or edit).
 */
struct sh_node_values {
	int stage;             /* the stage they belong to */
	int n;                 /* entries in v (the graph's next_id when measured) */
	double *v;
	char unit[16];         /* "ms", "max abs" */
};
/* Sets vals to n entries (all NaN) for `stage`; false when out of memory. */
bool sh_node_values_reset(struct sh_node_values *vals, int stage, int n, const char *unit);
void sh_node_values_clear(struct sh_node_values *vals);

/*
 * A stage that `quantize` made, with the pass options it ran with, so
 * `sensitivity` can replay them one node at a time (cmd_quant.c).
 */
struct sh_quant_rec {
	int stage;                 /* the quantized stage */
	const struct ir_model *m;  /* its model: a stage dropped and remade under that number is another */
	int from;                  /* the float stage it was made from */
	int n_args;
	char *names[16], *values[16];   /* the quantize pass's options (owned) */
};

/* The last result of a command that takes --json: its JSON text (expect.c) */
struct sh_result {
	char *cmd;
	char *json;            /* NULL: no result, for the reason in why */
	size_t len;
	const char *why;
};

/* One command of the session, as typed (history.c) */
struct sh_hist_cmd {
	char *text;
	bool ok;
	bool saved;            /* written by `history save` */
};

struct session {
	struct ir_model *model;
	char *name;            /* shown in the prompt: file name or "demo" */
	bool dirty;            /* changed since loaded or saved */
	int stage;             /* stage number (the stage history comes with the passes) */
	bool inferred;         /* shape inference is up to date with the model */
	struct ir_diag infer_diag; /* its warnings (contradictions with the model's declarations) */
	bool infer_warned;     /* those warnings were shown */
	struct exec_values last_run;  /* inputs and outputs (or every value) of the last run */
	struct pass_history hist;     /* the stages; model == the current stage's model */
	int saved_stage;       /* the stage last saved or loaded (-1: none) */
	bool edit_made;        /* set by sh_model_changed during a command */
	bool last_run_all;     /* run --all-tensors: every value is kept */
	struct sh_node_values node_time;   /* from `profile` */
	struct sh_node_values node_err;    /* from `run --check` */
	bool tf32;             /* `set tf32 on`: TF32 tensor cores for float32 on the GPU */
	int threads;           /* `set threads N`: the CPU kernels' thread count; 0: not set (auto) */
	/* the GPU plan of the current stage (sh_gpu_plan), dropped by sh_run_forget */
	struct exec_plan *plan;
	const struct ir_model *plan_model;
	int plan_stage;
	bool plan_tf32, plan_keep_all;

	/* quantization (cmd_quant.c): the calibration of one stage (its value
	 * names are that stage's; quantize maps them to the current one) */
	bool have_calib;
	struct ir_calib calib;
	int calib_stage;       /* the stage of this session the calibration belongs to */
	char *calib_data;      /* the --data and --preprocess calibrate ran on (NULL after --load) */
	char *calib_pre;
	struct sh_quant_rec *qrec;   /* the stages quantize made */
	int n_qrec, cap_qrec;

	bool on_error_continue;
	bool timer;
	bool color;            /* stdout is a terminal and NO_COLOR is unset */
	bool interactive;      /* commands come from a person at a terminal */
	bool quit;
	int exit_code;
	int errors;            /* errors so far (scripts with on-error continue) */

	struct sh_source *src;
	int depth;             /* source nesting */
	FILE *out;

	/* results for `expect` (expect.c): the last JSON of every command that
	 * takes --json; keep is where a command run without --json writes it
	 * (NULL when nobody keeps it) */
	struct sh_result *results;
	int n_results;
	FILE *keep;
	bool mute;             /* no errors or warnings: a command run again to keep its result */

	/* the commands so far (history.c) */
	struct sh_hist_cmd *cmds;
	int n_cmds, cap_cmds;
	char *start_path;      /* the model the session started on (absolute), NULL: the demo */
	bool hist_started, hist_on_error, hist_tf32;   /* settings before the first command */
	int hist_threads;      /* the thread count then, when set (OGSH_THREADS or set threads); 0: auto */
};

/* ---- the command table (commands.c) ---- */

enum sh_complete {
	SH_C_NONE = 0,
	SH_C_FILE,        /* file paths */
	SH_C_NODE,        /* node names and ids */
	SH_C_VALUE,       /* tensor (value) names */
	SH_C_ANY,         /* nodes and values */
	SH_C_COMMAND,     /* command names */
	SH_C_SETTING,     /* settings of `set` */
};

/* Command flags */
enum {
	SH_F_JSON = 1 << 0,      /* takes --json */
	SH_F_MODIFIES = 1 << 1,  /* changes the model */
	SH_F_KEEP = 1 << 2,      /* without --json, writes its JSON result to s->keep for expect */
	SH_F_PURE = 1 << 3,      /* only reads the model: without --json it is run again with
				  * --json, unseen, to keep its result (a SH_F_JSON command with
				  * neither flag keeps its result only when run with --json) */
};

struct sh_cmd {
	const char *name;
	int (*fn)(struct session *s, int argc, char **argv);
	const char *usage;     /* arguments, e.g. "FILE [--force]" */
	const char *summary;   /* one line for `help` */
	const char *help;      /* the longer text for `help CMD` */
	const char *example;
	const char *options;   /* "--force --external --threshold=" ('=' takes a value) */
	enum sh_complete complete;
	unsigned flags;
	const char *group;     /* heading in `help` */
};

extern const struct sh_cmd sh_commands[];
extern const int sh_n_commands;
const struct sh_cmd *sh_find_command(const char *name);

/* ---- results and expect (expect.c), history (history.c) ---- */

/* Where a command writes its JSON result: s->out with --json, else s->keep
 * (the result kept for `expect`; NULL when nobody keeps it). A command that
 * writes to it when run without --json has SH_F_KEEP. */
static inline FILE *sh_json_file(struct session *s, bool json)
{
	return json ? s->out : s->keep;
}
/* Keeps a command's result (json NULL: none, for the reason `why`, a static string) */
int sh_keep_result(struct session *s, const char *cmd, const char *json, size_t len, const char *why);
void sh_results_free(struct session *s);
/* The command as a script line: words quoted where they must be (malloc'd, NULL: no memory) */
char *sh_command_text(int argc, char **argv);
/* Records a command (takes text) with its outcome */
void sh_history_add(struct session *s, char *text, const char *cmd, int rc);
void sh_history_start(struct session *s, const char *model_path);
/* Notes the settings before the session's first command (called before each command) */
void sh_history_settings(struct session *s);
/* The CPU thread count when the user chose it (set threads, or OGSH_THREADS);
 * 0 when it is the default (the machine's cores). */
int sh_threads_set(const struct session *s);
void sh_history_free(struct session *s);
int sh_sha256_file(const char *path, char hex[65], int *err);
void sh_sha256_hex(const void *data, size_t n, char hex[65]);

/* ---- the command line (main.c) and the manual page (man.c) ---- */

struct sh_cli_option {
	const char *name;      /* "-c", "--version" */
	const char *alias;     /* "-h" for --help, or NULL */
	const char *arg;       /* "FILE.ogs", or NULL */
	const char *text;      /* one line for --help */
	bool repeatable;
	bool alone;            /* prints something and exits: not with a session */
};
extern const struct sh_cli_option sh_cli_options[];
extern const int sh_n_cli_options;
/* ogsh.1 in roff, from the command table and the options above. */
void sh_print_man(FILE *f);

/* ---- running commands (script.c) ---- */

/* Runs one line (may hold several ';'-separated commands). 0 or an error. */
int sh_run_line(struct session *s, const char *line);
/* Runs every line of a stream; stops at the first error unless on-error continue. */
int sh_run_stream(struct session *s, FILE *f, const char *name);
int sh_run_file(struct session *s, const char *path);
/* Splits a command into words: quotes '..' ".." and backslash escapes;
 * stops at an unquoted ';' (*rest points after it) or '#' at a word start.
 * Returns argc, or -1 with *err set. */
int sh_split(const char *line, char *buf, size_t bufsize, char **argv, int max, const char **rest,
	     const char **err);

/* The error for a command name not in the table, with the nearest one if close. */
int sh_unknown_command(struct session *s, const char *name);

/* ---- options ---- */

struct sh_args {
	int npos;
	char *pos[SH_MAX_ARGS];
	int nopt;
	const char *opt_name[32];
	const char *opt_val[32];   /* NULL for flags */
};

/* Parses argv[1..] against the command's option list; error message on unknown options. */
int sh_parse_args(struct session *s, const struct sh_cmd *c, int argc, char **argv, struct sh_args *a);
/* The prologue of a command that takes options only and needs a model:
 * sh_parse_args, usage on a positional argument, sh_need_model; -1 when
 * any fails (the message is out). */
int sh_model_cmd_args(struct session *s, int argc, char **argv, struct sh_args *a);
bool sh_flag(const struct sh_args *a, const char *name);
const char *sh_opt(const struct sh_args *a, const char *name);

/* ---- messages and output (out.c) ---- */

int sh_error(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "FILE:LINE: expect failed: ..." : a failed check (counted as an error by the caller) */
void sh_fail(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sh_warn(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Shows a diag: its warnings, then its error (returns -1 if there was one). */
int sh_diag(struct session *s, struct ir_diag *d);
/* "usage: CMD USAGE" from the command table, as an error. */
int sh_usage(struct session *s, const char *cmd);
/* errno as a lowercase phrase: "no such file", "permission denied" */
const char *sh_strerror(int err);
/* "1 node", "3 nodes", "4,096 elements" */
const char *sh_nouns(uint64_t n, const char *one, const char *many, char *buf, size_t size);
void sh_printf(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A name made safe for a terminal: control bytes as \xNN. Static buffer rotation (4). */
const char *sh_esc(const char *name);
/* Progress on stderr ("saving 45% (300.0 MiB of 650.0 MiB)"), for callbacks of
 * long operations; arg is the verb. sh_progress_done clears the line. */
void sh_progress(void *arg, uint64_t done, uint64_t total);
void sh_progress_done(void);
/* "1.5 MiB", "312 B" */
const char *sh_bytes(uint64_t n, char *buf, size_t size);
/* "4.09 G", "118 M", "512", "?" (1000-based, 3 significant digits) */
const char *sh_si(double v, char *buf, size_t size);
/* Option --NAME=V of command CMD as an int in [min, 1e9]; -1 after an error
 * ("time: --iters must be a whole number >= 1, not 'x'"). */
int sh_int_opt(struct session *s, const char *cmd, const char *name, const char *v, int min, int *out);
/* "25,557,032" */
const char *sh_count(uint64_t n, char *buf, size_t size);
/* Colour escapes when colour is on, "" otherwise. */
const char *sh_c(struct session *s, const char *code);
#define SH_BOLD "1"
#define SH_DIM "2"
#define SH_RED "31"
#define SH_GREEN "32"
#define SH_YELLOW "33"
#define SH_CYAN "36"
#define SH_RESET "0"

/* Aligned tables */
struct sh_table {
	int ncols;
	const char *head[16];
	bool right[16];     /* right-align (numbers) */
	char **cells;       /* rows * ncols, owned */
	int rows, cap;
};
void sh_table_init(struct sh_table *t, int ncols, ...);   /* headers; a leading '>' right-aligns */
void sh_table_row(struct sh_table *t, ...);              /* ncols strings (copied) */
void sh_table_print(struct session *s, const struct sh_table *t, bool header);
void sh_table_free(struct sh_table *t);

/* JSON writer: pretty-printed, valid UTF-8 (bad bytes become U+FFFD). */
struct sh_json {
	FILE *f;
	int depth;
	bool first[64];
	bool key_pending;
};
void sh_json_begin(struct sh_json *j, FILE *f);
void sh_json_end(struct sh_json *j);   /* final newline */
void sh_json_obj(struct sh_json *j);
void sh_json_obj_end(struct sh_json *j);
void sh_json_arr(struct sh_json *j);
void sh_json_arr_end(struct sh_json *j);
void sh_json_key(struct sh_json *j, const char *k);
void sh_json_str(struct sh_json *j, const char *v);     /* NULL -> null */
void sh_json_strn(struct sh_json *j, const char *v, size_t n);
void sh_json_int(struct sh_json *j, int64_t v);
void sh_json_uint(struct sh_json *j, uint64_t v);
void sh_json_num(struct sh_json *j, double v);          /* NaN/Inf -> strings "nan", "inf" */
void sh_json_bool(struct sh_json *j, bool v);
void sh_json_null(struct sh_json *j);
/* key + value helpers */
void sh_json_kstr(struct sh_json *j, const char *k, const char *v);
void sh_json_kint(struct sh_json *j, const char *k, int64_t v);
void sh_json_kuint(struct sh_json *j, const char *k, uint64_t v);
void sh_json_knum(struct sh_json *j, const char *k, double v);
void sh_json_kbool(struct sh_json *j, const char *k, bool v);
/* a type as {"dtype":..., "shape":[...]} */
void sh_json_type(struct sh_json *j, const struct ir_type *t);

/* ---- lookups shared by commands (resolve.c) ---- */

/* A node by name, nN or #N, quietly: NULL if none; *count > 1 when the name is ambiguous. */
struct ir_node *sh_find_node(const struct ir_graph *g, const char *ref, int *count);
/* The error for a name that several nodes have, listing their ids; returns -1. */
int sh_ambiguous(struct session *s, const struct ir_graph *g, const char *name, int count);
/* A node of the main graph by name, nN or #N; NULL with an error printed. */
struct ir_node *sh_node(struct session *s, const char *ref);
/* A value of the main graph by name; NULL with an error printed. */
struct ir_value *sh_value(struct session *s, const char *name);
/* "'conv1' (n3, Conv)" */
const char *sh_node_desc(const struct ir_node *n, char *buf, size_t size);
bool sh_need_model(struct session *s);
/* Replaces the session's model (frees the old one). */
void sh_set_model(struct session *s, struct ir_model *m, const char *name);
/* Runs shape inference if the model changed since it last ran; 0 or an
 * error (printed). Its warnings stay in s->infer_diag for `shapes`. */
int sh_infer(struct session *s);
/* The model changed: inferred shapes are stale. */
void sh_model_changed(struct session *s);
/* Asks y/N on the terminal; true when not interactive. */
bool sh_confirm(struct session *s, const char *question);

/* ---- the interactive loop (repl.c) ---- */

int sh_repl(struct session *s);
/* Whether colour should be on: stdout is a terminal and NO_COLOR is unset. */
bool sh_color_auto(void);
void sh_install_signals(void);

/* ---- commands (cmd_*.c) ---- */

int cmd_help(struct session *s, int argc, char **argv);
int cmd_load(struct session *s, int argc, char **argv);
int cmd_save(struct session *s, int argc, char **argv);
int cmd_info(struct session *s, int argc, char **argv);
int cmd_nodes(struct session *s, int argc, char **argv);
int cmd_show(struct session *s, int argc, char **argv);
int cmd_tensor(struct session *s, int argc, char **argv);
int cmd_ops(struct session *s, int argc, char **argv);
int cmd_inputs(struct session *s, int argc, char **argv);
int cmd_outputs(struct session *s, int argc, char **argv);
int cmd_shapes(struct session *s, int argc, char **argv);
int cmd_check(struct session *s, int argc, char **argv);
int cmd_stats(struct session *s, int argc, char **argv);
int cmd_cost(struct session *s, int argc, char **argv);
int cmd_rm(struct session *s, int argc, char **argv);
int cmd_rename(struct session *s, int argc, char **argv);
int cmd_set_attr(struct session *s, int argc, char **argv);
int cmd_set_input_shape(struct session *s, int argc, char **argv);
int cmd_source(struct session *s, int argc, char **argv);
int cmd_set(struct session *s, int argc, char **argv);
int cmd_quit(struct session *s, int argc, char **argv);
int cmd_expect(struct session *s, int argc, char **argv);
int cmd_history(struct session *s, int argc, char **argv);
int cmd_conformance(struct session *s, int argc, char **argv);
int cmd_run(struct session *s, int argc, char **argv);
int cmd_compare(struct session *s, int argc, char **argv);
int cmd_passes(struct session *s, int argc, char **argv);
int cmd_explain(struct session *s, int argc, char **argv);
int cmd_apply(struct session *s, int argc, char **argv);
int cmd_optimize(struct session *s, int argc, char **argv);
int cmd_stages(struct session *s, int argc, char **argv);
int cmd_undo(struct session *s, int argc, char **argv);
int cmd_redo(struct session *s, int argc, char **argv);
int cmd_checkout(struct session *s, int argc, char **argv);
int cmd_diff(struct session *s, int argc, char **argv);
int cmd_gpu(struct session *s, int argc, char **argv);
int cmd_plan(struct session *s, int argc, char **argv);
int cmd_time(struct session *s, int argc, char **argv);
int cmd_profile(struct session *s, int argc, char **argv);
/*
 * The GPU plan for the current stage, these inputs' shapes and the session's
 * settings (keep_all: every value can be read back): the session's own when it
 * fits, else a new one (tuning progress on a terminal) that the session keeps.
 * 0, or -1 with the error printed as "CMD: ...".
 */
int sh_gpu_plan(struct session *s, const char *cmd, const struct exec_values *in, bool keep_all,
		struct exec_plan **out);
void sh_gpu_plan_free(struct session *s);
int cmd_dot(struct session *s, int argc, char **argv);
/* A pass report as apply prints it (`all`: every message, else the first
 * 40), and as JSON (cmd_stages.c). */
void sh_pass_report_print(struct session *s, const struct pass_report *r, bool all);
void sh_pass_report_json(struct sh_json *j, const struct pass_report *r);
/* Keeps a pass's result `out` (NULL: nothing changed, said unless quiet) as
 * the next stage, labelled with the pass and its options, and says what
 * changed (quiet: says nothing); clears rep. 0 or -1 (printed). */
int sh_pass_push(struct session *s, const struct pass *p, const struct pass_arg *args, int n_args,
		 struct ir_model *out, struct pass_report *rep, bool quiet);
/* Quantization: calibrate, calib, quantize, convert-fp16/bf16, sensitivity, eval (cmd_quant.c) */
int cmd_calibrate(struct session *s, int argc, char **argv);
int cmd_calib(struct session *s, int argc, char **argv);
int cmd_quantize(struct session *s, int argc, char **argv);
int cmd_convert_fp16(struct session *s, int argc, char **argv);
int cmd_sensitivity(struct session *s, int argc, char **argv);
int cmd_eval(struct session *s, int argc, char **argv);
/* The session's calibration under the current stage's names, quietly:
 * NULL when there is none or it does not belong to this line of stages.
 * It may be `tmp` (initialised here): ir_calib_clear it after use. */
const struct ir_calib *sh_session_calib(struct session *s, struct ir_calib *tmp);
/* Drops the calibration and the quantize records (a new model, the end). */
void sh_quant_forget(struct session *s);
/* stats A B: two stages side by side (cmd_stages.c) */
int sh_stats_stages(struct session *s, const char *a, const char *b, bool json);
/* Whether some of a stage's compute is quantized or in half precision (cmd_stats.c). */
bool sh_stats_reduced(const struct ir_stats *st);
/* compare --stages A B (cmd_stages.c) */
int sh_compare_stages(struct session *s, const char *a, const char *b, int argc, char **argv);
/* The current stage changed (undo, redo, checkout, a pass): the session follows it. */
void sh_stage_changed(struct session *s);
/* A stage number from "3", "@3" or "-1" (relative to the current one); -1 with an error printed. */
int sh_stage_arg(struct session *s, const char *cmd, const char *arg);
/* Forgets the last run's values (the model changed). */
void sh_run_forget(struct session *s);

#endif
