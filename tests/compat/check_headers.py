#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# weft — ABI check: compares our include/rdma headers with the system's libfabric headers
"""Prove that weft's public headers are ABI-compatible with an installed libfabric.

Both header sets are compiled by gcc in separate temporary directories; nothing
from the system headers is written anywhere but those directories.  The system
side defines *what* must exist (constants, enumerators, structs, functions) and
our side must match it:
  1. constants: every FI_*/fi_* integer macro and every enumerator, same value
     and same integer type width/signedness;
  2. layouts: every struct/union, sizeof/alignof and each member's offset/size
     (read from DWARF through gdb's Python API, so nested anonymous unions and
     bit-fields come out exactly as the compiler laid them out);
  3. functions: every fi_* function exists, same parameter count, and a type
     compatible (gcc's __builtin_types_compatible_p) with the system prototype;
  4. each of our headers compiles alone as strict C99 and as C++20.
Exit status is 0 only when there is no mismatch.
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile

# Headers both sides must provide; fi_peer.h did not exist in libfabric 1.17.
HEADERS = ["fabric.h", "fi_errno.h", "fi_domain.h", "fi_eq.h", "fi_cm.h",
           "fi_endpoint.h", "fi_rma.h", "fi_tagged.h", "fi_atomic.h",
           "fi_trigger.h", "fi_collective.h", "fi_ext.h",
           "providers/fi_prov.h", "providers/fi_log.h"]
OURS_ONLY = ["providers/fi_peer.h"]

# Structs that grew at the end between 1.17 and 2.x, with their x86-64 sizes
# (1.17, 2.x).  Every 1.17 member must keep its offset and size; our extra
# members must all lie past the end of the 1.17 struct; where the system size
# is the known 1.17 one, ours must have exactly the 2.x size (else only >=).
# Any other struct must match exactly; add one here only with a reason.
GROWN_AT_END = {
    "struct fi_domain_attr": (192, 224),   # 2.x appended attributes
    "struct fi_cq_err_entry": (80, 88),    # src_addr appended (API 1.20)
    "struct fi_mr_attr": (80, 112),        # 2.x appended fields
    "struct fi_ops_av": (64, 88),          # three slots appended
    # Consequence, not a separate change: its last member is a struct
    # fi_mr_attr by value, so it grows with it (8 + 80 -> 8 + 112).
    "struct fi_mr_modify": (88, 120),
}
# Members that only we have, placed inside the 1.17 struct (e.g. a new name in
# a union, ABI-neutral).  Key "struct x.member"; each needs a reason.  Empty
# until someone confirms the member against the 2.x documentation.
ALLOWED_EXTRA_MEMBERS = {
    # 2.x names the data progress model "progress"; ours shares the slot with
    # the 1.x name data_progress (an anonymous union), so both compile.
    "struct fi_domain_attr.progress": "2.x alias of data_progress",
    # 1.20 added dma-buf registration: a union with mr_iov at offset 0.
    "struct fi_mr_attr.dmabuf": "1.20+ alternative to mr_iov",
}
# Provider-facing structures whose layout 2.x redefined (the peer-provider
# API: fi_peer_rx_entry gained msg_size and cq_data, fi_ops_srx_owner gained
# foreach_unspec_addr). No application binary uses them, only providers built
# with the same headers; weft's providers follow the 2.x layout.
REDEFINED_IN_2X = {"struct fi_peer_rx_entry", "struct fi_ops_srx_owner"}
# Constants whose value 2.x changed, with the reason.
VALUE_CHANGED_IN_2X = {
    "FI_ERRNO_MAX": "2.x appended FI_ENOMR (270), so the bound moved to 271",
}
# Macros whose values differ legitimately (our own version, include guards).
INFO_ONLY = re.compile(r"^(FI_(MAJOR|MINOR|REVISION)_VERSION|_*\w*_H_*)$")
# Names (constants, macros, functions, "struct x") the system defines that we
# deliberately do not provide (e.g. removed in 2.x); each entry needs a comment
# saying why.  Empty on purpose until such a decision is made.
ALLOWED_MISSING = set()

GCC = os.environ.get("CC_FOR_CHECK", "gcc")
GXX = os.environ.get("CXX_FOR_CHECK", "g++")
LINEMARK = re.compile(r'^# (\d+) "(.*)"((?: \d+)*)$')
DEFINE = re.compile(r"^#define (\w+)(\([^)]*\))?(?: (.*))?$")


class Report:
    """Collects pass/fail counts; every failure is one printed line."""
    def __init__(self):
        self.passed, self.fails, self.infos, self.skipped = 0, [], [], []
        self.kinds = {}                   # kind -> number of checks made

    def check(self, ok, kind, name, system="", ours=""):
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if ok:
            self.passed += 1
        else:
            self.fails.append(f"MISMATCH {kind} {name}: system={system} ours={ours}")
        return ok


class Side:
    """One header set: how to compile against it and what it defines."""
    def __init__(self, label, incdir, workdir, extra_inc):
        self.label, self.workdir = label, workdir
        self.root = os.path.realpath(os.path.join(incdir, "rdma"))
        self.incs = ["-I" + incdir] + extra_inc
        self.headers = []                 # headers included in the all-TU
        self.macros, self.code, self.files = {}, "", set()
        self.n = 0

    def write(self, name, text):
        self.n += 1
        path = os.path.join(self.workdir, f"{self.n:03d}_{name}")
        with open(path, "w") as f:
            f.write(text)
        return path

    def includes(self, headers=None):
        return "".join(f"#include <rdma/{h}>\n" for h in (headers or self.headers))

    def cc(self, path, *flags, compiler=GCC):
        cmd = [compiler, *flags, *self.incs, path]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=self.workdir)


def run_or_die(proc, what):
    if proc.returncode != 0:
        sys.exit(f"header-check: internal error while {what}:\n{proc.stderr[:4000]}")
    return proc.stdout


def first_error(stderr):
    lines = [l for l in stderr.splitlines() if "error" in l] or stderr.splitlines()
    return (lines[0] if lines else "(no diagnostics)").strip()


# ---------------------------------------------------------------- preprocessing
def strip_literals(text):
    # Braces or names inside string/char literals must not confuse the parsers.
    return re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', '""', text)


def preprocess(side):
    """Run cpp with -dD and keep only what the side's own rdma headers say.

    Linemarkers tell which file each line came from, so libc declarations and
    macros never leak into the lists of things to compare."""
    src = side.write("all.c", side.includes())
    out = run_or_die(side.cc(src, "-std=gnu11", "-E", "-dD"), f"preprocessing {side.label}")
    cur, code = "", []
    for line in out.splitlines():
        m = LINEMARK.match(line)
        if m:
            cur = m.group(2)
            side.files.add(cur)
            continue
        if not os.path.realpath(cur).startswith(side.root + os.sep):
            continue
        m = DEFINE.match(line)
        if m:
            side.macros[m.group(1)] = (m.group(2), (m.group(3) or "").strip())
        elif line.startswith("#undef "):
            side.macros.pop(line.split()[1], None)
        elif not line.startswith("#"):
            code.append(line)
    side.code = strip_literals("\n".join(code))


def brace_body(text, start):
    """Return the text between the '{' at text[start] and its matching '}'."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    return text[start + 1:]


