/* safetensors: round trip, the exact layout on disk, every malformed case,
 * and (when python3 with torch is installed) files read and written by
 * plain Python. */
#include <cjson/cJSON.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "testutil.h"

#define PYTHON "/usr/bin/python3"

static char dir[64];

typedef struct tensor_spec { const char *name; int is_stat, ndim, shape[4]; } tensor_spec;

/* A model holding only what safetensors uses: named tensors in flat buffers. */
static void make_model(model *m, tensor_info *t, const tensor_spec *spec, int n)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < n; i++) {
        memset(&t[i], 0, sizeof t[i]);
        snprintf(t[i].name, sizeof t[i].name, "%s", spec[i].name);
        t[i].is_stat = spec[i].is_stat;
        t[i].ndim = spec[i].ndim;
        t[i].count = 1;
        for (int d = 0; d < spec[i].ndim; d++) {
            t[i].shape[d] = spec[i].shape[d];
            t[i].count *= (size_t)spec[i].shape[d];
        }
        size_t *used = t[i].is_stat ? &m->nstats : &m->nparams;
        t[i].offset = *used;
        *used += t[i].count;
    }
    m->ntensors = n;
    m->tensors = t;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len + 1);
    *len = fread(buf, 1, *len, f);
    fclose(f);
    return buf;
}

/* A LeNet-like model with random sizes, its tensors in t. */
static void random_model(model *m, tensor_info t[8])
{
    int c1 = 2 + (int)test_uniform(0, 5), k = 3 + 2 * (int)test_uniform(0, 2);
    int hidden = 3 + (int)test_uniform(0, 20), classes = 2 + (int)test_uniform(0, 9);
    tensor_spec spec[8] = {
        {"conv1.weight", 0, 4, {c1, 1, k, k}},
        {"conv1.bias", 0, 1, {c1}},
        {"bn1.weight", 0, 1, {c1}},
        {"bn1.bias", 0, 1, {c1}},
        {"bn1.running_mean", 1, 1, {c1}},
        {"bn1.running_var", 1, 1, {c1}},
        {"fc.weight", 0, 2, {classes, hidden}},
        {"fc.bias", 0, 1, {classes}},
    };
    make_model(m, t, spec, 8);
}

