/* The queue's scheduling on the loop thread (job_schedule.h): the queue's
 * state handed to the scheduler's decision (daemon/sched/schedule.h) and
 * what it decides carried out: jobs started once admission by memory lets
 * them, running jobs asked to checkpoint and stop for a higher priority,
 * and why every other queued job waits, in its status; time limits and
 * dependencies. The commands on one job (priority, hold, cancel) are
 * job_control.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_store.h"
#include "job_admission.h"
#include "job_schedule.h"
#include "owner_usage.h"
#include "mpi_node.h"
#include "schedule.h"

/* While a job is asked to stop for another, the queue is looked at this
 * often: the grace (--preempt-grace) is counted from it. */
#define PREEMPT_CHECK_MS 1000
/* How often the queue is looked at again while a job waits for memory: it
 * may free outside parled, where no event tells (a job's end and a submit
 * retry at once as well). */
#define MEMORY_RETRY_MS 2000
/* Why a wait for host memory preempts no job: what holds it is not known to
 * be a job of lower priority. It keeps no devices from later jobs. */
#define MEMORY_NO_PREEMPT "; it preempts no job (the memory may be held outside parled) and " \
                          "keeps no devices from jobs that fit now"

/* The scheduler's view of job j: a queued "gpu:N" job may take any N of
 * the daemon's GPUs (those of its last run, its device mask, are no longer
 * its own once it is back in the queue). */
static sched_job sched_view(const jobs *js, const job *j, long order, int after_pending,
                            unsigned pass, double now)
{
    const struct job_sched *sc = sched_of(j);
    const job_config *cfg = job_config_of(j);
    const int running = job_thread_running(j);
    const int any = !running && cfg->device_spec.kind == DEVICES_GPU && cfg->device_spec.count;
    const unsigned uid = job_owner_of(j)->uid;
    return (sched_job){
        .running = running,
        .stopping = running && job_stop_asked(j) != 0,
        .held = sc->held,
        .resuming = sc->resume_first,
        .after_pending = after_pending,
        .memory_wait = !running && sc->memory_pass == pass,
        .priority = sc->priority,
        .order = order,
        .owner = uid,
        .usage = owner_usage_of(js, uid),
        .eligible_s = job_eligible_s(j, now),
        .started_at = job_run_began_mono(j),
        .was_preempted = sc->run_resumed_preemption,
        .time_limit = job_time_limit(js, j),
        .gpus = (any ? jobs_device_mask(js) : job_device_mask(j)) & ~DEV_CPU,
        .ngpus = any ? cfg->device_spec.count : 0,
        .gpu_share = sched_share_milli(cfg->gpu_share),
        .cores = job_cores_wanted(js, j),
    };
}

/* Why `ahead` comes before `j` in the queue's order (sched_decide's). */
static const char *ahead_because(const jobs *js, const job *ahead, const job *j)
{
    const double now = jobs_mono_s(), aged = jobs_limits_of(js)->oldest_first_s;
    if (sched_of(ahead)->priority != sched_of(j)->priority)
        return "a higher priority";
    if (aged > 0 && job_eligible_s(ahead, now) >= aged && job_eligible_s(j, now) < aged)
        return "it was eligible to run longer than --oldest-first-after";
    if (aged > 0 && job_eligible_s(j, now) >= aged)
        return "it was eligible to run longer";
    if (sched_of(ahead)->resume_first != sched_of(j)->resume_first)
        return "it resumes a checkpoint after a preemption or a restart";
    if (owner_usage_of(js, job_owner_of(ahead)->uid) != owner_usage_of(js, job_owner_of(j)->uid))
        return "its owner used less device time recently";
    return "submitted earlier";
}

