/* SPDX-License-Identifier: MIT */
/*
 * Description: unit tests of the ringfeed tool's helpers: size parsing
 * (suffixes, overflow, garbage), raw record field specs, the .npy header
 * parser (every supported dtype, versions 1.0/2.0/3.0, and bad headers:
 * Fortran order, object, structured, big-endian, bad magic, truncation,
 * malformed dicts), the .npy header writer (numpy.save's exact bytes), and
 * the llm.c shard header and sample windows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc.h"
#include "rf_test.h"
#include "npy.h"
#include "util.h"


static void
test_sizes(void)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t v;
	} cases[] = {
		{"0", 0, 0},
		{"4096", 0, 4096},
		{"1K", 0, 1024},
		{"1k", 0, 1024},
		{"4KiB", 0, 4096},
		{"4KB", 0, 4096},
		{"4kb", 0, 4096},
		{"64M", 0, 64ull << 20},
		{"64MiB", 0, 64ull << 20},
		{"2G", 0, 2ull << 30},
		{"3GB", 0, 3ull << 30},
		{"1T", 0, 1ull << 40},
		{"100B", 0, 100},
		{"18446744073709551615", 0, UINT64_MAX},
		{"18446744073709551616", -ERANGE, 0},
		{"16E", -ERANGE, 0},
		{"15E", 0, 15ull << 60},
		{"17179869184G", -ERANGE, 0},
		{"17179869183G", 0, 17179869183ull << 30},
		{"", -EINVAL, 0},
		{"K", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{" 1", -EINVAL, 0},
		{"1 K", -EINVAL, 0},
		{"1.5M", -EINVAL, 0},
		{"1X", -EINVAL, 0},
		{"1Ki", -EINVAL, 0},
		{"1KiBx", -EINVAL, 0},
		{"1MM", -EINVAL, 0},
		{"0x10", -EINVAL, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t v = 12345;
		int rc = rf_cli_parse_size(cases[i].s, &v);
		if (rc != cases[i].rc || (rc == 0 && v != cases[i].v)) {
			fprintf(stderr, "parse_size('%s') = %d, %llu; want %d, %llu\n", cases[i].s, rc,
				(unsigned long long)v, cases[i].rc, (unsigned long long)cases[i].v);
			rf_test_failures++;
		}
	}
	uint64_t v;
	CHECK_CONT(rf_cli_parse_uint("22", 0, 22, &v) == 0 && v == 22);
	CHECK_CONT(rf_cli_parse_uint("23", 0, 22, &v) == -ERANGE);
	CHECK_CONT(rf_cli_parse_uint("2x", 0, 22, &v) == -EINVAL);
	CHECK_CONT(rf_cli_parse_uint("", 0, 22, &v) == -EINVAL);
}

static void
test_field_specs(void)
{
	rf_cli_field_spec s;
	char err[256];

	CHECK_CONT(rf_cli_parse_field_spec("y:u8", &s, err, sizeof err) == 0);
	CHECK_CONT(strcmp(s.name, "y") == 0 && s.dtype == RF_DTYPE_U8 && s.rank == 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[3,4]", &s, err, sizeof err) == 0);
	CHECK_CONT(s.dtype == RF_DTYPE_F32 && s.rank == 2 && s.shape[0] == 3 && s.shape[1] == 4);
	CHECK_CONT(rf_cli_parse_field_spec("b:bytes[16]", &s, err, sizeof err) == 0);
	CHECK_CONT(s.dtype == RF_DTYPE_BYTES && s.rank == 1 && s.shape[0] == 16);
	CHECK_CONT(rf_cli_parse_field_spec("h:bf16[1,1,1,1,1,1,1,1]", &s, err, sizeof err) == 0);
	CHECK_CONT(s.rank == 8);
	CHECK_CONT(rf_cli_parse_field_spec("h:bf16[1,1,1,1,1,1,1,1,1]", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec(":u8", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f31", &s, err, sizeof err) < 0);
	CHECK_CONT(strstr(err, "f31") != NULL);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[]", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[0]", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[3,]", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[3", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[3]x", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[-3]", &s, err, sizeof err) < 0);
	CHECK_CONT(rf_cli_parse_field_spec("x:f32[99999999999999999999]", &s, err, sizeof err) < 0);
}

/* A .npy header around `dict` (padded like numpy's), version major.0. */
static size_t
make_npy(unsigned char *buf, int major, const char *dict)
{
	size_t pre = major == 1 ? 10 : 12;
	size_t len = strlen(dict);
	size_t hlen = len + 1;
	size_t pad = 64 - ((pre + hlen) % 64);

	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (unsigned char)major;
	buf[7] = 0;
	if (major == 1) {
		buf[8] = (unsigned char)((hlen + pad) & 0xff);
		buf[9] = (unsigned char)((hlen + pad) >> 8);
	} else {
		uint32_t h = (uint32_t)(hlen + pad);
		for (int i = 0; i < 4; i++)
			buf[8 + i] = (unsigned char)(h >> (8 * i));
	}
	memcpy(buf + pre, dict, len);
	memset(buf + pre + len, ' ', pad);
	buf[pre + hlen + pad - 1] = '\n';
	return pre + hlen + pad;
}

