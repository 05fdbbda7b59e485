//! The colour emoji collections of the default assets (issue 41): `noto-color-emoji_32`, `_64`
//! and `_128` of the font component 78/xiaozhi-fonts 2.0.0, one PNG per emotion, as shipped
//! (`sim/assets/lvgl/emoji/`). A board's build picks one (`DEFAULT_EMOJI_COLLECTION`,
//! main/CMakeLists.txt); `LcdDisplay::SetEmotion` shows the emotion's image when the theme's
//! collection has it.

use std::sync::OnceLock;

macro_rules! collection {
    ($size:literal: $($emotion:literal),* $(,)?) => {
        &[$(($emotion, include_bytes!(concat!(
            "../../assets/lvgl/emoji/noto-color-emoji_", $size, "/", $emotion, ".png"
        )) as &[u8])),*]
    };
}

macro_rules! collections {
    ($($size:literal),*) => {
        &[$((concat!("noto-color-emoji_", $size), collection!($size:
            "angry", "confident", "confused", "cool", "crying", "delicious", "embarrassed",
            "funny", "happy", "kissy", "laughing", "loving", "neutral", "relaxed", "sad",
            "shocked", "silly", "sleepy", "surprised", "thinking", "winking",
        ))),*]
    };
}

type Pngs = &'static [(&'static str, &'static [u8])];

static FILES: &[(&str, Pngs)] = collections!(32, 64, 128);

/// A decoded emoji: RGBA, not premultiplied (as LVGL's PNG decoder hands it to the renderer).
#[derive(Debug, PartialEq, Eq)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// RGBA bytes, row by row.
    pub rgba: Vec<u8>,
}

/// The collection names the twin ships (`noto-color-emoji_<size>`).
pub fn collections() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(name, _)| *name)
}

/// The image of `emotion` in `collection` (e.g. `noto-color-emoji_32`), decoded the first time
/// it is asked for.
pub fn image(collection: &str, emotion: &str) -> Option<&'static Image> {
    const EMOTIONS: usize = 21;
    static DECODED: [[OnceLock<Image>; EMOTIONS]; 3] = [const { [const { OnceLock::new() }; EMOTIONS] }; 3];
    let c = FILES.iter().position(|(name, _)| *name == collection)?;
    let (e, (name, png)) = FILES[c].1.iter().enumerate().find(|(_, (name, _))| *name == emotion)?;
    Some(
        DECODED
            .get(c)?
            .get(e)?
            .get_or_init(|| decode(png).unwrap_or_else(|err| unreachable!("the shipped {name}.png decodes: {err}"))),
    )
}

/// A PNG as RGBA (palette and grey expanded, 8 bits a channel).
pub fn decode(png: &[u8]) -> Result<Image, String> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let mut buf = vec![0; reader.output_buffer_size().ok_or("the PNG is too large")?];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let px = (info.width * info.height) as usize;
    let rgba: Vec<u8> = match info.color_type {
        png::ColorType::Rgba => buf[..px * 4].to_vec(),
        png::ColorType::Rgb => buf[..px * 3]
            .chunks_exact(3)
            .flat_map(|c| [c[0], c[1], c[2], 255])
            .collect(),
        png::ColorType::GrayscaleAlpha => buf[..px * 2]
            .chunks_exact(2)
            .flat_map(|c| [c[0], c[0], c[0], c[1]])
            .collect(),
        png::ColorType::Grayscale => buf[..px].iter().flat_map(|&g| [g, g, g, 255]).collect(),
        png::ColorType::Indexed => return Err("a palette the decoder did not expand".into()),
    };
    Ok(Image {
        width: info.width,
        height: info.height,
        rgba,
    })
}
