//! Integration tests of the artifact builders: what they build is read back with the tools a
//! person would use (`tar`, `xorriso`, `isoinfo`, `virt-xml-validate`), never by trog itself.

mod domain_xml;
mod oracle;
mod payload;
mod seed_iso;
