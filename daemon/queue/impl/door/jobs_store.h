/* The job store's door for the other modules of the queue's folder
 * (admission, the scheduling glue, fair share's glue, a submission, the
 * removals and queue.c): `struct job` and `struct jobs` are opaque here,
 * read through the store's functions and changed through the few that say
 * who may (impl/store/jobs_impl.h, which only the store's files see). Each
 * module is a static library of its own (meson.build) and declares its
 * functions in its own header: schedule/job_schedule.h (the scheduling
 * glue), admission/job_admission.h, usage/owner_usage.h (fair share's glue)
 * and remove/job_remove.h; a submission's (job_submit.c) are in
 * jobs_client.h, as the client submits through them. A module is compiled
 * with the headers of the modules it may call and no other: an include of
 * another's does not build. */
#ifndef PARLE_JOBS_STORE_H
#define PARLE_JOBS_STORE_H

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
#define JOB_ERR_MAX 4096          /* why a job ended */
#define JOB_WAITING_MAX 1024      /* why a job waits */

/* The modules whose fields ride with each job and with the queue: each
 * part's struct is the module's (its header), the store only sizes it;
 * the last is the client's (jobs_client.h), a job's only. */
enum job_part { JOB_PART_ADMIT, JOB_PART_SCHED, JOB_PART_FAIR, JOB_PART_REMOVE, JOB_PART_CLIENT,
                JOB_PARTS };

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
void *job_part(const job *j, enum job_part k);
void *jobs_part(const jobs *js, enum job_part k);

/* The record read (job_record.c): a job's and the queue's fields, each
 * through its function, as the modules need them. */
jobs *jobs_of(const job *j);
const job_config *job_config_of(const job *j);
uint64_t job_device_mask(const job *j);  /* its devices: resolved, or placed (gpu:N) */
int job_thread_running(const job *j);
const char *job_waiting(const job *j);   /* why it waits, or "" */
const char *job_error(const job *j);
/* What job_ask_stop last asked of its run (0: nothing). */
int job_stop_asked(const job *j);
double job_run_began_mono(const job *j); /* jobs_mono_s; 0 when not running */
double job_submitted_at(const job *j);   /* wall clock */
double job_ended_mono(const job *j);
long job_seq(const job *j);              /* its place in submission order (1 first) */
const run_event *job_last(const job *j); /* the latest progress or eval values */
uint64_t job_disk_bytes(const job *j);   /* its folder's, as of its last status.json */
/* Whether its current run has reported its memory yet; the peak bytes per
 * device as a JSON object's text, or "". */
int job_memory_reported(const job *j);
const char *job_memory_text(const job *j);
int job_cores_held(const job *j);        /* a running CPU job's cores */
int job_logging(const job *j);           /* it writes its log.txt (submitted, not ended) */
const jobs_limits *jobs_limits_of(const jobs *js);
uv_loop_t *jobs_loop(const jobs *js);
/* Shutting down (jobs_stop_all), or stopping for parled's re-exec. */
int jobs_stopping(const jobs *js);
int jobs_restarting(const jobs *js);
/* Counts what may change a dependency's answer (job_after_check). */
unsigned long jobs_after_epoch(const jobs *js);
int jobs_ncores(const jobs *js);                 /* the daemon's CPU cores */
uint64_t jobs_device_mask(const jobs *js);       /* the daemon's devices */
uint64_t jobs_faulted_mask(const jobs *js);      /* those faulted (jobs_faulted) */
const uint64_t *jobs_gpu_links(const jobs *js);  /* per GPU, those joined by NVLink/P2P */
size_t jobs_nactive(const jobs *js);             /* queued or running */
const char *jobs_dir_of(const jobs *js);         /* <state dir>/jobs */
const jobs_client *jobs_client_of(const jobs *js);
/* Checkpoints the running jobs wrote and failed to write since parled
 * started. */
void jobs_checkpoints(const jobs *js, unsigned long *written, unsigned long *failed);
/* The watchers are told j has ended (the listener's on_end). */
void jobs_tell_end(jobs *js, job *j);

/* job_index.c: a job by id (the ids' hash); the queued or running jobs,
 * and those running, in submission order: the first after j (NULL: the
 * first), or NULL at the end; uid's queued and running jobs, or -1 when not
 * known (count them). */
job *jobs_index_find(const jobs *js, const char *id);
job *jobs_active_next(const jobs *js, const job *j);
job *jobs_running_next(const jobs *js, const job *j);
int jobs_owner_active(const jobs *js, unsigned uid);

/* job_record.c: the record read, calling none of the queue's files (also
 * job_state_name, job_file_path... of jobs.h), and the fields a module
 * above may change, each through its one function: why a queued job
 * waits (admission, the scheduling glue), the devices a job that asks for
 * gpu:N is placed on (the glue), and a resumed job's end forgotten (its
 * error, end time, cancel and eligible time; job_resume.c). Its error is
 * job_set_error's (jobs_client.h). */
void job_set_waiting(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void job_place(job *j, uint64_t devices);
/* A new job's config read from its job file's JSON (a submission's):
 * 0, or -1 with a message. */
int job_read_config(job *j, const cJSON *job_json, char *err, size_t errlen);
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
/* Once a done or cancelled job's end is on disk, or a failed job is run
 * again from scratch, the checkpoints are of no use (the master for export
 * stays): every file and directory under ckpt goes. */
void job_remove_checkpoints(job *j);

/* job_events.c: a job's state set: persisted, logged, told to watchers;
 * done and cancelled remove the checkpoints, failed keeps them for
 * job_resume. */
void set_state(job *j, enum job_state s);

/* jobs_json.c: a device mask as text ("cpu", "0,1"). */
void devices_text(uint64_t mask, char *buf, size_t len);

/* job_devices.c: the job's devices resolved against the daemon's now (a
 * submitted, reloaded or resumed job): 0, or -1 with a "devices: ..."
 * message. The cores a CPU job takes to run (all of the daemon's, or K for
 * "cpu:K"; 0 for a GPU job), disjoint from the other running jobs':
 * job_cores_take 0, or -1 when they are not free. */
int job_devices_now(jobs *js, job *j, char *err, size_t errlen);
int job_cores_wanted(const jobs *js, const job *j);
int job_cores_take(jobs *js, job *j);

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
/* A checkpoint stop asked of j's run, called off if its replicas have not
 * taken it yet: 1 when called off (it runs on), 0 when it was taken. */
int job_call_off_stop(job *j);
void job_request_cancel(job *j);
void job_will_resume(job *j);

/* jobs_reload.c: every job in the state dir, back in js's queue. */
int jobs_reload(jobs *js, char *err, size_t errlen);

#endif
