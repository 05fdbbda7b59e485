//! The voice channel's data layer: binary frames of the three protocol versions, the MQTT
//! protocol's encrypted UDP datagrams, Opus with the
//! firmware's and the backends' settings, and resampling (docs/reference/voice.md §1–§3). The device's voice
//! state machine lives in `device::application` (its voice half), `device::playback` and `device::mic`; the backends' speaking side in `backend`.

pub mod codec;
pub mod frame;
pub mod log;
pub mod memo;
pub mod speak;
pub mod stream;
pub mod udp;
