/*
 * make_image_seeds.c - the seed corpus of the image fuzz target.
 *
 *     make_image_seeds OUT_DIR
 *
 * Writes small valid PNGs (gray, RGB, palette, gray+alpha at 16 bits,
 * 1-bit) and JPEGs (baseline colour and gray, progressive), each also cut
 * short, plus a file that is not an image: made here with zlib and
 * libjpeg, so the corpus needs no files in the repository.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "../unit/img_write.h"

static const char *out_dir;

static void put(const char *name, const unsigned char *b, size_t n)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", out_dir, name);
	write_bytes(p, b, n);
}

/* The file and a copy cut at about two thirds. */
static void put_both(const char *name, unsigned char *b, size_t n)
{
	char cut[256];
	put(name, b, n);
	snprintf(cut, sizeof(cut), "cut_%s", name);
	put(cut, b, n * 2 / 3);
	free(b);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make_image_seeds OUT_DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0755) && errno != EEXIST) {
		perror(out_dir);
		return 1;
	}
	uint8_t px[12 * 10 * 4];
	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(i * 37 + (i / 7) * 11);
	unsigned char *b;
	size_t n;
	n = png_make(12, 10, 2, 8, px, NULL, 0, &b);
	put_both("rgb.png", b, n);
	n = png_make(12, 10, 0, 8, px, NULL, 0, &b);
	put_both("gray.png", b, n);
	n = png_make(12, 10, 4, 16, px, NULL, 0, &b);
	put_both("ga16.png", b, n);
	n = png_make(12, 10, 6, 8, px, NULL, 0, &b);
	put_both("rgba.png", b, n);
	uint8_t idx[12 * 10], pal[4 * 3] = { 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255 };
	for (size_t i = 0; i < sizeof(idx); i++)
		idx[i] = (uint8_t)(i % 4);
	n = png_make(12, 10, 3, 8, idx, pal, 4, &b);
	put_both("pal.png", b, n);
	for (size_t i = 0; i < sizeof(idx); i++)
		idx[i] = (uint8_t)(i % 3 == 0);
	n = png_make(12, 10, 0, 1, idx, NULL, 0, &b);
	put_both("bits.png", b, n);
	n = jpeg_make(12, 10, 3, px, 90, false, &b);
	put_both("rgb.jpg", b, n);
	n = jpeg_make(12, 10, 1, px, 75, false, &b);
	put_both("gray.jpg", b, n);
	n = jpeg_make(12, 10, 3, px, 80, true, &b);
	put_both("prog.jpg", b, n);
	put("text.jpg", (const unsigned char *)"this is not an image\n", 21);
	return 0;
}