def enumerators(code):
    names = []
    for m in re.finditer(r"\benum\b\s*(\w+\s*)?\{", code):
        body, depth, item = brace_body(code, m.end() - 1), 0, ""
        for ch in body + ",":         # split on commas outside parentheses
            if ch == "," and depth == 0:
                n = re.match(r"\s*([A-Za-z_]\w*)", item)
                if n:
                    names.append(n.group(1))
                item = ""
                continue
            depth += {"(": 1, ")": -1}.get(ch, 0)
            item += ch
    return names


def aggregates(code):
    """Tagged struct/union definitions, e.g. 'struct fi_info'."""
    seen = []
    for m in re.finditer(r"\b(struct|union)\s+(\w+)\s*\{", code):
        name = f"{m.group(1)} {m.group(2)}"
        if name not in seen:
            seen.append(name)
    return seen


def function_candidates(code):
    # Any fi_* identifier directly followed by '(' — declarations, inline
    # definitions and calls inside them; non-functions are weeded out by probe.
    return sorted(set(re.findall(r"\b(fi_\w+)\s*\(", code)))


# ---------------------------------------------------------------- compile probes
def probe(side, tag, items, prelude="", flags=("-std=gnu11",)):
    """Return the keys of `items` [(key, one-line C)] that compile on `side`.

    All probes go into one file, one per line; gcc's diagnostics (including
    'in expansion of macro' notes) name the probe lines that failed.  If a
    failure cannot be attributed, the batch is bisected."""
    items, bad = list(items), set()
    while items:
        head = side.includes() + prelude
        base = head.count("\n") + 1
        src = side.write(tag + ".c", head + "".join(code + "\n" for _, code in items))
        proc = side.cc(src, *flags, "-fsyntax-only", "-w", "-fmax-errors=0")
        if proc.returncode == 0:
            return {k for k, _ in items} - bad
        fname = re.escape(os.path.basename(src))
        lines = {int(n) - base for n in re.findall(fname + r":(\d+):", proc.stderr)}
        hit = {items[i][0] for i in lines if 0 <= i < len(items)}
        if hit:
            bad |= hit
            items = [it for it in items if it[0] not in hit]
        elif len(items) == 1:
            return set()
        else:
            half = len(items) // 2
            return (probe(side, tag, items[:half], prelude, flags)
                    | probe(side, tag, items[half:], prelude, flags))
    return set()


