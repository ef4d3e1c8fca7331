/* Internal to the MPI node (docs/mpi.md): one job's ranks and
 * communicators, and the comm_net over them that its replica 0 calls
 * (cross-rank sums, arrival notes, failure notices). mpi_node.c hands jobs
 * off and serves them; the files below it run them across ranks, each
 * calling only those after it:
 *   mpi_net.c        the job's communicators and collectives (the comm_net);
 *   mpi_net_serve.c  peer requests and their answering thread;
 *   mpi_notice.c     the notice communicator, and which rank holds which replica;
 *   mpi_pending.c    operations given up on, kept until MPI completes them;
 *   mpi_world.c      this process's rank, its log line and its waits.
 * Only built when meson finds MPI. */
#ifndef PARLE_MPI_NET_H
#define PARLE_MPI_NET_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>

#include "comm.h"
#include "mpi_node.h"
#include "mpi_world.h"

/* Message tags, in one place so that those on MPI_COMM_WORLD stay apart:
 * the hand-off's (mpi_node.c) and the tags that create a job's communicators
 * (TAG_GROUP + 3 * (job number % 10000), + 1, + 2). FAIL and ARRIVE go on a
 * job's notice communicator; on its peer communicator a request from the
 * asking process's rank r has tag TAG_ASK + r and its answer TAG_ANSWER + r. */
enum { TAG_FAIL = 1, TAG_ARRIVE = 2, TAG_JOB = 3, TAG_ACK = 4, TAG_TEXT = 5, TAG_PING = 6,
       TAG_PONG = 7, TAG_GROUP = 1000, TAG_ASK = 100, TAG_ANSWER = 300 };

/* A failure notice's text at most, its NUL included. */
enum { NOTICE_MAX = 512 };
/* How long a rank that timed out waits for the others to answer its ping. */
#define PING_S 1.0

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

/* mpi_notice.c. Arrival notes: each rank tells the others that it began
 * its sum number `entered` (announce), and counts those that came
 * (arrivals), so that a rank whose sum does not complete can name those
 * that never came (missing) or, all having come, those that do not answer
 * a ping within PING_S (silent), into out ("rank 1 (replicas 2..3), ..."). */
void mpi_notice_announce(mpi_job *mj);
void mpi_notice_arrivals(mpi_job *mj);
void mpi_notice_missing(mpi_job *mj, char *out, size_t len);
void mpi_notice_silent(mpi_job *mj, char *out, size_t len);

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

#endif
