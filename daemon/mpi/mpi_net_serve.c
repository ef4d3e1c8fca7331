/* mpi_net.h: peer requests across ranks for the asynchronous rules
 * (comm_peer_net.c; docs/mpi.md "Asynchronous rules"). A replica thread
 * sends its request to the rank holding the peer and waits for the answer;
 * each rank's answering thread, started by serve, receives requests on the
 * job's peer communicator and answers them with comm_peer's handler. Chosen
 * over one-sided MPI: Open MPI over TCP moves a passive-target MPI_Get only
 * while the target is inside MPI, which a replica busy computing is not; a
 * thread of its own answers at once and takes the locks the rules already
 * use. It also watches the job's notices, so that a rank whose replicas
 * only gossip learns of another's failure without waiting for the end of
 * the pass.
 *
 * A request or an answer left pending (the comm aborted, the deadline
 * passed) goes with its buffer to mpi_pending, which frees the buffer once
 * MPI completes it, and the job's communicators are abandoned (mj->broken). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_peer.h"
#include "mpi_net.h"
#include "mpi_pending.h"

/* A call gave up on its request and answer: they keep their buffer `mem`. */
static long give_up_call(mpi_job *mj, MPI_Request *reqs, int n, void *mem)
{
    __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
    mpi_pending_keep(reqs, n, mem);
    return -1;
}

long mpi_net_call(const comm_net *net, comm *c, int rank, int peer, const void *req, size_t len,
                  void *reply, size_t cap)
{
    mpi_job *mj = net->user;
    int to = mpi_net_rank_of(mj, peer);
    /* The request, then room for the answer: one buffer that MPI reads and
     * writes, kept for it if this call gives up. */
    char *mem = len + cap <= INT32_MAX && rank < PEER_MAX ? malloc(len + cap + 1) : NULL;
    if (!mem) {
        comm_abort(c, "MPI rank %d: cannot send a peer request of %zu bytes", mpi_node_rank(),
                   len);
        return -1;
    }
    char *out = mem, *in = mem + len;
    memcpy(out, req, len);
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[2];
    if (MPI_Irecv(in, (int)cap, MPI_BYTE, to, TAG_ANSWER + rank, mj->peer, &reqs[0]) !=
            MPI_SUCCESS ||
        MPI_Isend(out, (int)len, MPI_BYTE, to, TAG_ASK + rank, mj->peer, &reqs[1]) !=
            MPI_SUCCESS) {
        comm_abort(c, "MPI rank %d: could not send a peer request to rank %d", mpi_node_rank(),
                   mj->world[to]);
        return give_up_call(mj, reqs, 2, mem);
    }
    double deadline = comm_now_s() + net->timeout_s;
    for (long spins = 0;; spins++) {
        int done = 0;
        if (MPI_Testall(2, reqs, &done, st) != MPI_SUCCESS) {
            comm_abort(c, "MPI rank %d: a peer request to rank %d failed", mpi_node_rank(),
                       mj->world[to]);
            return give_up_call(mj, reqs, 2, mem);
        }
        if (done)
            break;
        if (mpi_net_take_notice(mj, c) || comm_aborted(c))
            return give_up_call(mj, reqs, 2, mem);
        if (comm_now_s() > deadline) {
            comm_abort(c, "MPI rank %d: replica %d's rank %d did not answer replica %d's peer "
                       "request within comm.timeout_s = %g s (stuck, hung, or its network is "
                       "lost)", mpi_node_rank(), peer, mj->world[to], c->first + rank,
                       net->timeout_s);
            return give_up_call(mj, reqs, 2, mem);
        }
        if (spins > 100)
            mpi_net_nap(20000);
    }
    int got = 0;
    if (MPI_Get_count(&st[0], MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED)
        got = 0;
    __atomic_add_fetch(&mj->asked, 1, __ATOMIC_RELAXED);
    if (got > 0)
        memcpy(reply, in, (size_t)got);
    free(mem);
    return got;
}

/* Answer one request; its answer's buffer is kept by MPI if the asker does
 * not take it in time (then a new one is returned). */
static void *answer_one(mpi_job *mj, MPI_Message *msg, const MPI_Status *st, void *out)
{
    int len = 0;
    if (MPI_Get_count(st, MPI_BYTE, &len) != MPI_SUCCESS || len == MPI_UNDEFINED)
        len = 0;
    void *in = malloc(len > 0 ? (size_t)len : 1);
    MPI_Request recv;
    if (!in || MPI_Imrecv(in, len, MPI_BYTE, msg, &recv) != MPI_SUCCESS) {
        free(in);
        comm_abort(mj->served, "MPI rank %d: could not receive a peer request",
                   mpi_node_rank());
        return out;
    }
    /* A large request comes after its header: an asker stopped or cut off
     * meanwhile must not hold this thread (unserve joins it). */
    int rc = mpi_net_wait_until(1, &recv, comm_now_s() + mj->net.timeout_s);
    if (rc != 0) {
        __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
        mpi_pending_keep(&recv, 1, in);
        comm_abort(mj->served, "MPI rank %d: rank %d's replica %ld sent a peer request that "
                   "did not arrive whole %s", mpi_node_rank(), mj->world[st->MPI_SOURCE],
                   mpi_net_first_replica(mj, st->MPI_SOURCE) + st->MPI_TAG - TAG_ASK,
                   rc > 0 ? "within comm.timeout_s (stopped, or its network is lost)"
                          : "(an MPI error)");
        return out;
    }
    /* Answers meet receives posted before their requests: whatever is
     * probed here is a request, its tag naming the asker's rank. */
    int who = st->MPI_TAG - TAG_ASK;
    if (who < 0 || who >= PEER_MAX) {
        free(in);
        return out;
    }
    size_t n = mj->answer(mj->answer_arg, in, (size_t)len, out, mj->max_bytes);
    free(in);
    MPI_Request req;
    if (MPI_Isend(out, (int)n, MPI_BYTE, st->MPI_SOURCE, TAG_ANSWER + who, mj->peer, &req) !=
        MPI_SUCCESS) {
        comm_abort(mj->served, "MPI rank %d: could not answer a peer request of rank %d",
                   mpi_node_rank(), mj->world[st->MPI_SOURCE]);
        return out;
    }
    __atomic_add_fetch(&mj->answered, 1, __ATOMIC_RELAXED);
    /* The asker's receive is posted before its request: this is quick
     * unless it gave up or its rank is gone. */
    if (mpi_net_wait_until(1, &req, comm_now_s() + mj->net.timeout_s) != 0) {
        __atomic_store_n(&mj->broken, 1, __ATOMIC_RELAXED);
        mpi_pending_keep(&req, 1, out);
        return malloc(mj->max_bytes);
    }
    return out;
}

static void *serve_main(void *arg)
{
    mpi_job *mj = arg;
    void *out = malloc(mj->max_bytes);
    long idle = 0;
    while (out && !__atomic_load_n(&mj->stop_serving, __ATOMIC_ACQUIRE)) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, mj->peer, &flag, &msg, &st) != MPI_SUCCESS) {
            comm_abort(mj->served, "MPI rank %d: peer requests: MPI_Improbe failed",
                       mpi_node_rank());
            break;
        }
        if (flag) {
            idle = 0;
            out = answer_one(mj, &msg, &st, out);
            continue;
        }
        mpi_net_take_notice(mj, mj->served);
        /* Quick answers while requests come; the core back when none do. */
        mpi_net_nap(++idle < 200 ? 20000 : 500000);
    }
    if (!out)
        comm_abort(mj->served, "MPI rank %d: out of memory answering peer requests",
                   mpi_node_rank());
    free(out);
    return NULL;
}

