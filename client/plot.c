/* parlectl plot: each job's metrics.jsonl, fetched over the socket with the
 * `metrics` op (metrics.c), and a sweep's points (their jobs' curves, the
 * seeds of a point as a band), drawn as an SVG by plot_svg.c. The file is written atomically (a new temporary of a random
 * name beside it, fsync, rename) so a browser reloading it never sees half
 * a plot, and no file planted at a guessable name is ever written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "plot_svg.h"

/* One metrics line into pj: train loss and lr from progress lines, the
 * master's test error and loss from eval lines, all against data_passes. */
static int plot_line(void *ctx, const cJSON *m)
{
    plot_job *pj = ctx;
    double x = num(m, "data_passes");
    int rc = 0;
    if (strcmp(str(m, "event"), "eval") == 0)
        rc = plot_curve_add(&pj->c[PLOT_ERROR], x, num(m, "test_error")) |
             plot_curve_add(&pj->c[PLOT_TEST_LOSS], x, num(m, "test_loss"));
    else if (strcmp(str(m, "event"), "progress") == 0)
        rc = plot_curve_add(&pj->c[PLOT_LOSS], x, num(m, "train_loss")) |
             plot_curve_add(&pj->c[PLOT_LR], x, num(m, "lr"));
    if (rc != 0) {
        fail("out of memory");
        return -1;
    }
    return 0;
}

/* Job id's status (its label) and metrics into pj: 0, or -1 after a
 * message. */
static int plot_fetch(conn *c, const char *id, plot_job *pj)
{
    cJSON *st = request(c, op_request("status", id));
    if (!st)
        return -1;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(st, "job");
    snprintf(pj->label, sizeof pj->label, "%s %s (%s x%.0f)", id, str(job, "name"),
             str(job, "algorithm"), num(job, "replicas"));
    cJSON_Delete(st);
    double offset = 0;
    return metrics_read(c, id, &offset, plot_line, pj);
}

/* The plot into `out`, through a temporary (open_temp_beside). EXIT_OK,
 * or EXIT_FAIL after a message. */
static int write_plot(const char *out, const plot_job *jobs, int njobs)
{
    char tmp[4200];
    int fd = open_temp_beside(out, tmp, sizeof tmp);
    if (fd < 0)
        return EXIT_FAIL;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return fail("cannot write %s: %s", tmp, strerror(e));
    }
    /* Written, then closed (even after a failed write), then renamed. */
    int written = plot_svg_write(f, jobs, njobs) == 0 && fflush(f) == 0 && fsync(fd) == 0;
    int e = errno;
    if (fclose(f) != 0 && written) {
        written = 0;
        e = errno;
    }
    if (written && rename(tmp, out) != 0) {
        written = 0;
        e = errno;
    }
    if (!written) {
        unlink(tmp);
        return fail("cannot write %s: %s", out, strerror(e));
    }
    if (sync_dir(out) != 0)
        return fail("%s: fsync of its folder: %s", out, strerror(errno));
    return EXIT_OK;
}

/* Sweep id's points as plot curves, each point's seeds as a band
 * (plot_band), appended to *jobs (n of them, realloc'd): 0, or -1 after a
 * message. */
static int sweep_plot_points(conn *c, const char *id, plot_job **jobs, int *n)
{
    cJSON *reply;
    const cJSON *points = sweep_points(c, id, &reply), *p;
    if (!reply)
        return -1;
    int rc = 0;
    cJSON_ArrayForEach(p, points) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(p, "jobs"), *j;
        int nruns = cJSON_GetArraySize(ids), r = 0;
        plot_job *runs = calloc((size_t)(nruns ? nruns : 1), sizeof *runs);
        plot_job *more = runs ? realloc(*jobs, (size_t)(*n + 1) * sizeof **jobs) : NULL;
        if (!more) {
            free(runs);
            rc = fail("out of memory");
            break;
        }
        *jobs = more;
        plot_job *out = &(*jobs)[(*n)++];
        memset(out, 0, sizeof *out);
        cJSON_ArrayForEach(j, ids)
            if (rc == 0 && plot_fetch(c, cJSON_GetStringValue(j), &runs[r++]) != 0)
                rc = -1;
        char *values = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(p, "values"));
        snprintf(out->label, sizeof out->label, "%s point %.0f %.100s (%d seed%s)", id,
                 num(p, "point"), values ? values : "", nruns, nruns == 1 ? "" : "s");
        free(values);
        if (rc == 0 && nruns > 0 && plot_band(out, runs, nruns) != 0)
            rc = fail("out of memory");
        for (int i = 0; i < nruns; i++)
            plot_job_free(&runs[i]);
        free(runs);
        if (rc != 0)
            break;
    }
    cJSON_Delete(reply);
    return rc;
}

int cmd_plot(const command *cmd, int argc, char **argv)
{
    PARSE("jo", 1, ARGS_MAX_POS);
    const char *out = a.out ? a.out : "curves.svg";
    plot_job *jobs = NULL;
    int njobs = 0;
    conn c;
    int opened = conn_open(&c) == 0, rc = opened ? EXIT_OK : EXIT_FAIL;
    /* A sweep id: one curve per point (sweep_plot_points). */
    for (int i = 0; i < a.npos && rc == EXIT_OK; i++) {
        if (is_sweep_id(a.pos[i])) {
            rc = sweep_plot_points(&c, a.pos[i], &jobs, &njobs) == 0 ? EXIT_OK : EXIT_FAIL;
            continue;
        }
        plot_job *more = realloc(jobs, (size_t)(njobs + 1) * sizeof *jobs);
        if (!more) {
            rc = fail("out of memory");
            break;
        }
        jobs = more;
        memset(&jobs[njobs], 0, sizeof *jobs);
        rc = plot_fetch(&c, a.pos[i], &jobs[njobs++]) == 0 ? EXIT_OK : EXIT_FAIL;
    }
    if (opened)
        conn_close(&c);
    if (rc == EXIT_OK && strcmp(out, "-") == 0) {
        if (plot_svg_write(stdout, jobs, njobs) != 0 || fflush(stdout) != 0)
            rc = fail("writing the plot to stdout: %s", strerror(errno));
    } else if (rc == EXIT_OK) {
        rc = write_plot(out, jobs, njobs);
    }
    if (rc == EXIT_OK && strcmp(out, "-") != 0) {
        int points = 0;
        for (int i = 0; i < njobs; i++)
            points += jobs[i].c[PLOT_LOSS].n + jobs[i].c[PLOT_ERROR].n;
        if (a.json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", out);
            cJSON_AddNumberToObject(o, "jobs", njobs);
            cJSON_AddNumberToObject(o, "points", points);
            print_json(o);
            cJSON_Delete(o);
        } else {
            printf("plotted %d curve(s), %d points, to %s\n", njobs, points, out);
        }
    }
    for (int i = 0; i < njobs; i++)
        plot_job_free(&jobs[i]);
    free(jobs);
    return rc;
}
