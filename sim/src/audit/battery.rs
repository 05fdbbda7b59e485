//! The audit's battery: spoken requests, what a correct action is, and how a claim of success
//! reads, as data (docs/audit.md, "The battery"). Parsed with every mistake located
//! (`file:line:column`), in file order.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::audit::condition::{Cond, Quantity};
use crate::spec::{self, SpecError, SpecErrors};

/// The battery the binary ships (`audits/default.yaml`).
pub const DEFAULT: &str = include_str!("../../../audits/default.yaml");
/// Where [`DEFAULT`] comes from, for its errors and reports.
pub const DEFAULT_ORIGIN: &str = "audits/default.yaml";

/// Most trials of one item (a battery that asks for more is refused).
pub const MAX_TRIALS: u32 = 1000;
/// Most items in one battery.
pub const MAX_ITEMS: usize = 200;
/// Most times one request is said in a row (`repeat`).
pub const MAX_REPEAT: u32 = 5;
/// Longest request or claim phrase, in characters.
pub const MAX_PHRASE: usize = 200;

/// A battery as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Battery {
    /// What the battery is about.
    pub name: String,
    /// The board of every item that names none (an id of `xiaozhi-twin boards`).
    pub board: String,
    /// Trials of each item (`--trials` overrides).
    #[serde(default = "default_trials")]
    pub trials: u32,
    /// The clip index that gives the phrasings a voice (relative to the battery; docs/audit.md,
    /// "Spoken requests").
    #[serde(default)]
    pub clips: Option<String>,
    /// The requests.
    pub items: Vec<Item>,
}

fn default_trials() -> u32 {
    4
}

/// One request and how to judge what came of it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// A short name, unique in the battery (`[a-z0-9-]`).
    pub id: String,
    /// The seed article's error-card rows this item reaches (1–16), for the report.
    #[serde(default)]
    pub card: Vec<u32>,
    /// What the item shows, in one sentence (for reports).
    #[serde(default)]
    pub about: String,
    /// The board (default: the battery's).
    #[serde(default)]
    pub board: Option<String>,
    /// The phrasings by language (`zh`, `en`): trial k says phrasing k of all of them, round
    /// robin, languages in file order.
    pub ask: InOrder,
    /// The state the board boots in, stored in NVS before power-on.
    #[serde(default)]
    pub start: Start,
    /// Device faults set from power-on (`amp_shutdown`, …: the names `run` scenarios take).
    #[serde(default)]
    pub faults: Vec<String>,
    /// The request is said this many times in a row in one conversation (the java#124 pattern);
    /// each is judged, the trial takes the worst.
    #[serde(default = "one")]
    pub repeat: u32,
    /// What a correct action is.
    pub expect: Expect,
    /// How a claim of success reads, by language: a sentence of the backend containing one of
    /// these (case-insensitive) claims success.
    #[serde(default)]
    pub claims: BTreeMap<String, Vec<String>>,
}

fn one() -> u32 {
    1
}

/// A mapping of language → phrases, kept in file order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InOrder(pub Vec<(String, Vec<String>)>);

impl InOrder {
    /// Whether `lang` is one of its keys.
    pub fn contains_key(&self, lang: &str) -> bool {
        self.0.iter().any(|(l, _)| l == lang)
    }
}

impl<'de> Deserialize<'de> for InOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<InOrder, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = InOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a mapping of language to a list of phrasings, e.g. `zh: [把声音调小一点]`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<InOrder, A::Error> {
                let mut out: Vec<(String, Vec<String>)> = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Vec<String>>()? {
                    if out.iter().any(|(l, _)| *l == k) {
                        return Err(serde::de::Error::custom(format!("language `{k}` is given twice")));
                    }
                    out.push((k, v));
                }
                Ok(InOrder(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The state a trial's board boots in (absent: the board's defaults).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// Output volume, 0–100.
    #[serde(default)]
    pub volume: Option<i32>,
    /// Backlight brightness, 0–100.
    #[serde(default)]
    pub brightness: Option<i32>,
    /// Theme name (`light`, `dark`).
    #[serde(default)]
    pub theme: Option<String>,
}

/// What a correct answer to the request does.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The tool a correct action calls; absent with `none`.
    #[serde(default)]
    pub call: Option<String>,
    /// Conditions on the call's arguments, by argument name.
    #[serde(default)]
    pub args: BTreeMap<String, Conditions>,
    /// Conditions on the device's value after the turn (`rebooted` for a reboot).
    #[serde(default)]
    pub value: Option<Conditions>,
    /// No call should change anything; the quantity that must stay as it was (`volume`,
    /// `brightness`, `theme`) or `nothing`.
    #[serde(default)]
    pub none: Option<String>,
}