static int
parse_dict(rf_npy *n, int major, const char *dict, char *err, size_t cap)
{
	unsigned char buf[1024];
	size_t len = make_npy(buf, major, dict);
	return rf_npy_parse(n, buf, len, err, cap);
}

static void
test_npy_good(void)
{
	static const struct {
		const char *descr;
		enum rf_dtype dtype;
		uint64_t itemsize;
	} dtypes[] = {
		{"|u1", RF_DTYPE_U8, 1},  {"|i1", RF_DTYPE_I8, 1},   {"<u2", RF_DTYPE_U16, 2},
		{"<i2", RF_DTYPE_I16, 2}, {"<u4", RF_DTYPE_U32, 4},  {"<i4", RF_DTYPE_I32, 4},
		{"<u8", RF_DTYPE_U64, 8}, {"<i8", RF_DTYPE_I64, 8},  {"<f2", RF_DTYPE_F16, 2},
		{"<f4", RF_DTYPE_F32, 4}, {"<f8", RF_DTYPE_F64, 8},  {"|b1", RF_DTYPE_U8, 1},
		{"|S7", RF_DTYPE_BYTES, 7}, {"|V12", RF_DTYPE_BYTES, 12}, {"=f4", RF_DTYPE_F32, 4},
		{">u1", RF_DTYPE_U8, 1},
	};
	char dict[256], err[256];
	rf_npy n;

	for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
		for (int major = 1; major <= 3; major++) {
			snprintf(dict, sizeof dict,
				 "{'descr': '%s', 'fortran_order': False, 'shape': (10, 3), }",
				 dtypes[i].descr);
			int rc = parse_dict(&n, major, dict, err, sizeof err);
			if (rc != 0 || n.dtype != dtypes[i].dtype || n.itemsize != dtypes[i].itemsize ||
			    n.ndim != 2 || n.shape[0] != 10 || n.shape[1] != 3 ||
			    n.data_bytes != 30 * dtypes[i].itemsize || n.major != major ||
			    n.data_offset % 64 != 0) {
				fprintf(stderr, "npy '%s' v%d: rc %d (%s)\n", dtypes[i].descr, major, rc,
					err);
				rf_test_failures++;
			}
		}
	}
	/* Other spellings numpy (or older numpy) writes. */
	CHECK_CONT(parse_dict(&n, 1, "{'descr':'<f4','fortran_order':False,'shape':(5,)}", err,
			 sizeof err) == 0);
	CHECK_CONT(n.ndim == 1 && n.shape[0] == 5);
	CHECK_CONT(parse_dict(&n, 1, "{\"shape\": (2, 3, 4), \"fortran_order\": False, \"descr\": \"<i8\"}",
			 err, sizeof err) == 0);
	CHECK_CONT(n.ndim == 3 && n.data_bytes == 2 * 3 * 4 * 8);
	CHECK_CONT(parse_dict(&n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", err,
			 sizeof err) == 0);
	CHECK_CONT(n.ndim == 0 && n.data_bytes == 4);
	CHECK_CONT(parse_dict(&n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", err,
			 sizeof err) == 0);
	CHECK_CONT(n.data_bytes == 0);
	CHECK_CONT(parse_dict(&n, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 4L), }",
			 err, sizeof err) == 0);
}

