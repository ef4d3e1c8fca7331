#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fsutil.h"

#define MAX_REPLICAS 256

/* cJSON keeps its parse error in a global: readers take turns. */
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

void checkpoint_path(char *out, size_t outlen, const char *root, long k)
{
    snprintf(out, outlen, "%s/k%010ld", root, k);
}

static void replica_path(char *out, size_t outlen, const char *dir, int rank)
{
    snprintf(out, outlen, "%s/replica%d.safetensors", dir, rank);
}

void checkpoint_replica_path(char *out, size_t outlen, const checkpoint_info *info, int rank)
{
    replica_path(out, outlen, info->dir, rank);
}

void checkpoint_meta_free(checkpoint_meta *m)
{
    cJSON_Delete(m->root);
    m->root = NULL;
}

int checkpoint_meta_parse(checkpoint_meta *m, const char *file, const char *json, char *err,
                          size_t errlen)
{
    memset(m, 0, sizeof *m);
    snprintf(m->file, sizeof m->file, "%s", file);
    pthread_mutex_lock(&parse_lock);
    m->root = json ? cJSON_Parse(json) : NULL;
    pthread_mutex_unlock(&parse_lock);
    if (!cJSON_IsObject(m->root)) {
        snprintf(err, errlen, "%s: its metadata is not a JSON object", m->file);
        checkpoint_meta_free(m);
        return -1;
    }
    for (const cJSON *e = m->root->child; e; e = e->next) {
        if (cJSON_IsString(e))
            continue;
        /* The key as read, clipped, bytes that are not printable as '?'. */
        char key[64];
        snprintf(key, sizeof key, "%s", e->string ? e->string : "");
        for (char *c = key; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                *c = '?';
        snprintf(err, errlen, "%s: metadata key \"%s\" is not a string", m->file, key);
        checkpoint_meta_free(m);
        return -1;
    }
    return 0;
}

const char *checkpoint_meta_get(const checkpoint_meta *m, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m->root, key));
}

/* The value of `key` for a number parser: NULL, with the message, when it is missing. */
static const char *meta_number(const checkpoint_meta *m, const char *key, char *err,
                               size_t errlen)
{
    const char *v = checkpoint_meta_get(m, key);
    if (!v)
        snprintf(err, errlen, "%s: metadata key \"%s\" is missing", m->file, key);
    errno = 0;
    return v;
}

static int meta_bad(const checkpoint_meta *m, const char *key, const char *what, char *err,
                    size_t errlen)
{
    snprintf(err, errlen, "%s: metadata key \"%s\" is not %s", m->file, key, what);
    return -1;
}

int checkpoint_meta_long(const checkpoint_meta *m, const char *key, long long *out, char *err,
                         size_t errlen)
{
    const char *v = meta_number(m, key, err, errlen);
    char *end;
    if (!v)
        return -1;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno)
        return meta_bad(m, key, "an integer", err, errlen);
    *out = x;
    return 0;
}

int checkpoint_meta_u64(const checkpoint_meta *m, const char *key, unsigned long long *out,
                        char *err, size_t errlen)
{
    const char *v = meta_number(m, key, err, errlen);
    char *end;
    if (!v)
        return -1;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || strchr(v, '-'))
        return meta_bad(m, key, "an unsigned integer", err, errlen);
    *out = x;
    return 0;
}

int checkpoint_meta_double(const checkpoint_meta *m, const char *key, double *out, char *err,
                           size_t errlen)
{
    const char *v = meta_number(m, key, err, errlen);
    char *end;
    if (!v)
        return -1;
    double x = strtod(v, &end);
    if (end == v || *end)
        return meta_bad(m, key, "a number", err, errlen);
    *out = x;
    return 0;
}

/* CRC-32 of a whole file; -1 if it cannot be read. */
static long long file_crc32(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char buf[1 << 16];
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        crc = crc32(crc, buf, (uInt)n);
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : (long long)crc;
}

