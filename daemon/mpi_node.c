/* mpi_node.h over MPI (docs/mpi.md).
 *
 * Threads: MPI_THREAD_SERIALIZED. MPI is called by the main thread (init,
 * a worker's wait for jobs, finalize), by rank 0's job thread (a job's
 * start and end) and, while the job runs, only by the process's replica 0
 * (its comm's leader) inside a collective; the job thread is then in
 * run_job's supervise, which makes no MPI call. So calls come from several
 * threads but never at once, which is what SERIALIZED promises.
 *
 * Each job gets two fresh communicators (duplicates of MPI_COMM_WORLD): one
 * for its collectives and one for failure notices. A job that ends early can
 * leave a collective pending that MPI has no way to cancel; its
 * communicators are then abandoned, never freed, so the next job's
 * collectives cannot match the stale ones. */
#include "mpi_node.h"

#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "dataset.h"
#include "fsutil.h"
#include "jobconfig.h"

enum { TAG_FAIL = 1, WHY_MAX = 512, JOB_TEXT_MAX = 1 << 20 };

struct mpi_job {
    MPI_Comm coll, notice;   /* the job's collectives; failure notices */
    int broken;              /* a collective may be left pending: abandon the comms */
    int failed_sent;
    comm_net net;
};

static int node_rank, node_size = 1;

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void log_line(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "parled[rank %d]: %s\n", node_rank, buf);
}

int mpi_node_init(int *argc, char ***argv, char *err, size_t errlen)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "--mpi: MPI_Init_thread failed");
        return -1;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        snprintf(err, errlen, "--mpi: this MPI gives thread level %d; parled needs "
                 "MPI_THREAD_SERIALIZED", provided);
        MPI_Finalize();
        return -1;
    }
    /* Errors come back as values: a peer's failure fails the job, not this
     * process (Open MPI's runtime may still end every rank when one dies). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &node_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &node_size);
    return 0;
}

int mpi_node_rank(void) { return node_rank; }
int mpi_node_size(void) { return node_size; }

static void mpi_message(int rc, char *out, size_t len)
{
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    snprintf(out, len, "%s", text);
}

/* A blocking wait that does not spin a core: poll, then sleep a little. */
static int wait_polling(MPI_Request *req)
{
    for (long spins = 0;; spins++) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        if (spins > 2000)
            nanosleep(&(struct timespec){.tv_nsec = spins > 100000 ? 5000000 : 50000}, NULL);
    }
}

/* A notice from a rank whose part of the job ended: abort our comm with it. */
static int take_notice(mpi_job *mj, comm *c)
{
    int flag = 0, len = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_FAIL, mj->notice, &flag, &st) != MPI_SUCCESS || !flag)
        return 0;
    char why[WHY_MAX] = "";
    MPI_Get_count(&st, MPI_CHAR, &len);
    if (len >= WHY_MAX)
        len = WHY_MAX - 1;
    MPI_Recv(why, WHY_MAX, MPI_CHAR, st.MPI_SOURCE, TAG_FAIL, mj->notice, MPI_STATUS_IGNORE);
    why[len] = '\0';
    comm_abort(c, "MPI rank %d: %s", st.MPI_SOURCE, why);
    return 1;
}

/* Wait for a job collective until it completes, the comm aborts, another
 * rank's notice comes or comm.timeout_s passes. MPI collectives cannot be
 * interrupted, hence the non-blocking one and this poll. */
static int net_wait(mpi_job *mj, comm *c, MPI_Request *req, const char *what)
{
    double deadline = comm_now_s() + mj->net.timeout_s;
    for (long spins = 0;; spins++) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            mpi_message(rc, msg, sizeof msg);
            comm_abort(c, "MPI rank %d: the %s across ranks failed: %s", node_rank, what, msg);
            mj->broken = 1;
            return -1;
        }
        if (done)
            return 0;
        if (take_notice(mj, c) || comm_aborted(c)) {
            mj->broken = 1;
            return -1;
        }
        if (comm_now_s() > deadline) {
            comm_abort(c, "MPI rank %d: the %s across the %d ranks did not complete within "
                       "comm.timeout_s = %g s: another rank stopped, hangs or lost its "
                       "network", node_rank, what, node_size, mj->net.timeout_s);
            mj->broken = 1;
            return -1;
        }
        /* Open MPI progresses only inside MPI calls: test often at first
         * (a large vector moves in many pieces), then let the core go, which
         * matters where ranks share cores (oversubscribed). */
        if (spins > 100)
            nanosleep(&(struct timespec){.tv_nsec = 10000}, NULL);
    }
}

