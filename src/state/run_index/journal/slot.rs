//! A journal slot: what one commit's entry says, and its bytes — the entry or its in-flight
//! mark, with a checksum keyed by the journal's identity and the state file it is bound to, so
//! that a torn slot, or one of another journal or file, decodes as missing.

use crate::state::run_index::position::WalPosition;

/// A change a commit made that may move a run in the index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A `runs` row, by rowid (before and after an update that moved it).
    Run(i64),
    /// A row of `run_queue` or `run_bindings`, by its `run_id`.
    RunId(Box<[u8]>),
    /// A row of `resources` or `leases`, by its `resource_id`.
    ResourceId(Box<[u8]>),
    /// A `workflow_definitions` row was inserted: runs without one may now join it.
    DefinitionAdded,
    /// A `blobs` row was changed or deleted: run records that read a document may differ (the
    /// index's own rows read none).
    BlobChanged,
}

/// One commit: the runs it may have changed, and the WAL positions it went from and to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The wal-index commit counter after this commit.
    pub commit: u32,
    /// The WAL as this commit's transaction found it.
    pub base: WalPosition,
    /// The WAL's last frame after the commit.
    pub after_frames: u32,
    /// The WAL's salt after the commit, when the writer could read it back.
    pub after_salt: Option<[u32; 2]>,
    /// `None`: the commit changed what the keys cannot say (a definition changed or went, too
    /// many keys): readers rebuild.
    pub keys: Option<Vec<Key>>,
    /// The rows of the runs the keys name, as the writer read them just before it committed
    /// (`None` for a run that is gone): a reader takes them instead of reading the runs again.
    /// `None` when the writer did not read them (its SQL was not the store's own, or the keys
    /// name what only the reader can resolve).
    pub images: Option<Images>,
    /// The commit left no blob unreferenced that was not before (see `blob_refs`): the schema
    /// version (16 bits) its writer read the referencing columns at.
    pub blobs_clean: Option<u16>,
}

/// Run rowids with their image (`None`: the run is gone), as `mirror::image_of` makes them.
pub type Images = Vec<(i64, Option<Box<[u8]>>)>;

/// What a commit's slot holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// The commit's entry.
    Written(Entry),
    /// Its writer is committing: the entry comes once the commit is durable.
    InFlight,
}

/// A position at which the file had no blob that nothing refers to (its open's prune found
/// none), at schema version `schema` (32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobMark {
    pub position: WalPosition,
    pub schema: u32,
}

/// The `commit` and `frames` of a close stamp's mark (see `clean_proof`): no position has
/// them (a WAL of 2^32 frames), so older builds take the stamp for a mark nothing chains from.
const CLOSED: u32 = u32::MAX;

impl BlobMark {
    /// A close stamp: the file was left clean by its last connection when its
    /// `identity::fingerprint` was `fingerprint`.
    pub fn at_close(fingerprint: u64, schema: u32) -> BlobMark {
        BlobMark {
            position: WalPosition {
                commit: CLOSED,
                frames: CLOSED,
                salt: [fingerprint as u32, (fingerprint >> 32) as u32],
            },
            schema,
        }
    }

    /// The fingerprint of a close stamp; `None` for a position.
    pub fn closed_fingerprint(&self) -> Option<u64> {
        let position = &self.position;
        (position.commit == CLOSED && position.frames == CLOSED)
            .then(|| u64::from(position.salt[0]) | (u64::from(position.salt[1]) << 32))
    }
}

/// Bytes of a [`BlobMark`].
pub(super) const MARK: usize = 24;

/// Bytes of one commit's slot.
pub(super) const SLOT: usize = 1024;
/// Where a slot's keys begin.
pub(super) const KEYS_AT: usize = 64;

/// What a slot is bound to: the state file its commit was made on, and the journal it is in
/// (its identity keys the checksum). A slot bound to anything else reads as missing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Binding {
    pub(super) file: u64,
    pub(super) journal: u64,
}

