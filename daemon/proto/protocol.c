#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "user_text.h"

static const char *const op_names[] = {
    [OP_SUBMIT] = "submit", [OP_STATUS] = "status",   [OP_LIST] = "list",
    [OP_WATCH] = "watch",   [OP_LOGS] = "logs",       [OP_CANCEL] = "cancel",
    [OP_EXPORT] = "export", [OP_DEVICES] = "devices", [OP_VERSION] = "version",
    [OP_SHUTDOWN] = "shutdown", [OP_METRICS] = "metrics", [OP_SWEEP_SUBMIT] = "sweep_submit",
    [OP_SWEEP_STATUS] = "sweep_status", [OP_SWEEP_LIST] = "sweep_list",
    [OP_SWEEP_CANCEL] = "sweep_cancel", [OP_RESUME] = "resume", [OP_PRIORITY] = "priority",
    [OP_HOLD] = "hold", [OP_RELEASE] = "release", [OP_RM] = "rm", [OP_SWEEP_RM] = "sweep_rm",
    [OP_USAGE] = "usage", [OP_HISTORY] = "history", [OP_TOP] = "top",
};
#define NOPS ((int)(sizeof(op_names) / sizeof(op_names[0])))

const char *proto_op_name(enum proto_op op) { return op_names[op]; }

/* Which fields each op takes besides "op": a field not listed is an error,
 * as in job files, so a typo never passes silently. */
enum { F_ID = 1, F_ID_OPT = 2, F_JOB = 4, F_FOLLOW = 8, F_OFFSET = 16, F_VERSION = 32, F_SWEEP = 64,
       F_FROM_SCRATCH = 128, F_PRIORITY = 256, F_USER = 512, F_SINCE = 1024,
       F_PAGE = 2048 /* list: limit, before, state */ };
static const int op_fields[] = {
    [OP_SUBMIT] = F_JOB, [OP_STATUS] = F_ID_OPT, [OP_LIST] = F_PAGE, [OP_WATCH] = F_ID,
    [OP_LOGS] = F_ID | F_FOLLOW, [OP_CANCEL] = F_ID,
    [OP_EXPORT] = F_ID | F_OFFSET | F_VERSION, [OP_DEVICES] = 0, [OP_VERSION] = 0,
    [OP_SHUTDOWN] = 0, [OP_METRICS] = F_ID | F_OFFSET, [OP_SWEEP_SUBMIT] = F_SWEEP,
    [OP_SWEEP_STATUS] = F_ID, [OP_SWEEP_LIST] = 0, [OP_SWEEP_CANCEL] = F_ID,
    [OP_RESUME] = F_ID | F_FROM_SCRATCH, [OP_PRIORITY] = F_ID | F_PRIORITY, [OP_HOLD] = F_ID,
    [OP_RELEASE] = F_ID, [OP_RM] = F_ID, [OP_SWEEP_RM] = F_ID,
    [OP_USAGE] = 0, [OP_HISTORY] = F_USER | F_SINCE, [OP_TOP] = 0,
};

static int fail(const char **code, const char *c, char *msg, size_t msglen, const char *fmt,
                const char *arg)
{
    *code = c;
    snprintf(msg, msglen, fmt, arg);
    return -1;
}

/* The states status and list show (a queued job is shown "held" or
 * "preempted" when it is). */
static const char *const shown_states[] = {"queued", "held", "preempted", "running", "done",
                                           "failed", "cancelled", "timeout"};

static int shown_state(const char *s)
{
    for (size_t k = 0; k < sizeof shown_states / sizeof shown_states[0]; k++)
        if (!strcmp(s, shown_states[k]))
            return 1;
    return 0;
}

/* Job ids are short and plain ("j0001"); anything else cannot name a job
 * and must never reach a path. */
static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= PROTO_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

