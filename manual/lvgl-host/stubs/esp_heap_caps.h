// Host stub: heap_caps_* -> malloc/free, no PSRAM.
#pragma once
#include <stdlib.h>
#include <stdint.h>
#include <stddef.h>
#define MALLOC_CAP_SPIRAM (1 << 10)
#define MALLOC_CAP_INTERNAL (1 << 11)
#define MALLOC_CAP_8BIT (1 << 2)
#define MALLOC_CAP_DMA (1 << 3)
static inline void* heap_caps_malloc(size_t n, uint32_t) { return malloc(n); }
static inline void heap_caps_free(void* p) { free(p); }
static inline size_t heap_caps_get_total_size(uint32_t) { return 0; }
