#!/usr/bin/python3
"""What algorithm.on_replica_failure "reseed" costs when nothing fails: its two
agreements (collectives) per outer iteration (docs/config.md).

  reseed_cost.py [JOB.json] [--parle-train PATH] [--train-limit N]
                 [--outer K] [--reps R]

Runs parle-train on JOB (default configs/lenet-fmnist-parle.json) cut to N
training images (default 6000), one progress line per outer iteration, with
on_replica_failure "fail" and "reseed" in turn, R times each (interleaved, so
both see the same load); each run is stopped after K + 1 progress lines and
timed from the first line to the last (the first outer iteration, with the
start-up, untimed). Prints each run's seconds per outer iteration, the medians
and reseed / fail."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def per_outer(train, job, mode, k):
    """Seconds per outer iteration of one run of job with on_replica_failure mode."""
    job = json.loads(json.dumps(job))
    job["algorithm"]["on_replica_failure"] = mode
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    stamps = []
    proc = subprocess.Popen([train, f.name], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)
    try:
        for line in proc.stderr:
            if line.startswith("epoch ") and " step " in line:
                stamps.append(time.monotonic())
                if len(stamps) == k + 1:
                    break
    finally:
        proc.kill()
        proc.wait()
        os.unlink(f.name)
    if len(stamps) < k + 1:
        sys.exit(f"reseed_cost: parle-train gave {len(stamps)} progress lines, wanted {k + 1}")
    return (stamps[-1] - stamps[0]) / k


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", nargs="?", default=os.path.join(ROOT, "configs", "lenet-fmnist-parle.json"))
    ap.add_argument("--parle-train", default=os.path.join(ROOT, "build", "daemon", "parle-train"))
    ap.add_argument("--train-limit", type=int, default=6000)
    ap.add_argument("--outer", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    with open(a.job) as f:
        job = json.load(f)
    job["data"]["train_limit"] = a.train_limit
    job["epochs"] = 1
    job["log_every"] = 1
    job["eval"] = {"every_passes": 1000}
    job.pop("checkpoint", None)
    alg = job["algorithm"]
    print(f"{a.job}: {alg['name']}, {alg.get('replicas')} replicas, L {alg.get('L')}, "
          f"{a.train_limit} images, {a.outer} outer iterations timed, {a.reps} reps")
    times = {"fail": [], "reseed": []}
    for rep in range(a.reps):
        for mode in times:
            t = per_outer(a.parle_train, job, mode, a.outer)
            times[mode].append(t)
            print(f"  rep {rep + 1} {mode:6s}: {1000 * t:.1f} ms per outer iteration", flush=True)
    med = {m: statistics.median(v) for m, v in times.items()}
    for m, v in times.items():
        print(f"{m:6s}: median {1000 * med[m]:.1f} ms per outer iteration "
              f"(range {1000 * min(v):.1f}-{1000 * max(v):.1f})")
    print(f"reseed / fail: {med['reseed'] / med['fail']:.3f}")


if __name__ == "__main__":
    main()
