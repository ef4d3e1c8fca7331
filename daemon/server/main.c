/* parled: the parle training daemon (docs/protocol.md, docs/architecture.md). Runs in the foreground,
 * prints one line when it accepts connections, checkpoints its running jobs
 * and stops on SIGTERM or SIGINT (a second SIGINT exits at once). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "backend.h"
#include "fsutil.h"
#include "jobconfig.h"
#include "log.h"
#include "mpi_node.h"
#include "parle_config.h"
#include "runner.h"
#include "sdnotify.h"
#include "server.h"
#include "state_format.h"

static const char usage[] =
    "usage: parled [OPTION]...\n"
    "Run the parle training daemon in the foreground.\n"
    "\n"
    "  --socket PATH      Unix socket to serve (default $XDG_RUNTIME_DIR/parled.sock,\n"
    "                     else /run/parled.sock)\n"
    "  --state-dir DIR    where jobs are kept (default $XDG_STATE_HOME/parled; as root\n"
    "                     /var/lib/parled; else ~/.local/state/parled); one parled per\n"
    "                     state dir (DIR/parled.lock)\n"
    "  --devices D        what jobs may use: cpu, auto, or GPU ids like 0,1 (default auto)\n"
    "  --group G          also let members of group G use the socket: each may submit\n"
    "                     jobs and see every job's place in the queue, and act\n"
    "                     (cancel, logs, watch, export, metrics) on its own jobs\n"
    "                     only\n"
    "  --admin-group G    members of group G may also act on any job and shut parled\n"
    "                     down, as root and parled's own user may\n"
    "  --open-job-details  every member sees every job's details in status, list\n"
    "                     and sweep status: its training values (losses, test\n"
    "                     error, learning rate, speed) and errors. By default a\n"
    "                     member sees of another's job only what the queue needs\n"
    "                     (id, owner, state, devices, priority, why it waits,\n"
    "                     times); its owner and the admins see all\n"
    "  --max-jobs-per-user N     queued and running jobs of one user (default 100)\n"
    "  --max-connections N       connections at once, all users (default 128)\n"
    "  --max-connections-per-user N  connections at once of one user other than root\n"
    "                     and the admin group (default 16); 0 lifts any of the three\n"
    "  --stop-timeout S   at SIGTERM, wait up to S seconds (default 300) for running\n"
    "                     jobs to checkpoint; then stop them at once (they resume\n"
    "                     from their last checkpoint). Clients get 5 s to read their\n"
    "                     last replies, then are disconnected\n"
    "  --preempt-grace S  a job preempted by a higher priority (or held while it\n"
    "                     runs) has S seconds (default 300, at least 1) to\n"
    "                     checkpoint; then it stops at once and resumes from its\n"
    "                     last checkpoint\n"
    "  --keep-ended N|AGE  a failed job keeps its checkpoints (for parlectl resume)\n"
    "                     until it is one of more than N newer failed jobs, or ended\n"
    "                     more than AGE ago (AGE: a number with s, m, h or d, e.g.\n"
    "                     7d); by default they stay until resumed or removed\n"
    "  --remove-ended AGE  a job that ended more than AGE ago (s, m, h or d: 30d)\n"
    "                     is removed, folder and all, as 'parlectl rm' would (a\n"
    "                     sweep once all its jobs did); the accounting record keeps\n"
    "                     its use. By default ended jobs stay until removed, and\n"
    "                     each takes about 15 KB of parled's memory\n"
    "  --save-retry S     a job whose final weights (its master) cannot be written,\n"
    "                     e.g. to a full disk, keeps them in memory and retries\n"
    "                     every second for up to S seconds (default 600), its\n"
    "                     status saying why; then it fails. It never ends done\n"
    "                     without them\n"
    "  --usage-half-life S  fair share: among jobs of equal priority the next to\n"
    "                     start is the one whose owner used the least device time\n"
    "                     recently, each second of use weighing half as much after\n"
    "                     S seconds (default 86400, a day); kept across restarts\n"
    "                     in STATE-DIR/usage.json, written as each run ends and\n"
    "                     every 60 s while jobs run (a kill -9 loses at most that);\n"
    "                     each run's use is also appended to STATE-DIR/\n"
    "                     accounting.jsonl ('parlectl history'; 'rm' keeps it)\n"
    "  --usage-save-interval S  for tests: write usage.json every S seconds\n"
    "                     (0.1..60) while jobs run instead of every 60\n"
    "  --max-gpus-per-user N  GPUs one user's running jobs hold at once (shares\n"
    "                     count as their part; default 0: no bound); a job past it\n"
    "                     waits (\"quota\"), one that alone is past it is refused\n"
    "  --max-cores-per-user N  the same for CPU cores (cpu:K; default 0: no bound)\n"
    "  --default-time-limit T  a run's time limit for jobs without time_limit\n"
    "                     (seconds or [D-]HH:MM:SS; default 0: none). At its limit\n"
    "                     a job checkpoints and ends \"timeout\" (parlectl resume\n"
    "                     runs it on); with limits known a later job may start on\n"
    "                     devices kept for a waiting one if it ends first (backfill)\n"
    "  --max-time-limit T  the longest time_limit a job may ask (default 0: any);\n"
    "                     with it, a job must have a limit, its own or the default\n"
    "  --preempt-min-run S  a job resumed after a preemption runs at least S\n"
    "                     seconds (default 600) before it can be preempted again\n"
    "  --oldest-first-after S  a job eligible to run for S seconds (default 86400;\n"
    "                     time held or waiting on a dependency does not count, a\n"
    "                     resumed job's counts from its resume) ranks before fair\n"
    "                     share and resuming jobs of its priority, the oldest\n"
    "                     first: fair share delays a job, never starves it\n"
    "  --min-gpu-share F  the least gpu_share a GPU job may ask (0.01..1; default\n"
    "                     0.01): a job asking less is refused. Shares are not\n"
    "                     enforced on the device: a job uses all the compute it can\n"
    "  --metrics-file PATH  write the queue, devices, jobs and owners as Prometheus\n"
    "                     metrics to PATH (absolute, ending .prom; for node_exporter's\n"
    "                     textfile collector, e.g. /var/lib/prometheus/node-exporter/\n"
    "                     parle.prom) every --metrics-interval and at each job event,\n"
    "                     atomically, mode 0644: whoever reads it sees user names,\n"
    "                     job ids and the running jobs' training values\n"
    "  --metrics-interval S  seconds between writes of --metrics-file (0.5..3600,\n"
    "                     default 5)\n"
    "  --log-level L      error, warn, info (default) or debug; logs go to stderr\n"
    "  --mpi              one of several parled started by mpirun or srun: rank 0\n"
    "                     serves the socket, the others run their share of each\n"
    "                     job's replicas (docs/mpi.md)\n"
    "  --help             show this help\n"
    "  --version          show the version\n"
    "\n"
    "Jobs are kept under the state dir; at start every job found there is reloaded\n"
    "and one that was running resumes from its newest complete checkpoint. SIGTERM\n"
    "or SIGINT checkpoints the running jobs at their next step boundary and exits;\n"
    "a second SIGINT exits at once. After a device fault that leaves a GPU unusable\n"
    "for the process (a CUDA illegal address...) the job fails, the device shows as\n"
    "faulted in 'parlectl devices', the other jobs checkpoint and stop, and parled\n"
    "re-executes itself (same PID) so that the device works again; the jobs resume.\n"
    "Drive the daemon with parlectl.\n";

/* The state dir's lock (<state dir>/parled.lock, flock'd, holding the pid):
 * one parled per state dir, or two would write the same jobs. The lock
 * crosses a re-exec under this variable (the descriptor, without
 * FD_CLOEXEC then), so no second parled slips in while parled restarts. */
