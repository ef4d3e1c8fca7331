/* parlectl: the command-line client of parled. It speaks only the protocol
 * of docs/protocol.md: one JSON request per line over the Unix socket, one
 * JSON reply per line (plus event lines for watch and logs -f). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "ctl.h"
#include "parle_config.h"


static const char usage[] =
    "usage: parlectl [--socket PATH] COMMAND [ARG]...\n"
    "Talk to parled over its Unix socket (--socket, else $PARLE_SOCKET, else\n"
    "$XDG_RUNTIME_DIR/parled.sock, else /run/parled.sock).\n"
    "\n"
    "commands:\n"
    "  submit FILE [-q] [--set key.path=value]... [--watch|--wait] [--json]   queue a job\n"
    "  status [ID] [--json]    one job, or the daemon and all jobs\n"
    "  list [--state S] [--json]   all jobs (--state: only those in state S); alias: ls\n"
    "  watch ID [--json]       follow a job's progress until it ends\n"
    "  logs ID [-f] [--json]   a job's log (-f: follow until the job ends)\n"
    "  cancel ID [--json]      cancel a queued or running job\n"
    "  wait ID [--json]        block until the job ends; exit status below\n"
    "  export ID -o FILE [--json]  write the job's master weights and BN statistics (safetensors)\n"
    "  plot ID [ID...] [-o F] [--json]  train loss, test error, lr against passes, as an SVG\n"
    "  devices [--json]        the daemon's devices and what runs on them\n"
    "  version [--json]        client and daemon versions\n"
    "  shutdown [--json]       stop parled (running jobs checkpoint and resume at its next start)\n"
    "\n"
    "'parlectl COMMAND --help' describes a command.\n"
    "\n"
    "Exit statuses:\n"
    "  0  success (wait, watch, submit --wait/--watch: the job ended done)\n"
    "  1  failure: an error reply, or the job ended failed\n"
    "  2  usage error\n"
    "  3  the job was cancelled (wait, watch, submit --wait/--watch)\n"
    "  4  parled is not running, or the connection was lost before the job ended\n"
    "     (wait, watch, submit --wait/--watch)\n";

char socket_path[4096];

int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("parlectl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

int usage_error(const command *cmd, const char *what, const char *arg)
{
    fprintf(stderr, "parlectl %s: %s%s; try 'parlectl %s --help'\n", cmd->name, what, arg,
            cmd->name);
    return EXIT_USAGE;
}

/* ---- the connection ---- */


int conn_open(conn *c)
{
    memset(c, 0, sizeof(*c));
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
            return fail("parled is not running on %s: start it with `parled --socket %s &`",
                        socket_path, socket_path);
        return fail("cannot connect to parled on %s: %s", socket_path, strerror(e));
    }
    return 0;
}

void conn_close(conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    c->fd = -1;
    c->buf = NULL;
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

/* The next line from parled, parsed; NULL (with a message) on EOF or junk. */
cJSON *conn_read(conn *c)
{
    for (;;) {
        char *nl = c->len > c->start ? memchr(c->buf + c->start, '\n', c->len - c->start) : NULL;
        if (nl) {
            *nl = '\0';
            cJSON *msg = cJSON_Parse(c->buf + c->start);
            c->start = (size_t)(nl - c->buf) + 1;
            if (!msg)
                fail("parled sent a line that is not JSON");
            return msg;
        }
        if (c->start > 0) {
            memmove(c->buf, c->buf + c->start, c->len - c->start);
            c->len -= c->start;
            c->start = 0;
        }
        if (c->cap - c->len < 65536) {
            size_t cap = c->cap ? c->cap * 2 : 131072;
            char *b = realloc(c->buf, cap);
            if (!b) {
                fail("out of memory");
                return NULL;
            }
            c->buf = b;
            c->cap = cap;
        }
        ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fail("parled closed the connection%s", r < 0 ? " (read error)" : "");
            return NULL;
        }
        c->len += (size_t)r;
    }
}

/* An error reply as one line; returns EXIT_FAIL. */
int reply_error(const cJSON *reply)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
    const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "code"));
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message"));
    if (code && strcmp(code, "invalid_job") == 0)
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

/* ---- output helpers ---- */

