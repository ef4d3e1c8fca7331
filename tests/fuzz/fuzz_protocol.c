/* libFuzzer harness for parled's protocol layer: bytes go through the line
 * framer in chunks (sizes taken from the input), each complete line through
 * the request parser, and an error reply is built for each failure, as the
 * server does; an error message holds no control byte. Build: clang -fsanitize=fuzzer,address,undefined. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "protocol.h"

/* A small limit so that the over-limit path is reached often. */
#define FUZZ_MAX_LINE 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t step = 1 + data[0] % 64; /* the chunk size of each push */
    data++;
    size--;
    proto_framer f;
    proto_framer_init(&f, FUZZ_MAX_LINE);
    for (size_t off = 0; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        if (proto_framer_push(&f, (const char *)data + off, n) != 0)
            break;
        char *line;
        size_t len;
        int r;
        while ((r = proto_framer_next(&f, &line, &len)) == 1) {
            proto_request req;
            const char *code;
            char msg[512];
            if (proto_parse_request(line, len, &req, &code, msg, sizeof(msg)) == 0) {
                if ((int)req.op < 0 || (int)req.op >= OP_COUNT || !proto_op_name(req.op))
                    abort();
                proto_request_free(&req);
            } else {
                /* What the request sent is quoted with control bytes as '?':
                 * an error message never carries one to a log or terminal. */
                for (const char *c = msg; *c; c++)
                    if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        abort();
                free(proto_reply_error(code, msg));
            }
        }
        if (r < 0) /* the server closes the connection here */
            break;
    }
    proto_framer_free(&f);
    return 0;
}
