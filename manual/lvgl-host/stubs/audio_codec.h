// Host stub: only output_volume() is read by LvglDisplay::UpdateStatusBar.
#pragma once
class AudioCodec {
public:
    int output_volume() const { return output_volume_; }
    int output_volume_ = 70;
};
