//! Enums named by their variants' snake_case names (serde and strum): what
//! a name that names none of them is told.

use strum::IntoEnumIterator;

/// ``unknown <enum> `<name>`; expected one of a, b, c``: the enum's own
/// name in lower case (`verdict`), its variants in their declared order.
/// The `parse_err_fn` of strum's `EnumString`.
pub fn unknown<E: IntoEnumIterator + Into<&'static str>>(name: &str) -> String {
    let what = std::any::type_name::<E>()
        .rsplit("::")
        .next()
        .unwrap_or("value");
    let names: Vec<&str> = E::iter().map(Into::into).collect();
    let names = names.join(", ");
    format!(
        "unknown {} `{name}`; expected one of {names}",
        what.to_lowercase()
    )
}
