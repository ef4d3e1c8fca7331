/* parlectl's commands on jobs: submit (a job file read, --set applied,
 * sent), status, list (and ls), watch, wait, logs, cancel and resume. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "ctl.h"

/* ---- --set key.path=value ---- */

int set_path(cJSON *root, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return fail("--set %s: expected key.path=value", assignment);
    char path[512];
    size_t plen = (size_t)(eq - assignment);
    if (plen >= sizeof(path))
        return fail("--set: key path too long");
    memcpy(path, assignment, plen);
    path[plen] = '\0';
    cJSON *value = cJSON_Parse(eq + 1);
    if (!value)
        value = cJSON_CreateString(eq + 1);
    cJSON *obj = root;
    char *key = path;
    for (char *dot; (dot = strchr(key, '.')); key = dot + 1) {
        *dot = '\0';
        if (!*key)
            break;
        cJSON *child = cJSON_GetObjectItemCaseSensitive(obj, key);
        if (!child)
            child = cJSON_AddObjectToObject(obj, key);
        if (!cJSON_IsObject(child)) {
            cJSON_Delete(value);
            return fail("--set %.*s: %s is not an object in the job", (int)plen, assignment, key);
        }
        obj = child;
    }
    if (!*key) {
        cJSON_Delete(value);
        return fail("--set %s: empty key in the path", assignment);
    }
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, value);
    else
        cJSON_AddItemToObject(obj, key, value);
    return 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *b = realloc(buf, cap * 2);
        if (!b) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

cJSON *read_json_object(const char *path, const char *what)
{
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) {
        fail("cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithOpts(text, &end, 1);
    if (!o || !cJSON_IsObject(o)) {
        int line = 1;
        for (const char *p = text; end && p < end; p++)
            line += *p == '\n';
        if (o)
            fail("%s: %s holds one JSON object", path, what);
        else
            fail("%s: not valid JSON (line %d)", path, line);
        cJSON_Delete(o);
        o = NULL;
    }
    free(text);
    return o;
}

int cmd_submit(const command *cmd, int argc, char **argv)
{
    PARSE("qjswWpa", 1, 1);
    if (a.watch && a.wait)
        return usage_error(cmd, "--watch and --wait exclude each other", "");
    cJSON *job = read_json_object(a.pos[0], "a job file");
    if (!job)
        return EXIT_FAIL;
    for (int i = 0; i < a.nsets; i++)
        if (set_path(job, a.sets[i]) != 0) {
            cJSON_Delete(job);
            return EXIT_FAIL;
        }
    cJSON *req = op_request("submit", NULL);
    cJSON_AddItemToObject(req, "job", job);
    cJSON *reply = call(req);
    if (!reply)
        return EXIT_FAIL;
    char id[64];
    snprintf(id, sizeof(id), "%s", str(reply, "id"));
    if (a.json && !a.watch && !a.wait)
        print_json(reply);
    else if (a.wait && a.json)
        ;
    else if (a.quiet)
        puts(id);
    else
        printf("submitted %s (%s)\n", id, str(reply, "state"));
    fflush(stdout);
    cJSON_Delete(reply);
    if (a.wait)
        return watch_job(id, 1, a.json ? 2 : 0);
    return a.watch ? watch_job(id, 0, a.json) : EXIT_OK;
}

int cmd_status(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 1);
    cJSON *reply = call(op_request("status", a.npos ? a.pos[0] : NULL));
    if (!reply)
        return EXIT_FAIL;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(reply, "job");
    if (job) {
        if (a.json)
            print_json(job);
        else
            print_job(job);
    } else if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(reply, "daemon");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(d, "jobs");
        char up[32];
        printf("parled %s (pid %.0f) on %s, state dir %s, up %s\n", str(d, "version"),
               num(d, "pid"), str(d, "socket"), str(d, "state_dir"),
               fmt_duration(num(d, "uptime_s"), up, sizeof(up)));
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(d, "state_dir_free_bytes")))
            printf("state dir: %.1f MiB free of %.1f MiB\n",
                   num(d, "state_dir_free_bytes") / (1024.0 * 1024),
                   num(d, "state_dir_total_bytes") / (1024.0 * 1024));
        printf("devices %s; jobs: %.0f queued, %.0f running, %.0f done, %.0f failed, %.0f "
               "cancelled\n",
               str(n, "devices"), num(n, "queued"), num(n, "running"), num(n, "done"),
               num(n, "failed"), num(n, "cancelled"));
        print_job_table(cJSON_GetObjectItemCaseSensitive(reply, "jobs"));
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

/* One page of `list`: the reply, or NULL after its message. */
static cJSON *list_page(conn *c, const char *state, int limit, const char *before)
{
    cJSON *req = op_request("list", NULL);
    if (state)
        cJSON_AddStringToObject(req, "state", state);
    if (limit)
        cJSON_AddNumberToObject(req, "limit", limit);
    if (before)
        cJSON_AddStringToObject(req, "before", before);
    return request(c, req);
}

