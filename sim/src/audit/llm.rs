//! The built-in backend's stand-in LLM: what it understands of a request
//! ([`Understanding`], `backends/llm/understanding.yaml`) and how it acts on it ([`LlmSpec`],
//! one file per behaviour in `backends/llm/`), as data. No language model: a phrase list finds
//! the request's meaning, and the behaviour's flags decide whether it reads the value first,
//! reads it back, skips a repeat, asks back or mutes (docs/audit.md, "The stand-in LLM").
//!
//! [`Mind::respond`] answers one request through a [`Backend`]: calls that wait for their
//! outcome, and sentences. It never reads a clock: the driver runs the device meanwhile.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::condition::{Quantity, Val};
use crate::spec::{self, SpecError};

/// The stand-in's understanding, as shipped.
pub const UNDERSTANDING: &str = include_str!("../../../backends/llm/understanding.yaml");

/// The shipped behaviours: name and text.
pub const SHIPPED: &[(&str, &str)] = &[
    ("honest", include_str!("../../../backends/llm/honest.yaml")),
    ("trusting", include_str!("../../../backends/llm/trusting.yaml")),
    ("lazy", include_str!("../../../backends/llm/lazy.yaml")),
    ("asks-back", include_str!("../../../backends/llm/asks-back.yaml")),
    ("mute-happy", include_str!("../../../backends/llm/mute-happy.yaml")),
];

/// How the stand-in acts on what it understood.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSpec {
    /// Its name.
    pub name: String,
    /// What it does, in words.
    pub description: String,
    /// Reads the value (`self.get_device_status`) before a relative change, instead of guessing.
    #[serde(default)]
    pub reads_first: bool,
    /// After a `true`, reads the value back and claims only if it agrees.
    #[serde(default)]
    pub reads_back: bool,
    /// The second time an intent comes in one conversation, claims success without calling.
    #[serde(default)]
    pub skips_repeats: bool,
    /// Reads the value, then asks whether to change it instead of changing it.
    #[serde(default)]
    pub asks_back: bool,
    /// "Lower the volume" sets it to 0.
    #[serde(default)]
    pub lowers_to_mute: bool,
}

impl LlmSpec {
    /// A shipped behaviour by name.
    pub fn shipped(name: &str) -> Option<LlmSpec> {
        SHIPPED
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(n, text)| spec::from_yaml(&format!("backends/llm/{n}.yaml"), text).ok())
    }

    /// The shipped names, in order.
    pub fn names() -> Vec<&'static str> {
        SHIPPED.iter().map(|(n, _)| *n).collect()
    }

    /// A behaviour file of one's own.
    pub fn from_yaml(origin: &str, text: &str) -> Result<LlmSpec, SpecError> {
        spec::from_yaml(origin, text)
    }
}

/// One meaning a request can have.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Its name (the behaviour's memory of what was done is by name).
    pub name: String,
    /// Phrases that mean it (`#`: a number follows).
    pub hears: Vec<String>,
    /// A question about this quantity: read it and answer.
    #[serde(default)]
    pub reads: Option<String>,
    /// The tool that does it.
    #[serde(default)]
    pub tool: Option<String>,
    /// The value it sets: a number, a word, or `"#"` (the number heard).
    #[serde(default)]
    pub set: Option<Value>,
    /// A change relative to the value it knows.
    #[serde(default)]
    pub change: Option<f64>,
    /// What it says when done, by language (`{value}`: the value set).
    #[serde(default)]
    pub done: BTreeMap<String, String>,
}

/// Guessed values of relative changes.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Guess {
    /// For a change down.
    pub down: f64,
    /// For a change up.
    pub up: f64,
}

/// What the stand-in says, in one language.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Says {
    /// Anything it did not understand.
    pub chat: String,
    /// A tool it does not have.
    pub cannot: String,
    /// A call that failed (the failure handed to the LLM).
    pub failed: String,
    /// A readback that disagrees (`{quantity}`, `{value}`).
    pub mismatch: String,
    /// A question instead of an action.
    pub ask_back: String,
    /// The answer to a question.
    pub answer: String,
    /// Quantity names.
    pub quantities: BTreeMap<String, String>,
}

