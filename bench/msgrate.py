#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft vs Debian's libfabric: message rate of small tagged messages.

Builds bench/msgrate.c once against Debian's libfabric headers and runs the
same binary on both libraries (weft's build first on LD_LIBRARY_PATH, then
Debian's), interleaved (weft, libfabric, weft, ...). Each run forks a server
(pinned to the first core) and a client (the second core); the client sends
windows of messages, the server has each window's receives posted and
acknowledges every window with one message, and checks what arrived. Per
operation (fi_tsend, fi_tinject) it reports the median messages per second
of each library, the ratio and min–max, as a markdown table in the results
folder. Works for --provider shm and --provider tcp (tcp binds to
127.0.0.1 through fi_getinfo's node with FI_SOURCE; the two sides swap
their fi_getname addresses through pipes).

`--ops latency` runs the same binary's ping-pong mode (msgrate -l): single
messages with fi_tinject, two receives kept posted on each side, one-way
time = round trip / 2, and beside it the latency floor of pingpong.py
(for shm the cache-line handoff), sampled once per repetition.

The program checks every message it receives (bench/msgrate.c); a run that
fails, or a weft folder without its own libfabric.so.1, ends the script
with status 1 and no number. Each pair's order alternates (weft first in
odd repetitions); env.txt in the results folder records how the run was
produced (bench/record.py).

tcp: --two-hosts puts the server in one network namespace and the client
(msgrate -N) in another, joined by a veth pair (bench/netpath.py; root),
where none of weft's same-host paths apply; over loopback (the default)
FI_TCP_LOCAL_CC does. Every run's payload must cross the veth; a probed run
per library (ss, the same-host stream's mapping, weft's FI_LOG_LEVEL=info
log) goes to evidence.txt, and results.md and env.txt say which path the
run measured.
"""
import argparse
import datetime
import os
import pathlib
import re
import statistics
import subprocess
import sys

import netpath
from pingpong import LATENCY_FLOORS, build_floor, run_floor
from record import Record, pair_order, require_libraries, run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINE = re.compile(r"^msgrate (\S+) .*: ([\d.]+) msg/s$", re.M)
LAT_LINE = re.compile(r"^latency (\S+) .*: ([\d.]+) us one-way$", re.M)
# Windows per run: enough for ~0.5 s at the rates these providers reach here.
DEFAULT_WINDOWS = {"shm": 20000, "tcp": 3000}
RING_LAYOUT_FLOOR = "shm_ring_pingpong.c"


def run_layouts(exe, argv):
    """One run of shm_ring_pingpong: {layout: one-way µs}."""
    r = subprocess.run([str(exe)] + [str(a) for a in argv], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} failed:\n{r.stdout}{r.stderr}")
    rows = {name: float(value) for name, value in
            (line.split() for line in r.stdout.splitlines()[1:])}
    if not rows:
        raise RuntimeError(f"{exe} printed no result:\n{r.stdout}{r.stderr}")
    return rows


def run(exe, libdir, args, op, windows=None, probe=None, extra_env=None):
    """One run: (provider, rate or µs); with `probe`, also what it saw and
    the program's output."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, **(extra_env or {}))
    windows = windows or args.windows
    cmd = [exe, "-p", args.provider, "-s", str(args.size), "-w", str(args.window),
           "-n", str(windows), "-W", str(args.warm), "-c", args.cores]
    if args.node:
        cmd += ["-a", args.node]
    hosts = args.hosts
    if hosts:
        cmd += ["-A", hosts.client_addr, "-N", hosts.client_ns]
        cmd = hosts.server(cmd)
        link_before = hosts.link_bytes()
    if op == "tinject":
        cmd.append("-i")
    if op == "latency":
        cmd.append("-l")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        probed = probe([proc]) if probe else None
        out, err = proc.communicate(timeout=args.timeout)
    except BaseException:  # a timeout, or the script stopped (a signal)
        proc.kill()
        proc.wait()
        raise
    m = (LAT_LINE if op == "latency" else LINE).search(out)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"msgrate failed on {libdir} ({' '.join(cmd)}):\n{out}{err}")
    if hosts:
        # Every message (warm-up included) crosses the link once, a
        # latency round trip twice; else the run took another path.
        count = args.warm + windows
        payload = count * 2 * args.size if op == "latency" else count * args.window * args.size
        moved = hosts.link_bytes() - link_before
        if moved < payload:
            raise RuntimeError(f"two hosts: msgrate on {libdir} moved {payload} payload bytes "
                               f"but the veth carried only {moved}: not the two-host path")
        args.link_log.append(f"{args.lib_names.get(libdir, libdir)} {op} -n {windows}: "
                             f"payload {payload} B, veth {moved} B")
    if probe:
        return m.group(1), float(m.group(2)), probed, out + err
    return m.group(1), float(m.group(2))


