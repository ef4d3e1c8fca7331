#!/usr/bin/python3
"""Parle (docs/algorithms.md) in plain PyTorch, beside our parle-train on the
same job file, for wall time.

  parle_job.py [JOB.json] [--budget N] [--reps R]
      times N outer iterations of each (after one untimed warm-up iteration),
      interleaved R times, and extrapolates each to the whole job's training
      time (evaluations excluded: one inference pass over train + test per
      epoch, under 1% of a LeNet job); prints both and torch/ours (> 1: we are
      faster). Our time is read from parle-train's progress lines (one per
      outer iteration, stamped as they arrive on its stderr); the process is
      stopped after N + 1 of them.
  parle_job.py [JOB.json] --budget 0
      runs the whole job in PyTorch alone and prints each epoch's test error
      of the master (a check that this reference learns as ours does).
  parle_job.py [JOB.json] --breakdown [--train-limit N] [--reps R]
      ours alone against its ideal: runs parle-train on the job cut to one
      epoch of N examples, up to its evaluation, and splits its wall time into
      start-up (data loading), training (first to last progress line) and the
      evaluation, with the sync seconds the runner reports; the training time
      is put beside (its replicas' step time x steps), the step time of one
      replica on its share of the cores timed by lenet_step in the same run:
      alone (the other cores idle), and as the job runs its replicas, as
      many at once as there are shares of the cores (they share the caches
      and the memory bus), and as replica 0 ran it in the job (the runner's
      clock), which leaves only the time lost outside the steps. --reps runs
      it that many times; the summary gives medians and ranges.

--python PY runs all of this under another interpreter (bench/pip_torch.sh's
venv: PyTorch as users install it). The n replicas of the reference run one
after another in this process (each uses all the threads); ours runs them as
parallel threads, each on its share of the cores."""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def reexec_under_python():
    """--python PY: this script again under PY, before torch is imported (a
    venv's python is a link to the base one: only the path tells them apart,
    so the child is marked in the environment instead)."""
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == "--python" or a.startswith("--python="):
            py = a.split("=", 1)[1] if "=" in a else argv[i + 1]
            rest = argv[:i] + argv[i + (1 if "=" in a else 2):]
            if os.environ.get("PARLE_JOB_PYTHON") != py:
                os.environ["PARLE_JOB_PYTHON"] = py
                os.execv(py, [py, os.path.abspath(__file__)] + rest + ["--python", py])
            sys.argv = [sys.argv[0]] + rest
            return


reexec_under_python()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_lenet import lenet  # noqa: E402


def job_settings(job):
    """The fields this reference uses, with docs/config.md's defaults."""
    alg, opt = job.get("algorithm", {}), job.get("optim", {})
    data, model = job.get("data", {}), job.get("model", {})
    if model.get("arch") != "lenet" or alg.get("name") != "parle" or alg.get("L", 25) < 1:
        sys.exit("parle_job.py: only model.arch lenet with algorithm parle, L >= 1")
    if data.get("dataset") not in ("fashion-mnist", "mnist"):
        sys.exit("parle_job.py: only data.dataset fashion-mnist or mnist")
    if data.get("split") or data.get("sampling", "shuffle") != "shuffle" or \
            data.get("normalize", "none") != "none" or data.get("augment"):
        sys.exit("parle_job.py: only the default data options (shuffle, no split/normalize/augment)")
    schedule = opt.get("lr_schedule", [])
    lr = opt.get("lr", 0.1)
    inner_lr = alg.get("inner_lr", 0)
    return dict(
        root=data.get("root", "/usr/share/datasets/fashion-mnist"),
        train_limit=data.get("train_limit", 0), test_limit=data.get("test_limit", 0),
        n=alg.get("replicas", 1), L=alg.get("L", 25), gamma=alg.get("gamma", 0.01),
        rho=alg.get("rho", 1.0), gamma_max=alg.get("gamma_max", 1.0),
        rho_max=alg.get("rho_max", 10.0), growth=alg.get("growth", 0.5),
        alpha=alg.get("alpha", 0.75),
        inner_lr=inner_lr if inner_lr > 0 else (schedule[0][1] if schedule else lr),
        independent=alg.get("init", "independent") == "independent",
        lr=lr, schedule=schedule, mu=opt.get("momentum", 0.9),
        wd=opt.get("weight_decay", 0.0), batch=opt.get("batch", 128),
        epochs=job.get("epochs", 10), seed=job.get("seed", 42),
        dropout=model.get("dropout", 0.25))