/// What the stand-in understands, and says.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Understanding {
    /// Meanings, first match wins.
    pub intents: Vec<Intent>,
    /// Guesses for relative changes.
    pub guess: Guess,
    /// The lowest value a relative change sets.
    pub floor: f64,
    /// Sentences by language.
    pub says: BTreeMap<String, Says>,
}

impl Understanding {
    /// The shipped understanding.
    pub fn shipped() -> Understanding {
        spec::from_yaml("backends/llm/understanding.yaml", UNDERSTANDING)
            .unwrap_or_else(|e| unreachable!("the shipped understanding parses (tested): {e}"))
    }

    /// The request's meaning, and the number heard after a `#` phrase.
    pub fn understand(&self, request: &str) -> Option<(&Intent, Option<f64>)> {
        let text = request.to_lowercase();
        self.intents.iter().find_map(|i| {
            i.hears.iter().find_map(|p| match p.split_once('#') {
                None => text.contains(p.as_str()).then_some((i, None)),
                Some((head, _)) => number_after(&text, head.trim_end()).map(|n| (i, Some(n))),
            })
        })
    }
}

/// The number right after an occurrence of `head` in `text` (spaces and `%` allowed around it).
fn number_after(text: &str, head: &str) -> Option<f64> {
    if head.is_empty() {
        return None;
    }
    let mut from = 0;
    while let Some(at) = text[from..].find(head) {
        let rest = text[from + at + head.len()..].trim_start();
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        if let Ok(n) = digits.trim_end_matches('.').parse::<f64>() {
            return Some(n);
        }
        from += at + head.len();
    }
    None
}

/// The language of a request: `zh` if it has a CJK character, else `en`.
pub fn language(request: &str) -> &'static str {
    if request.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)) {
        "zh"
    } else {
        "en"
    }
}

/// What came of a call, as the LLM is handed it.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The tool result the LLM sees, and whether it is a failure.
    Result {
        /// The text handed to the LLM.
        text: String,
        /// An error or `isError` reply, or a timeout handed to the LLM.
        failed: bool,
    },
    /// The backend spoke the outcome to the user itself; the LLM is bypassed.
    Spoken,
    /// Nothing will come (the connection is gone).
    Nothing,
}

/// What the stand-in drives: the backend's session.
pub trait Backend {
    /// Whether the backend registered `tool` for its LLM.
    fn offers(&self, tool: &str) -> bool;
    /// Calls `tool` and waits for its outcome.
    fn call(&mut self, tool: &str, args: Value) -> Outcome;
    /// Says a sentence.
    fn say(&mut self, text: &str);
}

/// The status tool the stand-in reads with.
pub const STATUS_TOOL: &str = crate::mcp::strings::TOOL_GET_DEVICE_STATUS;

/// One conversation's stand-in: the behaviour, and what it remembers.
pub struct Mind<'a> {
    llm: &'a LlmSpec,
    understanding: &'a Understanding,
    /// Values it knows, from its readbacks and its own successful calls.
    known: BTreeMap<Quantity, Val>,
    /// Intents it has carried out in this conversation.
    done: BTreeSet<String>,
}

