/* The accounting record and fair share's charge (daemon/usage/accounting.c):
 * what a job is charged per second, a run's line written and read back,
 * damaged lines skipped and counted (a torn end cut off), the history's sums
 * per owner with --user and --since, and the file's rotation at its bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "accounting.h"
#include "testutil.h"

static void test_device_units(void)
{
    static const struct {
        int ngpus;
        double share;
        int cores, ncores;
        double want;
    } cases[] = {
        {1, 1, 0, 16, 1},      {2, 1, 0, 16, 2},     {1, 0.25, 0, 16, 0.25},
        {4, 0.5, 0, 16, 2},    {0, 1, 16, 16, 1},    {0, 1, 1, 2, 0.5},
        {0, 1, 3, 8, 0.375},   {0, 1, 0, 8, 0},      {0, 1, 9, 8, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        CHECK_CLOSE(acct_device_units(cases[k].ngpus, cases[k].share, cases[k].cores,
                                      cases[k].ncores),
                    cases[k].want, 0, 1e-15, "device units");
    for (int t = 0; t < 100; t++) {
        const int ngpus = (int)test_uniform(1, 9), ncores = (int)test_uniform(1, 129);
        const int cores = (int)test_uniform(1, ncores + 1);
        const double share = test_uniform(0.001, 1);
        CHECK_CLOSE(acct_device_units(ngpus, share, 0, ncores), (double)ngpus * share, 0, 1e-15,
                    "a GPU job: its GPUs x its share");
        CHECK_CLOSE(acct_device_units(0, share, cores, ncores), (double)cores / (double)ncores,
                    0, 1e-15, "a CPU job: its cores' part of the CPU");
    }
}

static acct_run random_run(unsigned uid, const char *user, double ended_at, double device_s)
{
    acct_run r = {.uid = uid, .ended_at = ended_at, .device_seconds = device_s};
    snprintf(r.id, sizeof r.id, "j%04d", (int)test_uniform(1, 10000));
    snprintf(r.user, sizeof r.user, "%s", user);
    snprintf(r.end, sizeof r.end, "%s", test_uniform(0, 1) < 0.5 ? "done" : "preempted");
    snprintf(r.devices, sizeof r.devices, "cpu:%d", (int)test_uniform(1, 17));
    r.started_at = ended_at - test_uniform(1, 1000);
    return r;
}

static char *line_of(const acct_run *r)
{
    cJSON *o = acct_run_json(r);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static void test_round_trip(void)
{
    for (int t = 0; t < 50; t++) {
        const acct_run r = random_run((unsigned)test_uniform(0, 4e9), "alice",
                                      test_uniform(1.7e9, 1.8e9), test_uniform(0, 1e6));
        char *text = line_of(&r), why[200] = "";
        acct_run back;
        CHECK(acct_parse_line(text, strlen(text), &back, why, sizeof why) == 0, "%s: %s", text,
              why);
        CHECK(back.uid == r.uid && strcmp(back.id, r.id) == 0 && strcmp(back.user, r.user) == 0 &&
                  strcmp(back.end, r.end) == 0 && strcmp(back.devices, r.devices) == 0,
              "fields changed: %s", text);
        CHECK_CLOSE(back.device_seconds, r.device_seconds, 0, 1e-12, "device_seconds");
        CHECK_CLOSE(back.ended_at, r.ended_at, 0, 1e-12, "ended_at");
        free(text);
    }
}

static void test_bad_lines(void)
{
#define GOOD_HEAD "\"id\":\"j0001\",\"uid\":1001,\"user\":\"alice\",\"devices\":\"cpu:1\""
    static const struct {
        const char *line, *why;
    } cases[] = {
        {"{" GOOD_HEAD ",\"end\":\"done\",\"started_at\":10,\"ended_at\":20", "not JSON"},
        {"[1,2]", "not a JSON object"},
        {"{" GOOD_HEAD ",\"end\":\"done\",\"started_at\":10,\"ended_at\":20}",
         "device_seconds: must be a number"},
        {"{" GOOD_HEAD ",\"end\":\"done\",\"started_at\":10,\"ended_at\":20,\"device_seconds\":-1}",
         "device_seconds: must be a number"},
        {"{" GOOD_HEAD ",\"end\":\"done\",\"started_at\":10,\"ended_at\":20,\"device_seconds\":1e12}",
         "device_seconds: must be a number"},
        {"{" GOOD_HEAD ",\"end\":\"done\",\"started_at\":10,\"ended_at\":20,\"device_seconds\":null}",
         "device_seconds: must be a number"},
        {"{" GOOD_HEAD ",\"end\":\"done\",\"started_at\":30,\"ended_at\":20,\"device_seconds\":1}",
         "ended_at: must be a number in 30.."},
        {"{" GOOD_HEAD ",\"end\":\"bogus\",\"started_at\":10,\"ended_at\":20,\"device_seconds\":1}",
         "end: must be done"},
        {"{\"id\":\"j0001\",\"uid\":-1,\"user\":\"a\",\"devices\":\"cpu\",\"end\":\"done\","
         "\"started_at\":10,\"ended_at\":20,\"device_seconds\":1}", "uid: must be a number"},
        {"{\"id\":\"j0001\",\"uid\":1.5,\"user\":\"a\",\"devices\":\"cpu\",\"end\":\"done\","
         "\"started_at\":10,\"ended_at\":20,\"device_seconds\":1}", "uid: must be a user id"},
        {"{\"id\":\"j0001\",\"uid\":1,\"user\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaa\",\"devices\":\"cpu\",\"end\":\"done\",\"started_at\":10,"
         "\"ended_at\":20,\"device_seconds\":1}", "user: must be a string of at most 63"},
        {"{\"uid\":1,\"user\":\"a\",\"devices\":\"cpu\",\"end\":\"done\",\"started_at\":10,"
         "\"ended_at\":20,\"device_seconds\":1}", "id: must be a string"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        acct_run r;
        char why[200] = "";
        CHECK(acct_parse_line(cases[k].line, strlen(cases[k].line), &r, why, sizeof why) != 0,
              "taken: %s", cases[k].line);
        CHECK(strncmp(why, cases[k].why, strlen(cases[k].why)) == 0, "%s: why \"%s\", want \"%s\"",
              cases[k].line, why, cases[k].why);
    }
    char *long_line = malloc(ACCT_LINE_MAX + 2);
    memset(long_line, ' ', ACCT_LINE_MAX + 1);
    long_line[ACCT_LINE_MAX + 1] = '\0';
    acct_run r;
    char why[200] = "";
    CHECK(acct_parse_line(long_line, ACCT_LINE_MAX + 1, &r, why, sizeof why) != 0 &&
              strstr(why, "longer than"),
          "an overlong line: %s", why);
    free(long_line);
}

/* Three good lines, a damaged one between them and a torn last one: the
 * good ones are kept, the others counted, the first named. */
