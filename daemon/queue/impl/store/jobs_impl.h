/* The job store's implementation header (daemon/queue/; jobs.c heads its
 * files): a job's record, the hand-overs from its threads, and the helpers
 * they share, each under the file that defines it. Behind the queue's
 * door: on the queue's own include paths only (tests/unit/layers.py).
 *
 * Who writes what: the fields of `struct job` and `struct jobs` are the
 * store's (jobs.c and the files it heads: record, state, files, events,
 * reload, the job threads), and only the store's files write them. The
 * modules above read them and change them through the store's functions
 * (set_state, job_commit, job_ask_stop, job_log...), the few a module must
 * change each through one function that says who may: why a job waits
 * (job_set_waiting: admission and the scheduling glue), the devices a
 * gpu:N job is placed on (job_place: the glue), why it ended
 * (job_set_error: the glue, the client's early stop), a cancel asked
 * (job_request_cancel: the glue), a run to resume (job_will_resume: the
 * glue, a resume) and a resumed job's end forgotten (job_reset_end).
 * tests/unit/store_writes.py fails on a write of a field from a file
 * outside the store. Each module above keeps its own fields in a
 * part of its own, which the store allocates with each job (and one with
 * the queue) but never reads: its struct is defined in the module's header
 * in impl/<module>/, reached through job_part and jobs_part with the
 * module's enum job_part (admission, the scheduling glue, fair share's
 * glue, the removals). What the store needs of them (a job's fields in its
 * status, read back at a reload; a run's end) goes through js->hooks,
 * which queue.c fills in. The store's client above the queue (the sweeps)
 * has a part of each job too and hears through js->client
 * (jobs_client.h); it sees no field at all.
 *
 * Each module is a static library of its own (meson.build) and declares
 * its functions in its own header: schedule/job_schedule.h (the scheduling
 * glue), admission/job_admission.h, usage/owner_usage.h (fair share's
 * glue) and remove/job_remove.h; a submission's (job_submit.c) are in
 * jobs_client.h, as the client submits through them.
 * A module is compiled with the headers of the modules it may call and no
 * other: an include of another's does not build. */
#ifndef PARLE_JOBS_IMPL_H
#define PARLE_JOBS_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#include "admit.h"
#include "job_memory.h"
#include "jobconfig.h"
#include "jobs.h"
#include "jobs_client.h"
#include "numbered_dirs.h"
#include "protocol.h"
#include "runner.h"

/* Devices as a bit set: bit i = GPU i, the top bit = the daemon's CPU cores
 * (one resource: CPU jobs run one after another). */
#define DEV_CPU JOB_DEVICES_CPU
#define DEV_MAX_GPUS JOB_DEVICES_MAX_GPUS
/* Progress events beyond this many undrained ones are dropped (never evals,
 * logs or ends), so a stalled loop cannot grow memory without bound. */
#define QUEUE_MAX_PROGRESS 4096
#define STATUS_WRITE_INTERVAL_S 5.0
#define JOB_ERR_MAX 4096
#define JOB_FILE_MAX (1u << 20)        /* job.json, status.json */
#define METRICS_FILE_MAX (1u << 30)
#define SAFETENSORS_HEADER_MAX (16u << 20)
/* A final master that could not be written is tried again this often. */
#define SAVE_RETRY_MS 1000

/* The modules whose fields ride with each job and with the queue: each
 * part's struct is the module's (its header), the store only sizes it;
 * the last is the client's (jobs_client.h), a job's only. */
enum job_part { JOB_PART_ADMIT, JOB_PART_SCHED, JOB_PART_FAIR, JOB_PART_REMOVE, JOB_PART_CLIENT,
                JOB_PARTS };

/* A job's place in one of the scheduler's lists (job_index.c). */
typedef struct job_link {
    job *next, *prev;
    int on;
} job_link;

