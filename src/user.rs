//! The simulated user of `connect --script FILE`: timed device-side actions, one a line, run in
//! order against the wall clock (`#` starts a comment).
//!
//! ```text
//! wait <duration>          do nothing for this long (e.g. 2s, 500ms)
//! wake [<word>] [<f.wav>]  the wake word is detected now (default 你好小智): from Idle the
//!                          device sends the wake word's audio (the WAV as the word just said,
//!                          silence before it; silence alone without one), then listen
//!                          detect, then listens
//! say <file.wav>           speak the file into the microphone in real time (then silence)
//! say "<text>"             typed input: listen detect with the text, as py-xiaozhi sends it
//!                          (not firmware behaviour; the report labels it)
//! press <button> [how]     press a board button and let go; how: nothing (a 100 ms click),
//!                          `long` (held 0.5 s past the long press time), `double` (two
//!                          clicks), `<n>x` (n clicks) or a duration (held that long: on a
//!                          talk button, push-to-talk)
//! down <button>            press a board button and keep it down
//! up <button>              let go of it
//! abort                    interrupt the speech (what a BOOT click does, at once)
//! ```
//!
//! What a press does is what the board's callbacks do with the gestures the button component
//! finds (docs/boards.md, "Buttons"): a click acts about 0.2 s after the release, a long press
//! while still held, push-to-talk on press down and press up. `press` is carried out as `down`,
//! waits and `up`, each shown in the report.
//!
//! Every file is read and every line checked before anything is dialled; a bad line is
//! `file:line:column: message`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use xiaozhi_sim::board::ButtonSpec;
use xiaozhi_sim::voice::codec::{MIC_RATE, resample_clip};

/// One action.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Wait(Duration),
    /// The word, and 16 kHz samples of it as said (empty: silence).
    Wake(String, Vec<i16>),
    /// 16 kHz samples and the file they came from.
    Say(Vec<i16>, String),
    Type(String),
    /// The finger presses the button (`true`) or lets go.
    Button {
        button: String,
        pressed: bool,
    },
    Abort,
    /// A third party forges a datagram on the device's UDP audio channel (MQTT + UDP): its ssrc,
    /// sent to the server from another socket.
    Forge,
}

/// A line of the script.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub line: usize,
    pub action: Action,
}

/// The default wake word.
pub const WAKE_WORD: &str = "你好小智";

/// A click as the script's finger makes it: 100 ms down, and 100 ms up between clicks.
const CLICK: Duration = Duration::from_millis(100);

/// Parses a script; WAV paths are relative to the script's folder. `buttons` are the board's.
pub fn parse(path: &Path, text: &str, buttons: &[ButtonSpec]) -> Result<Vec<Line>> {
    let origin = path.display().to_string();
    let base = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let col = |s: &str| raw.len() - s.len() + 1;
        let (word, tail) = trimmed.split_once(char::is_whitespace).unwrap_or((trimmed, ""));
        let tail = tail.trim();
        let indent = raw.len() - trimmed.len();
        let after_word = &trimmed[word.len()..];
        let tail_col = indent + word.len() + (after_word.len() - after_word.trim_start().len()) + 1;
        let fail = |c: usize, m: String| anyhow::anyhow!("{origin}:{n}:{c}: {m}");
        let action = match word {
            "wait" => {
                Action::Wait(crate::args::parse_std_duration(tail).map_err(|e| fail(tail_col, format!("`wait`: {e}")))?)
            }
            "wake" => wake(tail, tail_col, base, &fail)?,
            "say" if tail.starts_with('"') => {
                let t: String = serde_json::from_str(tail)
                    .map_err(|_| fail(tail_col, "the typed text is not a closed \"…\" string".into()))?;
                Action::Type(t)
            }
            "say" if !tail.is_empty() => {
                let p = base.join(tail);
                let (rate, pcm) = crate::wav::read_pcm(&p).map_err(|e| fail(tail_col, format!("{e:#}")))?;
                Action::Say(resample_clip(&pcm, rate, MIC_RATE), tail.to_string())
            }
            "say" => return Err(fail(tail_col, "`say` needs a WAV file or a \"quoted text\"".into())),
            "press" | "down" | "up" => {
                out.extend(button_lines(word, tail, tail_col, n, buttons, &fail)?);
                continue;
            }
            "abort" if tail.is_empty() => Action::Abort,
            "abort" => return Err(fail(tail_col, "`abort` takes no argument".into())),
            "forge" if tail.is_empty() => Action::Forge,
            "forge" => return Err(fail(tail_col, "`forge` takes no argument".into())),
            other => {
                return Err(fail(
                    col(trimmed),
                    format!("unknown action `{other}`: use wait, wake, say, press, down, up, abort or forge"),
                ));
            }
        };
        out.push(Line { line: n, action });
    }
    if out.is_empty() {
        bail!("{origin}: the script has no actions");
    }
    Ok(out)
}

