/* parled's log: one line on stderr per event, with time and level. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

enum log_level server_log_level = LOG_INFO;

void server_log(enum log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level > server_log_level)
        return;
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s parled: %s: ", stamp, names[level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