struct job {
    jobs *js;
    job *next, *prev;       /* submission order (job_index.c) */
    job *hnext;             /* the next in its bucket of js->buckets */
    long seq;               /* its place in submission order (1 first) */
    job_link active;        /* in js->active_first...: queued, or its thread runs */
    job_link running;       /* in js->running_first...: its thread runs */
    int counted;            /* in its owner's count of queued and running jobs */
    char id[PROTO_ID_MAX];
    char dir[1100];
    job_config cfg;
    job_owner owner;
    /* Its devices: resolved at submit and reload (job_devices_now), the
     * GPUs of a gpu:N job picked as it is placed (job_place, by
     * job_schedule.c). */
    uint64_t devices;
    enum job_state state;
    /* Why it failed, was cancelled or timed out: the store's, and through
     * job_set_error the scheduling glue's (a dependency that never will, a
     * time limit) and a sweep's early stop (daemon/sweep/); a resume clears
     * it (job_reset_end). */
    char error[JOB_ERR_MAX];
    double submitted_at, started_at, ended_at; /* unix seconds; 0 = not yet */
    double elapsed_base;    /* training seconds before the current run (a resume) */
    double run_began_mono;  /* when the current run began (jobs_mono_s); 0 when not running */
    /* When it ended (jobs_mono_s; --keep-ended's age), from ended_at once
     * at a restart. */
    double ended_mono;
    /* Its age for --oldest-first-after: the seconds it was eligible to run
     * (queued, not held, no dependency pending) before eligible_mono, and
     * since then (jobs_mono_s) while it is; eligible_mono 0 while it is not.
     * Kept in status.json as seconds, reset when it is resumed. */
    double eligible_s, eligible_mono;
    run_event last;         /* the latest progress or eval values */
    double test_error, test_loss; /* NAN until the first evaluation */
    char memory[512];       /* peak bytes per device, a JSON object's text or "" */
    /* Whether the current run has reported its memory yet: the run's fact,
     * the store's (set by the first progress event that reports it, jobs.c;
     * cleared as a run starts, job_thread.c); admission reads it. */
    int memory_reported;
    /* Why it waits, or "": shown in its status. Two writers through
     * job_set_waiting, one at a time: both in a scheduling pass on the loop
     * thread, admission (job_admission.c: "memory: ...", "disk: ...") for a
     * job whose devices the decision gave it, the scheduling glue
     * (job_schedule.c) for every other wait. The store only shows it. */
    char waiting[1024];
    volatile int stop;      /* job_ask_stop's, read by the replicas */
    /* A cancel was asked (job_request_cancel, by job_control.c; a resume
     * clears it), and the next run resumes from a checkpoint: it was
     * running when parled stopped, or job_will_resume (it went back into the
     * queue, job_control.c, or was resumed, job_resume.c). */
    int cancel_requested;
    int interrupted;
    int run_pending;        /* an interrupted run has not yet said where it starts */
    int thread_running;
    pthread_t thread;
    FILE *metrics;
    /* log.txt's path while the job writes its log (from its submit until it
     * ends), else NULL. job_log opens it for each line: a queued job holds
     * no descriptor. */
    const char *log;
    char log_path[1200];
    double status_written_mono;
    /* Written and read only on the replica thread that evaluates the master:
     * the last evaluation, for the exported file's metadata. */
    double master_test_error, master_test_loss;
    long flush_asked, flush_done; /* guarded by js->mu */
    /* Under MPI, the rank of each replica once the job started there
     * (guarded by js->mu: the job thread writes it, status reads it). */
    unsigned char replica_rank[64];
    int placed;
    /* A CPU job's cores while it runs (job_schedule.c): ncores_held ids of
     * js->cores, disjoint from every other running job's. */
    int *cores;
    int ncores_held;
    uint64_t disk_bytes;    /* its folder's disk use, as of its last status.json */
    /* Saving: per run_saved, what could not be written ("" once it was),
     * shown in its status; the final master kept in memory while the job
     * thread retries it. Two writers of save_failed, one entry each: the
     * loop thread (jobs.c) the checkpoint's as the run reports it, and the
     * final master's as the job ends; final_unsaved and unsaved are the job
     * thread's (job_thread.c). */
    struct job_saving {
        char save_failed[2][512];
        int final_unsaved;
        struct held_master *unsaved;
    } saving;
};

