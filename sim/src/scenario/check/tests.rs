//! The checker's own tests: how the same expectation reads from inside the device and from a
//! backend, and the order of a step's checks.

use super::*;

const TRUE_7: &[u8] =
    br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}"#;
const TRUE_1: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}"#;

fn expect(yaml: &str) -> Expect {
    serde_saphyr::from_str(yaml).expect("an expect block")
}

fn answer(reply: Option<&[u8]>, after: Option<ReplyLatency>) -> Answer<'_> {
    Answer {
        reply,
        after,
        paired: reply.zip(after),
        missing: "no reply".into(),
        readback: None,
    }
}

fn inside(record: Option<&Record>) -> Inside<'_> {
    Inside {
        receipts: &[],
        replies: &[],
        measurement: None,
        previous: None,
        record,
        events: &[],
        state: "idle",
        controls: &[],
        speech: None,
        claim: None,
    }
}

fn outside() -> Outside<'static> {
    Outside {
        sent: true,
        closed: false,
        waited_ms: Some(5.0),
        connection: None,
    }
}

fn lines(v: &Verdicts) -> Vec<String> {
    v.checks
        .iter()
        .map(|c| format!("{} {} — {}", if c.passed { "pass" } else { "FAIL" }, c.what, c.detail))
        .collect()
}

#[test]
fn a_reply_under_the_backends_own_id_passes_only_over_the_wire() {
    let e = expect(&format!("reply: '{TRUE_1}'"));
    let after = Some(ReplyLatency::Millis(3.0));
    let device = Observed {
        answer: Some(answer(Some(TRUE_7), after)),
        listing: None,
        vantage: Vantage::Device(inside(None)),
    };
    let backend = Observed {
        answer: Some(answer(Some(TRUE_7), after)),
        listing: None,
        vantage: Vantage::Backend(outside()),
    };
    let shown = String::from_utf8_lossy(TRUE_7);
    assert_eq!(
        lines(&check(1, 4, &e, &device)),
        [format!("FAIL reply is {TRUE_1} — {shown}")]
    );
    assert_eq!(
        lines(&check(1, 4, &e, &backend)),
        [format!(
            "pass reply is {TRUE_1} — {shown} (id 7 chosen by the backend in place of the scenario's)"
        )]
    );
}

#[test]
fn the_record_check_leads_and_the_rest_follow_in_field_order() {
    let e = expect("{ text: \"true\", reply_within: 1s, record_complete: false, events: [panicked] }");
    let record = Record {
        step: 1,
        tool: "t".into(),
        id: 7,
        discovery: String::new(),
        decision: String::new(),
        parameters: String::new(),
        response: String::new(),
        effect: String::new(),
        missing: vec!["acoustic measurement".into()],
        claim: None,
        screen: None,
        screen_shown: None,
    };
    let seen = Observed {
        answer: Some(answer(
            Some(TRUE_7),
            Some(ReplyLatency::Virtual(SimDuration::from_millis(3))),
        )),
        listing: None,
        vantage: Vantage::Device(inside(Some(&record))),
    };
    let v = check(1, 4, &e, &seen);
    assert_eq!(
        lines(&v),
        [
            "pass record complete: false — missing acoustic measurement",
            "pass text is \"true\" — got \"true\"",
            "pass reply within 1s — reply after 3ms",
            "FAIL event panicked — 0 events in the step",
        ]
    );
    assert!(v.unobserved.is_empty());
}

#[test]
fn what_a_backend_cannot_see_is_not_judged_and_says_why() {
    let e = expect("{ reply_id: 7, audible: true, record_complete: true, events: [nvs_written] }");
    let seen = Observed {
        answer: Some(answer(Some(TRUE_7), Some(ReplyLatency::Millis(2.5)))),
        listing: None,
        vantage: Vantage::Backend(outside()),
    };
    let v = check(3, 9, &e, &seen);
    assert!(v.checks.is_empty(), "{:?}", lines(&v));
    assert_eq!(
        v.unobserved,
        [
            "step 3 (line 9): reply_id: the backend personality chose the request id",
            "step 3 (line 9): audible: nothing is heard over the wire",
            "step 3 (line 9): record_complete: over the wire a record never has a measured effect",
            "step 3 (line 9): event nvs_written: happens inside the device; the backend sees only the connection",
        ]
    );
}

#[test]
fn a_missing_reply_is_no_reply_within_only_once_the_backend_waited_long_enough() {
    let e = expect("{ no_reply_within: 30s }");
    let seen = |waited_ms: f64, closed: bool| Observed {
        answer: Some(Answer {
            missing: "no reply: gave up".into(),
            ..answer(None, None)
        }),
        listing: None,
        vantage: Vantage::Backend(Outside {
            waited_ms: Some(waited_ms),
            closed,
            ..outside()
        }),
    };
    let passed = |s: Observed<'_>| check(1, 1, &e, &s).checks[0].passed;
    assert!(!passed(seen(10_000.0, false)), "10 s of 30 s says nothing");
    assert!(passed(seen(30_000.0, false)));
    assert!(passed(seen(10.0, true)), "the connection closed: no reply can come");
    let inside = Observed {
        answer: Some(answer(None, None)),
        listing: None,
        vantage: Vantage::Device(inside(None)),
    };
    assert_eq!(
        lines(&check(1, 1, &e, &inside)),
        ["pass no reply within 30s — no reply"]
    );
}

#[test]
fn replies_compare_after_the_id_the_backend_chose() {
    assert_eq!(
        after_id(r#"{"jsonrpc":"2.0","id":20001,"result":{}}"#),
        Some(r#","result":{}}"#)
    );
    assert_eq!(
        after_id(r#"{"jsonrpc":"2.0","id":-3,"error":{}}"#),
        Some(r#","error":{}}"#)
    );
    assert_eq!(after_id(r#"{"jsonrpc":"2.0","id":"7","result":{}}"#), None);
    assert_eq!(after_id(r#"{"jsonrpc":"2.0","id":,"result":{}}"#), None);
    assert_eq!(after_id("garbage"), None);
}
