/* mpi_node.h over MPI (docs/mpi.md).
 *
 * Threads: MPI_THREAD_MULTIPLE where the library gives it, else SERIALIZED.
 * MPI is called by the main thread (init, a worker's wait for jobs,
 * finalize), by rank 0's job thread (a job's start and end) and, while the
 * job runs, by the process's replica 0 (its comm's leader) inside a
 * collective; the job thread is then in run_job's supervise, which makes no
 * MPI call. The asynchronous rules add calls from every replica thread (its
 * peer requests) and from the net's answering thread at once: they need
 * MULTIPLE, and are refused at their start where the library lacks it.
 *
 * Rank 0 hands a job to the ranks that run it (every rank not lost, or those
 * its `devices` names) point to point, each acknowledging it, so that a rank
 * that is gone or stuck is named once comm.timeout_s has passed instead of
 * hanging the hand-off; such a rank is lost for this MPI job's life. The job
 * then runs over its own communicators (mpi_net.c). */
#include "mpi_net.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coupling.h"
#include "dataset.h"
#include "fsutil.h"
#include "jobfile.h"
#include "mpi_pending.h"
#include "parle_config.h"

enum { WHY_MAX = 512, JOB_TEXT_MAX = 1 << 20 };
/* How long rank 0 waits for the others to acknowledge "stop". */
#define STOP_WAIT_S 30.0
/* How long each rank lets what failed jobs left pending complete before
 * MPI_Finalize (every rank is then polling, so it takes milliseconds). */
#define SETTLE_S 3.0

static unsigned char *lost;  /* rank 0: ranks that did not take a job in time (atomic) */
static mpi_rank_info *ranks; /* rank 0: what each rank said at start */
/* Rank 0: the job header last sent to each rank. A send to a rank that never
 * takes it stays pending, reading it, but nothing is sent there again. */
static long (*headers)[4];
static long job_seq;

int mpi_node_init(int *argc, char ***argv, char *err, size_t errlen)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "--mpi: MPI_Init_thread failed");
        return -1;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        snprintf(err, errlen, "--mpi: this MPI gives thread level %d; parled needs "
                 "MPI_THREAD_SERIALIZED", provided);
        MPI_Finalize();
        return -1;
    }
    mpi_net_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    /* Errors come back as values: a peer's failure fails the job, not this
     * process (Open MPI's runtime may still end every rank when one dies). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int node_rank = 0, node_size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &node_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &node_size);
    mpi_world_set(node_rank, node_size);
    lost = calloc((size_t)node_size, 1);
    headers = calloc((size_t)node_size, sizeof *headers);
    long *all = calloc((size_t)node_size * 3, sizeof *all);
    ranks = calloc((size_t)node_size, sizeof *ranks);
    if (!lost || !headers || !all || !ranks) {
        snprintf(err, errlen, "--mpi: out of memory");
        MPI_Finalize();
        return -1;
    }
    /* Each rank's pid, cores and GPUs, for rank 0's `devices`. */
    int *cores = NULL;
    char why[256];
    long mine[3] = {(long)getpid(), run_cpu_cores(&cores, why, sizeof why),
                    backend_cuda_devices()};
    free(cores);
    if (MPI_Gather(mine, 3, MPI_LONG, all, 3, MPI_LONG, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        snprintf(err, errlen, "--mpi: the ranks could not say what they have (MPI_Gather)");
        free(all);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return -1;
    }
    for (int r = 0; r < node_size; r++)
        ranks[r] = (mpi_rank_info){all[3 * r], (int)all[3 * r + 1], (int)all[3 * r + 2]};
    free(all);
    return 0;
}

int mpi_node_describe(int rank, mpi_rank_info *out)
{
    if (rank < 0 || rank >= mpi_node_size() || !ranks)
        return -1;
    *out = ranks[rank];
    return __atomic_load_n(&lost[rank], __ATOMIC_RELAXED);
}


/* A blocking wait that does not spin a core: poll, then sleep a little,
 * completing what failed jobs left pending meanwhile. */
