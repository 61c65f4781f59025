//! Recipes as data: manifests under `recipes/`, their argument schemas, what they require, and
//! the scaffold `new_guest` writes. Pure except for the loader that reads the folders.

pub mod args_schema;
pub mod knobs_table;
pub mod load;
pub mod manifest;
pub mod resolve;
pub mod scaffold;
pub mod search;

#[cfg(test)]
pub(crate) mod test_support;
