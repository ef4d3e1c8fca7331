/* What parlectl's commands share: the connection to parled (conn.c: one
 * JSON line each way, docs/protocol.md, framed by the protocol library),
 * argument parsing (args.c), output (output.c) and following a job
 * (watch.c). parlectl.c holds the command table and picks the command;
 * the commands live in files by group (jobs.c, daemon.c, queue.c, usage.c)
 * and, the larger ones, in their own files. */
#ifndef PARLECTL_CTL_H
#define PARLECTL_CTL_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "protocol.h"

/* Exit statuses: 0 success, 1 failure (an error reply, a job that did not
 * end done), 2 a usage error; `wait`, `watch` and `submit --wait/--watch`
 * add 3 (the job was cancelled) and 4 (parled went away or the connection
 * was lost before the job ended). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_CANCELLED = 3, EXIT_GONE = 4 };

typedef struct command command;
typedef int (*command_fn)(const command *cmd, int argc, char **argv);
struct command {
    const char *name;
    command_fn run;
    const char *help;
};

extern char socket_path[4096];

/* "parlectl: ..." on stderr; returns EXIT_FAIL. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int usage_error(const command *cmd, const char *what, const char *arg);

typedef struct conn {
    int fd;
    proto_framer framer;
} conn;

int conn_open(conn *c);
/* Set once parled closed a connection before its reply came: what was
 * asked may or may not have been done. */
extern int conn_lost;
void conn_close(conn *c);
/* Send one request line; frees `req`. */
int conn_send(conn *c, cJSON *req);
/* The next line, parsed; NULL (with a message) on EOF or junk. */
cJSON *conn_read(conn *c);
int reply_error(const cJSON *reply);
/* Send `req`, read its reply: the reply if ok, else NULL after the message. */
cJSON *request(conn *c, cJSON *req);
cJSON *op_request(const char *op, const char *id);
/* One connection, one request, one reply. */
cJSON *call(cJSON *req);

void print_json(const cJSON *v);
double num(const cJSON *o, const char *k);
const char *str(const cJSON *o, const char *k);
const char *fmt_duration(double s, char *buf, size_t len);
const char *fmt_percent(double v, char *buf, size_t len);
const char *fmt_num(double v, const char *fmt, char *buf, size_t len);
/* A job's status, as `status ID` prints it; the table of `list`. */
void print_job(const cJSON *j);
void print_job_table(const cJSON *jobs);

/* Follow job `id` to its end (watch.c): progress unless quiet, one JSON
 * object at the end with json == 2 (wait --json), every event with json ==
 * 1. Returns the exit status for how it ended. */
int watch_job(const char *id, int quiet, int json);

/* Flags common to the commands: --json, -q, -f (or --follow), --watch,
 * --wait, --set, -o FILE, --state S, --from-scratch, --priority N (a --set
 * of "priority"). */
#define ARGS_MAX_POS 16 /* positional arguments */
typedef struct args {
    int json, quiet, follow, watch, wait, from_scratch;
    int all;           /* --all (list: every page) */
    const char *limit; /* --limit N (list) */
    char *pos[ARGS_MAX_POS];
    int npos;
    char *sets[64];
    int nsets;
    char priority_set[48]; /* --priority N as "priority=N", one of sets */
    char after_set[300];   /* --after IDS as "after=IDS", one of sets (and "after_any=true") */
    const char *out;   /* -o FILE */
    const char *state; /* --state S */
    const char *user;  /* --user U (history) */
    const char *since; /* --since T (history) */
} args;

/* Parse argv after the command's name; `allowed` lists the flags it takes
 * ("jqfwWsoSFpuTAL": --json -q -f/--follow --watch --wait --set -o --state
 * --from-scratch --priority --user --since --all --limit). Prints the usage error and returns -1, or 1
 * for --help. */
int parse_args(const command *cmd, int argc, char **argv, const char *allowed, int maxpos,
               args *a);

#define PARSE(allowed, minpos, maxpos)                                               \
    args a;                                                                          \
    int parsed_ = parse_args(cmd, argc, argv, allowed, maxpos, &a);                  \
    if (parsed_ != 0)                                                                \
        return parsed_ > 0 ? EXIT_OK : EXIT_USAGE;                                   \
    if (a.npos < (minpos))                                                           \
        return usage_error(cmd, "missing argument", "");

