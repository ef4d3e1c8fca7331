/* Standard base64 (RFC 4648, with '=' padding), for the bytes the protocol
 * carries inside JSON strings (export chunks). Shared by parled and parlectl. */
#ifndef PARLE_BASE64_H
#define PARLE_BASE64_H

#include <stddef.h>

/* Characters base64_encode writes for n bytes, the NUL not counted. */
static inline size_t base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

/* Encode n bytes into out (base64_encoded_len(n) + 1 bytes), NUL-terminated. */
void base64_encode(const unsigned char *in, size_t n, char *out);

/* Decode `len` characters into out (at least len / 4 * 3 bytes). Returns the
 * bytes written, or -1 if the text is not canonical padded base64. */
long base64_decode(const char *in, size_t len, unsigned char *out);

#endif
