//! The facts of one upstream build, read from its folder: `config.json`, `config.h` and the
//! board's C++ sources as the compiler sees them for that build.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cxx::{self, calls, lambda_body, line_of, matching, returns, split_args, string_literal};
use crate::kconfig::Sdkconfig;
use crate::pp::{self, Defines};

/// Everything the generator read about one build.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub dir: String,
    pub build: String,
    pub board_type: String,
    pub manufacturer: String,
    pub target: String,
    pub sdkconfig_append: Vec<String>,
    pub board_symbol: String,
    pub board_class: String,
    pub board_base: String,
    pub main_file: String,
    pub text_font: String,
    /// `BUILTIN_ICON_FONT` of the board's CMake branch (empty: the default).
    pub icon_font: String,
    /// `DEFAULT_EMOJI_COLLECTION` of the board's CMake branch (empty: none).
    pub emoji_collection: String,
    pub input_rate: Option<i64>,
    pub output_rate: Option<i64>,
    pub codec: Option<CodecFacts>,
    pub display: DisplayFacts,
    pub backlight: Option<BacklightFacts>,
    pub camera: Option<CameraFacts>,
    pub led: Option<String>,
    pub battery: bool,
    pub device_aec: bool,
    pub wake_word: bool,
    pub lv_use_snapshot: bool,
    pub flash_size: Option<u32>,
    pub buttons: Vec<ButtonFacts>,
    pub tools: Vec<ToolFacts>,
    /// What the generator could not read or the twin does not model.
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct CodecFacts {
    pub class: String,
    /// The class after board-specific subclasses are followed to an upstream codec class.
    pub base: String,
    pub args: Vec<(String, String)>,
    pub at: String,
}

#[derive(Clone, Debug, Default)]
pub struct DisplayFacts {
    /// The class constructed (`SpiLcdDisplay`, `OledDisplay`, a board class, `NoDisplay`…).
    pub class: String,
    /// `lcd`, `oled`, `emote` or `none`.
    pub kind: String,
    pub driver: String,
    pub width: Option<i64>,
    pub height: Option<i64>,
    pub at: String,
}

#[derive(Clone, Debug, Default)]
pub struct BacklightFacts {
    pub class: String,
    pub gpio: Option<i64>,
    pub invert: bool,
    /// `RestoreBrightness()` at construction (else `SetBrightness(n)` or nothing).
    pub restore: bool,
    pub boot_brightness: Option<i64>,
}

#[derive(Clone, Debug, Default)]
pub struct CameraFacts {
    pub class: String,
    pub sensor: String,
    pub width: u32,
    pub height: u32,
}

#[derive(Clone, Debug, Default)]
pub struct ButtonFacts {
    pub name: String,
    pub gpio: Option<i64>,
    pub long_press_time: i64,
    pub short_press_time: i64,
    /// (gesture, action, what the callback does in a few words)
    pub gestures: Vec<(String, String, String)>,
    pub clicks: Option<i64>,
}

#[derive(Clone, Debug, Default)]
pub struct ToolFacts {
    pub name: String,
    pub description: Option<String>,
    pub description_src: String,
    pub user_only: bool,
    pub properties: Option<Vec<PropFacts>>,
    pub properties_src: String,
    /// The literal every `return` of the callback gives, when they agree.
    pub returns: Option<String>,
    pub at: String,
    /// `lamp` when this is one of LampController's three tools.
    pub lamp_gpio: Option<i64>,
}

#[derive(Clone, Debug, Default)]
pub struct PropFacts {
    pub name: String,
    pub ty: String,
    pub default: Option<String>,
    pub min: Option<i64>,
    pub max: Option<i64>,
    /// Values the board computes at run time, written as a first boot has them (why, each).
    pub assumed: Vec<String>,
}

/// Property values that are C++ expressions of run-time state rather than constants, the value
/// a first boot gives each, and why. Whitespace in the expression is ignored.
const RUN_TIME_VALUES: &[(&str, i64, &str)] = &[
    (
        "inference_en",
        0,
        "sscma_camera.cc reads it with settings.GetInt(\"enable\", 0): 0 until the tool has stored a value",
    ),
    (
        "this->model_class_cnt>0?this->model_class_cnt-1:255",
        255,
        "model_class_cnt starts at 0 (sscma_camera.h) and counts the classes the Himax model reports at run time",
    ),
];

/// `text` as a constant: a preprocessor expression, or a run-time value of [`RUN_TIME_VALUES`]
/// (noted in `assumed`).
fn property_int(text: &str, defs: &Defines, assumed: &mut Vec<String>) -> Option<i64> {
    if let Some(v) = defs.resolve_int(text) {
        return Some(v);
    }
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let (expr, value, why) = RUN_TIME_VALUES.iter().find(|(e, _, _)| *e == compact)?;
    assumed.push(format!("`{expr}` is {value} on a first boot ({why})"));
    Some(*value)
}

/// The upstream tree being read.
pub struct Upstream {
    pub root: PathBuf,
    pub cmake: String,
    pub kconfig: String,
    pub defaults: BTreeMap<String, String>,
}

impl Upstream {
    pub fn open(root: &Path) -> Result<Upstream, String> {
        let read =
            |p: &str| std::fs::read_to_string(root.join(p)).map_err(|e| format!("{}: {e}", root.join(p).display()));
        let cmake = read("main/CMakeLists.txt")?;
        let kconfig = read("main/Kconfig.projbuild")?;
        let mut defaults = BTreeMap::new();
        for entry in std::fs::read_dir(root).map_err(|e| e.to_string())? {
            let entry = entry.map_err(|e| e.to_string())?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("sdkconfig.defaults") {
                defaults.insert(
                    name.clone(),
                    std::fs::read_to_string(entry.path()).map_err(|e| e.to_string())?,
                );
            }
        }
        Ok(Upstream {
            root: root.to_path_buf(),
            cmake,
            kconfig,
            defaults,
        })
    }

