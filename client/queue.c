/* parlectl's commands on a job's place in the queue: priority, hold and
 * release (docs/architecture.md, "Scheduling"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* The reply {"id", "state", "priority", "held"}, or with --json as it is. */
static int print_reply(const args *a, cJSON *reply, const char *what)
{
    if (!reply)
        return EXIT_FAIL;
    if (a->json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else {
        printf("%s %s: priority %.0f, %s%s\n", str(reply, "id"), what, num(reply, "priority"),
               str(reply, "state"),
               strcmp(str(reply, "state"), "running") == 0 &&
                       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "held"))
                   ? " (checkpointing, then back in the queue, held)"
                   : "");
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

int cmd_priority(const command *cmd, int argc, char **argv)
{
    PARSE("j", 2, 2);
    char *end;
    long priority = strtol(a.pos[1], &end, 10);
    if (*a.pos[1] == '\0' || *end || priority < -1000000 || priority > 1000000)
        return usage_error(cmd, "the priority must be an integer: ", a.pos[1]);
    cJSON *req = op_request("priority", a.pos[0]);
    cJSON_AddNumberToObject(req, "priority", (double)priority);
    return print_reply(&a, call(req), "priority set");
}

/* hold and release: the command's name is the op's. */
int cmd_hold(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, 1);
    const int hold = strcmp(cmd->name, "hold") == 0;
    return print_reply(&a, call(op_request(cmd->name, a.pos[0])), hold ? "held" : "released");
}

/* One rm or sweep_rm of id: its reply (without "ok"), or NULL after the
 * message. Prints what it removed unless json. */
cJSON *remove_one(const char *op, const char *id, int json)
{
    cJSON *reply = call(op_request(op, id));
    if (!reply)
        return NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
    if (!json)
        printf("%s removed: %.0f job(s), %.1f MiB freed\n", id, num(reply, "removed_jobs"),
               num(reply, "freed_bytes") / (1024.0 * 1024));
    return reply;
}

int cmd_rm(const command *cmd, int argc, char **argv)
{
    PARSE("j", 1, ARGS_MAX_POS);
    int rc = EXIT_OK;
    cJSON *all = cJSON_CreateArray();
    for (int i = 0; i < a.npos; i++) {
        cJSON *reply = remove_one(is_sweep_id(a.pos[i]) ? "sweep_rm" : "rm", a.pos[i], a.json);
        if (reply)
            cJSON_AddItemToArray(all, reply);
        else
            rc = EXIT_FAIL;
    }
    if (a.json)
        print_json(all);
    cJSON_Delete(all);
    return rc;
}
