/* The job store's record (daemon/queue/; jobs.c heads its files): `struct
 * job`, `struct jobs`, the hand-overs from the job threads, and the helpers
 * only the store's files share. On the store's include path alone: the
 * modules of the queue see the store through its door, impl/door/
 * jobs_store.h, where both structs are opaque, and the store's client (the
 * sweeps) through jobs_client.h; an include of this header from any of them
 * does not build, and neither does a use of a field.
 *
 * So the store's files alone write the record. A module above reads it
 * and changes it through the store's functions (set_state, job_commit,
 * job_ask_stop, job_log...), the few fields a module must change each
 * through one function that says who may: why a job waits
 * (job_set_waiting: admission and the scheduling glue), the devices a
 * gpu:N job is placed on (job_place: the glue), why it ended
 * (job_set_error: the glue, the client's early stop), a cancel asked
 * (job_request_cancel: the glue), a run to resume (job_will_resume: the
 * glue, a resume), a resumed job's end forgotten (job_reset_end) and a new
 * job's config read (job_read_config: a submission). Each module keeps its
 * own fields in a part of its own, which the store allocates with each job
 * (and one with the queue) but never reads: its struct is defined in the
 * module's header in impl/<module>/, reached through job_part and jobs_part
 * with the module's enum job_part. What the store needs of them (a job's
 * fields in its status, read back at a reload; a run's end) goes through
 * js->hooks, which queue.c fills in; what it tells its client, through
 * js->client. */
#ifndef PARLE_JOBS_IMPL_H
#define PARLE_JOBS_IMPL_H

#include <pthread.h>

#include "jobs_store.h"

/* Progress events beyond this many undrained ones are dropped (never evals,
 * logs or ends), so a stalled loop cannot grow memory without bound. */
#define QUEUE_MAX_PROGRESS 4096
#define STATUS_WRITE_INTERVAL_S 5.0

#define JOB_FILE_MAX (1u << 20)        /* job.json, status.json */
#define METRICS_FILE_MAX (1u << 30)
#define SAFETENSORS_HEADER_MAX (16u << 20)
/* A final master that could not be written is tried again this often. */
#define SAVE_RETRY_MS 1000

/* job_index.c: the list in submission order. jobs_link appends j (its id
 * set), jobs_unlink takes it out (not freed), jobs_index_free frees the
 * ids' hash. jobs_track puts j in or out of the lists of the queued or
 * running jobs and of the running ones, as its state and thread_running now
 * say: after each change of either. */
void jobs_link(jobs *js, job *j);
void jobs_unlink(jobs *js, job *j);
void jobs_track(jobs *js, job *j);
void jobs_index_free(jobs *js);

/* metrics.jsonl: one line per event, fsync'd when `durable` (evaluations). */
void job_write_metrics(job *j, cJSON *ev, int durable);
/* Keep the metrics lines of steps <= keep_step (the run continues from
 * there) and drop the rest, including a torn last line. */
void job_trim_metrics(job *j, long keep_step);

/* job_events.c: what watchers are told (the listener's on_event). An
 * event object {"event": kind, "id", "time"}; job_emit sends it as one
 * line and frees it. job_log_event: a log line that is also a "log" event. */
cJSON *job_event_json(job *j, const char *kind);
void job_emit(job *j, cJSON *ev);
void job_log_event(job *j, const char *message);

/* jobs_json.c: the rule's "rule" object of an event. */
void add_rule_json(cJSON *o, const run_event *ev);

/* job_devices.c: a CPU job's cores given back as it ends. */
void job_cores_release(jobs *js, job *j);

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
    char waiting[JOB_WAITING_MAX];
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

#endif
