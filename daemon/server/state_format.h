/* The state dir's format version (state_format.c). */
#ifndef PARLE_STATE_FORMAT_H
#define PARLE_STATE_FORMAT_H

#include <stddef.h>

/* The layout of docs/architecture.md "State dir": raise it when a change
 * means an older parled would misread a state dir this one wrote. */
#define STATE_FORMAT 1

/* Check <dir>/format (write it when absent): 0, or -1 and why in err. */
int state_format_check(const char *dir, char *err, size_t errlen);

#endif
