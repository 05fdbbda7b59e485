//! Firmware versions as data: which upstream tags the twin answers as, and the behaviour line
//! each one belongs to (`docs/reference/firmware-versions.md`, "The lines").
//!
//! A board file's `firmware.version` (or `--firmware`) names a tag; [`Firmware::parse`] accepts
//! exactly the tags of the modelled lines and refuses anything else with the supported ranges.
//! Every behavioural difference between the lines is one named switch of [`Firmware`], decided
//! here, in one place, and read where the behaviour lives (tool registration, the call path,
//! reply scheduling, result encoding, system info). Nothing else compares version strings.
//! [`FirmwareSpec`] is a board file's `firmware:` section; [`state`] the device state machine's
//! states and transition table. Knows nothing about devices or runtime state.

mod mqtt_rules;
pub mod state;

pub use mqtt_rules::{MqttRules, ServerGoodbye};

use std::fmt;

use serde::Deserialize;

/// A behaviour line: a run of tags that a backend cannot tell apart on the MCP layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Line {
    /// v1.7.5 – v1.9.1: every `tools/call` runs in its own thread (`stackSize`).
    L3,
    /// v1.9.2 – v1.9.4 (the 1.x maintenance branch): the reply leaves from the tool's main-task
    /// task, so replies leave in arrival order.
    L4,
    /// v2.0.1 – v2.1.0: user-only tools, the older `take_photo` text (and, to v2.0.5, replies sent
    /// from the main task as on L4).
    L6,
    /// v2.2.2 – v2.2.6: the newer `take_photo` text.
    L7,
    /// v2.3.0 – v2.4.2: the contract (`docs/reference/firmware.md` §0).
    L8,
}

impl Line {
    /// `L3` … `L8`.
    pub fn name(self) -> &'static str {
        match self {
            Line::L3 => "L3",
            Line::L4 => "L4",
            Line::L6 => "L6",
            Line::L7 => "L7",
            Line::L8 => "L8",
        }
    }

    /// The tags of the line, as the range users read.
    pub fn range(self) -> &'static str {
        match self {
            Line::L3 => "1.7.5–1.9.1",
            Line::L4 => "1.9.2–1.9.4",
            Line::L6 => "2.0.1–2.1.0",
            Line::L7 => "2.2.2–2.2.6",
            Line::L8 => "2.3.0–2.4.2",
        }
    }
}

/// Every accepted tag (without the `v`), its `PROJECT_VER` and its line, oldest first. The
/// `PROJECT_VER`s are the tags' `CMakeLists.txt` values (v1.8.5 still says 1.8.4; v1.9.2_2 says
/// 1.9.2).
const TAGS: &[(&str, &str, Line)] = &[
    ("1.7.5", "1.7.5", Line::L3),
    ("1.7.6", "1.7.6", Line::L3),
    ("1.7.7", "1.7.7", Line::L3),
    ("1.8.0", "1.8.0", Line::L3),
    ("1.8.1", "1.8.1", Line::L3),
    ("1.8.2", "1.8.2", Line::L3),
    ("1.8.4", "1.8.4", Line::L3),
    ("1.8.5", "1.8.4", Line::L3),
    ("1.8.6", "1.8.6", Line::L3),
    ("1.8.7", "1.8.7", Line::L3),
    ("1.8.8", "1.8.8", Line::L3),
    ("1.8.9", "1.8.9", Line::L3),
    ("1.9.0", "1.9.0", Line::L3),
    ("1.9.1", "1.9.1", Line::L3),
    ("1.9.2", "1.9.2", Line::L4),
    ("1.9.2_2", "1.9.2", Line::L4),
    ("1.9.4", "1.9.4", Line::L4),
    ("2.0.1", "2.0.1", Line::L6),
    ("2.0.2", "2.0.2", Line::L6),
    ("2.0.3", "2.0.3", Line::L6),
    ("2.0.4", "2.0.4", Line::L6),
    ("2.0.5", "2.0.5", Line::L6),
    ("2.1.0", "2.1.0", Line::L6),
    ("2.2.2", "2.2.2", Line::L7),
    ("2.2.3", "2.2.3", Line::L7),
    ("2.2.4", "2.2.4", Line::L7),
    ("2.2.6", "2.2.6", Line::L7),
    ("2.3.0", "2.3.0", Line::L8),
    ("2.4.0", "2.4.0", Line::L8),
    ("2.4.2", "2.4.2", Line::L8),
];

