#!/usr/bin/python3
"""PyTorch's side of the per-layer breakdown: one training step of the same
network as `lenet_step --layers` (LeNet, All-CNN, WRN-16-4 at batch 128),
under torch.profiler, its self CPU time summed by the same kinds our breakdown
prints (conv fwd / bwd-data / bwd-filter together as PyTorch fuses them, bn,
relu, pooling, dropout, linear, loss, optimizer update, the rest).

    torch_layers.py [--arch lenet|allcnn|wrn] [--threads 1] [--steps 3]
        run under the interpreter that has the PyTorch to profile, e.g.
        build-bench/torch-pip/bin/python bench/torch_layers.py --arch wrn

The step is the one lenet_step.py times (Nesterov SGD, random inputs); the
first of --steps + 1 steps is a warm-up and is not profiled."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lenet_step import build_torch  # noqa: E402

# aten op name fragments -> our breakdown's kinds, first match wins.
KINDS = [("convolution_backward", "conv bwd (data + filter)"),
         ("convolution", "conv fwd"), ("conv", "conv fwd"),
         ("batch_norm", "bn"), ("relu", "relu"), ("threshold", "relu"),
         ("max_pool", "max pooling"), ("avg_pool", "avg pooling"),
         ("dropout", "dropout"), ("bernoulli", "dropout"),
         ("addmm", "linear"), ("mm", "linear"), ("linear", "linear"),
         ("log_softmax", "loss"), ("nll_loss", "loss"), ("cross_entropy", "loss"),
         ("_foreach", "optimizer update"), ("sgd", "optimizer update")]


def kind_of(name):
    low = name.lower()
    for frag, kind in KINDS:
        if frag in low:
            return kind
    return "other (autograd, copies, adds)"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="lenet", choices=["lenet", "allcnn", "wrn"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model, shape = build_torch(args.arch)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    x, y = torch.rand(args.batch, *shape), torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    by_kind = {}
    for ev in prof.key_averages():
        kind = kind_of(ev.key)
        by_kind[kind] = by_kind.get(kind, 0.0) + ev.self_cpu_time_total
    total = sum(by_kind.values())
    print(f"torch {torch.__version__}, {args.arch}, batch {args.batch}, {args.threads} "
          f"thread(s): {total / 1e3 / args.steps:.2f} ms a step (self CPU time, profiled)")
    for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:<32} {us / 1e3 / args.steps:10.3f} ms {100 * us / total:6.1f}%")


if __name__ == "__main__":
    main()
