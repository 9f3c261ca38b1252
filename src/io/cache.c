/* SPDX-License-Identifier: MIT */
/*
 * The local cache of remote chunks (cache.h): one file per entry, written
 * atomically, checked when reused, the total kept under the cap across
 * processes by a lock file and a shared running total.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io/cache.h"
#include "xxh.h"

static const char MAGIC[8] = {'R', 'F', 'C', 'A', 'C', 'H', 'E', '1'};

struct hdr {
	char magic[8];
	uint64_t url, version, offset, len, sum, hsum;
	uint64_t pad;
};
_Static_assert(sizeof(struct hdr) == RF_CACHE_HEADER, "cache header is 64 bytes");

struct rf_cache {
	rf_diag *diag;
	char *dir;
	int dfd, lockfd, usefd;
	uint64_t cap;
	int warned;
	unsigned seq;
	struct rf_cache_stats st;
};

static void
entry_name(char *out, size_t cap, uint64_t url, uint64_t version, uint64_t offset, size_t len)
{
	snprintf(out, cap, "%016" PRIx64 "-%016" PRIx64 "-%016" PRIx64 "-%zx.rfc", url, version,
		 offset, len);
}

/* The URL without its query: a presigned URL's signature and expiry change
 * from run to run, the object it names does not. */
static uint64_t
url_hash(const char *url)
{
	return XXH3_64bits(url, strcspn(url, "?#"));
}

static int
mkdirs(const char *dir)
{
	char *p = strdup(dir);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			int e = errno;
			free(p);
			return -e;
		}
		*s = '/';
	}
	int rc = mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
	free(p);
	return rc;
}

