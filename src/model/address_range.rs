//! Address ranges and the choice of an address: pure, so the rules are tested without a database.
//!
//! A range is written `first-last/prefix` (`192.168.122.100-192.168.122.199/24`): the addresses
//! trog may hand out on one network, and the prefix length a guest's static address carries.
//! IPv4 only: the ranges trog hands out from are the NAT networks and bridges of IPv4 hypervisors.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

/// The addresses trog may hand out on one network or bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRange {
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
    pub prefix_len: u8,
}

impl AddressRange {
    /// Parses `first-last/prefix`; both ends must lie in one subnet of that prefix, in order.
    pub fn parse(text: &str) -> Result<AddressRange, String> {
        let form = "write it `first-last/prefix`, e.g. `192.168.122.100-192.168.122.199/24`";
        let (ends, prefix) = text
            .rsplit_once('/')
            .ok_or_else(|| format!("`{text}` has no prefix length ({form})"))?;
        let (first, last) = ends
            .split_once('-')
            .ok_or_else(|| format!("`{text}` is not a range ({form})"))?;
        let parse_end = |end: &str| {
            end.trim()
                .parse::<Ipv4Addr>()
                .map_err(|_| format!("`{end}` is not an IPv4 address ({form})"))
        };
        let (first, last) = (parse_end(first)?, parse_end(last)?);
        let prefix_len: u8 = prefix
            .parse()
            .ok()
            .filter(|length| (1..=30).contains(length))
            .ok_or_else(|| format!("`{prefix}` is not a prefix length of 1 to 30"))?;
        let range = AddressRange {
            first,
            last,
            prefix_len,
        };
        if first > last {
            return Err(format!("`{text}` ends before it starts"));
        }
        if range.subnet_of(first) != range.subnet_of(last) {
            return Err(format!("`{text}` spans more than one /{prefix_len} subnet"));
        }
        if first == range.subnet_of(first) || last == range.broadcast() {
            return Err(format!(
                "`{text}` includes the subnet's own or its broadcast address"
            ));
        }
        Ok(range)
    }

    fn mask(&self) -> u32 {
        u32::MAX << (32 - u32::from(self.prefix_len))
    }

    fn subnet_of(&self, address: Ipv4Addr) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(address) & self.mask())
    }

    fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.first) | !self.mask())
    }

    /// Whether `address` is one trog may hand out here.
    pub fn contains(&self, address: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&address)
    }

    /// Whether `address` is in the range's subnet (a gateway must be).
    pub fn in_subnet(&self, address: Ipv4Addr) -> bool {
        self.subnet_of(address) == self.subnet_of(self.first)
    }

    /// How many addresses the range holds.
    pub fn size(&self) -> u64 {
        u64::from(u32::from(self.last)) - u64::from(u32::from(self.first)) + 1
    }
}

/// Serialized as written, since the template context carries `_global` as it reads.
impl serde::Serialize for AddressRange {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}/{}", self.first, self.last, self.prefix_len)
    }
}

/// The lowest address of `range` that nobody holds and that is not the gateway; `None` when the
/// range is full.
pub fn lowest_free(
    range: &AddressRange,
    held: &BTreeSet<Ipv4Addr>,
    gateway: Option<Ipv4Addr>,
) -> Option<Ipv4Addr> {
    (u32::from(range.first)..=u32::from(range.last))
        .map(Ipv4Addr::from)
        .find(|address| !held.contains(address) && Some(*address) != gateway)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> AddressRange {
        AddressRange::parse(text).unwrap()
    }

    #[test]
    fn parses_and_prints_the_written_form() {
        let parsed = range("192.168.122.100-192.168.122.199/24");
        assert_eq!(parsed.to_string(), "192.168.122.100-192.168.122.199/24");
        assert_eq!(parsed.size(), 100);
        assert!(parsed.contains("192.168.122.150".parse().unwrap()));
        assert!(!parsed.contains("192.168.122.200".parse().unwrap()));
        assert!(parsed.in_subnet("192.168.122.1".parse().unwrap()));
        assert!(!parsed.in_subnet("192.168.123.1".parse().unwrap()));
    }

    #[test]
    fn refuses_what_cannot_be_a_range() {
        for (text, why) in [
            ("192.168.122.100-192.168.122.199", "no prefix length"),
            ("192.168.122.100/24", "not a range"),
            ("192.168.122.199-192.168.122.100/24", "ends before"),
            ("192.168.122.100-192.168.123.10/24", "more than one"),
            ("192.168.122.0-192.168.122.10/24", "subnet's own"),
            ("192.168.122.10-192.168.122.255/24", "broadcast"),
            ("192.168.122.10-192.168.122.20/31", "prefix length"),
            ("2001:db8::1-2001:db8::9/64", "not an IPv4"),
        ] {
            let error = AddressRange::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn hands_out_the_lowest_free_address_never_the_gateway() {
        let range = range("10.0.0.1-10.0.0.4/24");
        let gateway = Some("10.0.0.1".parse().unwrap());
        let mut held = BTreeSet::new();
        let mut handed = Vec::new();
        while let Some(address) = lowest_free(&range, &held, gateway) {
            held.insert(address);
            handed.push(address.to_string());
        }
        assert_eq!(handed, ["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
        held.remove(&"10.0.0.3".parse().unwrap());
        assert_eq!(
            lowest_free(&range, &held, gateway),
            Some("10.0.0.3".parse().unwrap())
        );
    }
}