/// How a `tools/call` runs and how its reply reaches the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallPath {
    /// L3: the receive path checks `stackSize`, then starts a `tool_call` thread; the tool runs
    /// there and its reply is scheduled on the main task (it leaves in batch 1).
    Thread,
    /// L4 and v2.0.1–v2.0.5: the call is scheduled on the main task and the tool's reply is sent
    /// from inside that task (`SendMcpMessage` on the main-loop task sends at once): batch 1, in
    /// arrival order — and `self.reboot` / `self.upgrade_firmware` do answer `true`.
    MainTaskSends,
    /// v2.1.0 onwards: the call is scheduled, and its reply is scheduled again (batch 2): a
    /// later receive-path reply overtakes it.
    MainTaskSchedules,
}

/// Which text `self.camera.take_photo` describes itself with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakePhotoText {
    /// 1.x and 2.0.1 – 2.1.0.
    Older,
    /// 2.2.2 onwards ("Always remember you have a camera. …").
    Newer,
}

/// When `self.screen.set_theme` is registered and what it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThemeTool {
    /// 1.x: only when the display has a theme name (LCD displays; OLEDs have none); accepts
    /// `light`, `LIGHT`, `dark`, `DARK` (kept as given) and answers `true` whatever the name.
    Named,
    /// 2.x: when the display has a current LVGL theme; answers whether the name was one of the
    /// registered themes.
    Registered,
}

/// When `self.assets.set_download_url` is registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssetsTool {
    /// 1.x: never.
    Absent,
    /// 2.0.x – 2.2.x: only with a valid assets partition.
    WithAssetsPartition,
    /// 2.3.0 onwards: always.
    Always,
}

/// When the LVGL user-only tools `self.screen.snapshot` and `self.screen.preview_image` exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotTools {
    /// v2.0.1: on every LVGL display.
    Always,
    /// v2.0.2 onwards: only with `CONFIG_LV_USE_SNAPSHOT`.
    WithLvSnapshot,
}

