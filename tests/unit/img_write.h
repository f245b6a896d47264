/*
 * img_write.h - tiny PNG and JPEG writers for tests (test_data.c) and the
 * image fuzz target's seeds (tests/fuzz/make_image_seeds.c): PNG by hand
 * (zlib's compress2 gives the zlib stream IDAT holds), JPEG through
 * libjpeg's compressor. Static functions: include it in one file per
 * program.
 */
#ifndef OGSH_TEST_IMG_WRITE_H
#define OGSH_TEST_IMG_WRITE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <zlib.h>

/* A growing byte buffer. */
struct tbuf {
	unsigned char *p;
	size_t n, cap;
};

static void tbuf_put(struct tbuf *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		unsigned char *p = realloc(b->p, cap);
		if (!p)
			abort();
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

static void tbuf_be32(struct tbuf *b, uint32_t v)
{
	unsigned char x[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
			       (unsigned char)v };
	tbuf_put(b, x, 4);
}

static void png_chunk(struct tbuf *b, const char *type, const unsigned char *data, size_t n)
{
	tbuf_be32(b, (uint32_t)n);
	size_t at = b->n;
	tbuf_put(b, type, 4);
	if (n)
		tbuf_put(b, data, n);
	uLong crc = crc32(0, b->p + at, (uInt)(n + 4));
	tbuf_be32(b, (uint32_t)crc);
}

/*
 * A PNG of w x h pixels: `ctype` 0 gray, 2 RGB, 3 palette, 4 gray+alpha,
 * 6 RGBA; `depth` 1, 8 or 16 (16: each sample is written as v * 257);
 * samples w*h*channels bytes (palette: indices; depth 1: 0 or 1 per pixel);
 * `palette` n_pal RGB triples for ctype 3. The bytes are malloc'd in *out.
 */
static size_t png_make(int w, int h, int ctype, int depth, const uint8_t *samples, const uint8_t *palette, int n_pal,
		       unsigned char **out)
{
	int ch = ctype == 0 || ctype == 3 ? 1 : ctype == 2 ? 3 : ctype == 4 ? 2 : 4;
	size_t rowbytes = depth == 1 ? ((size_t)w + 7) / 8 : (size_t)w * (size_t)ch * (size_t)(depth / 8);
	size_t rawn = (rowbytes + 1) * (size_t)h;
	unsigned char *raw = calloc(rawn ? rawn : 1, 1);
	if (!raw)
		abort();
	for (int y = 0; y < h; y++) {
		unsigned char *r = raw + (size_t)y * (rowbytes + 1);
		r[0] = 0;   /* filter: none */
		for (int x = 0; x < w * ch; x++) {
			uint8_t v = samples[(size_t)y * (size_t)w * (size_t)ch + (size_t)x];
			if (depth == 1)
				r[1 + x / 8] |= (unsigned char)((v & 1) << (7 - x % 8));
			else if (depth == 8)
				r[1 + x] = v;
			else
				r[1 + 2 * x] = r[2 + 2 * x] = v;   /* v * 257, big-endian */
		}
	}
	uLongf zn = compressBound((uLong)rawn);
	unsigned char *z = malloc(zn);
	if (!z || compress2(z, &zn, raw, (uLong)rawn, 9) != Z_OK)
		abort();
	struct tbuf b = { 0 };
	tbuf_put(&b, "\x89PNG\r\n\x1a\n", 8);
	unsigned char ihdr[13];
	struct tbuf hb = { 0 };
	tbuf_be32(&hb, (uint32_t)w);
	tbuf_be32(&hb, (uint32_t)h);
	memcpy(ihdr, hb.p, 8);
	free(hb.p);
	ihdr[8] = (unsigned char)depth;
	ihdr[9] = (unsigned char)ctype;
	ihdr[10] = ihdr[11] = ihdr[12] = 0;
	png_chunk(&b, "IHDR", ihdr, 13);
	if (ctype == 3)
		png_chunk(&b, "PLTE", palette, (size_t)n_pal * 3);
	png_chunk(&b, "IDAT", z, zn);
	png_chunk(&b, "IEND", NULL, 0);
	free(z);
	free(raw);
	*out = b.p;
	return b.n;
}

/* A baseline JPEG of w x h pixels with c components (1 gray, 3 RGB) at `quality`; malloc'd in *out. */
static size_t jpeg_make(int w, int h, int c, const uint8_t *px, int quality, bool progressive, unsigned char **out)
{
	struct jpeg_compress_struct ci;
	struct jpeg_error_mgr err;
	ci.err = jpeg_std_error(&err);
	jpeg_create_compress(&ci);
	unsigned char *mem = NULL;
	unsigned long size = 0;
	jpeg_mem_dest(&ci, &mem, &size);
	ci.image_width = (JDIMENSION)w;
	ci.image_height = (JDIMENSION)h;
	ci.input_components = c;
	ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
	jpeg_set_defaults(&ci);
	jpeg_set_quality(&ci, quality, TRUE);
	if (progressive)
		jpeg_simple_progression(&ci);
	jpeg_start_compress(&ci, TRUE);
	while (ci.next_scanline < ci.image_height) {
		JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)w * (size_t)c);
		jpeg_write_scanlines(&ci, &row, 1);
	}
	jpeg_finish_compress(&ci);
	jpeg_destroy_compress(&ci);
	*out = mem;
	return (size_t)size;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f))
		abort();
}

#endif
