//! `run --junit FILE`: the JUnit XML parses, has one testsuite per scenario file and one
//! testcase per expectation, and a run with one false expectation has exactly one `<failure>`.
//!
//! Validated against the JUnit schema of Jenkins' xUnit plugin, `junit-10.xsd`
//! (jenkinsci/xunit-plugin at 8c515de2, MIT; `tests/data/junit/`), with the pinned Python
//! `xmlschema` of `tests/mcp_sdk/ensure_venv.sh`. One deviation is known and checked to be the
//! only one: quick-junit (like cargo-nextest, which uses it) writes `skipped` on `<testsuites>`,
//! an attribute that schema does not list for the root; Jenkins and GitLab read it regardless.

mod common;

use quick_xml::Reader;
use quick_xml::events::Event;

/// (element, attributes) of every start or empty tag, in document order.
fn elements(xml: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut r = Reader::from_str(xml);
    let mut out = Vec::new();
    loop {
        match r.read_event().expect("well-formed XML") {
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                let attrs = e
                    .attributes()
                    .map(|a| {
                        let a = a.unwrap();
                        (
                            String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                .unwrap()
                                .into_owned(),
                        )
                    })
                    .collect();
                out.push((name, attrs));
            }
            Event::Eof => return out,
            _ => {}
        }
    }
}

fn attr<'a>(e: &'a (String, Vec<(String, String)>), k: &str) -> &'a str {
    e.1.iter().find(|(n, _)| n == k).map_or("", |(_, v)| v.as_str())
}

#[test]
fn one_false_expectation_is_exactly_one_failure_with_the_right_counts() {
    let bad = common::scratch_file(
        "junit",
        "bad.yaml",
        b"name: one false expectation\nboard: bread-compact-wifi\nseed: 5\nsteps:\n  - call: { tool: self.audio_speaker.set_volume, args: { volume: 40 }, expect: { text: \"true\" } }\n  - readback: { path: audio_speaker.volume, expect: { value: 41 } }\n",
    );
    let xml_path = bad.with_extension("xml");
    let good = common::root().join("scenarios/v03-amp-shutdown-claim-not-heard.yaml");
    let out = common::twin(&[
        "run",
        bad.to_str().unwrap(),
        good.to_str().unwrap(),
        "--quiet",
        "--junit",
        xml_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "a false expectation fails the run");
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    validate_against_junit_10(&xml_path);
    let els = elements(&xml);
    assert_eq!(els[0].0, "testsuites");
    assert_eq!(attr(&els[0], "tests"), "6");
    assert_eq!(attr(&els[0], "failures"), "1");
    let suites: Vec<_> = els.iter().filter(|e| e.0 == "testsuite").collect();
    assert_eq!(suites.len(), 2);
    assert!(attr(suites[0], "name").ends_with("bad.yaml"));
    assert_eq!(attr(suites[0], "tests"), "2");
    assert_eq!(attr(suites[0], "failures"), "1");
    assert_eq!(attr(suites[1], "failures"), "0");
    let cases: Vec<_> = els.iter().filter(|e| e.0 == "testcase").collect();
    assert_eq!(cases.len(), 6);
    assert!(
        cases
            .iter()
            .all(|c| !attr(c, "classname").is_empty() && !attr(c, "time").is_empty())
    );
    let failures: Vec<_> = els.iter().filter(|e| e.0 == "failure").collect();
    assert_eq!(failures.len(), 1);
    assert!(attr(failures[0], "message").contains("40"), "{:?}", failures[0]);
    assert!(xml.contains("reproduce: xiaozhi-twin run"), "{xml}");
    assert!(xml.contains("--seed 5"), "{xml}");
}

/// Runs the schema validator; returns its error reasons (one per line).
fn schema_errors(xml: &std::path::Path) -> Vec<String> {
    let root = common::root();
    let py = std::process::Command::new("bash")
        .arg(root.join("tests/mcp_sdk/ensure_venv.sh"))
        .output()
        .expect("bash runs");
    assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
    let python = String::from_utf8(py.stdout).unwrap().trim().to_string();
    let script = [
        "import sys, xmlschema",
        "s = xmlschema.XMLSchema(sys.argv[1])",
        "for e in s.iter_errors(sys.argv[2]):",
        "    print(' '.join((e.reason or str(e)).split()))",
    ]
    .join("\n");
    let out = std::process::Command::new(python)
        .args(["-c", &script])
        .arg(root.join("tests/data/junit/junit-10.xsd"))
        .arg(xml)
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn validate_against_junit_10(xml_path: &std::path::Path) {
    let errors = schema_errors(xml_path);
    assert_eq!(
        errors,
        ["'skipped' attribute not allowed for element"],
        "the only deviation from junit-10.xsd is the root's `skipped`"
    );
    // Without that one attribute the document validates, and the validator does catch mistakes.
    let xml = std::fs::read_to_string(xml_path).unwrap();
    let root_end = xml.find("<testsuite ").unwrap();
    let fixed = format!(
        "{}{}",
        xml[..root_end].replacen(" skipped=\"0\"", "", 1),
        &xml[root_end..]
    );
    let ok = xml_path.with_extension("stripped.xml");
    std::fs::write(&ok, &fixed).unwrap();
    assert_eq!(schema_errors(&ok), Vec::<String>::new());
    let broken = ok.with_extension("broken.xml");
    std::fs::write(&broken, fixed.replacen("<testcase name=", "<testcase nom=", 1)).unwrap();
    assert!(
        !schema_errors(&broken).is_empty(),
        "a testcase without a name is refused"
    );
}

#[test]
fn audit_junit_is_a_suite_per_item_a_case_per_trial_and_fails_exactly_the_gates_verdicts() {
    let dir = common::scratch_dir("junit-audit");
    let xml_path = dir.join("audit.xml");
    let out = common::twin(&[
        "audit",
        "--trials",
        "2",
        "--llm",
        "mute-happy",
        "--quiet",
        "--junit",
        xml_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "wrong actions fail the gate");
    validate_against_junit_10(&xml_path);
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    let els = elements(&xml);
    assert_eq!(attr(&els[0], "tests"), "28");
    // mute-happy lowers to 0 in `lower`, `twice` and `amp-off`: 3 items × 2 trials.
    assert_eq!(attr(&els[0], "failures"), "6");
    let suites: Vec<_> = els.iter().filter(|e| e.0 == "testsuite").collect();
    assert_eq!(suites.len(), 14);
    assert_eq!(attr(suites[0], "name"), "audit: lower");
    let failures: Vec<_> = els.iter().filter(|e| e.0 == "failure").collect();
    assert!(
        failures.iter().all(|f| attr(f, "type") == "wrong-action"),
        "{failures:?}"
    );
    assert!(
        attr(failures[0], "message").contains("{\"volume\":0}"),
        "{:?}",
        failures[0]
    );
    assert!(
        xml.contains("reproduce: xiaozhi-twin audit --trials 2 --llm mute-happy"),
        "{xml}"
    );
}
