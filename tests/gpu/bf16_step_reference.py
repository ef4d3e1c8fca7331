#!/usr/bin/env python3
"""How far a LeNet training step with bf16 activations lands from the same
step in fp32, when nothing is wrong: PyTorch emulates the CUDA backend's bf16
mode on the CPU (every layer's output and every activation gradient rounded
to bf16, convolution and linear weights rounded to bf16 where they are used,
weights, gradients and BN statistics fp32) and prints, per parameter tensor,
|g_bf16 - g_fp32| / |g_fp32|, the measure test_gpu_bf16 prints for our GPU
step against our CPU step. Used to set test_gpu_bf16's step bounds
(docs/gpu.md). No GPU needed.

    tests/gpu/bf16_step_reference.py [--batch 8] [--seeds 5]
"""
import argparse

import torch
import torch.nn.functional as F


class RoundBF16(torch.autograd.Function):
    """Rounds to bf16 (nearest even) forward and the gradient backward."""

    @staticmethod
    def forward(ctx, t):
        return t.to(torch.bfloat16).to(torch.float32)

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.bfloat16).to(torch.float32)


def lenet_step(params, x, labels, masks, bf16):
    q = RoundBF16.apply if bf16 else (lambda t: t)
    p = params

    def bn(h, name):
        dims = [0] + list(range(2, h.dim()))
        mean = h.mean(dims, keepdim=True)
        var = h.var(dims, unbiased=False, keepdim=True)
        shape = [1, -1] + [1] * (h.dim() - 2)
        return q((h - mean) / torch.sqrt(var + 1e-5) * p[name + ".weight"].view(shape)
                 + p[name + ".bias"].view(shape))

    h = q(x)
    h = q(F.conv2d(h, q(p["conv1.weight"]), p["conv1.bias"]))
    h = F.max_pool2d(F.relu(bn(h, "bn1")), 3, 3)
    h = q(h * masks[0])
    h = q(F.conv2d(h, q(p["conv2.weight"]), p["conv2.bias"]))
    h = F.max_pool2d(F.relu(bn(h, "bn2")), 2, 2)
    h = q(h * masks[1]).flatten(1)
    h = q(F.linear(h, q(p["fc1.weight"]), q(p["fc1.bias"])))
    h = q(F.relu(bn(h, "bn3")) * masks[2])
    logits = q(F.linear(h, q(p["fc2.weight"]), q(p["fc2.bias"])))
    loss = F.cross_entropy(logits, labels)
    grads = torch.autograd.grad(loss, list(p.values()))
    return loss.item(), dict(zip(p.keys(), grads))


def make_params(gen):
    shapes = {"conv1.weight": (20, 1, 5, 5), "conv1.bias": (20,), "bn1.weight": (20,),
              "bn1.bias": (20,), "conv2.weight": (50, 20, 5, 5), "conv2.bias": (50,),
              "bn2.weight": (50,), "bn2.bias": (50,), "fc1.weight": (500, 200),
              "fc1.bias": (500,), "bn3.weight": (500,), "bn3.bias": (500,),
              "fc2.weight": (10, 500), "fc2.bias": (10,)}
    params = {}
    for name, shape in shapes.items():
        if name.startswith("bn") and name.endswith("weight"):
            t = torch.ones(shape)
        elif name.endswith("bias"):
            t = torch.zeros(shape)
        else:
            fan_in = 1
            for s in shape[1:]:
                fan_in *= s
            t = torch.randn(shape, generator=gen) * (2.0 / fan_in) ** 0.5
        params[name] = t.requires_grad_()
    return params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    worst = {}
    for seed in range(args.seeds):
        gen = torch.Generator().manual_seed(seed)
        params = make_params(gen)
        x = torch.rand(args.batch, 1, 28, 28, generator=gen)
        labels = torch.randint(0, 10, (args.batch,), generator=gen)
        keep = 0.75
        masks = [(torch.rand(s, generator=gen) < keep).float() / keep
                 for s in [(args.batch, 20, 8, 8), (args.batch, 50, 2, 2), (args.batch, 500)]]
        loss32, g32 = lenet_step(params, x, labels, masks, False)
        loss16, g16 = lenet_step(params, x, labels, masks, True)
        print(f"seed {seed}: loss fp32 {loss32:.6f} bf16 {loss16:.6f}")
        for name in g32:
            ref = g32[name].norm().item()
            if ref < 1e-6:  # a bias before BN: zero gradient, nothing to compare
                continue
            err = (g16[name] - g32[name]).norm().item() / ref
            worst[name] = max(worst.get(name, 0.0), err)
            print(f"    {name:16s} |bf16 - fp32| / |fp32| {err:.3g}")
    print(f"largest over {args.seeds} seeds at batch {args.batch}:")
    for name, err in worst.items():
        print(f"    {name:16s} {err:.3g}")


if __name__ == "__main__":
    main()
