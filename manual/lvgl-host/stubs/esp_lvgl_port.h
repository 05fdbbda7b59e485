// Host stub of the esp_lvgl_port API that lcd_display.cc uses. lvgl_port_add_disp() creates an
// LVGL display of hres x vres, RGB565, partial render mode with a buffer of buffer_size pixels
// (like the port does), whose flush callback copies into an in-memory framebuffer (stubs.cc).
// Byte swapping and rotation are done by the port / panel on the device after rendering and do
// not change what LVGL draws; they are left out.
#pragma once
#include <stdint.h>
#include <stdbool.h>
#include "lvgl.h"
#include "esp_err.h"
#include "esp_lcd_panel_io.h"
#include "esp_lcd_panel_ops.h"

typedef struct {
    int task_priority;
    int task_stack;
    int task_affinity;
    int task_max_sleep_ms;
    int timer_period_ms;
} lvgl_port_cfg_t;
#define ESP_LVGL_PORT_INIT_CONFIG() { 4, 7168, -1, 500, 5 }

typedef struct {
    esp_lcd_panel_io_handle_t io_handle;
    esp_lcd_panel_handle_t panel_handle;
    esp_lcd_panel_handle_t control_handle;
    uint32_t buffer_size;
    bool double_buffer;
    uint32_t trans_size;
    uint32_t hres;
    uint32_t vres;
    bool monochrome;
    struct { bool swap_xy; bool mirror_x; bool mirror_y; } rotation;
    lv_color_format_t color_format;
    struct {
        unsigned int buff_dma : 1;
        unsigned int buff_spiram : 1;
        unsigned int sw_rotate : 1;
        unsigned int swap_bytes : 1;
        unsigned int full_refresh : 1;
        unsigned int direct_mode : 1;
    } flags;
} lvgl_port_display_cfg_t;

typedef struct { struct { unsigned int bb_mode : 1; unsigned int avoid_tearing : 1; } flags; } lvgl_port_display_rgb_cfg_t;
typedef struct { struct { unsigned int avoid_tearing : 1; } flags; } lvgl_port_display_dsi_cfg_t;

esp_err_t lvgl_port_init(const lvgl_port_cfg_t* cfg);
lv_display_t* lvgl_port_add_disp(const lvgl_port_display_cfg_t* disp_cfg);
lv_display_t* lvgl_port_add_disp_rgb(const lvgl_port_display_cfg_t* disp_cfg, const lvgl_port_display_rgb_cfg_t* rgb_cfg);
lv_display_t* lvgl_port_add_disp_dsi(const lvgl_port_display_cfg_t* disp_cfg, const lvgl_port_display_dsi_cfg_t* dsi_cfg);
bool lvgl_port_lock(uint32_t timeout_ms);
void lvgl_port_unlock(void);

// Harness access to the framebuffer written by the flush callback.
const uint16_t* host_framebuffer(int* w, int* h);
