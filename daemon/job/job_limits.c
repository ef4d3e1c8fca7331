/* A job's time limit and dependencies as written (jobconfig.h): read here,
 * for the job file's validator, parled's flags and the queue alike. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobconfig.h"

#define MAX_DURATION_S (10 * 366 * 86400.0)

/* Digits at *at, at most `max`, into *v: 1, or 0 when none or too many. */
static int digits(const char **at, int max, long *v)
{
    const char *s = *at;
    int n = 0;
    *v = 0;
    for (; isdigit((unsigned char)*s) && n < max; s++, n++)
        *v = *v * 10 + (*s - '0');
    *at = s;
    return n > 0 && !isdigit((unsigned char)*s);
}

int job_duration_read(const char *s, double *seconds)
{
    if (!strchr(s, ':')) { /* plain seconds */
        char *end;
        double x = strtod(s, &end);
        if (!*s || isspace((unsigned char)*s) || *end || !(x >= 0 && x <= MAX_DURATION_S))
            return -1;
        *seconds = x;
        return 0;
    }
    long d = 0, h, m, sec;
    const char *at = s;
    if (strchr(s, '-')) {
        if (!digits(&at, 4, &d) || *at++ != '-')
            return -1;
    }
    if (!digits(&at, 2, &h) || *at++ != ':' || !digits(&at, 2, &m) || *at++ != ':' ||
        !digits(&at, 2, &sec) || *at || m > 59 || sec > 59 || h > 23)
        return -1;
    double x = ((double)d * 24 + (double)h) * 3600 + (double)m * 60 + (double)sec;
    if (x > MAX_DURATION_S)
        return -1;
    *seconds = x;
    return 0;
}

int job_after_ids(const char *after, char ids[][16], char *why, size_t whylen)
{
    int n = 0;
    for (const char *at = after; *at;) {
        const char *start = at;
        if ((*at != 'j' && *at != 's') || !isdigit((unsigned char)at[1])) {
            snprintf(why, whylen, "expected job ids (j0001) or sweep ids (s0001) separated by "
                     "commas");
            return -1;
        }
        for (at++; isdigit((unsigned char)*at); at++)
            ;
        if (at - start >= 16) {
            snprintf(why, whylen, "an id of %d characters", (int)(at - start));
            return -1;
        }
        if (n == JOB_MAX_AFTER) {
            snprintf(why, whylen, "at most %d ids", JOB_MAX_AFTER);
            return -1;
        }
        memcpy(ids[n], start, (size_t)(at - start));
        ids[n++][at - start] = '\0';
        if (*at == ',' && at[1])
            at++;
        else if (*at) {
            snprintf(why, whylen, "expected a comma after %s", ids[n - 1]);
            return -1;
        }
    }
    return n;
}
