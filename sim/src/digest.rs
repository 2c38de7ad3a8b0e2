//! Stable 64-bit digests: FNV-1a 64 (what the trace's fingerprint hashes with) and a file's
//! running digest ([`FileDigest`]), which a step's trace line shows for the bytes it wrote or
//! read (`World::effect_data`).
//!
//! Both are specified byte by byte, never std's `Hash` or `RandomState`: the same bytes have
//! the same digest on every machine and Rust version.

/// FNV-1a, 64-bit: specified byte by byte, so its output never depends on the platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fnv1a64(u64);

impl Fnv1a64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub(crate) fn new() -> Self {
        Fnv1a64(Self::OFFSET_BASIS)
    }

    #[inline]
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

impl std::fmt::Write for Fnv1a64 {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.write(text.as_bytes());
        Ok(())
    }
}

/// FNV-1a 64 of `bytes` (a sink request's payload: `World::request_data`).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash = Fnv1a64::new();
    hash.write(bytes);
    hash.finish()
}

/// A file's running digest: FNV-1a 64 over every byte written into it, in the order they
/// were written, kept as the file is written (each byte hashed once, no byte kept), so a
/// step that reads a file, however long, shows its digest at no cost.
///
/// For a file that was only ever created (or truncated to nothing) and then written at its
/// end, which is every file a run writes but after a power loss, it is FNV-1a 64 of its
/// bytes ([`FileDigest::of`]): a real directory works it out from a file it did not write
/// and gets the simulated disk's value. Every other change folds a frame in (a byte 0xff,
/// its name, a number) instead of the file's bytes: a write elsewhere than at the end (its
/// offset, then its bytes), a change of length ([`FileDigest::set_len`]), and a change the
/// process did not write ([`FileDigest::changed`]: a power loss or a page eviction, by the
/// length it left; what it left is a function of that, of the file's history and of the
/// crash state the trace names). Two files with one digest were written alike, not merely
/// hold the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileDigest {
    hash: Fnv1a64,
    len_bytes: u64,
}

impl Default for FileDigest {
    fn default() -> Self {
        FileDigest::empty()
    }
}

impl FileDigest {
    /// An empty file's (just created, or truncated to nothing).
    pub fn empty() -> FileDigest {
        FileDigest {
            hash: Fnv1a64::new(),
            len_bytes: 0,
        }
    }

    /// The digest of a file that holds `bytes`, written in order: FNV-1a 64 of them.
    pub fn of(bytes: &[u8]) -> FileDigest {
        let mut digest = FileDigest::empty();
        digest.write(0, bytes);
        digest
    }

    /// The digest's value (what a trace line shows).
    pub fn value(&self) -> u64 {
        self.hash.finish()
    }

    /// The file's length as its writes left it.
    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// `bytes` written at `offset_bytes` (at the end: an append).
    pub fn write(&mut self, offset_bytes: u64, bytes: &[u8]) {
        self.start_write(offset_bytes, bytes.len());
        self.hash.write(bytes);
    }

    /// `len` bytes written at `offset_bytes`, given as `pieces` in order (a file's chunks:
    /// hashed where they lie, never copied); the same digest as one write of them.
    pub fn write_pieces<'a>(
        &mut self,
        offset_bytes: u64,
        len: usize,
        pieces: impl IntoIterator<Item = &'a [u8]>,
    ) {
        self.start_write(offset_bytes, len);
        let mut hashed = 0;
        for piece in pieces {
            self.hash.write(piece);
            hashed += piece.len();
        }
        assert_eq!(hashed, len, "the pieces are the write's bytes");
    }

    /// [`FileDigest::write_pieces`] where the bytes' own FNV-1a 64 may be known already
    /// (`fnv`, asked for only where it serves): written at the start of an empty file, the
    /// bytes are the whole file, whose digest is theirs, with nothing hashed again (a
    /// checkpoint a sweep's points write again and again).
    pub fn write_known<'a>(
        &mut self,
        offset_bytes: u64,
        len: usize,
        fnv: impl FnOnce() -> u64,
        pieces: impl IntoIterator<Item = &'a [u8]>,
    ) {
        if offset_bytes == 0 && *self == FileDigest::empty() {
            *self = FileDigest {
                hash: Fnv1a64(fnv()),
                len_bytes: len as u64,
            };
        } else {
            self.write_pieces(offset_bytes, len, pieces);
        }
    }

    fn start_write(&mut self, offset_bytes: u64, len: usize) {
        if offset_bytes != self.len_bytes {
            self.frame(b"write", offset_bytes);
        }
        self.len_bytes = self.len_bytes.max(offset_bytes + len as u64);
    }

    /// The file's length set to `len_bytes` (a truncate, or a creation over it: 0).
    pub fn set_len(&mut self, len_bytes: u64) {
        if len_bytes == 0 {
            *self = FileDigest::empty();
        } else if len_bytes != self.len_bytes {
            self.frame(b"set-len", len_bytes);
            self.len_bytes = len_bytes;
        }
    }

    /// The file's bytes changed without a write of the process (a power loss, a page
    /// eviction): `len_bytes` long now.
    pub fn changed(&mut self, len_bytes: u64) {
        self.frame(b"changed", len_bytes);
        self.len_bytes = len_bytes;
    }

    fn frame(&mut self, what: &[u8], number: u64) {
        self.hash.write(&[0xff]);
        self.hash.write(what);
        self.hash.write(&number.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends and writes at the end are the bytes' FNV-1a, however they are cut; anything
    /// else is history, not bytes.
    #[test]
    fn a_file_written_at_its_end_has_the_digest_of_its_bytes() {
        let mut digest = FileDigest::empty();
        digest.write(0, b"foo");
        digest.write(3, b"");
        digest.write_pieces(3, 3, [&b"b"[..], b"", b"ar"]);
        let mut known = FileDigest::empty();
        known.write_known(0, 6, || fnv1a64(b"foobar"), [&b"foobar"[..]]);
        assert_eq!(known, FileDigest::of(b"foobar"));
        let mut after = FileDigest::of(b"foo");
        after.write_known(3, 3, || unreachable!("not at the start"), [&b"bar"[..]]);
        assert_eq!(after, FileDigest::of(b"foobar"));
        assert_eq!(digest, FileDigest::of(b"foobar"));
        assert_eq!(digest.value(), 0x8594_4171_f739_67e8);
        assert_eq!(digest.len_bytes(), 6);
        // Truncated to nothing: an empty file again.
        digest.set_len(0);
        assert_eq!(digest, FileDigest::empty());
        // The same bytes written otherwise: another digest.
        let mut over = FileDigest::of(b"foobaz");
        over.write(5, b"r");
        assert_eq!(over.len_bytes(), 6);
        assert_ne!(over, FileDigest::of(b"foobar"));
        let mut cut = FileDigest::of(b"foobarbaz");
        cut.set_len(6);
        assert_ne!(cut, FileDigest::of(b"foobar"));
        let mut same_len = FileDigest::of(b"foobar");
        same_len.set_len(6);
        assert_eq!(same_len, FileDigest::of(b"foobar"));
        let mut changed = FileDigest::of(b"foobar");
        changed.changed(6);
        assert_ne!(changed, FileDigest::of(b"foobar"));
        // Pinned: the definition is part of every fingerprint.
        assert_eq!(cut.value(), 0xb726_d288_8481_90de);
    }
}
