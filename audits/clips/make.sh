#!/usr/bin/env bash
# Makes the default battery's spoken requests (audits/default.yaml names this directory's
# index.yaml): one WAV per phrasing, said by espeak-ng, and index.yaml, which pairs each file
# with its language and text. Reproducible: espeak-ng 1.51 (Debian 12's 1.51+dfsg-10) writes
# the same bytes for the same text, voice and speed; another version may differ, so the script
# refuses it unless ESPEAK_ANY_VERSION=1.
#
#   apt-get install -y espeak-ng && bash audits/clips/make.sh
#
# The voices: `cmn` (Mandarin) and `en-us`, espeak-ng's default speed (175 words a minute).
# espeak-ng is GPL-3.0-or-later; what it says is not covered by its licence (LICENSE.md here).
set -euo pipefail
cd "$(dirname "$0")"
version=$(espeak-ng --version | sed -n 's/^eSpeak NG text-to-speech: \([0-9.]*\).*/\1/p')
if [ "$version" != "1.51" ] && [ "${ESPEAK_ANY_VERSION:-}" != "1" ]; then
  echo "make.sh: espeak-ng $version is not 1.51 (the clips were made with 1.51); ESPEAK_ANY_VERSION=1 to go on" >&2
  exit 2
fi

# lang, file, text: one phrasing of audits/default.yaml each.
clips=(
  "zh zh-lower-1 把声音调小一点"
  "zh zh-lower-2 音量小一点"
  "en en-lower-1 turn the volume down a bit"
  "en en-lower-2 make it quieter please"
  "zh zh-raise-1 把声音调大一点"
  "zh zh-raise-2 大声一点"
  "en en-raise-1 turn the volume up a bit"
  "en en-raise-2 make it louder please"
  "zh zh-set50-1 音量调到50"
  "zh zh-set50-2 把音量设为50"
  "en en-set50-1 set the volume to 50"
  "en en-set50-2 volume 50 please"
  "zh zh-mute-1 静音"
  "zh zh-mute-2 把声音关掉"
  "en en-mute-1 mute the speaker"
  "en en-mute-2 turn the sound off"
  "zh zh-set150 音量调到150"
  "en en-set150 set the volume to 150"
  "zh zh-set55.5 音量调到55.5"
  "en en-set55.5 set the volume to 55.5"
  "zh zh-brightness-1 屏幕亮度调到30"
  "zh zh-brightness-2 把亮度设为30"
  "en en-brightness-1 set the screen brightness to 30"
  "en en-brightness-2 brightness 30 please"
  "zh zh-dark 切换到深色主题"
  "en en-dark switch to the dark theme"
  "zh zh-light 切换到浅色主题"
  "en en-light switch to the light theme"
  "zh zh-question 现在音量是多少"
  "en en-question what is the volume now"
  "zh zh-lamp-1 打开台灯"
  "zh zh-lamp-2 把灯打开"
  "en en-lamp-1 turn on the lamp"
  "en en-lamp-2 switch the light on"
  "zh zh-reboot 重启一下"
  "en en-reboot restart the device"
)

{
  echo "# The spoken requests of audits/default.yaml: made by make.sh (espeak-ng $version, voices"
  echo "# cmn and en-us, 22050 Hz mono). Each entry: the language, the text said, the WAV file."
  echo "voice: espeak-ng $version"
  echo "clips:"
  for c in "${clips[@]}"; do
    read -r lang file text <<<"$c"
    case $lang in zh) voice=cmn ;; en) voice=en-us ;; esac
    espeak-ng -v "$voice" -w "$file.wav" "$text"
    echo "  - { lang: $lang, text: \"$text\", wav: $file.wav }"
  done
} >index.yaml
echo "make.sh: ${#clips[@]} clips and index.yaml written in $(pwd)"
