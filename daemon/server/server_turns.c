/* Work that waits for its next turn of the loop (server_impl.h): the
 * connections whose turn of serving ran out (serve_lines), and the sweeps
 * being submitted, a step each, then answered (sweep_submit_done). One idle handle, active while there is
 * some, so the loop polls every other connection between two turns. */
#include <stdlib.h>

#include "server_impl.h"

/* How long one step of a sweep's submission holds the loop. */
#define SUBMIT_STEP_S 0.002

/* One step of the first sweep being submitted, which then goes last: each
 * gets its turn, and the loop serves everyone between two. */
static void step_submission(server *s)
{
    submitting *w = s->submitting;
    sweep *out;
    const char *code = ERR_INTERNAL;
    char err[8192] = "";
    int done = sweep_submission_step(w->sub, SUBMIT_STEP_S, &out, &code, err, sizeof err);
    s->submitting = w->next;
    w->next = NULL;
    if (!done) {
        submitting **at = &s->submitting;
        while (*at)
            at = &(*at)->next;
        *at = w;
        return;
    }
    conn *c = w->c;
    sweep_submission_free(w->sub);
    free(w);
    if (c) {
        c->submitting = NULL;
        sweep_submit_done(c, out, code, err);
        c->srv->resume(c);
    }
}

/* A turn: each connection that yielded serves its next slice, then one
 * sweep being submitted takes a step. */
static void on_turn(uv_idle_t *h)
{
    server *s = h->data;
    int yielded = 0;
    for (conn *c = s->conns, *next; c; c = next) {
        next = c->next; /* serving may drop c */
        if (c->yielded) {
            s->resume(c);
            yielded |= c->yielded;
        }
    }
    if (s->submitting)
        step_submission(s);
    if (!yielded && !s->submitting)
        uv_idle_stop(h);
}

void sweep_submit_done(conn *c, sweep *s, const char *code, const char *err)
{
    if (!s) {
        server_log_refusal(server_mono_s(), c->peer_uid, LOG_INFO, "rejected a sweep from %s "
                           "(uid %u): %s", c->peer_user, c->peer_uid, err);
        send_error(c, code, err);
        return;
    }
    const job_viewer v = peer_viewer(c);
    cJSON *o = sweep_status_json(c->srv->sweeps, s, &v);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "points");
    conn_send(c, proto_reply_ok(o));
}

void server_submit_sweep(conn *c, sweep_submission *sub)
{
    server *s = c->srv;
    submitting *w = calloc(1, sizeof *w);
    if (!w) {
        sweep_submission_free(sub);
        send_error(c, ERR_INTERNAL, "out of memory");
        return;
    }
    w->sub = sub;
    w->c = c;
    c->submitting = w;
    submitting **at = &s->submitting;
    while (*at)
        at = &(*at)->next;
    *at = w;
    uv_idle_start(&s->turn_idle, on_turn);
}

/* At a shutdown: a sweep not yet queued is dropped unanswered (its client's
 * connection ends); one whose jobs were being queued gets the rest at the
 * next start. */
void server_turns_close(server *s)
{
    while (s->submitting) {
        submitting *w = s->submitting;
        s->submitting = w->next;
        if (w->c)
            w->c->submitting = NULL;
        sweep_submission_free(w->sub);
        free(w);
    }
    uv_close((uv_handle_t *)&s->turn_idle, NULL);
}

void server_yield(conn *c)
{
    c->yielded = 1;
    uv_idle_start(&c->srv->turn_idle, on_turn);
}

void server_turns_init(server *s)
{
    uv_idle_init(s->loop, &s->turn_idle);
    s->turn_idle.data = s;
}
