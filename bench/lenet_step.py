#!/usr/bin/python3
"""One LeNet training step (forward, cross-entropy, backward, Nesterov SGD) at
batch 128: ours (bench/lenet_step.c --serve) beside PyTorch's, interleaved.

Every implementation is a child process answering "THREADS STEPS" lines with
the ms/step of that many steps; each repetition times a block of every one at
each thread count, in rotating order, so machine load hits all alike. Prints
median ms/step and torch/ours (> 1: we are faster).

PyTorch runs as installed (Debian's libtorch takes its GEMM from the system
libblas.so.3, the netlib reference BLAS unless an optimised one is installed)
and, with --openblas DIR, a second time with DIR's libblas.so.3 first on
LD_LIBRARY_PATH (bench/run.sh --fetch-openblas unpacks one there)."""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def loaded_blas():
    """The BLAS library this process has mapped, by file name."""
    with open("/proc/self/maps") as f:
        names = {line.split()[-1] for line in f if "blas" in line.split()[-1]}
    return ", ".join(sorted(os.path.basename(n) for n in names)) or "none"


def serve_torch(batch):
    """Child role: PyTorch's step, same protocol as lenet_step.c --serve."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    from torch_lenet import lenet

    torch.manual_seed(1)
    model = lenet().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    x, y = torch.rand(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    print(f"torch {torch.__version__}, BLAS: {loaded_blas()}", flush=True)
    for line in sys.stdin:
        threads, steps = map(int, line.split())
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
        print(f"{1e3 * (time.perf_counter() - t0) / steps:.6f}", flush=True)


class Server:
    def __init__(self, name, argv, env=None, banner=False):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.banner = self.proc.stdout.readline().strip() if banner else ""

    def ms_per_step(self, threads, steps):
        self.proc.stdin.write(f"{threads} {steps}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"lenet_step.py: {self.name} ended (exit {self.proc.wait()})")
        return float(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", default=os.path.join(ROOT, "build-bench", "bench", "lenet_step"),
                    help="our benchmark binary (default: %(default)s)")
    ap.add_argument("--openblas", metavar="DIR",
                    help="also run PyTorch with DIR/libblas.so.3 (an optimised BLAS; empty: no)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed block")
    ap.add_argument("--reps", type=int, default=7, help="timed blocks of each (median)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--serve-torch", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_torch:
        return serve_torch(args.batch)
    threads = [int(t) for t in args.threads.split(",")]

    me = [sys.executable, os.path.abspath(__file__), "--serve-torch", "--batch", str(args.batch)]
    servers = [Server("ours", [args.ours, "--serve", "--batch", str(args.batch)]),
               Server("torch", me, banner=True)]
    if args.openblas:
        if not os.path.exists(os.path.join(args.openblas, "libblas.so.3")):
            sys.exit(f"lenet_step.py: no libblas.so.3 in {args.openblas}")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = args.openblas + ":" + env.get("LD_LIBRARY_PATH", "")
        servers.append(Server("torch+openblas", me, env=env, banner=True))
    times = {(s.name, t): [] for s in servers for t in threads}
    for t in threads:
        for s in servers:
            s.ms_per_step(t, args.warmup)
    for k in range(args.reps):
        for t in threads:
            for j in range(len(servers)):
                s = servers[(j + k) % len(servers)]
                times[(s.name, t)].append(s.ms_per_step(t, args.steps))
    for s in servers:
        s.close()

    print(f"LeNet training step, batch {args.batch}: median ms/step [min-max] over {args.reps} "
          f"interleaved blocks of {args.steps} steps")
    for s in servers[1:]:
        print(f"  {s.name}: {s.banner}")
    head = f"{'threads':>7}" + "".join(f" {s.name:>22}" for s in servers)
    print(head + "".join(f" {s.name + '/ours':>20}" for s in servers[1:]))
    med = {key: statistics.median(v) for key, v in times.items()}
    for t in threads:
        row = f"{t:>7}"
        for s in servers:
            v = times[(s.name, t)]
            row += f" {med[(s.name, t)]:8.2f} [{min(v):5.1f}-{max(v):5.1f}]"
        for s in servers[1:]:
            row += f" {med[(s.name, t)] / med[('ours', t)]:20.2f}"
        print(row)
    for t in threads:
        line = f"SUMMARY\tLeNet step, {t} thread{'s' if t > 1 else ''}\tours {med[('ours', t)]:.2f} ms"
        for s in servers[1:]:
            m = med[(s.name, t)]
            line += f"\t{s.name} {m:.2f} ms ({s.name}/ours {m / med[('ours', t)]:.2f})"
        print(line)


if __name__ == "__main__":
    main()