void print_json(const cJSON *v)
{
    char *text = cJSON_Print(v);
    if (text)
        puts(text);
    free(text);
}

double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

const char *str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

const char *fmt_duration(double s, char *buf, size_t len)
{
    if (!isfinite(s) || s < 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    long t = lround(s);
    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

const char *fmt_percent(double v, char *buf, size_t len)
{
    if (isfinite(v))
        snprintf(buf, len, "%.2f%%", 100 * v);
    else
        snprintf(buf, len, "-");
    return buf;
}

const char *fmt_num(double v, const char *fmt, char *buf, size_t len)
{
    if (isfinite(v))
        snprintf(buf, len, fmt, v);
    else
        snprintf(buf, len, "-");
    return buf;
}

static void print_job(const cJSON *j)
{
    char a[32], b[32], c[32], d[32];
    const cJSON *owner = cJSON_GetObjectItemCaseSensitive(j, "owner");
    printf("%s  %s  %s  (%s)\n", str(j, "id"), str(j, "name"), str(j, "state"),
           str(owner, "user"));
    printf("  %s x%.0f, %s on %s, devices %s\n", str(j, "algorithm"), num(j, "replicas"),
           str(j, "model"), str(j, "dataset"), str(j, "devices"));
    printf("  epoch %.0f/%.0f  step %.0f  data passes %s\n", num(j, "epoch"), num(j, "epochs"),
           num(j, "step"), fmt_num(num(j, "data_passes"), "%.2f", a, sizeof(a)));
    printf("  train loss %s  test error %s  test loss %s\n",
           fmt_num(num(j, "train_loss"), "%.4f", a, sizeof(a)),
           fmt_percent(num(j, "test_error"), b, sizeof(b)),
           fmt_num(num(j, "test_loss"), "%.4f", c, sizeof(c)));
    printf("  images/s %s  elapsed %s  ETA %s\n",
           fmt_num(num(j, "images_per_sec"), "%.0f", a, sizeof(a)),
           fmt_duration(num(j, "elapsed_s"), b, sizeof(b)), fmt_duration(num(j, "eta_s"), d, sizeof(d)));
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "memory_bytes"), *dev;
    if (cJSON_IsObject(mem)) {
        fputs("  memory (model + rule state, peak)", stdout);
        cJSON_ArrayForEach(dev, mem)
            printf("  %s %.1f MiB", dev->string, cJSON_GetNumberValue(dev) / (1024.0 * 1024));
        fputc('\n', stdout);
    }
    if (*str(j, "waiting"))
        printf("  waiting: %s\n", str(j, "waiting"));
    if (*str(j, "error"))
        printf("  error: %s\n", str(j, "error"));
}

static void print_job_table(const cJSON *jobs)
{
    char a[32], b[32];
    printf("%-8s %-10s %-12s %-28s %-14s %-9s %-10s %s\n", "ID", "STATE", "USER", "NAME",
           "ALGORITHM", "EPOCH", "TEST ERR", "ELAPSED");
    const cJSON *j;
    cJSON_ArrayForEach(j, jobs) {
        char algo[32], epoch[24];
        snprintf(algo, sizeof(algo), "%s x%.0f", str(j, "algorithm"), num(j, "replicas"));
        snprintf(epoch, sizeof(epoch), "%.0f/%.0f", num(j, "epoch"), num(j, "epochs"));
        printf("%-8s %-10s %-12.12s %-28.28s %-14s %-9s %-10s %s\n", str(j, "id"),
               str(j, "state"), str(cJSON_GetObjectItemCaseSensitive(j, "owner"), "user"),
               str(j, "name"), algo, epoch, fmt_percent(num(j, "test_error"), a, sizeof(a)),
               fmt_duration(num(j, "elapsed_s"), b, sizeof(b)));
    }
}

/* ---- watching a job ---- */

typedef struct progress {
    int tty, quiet, json;
    int bar_shown;
    double test_error;
} progress;

static void bar_clear(progress *p)
{
    if (p->tty && p->bar_shown) {
        fputs("\r\033[K", stdout);
        p->bar_shown = 0;
    }
}

static void bar_draw(progress *p, const char *id, const cJSON *ev)
{
    char loss[32], terr[32], ips[32], eta[32];
    double elapsed = num(ev, "elapsed_s"), left = num(ev, "eta_s");
    double frac = isfinite(elapsed) && isfinite(left) && elapsed + left > 0
                      ? elapsed / (elapsed + left) : 0;
    char bar[21];
    int filled = (int)(frac * 20 + 0.5);
    for (int i = 0; i < 20; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[20] = '\0';
    printf("%s%s epoch %.0f/%.0f [%s] %3.0f%% step %.0f loss %s test err %s %s img/s ETA %s%s",
           p->tty ? "\r" : "", id, num(ev, "epoch") + 1 > num(ev, "epochs") ? num(ev, "epochs")
                                                                          : num(ev, "epoch") + 1,
           num(ev, "epochs"), bar, 100 * frac, num(ev, "step"),
           fmt_num(num(ev, "train_loss"), "%.4f", loss, sizeof(loss)),
           fmt_percent(p->test_error, terr, sizeof(terr)),
           fmt_num(num(ev, "images_per_sec"), "%.0f", ips, sizeof(ips)),
           fmt_duration(left, eta, sizeof(eta)), p->tty ? "\033[K" : "\n");
    fflush(stdout);
    p->bar_shown = p->tty;
}

/* Print one event of a watch; returns 1 at the final "end" line. */
static int show_event(progress *p, const cJSON *ev, const char **state)
{
    const char *kind = str(ev, "event"), *id = str(ev, "id");
    if (strcmp(kind, "end") == 0)
        *state = str(ev, "state");
    if (p->json) {
        char *text = cJSON_PrintUnformatted(ev);
        if (text)
            puts(text);
        free(text);
        fflush(stdout);
        return strcmp(kind, "end") == 0;
    }
    if (strcmp(kind, "eval") == 0)
        p->test_error = num(ev, "test_error");
    if (p->quiet)
        return strcmp(kind, "end") == 0;
    char a[32], b[32];
    if (strcmp(kind, "progress") == 0) {
        bar_draw(p, id, ev);
    } else if (strcmp(kind, "eval") == 0) {
        bar_clear(p);
        printf("%s epoch %.0f/%.0f: test error %s, test loss %s\n", id, num(ev, "epoch"),
               num(ev, "epochs"), fmt_percent(num(ev, "test_error"), a, sizeof(a)),
               fmt_num(num(ev, "test_loss"), "%.4f", b, sizeof(b)));
    } else if (strcmp(kind, "log") == 0) {
        bar_clear(p);
        printf("%s: %s\n", id, str(ev, "message"));
    } else if (strcmp(kind, "state") == 0) {
        bar_clear(p);
        printf("%s: %s\n", id, str(ev, "state"));
    } else if (strcmp(kind, "end") == 0) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(ev, "job");
        bar_clear(p);
        printf("%s %s: test error %s, elapsed %s\n", id, str(ev, "state"),
               fmt_percent(num(j, "test_error"), a, sizeof(a)),
               fmt_duration(num(j, "elapsed_s"), b, sizeof(b)));
        return 1;
    }
    fflush(stdout);
    return 0;
}

/* Watch job `id` until it ends: EXIT_OK if it ended done, EXIT_FAIL if it
 * failed (or the daemon refused the watch), EXIT_CANCELLED if it was
 * cancelled, EXIT_GONE if parled is not running or the connection ended
 * before the job did. */
static int watch_job(const char *id, int quiet, int json)
{
    conn c;
    if (conn_open(&c) != 0)
        return EXIT_GONE;
    if (conn_send(&c, op_request("watch", id)) != 0) {
        conn_close(&c);
        return EXIT_GONE;
    }
    cJSON *reply = conn_read(&c);
    if (!reply) {
        conn_close(&c);
        return EXIT_GONE;
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok"))) {
        reply_error(reply);
        cJSON_Delete(reply);
        conn_close(&c);
        return EXIT_FAIL;
    }
    progress p = {.tty = isatty(STDOUT_FILENO), .quiet = quiet, .json = json};
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(reply, "job");
    p.test_error = num(j, "test_error");
    if (json == 1)
        print_json(j);
    if (json == 2) /* --wait --json: only the job as it ended, one object */
        p.json = 0, p.quiet = 1;
    cJSON_Delete(reply);
    const char *state = NULL;
    int rc = EXIT_GONE;
    cJSON *ev;
    while ((ev = conn_read(&c))) {
        int end = show_event(&p, ev, &state);
        if (end) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(ev, "job");
            rc = strcmp(state, "done") == 0        ? EXIT_OK
                 : strcmp(state, "cancelled") == 0 ? EXIT_CANCELLED
                                                   : EXIT_FAIL;
            if (json == 2)
                print_json(st);
            if (rc != EXIT_OK && *str(st, "error"))
                fail("job %s %s: %s", id, state, str(st, "error"));
            else if (rc != EXIT_OK)
                fail("job %s ended %s", id, state);
        }
        cJSON_Delete(ev);
        if (end)
            break;
    }
    bar_clear(&p);
    conn_close(&c);
    if (rc == EXIT_GONE)
        fail("lost the connection to parled before job %s ended", id);
    return rc;
}