/// One firmware version: its tag, what it reports, and every switch the twin reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Firmware {
    /// The tag without `v` (`1.9.2_2`).
    pub tag: &'static str,
    /// `PROJECT_VER` (`serverInfo.version`, the OTA check, system info).
    pub project_ver: &'static str,
    /// The behaviour line.
    pub line: Line,
    /// `AddUserOnlyTools` exists (and `tools/list` reads `withUserTools`): 2.x.
    pub user_only_tools: bool,
    /// How a `tools/call` runs and replies.
    pub call_path: CallPath,
    /// `SendMcpMessage` logs `Send MCP message in main thread` / `… in sub thread` (1.9.2–1.9.4
    /// and 2.0.1).
    pub send_logs: bool,
    /// The L1–L2 flag (v1.6.6–v1.7.2, not a modelled tag): the argument walk's
    /// `std::invalid_argument` is not caught, so an out-of-range integer aborts the device with
    /// no reply. Off for every accepted tag; a board file may set `firmware.range_error_aborts`.
    pub range_error_aborts: bool,
    /// Camera failures are thrown (error replies, 2.x) rather than returned as text (1.x).
    pub camera_failures_thrown: bool,
    /// The `take_photo` description.
    pub take_photo_text: TakePhotoText,
    /// The theme tool's rule.
    pub theme_tool: ThemeTool,
    /// The assets tool's rule.
    pub assets_tool: AssetsTool,
    /// The snapshot/preview tools' rule.
    pub snapshot_tools: SnapshotTools,
    /// System info's `board` object carries `manufacturer` (2.4.2).
    pub board_manufacturer: bool,
    /// The device hello advertises `glyph_push` / `text_font` (2.4.0 onwards).
    pub glyph_push: bool,
    /// `Application::Reboot()` closes the channel and waits 1000 ms before `esp_restart` (2.x);
    /// on 1.x it restarts at once.
    pub reboot_closes_first: bool,
    /// WebSocket text frames are parsed with their length (`cJSON_ParseWithLength`, 2.2.6
    /// onwards); earlier tags parse them as C strings (a NUL byte ends the input).
    pub ws_parse_with_length: bool,
    /// A `tts` message whose `state` is not a string is ignored (2.4.0 onwards); earlier tags
    /// dereference the missing string and panic.
    pub tts_state_checked: bool,
    /// `DeviceStateMachine` refuses transitions its table does not allow (2.1.0 onwards);
    /// earlier tags set the state with a plain setter (e.g. `upgrading` from `listening`).
    pub state_table: bool,
    /// The ESP-IDF release the tag builds with (system info `application.idf_version`).
    pub idf_version: &'static str,
    /// What a `tts stop` that arrives before playback drained does to the speech still queued
    /// (docs/reference/voice.md §7).
    pub stop_tail: StopTail,
    /// `AbortSpeaking` silences the device at once (1.7.x: `aborted_` makes every later decode
    /// return without output until the next `tts start`, v1.7.5 `application.cc:832-834`); from
    /// 1.8.0 the flag is never read and queued speech plays on until `tts stop`.
    pub abort_silences: bool,
    /// A wake word detected while speaking aborts and listens at once, and one detected while
    /// listening restarts the turn (2.2.3 onwards, v2.2.3 `application.cc:800-815`); before, a
    /// wake word while speaking only aborts and one while listening does nothing (v2.2.2
    /// `application.cc:796-797`).
    pub wake_word_barge_in: bool,
    /// Where the MQTT + UDP protocol differs between tags (docs/reference/mqtt.md §8).
    pub mqtt: MqttRules,
}

/// What a `tts stop` that arrives before playback has drained does to the speech still queued
/// (docs/reference/voice.md §7; the cells of `v12-early-tts-stop` in the version matrix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopTail {
    /// 1.7.5–1.7.6: the `tts stop` lambda first waits for the audio pipeline to go idle
    /// (`WaitForCompletion`, v1.7.5 `application.cc:524`), the main task blocked and the device
    /// still speaking (audio arriving meanwhile plays too); then it listens. Every frame plays.
    WaitWhileSpeaking,
    /// 1.7.7: the same wait, but the audio loop discards each packet it takes meanwhile
    /// (v1.7.7 `background_task.cc:21-25`, `application.cc:830-856`): the frame playing and the
    /// one after it are heard, the rest is lost.
    DiscardWhileWaiting,
    /// 1.8.0–2.1.0: `listen start` at once, and `EnableVoiceProcessing(true)` → `ResetDecoder()`
    /// discards the queue (v1.8.0 `application.cc:664-667`, `audio_service.cc:466, 522-529`).
    Discard,
    /// 2.2.2–2.3.0: `WaitForPlaybackQueueEmpty()` on the main task before `listen start` in
    /// auto mode (v2.2.2 `application.cc:865-867`): every frame plays, the main loop is blocked.
    DrainBlocking,
    /// 2.4.0–2.4.2: `listen start` deferred until `MAIN_EVENT_PLAYBACK_DRAINED`
    /// (`application.cc:204-212, 942-944`): every frame plays, the main loop keeps running.
    DrainDeferred,
}

