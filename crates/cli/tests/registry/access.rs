//! Who may do what: the registry with HTTP Basic (htpasswd) and with
//! Bearer tokens; credentials from `--authfile`, refused ones reported
//! without their secret, pushes refused to anonymous and read-only users
//! tagging nothing, blobs already present or mountable not sent again.

use std::process::Command;

use ferrofs_testkit::registry::{registry_bin_dir, Access, CncfRegistry, READER, WRITER};

use super::{err, make_layout, ok, s, skip_unless_ready, skopeo_push};

#[test]
fn basic_auth_takes_credentials_from_the_authfile() {
    skip_unless_ready!();
    let work = ferrofs_testkit::work_dir!("registry_basic");
    let layout = work.join("L");
    make_layout(&layout);
    let reg = CncfRegistry::start(&registry_bin_dir().unwrap(), &work, Access::Basic);
    skopeo_push(&layout, &reg, "private/app", Some(WRITER));
    let src = format!("docker://{}/private/app:v1", reg.addr);
    let img = s(&work.join("a.img"));
    let e = err(&["mkfs", &img, &src]);
    assert!(
        e.contains("no credentials") || e.contains("none were found"),
        "{e}"
    );
    let writer = work.join("writer.json");
    reg.write_auth(&writer, WRITER);
    ok(&["mkfs", &img, &src, "--authfile", &s(&writer)]);
    ok(&["fsck", &img]);
    let wrong = work.join("wrong.json");
    reg.write_auth(&wrong, ("writer", "not-the-password"));
    let e = err(&["mkfs", &img, &src, "--authfile", &s(&wrong)]);
    assert!(
        e.contains("refused") && !e.contains("not-the-password"),
        "{e}"
    );
    // htpasswd users may all push (the registry has no per-user rights
    // there; the token test checks a refused push).
    let dst = format!("docker://{}/private/app:erofs", reg.addr);
    ok(&["convert", &src, &dst, "--authfile", &s(&writer)]);
    ferrofs_testkit::tmp::finish(&work, &Vec::<String>::new());
}

#[test]
fn bearer_tokens_are_fetched_per_scope() {
    skip_unless_ready!();
    let work = ferrofs_testkit::work_dir!("registry_token");
    let layout = work.join("L");
    make_layout(&layout);
    let reg = CncfRegistry::start(&registry_bin_dir().unwrap(), &work, Access::Token);
    let writer = work.join("writer.json");
    reg.write_auth(&writer, WRITER);
    let out = Command::new("skopeo")
        .args(["copy", "--dest-tls-verify=false", "--dest-authfile"])
        .arg(&writer)
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{}/tok/app:v1", reg.addr))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "skopeo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let src = format!("docker://{}/tok/app:v1", reg.addr);
    // Anonymous pulls get a pull token.
    let img = s(&work.join("anon.img"));
    ok(&["mkfs", &img, &src]);
    // Anonymous pushes are refused; the writer's go through (a token
    // for pull,push on the repository).
    let dst = format!("docker://{}/tok/app:erofs", reg.addr);
    let e = err(&["convert", &src, &dst]);
    assert!(e.contains("refused"), "{e}");
    let reader = work.join("reader.json");
    reg.write_auth(&reader, READER);
    let e = err(&["convert", &src, &dst, "--authfile", &s(&reader)]);
    assert!(e.contains("refused"), "{e}");
    // No tag appeared.
    let e = err(&["mkfs", &img, &dst]);
    assert!(
        e.contains("no such manifest") || e.contains("404"),
        "a tag appeared: {e}"
    );
    let j = ok(&["convert", &src, &dst, "--authfile", &s(&writer), "--json"]);
    assert!(j.contains("\"blobs_uploaded\": 3"), "{j}");
    // Again: every blob is there already.
    let j = ok(&["convert", &src, &dst, "--authfile", &s(&writer), "--json"]);
    assert!(j.contains("\"blobs_present\": 3"), "{j}");
    // Into another repository: the config and layers are mounted, not sent.
    let other = format!("docker://{}/tok/other:erofs", reg.addr);
    let j = ok(&["convert", &src, &other, "--authfile", &s(&writer), "--json"]);
    assert!(
        j.contains("\"blobs_mounted\": 3") && j.contains("\"blobs_uploaded\": 0"),
        "{j}"
    );
    let wrong = work.join("wrong.json");
    reg.write_auth(&wrong, ("writer", "nope"));
    let e = err(&["mkfs", &img, &src, "--authfile", &s(&wrong)]);
    assert!(
        e.contains("token service") && e.contains("refused") && !e.contains("nope"),
        "{e}"
    );
    assert!(reg.token_refusals() >= 1);
    // What the EROFS-native image holds reads back through mkfs.
    let back = s(&work.join("back.img"));
    let e = err(&["mkfs", &back, &dst]);
    assert!(
        e.contains("unsupported media type"),
        "EROFS layers are not tar layers: {e}"
    );
    ferrofs_testkit::tmp::finish(&work, &Vec::<String>::new());
}
