/* parlectl sweep (docs/sweeps.md): the sweep file and the base job file it
 * names are read here, with the client's rights, and sent as one object
 * (`sweep_submit`); the daemon expands and keeps the sweep. Also a sweep's
 * status table, the list, cancel, and a sweep's points (for plot.c and
 * tensorboard.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "sweep_keys.h"

/* The sweep's "base", when it names a file: that job file read in its
 * place, a relative path taken from the sweep file's folder. 0, or -1 after
 * a message. */
static int read_base(cJSON *sweep, const char *file)
{
    const char *base = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sweep, "base"));
    if (!base)
        return 0; /* an object in place, or an error the daemon names */
    char path[8192];
    const char *slash = strrchr(file, '/');
    if (base[0] == '/' || !slash || strcmp(file, "-") == 0)
        snprintf(path, sizeof path, "%s", base);
    else
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - file), file, base);
    /* Say where the name comes from: the path may be no file the user typed. */
    if (access(path, R_OK) != 0)
        return fail("cannot read %s: %s (the sweep's \"base\" names it)", path, strerror(errno));
    cJSON *job = read_json_object(path, "a job file");
    if (!job)
        return -1;
    cJSON_ReplaceItemInObjectCaseSensitive(sweep, "base", job);
    return 0;
}

/* The plural's "s" after a count of n. */
static const char *plural(double n)
{
    return n == 1 ? "" : "s";
}

/* --set on the sweep's base job. A key the grid varies is refused: the
 * grid's values would replace it at every point. `name` names the sweep too
 * (the sweep names its jobs after itself, so the file's name would hide the
 * base job's). 0, or -1 after a message. */
static int set_base(cJSON *sweep, const args *a)
{
    cJSON *base = cJSON_GetObjectItemCaseSensitive(sweep, "base");
    const cJSON *grid = cJSON_GetObjectItemCaseSensitive(sweep, "grid"), *k;
    if (!cJSON_IsObject(grid))
        grid = NULL; /* the daemon names a bad grid */
    if (a->nsets > 0 && !cJSON_IsObject(base))
        return fail("--set: the sweep file has no base job to set keys in");
    for (int i = 0; i < a->nsets; i++) {
        const char *eq = strchr(a->sets[i], '=');
        size_t plen = eq ? (size_t)(eq - a->sets[i]) : 0;
        cJSON_ArrayForEach(k, grid) {
            if (eq && sweep_keys_overlap(k->string, strlen(k->string), a->sets[i], plen))
                return fail("--set %.*s: the sweep's grid varies %s", (int)plen, a->sets[i],
                            k->string);
        }
        if (set_path(base, a->sets[i]) != 0)
            return -1;
        if (plen == 4 && strncmp(a->sets[i], "name", 4) == 0 &&
            cJSON_GetObjectItemCaseSensitive(sweep, "name")) {
            cJSON_ReplaceItemInObjectCaseSensitive(
                sweep, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(base, "name"), 1));
        }
    }
    return 0;
}

static int sweep_submit(const char *file, const args *a)
{
    cJSON *sweep = read_json_object(file, "a sweep file");
    if (!sweep || read_base(sweep, file) != 0 || set_base(sweep, a) != 0) {
        cJSON_Delete(sweep);
        return EXIT_FAIL;
    }
    cJSON *req = op_request("sweep_submit", NULL);
    cJSON_AddItemToObject(req, "sweep", sweep);
    cJSON *reply = call(req);
    if (!reply && conn_lost)
        fprintf(stderr, "parlectl: parled went away before answering: the sweep may have been "
                "recorded and its jobs queued at parled's next start; 'parlectl sweep ls' lists "
                "the sweeps\n");
    if (!reply)
        return EXIT_FAIL;
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
    if (a->json)
        print_json(reply);
    else if (a->quiet)
        puts(str(reply, "id"));
    else
        printf("sweep %s (%s): %.0f point%s x %.0f seed%s, %.0f job%s queued\n", str(reply, "id"),
               str(reply, "name"), num(reply, "npoints"), plural(num(reply, "npoints")),
               num(reply, "seeds"), plural(num(reply, "seeds")), num(reply, "jobs"),
               plural(num(reply, "jobs")));
    cJSON_Delete(reply);
    return EXIT_OK;
}

