/*
 * image.c - PNG and JPEG images to 8-bit pixels (libpng, libjpeg-turbo),
 * for datasets of images (exec/data.c).
 *
 * Images are hostile input: sizes are checked before anything is
 * allocated (16384 x 16384 at most), a file that ends early is "truncated"
 * as soon as the decoder runs out of bytes, and both libraries report
 * errors through longjmp into one place that frees what was made. JPEG
 * warnings about corrupt data (extraneous bytes, bad Huffman codes) are
 * tolerated as other decoders do, except the end of the data; progressive
 * files are limited in scans, so that a small file cannot make the decoder
 * walk a large image thousands of times.
 */
#include "exec/exec.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#define IMG_MAX_SIDE 16384
/* Chunks other than image data (text, ICC profiles) may not ask for more. */
#define PNG_MAX_CHUNK ((size_t)8 << 20)
/* libjpeg's own working memory (coefficient buffers of progressive files). */
#define JPEG_MAX_MEM ((long)2 << 30)
/* Progressive JPEGs: scans beyond this are refused (libjpeg-turbo's
 * TurboJPEG API stops at 500; real files have about ten). */
#define JPEG_MAX_SCANS 100

/* The pixels being made: shared by both decoders and freed on error. */
struct img_out {
	uint8_t *px;
	int h, w, c;
};

/* ------------------------------------------------------------------------ */
/* PNG                                                                       */
/* ------------------------------------------------------------------------ */

struct png_state {
	const unsigned char *buf;
	size_t n, at;
	bool truncated;
	char msg[200];
	png_structp png;
	png_infop info;
	png_bytep *rows;
	struct img_out *out;
};

static void png_read_mem(png_structp png, png_bytep dst, size_t n)
{
	struct png_state *s = png_get_io_ptr(png);
	if (n > s->n - s->at) {
		s->truncated = true;
		png_error(png, "truncated");
	}
	memcpy(dst, s->buf + s->at, n);
	s->at += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
	struct png_state *s = png_get_error_ptr(png);
	snprintf(s->msg, sizeof(s->msg), "%s", msg);
	png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;   /* ancillary problems (a bad gamma, an unknown chunk) do not change the pixels we read */
}