/* " j0002 (alice), j0003 (bob) and 2 more" for the decision's blockers. */
static void blockers_text(job **list, const sched_decision *d, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int k = 0; k < d->nblockers && k < SCHED_BLOCKERS && n < len; k++) {
        const job *b = list[d->blockers[k]];
        n += (size_t)snprintf(out + n, len - n, "%s %s (%s)", k ? "," : "", job_id(b),
                              job_owner_of(b)->user);
    }
    if (d->nblockers > SCHED_BLOCKERS && n < len)
        snprintf(out + n, len - n, " and %d more", d->nblockers - SCHED_BLOCKERS);
}

/* What a queued job waits for, in words (job_set_waiting; the figures of
 * a memory wait are admission's, not here). Not written to status.json here:
 * a job's end could change a thousand queued jobs' reasons, and a restart
 * works them out again. */
static void set_waiting(jobs *js, job *j, job **list, const sched_decision *d)
{
    /* Decided as last time: worded as then (but a job it runs after is
     * named with its state now, a sweep's count moves only as jobs end or
     * are queued, and admission words a wait for memory anew). */
    _Static_assert(sizeof sched_of(j)->said.blockers / sizeof sched_of(j)->said.blockers[0] ==
                   SCHED_BLOCKERS, "waiting_said keeps the decision's blockers");
    struct waiting_said said;
    memset(&said, 0, sizeof said); /* (compared whole, padding too) */
    said.wait = d->wait;
    said.nblockers = d->nblockers;
    said.devices = job_device_mask(j);
    said.after_epoch = d->wait == SCHED_AFTER ? jobs_after_epoch(js) : 0;
    for (int k = 0; k < d->nblockers && k < SCHED_BLOCKERS; k++)
        said.blockers[k] = job_seq(list[d->blockers[k]]);
    if (d->wait == SCHED_QUEUE)
        said.because = ahead_because(js, list[d->blockers[0]], j);
    struct job_sched *sc = sched_of(j);
    const int same = !memcmp(&said, &sc->said, sizeof said) && job_waiting(j)[0];
    sc->said = said;
    /* Admission words a memory wait; a job's state is named by id. */
    if (same && d->wait != SCHED_MEMORY &&
        (d->wait != SCHED_AFTER || !strchr(job_config_of(j)->after, 'j')))
        return;
    char text[JOB_WAITING_MAX], who[384], dev[256];
    blockers_text(list, d, who, sizeof who);
    devices_text(job_device_mask(j), dev, sizeof dev);
    const job *first = d->nblockers ? list[d->blockers[0]] : NULL;
    switch (d->wait) {
    case SCHED_HOLD:
        snprintf(text, sizeof text, "held: it runs once released (parlectl release %s)", job_id(j));
        break;
    case SCHED_DEVICES:
        snprintf(text, sizeof text, "devices: %s held by%s", dev, who);
        break;
    case SCHED_QUEUE:
        snprintf(text, sizeof text, "queue: %s kept for %s (%s), ahead by %s", dev, job_id(first),
                 job_owner_of(first)->user, said.because);
        break;
    case SCHED_STOPPING:
        snprintf(text, sizeof text, "stopping: waiting for%s to checkpoint and stop", who);
        break;
    case SCHED_FAULTED:
        snprintf(text, sizeof text, "faulted: a GPU of %s hit a device fault; it runs after "
                 "parled re-executes itself", dev);
        break;
    case SCHED_ONE_AT_A_TIME:
        snprintf(text, sizeof text, "mpi: one job runs at a time across the ranks");
        break;
    case SCHED_AFTER:
        job_after_check(js, j, text, sizeof text);
        break;
    case SCHED_QUOTA:
        snprintf(text, sizeof text, "quota: %s's running jobs hold parled's --max-gpus-per-user "
                 "(%d) or --max-cores-per-user (%d) with this one's devices:%s",
                 job_owner_of(j)->user, jobs_limits_of(js)->gpus_per_user,
                 jobs_limits_of(js)->cores_per_user, who);
        break;
    case SCHED_MEMORY: /* admission's figures (memory or disk) are its wait already */
        if (strncmp(job_waiting(j), "memory:", 7) == 0 &&
            !strstr(job_waiting(j), MEMORY_NO_PREEMPT) &&
            strlen(job_waiting(j)) + sizeof MEMORY_NO_PREEMPT < JOB_WAITING_MAX) {
            char before[JOB_WAITING_MAX];
            snprintf(before, sizeof before, "%s", job_waiting(j));
            job_set_waiting(j, "%s%s", before, MEMORY_NO_PREEMPT);
        }
        return;
    default:
        return;
    }
    job_set_waiting(j, "%s", text);
}

