"""Corpora: the bundled deterministic one, and preparing user-given trees and files.

The bundled corpus is generated from a seeded PRNG, so every run (and every machine)
builds the same bytes: about 7 MiB of text, binary-like files and small files in nested
directories, a few symlinks, and ``large.txt`` (32 MiB of Zipf-distributed pseudo-English,
compressing roughly like enwik9) that the fio and memory tests read.
"""

import itertools
import os
import random
import shutil

VERSION = 1
SEED = 20190710
LARGE_BYTES = 32 * 1024 * 1024
STAMP = ".ferrofs-bench-corpus"


class Words:
    """A seeded pseudo-English word source with Zipf-like (s = 1.1) frequencies."""

    def __init__(self, rng, vocabulary=30000):
        letters = "etaoinshrdlcumwfgypbvkjxqz"
        weights = [1 / (i + 1) ** 0.9 for i in range(len(letters))]
        self.rng = rng
        self.vocab = ["".join(rng.choices(letters, weights, k=rng.randint(1, 10)))
                      for _ in range(vocabulary)]
        self.cum = list(itertools.accumulate(1 / (r + 1) ** 1.1 for r in range(vocabulary)))

    def text(self, nbytes):
        """About ``nbytes`` of text: sentences of words, lines of 60-100 characters."""
        parts, size = [], 0
        while size < nbytes:
            words = self.rng.choices(self.vocab, cum_weights=self.cum, k=4096)
            for i in range(0, len(words), 14):
                line = " ".join(words[i:i + 14]).capitalize() + ".\n"
                parts.append(line)
                size += len(line)
        return "".join(parts).encode()[:nbytes]


def _binary(rng, nbytes):
    """Executable-like bytes: runs of repeated 16-byte 'instructions', small integers,
    zero padding and some incompressible noise."""
    out = bytearray()
    opcodes = [rng.randbytes(16) for _ in range(64)]
    while len(out) < nbytes:
        kind = rng.random()
        if kind < 0.5:
            out += b"".join(rng.choices(opcodes, k=rng.randint(4, 64)))
        elif kind < 0.7:
            out += bytes(rng.randint(0, 15) for _ in range(rng.randint(64, 512)))
        elif kind < 0.85:
            out += bytes(rng.randint(16, 4096))
        else:
            out += rng.randbytes(rng.randint(64, 2048))
    return bytes(out[:nbytes])


def generate(dest, large_bytes=LARGE_BYTES):
    """Create the bundled corpus in ``dest`` unless an up-to-date copy is already there.
    Returns ``dest``."""
    stamp = os.path.join(dest, STAMP)
    want = f"{VERSION} {SEED} {large_bytes}\n"
    if os.path.exists(stamp) and open(stamp).read() == want:
        return dest
    if os.path.exists(dest):
        shutil.rmtree(dest)
    rng = random.Random(SEED)
    words = Words(rng)
    files = {}
    for i in range(60):
        files[f"doc/{['man', 'guide', 'notes'][i % 3]}/text{i:03d}.txt"] = words.text(
            int(1024 * 2 ** rng.uniform(0, 8)))
    for i in range(20):
        files[f"bin/prog{i:02d}"] = _binary(rng, int(4096 * 2 ** rng.uniform(0, 7)))
    for i in range(300):
        d = "/".join(f"d{rng.randint(0, 4)}" for _ in range(rng.randint(1, 4)))
        data = words.text(rng.randint(0, 3000)) if i % 3 else _binary(rng, rng.randint(1, 3000))
        files[f"small/{d}/f{i:03d}"] = data
    files["large.txt"] = words.text(large_bytes)
    for rel, data in files.items():
        path = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(dest, "empty-dir"))
    open(os.path.join(dest, "empty-file"), "w").close()
    os.symlink("bin/prog00", os.path.join(dest, "link-to-prog"))
    os.symlink("doc/man", os.path.join(dest, "link-to-dir"))
    with open(stamp, "w") as f:
        f.write(want)
    return dest


def prepare(path, staging):
    """Turn a user corpus into (source directory, path of its largest regular file
    relative to that directory). A directory is used as is; a file is hard-linked (or
    copied, across file systems) into ``staging``, which becomes the source."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return path, largest_file(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"corpus {path}: no such file or directory")
    os.makedirs(staging, exist_ok=True)
    target = os.path.join(staging, os.path.basename(path))
    if not os.path.exists(target):
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
    return staging, os.path.basename(path)


def largest_file(root):
    """Relative path of the largest regular file under ``root`` (None if it has none)."""
    best, best_size = None, -1
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                size = os.path.getsize(p)
                if size > best_size:
                    best, best_size = os.path.relpath(p, root), size
    return best
