//! How packages reach a kernel: the package strategy of a run's arm.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use strum::IntoEnumIterator;

use super::ImageName;

/// One arm of a run. `--strategy fat,dynamic` runs both arms on the same
/// tasks; `--image` is an alias kept for old command lines.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumIter,
    strum::IntoStaticStr,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Strategy {
    /// The fat image: the scientific stack pre-installed.
    Fat,
    /// The slim image plus installs on demand, mediated by retrace.
    Dynamic,
    /// The slim image and nothing else: the standard library only.
    Slim,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The image its kernels start from.
    pub fn image(self) -> ImageName {
        match self {
            Strategy::Fat => ImageName::Fat,
            Strategy::Dynamic | Strategy::Slim => ImageName::Slim,
        }
    }

    /// Whether kernels of this arm get packages installed on demand.
    pub fn installs(self) -> bool {
        self == Strategy::Dynamic
    }

    /// `fat`, `dynamic,fat`, … in the order given; repeats refused.
    pub fn parse_list(text: &str) -> Result<Vec<Strategy>, StrategyListError> {
        let mut list = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let s: Strategy = part.parse().map_err(StrategyListError::Unknown)?;
            if list.contains(&s) {
                return Err(StrategyListError::Twice {
                    strategy: s,
                    list: text.to_string(),
                });
            }
            list.push(s);
        }
        if list.is_empty() {
            return Err(StrategyListError::Empty);
        }
        Ok(list)
    }

    /// The comma-separated form `parse_list` reads back.
    pub fn join(list: &[Strategy]) -> String {
        list.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Why a `--strategy` list is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StrategyListError {
    #[error("{0}")]
    Unknown(String),
    #[error("strategy `{strategy}` is listed twice in `{list}`")]
    Twice { strategy: Strategy, list: String },
    #[error("no strategy given; expected e.g. `fat` or `fat,dynamic`")]
    Empty,
}

impl FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Strategy::iter()
            .find(|n| n.as_str() == wanted)
            .ok_or_else(|| format!("unknown strategy `{s}`; expected `fat`, `dynamic` or `slim`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_their_order_and_refuse_repeats() {
        assert_eq!(
            Strategy::parse_list("fat, dynamic").unwrap(),
            vec![Strategy::Fat, Strategy::Dynamic]
        );
        assert_eq!(Strategy::parse_list("slim").unwrap(), vec![Strategy::Slim]);
        assert!(Strategy::parse_list("fat,fat")
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(Strategy::parse_list("conda")
            .unwrap_err()
            .to_string()
            .contains("unknown"));
        assert!(Strategy::parse_list(" , ").is_err());
        assert_eq!(
            Strategy::join(&[Strategy::Dynamic, Strategy::Fat]),
            "dynamic,fat"
        );
        assert_eq!(Strategy::Dynamic.image(), ImageName::Slim);
    }
}
