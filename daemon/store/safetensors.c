/* safetensors: u64 little-endian header length N, N bytes of JSON (padded
 * with spaces), then the data section; each tensor's data_offsets are
 * [begin, end) byte offsets into the data section. The reader accepts what
 * the reference implementation accepts: tensors tile the data section
 * exactly, with no gaps, overlaps or trailing bytes. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsutil.h"

/* Tensor data is written and read as the host's floats. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

#define ST_MAX_HEADER (100u << 20)
#define ST_MAX_INT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact */

static int st_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int st_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s: ", path);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void format_shape(char *buf, size_t len, const int *shape, int ndim)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "", shape[i]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
}

/* A tensor's description must be consistent before it is written or filled. */
static int check_tensor(const tensor_info *t, const char *path, char *err, size_t errlen)
{
    size_t count = 1;
    for (int d = 0; d < t->ndim && d < 4; d++)
        count *= (size_t)t->shape[d];
    if (t->ndim < 0 || t->ndim > 4 || count != t->count)
        return st_fail(err, errlen, path, "tensor %s is inconsistent (count %zu, shape of %zu)",
                       t->name, t->count, count);
    return 0;
}

/* The data pointer of each of the model's tensors in params or stats, after
 * checking each lies within its buffer. NULL (err filled) if not. */
static float **model_tensor_data(const model *m, float *params, float *stats, const char *path,
                                 char *err, size_t errlen)
{
    float **data = calloc(m->ntensors ? (size_t)m->ntensors : 1, sizeof(float *));
    if (!data) {
        st_fail(err, errlen, path, "out of memory");
        return NULL;
    }
    for (int i = 0; i < m->ntensors; i++) {
        const tensor_info *t = &m->tensors[i];
        size_t limit = t->is_stat ? m->nstats : m->nparams;
        if (t->offset > limit || t->count > limit - t->offset) {
            st_fail(err, errlen, path, "model tensor %s is inconsistent (count %zu, offset %zu)",
                    t->name, t->count, t->offset);
            free(data);
            return NULL;
        }
        data[i] = (t->is_stat ? stats : params) + t->offset;
    }
    return data;
}

static int set_meta(cJSON *obj, const char *key, const char *value)
{
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    return cJSON_AddStringToObject(obj, key, value) ? 0 : -1;
}

/* The header JSON (unpadded), or NULL with err filled. */
static char *build_header(const char *path, const tensor_info *ts, int n, const st_meta *meta,
                          int nmeta, char *err, size_t errlen)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
    char *json = NULL;
    if (!md || set_meta(md, "format", "pt") != 0)
        goto oom;
    for (int i = 0; i < nmeta; i++)
        if (set_meta(md, meta[i].key, meta[i].value) != 0)
            goto oom;
    size_t begin = 0;
    for (int i = 0; i < n; i++) {
        const tensor_info *t = &ts[i];
        if (check_tensor(t, path, err, errlen) != 0)
            goto fail;
        if (cJSON_GetObjectItemCaseSensitive(root, t->name)) {
            st_fail(err, errlen, path, "tensor name %s is used twice", t->name);
            goto fail;
        }
        cJSON *entry = cJSON_AddObjectToObject(root, t->name);
        cJSON *offsets = cJSON_CreateArray();
        if (!entry || !offsets || !cJSON_AddStringToObject(entry, "dtype", "F32") ||
            !cJSON_AddItemToObject(entry, "shape", cJSON_CreateIntArray(t->shape, t->ndim)) ||
            !cJSON_AddItemToObject(entry, "data_offsets", offsets)) {
            cJSON_Delete(offsets);
            goto oom;
        }
        size_t end = begin + t->count * sizeof(float);
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)begin));
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)end));
        if (cJSON_GetArraySize(offsets) != 2)
            goto oom;
        begin = end;
    }
    json = cJSON_PrintUnformatted(root);
    if (!json)
        goto oom;
    cJSON_Delete(root);
    return json;
oom:
    st_fail(err, errlen, path, "out of memory building the header");
fail:
    cJSON_Delete(root);
    return NULL;
}

int safetensors_write_tensors(const char *path, const tensor_info *ts, const float *const *data,
                              int n, const st_meta *meta, int nmeta, char *err, size_t errlen)
{
    char *json = build_header(path, ts, n, meta, nmeta, err, errlen);
    if (!json)
        return -1;
    size_t len = strlen(json);
    size_t padded = (len + 7) & ~(size_t)7;
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    atomic_file af;
    if (atomic_open(&af, path, err, errlen) != 0) {
        free(json);
        return -1;
    }
    int ok = fwrite(prefix, 1, 8, af.f) == 8 && fwrite(json, 1, len, af.f) == len;
    for (size_t i = len; ok && i < padded; i++)
        ok = fputc(' ', af.f) != EOF;
    for (int i = 0; ok && i < n; i++)
        ok = fwrite(data[i], sizeof(float), ts[i].count, af.f) == ts[i].count;
    free(json);
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        atomic_abort(&af);
        return -1;
    }
    return atomic_commit(&af, err, errlen);
}

