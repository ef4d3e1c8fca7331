/* mpi_net.h: a job's communicators and the comm_net over them (docs/mpi.md).
 *
 * The job gets two communicators over its ranks (MPI_Comm_create_group): one
 * for its collectives, one for failure notices and arrival notes. A job that
 * ends early can leave a collective pending that MPI has no way to cancel; its
 * communicators are then abandoned, never freed, so the next job's
 * collectives cannot match the stale ones. */
#include "mpi_net.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { WHY_MAX = 512 };

int mpi_net_thread_multiple;

void mpi_net_log(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "parled[rank %d]: %s\n", mpi_node_rank(), buf);
}

static void mpi_message(int rc, char *out, size_t len)
{
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    snprintf(out, len, "%s", text);
}

void mpi_net_nap(long ns) { nanosleep(&(struct timespec){.tv_nsec = ns}, NULL); }

int mpi_net_wait_until(int n, MPI_Request *reqs, double deadline)
{
    for (long spins = 0;; spins++) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            int done = 0;
            if (reqs[i] == MPI_REQUEST_NULL)
                continue;
            if (MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                return -1;
            left += !done;
        }
        if (!left)
            return 0;
        if (comm_now_s() > deadline)
            return 1;
        if (spins > 2000)
            mpi_net_nap(1000000);
    }
}

/* Replicas first..last of the job's rank j, in a message. */
static long first_replica(const mpi_job *mj, int j);

static void replicas_of(const mpi_job *mj, int j, char *out, size_t len)
{
    int first = (int)first_replica(mj, j), last = (int)first_replica(mj, j + 1) - 1;
    snprintf(out, len, first == last ? "replica %d" : "replicas %d..%d", first, last);
}

/* Arrival notes: each rank tells the others that it began its sum number
 * `entered` (an empty message), so that a rank whose sum does not complete can
 * name those that never came (a stuck replica, a hung process) rather than
 * only say that it waited. */
static void announce(mpi_job *mj)
{
    static char none;
    mj->entered++;
    for (int j = 0; j < mj->nranks; j++) {
        MPI_Request req;
        if (j != mj->me &&
            MPI_Isend(&none, 0, MPI_BYTE, j, TAG_ARRIVE, mj->notice, &req) == MPI_SUCCESS)
            MPI_Request_free(&req); /* empty: completes without us */
    }
}

static void take_arrivals(mpi_job *mj)
{
    int flag = 0;
    MPI_Status st;
    char none;
    while (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ARRIVE, mj->notice, &flag, &st) == MPI_SUCCESS && flag &&
           MPI_Recv(&none, 0, MPI_BYTE, st.MPI_SOURCE, TAG_ARRIVE, mj->notice,
                    MPI_STATUS_IGNORE) == MPI_SUCCESS)
        mj->arrived[st.MPI_SOURCE]++;
}

/* "rank 1 (replicas 2..3)", for each rank that has not begun our sum yet. */
static void missing_ranks(mpi_job *mj, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    take_arrivals(mj);
    for (int j = 0; j < mj->nranks && at < len; j++) {
        if (j == mj->me || mj->arrived[j] >= mj->entered)
            continue;
        char reps[64];
        replicas_of(mj, j, reps, sizeof reps);
        at += (size_t)snprintf(out + at, len - at, "%srank %d (%s)", at ? ", " : "",
                               mj->world[j], reps);
    }
}

/* Matched probe and receive: the leader and the answering thread may both
 * look for notices, and each notice reaches one of them. */