    /// `(dir, build index)` of every build, in folder order.
    pub fn builds(&self) -> Result<Vec<(String, serde_json::Value, usize)>, String> {
        let mut dirs = Vec::new();
        collect_configs(
            &self.root.join("main/boards"),
            &self.root.join("main/boards"),
            &mut dirs,
        );
        dirs.sort();
        let mut out = Vec::new();
        for d in dirs {
            let p = self.root.join("main/boards").join(&d).join("config.json");
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
            let n = v["builds"].as_array().map_or(0, Vec::len);
            for i in 0..n {
                out.push((d.clone(), v.clone(), i));
            }
        }
        Ok(out)
    }

    /// The `CONFIG_BOARD_TYPE_*` symbols whose CMake branch sets `BOARD_DIR` to `dir`, with the
    /// branch's text.
    fn board_symbols(&self, dir: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut cur: Option<(String, String)> = None;
        for line in self.cmake.lines() {
            let t = line.trim();
            let cond = t
                .strip_prefix("if(CONFIG_BOARD_TYPE_")
                .or_else(|| t.strip_prefix("elseif(CONFIG_BOARD_TYPE_"));
            if let Some(c) = cond {
                if let Some(done) = cur.take() {
                    out.push(done);
                }
                let sym = c.trim_end_matches(')').to_string();
                cur = Some((format!("BOARD_TYPE_{sym}"), String::new()));
                continue;
            }
            if t.starts_with("endif(") || t == "endif()" || t.starts_with("else(") {
                if let Some(done) = cur.take() {
                    out.push(done);
                }
                continue;
            }
            if let Some((_, body)) = cur.as_mut() {
                body.push_str(t);
                body.push('\n');
            }
        }
        if let Some(done) = cur.take() {
            out.push(done);
        }
        out.into_iter()
            .filter(|(_, body)| body.contains(&format!("set(BOARD_DIR \"{dir}\")")))
            .collect()
    }

    /// Whether Kconfig says `BOARD_TYPE_X` depends on `target`.
    fn symbol_fits_target(&self, sym: &str, target: &str) -> bool {
        let mut lines = self.kconfig.lines();
        while let Some(l) = lines.next() {
            if l.trim() == format!("config {sym}") {
                for l in lines.by_ref() {
                    let t = l.trim();
                    if t.starts_with("config ") || t.starts_with("endchoice") {
                        return true;
                    }
                    if let Some(dep) = t.strip_prefix("depends on ") {
                        return dep.contains(&format!("IDF_TARGET_{}", target.to_uppercase()));
                    }
                }
            }
        }
        true
    }
}

fn collect_configs(base: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            if p.join("config.json").is_file() {
                out.push(p.strip_prefix(base).unwrap_or(&p).to_string_lossy().replace('\\', "/"));
            }
            collect_configs(base, &p, out);
        }
    }
}

/// A source file of the board folder after preprocessing.
struct Source {
    name: String,
    text: String,
    defs: Defines,
}

