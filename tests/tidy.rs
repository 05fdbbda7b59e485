//! House rules that a test enforces (rust-analyzer's `tidy` idea): every source file says what it
//! is, the data layer imports nothing from the runtime, the sim crate's top-level modules form no
//! import cycle, the sim crate stays deterministic (no tokio, wall clock, threads or hash maps),
//! commands of the binary are leaves, files stay small, and no patch leftovers are committed.
//!
//! Each rule reads the files as text; a violation names the file and line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` (recursively), skipping build output and VCS folders.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !matches!(
                    name.as_str(),
                    "target" | ".git" | "corpus" | "artifacts" | "node_modules"
                ) {
                    todo.push(p);
                }
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn rust_files() -> Vec<PathBuf> {
    ["src", "sim", "tests", "benches", "fuzz"]
        .iter()
        .flat_map(|d| files(&root().join(d)))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect()
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// The code of a file: comments removed, `#[cfg(test)]` modules (at the end, by convention) cut.
fn code(text: &str) -> String {
    let body = text.find("#[cfg(test)]\nmod tests").map_or(text, |i| &text[..i]);
    body.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Lines of `text` containing `needle` in code, as `file:line: text`.
fn hits(path: &Path, text: &str, needle: &str) -> Vec<String> {
    code(text)
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, l)| format!("{}:{}: {}", rel(path), i + 1, l.trim()))
        .collect()
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let bad: Vec<String> = rust_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|p| rel(&p))
        .collect();
    assert!(bad.is_empty(), "files without a `//!` header: {bad:?}");
}

/// `board`, `firmware`, `world`, `fault`, `time`, `spec`, `trace`, `mcp`, `audio`, `hw` and `voice` are data, protocol
/// and virtual hardware: they import nothing from the runtime (`device`, `scenario`, `harness`,
/// `backend`, `loopback`).
#[test]
fn the_data_layer_imports_nothing_from_the_runtime() {
    let sim = root().join("sim/src");
    let data: Vec<PathBuf> = ["firmware.rs", "world.rs", "fault.rs", "time.rs", "spec.rs", "trace.rs"]
        .iter()
        .map(|f| sim.join(f))
        .chain(files(&sim.join("board")))
        .chain(files(&sim.join("mcp")))
        .chain(files(&sim.join("audio")))
        .chain(files(&sim.join("hw")))
        .chain(files(&sim.join("voice")))
        .collect();
    let mut bad = Vec::new();
    for p in &data {
        let text = std::fs::read_to_string(p).expect("data module");
        for upper in [
            "crate::device",
            "crate::scenario",
            "crate::harness",
            "crate::backend",
            "crate::loopback",
        ] {
            bad.extend(hits(p, &text, upper));
        }
    }
    assert!(bad.is_empty(), "the data layer reaches up:\n{}", bad.join("\n"));
}

/// The `crate::<module>` references of each top-level module of the sim crate.
fn sim_module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let sim = root().join("sim/src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in files(&sim)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
    {
        let r = p.strip_prefix(&sim).unwrap().to_string_lossy().into_owned();
        let top = r.split('/').next().unwrap().trim_end_matches(".rs").to_string();
        // `lib.rs` only declares modules; a `tests.rs` is a unit-test module (test code may
        // drive the device with the harness).
        if top == "lib" || p.ends_with("tests.rs") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&p).unwrap());
        let deps = graph.entry(top.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                deps.insert(name);
            }
        }
    }
    graph
}

/// A cycle in `graph`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if !state.contains_key(n.as_str())
            && let Some(c) = visit(n, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_sim_crates_modules_form_no_import_cycle() {
    let graph = sim_module_graph();
    assert!(
        graph.contains_key("device") && graph["device"].contains("board"),
        "{graph:?}"
    );
    assert_eq!(find_cycle(&graph), None, "import cycle among sim modules: {graph:?}");
    // The checker itself finds a planted cycle.
    let mut planted = graph.clone();
    planted.entry("board".into()).or_default().insert("device".into());
    assert!(find_cycle(&planted).is_some());
}

/// The sim crate is deterministic and sans-IO (DESIGN.md): no async runtime, no wall clock, no
/// threads, no hash maps (iteration order must not depend on a random seed).
#[test]
fn the_sim_crate_has_no_clock_threads_runtime_or_hash_maps() {
    let mut bad = Vec::new();
    for p in files(&root().join("sim/src"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
    {
        let text = std::fs::read_to_string(&p).unwrap();
        for banned in [
            "tokio",
            "std::time::Instant",
            "Instant::now",
            "SystemTime",
            "std::thread",
            "HashMap",
            "HashSet",
        ] {
            bad.extend(hits(&p, &text, banned));
        }
    }
    assert!(bad.is_empty(), "non-deterministic code in sim/:\n{}", bad.join("\n"));
}

/// Commands are leaves: what two commands share lives in a module of the binary, not in another
/// command.
#[test]
fn no_command_imports_another() {
    let mut bad = Vec::new();
    for p in files(&root().join("src/cmd")) {
        let text = std::fs::read_to_string(&p).unwrap();
        bad.extend(hits(&p, &text, "cmd::"));
    }
    assert!(bad.is_empty(), "commands importing commands:\n{}", bad.join("\n"));
}

/// Small rooms: no source file over 950 lines (the cJSON dialect excepted: it mirrors one C
/// file), and the binary's `main.rs` only parses and dispatches.
#[test]
fn files_stay_small_and_main_stays_thin() {
    let mut bad = Vec::new();
    for p in rust_files()
        .into_iter()
        .filter(|p| !p.starts_with(root().join("tests")))
    {
        let lines = std::fs::read_to_string(&p).unwrap().lines().count();
        if lines > 950 && !p.ends_with("sim/src/cjson.rs") {
            bad.push(format!("{}: {lines} lines", rel(&p)));
        }
    }
    let main = std::fs::read_to_string(root().join("src/main.rs")).unwrap();
    if main.lines().count() > 150 {
        bad.push(format!("src/main.rs: {} lines (at most 150)", main.lines().count()));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn no_patch_leftovers_are_committed() {
    let bad: Vec<String> = files(root())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "orig" || x == "rej"))
        .map(|p| rel(&p))
        .collect();
    assert!(bad.is_empty(), "patch leftovers: {bad:?}");
}
