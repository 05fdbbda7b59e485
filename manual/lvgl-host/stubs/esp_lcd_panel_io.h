// Host stub: LCD panel IO handle (no hardware; the harness passes nullptr).
#pragma once
#include "esp_err.h"
typedef struct esp_lcd_panel_io_t* esp_lcd_panel_io_handle_t;
static inline esp_err_t esp_lcd_panel_io_del(esp_lcd_panel_io_handle_t) { return ESP_OK; }