/* ---- --set key.path=value ---- */

/* Set `path` (dotted) in `root` to `value`, parsed as JSON if it is JSON,
 * else taken as a string; intermediate objects are created. */
static int set_path(cJSON *root, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return fail("--set %s: expected key.path=value", assignment);
    char path[512];
    size_t plen = (size_t)(eq - assignment);
    if (plen >= sizeof(path))
        return fail("--set: key path too long");
    memcpy(path, assignment, plen);
    path[plen] = '\0';
    cJSON *value = cJSON_Parse(eq + 1);
    if (!value)
        value = cJSON_CreateString(eq + 1);
    cJSON *obj = root;
    char *key = path;
    for (char *dot; (dot = strchr(key, '.')); key = dot + 1) {
        *dot = '\0';
        if (!*key)
            break;
        cJSON *child = cJSON_GetObjectItemCaseSensitive(obj, key);
        if (!child)
            child = cJSON_AddObjectToObject(obj, key);
        if (!cJSON_IsObject(child)) {
            cJSON_Delete(value);
            return fail("--set %.*s: %s is not an object in the job", (int)plen, assignment, key);
        }
        obj = child;
    }
    if (!*key) {
        cJSON_Delete(value);
        return fail("--set %s: empty key in the path", assignment);
    }
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, value);
    else
        cJSON_AddItemToObject(obj, key, value);
    return 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *b = realloc(buf, cap * 2);
        if (!b) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* ---- commands ---- */