/// A slot's checksum over its header and its keys, keyed with the journal's identity, eight
/// bytes at a time (FNV's byte at a time was most of decoding a slot). It tells a torn slot, or
/// one of another journal, not an adversary's: no one else can write a journal that is used.
fn checksum(identity: u64, header: &[u8], keys: &[u8]) -> u64 {
    const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut hash =
        (0x243f_6a88_85a3_08d3 ^ (keys.len() as u64) ^ identity).wrapping_mul(MULTIPLIER);
    for part in [header, keys] {
        let mut words = part.chunks_exact(8);
        for word in &mut words {
            let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            hash = (hash ^ word).wrapping_mul(MULTIPLIER);
            hash ^= hash >> 29;
        }
        let mut tail = [0u8; 8];
        tail[..words.remainder().len()].copy_from_slice(words.remainder());
        hash = (hash ^ u64::from_le_bytes(tail)).wrapping_mul(MULTIPLIER);
        hash ^= hash >> 32;
    }
    hash
}

const KNOWN_SALT: u32 = 1;
const UNREPORTED: u32 = 2;
pub(super) const IN_FLIGHT: u32 = 4;
/// The slot holds the entry's images, not its keys.
const IMAGES: u32 = 8;
/// An image's length that says the run is gone.
const GONE: u16 = u16::MAX;
/// The entry's `blobs_clean` is set: its schema bits are the flags' upper 16.
const BLOBS_CLEAN: u32 = 16;

/// The flags that carry `blobs_clean` (older builds ignore them).
fn clean_flags(entry: &Entry) -> u32 {
    entry
        .blobs_clean
        .map_or(0, |schema| BLOBS_CLEAN | u32::from(schema) << 16)
}

/// The slot's bytes: a header (commit, positions, flags, file id, key bytes, checksum), then
/// the keys (a tag byte each: 1 rowid, 2 run id, 3 resource id, 4 definition added, 6 blob
/// changed; 5 tags an image).
pub(super) fn encode(entry: &Entry, binding: Binding) -> [u8; SLOT] {
    if let (Some(_), Some(images)) = (&entry.keys, &entry.images) {
        let mut bytes = Vec::new();
        for (rowid, image) in images {
            bytes.push(5);
            bytes.extend_from_slice(&rowid.to_le_bytes());
            match image {
                None => bytes.extend_from_slice(&GONE.to_le_bytes()),
                Some(image) => {
                    bytes.extend_from_slice(&(image.len() as u16).to_le_bytes());
                    bytes.extend_from_slice(image);
                }
            }
        }
        // Within a slot, no image's length can reach GONE.
        if bytes.len() <= SLOT - KEYS_AT {
            return encode_slot(
                entry.commit,
                &entry.base,
                entry.after_frames,
                entry.after_salt,
                IMAGES | clean_flags(entry),
                &bytes,
                binding,
            );
        }
    }
    let mut keys = Vec::new();
    let mut flags = clean_flags(entry);
    match &entry.keys {
        None => flags |= UNREPORTED,
        Some(list) => {
            for key in list {
                match key {
                    Key::Run(rowid) => {
                        keys.push(1);
                        keys.extend_from_slice(&rowid.to_le_bytes());
                    }
                    Key::RunId(text) | Key::ResourceId(text) => {
                        keys.push(if matches!(key, Key::RunId(_)) { 2 } else { 3 });
                        keys.extend_from_slice(&(text.len() as u32).to_le_bytes());
                        keys.extend_from_slice(text);
                    }
                    Key::DefinitionAdded => keys.push(4),
                    Key::BlobChanged => keys.push(6),
                }
            }
            if keys.len() > SLOT - KEYS_AT {
                keys.clear();
                flags |= UNREPORTED;
            }
        }
    }
    encode_slot(
        entry.commit,
        &entry.base,
        entry.after_frames,
        entry.after_salt,
        flags,
        &keys,
        binding,
    )
}

