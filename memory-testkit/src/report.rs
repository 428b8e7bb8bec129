//! The outcome of a contract run: which rules passed, failed or were skipped.

use std::fmt;

/// One rule that a store broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractFailure {
    /// The rule's name (one of [`super::CONTRACT_RULES`] or [`super::TAMPER_RULES`]).
    pub rule: &'static str,
    /// What the store did instead.
    pub detail: String,
}

impl fmt::Display for ContractFailure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "rule `{}` broken: {}", self.rule, self.detail)
    }
}

/// The result of a contract run. It must be looked at: call [`ContractReport::assert_all_passed`] in a
/// test, or inspect [`ContractReport::failed`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "a contract run proves nothing until its report is checked"]
pub struct ContractReport {
    /// Rules the store kept.
    pub passed: Vec<&'static str>,
    /// Rules the store broke, with what it did instead.
    pub failed: Vec<ContractFailure>,
    /// Rules not run because the store offers no way to check them (the corrupt-receipt rules without a
    /// [`super::ReceiptTamper`]).
    pub skipped: Vec<&'static str>,
}

impl ContractReport {
    pub(crate) fn record(&mut self, rule: &'static str, result: Result<(), String>) {
        match result {
            Ok(()) => self.passed.push(rule),
            Err(detail) => self.failed.push(ContractFailure { rule, detail }),
        }
    }

    /// Appends another run's results to this one.
    pub(crate) fn absorb(&mut self, other: ContractReport) {
        self.passed.extend(other.passed);
        self.failed.extend(other.failed);
        self.skipped.extend(other.skipped);
    }

    /// Whether every rule that ran passed (and at least one ran).
    pub fn is_success(&self) -> bool {
        self.failed.is_empty() && !self.passed.is_empty()
    }

    /// The failure of `rule`, if it failed.
    pub fn failure(&self, rule: &str) -> Option<&ContractFailure> {
        self.failed.iter().find(|failure| failure.rule == rule)
    }

    /// Panics, naming every broken rule, unless [`ContractReport::is_success`].
    ///
    /// # Panics
    /// When a rule failed or no rule ran; this is how a test reports the failure.
    #[track_caller]
    pub fn assert_all_passed(&self) {
        assert!(self.is_success(), "store contract broken:\n{self}");
    }
}

impl fmt::Display for ContractReport {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            formatter,
            "{} rules passed, {} failed, {} skipped",
            self.passed.len(),
            self.failed.len(),
            self.skipped.len()
        )?;
        for failure in &self.failed {
            writeln!(formatter, "  {failure}")?;
        }
        for rule in &self.skipped {
            writeln!(formatter, "  rule `{rule}` skipped: no receipt tamper")?;
        }
        Ok(())
    }
}
