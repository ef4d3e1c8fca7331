/* parlectl's connection to parled: one JSON request line out, one reply
 * line back (docs/protocol.md), framed by the protocol library. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "ctl.h"
#include "protocol.h"

/* A reply line may carry a log of up to 8 MiB (docs/protocol.md). */
#define MAX_REPLY_LINE (64u << 20)

/* The installed units' socket (parled.socket): systemd starts parled there. */
#define UNIT_SOCKET "/run/parled/parled.sock"

static int not_running(void)
{
    if (strcmp(socket_path, UNIT_SOCKET) == 0)
        return fail("parled is not running on %s, the socket of the installed systemd units: "
                    "an admin starts it with `systemctl enable --now parled.socket parled.service`; "
                    "`systemctl status parled` and `journalctl -u parled` say why it stopped",
                    socket_path);
    return fail("parled is not running on %s: start it with `parled --socket %s &`", socket_path,
                socket_path);
}

/* Whether the caller's process is in group gid, and whether the group's
 * entry names the caller (added, but since this login). */
static void in_group(gid_t gid, int *now, int *listed)
{
    *now = getegid() == gid, *listed = 0;
    gid_t gs[256];
    int n = getgroups(256, gs);
    for (int i = 0; i < n; i++)
        *now |= gs[i] == gid;
    const struct passwd *pw = getpwuid(getuid());
    const struct group *gr = getgrgid(gid);
    for (char **m = gr && pw ? gr->gr_mem : NULL; m && *m; m++)
        *listed |= strcmp(*m, pw->pw_name) == 0;
}

/* Permission denied on the socket: say whose it is and the fix. */
static int no_access(void)
{
    struct stat st;
    if (stat(socket_path, &st) != 0)
        return fail("cannot connect to parled on %s: %s", socket_path, strerror(EACCES));
    const struct group *gr = getgrgid(st.st_gid);
    char gname[64];
    snprintf(gname, sizeof gname, "%s", gr ? gr->gr_name : "?");
    const struct passwd *pw = getpwuid(getuid());
    const char *me = pw ? pw->pw_name : "USER";
    int now, listed;
    in_group(st.st_gid, &now, &listed);
    if (listed && !now)
        return fail("cannot connect to parled on %s: permission denied: you were added to group %s "
                    "(parled serves its members) after this login began: log in again, or run "
                    "`newgrp %s` in this shell", socket_path, gname, gname);
    if (!now)
        return fail("cannot connect to parled on %s: permission denied: parled serves the members "
                    "of group %s and %s is not one: an admin adds you with `usermod -aG %s %s`, "
                    "then you log in again", socket_path, gname, me, gname, me);
    return fail("cannot connect to parled on %s: permission denied (mode %04o, group %s): check "
                "the folders above it", socket_path, (unsigned)(st.st_mode & 07777), gname);
}

int conn_open(conn *c)
{
    memset(c, 0, sizeof(*c));
    proto_framer_init(&c->framer, MAX_REPLY_LINE);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof(addr.sun_path))
        return fail("socket path too long: %s", socket_path);
    memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return fail("socket: %s", strerror(errno));
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        int e = errno;
        close(c->fd);
        c->fd = -1;
        if (e == ENOENT || e == ECONNREFUSED)
            return not_running();
        if (e == EACCES)
            return no_access();
        return fail("cannot connect to parled on %s: %s", socket_path, strerror(e));
    }
    return 0;
}

void conn_close(conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    proto_framer_free(&c->framer);
    c->fd = -1;
}

/* After a failed send: parled may have refused the connection (a bound,
 * the peer's uid) and closed it before reading, its reply waiting in the
 * socket. 1 if that reply was an error, now printed. */
static int refused(conn *c)
{
    char line[4096];
    ssize_t r = recv(c->fd, line, sizeof line - 1, MSG_DONTWAIT);
    if (r <= 0)
        return 0;
    line[r] = '\0';
    char *nl = strchr(line, '\n');
    if (nl)
        *nl = '\0';
    cJSON *reply = cJSON_Parse(line);
    int error = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(reply, "ok"));
    if (error)
        reply_error(reply);
    cJSON_Delete(reply);
    return error;
}

int conn_send(conn *c, cJSON *req)
{
    char *text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!text)
        return fail("out of memory");
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON's terminator becomes the line's end */
    size_t off = 0;
    while (off < n + 1) {
        ssize_t w = send(c->fd, text + off, n + 1 - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            const int e = errno;
            free(text);
            return refused(c) ? EXIT_FAIL : fail("sending to parled: %s", strerror(e));
        }
        off += (size_t)w;
    }
    free(text);
    return 0;
}

int conn_lost;

/* The next line from parled, parsed; NULL (with a message) on EOF or junk. */
cJSON *conn_read(conn *c)
{
    char buf[65536], *line;
    size_t len;
    for (;;) {
        int r = proto_framer_next(&c->framer, &line, &len);
        if (r < 0) {
            fail("parled sent a line longer than %u bytes", MAX_REPLY_LINE);
            return NULL;
        }
        if (r > 0) {
            cJSON *msg = cJSON_ParseWithLength(line, len);
            if (!msg)
                fail("parled sent a line that is not JSON");
            return msg;
        }
        ssize_t got = read(c->fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            fail("parled closed the connection%s", got < 0 ? " (read error)" : "");
            conn_lost = 1;
            return NULL;
        }
        if (proto_framer_push(&c->framer, buf, (size_t)got) != 0) {
            fail("out of memory");
            return NULL;
        }
    }
}

/* An error reply as one line; returns EXIT_FAIL. */
int reply_error(const cJSON *reply)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
    const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "code"));
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message"));
    if (code && strcmp(code, ERR_INVALID_JOB) == 0)
        return fail("invalid job: %s", msg ? msg : "?");
    return fail("%s (%s)", msg ? msg : "parled refused the request", code ? code : "error");
}

/* Send `req` and read its reply: the reply if ok, else NULL after printing
 * the error. */
cJSON *request(conn *c, cJSON *req)
{
    if (conn_send(c, req) != 0)
        return NULL;
    cJSON *reply = conn_read(c);
    if (reply && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok"))) {
        reply_error(reply);
        cJSON_Delete(reply);
        return NULL;
    }
    return reply;
}

cJSON *op_request(const char *op, const char *id)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "op", op);
    if (id)
        cJSON_AddStringToObject(req, "id", id);
    return req;
}

/* One connection, one request, one reply. */
cJSON *call(cJSON *req)
{
    conn c;
    if (conn_open(&c) != 0) {
        cJSON_Delete(req);
        return NULL;
    }
    cJSON *reply = request(&c, req);
    conn_close(&c);
    return reply;
}
