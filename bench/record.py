#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How a benchmark run was produced, and which library it ran on.

Every bench script takes a Record when it starts and writes it into its
results folder as env.txt when it has finished: the git commit of this tree
(and whether it was dirty, and what was), the commit of the tree holding
weft's library when that is another one, each library file the runs loaded
(path, size, modification time, SHA-256), every FI_* environment variable
(and the loader's LD_LIBRARY_PATH / LD_PRELOAD), the full command line, the
working directory, nproc, the CPU model, the kernel, the load average and
the start and end dates, the order in which the libraries ran in each
interleaved pair, and for tcp which path the run measured (two hosts or the
same host, with weft's FI_TCP_LOCAL_* settings: bench/netpath.py). Two runs that differ in any FI_* variable differ in
env.txt (and in the "FI_*" line of results.md, from summary()).

Also shared by the scripts: which libfabric.so.1 a binary loads from a given
folder (require_libraries refuses to run when weft's folder has none, or
when both folders lead to the same file) and the order of each pair.

From a shell script:
  python3 bench/record.py libraries <binary> weft=<dir> libfabric=<dir>
      checks the libraries as the Python scripts do; prints name=path lines
  python3 bench/record.py write <results folder> --started <ISO date>
      [--lib name=<path>]... [--order "<text>"]... -- <the benchmark's command line...>
      writes env.txt
"""
import argparse
import datetime
import hashlib
import os
import pathlib
import platform
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = "libfabric.so.1"


def _git(where, *args):
    r = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True)
    return r.stdout.rstrip() if r.returncode == 0 else None


def git_state(where):
    """(top, commit, dirty lines) of the git tree holding `where`, or None."""
    top = _git(where, "rev-parse", "--show-toplevel")
    if not top:
        return None
    commit = _git(top, "rev-parse", "HEAD") or "?"
    status = _git(top, "status", "--porcelain", "--untracked-files=no") or ""
    return top, commit, [line for line in status.splitlines() if line.strip()]


def cpu_model():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def loader_env():
    """Every FI_* variable, then the loader's, sorted: what changes a run."""
    fi = sorted((k, v) for k, v in os.environ.items() if k.startswith("FI_"))
    ld = sorted((k, v) for k, v in os.environ.items() if k in ("LD_LIBRARY_PATH", "LD_PRELOAD"))
    return fi, ld


def library_identity(path):
    """Path, size, mtime and SHA-256 of one library file."""
    p = pathlib.Path(path)
    try:
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError as e:
        return f"{path} (unreadable: {e.strerror})"
    mtime = datetime.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds")
    return f"{path} ({st.st_size} bytes, modified {mtime}, sha256 {digest})"


def loaded_library(binary, libdir):
    """Which libfabric.so.1 the dynamic linker picks for `binary` with
    LD_LIBRARY_PATH=libdir: the file itself (on a merged /usr, /lib/... and
    /usr/lib/... are one library), or None."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run(["ldd", str(binary)], env=env, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if LIBRARY in line and "=>" in line:
            path = line.split("=>")[-1].split("(")[0].strip()
            return os.path.realpath(path) if path and os.path.exists(path) else None
    return None


def check_libraries(binary, libs):
    """{name: loaded file} for {name: folder}, or an error text: every folder
    must hold a libfabric.so.1, the binary must load exactly that file from
    it, and no two folders may lead to the same file (a folder without weft
    would otherwise fall through to the system's library, and weft's numbers
    would be libfabric's)."""
    loaded = {}
    for name, libdir in libs.items():
        want = pathlib.Path(libdir) / LIBRARY
        if not want.exists():
            return None, f"{name}: no {LIBRARY} in {libdir}"
        got = loaded_library(binary, libdir)
        if got is None:
            return None, f"{name}: {binary} loads no {LIBRARY} with LD_LIBRARY_PATH={libdir}"
        if got != os.path.realpath(want):
            return None, (f"{name}: {binary} would load {got}, not {os.path.realpath(want)} "
                          f"(LD_LIBRARY_PATH={libdir})")
        loaded[name] = got
    names = list(loaded)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if loaded[a] == loaded[b]:
                return None, f"{a} and {b} would load the same library, {loaded[a]}"
    return loaded, None


def require_libraries(binary, libs):
    """check_libraries, printing what each run loads; exits 1 on a problem."""
    loaded, error = check_libraries(binary, libs)
    if error:
        sys.exit(f"error: {error}")
    for name, path in loaded.items():
        print(f"{name}: {path}", flush=True)
    return loaded


def pair_order(names, rep):
    """The order of one interleaved pair: as given in even repetitions
    (0, 2, ...), reversed in odd ones, so neither library always runs first
    (whatever the first run of a pair pays, caches, frequency, the other
    process's leftovers, falls on both alike)."""
    names = list(names)
    return names if rep % 2 == 0 else names[::-1]


def run_main(main):
    """Runs a script's main: a failed run (a program that exits non-zero,
    hangs or prints no number) ends the script with status 1 and one error
    line, and no results folder or table."""
    try:
        main()
    except (RuntimeError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        sys.exit(f"error: {e}")


class Record:
    """Taken when a run starts (the tree and the environment as they were
    then); written into the results folder when it has finished."""

    def __init__(self, argv=None, started=None):
        # A Python script's own command line starts with the interpreter.
        self.argv = ([os.path.basename(sys.executable)] + sys.argv) if argv is None else list(argv)
        self.started = started or datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.cwd = os.getcwd()
        self.git = git_state(ROOT)
        self.fi_env, self.ld_env = loader_env()
        self.libs = {}        # name -> loaded file
        self.lib_git = {}     # name -> git state of the tree holding it
        self.orders = []      # one text per interleaved pair
        self.notes = []
        self.path = None      # tcp: which path the bytes took (netpath.describe_path)

    def libraries(self, loaded):
        for name, path in loaded.items():
            self.libs[name] = path
            state = git_state(pathlib.Path(path).parent)
            if state and (not self.git or state[0] != self.git[0]):
                self.lib_git[name] = state

    def order(self, text):
        self.orders.append(text)

    def measured(self, path):
        """Which path the run measured (two hosts, or the same host and the
        same-host settings that applied); in env.txt and results.md."""
        self.path = path

    def commit_text(self, state=None):
        state = state or self.git
        if not state:
            return "not a git tree"
        top, commit, dirty = state
        return f"{commit}{' (dirty)' if dirty else ' (clean)'} in {top}"

    def fi_text(self):
        return ", ".join(f"{k}={v}" for k, v in self.fi_env) or "none set"

    def summary(self):
        """Two lines for results.md: the commit and the FI_* variables."""
        lines = [f"- commit: `{self.commit_text()}`", f"- FI_* variables: `{self.fi_text()}`"]
        if self.path:
            lines.append(f"- path measured: {self.path}")
        return lines + ["- how it ran (machine, libraries, order of each pair): `env.txt`"]

    def text(self):
        lines = [f"command: {shlex.join(self.argv)}",
                 f"working directory: {self.cwd}",
                 f"started: {self.started}",
                 f"finished: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
                 f"git commit: {self.commit_text()}"]
        if self.git and self.git[2]:
            lines += ["git modified (tracked):"] + [f"  {line}" for line in self.git[2]]
        for name, state in self.lib_git.items():
            lines.append(f"git commit of the tree holding {name}'s library (the build may "
                         f"predate it): {self.commit_text(state)}")
            lines += [f"  {line}" for line in state[2]]
        if self.path:
            lines.append(f"path measured: {self.path}")
        lines.append("FI_* environment:" + ("" if self.fi_env else " none set"))
        lines += [f"  {k}={v}" for k, v in self.fi_env]
        lines.append("loader environment of the script:" + ("" if self.ld_env else " none set"))
        lines += [f"  {k}={v}" for k, v in self.ld_env]
        for name, path in self.libs.items():
            lines.append(f"library {name}: {library_identity(path)}")
        try:
            load = " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])
        except OSError:
            load = "?"
        lines += [f"nproc: {os.cpu_count()} online, {len(os.sched_getaffinity(0))} usable",
                  f"cpu: {cpu_model()}",
                  f"kernel: {platform.release()} ({platform.version()})",
                  f"host: {platform.node()}",
                  f"load average (1, 5, 15 min) at the end: {load}"]
        if self.orders:
            lines.append("order of the libraries in each interleaved pair:")
            lines += [f"  {o}" for o in self.orders]
        lines += self.notes
        return "\n".join(lines) + "\n"

    def write(self, out):
        out = pathlib.Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "env.txt").write_text(self.text())

    def publish(self, out, text):
        """A finished run's folder: results.md (`text`) and env.txt, and the
        text and the folder printed."""
        out = pathlib.Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text(text)
        self.write(out)
        print(text)
        print(f"results: {out}")


def main():
    p = argparse.ArgumentParser(description="run records for shell benchmarks")
    sub = p.add_subparsers(dest="what", required=True)
    lp = sub.add_parser("libraries", help="check which library each folder gives a binary")
    lp.add_argument("binary")
    lp.add_argument("libs", nargs="+", metavar="name=dir")
    wp = sub.add_parser("write", help="write env.txt into a results folder")
    wp.add_argument("out")
    wp.add_argument("--started", required=True)
    wp.add_argument("--lib", action="append", default=[], metavar="name=path")
    wp.add_argument("--order", action="append", default=[])
    wp.add_argument("--path", default=None, help="which path the run measured")
    # The benchmark's own command line follows "--", verbatim.
    argv = sys.argv[1:]
    command = []
    if "--" in argv:
        command = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = p.parse_args(argv)
    if args.what == "libraries":
        libs = dict(a.split("=", 1) for a in args.libs)
        loaded, error = check_libraries(args.binary, libs)
        if error:
            sys.exit(f"error: {error}")
        for name, path in loaded.items():
            print(f"{name}={path}")
        return
    rec = Record(argv=command, started=args.started)
    rec.libraries(dict(a.split("=", 1) for a in args.lib))
    for o in args.order:
        rec.order(o)
    if args.path:
        rec.measured(args.path)
    rec.write(args.out)


if __name__ == "__main__":
    main()
