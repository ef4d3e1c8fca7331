#!/usr/bin/python3
"""The same Parle LeNet job under `mpirun -n K parled --mpi` for K = 1, 2, 4
on this machine (docs/mpi.md, "Scaling"): wall time per outer iteration, the
share of it spent in the cross-rank sums, and the bytes summed per outer
iteration.

  mpi_scaling.py [--build build] [--ranks 1,2,4] [--outer 12] [--reps 1]
                 [--btl self,vader] [--job configs/lenet-fmnist-parle.json]
                 [--netns none,10gbit,1gbit]

With --netns (as root), each rank runs on a host of its own made as a
network namespace (scripts/netns-hosts.sh: veth pairs through a bridge, the
TCP btl bound to them) and every host's link is shaped with tc tbf to each
rate in turn ("none": unshaped); then per rate and K > 1 it reports the
leader's time in the cross-rank sums per outer iteration against the bytes
summed per outer iteration, and the rate that implies.

The job is JOB.json with `--set`s: `replicas` 4 (every K needs one replica
per rank, and the work must be the same for every K), `train_limit` =
outer x batch (so one epoch is `outer` outer iterations of L steps each),
one epoch, 1000 test images, a progress line each outer iteration, no
checkpoints. Each rank gets an equal share of the cores (mpirun
--map-by core --bind-to core, oversubscribed past the core count; K = 1 gets
them all), and runs its share of the replicas as threads on them.

Per K it reports, from rank 0:
  s/outer   wall seconds per outer iteration, from the job's progress lines
            (elapsed_s), the first outer iteration left out (warm-up);
  sync      the master replica's sync_s / elapsed_s (its time in Parle's
            collectives, the cross-rank part included) at the last line;
  in MPI    the leader's time inside the cross-rank sums (MPI_Iallreduce
            until it completes, waiting for the slowest rank included) over
            the job's time, from parled's "job sync:" line on rank 0;
  bytes/outer  floats summed across ranks x 4 / outer iterations.
Ranks are interleaved over --reps repetitions; medians are printed."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


HOSTS_SH = os.path.join(ROOT, "scripts", "netns-hosts.sh")
PREFIX = f"pb{os.getpid()}"


def netns_cmd(args, k, tmp):
    """mpirun in host 0's namespace, one rank per host, the launch agent
    entering the others'."""
    hosts, agent = os.path.join(tmp, "hosts"), os.path.join(tmp, "agent.sh")
    with open(hosts, "w") as f:
        f.writelines(f"10.77.0.{i + 1} slots=1\n" for i in range(k))
    with open(agent, "w") as f:
        f.write(f'#!/bin/sh\nexec "{HOSTS_SH}" agent "$@"\n')
    os.chmod(agent, 0o755)
    return ["ip", "netns", "exec", f"{PREFIX}-h0", "mpirun", "--allow-run-as-root",
            "--hostfile", hosts, "-n", str(k), "--map-by", "node", "--bind-to", "none",
            "--mca", "plm_rsh_agent", agent, "--mca", "btl", "self,tcp",
            "--mca", "btl_tcp_if_include", "10.77.0.0/24",
            "--mca", "oob_tcp_if_include", "10.77.0.0/24"]


