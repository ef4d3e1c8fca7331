/* The daemon's connections (server.h): accepted from the listener (who may
 * connect: server_peer.c; the listener itself: server_lifecycle.c), their
 * bounded output, and request lines handed to server_ops.c. */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs.h"
#include "protocol.h"
#include "server_impl.h"

/* A client that does not read its watch stream is dropped once this much
 * output waits for it (a logs reply is at most 8 MiB). */
#define MAX_PENDING_OUTPUT (16u << 20)
/* A client's requests are not read while this much of its output waits:
 * a client pipelining requests without reading the replies holds at most
 * this, one request line and one reply, not all it asked for. */
#define READ_PAUSE_OUTPUT (1u << 20)

double server_mono_s(void) { return (double)uv_hrtime() * 1e-9; }

/* ---- connections ---- */

/* An ended connection (a shutdown, an error that ends it) gets this long to
 * read the replies it is owed; then it is closed with them unsent, so a
 * client that never reads cannot keep parled from exiting. */
#define END_DRAIN_MS 5000

static void on_timer_closed(uv_handle_t *h)
{
    conn *c = h->data;
    proto_framer_free(&c->framer);
    free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn *c = (conn *)h;
    uv_close((uv_handle_t *)&c->end_timer, on_timer_closed);
}

static void conn_unlink(conn *c)
{
    c->closing = 1;
    if (c->submitting) /* the sweep is still queued, unanswered */
        c->submitting->c = NULL;
    c->submitting = NULL;
    c->srv->nconns--;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
}

static void conn_close(conn *c)
{
    if (c->closing)
        return;
    conn_unlink(c);
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void on_shutdown_done(uv_shutdown_t *req, int status)
{
    conn *c = req->data;
    (void)status;
    if (!uv_is_closing((uv_handle_t *)&c->pipe)) /* else the drain's time ran out */
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void on_drain_timeout(uv_timer_t *t)
{
    conn *c = t->data;
    server_log_refusal(server_mono_s(), c->peer_uid, LOG_INFO, "closing a connection of %s "
                       "(uid %u) that did not read its last replies within %d s", c->peer_user,
                       c->peer_uid, END_DRAIN_MS / 1000);
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* Close once what is queued has been written: after an error that ends a
 * connection, and at a daemon shutdown. */
void conn_end(conn *c)
{
    if (c->closing)
        return;
    conn_unlink(c);
    uv_read_stop((uv_stream_t *)&c->pipe);
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->pipe, on_shutdown_done) != 0)
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
    else
        uv_timer_start(&c->end_timer, on_drain_timeout, END_DRAIN_MS, 0);
}

static void serve_lines(conn *c);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

void conn_resume(conn *c)
{
    if (c->closing)
        return;
    serve_lines(c);
    if (!c->paused && !c->closing && !c->submitting && !c->yielded)
        uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, on_read);
}

static void on_written(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    conn *c = req->data;
    free(w->data);
    free(w);
    if (status < 0 && status != UV_ECANCELED) {
        if (!c->closing) /* once, not for each write queued behind */
            server_log(LOG_DEBUG, "write to a client failed: %s", uv_strerror(status));
        conn_close(c);
    } else if (c->paused && !c->closing &&
               uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) < READ_PAUSE_OUTPUT / 2) {
        c->paused = 0;
        conn_resume(c);
    }
}

/* Queue one line; takes ownership of `line`. */
void conn_send(conn *c, char *line)
{
    if (!line || c->closing) {
        free(line);
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > MAX_PENDING_OUTPUT) {
        server_log_refusal(server_mono_s(), c->peer_uid, LOG_WARN, "dropping a client of %s "
                           "(uid %u) that does not read its replies", c->peer_user, c->peer_uid);
        free(line);
        conn_close(c);
        return;
    }
    write_req *w = malloc(sizeof(*w));
    if (!w) {
        free(line);
        conn_close(c);
        return;
    }
    w->data = line;
    w->req.data = c;
    uv_buf_t buf = uv_buf_init(line, (unsigned)strlen(line));
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &buf, 1, on_written) != 0) {
        free(line);
        free(w);
        conn_close(c);
    }
}

void send_error(conn *c, const char *code, const char *message)
{
    conn_send(c, proto_reply_error(code, message));
}

void send_error_and_end(conn *c, const char *code, const char *message)
{
    send_error(c, code, message);
    conn_end(c);
}