def path_evidence(exe, args, libs, ops):
    """A probed run per library (bench/netpath.py): ss of its connections,
    the same-host stream's mapping, weft's FI_LOG_LEVEL=info log. Two hosts:
    a mapped stream is an error."""
    op = ops[0]
    namespaces = [args.hosts.server_ns, args.hosts.client_ns] if args.hosts else [None]
    windows = args.windows * (5 if op != "latency" else 1)
    text = [f"# Which path the tcp runs took (RDM, msgrate)", "",
            f"path: {netpath.describe_path(args.hosts, 'rdm')}", "",
            f"A probed run per library: msgrate {op}, {windows} windows (round trips for "
            "latency), sampled while live (bench/netpath.py). weft's run has "
            "FI_LOG_LEVEL=info.", ""]
    seen = {}
    for name, libdir in libs.items():
        extra = {"FI_LOG_LEVEL": "info"} if name == "weft" else {}
        _, _, sample, log = run(exe, libdir, args, op, windows=windows,
                                probe=lambda procs: netpath.probe(procs, namespaces, enough=4096),
                                extra_env=extra)
        seen[name] = sample
        text.append(netpath.probe_text(f"{name} ({libdir})", sample,
                                       log if name == "weft" else None))
        if name == "weft":
            text += ["weft's FI_LOG_LEVEL=info output, whole:", "```", log.rstrip(), "```", ""]
    netpath.judge(seen, text, args.hosts)
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--provider", default="shm")
    p.add_argument("--node", default=None,
                   help="fi_getinfo node with FI_SOURCE (default: 127.0.0.1 for tcp, none for shm)")
    p.add_argument("--ops", default="tsend,tinject", help="comma list of tsend, tinject, latency")
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--windows", type=int, default=None, help="timed windows per run")
    p.add_argument("--warm", type=int, default=None, help="warm-up windows per run")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--cores", default="0,1")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
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
    if args.hosts:
        args.node = args.hosts.server_addr
    if args.node is None and args.provider != "shm":
        args.node = "127.0.0.1"
    if args.provider == "tcp":
        record.measured(netpath.describe_path(args.hosts, "rdm"))
        print(f"path: {record.path}", flush=True)
    ops = args.ops.split(",")
    if not set(ops) <= {"tsend", "tinject", "latency"}:
        sys.exit("--ops takes tsend, tinject and/or latency")
    if args.windows is None:
        # latency: round trips, not windows
        args.windows = DEFAULT_WINDOWS.get(args.provider, 3000) * (10 if ops == ["latency"] else 1)
    if args.warm is None:
        args.warm = max(args.windows // 10, 10)

    exe = f"/tmp/weft-msgrate-{os.getpid()}"
    # Debian's headers (/usr/include/rdma) and Debian's libfabric.so to link:
    # the one binary then runs on either library.
    subprocess.run(["gcc", "-O2", "-o", exe, str(ROOT / "bench" / "msgrate.c"), "-lfabric"],
                   check=True)
    try:
        libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
        args.lib_names = {d: n for n, d in libs.items()}
        loaded = require_libraries(exe, libs)
        record.libraries(loaded)
        evidence = path_evidence(exe, args, libs, ops) if args.provider == "tcp" else None
        samples, provs, floor = {}, {}, []
        floor_exe = build_floor(LATENCY_FLOORS.get(args.provider)) if "latency" in ops else None
        # shm: also what the ring layout alone costs (bench/floors/shm_ring_pingpong.c)
        layout_exe = (build_floor(RING_LAYOUT_FLOOR)
                      if "latency" in ops and args.provider == "shm" else None)
        layouts = {}
        cores = args.cores.split(",")
        for rep in range(args.reps):
            if floor_exe:   # it moves with where the virtual CPUs land: sample every round
                argv = [args.windows, cores[0], cores[1]] if args.provider == "shm" else [args.windows]
                if args.hosts:
                    argv += [65536, "busy", args.hosts.server_addr, args.hosts.client_ns]
                floor.append(run_floor(floor_exe, argv, args.hosts).get(args.size))
            if layout_exe:
                for name, value in run_layouts(layout_exe, [args.windows, cores[0], cores[1]]).items():
                    layouts.setdefault(name, []).append(value)
            order = pair_order(libs, rep)   # interleaved, the first one alternating
            record.order(f"repetition {rep + 1}: {', '.join(order)} (each of {', '.join(ops)})")
            for op in ops:
                for name in order:
                    prov, rate = run(exe, libs[name], args, op)
                    provs[name] = prov
                    samples.setdefault((op, name), []).append(rate)
            print(f"repetition {rep + 1}/{args.reps} done", flush=True)
    finally:
        os.unlink(exe)
        if "latency" in ops and floor_exe:
            floor_exe.unlink(missing_ok=True)
        if "latency" in ops and layout_exe:
            layout_exe.unlink(missing_ok=True)

    def med(op, name):
        return statistics.median(samples[(op, name)])

    def spread(op, name):
        v = samples[(op, name)]
        return f"{min(v) / 1e6:.2f}–{max(v) / 1e6:.2f}"

    rows = []
    rates = [op for op in ops if op != "latency"]
    if rates:
        rows += ["| operation | weft Mmsg/s | libfabric Mmsg/s | ratio | weft min–max | libfabric min–max |",
                 "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for op in rates:
        w, l = med(op, "weft"), med(op, "libfabric")
        rows.append(f"| fi_{op} | {w / 1e6:.2f} | {l / 1e6:.2f} | {w / l:.2f} | {spread(op, 'weft')} | "
                    f"{spread(op, 'libfabric')} |")
    if "latency" in ops:
        def us(name):
            v = samples[("latency", name)]
            return statistics.median(v), f"{min(v):.3f}–{max(v):.3f}"
        (w, ws), (l, ls) = us("weft"), us("libfabric")
        fl = [f for f in floor if f is not None]
        f = statistics.median(fl) if fl else None
        ftext = (f"| {f:.3f} | {min(fl):.3f}–{max(fl):.3f} | {w / f:.2f} |" if f else "| — | — | — |")
        if rows:
            rows.append("")
        rows += ["| one-way latency | weft µs | libfabric µs | ratio | weft min–max | libfabric min–max "
                 "| floor µs | floor min–max | weft / floor |",
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
                 f"| {args.size} B, fi_tinject | {w:.3f} | {l:.3f} | {w / l:.2f} | {ws} | {ls} " + ftext]
        if layouts:
            rows += ["", "What the ring layout alone costs (bench/floors/shm_ring_pingpong.c, 8 B, "
                     "no provider work; median of the per-repetition samples):", "",
                     "| layout | µs | min–max | weft / layout |", "| --- | ---: | ---: | ---: |"]
            for name, v in layouts.items():
                m = statistics.median(v)
                rows.append(f"| {name} | {m:.3f} | {min(v):.3f}–{max(v):.3f} | {w / m:.2f} |")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    tag = f"{'msgrate' if rates else 'latency'}-{args.provider}"
    if args.provider == "tcp":
        tag += "-two-hosts" if args.hosts else "-same-host"
    out = pathlib.Path(args.out) / f"{stamp}-{tag}"
    out.mkdir(parents=True, exist_ok=True)
    what = (f"{args.size}-byte tagged messages in windows of {args.window}, {args.windows} timed "
            f"windows (after {args.warm} warm-up windows) per run" if rates else
            f"a ping-pong of {args.size}-byte tagged messages, {args.windows} timed round trips "
            f"(after {args.warm} warm-up ones) per run")
    text = "\n".join([
        f"# {'Message rate' if rates else 'Latency'}, {args.provider}: weft vs Debian libfabric", "",
        f"`{' '.join(sys.argv)}` — {what}, {args.reps} "
        f"interleaved repetitions (weft first in odd ones, libfabric first in even ones); "
        f"server on core {cores[0]}, client on core {cores[1]}; the same "
        "binary (bench/msgrate.c, built against Debian's headers) on both libraries; every "
        "message's sequence number and payload checked.", "",
        f"- weft: `{loaded['weft']}` (provider {provs['weft']})",
        f"- libfabric: `{loaded['libfabric']}` (provider {provs['libfabric']})"] + record.summary()
        + ([f"- path evidence (what `ss` saw of the connections, whether the same-host stream "
            f"was mapped, weft's info log, bytes per run): `evidence.txt`; "
            f"{evidence[4].strip()}"] if evidence else []) + ["",
        "Messages per second at the client, millions; ratio = weft / libfabric (above 1 is "
        "better). Latency (`latency`: msgrate -l, a ping-pong of single messages): one-way µs, "
        "the median of the repetitions; below 1 is better. Floor: bench/floors/, the size's "
        "line, median of the per-repetition samples.", ""] + rows)
    (out / "results.md").write_text(text + "\n")
    if evidence is not None:
        evidence += ["## Bytes each run moved" + (" across the veth (client's end, received + "
                     "sent; at least the payload, or the run failed)" if args.hosts else
                     " (loopback: not counted, the host's loopback carries others' traffic)"), ""]
        evidence += [f"- {line}" for line in args.link_log]
        (out / "evidence.txt").write_text("\n".join(evidence) + "\n")
        record.notes.append("path evidence: evidence.txt")
    record.write(out)
    print(text)
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    run_main(main)
