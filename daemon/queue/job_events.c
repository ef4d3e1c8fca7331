/* What a job's watchers are told (jobs_impl.h): its events as NDJSON lines
 * through the queue's listener, and its state changes, persisted first. */
#include <stdlib.h>

#include "jobs_impl.h"

void job_emit(job *j, cJSON *ev)
{
    jobs *js = j->js;
    char *line = proto_line(ev);
    if (line && js->listener.on_event)
        js->listener.on_event(js->listener.user, j, line);
    free(line);
}

cJSON *job_event_json(job *j, const char *kind)
{
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "event", kind);
    cJSON_AddStringToObject(ev, "id", j->id);
    cJSON_AddNumberToObject(ev, "time", jobs_now_s());
    return ev;
}

/* A line in the job's log that watchers also get as a "log" event. */
void job_log_event(job *j, const char *message)
{
    job_log(j, "%s", message);
    cJSON *e = job_event_json(j, "log");
    cJSON_AddStringToObject(e, "message", message);
    job_emit(j, e);
}

/* A state change: persist it, log it, tell the watchers. A done or
 * cancelled job's checkpoints go once its end is on disk; a failed job
 * keeps them, to be resumed (job_resume.c). */
void set_state(job *j, enum job_state s)
{
    j->state = s;
    if (j->js) {
        jobs_track(j->js, j);
        j->js->after_epoch += job_state_final(s); /* its dependents may go on */
    }
    if (job_state_final(s)) {
        j->ended_at = jobs_now_s();
        j->ended_mono = jobs_mono_s();
    }
    if (write_status(j) == 0 && (s == JOB_DONE || s == JOB_CANCELLED))
        job_remove_checkpoints(j);
    cJSON *ev = job_event_json(j, "state");
    cJSON_AddStringToObject(ev, "state", job_shown_state(j));
    if (j->error[0])
        cJSON_AddStringToObject(ev, "error", j->error);
    job_emit(j, ev);
}

void jobs_tell_end(jobs *js, job *j)
{
    if (js->listener.on_end)
        js->listener.on_end(js->listener.user, j);
}
