#!/bin/bash
mkdir -p "${BENCH_DIR:-/tmp/ferrofs-bench}"
# Compressed builds: ferrofs mkfs vs mkfs.erofs 1.8.6, same tree and options, one run each,
# timing includes a final sync so both pay for writing the image out.
U=${UPSTREAM_TOOLS_BIN:-$HOME/.cache/upstream-tools/bin}
F=${FERROFS:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ferrofs}
for src in "$@"; do
  for o in "-zlz4 -C4096" "-zlz4 -C65536" "-zlz4hc -C4096" "-zlz4hc -C65536" "-zlzma -C4096" "-zlzma -C65536" "-zzstd -C4096" "-zzstd -C65536"; do
    for tool in ferrofs upstream; do
      img=${BENCH_DIR:-/tmp/ferrofs-bench}/z-$tool.img; rm -f $img; sync
      if [ $tool = ferrofs ]; then cmd="$F mkfs --quiet $o $img $src"; else cmd="$U/mkfs.erofs --quiet $o $img $src"; fi
      /usr/bin/time -f "%e %U %S" bash -c "$cmd && sync" >/dev/null 2>/tmp/zb.err
      read wall user sys < <(tail -1 /tmp/zb.err)
      inplace=$($F dump $img --json 2>/dev/null | python3 -c "import json,sys; print(round(json.load(sys.stdin)['statistics']['in_place']['share'],3))" 2>/dev/null)
      echo "$(basename $src) | $o | $tool | size=$(stat -c %s $img) | wall=$wall | cpu=$(echo "$user + $sys" | bc) | inplace=$inplace"
    done
  done
done
rm -f ${BENCH_DIR:-/tmp/ferrofs-bench}/z-*.img