impl StopTail {
    /// One line for evidence (the version matrix's reasons).
    pub fn describe(self) -> &'static str {
        match self {
            StopTail::WaitWhileSpeaking => {
                "tts stop waits for the audio pipeline while still speaking: every frame plays"
            }
            StopTail::DiscardWhileWaiting => {
                "tts stop's wait discards the queued packets (1.7.7): only the frame playing and one more are heard"
            }
            StopTail::Discard => {
                "tts stop sends listen start at once and ResetDecoder discards the queued speech (1.8.0–2.1.0)"
            }
            StopTail::DrainBlocking => {
                "listen start waits for the queue on the main task (2.2.2–2.3.0): every frame plays"
            }
            StopTail::DrainDeferred => "listen start is deferred until playback drains (2.4.x): every frame plays",
        }
    }
}

/// A `firmware.version` / `--firmware` value that names no modelled tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownVersion {
    /// What was given.
    pub given: String,
    /// Why it was refused (malformed, outside the modelled lines, or not a tag of the board).
    pub why: String,
}

impl fmt::Display for UnknownVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "firmware version `{}` {}; supported: {}",
            self.given,
            self.why,
            supported()
        )
    }
}

impl std::error::Error for UnknownVersion {}

/// The supported tag ranges, one line: `1.7.5–1.9.1 (L3), 1.9.2–1.9.4 (L4), …`.
pub fn supported() -> String {
    [Line::L3, Line::L4, Line::L6, Line::L7, Line::L8]
        .iter()
        .map(|l| format!("{} ({})", l.range(), l.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every accepted tag, oldest first.
pub fn tags() -> impl Iterator<Item = &'static str> {
    TAGS.iter().map(|(t, _, _)| *t)
}

impl Firmware {
    /// The version the twin is by default (`docs/reference/firmware.md` §0: 2.4.2).
    pub fn current() -> Firmware {
        Firmware::parse("2.4.2").expect("2.4.2 is a modelled tag")
    }

    /// Accepts a modelled tag with or without the leading `v` (`1.9.4`, `v1.9.2_2`).
    pub fn parse(given: &str) -> Result<Firmware, UnknownVersion> {
        let refuse = |why: &str| UnknownVersion {
            given: given.to_string(),
            why: why.to_string(),
        };
        let bare = given.strip_prefix('v').unwrap_or(given);
        if version_key(bare).is_none() {
            return Err(refuse("is not a version (expected MAJOR.MINOR.PATCH, e.g. 1.9.4)"));
        }
        let &(tag, project_ver, line) = TAGS
            .iter()
            .find(|(t, _, _)| *t == bare)
            .ok_or_else(|| refuse("is not a tag of a modelled behaviour line"))?;
        Ok(Firmware::of(tag, project_ver, line))
    }

    fn of(tag: &'static str, project_ver: &'static str, line: Line) -> Firmware {
        let two = line >= Line::L6;
        let minor = |m: &str| tag.starts_with(m);
        Firmware {
            tag,
            project_ver,
            line,
            user_only_tools: two,
            call_path: match line {
                Line::L3 => CallPath::Thread,
                Line::L4 => CallPath::MainTaskSends,
                Line::L6 if minor("2.0.") => CallPath::MainTaskSends,
                _ => CallPath::MainTaskSchedules,
            },
            send_logs: line == Line::L4 || tag == "2.0.1",
            range_error_aborts: false,
            camera_failures_thrown: two,
            take_photo_text: if line >= Line::L7 {
                TakePhotoText::Newer
            } else {
                TakePhotoText::Older
            },
            theme_tool: if two { ThemeTool::Registered } else { ThemeTool::Named },
            assets_tool: match line {
                Line::L3 | Line::L4 => AssetsTool::Absent,
                Line::L6 | Line::L7 => AssetsTool::WithAssetsPartition,
                Line::L8 => AssetsTool::Always,
            },
            snapshot_tools: if tag == "2.0.1" {
                SnapshotTools::Always
            } else {
                SnapshotTools::WithLvSnapshot
            },
            // d91d6824 (v2.4.2~16): v2.3.0 and v2.4.0 have no `manufacturer` yet.
            board_manufacturer: tag == "2.4.2",
            glyph_push: minor("2.4."),
            reboot_closes_first: two,
            state_table: line >= Line::L7 || tag == "2.1.0",
            ws_parse_with_length: line == Line::L8 || tag == "2.2.6",
            tts_state_checked: minor("2.4."),
            // The official CI images (`.github/workflows/build.yml`): release-v5.4 to 2.0.3,
            // release-v5.5 from 2.0.4 to 2.1.0, v5.5.2 for 2.2.x–2.3.0 (the recorder's v2.2.6 says so too);
            // 2.4.x keeps the twin's docs/reference/firmware.md value.
            idf_version: match line {
                Line::L3 | Line::L4 => "v5.4.1",
                Line::L6 if matches!(tag, "2.0.1" | "2.0.2" | "2.0.3") => "v5.4.1",
                Line::L6 => "v5.5.1",
                Line::L7 => "v5.5.2",
                Line::L8 if tag == "2.3.0" => "v5.5.2",
                Line::L8 => "v6.0.1",
            },
            stop_tail: match tag {
                "1.7.5" | "1.7.6" => StopTail::WaitWhileSpeaking,
                "1.7.7" => StopTail::DiscardWhileWaiting,
                _ if line <= Line::L6 => StopTail::Discard,
                _ if minor("2.4.") => StopTail::DrainDeferred,
                _ => StopTail::DrainBlocking,
            },
            abort_silences: minor("1.7."),
            wake_word_barge_in: line >= Line::L8 || matches!(tag, "2.2.3" | "2.2.4" | "2.2.6"),
            mqtt: MqttRules::of(version_key(tag).unwrap_or_default()),
        }
    }

    /// `2.4.2 (L8)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.tag, self.line.name())
    }
}

/// One comparison of a version constraint: `>=2.0.1`, `<2.0.5`, `=2.2.6` (or a bare tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Comparison {
    op: Op,
    /// Index of the tag in the tag order.
    at: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
}