pub(super) fn encode_slot(
    commit: u32,
    base: &WalPosition,
    after_frames: u32,
    after_salt: Option<[u32; 2]>,
    mut flags: u32,
    keys: &[u8],
    binding: Binding,
) -> [u8; SLOT] {
    let mut slot = [0u8; SLOT];
    if after_salt.is_some() {
        flags |= KNOWN_SALT;
    }
    let after_salt = after_salt.unwrap_or_default();
    let words = [
        commit,
        base.frames,
        base.salt[0],
        base.salt[1],
        after_frames,
        flags,
        after_salt[0],
        after_salt[1],
        keys.len() as u32,
    ];
    for (at, word) in words.iter().enumerate() {
        slot[at * 4..at * 4 + 4].copy_from_slice(&word.to_le_bytes());
    }
    slot[40..48].copy_from_slice(&binding.file.to_le_bytes());
    slot[KEYS_AT..KEYS_AT + keys.len()].copy_from_slice(keys);
    let checksum = checksum(binding.journal, &slot[..48], keys);
    slot[48..56].copy_from_slice(&checksum.to_le_bytes());
    slot
}

/// What a slot holds for commit `commit`, if it is whole and for that commit.
pub(super) fn decode(slot: &[u8; SLOT], commit: u32, binding: Binding) -> Option<Slot> {
    let word = |at: usize| u32::from_le_bytes(slot[at * 4..at * 4 + 4].try_into().unwrap());
    let length = word(8) as usize;
    if length > SLOT - KEYS_AT || slot[40..48] != binding.file.to_le_bytes() {
        return None;
    }
    let keys = &slot[KEYS_AT..KEYS_AT + length];
    if word(0) != commit
        || slot[48..56] != checksum(binding.journal, &slot[..48], keys).to_le_bytes()
    {
        return None;
    }
    let flags = word(5);
    if flags & IN_FLIGHT != 0 {
        return Some(Slot::InFlight);
    }
    let (parsed, images) = if flags & UNREPORTED != 0 {
        (None, None)
    } else if flags & IMAGES != 0 {
        (Some(Vec::new()), Some(decode_images(keys)?))
    } else {
        (Some(decode_keys(keys)?), None)
    };
    let entry = Entry {
        commit: word(0),
        base: WalPosition {
            commit: word(0).wrapping_sub(1),
            frames: word(1),
            salt: [word(2), word(3)],
        },
        after_frames: word(4),
        after_salt: (flags & KNOWN_SALT != 0).then(|| [word(6), word(7)]),
        blobs_clean: (flags & BLOBS_CLEAN != 0).then_some((flags >> 16) as u16),
        keys: parsed,
        images,
    };
    Some(Slot::Written(entry))
}

fn decode_images(mut bytes: &[u8]) -> Option<Images> {
    let mut images = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        if tag != 5 {
            return None;
        }
        let (rowid, rest) = rest.split_first_chunk::<8>()?;
        let (length, rest) = rest.split_first_chunk::<2>()?;
        let length = u16::from_le_bytes(*length);
        bytes = rest;
        let image = if length == GONE {
            None
        } else {
            let (image, rest) = bytes.split_at_checked(usize::from(length))?;
            bytes = rest;
            Some(Box::from(image))
        };
        images.push((i64::from_le_bytes(*rowid), image));
    }
    Some(images)
}

fn decode_keys(mut bytes: &[u8]) -> Option<Vec<Key>> {
    let mut keys = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        bytes = rest;
        let key = match tag {
            1 => {
                let (rowid, rest) = bytes.split_at_checked(8)?;
                bytes = rest;
                Key::Run(i64::from_le_bytes(rowid.try_into().ok()?))
            }
            2 | 3 => {
                let (length, rest) = bytes.split_at_checked(4)?;
                let length = u32::from_le_bytes(length.try_into().ok()?) as usize;
                let (text, rest) = rest.split_at_checked(length)?;
                bytes = rest;
                let text = Box::from(text);
                if tag == 2 {
                    Key::RunId(text)
                } else {
                    Key::ResourceId(text)
                }
            }
            4 => Key::DefinitionAdded,
            6 => Key::BlobChanged,
            _ => return None,
        };
        keys.push(key);
    }
    Some(keys)
}

