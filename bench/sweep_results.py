#!/usr/bin/python3
"""The results of docs/algorithms.md, produced with sweeps through a fresh
parled: Parle against SGD on the shipped LeNet job at equal passes per
replica, and every coupling rule head to head (bench/rules_table.py's jobs),
each over K seeds, as mean +- sample standard deviation of the master's final
test error.

  sweep_results.py [--build DIR] [--seeds K] [--passes P] [--main-devices D]
                   [--rules-devices D] [--gpu-share F] [--only main,rules] [--root DIR]
                   [--train-limit M] [--test-limit T] [--keep DIR]

The main comparison: configs/lenet-fmnist-parle.json as shipped (n = 3,
L = 25, 2 Parle epochs = 50 passes per replica) and Nesterov SGD on the same
LeNet for the same 50 passes, its lr schedule the same in passes (0.1, then
0.02 for the last 25). Both on --main-devices; the rules on --rules-devices
(parled runs "cpu" jobs one after another, "cpu:K" shares side by side as
they fit, a GPU job beside them, GPU jobs with a gpu_share below 1 on one GPU
together). The last line gives the jobs an hour, for comparing the ways of
placing them. Prints
markdown tables and, with --keep, leaves the sweep files, parled's log and
every sweep's status there."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import rules_table  # noqa: E402  (its RULES and job_for: one definition of the rules' jobs)

SHIPPED = os.path.join(ROOT, "configs", "lenet-fmnist-parle.json")


def sgd_at_equal_passes(parle):
    """SGD with the Parle job's model, data and optimiser for as many passes as
    each Parle replica makes (epochs x L), its schedule's epochs in passes."""
    L = parle["algorithm"]["L"]
    sgd = json.loads(json.dumps(parle))
    sgd["name"] = "lenet-fmnist-sgd-equal-passes"
    sgd["algorithm"] = {"name": "sgd"}
    sgd["epochs"] = parle["epochs"] * L
    sched = parle["optim"].get("lr_schedule")
    if sched:
        sgd["optim"]["lr_schedule"] = [[e * L, lr] for e, lr in sched]
    # Evaluated as often in passes as the Parle job by default (four times
    # a Parle epoch), not four times each of its 50 one-pass epochs.
    sgd["eval"] = {"every_passes": L / 4}
    return sgd


