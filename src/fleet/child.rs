//! `fleet --voice --backend-process`: the built-in backend as `xiaozhi-twin backend` in a child
//! process, so the fleet's own CPU and memory are the twin's alone and the backend's are read
//! beside them from `/proc/PID` (docs/fleet.md, "The twin apart from the backend").

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::fleet::Target;
use crate::fleet::summary::{BackendCost, VoiceSummary};
use crate::fleet::talking::{self, VoiceRun, run_length};
use anyhow::{Context, Result, bail};

/// A backend process, stopped when dropped.
struct BackendChild {
    child: Child,
    script: PathBuf,
    url: String,
}

impl BackendChild {
    /// Starts `xiaozhi-twin backend` on a free loopback port with `personality` and the fleet's
    /// turn script (repeated for every turn), stopping by itself after `life`.
    fn start(personality: &str, turn_script: &str, life: Duration) -> Result<BackendChild> {
        let script = std::env::temp_dir().join(format!("xiaozhi-twin-fleet-{}.script", std::process::id()));
        std::fs::write(&script, format!("{}\nrepeat\n", turn_script.trim_end()))
            .with_context(|| format!("{}", script.display()))?;
        let exe = std::env::current_exe().context("the fleet's own executable")?;
        let mut child = Command::new(exe)
            .args(["backend", "--listen", "127.0.0.1:0", "--personality", personality])
            .arg("--script")
            .arg(&script)
            .args(["--duration", &format!("{}s", life.as_secs().max(1))])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting `xiaozhi-twin backend`")?;
        let mut lines = BufReader::new(child.stderr.take().context("the backend's stderr")?).lines();
        let mut said = Vec::new();
        let url = loop {
            let Some(line) = lines.next().transpose()? else {
                let _ = child.kill();
                let _ = child.wait();
                bail!("`xiaozhi-twin backend` ended before listening:\n{}", said.join("\n"));
            };
            if let Some(rest) = line.split_once("listening on ").map(|(_, r)| r) {
                break rest.split_whitespace().next().unwrap_or_default().to_string();
            }
            said.push(line);
        };
        // Keep reading what it says, so a full pipe never blocks it.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(BackendChild { child, script, url })
    }

    /// CPU seconds so far and the peak resident size, from `/proc/PID`.
    fn cost(&self) -> BackendCost {
        let pid = self.child.id().to_string();
        BackendCost {
            cpu_s: crate::fleet::cpu_s_of(&pid),
            rss_peak_kib: peak_rss_kib(&pid),
        }
    }
}

impl Drop for BackendChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.script);
    }
}

/// `VmHWM` of `/proc/PID/status`, KiB (0 where there is no `/proc`).
fn peak_rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Runs the fleet against a fresh backend process (`personality`, the run's turn script) and
/// adds the backend's cost to the summary.
pub fn run(base: &VoiceRun, personality: &str) -> Result<VoiceSummary> {
    let life = run_length(base, u64::from(base.devices)) + Duration::from_secs(120);
    let child = BackendChild::start(personality, &base.script_text, life)?;
    crate::errln!(
        "fleet: the backend runs in another process (pid {}) at {}",
        child.child.id(),
        child.url
    );
    let mut run = base.clone();
    run.external = Some(Target::WebSocket(child.url.clone()));
    let before = child.cost();
    let mut summary = talking::run(&run)?;
    let after = child.cost();
    summary.backend_process = Some(BackendCost {
        cpu_s: after.cpu_s - before.cpu_s,
        rss_peak_kib: after.rss_peak_kib,
    });
    Ok(summary)
}
