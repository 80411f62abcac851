//! The prune's set of blobs not yet known to be referenced: loaded from `blobs`, struck off as
//! the referencing columns are read (through a [`Striker`]), and finally the row ids of the
//! blobs nothing struck.
//!
//! Hashes of the schema's length (`CHECK (length(blob_hash) = 32)`) go into an open-addressing
//! table whose home slot is a hash's leading bits (see [`LONGEST_PROBE`] for keys that are no
//! digests). SHA-256 digests are uniform, so a lookup reads one slot (one cache line) after the
//! cache-resident occupancy bits. Striking is the prune's hot loop (one
//! lookup per referencing value, most of them for distinct hashes of a table far larger than
//! the CPU caches): each lookup's slot is prefetched and resolved [`LOOKAHEAD`] values later,
//! so the memory reads overlap instead of stalling one by one.
//!
//! Once loaded, the set is struck from several threads at once, each with its own
//! [`Striker`]: the keys are only read, and a blob's mark is one atomic bit, so two threads
//! striking the same blob count it once. A striker counts its marks off the set's total when
//! it flushes: a counter written on every first strike would bounce between the threads'
//! cores.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// Values whose slot is prefetched before the oldest pending one is resolved.
const LOOKAHEAD: usize = 16;

/// Occupied slots an insertion may pass before the table is rebuilt with home slots that mix
/// all of a key's bytes. Digests never come near it (the table is at most three quarters
/// full), and their leading bits keep loading, which comes in key order, front to back; keys
/// that are no digests (raw SQL can store any 32 bytes) can share their leading bytes.
const LONGEST_PROBE: usize = 64;

type Hash = [u8; 32];

/// A slot of the table: aligned so that it never straddles two cache lines (a prefetch brings
/// in one line; with the allocator's 16-byte alignment every other slot straddled two, and the
/// lookup stalled on the line not prefetched: half the prune's striking time).
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot(Hash);

/// The blobs not yet known to be referenced, with their row ids.
pub struct BlobSet {
    slots: Vec<Slot>,
    rowids: Vec<i64>,
    occupied: Vec<u64>,
    referenced: Vec<AtomicU64>,
    /// `64 - log2(slots.len())`: a home slot is the leading bits of a word of the key.
    shift: u32,
    /// Hashes in the table not yet referenced (marks a striker has not counted excluded). On a
    /// cache line of its own: the fields beside it are read on every lookup, by every thread.
    remaining: Padded<AtomicUsize>,
    /// Any other BLOB hash (only a file that bypassed the check could hold one).
    odd: Mutex<Vec<(Vec<u8>, i64)>>,
    /// How many `odd` holds, read without its lock.
    odd_left: AtomicUsize,
    /// Hashes that are no BLOB equal no referencing value: those blobs always go.
    unmatchable: Vec<i64>,
    /// Whether home slots mix all of a key's bytes (see [`LONGEST_PROBE`]).
    mixed: bool,
}

impl BlobSet {
    /// An empty set sized for about `expected` blobs (more still fit, just less quickly).
    pub fn with_capacity(expected: usize) -> BlobSet {
        BlobSet::with_slots(expected + expected / 2)
    }

    fn with_slots(slots: usize) -> BlobSet {
        let capacity = slots.next_power_of_two().max(64);
        BlobSet {
            slots: vec![Slot([0; 32]); capacity],
            rowids: vec![0; capacity],
            occupied: vec![0; capacity / 64],
            referenced: (0..capacity / 64).map(|_| AtomicU64::new(0)).collect(),
            shift: 64 - capacity.trailing_zeros(),
            remaining: Padded(AtomicUsize::new(0)),
            odd: Mutex::new(Vec::new()),
            odd_left: AtomicUsize::new(0),
            unmatchable: Vec::new(),
            mixed: false,
        }
    }

    /// Adds the blob at `rowid` with key `hash` (`None`: a key that is no BLOB).
    pub fn insert(&mut self, rowid: i64, hash: Option<&[u8]>) {
        let Some(hash) = hash else {
            self.unmatchable.push(rowid);
            return;
        };
        let Ok(hash) = <Hash>::try_from(hash) else {
            self.push_odd(hash, rowid);
            return;
        };
        // Past three quarters full, double: lookups stay short whatever the count said.
        if (*self.remaining.0.get_mut() + 1) * 4 > self.slots.len() * 3 {
            self.rebuild(self.slots.len() * 2, self.mixed);
        }
        let mut slot = self.home(&hash);
        let mut probes = 0;
        while bit(&self.occupied, slot) {
            if self.slots[slot].0 == hash {
                // `blob_hash` is the primary key: only a file that bypassed it repeats one.
                self.push_odd(&hash, rowid);
                return;
            }
            probes += 1;
            if probes == LONGEST_PROBE && !self.mixed {
                // Keys that are no digests crowd their leading bits: spread them by all bytes.
                self.rebuild(self.slots.len(), true);
                return self.insert(rowid, Some(&hash));
            }
            slot = (slot + 1) & (self.slots.len() - 1);
        }
        self.occupied[slot / 64] |= 1 << (slot % 64);
        self.slots[slot] = Slot(hash);
        self.rowids[slot] = rowid;
        *self.remaining.0.get_mut() += 1;
    }

