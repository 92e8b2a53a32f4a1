"""The image builders: where to find them and how to ask each for a codec and cluster size.

Three builders are compared: ``ferrofs`` (this repository's ``ferrofs mkfs``),
``erofs-utils`` (upstream ``mkfs.erofs``) and ``squashfs`` (``mksquashfs``). Codec names
are the EROFS ones; for SquashFS ``lzma`` means its xz compressor and ``lz4hc`` its
``lz4 -Xhc``. For EROFS the cluster size is the physical cluster (``-C``); for SquashFS it
is the data block size (``-b``). Each tool keeps its default compression level.
"""

import os
import shutil
import subprocess
from dataclasses import dataclass

CODECS = ("none", "lz4", "lz4hc", "lzma", "zstd")
KIB = 1024
SQUASHFS_DEFAULT_BLOCK = 128 * KIB


@dataclass(frozen=True)
class Config:
    """One image to build: builder, codec and cluster size in bytes (0: not applicable)."""

    tool: str
    codec: str
    cluster: int

    @property
    def fstype(self):
        """Kernel file system type that mounts the image."""
        return "squashfs" if self.tool == "squashfs" else "erofs"

    @property
    def label(self):
        """Short human name, e.g. ``erofs-utils lz4hc 64K``."""
        return f"{self.tool} {self.codec} {cluster_label(self.cluster)}".rstrip()

    @property
    def slug(self):
        """File-name-safe name, e.g. ``erofs-utils_lz4hc_64K``."""
        return self.label.replace(" ", "_")


def cluster_label(cluster):
    """``65536`` -> ``64K``; 0 (no clusters: uncompressed EROFS) -> empty string."""
    return f"{cluster // KIB}K" if cluster else ""


@dataclass
class Tool:
    """A builder: its name, executable and version string (``path`` None if missing)."""

    name: str
    path: str | None
    version: str
    missing_reason: str = ""

    def command(self, cfg, source, image):
        """The argv that builds ``image`` from directory ``source`` for ``cfg``."""
        if self.name == "ferrofs":
            cmd = [self.path, "mkfs", "--quiet"]
            if cfg.codec != "none":
                cmd += ["-z", cfg.codec, "-C", str(cfg.cluster)]
            return cmd + [str(image), str(source)]
        if self.name == "erofs-utils":
            cmd = [self.path, "--quiet"]
            if cfg.codec != "none":
                cmd += [f"-z{cfg.codec}", f"-C{cfg.cluster}"]
            return cmd + [str(image), str(source)]
        comp = {"none": ["-no-compression"], "lz4": ["-comp", "lz4"],
                "lz4hc": ["-comp", "lz4", "-Xhc"], "lzma": ["-comp", "xz"],
                "zstd": ["-comp", "zstd"]}[cfg.codec]
        return [self.path, str(source), str(image), "-noappend", "-quiet", "-no-progress",
                "-b", str(cfg.cluster)] + comp


def configs(tools, codecs, clusters):
    """Every Config for the available tools: one uncompressed image per tool (SquashFS at
    its default block size), then each codec at each cluster size."""
    out = []
    for t in tools:
        for codec in codecs:
            if codec == "none":
                out.append(Config(t.name, "none",
                                  SQUASHFS_DEFAULT_BLOCK if t.name == "squashfs" else 0))
            else:
                out.extend(Config(t.name, codec, c) for c in clusters)
    return out


def _version(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    text = (r.stdout + r.stderr).strip().splitlines()
    return (text[0] if text else "unknown"), ""


def repo_root():
    """The repository root (this package lives in ``<root>/bench/ferrofs_bench``)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_tools(upstream_bin=None):
    """Locate the three builders. ``$FERROFS`` or the repository's target/release (or
    ``$CARGO_TARGET_DIR``) for ferrofs; ``upstream_bin`` (default ``$UPSTREAM_TOOLS_BIN``
    or ~/.cache/upstream-tools/bin), then PATH, for mkfs.erofs and mksquashfs."""
    upstream_bin = upstream_bin or os.environ.get("UPSTREAM_TOOLS_BIN") or os.path.expanduser(
        "~/.cache/upstream-tools/bin")
    candidates = [os.environ.get("FERROFS")]
    for target in (os.environ.get("CARGO_TARGET_DIR"), os.path.join(repo_root(), "target")):
        if target:
            candidates.append(os.path.join(target, "release", "ferrofs"))
    candidates.append(shutil.which("ferrofs"))
    tools = [_make("ferrofs", [c for c in candidates if c], ["--version"],
                   "build it with `cargo build --release -p ferrofs-cli` or set $FERROFS")]
    for name, exe, vflag in (("erofs-utils", "mkfs.erofs", "-V"),
                             ("squashfs", "mksquashfs", "-version")):
        cands = [os.path.join(upstream_bin, exe), shutil.which(exe)]
        tools.append(_make(name, [c for c in cands if c], [vflag],
                           f"no {exe} in {upstream_bin} or PATH "
                           "(bash ../shared/tools/upstream-tools installs it)"))
    return tools


def _make(name, candidates, vflag, reason):
    for c in candidates:
        if os.access(c, os.X_OK):
            version, err = _version([c] + vflag)
            if version is not None:
                return Tool(name, c, version)
            reason = f"{c} does not run: {err}"
    return Tool(name, None, "", reason)