/* "4 done, 1 running, ..." of a sweep's counts, each job counted once: the
 * jobs the early stop cancelled (counts.early_stopped, a part of
 * counts.cancelled) as early_stopped, the others as cancelled. */
static void print_counts(const cJSON *counts)
{
    static const char *const states[] = {"queued", "running", "done", "failed", "cancelled",
                                         "early_stopped"};
    const char *sep = "";
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        double n = num(counts, states[i]);
        if (strcmp(states[i], "cancelled") == 0)
            n -= num(counts, "early_stopped");
        if (n > 0) {
            printf("%s%.0f %s", sep, n, states[i]);
            sep = ", ";
        }
    }
}

/* Columns on a terminal: UTF-8 characters (a continuation byte starts none;
 * "±" is two bytes, one column). */
static int display_width(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* "  " and s, padded with spaces to `width` columns. */
static void print_cell(const char *s, int width)
{
    printf("  %s%*s", s, width > display_width(s) ? width - display_width(s) : 0, "");
}

/* A value of a point as a table cell: its JSON, at most 24 bytes. */
static void cell(const cJSON *v, char *out, size_t len)
{
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(out, len, "%.24s", text ? text : "-");
    free(text);
}

static void print_points(const cJSON *sw)
{
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(sw, "keys");
    const cJSON *points = cJSON_GetObjectItemCaseSensitive(sw, "points"), *p, *k;
    int width[16] = {0}, nk = 0;
    char buf[32];
    cJSON_ArrayForEach(k, keys) {
        if (nk == 16)
            break;
        width[nk] = display_width(k->valuestring);
        cJSON_ArrayForEach(p, points) {
            cell(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "values"),
                                                  k->valuestring), buf, sizeof buf);
            width[nk] = display_width(buf) > width[nk] ? display_width(buf) : width[nk];
        }
        nk++;
    }
    printf("  %-6s", "POINT");
    nk = 0;
    cJSON_ArrayForEach(k, keys)
        if (nk < 16)
            print_cell(k->valuestring, width[nk++]);
    printf("  %-13s  %-5s  %-17s  %-8s  %s\n", "STATE", "DONE", "TEST ERROR", "WALL", "JOBS");
    cJSON_ArrayForEach(p, points) {
        char mean[32], sd[32], err[80], wall[32], done[16];
        printf("%c %-6.0f", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "best")) ? '*' : ' ',
               num(p, "point"));
        nk = 0;
        cJSON_ArrayForEach(k, keys) {
            if (nk == 16)
                break;
            cell(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "values"),
                                                  k->valuestring), buf, sizeof buf);
            print_cell(buf, width[nk++]);
        }
        fmt_percent(num(p, "test_error_mean"), mean, sizeof mean);
        fmt_percent(num(p, "test_error_std"), sd, sizeof sd);
        if (strcmp(sd, "-") == 0)
            snprintf(err, sizeof err, "%s", mean);
        else
            snprintf(err, sizeof err, "%s ± %s", mean, sd);
        const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(p, "jobs"), *j;
        snprintf(done, sizeof done, "%.0f/%d", num(p, "done"), cJSON_GetArraySize(jobs));
        print_cell(str(p, "state"), 13);
        print_cell(done, 5);
        print_cell(err, 17);
        print_cell(fmt_duration(num(p, "wall_s"), wall, sizeof wall), 8);
        printf("  ");
        const char *sep = "";
        cJSON_ArrayForEach(j, jobs) {
            printf("%s%s", sep, cJSON_GetStringValue(j));
            sep = ",";
        }
        putchar('\n');
    }
}

