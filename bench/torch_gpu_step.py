#!/usr/bin/env python3
"""One training step at batch 128 on a GPU: ours (bench/gpu_step.c) beside
PyTorch's on the same GPU, for LeNet, All-CNN, WRN-16-4 and WRN-28-10, in
fp32, tf32 and bf16 (bench/README.md, "GPU step").

Ours runs first as a child process (its RESULT lines give the step and our
kernel floor), then PyTorch in this process: eager mode, cudnn.benchmark on,
the TF32 flags of the column (fp32: off; tf32 and bf16: on), bf16 through
autocast, and the faster of NCHW and channels_last per network and column
(the table says which). Its step does what ours does: copy the batch from
pinned host memory, forward, cross-entropy, backward, Nesterov SGD, and wait
for the loss (loss.item(); our runner reads every step's loss). Prints
median ms/step and the ratios torch/ours (> 1: we are faster) and
ours/floor (1: nothing but our kernels runs).

Ours runs once per --conv-algorithms value (timed: cuDNN's find calls;
heuristic: cuDNN's heuristics; auto: what a job gets by default, timed at
fp32 and tf32, heuristic at bf16), a row each; the "job" column marks
"auto" the row whose choice `auto` picks at that precision (what a job gets). --batchnorm
classic,split runs ours with each batch norm (a job's gpu_batchnorm), a row
each (the "bn" column).
With --compile, PyTorch also runs its model through torch.compile (default
mode, the faster layout of eager's; compile time excluded, reported beside
the table, not a goal). The FLOPs of a step (forward and backward, counted
by PyTorch's FlopCounterMode on its model) against the chip's bf16 matrix
rate measured in the same run (a square bf16 GEMM) give each step's share
of the hardware: "ours %peak" = FLOPs / (our step x that rate)."""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ARCHS = ["lenet", "allcnn", "wrn16", "wrn28"]
PRECISIONS = ["fp32", "tf32", "bf16"]


def run_ours(args, algorithms):
    """Our step and kernel floor per (arch, precision, algorithms), in ms,
    from gpu_step."""
    ours, rc = {}, 0
    for algos in algorithms:
        cmd = [args.ours, "--arch", args.arch, "--precision", args.precision,
               "--conv-algorithms", algos, "--batchnorm", args.batchnorm,
               "--device", str(args.device), "--batch",
               str(args.batch), "--steps", str(args.steps), "--reps", str(args.reps),
               "--warmup", str(args.warmup)]
        print("$ " + " ".join(cmd), flush=True)
        # Each row as gpu_step prints it: a run cut short keeps what it got.
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1) as proc:
            for line in proc.stdout:
                line = line.rstrip("\n")
                f = line.split("\t")
                if f[0] == "RESULT":
                    ours[(f[1], f[2], algos, f[8])] = (float(f[3]), float(f[4]), f[6], f[7])
                print(line, flush=True)
        if proc.returncode not in (0, 77):
            print(f"gpu_step exited {proc.returncode}", flush=True)
        if proc.returncode == 77:
            return ours, 77
        rc = rc or proc.returncode
    return ours, rc


def build_torch(arch):
    sys.path.insert(0, HERE)
    if arch == "lenet":
        from torch_lenet import lenet
        return lenet(), (1, 28, 28)
    import torch_cifar
    torch_cifar.check_parameter_counts()
    if arch == "allcnn":
        return torch_cifar.allcnn(), (3, 32, 32)
    return (torch_cifar.wrn(16, 4) if arch == "wrn16" else torch_cifar.wrn(28, 10)), (3, 32, 32)


