//! The scenario steps that press buttons — `press`, `button_down`, `button_up` — as a finger
//! does: the device's button component finds the gestures and the board's callbacks act
//! (docs/boards.md, "Buttons").

use crate::board::{ButtonAction, ButtonSpec};
use crate::scenario::expect::Expect;
use crate::scenario::runner::Runner;
use crate::scenario::{ButtonStep, PressStep};
use crate::time::SimDuration;

/// A click as a scenario's finger makes it: 100 ms down (and 100 ms up between clicks).
const CLICK: SimDuration = SimDuration::from_millis(100);

/// Presses a board button and lets go: a click (or `clicks` of them), a long press or a
/// hold. Returns the step's summary (what the button's callbacks did) and expectations.
pub(super) fn press<'s>(r: &mut Runner<'_>, p: &'s PressStep) -> (String, Option<&'s Expect>) {
    let expect: Option<&'s Expect> = Some(&p.expect);
    let Some(b) = r.board.button(&p.button).cloned() else {
        return (format!("pressed {}: no such button", p.button), expect);
    };
    let first = r.h.device.gestures().len();
    let (how, downs): (String, Vec<SimDuration>) = if let Some(hold) = p.hold {
        (format!("held for {}", hold.0), vec![hold.0])
    } else if p.long {
        let d = SimDuration::from_millis(u64::from(b.long_press_ms()) + 500);
        (format!("long press: held for {d}"), vec![d])
    } else {
        let n = p.clicks.unwrap_or(1).max(1);
        let how = if n == 1 {
            "clicked".to_string()
        } else {
            format!("clicked {n} times")
        };
        (how, vec![CLICK; usize::from(n)])
    };
    for (i, down) in downs.iter().enumerate() {
        if i > 0 {
            let t = r.now() + CLICK;
            r.advance_to(t);
        }
        finger(r, &b.name, true);
        let t = r.now() + *down;
        r.advance_to(t);
        finger(r, &b.name, false);
    }
    let_button_rest(r, &b);
    (format!("{} {how}{}", b.name, gestures_since(r, first)), expect)
}

/// Presses a board button and keeps it down (`button_down`).
pub(super) fn button_down<'s>(r: &mut Runner<'_>, b: &'s ButtonStep) -> (String, Option<&'s Expect>) {
    let name = b.button.as_str();
    let first = r.h.device.gestures().len();
    finger(r, name, true);
    // The press is found on the second poll after it (≤ 10 ms).
    let t = r.now() + SimDuration::from_millis(10);
    r.advance_to(t);
    r.settle();
    (
        format!("{name} pressed and held{}", gestures_since(r, first)),
        Some(&b.expect),
    )
}

/// Lets go of a board button (`button_up`).
pub(super) fn button_up<'s>(r: &mut Runner<'_>, step: &'s ButtonStep) -> (String, Option<&'s Expect>) {
    let name = step.button.as_str();
    let first = r.h.device.gestures().len();
    finger(r, name, false);
    if let Some(b) = r.board.button(name).cloned() {
        let_button_rest(r, &b);
    }
    (
        format!("{name} released{}", gestures_since(r, first)),
        Some(&step.expect),
    )
}

/// The finger on button `name` now (the step's validation made sure it exists).
fn finger(r: &mut Runner<'_>, name: &str, pressed: bool) {
    let now = r.now();
    let _ = r.h.device.button(now, name, pressed);
    r.settle();
}

/// After a release: time for the component to decide what the presses were (the release is
/// found within 10 ms, a click 185 ms later with the default short press time).
fn let_button_rest(r: &mut Runner<'_>, b: &ButtonSpec) {
    let t = r.now() + SimDuration::from_millis(u64::from(b.short_press_ms()) + 20);
    r.advance_to(t);
    r.settle();
}

/// What the button callbacks did since gesture `first`, for a summary: the gestures with a
/// callback and what each did, or, when none had one, the gestures found.
fn gestures_since(r: &Runner<'_>, first: usize) -> String {
    let all = r.h.device.gestures();
    let fired = &all[first.min(all.len())..];
    if fired.is_empty() {
        return ": no gesture found".into();
    }
    let acted: Vec<String> = fired
        .iter()
        .filter_map(|f| {
            let did = match f.action? {
                ButtonAction::ToggleChat => {
                    "toggle chat (the direct link needs no channel: listening, or abort while speaking)"
                }
                a => a.describe(),
            };
            Some(format!("{} → {did}", f.gesture.name()))
        })
        .collect();
    if acted.is_empty() {
        let names: Vec<String> = fired.iter().map(|f| f.gesture.name()).collect();
        return format!(": nothing happened ({}: no callback on this board)", names.join(", "));
    }
    format!(": {}", acted.join("; "))
}
