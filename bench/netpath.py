#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where a tcp benchmark's bytes travel, and the proof of it.

weft carries connections whose two ends share a host differently from
remote ones: same-host sockets get FI_TCP_LOCAL_CC's congestion control
(reno unless set), and same-host FI_EP_MSG connections under manual progress
move to a shared-memory stream (FI_TCP_LOCAL_STREAM, a memfd named
"weft-tcp-local" that both processes map). Loopback measures those paths;
tcp between two hosts takes none of them.

TwoHosts makes "two hosts" on one machine: two network namespaces of this
process's own joined by a veth pair (10.93.0.1 the server's, 10.93.0.2 the
client's), removed when the script exits (normally, on an error, or on
SIGINT/SIGTERM/SIGHUP). The scripts run their server in one and their
client in the other.

What it checks, so a number is never credited to the wrong path:
- link bytes: the veth's byte counters, read before and after every timed
  run; a two-host run whose payload did not cross the link (it went through
  shared memory, or nowhere) is an error;
- a probe while a run is live: `ss -tinp` for the run's own processes (the
  congestion control each connection really uses) and whether either process
  maps the same-host stream; in two-host mode a mapped stream is an error;
- the FI_LOG_LEVEL=info log of that probed weft run, kept in the results
  folder (weft logs at info when a same-host stream is refused, nothing when
  one is taken: the memfd mapping is the positive evidence).
"""
import atexit
import json
import os
import signal
import subprocess
import time

OOB = "the benchmark's out-of-band socket, not the library's"
STREAM_MEMFD = "weft-tcp-local"   # src/prov/tcp/local_stream.cpp's memfd name
WEFT_DEFAULTS = {"FI_TCP_LOCAL_STREAM": "1", "FI_TCP_LOCAL_CC": "reno"}  # params.hpp


def _exit_on_signal(sig, frame):
    # SystemExit runs the atexit handlers, which remove the namespaces.
    raise SystemExit(128 + sig)


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def system_cc(netns=None):
    """The kernel's default congestion control (in `netns` when given)."""
    cmd = ["sysctl", "-n", "net.ipv4.tcp_congestion_control"]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.stdout.strip() or "?"


class TwoHosts:
    """Two network namespaces joined by a veth pair, for one script run."""

    def __init__(self, prefix="wb"):
        pid = os.getpid()
        self.server_ns, self.client_ns = f"{prefix}-srv-{pid}", f"{prefix}-cli-{pid}"
        self.server_dev, self.client_dev = f"{prefix}-srv", f"{prefix}-cli"
        self.server_addr, self.client_addr = "10.93.0.1", "10.93.0.2"
        self._up = False

    def up(self):
        if os.geteuid() != 0:
            raise RuntimeError("--two-hosts needs root (network namespaces)")
        atexit.register(self.down)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _exit_on_signal)
        self._up = True
        try:
            _ip("netns", "add", self.server_ns)
            _ip("netns", "add", self.client_ns)
            _ip("link", "add", self.server_dev, "netns", self.server_ns, "type", "veth",
                "peer", "name", self.client_dev, "netns", self.client_ns)
            for ns, dev, addr in ((self.server_ns, self.server_dev, self.server_addr),
                                  (self.client_ns, self.client_dev, self.client_addr)):
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", dev, "up")
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"cannot make the two namespaces: {' '.join(e.cmd)}: {e.stderr}")
        # The link is up once the client's end reports it so (no ping here).
        for _ in range(100):
            state = json.loads(_ip("-n", self.client_ns, "-j", "link", "show", "dev",
                                   self.client_dev).stdout)[0].get("operstate")
            if state == "UP":
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{self.client_dev} never came up")
        return self

    def down(self):
        if not self._up:
            return
        self._up = False
        for ns in (self.server_ns, self.client_ns):
            _ip("netns", "del", ns, check=False)

    def server(self, cmd):
        return ["ip", "netns", "exec", self.server_ns] + list(cmd)

    def client(self, cmd):
        return ["ip", "netns", "exec", self.client_ns] + list(cmd)

    def link_bytes(self):
        """Bytes the client's end of the veth has received plus sent."""
        d = json.loads(_ip("-n", self.client_ns, "-s", "-j", "link", "show", "dev",
                           self.client_dev).stdout)[0]
        s = d.get("stats64") or d["stats"]
        return s["rx"]["bytes"] + s["tx"]["bytes"]

    def describe(self):
        return (f"network namespaces {self.server_ns} ({self.server_addr}, {self.server_dev}) "
                f"and {self.client_ns} ({self.client_addr}, {self.client_dev}) joined by a "
                "veth pair")


def settings():
    """weft's FI_TCP_LOCAL_* as a run sees them: the variable, or the default."""
    out = {}
    for k, default in WEFT_DEFAULTS.items():
        out[k] = (os.environ[k], "set") if k in os.environ else (default, "weft's default")
    return out