pub fn read_build(up: &Upstream, dir: &str, cfg: &serde_json::Value, index: usize) -> Facts {
    let build = &cfg["builds"][index];
    let mut f = Facts {
        dir: dir.to_string(),
        build: build["name"].as_str().unwrap_or_default().to_string(),
        board_type: cfg["type"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| dir.replace('/', "-")),
        manufacturer: cfg["manufacturer"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| dir.split_once('/').map(|(m, _)| m.to_string()).unwrap_or_default()),
        target: cfg["target"].as_str().unwrap_or("esp32s3").to_string(),
        sdkconfig_append: build["sdkconfig_append"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default(),
        ..Facts::default()
    };

    // The build's sdkconfig.
    let mut sdk = Sdkconfig::default();
    if let Some(t) = up.defaults.get("sdkconfig.defaults") {
        sdk.apply_lines(t.lines());
    }
    if let Some(t) = up.defaults.get(&format!("sdkconfig.defaults.{}", f.target)) {
        sdk.apply_lines(t.lines());
    }
    sdk.values
        .insert(format!("IDF_TARGET_{}", f.target.to_uppercase()), "y".into());
    sdk.values.insert("IDF_TARGET".into(), format!("\"{}\"", f.target));
    sdk.apply_lines(f.sdkconfig_append.iter().map(String::as_str));
    let explicit = f
        .sdkconfig_append
        .iter()
        .find_map(|l| l.strip_prefix("CONFIG_BOARD_TYPE_").and_then(|r| r.strip_suffix("=y")))
        .map(|s| format!("BOARD_TYPE_{s}"));
    let candidates = up.board_symbols(dir);
    let symbol = explicit.clone().or_else(|| {
        candidates
            .iter()
            .find(|(s, _)| up.symbol_fits_target(s, &f.target))
            .or(candidates.first())
            .map(|(s, _)| s.clone())
    });
    match &symbol {
        Some(s) => {
            sdk.values.insert(s.clone(), "y".into());
            f.board_symbol = format!("CONFIG_{s}");
        }
        None => f
            .notes
            .push("no CONFIG_BOARD_TYPE_* symbol found for this folder in main/CMakeLists.txt".into()),
    }
    sdk.apply_kconfig_defaults(&up.kconfig);
    // The fonts and emoji of the board's CMake branch.
    let branch = candidates.iter().find(|(s, _)| Some(s) == symbol.as_ref());
    (f.text_font, f.icon_font, f.emoji_collection) = crate::cmake::fonts(branch.map_or("", |(_, b)| b));
    f.device_aec = sdk.yes("USE_DEVICE_AEC");
    f.wake_word = !sdk.yes("WAKE_WORD_DISABLED");
    f.lv_use_snapshot = sdk.yes("LV_USE_SNAPSHOT");
    f.flash_size = ["4MB", "8MB", "16MB", "32MB"]
        .iter()
        .find(|s| sdk.yes(&format!("ESPTOOLPY_FLASHSIZE_{s}")))
        .map(|s| s.trim_end_matches("MB").parse::<u32>().unwrap_or(16) * 1024 * 1024);

    // Preprocess the folder's sources.
    let mut base = sdk.defines();
    base.set("BOARD_NAME", &format!("\"{}\"", f.build));
    base.set("BOARD_TYPE", &format!("\"{}\"", f.board_type));
    let (config_defs, files) = pp::preprocess_folder(&up.root.join("main/boards").join(dir), &base);
    let sources: Vec<Source> = files
        .into_iter()
        .map(|(name, text, defs)| Source { name, text, defs })
        .collect();
    let Some(main_i) = sources.iter().position(|s| s.text.contains("DECLARE_BOARD(")) else {
        f.notes.push("no DECLARE_BOARD in the folder's sources".into());
        return f;
    };
    let main = &sources[main_i];
    f.main_file = main.name.clone();
    let defs = &main.defs;
    f.input_rate = defs
        .resolve_int("AUDIO_INPUT_SAMPLE_RATE")
        .or_else(|| config_defs.resolve_int("AUDIO_INPUT_SAMPLE_RATE"));
    f.output_rate = defs
        .resolve_int("AUDIO_OUTPUT_SAMPLE_RATE")
        .or_else(|| config_defs.resolve_int("AUDIO_OUTPUT_SAMPLE_RATE"));
    if let Some(c) = calls(&main.text, "DECLARE_BOARD").first() {
        f.board_class = c.args.trim().to_string();
    }
    let classes = class_bases(&sources);
    f.board_base = chain(&classes, &f.board_class)
        .into_iter()
        .find(|b| b.ends_with("Board") && b != &f.board_class && !classes.contains_key(b))
        .unwrap_or_default();

    read_codec(&mut f, main, &classes);
    read_display(&mut f, main, &classes);
    read_backlight(&mut f, main);
    read_camera(&mut f, main, &sdk);
    read_led(&mut f, main);
    f.battery = main.text.contains("GetBatteryLevel(int");
    read_buttons(&mut f, main);
    read_tools(&mut f, up, &sources, main_i);
    f
}

/// `class X : public Y` across the folder: X → Y.
fn class_bases(sources: &[Source]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for s in sources {
        let b = s.text.as_bytes();
        for (i, _) in s.text.match_indices("class ") {
            if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
                continue;
            }
            let rest = &s.text[i + 6..];
            let head: String = rest.chars().take_while(|c| *c != '{' && *c != ';').collect();
            let Some((name, bases)) = head.split_once(':') else {
                continue;
            };
            let name = name.trim().to_string();
            let base = bases
                .trim()
                .trim_start_matches("public")
                .trim()
                .split([',', ' ', '\n'])
                .next()
                .unwrap_or("")
                .to_string();
            if !name.is_empty() && !base.is_empty() && !name.contains(' ') {
                out.insert(name, base);
            }
        }
    }
    out
}

fn chain(classes: &BTreeMap<String, String>, start: &str) -> Vec<String> {
    let mut out = vec![start.to_string()];
    let mut cur = start.to_string();
    for _ in 0..8 {
        match classes.get(&cur) {
            Some(b) => {
                out.push(b.clone());
                cur = b.clone();
            }
            None => break,
        }
    }
    out
}

const CODEC_CLASSES: [&str; 10] = [
    "Es8311AudioCodec",
    "BoxAudioCodec",
    "Es8374AudioCodec",
    "Es8388AudioCodec",
    "Es8389AudioCodec",
    "NoAudioCodecSimplex",
    "NoAudioCodecDuplex",
    "NoAudioCodecSimplexPdm",
    "DummyAudioCodec",
    "NoAudioCodec",
];

/// The first ten parameters of the upstream codec classes on an I2C bus and their own I2S
/// port (`Es8311AudioCodec`, `Es8374AudioCodec`, `Es8388AudioCodec`, `Es8389AudioCodec`).
const I2C_CODEC: [&str; 10] = [
    "i2c_bus",
    "i2c_port",
    "input_sample_rate",
    "output_sample_rate",
    "mclk",
    "bclk",
    "ws",
    "dout",
    "din",
    "pa_pin",
];