def constant_values(side, names):
    """name -> (sizeof, signed, value) for names that are integer constants."""
    # '| 0' rejects pointers, floats and strings; _Static_assert needs an ICE.
    ok = probe(side, "ice", [(n, f"_Static_assert((({n}) | 0) || 1, \"{n}\");")
                             for n in names])
    body = "".join(f'  P("{n}", {n});\n' for n in sorted(ok))
    src = side.write("values.c", "#include <stdio.h>\n" + side.includes() + r"""
#define P(s, x) do { if ((__typeof__((x)))-1 < 0) \
    printf("%s %d 1 %lld\n", s, (int)sizeof(x), (long long)(x)); \
  else printf("%s %d 0 %llu\n", s, (int)sizeof(x), (unsigned long long)(x)); } while (0)
int main(void) {
""" + body + "  return 0;\n}\n")
    exe = os.path.join(side.workdir, "values")
    run_or_die(side.cc(src, "-std=gnu11", "-w", "-o", exe), f"building {side.label} values")
    out = run_or_die(subprocess.run([exe], capture_output=True, text=True), "running values")
    vals = {}
    for line in out.splitlines():
        n, size, sgn, v = line.split()
        vals[n] = (int(size), sgn == "1", int(v))
    return vals


def string_values(side, names):
    """name -> text for names that expand to a string literal."""
    # Only a string literal may initialise a char array, so this probe is exact.
    ok = sorted(probe(side, "str", [(n, f"static const char s_{n}[] = {n};") for n in names]))
    if not ok:
        return {}
    body = "".join(f'  printf("%s\\036", {n});\n' for n in ok)
    src = side.write("strings.c", "#include <stdio.h>\n" + side.includes() +
                     "int main(void) {\n" + body + "  return 0;\n}\n")
    exe = os.path.join(side.workdir, "strings")
    run_or_die(side.cc(src, "-std=gnu11", "-w", "-o", exe), f"building {side.label} strings")
    out = run_or_die(subprocess.run([exe], capture_output=True, text=True), "running strings")
    return dict(zip(ok, out.split("\036")))


GDB_SCRIPT = r'''
import gdb, json
req = json.load(open(REQ))
out = {"structs": {}, "funcs": {}}
AGGR = (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION)
def walk(t, base, prefix, acc):
    for f in t.fields():
        st, off = f.type.strip_typedefs(), base + f.bitpos
        anon = st.code in AGGR and st.tag is None
        if not f.name:
            if anon:
                walk(st, off, prefix, acc)   # anonymous member: fields hoisted
            continue
        acc.append([prefix + f.name, off, f.bitsize, f.type.sizeof, str(f.type)])
        if anon:
            walk(st, off, prefix + f.name + ".", acc)
for name in req["structs"]:
    try:
        t = gdb.parse_and_eval("(%s *)0" % name).type.target()
        acc = []
        walk(t, 0, "", acc)
        out["structs"][name] = {"size": t.sizeof, "align": t.alignof, "members": acc}
    except gdb.error:
        pass
for fn in req["funcs"]:
    sym = gdb.lookup_global_symbol("p_" + fn)
    if sym is not None:
        ft = sym.type.target()
        out["funcs"][fn] = {"type": str(sym.type), "nparams": len(ft.fields()),
                            "params": [str(f.type) for f in ft.fields()]}
json.dump(out, open(OUT, "w"))
'''


