/* Text a user writes (a job's name, a sweep's, any free-text field) reaches
 * logs and terminals; what it may hold, and how a bad value is quoted back
 * in an error message without passing its bytes on. */
#ifndef PARLE_USER_TEXT_H
#define PARLE_USER_TEXT_H

#include <stddef.h>

/* Valid UTF-8 without control characters (C0, DEL, C1: newline, ESC and the
 * like, which forge log lines or drive a terminal): 0; or -1 with the
 * offending byte's offset in *at and what is wrong in *what. */
int user_text_check(const char *s, size_t *at, const char **what);

/* `s` as quoted in a message: printable ASCII only (others as '?'), at most
 * 40 bytes then "...". Returns out. */
const char *user_text_shown(const char *s, char out[48]);

#endif