static int parse_fields(const cJSON *root, proto_request *req, const char **code, char *msg,
                        size_t msglen)
{
    int allowed = op_fields[req->op];
    const cJSON *it;
    char shown[48];
    cJSON_ArrayForEach(it, root) {
        const char *k = it->string;
        /* The first of two same keys would be read here, the last elsewhere:
         * a request names each field once. */
        if (cJSON_GetObjectItemCaseSensitive(root, k) != it)
            return fail(code, ERR_BAD_REQUEST, msg, msglen,
                        "%s: given twice (a request names each field once)",
                        user_text_shown(k, shown));
        if (strcmp(k, "op") == 0)
            continue;
        if (strcmp(k, "id") == 0 && (allowed & (F_ID | F_ID_OPT))) {
            if (!cJSON_IsString(it))
                return fail(code, ERR_BAD_REQUEST, msg, msglen, "%s: must be a string", k);
            if (!valid_id(it->valuestring))
                return fail(code, ERR_BAD_REQUEST, msg, msglen,
                            "id: not a job id (1-31 letters, digits, '-' or '_')", "");
            strcpy(req->id, it->valuestring);
        } else if ((strcmp(k, "job") == 0 && (allowed & F_JOB)) ||
                   (strcmp(k, "sweep") == 0 && (allowed & F_SWEEP))) {
            if (!cJSON_IsObject(it))
                return fail(code, ERR_BAD_REQUEST, msg, msglen, "%s: must be an object", k);
        } else if ((strcmp(k, "follow") == 0 && (allowed & F_FOLLOW)) ||
                   (strcmp(k, "from_scratch") == 0 && (allowed & F_FROM_SCRATCH))) {
            if (!cJSON_IsBool(it))
                return fail(code, ERR_BAD_REQUEST, msg, msglen, "%s: must be true or false", k);
            *(strcmp(k, "follow") == 0 ? &req->follow : &req->from_scratch) = cJSON_IsTrue(it);
        } else if (strcmp(k, "offset") == 0 && (allowed & F_OFFSET)) {
            /* Whole numbers only, below 2^53 so the double is exact. */
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 9007199254740992.0 ||
                it->valuedouble != (double)(long long)it->valuedouble)
                return fail(code, ERR_BAD_REQUEST, msg, msglen, "%s: must be a whole number >= 0", k);
            req->offset = (long long)it->valuedouble;
            req->has_offset = 1;
        } else if (strcmp(k, "priority") == 0 && (allowed & F_PRIORITY)) {
            /* An integer well inside int: the queue checks the job's range. */
            if (!cJSON_IsNumber(it) || it->valuedouble > 1e9 || it->valuedouble < -1e9 ||
                it->valuedouble != (double)(long long)it->valuedouble)
                return fail(code, ERR_BAD_REQUEST, msg, msglen, "%s: must be an integer", k);
            req->priority = (int)it->valuedouble;
            req->has_priority = 1;
        } else if (strcmp(k, "version") == 0 && (allowed & F_VERSION)) {
            if (!cJSON_IsString(it) || strlen(it->valuestring) >= PROTO_VERSION_TAG_MAX)
                return fail(code, ERR_BAD_REQUEST, msg, msglen,
                            "%s: must be a string (as an export reply gave it)", k);
            strcpy(req->version, it->valuestring);
        } else if (strcmp(k, "user") == 0 && (allowed & F_USER)) {
            if (!cJSON_IsString(it) || !it->valuestring[0] ||
                strlen(it->valuestring) >= sizeof req->user)
                return fail(code, ERR_BAD_REQUEST, msg, msglen,
                            "%s: must be a user's name or uid (1-63 bytes)", k);
            strcpy(req->user, it->valuestring);
        } else if (strcmp(k, "since") == 0 && (allowed & F_SINCE)) {
            if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble <= 1e11))
                return fail(code, ERR_BAD_REQUEST, msg, msglen,
                            "%s: must be a time in unix seconds (0..1e11)", k);
            req->since = it->valuedouble;
        } else if (strcmp(k, "limit") == 0 && (allowed & F_PAGE)) {
            if (!cJSON_IsNumber(it) || !(it->valuedouble >= 1 && it->valuedouble <= PROTO_LIST_MAX) ||
                it->valuedouble != (double)(int)it->valuedouble)
                return fail(code, ERR_BAD_REQUEST, msg, msglen,
                            "%s: must be a whole number of jobs in 1..1000", k);
            req->limit = (int)it->valuedouble;
        } else if (strcmp(k, "before") == 0 && (allowed & F_PAGE)) {
            if (!cJSON_IsString(it) || !valid_id(it->valuestring))
                return fail(code, ERR_BAD_REQUEST, msg, msglen,
                            "%s: must be a job id (as next_before gave it)", k);
            strcpy(req->before, it->valuestring);
        } else if (strcmp(k, "state") == 0 && (allowed & F_PAGE)) {
            if (!cJSON_IsString(it) || !shown_state(it->valuestring))
                return fail(code, ERR_BAD_REQUEST, msg, msglen,
                            "%s: must be queued, held, preempted, running, done, failed, "
                            "cancelled or timeout", k);
            strcpy(req->state, it->valuestring);
        } else {
            *code = ERR_BAD_REQUEST;
            snprintf(msg, msglen, "%s: unknown field for op \"%s\"", user_text_shown(k, shown),
                     op_names[req->op]);
            return -1;
        }
    }
    if ((allowed & F_ID) && !req->id[0])
        return fail(code, ERR_BAD_REQUEST, msg, msglen, "id: missing (op \"%s\" needs an id)",
                    op_names[req->op]);
    if ((allowed & F_PRIORITY) && !req->has_priority)
        return fail(code, ERR_BAD_REQUEST, msg, msglen, "priority: missing (op \"%s\" needs it)",
                    op_names[req->op]);
    if ((allowed & F_JOB) && !cJSON_GetObjectItemCaseSensitive(root, "job"))
        return fail(code, ERR_BAD_REQUEST, msg, msglen, "job: missing%s", "");
    if ((allowed & F_SWEEP) && !cJSON_GetObjectItemCaseSensitive(root, "sweep"))
        return fail(code, ERR_BAD_REQUEST, msg, msglen, "sweep: missing%s", "");
    return 0;
}

