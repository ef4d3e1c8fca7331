/* The protocol's operations (docs/protocol.md), one handler each, on the
 * loop thread: what a parsed request asks of the queue, answered on its
 * connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "parle_config.h"
#include "server_impl.h"
#include "transfer.h"

#define MAX_LOG_REPLY (8u << 20)


static cJSON *version_json(void)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", PARLE_VERSION);
    cJSON_AddNumberToObject(o, "protocol", PROTO_VERSION);
    cJSON *f = cJSON_AddObjectToObject(o, "features");
    /* Built with CUDA is not the same as able to use it: say both. */
    cJSON_AddBoolToObject(f, "cuda", PARLE_HAVE_CUDA);
    cJSON_AddNumberToObject(f, "gpus", backend_cuda_devices());
    cJSON_AddBoolToObject(f, "cudnn", PARLE_HAVE_CUDNN);
    cJSON_AddBoolToObject(f, "nccl", PARLE_HAVE_NCCL);
    cJSON_AddBoolToObject(f, "mpi", PARLE_HAVE_MPI);
    cJSON_AddBoolToObject(f, "dnnl", PARLE_HAVE_DNNL);
    return o;
}

/* The devices reply's "gpu_error" (the driver's error and what to do, or
 * null) and "unusable" (the GPUs the driver shows that no job may use, with
 * why): docs/protocol.md. */
static void add_gpu_problems(cJSON *o)
{
    const backend_gpu_probe_t *p = backend_gpu_probe();
    if (p->error[0])
        cJSON_AddStringToObject(o, "gpu_error", p->error);
    else
        cJSON_AddNullToObject(o, "gpu_error");
    cJSON *a = cJSON_AddArrayToObject(o, "unusable");
    char why[256], name[256];
    size_t bytes;
    for (int i = 0; i < p->count; i++) {
        if (!backend_gpu_unusable(i, why, sizeof why))
            continue;
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "kind", "gpu");
        cJSON_AddNumberToObject(d, "index", i);
        if (backend_cuda_device_info(i, name, sizeof name, &bytes) == 0) {
            cJSON_AddStringToObject(d, "name", name);
            cJSON_AddNumberToObject(d, "memory_bytes", (double)bytes);
        }
        cJSON_AddStringToObject(d, "why", why);
        cJSON_AddItemToArray(a, d);
    }
}

static job *find_job(conn *c, const char *id)
{
    job *j = jobs_find(c->srv->jobs, id);
    if (!j) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no job %s", id);
        send_error(c, ERR_NOT_FOUND, msg);
    }
    return j;
}

/* Whether c may do `what` (cancel, logs, export...) to `kind` (a job, a
 * sweep) `id` of `o`: its owner, or anyone for root, the daemon's uid and
 * --admin-group. Else the refusal is sent. Everyone sees every job's and
 * sweep's status, as squeue shows every job: of another member's, what the
 * queue needs, unless --open-job-details (jobs_viewer_sees_details). */
static int may_act(conn *c, const job_owner *o, const char *kind, const char *id,
                   const char *what)
{
    if (c->admin || o->uid == c->peer_uid)
        return 1;
    char msg[256];
    snprintf(msg, sizeof msg, "%s %s belongs to %s (uid %u): only its owner, root and parled's "
             "--admin-group may %s it", kind, id, o->user, o->uid, what);
    server_log_refusal(server_mono_s(), c->peer_uid, LOG_INFO, "refused %s (uid %u) %s of %s %s",
                       c->peer_user, c->peer_uid, what, kind, id);
    send_error(c, ERR_FORBIDDEN, msg);
    return 0;
}

static job *own_job(conn *c, const char *id, const char *what)
{
    job *j = find_job(c, id);
    return j && may_act(c, job_owner_of(j), "job", id, what) ? j : NULL;
}

