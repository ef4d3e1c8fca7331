/* mpi_net.h: a job's communicators and the comm_net over them (docs/mpi.md).
 *
 * The job gets three communicators over its ranks (MPI_Comm_create_group):
 * one for its collectives, one for failure notices, arrival notes and pings,
 * one for peer requests. A job that ends early can leave a collective pending
 * that MPI has no way to cancel: the collectives run on the job's staging
 * buffer, which then goes with the request to mpi_pending (kept until MPI
 * completes it), and the communicators are abandoned, never freed, so the
 * next job's collectives cannot match the stale ones. */
#include "mpi_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_pending.h"

static void mpi_message(int rc, char *out, size_t len)
{
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    snprintf(out, len, "%s", text);
}

/* The job gave up on *req, which MPI may still complete into the staging
 * buffer: both go to mpi_pending, the job's communicators are abandoned. */
static int give_up(mpi_job *mj, MPI_Request *req)
{
    mpi_pending_keep(req, 1, mj->stage);
    mj->stage = NULL;
    mj->stage_cap = 0;
    __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
    return -1;
}

/* The staging buffer, at least `bytes` long (no collective is pending on it:
 * the leader runs one at a time). NULL with the comm aborted. */
static void *staging(mpi_job *mj, comm *c, size_t bytes)
{
    if (mj->stage_cap < bytes) {
        free(mj->stage);
        mj->stage_cap = 0;
        if (!(mj->stage = malloc(bytes))) {
            comm_abort(c, "MPI rank %d: out of memory for a %zu-byte cross-rank buffer",
                       mpi_node_rank(), bytes);
            return NULL;
        }
        mj->stage_cap = bytes;
    }
    return mj->stage;
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
            return give_up(mj, req);
        }
        if (done)
            return 0;
        if (mpi_net_take_notice(mj, c) || comm_aborted(c))
            return give_up(mj, req);
        if (comm_now_s() > deadline) {
            char who[NOTICE_MAX / 2], silent[NOTICE_MAX / 2] = "";
            mpi_notice_missing(mj, who, sizeof who);
            if (!who[0])
                mpi_notice_silent(mj, silent, sizeof silent);
            if (who[0])
                comm_abort(c, "MPI rank %d: the %s across the job's %d ranks did not complete "
                           "within comm.timeout_s = %g s: %s never began it (stuck, hung, or "
                           "its network is lost)", mpi_node_rank(), what, mj->nranks,
                           mj->net.timeout_s, who);
            else if (silent[0])
                comm_abort(c, "MPI rank %d: the %s across the job's %d ranks did not complete "
                           "within comm.timeout_s = %g s: %s began it, then did not answer "
                           "within %g s (stopped, or its network is lost)", mpi_node_rank(),
                           what, mj->nranks, mj->net.timeout_s, silent, PING_S);
            else
                comm_abort(c, "MPI rank %d: the %s across the job's %d ranks did not complete "
                           "within comm.timeout_s = %g s although every rank began it and "
                           "answers: the network between them stalls", mpi_node_rank(), what,
                           mj->nranks, mj->net.timeout_s);
            return give_up(mj, req);
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
    mpi_notice_arrivals(mj);
    return 0;
}

static int net_sum_floats(const comm_net *net, comm *c, float *buf, size_t len)
{
    mpi_job *mj = net->user;
    double t0 = comm_now_s();
    float *stage = staging(mj, c, len * sizeof *buf);
    if (!stage)
        return -1;
    memcpy(stage, buf, len * sizeof *buf);
    mpi_notice_announce(mj);
    /* MPI counts are ints: large vectors go in pieces. */
    for (size_t at = 0; at < len; at += (size_t)1 << 30) {
        size_t n = len - at < (size_t)1 << 30 ? len - at : (size_t)1 << 30;
        MPI_Request req;
        if (comm_aborted(c) || MPI_Iallreduce(MPI_IN_PLACE, stage + at, (int)n, MPI_FLOAT,
                                              MPI_SUM, mj->coll, &req) != MPI_SUCCESS) {
            comm_abort(c, "MPI rank %d: could not start the all-reduce across ranks",
                       mpi_node_rank());
            return -1;
        }
        if (net_wait(mj, c, &req, "all-reduce") != 0)
            return -1;
    }
    memcpy(buf, stage, len * sizeof *buf);
    mpi_notice_arrivals(mj);
    mj->nsums++;
    mj->floats += (double)len;
    mj->in_sums_s += comm_now_s() - t0;
    return 0;
}

/* Every replica's len values of `type` (`size` bytes each) into all (by
 * replica number), in place: the job's rank j sends those of its own
 * replicas. */
static int net_gather(mpi_job *mj, comm *c, void *all, size_t len, MPI_Datatype type,
                      size_t size, const char *what)
{
    if ((double)mj->replicas * (double)len > (double)INT32_MAX) {
        comm_abort(c, "MPI rank %d: an exchange of %d vectors of %zu values is more than MPI's "
                   "int counts hold", mpi_node_rank(), mj->replicas, len);
        return -1;
    }
    int counts[mj->nranks], displs[mj->nranks];
    for (int j = 0; j < mj->nranks; j++) {
        long first = mpi_net_first_replica(mj, j), next = mpi_net_first_replica(mj, j + 1);
        displs[j] = (int)(first * (long)len);
        counts[j] = (int)((next - first) * (long)len);
    }
    size_t bytes = (size_t)mj->replicas * len * size, mine = (size_t)displs[mj->me] * size;
    char *stage = staging(mj, c, bytes);
    if (!stage)
        return -1;
    memcpy(stage + mine, (char *)all + mine, (size_t)counts[mj->me] * size);
    MPI_Request req;
    mpi_notice_announce(mj);
    int started = !comm_aborted(c) &&
                  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, stage, counts, displs, type,
                                  mj->coll, &req) == MPI_SUCCESS;
    if (net_finish(mj, c, started, &req, what) != 0)
        return -1;
    memcpy(all, stage, bytes);
    return 0;
}

