#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft vs Debian's libfabric: latency and bandwidth through fi_pingpong.

The same fi_pingpong binary runs twice per repetition, once with weft's
libfabric.so.1 first on LD_LIBRARY_PATH and once with Debian's, interleaved
(A, B, A, B ...), server and client pinned to different cores. Per message
size it reports the median one-way latency and bandwidth of each library,
their ratio, and min/max so a noisy run shows. Beside them stand the
floors measured in the same run (bench/floors/): the latency floor of the
provider's medium (a plain socket ping-pong for udp, a cache-line handoff
for shm), sampled once per repetition, and for shm the single-core memcpy
bandwidth at each size. Output: a markdown table, a TSV of every sample and
a PNG plot (gnuplot) under the results folder.
Benchmarks are not tests: nothing here fails on a slow number, only on a run
that crashes or reports wrong data (fi_pingpong -c checks the data), or on
a weft folder without its own libfabric.so.1: then it exits non-zero and
writes no number. Each pair's order alternates (weft first in odd
repetitions, libfabric first in even ones); env.txt in the results folder
records how the run was produced (bench/record.py).
"""
import argparse
import atexit
import datetime
import os
import pathlib
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

from record import Record, pair_order, require_libraries, run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
# What no provider can beat on this machine, per provider: the latency floor
# (one-way µs per size; argv: iterations, and for shm the two cores) and the
# bandwidth ceiling (MB/s per size; argv: core size...).
LATENCY_FLOORS = {"udp": "udp_socket_pingpong.c", "shm": "shm_flag_pingpong.c",
                  "tcp": "tcp_socket_pingpong.c"}
BANDWIDTH_FLOORS = {"shm": "memcpy_bw.c"}
SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)$")


def parse_size(text):
    m = SIZE_RE.match(text)
    if not m:
        return None
    mult = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2)]
    return int(float(m.group(1)) * mult)


def free_port():
    """A TCP port nobody listens on now, for fi_pingpong's out-of-band
    connection (others on the machine run servers too)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(binary, libdir, args, size, cores, check=False):
    """One server/client run; returns {size: (usec_per_xfer, mb_per_sec)}.
    With `check`, fi_pingpong verifies every byte (-c): a correctness pass,
    not timed (filling and checking the pattern costs more than the transfer)."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    port = free_port()
    # Checking is byte by byte: a few hundred checked iterations per size
    # prove the data path; more only takes minutes at 4 MiB.
    iters = args.iters
    if size != "all":  # large messages need fewer round trips for a steady number
        iters = min(iters, max(200, args.max_bytes // int(size)))
    if check:
        iters = min(iters, 200)
    common = [binary, "-p", args.provider, "-e", args.endpoint, "-I", str(iters),
              "-S", size] + (["-m", args.mode] if args.mode else []) + (["-c"] if check else [])
    server = subprocess.Popen(["taskset", "-c", cores[0]] + common + ["-B", str(port)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.4)
    try:
        client = subprocess.run(["taskset", "-c", cores[1]] + common + ["-P", str(port), "127.0.0.1"],
                                env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        server.kill()  # do not leave a busy-polling server behind
        server.wait()
        raise
    try:
        server_out, _ = server.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server_out = "(server timed out)"
    if client.returncode != 0 or server.returncode != 0:
        raise RuntimeError(f"fi_pingpong failed on {libdir}:\n{client.stdout}{client.stderr}\n"
                           f"server:\n{server_out}")
    rows = {}
    for line in client.stdout.splitlines():
        f = line.split()
        if len(f) == 8 and parse_size(f[0]) is not None:
            rows[parse_size(f[0])] = (float(f[6]), float(f[5]))
    # A run that succeeds but reports nothing (or not the size asked for) is
    # a failed run, not a missing point.
    if not rows or (size != "all" and int(size) not in rows):
        raise RuntimeError(f"fi_pingpong on {libdir} reported no result for size {size}:\n"
                           f"{client.stdout}{client.stderr}")
    return rows


def build_floor(name):
    """Compiles bench/floors/<name> once; None when there is no such floor."""
    if name is None:
        return None
    src = ROOT / "bench" / "floors" / name
    if not src.exists():
        raise RuntimeError(f"floor {src} is missing")
    exe = pathlib.Path("/tmp") / f"weft-floor-{src.stem}-{os.getpid()}"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def run_floor(exe, argv):
    """One run of a floor program: {size: value} from its two-column output."""
    if exe is None:
        return {}
    r = subprocess.run([str(exe)] + [str(a) for a in argv], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} failed:\n{r.stdout}{r.stderr}")
    rows = {}
    for line in r.stdout.splitlines()[1:]:
        size, value = line.split()
        rows[int(size)] = float(value)
    if not rows:
        raise RuntimeError(f"{exe} printed no result:\n{r.stdout}{r.stderr}")
    return rows


def human(n):
    for unit, div in (("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--provider", default="udp")
    p.add_argument("--endpoint", default="dgram")
    p.add_argument("--mode", default="", help="msg or tagged")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--sizes", default="all",
                   help='"all" (fi_pingpong\'s sweep) or a comma list of sizes, one run each')
    p.add_argument("--max-bytes", type=int, default=4 << 30,
                   help="with a list of sizes: at most this many bytes per run (fewer "
                        "iterations for large sizes, at least 200)")
    p.add_argument("--binary", default="/usr/bin/fi_pingpong",
                   help="the fi_pingpong to run on both libraries")
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
    p.add_argument("--cores", default="0,1")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    record = Record()

    libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
    loaded = require_libraries(args.binary, libs)
    record.libraries(loaded)

    cores = args.cores.split(",")
    # fi_pingpong takes one size or "all"; a comma list runs it once per size.
    size_args = [a if a == "all" else str(parse_size(a.lower())) for a in args.sizes.split(",")]
    if "None" in size_args:
        sys.exit(f"bad --sizes {args.sizes}: give 'all' or sizes like 8,64k,1m")
    samples = {name: {} for name in libs}
    lat_exe = build_floor(LATENCY_FLOORS.get(args.provider))
    bw_exe = build_floor(BANDWIDTH_FLOORS.get(args.provider))
    atexit.register(lambda: [e.unlink(missing_ok=True) for e in (lat_exe, bw_exe) if e])
    floor_samples = {}
    for name, libdir in libs.items():  # correctness first: every byte checked
        for size in size_args:
            run_pair(args.binary, libdir, args, size, cores, check=True)
    print("data checked on both libraries", flush=True)
    for rep in range(args.reps):
        order = pair_order(libs, rep)   # interleaved, the first one alternating
        record.order(f"repetition {rep + 1}: {', '.join(order)}")
        for name in order:
            libdir = libs[name]
            for size in size_args:
                for s, val in run_pair(args.binary, libdir, args, size, cores).items():
                    samples[name].setdefault(s, []).append(val)
        # The floor moves with where the virtual CPUs land: sample it every round.
        floor_argv = [args.iters * 5, cores[0], cores[1]] if args.provider == "shm" else [args.iters]
        for s, val in run_floor(lat_exe, floor_argv).items():
            floor_samples.setdefault(s, []).append(val)
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    tag = f"{args.provider}-{args.endpoint}" + (f"-{args.mode}" if args.mode else "")
    out = pathlib.Path(args.out) / f"{stamp}-{tag}"
    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted(set(samples["weft"]) | set(samples["libfabric"]))
    floor = {s: statistics.median(v) for s, v in floor_samples.items()}
    floor_spread = {s: f"{min(v):.2f}–{max(v):.2f}" for s, v in floor_samples.items()}
    memcpy = run_floor(bw_exe, [cores[1]] + [s for s in sizes if s >= 1024])

    def med(name, size, i):
        v = samples[name].get(size)
        return statistics.median(x[i] for x in v) if v else None

    def spread(name, size, i):
        v = samples[name].get(size)
        return f"{min(x[i] for x in v):.2f}–{max(x[i] for x in v):.2f}" if v else "—"

    cmd = " ".join(sys.argv)
    floor_what = {"udp": "a plain socket ping-pong, busy-polling, no library",
                  "tcp": "a plain TCP socket ping-pong (TCP_NODELAY, one writev per "
                         "message), busy-polling, no library (`tcp_socket_pingpong.c`; "
                         "its `block` mode gives the blocking-socket floor)",
                  "shm": "two processes handing one cache line back and forth "
                         "(`shm_flag_pingpong.c`), the payload in the line, median of "
                         "batches of 500 round trips"}.get(args.provider, "none for this provider")
    md = [f"# fi_pingpong {tag}: weft vs Debian libfabric", "",
          f"`{cmd}` — one run with every byte checked (-c, {min(args.iters, 200)} iterations) "
          "on each library, then "
          f"{args.reps} interleaved timed repetitions of {args.iters} iterations (weft first "
          "in odd repetitions, libfabric first in even ones)"
          + (f" (at most {args.max_bytes >> 20} MiB per size)" if args.sizes != "all" else "") + ", "
          f"server on core {cores[0]}, client on core {cores[1]}, binary `{args.binary}`.", "",
          f"- weft: `{loaded['weft']}`", f"- libfabric: `{loaded['libfabric']}`"]
    md += record.summary() + ["",
          "Latency is fi_pingpong's usec/xfer (one-way, the average over the run); "
          "ratio = weft / libfabric (below 1 is better for latency, above 1 better for "
          "bandwidth). Bandwidth is fi_pingpong's MB/s (10^6 bytes/s): a *ping-pong* "
          "bandwidth, one message in flight at a time, i.e. size / one-way latency.", "",
          f"Latency floor (`bench/floors/`): {floor_what}; sampled once per repetition, "
          "median shown."]
    if bw_exe is not None:
        md += ["", "memcpy MB/s: single-core memcpy of one buffer of that size into another "
               "(`bench/floors/memcpy_bw.c`, median of batches), the single-copy ceiling."]
    bw_cols = " memcpy MB/s |" if bw_exe is not None else ""
    md += ["", "| size | weft µs | libfabric µs | ratio | floor µs | weft MB/s | libfabric MB/s | ratio |"
           f"{bw_cols} weft µs min–max | libfabric µs min–max | floor µs min–max |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if bw_cols else "")
           + " ---: | ---: | ---: |"]
    tsv = ["size\tweft_us\tlibfabric_us\tweft_mbs\tlibfabric_mbs\tfloor_us\tmemcpy_mbs"]
    nan = lambda v: v if v is not None else "NaN"
    for s in sizes:
        wl, ll = med("weft", s, 0), med("libfabric", s, 0)
        wb, lb = med("weft", s, 1), med("libfabric", s, 1)
        f = lambda v: f"{v:.2f}" if v is not None else "—"
        r = lambda a, b: f"{a / b:.2f}" if a is not None and b else "—"
        bw = f" {memcpy[s]:.0f} |" if s in memcpy else (" — |" if bw_cols else "")
        md.append(f"| {human(s)} | {f(wl)} | {f(ll)} | {r(wl, ll)} | {f(floor.get(s))} | {f(wb)} | {f(lb)} | "
                  f"{r(wb, lb)} |{bw} {spread('weft', s, 0)} | {spread('libfabric', s, 0)} | "
                  f"{floor_spread.get(s, '—')} |")
        tsv.append(f"{s}\t{nan(wl)}\t{nan(ll)}\t{nan(wb)}\t{nan(lb)}\t{nan(floor.get(s))}\t"
                   f"{nan(memcpy.get(s))}")
    (out / "results.md").write_text("\n".join(md) + "\n")
    (out / "data.tsv").write_text("\n".join(tsv) + "\n")
    record.write(out)
    plot(out, tag, bool(floor), bool(memcpy))
    print("\n".join(md))
    print(f"\nwritten to {out}")


def plot(out, tag, with_floor=False, with_memcpy=False):
    if not shutil.which("gnuplot"):
        print("gnuplot not installed: no plot")
        return
    lat_floor = ", '' using 1:6 with linespoints title 'floor'" if with_floor else ""
    bw_floor = ", '' using 1:7 with linespoints title 'memcpy'" if with_memcpy else ""
    script = f"""
set terminal pngcairo size 1200,500 font ',10'
set output '{out}/plot.png'
set multiplot layout 1,2 title 'fi\\_pingpong {tag}: weft vs Debian libfabric'
set logscale xy 2
set xlabel 'message size'
set format x '%.0b%BB'
set grid
set key top left
set datafile missing 'NaN'
set ylabel 'one-way latency (us)'
plot '{out}/data.tsv' using 1:2 with linespoints title 'weft', '' using 1:3 with linespoints title 'libfabric'{lat_floor}
set ylabel 'bandwidth (MB/s)'
plot '{out}/data.tsv' using 1:4 with linespoints title 'weft', '' using 1:5 with linespoints title 'libfabric'{bw_floor}
unset multiplot
"""
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        # gnuplot-nox may lack pngcairo; fall back to the plain png terminal.
        script = script.replace("pngcairo size 1200,500 font ',10'", "png size 1200,500")
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


if __name__ == "__main__":
    run_main(main)