    fn push_odd(&mut self, hash: &[u8], rowid: i64) {
        let odd = self
            .odd
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        odd.push((hash.to_vec(), rowid));
        *self.odd_left.get_mut() += 1;
    }

    /// Whether no blob is left that a reference could still keep (values pending in a striker,
    /// and marks it has not counted yet, aside: they can only strike more).
    pub fn is_empty(&self) -> bool {
        self.remaining.0.load(Relaxed) == 0 && self.odd_left.load(Relaxed) == 0
    }

    /// The row ids of the blobs nothing referenced, ascending (the reference's delete order).
    pub fn into_rowids(self) -> Vec<i64> {
        // A word of occupancy bits at a time: most words have no unreferenced slot at all.
        let referenced = self.referenced.into_iter().map(AtomicU64::into_inner);
        let unreferenced = self.occupied.iter().zip(referenced).enumerate();
        let slots = unreferenced.flat_map(|(word, (occupied, referenced))| {
            let mut left = occupied & !referenced;
            std::iter::from_fn(move || {
                let bit = (left != 0).then(|| left.trailing_zeros() as usize)?;
                left &= left - 1;
                Some(word * 64 + bit)
            })
        });
        let mut rowids: Vec<i64> = slots
            .map(|slot| self.rowids[slot])
            .chain(into_inner(self.odd).into_iter().map(|(_, rowid)| rowid))
            .chain(self.unmatchable)
            .collect();
        rowids.sort_unstable();
        rowids
    }

    /// Strikes `hash` off the odd keys, if any is left.
    fn strike_odd(&self, hash: &[u8]) {
        if self.odd_left.load(Relaxed) != 0 {
            let mut odd = lock(&self.odd);
            odd.retain(|(odd, _)| odd[..] != *hash);
            self.odd_left.store(odd.len(), Relaxed);
        }
    }

    /// Marks `hash` referenced, looking from `slot` (its home) on; whether this call marked it
    /// (and so must count it).
    fn mark(&self, hash: &Hash, mut slot: usize) -> bool {
        while bit(&self.occupied, slot) {
            if self.slots[slot].0 == *hash {
                let word = &self.referenced[slot / 64];
                let mask = 1 << (slot % 64);
                // The plain load first: most strikes are of blobs struck before.
                return word.load(Relaxed) & mask == 0 && word.fetch_or(mask, Relaxed) & mask == 0;
            }
            slot = (slot + 1) & (self.slots.len() - 1);
        }
        false
    }

    /// A hash's home slot: its leading bits, or (`mixed`) those of all its bytes mixed.
    fn home(&self, hash: &Hash) -> usize {
        let word = |index: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&hash[index * 8..index * 8 + 8]);
            u64::from_be_bytes(bytes)
        };
        let key = if self.mixed {
            let folded = word(0)
                ^ word(1).rotate_left(16)
                ^ word(2).rotate_left(32)
                ^ word(3).rotate_left(48);
            folded.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        } else {
            word(0)
        };
        (key >> self.shift) as usize
    }

    /// `capacity` slots homed as `mixed` says, every entry inserted again (only while loading:
    /// nothing is struck yet).
    fn rebuild(&mut self, capacity: usize, mixed: bool) {
        let mut old = std::mem::replace(self, BlobSet::with_slots(capacity));
        self.mixed = mixed;
        self.odd = std::mem::take(&mut old.odd);
        self.odd_left = std::mem::take(&mut old.odd_left);
        self.unmatchable = std::mem::take(&mut old.unmatchable);
        for slot in 0..old.slots.len() {
            if bit(&old.occupied, slot) {
                self.insert(old.rowids[slot], Some(&old.slots[slot].0));
            }
        }
    }
}

/// Striking values off a [`BlobSet`], with the lookups in flight.
pub struct Striker<'s> {
    set: &'s BlobSet,
    /// Struck hashes whose slot is prefetched but not yet looked at, oldest first.
    pending: [(Hash, usize); LOOKAHEAD],
    pending_len: usize,
    pending_head: usize,
    /// Hashes this striker marked and has not yet counted off the set's `remaining`.
    marked: usize,
}

