/* A rule's view of the job validator (coupling.h, rule_check): plain data
 * the validator fills and reads back. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coupling.h"

enum rule_field rule_field_state(const rule_check *c, const char *path)
{
    for (int i = 0; i < c->nfields; i++)
        if (!strcmp(c->field[i], path))
            return c->state[i];
    return RULE_FIELD_BAD;
}

void rule_report(rule_check *c, const char *fmt, ...)
{
    if (c->nreports >= RULE_CHECK_MAX_REPORTS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->report[c->nreports++], sizeof c->report[0], fmt, ap);
    va_end(ap);
}