static void test_load_text(void)
{
    const acct_run a = random_run(1001, "alice", 1000, 3600), b = random_run(1002, "bob", 2000, 7200);
    char *la = line_of(&a), *lb = line_of(&b);
    char text[4096];
    snprintf(text, sizeof text, "%s\n{\"id\": garbage\n%s\n\n%s\n%.20s", la, lb, la, lb);
    acct_log log = {0};
    size_t whole;
    CHECK(acct_load_text(&log, text, strlen(text), "acct", &whole) == 0, "out of memory");
    CHECK(log.n == 3, "%zu runs kept, want 3", log.n);
    CHECK(log.skipped == 2, "%ld lines skipped, want 2", log.skipped);
    CHECK(strncmp(log.first_bad, "acct: line 2: not JSON", 22) == 0, "first bad: %s",
          log.first_bad);
    CHECK(whole == strlen(text) - 20, "whole lines end at %zu, want %zu", whole, strlen(text) - 20);
    free(la);
    free(lb);
    acct_close(&log);
}

static double owner_hours(const cJSON *h, const char *user)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(h, "owners"))
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "user")), user) == 0)
            return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "device_hours"));
    return -1;
}

static void test_history(void)
{
    acct_log log = {0};
    double want_alice = 0, want_bob = 0, late_alice = 0;
    for (int t = 0; t < 200; t++) {
        const int alice = test_uniform(0, 1) < 0.5;
        const double ended = test_uniform(1000, 2000), used = test_uniform(0, 1e5);
        const acct_run r = random_run(alice ? 1001 : 1002, alice ? "alice" : "bob", ended, used);
        CHECK(acct_add(&log, &r) == 0, "out of memory");
        *(alice ? &want_alice : &want_bob) += used;
        late_alice += alice && ended >= 1500 ? used : 0;
    }
    cJSON *all = acct_history_json(&log, NULL, 0);
    CHECK_CLOSE(owner_hours(all, "alice"), want_alice / 3600, 0, 1e-12, "alice's hours");
    CHECK_CLOSE(owner_hours(all, "bob"), want_bob / 3600, 0, 1e-12, "bob's hours");
    CHECK_CLOSE(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(all, "total_device_hours")),
                (want_alice + want_bob) / 3600, 0, 1e-12, "total");
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(all, "owners"), 0);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(first, "user")),
                 want_alice > want_bob ? "alice" : "bob") == 0, "the most used is not first");
    cJSON *late = acct_history_json(&log, "alice", 1500);
    CHECK_CLOSE(owner_hours(late, "alice"), late_alice / 3600, 0, 1e-12, "alice's since 1500");
    CHECK(owner_hours(late, "bob") < 0, "--user alice lists bob");
    cJSON *by_uid = acct_history_json(&log, "1002", 0);
    CHECK_CLOSE(owner_hours(by_uid, "bob"), want_bob / 3600, 0, 1e-12, "bob's by uid");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(by_uid, "owners")) == 1,
          "--user 1002 lists others");
    cJSON *none = acct_history_json(&log, "carol", 0);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(none, "owners")) == 0,
          "an unknown user has runs");
    cJSON_Delete(all);
    cJSON_Delete(late);
    cJSON_Delete(by_uid);
    cJSON_Delete(none);
    acct_close(&log);
}

