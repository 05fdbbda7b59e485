//! `Application::UpgradeFirmware` (docs/reference/firmware.md §11.2): the alert, the audio channel closed,
//! the download attempt and what follows its failure or success, split where the main task
//! blocks. The flow owns its URL and stage; what it needs of the application (the channel, the
//! state, the speaker) it asks through [`UpgradeHost`], so this file imports nothing of the
//! application.

use crate::audio::source::Prompt;
use crate::device::platform::Platform;
use crate::time::SimDuration;
use crate::trace::{Event, LogLevel};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// Where `UpgradeFirmware` resumes after each block of the main task.
pub(crate) enum UpgradeStage {
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

/// What the upgrade flow asks of the application.
pub(crate) trait UpgradeHost {
    /// `IsAudioChannelOpened()`.
    fn channel_is_open(&self, platform: &Platform) -> bool;
    /// `CloseAudioChannel()`: the socket goes; its disconnect callback schedules idle.
    fn close_channel(&mut self, platform: &mut Platform);
    /// `audio_service_.PlaySound(prompt)`.
    fn play_sound(&mut self, platform: &mut Platform, prompt: Prompt);
    /// `SetDeviceState(kDeviceStateUpgrading)` (refused while listening or speaking), then the
    /// audio service stops.
    fn enter_upgrading(&mut self, platform: &mut Platform);
}

/// One firmware upgrade in progress: the URL and where it resumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Upgrade {
    /// The firmware URL from the tool's `url` argument.
    pub(crate) url: Vec<u8>,
    /// Where the flow resumes.
    pub(crate) stage: UpgradeStage,
}

/// What the main task does after a stage.
pub(crate) enum UpgradeNext {
    /// `vTaskDelay` for this long, then the flow resumes.
    Wait(SimDuration, Upgrade),
    /// The flow returned (the device carries on).
    Done,
    /// `vTaskDelay` for this long, then `Reboot()`.
    Reboot(SimDuration),
}

impl Upgrade {
    /// The upgrade `self.upgrade_firmware` schedules.
    pub(crate) fn start(url: Vec<u8>) -> Upgrade {
        Upgrade {
            url,
            stage: UpgradeStage::Start,
        }
    }

    /// Runs the stage the flow is at (docs/reference/firmware.md §11.2).
    pub(crate) fn resume(self, host: &mut impl UpgradeHost, platform: &mut Platform) -> UpgradeNext {
        let next = |stage| Upgrade {
            url: self.url.clone(),
            stage,
        };
        match self.stage {
            UpgradeStage::Start => {
                if host.channel_is_open(platform) {
                    platform.log(LogLevel::Info, "Application", || {
                        "Closing audio channel before firmware upgrade".to_string()
                    });
                    host.close_channel(platform);
                }
                platform.log(LogLevel::Info, "Application", || {
                    format!(
                        "Starting firmware upgrade from URL: {}",
                        String::from_utf8_lossy(&self.url)
                    )
                });
                host.play_sound(platform, Prompt::Upgrade);
                UpgradeNext::Wait(platform.delay(3000), next(UpgradeStage::AfterAlert))
            }
            UpgradeStage::AfterAlert => {
                host.enter_upgrading(platform);
                UpgradeNext::Wait(platform.delay(1000), next(UpgradeStage::Download))
            }
            UpgradeStage::Download => {
                platform.emit(|| Event::OtaStarted { url: self.url.clone() });
                let ota = platform.world.ota.clone();
                let then = if ota.succeeds {
                    UpgradeStage::Succeeded
                } else {
                    UpgradeStage::Failed
                };
                UpgradeNext::Wait(ota.download_time, next(then))
            }
            UpgradeStage::Failed => {
                platform.emit(|| Event::OtaFinished { ok: false });
                platform.log(LogLevel::Error, "Application", || {
                    "Firmware upgrade failed, restarting audio service and continuing operation...".to_string()
                });
                host.play_sound(platform, Prompt::Exclamation);
                UpgradeNext::Wait(platform.delay(3000), next(UpgradeStage::FailedDone))
            }
            UpgradeStage::FailedDone => {
                platform.log(LogLevel::Error, "MCP", || "Firmware upgrade failed");
                UpgradeNext::Done
            }
            UpgradeStage::Succeeded => {
                platform.emit(|| Event::OtaFinished { ok: true });
                platform.log(LogLevel::Info, "Application", || {
                    "Firmware upgrade successful, rebooting...".to_string()
                });
                UpgradeNext::Reboot(platform.delay(1000))
            }
        }
    }
}
