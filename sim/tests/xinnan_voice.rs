//! The built-in xinnan-py backend's voice turn as the real server runs it (docs/reference/voice.md
//! §5.1): wake words and the response cache, the greeting switch, manual mode, the ASR minimum,
//! audio ignored after waking, abort ending the turn, and the first words of a connection held
//! for the script. Each test drives one backend session directly with the frames a device sends.

use std::sync::Arc;

use serde_json::Value;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::backend::scripted::{ScriptedAction, ScriptedBackend};
use xiaozhi_sim::backend::{Action, BackendSpec, Session};
use xiaozhi_sim::spec::NoFiles;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::codec::Encoder;

const HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;

fn xinnan(edit: impl FnOnce(&mut BackendSpec)) -> Arc<BackendSpec> {
    let mut spec = BackendSpec::shipped("xinnan-py").unwrap();
    edit(&mut spec);
    Arc::new(spec)
}

fn headers() -> Vec<(String, String)> {
    vec![
        ("Protocol-Version".into(), "1".into()),
        ("Device-Id".into(), "aa:bb:cc:dd:ee:ff".into()),
    ]
}

fn at(ms: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_millis(ms)
}

/// A session that has had the device hello.
fn session(spec: Arc<BackendSpec>) -> Session {
    let mut s = Session::accept(spec, at(0), &headers(), 1);
    s.handle_text(at(10), HELLO);
    s
}

/// The text frames `s` has decided to send, parsed (binary frames counted in `audio`).
fn texts(s: &mut Session, audio: &mut usize) -> Vec<Value> {
    let mut out = vec![];
    while let Some(a) = s.poll_action() {
        match a {
            Action::Send(t) => {
                if let Ok(v) = serde_json::from_str::<Value>(&t)
                    && v["type"] != "mcp"
                {
                    out.push(v);
                }
            }
            Action::Binary(_) => *audio += 1,
            Action::Close => out.push(serde_json::json!({"type": "(close)"})),
        }
    }
    out
}

/// `tts`/`stt` frames up to `until`, shown as `stt TEXT`, `tts STATE [TEXT]`.
fn shown(s: &mut Session, until: SimTime) -> (Vec<String>, usize) {
    let mut audio = 0;
    let mut out = vec![];
    let mut t = at(0);
    while t <= until {
        s.handle_timeout(t);
        for v in texts(s, &mut audio) {
            let kind = v["type"].as_str().unwrap_or("").to_string();
            let line = match kind.as_str() {
                "stt" => format!("stt {}", v["text"].as_str().unwrap_or("")),
                "tts" => match v["text"].as_str() {
                    Some(x) => format!("tts {} {x}", v["state"].as_str().unwrap_or("")),
                    None => format!("tts {}", v["state"].as_str().unwrap_or("")),
                },
                "(close)" => kind.clone(),
                _ => continue,
            };
            out.push(line);
        }
        t += SimDuration::from_millis(20);
    }
    (out, audio)
}

/// 60 ms packets of a 220 Hz tone at -12 dBFS (voice), or silence as the device sends it (the
/// TOC byte alone).
struct Mic(Encoder);

impl Mic {
    fn new() -> Mic {
        Mic(Encoder::mic())
    }

    fn packet(&mut self, voice: bool, frame: u64) -> Vec<u8> {
        if !voice {
            return vec![0x58];
        }
        let pcm: Vec<i16> = (0..960)
            .map(|i| {
                let t = (frame * 960 + i) as f64 / 16_000.0;
                (8000.0 * (2.0 * std::f64::consts::PI * 220.0 * t).sin()) as i16
            })
            .collect();
        self.0.encode(&pcm)
    }

    /// `voiced` frames of voice then `quiet` of silence, from `start` ms, one every 60 ms.
    fn say(&mut self, s: &mut Session, start: u64, voiced: u64, quiet: u64) -> u64 {
        for i in 0..voiced + quiet {
            let p = self.packet(i < voiced, i);
            s.handle_binary(at(start + i * 60), &p);
        }
        start + (voiced + quiet) * 60
    }
}

/// What a device with no tools answers to the backend's `initialize` or `tools/list`.
fn device_reply(request: &Value) -> String {
    let result = if request["payload"]["method"] == "tools/list" {
        serde_json::json!({"tools": []})
    } else {
        serde_json::json!({"protocolVersion": "2024-11-05", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}})
    };
    let id = &request["payload"]["id"];
    serde_json::json!({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "result": result}}).to_string()
}

