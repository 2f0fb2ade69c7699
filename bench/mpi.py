#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Open MPI over weft's lnx against Open MPI's own shared memory: 8-byte ping-pong, 2 ranks.

bench/mpi_pingpong.c (built with mpicc) runs on two ranks of this host,
bound to one core each, timing --iters round trips after 1000 warm-up ones.
Paths, run interleaved for --reps repetitions, the order rotating:
  weft lnx         pml cm + mtl ofi on weft's libfabric.so.1, nothing set:
                   Open MPI, with its default provider exclude list, picks
                   weft's default link (shm+tcp) by itself (a verbose run
                   first proves it, and that lnx reached the peer through
                   shm);
  ob1 vader        Open MPI's own shared memory (pml ob1, btl self,vader);
  libfabric shm    pml cm + mtl ofi on Debian's libfabric with
                   FI_PROVIDER=shm and Open MPI's exclusion of shm lifted,
                   if Open MPI accepts it; if it refuses, the run records
                   why (libfabric's own log lines) and leaves the column out.
Issue 13's goal: Open MPI over weft faster than its own shared memory. The
ratio is reported either way: per repetition (the two runs of one rotation)
and of the medians.
Benchmarks are not tests: nothing here fails on a slow number, only on a run
that crashes, picks another path or reports wrong data; then it exits
non-zero and writes no results folder.
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import record  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINE = re.compile(r"^mpi_pingpong bytes=(\d+) iters=(\d+) usec=([0-9.]+)$", re.M)
LNX, VADER, DEBIAN = "weft lnx (pml cm, mtl ofi)", "ob1 vader (pml ob1, btl self,vader)", \
    "Debian libfabric shm (pml cm, mtl ofi)"


def mpirun(exe, args, mca, env_vars, extra_env=None):
    """One mpirun of 2 ranks; everything by parameter on the command line,
    nothing from configuration files (Debian's turns the OFI mtl off)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_MCA_", "FI_")) and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(OMPI_MCA_mca_base_param_files="/dev/null",
               PMIX_MCA_mca_base_param_files="/dev/null",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra_env or {})
    cmd = ["mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "core"] + mca
    for k, v in env_vars.items():
        cmd += ["-x", f"{k}={v}"]
    cmd += [exe, str(args.iters), "8"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout,
                       stdin=subprocess.DEVNULL)
    return cmd, r


def paths(args):
    weft = {"LD_LIBRARY_PATH": args.weft_lib}
    cm = ["--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "btl", "self"]
    return {
        LNX: (cm, weft),
        VADER: (["--mca", "pml", "ob1", "--mca", "btl", "self,vader"], {}),
        DEBIAN: (cm + ["--mca", "mtl_ofi_provider_exclude", ""], {"FI_PROVIDER": "shm"}),
    }


def timed(exe, args, path):
    mca, env_vars = path
    cmd, r = mpirun(exe, args, mca, env_vars)
    m = LINE.search(r.stdout)
    if r.returncode or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return float(m.group(3))


def prove_lnx(exe, args, path):
    """A verbose run: Open MPI chose lnx on both ranks, weft's library
    logged (not another libfabric), and lnx reached the peer through shm."""
    mca, env_vars = path
    cmd, r = mpirun(exe, args, mca + ["--mca", "mtl_base_verbose", "10"],
                    dict(env_vars, FI_LOG_LEVEL="info"))
    out = r.stdout + r.stderr
    problems = []
    if r.returncode or not LINE.search(r.stdout):
        problems.append(f"exit {r.returncode}")
    if out.count("mtl:ofi:provider: shm+tcp:") != 2:
        problems.append("Open MPI did not choose lnx on both ranks")
    shm_pids = set(re.findall(r"^weft:(\d+):lnx:.*through shm", out, re.M))
    if len(shm_pids) != 2:
        problems.append(f"routes through shm seen from {len(shm_pids)} of 2 ranks")
    if re.search(r"^weft:\d+:lnx:.*through tcp", out, re.M):
        problems.append("a peer on this host was reached through tcp")
    if re.search(r"^libfabric:\d+:", out, re.M):
        problems.append("another libfabric logged")
    if problems:
        raise RuntimeError(f"{' '.join(cmd)}: {'; '.join(problems)}\n{out[-4000:]}")
    return "Open MPI chose lnx (shm+tcp) on both ranks; both reached the peer through shm"


def debian_refusal(exe, args, path):
    """None if Open MPI runs on Debian's shm; else why not, in libfabric's
    and Open MPI's own words."""
    mca, env_vars = path
    cmd, r = mpirun(exe, args, mca, dict(env_vars, FI_LOG_LEVEL="info"))
    if r.returncode == 0 and LINE.search(r.stdout):
        return None
    out = r.stdout + r.stderr
    keep = [line for line in out.splitlines()
            if re.search(r"shm:core:ofi_check_info|provider shm returned|cannot be selected", line)]
    return keep[:6] or out.splitlines()[-6:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weft-lib", default=str(ROOT / "build" / "src"))
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--iters", type=int, default=100000)
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    rec = record.Record()
    for tool in ("mpicc", "mpirun"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            sys.exit(f"error: {tool} not found (apt-get install openmpi-bin libopenmpi-dev)")
    tmp = tempfile.mkdtemp(prefix="weft-mpi-bench-")
    exe = os.path.join(tmp, "mpi_pingpong")
    subprocess.run(["mpicc", "-std=c99", "-O2", "-Wall", "-Werror", "-o", exe,
                    str(ROOT / "bench" / "mpi_pingpong.c")], check=True)
    weft = pathlib.Path(args.weft_lib).resolve() / "libfabric.so.1"
    if not weft.exists():
        sys.exit(f"error: {weft} does not exist")
    rec.libraries({"weft": str(weft.resolve())})
    all_paths = paths(args)
    proof = prove_lnx(exe, args, all_paths[LNX])
    print(proof, flush=True)
    refusal = debian_refusal(exe, args, all_paths[DEBIAN])
    names = [LNX, VADER] + ([DEBIAN] if refusal is None else [])
    if refusal:
        print(f"{DEBIAN}: refused; left out", flush=True)
    got = {n: [] for n in names}
    for rep in range(args.reps):
        k = rep % len(names)
        order = names[k:] + names[:k]
        rec.order(f"rep {rep + 1}: {'; '.join(order)}")
        for n in order:
            got[n].append(timed(exe, args, all_paths[n]))
        print(f"rep {rep + 1}/{args.reps}: " + ", ".join(f"{n.split(' (')[0]} {got[n][-1]:.3f}"
                                                       for n in names), flush=True)

    med = {n: statistics.median(v) for n, v in got.items()}
    rows = ["| path | median one-way (µs) | min | max | every run |",
            "| --- | ---: | ---: | ---: | --- |"]
    for n in names:
        v = got[n]
        rows.append(f"| {n} | {med[n]:.3f} | {min(v):.3f} | {max(v):.3f} | "
                    f"{' '.join(f'{x:.3f}' for x in v)} |")
    per_rep = [a / b for a, b in zip(got[LNX], got[VADER])]
    rows += ["", f"- weft lnx / ob1 vader: **{statistics.median(per_rep):.2f}x** (median of "
             f"the {args.reps} repetitions' ratios: {' '.join(f'{x:.2f}' for x in per_rep)}); "
             f"ratio of medians {med[LNX] / med[VADER]:.2f}x. Below 1: Open MPI over weft is "
             "faster than its own shared memory (issue 13's goal)."]
    if refusal is None:
        rows.append(f"- Debian libfabric shm / ob1 vader: ratio of medians "
                    f"{med[DEBIAN] / med[VADER]:.2f}x")
    else:
        rows += ["- Debian libfabric shm: Open MPI cannot run on it; its words and "
                 "libfabric's:", "", "```"] + refusal + ["```"]
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = pathlib.Path(args.out) / f"{stamp}-mpi-lnx"
    text = "\n".join([
        "# Open MPI, 2 ranks on one host, 8-byte ping-pong", "",
        f"`{' '.join(sys.argv)}`: {args.reps} repetitions, the order of the paths rotating; "
        f"{args.iters} round trips per run after 1000 warm-up ones (bench/mpi_pingpong.c), "
        "ranks bound to one core each.", "",
        f"- weft: `{weft.resolve()}`", f"- proof of path: {proof}",
        f"- Open MPI: {subprocess.run(['mpirun', '--version'], capture_output=True, text=True).stdout.splitlines()[0]}"]
        + rec.summary() + [""] + rows) + "\n"
    rec.publish(out, text)


if __name__ == "__main__":
    record.run_main(main)