/* Parse argv after the command's name; `allowed` lists the flags it takes
 * ("jqfws"). Prints the usage error and returns -1, or 1 for --help. */
int parse_args(const command *cmd, int argc, char **argv, const char *allowed, int maxpos,
                      args *a)
{
    memset(a, 0, sizeof(*a));
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            printf("usage: parlectl %s\n", cmd->help);
            return 1;
        } else if (strcmp(s, "--json") == 0 && strchr(allowed, 'j')) {
            a->json = 1;
        } else if (strcmp(s, "-q") == 0 && strchr(allowed, 'q')) {
            a->quiet = 1;
        } else if (strcmp(s, "-f") == 0 && strchr(allowed, 'f')) {
            a->follow = 1;
        } else if (strcmp(s, "--watch") == 0 && strchr(allowed, 'w')) {
            a->watch = 1;
        } else if (strcmp(s, "--wait") == 0 && strchr(allowed, 'W')) {
            a->wait = 1;
        } else if ((strcmp(s, "--set") == 0 || strncmp(s, "--set=", 6) == 0) &&
                   strchr(allowed, 's')) {
            if (s[5] == '\0' && i + 1 >= argc)
                return usage_error(cmd, "--set needs key.path=value", ""), -1;
            if (a->nsets == (int)(sizeof(a->sets) / sizeof(a->sets[0])))
                return usage_error(cmd, "too many --set options", ""), -1;
            a->sets[a->nsets++] = s[5] == '=' ? (char *)s + 6 : argv[++i];
        } else if (strcmp(s, "-o") == 0 && strchr(allowed, 'o')) {
            if (i + 1 >= argc)
                return usage_error(cmd, "-o needs a file name", ""), -1;
            a->out = argv[++i];
        } else if ((strcmp(s, "--state") == 0 || strncmp(s, "--state=", 8) == 0) &&
                   strchr(allowed, 'S')) {
            if (s[7] == '\0' && i + 1 >= argc)
                return usage_error(cmd, "--state needs a state", ""), -1;
            a->state = s[7] == '=' ? s + 8 : argv[++i];
        } else if (s[0] == '-' && s[1] != '\0') {
            return usage_error(cmd, "unknown option ", s), -1;
        } else if (a->npos < maxpos) {
            a->pos[a->npos++] = argv[i];
        } else {
            return usage_error(cmd, "unexpected argument ", s), -1;
        }
    }
    return 0;
}


