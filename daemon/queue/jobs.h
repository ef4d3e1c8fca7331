/* The job queue and the state dir. Everything here runs on the loop thread
 * except each job's own thread (data load + run_job) and the replica threads
 * it starts, which only hand events over through a locked queue and
 * uv_async_send. */
#ifndef PARLE_JOBS_H
#define PARLE_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <cjson/cJSON.h>

typedef struct jobs jobs;
typedef struct job job;
typedef struct jobs_client jobs_client;

/* timeout: a run reached its time limit and checkpointed; resumable as a
 * failed job is. */
enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_FAILED, JOB_CANCELLED, JOB_TIMEOUT };
#define JOB_STATES (JOB_TIMEOUT + 1)

/* Who submitted a job, from the socket's peer credentials: the job reads its
 * files with this user's rights, and only this user, root and the daemon's
 * --admin-group may act on it (docs/architecture.md, "Security model"). */
typedef struct job_owner {
    unsigned uid, gid;
    char user[64];          /* the name at submit, or the uid in digits */
    int privileged;         /* submitted by root, parled's uid or --admin-group: may give a
                               priority above 0 (not kept: a reloaded job's is 0) */
} job_owner;

/* Bounds of the queue (parled's flags). */
typedef struct jobs_limits {
    int jobs_per_user;      /* queued + running jobs of one user */
    double usage_half_life_s; /* fair share: an owner's device use halves in this time */
    double usage_save_s;    /* usage.json written this often while jobs run */
    double preempt_grace_s; /* a job asked to make room stops without a checkpoint after this */
    double keep_ended_s;    /* failed jobs' checkpoints go this long after they end (0: kept) */
    int keep_ended_count;   /* ... and past the newest this many (-1: no count) */
    double remove_ended_s;  /* ended jobs go (as `rm`) this long after they end (0: kept) */
    double save_retry_s;    /* a job's final master that cannot be written is retried this
                               long, then the job fails */
    int gpus_per_user;      /* GPUs one user's running jobs hold at once (0: no bound) */
    int cores_per_user;     /* CPU cores likewise */
    double default_time_limit_s; /* a run's limit for a job without time_limit (0: none) */
    double max_time_limit_s;     /* the most a job may ask (0: no bound) */
    double preempt_min_run_s;    /* a run resumed from a preemption is not preempted sooner */
    double oldest_first_s;       /* a job eligible to run this long ranks before fair share
                                    (0: never) */
    double min_gpu_share;        /* the least gpu_share a GPU job may ask (0: any) */
    int open_job_details;        /* --open-job-details: every member sees every job's details */
} jobs_limits;

/* Called on the loop thread. `line` is one '\n'-terminated NDJSON event:
 * {"event":"state"|"progress"|"eval"|"log", "id":..., ...}; `text` one line
 * appended to the job's log.txt (no '\n'). on_end comes after the last event. */
typedef struct jobs_listener {
    void (*on_event)(void *user, job *j, const char *line);
    void (*on_log)(void *user, job *j, const char *text);
    void (*on_end)(void *user, job *j);
    void *user;
} jobs_listener;

/* Open (creating) <state_dir>/jobs and take the daemon's devices: "cpu" (the
 * cores of sched_getaffinity), "auto" or GPU ids "0,1". Reloads every job
 * found there (docs/architecture.md): ended ones keep their results, queued
 * ones their order, and one that was running is queued first, to resume from
 * its newest complete checkpoint. An unreadable job dir is logged and skipped.
 * Then the client (jobs_client.h: the sweeps) reloads its own records; it is
 * freed with the queue, or at once if the queue cannot open. Nothing starts
 * before jobs_start. */
int jobs_open(jobs **out, uv_loop_t *loop, const char *state_dir, const char *devices,
              const jobs_listener *listener, const jobs_client *client, char *err,
              size_t errlen);
/* Start the reloaded jobs that can run (once the daemon serves its socket). */
void jobs_start(jobs *js);

/* Validate `job_json` completely, persist it and queue it as `owner`'s.
 * Returns the job, or NULL with *code (ERR_INVALID_JOB, ERR_LIMIT,
 * ERR_INTERNAL, ...) and a message. */
job *jobs_submit(jobs *js, const cJSON *job_json, const job_owner *owner, const char **code,
                 char *err, size_t errlen);
void jobs_set_limits(jobs *js, const jobs_limits *limits);
/* A submit's scheduling pass runs once the loop turns, so that its reply
 * does not wait for it and submits read together share one: the server
 * calls this before any other request, which then sees the queue as
 * scheduled (a job that could start has started; its preemptions are
 * asked). */
void jobs_schedule_pending(jobs *js);

job *jobs_find(jobs *js, const char *id);
const char *job_id(const job *j);
const job_owner *job_owner_of(const job *j);
enum job_state job_state_of(const job *j);
int job_state_final(enum job_state s);
const char *job_state_name(enum job_state s);

/* Who asks for a job's status: a client's uid, and whether it is root,
 * parled's uid or --admin-group. */
typedef struct job_viewer {
    unsigned uid;
    int admin;
} job_viewer;

/* Whether v sees j's details (as Slurm's PrivateData): its training values
 * (losses, test error, learning rate, the rule's quantities, speed), its
 * errors and what it could not write (which may quote paths). Its owner, an
 * admin and, under --open-job-details, every member do; another member
 * sees what the queue needs: id, owner, state, devices, priority, holds,
 * why it waits, its times. v NULL: parled itself (status.json), all. */
bool jobs_viewer_sees_details(const job *j, const job_viewer *v);