static sweep *find_sweep(conn *c, const char *id)
{
    sweep *s = sweeps_find(c->srv->sweeps, id);
    if (!s) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no sweep %s", id);
        send_error(c, ERR_NOT_FOUND, msg);
    }
    return s;
}

static job_owner peer_owner(const conn *c)
{
    job_owner owner = {.uid = c->peer_uid, .gid = c->peer_gid, .privileged = c->admin};
    snprintf(owner.user, sizeof owner.user, "%s", c->peer_user);
    return owner;
}

static void op_submit(conn *c, proto_request *req)
{
    char err[8192];
    const char *code;
    job_owner owner = peer_owner(c);
    job *j = jobs_submit(c->srv->jobs, req->job, &owner, &code, err, sizeof(err));
    if (!j) {
        server_log_refusal(server_mono_s(), c->peer_uid, LOG_INFO, "rejected a job from %s "
                           "(uid %u): %s", c->peer_user, c->peer_uid, err);
        send_error(c, code, err);
        return;
    }
    server_log(LOG_INFO, "job %s submitted by %s (uid %u)", job_id(j), c->peer_user, c->peer_uid);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", job_id(j));
    cJSON_AddStringToObject(o, "state", job_state_name(job_state_of(j)));
    conn_send(c, proto_reply_ok(o));
}

/* The state dir's file system, what jobs are admitted against by disk;
 * null when unknown. */
static void add_state_dir_space(cJSON *d, const jobs *js)
{
    uint64_t free_b, total_b;
    if (jobs_state_space(js, &free_b, &total_b) == 0) {
        cJSON_AddNumberToObject(d, "state_dir_free_bytes", (double)free_b);
        cJSON_AddNumberToObject(d, "state_dir_total_bytes", (double)total_b);
    } else {
        cJSON_AddNullToObject(d, "state_dir_free_bytes");
        cJSON_AddNullToObject(d, "state_dir_total_bytes");
    }
}

static void op_status(conn *c, proto_request *req)
{
    server *s = c->srv;
    const job_viewer v = peer_viewer(c);
    cJSON *o = cJSON_CreateObject();
    if (req->id[0]) {
        job *j = find_job(c, req->id);
        if (!j) {
            cJSON_Delete(o);
            return;
        }
        cJSON_AddItemToObject(o, "job", job_status_json(j, &v));
    } else {
        cJSON *d = version_json();
        cJSON_AddNumberToObject(d, "pid", getpid());
        cJSON_AddStringToObject(d, "socket", s->socket_path);
        cJSON_AddStringToObject(d, "state_dir", s->state_dir);
        add_state_dir_space(d, s->jobs);
        cJSON_AddNumberToObject(d, "uptime_s", server_mono_s() - s->started_at);
        cJSON_AddItemToObject(d, "jobs", jobs_summary_json(s->jobs));
        cJSON_AddItemToObject(o, "daemon", d);
        /* The newest page of `list`'s (the counts above are of all). */
        cJSON *page = jobs_list_json(s->jobs, &v, PROTO_LIST_DEFAULT, "", "");
        cJSON_AddItemToObject(o, "jobs", cJSON_DetachItemFromObjectCaseSensitive(page, "jobs"));
        cJSON_Delete(page);
    }
    conn_send(c, proto_reply_ok(o));
}

static void op_watch(conn *c, proto_request *req)
{
    job *j = own_job(c, req->id, "watch");
    if (!j)
        return;
    const job_viewer v = peer_viewer(c);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "job", job_status_json(j, &v));
    conn_send(c, proto_reply_ok(o));
    if (job_state_final(job_state_of(j)))
        conn_send(c, end_line(j));
    else
        c->watching = j;
}

