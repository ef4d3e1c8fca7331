/* parled's log (log.c): the server, the queue and the state dir all write
 * to it, and it depends on none of them. */
#ifndef PARLE_LOG_H
#define PARLE_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };
extern enum log_level server_log_level;
/* One line on stderr, "parled: <level>: ...", when level <= server_log_level. */
void server_log(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
