//! Non-volatile storage as the firmware's `Settings` class uses it (`main/settings.cc` over
//! ESP-IDF `nvs_flash`): namespaces of typed keys that survive reboots and power cuts.
//!
//! Limits are ESP-IDF's: namespace and key names ≤ 15 bytes, strings ≤ 4000 bytes including
//! the NUL, a finite number of 32-byte entries per partition. A failing write returns the
//! `esp_err_t` name; `Settings` wraps writes in `ESP_ERROR_CHECK`, so the caller turns that into
//! a panic. Knows nothing about MCP or time.

use std::collections::BTreeMap;

pub use crate::trace::EspErr;
use crate::trace::NvsValue;

/// The namespaces and keys the firmware stores under (`Settings(namespace)`, `GetInt(key)`…),
/// typed once here.
pub mod names {
    /// `AudioCodec`'s namespace.
    pub const AUDIO: &str = "audio";
    /// The stored output volume (0–100), in [`AUDIO`].
    pub const OUTPUT_VOLUME: &str = "output_volume";
    /// The display's and backlight's namespace.
    pub const DISPLAY: &str = "display";
    /// The stored backlight brightness, in [`DISPLAY`].
    pub const BRIGHTNESS: &str = "brightness";
    /// The stored theme name, in [`DISPLAY`].
    pub const THEME: &str = "theme";
    /// The board's namespace.
    pub const BOARD: &str = "board";
    /// The device UUID made at first boot (`Client-Id`), in [`BOARD`].
    pub const UUID: &str = "uuid";
    /// The WebSocket settings the OTA server hands out.
    pub const WEBSOCKET: &str = "websocket";
    /// The server URL, in [`WEBSOCKET`].
    pub const URL: &str = "url";
    /// The access token, in [`WEBSOCKET`].
    pub const TOKEN: &str = "token";
    /// The binary protocol version, in [`WEBSOCKET`].
    pub const VERSION: &str = "version";
    /// The MQTT settings the OTA server hands out (`mqtt_protocol.cc:77-83`).
    pub const MQTT: &str = "mqtt";
    /// The MQTT keepalive in seconds, in [`MQTT`].
    pub const KEEPALIVE: &str = "keepalive";
    /// The assets' namespace.
    pub const ASSETS: &str = "assets";
    /// The assets download URL `self.assets.set_download_url` stores, in [`ASSETS`].
    pub const DOWNLOAD_URL: &str = "download_url";
}

/// `NVS_KEY_NAME_MAX_SIZE - 1`.
pub const MAX_NAME_BYTES: usize = 15;
/// Longest string `nvs_set_str` stores, including its NUL.
pub const MAX_STRING_BYTES: usize = 4000;
/// Entries per 4 KiB page; one page is kept free for garbage collection.
const ENTRIES_PER_PAGE: usize = 126;

/// The NVS partition.
#[derive(Clone, Debug)]
pub struct Nvs {
    namespaces: BTreeMap<String, BTreeMap<String, NvsValue>>,
    capacity_entries: usize,
    /// Fault injection: every write fails with this error.
    pub fail_writes: Option<EspErr>,
}

impl Nvs {
    /// An erased partition of `partition_bytes` (the bread boards' table: 16 KiB).
    pub fn new(partition_bytes: usize) -> Self {
        let pages = (partition_bytes / 4096).max(2);
        Nvs {
            namespaces: BTreeMap::new(),
            capacity_entries: (pages - 1) * ENTRIES_PER_PAGE,
            fail_writes: None,
        }
    }

    fn check_names(namespace: &str, key: &str) -> Result<(), EspErr> {
        if namespace.len() > MAX_NAME_BYTES {
            return Err(EspErr::NvsInvalidName);
        }
        if key.len() > MAX_NAME_BYTES {
            return Err(EspErr::NvsKeyTooLong);
        }
        Ok(())
    }

    fn entries_for(value: &NvsValue) -> usize {
        match value {
            NvsValue::I32(_) | NvsValue::U8(_) => 1,
            NvsValue::Str(s) => 1 + (s.len() + 1).div_ceil(32),
        }
    }

    fn used_entries(&self) -> usize {
        self.namespaces
            .values()
            .flat_map(BTreeMap::values)
            .map(Self::entries_for)
            .sum()
    }

