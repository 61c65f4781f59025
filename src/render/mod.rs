//! Turning a guest's merged settings into bytes: cloud-init files, the Makefile, rendered files,
//! the payload archive, the seed ISO and the domain XML. Pure: no I/O, deterministic output.
pub mod files;
pub mod makefile;
pub mod templates;
