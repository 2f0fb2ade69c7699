#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The demo's comparison: weft vs Debian's libfabric, shm and tcp, in one run.

Debian's own fi_pingpong (package libfabric-bin) runs against weft's
libfabric.so.1 and against Debian's, interleaved (the first library of each
pair alternates), server and client pinned to different cores, for a few
message sizes on shm (FI_EP_RDM) and tcp (FI_EP_RDM and FI_EP_MSG). Every
byte is checked once per library, case and size (fi_pingpong -c) before
anything is timed. Prints one table of medians and ratios and writes
results.md, data.tsv, env.txt and plot.png to a results folder. A short
version of bench/pingpong.py (whose run_pair it uses): few iterations and
repetitions, so it takes about a minute; for numbers to quote, use
pingpong.py as docs/performance.md describes.
"""
import argparse
import datetime
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import types

from pingpong import human, parse_size, run_pair
from record import Record, pair_order, require_libraries, run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = [("shm", "rdm"), ("tcp", "rdm"), ("tcp", "msg")]
NOTES = {
    ("tcp", "rdm"): "Debian answers tcp RDM with tcp;ofi_rxm",
    ("tcp", "msg"): "weft moves a same-host MSG connection to shared memory after the TCP "
                    "handshake (FI_TCP_LOCAL_STREAM=0: stay on the socket)",
}


def run_once(binary, libdir, args, size, cores, check=False):
    """run_pair, tried once more when the server could not bind its
    out-of-band port: pingpong.free_port closes its probe socket before
    fi_pingpong binds, and on a shared machine another process may take
    the port in between. Any other failure ends the demo."""
    try:
        return run_pair(binary, libdir, args, size, cores, check)
    except RuntimeError as e:
        if "Address already in use" not in str(e):
            raise
        print("(fi_pingpong's port was taken meanwhile: run again on another port)", flush=True)
        return run_pair(binary, libdir, args, size, cores, check)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="8,64k,1m")
    p.add_argument("--iters", type=int, default=10000,
                   help="round trips per run (fewer for large sizes: --max-bytes)")
    p.add_argument("--max-bytes", type=int, default=256 << 20,
                   help="at most this many bytes per run, at least 200 round trips")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--binary", default="/usr/bin/fi_pingpong")
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
    p.add_argument("--cores", default="0,1" if (os.cpu_count() or 1) > 1 else "0,0")
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    record = Record()
    libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
    record.libraries(require_libraries(args.binary, libs))
    cores = args.cores.split(",")
    sizes = [parse_size(s.strip().lower()) for s in args.sizes.split(",")]
    if None in sizes:
        sys.exit(f"bad --sizes {args.sizes}: give sizes like 8,64k,1m")

    def run_args(prov, ep):
        return types.SimpleNamespace(provider=prov, endpoint=ep, mode="", iters=args.iters,
                                     max_bytes=args.max_bytes, timeout=args.timeout)

    for prov, ep in CASES:  # correctness first: every byte checked on both
        for name, libdir in libs.items():
            for s in sizes:
                run_once(args.binary, libdir, run_args(prov, ep), str(s), cores, check=True)
    print(f"data checked (fi_pingpong -c) on both libraries, {len(CASES)} cases, "
          f"{len(sizes)} sizes", flush=True)
    samples = {}  # (prov, ep, lib, size) -> [(usec, MB/s)]
    for rep in range(args.reps):
        order = pair_order(libs, rep)
        record.order(f"repetition {rep + 1}: {', '.join(order)}")
        for prov, ep in CASES:
            for name in order:
                for s in sizes:
                    rows = run_once(args.binary, libs[name], run_args(prov, ep), str(s), cores)
                    samples.setdefault((prov, ep, name, s), []).append(rows[s])
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)

    def med(prov, ep, name, s, i):
        return statistics.median(x[i] for x in samples[(prov, ep, name, s)])

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-demo"
    out.mkdir(parents=True, exist_ok=True)
    md = ["# weft vs Debian libfabric: fi_pingpong, shm and tcp", "",
          f"`{' '.join(sys.argv)}`: Debian's `{args.binary}` on each library, {args.reps} "
          f"interleaved repetitions of {args.iters} round trips (fewer for large sizes, at most "
          f"{args.max_bytes >> 20} MiB per run), server on core {cores[0]}, client on core "
          f"{cores[1]}; every byte checked in a first pass. Medians; latency is one-way "
          "(fi_pingpong's usec/xfer); bandwidth is a ping-pong bandwidth (one message in "
          "flight, 10^6 bytes/s). Ratio = weft / libfabric: below 1 is better for latency, "
          "above 1 for bandwidth.", ""]
    md += record.summary() + [""]
    md += ["| provider | endpoint | size | weft µs | libfabric µs | latency ratio | weft MB/s "
           "| libfabric MB/s | bandwidth ratio | weft µs min–max | libfabric µs min–max |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    tsv = ["label\tweft_us\tlibfabric_us\tweft_mbs\tlibfabric_mbs"]
    for prov, ep in CASES:
        for s in sizes:
            wl, ll = med(prov, ep, "weft", s, 0), med(prov, ep, "libfabric", s, 0)
            wb, lb = med(prov, ep, "weft", s, 1), med(prov, ep, "libfabric", s, 1)
            spread = lambda n: (lambda v: f"{min(v):.2f}–{max(v):.2f}")(
                [x[0] for x in samples[(prov, ep, n, s)]])
            md.append(f"| {prov} | {ep.upper()} | {human(s)} | {wl:.2f} | {ll:.2f} | "
                      f"{wl / ll:.2f} | {wb:.0f} | {lb:.0f} | {wb / lb:.2f} | "
                      f"{spread('weft')} | {spread('libfabric')} |")
            tsv.append(f"{prov} {ep.upper()} {human(s).replace(' ', '')}\t{wl}\t{ll}\t{wb}\t{lb}")
    md += [""] + [f"- {prov} {ep.upper()}: {note}" for (prov, ep), note in NOTES.items()]
    (out / "results.md").write_text("\n".join(md) + "\n")
    (out / "data.tsv").write_text("\n".join(tsv) + "\n")
    record.write(out)
    png = plot(out)
    print("\n".join(md))
    print(f"\nwritten to {out}" + (f"\nplot: {png}" if png else ""))


def plot(out):
    """Two panels: one-way latency of both libraries per case and size (log
    scale), and how many times faster weft is (libfabric µs / weft µs)."""
    if not shutil.which("gnuplot"):
        print("gnuplot not installed: no plot")
        return None
    png = out / "plot.png"
    script = f"""
set terminal pngcairo size 1300,520 font ',10'
set output '{png}'
set datafile separator '\\t'
set key autotitle columnhead
set multiplot layout 1,2 title 'Debian 12 fi\\_pingpong on weft and on Debian libfabric, one run, medians'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -35 left
set grid ytics
set key below
set logscale y 10
set ylabel 'one-way latency (us, log scale)'
plot '{out}/data.tsv' using 2:xtic(1) title 'weft', '' using 3 title 'libfabric'
unset logscale y
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set ylabel 'libfabric time / weft time (latency and ping-pong bandwidth)'
plot '{out}/data.tsv' using ($3/$2):xtic(1) title 'weft (above 1: faster than libfabric)' lc rgb '#2e7d32', \\
     1 with lines dt 2 lc rgb 'black' title 'as fast'
unset multiplot
"""
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        # gnuplot-nox may lack pngcairo; the plain png terminal then.
        script = script.replace("pngcairo size 1300,520 font ',10'", "png size 1300,520")
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    return png


if __name__ == "__main__":
    run_main(main)
