// Host stub of main/application.h: device state (harness-controlled), Schedule/PlaySound no-ops.
#pragma once
#include <functional>
#include <string_view>
#include "device_state.h"
class Application {
public:
    static Application& GetInstance() { static Application a; return a; }
    DeviceState GetDeviceState() const { return state_; }
    void Schedule(std::function<void()>) {}
    void PlaySound(std::string_view) {}
    DeviceState state_ = kDeviceStateIdle;
};
