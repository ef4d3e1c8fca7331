/* A directory tree as a whole: its disk use, and its removal. Neither
 * follows a symbolic link: a link in the tree is counted and removed as a
 * link, never what it points to. */
#ifndef PARLE_FILE_TREE_H
#define PARLE_FILE_TREE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes the tree at `path` takes on disk (st_blocks, as du counts them),
 * the directories included; 0 when it cannot be read. */
uint64_t tree_disk_bytes(const char *path);

/* Remove the tree at `path` and everything below it: 0 (also when it does
 * not exist), or -1 with a message naming what could not be removed (what
 * could, is). */
int remove_tree(const char *path, char *err, size_t errlen);

#endif
