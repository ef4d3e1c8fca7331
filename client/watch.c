/* Following a job to its end (watch, wait, submit --watch/--wait): a
 * progress bar on a terminal, event lines otherwise, the exit status of how
 * it ended. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "ctl.h"

typedef struct progress {
    int tty, quiet, json;
    int bar_shown;
    double test_error;
} progress;

static void bar_clear(progress *p)
{
    if (p->tty && p->bar_shown) {
        fputs("\r\033[K", stdout);
        p->bar_shown = 0;
    }
}

static void bar_draw(progress *p, const char *id, const cJSON *ev)
{
    char loss[32], terr[32], ips[32], eta[32];
    double elapsed = num(ev, "elapsed_s"), left = num(ev, "eta_s");
    double frac = isfinite(elapsed) && isfinite(left) && elapsed + left > 0
                      ? elapsed / (elapsed + left) : 0;
    char bar[21];
    int filled = (int)(frac * 20 + 0.5);
    for (int i = 0; i < 20; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[20] = '\0';
    printf("%s%s epoch %.0f/%.0f [%s] %3.0f%% step %.0f loss %s test err %s %s img/s ETA %s%s",
           p->tty ? "\r" : "", id, num(ev, "epoch") + 1 > num(ev, "epochs") ? num(ev, "epochs")
                                                                          : num(ev, "epoch") + 1,
           num(ev, "epochs"), bar, 100 * frac, num(ev, "step"),
           fmt_num(num(ev, "train_loss"), "%.4f", loss, sizeof(loss)),
           fmt_percent(p->test_error, terr, sizeof(terr)),
           fmt_num(num(ev, "images_per_sec"), "%.0f", ips, sizeof(ips)),
           fmt_duration(left, eta, sizeof(eta)), p->tty ? "\033[K" : "\n");
    fflush(stdout);
    p->bar_shown = p->tty;
}

/* Print one event of a watch; returns 1 at the final "end" line. */
static int show_event(progress *p, const cJSON *ev, const char **state)
{
    const char *kind = str(ev, "event"), *id = str(ev, "id");
    if (strcmp(kind, "end") == 0)
        *state = str(ev, "state");
    if (p->json) {
        char *text = cJSON_PrintUnformatted(ev);
        if (text)
            puts(text);
        free(text);
        fflush(stdout);
        return strcmp(kind, "end") == 0;
    }
    if (strcmp(kind, "eval") == 0)
        p->test_error = num(ev, "test_error");
    if (p->quiet)
        return strcmp(kind, "end") == 0;
    char a[32], b[32];
    if (strcmp(kind, "progress") == 0) {
        bar_draw(p, id, ev);
    } else if (strcmp(kind, "eval") == 0) {
        bar_clear(p);
        printf("%s epoch %.6g/%.0f: test error %s, test loss %s\n", id, num(ev, "epoch"),
               num(ev, "epochs"), fmt_percent(num(ev, "test_error"), a, sizeof(a)),
               fmt_num(num(ev, "test_loss"), "%.4f", b, sizeof(b)));
    } else if (strcmp(kind, "log") == 0) {
        bar_clear(p);
        printf("%s: %s\n", id, str(ev, "message"));
    } else if (strcmp(kind, "state") == 0) {
        bar_clear(p);
        printf("%s: %s\n", id, str(ev, "state"));
    } else if (strcmp(kind, "end") == 0) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(ev, "job");
        bar_clear(p);
        printf("%s %s: test error %s, elapsed %s\n", id, str(ev, "state"),
               fmt_percent(num(j, "test_error"), a, sizeof(a)),
               fmt_duration(num(j, "elapsed_s"), b, sizeof(b)));
        return 1;
    }
    fflush(stdout);
    return 0;
}

/* Watch job `id` until it ends: EXIT_OK if it ended done, EXIT_FAIL if it
 * failed (or the daemon refused the watch), EXIT_CANCELLED if it was
 * cancelled, EXIT_GONE if parled is not running or the connection ended
 * before the job did. */
int watch_job(const char *id, int quiet, int json)
{
    conn c;
    if (conn_open(&c) != 0)
        return EXIT_GONE;
    if (conn_send(&c, op_request("watch", id)) != 0) {
        conn_close(&c);
        return EXIT_GONE;
    }
    cJSON *reply = conn_read(&c);
    if (!reply) {
        conn_close(&c);
        return EXIT_GONE;
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok"))) {
        reply_error(reply);
        cJSON_Delete(reply);
        conn_close(&c);
        return EXIT_FAIL;
    }
    progress p = {.tty = isatty(STDOUT_FILENO), .quiet = quiet, .json = json};
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(reply, "job");
    p.test_error = num(j, "test_error");
    if (json == 1)
        print_json(j);
    if (json == 2) /* --wait --json: only the job as it ended, one object */
        p.json = 0, p.quiet = 1;
    cJSON_Delete(reply);
    const char *state = NULL;
    int rc = EXIT_GONE;
    cJSON *ev;
    while ((ev = conn_read(&c))) {
        int end = show_event(&p, ev, &state);
        if (end) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(ev, "job");
            rc = strcmp(state, "done") == 0        ? EXIT_OK
                 : strcmp(state, "cancelled") == 0 ? EXIT_CANCELLED
                                                   : EXIT_FAIL;
            if (json == 2)
                print_json(st);
            if (rc != EXIT_OK && *str(st, "error"))
                fail("job %s %s: %s", id, state, str(st, "error"));
            else if (rc != EXIT_OK)
                fail("job %s ended %s", id, state);
        }
        cJSON_Delete(ev);
        if (end)
            break;
    }
    bar_clear(&p);
    conn_close(&c);
    if (rc == EXIT_GONE)
        fail("lost the connection to parled before job %s ended", id);
    return rc;
}