void job_ask_requeue(job *j, const job *by)
{
    sched_of(j)->requeue_asked_mono = jobs_mono_s();
    if (by) {
        snprintf(sched_of(j)->preempted_by, sizeof sched_of(j)->preempted_by, "%s", job_id(by));
        job_log(j, "preempted by %s (%s, priority %d over %d): checkpointing at the next step "
                "boundary, then back in the queue", job_id(by), job_owner_of(by)->user,
                sched_of(by)->priority, sched_of(j)->priority);
    } else {
        job_log(j, "held: checkpointing at the next step boundary, then back in the queue");
    }
    job_ask_stop(j, RUN_STOP_CHECKPOINT);
}

/* A job asked to go back into the queue that has not checkpointed within
 * --preempt-grace stops at once, as a shutdown past --stop-timeout does:
 * it resumes from its last complete checkpoint. 1 while any is asked. */
static int requeues_pending(jobs *js)
{
    int asked = 0;
    const double now = jobs_mono_s();
    for (job *j = jobs_running_next(js, NULL); j; j = jobs_running_next(js, j)) {
        if (!job_thread_running(j) || sched_of(j)->requeue_asked_mono <= 0 ||
            job_cancel_requested(j))
            continue;
        asked = 1;
        if (!(job_stop_asked(j) & RUN_STOP_NOW) &&
            now - sched_of(j)->requeue_asked_mono > jobs_limits_of(js)->preempt_grace_s) {
            job_log(j, "no checkpoint within --preempt-grace (%.0f s): stopping now; it resumes "
                    "from its last checkpoint", jobs_limits_of(js)->preempt_grace_s);
            job_ask_stop(j, RUN_STOP_NOW);
        }
    }
    return asked;
}

/* Why job j, asked to make room for the job it names in preempted_by, need
 * not any more: that job was cancelled, ended, removed, held or lowered to
 * j's priority or below; NULL while it still waits for j's devices. */
static const char *preemptor_gone(jobs *js, const job *j, const job **by)
{
    *by = jobs_index_find(js, sched_of(j)->preempted_by);
    if (!*by)
        return "was removed";
    if (job_state_of(*by) == JOB_CANCELLED)
        return "was cancelled";
    if (job_state_of(*by) != JOB_QUEUED)
        return job_thread_running(*by) ? NULL : "ended";
    if (sched_of((*by))->held)
        return "was held";
    return sched_of((*by))->priority <= sched_of(j)->priority ? "was lowered" : NULL;
}

/* A preemption whose preemptor no longer needs the devices is withdrawn:
 * the victim's stop is called off if no replica has taken it up (they add
 * RUN_STOPPING as they do, runner.h, so a cleared request is seen by none);
 * a victim already stopping keeps preempted_by and is queued again as
 * preempted, to resume first (job_requeued).
 * The preemptor's owner is charged the victim's devices for the time they
 * were asked for, so that asking and cancelling is never free. */
static void withdraw_preemptions(jobs *js)
{
    const double now = jobs_mono_s();
    for (job *j = jobs_running_next(js, NULL); j; j = jobs_running_next(js, j)) {
        const job *by;
        const char *why;
        if (!job_thread_running(j) || sched_of(j)->requeue_asked_mono <= 0 || sched_of(j)->held ||
            job_cancel_requested(j) || !sched_of(j)->preempted_by[0] ||
            !(why = preemptor_gone(js, j, &by)))
            continue;
        const int called_off = job_call_off_stop(j);
        const double charge = job_device_units(js, j) * (now - sched_of(j)->requeue_asked_mono);
        if (by)
            owner_usage_charge(js, job_owner_of(by), charge);
        job_log(j, "preemption withdrawn: %s %s before this job stopped; %s",
                sched_of(j)->preempted_by, why,
                called_off ? "it runs on" : "it was stopping already, and resumes first");
        sched_of(j)->requeue_asked_mono = 0;
        if (called_off)
            sched_of(j)->preempted_by[0] = '\0';
    }
}

