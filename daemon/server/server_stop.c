/* The daemon's stop (server.h): a shutdown's grace for the running jobs to
 * checkpoint, the re-exec after a device fault, and the end once no job
 * runs. Called by the ops (shutdown), the job events (server_lifecycle.c)
 * and main.c; calls only the connections' end and the turns' close. */
#include "server.h"

#include <stdint.h>
#include <unistd.h>

#include "jobs.h"
#include "metrics.h"
#include "mpi_node.h"
#include "server_impl.h"

/* Stop serving: no more connections (a socket systemd passed stays open
 * for the next process when it is a re-exec), every client ended. */
static void close_listener(server *s)
{
    uv_os_fd_t fd;
    if (s->restarting && s->activated && uv_fileno((uv_handle_t *)&s->listener, &fd) == 0)
        s->keep_fd = dup(fd); /* without FD_CLOEXEC: it crosses the exec */
    uv_close((uv_handle_t *)&s->listener, NULL);
    server_remove_socket(s);
    server_turns_close(s);
    while (s->conns)
        conn_end(s->conns);
}

void server_finish_shutdown(server *s)
{
    if (s->stopped)
        return;
    s->stopped = 1;
    if (s->restarting) {
        close_listener(s);
        server_log(LOG_WARN, "every job has stopped: re-executing parled for fresh device "
                   "contexts");
    }
    uv_close((uv_handle_t *)&s->stop_timer, NULL);
    metrics_close(s->metrics);
    jobs_close(s->jobs);
    server_log(LOG_INFO, "stopped");
    if (s->on_stopped)
        s->on_stopped(s->user);
}

void server_remove_socket(const server *s)
{
    if (!s->activated)
        unlink(s->socket_path);
}

static void on_stop_timeout(uv_timer_t *t)
{
    server *s = t->data;
    int running = jobs_stop_now(s->jobs);
    if (running > 0)
        server_log(LOG_WARN, "%d job(s) did not stop within --stop-timeout %g s: stopping them "
                   "now; each resumes from its last checkpoint at the next start", running,
                   s->stop_timeout_s);
}

/* The running jobs checkpoint at their next step boundary (or stop at once
 * after --stop-timeout); finish_shutdown once none runs. */
static void stop_jobs(server *s, int running)
{
    if (running > 0) {
        server_log(LOG_INFO, "waiting up to %g s for %d running job(s) to checkpoint and stop "
                   "at a step boundary", s->stop_timeout_s, running);
        uv_timer_start(&s->stop_timer, on_stop_timeout, (uint64_t)(s->stop_timeout_s * 1000), 0);
    } else {
        server_finish_shutdown(s);
    }
}

void server_shutdown(server *s, const char *why)
{
    if (s->stopped || (s->stopping && !s->restarting))
        return;
    server_log(LOG_INFO, "shutting down (%s)", why);
    /* A signal during a re-exec's wait turns it into a plain shutdown; the
     * jobs are already stopping. */
    int was_restarting = s->restarting;
    s->restarting = 0;
    s->stopping = 1;
    close_listener(s);
    if (!was_restarting)
        stop_jobs(s, jobs_stop_all(s->jobs));
}

/* A job's device hit an error that leaves it unusable for this process (a
 * CUDA illegal address...): the other jobs checkpoint and stop as at a
 * shutdown, new ones queue, the socket is still served, and once nothing
 * runs main() re-executes parled (same PID: systemd sees no exit), whose
 * CUDA contexts are new. The jobs resume from the state dir. */
void server_restart(server *s, const char *id)
{
    if (mpi_node_size() > 1) {
        server_log(LOG_ERROR, "job %s: a device fault; under --mpi parled cannot re-execute "
                   "itself alone: no job starts on the faulted device until the MPI job is "
                   "restarted", id);
        return;
    }
    server_log(LOG_WARN, "job %s: a device fault (parlectl devices): parled re-executes itself "
               "once its running jobs have checkpointed and stopped", id);
    s->stopping = s->restarting = 1;
    stop_jobs(s, jobs_stop_for_restart(s->jobs));
}

int server_wants_reexec(const server *s, int *listen_fd)
{
    *listen_fd = s->keep_fd;
    return s->restarting;
}
