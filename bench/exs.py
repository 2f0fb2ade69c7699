#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""libexs (extended sockets over weft's tcp) against the kernel's sockets.

examples/exs/exs_ping (latency: one-way microseconds of a ping-pong) and
exs_blast (throughput: MB/s of a stream of messages with a window in
flight) run the same exchange over libexs, as SOCK_STREAM and as
SOCK_SEQPACKET, and over plain kernel TCP sockets (-K): the comparison
issue 15 asks for. Each repetition runs the three cases in a rotating
order, server and client pinned to different cores. Per case it reports
the median, min and max, and the ratio of each libexs case to the kernel's
median from the same run.

One host (loopback) by default; --two-hosts runs the server and the client
in two network namespaces joined by a veth pair (bench/netpath.py; root),
and checks that each throughput run's bytes crossed the veth.

Benchmarks are not tests: nothing here fails on a slow number, only on a
program that fails or prints no number. The results folder holds
results.md, samples.tsv and env.txt (bench/record.py).
"""
import argparse
import datetime
import os
import pathlib
import re
import socket
import statistics
import subprocess
import time

import netpath
from record import Record, run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = [("kernel", ["-K"]), ("stream", ["-t", "stream"]), ("seqpacket", ["-t", "seqpacket"])]
NUMBER = {"exs_ping": re.compile(r"one way: ([0-9.]+) us"),
          "exs_blast": re.compile(r": ([0-9.]+) MB/s")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(binary, args, hosts, cores, port, min_link_bytes=0, libdir=None):
    """One server and client run; the client's number. `libdir` holds another
    libexs.so.1 to load instead of the build's (--baseline)."""
    prog = binary.name
    server = ["taskset", "-c", str(cores[0]), str(binary), "-p", str(port)] + args
    client = ["taskset", "-c", str(cores[1]), str(binary), "-p", str(port)] + args
    addr = "127.0.0.1"
    if hosts:
        server, client, addr = hosts.server(server), hosts.client(client), hosts.server_addr
    env = dict(os.environ, EXS_PROVIDER=os.environ.get("EXS_PROVIDER", "tcp"))
    if libdir:
        # LD_LIBRARY_PATH goes before the programs' RUNPATH; weft's
        # libfabric.so.1 stays the build's.
        env["LD_LIBRARY_PATH"] = f"{libdir}:{binary.parent.parent.parent / 'src'}"
    before = hosts.link_bytes() if hosts else 0
    srv = subprocess.Popen(server, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env)
    try:
        out = ""
        for _ in range(100):  # the server may take a moment to listen
            r = subprocess.run(client + [addr], capture_output=True, text=True, timeout=120,
                               env=env)
            out = r.stdout + r.stderr
            if r.returncode == 0 or "refused" not in out:
                break
            time.sleep(0.05)
        srv_out, _ = srv.communicate(timeout=120)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    if r.returncode or srv.returncode:
        raise RuntimeError(f"{prog} {' '.join(args)}: client {r.returncode}: {out.strip()}; "
                           f"server {srv.returncode}: {srv_out.strip()}")
    m = NUMBER[prog].search(out)
    if not m:
        raise RuntimeError(f"{prog} {' '.join(args)} printed no number: {out.strip()}")
    if hosts:
        crossed = hosts.link_bytes() - before
        if crossed < min_link_bytes:
            raise RuntimeError(f"{prog} {' '.join(args)}: only {crossed} bytes crossed the veth, "
                               f"{min_link_bytes} expected")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"), help="weft's build folder")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--ping-size", type=int, default=8)
    p.add_argument("--ping-count", type=int, default=20000)
    p.add_argument("--blast-size", default="65536,1048576",
                   help="message sizes of exs_blast, comma-separated (bytes)")
    p.add_argument("--blast-count", type=int, default=20000,
                   help="messages of the first size; the others carry as many bytes")
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--cores", default="0,1", help="server core, client core")
    p.add_argument("--two-hosts", action="store_true")
    p.add_argument("--baseline", default=None,
                   help="a folder with another libexs.so.1 (e.g. built from an older commit): "
                        "its stream and seqpacket cases run too, in the same rotation")
    p.add_argument("--baseline-label", default="baseline", help="what --baseline is")
    p.add_argument("--out", default=None, help="results folder (default: bench/results/<date>-exs)")
    args = p.parse_args()
    rec = Record()
    bindir = pathlib.Path(args.build) / "examples" / "exs"
    bins = {name: bindir / name for name in ("exs_ping", "exs_blast")}
    for b in bins.values():
        if not os.access(b, os.X_OK):
            raise RuntimeError(f"no {b}: build weft first (scripts/build.sh)")
    cores = [int(c) for c in args.cores.split(",")]
    hosts = netpath.TwoHosts("wx").up() if args.two_hosts else None
    rec.measured(netpath.describe_path(hosts, "msg") + "; EXS_PROVIDER=" +
                 os.environ.get("EXS_PROVIDER", "tcp") + " (libexs over FI_EP_MSG)")
    lib = pathlib.Path(args.build) / "src" / "libfabric.so.1"
    if lib.exists():
        rec.libraries({"weft": str(lib.resolve())})
    tests = [("exs_ping", ["-s", str(args.ping_size), "-n", str(args.ping_count)], "us", 0)]
    sizes = [int(x) for x in args.blast_size.split(",")]
    total = sizes[0] * args.blast_count
    for size in sizes:
        count = max(1, total // size)
        tests.append(("exs_blast", ["-s", str(size), "-n", str(count), "-w", str(args.window)],
                      "MB/s", size * count))
    cases = [(c, a, None) for c, a in CASES]
    if args.baseline:
        base = pathlib.Path(args.baseline).resolve()
        if not (base / "libexs.so.1").exists():
            raise RuntimeError(f"no libexs.so.1 in {base}")
        cases += [(f"{c} ({args.baseline_label})", a, str(base)) for c, a in CASES[1:]]
        rec.libraries({"weft": str(lib.resolve()), f"libexs ({args.baseline_label})":
                       str(base / "libexs.so.1")})
    samples = []  # (program, case, rep, value)
    for rep in range(args.reps):
        k = rep % len(cases)
        order = cases[k:] + cases[:k]
        rec.order(f"repetition {rep}: " + ", ".join(c for c, _, _ in order))
        for prog, targs, _, link in tests:
            for case, cargs, libdir in order:
                v = run_one(bins[prog], cargs + targs, hosts, cores, free_port(), link, libdir)
                samples.append((" ".join([prog] + targs), case, rep, v))
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out or ROOT / "bench" / "results" /
                       f"{stamp}-exs{'-two-hosts' if hosts else ''}")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "samples.tsv", "w") as f:
        f.write("program\tcase\trep\tvalue\n")
        for s in samples:
            f.write("\t".join(str(x) for x in s) + "\n")
    lines = [f"# libexs against kernel sockets ({'two hosts' if hosts else 'one host'})", ""]
    lines += rec.summary() + [""]
    for prog, targs, unit, _ in tests:
        name = " ".join([prog] + targs)
        lines += [f"## {name} ({unit}, {args.reps} repetitions)", "",
                  "| case | median | min | max | median / kernel's |", "| --- | ---: | ---: | ---: | ---: |"]
        kernel = statistics.median(v for p_, c, _, v in samples if p_ == name and c == "kernel")
        for case, _, _ in cases:
            vals = [v for p_, c, _, v in samples if p_ == name and c == case]
            med = statistics.median(vals)
            lines.append(f"| {case} | {med:.2f} | {min(vals):.2f} | {max(vals):.2f} | "
                         f"{med / kernel:.2f} |")
        lines.append("")
    rec.publish(out, "\n".join(lines))


if __name__ == "__main__":
    run_main(main)
