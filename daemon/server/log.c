/* parled's log: one line on stderr per event, with time and level. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level server_log_level = LOG_INFO;

void server_log(enum log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level > server_log_level)
        return;
    char line[4096];
    time_t t = time(NULL);
    struct tm tm;
    size_t n = strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
    n += (size_t)snprintf(line + n, sizeof line - n, " parled: %s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    int body = vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
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
