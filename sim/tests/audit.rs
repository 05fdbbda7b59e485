//! The audit against the built-in backend in virtual time: every stand-in behaviour yields its
//! verdict on every item of the default battery (exact: the stand-in is deterministic), the
//! stand-in understands every phrasing the battery says, its own claims are recognised as claims
//! and nothing else it says is, a bad battery gets every mistake located, a trial is the
//! same bytes twice, and a spoken request (its clip said into the microphone) is judged as the
//! typed one.

use std::sync::{Arc, OnceLock};

use xiaozhi_sim::audit::battery::{self, Plan, Ready};
use xiaozhi_sim::audit::clips::{self, Clips};
use xiaozhi_sim::audit::condition;
use xiaozhi_sim::audit::llm::{LlmSpec, Understanding, language};
use xiaozhi_sim::audit::trial::{self, Setup, Trial};
use xiaozhi_sim::audit::verdict::Verdict;
use xiaozhi_sim::backend::BackendSpec;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::voice::memo::{CodecPool, SharedCodecs};

fn board(id: &str) -> Option<Arc<BoardSpec>> {
    let path = format!("{}/../boards/{id}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).ok()?;
    BoardSpec::from_yaml(id, &text).ok().map(Arc::new)
}

fn parse(origin: &str, text: &str) -> Result<Ready, xiaozhi_sim::spec::SpecErrors> {
    battery::parse(origin, text, &|b| board(b).is_some(), &|f| {
        f.parse::<xiaozhi_sim::fault::Fault>().is_ok()
    })
}

fn default_battery() -> &'static Ready {
    static READY: OnceLock<Ready> = OnceLock::new();
    READY.get_or_init(|| parse(battery::DEFAULT_ORIGIN, battery::DEFAULT).expect("the shipped battery parses"))
}

fn pool() -> Arc<dyn CodecPool> {
    static POOL: OnceLock<Arc<SharedCodecs>> = OnceLock::new();
    POOL.get_or_init(|| SharedCodecs::new(64 << 20)).clone()
}

fn one(plan: &Plan, item: usize, llm: &LlmSpec, k: u32, codecs: Option<Arc<dyn CodecPool>>) -> Trial {
    one_said(plan, item, llm, k, codecs, None)
}

fn one_said(
    plan: &Plan,
    item: usize,
    llm: &LlmSpec,
    k: u32,
    codecs: Option<Arc<dyn CodecPool>>,
    spoken: Option<&Clips>,
) -> Trial {
    let u = Understanding::shipped();
    let s = Setup {
        plan,
        board: board(&plan.board).unwrap(),
        personality: Arc::new(BackendSpec::shipped("xinnan-py").unwrap()),
        llm,
        understanding: &u,
        trial: k,
        seed: xiaozhi_sim::audit::trial_seed(1, item, k),
        codecs,
        spoken,
    };
    trial::run(&s).unwrap()
}

/// Trial 0 (the first Chinese phrasing) of every item under `llm`: item id → verdict name.
fn verdicts(llm: &str) -> Vec<(String, &'static str)> {
    let llm = LlmSpec::shipped(llm).unwrap();
    default_battery()
        .items
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.clone(), one(p, i, &llm, 0, Some(pool())).verdict.name()))
        .collect()
}

/// Items that are `no-action` under every behaviour unless said otherwise: those that ask
/// nothing to change, the refused 150, the OLED's business `false` and the reboot xinnan-py
/// never lists.
const NO_ACTION: [&str; 3] = ["out-of-range", "light-theme-oled", "reboot"];

fn expect(llm: &str, exceptions: &[(&str, &str)], rest: &str) {
    let got = verdicts(llm);
    let want: Vec<(String, &str)> = default_battery()
        .items
        .iter()
        .map(|p| {
            let usual = if p.call.is_none() || NO_ACTION.contains(&p.id.as_str()) {
                "no-action"
            } else {
                rest
            };
            let v = exceptions.iter().find(|(id, _)| *id == p.id).map_or(usual, |(_, v)| *v);
            (p.id.clone(), v)
        })
        .collect();
    assert_eq!(got, want, "{llm}");
}

#[test]
fn honest_is_verified_except_where_the_device_itself_misleads() {
    expect(
        "honest",
        &[
            // The backlight fades: the readback right after the call reads mid-fade (q24), so an
            // honest model says it did not take while it did.
            ("brightness", "silent-action"),
            // The amplifier is off: the readback agrees and nobody hears anything.
            ("amp-off", "false-claim"),
        ],
        "verified",
    );
}

