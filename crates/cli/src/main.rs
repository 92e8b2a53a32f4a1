//! The `ferrofs` command: argument parsing, progress and printing over the
//! reader and check libraries. No format logic lives here.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

mod cat;
mod composefs;
mod convert;
mod diff;
mod digest;
mod dropin;
mod dump;
mod export;
mod extract;
mod fsck;
mod hotrecord;
mod lazy;
mod ls;
mod manual;
mod mkfs;
mod mount;
mod out;
mod push;
mod rebuild;
mod registry;
mod size;
mod source;
mod summary;
mod verified;
mod verity;

use anyhow::Result;
use clap::{Parser, Subcommand};
use ferrofs::{Image, OpenOptions};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser)]
#[command(
    name = "ferrofs",
    version,
    about = "Build, check, extract, inspect and mount EROFS images"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct ImageArgs {
    /// The EROFS image: a file, an http:// or https:// URL, or an
    /// s3://BUCKET/KEY object (read with range requests, fetching only
    /// what is needed).
    image: PathBuf,
    /// Extra device (blob) files or URLs, in device-table order; without
    /// them, extra devices are expected concatenated to the image.
    #[arg(long = "device", value_name = "PATH")]
    devices: Vec<PathBuf>,
    /// The image starts this many bytes into the file (`mkfs --offset`).
    #[arg(long, value_name = "BYTES", default_value = "0", value_parser = size::parse_u64)]
    offset: u64,
    #[command(flatten)]
    remote: source::RemoteArgs,
    #[command(flatten)]
    verity: verified::VerityArgs,
}

/// How the commands that read every file's data run their data pass.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct DataArgs {
    /// Threads reading and decoding file data (default: every core).
    /// Output and exit status are the same for any number.
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    jobs: Option<usize>,
    /// Most bytes of file data held in memory at once (each stored cluster
    /// is read and decoded once, in the order the image stores them).
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = crate::size::parse)]
    memory: usize,
}