class Daemon:
    """A fresh parled on a socket and state dir of its own."""

    def __init__(self, build, workdir):
        self.sock = os.path.join(workdir, "parled.sock")
        self.log = open(os.path.join(workdir, "parled.log"), "w")
        self.ctl = os.path.join(build, "client", "parlectl")
        self.proc = subprocess.Popen(
            [os.path.join(build, "daemon", "parled"), "--socket", self.sock, "--state-dir",
             os.path.join(workdir, "state"), "--max-jobs-per-user", "1000"],
            stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if self.proc.poll() is not None:
                sys.exit("sweep_results.py: parled exited; see " + self.log.name)
            if os.path.exists(self.sock) and self.call("list").returncode == 0:
                return
            time.sleep(0.1)
        sys.exit("sweep_results.py: parled did not start; see " + self.log.name)

    def call(self, *args):
        env = dict(os.environ, PARLE_SOCKET=self.sock)
        return subprocess.run([self.ctl, *args], capture_output=True, text=True, env=env)

    def json(self, *args):
        p = self.call(*args, "--json")
        if p.returncode != 0:
            sys.exit("sweep_results.py: parlectl %s: %s" % (" ".join(args), p.stderr.strip()))
        return json.loads(p.stdout)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def submit(daemon, workdir, name, base, seeds):
    path = os.path.join(workdir, name + ".sweep.json")
    with open(path, "w") as f:
        json.dump({"name": name, "base": base, "grid": {}, "seeds": seeds}, f, indent=1)
    return daemon.json("sweep", path)["id"]


def wait_all(daemon, sweeps, keep):
    """Wait for every sweep to end; each one's row as soon as it has (so a
    run cut short still says what it finished), kept under `keep`."""
    rows, left = {}, {sid for _, _, sid in sweeps}
    while left:
        for part, base, sid in sweeps:
            if sid not in left or daemon.json("sweep", "status", sid)["state"] in ("queued",
                                                                                    "running"):
                continue
            left.discard(sid)
            rows[sid] = row(daemon, sid)
            point, errors, walls, st = rows[sid]
            print("ended: %s %s: %s (%s)" % (sid, base["name"], *fmt_errors(point, errors)),
                  flush=True)
            if keep:
                with open(os.path.join(keep, sid + ".status.json"), "w") as f:
                    json.dump({"sweep": st, "errors": errors, "walls": walls}, f, indent=1)
        if left:
            time.sleep(5)
    return rows


def makespan(daemon, sweeps):
    """Seconds from the first job's submission to the last one's end, from
    the jobs' own times (the sweeps are polled every few seconds)."""
    first, last = float("inf"), 0.0
    for _, _, sid in sweeps:
        for jid in daemon.json("sweep", "status", sid)["points"][0]["jobs"]:
            job = daemon.json("status", jid)
            first = min(first, job["submitted_at"])
            last = max(last, job["ended_at"] or 0.0)
    return last - first


def row(daemon, sid):
    """Mean, std, each seed's error and the mean wall time of a one-point sweep."""
    st = daemon.json("sweep", "status", sid)
    point = st["points"][0]
    errors, walls = [], []
    for jid in point["jobs"]:
        job = daemon.json("status", jid)
        if job["state"] == "done":
            errors.append(job["test_error"])
            walls.append(job["elapsed_s"])
        else:
            errors.append(None)
    return point, errors, walls, st


def fmt_errors(point, errors):
    """Test errors are fractions in status; shown in percent."""
    seeds = ", ".join("%.2f" % (100 * e) if e is not None else "failed" for e in errors)
    if point["test_error_mean"] is None:
        return "no job done", seeds
    if point["test_error_std"] is None:
        return "%.2f%%" % (100 * point["test_error_mean"]), seeds
    return "%.2f ± %.2f%%" % (100 * point["test_error_mean"], 100 * point["test_error_std"]), seeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=3, help="the rules' passes per replica")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--main-devices", default="cpu")
    ap.add_argument("--rules-devices", default="cpu", help="cpu, cpu:K (K cores a job), gpu ids")
    ap.add_argument("--gpu-share", type=float, default=1.0,
                    help="the rules' jobs' gpu_share (below 1: several on one GPU)")
    ap.add_argument("--only", default="main,rules")
    ap.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--train-limit", type=int, default=0, help="0: all 60,000 (a quick try: fewer)")
    ap.add_argument("--test-limit", type=int, default=0, help="0: all 10,000")
    ap.add_argument("--keep", default="")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or tmp
        os.makedirs(workdir, exist_ok=True)
        daemon = Daemon(args.build, workdir)
        try:
            sweeps = []
            if "main" in parts:
                with open(SHIPPED) as f:
                    parle = json.load(f)
                parle["data"].update(root=args.root, train_limit=args.train_limit,
                                     test_limit=args.test_limit)
                parle["devices"] = args.main_devices
                for base in (parle, sgd_at_equal_passes(parle)):
                    sweeps.append(("main", base, submit(daemon, workdir, base["name"], base,
                                                        args.seeds)))
            if "rules" in parts:
                targs = argparse.Namespace(passes=args.passes, replicas=args.replicas,
                                           train_limit=args.train_limit,
                                           test_limit=args.test_limit, root=args.root,
                                           lr=0.1, seed=42)
                for rule in rules_table.RULES:
                    base = rules_table.job_for(rule, targs)
                    base["devices"] = args.rules_devices
                    if args.gpu_share != 1.0:
                        base["gpu_share"] = args.gpu_share
                    sweeps.append(("rules", base, submit(daemon, workdir, base["name"], base,
                                                         args.seeds)))
            rows = wait_all(daemon, sweeps, args.keep)
            wall = makespan(daemon, sweeps)
            njobs = len(sweeps) * args.seeds
            print("all sweeps ended in %.1f s; %d seeds each (42, 43, ...); %d jobs, %.0f jobs "
                  "an hour (main on %s, rules on %s)" % (wall, args.seeds, njobs,
                                                         njobs * 3600 / wall, args.main_devices,
                                                         args.rules_devices))
            for part in ("main", "rules"):
                chosen = [(b, s) for p, b, s in sweeps if p == part]
                if not chosen:
                    continue
                devices = args.main_devices if part == "main" else args.rules_devices
                print()
                print("| %s | n | passes per replica | test error (mean ± std) | per seed (%%) "
                      "| wall time per job | sweep |" % ("job" if part == "main" else "rule"))
                print("|---|---|---|---|---|---|---|")
                for base, sid in chosen:
                    point, errors, walls, _ = rows[sid]
                    alg = base["algorithm"]
                    passes = base["epochs"] * (alg.get("L") or 1)
                    mean, seeds = fmt_errors(point, errors)
                    wall = "%.1f s" % (sum(walls) / len(walls)) if walls else "-"
                    print("| %s | %d | %d | %s | %s | %s | %s |" %
                          (alg["name"], alg.get("replicas", 1), passes, mean, seeds, wall, sid))
                print("(devices: %s)" % devices)
        finally:
            daemon.stop()


if __name__ == "__main__":
    main()