/* The final line of a watch or a log follow. */
char *end_line(job *j)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", "end");
    cJSON_AddStringToObject(o, "id", job_id(j));
    cJSON_AddStringToObject(o, "state", job_state_name(job_state_of(j)));
    cJSON_AddItemToObject(o, "job", job_status_json(j, NULL)); /* its owner or an admin */
    return proto_line(o);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = (conn *)stream;
    if (nread == UV_EOF) {
        conn_end(c); /* a half-closed client still gets its replies */
    } else if (nread < 0) {
        server_log(LOG_DEBUG, "read from a client: %s", uv_strerror((int)nread));
        conn_close(c);
    } else if (nread > 0 && proto_framer_push(&c->framer, buf->base, (size_t)nread) != 0) {
        send_error_and_end(c, ERR_INTERNAL, "out of memory");
    } else if (nread > 0) {
        serve_lines(c);
    }
    free(buf->base);
}

/* Answer the complete request lines buffered, until the client's unread
 * replies pass READ_PAUSE_OUTPUT (on_written goes on once they drain), a
 * sweep of its is being submitted (server_turns.c goes on once it is
 * answered), or its turn of SERVE_SLICE_NS is over (server_turns.c goes on
 * at the next loop turn, after the others): then stop reading it. */
static void serve_lines(conn *c)
{
    char *line;
    size_t len;
    int r;
    uint64_t until = uv_hrtime() + SERVE_SLICE_NS;
    c->yielded = 0;
    while (!c->closing && !c->paused && !c->submitting && !c->yielded &&
           (r = proto_framer_next(&c->framer, &line, &len)) != 0) {
        if (r < 0) {
            char msg[96];
            snprintf(msg, sizeof(msg), "request line longer than %u bytes", PROTO_MAX_LINE);
            send_error_and_end(c, ERR_LINE_TOO_LONG, msg);
            break;
        }
        server_handle_request(c, line, len);
        if (!c->closing &&
            uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > READ_PAUSE_OUTPUT)
            c->paused = 1;
        else if (!c->closing && !c->submitting && uv_hrtime() >= until)
            server_yield(c);
        if (!c->closing && (c->paused || c->submitting || c->yielded))
            uv_read_stop((uv_stream_t *)&c->pipe);
    }
}

static int conns_of(const server *s, unsigned uid)
{
    int n = 0;
    for (const conn *c = s->conns; c; c = c->next)
        n += c->peer_uid == uid;
    return n;
}

void on_connection(uv_stream_t *listener, int status)
{
    server *s = listener->data;
    if (status < 0) {
        server_log(LOG_WARN, "accept: %s", uv_strerror(status));
        return;
    }
    conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->srv = s;
    c->peer_uid = (unsigned)-1;
    s->nconns++;
    proto_framer_init(&c->framer, PROTO_MAX_LINE);
    uv_pipe_init(s->loop, &c->pipe, 0);
    uv_timer_init(s->loop, &c->end_timer);
    c->end_timer.data = c;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    if (uv_accept(listener, (uv_stream_t *)&c->pipe) != 0) {
        conn_close(c);
        return;
    }
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 || !peer_identify(s, fd, c)) {
        server_log_refusal(server_mono_s(), c->peer_uid, LOG_WARN,
                           "refused a connection from uid %d", (int)c->peer_uid);
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "uid %d may not use parled (allowed: root, uid %u%s)", (int)c->peer_uid,
                 (unsigned)geteuid(), s->have_group ? " and the daemon's --group" : "");
        send_error_and_end(c, ERR_FORBIDDEN, msg);
        return;
    }
    /* The bounds count this connection, already linked. */
    char msg[160] = "";
    if (s->max_conns > 0 && s->nconns > s->max_conns)
        snprintf(msg, sizeof msg, "parled serves %d connections at once (--max-connections)",
                 s->max_conns);
    else if (s->max_conns_per_user > 0 && !c->admin &&
             conns_of(s, c->peer_uid) > s->max_conns_per_user)
        snprintf(msg, sizeof msg, "%s (uid %u) has %d connections open "
                 "(--max-connections-per-user)", c->peer_user, c->peer_uid, s->max_conns_per_user);
    if (msg[0]) {
        server_log_refusal(server_mono_s(), c->peer_uid, LOG_WARN, "refused a connection: %s",
                           msg);
        send_error_and_end(c, ERR_LIMIT, msg);
        return;
    }
    uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, on_read);
}
