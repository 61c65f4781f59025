//! Converging a domain that has no guest of its own on the machine it runs on
//! (`workflow::machine_login` finds and logs into the machine): its converged digest read there,
//! the plan shown, and when the digest differs the payload finished in its state directory
//! ([`finish_at`]) and the digest recorded once its Makefile and tests passed. Nothing of libvirt.

use crate::diagnose::Failure;
use crate::guest::finish::{
    finish_at, record_converged_script, FinishPlace, DEFAULT_FINISH_TIMEOUT,
};
use crate::lock::{Locks, Subject};
use crate::machine::{Machine, MachineCommand};
use crate::model::names::DomainName;
use crate::provision::run::{GuestConverged, ProvisionOutput, ProvisionRequest};
use crate::provision::ConvergeReport;
use crate::secrets::PrivateKeyFile;
use crate::workflow::inputs::GuestInputs;
use crate::workflow::machine_login::{
    converged_digest, log_into_machine, machine_not_reached, state_dir_on_machine,
    steps_on_machine, HostError, KeepAdopted, MachineLogin,
};
use crate::workflow::progress::Progress;
use std::time::Instant;

/// A domain's plan on the machine it runs on, as shown before it is carried out.
pub struct PlannedOnMachine<'a> {
    pub guest: &'a DomainName,
    pub machine: &'a DomainName,
    /// Where on the machine the domain's payload and records are.
    pub state_dir: &'a str,
    /// What a provision does, in order; empty when converged.
    pub steps: &'a [String],
}

/// Converges `inputs`' domain on the machine `login` reaches: plans from its converged digest,
/// shows the plan, and (unless a dry run) finishes it there and records the digest. One run on
/// a machine at a time: the machine's guest lock is held here.
pub fn converge_on_machine(
    inputs: &GuestInputs,
    login: &MachineLogin,
    locks: &Locks,
    request: &ProvisionRequest,
    progress: &mut dyn Progress,
    output: &mut dyn ProvisionOutput,
) -> Result<GuestConverged, Failure> {
    let started = Instant::now();
    let domain = &inputs.config.domain;
    let state_dir = state_dir_on_machine(domain, &login.machine);
    let _machine_lock = if request.dry_run {
        None
    } else {
        Some(
            locks.acquire(&Subject::Guest(login.machine.to_string()), &mut |text| {
                progress.say(text)
            })?,
        )
    };
    let key = PrivateKeyFile::write(&login.keypair)?;
    let adopting = request.adopt_host_key && login.existing_host && !request.dry_run;
    let mut keep = |host_key: &str| {
        let mut store = inputs
            .store
            .lock()
            .map_err(|_| "the store's lock was poisoned".to_string())?;
        let store = store
            .as_mut()
            .ok_or_else(|| "this run did not unlock the secret store".to_string())?;
        crate::secrets::record_adopted_host_key(store, &login.machine, host_key)
            .map_err(|error| error.to_string())
    };
    let machine = log_into_machine(
        login,
        &key,
        adopting.then_some(&mut keep as &mut KeepAdopted<'_>),
        progress,
    )
    .map_err(|failure| machine_not_reached(inputs, &login.machine, failure))?;
    let digest = &inputs.generated.payload.sha256_hex;
    let converged = converged_digest(&machine, domain, login, &state_dir)?;
    let steps = steps_on_machine(converged.as_deref(), digest, &login.machine, &state_dir);
    output.planned_on_machine(&PlannedOnMachine {
        guest: domain,
        machine: &login.machine,
        state_dir: &state_dir,
        steps: &steps,
    });
    let changes = if steps.is_empty() {
        GuestConverged::Already
    } else {
        GuestConverged::Changed
    };
    if request.dry_run || steps.is_empty() {
        return Ok(changes);
    }
    progress.start(domain.as_str(), 1, 1, &steps[0]);
    let place = FinishPlace {
        state_dir: state_dir.clone(),
        wait_for_cloud_init: false,
    };
    let finished = {
        let mut on_log = |text: &str| progress.guest_output(text);
        finish_at(
            &machine,
            &place,
            &inputs.generated.payload.bytes,
            digest,
            DEFAULT_FINISH_TIMEOUT,
            &mut on_log,
        )
        .map_err(Failure::from)
        .and_then(|_| {
            machine
                .run(
                    &MachineCommand::shell(&record_converged_script(&state_dir, digest))
                        .as_root(true),
                )
                .and_then(|output| output.success())
                .map(|_| ())
                .map_err(|source| {
                    HostError::Record {
                        domain: domain.clone(),
                        machine: login.machine.clone(),
                        source,
                    }
                    .into()
                })
        })
    };
    let elapsed = progress.finish(finished.is_ok());
    finished?;
    let seconds = (elapsed.as_secs_f64() * 10.0).round() / 10.0;
    output.converged(&ConvergeReport {
        guest: domain.to_string(),
        hypervisor: format!("{}'s machine", login.machine),
        address: Some(machine.target().host.clone()),
        converged_already: false,
        steps: vec![(steps[0].clone(), seconds)],
        total_seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    Ok(GuestConverged::Changed)
}
