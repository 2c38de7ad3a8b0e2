//! Deliberate oracle bugs, one at a time, switched at run time: what the negative controls of
//! `scripts/mutants-switchable.sh` must catch (an oracle whose property always holds is a
//! harness that can never fail).
//!
//! Only a build with the `mutants` feature carries them; without it [`active`] is `None`
//! and the oracle is the one definition in `property.rs`. In such a build the `keel` binary
//! reads `KEEL_ORACLE_MUTANT` (and the engine's `KEEL_MUTANT`) once at start, in
//! [`install_from_env`], and says on stderr which one is active.

use super::Property;

/// One deliberate oracle bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OracleMutant {
    /// The property always holds.
    Off(Property),
    /// `recovers` looks at the recovery only, not at the final windows.
    RecoversIgnoresFinalWindows,
    /// A fault-free run never disagrees with the model.
    NoModelMismatch,
}

impl OracleMutant {
    /// Every oracle mutant, by name: `<property>-off`, `recovers-ignores-final-windows`,
    /// `no-model-mismatch`.
    pub fn all() -> Vec<(String, OracleMutant)> {
        let mut all: Vec<(String, OracleMutant)> = Property::ALL
            .into_iter()
            .map(|p| (format!("{}-off", p.name()), OracleMutant::Off(p)))
            .collect();
        all.push((
            "recovers-ignores-final-windows".to_string(),
            OracleMutant::RecoversIgnoresFinalWindows,
        ));
        all.push((
            "no-model-mismatch".to_string(),
            OracleMutant::NoModelMismatch,
        ));
        all
    }

    /// The mutant named `name`, or an error listing the names.
    pub fn parse(name: &str) -> Result<OracleMutant, String> {
        let all = OracleMutant::all();
        all.iter()
            .find(|(n, _)| n == name)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
                format!(
                    "unknown oracle mutant '{name}' (known: {})",
                    names.join(", ")
                )
            })
    }
}

#[cfg(feature = "mutants")]
static ACTIVE: std::sync::OnceLock<Option<OracleMutant>> = std::sync::OnceLock::new();

/// The active oracle mutant: always None without the `mutants` feature.
#[inline]
pub fn active() -> Option<OracleMutant> {
    #[cfg(feature = "mutants")]
    {
        ACTIVE.get().copied().flatten()
    }
    #[cfg(not(feature = "mutants"))]
    {
        None
    }
}

/// Reads `KEEL_MUTANT` and `KEEL_ORACLE_MUTANT` (a build with the `mutants` feature only)
/// and makes them active for the process; an unknown name is an error.
#[cfg(feature = "mutants")]
pub fn install_from_env() -> Result<(), String> {
    let engine = match std::env::var("KEEL_MUTANT") {
        Ok(name) if !name.is_empty() => Some(keel_engine::mutants::Mutant::parse(&name)?),
        _ => None,
    };
    let oracle = match std::env::var("KEEL_ORACLE_MUTANT") {
        Ok(name) if !name.is_empty() => Some(OracleMutant::parse(&name)?),
        _ => None,
    };
    keel_engine::mutants::set(engine);
    ACTIVE
        .set(oracle)
        .map_err(|_| "the oracle mutant is set once".to_string())?;
    if let Some(mutant) = engine {
        eprintln!("keel: engine mutant {} active", mutant.name());
    }
    if oracle.is_some() {
        eprintln!(
            "keel: oracle mutant {} active",
            std::env::var("KEEL_ORACLE_MUTANT").unwrap_or_default()
        );
    }
    Ok(())
}