static int net_gather_floats(const comm_net *net, comm *c, float *all, size_t len)
{
    mpi_job *mj = net->user;
    double t0 = comm_now_s();
    if (net_gather(mj, c, all, len, MPI_FLOAT, sizeof *all, "exchange") != 0)
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
    int rc = net_gather(mj, c, all, 1, MPI_DOUBLE, sizeof *all, "exchange of shared numbers");
    mj->in_sums_s += comm_now_s() - t0;
    return rc;
}

static int net_sum_doubles(const comm_net *net, comm *c, double *buf, int len)
{
    mpi_job *mj = net->user;
    double t0 = comm_now_s();
    double *stage = staging(mj, c, (size_t)len * sizeof *buf);
    if (!stage)
        return -1;
    memcpy(stage, buf, (size_t)len * sizeof *buf);
    MPI_Request req;
    mpi_notice_announce(mj);
    int started = !comm_aborted(c) && MPI_Iallreduce(MPI_IN_PLACE, stage, len, MPI_DOUBLE,
                                                     MPI_SUM, mj->coll, &req) == MPI_SUCCESS;
    if (net_finish(mj, c, started, &req, "agreement") != 0)
        return -1;
    memcpy(buf, stage, (size_t)len * sizeof *buf);
    mj->nagree++;
    mj->in_sums_s += comm_now_s() - t0;
    return 0;
}

static int net_gather_int(const comm_net *net, comm *c, int mine, int *all)
{
    mpi_job *mj = net->user;
    int *stage = staging(mj, c, (size_t)(mj->nranks + 1) * sizeof *all);
    if (!stage)
        return -1;
    stage[0] = mine;
    MPI_Request req;
    mpi_notice_announce(mj);
    int started = !comm_aborted(c) && MPI_Iallgather(stage, 1, MPI_INT, stage + 1, 1, MPI_INT,
                                                     mj->coll, &req) == MPI_SUCCESS;
    if (net_finish(mj, c, started, &req, "GPU count") != 0)
        return -1;
    memcpy(all, stage + 1, (size_t)mj->nranks * sizeof *all);
    return 0;
}

static int net_bcast_bytes(const comm_net *net, comm *c, void *buf, int len)
{
    mpi_job *mj = net->user;
    char *stage = staging(mj, c, (size_t)len);
    if (!stage)
        return -1;
    memcpy(stage, buf, (size_t)len);
    MPI_Request req;
    mpi_notice_announce(mj);
    int started = !comm_aborted(c) &&
                  MPI_Ibcast(stage, len, MPI_BYTE, 0, mj->coll, &req) == MPI_SUCCESS;
    if (net_finish(mj, c, started, &req, "broadcast") != 0)
        return -1;
    memcpy(buf, stage, (size_t)len);
    return 0;
}

/* Tell every other rank, without waiting long on any: a dead or stuck one
 * must not hold this rank up. */
static void net_fail(const comm_net *net, const char *reason)
{
    mpi_job *mj = net->user;
    if (mj->failed_sent++)
        return;
    __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
    /* The sends read a copy the node keeps while one is pending. */
    int len = (int)strnlen(reason, NOTICE_MAX - 1);
    char *copy = malloc((size_t)len + 1);
    if (!copy) {
        mpi_net_log("out of memory telling the other ranks: %s", reason);
        return;
    }
    memcpy(copy, reason, (size_t)len);
    copy[len] = '\0';
    MPI_Request reqs[mj->nranks];
    int n = 0;
    for (int j = 0; j < mj->nranks; j++)
        if (j != mj->me &&
            MPI_Isend(copy, len, MPI_CHAR, j, TAG_FAIL, mj->notice, &reqs[n]) == MPI_SUCCESS)
            n++;
    if (mpi_net_wait_until(n, reqs, comm_now_s() + 2.0) != 0)
        mpi_pending_keep(reqs, n, copy);
    else
        free(copy);
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
    if (!__atomic_load_n(&mj->broken, __ATOMIC_RELAXED) && mj->nranks > 1 &&
        (MPI_Comm_free(&mj->coll) != MPI_SUCCESS || MPI_Comm_free(&mj->notice) != MPI_SUCCESS ||
         MPI_Comm_free(&mj->peer) != MPI_SUCCESS))
        mpi_net_log("could not free a job's communicators");
    int left = mpi_pending_drain();
    if (left > 0)
        mpi_net_log("%d MPI operations of failed jobs still pending (their memory kept)", left);
    free(mj->stage); /* nothing pending on it: give_up took it otherwise */
    free(mj->world);
    free(mj->arrived);
    free(mj);
}

int mpi_job_nranks(const mpi_job *mj) { return mj->nranks; }

int mpi_job_rank_of(const mpi_job *mj, int replica) { return mj->world[mpi_net_rank_of(mj, replica)]; }
