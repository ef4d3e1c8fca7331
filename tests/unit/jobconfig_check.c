/* The job file tests' shared helpers (jobconfig_check.h). */
#include <string.h>

#include "jobconfig_check.h"

/* Messages are joined by "; " (which also introduces an enum's known values). */
int count_messages(const char *err)
{
    int n = *err != '\0';
    for (const char *s = err; (s = strstr(s, "; ")); s += 2)
        n += strncmp(s, "; known: ", 9) != 0;
    return n;
}

int parse(const char *json, job_config *cfg, char *err, size_t errlen)
{
    return job_config_parse(json, strlen(json), cfg, err, errlen);
}
