#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dataset_free(dataset *d)
{
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

int data_check_stop(const volatile int *stop, char *err, size_t errlen)
{
    if (!data_stop_asked(stop))
        return 0;
    snprintf(err, errlen, DATA_STOPPED);
    return -1;
}
