/*
 * history.c - the session's commands (`history`), and `history save`,
 * which writes them as a script that replays the session.
 */
#include "shell.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SH_MAX_HISTORY 1000000

/* ---- SHA-256 (FIPS 180-4), for the model file named in a saved history ---- */

struct sha256 {
	uint32_t h[8];
	uint64_t len;
	unsigned char buf[64];
	size_t nbuf;
};

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static void sha_block(struct sha256 *c, const unsigned char *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = cc;
		cc = b;
		b = a;
		a = t1 + t2;
	}
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
	c->h[5] += f;
	c->h[6] += g;
	c->h[7] += h;
}

static void sha_init(struct sha256 *c)
{
	static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	memcpy(c->h, h0, sizeof(h0));
	c->len = 0;
	c->nbuf = 0;
}

static void sha_update(struct sha256 *c, const void *data, size_t n)
{
	const unsigned char *p = data;
	c->len += n;
	while (n) {
		size_t k = 64 - c->nbuf < n ? 64 - c->nbuf : n;
		memcpy(c->buf + c->nbuf, p, k);
		c->nbuf += k;
		p += k;
		n -= k;
		if (c->nbuf == 64) {
			sha_block(c, c->buf);
			c->nbuf = 0;
		}
	}
}

static void sha_final(struct sha256 *c, char hex[65])
{
	uint64_t bits = c->len * 8;
	unsigned char pad = 0x80;
	sha_update(c, &pad, 1);
	pad = 0;
	while (c->nbuf != 56)
		sha_update(c, &pad, 1);
	unsigned char lenb[8];
	for (int i = 0; i < 8; i++)
		lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
	sha_update(c, lenb, 8);
	for (int i = 0; i < 8; i++)
		snprintf(hex + 8 * i, 9, "%08x", c->h[i]);
}

int sh_sha256_file(const char *path, char hex[65], int *err)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		*err = errno;
		return -1;
	}
	struct sha256 c;
	sha_init(&c);
	static unsigned char buf[1 << 16];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		sha_update(&c, buf, n);
		if (ir_interrupted)
			break;
	}
	int bad = ferror(f) || ir_interrupted;
	*err = bad ? (ir_interrupted ? EINTR : EIO) : 0;
	fclose(f);
	if (bad)
		return -1;
	sha_final(&c, hex);
	return 0;
}

void sh_sha256_hex(const void *data, size_t n, char hex[65])
{
	struct sha256 c;
	sha_init(&c);
	sha_update(&c, data, n);
	sha_final(&c, hex);
}

/* ---- recording ---- */

/* A word as the script reader reads it back: quoted when it has to be. */
static size_t quote_word(const char *w, char *out, size_t size)
{
	bool plain = *w != 0;
	for (const char *p = w; *p; p++)
		if (strchr(" \t\r\n'\"\\;#", *p))
			plain = false;
	if (plain)
		return (size_t)snprintf(out, size, "%s", w);
	if (!strchr(w, '\'') && !strpbrk(w, "\r\n"))
		return (size_t)snprintf(out, size, "'%s'", w);
	size_t o = 0;
	if (o + 1 < size)
		out[o] = '"';
	o++;
	for (const char *p = w; *p; p++) {
		if (*p == '"' || *p == '\\') {
			if (o + 1 < size)
				out[o] = '\\';
			o++;
		}
		if (o + 1 < size)
			out[o] = *p;
		o++;
	}
	if (o + 1 < size)
		out[o] = '"';
	o++;
	if (size)
		out[o < size ? o : size - 1] = 0;
	return o;
}

char *sh_command_text(int argc, char **argv)
{
	size_t cap = 64;
	for (int i = 0; i < argc; i++)
		cap += 2 * strlen(argv[i]) + 4;
	char *t = malloc(cap);
	if (!t)
		return NULL;
	size_t o = 0;
	for (int i = 0; i < argc; i++) {
		if (i)
			t[o++] = ' ';
		o += quote_word(argv[i], t + o, cap - o);
	}
	t[o] = 0;
	return t;
}

/* Commands that are not written by `history save`: they neither change the
 * model nor make a result, or they would run what they stand for twice. */
static bool not_saved(const char *cmd)
{
	static const char *const skip[] = { "help", "history", "source", "quit", "exit" };
	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (!strcmp(cmd, skip[i]))
			return true;
	return false;
}

void sh_history_add(struct session *s, char *text, const char *cmd, int rc)
{
	if (!text)
		return;
	if (s->n_cmds >= SH_MAX_HISTORY) {
		if (s->n_cmds == SH_MAX_HISTORY) {
			sh_warn(s, "history: %d commands kept; later ones are not", SH_MAX_HISTORY);
			s->n_cmds++;
		}
		free(text);
		return;
	}
	if (s->n_cmds == s->cap_cmds) {
		int cap = s->cap_cmds ? 2 * s->cap_cmds : 64;
		struct sh_hist_cmd *c = realloc(s->cmds, (size_t)cap * sizeof(*c));
		if (!c) {
			free(text);
			return;
		}
		s->cmds = c;
		s->cap_cmds = cap;
	}
	s->cmds[s->n_cmds].text = text;
	s->cmds[s->n_cmds].ok = rc == 0;
	s->cmds[s->n_cmds].saved = rc == 0 && !not_saved(cmd);
	s->n_cmds++;
}

