/* libFuzzer harness: any bytes as a job file. The parser must not crash, leak
 * or read past the input; a rejection carries a message, and an accepted job
 * holds only values its fields allow. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jobfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    job_config cfg;
    char err[256];
    int rc = job_config_parse((const char *)data, size, &cfg, err, sizeof err);
    if (strnlen(err, sizeof err) == sizeof err)
        __builtin_trap(); /* unterminated message */
    if (rc != 0) {
        if (rc != -1 || !err[0])
            __builtin_trap();
        return 0;
    }
    if (!cfg.name[0] || !cfg.model.arch[0] || !cfg.data.dataset[0] || !cfg.algorithm.name[0] ||
        cfg.epochs < 1 || cfg.algorithm.replicas < 1 || cfg.algorithm.L < 0 ||
        cfg.optim.batch < 1 || !(cfg.optim.lr > 0) || cfg.optim.nschedule < 0 ||
        cfg.optim.nschedule > JOB_MAX_SCHEDULE || cfg.checkpoint.keep < 1 || cfg.log_every < 1)
        __builtin_trap();
    for (int i = 0; i < cfg.optim.nschedule; i++)
        if (cfg.optim.schedule[i][0] < 1 || !(cfg.optim.schedule[i][1] > 0) ||
            (i > 0 && cfg.optim.schedule[i][0] <= cfg.optim.schedule[i - 1][0]))
            __builtin_trap();
    if (!(job_lr_at_epoch(&cfg, cfg.epochs) > 0))
        __builtin_trap();
    return 0;
}
