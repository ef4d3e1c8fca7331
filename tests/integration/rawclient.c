/* A raw socket client for the integration tests: sends bytes parlectl would
 * never send and reports exactly what parled answers.
 *
 *   rawclient [--user NAME] [--lines N] SOCK   send stdin, print the reply
 *       lines until N lines (default: all) or EOF; exit 0, or 3 on a timeout.
 *       --user: drop root privileges to NAME before connecting.
 *   rawclient --many N SOCK   hold N connections open at once, send two
 *       requests on each, check every reply is ok; exit 0 or 1. */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define TIMEOUT_MS 30000

static int connect_to(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        fprintf(stderr, "rawclient: connect %s: %s\n", path, strerror(errno));
        exit(2);
    }
    return fd;
}

/* Read until `want` newlines (or EOF when want < 0) into out; returns the
 * number of lines, or -1 on a timeout. */
static int read_lines(int fd, int want, FILE *out)
{
    int lines = 0;
    char buf[65536];
    while (want < 0 || lines < want) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, TIMEOUT_MS) <= 0)
            return -1;
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
        if (out)
            fwrite(buf, 1, (size_t)n, out);
    }
    return lines;
}

static int send_all(int fd, const char *data, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t w = send(fd, data + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            return -1; /* parled may close first (a line over the limit) */
        off += (size_t)w;
    }
    return 0;
}

static int many(const char *path, int n)
{
    int *fds = calloc((size_t)n, sizeof(int));
    const char req[] = "{\"op\":\"version\"}\n{\"op\":\"list\"}\n";
    for (int i = 0; i < n; i++)
        fds[i] = connect_to(path);
    for (int i = 0; i < n; i++)
        if (send_all(fds[i], req, sizeof(req) - 1) != 0) {
            fprintf(stderr, "rawclient: send on connection %d failed\n", i);
            return 1;
        }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        int got = read_lines(fds[i], 2, mem);
        fclose(mem);
        int oks = 0;
        for (char *p = text; (p = strstr(p, "\"ok\":true")); p++)
            oks++;
        if (got != 2 || oks != 2) {
            fprintf(stderr, "rawclient: connection %d: %d lines, %d ok: %s\n", i, got, oks, text);
            bad++;
        }
        free(text);
        close(fds[i]);
    }
    free(fds);
    printf("%d connections, %d bad\n", n, bad);
    return bad ? 1 : 0;
}

static void become(const char *name)
{
    struct passwd *pw = getpwnam(name);
    if (!pw) {
        fprintf(stderr, "rawclient: no user %s\n", name);
        exit(2);
    }
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) {
        fprintf(stderr, "rawclient: cannot become %s: %s\n", name, strerror(errno));
        exit(2);
    }
}

int main(int argc, char **argv)
{
    const char *user = NULL;
    int lines = -1, nmany = 0, i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (strcmp(argv[i], "--user") == 0)
            user = argv[i + 1];
        else if (strcmp(argv[i], "--lines") == 0)
            lines = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--many") == 0)
            nmany = atoi(argv[i + 1]);
        else
            break;
    }
    if (i + 1 != argc) {
        fprintf(stderr, "usage: rawclient [--user NAME] [--lines N] [--many N] SOCK\n");
        return 2;
    }
    const char *path = argv[i];
    if (nmany > 0)
        return many(path, nmany);
    if (user)
        become(user);
    int fd = connect_to(path);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0)
        if (send_all(fd, buf, n) != 0)
            break;
    shutdown(fd, SHUT_WR);
    int got = read_lines(fd, lines, stdout);
    close(fd);
    return got < 0 ? 3 : 0;
}