void sh_history_settings(struct session *s)
{
	if (s->hist_started)
		return;
	/* the settings the session's commands start from */
	s->hist_started = true;
	s->hist_on_error = s->on_error_continue;
	s->hist_tf32 = s->tf32;
	s->hist_threads = sh_threads_set(s);
}

void sh_history_free(struct session *s)
{
	int n = s->n_cmds < s->cap_cmds ? s->n_cmds : s->cap_cmds;
	for (int i = 0; i < n; i++)
		free(s->cmds[i].text);
	free(s->cmds);
	s->cmds = NULL;
	s->n_cmds = s->cap_cmds = 0;
	free(s->start_path);
	s->start_path = NULL;
}

void sh_history_start(struct session *s, const char *model_path)
{
	free(s->start_path);
	s->start_path = NULL;
	if (!model_path)
		return;
	char *abs = realpath(model_path, NULL);
	s->start_path = abs ? abs : strdup(model_path);
}

/* ---- the command ---- */

static int save_history(struct session *s, const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return sh_error(s, "history save: cannot write '%s': it is a folder", sh_esc(path));
	char tmp[PATH_MAX + 16];
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return sh_error(s, "history save: the path '%s' is too long", sh_esc(path));
	int fd = mkstemp(tmp);
	if (fd < 0)
		return sh_error(s, "history save: cannot write '%s': %s", sh_esc(path), sh_strerror(errno));
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return sh_error(s, "history save: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	char date[64];
	time_t t = time(NULL);
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", &tm))
		snprintf(date, sizeof(date), "(unknown date)");
	fprintf(f, "# A session of ogsh %s, written by `history save` on %s.\n", OGSH_VERSION, date);
	fprintf(f, "# Run it with: ogsh -f %s\n", path);
	int n_saved = 0;
	int n = s->n_cmds < s->cap_cmds ? s->n_cmds : s->cap_cmds;
	for (int i = 0; i < n; i++)
		n_saved += s->cmds[i].saved;
	if (s->start_path) {
		char hex[65];
		int e;
		if (sh_sha256_file(s->start_path, hex, &e) == 0)
			fprintf(f, "# model: %s\n# sha256: %s\n", s->start_path, hex);
		else
			fprintf(f, "# model: %s (cannot be read now: %s)\n", s->start_path, sh_strerror(e));
		char *argv[2] = { (char *)"load", s->start_path };
		char *line = sh_command_text(2, argv);
		fprintf(f, "%s\n", line ? line : "# out of memory");
		free(line);
	} else {
		fprintf(f, "# model: the built-in demo model (ogsh starts on it)\n");
	}
	fprintf(f, "# the settings the session started with\nset on-error %s\nset tf32 %s\n",
		(s->hist_started ? s->hist_on_error : s->on_error_continue) ? "continue" : "stop",
		(s->hist_started ? s->hist_tf32 : s->tf32) ? "on" : "off");
	int threads = s->hist_started ? s->hist_threads : sh_threads_set(s);
	if (threads)
		fprintf(f, "set threads %d\n", threads);
	fprintf(f, "# %d command%s that succeeded (help, history, source and failed commands are left out)\n", n_saved,
		n_saved == 1 ? "" : "s");
	for (int i = 0; i < n; i++)
		if (s->cmds[i].saved)
			fprintf(f, "%s\n", s->cmds[i].text);
	int e = 0;
	if (fflush(f) || ferror(f) || fsync(fileno(f)))
		e = errno ? errno : EIO;
	if (fclose(f) && !e)
		e = errno;
	if (!e && rename(tmp, path))
		e = errno;
	if (e) {
		unlink(tmp);
		return sh_error(s, "history save: cannot write '%s': %s", sh_esc(path), sh_strerror(e));
	}
	sh_printf(s, "wrote %s: %d command%s\n", sh_esc(path), n_saved, n_saved == 1 ? "" : "s");
	return 0;
}

int cmd_history(struct session *s, int argc, char **argv)
{
	struct sh_args a;
	if (sh_parse_args(s, sh_find_command("history"), argc, argv, &a))
		return -1;
	if (a.npos >= 1 && !strcmp(a.pos[0], "save")) {
		if (a.npos != 2)
			return sh_error(s, "usage: history save FILE.ogs");
		return save_history(s, a.pos[1]);
	}
	if (a.npos > 1)
		return sh_usage(s, "history");
	int n = s->n_cmds < s->cap_cmds ? s->n_cmds : s->cap_cmds;
	int first = 0;
	if (a.npos == 1) {
		char *e;
		errno = 0;
		long k = strtol(a.pos[0], &e, 10);
		if (*e || e == a.pos[0] || errno || k < 1)
			return sh_error(s, "history: N must be a whole number >= 1 (or save FILE.ogs), not '%s'",
					sh_esc(a.pos[0]));
		first = (long)n - k > 0 ? (int)(n - k) : 0;
	}
	/* the history command itself is the last entry once it returns: list the ones before it */
	for (int i = first; i < n; i++)
		sh_printf(s, "%5d  %-5s  %s\n", i + 1, s->cmds[i].ok ? "ok" : "error", sh_esc(s->cmds[i].text));
	return 0;
}