static void
expect_bad(const char *dict, const char *needle)
{
	rf_npy n;
	char err[256] = "";
	int rc = parse_dict(&n, 1, dict, err, sizeof err);

	if (rc != RF_ENPY || !strstr(err, needle)) {
		fprintf(stderr, "npy %s: rc %d, message '%s' (want '%s')\n", dict, rc, err, needle);
		rf_test_failures++;
	}
}

static void
test_npy_bad(void)
{
	unsigned char buf[1024];
	char err[256];
	rf_npy n;
	size_t len;

	expect_bad("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", "Fortran");
	expect_bad("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", "object");
	expect_bad("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }",
		   "structured");
	expect_bad("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", "big-endian");
	expect_bad("{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", "big-endian");
	expect_bad("{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }", "unicode");
	expect_bad("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", "complex");
	expect_bad("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (3,), }", "datetime");
	expect_bad("{'descr': '<f16', 'fortran_order': False, 'shape': (3,), }", "unsupported");
	expect_bad("{'descr': '<f3', 'fortran_order': False, 'shape': (3,), }", "unsupported");
	expect_bad("{'descr': '|S0', 'fortran_order': False, 'shape': (3,), }", "zero");
	expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", "shape");
	expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", "shape");
	expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3 4), }", "shape");
	expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4], }", "tuple");
	expect_bad("{'descr': '<f4', 'fortran_order': False, }", "missing");
	expect_bad("{'descr': '<f4', 'shape': (3,), }", "missing");
	expect_bad("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }", "bool");
	expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", "'x'");
	expect_bad("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
		   "repeated");
	expect_bad("['descr', '<f4']", "dict");
	expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk", "trailing");
	expect_bad("{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", "expected");
	expect_bad("{'descr': '<f4', 'fortran_order': False, 'shape': "
		   "(4294967296, 4294967296, 4294967296), }",
		   "overflow");

	/* Bad magic, bad version, truncation. */
	len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
	CHECK_CONT(rf_npy_parse(&n, buf, len, err, sizeof err) == 0);
	CHECK_CONT(rf_npy_parse(&n, buf, len - 1, err, sizeof err) == RF_ETRUNCATED);
	CHECK_CONT(rf_npy_parse(&n, buf, 9, err, sizeof err) == RF_ETRUNCATED);
	CHECK_CONT(rf_npy_parse(&n, buf, 0, err, sizeof err) == RF_ETRUNCATED);
	buf[6] = 4;
	CHECK_CONT(rf_npy_parse(&n, buf, len, err, sizeof err) == RF_ENPY && strstr(err, "version"));
	buf[6] = 1;
	buf[7] = 1;
	CHECK_CONT(rf_npy_parse(&n, buf, len, err, sizeof err) == RF_ENPY && strstr(err, "version"));
	buf[7] = 0;
	buf[1] = 'X';
	CHECK_CONT(rf_npy_parse(&n, buf, len, err, sizeof err) == RF_ENPY && strstr(err, "magic"));
	CHECK_CONT(rf_npy_parse(&n, "PK\x03\x04", 4, err, sizeof err) == RF_ENPY);
	/* A header length far past the buffer, or implausibly large. */
	len = make_npy(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
	buf[11] = 0x7f;
	CHECK_CONT(rf_npy_parse(&n, buf, len, err, sizeof err) == RF_ENPY);
	buf[11] = 0;
	buf[10] = 0x01;
	CHECK_CONT(rf_npy_parse(&n, buf, len, err, sizeof err) < 0);
	/* A NUL inside the header. */
	len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
	buf[20] = 0;
	CHECK_CONT(rf_npy_parse(&n, buf, len, err, sizeof err) == RF_ENPY);
}