impl<'a> Mind<'a> {
    /// A new conversation.
    pub fn new(llm: &'a LlmSpec, understanding: &'a Understanding) -> Mind<'a> {
        Mind {
            llm,
            understanding,
            known: BTreeMap::new(),
            done: BTreeSet::new(),
        }
    }

    /// Answers one request.
    pub fn respond(&mut self, be: &mut dyn Backend, request: &str) {
        let lang = language(request);
        let Some(says) = self.understanding.says.get(lang) else {
            return;
        };
        let Some((intent, heard)) = self.understanding.understand(request) else {
            be.say(&says.chat);
            return;
        };
        if let Some(q) = intent.reads.as_deref().and_then(Quantity::named) {
            match self.read(be, q) {
                Some(v) => be.say(&fill(&says.answer, says, q, &v)),
                None => be.say(&says.cannot),
            }
            return;
        }
        let Some(tool) = intent.tool.as_deref() else {
            be.say(&says.chat);
            return;
        };
        if !be.offers(tool) {
            be.say(&says.cannot);
            return;
        }
        let done_text = intent.done.get(lang).cloned().unwrap_or_default();
        if self.llm.skips_repeats && self.done.contains(&intent.name) {
            let v = intent.set.as_ref().and_then(|s| set_value(s, heard));
            be.say(&done_text.replace("{value}", &v.map(|v| v.to_string()).unwrap_or_default()));
            return;
        }
        let quantity = Quantity::of_tool(tool);
        if self.llm.asks_back
            && let Some(q) = quantity.filter(|q| *q != Quantity::Boots)
        {
            match self.read(be, q) {
                Some(v) => be.say(&fill(&says.ask_back, says, q, &v)),
                None => be.say(&says.cannot),
            }
            return;
        }
        let value = match (&intent.set, intent.change) {
            (Some(s), _) => set_value(s, heard),
            (None, Some(delta)) if self.llm.lowers_to_mute && delta < 0.0 => Some(Val::Num(0.0)),
            (None, Some(delta)) => {
                let q = quantity.unwrap_or(Quantity::Volume);
                if self.llm.reads_first && !self.known.contains_key(&q) {
                    self.read(be, q);
                }
                Some(Val::Num(match self.known.get(&q) {
                    Some(Val::Num(now)) => (now + delta).clamp(self.understanding.floor, 100.0),
                    _ if delta < 0.0 => self.understanding.guess.down,
                    _ => self.understanding.guess.up,
                }))
            }
            (None, None) => None,
        };
        let args = match (&value, tool_argument(tool)) {
            (Some(v), Some(name)) => {
                let mut m = serde_json::Map::new();
                m.insert(name.into(), json_of(v));
                Value::Object(m)
            }
            _ => Value::Object(serde_json::Map::new()),
        };
        match be.call(tool, args) {
            Outcome::Spoken | Outcome::Nothing => {}
            // A business `false` is no JSON-RPC error, but a model reads it as one.
            Outcome::Result { failed, text } if failed || is_false(&text) => be.say(&says.failed),
            Outcome::Result { .. } => {
                self.done.insert(intent.name.clone());
                if let (Some(q), Some(v)) = (quantity, &value) {
                    self.known.insert(q, v.clone());
                }
                let readable = quantity.filter(|q| *q != Quantity::Boots);
                if self.llm.reads_back
                    && let Some(q) = readable
                {
                    self.known.remove(&q);
                    let read = self.read(be, q);
                    let agrees = match (&read, &value) {
                        (Some(Val::Num(r)), Some(Val::Num(w))) => r.trunc() == w.trunc(),
                        (Some(r), Some(w)) => r == w,
                        _ => false,
                    };
                    match read {
                        _ if agrees => {}
                        Some(shown) => {
                            be.say(&fill(&says.mismatch, says, q, &shown));
                            return;
                        }
                        None => {
                            be.say(&says.failed);
                            return;
                        }
                    }
                }
                let shown = value.map(|v| v.to_string()).unwrap_or_default();
                be.say(&done_text.replace("{value}", &shown));
            }
        }
    }

    /// Reads `q` with the status tool; remembers and returns it.
    fn read(&mut self, be: &mut dyn Backend, q: Quantity) -> Option<Val> {
        if !be.offers(STATUS_TOOL) {
            return None;
        }
        let Outcome::Result { text, failed: false } = be.call(STATUS_TOOL, Value::Object(serde_json::Map::new()))
        else {
            return None;
        };
        let v = status_value(&text, q)?;
        self.known.insert(q, v.clone());
        Some(v)
    }
}

/// Whether a tool result is the text `false` (bare, or in a `CallToolResult` or content array).
fn is_false(text: &str) -> bool {
    let inner = serde_json::from_str::<Value>(text).ok().and_then(|v| {
        let content = v.get("content").cloned().unwrap_or(v);
        content.get(0)?.get("text")?.as_str().map(str::to_string)
    });
    text.trim() == "false" || inner.as_deref().map(str::trim) == Some("false")
}

