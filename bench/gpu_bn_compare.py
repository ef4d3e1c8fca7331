#!/usr/bin/env python3
"""The comparisons scripts/gpu-bn-bench.sh writes into its summary, from
bench/gpu_step's output (RESULT and BNRATE lines, any number of runs
concatenated, the first row of a kind kept):

  bn: split against classic per network, precision and algorithm choice:
      the step, the batch norms' kernel time (bn.fwd + bn.bwd), their
      achieved GB/s at the 5-pass floor and that over the device copy's rate;
  algos: per network, precision and batch norm, the row `auto` picks
      (job column "auto") against the other explicit choice, both measured
      in the same run;
  verdict: whether split was faster on every network and precision measured.

  gpu_bn_compare.py BENCH_TXT    (prints the lines; exit 0, 1 if no rows)"""
import sys


def read(path):
    steps, rates = {}, {}
    with open(path, errors="replace") as f:
        for line in f:
            x = line.rstrip("\n").split("\t")
            try:
                if x[0] == "RESULT" and len(x) >= 9:
                    # arch prec step floor sync algos role bn
                    steps.setdefault((x[1], x[2], x[6], x[8]), (float(x[3]), x[7]))
                elif x[0] == "BNRATE" and len(x) >= 10:
                    # arch prec algos bn bn_ms mb gbps copy ratio
                    rates.setdefault((x[1], x[2], x[3], x[4]),
                                     (float(x[5]), float(x[7]), float(x[8]), float(x[9])))
            except ValueError:
                continue
    return steps, rates


def pct(a, b):
    return f"{100 * (b - a) / b:+.1f}%" if b > 0 else "?"


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    steps, rates = read(sys.argv[1])
    if not steps:
        print("compare    no rows measured")
        return 1
    split_wins, split_rows = 0, 0
    for (arch, prec, algos, bn), (ms, _) in sorted(steps.items()):
        if bn != "split" or (arch, prec, algos, "classic") not in steps:
            continue
        cms = steps[(arch, prec, algos, "classic")][0]
        r_s = rates.get((arch, prec, algos, "split"), (0, 0, 0, 0))
        r_c = rates.get((arch, prec, algos, "classic"), (0, 0, 0, 0))
        split_rows += 1
        split_wins += ms < cms
        print(f"bn         {arch} {prec} {algos}: step split {ms:.3f} ms, classic {cms:.3f} ms "
              f"(split {pct(ms, cms)} faster); BN kernels split {r_s[0]:.3f} ms "
              f"{r_s[1]:.0f} GB/s ({r_s[3]:.2f} of copy), classic {r_c[0]:.3f} ms "
              f"{r_c[1]:.0f} GB/s ({r_c[3]:.2f}); copy {r_s[2] or r_c[2]:.0f} GB/s")
    for (arch, prec, algos, bn), (ms, role) in sorted(steps.items()):
        if role != "auto":
            continue
        other = "heuristic" if algos == "timed" else "timed"
        if (arch, prec, other, bn) in steps:
            oms = steps[(arch, prec, other, bn)][0]
            verdict = "the faster" if ms <= oms else "the slower"
            print(f"algos      {arch} {prec} bn {bn}: auto picks {algos} {ms:.3f} ms, "
                  f"{other} {oms:.3f} ms: auto's pick is {verdict} ({pct(ms, oms)})")
        else:
            print(f"algos      {arch} {prec} bn {bn}: auto picks {algos} {ms:.3f} ms, "
                  f"{other} not measured")
    if split_rows:
        print(f"verdict    split faster on {split_wins} of {split_rows} rows with both batch norms"
              f"{': every one' if split_wins == split_rows else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