def describe_path(hosts, endpoint):
    """One paragraph: which path a tcp run measures, with the FI_TCP_* that
    decide it (for env.txt and results.md)."""
    s = settings()
    stream, cc = s["FI_TCP_LOCAL_STREAM"], s["FI_TCP_LOCAL_CC"]
    knobs = (f"FI_TCP_LOCAL_STREAM={stream[0]} ({stream[1]}), "
             f"FI_TCP_LOCAL_CC={cc[0] or '(empty)'} ({cc[1]})")
    if hosts:
        return (f"two hosts: server and client in {hosts.describe()}; "
                f"every connection crosses the veth, so none of weft's same-host paths apply "
                f"({knobs} act only on connections whose two ends share a host); both "
                f"libraries' sockets use the namespaces' congestion control, "
                f"{system_cc(hosts.client_ns)}")
    on = stream[0].strip().lower() not in ("0", "false", "no", "off")
    if endpoint == "msg":
        stream_text = ("weft's MSG connections go through the same-host shared-memory "
                       "stream (manual progress)" if on else
                       "the same-host stream is off: weft's MSG connections stay on the socket")
    else:
        stream_text = "the same-host stream does not apply (FI_EP_MSG only)"
    cc_text = (f"weft's sockets use {cc[0]}" if cc[0] else
               "weft's sockets keep the system's congestion control")
    return (f"same host: loopback (127.0.0.1); {knobs}: {stream_text}; {cc_text}, "
            f"libfabric's the system's ({system_cc()})")


def _read(path):
    with open(path) as f:
        return f.read()


def _tree(pid):
    """`pid` and its descendants, from every process's parent in /proc
    (a thread's /proc children list misses a child forked by another)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(_read(f"/proc/{d}/stat").rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += kids.get(p, [])
    return pids


def _maps_stream(pid):
    try:
        return STREAM_MEMFD in _read(f"/proc/{pid}/maps")
    except OSError:
        return None


def _ss(netns, pids):
    """ss -tinp blocks (a connection line and its details) of `pids`."""
    cmd = ["ss", "-tinpH"]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    blocks, cur = [], None
    for line in r.stdout.splitlines():
        if line and not line[0].isspace():
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            cur.append(line)
    keep = []
    for b in blocks:
        if any(f"pid={p}," in b[0] for p in pids):
            keep.append("\n".join(x.rstrip() for x in b))
    return keep


def _moved(conn):
    """The most bytes one probed connection has sent or received."""
    most = 0
    for word in conn.split():
        for key in ("bytes_sent:", "bytes_received:"):
            if word.startswith(key) and word[len(key):].isdigit():
                most = max(most, int(word[len(key):]))
    return most


def probe(procs, namespaces, deadline=10.0, enough=1 << 16, oob_port=None):
    """Samples live processes (Popen objects) until a sample shows one of
    their TCP connections carrying data (`enough` bytes: the benchmark's own
    connection, not a tool's out-of-band one) at both ends, or they end: ss blocks and
    whether each process maps the same-host stream. A process with a mapped
    stream counts whenever it was seen."""
    end = time.monotonic() + deadline
    best, mapped = ([], {}), {}
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        pids = [q for p in procs for q in _tree(p.pid)]
        conns = [c for ns in namespaces for c in _ss(ns, pids)]
        if oob_port:  # the tool's own out-of-band socket: shown, labelled
            conns = [c.replace("\n", f" [{OOB}]\n", 1) if f":{oob_port} " in c.split("\n")[0] + " "
                     else c for c in conns]
        for q in pids:
            m = _maps_stream(q)
            if m is not None:
                mapped[q] = mapped.get(q, False) or m
        if len(conns) >= len(best[0]):
            best = (conns, dict(mapped))
        if sum(_moved(c) >= enough for c in conns) >= 2:  # both ends of a busy connection
            return conns, dict(mapped)
        time.sleep(0.02)
    return best[0], dict(mapped)


def probe_text(label, sample, log=None):
    conns, maps = sample
    lines = [f"## {label}", ""]
    lines.append("same-host stream mapped (/proc/<pid>/maps has " + STREAM_MEMFD + "): " +
                 (", ".join(f"pid {p}: {'yes' if m else ('no' if m is False else 'gone')}"
                            for p, m in maps.items()) or "no process seen"))
    lines.append("TCP connections of these processes while the run was live (ss -tinp; the "
                 "word after the connection line is its congestion control):")
    lines += [f"  {l}" for c in conns for l in c.splitlines()] or ["  none seen"]
    if log is not None:
        hits = [l for l in log.splitlines() if "stream" in l.lower() or "congestion" in l.lower()]
        lines.append(f"FI_LOG_LEVEL=info log: {len(log.splitlines())} lines; lines naming the "
                     f"stream or congestion control: {len(hits)}")
        lines += [f"  {h}" for h in hits]
    return "\n".join(lines) + "\n"


def stream_mapped(sample):
    return any(m for m in sample[1].values())


def ccs(sample):
    """Congestion control names seen on the probed connections."""
    names = set()
    for c in sample[0]:
        if OOB in c:
            continue
        for word in c.split():
            if word in ("reno", "cubic", "bbr", "bbr2", "dctcp", "vegas", "westwood", "htcp"):
                names.add(word)
    return sorted(names)


def judge(seen, text, hosts):
    """The verdict of the probed runs ({library: sample}): which path weft's
    run took and the congestion control each library's connections used,
    inserted into `text` (the evidence) and printed. On two hosts a mapped
    same-host stream means the run measured the wrong path: RuntimeError."""
    w = seen["weft"]
    verdict = (f"weft: same-host stream {'MAPPED' if stream_mapped(w) else 'not mapped'}, "
               f"congestion control seen {', '.join(ccs(w)) or 'none (no sample)'}; "
               f"libfabric: {', '.join(ccs(seen['libfabric'])) or 'none (no sample)'}")
    text.insert(4, f"verdict: {verdict}\n")
    print(verdict, flush=True)
    if hosts and any(stream_mapped(s) for s in seen.values()):
        raise RuntimeError(f"two hosts, yet a process mapped the same-host stream: {verdict}")