int safetensors_write(const char *path, const model *m, const float *params, const float *stats,
                      const st_meta *meta, int nmeta, char *err, size_t errlen)
{
    /* The writer only reads through these pointers. */
    float **data = model_tensor_data(m, (float *)params, (float *)stats, path, err, errlen);
    if (!data)
        return -1;
    int rc = safetensors_write_tensors(path, m->tensors, (const float *const *)data, m->ntensors,
                                       meta, nmeta, err, errlen);
    free(data);
    return rc;
}

/* A JSON number that is an exact non-negative integer. */
static int json_size(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > ST_MAX_INT ||
        (double)(uint64_t)v->valuedouble != v->valuedouble)
        return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

static size_t dtype_size(const char *dtype)
{
    static const struct { const char *name; size_t size; } sizes[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
        {"I8", 1}, {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1},
        {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(dtype, sizes[i].name) == 0)
            return sizes[i].size;
    return 0;
}

typedef struct st_span { const char *name; uint64_t begin, end; } st_span;

static int span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks one tensor entry of the header: dtype, shape, and offsets that lie
 * in the data section and hold exactly the shape's bytes. */
static int check_entry(const cJSON *e, uint64_t data_size, st_span *span, const char *path,
                       char *err, size_t errlen)
{
    const char *name = e->string;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) ||
        !cJSON_IsArray(offsets))
        return st_fail(err, errlen, path, "tensor %s: needs dtype, shape and data_offsets", name);
    size_t esize = dtype_size(dtype->valuestring);
    if (!esize)
        return st_fail(err, errlen, path, "tensor %s: unknown dtype %s", name,
                       dtype->valuestring);
    uint64_t nbytes = esize, dim;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        if (json_size(d, &dim) != 0)
            return st_fail(err, errlen, path, "tensor %s: shape entries must be integers >= 0",
                           name);
        if (__builtin_mul_overflow(nbytes, dim, &nbytes))
            nbytes = UINT64_MAX;
    }
    if (cJSON_GetArraySize(offsets) != 2 || json_size(offsets->child, &span->begin) != 0 ||
        json_size(offsets->child->next, &span->end) != 0)
        return st_fail(err, errlen, path, "tensor %s: data_offsets must be two integers >= 0",
                       name);
    if (span->end < span->begin || span->end > data_size)
        return st_fail(err, errlen, path,
                       "tensor %s: data_offsets [%llu, %llu) out of range (data section: %llu "
                       "bytes)", name, (unsigned long long)span->begin,
                       (unsigned long long)span->end, (unsigned long long)data_size);
    if (span->end - span->begin != nbytes)
        return st_fail(err, errlen, path,
                       "tensor %s: data_offsets [%llu, %llu) hold %llu bytes but dtype %s and its "
                       "shape need %llu", name, (unsigned long long)span->begin,
                       (unsigned long long)span->end,
                       (unsigned long long)(span->end - span->begin), dtype->valuestring,
                       (unsigned long long)nbytes);
    span->name = name;
    return 0;
}

static int check_metadata(const cJSON *md, const char *path, char *err, size_t errlen)
{
    if (!cJSON_IsObject(md))
        return st_fail(err, errlen, path, "__metadata__ is not an object");
    const cJSON *v;
    cJSON_ArrayForEach(v, md) {
        if (!cJSON_IsString(v))
            return st_fail(err, errlen, path, "__metadata__.%s is not a string", v->string);
    }
    return 0;
}

/* Every entry valid and the tensors tiling the data section exactly. */
static int check_layout(const cJSON *root, uint64_t data_size, const char *path, char *err,
                        size_t errlen)
{
    int n = cJSON_GetArraySize(root);
    st_span *spans = malloc((size_t)(n > 0 ? n : 1) * sizeof *spans);
    if (!spans)
        return st_fail(err, errlen, path, "out of memory checking %d tensors", n);
    int count = 0, rc = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (check_metadata(e, path, err, errlen) != 0)
                goto done;
        } else if (check_entry(e, data_size, &spans[count++], path, err, errlen) != 0) {
            goto done;
        }
    }
    qsort(spans, (size_t)count, sizeof *spans, span_cmp);
    uint64_t at = 0;
    for (int i = 0; i < count; i++) {
        if (spans[i].begin < at) {
            st_fail(err, errlen, path, "tensors %s and %s overlap", spans[i - 1].name,
                    spans[i].name);
            goto done;
        }
        if (spans[i].begin > at) {
            st_fail(err, errlen, path, "%llu unused bytes before tensor %s",
                    (unsigned long long)(spans[i].begin - at), spans[i].name);
            goto done;
        }
        at = spans[i].end;
    }
    if (at != data_size) {
        st_fail(err, errlen, path, "trailing garbage: %llu bytes after the last tensor",
                (unsigned long long)(data_size - at));
        goto done;
    }
    rc = 0;
done:
    free(spans);
    return rc;
}

/* Reads the header into a parsed JSON object; *data_start and *data_size
 * locate the data section. */