int
rf_cache_open(rf_cache **out, const char *dir, uint64_t cap, rf_diag *diag)
{
	*out = NULL;
	rf_cache *c = calloc(1, sizeof *c);
	if (!c || !(c->dir = strdup(dir))) {
		free(c);
		return rf_fail(diag, -ENOMEM, "cache: out of memory");
	}
	c->diag = diag;
	c->cap = cap;
	c->dfd = c->lockfd = c->usefd = -1;
	int rc = mkdirs(dir);
	if (rc == 0 && (c->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		rc = -errno;
	if (rc == 0 &&
	    (c->lockfd = openat(c->dfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		rc = -errno;
	if (rc == 0 &&
	    (c->usefd = openat(c->dfd, ".usage", O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		rc = -errno;
	if (rc < 0) {
		rf_fail(diag, rc, "cache_dir %s: cannot make or write it: %s (give a writable "
			"directory, or no cache_dir)", dir, strerror(-rc));
		rf_cache_close(&c);
		return rc;
	}
	*out = c;
	return 0;
}

void
rf_cache_close(rf_cache **cp)
{
	rf_cache *c = *cp;
	if (!c)
		return;
	if (c->diag && (c->st.hits || c->st.stored || c->st.dropped))
		rf_log(c->diag, RF_LOG_INFO,
		       "cache %s: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64 " stored, %" PRIu64
		       " evicted, %" PRIu64 " dropped (failed their check)", c->dir, c->st.hits,
		       c->st.misses, c->st.stored, c->st.evicted, c->st.dropped);
	if (c->usefd >= 0)
		close(c->usefd);
	if (c->lockfd >= 0)
		close(c->lockfd);
	if (c->dfd >= 0)
		close(c->dfd);
	free(c->dir);
	free(c);
	*cp = NULL;
}

void
rf_cache_set_diag(rf_cache *c, rf_diag *diag)
{
	if (c)
		c->diag = diag;
}

void
rf_cache_stats(const rf_cache *c, struct rf_cache_stats *out)
{
	if (c)
		*out = c->st;
	else
		memset(out, 0, sizeof *out);
}

static int
read_full(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int
rf_cache_get(rf_cache *c, const char *url, uint64_t version, uint64_t offset, void *buf,
	     size_t len)
{
	uint64_t uh = url_hash(url);
	char name[128];
	entry_name(name, sizeof name, uh, version, offset, len);
	int fd = openat(c->dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		c->st.misses++;
		return 0;
	}
	struct hdr h;
	struct stat sb;
	const char *why = NULL;
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != RF_CACHE_HEADER + (uint64_t)len)
		why = "its size is wrong";
	else if (read_full(fd, &h, sizeof h, 0) < 0)
		why = "its header cannot be read";
	else if (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0 ||
		 h.hsum != XXH3_64bits(&h, offsetof(struct hdr, hsum)))
		why = "its header fails its checksum";
	else if (h.url != uh || h.version != version || h.offset != offset || h.len != len)
		why = "its header names another range";
	else if (read_full(fd, buf, len, RF_CACHE_HEADER) < 0)
		why = "it cannot be read";
	else if (XXH3_64bits(buf, len) != h.sum)
		why = "its bytes fail their checksum";
	if (why) {
		close(fd);
		unlinkat(c->dfd, name, 0);
		c->st.dropped++;
		c->st.misses++;
		rf_log(c->diag, RF_LOG_WARN, "cache %s/%s (%s, bytes %" PRIu64 "-%" PRIu64 "): %s: "
		       "deleted, fetched again", c->dir, name, url, offset, offset + len - 1, why);
		return 0;
	}
	futimens(fd, NULL); /* most recently used */
	close(fd);
	c->st.hits++;
	return 1;
}

void
rf_cache_drop(rf_cache *c, const char *url, uint64_t version, uint64_t offset, size_t len)
{
	char name[128];
	entry_name(name, sizeof name, url_hash(url), version, offset, len);
	if (unlinkat(c->dfd, name, 0) == 0)
		rf_log(c->diag, RF_LOG_WARN, "cache %s/%s (%s, bytes %" PRIu64 "-%" PRIu64 "): "
		       "its bytes failed the chunk's checksum: deleted, the next read fetches them "
		       "again", c->dir, name, url, offset, offset + len - 1);
}

struct ent {
	char name[64];
	int64_t mtime_ns;
	uint64_t size;
};

static int
by_age(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

static int
is_entry(const char *n)
{
	size_t l = strlen(n);
	return l > 4 && l < 64 && n[0] != '.' && strcmp(n + l - 4, ".rfc") == 0;
}

/* Under the lock: the true total, leftovers of killed writers deleted,
 * and the least recently used entries deleted until `need` more bytes
 * fit (down to 7/8 of the cap, when evicting at all).  Returns the total
 * left. */
static uint64_t
scan(rf_cache *c, uint64_t need)
{
	int fd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return UINT64_MAX;
	}
	struct ent *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, ".tmp-", 5) == 0) {
			unlinkat(c->dfd, de->d_name, 0);
			continue;
		}
		if (!is_entry(de->d_name))
			continue;
		struct stat sb;
		if (fstatat(c->dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct ent *nv = realloc(v, nc * sizeof *v);
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		size_t nl = strlen(de->d_name);
		if (nl >= sizeof v[n].name)
			continue; /* not an entry: is_entry names are shorter */
		memcpy(v[n].name, de->d_name, nl + 1);
		v[n].mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
		v[n].size = (uint64_t)sb.st_size;
		total += v[n].size;
		n++;
	}
	closedir(d);
	if (total + need > c->cap) {
		uint64_t low = c->cap - c->cap / 8;
		uint64_t goal = need > low ? 0 : low - need;
		if (goal + need > c->cap)
			goal = c->cap - need;
		qsort(v, n, sizeof *v, by_age);
		for (size_t i = 0; i < n && total > goal; i++) {
			if (unlinkat(c->dfd, v[i].name, 0) == 0 || errno == ENOENT) {
				total -= v[i].size;
				c->st.evicted++;
			}
		}
	}
	free(v);
	return total;
}

static uint64_t
usage_read(rf_cache *c)
{
	char b[32] = {0};
	ssize_t n = pread(c->usefd, b, sizeof b - 1, 0);
	if (n <= 0)
		return UINT64_MAX;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(b, &end, 10);
	if (errno || end == b || *end != '\n')
		return UINT64_MAX;
	return v;
}

static void
usage_write(rf_cache *c, uint64_t v)
{
	char b[32];
	int n = snprintf(b, sizeof b, "%020" PRIu64 "\n", v);
	if (pwrite(c->usefd, b, (size_t)n, 0) != n)
		(void)ftruncate(c->usefd, 0); /* unreadable: the next insertion scans */
}

void
rf_cache_put(rf_cache *c, const char *url, uint64_t version, uint64_t offset,
	     const void *buf, size_t len)
{
	uint64_t need = RF_CACHE_HEADER + (uint64_t)len;
	if (need > c->cap) {
		if (!c->warned++)
			rf_log(c->diag, RF_LOG_WARN, "cache %s: a read of %zu bytes does not fit "
			       "cache_bytes %" PRIu64 ": not cached (raise cache_bytes)", c->dir, len,
			       c->cap);
		return;
	}
	uint64_t uh = url_hash(url);
	char name[128], tmp[64];
	entry_name(name, sizeof name, uh, version, offset, len);
	if (flock(c->lockfd, LOCK_EX) < 0)
		return;
	struct stat sb;
	if (fstatat(c->dfd, name, &sb, 0) == 0)
		goto out; /* another process stored it */
	uint64_t total = usage_read(c);
	if (total == UINT64_MAX || total + need > c->cap)
		total = scan(c, need);
	if (total == UINT64_MAX || total + need > c->cap)
		goto out;
	struct hdr h = {.url = uh, .version = version, .offset = offset, .len = len};
	memcpy(h.magic, MAGIC, sizeof MAGIC);
	h.sum = XXH3_64bits(buf, len);
	h.hsum = XXH3_64bits(&h, offsetof(struct hdr, hsum));
	snprintf(tmp, sizeof tmp, ".tmp-%ld-%u", (long)getpid(), c->seq++);
	int fd = openat(c->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	struct iovec iov[2] = {{&h, sizeof h}, {(void *)buf, len}};
	size_t left = (size_t)need;
	int ok = 1;
	while (left && ok) {
		ssize_t w = writev(fd, iov, 2);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			ok = 0;
			break;
		}
		left -= (size_t)w;
		for (int i = 0; i < 2 && w; i++) {
			size_t m = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;
			iov[i].iov_base = (char *)iov[i].iov_base + m;
			iov[i].iov_len -= m;
			w -= (ssize_t)m;
		}
	}
	if (close(fd) < 0)
		ok = 0;
	if (!ok || renameat(c->dfd, tmp, c->dfd, name) < 0) {
		unlinkat(c->dfd, tmp, 0);
		goto fail;
	}
	usage_write(c, total + need);
	c->st.stored++;
	goto out;
fail:
	if (!c->warned++)
		rf_log(c->diag, RF_LOG_WARN, "cache %s: cannot store an entry: %s (reads go on "
		       "from the server)", c->dir, strerror(errno));
out:
	flock(c->lockfd, LOCK_UN);
}

int64_t
rf_cache_dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	int64_t total = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat sb;
		if (is_entry(de->d_name) && fstatat(dirfd(d), de->d_name, &sb, 0) == 0)
			total += sb.st_size;
	}
	closedir(d);
	return total;
}
