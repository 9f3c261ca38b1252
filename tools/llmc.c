/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>

#include "llmc.h"

#define LLMC_MAGIC_GPT2 20240520u
#define LLMC_MAGIC_LLAMA3 20240801u

static uint32_t
le32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int
llmc_err(int code, char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (err && cap) {
		va_start(ap, fmt);
		vsnprintf(err, cap, fmt, ap);
		va_end(ap);
	}
	return code;
}

int
rf_llmc_parse(rf_llmc *out, const void *hdr, size_t len, uint64_t file_size, char *err,
	      size_t errcap)
{
	const unsigned char *b = hdr;
	int32_t ntok;
	uint64_t want;

	if (len < RF_LLMC_HEADER_BYTES || file_size < RF_LLMC_HEADER_BYTES)
		return llmc_err(RF_ETRUNCATED, err, errcap,
				"shorter than the 1024-byte llm.c header");
	out->magic = le32(b);
	out->version = le32(b + 4);
	ntok = (int32_t)le32(b + 8);
	if (out->magic == LLMC_MAGIC_GPT2) {
		if (out->version != 1)
			return llmc_err(RF_EFORMAT, err, errcap,
					"llm.c magic %u with version %u (expected 1)", out->magic,
					out->version);
		out->dtype = RF_DTYPE_U16;
		out->token_bytes = 2;
	} else if (out->magic == LLMC_MAGIC_LLAMA3) {
		if (out->version != 7)
			return llmc_err(RF_EFORMAT, err, errcap,
					"llm.c magic %u with version %u (expected 7)", out->magic,
					out->version);
		out->dtype = RF_DTYPE_U32;
		out->token_bytes = 4;
	} else {
		return llmc_err(RF_EFORMAT, err, errcap,
				"not an llm.c token shard (magic %u; expected %u or %u)",
				out->magic, LLMC_MAGIC_GPT2, LLMC_MAGIC_LLAMA3);
	}
	if (ntok < 0)
		return llmc_err(RF_ECORRUPT, err, errcap, "negative token count %d in header",
				(int)ntok);
	out->ntokens = (uint64_t)ntok;
	want = RF_LLMC_HEADER_BYTES + out->ntokens * out->token_bytes;
	if (file_size < want)
		return llmc_err(RF_ETRUNCATED, err, errcap,
				"truncated: header declares %llu tokens (%llu bytes), file has "
				"%llu bytes",
				(unsigned long long)out->ntokens, (unsigned long long)want,
				(unsigned long long)file_size);
	if (file_size > want)
		return llmc_err(RF_ECORRUPT, err, errcap,
				"header declares %llu tokens (%llu bytes) but the file has %llu "
				"bytes",
				(unsigned long long)out->ntokens, (unsigned long long)want,
				(unsigned long long)file_size);
	return 0;
}

uint64_t
rf_llmc_windows(uint64_t ntokens, uint64_t seq_len, uint64_t *tail)
{
	uint64_t n = 0;

	/* The last sample i must end at i*T + T + 1 <= ntokens, so there are
	 * floor((ntokens - 1) / T) of them. */
	if (seq_len > 0 && ntokens > seq_len)
		n = (ntokens - 1) / seq_len;
	if (tail)
		*tail = n ? ntokens - (n * seq_len + 1) : ntokens;
	return n;
}
