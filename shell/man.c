/*
 * man.c - ogsh.1, the manual page, written in roff (man macros) by
 * `ogsh --man` from the command table and the command-line options table
 * (main.c), so it cannot fall behind them. meson makes build/shell/ogsh.1
 * with it and installs it; tests/script/check_man.py checks it.
 */
#include "shell.h"

#include <string.h>

/*
 * Text for a roff text line: '\' is written \e, a '-' that starts an
 * option or a number (after a space, a bracket, '=' or another '-') is the
 * minus sign \- (a hyphen inside a word stays a hyphen), a '.' or '\'' at
 * the start of a line is guarded with \& (it would start a request), and
 * bytes beyond ASCII are written as \[uXXXX] from their UTF-8 sequence;
 * a comma inside a word is followed by \: (a place the line may break).
 * With `italic_caps`, runs of capitals (placeholders such as FILE or
 * NAME=DIMS) are set in italics. *at_start says whether the output is at
 * the start of a line, and is kept up to date.
 */
static void roff(FILE *f, const char *text, bool italic_caps, bool *at_start)
{
	const unsigned char *p = (const unsigned char *)text;
	unsigned char prev = ' ';
	bool in_caps = false;
	while (*p) {
		unsigned char c = *p;
		bool cap = italic_caps && ((c >= 'A' && c <= 'Z') || (in_caps && ((c >= '0' && c <= '9') || c == '_')));
		if (cap && !in_caps && !(prev >= 'a' && prev <= 'z') && !(prev >= '0' && prev <= '9')) {
			fputs("\\fI", f);
			in_caps = true;
			*at_start = false;
		} else if (!cap && in_caps) {
			fputs("\\fR", f);
			in_caps = false;
		}
		if (c == '\n') {
			fputc('\n', f);
			*at_start = true;
			prev = ' ';
			p++;
			continue;
		}
		if (*at_start && (c == '.' || c == '\''))
			fputs("\\&", f);
		*at_start = false;
		if (c == '\\') {
			fputs("\\e", f);
		} else if (c == '-' && (prev == ' ' || prev == '[' || prev == '(' || prev == '=' || prev == '-' ||
					prev == '|' || prev == '`' || prev == ',')) {
			fputs("\\-", f);
		} else if (c >= 0x80) {
			/* a UTF-8 sequence: its code point, or U+FFFD when malformed */
			unsigned cp = 0xFFFD;
			int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
			if (n > 0) {
				unsigned v = c & (0x3F >> n);
				int i = 1;
				for (; i <= n && (p[i] & 0xC0) == 0x80; i++)
					v = v << 6 | (p[i] & 0x3F);
				if (i > n) {
					cp = v;
					p += n;
				}
			}
			fprintf(f, "\\[u%04X]", cp);
		} else {
			fputc(c, f);
			/* a break point after a comma inside a long word (a list
			 * such as resize=256,crop=224,...): no "can't break line" */
			if (c == ',' && p[1] && p[1] != ' ')
				fputs("\\:", f);
		}
		prev = c;
		p++;
	}
	if (in_caps)
		fputs("\\fR", f);
}

/* A text line (or several, when text holds newlines), ended. */
static void line(FILE *f, const char *text)
{
	bool at = true;
	roff(f, text, false, &at);
	fputc('\n', f);
}

/* A summary as a sentence: capitalised, with a full stop, on its own line. */
static void sentence(FILE *f, const char *text)
{
	bool at = true;
	if (text[0] >= 'a' && text[0] <= 'z') {
		fputc(text[0] - 'a' + 'A', f);
		text++;
		at = false;
	}
	roff(f, text, false, &at);
	fputs(".\n", f);
}

/* The environment variables ogsh reads (tests/script/check_man.py checks
 * that every getenv("OGSH_...") of the sources is here). */