/// One condition or several (all must hold).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Conditions {
    /// `"< before"`.
    One(String),
    /// `["< before", "> 0"]`.
    All(Vec<String>),
}

impl Conditions {
    fn texts(&self) -> &[String] {
        match self {
            Conditions::One(s) => std::slice::from_ref(s),
            Conditions::All(v) => v,
        }
    }
}

/// An item ready to run: conditions parsed, defaults filled in.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The item's id.
    pub id: String,
    /// Error-card rows.
    pub card: Vec<u32>,
    /// What the item shows.
    pub about: String,
    /// The board id.
    pub board: String,
    /// Every phrasing: (language, text), in trial order.
    pub phrasings: Vec<(String, String)>,
    /// The starting state.
    pub start: Start,
    /// Faults from power-on.
    pub faults: Vec<String>,
    /// Requests per trial.
    pub repeat: u32,
    /// The tool a correct action calls (`None`: no call should change anything).
    pub call: Option<String>,
    /// Conditions on the call's arguments.
    pub args: Vec<(String, Vec<Cond>)>,
    /// The quantity the item watches on the device (`None`: nothing to watch).
    pub watch: Option<Quantity>,
    /// Conditions on the watched value after the turn.
    pub value: Vec<Cond>,
    /// Claim phrases by language, lower-cased.
    pub claims: BTreeMap<String, Vec<String>>,
}

impl Plan {
    /// The phrasing trial `k` says (round robin).
    pub fn phrasing(&self, k: u32) -> &(String, String) {
        &self.phrasings[k as usize % self.phrasings.len()]
    }

    /// Whether `sentence`, said by the backend in `lang`, claims success (one of the item's
    /// phrases for that language occurs in it, case-insensitive). The phrase that matched.
    pub fn claim_in(&self, lang: &str, sentence: &str) -> Option<&str> {
        let s = sentence.to_lowercase();
        self.claims
            .get(lang)?
            .iter()
            .find(|p| s.contains(p.as_str()))
            .map(String::as_str)
    }
}

/// A battery ready to run.
#[derive(Clone, Debug, Serialize)]
pub struct Ready {
    /// The battery's name.
    pub name: String,
    /// Where it came from.
    pub origin: String,
    /// Trials per item.
    pub trials: u32,
    /// The clip index, as the battery names it.
    pub clips: Option<String>,
    /// The items in file order.
    pub items: Vec<Plan>,
}

