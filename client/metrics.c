/* A job's metrics.jsonl over the socket, with the `metrics` op: whole lines
 * from a byte offset, in bounded replies (docs/protocol.md). `plot` reads
 * it once; `tensorboard --follow` again and again from where it stopped. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

int metrics_read(conn *c, const char *id, double *offset, metrics_fn fn, void *ctx)
{
    for (;;) {
        cJSON *req = op_request("metrics", id);
        cJSON_AddNumberToObject(req, "offset", *offset);
        cJSON *r = request(c, req);
        if (!r)
            return -1;
        char *text = (char *)str(r, "text");
        int rc = 0;
        for (char *line = text, *nl; rc == 0 && (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = '\0';
            cJSON *m = cJSON_Parse(line);
            if (cJSON_IsObject(m)) {
                rc = fn(ctx, m);
            } else {
                fail("%s: metrics.jsonl: the line at byte %.0f is not a JSON object", id,
                     *offset + (double)(line - text));
                rc = -1;
            }
            cJSON_Delete(m);
        }
        int eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "eof"));
        double next = num(r, "next");
        cJSON_Delete(r);
        if (rc != 0)
            return -1;
        /* A line still being written waits for the next read. */
        if (!(next > *offset))
            return 0;
        *offset = next;
        if (eof)
            return 0;
    }
}
