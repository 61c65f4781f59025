//! Reading an installation: where its files are, the fleet in `hypervisors.conf`, and the
//! recipes in `recipes.yaml` and `recipes.d/`, merged into one guest's settings.
//! Parsing is pure (text in, typed values or located errors out); only the loaders read files.

pub mod paths;
pub mod hypervisors_conf;
