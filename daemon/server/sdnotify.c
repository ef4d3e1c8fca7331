/* systemd readiness and socket activation without libsystemd (sdnotify.h). */
#include "sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define SD_LISTEN_FDS_START 3

int sd_listen_fd(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    int fd = -1;
    if (pid && fds) {
        char *end;
        long p = strtol(pid, &end, 10);
        int pid_ok = *pid && !*end && p == (long)getpid();
        long n = strtol(fds, &end, 10);
        struct stat st;
        if (pid_ok && *fds && !*end && n >= 1 && fstat(SD_LISTEN_FDS_START, &st) == 0 &&
            S_ISSOCK(st.st_mode)) {
            fd = SD_LISTEN_FDS_START;
            fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return fd;
}

int sd_notify_state(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(addr.sun_path))
        return -1;
    memcpy(addr.sun_path, path, len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(state) ? 0 : -1;
}