/* Status objects, answered from memory (the fields of docs/protocol.md), as
 * viewer v may see them (jobs_viewer_sees_details). */
cJSON *job_status_json(const job *j, const job_viewer *v);

/* `list`: a page of the jobs, newest first: at most `limit` of those
 * submitted before job `before` ("": from the newest), in state `state`
 * (a shown state, "held", "preempted"...; "": any); the request's bounds are
 * protocol.h's PROTO_LIST_*. {"jobs": [...],
 * "total": the jobs in that state, "next_before": the id to ask the next
 * page with, or null at the end}. */
cJSON *jobs_list_json(const jobs *js, const job_viewer *v, int limit, const char *before,
                      const char *state);
cJSON *jobs_devices_json(const jobs *js);
cJSON *jobs_summary_json(const jobs *js);
/* The state dir's free bytes (as an unprivileged user sees them: what
 * admission by disk counts) and its file system's size: 0, or -1. */
int jobs_state_space(const jobs *js, uint64_t *free_bytes, uint64_t *total_bytes);

/* The reply to `export`: {"id", "path" of <job dir>/master.safetensors (the
 * master of the job's last evaluation), "metadata"}. NULL with *code
 * ERR_BAD_STATE if the job has no evaluated master yet, else ERR_INTERNAL. */
cJSON *job_export_json(const job *j, const char **code, char *err, size_t errlen);

/* <job dir>/<file> (master.safetensors, metrics.jsonl) in out. */
void job_file_path(const job *j, const char *file, char *out, size_t outlen);

/* Cancel a queued job, or stop a running one's replicas at once (no
 * checkpoint). -1 if it has already ended. */
int job_cancel(jobs *js, job *j, char *err, size_t errlen);

/* Queue a failed job again (asked by `by`, a user's name): it resumes from
 * its newest complete checkpoint, or with from_scratch starts over from
 * step 0 (its checkpoints removed), and counts against --max-jobs-per-user
 * again. 0 with *from_step (where it resumes, 0 from scratch), or -1 with
 * *code and a message: ERR_BAD_STATE for a job not failed, one without a
 * complete checkpoint (unless from_scratch), or whose devices the daemon no
 * longer has; ERR_LIMIT, ERR_SHUTTING_DOWN as for submit. */
int job_resume(jobs *js, job *j, int from_scratch, const char *by, long *from_step,
               const char **code, char *err, size_t errlen);

/* Scheduling (job_schedule.c; docs/architecture.md, "Scheduling"). A job's
 * priority set to `priority`: raised only when `privileged` (root, parled's
 * uid, --admin-group), lowered by anyone allowed to act on it; a queued or
 * running job only. Held (hold 1): a queued job keeps its place but does not
 * start, a running one checkpoints and goes back into the queue held;
 * released (hold 0): it may start again. `by` asks: a hold by a privileged
 * one (an admin) is released only by an admin. 0, or -1 with *code (ERR_BAD_STATE,
 * ERR_FORBIDDEN, ERR_BAD_REQUEST) and a message. */
int job_set_priority(jobs *js, job *j, int priority, int privileged, const char **code,
                     char *err, size_t errlen);
int job_set_hold(jobs *js, job *j, int hold, const job_owner *by, const char **code, char *err,
                 size_t errlen);
/* Whether owner may queue job j at its priority: above 0 only when
 * privileged. 0, or -1 with *code ERR_FORBIDDEN and a message. */
int job_priority_allowed(const job *j, const job_owner *owner, const char **code, char *err,
                         size_t errlen);

/* Fair share and accounting (owner_usage.c; docs/protocol.md "usage" and
 * "history"). jobs_usage_json: each owner's decayed device use as of now,
 * most first: {"half_life_s", "usage_at", "owners": [{"uid", "user",
 * "device_seconds", "share", "running", "queued"}]}. jobs_history_json: the
 * accounting record's device-hours per owner over the runs that ended at or
 * after `since`, of `user` only (a name or uid) unless NULL. NULL only when
 * out of memory. */
cJSON *jobs_usage_json(jobs *js);
cJSON *jobs_history_json(const jobs *js, const char *user, double since);

/* job_remove.c: an ended job's folder removed and the job forgotten.
 * *freed: the bytes its folder took. 0, or -1 with *code (ERR_BAD_STATE:
 * not ended, a sweep's job alone; ERR_INTERNAL) and a message. A removed
 * id is never issued again. */
int job_remove(jobs *js, job *j, uint64_t *freed, const char **code, char *err, size_t errlen);
/* The job's log.txt (at most its last `max` bytes), malloc'd. */
char *job_read_log(const job *j, size_t max, char *err, size_t errlen);

/* Shutdown: start nothing more and ask every running job to checkpoint at its
 * next step boundary and stop (it resumes at the next start). Returns the
 * number of job threads still running; on_end reports each as it ends. */
int jobs_stop_all(jobs *js);
/* A device fault (jobs_faulted): as jobs_stop_all, for parled's re-exec;
 * submissions are still taken and stay queued for the next process. */
int jobs_stop_for_restart(jobs *js);
/* How many devices hit an error that leaves them unusable for this process
 * (a job's replica reported run_result.device_fault): no job starts on them
 * again here; `devices` shows them "faulted". */
int jobs_faulted(const jobs *js);
/* The shutdown's grace ran out: running jobs stop at once, without a
 * checkpoint (each resumes from its last one). Returns how many run. */
int jobs_stop_now(jobs *js);
int jobs_running(const jobs *js);
/* After jobs_running() is 0: close the async handle; free on its close. */
void jobs_close(jobs *js);

#endif
