/* `parlectl top`'s picture (top.h): the daemon's `top` reply as lines of at
 * most `width` columns, in at most `height` lines: a header, one line per
 * device, the running jobs, the queued jobs with why each waits, and each
 * owner's use. Plain text; top.c puts it on the terminal. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top.h"

typedef struct screen {
    char *buf;
    size_t len, cap;
    int lines, width, height;
} screen;

/* One line, cut at the width (bytes: the text is ASCII, but for user
 * names and reasons, which are cut too). */
static void line(screen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(screen *s, const char *fmt, ...)
{
    if (s->lines >= s->height)
        return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = strlen(text);
    if (n > (size_t)s->width)
        n = (size_t)s->width;
    while (n > 0 && text[n - 1] == ' ')
        n--;
    if (s->len + n + 2 > s->cap) {
        size_t cap = 2 * s->cap + n + 2;
        char *b = realloc(s->buf, cap);
        if (!b)
            return;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, text, n);
    s->len += n;
    s->buf[s->len++] = '\n';
    s->buf[s->len] = '\0';
    s->lines++;
}

static const char *bytes(double b, char *out, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(out, len, u ? "%.1f %s" : "%.0f %s", b, units[u]);
    return out;
}

static const char *duration(double s, char *out, size_t len)
{
    if (!isfinite(s) || s < 0)
        snprintf(out, len, "-");
    else if (s < 60)
        snprintf(out, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(out, len, "%.0fm%02.0fs", floor(s / 60), fmod(floor(s), 60));
    else if (s < 86400)
        snprintf(out, len, "%.0fh%02.0fm", floor(s / 3600), fmod(floor(s / 60), 60));
    else
        snprintf(out, len, "%.0fd%02.0fh", floor(s / 86400), fmod(floor(s / 3600), 24));
    return out;
}

static double field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *text(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

static int mine(const top_options *opt, const cJSON *j, double viewer_uid)
{
    return !opt->mine_only || field(j, "uid") == viewer_uid;
}

static const top_options *sort_opt;

static int by_key(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    double fx, fy;
    switch (sort_opt->sort) {
    case TOP_SORT_OWNER: {
        int c = strcmp(text(x, "owner"), text(y, "owner"));
        if (c)
            return c;
        break;
    }
    case TOP_SORT_PROGRESS:
    case TOP_SORT_SPEED:
        fx = field(x, sort_opt->sort == TOP_SORT_PROGRESS ? "progress" : "images_per_sec");
        fy = field(y, sort_opt->sort == TOP_SORT_PROGRESS ? "progress" : "images_per_sec");
        fx = isfinite(fx) ? fx : -1;
        fy = isfinite(fy) ? fy : -1;
        if (fx != fy)
            return fx < fy ? 1 : -1; /* most first */
        break;
    default:
        break;
    }
    return strcmp(text(x, "id"), text(y, "id"));
}

const char *top_sort_name(enum top_sort s)
{
    static const char *const names[] = {"id", "owner", "progress", "speed"};
    return names[s];
}

static void header(screen *s, const cJSON *r)
{
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(r, "jobs"), *d;
    int free_dev = 0, held_dev = 0;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(r, "devices"))
        *(field(d, "njobs") > 0 ? &held_dev : &free_dev) += 1;
    char up[32], wait[32];
    line(s, "parled %s  up %s  devices %d free, %d held  queue %.0f (%.0f held)  running %.0f",
         text(r, "version"), duration(field(r, "uptime_s"), up, sizeof up), free_dev, held_dev,
         field(jobs, "queued"), field(jobs, "held"), field(jobs, "running"));
    line(s, "jobs: %.0f done, %.0f failed, %.0f cancelled, %.0f timeout; longest wait %s",
         field(jobs, "done"), field(jobs, "failed"), field(jobs, "cancelled"),
         field(jobs, "timeout"), duration(field(r, "oldest_wait_s"), wait, sizeof wait));
}

static void devices(screen *s, const cJSON *r)
{
    const cJSON *d;
    line(s, "%s", "");
    line(s, "%-6s %5s %10s %10s  %s", "DEVICE", "SHARE", "MEM HELD", "MEM PEAK", "JOBS");
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(r, "devices")) {
        char held[32], peak[32];
        const char *ids = text(d, "jobs");
        line(s, "%-6s %4.0f%% %10s %10s  %s%s", text(d, "device"), 100 * field(d, "share"),
             bytes(field(d, "memory_held_bytes"), held, sizeof held),
             bytes(field(d, "memory_peak_bytes"), peak, sizeof peak), ids[0] ? ids : "idle",
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "faulted")) ? "  FAULTED" : "");
    }
}

