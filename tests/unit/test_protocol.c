/* The protocol layer alone: request parsing (every op, every kind of bad
 * request), reply lines, and the bounded line framer under random chunking. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "protocol.h"

static int parse(const char *line, proto_request *req, const char **code, char *msg, size_t len)
{
    return proto_parse_request(line, strlen(line), req, code, msg, len);
}

static void test_valid_requests(void)
{
    static const struct {
        const char *line;
        enum proto_op op;
        const char *id;
    } cases[] = {
        {"{\"op\":\"submit\",\"job\":{\"epochs\":1}}", OP_SUBMIT, ""},
        {"{\"op\":\"status\"}", OP_STATUS, ""},
        {"{\"op\":\"status\",\"id\":\"j0042\"}", OP_STATUS, "j0042"},
        {"{\"op\":\"list\"}", OP_LIST, ""},
        {"{\"op\":\"list\",\"limit\":1000,\"before\":\"j0101\",\"state\":\"held\"}", OP_LIST,
         ""},
        {" {\"id\":\"j1\",\"op\":\"watch\"} \t", OP_WATCH, "j1"},
        {"{\"op\":\"logs\",\"id\":\"j0001\",\"follow\":true}", OP_LOGS, "j0001"},
        {"{\"op\":\"cancel\",\"id\":\"a-b_C9\"}", OP_CANCEL, "a-b_C9"},
        {"{\"op\":\"resume\",\"id\":\"j0007\",\"from_scratch\":true}", OP_RESUME, "j0007"},
        {"{\"op\":\"export\",\"id\":\"j0001\"}", OP_EXPORT, "j0001"},
        {"{\"op\":\"devices\"}", OP_DEVICES, ""},
        {"{\"op\":\"version\"}", OP_VERSION, ""},
        {"{\"op\":\"shutdown\"}", OP_SHUTDOWN, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        proto_request req;
        const char *code = NULL;
        char msg[256] = "";
        int rc = parse(cases[i].line, &req, &code, msg, sizeof(msg));
        CHECK(rc == 0, "%s: %s", cases[i].line, msg);
        if (rc != 0)
            continue;
        CHECK(req.op == cases[i].op, "%s: op %d", cases[i].line, (int)req.op);
        CHECK(strcmp(req.id, cases[i].id) == 0, "%s: id '%s'", cases[i].line, req.id);
        CHECK(strcmp(proto_op_name(req.op), "") != 0, "op name");
        if (req.op == OP_SUBMIT)
            CHECK(cJSON_IsObject(req.job) &&
                      cJSON_GetObjectItem(req.job, "epochs")->valuedouble == 1,
                  "submit keeps its job");
        if (req.op == OP_LOGS)
            CHECK(req.follow == 1, "logs follow");
        if (req.op == OP_RESUME)
            CHECK(req.from_scratch == 1 && req.follow == 0, "resume from_scratch");
        if (req.op == OP_LIST && strstr(cases[i].line, "limit"))
            CHECK(req.limit == 1000 && !strcmp(req.before, "j0101") &&
                      !strcmp(req.state, "held"), "list's page");
        else if (req.op == OP_LIST)
            CHECK(req.limit == 0 && !req.before[0] && !req.state[0], "list's defaults");
        proto_request_free(&req);
    }
}

static void test_bad_requests(void)
{
    static const struct {
        const char *line, *code, *text;
    } cases[] = {
        {"{\"op\":\"version\"", ERR_BAD_JSON, "not valid JSON"},
        {"garbage", ERR_BAD_JSON, "not valid JSON"},
        {"{\"op\":\"version\"} x", ERR_BAD_JSON, "after its JSON"},
        {"{\"op\":\"version\"}{}", ERR_BAD_JSON, "after its JSON"},
        {"[]", ERR_BAD_REQUEST, "JSON object"},
        {"42", ERR_BAD_REQUEST, "JSON object"},
        {"{}", ERR_BAD_REQUEST, "op: missing"},
        {"{\"op\":null}", ERR_BAD_REQUEST, "op: must be a string"},
        {"{\"op\":[\"list\"]}", ERR_BAD_REQUEST, "op: must be a string"},
        {"{\"op\":\"List\"}", ERR_UNKNOWN_OP, "unknown op \"List\""},
        {"{\"op\":\"\"}", ERR_UNKNOWN_OP, "unknown op"},
        {"{\"op\":\"list\",\"id\":\"j1\"}", ERR_BAD_REQUEST, "id: unknown field for op \"list\""},
        {"{\"op\":\"list\",\"limit\":0}", ERR_BAD_REQUEST, "limit: must be a whole number"},
        {"{\"op\":\"list\",\"limit\":1001}", ERR_BAD_REQUEST, "limit: must be a whole number"},
        {"{\"op\":\"list\",\"limit\":2.5}", ERR_BAD_REQUEST, "limit: must be a whole number"},
        {"{\"op\":\"list\",\"limit\":\"10\"}", ERR_BAD_REQUEST, "limit: must be a whole"},
        {"{\"op\":\"list\",\"before\":\"../j1\"}", ERR_BAD_REQUEST, "before: must be a job id"},
        {"{\"op\":\"list\",\"state\":\"sleeping\"}", ERR_BAD_REQUEST, "state: must be queued"},
        {"{\"op\":\"status\",\"limit\":5}", ERR_BAD_REQUEST, "limit: unknown field"},
        {"{\"op\":\"version\",\"verbose\":true}", ERR_BAD_REQUEST, "verbose: unknown field"},
        {"{\"op\":\"watch\"}", ERR_BAD_REQUEST, "id: missing"},
        {"{\"op\":\"cancel\",\"id\":1}", ERR_BAD_REQUEST, "id: must be a string"},
        {"{\"op\":\"cancel\",\"id\":\"\"}", ERR_BAD_REQUEST, "id: not a job id"},
        {"{\"op\":\"logs\",\"id\":\"../x\"}", ERR_BAD_REQUEST, "id: not a job id"},
        {"{\"op\":\"logs\",\"id\":\"j1/..\"}", ERR_BAD_REQUEST, "id: not a job id"},
        {"{\"op\":\"logs\",\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", ERR_BAD_REQUEST,
         "id: not a job id"},
        {"{\"op\":\"logs\",\"id\":\"j1\",\"follow\":1}", ERR_BAD_REQUEST, "follow: must be true"},
        {"{\"op\":\"resume\",\"id\":\"j1\",\"from_scratch\":1}", ERR_BAD_REQUEST,
         "from_scratch: must be true"},
        {"{\"op\":\"cancel\",\"id\":\"j1\",\"from_scratch\":true}", ERR_BAD_REQUEST,
         "from_scratch: unknown field for op \"cancel\""},
        {"{\"op\":\"resume\"}", ERR_BAD_REQUEST, "id: missing"},
        {"{\"op\":\"submit\"}", ERR_BAD_REQUEST, "job: missing"},
        {"{\"op\":\"submit\",\"job\":\"x.json\"}", ERR_BAD_REQUEST, "job: must be an object"},
        {"{\"op\":\"export\",\"id\":\"j1\",\"path\":\"/x\"}", ERR_BAD_REQUEST, "path: unknown field"},
        {"{\"op\":\"export\"}", ERR_BAD_REQUEST, "id: missing"},
        /* Each field once: the first "op" and the last "id" would both be read. */
        {"{\"op\":\"list\",\"op\":\"shutdown\"}", ERR_BAD_REQUEST, "op: given twice"},
        {"{\"op\":\"cancel\",\"id\":\"j1\",\"id\":\"j2\"}", ERR_BAD_REQUEST,
         "id: given twice"},
        {"{\"op\":\"logs\",\"id\":\"j1\",\"follow\":true,\"follow\":false}", ERR_BAD_REQUEST,
         "follow: given twice"},
        /* What a request sent is quoted printable: control bytes as '?'. */
        {"{\"op\":\"li\\u001b[2Jst\"}", ERR_UNKNOWN_OP, "unknown op \"li?[2Jst\""},
        {"{\"op\":\"list\",\"a\\nb\\u0007\":1}", ERR_BAD_REQUEST, "a?b?: unknown field"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        proto_request req;
        const char *code = NULL;
        char msg[256] = "";
        int rc = parse(cases[i].line, &req, &code, msg, sizeof(msg));
        CHECK(rc == -1, "%s was accepted", cases[i].line);
        if (rc == 0) {
            proto_request_free(&req);
            continue;
        }
        CHECK(code && strcmp(code, cases[i].code) == 0, "%s: code %s, want %s", cases[i].line,
              code ? code : "(null)", cases[i].code);
        CHECK(strstr(msg, cases[i].text) != NULL, "%s: message '%s' lacks '%s'", cases[i].line,
              msg, cases[i].text);
        CHECK(req.job == NULL, "%s: nothing owned after a failure",
              cases[i].line);
    }
    /* A NUL inside the line is not JSON text, whatever follows it. */
    const char nul[] = "{\"op\":\"version\"}\0tail";
    proto_request req;
    const char *code = NULL;
    char msg[256];
    CHECK(proto_parse_request(nul, sizeof(nul) - 1, &req, &code, msg, sizeof(msg)) == -1 &&
              strcmp(code, ERR_BAD_JSON) == 0,
          "a NUL byte");
    /* The length bounds the parse: a valid prefix cut short is bad JSON. */
    const char *full = "{\"op\":\"version\"}";
    CHECK(proto_parse_request(full, strlen(full) - 1, &req, &code, msg, sizeof(msg)) == -1,
          "parse past len");
    /* A tiny message buffer truncates, never overflows. */
    char small[8];
    CHECK(parse("{\"op\":\"nope-nope-nope\"}", &req, &code, small, sizeof(small)) == -1 &&
              strlen(small) == sizeof(small) - 1,
          "small buffer");
}