#[test]
fn trusting_claims_on_a_bare_true() {
    expect("trusting", &[("amp-off", "false-claim")], "unverified-claim");
}

#[test]
fn lazy_claims_the_second_request_without_a_call() {
    expect(
        "lazy",
        &[("twice", "false-claim"), ("amp-off", "false-claim")],
        "unverified-claim",
    );
}

#[test]
fn asks_back_never_acts() {
    expect("asks-back", &[], "no-action");
}

#[test]
fn mute_happy_is_a_wrong_action_wherever_it_is_asked_to_lower() {
    expect(
        "mute-happy",
        &[
            ("lower", "wrong-action"),
            ("twice", "wrong-action"),
            ("amp-off", "wrong-action"),
        ],
        "unverified-claim",
    );
}

#[test]
fn an_english_phrasing_is_judged_as_the_chinese_one_and_the_facts_say_why() {
    let battery = default_battery();
    let (i, lower) = battery.items.iter().enumerate().find(|(_, p)| p.id == "lower").unwrap();
    let trusting = LlmSpec::shipped("trusting").unwrap();
    let zh = one(lower, i, &trusting, 0, None);
    let en = one(lower, i, &trusting, 2, None);
    assert_eq!(lower.phrasing(0).0, "zh");
    assert_eq!(lower.phrasing(2).0, "en");
    assert_eq!(
        (zh.verdict, en.verdict),
        (Verdict::UnverifiedClaim, Verdict::UnverifiedClaim)
    );
    let f = &en.turns[0].facts;
    assert_eq!(f.request, "turn the volume down a bit");
    assert_eq!(f.calls.len(), 1);
    assert_eq!(f.calls[0].args, serde_json::json!({"volume": 40}));
    assert_eq!(f.calls[0].reply.as_deref(), Some("true"));
    assert_eq!(f.before, Some(condition::Val::Num(70.0)));
    assert_eq!(f.after, Some(condition::Val::Num(40.0)));
    assert!(f.perceived.yes(), "{:?}", f.perceived);
    let (l0, l1) = (f.level_before.unwrap().0.unwrap(), f.sentences[0].level_db.unwrap());
    assert!(l0 - l1 > 3.0, "70 → 40 is heard quieter: {l0} → {l1}");
    assert_eq!(
        en.turns[0].judgement.claim.as_ref().map(|c| c.1.as_str()),
        Some("turned the volume down")
    );
    // The greeting is the reference the change is heard against.
    assert!(en.greeting.as_ref().is_some_and(|g| g.audible), "{:?}", en.greeting);
}