static int wait_polling(MPI_Request *req, MPI_Status *st)
{
    for (long spins = 0;; spins++) {
        int done = 0, rc = MPI_Test(req, &done, st ? st : MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        if (spins > 2000) {
            mpi_pending_drain();
            mpi_net_nap(spins > 100000 ? 5000000 : 50000);
        }
    }
}

/* MPI_Finalize once the operations failed jobs left pending have completed,
 * or SETTLE_S passed (one whose other side never came stays pending through
 * MPI's teardown, its buffer still kept); then their buffers go. 0, or 1. */
static int finalize(void)
{
    int left = mpi_pending_settle(SETTLE_S), rc = 0;
    if (left > 0)
        mpi_net_log("%d MPI operations of failed jobs never completed: finalizing with them "
                    "pending", left);
    if (MPI_Finalize() != MPI_SUCCESS) {
        mpi_net_log("MPI_Finalize failed");
        rc = 1;
    }
    mpi_pending_release();
    return rc;
}

/* Rank 0: a job (text and checkpoint dir, then its ranks) to the job's ranks
 * > 0, or "stop" (len 0) to them. Each acknowledges the header before the
 * rest comes; those that do not within timeout_s are lost: named in err, and
 * the others are told to forget the job. 0, or -1. */
static int hand_off(const int *world, int n, const char *text, size_t len, const char *ckpt,
                    double timeout_s, char *err, size_t errlen)
{
    size_t clen = ckpt ? strlen(ckpt) : 0, size = len + clen + (size_t)n * sizeof(int);
    int *acks = calloc((size_t)n, sizeof *acks);
    MPI_Request *sends = calloc((size_t)n, sizeof *sends);
    MPI_Request *recvs = calloc((size_t)n, sizeof *recvs);
    char *body = len ? malloc(size) : NULL;
    if (!acks || !sends || !recvs || (len && !body)) {
        snprintf(err, errlen, "MPI: out of memory");
        free(acks), free(sends), free(recvs), free(body);
        return -1;
    }
    job_seq++;
    sends[0] = recvs[0] = MPI_REQUEST_NULL;
    for (int j = 1; j < n; j++) {
        long *hdr = headers[world[j]];
        hdr[0] = (long)len, hdr[1] = (long)clen, hdr[2] = n, hdr[3] = job_seq;
        if (MPI_Isend(hdr, 4, MPI_LONG, world[j], TAG_JOB, MPI_COMM_WORLD, &sends[j]) !=
                MPI_SUCCESS ||
            MPI_Irecv(&acks[j], 1, MPI_INT, world[j], TAG_ACK, MPI_COMM_WORLD, &recvs[j]) !=
                MPI_SUCCESS) {
            snprintf(err, errlen, "MPI: could not send the job to rank %d", world[j]);
            return -1; /* MPI itself is broken: what was started stays */
        }
    }
    int rc = mpi_net_wait_until(n, recvs, comm_now_s() + timeout_s);
    size_t at = 0;
    for (int j = 1; j < n && rc == 1; j++) {
        MPI_Status st;
        int cancelled = 1;
        if (recvs[j] == MPI_REQUEST_NULL)
            continue;
        MPI_Cancel(&recvs[j]);
        MPI_Wait(&recvs[j], &st);
        MPI_Test_cancelled(&st, &cancelled);
        if (!cancelled) /* its acknowledgement came just now */
            continue;
        __atomic_store_n(&lost[world[j]], 1, __ATOMIC_RELAXED);
        if (at < errlen)
            at += (size_t)snprintf(err + at, errlen - at, "%s%d", at ? ", " : "MPI: rank ",
                                   world[j]);
    }
    if (rc == 1 && at == 0)
        rc = 0;
    if (rc == 1 && at < errlen)
        snprintf(err + at, errlen - at, " did not take the %s within %g s (gone, or stuck in the "
                 "previous job): it is left out of later jobs; restart the MPI job to get it back",
                 len ? "job" : "order to stop", timeout_s);
    else if (rc < 0)
        snprintf(err, errlen, "MPI: the ranks' acknowledgements of the job failed");
    if (body) {
        /* The ranks that took the header wait for the rest; empty means "forget it". */
        memcpy(body, text, len);
        memcpy(body + len, ckpt, clen);
        memcpy(body + len + clen, world, (size_t)n * sizeof(int));
        for (int j = 1; j < n; j++) {
            if (lost[world[j]])
                continue;
            MPI_Wait(&sends[j], MPI_STATUS_IGNORE);
            if (MPI_Isend(body, rc ? 0 : (int)size, MPI_BYTE, world[j], TAG_TEXT, MPI_COMM_WORLD,
                          &sends[j]) != MPI_SUCCESS)
                sends[j] = MPI_REQUEST_NULL, rc = -1;
        }
        /* They are waiting for it: this cannot take long. */
        if (mpi_net_wait_until(n, sends, comm_now_s() + timeout_s) != 0) {
            if (rc == 0)
                snprintf(err, errlen, "MPI: the job's text did not reach every rank within "
                         "%g s", timeout_s);
            rc = -1;
        }
    }
    /* A lost rank's header send (headers[] is static) or a text send may be
     * pending still: the node keeps them, with the body they read. */
    mpi_pending_keep(sends + 1, n - 1, body);
    free(acks), free(sends), free(recvs);
    return rc == 0 ? 0 : -1;
}

/* Rank 0: the ranks a job runs on (world ranks, rank 0 first), from its
 * `devices`: those named, or every rank not lost. */
static int job_ranks(const job_config *cfg, int **out, char *err, size_t errlen)
{
    uint64_t named = cfg->device_spec.ranks;
    int *world = malloc((size_t)mpi_node_size() * sizeof *world), n = 0;
    if (!world) {
        snprintf(err, errlen, "MPI: out of memory");
        return -1;
    }
    for (int r = 0; r < mpi_node_size(); r++) {
        int wanted = named ? r < 64 && (named >> r) & 1 : !lost[r];
        if (wanted && lost[r]) {
            snprintf(err, errlen, "devices: rank%d did not take an earlier job in time and is "
                     "left out (restart the MPI job to use it again)", r);
            free(world);
            return -1;
        }
        if (wanted)
            world[n++] = r;
    }
    for (int r = mpi_node_size(); named && r < 64; r++)
        if ((named >> r) & 1) {
            snprintf(err, errlen, "devices: rank%d: this MPI job has %d ranks (0..%d)", r,
                     mpi_node_size(), mpi_node_size() - 1);
            free(world);
            return -1;
        }
    *out = world;
    return n;
}

int mpi_job_begin(mpi_job **out, const job_config *cfg, const char *job_json_path,
                  const char *ckpt_dir, char *err, size_t errlen)
{
    size_t len = 0;
    int *world = NULL, n = -1;
    *out = NULL;
    /* The job goes to the other ranks as job.json's text (each parses it). */
    char *text = read_file_text(job_json_path, JOB_TEXT_MAX, &len, err, errlen);
    if (!text)
        return -1;
    if (len > 0)
        n = job_ranks(cfg, &world, err, errlen);
    mpi_pending_drain(); /* what earlier jobs left, completed meanwhile */
    int rc = n > 0 ? hand_off(world, n, text, len, ckpt_dir, cfg->comm.timeout_s, err, errlen) : -1;
    free(text);
    if (rc != 0) {
        free(world);
        return -1;
    }
    mpi_net_log("job %ld: on %d of the %d ranks", job_seq, n, mpi_node_size());
    return (*out = mpi_net_job_new(world, n, job_seq, err, errlen)) ? 0 : -1;
}

int mpi_job_ready(mpi_job *mj, int failed, const char *why, const job_config *cfg,
                  run_devices *where, char *err, size_t errlen)
{
    int replicas = cfg->algorithm.replicas;
    char mine[WHY_MAX];
    if (!failed && replicas < mj->nranks) {
        snprintf(mine, sizeof mine, "algorithm.replicas = %d: across %d MPI ranks a job needs at "
                 "least one replica per rank", replicas, mj->nranks);
        failed = 1;
    } else if (!failed && mj->nranks > 1 &&
               !coupling_runs_across_ranks(coupling_find(cfg->algorithm.name),
                                           where->ngpus > 0)) {
        /* comm_exchange and the peer requests move host vectors only. */
        char names[256];
        coupling_gpu_net_names(1, names, sizeof names);
        snprintf(mine, sizeof mine, "algorithm.name = \"%s\": across MPI ranks on GPUs only "
                 "%s run; the other rules run across ranks on CPUs (docs/mpi.md); name one "
                 "rank in devices (\"rank0:gpu\") to run it there", cfg->algorithm.name, names);
        failed = 1;
    } else if (!failed && where->ngpus > 0 && !PARLE_HAVE_NCCL) {
        snprintf(mine, sizeof mine, "devices: a job on GPUs across MPI ranks needs NCCL, and this "
                 "parled was built without it");
        failed = 1;
    } else {
        snprintf(mine, sizeof mine, "%s", failed ? why : "");
    }
    /* The lowest failing rank's message is everyone's. */
    int first_bad = failed ? mj->me : mj->nranks;
    if (mj->nranks > 1 &&
        MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, mj->coll) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI: the ranks could not agree to start the job");
        mj->broken = 1;
        return -1;
    }
    if (first_bad < mj->nranks) {
        if (mj->nranks > 1 &&
            MPI_Bcast(mine, WHY_MAX, MPI_CHAR, first_bad, mj->coll) != MPI_SUCCESS)
            snprintf(mine, sizeof mine, "(its message was lost)");
        mine[WHY_MAX - 1] = '\0';
        snprintf(err, errlen, "MPI rank %d: %s", mj->world[first_bad], mine);
        return -1;
    }
    /* One comm spans the ranks: on CPUs everywhere or GPUs everywhere (an
     * "auto" job resolves on each rank's machine). */
    int on_gpus[2] = {where->ngpus > 0, -(where->ngpus > 0)};
    if (mj->nranks > 1 &&
        MPI_Allreduce(MPI_IN_PLACE, on_gpus, 2, MPI_INT, MPI_MIN, mj->coll) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI: the ranks could not agree to start the job");
        mj->broken = 1;
        return -1;
    }
    if (on_gpus[0] != -on_gpus[1]) {
        snprintf(err, errlen, "devices: \"%s\": some of the job's MPI ranks have GPUs for it and "
                 "some do not; across ranks a job runs on CPUs everywhere or on GPUs everywhere "
                 "(\"cpu\" or \"gpu\")", cfg->devices);
        return -1;
    }
    /* Contiguous shares, replica 0 (the master's) on rank 0. */
    mj->replicas = replicas;
    where->first = (int)((long)replicas * mj->me / mj->nranks);
    where->count = (int)((long)replicas * (mj->me + 1) / mj->nranks) - where->first;
    mj->net.total = replicas;
    mj->net.procs = mj->nranks;
    mj->net.proc = mj->me;
    mj->net.timeout_s = cfg->comm.timeout_s;
    /* A job on rank 0 alone runs as in one process. */
    where->net = mj->nranks > 1 ? &mj->net : NULL;
    mj->t_ready = comm_now_s();
    return 0;
}