static int buffers_equal(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static void test_round_trip(void)
{
    tensor_info t[8];
    model m;
    random_model(&m, t);
    float *params = malloc(m.nparams * sizeof(float)), *stats = malloc(m.nstats * sizeof(float));
    float *p2 = malloc(m.nparams * sizeof(float)), *s2 = malloc(m.nstats * sizeof(float));
    test_fill_uniform(params, m.nparams, -2, 2);
    test_fill_uniform(stats, m.nstats, 0.1, 3);
    test_fill_uniform(p2, m.nparams, 5, 6);
    test_fill_uniform(s2, m.nstats, 5, 6);
    char path[128], err[512], epoch[16];
    snprintf(path, sizeof path, "%s/final.safetensors", dir);
    snprintf(epoch, sizeof epoch, "%d", (int)test_uniform(0, 100));
    st_meta meta[] = {{"epoch", epoch}, {"arch", "lenet \"quoted\""}};
    CHECK(safetensors_write(path, &m, params, stats, meta, 2, err, sizeof err) == 0, "%s", err);
    char *meta_json = NULL;
    CHECK(safetensors_read(path, &m, p2, s2, &meta_json, err, sizeof err) == 0, "%s", err);
    CHECK(buffers_equal(params, p2, m.nparams), "params round trip");
    CHECK(buffers_equal(stats, s2, m.nstats), "stats round trip");
    cJSON *md = meta_json ? cJSON_Parse(meta_json) : NULL;
    CHECK(md && strcmp(cJSON_GetObjectItem(md, "format")->valuestring, "pt") == 0 &&
          strcmp(cJSON_GetObjectItem(md, "epoch")->valuestring, epoch) == 0 &&
          strcmp(cJSON_GetObjectItem(md, "arch")->valuestring, "lenet \"quoted\"") == 0,
          "metadata: %s", meta_json ? meta_json : "(null)");
    cJSON_Delete(md);
    free(meta_json);

    /* The layout on disk, checked byte by byte. */
    size_t len = 0;
    unsigned char *file = slurp(path, &len);
    CHECK(file && len >= 8, "%s readable", path);
    if (!file || len < 8)
        return;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)file[i] << (8 * i);
    CHECK(hlen % 8 == 0, "header length %llu is a multiple of 8", (unsigned long long)hlen);
    CHECK(len == 8 + hlen + 4 * (m.nparams + m.nstats), "file size %zu", len);
    CHECK(file[8] == '{' && file[8 + hlen - 1] != '\n', "header starts with {");
    cJSON *h = cJSON_ParseWithLength((const char *)file + 8, hlen);
    CHECK(h != NULL, "header parses");
    for (int i = 0; h && i < m.ntensors; i++) {
        cJSON *e = cJSON_GetObjectItem(h, t[i].name);
        cJSON *offs = cJSON_GetObjectItem(e, "data_offsets");
        CHECK(e && strcmp(cJSON_GetObjectItem(e, "dtype")->valuestring, "F32") == 0,
              "%s is F32", t[i].name);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(e, "shape")) == t[i].ndim, "%s ndim",
              t[i].name);
        size_t begin = (size_t)cJSON_GetArrayItem(offs, 0)->valuedouble;
        size_t end = (size_t)cJSON_GetArrayItem(offs, 1)->valuedouble;
        CHECK(end - begin == 4 * t[i].count, "%s offsets [%zu, %zu)", t[i].name, begin, end);
        const float *src = (t[i].is_stat ? stats : params) + t[i].offset;
        size_t bad = 0;
        for (size_t j = 0; j < t[i].count; j++) {
            const unsigned char *b = file + 8 + hlen + begin + 4 * j;
            uint32_t bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                            (uint32_t)b[3] << 24;
            float v;
            memcpy(&v, &bits, 4);
            bad += v != src[j];
        }
        CHECK(bad == 0, "%s: %zu values differ on disk", t[i].name, bad);
    }
    cJSON_Delete(h);
    free(file);

    /* An injected write failure keeps the previous file. */
    float *p3 = malloc(m.nparams * sizeof(float));
    test_fill_uniform(p3, m.nparams, -1, 1);
    setenv("PARLE_FAULT_WRITE_AFTER", "64", 1);
    err[0] = '\0';
    CHECK(safetensors_write(path, &m, p3, stats, NULL, 0, err, sizeof err) == -1 &&
          strstr(err, path), "injected failure: %s", err);
    unsetenv("PARLE_FAULT_WRITE_AFTER");
    CHECK(safetensors_read(path, &m, p2, s2, NULL, err, sizeof err) == 0 &&
          buffers_equal(params, p2, m.nparams), "old file intact: %s", err);

    /* A model that contradicts itself is refused, not written. */
    t[1].count++;
    err[0] = '\0';
    CHECK(safetensors_write(path, &m, params, stats, NULL, 0, err, sizeof err) == -1 &&
          strstr(err, "conv1.bias"), "inconsistent model: %s", err);
    t[1].count--;
    snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", dir);
    err[0] = '\0';
    CHECK(safetensors_write(path, &m, params, stats, NULL, 0, err, sizeof err) == -1 &&
          strstr(err, path), "missing dir: %s", err);
    free(params);
    free(stats);
    free(p2);
    free(s2);
    free(p3);
}

/* The small model the malformed files are checked against: 6 + 2 params, 2 stats. */
static const tensor_spec small_spec[] = {
    {"a.weight", 0, 2, {2, 3}},
    {"a.bias", 0, 1, {2}},
    {"bn.running_mean", 1, 1, {2}},
};

static const char *valid_header =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"a.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
    "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[32,40]}}";