/// Why a firmware constraint was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    /// `[]`.
    #[error("an empty firmware constraint matches nothing; leave it out instead")]
    Empty,
    /// Not an operator and a version.
    #[error("`{0}` is not a version comparison (e.g. \">=2.0.1\", \"<2.0.5\", \"1.9.4\")")]
    NotAComparison(String),
    /// `=` with a version that is no modelled tag.
    #[error("`{item}`: {version} is not a modelled tag; supported: {supported}", supported = supported())]
    NotATag {
        /// The comparison as written.
        item: String,
        /// Its version.
        version: String,
    },
}

/// Which firmware versions something holds for: comparisons against modelled tags, all of which
/// must hold (`[">=2.0.1"]`, `[">=1.9.2", "<2.0.0"]`). Versions compare in tag order; a bound
/// may be any well-formed version (`<2.0.0` needs no tag 2.0.0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constraint {
    text: String,
    all: Vec<Comparison>,
}

impl Constraint {
    /// Parses `[">=2.0.1", "<2.2.2"]`-style comparisons; the error says which one is wrong.
    pub fn parse(items: &[String]) -> Result<Constraint, ConstraintError> {
        if items.is_empty() {
            return Err(ConstraintError::Empty);
        }
        let mut all = Vec::new();
        for item in items {
            let t = item.trim();
            let (op, rest) = [
                (">=", Op::Ge),
                ("<=", Op::Le),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(p, op)| t.strip_prefix(p).map(|r| (*op, r.trim())))
            .unwrap_or((Op::Eq, t));
            let key = version_key(rest).ok_or_else(|| ConstraintError::NotAComparison(item.clone()))?;
            // Position of the bound among the tags: exact tags compare by index; other versions by
            // where they would sort (`<2.0.0` = before 2.0.1).
            let below = TAGS
                .iter()
                .filter(|(t, _, _)| version_key(t).is_some_and(|k| k < key))
                .count();
            let exact = TAGS.iter().position(|(t, _, _)| version_key(t) == Some(key));
            let comparison = match (op, exact) {
                (_, Some(at)) => Comparison { op, at },
                (Op::Eq, None) => {
                    return Err(ConstraintError::NotATag {
                        item: item.clone(),
                        version: rest.to_string(),
                    });
                }
                // No such tag: `>= x` = `>= first tag above`, `< x` = `< first tag above`, etc.
                (Op::Ge | Op::Gt, None) => Comparison { op: Op::Ge, at: below },
                (Op::Lt | Op::Le, None) => Comparison { op: Op::Lt, at: below },
            };
            all.push(comparison);
        }
        Ok(Constraint {
            text: items.join(", "),
            all,
        })
    }