def dwarf_dump(side, structs, funcs):
    """Compile with full debug info and read layouts/function types via gdb."""
    body = "".join(f"__typeof__(&{f}) p_{f};\n" for f in funcs)
    src = side.write("dwarf.c", side.includes() + body)
    obj = src[:-2] + ".o"
    run_or_die(side.cc(src, "-std=gnu11", "-w", "-g", "-fno-eliminate-unused-debug-types",
                       "-c", "-o", obj), f"building {side.label} debug object")
    req, res = obj + ".req.json", obj + ".out.json"
    with open(req, "w") as f:
        json.dump({"structs": structs, "funcs": funcs}, f)
    script = side.write("dump.py", f"REQ = {req!r}\nOUT = {res!r}\n" + GDB_SCRIPT)
    run_or_die(subprocess.run(["gdb", "-nx", "-batch", "-x", script, obj],
                              capture_output=True, text=True), f"reading {side.label} DWARF")
    with open(res) as f:
        return json.load(f)


# ---------------------------------------------------------------- the checks
def check_sentinel(rep, ours):
    """Every rdma/ header our compile saw must be ours, none the system's."""
    for h in HEADERS + OURS_ONLY:
        rep.check(os.path.isfile(os.path.join(ours.root, h)), "header-missing",
                  f"rdma/{h}", "required", "absent")
    foreign = sorted(f for f in ours.files if "/rdma/" in f
                     and not os.path.realpath(f).startswith(ours.root + os.sep))
    rep.check(not foreign, "sentinel", "include-resolution", "only --ours/rdma",
              "also " + ", ".join(foreign))
    seen = {os.path.relpath(os.path.realpath(f), ours.root) for f in ours.files
            if os.path.realpath(f).startswith(ours.root + os.sep)}
    for h in ours.headers:
        rep.check(h in seen, "sentinel", f"rdma/{h}", "resolved to ours", "not seen")


def check_constants(rep, sys_s, ours, ours_funcs):
    wanted = re.compile(r"^(FI_|fi_)")
    objlike = [n for n, (par, _) in sys_s.macros.items() if par is None and wanted.match(n)]
    names = sorted(set(objlike) | set(enumerators(sys_s.code)))
    ours_names = set(ours.macros) | set(enumerators(ours.code)) | ours_funcs
    sysv, ourv = constant_values(sys_s, names), constant_values(ours, names)
    # String macros (e.g. names passed to fi_open_ops) are compared as text.
    rest = [n for n in names if n not in sysv]
    syss, ours_s = string_values(sys_s, rest), string_values(ours, rest)
    fmt = lambda v: f"{v[2]} ({v[0]}-byte {'signed' if v[1] else 'unsigned'})"
    show = lambda n, d: fmt(d[n]) if n in d else (
        "present" if n in ours_names or n in ourv else "absent")
    for n in names:
        present = n in ours_names or n in ourv
        if INFO_ONLY.match(n):
            if sysv.get(n) != ourv.get(n) or not present:
                sys_txt = fmt(sysv[n]) if n in sysv else "defined"
                rep.infos.append(f"INFO constant {n}: system={sys_txt} ours={show(n, ourv)}")
            continue
        if n in syss:
            rep.check(ours_s.get(n) == syss[n], "string", n, repr(syss[n]),
                      repr(ours_s[n]) if n in ours_s else
                      ("not a string literal" if present else "missing"))
            continue
        if n not in sysv:
            rep.skipped.append(f"NOT-COMPARED constant {n} = {sys_s.macros[n][1]!r}"
                               f" (not an integer or string constant; "
                               f"{'present' if present else 'absent'} in ours)")
            continue
        if n in ALLOWED_MISSING and not present:
            rep.infos.append(f"INFO constant {n}: allowed to be missing")
            continue
        if n in VALUE_CHANGED_IN_2X and n in ourv:
            rep.infos.append(f"INFO constant {n}: {VALUE_CHANGED_IN_2X[n]}")
            continue
        ours_txt = fmt(ourv[n]) if n in ourv else (
            "not an integer constant" if present else "missing")
        rep.check(ourv.get(n) == sysv[n], "constant", n, fmt(sysv[n]), ours_txt)
    # Function-like macros (FI_VERSION, FI_WARN, ...) are API too: presence only.
    for n, (par, _) in sorted(sys_s.macros.items()):
        if par is not None and wanted.match(n) and n not in ALLOWED_MISSING:
            rep.check(n in ours_names, "macro", n + par, "defined", "missing")


