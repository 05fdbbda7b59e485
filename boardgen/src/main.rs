//! `xiaozhi-boardgen`: reads an xiaozhi-esp32 source tree and writes one board file per upstream
//! build, plus the index the binary embeds (docs/boards.md, "Every upstream build").
//!
//! ```text
//! xiaozhi-boardgen UPSTREAM_DIR --commit HASH [--out boards/upstream] [--index src/boards_upstream.rs] [--check]
//! ```
//!
//! `UPSTREAM_DIR` holds the tree at `HASH` (`main/`, `sdkconfig.defaults*`); `boardgen/regen.sh`
//! fetches it. `--check` writes nothing and exits 1 when a committed file differs.

mod cmake;
mod cxx;
mod emit;
mod extract;
mod kconfig;
mod pp;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

struct Args {
    upstream: PathBuf,
    commit: String,
    out: PathBuf,
    index: PathBuf,
    check: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut upstream = None;
    let mut commit = None;
    let mut out = PathBuf::from("boards/upstream");
    let mut index = PathBuf::from("src/boards_upstream.rs");
    let mut check = false;
    while let Some(a) = it.next() {
        match a.as_str() {
            "--commit" => commit = it.next(),
            "--out" => out = it.next().map(PathBuf::from).ok_or("--out needs a directory")?,
            "--index" => index = it.next().map(PathBuf::from).ok_or("--index needs a file")?,
            "--check" => check = true,
            "-h" | "--help" => {
                return Err(
                    "usage: xiaozhi-boardgen UPSTREAM_DIR --commit HASH [--out DIR] [--index FILE] [--check]".into(),
                );
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => upstream = Some(PathBuf::from(a)),
        }
    }
    let commit = commit.ok_or("--commit HASH is required (the upstream commit UPSTREAM_DIR holds)")?;
    if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("--commit {commit}: give the full 40-hex-digit commit"));
    }
    Ok(Args {
        upstream: upstream.ok_or("UPSTREAM_DIR is required")?,
        commit,
        out,
        index,
        check,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xiaozhi-boardgen: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("xiaozhi-boardgen: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<bool, String> {
    let up = extract::Upstream::open(&args.upstream)?;
    let builds = up.builds()?;
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let mut index_rows: Vec<(String, String)> = Vec::new();
    let mut refused = 0;
    let mut manifest = String::from("# build\ttools its sources register (in order), as the generator read them\n");
    for (dir, cfg, i) in &builds {
        let facts = extract::read_build(&up, dir, cfg, *i);
        let mut notes = Vec::new();
        let text = emit::board_yaml(&facts, &args.commit, &mut notes);
        let rel = format!("{dir}/{}.yaml", facts.build);
        // Every file must load as a board.
        if let Err(e) = xiaozhi_sim::board::BoardSpec::from_yaml(&format!("boards/upstream/{rel}"), &text) {
            eprintln!("xiaozhi-boardgen: {rel}: the generated file does not load: {e}");
            refused += 1;
        }
        files.push((args.out.join(&rel), text));
        let names: Vec<&str> = facts.tools.iter().map(|t| t.name.as_str()).collect();
        manifest.push_str(&format!("{}\t{}\n", facts.build, names.join(",")));
        index_rows.push((facts.build.clone(), rel));
    }
    if refused > 0 {
        return Err(format!("{refused} generated board file(s) do not load"));
    }
    index_rows.sort();
    files.push((args.out.join("TOOLS.tsv"), manifest));
    let index = index_source(&args.commit, &args.out, &args.index, &index_rows);
    files.push((args.index.clone(), index));
    if args.check {
        let mut same = true;
        for (p, text) in &files {
            if std::fs::read_to_string(p).ok().as_deref() != Some(text.as_str()) {
                eprintln!("differs: {}", p.display());
                same = false;
            }
        }
        println!(
            "{} builds at {}: {}",
            builds.len(),
            &args.commit[..8],
            if same {
                "committed files up to date"
            } else {
                "committed files differ"
            }
        );
        return Ok(same);
    }
    // Replace the output folder (boards that left upstream disappear).
    if args.out.is_dir() {
        std::fs::remove_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    }
    for (p, text) in &files {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    println!(
        "{} builds at {}: wrote {} and {}",
        builds.len(),
        &args.commit[..8],
        args.out.display(),
        args.index.display()
    );
    Ok(true)
}

/// The Rust table the binary embeds: `(build id, board file text)`.
fn index_source(commit: &str, out: &Path, index: &Path, rows: &[(String, String)]) -> String {
    // include_str! paths are relative to the index file.
    let depth = index.parent().map_or(0, |p| p.components().count());
    let up = "../".repeat(depth);
    let mut s = String::new();
    s.push_str("//! Every upstream build the binary embeds, generated by `boardgen` (docs/boards.md,\n");
    s.push_str("//! \"Every upstream build\"). Do not edit: run `boardgen/regen.sh`.\n\n");
    s.push_str("/// The upstream commit the generated boards were read at (`78/xiaozhi-esp32`).\n");
    s.push_str(&format!("pub const UPSTREAM_COMMIT: &str = \"{commit}\";\n\n"));
    s.push_str("/// Every upstream build: (build name = board id, path under `boards/upstream/`, board file).\n");
    s.push_str("pub const UPSTREAM: &[(&str, &str, &str)] = &[\n");
    for (id, rel) in rows {
        s.push_str(&format!(
            "    (\"{id}\", \"{rel}\", include_str!(\"{up}{}/{rel}\")),\n",
            out.display()
        ));
    }
    s.push_str("];\n");
    s
}