impl<'s> Striker<'s> {
    pub fn new(set: &'s BlobSet) -> Striker<'s> {
        Striker {
            set,
            pending: [([0; 32], 0); LOOKAHEAD],
            pending_len: 0,
            pending_head: 0,
            marked: 0,
        }
    }

    /// `hash` is referenced: its blob stays.
    pub fn strike(&mut self, hash: &[u8]) {
        self.set.strike_odd(hash);
        if let Ok(hash) = <&Hash>::try_from(hash) {
            let slot = self.set.home(hash);
            prefetch(&self.set.slots[slot]);
            if self.pending_len == LOOKAHEAD {
                self.resolve_oldest();
            }
            let index = (self.pending_head + self.pending_len) % LOOKAHEAD;
            self.pending[index] = (*hash, slot);
            self.pending_len += 1;
        }
    }

    /// Whether no blob is left, as far as this striker knows (others may have marked more).
    pub fn is_done(&self) -> bool {
        let set = self.set;
        set.remaining.0.load(Relaxed) == self.marked && set.odd_left.load(Relaxed) == 0
    }

    /// Resolves every pending value, and counts what it marked.
    pub fn flush(&mut self) {
        while self.pending_len > 0 {
            self.resolve_oldest();
        }
        if self.marked > 0 {
            self.set.remaining.0.fetch_sub(self.marked, Relaxed);
            self.marked = 0;
        }
    }

    fn resolve_oldest(&mut self) {
        let (hash, slot) = self.pending[self.pending_head];
        self.pending_head = (self.pending_head + 1) % LOOKAHEAD;
        self.pending_len -= 1;
        if self.set.mark(&hash, slot) {
            self.marked += 1;
        }
    }
}

/// A value alone on its cache line.
#[repr(align(64))]
struct Padded<T>(T);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn into_inner<T>(mutex: Mutex<T>) -> T {
    mutex
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn bit(bits: &[u64], index: usize) -> bool {
    bits[index / 64] >> (index % 64) & 1 == 1
}

/// Asks the CPU to start loading `slot`'s cache line (a hint; nothing is read).
fn prefetch(slot: &Slot) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no effect on memory and cannot fault; the pointer is valid anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{BlobSet, Striker};

    /// A hash from a few leading bytes and a tail (few distinct values: home slots collide).
    fn hash(lead: u8, tail: u8) -> Vec<u8> {
        let mut hash = vec![lead; 32];
        hash[31] = tail;
        hash
    }

    proptest! {
        /// Whatever the collisions, wrap-arounds, growth and pending lookups: exactly the
        /// blobs never struck are left, ascending.
        #[test]
        fn leaves_exactly_the_blobs_never_struck(
            blobs in proptest::collection::btree_set((any::<u8>(), 0u8..4), 0..300),
            struck in proptest::collection::vec((any::<u8>(), 0u8..4), 0..400),
            expected in 0usize..40,
        ) {
            let blobs: Vec<Vec<u8>> = blobs.into_iter().map(|(lead, tail)| hash(lead, tail)).collect();
            let mut set = BlobSet::with_capacity(expected);
            for (index, blob) in blobs.iter().enumerate() {
                set.insert(index as i64 + 1, Some(blob));
            }
                        let struck: Vec<Vec<u8>> = struck.into_iter().map(|(lead, tail)| hash(lead, tail)).collect();
            let mut striker = Striker::new(&set);
            for value in &struck {
                striker.strike(value);
            }
            striker.flush();
            let left: Vec<i64> = blobs
                .iter()
                .enumerate()
                .filter(|(_, blob)| !struck.contains(blob))
                .map(|(index, _)| index as i64 + 1)
                .collect();
            prop_assert_eq!(set.into_rowids(), left);
        }
    }

    #[test]
    fn odd_and_unmatchable_keys_go_unless_an_equal_value_is_struck() {
        let mut set = BlobSet::with_capacity(4);
        set.insert(1, Some(b"short"));
        set.insert(2, None);
        set.insert(3, Some(&hash(7, 7)));
        set.insert(4, Some(b""));
        // A repeated key (a file that bypassed the primary key) stays like the first one.
        set.insert(5, Some(&hash(7, 7)));
        set.insert(6, Some(&hash(9, 9)));
        set.insert(7, Some(&hash(9, 9)));
        let mut striker = Striker::new(&set);
        striker.strike(b"short");
        striker.strike(&hash(7, 7));
        striker.flush();
        assert!(!set.is_empty());
        assert_eq!(set.into_rowids(), [2, 4, 6, 7]);
    }

    #[test]
    fn is_empty_once_every_blob_is_struck() {
        let mut set = BlobSet::with_capacity(2);
        set.insert(1, Some(&hash(1, 0)));
        set.insert(2, Some(&hash(200, 0)));
        let mut striker = Striker::new(&set);
        striker.strike(&hash(1, 0));
        striker.strike(&hash(200, 0));
        striker.strike(&hash(200, 0));
        striker.flush();
        assert!(set.is_empty());
        assert_eq!(set.into_rowids(), Vec::<i64>::new());
    }
}