static void test_replies(void)
{
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "id", "j0007");
    cJSON_AddNumberToObject(body, "n", 3);
    char *line = proto_reply_ok(body);
    CHECK(line && strcmp(line, "{\"ok\":true,\"id\":\"j0007\",\"n\":3}\n") == 0, "ok reply: %s",
          line ? line : "(null)");
    free(line);
    line = proto_reply_ok(NULL);
    CHECK(line && strcmp(line, "{\"ok\":true}\n") == 0, "bare ok: %s", line ? line : "(null)");
    free(line);
    /* A message with quotes, newlines and control bytes stays one line. */
    const char *message = "a \"b\"\nc\td\x01 e: \\";
    line = proto_reply_error(ERR_INVALID_JOB, message);
    CHECK(line != NULL, "error reply");
    if (!line)
        return;
    size_t n = strlen(line);
    CHECK(n > 0 && line[n - 1] == '\n' && memchr(line, '\n', n - 1) == NULL, "one line: %s", line);
    CHECK(strncmp(line, "{\"ok\":false,\"error\":{\"code\":\"invalid_job\",\"message\":", 52) == 0,
          "error shape: %s", line);
    cJSON *back = cJSON_Parse(line);
    const cJSON *e = cJSON_GetObjectItem(back, "error");
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(back, "ok")), "ok false");
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")), message) == 0,
          "message round trip");
    cJSON_Delete(back);
    free(line);
}

