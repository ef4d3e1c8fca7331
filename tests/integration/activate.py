#!/usr/bin/env python3
"""Socket activation as systemd does it, for the integration tests: binds
SOCKET, starts PARLED with it as fd 3 (LISTEN_FDS=1, LISTEN_PID its own pid)
and a NOTIFY_SOCKET, appends each notification's first line to
TMP/notified, writes parled's pid to TMP/parled.pid, and exits with
parled's status.

    activate.py PARLED SOCKET STATE_DIR TMP

or, as the installed units would (parled.socket's ListenStream, SocketMode and
SocketGroup; parled.service's ExecStart run as it is written):

    activate.py --unit SOCKET MODE GROUP TMP EXECSTART...
"""
import grp
import os
import socket
import subprocess
import sys

if sys.argv[1] == "--unit":
    path, mode, group, tmp = sys.argv[2:6]
    command = sys.argv[6:]
else:
    parled, path, state, tmp = sys.argv[1:]
    mode, group = None, None
    command = [parled, "--socket", path, "--state-dir", state, "--log-level", "debug"]
lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
lsock.bind(path)
if group:
    os.chown(path, -1, grp.getgrnam(group).gr_gid)
if mode:
    os.chmod(path, int(mode, 8))
lsock.listen(16)
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
name = "@parle-notify-%d" % os.getpid()
notify.bind("\0" + name[1:])
notify.settimeout(0.2)
env = dict(os.environ, NOTIFY_SOCKET=name, LISTEN_FDS="1")


def child():
    if lsock.fileno() != 3:
        os.dup2(lsock.fileno(), 3)
    os.set_inheritable(3, True)  # no FD_CLOEXEC


# LISTEN_PID must be parled's own pid: sh sets it to $$ and execs parled.
p = subprocess.Popen(["sh", "-c", 'export LISTEN_PID=$$; exec "$@"', "sh"] + command,
                     env=env, preexec_fn=child, close_fds=False,
                     stdout=open(tmp + "/parled.out", "w"), stderr=open(tmp + "/parled.err", "a"))
open(tmp + "/parled.pid", "w").write("%d\n" % p.pid)
lsock.close()
while p.poll() is None:
    try:
        msg = notify.recv(4096).decode().split("\n")[0]
        with open(tmp + "/notified", "a") as f:
            f.write(msg + "\n")
    except socket.timeout:
        pass
sys.exit(p.returncode)