#define LOCK_FD_ENV "PARLED_STATE_LOCK_FD"

/* The descriptor a re-exec passed on, if it is still the lock file at
 * `path`; -1 if none. */
static int inherited_lock(const char *path)
{
    const char *v = getenv(LOCK_FD_ENV);
    char *end;
    long fd = v && *v ? strtol(v, &end, 10) : -1;
    unsetenv(LOCK_FD_ENV);
    struct stat a, b;
    if (fd < 0 || fd > 1 << 20 || *end || fstat((int)fd, &a) != 0 || stat(path, &b) != 0 ||
        a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return -1;
    return (int)fd;
}

/* Lock the state dir for this parled (creating the dir): the descriptor,
 * close-on-exec; or -1 with a message naming the dir and, when another
 * parled holds it, that parled's pid. */
static int lock_state_dir(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/parled.lock", dir);
    if (mkdir_p(dir, err, errlen) != 0)
        return -1;
    int fd = inherited_lock(path);
    if (fd < 0)
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "state dir %s: cannot open %s: %s", dir, path, strerror(errno));
        return -1;
    }
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "state dir %s is in use by another parled (pid %s, holding "
                     "%s): one parled per state dir", dir, pid[0] ? pid : "unknown", path);
        else
            snprintf(err, errlen, "state dir %s: cannot lock %s: %s", dir, path, strerror(e));
        close(fd);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        server_log(LOG_WARN, "%s: cannot write the pid: %s", path, strerror(errno));
    return fd;
}

