# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_ferrofs_global_optspecs
    string join \n h/help V/version
end

function __fish_ferrofs_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_ferrofs_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_ferrofs_using_subcommand
    set -l cmd (__fish_ferrofs_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c ferrofs -n "__fish_ferrofs_needs_command" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -s V -l version -d 'Print version'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "mkfs" -d 'Build an EROFS image from a directory tree'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "mkcomposefs" -d 'Build a composefs image (metadata only; file data in an object store named by fs-verity digests), byte for byte as mkcomposefs 1.0.8 builds it, with its command line: `ferrofs mkcomposefs [--digest-store DIR] SOURCE IMAGE`. The binary run as `mkcomposefs` (a symlink) is a drop-in for it'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "mount" -d 'Mount an image read-only through FUSE'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "convert" -d 'Make a container image EROFS-native, as containerd 2.4\'s `ctr images convert --erofs` does (each tar layer an EROFS image built by ferrofs), from docker:// or oci: to docker:// or oci:, and/or into containerd\'s layer content cache (--layer-cache)'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "fsck" -d 'Check every inode, directory entry and pcluster of an image. Exit status 1 on damage (what makes the kernel return wrong data or errors); warnings (a link count other than the entries naming the inode) are printed but leave it 0. 2: any other error; 3: the image, read by URL, changed on the server during the check'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "extract" -d 'Extract the image\'s tree into DIR (empty or absent). An xattr or owner the target refuses is reported (path, name, reason) and the extraction goes on; the exit status is then 1 (2: extraction failed)'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "ls" -d 'List a directory (or show one entry) as coreutils\' `ls` lists the kernel\'s mount of the image'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "export" -d 'Write the image (or a directory of it) as a POSIX (PAX) tar archive, without root: the bytes GNU tar writes of the kernel\'s mount with --format=pax --sort=name --numeric-owner --xattrs --xattrs-include=\'*\' and --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime (`-C DIR .`). Hard links stay links, devices and fifos headers, sockets are left out (as GNU tar leaves them); files the image stores with holes are sparse members, as GNU tar --sparse writes them (--no-sparse: whole, as GNU tar without it)'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "cat" -d 'Write a file\'s contents to standard output'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "diff" -d 'Show what changed between two images: paths added, removed and changed (and what about them), and how many image blocks differ on disk. Exit status 0 when the trees are the same, 1 when not'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "dump" -d 'Describe the superblock, one inode, or whole-image statistics'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "push" -d 'Upload a finished image to S3 (s3://BUCKET/KEY), atomically: the object appears only once it is whole; a failed or interrupted upload is aborted and leaves nothing behind. Exit status 130 (SIGINT) or 143 (SIGTERM) when interrupted'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "verity" -d 'Add a dm-verity hash tree to an image (appended, or in a separate hash file) and print its root hash: what `--verity` of the reading commands and `veritysetup verify` check it with'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "digest" -d 'Print files\' fs-verity digests (sha256, 4 KiB blocks), as `fsverity digest` prints them'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "completions" -d 'Print a shell completion script (e.g. `ferrofs completions bash > /etc/bash_completion.d/ferrofs`)'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "manpages" -d 'Write the man pages (ferrofs.1 and one per command) into DIR'
complete -c ferrofs -n "__fish_ferrofs_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l clean -d 'Rebuild mode: `data` (also `--clean` alone) copies every file\'s data into the image, which then stands alone; without it file data stays in the layers, which become the image\'s extra devices (one per layer, in order). Other sources always build clean' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l layer-images -d 'With an `oci:` SOURCE: also write each layer as an image of its own into DIR (layer-1.img, layer-2.img, ... bottom first, built with these options, whiteouts as overlayfs ones) and make IMAGE their merge, whose file data stays in them: readers take them, in order, as IMAGE\'s devices' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l platform -d 'For docker:// images: the platform chosen from an image index, OS/ARCH[/VARIANT] (default: this machine\'s, e.g. linux/amd64)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l insecure-registry -d 'Reach this registry (HOST[:PORT], as references name it) over plain HTTP; localhost and 127.0.0.1 always are. Repeatable' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l authfile -d 'Read registry credentials from FILE only (docker\'s config.json or containers\' auth.json format); default: $REGISTRY_AUTH_FILE, containers\' auth.json, then ~/.docker/config.json' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l tar -d 'Read a tar archive (ustar, GNU, PAX; owners and devices from the headers, no root needed) instead of a directory. `--tar=f` is the same. `--tar=i` (or `=0`) writes a tar index: only metadata, with 512-byte blocks (-b is ignored, as mkfs.erofs ignores it), whose files point at their data in the archive; append the archive to the image (`cat IMAGE ARCHIVE`) and the result mounts and reads as the archive\'s tree. mkfs.erofs\'s headerball mode and block map files (`--tar=X,FILE`) are not supported' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l ovlfs-strip -d 'With --tar or EROFS layers: 1 leaves overlayfs whiteouts and opaque/origin xattrs out of the image; 0 (default) keeps them' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l sort -d 'With --tar: the order of file data, `path` (default) or `none`: in an uncompressed image without inline data (-E noinline_data), the order the archive holds it, as mkfs.erofs does' -r -f -a "path\t''
none\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l ungzip -d 'With --tar: decompress a gzip archive (one that does not start as gzip is read as it is). =FILE also writes the decompressed archive to FILE, and file data is read back from there instead of a spool' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l unxz -d 'With --tar: decompress an xz, lzma or lzip archive (a plain tar archive is read as it is). =FILE as for --ungzip. Also spelled --unlzma, as mkfs.erofs accepts it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s b -d 'Block size in bytes: 512, 1024, 2048 or 4096' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s T -d 'Give every file this mtime (UNIX seconds) and use it as build time. Without -T, SOURCE_DATE_EPOCH (if set) clamps newer mtimes to it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s U -d 'Volume UUID, `clear` (all zeros) or `random` (default: derived from the image\'s contents, so equal inputs give equal images)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s L -d 'Volume label (at most 15 bytes)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l uid-offset -d 'Add this to every uid' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l gid-offset -d 'Add this to every gid' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l force-uid -d 'Set every uid to this' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l force-gid -d 'Set every gid to this' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l exclude-path -d 'Leave out this path (relative to SOURCE; repeatable)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l exclude-regex -d 'Leave out paths (relative to SOURCE) matching this regex (repeatable)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s x -d 'Xattrs carried by at least N inodes are stored once, shared; a negative N drops all xattrs' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l xattr-prefix -d 'Store this long xattr name prefix once (e.g. trusted.overlay.; repeatable)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s m -d 'Put inodes, shared xattrs and the long-prefix table into the metabox (Linux 6.17+; implies -E 48bit), compressed in pclusters of BYTES with ALG (default: the first -z compressor; none without -z; naming one without -z compresses file data with it too, as mkfs.erofs does)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l zD -d 'Compress directories: every directory goes whole into the packed inode, compressed with the fragments (=0 turns it off; mkfs.erofs 1.9.4 reads its own `--zD=1` as off, ferrofs as its man page says)' -r -f -a "0\t''
1\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l xattr-inode-digest -d 'Give every non-empty regular file an xattr NAME (default erofs.fingerprint.v1, which the kernel does not list) holding `sha256:` and the SHA-256 of its contents' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l chunksize -d 'Store every regular file chunk-based with chunks of this many bytes (sparse files are stored chunk-based, with holes, unless -E sparse compresses them)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s E -d 'Extended options, comma-separated: force-inode-extended, force-inode-compact (an inode that needs the extended form is an error), noinline_data (or ^inline_data: regular files\' tails get blocks of their own; directories and symlinks stay inline), ztailpacking, fragments[=PCLUSTER] (tails and small files compressed together in the packed inode), all-fragments (every file there), dedupe (identical files stored once, also done with fragments, and runs shared inside long files; without -z, identical blocks: files become chunk-based with one-block chunks unless --chunksize says otherwise), force-chunk-indexes (chunk tables of 8-byte indexes), force-inode-blockmap (4-byte block maps, the default), nosbcrc (no superblock checksum), ^xattr-name-filter (no xattr name bloom filters), 48bit (the 48-bit layout, Linux 6.15+: compact inodes keep their own mtime, all-hole files take no blocks), dot-omitted (directories without "."; implies 48bit), plain-xattr-prefixes (the long-prefix table raw on the device), legacy-compress (full, not compact, indexes of compressed files, as mkfs.erofs 1.9 writes them; its pre-5.4 layout without LZ4 0padding is not made, as 1.9 makes it no longer), sparse (runs of zeros in compressed files, holes of the source or written zeros, become sparse pclusters that take no blocks: with 48bit, empty extent records, read as holes by every kernel that mounts the image; otherwise Linux 7.2\'s LI_HOLE lclusters in full indexes, 8 bytes per block of the file, which older kernels read by decoding a shared pcluster of zeros)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l MZ -d 'Metadata zone: i (inodes), d (directory blocks), id (both, the default) or 0 (none). ferrofs always writes inodes and directory blocks after all file data, so every value gives the same image' -r -f -a "i\t''
d\t''
id\t''
di\t''
0\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l preset -d 'A named set of options, for those who would rather not pick them: `fast` (-z lz4 -C 65536: quick to build and to read; Linux 5.13+), `balanced` (-z lz4hc,9 -C 65536 -E ztailpacking; Linux 5.17+), `dense` (-z lzma,6 -C 131072 -E fragments,dedupe,ztailpacking: the smallest image older kernels mount; Linux 6.1+; add -m 4096 --zD for the 2025 format, smaller still, Linux 6.17+). Options given beside it win over the preset\'s' -r -f -a "fast\t''
balanced\t''
dense\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s z -d 'Compress file data: lz4, lz4hc[,LEVEL], lzma[,LEVEL], deflate[,LEVEL], zstd[,LEVEL] (also `level=N`); alternatives for --compress-hints separated by \':\'. Default: none, data is stored uncompressed (or what --preset says)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s C -d 'Physical cluster size in bytes (a multiple of the block size, up to 1 MiB); default: one block' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l compress-hints -d 'Per-path compression: lines of `<pcluster bytes> <compressor index> <regex>`' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s j -l workers -d 'Compression threads (default: one per core); the image is the same for any number' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l mount-point -d 'Mount point the image is meant for (default /): the prefix of the paths --file-contexts, --fs-config-file and --block-list-file use' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l profile -d 'Lay data out for a recorded start-up (`ferrofs mount --trace`, or a list of paths): data in first-access order, pieces read in small bits in pclusters of their own, small hot fragments first. Repeat to merge traces (files read by at least half of them count)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l profile-readahead -d 'With --profile: the read-around of the kernel that will read the image (its readahead, e.g. 128K): hot pieces are widened by half of it on each side. 0: pieces are exactly what the traces read' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l max-extent-bytes -d 'With -z: no pcluster decodes to more than this many bytes (rounded down to whole blocks), so a small read of very compressible data decodes little' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l offset -d 'Write the image this many bytes into IMAGE (the bytes before it are zeros); readers take the same `--offset`, the kernel a loop device\'s (`mount -o loop,offset=N`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l file-contexts -d 'Label every file by its path (under --mount-point) from this SELinux file_contexts file: the last matching line wins, exact paths over regexes; labels from the source are dropped' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l fs-config-file -d 'Android\'s canned fs_config file: every file\'s owner, permission bits and capabilities by its path under --mount-point (lines `PATH UID GID MODE [capabilities=N]`); a file without a line is an error' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l product-out -d 'Android\'s product_out directory: accepted with --fs-config-file, which does not use it (as in mkfs.erofs); Android\'s built-in fs_config tables, which do, are not implemented' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l block-list-file -d 'Android\'s block list: write to FILE a line for every regular file whose data takes blocks of the image, `/MOUNT_POINT/PATH` and its blocks (`A` or `A-B`, from the image\'s first block), as mkfs.erofs 1.8 built for Android does. Without --mount-point nothing is listed (the file is written empty), as there' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l blobdev -d 'With --chunksize: write the chunks of chunk-based files to this file, the image\'s extra device (created or replaced; readers take it as `--device FILE`, the kernel as `-o device=FILE`)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l root-xattr-isize -d 'Make the root directory\'s inline xattr area at least this many bytes (16 to 65532), zero-filled room for xattrs added later' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l dsunit -d 'Start every file\'s data at a multiple of this many blocks (a RAID stripe unit, say); 0 or 1: anywhere' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l base -d 'Rebuild from a previous image: every file whose bytes are unchanged (compared in full with what OLD decodes to) takes its compressed pclusters from OLD instead of being compressed again, when OLD was compressed with this build\'s options (checked on samples). The image is complete and self-contained; the summary says what was reused' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l incremental -d 'Put SOURCE over the image already at IMAGE and append only what changed: unchanged files keep their inodes and data, every byte of the image outside its superblock block stays as it was. MODE `data` (the default) takes file data from SOURCE; `rvsp` (with --tar) reserves the files\' blocks filled with zeros. See docs/incremental.md' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l verity-salt -d 'The tree\'s salt (hex). Default: derived from the image\'s first block and size, so the same build always gives the same tree' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l aufs -d 'With --tar: turn aufs whiteouts (.wh.NAME, .wh..wh..opq) into overlayfs ones'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l mkfs-time -d 'With -T: use the timestamp as build time only; keep file mtimes'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l ignore-mtime -d 'Ignore file mtimes: every file gets the build time'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l all-root -d 'Make every file owned by root (uid 0, gid 0)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l hard-dereference -d 'Store every hard link as an inode of its own'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l quiet -d 'Print nothing but errors'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l json -d 'Print the summary as JSON'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l timings -d 'Print where the build\'s time went: wall and CPU seconds and cores used per phase (scan, plan, data, meta, sync), on standard error'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -l verity -d 'Append a dm-verity hash tree to the image (as `ferrofs verity` does: the image padded to 4 KiB, veritysetup\'s superblock, the tree; sha256, 4096-byte blocks), written and synced with the image; the summary gives its root hash and hash offset. Not with --incremental (which changes an image in place) or --blobdev (whose data the tree would not cover)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkfs" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l digest-store -d 'Copy every file whose data is not inline into this object store (PATH/xx/rest-of-digest), unless there already' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l min-version -d 'Lowest format version (default 0; 1 when the tree has whiteouts, if --max-version allows)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l max-version -d 'Highest format version (default 1)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l threads -d 'Threads reading files, computing digests and copying objects (default: 8 per core, 16 to 64: the work mostly waits for the disk). The image is the same for any number' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l use-epoch -d 'Make all mtimes zero'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l skip-devices -d 'Leave out block and character devices'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l skip-xattrs -d 'Store no xattrs'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l user-xattrs -d 'Store only user.* xattrs'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l print-digest -d 'Print the image\'s fs-verity digest'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l print-digest-only -d 'Print the image\'s fs-verity digest and write no image (no IMAGE)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l from-file -d 'SOURCE is a composefs dump file (`-`: standard input), not a directory'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -l json -d 'Print a JSON summary (on standard error when the image goes to standard output)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mkcomposefs" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l offset -d 'The image starts this many bytes into the file (`mkfs --offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l device -d 'Extra device (blob) files or URLs, in device-table order; without them, extra devices are expected concatenated to the image' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity -d 'Check every block read (metadata and data, the superblock included) against the dm-verity hash tree with this root hash (hex, as `ferrofs verity` and `veritysetup format` print it). A block that does not match is an integrity error naming it; a wrong root hash fails at once. The tree is appended to the image (where `ferrofs verity` puts it) unless given otherwise' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity-hash-file -d 'The tree is in this file (or URL), as `veritysetup format IMAGE FILE` writes it' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity-hash-offset -d 'The tree\'s verity superblock (or, with --verity-no-superblock, the tree) starts at this byte of the hash file, or of the image (`veritysetup --hash-offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity-salt -d 'With --verity-no-superblock: the tree\'s salt (hex; `-` for none)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity-data-block-size -d 'With --verity-no-superblock: the data block size' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity-hash-algorithm -d 'With --verity-no-superblock: the hash algorithm (sha256, sha512)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity-format -d 'With --verity-no-superblock: the hash type (veritysetup\'s --format): 1, its default, or 0, Chrome OS\'s' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l threads -d 'FUSE worker threads' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l cache-size -d 'Byte budget of the decoded-pcluster cache (e.g. 64M)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -s o -d 'Mount options: allow_other' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l prefetch-size -d 'Most file bytes prefetched per directory' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l trace -d 'Append every read (path, offset, length, in arrival order) to this file, for `mkfs --profile` and `dump --profile`' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l basedir -d 'Serve a composefs image as its overlay mount shows it, over this object store: file contents come from the objects the redirect xattrs name; whiteouts and overlayfs\'s own xattrs are hidden' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l platform -d 'For docker:// images: the platform chosen from an image index, OS/ARCH[/VARIANT] (default: this machine\'s, e.g. linux/amd64)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l insecure-registry -d 'Reach this registry (HOST[:PORT], as references name it) over plain HTTP; localhost and 127.0.0.1 always are. Repeatable' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l authfile -d 'Read registry credentials from FILE only (docker\'s config.json or containers\' auth.json format); default: $REGISTRY_AUTH_FILE, containers\' auth.json, then ~/.docker/config.json' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verity-no-superblock -d 'The tree has no verity superblock (`veritysetup format --no-superblock`): its parameters are the --verity-salt, --verity-data-block-size and --verity-hash-algorithm given (4096-byte hash blocks), covering the whole image (up to the hash offset when appended)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -s f -l foreground -d 'Stay in the foreground (default: detach once mounted)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l no-prefetch -d 'Do not prefetch. By default decoded data goes into the kernel\'s page cache in the background: the small files after the one being read in a listed directory, and the whole pcluster a small read decoded'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l verify-objects -d 'With --basedir: check each object\'s fs-verity digest against the image\'s metacopy xattr before serving a byte of it (a mismatch, or a missing digest, is EIO and logged)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -l insecure-lazy -d 'For a docker:// image: read layers that carry no dm-verity tree lazily too, unchecked (by default they are downloaded whole and checked against their digests first; layers with a tree, from `ferrofs convert --verity`, are always read lazily, every block checked)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand mount" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l erofs -d '`raw`: each layer an EROFS image; `zstd`: the image compressed whole as one zstd stream (containerd decompresses it on pull)' -r -f -a "raw\t''
zstd\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l preset -d 'As mkfs --preset, for every layer' -r -f -a "fast\t''
balanced\t''
dense\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -s z -d 'As mkfs -z, for every layer (containerd\'s --erofs-compressors)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -s C -d 'As mkfs -C (default with -z: 65536, containerd\'s)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l mkfs-options -d 'More `ferrofs mkfs` options for every layer, split at white space (containerd\'s --erofs-mkfs-options), e.g. "-Efragments,dedupe"' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l zstd-level -d 'zstd level of --erofs zstd' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l jobs -d 'Layers converted at once' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l layer-cache -d 'Also write each converted layer into containerd\'s layer content cache at DIR (DIR/sha256/XX/HEX.erofs keyed by the source layer\'s diff_id), as `ctr images build-erofs-cache` does' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l platform -d 'For docker:// images: the platform chosen from an image index, OS/ARCH[/VARIANT] (default: this machine\'s, e.g. linux/amd64)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l insecure-registry -d 'Reach this registry (HOST[:PORT], as references name it) over plain HTTP; localhost and 127.0.0.1 always are. Repeatable' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l authfile -d 'Read registry credentials from FILE only (docker\'s config.json or containers\' auth.json format); default: $REGISTRY_AUTH_FILE, containers\' auth.json, then ~/.docker/config.json' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l all-platforms -d 'Convert every platform of an index (default: only --platform\'s, or this machine\'s)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l noinline-data -d 'Keep file tails out of inodes, as containerd\'s converter does (-Enoinline_data); the default packs them inline (smaller, and every kernel with EROFS mounts it)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l verity -d 'Append a dm-verity tree to each EROFS layer (zero salt, sha256, 4096-byte blocks) and name it in the layer\'s annotations (org.erofs.dmverity.root_digest, .hash_offset, .block_size, as the EROFS image spec has them): `ferrofs mount docker://...` then reads the layer lazily, every block checked. With --layer-cache, each cached layer also gets its `.dmverity` sidecar (containerd\'s)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -l json -d 'Print a JSON summary'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand convert" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l device -d 'Extra device (blob) files or URLs, in device-table order; without them, extra devices are expected concatenated to the image' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l offset -d 'The image starts this many bytes into the file (`mkfs --offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity -d 'Check every block read (metadata and data, the superblock included) against the dm-verity hash tree with this root hash (hex, as `ferrofs verity` and `veritysetup format` print it). A block that does not match is an integrity error naming it; a wrong root hash fails at once. The tree is appended to the image (where `ferrofs verity` puts it) unless given otherwise' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity-hash-file -d 'The tree is in this file (or URL), as `veritysetup format IMAGE FILE` writes it' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity-hash-offset -d 'The tree\'s verity superblock (or, with --verity-no-superblock, the tree) starts at this byte of the hash file, or of the image (`veritysetup --hash-offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity-salt -d 'With --verity-no-superblock: the tree\'s salt (hex; `-` for none)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity-data-block-size -d 'With --verity-no-superblock: the data block size' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity-hash-algorithm -d 'With --verity-no-superblock: the hash algorithm (sha256, sha512)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity-format -d 'With --verity-no-superblock: the hash type (veritysetup\'s --format): 1, its default, or 0, Chrome OS\'s' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -s j -l jobs -d 'Threads reading and decoding file data (default: every core). Output and exit status are the same for any number' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l memory -d 'Most bytes of file data held in memory at once (each stored cluster is read and decoded once, in the order the image stores them)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l verity-no-superblock -d 'The tree has no verity superblock (`veritysetup format --no-superblock`): its parameters are the --verity-salt, --verity-data-block-size and --verity-hash-algorithm given (4096-byte hash blocks), covering the whole image (up to the hash offset when appended)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l no-data -d 'Check metadata only; do not decode file data'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l json -d 'Print the report as JSON'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -l remote-stats -d 'For an image read by URL or from S3: report the requests made and the body bytes received (a `remote` object in the JSON report, else a line on stderr)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand fsck" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l device -d 'Extra device (blob) files or URLs, in device-table order; without them, extra devices are expected concatenated to the image' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l offset -d 'The image starts this many bytes into the file (`mkfs --offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity -d 'Check every block read (metadata and data, the superblock included) against the dm-verity hash tree with this root hash (hex, as `ferrofs verity` and `veritysetup format` print it). A block that does not match is an integrity error naming it; a wrong root hash fails at once. The tree is appended to the image (where `ferrofs verity` puts it) unless given otherwise' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity-hash-file -d 'The tree is in this file (or URL), as `veritysetup format IMAGE FILE` writes it' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity-hash-offset -d 'The tree\'s verity superblock (or, with --verity-no-superblock, the tree) starts at this byte of the hash file, or of the image (`veritysetup --hash-offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity-salt -d 'With --verity-no-superblock: the tree\'s salt (hex; `-` for none)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity-data-block-size -d 'With --verity-no-superblock: the data block size' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity-hash-algorithm -d 'With --verity-no-superblock: the hash algorithm (sha256, sha512)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity-format -d 'With --verity-no-superblock: the hash type (veritysetup\'s --format): 1, its default, or 0, Chrome OS\'s' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l path -d 'Extract this directory of the image (symlinks followed): the target receives its contents and its metadata, as `cp -a PATH/. DIR` copies them from the kernel\'s mount (default: the root)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -s j -l jobs -d 'Threads reading and decoding file data (default: every core). Output and exit status are the same for any number' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l memory -d 'Most bytes of file data held in memory at once (each stored cluster is read and decoded once, in the order the image stores them)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l verity-no-superblock -d 'The tree has no verity superblock (`veritysetup format --no-superblock`): its parameters are the --verity-salt, --verity-data-block-size and --verity-hash-algorithm given (4096-byte hash blocks), covering the whole image (up to the hash offset when appended)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l no-owners -d 'Do not restore owners (default: restore when running as root)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l owners -d 'Restore owners even when not running as root (what the target refuses is reported)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l no-xattrs -d 'Do not restore extended attributes (as tar\'s and fsck.erofs\'s --no-xattrs)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l xattrs -d 'Restore extended attributes (the default)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -l json -d 'Print the summary as JSON'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand extract" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l device -d 'Extra device (blob) files or URLs, in device-table order; without them, extra devices are expected concatenated to the image' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l offset -d 'The image starts this many bytes into the file (`mkfs --offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity -d 'Check every block read (metadata and data, the superblock included) against the dm-verity hash tree with this root hash (hex, as `ferrofs verity` and `veritysetup format` print it). A block that does not match is an integrity error naming it; a wrong root hash fails at once. The tree is appended to the image (where `ferrofs verity` puts it) unless given otherwise' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity-hash-file -d 'The tree is in this file (or URL), as `veritysetup format IMAGE FILE` writes it' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity-hash-offset -d 'The tree\'s verity superblock (or, with --verity-no-superblock, the tree) starts at this byte of the hash file, or of the image (`veritysetup --hash-offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity-salt -d 'With --verity-no-superblock: the tree\'s salt (hex; `-` for none)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity-data-block-size -d 'With --verity-no-superblock: the data block size' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity-hash-algorithm -d 'With --verity-no-superblock: the hash algorithm (sha256, sha512)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity-format -d 'With --verity-no-superblock: the hash type (veritysetup\'s --format): 1, its default, or 0, Chrome OS\'s' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l verity-no-superblock -d 'The tree has no verity superblock (`veritysetup format --no-superblock`): its parameters are the --verity-salt, --verity-data-block-size and --verity-hash-algorithm given (4096-byte hash blocks), covering the whole image (up to the hash offset when appended)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s l -d 'Long format, as `ls -l`: mode, links, owner, group, size, date'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s R -d 'List subdirectories recursively'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s d -d 'List a directory itself, not its entries'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s i -d 'Print each entry\'s inode number (as the kernel numbers it)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s L -d 'Follow symbolic links: show what they point to'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s n -d 'Long format with numeric owners and groups'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s a -d 'Show entries whose names start with `.`, and `.` and `..`'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s A -d 'Show entries whose names start with `.`, but not `.` and `..`'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -l json -d 'Print the entries as a JSON array, one object each (path, name, type, mode, ino, nid, nlink, uid, gid, size, blocks, mtime, mtime_nsec, and rdev, target or xattrs where there are any); the entries and their order are those of the listing with the same options. A path, name, link target or xattr value that is not UTF-8 text is also given exactly, in hex (`path_hex`, `name_hex`, `target_hex`, `value_hex`)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand ls" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l device -d 'Extra device (blob) files or URLs, in device-table order; without them, extra devices are expected concatenated to the image' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l offset -d 'The image starts this many bytes into the file (`mkfs --offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity -d 'Check every block read (metadata and data, the superblock included) against the dm-verity hash tree with this root hash (hex, as `ferrofs verity` and `veritysetup format` print it). A block that does not match is an integrity error naming it; a wrong root hash fails at once. The tree is appended to the image (where `ferrofs verity` puts it) unless given otherwise' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity-hash-file -d 'The tree is in this file (or URL), as `veritysetup format IMAGE FILE` writes it' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity-hash-offset -d 'The tree\'s verity superblock (or, with --verity-no-superblock, the tree) starts at this byte of the hash file, or of the image (`veritysetup --hash-offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity-salt -d 'With --verity-no-superblock: the tree\'s salt (hex; `-` for none)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity-data-block-size -d 'With --verity-no-superblock: the data block size' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity-hash-algorithm -d 'With --verity-no-superblock: the hash algorithm (sha256, sha512)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity-format -d 'With --verity-no-superblock: the hash type (veritysetup\'s --format): 1, its default, or 0, Chrome OS\'s' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -s o -l output -d 'Write the archive to FILE (replaced atomically) instead of standard output' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l verity-no-superblock -d 'The tree has no verity superblock (`veritysetup format --no-superblock`): its parameters are the --verity-salt, --verity-data-block-size and --verity-hash-algorithm given (4096-byte hash blocks), covering the whole image (up to the hash offset when appended)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l no-sparse -d 'Write files with holes whole (zeros), as GNU tar does without --sparse; by default they are PAX sparse members (GNU tar --sparse\'s format 1.0), which GNU tar, bsdtar and Python\'s tarfile restore with their holes'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -l json -d 'Print a JSON summary (entries, file bytes, archive bytes) on standard error'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand export" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l device -d 'Extra device (blob) files or URLs, in device-table order; without them, extra devices are expected concatenated to the image' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l offset -d 'The image starts this many bytes into the file (`mkfs --offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity -d 'Check every block read (metadata and data, the superblock included) against the dm-verity hash tree with this root hash (hex, as `ferrofs verity` and `veritysetup format` print it). A block that does not match is an integrity error naming it; a wrong root hash fails at once. The tree is appended to the image (where `ferrofs verity` puts it) unless given otherwise' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity-hash-file -d 'The tree is in this file (or URL), as `veritysetup format IMAGE FILE` writes it' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity-hash-offset -d 'The tree\'s verity superblock (or, with --verity-no-superblock, the tree) starts at this byte of the hash file, or of the image (`veritysetup --hash-offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity-salt -d 'With --verity-no-superblock: the tree\'s salt (hex; `-` for none)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity-data-block-size -d 'With --verity-no-superblock: the data block size' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity-hash-algorithm -d 'With --verity-no-superblock: the hash algorithm (sha256, sha512)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity-format -d 'With --verity-no-superblock: the hash type (veritysetup\'s --format): 1, its default, or 0, Chrome OS\'s' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -l verity-no-superblock -d 'The tree has no verity superblock (`veritysetup format --no-superblock`): its parameters are the --verity-salt, --verity-data-block-size and --verity-hash-algorithm given (4096-byte hash blocks), covering the whole image (up to the hash offset when appended)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand cat" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l verity-old -d 'Check every block of OLD against the dm-verity tree appended to it, whose root hash this is (see `--verity` of fsck)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l verity-new -d 'The same for NEW' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l json -d 'Print JSON'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand diff" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l device -d 'Extra device (blob) files or URLs, in device-table order; without them, extra devices are expected concatenated to the image' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l offset -d 'The image starts this many bytes into the file (`mkfs --offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l cache-dir -d 'For an image (or device) given as an http:// or https:// URL: keep the fetched chunks in DIR, shared by later runs (default: a temporary directory removed at exit)' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l cache-dir-size -d 'Most bytes the cache directory may hold; the least recently used chunks are removed beyond it' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l http-timeout -d 'Per-request timeout of a URL\'s server: the longest wait to connect, for a response\'s headers, and for any read of its body' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l http-speed-limit -d 'Low-speed limit: a response body slower than this many bytes per second over --http-speed-time is abandoned (and retried); 0: none' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l http-speed-time -d 'The window of --http-speed-limit' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l http-deadline -d 'Total deadline of one request, its 5 attempts and their backoff included: the longest a request to a URL\'s server takes to fail (after such a failure the server is not asked for that long)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity -d 'Check every block read (metadata and data, the superblock included) against the dm-verity hash tree with this root hash (hex, as `ferrofs verity` and `veritysetup format` print it). A block that does not match is an integrity error naming it; a wrong root hash fails at once. The tree is appended to the image (where `ferrofs verity` puts it) unless given otherwise' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity-hash-file -d 'The tree is in this file (or URL), as `veritysetup format IMAGE FILE` writes it' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity-hash-offset -d 'The tree\'s verity superblock (or, with --verity-no-superblock, the tree) starts at this byte of the hash file, or of the image (`veritysetup --hash-offset`)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity-salt -d 'With --verity-no-superblock: the tree\'s salt (hex; `-` for none)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity-data-block-size -d 'With --verity-no-superblock: the data block size' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity-hash-algorithm -d 'With --verity-no-superblock: the hash algorithm (sha256, sha512)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity-format -d 'With --verity-no-superblock: the hash type (veritysetup\'s --format): 1, its default, or 0, Chrome OS\'s' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l path -d 'Show the inode at this path' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l nid -d 'Show the inode with this nid' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l profile -d 'Report what a cold replay of this trace touches: device blocks, pclusters, runs, decoded vs requested bytes' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l readahead -d 'With --profile: widen every read by the kernel\'s read-around, half of BYTES before and half after (e.g. 128K, the kernel\'s default readahead), to count what a kernel mount reads' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l no-hot-prefetch -d 'Do not fetch the hot ranges a `mkfs --profile` image names (its recorded start-up\'s data) up front'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l verity-no-superblock -d 'The tree has no verity superblock (`veritysetup format --no-superblock`): its parameters are the --verity-salt, --verity-data-block-size and --verity-hash-algorithm given (4096-byte hash blocks), covering the whole image (up to the hash offset when appended)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -l json -d 'Print JSON'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand dump" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l part-size -d 'Bytes per part of a multipart upload (5M to 5G); an image of at most this size goes up in one PUT. Grown for an image that would need more than 10000 parts' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l parallel -d 'Parts uploaded at once' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l part-delay-ms -d 'Milliseconds to wait before each part (tests interrupt uploads)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l s3-endpoint -d 'For s3:// URLs: the S3-compatible endpoint, http(s)://HOST[:PORT] (default: $AWS_ENDPOINT_URL, else AWS in --s3-region)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l s3-region -d 'For s3:// URLs: the region (default: $AWS_REGION, else $AWS_DEFAULT_REGION; us-east-1 with an endpoint)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l s3-profile -d 'For s3:// URLs: the profile of the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) whose keys sign (default: $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY/ $AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or default)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l s3-addressing -d 'For s3:// URLs: name the bucket in the path (ENDPOINT/BUCKET/KEY, the default with an endpoint) or in the host name (BUCKET.HOST/KEY, the default on AWS)' -r -f -a "path\t''
virtual\t''"
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l unsigned-payload -d 'Sign the image\'s bytes as UNSIGNED-PAYLOAD (as curl --aws-sigv4 does) instead of by their SHA-256: faster, but the server can no longer check every byte it stores against the signature (TLS still protects them in transit over https)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l json -d 'Print a JSON summary (bytes, parts, seconds, etag, and how many unfinished uploads of the key an interrupted push had left, which this one aborted)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -l unchecked-part-size -d 'Parts of any size (S3 wants 5 MiB at least; tests use small ones)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand push" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -l hash-file -d 'Write the tree (with its superblock) into this file instead; the image is left as it is' -r -F
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -l salt -d 'The salt (hex; `-` for none). Default: derived from the image\'s first block and size, so the same image always gets the same tree' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -l data-block-size -d 'Bytes per data block: 4096, or 512 (tar-index layers)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -l hash -d 'The hash algorithm: sha256 or sha512' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -l format -d 'The hash type, as veritysetup\'s --format: 1 (its default: the salt before each block) or 0 (Chrome OS\'s: the salt after it)' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -l offset -d 'The EROFS image starts this many bytes into the file (`mkfs --offset`); the tree covers the file from its first byte' -r
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -l json -d 'Print the result as JSON'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand verity" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand digest" -l json -d 'Print a JSON array of {"file", "digest"}'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand digest" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand completions" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand manpages" -s h -l help -d 'Print help'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "mkfs" -d 'Build an EROFS image from a directory tree'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "mkcomposefs" -d 'Build a composefs image (metadata only; file data in an object store named by fs-verity digests), byte for byte as mkcomposefs 1.0.8 builds it, with its command line: `ferrofs mkcomposefs [--digest-store DIR] SOURCE IMAGE`. The binary run as `mkcomposefs` (a symlink) is a drop-in for it'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "mount" -d 'Mount an image read-only through FUSE'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "convert" -d 'Make a container image EROFS-native, as containerd 2.4\'s `ctr images convert --erofs` does (each tar layer an EROFS image built by ferrofs), from docker:// or oci: to docker:// or oci:, and/or into containerd\'s layer content cache (--layer-cache)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "fsck" -d 'Check every inode, directory entry and pcluster of an image. Exit status 1 on damage (what makes the kernel return wrong data or errors); warnings (a link count other than the entries naming the inode) are printed but leave it 0. 2: any other error; 3: the image, read by URL, changed on the server during the check'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "extract" -d 'Extract the image\'s tree into DIR (empty or absent). An xattr or owner the target refuses is reported (path, name, reason) and the extraction goes on; the exit status is then 1 (2: extraction failed)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "ls" -d 'List a directory (or show one entry) as coreutils\' `ls` lists the kernel\'s mount of the image'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "export" -d 'Write the image (or a directory of it) as a POSIX (PAX) tar archive, without root: the bytes GNU tar writes of the kernel\'s mount with --format=pax --sort=name --numeric-owner --xattrs --xattrs-include=\'*\' and --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime (`-C DIR .`). Hard links stay links, devices and fifos headers, sockets are left out (as GNU tar leaves them); files the image stores with holes are sparse members, as GNU tar --sparse writes them (--no-sparse: whole, as GNU tar without it)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "cat" -d 'Write a file\'s contents to standard output'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "diff" -d 'Show what changed between two images: paths added, removed and changed (and what about them), and how many image blocks differ on disk. Exit status 0 when the trees are the same, 1 when not'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "dump" -d 'Describe the superblock, one inode, or whole-image statistics'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "push" -d 'Upload a finished image to S3 (s3://BUCKET/KEY), atomically: the object appears only once it is whole; a failed or interrupted upload is aborted and leaves nothing behind. Exit status 130 (SIGINT) or 143 (SIGTERM) when interrupted'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "verity" -d 'Add a dm-verity hash tree to an image (appended, or in a separate hash file) and print its root hash: what `--verity` of the reading commands and `veritysetup verify` check it with'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "digest" -d 'Print files\' fs-verity digests (sha256, 4 KiB blocks), as `fsverity digest` prints them'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "completions" -d 'Print a shell completion script (e.g. `ferrofs completions bash > /etc/bash_completion.d/ferrofs`)'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "manpages" -d 'Write the man pages (ferrofs.1 and one per command) into DIR'
complete -c ferrofs -n "__fish_ferrofs_using_subcommand help; and not __fish_seen_subcommand_from mkfs mkcomposefs mount convert fsck extract ls export cat diff dump push verity digest completions manpages help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
