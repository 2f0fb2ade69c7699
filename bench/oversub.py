#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft vs Debian's libfabric as users run them: nothing pinned, and more
busy threads than cores.

Two measurements, each interleaved weft / libfabric (alternating which runs
first) for --reps repetitions, every run reported, not only the median:

  unpinned latency: Debian's fi_pingpong (-e rdm -m tagged -S 8) with the
      server and client left wherever the scheduler puts them;
  oversubscribed: bench/oversub.c, N endpoint pairs in one process, one
      thread per endpoint polling its CQ, 64-byte messages, for N = 2 and
      N = 16 (4 and 32 threads on this machine's cores); the target is that
      16 pairs move at least a quarter of what 2 pairs move.

Usage: bench/oversub.py [--weft-lib DIR] [--system-lib DIR] [--provider shm]
                        [--reps 9] [--out bench/results]
A run that fails, hangs or reports nothing ends the script with status 1
and no results folder (bench/record.py).
"""
import argparse
import datetime
import os
import pathlib
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import record  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
PINGPONG = "/usr/bin/fi_pingpong"
OVERSUB = re.compile(r"^oversub \S+ pairs=(\d+) .*: ([\d.]+) MB/s$", re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pingpong(libdir, args):
    """One unpinned fi_pingpong run: one-way µs at 8 bytes."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    port = free_port()
    common = [PINGPONG, "-p", args.provider, "-e", "rdm", "-m", "tagged", "-S", "8",
              "-I", str(args.iters)]
    server = subprocess.Popen(common + ["-B", str(port)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    time.sleep(0.4)
    try:
        client = subprocess.run(common + ["-P", str(port), "127.0.0.1"], env=env,
                                capture_output=True, text=True, timeout=120)
    finally:
        try:
            server_out, _ = server.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server_out = "(server timed out)"
    if client.returncode or server.returncode:
        raise RuntimeError(f"fi_pingpong failed on {libdir}:\n{client.stdout}{client.stderr}\n"
                           f"server:\n{server_out}")
    for line in client.stdout.splitlines():
        f = line.split()
        if len(f) == 8 and f[0] == "8":
            return float(f[6])
    raise RuntimeError(f"fi_pingpong on {libdir} reported no 8-byte result:\n{client.stdout}")


def oversub(exe, libdir, pairs, args):
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run([exe, "-p", args.provider, "-n", str(pairs), "-s", "64",
                        "-m", str(args.messages)], env=env, capture_output=True, text=True,
                       timeout=300)
    m = OVERSUB.search(r.stdout)
    if r.returncode or not m:
        raise RuntimeError(f"oversub failed on {libdir} ({pairs} pairs):\n{r.stdout}{r.stderr}")
    return float(m.group(2))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
    p.add_argument("--provider", default="shm")
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--iters", type=int, default=20000, help="fi_pingpong round trips per run")
    p.add_argument("--messages", type=int, default=5000, help="messages per pair per run")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    rec = record.Record()
    libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
    loaded = record.require_libraries(PINGPONG, libs)
    rec.libraries(loaded)
    tmp = tempfile.mkdtemp(prefix="weft-oversub-")
    exe = os.path.join(tmp, "oversub")
    subprocess.run(["gcc", "-O2", "-o", exe, str(ROOT / "bench" / "oversub.c"), "-lfabric",
                    "-lpthread"], check=True)
    record.require_libraries(exe, libs)

    lat = {n: [] for n in libs}
    rate = {(n, k): [] for n in libs for k in (2, 16)}
    for rep in range(args.reps):
        order = record.pair_order(libs, rep)
        rec.order(f"rep {rep + 1}: {', '.join(order)}")
        for name in order:
            lat[name].append(pingpong(libs[name], args))
            for pairs in (2, 16):
                rate[(name, pairs)].append(oversub(exe, libs[name], pairs, args))
        print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
            f"{n} {lat[n][-1]:.2f} us, {rate[(n, 2)][-1]:.1f} / {rate[(n, 16)][-1]:.1f} MB/s"
            for n in libs), flush=True)

    def runs(v, fmt):
        return " ".join(fmt.format(x) for x in v)

    wl, ll = statistics.median(lat["weft"]), statistics.median(lat["libfabric"])
    rows = ["## Unpinned latency (fi_pingpong, 8 B, one-way µs)", "",
            "| library | median | min | max | max / median | every run |",
            "| --- | ---: | ---: | ---: | ---: | --- |"]
    for n in libs:
        m = statistics.median(lat[n])
        rows.append(f"| {n} | {m:.2f} | {min(lat[n]):.2f} | {max(lat[n]):.2f} | "
                    f"{max(lat[n]) / m:.2f} | {runs(lat[n], '{:.2f}')} |")
    rows += ["", f"weft / libfabric, medians: **{wl / ll:.2f}** (target ≤ 0.7); weft's slowest "
             f"run / its median: **{max(lat['weft']) / wl:.2f}** (target ≤ 2)", "",
             "## Oversubscribed: endpoint pairs, one polling thread each, 64 B (MB/s)", "",
             "| library | pairs | median | min | max | every run |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for n in libs:
        for k in (2, 16):
            v = rate[(n, k)]
            rows.append(f"| {n} | {k} | {statistics.median(v):.1f} | {min(v):.1f} | {max(v):.1f} | "
                        f"{runs(v, '{:.1f}')} |")
    w2, w16 = statistics.median(rate[("weft", 2)]), statistics.median(rate[("weft", 16)])
    rows += ["", f"weft, 16 pairs / (2 pairs / 4): **{w16 / (w2 / 4):.2f}** (target ≥ 1); "
             f"weft / libfabric at 16 pairs: **{w16 / statistics.median(rate[('libfabric', 16)]):.2f}**"]

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-oversub-{args.provider}"
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([
        f"# As users run it, {args.provider}: unpinned and oversubscribed, weft vs Debian libfabric",
        "", f"`{' '.join(sys.argv)}` — {args.reps} interleaved repetitions (order alternating), "
        f"nothing pinned; fi_pingpong {args.iters} round trips per run; bench/oversub.c "
        f"{args.messages} messages per pair per run, every message checked.", "",
        f"- weft: `{loaded['weft']}`", f"- libfabric: `{loaded['libfabric']}`"]
        + rec.summary() + [""] + rows) + "\n"
    rec.publish(out, text)


if __name__ == "__main__":
    record.run_main(main)
