/* parlectl tensorboard: each job's metrics.jsonl, fetched with the
 * `metrics` op (metrics.c), written as TensorBoard event files on the
 * client's side, as the client's user: one run folder per job under -o DIR,
 * one events.out.tfevents.<time>.<host>.parle file in it, appended to (O_APPEND)
 * and fsynced at the end of each round; the records are TFRecord-framed
 * `Event` protos (tfevent.c, tfrecord.c). With --follow a round repeats
 * every TB_POLL_MS, each job read on from where the last round stopped,
 * until every job has ended. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "tfevent.h"

#define TB_POLL_MS 1000

/* The scalars of a metrics line: its field, the tag TensorBoard shows.
 * Training figures come from progress lines (an eval line repeats the last
 * progress's), the master's evaluation from eval lines. */
typedef struct tb_field {
    const char *field, *tag;
} tb_field;

static const tb_field progress_fields[] = {
    {"train_loss", "train/loss"},
    {"data_passes", "train/data_passes"},
    {"lr", "optim/lr"},
    {"gamma", "optim/gamma"},
    {"rho", "optim/rho"},
    {"images_per_sec", "speed/images_per_sec"},
    {"compute_s", "time/compute_s"},
    {"sync_s", "time/sync_s"},
    {"wait_s", "time/wait_s"},
    {"eval_s", "time/eval_s"},
};

static const tb_field eval_fields[] = {
    {"test_error", "test/error"},
    {"test_loss", "test/loss"},
    {"dist_to_master", "eval/dist_to_master"},
};

typedef struct tb_run {
    char id[PROTO_ID_MAX];
    char name[256];   /* the run's folder under DIR (run_name) */
    int in_sweep;     /* named by its sweep's id: SWEEP/pPOINT/ID */
    char dir[4352];   /* DIR/RUN */
    char file[4608];  /* the event file in it */
    int fd;
    double offset;    /* bytes of metrics.jsonl read */
    int ended;        /* read to its end after the job ended */
    int done;         /* ... and written: nothing more to do */
    int written;      /* something is in the file */
    long events, scalars;
    bytebuf pending;  /* this round's records, not yet written */
    tb_scalar *sc;    /* the line being converted */
    size_t nsc, capsc;
} tb_run;

static int add_scalar(tb_run *r, const char *tag, double v)
{
    if (r->nsc == r->capsc) {
        size_t cap = r->capsc ? 2 * r->capsc : 32;
        tb_scalar *p = realloc(r->sc, cap * sizeof *p);
        if (!p) {
            fail("out of memory");
            return -1;
        }
        r->sc = p;
        r->capsc = cap;
    }
    if (snprintf(r->sc[r->nsc].tag, sizeof r->sc[r->nsc].tag, "%s", tag) >=
        (int)sizeof r->sc[r->nsc].tag) {
        fail("%s: metrics.jsonl: the tag %.40s... is longer than %zu bytes", r->id, tag,
             sizeof r->sc[0].tag - 1);
        return -1;
    }
    r->sc[r->nsc++].value = (float)v;
    return 0;
}

/* The rule's own quantities, as `rule/<key>` and, for arrays (one entry
 * per replica, or per group for LSGD's leaders), `rule/<key>/<i>` (nested:
 * `rule/<key>/<i>/<j>`). Strings, booleans and nulls are not scalars. */
static int add_values(tb_run *r, const char *tag, const cJSON *v)
{
    if (cJSON_IsNumber(v))
        return add_scalar(r, tag, v->valuedouble);
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
        return 0;
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, v) {
        char sub[sizeof r->sc[0].tag];
        int n = cJSON_IsObject(v) ? snprintf(sub, sizeof sub, "%s/%s", tag, e->string)
                                  : snprintf(sub, sizeof sub, "%s/%d", tag, i);
        i++;
        if (n >= (int)sizeof sub) {
            fail("%s: metrics.jsonl: the tag %.40s... is longer than %zu bytes", r->id, sub,
                 sizeof sub - 1);
            return -1;
        }
        if (add_values(r, sub, e) != 0)
            return -1;
    }
    return 0;
}

/* One metrics line (metrics_fn): its scalars as one Event at its step, at
 * its time. */
