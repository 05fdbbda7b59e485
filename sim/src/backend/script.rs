//! Backend scripts: what the "LLM" of `xiaozhi-twin backend` does once discovery is over.
//!
//! One step a line; `#` starts a comment. A step may be prefixed with `@N` to run only on the
//! Nth connection of the same device (1-based: `@2` is the connection after a reboot).
//!
//! ```text
//! call <tool> [<json arguments>]   call and wait for the reply (or its timeout)
//! send <tool> [<json arguments>]   call without waiting (replies may overtake each other)
//! wait <duration>                  e.g. 500ms, 2s
//! raw <text>                       a payload inside this backend's envelope (sent as-is if not JSON)
//! frame <text>                     a whole text frame, no envelope
//! garbage                          bytes that are not a WebSocket frame, then nothing more
//! vanish                           drop TCP without a close frame (the backend process lives on)
//! close                            a WebSocket close frame
//! await utterance                  wait until the device has said something (listen stop,
//!                                  listen detect, or the end of voice in its microphone audio)
//! speak "<text>" [for <duration>] [tone <Hz> <dBFS> | wav <file>]
//!                                  say a sentence (default: 250 ms a character, the built-in
//!                                  speech-like voice); speak, call and send lines in a row form
//!                                  one turn, and any other line (or the end) sends `tts stop`
//! repeat                           start over from the first step (a turn loop: an `await
//!                                  utterance`, or a `wait` of more than 0 ms, must come before)
//! ```
//!
//! A sentence may name its listener: `{device}` becomes the device's id (its `Device-Id`
//! header) and `{turn}` the number of utterances heard on this connection so far (at least 1),
//! so every device of a fleet hears its own words ([`fill`]).

use serde_json::Value;

use crate::time::{SimDuration, parse_duration};
use crate::voice::speak::check_sound;

/// One step of a script.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `call`/`send <tool> [<json arguments>]`: call a device tool.
    Call {
        /// The device's tool name, e.g. `self.get_device_status`.
        tool: String,
        /// The arguments object (`{}` when none given).
        args: Value,
        /// `call` (wait for the reply or its timeout) rather than `send` (fire and go on).
        wait: bool,
    },
    /// `wait <duration>`: do nothing for this long (virtual time).
    Wait(SimDuration),
    /// `raw <text>`: a payload inside this backend's envelope (sent as-is if not JSON).
    Raw(String),
    /// `frame <text>`: a whole text frame, no envelope.
    Frame(String),
    /// `garbage`: bytes that are not a WebSocket frame, then nothing more.
    Garbage,
    /// `vanish`: drop TCP without a close frame (the backend process lives on).
    Vanish,
    /// `disconnect`: the device's connection drops. Over WebSocket that is `vanish`; over MQTT +
    /// UDP the gateway drops the device's MQTT connection (the bridge ends with it, and the
    /// device's UDP socket stays open).
    Disconnect,
    /// `close`: a WebSocket close frame.
    Close,
    /// `await utterance`: wait until the device has said something.
    AwaitUtterance,
    /// `repeat`: start over from the connection's first step.
    Repeat,
    /// `speak "<text>" [for <duration>] [tone <Hz> <dBFS> | wav <file>]`.
    Speak {
        /// The sentence (its `sentence_start` text).
        text: String,
        /// How long it lasts (`None`: from the text's length).
        duration: Option<SimDuration>,
        /// What it sounds like.
        voice: SpeakVoice,
    },
}

/// What a `speak` line sounds like.
#[derive(Clone, Debug, PartialEq)]
pub enum SpeakVoice {
    /// The built-in speech-like voice.
    Default,
    /// A sine: frequency (Hz) and level (dBFS).
    Tone(f64, f64),
    /// A WAV file (loaded by whoever runs the script).
    Wav(String),
}

impl Command {
    /// Whether this step belongs to a speaking turn (speak, call and send lines in a row).
    pub fn continues_turn(&self) -> bool {
        matches!(self, Command::Speak { .. } | Command::Call { .. })
    }

    /// Whether this step makes the script wait for something to happen (what a `repeat` loop
    /// needs, or it would go round forever at one instant).
    pub fn pauses(&self) -> bool {
        match self {
            Command::AwaitUtterance => true,
            Command::Wait(d) => *d > SimDuration::ZERO,
            _ => false,
        }
    }
}

/// A step and the connection it is limited to.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// 1-based line number in the file.
    pub line: usize,
    /// Only on this connection of the device (1-based), or on every connection.
    pub only_on: Option<u32>,
    /// What to do.
    pub step: Command,
}

/// The placeholders a sentence may hold, and what [`fill`] puts in their place.
pub const PLACEHOLDERS: [&str; 2] = ["{device}", "{turn}"];

