#!/usr/bin/env python3
"""change-set.py ROOT CHANGED ADDED -- the "about 1 % changed" edit that
base-bench.sh and incremental-bench.sh make to a copy of a tree: CHANGED
regular files (every Nth in path order; half get bytes overwritten in the
middle, same size, same mtime; half get a line appended) and ADDED new
files (copies of other files with a line in front, in usr/local/new/)."""
import os
import sys

root, nchg, nadd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = []
for d, _, names in os.walk(root):
    for n in names:
        p = os.path.join(d, n)
        if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) > 0:
            files.append(p)
files.sort()
step = max(1, len(files) // (nchg + nadd))
picked = files[::step][: nchg + nadd]
for i, p in enumerate(picked[:nchg]):
    st = os.stat(p)
    with open(p, "r+b") as f:
        if i % 2 == 0:
            f.seek(st.st_size // 2)
            f.write(b"ferrofs-base-bench %d\n" % i)
            f.truncate(st.st_size)
        else:
            f.seek(0, 2)
            f.write(b"\n# changed by base-bench %d\n" % i)
    if i % 2 == 0:
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
new = os.path.join(root, "usr/local/new")
os.makedirs(new, exist_ok=True)
for i, p in enumerate(picked[nchg:]):
    with open(p, "rb") as f:
        body = f.read()
    with open(os.path.join(new, "added-%02d-%s" % (i, os.path.basename(p))), "wb") as f:
        f.write(b"# added by base-bench %d\n" % i + body)
print("changed %d, added %d of %d files" % (nchg, len(picked[nchg:]), len(files)), file=sys.stderr)
