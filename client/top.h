/* parlectl top (top.c: the terminal, the keys and the refresh; top_view.c:
 * the picture of one `top` reply, docs/protocol.md). */
#ifndef PARLECTL_TOP_H
#define PARLECTL_TOP_H

#include <cjson/cJSON.h>

#include "ctl.h"

enum top_sort { TOP_SORT_ID, TOP_SORT_OWNER, TOP_SORT_PROGRESS, TOP_SORT_SPEED, TOP_SORTS };

typedef struct top_options {
    enum top_sort sort;      /* the running jobs' order */
    int mine_only;           /* only the viewer's jobs and line of use */
    int key_help;            /* a last line naming the keys (on a terminal) */
} top_options;

/* The lines of the picture, each '\n'-terminated, at most `width` bytes and
 * `height` lines; malloc'd, NULL when out of memory. */
char *top_render(const cJSON *reply, const top_options *opt, int width, int height);
const char *top_sort_name(enum top_sort s);

#endif