typedef struct daemon_state {
    server *srv;
    uv_signal_t sigterm, sigint;
    int sigints;
} daemon_state;

static void on_signal(uv_signal_t *h, int signum)
{
    daemon_state *d = h->data;
    if (signum == SIGINT && ++d->sigints > 1) {
        server_remove_socket(d->srv);
        server_log(LOG_WARN, "second SIGINT: exiting at once");
        _exit(130);
    }
    server_shutdown(d->srv, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_stopped(void *user)
{
    daemon_state *d = user;
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
}

/* After a device fault (server_wants_reexec): the same program with the same
 * arguments in the same process, so the PID systemd watches never exits, and
 * with new CUDA contexts. A socket systemd passed goes on as fd 3, announced
 * as systemd does; else the new process binds --socket again. systemd hears
 * RELOADING=1 now and READY=1 from the new process once it serves. Returns
 * only if the exec failed. */
static void reexec(char **argv, int listen_fd, int lock_fd)
{
    char lock[32];
    snprintf(lock, sizeof lock, "%d", lock_fd);
    if (fcntl(lock_fd, F_SETFD, 0) == 0) /* the lock crosses the exec */
        setenv(LOCK_FD_ENV, lock, 1);
    if (listen_fd >= 0) {
        char pid[32];
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        if (listen_fd != 3 && dup2(listen_fd, 3) == 3)
            close(listen_fd);
        setenv("LISTEN_PID", pid, 1);
        setenv("LISTEN_FDS", "1", 1);
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    char state[128];
    snprintf(state, sizeof state, "RELOADING=1\nMONOTONIC_USEC=%lld\nSTATUS=re-executing after "
             "a device fault", (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000);
    (void)sd_notify_state(state);
    server_log(LOG_WARN, "re-executing /proc/self/exe as pid %ld", (long)getpid());
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);
    server_log(LOG_ERROR, "cannot re-execute /proc/self/exe: %s", strerror(errno));
}

static int parse_log_level(const char *s)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* --keep-ended N (a count, into *count when count is not NULL) or AGE (a
 * number and s, m, h or d, into *age): 0, or -1. */
static int parse_ended(const char *s, int *count, double *age)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0 && v <= 1e8))
        return -1;
    if (!*end) {
        if (!count || v != (double)(int)v)
            return -1;
        *count = (int)v;
        return 0;
    }
    static const char units[] = "smhd";
    static const double seconds[] = {1, 60, 3600, 86400};
    const char *u = end[1] ? NULL : strchr(units, *end);
    if (!u || !*u || v <= 0)
        return -1;
    *age = v * seconds[u - units];
    return 0;
}

