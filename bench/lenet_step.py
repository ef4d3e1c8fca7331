#!/usr/bin/python3
"""One training step (forward, cross-entropy, backward, Nesterov SGD) at batch
128: ours (bench/lenet_step.c --serve) beside PyTorch's, interleaved. --arch
picks the network: lenet (1x28x28), allcnn or wrn (WRN-16-4), 3x32x32.

Every implementation is a child process answering "THREADS STEPS" lines with
the ms/step of that many steps; each repetition times a block of every one at
each thread count, in rotating order, so machine load hits all alike. Prints
median ms/step, images/s and torch/ours (> 1: we are faster). Each repetition
also asks ours for the GFLOP/s of a --sgemm-size cube sgemm (oneDNN) at each
thread count: the machine's peak, beside which a step's GFLOP/s (3x its
forward's conv and linear multiply-adds, x 2) is put as a fraction.

PyTorch runs under each --python interpreter (default: this one; Debian's
libtorch takes its GEMM from the system libblas.so.3, the netlib reference BLAS
unless an optimised one is installed; bench/pip_torch.sh makes a venv with
pip's torch, MKL + oneDNN) and, with --openblas DIR, once more under the first
with DIR's libblas.so.3 first on LD_LIBRARY_PATH (bench/run.sh --fetch-openblas
unpacks one there). --precision bf16 runs ours with `--precision bf16` and
PyTorch under torch.autocast('cpu', dtype=torch.bfloat16).

bench/cpu_table.py builds its table from this file's servers and measure()."""
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


ARCHS = {"lenet": "LeNet", "allcnn": "All-CNN", "wrn": "WRN-16-4"}


def build_torch(arch):
    """The reference network and its input shape."""
    sys.path.insert(0, HERE)
    if arch == "lenet":
        from torch_lenet import lenet
        return lenet(), (1, 28, 28)
    import torch_cifar
    torch_cifar.check_parameter_counts()
    return (torch_cifar.allcnn() if arch == "allcnn" else torch_cifar.wrn(16, 4)), (3, 32, 32)


def serve_torch(arch, batch, precision):
    """Child role: PyTorch's step, same protocol as lenet_step.c --serve."""
    import contextlib
    import torch
    import torch.nn.functional as F

    torch.manual_seed(1)
    model, shape = build_torch(arch)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    x, y = torch.rand(batch, *shape), torch.randint(0, 10, (batch,))
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
            else contextlib.nullcontext())
    print(f"torch {torch.__version__}, BLAS: {loaded_blas()}, MKL "
          f"{'yes' if torch.backends.mkl.is_available() else 'no'}, oneDNN "
          f"{'yes' if torch.backends.mkldnn.is_available() else 'no'}", flush=True)
    for line in sys.stdin:
        threads, steps = map(int, line.split())
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            with cast:
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        print(f"{1e3 * (time.perf_counter() - t0) / steps:.6f}", flush=True)


class Server:
    def __init__(self, name, argv, env=None, banner=False):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.banner = self.proc.stdout.readline().strip() if banner else ""
        if banner and not self.banner:
            sys.exit(f"lenet_step.py: {name} ({argv[0]}) ended (exit {self.proc.wait()})")

    def send(self, request):
        self.proc.stdin.write(request + "\n")
        self.proc.stdin.flush()

    def receive(self):
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"lenet_step.py: {self.name} ended (exit {self.proc.wait()})")
        return float(line)

    def ask(self, request):
        self.send(request)
        return self.receive()

    def ms_per_step(self, threads, steps):
        return self.ask(f"{threads} {steps}")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def ours_server(binary, arch, batch, precision="fp32", env=None, name="ours"):
    argv = [binary, "--serve", "--arch", arch, "--batch", str(batch)]
    if precision != "fp32":
        argv += ["--precision", precision]
    return Server(name, argv, env=env)


