//! The simulated user of `connect --script FILE`: timed device-side actions, one a line, run in
//! order against the wall clock (`#` starts a comment).
//!
//! ```text
//! wait <duration>          do nothing for this long (e.g. 2s, 500ms)
//! wake [<word>]            the wake word is detected (default 你好小智): listen detect, listening
//! say <file.wav>           speak the file into the microphone in real time (then silence)
//! say "<text>"             typed input: listen detect with the text, as py-xiaozhi sends it
//!                          (not firmware behaviour; the report labels it)
//! press <button> [long]    a board button (boot: toggle chat; volume_up, …)
//! abort                    interrupt the speech (a BOOT click while speaking)
//! ```
//!
//! Every file is read and every line checked before anything is dialled; a bad line is
//! `file:line:column: message`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use xiaozhi_sim::voice::codec::{MIC_RATE, resample_clip};

/// One action.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Wait(Duration),
    Wake(String),
    /// 16 kHz samples and the file they came from.
    Say(Vec<i16>, String),
    Type(String),
    Press {
        button: String,
        long: bool,
    },
    Abort,
}

/// A line of the script.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub line: usize,
    pub action: Action,
}

/// The default wake word.
pub const WAKE_WORD: &str = "你好小智";

/// Parses a script; WAV paths are relative to the script's folder. `buttons` are the board's.
pub fn parse(path: &Path, text: &str, buttons: &[String]) -> Result<Vec<Line>> {
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
            "wake" => Action::Wake(if tail.is_empty() {
                WAKE_WORD.to_string()
            } else {
                tail.to_string()
            }),
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
            "press" => {
                let (b, rest) = tail.split_once(char::is_whitespace).unwrap_or((tail, ""));
                if b.is_empty() {
                    return Err(fail(tail_col, "`press` needs a button, e.g. `press boot`".into()));
                }
                if !buttons.iter().any(|x| x == b) {
                    return Err(fail(
                        tail_col,
                        format!("the board has no button `{b}` (it has: {})", buttons.join(", ")),
                    ));
                }
                let long = match rest.trim() {
                    "" => false,
                    "long" => true,
                    other => {
                        return Err(fail(
                            tail_col + b.len() + 1,
                            format!("`{other}`: only `long` may follow the button"),
                        ));
                    }
                };
                Action::Press {
                    button: b.to_string(),
                    long,
                }
            }
            "abort" if tail.is_empty() => Action::Abort,
            "abort" => return Err(fail(tail_col, "`abort` takes no argument".into())),
            other => {
                return Err(fail(
                    col(trimmed),
                    format!("unknown action `{other}`: use wait, wake, say, press or abort"),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(Path::new("u.txt"), text, &["boot".into(), "volume_up".into()])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn every_action_parses() {
        let s = parse(
            Path::new("u.txt"),
            "# a user\nwait 1s\nwake\nwake 小爱同学\nsay \"把声音调小一点\"\npress boot\npress volume_up long\nabort\n",
            &["boot".into(), "volume_up".into()],
        )
        .unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s[0].action, Action::Wait(Duration::from_secs(1)));
        assert_eq!(s[1].action, Action::Wake(WAKE_WORD.into()));
        assert_eq!(s[3].action, Action::Type("把声音调小一点".into()));
        assert_eq!(
            s[5].action,
            Action::Press {
                button: "volume_up".into(),
                long: true
            }
        );
        assert_eq!(s[6].line, 8);
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
            err("say nothere.wav\n").starts_with("u.txt:1:5:"),
            "{}",
            err("say nothere.wav\n")
        );
        assert!(err("say \"open\n").starts_with("u.txt:1:5:"), "{}", err("say \"open\n"));
        assert!(err("abort now\n").starts_with("u.txt:1:7:"), "{}", err("abort now\n"));
        assert!(err("# only a comment\n").contains("no actions"));
    }
}