int mpi_net_take_notice(mpi_job *mj, comm *c)
{
    int flag = 0, len = 0;
    MPI_Status st;
    MPI_Message msg;
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_FAIL, mj->notice, &flag, &msg, &st) != MPI_SUCCESS ||
        !flag)
        return 0;
    char why[WHY_MAX] = "";
    MPI_Get_count(&st, MPI_CHAR, &len);
    if (len < 0 || len >= WHY_MAX)
        len = WHY_MAX - 1;
    MPI_Mrecv(why, WHY_MAX, MPI_CHAR, &msg, MPI_STATUS_IGNORE);
    why[len] = '\0';
    comm_abort(c, "MPI rank %d: %s", mj->world[st.MPI_SOURCE], why);
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
            comm_abort(c, "MPI rank %d: the %s across ranks failed: %s", mpi_node_rank(), what,
                       msg);
            __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
            return -1;
        }
        if (done)
            return 0;
        if (mpi_net_take_notice(mj, c) || comm_aborted(c)) {
            __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
            return -1;
        }
        if (comm_now_s() > deadline) {
            char who[WHY_MAX / 2];
            missing_ranks(mj, who, sizeof who);
            if (who[0])
                comm_abort(c, "MPI rank %d: the %s across the job's %d ranks did not complete "
                           "within comm.timeout_s = %g s: %s never began it (stuck, hung, or "
                           "its network is lost)", mpi_node_rank(), what, mj->nranks,
                           mj->net.timeout_s, who);
            else
                comm_abort(c, "MPI rank %d: the %s across the job's %d ranks did not complete "
                           "within comm.timeout_s = %g s although every rank began it: the "
                           "network between them stalls", mpi_node_rank(), what, mj->nranks,
                           mj->net.timeout_s);
            __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
            return -1;
        }
        /* Open MPI progresses only inside MPI calls: test often at first
         * (a large vector moves in many pieces), then let the core go, which
         * matters where ranks share cores (oversubscribed). */
        if (spins > 100)
            mpi_net_nap(10000);
    }
}

/* A job collective (`started`: its MPI_I* call succeeded) to its end, then
 * the arrival notes that came meanwhile. */
static int net_finish(mpi_job *mj, comm *c, int started, MPI_Request *req, const char *what)
{
    if (!started) {
        comm_abort(c, "MPI rank %d: could not start the %s across ranks", mpi_node_rank(), what);
        return -1;
    }
    if (net_wait(mj, c, req, what) != 0)
        return -1;
    take_arrivals(mj);
    return 0;
}

static int net_sum_floats(const comm_net *net, comm *c, float *buf, size_t len)
{
    mpi_job *mj = net->user;
    double t0 = comm_now_s();
    announce(mj);
    /* MPI counts are ints: large vectors go in pieces. */
    for (size_t at = 0; at < len; at += (size_t)1 << 30) {
        size_t n = len - at < (size_t)1 << 30 ? len - at : (size_t)1 << 30;
        MPI_Request req;
        if (comm_aborted(c) || MPI_Iallreduce(MPI_IN_PLACE, buf + at, (int)n, MPI_FLOAT, MPI_SUM,
                                              mj->coll, &req) != MPI_SUCCESS) {
            comm_abort(c, "MPI rank %d: could not start the all-reduce across ranks",
                       mpi_node_rank());
            return -1;
        }
        if (net_wait(mj, c, &req, "all-reduce") != 0)
            return -1;
    }
    take_arrivals(mj);
    mj->nsums++;
    mj->floats += (double)len;
    mj->in_sums_s += comm_now_s() - t0;
    return 0;
}

/* The job's rank j holds replicas first_replica(j) .. first_replica(j + 1) - 1. */
static long first_replica(const mpi_job *mj, int j) { return (long)mj->replicas * j / mj->nranks; }

/* Every replica's len values of `type` into all (by replica number), in
 * place: the job's rank j sends those of its own replicas. */