/// Parameter names of the upstream codec constructors (`main/audio/codecs/*.h`).
fn codec_params(class: &str, n: usize) -> Vec<&'static str> {
    let i2c = |rest: &[&'static str]| I2C_CODEC.iter().chain(rest).copied().collect::<Vec<_>>();
    match class {
        "Es8311AudioCodec" => i2c(&["es8311_addr", "use_mclk", "pa_inverted"]),
        "Es8374AudioCodec" => i2c(&["es8374_addr", "use_mclk"]),
        "Es8388AudioCodec" => i2c(&["es8388_addr", "input_reference"]),
        "Es8389AudioCodec" => i2c(&["es8389_addr", "use_mclk", "input_channels", "output_channels"]),
        // BoxAudioCodec takes no port: the I2C bus, then the rates.
        "BoxAudioCodec" => ["i2c_bus"]
            .into_iter()
            .chain(I2C_CODEC[2..].iter().copied())
            .chain([
                "es8311_addr",
                "es7210_addr",
                "input_reference",
                "input_gain",
                "reference_gain_channel",
                "reference_gain",
            ])
            .collect(),
        "NoAudioCodecDuplex" => vec!["input_sample_rate", "output_sample_rate", "bclk", "ws", "dout", "din"],
        "NoAudioCodecSimplex" if n == 10 => vec![
            "input_sample_rate",
            "output_sample_rate",
            "spk_bclk",
            "spk_ws",
            "spk_dout",
            "spk_slot_mask",
            "mic_sck",
            "mic_ws",
            "mic_din",
            "mic_slot_mask",
        ],
        "NoAudioCodecSimplex" => vec![
            "input_sample_rate",
            "output_sample_rate",
            "spk_bclk",
            "spk_ws",
            "spk_dout",
            "mic_sck",
            "mic_ws",
            "mic_din",
        ],
        "NoAudioCodecSimplexPdm" => vec![
            "input_sample_rate",
            "output_sample_rate",
            "spk_bclk",
            "spk_ws",
            "spk_dout",
            "mic_sck",
            "mic_din",
        ],
        "DummyAudioCodec" => vec!["input_sample_rate", "output_sample_rate"],
        _ => Vec::new(),
    }
}

fn value_text(defs: &Defines, arg: &str) -> String {
    match defs.resolve_int(arg) {
        Some(v) => {
            let raw = defs.expand(arg);
            if raw.contains("0x") || arg.contains("ADDR") {
                format!("0x{v:02x}")
            } else {
                v.to_string()
            }
        }
        None => {
            let e = defs.expand(arg);
            match e.as_str() {
                "true" | "false" => e,
                _ => e.split_whitespace().collect::<Vec<_>>().join(" "),
            }
        }
    }
}

/// The body of the board's `Name() … override { … }` (the text between the braces), if it
/// overrides `name`.
fn override_body<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = text.match_indices(name).find_map(|(i, _)| {
        let rest = &text[i..];
        let brace = rest.find('{')?;
        let semi = rest.find(';').unwrap_or(usize::MAX);
        (brace < semi && rest[..brace].contains("override")).then_some(i + brace)
    })?;
    let end = matching(text.as_bytes(), open).unwrap_or(text.len());
    Some(&text[open..end])
}

/// The codec `GetAudioCodec()` constructs.
fn read_codec(f: &mut Facts, main: &Source, classes: &BTreeMap<String, String>) {
    let text = &main.text;
    let Some(body) = override_body(text, "GetAudioCodec()") else {
        f.notes
            .push("no GetAudioCodec() override: the board has no audio codec".into());
        return;
    };
    let pos = body.as_ptr() as usize - text.as_ptr() as usize;
    // `static Class name(args);`, `new Class(args)`, or `return &member;` of a member built
    // elsewhere (then look for `member = new Class(` / `Class member(`).
    let known: BTreeSet<String> = classes
        .keys()
        .cloned()
        .chain(CODEC_CLASSES.iter().map(|s| s.to_string()))
        .collect();
    let mut found: Option<(String, String, usize)> = None;
    for class in known.iter().filter(|c| c.contains("Codec")) {
        for (i, _) in body.match_indices(class.as_str()) {
            let before = body[..i].chars().last().unwrap_or(' ');
            if before.is_ascii_alphanumeric() || before == '_' {
                continue;
            }
            let after = &body[i + class.len()..];
            if !after.starts_with([' ', '(']) {
                continue;
            }
            let Some(open) = after.find('(') else { continue };
            let between = after[..open].trim();
            if between.contains(['=', ';', '{', '}', '*', '&']) || between.split_whitespace().count() > 1 {
                continue;
            }
            let abs = pos + i + class.len() + open;
            if let Some(close) = matching(text.as_bytes(), abs) {
                let args = text[abs + 1..close - 1].to_string();
                if found.as_ref().is_none_or(|(_, _, at)| abs < *at) {
                    found = Some((class.clone(), args, abs));
                }
            }
        }
    }
    if found.is_none() {
        // A member returned by pointer: find where it is constructed in the file.
        let member = body
            .split("return")
            .nth(1)
            .map(|r| {
                r.trim()
                    .trim_start_matches('&')
                    .trim_end_matches([';', ' ', '\n', '}'])
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        if !member.is_empty() {
            for class in known.iter().filter(|c| c.contains("Codec")) {
                for pat in [format!("{member} = new {class}("), format!("{class} {member}(")] {
                    if let Some(i) = text.find(&pat) {
                        let abs = i + pat.len() - 1;
                        if let Some(close) = matching(text.as_bytes(), abs) {
                            found = Some((class.clone(), text[abs + 1..close - 1].to_string(), abs));
                        }
                    }
                }
            }
        }
    }
    let Some((class, args, at)) = found else {
        f.notes
            .push("GetAudioCodec() constructs no codec the generator recognises".into());
        return;
    };
    let base = chain(classes, &class)
        .into_iter()
        .find(|c| CODEC_CLASSES.contains(&c.as_str()))
        .unwrap_or_else(|| class.clone());
    let list = split_args(&args);
    let names = if base == class {
        codec_params(&class, list.len())
    } else {
        Vec::new()
    };
    let args = list
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let name = names.get(i).map_or_else(|| format!("arg{}", i + 1), |n| n.to_string());
            (name, value_text(&main.defs, a))
        })
        .filter(|(n, _)| n != "i2c_bus")
        .collect();
    f.codec = Some(CodecFacts {
        class,
        base,
        args,
        at: format!("{}:{}", main.name, line_of(text, at)),
    });
}

