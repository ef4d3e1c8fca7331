/* The calling thread's answer to a loader's claim (admit.h). */
#include "admit.h"

static __thread data_admit_fn thread_admit;
static __thread void *thread_admit_user;

void data_admit_with(data_admit_fn admit, void *user)
{
    thread_admit = admit;
    thread_admit_user = user;
}

int data_admit(const data_claim *claim, char *err, size_t errlen)
{
    return thread_admit ? thread_admit(thread_admit_user, claim, err, errlen) : 0;
}
