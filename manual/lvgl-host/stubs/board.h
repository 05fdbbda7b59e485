// Host stub of main/boards/common/board.h: the members LvglDisplay uses. Battery and network
// state are harness-controlled; GetNetworkStateIcon() reproduces WifiBoard::GetNetworkStateIcon
// (wifi_board.cc) for a connected station with the given RSSI.
#pragma once
#include <material_symbols.h>
#include "audio_codec.h"
class Display;
class Board {
public:
    static Board& GetInstance() { static Board b; return b; }
    AudioCodec* GetAudioCodec() { return &codec_; }
    Display* GetDisplay() { return display_; }
    bool GetBatteryLevel(int& level, bool& charging, bool& discharging) {
        if (!has_battery_) return false;  // Board::GetBatteryLevel default: no battery
        level = battery_level_; charging = charging_; discharging = !charging_;
        return true;
    }
    const char* GetNetworkStateIcon() {
        if (!wifi_connected_) return MATERIAL_SYMBOLS_WIFI_OFF;
        if (rssi_ >= -65) return MATERIAL_SYMBOLS_WIFI;
        if (rssi_ >= -75) return MATERIAL_SYMBOLS_WIFI_2_BAR;
        return MATERIAL_SYMBOLS_WIFI_1_BAR;
    }
    AudioCodec codec_;
    Display* display_ = nullptr;
    bool has_battery_ = false;
    int battery_level_ = 100;
    bool charging_ = false;
    bool wifi_connected_ = true;
    int rssi_ = -50;
};
