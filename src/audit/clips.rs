//! The recordings of the requests (docs/audit.md, "Spoken requests"): the shipped battery's
//! clips are in the binary (`audits/clips/`, made by `make.sh` there with espeak-ng); a battery
//! file's `clips:` index is read beside it.

use std::path::{Path, PathBuf};

use anyhow::Result;
use xiaozhi_sim::audit::clips::{self, Clips};
use xiaozhi_sim::spec::Resources;

use crate::wav;

/// The shipped clips, by the name `audits/clips/index.yaml` gives each.
const SHIPPED: &[(&str, &[u8])] = &[
    ("zh-lower-1.wav", include_bytes!("../../audits/clips/zh-lower-1.wav")),
    ("zh-lower-2.wav", include_bytes!("../../audits/clips/zh-lower-2.wav")),
    ("en-lower-1.wav", include_bytes!("../../audits/clips/en-lower-1.wav")),
    ("en-lower-2.wav", include_bytes!("../../audits/clips/en-lower-2.wav")),
    ("zh-raise-1.wav", include_bytes!("../../audits/clips/zh-raise-1.wav")),
    ("zh-raise-2.wav", include_bytes!("../../audits/clips/zh-raise-2.wav")),
    ("en-raise-1.wav", include_bytes!("../../audits/clips/en-raise-1.wav")),
    ("en-raise-2.wav", include_bytes!("../../audits/clips/en-raise-2.wav")),
    ("zh-set50-1.wav", include_bytes!("../../audits/clips/zh-set50-1.wav")),
    ("zh-set50-2.wav", include_bytes!("../../audits/clips/zh-set50-2.wav")),
    ("en-set50-1.wav", include_bytes!("../../audits/clips/en-set50-1.wav")),
    ("en-set50-2.wav", include_bytes!("../../audits/clips/en-set50-2.wav")),
    ("zh-mute-1.wav", include_bytes!("../../audits/clips/zh-mute-1.wav")),
    ("zh-mute-2.wav", include_bytes!("../../audits/clips/zh-mute-2.wav")),
    ("en-mute-1.wav", include_bytes!("../../audits/clips/en-mute-1.wav")),
    ("en-mute-2.wav", include_bytes!("../../audits/clips/en-mute-2.wav")),
    ("zh-set150.wav", include_bytes!("../../audits/clips/zh-set150.wav")),
    ("en-set150.wav", include_bytes!("../../audits/clips/en-set150.wav")),
    ("zh-set55.5.wav", include_bytes!("../../audits/clips/zh-set55.5.wav")),
    ("en-set55.5.wav", include_bytes!("../../audits/clips/en-set55.5.wav")),
    (
        "zh-brightness-1.wav",
        include_bytes!("../../audits/clips/zh-brightness-1.wav"),
    ),
    (
        "zh-brightness-2.wav",
        include_bytes!("../../audits/clips/zh-brightness-2.wav"),
    ),
    (
        "en-brightness-1.wav",
        include_bytes!("../../audits/clips/en-brightness-1.wav"),
    ),
    (
        "en-brightness-2.wav",
        include_bytes!("../../audits/clips/en-brightness-2.wav"),
    ),
    ("zh-dark.wav", include_bytes!("../../audits/clips/zh-dark.wav")),
    ("en-dark.wav", include_bytes!("../../audits/clips/en-dark.wav")),
    ("zh-light.wav", include_bytes!("../../audits/clips/zh-light.wav")),
    ("en-light.wav", include_bytes!("../../audits/clips/en-light.wav")),
    ("zh-question.wav", include_bytes!("../../audits/clips/zh-question.wav")),
    ("en-question.wav", include_bytes!("../../audits/clips/en-question.wav")),
    ("zh-lamp-1.wav", include_bytes!("../../audits/clips/zh-lamp-1.wav")),
    ("zh-lamp-2.wav", include_bytes!("../../audits/clips/zh-lamp-2.wav")),
    ("en-lamp-1.wav", include_bytes!("../../audits/clips/en-lamp-1.wav")),
    ("en-lamp-2.wav", include_bytes!("../../audits/clips/en-lamp-2.wav")),
    ("zh-reboot.wav", include_bytes!("../../audits/clips/zh-reboot.wav")),
    ("en-reboot.wav", include_bytes!("../../audits/clips/en-reboot.wav")),
];

/// The shipped battery's clips.
pub fn shipped() -> Result<Clips> {
    Ok(Clips::load(
        clips::DEFAULT_INDEX_ORIGIN,
        clips::DEFAULT_INDEX,
        &Shipped,
    )?)
}

/// The clips of the index `named` by a battery read from `battery` (relative to its folder).
pub fn beside(battery: &Path, named: &str) -> Result<Clips> {
    let path = battery.parent().unwrap_or(Path::new(".")).join(named);
    let text = xiaozhi_sim::spec::read_text(&path)?;
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok(Clips::load(&path.display().to_string(), &text, &Files { dir })?)
}

struct Shipped;

impl Resources for Shipped {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        let (_, bytes) = SHIPPED
            .iter()
            .find(|(name, _)| *name == path)
            .ok_or_else(|| format!("{path}: not one of the shipped clips"))?;
        wav::parse_pcm(bytes).map_err(|e| format!("{path}: {e:#}"))
    }
}

/// WAV files relative to an index.
struct Files {
    dir: PathBuf,
}

impl Resources for Files {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        wav::read_pcm(&self.dir.join(path)).map_err(|e| format!("{e:#}"))
    }
}