static int tb_line(void *ctx, const cJSON *m)
{
    tb_run *r = ctx;
    int eval = strcmp(str(m, "event"), "eval") == 0;
    if (!eval && strcmp(str(m, "event"), "progress") != 0)
        return 0;
    const tb_field *f = eval ? eval_fields : progress_fields;
    size_t nf = eval ? sizeof eval_fields / sizeof *f : sizeof progress_fields / sizeof *f;
    r->nsc = 0;
    for (size_t k = 0; k < nf; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, f[k].field);
        if (cJSON_IsNumber(v) && add_scalar(r, f[k].tag, v->valuedouble) != 0)
            return -1;
    }
    if (!eval && add_values(r, "rule", cJSON_GetObjectItemCaseSensitive(m, "rule")) != 0)
        return -1;
    double step = num(m, "step"), t = num(m, "time");
    if (!(step >= 0) || !(t >= 0)) {
        fail("%s: metrics.jsonl: a %s line without a step or a time", r->id, str(m, "event"));
        return -1;
    }
    if (r->nsc == 0)
        return 0;
    if (tfevent_scalars(&r->pending, t, (int64_t)step, r->sc, r->nsc) != 0) {
        fail("out of memory");
        return -1;
    }
    r->events++;
    r->scalars += (long)r->nsc;
    return 0;
}

/* The run folder of a job under -o DIR, from its status: the one place that
 * names runs. A job named by its id: its id. A job named by its sweep's id:
 * SWEEP/pPOINT/ID, so that TensorBoard lists a point's seeds together and a
 * filter on "s0002/p3/" selects them. 0, or -1 after a message. */
static int run_name(const cJSON *job, int in_sweep, char *out, size_t len)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    const char *id = str(job, "id"), *sweep = str(job, "sweep");
    const cJSON *point = cJSON_GetObjectItemCaseSensitive(job, "point");
    size_t n = strlen(id), ns = strlen(sweep);
    if (n == 0 || strspn(id, safe) != n || strspn(sweep, safe) != ns ||
        (ns && !(cJSON_IsNumber(point) && point->valuedouble >= 0 && point->valuedouble < 1e9))) {
        fail("the status of job \"%.40s\" cannot name a run folder", id);
        return -1;
    }
    int w = ns && in_sweep ? snprintf(out, len, "%s/p%.0f/%s", sweep, point->valuedouble, id)
                           : snprintf(out, len, "%s", id);
    if (w < 0 || (size_t)w >= len) {
        fail("job %.40s: run folder name too long", id);
        return -1;
    }
    return 0;
}

/* A run for job id, unless one is there already (a job named twice, or by
 * its id and by its sweep's: the first naming wins). */
static void run_add(tb_run *runs, int *n, const char *id, int in_sweep)
{
    id = id ? id : "";
    for (int i = 0; i < *n; i++)
        if (strcmp(runs[i].id, id) == 0)
            return;
    runs[*n] = (tb_run){.fd = -1, .in_sweep = in_sweep};
    snprintf(runs[(*n)++].id, PROTO_ID_MAX, "%s", id);
}

/* The jobs the arguments name, in order, each once: a job id as itself, a
 * sweep id as its jobs (point by point, seeds together). *runs malloc'd. 0,
 * or -1 after a message. */
static int collect_runs(conn *c, char **ids, int nids, tb_run **runs, int *n)
{
    *runs = NULL;
    *n = 0;
    for (int i = 0; i < nids; i++) {
        cJSON *reply = NULL;
        const cJSON *points = NULL, *p, *j;
        if (is_sweep_id(ids[i]) && !(points = sweep_points(c, ids[i], &reply)))
            return -1;
        int more = points ? 0 : 1;
        cJSON_ArrayForEach(p, points)
            more += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(p, "jobs"));
        tb_run *grown = realloc(*runs, (size_t)(*n + more + 1) * sizeof **runs);
        if (!grown) {
            cJSON_Delete(reply);
            return fail("out of memory"), -1;
        }
        *runs = grown;
        if (!points)
            run_add(*runs, n, ids[i], 0);
        cJSON_ArrayForEach(p, points)
            cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(p, "jobs"))
                run_add(*runs, n, cJSON_GetStringValue(j), 1);
        cJSON_Delete(reply);
    }
    return 0;
}

/* mkdir -p of the run's folder (mode 0777 less the umask). The folders
 * below DIR (SWEEP, pPOINT, the run itself) must be folders, not symbolic
 * links, each checked before anything is made in it: a link planted there
 * would send the events into someone else's folder. 0, or -1 after a
 * message. */
