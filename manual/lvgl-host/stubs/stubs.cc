// Host implementations of the stubbed ESP-IDF / esp_lvgl_port / Settings functions.
#include <map>
#include <string>
#include <vector>
#include <cstring>

#include "esp_lvgl_port.h"
#include "esp_timer.h"
#include "settings.h"

// ---- esp_timer: handles exist, callbacks never run --------------------------------------
struct esp_timer { esp_timer_create_args_t args; };
extern "C" esp_err_t esp_timer_create(const esp_timer_create_args_t* args, esp_timer_handle_t* out) {
    *out = new esp_timer{*args};
    return ESP_OK;
}
extern "C" esp_err_t esp_timer_start_once(esp_timer_handle_t, uint64_t) { return ESP_OK; }
extern "C" esp_err_t esp_timer_start_periodic(esp_timer_handle_t, uint64_t) { return ESP_OK; }
extern "C" esp_err_t esp_timer_stop(esp_timer_handle_t) { return ESP_OK; }
extern "C" esp_err_t esp_timer_delete(esp_timer_handle_t t) { delete t; return ESP_OK; }
extern "C" int64_t esp_timer_get_time(void) { return (int64_t)lv_tick_get() * 1000; }

// ---- esp_lvgl_port ----------------------------------------------------------------------
static std::vector<uint16_t> g_fb;
static int g_w = 0, g_h = 0;
static std::vector<uint8_t> g_draw_buf;

static void host_flush_cb(lv_display_t* disp, const lv_area_t* area, uint8_t* px_map) {
    int w = lv_area_get_width(area);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(px_map);
    for (int y = area->y1; y <= area->y2; y++) {
        if (y < 0 || y >= g_h) { src += w; continue; }
        for (int x = area->x1; x <= area->x2; x++, src++) {
            if (x >= 0 && x < g_w) g_fb[y * g_w + x] = *src;
        }
    }
    lv_display_flush_ready(disp);
}

esp_err_t lvgl_port_init(const lvgl_port_cfg_t*) { return ESP_OK; }

lv_display_t* lvgl_port_add_disp(const lvgl_port_display_cfg_t* cfg) {
    g_w = (int)cfg->hres;
    g_h = (int)cfg->vres;
    g_fb.assign((size_t)g_w * g_h, 0);
    lv_display_t* disp = lv_display_create(g_w, g_h);
    lv_display_set_color_format(disp, LV_COLOR_FORMAT_RGB565);
    uint32_t px = cfg->buffer_size;  // the port's buffer_size is in pixels
    g_draw_buf.assign((size_t)px * 2 + LV_DRAW_BUF_ALIGN, 0);
    uint8_t* buf = reinterpret_cast<uint8_t*>(lv_draw_buf_align(g_draw_buf.data(), LV_COLOR_FORMAT_RGB565));
    lv_display_set_buffers(disp, buf, nullptr, px * 2, LV_DISPLAY_RENDER_MODE_PARTIAL);
    lv_display_set_flush_cb(disp, host_flush_cb);
    return disp;
}
lv_display_t* lvgl_port_add_disp_rgb(const lvgl_port_display_cfg_t* c, const lvgl_port_display_rgb_cfg_t*) { return lvgl_port_add_disp(c); }
lv_display_t* lvgl_port_add_disp_dsi(const lvgl_port_display_cfg_t* c, const lvgl_port_display_dsi_cfg_t*) { return lvgl_port_add_disp(c); }
bool lvgl_port_lock(uint32_t) { return true; }
void lvgl_port_unlock(void) {}

const uint16_t* host_framebuffer(int* w, int* h) { *w = g_w; *h = g_h; return g_fb.data(); }

// ---- Settings (NVS) ---------------------------------------------------------------------
static std::map<std::string, std::string>& store() { static std::map<std::string, std::string> m; return m; }
Settings::Settings(const std::string& ns, bool) : ns_(ns) {}
std::string Settings::GetString(const std::string& key, const std::string& def) {
    auto it = store().find(ns_ + "." + key);
    return it == store().end() ? def : it->second;
}
void Settings::SetString(const std::string& key, const std::string& value) { store()[ns_ + "." + key] = value; }
int32_t Settings::GetInt(const std::string& key, int32_t def) {
    auto it = store().find(ns_ + "." + key);
    return it == store().end() ? def : (int32_t)std::stol(it->second);
}
void Settings::SetInt(const std::string& key, int32_t v) { store()[ns_ + "." + key] = std::to_string(v); }
bool Settings::GetBool(const std::string& key, bool def) { return GetInt(key, def ? 1 : 0) != 0; }
void Settings::SetBool(const std::string& key, bool v) { SetInt(key, v ? 1 : 0); }
void Settings::EraseKey(const std::string& key) { store().erase(ns_ + "." + key); }
