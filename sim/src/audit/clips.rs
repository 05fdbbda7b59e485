//! The battery's spoken requests (docs/audit.md, "Spoken requests"): a clip index — the file a
//! battery's `clips:` names — pairs phrasings with recordings, which a trial says into the
//! board's microphone. The recordings are loaded through [`Resources`] (the sim reads no files).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::audit::battery::Plan;
use crate::spec::{self, Resources, SpecErrors};
use crate::time::SimDuration;
use crate::voice::codec::{MIC_RATE, resample_clip};

/// The index of the shipped battery's clips (`audits/clips/index.yaml`, made by
/// `audits/clips/make.sh` with espeak-ng).
pub const DEFAULT_INDEX: &str = include_str!("../../../audits/clips/index.yaml");
/// Where [`DEFAULT_INDEX`] comes from.
pub const DEFAULT_INDEX_ORIGIN: &str = "audits/clips/index.yaml";
/// The longest clip: a request, not a speech.
pub const MAX_CLIP: SimDuration = SimDuration::from_secs(30);
/// Most clips in one index.
pub const MAX_CLIPS: usize = 2000;

/// A clip index as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// Who or what says the clips (for reports: `espeak-ng 1.51`, a person's name…).
    #[serde(default)]
    pub voice: Option<String>,
    /// The clips.
    pub clips: Vec<Entry>,
}

/// One clip of an index.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The language of the phrasing it says (`zh`, `en`).
    pub lang: String,
    /// The phrasing it says, exactly as the battery writes it.
    pub text: String,
    /// The WAV file, relative to the index.
    pub wav: String,
}

/// One recording of a phrasing.
#[derive(Clone, Debug)]
pub struct Clip {
    /// The WAV file, as the index names it.
    pub file: String,
    /// What it says and in which language.
    pub lang: String,
    /// The phrasing.
    pub text: String,
    /// The samples at the microphone's rate (16 kHz).
    pub samples: Arc<[i16]>,
}

impl Clip {
    /// How long it takes to say.
    pub fn length(&self) -> SimDuration {
        SimDuration::from_micros(self.samples.len() as u64 * 1_000_000 / u64::from(MIC_RATE))
    }
}

/// The clips of an index, by (language, phrasing).
#[derive(Clone, Debug, Default)]
pub struct Clips {
    /// The index's file.
    pub origin: String,
    /// Who says them.
    pub voice: Option<String>,
    by: BTreeMap<(String, String), Arc<Clip>>,
}

impl Clips {
    /// Parses the index `text` (from `origin`) and loads every clip through `files` (paths as
    /// the index writes them): every mistake located, in file order.
    pub fn load(origin: &str, text: &str, files: &dyn Resources) -> Result<Clips, SpecErrors> {
        let index: Index = spec::from_yaml(origin, text)?;
        let mut errors = Vec::new();
        let mut bad = |field: String, message: String| errors.push(spec::invalid_at(origin, text, (field, message)));
        if index.clips.is_empty() {
            bad("clips".into(), "the index has no clips".into());
        }
        if index.clips.len() > MAX_CLIPS {
            bad(
                "clips".into(),
                format!("{} clips: at most {MAX_CLIPS}", index.clips.len()),
            );
        }
        let mut by = BTreeMap::new();
        for (i, e) in index.clips.iter().enumerate().take(MAX_CLIPS) {
            let key = (e.lang.clone(), e.text.clone());
            if by.contains_key(&key) {
                let text = spec::elide(&e.text, 40);
                bad(
                    format!("clips[{i}].text"),
                    format!("`{text}` ({}) has a clip already", e.lang),
                );
                continue;
            }
            match files.load_wav(&e.wav) {
                Err(why) => bad(format!("clips[{i}].wav"), why),
                Ok((rate, samples)) => {
                    let samples: Arc<[i16]> = resample_clip(&samples, rate, MIC_RATE).into();
                    let clip = Clip {
                        file: e.wav.clone(),
                        lang: e.lang.clone(),
                        text: e.text.clone(),
                        samples,
                    };
                    if clip.samples.is_empty() {
                        bad(format!("clips[{i}].wav"), format!("{}: the recording is empty", e.wav));
                    } else if clip.length() > MAX_CLIP {
                        let s = clip.length().as_millis() as f64 / 1000.0;
                        let most = MAX_CLIP.as_millis() / 1000;
                        bad(
                            format!("clips[{i}].wav"),
                            format!("{}: {s:.1} s: a request is at most {most} s", e.wav),
                        );
                    } else {
                        by.insert(key, Arc::new(clip));
                    }
                }
            }
        }
        if !errors.is_empty() {
            return Err(SpecErrors::tidy(errors));
        }
        Ok(Clips {
            origin: origin.to_string(),
            voice: index.voice,
            by,
        })
    }

    /// The clip that says `text` in `lang`.
    pub fn get(&self, lang: &str, text: &str) -> Option<&Arc<Clip>> {
        self.by.get(&(lang.to_string(), text.to_string()))
    }

    /// Every phrasing of `items` no clip says: (item id, language, phrasing).
    pub fn missing<'p>(&self, items: &'p [Plan]) -> Vec<(&'p str, &'p str, &'p str)> {
        items
            .iter()
            .flat_map(|p| {
                p.phrasings
                    .iter()
                    .map(move |(l, t)| (p.id.as_str(), l.as_str(), t.as_str()))
            })
            .filter(|(_, l, t)| self.get(l, t).is_none())
            .collect()
    }
}
