//! Where a build's time goes: wall and CPU time (all the process's
//! threads) of each phase, for `mkfs --timings` and `--json`. CPU time is
//! read from `/proc/self/stat` (10 ms ticks); where that is missing it is
//! reported as zero.

use std::time::{Duration, Instant};

/// One phase of a build.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Phase {
    /// `scan`, `plan`, `data`, `dirs`, `meta`, `sync`.
    pub name: &'static str,
    /// Wall-clock time the phase took (`wall_s` in seconds).
    #[serde(rename = "wall_s", serialize_with = "seconds")]
    pub wall: Duration,
    /// CPU time of every thread of the process during the phase (`cpu_s`).
    #[serde(rename = "cpu_s", serialize_with = "seconds")]
    pub cpu: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Phase {
    /// CPU time over wall time: the cores the phase kept busy on average.
    pub fn cores(&self) -> f64 {
        match self.wall.as_secs_f64() {
            w if w > 0.0 => self.cpu.as_secs_f64() / w,
            _ => 0.0,
        }
    }
}

/// Measures consecutive phases: each [`Clock::lap`] closes the phase that
/// began at the previous lap (or at [`Clock::start`]).
#[derive(Debug)]
pub(crate) struct Clock {
    wall: Instant,
    cpu: Duration,
    phases: Vec<Phase>,
}

impl Clock {
    pub(crate) fn start() -> Self {
        Self {
            wall: Instant::now(),
            cpu: process_cpu(),
            phases: Vec::new(),
        }
    }

    /// Ends the current phase, naming it, and starts the next.
    pub(crate) fn lap(&mut self, name: &'static str) {
        let (wall, cpu) = (Instant::now(), process_cpu());
        self.phases.push(Phase {
            name,
            wall: wall.duration_since(self.wall),
            cpu: cpu.saturating_sub(self.cpu),
        });
        (self.wall, self.cpu) = (wall, cpu);
    }

    /// The phases measured so far.
    pub(crate) fn take(&mut self) -> Vec<Phase> {
        std::mem::take(&mut self.phases)
    }
}

/// User + system CPU time of the whole process so far.
fn process_cpu() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // The command name (field 2) may hold spaces; fields after its
    // closing parenthesis are plain numbers: utime and stime are fields
    // 14 and 15, i.e. the 12th and 13th after the state.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: u64 = rest
        .split_ascii_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    // Linux reports these in USER_HZ, 100 per second on every architecture
    // it runs on.
    Duration::from_millis(ticks.saturating_mul(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_count_the_process_cpu_and_the_wall_time() {
        let mut c = Clock::start();
        // Spin until the process has used 100 ms more CPU (other tests
        // share the process, so only a lower bound can be checked).
        let (t, c0) = (Instant::now(), process_cpu());
        let mut x = 0u64;
        while process_cpu() < c0 + Duration::from_millis(100)
            && t.elapsed() < Duration::from_secs(30)
        {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        c.lap("busy");
        std::thread::sleep(Duration::from_millis(200));
        c.lap("idle");
        let p = c.take();
        assert_eq!(
            p.iter().map(|p| p.name).collect::<Vec<_>>(),
            ["busy", "idle"]
        );
        assert!(p[0].cpu >= Duration::from_millis(100), "{:?}", p[0]);
        assert!(p[0].cores() > 0.0);
        assert!(p[1].wall >= Duration::from_millis(200), "{:?}", p[1]);
        assert!(c.take().is_empty());
    }
}