fn listen(s: &mut Session, ms: u64, state: &str, extra: &str) {
    s.handle_text(at(ms), &format!(r#"{{"type":"listen","state":"{state}"{extra}}}"#));
}

#[test]
fn a_wake_word_is_answered_from_the_response_cache_with_no_stt_and_no_llm_turn() {
    let mut s = session(xinnan(|_| {}));
    listen(&mut s, 100, "detect", r#","text":"你好小智""#);
    let (frames, audio) = shown(&mut s, at(4000));
    assert_eq!(
        frames,
        ["tts start", "tts sentence_start 我在这里哦！", "tts stop"],
        "{frames:?}"
    );
    assert_eq!(audio, 26, "1.56 s of reply in 60 ms packets");
    assert_eq!(s.utterances(), 0, "the LLM (the script) is not asked");
    // The next wake: a refreshed reply.
    listen(&mut s, 5000, "detect", r#","text":"你好小智""#);
    let (frames, _) = shown(&mut s, at(9000));
    assert!(
        frames.contains(&"tts sentence_start 我一直都在呢，您请说。".to_string()),
        "{frames:?}"
    );
}

#[test]
fn with_the_cache_off_a_wake_word_chats_the_greeting_text() {
    let mut s = session(xinnan(|b| {
        b.voice.as_mut().unwrap().detect.as_mut().unwrap().reply_cache = false
    }));
    listen(&mut s, 100, "detect", r#","text":"你好小智""#);
    let (frames, _) = shown(&mut s, at(500));
    assert_eq!(frames, ["stt 嘿，你好呀", "tts start"]);
    assert_eq!(s.utterances(), 1);
    assert_eq!(s.voice_report().utterances[0].text.as_deref(), Some("嘿，你好呀"));
}

#[test]
fn with_the_greeting_off_a_wake_word_is_shown_and_stopped() {
    let mut s = session(xinnan(|b| {
        b.voice.as_mut().unwrap().detect.as_mut().unwrap().greeting = false
    }));
    listen(&mut s, 100, "detect", r#","text":"你好，小智！""#);
    let (frames, _) = shown(&mut s, at(500));
    assert_eq!(frames, ["stt 你好，小智", "tts start", "tts stop"]);
    assert_eq!(s.utterances(), 0);
}

#[test]
fn other_detect_texts_are_chatted_and_exit_commands_close() {
    let mut s = session(xinnan(|_| {}));
    listen(&mut s, 100, "detect", r#","text":"“声音调小一点”。""#);
    let (frames, _) = shown(&mut s, at(300));
    assert_eq!(frames, ["stt 声音调小一点", "tts start"]);
    assert_eq!(s.utterances(), 1);
    listen(&mut s, 400, "detect", r#","text":"退出。""#);
    let (frames, _) = shown(&mut s, at(600));
    assert!(
        frames.ends_with(&["stt 退出".into(), "tts start".into(), "(close)".into()]),
        "{frames:?}"
    );
}

#[test]
fn microphone_audio_is_ignored_for_2_s_from_the_first_frame_after_a_detect() {
    let mut s = session(xinnan(|b| {
        b.voice.as_mut().unwrap().detect.as_mut().unwrap().reply_cache = false
    }));
    listen(&mut s, 100, "detect", r#","text":"你好小智""#);
    let mut mic = Mic::new();
    // Frames from 1000 ms: ignored until 3000 ms (2 s after the first, at 1000).
    mic.say(&mut s, 1000, 60, 0);
    let v = s.voice_report();
    assert_eq!(v.ignored_after_wake, 34, "1000, 1060, …, 2980 ms");
}

#[test]
fn manual_mode_ends_an_utterance_only_at_listen_stop() {
    let mut s = session(xinnan(|_| {}));
    listen(&mut s, 100, "start", r#","mode":"manual""#);
    let mut mic = Mic::new();
    // 1.5 s of voice, then 3 s of silence: no end by VAD.
    let end = mic.say(&mut s, 300, 25, 50);
    assert_eq!(
        s.utterances(),
        0,
        "manual mode takes every packet as voice, never ends it"
    );
    listen(&mut s, end, "stop", "");
    assert_eq!(s.utterances(), 1);
    let u = &s.voice_report().utterances[0];
    assert_eq!(u.frames, 75, "everything buffered");
    // In auto mode the same speech ends by itself, about 300 ms after its last voiced frame.
    listen(&mut s, end + 100, "start", r#","mode":"auto""#);
    let start = end + 300;
    mic.say(&mut s, start, 25, 20);
    assert_eq!(s.utterances(), 2);
    let u = &s.voice_report().utterances[1];
    let last_voiced = (start + 24 * 60) as f64;
    assert!((240.0..=360.0).contains(&(u.ended_ms - last_voiced)), "{u:?}");
    assert_eq!(u.frames_after_voice * 60, (u.ended_ms - last_voiced) as u64);
}

#[test]
fn a_0_3_s_burst_after_listen_start_is_no_utterance() {
    let mut s = session(xinnan(|_| {}));
    listen(&mut s, 100, "start", r#","mode":"auto""#);
    let mut mic = Mic::new();
    mic.say(&mut s, 280, 5, 30);
    assert_eq!(s.utterances(), 0);
    assert_eq!(s.voice_report().too_short, 1);
    // 1.5 s is one.
    mic.say(&mut s, 3000, 25, 20);
    assert_eq!(s.utterances(), 1);
}

#[test]
fn an_abort_ends_the_turn_and_later_speak_lines_say_nothing() {
    let script = Script::parse(
        "s.txt",
        "await utterance\nspeak \"一\" for 3s\nwait 1s\nspeak \"二\" for 1s\n",
    )
    .unwrap();
    let session = Session::accept(xinnan(|_| {}), at(0), &headers(), 1);
    let mut b = ScriptedBackend::new(session, &script, 1, 1, Default::default(), Arc::new(NoFiles));
    b.handle_text(at(10), HELLO);
    // Discovery: answer initialize and tools/list as a device would (an empty tool list).
    let mut sent = vec![];
    let mut t = 20;
    let mut abort_at = None;
    while t < 12_000 {
        b.handle_timeout(at(t));
        while let Some(a) = b.poll_action() {
            if let ScriptedAction::Text(x) = &a {
                let v: Value = serde_json::from_str(x).unwrap();
                if v["type"] == "mcp" {
                    b.handle_text(at(t), &device_reply(&v));
                } else {
                    sent.push((t, v));
                }
            }
        }
        if t == 2000 {
            b.handle_text(at(t), r#"{"type":"listen","state":"detect","text":"声音调小一点"}"#);
        }
        if abort_at.is_none()
            && sent
                .iter()
                .any(|(_, v)| v["type"] == "tts" && v["state"] == "sentence_start")
        {
            abort_at = Some(t + 500);
        }
        if Some(t) == abort_at {
            b.handle_text(at(t), r#"{"type":"abort"}"#);
        }
        t += 20;
    }
    let sentences: Vec<&str> = sent
        .iter()
        .filter(|(_, v)| v["state"] == "sentence_start")
        .filter_map(|(_, v)| v["text"].as_str())
        .collect();
    assert_eq!(
        sentences,
        ["一"],
        "the second sentence is not spoken after the abort: {sent:?}"
    );
    // (Times are the loop step that took the frame out: up to 20 ms late.)
    // The abort's tts stop at once; the turn's own (the script had ended the turn with `wait`)
    // still comes, within 420 ms, as the real server's does.
    let stops: Vec<u64> = sent
        .iter()
        .filter(|(_, v)| v["state"] == "stop")
        .map(|(t, _)| *t)
        .collect();
    let abort = abort_at.unwrap();
    assert_eq!(stops.len(), 2, "{sent:?}");
    assert!(
        (abort..=abort + 20).contains(&stops[0]) && stops[1] > stops[0] && stops[1] <= abort + 440,
        "{stops:?} after the abort at {abort}"
    );
    assert!(b.report().notes.iter().any(|n| n.contains("not spoken")));
}

#[test]
fn the_first_words_of_a_connection_said_during_discovery_are_held_for_the_script() {
    let script = Script::parse("s.txt", "await utterance\nspeak \"好的\" for 1s\n").unwrap();
    let session = Session::accept(xinnan(|_| {}), at(0), &headers(), 1);
    let mut b = ScriptedBackend::new(session, &script, 1, 1, Default::default(), Arc::new(NoFiles));
    b.handle_text(at(10), HELLO);
    // The device's first words, before it has answered initialize (discovery still running).
    b.handle_text(at(20), r#"{"type":"listen","state":"detect","text":"声音调小一点"}"#);
    let mut sent = vec![];
    let mut t = 20;
    while t < 6000 {
        b.handle_timeout(at(t));
        while let Some(a) = b.poll_action() {
            if let ScriptedAction::Text(x) = &a {
                let v: Value = serde_json::from_str(x).unwrap();
                if v["type"] == "mcp" {
                    b.handle_text(at(t + 300), &device_reply(&v));
                } else {
                    sent.push(v);
                }
            }
        }
        t += 20;
    }
    let seq: Vec<String> = sent
        .iter()
        .filter(|v| v["type"] == "tts" || v["type"] == "stt")
        .map(|v| {
            format!(
                "{} {}",
                v["type"].as_str().unwrap(),
                v["state"].as_str().or(v["text"].as_str()).unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        seq,
        ["stt 声音调小一点", "tts start", "tts sentence_start", "tts stop"],
        "one turn, answered by the script: {sent:?}"
    );
}
