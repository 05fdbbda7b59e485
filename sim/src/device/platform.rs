//! What the application runs on and what crosses the device's boundary: the [`Board`] a device
//! is made from (its facts and the memo of its catalogues), the [`Platform`] (the
//! chip's identity, flash, clock and seeded generator, the world around it, and the twin's trace
//! and evidence logs — everything that survives a reboot), the outputs a driver carries
//! ([`Output`]), what the receive task did with a payload ([`Receipt`]) and the construction
//! faults read at boot ([`Faults`]), and the software state a readback sees
//! ([`DeviceSnapshot`]).
//!
//! Imports nothing else of `device/`: every other file of the folder may use it.

use std::collections::VecDeque;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::audio::AudioLog;
use crate::board::BoardSpec;
use crate::device::catalogue::CatalogueCache;
use crate::device::io::{BoardIo, HttpUpload, PlaybackIo, Trace, WireIo};
pub use crate::device::output::{Output, Receipt, Sent};
use crate::firmware::state::DeviceState;
use crate::hw::nvs::{EspErr, Nvs};
use crate::time::{SimDuration, SimTime};
use crate::trace::{BootReason, Event, LogLevel, LogRecord, LogText, NvsValue, TraceEvent};
use crate::voice::log::SpeechLog;
use crate::world::{HttpOutcome, WorldSpec};

/// Faults that change what the board constructs at its next boot (docs/reference/firmware.md §7.4, §9).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The OLED panel does not answer: `NoDisplay` fallback (tools disappear).
    pub display_init_fails: bool,
    /// `esp_camera_init` fails: the tool stays, every call says `Failed to capture photo`.
    pub camera_init_fails: bool,
    /// The board's codec is replaced by `DummyAudioCodec` (everything succeeds, nothing plays).
    pub codec_dummy: bool,
}

/// What [`Device::snapshot`](crate::device::Device::snapshot) reads: the software state, as a readback sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSnapshot {
    /// Boots since the simulation started.
    pub boots: u32,
    /// The application is up (not off, not booting).
    pub running: bool,
    /// `GetDeviceState()`, while the application exists.
    pub state: Option<DeviceState>,
    /// `AudioCodec::output_volume_`.
    pub volume: Option<i32>,
    /// The backlight's current brightness (mid-fade values included), 0–100.
    pub brightness: Option<u8>,
    /// Where the backlight is fading to, 0–100.
    pub backlight_target: Option<u8>,
    /// The display's current theme, on boards that have themes.
    pub theme: Option<String>,
    /// Software flags of lamps and board GPIO tools, by GPIO.
    pub gpio: std::collections::BTreeMap<u32, bool>,
    /// The audio service has the codec output enabled (`EnableOutput(true)`).
    pub output_enabled: bool,
    /// The codec is open (ES8311 boards: the chip answers register writes).
    pub codec_open: bool,
    /// The amplifier's PA pin is high.
    pub pa_on: bool,
    /// An Opus decoder exists (made at the first received packet; codec state is lazy).
    pub decoder_allocated: bool,
    /// An Opus encoder exists (made when the microphone first streams).
    pub encoder_allocated: bool,
    /// Microphone packets sent this boot.
    pub mic_packets_sent: u64,
    /// Microphone packets dropped from the full send queue this boot.
    pub mic_packets_dropped: u64,
}

/// A `Device-Id` that is no MAC address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a MAC address like f4:12:fa:01:02:03")]
pub struct BadMac(pub String);

/// A board as devices run it: its facts and the catalogues derived from them. Clones share the
/// memo, so devices made from clones of one `Board` share their tool registries; a `Board` made
/// from a bare [`BoardSpec`] starts with an empty memo.
#[derive(Clone, Debug)]
pub struct Board {
    pub(crate) spec: Arc<BoardSpec>,
    pub(crate) catalogues: Arc<CatalogueCache>,
}

impl Board {
    /// A board with an empty catalogue memo.
    pub fn new(spec: Arc<BoardSpec>) -> Board {
        Board {
            spec,
            catalogues: Arc::default(),
        }
    }

    /// The board's facts.
    pub fn spec(&self) -> &Arc<BoardSpec> {
        &self.spec
    }
}

impl From<Arc<BoardSpec>> for Board {
    fn from(spec: Arc<BoardSpec>) -> Board {
        Board::new(spec)
    }
}