/// Parses and checks a battery: every mistake, located, in file order. `known_board` says
/// whether a board id exists; `known_fault` whether a fault name does.
pub fn parse(
    origin: &str,
    text: &str,
    known_board: &dyn Fn(&str) -> bool,
    known_fault: &dyn Fn(&str) -> bool,
) -> Result<Ready, SpecErrors> {
    let (battery, mut errors) = spec::from_yaml_recovering::<Battery>(origin, text);
    let shape_errors = !errors.is_empty();
    let mut items = Vec::new();
    if let Some(b) = &battery {
        let mut bad = |field: String, message: String| errors.push(spec::invalid_at(origin, text, (field, message)));
        if !known_board(&b.board) {
            bad("board".into(), unknown_board(&b.board));
        }
        if b.trials == 0 || b.trials > MAX_TRIALS {
            bad("trials".into(), format!("{} trials: give 1 to {MAX_TRIALS}", b.trials));
        }
        // (An item blanked out by the recovery from a shape error is no missing item.)
        if b.items.is_empty() && !shape_errors {
            bad("items".into(), "the battery has no items".into());
        }
        if b.items.len() > MAX_ITEMS {
            bad("items".into(), format!("{} items: at most {MAX_ITEMS}", b.items.len()));
        }
        let mut seen = BTreeMap::new();
        for (i, item) in b.items.iter().enumerate().take(MAX_ITEMS) {
            if let Some(first) = seen.insert(item.id.clone(), i) {
                let id = spec::elide(&item.id, 40);
                bad(
                    format!("items[{i}].id"),
                    format!("`{id}` is also the id of item {}", first + 1),
                );
            }
            let checks = Checks {
                at: format!("items[{i}]"),
                known_board,
                known_fault,
            };
            items.push(checks.item(b, item, &mut bad));
        }
    }
    if !errors.is_empty() {
        return Err(SpecErrors::tidy(errors));
    }
    let b = battery.ok_or_else(|| {
        SpecErrors::from(SpecError::Io {
            origin: origin.into(),
            message: "could not be read as a battery".into(),
        })
    })?;
    Ok(Ready {
        name: b.name,
        origin: origin.into(),
        trials: b.trials,
        clips: b.clips,
        items,
    })
}

/// The checks of one item, and where its fields are.
struct Checks<'a> {
    /// `items[i]`.
    at: String,
    known_board: &'a dyn Fn(&str) -> bool,
    known_fault: &'a dyn Fn(&str) -> bool,
}

/// Where a refusal goes: (dotted field, message).
type Bad<'b> = dyn FnMut(String, String) + 'b;