/* A job on a rank > 0: as rank 0's job thread runs it, without the events
 * (replica 0, which reports, is on rank 0). */
static void serve_job(mpi_job *mj, char *text, size_t len, const char *ckpt, int *cores,
                      int ncores)
{
    char err[1024] = "";
    job_config cfg;
    dataset train = {0}, test = {0};
    job_config_defaults(&cfg);
    int gpus[64], ngpus = 0;
    int failed = job_config_parse(text, len, &cfg, err, sizeof err) != 0;
    if (!failed && (ngpus = run_job_gpus(&cfg, gpus, err, sizeof err)) < 0)
        failed = 1;
    if (!failed)
        failed = data_load_job(&cfg, &train, &test, NULL, err, sizeof err) != 0;
    run_devices where = {.cores = cores, .ncores = ncores, .gpus = gpus,
                         .ngpus = ngpus > 0 ? ngpus : 0};
    if (mpi_job_ready(mj, failed, err, &cfg, &where, err, sizeof err) == 0) {
        mpi_net_log("job: replicas %d..%d of %d here", where.first,
                    where.first + where.count - 1, cfg.algorithm.replicas);
        run_hooks hooks = {.checkpoint_dir = ckpt};
        run_result result;
        if (run_job(&cfg, &train, &test, &where, &hooks, &result, err, sizeof err) != 0)
            mpi_net_log("job failed: %s", err);
        else
            mpi_net_log("job ended (%d epochs done)", result.epochs_done);
    } else {
        mpi_net_log("job not started: %s", err);
    }
    dataset_free(&train);
    dataset_free(&test);
}

