/* parled's server: the listening Unix socket, its connections and the
 * protocol ops, all on the libuv loop thread (docs/architecture.md). */
#ifndef PARLE_SERVER_H
#define PARLE_SERVER_H

#include <stddef.h>
#include <uv.h>

#include "jobs.h"
#include "log.h"


typedef struct server_config {
    const char *socket_path;
    const char *state_dir;
    const char *devices;   /* the daemon's --devices */
    const char *group;     /* NULL, a group name or a numeric gid */
    const char *admin_group; /* NULL or a group whose members may act on any job */
    int max_conns, max_conns_per_user; /* connections at once; 0: no bound */
    int max_jobs_per_user; /* queued + running jobs of one user; 0: no bound */
    double stop_timeout_s; /* a shutdown's grace for checkpointing before jobs stop at once */
    double preempt_grace_s; /* a preempted job's grace for checkpointing (jobs_limits) */
    double usage_half_life_s; /* fair share's half-life (jobs_limits) */
    double usage_save_s;   /* usage.json's period while jobs run (jobs_limits) */
    double keep_ended_s;   /* --keep-ended AGE (jobs_limits; 0: none) */
    int keep_ended_count;  /* --keep-ended N (jobs_limits; -1: none) */
    double remove_ended_s; /* --remove-ended AGE (jobs_limits; 0: none) */
    double save_retry_s;   /* --save-retry: a final master's retries (jobs_limits) */
    /* --max-gpus-per-user, --max-cores-per-user, --default-time-limit,
     * --max-time-limit, --preempt-min-run, --oldest-first-after (the
     * fields of jobs_limits so named; the others there are above). */
    jobs_limits sched;
    const char *metrics_file; /* NULL, or where the metrics are written (daemon/metrics/) */
    double metrics_interval_s;
    int listen_fd;         /* > 0: a listening socket passed by systemd, served instead of
                              binding socket_path (and never unlinked) */
} server_config;

typedef struct server server;

/* Bind the socket (replacing a stale one, refusing a live one), open the
 * state dir and start accepting. `on_stopped` runs on the loop once a
 * shutdown has finished: every job thread ended, every handle of ours closing. */
int server_open(server **out, uv_loop_t *loop, const server_config *cfg,
                void (*on_stopped)(void *user), void *user, char *err, size_t errlen);
/* Stop accepting, remove the socket, end the connections, stop the running
 * jobs at their next step boundary. Safe to call more than once. */
void server_shutdown(server *s, const char *why);
/* After uv_run has returned: 1 when the daemon stopped to re-execute itself
 * (a device fault, docs/gpu.md "Sticky device faults"), with the listening
 * socket systemd passed, still open, in *listen_fd (-1: parled bound its own,
 * removed now; the next process binds it again). 0 after a shutdown. */
int server_wants_reexec(const server *s, int *listen_fd);
/* Remove the socket file now (the exit-at-once path of a second SIGINT). */
void server_remove_socket(const server *s);
/* After uv_run has returned. */
void server_free(server *s);

#endif