static int cmd_submit(const command *cmd, int argc, char **argv)
{
    PARSE("qjswW", 1, 1);
    if (a.watch && a.wait)
        return usage_error(cmd, "--watch and --wait exclude each other", "");
    size_t len = 0;
    char *text = read_file(a.pos[0], &len);
    if (!text)
        return fail("cannot read %s: %s", a.pos[0], strerror(errno));
    const char *end = NULL;
    cJSON *job = cJSON_ParseWithOpts(text, &end, 1);
    if (!job || !cJSON_IsObject(job)) {
        int line = 1;
        for (const char *p = text; end && p < end; p++)
            line += *p == '\n';
        free(text);
        cJSON_Delete(job);
        return job ? fail("%s: a job file holds one JSON object", a.pos[0])
                   : fail("%s: not valid JSON (line %d)", a.pos[0], line);
    }
    free(text);
    for (int i = 0; i < a.nsets; i++)
        if (set_path(job, a.sets[i]) != 0) {
            cJSON_Delete(job);
            return EXIT_FAIL;
        }
    cJSON *req = op_request("submit", NULL);
    cJSON_AddItemToObject(req, "job", job);
    cJSON *reply = call(req);
    if (!reply)
        return EXIT_FAIL;
    char id[64];
    snprintf(id, sizeof(id), "%s", str(reply, "id"));
    if (a.json && !a.watch && !a.wait)
        print_json(reply);
    else if (a.wait && a.json)
        ;
    else if (a.quiet)
        puts(id);
    else
        printf("submitted %s (%s)\n", id, str(reply, "state"));
    fflush(stdout);
    cJSON_Delete(reply);
    if (a.wait)
        return watch_job(id, 1, a.json ? 2 : 0);
    return a.watch ? watch_job(id, 0, a.json) : EXIT_OK;
}

static int cmd_status(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 1);
    cJSON *reply = call(op_request("status", a.npos ? a.pos[0] : NULL));
    if (!reply)
        return EXIT_FAIL;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(reply, "job");
    if (job) {
        if (a.json)
            print_json(job);
        else
            print_job(job);
    } else if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(reply, "daemon");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(d, "jobs");
        char up[32];
        printf("parled %s (pid %.0f) on %s, state dir %s, up %s\n", str(d, "version"),
               num(d, "pid"), str(d, "socket"), str(d, "state_dir"),
               fmt_duration(num(d, "uptime_s"), up, sizeof(up)));
        printf("devices %s; jobs: %.0f queued, %.0f running, %.0f done, %.0f failed, %.0f "
               "cancelled\n",
               str(n, "devices"), num(n, "queued"), num(n, "running"), num(n, "done"),
               num(n, "failed"), num(n, "cancelled"));
        print_job_table(cJSON_GetObjectItemCaseSensitive(reply, "jobs"));
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

static int cmd_list(const command *cmd, int argc, char **argv)
{
    PARSE("jS", 0, 0);
    static const char *const states[] = {"queued", "running", "done", "failed", "cancelled"};
    int known = !a.state;
    for (size_t k = 0; !known && k < sizeof(states) / sizeof(states[0]); k++)
        known = strcmp(a.state, states[k]) == 0;
    if (!known)
        return usage_error(cmd, "unknown state ", a.state);
    cJSON *reply = call(op_request("list", NULL));
    if (!reply)
        return EXIT_FAIL;
    cJSON *jobs = cJSON_GetObjectItemCaseSensitive(reply, "jobs");
    for (cJSON *j = jobs ? jobs->child : NULL, *next; a.state && j; j = next) {
        next = j->next;
        if (strcmp(str(j, "state"), a.state) != 0)
            cJSON_Delete(cJSON_DetachItemViaPointer(jobs, j));
    }
    if (a.json)
        print_json(jobs);
    else
        print_job_table(jobs);
    cJSON_Delete(reply);
    return EXIT_OK;
}

