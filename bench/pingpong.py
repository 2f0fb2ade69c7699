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

tcp runs over loopback by default, where weft's same-host paths apply
(FI_TCP_LOCAL_CC, and for FI_EP_MSG FI_TCP_LOCAL_STREAM). --two-hosts runs
the server and the client in two network namespaces joined by a veth pair
(bench/netpath.py; root), where none of them does, and checks it: every
timed run's payload must cross the veth, and neither process of a probed
run may map the same-host stream (evidence.txt in the results folder, with
what `ss` saw of the connections and weft's FI_LOG_LEVEL=info log). Each
results folder says which path it measured (results.md, env.txt).
"""
import argparse
import atexit
import datetime
import itertools
import os
import pathlib
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

import netpath
from record import Record, pair_order, require_libraries, run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
# What no provider can beat on this machine, per provider: the latency floor
# (one-way µs per size; argv: iterations, and for shm the two cores) and the
# bandwidth ceiling (MB/s per size; argv: core size...).
LATENCY_FLOORS = {"udp": "udp_socket_pingpong.c", "shm": "shm_flag_pingpong.c",
                  "tcp": "tcp_socket_pingpong.c"}
BANDWIDTH_FLOORS = {"shm": "memcpy_bw.c"}
NETNS_PORTS = itertools.count(20000)
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


def run_pair(binary, libdir, args, size, cores, check=False, iters=None, probe=None,
             extra_env=None):
    """One server/client run; returns {size: (usec_per_xfer, mb_per_sec)}.
    With `check`, fi_pingpong verifies every byte (-c): a correctness pass,
    not timed (filling and checking the pattern costs more than the transfer).
    Two hosts (args.hosts): the server in one namespace, the client in the
    other, and the payload must have crossed the veth. `probe(procs)` is
    called while the run is live (bench/netpath.py's evidence)."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, **(extra_env or {}))
    hosts = getattr(args, "hosts", None)  # demo.py's args have no path options
    port = free_port() if not hosts else next(NETNS_PORTS)  # the namespaces are ours alone
    # Checking is byte by byte: a few hundred checked iterations per size
    # prove the data path; more only takes minutes at 4 MiB.
    if iters is None:
        iters = args.iters
        if size != "all":  # large messages need fewer round trips for a steady number
            iters = min(iters, max(200, args.max_bytes // int(size)))
        if check:
            iters = min(iters, 200)
    common = [binary, "-p", args.provider, "-e", args.endpoint, "-I", str(iters),
              "-S", size] + (["-m", args.mode] if args.mode else []) + (["-c"] if check else [])
    server_cmd = ["taskset", "-c", cores[0]] + common + ["-B", str(port)]
    client_cmd = (["taskset", "-c", cores[1]] + common +
                  ["-P", str(port), hosts.server_addr if hosts else "127.0.0.1"])
    if hosts:
        server_cmd, client_cmd = hosts.server(server_cmd), hosts.client(client_cmd)
        link_before = hosts.link_bytes()
    server = subprocess.Popen(server_cmd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    client_proc = None
    try:
        time.sleep(0.4)
        client_proc = subprocess.Popen(client_cmd, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
        probed = probe([server, client_proc], port) if probe else None
        out, err = client_proc.communicate(timeout=args.timeout)
        client = subprocess.CompletedProcess(client_cmd, client_proc.returncode, out, err)
    except BaseException:  # a timeout, or the script stopped (a signal): no busy-polling leftovers
        for proc in (client_proc, server):
            if proc is not None:
                proc.kill()
                proc.wait()
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
    if hosts:
        # Each round trip carries the message both ways: if these bytes did
        # not cross the veth they took another path, and the run measured it.
        moved, payload = hosts.link_bytes() - link_before, sum(2 * iters * s for s in rows)
        if moved < payload:
            raise RuntimeError(f"two hosts: fi_pingpong on {libdir} moved {payload} payload "
                               f"bytes but the veth carried only {moved}: not the two-host path")
        args.link_log.append(f"{args.lib_names.get(libdir, libdir)} -S {size} -I {iters}"
                             f"{' -c' if check else ''}: payload {payload} B, veth {moved} B")
    if probe:
        return rows, probed, server_out + client.stdout + client.stderr
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


def run_floor(exe, argv, hosts=None):
    """One run of a floor program: {size: value} from its two-column output.
    With two hosts it starts in the server's namespace (tcp_socket_pingpong
    puts its echo side in the client's)."""
    if exe is None:
        return {}
    cmd = [str(exe)] + [str(a) for a in argv]
    r = subprocess.run(hosts.server(cmd) if hosts else cmd, capture_output=True, text=True,
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


def path_evidence(args, libs, cores):
    """One probed 1 MiB run per library on the path being measured: what
    `ss` sees of the connections (their congestion control), whether either
    process maps weft's same-host stream, weft's FI_LOG_LEVEL=info log, and
    the veth's byte counts of every run. Two hosts: a mapped stream is an
    error (the run would not measure what it says)."""
    namespaces = [args.hosts.server_ns, args.hosts.client_ns] if args.hosts else [None]
    text = [f"# Which path the tcp runs took ({args.endpoint})", "",
            f"path: {netpath.describe_path(args.hosts, args.endpoint)}", "",
            "A probed run per library: fi_pingpong -S 1 MiB, 500 round trips, sampled while "
            "live (bench/netpath.py). weft's run has FI_LOG_LEVEL=info.", ""]
    seen = {}
    for name, libdir in libs.items():
        extra = {"FI_LOG_LEVEL": "info"} if name == "weft" else {}
        _, sample, log = run_pair(args.binary, libdir, args, str(1 << 20), cores, iters=500,
                                  probe=lambda procs, port: netpath.probe(
                                      procs, namespaces, oob_port=port),
                                  extra_env=extra)
        seen[name] = sample
        text.append(netpath.probe_text(f"{name} ({libdir})", sample,
                                       log if name == "weft" else None))
        if name == "weft":
            text += ["weft's FI_LOG_LEVEL=info output, whole:", "```", log.rstrip(), "```", ""]
    netpath.judge(seen, text, args.hosts)
    return text


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
    p.add_argument("--two-hosts", action="store_true",
                   help="tcp: server and client in two network namespaces joined by a veth "
                        "pair (root), where none of weft's same-host paths apply")
    args = p.parse_args()
    record = Record()
    if args.two_hosts and args.provider != "tcp":
        sys.exit("--two-hosts is for --provider tcp")
    args.hosts = netpath.TwoHosts().up() if args.two_hosts else None
    args.link_log = []
    if args.provider == "tcp":
        record.measured(netpath.describe_path(args.hosts, args.endpoint))
        print(f"path: {record.path}", flush=True)

    libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
    args.lib_names = {d: n for n, d in libs.items()}
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
    floor_samples, block_samples = {}, {}
    for name, libdir in libs.items():  # correctness first: every byte checked
        for size in size_args:
            run_pair(args.binary, libdir, args, size, cores, check=True)
    print("data checked on both libraries", flush=True)
    evidence = path_evidence(args, libs, cores) if args.provider == "tcp" else None
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
        if args.provider == "tcp":
            # busy-polling to 64 KiB, and sleeping in recv at 8 B (the
            # blocking-socket floor), on the path the libraries took
            where = [args.hosts.server_addr, args.hosts.client_ns] if args.hosts else []
            floor_argv = [args.iters, 65536, "busy"] + where
            block = run_floor(lat_exe, [args.iters, 8, "block"] + where, args.hosts)
            for s, val in block.items():
                block_samples.setdefault(s, []).append(val)
        for s, val in run_floor(lat_exe, floor_argv, args.hosts).items():
            floor_samples.setdefault(s, []).append(val)
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    tag = f"{args.provider}-{args.endpoint}" + (f"-{args.mode}" if args.mode else "")
    if args.provider == "tcp":
        tag += "-two-hosts" if args.hosts else "-same-host"
    out = pathlib.Path(args.out) / f"{stamp}-{tag}"
    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted(set(samples["weft"]) | set(samples["libfabric"]))
    floor = {s: statistics.median(v) for s, v in floor_samples.items()}
    floor_spread = {s: f"{min(v):.2f}–{max(v):.2f}" for s, v in floor_samples.items()}
    block = {s: statistics.median(v) for s, v in block_samples.items()}
    block_spread = {s: f"{min(v):.2f}–{max(v):.2f}" for s, v in block_samples.items()}
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
                         "message), busy-polling, no library (`tcp_socket_pingpong.c`), "
                         + ("between the two namespaces" if args.hosts else "over loopback")
                         + "; the blocking floor is the same program sleeping in recv "
                         "(`block`), 8 B and below",
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
    md += record.summary()
    if evidence is not None:
        md.append("- path evidence (what `ss` saw of the connections, whether the same-host "
                  "stream was mapped, weft's info log, bytes per run): `evidence.txt`; "
                  + evidence[4].strip())
    md += ["",
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
    blk_col = " blocking floor µs |" if block else ""
    md += ["", f"| size | weft µs | libfabric µs | ratio | floor µs |{blk_col} weft MB/s | "
           f"libfabric MB/s | ratio |{bw_cols} weft µs min–max | libfabric µs min–max | "
           f"floor µs min–max |{' blocking floor min–max |' if block else ''}",
           "| ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if block else "")
           + " ---: | ---: | ---: |" + (" ---: |" if bw_cols else "")
           + " ---: | ---: | ---: |" + (" ---: |" if block else "")]
    tsv = ["size\tweft_us\tlibfabric_us\tweft_mbs\tlibfabric_mbs\tfloor_us\tmemcpy_mbs"]
    nan = lambda v: v if v is not None else "NaN"
    for s in sizes:
        wl, ll = med("weft", s, 0), med("libfabric", s, 0)
        wb, lb = med("weft", s, 1), med("libfabric", s, 1)
        f = lambda v: f"{v:.2f}" if v is not None else "—"
        r = lambda a, b: f"{a / b:.2f}" if a is not None and b else "—"
        bw = f" {memcpy[s]:.0f} |" if s in memcpy else (" — |" if bw_cols else "")
        blk = f" {f(block.get(s))} |" if block else ""
        blk_spread = f" {block_spread.get(s, '—')} |" if block else ""
        md.append(f"| {human(s)} | {f(wl)} | {f(ll)} | {r(wl, ll)} | {f(floor.get(s))} |{blk} "
                  f"{f(wb)} | {f(lb)} | "
                  f"{r(wb, lb)} |{bw} {spread('weft', s, 0)} | {spread('libfabric', s, 0)} | "
                  f"{floor_spread.get(s, '—')} |{blk_spread}")
        tsv.append(f"{s}\t{nan(wl)}\t{nan(ll)}\t{nan(wb)}\t{nan(lb)}\t{nan(floor.get(s))}\t"
                   f"{nan(memcpy.get(s))}")
    (out / "results.md").write_text("\n".join(md) + "\n")
    (out / "data.tsv").write_text("\n".join(tsv) + "\n")
    if evidence is not None:
        evidence += ["## Bytes each run moved" + (" across the veth (client's end, received + "
                     "sent; at least the payload, or the run failed)" if args.hosts else
                     " (loopback: not counted, the host's loopback carries others' traffic)"), ""]
        evidence += [f"- {line}" for line in args.link_log]
        (out / "evidence.txt").write_text("\n".join(evidence) + "\n")
        record.notes.append("path evidence: evidence.txt")
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
