//! The IPv4 leases a libvirt network's DHCP server holds, for every MAC at once (the `virt` crate
//! has no binding for the call).

use crate::libvirt::error::LibvirtError;
use std::ffi::CStr;
use virt::network::Network;
use virt::sys;

pub use crate::hypervisor::provisioning::NetworkLease;

/// Every IPv4 lease `network`'s DHCP server holds now.
pub fn network_leases(network: &Network, uri: &str) -> Result<Vec<NetworkLease>, LibvirtError> {
    let mut leases: *mut sys::virNetworkDHCPLeasePtr = std::ptr::null_mut();
    // SAFETY: the network pointer is valid for the call; libvirt allocates the array and each
    // lease, which are read below and freed with the functions libvirt documents for them.
    let count =
        unsafe { sys::virNetworkGetDHCPLeases(network.as_ptr(), std::ptr::null(), &mut leases, 0) };
    if count < 0 {
        return Err(LibvirtError::query(
            uri,
            "read the network's DHCP leases",
            virt::error::Error::last_error(),
        ));
    }
    let mut found = Vec::with_capacity(count as usize);
    for index in 0..count as usize {
        // SAFETY: libvirt returned `count` valid lease pointers; their strings are NUL-terminated
        // or null.
        let lease = unsafe { *leases.add(index) };
        let (mac, address, family, expires_unix) = unsafe {
            (
                text((*lease).mac),
                text((*lease).ipaddr),
                (*lease).type_,
                (*lease).expirytime,
            )
        };
        if family == sys::VIR_IP_ADDR_TYPE_IPV4 as i32 {
            if let (Some(mac), Some(Ok(address))) = (mac, address.map(|text| text.parse())) {
                found.push(NetworkLease {
                    mac,
                    address,
                    expires_unix,
                });
            }
        }
        // SAFETY: each lease is freed once, after its fields were copied.
        unsafe { sys::virNetworkDHCPLeaseFree(lease) };
    }
    if !leases.is_null() {
        // SAFETY: the array itself was allocated by libvirt with malloc.
        unsafe { libc::free(leases.cast()) };
    }
    Ok(found)
}

/// # Safety
/// `pointer` is null or points to a NUL-terminated string.
unsafe fn text(pointer: *const std::os::raw::c_char) -> Option<String> {
    (!pointer.is_null()).then(|| {
        unsafe { CStr::from_ptr(pointer) }
            .to_string_lossy()
            .into_owned()
    })
}