def fmt_member(m):
    name, off, bits, size, typ = m
    where = f"bit {off} width {bits}" if bits else f"offset {off // 8} size {size}"
    return f"{where} ({typ})"


def check_layouts(rep, structs, sysd, ourd):
    for s in structs:
        a, b = sysd["structs"].get(s), ourd["structs"].get(s)
        if a is None:
            rep.skipped.append(f"NOT-COMPARED layout {s}: no debug info on system side")
            continue
        if s in REDEFINED_IN_2X and b is not None:
            rep.infos.append(f"INFO layout {s}: follows the 2.x peer API")
            continue
        if b is None and s in ALLOWED_MISSING:
            rep.infos.append(f"INFO layout {s}: allowed to be missing")
            continue
        if not rep.check(b is not None, "layout", s, f"size {a['size']}", "missing"):
            continue
        grown = GROWN_AT_END.get(s)
        if not grown:
            size_ok = b["size"] == a["size"]
        elif a["size"] == grown[0]:
            size_ok = b["size"] == grown[1]
        else:
            size_ok = b["size"] >= a["size"]
        want = f"{a['size']} (2.x: {grown[1]})" if grown else a["size"]
        rep.check(size_ok, "layout", s + " sizeof", want, b["size"])
        rep.check(b["align"] == a["align"], "layout", s + " alignof", a["align"], b["align"])
        mine = {m[0]: m for m in b["members"]}
        for m in a["members"]:
            o = mine.pop(m[0], None)
            same = o is not None and o[1:4] == m[1:4]
            # A grown struct embedded by value may be bigger in ours.
            if (o is not None and not same and grown and m[4] in GROWN_AT_END
                    and o[1:3] == m[1:3] and o[3] == GROWN_AT_END[m[4]][1]):
                same = True
            rep.check(same, "layout", f"{s}.{m[0]}", fmt_member(m),
                      fmt_member(o) if o else "missing")
        for name, o in mine.items():      # members only we have
            if grown and o[1] >= 8 * a["size"]:
                continue                  # appended past the 1.17 end: allowed
            if f"{s}.{name}" in ALLOWED_EXTRA_MEMBERS:
                rep.infos.append(f"INFO layout {s}.{name}: allowed extra member")
                continue
            where = ("past the end" if o[1] >= 8 * a["size"]
                     else "inside the 1.17 struct")
            rep.check(False, "layout", f"{s}.{name}", "absent",
                      f"extra member {where}: {fmt_member(o)}")


def check_functions(rep, funcs, sysd, ourd, ours):
    compat = []
    for f in funcs:
        a, b = sysd["funcs"].get(f), ourd["funcs"].get(f)
        if a is None:
            rep.skipped.append(f"NOT-COMPARED function {f}: no debug info on system side")
            continue
        if b is None and f in ALLOWED_MISSING:
            rep.infos.append(f"INFO function {f}: allowed to be missing")
            continue
        if not rep.check(b is not None, "function", f, a["type"], "missing"):
            continue
        rep.check(a["nparams"] == b["nparams"] and ("..." in a["type"]) == ("..." in b["type"]),
                  "function", f + " params", f"{a['nparams']}: {a['type']}",
                  f"{b['nparams']}: {b['type']}")
        compat.append((f, f"_Static_assert(__builtin_types_compatible_p("
                          f"__typeof__(&{f}), {a['type']}), \"{f}\");"))
    # The system prototype, printed by gdb, is re-read in our headers' context:
    # typedef names resolve to ours, so only a real type difference fails.
    ok = probe(ours, "types", compat)
    for f, _ in compat:
        rep.check(f in ok, "function", f + " type", sysd["funcs"][f]["type"],
                  ourd["funcs"][f]["type"])