/* A job's metrics.jsonl (metrics.c): from byte *offset to the end of the
 * file as it is now, each whole line, parsed, to fn(ctx, line) in order;
 * *offset moves past the lines read. fn returns 0, or -1 after its message,
 * which stops the read. 0, or -1 after a message (an error reply, a line
 * that is not a JSON object, fn's -1). */
typedef int (*metrics_fn)(void *ctx, const cJSON *line);
int metrics_read(conn *c, const char *id, double *offset, metrics_fn fn, void *ctx);

/* export.c: write n bytes to fd, going on after short writes and EINTR
 * (0, or -1 with errno); fsync the directory holding `path` (0 or -1). */
int write_all(int fd, const unsigned char *p, size_t n);
int sync_dir(const char *path);

/* export.c: a new file beside `dst`, to be renamed onto it once written:
 * .NAME.part-XXXXXX in dst's folder, created by mkstemp (a random name,
 * O_CREAT | O_EXCL: never a file or symlink that is there already), mode
 * 0666 less the umask as a plain create gives. Its name in tmp; the
 * descriptor, or -1 with a message. */
int open_temp_beside(const char *dst, char *tmp, size_t len);

/* The JSON object in the file at `path` ('-': stdin), `what` it is for
 * messages ("a job file"): NULL after a message naming the file (and the
 * line of a syntax error). */
cJSON *read_json_object(const char *path, const char *what);

/* --set key.path=value on a job object: `value` parsed as JSON if it is
 * JSON, else taken as a string; intermediate objects are created. 0, or -1
 * after a message. */
int set_path(cJSON *root, const char *assignment);

/* client/args.c: whether an id names a sweep (the daemon issues s0001,
 * s0002, ... for sweeps, j0001, ... for jobs). */
int is_sweep_id(const char *id);

/* client/sweep.c: the `sweep` command; sweep id's points (its
 * `sweep_status` reply's "points": each with its "point" and its "jobs" ids
 * in seed order), borrowed from *reply, which the caller deletes; *reply
 * NULL after a message. */
int cmd_sweep(const command *cmd, int argc, char **argv);
const cJSON *sweep_points(conn *c, const char *id, cJSON **reply);

/* client/queue.c: priority ID N; hold ID and release ID (cmd->name says which);
 * rm ID... (a sweep's id removes the sweep); one removal (op rm or sweep_rm):
 * its reply, or NULL after the message, printed unless json. */
int cmd_priority(const command *cmd, int argc, char **argv);
int cmd_hold(const command *cmd, int argc, char **argv);
int cmd_rm(const command *cmd, int argc, char **argv);
cJSON *remove_one(const char *op, const char *id, int json);

/* client/usage.c: usage (fair share's use per owner now) and history
 * [--user U] [--since T] (device-hours per owner from the accounting record). */
int cmd_usage(const command *cmd, int argc, char **argv);
int cmd_history(const command *cmd, int argc, char **argv);

/* client/jobs.c: submit, status, list (and ls), watch, wait, logs, cancel, resume. */
int cmd_submit(const command *cmd, int argc, char **argv);
int cmd_status(const command *cmd, int argc, char **argv);
int cmd_list(const command *cmd, int argc, char **argv);
int cmd_watch(const command *cmd, int argc, char **argv);
int cmd_wait(const command *cmd, int argc, char **argv);
int cmd_logs(const command *cmd, int argc, char **argv);
int cmd_cancel(const command *cmd, int argc, char **argv);
int cmd_resume(const command *cmd, int argc, char **argv);

/* client/daemon.c: devices, version, shutdown. */
int cmd_devices(const command *cmd, int argc, char **argv);
int cmd_version(const command *cmd, int argc, char **argv);
int cmd_shutdown(const command *cmd, int argc, char **argv);

/* client/top.c: the whole box at a glance, live (top.h). */
int cmd_top(const command *cmd, int argc, char **argv);

/* client/export.c, client/plot.c (a job's curves or a sweep's points),
 * client/tensorboard.c */
int cmd_export(const command *cmd, int argc, char **argv);
int cmd_plot(const command *cmd, int argc, char **argv);
int cmd_tensorboard(const command *cmd, int argc, char **argv);

#endif