def torch_step_ms(torch, arch, precision, channels_last, args, compiled=False, flops=None):
    """Median ms per step of PyTorch's step, as the module docstring says;
    through torch.compile when `compiled` (its compile time printed). With a
    dict `flops`, also counts one step's FLOPs into flops["step"]."""
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device("cuda", args.device)
    torch.manual_seed(1)
    model, shape = build_torch(arch)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(dev, memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    forward = torch.compile(model) if compiled else model
    x_host = torch.rand(args.batch, *shape).pin_memory()
    y_host = torch.randint(0, 10, (args.batch,)).pin_memory()

    def step():
        x = x_host.to(dev, non_blocking=True).contiguous(memory_format=fmt)
        y = y_host.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(forward(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    if flops is not None:
        try:
            from torch.utils.flop_counter import FlopCounterMode  # PyTorch 2.1 on
        except ImportError:
            flops["step"] = float("nan")
        else:
            counter = FlopCounterMode(display=False)
            with counter:
                step()
            flops["step"] = counter.get_total_flops()
    t0 = time.perf_counter()
    step()  # compiles when compiled
    if compiled:
        print(f"  torch.compile {arch} {precision}: first step {time.perf_counter() - t0:.1f} s",
              flush=True)
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.reps):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize(dev)
        times.append((time.perf_counter() - t0) / args.steps * 1e3)
    del model, opt, forward
    torch.cuda.empty_cache()
    return statistics.median(times)


def bf16_matrix_tflops(torch, device, n=8192, reps=20):
    """The chip's bf16 GEMM rate, TFLOP/s: an n x n x n product, median of reps."""
    dev = torch.device("cuda", device)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        a @ b
        torch.cuda.synchronize(dev)
        times.append(time.perf_counter() - t0)
    return 2 * n ** 3 / statistics.median(times) / 1e12


def run_torch(args, archs, precisions):
    """PyTorch per (arch, precision): eager's best layout (ms, layout name),
    torch.compile's ms in that layout (with --compile, else None), and the
    step's FLOPs; plus the chip's bf16 matrix rate (TFLOP/s)."""
    try:
        import torch
    except ImportError as e:
        print(f"PyTorch: not importable ({e}); ours only")
        return {}, None
    if not torch.cuda.is_available():
        print("PyTorch: no CUDA device; ours only")
        return {}, None
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name(args.device)}", flush=True)
    peak = bf16_matrix_tflops(torch, args.device)
    print(f"  bf16 matrix rate (8192^3 GEMM): {peak:.0f} TFLOP/s", flush=True)
    best = {}
    for arch in archs:
        for precision in precisions:
            flops = {}
            for channels_last in (False, True):
                ms = torch_step_ms(torch, arch, precision, channels_last, args,
                                   flops=None if channels_last else flops)
                layout = "NHWC" if channels_last else "NCHW"
                print(f"  torch {arch:7s} {precision:5s} {layout}: {ms:9.3f} ms", flush=True)
                if (arch, precision) not in best or ms < best[(arch, precision)][0]:
                    best[(arch, precision)] = (ms, layout)
            ms, layout = best[(arch, precision)]
            compiled = (torch_step_ms(torch, arch, precision, layout == "NHWC", args,
                                      compiled=True) if args.compile else None)
            best[(arch, precision)] = (ms, layout, compiled, flops["step"])
    return best, peak


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ours", default=os.path.join(ROOT, "build-gpu", "bench", "gpu_step"),
                   help="our gpu_step binary (default build-gpu/bench/gpu_step)")
    p.add_argument("--arch", default=",".join(ARCHS))
    p.add_argument("--precision", default=",".join(PRECISIONS))
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--conv-algorithms", default="timed,heuristic",
                   help="ours with each of these (gpu_step --conv-algorithms)")
    p.add_argument("--batchnorm", default="classic",
                   help="ours with each of these batch norms (gpu_step --batchnorm)")
    p.add_argument("--compile", action="store_true",
                   help="also PyTorch through torch.compile (minutes of compiling)")
    p.add_argument("--no-torch", action="store_true", help="ours only")
    args = p.parse_args()
    archs, precisions = args.arch.split(","), args.precision.split(",")
    if any(a not in ARCHS for a in archs) or any(q not in PRECISIONS for q in precisions):
        p.error(f"--arch from {ARCHS}, --precision from {PRECISIONS}")

    algorithms = args.conv_algorithms.split(",")
    if any(a not in ("auto", "timed", "heuristic") for a in algorithms):
        p.error("--conv-algorithms from auto, timed, heuristic")
    batchnorms = args.batchnorm.split(",")
    if any(b not in ("classic", "split") for b in batchnorms):
        p.error("--batchnorm from classic, split")

    ours, rc = run_ours(args, algorithms)
    if rc == 77:
        return 77
    theirs, peak = ({}, None) if args.no_torch else run_torch(args, archs, precisions)

    nan = float("nan")
    print(f"\nGPU step, batch {args.batch}, median ms/step (torch/ours > 1: we are faster; "
          "ours/floor 1: only our kernels run; ours %peak: the step's FLOPs at the chip's "
          f"measured bf16 matrix rate, {peak or nan:.0f} TFLOP/s)")
    header = ("arch", "prec", "algos", "job", "bn", "ours", "floor", "torch", "layout", "compile",
              "torch/ours", "compile/ours", "ours/floor", "GFLOP", "ours %peak")
    print("%-7s %-5s %-9s %-7s %-7s %9s %9s %9s %6s %9s %10s %12s %10s %8s %10s" % header)
    summary = []
    for arch in archs:
        for precision in precisions:
            t, layout, c, flops = theirs.get((arch, precision), (nan, "-", None, nan))
            c = nan if c is None else c
            for algos in algorithms:
                for bn in batchnorms:
                    o, fl, ran, role = ours.get((arch, precision, algos, bn),
                                                (nan, nan, algos, "?"))
                    share = flops / (o * 1e-3) / (peak * 1e12) * 100 if peak else nan
                    print("%-7s %-5s %-9s %-7s %-7s %9.3f %9.3f %9.3f %6s %9.3f %10.2f %12.2f "
                          "%10.2f %8.1f %10.1f" % (arch, precision, ran, role, bn, o, fl, t,
                                                   layout, c, t / o, c / o,
                                                   o / fl if fl > 0 else nan, flops / 1e9,
                                                   share))
                    summary.append(f"SUMMARY\tgpu {arch} {precision} {ran} ({role}) bn {bn}"
                                   f"\tours {o:.3f} ms\tfloor {fl:.3f} ms"
                                   f"\ttorch {t:.3f} ms ({layout})"
                                   f"\tcompile {c:.3f} ms\ttorch/ours {t / o:.2f}"
                                   f"\tours {share:.1f}% of bf16 peak")
    print("\n".join(summary))
    want = len(archs) * len(precisions) * len(algorithms) * len(batchnorms)
    return 0 if len(ours) == want else 1


if __name__ == "__main__":
    sys.exit(main())
