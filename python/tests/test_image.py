"""The ferrofs package against the kernel: images built by ferrofs (from
a directory and from entries) and by mkfs.erofs 1.9.4 are read through
the package and compared with the kernel's loop mount of the same image
(names, modes, owners, sizes, mtimes, link targets, xattrs, bytes);
extract and fsck; errors are Python's exceptions naming the path. Tests
that need root, loop mounts or mkfs.erofs skip with the reason."""

import errno
import os
import shutil
import subprocess
import tempfile

import pytest

import ferrofs


def make_tree(root):
    os.makedirs(os.path.join(root, "etc/sub"))
    with open(os.path.join(root, "etc/hello"), "w") as f:
        f.write("hello\n" * 1000)
    with open(os.path.join(root, "etc/sub/empty"), "w"):
        pass
    with open(os.path.join(root, "big"), "wb") as f:
        f.write(bytes(range(256)) * 5000)
    os.symlink("etc/hello", os.path.join(root, "link"))
    os.link(os.path.join(root, "etc/hello"), os.path.join(root, "hard"))
    os.setxattr(os.path.join(root, "etc/hello"), "user.note", b"value")
    os.utime(os.path.join(root, "big"), ns=(0, 1_600_000_000_123_456_789))


def can_mount():
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture(scope="module")
def work():
    d = tempfile.mkdtemp(prefix="ferrofs-py-")
    make_tree(os.path.join(d, "tree"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def kernel_mount(img, where):
    os.makedirs(where, exist_ok=True)
    subprocess.run(["mount", "-o", "loop,ro", img, where], check=True)


def compare_with_mount(image, mnt):
    for dirpath, dirnames, filenames in image.walk("/"):
        real = os.path.join(mnt, dirpath.lstrip("/"))
        assert sorted(os.listdir(real)) == sorted(dirnames + filenames), dirpath
        for name in dirnames + filenames:
            p = (dirpath.rstrip("/") + "/" + name)
            r = os.path.join(real, name)
            st, rst = image.lstat(p), os.lstat(r)
            for field in ("st_mode", "st_uid", "st_gid", "st_size", "st_nlink", "st_mtime_ns"):
                assert getattr(st, field) == getattr(rst, field), (p, field)
            names = image.listxattr(p, follow_symlinks=False)
            assert sorted(names) == sorted(os.listxattr(r, follow_symlinks=False)), p
            for x in names:
                got = image.getxattr(p, x, follow_symlinks=False)
                assert got == os.getxattr(r, x, follow_symlinks=False), (p, x)
            if os.path.islink(r):
                assert image.readlink(p) == os.readlink(r)
            elif os.path.isfile(r):
                with image.open(p) as f, open(r, "rb") as g:
                    assert f.read() == g.read(), p


def images(work):
    tree = os.path.join(work, "tree")
    out = []
    a = os.path.join(work, "built.img")
    ferrofs.build(a, tree, preset="dense")
    out.append(a)
    up = shutil.which("mkfs.erofs", path=os.environ.get("UPSTREAM_NEXT_BIN", ""))
    if up:
        b = os.path.join(work, "upstream.img")
        subprocess.run([up, "-zlz4hc", "-Eztailpacking", b, tree], check=True, capture_output=True)
        out.append(b)
    return out


@pytest.mark.skipif(not can_mount(), reason="needs root and loop mounts")
def test_images_read_as_the_kernel_reads_them(work):
    for img in images(work):
        mnt = img + ".mnt"
        kernel_mount(img, mnt)
        try:
            compare_with_mount(ferrofs.Image(img), mnt)
        finally:
            subprocess.run(["umount", mnt], check=True)


def test_file_objects_seek_and_readinto(work):
    img = os.path.join(work, "f.img")
    ferrofs.build(img, os.path.join(work, "tree"))
    image = ferrofs.Image(img)
    data = bytes(range(256)) * 5000
    with image.open("/big") as f:
        assert f.seek(1000) == 1000
        assert f.read(10) == data[1000:1010]
        assert f.tell() == 1010
        buf = bytearray(300)
        assert f.readinto(buf) == 300
        assert bytes(buf) == data[1010:1310]
        assert f.seek(-5, 2) == len(data) - 5
        assert f.read() == data[-5:]
        assert f.read() == b""
    assert f.closed


def test_build_from_entries_extract_and_fsck(work):
    img = os.path.join(work, "entries.img")
    s = ferrofs.build(img, [("a/b.txt", b"bee\n"), ("a", None), ("c", b"")], preset="fast")
    assert s["inodes"] == 4
    image = ferrofs.Image(img)
    assert sorted(image.listdir("/")) == ["a", "c"]
    assert image.open("/a/b.txt").read() == b"bee\n"
    report = image.fsck()
    assert report["files"] == 2
    dest = os.path.join(work, "x")
    image.extract(dest)
    with open(os.path.join(dest, "a/b.txt"), "rb") as f:
        assert f.read() == b"bee\n"
    # One directory: its contents at the top of dest.
    sub = os.path.join(work, "sub")
    assert image.extract(sub, path="/a")["files"] == 1
    assert os.listdir(sub) == ["b.txt"]
    with pytest.raises(OSError, match="not a directory"):
        image.extract(os.path.join(work, "f"), path="/a/b.txt")


def test_errors_are_pythons_and_name_the_path(work):
    img = os.path.join(work, "e.img")
    ferrofs.build(img, os.path.join(work, "tree"))
    image = ferrofs.Image(img)
    with pytest.raises(FileNotFoundError, match="/nope") as e:
        image.stat("/nope")
    assert e.value.filename == "/nope" and e.value.errno == errno.ENOENT
    with pytest.raises(NotADirectoryError, match="/big"):
        image.listdir("/big")
    with pytest.raises(IsADirectoryError, match="/etc"):
        image.open("/etc")
    bad = os.path.join(work, "bad.img")
    with open(bad, "wb") as f:
        f.write(b"\0" * 8192)
    with pytest.raises(ferrofs.CorruptImage, match="bad.img"):
        ferrofs.Image(bad)
    damaged = os.path.join(work, "damaged.img")
    data = bytearray(open(img, "rb").read())
    for i in range(4096, len(data), 97):
        data[i] ^= 0x55
    open(damaged, "wb").write(bytes(data))
    with pytest.raises((ferrofs.CorruptImage, OSError)):
        ferrofs.Image(damaged).fsck()


def serve_ranges(directory):
    """A static file server that answers Range requests (206), as nginx
    does, for the URL test."""
    import http.server
    import threading

    class H(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=directory, **k)

        def log_message(self, *a):
            pass

        def do_GET(self):
            path = self.translate_path(self.path)
            rng = self.headers.get("Range")
            if not rng or not os.path.isfile(path):
                return super().do_GET()
            data = open(path, "rb").read()
            start, end = rng.split("=")[1].split("-")
            start, end = int(start), min(int(end or len(data) - 1), len(data) - 1)
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", '"fixed"')
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_urls_and_build_options(work):
    img = os.path.join(work, "url.img")
    s = ferrofs.build(
        img,
        os.path.join(work, "tree"),
        compress="lz4hc,12",
        pcluster=65536,
        ztailpacking=True,
        uuid=bytes(range(16)),
    )
    assert s["bytes"] == os.path.getsize(img)
    local = ferrofs.Image(img)
    srv = serve_ranges(work)
    try:
        remote = ferrofs.Image(f"http://127.0.0.1:{srv.server_port}/url.img")
        assert remote.listdir("/") == local.listdir("/")
        assert remote.open("/big").read() == local.open("/big").read()
        assert remote.fsck()["files"] == local.fsck()["files"]
    finally:
        srv.shutdown()
    with pytest.raises(ValueError, match="unknown option"):
        ferrofs.build(img, os.path.join(work, "tree"), colour="blue")
    with pytest.raises(ValueError, match="presets"):
        ferrofs.build(img, os.path.join(work, "tree"), preset="fastest")
