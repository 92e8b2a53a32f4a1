"""fio command lines and parsing of fio's --output-format=json."""

import json

import pytest

from ferrofs_bench import measure

MIB = 1024 * 1024


def fio_json(io_bytes=16 * MIB, bw=50 * MIB, runtime_ms=320, error=0):
    return json.dumps({
        "fio version": "fio-3.33",
        "jobs": [{
            "jobname": "seq", "error": error, "usr_cpu": 1.5, "sys_cpu": 20.25,
            "read": {"io_bytes": io_bytes, "total_ios": io_bytes // 4096, "bw_bytes": bw,
                     "runtime": runtime_ms},
            "write": {"io_bytes": 0},
        }],
    })


def test_parse_plain():
    r = measure.parse_fio_json(fio_json())
    assert r == {"requested_bytes": 16 * MIB, "ios": 4096, "throughput": 50 * MIB,
                 "runtime_s": 0.32, "usr_cpu_pct": 1.5, "sys_cpu_pct": 20.25}


def test_parse_skips_warnings_and_accepts_bytes():
    text = "fio: file hash not empty on exit\nnote: both iodepth >= 1\n" + fio_json(4096)
    assert measure.parse_fio_json(text.encode())["requested_bytes"] == 4096


def test_parse_rejects_job_error_and_garbage():
    with pytest.raises(ValueError):
        measure.parse_fio_json(fio_json(error=5))
    with pytest.raises(ValueError):
        measure.parse_fio_json("fio: no such file\n")


def opts(cmd):
    return dict(a[2:].split("=", 1) for a in cmd if a.startswith("--") and "=" in a)


def test_fio_patterns():
    size = 512 * MIB + 1000
    seq, rand, stride = (opts(measure.fio_command("/m/f", p, size))
                         for p in ("seq", "rand", "stride"))
    assert seq["rw"] == "read" and rand["rw"] == "randread" and stride["rw"] == "read:124k"
    assert seq["bs"] == "4096" and seq["size"] == str(512 * MIB)
    assert seq["io_size"] == rand["io_size"] == stride["io_size"] == str(16 * MIB)


def test_stride_stops_after_one_pass():
    # 32 MiB file: 256 strides of 128 KiB, so only 1 MiB is read (fio would wrap around).
    stride = opts(measure.fio_command("/m/f", "stride", 32 * MIB))
    assert stride["io_size"] == str(MIB)
    assert opts(measure.fio_command("/m/f", "seq", 8 * MIB))["io_size"] == str(8 * MIB)


def test_filename_colons_escaped():
    assert opts(measure.fio_command("/m/a:b", "seq", MIB))["filename"] == "/m/a\\:b"


def test_dd_bytes():
    err = b"512+0 records in\n512+0 records out\n536870912 bytes (537 MB, 512 MiB) copied, 1.2 s\n"
    assert measure._dd_bytes(err) == 536870912