/// A line's error at a column.
type Fail<'a> = &'a dyn Fn(usize, String) -> anyhow::Error;

/// `wake [<word>] [<file.wav>]` (the tail starts at column `col`).
fn wake(tail: &str, col: usize, base: &Path, fail: Fail<'_>) -> Result<Action> {
    let (word, wav) = match tail.rsplit_once(char::is_whitespace) {
        Some((w, f)) if f.to_ascii_lowercase().ends_with(".wav") => (w.trim(), Some(f)),
        _ if tail.to_ascii_lowercase().ends_with(".wav") => ("", Some(tail)),
        _ => (tail, None),
    };
    let said = match wav {
        Some(f) => {
            let (rate, pcm) =
                crate::wav::read_pcm(&base.join(f)).map_err(|e| fail(col + tail.len() - f.len(), format!("{e:#}")))?;
            resample_clip(&pcm, rate, MIC_RATE)
        }
        None => Vec::new(),
    };
    let word = if word.is_empty() { WAKE_WORD } else { word };
    Ok(Action::Wake(word.to_string(), said))
}

/// `press <button> [how]`, `down <button>`, `up <button>` as the finger's moves (line `n`).
fn button_lines(
    word: &str,
    tail: &str,
    col: usize,
    n: usize,
    buttons: &[ButtonSpec],
    fail: Fail<'_>,
) -> Result<Vec<Line>> {
    let (b, rest) = tail.split_once(char::is_whitespace).unwrap_or((tail, ""));
    if b.is_empty() {
        return Err(fail(col, format!("`{word}` needs a button, e.g. `{word} boot`")));
    }
    let Some(spec) = buttons.iter().find(|x| x.name == b) else {
        let names: Vec<&str> = buttons.iter().map(|b| b.name.as_str()).collect();
        return Err(fail(
            col,
            format!("the board has no button `{b}` (it has: {})", names.join(", ")),
        ));
    };
    let rest = rest.trim();
    let rest_col = col + b.len() + (tail.len() - b.len() - rest.len());
    let line = |action: Action| Line { line: n, action };
    let press = |pressed: bool| {
        line(Action::Button {
            button: b.to_string(),
            pressed,
        })
    };
    if word != "press" {
        if !rest.is_empty() {
            return Err(fail(rest_col, format!("`{word}` takes only the button")));
        }
        return Ok(vec![press(word == "down")]);
    }
    let clicks = rest
        .strip_suffix('x')
        .and_then(|c| c.parse::<u8>().ok())
        .filter(|c| *c > 0);
    let downs: Vec<Duration> = match rest {
        "" => vec![CLICK],
        "long" => vec![Duration::from_millis(u64::from(spec.long_press_ms()) + 500)],
        "double" => vec![CLICK; 2],
        _ if clicks.is_some() => vec![CLICK; usize::from(clicks.unwrap_or(1))],
        other => vec![crate::args::parse_std_duration(other).map_err(|e| {
            fail(
                rest_col,
                format!("`{other}`: after the button give long, double, <n>x or a duration ({e})"),
            )
        })?],
    };
    let mut out = Vec::new();
    for (i, d) in downs.into_iter().enumerate() {
        if i > 0 {
            out.push(line(Action::Wait(CLICK)));
        }
        out.push(press(true));
        out.push(line(Action::Wait(d)));
        out.push(press(false));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buttons() -> Vec<ButtonSpec> {
        serde_json::from_str(
            r#"[{"name":"boot","gpio":0,"click":"toggle_chat"},
                {"name":"touch","gpio":47,"press_down":"start_listening","press_up":"stop_listening"},
                {"name":"volume_up","gpio":40,"click":"volume_up","long_press":"volume_max","long_press_time":1000}]"#,
        )
        .unwrap()
    }

    fn err(text: &str) -> String {
        parse(Path::new("u.txt"), text, &buttons()).unwrap_err().to_string()
    }

    fn down(b: &str, pressed: bool) -> Action {
        Action::Button {
            button: b.into(),
            pressed,
        }
    }

    #[test]
    fn every_action_parses() {
        let s = parse(
            Path::new("u.txt"),
            "# a user\nwait 1s\nwake\nwake 小爱同学\nsay \"把声音调小一点\"\npress boot\nabort\ndown touch\nup touch\n",
            &buttons(),
        )
        .unwrap();
        let actions: Vec<&Action> = s.iter().map(|l| &l.action).collect();
        assert_eq!(
            actions,
            [
                &Action::Wait(Duration::from_secs(1)),
                &Action::Wake(WAKE_WORD.into(), Vec::new()),
                &Action::Wake("小爱同学".into(), Vec::new()),
                &Action::Type("把声音调小一点".into()),
                &down("boot", true),
                &Action::Wait(CLICK),
                &down("boot", false),
                &Action::Abort,
                &down("touch", true),
                &down("touch", false),
            ]
        );
        assert_eq!(s[4].line, 6, "a press's parts keep its line");
        assert_eq!(s[6].line, 6);
        assert_eq!(s[9].line, 9);
    }

    #[test]
    fn a_press_says_how_long_the_finger_stays_down() {
        let held = |line: &str| -> Vec<Action> {
            parse(Path::new("u.txt"), line, &buttons())
                .unwrap()
                .into_iter()
                .map(|l| l.action)
                .collect()
        };
        assert_eq!(
            held("press touch 3s\n"),
            [
                down("touch", true),
                Action::Wait(Duration::from_secs(3)),
                down("touch", false)
            ]
        );
        assert_eq!(
            held("press volume_up long\n"),
            [
                down("volume_up", true),
                Action::Wait(Duration::from_millis(1500)),
                down("volume_up", false)
            ],
            "the board's own long press time (1000 ms) + 500"
        );
        assert_eq!(
            held("press boot long\n")[1],
            Action::Wait(Duration::from_millis(2000)),
            "the component's 1500 ms when the board gives none"
        );
        assert_eq!(
            held("press boot double\n"),
            [
                down("boot", true),
                Action::Wait(CLICK),
                down("boot", false),
                Action::Wait(CLICK),
                down("boot", true),
                Action::Wait(CLICK),
                down("boot", false)
            ]
        );
        assert_eq!(held("press boot 3x\n").len(), 3 * 3 + 2);
    }

    #[test]
    fn a_wake_word_may_carry_its_audio() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets").join("u.txt");
        let s = parse(
            &script,
            "wake 你好小智 utterance-2s.wav\nwake utterance-2s.wav\n",
            &buttons(),
        )
        .unwrap();
        for (l, word) in s.iter().zip(["你好小智", WAKE_WORD]) {
            let Action::Wake(w, said) = &l.action else {
                panic!("{:?}", l.action)
            };
            assert_eq!(w, word);
            assert_eq!(said.len(), 32_000, "2 s at 16 kHz");
        }
    }

    #[test]
    fn bad_lines_say_where() {
        assert!(
            err("jump\n").starts_with("u.txt:1:1: unknown action `jump`"),
            "{}",
            err("jump\n")
        );
        assert!(err("wait soon\n").starts_with("u.txt:1:6:"), "{}", err("wait soon\n"));
        assert!(
            err("  press nope\n").starts_with("u.txt:1:9: the board has no button `nope`"),
            "{}",
            err("  press nope\n")
        );
        assert!(
            err("  press nope\n").contains("(it has: boot, touch, volume_up)"),
            "{}",
            err("  press nope\n")
        );
        assert!(
            err("press boot soon\n").starts_with("u.txt:1:12:"),
            "{}",
            err("press boot soon\n")
        );
        assert!(
            err("press boot 0x\n").starts_with("u.txt:1:12:"),
            "{}",
            err("press boot 0x\n")
        );
        assert!(
            err("down touch 3s\n").starts_with("u.txt:1:12:"),
            "{}",
            err("down touch 3s\n")
        );
        assert!(err("up\n").starts_with("u.txt:1:3:"), "{}", err("up\n"));
        assert!(
            err("say nothere.wav\n").starts_with("u.txt:1:5:"),
            "{}",
            err("say nothere.wav\n")
        );
        assert!(err("say \"open\n").starts_with("u.txt:1:5:"), "{}", err("say \"open\n"));
        assert!(err("abort now\n").starts_with("u.txt:1:7:"), "{}", err("abort now\n"));
        assert!(
            err("wake 你好小智 gone.wav\n").starts_with("u.txt:1:"),
            "{}",
            err("wake 你好小智 gone.wav\n")
        );
        assert!(err("# only a comment\n").contains("no actions"));
    }
}
