#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft vs Debian's libfabric: latency and bandwidth through fi_pingpong.

The same fi_pingpong binary runs twice per repetition, once with weft's
libfabric.so.1 first on LD_LIBRARY_PATH and once with Debian's, interleaved
(A, B, A, B ...), server and client pinned to different cores. Per message
size it reports the median one-way latency and bandwidth of each library,
their ratio, and min/max so a noisy run shows. Output: a markdown table, a
TSV of every sample and a PNG plot (gnuplot) under the results folder.
Benchmarks are not tests: nothing here fails on a slow number, only on a run
that crashes or reports wrong data (fi_pingpong -c checks the data).
"""
import argparse
import datetime
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)$")


def parse_size(text):
    m = SIZE_RE.match(text)
    if not m:
        return None
    mult = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2)]
    return int(float(m.group(1)) * mult)


def loaded_library(binary, libdir):
    """Which libfabric.so.1 the dynamic linker picks for this run."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    out = subprocess.run(["ldd", binary], env=env, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libfabric.so.1" in line:
            return line.split("=>")[-1].split("(")[0].strip()
    return "?"


def run_pair(binary, libdir, args, port, cores, check=False):
    """One server/client run; returns {size: (usec_per_xfer, mb_per_sec)}.
    With `check`, fi_pingpong verifies every byte (-c): a correctness pass,
    not timed (filling and checking the pattern costs more than the transfer)."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    common = [binary, "-p", args.provider, "-e", args.endpoint, "-I", str(args.iters),
              "-S", args.sizes] + (["-m", args.mode] if args.mode else []) + (["-c"] if check else [])
    server = subprocess.Popen(["taskset", "-c", cores[0]] + common + ["-B", str(port)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.4)
    client = subprocess.run(["taskset", "-c", cores[1]] + common + ["-P", str(port), "127.0.0.1"],
                            env=env, capture_output=True, text=True, timeout=args.timeout)
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
    return rows


def floor_latency(provider, iters, cores, out):
    """The same ping-pong with plain sockets and no library: what no
    provider can beat here. {size: usec}; empty when there is none."""
    src = ROOT / "bench" / "floors" / f"{provider}_socket_pingpong.c"
    if not src.exists():
        return {}
    exe = pathlib.Path("/tmp") / f"weft-{provider}-floor-{os.getpid()}"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True)
    r = subprocess.run([str(exe), str(iters)], capture_output=True, text=True, timeout=600)
    rows = {}
    for line in r.stdout.splitlines()[1:]:
        size, usec = line.split()
        rows[int(size)] = float(usec)
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
    p.add_argument("--sizes", default="all")
    p.add_argument("--binary", default="/usr/bin/fi_pingpong",
                   help="the fi_pingpong to run on both libraries")
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
    p.add_argument("--cores", default="0,1")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()

    libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
    loaded = {name: loaded_library(args.binary, d) for name, d in libs.items()}
    for name, path in loaded.items():
        print(f"{name}: {path}")
    if loaded["weft"] == loaded["libfabric"]:
        sys.exit("both runs would load the same library")

    cores = args.cores.split(",")
    samples = {name: {} for name in libs}
    port = 40000 + os.getpid() % 10000
    for name, libdir in libs.items():  # correctness first: every byte checked
        port += 1
        run_pair(args.binary, libdir, args, port, cores, check=True)
    print("data checked on both libraries", flush=True)
    for rep in range(args.reps):
        for name, libdir in libs.items():   # interleaved: weft, libfabric, weft, ...
            port += 1
            for size, val in run_pair(args.binary, libdir, args, port, cores).items():
                samples[name].setdefault(size, []).append(val)
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    tag = f"{args.provider}-{args.endpoint}" + (f"-{args.mode}" if args.mode else "")
    out = pathlib.Path(args.out) / f"{stamp}-{tag}"
    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted(set(samples["weft"]) | set(samples["libfabric"]))
    floor = floor_latency(args.provider, args.iters, cores, out)

    def med(name, size, i):
        v = samples[name].get(size)
        return statistics.median(x[i] for x in v) if v else None

    def spread(name, size, i):
        v = samples[name].get(size)
        return f"{min(x[i] for x in v):.2f}–{max(x[i] for x in v):.2f}" if v else "—"

    cmd = " ".join(sys.argv)
    md = [f"# fi_pingpong {tag}: weft vs Debian libfabric", "",
          f"`{cmd}` — one run with every byte checked (-c) on each library, then "
          f"{args.reps} interleaved timed repetitions of {args.iters} iterations, "
          f"server on core {cores[0]}, client on core {cores[1]}, binary `{args.binary}`.", "",
          f"- weft: `{loaded['weft']}`", f"- libfabric: `{loaded['libfabric']}`", "",
          "Latency is fi_pingpong's usec/xfer (one-way); ratio = weft / libfabric "
          "(below 1 is better for latency, above 1 better for bandwidth).", "",
          "The floor is a plain socket ping-pong (`bench/floors/`), busy-polling, "
          "no library; measured once in the same run.", "",
          "| size | weft µs | libfabric µs | ratio | floor µs | weft MB/s | libfabric MB/s | ratio | weft µs min–max | libfabric µs min–max |",
          "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    tsv = ["size\tweft_us\tlibfabric_us\tweft_mbs\tlibfabric_mbs"]
    for s in sizes:
        wl, ll = med("weft", s, 0), med("libfabric", s, 0)
        wb, lb = med("weft", s, 1), med("libfabric", s, 1)
        f = lambda v: f"{v:.2f}" if v is not None else "—"
        r = lambda a, b: f"{a / b:.2f}" if a is not None and b else "—"
        md.append(f"| {human(s)} | {f(wl)} | {f(ll)} | {r(wl, ll)} | {f(floor.get(s))} | {f(wb)} | {f(lb)} | "
                  f"{r(wb, lb)} | {spread('weft', s, 0)} | {spread('libfabric', s, 0)} |")
        tsv.append(f"{s}\t{wl if wl is not None else 'NaN'}\t{ll if ll is not None else 'NaN'}\t"
                   f"{wb if wb is not None else 'NaN'}\t{lb if lb is not None else 'NaN'}")
    (out / "results.md").write_text("\n".join(md) + "\n")
    (out / "data.tsv").write_text("\n".join(tsv) + "\n")
    plot(out, tag)
    print("\n".join(md))
    print(f"\nwritten to {out}")


def plot(out, tag):
    if not shutil.which("gnuplot"):
        print("gnuplot not installed: no plot")
        return
    script = f"""
set terminal pngcairo size 1200,500 font ',10'
set output '{out}/plot.png'
set multiplot layout 1,2 title 'fi\\_pingpong {tag}: weft vs Debian libfabric'
set logscale xy 2
set xlabel 'message size (bytes)'
set grid
set key top left
set datafile missing 'NaN'
set ylabel 'one-way latency (us)'
plot '{out}/data.tsv' using 1:2 with linespoints title 'weft', '' using 1:3 with linespoints title 'libfabric'
set ylabel 'bandwidth (MB/s)'
plot '{out}/data.tsv' using 1:4 with linespoints title 'weft', '' using 1:5 with linespoints title 'libfabric'
unset multiplot
"""
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        # gnuplot-nox may lack pngcairo; fall back to the plain png terminal.
        script = script.replace("pngcairo size 1200,500 font ',10'", "png size 1200,500")
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


if __name__ == "__main__":
    main()