    /// `nvs_set_*`: stores `value` or returns the error name.
    pub fn set(&mut self, namespace: &str, key: &str, value: NvsValue) -> Result<(), EspErr> {
        Self::check_names(namespace, key)?;
        if let Some(err) = self.fail_writes {
            return Err(err);
        }
        if let NvsValue::Str(s) = &value
            && s.len() + 1 > MAX_STRING_BYTES
        {
            return Err(EspErr::NvsValueTooLong);
        }
        // Overwriting a key with a value of no more entries always fits (a volume, a brightness).
        if let Some(slot) = self.namespaces.get_mut(namespace).and_then(|keys| keys.get_mut(key))
            && Self::entries_for(&value) <= Self::entries_for(slot)
        {
            *slot = value;
            return Ok(());
        }
        let old = self.get(namespace, key).map(Self::entries_for);
        let delta = Self::entries_for(&value) as isize - old.unwrap_or(0) as isize;
        if delta > 0 && self.used_entries() as isize + delta > self.capacity_entries as isize {
            return Err(EspErr::NvsNotEnoughSpace);
        }
        let keys = match self.namespaces.get_mut(namespace) {
            Some(keys) => keys,
            None => self.namespaces.entry(namespace.to_string()).or_default(),
        };
        match keys.get_mut(key) {
            Some(slot) => *slot = value,
            None => {
                keys.insert(key.to_string(), value);
            }
        }
        Ok(())
    }

    /// The raw stored value of `namespace`/`key`, if present.
    pub fn get(&self, namespace: &str, key: &str) -> Option<&NvsValue> {
        self.namespaces.get(namespace)?.get(key)
    }

    /// `Settings::GetInt(key, default)`: the stored i32, or the default when absent or of
    /// another type.
    pub fn get_i32(&self, namespace: &str, key: &str, default: i32) -> i32 {
        match self.get(namespace, key) {
            Some(NvsValue::I32(v)) => *v,
            _ => default,
        }
    }

    /// `Settings::GetString(key, default)`.
    pub fn get_str(&self, namespace: &str, key: &str) -> Option<&[u8]> {
        match self.get(namespace, key) {
            Some(NvsValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// `nvs_erase_key` (absent keys are fine, as `Settings::EraseKey` ignores NOT_FOUND).
    pub fn erase(&mut self, namespace: &str, key: &str) -> bool {
        self.namespaces
            .get_mut(namespace)
            .and_then(|keys| keys.remove(key))
            .is_some()
    }

    /// Everything stored, in key order (for evidence and `--state` files).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &NvsValue)> {
        self.namespaces
            .iter()
            .flat_map(|(ns, keys)| keys.iter().map(move |(k, v)| (ns.as_str(), k.as_str(), v)))
    }

    /// Restores an entry from a saved state (no limits checked beyond names).
    pub fn restore(&mut self, namespace: String, key: String, value: NvsValue) {
        self.namespaces.entry(namespace).or_default().insert(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_of_4000_bytes_including_nul_are_the_limit() {
        let mut nvs = Nvs::new(16 * 1024);
        assert!(
            nvs.set("assets", "download_url", NvsValue::Str(vec![b'a'; 3999]))
                .is_ok()
        );
        assert_eq!(
            nvs.set("assets", "download_url", NvsValue::Str(vec![b'a'; 4000])),
            Err(EspErr::NvsValueTooLong)
        );
        assert_eq!(
            nvs.get_str("assets", "download_url").map(<[u8]>::len),
            Some(3999),
            "the failed write changed nothing"
        );
    }

    #[test]
    fn names_longer_than_fifteen_bytes_fail() {
        let mut nvs = Nvs::new(16 * 1024);
        assert_eq!(
            nvs.set("audio", "a_key_that_is_too_long", NvsValue::I32(1)),
            Err(EspErr::NvsKeyTooLong)
        );
        assert!(nvs.set("audio", "output_volume", NvsValue::I32(1)).is_ok());
    }

    #[test]
    fn get_int_falls_back_to_the_default() {
        let mut nvs = Nvs::new(16 * 1024);
        assert_eq!(nvs.get_i32("audio", "output_volume", 70), 70);
        nvs.set("audio", "output_volume", NvsValue::I32(0)).unwrap();
        assert_eq!(nvs.get_i32("audio", "output_volume", 70), 0);
    }

    #[test]
    fn the_partition_fills_up() {
        let mut nvs = Nvs::new(16 * 1024);
        let mut failed = None;
        for i in 0..20 {
            if let Err(e) = nvs.set("fill", &format!("k{i}"), NvsValue::Str(vec![b'x'; 3000])) {
                failed = Some((i, e));
                break;
            }
        }
        assert_eq!(failed.map(|f| f.1), Some(EspErr::NvsNotEnoughSpace));
    }
}
