/* A job file's devices and scheduling fields: the ranks a `devices` names,
 * "gpu:N" read and resolved, time_limit's forms, after's ids, and whether
 * the convolution algorithms are timed by precision and deterministic. */
#include <stdint.h>
#include <string.h>

#include "jobconfig_check.h"
#include "testutil.h"

/* The ranks a `devices` names, against the bits written out by hand. */
/* conv_algorithms against precision and deterministic: "auto" times at fp32
 * and tf32 only, an explicit choice stands, deterministic never times. */
static void test_conv_algorithms(void)
{
    static const struct {
        const char *fields;
        int timed;
    } cases[] = {
        {"\"precision\": \"fp32\"", 1},
        {"\"precision\": \"tf32\"", 1},
        {"\"precision\": \"bf16\"", 0},
        {"\"precision\": \"bf16\", \"conv_algorithms\": \"auto\"", 0},
        {"\"precision\": \"tf32\", \"conv_algorithms\": \"auto\"", 1},
        {"\"precision\": \"bf16\", \"conv_algorithms\": \"timed\"", 1},
        {"\"precision\": \"tf32\", \"conv_algorithms\": \"heuristic\"", 0},
        {"\"precision\": \"fp32\", \"deterministic\": true", 0},
        {"\"precision\": \"bf16\", \"conv_algorithms\": \"timed\", \"deterministic\": true", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[512], err[512];
        job_config cfg;
        snprintf(json, sizeof json, "{" BASE ", %s}", cases[i].fields);
        CHECK(parse(json, &cfg, err, sizeof err) == 0, "conv_algorithms case %zu: %s", i, err);
        CHECK(job_times_conv_algorithms(&cfg) == cases[i].timed, "conv_algorithms case %zu (%s)",
              i, cases[i].fields);
    }
}

static void test_devices_ranks(void)
{
    static const struct { const char *s; int rc; uint64_t ranks; int gpu; } cases[] = {
        {"rank0:cpu", 1, 1, 0}, {"rank0:cpu,rank2:cpu", 1, 5, 0}, {"rank3:cpu,rank0:cpu", 1, 9, 0},
        {"rank0:cpu,rank63:cpu", 1, 1 | 1ull << 63, 0}, {"auto", 0, 0, 0}, {"cpu", 0, 0, 0},
        {"0,1", 0, 0, 0}, {"rank1:cpu", -1, 0, 0}, {"rank0:cpu,rank0:cpu", -1, 0, 0},
        {"rank0:gpu", 1, 1, 1}, {"rank2:gpu,rank0:gpu", 1, 5, 1},
        /* All on CPUs or all on GPUs; nothing but :cpu or :gpu. */
        {"rank0:gpu,rank1:cpu", -1, 0, 0}, {"rank0:cpu,rank1:gpu", -1, 0, 0},
        {"rank0:cuda:0", -1, 0, 0}, {"rank0:gpux", -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t ranks = 7;
        char why[200] = "";
        int rc = job_devices_ranks(cases[i].s, &ranks, why, sizeof why);
        CHECK(rc == cases[i].rc && (rc < 0 || ranks == cases[i].ranks) && (rc >= 0 || *why),
              "%s: rc %d ranks %#llx (%s)", cases[i].s, rc, (unsigned long long)ranks, why);
        job_device_spec spec = {.ids = 1};
        if (rc == 1)
            CHECK(job_devices_read(cases[i].s, &spec, why, sizeof why) == 0 &&
                      spec.kind == (cases[i].gpu ? DEVICES_GPU : DEVICES_CPU) && !spec.ids,
                  "%s is not a %s job", cases[i].s, cases[i].gpu ? "GPU" : "CPU");
        if (rc < 0 && strstr(cases[i].s, ":gpu") && strstr(cases[i].s, ":cpu"))
            CHECK(strstr(why, "CPUs everywhere or on GPUs everywhere") != NULL,
                  "%s: the mix is not named: %s", cases[i].s, why);
    }
}

/* "gpu:N" read and resolved (the daemon's candidates, a machine's lowest
 * N); time_limit's forms; after's ids. */
static void test_scheduling_fields(void)
{
    job_device_spec spec;
    char why[200] = "", err[200] = "";
    uint64_t out = 0;
    CHECK(job_devices_read("gpu:2", &spec, why, sizeof why) == 0 && spec.kind == DEVICES_GPU &&
              spec.count == 2, "gpu:2 read: %s", why);
    CHECK(job_devices_resolve(&spec, "gpu:2", 0xf, DEVICES_OF_DAEMON, &out, err, sizeof err) ==
              0 && out == 0xf, "gpu:2 on the daemon: any of its 4 GPUs (%#llx)",
          (unsigned long long)out);
    CHECK(job_devices_resolve(&spec, "gpu:2", 0xf, DEVICES_OF_MACHINE, &out, err, sizeof err) ==
              0 && out == 0x3, "gpu:2 on a machine: the first 2 (%#llx)", (unsigned long long)out);
    CHECK(job_devices_resolve(&spec, "gpu:2", 0x1, DEVICES_OF_DAEMON, &out, err, sizeof err) < 0 &&
              strstr(err, "asks for 2 GPUs, the daemon has 1"), "gpu:2 on one GPU: %s", err);
    static const char *const bad_devices[] = {"gpu:0", "gpu:", "gpu:64", "gpu:1x"};
    for (size_t i = 0; i < sizeof bad_devices / sizeof *bad_devices; i++)
        CHECK(job_devices_read(bad_devices[i], &spec, why, sizeof why) == -1 &&
                  strstr(why, "gpu:N takes any N"), "%s refused: %s", bad_devices[i], why);
    static const struct { const char *s; double seconds; } durations[] = {
        {"3600", 3600}, {"90.5", 90.5}, {"02:30:00", 9000}, {"1-12:00:00", 129600},
        {"0", 0}, {"25:00:00", -1}, {"1:2:3", 3723}, {"1:2", -1}, {"00:60:00", -1}, {"-5", -1}, {"", -1},
        {"1-", -1}, {"abc", -1}, {"99999-00:00:00", -1}};
    for (size_t i = 0; i < sizeof durations / sizeof *durations; i++) {
        double x = -7;
        const int rc = job_duration_read(durations[i].s, &x);
        CHECK(durations[i].seconds < 0 ? rc == -1 : rc == 0 && x == durations[i].seconds,
              "duration \"%s\": rc %d, %g s", durations[i].s, rc, x);
    }
    job_config cfg;
    CHECK(parse(JOB("\"time_limit\": \"1-00:00:00\", \"after\": \"j0001,s0002\", "
                    "\"after_any\": true"), &cfg, err, sizeof err) == 0 &&
              cfg.time_limit == 86400 && !strcmp(cfg.after, "j0001,s0002") && cfg.after_any,
          "time_limit, after, after_any: %s", err);
    CHECK(parse(JOB("\"time_limit\": 90"), &cfg, err, sizeof err) == 0 && cfg.time_limit == 90,
          "time_limit in seconds: %s", err);
    CHECK(parse(JOB("\"time_limit\": \"26:00:00\""), &cfg, err, sizeof err) != 0 &&
              strstr(err, "time_limit: must be seconds"), "a bad time_limit: %s", err);
    CHECK(parse(JOB("\"after\": \"j1,,j2\""), &cfg, err, sizeof err) != 0 &&
              strstr(err, "after: \"j1,,j2\": expected job ids"), "a bad after: %s", err);
    char ids[JOB_MAX_AFTER][16];
    CHECK(job_after_ids("j0003,s12", ids, why, sizeof why) == 2 && !strcmp(ids[0], "j0003") &&
              !strcmp(ids[1], "s12"), "after ids");
    CHECK(job_after_ids("j1,", ids, why, sizeof why) < 0, "a trailing comma refused");
}

int main(void)
{
    test_init("jobconfig_devices");
    test_scheduling_fields();
    test_devices_ranks();
    test_conv_algorithms();
    return test_main_end();
}
