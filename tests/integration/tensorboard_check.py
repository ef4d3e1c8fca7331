"""Read parlectl's TensorBoard event files back with TensorBoard's own reader
and check them against the jobs' metrics.jsonl (tests/integration/tensorboard.sh).

  tensorboard_check.py LOGDIR RUN=METRICS.JSONL...

Each RUN (a folder under LOGDIR) holds one event file whose first event is
file_version "brain.Event:2", and whose scalars are, tag by tag, exactly the
values, steps and times of METRICS.JSONL's lines (values as float32), as
`parlectl tensorboard --help` lists the tags. Prints one line per run.
"""
import glob
import json
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator, event_file_loader

PROGRESS = {"train_loss": "train/loss", "data_passes": "train/data_passes", "lr": "optim/lr",
            "gamma": "optim/gamma", "rho": "optim/rho", "images_per_sec": "speed/images_per_sec",
            "compute_s": "time/compute_s", "sync_s": "time/sync_s", "wait_s": "time/wait_s",
            "eval_s": "time/eval_s"}
EVAL = {"test_error": "test/error", "test_loss": "test/loss",
        "dist_to_master": "eval/dist_to_master"}


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def rule_scalars(tag, v, out):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return
    if isinstance(v, (int, float)):
        out[tag] = v
    elif isinstance(v, list):
        for i, e in enumerate(v):
            rule_scalars(f"{tag}/{i}", e, out)
    else:
        for k, e in v.items():
            rule_scalars(f"{tag}/{k}", e, out)


def expected(metrics):
    """tag -> [(step, wall_time, value)] from metrics.jsonl's lines, and the
    number of lines with a scalar (an event each)."""
    want, lines = {}, 0
    for line in open(metrics).read().splitlines():
        m = json.loads(line)
        fields = EVAL if m["event"] == "eval" else PROGRESS
        vals = {tag: m[f] for f, tag in fields.items() if isinstance(m.get(f), (int, float))}
        if m["event"] == "progress":
            rule_scalars("rule", m.get("rule", {}), vals)
        for tag, v in vals.items():
            want.setdefault(tag, []).append((m["step"], m["time"], f32(v)))
        lines += bool(vals)
    return want, lines


def check(logdir, run, metrics):
    files = glob.glob(os.path.join(logdir, run, "*"))
    assert len(files) == 1, f"{run}: {files}"
    name = os.path.basename(files[0])
    assert name.startswith("events.out.tfevents.") and name.endswith(".parle"), name
    events = list(event_file_loader.EventFileLoader(files[0]).Load())
    assert events and events[0].file_version == "brain.Event:2", f"{run}: first event {events[:1]}"
    acc = event_accumulator.EventAccumulator(os.path.join(logdir, run),
                                             size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    want, lines = expected(metrics)
    tags = sorted(acc.Tags()["scalars"])
    assert tags == sorted(want), f"{run}: tags {tags}, want {sorted(want)}"
    n = 0
    for tag in tags:
        got = [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)]
        assert got == want[tag], f"{run}: {tag}: read {got[:3]}..., want {want[tag][:3]}..."
        n += len(got)
    # Every record was read (the reader stops quietly at a torn or corrupt one).
    assert len(events) == 1 + lines, f"{run}: {len(events)} events for {lines} lines"
    print(f"{run}: {len(tags)} tags, {n} scalars equal to {metrics}")
    return tags


if __name__ == "__main__":
    for spec in sys.argv[2:]:
        run, metrics = spec.split("=", 1)
        check(sys.argv[1], run, metrics)
