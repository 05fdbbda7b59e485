// Host stub: no PSRAM (CONFIG_SPIRAM is not defined in the stub sdkconfig.h).
#pragma once
#include <stddef.h>
static inline size_t esp_psram_get_size(void) { return 0; }
