//! What a guest's static addresses (`ips`) and its `gateway` must be beside each other, beyond
//! each value's own type: every address once, none a subnet's own or broadcast address, and a
//! gateway on the subnet of one of them that is not one of them. Pure: checked values in, the
//! reasons out; `settings` points each at where it was written.

use crate::config::values::{IpCidr, TypedValue};
use std::net::{IpAddr, Ipv4Addr};

/// Why `gateway` cannot be the default route of a guest with the static addresses `ips`, or,
/// without them, with an address `address_range` hands out: a gateway is reached on the subnet
/// of one of its addresses (the guest's network configuration has no on-link route to one
/// elsewhere).
pub fn gateway_problem(
    gateway: IpAddr,
    ips: Option<&TypedValue>,
    address_range: Option<&TypedValue>,
) -> Option<String> {
    let cidrs = cidrs_of(ips);
    if let (Some(TypedValue::Range(range)), true) = (address_range, cidrs.is_empty()) {
        let inside = match gateway {
            IpAddr::V4(gateway) => range.in_subnet(gateway),
            IpAddr::V6(_) => false,
        };
        if !inside {
            return Some(format!(
                "{gateway} is outside the subnet of `address_range` {range}: the guests it hands addresses to could not reach it"
            ));
        }
    }
    if !cidrs.is_empty() && !cidrs.iter().any(|cidr| in_subnet_of(cidr, gateway)) {
        let written: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
        return Some(format!(
            "{gateway} is outside the subnet of every address in `ips` ({}): the guest could not reach it",
            written.join(", ")
        ));
    }
    None
}

/// The address of `ips` that is `gateway` too, as (its index, why), if one is: a default route
/// through the guest itself reaches nothing. It is told at the address, which is the guest's
/// own, naming where the gateway was written (`gateway_written_at`), often `_base`'s for every
/// guest.
pub fn gateway_among_ips(
    gateway: IpAddr,
    ips: Option<&TypedValue>,
    gateway_written_at: &str,
) -> Option<(usize, String)> {
    let index = cidrs_of(ips)
        .iter()
        .position(|cidr| cidr.address == gateway)?;
    Some((
        index,
        format!(
            "{gateway} is the guest's `gateway` too ({gateway_written_at}): a default route through the guest itself reaches nothing; give the guest another address, or set `gateway` to the network's router"
        ),
    ))
}

/// What is wrong with each address of `ips`, as (its index, why): an address listed a second
/// time (under any prefix: an interface holds an address once, and the second would only fail
/// on the guest), and an IPv4 address that is its subnet's own or its broadcast address, which
/// no host can hold. A /31 or /32 has neither (a /31's two addresses are both hosts', RFC 3021);
/// IPv6 has no broadcast, and its subnet-router anycast address is left to the guest.
pub fn ips_problems(ips: &[TypedValue]) -> Vec<(usize, String)> {
    let mut problems = Vec::new();
    let mut seen: Vec<(usize, IpAddr)> = Vec::new();
    for (index, item) in ips.iter().enumerate() {
        let TypedValue::Cidr(cidr) = item else {
            continue;
        };
        if let Some((first, _)) = seen.iter().find(|(_, seen)| *seen == cidr.address) {
            problems.push((
                index,
                format!(
                    "{} is listed twice (the first is ips[{first}]); a guest holds each of its addresses once",
                    cidr.address
                ),
            ));
            continue;
        }
        seen.push((index, cidr.address));
        if let Some(why) = reserved_v4_problem(cidr) {
            problems.push((index, why));
        }
    }
    problems
}

/// Why an IPv4 `cidr` names an address of its subnet no host holds, if it does.
fn reserved_v4_problem(cidr: &IpCidr) -> Option<String> {
    let IpAddr::V4(address) = cidr.address else {
        return None;
    };
    if cidr.prefix_len > 30 {
        return None;
    }
    let mask = u32::MAX
        .checked_shl(32 - u32::from(cidr.prefix_len))
        .unwrap_or(0);
    let network = u32::from(address) & mask;
    let broadcast = network | !mask;
    let subnet = format!("{}/{}", Ipv4Addr::from(network), cidr.prefix_len);
    let hosts = format!(
        "{} to {}",
        Ipv4Addr::from(network + 1),
        Ipv4Addr::from(broadcast - 1)
    );
    if u32::from(address) == network {
        Some(format!(
            "{address} is the address of the subnet {subnet} itself, which no host holds; give the guest one of {hosts}"
        ))
    } else if u32::from(address) == broadcast {
        Some(format!(
            "{address} is the broadcast address of the subnet {subnet}, which no host holds; give the guest one of {hosts}"
        ))
    } else {
        None
    }
}

