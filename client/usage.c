/* parlectl's commands on who used the devices (docs/architecture.md,
 * "Scheduling"): usage (fair share's decayed use per owner, as now) and
 * history (device-hours per owner from parled's accounting record). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

/* The reply as JSON (without "ok") or, as text, by human(reply). */
static int show(const args *a, cJSON *reply, void (*human)(const cJSON *reply))
{
    if (!reply)
        return EXIT_FAIL;
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
    if (a->json)
        print_json(reply);
    else
        human(reply);
    cJSON_Delete(reply);
    return EXIT_OK;
}

static void usage_table(const cJSON *reply)
{
    printf("fair share: device use halves every %.6g h; least used goes first\n",
           num(reply, "half_life_s") / 3600);
    printf("%-16s %10s %16s %7s %8s %7s\n", "USER", "UID", "DEVICE-HOURS", "SHARE", "RUNNING",
           "QUEUED");
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(reply, "owners"))
        printf("%-16.16s %10.0f %16.4f %6.1f%% %8.0f %7.0f\n", str(o, "user"), num(o, "uid"),
               num(o, "device_seconds") / 3600, 100 * num(o, "share"), num(o, "running"),
               num(o, "queued"));
}

int cmd_usage(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 0);
    return show(&a, call(op_request("usage", NULL)), usage_table);
}

/* --since T: unix seconds, an age (30m, 12h, 7d: that long before now) or a
 * local date (2026-01-31, 2026-01-31T08:00[:SS]) into *out: 0, or -1. */
static int parse_since(const char *s, double now, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end != s && v >= 0 && isfinite(v)) {
        const double unit = strcmp(end, "s") == 0   ? 1
                            : strcmp(end, "m") == 0 ? 60
                            : strcmp(end, "h") == 0 ? 3600
                            : strcmp(end, "d") == 0 ? 86400
                                                    : 0;
        if (*end == '\0') { /* unix seconds */
            *out = v;
            return 0;
        }
        if (unit > 0 && v * unit <= now) { /* that long ago */
            *out = now - v * unit;
            return 0;
        }
    }
    /* A local date, with a time of day or not. */
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = strptime(s, "%Y-%m-%d", &tm);
    if (rest && *rest == 'T')
        rest = strptime(rest + 1, "%H:%M", &tm);
    if (rest && *rest == ':')
        rest = strptime(rest + 1, "%S", &tm);
    if (!rest || *rest)
        return -1;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    if (t == (time_t)-1 || t < 0)
        return -1;
    *out = (double)t;
    return 0;
}

static void history_table(const cJSON *reply)
{
    char when[64] = "the start of the record";
    time_t t = (time_t)num(reply, "since");
    struct tm tm;
    if (t > 0 && localtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    printf("device-hours per owner, runs ended since %s\n", when);
    printf("%-16s %10s %8s %16s\n", "USER", "UID", "RUNS", "DEVICE-HOURS");
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(reply, "owners"))
        printf("%-16.16s %10.0f %8.0f %16.4f\n", str(o, "user"), num(o, "uid"), num(o, "runs"),
               num(o, "device_hours"));
    printf("%-16s %10s %8s %16.4f\n", "total", "", "", num(reply, "total_device_hours"));
    if (num(reply, "skipped_lines") > 0)
        printf("(%.0f damaged line(s) of the record skipped: see parled's log)\n",
               num(reply, "skipped_lines"));
}

int cmd_history(const command *cmd, int argc, char **argv)
{
    PARSE("juT", 0, 0);
    double since = 0;
    if (a.since && parse_since(a.since, (double)time(NULL), &since) != 0)
        return usage_error(cmd, "--since: expected unix seconds, an age (30m, 12h, 7d) or a "
                           "date (2026-01-31, 2026-01-31T08:00): ", a.since);
    cJSON *req = op_request("history", NULL);
    if (a.user)
        cJSON_AddStringToObject(req, "user", a.user);
    if (since > 0)
        cJSON_AddNumberToObject(req, "since", since);
    return show(&a, call(req), history_table);
}
