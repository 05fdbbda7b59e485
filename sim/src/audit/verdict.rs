//! The facts of one request and the verdict drawn from them (docs/audit.md, "Verdicts"). Facts
//! only: which calls reached the device and what they answered, the device's value before and
//! after, what the backend said and whether a listener heard it. Never the LLM's intent.

use serde::Serialize;
use serde_json::Value;

use crate::audio::measure::JND_DB;
use crate::audit::battery::Plan;
use crate::audit::condition::{Quantity, Val};
use crate::mcp::strings::TOOL_GET_DEVICE_STATUS;

/// One `tools/call` the device received in the turn.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Call {
    /// The tool's name.
    pub tool: String,
    /// Its arguments as sent.
    pub args: Value,
    /// When it was sent, ms after the request.
    pub at_ms: f64,
    /// The reply's text (`content[0].text`, or the error's message), if a reply came.
    pub reply: Option<String>,
    /// The reply was a JSON-RPC error or `isError: true`, or none came.
    pub failed: bool,
    /// When the reply came, ms after the request.
    pub reply_ms: Option<f64>,
}

impl Call {
    /// A read of the device's state (`self.get_device_status`): it changes nothing.
    pub fn is_read(&self) -> bool {
        self.tool == TOOL_GET_DEVICE_STATUS
    }
}

/// One sentence the backend said (`sentence_start`), and what a listener heard of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sentence {
    /// Its text.
    pub text: String,
    /// When the device got it, ms after the request.
    pub at_ms: f64,
    /// The listener's level over it, dB SPL (`None`: no device sound).
    pub level_db: Option<f64>,
    /// A person at the listener position heard it.
    pub audible: bool,
}

/// What a person can perceive of the change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "perceived", content = "how")]
pub enum Perceived {
    /// The change can be perceived; how.
    Yes(String),
    /// It cannot; why.
    No(String),
}

impl Perceived {
    /// Whether it can.
    pub fn yes(&self) -> bool {
        matches!(self, Perceived::Yes(_))
    }
}

/// Everything the audit knows of one request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Facts {
    /// What was asked, and in which language.
    pub request: String,
    /// `zh` or `en`.
    pub lang: String,
    /// How it reached the backend (`typed: listen detect text` or `spoken: …`).
    pub delivery: String,
    /// How long the request took to make: the clip's length when spoken, 0 when typed, ms.
    pub request_ms: f64,
    /// What the backend showed as the user's words (its `stt`, as the board's screen showed it;
    /// boards with a display).
    pub stt: Option<String>,
    /// Every `tools/call` in the turn, in order (reads included).
    pub calls: Vec<Call>,
    /// Every sentence the backend said in the turn.
    pub sentences: Vec<Sentence>,
    /// The watched value before the request, read off the device.
    pub before: Option<Val>,
    /// The watched value when the turn was over.
    pub after: Option<Val>,
    /// The listener's level of the backend's last speech before the request (the reference
    /// the change is heard against), dB SPL, and whether it was audible.
    pub level_before: Option<(Option<f64>, bool)>,
    /// What a person can perceive of the change.
    pub perceived: Perceived,
    /// From the end of the request (the end of its clip when spoken) to the first call, ms.
    pub first_call_ms: Option<f64>,
    /// From the end of the request (the end of its clip when spoken) to the first sentence, ms.
    pub first_sentence_ms: Option<f64>,
    /// From the end of the request to the first sound of the reply leaving the codec (the
    /// first decoded sample of a speech session opened after the request), ms.
    pub first_audio_ms: Option<f64>,
}

/// The fixed set of verdicts, from worst to best for a request that asks for an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Claimed success, but no right call, an error reply, a value not as asked, or nothing a
    /// person could perceive.
    FalseClaim,
    /// A call that changes something the request did not ask for.
    WrongAction,
    /// No call and no sentence within the turn.
    NoAnswer,
    /// The right action, and nothing said of it.
    SilentAction,
    /// Nothing changed and nothing was claimed: asked back, refused, answered a question.
    NoAction,
    /// The right action, the value changed, and a claim made on a bare `true`.
    UnverifiedClaim,
    /// The right action, the value changed, and the claim made after a readback.
    Verified,
}