static void on_timer(uv_timer_t *t) { jobs_schedule(t->data); }

void jobs_schedule_init(jobs *js)
{
    uv_timer_init(jobs_loop(js), &sched_state(js)->requeue_check);
    sched_state(js)->requeue_check.data = js;
    uv_timer_init(jobs_loop(js), &sched_state(js)->memory_retry);
    sched_state(js)->memory_retry.data = js;
    uv_timer_init(jobs_loop(js), &sched_state(js)->time_limit_check);
    sched_state(js)->time_limit_check.data = js;
    uv_timer_init(jobs_loop(js), &sched_state(js)->schedule_soon);
    sched_state(js)->schedule_soon.data = js;
}

void jobs_schedule_soon(jobs *js)
{
    if (!jobs_stopping(js) && !uv_is_active((uv_handle_t *)&sched_state(js)->schedule_soon))
        uv_timer_start(&sched_state(js)->schedule_soon, on_timer, 0, 0);
}

void jobs_schedule_pending(jobs *js)
{
    if (uv_is_active((uv_handle_t *)&sched_state(js)->schedule_soon))
        jobs_schedule(js);
}

/* After a pass: retry it every few seconds while a job waits for memory
 * or disk (admission said so in this call's passes: memory_waits), which may free
 * outside parled. Nothing else a job waits for (a hold, a dependency,
 * devices, a quota) changes but by an event that schedules anyway. */
static void memory_retry(jobs *js)
{
    const int waiting = sched_state(js)->memory_waits;
    if (waiting && !jobs_stopping(js) && !sched_state(js)->memory_retry_on)
        uv_timer_start(&sched_state(js)->memory_retry, on_timer, MEMORY_RETRY_MS, MEMORY_RETRY_MS);
    else if ((!waiting || jobs_stopping(js)) && sched_state(js)->memory_retry_on)
        uv_timer_stop(&sched_state(js)->memory_retry);
    sched_state(js)->memory_retry_on = waiting && !jobs_stopping(js);
}

/* Whether the job that victim v is to be preempted for waits for host
 * memory or the state dir's disk even once its victims stop (what they hold
 * and are yet to write counted as free): then it preempts none, and is
 * marked waiting for the pass decided again (1). A victim whose use is not
 * estimated may free enough: not held back. */
static int preemptor_waits(jobs *js, job **list, const sched_decision *out, int n, int v,
                           unsigned pass)
{
    const int q = out[v].preempted_for;
    job *p = list[q];
    size_t memory = 0;
    uint64_t disk = 0;
    for (int k = 0; k < n; k++)
        if (out[k].action == SCHED_PREEMPT && out[k].preempted_for == q) {
            const job *r = list[k];
            if (admit_of(r)->need_known != 1)
                return 0;
            memory += admit_of(r)->need.host;
            disk += job_disk_to_write(r);
        }
    if (!job_waits_for_memory_preempting(js, p, memory) && !job_waits_for_disk(js, p, disk))
        return 0;
    sched_of(p)->memory_pass = pass;
    sched_state(js)->memory_waits = 1;
    return 1;
}

/* Carry out the decisions in the queue's order: starts (a "gpu:N" job on
 * the GPUs picked for it), preemptions, and the reasons to wait. A job the
 * decision starts that must wait for host memory stops the pass: 1, and
 * the decision is made again with it waiting (keeping nothing); so does a
 * job running jobs would be preempted for that waits even once they stop. */