int proto_parse_request(const char *line, size_t len, proto_request *req, const char **code,
                        char *msg, size_t msglen)
{
    memset(req, 0, sizeof(*req));
    if (memchr(line, '\0', len))
        return fail(code, ERR_BAD_JSON, msg, msglen, "request is not JSON text (a NUL byte)%s", "");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!root) {
        size_t at = end && end >= line && end <= line + len ? (size_t)(end - line) : 0;
        *code = ERR_BAD_JSON;
        snprintf(msg, msglen, "request is not valid JSON (near byte %zu)", at);
        return -1;
    }
    while (end < line + len && (*end == ' ' || *end == '\t' || *end == '\r'))
        end++;
    int rc = -1;
    if (end != line + len) {
        *code = ERR_BAD_JSON;
        snprintf(msg, msglen, "request has text after its JSON value (at byte %zu)",
                 (size_t)(end - line));
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        fail(code, ERR_BAD_REQUEST, msg, msglen, "request must be a JSON object%s", "");
        goto out;
    }
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "op");
    if (!op) {
        fail(code, ERR_BAD_REQUEST, msg, msglen, "op: missing%s", "");
        goto out;
    }
    if (!cJSON_IsString(op)) {
        fail(code, ERR_BAD_REQUEST, msg, msglen, "op: must be a string%s", "");
        goto out;
    }
    int i = 0;
    while (i < NOPS && strcmp(op->valuestring, op_names[i]) != 0)
        i++;
    if (i == NOPS) {
        char shown[48];
        *code = ERR_UNKNOWN_OP;
        snprintf(msg, msglen,
                 "unknown op \"%s\" (ops: submit, status, list, watch, logs, cancel, export, "
                 "devices, version, shutdown, metrics, sweep_submit, sweep_status, sweep_list, "
                 "sweep_cancel, resume, priority, hold, release, rm, sweep_rm, usage, history)",
                 user_text_shown(op->valuestring, shown));
        goto out;
    }
    req->op = (enum proto_op)i;
    if (parse_fields(root, req, code, msg, msglen) != 0)
        goto out;
    if (req->op == OP_SUBMIT)
        req->job = cJSON_DetachItemFromObjectCaseSensitive(root, "job");
    if (req->op == OP_SWEEP_SUBMIT)
        req->sweep = cJSON_DetachItemFromObjectCaseSensitive(root, "sweep");
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

void proto_request_free(proto_request *req)
{
    cJSON_Delete(req->job);
    req->job = NULL;
    cJSON_Delete(req->sweep);
    req->sweep = NULL;
}

char *proto_line(cJSON *obj)
{
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (!line) {
        free(text);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    return line;
}

char *proto_reply_ok(cJSON *body)
{
    cJSON *reply = cJSON_CreateObject();
    if (!reply) {
        cJSON_Delete(body);
        return NULL;
    }
    cJSON_AddTrueToObject(reply, "ok");
    if (body) {
        /* Move the fields over so "ok" comes first on the line. */
        while (body->child) {
            cJSON *item = cJSON_DetachItemViaPointer(body, body->child);
            cJSON_AddItemToObject(reply, item->string, item);
        }
        cJSON_Delete(body);
    }
    return proto_line(reply);
}

char *proto_reply_error(const char *code, const char *message)
{
    cJSON *reply = cJSON_CreateObject();
    if (!reply)
        return NULL;
    cJSON_AddFalseToObject(reply, "ok");
    cJSON *e = cJSON_AddObjectToObject(reply, "error");
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", message);
    return proto_line(reply);
}

void proto_framer_init(proto_framer *f, size_t max_line)
{
    memset(f, 0, sizeof(*f));
    f->max_line = max_line;
}

void proto_framer_free(proto_framer *f)
{
    free(f->buf);
    memset(f, 0, sizeof(*f));
}

int proto_framer_push(proto_framer *f, const char *data, size_t len)
{
    if (f->start > 0) { /* drop consumed lines */
        memmove(f->buf, f->buf + f->start, f->len - f->start);
        f->len -= f->start;
        f->scanned -= f->start;
        f->start = 0;
    }
    if (f->len + len + 1 > f->cap) {
        size_t cap = f->cap ? f->cap : 4096;
        while (cap < f->len + len + 1)
            cap *= 2;
        char *b = realloc(f->buf, cap);
        if (!b)
            return -1;
        f->buf = b;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, data, len);
    f->len += len;
    return 0;
}

int proto_framer_next(proto_framer *f, char **line, size_t *len)
{
    for (;;) {
        char *nl = f->len > f->scanned ? memchr(f->buf + f->scanned, '\n', f->len - f->scanned)
                                       : NULL;
        if (!nl) {
            f->scanned = f->len;
            return f->len - f->start > f->max_line ? -1 : 0;
        }
        size_t n = (size_t)(nl - (f->buf + f->start));
        if (n > f->max_line)
            return -1;
        *line = f->buf + f->start;
        f->start += n + 1;
        f->scanned = f->start;
        if (n > 0 && (*line)[n - 1] == '\r')
            n--;
        (*line)[n] = '\0';
        if (n == 0)
            continue;
        *len = n;
        return 1;
    }
}