impl From<&Board> for Board {
    fn from(board: &Board) -> Board {
        board.clone()
    }
}

/// Power state of the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Power {
    Off,
    Booting { ready_at: SimTime, reason: BootReason },
    On,
}

/// State that is not part of the application: identity, flash, time, trace, outputs (it
/// survives reboots and power cuts; the [`Application`](crate::device::application::Application)
/// is rebuilt at every boot).
pub(crate) struct Platform {
    /// The board file the device was built from.
    pub(crate) spec: Arc<BoardSpec>,
    /// The firmware the board runs: its behaviour switches (`firmware.version`).
    pub(crate) firmware: crate::firmware::Firmware,
    /// The board's catalogue memo (shared by devices of one [`Board`]).
    pub(crate) catalogues: Arc<CatalogueCache>,
    /// The world the board lives in (Wi-Fi, OTA, WebSocket server, room, timings).
    pub(crate) world: WorldSpec,
    /// Construction faults, read at the next boot.
    pub(crate) faults: Faults,
    /// The NVS partition (survives reboots and power cuts).
    pub(crate) nvs: Nvs,
    /// The device's clock (virtual time).
    pub(crate) now: SimTime,
    /// Boots since the simulation started.
    pub(crate) boots: u32,
    /// Seeded generator: MAC and build hash, then the UUID and `Sec-WebSocket-Key`s.
    pub(crate) rng: ChaCha8Rng,
    /// Wi-Fi STA MAC, lowercase `f4:12:fa:…` (`Device-Id`, `mac_address`).
    pub(crate) mac: String,
    /// The build's ELF SHA-256 (`application.elf_sha256` of the system info).
    pub(crate) elf_sha256: [u8; 32],
    /// Everything that happened to the audio path (evidence; survives reboots).
    pub(crate) audio: AudioLog,
    /// Every call the display was given (survives reboots).
    pub(crate) screen: crate::hw::screen::ScreenLog,
    /// What became of the speech the device was sent (evidence; survives reboots).
    pub(crate) speech: SpeechLog,
    /// Where Opus work is done when many devices share it (`None`: codecs of its own).
    pub(crate) codecs: Option<Arc<dyn crate::voice::memo::CodecPool>>,
    /// Received speech is not decoded: packet lengths come from their TOC bytes.
    pub(crate) durations_only: bool,
    pub(crate) trace: bool,
    pub(crate) events: Vec<TraceEvent>,
    pub(crate) outputs: VecDeque<Output>,
    pub(crate) power: Power,
    pub(crate) last_boot_at: Option<SimTime>,
    /// Which buttons the user holds down, by index in the board file (the finger survives a
    /// reboot: a button held through one is seen pressed after it).
    pub(crate) held: Vec<bool>,
    /// Every button gesture the board's callbacks were asked about (evidence; survives reboots).
    pub(crate) gestures: Vec<Fired>,
    /// The newest HTTP request bodies the device sent (evidence; survives reboots; the last
    /// `io::UPLOADS_KEPT`).
    pub(crate) uploads: VecDeque<HttpUpload>,
}

/// A button gesture the button component found, and what the board's callback did with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fired {
    /// The tick it was found at.
    pub at: SimTime,
    /// The button's name in the board file.
    pub button: String,
    /// The gesture.
    pub gesture: crate::board::Gesture,
    /// What the callback did; `None` when the board registered none for the gesture.
    pub action: Option<crate::board::ButtonAction>,
}