static int apply(jobs *js, job **list, const sched_decision *out, int n, int queued,
                 unsigned pass)
{
    int *by_turn = malloc((size_t)(queued ? queued : 1) * sizeof *by_turn);
    if (!by_turn)
        return 0;
    int again = 0;
    for (int i = 0; i < n; i++)
        if (out[i].action == SCHED_PREEMPT && preemptor_waits(js, list, out, n, i, pass))
            again = 1;
    for (int i = 0; i < n && !again; i++) {
        if (out[i].turn >= 0)
            by_turn[out[i].turn] = i;
        if (out[i].action == SCHED_PREEMPT)
            job_ask_requeue(list[i], list[out[i].preempted_for]);
    }
    for (int k = 0; k < queued && !again; k++) {
        const int i = by_turn[k];
        job *j = list[i];
        if (out[i].action != SCHED_START) {
            set_waiting(js, j, list, &out[i]);
            continue;
        }
        const uint64_t may_take = job_device_mask(j);
        if (job_config_of(j)->device_spec.count)
            job_place(j, out[i].gpus);
        /* Memory and the state dir's disk may free outside parled: a job
         * waiting for either keeps no devices. */
        if (job_waits_for_memory(js, j) || job_waits_for_disk(js, j, 0)) {
            job_place(j, may_take);
            sched_of(j)->memory_pass = pass;
            sched_state(js)->memory_waits = 1;
            again = 1;
        } else if (job_cores_take(js, j) == 0) {
            /* What this run is: one resuming a preemption keeps its
             * minimum run; it ranks as resuming no more. */
            sched_of(j)->run_resumed_preemption = sched_of(j)->preempted;
            sched_of(j)->resume_first = 0;
            job_set_eligible(j, 0, jobs_mono_s());
            if (out[i].backfilled)
                job_log(j, "backfilled: it ends by its time limit before %s could start",
                        job_id(list[out[i].blockers[0]]));
            job_start(js, j);
        } else {
            job_place(j, may_take);
        }
    }
    free(by_turn);
    return again;
}

/* A queued job whose dependency ended so that it never starts ends
 * cancelled, saying which and why. 1 if it did; *pending: one has not ended. */
static int cancel_for_dependency(jobs *js, job *j, int *after_pending)
{
    char why[JOB_ERR_MAX - 64];
    struct job_sched *sc = sched_of(j);
    *after_pending = 0;
    if (!job_config_of(j)->after[0] || sc->after_met || job_state_of(j) != JOB_QUEUED ||
        job_thread_running(j))
        return 0;
    if (sc->after_pending_at == jobs_after_epoch(js)) { /* nothing ended since it was looked at */
        *after_pending = 1;
        return 0;
    }
    const int r = job_after_check(js, j, why, sizeof why);
    *after_pending = r > 0;
    sc->after_pending_at = r > 0 ? jobs_after_epoch(js) : 0;
    sc->after_met = r == 0; /* once met, a dependency removed later does not matter */
    if (r >= 0)
        return 0;
    job_set_error(j, "not started: %s", why);
    job_log(j, "cancelled: %s", job_error(j));
    set_state(j, JOB_CANCELLED);
    job_log_stop(j);
    jobs_tell_end(js, j);
    return 1;
}

/* Running jobs at their time limit are asked to checkpoint and end
 * "timeout"; the timer wakes the queue at the next limit. */
static void time_limits(jobs *js)
{
    const double now = jobs_mono_s();
    double next = INFINITY;
    for (job *j = jobs_running_next(js, NULL); j; j = jobs_running_next(js, j)) {
        const double limit = job_time_limit(js, j);
        if (!job_thread_running(j) || limit <= 0 || job_stop_asked(j) || job_cancel_requested(j))
            continue;
        const double left = job_run_began_mono(j) + limit - now;
        if (left > 0) {
            next = fmin(next, left);
            continue;
        }
        sched_of(j)->timing_out = 1;
        sched_of(j)->requeue_asked_mono = now;
        job_log(j, "time limit of %.0f s reached: checkpointing at the next step boundary, "
                "then it ends timeout (resumable: parlectl resume %s)", limit, job_id(j));
        job_ask_stop(j, RUN_STOP_CHECKPOINT);
    }
    uv_timer_stop(&sched_state(js)->time_limit_check);
    if (isfinite(next))
        uv_timer_start(&sched_state(js)->time_limit_check, on_timer, (uint64_t)(next * 1000) + 1,
                       0);
}

