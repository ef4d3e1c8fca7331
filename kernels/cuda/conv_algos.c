#include "conv_algos.h"

#include <pthread.h>
#include <string.h>

typedef struct conv_algo_entry {
    conv_algo_key key;
    conv_algo value;
} conv_algo_entry;

/* A static table: the bound is small (4096 x 64 bytes) and a process-wide
 * answer must outlive every context. Searched linearly: a lookup happens
 * once per plan and direction, not per step. */
static conv_algo_entry table[CONV_ALGOS_MAX];
static int table_count;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static const conv_algo_entry *find(const conv_algo_key *key)
{
    for (int i = 0; i < table_count; i++)
        if (memcmp(&table[i].key, key, sizeof *key) == 0)
            return &table[i];
    return NULL;
}

int conv_algos_get(const conv_algo_key *key, conv_algo *out, conv_algo_timer time_it, void *arg)
{
    pthread_mutex_lock(&table_lock);
    const conv_algo_entry *e = find(key);
    int rc = 0;
    if (e) {
        *out = e->value;
    } else {
        rc = time_it(arg, out);
        if (rc == 0 && table_count < CONV_ALGOS_MAX)
            table[table_count++] = (conv_algo_entry){*key, *out};
    }
    pthread_mutex_unlock(&table_lock);
    return rc;
}

int conv_algos_count(void)
{
    pthread_mutex_lock(&table_lock);
    const int n = table_count;
    pthread_mutex_unlock(&table_lock);
    return n;
}

void conv_algos_clear(void)
{
    pthread_mutex_lock(&table_lock);
    table_count = 0;
    pthread_mutex_unlock(&table_lock);
}