int checkpoint_write_replica(const char *root, long k, int rank, const tensor_info *ts,
                             const float *const *data, int n, const st_meta *meta, int nmeta,
                             char *err, size_t errlen)
{
    char dir[1100], path[1200];
    checkpoint_path(dir, sizeof dir, root, k);
    if (mkdir_p(dir, err, errlen) != 0)
        return -1;
    replica_path(path, sizeof path, dir, rank);
    return safetensors_write_tensors(path, ts, data, n, meta, nmeta, err, errlen);
}

int checkpoint_read_replica(const checkpoint_info *info, int rank, const tensor_info *ts,
                            float *const *data, int n, char **meta_json, char *err,
                            size_t errlen)
{
    char path[1200];
    replica_path(path, sizeof path, info->dir, rank);
    pthread_mutex_lock(&parse_lock);
    int rc = safetensors_read_tensors(path, ts, data, n, meta_json, err, errlen);
    pthread_mutex_unlock(&parse_lock);
    return rc;
}

static int parse_k(const char *name, long *k)
{
    char *end;
    if (name[0] != 'k' || strlen(name) != 11)
        return -1;
    *k = strtol(name + 1, &end, 10);
    return *end == '\0' && *k > 0 ? 0 : -1;
}

/* Checkpoint directories under root, newest first. */
static int list_checkpoints(const char *root, long **out)
{
    DIR *d = opendir(root);
    *out = NULL;
    if (!d)
        return errno == ENOENT ? 0 : -1;
    long *ks = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long k;
        if (parse_k(e->d_name, &k) != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            long *nk = realloc(ks, (size_t)cap * sizeof(long));
            if (!nk) {
                free(ks);
                closedir(d);
                return -1;
            }
            ks = nk;
        }
        ks[n++] = k;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort, descending: a handful of entries */
        for (int j = i; j > 0 && ks[j] > ks[j - 1]; j--) {
            long t = ks[j];
            ks[j] = ks[j - 1];
            ks[j - 1] = t;
        }
    *out = ks;
    return n;
}

static int remove_checkpoint(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    char path[1400];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    return rmdir(dir);
}

int checkpoint_commit(const char *root, checkpoint_info *info, int keep, char *err, size_t errlen)
{
    checkpoint_path(info->dir, sizeof info->dir, root, info->k);
    cJSON *m = cJSON_CreateObject();
    cJSON *crcs = cJSON_AddArrayToObject(m, "crc32");
    cJSON_AddNumberToObject(m, "k", (double)info->k);
    cJSON_AddNumberToObject(m, "step", (double)info->step);
    cJSON_AddNumberToObject(m, "replicas", info->replicas);
    cJSON_AddNumberToObject(m, "epochs_done", info->epochs_done);
    cJSON_AddNumberToObject(m, "test_error", info->test_error);
    cJSON_AddNumberToObject(m, "test_loss", info->test_loss);
    cJSON_AddNumberToObject(m, "elapsed_s", info->elapsed_s);
    cJSON_AddNumberToObject(m, "reseeds", (double)info->reseeds);
    /* The CRCs are taken from what is on disk now: a later torn or flipped
     * byte anywhere in a replica file makes the checkpoint unusable. */
    for (int r = 0; r < info->replicas; r++) {
        char path[1200];
        replica_path(path, sizeof path, info->dir, r);
        long long crc = file_crc32(path);
        if (crc < 0) {
            snprintf(err, errlen, "checkpoint: cannot read back %s: %s", path, strerror(errno));
            cJSON_Delete(m);
            return -1;
        }
        cJSON_AddItemToArray(crcs, cJSON_CreateNumber((double)crc));
    }
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", info->dir);
    int rc = text ? atomic_write_file(path, text, strlen(text), err, errlen) : -1;
    if (!text)
        snprintf(err, errlen, "checkpoint: out of memory for the manifest");
    free(text);
    if (rc != 0)
        return -1;
    /* Keep the newest `keep` complete ones, this one included; drop the rest,
     * and any torn one older than this. */
    long *ks;
    int n = list_checkpoints(root, &ks);
    for (int i = 0, kept = 0; i < n; i++) {
        char dir[1100], manifest[1200];
        if (ks[i] > info->k)
            continue;
        checkpoint_path(dir, sizeof dir, root, ks[i]);
        snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
        if (kept < keep && access(manifest, F_OK) == 0)
            kept++;
        else
            remove_checkpoint(dir);
    }
    free(ks);
    return 0;
}