static int cmd_watch(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, 1);
    return watch_job(a.pos[0], 0, a.json);
}

static int cmd_wait(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, 1);
    return watch_job(a.pos[0], 1, a.json ? 2 : 0);
}

static int cmd_logs(const command *cmd, int argc, char **argv)
{
    PARSE("fj", 1, 1);
    conn c;
    if (conn_open(&c) != 0)
        return EXIT_FAIL;
    cJSON *req = op_request("logs", a.pos[0]);
    if (a.follow)
        cJSON_AddTrueToObject(req, "follow");
    cJSON *reply = request(&c, req);
    if (!reply) {
        conn_close(&c);
        return EXIT_FAIL;
    }
    if (a.json && a.follow) { /* JSON lines: the log so far, then each line's event */
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        char *t = cJSON_PrintUnformatted(reply);
        if (t)
            puts(t);
        free(t);
    } else if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else {
        fputs(str(reply, "text"), stdout);
    }
    fflush(stdout);
    cJSON_Delete(reply);
    int rc = EXIT_OK;
    while (a.follow) {
        cJSON *ev = conn_read(&c);
        if (!ev) {
            rc = EXIT_FAIL;
            break;
        }
        int end = strcmp(str(ev, "event"), "end") == 0;
        if (!end && a.json) {
            char *t = cJSON_PrintUnformatted(ev);
            if (t)
                puts(t);
            free(t);
            fflush(stdout);
        } else if (!end) {
            puts(str(ev, "text"));
            fflush(stdout);
        }
        cJSON_Delete(ev);
        if (end)
            break;
    }
    conn_close(&c);
    return rc;
}

static int cmd_cancel(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, 1);
    cJSON *reply = call(op_request("cancel", a.pos[0]));
    if (!reply)
        return EXIT_FAIL;
    if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        if (!cJSON_GetObjectItemCaseSensitive(reply, "id"))
            cJSON_AddStringToObject(reply, "id", a.pos[0]);
        print_json(reply);
    } else if (strcmp(str(reply, "state"), "cancelled") == 0)
        printf("%s cancelled\n", a.pos[0]);
    else
        printf("%s: cancelling (its replicas stop now)\n", a.pos[0]);
    cJSON_Delete(reply);
    return EXIT_OK;
}

static int cmd_devices(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 0);
    cJSON *reply = call(op_request("devices", NULL));
    if (!reply)
        return EXIT_FAIL;
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(reply, "devices"), *d;
    if (a.json) {
        print_json(devs);
        devs = NULL;
    }
    cJSON_ArrayForEach(d, devs) {
        const char *job = str(d, "job");
        if (strcmp(str(d, "kind"), "cpu") == 0)
            printf("cpu   %d cores", cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "cores")));
        else if (strcmp(str(d, "kind"), "rank") == 0)
            printf("rank %.0f  pid %.0f, %.0f cores, %.0f GPUs, %s", num(d, "rank"), num(d, "pid"),
                   num(d, "cores"), num(d, "gpus"), str(d, "state"));
        else if (*str(d, "name"))
            printf("gpu %.0f  %s, %.1f GiB", num(d, "index"), str(d, "name"),
                   num(d, "memory_bytes") / (1024.0 * 1024 * 1024));
        else
            printf("gpu %.0f", num(d, "index"));
        printf("  %s%s", *job ? "running " : "idle", job);
        /* Until parled has re-executed itself (docs/gpu.md "Sticky device faults"). */
        if (*str(d, "faulted"))
            printf("  FAULTED: %s", str(d, "faulted"));
        putchar('\n');
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

static int cmd_version(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 0);
    cJSON *reply = call(op_request("version", NULL));
    if (!reply)
        return EXIT_FAIL;
    if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else {
        printf("parlectl %s\nparled %s (protocol %.0f)\n", PARLE_VERSION, str(reply, "version"),
               num(reply, "protocol"));
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

static int cmd_shutdown(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 0);
    cJSON *reply = call(op_request("shutdown", NULL));
    if (!reply)
        return EXIT_FAIL;
    if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else
        printf("parled is shutting down (%.0f running job(s) checkpoint and stop)\n",
           num(reply, "stopping_jobs"));
    cJSON_Delete(reply);
    return EXIT_OK;
}

