//! The delaying proxy of `ferrofs_testkit::proxy` as a program, for
//! benchmarks: `delay-proxy PORT UPSTREAM_ADDR DELAY_MS` proxies
//! 127.0.0.1:PORT to UPSTREAM_ADDR (e.g. 127.0.0.1:8080), holding every
//! request DELAY_MS milliseconds, until killed. `curl
//! 127.0.0.1:PORT/.proxy-stats` prints the requests and body bytes
//! forwarded so far.

use std::time::Duration;

use ferrofs_testkit::proxy::DelayProxy;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [port, upstream, ms] = args.as_slice() else {
        eprintln!("usage: delay-proxy PORT UPSTREAM_ADDR DELAY_MS");
        std::process::exit(2);
    };
    let (Ok(port), Ok(upstream), Ok(ms)) = (port.parse(), upstream.parse(), ms.parse()) else {
        eprintln!("delay-proxy: bad PORT, UPSTREAM_ADDR or DELAY_MS");
        std::process::exit(2);
    };
    match DelayProxy::start(port, upstream, Duration::from_millis(ms)) {
        Ok(p) => {
            println!("{}", p.port);
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            eprintln!("delay-proxy: 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    }
}
