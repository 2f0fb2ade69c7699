#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# weft — which names of libfabric's man pages api2_names.txt does not account for
"""List the names (FI_*, fi_*, fid_*) libfabric's man pages use that
api2_names.txt neither checks nor explains in its comments.

Run it on a newer set of pages (the roff sources, e.g. from a libfabric-dev
package: usr/share/man) to see what the list must take in:

    api2_names_audit.py path/to/usr/share/man [tests/compat/api2_names.txt]

Exit status 1 when a name is unaccounted for.  Not part of the build: the
pages are not in the repository.
"""
import gzip, os, re, sys

# The pages that document API (fi_setup(7) for the parts of the API it shows).
PAGES = ["fi_getinfo.3", "fi_fabric.3", "fi_domain.3", "fi_endpoint.3", "fi_cq.3",
         "fi_cntr.3", "fi_eq.3", "fi_av.3", "fi_av_set.3", "fi_mr.3", "fi_msg.3",
         "fi_tagged.3", "fi_rma.3", "fi_atomic.3", "fi_trigger.3", "fi_cm.3",
         "fi_collective.3", "fi_peer.3", "fi_profile.3", "fi_errno.3", "fi_control.3",
         "fi_nic.3", "fi_poll.3", "fi_version.3", "fi_provider.3", "fabric.7",
         "fi_setup.7", "fi_direct.7"]
NAME = re.compile(r"\b(FI_[A-Z0-9_]+|fi_[a-z0-9_]+|fid_[a-z0-9_]+)\b")


def page_text(mandir, page):
    for sub in ("man" + page[-1], ""):
        for suffix in ("", ".gz"):
            path = os.path.join(mandir, sub, page + suffix)
            if os.path.isfile(path):
                if suffix:
                    with gzip.open(path, "rt", errors="replace") as f:
                        return f.read()
                with open(path, errors="replace") as f:
                    return f.read()
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mandir = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    listed = open(sys.argv[2] if len(sys.argv) > 2 else
                  os.path.join(here, "api2_names.txt")).read()
    known = set(NAME.findall(listed))
    missing = {}
    for page in PAGES:
        text = page_text(mandir, page)
        if text is None:
            print(f"api2-audit: no page {page} under {mandir}", file=sys.stderr)
            continue
        # roff font escapes would glue names to letters (\f[B]FI_MSG\f[R]).
        text = re.sub(r"\\f(\[[A-Z]*\]|[BIRP])", " ", text).replace("\\-", "-")
        for name in NAME.findall(text):
            if name not in known:
                missing.setdefault(name, page)
    for name in sorted(missing):
        print(f"{name}\t(first in {missing[name]})")
    print(f"api2-audit: {len(missing)} names not in the list", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
