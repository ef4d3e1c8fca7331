/* parlectl's output: fields of replies, numbers and durations as text, a
 * job's status and the job table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "ctl.h"

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

void print_job(const cJSON *j)
{
    char a[32], b[32], c[32], d[32];
    const cJSON *owner = cJSON_GetObjectItemCaseSensitive(j, "owner");
    printf("%s  %s  %s  (%s)  priority %.0f\n", str(j, "id"), str(j, "name"), str(j, "state"),
           str(owner, "user"), num(j, "priority"));
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
    if (num(j, "reseeds") > 0)
        printf("  replicas re-seeded: %.0f\n", num(j, "reseeds"));
    if (strcmp(str(j, "state"), "queued") == 0 || strcmp(str(j, "state"), "preempted") == 0 ||
        strcmp(str(j, "state"), "held") == 0) {
        time_t sub = (time_t)num(j, "submitted_at");
        struct tm tm;
        char when[32] = "-";
        if (sub > 0 && localtime_r(&sub, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        printf("  place: priority %.0f, %s, owner's recent use %.4f device-hours, submitted "
               "%s\n", num(j, "priority"),
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "resuming"))
                   ? "resumes a checkpoint" : "starts afresh",
               num(j, "owner_usage_s") / 3600, when);
    }
    if (*str(j, "held_by"))
        printf("  held by %s%s\n", str(j, "held_by"),
               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "admin_hold"))
                   ? " (an admin hold: only an admin releases it)" : "");
    if (*str(j, "waiting"))
        printf("  waiting: %s\n", str(j, "waiting"));
    if (*str(j, "save_error"))
        printf("  saving: %s\n", str(j, "save_error"));
    if (*str(j, "preempted_by"))
        printf("  last preempted by %s, %s ago\n", str(j, "preempted_by"),
               fmt_duration(time(NULL) - num(j, "preempted_at"), a, sizeof(a)));
    if (*str(j, "error"))
        printf("  error: %s\n", str(j, "error"));
}

/* The table's last column: why a queued job waits, or what a job could
 * not write. */
static const char *waiting_or_saving(const cJSON *j)
{
    static char line[1100];
    if (*str(j, "waiting") || !*str(j, "save_error"))
        return str(j, "waiting");
    snprintf(line, sizeof line, "saving: %s", str(j, "save_error"));
    return line;
}

void print_job_table(const cJSON *jobs)
{
    char a[32], b[32];
    printf("%-8s %-10s %4s %-12s %-28s %-14s %-9s %-10s %-8s %s\n", "ID", "STATE", "PRI",
           "USER", "NAME", "ALGORITHM", "EPOCH", "TEST ERR", "ELAPSED", "WAITING FOR");
    const cJSON *j;
    cJSON_ArrayForEach(j, jobs) {
        char algo[32], epoch[24];
        snprintf(algo, sizeof(algo), "%s x%.0f", str(j, "algorithm"), num(j, "replicas"));
        snprintf(epoch, sizeof(epoch), "%.0f/%.0f", num(j, "epoch"), num(j, "epochs"));
        printf("%-8s %-10s %4.0f %-12.12s %-28.28s %-14s %-9s %-10s %-8s %s\n", str(j, "id"),
               str(j, "state"), num(j, "priority"),
               str(cJSON_GetObjectItemCaseSensitive(j, "owner"), "user"), str(j, "name"), algo,
               epoch, fmt_percent(num(j, "test_error"), a, sizeof(a)),
               fmt_duration(num(j, "elapsed_s"), b, sizeof(b)), waiting_or_saving(j));
    }
}
