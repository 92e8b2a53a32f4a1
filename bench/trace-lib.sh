# Sourced by the profile benchmarks: record_traces FERROFS IMAGE MNT OUT CMD...
# runs CMD in a chroot on `ferrofs mount --trace` of IMAGE twice (a fresh
# mount and dropped caches each time), leaving OUT/trace1.txt and
# OUT/trace2.txt.
record_traces() {
  local ferrofs=$1 img=$2 mnt=$3 out=$4 t; shift 4
  for t in 1 2; do
    rm -f "$out/trace$t.txt"
    echo 3 > /proc/sys/vm/drop_caches
    "$ferrofs" mount --trace "$out/trace$t.txt" "$img" "$mnt"
    chroot "$mnt" "$@" >/dev/null
    umount "$mnt"; sleep 1
  done
}
