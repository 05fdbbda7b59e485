//! `Application::UpgradeFirmware` (FIRMWARE.md §11.2): the alert, the audio channel closed,
//! the download attempt and what follows its failure or success, split where the main task blocks.

use crate::audio::source::Prompt;
use crate::device::Core;
use crate::device::app::{RebootStage, Running, Step, Task};
use crate::device::state::DeviceState;
use crate::trace::{Event, LogLevel};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// Where `UpgradeFirmware` resumes after each block of the main task.
pub enum UpgradeStage {
    /// Close the audio channel if open, play the upgrade alert, wait 3000 ms.
    Start,
    /// Request `upgrading`, stop playback, wait 1000 ms.
    AfterAlert,
    /// The OTA download (`world.ota.download_time`).
    Download,
    /// Log the failure, play the exclamation sound, wait 3000 ms.
    Failed,
    /// Logs `Firmware upgrade failed` and carries on (the state stays `upgrading`).
    FailedDone,
    /// `Firmware upgrade successful, rebooting...`, wait 1000 ms, then `Reboot()`.
    Succeeded,
}

impl Running {
    /// `Application::UpgradeFirmware` (FIRMWARE.md §11.2).
    pub(super) fn upgrade(&mut self, core: &mut Core, url: Vec<u8>, stage: UpgradeStage) -> Step {
        let next = |stage| Task::Upgrade {
            url: url.clone(),
            stage,
        };
        match stage {
            UpgradeStage::Start => {
                if self.channel_open(core.now) {
                    core.log(LogLevel::Info, "Application", || {
                        "Closing audio channel before firmware upgrade".to_string()
                    });
                    self.drop_socket(core, "firmware upgrade");
                    self.main.schedule(Task::SetState(DeviceState::Idle));
                }
                core.log(LogLevel::Info, "Application", || {
                    format!("Starting firmware upgrade from URL: {}", String::from_utf8_lossy(&url))
                });
                self.play_prompt(core, Prompt::Upgrade);
                Step::Block(core.delay(3000), next(UpgradeStage::AfterAlert))
            }
            UpgradeStage::AfterAlert => {
                self.set_state(core, DeviceState::Upgrading);
                let now = core.now;
                self.audio.stop_playback(&mut core.audio, now);
                Step::Block(core.delay(1000), next(UpgradeStage::Download))
            }
            UpgradeStage::Download => {
                core.emit(|| Event::OtaStarted { url: url.clone() });
                let ota = core.world.ota.clone();
                let then = if ota.succeeds {
                    UpgradeStage::Succeeded
                } else {
                    UpgradeStage::Failed
                };
                Step::Block(ota.download_time, next(then))
            }
            UpgradeStage::Failed => {
                core.emit(|| Event::OtaFinished { ok: false });
                core.log(LogLevel::Error, "Application", || {
                    "Firmware upgrade failed, restarting audio service and continuing operation...".to_string()
                });
                self.play_prompt(core, Prompt::Exclamation);
                Step::Block(core.delay(3000), next(UpgradeStage::FailedDone))
            }
            UpgradeStage::FailedDone => {
                core.log(LogLevel::Error, "MCP", || "Firmware upgrade failed");
                Step::Done
            }
            UpgradeStage::Succeeded => {
                core.emit(|| Event::OtaFinished { ok: true });
                core.log(LogLevel::Info, "Application", || {
                    "Firmware upgrade successful, rebooting...".to_string()
                });
                Step::Block(
                    core.delay(1000),
                    Task::Reboot {
                        stage: RebootStage::Enter,
                    },
                )
            }
        }
    }
}
