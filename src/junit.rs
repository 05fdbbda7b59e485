//! `run --junit FILE`: the scenario reports as JUnit XML, as CI systems read it (quick-junit,
//! the writer cargo-nextest uses). One `<testsuite>` per scenario file, one `<testcase>` per
//! expectation (named by step, line and what is checked), a `<failure>` with what was observed,
//! the seed and the command that reproduces it in `<system-out>`. Times are **virtual** seconds
//! (a check's time is its step's duration on the simulated device's clock; a suite's, the span of
//! its steps), and the suite says so in a property.

use anyhow::Result;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use xiaozhi_sim::scenario::record::ScenarioReport;

/// The JUnit document for these reports; `command` reproduces a scenario (`{file}`, `{seed}`).
pub fn document(reports: &[ScenarioReport], command: &str) -> Result<String> {
    let mut doc = Report::new("xiaozhi-twin");
    for r in reports {
        let mut suite = TestSuite::new(r.file.clone());
        suite.add_property(Property::new("scenario", r.name.clone()));
        suite.add_property(Property::new("board", format!("{} (firmware {})", r.board, r.firmware)));
        suite.add_property(Property::new("seed", r.seed.to_string()));
        suite.add_property(Property::new("time", "virtual seconds of the simulated device"));
        // A step lasts until the next one starts (the last one: no known end, 0).
        let lasted = |step: usize| {
            let i = r.steps.iter().position(|s| s.n == step);
            match i.map(|i| (&r.steps[i], r.steps.get(i + 1))) {
                Some((s, Some(next))) => ((next.at_ms - s.at_ms) / 1000.0).max(0.0),
                _ => 0.0,
            }
        };
        let span = r.steps.last().map_or(0.0, |s| s.at_ms / 1000.0);
        suite.set_time(std::time::Duration::from_secs_f64(span.max(0.0)));
        for c in &r.checks {
            let name = format!("step {} (line {}): {}", c.step, c.line, c.what);
            let status = if c.passed {
                TestCaseStatus::success()
            } else {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(c.detail.clone());
                s.set_type("expectation");
                s.set_description(format!("expected: {}\nobserved: {}", c.what, c.detail));
                s
            };
            let mut case = TestCase::new(name, status);
            case.set_classname(r.name.clone());
            case.set_time(std::time::Duration::from_secs_f64(lasted(c.step)));
            suite.add_test_case(case);
        }
        let reproduce = command
            .replace("{file}", &r.file)
            .replace("{seed}", &r.seed.to_string());
        suite.set_system_out(format!(
            "{} on {} (firmware {}), seed {}\nreproduce: {reproduce}\n",
            r.name, r.board, r.firmware, r.seed
        ));
        doc.add_test_suite(suite);
    }
    Ok(doc.to_string()?)
}
