/* The two pieces of systemd's protocol parled speaks, written by hand (no
 * libsystemd): readiness through $NOTIFY_SOCKET, and socket activation
 * through $LISTEN_PID / $LISTEN_FDS (data/parled.service, data/parled.socket). */
#pragma once

/* The listening socket systemd passed (fd 3), or -1 when none was passed to
 * this process. Unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES so that
 * children do not take it for theirs. */
int sd_listen_fd(void);

/* Send `state` (e.g. "READY=1") to $NOTIFY_SOCKET when it is set ('@' at its
 * start names an abstract socket). Returns 0 when sent or not asked for. */
int sd_notify_state(const char *state);