/* Writes prefix (header length, or `hlen_override` when not 0), header, and data_len bytes. */
static void write_raw(const char *path, const char *header, uint64_t hlen_override,
                      size_t data_len)
{
    FILE *f = fopen(path, "wb");
    uint64_t hlen = hlen_override ? hlen_override : strlen(header);
    for (int i = 0; i < 8; i++)
        fputc((int)(hlen >> (8 * i)) & 0xff, f);
    fputs(header, f);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)test_uniform(0, 256), f);
    fclose(f);
}

/* Reading path into the small model fails naming the file and saying `want`. */
static void expect_error(const char *path, const char *want, const char *what)
{
    tensor_info t[3];
    model m;
    make_model(&m, t, small_spec, 3);
    float params[8], stats[2];
    char err[512] = "";
    char *meta = NULL;
    int rc = safetensors_read(path, &m, params, stats, &meta, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, want), "%s: rc %d, error '%s' wants '%s'",
          what, rc, err, want);
    CHECK(meta == NULL, "%s: no metadata returned", what);
}

static void test_malformed(void)
{
    char path[128], err[512], header[1024];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    tensor_info t[3];
    model m;
    make_model(&m, t, small_spec, 3);
    float params[8], stats[2];

    write_raw(path, valid_header, 0, 40);
    CHECK(safetensors_read(path, &m, params, stats, NULL, err, sizeof err) == 0,
          "the unpadded valid file reads: %s", err);

    snprintf(header, sizeof header, "%s", valid_header);
    char *p = strstr(header, "\"bn.running_mean\"");
    snprintf(p, sizeof header - (size_t)(p - header),
             "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[32,40]},"
             "\"bn.num_batches_tracked\":"
             "{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[40,48]}}");
    write_raw(path, header, 0, 48);
    CHECK(safetensors_read(path, &m, params, stats, NULL, err, sizeof err) == 0,
          "an extra I64 tensor (PyTorch's num_batches_tracked) is ignored: %s", err);

    FILE *f = fopen(path, "wb");
    fwrite("\x10\0\0\0\0", 1, 5, f);
    fclose(f);
    expect_error(path, "too short", "5-byte file");
    write_raw(path, valid_header, 1ull << 40, 40);
    expect_error(path, "absurd", "header length 2^40");
    write_raw(path, valid_header, strlen(valid_header) + 41, 40);
    expect_error(path, "beyond the end", "header length past the end");
    write_raw(path, "{\"a.weight\": [", 0, 0);
    expect_error(path, "not a JSON object", "broken JSON");
    write_raw(path, "[1, 2, 3]       ", 0, 0);
    expect_error(path, "not a JSON object", "JSON array");
    snprintf(header, sizeof header, "%s  x", valid_header);
    write_raw(path, header, 0, 40);
    expect_error(path, "text after the JSON", "text after the header object");

    static const struct { const char *find, *replace, *want, *what; size_t data_len; } cases[] = {
        {"\"a.bias\"", "\"a.bias_renamed\"", "missing tensor a.bias", "missing tensor", 40},
        {"\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]",
         "\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[24,32]", "dtype F64, expected F32",
         "wrong dtype", 40},
        {"[2,3]", "[3,2]", "shape [3,2], the model wants [2,3]", "shape mismatch", 40},
        {"[2,3]", "[6]", "shape [6], the model wants [2,3]", "rank mismatch", 40},
        {"[32,40]", "[32,48]", "out of range", "offsets past the data", 40},
        {"[24,32]", "[32,24]", "out of range", "reversed offsets", 40},
        {"[24,32]", "[16,24]", "overlap", "overlapping tensors", 40},
        {"[24,32]", "[24,36]", "hold 12 bytes", "offsets not matching the shape", 44},
        {"[0,24]", "[0,24.5]", "two integers", "fractional offset", 40},
        {"[0,24]", "[-8,16]", "two integers", "negative offset", 40},
        {"[0,24]", "[0]", "two integers", "one offset", 40},
        {"[2,3]", "[2,-3]", "shape entries", "negative dimension", 40},
        {"\"F32\",\"shape\":[2,3]", "\"Q7\",\"shape\":[2,3]", "unknown dtype Q7", "unknown dtype",
         40},
        {"\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]", "\"shape\":[2]",
         "needs dtype, shape and data_offsets", "entry without dtype", 40},
        {"{\"format\":\"pt\"}", "{\"format\":1}", "__metadata__.format is not a string",
         "numeric metadata", 40},
        {"[32,40]", "[36,44]", "4 unused bytes before tensor bn.running_mean", "gap", 44},
        {"[32,40]", "[32,40]", "trailing garbage: 3 bytes", "trailing garbage", 43},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *at = strstr(valid_header, cases[i].find);
        if (!at) {
            CHECK(0, "case %s: pattern not found", cases[i].what);
            continue;
        }
        snprintf(header, sizeof header, "%.*s%s%s", (int)(at - valid_header), valid_header,
                 cases[i].replace, at + strlen(cases[i].find));
        write_raw(path, header, 0, cases[i].data_len);
        expect_error(path, cases[i].want, cases[i].what);
    }
    snprintf(path, sizeof path, "%s/absent.safetensors", dir);
    expect_error(path, "No such file", "missing file");
}

