//! The console's page in Firefox (Debian's firefox-esr, headless, installed by
//! `tests/console/ensure_browser.sh` when missing), driven over WebDriver BiDi, which Firefox
//! serves itself (no geckodriver). The page loads the board and draws its screen; a click on
//! BOOT makes the device send `listen start`; typed lines get the built-in backend's turns, and
//! after its `set_volume 40` (which says `true`) the page's own level of the second reply drops
//! by the twin's figure within 1 dB; Firefox's fake microphone (a tone) reaches the backend as
//! speech and a turn completes; with the amplifier shut down the tool still says `true` while the
//! page hears silence. Screenshots in `<target tmp>/console-firefox/`.

mod common;
#[path = "console/shared.rs"]
mod shared;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use shared::{Killed, ask, browser, console, stderr_after};

/// Firefox's preferences for the test: its fake microphone without asking, sound without a
/// gesture.
const USER_JS: &str = r#"user_pref("media.navigator.streams.fake", true);
user_pref("media.navigator.permission.disabled", true);
user_pref("media.autoplay.default", 0);
user_pref("media.autoplay.blocking_policy", 0);
user_pref("media.autoplay.block-webaudio", false);
user_pref("browser.shell.checkDefaultBrowser", false);
"#;

/// One tab of Firefox, over WebDriver BiDi.
struct Tab {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    context: String,
    next: u64,
    shots: PathBuf,
}

