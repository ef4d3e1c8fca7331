/* mpi_net.h: a job's notice communicator (failure notices, arrival notes,
 * pings) and which of its ranks holds which replica. Both the leader's
 * collectives (mpi_net.c) and the answering thread (mpi_net_serve.c) look
 * here for what the other ranks said; this file calls neither. */
#include "mpi_net.h"

#include <stdio.h>
#include <string.h>

/* The empty message `tag` from any rank, taken (matched probe and receive:
 * the leader and the answering thread may both look, and each message
 * reaches one of them): its sender's job rank, or -1 when none is waiting. */
static int take_empty(mpi_job *mj, int tag)
{
    static char none;
    int flag = 0;
    MPI_Status st;
    MPI_Message msg;
    if (MPI_Improbe(MPI_ANY_SOURCE, tag, mj->notice, &flag, &msg, &st) != MPI_SUCCESS || !flag ||
        MPI_Mrecv(&none, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
    return st.MPI_SOURCE;
}

/* An empty message to the job's rank j, left to MPI (static memory). */
static void send_empty(mpi_job *mj, int j, int tag)
{
    static char none;
    MPI_Request req;
    if (MPI_Isend(&none, 0, MPI_BYTE, j, tag, mj->notice, &req) == MPI_SUCCESS)
        MPI_Request_free(&req);
}

/* A rank that timed out asks who is still there: every rank polling a
 * cross-rank wait answers at once. */
static void answer_pings(mpi_job *mj)
{
    for (int from; (from = take_empty(mj, TAG_PING)) >= 0;)
        send_empty(mj, from, TAG_PONG);
}

/* Replicas first..last of the job's rank j, in a message. */

static void replicas_of(const mpi_job *mj, int j, char *out, size_t len)
{
    int first = (int)mpi_net_first_replica(mj, j);
    int last = (int)mpi_net_first_replica(mj, j + 1) - 1;
    snprintf(out, len, first == last ? "replica %d" : "replicas %d..%d", first, last);
}

/* Arrival notes: each rank tells the others that it began its sum number
 * `entered` (an empty message), so that a rank whose sum does not complete can
 * name those that never came (a stuck replica, a hung process) rather than
 * only say that it waited. */
void mpi_notice_announce(mpi_job *mj)
{
    mj->entered++;
    for (int j = 0; j < mj->nranks; j++)
        if (j != mj->me)
            send_empty(mj, j, TAG_ARRIVE);
}

void mpi_notice_arrivals(mpi_job *mj)
{
    for (int from; (from = take_empty(mj, TAG_ARRIVE)) >= 0;)
        mj->arrived[from]++;
}

/* "rank 1 (replicas 2..3)", for each job rank j with !ok[j]. */
static void name_ranks(const mpi_job *mj, const int *ok, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (int j = 0; j < mj->nranks && at < len; j++) {
        if (ok[j])
            continue;
        char reps[64];
        replicas_of(mj, j, reps, sizeof reps);
        at += (size_t)snprintf(out + at, len - at, "%srank %d (%s)", at ? ", " : "",
                               mj->world[j], reps);
    }
}

/* The ranks that have not begun our sum yet. */
void mpi_notice_missing(mpi_job *mj, char *out, size_t len)
{
    int began[mj->nranks];
    mpi_notice_arrivals(mj);
    for (int j = 0; j < mj->nranks; j++)
        began[j] = j == mj->me || mj->arrived[j] >= mj->entered;
    name_ranks(mj, began, out, len);
}

/* Every rank began the sum, yet it did not complete: the ranks that do not
 * answer a ping within PING_S (stopped, or cut off: a rank waiting in the
 * sum polls, and answers at once). */
void mpi_notice_silent(mpi_job *mj, char *out, size_t len)
{
    int answered[mj->nranks], left = mj->nranks - 1;
    for (int j = 0; j < mj->nranks; j++) {
        answered[j] = j == mj->me;
        if (j != mj->me)
            send_empty(mj, j, TAG_PING);
    }
    double until = comm_now_s() + PING_S;
    while (left > 0 && comm_now_s() < until) {
        answer_pings(mj);
        int from = take_empty(mj, TAG_PONG);
        if (from >= 0 && !answered[from])
            answered[from] = 1, left--;
        else if (from < 0)
            mpi_net_nap(1000000);
    }
    name_ranks(mj, answered, out, len);
}

int mpi_net_take_notice(mpi_job *mj, comm *c)
{
    int flag = 0, len = 0;
    MPI_Status st;
    MPI_Message msg;
    answer_pings(mj);
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_FAIL, mj->notice, &flag, &msg, &st) != MPI_SUCCESS ||
        !flag)
        return 0;
    char why[NOTICE_MAX] = "";
    MPI_Get_count(&st, MPI_CHAR, &len);
    if (len < 0 || len >= NOTICE_MAX)
        len = NOTICE_MAX - 1;
    MPI_Mrecv(why, NOTICE_MAX, MPI_CHAR, &msg, MPI_STATUS_IGNORE);
    why[len] = '\0';
    /* A reason from the net already names its rank. */
    if (strncmp(why, "MPI rank ", 9) == 0)
        comm_abort(c, "%s", why);
    else
        comm_abort(c, "MPI rank %d: %s", mj->world[st.MPI_SOURCE], why);
    return 1;
}

long mpi_net_first_replica(const mpi_job *mj, int j)
{
    return (long)mj->replicas * j / mj->nranks;
}

int mpi_net_rank_of(const mpi_job *mj, int replica)
{
    int j = 0;
    while (j + 1 < mj->nranks && mpi_net_first_replica(mj, j + 1) <= replica)
        j++;
    return j;
}
