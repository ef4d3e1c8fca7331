/* A job's files in the state dir (docs/architecture.md, "The state dir"):
 * log.txt, status.json, metrics.jsonl and the checkpoints' removal, written
 * on the loop thread; and an ended job's folder removed with it (`rm`). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "file_tree.h"
#include "fsutil.h"
#include "jobs_impl.h"

void job_log(job *j, const char *fmt, ...)
{
    char text[JOB_ERR_MAX + 256], stamp[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    time_t t = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
    if (j->log) {
        char line[sizeof(text) + sizeof(stamp) + 2];
        int n = snprintf(line, sizeof line, "%s %s\n", stamp, text);
        int fd = open(j->log, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            ssize_t rc = write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
            (void)rc;
            close(fd);
        }
    }
    if (j->js->listener.on_log) {
        char line[sizeof(text) + sizeof(stamp) + 2];
        snprintf(line, sizeof(line), "%s %s", stamp, text);
        j->js->listener.on_log(j->js->listener.user, j, line);
    }
}

int job_log_start(job *j, char *err, size_t errlen)
{
    job_file_path(j, "log.txt", j->log_path, sizeof j->log_path);
    int fd = open(j->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", j->log_path, strerror(errno));
        return -1;
    }
    close(fd);
    j->log = j->log_path;
    return 0;
}

void job_log_stop(job *j) { j->log = NULL; }

/* status.json is what a restart reloads; a failed write is logged and the
 * job goes on (the next write may succeed). */
int write_status(job *j)
{
    char path[1200], err[512];
    j->disk_bytes = tree_disk_bytes(j->dir); /* as of this write: status answers from memory */
    cJSON *st = job_status_json(j, NULL);
    char *text = cJSON_Print(st);
    cJSON_Delete(st);
    job_file_path(j, "status.json", path, sizeof(path));
    int rc = text ? atomic_write_file(path, text, strlen(text), err, sizeof(err)) : -1;
    if (rc != 0)
        job_log(j, "could not write status.json: %s", text ? err : "out of memory");
    free(text);
    j->status_written_mono = jobs_mono_s();
    return rc;
}

void job_remove_checkpoints(job *j)
{
    char root[1200], err[1400];
    job_file_path(j, "ckpt", root, sizeof(root));
    if (remove_tree(root, err, sizeof err) != 0)
        job_log(j, "could not remove the checkpoints: %s", err);
}

void job_write_metrics(job *j, cJSON *ev, int durable)
{
    if (!j->metrics)
        return;
    char *text = cJSON_PrintUnformatted(ev);
    if (text) {
        fprintf(j->metrics, "%s\n", text);
        fflush(j->metrics);
        if (durable)
            fsync(fileno(j->metrics));
        free(text);
    }
}

void job_trim_metrics(job *j, long keep_step)
{
    char path[1200], err[1400];
    size_t len = 0;
    job_file_path(j, "metrics.jsonl", path, sizeof(path));
    if (j->metrics)
        fclose(j->metrics);
    j->metrics = NULL;
    char *text = read_file_text(path, METRICS_FILE_MAX, &len, err, sizeof(err));
    if (!text && errno != ENOENT)
        job_log(j, "cannot trim metrics.jsonl: %s", err);
    if (text) {
        size_t out = 0, dropped = 0;
        for (size_t at = 0; at < len;) {
            char *nl = memchr(text + at, '\n', len - at);
            size_t n = nl ? (size_t)(nl - (text + at)) + 1 : len - at;
            cJSON *line = nl ? cJSON_ParseWithLength(text + at, n - 1) : NULL;
            const cJSON *step = cJSON_GetObjectItemCaseSensitive(line, "step");
            if (line && (!cJSON_IsNumber(step) || step->valuedouble <= (double)keep_step)) {
                memmove(text + out, text + at, n);
                out += n;
            } else {
                dropped++;
            }
            cJSON_Delete(line);
            at += n;
        }
        if (dropped > 0) {
            if (atomic_write_file(path, text, out, err, sizeof(err)) != 0)
                job_log(j, "cannot trim metrics.jsonl: %s", err);
            else
                job_log(j, "metrics.jsonl: dropped %zu line(s) after step %ld", dropped, keep_step);
        }
        free(text);
    }
    j->metrics = fopen(path, "a");
    if (!j->metrics)
        job_log(j, "cannot append to %s: %s (metrics are not kept)", path, strerror(errno));
}

/* j out of the queue's list and freed (an ended job: no thread, no watcher). */
static void forget_job(jobs *js, job *j)
{
    jobs_unlink(js, j);
    free(j->cores);
    free(j);
}

int job_remove_folder(jobs *js, job *j, uint64_t *freed, char *err, size_t errlen)
{
    const uint64_t bytes = tree_disk_bytes(j->dir);
    if (numbered_keep_next(js->jobs_dir, js->next_id, err, errlen) != 0 ||
        numbered_dir_remove(js->jobs_dir, j->id, err, errlen) != 0)
        return -1;
    *freed += bytes;
    forget_job(js, j);
    return 0;
}
