#!/usr/bin/python3
"""The head-to-head table: every coupling rule on the same LeNet /
Fashion-MNIST job through build/daemon/parle-train, with the final test error
of its master, the wall time and the share of that time replica 0 spent in
its rule's sync (bench/README.md, "Coupling rules head to head").

  rules_table.py [--passes P] [--replicas N] [--train-limit M] [--test-limit T]
                 [--seed S] [--lr LR] [--only a,b] [--binary PATH] [--keep DIR]

Every rule sees the same data, seed, batch (128), learning rate (constant) and
passes over the data per replica (P gradient steps per replica and per
batch of the replica's data); n = N replicas where the rule allows it (sgd and
entropy-sgd are single-replica by definition). A Parle epoch is L passes, so
the Parle family runs with L = P and one epoch; the others run P epochs of one
pass. Runs are sequential, each on all the cores this process may use."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The rules, in the table's order: name, its replicas ("n" = --replicas), its
# own algorithm fields, and whether a job epoch is L passes (the Parle family).
# Add a rule by adding a line; extra fields go in "fields".
RULES = [
    {"name": "sgd", "replicas": 1, "fields": {}},
    {"name": "entropy-sgd", "replicas": 1, "fields": {}, "parle_epochs": True},
    {"name": "parle", "replicas": "n", "fields": {}, "parle_epochs": True},
    {"name": "elastic-sgd", "replicas": "n", "fields": {}},
    {"name": "allreduce", "replicas": "n", "fields": {}},
    {"name": "dpsgd", "replicas": "n", "fields": {"graph": "ring"}},
    {"name": "sgp", "replicas": "n", "fields": {}},
    {"name": "osgp", "replicas": "n", "fields": {}},
    {"name": "lsgd", "replicas": "n", "fields": {"tau": 4, "tau_global": 16}},
    {"name": "easgd", "replicas": "n", "fields": {}},
    {"name": "adpsgd", "replicas": "n", "fields": {}},
    {"name": "gossip", "replicas": "n", "fields": {}},
    {"name": "gosgd", "replicas": "n", "fields": {}},
]

DONE = re.compile(r"done: test error ([0-9.]+)% test loss ([0-9.naif]+) \(.*, ([0-9.]+)s, "
                  r"sync ([0-9.]+)s\)")


def job_for(rule, args):
    n = args.replicas if rule["replicas"] == "n" else rule["replicas"]
    algorithm = {"name": rule["name"], "replicas": n}
    algorithm.update(rule["fields"])
    epochs = args.passes
    if rule.get("parle_epochs"):
        algorithm["L"] = args.passes
        epochs = 1
    return {
        "name": "rules-table-" + rule["name"],
        "model": {"arch": "lenet"},
        "data": {"dataset": "fashion-mnist", "root": args.root,
                 "train_limit": args.train_limit, "test_limit": args.test_limit},
        "algorithm": algorithm,
        "optim": {"lr": args.lr, "momentum": 0.9, "nesterov": True, "batch": 128},
        "epochs": epochs, "seed": args.seed, "log_every": 1000000,
        "checkpoint": {"every_epochs": 0},
        # The master is evaluated at the epoch's end only, as it was before
        # eval.every_passes: the table times training, not evaluations.
        "eval": {"every_passes": 1000000},
    }


def run(rule, args, workdir):
    job = job_for(rule, args)
    path = os.path.join(workdir, rule["name"] + ".json")
    with open(path, "w") as f:
        json.dump(job, f, indent=1)
    t0 = time.monotonic()
    p = subprocess.run([args.binary, path], capture_output=True, text=True)
    wall = time.monotonic() - t0
    last = None
    for line in p.stderr.splitlines():
        m = DONE.search(line)
        if m:
            last = m
    if p.returncode != 0 or not last:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"rule": rule["name"], "n": job["algorithm"]["replicas"], "error": tail}
    train_s, sync_s = float(last.group(3)), float(last.group(4))
    return {"rule": rule["name"], "n": job["algorithm"]["replicas"],
            "test_error": float(last.group(1)), "train_s": train_s, "wall_s": wall,
            "sync_share": sync_s / train_s if train_s > 0 else 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--train-limit", type=int, default=0, help="0: all 60,000")
    ap.add_argument("--test-limit", type=int, default=0, help="0: all 10,000")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--only", default="", help="comma-separated rule names")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "daemon", "parle-train"))
    ap.add_argument("--keep", default="", help="keep the job files in this directory")
    args = ap.parse_args()
    wanted = [r for r in args.only.split(",") if r]
    unknown = set(wanted) - {r["name"] for r in RULES}
    if unknown:
        sys.exit("rules_table.py: unknown rule(s): " + ", ".join(sorted(unknown)))
    if not os.access(args.binary, os.X_OK):
        sys.exit("rules_table.py: %s is not built (ninja -C build)" % args.binary)
    rules = [r for r in RULES if not wanted or r["name"] in wanted]
    print("LeNet / Fashion-MNIST: %d passes per replica, %s training images, %s test images, "
          "seed %d, lr %g, batch 128, %d cores" %
          (args.passes, args.train_limit or "all", args.test_limit or "all", args.seed, args.lr,
           len(os.sched_getaffinity(0))))
    print()
    print("| rule | n | test error | wall time | training time | share in sync |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or tmp
        os.makedirs(workdir, exist_ok=True)
        for rule in rules:
            r = run(rule, args, workdir)
            if "error" in r:
                print("| %s | %d | failed: %s | | | |" % (r["rule"], r["n"], r["error"]))
            else:
                print("| %s | %d | %.2f%% | %.1f s | %.1f s | %.1f%% |" %
                      (r["rule"], r["n"], r["test_error"], r["wall_s"], r["train_s"],
                       100 * r["sync_share"]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
