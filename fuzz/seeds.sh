#!/bin/sh
# Fills the fuzz targets' default corpus directories (fuzz/corpus/TARGET,
# where `cargo +nightly fuzz run TARGET` looks) with seeds from testdata:
#   open_and_walk, read_every_file, path_api: every reference image (testdata/*.erofs
#     by mkfs.erofs 1.5/1.8.6 and testdata/v19/*.erofs by 1.9.4: 48-bit
#     layout, encoded extents, metabox, dot-omitted, --zD, fingerprints)
#     and the sweep's findings (testdata/hostile);
#   decompress: compressed pclusters cut out of those images (found with
#     `ferrofs dump --json`), framed as the target reads them: byte 0 the
#     algorithm (0 lz4, 1 lzma, 2 deflate, 3 zstd), bytes 1-2 the output
#     length / 4 (little-endian), then the stream;
#   tar_scan: small archives GNU tar writes of a tree with every file type,
#     a long name, a hard link, xattrs, a sparse file and whiteouts, in the
#     gnu, pax, ustar and v7 formats (byte 0 of each seed is the target's
#     whiteout switch, then the archive);
#   verity_tree: a verity superblock and tree (`ferrofs verity --hash-file`,
#     512-byte data blocks) followed by the image, for 4 reference images;
#   tar_index: gnu and pax archives of that tree (byte 0: 0 read as they
#     are, 1 their appended copy damaged where the next 8 bytes say);
#   s3_answers: S3 error bodies, multipart results and listings, and a
#     credentials file (byte 0 picks the parser);
#   registry_answers: references, manifests and an index, challenges and
#     platforms (byte 0 picks the parser);
#   composefs_dump: a hand-written dump of every file type, and
#     composefs-info's dumps of the composefs_objects images when the
#     reference tools are installed;
#   composefs_objects: composefs images (versions 0 and 1) `ferrofs
#     mkcomposefs` writes of a small tree.
# Existing corpus files are kept. FERROFS names the ferrofs binary (default:
# target/ci/ferrofs, then target/release/ferrofs, then target/debug/ferrofs);
# without one the decompress seeds are skipped.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
corpus="$here/corpus"

