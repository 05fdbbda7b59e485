//! What the simulated user says into the microphone, not yet captured: the clips themselves
//! (shared with every device that says the same thing), read 60 ms at a time by the mic tick.

use std::collections::VecDeque;
use std::sync::Arc;

/// What the user says, not yet captured: clips (shared, not copied) and how far into the first
/// one the microphone has read. At most 10 minutes are kept (older audio is forgotten).
#[derive(Debug, Default)]
pub(crate) struct MicQueue {
    clips: VecDeque<Arc<[i16]>>,
    read: usize,
    len: usize,
}

impl MicQueue {
    const MAX: usize = crate::voice::codec::MIC_RATE as usize * 600;

    pub(crate) fn push(&mut self, clip: Arc<[i16]>) {
        if clip.is_empty() {
            return;
        }
        let clip = if clip.len() > Self::MAX {
            clip[..Self::MAX].into()
        } else {
            clip
        };
        self.len += clip.len();
        self.clips.push_back(clip);
        while self.len > Self::MAX {
            let over = self.len - Self::MAX;
            let first = self.clips.front().map_or(0, |c| c.len() - self.read);
            if over >= first {
                self.clips.pop_front();
                self.read = 0;
                self.len -= first;
            } else {
                self.read += over;
                self.len -= over;
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The next `n` samples (fewer when less is queued).
    pub(crate) fn take(&mut self, n: usize) -> Vec<i16> {
        let mut out = Vec::with_capacity(n.min(self.len));
        while out.len() < n {
            let Some(c) = self.clips.front() else { break };
            let k = (n - out.len()).min(c.len() - self.read);
            out.extend_from_slice(&c[self.read..self.read + k]);
            self.read += k;
            self.len -= k;
            if self.read == c.len() {
                self.clips.pop_front();
                self.read = 0;
            }
        }
        out
    }
}
