/* run_state.h: what the runner's helpers do to the job besides their own
 * work. */
#include "run_state.h"

#include <stdarg.h>
#include <stdio.h>

void run_fail(job_run *run, const char *fmt, ...)
{
    pthread_mutex_lock(&run->lock);
    if (!run->failed && !run->stopped_now) {
        run->failed = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(run->err, sizeof run->err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&run->lock);
    comm_abort(&run->comm, "job failed");
}

void run_emit(job_run *run, const run_event *ev)
{
    if (run->hooks && run->hooks->on_event)
        run->hooks->on_event(run->hooks->user, ev);
}

void run_emit_log(job_run *run, const char *fmt, ...)
{
    run_event ev = {.kind = RUN_EV_LOG, .epochs = run->cfg->epochs};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.message, sizeof ev.message, fmt, ap);
    va_end(ap);
    run_emit(run, &ev);
}
