//! `BackendSpec`: a backend personality as data (docs/reference/backends.md §10), loaded from
//! `backends/<name>.yaml`. The shipped personalities are embedded.

use serde::Deserialize;

use crate::spec::{self, SpecError};
use crate::time::Duration;

/// When `initialize` is sent.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum InitAt {
    /// Right after answering the device hello (most servers).
    AfterHello,
    /// At accept, before the device hello (go-anime): the device answers without a session id.
    Accept,
}

/// How the session id is made.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SessionIdScheme {
    /// A uuid4-shaped id, derived from the connection's seed (deterministic).
    Uuid,
    /// `device-` + MAC with `:` → `_` (stable across reconnects).
    DeviceMac,
}

/// The envelope around MCP payloads toward the device.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeStyle {
    /// `{"type": "mcp", "payload": …}` in Python `json.dumps` style.
    Python,
    /// `{"type":"mcp","payload":…}`.
    Plain,
    /// `{"session_id":…,"type":"mcp","payload":…}`.
    SessionId,
    /// `{"type":"mcp","sessionId":…,"payload":{…,"result":null,"error":null}}`.
    Java,
}

/// How tool names are turned into LLM function names.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NameMapping {
    /// Every char outside `[A-Za-z0-9_-]` and U+4E00–U+9FFF becomes `_`.
    Python,
    /// Only `.` → `_`.
    Dots,
    /// Each run of chars outside `[A-Za-z0-9_-]` → one `_`, trimmed, at most 64 chars.
    Runs64,
}

/// What the LLM receives for a result.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ResultToLlm {
    /// `content[0].text` (errors: `MCP错误: <message>`).
    Text,
    /// The whole CallToolResult as JSON (`isError` only when true).
    ResultJson,
    /// All text items joined with `\n` (errors: the error object as JSON).
    JoinedText,
    /// The JSON of the `content` array.
    ContentJson,
    /// `"true"`/`"false"` become JSON booleans (console path).
    Boolean,
    /// The text, but every failure becomes one generic string.
    Generic,
}

/// Where the text a `tools/call` outcome becomes goes (docs/reference/backends.md §2 items 6–7, §9).
#[derive(Clone, Copy, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// A tool result handed to the LLM, which writes the answer (a second LLM request).
    Llm,
    /// Spoken to the user through TTS as it is, the LLM bypassed (no second LLM request).
    User,
    /// Returned to the HTTP caller of a console command: no LLM, nothing spoken.
    Console,
}

/// Pending calls when the connection closes.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CallOnClose {
    /// Nothing happens until each call's own timeout.
    Wait,
    /// All pending requests fail at once.
    Fail,
}