def mpirun_cmd(args, k, sock, state, tmp):
    cores = os.cpu_count() or 1
    tail = [os.path.join(args.build, "daemon", "parled"), "--mpi", "--socket", sock,
            "--state-dir", state]
    if args.netns:
        return netns_cmd(args, k, tmp) + tail
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(k),
           "--mca", "btl", args.btl]
    if "tcp" in args.btl:
        cmd += ["--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    if k == 1:
        cmd += ["--bind-to", "none"]
    else:
        cmd += ["--map-by", "core", "--bind-to",
                "core" if k <= cores else "core:overload-allowed"]
    return cmd + tail


def run_once(args, k):
    tmp = tempfile.mkdtemp(prefix="mpi-scaling.")
    sock, state = os.path.join(tmp, "s.sock"), os.path.join(tmp, "state")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PMIX_MCA_gds="hash", PARLE_NETNS_PREFIX=PREFIX)
    err = open(os.path.join(tmp, "err"), "w+")
    daemon = subprocess.Popen(mpirun_cmd(args, k, sock, state, tmp), stdout=subprocess.PIPE,
                              stderr=err, text=True, env=env)
    try:
        line = daemon.stdout.readline()
        if not line.startswith("parled ready"):
            raise SystemExit(f"mpi_scaling.py: parled did not start with {k} ranks: {line}")
        ctl = [os.path.join(args.build, "client", "parlectl"), "--socket", sock]
        sets = {"algorithm.replicas": "4", "data.train_limit": str(args.outer * args.batch),
                "data.test_limit": "1000", "epochs": "1", "log_every": "1",
                "checkpoint.every_epochs": "0", "optim.lr_schedule": "[[1,0.1]]"}
        cmd = ctl + ["submit", args.job, "-q"]
        for key, v in sets.items():
            cmd += ["--set", f"{key}={v}"]
        jid = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
        if subprocess.run(ctl + ["wait", jid], capture_output=True).returncode != 0:
            raise SystemExit(f"mpi_scaling.py: the job failed with {k} ranks")
        with open(os.path.join(state, "jobs", jid, "metrics.jsonl")) as f:
            lines = [json.loads(x) for x in f]
        prog = [x for x in lines if x.get("sync_s") is not None and x.get("step")]
        daemon.terminate()
        daemon.wait(timeout=120)
        err.seek(0)
        stderr = err.read()
    finally:
        if daemon.poll() is None:
            daemon.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    steps = [x["step"] for x in prog]
    L = steps[1] - steps[0]
    first, last = prog[0], prog[-1]
    out = {"s_per_outer": (last["elapsed_s"] - first["elapsed_s"]) / ((last["step"] - first["step"]) / L),
           "sync": last["sync_s"] / last["elapsed_s"], "outer": last["step"] // L, "L": L}
    m = re.search(r"parled\[rank 0\]: job sync: (\d+) all-reduces and \d+ exchanges moving "
                  r"(\d+) floats \([\d.]+ MB\) in all, (\d+) agreements; ([\d.]+) s of "
                  r"([\d.]+) s", stderr)
    if k > 1:
        if not m:
            raise SystemExit(f"mpi_scaling.py: no 'job sync' line from rank 0:\n{stderr}")
        sums, floats = int(m.group(1)), int(m.group(2))
        out.update(in_mpi=float(m.group(4)) / float(m.group(5)), sums=sums,
                   sync_per_outer=float(m.group(4)) / out["outer"],
                   floats=floats // sums, agreements=int(m.group(3)),
                   bytes_per_outer=floats * 4 / out["outer"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--job", default=os.path.join(ROOT, "configs", "lenet-fmnist-parle.json"))
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--outer", type=int, default=12)
    ap.add_argument("--batch", type=int, default=128, help="the job's optim.batch")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--btl", default="self,vader")
    ap.add_argument("--netns", help="tbf rates, e.g. none,10gbit,1gbit (as root)")
    args = ap.parse_args()
    if not shutil.which("mpirun"):
        sys.exit("mpi_scaling.py: mpirun not found")
    ranks = [int(x) for x in args.ranks.split(",")]
    if args.netns:
        return bandwidth(args, [k for k in ranks if k > 1])
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{os.getloadavg()[0]:.2f} at the start, {os.cpu_count()} cores, btl {args.btl}")
    results = {k: [] for k in ranks}
    for _ in range(args.reps):
        for k in ranks:
            results[k].append(run_once(args, k))
    med = lambda k, key: statistics.median(r[key] for r in results[k])  # noqa: E731
    base = med(ranks[0], "s_per_outer")
    print(f"# L = {results[ranks[0]][0]['L']}, {results[ranks[0]][0]['outer']} outer "
          f"iterations, 4 replicas; load average {os.getloadavg()[0]:.2f} at the end")
    print("| ranks | replicas per rank | s / outer iteration | vs 1 rank | sync share (master) "
          "| in MPI sums (rank 0) | all-reduces | floats each | bytes / outer iteration |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in ranks:
        r0 = results[k][0]
        mpi = (f"{100 * med(k, 'in_mpi'):.1f}% | {r0['sums']} | {r0['floats']} | "
               f"{med(k, 'bytes_per_outer') / 1e6:.3f} MB" if k > 1 else "— | — | — | —")
        print(f"| {k} | {4 // k} | {med(k, 's_per_outer'):.3f} | "
              f"{med(k, 's_per_outer') / base:.2f} | {100 * med(k, 'sync'):.1f}% | {mpi} |")


def bandwidth(args, ranks):
    rates = args.netns.split(",")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{os.getloadavg()[0]:.2f} at the start, {os.cpu_count()} cores, one rank per "
          f"network namespace, tc tbf on every host's link")
    results = {(rate, k): [] for rate in rates for k in ranks}
    subprocess.run([HOSTS_SH, "up", PREFIX, str(max(ranks))], check=True)
    try:
        for _ in range(args.reps):
            for rate in rates:
                subprocess.run([HOSTS_SH, "shape", PREFIX, rate], check=True)
                for k in ranks:
                    results[(rate, k)].append(run_once(args, k))
    finally:
        subprocess.run([HOSTS_SH, "down", PREFIX], check=False)
    med = lambda key, name: statistics.median(r[name] for r in results[key])  # noqa: E731
    print(f"# load average {os.getloadavg()[0]:.2f} at the end; medians of {args.reps}")
    print("| link | ranks | s / outer iteration | sync s / outer iteration (rank 0 in MPI "
          "sums) | bytes / outer iteration | bytes x 8 / sync s |")
    print("|---|---|---|---|---|---|")
    for (rate, k) in results:
        sync, moved = med((rate, k), "sync_per_outer"), med((rate, k), "bytes_per_outer")
        print(f"| {rate} | {k} | {med((rate, k), 's_per_outer'):.3f} | {1e3 * sync:.1f} ms | "
              f"{moved / 1e6:.3f} MB | {8 * moved / sync / 1e9:.2f} Gbit/s |")


if __name__ == "__main__":
    main()