static int net_gather(mpi_job *mj, comm *c, void *all, size_t len, MPI_Datatype type,
                      const char *what)
{
    if ((double)mj->replicas * (double)len > (double)INT32_MAX) {
        comm_abort(c, "MPI rank %d: an exchange of %d vectors of %zu values is more than MPI's "
                   "int counts hold", mpi_node_rank(), mj->replicas, len);
        return -1;
    }
    int counts[mj->nranks], displs[mj->nranks];
    for (int j = 0; j < mj->nranks; j++) {
        displs[j] = (int)(first_replica(mj, j) * (long)len);
        counts[j] = (int)((first_replica(mj, j + 1) - first_replica(mj, j)) * (long)len);
    }
    MPI_Request req;
    announce(mj);
    int started = !comm_aborted(c) &&
                  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, type,
                                  mj->coll, &req) == MPI_SUCCESS;
    return net_finish(mj, c, started, &req, what);
}

static int net_gather_floats(const comm_net *net, comm *c, float *all, size_t len)
{
    mpi_job *mj = net->user;
    double t0 = comm_now_s();
    if (net_gather(mj, c, all, len, MPI_FLOAT, "exchange") != 0)
        return -1;
    mj->ngathers++;
    mj->floats += (double)mj->replicas * (double)len;
    mj->in_sums_s += comm_now_s() - t0;
    return 0;
}

static int net_gather_doubles(const comm_net *net, comm *c, double *all)
{
    mpi_job *mj = net->user;
    double t0 = comm_now_s();
    int rc = net_gather(mj, c, all, 1, MPI_DOUBLE, "exchange of shared numbers");
    mj->in_sums_s += comm_now_s() - t0;
    return rc;
}

static int net_sum_doubles(const comm_net *net, comm *c, double *buf, int len)
{
    mpi_job *mj = net->user;
    double t0 = comm_now_s();
    MPI_Request req;
    announce(mj);
    int started = !comm_aborted(c) && MPI_Iallreduce(MPI_IN_PLACE, buf, len, MPI_DOUBLE, MPI_SUM,
                                                     mj->coll, &req) == MPI_SUCCESS;
    if (net_finish(mj, c, started, &req, "agreement") != 0)
        return -1;
    mj->nagree++;
    mj->in_sums_s += comm_now_s() - t0;
    return 0;
}

static int net_gather_int(const comm_net *net, comm *c, int mine, int *all)
{
    mpi_job *mj = net->user;
    MPI_Request req;
    announce(mj);
    int started = !comm_aborted(c) && MPI_Iallgather(&mine, 1, MPI_INT, all, 1, MPI_INT,
                                                     mj->coll, &req) == MPI_SUCCESS;
    return net_finish(mj, c, started, &req, "GPU count");
}

static int net_bcast_bytes(const comm_net *net, comm *c, void *buf, int len)
{
    mpi_job *mj = net->user;
    MPI_Request req;
    announce(mj);
    int started = !comm_aborted(c) &&
                  MPI_Ibcast(buf, len, MPI_BYTE, 0, mj->coll, &req) == MPI_SUCCESS;
    return net_finish(mj, c, started, &req, "NCCL id's broadcast");
}

/* Tell every other rank, without waiting long on any: a dead or stuck one
 * must not hold this rank up. */
static void net_fail(const comm_net *net, const char *reason)
{
    mpi_job *mj = net->user;
    if (mj->failed_sent++)
        return;
    __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
    int len = (int)strnlen(reason, WHY_MAX - 1);
    MPI_Request reqs[mj->nranks];
    int n = 0;
    for (int j = 0; j < mj->nranks; j++)
        if (j != mj->me &&
            MPI_Isend(reason, len, MPI_CHAR, j, TAG_FAIL, mj->notice, &reqs[n]) == MPI_SUCCESS)
            n++;
    if (mpi_net_wait_until(n, reqs, comm_now_s() + 2.0) != 0)
        for (int i = 0; i < n; i++)
            if (reqs[i] != MPI_REQUEST_NULL)
                MPI_Request_free(&reqs[i]);
}

