/* parlectl export: the job's master, sent by parled over the socket in
 * base64 chunks and written here, with the user's permissions, atomically:
 * a temporary beside the target, fsync, a CRC-32 and size check against
 * what parled said, rename, fsync of the directory. parled never writes to
 * a path a client names (it may run as root), and the user need not be able
 * to read its state dir. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base64.h"
#include "ctl.h"

/* A newer evaluation may replace the master mid-transfer (the daemon then
 * refuses the next chunk): start over this many times. */
#define EXPORT_ATTEMPTS 3

int open_temp_beside(const char *dst, char *tmp, size_t len)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", dst);
    char *base = basename(copy);
    char dcopy[4096];
    snprintf(dcopy, sizeof dcopy, "%s", dst);
    const char *dir = dirname(dcopy);
    if (snprintf(tmp, len, "%s/.%s.part-XXXXXX", dir, base) >= (int)len)
        return fail("%s: path too long", dst), -1;
    int fd = mkstemp(tmp);
    if (fd < 0)
        return fail("cannot create a temporary in %s: %s", dir, strerror(errno)), -1;
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) {
        fail("%s: chmod: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    return fd;
}

int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One pass: the chunks of `version` into fd. 0 done, 1 the file changed
 * (start over), -1 an error (reported). */
static int fetch(conn *c, const char *id, const char *version, double size, const char *want_crc,
                 int fd)
{
    unsigned long crc = crc32(0L, Z_NULL, 0);
    long long offset = 0;
    unsigned char *buf = malloc(base64_encoded_len(1u << 20));
    if (!buf)
        return fail("out of memory"), -1;
    int rc = -1;
    for (;;) {
        cJSON *req = op_request("export", id);
        cJSON_AddNumberToObject(req, "offset", (double)offset);
        cJSON_AddStringToObject(req, "version", version);
        if (conn_send(c, req) != 0)
            break;
        cJSON *r = conn_read(c);
        if (!r)
            break;
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))) {
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
            if (strcmp(str(e, "code"), "bad_state") == 0)
                rc = 1;
            else
                reply_error(r);
            cJSON_Delete(r);
            break;
        }
        const char *data = str(r, "data");
        size_t dlen = strlen(data);
        long got = dlen <= base64_encoded_len(1u << 20) ? base64_decode(data, dlen, buf) : -1;
        int eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "eof"));
        double at = num(r, "offset");
        cJSON_Delete(r);
        if (got < 0 || at != (double)offset) {
            fail("export %s: parled sent a malformed chunk at byte %lld", id, offset);
            break;
        }
        if (write_all(fd, buf, (size_t)got) != 0) {
            fail("writing the export: %s", strerror(errno));
            break;
        }
        crc = crc32(crc, buf, (uInt)got);
        offset += got;
        if (eof || got == 0) {
            char hex[16];
            snprintf(hex, sizeof hex, "%08lx", crc & 0xffffffffUL);
            if ((double)offset != size)
                fail("export %s: got %lld bytes, parled said %.0f: the transfer is corrupt", id,
                     offset, size);
            else if (strcmp(hex, want_crc) != 0)
                fail("export %s: CRC-32 %s, parled said %s: the transfer is corrupt", id, hex,
                     want_crc);
            else
                rc = 0;
            break;
        }
    }
    free(buf);
    return rc;
}

/* fsync the directory holding `path`, so a rename or a new file there is
 * durable. */
int sync_dir(const char *path)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = dfd >= 0 && fsync(dfd) == 0 ? 0 : -1;
    if (dfd >= 0)
        close(dfd);
    return rc;
}

int cmd_export(const command *cmd, int argc, char **argv)
{
    PARSE("jo", 1, 2);
    const char *dst = a.out ? a.out : a.npos == 2 ? a.pos[1] : NULL;
    if (!dst || (a.out && a.npos == 2))
        return usage_error(cmd, "name the file once, with -o FILE", "");
    const char *id = a.pos[0];
    conn c;
    if (conn_open(&c) != 0)
        return EXIT_FAIL;
    int rc = EXIT_FAIL;
    char tmp[4200] = "";
    cJSON *desc = NULL;
    for (int attempt = 0; attempt < EXPORT_ATTEMPTS; attempt++) {
        cJSON_Delete(desc);
        if (!(desc = request(&c, op_request("export", id))))
            break;
        if (!*str(desc, "crc32") || !*str(desc, "version") || !isfinite(num(desc, "size"))) {
            fail("export %s: parled's reply has no size, crc32 and version (an older parled?)", id);
            break;
        }
        int fd = open_temp_beside(dst, tmp, sizeof tmp);
        if (fd < 0)
            break;
        int got = fetch(&c, id, str(desc, "version"), num(desc, "size"), str(desc, "crc32"), fd);
        if (got == 0 && fsync(fd) != 0) {
            fail("%s: fsync: %s", tmp, strerror(errno));
            got = -1;
        }
        if (close(fd) != 0 && got == 0) {
            fail("%s: close: %s", tmp, strerror(errno));
            got = -1;
        }
        if (got == 0 && rename(tmp, dst) != 0) {
            fail("cannot write %s: %s", dst, strerror(errno));
            got = -1;
        }
        if (got != 0)
            unlink(tmp);
        if (got == 0) {
            if (sync_dir(dst) != 0)
                fail("%s: fsync of its directory: %s", dst, strerror(errno));
            else
                rc = EXIT_OK;
            break;
        }
        if (got < 0)
            break;
        if (attempt + 1 == EXPORT_ATTEMPTS)
            fail("export %s: the master kept changing during the transfer; try again", id);
    }
    conn_close(&c);
    if (rc == EXIT_OK) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(desc, "metadata");
        if (a.json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", id);
            cJSON_AddStringToObject(o, "file", dst);
            cJSON_AddNumberToObject(o, "size", num(desc, "size"));
            cJSON_AddStringToObject(o, "crc32", str(desc, "crc32"));
            cJSON_AddItemToObject(o, "metadata", cJSON_Duplicate(m, 1));
            print_json(o);
            cJSON_Delete(o);
        } else {
            char terr[32];
            const char *e = str(m, "test_error");
            printf("exported %s (epoch %s of %s, test error %s) to %s\n", id, str(m, "epoch"),
                   str(m, "epochs"), fmt_percent(*e ? strtod(e, NULL) : NAN, terr, sizeof(terr)),
                   dst);
        }
    }
    cJSON_Delete(desc);
    return rc;
}