const DISPLAY_BASES: [(&str, &str); 8] = [
    ("SpiLcdDisplay", "lcd"),
    ("RgbLcdDisplay", "lcd"),
    ("MipiLcdDisplay", "lcd"),
    ("LcdDisplay", "lcd"),
    ("OledDisplay", "oled"),
    ("EmoteDisplay", "emote"),
    ("NoDisplay", "none"),
    ("LvglDisplay", "lvgl"),
];

fn read_display(f: &mut Facts, main: &Source, classes: &BTreeMap<String, String>) {
    let text = &main.text;
    let mut best: Option<(usize, String)> = None;
    for (i, _) in text.match_indices("new ") {
        let rest = &text[i + 4..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let short = name.rsplit("::").next().unwrap_or(&name).to_string();
        let is_display = chain(classes, &short)
            .iter()
            .any(|c| DISPLAY_BASES.iter().any(|(b, _)| b == c));
        if is_display && short != "NoDisplay" {
            best = Some((i, short));
            break;
        }
    }
    let (at, class) = match best {
        Some(b) => b,
        None => match text.find("new NoDisplay") {
            Some(i) => (i, "NoDisplay".to_string()),
            None => {
                f.display = DisplayFacts {
                    class: "NoDisplay".into(),
                    kind: "none".into(),
                    ..Default::default()
                };
                f.notes
                    .push("no display constructed: Board::GetDisplay() gives a NoDisplay".into());
                return;
            }
        },
    };
    let kind = chain(classes, &class)
        .iter()
        .find_map(|c| DISPLAY_BASES.iter().find(|(b, _)| b == c).map(|(_, k)| k.to_string()))
        .unwrap_or_else(|| "lcd".into());
    let defs = &main.defs;
    let driver = detect_driver(text);
    f.display = DisplayFacts {
        class: class.clone(),
        kind,
        driver,
        width: defs.resolve_int("DISPLAY_WIDTH"),
        height: defs.resolve_int("DISPLAY_HEIGHT"),
        at: format!("{}:{}", main.name, line_of(text, at)),
    };
    if text.contains("new NoDisplay") {
        f.notes.push(
            "the board falls back to NoDisplay when its panel does not answer; the twin models a panel that answers"
                .into(),
        );
    }
}

/// The panel driver: the first `esp_lcd_new_panel_<x>` or `ssd1306`/`sh1106` call.
fn detect_driver(text: &str) -> String {
    if let Some(i) = text.find("esp_lcd_new_panel_") {
        let rest = &text[i + "esp_lcd_new_panel_".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name != "io_spi" && name != "io_i2c" && !name.starts_with("io_") {
            return name;
        }
        // Find the next one that is not an io.
        for (j, _) in text.match_indices("esp_lcd_new_panel_") {
            let r = &text[j + "esp_lcd_new_panel_".len()..];
            let n: String = r
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !n.starts_with("io_") {
                return n;
            }
        }
    }
    String::new()
}

fn read_backlight(f: &mut Facts, main: &Source) {
    let text = &main.text;
    let Some(body) = override_body(text, "GetBacklight()") else {
        return;
    };
    let mut b = BacklightFacts::default();
    if let Some(c) = calls(body, "PwmBacklight")
        .into_iter()
        .chain(calls(body, "backlight"))
        .find(|c| !c.args.trim().is_empty())
    {
        let a = split_args(c.args);
        b.class = "PwmBacklight".into();
        b.gpio = a.first().and_then(|g| main.defs.resolve_int(g));
        b.invert = a.get(1).and_then(|v| main.defs.resolve_int(v)).is_some_and(|v| v != 0);
    }
    if !body.contains("PwmBacklight") {
        let class: String = body
            .split_whitespace()
            .find(|w| w.contains("Backlight") && !w.starts_with("GetBacklight"))
            .unwrap_or("Backlight")
            .trim_matches(|c: char| !c.is_ascii_alphanumeric())
            .to_string();
        b.class = class;
        b.gpio = None;
    }
    b.restore = text.contains("RestoreBrightness()");
    if !b.restore {
        for c in calls(text, "SetBrightness") {
            let before = &text[c.at.saturating_sub(40)..c.at];
            if before.contains("GetBacklight()") {
                b.boot_brightness = main.defs.resolve_int(c.args);
                break;
            }
        }
    }
    f.backlight = Some(b);
}

fn read_camera(f: &mut Facts, main: &Source, sdk: &Sdkconfig) {
    let text = &main.text;
    let class = ["Esp32Camera", "EspVideo", "SscmaCamera"]
        .into_iter()
        .find(|c| text.contains(&format!("new {c}(")) || text.contains(&format!("static {c} ")));
    let Some(class) = class else {
        if text.contains("GetCamera() override") {
            f.notes
                .push("GetCamera() is overridden but no camera class the generator knows is constructed".into());
        }
        return;
    };
    // The sensor and frame size from the build's camera options (CONFIG_CAMERA_<SENSOR>_…_<W>X<H>_…).
    let mut sensor = String::new();
    let (mut w, mut h) = (0u32, 0u32);
    for (k, v) in &sdk.values {
        if v != "y" {
            continue;
        }
        if let Some(rest) = k.strip_prefix("CAMERA_") {
            let model = rest.split('_').next().unwrap_or("");
            if sensor.is_empty()
                && model.starts_with(|c: char| c.is_ascii_uppercase())
                && model.chars().any(|c| c.is_ascii_digit())
            {
                sensor = model.to_string();
            }
            for part in rest.split('_') {
                if let Some((a, b)) = part.split_once('X')
                    && let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>())
                    && w == 0
                {
                    w = a;
                    h = b;
                }
            }
        }
    }
    if sensor.is_empty() {
        sensor = "auto-detected".into();
        f.notes
            .push("camera sensor auto-detected at boot (not named by the build's sdkconfig)".into());
    }
    if w == 0
        && let Some(i) = text.find("FRAMESIZE_")
    {
        let size: String = text[i + 10..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        (w, h) = match size.as_str() {
            "QQVGA" => (160, 120),
            "QVGA" => (320, 240),
            "HVGA" => (480, 320),
            "VGA" => (640, 480),
            "SVGA" => (800, 600),
            "XGA" => (1024, 768),
            "HD" => (1280, 720),
            "240X240" => (240, 240),
            _ => (0, 0),
        };
    }
    if w == 0 {
        (w, h) = (640, 480);
        f.notes
            .push("camera frame size not named by the build's sdkconfig: 640x480 assumed".into());
    }
    f.camera = Some(CameraFacts {
        class: class.to_string(),
        sensor,
        width: w,
        height: h,
    });
}

fn read_led(f: &mut Facts, main: &Source) {
    let text = &main.text;
    if let Some(body) = override_body(text, "GetLed()") {
        for class in ["SingleLed", "CircularStrip", "GpioLed", "NoLed"] {
            if let Some(c) = calls(body, class).first().or(None) {
                f.led = Some(format!("{class}({})", c.args.trim()));
                return;
            }
            if let Some(j) = body.find(&format!("static {class} ")) {
                let rest = &body[j..];
                let args = rest
                    .find('(')
                    .and_then(|o| matching(rest.as_bytes(), o).map(|e| rest[o + 1..e - 1].to_string()));
                let args = args.map(|a| {
                    split_args(&a)
                        .iter()
                        .map(|x| value_text(&main.defs, x))
                        .collect::<Vec<_>>()
                        .join(", ")
                });
                f.led = Some(format!("{class}({})", args.unwrap_or_default()));
                return;
            }
        }
        f.led = Some("board-specific".into());
    }
}

fn classify_button(body: &str) -> (String, String) {
    let b = body;
    let has = |s: &str| b.contains(s);
    if has("ToggleChatState") {
        return ("toggle_chat".into(), "ToggleChatState()".into());
    }
    if has("StartListening") && !has("StopListening") {
        return ("start_listening".into(), "StartListening()".into());
    }
    if has("StopListening") && !has("StartListening") {
        return ("stop_listening".into(), "StopListening()".into());
    }
    if has("SetOutputVolume(") {
        let compact: String = b.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.contains("SetOutputVolume(100)") {
            return ("volume_max".into(), "SetOutputVolume(100)".into());
        }
        if compact.contains("SetOutputVolume(0)") {
            return ("volume_min".into(), "SetOutputVolume(0)".into());
        }
        if compact.contains("+10") || compact.contains("+=10") {
            return ("volume_up".into(), "volume +10".into());
        }
        if compact.contains("-10") || compact.contains("-=10") {
            return ("volume_down".into(), "volume -10".into());
        }
    }
    // Not modelled: say what it calls.
    let mut what: Vec<String> = Vec::new();
    for key in [
        "EnterWifiConfigMode",
        "SetPowerSaveMode",
        "PowerOff",
        "esp_restart",
        "Shutdown",
        "SetBrightness",
        "WakeWordInvoke",
        "ResetWifiConfiguration",
        "SwitchNetworkType",
        "StartTalk",
        "Schedule",
        "SetMode",
        "gpio_set_level",
        "SetChatMessage",
    ] {
        if has(key) {
            what.push(key.to_string());
        }
    }
    if what.is_empty() {
        what.push("board-specific code".into());
    }
    ("unmodelled".into(), what.join(", "))
}

fn read_buttons(f: &mut Facts, main: &Source) {
    let text = &main.text;
    // Members: `Button name_;` (and subclasses ending in Button).
    let mut names: Vec<String> = Vec::new();
    for (i, _) in text.match_indices("Button ") {
        let rest = &text[i + 7..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && rest[name.len()..].trim_start().starts_with(';') && !names.contains(&name) {
            names.push(name);
        }
    }
    for name in names {
        let mut b = ButtonFacts {
            name: name.trim_end_matches('_').trim_end_matches("_button").to_string(),
            ..Default::default()
        };
        // The constructor argument: `name(GPIO, …)` in an initialiser list.
        if let Some(c) = calls(text, &name).into_iter().find(|c| !c.args.trim().is_empty()) {
            let a = split_args(c.args);
            b.gpio = a.first().and_then(|g| main.defs.resolve_int(g));
            // Button(gpio, active_high = false, long_press_time = 0, short_press_time = 0, …)
            b.long_press_time = a.get(2).and_then(|v| main.defs.resolve_int(v)).unwrap_or(0);
            b.short_press_time = a.get(3).and_then(|v| main.defs.resolve_int(v)).unwrap_or(0);
        }
        for (method, gesture) in [
            ("OnPressDown", "press_down"),
            ("OnPressUp", "press_up"),
            ("OnClick", "click"),
            ("OnDoubleClick", "double_click"),
            ("OnMultipleClick", "multiple_click"),
            ("OnLongPress", "long_press"),
        ] {
            for c in calls(text, method) {
                let before = &text[c.at.saturating_sub(name.len() + 2)..c.at];
                if !before.trim_end_matches(['.', '>', '-']).ends_with(&name) {
                    continue;
                }
                let body = lambda_body(c.args).unwrap_or("");
                let (action, what) = classify_button(body);
                if gesture == "multiple_click" {
                    let a = split_args(c.args);
                    b.clicks = a.get(1).and_then(|v| main.defs.resolve_int(v)).or(Some(3));
                }
                b.gestures.push((gesture.to_string(), action, what));
            }
        }
        if b.gpio.is_none_or(|g| g < 0) {
            // A button on no GPIO (NC) or an ADC/touch button: note it, skip it.
            if !b.gestures.is_empty() {
                f.notes.push(format!(
                    "button `{}` is not on a plain GPIO the generator could read; not wired in the twin",
                    b.name
                ));
            }
            continue;
        }
        if !b.gestures.is_empty() {
            f.buttons.push(b);
        }
    }
}

/// Tool registration: the board constructor's calls in order, following methods of the same
/// file and the constructors of classes from other files of the folder (and the shared
/// `LampController` / `PressToTalkMcpTool`).
fn read_tools(f: &mut Facts, up: &Upstream, sources: &[Source], main_i: usize) {
    let common = up.root.join("main/boards/common");
    let mut units: Vec<Source> = Vec::new();
    for name in ["lamp_controller.h", "press_to_talk_mcp_tool.cc"] {
        let mut defs = sources[main_i].defs.clone();
        let text = pp::preprocess(&common.join(name), &mut defs, 0);
        units.push(Source {
            name: format!("common/{name}"),
            text,
            defs,
        });
    }
    let all: Vec<&Source> = sources.iter().chain(units.iter()).collect();
    let main = &sources[main_i];
    let mut out: Vec<ToolFacts> = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    // The board constructor.
    if let Some(body) = ctor_body(&main.text, &f.board_class) {
        walk(body, main, &all, &mut stack, &mut out, 0);
    }
    // Registrations the walk did not reach (by name), flagged.
    let reached: BTreeSet<&str> = out.iter().map(|t| t.name.as_str()).collect();
    let missed = tool_calls(&main.text)
        .iter()
        .filter_map(|(_, _, args)| split_args(args).first().and_then(|n| string_literal(n)))
        .filter(|n| !reached.contains(n.as_str()))
        .count();
    if missed > 0 {
        f.notes.push(format!(
            "{missed} AddTool call(s) in {} not reached from the board constructor: not registered in the twin",
            main.name
        ));
    }
    f.tools = out;
}

/// `(offset, user_only, args)` of every AddTool/AddUserOnlyTool call.
fn tool_calls(text: &str) -> Vec<(usize, bool, String)> {
    let mut v: Vec<(usize, bool, String)> = calls(text, "AddTool")
        .into_iter()
        .map(|c| (c.at, false, c.args.to_string()))
        .chain(
            calls(text, "AddUserOnlyTool")
                .into_iter()
                .map(|c| (c.at, true, c.args.to_string())),
        )
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

/// The body of `Class::Class(…)` or of an in-class constructor `Class(…) : … {`.
fn ctor_body<'a>(text: &'a str, class: &str) -> Option<&'a str> {
    let b = text.as_bytes();
    for c in calls(text, class) {
        let before = text[..c.at].trim_end();
        // Skip `new Class(`, `DECLARE_BOARD(Class)` and `Class x(`.
        if before.ends_with("new") || before.ends_with('(') || before.ends_with(',') {
            continue;
        }
        let rest = &text[c.end..];
        let brace = rest.find('{')?;
        let semi = rest.find(';').unwrap_or(usize::MAX);
        if brace < semi {
            let open = c.end + brace;
            let end = matching(b, open)?;
            return Some(&text[open + 1..end - 1]);
        }
    }
    None
}

/// A method body by name in `text` (`Name(…) [const] [override] {`), first definition.
fn method_body<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let b = text.as_bytes();
    for c in calls(text, name) {
        let rest = &text[c.end..];
        let t = rest.trim_start();
        let t2 = t
            .trim_start_matches("const")
            .trim_start()
            .trim_start_matches("override")
            .trim_start();
        if t2.starts_with('{') {
            let open = c.end + (rest.len() - t2.len());
            let end = matching(b, open)?;
            return Some(&text[open + 1..end - 1]);
        }
    }
    None
}

fn walk(body: &str, src: &Source, all: &[&Source], stack: &mut Vec<String>, out: &mut Vec<ToolFacts>, depth: u32) {
    if depth > 6 {
        return;
    }
    let base = body.as_ptr() as usize - src.text.as_ptr() as usize;
    let bb = body.as_bytes();
    let mut i = 0;
    while i < bb.len() {
        if bb[i] == b'"' || bb[i] == b'\'' {
            i = crate::pp::skip_literal(bb, i);
            continue;
        }
        if !(bb[i].is_ascii_alphabetic() || bb[i] == b'_')
            || (i > 0 && (bb[i - 1].is_ascii_alphanumeric() || bb[i - 1] == b'_'))
        {
            i += 1;
            continue;
        }
        let s = i;
        while i < bb.len() && (bb[i].is_ascii_alphanumeric() || bb[i] == b'_') {
            i += 1;
        }
        let word = &body[s..i];
        let mut j = i;
        while j < bb.len() && bb[j].is_ascii_whitespace() {
            j += 1;
        }
        match word {
            "AddTool" | "AddUserOnlyTool" if j < bb.len() && bb[j] == b'(' => {
                if let Some(end) = matching(bb, j) {
                    let args = &body[j + 1..end - 1];
                    if let Some(t) = read_tool(args, word == "AddUserOnlyTool", src, base + s) {
                        out.push(t);
                    }
                    i = end;
                }
                continue;
            }
            _ => {}
        }
        // `new Class(` / `static Class x(` / `Class x(` of a class defined in another unit.
        if let Some(unit) = all
            .iter()
            .find(|u| !std::ptr::eq(**u, src) && defines_class(&u.text, word) && !stack.contains(&word.to_string()))
        {
            let instantiated = body[..s].trim_end().ends_with("new")
                || body[i..]
                    .trim_start()
                    .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
            if instantiated {
                if let Some(ctor) = ctor_body(&unit.text, word) {
                    stack.push(word.to_string());
                    walk(ctor, unit, all, stack, out, depth + 1);
                    stack.pop();
                    if word == "LampController" {
                        let gpio = body[i..].find('(').and_then(|o| {
                            let e = matching(&body.as_bytes()[i..], o)?;
                            src.defs.resolve_int(&body[i + o + 1..i + e - 1])
                        });
                        for t in out.iter_mut().rev().take(3) {
                            t.lamp_gpio = gpio;
                        }
                    }
                }
                continue;
            }
        }
        // A call of a method defined in the same unit, or of a free function of another file
        // (`::InitializeOttoController(…)`, `InitializeElectronBotController()`).
        if j < bb.len() && bb[j] == b'(' && !matches!(word, "if" | "for" | "while" | "switch" | "return" | "sizeof") {
            let global = body[..s].ends_with("::")
                && !body[..s]
                    .trim_end_matches("::")
                    .ends_with(|c: char| c.is_ascii_alphanumeric());
            let same = (!global)
                .then(|| method_body(&src.text, word).map(|m| (src, m)))
                .flatten();
            let target = same.or_else(|| {
                all.iter()
                    .filter(|u| !std::ptr::eq(**u, src))
                    .find_map(|u| method_body(&u.text, word).map(|m| (*u, m)))
            });
            if let Some((unit, m)) = target {
                let key = format!("{}::{word}", unit.name);
                if !stack.contains(&key) {
                    stack.push(key);
                    walk(m, unit, all, stack, out, depth + 1);
                    stack.pop();
                }
            }
        }
    }
}

fn defines_class(text: &str, name: &str) -> bool {
    text.contains(&format!("class {name} "))
        || text.contains(&format!("class {name}\n"))
        || text.contains(&format!("class {name}{{"))
        || text.contains(&format!("{name}::{name}("))
}

fn read_tool(args: &str, user_only: bool, src: &Source, at: usize) -> Option<ToolFacts> {
    let a = split_args(args);
    let name = string_literal(a.first()?)?;
    let desc_src = a.get(1).map(|s| s.to_string()).unwrap_or_default();
    let description = string_literal(&desc_src).or_else(|| {
        // A name defined as a string macro.
        let e = src.defs.expand(&desc_src);
        string_literal(&e)
    });
    let props_src = a.get(2).map(|s| s.to_string()).unwrap_or_default();
    let properties = read_properties(&props_src, &src.defs);
    let cb = a.get(3).copied().unwrap_or("");
    let rets = lambda_body(cb).map(returns).unwrap_or_default();
    let returns = if !rets.is_empty() && rets.iter().all(|r| r == &rets[0]) && is_literal(&rets[0]) {
        Some(rets[0].clone())
    } else {
        None
    };
    Some(ToolFacts {
        name,
        description,
        description_src: desc_src.split_whitespace().collect::<Vec<_>>().join(" "),
        user_only,
        properties,
        properties_src: props_src.split_whitespace().collect::<Vec<_>>().join(" "),
        returns,
        at: format!("{}:{}", src.name, line_of(&src.text, at)),
        lamp_gpio: None,
    })
}

fn is_literal(s: &str) -> bool {
    s == "true" || s == "false" || s.parse::<i64>().is_ok() || cxx::string_literal(s).is_some()
}

fn read_properties(src: &str, defs: &Defines) -> Option<Vec<PropFacts>> {
    let t = src.trim();
    if t == "PropertyList()" || t == "PropertyList{}" || t == "{}" {
        return Some(Vec::new());
    }
    let inner = t.strip_prefix("PropertyList(")?.strip_suffix(')')?.trim();
    let inner = inner
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(inner)
        .trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    // A trailing comma (`Property(…),` before the brace) leaves an empty last argument.
    for p in split_args(inner).into_iter().filter(|p| !p.trim().is_empty()) {
        let p = p.trim();
        let args = p.strip_prefix("Property(")?.strip_suffix(')')?;
        let a = split_args(args);
        let name = string_literal(a.first()?)?;
        let ty = match a.get(1)?.trim() {
            "kPropertyTypeInteger" => "integer",
            "kPropertyTypeBoolean" => "boolean",
            "kPropertyTypeString" => "string",
            _ => return None,
        };
        let rest: Vec<&str> = a[2..].to_vec();
        let mut assumed = Vec::new();
        let ints: Option<Vec<i64>> = rest.iter().map(|v| property_int(v, defs, &mut assumed)).collect();
        let mut prop = PropFacts {
            name,
            ty: ty.to_string(),
            assumed,
            ..Default::default()
        };
        match (ty, rest.len()) {
            (_, 0) => {}
            ("string", 1) => prop.default = Some(format!("{:?}", string_literal(rest[0])?)),
            ("boolean", 1) => prop.default = Some(defs.expand(rest[0])),
            ("integer", 1) => prop.default = Some(ints?[0].to_string()),
            ("integer", 2) => {
                let v = ints?;
                prop.min = Some(v[0]);
                prop.max = Some(v[1]);
            }
            ("integer", 3) => {
                let v = ints?;
                prop.default = Some(v[0].to_string());
                prop.min = Some(v[1]);
                prop.max = Some(v[2]);
            }
            _ => return None,
        }
        out.push(prop);
    }
    Some(out)
}
