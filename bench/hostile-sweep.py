#!/usr/bin/env python3
"""Hostile-input sweep: mutates real inputs of every kind ferrofs parses
and runs every command that reads them under a time and memory bound,
then prints a table of outcomes (kind x command x outcome).

Not run in CI (it runs for as long as it is asked to). Each case is one
mutated input (bit flips, truncation, a length field pushed to an extreme,
a duplicated or reordered record) fed to one command. Outcomes:
  ok       exit 0
  error    a clean refusal: exit 1..3 with a message
  panic    the message says "panicked" (a bug)
  signal   killed by a signal other than the bounds' (a bug)
  timeout  over --secs (a bug: a hang)
  memory   over --mem (an allocation failure; a bug)
Every input that gave a bug is kept under WORK/findings/.

  bench/hostile-sweep.py [--cases N] [--secs S] [--mem MIB] [--work DIR] [--kinds a,b]

Kinds: image (reference EROFS images), composefs (mkcomposefs images, read
with and without their object store), cfsdump (composefs dump files),
tarindex (tar-index images with their archive appended; the archive
mutated), tar (archives for mkfs --tar), verity (dm-verity superblocks and
trees in hash files), creds (S3 credentials and config files), s3xml (a fake
S3 server answering push and reads with mutated XML and headers).
Needs: target/release/ferrofs (or FERROFS), python3, GNU tar, prlimit.
"""
import argparse
import collections
import glob
import http.server
import os
import random
import re
import shutil
import signal
import socketserver
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ferrofs_bin():
    b = os.environ.get("FERROFS")
    if b:
        return b
    for p in ("target/release/ferrofs", "target/ci/ferrofs", "target/debug/ferrofs"):
        p = os.path.join(ROOT, p)
        if os.access(p, os.X_OK):
            return p
    sys.exit("hostile-sweep: no ferrofs binary (cargo build --release, or set FERROFS)")


# ---------------------------------------------------------------- mutations

EXTREMES = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000,
            0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x7FFFFFFFFFFFFFFF]


def mutate_bytes(data, rng, protect=0):
    """One structural mutation of `data`; bytes before `protect` stay."""
    d = bytearray(data)
    n = len(d)
    if n <= protect + 1:
        return bytes(d) + bytes(rng.randrange(256) for _ in range(8))
    how = rng.choice(["flip", "flip", "truncate", "extreme", "extreme", "dup", "swap", "zero"])
    lo = protect
    if how == "flip":
        for _ in range(rng.choice([1, 1, 2, 4, 8, 32])):
            i = rng.randrange(lo, n)
            d[i] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        d = d[:rng.randrange(lo, n)]
    elif how == "extreme":
        width = rng.choice([1, 2, 4, 8])
        for _ in range(rng.choice([1, 1, 2, 3])):
            i = rng.randrange(lo, max(lo + 1, n - width)) & ~(width - 1)
            i = max(i, lo)
            v = rng.choice(EXTREMES) & ((1 << (8 * width)) - 1)
            d[i:i + width] = v.to_bytes(width, rng.choice(["little", "big"]))
    elif how == "dup":
        a = rng.randrange(lo, n)
        ln = rng.choice([4, 16, 32, 64, 512, 4096])
        chunk = d[a:a + ln]
        at = rng.randrange(lo, n)
        d[at:at] = chunk
    elif how == "swap":
        ln = rng.choice([16, 32, 64, 512, 4096])
        if n - lo > 2 * ln:
            a = rng.randrange(lo, n - ln)
            b = rng.randrange(lo, n - ln)
            ca, cb = bytes(d[a:a + ln]), bytes(d[b:b + ln])
            d[a:a + ln], d[b:b + ln] = cb, ca
    else:
        a = rng.randrange(lo, n)
        ln = rng.choice([1, 8, 64, 512, 4096])
        d[a:a + ln] = bytes(len(d[a:a + ln]))
    return bytes(d)


def mutate_text(data, rng):
    """A line-level or number-level mutation of a text input, or a byte one."""
    lines = data.split(b"\n")
    how = rng.choice(["dupline", "swapline", "dropline", "number", "number", "bytes"])
    if how == "dupline" and lines:
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    elif how == "swapline" and len(lines) > 1:
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
    elif how == "dropline" and lines:
        del lines[rng.randrange(len(lines))]
    elif how == "number":
        nums = list(re.finditer(rb"[0-9a-fA-F]+", data))
        if nums:
            m = rng.choice(nums)
            v = rng.choice([b"0", b"-1", b"99999999999999999999999", b"4294967296",
                            b"18446744073709551615", b"ffffffffffffffff", b"", b"1e9"])
            return data[:m.start()] + v + data[m.end():]
        return mutate_bytes(data, rng)
    else:
        return mutate_bytes(data, rng)
    return b"\n".join(lines)


