#!/usr/bin/python3
"""One table of CPU training-step speed: LeNet, All-CNN and WRN-16-4,
one step at batch 128, ours against PyTorch from pip (bench/pip_torch.sh) and,
for LeNet, Debian's (python3-torch, if /usr/bin/python3 has it), at 1 and 2
threads, with bf16 columns for the CIFAR nets when our lenet_step has
--precision and runs it on this CPU (oneDNN's native bf16 kernels: AVX512-BF16
or AMX; elsewhere it refuses, and the table says so) (PyTorch:
torch.autocast('cpu', dtype=torch.bfloat16)).

Everything of one network runs interleaved in one run (lenet_step.py's
servers and measure()): medians of blocks, the sgemm GFLOP/s of our gemm at
each thread count asked in every round, and the load average printed at the
start and the end. Our child's OpenMP threads wait as parled's do
(backend_openmp_defaults: 1000 polls, then sleep; --wait-policy P sets
OMP_WAIT_POLICY=P for it instead): on a shared machine a spinning OpenMP team
collapses whenever a thread is descheduled. PyTorch runs as a user runs it,
with the inherited environment (its OpenMP threads spin: passive cost it
about a third of its 2-thread rate here).

    bench/cpu_table.py            about 10-15 min on 2 cores
    bench/cpu_table.py --quick    about 5 min, noisier
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import lenet_step as ls  # noqa: E402

# Per network: (reps, steps per block, warm-up steps), full and --quick.
PLAN = {"lenet": ((7, 20, 5), (3, 10, 3)),
        "allcnn": ((3, 1, 1), (2, 1, 1)),
        "wrn": ((3, 1, 1), (2, 1, 1))}


def has_torch(python):
    return python and os.path.exists(python) and subprocess.run(
        [python, "-c", "import torch"], capture_output=True).returncode == 0


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_arch(args, arch, env, torch_env, bf16):
    """Measures one network; returns rows of (precision, threads, {name: ms}, sgemm)."""
    reps, steps, warmup = PLAN[arch][1 if args.quick else 0]
    precisions = ["fp32"] + (["bf16"] if bf16 and arch != "lenet" else [])
    servers, columns = [], []
    for prec in precisions:
        tag = "" if prec == "fp32" else " bf16"
        servers.append(ls.ours_server(args.ours, arch, args.batch, prec, env, "ours" + tag))
        pip = ls.torch_server(args.pip_python, arch, args.batch, prec, torch_env)
        pip.name += tag
        servers.append(pip)
        columns.append((prec, "ours" + tag, [pip.name]))
    if arch == "lenet" and args.debian:
        deb = ls.torch_server(args.debian_python, arch, args.batch, "fp32", torch_env)
        deb.name += " (Debian)"
        servers.append(deb)
        columns[0][2].append(deb.name)
    for s in servers:
        if s.banner:
            print(f"  {s.name}: {s.banner}", flush=True)
    times, peak = ls.measure(servers, args.threads, reps, steps, warmup, args.sgemm_size,
                             servers[0])
    for s in servers:
        s.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = []
    for prec, ours, refs in columns:
        for t in args.threads:
            rows.append((prec, t, {n: med[(n, t)] for n in [ours] + refs},
                         statistics.median(peak[t]) if peak[t] else 0.0, ours, refs))
    return rows, f"{reps} rounds of {steps}-step blocks after {warmup} warm-up"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", default=os.path.join(ROOT, "build-bench", "bench", "lenet_step"))
    ap.add_argument("--pip-python", default=os.path.join(ROOT, "build-bench", "torch-pip", "bin",
                                                         "python"),
                    help="PyTorch from pip (bench/pip_torch.sh makes it; default: %(default)s)")
    ap.add_argument("--debian-python", default="/usr/bin/python3",
                    help="Debian's PyTorch, LeNet only, skipped if it has no torch")
    ap.add_argument("--archs", default="lenet,allcnn,wrn")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--sgemm-size", type=int, default=2048)
    ap.add_argument("--wait-policy", default="",
                    help="OMP_WAIT_POLICY for our child ('': parled's default, or as inherited)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds (about 5 min)")
    args = ap.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    if not has_torch(args.pip_python):
        sys.exit(f"cpu_table.py: no torch under {args.pip_python}: run bench/pip_torch.sh")
    args.debian = has_torch(args.debian_python)
    bf16 = ls.ours_supports(args.ours, "--precision")
    refused = ls.ours_refuses(args.ours, "allcnn", "bf16") if bf16 else ""
    bf16 = bf16 and not refused
    env, torch_env = dict(os.environ), dict(os.environ)
    if args.wait_policy:
        env["OMP_WAIT_POLICY"] = args.wait_policy

    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"cpu: {cpu_model()}, {os.cpu_count()} cores; OMP_WAIT_POLICY ours "
          f"{env.get('OMP_WAIT_POLICY', '(unset: 1000 polls, then sleep)')}, PyTorch's "
          f"{torch_env.get('OMP_WAIT_POLICY', '(unset)')}")
    print(f"command: {' '.join(sys.argv)}")
    print(f"load average at start: {load()}")
    if not args.debian:
        print(f"  (no torch under {args.debian_python}: Debian's PyTorch left out)")
    if refused:
        print(f"  (ours refuses bf16 on this CPU: {refused}: no bf16 rows)")
    elif not bf16:
        print(f"  ({args.ours} has no --precision: no bf16 rows)")
    table = []
    for arch in args.archs.split(","):
        print(f"{ls.ARCHS[arch]}...", flush=True)
        rows, how = run_arch(args, arch, env, torch_env, bf16)
        gflop = ls.torch_step_gflop(args.pip_python, arch, args.batch)
        print(f"  {gflop:.2f} GFLOP/step, {how}", flush=True)
        table += [(arch, gflop) + r for r in rows]
    print(f"load average at end: {load()}")

    print("\nimages/s (median); ratio = ours' rate / the reference's (> 1: we are faster); "
          "% = the step's GFLOP/s of the sgemm peak measured beside it")
    print("| network | precision | threads | ours img/s | % of sgemm | sgemm GFLOP/s "
          "| reference img/s | ours/reference |")
    print("|---|---|---|---|---|---|---|---|")
    rate = {}
    for arch, gflop, prec, t, ms, pk, ours, refs in table:
        ips = args.batch * 1e3 / ms[ours]
        rate[(arch, prec, t, "ours")] = ips
        frac = f"{100 * gflop * 1e3 / ms[ours] / pk:.0f}%" if pk and prec == "fp32" else "-"
        refs_txt = ", ".join(f"{n} {args.batch * 1e3 / ms[n]:.1f}" for n in refs)
        ratio = ", ".join(f"{ms[n] / ms[ours]:.2f}" for n in refs)
        for n in refs:
            rate[(arch, prec, t, n)] = args.batch * 1e3 / ms[n]
        print(f"| {ls.ARCHS[arch]} | {prec} | {t} | {ips:.1f} | {frac} | {pk:.1f} | {refs_txt} "
              f"| {ratio} |")
    if ("lenet", "fp32", 1, "ours") in rate and len(args.threads) > 1:
        best = lambda who: max(rate[("lenet", "fp32", t, who)] for t in args.threads)
        pip = [k[3] for k in rate if k[0] == "lenet" and k[3] != "ours" and "Debian" not in k[3]]
        if pip:
            print(f"\nLeNet: ours best / {pip[0]} best = {best('ours') / best(pip[0]):.2f} "
                  f"(goal >= 3); ours {args.threads[-1]} threads / 1 thread = "
                  f"{rate[('lenet', 'fp32', args.threads[-1], 'ours')] / rate[('lenet', 'fp32', 1, 'ours')]:.2f}"
                  f" (goal >= 1.6)")


if __name__ == "__main__":
    main()