/// A personality.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    /// The personality's name, as `--backend` takes it (`xinnan-py`, `rust-first-page`, …).
    pub name: String,
    /// One paragraph on what this backend does, for `--help` and reports.
    pub description: String,
    /// The code the behaviour was read from (docs/reference/backends.md §0).
    pub based_on: String,
    /// Only devices whose hello has `features.mcp: true` get MCP traffic.
    pub requires_mcp_feature: bool,
    /// An `mcp` frame before such a hello closes the connection.
    #[serde(default)]
    pub close_on_mcp_before_hello: bool,
    /// The server hello; `{session_id}` and `{audio_params}` are filled in.
    pub hello: String,
    /// How the hello's session id is made.
    pub session_id: SessionIdScheme,
    /// Echo the device's own `audio_params` in the hello (else `audio_params` below).
    #[serde(default)]
    pub echo_audio_params: bool,
    /// The hello's `audio_params`, as JSON, when not echoing the device's.
    #[serde(default)]
    pub audio_params: String,
    /// When `initialize` is sent (after the device hello, or at accept).
    pub init_at: InitAt,
    /// The JSON-RPC id of `initialize` (1 for most servers, 10000 for cloud-gateway and java-joey).
    pub init_id: i64,
    /// The `initialize` params, as JSON.
    pub initialize_params: String,
    /// Sent after the initialize result, if any (a whole JSON-RPC payload).
    #[serde(default)]
    pub initialized_notification: Option<String>,
    /// Gap between the initialize result and the first `tools/list`.
    pub list_delay: Duration,
    /// `tools/list` ids: always `list_id_from` (fixed) or counting up from it.
    pub list_id_fixed: bool,
    /// The first (or only) `tools/list` id.
    pub list_id_from: i64,
    /// Params of the first page (`null` = no params member at all).
    #[serde(default)]
    pub list_first_params: Option<String>,
    /// Follow a non-empty `nextCursor` with another `tools/list` (rust-sanye does not: first page only).
    pub follow_cursor: bool,
    /// Stop (discarding the page) when the tools would exceed this many.
    #[serde(default)]
    pub tool_cap: Option<usize>,
    /// Add `"withUserTools":true` to every `tools/list` (the cloud-gateway console path).
    #[serde(default)]
    pub with_user_tools: bool,
    /// The first `tools/call` id; later calls count up from it.
    pub call_id_from: i64,
    /// How long a `tools/call` waits for its reply (e.g. 30 s; rust-sanye 15 s).
    pub call_timeout: Duration,
    /// How long `initialize` and each `tools/list` wait for their reply.
    pub discovery_timeout: Duration,
    /// The envelope around MCP payloads toward the device.
    pub envelope: EnvelopeStyle,
    /// Echo a non-JSON text frame back to the device verbatim (xinnan-py, go-anime).
    pub echo_invalid_json: bool,
    /// What happens to pending requests when the connection closes.
    pub pending_on_close: CallOnClose,
    /// Walk the whole `tools/list` again this long after each finished discovery (go-mcpgo: 2 min).
    #[serde(default)]
    pub heartbeat: Option<Duration>,
    /// How tool names become LLM function names.
    pub name_mapping: NameMapping,
    /// What the text handed on for a call's reply is made of.
    pub result_to_llm: ResultToLlm,
    /// Where a successful result's text goes.
    #[serde(default = "to_llm")]
    pub results_to: Delivery,
    /// Where a failure's text goes (JSON-RPC error, `isError: true`, timeout, unknown tool);
    /// `results_to` when absent.
    #[serde(default)]
    pub failures_to: Option<Delivery>,
    /// A result text that is a JSON object with an `action` key is obeyed (xinnan-py:
    /// `RESPONSE`/`ERROR`/`NOTFOUND` speak `response`, `NONE` drops it, `REQLLM` asks the LLM).
    #[serde(default)]
    pub obeys_action_json: bool,
    /// What a call of a tool the backend never registered becomes (no traffic); `{name}` is the
    /// tool, `{llm_name}` its LLM function name. Absent: the text is not modelled.
    #[serde(default)]
    pub unknown_tool_text: Option<String>,
    /// The text for a call that timed out.
    pub timeout_text: String,
    /// A late reply carrying the initialize id re-runs the listing (xinnan-py matches ids 1/2).
    #[serde(default)]
    pub late_init_reply_relists: bool,
    /// Calls of tools the backend did not register produce an error without traffic.
    #[serde(default)]
    pub refuse_unknown_tools: bool,
    /// An empty arguments object is sent as `"arguments":null` (mcp-go's `any` + omitempty).
    #[serde(default)]
    pub null_empty_arguments: bool,
    /// How this backend talks: its voice turn (absent: it never speaks, only counts audio).
    #[serde(default)]
    pub voice: Option<VoiceSpec>,
}

/// How binary audio frames toward the device are framed.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BinaryFraming {
    /// The Opus packet alone, whatever `Protocol-Version` the device announced (xinnan-py).
    Raw,
    /// Packed for the device's `Protocol-Version` (1, 2 or 3).
    DeviceVersion,
}