impl DataArgs {
    fn jobs(&self) -> usize {
        self.jobs
            .filter(|&j| j > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Build an EROFS image from a directory tree.
    Mkfs(Box<mkfs::MkfsArgs>),
    /// Build a composefs image (metadata only; file data in an object
    /// store named by fs-verity digests), byte for byte as mkcomposefs
    /// 1.0.8 builds it, with its command line: `ferrofs mkcomposefs
    /// [--digest-store DIR] SOURCE IMAGE`. The binary run as `mkcomposefs`
    /// (a symlink) is a drop-in for it.
    Mkcomposefs(Box<composefs::MkcomposefsArgs>),
    /// Mount an image read-only through FUSE.
    Mount(mount::MountArgs),
    /// Make a container image EROFS-native, as containerd 2.4's `ctr
    /// images convert --erofs` does (each tar layer an EROFS image built by
    /// ferrofs), from docker:// or oci: to docker:// or oci:, and/or into
    /// containerd's layer content cache (--layer-cache).
    Convert(Box<convert::ConvertArgs>),
    /// Check every inode, directory entry and pcluster of an image. Exit
    /// status 1 on damage (what makes the kernel return wrong data or
    /// errors); warnings (a link count other than the entries naming the
    /// inode) are printed but leave it 0. 2: any other error; 3: the
    /// image, read by URL, changed on the server during the check.
    Fsck {
        #[command(flatten)]
        img: ImageArgs,
        /// Check metadata only; do not decode file data.
        #[arg(long)]
        no_data: bool,
        #[command(flatten)]
        data: DataArgs,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// For an image read by URL or from S3: report the requests made
        /// and the body bytes received (a `remote` object in the JSON
        /// report, else a line on stderr).
        #[arg(long)]
        remote_stats: bool,
    },
    /// Extract the image's tree into DIR (empty or absent). An xattr or
    /// owner the target refuses is reported (path, name, reason) and the
    /// extraction goes on; the exit status is then 1 (2: extraction failed).
    Extract {
        #[command(flatten)]
        img: ImageArgs,
        /// Target directory.
        dir: PathBuf,
        /// Extract this directory of the image (symlinks followed): the
        /// target receives its contents and its metadata, as `cp -a PATH/.
        /// DIR` copies them from the kernel's mount (default: the root).
        #[arg(long, value_name = "PATH")]
        path: Option<OsString>,
        /// Do not restore owners (default: restore when running as root).
        #[arg(long, overrides_with = "owners")]
        no_owners: bool,
        /// Restore owners even when not running as root (what the target
        /// refuses is reported).
        #[arg(long, overrides_with = "no_owners")]
        owners: bool,
        /// Do not restore extended attributes (as tar's and fsck.erofs's
        /// --no-xattrs).
        #[arg(long, overrides_with = "xattrs")]
        no_xattrs: bool,
        /// Restore extended attributes (the default).
        #[arg(long, overrides_with = "no_xattrs")]
        xattrs: bool,
        #[command(flatten)]
        data: DataArgs,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a directory (or show one entry) as coreutils' `ls` lists the
    /// kernel's mount of the image.
    Ls(ls::LsArgs),
    /// Write the image (or a directory of it) as a POSIX (PAX) tar
    /// archive, without root: the bytes GNU tar writes of the kernel's
    /// mount with --format=pax --sort=name --numeric-owner --xattrs
    /// --xattrs-include='*' and
    /// --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime
    /// (`-C DIR .`). Hard links stay links, devices and fifos headers,
    /// sockets are left out (as GNU tar leaves them); files the image
    /// stores with holes are sparse members, as GNU tar --sparse writes
    /// them (--no-sparse: whole, as GNU tar without it).
    Export(Box<export::ExportArgs>),
    /// Write a file's contents to standard output.
    Cat {
        #[command(flatten)]
        img: ImageArgs,
        /// Paths inside the image, written one after the other (as `cat`
        /// concatenates). One that cannot be read is reported and the rest are
        /// still written; the exit status is then 2.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<OsString>,
    },
    /// Show what changed between two images: paths added, removed and
    /// changed (and what about them), and how many image blocks differ on
    /// disk. Exit status 0 when the trees are the same, 1 when not.
    Diff {
        /// The earlier image: a file, or an http:// or https:// URL.
        old: PathBuf,
        /// The later image: a file or a URL.
        new: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: source::RemoteArgs,
        /// Check every block of OLD against the dm-verity tree appended to
        /// it, whose root hash this is (see `--verity` of fsck).
        #[arg(long, value_name = "ROOT_HASH")]
        verity_old: Option<ferrofs::verity::RootHash>,
        /// The same for NEW.
        #[arg(long, value_name = "ROOT_HASH")]
        verity_new: Option<ferrofs::verity::RootHash>,
    },
    /// Describe the superblock, one inode, or whole-image statistics.
    Dump {
        #[command(flatten)]
        img: ImageArgs,
        /// Show the inode at this path.
        #[arg(long, conflicts_with = "nid")]
        path: Option<OsString>,
        /// Show the inode with this nid.
        #[arg(long)]
        nid: Option<u64>,
        /// Report what a cold replay of this trace touches: device blocks,
        /// pclusters, runs, decoded vs requested bytes.
        #[arg(long, value_name = "TRACE", conflicts_with_all = ["nid", "path"])]
        profile: Option<PathBuf>,
        /// With --profile: widen every read by the kernel's read-around,
        /// half of BYTES before and half after (e.g. 128K, the kernel's
        /// default readahead), to count what a kernel mount reads.
        #[arg(long, value_name = "BYTES", requires = "profile", default_value = "0", value_parser = crate::size::parse)]
        readahead: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Upload a finished image to S3 (s3://BUCKET/KEY), atomically: the
    /// object appears only once it is whole; a failed or interrupted
    /// upload is aborted and leaves nothing behind. Exit status 130 (SIGINT)
    /// or 143 (SIGTERM) when interrupted.
    Push(push::PushArgs),
    /// Add a dm-verity hash tree to an image (appended, or in a separate
    /// hash file) and print its root hash: what `--verity` of the reading
    /// commands and `veritysetup verify` check it with.
    Verity(verity::VerityArgs),
    /// Print files' fs-verity digests (sha256, 4 KiB blocks), as
    /// `fsverity digest` prints them.
    Digest(digest::DigestArgs),
    /// Print a shell completion script (e.g. `ferrofs completions bash >
    /// /etc/bash_completion.d/ferrofs`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (ferrofs.1 and one per command) into DIR.
    #[command(hide = true)]
    Manpages {
        /// Where the pages go.
        dir: PathBuf,
    },
}

fn open(args: &ImageArgs) -> Result<Image> {
    source::open_image(
        &args.image,
        &args.devices,
        args.offset,
        (&args.remote, &args.verity),
        OpenOptions::default(),
    )
}

fn progress(len_hint: Option<u64>) -> ProgressBar {
    let pb = ProgressBar::new(len_hint.unwrap_or(0));
    pb.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {binary_bytes} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb
}

fn main() -> ExitCode {
    if dropin::invoked_as_mkfs() {
        return dropin::main();
    }
    if composefs::invoked_as_mkcomposefs() {
        return composefs::dropin_main();
    }
    let cli = Cli::parse();
    let result = run(cli);
    source::stop_prefetches();
    out::finish("ferrofs", result, 2)
}

/// An error and its causes on one line, `what: why: ...`, leaving out a
/// cause whose text the message already carries (the library errors
/// quote their source).
pub(crate) fn report(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Mkfs(a) => mkfs::mkfs(&a),
        Command::Mkcomposefs(a) => composefs::mkcomposefs(&a),
        Command::Diff {
            old,
            new,
            json,
            remote,
            verity_old,
            verity_new,
        } => {
            let verity = [verity_old, verity_new].map(verified::VerityArgs::appended);
            diff::run((&old, &new), json, &remote, &verity)
        }
        Command::Mount(a) => mount::run(&a),
        Command::Convert(a) => convert::run(&a),
        Command::Fsck {
            img,
            no_data,
            data,
            json,
            remote_stats,
        } => fsck::fsck(&img, no_data, &data, (json, remote_stats)),
        Command::Extract {
            img,
            dir,
            path,
            no_owners,
            owners,
            no_xattrs,
            xattrs: _,
            data,
            json,
        } => extract::extract(
            &img,
            (&dir, path.as_deref()),
            (owners, no_owners),
            no_xattrs,
            &data,
            json,
        ),
        Command::Ls(a) => ls::run(&a),
        Command::Cat { img, paths } => cat::cat(&img, &paths),
        Command::Export(a) => export::run(&a),
        Command::Dump {
            img,
            path,
            nid,
            profile,
            readahead,
            json,
        } => dump::dump(&img, (path, nid, profile), readahead, json),
        Command::Push(a) => push::run(&a),
        Command::Verity(a) => verity::run(&a),
        Command::Digest(a) => digest::run(&a),
        Command::Completions { shell } => {
            manual::completions(shell);
            Ok(ExitCode::SUCCESS)
        }
        Command::Manpages { dir } => manual::manpages(&dir).map(|()| ExitCode::SUCCESS),
    }
}
