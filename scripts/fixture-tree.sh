# Source trees for the reference images. Sourced (not run) by make-fixtures.sh (erofs-utils 1.8.6
# images in testdata/) and make-fixtures-19.sh (1.9.4 images in testdata/v19/). Keep
# fixture_tree unchanged: the committed 1.8.6 images are its byte-exact output.

# fixture_tree DIR: a small tree with a bit of everything (inline and shared xattrs, hard link,
# symlinks, a sparse file, a FIFO, an empty directory). Every timestamp is @1700000000.
fixture_tree() {
  local src=$1
  mkdir -p "$src/dir/sub" "$src/empty"
  printf 'hello, erofs\n' > "$src/small.txt"
  for i in $(seq 1 1500); do echo "$i the quick brown fox jumps over the lazy dog"; done > "$src/text.txt"
  head -c 9000 /dev/zero | tr '\0' 'a' > "$src/dir/aaaa"
  python3 -c "import random; random.seed(7); open('$src/dir/random.bin','wb').write(bytes(random.getrandbits(8) for _ in range(6000)))"
  cp "$src/text.txt" "$src/dir/sub/copy.txt"
  ln "$src/small.txt" "$src/dir/hardlink"
  ln -s small.txt "$src/link"
  ln -s /nowhere/at/all "$src/dir/dangling"
  truncate -s 40000 "$src/sparse"; printf 'island' | dd of="$src/sparse" bs=1 seek=20000 conv=notrunc status=none
  setfattr -n user.comment -v "a comment" "$src/small.txt"
  setfattr -n user.comment -v "a comment" "$src/text.txt"
  setfattr -n trusted.overlay.opaque -v y "$src/dir"
  mkfifo "$src/fifo"
  find "$src" -exec touch -h -d @1700000000 {} +
}

# fixture_extras DIR: adds DIR/new/ with what the 1.9 features need (run after fixture_tree):
#   new/big.txt      1 MB of repetitive but changing text: compresses to ~60-100 KiB and still
#                    spans many pclusters/extents (8 zstd pieces of 128 KiB, 2+ lz4hc 64 KiB ones)
#   new/hole1m       1 MiB with no data at all (48-bit mkfs stores it as an all-hole file)
#   new/many/        300 small files with long names: a directory of several blocks
#   new/pre1970      mtime 1969-07-20 20:17:40 UTC (-14182940)
#   new/y2200        mtime 2200-01-01 00:00:00 UTC (7258118400, past 2106)
#   new/nsec         mtime 1700000000.123456789
# Everything else keeps @1700000000, so only these three differ once -T is not clamping mtimes.
fixture_extras() {
  local src=$1 i
  mkdir -p "$src/new/many"
  python3 - "$src/new/big.txt" <<'PY'
import random, sys
r = random.Random(7)
def word(): return "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 9)))
# 400 made-up sentences; one "theme" sentence per 64 lines, a counter every 16th line and a
# varying last word on every 3rd line: locally redundant (4 KiB pieces still compress) but no
# two 64 KiB stretches alike.
sent = [" ".join(word() for _ in range(r.randint(5, 10))) for _ in range(400)]
out, total, n = [], 0, 0
while total < 1000000:
    theme = sent[(n // 64) % len(sent)]
    if n % 16 == 0: s = "%07d %s\n" % (n, theme)
    elif n % 3 == 0: s = "%s %s\n" % (theme, sent[(n * 7) % len(sent)].split()[0])
    else: s = theme + "\n"
    out.append(s); total += len(s); n += 1
open(sys.argv[1], "w").write("".join(out)[:1000000])
PY
  truncate -s 1M "$src/new/hole1m"
  for i in $(seq -w 0 299); do echo "entry $i" > "$src/new/many/a-rather-long-file-name-for-entry-$i"; done
  printf 'before the epoch\n' > "$src/new/pre1970"
  printf 'after 2106\n' > "$src/new/y2200"
  printf 'nanoseconds\n' > "$src/new/nsec"
  find "$src" -exec touch -h -d @1700000000 {} +
  touch -d '1969-07-20 20:17:40 UTC' "$src/new/pre1970"
  touch -d '2200-01-01 00:00:00 UTC' "$src/new/y2200"
  touch -d @1700000000.123456789 "$src/new/nsec"
}