/// A backend's voice behaviour (docs/reference/voice.md §5).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoiceSpec {
    /// At the end of an utterance: an `stt` echo of the user's words, then `tts start` (before
    /// the LLM runs).
    pub stt_then_tts_start: bool,
    /// An `stt` frame before each `tools/call`; `{tool}` is the LLM's function name (xinnan-py:
    /// `% {tool}`). Absent: none.
    #[serde(default)]
    pub tool_call_stt: Option<String>,
    /// The `llm` emotion sent before a turn's first sentence (absent: none).
    #[serde(default)]
    pub emotion: Option<String>,
    /// The TTS encoder's rate, Hz (24000: the server's `opus_encoder_utils` default).
    pub tts_rate: u32,
    /// How binary frames are framed.
    pub binary: BinaryFraming,
    /// How the end of an utterance is found in the received microphone audio.
    pub vad: VadSpec,
    /// What a `listen detect` text does (absent: every text is chatted as it is).
    #[serde(default)]
    pub detect: Option<DetectSpec>,
}

/// The end-of-utterance rule (docs/reference/voice.md §5.1): xinnan-py's Silero VAD windowing
/// and its ASR minimum, with an energy level per chunk standing in for the model's speech
/// probability (the twin carries no model weights).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VadSpec {
    /// Samples (16 kHz) judged at a time (Silero: 512).
    pub chunk: usize,
    /// A chunk at or above this RMS level (sine-referenced dBFS) is voice (Silero: probability
    /// ≥ `threshold` 0.5).
    pub voice_dbfs: f64,
    /// A chunk at or below this level is not voice (probability ≤ `threshold_low` 0.3); between
    /// the two, a chunk is what the chunk before it was.
    pub quiet_dbfs: f64,
    /// The sliding window of chunk verdicts (5).
    pub window: usize,
    /// The window says voice when at least this many of its chunks are voice (3).
    pub voiced_in_window: usize,
    /// Voice has stopped once the window says no voice this long after it last said voice
    /// (`min_silence_duration_ms` 200).
    pub min_silence: Duration,
    /// Before any voice, only the newest this many 60 ms frames are kept (10).
    pub keep_before_voice: usize,
    /// An utterance of this many frames or fewer is never recognised (15).
    pub min_frames: usize,
}

/// What a `listen detect` text does (xinnan-py: `listenMessageHandler.py`, `helloHandle.py`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectSpec {
    /// The server's `wakeup_words` (compared after punctuation and spaces are removed).
    pub wake_words: Vec<String>,
    /// `enable_greeting`: a wake word starts a chat with `greeting_text`; off, the word is
    /// shown (`stt`) and the turn stopped at once.
    pub greeting: bool,
    /// What the chat says for a wake word (`嘿，你好呀`).
    pub greeting_text: String,
    /// `enable_wakeup_words_response_cache`: a chat text that is a wake word is answered from
    /// the response cache (no `stt`, no LLM).
    pub reply_cache: bool,
    /// The cached reply before any was generated: its text and length
    /// (`config/assets/wakeup_words_short.wav`).
    pub first_reply: String,
    /// Its length.
    pub first_reply_for: Duration,
    /// The replies the cache is refreshed with (the server picks one at random; the twin takes
    /// them in order).
    pub replies: Vec<String>,
    /// Microphone audio ignored after a detect text starts a chat, counted from the first
    /// frame after it.
    pub ignore_audio: Duration,
    /// `exit_commands`: a chat text that is one of them closes the connection.
    pub exit_commands: Vec<String>,
}

fn to_llm() -> Delivery {
    Delivery::Llm
}

impl BackendSpec {
    /// Where a failure's text goes.
    pub fn failure_delivery(&self) -> Delivery {
        self.failures_to.unwrap_or(self.results_to)
    }
}

/// The shipped personalities (docs/reference/backends.md §10), in the order `--help` lists them.
pub const SHIPPED: &[(&str, &str)] = &[
    ("xinnan-py", include_str!("../../../backends/xinnan-py.yaml")),
    (
        "rust-first-page",
        include_str!("../../../backends/rust-first-page.yaml"),
    ),
    ("go-eager", include_str!("../../../backends/go-eager.yaml")),
    ("mcp-go-strict", include_str!("../../../backends/mcp-go-strict.yaml")),
    ("cloud-gateway", include_str!("../../../backends/cloud-gateway.yaml")),
    ("java-cap32", include_str!("../../../backends/java-cap32.yaml")),
];

