//! Standard output for every subcommand that prints, and what happens when
//! its reader goes away (`ferrofs dump IMAGE | head`).
//!
//! The Rust runtime ignores SIGPIPE, so a write to a closed pipe comes back
//! as an `EPIPE` error (and `println!` would panic on it). The commands
//! print through [`stdout`] with `writeln!` instead and pass the error up;
//! [`finish`] then ends the process as coreutils' `ls` and `cat` end when
//! their reader closes the pipe: killed by SIGPIPE (a shell reports status
//! 141), with nothing written to stderr.

use std::io::{self, Write};
use std::process::ExitCode;

/// A locked, buffered standard output. Flush it (or let [`finish`] see
/// the error) before returning, so a late `EPIPE` is not lost in a drop.
pub(crate) fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::new(io::stdout().lock())
}

/// Whether `e` (or one of its causes) is a write to a closed pipe.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Ends the process as if SIGPIPE had its default action: the signal's
/// default handler is restored and the signal raised. Should that not end
/// the process, it exits quietly with the status a shell shows for it.
pub(crate) fn die_of_sigpipe() -> ExitCode {
    let _ = io::stderr().flush();
    let _ = signal_hook::low_level::emulate_default_handler(signal_hook::consts::SIGPIPE);
    ExitCode::from(128 + 13)
}

/// The exit status for a command's result: a closed pipe ends the
/// process quietly ([`die_of_sigpipe`]); any other error is printed as
/// `PROGRAM: what: why` and gives `status`.
pub(crate) fn finish(program: &str, res: anyhow::Result<ExitCode>, status: u8) -> ExitCode {
    match res {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => die_of_sigpipe(),
        Err(e) => {
            eprintln!("{program}: {}", crate::report(&e));
            ExitCode::from(status)
        }
    }
}