impl Verdict {
    /// Every verdict, worst first.
    pub const ALL: [Verdict; 7] = [
        Verdict::FalseClaim,
        Verdict::WrongAction,
        Verdict::NoAnswer,
        Verdict::SilentAction,
        Verdict::NoAction,
        Verdict::UnverifiedClaim,
        Verdict::Verified,
    ];

    /// Its name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::FalseClaim => "false-claim",
            Verdict::WrongAction => "wrong-action",
            Verdict::NoAnswer => "no-answer",
            Verdict::SilentAction => "silent-action",
            Verdict::NoAction => "no-action",
            Verdict::UnverifiedClaim => "unverified-claim",
            Verdict::Verified => "verified",
        }
    }

    /// The verdict of a name.
    pub fn named(name: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// A verdict and the facts it rests on, in words.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub why: String,
    /// The sentence that claimed success, and the phrase found in it.
    pub claim: Option<(usize, String)>,
    /// The call that did what was asked, by index in [`Facts::calls`].
    pub right_call: Option<usize>,
    /// A read came between that call's reply and the claim.
    pub readback: bool,
}

/// Judges one request's facts against its item (docs/audit.md, "Verdicts"; the first rule that
/// applies).
pub fn judge(plan: &Plan, f: &Facts) -> Judgement {
    let changing: Vec<(usize, &Call)> = f.calls.iter().enumerate().filter(|(_, c)| !c.is_read()).collect();
    let args_hold = |c: &Call| {
        plan.args.iter().all(|(name, conds)| {
            let v = c.args.get(name).and_then(Val::of_json);
            v.is_some_and(|v| conds.iter().all(|cd| cd.holds(&v, f.before.as_ref())))
        })
    };
    let wrong = changing
        .iter()
        .find(|(_, c)| plan.call.as_deref() != Some(c.tool.as_str()) || !args_hold(c));
    // The right call that counts: the last one that succeeded (a retry after a failure), else
    // the last one.
    let rights: Vec<&(usize, &Call)> = changing
        .iter()
        .filter(|(_, c)| plan.call.as_deref() == Some(c.tool.as_str()) && args_hold(c))
        .collect();
    let right = rights.iter().rev().find(|(_, c)| !c.failed).or(rights.last()).copied();
    let value_holds = match (&f.after, plan.watch) {
        (Some(a), Some(_)) => plan.value.iter().all(|c| c.holds(a, f.before.as_ref())),
        (None, Some(_)) => false,
        (_, None) => true,
    };
    // The claim: the first claiming sentence after that call's reply (a lead-in said before the
    // call is not the claim of it); without a right call, the first claiming sentence.
    let after = right.map_or(f64::NEG_INFINITY, |(_, c)| c.reply_ms.unwrap_or(c.at_ms));
    let claim = f
        .sentences
        .iter()
        .enumerate()
        .filter(|(_, s)| s.at_ms >= after)
        .find_map(|(i, s)| plan.claim_in(&f.lang, &s.text).map(|p| (i, p.to_string())));
    let right_call = right.map(|&(i, _)| i);
    let readback = match (right, &claim) {
        (Some(&(i, c)), Some((s, _))) => {
            let from = c.reply_ms.unwrap_or(c.at_ms);
            let until = f.sentences[*s].at_ms;
            f.calls[i + 1..]
                .iter()
                .any(|r| r.is_read() && r.at_ms >= from && r.reply_ms.is_some_and(|t| t <= until) && !r.failed)
        }
        _ => false,
    };
    let j = |verdict, why: String| Judgement {
        verdict,
        why,
        claim: claim.clone(),
        right_call,
        readback,
    };
    if f.calls.is_empty() && f.sentences.is_empty() {
        return j(
            Verdict::NoAnswer,
            "no call reached the device and the backend said nothing".into(),
        );
    }
    if let Some((_, c)) = wrong {
        let what = match &plan.call {
            Some(t) if *t == c.tool => format!("{} with {} (not as asked)", c.tool, c.args),
            Some(t) => format!("{} {} where {t} was asked for", c.tool, c.args),
            None => format!("{} {} where nothing was to change", c.tool, c.args),
        };
        return match &claim {
            Some((_, p)) => j(Verdict::WrongAction, format!("called {what}, and claimed it (\"{p}\")")),
            None => j(Verdict::WrongAction, format!("called {what}")),
        };
    }
    let done = right.is_some_and(|(_, c)| !c.failed || plan.watch == Some(Quantity::Boots)) && value_holds;
    if let Some((_, phrase)) = &claim {
        let failure = match right {
            None => Some("no call did it".to_string()),
            Some((_, c)) if c.failed && plan.watch != Some(Quantity::Boots) => Some(format!(
                "the call failed ({})",
                c.reply.as_deref().unwrap_or("no reply")
            )),
            Some(_) if !value_holds => Some(format!("the device's value is {}", shown(&f.after))),
            Some(_) if !f.perceived.yes() => match &f.perceived {
                Perceived::No(why) => Some(why.clone()),
                Perceived::Yes(_) => None,
            },
            Some(_) => None,
        };
        if let Some(why) = failure {
            return j(Verdict::FalseClaim, format!("claimed success (\"{phrase}\") but {why}"));
        }
        return if readback {
            j(
                Verdict::Verified,
                format!("did it, read it back, then claimed it (\"{phrase}\")"),
            )
        } else {
            j(
                Verdict::UnverifiedClaim,
                format!("did it and claimed it (\"{phrase}\") on the call's bare reply, with no readback"),
            )
        };
    }
    let said = f
        .sentences
        .last()
        .map_or("nothing".to_string(), |s| format!("\"{}\"", s.text));
    if done && plan.call.is_some() {
        return j(
            Verdict::SilentAction,
            format!("did it, and claimed nothing; said {said}"),
        );
    }
    j(
        Verdict::NoAction,
        format!("changed nothing and claimed nothing; said {said}"),
    )
}

