/* SPDX-License-Identifier: MIT */
/*
 * Where a JPEG ends: its markers walked from SOI to EOI, so that data after
 * the image (a phone's appended video, a camera's trailer, padding) is told
 * apart from a file cut short.
 */
#include <string.h>

#include "decode/image_impl.h"

/* The end of the entropy-coded data that starts at i: the offset of the
 * next marker other than a restart (an FF there is followed by 00, a
 * stuffed byte, by D0..D7, a restart, or by FF, fill), or len. */
static size_t
entropy_end(const uint8_t *p, size_t len, size_t i)
{
	while (i < len) {
		const uint8_t *ff = memchr(p + i, 0xff, len - i);
		if (!ff)
			return len;
		i = (size_t)(ff - p);
		size_t j = i + 1;
		while (j < len && p[j] == 0xff)
			j++;
		if (j >= len)
			return len;
		if (p[j] == 0x00 || (p[j] >= 0xd0 && p[j] <= 0xd7)) {
			i = j + 1;
			continue;
		}
		return j - 1; /* FF of the marker, after any fill */
	}
	return len;
}

size_t
rf_jpeg_scan_end(const uint8_t *p, size_t len)
{
	size_t i = 2;

	if (len < 4 || p[0] != 0xff || p[1] != 0xd8)
		return 0;
	while (i + 2 <= len) {
		if (p[i] != 0xff)
			return 0;
		uint8_t m = p[i + 1];
		if (m == 0xff) { /* fill byte */
			i++;
			continue;
		}
		if (m == 0xd9)
			return i + 2;
		if (m == 0x01 || m == 0x00 || (m >= 0xd0 && m <= 0xd8)) {
			i += 2;
			continue;
		}
		if (i + 4 > len)
			return 0;
		size_t seg = ((size_t)p[i + 2] << 8) | p[i + 3];
		if (seg < 2)
			return 0;
		i += 2 + seg;
		if (i > len)
			return 0;
		if (m == 0xda) /* a scan: its entropy-coded data follows */
			i = entropy_end(p, len, i);
	}
	return 0;
}