/* Rank > 0: the next word from rank 0, acknowledged: 0 with the job's text
 * (NULL: stop), checkpoint dir and ranks; 1 when rank 0 called it off (a
 * rank did not take it); -1 when rank 0 is gone. */
static int next_job(char **text, size_t *len, char **ckpt, int **world, int *n, long *seq)
{
    long hdr[4];
    MPI_Request req;
    MPI_Status st;
    int ack = 1, got = 0;
    *text = *ckpt = NULL;
    *world = NULL;
    if (MPI_Irecv(hdr, 4, MPI_LONG, 0, TAG_JOB, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
        wait_polling(&req, NULL) != MPI_SUCCESS ||
        MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD) != MPI_SUCCESS)
        return -1;
    if (hdr[0] <= 0)
        return 0;
    *len = (size_t)hdr[0];
    *n = (int)hdr[2];
    *seq = hdr[3];
    size_t clen = (size_t)hdr[1], size = *len + clen + (size_t)*n * sizeof(int);
    char *buf = malloc(size + 1);
    *ckpt = malloc(clen + 1);
    *world = malloc((size_t)*n * sizeof(int));
    if (!buf || !*ckpt || !*world)
        abort(); /* rank 0 waits for us: nothing sensible is left */
    if (MPI_Irecv(buf, (int)size, MPI_BYTE, 0, TAG_TEXT, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
        wait_polling(&req, &st) != MPI_SUCCESS ||
        MPI_Get_count(&st, MPI_BYTE, &got) != MPI_SUCCESS) {
        free(buf);
        return -1;
    }
    if (got == 0) {
        free(buf);
        return 1;
    }
    memcpy(*ckpt, buf + *len, clen);
    (*ckpt)[clen] = '\0';
    memcpy(*world, buf + *len + clen, (size_t)*n * sizeof(int));
    buf[*len] = '\0';
    *text = buf;
    return 0;
}

int mpi_node_serve(void)
{
    /* Rank 0 decides when to stop (it checkpoints the running job first). */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    int *cores = NULL;
    char err[256];
    int ncores = run_cpu_cores(&cores, err, sizeof err);
    if (ncores < 1) {
        mpi_net_log("%s", err);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    mpi_net_log("serving rank 0 (rank %d of %d, pid %ld, %d cores)", mpi_node_rank(),
                mpi_node_size(), (long)getpid(), ncores);
    for (;;) {
        char *text, *ckpt;
        int *world, n = 0;
        size_t len = 0;
        long seq = 0;
        int rc = next_job(&text, &len, &ckpt, &world, &n, &seq);
        if (rc < 0)
            mpi_net_log("lost rank 0: exiting");
        else if (rc > 0)
            mpi_net_log("job called off by rank 0 (another rank did not take it)");
        else if (text) {
            mpi_job *mj = mpi_net_job_new(world, n, seq, err, sizeof err);
            world = NULL; /* the job's now */
            if (mj)
                serve_job(mj, text, len, ckpt, cores, ncores);
            else
                mpi_net_log("%s", err);
            mpi_job_end(mj);
        }
        free(text);
        free(ckpt);
        free(world);
        if (rc < 0 || (rc == 0 && !text))
            break;
    }
    free(cores);
    mpi_net_log("stopping");
    return finalize();
}

void mpi_node_finalize(void)
{
    int *world = malloc((size_t)mpi_node_size() * sizeof *world), n = 0, gone = 0;
    char err[512];
    for (int r = 0; world && r < mpi_node_size(); r++) {
        gone |= lost[r];
        if (!lost[r])
            world[n++] = r;
    }
    if (world && n > 1 && hand_off(world, n, NULL, 0, NULL, STOP_WAIT_S, err, sizeof err) != 0) {
        fprintf(stderr, "parled: %s\n", err);
        gone = 1;
    }
    free(world);
    /* MPI_Finalize waits for every rank: a stuck one would hold it forever. */
    if (gone) {
        fprintf(stderr, "parled: a rank is stuck or gone: ending every rank with MPI_Abort\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    finalize();
    free(lost);
    free(headers);
    free(ranks);
}