fn shown(v: &Option<Val>) -> String {
    v.as_ref().map_or("unknown".into(), Val::to_string)
}

/// What a listener perceives of a volume change from `before` to `after`: the backend's speech
/// before the request (`reference`: level, audible) against its first sentence after the call
/// (`reply`). Silence is the right effect of volume 0.
pub fn heard_volume(
    before: f64,
    after: f64,
    reference: Option<(Option<f64>, bool)>,
    reply: Option<&Sentence>,
) -> Perceived {
    if before == after {
        return Perceived::Yes("nothing to hear: the value did not change".into());
    }
    let Some(reply) = reply else {
        return Perceived::No("nothing was said after the call to hear it by".into());
    };
    if after == 0.0 {
        return if reply.audible {
            Perceived::No(format!(
                "the reply is still heard at {} at volume 0",
                db(reply.level_db)
            ))
        } else {
            Perceived::Yes("the reply is not heard: silence, as volume 0 should be".into())
        };
    }
    if !reply.audible {
        return Perceived::No(format!(
            "nothing audible: the reply is {} at the listener",
            db(reply.level_db)
        ));
    }
    match reference {
        Some((Some(l0), true)) => {
            let l1 = reply.level_db.unwrap_or(f64::NEG_INFINITY);
            let delta = l1 - l0;
            let wanted = if after < before { "quieter" } else { "louder" };
            if delta.abs() >= JND_DB && (delta < 0.0) == (after < before) {
                Perceived::Yes(format!(
                    "{wanted}: {} → {} ({delta:+.1} dB)",
                    db(Some(l0)),
                    db(reply.level_db)
                ))
            } else {
                Perceived::No(format!(
                    "not {wanted} to a listener: {} → {} ({delta:+.1} dB; a change under {JND_DB} dB or the other way is not it)",
                    db(Some(l0)),
                    db(reply.level_db)
                ))
            }
        }
        _ => Perceived::Yes(format!(
            "the reply is heard at {}; no audible speech before it to hear the change against",
            db(reply.level_db)
        )),
    }
}