/// `text` as said to `device` on its `turn`: each placeholder replaced (a text without one is
/// borrowed as it is).
pub fn fill<'a>(text: &'a str, device: &str, turn: u64) -> std::borrow::Cow<'a, str> {
    if !PLACEHOLDERS.iter().any(|p| text.contains(p)) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(text.replace("{device}", device).replace("{turn}", &turn.to_string()))
}

/// A parsed script.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Script {
    /// The steps in file order (blank and comment lines dropped).
    pub lines: Vec<Line>,
}

/// What is wrong with one line, and at which 1-based column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{column}: {message}")]
pub struct ScriptLineError {
    /// 1-based column in the line.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl ScriptLineError {
    fn at(column: usize, message: impl Into<String>) -> ScriptLineError {
        ScriptLineError {
            column,
            message: message.into(),
        }
    }
}

/// `origin:line:column: message`.
#[derive(Debug, thiserror::Error)]
#[error("{origin}:{line}:{column}: {message}")]
pub struct ScriptError {
    /// Where the script came from (a file path), for the message.
    pub origin: String,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column in that line.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl Script {
    /// Steps for the `n`th connection (1-based) of a device.
    pub fn steps_for(&self, n: u32) -> impl Iterator<Item = &Line> {
        self.lines.iter().filter(move |l| l.only_on.is_none_or(|k| k == n))
    }

    /// The first line whose sentence names its listener (`{device}` or `{turn}`), if any.
    pub fn personal_line(&self) -> Option<usize> {
        self.lines.iter().find_map(|l| match &l.step {
            Command::Speak { text, .. } if PLACEHOLDERS.iter().any(|p| text.contains(p)) => Some(l.line),
            _ => None,
        })
    }

    /// Parses a whole script; `origin` names it in errors. Fails at the first bad line.
    pub fn parse(origin: &str, text: &str) -> Result<Script, ScriptError> {
        let mut lines = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            if let Some(line) = parse_line(raw).map_err(|ScriptLineError { column, message }| ScriptError {
                origin: origin.to_string(),
                line: i + 1,
                column,
                message,
            })? {
                if line.step == Command::Repeat && !lines.iter().any(|l: &Line| l.step.pauses()) {
                    return Err(ScriptError {
                        origin: origin.to_string(),
                        line: i + 1,
                        column: raw.len() - raw.trim_start().len() + 1,
                        message: "`repeat` needs an `await utterance` (or a `wait` of more than 0 ms) before it: a loop that waits for nothing never ends".into(),
                    });
                }
                lines.push(Line { line: i + 1, ..line });
            }
        }
        Ok(Script { lines })
    }
}