/* One hand-over from a job's threads to the loop. */
typedef struct pending {
    struct pending *next;
    job *j;
    int ended;              /* the job thread is done: rc, result, err */
    int rc;
    run_result result;
    long flush;             /* > 0: a replica waits until everything before is written */
    run_event ev;
    char *err;
} pending;

/* What the store tells the modules above it and asks of them: the queue
 * (queue.c) fills these in at open, and the store calls none of those
 * modules otherwise, so it sits at the bottom of the folder. All on the
 * loop thread but admit_data (a job thread, as it loads). */
typedef struct jobs_hooks {
    /* The size of each module's part of a job and of the queue. */
    size_t job_part_size[JOB_PARTS], jobs_part_size[JOB_PARTS];
    /* A job's status (job_status_json, and so status.json): the scheduling
     * glue's fields after the owner (the client's come at the end). */
    void (*status_sched)(const job *j, cJSON *o);
    /* A reloaded job's status.json, which had `state` (a queued job's shown
     * word too): each module's fields read back. */
    void (*restore)(job *j, const cJSON *st, const char *state);
    /* The word status shows for a queued job other than "queued" ("held",
     * "preempted"), or NULL; and whether a status.json's word is one. */
    const char *(*queued_shown_as)(const job *j);
    int (*queued_word)(const char *state);
    /* A run starts, or a reloaded job that had not ended is queued again
     * (was_running: it was running when parled stopped). */
    void (*run_starting)(job *j);
    void (*requeued_at_reload)(job *j, int was_running);
    /* A run is about to end: its last seconds are charged (fair share). */
    void (*run_ending)(jobs *js);
    /* A run the queue stopped (not a cancel, not parled's stop) has ended:
     * the scheduling glue ends it as its reason says ("timeout") or puts it
     * back in the queue ("held", "preempted"); returns that word. */
    const char *(*run_stopped)(job *j);
    /* A run has ended as `end` ("done", "failed", "cancelled", "timeout",
     * "held", "preempted", "stopped"), which began at began_mono
     * (jobs_mono_s): the removals and the accounting record. */
    void (*run_ended)(jobs *js, job *j, const char *end, double began_mono);
    /* The ends handed over in one turn of the loop are applied: the removals
     * then a scheduling pass. */
    void (*ends_applied)(jobs *js);
    /* The data loader's admission of a job's data (data_admit_with). */
    data_admit_fn admit_data;
} jobs_hooks;

