#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft vs Debian's libfabric: what a tcp FI_EP_MSG server pays per
connection, with one shared receive context or receives per endpoint.

Builds bench/srx_conns.c once against Debian's libfabric headers and runs it
on each library (weft's first on LD_LIBRARY_PATH, then Debian's), in an
order that alternates per repetition: a server accepting --connections
connections from a child process, its receive buffers posted once to one
fi_srx_context (srx) or to every accepted endpoint (ep), every message
checked. It reports the server's resident memory per connection, idle and
after each client sent one message, and the bytes of receive buffers it
posted (issue 14: with the shared context they do not grow with the
connections). env.txt in the results folder records how the run was
produced (bench/record.py). A failed run ends the script with status 1 and
no number.
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
LINE = re.compile(r"^srx_conns (\S+) (\d+) connections: idle (-?\d+) B/conn, "
                  r"active (-?\d+) B/conn, posted (\d+) B$", re.M)


def run(exe, libdir, mode, args):
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run([exe, "-m", mode, "-n", str(args.connections), "-k", str(args.receives),
                        "-s", str(args.size)], env=env, capture_output=True, text=True,
                       timeout=600)
    m = LINE.search(r.stdout)
    if r.returncode or not m:
        raise RuntimeError(f"srx_conns -m {mode} failed on {libdir}:\n{r.stdout}{r.stderr}")
    return int(m.group(3)), int(m.group(4)), int(m.group(5))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--system-lib", default="/usr/lib/x86_64-linux-gnu")
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--receives", type=int, default=64)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    rec = record.Record()
    libs = {"weft": args.weft_lib, "libfabric": args.system_lib}
    tmp = tempfile.mkdtemp(prefix="weft-srx-conns-")
    exe = os.path.join(tmp, "srx_conns")
    subprocess.run(["gcc", "-O2", "-o", exe, str(ROOT / "bench" / "srx_conns.c"), "-lfabric"],
                   check=True)
    loaded = record.require_libraries(exe, libs)
    rec.libraries(loaded)
    cases = [(lib, mode) for mode in ("srx", "ep") for lib in ("weft", "libfabric")]
    got = {c: [] for c in cases}
    for rep in range(args.reps):
        order = record.pair_order(libs, rep)
        rec.order(f"rep {rep + 1}: {', '.join(order)}")
        for mode in ("srx", "ep"):
            for lib in order:
                got[(lib, mode)].append(run(exe, libs[lib], mode, args))
        print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
            f"{lib} {mode} {got[(lib, mode)][-1][0]} B" for lib, mode in cases), flush=True)
    rows = [f"## {args.connections} connections, {args.receives} receives of {args.size} B "
            "(per endpoint with ep, once with srx)", "",
            "| library | receives | idle (B/conn, median) | active (B/conn, median) | "
            "posted receive buffers (B) | every run (idle) |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for lib, mode in cases:
        v = got[(lib, mode)]
        rows.append(f"| {lib} | {'one fi_srx_context' if mode == 'srx' else 'per endpoint'} | "
                    f"{statistics.median(x[0] for x in v):.0f} | "
                    f"{statistics.median(x[1] for x in v):.0f} | {v[0][2]} | "
                    f"{' '.join(str(x[0]) for x in v)} |")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-srx-conns"
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([
        "# A tcp FI_EP_MSG server's memory per connection: weft vs Debian libfabric", "",
        f"`{' '.join(sys.argv)}` — bench/srx_conns.c, {args.reps} repetitions (order "
        "alternating). The server's resident memory (statm) before the first connection, "
        "with all connected, and after each client sent one message; the receive buffers "
        "are allocated and touched before the first measurement, so what is reported is the "
        "library's own.", "",
        f"- weft: `{loaded['weft']}`", f"- libfabric: `{loaded['libfabric']}`"]
        + rec.summary() + [""] + rows) + "\n"
    rec.publish(out, text)


if __name__ == "__main__":
    record.run_main(main)
