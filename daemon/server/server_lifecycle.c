/* The daemon's start (server.h): the listening socket (a stale one
 * replaced, or the one systemd passed), the queue opened, and job events to
 * watchers (the stop, its grace and the re-exec: server_stop.c). */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "jobs.h"
#include "metrics.h"
#include "protocol.h"
#include "server_impl.h"

/* ---- job events to watchers ---- */

static void on_job_event(void *user, job *j, const char *line)
{
    server *s = user;
    metrics_job_event(s->metrics);
    for (conn *c = s->conns, *next; c; c = next) {
        next = c->next; /* conn_send may drop c */
        if (c->watching == j)
            conn_send(c, strdup(line));
    }
}

static void on_job_log(void *user, job *j, const char *text)
{
    server *s = user;
    for (conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->following != j)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "log_line");
        cJSON_AddStringToObject(o, "id", job_id(j));
        cJSON_AddStringToObject(o, "text", text);
        conn_send(c, proto_line(o));
    }
}

static void on_job_end(void *user, job *j)
{
    server *s = user;
    enum job_state st = job_state_of(j);
    metrics_job_event(s->metrics);
    server_log(st == JOB_FAILED ? LOG_WARN : LOG_INFO, "job %s ended: %s", job_id(j),
               job_state_final(st) ? job_state_name(st)
               : s->restarting ? "stopped for the re-exec" : "stopped by the shutdown");
    if (!s->stopping && jobs_faulted(s->jobs) > s->faults_seen) {
        s->faults_seen = jobs_faulted(s->jobs);
        server_restart(s, job_id(j));
    }
    for (conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->watching == j || c->following == j) {
            c->watching = c->following = NULL;
            conn_send(c, end_line(j));
        }
    }
    if (s->stopping && jobs_running(s->jobs) == 0)
        server_finish_shutdown(s);
}

/* ---- the socket ---- */

/* A socket file left by a dead daemon refuses connections: replace it. A
 * live one means another parled serves it. */
static int clear_stale_socket(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a socket", path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    int r = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
    int e = errno;
    close(fd);
    if (r == 0) {
        snprintf(err, errlen, "another parled is running on %s", path);
        return -1;
    }
    if (e != ECONNREFUSED) {
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -1;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove the stale socket %s: %s", path, strerror(errno));
        return -1;
    }
    server_log(LOG_INFO, "replaced the stale socket %s", path);
    return 0;
}

static int listen_socket(server *s, int fd, char *err, size_t errlen)
{
    if (fd > 0) { /* socket activation: systemd bound it, owns it, removes it */
        uv_pipe_init(s->loop, &s->listener, 0);
        s->listener.data = s;
        int r = uv_pipe_open(&s->listener, fd);
        if (r == 0)
            r = uv_listen((uv_stream_t *)&s->listener, 256, on_connection);
        if (r != 0) {
            snprintf(err, errlen, "the socket passed by systemd (fd %d): %s", fd, uv_strerror(r));
            uv_close((uv_handle_t *)&s->listener, NULL);
            return -1;
        }
        s->activated = 1;
        return 0;
    }
    if (clear_stale_socket(s->socket_path, err, errlen) != 0)
        return -1;
    uv_pipe_init(s->loop, &s->listener, 0);
    s->listener.data = s;
    /* Created private, then opened to the group: never briefly world-usable. */
    mode_t old = umask(0077);
    int r = uv_pipe_bind(&s->listener, s->socket_path);
    umask(old);
    if (r == 0 && chmod(s->socket_path, 0660) != 0)
        r = uv_translate_sys_error(errno);
    if (r == 0 && s->have_group && chown(s->socket_path, (uid_t)-1, s->group) != 0)
        r = uv_translate_sys_error(errno);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&s->listener, 256, on_connection);
    if (r != 0) {
        /* libuv reports a missing directory as EACCES: say which it is. */
        char dir[sizeof(s->socket_path)];
        snprintf(dir, sizeof(dir), "%s", s->socket_path);
        char *slash = strrchr(dir, '/');
        struct stat st;
        if (slash && slash != dir)
            *slash = '\0';
        if (slash && slash != dir && stat(dir, &st) != 0)
            snprintf(err, errlen, "%s: the directory %s does not exist", s->socket_path, dir);
        else
            snprintf(err, errlen, "%s: %s", s->socket_path, uv_strerror(r));
        uv_close((uv_handle_t *)&s->listener, NULL);
        return -1;
    }
    return 0;
}

int server_open(server **out, uv_loop_t *loop, const server_config *cfg,
                void (*on_stopped)(void *user), void *user, char *err, size_t errlen)
{
    server *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->loop = loop;
    s->on_stopped = on_stopped;
    s->user = user;
    s->started_at = server_mono_s();
    s->resume = conn_resume;
    s->keep_fd = -1;
    if (strlen(cfg->socket_path) >= sizeof(s->socket_path)) {
        snprintf(err, errlen, "socket path too long (at most %zu bytes): %s",
                 sizeof(s->socket_path) - 1, cfg->socket_path);
        goto fail;
    }
    snprintf(s->socket_path, sizeof(s->socket_path), "%s", cfg->socket_path);
    snprintf(s->state_dir, sizeof(s->state_dir), "%s", cfg->state_dir);
    if (cfg->group) {
        if (resolve_group("--group", cfg->group, &s->group, err, errlen) != 0)
            goto fail;
        s->have_group = 1;
    }
    if (cfg->admin_group) {
        if (resolve_group("--admin-group", cfg->admin_group, &s->admin_group, err, errlen) != 0)
            goto fail;
        s->have_admin_group = 1;
    }
    s->max_conns = cfg->max_conns;
    s->max_conns_per_user = cfg->max_conns_per_user;
    jobs_listener l = {.on_event = on_job_event, .on_log = on_job_log, .on_end = on_job_end,
                       .user = s};
    /* The sweeps are the store's client: freed with the queue. */
    if (!(s->sweeps = sweeps_new(cfg->state_dir))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (jobs_open(&s->jobs, loop, cfg->state_dir, cfg->devices, &l, sweeps_client(s->sweeps),
                  err, errlen) != 0)
        goto fail;
    jobs_limits limits = cfg->sched;
    limits.jobs_per_user = cfg->max_jobs_per_user;
    limits.usage_half_life_s = cfg->usage_half_life_s;
    limits.usage_save_s = cfg->usage_save_s;
    limits.preempt_grace_s = cfg->preempt_grace_s;
    limits.keep_ended_s = cfg->keep_ended_s;
    limits.keep_ended_count = cfg->keep_ended_count;
    limits.remove_ended_s = cfg->remove_ended_s;
    limits.save_retry_s = cfg->save_retry_s;
    jobs_set_limits(s->jobs, &limits);
    if (server_metrics_open(s, cfg, err, errlen) != 0 ||
        listen_socket(s, cfg->listen_fd, err, errlen) != 0) {
        metrics_close(s->metrics);
        jobs_close(s->jobs);
        uv_run(loop, UV_RUN_DEFAULT); /* the handles live in s until closed */
        goto fail;
    }
    s->stop_timeout_s = cfg->stop_timeout_s;
    uv_timer_init(loop, &s->stop_timer);
    s->stop_timer.data = s;
    server_turns_init(s);
    jobs_start(s->jobs);
    *out = s;
    return 0;
fail:
    free(s);
    return -1;
}

void server_free(server *s) { free(s); }
