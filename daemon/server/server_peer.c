/* Who is on the other end of a connection, and what the daemon's --group
 * and --admin-group let them do (docs/architecture.md, "Security model"). */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_impl.h"

#define MAX_GROUPS 1024

/* Is uid, by its primary gid or the group database, in group g? */
static int in_group(const char *user, unsigned gid, gid_t g)
{
    if (gid == g)
        return 1;
    gid_t groups[MAX_GROUPS];
    int n = MAX_GROUPS;
    if (getgrouplist(user, (gid_t)gid, groups, &n) < 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (groups[i] == g)
            return 1;
    return 0;
}

int peer_identify(server *s, int fd, conn *c)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return 0;
    c->peer_uid = cr.uid;
    c->peer_gid = cr.gid;
    struct passwd pw, *found = NULL;
    char pwbuf[4096];
    int named = getpwuid_r(cr.uid, &pw, pwbuf, sizeof(pwbuf), &found) == 0 && found &&
                strlen(found->pw_name) < sizeof c->peer_user;
    if (named)
        snprintf(c->peer_user, sizeof c->peer_user, "%s", found->pw_name);
    else
        snprintf(c->peer_user, sizeof c->peer_user, "%u", (unsigned)cr.uid);
    if (cr.uid == 0 || cr.uid == geteuid()) {
        c->admin = 1;
        return 1;
    }
    /* A member by the peer's group now, or by the user's primary and
     * supplementary groups in the databases. */
    c->admin = s->have_admin_group &&
               (cr.gid == s->admin_group ||
                (named && in_group(c->peer_user, found->pw_gid, s->admin_group)));
    return c->admin || (s->have_group && (cr.gid == s->group ||
                                          (named && in_group(c->peer_user, found->pw_gid,
                                                             s->group))));
}

int resolve_group(const char *option, const char *name, gid_t *gid, char *err,
                         size_t errlen)
{
    struct group gr, *found = NULL;
    char buf[16384];
    int r = getgrnam_r(name, &gr, buf, sizeof(buf), &found);
    if (r == 0 && found) {
        *gid = found->gr_gid;
        return 0;
    }
    char *end;
    long n = strtol(name, &end, 10);
    if (*name && *end == '\0' && n >= 0) {
        *gid = (gid_t)n;
        return 0;
    }
    snprintf(err, errlen, "%s: no group %s", option, name);
    return -1;
}
