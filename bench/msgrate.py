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
"""
import argparse
import datetime
import os
import pathlib
import re
import statistics
import subprocess
import sys

from pingpong import loaded_library

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINE = re.compile(r"^msgrate (\S+) .*: ([\d.]+) msg/s$", re.M)
# Windows per run: enough for ~0.5 s at the rates these providers reach here.
DEFAULT_WINDOWS = {"shm": 20000, "tcp": 3000}


def run(exe, libdir, args, op):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    cmd = [exe, "-p", args.provider, "-s", str(args.size), "-w", str(args.window),
           "-n", str(args.windows), "-W", str(args.warm), "-c", args.cores]
    if args.node:
        cmd += ["-a", args.node]
    if op == "tinject":
        cmd.append("-i")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    m = LINE.search(r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"msgrate failed on {libdir} ({' '.join(cmd)}):\n{r.stdout}{r.stderr}")
    return m.group(1), float(m.group(2))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--provider", default="shm")
    p.add_argument("--node", default=None,
                   help="fi_getinfo node with FI_SOURCE (default: 127.0.0.1 for tcp, none for shm)")
    p.add_argument("--ops", default="tsend,tinject", help="comma list of tsend, tinject")
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
    args = p.parse_args()
    if args.node is None and args.provider != "shm":
        args.node = "127.0.0.1"
    if args.windows is None:
        args.windows = DEFAULT_WINDOWS.get(args.provider, 3000)
    if args.warm is None:
        args.warm = max(args.windows // 10, 10)
    ops = args.ops.split(",")
    if not set(ops) <= {"tsend", "tinject"}:
        sys.exit("--ops takes tsend and/or tinject")

    exe = f"/tmp/weft-msgrate-{os.getpid()}"
    # Debian's headers (/usr/include/rdma) and Debian's libfabric.so to link:
    # the one binary then runs on either library.
    subprocess.run(["gcc", "-O2", "-o", exe, str(ROOT / "bench" / "msgrate.c"), "-lfabric"],
                   check=True)
    try:
        libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
        loaded = {name: loaded_library(exe, d) for name, d in libs.items()}
        for name, path in loaded.items():
            print(f"{name}: {path}")
        if loaded["weft"] == loaded["libfabric"]:
            sys.exit("both runs would load the same library")
        samples, provs = {}, {}
        for rep in range(args.reps):
            for op in ops:
                for name, libdir in libs.items():   # interleaved: weft, libfabric, ...
                    prov, rate = run(exe, libdir, args, op)
                    provs[name] = prov
                    samples.setdefault((op, name), []).append(rate)
            print(f"repetition {rep + 1}/{args.reps} done", flush=True)
    finally:
        os.unlink(exe)

    def med(op, name):
        return statistics.median(samples[(op, name)])

    def spread(op, name):
        v = samples[(op, name)]
        return f"{min(v) / 1e6:.2f}–{max(v) / 1e6:.2f}"

    rows = ["| operation | weft Mmsg/s | libfabric Mmsg/s | ratio | weft min–max | libfabric min–max |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for op in ops:
        w, l = med(op, "weft"), med(op, "libfabric")
        rows.append(f"| fi_{op} | {w / 1e6:.2f} | {l / 1e6:.2f} | {w / l:.2f} | {spread(op, 'weft')} | "
                    f"{spread(op, 'libfabric')} |")
    cores = args.cores.split(",")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-msgrate-{args.provider}"
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([
        f"# Message rate, {args.provider}: weft vs Debian libfabric", "",
        f"`{' '.join(sys.argv)}` — {args.size}-byte tagged messages in windows of {args.window}, "
        f"{args.windows} timed windows (after {args.warm} warm-up windows) per run, {args.reps} "
        f"interleaved repetitions; server on core {cores[0]}, client on core {cores[1]}; the same "
        "binary (bench/msgrate.c, built against Debian's headers) on both libraries; every "
        "window's data checked by the server.", "",
        f"- weft: `{loaded['weft']}` (provider {provs['weft']})",
        f"- libfabric: `{loaded['libfabric']}` (provider {provs['libfabric']})", "",
        "Messages per second at the client, millions; ratio = weft / libfabric (above 1 is "
        "better).", ""] + rows)
    (out / "results.md").write_text(text + "\n")
    print(text)
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
