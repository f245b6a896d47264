/*
 * main.c - ogsh's entry point: options, the first model, and which way
 * commands come in (keyboard, -c, -f, or a pipe on stdin).
 */
#include "shell.h"

#include "kernels/kernels.h"

#include <graphviz/cgraph.h>
#include <graphviz/graphviz_version.h>
#include <graphviz/gvc.h>
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The command-line options: --help and the manual page (man.c) both read them. */
const struct sh_cli_option sh_cli_options[] = {
	{ "-c", NULL, "'CMD; CMD'", "run these commands and exit (may be repeated)", true, false },
	{ "-f", NULL, "FILE.ogs", "run a script and exit (may be repeated)", true, false },
	{ "-q", NULL, NULL, "no banner", false, false },
	{ "--version", NULL, NULL, "versions of ogsh and of the libraries it uses", false, true },
	{ "--doc", NULL, NULL, "the command reference in Markdown (docs/commands.md)", false, true },
	{ "--man", NULL, NULL, "the manual page in roff (ogsh.1; man -l reads it)", false, true },
	{ "--help", "-h", NULL, "this text", false, true },
};
const int sh_n_cli_options = (int)(sizeof(sh_cli_options) / sizeof(sh_cli_options[0]));

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ogsh [options] [model.onnx]\n"
		"\n"
		"Opens the model (or the built-in demo CNN when none is given) in an\n"
		"interactive shell. Commands can also come from -c, -f or a pipe.\n"
		"\n");
	for (int i = 0; i < sh_n_cli_options; i++) {
		const struct sh_cli_option *o = &sh_cli_options[i];
		char opt[64];
		snprintf(opt, sizeof(opt), "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
			 o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-15s %s\n", opt, o->text);
	}
	fprintf(f,
		"\n"
		"In scripts an error prints FILE:LINE: error: ... and stops with exit\n"
		"status 1, unless the script says `set on-error continue`.\n");
}

/* "9.19.0" from 91900-style versions (major*10000 + minor*100 + patch); "none" for 0 */
static const char *v3(long v, char *buf, size_t size)
{
	if (v <= 0)
		snprintf(buf, size, "none found");
	else
		snprintf(buf, size, "%ld.%ld.%ld", v / 10000, v / 100 % 100, v % 100);
	return buf;
}

static void print_version(void)
{
	printf("ogsh %s\n", OGSH_VERSION);
	printf("protobuf-c %s\n", protobuf_c_version());
	printf("graphviz %s\n", PACKAGE_VERSION);
	struct kern_cuda_info ci;
	kern_cuda_info(&ci);
	if (!ci.compiled) {
		printf("cuda: not built in (CPU only)\n");
		return;
	}
	char a[32], b[32], c[32], rt[32] = "none found";
	if (ci.runtime_version)
		snprintf(rt, sizeof(rt), "%d.%d", ci.runtime_version / 1000, ci.runtime_version % 1000 / 10);
	printf("cuda: built with cuDNN %s headers; found runtime %s, cuDNN %s, cuBLASLt %s\n",
	       v3(ci.cudnn_built, a, sizeof(a)), rt, v3(ci.cudnn_version, b, sizeof(b)),
	       v3(ci.cublas_version, c, sizeof(c)));
	if (!ci.driver_version)
		printf("cuda driver: none found (GPU commands will not be available)\n");
	else
		printf("cuda driver %d.%d, %d device%s%s%s\n", ci.driver_version / 1000, ci.driver_version % 1000 / 10,
		       ci.device_count, ci.device_count == 1 ? "" : "s", ci.device_count ? ": " : "", ci.device_name);
}

/* docs/commands.md, made from the command table */
static void print_doc(void)
{
	printf("# ogsh commands\n\n");
	printf("Generated from the command table (shell/commands.c) by `ogsh --doc`; `help COMMAND` in the\n"
	       "shell shows the same text. A test fails when this file and the table disagree: regenerate it\n"
	       "with `build/shell/ogsh --doc > docs/commands.md`.\n\n");
	printf("| command | summary |\n|---|---|\n");
	for (int i = 0; i < sh_n_commands; i++)
		printf("| [`%s`](#%s) | %s |\n", sh_commands[i].name, sh_commands[i].name, sh_commands[i].summary);
	for (int i = 0; i < sh_n_commands; i++) {
		const struct sh_cmd *c = &sh_commands[i];
		const char *sum = c->summary;
		char first = sum[0] >= 'a' && sum[0] <= 'z' ? (char)(sum[0] - 'a' + 'A') : sum[0];
		printf("\n## %s\n\n```\n%s %s\n```\n\n%c%s.\n\n%s\n\nExample: `%s`\n", c->name, c->name, c->usage,
		       first, sum[0] ? sum + 1 : "", c->help, c->example);
	}
}

