//! Every subcommand that prints ends as coreutils' `ls` and `cat` do when
//! the reader of its output goes away (`ferrofs dump IMAGE | head`):
//! killed by SIGPIPE, nothing on stderr, no panic (which would exit 101).
//! The reader's end of the pipe is closed before the program starts, so
//! every write it makes fails with EPIPE.

use std::fs;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use crate::FERROFS;
use ferrofs_testkit::work_dir;
const SIGPIPE: i32 = 13;

/// Runs `cmd` with its stdout a pipe whose read end is already closed;
/// returns how it ended (a description) if that was not death by SIGPIPE
/// with an empty stderr.
fn dies_of_sigpipe(cmd: &mut Command) -> Result<(), String> {
    let (reader, writer) = std::io::pipe().map_err(|e| e.to_string())?;
    drop(reader);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if status.signal() == Some(SIGPIPE) && err.is_empty() {
        Ok(())
    } else {
        Err(format!("{status}, stderr {err:?}"))
    }
}

#[test]
fn printing_commands_end_quietly_on_a_closed_pipe() {
    let work = work_dir!("closed_pipe");
    let src = work.join("tree");
    fs::create_dir_all(src.join("dir")).unwrap();
    for i in 0..200 {
        fs::write(src.join("dir").join(format!("f{i}")), format!("{i}\n")).unwrap();
    }
    fs::write(src.join("big"), vec![7u8; 1 << 20]).unwrap();
    let img = work.join("a.img");
    let st = Command::new(FERROFS)
        .args(["mkfs", "--quiet", "--chunksize", "4096"])
        .arg(&img)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    // A damaged copy, so fsck has problems to print too.
    let mut bytes = fs::read(&img).unwrap();
    let n = bytes.len();
    bytes[n - 4096..].fill(0xa5);
    let bad = work.join("bad.img");
    fs::write(&bad, bytes).unwrap();
    let link = work.join("mkfs.erofs");
    std::os::unix::fs::symlink(FERROFS, &link).unwrap();

    let img_s = img.to_string_lossy().into_owned();
    let bad_s = bad.to_string_lossy().into_owned();
    let out = work.join("out.img").to_string_lossy().into_owned();
    let src_s = src.to_string_lossy().into_owned();
    let root_nid = ferrofs::Image::open_path(&img)
        .unwrap()
        .root_nid()
        .to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["fsck", &img_s],
        vec!["fsck", "--json", &img_s],
        vec!["fsck", &bad_s],
        vec!["fsck", "--json", &bad_s],
        vec!["dump", &img_s],
        vec!["dump", "--json", &img_s],
        vec!["dump", "--path", "/big", &img_s],
        vec!["dump", "--json", "--nid", &root_nid, &img_s],
        vec!["ls", &img_s, "dir"],
        vec!["ls", "-l", &img_s, "dir"],
        vec!["cat", &img_s, "big"],
        vec!["mkfs", &out, &src_s],
        vec!["mkfs", "--json", &out, &src_s],
    ];
    let mut failures = Vec::new();
    for args in &cases {
        if let Err(e) = dies_of_sigpipe(Command::new(FERROFS).args(args)) {
            failures.push(format!("ferrofs {args:?}: {e}"));
        }
    }
    // The drop-in prints its summary to stdout as well.
    if let Err(e) = dies_of_sigpipe(Command::new(&link).arg(&out).arg(&src)) {
        failures.push(format!("mkfs.erofs: {e}"));
    }
    ferrofs_testkit::tmp::finish(&work, &failures);
}
