//! Several strings kept as one key: what the usage log sums its counts
//! under (`memory::usage`), a row's coordinates and the calling agent.
//!
//! Why not a tuple of `String`s: a key is made for every row a read
//! serves, and the sums are gathered in a hash map, then sorted, tens of
//! thousands of keys a fold (`super::fold`). A tuple of five strings was
//! five allocations a key, and every comparison in a map that size missed
//! the cache once per string it followed; packed, a key is one allocation
//! and compares inside one buffer.

use std::cmp::Ordering;

/// `N` strings in one buffer, equal, ordered and hashed as the tuple of
/// them would be.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Packed<const N: usize> {
    text: Box<str>,
    /// Where each string ends in `text`.
    ends: [usize; N],
}

impl<const N: usize> Packed<N> {
    /// The strings `parts`, copied into one buffer.
    pub(crate) fn new(parts: [&str; N]) -> Self {
        let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        let ends = parts.map(|part| {
            text.push_str(part);
            text.len()
        });
        Packed {
            text: text.into_boxed_str(),
            ends,
        }
    }

    /// The strings, in the order they were given.
    pub(crate) fn parts(&self) -> [&str; N] {
        let mut start = 0;
        self.ends.map(|end| {
            let part = &self.text[start..end];
            start = end;
            part
        })
    }
}

impl<const N: usize> Ord for Packed<N> {
    /// The tuple's order: the first strings compared first, byte-wise.
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl<const N: usize> PartialOrd for Packed<N> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parts_come_back_as_given() {
        let key = Packed::new(["org", "", "agent", "k\u{0}é"]);
        assert_eq!(key.parts(), ["org", "", "agent", "k\u{0}é"]);
    }

    proptest! {
        /// Packing keeps the tuple's equality and order, so a sum lands on
        /// one key and the keys sort as the rows do in their table.
        #[test]
        fn equal_and_ordered_as_the_tuple(
            a in proptest::array::uniform3("[ab\u{0}é]{0,3}"),
            b in proptest::array::uniform3("[ab\u{0}é]{0,3}"),
        ) {
            let (pa, pb) = (Packed::new(a.each_ref().map(String::as_str)), Packed::new(b.each_ref().map(String::as_str)));
            prop_assert_eq!(pa == pb, a == b);
            prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
        }
    }
}