static int sweep_status(const char *id, const args *a)
{
    cJSON *reply = call(op_request("sweep_status", id));
    if (!reply)
        return EXIT_FAIL;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(reply, "sweep");
    char t[32], best[32];
    if (a->json) {
        print_json(sw);
    } else {
        const cJSON *owner = cJSON_GetObjectItemCaseSensitive(sw, "owner");
        printf("sweep %s (%s) of %s: %s; %.0f point%s x %.0f seed%s, %.0f job%s: ",
               str(sw, "id"), str(sw, "name"), str(owner, "user"), str(sw, "state"),
               num(sw, "npoints"), plural(num(sw, "npoints")), num(sw, "seeds"),
               plural(num(sw, "seeds")), num(sw, "jobs"), plural(num(sw, "jobs")));
        print_counts(cJSON_GetObjectItemCaseSensitive(sw, "counts"));
        printf("; %s\n", fmt_duration(num(sw, "elapsed_s"), t, sizeof t));
        const cJSON *early = cJSON_GetObjectItemCaseSensitive(sw, "early_stop");
        if (cJSON_IsObject(early))
            printf("early stop after %.0f epoch(s), margin %s\n", num(early, "after_epochs"),
                   fmt_percent(num(early, "margin"), t, sizeof t));
        print_points(sw);
        if (isfinite(num(sw, "best")))
            printf("best: point %.0f, test error %s\n", num(sw, "best"),
                   fmt_percent(num(sw, "best_test_error"), best, sizeof best));
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

static int sweep_list(const args *a)
{
    cJSON *reply = call(op_request("sweep_list", NULL));
    if (!reply)
        return EXIT_FAIL;
    const cJSON *sweeps = cJSON_GetObjectItemCaseSensitive(reply, "sweeps"), *s;
    if (a->json) {
        print_json(sweeps);
    } else {
        printf("%-7s %-24s %-12s %-10s %6s %5s %5s  %s\n", "ID", "NAME", "OWNER", "STATE", "POINTS",
               "JOBS", "DONE", "BEST");
        cJSON_ArrayForEach(s, sweeps) {
            char best[64] = "-", e[32];
            if (isfinite(num(s, "best")))
                snprintf(best, sizeof best, "point %.0f, %s", num(s, "best"),
                         fmt_percent(num(s, "best_test_error"), e, sizeof e));
            printf("%-7s %-24.24s %-12.12s %-10s %6.0f %5.0f %5.0f  %s\n", str(s, "id"),
                   str(s, "name"), str(cJSON_GetObjectItemCaseSensitive(s, "owner"), "user"),
                   str(s, "state"), num(s, "npoints"), num(s, "jobs"),
                   num(cJSON_GetObjectItemCaseSensitive(s, "counts"), "done"), best);
        }
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

static int sweep_cancel(const char *id, const args *a)
{
    cJSON *reply = call(op_request("sweep_cancel", id));
    if (!reply)
        return EXIT_FAIL;
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
    if (a->json)
        print_json(reply);
    else
        printf("sweep %s cancelled: %.0f job(s) stop\n", id, num(reply, "cancelled_jobs"));
    cJSON_Delete(reply);
    return EXIT_OK;
}

int cmd_sweep(const command *cmd, int argc, char **argv)
{
    PARSE("jqs", 1, 2);
    const char *what = a.pos[0];
    int takes_id = strcmp(what, "status") == 0 || strcmp(what, "cancel") == 0 ||
                   strcmp(what, "rm") == 0;
    int is_ls = strcmp(what, "ls") == 0 || strcmp(what, "list") == 0;
    if (takes_id && a.npos != 2)
        return usage_error(cmd, what, " needs a sweep id");
    if (takes_id && !is_sweep_id(a.pos[1]))
        return usage_error(cmd, "not a sweep id (s0001, ...): ", a.pos[1]);
    if ((is_ls || !takes_id) && a.npos != 1)
        return usage_error(cmd, "unexpected argument ", a.pos[1]);
    if ((is_ls || takes_id) && a.nsets > 0)
        return usage_error(cmd, "--set is for a sweep file: ", what);
    if (is_ls)
        return sweep_list(&a);
    if (strcmp(what, "status") == 0)
        return sweep_status(a.pos[1], &a);
    if (strcmp(what, "cancel") == 0)
        return sweep_cancel(a.pos[1], &a);
    if (strcmp(what, "rm") == 0) {
        cJSON *reply = remove_one("sweep_rm", a.pos[1], a.json);
        if (reply && a.json)
            print_json(reply);
        cJSON_Delete(reply);
        return reply ? EXIT_OK : EXIT_FAIL;
    }
    return sweep_submit(what, &a);
}

const cJSON *sweep_points(conn *c, const char *id, cJSON **reply)
{
    *reply = request(c, op_request("sweep_status", id));
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(*reply, "sweep");
    return *reply ? cJSON_GetObjectItemCaseSensitive(sw, "points") : NULL;
}