static double num(const cJSON *o, const char *key, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        *ok = 0;
        return 0;
    }
    return v->valuedouble;
}

/* 0 if the checkpoint in `dir` is complete and intact, else -1 with why. */
static int check_checkpoint(const char *dir, long k, int replicas, checkpoint_info *info,
                            char *why, size_t whylen)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, whylen, "no manifest (incomplete)");
        return -1;
    }
    char text[1 << 14];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    pthread_mutex_lock(&parse_lock);
    cJSON *m = cJSON_ParseWithLength(text, len);
    pthread_mutex_unlock(&parse_lock);
    int ok = m != NULL;
    memset(info, 0, sizeof(*info));
    if (ok) {
        info->k = (long)num(m, "k", &ok);
        info->step = (long)num(m, "step", &ok);
        info->replicas = (int)num(m, "replicas", &ok);
        info->epochs_done = (int)num(m, "epochs_done", &ok);
        info->test_error = num(m, "test_error", &ok);
        info->test_loss = num(m, "test_loss", &ok);
        info->elapsed_s = num(m, "elapsed_s", &ok);
        /* Written since re-seeding came; older manifests have none. */
        const cJSON *reseeds = cJSON_GetObjectItemCaseSensitive(m, "reseeds");
        info->reseeds = cJSON_IsNumber(reseeds) ? (long)reseeds->valuedouble : 0;
    }
    const cJSON *crcs = ok ? cJSON_GetObjectItemCaseSensitive(m, "crc32") : NULL;
    if (!ok || info->k != k || info->replicas != replicas || !cJSON_IsArray(crcs) ||
        cJSON_GetArraySize(crcs) != replicas) {
        snprintf(why, whylen, "manifest is malformed or for another job shape");
        cJSON_Delete(m);
        return -1;
    }
    for (int r = 0; r < replicas; r++) {
        replica_path(path, sizeof path, dir, r);
        const cJSON *want = cJSON_GetArrayItem(crcs, r);
        long long got = file_crc32(path);
        if (got < 0 || !cJSON_IsNumber(want) || (double)got != want->valuedouble) {
            snprintf(why, whylen, "replica%d.safetensors is %s", r,
                     got < 0 ? "missing" : "corrupt (CRC mismatch)");
            cJSON_Delete(m);
            return -1;
        }
    }
    cJSON_Delete(m);
    snprintf(info->dir, sizeof info->dir, "%s", dir);
    return 0;
}

int checkpoint_find_latest(const char *root, int replicas, checkpoint_info *info, char *log,
                           size_t loglen)
{
    long *ks;
    if (loglen)
        log[0] = '\0';
    int n = list_checkpoints(root, &ks);
    if (n < 0) {
        snprintf(log, loglen, "cannot list checkpoints in %s: %s", root, strerror(errno));
        return -1;
    }
    int found = 0;
    size_t at = 0;
    for (int i = 0; i < n && !found; i++) {
        char dir[1100], why[256];
        checkpoint_path(dir, sizeof dir, root, ks[i]);
        if (check_checkpoint(dir, ks[i], replicas, info, why, sizeof why) == 0)
            found = 1;
        else if (at < loglen)
            at += (size_t)snprintf(log + at, loglen - at, "skipping checkpoint %s: %s\n", dir, why);
    }
    free(ks);
    return found;
}