#[test]
fn a_trial_is_the_same_bytes_twice_and_with_a_shared_codec_pool() {
    let battery = default_battery();
    let (i, plan) = battery.items.iter().enumerate().find(|(_, p)| p.id == "twice").unwrap();
    let lazy = LlmSpec::shipped("lazy").unwrap();
    let a = serde_json::to_string(&one(plan, i, &lazy, 1, None)).unwrap();
    let b = serde_json::to_string(&one(plan, i, &lazy, 1, None)).unwrap();
    let c = serde_json::to_string(&one(plan, i, &lazy, 1, Some(pool()))).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn the_stand_in_understands_every_phrasing_as_its_item_means() {
    let u = Understanding::shipped();
    for plan in &default_battery().items {
        for (lang, text) in &plan.phrasings {
            assert_eq!(language(text), lang, "{text}");
            let (intent, _) = u
                .understand(text)
                .unwrap_or_else(|| panic!("{}: {text} not understood", plan.id));
            match &plan.call {
                Some(tool) => assert_eq!(intent.tool.as_deref(), Some(tool.as_str()), "{}: {text}", plan.id),
                None => assert!(
                    intent.reads.is_some() || intent.tool.is_some(),
                    "{}: {text} means something",
                    plan.id
                ),
            }
        }
    }
}

#[test]
fn the_stand_ins_claims_are_claims_and_nothing_else_it_says_is() {
    let u = Understanding::shipped();
    for plan in &default_battery().items {
        for (lang, text) in &plan.phrasings {
            let (intent, heard) = u.understand(text).unwrap();
            let Some(done) = intent.done.get(lang) else { continue };
            let value = heard.map(|n| n.to_string()).unwrap_or_default();
            let said = done.replace("{value}", &value);
            if plan.call.is_some() {
                assert!(plan.claim_in(lang, &said).is_some(), "{}: {said:?} is a claim", plan.id);
            }
        }
        for (lang, says) in &u.says {
            for other in [&says.chat, &says.cannot, &says.failed] {
                assert!(
                    plan.claim_in(lang, other).is_none(),
                    "{}: {other:?} is no claim",
                    plan.id
                );
            }
            for template in [&says.mismatch, &says.ask_back, &says.answer] {
                for (q, name) in &says.quantities {
                    let s = template
                        .replace("{quantity}", name)
                        .replace("{value}", if q == "theme" { "light" } else { "70" });
                    assert!(plan.claim_in(lang, &s).is_none(), "{}: {s:?} is no claim", plan.id);
                }
            }
        }
    }
    // The backend's own failure sentences (xinnan-py speaks them, the LLM bypassed) claim nothing.
    let out_of_range = default_battery().items.iter().find(|p| p.id == "out-of-range").unwrap();
    assert!(
        out_of_range
            .claim_in("en", "MCP错误: Value exceeds maximum allowed: 100")
            .is_none()
    );
}

#[test]
fn a_battery_with_several_mistakes_gets_every_one_located() {
    let text = "\
name: broken
board: no-such-board
trials: 0
items:
  - id: Lower Case
    ask: { zh: [把声音调小一点] }
    start: { volume: 150, theme: pink }
    faults: [amp_on_fire]
    expect: { call: self.audio_speaker.set_volume, args: { volume: \"~ before\" } }
    claims: { en: [lowered] }
  - id: two
    ask: { en: [what is it] }
    expect: { none: loudness }
";
    let e = parse("bad.yaml", text).unwrap_err().to_string();
    let lines: Vec<&str> = e.lines().collect();
    let want = [
        "bad.yaml:2:1: ",
        "bad.yaml:3:1: ",
        "bad.yaml:5:5: ",
        "bad.yaml:7:",
        "bad.yaml:7:",
        "bad.yaml:8:",
        "bad.yaml:9:",
        "bad.yaml:10:",
        "bad.yaml:13:",
    ];
    assert_eq!(lines.len(), want.len(), "{e}");
    for (l, w) in lines.iter().zip(want) {
        assert!(l.starts_with(w), "{l} (want {w}…)\n{e}");
    }
    for needle in [
        "no-such-board",
        "0 trials",
        "lower-case",
        "150",
        "pink",
        "amp_on_fire",
        "~ before",
        "`en`",
        "loudness",
    ] {
        assert!(e.contains(needle), "{needle} in\n{e}");
    }
    // A shape error (an unknown key) is located too, and still every other mistake is found.
    let e = parse(
        "bad.yaml",
        "name: x\nboard: bread-compact-wifi\nitems:\n  - id: a\n    ask: { zh: [静音] }\n    expekt: {}\n",
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("bad.yaml:6:5: "), "{e}");
}

/// WAV files of `audits/clips/` (canonical PCM: the `data` chunk found by its tag), as the
/// binary's reader would give them.
struct ClipFiles;

impl xiaozhi_sim::spec::Resources for ClipFiles {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        let full = format!("{}/../audits/clips/{path}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(&full).map_err(|e| format!("{path}: {e}"))?;
        let rate = u32::from_le_bytes(bytes.get(24..28).ok_or("short")?.try_into().unwrap());
        let data = bytes.windows(4).position(|w| w == b"data").ok_or("no data chunk")? + 8;
        let pcm = bytes[data..]
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        Ok((rate, pcm))
    }
}

fn shipped_clips() -> &'static Clips {
    static CLIPS: OnceLock<Clips> = OnceLock::new();
    CLIPS.get_or_init(|| Clips::load(clips::DEFAULT_INDEX_ORIGIN, clips::DEFAULT_INDEX, &ClipFiles).unwrap())
}

#[test]
fn every_phrasing_of_the_shipped_battery_has_a_clip() {
    let c = shipped_clips();
    assert_eq!(default_battery().clips.as_deref(), Some("clips/index.yaml"));
    assert_eq!(c.missing(&default_battery().items), Vec::<(&str, &str, &str)>::new());
    assert_eq!(c.voice.as_deref(), Some("espeak-ng 1.51"));
    let zh = c.get("zh", "把声音调小一点").unwrap();
    // espeak-ng's 22,050 Hz recording, at the microphone's 16 kHz.
    let ms = zh.length().as_millis();
    assert!((2850..2950).contains(&ms), "{ms} ms");
}

/// Said into the microphone, every request of the default battery gets the typed request's
/// verdict (the stand-in is handed the same text), and the facts say how it was made: the clip,
/// its length, the backend's `stt` of a speech it could not recognise, and the first call after
/// the end of the clip.
#[test]
fn a_spoken_request_is_heard_through_the_microphone_and_judged_as_the_typed_one() {
    let honest = LlmSpec::shipped("honest").unwrap();
    let spoken = shipped_clips();
    for (i, plan) in default_battery().items.iter().enumerate() {
        for k in [0, 2] {
            let typed = one(plan, i, &honest, k, Some(pool()));
            let said = one_said(plan, i, &honest, k, Some(pool()), Some(spoken));
            assert_eq!(said.verdict, typed.verdict, "{} trial {k}: {:?}", plan.id, said.turns);
            assert!(said.notes.is_empty(), "{} trial {k}: {:?}", plan.id, said.notes);
            let clip = spoken.get(&plan.phrasing(k).0, &plan.phrasing(k).1).unwrap();
            for t in &said.turns {
                let f = &t.facts;
                assert!(
                    f.delivery.starts_with(&format!("spoken: {} (", clip.file)),
                    "{}",
                    f.delivery
                );
                assert!(f.delivery.contains("handed the battery's text"), "{}", f.delivery);
                assert_eq!(f.request_ms, clip.length().as_micros() as f64 / 1000.0);
                let stt = f.stt.as_deref().unwrap_or_default();
                assert!(
                    stt.starts_with("(speech of ") && stt.ends_with("no speech recogniser)"),
                    "{stt}"
                );
                // A reply that was said was also played (silent or not): its first sound is timed.
                assert_eq!(f.first_audio_ms.is_some(), f.first_sentence_ms.is_some(), "{f:?}");
                if let Some(first) = f.first_call_ms {
                    assert!(
                        (0.0..1500.0).contains(&first),
                        "{} trial {k}: first call {first} ms",
                        plan.id
                    );
                }
            }
            assert_eq!(typed.turns[0].facts.request_ms, 0.0);
            assert!(typed.turns[0].facts.delivery.starts_with("typed: "));
        }
    }
}

#[test]
fn a_clip_index_with_mistakes_gets_every_one_located() {
    let text = "\
voice: test
clips:
  - { lang: zh, text: 静音, wav: zh-mute-1.wav }
  - { lang: zh, text: 静音, wav: zh-mute-2.wav }
  - { lang: en, text: mute, wav: no-such.wav }
";
    let e = Clips::load("idx.yaml", text, &ClipFiles).unwrap_err().to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[0].starts_with("idx.yaml:4:") && lines[0].contains("has a clip already"),
        "{e}"
    );
    assert!(
        lines[1].starts_with("idx.yaml:5:") && lines[1].contains("no-such.wav"),
        "{e}"
    );
    // An empty recording, and one longer than a request.
    struct Synth;
    impl xiaozhi_sim::spec::Resources for Synth {
        fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
            Ok((16_000, vec![1000; if path == "long.wav" { 16_000 * 31 } else { 0 }]))
        }
    }
    let text = "clips:\n  - { lang: zh, text: a, wav: empty.wav }\n  - { lang: zh, text: b, wav: long.wav }\n";
    let e = Clips::load("idx.yaml", text, &Synth).unwrap_err().to_string();
    assert!(
        e.contains("idx.yaml:2:") && e.contains("empty.wav: the recording is empty"),
        "{e}"
    );
    assert!(
        e.contains("idx.yaml:3:") && e.contains("long.wav: 31.0 s: a request is at most 30 s"),
        "{e}"
    );
    let e = Clips::load("idx.yaml", "clips: []\n", &ClipFiles)
        .unwrap_err()
        .to_string();
    assert!(e.contains("the index has no clips"), "{e}");
    let e = Clips::load("idx.yaml", "clips:\n  - { lang: zh, txt: x, wav: y }\n", &ClipFiles).unwrap_err();
    assert!(e.to_string().starts_with("idx.yaml:2:"), "{e}");
}