mpi_job *mpi_net_job_new(int *world, int n, long seq, char *err, size_t errlen)
{
    mpi_job *mj = calloc(1, sizeof *mj);
    long *arrived = calloc((size_t)n, sizeof *arrived);
    if (!mj || !arrived) {
        snprintf(err, errlen, "MPI rank %d: out of memory", mpi_node_rank());
        free(mj);
        free(arrived);
        free(world);
        return NULL;
    }
    *mj = (mpi_job){.coll = MPI_COMM_NULL, .notice = MPI_COMM_NULL, .peer = MPI_COMM_NULL,
                    .nranks = n, .world = world, .arrived = arrived};
    for (int j = 0; j < n; j++)
        if (world[j] == mpi_node_rank())
            mj->me = j;
    if (n > 1) {
        /* Collective over the job's ranks only: the others never take part. */
        MPI_Group all, mine;
        int tag = TAG_GROUP + 3 * (int)(seq % 10000), ok;
        ok = MPI_Comm_group(MPI_COMM_WORLD, &all) == MPI_SUCCESS;
        ok = ok && MPI_Group_incl(all, n, world, &mine) == MPI_SUCCESS;
        ok = ok && MPI_Comm_create_group(MPI_COMM_WORLD, mine, tag, &mj->coll) == MPI_SUCCESS &&
             MPI_Comm_create_group(MPI_COMM_WORLD, mine, tag + 1, &mj->notice) == MPI_SUCCESS &&
             MPI_Comm_create_group(MPI_COMM_WORLD, mine, tag + 2, &mj->peer) == MPI_SUCCESS;
        if (!ok) {
            snprintf(err, errlen, "MPI rank %d: could not set up the job's communicators",
                     mpi_node_rank());
            __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
            mpi_job_end(mj);
            return NULL;
        }
        MPI_Group_free(&mine);
        MPI_Group_free(&all);
        MPI_Comm_set_errhandler(mj->coll, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(mj->notice, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(mj->peer, MPI_ERRORS_RETURN);
    }
    mj->net = (comm_net){.sum_floats = net_sum_floats, .sum_doubles = net_sum_doubles,
                         .gather_int = net_gather_int, .bcast_bytes = net_bcast_bytes,
                         .gather_floats = net_gather_floats,
                         .gather_doubles = net_gather_doubles, .call = mpi_net_call,
                         .serve = mpi_net_serve, .unserve = mpi_net_unserve,
                         .fail = net_fail, .user = mj};
    return mj;
}

void mpi_job_end(mpi_job *mj)
{
    if (!mj)
        return;
    if (mj->nsums + mj->ngathers > 0) {
        double t = comm_now_s() - mj->t_ready;
        mpi_net_log("job sync: %ld all-reduces and %ld exchanges moving %.0f floats (%.3f MB) in "
                    "all, %ld agreements; %.3f s of %.3f s in them (%.1f%%)", mj->nsums,
                    mj->ngathers, mj->floats, mj->floats * 4e-6, mj->nagree, mj->in_sums_s, t,
                    t > 0 ? 100.0 * mj->in_sums_s / t : 0.0);
    }
    if (mj->asked + mj->answered > 0)
        mpi_net_log("job peers: %ld requests sent, %ld answered", mj->asked, mj->answered);
    if (!__atomic_load_n(&mj->broken, __ATOMIC_RELAXED) && mj->nranks > 1) {
        MPI_Comm_free(&mj->coll);
        MPI_Comm_free(&mj->notice);
        MPI_Comm_free(&mj->peer);
    }
    free(mj->world);
    free(mj->arrived);
    free(mj);
}

int mpi_job_nranks(const mpi_job *mj) { return mj->nranks; }

int mpi_net_rank_of(const mpi_job *mj, int replica)
{
    int j = 0;
    while (j + 1 < mj->nranks && first_replica(mj, j + 1) <= replica)
        j++;
    return j;
}

int mpi_job_rank_of(const mpi_job *mj, int replica) { return mj->world[mpi_net_rank_of(mj, replica)]; }