# ---------------------------------------------------------------- inputs


def run(cmd, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(cmd, check=True, stderr=subprocess.PIPE, **kw)


def make_tree(d):
    """A small tree with every file type, a hard link, xattrs, long names."""
    os.makedirs(os.path.join(d, "a/b/c"), exist_ok=True)
    rng = random.Random(7)
    for i in range(12):
        with open(os.path.join(d, "a", f"f{i}.txt"), "wb") as f:
            f.write((b"line %d of some text\n" % i) * (i * 300 + 1))
    with open(os.path.join(d, "a/b/rand.bin"), "wb") as f:
        f.write(bytes(rng.randrange(256) for _ in range(70000)))
    with open(os.path.join(d, "a/b/c/empty"), "wb"):
        pass
    os.link(os.path.join(d, "a/f1.txt"), os.path.join(d, "a/b/hard"))
    os.symlink("../f2.txt", os.path.join(d, "a/b/link"))
    os.mkfifo(os.path.join(d, "a/fifo"))
    with open(os.path.join(d, "a/" + "n" * 200), "wb") as f:
        f.write(b"long name\n")
    try:
        os.setxattr(os.path.join(d, "a/f3.txt"), "user.note", b"value")
    except OSError:
        pass
    with open(os.path.join(d, "sparse"), "wb") as f:
        f.truncate(1 << 20)
        f.seek(300000)
        f.write(b"x" * 5000)


def prepare(work, ff, kinds):
    """Seed inputs per kind: {kind: [(name, bytes, extra)]}."""
    seeds = collections.defaultdict(list)
    tree = os.path.join(work, "tree")
    if not os.path.exists(tree):
        make_tree(tree)
    tarf = os.path.join(work, "tree.tar")
    with open(tarf, "wb") as out:
        run(["tar", "--format=pax", "--xattrs", "-S", "-C", tree, "-cf", "-", "."], stdout=out)
    tar_bytes = open(tarf, "rb").read()
    if "image" in kinds or "verity" in kinds:
        imgs = sorted(glob.glob(os.path.join(ROOT, "testdata/*.erofs")) +
                      glob.glob(os.path.join(ROOT, "testdata/v19/*.erofs")))
        for p in imgs:
            seeds["image"].append((os.path.basename(p), open(p, "rb").read(), None))
    if "composefs" in kinds or "cfsdump" in kinds:
        store = os.path.join(work, "store")
        img = os.path.join(work, "cfs.img")
        if not os.path.exists(img):
            run([ff, "mkcomposefs", "--digest-store", store, tree, img])
        seeds["composefs"].append(("cfs.img", open(img, "rb").read(), store))
        info = shutil.which("composefs-info") or os.path.join(
            os.environ.get("UPSTREAM_NEXT_BIN", "/root/.cache/upstream-tools-next/bin"), "composefs-info")
        if os.access(info, os.X_OK):
            dump = run([info, "dump", img]).stdout
            seeds["cfsdump"].append(("tree.dump", dump, None))
        else:
            print("hostile-sweep: no composefs-info: the cfsdump kind has no seed", file=sys.stderr)
    if "tarindex" in kinds:
        idx = os.path.join(work, "index.erofs")
        with open(tarf, "rb") as src:
            run([ff, "mkfs", "--quiet", "--tar=i", idx, "-"], stdin=src)
        ib = open(idx, "rb").read()
        seeds["tarindex"].append(("index+tar", ib + tar_bytes, len(ib)))
    if "tar" in kinds:
        seeds["tar"].append(("pax.tar", tar_bytes, None))
        with open(tarf + ".gnu", "wb") as out:
            run(["tar", "--format=gnu", "-S", "-C", tree, "-cf", "-", "."], stdout=out)
        seeds["tar"].append(("gnu.tar", open(tarf + ".gnu", "rb").read(), None))
    if "verity" in kinds:
        for name, data, _ in seeds["image"][:6]:
            img = os.path.join(work, "v-" + name)
            open(img, "wb").write(data)
            h = img + ".hash"
            out = run([ff, "verity", "--json", "--hash-file", h, img]).stdout.decode()
            root = re.search(r'"root_hash"\s*:\s*"([0-9a-f]+)"', out).group(1)
            seeds["verity"].append((name, open(h, "rb").read(), (img, root)))
    if "creds" in kinds:
        seeds["creds"].append(("credentials", b"[default]\naws_access_key_id = AKIDEXAMPLE\n"
                               b"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG\n\n[ro]\n"
                               b"aws_access_key_id=RO\naws_secret_access_key=SECRET\n"
                               b"aws_session_token = TOKEN\n", None))
    if "s3xml" in kinds:
        for name, body in S3_ANSWERS.items():
            seeds["s3xml"].append((name, body, None))
    if "image" not in kinds:
        seeds.pop("image", None)
    return seeds


S3_ANSWERS = {
    "initiate": b'<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult '
                b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Key>k.img</Key>'
                b'<UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>'
                b'</InitiateMultipartUploadResult>',
    "complete": b'<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult>'
                b'<Location>http://b.s3/k.img</Location><Bucket>b</Bucket><Key>k.img</Key>'
                b'<ETag>"3858f62230ac3c915f300c664312c11f-9"</ETag></CompleteMultipartUploadResult>',
    "error": b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
             b'<Message>Access Denied &amp; more</Message><Resource>/b/k.img</Resource>'
             b'<RequestId>4442587FB7D0A2F9</RequestId></Error>',
    "uploads": b'<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>b'
               b'</Bucket><Upload><Key>k.img</Key><UploadId>abc</UploadId><Initiated>'
               b'2026-12-07T08:00:00.000Z</Initiated></Upload><Upload><Key>other</Key><UploadId>d'
               b'</UploadId></Upload><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>',
}


# ---------------------------------------------------------------- fake S3

class FakeS3(http.server.BaseHTTPRequestHandler):
    """Answers every S3 request with the current case's (mutated) answers."""
    protocol_version = "HTTP/1.1"
    case = {}

    def log_message(self, *a):
        pass

    def body_in(self):
        n = int(self.headers.get("content-length") or 0)
        while n > 0:
            got = self.rfile.read(min(n, 1 << 20))
            if not got:
                break
            n -= len(got)

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_PUT(self):
        self.body_in()
        c = FakeS3.case
        self.answer(c.get("put_status", 200), b"", [("ETag", c.get("etag", '"e"'))])

    def do_POST(self):
        self.body_in()
        c = FakeS3.case
        q = self.path.split("?", 1)[-1]
        key = "initiate" if q.startswith("uploads") else "complete"
        self.answer(c.get("post_status", 200), c.get(key, b""))

    def do_GET(self):
        c = FakeS3.case
        if "uploads" in self.path.split("?", 1)[-1]:
            self.answer(200, c.get("uploads", b""))
        else:
            self.answer(c.get("get_status", 403), c.get("error", b""),
                        c.get("get_headers", []))

    def do_HEAD(self):
        self.do_GET()

    def do_DELETE(self):
        self.answer(204, b"")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that gives up mid-request (push aborting) is expected.
        pass


# ---------------------------------------------------------------- cases


def classify(proc_rc, err, timed_out, mem_limited):
    if timed_out:
        return "timeout"
    if b"panicked" in err:
        return "panic"
    if proc_rc == 0:
        return "ok"
    if proc_rc < 0:
        sig = -proc_rc
        if sig == signal.SIGABRT and (b"memory allocation" in err or b"allocation" in err):
            return "memory"
        return "signal"
    if b"memory allocation" in err:
        return "memory"
    if proc_rc in (1, 2, 3) and err.strip():
        return "error"
    return f"exit{proc_rc}"


def bounded(cmd, secs, mem, env=None, stdin=None, cwd=None):
    full = ["prlimit", f"--as={mem << 20}", "--"] + cmd
    t0 = time.time()
    try:
        p = subprocess.run(full, stdin=stdin or subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=secs, env=env, cwd=cwd)
        # fsck reports damage on stdout (exit 1): a refusal with a message too.
        return p.returncode, p.stderr[-4000:] + p.stdout[-2000:], False, time.time() - t0
    except subprocess.TimeoutExpired as e:
        return None, (e.stderr or b"")[-4000:], True, time.time() - t0


def commands(kind, ff, path, extra, scratch, s3port):
    """(command name, argv, env, stdin path) for one mutated input."""
    env = dict(os.environ, RUST_BACKTRACE="0", NO_COLOR="1")
    out = os.path.join(scratch, "out")
    if kind == "image":
        return [("fsck", [ff, "fsck", "-j2", path], env, None),
                ("extract", [ff, "extract", path, out], env, None),
                ("ls", [ff, "ls", "-lR", path, "/"], env, None),
                ("dump", [ff, "dump", "--json", path], env, None),
                ("dump-inode", [ff, "dump", "--json", "--path", "/", path], env, None),
                ("diff", [ff, "diff", path, path], env, None)]
    if kind == "composefs":
        return [("fsck", [ff, "fsck", path], env, None),
                ("ls", [ff, "ls", "-lR", path, "/"], env, None),
                ("extract", [ff, "extract", path, out], env, None),
                ("mount", ["MOUNT", path, extra, os.path.join(scratch, "mnt")], env, None)]
    if kind == "cfsdump":
        return [("mkcomposefs", [ff, "mkcomposefs", "--from-file", path, out + ".img"], env, None)]
    if kind == "tarindex":
        return [("fsck", [ff, "fsck", path], env, None),
                ("extract", [ff, "extract", path, out], env, None)]
    if kind == "tar":
        return [("mkfs", [ff, "mkfs", "--quiet", "--tar=f", out + ".img", "-"], env, path),
                ("mkfs-zlz4", [ff, "mkfs", "--quiet", "-zlz4hc", "--tar=f", out + ".img", "-"], env, path)]
    if kind == "verity":
        img, root = extra
        return [("fsck", [ff, "fsck", "--verity", root, "--verity-hash-file", path, img], env, None),
                ("extract", [ff, "extract", "--verity", root, "--verity-hash-file", path, img, out],
                 env, None)]
    if kind == "creds":
        e = dict(env, AWS_SHARED_CREDENTIALS_FILE=path, AWS_CONFIG_FILE=path,
                 AWS_PROFILE=random.choice(["default", "ro", "x"]))
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            e.pop(k, None)
        ep = f"http://127.0.0.1:{s3port}"
        return [("fsck", [ff, "fsck", "--s3-endpoint", ep, "--http-deadline", "5", "s3://b/k.img"], e, None)]
    if kind == "s3xml":
        e = dict(env, AWS_ACCESS_KEY_ID="AK", AWS_SECRET_ACCESS_KEY="SK")
        ep = f"http://127.0.0.1:{s3port}"
        big = os.path.join(scratch, "..", "push.img")
        return [("push", [ff, "push", "--s3-endpoint", ep, "--part-size", "5M",
                          big, "s3://b/k.img"], e, None),
                ("fsck", [ff, "fsck", "--s3-endpoint", ep, "--http-deadline", "5", "s3://b/k.img"], e, None)]
    raise ValueError(kind)


def run_mount(argv, secs, mem, env):
    """`ferrofs mount --basedir STORE IMG MNT`, a read of every file, unmount."""
    _, ff, img, store, mnt = argv[0], FF, argv[1], argv[2], argv[3]
    os.makedirs(mnt, exist_ok=True)
    rc, err, to, dt = bounded([ff, "mount", "--basedir", store, img, mnt], secs, mem, env)
    if rc != 0 or to:
        return rc, err, to, dt
    try:
        r = subprocess.run(f"tar -C {mnt} -cf - . | cat >/dev/null", shell=True,
                           stderr=subprocess.PIPE, timeout=secs)
    except subprocess.TimeoutExpired:
        subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
        return None, b"read of the mount hung", True, dt
    finally:
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    # A read error (EIO) on a damaged image is a clean refusal.
    return (0 if r.returncode == 0 else 1), err + r.stderr[-2000:], False, dt


FF = None


def main():
    global FF
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--mem", type=int, default=4096, help="address-space bound, MiB")
    ap.add_argument("--work", default="/tmp/ferrofs-sweep")
    ap.add_argument("--kinds", default="image,composefs,cfsdump,tarindex,tar,verity,creds,s3xml")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mount-every", type=int, default=10,
                    help="run the FUSE mount command for 1 composefs case in N")
    a = ap.parse_args()
    FF = ferrofs_bin()
    kinds = a.kinds.split(",")
    os.makedirs(a.work, exist_ok=True)
    seeds = prepare(a.work, FF, kinds)
    srv = Server(("127.0.0.1", 0), FakeS3)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    with open(os.path.join(a.work, "push.img"), "wb") as f:
        f.write(os.urandom(11 << 20))
    findings = os.path.join(a.work, "findings")
    os.makedirs(findings, exist_ok=True)
    rng = random.Random(a.seed)
    table = collections.Counter()
    bugs = []
    active = [k for k in kinds if seeds.get(k)]
    t0 = time.time()
    case = 0
    mounts = 0
    samples = {}
    while case < a.cases:
        kind = active[case % len(active)]
        name, data, extra = rng.choice(seeds[kind])
        scratch = os.path.join(a.work, "case")
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        inp = os.path.join(scratch, "input")
        if kind in ("cfsdump", "creds"):
            mutated = mutate_text(data, rng)
        elif kind == "tarindex":
            # The index stays (mostly); the archive after it is mutated.
            mutated = mutate_bytes(data, rng, protect=extra if rng.random() < 0.8 else 0)
        elif kind == "verity" and rng.random() < 0.5:
            # The superblock (its first 512 bytes) only, most of the time.
            mutated = mutate_bytes(data[:512], rng) + data[512:]
        elif kind == "s3xml":
            mutated = mutate_text(data, rng) if rng.random() < 0.5 else mutate_bytes(data, rng)
            c = dict(S3_ANSWERS)
            c[name] = mutated
            c["put_status"] = rng.choice([200, 200, 200, 400, 403, 404, 500, 503, 429])
            c["post_status"] = rng.choice([200, 200, 200, 403, 500])
            c["get_status"] = rng.choice([200, 206, 403, 404, 416, 500])
            c["etag"] = rng.choice(['"e"', "", '"' + "x" * 3000 + '"', "\u00ff"])
            c["get_headers"] = rng.choice([[], [("content-range", "bytes 0-99/18446744073709551615")],
                                           [("content-range", "bytes */-1")],
                                           [("retry-after", "99999999999")],
                                           [("etag", '"abc"'), ("content-range", "bytes 5-1/4")]])
            FakeS3.case = c
        else:
            mutated = mutate_bytes(data, rng)
        with open(inp, "wb") as f:
            f.write(mutated)
        for cmd_name, argv, env, stdin in commands(kind, FF, inp, extra, scratch, port):
            if cmd_name == "mount":
                mounts += 1
                if mounts % a.mount_every:
                    continue
            if argv[0] == "MOUNT":
                rc, err, to, dt = run_mount(argv, a.secs, a.mem, env)
            else:
                fin = open(stdin, "rb") if stdin else None
                rc, err, to, dt = bounded(argv, a.secs, a.mem, env, stdin=fin)
                if fin:
                    fin.close()
            outcome = classify(rc, err, to, False)
            table[(kind, cmd_name, outcome)] += 1
            if outcome == "error":
                samples.setdefault((kind, cmd_name), set()).add(
                    err.decode("utf-8", "replace").strip().splitlines()[-1][:160])
            if outcome not in ("ok", "error"):
                keep = os.path.join(findings, f"{kind}-{cmd_name}-{case}")
                shutil.copy(inp, keep)
                with open(keep + ".stderr", "wb") as f:
                    f.write(err)
                bugs.append((kind, cmd_name, outcome, keep))
                print(f"hostile-sweep: {outcome}: {kind} {cmd_name}: {keep}", file=sys.stderr)
            shutil.rmtree(os.path.join(scratch, "out"), ignore_errors=True)
            for p in glob.glob(os.path.join(scratch, "out*")):
                os.remove(p)
        case += 1
        if case % 500 == 0:
            print(f"hostile-sweep: {case} cases, {time.time() - t0:.0f} s, {len(bugs)} findings",
                  file=sys.stderr)
    srv.shutdown()
    outcomes = ["ok", "error", "panic", "signal", "timeout", "memory"]
    extra_cols = sorted({o for (_, _, o) in table} - set(outcomes))
    cols = outcomes + extra_cols
    print(f"\n{a.cases} cases ({sum(table.values())} runs) in {time.time() - t0:.0f} s; "
          f"bounds {a.secs:g} s, {a.mem} MiB\n")
    print("| kind | command | " + " | ".join(cols) + " |")
    print("|---|---|" + "---:|" * len(cols))
    for k, c in sorted({(k, c) for (k, c, _) in table}):
        print(f"| {k} | {c} | " + " | ".join(str(table[(k, c, o)]) for o in cols) + " |")
    if os.environ.get("SWEEP_SAMPLES"):
        for k, v in sorted(samples.items()):
            print(f"\n{k}:")
            for m in sorted(v)[:8]:
                print("   " + m)
    print(f"\nfindings: {len(bugs)}")
    for b in bugs[:50]:
        print("  " + " ".join(b))
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
