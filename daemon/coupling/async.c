#include "async.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

float async_uniform(const replica *r, unsigned u)
{
    philox_key key = philox_make_key(r->cfg->seed, (uint32_t)r->id, RNG_STREAM_PEER);
    return philox_uniform_at(key, (uint64_t)r->step << 16, u);
}

int async_other(const replica *r, float u)
{
    int j = (int)(u * (float)(r->n - 1));
    if (j > r->n - 2)
        j = r->n - 2;
    return j >= r->id ? j + 1 : j;
}

int async_validate(const job_config *cfg, rule_check *c)
{
    int n = cfg->algorithm.replicas;
    if (rule_field_state(c, "algorithm.replicas") == RULE_FIELD_BAD)
        return 0;
    if (n < 2)
        rule_report(c, "algorithm.replicas: %s needs >= 2 replicas, got %d", cfg->algorithm.name, n);
    return 1;
}

int async_quiesce(replica *r)
{
    double t0 = comm_now_s();
    /* Across processes, an agreement: every replica of the job is past it. */
    int rc = r->comm->net ? (comm_any(r->comm, r->rank, 0) < 0 ? -1 : 0)
                          : comm_barrier(r->comm, r->rank, "end of pass");
    r->sync_s += comm_now_s() - t0;
    return rc;
}

void async_release(replica *r, comm_peer *peer, float **const vecs[], int n)
{
    comm_peer_detach(peer, r->rank, &r->ctx);
    rule_state_free(r, NULL, vecs, n);
}

int async_json_out(cJSON *o, char *json, size_t len)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    size_t n = text ? strlen(text) : 0;
    if (len == 0)
        n = 0;
    else if (n >= len)
        n = 0, json[0] = '\0';
    else
        memcpy(json, text, n + 1);
    cJSON_free(text);
    return (int)n;
}

cJSON *async_json_per_replica(comm_peer *p, double (*value)(comm_peer *, int))
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < comm_peer_replicas(p); i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(value(p, i)));
    return a;
}

cJSON *async_json_counts(comm_peer *p, size_t field_offset)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < comm_peer_replicas(p); i++) {
        peer_counts c;
        comm_peer_counts(p, i, &c);
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)*(long *)((char *)&c + field_offset)));
    }
    return a;
}
