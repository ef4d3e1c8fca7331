/* Internal to the MPI node (mpi_node.c, mpi_net.c; docs/mpi.md): one job's
 * ranks and communicators, and the comm_net over them that its replica 0
 * calls (cross-rank sums, arrival notes, failure notices). mpi_node.c hands
 * jobs off and serves them; this part runs them across ranks. Only built
 * when meson finds MPI. */
#ifndef PARLE_MPI_NET_H
#define PARLE_MPI_NET_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>

#include "comm.h"
#include "mpi_node.h"

/* Message tags, in one place so that those on MPI_COMM_WORLD stay apart:
 * the hand-off's (mpi_node.c) and the tags that create a job's communicators
 * (TAG_GROUP + 3 * (job number % 10000), + 1, + 2). FAIL and ARRIVE go on a
 * job's notice communicator; on its peer communicator a request from the
 * asking process's rank r has tag TAG_ASK + r and its answer TAG_ANSWER + r. */
enum { TAG_FAIL = 1, TAG_ARRIVE = 2, TAG_JOB = 3, TAG_ACK = 4, TAG_TEXT = 5, TAG_PING = 6,
       TAG_PONG = 7, TAG_GROUP = 1000, TAG_ASK = 100, TAG_ANSWER = 300 };

/* MPI_Init_thread gave MPI_THREAD_MULTIPLE (peer requests need it). */
extern int mpi_net_thread_multiple;

struct mpi_job {
    MPI_Comm coll, notice;   /* the job's collectives; notices (MPI_COMM_NULL: rank 0 alone) */
    MPI_Comm peer;           /* the asynchronous rules' peer requests and answers */
    int broken;              /* a collective may be left pending: abandon the comms */
    int failed_sent;
    int nranks, me;          /* the job's ranks, and this one's place among them */
    int *world;              /* each job rank's rank in MPI_COMM_WORLD */
    int replicas;
    long entered;            /* cross-rank sums this rank began */
    long *arrived;           /* per job rank: the sums it said it began */
    long nsums, ngathers, nagree; /* what the syncs cost, logged at the end */
    double floats, in_sums_s, t_ready;
    /* The leader's collectives read and write this buffer, the net's own,
     * never the caller's: one left pending goes to mpi_pending with it. */
    void *stage;
    size_t stage_cap;
    comm_net net;
    /* The thread answering peer requests (mpi_net_serve.c), between the
     * net's serve and unserve. */
    pthread_t server;
    int serving, stop_serving;  /* stop_serving: atomic */
    long asked, answered;       /* peer requests sent and answered here (atomic) */
    comm *served;
    comm_peer_handler answer;
    void *answer_arg;
    size_t max_bytes;
};

/* Every rank of a job: its communicators over its ranks (world ranks
 * `world`, n of them, taken over, freed on failure too), after its
 * description arrived. NULL with a message. mpi_job_end frees it. */
mpi_job *mpi_net_job_new(int *world, int n, long seq, char *err, size_t errlen);

/* "parled[rank R]: ..." on stderr. */
void mpi_net_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sleep ns nanoseconds (< 1 s): lets the core go between MPI_Tests. */
void mpi_net_nap(long ns);

/* A notice from a rank whose part of the job ended: abort c with it. 1 if
 * one came. Answers other ranks' pings meanwhile. Any thread. */
int mpi_net_take_notice(mpi_job *mj, comm *c);

/* The job's rank j holds replicas first_replica(j) .. first_replica(j + 1) - 1. */
long mpi_net_first_replica(const mpi_job *mj, int j);

/* The job rank that holds replica `replica`. */
int mpi_net_rank_of(const mpi_job *mj, int replica);

/* The comm_net's call, serve and unserve (mpi_net_serve.c). */
long mpi_net_call(const comm_net *net, comm *c, int rank, int peer, const void *req, size_t len,
                  void *reply, size_t cap);
int mpi_net_serve(const comm_net *net, comm *c, comm_peer_handler fn, void *arg,
                  size_t max_bytes, char *err, size_t errlen);
void mpi_net_unserve(const comm_net *net);

/* Wait for n requests until `deadline` (comm_now_s). Finished ones become
 * MPI_REQUEST_NULL, so those left name the ranks that did not answer.
 * 0: all done; 1: the deadline passed; -1: an MPI error. */
int mpi_net_wait_until(int n, MPI_Request *reqs, double deadline);

#endif
