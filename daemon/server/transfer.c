#include "transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base64.h"
#include "protocol.h"

/* A few (path, version) -> CRC-32 pairs: a client asks for the description
 * once per export, but a large master is read whole for it, so a second
 * export of the same file (another user, a retry) must not read it again.
 * Loop thread only. */
#define CRC_CACHE 8
static struct {
    char path[1200];
    char version[PROTO_VERSION_TAG_MAX];
    unsigned long crc;
} crc_cache[CRC_CACHE];
static int crc_next;

static void version_of(const struct stat *st, char *out, size_t len)
{
    snprintf(out, len, "%llx-%llx-%llx", (unsigned long long)st->st_ino,
             (unsigned long long)st->st_mtim.tv_sec * 1000000000ull +
                 (unsigned long long)st->st_mtim.tv_nsec,
             (unsigned long long)st->st_size);
}

/* Open `path` and name its version; -1 with a message. */
static int open_versioned(const char *path, struct stat *st, char *version, char *err,
                          size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    version_of(st, version, PROTO_VERSION_TAG_MAX);
    return fd;
}

/* pread all of n bytes (fewer only at the file's end); -1 on an error. */
static long long read_at(int fd, unsigned char *buf, size_t n, long long offset)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(offset + (long long)got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long long)got;
}

int transfer_describe(const char *path, cJSON *reply, char *err, size_t errlen)
{
    struct stat st;
    char version[PROTO_VERSION_TAG_MAX];
    int fd = open_versioned(path, &st, version, err, errlen);
    if (fd < 0)
        return -1;
    int hit = -1;
    for (int i = 0; i < CRC_CACHE; i++)
        if (strcmp(crc_cache[i].path, path) == 0 && strcmp(crc_cache[i].version, version) == 0)
            hit = i;
    unsigned long crc = crc32(0L, Z_NULL, 0);
    if (hit >= 0) {
        crc = crc_cache[hit].crc;
    } else {
        unsigned char *buf = malloc(1 << 20);
        long long off = 0, n = 0;
        while (buf && (n = read_at(fd, buf, 1 << 20, off)) > 0) {
            crc = crc32(crc, buf, (uInt)n);
            off += n;
        }
        free(buf);
        if (!buf || n < 0 || off != (long long)st.st_size) {
            snprintf(err, errlen, "%s: %s", path, !buf ? "out of memory" : "read error");
            close(fd);
            return -1;
        }
        int i = crc_next++ % CRC_CACHE;
        snprintf(crc_cache[i].path, sizeof crc_cache[i].path, "%s", path);
        snprintf(crc_cache[i].version, sizeof crc_cache[i].version, "%s", version);
        crc_cache[i].crc = crc;
    }
    close(fd);
    char hex[16];
    snprintf(hex, sizeof hex, "%08lx", crc & 0xffffffffUL);
    cJSON_AddNumberToObject(reply, "size", (double)st.st_size);
    cJSON_AddStringToObject(reply, "crc32", hex);
    cJSON_AddStringToObject(reply, "version", version);
    return 0;
}

cJSON *transfer_chunk(const char *path, long long offset, const char *version, const char **code,
                      char *err, size_t errlen)
{
    struct stat st;
    char now[PROTO_VERSION_TAG_MAX];
    *code = ERR_INTERNAL;
    int fd = open_versioned(path, &st, now, err, errlen);
    if (fd < 0)
        return NULL;
    if (version[0] && strcmp(version, now) != 0) {
        close(fd);
        *code = ERR_BAD_STATE;
        snprintf(err, errlen, "the file changed since version %s (a newer evaluation replaced "
                 "it): start the export over", version);
        return NULL;
    }
    long long size = (long long)st.st_size;
    size_t want = offset >= size ? 0 : (size_t)(size - offset < PROTO_CHUNK_MAX ? size - offset
                                                                                : PROTO_CHUNK_MAX);
    unsigned char *buf = malloc(want ? want : 1);
    char *text = malloc(base64_encoded_len(want) + 1);
    long long n = buf && text ? read_at(fd, buf, want, offset) : -1;
    close(fd);
    if (n != (long long)want) {
        snprintf(err, errlen, "%s: %s", path, buf && text ? "read error" : "out of memory");
        free(buf);
        free(text);
        return NULL;
    }
    base64_encode(buf, want, text);
    free(buf);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", now);
    cJSON_AddNumberToObject(o, "offset", (double)offset);
    cJSON_AddNumberToObject(o, "size", (double)size);
    cJSON_AddStringToObject(o, "data", text);
    cJSON_AddBoolToObject(o, "eof", offset + (long long)want >= size);
    free(text);
    return o;
}

cJSON *transfer_lines(const char *path, long long offset, const char **code, char *err,
                      size_t errlen)
{
    const size_t max = PROTO_CHUNK_MAX / 2;
    *code = ERR_INTERNAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st = {0};
    if (fd < 0 && errno != ENOENT) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fd >= 0 && fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    long long size = (long long)st.st_size;
    size_t want = offset >= size ? 0 : (size_t)(size - offset < (long long)max ? size - offset : (long long)max);
    char *buf = malloc(want + 1);
    long long n = buf ? (fd >= 0 ? read_at(fd, (unsigned char *)buf, want, offset) : 0) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        snprintf(err, errlen, "%s: %s", path, buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    /* Whole lines only: a line still being appended waits for the next call. */
    size_t keep = (size_t)n;
    while (keep > 0 && buf[keep - 1] != '\n')
        keep--;
    if (keep == 0 && (size_t)n == max) {
        snprintf(err, errlen, "%s: a line at byte %lld is longer than %zu bytes", path, offset, max);
        free(buf);
        return NULL;
    }
    buf[keep] = '\0';
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "offset", (double)offset);
    cJSON_AddNumberToObject(o, "next", (double)(offset + (long long)keep));
    cJSON_AddStringToObject(o, "text", buf);
    cJSON_AddBoolToObject(o, "eof", offset + (long long)keep >= size);
    free(buf);
    return o;
}
