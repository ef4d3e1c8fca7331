/* parlectl: the command-line client of parled. It speaks only the protocol
 * of docs/protocol.md: one JSON request per line over the Unix socket, one
 * JSON reply per line (plus event lines for watch and logs -f). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl.h"
#include "parle_config.h"


static const char usage[] =
    "usage: parlectl [--socket PATH] COMMAND [ARG]...\n"
    "Talk to parled over its Unix socket: --socket, else $PARLE_SOCKET, else the\n"
    "first that exists of $XDG_RUNTIME_DIR/parled.sock (your own parled),\n"
    "/run/parled/parled.sock (the installed parled.socket unit's) and\n"
    "/run/parled.sock (root's parled by default), else /run/parled/parled.sock.\n"
    "\n"
    "commands:\n"
    "  submit FILE [-q] [--set key.path=value]... [--priority N] [--watch|--wait] [--json]\n"
    "         [--after IDS | --after-any IDS]  queue a job\n"
    "  status [ID] [--json]    one job, or the daemon and the newest 100 jobs\n"
    "  list [--state S] [--all] [--json]  the newest jobs (--all: every one; --state:\n"
    "                              only those in state S); alias: ls\n"
    "  watch ID [--json]       follow a job's progress until it ends\n"
    "  logs ID [-f] [--json]   a job's log (-f: follow until the job ends)\n"
    "  cancel ID [--json]      cancel a queued or running job\n"
    "  resume ID [--from-scratch] [--json]  queue a failed or timed-out job again, from\n"
    "                          its checkpoint\n"
    "  wait ID [--json]        block until the job ends; exit status below\n"
    "  export ID -o FILE [--json]  write the job's master weights and BN statistics (safetensors)\n"
    "  plot ID [ID...] [-o F] [--json]  train loss, test error, lr against passes, as an SVG\n"
    "  priority ID N [--json]  change a job's priority (higher runs first, may preempt)\n"
    "  hold ID | release ID [--json]  keep a job out of the running (a running one\n"
    "                          checkpoints and waits, held) / let it run again\n"
    "  usage [--json]          each owner's recent device use, as fair share ranks it\n"
    "  history [--user U] [--since T] [--json]  device-hours per owner over ended runs\n"
    "  rm ID... [--json]       remove ended jobs (or a sweep with its jobs) and their files\n"
    "  sweep FILE [--set k=v]...|status ID|ls|cancel ID|rm ID [-q] [--json]  a grid of jobs over\n"
    "                          a base job (docs/sweeps.md): queue it, its points, every sweep, cancel\n"
    "  tensorboard ID|SWEEP... -o DIR [--follow] [--json]  the jobs' metrics as TensorBoard\n"
    "                          event files, one run folder per job\n"
    "  top [-n N] [-d S] [--sort K] [--mine] [--json]  the devices, running and queued\n"
    "                          jobs and owners, live (q quits); -n 1: one picture\n"
    "  devices [--json]        the daemon's devices and what runs on them\n"
    "  version [--json]        client and daemon versions\n"
    "  shutdown [--json]       stop parled (running jobs checkpoint and resume at its next start)\n"
    "\n"
    "'parlectl COMMAND --help' describes a command.\n"
    "\n"
    "Exit statuses:\n"
    "  0  success (wait, watch, submit --wait/--watch: the job ended done)\n"
    "  1  failure: an error reply, or the job ended failed or timeout\n"
    "  2  usage error\n"
    "  3  the job was cancelled (wait, watch, submit --wait/--watch)\n"
    "  4  parled is not running, or the connection was lost before the job ended\n"
    "     (wait, watch, submit --wait/--watch)\n";

char socket_path[4096];

static const command commands[] = {
    {"submit", cmd_submit,
     "submit FILE [-q] [--set key.path=value]... [--priority N] [--watch|--wait] [--json]\n"
     "       [--after IDS | --after-any IDS]\n"
     "Queue the job in FILE ('-' for stdin) and print its id (-q: only the id).\n"
     "--set overrides a field by its dotted path; the value is JSON if it parses,\n"
     "else a string. --priority N is --set priority=N (higher runs first; above 0\n"
     "only for root, parled's user and its --admin-group). --after IDS (job or\n"
     "sweep ids, j0001,s0002) starts it once they all ended done; if one ends\n"
     "otherwise it is cancelled, saying which. --after-any IDS once they ended\n"
     "however. --watch then follows the job like 'watch', --wait blocks silently\n"
     "like 'wait'; either exits like 'wait' (0 done, 1 failed or timeout, 3\n"
     "cancelled, 4 parled gone); --wait --json prints the job as it ended."},
    {"status", cmd_status,
     "status [ID] [--json]\nOne job's status, or the daemon's and the newest 100 jobs' ('list --all':\n"
     "every job). A job's shows what places it in the queue (as Slurm's sprio):\n"
     "its priority, whether it resumes a checkpoint, its owner's recent device use\n"
     "(fair share) and its submission; and who holds it, if held. Of another\n"
     "member's job, only what the queue needs, unless parled runs with\n"
     "--open-job-details: no training values, errors or paths."},
    {"list", cmd_list,
     "list [--state S] [--all] [--limit N] [--json]\nThe newest 100 jobs, oldest first (--limit N: the newest N, at most 1000;\n"
     "--all: every job, asked page by page); --state keeps those in state S\n"
     "(queued, held, preempted, running, done, failed, cancelled, timeout). 'ls'\n"
     "is the same command."},
    {"ls", cmd_list,
     "ls [--state S] [--all] [--limit N] [--json]\nThe newest 100 jobs, oldest first (--limit N: the newest N, at most 1000;\n"
     "--all: every job, asked page by page); --state keeps those in state S\n"
     "(queued, held, preempted, running, done, failed, cancelled, timeout). 'list'\n"
     "is the same command."},
    {"watch", cmd_watch,
     "watch ID [--json]\nFollow the job's progress until it ends (--json: the event lines).\n"
     "Exits like 'wait': 0 done, 1 failed or timeout, 3 cancelled, 4 parled gone."},
    {"logs", cmd_logs, "logs ID [-f] [--json]\nPrint the job's log; -f (--follow) keeps printing until the job ends.\n"
     "--json: one object with the text (with -f: JSON lines, the log so far, then one\n"
     "object per line)."},
    {"cancel", cmd_cancel, "cancel ID [--json]\nCancel a queued job, or stop a running one at its next step."},
    {"resume", cmd_resume,
     "resume ID [--from-scratch] [--json]\nQueue a failed or timed-out job again: it resumes "
     "from its newest "
     "complete checkpoint\n(a failed job keeps its checkpoints) and goes on to its end. A job "
     "without a\ncomplete checkpoint is refused unless --from-scratch, which runs it again "
     "from\nstep 0 (its checkpoints removed). Only a failed or timed-out job; its owner,\nroot and "
     "parled's --admin-group."},
    {"wait", cmd_wait,
     "wait ID [--json]\nBlock until the job ends (--json: then print the job as it ended).\n"
     "Exit status: 0 it ended done, 1 it failed or timed out (or\n"
     "parled refused, e.g. no such job), 2 usage error, 3 it was cancelled, 4 parled\n"
     "is not running or the connection was lost before the job ended."},
    {"export", cmd_export,
     "export ID -o FILE [--json] (or: export ID FILE)\nWrite the master of the job's last evaluation "
     "(weights and BN statistics,\nsafetensors) to FILE. parled sends the bytes over the socket "
     "and parlectl writes\nFILE itself, with your permissions, atomically (a temporary beside "
     "it, fsync,\nrename), after checking the daemon's CRC-32; FILE is never left half written."},
    {"plot", cmd_plot,
     "plot ID [ID...] [-o FILE] [--json]\nDraw train loss, test error and learning rate against passes "
     "over the data\n(one colour per job) as an SVG, to FILE (default curves.svg; '-': stdout).\n"
     "A sweep's id (s0001) draws one curve per point: its seeds' mean, their range\n"
     "as a band."},
    {"sweep", cmd_sweep,
     "sweep FILE [-q] [--set key.path=value]... [--json]\n"
     "       sweep status|cancel|rm ID [--json] | sweep ls [--json]\n"
     "Queue a sweep (docs/sweeps.md): FILE names a base job file (\"base\", read here,\n"
     "relative to FILE's folder), a grid over its dotted keys ({\"optim.lr\": [0.1, 0.05]}),\n"
     "and optionally \"seeds\": K (each point K times, seeds base + 0..K-1), \"samples\": N\n"
     "(N points of the grid drawn at random by \"sample_seed\") and \"early_stop\":\n"
     "{\"after_epochs\": E, \"margin\": M} (a job whose test error after E epochs is\n"
     "worse than the median of the sweep's finished jobs then by more than M is\n"
     "cancelled). One job per point and seed, queued like any job, all or none;\n"
     "prints the sweep's id (-q: only the id). --set sets a key of the base job as\n"
     "submit's does (a key the grid varies is refused). 'sweep status' shows one row per\n"
     "point: its values, state, mean +- standard deviation of the final test error\n"
     "over its seeds, wall time; '*' marks the best point. 'sweep ls' lists the\n"
     "sweeps; 'sweep cancel' cancels a sweep's queued and running jobs; 'sweep rm'\n"
     "removes an ended sweep with its jobs (as 'rm'). 'plot' takes a sweep id: one\n"
     "curve per point, its seeds' range as a band."},
    {"tensorboard", cmd_tensorboard,
     "tensorboard ID|SWEEP... -o DIR [--follow] [--json]\n"
     "Write each job's metrics as TensorBoard event files, with your permissions:\n"
     "one run folder per job named (DIR/ID; the jobs of a sweep named by its id\n"
     "DIR/SWEEP/pPOINT/ID, so that a point's seeds list together; a job named twice\n"
     "is written once) holding events.out.tfevents.TIME.HOST.parle, scalars against\n"
     "the job's step: train/loss, train/data_passes, optim/lr, optim/gamma,\n"
     "optim/rho, speed/images_per_sec, time/compute_s, time/sync_s, time/wait_s,\n"
     "time/eval_s and the rule's own quantities (rule/KEY, per replica rule/KEY/I)\n"
     "from progress lines; test/error, test/loss and eval/dist_to_master from\n"
     "evaluations. A job with no metrics yet (one cancelled while queued) gets no\n"
     "run. A run folder must hold no event file yet. --follow (-f) keeps appending,\n"
     "every second, until every job has ended. Then 'tensorboard --logdir DIR'."},
    {"priority", cmd_priority,
     "priority ID N [--json]\nSet a queued or running job's priority (-1000..1000; higher runs\n"
     "first, and a queued job preempts running ones of lower priority: they\n"
     "checkpoint, go back into the queue as 'preempted' and resume later). Its owner\n"
     "may lower it; root, parled's user and its --admin-group may set any value."},
    {"hold", cmd_hold,
     "hold ID [--json]\nKeep a queued job from starting (it keeps its place); a running job\n"
     "checkpoints at its next step and goes back into the queue, held. 'release'\n"
     "lets it run again. A hold by root, parled's user or its --admin-group is an\n"
     "admin hold: only they release it, not the job's owner ('status' shows who\n"
     "holds a job); an admin's hold of a job its owner held makes it one."},
    {"release", cmd_hold, "release ID [--json]\nLet a held job run again (from its checkpoint "
     "if it ran). An admin hold\nonly root, parled's user and its --admin-group release."},
    {"usage", cmd_usage,
     "usage [--json]\nEach owner's recent device use, as fair share weighs it now (as Slurm's\n"
     "sshare): device-hours decayed by parled's --usage-half-life, the owner's share\n"
     "of all of it, and their running and queued jobs; least used first in the queue\n"
     "among equal priorities. A GPU job is charged its GPUs times its gpu_share, a\n"
     "CPU job K / (the daemon's cores) for cpu:K (1 for the whole CPU), per second."},
    {"history", cmd_history,
     "history [--user U] [--since T] [--json]\nDevice-hours per owner over the runs that "
     "ended (done, failed, cancelled,\npreempted, held, stopped by a shutdown, or cut by a "
     "kill of parled), from\nparled's accounting record (STATE-DIR/accounting.jsonl, kept "
     "when jobs are\nremoved; as Slurm's sacct), charged as 'usage' charges but not "
     "decayed.\n--user: one owner (a name or uid). --since: runs that ended at or after T\n"
     "(unix seconds, an age such as 30m, 12h or 7d, or a local date 2026-01-31 or\n"
     "2026-01-31T08:00)."},
    {"rm", cmd_rm,
     "rm ID... [--json]\nRemove ended jobs: each one's folder in parled's state dir (log, metrics,\n"
     "checkpoints, exported master) goes, and the job leaves 'list'; prints the space\n"
     "freed. A queued or running job is refused (cancel it first), as is a sweep's job\n"
     "alone: a sweep's id (s0001) removes the sweep with all its jobs, once every one\n"
     "has ended ('sweep rm' is the same). Only the owner, root and --admin-group."},
    {"top", cmd_top,
     "top [-n N] [-d S] [--sort id|owner|progress|speed] [--mine] [--json]\n"
     "The whole box at a glance, as htop shows a machine: parled's version and\n"
     "uptime, devices free and held, the queue's length; one line per device with\n"
     "its jobs, their shares and memory; the running jobs with a progress bar,\n"
     "images/s, ETA and last test error (others' jobs' training values only where\n"
     "parled shows them to you); the first queued jobs with why each waits (as\n"
     "status says it); each owner's jobs and recent device use. On a terminal it\n"
     "refreshes every S seconds (-d, default 1.5) until q; s changes the running\n"
     "jobs' order (id, owner, progress, speed), m shows only your jobs (--mine).\n"
     "With -n N it stops after N pictures; when stdout is not a terminal it prints\n"
     "one picture (80 columns) and exits; --json prints parled's reply."},
    {"devices", cmd_devices, "devices [--json]\nThe daemon's devices and the jobs on them."},
    {"version", cmd_version, "version [--json]\nThe versions of parlectl and parled."},
    {"shutdown", cmd_shutdown,
     "shutdown [--json]\nStop parled; running jobs checkpoint at a step boundary first and resume when\n"
     "parled starts again."},
};

/* Without --socket or $PARLE_SOCKET: the first socket that exists of the
 * user's own parled ($XDG_RUNTIME_DIR/parled.sock, parled's default, there
 * only while that user runs one), the installed parled.socket unit's (the
 * shared daemon) and root's parled started by hand; the unit's when none is. */