static int python_has_torch(void)
{
    if (access(PYTHON, X_OK) != 0 ||
        system(PYTHON " -c 'import torch' >/dev/null 2>&1") != 0) {
        printf("safetensors: skip: %s with torch not available, no Python cross-check\n", PYTHON);
        return 0;
    }
    return 1;
}

/* Plain Python (struct + json + torch.frombuffer) reads our file; or, with
 * "write", writes one its own way (no padding, reversed order, an extra I64
 * tensor) with value j + i / 1024 for element i of tensor j. */
static const char *python_script =
    "import json, struct, sys, torch\n"
    "def read(path):\n"
    "    data = open(path, 'rb').read()\n"
    "    n, = struct.unpack('<Q', data[:8])\n"
    "    header = json.loads(data[8:8 + n])\n"
    "    for name, info in header.items():\n"
    "        if name == '__metadata__':\n"
    "            for k, v in sorted(info.items()): print('META', k, v)\n"
    "            continue\n"
    "        b, e = info['data_offsets']\n"
    "        raw = bytearray(data[8 + n + b:8 + n + e])\n"
    "        t = torch.frombuffer(raw, dtype=torch.float32).reshape(info['shape'])\n"
    "        print(name, info['dtype'], 'x'.join(map(str, t.shape)),\n"
    "              ' '.join(repr(v) for v in t.flatten().tolist()))\n"
    "def write(path, specs):\n"
    "    header, blobs, at = {}, [], 0\n"
    "    tensors = [(n, [int(d) for d in s.split('x')])\n"
    "               for n, s in (x.split(':') for x in specs)]\n"
    "    for j, (name, shape) in reversed(list(enumerate(tensors))):\n"
    "        t = j + torch.arange(0, torch.Size(shape).numel(), dtype=torch.float32) / 1024\n"
    "        blob = struct.pack('<%df' % t.numel(), *t.tolist())\n"
    "        header[name] = {'dtype': 'F32', 'shape': shape,\n"
    "                        'data_offsets': [at, at + len(blob)]}\n"
    "        blobs.append(blob); at += len(blob)\n"
    "    header['extra.num_batches_tracked'] = {'dtype': 'I64', 'shape': [],\n"
    "                                           'data_offsets': [at, at + 8]}\n"
    "    blobs.append(struct.pack('<q', 7))\n"
    "    text = json.dumps(header).encode()\n"
    "    open(path, 'wb').write(struct.pack('<Q', len(text)) + text + b''.join(blobs))\n"
    "if sys.argv[1] == 'read': read(sys.argv[2])\n"
    "else: write(sys.argv[2], sys.argv[3:])\n";