/// The addresses of `ips`, when it is a checked list.
fn cidrs_of(ips: Option<&TypedValue>) -> Vec<&IpCidr> {
    match ips {
        Some(TypedValue::List(items)) => items
            .iter()
            .filter_map(|item| match item {
                TypedValue::Cidr(cidr) => Some(cidr),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `address` is on the subnet of `cidr` (the same family, the same leading bits).
fn in_subnet_of(cidr: &IpCidr, address: IpAddr) -> bool {
    match (cidr.address, address) {
        (IpAddr::V4(own), IpAddr::V4(other)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(cidr.prefix_len))
                .unwrap_or(0);
            u32::from(own) & mask == u32::from(other) & mask
        }
        (IpAddr::V6(own), IpAddr::V6(other)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(cidr.prefix_len))
                .unwrap_or(0);
            u128::from(own) & mask == u128::from(other) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(written: &[&str]) -> Vec<TypedValue> {
        written
            .iter()
            .map(|text| TypedValue::Cidr(IpCidr::parse(text).unwrap()))
            .collect()
    }

    #[test]
    fn addresses_each_once_and_of_a_host_pass() {
        for written in [
            &["192.0.2.5/24", "198.51.100.7/24"][..],
            &["192.0.2.1/24"],
            &["192.0.2.254/24"],
            &["10.0.0.0/31", "10.0.0.3/32"],
            &["10.0.0.5/0"],
            &["2001:db8::/64", "2001:db8::5/64"],
        ] {
            assert_eq!(ips_problems(&ips(written)), [], "{written:?}");
        }
    }

    #[test]
    fn an_address_twice_is_refused_at_the_second() {
        assert_eq!(
            ips_problems(&ips(&["192.0.2.5/24", "10.0.0.5/8", "192.0.2.5/25"])),
            [(
                2,
                "192.0.2.5 is listed twice (the first is ips[0]); a guest holds each of its addresses once"
                    .to_string()
            )]
        );
        assert_eq!(
            ips_problems(&ips(&["2001:db8::5/64", "2001:db8::5/64"]))[0].0,
            1
        );
    }

    #[test]
    fn a_subnets_own_or_broadcast_address_is_refused() {
        assert_eq!(
            ips_problems(&ips(&["192.0.2.0/24", "198.51.100.255/24"])),
            [
                (
                    0,
                    "192.0.2.0 is the address of the subnet 192.0.2.0/24 itself, which no host holds; give the guest one of 192.0.2.1 to 192.0.2.254"
                        .to_string()
                ),
                (
                    1,
                    "198.51.100.255 is the broadcast address of the subnet 198.51.100.0/24, which no host holds; give the guest one of 198.51.100.1 to 198.51.100.254"
                        .to_string()
                ),
            ]
        );
        assert_eq!(ips_problems(&ips(&["10.0.0.3/30"]))[0].0, 0);
        assert!(ips_problems(&ips(&["10.255.255.255/8"]))[0]
            .1
            .contains("broadcast address of the subnet 10.0.0.0/8"));
    }

    #[test]
    fn a_gateway_that_is_one_of_the_guests_addresses_is_found_at_that_address() {
        let list = TypedValue::List(ips(&["192.0.2.5/24", "2001:db8::5/64"]));
        for (gateway, index) in [("192.0.2.5", 0), ("2001:db8::5", 1)] {
            let (found, why) =
                gateway_among_ips(gateway.parse().unwrap(), Some(&list), "base.yaml:4:14").unwrap();
            assert_eq!(found, index);
            assert!(
                why.contains(&format!(
                    "{gateway} is the guest's `gateway` too (base.yaml:4:14)"
                )),
                "{why}"
            );
        }
        assert_eq!(
            gateway_among_ips("192.0.2.1".parse().unwrap(), Some(&list), "x"),
            None
        );
        assert_eq!(
            gateway_among_ips("192.0.2.1".parse().unwrap(), None, "x"),
            None
        );
    }
}
