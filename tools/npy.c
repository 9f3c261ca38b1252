/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "npy.h"

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* numpy.lib.format.ARRAY_ALIGN and GROWTH_AXIS_MAX_DIGITS: the header is
 * padded so the data starts 64-byte aligned, after spare spaces that let
 * numpy grow the first axis in place. */
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21

typedef struct cursor {
	const char *p;
	const char *end;
	char *err;
	size_t errcap;
} cursor;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
npy_err(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (err && cap) {
		va_start(ap, fmt);
		vsnprintf(err, cap, fmt, ap);
		va_end(ap);
	}
	return RF_ENPY;
}

static void
skip_ws(cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static bool
eat(cursor *c, char ch)
{
	skip_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

/* A Python string literal without escapes (numpy never writes any in the
 * keys or descr it supports).  Copies it into out (capacity cap). */
static bool
parse_str(cursor *c, char *out, size_t cap)
{
	char q;
	size_t n = 0;

	skip_ws(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return false;
	q = *c->p++;
	while (c->p < c->end && *c->p != q) {
		if (*c->p == '\\' || n + 1 >= cap)
			return false;
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return false;
	c->p++;
	out[n] = 0;
	return true;
}

static bool
parse_u64(cursor *c, uint64_t *out)
{
	uint64_t v = 0;
	const char *start;

	skip_ws(c);
	start = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*c->p - '0'), &v))
			return false;
		c->p++;
	}
	if (c->p == start)
		return false;
	/* Python 2 era files wrote longs as 3L. */
	if (c->p < c->end && *c->p == 'L')
		c->p++;
	*out = v;
	return true;
}

static int
parse_descr(rf_npy *n, char *err, size_t errcap)
{
	const char *d = n->descr;
	char order = '|';
	char kind;
	uint64_t size = 0;
	const char *q;

	if (*d == '<' || *d == '>' || *d == '|' || *d == '=')
		order = *d++;
	kind = *d++;
	if (kind == 0)
		return npy_err(err, errcap, "empty dtype descr");
	for (q = d; *q >= '0' && *q <= '9'; q++) {
		size = size * 10 + (uint64_t)(*q - '0');
		if (size > (1u << 30))
			return npy_err(err, errcap, "dtype '%s': item size too large", n->descr);
	}
	if (kind == 'O')
		return npy_err(err, errcap,
			       "object arrays (dtype 'O') are not supported: store numbers or "
			       "fixed-size bytes");
	if (kind == 'M' || kind == 'm')
		return npy_err(err, errcap, "dtype '%s': datetime/timedelta arrays are not "
			       "supported (view them as int64)", n->descr);
	if (*q != 0)
		return npy_err(err, errcap, "unsupported dtype '%s'", n->descr);
	if (q == d)
		return npy_err(err, errcap, "dtype '%s' has no item size", n->descr);
	if (kind == 'U')
		return npy_err(err, errcap, "dtype '%s': unicode strings are not supported "
			       "(encode them to fixed-size bytes, dtype 'S')", n->descr);
	if (kind == 'c')
		return npy_err(err, errcap, "dtype '%s': complex numbers are not supported "
			       "(view them as float pairs)", n->descr);
	if (order == '>' && size > 1)
		return npy_err(err, errcap,
			       "dtype '%s' is big-endian: convert it with "
			       "a.astype(a.dtype.newbyteorder('<'))", n->descr);
	if (kind == 'S' || kind == 'a' || kind == 'V') {
		if (size == 0)
			return npy_err(err, errcap, "dtype '%s': zero-size items", n->descr);
		n->dtype = RF_DTYPE_BYTES;
		n->itemsize = size;
		return 0;
	}
	n->itemsize = size;
	switch (kind) {
	case 'b':
		/* numpy bools are one byte, 0 or 1. */
		if (size == 1) {
			n->dtype = RF_DTYPE_U8;
			return 0;
		}
		break;
	case 'u':
		switch (size) {
		case 1: n->dtype = RF_DTYPE_U8; return 0;
		case 2: n->dtype = RF_DTYPE_U16; return 0;
		case 4: n->dtype = RF_DTYPE_U32; return 0;
		case 8: n->dtype = RF_DTYPE_U64; return 0;
		default: break;
		}
		break;
	case 'i':
		switch (size) {
		case 1: n->dtype = RF_DTYPE_I8; return 0;
		case 2: n->dtype = RF_DTYPE_I16; return 0;
		case 4: n->dtype = RF_DTYPE_I32; return 0;
		case 8: n->dtype = RF_DTYPE_I64; return 0;
		default: break;
		}
		break;
	case 'f':
		switch (size) {
		case 2: n->dtype = RF_DTYPE_F16; return 0;
		case 4: n->dtype = RF_DTYPE_F32; return 0;
		case 8: n->dtype = RF_DTYPE_F64; return 0;
		default: break;
		}
		break;
	default:
		break;
	}
	return npy_err(err, errcap, "unsupported dtype '%s'", n->descr);
}