/// The value a `set` names: the number heard for `"#"`.
fn set_value(set: &Value, heard: Option<f64>) -> Option<Val> {
    match set {
        Value::String(s) if s == "#" => heard.map(Val::Num),
        other => Val::of_json(other),
    }
}

/// The argument a tool's value goes in (the tools the stand-in knows).
fn tool_argument(tool: &str) -> Option<&'static str> {
    match tool {
        "self.audio_speaker.set_volume" => Some("volume"),
        "self.screen.set_brightness" => Some("brightness"),
        "self.screen.set_theme" => Some("theme"),
        _ => None,
    }
}

/// A value as a JSON argument: a whole number as an integer.
fn json_of(v: &Val) -> Value {
    match v {
        Val::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => Value::from(*n as i64),
        Val::Num(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
        Val::Word(w) => Value::String(w.clone()),
    }
}

fn quantity_name(says: &Says, q: Quantity) -> &str {
    says.quantities.get(q.name()).map_or(q.name(), String::as_str)
}

fn fill(template: &str, says: &Says, q: Quantity, v: &Val) -> String {
    template
        .replace("{quantity}", quantity_name(says, q))
        .replace("{value}", &v.to_string())
}

/// `q` in a status text as an LLM is handed it: the device's JSON, or a whole `CallToolResult`
/// (`mcp-go-strict`) or content array (`java-cap32`) around it.
pub fn status_value(text: &str, q: Quantity) -> Option<Val> {
    let v: Value = serde_json::from_str(text).ok()?;
    let inner = |v: &Value| -> Option<Value> {
        let content = v.get("content").unwrap_or(v);
        let t = content.get(0)?.get("text")?.as_str()?;
        serde_json::from_str(t).ok()
    };
    let status = inner(&v).unwrap_or(v);
    let (group, key) = match q {
        Quantity::Volume => ("audio_speaker", "volume"),
        Quantity::Brightness => ("screen", "brightness"),
        Quantity::Theme => ("screen", "theme"),
        Quantity::Boots => return None,
    };
    Val::of_json(status.get(group)?.get(key)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_data_parses_and_understands_the_default_batterys_phrasings() {
        let u = Understanding::shipped();
        for name in LlmSpec::names() {
            assert!(LlmSpec::shipped(name).is_some(), "{name}");
        }
        let meaning = |s: &str| u.understand(s).map(|(i, n)| (i.name.clone(), n));
        assert_eq!(meaning("音量调到55.5"), Some(("volume_set".into(), Some(55.5))));
        assert_eq!(
            meaning("set the volume to 150"),
            Some(("volume_set".into(), Some(150.0)))
        );
        assert_eq!(meaning("volume 50 please"), Some(("volume_set".into(), Some(50.0))));
        assert_eq!(meaning("把声音调小一点"), Some(("volume_down".into(), None)));
        assert_eq!(meaning("make it louder please"), Some(("volume_up".into(), None)));
        assert_eq!(meaning("现在音量是多少"), Some(("volume_query".into(), None)));
        assert_eq!(meaning("switch the light on"), Some(("lamp_on".into(), None)));
        assert_eq!(meaning("今天天气怎么样"), None);
        assert_eq!(language("turn it down"), "en");
        assert_eq!(language("调小"), "zh");
    }

    #[test]
    fn a_status_value_is_read_through_every_wrapping_a_backend_hands_its_llm() {
        let bare = r#"{"audio_speaker":{"volume":70},"screen":{"brightness":80,"theme":"light"}}"#;
        assert_eq!(status_value(bare, Quantity::Volume), Some(Val::Num(70.0)));
        assert_eq!(status_value(bare, Quantity::Theme), Some(Val::Word("light".into())));
        let wrapped = serde_json::json!({"content":[{"type":"text","text": bare}],"isError":false}).to_string();
        assert_eq!(status_value(&wrapped, Quantity::Brightness), Some(Val::Num(80.0)));
        let array = serde_json::json!([{"type":"text","text": bare}]).to_string();
        assert_eq!(status_value(&array, Quantity::Volume), Some(Val::Num(70.0)));
        assert_eq!(status_value("true", Quantity::Volume), None);
    }
}
