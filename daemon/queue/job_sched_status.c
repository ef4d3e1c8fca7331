/* The scheduling glue's fields in a job's status (job_schedule.h), as the
 * store asks through its hooks: written into status answers and
 * status.json, read back from a reloaded status.json, the word a queued
 * job is shown under, and what a run's start or a reload resets. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jobs_store.h"
#include "job_schedule.h"
#include "owner_usage.h"

void job_status_sched(const job *j, cJSON *o)
{
    const struct job_sched *sc = sched_of(j);
    cJSON_AddNumberToObject(o, "priority", sc->priority);
    cJSON_AddBoolToObject(o, "held", sc->held);
    /* Who holds it, whether as an admin (then only an admin releases it);
     * and what places it in the queue (docs/architecture.md, "Scheduling"):
     * besides priority and submitted_at, whether it resumes a checkpoint,
     * its owner's recent device use and how long it has been eligible to run
     * (--oldest-first-after). */
    if (sc->held)
        cJSON_AddStringToObject(o, "held_by", sc->held_by);
    else
        cJSON_AddNullToObject(o, "held_by");
    cJSON_AddBoolToObject(o, "admin_hold", sc->held && sc->admin_hold);
    cJSON_AddBoolToObject(o, "resuming", sc->resume_first);
    cJSON_AddNumberToObject(o, "owner_usage_s", owner_usage_of(jobs_of(j), job_owner_of(j)->uid));
    cJSON_AddNumberToObject(o, "eligible_s", job_eligible_s(j, jobs_mono_s()));
    const int eligible = job_state_of(j) == JOB_QUEUED && !job_thread_running(j) && !sc->held &&
                         (!job_config_of(j)->after[0] || sc->after_met);
    add_num_or_null(o, "eligible_as_of", eligible ? jobs_now_s() : NAN);
    /* The job's last preemption, if any: by whom and when it went back. */
    if (sc->preempted_by[0])
        cJSON_AddStringToObject(o, "preempted_by", sc->preempted_by);
    else
        cJSON_AddNullToObject(o, "preempted_by");
    add_num_or_null(o, "preempted_at", sc->preempted_at > 0 ? sc->preempted_at : NAN);
}

/* The priority as last set (the job file's when missing or out of range),
 * held (by whom, whether an admin), the last preemption. */
void job_restore_sched(job *j, const cJSON *st, const char *state)
{
    struct job_sched *sc = sched_of(j);
    const double priority = status_number(st, "priority", job_config_of(j)->priority);
    sc->priority = priority >= JOB_PRIORITY_MIN && priority <= JOB_PRIORITY_MAX &&
                           priority == floor(priority)
                       ? (int)priority
                       : job_config_of(j)->priority;
    sc->held = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "held"));
    const char *held_by = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "held_by"));
    snprintf(sc->held_by, sizeof sc->held_by, "%s", sc->held && held_by ? held_by : "");
    sc->admin_hold = sc->held && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "admin_hold"));
    const char *by = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "preempted_by"));
    if (by && numbered_id(by, 'j') >= 0)
        snprintf(sc->preempted_by, sizeof sc->preempted_by, "%s", by);
    sc->preempted = strcmp(state, "preempted") == 0;
    sc->preempted_at = status_number(st, "preempted_at", 0);
}

const char *job_queued_shown_as(const job *j)
{
    const struct job_sched *sc = sched_of(j);
    return sc->held ? "held" : sc->preempted ? "preempted" : NULL;
}

int job_queued_word(const char *state)
{
    return strcmp(state, "held") == 0 || strcmp(state, "preempted") == 0;
}

void job_run_starting(job *j)
{
    sched_of(j)->preempted = 0; /* preempted_by and preempted_at stay: its last preemption */
}

void job_requeued_at_reload(job *j, int was_running)
{
    sched_of(j)->resume_first = was_running || sched_of(j)->preempted;
}