static int net_sum_floats(const comm_net *net, comm *c, float *buf, size_t len)
{
    mpi_job *mj = net->user;
    /* MPI counts are ints: large vectors go in pieces. */
    for (size_t at = 0; at < len; at += (size_t)1 << 30) {
        size_t n = len - at < (size_t)1 << 30 ? len - at : (size_t)1 << 30;
        MPI_Request req;
        if (comm_aborted(c) || MPI_Iallreduce(MPI_IN_PLACE, buf + at, (int)n, MPI_FLOAT, MPI_SUM,
                                              mj->coll, &req) != MPI_SUCCESS) {
            comm_abort(c, "MPI rank %d: could not start the all-reduce across ranks", node_rank);
            return -1;
        }
        if (net_wait(mj, c, &req, "all-reduce") != 0)
            return -1;
    }
    return 0;
}

static int net_sum_doubles(const comm_net *net, comm *c, double *buf, int len)
{
    mpi_job *mj = net->user;
    MPI_Request req;
    if (comm_aborted(c) || MPI_Iallreduce(MPI_IN_PLACE, buf, len, MPI_DOUBLE, MPI_SUM, mj->coll,
                                          &req) != MPI_SUCCESS) {
        comm_abort(c, "MPI rank %d: could not start an agreement across ranks", node_rank);
        return -1;
    }
    return net_wait(mj, c, &req, "agreement");
}

/* Tell every other rank, without waiting long on any: a dead or stuck one
 * must not hold this rank up. */
