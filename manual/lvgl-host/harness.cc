// Host harness for the xiaozhi-twin manual LVGL reference check.
//
// Drives upstream xiaozhi-esp32's own SpiLcdDisplay / LcdDisplay / LvglDisplay (compiled
// unchanged from the firmware mirror) on LVGL 9.5.0, in memory, and writes one PNG per state
// of the twin's test story, plus a JSON file of layout / font metrics measured from LVGL.
//
// Usage: harness <state> <assets|builtin> <fonts_dir> <out.png> [metrics.json]
//   state: idle | listening | speaking | alert | volume | icons | dark
//
// Compile-time per board (see build.sh): HOST_DISPLAY_W, HOST_DISPLAY_H, BUILTIN_TEXT_FONT,
// BUILTIN_ICON_FONT (as main/CMakeLists.txt sets them), COMMON_TEXT_FONT_FILE (the `common`
// cbin of the same size/bpp) and EMOJI_COLLECTION (the board's DEFAULT_EMOJI_COLLECTION).

#include <dirent.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <esp_lvgl_port.h>

#include "application.h"
#include "assets/lang_config.h"
#include "board.h"
#include "emoji_collection.h"
#include "lcd_display.h"
#include "lvgl_font.h"
#include "lvgl_image.h"
#include "lvgl_theme.h"
#include "settings.h"

LV_FONT_DECLARE(BUILTIN_TEXT_FONT);
LV_FONT_DECLARE(BUILTIN_ICON_FONT);
LV_FONT_DECLARE(font_material_symbols_30_4);
LV_FONT_DECLARE(font_noto_emoji_30_4);

#define STR2(x) #x
#define STR(x) STR2(x)

// Exposes the protected widgets of upstream's LcdDisplay for the metrics dump.
class HostLcdDisplay : public SpiLcdDisplay {
public:
    HostLcdDisplay(int w, int h, int ox, int oy, bool mx, bool my, bool sxy)
        : SpiLcdDisplay(nullptr, nullptr, w, h, ox, oy, mx, my, sxy) {}
    lv_display_t* lv_display() { return display_; }
    struct Named { const char* name; lv_obj_t* obj; };
    std::vector<Named> Widgets() {
        return {
            {"container", container_},       {"top_bar", top_bar_},
            {"network_label", network_label_}, {"mute_label", mute_label_},
            {"battery_label", battery_label_}, {"status_bar", status_bar_},
            {"status_label", status_label_}, {"notification_label", notification_label_},
            {"emoji_box", emoji_box_},       {"emoji_label", emoji_label_},
            {"emoji_image", emoji_image_},   {"bottom_bar", bottom_bar_},
            {"chat_message_label", chat_message_label_},
            {"low_battery_popup", low_battery_popup_},
        };
    }
};

static uint32_t g_tick_ms = 0;
static uint32_t host_tick() { return g_tick_ms; }

static std::vector<uint8_t>* ReadFile(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path.c_str()); exit(2); }
    auto* v = new std::vector<uint8_t>();  // kept alive for the process (like the mmapped partition)
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) v->insert(v->end(), buf, buf + n);
    fclose(f);
    return v;
}

// Mirrors the LVGL part of Assets::LvglStrategy::Apply (main/assets.cc) for the default assets
// that scripts/build_default_assets.py builds: index.json has "text_font" (the common cbin) and
// "emoji_collection" (one {name,file} per PNG of the collection directory), no "skin", no
// "hide_subtitle". Partition/mmap/cJSON parts are not reproduced; the same upstream classes and
// calls are used: LvglCBinFont + LvglDisplay::SetTextFont, EmojiCollection + LvglRawImage,
// set_emoji_collection on both themes, SetEmojiCollection, then SetTheme(current) refresh.
static void ApplyDefaultAssets(HostLcdDisplay* display, const std::string& fonts_dir) {
    std::string font_path = fonts_dir + "/cbin/" STR(COMMON_TEXT_FONT_FILE);
    auto* font_data = ReadFile(font_path);
    // In the partition each asset is stored as "ZZ" + file; GetAssetData returns the pointer
    // after "ZZ", i.e. the start of the original .bin, which is what is passed here.
    auto text_font = std::make_shared<LvglCBinFont>(font_data->data());
    if (text_font->font() == nullptr || !display->SetTextFont(text_font)) {
        fprintf(stderr, "Ignoring invalid text font asset %s\n", font_path.c_str());
    }

    auto& theme_manager = LvglThemeManager::GetInstance();
    auto light_theme = theme_manager.GetTheme("light");
    auto dark_theme = theme_manager.GetTheme("dark");
    std::string emoji_dir = fonts_dir + "/png/" STR(EMOJI_COLLECTION);
    std::vector<std::string> files;
    if (DIR* d = opendir(emoji_dir.c_str())) {
        while (dirent* e = readdir(d)) {
            std::string n = e->d_name;
            if (n.size() > 4 && (n.substr(n.size() - 4) == ".png" || n.substr(n.size() - 4) == ".gif"))
                files.push_back(n);
        }
        closedir(d);
    }
    std::sort(files.begin(), files.end());
    auto collection = std::make_shared<EmojiCollection>();
    for (auto& f : files) {
        auto* data = ReadFile(emoji_dir + "/" + f);
        collection->AddEmoji(f.substr(0, f.size() - 4), new LvglRawImage(data->data(), data->size()));
    }
    if (light_theme) light_theme->set_emoji_collection(collection);
    if (dark_theme) dark_theme->set_emoji_collection(collection);
    display->SetEmojiCollection(collection);

    // refresh_display_theme == true (Assets::Apply default)
    auto current = display->GetTheme();
    if (current != nullptr) display->SetTheme(current);
}

