/* A connection's output and its end (server_impl.h): its replies queued
 * with a bound, closed once they are written or the client stops reading.
 * The bottom of daemon/server: it calls no other file of the folder, and
 * resumes a connection's reading through its server's `resume`. */
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

/* A client that does not read its watch stream is dropped once this much
 * output waits for it (a logs reply is at most 8 MiB). */
#define MAX_PENDING_OUTPUT (16u << 20)

double server_mono_s(void) { return (double)uv_hrtime() * 1e-9; }

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

void conn_close(conn *c)
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
        c->srv->resume(c);
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
