//! Pushes that go wrong: a convert interrupted by a signal, uploads
//! whose connections are killed, manifests that never arrive. A tag moves
//! only when everything is there; nothing is left locally.

use std::process::Command;

use ferrofs_testkit::registry::{registry_bin_dir, Access, CncfRegistry};

use super::{err, leftovers, make_layout, ok, s, skip_unless_ready, FERROFS};

#[test]
fn an_interrupted_convert_moves_no_tag_and_leaves_nothing() {
    skip_unless_ready!();
    let work = ferrofs_testkit::work_dir!("registry_interrupted");
    let layout = work.join("L");
    make_layout(&layout);
    let reg = CncfRegistry::start(&registry_bin_dir().unwrap(), &work, Access::Open);
    // Every request held 150 ms: the uploads take seconds.
    let proxy = ferrofs_testkit::proxy::DelayProxy::start(
        0,
        reg.addr.parse().unwrap(),
        std::time::Duration::from_millis(150),
    )
    .unwrap();
    for signal in ["TERM", "INT"] {
        // A repository of its own: nothing there yet.
        let dst = format!(
            "docker://127.0.0.1:{}/slow/{}:erofs",
            proxy.port,
            signal.to_lowercase()
        );
        let child = Command::new(FERROFS)
            .args(["convert", &format!("oci:{}:v1", layout.display()), &dst])
            .current_dir(&work)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(900));
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{signal}: the convert finished before the signal"
        );
        assert!(e.contains("interrupted"), "{signal}: {e}");
        let e = err(&["mkfs", &s(&work.join("x.img")), &dst]);
        assert!(
            e.contains("no such manifest") || e.contains("404"),
            "{signal}: a tag appeared: {e}"
        );
        assert!(
            leftovers(&work).is_empty(),
            "{signal}: left {:?}",
            leftovers(&work)
        );
    }
    ferrofs_testkit::tmp::finish(&work, &Vec::<String>::new());
}

#[test]
fn pushes_survive_killed_connections_or_tag_nothing() {
    use ferrofs_testkit::faults::{Fault, FaultProxy};
    use std::sync::atomic::{AtomicUsize, Ordering};
    skip_unless_ready!();
    let work = ferrofs_testkit::work_dir!("registry_faults");
    let layout = work.join("L");
    make_layout(&layout);
    let reg = CncfRegistry::start(&registry_bin_dir().unwrap(), &work, Access::Open);
    let src = format!("oci:{}:v1", layout.display());
    // The first blob upload's connection is killed as its body goes out;
    // a retry puts it.
    let puts = std::sync::Arc::new(AtomicUsize::new(0));
    let p2 = puts.clone();
    let proxy = FaultProxy::start(reg.addr.parse().unwrap(), move |r| {
        if r.method == "PUT" && r.has_query("digest") && p2.fetch_add(1, Ordering::SeqCst) == 0 {
            Fault::DropRequest
        } else {
            Fault::Pass
        }
    })
    .unwrap();
    let dst = format!("docker://127.0.0.1:{}/faults/app:erofs", proxy.port);
    ok(&["convert", &src, &dst]);
    assert!(!proxy.dealt().is_empty(), "no connection was killed");
    let img = s(&work.join("back.img"));
    let e = err(&["mkfs", &img, &dst]);
    assert!(
        e.contains("unsupported media type"),
        "the EROFS-native image is there: {e}"
    );
    // Every manifest upload killed: the convert fails, no tag appears.
    let proxy = FaultProxy::start(reg.addr.parse().unwrap(), |r| {
        if r.method == "PUT" && r.target.contains("/manifests/") {
            Fault::DropRequest
        } else {
            Fault::Pass
        }
    })
    .unwrap();
    let dst = format!("docker://127.0.0.1:{}/faults/other:erofs", proxy.port);
    let e = err(&["convert", &src, &dst]);
    assert!(e.contains("other"), "{e}");
    let e = err(&[
        "mkfs",
        &img,
        &format!("docker://{}/faults/other:erofs", reg.addr),
    ]);
    assert!(
        e.contains("no such manifest") || e.contains("404"),
        "a tag appeared: {e}"
    );
    assert!(leftovers(&work).is_empty(), "left {:?}", leftovers(&work));
    ferrofs_testkit::tmp::finish(&work, &Vec::<String>::new());
}
