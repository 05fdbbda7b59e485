//! The firmware's LVGL drawing, as far as its screen needs it (issue 41): its fonts and emoji
//! (the glyph data of 78/xiaozhi-fonts 2.0.0, read as LVGL 9.5 reads it) and a 16-bit
//! framebuffer that blends as LVGL's software renderer does. docs/screen.md says what of LVGL
//! this covers.

pub mod canvas;
pub mod emoji;
pub mod font;
