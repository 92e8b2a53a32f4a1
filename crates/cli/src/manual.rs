//! The command's manual outside `--help`: man pages (one for `ferrofs` and
//! one per subcommand, `ferrofs-mkfs(1)` ...) and shell completions, both
//! generated from the same clap definitions `--help` prints, so they
//! cannot drift. `docs/man/` holds the generated pages (a test checks they
//! are current; `ferrofs manpages docs/man` regenerates them).

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

/// Writes `ferrofs.1` and `ferrofs-SUBCOMMAND.1` for every subcommand
/// into `dir`.
pub fn manpages(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cmd = crate::Cli::command();
    clap_mangen::generate_to(cmd, dir).with_context(|| format!("writing {}", dir.display()))
}

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(shell, &mut cmd, "ferrofs", &mut std::io::stdout());
}
