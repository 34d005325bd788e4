//! A vector of at most `N` items kept inline, so that a state is one `Copy`:
//! the checker clones and hashes millions of states, and a heap allocation per
//! list would cost more than the rest of a step.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

#[derive(Clone, Copy)]
pub struct Slots<T: Copy + Default, const N: usize> {
    len: u8,
    items: [T; N],
}

impl<T: Copy + Default, const N: usize> Slots<T, N> {
    pub fn new() -> Self {
        Slots {
            len: 0,
            items: [T::default(); N],
        }
    }

    /// Panics past `N`: the model's bounds are wrong, not the protocol.
    pub fn push(&mut self, item: T) {
        assert!(usize::from(self.len) < N, "more than {N} items");
        self.items[usize::from(self.len)] = item;
        self.len += 1;
    }

    pub fn remove(&mut self, i: usize) -> T {
        let item = self[i];
        self.items.copy_within(i + 1..usize::from(self.len), i);
        self.len -= 1;
        self.items[usize::from(self.len)] = T::default();
        item
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut i = 0;
        while i < self.len() {
            if keep(&self[i]) {
                i += 1;
            } else {
                self.remove(i);
            }
        }
    }

    pub fn clear(&mut self) {
        *self = Slots::new();
    }
}

impl<T: Copy + Default, const N: usize> Default for Slots<T, N> {
    fn default() -> Self {
        Slots::new()
    }
}

impl<T: Copy + Default, const N: usize> Deref for Slots<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.items[..usize::from(self.len)]
    }
}

impl<T: Copy + Default, const N: usize> DerefMut for Slots<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.items[..usize::from(self.len)]
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for Slots<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Copy + Default + Eq, const N: usize> Eq for Slots<T, N> {}

impl<T: Copy + Default + Hash, const N: usize> Hash for Slots<T, N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self[..].hash(state);
    }
}

impl<T: Copy + Default + fmt::Debug, const N: usize> fmt::Debug for Slots<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self[..].fmt(f)
    }
}

impl<T: Copy + Default, const N: usize> FromIterator<T> for Slots<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut slots = Slots::new();
        for item in iter {
            slots.push(item);
        }
        slots
    }
}
