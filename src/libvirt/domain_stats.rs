//! Every defined guest's state, maximum memory and maximum vCPUs in one call
//! (`virConnectGetAllDomainStats`), instead of three questions per guest. Over a WAN each question
//! is a round trip, so observing a hypervisor costs the same whatever number of guests it holds.
//!
//! The `virt` crate exposes the call's records as raw pointers only, so the records are read and
//! freed here; turning their typed parameters into a [`DefinedGuest`] is plain data.

use crate::model::units::MiB;
use crate::placement::observed::DefinedGuest;
use std::ffi::CStr;
use virt::connect::Connect;
use virt::sys;

/// One typed parameter of a stats record, as far as observation needs it.
#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    Int(i64),
    Unsigned(u64),
    Other,
}

/// The statistics libvirt gave for one guest: its name and its `field = value` parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestStats {
    pub name: String,
    pub fields: Vec<(String, StatValue)>,
}

impl GuestStats {
    fn unsigned(&self, field: &str) -> Option<u64> {
        self.fields
            .iter()
            .find(|(name, _)| name == field)
            .and_then(|(_, value)| match value {
                StatValue::Unsigned(value) => Some(*value),
                StatValue::Int(value) => u64::try_from(*value).ok(),
                StatValue::Other => None,
            })
    }

    /// What placement needs of the guest, when libvirt reported all of it.
    pub fn defined_guest(&self) -> Option<DefinedGuest> {
        // `balloon.maximum` is the guest's maximum memory in KiB, `vcpu.maximum` the vCPUs it may
        // hot-plug up to, `state.state` a virDomainState (1 running, 2 blocked, 3 paused, …).
        let max_memory_kib = self.unsigned("balloon.maximum")?;
        let max_vcpus = self.unsigned("vcpu.maximum")?;
        let state = self.unsigned("state.state")?;
        Some(DefinedGuest {
            name: self.name.clone(),
            max_memory: MiB::from_kib(max_memory_kib),
            max_vcpus: u32::try_from(max_vcpus).ok()?,
            running: is_active_state(state),
        })
    }
}

/// Whether a `virDomainState` is one where the guest has a QEMU process (what `is_active` says):
/// everything but shut off (5) and "no state" (0).
fn is_active_state(state: u64) -> bool {
    !matches!(
        u32::try_from(state).unwrap_or(0),
        sys::VIR_DOMAIN_NOSTATE | sys::VIR_DOMAIN_SHUTOFF
    )
}

/// Asks libvirt for the state, balloon and vCPU statistics of every defined guest at once.
pub fn all_guest_stats(connection: &Connect) -> Result<Vec<GuestStats>, virt::error::Error> {
    let stats =
        sys::VIR_DOMAIN_STATS_STATE | sys::VIR_DOMAIN_STATS_BALLOON | sys::VIR_DOMAIN_STATS_VCPU;
    let mut records: *mut sys::virDomainStatsRecordPtr = std::ptr::null_mut();
    // SAFETY: the connection pointer is valid for the call; libvirt allocates `records`, which is
    // read below and freed with the list-free function libvirt documents for it.
    let count =
        unsafe { sys::virConnectGetAllDomainStats(connection.as_ptr(), stats, &mut records, 0) };
    if count < 0 {
        return Err(virt::error::Error::last_error());
    }
    let mut guests = Vec::with_capacity(count as usize);
    for index in 0..count as usize {
        // SAFETY: libvirt returned `count` valid record pointers.
        let record = unsafe { &**records.add(index) };
        // SAFETY: the record's domain is valid until the list is freed; the name is a C string
        // libvirt owns (no round trip: a domain object carries its name).
        let name = unsafe { CStr::from_ptr(sys::virDomainGetName(record.dom)) }
            .to_string_lossy()
            .into_owned();
        let mut fields = Vec::with_capacity(record.nparams.max(0) as usize);
        for param_index in 0..record.nparams.max(0) as usize {
            // SAFETY: `params` holds `nparams` typed parameters.
            let param = unsafe { &*record.params.add(param_index) };
            // SAFETY: `field` is a NUL-terminated name within its fixed-size array.
            let field = unsafe { CStr::from_ptr(param.field.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: the union member read is the one `type_` names.
            let value = unsafe {
                match param.type_ as u32 {
                    sys::VIR_TYPED_PARAM_INT => StatValue::Int(i64::from(param.value.i)),
                    sys::VIR_TYPED_PARAM_UINT => StatValue::Unsigned(u64::from(param.value.ui)),
                    sys::VIR_TYPED_PARAM_LLONG => StatValue::Int(param.value.l),
                    sys::VIR_TYPED_PARAM_ULLONG => StatValue::Unsigned(param.value.ul),
                    _ => StatValue::Other,
                }
            };
            fields.push((field, value));
        }
        guests.push(GuestStats { name, fields });
    }
    // SAFETY: `records` came from virConnectGetAllDomainStats and is freed once, here.
    unsafe { sys::virDomainStatsRecordListFree(records) };
    Ok(guests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(fields: &[(&str, StatValue)]) -> GuestStats {
        GuestStats {
            name: "www.example.test".into(),
            fields: fields
                .iter()
                .map(|(name, value)| (name.to_string(), value.clone()))
                .collect(),
        }
    }

    #[test]
    fn a_complete_record_is_a_defined_guest() {
        let guest = stats(&[
            ("state.state", StatValue::Int(1)),
            ("state.reason", StatValue::Int(1)),
            ("balloon.current", StatValue::Unsigned(1_048_576)),
            ("balloon.maximum", StatValue::Unsigned(2_097_152)),
            ("vcpu.current", StatValue::Unsigned(1)),
            ("vcpu.maximum", StatValue::Unsigned(4)),
        ])
        .defined_guest()
        .unwrap();
        assert_eq!(guest.max_memory, MiB(2048));
        assert_eq!(guest.max_vcpus, 4);
        assert!(guest.running);
    }

    #[test]
    fn shut_off_and_paused_guests_are_told_apart() {
        let with_state = |state| {
            stats(&[
                ("state.state", StatValue::Int(state)),
                ("balloon.maximum", StatValue::Unsigned(1024)),
                ("vcpu.maximum", StatValue::Unsigned(1)),
            ])
            .defined_guest()
            .unwrap()
            .running
        };
        assert!(!with_state(5), "shut off");
        assert!(with_state(3), "paused still holds its QEMU process");
    }

    #[test]
    fn a_record_missing_a_figure_is_not_guessed() {
        assert_eq!(
            stats(&[("state.state", StatValue::Int(5))]).defined_guest(),
            None
        );
    }
}