static void running(screen *s, const cJSON *r, const top_options *opt, double uid)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "running"), *j;
    int n = 0, total = cJSON_GetArraySize(a);
    const cJSON **rows = calloc((size_t)(total > 0 ? total : 1), sizeof *rows);
    if (!rows)
        return;
    cJSON_ArrayForEach(j, a)
        if (mine(opt, j, uid))
            rows[n++] = j;
    sort_opt = opt;
    qsort(rows, (size_t)n, sizeof *rows, by_key);
    line(s, "%s", "");
    line(s, "RUNNING %d (sort: %s)", n, top_sort_name(opt->sort));
    line(s, "%-7s %-9s %-9s %-17s %8s %7s %8s", "ID", "OWNER", "RULE", "PROGRESS", "IMG/S", "ETA",
         "TEST ERR");
    for (int i = 0; i < n; i++) {
        j = rows[i];
        char bar[32], ips[32], eta[32], err[32];
        double p = field(j, "progress");
        if (isfinite(p)) {
            int filled = (int)(fmin(fmax(p, 0), 1) * 10 + 0.5);
            snprintf(bar, sizeof bar, "[%.*s%.*s] %3.0f%%", filled, "##########", 10 - filled,
                     "..........", 100 * p);
        } else {
            snprintf(bar, sizeof bar, "(not shown)");
        }
        line(s, "%-7s %-9.9s %-9.9s %-17s %8s %7s %8s", text(j, "id"), text(j, "owner"),
             text(j, "rule"), bar, fmt_num(field(j, "images_per_sec"), "%.0f", ips, sizeof ips),
             duration(field(j, "eta_s"), eta, sizeof eta),
             fmt_percent(field(j, "test_error"), err, sizeof err));
    }
    free(rows);
}

static void owners(screen *s, const cJSON *r, const top_options *opt, double uid)
{
    const cJSON *w;
    line(s, "%s", "");
    line(s, "%-12s %7s %6s %12s %6s", "OWNER", "RUNNING", "QUEUED", "DEVICE-H", "SHARE");
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(r, "owners"))
        if (mine(opt, w, uid))
            line(s, "%-12.12s %7.0f %6.0f %12.2f %5.0f%%", text(w, "user"), field(w, "running"),
                 field(w, "queued"), field(w, "device_seconds") / 3600, 100 * field(w, "share"));
}

/* The queued jobs in the lines left, keeping `keep` for what follows. */
static void queued(screen *s, const cJSON *r, const top_options *opt, double uid, int keep)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "queued"), *j;
    int shown = 0, listed = 0;
    cJSON_ArrayForEach(j, a)
        listed += mine(opt, j, uid);
    double more = field(r, "queued_not_shown");
    line(s, "%s", "");
    line(s, "QUEUED %d%s", listed, more > 0 && !opt->mine_only ? " (the first; more below)" : "");
    line(s, "%-7s %-9s %-9s %-9s %7s  %s", "ID", "OWNER", "RULE", "STATE", "WAITED", "WHY");
    int room = s->height - s->lines - keep;
    cJSON_ArrayForEach(j, a) {
        if (!mine(opt, j, uid))
            continue;
        if (shown == room - 1 && listed - shown > 1) {
            line(s, "... %d more", listed - shown);
            break;
        }
        char w[32];
        const char *why = text(j, "waiting");
        line(s, "%-7s %-9.9s %-9.9s %-9.9s %7s  %s", text(j, "id"), text(j, "owner"),
             text(j, "rule"), text(j, "state"), duration(field(j, "wait_s"), w, sizeof w),
             why[0] ? why : "-");
        shown++;
    }
    if (more > 0 && !opt->mine_only)
        line(s, "... and %.0f more queued", more);
}

char *top_render(const cJSON *reply, const top_options *opt, int width, int height)
{
    /* The keys' line last, always shown on the terminal. */
    screen s = {.width = width, .height = height - (opt->key_help != 0), .cap = 8192};
    s.buf = malloc(s.cap);
    if (!s.buf)
        return NULL;
    s.buf[0] = '\0';
    const cJSON *viewer = cJSON_GetObjectItemCaseSensitive(reply, "viewer");
    const double uid = field(viewer, "uid");
    header(&s, reply);
    devices(&s, reply);
    running(&s, reply, opt, uid);
    int nowners = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(reply, "owners"))
        nowners += mine(opt, w, uid);
    queued(&s, reply, opt, uid, (nowners < 8 ? nowners : 8) + 3);
    owners(&s, reply, opt, uid);
    if (opt->key_help) {
        s.height = height;
        char help[160];
        snprintf(help, sizeof help, "q quit  s sort (%s)  m %s", top_sort_name(opt->sort),
                 opt->mine_only ? "everyone's jobs" : "my jobs only");
        line(&s, "%s", help);
    }
    return s.buf;
}
