/* parlectl's commands on the daemon itself: devices, version, shutdown. */
#include <stdio.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "ctl.h"
#include "parle_config.h"

int cmd_devices(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 0);
    cJSON *reply = call(op_request("devices", NULL));
    if (!reply)
        return EXIT_FAIL;
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(reply, "devices"), *d;
    if (a.json) {
        print_json(devs);
        devs = NULL;
    }
    cJSON_ArrayForEach(d, devs) {
        const char *job = str(d, "job");
        if (strcmp(str(d, "kind"), "cpu") == 0)
            printf("cpu   %d cores", cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "cores")));
        else if (strcmp(str(d, "kind"), "rank") == 0)
            printf("rank %.0f  pid %.0f, %.0f cores, %.0f GPUs, %s", num(d, "rank"), num(d, "pid"),
                   num(d, "cores"), num(d, "gpus"), str(d, "state"));
        else if (*str(d, "name"))
            printf("gpu %.0f  %s, %.1f GiB", num(d, "index"), str(d, "name"),
                   num(d, "memory_bytes") / (1024.0 * 1024 * 1024));
        else
            printf("gpu %.0f", num(d, "index"));
        printf("  %s", *job ? "running" : "idle");
        const cJSON *on = cJSON_GetObjectItemCaseSensitive(d, "jobs"), *id;
        if (cJSON_IsArray(on))
            cJSON_ArrayForEach(id, on) printf(" %s", cJSON_GetStringValue(id));
        else if (*job)
            printf(" %s", job);
        /* Until parled has re-executed itself (docs/gpu.md "Sticky device faults"). */
        if (*str(d, "faulted"))
            printf("  FAULTED: %s", str(d, "faulted"));
        putchar('\n');
    }
    /* GPUs no job may use, and a driver that could not be asked. */
    const cJSON *bad = a.json ? NULL : cJSON_GetObjectItemCaseSensitive(reply, "unusable");
    cJSON_ArrayForEach(d, bad) {
        printf("gpu %.0f  ", num(d, "index"));
        if (*str(d, "name"))
            printf("%s, %.1f GiB  ", str(d, "name"), num(d, "memory_bytes") / (1024.0 * 1024 * 1024));
        printf("unusable: %s\n", str(d, "why"));
    }
    if (!a.json && *str(reply, "gpu_error"))
        printf("gpu   none: %s\n", str(reply, "gpu_error"));
    cJSON_Delete(reply);
    return EXIT_OK;
}

int cmd_version(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 0);
    cJSON *reply = call(op_request("version", NULL));
    if (!reply)
        return EXIT_FAIL;
    if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else {
        printf("parlectl %s\nparled %s (protocol %.0f)\n", PARLE_VERSION, str(reply, "version"),
               num(reply, "protocol"));
    }
    cJSON_Delete(reply);
    return EXIT_OK;
}

int cmd_shutdown(const command *cmd, int argc, char **argv)
{
    PARSE("j", 0, 0);
    cJSON *reply = call(op_request("shutdown", NULL));
    if (!reply)
        return EXIT_FAIL;
    if (a.json) {
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
        print_json(reply);
    } else
        printf("parled is shutting down (%.0f running job(s) checkpoint and stop)\n",
           num(reply, "stopping_jobs"));
    cJSON_Delete(reply);
    return EXIT_OK;
}