static const struct {
	const char *name, *text;
} env_vars[] = {
	{ "OGSH_DEVICE", "cpu turns the GPU off: run, time, profile, calibrate, eval and sensitivity run on the "
			 "CPU reference, and gpu says so." },
	{ "OGSH_CPU_ISA", "generic, avx2 or avx512: the most the CPU kernels may use (generic gives the same float "
			  "rounding on every CPU; the golden tests set it)." },
	{ "OGSH_THREADS", "the number of threads the CPU kernels use (a whole number, 1 or more; default: the "
			  "cores this process may run on); `set threads` changes it. Results do not depend on it." },
	{ "OGSH_HISTORY", "the file of the interactive shell's command history (default ~/.ogsh_history); set "
			  "and empty, no history is read or written." },
	{ "OGSH_LAYOUT", "nchw keeps every GPU activation in NCHW (no channels-last float16 values), for "
			 "comparisons." },
	{ "OGSH_QFUSE", "0 leaves every QuantizeLinear and DequantizeLinear as its own GPU node (no integer or "
			"FP8 islands), for comparisons." },
	{ "OGSH_QCONV_UNSTAGED", "1: the quantized convolution kernel writes its outputs without the staged "
				 "epilogue (for comparisons; the tests run both)." },
	{ "OGSH_QGEMM_LT", "0: quantized matrix products use only ogsh's kernel, never cuBLASLt." },
	{ "OGSH_ATTN_OCC", "0: the float16/bfloat16 attention kernel is not held to 128 registers a thread "
			   "(fewer blocks at once, nothing spilled), for comparisons." },
	{ "OGSH_ATTN_CUDNN", "0: float16/bfloat16 attention never runs on cuDNN's fused flash-attention engines, "
			    "only on ogsh's own kernels, for comparisons." },
	{ "OGSH_CONV_API", "legacy: cuDNN's legacy convolution API only (none of ogsh's own conv paths)." },
	{ "OGSH_CONV_PATCH", "0: no patch GEMM (a convolution whose kernel is its stride, such as ViT's patch "
			     "embedding, runs through cuDNN instead of as patches and one cuBLASLt product), for "
			     "comparisons." },
	{ "OGSH_PDL", "0: ogsh's LayerNorm and GELU kernels start only when the kernel before them has finished, "
		      "instead of being launched early and waiting on the GPU (programmatic dependent launch, "
		      "sm_90 and later), for comparisons." },
	{ "OGSH_CUDNN_DEBUG", "set: every cuDNN candidate timed, and why an attention does not run on cuDNN, on "
			      "standard error." },
	{ "OGSH_NO_NVRTC", "set: no kernels compiled at run time with NVRTC (fused elementwise chains use the "
			   "generic kernel)." },
	{ "NO_COLOR", "set: no colour, even at a terminal." },
	{ "XDG_CACHE_HOME", "where the GPU tuning cache lives (see FILES)." },
};

/* "\fB\-c\fR \fI'CMD; CMD'\fR"; "\fB\-h\fR, \fB\-\-help\fR" with its alias */
static void option(FILE *f, const struct sh_cli_option *o, bool alias)
{
	bool at = false;
	if (alias && o->alias) {
		fputs("\\fB", f);
		roff(f, o->alias, false, &at);
		fputs("\\fR, ", f);
	}
	fputs("\\fB", f);
	roff(f, o->name, false, &at);
	fputs("\\fR", f);
	if (o->arg) {
		fputs(" \\fI", f);
		roff(f, o->arg, false, &at);
		fputs("\\fR", f);
	}
}

/* One command: its name and usage as the tag, then summary, help, example. */
static void command(FILE *f, const struct sh_cmd *c)
{
	bool at = false;
	fprintf(f, ".TP\n\\fB");
	roff(f, c->name, false, &at);
	fputs("\\fR", f);
	if (c->usage[0]) {
		fputc(' ', f);
		roff(f, c->usage, true, &at);
	}
	fputc('\n', f);
	sentence(f, c->summary);
	if (c->help[0]) {
		fputs(".IP\n", f);
		line(f, c->help);
	}
	if (c->example[0]) {
		fputs(".IP\nExample: \\fB", f);
		at = false;
		roff(f, c->example, false, &at);
		fputs("\\fR\n", f);
	}
}

