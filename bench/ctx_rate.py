#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft against itself: message rate through a scalable endpoint's contexts
and through as many endpoints (issue 14: at least 0.95x).

Builds bench/ctx_rate.c once against Debian's libfabric headers and runs it
on weft's library, the two modes interleaved (sep, ep, then ep, sep, ...):
T threads, each sending 8-byte tagged messages (fi_tinject) to itself,
through transmit context i to receive context i of one scalable endpoint
(-m sep), or through endpoint i (-m ep), every message checked. It reports
the median rate of each mode, the ratio and min-max, as a markdown table in
the results folder; env.txt records how the run was produced
(bench/record.py). Debian's libfabric offers no scalable endpoints on shm,
tcp or udp, so there is no libfabric column. A failed run ends the script
with status 1 and no number.
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

import record

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINE = re.compile(r"^ctx_rate (\S+) (\d+) threads: ([\d.]+) msg/s$", re.M)
MODES = ("sep", "ep")


def run(exe, libdir, mode, args):
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run([exe, "-p", args.provider, "-m", mode, "-t", str(args.threads),
                        "-n", str(args.messages), "-w", str(args.window)],
                       env=env, capture_output=True, text=True, timeout=300)
    m = LINE.search(r.stdout)
    if r.returncode or not m or m.group(1) != mode:
        raise RuntimeError(f"ctx_rate -m {mode} failed:\n{r.stdout}{r.stderr}")
    return float(m.group(3))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--provider", default="shm")
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--messages", type=int, default=2000000, help="per thread")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    rec = record.Record()
    tmp = tempfile.mkdtemp(prefix="weft-ctx-rate-")
    exe = os.path.join(tmp, "ctx_rate")
    subprocess.run(["gcc", "-O2", "-o", exe, str(ROOT / "bench" / "ctx_rate.c"), "-lfabric",
                    "-lpthread"], check=True)
    # Checks that weft's folder gives the binary weft's own library.
    loaded = record.require_libraries(exe, {"weft": args.weft_lib, "libfabric": args.system_lib})
    rec.libraries({"weft": loaded["weft"]})
    got = {m: [] for m in MODES}
    for rep in range(args.reps):
        order = record.pair_order(MODES, rep)
        rec.order(f"rep {rep + 1}: {', '.join(order)}")
        for mode in order:
            got[mode].append(run(exe, args.weft_lib, mode, args))
        print(f"rep {rep + 1}/{args.reps}: " +
              ", ".join(f"{m} {got[m][-1] / 1e6:.2f} M/s" for m in MODES), flush=True)
    med = {m: statistics.median(got[m]) for m in MODES}
    ratio = med["sep"] / med["ep"]
    pairs = [s / e for s, e in zip(got["sep"], got["ep"])]
    rows = [f"## {args.threads} threads, {args.messages} messages of 8 bytes each, window "
            f"{args.window}, {args.provider}", "",
            "| through | median (M msg/s) | every run |", "| --- | ---: | --- |"]
    names = {"sep": f"{args.threads} transmit contexts of one scalable endpoint",
             "ep": f"{args.threads} endpoints"}
    for m in MODES:
        rows.append(f"| {names[m]} | {med[m] / 1e6:.2f} | "
                    f"{' '.join(f'{x / 1e6:.2f}' for x in got[m])} |")
    rows += ["", f"contexts / endpoints, ratio of medians: **{ratio:.3f}** (target ≥ 0.95); "
             f"per pair: {min(pairs):.3f}–{max(pairs):.3f}, median {statistics.median(pairs):.3f}"]
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-ctx-rate-{args.provider}"
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([
        "# Message rate: a scalable endpoint's contexts against as many endpoints (weft)", "",
        f"`{' '.join(sys.argv)}` — bench/ctx_rate.c, {args.reps} interleaved repetitions "
        "(order alternating), each thread pinned to its own core, FI_THREAD_FID, every "
        "message checked.", "", f"- weft: `{loaded['weft']}`"] + rec.summary() + [""] + rows) + "\n"
    rec.publish(out, text)


if __name__ == "__main__":
    record.run_main(main)
