// Host stub of main/settings.h (NVS): an in-memory key/value map. The harness presets
// display/theme ("light" or "dark") before constructing the display.
#pragma once
#include <stdint.h>
#include <string>
class Settings {
public:
    Settings(const std::string& ns, bool read_write = false);
    ~Settings() {}
    std::string GetString(const std::string& key, const std::string& default_value = "");
    void SetString(const std::string& key, const std::string& value);
    int32_t GetInt(const std::string& key, int32_t default_value = 0);
    void SetInt(const std::string& key, int32_t value);
    bool GetBool(const std::string& key, bool default_value = false);
    void SetBool(const std::string& key, bool value);
    void EraseKey(const std::string& key);
    void EraseAll() {}
private:
    std::string ns_;
};
