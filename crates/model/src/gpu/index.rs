//! The device indices a pod was given: the annotation
//! `gpu-scheduler.io/gpu-index`, in the list format of Linux cpusets
//! (`0`, `2-3`, `0,2`, `0-3,6`), which device plugins and people both read.

use std::fmt;

use super::MAX_DEVICES;

/// A set of device indices (0–63) of one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceSet(u64);

impl DeviceSet {
    pub const EMPTY: DeviceSet = DeviceSet(0);

    pub fn single(i: usize) -> DeviceSet {
        DeviceSet::EMPTY.with(i)
    }

    /// The set with `i` added (indices past [`MAX_DEVICES`] are ignored).
    pub fn with(self, i: usize) -> DeviceSet {
        if i < MAX_DEVICES { DeviceSet(self.0 | (1u64 << i)) } else { self }
    }

    pub fn contains(self, i: usize) -> bool {
        i < MAX_DEVICES && self.0 & (1u64 << i) != 0
    }

    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Only the devices below `count` (a node with fewer devices).
    pub fn below(self, count: usize) -> DeviceSet {
        if count >= MAX_DEVICES { self } else { DeviceSet(self.0 & ((1u64 << count) - 1)) }
    }

    /// The indices in increasing order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(i)
        })
    }

    /// Parses the annotation's value; the error says what is expected.
    pub fn parse(s: &str) -> Result<DeviceSet, String> {
        let expected =
            || format!("must list GPU indices from 0 to {} such as \"0\", \"2-3\" or \"0,2\"", MAX_DEVICES - 1);
        let index = |t: &str| t.trim().parse::<usize>().ok().filter(|&i| i < MAX_DEVICES).ok_or_else(expected);
        let mut set = DeviceSet::EMPTY;
        for item in s.split(',') {
            match item.split_once('-') {
                None => set = set.with(index(item)?),
                Some((a, b)) => {
                    let (a, b) = (index(a)?, index(b)?);
                    if a > b {
                        return Err(expected());
                    }
                    (a..=b).for_each(|i| set = set.with(i));
                }
            }
        }
        if set.is_empty() { Err(expected()) } else { Ok(set) }
    }
}

/// The canonical form: runs of consecutive indices as ranges.
impl fmt::Display for DeviceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut indices = self.iter().peekable();
        while let Some(start) = indices.next() {
            let mut end = start;
            while indices.peek() == Some(&(end + 1)) {
                end += 1;
                indices.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start { write!(f, "{start}")? } else { write!(f, "{start}-{end}")? }
        }
        Ok(())
    }
}

impl FromIterator<usize> for DeviceSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        iter.into_iter().fold(DeviceSet::EMPTY, DeviceSet::with)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        // (input, indices, canonical form)
        let cases: &[(&str, &[usize], &str)] = &[
            ("0", &[0], "0"),
            ("2-3", &[2, 3], "2-3"),
            ("0,2", &[0, 2], "0,2"),
            ("3,0-1", &[0, 1, 3], "0-1,3"),
            (" 4 , 5 ", &[4, 5], "4-5"),
            ("0-3,6,7", &[0, 1, 2, 3, 6, 7], "0-3,6-7"),
            ("63", &[63], "63"),
            ("1,1", &[1], "1"),
        ];
        for (input, want, canonical) in cases {
            let set = DeviceSet::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(set.iter().collect::<Vec<_>>(), *want, "{input}");
            assert_eq!(set.to_string(), *canonical, "{input}");
            assert_eq!(DeviceSet::parse(canonical), Ok(set), "round trip of {input}");
        }
        for bad in ["", "a", "3-1", "64", "-1", "1-", "0,,1", "1.5"] {
            assert!(DeviceSet::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn set_operations() {
        let s: DeviceSet = [1, 3, 5].into_iter().collect();
        assert_eq!((s.len(), s.contains(3), s.contains(2)), (3, true, false));
        assert_eq!(s.below(4).iter().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(s.below(64), s);
        assert_eq!(DeviceSet::single(70), DeviceSet::EMPTY, "out of range is ignored");
        assert!(DeviceSet::EMPTY.is_empty());
    }
}