impl Checks<'_> {
    fn at(&self, field: &str) -> String {
        format!("{}.{field}", self.at)
    }

    /// The item checked and made ready (what could be read of it when it has mistakes).
    fn item(&self, b: &Battery, item: &Item, bad: &mut Bad<'_>) -> Plan {
        if item.id.is_empty()
            || !item
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            let id = spec::elide(&item.id, 40);
            bad(
                self.at("id"),
                format!("`{id}`: an id is lower-case letters, digits and `-`"),
            );
        }
        if let Some(r) = item.card.iter().find(|r| !(1..=16).contains(*r)) {
            bad(self.at("card"), format!("row {r}: the error card has rows 1 to 16"));
        }
        let board = item.board.clone().unwrap_or_else(|| b.board.clone());
        if item.board.is_some() && !(self.known_board)(&board) {
            bad(self.at("board"), unknown_board(&board));
        }
        let phrasings = self.phrasings(item, bad);
        self.start(&item.start, bad);
        for f in item.faults.iter().filter(|f| !(self.known_fault)(f)) {
            bad(
                self.at("faults"),
                format!("`{}` is no device fault", spec::elide(f, 40)),
            );
        }
        if item.repeat == 0 || item.repeat > MAX_REPEAT {
            bad(
                self.at("repeat"),
                format!("{}: say a request 1 to {MAX_REPEAT} times", item.repeat),
            );
        }
        let (args, watch, value) = self.expectation(&item.expect, bad);
        let claims = item
            .claims
            .iter()
            .map(|(l, ps)| (l.clone(), ps.iter().map(|p| p.to_lowercase()).collect()))
            .collect();
        Plan {
            id: item.id.clone(),
            card: item.card.clone(),
            about: item.about.clone(),
            board,
            phrasings,
            start: item.start.clone(),
            faults: item.faults.clone(),
            repeat: item.repeat,
            call: item.expect.call.clone(),
            args,
            watch,
            value,
            claims,
        }
    }

    /// Every phrasing in trial order; the claim phrases checked against them.
    fn phrasings(&self, item: &Item, bad: &mut Bad<'_>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (lang, texts) in &item.ask.0 {
            for (k, t) in texts.iter().enumerate() {
                if t.trim().is_empty() || t.chars().count() > MAX_PHRASE {
                    let m = format!("phrasing {}: give 1 to {MAX_PHRASE} characters", k + 1);
                    bad(self.at(&format!("ask.{lang}")), m);
                }
                out.push((lang.clone(), t.clone()));
            }
        }
        if out.is_empty() {
            bad(
                self.at("ask"),
                "no phrasing: give at least one, e.g. `zh: [把声音调小一点]`".into(),
            );
        }
        for (lang, phrases) in &item.claims {
            if !item.ask.contains_key(lang) {
                let m = format!("no request is asked in `{lang}`, so no claim can be in it");
                bad(self.at(&format!("claims.{lang}")), m);
            }
            if phrases
                .iter()
                .any(|p| p.trim().is_empty() || p.chars().count() > MAX_PHRASE)
            {
                let m = format!("a claim phrase is 1 to {MAX_PHRASE} characters");
                bad(self.at(&format!("claims.{lang}")), m);
            }
        }
        out
    }

    fn start(&self, start: &Start, bad: &mut Bad<'_>) {
        if let Some(v) = start.volume.filter(|v| !(0..=100).contains(v)) {
            bad(self.at("start.volume"), format!("{v}: a stored volume is 0 to 100"));
        }
        if let Some(v) = start.brightness.filter(|v| !(0..=100).contains(v)) {
            bad(
                self.at("start.brightness"),
                format!("{v}: a stored brightness is 0 to 100"),
            );
        }
        if let Some(t) = start.theme.as_deref().filter(|t| !matches!(*t, "light" | "dark")) {
            bad(
                self.at("start.theme"),
                format!("`{}`: a theme is light or dark", spec::elide(t, 40)),
            );
        }
    }

    /// The argument conditions, the watched quantity and the value conditions.
    #[allow(clippy::type_complexity)]
    fn expectation(&self, e: &Expect, bad: &mut Bad<'_>) -> (Vec<(String, Vec<Cond>)>, Option<Quantity>, Vec<Cond>) {
        let mut watch = None;
        match (&e.call, &e.none) {
            (Some(_), Some(_)) | (None, None) => bad(
                self.at("expect"),
                "give either `call` (the tool a correct action calls) or `none` (nothing may change)".into(),
            ),
            (Some(tool), None) => watch = Quantity::of_tool(tool),
            (None, Some(q)) if q == "nothing" => {}
            (None, Some(q)) => match Quantity::named(q) {
                Some(w) => watch = Some(w),
                None => {
                    let m = format!("`{}`: name volume, brightness, theme or nothing", spec::elide(q, 40));
                    bad(self.at("expect.none"), m);
                }
            },
        }
        if e.none.is_some() && (!e.args.is_empty() || e.value.is_some()) {
            bad(
                self.at("expect"),
                "`none` takes no `args` or `value`: nothing may change".into(),
            );
        }
        let mut conds = |field: String, c: &Conditions| -> Vec<Cond> {
            c.texts()
                .iter()
                .filter_map(|t| Cond::parse(t).map_err(|m| bad(field.clone(), m)).ok())
                .collect()
        };
        let args = e
            .args
            .iter()
            .map(|(k, c)| (k.clone(), conds(self.at(&format!("expect.args.{k}")), c)))
            .collect();
        let fixed = |t: &str| Cond::parse(t).unwrap_or_else(|_| unreachable!("a fixed condition parses"));
        let value = match &e.value {
            Some(Conditions::One(s)) if s == "rebooted" => {
                watch = Some(Quantity::Boots);
                vec![fixed("> before")]
            }
            Some(c) => conds(self.at("expect.value"), c),
            None if e.none.is_some() => watch.map(|_| fixed("= before")).into_iter().collect(),
            None => vec![fixed("!= before")],
        };
        if let Some(tool) = &e.call
            && watch.is_none()
        {
            let m = format!(
                "the audit cannot read what `{}` changes: it watches set_volume, set_brightness, set_theme and reboot",
                spec::elide(tool, 60)
            );
            bad(self.at("expect.call"), m);
        }
        (args, watch, value)
    }
}

fn unknown_board(id: &str) -> String {
    format!(
        "`{}` is no board (`xiaozhi-twin boards` lists them)",
        spec::elide(id, 60)
    )
}