static cJSON *read_header(FILE *f, const char *path, uint64_t *data_start, uint64_t *data_size,
                          char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        st_fail(err, errlen, path, "cannot stat: %s", strerror(errno));
        return NULL;
    }
    uint64_t file_size = (uint64_t)st.st_size;
    unsigned char prefix[8];
    if (file_size < 8 || fread(prefix, 1, 8, f) != 8) {
        st_fail(err, errlen, path, "file too short (%llu bytes) for a safetensors header",
                (unsigned long long)file_size);
        return NULL;
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)prefix[i] << (8 * i);
    if (hlen > ST_MAX_HEADER) {
        st_fail(err, errlen, path, "header length %llu is absurd (limit %u bytes)",
                (unsigned long long)hlen, ST_MAX_HEADER);
        return NULL;
    }
    if (hlen > file_size - 8) {
        st_fail(err, errlen, path,
                "header length %llu goes beyond the end of the file (%llu bytes)",
                (unsigned long long)hlen, (unsigned long long)file_size);
        return NULL;
    }
    char *text = malloc(hlen + 1);
    if (!text) {
        st_fail(err, errlen, path, "out of memory for a %llu-byte header",
                (unsigned long long)hlen);
        return NULL;
    }
    cJSON *root = NULL;
    if (fread(text, 1, hlen, f) != hlen) {
        st_fail(err, errlen, path, "cannot read the header: %s", strerror(errno));
        goto done;
    }
    text[hlen] = '\0';
    const char *end = NULL;
    if (hlen == 0 || text[0] != '{' ||
        !(root = cJSON_ParseWithLengthOpts(text, hlen, &end, 0))) {
        st_fail(err, errlen, path, "header is not a JSON object (error near byte %td)",
                end ? end - text : 0);
        goto done;
    }
    for (const char *p = end; p < text + hlen; p++) {
        if (*p != ' ') {
            st_fail(err, errlen, path, "header has text after the JSON object at byte %td",
                    p - text);
            cJSON_Delete(root);
            root = NULL;
            goto done;
        }
    }
    *data_start = 8 + hlen;
    *data_size = file_size - 8 - hlen;
done:
    free(text);
    return root;
}

/* The model's tensor t against its header entry, then its data. */
static int read_tensor(FILE *f, const cJSON *root, uint64_t data_start, const tensor_info *t,
                       float *dst, const char *path, char *err, size_t errlen)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, t->name);
    if (!e || strcmp(t->name, "__metadata__") == 0)
        return st_fail(err, errlen, path, "missing tensor %s", t->name);
    const char *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype")->valuestring;
    if (strcmp(dtype, "F32") != 0)
        return st_fail(err, errlen, path, "tensor %s has dtype %s, expected F32", t->name, dtype);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    int same = cJSON_GetArraySize(shape) == t->ndim;
    for (int d = 0; same && d < t->ndim; d++)
        same = cJSON_GetArrayItem(shape, d)->valuedouble == t->shape[d];
    if (!same) {
        char want[64];
        char *got = cJSON_PrintUnformatted(shape);
        format_shape(want, sizeof want, t->shape, t->ndim);
        st_fail(err, errlen, path, "tensor %s has shape %s, the model wants %s", t->name,
                got ? got : "?", want);
        free(got);
        return -1;
    }
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t begin = (uint64_t)offsets->child->valuedouble; /* validated by check_layout */
    if (fseeko(f, (off_t)(data_start + begin), SEEK_SET) != 0 ||
        fread(dst, sizeof(float), t->count, f) != t->count)
        return st_fail(err, errlen, path, "cannot read tensor %s: %s", t->name,
                       ferror(f) ? strerror(errno) : "file shrank while reading");
    return 0;
}

int safetensors_read_tensors(const char *path, const tensor_info *ts, float *const *data, int n,
                             char **meta_json, char *err, size_t errlen)
{
    if (meta_json)
        *meta_json = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return st_fail(err, errlen, path, "cannot open: %s", strerror(errno));
    uint64_t data_start = 0, data_size = 0;
    int rc = -1;
    cJSON *root = read_header(f, path, &data_start, &data_size, err, errlen);
    if (!root || check_layout(root, data_size, path, err, errlen) != 0)
        goto done;
    for (int i = 0; i < n; i++)
        if (check_tensor(&ts[i], path, err, errlen) != 0 ||
            read_tensor(f, root, data_start, &ts[i], data[i], path, err, errlen) != 0)
            goto done;
    if (meta_json) {
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
        *meta_json = md ? cJSON_PrintUnformatted(md) : strdup("{}");
        if (!*meta_json) {
            st_fail(err, errlen, path, "out of memory for the metadata");
            goto done;
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    fclose(f);
    return rc;
}

int safetensors_read(const char *path, const model *m, float *params, float *stats,
                     char **meta_json, char *err, size_t errlen)
{
    if (meta_json)
        *meta_json = NULL;
    float **data = model_tensor_data(m, params, stats, path, err, errlen);
    if (!data)
        return -1;
    int rc = safetensors_read_tensors(path, m->tensors, data, m->ntensors, meta_json, err, errlen);
    free(data);
    return rc;
}