/// A mark's bytes: commit, frames, salt, schema, then a checksum keyed like a slot's.
pub(super) fn encode_mark(mark: &BlobMark, binding: Binding) -> [u8; MARK] {
    let mut bytes = [0u8; MARK];
    let position = &mark.position;
    let words = [
        position.commit,
        position.frames,
        position.salt[0],
        position.salt[1],
        mark.schema,
    ];
    for (at, word) in words.iter().enumerate() {
        bytes[at * 4..at * 4 + 4].copy_from_slice(&word.to_le_bytes());
    }
    let check = checksum(binding.journal, &bytes[..20], &binding.file.to_le_bytes()) as u32;
    bytes[20..].copy_from_slice(&check.to_le_bytes());
    bytes
}

/// The mark in `bytes`, if whole and for this journal and file.
pub(super) fn decode_mark(bytes: &[u8; MARK], binding: Binding) -> Option<BlobMark> {
    let word = |at: usize| u32::from_le_bytes(bytes[at * 4..at * 4 + 4].try_into().unwrap());
    let check = checksum(binding.journal, &bytes[..20], &binding.file.to_le_bytes()) as u32;
    (word(5) == check).then(|| BlobMark {
        position: WalPosition {
            commit: word(0),
            frames: word(1),
            salt: [word(2), word(3)],
        },
        schema: word(4),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::run_index::journal::tests::entry;

    const BOUND: Binding = Binding {
        file: 99,
        journal: 7,
    };

    #[test]
    fn a_slot_with_any_byte_changed_reads_as_missing() {
        let keys = vec![Key::Run(42), Key::RunId(Box::from(&b"run-7"[..]))];
        let written = encode(&entry(12, Some(keys.clone())), BOUND);
        assert_eq!(
            decode(&written, 12, BOUND),
            Some(Slot::Written(entry(12, Some(keys))))
        );
        let used = KEYS_AT + 1 + 8 + 1 + 4 + 5;
        // Bytes 48..56 hold the checksum, 56..64 are unused.
        for at in (0..48).chain(KEYS_AT..used) {
            for flip in [0x01, 0x80, 0xff] {
                let mut torn = written;
                torn[at] ^= flip;
                assert_eq!(decode(&torn, 12, BOUND), None, "byte {at} ^ {flip:#x}");
            }
        }
        // Two words swapped (a checksum that only adds them up would not see it).
        let mut swapped = written;
        swapped.copy_within(4..8, 0);
        swapped[4..8].copy_from_slice(&written[0..4]);
        assert_eq!(decode(&swapped, 12, BOUND), None);
        // The same bytes in another journal (another identity), or for another file.
        let other_journal = Binding {
            journal: 8,
            ..BOUND
        };
        let other_file = Binding { file: 98, ..BOUND };
        assert_eq!(decode(&written, 12, other_journal), None);
        assert_eq!(decode(&written, 12, other_file), None);
    }

    #[test]
    fn a_clean_commit_and_a_blob_mark_read_back_and_only_whole() {
        for keys in [Some(vec![Key::Run(4)]), None] {
            let mut clean = entry(30, keys);
            clean.blobs_clean = Some(0xbeef);
            let written = encode(&clean, BOUND);
            assert_eq!(decode(&written, 30, BOUND), Some(Slot::Written(clean)));
        }
        let mark = BlobMark {
            position: WalPosition {
                commit: 9,
                frames: 12,
                salt: [1, 2],
            },
            schema: 77,
        };
        let bytes = encode_mark(&mark, BOUND);
        assert_eq!(decode_mark(&bytes, BOUND), Some(mark));
        assert_eq!(decode_mark(&[0; MARK], BOUND), None, "no mark written");
        for at in 0..MARK {
            let mut torn = bytes;
            torn[at] ^= 0x10;
            assert_eq!(decode_mark(&torn, BOUND), None, "byte {at}");
        }
        let other_file = Binding { file: 98, ..BOUND };
        assert_eq!(decode_mark(&bytes, other_file), None);
    }
}
