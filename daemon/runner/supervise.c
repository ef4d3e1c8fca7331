/* The job thread's watch while the replicas run, every 50 ms: a cancel (or a
 * shutdown whose grace ran out) aborts the comm at once; a collective some
 * replica has not reached within comm.timeout_s fails the job, naming it and
 * the step it was last seen at; the turns on the cores are released once the
 * comm is aborted. */
#include <pthread.h>
#include <time.h>

#include "runner_impl.h"

void run_supervise(job_run *run)
{
    const double timeout = run->cfg->comm.timeout_s;
    pthread_mutex_lock(&run->lock);
    while (run->live > 0) {
        pthread_mutex_unlock(&run->lock);
        if (run->scheduled && comm_aborted(&run->comm))
            step_schedule_abort(&run->sched); /* a failed replica never ends its turn */
        int stop = run->hooks && run->hooks->stop
                       ? __atomic_load_n(run->hooks->stop, __ATOMIC_RELAXED) : 0;
        int missing;
        const char *what;
        if (stop & (RUN_STOP | RUN_STOP_NOW)) {
            pthread_mutex_lock(&run->lock);
            run->stopped_now = run->failed ? 0 : stop;
            pthread_mutex_unlock(&run->lock);
            comm_abort(&run->comm, "stopped");
        } else if (comm_overdue(&run->comm, comm_now_s(), timeout, &missing, &what) > 0) {
            run_fail(run, "replica %d did not reach the %s within comm.timeout_s = %g s "
                     "(it was last seen at step %ld): the job is stopped", run->first + missing, what,
                     timeout, __atomic_load_n(&run->at_step[missing], __ATOMIC_RELAXED));
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until); /* run.ended's clock (runner.c) */
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&run->lock);
        if (run->live > 0)
            pthread_cond_timedwait(&run->ended, &run->lock, &until);
    }
    pthread_mutex_unlock(&run->lock);
    /* The comm may have aborted itself (a GPU or NCCL failure in a
     * collective, which no replica reports): its reason fails the job. A
     * no-op when the job already failed or was stopped. */
    if (comm_aborted(&run->comm))
        run_fail(run, "%s", comm_abort_reason(&run->comm));
}
