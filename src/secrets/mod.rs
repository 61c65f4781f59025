//! The secret store (KeePass KDBX4) and the guests' SSH key pairs kept in it.