/* One decision on the queue as it is, carried out: 1 if it must be made
 * again (a job waits for memory now). *nqueued: the queued jobs. */
static int schedule_pass(jobs *js, unsigned pass, int *nqueued)
{
    int queued = 0, after_pending = 0;
    const int n = (int)jobs_nactive(js); /* (a bound: some may have ended, their threads running) */
    job **list = malloc((size_t)(n ? n : 1) * sizeof *list);
    sched_job *view = malloc((size_t)(n ? n : 1) * sizeof *view);
    sched_decision *out = malloc((size_t)(n ? n : 1) * sizeof *out);
    sched_input in = {.jobs = view, .ncores = jobs_ncores(js), .faulted = jobs_faulted_mask(js),
                      .one_at_a_time = mpi_node_size() > 1, .preempt = 1, .backfill = 1,
                      .now = jobs_mono_s(), .min_run_s = jobs_limits_of(js)->preempt_min_run_s,
                      .oldest_first_s = jobs_limits_of(js)->oldest_first_s,
                      .max_gpus_per_owner = jobs_limits_of(js)->gpus_per_user,
                      .max_cores_per_owner = jobs_limits_of(js)->cores_per_user};
    memcpy(in.links, jobs_gpu_links(js), sizeof in.links);
    int ok = list && view && out, again = 0;
    /* (a job cancelled for its dependency leaves the list: next first) */
    for (job *j = jobs_active_next(js, NULL), *next; j && ok && in.njobs < n; j = next) {
        next = jobs_active_next(js, j);
        const int running = job_thread_running(j);
        if (running ||
            (job_state_of(j) == JOB_QUEUED && !cancel_for_dependency(js, j, &after_pending))) {
            const int waits_after = !running && after_pending;
            /* Its age counts while it could run (the pass runs as a hold,
             * a release or a dependency's end changes that). */
            job_set_eligible(j, !running && !sched_of(j)->held && !waits_after, in.now);
            list[in.njobs] = j;
            view[in.njobs++] = sched_view(js, j, job_seq(j), waits_after, pass, in.now);
            queued += !running;
        }
    }
    if (ok && sched_decide(&in, out) == 0)
        again = apply(js, list, out, in.njobs, queued, pass);
    *nqueued = queued;
    free(list);
    free(view);
    free(out);
    return again;
}

void jobs_schedule(jobs *js)
{
    uv_timer_stop(&sched_state(js)->schedule_soon); /* this pass is the one it waited for */
    if (jobs_stopping(js))
        return;
    const uint64_t began = uv_hrtime();
    jobs_usage_update(js);
    withdraw_preemptions(js);
    /* Each pass that finds a job waiting for memory decides again with it
     * waiting (marked with this call's number): at most once per queued job. */
    const unsigned pass = ++sched_state(js)->schedule_passes;
    sched_state(js)->memory_waits = 0;
    int queued = 0;
    for (int k = 0; schedule_pass(js, pass, &queued) && k < queued; k++)
        ;
    time_limits(js); /* those just started too */
    memory_retry(js);
    if (requeues_pending(js)) {
        if (!sched_state(js)->requeue_check_on)
            uv_timer_start(&sched_state(js)->requeue_check, on_timer, PREEMPT_CHECK_MS,
                           PREEMPT_CHECK_MS);
        sched_state(js)->requeue_check_on = 1;
    } else if (sched_state(js)->requeue_check_on) {
        uv_timer_stop(&sched_state(js)->requeue_check);
        sched_state(js)->requeue_check_on = 0;
    }
    sched_state(js)->schedule_ns += uv_hrtime() - began;
}
