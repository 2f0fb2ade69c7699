#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft vs Debian's libfabric: address vector memory and insert time.

Builds bench/av_scale.cpp once against Debian's libfabric headers and runs
the same binary on both libraries (LD_LIBRARY_PATH), interleaved (weft
first in odd repetitions, libfabric first in even ones), with and without a
count hint. Writes a markdown table and env.txt (how the run was produced,
bench/record.py) under the results folder. The program checks every
address it inserted (fi_av_lookup); a run that fails, or a weft folder
without its own libfabric.so.1, ends the script with status 1 and no number.
"""
import argparse
import datetime
import os
import pathlib
import re
import statistics
import subprocess
import sys

from record import Record, pair_order, require_libraries, run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINE = re.compile(r"insert:\s+([\d.]+) ns/peer wall,\s+([\d.]+) ns/peer cpu")
MEM = re.compile(r"memory:\s+([\d.]+) bytes/peer resident")


def run(exe, libdir, provider, peers, hint):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    r = subprocess.run([exe, "-p", provider, "-n", str(peers), "-c", str(hint)], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"av_scale failed on {libdir}:\n{r.stdout}{r.stderr}")
    ins, mem = LINE.search(r.stdout), MEM.search(r.stdout)
    if not ins or not mem:
        raise RuntimeError(f"av_scale on {libdir} printed no result:\n{r.stdout}{r.stderr}")
    return float(ins.group(2)), float(mem.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--provider", default="udp")
    p.add_argument("--peers", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    record = Record()

    exe = f"/tmp/weft-av-scale-{os.getpid()}"
    subprocess.run(["g++", "-O2", "-std=c++17", str(ROOT / "bench" / "av_scale.cpp"), "-o", exe,
                    "-lfabric"], check=True)
    try:
        libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
        record.libraries(require_libraries(exe, libs))
        results = {}
        for rep in range(args.reps):
            order = pair_order(libs, rep)   # the first one alternating
            record.order(f"repetition {rep + 1}: {', '.join(order)} (count hint {args.peers}, then 0)")
            for hint in (args.peers, 0):
                for name in order:
                    results.setdefault((name, hint), []).append(
                        run(exe, libs[name], args.provider, args.peers, hint))
    finally:
        os.unlink(exe)

    rows = ["| library | count hint | ns per insert (cpu, median) | bytes per peer (resident, median) |",
            "| --- | ---: | ---: | ---: |"]
    for (name, hint), v in sorted(results.items(), key=lambda kv: (-kv[0][1], kv[0][0] != "weft")):
        rows.append(f"| {name} | {hint:,} | {statistics.median(x[0] for x in v):.1f} | "
                    f"{statistics.median(x[1] for x in v):.1f} |")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-av-{args.provider}"
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([f"# FI_AV_TABLE of {args.peers:,} IPv4 peers, {args.provider}", "",
                      f"`{' '.join(sys.argv)}` — {args.reps} interleaved repetitions (weft first "
                      "in odd ones, libfabric first in even ones); the same binary (built against "
                      "Debian's headers) on both libraries; every inserted address looked up "
                      "and compared.", ""] + record.summary() + [""] + rows)
    (out / "results.md").write_text(text + "\n")
    record.write(out)
    print(text)
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    run_main(main)
