//! `deploy/kubernetes/fleet-job.yaml` stays in step with the command line: an Indexed Job whose
//! completion index becomes `--shard`, as many completions as shards, every flag it passes
//! accepted by `fleet`, and a merge step over the shards' files. (Running it needs a cluster:
//! README "A fleet on Kubernetes" is the manual check.)

use std::process::Command;

use serde_json::Value;

fn docs() -> Vec<Value> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/fleet-job.yaml")).unwrap();
    serde_saphyr::from_multiple(&text).unwrap()
}

fn env(container: &Value, name: &str) -> String {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no env {name}"))["value"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_indexed_job_shards_by_completion_index_and_the_merge_adds_the_shards_up() {
    let docs = docs();
    let job = docs
        .iter()
        .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == "xiaozhi-fleet")
        .expect("the fleet Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let shards: u64 = env(&spec["template"]["spec"]["containers"][0], "SHARDS")
        .parse()
        .unwrap();
    assert_eq!(spec["completions"].as_u64(), Some(shards));
    assert_eq!(spec["parallelism"].as_u64(), Some(shards));
    let c = &spec["template"]["spec"]["containers"][0];
    let devices: u64 = env(c, "DEVICES").parse().unwrap();
    assert_eq!(devices / shards, 5000, "100,000 devices as 20 pods of 5,000");
    let script = c["args"][0].as_str().unwrap();
    assert!(
        script.contains("--shard \"${JOB_COMPLETION_INDEX}/${SHARDS}\""),
        "{script}"
    );
    assert!(
        script.contains("--json \"/results/${RUN_ID}/shard-${JOB_COMPLETION_INDEX}.json\""),
        "{script}"
    );
    // Per-pod ramp × pods: the backend is dialled at 500 devices/s in all.
    let ramp: f64 = script
        .split("--ramp ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(ramp * shards as f64, 500.0);
    assert!(
        spec["backoffLimitPerIndex"].as_u64().is_some_and(|n| n >= 1),
        "a lost pod is retried"
    );
    // Every flag the pod passes is one `fleet` takes.
    let help = Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"))
        .args(["fleet", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in script.split_whitespace().filter(|w| w.starts_with("--")) {
        assert!(help.contains(flag), "`fleet` has no {flag}");
    }
    let merge = docs
        .iter()
        .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == "xiaozhi-fleet-merge")
        .expect("the merge Job");
    let m = &merge["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(env(m, "SHARDS").parse::<u64>().unwrap(), shards);
    let ms = m["args"][0].as_str().unwrap();
    assert!(
        ms.contains("xiaozhi-twin fleet merge /results/${RUN_ID}/shard-*.json"),
        "{ms}"
    );
    assert_eq!(env(m, "RUN_ID"), env(c, "RUN_ID"), "both Jobs use one run directory");
    // Both Jobs mount the same claim.
    let claim = |j: &Value| j["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"].clone();
    assert_eq!(claim(job), claim(merge));
    let pvc = docs
        .iter()
        .find(|d| d["kind"] == "PersistentVolumeClaim" && d["metadata"]["name"] == claim(job))
        .expect("the claim");
    assert_eq!(pvc["spec"]["accessModes"][0], "ReadWriteMany");
}
