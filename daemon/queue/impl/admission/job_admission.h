/* Admission's door within the queue (job_admission.c): by memory and by
 * disk. Its fields are its part of each job (admit_of); it also words
 * `waiting` for the waits it finds. */
#ifndef PARLE_JOB_ADMISSION_H
#define PARLE_JOB_ADMISSION_H

#include "job_memory.h"
#include "jobs_store.h"

/* Admission's (job_admission.c), no other file writes them: the
 * estimate once made (need_known 1; -1: it could not be made, the job is
 * not held back), and whether it is held back for the state dir's free
 * space. */
struct job_admission {
    job_memory need;
    int need_known;
    int disk_short;
};
static inline struct job_admission *admit_of(const job *j)
{
    return job_part(j, JOB_PART_ADMIT);
}

/* job_admission.c: admission by memory (docs/architecture.md). At submit:
 * 0, or -1 with a message naming both figures when the job can never fit. */
int job_admit(job *j, char *err, size_t errlen);
/* At scheduling, for a queued job whose devices are free: 1 if it must wait
 * for memory (its wait says why, in its status), 0 if it may start. */
int job_waits_for_memory(jobs *js, job *j);
/* The same for a queued job the scheduler would preempt running jobs for:
 * its host memory only (a GPU's is the preempted jobs' to free), with the
 * `freed` bytes those jobs hold counted as free. */
int job_waits_for_memory_preempting(jobs *js, job *j, size_t freed);
/* Admission by disk (job_admission.c): 1 if the state dir's free space,
 * less what running jobs are yet to write, is short of what the job
 * writes (job_memory.disk); then its wait says so ("disk: ..."), logged
 * and persisted once per wait. `freed`: bytes of what running jobs are yet
 * to write that would not be (those the scheduler would preempt for it). */
int job_waits_for_disk(jobs *js, job *j, uint64_t freed);
/* What job j is yet to write: its estimate less its folder as of its last
 * status.json (0 past it). */
uint64_t job_disk_to_write(const job *j);
/* On the job's thread, as its loader asks (data_admit_fn, user: the job):
 * once its files' headers are read, the data they claim is counted again;
 * more than the job was admitted with must fit in what the host has now,
 * else -1 with a message naming the file, its count and both figures. */
int job_admit_data(void *user, const data_claim *claim, char *err, size_t errlen);

#endif