void sh_print_man(FILE *f)
{
	fprintf(f, ".\\\" ogsh.1: generated by `ogsh --man` from the command table (shell/commands.c)\n"
		   ".\\\" and the options table (shell/main.c); edit those, not this file.\n");
	fprintf(f, ".TH OGSH 1 \"\" \"ogsh %s\" \"User Commands\"\n", OGSH_VERSION);
	/* ragged right, no hyphenation: the text is full of option names,
	 * paths and lists that should neither stretch lines nor be split */
	fprintf(f, ".ad l\n.nh\n");

	fprintf(f, ".SH NAME\nogsh \\- the ONNX graph shell: open, edit, optimize, quantize, draw and run ONNX "
		   "models\n");

	/* the options that go with a session, then those that print and exit */
	fprintf(f, ".SH SYNOPSIS\n.B ogsh\n");
	for (int i = 0; i < sh_n_cli_options; i++) {
		const struct sh_cli_option *o = &sh_cli_options[i];
		if (o->alone)
			continue;
		fputc('[', f);
		option(f, o, false);
		fprintf(f, "]%s\n", o->repeatable ? "..." : "");
	}
	fprintf(f, "[\\fImodel.onnx\\fR]\n.br\n.B ogsh\n");
	bool first = true;
	for (int i = 0; i < sh_n_cli_options; i++) {
		if (!sh_cli_options[i].alone)
			continue;
		if (!first)
			fputs(" | ", f);
		option(f, &sh_cli_options[i], false);
		first = false;
	}
	fputc('\n', f);

	fprintf(f, ".SH DESCRIPTION\n");
	line(f, "ogsh loads an ONNX model (or, with no model.onnx, a built-in demo CNN) into an editable graph and "
		"opens an interactive shell on it. Each pass (constant folding, fusions, float16 and bfloat16 "
		"conversion, INT8, FP8 and INT4 quantization from a calibration) or hand edit makes a new stage, "
		"which can be listed, compared, drawn with Graphviz, run on the CPU reference or on a GPU, timed, "
		"undone and saved as standard ONNX.");
	fprintf(f, ".PP\n");
	line(f, "Commands come from the keyboard (with line editing, history and completion), from -c, from "
		"script files (.ogs, one command per line, # comments, several commands on a line separated by "
		"';'; -f), or from standard input when it is not a terminal. In a script an error prints "
		"FILE:LINE: error: ... and stops it with exit status 1, unless the script says "
		"`set on-error continue`. Many commands take --json and then print one JSON document.");

	fprintf(f, ".SH OPTIONS\n");
	for (int i = 0; i < sh_n_cli_options; i++) {
		fprintf(f, ".TP\n");
		option(f, &sh_cli_options[i], true);
		fputc('\n', f);
		sentence(f, sh_cli_options[i].text);
	}

	/* the groups of `help`, in the order the table first names them */
	fprintf(f, ".SH COMMANDS\n");
	line(f, "The commands of the shell, grouped as help lists them. help COMMAND shows the same text in the "
		"shell. NODE is a node name, an id (n12) or #12; A and B are stage numbers from stages.");
	for (int gi = 0; gi < sh_n_commands; gi++) {
		const char *group = sh_commands[gi].group;
		bool seen = false;
		for (int j = 0; j < gi && !seen; j++)
			seen = strcmp(sh_commands[j].group, group) == 0;
		if (seen)
			continue;
		fprintf(f, ".SS ");
		line(f, group);
		for (int i = gi; i < sh_n_commands; i++)
			if (strcmp(sh_commands[i].group, group) == 0)
				command(f, &sh_commands[i]);
	}

	fprintf(f, ".SH EXAMPLES\n");
	static const char *const examples[][2] = {
		{ "Open a model in the shell:", "ogsh resnet50.onnx" },
		{ "Summarise it and count its cost per op type, without a shell:",
		  "ogsh -c 'info; stats --top=10' resnet50.onnx" },
		{ "Fuse, check that the numbers did not change, and save:",
		  "ogsh -c 'optimize --quiet; compare --stages 0 1; save fused.onnx' model.onnx" },
		{ "Quantize to int8 from a calibration and measure the accuracy against labels:",
		  "ogsh -c 'calibrate --data=calib.npy; quantize int8 --method=entropy; "
		  "eval --data=test.npy --labels=test_labels.npy' digits_cnn.onnx" },
		{ "Draw what a pass changed:", "ogsh -c 'apply fuse-conv-bn; dot diff.png --diff=0'" },
		{ "Run a lesson of the source tree (they use the demo model or tests/models/digits):",
		  "ogsh -f scripts/lessons/fusion.ogs" },
		{ "Run on the CPU reference even where there is a GPU:", "OGSH_DEVICE=cpu ogsh -c 'run' model.onnx" },
	};
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
		fprintf(f, ".PP\n");
		line(f, examples[i][0]);
		fprintf(f, ".PP\n.RS\n.nf\n");
		line(f, examples[i][1]);
		fprintf(f, ".fi\n.RE\n");
	}

	fprintf(f, ".SH ENVIRONMENT\n");
	for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++) {
		fprintf(f, ".TP\n.B %s\n", env_vars[i].name);
		line(f, env_vars[i].text);
	}

	fprintf(f, ".SH FILES\n");
	fprintf(f, ".TP\n.I ~/.ogsh_history\n");
	line(f, "The interactive shell's command history (see OGSH_HISTORY).");
	fprintf(f, ".TP\n.I $XDG_CACHE_HOME/ogsh/tune\n");
	line(f, "The GPU tuning cache (~/.cache/ogsh/tune without XDG_CACHE_HOME): the kernel choices timed "
		"once per GPU, driver and library versions.");
	fprintf(f, ".TP\n.I *.ogs\n");
	line(f, "Scripts of ogsh commands, for -f and source.");

	fprintf(f, ".SH EXIT STATUS\n");
	line(f, "0 when every command succeeded, 1 when one failed (or a script stopped at an error), 2 for a "
		"wrong command line.");

	fprintf(f, ".SH SEE ALSO\n.BR dot (1)\n");
	line(f, "(Graphviz), and in the source tree: README.md, docs/commands.md (the same command reference in "
		"Markdown, from ogsh --doc), docs/costs.md (how the cost model counts) and scripts/lessons/.");
}