static int
parse_shape(cursor *c, rf_npy *n)
{
	int ndim = 0;
	bool comma = false;

	if (!eat(c, '('))
		return npy_err(c->err, c->errcap, "header: 'shape' is not a tuple");
	while (!eat(c, ')')) {
		uint64_t v;
		if (ndim > 0 && !comma)
			return npy_err(c->err, c->errcap, "header: malformed 'shape' tuple");
		if (ndim == RF_NPY_MAX_DIMS)
			return npy_err(c->err, c->errcap, "header: more than %d dimensions",
				       RF_NPY_MAX_DIMS);
		if (!parse_u64(c, &v))
			return npy_err(c->err, c->errcap,
				       "header: 'shape' holds something other than a "
				       "non-negative integer");
		n->shape[ndim++] = v;
		comma = eat(c, ',');
	}
	/* "(5)" is an int in Python, not a tuple; numpy would refuse it. */
	if (ndim == 1 && !comma)
		return npy_err(c->err, c->errcap, "header: malformed 'shape' tuple");
	n->ndim = ndim;
	return 0;
}

int
rf_npy_parse(rf_npy *n, const void *buf, size_t len, char *err, size_t errcap)
{
	const unsigned char *b = buf;
	uint64_t hlen, hstart;
	cursor c;
	bool have_descr = false, have_order = false, have_shape = false;
	int rc;

	memset(n, 0, sizeof *n);
	if (err && errcap)
		err[0] = 0;
	if (len < 10) {
		size_t m = len < sizeof npy_magic ? len : sizeof npy_magic;
		if (m && memcmp(b, npy_magic, m) != 0)
			return npy_err(err, errcap, "not a .npy file (bad magic)");
		npy_err(err, errcap, "truncated .npy header (%zu bytes)", len);
		return RF_ETRUNCATED;
	}
	if (memcmp(b, npy_magic, sizeof npy_magic) != 0)
		return npy_err(err, errcap, "not a .npy file (bad magic)");
	n->major = b[6];
	n->minor = b[7];
	if (n->major == 1 && n->minor == 0) {
		hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8;
		hstart = 10;
	} else if ((n->major == 2 || n->major == 3) && n->minor == 0) {
		if (len < 12) {
			npy_err(err, errcap, "truncated .npy header (%zu bytes)", len);
			return RF_ETRUNCATED;
		}
		hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
		       (uint64_t)b[11] << 24;
		hstart = 12;
	} else {
		return npy_err(err, errcap, "unsupported .npy format version %d.%d", n->major,
			       n->minor);
	}
	if (hlen > RF_NPY_MAX_HEADER)
		return npy_err(err, errcap, "header length %llu is implausibly large",
			       (unsigned long long)hlen);
	if (hlen == 0)
		return npy_err(err, errcap, "empty header");
	if (hstart + hlen > len) {
		npy_err(err, errcap, "file ends inside the header (%llu bytes declared)",
			(unsigned long long)hlen);
		return RF_ETRUNCATED;
	}
	n->data_offset = hstart + hlen;
	if (memchr(b + hstart, 0, hlen))
		return npy_err(err, errcap, "header contains a NUL byte");

	c.p = (const char *)b + hstart;
	c.end = c.p + hlen;
	c.err = err;
	c.errcap = errcap;
	if (!eat(&c, '{'))
		return npy_err(err, errcap, "header is not a dict");
	while (!eat(&c, '}')) {
		char key[32];
		if (!parse_str(&c, key, sizeof key))
			return npy_err(err, errcap, "header: expected a quoted key");
		if (!eat(&c, ':'))
			return npy_err(err, errcap, "header: expected ':' after '%s'", key);
		if (strcmp(key, "descr") == 0 && !have_descr) {
			skip_ws(&c);
			if (c.p < c.end && *c.p == '[')
				return npy_err(err, errcap,
					       "structured dtypes are not supported: save each "
					       "field as its own .npy file");
			if (!parse_str(&c, n->descr, sizeof n->descr))
				return npy_err(err, errcap, "header: 'descr' is not a dtype string");
			have_descr = true;
		} else if (strcmp(key, "fortran_order") == 0 && !have_order) {
			skip_ws(&c);
			if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
				return npy_err(err, errcap,
					       "array is in Fortran order: save a C-order copy "
					       "(numpy.ascontiguousarray)");
			} else if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) {
				c.p += 5;
			} else {
				return npy_err(err, errcap, "header: 'fortran_order' is not a bool");
			}
			have_order = true;
		} else if (strcmp(key, "shape") == 0 && !have_shape) {
			if ((rc = parse_shape(&c, n)) < 0)
				return rc;
			have_shape = true;
		} else {
			return npy_err(err, errcap, "header: unexpected or repeated key '%s'", key);
		}
		if (!eat(&c, ',')) {
			if (!eat(&c, '}'))
				return npy_err(err, errcap, "header: expected ',' or '}'");
			break;
		}
	}
	skip_ws(&c);
	if (c.p != c.end)
		return npy_err(err, errcap, "header: trailing bytes after the dict");
	if (!have_descr || !have_order || !have_shape)
		return npy_err(err, errcap, "header: missing key '%s'",
			       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
	if ((rc = parse_descr(n, err, errcap)) < 0)
		return rc;
	n->data_bytes = n->itemsize;
	for (int i = 0; i < n->ndim; i++)
		if (__builtin_mul_overflow(n->data_bytes, n->shape[i], &n->data_bytes))
			return npy_err(err, errcap, "array size overflows 64 bits");
	return 0;
}

