/* Checkpoints and resume through the runner (Parle, 2 replica threads, MLP
 * on the synthetic set): a run stopped with RUN_STOP_CHECKPOINT mid-epoch
 * and resumed ends with the same master weights, bit for bit, as one never
 * interrupted; only the newest `keep` checkpoints stay; a corrupt or
 * incomplete checkpoint is skipped for the previous one; a checkpoint writer
 * that fails (PARLE_FAULT_WRITE_AFTER) leaves no checkpoint a resume would
 * trust, and the job goes on, saying none stays; the disk estimate
 * (job_memory.h) bounds what checkpoints take. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "file_tree.h"
#include "job_memory.h"
#include "runner.h"
#include "testjob.h"

/* Parle with 2 MLP replicas, a checkpoint every epoch, the newest 2 kept. */
static void config(job_config *cfg, uint64_t seed)
{
    test_synthetic_job(cfg, "mlp", 2, 4, seed);
    cfg->model.dropout = 0.2f;
    cfg->data.train_limit = 384;
    cfg->data.test_limit = 128;
    strcpy(cfg->algorithm.init, "independent");
    cfg->algorithm.L = 2;
    cfg->checkpoint.every_epochs = 1;
    cfg->checkpoint.keep = 2;
}

static int run(const job_config *cfg, const char *dir, test_watch *w, run_result *res)
{
    char err[512];
    int rc = test_run_job(cfg, NULL, dir, w, res, err, sizeof err);
    if (rc != 0)
        printf("run_job: %s\n", err);
    return rc;
}

static int count_checkpoints(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] == 'k';
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    test_init("checkpoint");
    char tmpl[] = "/tmp/parle-ckpt-XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL, "mkdtemp");
    char da[128], db[128], dc[128], cmd[2400];
    snprintf(da, sizeof da, "%s/a", tmpl);
    snprintf(db, sizeof db, "%s/b", tmpl);
    snprintf(dc, sizeof dc, "%s/c", tmpl);
    job_config cfg;
    run_result res;
    config(&cfg, test_seed() % 1000);

    /* Uninterrupted, with checkpoints every epoch. */
    test_watch a = {0};
    CHECK(run(&cfg, da, &a, &res) == 0 && a.final, "uninterrupted run");
    CHECK(count_checkpoints(da) == 2, "keep 2: found %d checkpoints", count_checkpoints(da));
    /* Admission by disk's estimate of a checkpoint bounds what one takes,
     * not by much; a job's folder at most (keep + 1) of them and a master. */
    job_memory m;
    char why[256];
    CHECK(job_memory_estimate(&cfg, NULL, 0, &m, why, sizeof why) == 0, "estimate: %s", why);
    uint64_t kept = tree_disk_bytes(da);
    CHECK(kept <= 2 * m.checkpoint && kept >= m.checkpoint, "2 checkpoints take %llu bytes, "
          "estimated %zu each", (unsigned long long)kept, m.checkpoint);
    CHECK(m.disk >= 3 * m.checkpoint + a.n * sizeof(float), "the job's disk estimate %zu: no "
          "room for its master (%zu floats) beside 3 checkpoints of %zu", m.disk, a.n,
          m.checkpoint);

    /* Stopped with a checkpoint right after epoch 2's evaluation (that is,
     * one outer iteration into epoch 3), then resumed. */
    test_watch b = {.stop_after_eval = 2};
    CHECK(run(&cfg, db, &b, &res) == 0 && res.stopped && !b.final, "stopped run: stopped %d",
          res.stopped);
    test_watch b2 = {0};
    CHECK(run(&cfg, db, &b2, &res) == 0 && b2.final, "resumed run");
    CHECK(b2.resumes == 1 && res.resumed_k > 0, "resumed from k %ld", res.resumed_k);
    CHECK(a.final && b2.final && a.n == b2.n && memcmp(a.final, b2.final, a.n * sizeof(float)) == 0,
          "a resumed run differs from the uninterrupted one");

    /* Newest corrupt, then newest incomplete: each is skipped for an older one. */
    checkpoint_info info, older;
    char log[2048];
    CHECK(checkpoint_find_latest(da, 2, &info, log, sizeof log) == 1 && !log[0], "latest: %s", log);
    snprintf(cmd, sizeof cmd, "printf 'X' | dd of=%s/replica1.safetensors bs=1 seek=200 conv=notrunc 2>/dev/null",
             info.dir);
    CHECK(system(cmd) == 0, "corrupting %s", info.dir);
    CHECK(checkpoint_find_latest(da, 2, &older, log, sizeof log) == 1 && older.k < info.k &&
          strstr(log, "CRC"), "corrupt newest not skipped: k %ld vs %ld, log: %s", older.k,
          info.k, log);
    snprintf(cmd, sizeof cmd, "%s/manifest.json", older.dir);
    CHECK(unlink(cmd) == 0, "removing manifest");
    CHECK(checkpoint_find_latest(da, 2, &older, log, sizeof log) == 0 && strstr(log, "incomplete"),
          "incomplete checkpoint not skipped: %s", log);

    /* A failing writer: the job still ends, says why, and leaves nothing usable. */
    setenv("PARLE_FAULT_WRITE_AFTER", "1000", 1);
    test_watch c = {0};
    CHECK(run(&cfg, dc, &c, &res) == 0 && c.final, "job with failing checkpoints");
    unsetenv("PARLE_FAULT_WRITE_AFTER");
    CHECK(c.failures_logged >= 1, "failed checkpoints were not reported");
    CHECK(strstr(c.first_failure, "failed (there is no earlier one to resume from)"),
          "the first failed checkpoint does not say none stays: %s", c.first_failure);
    CHECK(checkpoint_find_latest(dc, 2, &info, log, sizeof log) == 0,
          "a failed checkpoint is trusted: %s", info.dir);

    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    CHECK(system(cmd) == 0, "cleanup");
    free(a.final);
    free(b2.final);
    free(c.final);
    return test_main_end();
}
