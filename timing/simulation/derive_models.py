#!/usr/bin/env python3
"""Derive the entries a set of performance models lacks, from a recording.

    derive_models.py MODELS_DIR RECORDED_DIR... [--dry-run]

MODELS_DIR    timing/simulation/perfmodels/NAME (its codelets/45/*.NAME are edited)
RECORDED_DIR  a STARPU_PERF_MODEL_DIR of real runs on this machine (any worker
              kind) that made both the missing tasks and tasks the models hold

A task's footprint hashes its buffers' shapes, not the worker, so a run on
any machine names the tasks a simulated run will ask for, with their bytes
and flops. For each task (codelet, footprint) the recording has and a model
lacks (or holds with no measurement, n 0, which a simulation refuses), its
time is read off the model's entries of the same codelet as a power law in
flops (in bytes, among entries without a fixed flops count, where the task
has none) through the nearest entries below and above, or in proportion to
the nearest entry where the task is past them all (the softmax statistics:
in proportion to bytes from the largest measured entry, AT_LARGEST_RATE). A
fair guess for tiles of a measured shape family (a part of the LM head's
GEMM, of the token embedding's AdamW); each derived entry is printed (for
machine.txt) and carries n = 1. The recorded times are not used: a short
run's first touches and noise, on another machine. Run it once with every
recording, on the models as measured: a derived entry is a reference for
the next runs.
"""
import glob
import math
import os
import sys

ENTRY_HEADER = "# hash"


def entry_blocks(lines):
    """(count line index, first entry index, end index) of each entry list."""
    blocks = []
    for i, line in enumerate(lines):
        if line.startswith(ENTRY_HEADER):
            j = i + 1
            while j < len(lines) and lines[j].strip() and not lines[j].startswith("#"):
                j += 1
            count = max(k for k in range(i) if lines[k].startswith("# number of entries")) + 1
            blocks.append((count, i + 1, j))
    return blocks


def parse_entry(line):
    f = line.split()
    return {"hash": f[0], "size": int(f[1]), "flops": float(f[2]), "mean": float(f[3]), "dev": float(f[4]),
            "n": int(f[7])}


def format_entry(e):
    s, s2 = e["mean"], e["mean"] ** 2 + e["dev"] ** 2
    return "%s\t%-15d\t%-15e\t%-15e\t%-15e\t%-15e\t%-15e\t1\n" % (e["hash"], e["size"], e["flops"], e["mean"], e["dev"], s, s2)


def recorded_entries(dirs, codelet):
    """footprint -> entry over every recording of codelet."""
    found = {}
    for d in dirs:
        for path in glob.glob(os.path.join(d, "codelets", "45", codelet + ".*")):
            with open(path) as f:
                lines = f.readlines()
            for _, first, end in entry_blocks(lines):
                for line in lines[first:end]:
                    e = parse_entry(line)
                    found.setdefault(e["hash"], e)
    return found


def counts_flops(e):
    """StarPU keeps nan where the flops of one footprint's tasks differ
    (a gather's count depends on the tokens)."""
    return math.isfinite(e["flops"]) and e["flops"] > 0


# Codelets whose CUDA kernel runs one block per token column, each walking
# the vocabulary rows (compute/cuda/crossentropy.cu). Up to one wave of
# blocks (1056 on an H200: 132 SMs x 8 blocks of 256 threads) a task takes
# one column's walk, whatever its columns: the measured 256- and 512-column
# tasks (T64) take 174 and 177 us, and 8192 columns (7.76 waves) take
# 1333 us, 7.6 times as long. So tiles of 1024 columns or more run at the
# largest measured task's rate per byte, and the small-column entries are
# no reference for them.
AT_LARGEST_RATE = ("tsr_softmax_stats_",)


def estimate_at_largest_rate(e, held):
    """In proportion to bytes from the largest measured entry (n > 1:
    derived entries carry n = 1)."""
    measured = [x for x in held.values() if x["n"] > 1] or list(held.values())
    ref = max(measured, key=lambda x: x["size"])
    f = e["size"] / ref["size"]
    return ref["mean"] * f, "%s's %.4g us x %.4f (bytes, at the largest task's rate)" % (ref["hash"], ref["mean"], f)


