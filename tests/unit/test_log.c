/* parled's log (daemon/queue/log.c): each line reaches stderr in one write,
 * so that ranks sharing one stderr under mpirun never split each other's
 * lines (a split line hid a rank's pid from mpi_netns.sh once in CI); one
 * user's refusals take a bounded number of lines a minute. Stderr is a
 * SOCK_SEQPACKET socket here: one recv returns exactly one write. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "testutil.h"

static int peer = -1;

/* The next write on stderr, or -1 when there is none. */
static ssize_t next_write(char *buf, size_t len)
{
    ssize_t n = recv(peer, buf, len - 1, MSG_DONTWAIT);
    buf[n < 0 ? 0 : n] = '\0';
    return n;
}

int main(void)
{
    test_init("log");
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair: %s", strerror(errno));
    int saved = dup(STDERR_FILENO);
    dup2(sv[0], STDERR_FILENO);
    peer = sv[1];

    char first[8192], buf[8192];
    server_log_level = LOG_INFO;
    server_log(LOG_INFO, "parled[rank %d]: serving rank 0 (pid %ld)", 2, 4242L);
    ssize_t n = next_write(first, sizeof first);
    int whole = n > 0 && strstr(first, " parled: info: parled[rank 2]: serving rank 0 (pid 4242)\n") &&
                first[n - 1] == '\n';
    server_log(LOG_DEBUG, "not shown at info");
    ssize_t none = next_write(buf, sizeof buf);
    int cut_ok = 0;
    char *big = malloc(10000);
    if (big) {
        memset(big, 'x', 9999);
        big[9999] = '\0';
        server_log(LOG_ERROR, "%s", big);
        ssize_t m = next_write(buf, sizeof buf);
        /* Cut to the line buffer, said with "...", still one line. */
        cut_ok = m > 100 && m < 9999 && memcmp(buf + m - 4, "...\n", 4) == 0 &&
                 strstr(buf, " parled: error: xxx") != NULL;
        free(big);
    }
    /* Refusals: LOG_REFUSALS_PER_MINUTE lines of uid 1000 in a minute, one
     * line saying the rest are counted, nothing for the other 500; uid 1001
     * is logged all the while; after the minute, the count, then the line. */
    int refused = 0, other = 0, counted_note = 0, summary = 0, after = 0;
    for (int i = 0; i < 500 + LOG_REFUSALS_PER_MINUTE; i++) {
        server_log_refusal(100.0 + i * 0.01, 1000, LOG_INFO, "rejected a job from uid 1000");
        while (next_write(buf, sizeof buf) > 0) {
            refused += strstr(buf, "rejected a job from uid 1000") != NULL;
            counted_note += strstr(buf, "uid 1000: 20 refusals within a minute") != NULL;
        }
        if (i % 50 == 0) {
            server_log_refusal(100.0 + i * 0.01, 1001, LOG_INFO, "rejected a job from uid 1001");
            other += next_write(buf, sizeof buf) > 0 && strstr(buf, "uid 1001") != NULL;
        }
    }
    server_log_refusal(161.0, 1000, LOG_INFO, "rejected a job from uid 1000");
    if (next_write(buf, sizeof buf) > 0)
        summary = strstr(buf, "uid 1000: 500 more refusals were not logged") != NULL;
    if (next_write(buf, sizeof buf) > 0)
        after = strstr(buf, "rejected a job from uid 1000") != NULL;
    dup2(saved, STDERR_FILENO);
    close(saved);
    CHECK(refused == LOG_REFUSALS_PER_MINUTE, "%d refusal lines of one uid in a minute", refused);
    CHECK(counted_note == 1, "%d lines say the rest are counted", counted_note);
    CHECK(other == 11, "another uid's refusals were not all logged: %d of 11", other);
    CHECK(summary && after, "after the minute: the count (%d) and the refusal (%d)", summary,
          after);
    CHECK(whole, "a log line came in %zd bytes as its first write: \"%s\"", n, first);
    CHECK(none < 0, "a debug line was written at level info");
    CHECK(cut_ok, "a 9999-byte message was not cut to one line ending in \"...\"");
    close(sv[0]);
    close(sv[1]);
    return test_main_end();
}