int cmd_list(const command *cmd, int argc, char **argv)
{
    PARSE("jSAL", 0, 0);
    /* The states status and list show (docs/protocol.md): "held" and
     * "preempted" are queued jobs shown so. */
    static const char *const states[] = {"queued", "held",   "preempted", "running",
                                         "done",   "failed", "cancelled", "timeout"};
    int known = !a.state;
    for (size_t k = 0; !known && k < sizeof(states) / sizeof(states[0]); k++)
        known = strcmp(a.state, states[k]) == 0;
    if (!known)
        return usage_error(cmd, "unknown state ", a.state);
    char *end;
    const long limit = a.limit ? strtol(a.limit, &end, 10) : 0;
    if (a.limit && (!*a.limit || *end || limit < 1 || limit > 1000))
        return usage_error(cmd, "--limit: expected a number of jobs in 1..1000, got ", a.limit);
    conn c;
    if (conn_open(&c) != 0)
        return EXIT_FAIL;
    /* Pages come newest first, each in submission order; with --all they
     * are gathered, then joined oldest page first. */
    cJSON *pages = cJSON_CreateArray(), *reply = list_page(&c, a.state, (int)limit, NULL);
    char before[64];
    while (reply) {
        cJSON_AddItemToArray(pages, cJSON_DetachItemFromObjectCaseSensitive(reply, "jobs"));
        if (!a.all || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(reply, "next_before")))
            break;
        snprintf(before, sizeof before, "%s", str(reply, "next_before"));
        cJSON_Delete(reply);
        reply = list_page(&c, a.state, (int)limit, before);
    }
    conn_close(&c);
    cJSON *jobs = cJSON_CreateArray();
    for (int p = cJSON_GetArraySize(pages) - 1; p >= 0; p--) {
        cJSON *page = cJSON_GetArrayItem(pages, p);
        while (page && page->child)
            cJSON_AddItemToArray(jobs, cJSON_DetachItemViaPointer(page, page->child));
    }
    cJSON_Delete(pages);
    if (!reply) {
        cJSON_Delete(jobs);
        return EXIT_FAIL;
    }
    if (a.json)
        print_json(jobs);
    else
        print_job_table(jobs);
    const double total = num(reply, "total");
    if (!a.json && !a.all && cJSON_GetArraySize(jobs) < total)
        printf("(the newest %d of %.0f jobs: --all lists every one)\n", cJSON_GetArraySize(jobs),
               total);
    cJSON_Delete(jobs);
    cJSON_Delete(reply);
    return EXIT_OK;
}

int cmd_watch(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, 1);
    return watch_job(a.pos[0], 0, a.json);
}

int cmd_wait(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, 1);
    return watch_job(a.pos[0], 1, a.json ? 2 : 0);
}

int cmd_logs(const command *cmd, int argc, char **argv)
{
    PARSE("fj", 1, 1);
    conn c;
    if (conn_open(&c) != 0)
        return EXIT_FAIL;
    cJSON *req = op_request("logs", a.pos[0]);
    if (a.follow)
        cJSON_AddTrueToObject(req, "follow");
    cJSON *reply = request(&c, req);
    if (!reply) {
        conn_close(&c);
        return EXIT_FAIL;
    }
    if (a.json && a.follow) { /* JSON lines: the log so far, then each line's event */
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        char *t = cJSON_PrintUnformatted(reply);
        if (t)
            puts(t);
        free(t);
    } else if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else {
        fputs(str(reply, "text"), stdout);
    }
    fflush(stdout);
    cJSON_Delete(reply);
    int rc = EXIT_OK;
    while (a.follow) {
        cJSON *ev = conn_read(&c);
        if (!ev) {
            rc = EXIT_FAIL;
            break;
        }
        int end = strcmp(str(ev, "event"), "end") == 0;
        if (!end && a.json) {
            char *t = cJSON_PrintUnformatted(ev);
            if (t)
                puts(t);
            free(t);
            fflush(stdout);
        } else if (!end) {
            puts(str(ev, "text"));
            fflush(stdout);
        }
        cJSON_Delete(ev);
        if (end)
            break;
    }
    conn_close(&c);
    return rc;
}

int cmd_cancel(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, 1);
    cJSON *reply = call(op_request("cancel", a.pos[0]));
    if (!reply)
        return EXIT_FAIL;
    if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        if (!cJSON_GetObjectItemCaseSensitive(reply, "id"))
            cJSON_AddStringToObject(reply, "id", a.pos[0]);
        print_json(reply);
    } else if (strcmp(str(reply, "state"), "cancelled") == 0)
        printf("%s cancelled\n", a.pos[0]);
    else
        printf("%s: cancelling (its replicas stop now)\n", a.pos[0]);
    cJSON_Delete(reply);
    return EXIT_OK;
}

int cmd_resume(const command *cmd, int argc, char **argv)
{
    PARSE("jF", 1, 1);
    cJSON *req = op_request("resume", a.pos[0]);
    if (a.from_scratch)
        cJSON_AddTrueToObject(req, "from_scratch");
    cJSON *reply = call(req);
    if (!reply)
        return EXIT_FAIL;
    if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else if (num(reply, "from_step") > 0) {
        printf("%s queued: it resumes from its checkpoint at step %.0f\n", a.pos[0],
               num(reply, "from_step"));
    } else {
        printf("%s queued: it runs again from scratch\n", a.pos[0]);
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}
