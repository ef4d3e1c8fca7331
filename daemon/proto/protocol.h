/* The parled wire protocol (docs/protocol.md): newline-delimited JSON over a
 * Unix socket. This file knows nothing of sockets: it frames bytes into
 * bounded lines, parses one line into a request, and builds reply lines, so
 * it can be unit-tested and fuzzed on its own. */
#ifndef PARLE_PROTOCOL_H
#define PARLE_PROTOCOL_H

#include <stddef.h>
#include <cjson/cJSON.h>

#define PROTO_VERSION 1
#define PROTO_MAX_LINE (1u << 20) /* bytes in one request line, '\n' excluded */
#define PROTO_ID_MAX 32

enum proto_op {
    OP_SUBMIT, OP_STATUS, OP_LIST, OP_WATCH, OP_LOGS, OP_CANCEL, OP_EXPORT, OP_DEVICES,
    OP_VERSION, OP_SHUTDOWN, OP_METRICS, OP_SWEEP_SUBMIT, OP_SWEEP_STATUS, OP_SWEEP_LIST,
    OP_SWEEP_CANCEL, OP_RESUME, OP_PRIORITY, OP_HOLD, OP_RELEASE, OP_RM, OP_SWEEP_RM,
    OP_USAGE, OP_HISTORY, OP_TOP,
};
#define OP_COUNT (OP_TOP + 1)
/* export with an offset and metrics: the most file bytes one reply carries
 * (as base64 for export), so every reply line stays under PROTO_MAX_LINE. */
#define PROTO_CHUNK_MAX (512u << 10)
#define PROTO_VERSION_TAG_MAX 64
/* list: the jobs one page holds by default and at most. */
#define PROTO_LIST_DEFAULT 100
#define PROTO_LIST_MAX 1000

/* Error codes (the "code" of an error reply). */
#define ERR_BAD_JSON "bad_json"
#define ERR_BAD_REQUEST "bad_request"
#define ERR_UNKNOWN_OP "unknown_op"
#define ERR_LINE_TOO_LONG "line_too_long"
#define ERR_INVALID_JOB "invalid_job"
#define ERR_INVALID_SWEEP "invalid_sweep"
#define ERR_NOT_FOUND "not_found"
#define ERR_BAD_STATE "bad_state"
#define ERR_FORBIDDEN "forbidden"
#define ERR_LIMIT "limit"            /* a bound of parled's flags: the message names it */
#define ERR_SHUTTING_DOWN "shutting_down"
#define ERR_INTERNAL "internal"

typedef struct proto_request {
    enum proto_op op;
    char id[PROTO_ID_MAX]; /* status (optional: "" = all), watch, logs, cancel, resume, export,
                              priority, hold, release; sweep_status, sweep_cancel: a sweep's */
    int priority;          /* priority: the job's new priority (an integer; range checked by
                              the queue) */
    int has_priority;
    int follow;            /* logs: stream new lines until the job ends */
    int from_scratch;      /* resume: start over from step 0, without its checkpoints */
    int has_offset;        /* export: a chunk of the file is asked for */
    long long offset;      /* export, metrics: the byte to start at (>= 0) */
    char version[PROTO_VERSION_TAG_MAX]; /* export: the file version the chunks must come from ("" = any) */
    char user[64];         /* history: only this owner's (a name or a uid), "" = all */
    double since;          /* history: runs that ended at or after (unix seconds; 0 = all) */
    int limit;             /* list: jobs in the page (1..PROTO_LIST_MAX; 0 = the default) */
    char before[PROTO_ID_MAX]; /* list: only jobs older than this id ("" = from the newest) */
    char state[16];        /* list: only jobs in this shown state ("" = any) */
    cJSON *job;            /* submit: the job object; owned by the request */
    cJSON *sweep;          /* sweep_submit: the sweep object; owned by the request */
} proto_request;

/* Parse one line (without its '\n'). Returns 0, or -1 with *code set to one of
 * the ERR_ codes and a message naming the offending field in msg. */
int proto_parse_request(const char *line, size_t len, proto_request *req, const char **code,
                        char *msg, size_t msglen);
void proto_request_free(proto_request *req);
const char *proto_op_name(enum proto_op op);

/* A reply line, '\n'-terminated, malloc'd (NULL only when out of memory).
 * proto_reply_ok puts "ok":true first, then the fields of `body` (which it
 * frees; NULL for none). */
char *proto_reply_ok(cJSON *body);
char *proto_reply_error(const char *code, const char *message);
/* Any object as one line; frees `obj`. */
char *proto_line(cJSON *obj);

/* Framing: bytes in, complete lines out, none longer than max_line. */
typedef struct proto_framer {
    char *buf;
    size_t start, len, cap; /* buf[start, len) is unconsumed */
    size_t scanned;         /* buf[start, scanned) holds no '\n' */
    size_t max_line;
} proto_framer;

void proto_framer_init(proto_framer *f, size_t max_line);
void proto_framer_free(proto_framer *f);
/* Append received bytes (-1 when out of memory). Lines returned earlier by
 * proto_framer_next are invalid after this. */
int proto_framer_push(proto_framer *f, const char *data, size_t len);
/* 1: *line (NUL-terminated in place, '\n' and a trailing '\r' removed) and
 * *len hold the next complete line; empty lines are skipped. 0: no complete
 * line yet. -1: the pending line is longer than max_line. */
int proto_framer_next(proto_framer *f, char **line, size_t *len);

#endif
