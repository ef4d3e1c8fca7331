/* A checkpoint replica file's metadata read back as key/values
 * (checkpoint_meta): every value found by its whole key, numbers parsed
 * whole, and a missing or malformed key an error naming the file and the
 * key. */
#include <string.h>

#include "checkpoint.h"
#include "testutil.h"

#define FILE_NAME "/state/ckpt/k0000000004/replica1.safetensors"

/* err names the file and, when key is not NULL, "key" in quotes. */
static int names(const char *err, const char *key)
{
    char quoted[80];
    snprintf(quoted, sizeof quoted, "\"%s\"", key ? key : "");
    return strstr(err, FILE_NAME) != NULL && (!key || strstr(err, quoted) != NULL);
}

int main(void)
{
    test_init("checkpoint_meta");
    checkpoint_meta m;
    char err[1600] = "";
    long long v = 0;
    unsigned long long u = 0;
    double d = 0;

    /* What run_checkpoint_take writes, with keys that share prefixes and a
     * value that holds another key's pattern. */
    const char *good = "{\"sampler_pass\":\"3\",\"sampler_pos\":\"17\",\"sampler_draws\":"
                       "\"18446744073709551615\",\"sync_s\":\"0.12500000000000001\","
                       "\"rule.a\":\"0.25\",\"rule.ab\":\"7\",\"x\":\"\\\"rule.a\\\":\\\"9\"}";
    CHECK(checkpoint_meta_parse(&m, FILE_NAME, good, err, sizeof err) == 0, "parse: %s", err);
    CHECK(cJSON_GetArraySize(m.root) == 7, "%d keys", cJSON_GetArraySize(m.root));
    CHECK(checkpoint_meta_long(&m, "sampler_pass", &v, err, sizeof err) == 0 && v == 3, "pass %lld", v);
    CHECK(checkpoint_meta_long(&m, "sampler_pos", &v, err, sizeof err) == 0 && v == 17, "pos %lld", v);
    CHECK(checkpoint_meta_u64(&m, "sampler_draws", &u, err, sizeof err) == 0 &&
          u == 18446744073709551615ULL, "draws %llu", u);
    CHECK(checkpoint_meta_double(&m, "sync_s", &d, err, sizeof err) == 0 && d == 0.125, "sync_s %.17g", d);
    CHECK(checkpoint_meta_double(&m, "rule.a", &d, err, sizeof err) == 0 && d == 0.25, "rule.a %g", d);
    CHECK(checkpoint_meta_double(&m, "rule.ab", &d, err, sizeof err) == 0 && d == 7, "rule.ab %g", d);
    CHECK(strcmp(checkpoint_meta_get(&m, "x"), "\"rule.a\":\"9") == 0, "x: %s", checkpoint_meta_get(&m, "x"));
    CHECK(checkpoint_meta_get(&m, "rule") == NULL, "a prefix is not a key");

    /* A missing key. */
    CHECK(checkpoint_meta_long(&m, "rule.b", &v, err, sizeof err) == -1 && names(err, "rule.b") &&
          strstr(err, "missing"), "missing key: %s", err);
    CHECK(checkpoint_meta_double(&m, "sampler", &d, err, sizeof err) == -1 && names(err, "sampler"),
          "missing key: %s", err);
    checkpoint_meta_free(&m);
    CHECK(m.root == NULL, "freed");

    /* Bad values: not whole numbers, empty, negative for the unsigned one,
     * out of range. */
    const char *bad = "{\"sampler_pass\":\"3x\",\"sampler_pos\":\"\",\"sampler_draws\":\"-1\","
                      "\"sync_s\":\"fast\",\"big\":\"99999999999999999999\",\"sp\":\"1 \"}";
    CHECK(checkpoint_meta_parse(&m, FILE_NAME, bad, err, sizeof err) == 0, "parse: %s", err);
    CHECK(checkpoint_meta_long(&m, "sampler_pass", &v, err, sizeof err) == -1 &&
          names(err, "sampler_pass") && strstr(err, "not an integer"), "3x: %s", err);
    CHECK(checkpoint_meta_long(&m, "sampler_pos", &v, err, sizeof err) == -1 &&
          names(err, "sampler_pos"), "empty: %s", err);
    CHECK(checkpoint_meta_u64(&m, "sampler_draws", &u, err, sizeof err) == -1 &&
          names(err, "sampler_draws"), "-1: %s", err);
    CHECK(checkpoint_meta_double(&m, "sync_s", &d, err, sizeof err) == -1 && names(err, "sync_s") &&
          strstr(err, "not a number"), "fast: %s", err);
    CHECK(checkpoint_meta_long(&m, "big", &v, err, sizeof err) == -1 && names(err, "big"),
          "out of range: %s", err);
    CHECK(checkpoint_meta_long(&m, "sp", &v, err, sizeof err) == -1 && names(err, "sp"),
          "trailing space: %s", err);
    checkpoint_meta_free(&m);

    /* Metadata that is not an object of strings. */
    CHECK(checkpoint_meta_parse(&m, FILE_NAME, "{\"sampler_pass\":3}", err, sizeof err) == -1 &&
          names(err, "sampler_pass") && strstr(err, "not a string"), "number value: %s", err);
    CHECK(m.root == NULL, "nothing kept");
    checkpoint_meta_free(&m);
    CHECK(checkpoint_meta_parse(&m, FILE_NAME, "[1]", err, sizeof err) == -1 && names(err, NULL),
          "array: %s", err);
    checkpoint_meta_free(&m);
    CHECK(checkpoint_meta_parse(&m, FILE_NAME, "{\"a\":", err, sizeof err) == -1 && names(err, NULL),
          "truncated: %s", err);
    checkpoint_meta_free(&m);
    CHECK(checkpoint_meta_parse(&m, FILE_NAME, NULL, err, sizeof err) == -1 && names(err, NULL),
          "none: %s", err);
    checkpoint_meta_free(&m);
    CHECK(checkpoint_meta_parse(&m, FILE_NAME, "{}", err, sizeof err) == 0 && cJSON_GetArraySize(m.root) == 0, "empty: %s", err);
    CHECK(checkpoint_meta_long(&m, "sampler_pass", &v, err, sizeof err) == -1 &&
          names(err, "sampler_pass"), "empty object: %s", err);
    checkpoint_meta_free(&m);
    return test_main_end();
}
