"""ferrofs-bench: reproduce the EROFS papers' read experiments on this machine.

Builds images of a corpus with ferrofs mkfs, upstream mkfs.erofs and mksquashfs across
codecs and cluster sizes, mounts each with the kernel on a loop device, and measures
`tar` of the tree, fio 4 KiB sequential/random/stride reads (EROFS ATC'19 Table 1 and
Fig. 7), and the memory cost of reading a large file (Fig. 10). Results go to CSV, a
Markdown report and PNG plots. Run as ``bash bench/ferrofs-bench.sh`` (or
``python3 -m ferrofs_bench`` with bench/ on PYTHONPATH).
"""
