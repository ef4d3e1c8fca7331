#include "dataset.h"

#include <stdlib.h>
#include <string.h>

void dataset_free(dataset *d)
{
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}
