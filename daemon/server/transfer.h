/* A job's files handed to clients over the socket, in bounded pieces, so a
 * user who cannot read the state dir (another uid, another machine's mount)
 * still gets them: export's master.safetensors as base64 chunks checked by a
 * CRC-32, metrics.jsonl as whole lines (docs/protocol.md, export and
 * metrics). The daemon only reads its own files here; the client writes. */
#ifndef PARLE_TRANSFER_H
#define PARLE_TRANSFER_H

#include <stddef.h>
#include <cjson/cJSON.h>

/* Add "size", "crc32" (of the whole file, 8 hex digits) and "version" (names
 * this exact file: it changes when the file is replaced) to `reply`. The
 * CRC-32 of a version is computed once and remembered. 0, or -1 with a
 * message. */
int transfer_describe(const char *path, cJSON *reply, char *err, size_t errlen);

/* Up to PROTO_CHUNK_MAX bytes of `path` from `offset`: {"version", "offset",
 * "size", "data" (base64), "eof"}. With a non-empty `version` that is not the
 * file's now, NULL with *code ERR_BAD_STATE (the file was replaced: the
 * client starts over); ERR_INTERNAL when it cannot be read. */
cJSON *transfer_chunk(const char *path, long long offset, const char *version, const char **code,
                      char *err, size_t errlen);

/* Whole lines of a text file from byte `offset`, at most PROTO_CHUNK_MAX / 2
 * bytes (so the escaped JSON string stays under the line bound): {"offset",
 * "next" (where the next request starts), "text", "eof"}. A missing file is
 * empty. NULL with *code and a message on an error. */
cJSON *transfer_lines(const char *path, long long offset, const char **code, char *err,
                      size_t errlen);

#endif