/* The files: appended, read back at the next open, a torn end cut before the
 * next append, and the file turned into accounting.1.jsonl at its bound. */
static void test_files(void)
{
    char dir[] = "/tmp/parle-acct-XXXXXX", path[128], old_path[128], err[1200];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/accounting.jsonl", dir);
    snprintf(old_path, sizeof old_path, "%s/accounting.1.jsonl", dir);
    acct_log log = {0};
    CHECK(acct_open(&log, dir, err, sizeof err) == 0, "open an empty dir: %s", err);
    const acct_run a = random_run(1001, "alice", 1000, 36), b = random_run(1002, "bob", 2000, 72);
    CHECK(acct_append(&log, &a, err, sizeof err) == 0, "append: %s", err);
    CHECK(acct_append(&log, &b, err, sizeof err) == 0, "append: %s", err);
    acct_close(&log);
    FILE *f = fopen(path, "a");
    fputs("{\"id\":\"j9", f); /* a crash in the middle of an append */
    fclose(f);
    log = (acct_log){0};
    CHECK(acct_open(&log, dir, err, sizeof err) == 0, "reopen: %s", err);
    CHECK(log.n == 2 && log.skipped == 1, "%zu runs, %ld skipped; want 2 and 1", log.n,
          log.skipped);
    CHECK(acct_append(&log, &a, err, sizeof err) == 0, "append after a torn end: %s", err);
    acct_close(&log);
    log = (acct_log){0};
    CHECK(acct_open(&log, dir, err, sizeof err) == 0 && log.n == 3 && log.skipped == 0,
          "the torn end was not cut: %zu runs, %ld skipped", log.n, log.skipped);
    acct_close(&log);

    /* A file past its bound: the next run starts a new one; both are read. */
    char *line = line_of(&a);
    const size_t len = strlen(line) + 1, nlines = ACCT_FILE_MAX / len + 1;
    f = fopen(path, "w");
    for (size_t k = 0; k < nlines; k++)
        fprintf(f, "%s\n", line);
    fclose(f);
    free(line);
    log = (acct_log){0};
    CHECK(acct_open(&log, dir, err, sizeof err) == 0 && log.n == nlines, "a full file: %s", err);
    CHECK(acct_append(&log, &b, err, sizeof err) == 0, "append past the bound: %s", err);
    struct stat st;
    CHECK(stat(old_path, &st) == 0 && (size_t)st.st_size == nlines * len,
          "the full file is not accounting.1.jsonl");
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size < 1024, "no new file after the bound");
    CHECK(log.n == nlines + 1, "%zu runs in memory, want %zu", log.n, nlines + 1);
    acct_close(&log);
    log = (acct_log){0};
    CHECK(acct_open(&log, dir, err, sizeof err) == 0 && log.n == nlines + 1,
          "both files are not read back: %zu runs", log.n);
    cJSON *h = acct_history_json(&log, NULL, 0);
    CHECK_CLOSE(owner_hours(h, "bob"), 72.0 / 3600, 0, 1e-12, "bob's run after the rotation");
    cJSON_Delete(h);
    acct_close(&log);
    unlink(path);
    unlink(old_path);
    rmdir(dir);
}

