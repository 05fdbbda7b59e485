//! `DummyAudioCodec`: every call succeeds, the volume is only stored, `Write` discards. Also what
//! the board generator writes for a codec class the twin has no law for.

use super::{Family, Pa, Volume};

pub(super) struct Dummy;

impl Family for Dummy {
    fn name(&self) -> &'static str {
        "dummy"
    }
    fn class_name(&self) -> &'static str {
        "DummyAudioCodec"
    }
    fn law(&self) -> &'static str {
        "none: the volume is stored and nothing is heard"
    }
    fn volume(&self) -> Volume {
        Volume::Stored
    }
    fn is_duplex(&self) -> bool {
        false
    }
    fn pa(&self) -> Pa {
        Pa::None
    }
}