/// Parses one line (`None` for blanks and comments); errors carry a 1-based column.
pub fn parse_line(raw: &str) -> Result<Option<Line>, ScriptLineError> {
    let indent = raw.len() - raw.trim_start().len();
    let mut rest = raw.trim_start();
    if rest.is_empty() || rest.starts_with('#') {
        return Ok(None);
    }
    let col = |s: &str| raw.len() - s.len() + 1;
    let mut only_on = None;
    if let Some(after) = rest.strip_prefix('@') {
        let (n, tail) = after.split_once(char::is_whitespace).unwrap_or((after, ""));
        match n.parse::<u32>() {
            Ok(k) if k >= 1 => only_on = Some(k),
            _ => {
                return Err(ScriptLineError::at(
                    indent + 1,
                    format!("`@{n}`: expected a connection number from 1, e.g. `@2 call ...`"),
                ));
            }
        }
        rest = tail.trim_start();
    }
    let (word, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let tail = tail.trim();
    let tail_col = if tail.is_empty() {
        col(rest) + word.len()
    } else {
        col(tail)
    };
    let step = match word {
        "call" | "send" => {
            let (tool, args) = tail.split_once(char::is_whitespace).unwrap_or((tail, ""));
            if tool.is_empty() {
                return Err(ScriptLineError::at(
                    tail_col,
                    format!("`{word}` needs a tool name, e.g. `{word} self.get_device_status`"),
                ));
            }
            let args = args.trim();
            let args = if args.is_empty() {
                Value::Object(Default::default())
            } else {
                serde_json::from_str::<Value>(args).map_err(|e| {
                    ScriptLineError::at(
                        raw.len() - args.len() - (raw.len() - raw.trim_end().len()) + e.column(),
                        format!("arguments are not JSON: {}", strip_position(&e.to_string())),
                    )
                })?
            };
            Command::Call {
                tool: tool.to_string(),
                args,
                wait: word == "call",
            }
        }
        "wait" => Command::Wait(parse_duration(tail).map_err(|e| ScriptLineError::at(tail_col, e.to_string()))?),
        "raw" if !tail.is_empty() => Command::Raw(tail.to_string()),
        "frame" if !tail.is_empty() => Command::Frame(tail.to_string()),
        "raw" | "frame" => {
            return Err(ScriptLineError::at(
                tail_col,
                format!("`{word}` needs the text to send"),
            ));
        }
        "garbage" | "vanish" | "close" | "disconnect" | "repeat" if !tail.is_empty() => {
            return Err(ScriptLineError::at(tail_col, format!("`{word}` takes no argument")));
        }
        "garbage" => Command::Garbage,
        "vanish" => Command::Vanish,
        "disconnect" => Command::Disconnect,
        "close" => Command::Close,
        "repeat" => Command::Repeat,
        "await" if tail == "utterance" => Command::AwaitUtterance,
        "await" => {
            return Err(ScriptLineError::at(
                tail_col,
                "`await` takes `utterance`: `await utterance`",
            ));
        }
        "speak" => parse_speak(tail).map_err(|e| ScriptLineError::at(tail_col + e.column, e.message))?,
        other => {
            return Err(ScriptLineError::at(
                col(rest),
                format!(
                    "unknown step `{other}`: use call, send, wait, raw, frame, garbage, vanish, close, await, speak or repeat"
                ),
            ));
        }
    };
    Ok(Some(Line { line: 0, only_on, step }))
}

/// `"<text>" [for <duration>] [tone <Hz> <dBFS> | wav <file>]`; errors carry a 0-based offset
/// into `tail`.
fn parse_speak(tail: &str) -> Result<Command, ScriptLineError> {
    let usage = "e.g. `speak \"音量已调小\" for 2s tone 440 -12`";
    if !tail.starts_with('"') {
        return Err(ScriptLineError::at(
            0,
            format!("`speak` needs the sentence in double quotes, {usage}"),
        ));
    }
    let mut de = serde_json::Deserializer::from_str(tail).into_iter::<String>();
    let text = match de.next() {
        Some(Ok(t)) => t,
        _ => {
            return Err(ScriptLineError::at(
                0,
                format!("the sentence is not a closed \"…\" string, {usage}"),
            ));
        }
    };
    let mut pos = de.byte_offset();
    let mut duration = None;
    let mut duration_at = 0;
    let mut voice = SpeakVoice::Default;
    let words: Vec<(usize, &str)> = {
        let mut v = Vec::new();
        let rest = &tail[pos..];
        let mut i = 0;
        for w in rest.split_whitespace() {
            let at = rest[i..].find(w).map_or(i, |k| i + k);
            v.push((pos + at, w));
            i = at + w.len();
        }
        v
    };
    let mut k = 0;
    while k < words.len() {
        let (at, w) = words[k];
        pos = at;
        let arg = |j: usize| words.get(k + j).copied();
        match w {
            "for" => {
                let (a, d) = arg(1).ok_or_else(|| ScriptLineError::at(at, "`for` needs a duration, e.g. `for 2s`"))?;
                duration = Some(parse_duration(d).map_err(|e| ScriptLineError::at(a, e.to_string()))?);
                duration_at = a;
                k += 2;
            }
            "tone" => {
                let (a, hz) = arg(1).ok_or_else(|| {
                    ScriptLineError::at(at, "`tone` needs a frequency and a level, e.g. `tone 440 -12`")
                })?;
                let (b, db) =
                    arg(2).ok_or_else(|| ScriptLineError::at(a, "`tone` needs a level in dBFS after the frequency"))?;
                let hz: f64 = hz
                    .parse()
                    .ok()
                    .filter(|h: &f64| *h > 0.0 && *h < 24_000.0)
                    .ok_or_else(|| ScriptLineError::at(a, format!("`{hz}` is not a frequency in Hz")))?;
                let db: f64 = db
                    .parse()
                    .ok()
                    .filter(|d: &f64| *d <= 0.0 && *d >= -120.0)
                    .ok_or_else(|| ScriptLineError::at(b, format!("`{db}` is not a level from -120 to 0 dBFS")))?;
                voice = SpeakVoice::Tone(hz, db);
                k += 3;
            }
            "wav" => {
                let (_, f) = arg(1).ok_or_else(|| ScriptLineError::at(at, "`wav` needs a file"))?;
                voice = SpeakVoice::Wav(f.to_string());
                k += 2;
            }
            other => {
                return Err(ScriptLineError::at(
                    at,
                    format!("unexpected `{other}` after the sentence: use for, tone or wav"),
                ));
            }
        }
    }
    let _ = pos;
    // A sound longer than ten minutes is refused here, where its line and column are known.
    check_sound(&text, duration).map_err(|e| ScriptLineError::at(duration_at, e.to_string()))?;
    Ok(Command::Speak { text, duration, voice })
}

/// serde_json's message without its own ` at line L column C` (the caller reports the place).
fn strip_position(message: &str) -> &str {
    message.find(" at line ").map_or(message, |i| &message[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_step_and_connection_prefix() {
        let s = Script::parse(
            "t",
            "# c\ncall self.audio_speaker.set_volume {\"volume\": 0}\n@1 call self.reboot\n@2 send self.get_device_status\nwait 1.5s\nraw {\"id\":9}\nframe hi\ngarbage\nvanish\nclose\n",
        )
        .unwrap();
        assert_eq!(s.lines.len(), 9);
        assert_eq!(s.lines[0].line, 2);
        assert_eq!(
            s.lines[0].step,
            Command::Call {
                tool: "self.audio_speaker.set_volume".into(),
                args: serde_json::json!({"volume": 0}),
                wait: true
            }
        );
        assert_eq!(s.lines[1].only_on, Some(1));
        assert!(matches!(&s.lines[2].step, Command::Call { wait: false, .. }));
        assert_eq!(s.lines[3].step, Command::Wait(SimDuration::from_millis(1500)));
        assert_eq!(s.steps_for(2).count(), 8);
        assert_eq!(s.steps_for(1).count(), 8);
        assert_eq!(s.steps_for(3).count(), 7);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = Script::parse("s.txt", "wait 1s\n  call x {\"a\": }\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 16), "{e}");
        assert!(e.to_string().starts_with("s.txt:2:16: arguments are not JSON"), "{e}");
        let e = Script::parse("s.txt", "jump 3\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        let e = Script::parse("s.txt", "@0 close\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        let e = Script::parse("s.txt", "wait soon\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 6));
        let e = Script::parse("s.txt", "close now\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 7));
        let e = Script::parse("s.txt", "speak hello\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 7), "{e}");
        let e = Script::parse("s.txt", "speak \"hi\" tone 440\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 17), "{e}");
        let e = Script::parse("s.txt", "speak \"hi\" for ever\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 16), "{e}");
        let e = Script::parse("s.txt", "await reply\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 7), "{e}");
    }

    #[test]
    fn repeat_loops_only_what_waits_for_something() {
        let s = Script::parse("s.txt", "await utterance\nspeak \"好\"\nrepeat\n").unwrap();
        assert_eq!(s.lines[2].step, Command::Repeat);
        assert!(Script::parse("s.txt", "wait 1s\nrepeat\n").is_ok());
        for (text, line) in [
            ("speak \"好\"\nrepeat\n", 2),
            ("wait 0s\n  repeat\n", 2),
            ("repeat\n", 1),
        ] {
            let e = Script::parse("s.txt", text).unwrap_err();
            assert_eq!(
                (e.line, e.message.contains("a loop that waits for nothing")),
                (line, true),
                "{e}"
            );
        }
        let e = Script::parse("s.txt", "await utterance\nrepeat 3\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 8), "{e}");
    }

    #[test]
    fn speak_and_await_parse() {
        let s = Script::parse(
            "t",
            "await utterance\nspeak \"音量已调小\" for 2s tone 440 -12\nspeak \"好\"\nspeak \"x y\" wav a.wav for 1s\n",
        )
        .unwrap();
        assert_eq!(s.lines[0].step, Command::AwaitUtterance);
        assert_eq!(
            s.lines[1].step,
            Command::Speak {
                text: "音量已调小".into(),
                duration: Some(SimDuration::from_secs(2)),
                voice: SpeakVoice::Tone(440.0, -12.0)
            }
        );
        assert_eq!(
            s.lines[2].step,
            Command::Speak {
                text: "好".into(),
                duration: None,
                voice: SpeakVoice::Default
            }
        );
        assert!(
            matches!(&s.lines[3].step, Command::Speak { text, voice: SpeakVoice::Wav(f), .. } if text == "x y" && f == "a.wav")
        );
    }

    #[test]
    fn a_sentence_names_its_listener_only_where_it_says_so() {
        assert_eq!(fill("好的，{device}，第 {turn} 次", "aa:bb", 3), "好的，aa:bb，第 3 次");
        assert!(matches!(fill("好的", "aa:bb", 3), std::borrow::Cow::Borrowed("好的")));
        assert_eq!(fill("{turn}{turn}", "", 12), "1212");
        let s = Script::parse(
            "s.txt",
            "await utterance\nspeak \"好\"\n# {device}\nspeak \"对 {turn}\"\n",
        )
        .unwrap();
        assert_eq!(s.personal_line(), Some(4));
        assert_eq!(Script::parse("s.txt", "speak \"好\"\n").unwrap().personal_line(), None);
    }
}
