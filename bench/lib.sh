#!/usr/bin/env bash
# Helpers the benchmark scripts share; `source` it from bench/*.sh.
#   bench_setup   sets here (the checkout), bin (the erofs-utils 1.9.4 /
#                 squashfs-tools 4.7.5 folder: UPSTREAM_NEXT_BIN, else
#                 ../shared/tools/upstream-tools --next) and ferrofs (FERROFS,
#                 else target/release/ferrofs, built or brought up to date
#                 first: a stale binary would measure old code)
#   median        the median of the numbers on standard input, one a line
#                 (the mean of the middle two for an even count)
#   ctd_config DIR [erofs]
#                 writes DIR/config.toml of a private containerd rooted in
#                 DIR (CRI and NRI off); with `erofs`, image layers unpack
#                 with the EROFS snapshotter and differ

bench_setup() {
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  bin=${UPSTREAM_NEXT_BIN:-$(bash "$here/../shared/tools/upstream-tools" --next | tail -1)}
  if [[ -z ${FERROFS:-} ]]; then
    (cd "$here" && cargo build --release -q -p ferrofs-cli)
  fi
  ferrofs=${FERROFS:-$here/target/release/ferrofs}
}

median() {
  sort -g | awk '{a[NR]=$1} END { if (NR == 0) { print "nan"; exit } print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) }'
}

ctd_config() {
  local d=$1
  cat >"$d/config.toml" <<EOF
version = 3
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
root = "$d/root"
state = "$d/state"
[grpc]
  address = "$d/ctd.sock"
[ttrpc]
  address = "$d/ctd.sock.ttrpc"
EOF
  if [[ ${2:-} == erofs ]]; then
    cat >>"$d/config.toml" <<EOF
[plugins."io.containerd.service.v1.diff-service"]
  default = ["erofs", "walking"]
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/amd64"
  snapshotter = "erofs"
  differ = "erofs"
EOF
  fi
}
