"""EROFS images from Python, over ferrofs's Rust library.

``Image(path)`` reads an image as ``os`` reads a directory tree
(``listdir``, ``stat``/``lstat``, ``readlink``, ``open``, ``walk``,
``getxattr``/``listxattr``), extracts it and checks it (``fsck``);
``build(out, source, preset=...)`` writes one from a directory or from
entries. Errors are Python's (``FileNotFoundError``, ``NotADirectoryError``,
``IsADirectoryError``) or ``CorruptImage``, each naming the path.
"""

from ._ferrofs import CorruptImage, Image, ImageFile, StatResult, build

__all__ = ["CorruptImage", "Image", "ImageFile", "StatResult", "build"]