struct jobs {
    uv_loop_t *loop;
    uv_async_t async;
    jobs_listener listener;
    jobs_hooks hooks;
    jobs_client client;     /* the sweeps (jobs_client.h) */
    /* Where each module's part starts in a job's block and in this one's
     * (job_new, jobs_store_new): job_part, jobs_part. */
    size_t job_part_at[JOB_PARTS], jobs_part_at[JOB_PARTS], job_size;
    char jobs_dir[1040];
    int *cores, ncores;
    uint64_t devices;
    jobs_limits limits;
    char devices_text[64];
    job *first, *last;
    job **buckets;          /* the jobs by id (job_index.c) */
    size_t nbuckets, njobs;
    long linked;            /* jobs linked so far (their seq) */
    /* Counts what may change a dependency's answer (job_after_check): a job
     * ended or removed, a sweep's job queued, a sweep removed. A job found
     * waiting on one is not looked at again until it moves. */
    unsigned long after_epoch;
    job *active_first, *active_last;   /* queued or running (job_index.c) */
    job *running_first, *running_last; /* their threads run */
    size_t nactive, nrunning;          /* in each */
    /* Each owner's queued and running jobs (--max-jobs-per-user), kept as
     * they change; lost (-1 from jobs_owner_active) if memory ran out. */
    struct owner_count {
        unsigned uid;
        int n;
    } *owner_counts;
    int nowner_counts, capowner_counts, owner_counts_lost;
    int next_id;
    int running, stopping;
    int restarting;         /* the stop is parled's re-exec after a device fault */
    /* Devices that hit a device-sticky error (run_result.device_fault), bit
     * as `devices`, with the first message for each: nothing starts on them
     * in this process (docs/gpu.md "Sticky device faults"). */
    uint64_t faulted;
    char fault[64][512];
    int open_handles;       /* async and the timers, until all are closed */
    void (*on_closed)(jobs *js); /* jobs_store_close's, once they are */
    pthread_mutex_t mu;     /* guards the pending queue and the flush counters */
    pthread_cond_t flushed;
    pending *q_first, *q_last;
    int q_progress;
    const job **core_job;   /* per entry of cores: the running job on it, or NULL */
    /* GPUs joined by NVLink/P2P (bit h of gpu_links[g]), for "gpu:N". */
    uint64_t gpu_links[DEV_MAX_GPUS];
    /* Checkpoints the running jobs wrote and failed to write (jobs.c's
     * note_save), since parled started: the metrics file's counters. */
    unsigned long checkpoints_written, checkpoints_failed;
};

/* jobs_store.c: the store made (its devices and cores resolved; no job
 * yet) and freed with every job in it, or NULL with a message; jobs.c's
 * jobs_store_listen starts taking the job threads' hand-overs on the loop.
 * What the modules' parts of struct jobs hold is theirs to free
 * (queue.c), as the client's state is its own. */
jobs *jobs_store_new(uv_loop_t *loop, const char *state_dir, const char *devices,
                     const jobs_listener *listener, const jobs_hooks *hooks,
                     const jobs_client *client, char *err, size_t errlen);
int jobs_store_listen(jobs *js, char *err, size_t errlen);
void jobs_store_free(jobs *js);
/* The store's async handle and the modules' `handles` closed; on_closed(js)
 * once the last has (it frees what the modules hold, then the store). */
void jobs_store_close(jobs *js, uv_handle_t *const *handles, int n, void (*on_closed)(jobs *js));
/* A new job's record, zeroed (no test error yet), with a zeroed part of
 * each module and of the client after it (one block: job_discard frees it
 * all), or NULL when out of memory; job_commit (jobs_client.h) queues it. */
job *job_new(jobs *js);
/* Module k's part of job j and of the queue (the module's header casts it
 * to its struct). */
static inline void *job_part(const job *j, enum job_part k)
{
    return (char *)j + j->js->job_part_at[k];
}
static inline void *jobs_part(const jobs *js, enum job_part k)
{
    return (char *)js + js->jobs_part_at[k];
}

/* job_index.c: the list in submission order and the ids' hash. jobs_link
 * appends j (its id set), jobs_unlink takes it out (not freed),
 * jobs_index_find looks an id up, jobs_index_free frees the hash.
 * jobs_track puts j in or out of the lists of the queued or running jobs
 * and of the running ones, as its state and thread_running now say: after
 * each change of either. */
void jobs_link(jobs *js, job *j);
void jobs_track(jobs *js, job *j);
/* uid's queued and running jobs, or -1 when not known (count them). */
int jobs_owner_active(const jobs *js, unsigned uid);
void jobs_unlink(jobs *js, job *j);
job *jobs_index_find(const jobs *js, const char *id);
void jobs_index_free(jobs *js);

/* job_record.c: the record read, calling none of the queue's files (also
 * job_state_name, job_file_path... of jobs.h), and the fields a module
 * above may change, each through its one function: why a queued job
 * waits (admission, the scheduling glue), the devices a job that asks for
 * gpu:N is placed on (the glue), and a resumed job's end forgotten (its
 * error, end time, cancel and eligible time; job_resume.c). Its error is
 * job_set_error's (jobs_client.h). */
