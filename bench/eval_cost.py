#!/usr/bin/python3
"""What the master's evaluations cost a job: its wall time against its
training time, with eval.every_passes at its default and at a fixed cadence.

  eval_cost.py [--build DIR] [--reps R] [--lenet] [--lenet-limits TRAIN,TEST]

Runs parle-train (DIR/daemon/parle-train, default build-bench) on each job,
each setting in turn, R times interleaved, and prints per run its wall time
(the process's, data loading included), replica 0's training time (steps +
sync + loader waits, from the last evaluation line), its seconds in
evaluations (eval_s), the evaluations made, the last progress line's
images_per_sec and the final test error; then the medians.

The jobs:
  allcnn-1pass  All-CNN, plain SGD (one-pass epochs), 2 epochs of 2,000
                synthetic CIFAR-shaped images (3x32x32), 1,000 test images,
                batch 128; eval.bn recompute. Settings: the default
                (every_passes 0) and every_passes 0.25 (four an epoch).
  lenet-parle   with --lenet: configs/lenet-fmnist-parle.json cut to its
                first epoch (epochs 1, no checkpoints; --lenet-limits keeps
                the first TRAIN training and TEST test images, default 0,0:
                all 60,000 and 10,000). Settings:
                the default and every_passes 1000 (the epoch's end only).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EVAL_LINE = re.compile(r"^epoch (\S+)/\d+ done: test error ([\d.]+)% .*\(eval took [\d.]+ s, "
                       r"([\d.]+)s, steps ([\d.]+)s, sync ([\d.]+)s, loader wait ([\d.]+)s, "
                       r"evaluations ([\d.]+)s\)$")
PROGRESS_LINE = re.compile(r" (\d+) img/s ")


def allcnn_job():
    return {"name": "allcnn-1pass", "model": {"arch": "allcnn"},
            "data": {"dataset": "synthetic", "train_limit": 2000, "test_limit": 1000},
            "algorithm": {"name": "sgd"},
            "optim": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "batch": 128},
            "epochs": 2, "seed": 1, "devices": "cpu", "checkpoint": {"every_epochs": 0}}


def lenet_job(limits):
    with open(os.path.join(ROOT, "configs", "lenet-fmnist-parle.json")) as f:
        job = json.load(f)
    job["epochs"] = 1
    job["checkpoint"] = {"every_epochs": 0}
    job["data"]["train_limit"], job["data"]["test_limit"] = map(int, limits.split(","))
    return job


def run_once(train, job, every, tmp):
    job = json.loads(json.dumps(job))
    job["eval"] = {"every_passes": every}
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    t0 = time.monotonic()
    p = subprocess.run([train, path], capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="passive"))
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"eval_cost: {train} failed:\n{p.stderr}")
    evals = [m for m in map(EVAL_LINE.match, p.stderr.splitlines()) if m]
    rates = PROGRESS_LINE.findall(p.stderr)
    last = evals[-1]
    return {"wall": wall, "train": float(last[4]) + float(last[5]) + float(last[6]),
            "eval_s": float(last[7]), "evals": len(evals),
            "ips": float(rates[-1]) if rates else float("nan"), "error": float(last[2])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--lenet", action="store_true")
    ap.add_argument("--lenet-limits", default="0,0")
    a = ap.parse_args()
    train = os.path.join(a.build, "daemon", "parle-train")
    jobs = [("allcnn-1pass", allcnn_job(), [0, 0.25])]
    if a.lenet:
        jobs.append(("lenet-parle", lenet_job(a.lenet_limits), [0, 1000]))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {train}, load {os.getloadavg()[0]:.2f}")
    print(f"{'job':14} {'every_passes':>12} {'wall s':>7} {'train s':>7} {'eval_s':>7} "
          f"{'evals':>5} {'img/s':>6} {'error %':>7}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for name, job, settings in jobs:
                for every in settings:
                    r = run_once(train, job, every, tmp)
                    results.setdefault((name, every), []).append(r)
                    print(f"{name:14} {every:>12} {r['wall']:7.1f} {r['train']:7.1f} "
                          f"{r['eval_s']:7.1f} {r['evals']:5} {r['ips']:6.0f} {r['error']:7.2f}",
                          flush=True)
    print(f"# medians, load {os.getloadavg()[0]:.2f}")
    for (name, every), rs in results.items():
        wall = statistics.median(r["wall"] for r in rs)
        tr = statistics.median(r["train"] for r in rs)
        ev = statistics.median(r["eval_s"] for r in rs)
        print(f"{name:14} {every:>12} wall {wall:6.1f} s, training {tr:6.1f} s "
              f"(wall/training {wall / tr:.2f}), evaluations {ev:5.1f} s ({100 * ev / wall:.0f}% "
              f"of the wall), {rs[0]['evals']} evaluations")


if __name__ == "__main__":
    main()