def torch_server(python, arch, batch, precision="fp32", env=None, name=None):
    """PyTorch under `python`; named "torch X.Y" from its version unless
    `name` is given."""
    argv = [python, os.path.abspath(__file__), "--serve-torch", "--arch", arch,
            "--batch", str(batch), "--precision", precision]
    s = Server(name or "torch", argv, env=env, banner=True)
    if name is None:
        s.name = "torch " + ".".join(s.banner.split()[1].split(".")[:2])
    return s


def ours_supports(binary, option):
    """Whether our benchmark binary's usage names `option` (--precision)."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return option in out.stdout + out.stderr


def ours_refuses(binary, arch, precision):
    """Why our server will not run `precision` on this machine (its message:
    bf16 on a CPU without native bf16 kernels), or "" when it starts."""
    out = subprocess.run([binary, "--serve", "--arch", arch, "--batch", "8", "--precision",
                          precision], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return "" if out.returncode == 0 else (out.stderr.strip() or f"exit {out.returncode}")


SETTLE_S = 0.3


def measure(servers, threads, reps, steps, warmup, sgemm_size=0, peak_server=None):
    """Interleaved blocks: after `warmup` untimed steps of every server at
    every thread count, `reps` rounds, each asking `peak_server` (if any) for
    the sgemm GFLOP/s and every server for the ms/step of `steps` steps at
    each thread count, servers in rotating order. Each block starts after a
    pause of SETTLE_S, so that the previous server's threads have gone to
    sleep (ours at 2 threads once measured at its 1-thread rate, 2 of 7
    tables, when its 60 ms block followed PyTorch's). Returns ({(name,
    threads): [ms]}, {threads: [GFLOP/s]})."""
    times = {(s.name, t): [] for s in servers for t in threads}
    peak = {t: [] for t in threads}
    for t in threads:
        for s in servers:
            s.ms_per_step(t, warmup)
    for k in range(reps):
        for t in threads:
            if peak_server and sgemm_size > 0:
                peak[t].append(peak_server.ask(f"sgemm {t} {sgemm_size}"))
            for j in range(len(servers)):
                s = servers[(j + k) % len(servers)]
                time.sleep(SETTLE_S)
                times[(s.name, t)].append(s.ms_per_step(t, steps))
    return times, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", default=os.path.join(ROOT, "build-bench", "bench", "lenet_step"),
                    help="our benchmark binary (default: %(default)s)")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="lenet",
                    help="the network (default: %(default)s)")
    ap.add_argument("--python", action="append", metavar="PY",
                    help="interpreter to run PyTorch with, repeatable (default: this one; "
                         "bench/pip_torch.sh makes build-bench/torch-pip/bin/python)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="ours with --precision, PyTorch under autocast for bf16")
    ap.add_argument("--openblas", metavar="DIR",
                    help="also run PyTorch with DIR/libblas.so.3 (an optimised BLAS; empty: no)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed block")
    ap.add_argument("--reps", type=int, default=7, help="timed blocks of each (median)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--sgemm-size", type=int, default=2048,
                    help="n of the n^3 sgemm measuring the peak (0: none)")
    ap.add_argument("--plain-torch", action=argparse.BooleanOptionalAction, default=True,
                    help="also PyTorch as installed (netlib BLAS: minutes a step on the CIFAR "
                         "nets; default: yes)")
    ap.add_argument("--serve-torch", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--print-gflop", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_torch:
        return serve_torch(args.arch, args.batch, args.precision)
    if args.print_gflop:
        return print(step_gflop(args.arch, args.batch))
    threads = [int(t) for t in args.threads.split(",")]
    title = ARCHS[args.arch] + (f", {args.precision}" if args.precision != "fp32" else "")
    pythons = args.python or [sys.executable]

    if args.precision != "fp32" and not ours_supports(args.ours, "--precision"):
        sys.exit(f"lenet_step.py: {args.ours} has no --precision")
    servers = [ours_server(args.ours, args.arch, args.batch, args.precision)]
    if args.plain_torch:
        for py in pythons:
            servers.append(torch_server(py, args.arch, args.batch, args.precision))
    if args.openblas:
        if not os.path.exists(os.path.join(args.openblas, "libblas.so.3")):
            sys.exit(f"lenet_step.py: no libblas.so.3 in {args.openblas}")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = args.openblas + ":" + env.get("LD_LIBRARY_PATH", "")
        servers.append(torch_server(pythons[0], args.arch, args.batch, args.precision, env=env,
                                    name="torch+openblas"))
    names = [s.name for s in servers]
    if len(set(names)) != len(names):
        sys.exit(f"lenet_step.py: two references named alike ({', '.join(names)})")
    times, peak = measure(servers, threads, args.reps, args.steps, args.warmup,
                          args.sgemm_size, servers[0])
    for s in servers:
        s.close()

    flops = torch_step_gflop(pythons[0], args.arch, args.batch)
    print(f"{title} training step, batch {args.batch}, {flops:.2f} GFLOP/step: median ms/step "
          f"[min-max] over {args.reps} interleaved blocks of {args.steps} steps")
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
    print("images/s and GFLOP/s (median step)" +
          (f", as a fraction of the sgemm peak ({args.sgemm_size}^3, oneDNN, median of "
           f"{args.reps})" if args.sgemm_size > 0 else ""))
    for t in threads:
        pk = statistics.median(peak[t]) if peak[t] else 0
        row = f"{t:>7}" + (f"  sgemm {pk:6.1f} GFLOP/s [{min(peak[t]):.1f}-{max(peak[t]):.1f}]"
                           if pk else "")
        for s in servers:
            ips, gf = args.batch * 1e3 / med[(s.name, t)], flops * 1e3 / med[(s.name, t)]
            row += f"  {s.name} {ips:7.1f} img/s {gf:6.1f} GFLOP/s" + (
                f" ({100 * gf / pk:4.1f}%)" if pk else "")
        print(row)
    for t in threads:
        ours = med[("ours", t)]
        line = (f"SUMMARY\t{title} step, {t} thread{'s' if t > 1 else ''}\tours {ours:.2f} ms "
                f"({args.batch * 1e3 / ours:.1f} img/s")
        if peak[t]:
            pk = statistics.median(peak[t])
            line += f", {100 * flops * 1e3 / ours / pk:.1f}% of sgemm {pk:.1f} GFLOP/s"
        line += ")"
        for s in servers[1:]:
            m = med[(s.name, t)]
            line += (f"\t{s.name} {m:.2f} ms ({args.batch * 1e3 / m:.1f} img/s, "
                     f"{s.name}/ours {m / ours:.2f})")
        print(line)


def torch_step_gflop(python, arch, batch):
    """step_gflop under `python` (this one may have no torch)."""
    out = subprocess.run([python, os.path.abspath(__file__), "--print-gflop", "--arch", arch,
                          "--batch", str(batch)], capture_output=True, text=True, check=True)
    return float(out.stdout)


def step_gflop(arch, batch):
    """GFLOP of one training step at this batch, from the reference's layers:
    the forward's conv and linear multiply-adds x 2, x 3 with the backward
    (the data and the weight gradients are each a product of the same size);
    lenet_step.c counts ours the same way from our layer list."""
    import torch
    from torch import nn
    model, shape = build_torch(arch)
    macs = []

    def count(mod, inp, out):
        per_out = mod.weight[0].numel() if isinstance(mod, nn.Conv2d) else mod.in_features
        macs.append(out[0].numel() * per_out)

    for mod in model.modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            mod.register_forward_hook(count)
    with torch.no_grad():
        model.eval()(torch.zeros(1, *shape))
    return 3 * 2 * sum(macs) * batch * 1e-9


if __name__ == "__main__":
    main()
