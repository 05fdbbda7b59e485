//! The SoC a board builds for and its build configuration: chip, tick rate, flash and
//! partition table, the LVGL snapshot option, the heap (`config.json` target, `sdkconfig`).

use serde::Deserialize;

use crate::time::TickRate;

/// The SoC and its build configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TargetSpec {
    /// The SoC model.
    pub chip: Chip,
    /// `CONFIG_FREERTOS_HZ` (ESP-IDF default 100).
    pub tick_hz: u32,
    /// Flash size in bytes (system info `flash_size`).
    pub flash_size: u32,
    /// `CONFIG_LV_USE_SNAPSHOT` (on for every ESP32-S3 build via `sdkconfig.defaults.esp32s3`).
    pub lv_use_snapshot: bool,
    /// Free heap after boot; parsing a message that needs more fails like a cJSON malloc failure.
    pub free_heap: usize,
    /// `esp_get_minimum_free_heap_size()` as reported in system info.
    pub minimum_free_heap: u32,
    /// `esp_chip_info().revision`.
    pub revision: u32,
    /// The partition table (`partitions/v2/*.csv`).
    pub partitions: PartitionTable,
    /// The assets partition holds a valid image (`Assets::partition_valid()`): 2.0.x–2.2.x
    /// register `self.assets.set_download_url` only then. The recorder's devices have one.
    pub assets_partition_valid: bool,
}

/// The upstream partition tables a board can use (`partitions/v1/*.csv`, `partitions/v2/*.csv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum PartitionTable {
    /// `partitions/v2/16m.csv`: 16 MB flash, 8 MB assets.
    #[serde(rename = "v2/16m")]
    V2_16m,
    /// `partitions/v2/16m_c3.csv`: 16 MB flash for ESP32-C3, 4 096 000-byte assets.
    #[serde(rename = "v2/16m_c3")]
    V2_16mC3,
    /// `partitions/v2/8m.csv`: 8 MB flash, 2 MB assets.
    #[serde(rename = "v2/8m")]
    V2_8m,
    /// `partitions/v2/4m.csv`: 4 MB flash, one factory app, 1 MB assets.
    #[serde(rename = "v2/4m")]
    V2_4m,
    /// `partitions/v2/32m.csv`: 32 MB flash, a factory NVS, 4 MB apps, 16 MB assets.
    #[serde(rename = "v2/32m")]
    V2_32m,
    /// `partitions/v1/16m.csv`: the first layout (a `model` partition, 6 MB apps, no assets).
    #[serde(rename = "v1/16m")]
    V1_16m,
}

/// A partition row: `(label, type, subtype, address, size)`.
pub type PartitionRow = (&'static str, u32, u32, u32, u32);

impl PartitionTable {
    /// `(label, type, subtype, address, size)` rows in table order (offsets the CSV leaves
    /// empty placed as `gen_esp32part.py` places them).
    pub fn rows(self) -> Vec<PartitionRow> {
        const NVS: PartitionRow = ("nvs", 1, 2, 0x9000, 0x4000);
        const OTADATA: PartitionRow = ("otadata", 1, 0, 0xd000, 0x2000);
        const PHY: PartitionRow = ("phy_init", 1, 1, 0xf000, 0x1000);
        match self {
            PartitionTable::V2_16m | PartitionTable::V2_16mC3 | PartitionTable::V2_8m => {
                let (app, assets_at, assets) = match self {
                    PartitionTable::V2_16m => (0x3f0000, 0x800000, 8 * 1024 * 1024),
                    PartitionTable::V2_16mC3 => (0x3f0000, 0x800000, 4_096_000),
                    _ => (0x2f0000, 0x600000, 2 * 1024 * 1024),
                };
                vec![
                    NVS,
                    OTADATA,
                    PHY,
                    ("ota_0", 0, 16, 0x20000, app),
                    ("ota_1", 0, 17, 0x20000 + app, app),
                    ("assets", 1, 130, assets_at, assets),
                ]
            }
            PartitionTable::V2_4m => vec![
                NVS,
                OTADATA,
                PHY,
                ("factory", 0, 0, 0x10000, 0x2f0000),
                ("assets", 1, 130, 0x300000, 0x100000),
            ],
            PartitionTable::V2_32m => vec![
                ("nvsfactory", 1, 2, 0x9000, 200 * 1024),
                ("nvs", 1, 2, 0x3b000, 840 * 1024),
                ("otadata", 1, 0, 0x10d000, 0x2000),
                ("phy_init", 1, 1, 0x10f000, 0x1000),
                ("ota_0", 0, 16, 0x200000, 4 * 1024 * 1024),
                ("ota_1", 0, 17, 0x600000, 4 * 1024 * 1024),
                ("assets", 1, 130, 0xa00000, 16 * 1024 * 1024),
            ],
            PartitionTable::V1_16m => vec![
                NVS,
                OTADATA,
                PHY,
                ("model", 1, 130, 0x10000, 0xf0000),
                ("ota_0", 0, 16, 0x100000, 6 * 1024 * 1024),
                ("ota_1", 0, 17, 0x700000, 6 * 1024 * 1024),
            ],
        }
    }

    /// The label of the partition the app runs from (`esp_ota_get_running_partition`).
    pub fn running_label(self) -> &'static str {
        match self {
            PartitionTable::V2_4m => "factory",
            _ => "ota_0",
        }
    }
}

