//! `xiaozhi-twin console` in a real headless browser: Debian's chromium (installed by
//! `tests/console/ensure_browser.sh` when missing), driven over the DevTools protocol, with a
//! WAV of speech as the browser's fake microphone. The page loads the board; a click on BOOT
//! makes the device send `listen start` to the built-in backend; the microphone's speech reaches
//! the backend and a turn completes; after the backend's `set_volume 40` (which says `true`) the
//! page's own level of the second sentence drops by the twin's figure within 1 dB and the screen
//! changed; with the amplifier shut down the tool still says `true` while the page hears
//! silence. Screenshots of each step are kept in `<target tmp>/console/`.

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

use shared::{Killed, ask, browser, speech_wav, stderr_after};

/// One page of the browser, over the DevTools protocol.
struct Page {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
    shots: PathBuf,
}

impl Page {
    async fn call(
        ws: &mut WebSocketStream<MaybeTlsStream<TcpStream>>,
        id: u64,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Value {
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        ws.send(Message::Text(msg.to_string().into())).await.unwrap();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(60), ws.next())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer"))
                .unwrap()
                .unwrap();
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    async fn open(browser_ws: &str, url: &str, shots: PathBuf) -> Page {
        let (mut ws, _) = tokio_tungstenite::connect_async(browser_ws).await.unwrap();
        let target =
            Page::call(&mut ws, 1, None, "Target.createTarget", json!({"url": "about:blank"})).await["result"].clone();
        let attached = Page::call(
            &mut ws,
            2,
            None,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        )
        .await["result"]
            .clone();
        let session = attached["sessionId"].as_str().unwrap().to_string();
        let mut page = Page {
            ws,
            session,
            next: 3,
            shots,
        };
        page.send("Page.enable", json!({})).await;
        page.send(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await;
        page.send("Page.navigate", json!({"url": url})).await;
        page
    }

    async fn send(&mut self, method: &str, params: Value) -> Value {
        let answer = self.answer(method, params).await;
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }

    async fn answer(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        Page::call(&mut self.ws, self.next, Some(&self.session.clone()), method, params).await
    }

    /// Evaluates `expr` in the page (promises awaited); its value.
    async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .send(
                "Runtime.evaluate",
                json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits (generously: a busy machine is slow, not wrong) until `expr` is truthy; its value.
    async fn wait_for(&mut self, what: &str, expr: &str) -> Value {
        let start = Instant::now();
        loop {
            // While the page loads, its script may not have run yet (or its context may go
            // away): such an answer is "not yet".
            let answer = self
                .answer(
                    "Runtime.evaluate",
                    json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
                )
                .await;
            let v = match answer["result"].get("exceptionDetails") {
                None => answer["result"]["result"]["value"].clone(),
                Some(_) => Value::Null,
            };
            if !(v.is_null() || v == json!(false) || v == json!(0) || v == json!("")) {
                return v;
            }
            if start.elapsed() > Duration::from_secs(90) {
                let lines = self.eval("JSON.stringify(twinConsole.lines.slice(-30))").await;
                panic!("{what}: not within 90 s; the last lines: {lines}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn screenshot(&mut self, name: &str) {
        let r = self.send("Page.captureScreenshot", json!({"format": "png"})).await;
        shared::save_screenshot(&self.shots, name, &r["data"]);
    }

    /// A click on the element `id`: a board button gets its press and release, others a click.
    async fn click(&mut self, id: &str) {
        self.eval(&format!(
            "(() => {{ const b = document.getElementById('{id}'); if (b.onmousedown) {{ b.onmousedown(); b.onmouseup(); }} else b.click(); return true; }})()"
        ))
        .await;
    }

    /// Reply `session` as the twin and the page measured it (the whole reply).
    async fn reply(&mut self, session: u64) -> Value {
        let expr = format!(
            "JSON.stringify(twinConsole.levels.find(l => l.session === {session} && l.sentence === null) || '')"
        );
        let v = self
            .wait_for(
                &format!("reply {session} measured"),
                &format!("{expr} !== '\"\"' && {expr}"),
            )
            .await;
        serde_json::from_str(v.as_str().unwrap()).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_browser_shows_hears_and_talks_to_the_twin() {
    let shots = common::scratch_dir("console");
    let wav = speech_wav(&shots);
    let browser = browser("chromium");
    let mut console = Command::new(common::BIN)
        .args(["console", "--listen", "127.0.0.1:0", "--duration", "300s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = stderr_after(&mut console, "console: ");
    let url = url.split_whitespace().next().unwrap().to_string();
    let _console = Killed(console);
    let profile = shots.join("profile");
    let mut chrome = Command::new(&browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-port=0",
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            "--autoplay-policy=no-user-gesture-required",
        ])
        .arg(format!("--use-file-for-fake-audio-capture={}", wav.display()))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let devtools = stderr_after(&mut chrome, "DevTools listening on ");
    let _chrome = Killed(chrome);
    let mut page = Page::open(&devtools, &url, shots.clone()).await;

    // The page loads the board: its screen, its buttons, idle.
    page.wait_for("the board idle", ask::IDLE).await;
    page.wait_for("the screen drawn", ask::SCREEN_DRAWN).await;
    let first_screen = page.eval("twinConsole.screenVersion").await.as_u64().unwrap();
    page.eval("twinConsole.soundOn(), true").await;
    page.screenshot("1-loaded").await;

    // A click on BOOT: the device sends listen start to the backend and listens.
    page.click("btn-boot").await;
    page.wait_for("listen start sent", ask::LISTEN_START_SENT).await;
    page.wait_for("listening", ask::LISTENING).await;
    page.screenshot("2-listening").await;

    // The browser's microphone says the WAV (again and again): the backend answers the first
    // utterance at the device's volume, and the second with set_volume 40 (true) and a reply the
    // page hears quieter by the twin's own figure.
    page.eval("twinConsole.startMic().then(() => true)").await;
    let before = page.reply(1).await;
    page.wait_for(
        "set_volume answered",
        &format!("{}.length >= 1", ask::SET_VOLUME_REPLIES),
    )
    .await;
    let replies = page.eval(ask::SET_VOLUME_REPLIES).await;
    assert_eq!(replies[0], "true", "{replies}");
    let after = page.reply(2).await;
    let level = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    let (twin_drop, page_drop) = (
        level(&after, "twin_db") - level(&before, "twin_db"),
        level(&after, "page_db") - level(&before, "page_db"),
    );
    assert!(
        twin_drop < -3.0,
        "the reply after set_volume 40 is quieter: {before} → {after}"
    );
    assert!(
        (page_drop - twin_drop).abs() <= 1.0,
        "the page heard {page_drop:.2} dB, the twin {twin_drop:.2} dB: {before} → {after}"
    );
    // The record of the call fills in: listed, `true`, the readback 70 → 40, the drop heard.
    let record = page
        .wait_for(
            "the record's effect",
            "(t => t.includes('volume 70 → 40') && t.includes('dB SPL (') && t)(document.getElementById('records').innerText)",
        )
        .await;
    let record = record.as_str().unwrap();
    assert!(
        record.contains("listed in tools/list") && record.contains("text \"true\""),
        "{record}"
    );
    let screen_now = page.eval("twinConsole.screenVersion").await.as_u64().unwrap();
    assert!(screen_now > first_screen, "the screen changed during the turns");
    page.screenshot("3-quieter").await;

    // The amplifier shut down: the next set_volume still says true; the page hears nothing.
    page.click("fault-amp_shutdown").await;
    page.wait_for(
        "the fault set",
        "(twinConsole.status.faults || []).includes('amp_shutdown')",
    )
    .await;
    page.wait_for(
        "the second set_volume answered",
        &format!("{}.length >= 2", ask::SET_VOLUME_REPLIES),
    )
    .await;
    let replies = page.eval(ask::SET_VOLUME_REPLIES).await;
    assert_eq!(replies[1], "true", "{replies}");
    let silent = page.reply(4).await;
    assert!(
        silent["twin_db"].is_null() && silent["page_db"].is_null(),
        "silence while the tool said true: {silent}"
    );
    page.eval("twinConsole.stopMic(), true").await;
    page.screenshot("4-amp-shutdown").await;

    // A page opened now is shown everything so far, each reply in its own call's row (ids are
    // reused across a connection's requests) and each record as it was.
    let calls = page.eval("twinConsole.calls.filter(c => c.tool).length").await;
    page.send("Page.reload", json!({})).await;
    page.wait_for(
        "the page again",
        "twinConsole.ready && twinConsole.status.state !== undefined",
    )
    .await;
    assert_eq!(page.eval("twinConsole.calls.filter(c => c.tool).length").await, calls);
    let records = page.eval("document.getElementById('records').innerText").await;
    let records = records.as_str().unwrap();
    assert!(
        records.contains("volume 70 → 40") && !records.contains("not in any tools/list"),
        "{records}"
    );
    assert_eq!(
        page.eval("twinConsole.calls.filter(c => c.tool && c.reply_ms === undefined).length")
            .await,
        0,
        "every call answered in its own row"
    );
}
