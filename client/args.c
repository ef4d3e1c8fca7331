/* parlectl's command lines: the flags the commands share, usage errors,
 * failure messages, and whether an argument names a sweep. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "ctl.h"
int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("parlectl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

int usage_error(const command *cmd, const char *what, const char *arg)
{
    fprintf(stderr, "parlectl %s: %s%s; try 'parlectl %s --help'\n", cmd->name, what, arg,
            cmd->name);
    return EXIT_USAGE;
}

/* Parse argv after the command's name; `allowed` lists the flags it takes
 * (ctl.h). Prints the usage error and returns -1, or 1 for --help. */
int parse_args(const command *cmd, int argc, char **argv, const char *allowed, int maxpos,
                      args *a)
{
    memset(a, 0, sizeof(*a));
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            printf("usage: parlectl %s\n", cmd->help);
            return 1;
        } else if (strcmp(s, "--json") == 0 && strchr(allowed, 'j')) {
            a->json = 1;
        } else if (strcmp(s, "-q") == 0 && strchr(allowed, 'q')) {
            a->quiet = 1;
        } else if ((strcmp(s, "-f") == 0 || strcmp(s, "--follow") == 0) && strchr(allowed, 'f')) {
            a->follow = 1;
        } else if (strcmp(s, "--watch") == 0 && strchr(allowed, 'w')) {
            a->watch = 1;
        } else if (strcmp(s, "--wait") == 0 && strchr(allowed, 'W')) {
            a->wait = 1;
        } else if (strcmp(s, "--from-scratch") == 0 && strchr(allowed, 'F')) {
            a->from_scratch = 1;
        } else if ((strcmp(s, "--set") == 0 || strncmp(s, "--set=", 6) == 0) &&
                   strchr(allowed, 's')) {
            if (s[5] == '\0' && i + 1 >= argc)
                return usage_error(cmd, "--set needs key.path=value", ""), -1;
            if (a->nsets == (int)(sizeof(a->sets) / sizeof(a->sets[0])))
                return usage_error(cmd, "too many --set options", ""), -1;
            a->sets[a->nsets++] = s[5] == '=' ? (char *)s + 6 : argv[++i];
        } else if ((strcmp(s, "--priority") == 0 || strncmp(s, "--priority=", 11) == 0) &&
                   strchr(allowed, 'p')) {
            if (s[10] == '\0' && i + 1 >= argc)
                return usage_error(cmd, "--priority needs a number", ""), -1;
            if (a->nsets == (int)(sizeof(a->sets) / sizeof(a->sets[0])))
                return usage_error(cmd, "too many --set options", ""), -1;
            snprintf(a->priority_set, sizeof a->priority_set, "priority=%.30s",
                     s[10] == '=' ? s + 11 : argv[++i]);
            a->sets[a->nsets++] = a->priority_set;
        } else if ((strcmp(s, "--after") == 0 || strcmp(s, "--after-any") == 0) &&
                   strchr(allowed, 'a')) {
            /* --after IDS is --set after=IDS; --after-any also after_any=true */
            if (i + 1 >= argc)
                return usage_error(cmd, s, " needs job or sweep ids (j0001,s0002)"), -1;
            if (a->after_set[0] ||
                a->nsets + 2 > (int)(sizeof(a->sets) / sizeof(a->sets[0])))
                return usage_error(cmd, "one --after or --after-any, and too many --set "
                                   "options", ""), -1;
            snprintf(a->after_set, sizeof a->after_set, "after=%.280s", argv[i + 1]);
            a->sets[a->nsets++] = a->after_set;
            if (s[7] == '-')
                a->sets[a->nsets++] = "after_any=true";
            i++;
        } else if (strcmp(s, "-o") == 0 && strchr(allowed, 'o')) {
            if (i + 1 >= argc)
                return usage_error(cmd, "-o needs a file name", ""), -1;
            a->out = argv[++i];
        } else if ((strcmp(s, "--state") == 0 || strncmp(s, "--state=", 8) == 0) &&
                   strchr(allowed, 'S')) {
            if (s[7] == '\0' && i + 1 >= argc)
                return usage_error(cmd, "--state needs a state", ""), -1;
            a->state = s[7] == '=' ? s + 8 : argv[++i];
        } else if (strcmp(s, "--all") == 0 && strchr(allowed, 'A')) {
            a->all = 1;
        } else if (strcmp(s, "--limit") == 0 && strchr(allowed, 'L')) {
            if (i + 1 >= argc)
                return usage_error(cmd, "--limit needs a number of jobs", ""), -1;
            a->limit = argv[++i];
        } else if ((strcmp(s, "--user") == 0 || strcmp(s, "--since") == 0) &&
                   strchr(allowed, s[2] == 'u' ? 'u' : 'T')) {
            if (i + 1 >= argc)
                return usage_error(cmd, s, " needs a value"), -1;
            *(s[2] == 'u' ? &a->user : &a->since) = argv[++i];
        } else if (s[0] == '-' && s[1] != '\0' && !(s[1] >= '0' && s[1] <= '9')) {
            /* (a negative number, `priority ID -5`, is an argument) */
            return usage_error(cmd, "unknown option ", s), -1;
        } else if (a->npos < maxpos) {
            a->pos[a->npos++] = argv[i];
        } else {
            return usage_error(cmd, "unexpected argument ", s), -1;
        }
    }
    return 0;
}

int is_sweep_id(const char *id)
{
    if (id[0] != 's' || id[1] < '0' || id[1] > '9')
        return 0;
    for (const char *p = id + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}