int mpi_net_serve(const comm_net *net, comm *c, comm_peer_handler fn, void *arg,
                  size_t max_bytes, char *err, size_t errlen)
{
    mpi_job *mj = net->user;
    if (!mpi_net_thread_multiple) {
        snprintf(err, errlen, "MPI rank %d: this MPI library does not give "
                 "MPI_THREAD_MULTIPLE, which the asynchronous rules need across ranks",
                 mpi_node_rank());
        return -1;
    }
    if (max_bytes > INT32_MAX) {
        snprintf(err, errlen, "MPI rank %d: peer requests of %zu bytes are more than MPI's int "
                 "counts hold", mpi_node_rank(), max_bytes);
        return -1;
    }
    mj->served = c, mj->answer = fn, mj->answer_arg = arg, mj->max_bytes = max_bytes;
    __atomic_store_n(&mj->stop_serving, 0, __ATOMIC_RELEASE);
    if (mj->nranks > 1 && pthread_create(&mj->server, NULL, serve_main, mj) != 0) {
        snprintf(err, errlen, "MPI rank %d: could not start the thread answering peer requests",
                 mpi_node_rank());
        return -1;
    }
    mj->serving = mj->nranks > 1;
    return 0;
}

void mpi_net_unserve(const comm_net *net)
{
    mpi_job *mj = net->user;
    if (!mj->serving)
        return;
    __atomic_store_n(&mj->stop_serving, 1, __ATOMIC_RELEASE);
    pthread_join(mj->server, NULL);
    mj->serving = 0;
}