static void op_logs(conn *c, proto_request *req)
{
    job *j = own_job(c, req->id, "read the logs of");
    if (!j)
        return;
    char err[1400];
    char *text = job_read_log(j, MAX_LOG_REPLY, err, sizeof(err));
    if (!text) {
        send_error(c, ERR_INTERNAL, err);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", job_id(j));
    cJSON_AddStringToObject(o, "text", text);
    free(text);
    conn_send(c, proto_reply_ok(o));
    if (!req->follow)
        return;
    if (job_state_final(job_state_of(j)))
        conn_send(c, end_line(j));
    else
        c->following = j;
}

static void op_cancel(conn *c, proto_request *req)
{
    job *j = own_job(c, req->id, "cancel");
    if (!j)
        return;
    char err[256];
    if (job_cancel(c->srv->jobs, j, err, sizeof(err)) != 0) {
        send_error(c, ERR_BAD_STATE, err);
        return;
    }
    server_log(LOG_INFO, "job %s: cancel by %s (uid %u)", job_id(j), c->peer_user, c->peer_uid);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", job_id(j));
    cJSON_AddStringToObject(o, "state", job_state_name(job_state_of(j)));
    conn_send(c, proto_reply_ok(o));
}

/* A failed job queued again, from its newest complete checkpoint (or from
 * scratch when asked): {"id", "state", "from_step"}. */
static void op_resume(conn *c, proto_request *req)
{
    job *j = own_job(c, req->id, "resume");
    if (!j)
        return;
    char err[4096];
    const char *code;
    long from_step;
    if (job_resume(c->srv->jobs, j, req->from_scratch, c->peer_user, &from_step, &code, err,
                   sizeof err) != 0) {
        send_error(c, code, err);
        return;
    }
    server_log(LOG_INFO, "job %s: resumed by %s (uid %u) from step %ld", job_id(j), c->peer_user,
               c->peer_uid, from_step);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", job_id(j));
    cJSON_AddStringToObject(o, "state", job_state_name(job_state_of(j)));
    cJSON_AddNumberToObject(o, "from_step", (double)from_step);
    conn_send(c, proto_reply_ok(o));
}

/* The daemon never writes where a client says (it may run as root): it
 * names its own copy of the master, with its size, CRC-32 and version, and
 * hands it out in chunks (with "offset") that the client writes itself. */
static void op_export(conn *c, proto_request *req)
{
    job *j = own_job(c, req->id, "export");
    if (!j)
        return;
    char err[1400];
    const char *code;
    cJSON *o = job_export_json(j, &code, err, sizeof(err));
    if (o && req->has_offset) {
        char path[1200];
        job_file_path(j, "master.safetensors", path, sizeof path);
        cJSON_Delete(o);
        o = transfer_chunk(path, req->offset, req->version, &code, err, sizeof err);
        if (o)
            cJSON_AddStringToObject(o, "id", job_id(j));
    } else if (o && transfer_describe(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "path")),
                                      o, err, sizeof err) != 0) {
        cJSON_Delete(o);
        o = NULL;
        code = ERR_INTERNAL;
    }
    if (!o) {
        send_error(c, code, err);
        return;
    }
    conn_send(c, proto_reply_ok(o));
}

/* The job's metrics.jsonl from a byte offset, whole lines, bounded. */
static void op_metrics(conn *c, proto_request *req)
{
    job *j = own_job(c, req->id, "read the metrics of");
    if (!j)
        return;
    char path[1200], err[1400];
    const char *code;
    job_file_path(j, "metrics.jsonl", path, sizeof path);
    cJSON *o = transfer_lines(path, req->offset, &code, err, sizeof err);
    if (!o) {
        send_error(c, code, err);
        return;
    }
    cJSON_AddStringToObject(o, "id", job_id(j));
    conn_send(c, proto_reply_ok(o));
}

/* A sweep (docs/sweeps.md): all its jobs queued, or none. Refused at once
 * on its cheap bounds; else its jobs are checked and queued between other
 * requests (server_submit_sweep), and answered by sweep_submit_done. */
static void op_sweep_submit(conn *c, proto_request *req)
{
    char err[8192];
    const char *code;
    job_owner owner = peer_owner(c);
    sweep_submission *sub = sweeps_submit(c->srv->sweeps, req->sweep, &owner, &code, err,
                                          sizeof err);
    if (sub)
        server_submit_sweep(c, sub);
    else
        sweep_submit_done(c, NULL, code, err);
}

