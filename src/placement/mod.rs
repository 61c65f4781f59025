//! Where a guest goes: observed capacities in, a decision or a reasoned refusal out. Pure.