void job_set_waiting(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void job_place(job *j, uint64_t devices);
void job_reset_end(job *j);
/* Job j's age for --oldest-first-after as of now (jobs_mono_s): the
 * seconds it was eligible to run. job_set_eligible: whether it is from now
 * on (queued, not held, no dependency pending), at each scheduling pass. */
double job_eligible_s(const job *j, double now);
void job_set_eligible(job *j, int eligible, double now);
/* The limit of a run of j in seconds (its time_limit, else parled's
 * default; 0: none). */
double job_time_limit(const jobs *js, const job *j);

/* job_files.c: the job's files in the state dir. */
/* The job writes its log from now on (log.txt created if need be): 0, or -1
 * with a message. job_log_stop: it no longer does (it ended). */
int job_log_start(job *j, char *err, size_t errlen);
void job_log_stop(job *j);
int write_status(job *j);                 /* status.json; a failure is logged */
/* metrics.jsonl: one line per event, fsync'd when `durable` (evaluations). */
void job_write_metrics(job *j, cJSON *ev, int durable);
/* Keep the metrics lines of steps <= keep_step (the run continues from
 * there) and drop the rest, including a torn last line. */
void job_trim_metrics(job *j, long keep_step);
/* Once a done or cancelled job's end is on disk, or a failed job is run
 * again from scratch, the checkpoints are of no use (the master for export
 * stays): every file and directory under ckpt goes. */
void job_remove_checkpoints(job *j);

/* job_events.c: what watchers are told (the listener's on_event). An
 * event object {"event": kind, "id", "time"}; job_emit sends it as one
 * line and frees it. job_log_event: a log line that is also a "log" event. */
cJSON *job_event_json(job *j, const char *kind);
void job_emit(job *j, cJSON *ev);
void job_log_event(job *j, const char *message);
/* Persisted, logged, told to watchers; done and cancelled remove the
 * checkpoints, failed keeps them for job_resume. */
void set_state(job *j, enum job_state s);

/* jobs_json.c */
void devices_text(uint64_t mask, char *buf, size_t len); /* "cpu", "0,1" */
void add_rule_json(cJSON *o, const run_event *ev);       /* the rule's "rule" object */

/* job_devices.c: the job's devices resolved against the daemon's now (a
 * submitted, reloaded or resumed job): 0, or -1 with a "devices: ..."
 * message. The cores a CPU job takes to run (all of the daemon's, or K for
 * "cpu:K"; 0 for a GPU job), disjoint from the other running jobs':
 * job_cores_take 0, or -1 when they are not free. job_cores_release gives
 * them back as it ends. */
int job_devices_now(jobs *js, job *j, char *err, size_t errlen);
int job_cores_wanted(const jobs *js, const job *j);
int job_cores_take(jobs *js, job *j);
void job_cores_release(jobs *js, job *j);

/* job_thread.c: start the job's own thread (data load, run_job) on its
 * devices, once the scheduler says it may; the thread hands events to the
 * loop through js's locked queue. */
void job_start(jobs *js, job *j);
/* Ask j's run to stop as `how` says (RUN_STOP, RUN_STOP_CHECKPOINT,
 * RUN_STOP_NOW; 0: run on), read by its replicas at their next step: the
 * one way to change `stop`. job_request_cancel: a cancel asked of a running
 * job (its replicas stop now). job_will_resume: it goes back into the
 * queue, its next run resuming from its newest checkpoint. */
void job_ask_stop(job *j, int how);
void job_request_cancel(job *j);
void job_will_resume(job *j);

/* jobs_reload.c: every job in the state dir, back in js's queue. */
int jobs_reload(jobs *js, char *err, size_t errlen);

#endif