static int make_run_dirs(const tb_run *r)
{
    char p[sizeof r->dir];
    snprintf(p, sizeof p, "%s", r->dir);
    const size_t below = strlen(r->dir) - strlen(r->name);
    for (size_t i = 1;; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        const char c = p[i];
        p[i] = '\0';
        struct stat st = {0};
        const int made = mkdir(p, 0777) == 0, e = errno;
        if (!made && (e != EEXIST || (i >= below ? lstat(p, &st) : stat(p, &st)) != 0 ||
                      !S_ISDIR(st.st_mode)))
            return fail("cannot create the folder %s: %s", p,
                        e != EEXIST        ? strerror(e)
                        : S_ISLNK(st.st_mode) ? "it is a symbolic link (a run's folders under -o "
                                                "must be folders of their own)"
                                              : "a file of that name is in the way"),
                   -1;
        p[i] = c;
        if (c == '\0')
            return 0;
    }
}

/* The run folder, opened without following a link (so it is the folder
 * checked), holding no event file yet: TensorBoard reads every file of a
 * run, and a second writer would repeat the first one's points. Its
 * descriptor, or -1 after a message. */
static int open_empty_run(const tb_run *r)
{
    int dfd = open(r->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return fail("cannot open the folder %s: %s", r->dir,
                    errno == ELOOP ? "it is a symbolic link" : strerror(errno)), -1;
    int lfd = dup(dfd);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        fail("cannot read the folder %s: %s", r->dir, strerror(errno));
        if (lfd >= 0)
            close(lfd);
        close(dfd);
        return -1;
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));)
        if (strstr(e->d_name, "tfevents")) {
            fail("%s already holds an event file (%s): remove it, or write to another -o folder",
                 r->dir, e->d_name);
            rc = -1;
        }
    closedir(d);
    if (rc != 0)
        close(dfd);
    return rc == 0 ? dfd : -1;
}

/* Name job id's run from its status. 0, or -1 after a message. */
static int run_lookup(conn *c, const char *dir, tb_run *r)
{
    cJSON *st = request(c, op_request("status", r->id));
    if (!st)
        return -1;
    int rc = run_name(cJSON_GetObjectItemCaseSensitive(st, "job"), r->in_sweep, r->name,
                      sizeof r->name);
    cJSON_Delete(st);
    if (rc != 0)
        return -1;
    if (snprintf(r->dir, sizeof r->dir, "%s/%s", dir, r->name) >= (int)sizeof r->dir)
        return fail("%s/%s: path too long", dir, r->name), -1;
    return 0;
}

/* Start a run: its folder, its event file, the file_version record. 0, or
 * -1 after a message. */
static int run_open(tb_run *r)
{
    if (make_run_dirs(r) != 0)
        return -1;
    int dfd = open_empty_run(r);
    if (dfd < 0)
        return -1;
    char host[256] = "", name[512];
    if (gethostname(host, sizeof host - 1) != 0 || !*host)
        snprintf(host, sizeof host, "localhost");
    host[strcspn(host, "/")] = '\0';
    const time_t now = time(NULL);
    snprintf(name, sizeof name, "events.out.tfevents.%lld.%s.parle", (long long)now, host);
    if (snprintf(r->file, sizeof r->file, "%s/%s", r->dir, name) >= (int)sizeof r->file) {
        close(dfd);
        return fail("%s: path too long", r->dir), -1;
    }
    /* O_EXCL: a file or link already there is never written. */
    r->fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
                   0666);
    const int e = errno, synced = r->fd >= 0 && fsync(dfd) == 0;
    close(dfd);
    if (r->fd < 0)
        return fail("cannot create %s: %s", r->file, strerror(e)), -1;
    if (!synced)
        return fail("%s: fsync of its folder: %s", r->file, strerror(errno)), -1;
    /* The file_version record first, ahead of the events read already. */
    bytebuf version = {0};
    int rc = tfevent_file_version(&version, (double)now) != 0
                 ? (fail("out of memory"), -1)
             : write_all(r->fd, version.p, version.n) != 0
                 ? (fail("cannot write %s: %s", r->file, strerror(errno)), -1)
                 : 0;
    bytebuf_free(&version);
    return rc;
}

/* One round's read for a job: its state, then its metrics from where the
 * last round stopped, as records in r->pending. A job that had ended before
 * its read is done with. 0, or -1 after a message. */
static int run_read(conn *c, tb_run *r)
{
    cJSON *st = request(c, op_request("status", r->id));
    if (!st)
        return -1;
    const char *state = str(cJSON_GetObjectItemCaseSensitive(st, "job"), "state");
    int ended = strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
                strcmp(state, "cancelled") == 0 || strcmp(state, "timeout") == 0;
    cJSON_Delete(st);
    if (metrics_read(c, r->id, &r->offset, tb_line, r) != 0)
        return -1;
    r->ended = ended;
    return 0;
}