static void find_default_socket(void)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    char own[sizeof(socket_path)];
    snprintf(own, sizeof(own), "%s/parled.sock", xdg && *xdg ? xdg : "");
    const char *const candidates[] = {xdg && *xdg ? own : "", "/run/parled/parled.sock",
                                      "/run/parled.sock"};
    snprintf(socket_path, sizeof(socket_path), "/run/parled/parled.sock");
    for (size_t k = 0; k < sizeof(candidates) / sizeof(candidates[0]); k++) {
        struct stat st;
        if (*candidates[k] && stat(candidates[k], &st) == 0 && S_ISSOCK(st.st_mode)) {
            snprintf(socket_path, sizeof(socket_path), "%s", candidates[k]);
            return;
        }
    }
}

int main(int argc, char **argv)
{
    const char *env = getenv("PARLE_SOCKET");
    if (env && *env)
        snprintf(socket_path, sizeof(socket_path), "%s", env);
    else
        find_default_socket();
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("parlectl %s\n", PARLE_VERSION);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
            snprintf(socket_path, sizeof(socket_path), "%s", argv[++i]);
        } else if (strncmp(argv[i], "--socket=", 9) == 0) {
            snprintf(socket_path, sizeof(socket_path), "%s", argv[i] + 9);
        } else {
            fprintf(stderr, "parlectl: unknown option %s; try 'parlectl --help'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (i == argc) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(argv[i], commands[k].name) == 0)
            return commands[k].run(&commands[k], argc - i - 1, argv + i + 1);
    fprintf(stderr, "parlectl: unknown command %s; try 'parlectl --help'\n", argv[i]);
    return EXIT_USAGE;
}
