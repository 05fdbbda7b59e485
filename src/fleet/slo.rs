//! `--slo EXPR`: a fleet's service-level objective, as terms over the summary's figures
//! (`first_audio_p99<1500ms, failed_pct<1`): parsed with what is wrong said, and judged against a
//! [`VoiceSummary`] (the first term that does not hold). `--find-capacity` searches the largest
//! fleet that meets it (`super::capacity`).

use anyhow::{Result, bail};

use crate::fleet::summary::{Latency, VoiceSummary};

/// One term of an SLO: `metric < value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Term {
    pub metric: String,
    pub strict: bool,
    pub limit: f64,
    pub text: String,
}

/// A service level: all terms must hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Slo(pub Vec<Term>);

const PHASES: [&str; 5] = ["stt", "first_audio", "tts_stop", "mcp_reply", "twin_added_first_audio"];
const STATS: [&str; 4] = ["p50", "p90", "p99", "max"];

impl Slo {
    /// `first_audio_p99<1500ms`, `tts_stop_p50<=6s`, `failed==0` is written `failed<1`,
    /// `failed_pct<1`; terms separated by `,`.
    pub fn parse(text: &str) -> Result<Slo> {
        let mut terms = Vec::new();
        for raw in text.split(',') {
            let t = raw.trim();
            if t.is_empty() {
                continue;
            }
            let (metric, strict, value) = if let Some((m, v)) = t.split_once("<=") {
                (m.trim(), false, v.trim())
            } else if let Some((m, v)) = t.split_once('<') {
                (m.trim(), true, v.trim())
            } else {
                bail!("--slo `{t}`: expected METRIC<VALUE (e.g. first_audio_p99<1500ms)");
            };
            let latency = PHASES
                .iter()
                .any(|p| STATS.iter().any(|s| metric == format!("{p}_{s}")));
            let limit = if latency {
                let (num, scale) = if let Some(n) = value.strip_suffix("ms") {
                    (n, 1.0)
                } else if let Some(n) = value.strip_suffix('s') {
                    (n, 1000.0)
                } else {
                    (value, 1.0)
                };
                num.trim().parse::<f64>().map(|x| x * scale).ok()
            } else if matches!(metric, "failed" | "failed_pct") {
                value.trim_end_matches('%').trim().parse::<f64>().ok()
            } else {
                let known: Vec<String> = PHASES
                    .iter()
                    .flat_map(|p| STATS.iter().map(move |s| format!("{p}_{s}")))
                    .chain(["failed".into(), "failed_pct".into()])
                    .collect();
                bail!("--slo `{t}`: unknown metric `{metric}` (known: {})", known.join(", "));
            };
            let Some(limit) = limit.filter(|x| x.is_finite()) else {
                bail!("--slo `{t}`: `{value}` is not a number (with ms or s for latencies)");
            };
            terms.push(Term {
                metric: metric.to_string(),
                strict,
                limit,
                text: t.to_string(),
            });
        }
        if terms.is_empty() {
            bail!("--slo: no terms (e.g. first_audio_p99<1500ms)");
        }
        Ok(Slo(terms))
    }

    fn value(metric: &str, s: &VoiceSummary) -> Option<f64> {
        let lat = |name: &str| -> Option<&Latency> {
            let l = &s.latency;
            Some(match name {
                "stt" => &l.stt,
                "first_audio" => &l.first_audio,
                "tts_stop" => &l.tts_stop,
                "mcp_reply" => &l.mcp_reply,
                "twin_added_first_audio" => &l.twin_added_first_audio,
                _ => return None,
            })
        };
        match metric {
            "failed" => Some(s.turns.failed as f64),
            "failed_pct" => Some(100.0 * s.turns.failed as f64 / s.turns.planned.max(1) as f64),
            m => {
                let (phase, stat) = m.rsplit_once('_')?;
                let l = lat(phase)?;
                match stat {
                    "p50" => l.p50_ms,
                    "p90" => l.p90_ms,
                    "p99" => l.p99_ms,
                    "max" => l.max_ms,
                    _ => None,
                }
            }
        }
    }

    /// The first term that does not hold, with the value seen (no value: no turn completed).
    pub fn broken(&self, s: &VoiceSummary) -> Option<String> {
        for t in &self.0 {
            match Slo::value(&t.metric, s) {
                Some(v) if (t.strict && v < t.limit) || (!t.strict && v <= t.limit) => {}
                Some(v) => return Some(format!("{} (was {v:.1})", t.text)),
                None => return Some(format!("{} (no completed turn to measure)", t.text)),
            }
        }
        // Turns that never ended are failures too, whatever the terms say.
        let ended = s.turns.completed + s.turns.failed;
        (ended < s.turns.planned)
            .then(|| format!("{} of {} turns did not end", s.turns.planned - ended, s.turns.planned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_terms_parse_and_bad_ones_say_why() {
        let s = Slo::parse("first_audio_p99<1500ms, tts_stop_p50<=6s,failed_pct<1").unwrap();
        assert_eq!(s.0.len(), 3);
        assert_eq!((s.0[0].limit, s.0[0].strict), (1500.0, true));
        assert_eq!((s.0[1].limit, s.0[1].strict), (6000.0, false));
        assert!(
            Slo::parse("latency<3")
                .unwrap_err()
                .to_string()
                .contains("unknown metric")
        );
        assert!(
            Slo::parse("first_audio_p99>3")
                .unwrap_err()
                .to_string()
                .contains("expected")
        );
        assert!(
            Slo::parse("first_audio_p99<soon")
                .unwrap_err()
                .to_string()
                .contains("not a number")
        );
        assert!(Slo::parse(" , ").is_err());
    }
}
