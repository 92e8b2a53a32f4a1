//! `ferrofs dump`: the superblock and statistics of an image, one inode
//! and its extent map, or what a profile's replay reads; as text or JSON.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use ferrofs::format::Nid;
use serde_json::Value;

use crate::{hotrecord, open, out, ImageArgs};

/// `ferrofs dump`: the superblock and statistics, one inode (by path or
/// nid), or a trace replayed on the image (`--profile`).
pub(crate) fn dump(
    img: &ImageArgs,
    (path, nid, profile): (Option<OsString>, Option<u64>, Option<PathBuf>),
    readahead: usize,
    json: bool,
) -> Result<ExitCode> {
    let image = open(img)?;
    let v = if let Some(t) = profile {
        let reads = hotrecord::read_trace(&t)?;
        ferrofs_check::dump::profile(&image, &reads, readahead as u64)
    } else if let Some(p) = path {
        let inode = image.raw().lookup_path(p.as_bytes(), false)?;
        ferrofs_check::dump::inode(&image, &inode)
    } else if let Some(n) = nid {
        let inode = image.raw().inode(Nid(n))?;
        ferrofs_check::dump::inode(&image, &inode)
    } else {
        serde_json::json!({
            "superblock": ferrofs_check::dump::superblock(&image),
            "statistics": ferrofs_check::dump::statistics(&image),
        })
    };
    let mut out = out::stdout();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        print_text(&mut out, &v, 0)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The dump as indented `key: value` lines. An array of objects becomes a
/// list of `-` items; an item whose values are all scalars (an extent
/// record) fits on one line.
fn print_text(out: &mut impl Write, v: &Value, indent: usize) -> io::Result<()> {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                match val {
                    Value::Object(_) => {
                        writeln!(out, "{pad}{k}:")?;
                        print_text(out, val, indent + 2)?;
                    }
                    Value::Array(a) if a.iter().any(|x| x.is_object()) => {
                        writeln!(out, "{pad}{k}:")?;
                        for item in a {
                            match item {
                                Value::Object(f)
                                    if f.values().all(|x| !x.is_object() && !x.is_array()) =>
                                {
                                    let line: Vec<String> = f
                                        .iter()
                                        .map(|(k, x)| format!("{k} {}", scalar(x)))
                                        .collect();
                                    writeln!(out, "{pad}  - {}", line.join(", "))?;
                                }
                                _ => {
                                    writeln!(out, "{pad}  -")?;
                                    print_text(out, item, indent + 4)?;
                                }
                            }
                        }
                    }
                    _ => writeln!(out, "{pad}{k}: {}", scalar(val))?,
                }
            }
        }
        other => writeln!(out, "{pad}{}", scalar(other))?,
    }
    Ok(())
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}