static void
test_npy_header_writer(void)
{
	/* Bytes numpy 1.24's np.save writes for np.zeros((3, 4), '<f4'). */
	static const char want[] = "\x93NUMPY\x01\x00v\x00"
				   "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
	char buf[4096];
	long n;
	rf_npy p;
	char err[256];
	uint64_t shape[3] = {3, 4, 5};

	n = rf_npy_header(buf, sizeof buf, "<f4", 2, shape);
	CHECK_CONT(n == 128);
	CHECK_CONT(memcmp(buf, want, sizeof want - 1) == 0);
	/* 21 - len("3") spare spaces, then padding, then a newline. */
	for (long i = (long)sizeof want - 1; i < n - 1; i++)
		CHECK_CONT(buf[i] == ' ');
	CHECK_CONT(buf[n - 1] == '\n');
	CHECK_CONT(rf_npy_parse(&p, buf, (size_t)n, err, sizeof err) == 0);
	CHECK_CONT(p.dtype == RF_DTYPE_F32 && p.ndim == 2 && p.data_offset == 128);

	n = rf_npy_header(buf, sizeof buf, "|u1", 1, shape);
	CHECK_CONT(n > 0 && n % 64 == 0);
	CHECK_CONT(memmem(buf, (size_t)n, "'shape': (3,), }", 16) != NULL);
	n = rf_npy_header(buf, sizeof buf, "|S5", 3, shape);
	CHECK_CONT(n > 0 && rf_npy_parse(&p, buf, (size_t)n, err, sizeof err) == 0);
	CHECK_CONT(p.dtype == RF_DTYPE_BYTES && p.itemsize == 5 && p.data_bytes == 3 * 4 * 5 * 5);
	n = rf_npy_header(buf, sizeof buf, "<f8", 0, shape);
	CHECK_CONT(n > 0 && memmem(buf, (size_t)n, "'shape': (), }", 14) != NULL);
	CHECK_CONT(rf_npy_header(buf, 32, "<f4", 2, shape) == -ENOSPC);
	CHECK_CONT(rf_npy_descr(RF_DTYPE_F16) && strcmp(rf_npy_descr(RF_DTYPE_F16), "<f2") == 0);
	CHECK_CONT(rf_npy_descr(RF_DTYPE_BYTES) == NULL);
}

static void
put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static void
test_llmc(void)
{
	unsigned char h[1024];
	rf_llmc l;
	char err[256];
	uint64_t tail;

	memset(h, 0, sizeof h);
	put32(h, 20240520);
	put32(h + 4, 1);
	put32(h + 8, 100);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024 + 200, err, sizeof err) == 0);
	CHECK_CONT(l.dtype == RF_DTYPE_U16 && l.token_bytes == 2 && l.ntokens == 100);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024 + 199, err, sizeof err) == RF_ETRUNCATED);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024 + 202, err, sizeof err) == RF_ECORRUPT);
	CHECK_CONT(rf_llmc_parse(&l, h, 100, 1024 + 200, err, sizeof err) == RF_ETRUNCATED);
	put32(h + 4, 7);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024 + 200, err, sizeof err) == RF_EFORMAT);
	put32(h, 20240801);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024 + 400, err, sizeof err) == 0);
	CHECK_CONT(l.dtype == RF_DTYPE_U32 && l.token_bytes == 4);
	put32(h + 4, 1);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024 + 400, err, sizeof err) == RF_EFORMAT);
	put32(h, 12345);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024 + 400, err, sizeof err) == RF_EFORMAT);
	CHECK_CONT(strstr(err, "magic") != NULL);
	put32(h, 20240801);
	put32(h + 4, 7);
	put32(h + 8, 0xffffffffu);
	CHECK_CONT(rf_llmc_parse(&l, h, sizeof h, 1024, err, sizeof err) == RF_ECORRUPT);

	/* Windows of T+1 every T. */
	CHECK_CONT(rf_llmc_windows(9, 4, &tail) == 2 && tail == 0);
	CHECK_CONT(rf_llmc_windows(10, 4, &tail) == 2 && tail == 1);
	CHECK_CONT(rf_llmc_windows(8, 4, &tail) == 1 && tail == 3);
	CHECK_CONT(rf_llmc_windows(5, 4, &tail) == 1 && tail == 0);
	CHECK_CONT(rf_llmc_windows(4, 4, &tail) == 0 && tail == 4);
	CHECK_CONT(rf_llmc_windows(0, 4, &tail) == 0 && tail == 0);
	CHECK_CONT(rf_llmc_windows(1001, 1, &tail) == 1000 && tail == 0);
}

int
main(void)
{
	test_sizes();
	test_field_specs();
	test_npy_good();
	test_npy_bad();
	test_npy_header_writer();
	test_llmc();
	return rf_test_status("cli-units");
}