def check_standalone(rep, ours):
    """Each header, alone, must be clean strict C99 and C++20."""
    present = [h for h in HEADERS + OURS_ONLY if os.path.isfile(os.path.join(ours.root, h))]
    extra = sorted(os.path.relpath(os.path.join(d, f), ours.root)
                   for d, _, fs in os.walk(ours.root) for f in fs if f.endswith(".h"))
    for h in present + [h for h in extra if h not in present]:
        text = f"#include <rdma/{h}>\ntypedef int weft_header_check_unit;\n"
        for kind, ext, flags, comp in [
                ("compile-c99", "c", ["-std=c99", "-pedantic"], GCC),
                ("compile-c++20", "cpp", ["-std=c++20"], GXX)]:
            src = ours.write(f"alone.{ext}", text)
            p = ours.cc(src, *flags, "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                        compiler=comp)
            rep.check(p.returncode == 0, kind, f"rdma/{h}", "compiles", first_error(p.stderr))


def usable_headers(rep, ours):
    """Headers of ours that can go into the combined TU (skip broken ones so
    the rest can still be compared; the breakage is itself a failure)."""
    ours.headers = [h for h in HEADERS + OURS_ONLY if os.path.isfile(os.path.join(ours.root, h))]
    src = ours.write("combined.c", ours.includes())
    p = ours.cc(src, "-std=gnu11", "-fsyntax-only")
    if rep.check(p.returncode == 0, "compile-gnu11", "all headers together", "compiles",
                 first_error(p.stderr)):
        return
    good = []
    for h in ours.headers:
        src = ours.write("combined.c", ours.includes(good + [h]))
        if ours.cc(src, "-std=gnu11", "-fsyntax-only").returncode == 0:
            good.append(h)
        else:
            rep.fails.append(f"MISMATCH compile-gnu11 rdma/{h}: excluded from the comparison")
    ours.headers = good


def make_poison(workdir, system_root):
    """An include dir searched right after ours whose rdma/*.h all #error, so a
    header missing from ours can never silently resolve to the system copy."""
    poison = os.path.join(workdir, "poison")
    names = set(HEADERS + OURS_ONLY)
    for d, _, fs in os.walk(system_root):
        names |= {os.path.relpath(os.path.join(d, f), system_root) for f in fs}
    for n in names:
        path = os.path.join(poison, "rdma", n)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f'#error "header-check: rdma/{n} is not provided by --ours"\n')
    return poison


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", required=True, help="our include dir (holds rdma/)")
    ap.add_argument("--system", default="/usr/include", help="system include dir")
    ap.add_argument("--output", help="also write the report to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    args = ap.parse_args()
    ours_inc, sys_inc = os.path.abspath(args.ours), os.path.abspath(args.system)
    if not os.path.isdir(os.path.join(sys_inc, "rdma")):
        sys.exit(f"header-check: no {sys_inc}/rdma (install libfabric-dev)")
    top = tempfile.mkdtemp(prefix="weft-header-check-")
    dirs = {k: os.path.join(top, k) for k in ("system", "ours")}
    for d in dirs.values():
        os.makedirs(d)
    rep = Report()
    try:
        # System side: its own include path only (no -I of ours anywhere).
        sys_s = Side("system", sys_inc, dirs["system"], [])
        sys_s.headers = list(HEADERS)
        ours = Side("ours", ours_inc, dirs["ours"], ["-I" + make_poison(top, sys_s.root)])
        usable_headers(rep, ours)
        preprocess(sys_s)
        preprocess(ours)
        check_sentinel(rep, ours)
        cands = function_candidates(sys_s.code)
        probe_fn = lambda s: probe(s, "fn", [(f, f"__typeof__(&{f}) p_{f};") for f in cands])
        sys_funcs, ours_funcs = sorted(probe_fn(sys_s)), probe_fn(ours)
        check_constants(rep, sys_s, ours, ours_funcs)
        structs = aggregates(sys_s.code)
        sysd = dwarf_dump(sys_s, structs, sys_funcs)
        ourd = dwarf_dump(ours, structs, sorted(ours_funcs & set(sys_funcs)))
        check_layouts(rep, structs, sysd, ourd)
        check_functions(rep, sys_funcs, sysd, ourd, ours)
        check_standalone(rep, ours)
    finally:
        if args.keep:
            print(f"header-check: temp files kept in {top}", file=sys.stderr)
        else:
            shutil.rmtree(top, ignore_errors=True)
    lines = rep.skipped + rep.infos + rep.fails
    lines.append("header-check: checks made: " +
                 ", ".join(f"{k} {v}" for k, v in sorted(rep.kinds.items())))
    lines.append(f"header-check: {rep.passed} passed, {len(rep.fails)} failed")
    # Temp paths (the poison dir) are random; keep the report stable to diff.
    text = "\n".join(lines).replace(top, "<tmp>") + "\n"
    sys.stdout.write(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    return 1 if rep.fails else 0


if __name__ == "__main__":
    sys.exit(main())