    /// Whether `firmware` meets every comparison.
    pub fn matches(&self, firmware: &Firmware) -> bool {
        let Some(i) = TAGS.iter().position(|(t, _, _)| *t == firmware.tag) else {
            return false;
        };
        self.all.iter().all(|c| match c.op {
            Op::Lt => i < c.at,
            Op::Le => i <= c.at,
            Op::Eq => i == c.at,
            Op::Ge => i >= c.at,
            Op::Gt => i > c.at,
        })
    }

    /// The comparisons as written (`>=2.0.1, <2.2.2`).
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// `1.9.2_2` → (1, 9, 2, 2); `2.4.2` → (2, 4, 2, 0); `None` when malformed.
pub(crate) fn version_key(v: &str) -> Option<(u32, u32, u32, u32)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let (numbers, suffix) = v.split_once('_').unwrap_or((v, "0"));
    let parts: Vec<&str> = numbers.split('.').collect();
    let num = |p: &str| {
        (!p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    };
    match parts.as_slice() {
        [a, b, c] => Some((num(a)?, num(b)?, num(c)?, num(suffix)?)),
        _ => None,
    }
}

/// Application descriptor and build facts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FirmwareSpec {
    /// The upstream tag the board runs (`2.4.2`, `1.9.4`, …): selects the behaviour line
    /// ([`Firmware`]); `serverInfo.version` is that tag's `PROJECT_VER`.
    pub version: String,
    /// `PROJECT_NAME` (system info `application.name`).
    pub project_name: String,
    /// `__DATE__ "T" __TIME__ "Z"` as the firmware concatenates it.
    pub compile_time: String,
    /// ESP-IDF version string (system info `application.idf_version`); by default the IDF
    /// release of the tag.
    pub idf_version: Option<String>,
    /// `Lang::CODE`.
    pub language: String,
    /// The tags this board file describes (`[">=2.2.4"]`): where upstream's board exists as
    /// written. Other versions are refused (`--firmware` included). Unset: every modelled tag.
    pub tags: Option<Vec<String>>,
    /// The L1–L2 flag of docs/reference/firmware-versions.md (v1.6.6–v1.7.2 behaviour over a 1.x line): an
    /// out-of-range integer argument aborts the device with no reply.
    pub range_error_aborts: bool,
}

impl Default for FirmwareSpec {
    fn default() -> Self {
        FirmwareSpec {
            version: "2.4.2".into(),
            project_name: "xiaozhi".into(),
            compile_time: "Aug  8 2026T08:33:45Z".into(),
            idf_version: None,
            language: "zh-CN".into(),
            tags: None,
            range_error_aborts: false,
        }
    }
}

impl FirmwareSpec {
    /// The version as a [`Firmware`] (validated when the board file was loaded).
    pub fn firmware(&self) -> Firmware {
        let mut firmware = Firmware::parse(&self.version).unwrap_or_else(|_| Firmware::current());
        // The flag exists only over a 1.x line (validated for the file's own version; a
        // `--firmware` 2.x override drops it).
        firmware.range_error_aborts = self.range_error_aborts && !firmware.user_only_tools;
        firmware
    }

