/* First come, first served turns on the cores (core_turns.h). */
#include "core_turns.h"

void core_turns_init(core_turns *t, int cores)
{
    t->taken = t->given = 0;
    t->cores = cores > 0 ? cores : 0;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->turn, NULL);
}

void core_turns_destroy(core_turns *t)
{
    pthread_cond_destroy(&t->turn);
    pthread_mutex_destroy(&t->lock);
}

void core_turns_take(core_turns *t)
{
    if (!t->cores)
        return;
    pthread_mutex_lock(&t->lock);
    const unsigned long ticket = t->taken++;
    while (ticket >= t->given + (unsigned long)t->cores)
        pthread_cond_wait(&t->turn, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

void core_turns_give(core_turns *t)
{
    if (!t->cores)
        return;
    pthread_mutex_lock(&t->lock);
    t->given++;
    pthread_mutex_unlock(&t->lock);
    /* Every waiter re-checks: the one whose ticket came up goes. */
    pthread_cond_broadcast(&t->turn);
}
