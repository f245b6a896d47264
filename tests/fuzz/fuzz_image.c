/*
 * fuzz_image.c - libFuzzer target for the image decoder (exec/image.c):
 * PNG through libpng, JPEG through libjpeg-turbo, what --data=FOLDER of
 * images reads.
 *
 * Every input is decoded asking for the file's own channels, gray and RGB
 * (the first byte picks which, so the corpus covers all three). A decode
 * must either fail with one message and no pixels, or give pixels of a
 * size within the limits and the channels asked for, every byte of which
 * is read here (so that a short buffer is found by AddressSanitizer).
 */
#include "exec/exec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const struct ir_diag *d)
{
	fprintf(stderr, "fuzz_image: %s: %s\n", what, d && d->error ? d->error : "(no message)");
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int wants[3] = { 0, 1, 3 };
	int want = wants[size ? data[size - 1] % 3 : 0];
	struct ir_diag d;
	ir_diag_init(&d);
	uint8_t *px = (uint8_t *)1;
	int h = -1, w = -1, c = -1;
	int rc = exec_image_decode(data, size, "fuzz.img", want, &px, &h, &w, &c, &d);
	if (rc) {
		if (!d.error || !*d.error)
			die("a failed decode without a message", &d);
		if (px)
			die("a failed decode left pixels", &d);
		ir_diag_clear(&d);
		return 0;
	}
	if (d.error)
		die("a decode succeeded but left an error", &d);
	if (!px || h < 1 || w < 1 || h > 16384 || w > 16384 || (c != 1 && c != 3) || (want && c != want))
		die("a decode gave an impossible image", &d);
	unsigned sum = 0;
	size_t n = (size_t)h * (size_t)w * (size_t)c;
	for (size_t i = 0; i < n; i++)
		sum += px[i];
	if (sum == 1)   /* keeps the reads from being optimized away */
		fprintf(stderr, "%u\n", sum);
	free(px);
	ir_diag_clear(&d);
	return 0;
}
