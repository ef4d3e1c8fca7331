/* Turns on a job's cores for replicas that outnumber them unevenly (3 on 2
 * cores). Left to the kernel, such replicas share cores by time slices, and
 * at each outer iteration's barrier the two that finish first wait for the
 * third, one core idle: ~10% of the Parle LeNet job's wall time on 2 cores.
 * With turns a replica computes a step only while it holds one of `cores`
 * turns, given out first come first served: each step runs on a core of
 * its own, the replicas advance a step at a time in rotation, and at the
 * barrier the last one is at most a step behind. Only the step's compute
 * holds a turn, never a wait on another replica. */
#ifndef PARLE_CORE_TURNS_H
#define PARLE_CORE_TURNS_H

#include <pthread.h>

typedef struct core_turns {
    pthread_mutex_t lock;
    pthread_cond_t turn;
    unsigned long taken, given; /* tickets handed out, turns given back */
    int cores;                  /* 0: no turns, take and give do nothing */
} core_turns;

/* cores 0: no turns (replicas pinned, or on GPUs). */
void core_turns_init(core_turns *t, int cores);
void core_turns_destroy(core_turns *t);
/* Waits for a turn: ticket k runs once k - cores + 1 turns came back. */
void core_turns_take(core_turns *t);
void core_turns_give(core_turns *t);

#endif
