#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the link costs: weft's lnx against the provider it routes through, used directly.

fi_pingpong (Debian's binary) runs on weft's libfabric.so.1 twice per
repetition, interleaved and alternating which goes first: once with
`-p lnx`, once with `-p shm` (one host, where lnx routes through shm) or,
with --two-hosts, `-p tcp` (server and client in two network namespaces
joined by a veth pair, where lnx routes through tcp; root). Per size it
reports the median one-way latency and ping-pong bandwidth of each, their
ratio (lnx / direct) and min–max. Every byte is checked once per size on
both first (-c). Debian's libfabric 1.17 has no lnx, so there is no
libfabric column; `bench/instructions.sh lnx -t` with COMPARE=provider:shm
counts instructions the same way.
Benchmarks are not tests: nothing here fails on a slow number, only on a run
that crashes or reports wrong data; then it exits non-zero and writes no
number. env.txt in the results folder records how the run was produced.
"""
import argparse
import datetime
import pathlib
import statistics
import sys

import netpath
from pingpong import human, parse_size, run_pair
from record import Record, pair_order, require_libraries, run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", default="tagged", help="msg or tagged")
    p.add_argument("--iters", type=int, default=10000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--sizes", default="8,64,1k,16k,64k,1m,4m")
    p.add_argument("--max-bytes", type=int, default=1 << 30,
                   help="at most this many bytes per run (fewer iterations for large sizes, "
                        "at least 200)")
    p.add_argument("--binary", default="/usr/bin/fi_pingpong")
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--cores", default="0,1")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--two-hosts", action="store_true",
                   help="server and client in two network namespaces (root): lnx routes "
                        "through tcp, compared with tcp used directly")
    args = p.parse_args()
    record = Record()
    args.endpoint = "rdm"
    args.hosts = netpath.TwoHosts(prefix="wl").up() if args.two_hosts else None
    args.link_log, args.lib_names = [], {}
    direct = "tcp" if args.two_hosts else "shm"
    if args.hosts:
        record.measured(netpath.describe_path(args.hosts, "rdm"))
    loaded = require_libraries(args.binary, {"weft": args.weft_lib})
    record.libraries(loaded)
    cores = args.cores.split(",")
    sizes = [str(parse_size(s.lower())) for s in args.sizes.split(",")]
    if "None" in sizes:
        sys.exit(f"bad --sizes {args.sizes}: give sizes like 8,64k,1m")

    def run(prov, size, check=False):
        a = argparse.Namespace(**vars(args))
        a.provider = prov
        return run_pair(args.binary, args.weft_lib, a, size, cores, check=check)

    names = ["lnx", direct]
    for name in names:  # correctness first: every byte checked
        for size in sizes:
            run(name, size, check=True)
    print("data checked through both", flush=True)
    samples = {n: {} for n in names}
    for rep in range(args.reps):
        order = pair_order(names, rep)
        record.order(f"repetition {rep + 1}: {', '.join(order)}")
        for name in order:
            for size in sizes:
                for s, val in run(name, size).items():
                    samples[name].setdefault(s, []).append(val)
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)

    def med(name, s, i):
        v = samples[name].get(s)
        return statistics.median(x[i] for x in v) if v else None

    def spread(name, s, i):
        v = samples[name].get(s)
        return f"{min(x[i] for x in v):.2f}–{max(x[i] for x in v):.2f}" if v else "—"

    f = lambda v: f"{v:.2f}" if v is not None else "—"
    r = lambda a, b: f"{a / b:.2f}" if a is not None and b else "—"
    where = ("two network namespaces joined by a veth pair (lnx routes through tcp)"
             if args.hosts else "one host (lnx routes through shm)")
    md = [f"# fi_pingpong rdm {args.mode}: weft lnx vs weft {direct} used directly", "",
          f"`{' '.join(sys.argv)}` — {where}. One run with every byte checked (-c) through "
          f"each, then {args.reps} interleaved timed repetitions of up to {args.iters} "
          f"iterations (at most {args.max_bytes >> 20} MiB per size; lnx first in odd "
          f"repetitions), server on core {cores[0]}, client on core {cores[1]}, binary "
          f"`{args.binary}`.", "", f"- weft: `{loaded['weft']}`"]
    md += record.summary()
    md += ["", "Latency is fi_pingpong's usec/xfer (one-way); ratio = lnx / direct (below 1 "
           "is better for latency, above 1 for bandwidth). Bandwidth is fi_pingpong's MB/s, "
           "one message in flight.", "",
           f"| size | lnx µs | {direct} µs | ratio | lnx MB/s | {direct} MB/s | ratio | "
           f"lnx µs min–max | {direct} µs min–max |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in sorted(set(samples["lnx"]) | set(samples[direct])):
        ll, dl = med("lnx", s, 0), med(direct, s, 0)
        lb, db = med("lnx", s, 1), med(direct, s, 1)
        md.append(f"| {human(s)} | {f(ll)} | {f(dl)} | {r(ll, dl)} | {f(lb)} | {f(db)} | "
                  f"{r(lb, db)} | {spread('lnx', s, 0)} | {spread(direct, s, 0)} |")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-lnx-vs-{direct}-{args.mode}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text("\n".join(md) + "\n")
    record.write(out)
    print("\n".join(md))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    run_main(main)
