//! `--state DIR`: the twin's flash between runs (NVS as a small JSON file), like a real board
//! keeps its NVS partition.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use xiaozhi_sim::hw::nvs::Nvs;
use xiaozhi_sim::trace::NvsValue;

const FILE: &str = "nvs.json";

/// Reads a saved NVS partition, if there is one.
pub fn load(dir: &Path) -> Result<Option<Nvs>> {
    let path = dir.join(FILE);
    if !path.exists() {
        return Ok(None);
    }
    let text = xiaozhi_sim::spec::read_text(&path)?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let mut nvs = Nvs::new(0x4000);
    for e in v.as_array().into_iter().flatten() {
        let ns = e["namespace"].as_str().unwrap_or_default().to_string();
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let value = if let Some(i) = e["i32"].as_i64() {
            NvsValue::I32(i as i32)
        } else if let Some(u) = e["u8"].as_u64() {
            NvsValue::U8(u as u8)
        } else {
            NvsValue::Str(e["str"].as_str().unwrap_or_default().as_bytes().to_vec())
        };
        nvs.restore(ns, key, value);
    }
    Ok(Some(nvs))
}

/// Writes the partition.
pub fn save(dir: &Path, nvs: &Nvs) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let entries: Vec<Value> = nvs
        .iter()
        .map(|(ns, key, v)| match v {
            NvsValue::I32(i) => json!({"namespace": ns, "key": key, "i32": i}),
            NvsValue::U8(u) => json!({"namespace": ns, "key": key, "u8": u}),
            NvsValue::Str(s) => json!({"namespace": ns, "key": key, "str": String::from_utf8_lossy(s)}),
        })
        .collect();
    std::fs::write(dir.join(FILE), serde_json::to_string_pretty(&entries)? + "\n")?;
    Ok(())
}
