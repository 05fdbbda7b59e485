//! Helpers shared by the sim crate's test files: one voice turn against a loopback backend
//! (the user speaks, the backend replies), whatever wire carries it; what a device driven by
//! hand emitted and logged. Each file uses only some of them.
#![allow(dead_code)]

use std::sync::Arc;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, Output};
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::trace::Event;
use xiaozhi_sim::voice::codec::resample_clip;
use xiaozhi_sim::voice::speak::{Timbre, natural_duration};
use xiaozhi_sim::world::WorldSpec;

/// `yaml`'s board over WebSocket protocol `version`, paired with xinnan-py, idle at 1 s.
pub fn ws_pair(yaml: &str, version: i32) -> Loopback {
    let mut world = WorldSpec::conformance();
    world.websocket = Some(xiaozhi_sim::world::WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version,
    });
    let spec = BoardSpec::from_yaml("b.yaml", yaml).unwrap();
    let mut d = Device::new(Arc::new(spec), world, 5);
    d.power_on(SimTime::ZERO);
    let backend = xiaozhi_sim::backend::BackendSpec::shipped("xinnan-py").unwrap();
    let mut lb = Loopback::new(d, Arc::new(backend));
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    lb
}

/// The user says 2 s of speech; runs until the backend has found the utterance.
pub fn utter(lb: &mut Loopback) {
    let before = lb.session().unwrap().utterances();
    let pcm = Timbre::default().render(SimDuration::from_secs(2), 24_000);
    let now = lb.now();
    lb.device.say(now, &resample_clip(&pcm, 24_000, 16_000));
    for _ in 0..100 {
        let t = lb.now() + SimDuration::from_millis(100);
        lb.run_until(t).unwrap();
        if lb.session().unwrap().utterances() > before {
            return;
        }
    }
    panic!("the backend never heard the end of the utterance");
}

/// The backend says `text` and ends the turn; returns the device's session level (dB SPL),
/// after checking that no frame of it was dropped.
pub fn reply(lb: &mut Loopback, text: &str) -> f64 {
    let now = lb.now();
    let s = lb.session().unwrap();
    s.speak(
        now,
        text,
        &Timbre::default(),
        natural_duration(text).max(SimDuration::from_secs(2)),
    );
    s.end_turn(now);
    let t = lb.now() + SimDuration::from_secs(5);
    lb.run_until(t).unwrap();
    let session = lb.device.speech_log().sessions.last().unwrap().clone();
    assert_eq!(session.counts.dropped(), 0, "{:?}", session.counts);
    assert!(session.counts.decoded > 0, "{:?}", session.counts);
    let w = session.window.unwrap();
    let (m, _) = lb.device.render(w.start + SimDuration::from_millis(300), w.end, false);
    m.spl_db.unwrap()
}

/// Everything the device emitted since the last call.
pub fn outputs(d: &mut Device) -> Vec<Output> {
    std::iter::from_fn(|| d.poll_output()).collect()
}

/// The MQTT publishes among `out` (each to `device-server`), as text.
pub fn published(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::MqttPublish { topic, payload, .. } => {
                assert_eq!(topic, "device-server");
                Some(String::from_utf8_lossy(payload).into_owned())
            }
            _ => None,
        })
        .collect()
}

/// Log lines (`L TAG: text`) and panics (`panic: reason`) since the last call.
pub fn logs(d: &mut Device) -> Vec<String> {
    d.drain_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            Event::Logged { level, tag, text } => Some(format!("{} {tag}: {text}", level.letter())),
            Event::Panicked { reason } => Some(format!("panic: {reason}")),
            _ => None,
        })
        .collect()
}