static void op_sweep_status(conn *c, proto_request *req)
{
    sweep *s = find_sweep(c, req->id);
    if (!s)
        return;
    const job_viewer v = peer_viewer(c);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "sweep", sweep_status_json(c->srv->sweeps, s, &v));
    conn_send(c, proto_reply_ok(o));
}

static void op_sweep_cancel(conn *c, proto_request *req)
{
    sweep *s = find_sweep(c, req->id);
    if (!s || !may_act(c, sweep_owner(s), "sweep", req->id, "cancel"))
        return;
    char err[256];
    int n = sweep_cancel(c->srv->sweeps, s, err, sizeof err);
    if (n < 0) {
        send_error(c, ERR_BAD_STATE, err);
        return;
    }
    server_log(LOG_INFO, "sweep %s: cancel by %s (uid %u)", req->id, c->peer_user, c->peer_uid);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", sweep_id(s));
    cJSON_AddNumberToObject(o, "cancelled_jobs", n);
    conn_send(c, proto_reply_ok(o));
}

/* priority, hold and release: {"id", "state", "priority", "held", "held_by",
 * "admin_hold"} as they are after the change (a running job asked to hold
 * is still running). */
static void op_schedule(conn *c, proto_request *req)
{
    static const char *const verbs[] = {[OP_PRIORITY] = "change the priority of",
                                        [OP_HOLD] = "hold", [OP_RELEASE] = "release"};
    job *j = own_job(c, req->id, verbs[req->op]);
    if (!j)
        return;
    char err[512];
    const char *code;
    const job_owner by = peer_owner(c);
    int rc = req->op == OP_PRIORITY
                 ? job_set_priority(c->srv->jobs, j, req->priority, c->admin, &code, err,
                                    sizeof err)
                 : job_set_hold(c->srv->jobs, j, req->op == OP_HOLD, &by, &code, err,
                                sizeof err);
    if (rc != 0) {
        send_error(c, code, err);
        return;
    }
    server_log(LOG_INFO, "job %s: %s by %s (uid %u)", job_id(j), proto_op_name(req->op),
               c->peer_user, c->peer_uid);
    const job_viewer v = peer_viewer(c);
    cJSON *status = job_status_json(j, &v), *o = cJSON_CreateObject();
    const char *const keep[] = {"id", "state", "priority", "held", "held_by", "admin_hold"};
    for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
        cJSON_AddItemToObject(o, keep[k], cJSON_DetachItemFromObjectCaseSensitive(status, keep[k]));
    cJSON_Delete(status);
    conn_send(c, proto_reply_ok(o));
}

/* rm and sweep_rm: {"id", "removed_jobs", "freed_bytes"}. */
static void op_rm(conn *c, proto_request *req)
{
    const int whole_sweep = req->op == OP_SWEEP_RM;
    job *j = NULL;
    sweep *s = NULL;
    if (whole_sweep ? !(s = find_sweep(c, req->id)) ||
                          !may_act(c, sweep_owner(s), "sweep", req->id, "remove")
                    : !(j = own_job(c, req->id, "remove")))
        return;
    char err[1600];
    const char *code;
    uint64_t freed;
    int n = 1;
    if ((whole_sweep ? sweep_remove(c->srv->sweeps, s, &n, &freed, &code, err, sizeof err)
                     : job_remove(c->srv->jobs, j, &freed, &code, err, sizeof err)) != 0) {
        send_error(c, code, err);
        return;
    }
    server_log(LOG_INFO, "%s %s removed by %s (uid %u): %d job(s), %llu bytes",
               whole_sweep ? "sweep" : "job", req->id, c->peer_user, c->peer_uid, n,
               (unsigned long long)freed);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", req->id);
    cJSON_AddNumberToObject(o, "removed_jobs", n);
    cJSON_AddNumberToObject(o, "freed_bytes", (double)freed);
    conn_send(c, proto_reply_ok(o));
}

