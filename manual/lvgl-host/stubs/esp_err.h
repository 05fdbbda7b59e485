// Host stub: ESP-IDF error codes.
#pragma once
#include <stdio.h>
#include <stdlib.h>
typedef int esp_err_t;
#define ESP_OK 0
#define ESP_FAIL -1
#define ESP_ERR_NOT_SUPPORTED 0x106
#define ESP_ERROR_CHECK(x) do { esp_err_t err_rc_ = (x); if (err_rc_ != ESP_OK) { fprintf(stderr, "ESP_ERROR_CHECK failed: %d at %s:%d\n", err_rc_, __FILE__, __LINE__); abort(); } } while (0)
static inline const char* esp_err_to_name(esp_err_t e) { (void)e; return "ESP_ERR"; }
