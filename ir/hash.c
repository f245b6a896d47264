/*
 * hash.c - the one byte hash of ogsh (content keys: the data's hash, cache
 * keys). FNV-1a, 64 bits: not cryptographic, only meant to tell apart files
 * and models that differ, and to give the same digits on every machine.
 */
#include "ir/ir.h"

uint64_t ir_hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}