static void net_fail(const comm_net *net, const char *reason)
{
    mpi_job *mj = net->user;
    if (mj->failed_sent++)
        return;
    mj->broken = 1;
    int len = (int)strnlen(reason, WHY_MAX - 1);
    MPI_Request reqs[node_size];
    int n = 0;
    for (int r = 0; r < node_size; r++)
        if (r != node_rank &&
            MPI_Isend(reason, len, MPI_CHAR, r, TAG_FAIL, mj->notice, &reqs[n]) == MPI_SUCCESS)
            n++;
    double deadline = comm_now_s() + 2.0;
    int done = 0;
    while (n > 0 && !done && comm_now_s() < deadline) {
        if (MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    for (int i = 0; i < n && !done; i++)
        if (reqs[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&reqs[i]);
}

/* Every rank: the job's communicators, after its description arrived. */
static mpi_job *job_new(char *err, size_t errlen)
{
    mpi_job *mj = calloc(1, sizeof *mj);
    if (!mj || MPI_Comm_dup(MPI_COMM_WORLD, &mj->coll) != MPI_SUCCESS ||
        MPI_Comm_dup(MPI_COMM_WORLD, &mj->notice) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI rank %d: could not set up the job's communicators", node_rank);
        free(mj);
        return NULL;
    }
    MPI_Comm_set_errhandler(mj->coll, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(mj->notice, MPI_ERRORS_RETURN);
    mj->net = (comm_net){.sum_floats = net_sum_floats, .sum_doubles = net_sum_doubles,
                         .fail = net_fail, .user = mj};
    return mj;
}

/* Header: the job text's length (0: stop serving) and the checkpoint dir's. */
static int send_job(const char *text, size_t len, const char *ckpt)
{
    long hdr[2] = {(long)len, ckpt ? (long)strlen(ckpt) : 0};
    MPI_Request req;
    if (MPI_Ibcast(hdr, 2, MPI_LONG, 0, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
        wait_polling(&req) != MPI_SUCCESS)
        return -1;
    if (len == 0)
        return 0;
    char *buf = malloc(len + (size_t)hdr[1] + 1);
    if (!buf)
        abort(); /* the others already wait for these bytes */
    memcpy(buf, text, len);
    memcpy(buf + len, ckpt, (size_t)hdr[1]);
    int rc = MPI_Bcast(buf, (int)(len + (size_t)hdr[1]), MPI_CHAR, 0, MPI_COMM_WORLD);
    free(buf);
    return rc == MPI_SUCCESS ? 0 : -1;
}

int mpi_job_begin(mpi_job **out, const char *job_json_path, const char *ckpt_dir, char *err,
                  size_t errlen)
{
    size_t len = 0;
    *out = NULL;
    char *text = read_file_text(job_json_path, JOB_TEXT_MAX, &len, err, errlen);
    if (!text)
        return -1;
    int rc = len > 0 ? send_job(text, len, ckpt_dir) : -1;
    free(text);
    if (rc != 0) {
        snprintf(err, errlen, "MPI: could not send the job to the other ranks");
        return -1;
    }
    return (*out = job_new(err, errlen)) ? 0 : -1;
}

int mpi_job_ready(mpi_job *mj, int failed, const char *why, const job_config *cfg,
                  run_devices *where, char *err, size_t errlen)
{
    int replicas = cfg->algorithm.replicas;
    char mine[WHY_MAX];
    if (!failed && replicas < node_size) {
        snprintf(mine, sizeof mine, "algorithm.replicas = %d: across %d MPI ranks a job needs at "
                 "least one replica per rank", replicas, node_size);
        failed = 1;
    } else {
        snprintf(mine, sizeof mine, "%s", failed ? why : "");
    }
    /* The lowest failing rank's message is everyone's. */
    int first_bad = failed ? node_rank : node_size;
    if (MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, mj->coll) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI: the ranks could not agree to start the job");
        mj->broken = 1;
        return -1;
    }
    if (first_bad < node_size) {
        if (MPI_Bcast(mine, WHY_MAX, MPI_CHAR, first_bad, mj->coll) != MPI_SUCCESS)
            snprintf(mine, sizeof mine, "(its message was lost)");
        mine[WHY_MAX - 1] = '\0';
        snprintf(err, errlen, "MPI rank %d: %s", first_bad, mine);
        return -1;
    }
    /* Contiguous shares, replica 0 (the master's) on rank 0. */
    where->first = (int)((long)replicas * node_rank / node_size);
    where->count = (int)((long)replicas * (node_rank + 1) / node_size) - where->first;
    where->gpus = NULL;
    where->ngpus = 0;
    mj->net.total = replicas;
    mj->net.timeout_s = cfg->comm.timeout_s;
    where->net = &mj->net;
    return 0;
}

void mpi_job_end(mpi_job *mj)
{
    if (!mj)
        return;
    if (!mj->broken) {
        MPI_Comm_free(&mj->coll);
        MPI_Comm_free(&mj->notice);
    }
    free(mj);
}

/* A job on a rank > 0: as rank 0's job thread runs it, without the events
 * (replica 0, which reports, is on rank 0). */
static void serve_job(char *text, size_t len, const char *ckpt, int *cores, int ncores)
{
    char err[1024] = "";
    job_config cfg;
    dataset train = {0}, test = {0};
    mpi_job *mj = job_new(err, sizeof err);
    if (!mj) {
        log_line("%s", err);
        return;
    }
    job_config_defaults(&cfg);
    int failed = job_config_parse(text, len, &cfg, err, sizeof err) != 0;
    if (!failed)
        failed = run_load_data(&cfg, &train, &test, err, sizeof err) != 0;
    run_devices where = {.cores = cores, .ncores = ncores};
    if (mpi_job_ready(mj, failed, err, &cfg, &where, err, sizeof err) == 0) {
        log_line("job: replicas %d..%d of %d here", where.first, where.first + where.count - 1,
                 cfg.algorithm.replicas);
        run_hooks hooks = {.checkpoint_dir = ckpt};
        run_result result;
        if (run_job(&cfg, &train, &test, &where, &hooks, &result, err, sizeof err) != 0)
            log_line("job failed: %s", err);
        else
            log_line("job ended (%d epochs done)", result.epochs_done);
    } else {
        log_line("job not started: %s", err);
    }
    dataset_free(&train);
    dataset_free(&test);
    mpi_job_end(mj);
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
        log_line("%s", err);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    log_line("serving rank 0 (rank %d of %d, pid %ld, %d cores)", node_rank, node_size,
             (long)getpid(), ncores);
    for (;;) {
        long hdr[2];
        MPI_Request req;
        if (MPI_Ibcast(hdr, 2, MPI_LONG, 0, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
            wait_polling(&req) != MPI_SUCCESS) {
            log_line("lost rank 0: exiting");
            break;
        }
        if (hdr[0] <= 0)
            break;
        size_t len = (size_t)hdr[0], clen = (size_t)hdr[1];
        char *buf = malloc(len + clen + 1);
        if (!buf || MPI_Bcast(buf, (int)(len + clen), MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
            log_line("could not receive a job from rank 0: exiting");
            MPI_Abort(MPI_COMM_WORLD, 1);
            return 1;
        }
        char *ckpt = malloc(clen + 1);
        if (!ckpt)
            abort();
        memcpy(ckpt, buf + len, clen);
        ckpt[clen] = '\0';
        buf[len] = '\0';
        serve_job(buf, len, ckpt, cores, ncores);
        free(ckpt);
        free(buf);
    }
    free(cores);
    log_line("stopping");
    MPI_Finalize();
    return 0;
}

void mpi_node_finalize(void)
{
    if (node_size > 1 && send_job(NULL, 0, NULL) != 0)
        fprintf(stderr, "parled: could not tell the other MPI ranks to stop\n");
    MPI_Finalize();
}
