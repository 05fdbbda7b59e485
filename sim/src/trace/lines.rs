//! The trace's text: each event as the conformance recorder writes it (`#event …` lines, `#log
//! …`, `#batch k tasks=n`), and bytes quoted as it quotes them.

use std::fmt;

use super::{Event, TraceEvent};

/// Renders bytes as a JSON-ish quoted string (lossless for ASCII, `\xNN` for other bytes).
pub fn quote(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                '\t' => s.push_str("\\t"),
                c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('"');
    s
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.at.as_millis();
        match &self.kind {
            Event::Booted { n, reason } => write!(f, "boot n={n} reason={} t={t}", reason.as_str()),
            Event::Logged { level, tag, text } => write!(f, "log {level} {tag}: {text}"),
            Event::BatchStarted { tasks } => write!(f, "batch tasks={tasks} t={t}"),
            Event::TaskDelayed { ms } => write!(f, "vTaskDelay ms={ms} t={t}"),
            Event::MessageDropped { reason } => {
                write!(f, "dropped kind=receive reason=\"{}\" t={t}", reason.as_str())
            }
            Event::ReplySent { payload } => write!(f, "sent bytes={} t={t}", payload.len()),
            Event::ReplyDropped { payload, why } => {
                write!(f, "dropped kind=send why=\"{why}\" payload={} t={t}", quote(payload))
            }
            Event::TaskDropped { what, why } => write!(f, "dropped kind=task what={what} why=\"{why}\" t={t}"),
            Event::NvsSet { namespace, key, value } => write!(f, "nvs_set ns={namespace} key={key} {value} t={t}"),
            Event::NvsErased { namespace, key } => write!(f, "nvs_erase ns={namespace} key={key} t={t}"),
            Event::NvsFailed { namespace, key, error } => {
                write!(f, "nvs_set ns={namespace} key={key} result={error} t={t}")
            }
            Event::GpioConfigured { gpio } => write!(f, "gpio_config gpio={gpio} mode=2 t={t}"),
            Event::GpioSet { gpio, level } => write!(f, "gpio_set_level gpio={gpio} level={level} t={t}"),
            Event::RebootEntered => write!(f, "reboot t={t}"),
            Event::Restarted => write!(f, "esp_restart t={t}"),
            Event::Panicked { reason } => write!(f, "panic reason=\"{reason}\" t={t}"),
            Event::PowerCut => write!(f, "power_cut t={t}"),
            Event::VolumeChanged { volume } => write!(f, "volume_set volume={volume} t={t}"),
            Event::ThemeApplied { theme } => write!(f, "display_set_theme theme=\"{theme}\" t={t}"),
            Event::BacklightTarget { target } => write!(f, "backlight_target brightness={target} t={t}"),
            Event::BacklightStep { brightness, duty } => {
                write!(f, "ledc_duty brightness={brightness} duty={duty} t={t}")
            }
            Event::HttpOpened { method, url, outcome } => {
                write!(f, "http_open method={method} url={} result={outcome} t={t}", quote(url))
            }
            Event::CameraCaptured { width, height } => write!(f, "camera_capture frame={width}x{height} t={t}"),
            Event::OtaStarted { url } => write!(f, "ota_start url={} t={t}", quote(url)),
            Event::OtaFinished { ok } => write!(f, "ota_done ok={ok} t={t}"),
            Event::StateChanged { from, to } => write!(f, "state {} -> {} t={t}", from.name(), to.name()),
            Event::StateRejected { from, to } => {
                write!(f, "state {} -> {} rejected t={t}", from.name(), to.name())
            }
            Event::SoundQueued { sound, from, to } => write!(f, "play sound={sound} from={from} to={to} t={t}"),
            Event::WebSocketDestroyed { why } => {
                write!(f, "websocket destroyed ({why}): TCP closed without a close frame t={t}")
            }
            Event::AudioChannelFailed { why } => write!(f, "audio channel failed: {} t={t}", why.as_str()),
            Event::AudioChannelOpened { udp: false } => write!(f, "audio channel opened t={t}"),
            Event::AudioChannelOpened { udp: true } => write!(f, "audio channel opened (UDP) t={t}"),
            Event::ServerHello { session, udp: None } => write!(f, "server hello, session {session} t={t}"),
            Event::ServerHello {
                session,
                udp: Some(udp),
            } => {
                write!(f, "server hello (udp {udp}), session {session} t={t}")
            }
            Event::MqttConnected => write!(f, "MQTT connected t={t}"),
            Event::CameraExplained { question } => {
                write!(f, "camera_explain question={} t={t}", quote(question.as_bytes()))
            }
            Event::SnapshotTaken { quality, bytes } => {
                write!(f, "display_snapshot quality={quality} bytes={bytes} t={t}")
            }
            Event::NoEffectModelled { tool } => write!(f, "{tool}: no physical effect modelled for this tool t={t}"),
            Event::ListenDeferred => write!(f, "listen start deferred until playback drains t={t}"),
            Event::PlaybackDrainAwaited => {
                write!(
                    f,
                    "the main task waits for playback to drain (WaitForPlaybackQueueEmpty) t={t}"
                )
            }
            Event::WakeWordIgnored { word, state, why } => {
                write!(
                    f,
                    "wake word \"{word}\" not detected: detection is off in state {state}{why} t={t}"
                )
            }
            Event::TypedInput => {
                write!(
                    f,
                    "typed input (as py-xiaozhi sends it; not firmware behaviour): listen detect t={t}"
                )
            }
            Event::ToolThreadStarted { stack } => {
                write!(f, "tool_thread start name=tool_call stack={stack} prio=1 t={t}")
            }
            Event::ToolThreadExited => write!(f, "tool_thread exit t={t}"),
            Event::AudioPoweredDown { output: true } => {
                write!(f, "audio output powered down (15 s without output) t={t}")
            }
            Event::AudioPoweredDown { output: false } => write!(
                f,
                "audio input powered down (15 s without input: no wake word detection, no voice processing) t={t}"
            ),
            Event::FrameOverread { len, announced, past } => write!(
                f,
                "binary frame of {len} bytes announces {announced} payload bytes: the firmware copies {past} bytes past the frame (undefined behaviour; the twin reads zeros) t={t}"
            ),
            Event::EmotionReceived { emotion } => write!(f, "emotion {emotion} t={t}"),
            Event::BootLoop => write!(
                f,
                "the firmware aborts at every boot here (a boot loop); the twin leaves the board off t={t}"
            ),
            Event::ButtonFired {
                button,
                gpio,
                gesture,
                did,
            } => {
                write!(f, "button {button} (GPIO {gpio}): {gesture} → {did} t={t}")
            }
        }
    }
}

/// Renders events in the recorder's trace style (`#batch k tasks=n`, `#event …`, `#log …`),
/// numbering batches from 1 within the list.
pub fn render_events(events: &[TraceEvent]) -> Vec<String> {
    let mut batch = 0;
    events.iter().map(|e| render_event(e, &mut batch)).collect()
}

/// One event as a trace line; `batch` counts the batches rendered so far in this list.
pub fn render_event(e: &TraceEvent, batch: &mut usize) -> String {
    use std::fmt::Write as _;
    // One allocation per line: sized for the fixed words plus the variable text.
    let mut line = String::with_capacity(match &e.kind {
        Event::Logged { tag, text, .. } => 8 + tag.len() + text.len(),
        _ => 64,
    });
    // Writing into a String cannot fail.
    let _ = match &e.kind {
        Event::BatchStarted { tasks } => {
            *batch += 1;
            write!(line, "#batch {batch} tasks={tasks}")
        }
        Event::Logged { .. } => write!(line, "#{e}"),
        _ => write!(line, "#event {e}"),
    };
    line
}