for t in open_and_walk read_every_file path_api; do
  mkdir -p "$corpus/$t"
  for f in "$root"/testdata/*.erofs; do cp "$f" "$corpus/$t/$(basename "$f")"; done
  for f in "$root"/testdata/v19/*.erofs; do cp "$f" "$corpus/$t/v19-$(basename "$f")"; done
  # Inputs bench/hostile-sweep.py found bugs with.
  for f in "$root"/testdata/hostile/*; do cp "$f" "$corpus/$t/hostile-$(basename "$f")"; done
done

mkdir -p "$corpus/tar_scan"
tree=$(mktemp -d)
mkdir -p "$tree/d/sub" "$tree/$(printf 'n%.0s' $(seq 1 120))/$(printf 'm%.0s' $(seq 1 120))"
printf 'hello\n' >"$tree/d/a.txt"
ln "$tree/d/a.txt" "$tree/d/hard"
ln -s a.txt "$tree/d/link"
mkfifo "$tree/d/fifo"
: >"$tree/d/.wh.gone"
: >"$tree/d/sub/.wh..wh..opq"
truncate -s 64K "$tree/sparse" && printf 'x' | dd of="$tree/sparse" bs=1 seek=30000 conv=notrunc 2>/dev/null
setfattr -n user.note -v seed "$tree/d/a.txt" 2>/dev/null || true
mknod "$tree/d/chr" c 1 3 2>/dev/null || true
for fmt in gnu pax ustar v7; do
  for sw in 0 1; do
    case $fmt in gnu) x=-S ;; pax) x="-S --xattrs" ;; *) x= ;; esac
    # v7 and ustar cannot hold everything: tar complains and skips it.
    tar --format=$fmt $x -b1 -cf - -C "$tree" . 2>/dev/null >"$tree.tar" || true
    { printf "\\$sw"; cat "$tree.tar"; } >"$corpus/tar_scan/$fmt-$sw"
  done
done
# tar_index: the pax and gnu archives, read as they are (byte 0 = 0) and with
# their appended copy damaged (byte 0 = 1, then 8 bytes choosing where).
mkdir -p "$corpus/tar_index"
for fmt in gnu pax; do
  tar --format=$fmt -b1 -cf - -C "$tree" . 2>/dev/null >"$tree.tar" || true
  { printf '\0'; cat "$tree.tar"; } >"$corpus/tar_index/$fmt-same"
  { printf '\1\100\0\0\0\7\0\0\0'; cat "$tree.tar"; } >"$corpus/tar_index/$fmt-damaged"
done
# s3_answers: byte 0 picks the parser (0 error bodies, 1 multipart
# results and listings, 2 Retry-After, 3 the credentials file).
mkdir -p "$corpus/s3_answers"
printf '\0<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied &amp; more</Message><Resource>/b/k</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>' >"$corpus/s3_answers/error"
printf '\0<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>' >"$corpus/s3_answers/nosuchkey"
printf '\1<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>VXBsb2FkIElE</UploadId></InitiateMultipartUploadResult>' >"$corpus/s3_answers/initiate"
printf '\1<CompleteMultipartUploadResult><Location>http://b/k</Location><ETag>&quot;3858f6-9&quot;</ETag></CompleteMultipartUploadResult>' >"$corpus/s3_answers/complete"
printf '\1<ListMultipartUploadsResult><Upload><Key>k.img</Key><UploadId>abc</UploadId></Upload><Upload><Key>o</Key><UploadId>d</UploadId></Upload></ListMultipartUploadsResult>' >"$corpus/s3_answers/uploads"
printf '\002120' >"$corpus/s3_answers/retry-after"
printf '\3[default]\naws_access_key_id = AKID\naws_secret_access_key = wJalr/K7MDENG\n\n[ro]\n# read-only\naws_access_key_id=RO\naws_secret_access_key=S\naws_session_token = T\n' >"$corpus/s3_answers/credentials"
# registry_answers: byte 0 picks the parser (0 references, 1 manifests
# and indexes, 2 WWW-Authenticate challenges, 3 platforms).
mkdir -p "$corpus/registry_answers"
printf '\0docker://localhost:5000/team/app:v1@sha256:%s' "$(printf '%064d' 7)" >"$corpus/registry_answers/reference"
printf '\0python:3.13' >"$corpus/registry_answers/hub"
printf '\1{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":2},"layers":[{"mediaType":"application/vnd.erofs.layer.v1","digest":"sha256:%s","size":8192,"annotations":{"org.erofs.dmverity.root_digest":"sha256:%s","org.erofs.dmverity.hash_offset":"4096"}}]}' "$(printf '%064d' 1)" "$(printf '%064d' 2)" "$(printf '%064d' 3)" >"$corpus/registry_answers/manifest"
printf '\1{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":7,"platform":{"os":"linux","architecture":"arm64","variant":"v8","os.features":["erofs"]}},{"digest":"sha256:%s","size":9,"platform":{"os":"linux","architecture":"amd64"}}]}' "$(printf '%064d' 4)" "$(printf '%064d' 5)" >"$corpus/registry_answers/index"
printf '\2Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/python:pull"' >"$corpus/registry_answers/bearer"
printf '\2Basic realm="Registry Realm"' >"$corpus/registry_answers/basic"
printf '\3linux/arm64/v8' >"$corpus/registry_answers/platform"
# composefs_dump: a dump of every file type (the format composefs-info
# dump prints: PATH SIZE MODE NLINK UID GID RDEV MTIME PAYLOAD CONTENT
# DIGEST XATTRS...), and composefs-info's dump of a real image when the
# reference tools are there.
mkdir -p "$corpus/composefs_dump"
cat >"$corpus/composefs_dump/every-type" <<'DUMP'
/ 4096 40755 4 0 0 0 1700000000.0 - - - user.a=b
/d 4096 40755 2 0 0 0 1700000000.0 - - - trusted.overlay.opaque=y
/d/file 6 100644 2 1000 1000 0 1700000000.5 ab/cdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789 - abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789
/d/hard 6 @100644 2 1000 1000 0 1700000000.5 /d/file - -
/d/inline 5 100600 1 0 0 0 1700000000.0 - hello -
/d/link 4 120777 1 0 0 0 1700000000.0 file - -
/d/fifo 0 10644 1 0 0 0 1700000000.0 - - -
/d/chr 0 20644 1 0 0 259 1700000000.0 - - -
/d/name\x20with\nescapes 0 100644 1 0 0 0 0.0 - - - security.capability=\x01\x00
/e 4096 40700 2 0 0 0 1700000000.0 - - -
DUMP

ferrofs=${FERROFS:-}
if [ -z "$ferrofs" ]; then
  for p in "$root/target/ci/ferrofs" "$root/target/release/ferrofs" "$root/target/debug/ferrofs"; do
    if [ -x "$p" ]; then ferrofs=$p; break; fi
  done
fi
if [ -z "$ferrofs" ]; then
  echo "seeds.sh: no ferrofs binary (build it or set FERROFS): decompress seeds skipped" >&2
  exit 0
fi
mkdir -p "$corpus/decompress"
python3 - "$ferrofs" "$root/testdata" "$corpus/decompress" <<'PY'
import glob, hashlib, json, os, struct, subprocess, sys

ferrofs, testdata, out = sys.argv[1:4]
algs = {"lz4": 0, "lzma": 1, "deflate": 2, "zstd": 3}
paths = ["/new/big.txt", "/text.txt", "/dir/sub/copy.txt", "/dir/random.bin", "/dir/aaaa"]
images = sorted(glob.glob(os.path.join(testdata, "*.erofs")) + glob.glob(os.path.join(testdata, "v19", "*.erofs")))
n = 0
for img in images:
    data = open(img, "rb").read()
    for p in paths:
        r = subprocess.run([ferrofs, "dump", "--json", "--path", p, img], capture_output=True)
        if r.returncode != 0:
            continue
        taken = 0
        for e in json.loads(r.stdout).get("extents", []):
            m = e.get("map", {})
            if m.get("type") != "pcluster" or m.get("format") not in algs or m.get("inline"):
                continue
            pos, plen, llen = m["pos"], m["plen"], e["len"]
            if llen > 4 * 0xFFFF or pos + plen > len(data):
                continue
            seed = bytes([algs[m["format"]]]) + struct.pack("<H", (llen + 3) // 4) + data[pos:pos + plen]
            name = hashlib.sha1(seed).hexdigest()
            with open(os.path.join(out, name), "wb") as f:
                f.write(seed)
            n += 1
            taken += 1
            if taken == 3:
                break
print(f"seeds.sh: {n} decompress seeds from {len(images)} images")
PY

# verity_tree (with the ferrofs binary): a verity superblock and tree (`ferrofs verity --hash-file`)
# followed by the image they cover, for a few reference images.
if [ -n "$ferrofs" ]; then
  mkdir -p "$corpus/verity_tree"
  for f in $(ls "$root"/testdata/*.erofs | head -4); do
    h=$(mktemp)
    if "$ferrofs" verity --hash-file "$h" --data-block-size 512 "$f" >/dev/null 2>&1; then
      cat "$h" "$f" >"$corpus/verity_tree/$(basename "$f")"
    fi
    rm -f "$h"
  done
fi

# composefs_objects and composefs_dump (with the ferrofs binary and, for
# dumps, composefs-info): composefs images of a small tree, and their dumps.
if [ -n "$ferrofs" ]; then
  mkdir -p "$corpus/composefs_objects"
  t=$(mktemp -d)
  mkdir -p "$t/src/d/e"
  printf 'hello\n' >"$t/src/d/a"
  head -c 9000 /dev/zero | tr '\0' x >"$t/src/d/e/big"
  ln -s a "$t/src/d/l"
  : >"$t/src/empty"
  setfattr -n user.k -v v "$t/src/d/a" 2>/dev/null || true
  for v in 0 1; do
    if "$ferrofs" mkcomposefs --min-version=$v --max-version=$v "$t/src" "$t/img$v" 2>/dev/null; then
      cp "$t/img$v" "$corpus/composefs_objects/v$v.img"
      info=$(command -v composefs-info || echo "${UPSTREAM_NEXT_BIN:-/root/.cache/upstream-tools-next/bin}/composefs-info")
      if [ -x "$info" ]; then
        "$info" dump "$t/img$v" >"$corpus/composefs_dump/tree-v$v" 2>/dev/null || true
      fi
    fi
  done
  rm -rf "$t"
fi
