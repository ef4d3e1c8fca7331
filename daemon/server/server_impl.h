/* Internal to the server (server.c: connections; server_lifecycle.c: the
 * socket, the start, job events to watchers, the shutdown; server_peer.c: who
 * is connecting; server_ops.c: the protocol's operations). */
#ifndef PARLE_SERVER_IMPL_H
#define PARLE_SERVER_IMPL_H

#include <sys/types.h>
#include <sys/un.h>
#include <uv.h>

#include "jobs.h"
#include "protocol.h"
#include "server.h"

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
    struct metrics *metrics;  /* --metrics-file's writer, or NULL (server_overview.c) */
    void (*on_stopped)(void *user);
    void *user;
};

typedef struct write_req {
    uv_write_t req;
    char *data;
} write_req;

/* server.c */
double server_mono_s(void);
void conn_send(conn *c, char *line); /* takes the line; drops a client that stopped reading */
void send_error(conn *c, const char *code, const char *message);
void send_error_and_end(conn *c, const char *code, const char *message);
char *end_line(job *j);              /* a watch's last event, with the job's status */
/* Close once what is queued has been written: after an error that ends a
 * connection, and at a daemon shutdown. */
void conn_end(conn *c);
/* The listener's (server_lifecycle.c): accept a connection, check who it is
 * and the bounds on connections, then read its requests. */
void on_connection(uv_stream_t *listener, int status);

/* server_peer.c. Who is on the other end of fd (SO_PEERCRED, the user's
 * name, into c) and what it may do: root, the daemon's own uid and members
 * of --group talk to parled; root, the daemon's uid and --admin-group
 * members act on any job (c->admin). 1 if allowed. */
int peer_identify(server *s, int fd, conn *c);
/* A group by name or number, for the daemon's `option`: 0, or -1 with a
 * message naming the option. */
int resolve_group(const char *option, const char *name, gid_t *gid, char *err, size_t errlen);

/* server.c: serve what c has buffered and read on, unless its replies wait
 * unread, a sweep of its is being submitted or it waits for its turn. */
void conn_resume(conn *c);

/* server_turns.c. What waits for its next turn of the loop: a connection
 * that has held it for SERVE_SLICE_NS (server_yield; conn_resume then), and
 * sweeps being submitted (server_submit_sweep: c reads no request until
 * sweep_submit_done has answered it). server_turns_close, at a shutdown,
 * drops the sweeps not yet answered. */
#define SERVE_SLICE_NS 2000000u
void server_yield(conn *c);
void server_submit_sweep(conn *c, sweep_submission *sub);
void server_turns_init(server *s);
void server_turns_close(server *s);

/* server_overview.c: the whole queue at a glance. op_top answers `top`
 * (docs/protocol.md) with a bounded overview, others' training values hidden
 * as jobs_viewer_sees_details says; server_metrics_open starts
 * --metrics-file's writer (none without it): 0, or -1 with a message. */
void op_top(conn *c);
int server_metrics_open(server *s, const server_config *cfg, char *err, size_t errlen);

/* server_ops.c: one request line from c, answered on c. */
void server_handle_request(conn *c, char *line, size_t len);
/* A sweep submission's end: the sweep queued, or NULL with the refusal. */
void sweep_submit_done(conn *c, sweep *s, const char *code, const char *err);

#endif