/* Random lines of printable bytes through the framer in random chunks come
 * out whole, in order; empty lines and a CR before LF disappear. */
static void test_framer_chunking(void)
{
    enum { NLINES = 300, MAXLEN = 3000 };
    for (int round = 0; round < 20; round++) {
        char **lines = calloc(NLINES, sizeof(char *));
        size_t total = 0;
        char *stream = malloc(NLINES * (MAXLEN + 3));
        for (int i = 0; i < NLINES; i++) {
            int len = (int)test_uniform(0, MAXLEN);
            lines[i] = malloc((size_t)len + 1);
            for (int k = 0; k < len; k++)
                lines[i][k] = (char)test_uniform(32, 127);
            lines[i][len] = '\0';
            memcpy(stream + total, lines[i], (size_t)len);
            total += (size_t)len;
            if (test_uniform(0, 1) < 0.3)
                stream[total++] = '\r';
            stream[total++] = '\n';
        }
        proto_framer f;
        proto_framer_init(&f, MAXLEN);
        int next = 0, bad = 0;
        size_t off = 0;
        while (off < total) {
            size_t chunk = (size_t)test_uniform(1, test_uniform(0, 1) < 0.5 ? 16 : 9000);
            if (chunk > total - off)
                chunk = total - off;
            CHECK(proto_framer_push(&f, stream + off, chunk) == 0, "push");
            off += chunk;
            char *line;
            size_t len;
            int r;
            while ((r = proto_framer_next(&f, &line, &len)) == 1) {
                while (next < NLINES && lines[next][0] == '\0')
                    next++; /* empty lines are skipped */
                if (next >= NLINES || len != strlen(lines[next]) ||
                    memcmp(line, lines[next], len) != 0 || line[len] != '\0')
                    bad++;
                next++;
            }
            CHECK(r == 0, "framer error %d on lines within the limit", r);
        }
        while (next < NLINES && lines[next][0] == '\0')
            next++;
        CHECK(bad == 0 && next == NLINES, "round %d: %d bad lines, %d of %d seen", round, bad,
              next, NLINES);
        proto_framer_free(&f);
        for (int i = 0; i < NLINES; i++)
            free(lines[i]);
        free(lines);
        free(stream);
    }
}