static void WritePng(const std::string& path, const uint16_t* fb, int w, int h) {
    // 8-bit RGB, stored (uncompressed) deflate blocks: no zlib needed for the 32-bit build.
    static uint32_t crc_table[256];
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
    auto crc = [&](const uint8_t* p, size_t n, uint32_t c = 0xFFFFFFFFu) {
        for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
        return c;
    };
    std::vector<uint8_t> raw;
    raw.reserve((size_t)(w * 3 + 1) * h);
    for (int y = 0; y < h; y++) {
        raw.push_back(0);
        for (int x = 0; x < w; x++) {
            uint16_t p = fb[y * w + x];
            uint8_t r5 = p >> 11, g6 = (p >> 5) & 0x3F, b5 = p & 0x1F;
            raw.push_back((r5 << 3) | (r5 >> 2));
            raw.push_back((g6 << 2) | (g6 >> 4));
            raw.push_back((b5 << 3) | (b5 >> 2));
        }
    }
    std::vector<uint8_t> z = {0x78, 0x01};
    size_t pos = 0;
    do {
        size_t len = std::min<size_t>(65535, raw.size() - pos);
        bool last = pos + len == raw.size();
        z.push_back(last ? 1 : 0);
        z.push_back(len & 0xFF); z.push_back(len >> 8);
        z.push_back(~len & 0xFF); z.push_back((~len >> 8) & 0xFF);
        z.insert(z.end(), raw.begin() + pos, raw.begin() + pos + len);
        pos += len;
    } while (pos < raw.size());
    uint32_t a = 1, b = 0;
    for (uint8_t c : raw) { a = (a + c) % 65521; b = (b + a) % 65521; }
    uint32_t adler = (b << 16) | a;
    for (int i = 3; i >= 0; i--) z.push_back((adler >> (8 * i)) & 0xFF);

    FILE* f = fopen(path.c_str(), "wb");
    if (!f) { fprintf(stderr, "cannot write %s\n", path.c_str()); exit(2); }
    const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    fwrite(sig, 1, 8, f);
    auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
        uint8_t hdr[8] = {(uint8_t)(data.size() >> 24), (uint8_t)(data.size() >> 16),
                          (uint8_t)(data.size() >> 8), (uint8_t)data.size(),
                          (uint8_t)type[0], (uint8_t)type[1], (uint8_t)type[2], (uint8_t)type[3]};
        fwrite(hdr, 1, 8, f);
        if (!data.empty()) fwrite(data.data(), 1, data.size(), f);
        uint32_t c = crc(hdr + 4, 4);
        c = crc(data.data(), data.size(), c) ^ 0xFFFFFFFFu;
        uint8_t t[4] = {(uint8_t)(c >> 24), (uint8_t)(c >> 16), (uint8_t)(c >> 8), (uint8_t)c};
        fwrite(t, 1, 4, f);
    };
    std::vector<uint8_t> ihdr = {(uint8_t)(w >> 24), (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w,
                                 (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h,
                                 8, 2, 0, 0, 0};
    chunk("IHDR", ihdr);
    chunk("IDAT", z);
    chunk("IEND", {});
    fclose(f);
}

static std::vector<uint32_t> Codepoints(const char* s) {
    std::vector<uint32_t> out;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(s);
    while (*p) {
        uint32_t c = *p++;
        int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
        if (extra) c &= (0x3F >> extra);
        while (extra-- > 0 && *p) c = (c << 6) | (*p++ & 0x3F);
        out.push_back(c);
    }
    return out;
}

static std::string JsonEsc(const std::string& s) {
    std::string o;
    for (char c : s) { if (c == '"' || c == '\\') o += '\\'; o += c; }
    return o;
}

static void FontJson(FILE* f, const char* name, const lv_font_t* font, bool last = false) {
    fprintf(f, "    \"%s\": {\"line_height\": %d, \"base_line\": %d, \"underline_position\": %d, \"has_fallback\": %s}%s\n",
            name, (int)font->line_height, (int)font->base_line, (int)font->underline_position,
            font->fallback ? "true" : "false", last ? "" : ",");
}

static void MissingJson(FILE* f, const char* name, const lv_font_t* font, const std::vector<std::string>& strings, bool last) {
    fprintf(f, "    \"%s\": [", name);
    bool first = true;
    std::vector<uint32_t> seen;
    for (auto& s : strings) {
        for (uint32_t cp : Codepoints(s.c_str())) {
            if (std::find(seen.begin(), seen.end(), cp) != seen.end()) continue;
            seen.push_back(cp);
            lv_font_glyph_dsc_t g;
            if (!lv_font_get_glyph_dsc(font, &g, cp, 0)) {
                char u8[8] = {0};
                uint32_t c = cp; int n = 0;
                if (c < 0x80) u8[n++] = c;
                else if (c < 0x800) { u8[n++] = 0xC0 | (c >> 6); u8[n++] = 0x80 | (c & 0x3F); }
                else if (c < 0x10000) { u8[n++] = 0xE0 | (c >> 12); u8[n++] = 0x80 | ((c >> 6) & 0x3F); u8[n++] = 0x80 | (c & 0x3F); }
                else { u8[n++] = 0xF0 | (c >> 18); u8[n++] = 0x80 | ((c >> 12) & 0x3F); u8[n++] = 0x80 | ((c >> 6) & 0x3F); u8[n++] = 0x80 | (c & 0x3F); }
                fprintf(f, "%s\"U+%04X %s\"", first ? "" : ", ", (unsigned)cp, JsonEsc(u8).c_str());
                first = false;
            }
        }
    }
    fprintf(f, "]%s\n", last ? "" : ",");
}

int main(int argc, char** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s <state> <assets|builtin> <fonts_dir> <out.png> [metrics.json]\n", argv[0]);
        return 2;
    }
    std::string state = argv[1], mode = argv[2], fonts_dir = argv[3], out = argv[4];
    const char* states[] = {"idle", "listening", "speaking", "alert", "volume", "icons", "dark"};
    if (std::find_if(std::begin(states), std::end(states), [&](const char* s) { return state == s; }) == std::end(states) ||
        (mode != "assets" && mode != "builtin")) {
        fprintf(stderr, "bad state or mode\n");
        return 2;
    }

    // Theme comes from NVS "display"/"theme" in the LcdDisplay constructor.
    Settings("display", true).SetString("theme", state == "dark" ? "dark" : "light");

    auto& board = Board::GetInstance();
    auto& app = Application::GetInstance();
    app.state_ = kDeviceStateStarting;

    auto* display = new HostLcdDisplay(HOST_DISPLAY_W, HOST_DISPLAY_H, 0, 0, HOST_MIRROR_X, HOST_MIRROR_Y, HOST_SWAP_XY);
    lv_tick_set_cb(host_tick);
    board.display_ = display;

    // Application::Initialize
    display->SetupUI();
    if (mode == "assets") {
        // Application::CheckAssetsVersion: assets.Apply(); SetChatMessage("system", ""); SetEmotion("robot_2")
        ApplyDefaultAssets(display, fonts_dir);
        display->SetChatMessage("system", "");
        display->SetEmotion("robot_2");
    }

    // ---- the twin's test story ----
    app.state_ = kDeviceStateIdle;
    display->SetStatus(Lang::Strings::STANDBY);
    display->SetEmotion("neutral");
    if (state == "icons") {
        // Status bar icons: Wi-Fi RSSI -70 (two bars), battery 60 % discharging, volume 0 (mute).
        // UpdateStatusBar only refreshes the network icon in idle/listening/... states, so it is
        // run here while idle (as the firmware's UpdateStatusBar(true)/clock tick would).
        board.codec_.output_volume_ = 0;
        board.has_battery_ = true;
        board.battery_level_ = 60;
        board.charging_ = false;
        board.wifi_connected_ = true;
        board.rssi_ = -70;
        display->UpdateStatusBar(true);
    }
    if (state != "idle") {
        app.state_ = kDeviceStateListening;
        display->SetStatus(Lang::Strings::LISTENING);
        display->SetChatMessage("user", "声音小一点");
    }
    if (state != "idle" && state != "listening") {
        app.state_ = kDeviceStateSpeaking;
        display->SetEmotion("happy");
        display->SetStatus(Lang::Strings::SPEAKING);
        display->SetChatMessage("assistant", "好的，已经帮你调小了");
    }
    if (state == "alert" || state == "volume") {
        display->SetStatus(Lang::Strings::ERROR);
        display->SetEmotion("sad");
        display->SetChatMessage("system", "无法连接服务，请稍后再试");
    }
    if (state == "volume") {
        display->ShowNotification(std::string(Lang::Strings::VOLUME) + std::to_string(40), 3000);
    }

    g_tick_ms += 1;
    lv_refr_now(display->lv_display());

    int w, h;
    const uint16_t* fb = host_framebuffer(&w, &h);
    WritePng(out, fb, w, h);

    if (argc > 5) {
        FILE* f = fopen(argv[5], "w");
        if (!f) { fprintf(stderr, "cannot write %s\n", argv[5]); return 2; }
        auto theme = static_cast<LvglTheme*>(display->GetTheme());
        fprintf(f, "{\n  \"board\": \"%dx%d\", \"mode\": \"%s\", \"state\": \"%s\", \"theme\": \"%s\",\n",
                HOST_DISPLAY_W, HOST_DISPLAY_H, mode.c_str(), state.c_str(), theme->name().c_str());
        fprintf(f, "  \"builtin_text_font\": \"%s\", \"builtin_icon_font\": \"%s\", \"assets_text_font\": \"%s\", \"emoji_collection\": \"%s\",\n",
                STR(BUILTIN_TEXT_FONT), STR(BUILTIN_ICON_FONT), mode == "assets" ? STR(COMMON_TEXT_FONT_FILE) : "",
                mode == "assets" ? STR(EMOJI_COLLECTION) : "");
        fprintf(f, "  \"widgets\": {\n");
        auto widgets = display->Widgets();
        for (size_t i = 0; i < widgets.size(); i++) {
            lv_obj_t* o = widgets[i].obj;
            lv_area_t a;
            lv_obj_get_coords(o, &a);
            std::string text;
            if (lv_obj_check_type(o, &lv_label_class)) {
                for (uint32_t cp : Codepoints(lv_label_get_text(o))) {
                    char b[16];
                    if (cp < 0x80 && cp >= 0x20 && cp != '"' && cp != '\\') { b[0] = (char)cp; b[1] = 0; }
                    else snprintf(b, sizeof b, "\\u%04x", cp < 0x10000 ? cp : 0xFFFD);
                    text += b;
                }
            }
            const lv_font_t* font = lv_obj_get_style_text_font(o, LV_PART_MAIN);
            fprintf(f, "    \"%s\": {\"x1\": %d, \"y1\": %d, \"x2\": %d, \"y2\": %d, \"w\": %d, \"h\": %d, \"hidden\": %s, \"font_line_height\": %d%s%s%s}%s\n",
                    widgets[i].name, (int)a.x1, (int)a.y1, (int)a.x2, (int)a.y2,
                    (int)lv_area_get_width(&a), (int)lv_area_get_height(&a),
                    lv_obj_has_flag(o, LV_OBJ_FLAG_HIDDEN) ? "true" : "false", (int)font->line_height,
                    lv_obj_check_type(o, &lv_label_class) ? ", \"text\": \"" : "", text.c_str(),
                    lv_obj_check_type(o, &lv_label_class) ? "\"" : "",
                    i + 1 == widgets.size() ? "" : ",");
        }
        fprintf(f, "  },\n  \"fonts\": {\n");
        FontJson(f, "builtin_text_font", &BUILTIN_TEXT_FONT);
        FontJson(f, "theme_text_font", theme->text_font()->font());
        FontJson(f, "icon_font", theme->icon_font()->font());
        FontJson(f, "large_icon_font", theme->large_icon_font()->font());
        FontJson(f, "emoji_font", theme->emoji_font()->font(), true);
        fprintf(f, "  },\n  \"missing_glyphs\": {\n");
        std::vector<std::string> strings = {Lang::Strings::STANDBY, Lang::Strings::LISTENING, Lang::Strings::SPEAKING,
                                            Lang::Strings::ERROR, std::string(Lang::Strings::VOLUME) + "40",
                                            "声音小一点", "好的，已经帮你调小了", "无法连接服务，请稍后再试"};
        MissingJson(f, "builtin_text_font", &BUILTIN_TEXT_FONT, strings, false);
        MissingJson(f, "theme_text_font", theme->text_font()->font(), strings, true);
        fprintf(f, "  }\n}\n");
        fclose(f);
    }
    return 0;
}
