/* Internal to the server. Its files, each calling only those after it
 * (main.c calls server_lifecycle.c and server_stop.c through server.h):
 *   server_lifecycle.c  the socket, the start, job events to watchers;
 *   server.c            connections accepted and read, request lines dispatched;
 *   server_ops.c        the protocol's operations (transfer.c: export's chunks);
 *   server_stop.c       the shutdown's grace, the re-exec after a device fault;
 *   server_turns.c      what waits for its next turn of the loop, sweeps submitted;
 *   server_peer.c       who is connecting, and the groups;
 *   server_conn.c       a connection's output and its end.
 * The one call back up, a connection's reading resumed once its output
 * drained or its turn came, goes through server.resume (server.c's
 * conn_resume, set by server_open). */
#ifndef PARLE_SERVER_IMPL_H
#define PARLE_SERVER_IMPL_H

#include <sys/types.h>
#include <sys/un.h>
#include <uv.h>

#include "jobs.h"
#include "protocol.h"
#include "server.h"
#include "sweeps.h"

typedef struct conn conn;
/* A sweep being submitted for a connection (server.c steps it on an idle
 * handle, a few milliseconds a loop turn). It outlives the connection: a
 * sweep whose client went away is still queued. */
typedef struct submitting {
    sweep_submission *sub;
    conn *c;                  /* NULL once the connection is gone */
    struct submitting *next;
} submitting;

struct conn {
    uv_pipe_t pipe;        /* first: the handle's address is the conn's */
    uv_shutdown_t shutdown_req;
    uv_timer_t end_timer;  /* an ended connection's time to read what it is owed */
    server *srv;
    conn *prev, *next;
    proto_framer framer;
    job *watching;         /* watch: job events until it ends */
    job *following;        /* logs follow: log lines until it ends */
    unsigned peer_uid, peer_gid; /* SO_PEERCRED at accept */
    char peer_user[64];          /* the uid's name, or the uid in digits */
    int admin;                   /* root, the daemon's uid or --admin-group: any job */
    int paused;                  /* reading stopped until its replies drain */
    submitting *submitting;      /* reading stopped until its sweep is answered */
    int yielded;                 /* reading stopped until its next turn (server_turns.c) */
    int closing;
};

/* Who asks, for what of other members' jobs it sees (jobs_viewer_sees_details). */
static inline job_viewer peer_viewer(const conn *c)
{
    return (job_viewer){.uid = c->peer_uid, .admin = c->admin};
}

struct server {
    uv_loop_t *loop;
    uv_pipe_t listener;
    char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int activated; /* the listener came from systemd (sdnotify.h): not ours to unlink */
    char state_dir[1024];
    int have_group, have_admin_group;
    gid_t group, admin_group;
    int max_conns, max_conns_per_user;
    int nconns;
    jobs *jobs;
    sweeps *sweeps;         /* the queue's client: freed with it */
    conn *conns;
    int stopping, stopped;
    /* The stop is a re-exec after a device fault (server_restart): the
     * socket stays served until the jobs have stopped. keep_fd: the
     * listener systemd passed, kept open for the next process; -1 if none. */
    int restarting, keep_fd;
    int faults_seen;          /* jobs_faulted() when the last restart was asked for */
    double stop_timeout_s;
    uv_timer_t stop_timer;    /* a shutdown's grace; then running jobs stop at once */
    submitting *submitting;   /* sweeps being submitted, stepped in turn */
    uv_idle_t turn_idle;      /* active while a sweep or a connection waits its turn */
    double started_at;
    /* Serve what c has buffered and read on (server.c's conn_resume): for
     * the files below server.c, which may not call it. */
    void (*resume)(conn *c);
    struct metrics *metrics;  /* --metrics-file's writer, or NULL (server_overview.c) */
    void (*on_stopped)(void *user);
    void *user;
};

typedef struct write_req {
    uv_write_t req;
    char *data;
} write_req;

/* server_conn.c. A client that stopped reading is dropped by conn_send,
 * which takes the line; conn_end closes once what is queued has been
 * written (after an error that ends a connection, and at a daemon
 * shutdown), conn_close at once. end_line: a watch's last event, with the
 * job's status. */
double server_mono_s(void);
void conn_send(conn *c, char *line);
void send_error(conn *c, const char *code, const char *message);
void send_error_and_end(conn *c, const char *code, const char *message);
char *end_line(job *j);
void conn_end(conn *c);
void conn_close(conn *c);
/* A client's requests are not read while this much of its output waits:
 * a client pipelining requests without reading the replies holds at most
 * this, one request line and one reply, not all it asked for. */
#define READ_PAUSE_OUTPUT (1u << 20)

/* server.c. The listener's (server_lifecycle.c): accept a connection,
 * check who it is and the bounds on connections, then read its requests.
 * conn_resume: serve what c has buffered and read on, unless its replies
 * wait unread, a sweep of its is being submitted or it waits for its turn
 * (server.resume). */
void on_connection(uv_stream_t *listener, int status);
void conn_resume(conn *c);

/* server_peer.c. Who is on the other end of fd (SO_PEERCRED, the user's
 * name, into c) and what it may do: root, the daemon's own uid and members
 * of --group talk to parled; root, the daemon's uid and --admin-group
 * members act on any job (c->admin). 1 if allowed. */
int peer_identify(server *s, int fd, conn *c);
/* A group by name or number, for the daemon's `option`: 0, or -1 with a
 * message naming the option. */
int resolve_group(const char *option, const char *name, gid_t *gid, char *err, size_t errlen);

/* server_turns.c. What waits for its next turn of the loop: a connection
 * that has held it for SERVE_SLICE_NS (server_yield; resumed then), and
 * sweeps being submitted (server_submit_sweep: c reads no request until
 * sweep_submit_done has answered it: the sweep queued, or NULL with the
 * refusal). server_turns_close, at a shutdown, drops the sweeps not yet
 * answered. */
#define SERVE_SLICE_NS 2000000u
void server_yield(conn *c);
void server_submit_sweep(conn *c, sweep_submission *sub);
void sweep_submit_done(conn *c, sweep *s, const char *code, const char *err);
void server_turns_init(server *s);
void server_turns_close(server *s);

/* server_stop.c (server_shutdown: server.h). Once the stopping jobs have
 * all ended: close what is left and call on_stopped. A job's device fault:
 * stop the jobs as at a shutdown, then re-execute. */
void server_finish_shutdown(server *s);
void server_restart(server *s, const char *id);
/* server_overview.c: the whole queue at a glance. op_top answers `top`
 * (docs/protocol.md) with a bounded overview, others' training values hidden
 * as jobs_viewer_sees_details says; server_metrics_open starts
 * --metrics-file's writer (none without it): 0, or -1 with a message. */
void op_top(conn *c);
int server_metrics_open(server *s, const server_config *cfg, char *err, size_t errlen);

/* server_ops.c: one request line from c, answered on c. */
void server_handle_request(conn *c, char *line, size_t len);

#endif