/* Another member's churn rotates the files out: each owner's runs stay, by
 * the day, in accounting.days.jsonl for ACCT_KEEP_DAYS days (read back at
 * the next open); older days go; a bad line of it is skipped and counted. */
static void test_days(void)
{
    char dir[] = "/tmp/parle-acct-XXXXXX", path[128], old_path[128], days_path[128], err[1200];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/accounting.jsonl", dir);
    snprintf(old_path, sizeof old_path, "%s/accounting.1.jsonl", dir);
    snprintf(days_path, sizeof days_path, "%s/accounting.days.jsonl", dir);
    const double now = 1.8e9;
    const acct_run alice = random_run(1001, "alice", now - 3 * 86400, 36);
    const acct_run carol = random_run(1003, "carol", now - (ACCT_KEEP_DAYS + 2) * 86400.0, 50);
    acct_run bob = random_run(1002, "bob", now - 60, 1);
    char *a = line_of(&alice), *c = line_of(&carol), *b = line_of(&bob);
    FILE *f = fopen(old_path, "w");
    fprintf(f, "%s\n%s\n", a, c);
    fclose(f);
    const size_t nlines = ACCT_FILE_MAX / (strlen(b) + 1) + 1;
    f = fopen(path, "w");
    for (size_t k = 0; k < nlines; k++)
        fprintf(f, "%s\n", b);
    fclose(f);
    free(a);
    free(c);
    free(b);
    acct_log log = {0};
    CHECK(acct_open(&log, dir, err, sizeof err) == 0, "open: %s", err);
    bob.ended_at = now;
    CHECK(acct_append(&log, &bob, err, sizeof err) == 0, "append past the bound: %s", err);
    for (int reopen = 0; reopen < 2; reopen++) {
        cJSON *h = acct_history_json(&log, NULL, 0);
        CHECK_CLOSE(owner_hours(h, "alice"), 36.0 / 3600, 0, 1e-12,
                    "alice's run once bob's rotated it out (and reopened)");
        CHECK(owner_hours(h, "carol") < 0, "a day past ACCT_KEEP_DAYS stays");
        CHECK_CLOSE(owner_hours(h, "bob"), (double)(nlines + 1) / 3600, 0, 1e-9, "bob's runs");
        cJSON_Delete(h);
        h = acct_history_json(&log, "alice", now - 2 * 86400);
        CHECK(owner_hours(h, "alice") < 0, "alice's day counted after --since");
        cJSON_Delete(h);
        acct_close(&log);
        log = (acct_log){0};
        CHECK(acct_open(&log, dir, err, sizeof err) == 0, "reopen: %s", err);
    }
    f = fopen(days_path, "a");
    fputs("{\"uid\":7,\"user\":\"x\",\"day\":12345,\"runs\":1,\"device_seconds\":1}\n", f);
    fclose(f);
    acct_close(&log);
    log = (acct_log){0};
    CHECK(acct_open(&log, dir, err, sizeof err) == 0 && log.skipped == 1 &&
              strstr(log.first_bad, "accounting.days.jsonl: line 2: ") != NULL,
          "a day not starting a UTC day: %ld skipped, %s", log.skipped, log.first_bad);
    acct_close(&log);
    unlink(path);
    unlink(old_path);
    unlink(days_path);
    rmdir(dir);
}

int main(void)
{
    test_init("accounting");
    test_device_units();
    test_round_trip();
    test_bad_lines();
    test_load_text();
    test_history();
    test_files();
    test_days();
    return test_main_end();
}