    /// `PROJECT_VER` of the tag.
    pub fn project_ver(&self) -> &'static str {
        self.firmware().project_ver
    }

    /// System info's `idf_version`: the board file's, else the tag's IDF release.
    pub fn idf_version(&self) -> String {
        self.idf_version
            .clone()
            .unwrap_or_else(|| self.firmware().idf_version.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tag_of_the_lines_is_accepted_and_reports_its_project_ver() {
        assert_eq!(tags().count(), 30);
        for tag in tags() {
            let fw = Firmware::parse(tag).unwrap();
            assert_eq!(Firmware::parse(&format!("v{tag}")).unwrap(), fw);
        }
        assert_eq!(Firmware::parse("1.9.2_2").unwrap().project_ver, "1.9.2");
        assert_eq!(Firmware::parse("v1.8.5").unwrap().project_ver, "1.8.4");
        assert_eq!(Firmware::parse("2.2.6").unwrap().line, Line::L7);
        assert_eq!(Firmware::current().line, Line::L8);
    }

    #[test]
    fn everything_else_is_refused_with_the_supported_ranges() {
        for (given, why) in [
            ("1.8.3", "not a tag"),
            ("2.0.0", "not a tag"),
            ("1.6.6", "not a tag"),
            ("3.0.0", "not a tag"),
            ("2.4", "not a version"),
            ("latest", "not a version"),
            ("", "not a version"),
            ("1.9.4-rc1", "not a version"),
            ("99999.1.1", "not a version"),
        ] {
            let e = Firmware::parse(given).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(why), "{given}: {text}");
            assert!(
                text.contains("1.7.5–1.9.1 (L3)") && text.contains("2.3.0–2.4.2 (L8)"),
                "{text}"
            );
        }
    }

    #[test]
    fn constraints_compare_in_tag_order() {
        let c = |items: &[&str]| Constraint::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let at = |t: &str| Firmware::parse(t).unwrap();
        let two = c(&[">=2.0.1"]).unwrap();
        assert!(two.matches(&at("2.0.1")) && two.matches(&at("2.4.2")) && !two.matches(&at("1.9.4")));
        let below = c(&["<2.0.0"]).unwrap();
        assert!(below.matches(&at("1.9.4")) && !below.matches(&at("2.0.1")));
        let band = c(&[">=1.9.2", "<=1.9.4"]).unwrap();
        assert!(band.matches(&at("1.9.2_2")) && !band.matches(&at("1.9.1")) && !band.matches(&at("2.0.1")));
        assert!(c(&["1.8.9"]).unwrap().matches(&at("1.8.9")));
        assert!(c(&[">2.2.6"]).unwrap().matches(&at("2.3.0")));
        assert!(c(&["2.0.0"]).unwrap_err().to_string().contains("not a modelled tag"));
        assert!(
            c(&[">=two"])
                .unwrap_err()
                .to_string()
                .contains("not a version comparison")
        );
        assert!(c(&[]).is_err());
    }

    #[test]
    fn the_switches_follow_the_lines() {
        let l3 = Firmware::parse("1.8.9").unwrap();
        let l4 = Firmware::parse("1.9.4").unwrap();
        let l7 = Firmware::parse("2.2.6").unwrap();
        assert_eq!(l3.call_path, CallPath::Thread);
        assert_eq!(l4.call_path, CallPath::MainTaskSends);
        assert_eq!(l7.call_path, CallPath::MainTaskSchedules);
        assert_eq!(Firmware::parse("2.0.5").unwrap().call_path, CallPath::MainTaskSends);
        assert_eq!(Firmware::parse("2.1.0").unwrap().call_path, CallPath::MainTaskSchedules);
        assert!(!Firmware::parse("2.4.0").unwrap().board_manufacturer);
        assert!(!l4.user_only_tools && l7.user_only_tools);
        assert_eq!(l7.assets_tool, AssetsTool::WithAssetsPartition);
        assert_eq!(Firmware::parse("2.0.1").unwrap().snapshot_tools, SnapshotTools::Always);
        assert!(Firmware::parse("2.4.0").unwrap().glyph_push && !Firmware::parse("2.3.0").unwrap().glyph_push);
    }
}