static void test_framer_limit(void)
{
    size_t max = (size_t)test_uniform(10, 5000);
    char *buf = malloc(max + 2);
    memset(buf, 'x', max + 2);
    char *line;
    size_t len;
    proto_framer f;

    /* Exactly max bytes then '\n': a line. */
    proto_framer_init(&f, max);
    buf[max] = '\n';
    proto_framer_push(&f, buf, max + 1);
    CHECK(proto_framer_next(&f, &line, &len) == 1 && len == max, "a line of exactly max");
    CHECK(proto_framer_next(&f, &line, &len) == 0, "nothing more");
    proto_framer_free(&f);

    /* max + 1 bytes and no '\n' yet: over the limit before the line ends. */
    proto_framer_init(&f, max);
    size_t half = max / 2;
    proto_framer_push(&f, buf, half);
    CHECK(proto_framer_next(&f, &line, &len) == 0, "a partial line waits");
    proto_framer_push(&f, buf, max + 1 - half);
    CHECK(proto_framer_next(&f, &line, &len) == -1, "pending line over the limit");
    proto_framer_free(&f);

    /* max + 1 bytes then '\n' in one push, after a good line. */
    proto_framer_init(&f, max);
    proto_framer_push(&f, "{}\n", 3);
    buf[max] = 'x';
    buf[max + 1] = '\n';
    proto_framer_push(&f, buf, max + 2);
    CHECK(proto_framer_next(&f, &line, &len) == 1 && len == 2, "the good line first");
    CHECK(proto_framer_next(&f, &line, &len) == -1, "a complete line over the limit");
    proto_framer_free(&f);
    free(buf);
}

/* Random bytes and random mutations of valid requests: never a crash or a
 * leak (under ASan), and an accepted request always names a known op. */
static void test_random_input(void)
{
    static const char *const seeds[] = {
        "{\"op\":\"submit\",\"job\":{\"model\":{\"arch\":\"lenet\"},\"epochs\":2}}",
        "{\"op\":\"logs\",\"id\":\"j0001\",\"follow\":true}",
        "{\"op\":\"export\",\"id\":\"j0001\"}",
    };
    char buf[256];
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        size_t len;
        if (i % 2) {
            len = (size_t)test_uniform(0, sizeof(buf));
            for (size_t k = 0; k < len; k++)
                buf[k] = (char)test_uniform(0, 256);
        } else {
            const char *s = seeds[i / 2 % 3];
            len = strlen(s);
            memcpy(buf, s, len);
            int edits = (int)test_uniform(1, 4);
            for (int e = 0; e < edits; e++)
                buf[(size_t)test_uniform(0, (double)len)] = (char)test_uniform(0, 256);
        }
        proto_request req;
        const char *code = NULL;
        char msg[256];
        if (proto_parse_request(buf, len, &req, &code, msg, sizeof(msg)) == 0) {
            accepted++;
            CHECK((int)req.op >= 0 && (int)req.op < OP_COUNT, "op in range");
            proto_request_free(&req);
        } else {
            CHECK(code != NULL && msg[0] != '\0', "an error has a code and a message");
        }
    }
    printf("random input: %d of 20000 accepted\n", accepted);
}

int main(void)
{
    test_init("protocol");
    test_valid_requests();
    test_bad_requests();
    test_replies();
    test_framer_chunking();
    test_framer_limit();
    test_random_input();
    return test_main_end();
}
