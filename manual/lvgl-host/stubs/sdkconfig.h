// Host stub sdkconfig: default message style (neither CONFIG_USE_WECHAT_MESSAGE_STYLE nor
// CONFIG_USE_MULTILINE_CHAT_MESSAGE, as in the two boards' builds), no PSRAM, single core,
// CONFIG_LV_USE_SNAPSHOT unset (SnapshotToJpeg is not used).
#pragma once
#define CONFIG_USE_DEFAULT_MESSAGE_STYLE 1
#define CONFIG_SOC_CPU_CORES_NUM 1
