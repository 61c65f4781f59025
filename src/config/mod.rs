//! Reading an installation: where its files are, the fleet in `hypervisors.conf`, and the
//! recipes in `recipes.yaml` and `recipes.d/`, merged into one guest's settings.
//! Parsing is pure (text in, typed values or located errors out); only the loaders read files.
//!
//! The recipes side, in the order data flows:
//! - `yaml`: YAML into a tree that knows the file, line and column of every key and value;
//! - `recipes_file`: the shape of recipes.yaml and recipes.d/<fqdn>.yaml;
//! - `merge`: `_base` then the domain, deep, with the origin of every leaf kept;
//! - `global_schema`, `values`, `settings`: `_global` checked and typed (`static_addresses`:
//!   `ips` and `gateway` beside each other);
//! - `guest`: the merged [`guest::GuestConfig`]; `load`: the thin file-reading part;
//! - `changeme`: placeholders still waiting for a value;
//! - `convergence`: what a change of each setting costs a guest that is built;
//! - `site_graph`: which domain runs on which machine (`depends_on`), and in which order;
//! - `installation_id`: the installation's identity, made once, written into trog's tags.

pub mod bounded_read;
pub mod changeme;
pub mod convergence;
pub mod error;
pub mod global_schema;
pub mod guest;
pub mod hypervisors_conf;
pub mod installation_id;
pub mod load;
pub mod merge;
pub mod paths;
pub mod recipes_file;
pub mod settings;
pub mod site_graph;
pub mod static_addresses;
pub mod values;
pub mod yaml;