fn format_mac(bytes: [u8; 6]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

impl Platform {
    /// A freshly flashed chip (empty NVS), powered off; MAC and build hash from `seed`.
    pub(crate) fn new(board: Board, world: WorldSpec, seed: u64) -> Platform {
        use rand_core::{RngCore, SeedableRng};
        let Board { spec, catalogues } = board;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut mac = [0u8; 6];
        rng.fill_bytes(&mut mac[3..]);
        mac[..3].copy_from_slice(&[0xf4, 0x12, 0xfa]);
        let mut elf_sha256 = [0u8; 32];
        rng.fill_bytes(&mut elf_sha256);
        Platform {
            held: vec![false; spec.buttons.len()],
            gestures: Vec::new(),
            uploads: VecDeque::new(),
            firmware: spec.firmware(),
            spec,
            catalogues,
            world,
            faults: Faults::default(),
            nvs: Nvs::new(0x4000),
            now: SimTime::ZERO,
            boots: 0,
            rng,
            mac: format_mac(mac),
            elf_sha256,
            audio: AudioLog::default(),
            screen: Default::default(),
            speech: SpeechLog::default(),
            codecs: None,
            durations_only: false,
            trace: true,
            events: Vec::new(),
            outputs: VecDeque::new(),
            power: Power::Off,
            last_boot_at: None,
        }
    }

    /// Records an event (only when tracing; the closure is not evaluated otherwise).
    pub(crate) fn emit(&mut self, kind: impl FnOnce() -> Event) {
        self.trace().emit(kind);
    }

    /// An `ESP_LOGx` line.
    pub(crate) fn log<T: Into<LogText>>(&mut self, level: LogLevel, tag: &'static str, text: impl FnOnce() -> T) {
        self.trace().log(level, tag, text);
    }

    /// The trace as a subsystem writes to it.
    pub(crate) fn trace(&mut self) -> Trace<'_> {
        Trace::new(self.now, self.trace, &mut self.events)
    }

    /// What a transport reads and writes of the platform.
    pub(crate) fn wire_io(&mut self) -> WireIo<'_> {
        WireIo {
            now: self.now,
            trace: Trace::new(self.now, self.trace, &mut self.events),
            outputs: &mut self.outputs,
            firmware: &self.firmware,
            nvs: &self.nvs,
            mac: &self.mac,
            rng: &mut self.rng,
        }
    }

    /// The view the board's objects and the firmware's services (NVS, HTTP) take.
    pub(crate) fn board_io(&mut self) -> BoardIo<'_> {
        BoardIo {
            now: self.now,
            trace: Trace::new(self.now, self.trace, &mut self.events),
            spec: &self.spec,
            firmware: &self.firmware,
            nvs: &mut self.nvs,
            world: &self.world,
            screen: &mut self.screen,
            uploads: &mut self.uploads,
        }
    }

    /// What the playback of received speech reads and writes of the platform.
    pub(crate) fn playback_io(&mut self) -> PlaybackIo<'_> {
        PlaybackIo {
            now: self.now,
            audio: &mut self.audio,
            speech: &mut self.speech,
            trace: Trace::new(self.now, self.trace, &mut self.events),
            out_rate: self.spec.audio.output_sample_rate,
            codecs: self.codecs.as_ref(),
            durations_only: self.durations_only,
        }
    }

    /// Whether events are recorded ([`Device::set_trace`]).
    pub(crate) fn is_tracing(&self) -> bool {
        self.trace
    }

    /// `vTaskDelay(pdMS_TO_TICKS(ms))`.
    pub(crate) fn delay(&self, ms: u64) -> SimDuration {
        self.spec.target.tick_rate().delay(ms)
    }

    /// A `Settings::Set*` write with its event; the error name when NVS refuses it.
    pub(crate) fn nvs_set(&mut self, namespace: &str, key: &str, value: NvsValue) -> Result<(), EspErr> {
        self.board_io().nvs_set(namespace, key, value)
    }

    pub(crate) fn push_output(&mut self, output: Output) {
        self.outputs.push_back(output);
    }

    #[inline]
    pub(crate) fn transmit(&mut self, payload: Vec<u8>) {
        if self.trace {
            let copy = payload.clone();
            self.emit(|| Event::ReplySent { payload: copy });
        }
        let at = self.now;
        self.outputs.push_back(Output::Mcp { payload, at });
    }

    /// An HTTP request to `url` in this world (`http->Open`), with its trace event.
    pub(crate) fn http(&mut self, method: &'static str, url: &[u8]) -> HttpOutcome {
        self.board_io().http(method, url)
    }

    /// A version-4 UUID from the seeded generator (`Board::GenerateUuid`), lowercase.
    pub(crate) fn uuid_v4(&mut self) -> String {
        use rand_core::RngCore;
        let mut b = [0u8; 16];
        self.rng.fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        // 8-4-4-4-12 lowercase hex digits.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut uuid = String::with_capacity(36);
        for (i, x) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                uuid.push('-');
            }
            uuid.push(char::from(HEX[usize::from(x >> 4)]));
            uuid.push(char::from(HEX[usize::from(x & 0x0f)]));
        }
        uuid
    }

    /// Records a log line the firmware's code built as data ([`LogRecord`]).
    pub(crate) fn log_record(&mut self, record: LogRecord) {
        self.log(record.level, record.tag, || record.text);
    }
}