void server_handle_request(conn *c, char *line, size_t len)
{
    server *s = c->srv;
    proto_request req;
    const char *code;
    char msg[512];
    if (proto_parse_request(line, len, &req, &code, msg, sizeof(msg)) != 0) {
        server_log(LOG_DEBUG, "bad request from uid %u: %s: %s", c->peer_uid, code, msg);
        send_error(c, code, msg);
        return;
    }
    server_log(LOG_DEBUG, "uid %u: %s %s", c->peer_uid, proto_op_name(req.op), req.id);
    if (req.op != OP_SUBMIT)
        jobs_schedule_pending(s->jobs); /* what it reads or changes as scheduled */
    switch (req.op) {
    case OP_SUBMIT:
        op_submit(c, &req);
        break;
    case OP_STATUS:
        op_status(c, &req);
        break;
    case OP_LIST: {
        const job_viewer v = peer_viewer(c);
        conn_send(c, proto_reply_ok(jobs_list_json(s->jobs, &v, req.limit ? req.limit
                                                                        : PROTO_LIST_DEFAULT,
                                                   req.before, req.state)));
        break;
    }
    case OP_WATCH:
        op_watch(c, &req);
        break;
    case OP_LOGS:
        op_logs(c, &req);
        break;
    case OP_CANCEL:
        op_cancel(c, &req);
        break;
    case OP_RESUME:
        op_resume(c, &req);
        break;
    case OP_EXPORT:
        op_export(c, &req);
        break;
    case OP_METRICS:
        op_metrics(c, &req);
        break;
    case OP_SWEEP_SUBMIT:
        op_sweep_submit(c, &req);
        break;
    case OP_SWEEP_STATUS:
        op_sweep_status(c, &req);
        break;
    case OP_SWEEP_LIST: {
        const job_viewer v = peer_viewer(c);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "sweeps", sweeps_list_json(s->sweeps, &v));
        conn_send(c, proto_reply_ok(o));
        break;
    }
    case OP_SWEEP_CANCEL:
        op_sweep_cancel(c, &req);
        break;
    case OP_PRIORITY:
    case OP_HOLD:
    case OP_RELEASE:
        op_schedule(c, &req);
        break;
    case OP_RM:
    case OP_SWEEP_RM:
        op_rm(c, &req);
        break;
    case OP_DEVICES: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "devices", jobs_devices_json(s->jobs));
        add_gpu_problems(o);
        conn_send(c, proto_reply_ok(o));
        break;
    }
    case OP_USAGE:
    case OP_HISTORY: {
        cJSON *o = req.op == OP_USAGE ? jobs_usage_json(s->jobs)
                                      : jobs_history_json(s->jobs, req.user[0] ? req.user : NULL,
                                                          req.since);
        if (o)
            conn_send(c, proto_reply_ok(o));
        else
            send_error(c, ERR_INTERNAL, "out of memory");
        break;
    }
    case OP_VERSION:
        conn_send(c, proto_reply_ok(version_json()));
        break;
    case OP_TOP:
        op_top(c);
        break;
    case OP_SHUTDOWN: {
        if (!c->admin) {
            server_log_refusal(server_mono_s(), c->peer_uid, LOG_INFO, "refused a shutdown by %s "
                               "(uid %u)", c->peer_user, c->peer_uid);
            send_error(c, ERR_FORBIDDEN, "only root, parled's own user and its --admin-group "
                       "may shut it down");
            break;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stopping_jobs", jobs_running(s->jobs));
        conn_send(c, proto_reply_ok(o));
        char why[64];
        snprintf(why, sizeof(why), "shutdown requested by uid %u", c->peer_uid);
        server_shutdown(s, why);
        break;
    }
    }
    proto_request_free(&req);
}