int main(int argc, char **argv)
{
	struct session s = { .out = stdout };
	s.color = sh_color_auto();
	const char *model_path = NULL;
	struct { bool file; const char *text; } jobs[64];
	int njobs = 0;
	bool quiet = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--version") == 0) {
			print_version();
			return 0;
		}
		if (strcmp(a, "--doc") == 0) {
			print_doc();
			return 0;
		}
		if (strcmp(a, "--man") == 0) {
			sh_print_man(stdout);
			return 0;
		}
		if (strcmp(a, "-q") == 0) {
			quiet = true;
			continue;
		}
		if (strcmp(a, "-c") == 0 || strcmp(a, "-f") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "ogsh: error: %s needs an argument\n", a);
				return 2;
			}
			if (njobs == 64) {
				fprintf(stderr, "ogsh: error: too many -c/-f options (64 at most)\n");
				return 2;
			}
			jobs[njobs].file = a[1] == 'f';
			jobs[njobs++].text = argv[++i];
			continue;
		}
		if (a[0] == '-' && a[1]) {
			fprintf(stderr, "ogsh: error: unknown option '%s'\n", sh_esc(a));
			usage(stderr);
			return 2;
		}
		if (model_path) {
			fprintf(stderr, "ogsh: error: only one model can be given ('%s' and '%s')\n", sh_esc(model_path),
				sh_esc(a));
			return 2;
		}
		model_path = a;
	}

	sh_install_signals();
	if (!cpu_threads_env_ok())
		fprintf(stderr, "ogsh: warning: OGSH_THREADS='%s' is not a whole number of 1 or more: using %d threads\n",
			sh_esc(getenv("OGSH_THREADS")), cpu_machine_cores());
	if (model_path) {
		struct ir_diag d;
		ir_diag_init(&d);
		d.max_warnings = 20;
		struct ir_model *m = ir_model_load(model_path, NULL, &d);
		if (!m) {
			sh_diag(&s, &d);
			return 1;
		}
		sh_diag(&s, &d);
		sh_set_model(&s, m, model_path);
		sh_history_start(&s, model_path);
	} else {
		struct ir_model *m = ir_demo_model();
		if (!m) {
			fprintf(stderr, "ogsh: error: out of memory building the demo model\n");
			return 1;
		}
		sh_set_model(&s, m, "demo");
	}

	int rc = 0;
	bool failed = false;   /* some job failed (with on-error continue the next ones still ran) */
	if (njobs) {
		for (int i = 0; i < njobs && !s.quit; i++) {
			if (jobs[i].file) {
				rc = sh_run_file(&s, jobs[i].text);
			} else {
				FILE *f = fmemopen((void *)jobs[i].text, strlen(jobs[i].text), "r");
				if (!f) {
					fprintf(stderr, "ogsh: error: out of memory\n");
					rc = -1;
				} else {
					rc = sh_run_stream(&s, f, "-c");
					fclose(f);
				}
			}
			failed |= rc != 0;
			if (rc && !s.on_error_continue)
				break;
		}
	} else if (isatty(STDIN_FILENO)) {
		s.interactive = true;
		if (!quiet)
			printf("ogsh %s, the ONNX graph shell. %s loaded; type help for the commands.\n", OGSH_VERSION,
			       model_path ? sh_esc(s.name) : "The built-in demo CNN is");
		rc = sh_repl(&s);
	} else {
		rc = sh_run_stream(&s, stdin, "<stdin>");
	}
	fflush(stdout);
	pass_history_free(&s.hist);
	exec_cache_clear();
	sh_quant_forget(&s);
	ir_diag_clear(&s.infer_diag);
	sh_run_forget(&s);
	free(s.name);
	sh_results_free(&s);
	sh_history_free(&s);
	if (s.exit_code)
		return s.exit_code;
	return rc || failed || s.errors ? 1 : 0;
}