/* What the driver shows, at start-up: a driver that cannot be asked, or a GPU
 * the build cannot use, is said here with what to do (also in parlectl devices). */
static void log_gpus(void)
{
    const backend_gpu_probe_t *p = backend_gpu_probe();
    char why[sizeof p->error + 128];
    if (p->error[0]) {
        server_log(LOG_WARN, "no GPU: %s", p->error);
        return;
    }
    server_log(LOG_INFO, "GPUs: %d shown by the driver%s", p->count,
               p->built ? "" : " (parle was built without CUDA)");
    for (int i = 0; i < p->count; i++)
        if (backend_gpu_unusable(i, why, sizeof why))
            server_log(LOG_WARN, "GPU %d is unusable: %s", i, why);
}

int main(int argc, char **argv)
{
    backend_openmp_defaults();
    /* For a re-exec: getopt_long reorders argv, and MPI may rewrite it. */
    char *args[argc + 1];
    memcpy(args, argv, ((size_t)argc + 1) * sizeof *args);
    static const struct option opts[] = {
        {"socket", required_argument, 0, 's'}, {"state-dir", required_argument, 0, 'd'},
        {"devices", required_argument, 0, 'D'}, {"group", required_argument, 0, 'g'},
        {"admin-group", required_argument, 0, 'a'},
        {"open-job-details", no_argument, 0, 'o'},
        {"max-jobs-per-user", required_argument, 0, 'J'},
        {"max-connections", required_argument, 0, 'C'},
        {"max-connections-per-user", required_argument, 0, 'U'},
        {"stop-timeout", required_argument, 0, 't'},
        {"preempt-grace", required_argument, 0, 'P'},
        {"usage-half-life", required_argument, 0, 'H'},
        {"usage-save-interval", required_argument, 0, 'W'},
        {"keep-ended", required_argument, 0, 'K'},
        {"remove-ended", required_argument, 0, 'E'},
        {"save-retry", required_argument, 0, 'S'},
        {"max-gpus-per-user", required_argument, 0, 'G'},
        {"max-cores-per-user", required_argument, 0, 'c'},
        {"default-time-limit", required_argument, 0, 'T'},
        {"max-time-limit", required_argument, 0, 'X'},
        {"preempt-min-run", required_argument, 0, 'R'},
        {"oldest-first-after", required_argument, 0, 'O'},
        {"min-gpu-share", required_argument, 0, 'm'},
        {"metrics-file", required_argument, 0, 'e'},
        {"metrics-interval", required_argument, 0, 'i'},
        {"log-level", required_argument, 0, 'l'}, {"mpi", no_argument, 0, 'M'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'}, {0, 0, 0, 0},
    };
    char default_socket[4096], default_state[4096];
    const char *env = getenv("XDG_RUNTIME_DIR");
    snprintf(default_socket, sizeof(default_socket), "%s/parled.sock",
             env && *env ? env : "/run");
    if ((env = getenv("XDG_STATE_HOME")) && *env)
        snprintf(default_state, sizeof(default_state), "%s/parled", env);
    else if (geteuid() == 0)
        snprintf(default_state, sizeof(default_state), "/var/lib/parled");
    else
        snprintf(default_state, sizeof(default_state), "%s/.local/state/parled",
                 (env = getenv("HOME")) && *env ? env : ".");
    server_config cfg = {.socket_path = default_socket, .state_dir = default_state,
                         .devices = "auto", .stop_timeout_s = 300, .preempt_grace_s = 300,
                         .usage_half_life_s = 86400, .usage_save_s = 60,
                         .keep_ended_count = -1,
                         .max_jobs_per_user = 100,
                         .max_conns = 128, .max_conns_per_user = 16, .save_retry_s = 600,
                         .sched = {.preempt_min_run_s = 600, .oldest_first_s = 86400},
                         .metrics_interval_s = 5};
    int c, mpi = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': cfg.socket_path = optarg; break;
        case 'd': cfg.state_dir = optarg; break;
        case 'D': cfg.devices = optarg; break;
        case 'g': cfg.group = optarg; break;
        case 'a': cfg.admin_group = optarg; break;
        case 'o': cfg.sched.open_job_details = 1; break;
        case 'J':
        case 'C':
        case 'U':
        case 'G':
        case 'c': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || n < 0 || n > 1000000) {
                fprintf(stderr, "parled: --%s: expected a count in 0..1000000, got %s\n",
                        c == 'J'   ? "max-jobs-per-user"
                        : c == 'C' ? "max-connections"
                        : c == 'U' ? "max-connections-per-user"
                        : c == 'G' ? "max-gpus-per-user"
                                   : "max-cores-per-user",
                        optarg);
                return 2;
            }
            *(c == 'J'   ? &cfg.max_jobs_per_user
              : c == 'C' ? &cfg.max_conns
              : c == 'U' ? &cfg.max_conns_per_user
              : c == 'G' ? &cfg.sched.gpus_per_user
                         : &cfg.sched.cores_per_user) = (int)n;
            break;
        }
        case 't':
        case 'P':
        case 'H': {
            char *end;
            double *to = c == 't' ? &cfg.stop_timeout_s
                         : c == 'P' ? &cfg.preempt_grace_s : &cfg.usage_half_life_s;
            *to = strtod(optarg, &end);
            if (*optarg == '\0' || *end || !(*to >= 0 && *to <= 1e8)) {
                fprintf(stderr, "parled: --%s: expected seconds in 0..1e8, got %s\n",
                        c == 't' ? "stop-timeout" : c == 'P' ? "preempt-grace" : "usage-half-life",
                        optarg);
                return 2;
            }
            /* No grace would stop a preempted job without a checkpoint, losing
             * everything since its last one: refused, not taken to mean that. */
            if (c == 'P' && *to < 1) {
                fprintf(stderr, "parled: --preempt-grace: must be at least 1 second (got %s): a "
                        "preempted job needs time to checkpoint at its next step boundary; "
                        "with none it would stop at once and redo the steps since its last "
                        "checkpoint\n", optarg);
                return 2;
            }
            break;
        }
        case 'W': {
            char *end;
            cfg.usage_save_s = strtod(optarg, &end);
            if (*optarg == '\0' || *end || !(cfg.usage_save_s >= 0.1 && cfg.usage_save_s <= 60)) {
                fprintf(stderr, "parled: --usage-save-interval: expected seconds in 0.1..60, "
                        "got %s\n", optarg);
                return 2;
            }
            break;
        }
        case 'T':
        case 'X':
        case 'R':
        case 'O': {
            const char *name = c == 'T'   ? "default-time-limit"
                               : c == 'X' ? "max-time-limit"
                               : c == 'R' ? "preempt-min-run"
                                          : "oldest-first-after";
            double *to = c == 'T'   ? &cfg.sched.default_time_limit_s
                         : c == 'X' ? &cfg.sched.max_time_limit_s
                         : c == 'R' ? &cfg.sched.preempt_min_run_s
                                    : &cfg.sched.oldest_first_s;
            if (job_duration_read(optarg, to) != 0) {
                fprintf(stderr, "parled: --%s: expected seconds or [D-]HH:MM:SS, got %s\n",
                        name, optarg);
                return 2;
            }
            break;
        }
        case 'K':
            if (parse_ended(optarg, &cfg.keep_ended_count, &cfg.keep_ended_s) != 0) {
                fprintf(stderr, "parled: --keep-ended: expected a count (50) or an age with s, "
                        "m, h or d (7d), got %s\n", optarg);
                return 2;
            }
            break;
        case 'E':
            if (parse_ended(optarg, NULL, &cfg.remove_ended_s) != 0) {
                fprintf(stderr, "parled: --remove-ended: expected an age with s, m, h or d "
                        "(30d), got %s\n", optarg);
                return 2;
            }
            break;
        case 'l': {
            int level = parse_log_level(optarg);
            if (level < 0) {
                fprintf(stderr, "parled: --log-level: expected error, warn, info or debug, got %s\n",
                        optarg);
                return 2;
            }
            server_log_level = (enum log_level)level;
            break;
        }
        case 'S': {
            char *end;
            cfg.save_retry_s = strtod(optarg, &end);
            if (*optarg == '\0' || *end || !(cfg.save_retry_s >= 0 && cfg.save_retry_s <= 1e8)) {
                fprintf(stderr, "parled: --save-retry: expected seconds in 0..1e8, got %s\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'e': cfg.metrics_file = optarg; break;
        case 'm': {
            char *end;
            cfg.sched.min_gpu_share = strtod(optarg, &end);
            if (*optarg == '\0' || *end ||
                !(cfg.sched.min_gpu_share >= 0.01 && cfg.sched.min_gpu_share <= 1)) {
                fprintf(stderr, "parled: --min-gpu-share: expected a share in 0.01..1, got %s\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'i': {
            char *end;
            cfg.metrics_interval_s = strtod(optarg, &end);
            if (*optarg == '\0' || *end || !(cfg.metrics_interval_s >= 0.5 &&
                                            cfg.metrics_interval_s <= 3600)) {
                fprintf(stderr, "parled: --metrics-interval: expected seconds in 0.5..3600, "
                        "got %s\n", optarg);
                return 2;
            }
            break;
        }
        case 'M': mpi = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': printf("parled %s\n", PARLE_VERSION); return 0;
        default: fputs("Try 'parled --help'.\n", stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "parled: unexpected argument %s; try 'parled --help'\n", argv[optind]);
        return 2;
    }
    /* A client that goes away mid-write must not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);
    if (mpi) {
        char why[512];
        if (mpi_node_init(&argc, &argv, why, sizeof(why)) != 0) {
            fprintf(stderr, "parled: %s\n", why);
            return 1;
        }
        if (mpi_node_rank() > 0)
            return mpi_node_serve();
    }

    log_gpus();
    char err[8192];
    int lock_fd = lock_state_dir(cfg.state_dir, err, sizeof err);
    if (lock_fd >= 0 && state_format_check(cfg.state_dir, err, sizeof err) != 0) {
        close(lock_fd);
        lock_fd = -1;
    }
    if (lock_fd < 0) {
        fprintf(stderr, "parled: %s\n", err);
        if (mpi)
            mpi_node_finalize();
        return 1;
    }
    cfg.listen_fd = sd_listen_fd();
    uv_loop_t *loop = uv_default_loop();
    daemon_state d = {0};
    if (server_open(&d.srv, loop, &cfg, on_stopped, &d, err, sizeof(err)) != 0) {
        fprintf(stderr, "parled: %s\n", err);
        uv_loop_close(loop);
        if (mpi) /* the other ranks wait for rank 0's word */
            mpi_node_finalize();
        return 1;
    }
    uv_signal_init(loop, &d.sigterm);
    uv_signal_init(loop, &d.sigint);
    d.sigterm.data = d.sigint.data = &d;
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_signal_start(&d.sigint, on_signal, SIGINT);

    printf("parled ready on %s (state dir %s)\n", cfg.socket_path, cfg.state_dir);
    fflush(stdout);
    if (sd_notify_state("READY=1") != 0)
        server_log(LOG_WARN, "cannot notify systemd on %s: %s", getenv("NOTIFY_SOCKET"),
                   strerror(errno));
    uv_run(loop, UV_RUN_DEFAULT);
    int listen_fd, again = server_wants_reexec(d.srv, &listen_fd);
    server_free(d.srv);
    uv_loop_close(loop);
    if (mpi)
        mpi_node_finalize();
    if (again) {
        reexec(args, listen_fd, lock_fd);
        return 1;
    }
    return 0;
}