/* Everything that can longjmp, in one frame with its state behind a pointer. */
static int png_run(struct png_state *s)
{
	if (setjmp(png_jmpbuf(s->png)))
		return -1;
	png_set_read_fn(s->png, s, png_read_mem);
	png_set_user_limits(s->png, IMG_MAX_SIDE, IMG_MAX_SIDE);
	png_set_chunk_malloc_max(s->png, PNG_MAX_CHUNK);
	png_set_chunk_cache_max(s->png, 1000);
	png_read_info(s->png, s->info);
	png_uint_32 w = 0, h = 0;
	int depth = 0, ctype = 0, interlace = 0;
	png_get_IHDR(s->png, s->info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
	if (w == 0 || h == 0 || w > IMG_MAX_SIDE || h > IMG_MAX_SIDE)
		png_error(s->png, "size out of range");
	if (ctype == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(s->png);
	if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8)
		png_set_expand_gray_1_2_4_to_8(s->png);
	if (depth == 16)
		png_set_strip_16(s->png);
	if (ctype & PNG_COLOR_MASK_ALPHA)
		png_set_strip_alpha(s->png);
	if (interlace != PNG_INTERLACE_NONE)
		png_set_interlace_handling(s->png);
	png_read_update_info(s->png, s->info);
	int c = png_get_channels(s->png, s->info);
	if ((c != 1 && c != 3) || png_get_rowbytes(s->png, s->info) != (size_t)w * (size_t)c)
		png_error(s->png, "unexpected pixel layout");
	s->out->px = malloc((size_t)w * h * (size_t)c);
	s->rows = malloc(sizeof(png_bytep) * h);
	if (!s->out->px || !s->rows)
		png_error(s->png, "out of memory");
	for (png_uint_32 y = 0; y < h; y++)
		s->rows[y] = s->out->px + (size_t)y * w * (size_t)c;
	png_read_image(s->png, s->rows);
	s->out->h = (int)h;
	s->out->w = (int)w;
	s->out->c = c;
	return 0;
}

static int decode_png(const unsigned char *buf, size_t n, const char *name, struct img_out *out, struct ir_diag *d)
{
	struct png_state s;
	memset(&s, 0, sizeof(s));
	s.buf = buf;
	s.n = n;
	s.out = out;
	s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_on_error, png_on_warning);
	if (s.png)
		s.info = png_create_info_struct(s.png);
	if (!s.png || !s.info) {
		png_destroy_read_struct(s.png ? &s.png : NULL, NULL, NULL);
		return ir_diag_err(d, IR_ENOMEM, "%s: out of memory", name);
	}
	int rc = png_run(&s);
	png_destroy_read_struct(&s.png, &s.info, NULL);
	free(s.rows);
	if (rc) {
		free(out->px);
		out->px = NULL;
		if (s.truncated)
			return ir_diag_err(d, IR_ERR, "%s: truncated", name);
		if (!strcmp(s.msg, "out of memory"))
			return ir_diag_err(d, IR_ENOMEM, "%s: out of memory", name);
		return ir_diag_err(d, IR_ERR, "%s: invalid PNG (%s)", name, s.msg);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* JPEG                                                                      */
/* ------------------------------------------------------------------------ */

struct jpeg_state {
	struct jpeg_error_mgr pub;   /* first: libjpeg's pointer to it is ours */
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
	bool truncated;
	int scans;
	struct jpeg_decompress_struct cinfo;
	JSAMPROW row;                /* one row of CMYK, when converting */
	struct img_out *out;
};

static void jpeg_on_error(j_common_ptr ci)
{
	struct jpeg_state *s = (struct jpeg_state *)ci->err;
	ci->err->format_message(ci, s->msg);
	longjmp(s->jb, 1);
}

/* Warnings are corrupt data the decoder works around (as other decoders
 * do), except the end of the data: then the rest would be made up. */
static void jpeg_on_message(j_common_ptr ci, int level)
{
	struct jpeg_state *s = (struct jpeg_state *)ci->err;
	int code = ci->err->msg_code;
	if (level < 0 && code == JWRN_JPEG_EOF) {
		s->truncated = true;
		longjmp(s->jb, 1);
	}
	if (code == JTRC_SOS && ++s->scans > JPEG_MAX_SCANS) {
		snprintf(s->msg, sizeof(s->msg), "more than %d scans", JPEG_MAX_SCANS);
		longjmp(s->jb, 1);
	}
}

static int jpeg_run(struct jpeg_state *s, const unsigned char *buf, size_t n)
{
	struct jpeg_decompress_struct *ci = &s->cinfo;
	if (setjmp(s->jb))
		return -1;
	jpeg_create_decompress(ci);
	ci->mem->max_memory_to_use = JPEG_MAX_MEM;
	jpeg_mem_src(ci, buf, (unsigned long)n);
	jpeg_read_header(ci, TRUE);
	if (ci->image_width == 0 || ci->image_height == 0 || ci->image_width > IMG_MAX_SIDE ||
	    ci->image_height > IMG_MAX_SIDE) {
		snprintf(s->msg, sizeof(s->msg), "size %ux%u out of range", ci->image_width, ci->image_height);
		return -1;
	}
	bool cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
	if (ci->jpeg_color_space == JCS_GRAYSCALE)
		ci->out_color_space = JCS_GRAYSCALE;
	else
		ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
	jpeg_start_decompress(ci);
	int w = (int)ci->output_width, h = (int)ci->output_height, c = cmyk ? 3 : ci->output_components;
	if (w != (int)ci->image_width || h != (int)ci->image_height || (c != 1 && c != 3) ||
	    ci->output_components != (cmyk ? 4 : c)) {
		snprintf(s->msg, sizeof(s->msg), "unexpected output layout");
		return -1;
	}
	s->out->px = malloc((size_t)w * (size_t)h * (size_t)c);
	if (cmyk)
		s->row = malloc((size_t)w * 4);
	if (!s->out->px || (cmyk && !s->row)) {
		snprintf(s->msg, sizeof(s->msg), "out of memory");
		return -1;
	}
	/* Adobe's CMYK JPEGs store inverted values (what Photoshop writes) */
	bool inverted = ci->saw_Adobe_marker;
	while (ci->output_scanline < ci->output_height) {
		JSAMPROW dst = s->out->px + (size_t)ci->output_scanline * (size_t)w * (size_t)c;
		if (!cmyk) {
			jpeg_read_scanlines(ci, &dst, 1);
			continue;
		}
		jpeg_read_scanlines(ci, &s->row, 1);
		for (int x = 0; x < w; x++) {
			const JSAMPLE *q = s->row + 4 * x;
			unsigned k = inverted ? q[3] : 255u - q[3];
			for (int j = 0; j < 3; j++) {
				unsigned v = inverted ? q[j] : 255u - q[j];
				dst[3 * x + j] = (uint8_t)((v * k + 127) / 255);
			}
		}
	}
	jpeg_finish_decompress(ci);
	s->out->h = h;
	s->out->w = w;
	s->out->c = c;
	return 0;
}

static int decode_jpeg(const unsigned char *buf, size_t n, const char *name, struct img_out *out, struct ir_diag *d)
{
	struct jpeg_state *s = calloc(1, sizeof(*s));
	if (!s)
		return ir_diag_err(d, IR_ENOMEM, "%s: out of memory", name);
	s->out = out;
	s->cinfo.err = jpeg_std_error(&s->pub);
	s->pub.error_exit = jpeg_on_error;
	s->pub.emit_message = jpeg_on_message;
	int rc = jpeg_run(s, buf, n);
	jpeg_destroy_decompress(&s->cinfo);
	free(s->row);
	if (rc) {
		free(out->px);
		out->px = NULL;
		if (s->truncated)
			rc = ir_diag_err(d, IR_ERR, "%s: truncated", name);
		else if (!strcmp(s->msg, "out of memory"))
			rc = ir_diag_err(d, IR_ENOMEM, "%s: out of memory", name);
		else
			rc = ir_diag_err(d, IR_ERR, "%s: invalid JPEG (%s)", name, s->msg);
	}
	free(s);
	return rc;
}

/* ------------------------------------------------------------------------ */

int exec_image_decode(const void *buf, size_t n, const char *name, int want_c, uint8_t **px, int *h, int *w,
		      int *c, struct ir_diag *d)
{
	static const unsigned char png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	const unsigned char *b = buf;
	struct img_out out = { NULL, 0, 0, 0 };
	int rc;
	*px = NULL;
	*h = *w = *c = 0;
	if (want_c != 0 && want_c != 1 && want_c != 3)
		return ir_diag_err(d, IR_ERR, "%s: cannot give %d channels (1 or 3)", name, want_c);
	if (n >= 8 && !memcmp(b, png_sig, 8))
		rc = decode_png(b, n, name, &out, d);
	else if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		rc = decode_jpeg(b, n, name, &out, d);
	else if (n == 0)
		return ir_diag_err(d, IR_ERR, "%s: not a PNG or JPEG image (empty file)", name);
	else
		return ir_diag_err(d, IR_ERR, "%s: not a PNG or JPEG image", name);
	if (rc)
		return rc;
	size_t np = (size_t)out.h * (size_t)out.w;
	if (want_c == 3 && out.c == 1) {
		uint8_t *rgb = malloc(np * 3);
		if (!rgb) {
			free(out.px);
			return ir_diag_err(d, IR_ENOMEM, "%s: out of memory", name);
		}
		for (size_t i = 0; i < np; i++)
			rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = out.px[i];
		free(out.px);
		out.px = rgb;
		out.c = 3;
	} else if (want_c == 1 && out.c == 3) {
		/* ITU-R 601 luma, as libjpeg and PIL's "L" mode compute it */
		for (size_t i = 0; i < np; i++) {
			unsigned r = out.px[3 * i], g = out.px[3 * i + 1], bl = out.px[3 * i + 2];
			out.px[i] = (uint8_t)((r * 299 + g * 587 + bl * 114 + 500) / 1000);
		}
		out.c = 1;
	}
	*px = out.px;
	*h = out.h;
	*w = out.w;
	*c = out.c;
	return 0;
}
