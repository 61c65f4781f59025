//! Recipes as data: manifests under `recipes/`, their argument schemas, what they require, and
//! the scaffold `new_guest` writes. Pure except for the loader that reads the folders.