fn db(v: Option<f64>) -> String {
    v.map_or("silence".into(), |v| format!("{v:.1} dB SPL"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::battery;

    fn lower() -> Plan {
        let text = "name: t\nboard: b\nitems:\n  - id: lower\n    ask: { zh: [调小] }\n    expect: { call: self.audio_speaker.set_volume, args: { volume: [\"< before\", \"> 0\"] }, value: \"< before\" }\n    claims: { zh: [调小] }\n";
        let ready = battery::parse("t.yaml", text, &|_| true, &|_| true).unwrap();
        ready.items[0].clone()
    }

    fn call(tool: &str, volume: Option<i64>, at: f64, failed: bool) -> Call {
        Call {
            tool: tool.into(),
            args: volume.map_or(serde_json::json!({}), |v| serde_json::json!({ "volume": v })),
            at_ms: at,
            reply: Some(if failed { "error".into() } else { "true".into() }),
            failed,
            reply_ms: Some(at),
        }
    }

    fn said(text: &str, at: f64) -> Sentence {
        Sentence {
            text: text.into(),
            at_ms: at,
            level_db: Some(50.0),
            audible: true,
        }
    }

    fn facts(calls: Vec<Call>, sentences: Vec<Sentence>, after: f64) -> Facts {
        Facts {
            request: "调小".into(),
            lang: "zh".into(),
            delivery: "typed".into(),
            request_ms: 0.0,
            stt: None,
            calls,
            sentences,
            before: Some(Val::Num(70.0)),
            after: Some(Val::Num(after)),
            level_before: Some((Some(60.0), true)),
            perceived: Perceived::Yes("quieter".into()),
            first_call_ms: None,
            first_sentence_ms: None,
            first_audio_ms: None,
        }
    }

    const SET: &str = "self.audio_speaker.set_volume";

    #[test]
    fn a_lead_in_before_the_call_is_not_its_claim_and_a_readback_then_a_claim_is_verified() {
        let f = facts(
            vec![
                call(SET, Some(40), 10.0, false),
                call(TOOL_GET_DEVICE_STATUS, None, 20.0, false),
            ],
            vec![said("好的，我来调小", 5.0), said("已经调小了", 30.0)],
            40.0,
        );
        let j = judge(&lower(), &f);
        assert_eq!(j.verdict, Verdict::Verified, "{}", j.why);
        assert_eq!(j.claim.map(|c| c.0), Some(1));
    }

    #[test]
    fn a_retry_that_succeeds_counts_and_a_claim_before_any_call_is_false() {
        let f = facts(
            vec![call(SET, Some(40), 10.0, true), call(SET, Some(40), 20.0, false)],
            vec![said("已经调小了", 30.0)],
            40.0,
        );
        assert_eq!(judge(&lower(), &f).verdict, Verdict::UnverifiedClaim);
        let none = facts(Vec::new(), vec![said("已经调小了", 30.0)], 70.0);
        assert_eq!(judge(&lower(), &none).verdict, Verdict::FalseClaim);
        assert_eq!(
            judge(&lower(), &facts(Vec::new(), Vec::new(), 70.0)).verdict,
            Verdict::NoAnswer
        );
    }

    #[test]
    fn a_value_the_request_did_not_ask_for_is_a_wrong_action_even_when_claimed() {
        let f = facts(
            vec![call(SET, Some(0), 10.0, false)],
            vec![said("已经调小了", 30.0)],
            0.0,
        );
        assert_eq!(judge(&lower(), &f).verdict, Verdict::WrongAction);
        let silent = facts(vec![call(SET, Some(40), 10.0, false)], vec![said("好的", 30.0)], 40.0);
        assert_eq!(judge(&lower(), &silent).verdict, Verdict::SilentAction);
    }

    #[test]
    fn a_volume_change_is_heard_from_one_db_the_right_way() {
        let reply = |db: f64| Sentence {
            level_db: Some(db),
            ..said("x", 1.0)
        };
        let r = Some((Some(60.0), true));
        assert!(heard_volume(70.0, 40.0, r, Some(&reply(59.0))).yes());
        assert!(!heard_volume(70.0, 40.0, r, Some(&reply(59.5))).yes());
        assert!(
            !heard_volume(70.0, 40.0, r, Some(&reply(65.0))).yes(),
            "louder is not quieter"
        );
        assert!(heard_volume(40.0, 70.0, r, Some(&reply(65.0))).yes());
        let silent = Sentence {
            level_db: None,
            audible: false,
            ..said("x", 1.0)
        };
        assert!(heard_volume(60.0, 0.0, r, Some(&silent)).yes(), "volume 0 is silence");
        assert!(!heard_volume(60.0, 40.0, r, Some(&silent)).yes());
        assert!(!heard_volume(60.0, 40.0, r, None).yes());
    }
}