static void test_python(void)
{
    if (!python_has_torch())
        return;
    char script[128], path[128], cmd[1024], err[512];
    snprintf(script, sizeof script, "%s/check.py", dir);
    snprintf(path, sizeof path, "%s/py.safetensors", dir);
    FILE *f = fopen(script, "w");
    fputs(python_script, f);
    fclose(f);

    tensor_info t[8];
    model m;
    random_model(&m, t);
    float *params = malloc(m.nparams * sizeof(float)), *stats = malloc(m.nstats * sizeof(float));
    test_fill_uniform(params, m.nparams, -3, 3);
    test_fill_uniform(stats, m.nstats, 0, 2);
    st_meta meta[] = {{"epoch", "12"}};
    CHECK(safetensors_write(path, &m, params, stats, meta, 1, err, sizeof err) == 0, "%s", err);

    /* Python prints every tensor; each value must equal ours exactly. */
    snprintf(cmd, sizeof cmd, PYTHON " %s read %s", script, path);
    FILE *py = popen(cmd, "r");
    char *line = NULL;
    size_t cap = 0;
    int tensors_seen = 0, meta_seen = 0;
    while (py && getline(&line, &cap, py) > 0) {
        char name[TENSOR_NAME_MAX], dtype[8], shape[64];
        int used;
        if (strncmp(line, "META ", 5) == 0) {
            meta_seen += strcmp(line, "META epoch 12\n") == 0 ||
                         strcmp(line, "META format pt\n") == 0;
            continue;
        }
        if (sscanf(line, "%63s %7s %63s %n", name, dtype, shape, &used) != 3)
            continue;
        int i = 0;
        while (i < m.ntensors && strcmp(t[i].name, name) != 0)
            i++;
        if (i == m.ntensors) {
            CHECK(0, "python found an unknown tensor %s", name);
            continue;
        }
        tensors_seen++;
        char want[64] = "";
        for (int d = 0; d < t[i].ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", d ? "x" : "",
                     t[i].shape[d]);
        CHECK(strcmp(dtype, "F32") == 0 && strcmp(shape, want) == 0, "%s: python sees %s %s",
              name, dtype, shape);
        const float *src = (t[i].is_stat ? stats : params) + t[i].offset;
        char *s = line + used, *end;
        size_t count = 0, bad = 0;
        for (double v = strtod(s, &end); end != s; v = strtod(s, &end)) {
            bad += count >= t[i].count || v != (double)src[count];
            count++;
            s = end;
        }
        CHECK(count == t[i].count && bad == 0, "%s: python read %zu values, %zu differ", name,
              count, bad);
    }
    free(line);
    CHECK(py && pclose(py) == 0, "python reader exit status");
    CHECK(tensors_seen == m.ntensors && meta_seen == 2, "python saw %d of %d tensors, %d metadata",
          tensors_seen, m.ntensors, meta_seen);

    /* Python writes; we read. */
    int len = snprintf(cmd, sizeof cmd, PYTHON " %s write %s", script, path);
    for (int i = 0; i < m.ntensors; i++) {
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s:", t[i].name);
        for (int d = 0; d < t[i].ndim; d++)
            len += snprintf(cmd + len, sizeof cmd - (size_t)len, "%s%d", d ? "x" : "",
                            t[i].shape[d]);
    }
    CHECK(system(cmd) == 0, "python writer: %s", cmd);
    CHECK(safetensors_read(path, &m, params, stats, NULL, err, sizeof err) == 0, "%s", err);
    size_t bad = 0;
    for (int j = 0; j < m.ntensors; j++) {
        const float *src = (t[j].is_stat ? stats : params) + t[j].offset;
        for (size_t i = 0; i < t[j].count; i++)
            bad += src[i] != (float)(j + (double)i / 1024);
    }
    CHECK(bad == 0, "%zu values differ in the file Python wrote", bad);
    free(params);
    free(stats);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

int main(void)
{
    test_init("safetensors");
    snprintf(dir, sizeof dir, "/tmp/parle-st-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_malformed();
    test_python();
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    return test_main_end();
}
