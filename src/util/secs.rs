//! A `Duration` in JSON as seconds (`"timeout": 30.0`): the one serde
//! adapter for every recorded duration (`#[serde(with = "crate::util::secs")]`).

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    super::units::duration_from_secs(f64::deserialize(d)?).map_err(serde::de::Error::custom)
}