impl BackendSpec {
    /// Parses a personality; `origin` names the source in errors.
    pub fn from_yaml(origin: &str, text: &str) -> Result<BackendSpec, SpecError> {
        let parsed: BackendSpec = spec::from_yaml(origin, text)?;
        parsed
            .check()
            .map_err(|refused| spec::invalid_at(origin, text, refused))?;
        Ok(parsed)
    }

    /// What serde cannot check: the voice's numbers make a turn possible (a VAD window of 0
    /// chunks or a NaN level would hear no utterance ever, so the backend would never answer).
    fn check(&self) -> Result<(), (String, String)> {
        let Some(voice) = &self.voice else {
            return Ok(());
        };
        let at = |f: &str| format!("voice.{f}");
        if ![8_000, 12_000, 16_000, 24_000, 48_000].contains(&voice.tts_rate) {
            return Err((
                at("tts_rate"),
                format!(
                    "{} Hz is not an Opus rate (8000, 12000, 16000, 24000, 48000)",
                    voice.tts_rate
                ),
            ));
        }
        let v = &voice.vad;
        let counts = [
            ("vad.chunk", v.chunk, 1, 16_000),
            ("vad.window", v.window, 1, 1_000),
            ("vad.voiced_in_window", v.voiced_in_window, 1, v.window),
            ("vad.keep_before_voice", v.keep_before_voice, 0, 100_000),
            ("vad.min_frames", v.min_frames, 0, 100_000),
        ];
        for (field, n, lo, hi) in counts {
            if !(lo..=hi).contains(&n) {
                return Err((at(field), format!("{n} is outside {lo}..={hi}")));
            }
        }
        for (field, level) in [("vad.voice_dbfs", v.voice_dbfs), ("vad.quiet_dbfs", v.quiet_dbfs)] {
            spec::within(level, -120.0, 0.0, "dBFS").map_err(|m| (at(field), m))?;
        }
        if v.quiet_dbfs > v.voice_dbfs {
            return Err((
                at("vad.quiet_dbfs"),
                format!("{} dBFS is above voice_dbfs ({} dBFS)", v.quiet_dbfs, v.voice_dbfs),
            ));
        }
        Ok(())
    }

    /// A shipped personality by name.
    pub fn shipped(name: &str) -> Option<BackendSpec> {
        SHIPPED
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(n, text)| BackendSpec::from_yaml(&format!("backends/{n}.yaml"), text).ok())
    }
}

/// Maps a device tool name to the LLM function name.
pub fn map_name(mapping: NameMapping, name: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    match mapping {
        NameMapping::Python => name
            .chars()
            .map(|c| {
                if plain(c) || ('\u{4e00}'..='\u{9fff}').contains(&c) {
                    c
                } else {
                    '_'
                }
            })
            .collect(),
        NameMapping::Dots => name.replace('.', "_"),
        NameMapping::Runs64 => {
            let mut out = String::new();
            let mut in_run = false;
            for c in name.chars() {
                if plain(c) {
                    out.push(c);
                    in_run = false;
                } else if !in_run {
                    out.push('_');
                    in_run = true;
                }
            }
            let trimmed = out.trim_matches(|c| c == '_' || c == '-');
            if trimmed.len() > 64 {
                // FNV-1a over the full name as the hash suffix.
                let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                });
                format!("{}_{:08x}", &trimmed[..55], h as u32)
            } else {
                trimmed.to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_personality_loads() {
        for (name, text) in SHIPPED {
            let spec = BackendSpec::from_yaml(name, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(spec.name, *name);
        }
    }

    #[test]
    fn names_map_like_the_real_servers() {
        assert_eq!(
            map_name(NameMapping::Python, "self.audio_speaker.set_volume"),
            "self_audio_speaker_set_volume"
        );
        assert_eq!(map_name(NameMapping::Dots, "self.a-b.c"), "self_a-b_c");
        assert_eq!(map_name(NameMapping::Runs64, "..self..x.."), "self_x");
    }
}