impl Tab {
    async fn command(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws.send(Message::Text(msg.to_string().into())).await.unwrap();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(60), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer"))
                .unwrap()
                .unwrap();
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == id {
                assert_eq!(v["type"], "success", "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    async fn open(bidi: &str, url: &str, shots: PathBuf) -> Tab {
        let (ws, _) = tokio_tungstenite::connect_async(format!("{bidi}/session"))
            .await
            .unwrap();
        let mut tab = Tab {
            ws,
            context: String::new(),
            next: 0,
            shots,
        };
        tab.command("session.new", json!({"capabilities": {}})).await;
        let tree = tab.command("browsingContext.getTree", json!({})).await;
        tab.context = tree["contexts"][0]["context"].as_str().unwrap().to_string();
        let context = tab.context.clone();
        tab.command(
            "browsingContext.setViewport",
            json!({"context": context, "viewport": {"width": 1280, "height": 900}}),
        )
        .await;
        tab.command(
            "browsingContext.navigate",
            json!({"context": context, "url": url, "wait": "complete"}),
        )
        .await;
        tab
    }

    /// `expr` evaluated in the page (promises awaited), through JSON; `None` if it threw.
    async fn try_eval(&mut self, expr: &str) -> Option<Value> {
        let params = json!({
            "expression": format!("(async () => JSON.stringify(await ({expr})))()"),
            "target": {"context": self.context},
            "awaitPromise": true,
            // As from a person's click (a context for sound may start only after one).
            "userActivation": true,
        });
        let r = self.command("script.evaluate", params).await;
        match r["type"].as_str() {
            Some("success") => Some(
                r["result"]["value"]
                    .as_str()
                    .map_or(Value::Null, |s| serde_json::from_str(s).unwrap()),
            ),
            _ => None,
        }
    }

    async fn eval(&mut self, expr: &str) -> Value {
        match self.try_eval(expr).await {
            Some(v) => v,
            None => panic!("{expr}: threw"),
        }
    }

    /// Waits (generously: a busy machine is slow, not wrong) until `expr` is truthy.
    async fn wait_for(&mut self, what: &str, expr: &str) -> Value {
        let start = Instant::now();
        loop {
            let v = self.try_eval(expr).await.unwrap_or(Value::Null);
            if !(v.is_null() || v == json!(false) || v == json!(0) || v == json!("")) {
                return v;
            }
            if start.elapsed() > Duration::from_secs(90) {
                let lines = self.eval("twinConsole.lines.slice(-30).map(l => l.text)").await;
                panic!("{what}: not within 90 s; the last lines: {lines:#}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn screenshot(&mut self, name: &str) {
        let r = self
            .command("browsingContext.captureScreenshot", json!({"context": self.context}))
            .await;
        shared::save_screenshot(&self.shots, name, &r["data"]);
    }

    /// A real click on the element `id` (a board button: its mousedown and mouseup).
    async fn click(&mut self, id: &str) {
        self.eval(&format!(
            "(() => {{ const b = document.getElementById('{id}'); for (const t of ['mousedown', 'mouseup', 'click']) b.dispatchEvent(new MouseEvent(t, {{bubbles: true}})); return true; }})()"
        ))
        .await;
    }

    /// Types `text` in the typed line and presses its button, as a person does.
    async fn type_line(&mut self, text: &str) {
        self.eval(&format!(
            "(() => {{ document.getElementById('typed').value = {}; document.getElementById('send').click(); return true; }})()",
            json!(text)
        ))
        .await;
    }

    /// Reply `session` as the twin and the page measured it (the whole reply).
    async fn reply(&mut self, session: u64) -> Value {
        self.wait_for(
            &format!("reply {session} measured"),
            &format!("twinConsole.levels.find(l => l.session === {session} && l.sentence === null)"),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_firefox_shows_hears_and_talks_to_the_twin() {
    let shots = common::scratch_dir("console-firefox");
    let firefox = browser("firefox");
    let (_console, base) = console(&["--duration", "300s"]);
    let profile = shots.join("profile");
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile).unwrap();
    std::fs::write(profile.join("user.js"), USER_JS).unwrap();
    // No sound card and no sound server here: a PulseAudio of the test's own with a null sink
    // lets Firefox's audio graph run (a context that never runs never hands the page the
    // microphone's samples).
    let home = shots.join("home");
    let run = shots.join("run");
    for d in [&home, &run] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    let pulse = Command::new(browser("pulseaudio"))
        .args([
            "--daemonize=no",
            "--exit-idle-time=-1",
            "-n",
            "--load=module-null-sink",
            "--load=module-native-protocol-unix",
            "--use-pid-file=no",
        ])
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &run)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _pulse = Killed(pulse);
    let socket = run.join("pulse/native");
    let start = Instant::now();
    while !socket.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "PulseAudio never made {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut child = Command::new(&firefox)
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &run)
        .args(["--headless", "--no-remote", "--remote-debugging-port=0", "--profile"])
        .arg(&profile)
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bidi = stderr_after(&mut child, "WebDriver BiDi listening on ");
    let _firefox = Killed(child);
    let mut tab = Tab::open(&bidi, &format!("{base}/"), shots.clone()).await;

    tab.wait_for("the board idle", ask::IDLE).await;
    tab.wait_for("the screen drawn", ask::SCREEN_DRAWN).await;
    let agent = tab.eval("navigator.userAgent").await;
    assert!(agent.as_str().unwrap().contains("Firefox/"), "{agent}");
    tab.eval("(twinConsole.soundOn(), true)").await;
    tab.screenshot("1-loaded").await;

    tab.click("btn-boot").await;
    tab.wait_for("listen start sent", ask::LISTEN_START_SENT).await;
    tab.wait_for("listening", ask::LISTENING).await;

    // Typed: the first turn answered at the device's volume, the second after set_volume 40.
    tab.type_line("你好").await;
    let before = tab.reply(1).await;
    tab.wait_for("listening again", ask::LISTENING).await;
    tab.type_line("把音量调小一点").await;
    let after = tab.reply(2).await;
    assert_eq!(tab.eval(ask::SET_VOLUME_REPLIES).await, json!(["true"]));
    let level = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    let (twin_drop, page_drop) = (
        level(&after, "twin_db") - level(&before, "twin_db"),
        level(&after, "page_db") - level(&before, "page_db"),
    );
    assert!(twin_drop < -3.0, "quieter after set_volume 40: {before} → {after}");
    assert!(
        (page_drop - twin_drop).abs() <= 1.0,
        "Firefox heard {page_drop:.2} dB, the twin {twin_drop:.2} dB: {before} → {after}"
    );
    tab.screenshot("2-quieter").await;

    // Firefox's fake microphone: its tone is speech to the backend's VAD; the turn that follows
    // is the script's first again.
    tab.wait_for("listening again", ask::LISTENING).await;
    tab.eval("twinConsole.startMic().then(() => true)").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = tab.eval("twinConsole.micSent || 0").await.as_u64().unwrap();
    assert!(sent >= 16_000, "2 s of the microphone sent {sent} samples at 16 kHz");
    tab.eval("(twinConsole.stopMic(), true)").await;
    let spoken = tab.reply(3).await;
    assert!(spoken["twin_db"].is_number(), "{spoken}");
    tab.screenshot("3-spoken").await;

    // The amplifier shut down: set_volume still says true, the page hears silence.
    tab.wait_for("listening again", ask::LISTENING).await;
    tab.click("fault-amp_shutdown").await;
    tab.wait_for(
        "the fault set",
        "(twinConsole.status.faults || []).includes('amp_shutdown')",
    )
    .await;
    tab.type_line("再小一点").await;
    let silent = tab.reply(4).await;
    assert_eq!(tab.eval(ask::SET_VOLUME_REPLIES).await, json!(["true", "true"]));
    assert!(
        silent["twin_db"].is_null() && silent["page_db"].is_null(),
        "silence while the tool said true: {silent}"
    );
    tab.screenshot("4-amp-shutdown").await;
}
