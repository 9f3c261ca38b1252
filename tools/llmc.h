/* SPDX-License-Identifier: MIT */
/*
 * llm.c token shards (karpathy/llm.c dev/data): a header of 256 little-endian
 * int32, then the tokens.  header[0] = magic, header[1] = version, header[2] =
 * number of tokens.  Magic 20240520 version 1 holds uint16 tokens (GPT-2);
 * magic 20240801 version 7 holds uint32 tokens (Llama 3).
 */
#ifndef RF_CLI_LLMC_H
#define RF_CLI_LLMC_H

#include <stddef.h>
#include <stdint.h>

#include <ringfeed/ringfeed.h>

#define RF_LLMC_HEADER_BYTES 1024

typedef struct rf_llmc {
	uint32_t magic;
	uint32_t version;
	enum rf_dtype dtype;      /* RF_DTYPE_U16 or RF_DTYPE_U32 */
	uint32_t token_bytes;     /* 2 or 4 */
	uint64_t ntokens;
} rf_llmc;

/* Validate a shard's header (`len` bytes at hdr, at least 1024 wanted)
 * against the shard's size: a known magic with its version, a non-negative
 * token count, and exactly 1024 + ntokens * token_bytes bytes in the file.
 * Returns 0, or RF_EFORMAT (not an llm.c shard / unknown version) or
 * RF_ETRUNCATED / RF_ECORRUPT (sizes disagree), with a message in err. */
int rf_llmc_parse(rf_llmc *out, const void *hdr, size_t len, uint64_t file_size, char *err,
		  size_t errcap);

/* Samples of seq_len + 1 tokens taken every seq_len tokens from a stream of
 * ntokens: sample i holds tokens [i*T, i*T + T + 1), so its inputs are
 * [0, T) and its targets [1, T + 1).  Returns the number of whole samples;
 * *tail (may be NULL) gets the tokens past the last sample's end. */
uint64_t rf_llmc_windows(uint64_t ntokens, uint64_t seq_len, uint64_t *tail);

#endif
