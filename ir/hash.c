/*
 * hash.c - the fast 64-bit byte hash that content keys are made of (the
 * model hash of calibration caches, the data hash of datasets).
 */
#include "ir.h"

#include <string.h>

#define FNV_PRIME 0x100000001b3ULL

/*
 * FNV-1a, but eight bytes a step: each 64-bit word (in the machine's byte
 * order) is xored in and multiplied by the FNV prime, then the high half is folded down
 * (a multiplication only carries bits upwards; the fold lets a word's high
 * bits reach the low bits of later steps). The tail is taken byte by byte
 * as in FNV-1a. Words are read with memcpy, so the result depends on the
 * bytes alone, not on the pointer's alignment.
 */
uint64_t ir_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		h = (h ^ w) * FNV_PRIME;
		h ^= h >> 32;
		b += 8;
		n -= 8;
	}
	while (n--)
		h = (h ^ *b++) * FNV_PRIME;
	return h;
}
