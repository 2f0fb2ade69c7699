#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What automatic progress costs on weft's shm: 8-byte operations, manual vs automatic.

bench/auto_progress.c (built here against weft's headers, run on weft's
library) forks an initiator and a target pinned to two cores. Cases, run
interleaved for --reps repetitions (the order rotating), each reporting the
median of its repetitions:
  lat manual / lat auto   one-way latency of an 8-byte tagged ping-pong, both
                          sides polling their CQs (the issue's target: auto
                          at most 1.2x manual), FI_THREAD_DOMAIN;
  lat manual safe         the same under FI_THREAD_SAFE, the lock policy
                          automatic progress implies;
  put/atomic poll manual  an 8-byte fi_write / fi_atomic(SUM) and its
                          completion, the target polling its CQ;
  put/atomic sleep auto   the same to a target that sleeps in read(2) and is
                          served by its progress thread (target: at most 2x
                          the polling target's);
  put/atomic poll auto    the target polls under automatic progress.
Each ratio is reported twice: as the median of sandwiches (the
denominator's case run just before and just after the numerator's, a
sandwich whose outer runs differ by more than FLIP set aside: the machine
changed mode between them), and as the ratio of the table's medians.
Usage: bench/auto_progress.py [--provider shm] [--reps 7] [--iters 100000]
A run that fails ends the script with status 1 and no results folder.
"""
import argparse
import datetime
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import record  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINE = re.compile(r"^auto_progress mode=(\S+) progress=(\S+)(?: target=(\S+))? usec=([0-9.]+)$",
                  re.M)
# (label, numerator case, denominator case, target): the ratios reported.
PAIRS = [("one-way latency, automatic / manual progress (FI_THREAD_DOMAIN)",
          ("lat", "auto", None), ("lat", "manual", None), "≤ 1.2x"),
         ("one-way latency, automatic / manual progress under FI_THREAD_SAFE, the lock "
          "policy automatic progress takes", ("lat", "auto", None), ("lat", "manual", "safe"), None),
         ("put to a target that sleeps (automatic) / to one that polls (manual)",
          ("put", "auto", "sleep"), ("put", "manual", "poll"), "≤ 2x"),
         ("the same for an atomic", ("atomic", "auto", "sleep"), ("atomic", "manual", "poll"), None)]
FLIP = 1.25
CASES = [("lat", "manual", None), ("lat", "auto", None), ("lat", "manual", "safe"),
         ("put", "manual", "poll"), ("put", "auto", "sleep"), ("put", "auto", "poll"),
         ("atomic", "manual", "poll"), ("atomic", "auto", "sleep"), ("atomic", "auto", "poll")]


def run(exe, libdir, provider, case, iters):
    mode, prog, target = case
    cmd = [exe, "-p", provider, "-m", mode, "-P", prog, "-n", str(iters)]
    if target == "safe":
        cmd += ["-S"]
    elif target:
        cmd += ["-t", target]
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    m = LINE.search(r.stdout)
    if r.returncode or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return float(m.group(4))


def name(case):
    mode, prog, target = case
    if target == "safe":
        return f"{mode} {prog}, FI_THREAD_SAFE"
    return f"{mode} {prog}" + (f", target {'sleeps' if target == 'sleep' else 'polls'}"
                               if target else "")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--provider", default="shm")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--iters", type=int, default=100000)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    rec = record.Record()
    tmp = tempfile.mkdtemp(prefix="weft-auto-progress-")
    exe = os.path.join(tmp, "auto_progress")
    subprocess.run(["gcc", "-O2", "-I", str(ROOT / "include"), "-o", exe,
                    str(ROOT / "bench" / "auto_progress.c"), "-L", args.weft_lib, "-lfabric"],
                   check=True)
    loaded = record.require_libraries(exe, {"weft": args.weft_lib})["weft"]
    rec.libraries({"weft": loaded})
    got = {c: [] for c in CASES}
    for rep in range(args.reps):
        k = rep % len(CASES)
        order = CASES[k:] + CASES[:k]
        rec.order(f"rep {rep + 1}: {'; '.join(name(c) for c in order)}")
        for c in order:
            got[c].append(run(exe, args.weft_lib, args.provider, c, args.iters))
        print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
            f"{name(c)} {got[c][-1]:.3f}" for c in CASES), flush=True)

    # The paired ratios. This machine (two vCPUs) moves between a fast and a
    # slow mode from one run to the next, minutes or seconds apart: the same
    # case measured 0.11 and 0.37 us in one series. A ratio of medians then
    # compares modes, not cases. So each ratio is also measured in
    # sandwiches, the denominator's case run just before and just after the
    # numerator's; a sandwich whose two outer runs differ by more than
    # FLIP saw the mode change and is set aside (counted).
    paired = {}
    for rep in range(args.reps):
        k = rep % len(PAIRS)
        turn = PAIRS[k:] + PAIRS[:k]
        rec.order(f"sandwiches {rep + 1}: " + "; ".join(
            f"{name(den)} / {name(num)} / {name(den)}" for _, num, den, _ in turn))
        for label, num, den, target in turn:
            a1 = run(exe, args.weft_lib, args.provider, den, args.iters)
            b = run(exe, args.weft_lib, args.provider, num, args.iters)
            a2 = run(exe, args.weft_lib, args.provider, den, args.iters)
            ok = max(a1, a2) / min(a1, a2) <= FLIP
            r = paired.setdefault(label, {"ratios": [], "flipped": 0})
            if ok:
                r["ratios"].append(b / ((a1 + a2) / 2))
            else:
                r["flipped"] += 1
        print(f"sandwiches {rep + 1}/{args.reps}: " + ", ".join(
            f"{label.split(',')[0]} {r['ratios'][-1]:.2f}" if r["ratios"] else label
            for label, r in paired.items()), flush=True)

    med = {c: statistics.median(v) for c, v in got.items()}
    rows = ["| case | median (us) | min | max | every run |", "| --- | ---: | ---: | ---: | --- |"]
    for c in CASES:
        v = got[c]
        rows.append(f"| {name(c)} | {med[c]:.3f} | {min(v):.3f} | {max(v):.3f} | "
                    f"{' '.join(f'{x:.3f}' for x in v)} |")
    rows += ["", f"Ratios: the median of {args.reps} sandwiches (the denominator's case run "
             f"before and after the numerator's; a sandwich whose outer runs differ by more "
             f"than {FLIP:.2f}x is set aside as a change of the machine's mode), and beside it "
             "the ratio of the table's medians.", ""]
    for label, num, den, target in PAIRS:
        r = paired[label]
        of_medians = med[num] / med[den]
        if r["ratios"]:
            head = f"**{statistics.median(r['ratios']):.2f}x**"
            every = " ".join(f"{x:.2f}" for x in r["ratios"])
        else:
            head, every = "**no stable sandwich**", "-"
        rows.append(f"- {label}: {head}" + (f" (target {target})" if target else "") +
                    f"; sandwiches {every}; set aside {r['flipped']}; "
                    f"ratio of medians {of_medians:.2f}x")

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-auto-progress-{args.provider}"
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([
        f"# Automatic progress on weft's {args.provider}: 8-byte operations", "",
        f"`{' '.join(sys.argv)}` — {args.reps} repetitions, the order of the cases rotating; "
        f"{args.iters} operations per run after 1000 warm-up ones, initiator on core 1, target "
        "on core 0 (bench/auto_progress.c).", "",
        f"- weft: `{loaded}`"] + rec.summary() + [""] + rows) + "\n"
    rec.publish(out, text)


if __name__ == "__main__":
    record.run_main(main)
