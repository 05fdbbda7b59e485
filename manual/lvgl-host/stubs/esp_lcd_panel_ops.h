// Host stub: LCD panel operations (no hardware).
#pragma once
#include "esp_err.h"
typedef struct esp_lcd_panel_t* esp_lcd_panel_handle_t;
static inline esp_err_t esp_lcd_panel_draw_bitmap(esp_lcd_panel_handle_t, int, int, int, int, const void*) { return ESP_OK; }
static inline esp_err_t esp_lcd_panel_disp_on_off(esp_lcd_panel_handle_t, bool) { return ESP_OK; }
static inline esp_err_t esp_lcd_panel_del(esp_lcd_panel_handle_t) { return ESP_OK; }
