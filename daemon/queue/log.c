/* parled's log: one line on stderr per event, with time and level. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level server_log_level = LOG_INFO;

static void log_line(enum log_level level, const char *fmt, va_list ap)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char line[4096];
    time_t t = time(NULL);
    struct tm tm;
    size_t n = strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
    n += (size_t)snprintf(line + n, sizeof line - n, " parled: %s: ", names[level]);
    int body = vsnprintf(line + n, sizeof line - n, fmt, ap);
    n = body < 0 ? n : n + (size_t)body;
    if (n > sizeof line - 2) { /* cut long lines, and say so */
        n = sizeof line - 2;
        memcpy(line + n - 3, "...", 3);
    }
    line[n++] = '\n';
    /* One write per line: under mpirun the ranks share one stderr, and a
     * line written in pieces interleaves with the other ranks' lines. */
    ssize_t rc = write(STDERR_FILENO, line, n);
    (void)rc;
}

void server_log(enum log_level level, const char *fmt, ...)
{
    if (level > server_log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_line(level, fmt, ap);
    va_end(ap);
}

/* The refusals of one uid in its current minute. The table is small: a
 * user past it takes the slot of the one whose minute began longest ago. */
#define REFUSAL_USERS 64
typedef struct refusals {
    unsigned uid;
    int used;
    double since;       /* the minute's start */
    long logged, unlogged;
} refusals;
static refusals refusal_table[REFUSAL_USERS];

static void say_unlogged(refusals *r)
{
    if (r->unlogged > 0)
        server_log(LOG_WARN, "uid %u: %ld more refusals were not logged (at most %d a "
                   "minute)", r->uid, r->unlogged, LOG_REFUSALS_PER_MINUTE);
    r->unlogged = 0;
}

static refusals *refusals_of(unsigned uid)
{
    refusals *oldest = &refusal_table[0];
    for (int i = 0; i < REFUSAL_USERS; i++) {
        refusals *r = &refusal_table[i];
        if (r->used && r->uid == uid)
            return r;
        if (!r->used || (oldest->used && r->since < oldest->since))
            oldest = r;
    }
    if (oldest->used)
        say_unlogged(oldest);
    *oldest = (refusals){.uid = uid, .used = 1, .since = -1e300};
    return oldest;
}

void server_log_refusal(double now, unsigned uid, enum log_level level, const char *fmt, ...)
{
    if (level > server_log_level)
        return;
    refusals *r = refusals_of(uid);
    if (now - r->since >= 60) {
        say_unlogged(r);
        r->since = now;
        r->logged = 0;
    }
    if (r->logged >= LOG_REFUSALS_PER_MINUTE) {
        if (r->unlogged++ == 0)
            server_log(LOG_WARN, "uid %u: %d refusals within a minute: the rest of this "
                       "minute's are counted, not logged", uid, LOG_REFUSALS_PER_MINUTE);
        return;
    }
    r->logged++;
    va_list ap;
    va_start(ap, fmt);
    log_line(level, fmt, ap);
    va_end(ap);
}