impl Default for TargetSpec {
    fn default() -> Self {
        TargetSpec {
            chip: Chip::Esp32s3,
            tick_hz: 100,
            flash_size: 16 * 1024 * 1024,
            lv_use_snapshot: true,
            free_heap: 8 * 1024 * 1024,
            minimum_free_heap: 8_211_452,
            revision: 2,
            partitions: PartitionTable::V2_16m,
            assets_partition_valid: true,
        }
    }
}

impl TargetSpec {
    /// The FreeRTOS tick rate (`tick_hz`) as a `TickRate`.
    pub fn tick_rate(&self) -> TickRate {
        TickRate(self.tick_hz)
    }
}

/// An ESP32 SoC model the firmware builds for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Chip {
    /// Original ESP32 (Xtensa, dual core, classic BT).
    Esp32,
    /// ESP32-S3 (Xtensa, dual core).
    Esp32s3,
    /// ESP32-C3 (RISC-V, single core).
    Esp32c3,
    /// ESP32-C6 (RISC-V, single core).
    Esp32c6,
    /// ESP32-C5 (RISC-V, single core, dual-band Wi-Fi 6).
    Esp32c5,
    /// ESP32-P4 (RISC-V, dual core, no radio: Wi-Fi through a companion chip).
    Esp32p4,
    /// ESP32-S31 (dual core; upstream's `esp32s31` target).
    Esp32s31,
}

impl Chip {
    /// `SystemInfo::GetChipModelName()`.
    pub fn model_name(self) -> &'static str {
        match self {
            Chip::Esp32 => "esp32",
            Chip::Esp32s3 => "esp32s3",
            Chip::Esp32c3 => "esp32c3",
            Chip::Esp32c6 => "esp32c6",
            Chip::Esp32c5 => "esp32c5",
            Chip::Esp32p4 => "esp32p4",
            Chip::Esp32s31 => "esp32s31",
        }
    }
    /// `esp_chip_model_t` (docs/boards.md, "Every upstream build": the C5, P4 and S31 values).
    pub fn model_id(self) -> u32 {
        match self {
            Chip::Esp32 => 1,
            Chip::Esp32s3 => 9,
            Chip::Esp32c3 => 5,
            Chip::Esp32c6 => 13,
            Chip::Esp32p4 => 18,
            Chip::Esp32c5 => 23,
            Chip::Esp32s31 => 32,
        }
    }
    /// `esp_chip_info().cores`.
    pub fn cores(self) -> u32 {
        match self {
            Chip::Esp32 | Chip::Esp32s3 | Chip::Esp32p4 | Chip::Esp32s31 => 2,
            Chip::Esp32c3 | Chip::Esp32c6 | Chip::Esp32c5 => 1,
        }
    }
    /// `esp_chip_info().features` (Wi-Fi BGN + BLE, plus classic BT on the original ESP32).
    pub fn features(self) -> u32 {
        match self {
            Chip::Esp32 => 2 | 16 | 32,
            Chip::Esp32s3 | Chip::Esp32c3 | Chip::Esp32c6 => 2 | 16,
            // Wi-Fi, BLE and 802.15.4 (CHIP_FEATURE_IEEE802154).
            Chip::Esp32c5 | Chip::Esp32s31 => 2 | 16 | 64,
            // No radio on the chip.
            Chip::Esp32p4 => 0,
        }
    }
}
