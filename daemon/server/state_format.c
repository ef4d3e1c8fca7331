/* The state dir's format (docs/architecture.md, "State dir"): the file
 * <state-dir>/format holds "parle-state N\n". A state dir without it was
 * written by a release before the file, in format 1, the layout this parled
 * reads: it loads, and gets the file. A later format is refused at start,
 * naming both, so that an older parled never misreads or rewrites the jobs of
 * a newer one (a downgrade); a file that is not a format is refused too. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "parle_config.h"
#include "state_format.h"

int state_format_check(const char *dir, char *err, size_t errlen)
{
    char path[4200], text[64];
    snprintf(path, sizeof path, "%s/format", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        char line[32];
        int n = snprintf(line, sizeof line, "parle-state %d\n", STATE_FORMAT);
        return atomic_write_file(path, line, (size_t)n, err, errlen);
    }
    if (fd < 0) {
        snprintf(err, errlen, "state dir %s: cannot open %s: %s", dir, path, strerror(errno));
        return -1;
    }
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    int format = 0, used = 0;
    if (n <= 0 || sscanf(text, "parle-state %9d\n%n", &format, &used) != 1 || format < 1 ||
        (size_t)used != strlen(text)) {
        text[strcspn(text, "\n")] = '\0';
        snprintf(err, errlen, "state dir %s: %s holds \"%.40s\", not \"parle-state N\": not a state "
                 "dir of parled, or a damaged one (this parled writes \"parle-state %d\")", dir, path,
                 text, STATE_FORMAT);
        return -1;
    }
    if (format > STATE_FORMAT) {
        snprintf(err, errlen, "state dir %s was written by a newer parled (state format %d; parled "
                 "%s reads format %d and earlier): run that release's parled on it, or start this "
                 "one with another --state-dir", dir, format, PARLE_VERSION, STATE_FORMAT);
        return -1;
    }
    return 0;
}
