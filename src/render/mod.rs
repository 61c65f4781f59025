//! Turning a guest's merged settings into bytes: cloud-init files, the Makefile, rendered files,
//! the payload archive, the seed ISO and the domain XML. Pure: no I/O, deterministic output.

pub mod cloud_init;
pub mod domain_xml;
pub mod extra_disks;
pub mod files;
pub mod fingerprint;
pub mod machine_definition;
pub mod makefile;
pub mod network_filter;
pub mod payload;
pub mod quote;
pub mod seed_iso;
pub mod shared_folders;
pub mod templates;
pub mod xml_text;
