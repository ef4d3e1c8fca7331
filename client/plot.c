/* parlectl plot: each job's metrics.jsonl, fetched over the socket with the
 * `metrics` op (whole lines in bounded replies), drawn as an SVG by
 * plot_svg.c. The file is written atomically (temporary, rename) so a
 * browser reloading it never sees half a plot. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "plot_svg.h"

/* Fill pj from job id's metrics: train loss and lr from progress lines,
 * test error from eval lines, all against data_passes. */
static int fetch_metrics(conn *c, const char *id, plot_job *pj)
{
    cJSON *st = request(c, op_request("status", id));
    if (!st)
        return -1;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(st, "job");
    snprintf(pj->label, sizeof pj->label, "%s %s (%s x%.0f)", id, str(job, "name"),
             str(job, "algorithm"), num(job, "replicas"));
    cJSON_Delete(st);
    double offset = 0;
    for (;;) {
        cJSON *req = op_request("metrics", id);
        cJSON_AddNumberToObject(req, "offset", offset);
        cJSON *r = request(c, req);
        if (!r)
            return -1;
        char *text = (char *)str(r, "text");
        for (char *line = text, *nl; *line; line = nl + 1) {
            if (!(nl = strchr(line, '\n')))
                break;
            *nl = '\0';
            cJSON *m = cJSON_Parse(line);
            double x = num(m, "data_passes");
            int rc = 0;
            if (strcmp(str(m, "event"), "eval") == 0)
                rc = plot_curve_add(&pj->c[PLOT_ERROR], x, num(m, "test_error"));
            else if (strcmp(str(m, "event"), "progress") == 0)
                rc = plot_curve_add(&pj->c[PLOT_LOSS], x, num(m, "train_loss")) |
                     plot_curve_add(&pj->c[PLOT_LR], x, num(m, "lr"));
            cJSON_Delete(m);
            if (rc != 0) {
                cJSON_Delete(r);
                return fail("out of memory"), -1;
            }
        }
        int eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "eof"));
        double next = num(r, "next");
        cJSON_Delete(r);
        /* A line still being written stops a running job's history here. */
        if (eof || !(next > offset))
            break;
        offset = next;
    }
    return 0;
}

int cmd_plot(const command *cmd, int argc, char **argv)
{
    PARSE("jo", 1, 16);
    const char *out = a.out ? a.out : "curves.svg";
    plot_job *jobs = calloc((size_t)a.npos, sizeof *jobs);
    if (!jobs)
        return fail("out of memory");
    conn c;
    int opened = conn_open(&c) == 0, rc = opened ? EXIT_OK : EXIT_FAIL;
    for (int i = 0; i < a.npos && rc == EXIT_OK; i++)
        if (fetch_metrics(&c, a.pos[i], &jobs[i]) != 0)
            rc = EXIT_FAIL;
    if (opened)
        conn_close(&c);
    char tmp[4200] = "";
    if (rc == EXIT_OK && strcmp(out, "-") == 0) {
        if (plot_svg_write(stdout, jobs, a.npos) != 0 || fflush(stdout) != 0)
            rc = fail("writing the plot to stdout: %s", strerror(errno));
    } else if (rc == EXIT_OK) {
        snprintf(tmp, sizeof tmp, "%s.part-%d", out, (int)getpid());
        FILE *f = fopen(tmp, "w");
        if (!f)
            rc = fail("cannot create %s: %s", tmp, strerror(errno));
        else if ((plot_svg_write(f, jobs, a.npos) != 0) | (fclose(f) != 0) ||
                 rename(tmp, out) != 0) {
            rc = fail("cannot write %s: %s", out, strerror(errno));
            unlink(tmp);
        }
    }
    if (rc == EXIT_OK && strcmp(out, "-") != 0) {
        int points = 0;
        for (int i = 0; i < a.npos; i++)
            points += jobs[i].c[PLOT_LOSS].n + jobs[i].c[PLOT_ERROR].n;
        if (a.json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", out);
            cJSON_AddNumberToObject(o, "jobs", a.npos);
            cJSON_AddNumberToObject(o, "points", points);
            print_json(o);
            cJSON_Delete(o);
        } else {
            printf("plotted %d job(s), %d points, to %s\n", a.npos, points, out);
        }
    }
    for (int i = 0; i < a.npos; i++)
        plot_job_free(&jobs[i]);
    free(jobs);
    return rc;
}