const char *
rf_npy_descr(enum rf_dtype dtype)
{
	switch (dtype) {
	case RF_DTYPE_U8: return "|u1";
	case RF_DTYPE_I8: return "|i1";
	case RF_DTYPE_U16: return "<u2";
	case RF_DTYPE_I16: return "<i2";
	case RF_DTYPE_U32: return "<u4";
	case RF_DTYPE_I32: return "<i4";
	case RF_DTYPE_U64: return "<u8";
	case RF_DTYPE_I64: return "<i8";
	case RF_DTYPE_F16: return "<f2";
	case RF_DTYPE_BF16: return "<u2";
	case RF_DTYPE_F32: return "<f4";
	case RF_DTYPE_F64: return "<f8";
	default: return NULL;
	}
}

long
rf_npy_header(char *buf, size_t cap, const char *descr, int ndim, const uint64_t *shape)
{
	char dict[1024];
	size_t len, hlen, pad, total;
	int n;

	if (ndim < 0 || ndim > RF_NPY_MAX_DIMS)
		return -EINVAL;
	/* numpy.lib.format._write_array_header: keys sorted, repr() values,
	 * each followed by ", ". */
	n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	if (n < 0 || (size_t)n >= sizeof dict)
		return -E2BIG;
	len = (size_t)n;
	for (int i = 0; i < ndim; i++) {
		n = snprintf(dict + len, sizeof dict - len, "%s%llu", i ? ", " : "",
			     (unsigned long long)shape[i]);
		if (n < 0 || (size_t)n >= sizeof dict - len)
			return -E2BIG;
		len += (size_t)n;
	}
	n = snprintf(dict + len, sizeof dict - len, "%s), }", ndim == 1 ? "," : "");
	if (n < 0 || (size_t)n >= sizeof dict - len)
		return -E2BIG;
	len += (size_t)n;
	if (ndim > 0) {
		/* Spare room to grow the first axis in place. */
		int digits = snprintf(NULL, 0, "%llu", (unsigned long long)shape[0]);
		if (digits < NPY_GROWTH_DIGITS) {
			size_t spare = (size_t)(NPY_GROWTH_DIGITS - digits);
			if (len + spare >= sizeof dict)
				return -E2BIG;
			memset(dict + len, ' ', spare);
			len += spare;
		}
	}
	/* _wrap_header: pad with spaces and a final newline so that magic (6) +
	 * version (2) + length (2) + header is a multiple of 64; an exact
	 * multiple still gets a full 64 bytes of padding, as numpy does. */
	hlen = len + 1;
	pad = NPY_ALIGN - ((10 + hlen) % NPY_ALIGN);
	if (hlen + pad > 65535)
		return -E2BIG;
	total = 10 + hlen + pad;
	if (total > cap)
		return -ENOSPC;
	memcpy(buf, npy_magic, sizeof npy_magic);
	buf[6] = 1;
	buf[7] = 0;
	buf[8] = (char)((hlen + pad) & 0xff);
	buf[9] = (char)((hlen + pad) >> 8);
	memcpy(buf + 10, dict, len);
	memset(buf + 10 + len, ' ', pad);
	buf[total - 1] = '\n';
	return (long)total;
}
