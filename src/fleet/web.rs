//! `fleet --voice --web ADDR`: the running fleet in a browser, in the manner of k6's web
//! dashboard (docs/fleet.md, "Watching a fleet live"). A thread of its own samples the fleet's
//! counters once a second (devices connected, turns started, completed and failed, frames,
//! first-audio p50 and p99 of the turns that ended in that second, failures by reason) and
//! serves one page (embedded) that draws them as they come; at the end the summary is added.
//! The page saves itself, samples and summary included, as a standalone HTML report.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::fleet::hist::Hist;
use crate::fleet::summary::VoiceSummary;
use crate::fleet::turns::Metrics;
use crate::live::Counters;

const PAGE: &str = include_str!("web.html");

/// What the page reads.
#[derive(Default)]
struct Shared {
    samples: Vec<Value>,
    summary: Option<Value>,
    run: Value,
}

/// The dashboard of one fleet run; stops serving when dropped.
pub struct Dashboard {
    shared: Arc<Mutex<Shared>>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dashboard {
    /// Serves the page on `addr` and samples `metrics` and `counters` every second; `run`
    /// describes the run for the page's title.
    pub fn start(addr: &str, run: Value, metrics: Arc<Metrics>, counters: Arc<Counters>) -> Result<Dashboard> {
        let listener = std::net::TcpListener::bind(addr).with_context(|| format!("--web {addr}"))?;
        listener.set_nonblocking(true)?;
        crate::errln!("fleet: the dashboard is on http://{}/", listener.local_addr()?);
        let shared = Arc::new(Mutex::new(Shared {
            run,
            ..Shared::default()
        }));
        let (stop, stopped) = watch::channel(false);
        let inner = shared.clone();
        let thread = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            runtime.block_on(serve(listener, inner, metrics, counters, stopped));
        });
        Ok(Dashboard {
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// The dashboard on `addr` when the run asked for one (`--web`), titled `title`.
    pub fn of(
        addr: Option<&str>,
        title: String,
        metrics: &Arc<Metrics>,
        counters: &Arc<Counters>,
    ) -> Result<Option<Dashboard>> {
        let Some(addr) = addr else { return Ok(None) };
        Dashboard::start(addr, json!({"title": title}), metrics.clone(), counters.clone()).map(Some)
    }

    /// The run is over: the page shows `summary` beside the curves (its next poll takes it).
    pub fn end(dashboard: Option<Dashboard>, summary: &VoiceSummary) -> Result<()> {
        if let Some(d) = dashboard {
            lock(&d.shared).summary = Some(serde_json::to_value(summary)?);
            std::thread::sleep(Duration::from_millis(1500));
        }
        Ok(())
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Mutex<Shared>>,
    metrics: Arc<Metrics>,
    counters: Arc<Counters>,
    mut stopped: watch::Receiver<bool>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let app = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/api/samples", get(samples))
        .with_state(shared.clone());
    let mut stop_web = stopped.clone();
    let web = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_web.changed().await;
            })
            .await;
    });
    let mut sampler = Sampler::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let sample = sampler.sample(&metrics, &counters);
                lock(&shared).samples.push(sample);
            }
            _ = stopped.changed() => break,
        }
    }
    let _ = web.await;
}

/// Turns the fleet's cumulative counters into one sample a second.
struct Sampler {
    started: Instant,
    last: Option<(Instant, u64, u64, Hist)>,
}

impl Sampler {
    fn new() -> Sampler {
        Sampler {
            started: Instant::now(),
            last: None,
        }
    }

    fn sample(&mut self, m: &Metrics, c: &Counters) -> Value {
        let now = Instant::now();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let (completed, frames) = (load(&m.completed), load(&m.tts_frames));
        let first_audio = m.latency.lock().unwrap_or_else(|e| e.into_inner()).first_audio.clone();
        let (window, per_s) = match &self.last {
            Some((t, done, fr, h)) => {
                let dt = now.duration_since(*t).as_secs_f64().max(1e-3);
                let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
                (first_audio.since(h), (rate(completed, *done), rate(frames, *fr)))
            }
            None => (first_audio.clone(), (0.0, 0.0)),
        };
        let failures: BTreeMap<&str, u64> = m
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.key(), *v))
            .collect();
        let sample = json!({
            "t": now.duration_since(self.started).as_secs_f64(),
            "connected": load(&c.open),
            "started": load(&m.started),
            "completed": completed,
            "failed": load(&m.failed),
            "in_flight": load(&m.in_flight),
            "turns_per_s": per_s.0,
            "tts_frames_per_s": per_s.1,
            "first_audio_p50_ms": window.ms_at(50.0),
            "first_audio_p99_ms": window.ms_at(99.0),
            "first_audio_p99_all_ms": first_audio.ms_at(99.0),
            "failures": failures,
        });
        self.last = Some((now, completed, frames, first_audio));
        sample
    }
}

#[derive(Deserialize)]
struct Since {
    since: Option<usize>,
}

/// The samples from `since` on, the run, and the summary once there is one.
async fn samples(State(shared): State<Arc<Mutex<Shared>>>, Query(q): Query<Since>) -> impl IntoResponse {
    let s = lock(&shared);
    let from = q.since.unwrap_or(0).min(s.samples.len());
    axum::Json(json!({
        "run": s.run,
        "from": from,
        "samples": s.samples[from..],
        "summary": s.summary,
    }))
}
