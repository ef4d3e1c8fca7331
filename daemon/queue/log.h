/* parled's log (log.c): the server, the queue and the state dir all write
 * to it, and it depends on none of them. */
#ifndef PARLE_LOG_H
#define PARLE_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };
extern enum log_level server_log_level;
/* One line on stderr, "parled: <level>: ...", when level <= server_log_level. */
void server_log(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A refusal of a user's request (a rejected submit, a forbidden op, a
 * connection over a bound), logged as server_log does, but at most
 * LOG_REFUSALS_PER_MINUTE lines per uid in each minute from its first: one
 * line then says the rest are counted, and the user's next refusal after the
 * minute first logs how many were not. A member cannot grow the log at will.
 * `now`: monotonic seconds. */
#define LOG_REFUSALS_PER_MINUTE 20
void server_log_refusal(double now, unsigned uid, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