def lr_at_epoch(s, epoch):
    for bound, lr in s["schedule"]:
        if epoch < bound:
            return lr
    return s["schedule"][-1][1] if s["schedule"] else s["lr"]


def load_idx(path, limit):
    with gzip.open(path) as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    a = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)
    return a[:limit] if limit > 0 else a


def load_split(root, prefix, limit):
    x = load_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"), limit)
    y = load_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"), limit)
    x = torch.from_numpy(x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return x, torch.from_numpy(y.astype(np.int64))


class Replica:
    """A LeNet whose parameters (the inner iterate y) and gradients are views
    into two flat vectors, with Parle's x, z, v, u beside them."""

    def __init__(self, s, rank, ntrain):
        torch.manual_seed(s["seed"] + (rank if s["independent"] else 0))
        self.model = lenet(s["dropout"]).train()
        params = list(self.model.parameters())
        count = sum(p.numel() for p in params)
        self.y, self.g = torch.zeros(count), torch.zeros(count)
        off = 0
        for p in params:
            k = p.numel()
            self.y[off:off + k].copy_(p.data.view(-1))
            p.data = self.y[off:off + k].view_as(p)
            p.grad = self.g[off:off + k].view_as(p)  # backward adds into it in place
            off += k
        self.x = self.y.clone()
        self.z = torch.zeros(count)
        self.v, self.u = torch.zeros(count), torch.zeros(count)
        self.rng = np.random.default_rng([s["seed"], rank])
        self.ntrain, self.batch = ntrain, s["batch"]
        self.perm, self.pos = None, ntrain

    def next_batch(self):
        """Shuffled passes; a lone example left at a pass's end starts the next."""
        if self.ntrain - self.pos < 2:
            self.perm, self.pos = torch.from_numpy(self.rng.permutation(self.ntrain)), 0
        idx = self.perm[self.pos:self.pos + self.batch]
        self.pos += len(idx)
        return idx


class ParleJob:
    def __init__(self, s, train, test):
        self.s, self.train, self.test = s, train, test
        self.replicas = [Replica(s, a, len(train[1])) for a in range(s["n"])]
        self.nb = (len(train[1]) + s["batch"] - 1) // s["batch"]
        self.total_outer = self.nb * s["epochs"]
        self.k = 0

    def outer_iteration(self):
        s, self.k = self.s, self.k + 1
        k, nb = self.k, self.nb
        lr = lr_at_epoch(s, (k - 1) // nb)
        gamma = min(s["gamma"] * (1 + s["growth"] / nb) ** k, s["gamma_max"])
        rho = min(s["rho"] * (1 + s["growth"] / nb) ** k, s["rho_max"])
        mu, lam, alpha, eta_in = s["mu"], s["wd"], s["alpha"], s["inner_lr"]
        for r in self.replicas:
            with torch.no_grad():
                r.y.copy_(r.x)  # x_hat = x; y = x_hat; z = x_hat
                r.z.copy_(r.x)
            for _ in range(s["L"]):
                idx = r.next_batch()
                r.g.zero_()
                F.cross_entropy(r.model(self.train[0][idx]), self.train[1][idx]).backward()
                with torch.no_grad():
                    g = r.g  # g = grad + lambda y + gamma (y - x_hat)
                    if lam:
                        g.add_(r.y, alpha=lam)
                    g.add_(r.y - r.x, alpha=gamma)
                    r.v.mul_(mu).add_(g)  # v = mu v + g
                    r.y.add_(g.add_(r.v, alpha=mu), alpha=-eta_in)  # y -= eta' (g + mu v)
                    r.z.mul_(alpha).add_(r.y, alpha=1 - alpha)  # z = alpha z + (1 - alpha) y
        with torch.no_grad():
            zbar = torch.stack([r.z for r in self.replicas]).mean(0)
            for r in self.replicas:
                d = r.x - r.z  # d = (x_hat - z) + rho (x_hat - zbar)
                d.add_(r.x - zbar, alpha=rho)
                r.u.mul_(mu).add_(d)  # u = mu u + d
                r.x.add_(d.add_(r.u, alpha=mu), alpha=-lr)  # x = x_hat - eta (d + mu u)

    @torch.no_grad()
    def evaluate_master(self):
        """The mean of the x's, BN statistics recomputed over the training set
        (cumulative average, dropout off), then the test set in inference mode."""
        model = self.replicas[0].model
        saved = self.replicas[0].y.clone()
        self.replicas[0].y.copy_(torch.stack([r.x for r in self.replicas]).mean(0))
        bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        saved_stats = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
                       for m in bns]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None
        model.train()
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.eval()
        x, y = self.train
        for i in range(0, len(y), 256):
            if len(y) - i >= 2:
                model(x[i:i + 256])
        model.eval()
        x, y = self.test
        wrong, loss = 0, 0.0
        for i in range(0, len(y), 256):
            out = model(x[i:i + 256])
            loss += F.cross_entropy(out, y[i:i + 256], reduction="sum").item()
            wrong += (out.argmax(1) != y[i:i + 256]).sum().item()
        self.replicas[0].y.copy_(saved)
        for m, (rm, rv, nbt) in zip(bns, saved_stats):
            m.running_mean.copy_(rm), m.running_var.copy_(rv), m.num_batches_tracked.copy_(nbt)
            m.momentum = 0.1
        model.train()
        return wrong / len(y), loss / len(y)


def time_ours(binary, job, L, outer, warmup):
    """Seconds per outer iteration of parle-train on `job`, from the arrival
    times of its progress lines; stopped after warmup + outer of them."""
    job = dict(job, log_every=1)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    try:
        proc = subprocess.Popen([binary, f.name], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        stamps = {}
        for line in proc.stderr:
            words = line.split()
            if len(words) > 3 and words[0] == "epoch" and words[2] == "step":
                stamps[int(words[3]) // L] = time.monotonic()
                if warmup + outer in stamps:
                    break
            elif not line.startswith("epoch"):
                sys.stderr.write("parle-train: " + line)
        proc.terminate()
        proc.wait()
    finally:
        os.unlink(f.name)
    if warmup not in stamps or warmup + outer not in stamps:
        sys.exit(f"parle_job.py: parle-train ended before {warmup + outer} outer iterations")
    return (stamps[warmup + outer] - stamps[warmup]) / outer


def replica_step_ms(binary, threads, env, at_once=1, reps=5, steps=20):
    """One replica's LeNet step at its thread count (lenet_step --serve, the
    job's batch is LeNet's 128): median ms over `reps` blocks. With at_once
    > 1, that many servers run each block together, as the job's replicas
    share the cores, and a block's time is their mean."""
    import lenet_step as ls
    servers = [ls.ours_server(binary, "lenet", 128, env=env) for _ in range(at_once)]
    blocks = []
    for n in [5] + [steps] * reps:
        for s in servers:
            s.send(f"{threads} {n}")
        blocks.append(statistics.mean(s.receive() for s in servers))
    for s in servers:
        s.close()
    return statistics.median(blocks[1:])


def breakdown_once(args, job, s):
    """Ours alone, one run: where the wall time of a cut-down job goes,
    against its replicas' step time x steps. Returns the training time's
    ratios to the three ideals (step alone, together, in the job) and the
    whole run's to the first."""
    cores = len(os.sched_getaffinity(0))
    per = max(1, cores // s["n"])  # the runner's cores per replica
    env = dict(os.environ)  # parle-train and lenet_step set parled's OpenMP default
    cut = dict(job, epochs=1, log_every=1, checkpoint={"every_epochs": 0},
               data=dict(job.get("data", {}), train_limit=args.train_limit))
    at_once = min(s["n"], cores // per)  # replicas stepping at the same time
    def steps_ms():
        return (replica_step_ms(args.lenet_step, per, env),
                replica_step_ms(args.lenet_step, per, env, at_once))
    before = steps_ms()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cut, f)
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen([args.ours, f.name], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        progress, evaluated, spent = [], None, {}
        for line in proc.stderr:
            words = line.split()
            if len(words) > 3 and words[0] == "epoch" and words[2] == "step":
                progress.append(time.monotonic())
            elif len(words) > 2 and words[0] == "epoch" and words[2] == "done:":
                evaluated = time.monotonic()
                # "(..., steps 12.3s, sync 1.05s, loader wait 0.01s)"
                for part in line.rsplit("(", 1)[1].split(","):
                    name, _, value = part.strip().rpartition(" ")
                    if name in ("steps", "sync", "loader wait"):
                        spent[name] = float(value.rstrip("s)"))
            else:
                sys.stderr.write("parle-train: " + line)
        _, status, usage = os.wait4(proc.pid, 0)  # its CPU time too
        end = time.monotonic()
        rc = os.waitstatus_to_exitcode(status)
    finally:
        os.unlink(f.name)
    after = steps_ms()
    if rc != 0 or len(progress) < 2 or evaluated is None:
        sys.exit(f"parle_job.py: parle-train failed (exit {rc})")
    step_ms = statistics.mean([before[0], after[0]])
    together_ms = statistics.mean([before[1], after[1]])
    outer = len(progress) - 1
    # n replicas of `per` threads share `cores`; each does its L steps in turn.
    per_step = outer * s["L"] * 1e-3 * max(1.0, s["n"] * per / cores)
    ideal, ideal_together = per_step * step_ms, per_step * together_ms
    train = progress[-1] - progress[0]
    print(f"breakdown: {s['n']} replicas x {per} thread{'s' if per > 1 else ''} on {cores} "
          f"cores, L={s['L']}, {args.train_limit} examples, {len(progress)} outer iterations; "
          f"OMP_WAIT_POLICY={env.get('OMP_WAIT_POLICY', '(parled default)')}")
    print(f"  replica step alone ({per} thread{'s' if per > 1 else ''}): {before[0]:.2f} ms "
          f"before, {after[0]:.2f} ms after; {at_once} at once: {before[1]:.2f} ms before, "
          f"{after[1]:.2f} ms after")
    print(f"  start-up to the first progress line: {progress[0] - t0:.2f} s (data loading, "
          f"set-up and the first outer iteration, ideally {ideal / outer:.2f} s)")
    print(f"  training, first to last progress line ({outer} outer iterations): {train:.2f} s "
          f"against ideal {ideal:.2f} s (steps x step time): {train / ideal:.3f}x, "
          f"{(train - ideal) / outer * 1e3:.0f} ms lost per outer iteration; against "
          f"{ideal_together:.2f} s with the step timed {at_once} at once: "
          f"{train / ideal_together:.3f}x")
    in_job_ms = spent["steps"] / ((outer + 1) * s["L"]) * 1e3
    ideal_in_job = per_step * in_job_ms
    print(f"  replica 0 as the runner clocks it (whole run): steps {spent['steps']:.2f} s, "
          f"sync {spent['sync']:.2f} s, waiting for the loader {spent['loader wait']:.2f} s; "
          f"steps {in_job_ms:.2f} ms each in the job against {step_ms:.2f} ms alone, "
          f"{together_ms:.2f} ms {at_once} at once")
    # With the step as the job ran it, what is left is time lost outside the
    # steps: sync, waiting for a turn or the loader, the schedule's rounding.
    print(f"  training against {ideal_in_job:.2f} s with the step as replica 0 ran it in the job: "
          f"{train / ideal_in_job:.3f}x (time lost outside the steps)")
    work = (outer + 1) * s["L"] * s["n"] * step_ms * 1e-3 * per
    print(f"  CPU time of parle-train: {usage.ru_utime + usage.ru_stime:.2f} s for "
          f"{end - t0:.2f} s of wall on {cores} cores, against {work:.2f} s of replica steps "
          f"(wall x cores beyond the CPU time: waiting, for a barrier or for a core)")
    print(f"  evaluation (last progress to the eval line): {evaluated - progress[-1]:.2f} s; "
          f"exit: {end - evaluated:.2f} s")
    return {"alone": train / ideal, "together": train / ideal_together,
            "in_job": train / ideal_in_job, "whole": (end - t0) / ideal}


def breakdown(args, job, s):
    """breakdown_once --reps times; the summary gives each ratio's median and
    range (the step alone drifts by several percent within minutes here)."""
    runs = []
    for k in range(args.reps):
        print(f"run {k + 1} of {args.reps}:", flush=True)
        runs.append(breakdown_once(args, job, s))

    def spread(key):
        v = [r[key] for r in runs]
        return f"{statistics.median(v):.3f}x [{min(v):.3f}-{max(v):.3f}]"
    print(f"SUMMARY\tParle job, ours vs its ideal, median [range] of {len(runs)} runs\t"
          f"training {spread('alone')} of (steps x step time alone), {spread('together')} of "
          f"(steps x step time, as many at once as the job runs), {spread('in_job')} of "
          f"(steps x step time in the job); whole run {spread('whole')} of the first")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("job", nargs="?", default=os.path.join(ROOT, "configs", "lenet-fmnist-parle.json"))
    ap.add_argument("--budget", "--limit-steps", type=int, default=6, metavar="N",
                    help="outer iterations timed per run (0: the whole job in PyTorch)")
    ap.add_argument("--reps", type=int, default=2, help="interleaved runs of each (median)")
    ap.add_argument("--threads", default=str(len(os.sched_getaffinity(0))),
                    help="PyTorch's thread counts, e.g. 1,2: each is timed and the fastest is "
                         "the reference (default: the cores this process may use)")
    ap.add_argument("--ours", default=os.path.join(ROOT, "build-bench", "daemon", "parle-train"))
    ap.add_argument("--lenet-step", default=os.path.join(ROOT, "build-bench", "bench",
                                                         "lenet_step"),
                    help="our step benchmark, for --breakdown's step time")
    ap.add_argument("--python", metavar="PY", help="run under this interpreter (see above)")
    ap.add_argument("--breakdown", action="store_true", help="ours against its ideal (above)")
    ap.add_argument("--train-limit", type=int, default=12800,
                    help="--breakdown's examples (default: %(default)s)")
    args = ap.parse_args()
    with open(args.job) as f:
        job = json.load(f)
    s = job_settings(job)
    if args.breakdown:
        return breakdown(args, job, s)
    threads = [int(t) for t in args.threads.split(",")]
    torch.set_num_threads(max(threads))
    train = load_split(s["root"], "train", s["train_limit"])
    test = load_split(s["root"], "t10k", s["test_limit"])
    ref = ParleJob(s, train, test)
    with open("/proc/self/maps") as f:
        blas = sorted({os.path.basename(l.split()[-1]) for l in f if "blas" in l.split()[-1]})
    print(f"{os.path.basename(args.job)}: n={s['n']} L={s['L']} batch {s['batch']}, "
          f"{ref.nb} outer iterations per epoch, {ref.total_outer} in {s['epochs']} epochs; "
          f"torch {torch.__version__}, BLAS {', '.join(blas) or 'none'}")

    if args.budget == 0:
        t0 = time.perf_counter()
        while ref.k < ref.total_outer:
            ref.outer_iteration()
            if ref.k % ref.nb == 0:
                err, loss = ref.evaluate_master()
                print(f"epoch {ref.k // ref.nb}/{s['epochs']}: test error {100 * err:.2f}% "
                      f"loss {loss:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return

    ours_s, torch_s = [], {t: [] for t in threads}
    ref.outer_iteration()  # warm-up
    for k in range(args.reps):
        for who in (("ours", "torch") if k % 2 == 0 else ("torch", "ours")):
            if who == "ours":
                ours_s.append(time_ours(args.ours, job, s["L"], args.budget, 1))
                print(f"  run {k + 1} ours: {ours_s[-1]:.3f} s per outer iteration", flush=True)
                continue
            for t in threads:
                torch.set_num_threads(t)
                t0 = time.perf_counter()
                for _ in range(args.budget):
                    ref.outer_iteration()
                torch_s[t].append((time.perf_counter() - t0) / args.budget)
                print(f"  run {k + 1} torch, {t} thread{'s' if t > 1 else ''}: {torch_s[t][-1]:.3f} s "
                      f"per outer iteration", flush=True)
    o = statistics.median(ours_s)
    med = {t: statistics.median(v) for t, v in torch_s.items()}
    best = min(med, key=med.get)
    print(f"per outer iteration ({s['n']} x {s['L']} steps), median of {args.reps} runs of "
          f"{args.budget}: ours {o:.3f} s; torch " +
          ", ".join(f"{med[t]:.3f} s at {t} thread{'s' if t > 1 else ''}" for t in threads))
    total = ref.total_outer / 60
    print(f"whole job, extrapolated ({ref.total_outer} outer iterations, evaluations excluded): "
          f"ours {o * total:.1f} min, torch {med[best] * total:.1f} min (its best, {best} "
          f"thread{'s' if best > 1 else ''}), torch/ours {med[best] / o:.2f}")
    print(f"SUMMARY\tParle job ({os.path.basename(args.job)}), extrapolated\t"
          f"ours {o * total:.1f} min\ttorch {med[best] * total:.1f} min at {best} "
          f"thread{'s' if best > 1 else ''} (torch/ours {med[best] / o:.2f})")


if __name__ == "__main__":
    main()
