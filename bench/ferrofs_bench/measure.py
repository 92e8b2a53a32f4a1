"""The read workloads run on a mounted image, and the parsing of their output.

* ``tar``: ``tar cf - -C MNT . | wc -c`` (the pipe matters: GNU tar writing to /dev/null
  skips reading file data).
* ``seq``/``rand``/``stride``: fio, 4 KiB buffered psync reads of 16 MiB of the large
  file, as in the EROFS paper's Table 1: sequential from the start, random over the whole
  file (fio's random map never repeats a block), and the first 4 KiB of every 128 KiB
  (``rw=read:124k``). fio wraps around at the end of its region, which would turn stride
  reads into cache hits, so a stride run stops after one pass: at most
  min(16 MiB, file size / 32).
* ``whole``: ``dd bs=1M`` of the whole large file inside a fresh memory cgroup, recording
  the memory it costs (paper Fig. 10).
"""

import json

from . import system

KIB = 1024
MIB = 1024 * 1024
REQUEST = 16 * MIB
STRIDE = 128 * KIB
BS = 4 * KIB
FIO_PATTERNS = ("seq", "rand", "stride")
TESTS = ("tar",) + FIO_PATTERNS + ("whole",)


def fio_command(path, pattern, file_size):
    """fio argv for one pattern over ``path`` (a file of ``file_size`` bytes)."""
    region = file_size - file_size % BS
    if pattern == "stride":
        passes = region // STRIDE
        io_size, rw = min(REQUEST, passes * BS), f"read:{(STRIDE - BS) // KIB}k"
    else:
        io_size, rw = min(REQUEST, region), {"seq": "read", "rand": "randread"}[pattern]
    escaped = str(path).replace(":", "\\:")
    return ["fio", f"--name={pattern}", f"--filename={escaped}", "--readonly",
            "--ioengine=psync", "--direct=0", "--invalidate=1", f"--bs={BS}",
            f"--rw={rw}", f"--size={region}", f"--io_size={io_size}",
            "--randrepeat=1", "--output-format=json"]


def parse_fio_json(text):
    """Extract the read figures of the first job from fio's ``--output-format=json``.

    fio may print warnings before the JSON object; they are skipped. Returns
    requested_bytes, ios, throughput (bytes/s), runtime_s, usr_cpu_pct and sys_cpu_pct.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in fio output")
    doc = json.loads(text[start:])
    job = doc["jobs"][0]
    if job.get("error"):
        raise ValueError(f"fio job error {job['error']}")
    rd = job["read"]
    return {
        "requested_bytes": rd["io_bytes"],
        "ios": rd["total_ios"],
        "throughput": rd["bw_bytes"],
        "runtime_s": rd["runtime"] / 1000.0,
        "usr_cpu_pct": job.get("usr_cpu", 0.0),
        "sys_cpu_pct": job.get("sys_cpu", 0.0),
    }


def _observe(dev, cmd, cgroup_procs=None):
    """Run ``cmd``; return its Completed plus device bytes read and machine CPU seconds."""
    dev_before, cpu_before = system.device_read_bytes(dev), system.cpu_busy_seconds()
    done = system.run_measured(cmd, cgroup_procs=cgroup_procs)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({done.returncode}): "
                           f"{done.stderr.decode(errors='replace').strip()[-500:]}")
    return done, {"device_bytes": system.device_read_bytes(dev) - dev_before,
                  "cpu_all_s": system.cpu_busy_seconds() - cpu_before,
                  "cpu_s": done.cpu_s, "wall_s": done.wall_s}


def _amplify(m):
    m["amplification"] = m["device_bytes"] / m["requested_bytes"] if m["requested_bytes"] else 0
    return m


def run_tar(dev, mountpoint):
    """tar of the whole mounted tree piped to wc -c; requested_bytes is the tar size."""
    done, m = _observe(dev, ["bash", "-o", "pipefail", "-c",
                             'tar cf - -C "$1" . | wc -c', "tar", str(mountpoint)])
    m["requested_bytes"] = int(done.stdout.split()[0])
    m["throughput_mibs"] = m["requested_bytes"] / MIB / m["wall_s"]
    return _amplify(m)


def run_fio(dev, path, pattern, file_size):
    """One fio pattern; throughput is fio's own read bandwidth."""
    done, m = _observe(dev, fio_command(path, pattern, file_size))
    f = parse_fio_json(done.stdout)
    m["requested_bytes"] = f["requested_bytes"]
    m["throughput_mibs"] = f["throughput"] / MIB
    return _amplify(m)


def run_whole(dev, path, cgroup_name):
    """Read the whole file with dd in a fresh memory cgroup. Reports the drop in MemFree,
    the growth of Cached (both machine-wide, from /proc/meminfo) and the cgroup's peak."""
    cg = system.MemoryCgroup(cgroup_name)
    try:
        before = system.meminfo()
        done, m = _observe(dev, ["dd", f"if={path}", "of=/dev/null", "bs=1M"],
                           cgroup_procs=cg.procs)
        after = system.meminfo()
        m["cgroup_peak_bytes"] = cg.peak()
    finally:
        cg.remove()
    m["mem_free_drop_bytes"] = before["MemFree"] - after["MemFree"]
    m["cached_delta_bytes"] = after["Cached"] - before["Cached"]
    m["requested_bytes"] = _dd_bytes(done.stderr)
    m["throughput_mibs"] = m["requested_bytes"] / MIB / m["wall_s"]
    return _amplify(m)


def _dd_bytes(stderr):
    """Bytes copied, from dd's summary line ``N bytes (...) copied, ...``."""
    for line in stderr.decode(errors="replace").splitlines():
        if " bytes" in line and "copied" in line:
            return int(line.split()[0])
    raise ValueError("no byte count in dd output")
