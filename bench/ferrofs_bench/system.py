"""Linux plumbing: timed child processes, loop mounts, page-cache drops, /proc and /sys.

Everything here is a thin wrapper over the kernel interfaces the measurements read:
``wait4`` rusage of a child, ``/sys/block/loopN/stat``, ``/proc/meminfo``, ``/proc/stat``
and a memory cgroup (v2 ``memory.peak`` or v1 ``memory.max_usage_in_bytes``).
"""

import contextlib
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass

SECTOR = 512
GNU_TIME = "/usr/bin/time"
BLOCK_STAT_FIELDS = (
    "read_ios", "read_merges", "read_sectors", "read_ticks",
    "write_ios", "write_merges", "write_sectors", "write_ticks",
    "in_flight", "io_ticks", "time_in_queue",
    "discard_ios", "discard_merges", "discard_sectors", "discard_ticks",
    "flush_ios", "flush_ticks",
)


@dataclass
class Completed:
    """A finished child: exit code, wall seconds, CPU seconds (user+sys of the child and
    its waited-for descendants), peak RSS in KiB (None unless asked for), and its
    standard output/error."""

    returncode: int
    wall_s: float
    cpu_s: float
    maxrss_kib: int | None
    stdout: bytes
    stderr: bytes


def have_gnu_time():
    """Whether GNU time is installed (needed for a child's true peak RSS)."""
    return os.access(GNU_TIME, os.X_OK)


def run_measured(cmd, cgroup_procs=None, peak_rss=False):
    """Run ``cmd`` (argv list) and return a ``Completed`` with its own rusage via wait4.

    With ``cgroup_procs`` (a cgroup's ``cgroup.procs`` path) the child joins that cgroup
    before exec, so the cgroup's memory peak covers exactly this command. With
    ``peak_rss`` the command runs under GNU time, whose %M is the command's own peak RSS:
    wait4's ru_maxrss of a child forked from this (large) Python process would start at
    Python's RSS, which exec carries over.
    """
    def join_cgroup():
        with open(cgroup_procs, "w") as f:
            f.write(str(os.getpid()))

    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as rss:
        if peak_rss:
            cmd = [GNU_TIME, "-q", "-f", "%M", "-o", rss.name] + list(cmd)
        start = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err,
                             preexec_fn=join_cgroup if cgroup_procs else None)
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        maxrss = int(rss.read().split()[-1]) if peak_rss and p.returncode == 0 else None
        return Completed(p.returncode, wall, ru.ru_utime + ru.ru_stime, maxrss,
                         out, err.read())


def check(cmd):
    """Run a setup command; raise with its stderr if it fails. Returns stdout text."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: {r.stderr.strip() or r.returncode}")
    return r.stdout


def drop_caches():
    """Write back dirty data and drop the page, dentry and inode caches."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def parse_block_stat(text):
    """Parse a /sys/block/DEV/stat line into a dict of the fields present (11, 15 or 17)."""
    values = [int(v) for v in text.split()]
    if len(values) < 11:
        raise ValueError(f"block stat has {len(values)} fields, expected at least 11")
    return dict(zip(BLOCK_STAT_FIELDS, values))


def device_read_bytes(dev):
    """Bytes read so far from block device ``dev`` (e.g. /dev/loop3): sectors read x 512."""
    with open(f"/sys/block/{os.path.basename(dev)}/stat") as f:
        return parse_block_stat(f.read())["read_sectors"] * SECTOR


def parse_meminfo(text):
    """Parse /proc/meminfo into {key: bytes} (values given in kB are converted)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        out[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def meminfo():
    """The current /proc/meminfo as {key: bytes}."""
    with open("/proc/meminfo") as f:
        return parse_meminfo(f.read())


def parse_proc_stat_busy(text):
    """Busy (non-idle, non-iowait) jiffies summed over all CPUs from /proc/stat text."""
    fields = [int(v) for v in text.splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle


def cpu_busy_seconds():
    """Machine-wide busy CPU seconds so far (includes kernel threads such as kworkers)."""
    with open("/proc/stat") as f:
        return parse_proc_stat_busy(f.read()) / os.sysconf("SC_CLK_TCK")


def filesystem_supported(fstype):
    """Whether the running kernel lists ``fstype`` in /proc/filesystems."""
    with open("/proc/filesystems") as f:
        return any(line.split()[-1] == fstype for line in f if line.strip())


@contextlib.contextmanager
def loop_mount(image, fstype, mountpoint):
    """Attach ``image`` read-only with direct I/O to a free loop device, mount it, yield
    the device path, and tear both down. Direct I/O keeps the image file itself out of
    the page cache, so memory and device figures belong to the file system alone."""
    dev = check(["losetup", "--find", "--show", "--read-only", "--direct-io=on",
                 str(image)]).strip()
    try:
        check(["mount", "-t", fstype, "-o", "ro", dev, str(mountpoint)])
        try:
            yield dev
        finally:
            check(["umount", str(mountpoint)])
    finally:
        for attempt in range(20):
            if subprocess.run(["losetup", "-d", dev], capture_output=True).returncode == 0:
                break
            time.sleep(0.05 * (attempt + 1))


class MemoryCgroup:
    """A scratch memory cgroup whose peak usage can be read; v2 or v1 hierarchy."""

    def __init__(self, name):
        v2 = "/sys/fs/cgroup"
        v1 = "/sys/fs/cgroup/memory"
        if os.path.exists(f"{v2}/cgroup.controllers") and "memory" in open(
                f"{v2}/cgroup.controllers").read().split():
            self.path, self.peak_file = f"{v2}/{name}", "memory.peak"
        elif os.path.isdir(v1):
            self.path, self.peak_file = f"{v1}/{name}", "memory.max_usage_in_bytes"
        else:
            raise RuntimeError("no memory cgroup hierarchy mounted")
        os.mkdir(self.path)

    @property
    def procs(self):
        """The cgroup.procs file a child writes its pid to."""
        return f"{self.path}/cgroup.procs"

    def peak(self):
        """Peak memory charged to the cgroup (bytes)."""
        with open(f"{self.path}/{self.peak_file}") as f:
            return int(f.read().split()[0])

    def remove(self):
        """Delete the (empty) cgroup; retries while the kernel finishes the last exit."""
        for attempt in range(20):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.05 * (attempt + 1))
