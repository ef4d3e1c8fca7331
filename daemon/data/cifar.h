/* CIFAR-10 and CIFAR-100 in their binary distribution formats. */
#ifndef PARLE_CIFAR_H
#define PARLE_CIFAR_H

#include "dataset.h"

/* Loads the training and test sets from `root` or from its
 * cifar-10-batches-bin/ (cifar-100-binary/) subdirectory.
 *   CIFAR-10:  data_batch_1.bin .. data_batch_5.bin and test_batch.bin,
 *              records of 1 label byte + 3072 pixel bytes;
 *   CIFAR-100: train.bin and test.bin, records of a coarse and a fine label
 *              byte + 3072 pixel bytes (the fine label is kept).
 * Pixels are 3 x 32 x 32, channel-major (R, G, B planes), scaled to [0, 1].
 * `classes` is 10 or 100; a limit > 0 keeps only the first `limit` examples
 * (the files are still all checked for presence and size). Errors name the
 * file and what is wrong (missing, truncated, label out of range). */
int cifar_load_split(dataset *train, dataset *test, const char *root, int classes, int train_limit,
                     int test_limit, const volatile int *stop, char *err, size_t errlen);

#endif