def estimate(e, held, codelet):
    """e's time from the model's entries of the same kind (with flops, or
    without): a power law through the nearest below and above in work
    (flops, else bytes), or in proportion to the nearest where e is past
    them all. Of entries of equal work, the nearest in bytes. Codelets in
    AT_LARGEST_RATE: estimate_at_largest_rate."""
    if codelet.startswith(AT_LARGEST_RATE):
        return estimate_at_largest_rate(e, held)
    by_flops = counts_flops(e)
    unit = "flops" if by_flops else "bytes"
    work = (lambda x: x["flops"]) if by_flops else (lambda x: float(x["size"]))
    refs = [x for x in held.values() if counts_flops(x) == by_flops] or list(held.values())
    w = work(e)
    near = lambda xs: min(xs, key=lambda x: (abs(math.log(work(x) / w)), abs(math.log(x["size"] / e["size"]))))
    below, above = [x for x in refs if work(x) <= w], [x for x in refs if work(x) >= w]
    if below and above and work(near(below)) < work(near(above)):
        lo, hi = near(below), near(above)
        a = math.log(hi["mean"] / lo["mean"]) / math.log(work(hi) / work(lo))
        return lo["mean"] * (w / work(lo)) ** a, "between %s's %.4g us and %s's %.4g us (%s^%.2f)" % (
            lo["hash"], lo["mean"], hi["hash"], hi["mean"], unit, a)
    ref = near(refs)
    return ref["mean"] * w / work(ref), "%s's %.4g us x %.3f (%s)" % (ref["hash"], ref["mean"], w / work(ref), unit)


def derive(path, codelet, recorded, dry_run):
    with open(path) as f:
        lines = f.readlines()
    added = []
    for count, first, end in reversed(entry_blocks(lines)):
        entries = list(map(parse_entry, lines[first:end]))
        held = {e["hash"]: e for e in entries if e["n"] > 0}
        unmeasured = {e["hash"]: first + k for k, e in enumerate(entries) if e["n"] == 0}
        new = []
        for h, e in sorted(recorded.items()):
            if h in held or not held:
                continue
            mean, how = estimate(e, held, codelet)
            d = dict(e, mean=mean, dev=0.0)
            if h in unmeasured:  # an entry StarPU keeps with no measurement: the simulation refuses it
                lines[unmeasured[h]] = format_entry(d)
            else:
                new.append(format_entry(d))
            added.append("%s %s (%d bytes, %.4g flops): %.4g us, %s" % (codelet, h, e["size"], e["flops"], mean, how))
        lines[end:end] = new
        lines[count] = "%d\n" % (int(lines[count]) + len(new))
    if added and not dry_run:
        with open(path, "w") as f:
            f.writelines(lines)
    return added


def main(argv):
    dry_run = "--dry-run" in argv
    args = [a for a in argv if a != "--dry-run"]
    if len(args) < 2:
        sys.exit("usage: derive_models.py MODELS_DIR RECORDED_DIR... [--dry-run]")
    if any(a.startswith("-") for a in args):
        sys.exit("derive_models: error: unknown option (only --dry-run)")
    models, recordings = args[0], args[1:]
    name = os.path.basename(os.path.normpath(models))
    for d in [models] + recordings:
        if not os.path.isdir(os.path.join(d, "codelets", "45")):
            sys.exit("derive_models: error: no codelets/45 in '%s'" % d)
    for path in sorted(glob.glob(os.path.join(models, "codelets", "45", "*." + name))):
        codelet = os.path.basename(path)[: -len(name) - 1]
        for line in derive(path, codelet, recorded_entries(recordings, codelet), dry_run):
            print(line)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, ValueError, IndexError, ZeroDivisionError) as e:
        sys.exit("derive_models: error: %s (a model file not in StarPU's format 45?)" % e)