static const command commands[] = {
    {"submit", cmd_submit,
     "submit FILE [-q] [--set key.path=value]... [--watch|--wait] [--json]\n"
     "Queue the job in FILE ('-' for stdin) and print its id (-q: only the id).\n"
     "--set overrides a field by its dotted path; the value is JSON if it parses,\n"
     "else a string. --watch then follows the job like 'watch', --wait blocks\n"
     "silently like 'wait'; either exits like 'wait' (0 done, 1 failed,\n"
     "3 cancelled, 4 parled gone); --wait --json prints the job as it ended."},
    {"status", cmd_status,
     "status [ID] [--json]\nOne job's status, or the daemon's and every job's."},
    {"list", cmd_list,
     "list [--state S] [--json]\nEvery job, oldest first; --state keeps those in state S\n"
     "(queued, running, done, failed, cancelled). 'ls' is the same command."},
    {"ls", cmd_list,
     "ls [--state S] [--json]\nEvery job, oldest first; --state keeps those in state S\n"
     "(queued, running, done, failed, cancelled). 'list' is the same command."},
    {"watch", cmd_watch,
     "watch ID [--json]\nFollow the job's progress until it ends (--json: the event lines).\n"
     "Exits like 'wait': 0 done, 1 failed, 3 cancelled, 4 parled gone."},
    {"logs", cmd_logs, "logs ID [-f] [--json]\nPrint the job's log; -f keeps printing until the job ends.\n"
     "--json: one object with the text (with -f: JSON lines, the log so far, then one\n"
     "object per line)."},
    {"cancel", cmd_cancel, "cancel ID [--json]\nCancel a queued job, or stop a running one at its next step."},
    {"wait", cmd_wait,
     "wait ID [--json]\nBlock until the job ends (--json: then print the job as it ended).\n"
     "Exit status: 0 it ended done, 1 it failed (or\n"
     "parled refused, e.g. no such job), 2 usage error, 3 it was cancelled, 4 parled\n"
     "is not running or the connection was lost before the job ended."},
    {"export", cmd_export,
     "export ID -o FILE [--json] (or: export ID FILE)\nWrite the master of the job's last evaluation "
     "(weights and BN statistics,\nsafetensors) to FILE. parled sends the bytes over the socket "
     "and parlectl writes\nFILE itself, with your permissions, atomically (a temporary beside "
     "it, fsync,\nrename), after checking the daemon's CRC-32; FILE is never left half written."},
    {"plot", cmd_plot,
     "plot ID [ID...] [-o FILE] [--json]\nDraw train loss, test error and learning rate against passes "
     "over the data\n(one colour per job) as an SVG, to FILE (default curves.svg; '-': stdout)."},
    {"devices", cmd_devices, "devices [--json]\nThe daemon's devices and the jobs on them."},
    {"version", cmd_version, "version [--json]\nThe versions of parlectl and parled."},
    {"shutdown", cmd_shutdown,
     "shutdown [--json]\nStop parled; running jobs checkpoint at a step boundary first and resume when\n"
     "parled starts again."},
};

int main(int argc, char **argv)
{
    const char *env = getenv("PARLE_SOCKET");
    if (env && *env)
        snprintf(socket_path, sizeof(socket_path), "%s", env);
    else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
        snprintf(socket_path, sizeof(socket_path), "%s/parled.sock", env);
    else
        snprintf(socket_path, sizeof(socket_path), "/run/parled.sock");
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("parlectl %s\n", PARLE_VERSION);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
            snprintf(socket_path, sizeof(socket_path), "%s", argv[++i]);
        } else if (strncmp(argv[i], "--socket=", 9) == 0) {
            snprintf(socket_path, sizeof(socket_path), "%s", argv[i] + 9);
        } else {
            fprintf(stderr, "parlectl: unknown option %s; try 'parlectl --help'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (i == argc) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(argv[i], commands[k].name) == 0)
            return commands[k].run(&commands[k], argc - i - 1, argv + i + 1);
    fprintf(stderr, "parlectl: unknown command %s; try 'parlectl --help'\n", argv[i]);
    return EXIT_USAGE;
}