/* The round's records appended and fsynced. 0, or -1 after a message. */
static int run_write(tb_run *r)
{
    if (r->pending.n > 0 &&
        (write_all(r->fd, r->pending.p, r->pending.n) != 0 || fsync(r->fd) != 0))
        return fail("cannot write %s: %s", r->file, strerror(errno)), -1;
    r->written |= r->pending.n > 0;
    r->pending.n = 0;
    return 0;
}

/* One round of every job not yet done with: all read, then the runs that
 * have their first records opened (so that a folder in the way fails the
 * command before anything is written), then all written. A job with no
 * metrics gets no run. How many are left, or -1 after a message. */
static int round_all(conn *c, tb_run *runs, int n)
{
    int left = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if (!runs[i].done && (rc = run_read(c, &runs[i])) == 0)
            left += !runs[i].ended;
    for (int i = 0; i < n && rc == 0; i++)
        if (!runs[i].done && runs[i].fd < 0 && runs[i].pending.n > 0)
            rc = run_open(&runs[i]);
    for (int i = 0; i < n && rc == 0; i++)
        if (!runs[i].done) {
            rc = run_write(&runs[i]);
            runs[i].done = runs[i].ended;
        }
    return rc == 0 ? left : -1;
}

static void report(const char *dir, const tb_run *runs, int n, int json)
{
    cJSON *o = json ? cJSON_CreateObject() : NULL;
    cJSON *list = o ? cJSON_AddArrayToObject(o, "runs") : NULL;
    for (int i = 0; i < n; i++) {
        if (!json) {
            if (!runs[i].file[0])
                printf("%s: no metrics, no run written\n", runs[i].id);
            else
                printf("%s: %ld events, %ld scalars in %s\n", runs[i].id, runs[i].events,
                       runs[i].scalars, runs[i].file);
            continue;
        }
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "id", runs[i].id);
        cJSON_AddStringToObject(r, "run", runs[i].name);
        if (runs[i].file[0])
            cJSON_AddStringToObject(r, "file", runs[i].file);
        else
            cJSON_AddNullToObject(r, "file");
        cJSON_AddNumberToObject(r, "events", (double)runs[i].events);
        cJSON_AddNumberToObject(r, "scalars", (double)runs[i].scalars);
        cJSON_AddItemToArray(list, r);
    }
    if (o) {
        cJSON_AddStringToObject(o, "dir", dir);
        print_json(o);
        cJSON_Delete(o);
    }
}

int cmd_tensorboard(const command *cmd, int argc, char **argv)
{
    PARSE("jfo", 1, ARGS_MAX_POS);
    if (!a.out || !*a.out)
        return usage_error(cmd, "-o DIR is required", "");
    tb_run *runs = NULL;
    int nruns = 0;
    conn c;
    int opened = conn_open(&c) == 0;
    int rc = opened ? collect_runs(&c, a.pos, a.npos, &runs, &nruns) : -1;
    /* Every job's status first: an unknown one creates nothing. */
    for (int i = 0; i < nruns && rc == 0; i++)
        rc = run_lookup(&c, a.out, &runs[i]);
    for (int left = nruns; rc == 0 && left > 0;) {
        left = round_all(&c, runs, nruns);
        rc = left < 0 ? -1 : 0;
        if (!a.follow || left <= 0)
            break;
        nanosleep(&(struct timespec){.tv_sec = TB_POLL_MS / 1000,
                                     .tv_nsec = TB_POLL_MS % 1000 * 1000000L},
                  NULL);
    }
    if (opened)
        conn_close(&c);
    for (int i = 0; i < nruns; i++) {
        if (runs[i].fd >= 0 && close(runs[i].fd) != 0 && rc == 0) {
            fail("cannot write %s: %s", runs[i].file, strerror(errno));
            rc = -1;
        }
        /* A command that failed before a run's first write leaves no empty
         * file behind to block the next try. */
        if (runs[i].fd >= 0 && rc != 0 && !runs[i].written)
            unlink(runs[i].file);
        bytebuf_free(&runs[i].pending);
        free(runs[i].sc);
    }
    if (rc == 0)
        report(a.out, runs, nruns, a.json);
    free(runs);
    return rc == 0 ? EXIT_OK : EXIT_FAIL;
}
